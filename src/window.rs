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
use crate::event::WindowCounts;
use crate::state::{Generation, Snapshot, StateWord, TagUpdate, TaggedWord};
use crate::stripe::{Bucket, COUNTERS, OPEN_DEADLINE, Owned, PHASE_KEY, Ring, StripeRef, Stripes};
use crate::sync::{AtomicU64, Ordering, fence};
use budget::Budget;
pub(crate) use budget::Number;

mod budget;

const TAG: usize = 0;
const CALLS: usize = 1;
const FAILURES: usize = 2;
const SLOW: usize = 3;
/// The summary's first word (in the slot after the window's buckets, where a tag
/// would be): the tag of the owner's live bucket when the summary was written, the
/// end of the window it sums; 0 while it is being rewritten or given up.
const SEQ: usize = TAG;

/// Scratch words of an owned stripe. `CACHE_START`, `CACHE_KEY`, `CACHE_SPAN` and
/// `LIVE_SLOT` are the owner's cache of its live bucket: that bucket's start (a
/// clock reading), the phase it counts (the closed state word; `CACHE_KEY` is
/// [`PHASE_KEY`], which the owner's open-deadline cache shares, as it shares
/// `NEWEST`: see [`OPEN_DEADLINE`]), its length in nanoseconds (so the hot path
/// reads only the owner's line; 0 while nothing is cached, which no reading falls
/// within), and its slot in the ring (0 while nothing is cached). The owner sets
/// them whenever it has made sure the bucket carries that tag, and it is the only
/// thread that changes a tag of its stripe, so the cache stays true until the owner
/// moves on. `NEWEST` is the tag of the newest bucket the owner rotated in (0 if
/// none), which readers use to skip a stripe whose every bucket is older than the
/// window. `LIVE_CALLS` counts every call the owner put in a live bucket;
/// `LIVE_BASE` is its value when the current live bucket went live.
const CACHE_START: usize = 0;
const CACHE_KEY: usize = PHASE_KEY;
const NEWEST: usize = OPEN_DEADLINE;
const LIVE_BASE: usize = 3;
const CACHE_SPAN: usize = 4;
/// Not the window's: the ramp's admission sum of a *shared* stripe (see
/// [`crate::ramp`]), whose scratch words the window does not use (its caches are
/// an owner's). Named here so that every scratch word is named in one place.
pub(crate) const RAMP_SUM: usize = CACHE_START;
/// Clear of the lean paths' loads (see [`crate::stripe::LEAN_LOADS`]).
const LIVE_CALLS: usize = 5;
const _: () = assert!(crate::stripe::clear_of_lean_loads(COUNTERS + LIVE_CALLS));
/// The live bucket's slot in the ring, cached with its start, so that finding the
/// live bucket off the lean path (a failure's record) takes no division; readers
/// find it here too, with the owner's summary (see `summarized`).
const LIVE_SLOT: usize = 6;
const _: () = assert!(LIVE_SLOT < crate::stripe::SCRATCH);
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

    /// The owner's fast path: whether `now` and `phase` fall in its live bucket.
    /// Three loads from the owner's counter line, two compares, no division.
    #[inline(always)]
    fn is_live(o: Owned<'_>, phase: Snapshot, now: u64) -> bool {
        // Relaxed: private to the owner.
        let start = o.scratch(CACHE_START).load(Ordering::Relaxed);
        let span = o.scratch(CACHE_SPAN).load(Ordering::Relaxed);
        let key = o.scratch(CACHE_KEY).load(Ordering::Relaxed);
        // One compare for `start <= now < start + span`. The lower bound matters
        // only if readings go backwards, which a `Clock` must not do, but a thread
        // that takes over an exited thread's slot inherits its cache and may bring
        // its own idea of the time (as the tests do).
        let in_bucket = now.wrapping_sub(start) < span;
        // The whole word, not just its generation: nothing to extract, and a phase
        // has one word (every transition moves the generation on). Not `&&`: both
        // tests are cheap, and one branch is cheaper than two.
        in_bucket & phase.key().is(key)
    }

    /// The owner's live bucket in its ring, as its cached slot says (the first
    /// bucket if nothing is cached): no division (from its cached start, it took
    /// two). Always `Some`: the slot is below the window's bucket count (see
    /// `rotate_owned`).
    #[inline]
    fn live_bucket<'s>(ring: Ring<'s>, o: Owned<'s>) -> Option<&'s Bucket> {
        // Relaxed: private to the owner.
        let slot = o.scratch(LIVE_SLOT).load(Ordering::Relaxed);
        ring.bucket(slot as usize)
    }

    /// The bucket for `now` and `phase` and its calls word, off the owner's fast
    /// path: a new bucket goes live (rotating its slot), or a bucket already tagged
    /// for them is counted in directly (only if readings went backwards). `None` if
    /// the slot already holds a newer tag: the outcome is too old to count.
    #[inline(never)]
    #[cold]
    fn rotate_owned<'s>(
        &self,
        o: Owned<'s>,
        ring: Ring<'s>,
        (phase, word): (Snapshot, &StateWord),
        now: u64,
    ) -> Option<(&'s Bucket, &'s AtomicU64)> {
        let epoch = self.epoch(now);
        let slot = (epoch % self.buckets) as usize;
        let mine = Tag::new(phase.generation(), epoch);
        // Both slots are below the window's bucket count: always `Some`.
        let bucket = ring.bucket(slot)?;
        let live = Self::live_bucket(ring, o)?;
        // Relaxed: only this thread writes this stripe's tags.
        let seen = Tag(bucket[TAG].load(Ordering::Relaxed));
        // Relaxed, every scratch word below: private to the owner, or published by
        // the fences and the tag's Release.
        let cached = o.scratch(CACHE_SPAN).load(Ordering::Relaxed) != 0;
        match self.found(seen, mine, phase, word) {
            Found::Mine => {
                return Some(if cached && std::ptr::eq(live, bucket) {
                    (bucket, o.scratch(LIVE_CALLS))
                } else {
                    // Finalized earlier: count in it directly, and leave the cache.
                    // The summary may count this bucket: no reader may take it now
                    // (until the next rotation writes it anew). Relaxed: stored before
                    // the count, and a failure's reader that must see the count sees
                    // this store too (the failure budget's count orders both).
                    if let Some(summary) = ring.summary() {
                        summary[SEQ].store(0, Ordering::Relaxed);
                    }
                    (bucket, &bucket[CALLS])
                });
            }
            Found::Newer => return None,
            Found::Older => {}
        }
        let counted = o.scratch(LIVE_CALLS).load(Ordering::Relaxed);
        if cached {
            // Finalize the live bucket: its calls move into its calls word.
            let base = o.scratch(LIVE_BASE).load(Ordering::Relaxed);
            live[CALLS].store(counted.wrapping_sub(base), Ordering::Relaxed);
        }
        // The owner's newest tag of this phase: while `CACHE_KEY` holds this phase's
        // key, `NEWEST` holds the tag of the owner's newest rotation for it, not an
        // Open deadline (see `OPEN_DEADLINE`). Relaxed: the owner's own words.
        let newest = (o.scratch(CACHE_KEY).load(Ordering::Relaxed) == phase.key().to_bits())
            .then(|| Tag(o.scratch(NEWEST).load(Ordering::Relaxed)));
        let summary = ring.summary();
        // The summary takes a step on from the live bucket's only if that is the
        // newest (a late rotation leaves a newer bucket the step would miss), and
        // only by as many epochs as their starts are apart (see `others`).
        let start = self
            .origin
            .saturating_add(epoch.saturating_mul(self.bucket_nanos));
        let apart = start.checked_sub(o.scratch(CACHE_START).load(Ordering::Relaxed));
        let previous = cached
            .then_some(live)
            .filter(|live| newest == Some(Tag(live[TAG].load(Ordering::Relaxed))))
            .zip(apart);
        // The span of the window that ends at `mine` (the epochs since the breaker
        // began while it is young), if a summary of it can be kept: see `span_of`.
        let span = Some((self.buckets - 1).min(epoch)).filter(|&span| span == self.span_of(mine));
        let others = summary
            .zip(span)
            .map(|(summary, span)| self.others(ring, summary, previous, slot, mine, span));
        // Clear the tag of the slot being reused, so a reader that sees any of the
        // writes below sees a changed tag; and the summary's sequence word, so a
        // reader that sees any of them does not take the summary.
        bucket[TAG].store(0, Ordering::Relaxed);
        if let Some(summary) = summary {
            summary[SEQ].store(0, Ordering::Relaxed);
        }
        // Release: the finalized count and the cleared words come before everything
        // below (see the module's Orderings).
        fence(Ordering::Release);
        o.scratch(LIVE_BASE).store(counted, Ordering::Relaxed);
        bucket[CALLS].store(LIVE, Ordering::Relaxed);
        bucket[FAILURES].store(0, Ordering::Relaxed);
        bucket[SLOW].store(0, Ordering::Relaxed);
        // Release: the zeroed counts are visible with the tag.
        bucket[TAG].store(mine.0, Ordering::Release);
        // The stripe's newest bucket, unless a newer one of this phase is (this
        // outcome arrived late: its reading is earlier than one the owner has
        // counted, as a thread that took over an exited thread's slot may bring).
        // A reader skips the stripe if this word is older than its window, so it
        // must not move back.
        let newer =
            newest.is_some_and(|newest| (1..=self.ahead_max()).contains(&mine.behind(newest)));
        if !newer {
            // Release: a reader that sees this tag here sees the bucket too.
            o.scratch(NEWEST).store(mine.0, Ordering::Release);
        }
        // The owner's next outcomes for this phase in this bucket's time take
        // the fast path.
        o.scratch(CACHE_START).store(start, Ordering::Relaxed);
        o.scratch(CACHE_SPAN)
            .store(self.bucket_nanos, Ordering::Relaxed);
        o.scratch(CACHE_KEY)
            .store(phase.key().to_bits(), Ordering::Relaxed);
        o.scratch(LIVE_SLOT).store(slot as u64, Ordering::Relaxed);
        if let (Some(summary), Some(others)) = (summary, others) {
            // Relaxed: published by the sequence word's Release below.
            summary[CALLS].store(others.calls, Ordering::Relaxed);
            summary[FAILURES].store(others.failures, Ordering::Relaxed);
            summary[SLOW].store(others.slow, Ordering::Relaxed);
            // Release: a reader that sees this word sees the counts above and the
            // live bucket's slot (see `summarized`).
            summary[SEQ].store(mine.0, Ordering::Release);
        }
        Some((bucket, o.scratch(LIVE_CALLS)))
    }

    /// What a rotation to `mine`, into ring slot `slot`, keeps in the summary: the
    /// sum of the owner's other buckets in the window that ends at `mine` and spans
    /// `span` epochs before it, all finalized (the live one just was). Called by
    /// the owner, before it clears anything: its own words, so every load is
    /// `Relaxed`.
    ///
    /// `previous` is the bucket that was live if it is also the owner's newest,
    /// with the nanoseconds from its start to `mine`'s. When the owner moves on
    /// from it by fewer than `K` epochs in one phase and its summary holds (the
    /// window that ends at `previous`), a step: `previous` joins the sum and the
    /// buckets of the epochs the window has left leave it, one bucket read for
    /// each epoch passed. Otherwise (after a gap of a whole window, a phase
    /// change, a summary given up, a reading gone backwards) the buckets are
    /// summed anew, `K` read: at most once a window's length of time, but for
    /// readings out of order. The epochs passed are the tags' distance, checked
    /// against the starts' (keys repeat every key cycle, and a ring's slots do
    /// not repeat with them: a step across whole cycles would take out buckets of
    /// other epochs than those the window has left).
    fn others(
        &self,
        ring: Ring<'_>,
        summary: &Bucket,
        previous: Option<(&Bucket, u64)>,
        slot: usize,
        mine: Tag,
        span: u64,
    ) -> WindowCounts {
        let k = self.buckets as usize;
        let Some((previous, apart)) = previous else {
            return self.summed_anew(ring, slot, mine, span);
        };
        let last = Tag(previous[TAG].load(Ordering::Relaxed));
        let passed = last.behind(mine);
        if summary[SEQ].load(Ordering::Relaxed) != last.0
            || last.generation() != mine.generation()
            || passed == 0
            || passed >= self.buckets
            || passed.checked_mul(self.bucket_nanos) != Some(apart)
            // The window that ends at `mine` holds `previous` and begins no
            // earlier than the one that ends at it (so the readings are `passed`
            // epochs apart, not a key cycle more).
            || passed > span
            || span > self.span_of(last) + passed
        {
            return self.summed_anew(ring, slot, mine, span);
        }
        let mut c = counts(summary);
        c.add(counts(previous));
        // The window has left `passed` epochs (none while young), whose slots run
        // back from `mine`'s, `j` slots back the slot of the epoch `K + j` before
        // `mine` and of the one `j` before it. Its bucket leaves the sum if it is
        // the former's and was in the window that ends at `previous`; it joins the
        // sum if it is the latter's (never, but for a bucket of another key cycle
        // whose key is that epoch's: see `summed_anew`).
        let in_summary = in_window(last, self.span_of(last));
        let mut gone = slot;
        for j in 0..passed {
            if let Some(bucket) = ring.bucket(gone) {
                let tag = Tag(bucket[TAG].load(Ordering::Relaxed));
                if tag == mine.back(self.buckets + j) && in_summary(tag.0) {
                    // Wrapping: in the sum (a finalized bucket written since would
                    // have given the summary up).
                    let left = counts(bucket);
                    c = WindowCounts {
                        calls: c.calls.wrapping_sub(left.calls),
                        failures: c.failures.wrapping_sub(left.failures),
                        slow: c.slow.wrapping_sub(left.slow),
                    };
                } else if j > 0 && tag == mine.back(j) {
                    c.add(counts(bucket));
                }
            }
            gone = gone.checked_sub(1).unwrap_or(k - 1);
        }
        debug_assert_eq!(c, self.summed_anew(ring, slot, mine, span), "a step on");
        c
    }

    /// [`others`](Self::others) from every bucket: those in the window that ends
    /// at `mine` but for the one in `mine`'s slot, which is being reused. A bucket
    /// counts only in the slot its key gives (its epoch's, counted back from
    /// `mine`'s slot): keys repeat every key cycle and the ring's slots do not
    /// repeat with them, so a bucket of another cycle whose key reads as current
    /// sits elsewhere (but where whole cycles bring it back to its key's slot),
    /// and a summary that took it would keep it after its key left the window,
    /// for as long as its owner steps on. (Readers of the buckets take it, for
    /// one window's length a key cycle: the implementation notes' exception.)
    fn summed_anew(&self, ring: Ring<'_>, slot: usize, mine: Tag, span: u64) -> WindowCounts {
        let k = self.buckets as usize;
        let in_window = in_window(mine, span);
        let (lines, rest) = ring.buckets();
        let mut c = WindowCounts::default();
        for (at, bucket) in lines
            .iter()
            .flat_map(|line| line.iter())
            .chain(rest)
            .enumerate()
        {
            // Relaxed, every load: the owner's own words.
            let tag = Tag(bucket[TAG].load(Ordering::Relaxed));
            // Fewer than `k` epochs behind, if in the window: no division.
            let behind = || tag.behind(mine) as usize;
            let home = || {
                slot.checked_sub(behind())
                    .unwrap_or_else(|| slot + k - behind())
            };
            if at != slot && in_window(tag.0) && home() == at {
                let counts = counts(bucket);
                debug_assert_ne!(counts.calls, LIVE, "no bucket is live during a rotation");
                c.add(counts);
            }
        }
        c
    }

    /// The shared stripe's bucket for `now` and `generation`, rotating it in if it
    /// holds an older epoch or generation, and its tag. `None` if it already holds
    /// a newer one: the outcome is too old to count.
    #[inline(never)]
    #[cold]
    fn rotate_shared<'s>(
        &self,
        stripes: &'s Stripes,
        r: StripeRef<'s>,
        (phase, word): (Snapshot, &StateWord),
        now: u64,
    ) -> Option<(&'s Bucket, Tag)> {
        let epoch = self.epoch(now);
        let mine = Tag::new(phase.generation(), epoch);
        let bucket = stripes.bucket(r, (epoch % self.buckets) as usize);
        // Acquire: pairs with the Release of the rotation that wrote the tag.
        let mut seen = Tag(bucket[TAG].load(Ordering::Acquire));
        loop {
            match self.found(seen, mine, phase, word) {
                Found::Mine => break,
                Found::Newer => return None,
                Found::Older => {}
            }
            // An earlier phase's bucket, or an older epoch's of this phase: either
            // way out of the window this writer counts in (an earlier phase is
            // over: `found` saw this one in the state word, up to a whole
            // generation cycle's alias), so its counts are emptied before the tag
            // changes too, whether or not the CAS below then succeeds. A reader
            // that finds the new tag before the emptying after the CAS then finds
            // no more than what the old tag's writers counted since this one (one
            // outcome each), not the whole older bucket: counts carry only the
            // generation, so it takes an older epoch's for the new one's. The
            // emptying after a successful CAS, which acquires every count made
            // before it, is what guarantees no earlier phase's count outlives the
            // tag; this one leaves it less to take, should this writer be delayed
            // in between (see `empty_counts` and the implementation notes,
            // "Exactness"). Only while the tag is still the one it read: counts
            // carry only the generation, so a writer that read an older epoch's
            // tag before another writer's rotation would erase what the writers
            // of the new epoch counted since. (Delayed between this load and the
            // emptying, it still can, as a rotating writer delayed between its
            // CAS and its zeroing can.)
            // Acquire: as the load above.
            if seen.written() && bucket[TAG].load(Ordering::Acquire) == seen.0 {
                empty_counts(bucket, seen.generation(), mine.generation());
            }
            // AcqRel: Release publishes the tag; Acquire hands back a newer one.
            match bucket[TAG].compare_exchange(seen.0, mine.0, Ordering::AcqRel, Ordering::Acquire)
            {
                // A bucket never written (tag 0) holds no counts: nothing to
                // zero, and no zeroing to race the other writers' first
                // increments.
                Ok(_) if !seen.written() => break,
                Ok(_) => {
                    empty_counts(bucket, seen.generation(), mine.generation());
                    break;
                }
                Err(actual) => seen = Tag(actual),
            }
        }
        Some((bucket, mine))
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

    /// [`counts`](Self::counts) at the reading `now` at which [`record`](Self::record)
    /// returned `counted`, for the same phase: what a failure's trip check reads.
    /// No division: the tag `record` counted under is the newest the window
    /// takes, and whether the window is full yet (the breaker has lived at least
    /// `K - 1` epochs) is one compare of the reading.
    #[inline(always)] // as `record`
    pub(crate) fn counts_after(
        &self,
        stripes: &Stripes,
        counted: Counted<'_>,
        now: u64,
    ) -> WindowCounts {
        let last = counted.tag;
        let span = match self.full_after {
            Some(full) if now.saturating_sub(self.origin) >= full => self.buckets - 1,
            // Not full: fewer than `K - 1` epochs since the breaker began, so its
            // keys have not wrapped, and `now`'s epoch is its key less 1.
            _ => (last.0 & KEY_MASK) - 1,
        };
        self.sum(stripes, last, span, counted.mine)
    }

    /// The counts of the buckets tagged `last`'s generation and a key from `span`
    /// epochs before `last`'s through `last`'s, in every stripe. `mine`: the
    /// reader's own stripe and its ring, if it owns one, read as its owner reads
    /// it (see [`own_summary`]).
    fn sum(
        &self,
        stripes: &Stripes,
        last: Tag,
        span: u64,
        mine: Option<(Owned<'_>, Ring<'_>)>,
    ) -> WindowCounts {
        let in_window = in_window(last, span);
        let mut c = WindowCounts::default();
        for r in stripes.shared() {
            let (lines, rest) = stripes.ring(r).buckets();
            // (Here `flat_map` measured better than nested loops.)
            for bucket in lines.iter().flat_map(|line| line.iter()).chain(rest) {
                // Acquire: see the module's Orderings.
                if in_window(bucket[TAG].load(Ordering::Acquire)) {
                    c.add(shared_counts(bucket, last.generation()));
                }
            }
        }
        // An owned stripe whose newest bucket is another phase's or older than the
        // window (an idle thread's) has nothing to add: its newest tag never moves
        // back (see `rotate_owned`), so every other bucket is older still, or
        // another phase's. (A newest bucket newer than `last`, the owner's clock
        // having moved on since this thread's reading, does not skip it.)
        let recent = self::in_window(last.ahead(self.ahead_max()), span + self.ahead_max());
        // An owner's summary under `last` spans what this window does (see
        // `span_of`), unless this is a whole window whose keys have wrapped.
        let summarized_here = span == self.span_of(last);
        // The reader's own stripe, summarized: read as its owner reads it.
        let mine = mine
            .filter(|_| summarized_here)
            .and_then(|(o, ring)| Some((o, own_summary(o, ring, last)?)));
        if let Some((_, counts)) = mine {
            c.add(counts);
        }
        for r in stripes.owned() {
            if mine.is_some_and(|(o, _)| r.is(o.stripe())) {
                continue; // counted above
            }
            // Acquire: pairs with the owner's Release of the tag.
            if !recent(Stripes::scratch(r, NEWEST).load(Ordering::Acquire)) {
                continue;
            }
            let ring = stripes.ring(r);
            if let Some(counts) = summarized_here.then(|| summarized(ring, r, last)).flatten() {
                c.add(counts);
                continue;
            }
            let mut visit = |bucket: &Bucket| {
                // Acquire: see the module's Orderings (and `owned_counts`).
                let tag = bucket[TAG].load(Ordering::Acquire);
                if in_window(tag) {
                    c.add(owned_counts(r, bucket, tag, in_window));
                }
            };
            // (Nested loops: a `flat_map` here cost a failure 100 instructions more.)
            let (lines, rest) = ring.buckets();
            for line in lines {
                for bucket in line.iter() {
                    visit(bucket);
                }
            }
            for bucket in rest {
                visit(bucket);
            }
        }
        c
    }
}

/// An owned stripe's counts in the window that ends at `last` (and spans what a
/// summary under `last` spans: see `Window::span_of`), from its owner's summary of
/// the finalized buckets and the live bucket: two buckets read instead of `K`.
/// `None` if the summary is of another window (the owner's newest bucket is not
/// `last`'s), was given up (the owner wrote into a finalized bucket, readings
/// having gone backwards) or is being rewritten, or if the live bucket has moved
/// on: the caller reads the buckets instead.
///
/// A small seqlock read: the owner clears the sequence word before its `Release`
/// fence and rewrites it last, with `Release`, after the summary's counts and the
/// live bucket's slot. A reader that takes the word (`Acquire`), reads the counts
/// and the slot, fences (`Acquire`) and finds the word unchanged has read them all
/// from that one rotation: had it read anything a later rotation wrote after its
/// fence, the fences would show it the cleared word.
#[inline]
fn summarized(ring: Ring<'_>, r: StripeRef<'_>, last: Tag) -> Option<WindowCounts> {
    let summary = ring.summary()?;
    // Acquire: pairs with the rotation's Release of the word.
    if summary[SEQ].load(Ordering::Acquire) != last.0 {
        return None;
    }
    // Relaxed, every load until the fence: validated by the sequence word.
    let mut c = counts(summary);
    let slot = Stripes::scratch(r, LIVE_SLOT).load(Ordering::Relaxed);
    // Acquire: see above.
    fence(Ordering::Acquire);
    if summary[SEQ].load(Ordering::Relaxed) != last.0 {
        return None;
    }
    let live = ring.bucket(slot as usize)?;
    // Acquire: see the module's Orderings.
    let tag = live[TAG].load(Ordering::Acquire);
    if tag != last.0 {
        return None; // rotated out since (the owner is a window's length further on)
    }
    // Live or finalized since, `last`'s counts (none if its slot is reused meanwhile).
    c.add(owned_counts(r, live, tag, |t| t == last.0));
    Some(c)
}

/// [`summarized`] for the summary's owner, read after its record under `last`:
/// no sequence word to check twice and no fence, since no other thread writes
/// these words, and the live bucket is `last`'s whenever the summary is (only a
/// rotation writes the sequence word, and it makes `last`'s bucket live; a write
/// into a finalized bucket clears the word first). `None` if the summary is of
/// another window, or was given up: the caller reads the buckets instead.
#[inline]
fn own_summary(o: Owned<'_>, ring: Ring<'_>, last: Tag) -> Option<WindowCounts> {
    let summary = ring.summary()?;
    // Relaxed, every load: the owner's own words.
    if summary[SEQ].load(Ordering::Relaxed) != last.0 {
        return None;
    }
    let slot = o.scratch(LIVE_SLOT).load(Ordering::Relaxed);
    let live = ring.bucket(slot as usize)?;
    let counted = o.scratch(LIVE_CALLS).load(Ordering::Relaxed);
    let base = o.scratch(LIVE_BASE).load(Ordering::Relaxed);
    let mut c = counts(summary);
    c.add(WindowCounts {
        calls: counted.wrapping_sub(base),
        failures: live[FAILURES].load(Ordering::Relaxed),
        slow: live[SLOW].load(Ordering::Relaxed),
    });
    debug_assert_eq!(Some(c), summarized(ring, o.stripe(), last));
    Some(c)
}

/// Whether a tag is `last`'s generation's, with a key from `span` epochs before
/// `last`'s through `last`'s (modulo the key cycle): in the window that ends at
/// `last`. Those tags are one range of the word, `last - span ..= last`, unless
/// the keys wrap within it (for one window's length each key cycle): then a tag
/// is checked part by part. One subtraction and one compare otherwise (a tag of
/// another generation, or 0, never written, is far outside the range), for every
/// bucket a reader visits.
#[inline]
fn in_window(last: Tag, span: u64) -> impl Fn(u64) -> bool + Copy {
    let wraps = (last.0 & KEY_MASK) <= span;
    let first = last.0.wrapping_sub(span);
    move |tag| match wraps {
        false => tag.wrapping_sub(first) <= span,
        true => in_window_by_parts(last, span, Tag(tag)),
    }
}

/// [`in_window`] part by part: written, `last`'s generation, at most `span` keys
/// behind `last`'s.
fn in_window_by_parts(last: Tag, span: u64, tag: Tag) -> bool {
    tag.written() && tag.generation() == last.generation() && tag.behind(last) <= span
}

/// Counts a success in the owner's live bucket if it holds `now` and `phase` (see
/// [`Window::is_live`]): one increment. Returns `false` having written nothing
/// otherwise. Needs no `Window`: the owner's cache holds all it reads.
#[inline(always)]
pub(crate) fn record_live_success(o: Owned<'_>, phase: Snapshot, now: u64) -> bool {
    let live = Window::is_live(o, phase, now);
    if live {
        o.add(o.scratch(LIVE_CALLS), 1);
    }
    live
}

/// Empties the counts of generation `from` in `bucket` (a shared stripe's), the
/// generation of the tag a rotation to generation `to` replaced (or will), or of
/// a writer whose bucket a later phase has taken (see [`second_look`]). Each count
/// is a tagged word (see [`count_shared`]), emptied and tagged with `to` whatever
/// the breaker has done since (the writer may be stale by now).
///
/// Those of an older epoch of the same phase (`from == to`) are that phase's too:
/// an increment that read the old tag can land on either side of the emptying
/// (the race the implementation notes bound, "Exactness"). Those of an earlier
/// phase read as none for this one already, and are emptied, and re-tagged even
/// where empty: a writer of that phase delayed past the rotation would count in a
/// word still tagged with its own generation unchecked, and a count left for a
/// whole generation cycle reads as current. A count of `to` (its writers may have
/// found the new tag already) or of any third generation stays: a writer that
/// counts into one takes a second look.
#[cold]
fn empty_counts(bucket: &Bucket, from: Generation, to: Generation) {
    for count in &bucket[CALLS..] {
        TaggedWord::empty_in(count, from, to);
    }
}

/// Counts one outcome `s` of the closed phase `phase` in `bucket`, a shared
/// stripe's, which its writer has found (or rotated) tagged `phase`'s. Each count
/// is a [`TaggedWord`] of the phase that wrote it, updated by CAS: an increment by
/// a writer whose phase the breaker has left since it read the tag (stale) finds
/// the later phase's count, or the breaker moved on, and writes nothing. So no
/// outcome of an earlier phase counts in a later phase's window, however the
/// writer is delayed. `None` if the calls count took nothing (stale, or full: a
/// shared bucket holds at most `u32::MAX` calls, at least 49 days of a call every
/// millisecond into one bucket of one shared stripe).
///
/// A writer that found a count empty (another phase's, or its own phase's just
/// emptied) passed the staleness check, if any, before its CAS: a rotation by a
/// later phase can come between the two and leave the count as it was, and the
/// writer's count (and those of its phase's other delayed writers, who find the
/// count their own and check nothing) would then sit under the later tag until
/// that generation came round again a whole cycle later. So such a writer takes
/// a second look (see [`second_look`]).
#[inline(never)] // off the owners' paths: kept out of `record_closed`
fn count_shared(bucket: &Bucket, (phase, word): (Snapshot, &StateWord), s: Sample) -> Option<()> {
    let generation = phase.generation();
    let mut first = false;
    let mut add = |count| match TaggedWord::update_in(count, generation, word, |n| n.checked_add(1))
    {
        TagUpdate::Updated { old, .. } => {
            first |= old == 0;
            true
        }
        // Full or stale: counted nowhere.
        TagUpdate::Declined(_) | TagUpdate::Stale(_) => false,
    };
    if !add(&bucket[CALLS]) {
        return None;
    }
    // A failure or slow call whose count is full or whose phase has ended since
    // its call was counted is not counted: the rates can only be read low.
    if s.failed {
        add(&bucket[FAILURES]);
    }
    if s.slow {
        add(&bucket[SLOW]);
    }
    if first && !second_look(bucket, generation) {
        return None;
    }
    Some(())
}

/// A writer of `generation` that counted into an empty count of `bucket` reads
/// its tag again, by a read-modify-write (so the newest; and a rotation that
/// comes after it reads this writer's counts). If another phase has the bucket
/// now, it empties every count of `generation` there for that phase, as the
/// rotation would have (see [`empty_counts`]), its phase's other delayed writers'
/// counts with its own, and says so (`false`): its outcome counts nowhere. (The
/// emptying leaves empty counts of that phase, which a writer that counts into
/// them looks at again in turn.)
#[cold]
fn second_look(bucket: &Bucket, generation: Generation) -> bool {
    // AcqRel: Release orders this writer's counts before a rotation that reads the
    // tag after this; Acquire, a rotation before this read before the emptying.
    // (An idempotent read-modify-write with a weaker ordering may compile to a
    // plain load, which need not read the newest tag.)
    let now = Tag(bucket[TAG].fetch_add(0, Ordering::AcqRel));
    if now.generation() == generation {
        return true;
    }
    empty_counts(bucket, generation, now.generation());
    false
}

/// A shared bucket's three counts for `generation`: those of another phase (a
/// rotation in progress) read as none.
#[inline]
fn shared_counts(bucket: &Bucket, generation: Generation) -> WindowCounts {
    let count = |i| u64::from(TaggedWord::data_in(&bucket[i], generation));
    WindowCounts {
        calls: count(CALLS),
        failures: count(FAILURES),
        slow: count(SLOW),
    }
}

/// The most of each count [`Window::seed`] puts in a shared bucket: half of what it
/// holds, so the outcomes counted there after it have the other half.
const SEEDED_MAX: u64 = 1 << 31;

/// `counts` scaled to at most [`SEEDED_MAX`] each, if they are larger: the largest
/// becomes `SEEDED_MAX` and the others keep their ratio to it, rounded up (so a
/// restored rate at a threshold still reaches it; a rate can read higher by less
/// than one part in two billion).
fn fit_shared(counts: WindowCounts) -> WindowCounts {
    let most = counts.calls.max(counts.failures).max(counts.slow);
    let full = SEEDED_MAX;
    if most <= full {
        return counts;
    }
    let scale = |n: u64| (u128::from(n) * u128::from(full)).div_ceil(u128::from(most)) as u64;
    WindowCounts {
        calls: scale(counts.calls),
        failures: scale(counts.failures),
        slow: scale(counts.slow),
    }
}

/// A bucket's (or the summary's) three counts, as they are: `Relaxed` loads, which
/// each caller validates or orders (a tag's `Acquire`, a sequence word, the owner's
/// own writes).
#[inline]
fn counts(bucket: &Bucket) -> WindowCounts {
    WindowCounts {
        calls: bucket[CALLS].load(Ordering::Relaxed),
        failures: bucket[FAILURES].load(Ordering::Relaxed),
        slow: bucket[SLOW].load(Ordering::Relaxed),
    }
}

/// An owned bucket's counts, read consistently with its tag (see the module's
/// Orderings), if it is in the window (`in_window`): `tag` is the tag its reader
/// has loaded with `Acquire`, and found in the window.
#[inline]
fn owned_counts(
    r: StripeRef<'_>,
    bucket: &Bucket,
    mut tag: u64,
    in_window: impl Fn(u64) -> bool,
) -> WindowCounts {
    loop {
        // Relaxed, every load until the last fence: validated by the tag.
        let failures = bucket[FAILURES].load(Ordering::Relaxed);
        let slow = bucket[SLOW].load(Ordering::Relaxed);
        let mut calls = bucket[CALLS].load(Ordering::Relaxed);
        if calls == LIVE {
            let counted = Stripes::scratch(r, LIVE_CALLS).load(Ordering::Relaxed);
            let base = Stripes::scratch(r, LIVE_BASE).load(Ordering::Relaxed);
            // Acquire: if `counted` or `base` is from after the owner finalized this
            // bucket, the calls word below is final.
            fence(Ordering::Acquire);
            calls = match bucket[CALLS].load(Ordering::Relaxed) {
                LIVE => counted.wrapping_sub(base),
                finalized => finalized,
            };
        }
        // Acquire: if anything above is from a later rotation of this slot, the tag
        // has changed: read the bucket again.
        fence(Ordering::Acquire);
        let again = bucket[TAG].load(Ordering::Relaxed);
        if again == tag {
            return WindowCounts {
                calls,
                failures,
                slow,
            };
        }
        if !in_window(again) {
            return WindowCounts::default();
        }
        tag = again;
    }
}

#[cfg(all(test, not(cutout_loom)))]
mod tests {
    use super::*;
    use crate::state::GEN_MASK;
    use crate::stripe::SHARED;
    use proptest::prelude::*;

    const MS: u64 = 1_000_000;

    fn window(buckets: u32, bucket_ms: u64) -> (Window, Stripes) {
        let w = Window::new(
            WindowConfig {
                bucket_nanos: bucket_ms * MS,
                buckets,
            },
            0,
        );
        let s = Stripes::new(w.buckets());
        (w, s)
    }

    /// Closed phase `generation`, with a state word that holds it: the current
    /// phase.
    fn phase(generation: Generation) -> (Snapshot, &'static StateWord) {
        let s = Snapshot::closed(generation);
        (s, Box::leak(Box::new(StateWord::at(s))))
    }

    const FAIL: Sample = Sample {
        failed: true,
        slow: false,
    };
    const OK: Sample = Sample {
        failed: false,
        slow: false,
    };

    #[test]
    fn after_an_idle_gap_longer_than_the_window_one_failure_counts_as_one_call() {
        let (w, s) = window(10, 100);
        for _ in 0..50 {
            w.record(&s, s.mine(), phase(0), 5 * MS, OK);
        }
        let later = 5 * MS + 1000 * MS + 1;
        assert!(w.record(&s, s.mine(), phase(0), later, FAIL).is_some());
        assert_eq!(
            w.counts(&s, 0, later),
            WindowCounts {
                calls: 1,
                failures: 1,
                slow: 0
            }
        );
    }

    #[test]
    fn the_window_is_exact_at_bucket_edges() {
        let (w, s) = window(2, 100);
        w.record(&s, s.mine(), phase(0), 99 * MS, FAIL); // last instant of epoch 0
        w.record(&s, s.mine(), phase(0), 100 * MS, OK); // first instant of epoch 1
        assert_eq!(w.counts(&s, 0, 199 * MS).calls, 2);
        assert_eq!(
            w.counts(&s, 0, 200 * MS),
            WindowCounts {
                calls: 1,
                failures: 0,
                slow: 0
            }
        );
        assert_eq!(w.counts(&s, 0, 300 * MS).calls, 0);
    }

    #[test]
    fn a_one_bucket_window_forgets_at_each_edge() {
        let (w, s) = window(1, 50);
        w.record(&s, s.mine(), phase(0), 10 * MS, FAIL);
        assert_eq!(w.counts(&s, 0, 49 * MS).failures, 1);
        assert_eq!(w.counts(&s, 0, 50 * MS).failures, 0);
    }

    #[test]
    fn another_generation_does_not_count_and_an_older_one_cannot_rotate() {
        let (w, s) = window(4, 100);
        w.record(&s, s.mine(), phase(1), 0, FAIL);
        assert_eq!(w.counts(&s, 2, 0).calls, 0);
        assert!(
            w.record(&s, s.mine(), phase(2), 0, OK).is_some(),
            "a newer generation rotates"
        );
        assert!(
            w.record(&s, s.mine(), (phase(1).0, phase(2).1), 0, FAIL)
                .is_none(),
            "an earlier one, once the breaker has moved on, is too late"
        );
        assert_eq!(
            w.counts(&s, 2, 0),
            WindowCounts {
                calls: 1,
                failures: 0,
                slow: 0
            }
        );
    }

    #[test]
    fn an_owners_first_bucket_finalizes_nothing() {
        let (w, s) = window(4, 100);
        let shared = s.stripe(0);
        w.record(&s, shared, phase(0), 0, FAIL);
        w.record(&s, shared, phase(0), 0, OK);
        // The first owned stripe's owner has no live bucket yet (its empty cache
        // names its bucket 0): going live finalizes nothing.
        assert!(w.record(&s, s.stripe(SHARED), phase(0), 0, OK).is_some());
        assert_eq!(
            w.counts(&s, 0, 0),
            WindowCounts {
                calls: 3,
                failures: 1,
                slow: 0
            }
        );
    }

    #[test]
    fn the_live_bucket_is_finalized_when_the_owner_moves_on_and_counted_once() {
        let (w, s) = window(4, 100);
        // Stripe SHARED is owned, and only this thread writes this breaker's stripes.
        let r = s.stripe(SHARED);
        let o = r.as_owned().expect("stripe 1 is owned");
        for _ in 0..3 {
            w.record(&s, r, phase(0), 0, OK);
        }
        assert!(
            record_live_success(o, phase(0).0, 50 * MS),
            "epoch 0 is live"
        );
        assert!(
            !record_live_success(o, phase(0).0, 100 * MS),
            "epoch 1 is not live yet"
        );
        assert_eq!(w.counts(&s, 0, 0).calls, 4, "live: counted in LIVE_CALLS");
        w.record(&s, r, phase(0), 100 * MS, FAIL); // epoch 1 goes live; epoch 0 is finalized
        assert!(record_live_success(o, phase(0).0, 150 * MS));
        let bucket = s.bucket(r, 0);
        assert_eq!(bucket[CALLS].load(Ordering::Relaxed), 4, "finalized");
        assert_eq!(s.bucket(r, 1)[CALLS].load(Ordering::Relaxed), LIVE);
        let both = w.counts(&s, 0, 150 * MS);
        assert_eq!((both.calls, both.failures), (6, 1));
        // A reading from before the live bucket (a thread that inherits this slot
        // with its own idea of the time) counts in the finalized bucket directly.
        assert!(!record_live_success(o, phase(0).0, 10 * MS));
        assert!(w.record(&s, r, phase(0), 10 * MS, OK).is_some());
        assert_eq!(bucket[CALLS].load(Ordering::Relaxed), 5);
        assert_eq!(w.counts(&s, 0, 150 * MS).calls, 7);
        assert!(
            record_live_success(o, phase(0).0, 150 * MS),
            "epoch 1 is still live"
        );
        assert_eq!(w.counts(&s, 0, 150 * MS).calls, 8);
    }

    #[test]
    fn an_open_deadline_in_the_newest_tags_word_is_not_taken_for_a_newer_tag() {
        // While its breaker is Open, an owner's newest-tag word holds the deadline
        // it cached (`OPEN_DEADLINE`) and its phase-key word the Open phase's key.
        // A deadline whose halves read as a key just ahead of the next closed
        // phase's first bucket (of another generation) must not stop that bucket's
        // rotation from writing the word: readers would take the stripe for idle.
        let (w, s) = window(4, 1);
        let r = s.mine();
        let now = 10 * MS; // epoch 10: key 11
        Stripes::scratch(r, OPEN_DEADLINE).store(7 << 32 | 12, Ordering::Relaxed);
        let open = phase(2).0.key().to_bits(); // any phase but the closed one below
        Stripes::scratch(r, PHASE_KEY).store(open, Ordering::Relaxed);
        let counted = w.record(&s, r, phase(3), now, FAIL).unwrap();
        assert_eq!(w.counts(&s, 3, now).failures, 1);
        assert_eq!(w.counts_after(&s, counted, now).failures, 1);
    }

    #[test]
    fn a_young_windows_read_takes_no_bucket_a_key_cycle_ahead() {
        // A window in its first `K - 1` epochs spans only the epochs since the
        // breaker began, also in a failure's read: a bucket whose key sits just
        // before key 1 in the key cycle (a thread whose clock reading is a whole
        // cycle ahead, 49.7 days of 1 ms buckets, as a clock advanced by
        // `Duration::MAX` gives) is not in it, though a span of `K - 1` keys
        // would take it.
        let (w, s) = window(4, 1);
        let ahead = (EPOCH_KEYS - 1) * MS; // key EPOCH_KEYS: one key before key 1
        std::thread::scope(|scope| {
            scope.spawn(|| w.record(&s, s.mine(), phase(3), ahead, FAIL));
        });
        for epoch in 0..3 {
            let now = epoch * MS;
            let counted = w.record(&s, s.mine(), phase(3), now, FAIL).unwrap();
            let own = epoch + 1;
            assert_eq!(w.counts(&s, 3, now).failures, own, "epoch {epoch}");
            assert_eq!(
                w.counts_after(&s, counted, now).failures,
                own,
                "epoch {epoch}"
            );
        }
        // A thread a whole key cycle ahead whose keys have wrapped to 1 and 2: its
        // buckets of those keys read as this young window's (the key cycle's
        // exception, see the implementation notes), but its window, whole, spans
        // the keys before them too, so its owner keeps no summary of it that this
        // window could take for its own (two of its failures count, not four).
        let (w, s) = window(4, 1);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                for epoch in EPOCH_KEYS - 2..EPOCH_KEYS + 2 {
                    w.record(&s, s.mine(), phase(3), epoch * MS, FAIL).unwrap();
                }
            });
        });
        for epoch in 0..2 {
            w.record(&s, s.mine(), phase(3), epoch * MS, FAIL).unwrap();
        }
        assert_eq!(w.counts(&s, 3, MS).failures, 2 + 2);
        // And the other way: a young owner's summary under key 2 spans key 1 only,
        // so a whole window a key cycle later, also ending at key 2, reads that
        // owner's buckets instead (both of them: key 2's and the key before 1's).
        let (w, s) = window(4, 1);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                for epoch in [EPOCH_KEYS - 1, 1] {
                    w.record(&s, s.mine(), phase(3), epoch * MS, FAIL).unwrap();
                }
            });
        });
        assert_eq!(w.counts(&s, 3, (EPOCH_KEYS + 1) * MS).failures, 2);
        // The same in one stripe: its owner's summary of the window that ends at
        // key 1 spans the young window's epochs, not the `K - 1` keys before it
        // (which would take the bucket a key cycle ahead).
        let (w, s) = window(4, 1);
        w.record(&s, s.mine(), phase(3), ahead, FAIL).unwrap();
        for epoch in 0..3 {
            let now = epoch * MS;
            let counted = w.record(&s, s.mine(), phase(3), now, FAIL).unwrap();
            let own = epoch + 1;
            assert_eq!(w.counts(&s, 3, now).failures, own, "epoch {epoch}");
            assert_eq!(w.counts_after(&s, counted, now).failures, own);
        }
    }

    #[test]
    fn idle_stripes_are_skipped_and_live_ones_read_across_generations() {
        let (w, s) = window(4, 100);
        // Another thread writes once, in generation 5, then goes idle.
        std::thread::scope(|scope| {
            scope.spawn(|| w.record(&s, s.mine(), phase(5), 0, FAIL));
        });
        assert_eq!(w.counts(&s, 5, 0).failures, 1);
        // This thread writes later; the idle stripe's bucket has left the window.
        assert!(w.record(&s, s.mine(), phase(5), 1_000 * MS, OK).is_some());
        assert_eq!(
            w.counts(&s, 5, 1_000 * MS),
            WindowCounts {
                calls: 1,
                failures: 0,
                slow: 0
            }
        );
        // Across the generation's wrap a newer generation's tag compares smaller;
        // the counts stay right.
        assert!(
            w.record(&s, s.mine(), phase(GEN_MASK), 2_000 * MS, FAIL)
                .is_some()
        );
        assert!(w.record(&s, s.mine(), phase(0), 2_000 * MS, OK).is_some());
        assert_eq!(
            w.counts(&s, 0, 2_000 * MS),
            WindowCounts {
                calls: 1,
                failures: 0,
                slow: 0
            }
        );
        assert_eq!(
            w.counts(&s, GEN_MASK, 2_000 * MS).calls,
            0,
            "its bucket was rotated to generation 0"
        );
    }

    /// Contract 18 on a shared stripe: a writer of phase 3 that found its bucket's
    /// tag, then was delayed while the breaker tripped and closed again (phase 6)
    /// and phase 6 rotated the bucket, counts nowhere when its increment arrives.
    #[test]
    fn a_stale_writers_delayed_increment_on_a_shared_bucket_counts_nowhere() {
        let (w, s) = window(2, 100);
        let shared = s.stripe(0);
        let three = Snapshot::closed(3);
        let (bucket, _) = w.rotate_shared(&s, shared, phase(3), 0).unwrap();
        assert!(count_shared(bucket, phase(3), FAIL).is_some());
        // The breaker moves on: phase 6 counts a success in the same bucket.
        let (six, word) = phase(6);
        assert!(w.record(&s, shared, (six, word), 50 * MS, OK).is_some());
        // Phase 3's writer, delayed after its tag check, arrives.
        assert!(count_shared(bucket, (three, word), FAIL).is_none());
        assert_eq!(w.counts(&s, 6, 50 * MS), WindowCounts::new(1, 0, 0));
        assert_eq!(w.counts(&s, 3, 50 * MS), WindowCounts::default());
    }

    /// A writer of phase 3 whose staleness check passed just before phase 6 rotated
    /// its bucket (here: phase 6 has rotated it and counted nothing yet) counts in
    /// the empty counts under phase 6's tag, finds the tag moved on, and takes its
    /// counts back, so phase 3 a whole generation cycle later does not find them.
    #[test]
    fn a_stale_writer_that_counts_into_empty_counts_under_a_later_tag_takes_them_back() {
        let (w, s) = window(2, 100);
        let shared = s.stripe(0);
        let (bucket, _) = w.rotate_shared(&s, shared, phase(6), 0).unwrap();
        assert!(count_shared(bucket, phase(3), FAIL).is_none());
        assert_eq!(w.counts(&s, 6, 0), WindowCounts::default());
        w.record(&s, shared, phase(3), 0, OK).unwrap();
        assert_eq!(w.counts(&s, 3, 0), WindowCounts::new(1, 0, 0));
    }

    /// Two writers of phase 3, delayed after their staleness checks while phase 6
    /// rotated their bucket, count failures into the count that rotation left
    /// alone (it was never written): one into it empty, one after it, which finds
    /// the count its own and checks nothing. The first's second look empties both,
    /// so phase 3 a whole generation cycle later finds neither (a third review
    /// found a take-back of one count that left the other's).
    #[test]
    fn a_second_look_empties_every_count_of_the_writers_phase() {
        let (w, s) = window(2, 100);
        let shared = s.stripe(0);
        let (three, word) = phase(3);
        w.record(&s, shared, (three, word), 0, OK).unwrap();
        let (bucket, _) = w.rotate_shared(&s, shared, phase(6), 0).unwrap();
        let add = || TaggedWord::update_in(&bucket[FAILURES], 3, word, |n| n.checked_add(1));
        assert_eq!(add(), TagUpdate::Updated { old: 0, new: 1 });
        assert_eq!(add(), TagUpdate::Updated { old: 1, new: 2 });
        assert!(!second_look(bucket, 3), "phase 6 has the bucket");
        assert_eq!(w.counts(&s, 6, 0), WindowCounts::default());
        w.record(&s, shared, phase(3), 0, OK).unwrap();
        assert_eq!(w.counts(&s, 3, 0), WindowCounts::new(1, 0, 0));
    }

    /// A shared bucket's counts outlive its tag by at most one rotation: phase
    /// 5's failure, in a bucket that phase 6 then counted only a success in, does
    /// not come back for the phase a whole generation cycle after 5 (which has
    /// generation 5 again).
    #[test]
    fn a_shared_buckets_counts_are_retagged_by_every_later_phase() {
        let (w, s) = window(2, 100);
        let shared = s.stripe(0);
        w.record(&s, shared, phase(5), 0, FAIL).unwrap();
        w.record(&s, shared, phase(6), 0, OK).unwrap();
        assert_eq!(w.counts(&s, 6, 0), WindowCounts::new(1, 0, 0));
        w.record(&s, shared, phase(5), 0, OK).unwrap();
        assert_eq!(w.counts(&s, 5, 0), WindowCounts::new(1, 0, 0));
    }

    /// A shared bucket holds at most `u32::MAX` of each count: past that an
    /// outcome counts nowhere (and `record` says so); nothing wraps.
    #[test]
    fn a_full_shared_bucket_counts_no_more() {
        let (w, s) = window(2, 100);
        let full = u64::from(u32::MAX);
        // Each seed puts in at most half of what the bucket holds.
        w.seed(&s, phase(0), 0, WindowCounts::new(u64::MAX, 0, 0));
        assert_eq!(w.counts(&s, 0, 0), WindowCounts::new(SEEDED_MAX, 0, 0));
        w.seed(&s, phase(0), 0, WindowCounts::new(u64::MAX, 0, 0));
        assert_eq!(w.counts(&s, 0, 0), WindowCounts::new(full, 0, 0));
        assert!(w.record(&s, s.stripe(0), phase(0), 0, FAIL).is_none());
        assert_eq!(w.counts(&s, 0, 0), WindowCounts::new(full, 0, 0));
    }

    #[test]
    fn totals_up_to_half_a_shared_bucket_are_seeded_as_they_are() {
        let half = SEEDED_MAX;
        for c in [
            WindowCounts::default(),
            WindowCounts::new(half, half, half),
            WindowCounts::new(half, 7, 3),
        ] {
            assert_eq!(fit_shared(c), c);
        }
        assert_eq!(
            fit_shared(WindowCounts::new(10 * half, 5 * half, half)),
            WindowCounts::new(half, half / 2, half.div_ceil(10))
        );
        assert_eq!(
            fit_shared(WindowCounts::new(half + 1, 7, 0)),
            WindowCounts::new(half, 7, 0)
        );
    }

    #[test]
    fn concurrent_writers_in_one_bucket_period_are_counted_exactly() {
        let (w, s) = window(10, 1000);
        let threads = 8;
        std::thread::scope(|scope| {
            for t in 0..threads {
                let (w, s) = (&w, &s);
                scope.spawn(move || {
                    // Half in their own stripes, half sharing two shared ones.
                    let r = match t % 2 {
                        0 => s.mine(),
                        _ => s.stripe(t % 4 / 2),
                    };
                    for i in 0..5_000u64 {
                        let sample = Sample {
                            failed: i % 4 == 0,
                            slow: t % 4 < 2 && i % 2 == 0,
                        };
                        assert!(w.record(s, r, phase(7), 500 * MS, sample).is_some());
                    }
                });
            }
        });
        let c = w.counts(&s, 7, 500 * MS);
        assert_eq!(
            c,
            WindowCounts {
                calls: 40_000,
                failures: 10_000,
                slow: 10_000
            }
        );
    }

    #[test]
    fn racing_rotations_lose_at_most_one_outcome_per_racing_writer() {
        // Every thread writes one outcome per epoch into the same ring, so each
        // rotation is raced by the others; the bound from the module docs holds.
        let (w, s) = window(2, 1);
        let threads = 8u64;
        let epochs = 2_000u64;
        std::thread::scope(|scope| {
            for _ in 0..threads {
                let (w, s) = (&w, &s);
                scope.spawn(move || {
                    for e in 0..epochs {
                        w.record(s, s.mine(), phase(0), e * MS, OK);
                    }
                });
            }
        });
        let c = w.counts(&s, 0, (epochs - 1) * MS);
        // The last two epochs hold up to 2 * threads outcomes; each rotation can
        // lose up to `threads - 1`, and misattribution can add as many.
        assert!(c.calls <= 2 * threads + 2 * (threads - 1), "{c:?}");
        assert!(
            c.calls >= 1,
            "the final writer's own outcome is there: {c:?}"
        );
    }

    /// The reference: every outcome with its time, pruned by the window rule.
    #[test]
    fn the_window_keeps_counting_across_the_epoch_keys_wrap() {
        // 1 ms buckets, the shortest: the keys wrap after 49.7 days.
        let (w, s) = window(3, 1);
        let shared = s.stripe(0);
        for r in [s.mine(), shared] {
            for e in EPOCH_KEYS - 3..EPOCH_KEYS + 3 {
                let counted = w.record(&s, r, phase(4), e * MS, FAIL);
                assert!(counted.is_some(), "epoch {e}");
                // A failure's read, whose tag range wraps here (checked by parts).
                assert_eq!(
                    w.counts_after(&s, counted.unwrap(), e * MS),
                    w.counts(&s, 4, e * MS),
                    "epoch {e}"
                );
            }
        }
        let at = (EPOCH_KEYS + 2) * MS;
        assert_eq!(
            w.counts(&s, 4, at),
            WindowCounts {
                calls: 6,
                failures: 6,
                slow: 0
            },
            "the last 3 epochs, in 2 stripes"
        );
        // A bucket a whole key cycle behind is the documented exception; one a
        // window behind is not counted.
        assert_eq!(w.counts(&s, 4, at + 3 * MS).calls, 0);
    }

    #[test]
    fn an_owners_summary_steps_on_only_by_the_epochs_its_starts_are_apart() {
        // An owner idle for whole key cycles (49.7 days each, with 1 ms buckets)
        // and a few epochs more: the tags' keys say a few epochs passed, and the
        // ring's slots, which do not repeat with the keys, say otherwise. The
        // summary is summed anew (a step would take out other buckets than the
        // window left: the debug build's check of each step says so), and a
        // failure's read agrees with a reader's, the documented exception's
        // counts included.
        for buckets in 2..=6u32 {
            for cycles in 1..=3 {
                for extra in 1..u64::from(buckets) {
                    let (w, s) = window(buckets, 1);
                    let r = s.mine();
                    for e in 10..10 + u64::from(buckets) {
                        w.record(&s, r, phase(4), e * MS, OK);
                    }
                    let last = 9 + u64::from(buckets);
                    let e = last + cycles * EPOCH_KEYS + extra;
                    let counted = w.record(&s, r, phase(4), e * MS, FAIL);
                    let counted = counted.expect("a newer bucket");
                    assert_eq!(
                        w.counts_after(&s, counted, e * MS),
                        w.counts(&s, 4, e * MS),
                        "{buckets} buckets, {cycles} cycles and {extra} epochs on"
                    );
                }
            }
        }
    }

    #[test]
    fn a_window_too_long_to_fill_within_a_readings_range_reads_the_same_after_a_record() {
        // (K - 1) epochs overflow a reading: the window is never full, and a
        // failure's read takes the epoch's division, as `counts` does.
        let w = Window::new(
            WindowConfig {
                bucket_nanos: u64::MAX / 2,
                buckets: 4,
            },
            0,
        );
        assert_eq!(w.full_after, None);
        let s = Stripes::new(w.buckets());
        for now in [0, u64::MAX / 2 - 1, u64::MAX / 2, u64::MAX - 1, u64::MAX] {
            let counted = w.record(&s, s.mine(), phase(2), now, FAIL).unwrap();
            assert_eq!(
                w.counts_after(&s, counted, now),
                w.counts(&s, 2, now),
                "at {now}"
            );
        }
        assert_eq!(w.counts(&s, 2, u64::MAX).calls, 5);
    }

    proptest! {
        /// A failure checks each bucket's tag with one subtraction and one compare
        /// where the window's keys do not wrap: the same verdict as the check part
        /// by part, for tags of every kind (never written, another generation, a
        /// key before, within, after the window, across the key cycle's edge).
        #[test]
        fn the_tag_range_is_the_tag_check_by_parts(
            generation in prop_oneof![Just(0), Just(GEN_MASK), 0..=GEN_MASK],
            last_key in prop_oneof![1..=10u64, EPOCH_KEYS - 10..=EPOCH_KEYS, 1..=EPOCH_KEYS],
            span in prop_oneof![0..=10u64, 0..u64::from(crate::stripe::MAX_BUCKETS)],
            other in 0..=GEN_MASK,
            key in prop_oneof![1..=10u64, EPOCH_KEYS - 10..=EPOCH_KEYS, 1..=EPOCH_KEYS],
            raw in any::<u64>(),
        ) {
            let tag = |g: Generation, k: u64| u64::from(g) << 32 | k;
            let last = Tag(tag(generation, last_key));
            let check = in_window(last, span);
            let mut tags = vec![0, raw, tag(generation, key), tag(other, key)];
            let (k, s) = (i128::from(last_key), i128::from(span));
            for edge in [k - s, k, k + 1] {
                for k in edge - 1..=edge + 1 {
                    // Keys as the cycle has them: 1..=EPOCH_KEYS.
                    let k = (k - 1).rem_euclid(i128::from(EPOCH_KEYS)) as u64 + 1;
                    tags.extend([tag(generation, k), tag(other, k)]);
                }
            }
            for t in tags {
                prop_assert_eq!(
                    check(t),
                    in_window_by_parts(last, span, Tag(t)),
                    "tag {:#x}, last {:#x}", t, last.0
                );
            }
        }
    }

    fn reference(log: &[(u64, Sample)], now: u64, bucket: u64, buckets: u64) -> WindowCounts {
        let e = now / bucket;
        let mut c = WindowCounts::default();
        for &(t, s) in log {
            let te = t / bucket;
            if te <= e && te + buckets > e {
                c.calls += 1;
                c.failures += u64::from(s.failed);
                c.slow += u64::from(s.slow);
            }
        }
        c
    }

    proptest! {
        /// Totals scaled to fit a shared bucket's seed keep their rates, rounded
        /// up by less than one part in the scaled calls (so a rate at a threshold
        /// still reaches it), and keep failures and slow calls within the calls.
        #[test]
        fn totals_scaled_to_fit_a_shared_bucket_keep_their_rates(
            calls in any::<u64>(),
            failed in 0.0..=1.0f64,
            slow in 0.0..=1.0f64,
        ) {
            let part = |share: f64| ((calls as f64 * share) as u64).min(calls);
            let c = WindowCounts::new(calls, part(failed), part(slow));
            let f = fit_shared(c);
            prop_assert!(f.calls <= SEEDED_MAX && f.failures <= f.calls && f.slow <= f.calls, "{f:?}");
            for (part, fitted) in [(c.failures, f.failures), (c.slow, f.slow)] {
                // fitted / f.calls >= part / calls, and above it by less than 1 / f.calls
                let (fitted_x, part_x) = (
                    u128::from(fitted) * u128::from(c.calls),
                    u128::from(part) * u128::from(f.calls),
                );
                prop_assert!(fitted_x >= part_x, "{c:?} -> {f:?}");
                prop_assert!(fitted_x - part_x < u128::from(c.calls).max(1), "{c:?} -> {f:?}");
            }
        }

        #[test]
        fn single_threaded_reads_equal_the_reference_at_every_step(
            buckets in 1u32..=5,
            bucket_ms in 1u64..=20,
            steps in proptest::collection::vec((0u64..60, any::<bool>(), any::<bool>()), 1..200),
            shared in any::<bool>(),
        ) {
            let (w, s) = window(buckets, bucket_ms);
            let r = if shared { s.stripe(0) } else { s.mine() };
            let mut now = 0;
            let mut log = Vec::new();
            for (dt_ms, failed, slow) in steps {
                now += dt_ms * MS / 2; // half-millisecond steps: land inside and on edges
                let sample = Sample { failed, slow };
                let counted = w.record(&s, r, phase(3), now, sample);
                prop_assert!(counted.is_some());
                log.push((now, sample));
                let want = reference(&log, now, bucket_ms * MS, u64::from(buckets));
                prop_assert_eq!(w.counts(&s, 3, now), want);
                // A failure's read, from where it counted: the same, the window
                // not yet full (the first `buckets - 1` epochs) included.
                prop_assert_eq!(w.counts_after(&s, counted.unwrap(), now), want);
            }
        }
    }
    proptest! {
        /// Readings out of order, as a thread that takes over an exited thread's
        /// slot may bring, or clocks read on different cores: some outcomes arrive
        /// up to four buckets late, on an owned stripe. Each outcome counted is in
        /// its own epoch's bucket (a late one in a bucket finalized or rotated in
        /// late, or none if its slot holds a newer epoch), and the window read at
        /// the newest reading holds exactly the outcomes counted in it, whether
        /// the reader takes the owner's summary or its buckets.
        #[test]
        fn late_outcomes_count_in_their_own_buckets_and_read_exactly(
            buckets in 1u32..=5,
            bucket_ms in 1u64..=20,
            steps in proptest::collection::vec(
                (0u64..60, prop_oneof![Just(0u64), 0u64..=8], any::<bool>(), any::<bool>()),
                1..200,
            ),
        ) {
            let (w, s) = window(buckets, bucket_ms);
            let r = s.mine();
            let (mut newest, mut log) = (0, Vec::new());
            for (dt_ms, late, failed, slow) in steps {
                newest += dt_ms * MS / 2;
                // Late by up to four buckets, in half buckets.
                let at = newest.saturating_sub(late * bucket_ms * MS / 2);
                let sample = Sample { failed, slow };
                let counted = w.record(&s, r, phase(3), at, sample);
                if counted.is_some() {
                    log.push((at, sample));
                }
                let want = reference(&log, newest, bucket_ms * MS, u64::from(buckets));
                prop_assert_eq!(w.counts(&s, 3, newest), want);
                if let (Some(counted), true) = (counted, at == newest) {
                    prop_assert_eq!(w.counts_after(&s, counted, newest), want);
                }
            }
        }
    }
    proptest! {
        /// A monotonic clock whose owner goes quiet for whole key cycles now and
        /// then (49.7 days each, with 1 ms buckets), so that its ring holds
        /// buckets of other cycles whose keys read as current (the documented
        /// exception): every rotation's summary, stepped on or summed anew, is one
        /// a sum of the ring would give (the debug build checks each step), and a
        /// failure's read agrees with a reader's.
        #[test]
        fn an_owner_quiet_for_whole_key_cycles_keeps_its_summary_a_sum_of_its_ring(
            buckets in 2..=6u32,
            steps in prop::collection::vec((0..3u64, 0..6u64, any::<bool>()), 1..40),
        ) {
            let (w, s) = window(buckets, 1);
            let r = s.mine();
            let mut epoch = 0u64;
            for (cycles, epochs, failed) in steps {
                epoch += cycles * EPOCH_KEYS + epochs;
                let sample = if failed { FAIL } else { OK };
                if let Some(counted) = w.record(&s, r, phase(4), epoch * MS, sample) {
                    prop_assert_eq!(
                        w.counts_after(&s, counted, epoch * MS),
                        w.counts(&s, 4, epoch * MS)
                    );
                }
            }
        }
    }

    proptest! {
        /// However many transitions lie between two closed phases, all in one
        /// bucket's time, the later phase's writer rotates the earlier phase's
        /// bucket and counts from zero (generation 1 and 40,001 once shared a
        /// bucket for good: the older tag read as the newer).
        #[test]
        fn a_later_phase_rotates_an_earlier_ones_bucket_at_any_distance(
            first in 0..=GEN_MASK,
            distance in 1..=GEN_MASK,
        ) {
            let (w, s) = window(1, 3_600_000);
            let later = first.wrapping_add(distance) & GEN_MASK;
            prop_assert!(w.record(&s, s.mine(), phase(first), 0, FAIL).is_some());
            prop_assert!(w.record(&s, s.mine(), phase(later), MS, FAIL).is_some());
            prop_assert_eq!(
                w.counts(&s, later, MS),
                WindowCounts { calls: 1, failures: 1, slow: 0 }
            );
            prop_assert_eq!(w.counts(&s, first, MS).calls, 0);
            // The earlier phase's writer, late, does not rotate it back.
            prop_assert!(w.record(&s, s.mine(), (phase(first).0, phase(later).1), MS, OK).is_none());
            prop_assert_eq!(w.counts(&s, later, MS).calls, 1);
        }
    }
}
