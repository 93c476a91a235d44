//! The packed state word: state, backoff level, generation and a timestamp in one
//! `u64`, changed only by compare-and-swap through [`StateWord::transition`].
//!
//! ```text
//!  63                                25 24            9 8       3 2     0
//! +------------------------------------+---------------+---------+-------+
//! |           ticks (39 bits)          | generation 16 | level 6 | state |
//! +------------------------------------+---------------+---------+-------+
//! ```
//!
//! | field      | bits | meaning                                                         |
//! |------------|------|-----------------------------------------------------------------|
//! | state      | 3    | [`State`]: Closed 0, Open 1, HalfOpen 2, ForcedOpen 3, Disabled 4 |
//! | level      | 6    | backoff level: the next reopening waits `open_duration * m^level` |
//! | generation | 16   | bumped (wrapping) by every transition                           |
//! | ticks      | 39   | milliseconds since the breaker was built: Open: the deadline (opened-at plus the cooldown of the word's level and generation); HalfOpen: the round's start; otherwise the time of the last transition |
//!
//! A tick is one millisecond. 39 bits of ticks hold 17.4 years of breaker uptime;
//! later readings saturate at [`TICKS_MAX`] (they never wrap). A breaker that
//! outlives that keeps working, except that a cooldown starting within one cooldown
//! of saturation ends at the saturated tick, and ones starting later end at once.
//!
//! Two more words carry the data of one phase, each tagged with the generation it
//! belongs to, so no interleaving can pair a state with another state's data:
//! [`Round`] (the half-open probe round) and [`Streak`] (the consecutive-failure count).
//!
//! # Orderings
//! Transitions are `AcqRel` compare-and-swaps: the Release half publishes whatever
//! the transitioning thread wrote before (a fresh round, a reset streak), and the
//! Acquire half of a failed CAS hands the loop the newest word. Loads of the word are
//! `Acquire` so a thread that sees a generation also sees the phase data written
//! before the CAS that made it.

use crate::sync::{AtomicU64, Ordering};
use std::fmt;

/// What a breaker is doing.
///
/// # Examples
/// ```
/// use cutout::{CircuitBreaker, State};
///
/// let breaker = CircuitBreaker::builder().build()?;
/// assert_eq!(breaker.state(), State::Closed);
/// breaker.force_open();
/// assert_eq!(breaker.state(), State::ForcedOpen);
/// # Ok::<(), cutout::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum State {
    /// Calls go through; outcomes are counted against the trip policies.
    Closed,
    /// Calls are rejected until the cooldown ends; the first call after it moves the
    /// breaker to `HalfOpen`.
    Open,
    /// A fixed number of probe calls is admitted; their verdict closes or reopens.
    HalfOpen,
    /// Opened by hand with [`force_open`](crate::CircuitBreaker::force_open): every
    /// call is rejected until [`reset`](crate::CircuitBreaker::reset).
    ForcedOpen,
    /// Switched off by hand with [`disable`](crate::CircuitBreaker::disable): every
    /// call is admitted and nothing trips until [`reset`](crate::CircuitBreaker::reset).
    Disabled,
}

impl State {
    pub(crate) const fn code(self) -> u64 {
        match self {
            State::Closed => 0,
            State::Open => 1,
            State::HalfOpen => 2,
            State::ForcedOpen => 3,
            State::Disabled => 4,
        }
    }

    pub(crate) const fn from_code(code: u64) -> State {
        match code {
            0 => State::Closed,
            1 => State::Open,
            2 => State::HalfOpen,
            3 => State::ForcedOpen,
            // Only `Snapshot::pack` writes this field, and only from a `State`.
            _ => State::Disabled,
        }
    }

    /// The lower-case name used in logs and metrics labels: `"closed"`, `"open"`,
    /// `"half_open"`, `"forced_open"` or `"disabled"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            State::Closed => "closed",
            State::Open => "open",
            State::HalfOpen => "half_open",
            State::ForcedOpen => "forced_open",
            State::Disabled => "disabled",
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

const STATE_BITS: u32 = 3;
const LEVEL_BITS: u32 = 6;
const GEN_BITS: u32 = 16;
const TICKS_BITS: u32 = 39;
const _: () = assert!(STATE_BITS + LEVEL_BITS + GEN_BITS + TICKS_BITS == 64);

const LEVEL_SHIFT: u32 = STATE_BITS;
const GEN_SHIFT: u32 = LEVEL_SHIFT + LEVEL_BITS;
const TICKS_SHIFT: u32 = GEN_SHIFT + GEN_BITS;

const fn mask(bits: u32) -> u64 {
    (1 << bits) - 1
}

/// The largest backoff level the word can hold.
pub(crate) const LEVEL_MAX: u8 = mask(LEVEL_BITS) as u8;
/// The largest tick the word can hold; clock readings beyond it saturate here.
pub(crate) const TICKS_MAX: u64 = mask(TICKS_BITS);
/// Nanoseconds in one tick.
pub(crate) const NANOS_PER_TICK: u64 = 1_000_000;

/// Whole ticks in `nanos`, saturated at [`TICKS_MAX`].
#[inline]
pub(crate) const fn ticks_from_nanos(nanos: u64) -> u64 {
    let ticks = nanos / NANOS_PER_TICK;
    if ticks > TICKS_MAX { TICKS_MAX } else { ticks }
}

/// Whole ticks in `d`, or `None` if it is beyond [`TICKS_MAX`].
pub(crate) fn ticks_from_duration(d: std::time::Duration) -> Option<u64> {
    let ticks = d.as_millis();
    (ticks <= u128::from(TICKS_MAX)).then_some(ticks as u64)
}

/// A decoded copy of the state word.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Snapshot(u64);

impl Snapshot {
    /// Closed, generation 0, level 0, at tick 0: a new breaker.
    pub(crate) const INITIAL: Snapshot = Snapshot(0);

    fn pack(state: State, level: u8, generation: u16, ticks: u64) -> Snapshot {
        debug_assert!(level <= LEVEL_MAX, "level {level} does not fit");
        debug_assert!(ticks <= TICKS_MAX, "tick {ticks} does not fit");
        Snapshot(
            state.code()
                | u64::from(level) << LEVEL_SHIFT
                | u64::from(generation) << GEN_SHIFT
                | ticks << TICKS_SHIFT,
        )
    }

    /// A closed phase's word, as the window's tests and loom models name one.
    #[cfg(any(test, cutout_loom))]
    pub(crate) fn closed(generation: u16) -> Snapshot {
        Snapshot::pack(State::Closed, 0, generation, 0)
    }

    /// The word itself: equal words are one phase.
    #[inline]
    pub(crate) fn raw(self) -> u64 {
        self.0
    }

    #[inline]
    pub(crate) fn state(self) -> State {
        State::from_code(self.0 & mask(STATE_BITS))
    }

    #[inline]
    pub(crate) fn is_closed(self) -> bool {
        self.is(State::Closed)
    }

    /// Whether the state is `state` (cheaper than decoding with [`Snapshot::state`]).
    #[inline]
    pub(crate) fn is(self, state: State) -> bool {
        self.0 & mask(STATE_BITS) == state.code()
    }

    #[inline]
    pub(crate) fn level(self) -> u8 {
        (self.0 >> LEVEL_SHIFT & mask(LEVEL_BITS)) as u8
    }

    #[inline]
    pub(crate) fn generation(self) -> u16 {
        (self.0 >> GEN_SHIFT & mask(GEN_BITS)) as u16
    }

    /// Open: its deadline, when a call may half-open it (opened-at plus the
    /// cooldown; see `CircuitBreaker::opened`). HalfOpen: when the round started.
    /// Otherwise: when the last transition happened.
    #[inline]
    pub(crate) fn ticks(self) -> u64 {
        self.0 >> TICKS_SHIFT
    }

    /// The word after a transition to `state` at `ticks` with backoff `level`: the
    /// generation moves on by one (wrapping).
    pub(crate) fn next(self, state: State, level: u8, ticks: u64) -> Snapshot {
        Snapshot::pack(state, level, self.generation().wrapping_add(1), ticks)
    }
}

impl fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Snapshot")
            .field("state", &self.state())
            .field("generation", &self.generation())
            .field("level", &self.level())
            .field("ticks", &self.ticks())
            .finish()
    }
}

/// What [`StateWord::transition`] did.
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Update {
    /// This thread's CAS replaced `from` with `to`.
    Moved { from: Snapshot, to: Snapshot },
    /// The closure declined the word it was shown, which is returned.
    Declined(Snapshot),
}

/// The atomic state word.
pub(crate) struct StateWord(AtomicU64);

impl StateWord {
    pub(crate) fn new() -> StateWord {
        StateWord(AtomicU64::new(Snapshot::INITIAL.0))
    }

    #[inline]
    pub(crate) fn load(&self) -> Snapshot {
        // Acquire: pairs with the Release of the CAS that wrote this word, so the
        // phase data it publishes (round, streak) is visible with it.
        Snapshot(self.0.load(Ordering::Acquire))
    }

    /// The only way the word changes: offer `f` the current word (starting from
    /// `seen`) until it declines or this thread's CAS installs its answer.
    pub(crate) fn transition(
        &self,
        mut seen: Snapshot,
        mut f: impl FnMut(Snapshot) -> Option<Snapshot>,
    ) -> Update {
        loop {
            let Some(next) = f(seen) else {
                return Update::Declined(seen);
            };
            // AcqRel: Release publishes what this thread wrote before the transition;
            // Acquire (also on failure) hands the loop the newest word and its data.
            match self
                .0
                .compare_exchange(seen.0, next.0, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    return Update::Moved {
                        from: seen,
                        to: next,
                    };
                }
                Err(actual) => seen = Snapshot(actual),
            }
        }
    }
}

/// A word of phase data tagged with the generation it belongs to: the upper 16 bits
/// are the generation, the lower 48 hold the data. Data whose tag is not the current
/// generation is from a finished phase and reads as empty.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Tagged(u64);

const DATA_BITS: u32 = 64 - GEN_BITS;
const HALF_BITS: u32 = DATA_BITS / 2;

impl Tagged {
    pub(crate) const EMPTY: Tagged = Tagged(0);

    #[inline]
    pub(crate) fn from_raw(raw: u64) -> Tagged {
        Tagged(raw)
    }

    #[inline]
    pub(crate) fn raw(self) -> u64 {
        self.0
    }

    #[inline]
    pub(crate) fn generation(self) -> u16 {
        (self.0 >> DATA_BITS) as u16
    }

    /// The data if it belongs to `generation`, else `0` (a finished phase's data).
    #[inline]
    pub(crate) fn data_for(self, generation: u16) -> u64 {
        if self.generation() == generation {
            self.0 & mask(DATA_BITS)
        } else {
            0
        }
    }

    /// Whether the data is 0, whatever the generation: empty for every phase.
    #[inline]
    pub(crate) fn is_empty(self) -> bool {
        self.0 & mask(DATA_BITS) == 0
    }

    #[inline]
    pub(crate) fn new(generation: u16, data: u64) -> Tagged {
        debug_assert!(data <= mask(DATA_BITS), "data {data} does not fit");
        Tagged(u64::from(generation) << DATA_BITS | data & mask(DATA_BITS))
    }

    /// Splits tagged data into two 24-bit halves (the half-open round's
    /// `(issued, succeeded)`).
    #[inline]
    pub(crate) fn halves(data: u64) -> (u64, u64) {
        (data >> HALF_BITS, data & mask(HALF_BITS))
    }

    #[inline]
    pub(crate) fn join(high: u64, low: u64) -> u64 {
        debug_assert!(high <= mask(HALF_BITS) && low <= mask(HALF_BITS));
        high << HALF_BITS | low
    }
}

/// The largest count one half of a [`Tagged`] word can hold; it bounds
/// `half_open_probes`.
pub(crate) const HALF_MAX: u64 = mask(HALF_BITS);
/// The largest count a whole [`Tagged`] word can hold; the consecutive-failure count
/// saturates here.
pub(crate) const DATA_MAX: u64 = mask(DATA_BITS);

#[cfg(all(test, not(cutout_loom)))]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn any_state() -> impl Strategy<Value = State> {
        prop_oneof![
            Just(State::Closed),
            Just(State::Open),
            Just(State::HalfOpen),
            Just(State::ForcedOpen),
            Just(State::Disabled),
        ]
    }

    proptest! {
        #[test]
        fn pack_then_unpack_returns_every_field(
            state in any_state(),
            level in 0..=LEVEL_MAX,
            generation in any::<u16>(),
            ticks in 0..=TICKS_MAX,
        ) {
            let s = Snapshot::pack(state, level, generation, ticks);
            prop_assert_eq!(s.state(), state);
            prop_assert_eq!(s.is_closed(), state == State::Closed);
            prop_assert_eq!(s.level(), level);
            prop_assert_eq!(s.generation(), generation);
            prop_assert_eq!(s.ticks(), ticks);
        }

        #[test]
        fn tagged_round_trips(generation in any::<u16>(), high in 0..=HALF_MAX, low in 0..=HALF_MAX) {
            let t = Tagged::new(generation, Tagged::join(high, low));
            prop_assert_eq!(t.generation(), generation);
            prop_assert_eq!(Tagged::halves(t.data_for(generation)), (high, low));
            prop_assert_eq!(t.data_for(generation.wrapping_add(1)), 0);
        }
    }

    #[test]
    fn next_bumps_the_generation_and_wraps() {
        let s = Snapshot::pack(State::Open, 3, u16::MAX, 42);
        let n = s.next(State::HalfOpen, 3, 50);
        assert_eq!(n.generation(), 0);
        assert_eq!((n.state(), n.level(), n.ticks()), (State::HalfOpen, 3, 50));
    }

    #[test]
    fn ticks_saturate_instead_of_wrapping() {
        assert_eq!(ticks_from_nanos(u64::MAX), TICKS_MAX);
        assert_eq!(ticks_from_nanos(2_500_000), 2);
        assert_eq!(
            ticks_from_duration(std::time::Duration::from_secs(u64::MAX)),
            None
        );
    }

    #[test]
    fn a_declining_closure_leaves_the_word_alone() {
        let word = StateWord::new();
        let seen = word.load();
        assert_eq!(word.transition(seen, |_| None), Update::Declined(seen));
        let Update::Moved { from, to } = word.transition(seen, |s| Some(s.next(State::Open, 0, 7)))
        else {
            panic!("the CAS on an unchanged word must succeed");
        };
        assert_eq!((from, to.state(), word.load()), (seen, State::Open, to));
    }

    #[test]
    fn debug_prints_decoded_fields() {
        let s = Snapshot::pack(State::HalfOpen, 1, 9, 3);
        assert_eq!(
            format!("{s:?}"),
            "Snapshot { state: HalfOpen, generation: 9, level: 1, ticks: 3 }"
        );
    }
}
