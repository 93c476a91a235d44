//! Reading the window: the totals over every stripe that exists, at a reading,
//! for the trip check and the metrics.

use super::*;

impl Window {
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
    pub(super) fn others(
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
    pub(super) fn summed_anew(
        &self,
        ring: Ring<'_>,
        slot: usize,
        mine: Tag,
        span: u64,
    ) -> WindowCounts {
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

    /// The counts of the buckets tagged `last`'s generation and a key from `span`
    /// epochs before `last`'s through `last`'s, in every stripe. `mine`: the
    /// reader's own stripe and its ring, if it owns one, read as its owner reads
    /// it (see [`own_summary`]).
    pub(super) fn sum(
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
            if !recent(Stripes::scratch(r, NEWEST_OR_DEADLINE).load(Ordering::Acquire)) {
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

/// Whether a tag is `last`'s generation's, with a key from `span` epochs before
/// `last`'s through `last`'s (modulo the key cycle): in the window that ends at
/// `last`. Those tags are one range of the word, `last - span ..= last`, unless
/// the keys wrap within it (for one window's length each key cycle): then a tag
/// is checked part by part. One subtraction and one compare otherwise (a tag of
/// another generation, or 0, never written, is far outside the range), for every
/// bucket a reader visits.
#[inline]
pub(super) fn in_window(last: Tag, span: u64) -> impl Fn(u64) -> bool + Copy {
    let wraps = (last.0 & KEY_MASK) <= span;
    let first = last.0.wrapping_sub(span);
    move |tag| match wraps {
        false => tag.wrapping_sub(first) <= span,
        true => in_window_by_parts(last, span, Tag(tag)),
    }
}

/// [`in_window`] part by part: written, `last`'s generation, at most `span` keys
/// behind `last`'s.
pub(super) fn in_window_by_parts(last: Tag, span: u64, tag: Tag) -> bool {
    tag.written() && tag.generation() == last.generation() && tag.behind(last) <= span
}
