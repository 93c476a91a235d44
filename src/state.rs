//! The packed state word: state, backoff level and generation in one `u64`, changed
//! only by compare-and-swap through [`StateWord::transition`]; the time of each
//! phase beside it, in a [`TimeSlot`] tagged with the phase it belongs to; and the
//! generation-tagged words that carry one phase's data ([`TaggedWord`]).
//!
//! ```text
//!  63                   41 40                          9 8       3 2     0
//! +-----------------------+-----------------------------+---------+-------+
//! |     cycles (23)       |       generation (32)       | level 6 | state |
//! +-----------------------+-----------------------------+---------+-------+
//! ```
//!
//! | field      | bits | meaning                                                         |
//! |------------|------|-----------------------------------------------------------------|
//! | state      | 3    | [`State`]: Closed 0, Open 1, HalfOpen 2, ForcedOpen 3, Disabled 4, Recovering 5 |
//! | level      | 6    | backoff level: an Open phase waits `open_duration * m^level`     |
//! | generation | 32   | bumped (wrapping) by every transition ([`GEN_BITS`])             |
//! | cycles     | 23   | bumped (wrapping) each time the generation wraps                 |
//!
//! Every transition moves the generation on, so a phase has exactly one word: two
//! loads that return the same word saw the same phase (for 2^55 transitions: the
//! generation and its cycles count them together). Everything tagged with a phase
//! outside the word (its start, the round, the streak, the window's buckets)
//! carries the generation, or its low bits, and nothing more; only what compares
//! whole words, or caches a [`PhaseKey`], sees the cycles. So a thread's cached
//! Open deadline, kept beside the word it was rejected by, is never taken for a
//! later phase's a whole generation cycle on (that thread was rejected until the
//! old phase's deadline: for ever after an `open_for(Duration::MAX)`).
//!
//! # Orderings
//! Everything a phase owns is inside the state word or tagged with its generation
//! (its start, the round, the streak, the window's buckets), so a reader pairs data
//! with a phase by its tag, never by the order of two loads. One thing is published
//! *through* the word: the claimed start of its phase. The word's CAS is `AcqRel`
//! and its loads `Acquire`, so a thread that loads a word also sees the claim made
//! before the CAS that wrote it (on x86-64 neither costs anything: a load is a plain
//! `mov`, a CAS a `lock cmpxchg` whatever the ordering).
//!
//! The tagged words' orderings carry weight too. Their CAS is `AcqRel` and their
//! loads `Acquire`: a thread that loads a tagged word written by a later phase,
//! then loads the state word, sees that later phase or a newer one, because the
//! writer loaded the state word before its `Release` CAS. That is what lets the
//! tagged-word rule tell "an earlier phase's data" from "I am stale"; with a
//! `Relaxed` round word a stale thread can overwrite a later round and admit one
//! probe too many (`loom-tests/tests/two_rounds.rs` shows it).

use crate::sync::{AtomicU64, Ordering};
use std::fmt;

mod tagged;
mod time_slot;

pub(crate) use tagged::{HALF_MAX, Round, TagUpdate, TaggedWord};
use time_slot::SLOT_TICKS_BITS;
pub(crate) use time_slot::TimeSlot;

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
    /// Closing gradually after a successful half-open round, with
    /// [`ramp_up`](crate::Builder::ramp_up) on: a share of the calls, rising from
    /// 10% to 100% over the ramp's duration, is admitted and counted against the
    /// trip policies; the rest are rejected. A trip reopens the breaker; the end of
    /// the ramp closes it.
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, ManualClock, State};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let breaker = CircuitBreaker::builder()
    ///     .consecutive_failures(1)
    ///     .ramp_up(Duration::from_secs(10))
    ///     .clock(clock.clone())
    ///     .build()?;
    /// let _ = breaker.call(|| Err::<(), _>("down"));
    /// clock.advance(Duration::from_secs(1)); // the cooldown
    /// let _ = breaker.call(|| Ok::<_, ()>("probe"));
    /// assert_eq!(breaker.state(), State::Recovering);
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    Recovering,
}

impl State {
    pub(crate) const fn code(self) -> u64 {
        match self {
            State::Closed => 0,
            State::Open => 1,
            State::HalfOpen => 2,
            State::ForcedOpen => 3,
            State::Disabled => 4,
            State::Recovering => 5,
        }
    }

    pub(crate) const fn from_code(code: u64) -> State {
        match code {
            0 => State::Closed,
            1 => State::Open,
            2 => State::HalfOpen,
            3 => State::ForcedOpen,
            5 => State::Recovering,
            // Only `Snapshot::pack` writes this field, and only from a `State`.
            _ => State::Disabled,
        }
    }

    /// The lower-case name used in logs and metrics labels: `"closed"`, `"open"`,
    /// `"half_open"`, `"forced_open"`, `"disabled"` or `"recovering"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            State::Closed => "closed",
            State::Open => "open",
            State::HalfOpen => "half_open",
            State::ForcedOpen => "forced_open",
            State::Disabled => "disabled",
            State::Recovering => "recovering",
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A generation: which phase of the breaker's life a word, a permit or a bucket
/// belongs to. [`GEN_BITS`] wide, wrapping.
pub(crate) type Generation = u32;

/// The generation's width: 32 bits. Under `--cfg cutout_tiny_generations` (tests
/// only, like sharded-slab's `TinyConfig`) it is 3 bits, so that the model-based
/// tests, the soak and the loom models cross the wrap many times per run.
#[cfg(not(cutout_tiny_generations))]
pub(crate) const GEN_BITS: u32 = 32;
/// The generation's width: 3 bits under `--cfg cutout_tiny_generations`.
#[cfg(cutout_tiny_generations)]
pub(crate) const GEN_BITS: u32 = 3;

const STATE_BITS: u32 = 3;
const LEVEL_BITS: u32 = 6;
const WORD_GEN_BITS: u32 = 32;
const CYCLE_BITS: u32 = 23;
const _: () = assert!(STATE_BITS + LEVEL_BITS + WORD_GEN_BITS + CYCLE_BITS == 64);
const _: () = assert!(GEN_BITS <= WORD_GEN_BITS);

const LEVEL_SHIFT: u32 = STATE_BITS;
const GEN_SHIFT: u32 = LEVEL_SHIFT + LEVEL_BITS;
const CYCLE_SHIFT: u32 = GEN_SHIFT + WORD_GEN_BITS;
// The fields follow one another up to the word's top bit.
const _: () = assert!(CYCLE_SHIFT + CYCLE_BITS == 64);

const fn mask(bits: u32) -> u64 {
    if bits == 64 {
        u64::MAX
    } else {
        (1 << bits) - 1
    }
}

/// The generation mask: a generation is always `<= GEN_MASK`.
pub(crate) const GEN_MASK: Generation = mask(GEN_BITS) as Generation;

/// The generation after `g`, wrapping at [`GEN_BITS`].
#[inline]
pub(crate) const fn next_generation(g: Generation) -> Generation {
    g.wrapping_add(1) & GEN_MASK
}

/// The largest backoff level the word can hold.
pub(crate) const LEVEL_MAX: u8 = mask(LEVEL_BITS) as u8;
/// The largest tick: `u64::MAX` nanoseconds (584 years) in milliseconds, so that a
/// tick's nanoseconds always fit a `u64`. No clock reading goes past it; a deadline
/// that would is saturated here, and a clock saturated at `u64::MAX` reaches it.
pub(crate) const TICKS_MAX: u64 = u64::MAX / NANOS_PER_TICK;
const _: () = assert!(TICKS_MAX <= mask(SLOT_TICKS_BITS));
/// Nanoseconds in one tick.
pub(crate) const NANOS_PER_TICK: u64 = 1_000_000;

/// Whole ticks in `nanos` (never beyond [`TICKS_MAX`]).
#[inline]
pub(crate) const fn ticks_from_nanos(nanos: u64) -> u64 {
    nanos / NANOS_PER_TICK
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
    /// Closed, generation 0, level 0: a new breaker.
    pub(crate) const INITIAL: Snapshot = Snapshot(0);

    /// A word no breaker holds (its state field is a code no `State` packs): the
    /// phase of a shadow breaker's would-be rejection's ticket, which no outcome
    /// may count in (see `Ticket::shadow`).
    pub(crate) const SHADOW: Snapshot = Snapshot(mask(STATE_BITS));

    fn pack(state: State, level: u8, generation: Generation) -> Snapshot {
        debug_assert!(level <= LEVEL_MAX, "level {level} does not fit");
        debug_assert!(
            u64::from(generation) <= mask(GEN_BITS),
            "generation {generation} does not fit"
        );
        Snapshot(
            state.code() | u64::from(level) << LEVEL_SHIFT | u64::from(generation) << GEN_SHIFT,
        )
    }

    /// The first word of a restored breaker (see `Builder::restore`): `state` at
    /// backoff `level`, generation 0, as a new breaker's.
    pub(crate) fn starting(state: State, level: u8) -> Snapshot {
        Snapshot::pack(state, level.min(LEVEL_MAX), 0)
    }

    /// A closed phase's word, as the window's tests and loom models name one.
    #[cfg(any(test, cutout_loom))]
    pub(crate) fn closed(generation: Generation) -> Snapshot {
        Snapshot::pack(State::Closed, 0, generation & GEN_MASK)
    }

    /// An opaque key for the phase: equal keys are one phase (for 2^55
    /// transitions: the cycles are in it). What an owner caches beside its live bucket and its Open
    /// deadline (see [`PhaseKey`]).
    #[inline]
    pub(crate) fn key(self) -> PhaseKey {
        PhaseKey(self.0)
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
    pub(crate) fn generation(self) -> Generation {
        (self.0 >> GEN_SHIFT & mask(WORD_GEN_BITS)) as Generation
    }

    /// The word after a transition to `state` with backoff `level`: the generation
    /// moves on by one (wrapping), and its cycles by one when it wraps.
    pub(crate) fn next(self, state: State, level: u8) -> Snapshot {
        let generation = next_generation(self.generation());
        let cycles = self.cycles().wrapping_add(u64::from(generation == 0)) & mask(CYCLE_BITS);
        Snapshot(Snapshot::pack(state, level, generation).0 | cycles << CYCLE_SHIFT)
    }

    /// How many times the generation has wrapped (wrapping at 2^23).
    #[inline]
    fn cycles(self) -> u64 {
        self.0 >> CYCLE_SHIFT
    }
}

impl fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Snapshot")
            .field("state", &self.state())
            .field("generation", &self.generation())
            .field("level", &self.level())
            .field("cycles", &self.cycles())
            .finish()
    }
}

/// A phase's key, as a thread stores it in a word of its own stripe to remember
/// which phase a cache of its belongs to. Its bits mean nothing outside this
/// module: they are only stored, loaded and compared ([`PhaseKey::is`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct PhaseKey(u64);

impl PhaseKey {
    /// The key as a word to store.
    #[inline]
    pub(crate) fn to_bits(self) -> u64 {
        self.0
    }

    /// Whether `bits`, a stored key, is this one.
    #[inline]
    pub(crate) fn is(self, bits: u64) -> bool {
        self.0 == bits
    }
}

/// What [`StateWord::transition`] did.
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Update {
    /// This thread's CAS replaced `from` with `to`, which started at `start`.
    Moved {
        from: Snapshot,
        to: Snapshot,
        start: u64,
    },
    /// The closure declined the word it was shown, which is returned.
    Declined(Snapshot),
}

/// The atomic state word.
pub(crate) struct StateWord(AtomicU64);

impl StateWord {
    pub(crate) fn new() -> StateWord {
        StateWord(AtomicU64::new(Snapshot::INITIAL.0))
    }

    /// A word holding `s` (a restored breaker's first word, tests and models).
    pub(crate) fn at(s: Snapshot) -> StateWord {
        StateWord(AtomicU64::new(s.0))
    }

    #[inline]
    pub(crate) fn load(&self) -> Snapshot {
        // Acquire: pairs with the Release of the transition's CAS, so a thread that
        // sees a word also sees its phase's claimed start (`TimeSlot::start_of`) and
        // the tagged words' rule holds (the module's Orderings). Relied on: without
        // it `start_of` could miss the claim and take the current phase for over.
        Snapshot(self.0.load(Ordering::Acquire))
    }

    /// The only way the word changes: offer `f` the current word (starting from
    /// `seen`) until it declines or this thread's CAS installs its answer: the next
    /// word and the time it starts at: a clock reading, or `fixed`, worked out
    /// (`open_for`'s: the start that puts its deadline where it was asked). The
    /// start is claimed in `slot` first (see [`TimeSlot`]): the first candidate's
    /// reading for this transition is every candidate's (one worked out for a
    /// deadline is waited out, see [`transition_claiming`](Self::transition_claiming)),
    /// so `Moved` reports the start the new phase has.
    pub(crate) fn transition(
        &self,
        slot: &TimeSlot,
        seen: Snapshot,
        fixed: bool,
        f: impl FnMut(Snapshot) -> Option<(Snapshot, u64)>,
    ) -> Update {
        self.transition_claiming(slot, seen, fixed, PATIENCE, f)
    }

    /// [`transition`](Self::transition), waiting for another candidate's CAS at
    /// most `patience` ([`PATIENCE`] outside tests). A candidate that finds the transition's start claimed by another
    /// whose claim it may not take ([`Claim::serves`](time_slot::Claim::serves):
    /// one of the two starts was worked out) does not install its word with that
    /// start: that candidate is between its claim and its CAS, a few
    /// instructions, and this one waits for its CAS, then offers `f` the word it
    /// installed. Only a candidate that
    /// stalls there longer than `patience` (descheduled, or a thread a `fork`
    /// left behind) is not waited for: its start is taken, as any other's.
    pub(super) fn transition_claiming(
        &self,
        slot: &TimeSlot,
        mut seen: Snapshot,
        fixed: bool,
        patience: std::time::Duration,
        mut f: impl FnMut(Snapshot) -> Option<(Snapshot, u64)>,
    ) -> Update {
        let mut wait = Wait::new(patience);
        loop {
            let Some((next, now)) = f(seen) else {
                return Update::Declined(seen);
            };
            // The outgoing phase's start, put back if a claim a whole tag cycle
            // late took its word and no reader has put it back (a phase that
            // ends unread: a reset, a force-open, a trip): that claim's tag is
            // also the phase after next's, which would take its stale tick for
            // its start. One load; off the call paths.
            if slot.start_of(seen).is_none() {
                let _ = slot.reclaim(self, seen, now);
            }
            let Some(claim) = slot.claim_start(self, seen, next, now, fixed) else {
                seen = self.load(); // the word moved on: offer `f` the new one
                continue;
            };
            if !claim.serves(now, fixed) {
                // Waits here, not offering `f` the same word again (its steps,
                // a window's withdrawal among them, are for a word that moved).
                if let Some(current) = wait.until_moved(self, seen) {
                    seen = current;
                    continue;
                }
            }
            let start = claim.start;
            // AcqRel: Release publishes the claimed start with the word (see the
            // module's Orderings); Acquire hands the loop the newest word.
            match self
                .0
                .compare_exchange(seen.0, next.0, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    return Update::Moved {
                        from: seen,
                        to: next,
                        start,
                    };
                }
                Err(actual) => seen = Snapshot(actual),
            }
        }
    }
}

/// How long a transition waits for another candidate's CAS (see
/// [`StateWord::transition_claiming`]).
const PATIENCE: std::time::Duration = std::time::Duration::from_millis(20);

/// A wait for another thread's CAS: spins, then yields until the patience runs
/// out. Under loom it yields for ever (loom then runs the other thread).
struct Wait {
    spins: u32,
    patience: std::time::Duration,
    #[cfg(not(cutout_loom))]
    until: Option<std::time::Instant>,
}

impl Wait {
    fn new(patience: std::time::Duration) -> Wait {
        Wait {
            spins: 0,
            patience,
            #[cfg(not(cutout_loom))]
            until: None,
        }
    }

    /// The word `state` holds once it is no longer `seen`, or `None` once the
    /// patience has run out (a patience shared by every wait of one transition).
    fn until_moved(&mut self, state: &StateWord, seen: Snapshot) -> Option<Snapshot> {
        loop {
            let current = state.load();
            if current != seen {
                return Some(current);
            }
            if !self.again() {
                return None;
            }
        }
    }

    /// Waits a moment; `false` once the patience has run out.
    #[cfg(not(cutout_loom))]
    fn again(&mut self) -> bool {
        if self.spins < 64 {
            self.spins += 1;
            std::hint::spin_loop();
            return true;
        }
        let until = *self
            .until
            .get_or_insert_with(|| std::time::Instant::now() + self.patience);
        if std::time::Instant::now() >= until {
            return false;
        }
        std::thread::yield_now();
        true
    }

    #[cfg(cutout_loom)]
    fn again(&mut self) -> bool {
        let _ = (self.spins, self.patience);
        loom::thread::yield_now();
        true
    }
}

#[cfg(all(test, not(cutout_loom)))]
mod tests;
