//! A shared stripe's side of the window: the rotation by CAS and the counts
//! tagged with their phase's generation, which every reader checks.

use super::*;

impl Window {
    /// The shared stripe's bucket for `now` and `generation`, rotating it in if it
    /// holds an older epoch or generation, and its tag. `None` if it already holds
    /// a newer one: the outcome is too old to count.
    #[inline(never)]
    #[cold]
    pub(super) fn rotate_shared<'s>(
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
pub(super) fn count_shared(
    bucket: &Bucket,
    (phase, word): (Snapshot, &StateWord),
    s: Sample,
) -> Option<()> {
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
pub(super) fn second_look(bucket: &Bucket, generation: Generation) -> bool {
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
pub(super) fn empty_counts(bucket: &Bucket, from: Generation, to: Generation) {
    for count in &bucket[CALLS..] {
        TaggedWord::empty_in(count, from, to);
    }
}

/// A shared bucket's three counts for `generation`: those of another phase (a
/// rotation in progress) read as none.
#[inline]
pub(super) fn shared_counts(bucket: &Bucket, generation: Generation) -> WindowCounts {
    let count = |i| u64::from(TaggedWord::data_in(&bucket[i], generation));
    WindowCounts {
        calls: count(CALLS),
        failures: count(FAILURES),
        slow: count(SLOW),
    }
}

/// `counts` scaled to at most [`SEEDED_MAX`] each, if they are larger: the largest
/// becomes `SEEDED_MAX` and the others keep their ratio to it, rounded up (so a
/// restored rate at a threshold still reaches it; a rate can read higher by less
/// than one part in two billion).
pub(super) fn fit_shared(counts: WindowCounts) -> WindowCounts {
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
pub(super) fn counts(bucket: &Bucket) -> WindowCounts {
    WindowCounts {
        calls: bucket[CALLS].load(Ordering::Relaxed),
        failures: bucket[FAILURES].load(Ordering::Relaxed),
        slow: bucket[SLOW].load(Ordering::Relaxed),
    }
}
