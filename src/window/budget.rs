//! The failure budget: how most failed or slow outcomes skip the window's read.
//!
//! A failure's trip check reads the whole window: every stripe a thread has
//! written, about 130 instructions each and a line or more its owner writes. Yet
//! after a read that did not trip, the next few failures cannot trip either: each
//! adds at most one failure (and one slow call) to the counts, and the calls only
//! grow. The budget lets them skip the read.
//!
//! Every failed or slow sample counted in the window takes a number from one count,
//! between its record and its read. A read that does not trip publishes a *grant*
//! for the tag it read (its window's newest bucket: generation and epoch): "samples
//! of this tag numbered up to `limit` cannot trip", where `limit` is the reader's
//! own number plus the read's allowance
//! ([`policy::rate_verdict`](crate::policy::rate_verdict): how many more failed or
//! slow samples the counts it read can take before either rate is reached, taking
//! the calls as they were read). A sample of the same tag whose number is within
//! the limit skips its read. This is sound:
//!
//! - Every sample numbered below the reader's is wholly in its read: the count's
//!   `AcqRel` read-modify-writes order each earlier sample's record before the
//!   reader's read (through the count's release sequence). This is also what keeps
//!   two failures recorded at once from both missing each other's count (store
//!   buffering): the later-numbered one's read sees both, as a `SeqCst` fence
//!   between each one's record and read made sure before the budget.
//! - So the samples a read may miss are those numbered above it; a sample that
//!   skips on its grant knows all of its tag's samples up to its own number, and
//!   at most `allowance` of them are beyond the read. A sample that takes a
//!   number beyond every grant reads the window, and sees every earlier number's
//!   sample: the one that completes a crossing of the threshold reads, or a grant
//!   made after its whole crossing said no crossing was possible.
//! - Within a tag the window's buckets are fixed (its newest is the tag's) and
//!   their counts only grow, but for the shared stripes' documented rotation race
//!   (one call per racing writer), for which the allowance keeps a margin of one.
//!   A shared stripe's rotating writer delayed between its tag's CAS and its
//!   zeroing can take more (so can one delayed between its check of the old tag
//!   and its emptying before the CAS): the zeroing erases what the others counted
//!   in the new bucket meanwhile (see the implementation notes, "Exactness"), and
//!   a read made
//!   before it may have granted more failures than the erased counts allow, so a
//!   trip can come that many failures late. Only threads beyond the owned stripes
//!   write shared stripes, and only such a delay (a preemption at that instruction)
//!   opens it.
//!   (A reader of a tag can still find less than that window: an owner that has
//!   moved into the next epoch reuses the slot of the window's oldest bucket. That
//!   view mixes two windows; the bound is for the tag's own window, and a failure
//!   in the next epoch takes no grant of this tag: it reads its window anew.)
//!
//! A grant is for one phase and one epoch: its tag names the generation and the
//! epoch's key, and it keeps the reading it was made at, so that the same key a
//! whole key cycle later (2^32 - 1 epochs) is not taken for it. Every transition
//! to a counting phase withdraws the grant, so that the same generation a whole
//! generation cycle later (with tiny generations, 8 transitions) does not find it;
//! a grant published by a reader delayed through a whole generation cycle could
//! still pass as current and delay a trip by at most its allowance, the same
//! rare alias as a permit held through a cycle (see the module docs of
//! [`crate::state`]).
//!
//! # Orderings
//! The count's increment is `AcqRel` (see above). The grant is a seqlock: a
//! publisher takes the sequence word from even to odd by a CAS, fences with
//! `Release`, writes the tag, reading and limit, and stores the next even value
//! with `Release`; a sample loads the sequence word (`Acquire`), the three words,
//! fences with `Acquire` and loads the sequence word again, and trusts the words
//! only if it was even and unchanged. A publisher that finds the word odd (another
//! is writing) or loses the CAS does not publish: the next read will. A withdrawal
//! stores tag 0 (which no bucket has) directly, without the seqlock: a sample that
//! reads it takes no grant, and a grant read whole from before it was sound then
//! and stays so until the phase ends.

use super::Counted;
use crate::sync::{AtomicU64, Ordering, fence};

/// The budget's words, in the window's line: failures write them, and no lean path
/// reads them.
#[derive(Debug)]
pub(crate) struct Budget {
    /// Failed or slow samples numbered so far, in every phase (64 bits: 584 years
    /// of a failure every nanosecond before it wraps).
    count: AtomicU64,
    /// The grant's sequence word: odd while a publisher writes the grant.
    seq: AtomicU64,
    /// The tag the grant is for; 0 for none.
    tag: AtomicU64,
    /// The clock reading of the read that made the grant.
    at: AtomicU64,
    /// Samples numbered up to this can skip their read.
    limit: AtomicU64,
}

/// A sample's number, taken by [`Budget::covers`] for [`Budget::grant`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Number(u64);

impl Budget {
    pub(crate) fn new() -> Budget {
        Budget {
            count: AtomicU64::new(0),
            seq: AtomicU64::new(0),
            tag: AtomicU64::new(0),
            at: AtomicU64::new(0),
            limit: AtomicU64::new(0),
        }
    }

    /// Numbers a failed or slow sample counted as `counted` at reading `now`, and
    /// says whether the grant covers it (then no trip is possible: its read can be
    /// skipped). `bucket_nanos`: the window's bucket length, within which two
    /// readings of one key are of one epoch.
    #[inline]
    pub(crate) fn covers(
        &self,
        counted: &Counted<'_>,
        now: u64,
        bucket_nanos: u64,
    ) -> (bool, Number) {
        // AcqRel: see the module docs (every earlier number's record is before
        // this sample's read; this one's record is before every later number's).
        let number = self.count.fetch_add(1, Ordering::AcqRel).wrapping_add(1);
        // Acquire: pairs with the publisher's final Release store, so the three
        // words below are at least as new as the grant whose even value this
        // reads. The fence below does not supply it: it orders only the loads
        // after it, and with this load Relaxed a sample can read a publisher's
        // final even value with an older limit and trust it (the torn-grant model
        // in loom-tests/tests/budget.rs fails so).
        let s1 = self.seq.load(Ordering::Acquire);
        // Relaxed: validated by the sequence word around them.
        let tag = self.tag.load(Ordering::Relaxed);
        let at = self.at.load(Ordering::Relaxed);
        let limit = self.limit.load(Ordering::Relaxed);
        // Acquire: the loads above come before the second look at the word.
        fence(Ordering::Acquire);
        // Relaxed: ordered by the fence.
        let s2 = self.seq.load(Ordering::Relaxed);
        let whole = s1 == s2 && s1 & 1 == 0;
        let covered =
            whole && tag == counted.tag.0 && now.abs_diff(at) < bucket_nanos && number <= limit;
        (covered, Number(number))
    }

    /// Publishes, for the tag of `counted` at reading `now`, that samples numbered
    /// up to `number + allowance` cannot trip: the read by the sample numbered
    /// `number` did not, and the counts it read can take `allowance` more failed
    /// or slow samples. Does nothing if another publisher is writing.
    pub(crate) fn grant(&self, counted: &Counted<'_>, now: u64, number: Number, allowance: u64) {
        // Relaxed: the CAS below decides; a stale value only fails it.
        let s = self.seq.load(Ordering::Relaxed);
        if s & 1 == 1 {
            return;
        }
        // Relaxed, then a Release fence: the words written below are not seen
        // before the odd value (a reader that sees them sees the word changed).
        if self
            .seq
            .compare_exchange(s, s.wrapping_add(1), Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            return;
        }
        fence(Ordering::Release);
        // Relaxed: published by the Release store of the sequence word.
        self.tag.store(counted.tag.0, Ordering::Relaxed);
        self.at.store(now, Ordering::Relaxed);
        self.limit
            .store(number.0.saturating_add(allowance), Ordering::Relaxed);
        // Release: the words above before the even value.
        self.seq.store(s.wrapping_add(2), Ordering::Release);
    }

    /// The samples numbered so far and the grant's limit (tests).
    #[cfg(all(test, not(cutout_loom)))]
    pub(crate) fn numbered_and_limit(&self) -> (u64, u64) {
        (
            self.count.load(Ordering::Relaxed),
            self.limit.load(Ordering::Relaxed),
        )
    }

    /// Withdraws the grant: a transition began a new phase.
    pub(crate) fn withdraw(&self) {
        // Relaxed: a sample that sees tag 0 takes no grant; one that reads a grant
        // from before this store reads one that was sound (see the module docs).
        self.tag.store(0, Ordering::Relaxed);
    }
}

#[cfg(all(test, not(cutout_loom)))]
mod tests {
    use super::super::{EPOCH_KEYS, Sample, Window};
    use crate::config::WindowConfig;
    use crate::state::{Generation, Snapshot, StateWord};
    use crate::stripe::Stripes;
    use crate::sync::Ordering;

    const MS: u64 = 1_000_000;
    const BUCKET: u64 = 100 * MS;
    const FAIL: Sample = Sample {
        failed: true,
        slow: false,
    };

    fn window() -> (Window, Stripes) {
        let w = Window::new(
            WindowConfig {
                bucket_nanos: BUCKET,
                buckets: 10,
            },
            0,
        );
        let s = Stripes::new(w.buckets());
        (w, s)
    }

    /// Records a failure of closed phase `generation` at `now`; returns whether
    /// the grant covers it, and its number.
    fn fail(w: &Window, s: &Stripes, generation: Generation, now: u64) -> (bool, u64) {
        let phase = Snapshot::closed(generation);
        let word = StateWord::at(phase);
        let counted = w.record(s, s.mine(), (phase, &word), now, FAIL).unwrap();
        let (covered, number) = w.covered(&counted, now);
        (covered, number.0)
    }

    /// Records a failure at `now` in generation 0 and grants `allowance` after it.
    fn grant_after_failure(w: &Window, s: &Stripes, now: u64, allowance: u64) -> u64 {
        let phase = Snapshot::closed(0);
        let word = StateWord::at(phase);
        let counted = w.record(s, s.mine(), (phase, &word), now, FAIL).unwrap();
        let (covered, number) = w.covered(&counted, now);
        assert!(!covered, "no grant yet");
        w.grant(&counted, now, number, allowance);
        number.0
    }

    #[test]
    fn a_grant_covers_its_tags_samples_numbered_up_to_its_limit() {
        let (w, s) = window();
        assert_eq!(grant_after_failure(&w, &s, 5 * MS, 2), 1);
        // The same epoch (0-100 ms): numbers 2 and 3 are within 1 + 2.
        assert_eq!(fail(&w, &s, 0, 6 * MS), (true, 2));
        assert_eq!(fail(&w, &s, 0, 99 * MS), (true, 3));
        assert_eq!(fail(&w, &s, 0, 7 * MS), (false, 4), "beyond the limit");
        // A grant of 0 covers nothing beyond the reader's own number.
        let (w, s) = window();
        grant_after_failure(&w, &s, 5 * MS, 0);
        assert_eq!(fail(&w, &s, 0, 6 * MS), (false, 2));
    }

    #[test]
    fn a_grant_is_for_its_epoch_and_its_phase_only() {
        let (w, s) = window();
        grant_after_failure(&w, &s, 5 * MS, 100);
        assert!(!fail(&w, &s, 0, BUCKET).0, "the next epoch");
        let (w, s) = window();
        grant_after_failure(&w, &s, 5 * MS, 100);
        assert!(!fail(&w, &s, 1, 6 * MS).0, "the next phase");
        let (w, s) = window();
        grant_after_failure(&w, &s, 5 * MS, 100);
        w.withdraw_grant();
        assert!(!fail(&w, &s, 0, 6 * MS).0, "withdrawn by a transition");
    }

    #[test]
    fn a_grant_a_whole_key_cycle_old_is_not_taken_for_its_tags_new_epoch() {
        let (w, s) = window();
        grant_after_failure(&w, &s, 5 * MS, 100);
        // 2^32 - 1 epochs later the epoch's key, and so the tag, comes round again.
        let later = 5 * MS + EPOCH_KEYS * BUCKET;
        let phase = Snapshot::closed(0);
        let word = StateWord::at(phase);
        let counted = w.record(&s, s.mine(), (phase, &word), later, FAIL).unwrap();
        assert_eq!(
            counted.tag.0,
            w.budget.tag.load(Ordering::Relaxed),
            "same tag"
        );
        assert!(!w.covered(&counted, later).0);
    }

    #[test]
    fn a_grant_being_written_is_neither_taken_nor_overwritten() {
        let (w, s) = window();
        grant_after_failure(&w, &s, 5 * MS, 100);
        w.budget.seq.fetch_add(1, Ordering::Relaxed); // a publisher mid-write
        assert!(!fail(&w, &s, 0, 6 * MS).0, "not taken while odd");
        let before = w.budget.limit.load(Ordering::Relaxed);
        grant_after_failure(&w, &s, 7 * MS, 1_000);
        assert_eq!(
            w.budget.limit.load(Ordering::Relaxed),
            before,
            "not overwritten"
        );
        w.budget.seq.fetch_add(1, Ordering::Relaxed); // the publisher is done
        assert!(fail(&w, &s, 0, 8 * MS).0, "the first grant again");
    }
}
