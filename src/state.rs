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
//! # The time slot
//! A phase's time (Open: its deadline, when a call may half-open it; HalfOpen: when
//! the round started; otherwise when the phase began) does not fit beside a 32-bit
//! generation. What the word does not hold is when its phase *started*: that lives
//! in a [`TimeSlot`] of two words, one per generation parity, each tagged with (the
//! low 16 bits of) the generation it belongs to:
//!
//! ```text
//!  63                                              16 15              0
//! +--------------------------------------------------+----------------+
//! |            start (48: ms ticks)                  | tag: gen % 2^16 |
//! +--------------------------------------------------+----------------+
//! ```
//!
//! A phase's time follows from its start and its word (Open: the start plus the
//! cooldown of the word's level and generation, the same for every thread). A thread
//! about to make a transition first *claims* the new phase's start: it writes its
//! clock reading into the word of the new generation's parity, which holds the phase
//! before the current one, unless another candidate for the same transition claimed
//! first (then it takes that start). Only then does it CAS the state word. So every
//! thread that sees a phase's word also sees its start (the claim came before the
//! CAS that the thread's load saw), every thread agrees on it, and nobody waits for
//! anybody: the start is the clock reading of the transition's first candidate.
//! The current phase's start stays readable until the phase after next claims its
//! word; a reader still holding a word that old finds a later tag and knows its
//! word is stale. A claim is a CAS from the exact value seen, made only from the
//! tag of the phase two generations back, so it never overwrites a later claim;
//! and only while the state word still holds the candidate's word, so a candidate
//! that held its word through a whole tag cycle, and finds the *current* phase's
//! tag where it expects its previous phase's, does not overwrite the current start
//! (which would read as over for ever: every admission would spin). One case slips
//! past that check: a candidate paused between it and its CAS while the breaker
//! makes a whole tag cycle of transitions *in the same tick* finds the very bits
//! it loaded and overwrites the current start. A reader that finds the current
//! phase's start gone (the state word still holds the phase) puts it back
//! ([`TimeSlot::reclaim`], off the hot path), no earlier than it was.
//!
//! The tags are 16 bits: a start could be taken for another phase's only by a
//! reader that held a word through 65,536 transitions between two adjacent loads
//! (a claim: between its load of the state word and its CAS of the slot, and then
//! only if all of them fell in one millisecond tick).
//!
//! # Tagged words
//! The half-open round and the consecutive-failure streak are [`TaggedWord`]s: 32
//! bits of data tagged with the generation they belong to (so are the counts of the
//! shared stripes' window buckets: see [`crate::window`]). One rule decides what a
//! tag means, at any generation distance: a tag equal to the caller's generation is
//! its phase's data; any other tag is an earlier phase's (empty for this one)
//! unless the state word has moved past the caller's generation, in which case the
//! caller is the stale one and writes nothing.
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
    /// word and the time it starts at. The start is claimed in `slot` first (see
    /// [`TimeSlot`]): the first candidate's for this transition is every
    /// candidate's, so `Moved` reports the start the new phase has.
    pub(crate) fn transition(
        &self,
        slot: &TimeSlot,
        mut seen: Snapshot,
        mut f: impl FnMut(Snapshot) -> Option<(Snapshot, u64)>,
    ) -> Update {
        loop {
            let Some((next, now)) = f(seen) else {
                return Update::Declined(seen);
            };
            let Some(start) = slot.claim(self, seen, next, now) else {
                seen = self.load(); // the word moved on: offer `f` the new one
                continue;
            };
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

const SLOT_TAG_BITS: u32 = 16;
const SLOT_TICKS_BITS: u32 = 64 - SLOT_TAG_BITS;

/// When each of the two newest phases started, tagged with (the low 16 bits of)
/// its generation, in the word of its generation's parity: see the module docs.
/// A phase's time (Open: its deadline) follows from its start and its word.
pub(crate) struct TimeSlot {
    starts: [AtomicU64; 2],
}

impl TimeSlot {
    /// The slot of a breaker that starts in phase `s`, started at tick `start` (a
    /// new or restored breaker). The other word is tagged with the generation
    /// before `s`, as it would be.
    pub(crate) fn starting(s: Snapshot, start: u64) -> TimeSlot {
        let slot = TimeSlot {
            starts: [AtomicU64::new(0), AtomicU64::new(0)],
        };
        let previous = TimeSlot::previous(s) | TimeSlot::pack(s, start) & !mask(SLOT_TAG_BITS);
        slot.word(s)
            .store(TimeSlot::pack(s, start), Ordering::Relaxed);
        slot.starts[TimeSlot::index(s) ^ 1].store(previous, Ordering::Relaxed);
        slot
    }

    #[inline]
    fn index(s: Snapshot) -> usize {
        (s.generation() & 1) as usize
    }

    #[inline]
    fn word(&self, s: Snapshot) -> &AtomicU64 {
        &self.starts[TimeSlot::index(s)]
    }

    #[inline]
    fn tag(s: Snapshot) -> u64 {
        u64::from(s.generation()) & mask(SLOT_TAG_BITS)
    }

    /// The tag of the phase before `s` (its generation, wrapped at [`GEN_BITS`],
    /// less one).
    #[inline]
    fn previous(s: Snapshot) -> u64 {
        u64::from(s.generation().wrapping_sub(1) & GEN_MASK) & mask(SLOT_TAG_BITS)
    }

    #[inline]
    fn pack(s: Snapshot, ticks: u64) -> u64 {
        ticks.min(mask(SLOT_TICKS_BITS)) << SLOT_TAG_BITS | TimeSlot::tag(s)
    }

    /// When phase `s` started, or `None` if the breaker has moved on far enough
    /// that the word of `s`'s parity holds a later phase's start: the caller's word
    /// is stale, and no time of it may decide anything. One load; writes nothing.
    #[inline]
    pub(crate) fn start_of(&self, s: Snapshot) -> Option<u64> {
        // Acquire: pairs with the Release of the claim that wrote it (made before
        // the CAS that installed `s`, which the caller's load of `s` saw).
        let word = self.word(s).load(Ordering::Acquire);
        (word & mask(SLOT_TAG_BITS) == TimeSlot::tag(s)).then_some(word >> SLOT_TAG_BITS)
    }

    /// Claims `now` as the start of phase `next`, which a candidate is about to
    /// install over `seen` (one generation earlier) in `state`, unless another
    /// candidate claimed first; returns the claimed start, or `None` if the breaker
    /// has moved past `seen`.
    ///
    /// `next`'s word holds the phase before `seen` (its parity) until the first
    /// claim for `next`, and the state word cannot move past `seen` before that
    /// claim: so any tag but those two means `seen` is over, and the CAS, from the
    /// value seen, cannot overwrite a later phase's start. But a tag is only the
    /// generation's low bits: a `seen` a whole tag cycle old (65,536 transitions;
    /// 8 with tiny generations) finds the *current* phase's tag where it expects
    /// its previous phase's, and its claim would overwrite the current phase's
    /// start (which would then read as over for ever). So the claim is made only
    /// while the state word still holds `seen`. That check and the CAS are two
    /// steps, and the value the CAS expects (tag and tick) can come back: a
    /// candidate paused between them while the breaker makes a whole tag cycle of
    /// transitions in the same tick (65,536; 8 with tiny generations) finds the
    /// current phase's claim holding exactly the bits it loaded, and its CAS
    /// succeeds. No check made before a CAS can rule that out, so the claim is not
    /// where it is handled: a reader that finds the *current* phase's start gone
    /// puts it back ([`reclaim`](Self::reclaim)).
    fn claim(&self, state: &StateWord, seen: Snapshot, next: Snapshot, now: u64) -> Option<u64> {
        let word = self.word(next);
        // Acquire: pairs with the Release of a claim that wrote it.
        let mut claimed = word.load(Ordering::Acquire);
        loop {
            let tag = claimed & mask(SLOT_TAG_BITS);
            if tag == TimeSlot::tag(next) {
                return Some(claimed >> SLOT_TAG_BITS);
            }
            if tag != TimeSlot::previous(seen) || state.load() != seen {
                return None;
            }
            // AcqRel: Release publishes the start to whoever sees `next` (this CAS
            // comes before the state word's); Acquire hands back a newer claim.
            match word.compare_exchange(
                claimed,
                TimeSlot::pack(next, now),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Some(now.min(mask(SLOT_TICKS_BITS))),
                Err(actual) => claimed = actual,
            }
        }
    }

    /// The start of phase `s`, found over by [`start_of`](Self::start_of): `None`
    /// if the breaker has moved past `s`, as `start_of` meant; but if the state
    /// word still holds `s`, its start was claimed over by a candidate a whole tag
    /// cycle late (see [`claim`](Self::claim)), and this puts it back.
    ///
    /// Nothing else writes another tag into the current phase's word: its own
    /// claim came before the CAS that installed `s`, and the next claim of that
    /// word is for the phase after next, made by a candidate that saw the state
    /// word past `s` (so this thread, having read that claim, sees it past `s`
    /// too). The start put back is the late candidate's clock reading, which it
    /// took after the phase whose word it expected began (a cycle before `s`,
    /// with `s`'s tag and, for its CAS to land, `s`'s very start), or `now` if
    /// that is earlier: the phase reads as started no earlier than it did, and its
    /// time is never cut short.
    /// A late claim's CAS can land again between this check and this CAS (by the
    /// same coincidence); then the next reader of the phase it hit puts that back.
    #[cold]
    #[inline(never)]
    pub(crate) fn reclaim(&self, state: &StateWord, s: Snapshot, now: u64) -> Option<u64> {
        let word = self.word(s);
        // Acquire: pairs with the Release of the claim that wrote it, so a later
        // phase's claim shows this thread the state word past `s` (see above).
        let mut found = word.load(Ordering::Acquire);
        loop {
            if found & mask(SLOT_TAG_BITS) == TimeSlot::tag(s) {
                return Some(found >> SLOT_TAG_BITS);
            }
            if state.load() != s {
                return None;
            }
            let start = (found >> SLOT_TAG_BITS).min(now);
            // AcqRel: Release publishes the start as a claim does; Acquire hands
            // back a newer claim.
            match word.compare_exchange(
                found,
                TimeSlot::pack(s, start),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Some(start),
                Err(actual) => found = actual,
            }
        }
    }
}

/// What [`TaggedWord::update`] did.
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TagUpdate {
    /// The word now holds `new` for the caller's generation (it held `old`).
    Updated { old: u32, new: u32 },
    /// The closure declined the caller's data, which is returned.
    Declined(u32),
    /// The breaker has moved past the caller's generation (to the word returned):
    /// nothing was written.
    Stale(Snapshot),
}

/// 32 bits of one phase's data tagged with that phase's generation: the half-open
/// round and the consecutive-failure streak. See the module docs for the rule.
///
/// ```text
///  63               32 31               0
/// +-------------------+------------------+
/// |  generation (32)  |     data (32)    |
/// +-------------------+------------------+
/// ```
pub(crate) struct TaggedWord(AtomicU64);

impl TaggedWord {
    /// Generation 0, no data: empty for every phase.
    pub(crate) fn new() -> TaggedWord {
        TaggedWord(AtomicU64::new(0))
    }

    #[inline]
    fn pack(generation: Generation, data: u32) -> u64 {
        u64::from(generation) << 32 | u64::from(data)
    }

    /// Whether the data is 0, whatever its phase: empty for every phase. `Relaxed`,
    /// for the lean path's check: a stale non-empty read only sends the call to the
    /// general path, and a stale empty read orders the racing write after it.
    #[inline]
    pub(crate) fn is_empty_relaxed(&self) -> bool {
        // Relaxed: see above.
        self.0.load(Ordering::Relaxed) as u32 == 0
    }

    /// The data if it is `generation`'s, else 0. A read only: it cannot tell an
    /// earlier phase's data from a later one's, and needs not (both are not
    /// `generation`'s).
    #[inline]
    pub(crate) fn data_for(&self, generation: Generation) -> u32 {
        TaggedWord::data_in(&self.0, generation)
    }

    /// [`data_for`](Self::data_for) on a tagged word kept elsewhere: a count of a
    /// shared stripe's window bucket (see [`crate::window`]).
    #[inline]
    pub(crate) fn data_in(tagged: &AtomicU64, generation: Generation) -> u32 {
        // Acquire: pairs with the Release of the CAS that wrote it.
        let raw = tagged.load(Ordering::Acquire);
        if (raw >> 32) as Generation == generation {
            raw as u32
        } else {
            0
        }
    }

    /// The one update of a tagged word: offers `f` the data of `generation` (0 if
    /// the word holds an earlier phase's) until it declines or this thread's CAS
    /// installs its answer. Writes nothing if `word` has moved past `generation`,
    /// or if the word already reads as the answer.
    pub(crate) fn update(
        &self,
        generation: Generation,
        word: &StateWord,
        f: impl FnMut(u32) -> Option<u32>,
    ) -> TagUpdate {
        TaggedWord::update_in(&self.0, generation, word, f)
    }

    /// [`update`](Self::update) on a tagged word kept elsewhere: a count of a
    /// shared stripe's window bucket (see [`crate::window`]).
    pub(crate) fn update_in(
        tagged: &AtomicU64,
        generation: Generation,
        word: &StateWord,
        mut f: impl FnMut(u32) -> Option<u32>,
    ) -> TagUpdate {
        // Acquire: pairs with the Release of the CAS that wrote it, so a later
        // phase's tag seen here implies that phase (or a newer one) in `word`.
        let mut seen = tagged.load(Ordering::Acquire);
        loop {
            let mine = (seen >> 32) as Generation == generation;
            let data = if mine {
                seen as u32
            } else {
                // Another phase's data. Earlier, unless the breaker has moved on.
                let cur = word.load();
                if cur.generation() != generation {
                    return TagUpdate::Stale(cur);
                }
                0
            };
            let Some(new) = f(data) else {
                return TagUpdate::Declined(data);
            };
            // Already reads as `new` for this phase: nothing to write (an earlier
            // phase's empty word is empty for this one too).
            if new == data && (mine || seen as u32 == 0) {
                return TagUpdate::Updated { old: data, new };
            }
            // AcqRel: Release publishes the data with its tag (see the module's
            // Orderings); Acquire hands back a newer word.
            match tagged.compare_exchange(
                seen,
                TaggedWord::pack(generation, new),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return TagUpdate::Updated { old: data, new },
                Err(actual) => seen = actual,
            }
        }
    }

    /// Makes a tagged word kept elsewhere that is generation `from`'s, empty or
    /// not, an empty word of generation `to` (whatever the state word says), and
    /// leaves a word of any other generation as it is: how a rotation of a shared
    /// stripe's window bucket claims the counts of the tag it replaced (see
    /// [`crate::window`]). An empty word of `from` is claimed too when `to` is
    /// another generation: left as it was, a delayed writer of `from` could still
    /// count in it, unchecked (its own generation's word), under a later tag.
    pub(crate) fn empty_in(tagged: &AtomicU64, from: Generation, to: Generation) {
        let empty = TaggedWord::pack(to, 0);
        // Acquire: as every load.
        let mut seen = tagged.load(Ordering::Acquire);
        while (seen >> 32) as Generation == from && seen != empty {
            // AcqRel: as in `update`.
            match tagged.compare_exchange(seen, empty, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return,
                Err(actual) => seen = actual,
            }
        }
    }

    /// The word as it is, for [`begin`](Self::begin). `Acquire`: as every load.
    #[inline]
    pub(crate) fn raw(&self) -> u64 {
        // Acquire: pairs with the Release of the CAS that wrote it.
        self.0.load(Ordering::Acquire)
    }

    /// Starts `generation`'s phase with empty data, if the word still holds `seen`
    /// (what the transition's winner read just before its CAS): a write since then
    /// is the new phase's own, and stays. The staleness rule alone already reads an
    /// earlier phase's data as empty; this also empties data a whole generation
    /// cycle old, whose tag the rule cannot tell from the current one.
    pub(crate) fn begin(&self, seen: u64, generation: Generation) {
        let fresh = TaggedWord::pack(generation, 0);
        if seen != fresh {
            // AcqRel: as in `update`. A failure means the word moved on: leave it.
            let _ = self
                .0
                .compare_exchange(seen, fresh, Ordering::AcqRel, Ordering::Acquire);
        }
    }

    /// A word holding `data` for `generation` (tests and restored breakers).
    pub(crate) fn holding(generation: Generation, data: u32) -> TaggedWord {
        TaggedWord(AtomicU64::new(TaggedWord::pack(generation, data)))
    }
}

/// The half-open round's data: probes issued and succeeded, 16 bits each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Round {
    pub(crate) issued: u32,
    pub(crate) succeeded: u32,
}

impl Round {
    #[inline]
    pub(crate) fn from_data(data: u32) -> Round {
        Round {
            issued: data >> 16,
            succeeded: data & 0xFFFF,
        }
    }

    #[inline]
    pub(crate) fn data(self) -> u32 {
        debug_assert!(self.issued <= HALF_MAX && self.succeeded <= HALF_MAX);
        self.issued << 16 | self.succeeded
    }
}

/// The largest probe count a [`Round`] can hold; it bounds `half_open_probes`.
pub(crate) const HALF_MAX: u32 = 0xFFFF;

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
            Just(State::Recovering),
        ]
    }

    /// A word at generation `g`, in state `state`.
    fn word_at(state: State, g: Generation) -> StateWord {
        StateWord::at(Snapshot::pack(state, 0, g))
    }

    proptest! {
        #[test]
        fn pack_then_unpack_returns_every_field(
            state in any_state(),
            level in 0..=LEVEL_MAX,
            generation in 0..=GEN_MASK,
        ) {
            let s = Snapshot::pack(state, level, generation);
            prop_assert_eq!(s.state(), state);
            prop_assert_eq!(s.is_closed(), state == State::Closed);
            prop_assert_eq!(s.level(), level);
            prop_assert_eq!(s.generation(), generation);
        }

        #[test]
        fn a_round_round_trips(issued in 0..=HALF_MAX, succeeded in 0..=HALF_MAX) {
            let r = Round { issued, succeeded };
            prop_assert_eq!(Round::from_data(r.data()), r);
        }

        /// The tagged-word rule at any generation distance: another phase's data is
        /// an earlier phase's (empty) while the state word is at the caller's
        /// generation, and the caller is stale once the state word has moved on.
        #[test]
        fn another_generations_data_is_empty_or_the_caller_is_stale(
            tag in 0..=GEN_MASK,
            distance in 1..=GEN_MASK,
            data in 1..u32::MAX,
        ) {
            let mine = tag.wrapping_add(distance) & GEN_MASK;
            let t = TaggedWord::holding(tag, data);
            let current = word_at(State::Closed, mine);
            prop_assert_eq!(t.data_for(mine), 0);
            prop_assert_eq!(
                t.update(mine, &current, |d| Some(d + 1)),
                TagUpdate::Updated { old: 0, new: 1 }
            );
            prop_assert_eq!(t.data_for(mine), 1);
            // The word now holds `mine`'s data; a caller still at `tag` is stale.
            prop_assert_eq!(
                t.update(tag, &current, |d| Some(d + 1)),
                TagUpdate::Stale(current.load())
            );
            prop_assert_eq!(t.data_for(mine), 1);
        }

        #[test]
        fn a_start_tagged_for_another_phase_is_not_read_as_this_ones(
            g in 0..=GEN_MASK,
            ticks in 0..=TICKS_MAX,
        ) {
            let s = Snapshot::pack(State::Open, 0, g);
            let slot = TimeSlot::starting(s, ticks);
            prop_assert_eq!(slot.start_of(s), Some(ticks));
            let next = s.next(State::HalfOpen, 0);
            prop_assert_eq!(slot.start_of(next), None);
            prop_assert_eq!(slot.claim(&StateWord::at(s), s, next, 1), Some(1));
            prop_assert_eq!(slot.start_of(s.next(State::HalfOpen, 0).next(State::Open, 0)), None);
        }
    }

    #[test]
    fn next_bumps_the_generation_and_wraps() {
        let s = Snapshot::pack(State::Open, 3, GEN_MASK);
        let n = s.next(State::HalfOpen, 3);
        assert_eq!(n.generation(), 0);
        assert_eq!((n.state(), n.level()), (State::HalfOpen, 3));
    }

    /// A whole generation cycle on, the same state, level and generation make
    /// another word (and key): the cycles moved on. They wrap too, at 2^23.
    #[test]
    fn a_word_a_generation_cycle_later_is_another_phases() {
        let first = Snapshot::pack(State::Open, 0, 0);
        // The generation's last value, then a wrap: a cycle after `first`.
        let later = Snapshot::pack(State::HalfOpen, 0, GEN_MASK).next(State::Open, 0);
        assert_eq!(
            (later.state(), later.level(), later.generation()),
            (first.state(), first.level(), first.generation())
        );
        assert_ne!(later, first);
        assert!(!later.key().is(first.key().to_bits()));
        assert_eq!(later.cycles(), 1);
        assert_eq!(
            later.next(State::Closed, 0).cycles(),
            1,
            "no wrap, no cycle"
        );
        let last = Snapshot(
            Snapshot::pack(State::Closed, 0, GEN_MASK).0 | mask(CYCLE_BITS) << CYCLE_SHIFT,
        );
        assert_eq!(last.next(State::Open, 0), first, "the cycles wrap too");
    }

    #[test]
    fn a_clock_reading_never_passes_the_largest_tick() {
        assert_eq!(ticks_from_nanos(u64::MAX), TICKS_MAX);
        assert!(TICKS_MAX.checked_mul(NANOS_PER_TICK).is_some());
        assert_eq!(ticks_from_nanos(2_500_000), 2);
        assert_eq!(
            ticks_from_duration(std::time::Duration::from_secs(u64::MAX)),
            None
        );
    }

    #[test]
    fn a_transition_claims_its_start_and_every_candidate_takes_the_first_claim() {
        let word = StateWord::new();
        let slot = TimeSlot::starting(Snapshot::INITIAL, 3);
        let seen = word.load();
        assert_eq!(slot.start_of(seen), Some(3));
        assert_eq!(
            word.transition(&slot, seen, |_| None),
            Update::Declined(seen)
        );
        // A candidate for another transition out of `seen` claimed 5 first.
        let other = seen.next(State::ForcedOpen, 0);
        assert_eq!(slot.claim(&word, seen, other, 5), Some(5));
        let Update::Moved { from, to, start } =
            word.transition(&slot, seen, |s| Some((s.next(State::Open, 0), 7)))
        else {
            panic!("the CAS on an unchanged word must succeed");
        };
        assert_eq!(
            (from, to.state(), word.load(), start),
            (seen, State::Open, to, 5)
        );
        assert_eq!(slot.start_of(to), Some(5));
        // The previous phase's start stays readable in the other word...
        assert_eq!(slot.start_of(seen), Some(3));
        // ...until the phase after `to` claims it: then `seen` reads as over.
        let after = to.next(State::HalfOpen, 0);
        assert_eq!(slot.claim(&word, to, after, 9), Some(9));
        assert_eq!(slot.start_of(seen), None);
        // A stale candidate still holding `seen` writes nothing.
        assert_eq!(
            slot.claim(&word, seen, to, 11),
            Some(5),
            "`to`'s claim stands"
        );
        word.0.store(after.0, Ordering::Relaxed);
        let later = after.next(State::Open, 0);
        assert_eq!(slot.claim(&word, after, later, 12), Some(12));
        assert_eq!(
            slot.claim(&word, seen, to, 13),
            None,
            "`to`'s word is a later phase's now"
        );
        assert_eq!(slot.start_of(later), Some(12));
    }

    /// The slot's tags are the generation's low 16 bits (all 3 bits of a tiny
    /// generation), so a candidate still holding a word from a whole tag cycle ago
    /// can find, in the word of its next phase's parity, the current phase's tag
    /// where it expects its own previous phase's. It must not claim over the
    /// current phase's start. Before, it did: its CAS of the state word then
    /// failed, but the current phase read as over for ever, and every admission
    /// spun in `admit_general` (a CI run with tiny generations hung so in
    /// `tests/stress.rs`: the word at generation 3, its slot tagged 5).
    #[test]
    fn a_candidate_a_tag_cycle_old_does_not_claim_over_the_current_phase() {
        let current = Snapshot::pack(State::Open, 1, 3);
        let word = StateWord::at(current);
        let slot = TimeSlot::starting(current, 100);
        // Its previous phase's tag is generation 3's: a tag cycle (or, with tiny
        // generations, a generation cycle) after generation 4.
        let stale_generation = (4 + (1 << SLOT_TAG_BITS)) & u64::from(GEN_MASK);
        let stale = Snapshot::pack(State::HalfOpen, 1, stale_generation as Generation);
        assert_ne!(stale, current);
        let next = stale.next(State::Open, 2);
        assert_eq!(
            TimeSlot::tag(next),
            TimeSlot::tag(current.next(State::HalfOpen, 1).next(State::Open, 2))
        );
        assert_eq!(
            word.transition(&slot, stale, |cur| (cur == stale)
                .then_some((cur.next(State::Open, 2), 200))),
            Update::Declined(current)
        );
        assert_eq!(
            slot.start_of(current),
            Some(100),
            "the current phase's start stands"
        );
        assert_eq!(slot.claim(&word, stale, next, 300), None);
        assert_eq!(slot.start_of(current), Some(100));
        // The current phase still moves on, and claims with its own start.
        let Update::Moved { to, start, .. } = word.transition(&slot, current, |cur| {
            Some((cur.next(State::HalfOpen, 1), 400))
        }) else {
            panic!("an unchanged word moves");
        };
        assert_eq!((start, slot.start_of(to)), (400, Some(400)));
    }

    /// The case `claim`'s check cannot rule out: a candidate for `seen`'s next
    /// phase loads that word (its previous phase's, started at tick 100), checks
    /// the state word (still `seen`), and is paused; the breaker makes a whole tag
    /// cycle of transitions in tick 100, so the current phase's claim wrote those
    /// very bits, and the candidate's CAS lands on the current phase's start.
    /// Before, that phase read as over for ever, and every admission spun in
    /// `admit_general` (loom-tests/tests/cycle.rs reaches it with tiny
    /// generations). A reader that finds it so puts the start back, no earlier
    /// than it was; a reader whose phase really is over writes nothing.
    #[test]
    fn a_current_start_claimed_over_a_tag_cycle_late_is_put_back() {
        let seen = Snapshot::pack(State::Closed, 0, 1);
        let current = Snapshot::pack(
            State::Open,
            0,
            ((1u64 << SLOT_TAG_BITS) & u64::from(GEN_MASK)) as Generation,
        );
        assert_eq!(TimeSlot::tag(current), TimeSlot::previous(seen));
        let word = StateWord::at(current);
        let slot = TimeSlot::starting(current, 100);
        // The late candidate's CAS, from the bits it loaded a cycle ago, with the
        // clock reading it took then (tick 100: the tick the cycle ran in).
        let next = seen.next(State::Open, 0);
        let loaded = TimeSlot::pack(current, 100);
        assert_eq!(
            slot.word(next).compare_exchange(
                loaded,
                TimeSlot::pack(next, 100),
                Ordering::AcqRel,
                Ordering::Acquire
            ),
            Ok(loaded),
            "the same word as the current phase's"
        );
        assert_eq!(slot.start_of(current), None, "claimed over");
        assert_eq!(slot.reclaim(&word, current, 250), Some(100));
        assert_eq!(slot.start_of(current), Some(100), "put back as it was");
        assert_eq!(slot.reclaim(&word, current, 300), Some(100), "once");

        // Put back no later than the reader's clock (a late candidate's reading
        // can be no newer than the reader's, but a clock is the caller's).
        slot.word(current)
            .store(TimeSlot::pack(next, 400), Ordering::Relaxed);
        assert_eq!(slot.reclaim(&word, current, 350), Some(350));

        // A reader whose phase is over finds another tag too, and writes nothing.
        let over = current.next(State::HalfOpen, 0).next(State::Open, 0);
        slot.word(over)
            .store(TimeSlot::pack(over, 500), Ordering::Relaxed);
        word.0.store(over.0, Ordering::Relaxed);
        assert_eq!(slot.reclaim(&word, current, 600), None);
        assert_eq!(slot.start_of(over), Some(500));
    }

    /// Generation 0's previous phase is the last generation of the cycle, at any
    /// width: before, a 3-bit generation's wrap made every transition out of
    /// generation 0 look stale, and the transition loop spun for ever.
    #[test]
    fn a_transition_out_of_generation_zero_claims_across_the_wrap() {
        let last = Snapshot::pack(State::Closed, 0, GEN_MASK);
        let word = StateWord::at(last);
        let slot = TimeSlot::starting(last, 1);
        let mut seen = last;
        for round in 0..60 {
            let Update::Moved { to, start, .. } =
                word.transition(&slot, seen, |s| Some((s.next(State::Closed, 0), round)))
            else {
                panic!("an unchanged word moves");
            };
            assert_eq!((start, slot.start_of(to)), (round, Some(round)));
            seen = to;
        }
    }

    #[test]
    fn an_empty_word_of_an_earlier_phase_is_not_written() {
        let word = word_at(State::Closed, 5);
        let t = TaggedWord::holding(2, 0);
        assert_eq!(
            t.update(5, &word, |_| Some(0)),
            TagUpdate::Updated { old: 0, new: 0 }
        );
        assert_eq!(t.0.load(Ordering::Relaxed), TaggedWord::pack(2, 0));
        assert_eq!(t.update(5, &word, |_| None), TagUpdate::Declined(0));
    }

    #[test]
    fn debug_prints_decoded_fields() {
        let s = Snapshot::pack(State::HalfOpen, 1, 5);
        assert_eq!(
            format!("{s:?}"),
            "Snapshot { state: HalfOpen, generation: 5, level: 1, cycles: 0 }"
        );
    }
}
