//! The breaker's memory layout for its lean paths: the `Hot` line (the state word
//! and what the lean paths load with it), the `Phase` line, and the `Lean` settings
//! byte.

use super::*;

/// The state word and the fields the lean paths of [`CircuitBreaker::call_with`]
/// load with it, first in one line: the word, the slow-call threshold, the
/// settings byte, and the room of the stripes (its pointer, length and class: the
/// first field of [`Stripes`], [`Stripes::LEAN_BYTES`] long). All fall within the
/// line's first
/// [`LEAN_LOADS`](crate::stripe::LEAN_LOADS) bytes, where no lean path stores in
/// any line (4K aliasing). The line is written when the word is, and when a
/// stripe is allocated (the stripes' existence bits, past `LEAN_LOADS`): once per
/// stripe in the breaker's life, never by a call that has its stripe.
#[repr(C)]
pub(super) struct Hot {
    pub(super) word: StateWord,
    /// With the slow-call policy timed by cheap readings, the elapsed nanoseconds
    /// from which a success is off the lean path (past the threshold), at most
    /// `u32::MAX` (4.3 s): over a longer threshold, a success that took longer
    /// goes off the lean path, where it is checked against the threshold itself.
    /// Four bytes, so that the room of the stripes ends within `LEAN_LOADS`.
    pub(super) lean_slow_nanos: u32,
    /// What the lean path does for this configuration (see [`Lean`]).
    pub(super) lean: Lean,
    pub(super) stripes: Stripes,
}

/// The data of the phase beside the state word, in one line: the phases' starts
/// (written by transitions), the half-open round (written only while HalfOpen),
/// the streak, which a closed call loads (within
/// [`LEAN_LOADS`](crate::stripe::LEAN_LOADS)) and only a failure writes (or the
/// check a failed or slow call marks due, and the success that makes it), and the
/// counts that tripped the breaker (written by a trip). One line for the four
/// keeps the breaker small (a `Registry` may hold many) and writes no
/// line on the lean paths. (The transition counts, written only with a transition
/// and read only by metrics, are in the breaker's unpadded tail: here they took
/// the line past 128 bytes, and the breaker from 640 to 768.)
#[repr(C)]
pub(super) struct Phase {
    pub(super) time: TimeSlot,
    /// The half-open round, tagged with its generation (see [`Round`]).
    pub(super) round: TaggedWord,
    /// Consecutive failures of the closed phase, tagged with its generation, and
    /// the mark of a rate check due (see [`CHECK_DUE`](super::phase::CHECK_DUE)).
    pub(super) streak: TaggedWord,
    /// The window's calls, failures and slow calls that tripped the breaker into
    /// its Open phase, tagged with that phase's generation (see
    /// [`keep_tripped_by`](CircuitBreaker::keep_tripped_by)).
    pub(super) tripped: [TaggedWord; 3],
}

// One line, whatever is added to it (not under loom, whose atomics are larger).
const _: () = assert!(crate::sync::LOOM || std::mem::size_of::<Phase>() <= 128);

/// The settings the lean path of [`CircuitBreaker::call_with`] needs, in one byte:
/// it is read once per call and kept in a register, where reading each setting
/// would be a load of its own (and a reload after the call).
#[derive(Clone, Copy, Debug)]
pub(super) struct Lean(pub(super) u8);

impl Lean {
    /// A window: a success is counted in the owner's live bucket.
    pub(super) const WINDOW: u8 = 1;
    /// Calls are timed by cheap readings: for the slow-call policy, or for a drop
    /// setting that needs a call's age ([`Dropped::FailureAfter`](crate::Dropped)).
    pub(super) const TIMED: u8 = 2;
    /// The slow-call policy, with calls timed precisely: no lean path.
    pub(super) const PRECISE: u8 = 4;
    /// What-if candidates (see `Builder::candidate`): a closed success leaves
    /// the lean path where the slow-call policy is tested, before any reading,
    /// for `record_offering`, which records it and offers it to them; every
    /// other outcome reaches the paths that offer it. Tested with the bits
    /// above, in masks of their own: it costs the lean paths no instruction.
    /// (`call_with` offers the common shapes inline: see `INLINE_WINDOWED`.)
    pub(super) const OFFERS: u8 = 8;
    /// A candidate times calls (its slow-call policy, or its `on_drop`): the live
    /// breaker's calls are timed for it. Tested with `TIMED`, in the same masks.
    pub(super) const OFFERS_TIMED: u8 = 16;
    /// A candidate has a window: `record_offering` offers a closed success to
    /// each candidate's lean path; without one, it only checks that no
    /// candidate needs it (a closed success changes nothing such a candidate keeps).
    pub(super) const OFFERS_WINDOW: u8 = 32;
    /// A candidate times calls precisely: the live breaker's calls start at a
    /// precise reading (the candidate's own readings are precise), off the lean
    /// path. Tested with `PRECISE`, in the same mask.
    pub(super) const OFFERS_PRECISE: u8 = 64;
    /// Every candidate has a window and times no call: with a live breaker
    /// that has one and times none either ([`INLINE_WINDOWED`](Self::INLINE_WINDOWED)),
    /// `call_with` offers a closed success inline.
    pub(super) const OFFERS_WINDOWED: u8 = 128;
    /// The bits that send `call_with`'s closed success of a breaker with
    /// candidates to `record_offering_windowed`, inline, and their values: a
    /// window here and in every candidate, no call timed anywhere.
    pub(super) const INLINE_WINDOWED: (u8, u8) = (
        Lean::WINDOW | Lean::TIMED | Lean::PRECISE | Lean::OFFERS_WINDOWED,
        Lean::WINDOW | Lean::OFFERS_WINDOWED,
    );
    /// The bits that send it to `record_offering_quiet`, inline, and their
    /// values: no window and no call timed, here or in any candidate.
    pub(super) const INLINE_QUIET: (u8, u8) = (
        Lean::WINDOW
            | Lean::TIMED
            | Lean::PRECISE
            | Lean::OFFERS_TIMED
            | Lean::OFFERS_WINDOW
            | Lean::OFFERS_PRECISE,
        0,
    );

    pub(super) fn of(config: &Config) -> Lean {
        let window = match config.window {
            Some(_) => Lean::WINDOW,
            None => 0,
        };
        let slow = match config.slow_calls {
            Some(slow) if slow.precise() => Lean::PRECISE,
            Some(_) => Lean::TIMED,
            None if config.on_drop.times_calls() => Lean::TIMED,
            None => 0,
        };
        Lean(window | slow)
    }

    #[inline]
    pub(super) fn has(self, any: u8) -> bool {
        self.0 & any != 0
    }

    /// Whether the bits of `mask` have the values `value` (a pair such as
    /// [`INLINE_WINDOWED`](Self::INLINE_WINDOWED)).
    #[inline]
    pub(super) fn matches(self, (mask, value): (u8, u8)) -> bool {
        self.0 & mask == value
    }
}

/// Marks the branch that calls it as unlikely, so the compiler lays out the other
/// as the straight path (what `std::hint::cold_path` does from Rust 1.95).
#[cold]
#[inline(always)]
pub(super) fn unlikely() {}

// The lean paths' loads in `Hot` end within `LEAN_LOADS` (the test
// `the_words_the_lean_paths_load_come_first_in_their_lines` checks every line).
// (Not under loom, whose atomics are larger.)
const _: () = assert!(
    crate::sync::LOOM
        || std::mem::offset_of!(Hot, stripes) + Stripes::LEAN_BYTES <= crate::stripe::LEAN_LOADS
);
