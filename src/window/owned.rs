//! An owned stripe's side of the window: its live bucket (counted on the lean path
//! and cached in the stripe's scratch words), the owner's rotation (a small seqlock
//! write), and its summary of the finalized buckets, with their readers.

use super::*;

impl Window {
    /// The owner's fast path: whether `now` and `phase` fall in its live bucket.
    /// Three loads from the owner's counter line, two compares, no division.
    #[inline(always)]
    pub(super) fn is_live(o: Owned<'_>, phase: Snapshot, now: u64) -> bool {
        // Relaxed: private to the owner.
        let start = o.scratch(START_OR_RAMP_SUM).load(Ordering::Relaxed);
        let span = o.scratch(CACHE_SPAN).load(Ordering::Relaxed);
        let key = o.scratch(PHASE_KEY).load(Ordering::Relaxed);
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
    pub(super) fn live_bucket<'s>(ring: Ring<'s>, o: Owned<'s>) -> Option<&'s Bucket> {
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
    pub(super) fn rotate_owned<'s>(
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
        // The owner's newest tag of this phase: while `PHASE_KEY` holds this phase's
        // key, `NEWEST_OR_DEADLINE` holds the tag of the owner's newest rotation for it, not an
        // Open deadline (see `NEWEST_OR_DEADLINE`). Relaxed: the owner's own words.
        let newest = (o.scratch(PHASE_KEY).load(Ordering::Relaxed) == phase.key().to_bits())
            .then(|| Tag(o.scratch(NEWEST_OR_DEADLINE).load(Ordering::Relaxed)));
        let summary = ring.summary();
        // The summary takes a step on from the live bucket's only if that is the
        // newest (a late rotation leaves a newer bucket the step would miss), and
        // only by as many epochs as their starts are apart (see `others`).
        let start = self
            .origin
            .saturating_add(epoch.saturating_mul(self.bucket_nanos));
        let apart = start.checked_sub(o.scratch(START_OR_RAMP_SUM).load(Ordering::Relaxed));
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
            o.scratch(NEWEST_OR_DEADLINE)
                .store(mine.0, Ordering::Release);
        }
        // The owner's next outcomes for this phase in this bucket's time take
        // the fast path.
        o.scratch(START_OR_RAMP_SUM).store(start, Ordering::Relaxed);
        o.scratch(CACHE_SPAN)
            .store(self.bucket_nanos, Ordering::Relaxed);
        o.scratch(PHASE_KEY)
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
pub(super) fn summarized(ring: Ring<'_>, r: StripeRef<'_>, last: Tag) -> Option<WindowCounts> {
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
pub(super) fn own_summary(o: Owned<'_>, ring: Ring<'_>, last: Tag) -> Option<WindowCounts> {
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

/// An owned bucket's counts, read consistently with its tag (see the module's
/// Orderings), if it is in the window (`in_window`): `tag` is the tag its reader
/// has loaded with `Acquire`, and found in the window.
#[inline]
pub(super) fn owned_counts(
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
