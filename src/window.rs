//! The sliding window: a ring of `K` buckets in every stripe.
//!
//! How buckets are tagged, rotated, read and cached is in the
//! [implementation notes](crate::implementation#the-sliding-window).
//!
//! # Orderings
//! A rotation writes the zeroed counts before the tag, and the tag with `Release`;
//! readers load the tag with `Acquire` before the counts, so a reader that sees a new
//! tag sees its zeroed counts (or later increments). Count updates are `Relaxed`:
//! they publish nothing else. The newest-bucket word is stored with `Release` after
//! the rotation it describes and loaded with `Acquire`; a failure's reader sees a
//! racing writer's rotation through the `SeqCst` fence in the breaker, as it does
//! the buckets themselves.
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

use crate::config::WindowConfig;
use crate::event::WindowCounts;
use crate::state::{Generation, Snapshot, StateWord};
use crate::stripe::{Bucket, COUNTERS, OPEN_DEADLINE, Owned, PHASE_KEY, StripeRef, Stripes};
use crate::sync::{AtomicU64, Ordering, fence};

const TAG: usize = 0;
const CALLS: usize = 1;
const FAILURES: usize = 2;
const SLOW: usize = 3;

/// Scratch words of an owned stripe. `CACHE_START`, `CACHE_KEY` and `CACHE_SPAN`
/// are the owner's cache of its live bucket: that bucket's start (a clock reading,
/// from which its slot in the ring follows), the phase it counts (the closed state
/// word; `CACHE_KEY` is [`PHASE_KEY`], which the owner's open-deadline cache
/// shares, as it shares `NEWEST`: see [`OPEN_DEADLINE`]), and its length in
/// nanoseconds (so the hot path reads only the owner's
/// line; 0 while nothing is cached, which no reading falls within). The owner sets
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
/// Last, clear of the lean paths' loads (see [`crate::stripe::LEAN_LOADS`]).
const LIVE_CALLS: usize = 5;
const _: () = assert!(crate::stripe::clear_of_lean_loads(COUNTERS + LIVE_CALLS));
const _: () = assert!(LIVE_CALLS < crate::stripe::SCRATCH);
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
#[derive(Debug)]
pub(crate) struct Window {
    bucket_nanos: u64,
    buckets: u64,
    origin: u64,
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
        Window {
            bucket_nanos: config.bucket_nanos,
            buckets: u64::from(config.buckets),
            origin,
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
    /// caller's stripe. Returns `false` if the outcome was too old for its bucket.
    #[inline]
    pub(crate) fn record(
        &self,
        stripes: &Stripes,
        r: StripeRef<'_>,
        (phase, word): (Snapshot, &StateWord),
        now: u64,
        s: Sample,
    ) -> bool {
        let (bucket, calls) = match r.as_owned() {
            Some(o) => match self.cached(stripes, o, phase, now) {
                Some(bucket) => (bucket, o.scratch(LIVE_CALLS)),
                None => match self.rotate_owned(stripes, o, (phase, word), now) {
                    Some(found) => found,
                    None => return false,
                },
            },
            None => match self.rotate_shared(stripes, r, (phase, word), now) {
                Some(bucket) => (bucket, &bucket[CALLS]),
                None => return false,
            },
        };
        Stripes::add(r, calls, 1);
        if s.failed {
            Stripes::add(r, &bucket[FAILURES], 1);
        }
        if s.slow {
            Stripes::add(r, &bucket[SLOW], 1);
        }
        true
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

    /// The owner's live bucket, if it holds `now` and `phase`.
    #[inline]
    fn cached<'s>(
        &self,
        stripes: &'s Stripes,
        o: Owned<'s>,
        phase: Snapshot,
        now: u64,
    ) -> Option<&'s Bucket> {
        Self::is_live(o, phase, now).then(|| self.live_bucket(stripes, o))
    }

    /// The owner's live bucket, as its cached start says (or the first bucket if
    /// nothing is cached): a division, off the lean path, which saves the counter
    /// line a word.
    fn live_bucket<'s>(&self, stripes: &'s Stripes, o: Owned<'s>) -> &'s Bucket {
        // Relaxed: private to the owner.
        let start = o.scratch(CACHE_START).load(Ordering::Relaxed);
        stripes.bucket(o.stripe(), (self.epoch(start) % self.buckets) as usize)
    }

    /// The bucket for `now` and `phase` and its calls word, off the owner's fast
    /// path: a new bucket goes live (rotating its slot), or a bucket already tagged
    /// for them is counted in directly (only if readings went backwards). `None` if
    /// the slot already holds a newer tag: the outcome is too old to count.
    #[inline(never)]
    #[cold]
    fn rotate_owned<'s>(
        &self,
        stripes: &'s Stripes,
        o: Owned<'s>,
        (phase, word): (Snapshot, &StateWord),
        now: u64,
    ) -> Option<(&'s Bucket, &'s AtomicU64)> {
        let epoch = self.epoch(now);
        let slot = (epoch % self.buckets) as usize;
        let mine = Tag::new(phase.generation(), epoch);
        let r = o.stripe();
        let bucket = stripes.bucket(r, slot);
        // Relaxed: only this thread writes this stripe's tags.
        let seen = Tag(bucket[TAG].load(Ordering::Relaxed));
        // Relaxed, every scratch word below: private to the owner, or published by
        // the fences and the tag's Release.
        let cached = o.scratch(CACHE_SPAN).load(Ordering::Relaxed) != 0;
        let live = self.live_bucket(stripes, o);
        match self.found(seen, mine, phase, word) {
            Found::Mine => {
                return Some(if cached && std::ptr::eq(live, bucket) {
                    (bucket, o.scratch(LIVE_CALLS))
                } else {
                    // Finalized earlier: count in it directly, and leave the cache.
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
        // Clear the tag of the slot being reused, so a reader that sees any of the
        // writes below sees a changed tag.
        bucket[TAG].store(0, Ordering::Relaxed);
        // Release: the finalized count and the cleared tag come before everything
        // below (see the module's Orderings).
        fence(Ordering::Release);
        o.scratch(LIVE_BASE).store(counted, Ordering::Relaxed);
        bucket[CALLS].store(LIVE, Ordering::Relaxed);
        bucket[FAILURES].store(0, Ordering::Relaxed);
        bucket[SLOW].store(0, Ordering::Relaxed);
        // Release: the zeroed counts are visible with the tag.
        bucket[TAG].store(mine.0, Ordering::Release);
        // Release: a reader that sees this tag here sees the bucket too. The owner's
        // tags only grow (its time and generation readings do not go backwards), so
        // this is the stripe's newest bucket.
        o.scratch(NEWEST).store(mine.0, Ordering::Release);
        // The owner's next outcomes for this phase in this bucket's time take
        // the fast path.
        let start = epoch.saturating_mul(self.bucket_nanos);
        o.scratch(CACHE_START)
            .store(self.origin.saturating_add(start), Ordering::Relaxed);
        o.scratch(CACHE_SPAN)
            .store(self.bucket_nanos, Ordering::Relaxed);
        o.scratch(CACHE_KEY)
            .store(phase.key().to_bits(), Ordering::Relaxed);
        Some((bucket, o.scratch(LIVE_CALLS)))
    }

    /// The shared stripe's bucket for `now` and `generation`, rotating it in if it
    /// holds an older epoch or generation. `None` if it already holds a newer one:
    /// the outcome is too old to count.
    #[inline(never)]
    #[cold]
    fn rotate_shared<'s>(
        &self,
        stripes: &'s Stripes,
        r: StripeRef<'s>,
        (phase, word): (Snapshot, &StateWord),
        now: u64,
    ) -> Option<&'s Bucket> {
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
            // AcqRel: Release publishes the tag; Acquire hands back a newer one.
            match bucket[TAG].compare_exchange(seen.0, mine.0, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    // A bucket never written (tag 0) holds no counts: nothing to
                    // zero, and no zeroing to race the other writers' first
                    // increments.
                    if seen.written() {
                        for count in &bucket[CALLS..] {
                            // Relaxed: only racing the increments the module docs
                            // bound. A swap, not a store, among the other writers'
                            // read-modify-writes: the same outcomes, and the mix
                            // loom models exactly (loom #254).
                            count.swap(0, Ordering::Relaxed);
                        }
                    }
                    break;
                }
                Err(actual) => seen = Tag(actual),
            }
        }
        Some(bucket)
    }

    /// Puts `counts` in the shared stripe's bucket for `now` and `phase`: a
    /// restored breaker's window (see `Builder::restore`), written before the
    /// breaker is shared, so they count as calls recorded at `now` would.
    pub(crate) fn seed(
        &self,
        stripes: &Stripes,
        (phase, word): (Snapshot, &StateWord),
        now: u64,
        counts: WindowCounts,
    ) {
        let r = stripes.stripe(0);
        if let Some(bucket) = self.rotate_shared(stripes, r, (phase, word), now) {
            Stripes::add(r, &bucket[CALLS], counts.calls);
            Stripes::add(r, &bucket[FAILURES], counts.failures);
            Stripes::add(r, &bucket[SLOW], counts.slow);
        }
    }

    /// The window's counts for `generation` as seen at clock reading `now`.
    pub(crate) fn counts(
        &self,
        stripes: &Stripes,
        generation: Generation,
        now: u64,
    ) -> WindowCounts {
        // The tags that count: this generation, epochs `now-K+1 ..= now` (at most
        // `now`'s epoch since the breaker began).
        let epoch = self.epoch(now);
        let last = Tag::new(generation, epoch);
        let span = (self.buckets - 1).min(epoch);
        let in_window = |tag: u64| {
            let tag = Tag(tag);
            tag.written() && tag.generation() == generation && tag.behind(last) <= span
        };
        let mut c = WindowCounts::default();
        for r in stripes.all() {
            if r.as_owned().is_none() {
                // Four buckets a line; the last line's unused ones are never
                // written, so their tags keep them out of the window. (Here
                // `flat_map` measured better: nested loops, as for the owned
                // stripes below, cost a failure 14 instructions more.)
                for bucket in stripes.ring(r).iter().flat_map(|line| line.iter()) {
                    // Acquire: see the module's Orderings.
                    if in_window(bucket[TAG].load(Ordering::Acquire)) {
                        // Relaxed: counts only; the tag's Acquire ordered them.
                        c.calls += bucket[CALLS].load(Ordering::Relaxed);
                        c.failures += bucket[FAILURES].load(Ordering::Relaxed);
                        c.slow += bucket[SLOW].load(Ordering::Relaxed);
                    }
                }
                continue;
            }
            // An owned stripe never written, or whose newest bucket is another
            // phase's or older than the window (an idle thread's), has nothing to
            // add: its owner's tags only move on, so every other bucket is older
            // still. Skip it with one load. (A newest bucket newer than `now`, the
            // owner's clock having moved on since this thread's reading, does not
            // skip it.)
            // Acquire: pairs with the owner's Release of the tag.
            let newest = Tag(Stripes::scratch(r, NEWEST).load(Ordering::Acquire));
            let behind = newest.behind(last);
            if !newest.written()
                || newest.generation() != generation
                || behind > span && behind < EPOCH_KEYS - self.ahead_max()
            {
                continue;
            }
            // (Nested loops: a `flat_map` here cost a failure 180 instructions more.)
            for line in stripes.ring(r) {
                for bucket in line.iter() {
                    c.add(owned_counts(r, bucket, in_window));
                }
            }
        }
        c
    }
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

/// An owned bucket's counts if its tag is in the window (`in_window`), read
/// consistently with its tag (see the module's Orderings).
#[inline]
fn owned_counts(
    r: StripeRef<'_>,
    bucket: &Bucket,
    in_window: impl Fn(u64) -> bool,
) -> WindowCounts {
    // Acquire: see the module's Orderings.
    let mut tag = bucket[TAG].load(Ordering::Acquire);
    while in_window(tag) {
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
        tag = again;
    }
    WindowCounts::default()
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
        assert!(w.record(&s, s.mine(), phase(0), later, FAIL));
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
            w.record(&s, s.mine(), phase(2), 0, OK),
            "a newer generation rotates"
        );
        assert!(
            !w.record(&s, s.mine(), (phase(1).0, phase(2).1), 0, FAIL),
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
        assert!(w.record(&s, s.stripe(SHARED), phase(0), 0, OK));
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
        assert!(w.record(&s, r, phase(0), 10 * MS, OK));
        assert_eq!(bucket[CALLS].load(Ordering::Relaxed), 5);
        assert_eq!(w.counts(&s, 0, 150 * MS).calls, 7);
        assert!(
            record_live_success(o, phase(0).0, 150 * MS),
            "epoch 1 is still live"
        );
        assert_eq!(w.counts(&s, 0, 150 * MS).calls, 8);
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
        assert!(w.record(&s, s.mine(), phase(5), 1_000 * MS, OK));
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
        assert!(w.record(&s, s.mine(), phase(GEN_MASK), 2_000 * MS, FAIL));
        assert!(w.record(&s, s.mine(), phase(0), 2_000 * MS, OK));
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

    #[test]
    fn concurrent_writers_in_one_bucket_period_are_counted_exactly() {
        let (w, s) = window(10, 1000);
        let threads = 8; // more than the owned stripes on a small machine: the shared one is used too
        std::thread::scope(|scope| {
            for t in 0..threads {
                let (w, s) = (&w, &s);
                scope.spawn(move || {
                    for i in 0..5_000u64 {
                        let sample = Sample {
                            failed: i % 4 == 0,
                            slow: t % 2 == 0 && i % 2 == 0,
                        };
                        w.record(s, s.mine(), phase(7), 500 * MS, sample);
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
                assert!(w.record(&s, r, phase(4), e * MS, FAIL), "epoch {e}");
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
        #[test]
        fn single_threaded_reads_equal_the_reference_at_every_step(
            buckets in 1u32..=5,
            bucket_ms in 1u64..=20,
            steps in proptest::collection::vec((0u64..60, any::<bool>(), any::<bool>()), 1..200),
        ) {
            let (w, s) = window(buckets, bucket_ms);
            let mut now = 0;
            let mut log = Vec::new();
            for (dt_ms, failed, slow) in steps {
                now += dt_ms * MS / 2; // half-millisecond steps: land inside and on edges
                let sample = Sample { failed, slow };
                prop_assert!(w.record(&s, s.mine(), phase(3), now, sample));
                log.push((now, sample));
                let want = reference(&log, now, bucket_ms * MS, u64::from(buckets));
                prop_assert_eq!(w.counts(&s, 3, now), want);
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
            prop_assert!(w.record(&s, s.mine(), phase(first), 0, FAIL));
            prop_assert!(w.record(&s, s.mine(), phase(later), MS, FAIL));
            prop_assert_eq!(
                w.counts(&s, later, MS),
                WindowCounts { calls: 1, failures: 1, slow: 0 }
            );
            prop_assert_eq!(w.counts(&s, first, MS).calls, 0);
            // The earlier phase's writer, late, does not rotate it back.
            prop_assert!(!w.record(&s, s.mine(), (phase(first).0, phase(later).1), MS, OK));
            prop_assert_eq!(w.counts(&s, later, MS).calls, 1);
        }
    }
}
