//! The sliding window: a ring of `K` buckets in every stripe.
//!
//! How buckets are tagged, rotated, read and cached is in the
//! [implementation notes](crate::implementation#the-sliding-window).
//!
//! # Orderings
//! An owner's rotation writes the zeroed counts before the tag, and the tag with
//! `Release`; readers load the tag with `Acquire` before the counts, so a reader
//! that sees a new tag sees its zeroed counts (or later increments). An owner's
//! count updates are `Relaxed`: they publish nothing else. A shared stripe's
//! rotation CASes the tag (`AcqRel`) before it empties the counts, so a reader can
//! find the new tag with the counts of the phase before; each count carries its
//! phase's generation, which the reader checks (see `shared_counts`). Within a
//! phase the generation cannot tell an older epoch's counts from the new one's, so
//! the rotation empties the counts before its CAS as well: such a reader finds
//! only what was counted under the old tag since (one outcome per other writer, but
//! for a rotating writer delayed in between). Each count is read
//! and updated with the tagged words' `Acquire` and `AcqRel` (a count of a later
//! phase seen there implies that phase in the state word: see [`crate::state`]).
//! The newest-bucket word is stored with `Release` after the rotation it describes
//! and loaded with `Acquire`; a failure's reader sees a racing failure's rotation
//! through the failure budget's count (an `AcqRel` increment by each, between its
//! record and its read: see [`budget`]), as it does the buckets themselves.
//!
//! An owner's rotation is a small seqlock write, with `Release` fences and no
//! waiting on either side: it finalizes the live bucket and clears the tag of the
//! slot it reuses, then fences, then writes the new bucket and `LIVE_BASE`. A reader
//! of an owned bucket loads the tag, the counts (and for a live bucket the live
//! words, then the calls word again), fences with `Acquire`, and loads the tag
//! again. If anything it read was written after one of the owner's fences, the
//! fence pairing shows it the writes before that fence: a changed tag (it reads the
//! bucket again, which finds the rotation complete or the next one) or a finalized
//! calls word (which it uses instead of the live words). So a reader never pairs a
//! bucket with another bucket's counts or base, and never counts a finalized
//! bucket's calls twice or not at all.
//!
//! The owner's summary (the sum of its finalized buckets in the window that ends
//! at its live bucket) rides the same fence: the rotation clears the summary's
//! sequence word before it, and writes the counts, then the live bucket's slot,
//! then the sequence word (`Release`) after it. A reader loads the sequence word
//! (`Acquire`), the counts and the slot, fences (`Acquire`) and loads the word
//! again; unchanged, everything it read is from one rotation (see `summarized`;
//! `loom-tests/tests/window.rs` fails without any one of these orderings). A write
//! into a finalized bucket (readings gone backwards) clears the word first
//! (`Relaxed`): a failure's reader that must see that write, through the budget's
//! count, sees the cleared word too, and reads the buckets instead. A failure's
//! reader reads its own stripe's summary as its owner (`own_summary`): its own
//! writes, so `Relaxed` loads and no second look.

use crate::config::WindowConfig;
use crate::state::{Generation, Snapshot, StateWord, TagUpdate, TaggedWord};
use crate::stripe::{
    Bucket, CACHE_SPAN, LIVE_BASE, LIVE_CALLS, LIVE_SLOT, NEWEST_OR_DEADLINE, Owned, PHASE_KEY,
    Ring, START_OR_RAMP_SUM, StripeRef, Stripes,
};
use crate::sync::{AtomicU64, Ordering, fence};
use budget::Budget;
pub(crate) use budget::Number;

mod budget;
mod counts;
mod owned;
mod read;
mod shared;

pub use counts::WindowCounts;
pub(crate) use owned::record_live_success;
use owned::*;
use shared::*;

const TAG: usize = 0;
const CALLS: usize = 1;
const FAILURES: usize = 2;
const SLOW: usize = 3;
/// The summary's first word (in the slot after the window's buckets, where a tag
/// would be): the tag of the owner's live bucket when the summary was written, the
/// end of the window it sums; 0 while it is being rewritten or given up.
const SEQ: usize = TAG;

/// The calls word of a live bucket: its calls are counted in `LIVE_CALLS`.
const LIVE: u64 = u64::MAX;

/// Epoch keys: `1..=EPOCH_KEYS` (0 is a bucket never written).
const EPOCH_KEYS: u64 = (1 << 32) - 1;
const KEY_MASK: u64 = u32::MAX as u64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Tag(u64);

impl Tag {
    /// The tag of `generation`'s bucket for `epoch`. Never 0, the tag of a bucket
    /// never written.
    fn new(generation: Generation, epoch: u64) -> Tag {
        Tag(u64::from(generation) << 32 | (epoch % EPOCH_KEYS + 1))
    }

    fn generation(self) -> Generation {
        (self.0 >> 32) as Generation
    }

    fn written(self) -> bool {
        self.0 != 0
    }

    /// The tag `epochs` (fewer than a key cycle) after `self` in its generation,
    /// modulo the key cycle (written).
    fn ahead(self, epochs: u64) -> Tag {
        debug_assert!(epochs < EPOCH_KEYS);
        let mut key = (self.0 & KEY_MASK) + epochs;
        if key > EPOCH_KEYS {
            key -= EPOCH_KEYS;
        }
        Tag(self.0 & !KEY_MASK | key)
    }

    /// The tag `epochs` (1 to less than a key cycle) before `self` in its
    /// generation, modulo the key cycle.
    fn back(self, epochs: u64) -> Tag {
        self.ahead(EPOCH_KEYS - epochs)
    }

    /// How many epochs `self` is behind `mine`, modulo the key cycle (both written).
    fn behind(self, mine: Tag) -> u64 {
        ((mine.0 & KEY_MASK) + EPOCH_KEYS - (self.0 & KEY_MASK)) % EPOCH_KEYS
    }
}

/// One outcome for the window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Sample {
    pub(crate) failed: bool,
    pub(crate) slow: bool,
}

/// A window's shape. It takes clock readings as they come (`now`) and measures
/// epochs from `origin`, the breaker's first reading, so the hot path's cache check
/// compares a reading with no arithmetic first.
///
/// One line of its own: the failure budget's words, which failures write, and the
/// shape, which they read (no lean path reads either).
#[derive(Debug)]
#[repr(align(128))]
pub(crate) struct Window {
    /// The failure budget (see [`budget`]).
    budget: Budget,
    bucket_nanos: u64,
    buckets: u64,
    origin: u64,
    /// Nanoseconds from `origin` to the first epoch with `K - 1` before it (so the
    /// window spans all `K` buckets), if that is within a reading's range.
    full_after: Option<u64>,
}

/// Where [`Window::record`] counted an outcome: the tag of its bucket, and, if the
/// recording thread owns its stripe, that stripe and its ring, which the trip
/// check reads again (see [`Window::sum`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Counted<'s> {
    tag: Tag,
    mine: Option<(Owned<'s>, Ring<'s>)>,
}

/// What a writer finds in its slot.
enum Found {
    /// Its own tag: count.
    Mine,
    /// An earlier phase's or epoch's (or none): rotate, then count.
    Older,
    /// A later one: the outcome is too old to count.
    Newer,
}

impl Window {
    pub(crate) fn new(config: WindowConfig, origin: u64) -> Window {
        let buckets = u64::from(config.buckets);
        Window {
            budget: Budget::new(),
            bucket_nanos: config.bucket_nanos,
            buckets,
            origin,
            full_after: (buckets - 1).checked_mul(config.bucket_nanos),
        }
    }

    /// Buckets a stripe needs for this window.
    pub(crate) fn buckets(&self) -> usize {
        self.buckets as usize
    }

    #[inline]
    fn epoch(&self, now: u64) -> u64 {
        now.saturating_sub(self.origin) / self.bucket_nanos
    }

    /// The span of the owner's summary under tag `tag`: the window's, `K - 1`,
    /// where the tag's key is above that (the window is whole: it has lived at
    /// least that many epochs), and the key less one below (a young window, which
    /// spans the epochs since the breaker began). A whole window whose keys have
    /// wrapped to `K - 1` or less (`K - 1` epochs each key cycle) would be taken
    /// for a young one: its owner keeps no summary then, and its readers take none.
    fn span_of(&self, tag: Tag) -> u64 {
        let key = tag.0 & KEY_MASK;
        if key > self.buckets - 1 {
            self.buckets - 1
        } else {
            key.saturating_sub(1)
        }
    }

    /// How many epochs newer than a writer's a tag of its own phase may be and
    /// still be taken for a racing writer's (so the writer's outcome is late), not
    /// for a tag from the previous turn of the key cycle: a window's length, and at
    /// least 1,024 epochs (a writer stalled that long between reading the clock and
    /// writing may rotate a newer bucket out: one bucket's counts).
    fn ahead_max(&self) -> u64 {
        self.buckets.max(1024)
    }

    /// How a writer with tag `mine`, for phase `phase`, takes the tag `seen`.
    fn found(&self, seen: Tag, mine: Tag, phase: Snapshot, word: &StateWord) -> Found {
        if seen == mine {
            Found::Mine
        } else if !seen.written() {
            Found::Older
        } else if seen.generation() != mine.generation() {
            // Another phase's: an earlier one, unless the breaker has moved on past
            // the writer's (then the writer is late, whatever the tag).
            if word.load() == phase {
                Found::Older
            } else {
                Found::Newer
            }
        } else if mine.behind(seen) <= self.ahead_max() {
            Found::Newer
        } else {
            Found::Older
        }
    }

    /// Counts one outcome at clock reading `now` for the closed phase `phase` (the
    /// state word, which `word` holds unless the breaker has moved on since) in the
    /// caller's stripe. Returns where it counted it, for [`counts_after`], or `None`
    /// if the outcome was too old for its bucket.
    ///
    /// [`counts_after`]: Self::counts_after
    #[inline(always)] // one caller (`record_closed`); called, it costs a failure ~50 instructions
    pub(crate) fn record<'s>(
        &self,
        stripes: &'s Stripes,
        r: StripeRef<'s>,
        (phase, word): (Snapshot, &StateWord),
        now: u64,
        s: Sample,
    ) -> Option<Counted<'s>> {
        match r.as_owned() {
            Some(o) => {
                // The ring, found once: for the live bucket and the trip check.
                let ring = stripes.ring(r);
                let live = Self::is_live(o, phase, now).then(|| Self::live_bucket(ring, o));
                let (bucket, calls) = match live.flatten() {
                    Some(bucket) => (bucket, o.scratch(LIVE_CALLS)),
                    None => self.rotate_owned(o, ring, (phase, word), now)?,
                };
                o.add(calls, 1);
                if s.failed {
                    o.add(&bucket[FAILURES], 1);
                }
                if s.slow {
                    o.add(&bucket[SLOW], 1);
                }
                // Relaxed: only this thread writes its stripe's tags, and it has
                // made sure this one is `phase`'s for `now` (cached or rotated).
                let tag = Tag(bucket[TAG].load(Ordering::Relaxed));
                let mine = Some((o, ring));
                Some(Counted { tag, mine })
            }
            None => {
                let (bucket, tag) = self.rotate_shared(stripes, r, (phase, word), now)?;
                count_shared(bucket, (phase, word), s)?;
                Some(Counted { tag, mine: None })
            }
        }
    }

    /// Puts `counts` in the shared stripe's bucket for `now` and `phase`: a
    /// restored breaker's window (see `Builder::restore`), written before the
    /// breaker is shared, so they count as calls recorded at `now` would. A shared
    /// bucket holds at most `u32::MAX` of each count: totals above half of that are
    /// scaled down to it, keeping their rates (see [`fit_shared`]).
    pub(crate) fn seed(
        &self,
        stripes: &Stripes,
        (phase, word): (Snapshot, &StateWord),
        now: u64,
        counts: WindowCounts,
    ) {
        let r = stripes.stripe(0);
        if let Some((bucket, _)) = self.rotate_shared(stripes, r, (phase, word), now) {
            let fit = fit_shared(counts);
            for (count, n) in bucket[CALLS..]
                .iter()
                .zip([fit.calls, fit.failures, fit.slow])
            {
                let n = n as u32; // fits: see `fit_shared`
                let _ = TaggedWord::update_in(count, phase.generation(), word, |c| {
                    Some(c.saturating_add(n))
                });
            }
        }
    }

    /// The window's counts for `generation` as seen at clock reading `now`.
    pub(crate) fn counts(
        &self,
        stripes: &Stripes,
        generation: Generation,
        now: u64,
    ) -> WindowCounts {
        let epoch = self.epoch(now);
        self.sum(
            stripes,
            Tag::new(generation, epoch),
            (self.buckets - 1).min(epoch),
            None,
        )
    }

    /// Numbers a failed or slow sample that [`record`](Self::record) counted as
    /// `counted` at reading `now`, and says whether the failure budget covers it:
    /// then it cannot trip, and its trip check need not read the window (see
    /// [`budget`]). Call it once per such sample, between its record and its read:
    /// taking the number is what orders the two for other failures.
    #[inline]
    pub(crate) fn covered(&self, counted: &Counted<'_>, now: u64) -> (bool, Number) {
        self.budget.covers(counted, now, self.bucket_nanos)
    }

    /// Grants, after a read by the sample numbered `number` (counted as `counted`
    /// at `now`) that did not trip, that the samples of its tag numbered up to
    /// `number + allowance` cannot trip either (see [`budget`]).
    pub(crate) fn grant(&self, counted: &Counted<'_>, now: u64, number: Number, allowance: u64) {
        self.budget.grant(counted, now, number, allowance);
    }

    /// The failure budget's samples numbered so far and its grant's limit (tests).
    #[cfg(all(test, not(cutout_loom)))]
    pub(crate) fn budget_numbered_and_limit(&self) -> (u64, u64) {
        self.budget.numbered_and_limit()
    }

    /// Withdraws the failure budget's grant: a new phase begins.
    pub(crate) fn withdraw_grant(&self) {
        self.budget.withdraw();
    }
}

/// The most of each count [`Window::seed`] puts in a shared bucket: half of what it
/// holds, so the outcomes counted there after it have the other half.
const SEEDED_MAX: u64 = 1 << 31;

#[cfg(all(test, not(cutout_loom)))]
mod tests;
