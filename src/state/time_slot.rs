//! The time slot: when each of the two newest phases started.
//! A phase's time (Open: its deadline, when a call may half-open it; HalfOpen: when
//! the round started; otherwise when the phase began) does not fit beside a 32-bit
//! generation. What the word does not hold is when its phase *started*: that lives
//! in a [`TimeSlot`] of two words, one per generation parity, each tagged with (the
//! low 16 bits of) the generation it belongs to:
//!
//! ```text
//!  63  62                                          16 15              0
//! +---+----------------------------------------------+----------------+
//! | F |          start (47: ms ticks)                | tag: gen % 2^16 |
//! +---+----------------------------------------------+----------------+
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
//! One start is not a reading: `open_for`'s, worked out so that its deadline falls
//! where it was asked, is marked in the word's top bit (`F`). It stands for no
//! other candidate's start and no other's for it ([`Claim::serves`]): a candidate
//! that finds such a mismatched claim, made first, waits for the claimant's CAS,
//! a few instructions on (see [`StateWord::transition_claiming`]): only there does
//! a thread wait, and for 20 ms at most. (A claim a whole tag cycle late, above,
//! that is `open_for`'s is waited for those 20 ms, its claimant's CAS never
//! landing: as before, its start is then taken.)
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
//! ([`TimeSlot::reclaim`], off the hot path), no earlier than it was; so does a
//! transition out of the phase, so that the late claim's tag, which is also the
//! phase after next's, is never taken for that phase's start.
//!
//! The tags are 16 bits: a start could be taken for another phase's only by a
//! reader that held a word through 65,536 transitions between two adjacent loads
//! (a claim: between its load of the state word and its CAS of the slot, and then
//! only if all of them fell in one millisecond tick).

use super::*;

pub(super) const SLOT_TAG_BITS: u32 = 16;
/// A start's ticks: 47 bits (4,400 years of milliseconds), below [`FIXED`].
pub(super) const SLOT_TICKS_BITS: u32 = 63 - SLOT_TAG_BITS;
/// The word's top bit: the start was worked out for a deadline (`open_for`), not
/// read from the clock (see [`Claim::serves`]).
const FIXED: u64 = 1 << 63;

/// A claimed start: its tick, and whether it was worked out for a deadline
/// (`open_for`'s: the start that puts the deadline where it was asked) rather
/// than read from the clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Claim {
    pub(crate) start: u64,
    pub(crate) fixed: bool,
}

impl Claim {
    fn of(word: u64) -> Claim {
        Claim {
            start: (word >> SLOT_TAG_BITS) & mask(SLOT_TICKS_BITS),
            fixed: word & FIXED != 0,
        }
    }

    /// Whether a candidate whose own start is `start` (`fixed`: worked out) may
    /// take this claim, another candidate's, for its phase's start. Two clock
    /// readings may stand for each other: they differ by the moment between two
    /// threads' readings. A worked-out start stands only for itself: taken by a
    /// trip it would give the trip `open_for`'s deadline, and taking a trip's
    /// would give `open_for` the trip's.
    pub(crate) fn serves(self, start: u64, fixed: bool) -> bool {
        match self.fixed || fixed {
            false => true,
            true => self.fixed == fixed && self.start == start.min(mask(SLOT_TICKS_BITS)),
        }
    }
}

/// When each of the two newest phases started, tagged with (the low 16 bits of)
/// its generation, in the word of its generation's parity: see the module docs.
/// A phase's time (Open: its deadline) follows from its start and its word.
pub(crate) struct TimeSlot {
    pub(super) starts: [AtomicU64; 2],
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
    pub(super) fn index(s: Snapshot) -> usize {
        (s.generation() & 1) as usize
    }

    #[inline]
    pub(super) fn word(&self, s: Snapshot) -> &AtomicU64 {
        &self.starts[TimeSlot::index(s)]
    }

    #[inline]
    pub(super) fn tag(s: Snapshot) -> u64 {
        u64::from(s.generation()) & mask(SLOT_TAG_BITS)
    }

    /// The tag of the phase before `s` (its generation, wrapped at [`GEN_BITS`],
    /// less one).
    #[inline]
    pub(super) fn previous(s: Snapshot) -> u64 {
        u64::from(s.generation().wrapping_sub(1) & GEN_MASK) & mask(SLOT_TAG_BITS)
    }

    #[inline]
    pub(super) fn pack(s: Snapshot, ticks: u64) -> u64 {
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
        (word & mask(SLOT_TAG_BITS) == TimeSlot::tag(s)).then_some(Claim::of(word).start)
    }

    /// [`claim_start`](Self::claim_start) of a clock reading `now`: the start
    /// claimed (the tests' shorthand).
    #[cfg(test)]
    pub(super) fn claim(
        &self,
        state: &StateWord,
        seen: Snapshot,
        next: Snapshot,
        now: u64,
    ) -> Option<u64> {
        self.claim_start(state, seen, next, now, false)
            .map(|claim| claim.start)
    }

    /// Claims `start` (`fixed`: worked out for a deadline, not read) as the
    /// start of phase `next`, which a candidate is about to install over `seen`
    /// (one generation earlier) in `state`, unless another candidate claimed
    /// first; returns the claim made or found, or `None` if the breaker has moved
    /// past `seen`.
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
    /// puts it back ([`reclaim`](Self::reclaim)), and so does the transition out
    /// of it, before its claim.
    pub(super) fn claim_start(
        &self,
        state: &StateWord,
        seen: Snapshot,
        next: Snapshot,
        start: u64,
        fixed: bool,
    ) -> Option<Claim> {
        let word = self.word(next);
        // Acquire: pairs with the Release of a claim that wrote it.
        let mut claimed = word.load(Ordering::Acquire);
        loop {
            let tag = claimed & mask(SLOT_TAG_BITS);
            if tag == TimeSlot::tag(next) {
                return Some(Claim::of(claimed));
            }
            if tag != TimeSlot::previous(seen) || state.load() != seen {
                return None;
            }
            let mine = TimeSlot::pack(next, start) | if fixed { FIXED } else { 0 };
            // AcqRel: Release publishes the start to whoever sees `next` (this CAS
            // comes before the state word's); Acquire hands back a newer claim.
            match word.compare_exchange(claimed, mine, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Some(Claim::of(mine)),
                Err(actual) => claimed = actual,
            }
        }
    }

    /// The start of phase `s`, found over by [`start_of`](Self::start_of): `None`
    /// if the breaker has moved past `s`, as `start_of` meant; but if the state
    /// word still holds `s`, its start was claimed over by a candidate a whole tag
    /// cycle late (see [`claim_start`](Self::claim_start)), and this puts it back.
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
                return Some(Claim::of(found).start);
            }
            if state.load() != s {
                return None;
            }
            // Put back unmarked: whether a start was worked out matters only to
            // the candidates for the transition it starts, before its CAS.
            let start = Claim::of(found).start.min(now);
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
