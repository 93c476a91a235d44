use super::read::{in_window, in_window_by_parts};
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
    // it cached (`NEWEST_OR_DEADLINE`) and its phase-key word the Open phase's key.
    // A deadline whose halves read as a key just ahead of the next closed
    // phase's first bucket (of another generation) must not stop that bucket's
    // rotation from writing the word: readers would take the stripe for idle.
    let (w, s) = window(4, 1);
    let r = s.mine();
    let now = 10 * MS; // epoch 10: key 11
    Stripes::scratch(r, NEWEST_OR_DEADLINE).store(7 << 32 | 12, Ordering::Relaxed);
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
/// so phase 3 a whole generation cycle later finds neither (a take-back of
/// one count would leave the other's).
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

/// A tag moved `n` epochs ahead (or back) is the tag of the epoch `n` later
/// (or earlier), across the key cycle's edge too: the last key, `EPOCH_KEYS`,
/// is a key like any other, never the unwritten 0.
#[test]
fn a_tag_moved_by_epochs_is_the_tag_of_that_epoch_across_the_key_cycle() {
    let near = |edge: u64| edge.saturating_sub(3)..edge + 3;
    for epoch in near(EPOCH_KEYS).chain(near(2 * EPOCH_KEYS)).chain(0..3) {
        for n in [1, 2, 3, EPOCH_KEYS - 1] {
            let (tag, later) = (Tag::new(7, epoch), Tag::new(7, epoch + n));
            assert_eq!(tag.ahead(n).0, later.0, "epoch {epoch} + {n}");
            assert_eq!(later.back(n).0, tag.0, "epoch {epoch} + {n} - {n}");
            assert_eq!(tag.behind(later), n % EPOCH_KEYS, "epoch {epoch} + {n}");
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
