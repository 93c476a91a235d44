//! Model 6: the sliding window under bucket rotation, through the crate's
//! internal `loom_hooks::WindowModel` (explicit times, a chosen stripe).
//!
//! Proves the bound documented in `src/window.rs`:
//! - rotation on the shared stripe: two threads record in epoch 0 while a third
//!   records in epoch 2 (the same ring slot of a 2-bucket window), rotating it. The
//!   rotating thread's own outcome is always counted; per counter, the new bucket
//!   holds at most one extra (misattributed) increment per other writer that was
//!   counted; no read, during or after the race, exceeds what was recorded. (One
//!   outcome's call and failure increments can land on different sides of the
//!   zeroing, so a raced bucket may show more failures than calls: loom found
//!   calls 1, failures 2.)
//! - no rotation, shared stripe: three racing writers in the current bucket are
//!   counted exactly.
//! - a later phase on the shared stripe (contract 18): a writer admitted in an
//!   earlier closed phase, whose breaker has since tripped and closed again, races
//!   the later phase's writer rotating the same bucket: its outcome never counts in
//!   the later phase's window, during the race or after it, and the later writer's
//!   own outcome is counted exactly. A reader racing that rotation never counts the
//!   earlier phase's outcomes either.
//! - rotation on an owned stripe raced by a reader: the reader never sees the new
//!   tag with the old bucket's counts (zeroing is published with the tag).
//! - the owner finalizing its live bucket raced by a reader: the live bucket's
//!   calls move from the owner's live counter into the bucket, and the reader
//!   counts them exactly once.
//! - the owner reusing a slot raced by a reader that read its old tag: the reader
//!   never counts the new epoch's outcomes under the old epoch's tag.
//! - the owner rewriting its summary (a rotation) raced by a reader that takes
//!   it: the reader never pairs one rotation's sequence word with another's
//!   counts, nor counts a bucket both in the summary and as the live one; nor,
//!   when the live bucket's slot is reused during the read, the new epoch's counts.

#![cfg(cutout_loom)]

use cutout::loom_hooks::WindowModel;
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::thread;
use loom_tests::model;
use std::sync::Arc;

const MS: u64 = 1_000_000;

#[test]
fn rotation_on_the_shared_stripe_stays_within_the_bound() {
    model(|| {
        let w = Arc::new(WindowModel::new(2, MS));
        let old: Vec<_> = [true, false]
            .into_iter()
            .map(|failed| {
                let w = w.clone();
                thread::spawn(move || {
                    let counted = w.record(true, 0, 0, failed);
                    // A reader may pair the old tag with the new bucket's counts, so
                    // the bound is everything recorded: 3 calls, 2 failures.
                    let c = w.counts(0, 0);
                    assert!(c.calls <= 3 && c.failures <= 2, "{c:?}");
                    counted
                })
            })
            .collect();
        let rotator = {
            let w = w.clone();
            thread::spawn(move || {
                assert!(
                    w.record(true, 0, 2 * MS, true),
                    "the newest epoch always counts"
                );
                let c = w.counts(0, 2 * MS);
                assert!(c.calls >= 1 && c.calls <= 3, "{c:?}");
                assert!(c.failures >= 1 && c.failures <= 2, "{c:?}");
            })
        };
        let counted: Vec<bool> = old.into_iter().map(|t| t.join().unwrap()).collect();
        rotator.join().unwrap();

        let c = w.counts(0, 2 * MS);
        let others = counted.iter().filter(|&&c| c).count() as u64;
        assert!(c.calls >= 1, "the rotating writer's outcome is lost: {c:?}");
        assert!(
            c.calls <= 1 + others,
            "more misattributed than racing writers: {c:?}"
        );
        // Per counter: the racing failure may be misattributed while its call is
        // lost, so failures are bounded by what was recorded, not by calls.
        let old_failure = u64::from(counted[0]);
        assert!(c.failures >= 1 && c.failures <= 1 + old_failure, "{c:?}");
    });
}

/// A reader at the new epoch while a lone writer rotates a shared bucket out of an
/// older epoch of the same phase never counts the older epoch's outcomes: the
/// rotation empties the counts before its tag's CAS as well as after. (It emptied
/// them only after: a reader in between took the whole older bucket for the new
/// epoch's, which a review's stress test found and this model failed on.)
#[test]
fn a_reader_never_counts_an_older_epoch_in_a_shared_bucket_being_rotated() {
    model(|| {
        let w = Arc::new(WindowModel::new(2, MS));
        for failed in [true, false, true] {
            assert!(w.record(true, 0, 0, failed));
        }
        let rotator = {
            let w = w.clone();
            thread::spawn(move || assert!(w.record(true, 0, 2 * MS, true)))
        };
        let reader = {
            let w = w.clone();
            thread::spawn(move || {
                let c = w.counts(0, 2 * MS);
                assert!(c.calls <= 1 && c.failures <= 1, "{c:?}");
            })
        };
        rotator.join().unwrap();
        reader.join().unwrap();
        let c = w.counts(0, 2 * MS);
        assert_eq!((c.calls, c.failures), (1, 1));
    });
}

#[test]
fn shared_stripe_without_rotation_is_exact() {
    model(|| {
        let w = Arc::new(WindowModel::new(2, MS));
        assert!(w.record(true, 0, 0, true));
        let threads: Vec<_> = [true, false, true]
            .into_iter()
            .map(|failed| {
                let w = w.clone();
                thread::spawn(move || assert!(w.record(true, 0, MS / 2, failed)))
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let c = w.counts(0, MS / 2);
        assert_eq!((c.calls, c.failures), (4, 3));
    });
}

#[test]
fn an_earlier_phases_writer_never_counts_in_a_later_phases_shared_bucket() {
    model(|| {
        let w = Arc::new(WindowModel::new(2, MS));
        // Phase 0 has written the shared bucket of epoch 0.
        assert!(w.record(true, 0, 0, false));
        let stale = {
            let w = w.clone();
            // Admitted in phase 0; its failure arrives as the breaker moves on.
            thread::spawn(move || w.record(true, 0, 0, true))
        };
        let later = {
            let w = w.clone();
            thread::spawn(move || {
                // Tripped, cooled down, probed, closed: generation 3.
                w.close_again(3);
                assert!(w.record(true, 3, 0, false), "the current phase counts");
                let c = w.counts(3, 0);
                assert_eq!(c.failures, 0, "phase 0's failure in phase 3's window");
                assert_eq!(c.calls, 1, "{c:?}");
            })
        };
        stale.join().unwrap();
        later.join().unwrap();
        let c = w.counts(3, 0);
        assert_eq!((c.calls, c.failures), (1, 0), "{c:?}");
    });
}

#[test]
fn a_reader_never_counts_an_earlier_phase_in_a_shared_bucket_being_rotated() {
    model(|| {
        let w = Arc::new(WindowModel::new(2, MS));
        assert!(w.record(true, 0, 0, true));
        assert!(w.record(true, 0, 0, true));
        let later = {
            let w = w.clone();
            thread::spawn(move || {
                w.close_again(3);
                assert!(w.record(true, 3, 0, false));
            })
        };
        let reader = {
            let w = w.clone();
            thread::spawn(move || {
                let c = w.counts(3, 0);
                assert_eq!(c.failures, 0, "phase 0's failures read as phase 3's: {c:?}");
                assert!(c.calls <= 1, "{c:?}");
            })
        };
        later.join().unwrap();
        reader.join().unwrap();
        let c = w.counts(3, 0);
        assert_eq!((c.calls, c.failures), (1, 0), "{c:?}");
    });
}

/// Moves the breaker on to `generation`'s closed phase again, a whole generation
/// cycle after the race (3-bit generations), and counts one success in the shared
/// bucket there, in a later epoch of the same ring slot: the window must hold that
/// call and nothing of the earlier phase that had the generation.
#[cfg(cutout_tiny_generations)]
fn a_cycle_later_only_its_own_call_counts(w: &WindowModel, generation: u32) {
    w.close_again(generation);
    assert!(w.record(true, generation, 4 * MS, false));
    let c = w.counts(generation, 4 * MS);
    assert_eq!((c.calls, c.failures), (1, 0), "{c:?}");
}

/// With 3-bit generations (CI's tiny-generation run): a writer of phase 1 rotates
/// a shared bucket of phase 0 while the breaker trips (generation 2), so the writer
/// is stale before it has emptied the bucket's counts. A whole generation cycle
/// later, phase 0 (generation 0 again) counts in that bucket: phase 0's old failure
/// must not come back. It did while a rotation emptied the old counts only if its
/// writer was still current (found by a review, 2026-12-03: 1 call, 1 failure).
#[cfg(cutout_tiny_generations)]
#[test]
fn a_stale_rotators_old_counts_do_not_return_a_generation_cycle_later() {
    model(|| {
        let w = Arc::new(WindowModel::new(2, MS));
        assert!(w.record(true, 0, 0, true));
        w.close_again(1);
        let rotator = {
            let w = w.clone();
            thread::spawn(move || w.record(true, 1, 2 * MS, false))
        };
        let mover = {
            let w = w.clone();
            thread::spawn(move || w.close_again(2))
        };
        rotator.join().unwrap();
        mover.join().unwrap();
        a_cycle_later_only_its_own_call_counts(&w, 0); // 3, 4, ..., 7, 0
    });
}

/// With 3-bit generations: a writer of phase 1 records a failure in a shared
/// bucket (its call, then its failure) while the breaker moves on to phase 2, whose
/// writer rotates the bucket. A whole generation cycle later, phase 1 (generation 1
/// again) counts a success there: the stale failure must not come back. It did
/// while a rotation left the replaced phase's empty counts tagged as they were,
/// which the stale writer then counted in (found by a second review, 2026-12-03).
#[cfg(cutout_tiny_generations)]
#[test]
fn a_stale_writers_late_failure_does_not_return_a_generation_cycle_later() {
    model(|| {
        let w = Arc::new(WindowModel::new(2, MS));
        w.close_again(1);
        assert!(w.record(true, 1, 0, false));
        let stale = {
            let w = w.clone();
            thread::spawn(move || w.record(true, 1, 0, true))
        };
        let later = {
            let w = w.clone();
            thread::spawn(move || {
                w.close_again(2);
                assert!(w.record(true, 2, 0, false));
            })
        };
        stale.join().unwrap();
        later.join().unwrap();
        a_cycle_later_only_its_own_call_counts(&w, 1); // 3, ..., 7, 0, 1
    });
}

/// The same with two stale writers of phase 1, each recording a failure: one may
/// count into the failures count empty, the other after it (its own phase's
/// count, so unchecked). A whole generation cycle later phase 1 must find
/// neither (a third review, 2026-12-03, found a take-back of one count that left
/// the other's).
#[cfg(cutout_tiny_generations)]
#[test]
fn two_stale_writers_late_failures_do_not_return_a_generation_cycle_later() {
    model(|| {
        let w = Arc::new(WindowModel::new(2, MS));
        w.close_again(1);
        assert!(w.record(true, 1, 0, false));
        let stale: Vec<_> = (0..2)
            .map(|_| {
                let w = w.clone();
                thread::spawn(move || w.record(true, 1, 0, true))
            })
            .collect();
        w.close_again(2);
        assert!(w.record(true, 2, 0, false));
        for t in stale {
            t.join().unwrap();
        }
        a_cycle_later_only_its_own_call_counts(&w, 1); // 3, ..., 7, 0, 1
    });
}

/// With 3-bit generations: phase 1 records a failure in a shared bucket; the
/// bucket sits while the breaker moves on to phase 7, whose writer rotates it
/// while another thread moves the breaker on through 0 to 1 again (two
/// transitions, and a whole cycle since phase 1), rotating the bucket at each.
/// Phase 1 must never read the old failure, however the rotations interleave.
/// It could while a rotation emptied the replaced phase's counts only after its
/// tag's CAS: a rotating writer delayed there let them through (a fourth review,
/// 2026-12-03).
#[cfg(cutout_tiny_generations)]
#[test]
fn a_delayed_rotator_does_not_let_an_old_phases_counts_through() {
    model(|| {
        let w = Arc::new(WindowModel::new(2, MS));
        w.close_again(1);
        assert!(w.record(true, 1, 0, true));
        w.close_again(7);
        let rotator = {
            let w = w.clone();
            thread::spawn(move || w.record(true, 7, 2 * MS, false))
        };
        let mover = {
            let w = w.clone();
            thread::spawn(move || {
                w.close_again(0);
                let _ = w.record(true, 0, 2 * MS, false);
                w.close_again(1);
                assert!(w.record(true, 1, 4 * MS, false));
                let c = w.counts(1, 4 * MS);
                assert_eq!(c.failures, 0, "phase 1's old failure is back: {c:?}");
                assert!(c.calls <= 1, "{c:?}");
            })
        };
        rotator.join().unwrap();
        mover.join().unwrap();
        assert_eq!(w.counts(1, 4 * MS).failures, 0);
    });
}

#[test]
fn a_reader_never_sees_a_new_tag_with_old_counts() {
    model(|| {
        let w = Arc::new(WindowModel::new(2, MS));
        let writer = {
            let w = w.clone();
            thread::spawn(move || {
                assert!(w.record(false, 0, 0, true));
                assert!(w.record(false, 0, 2 * MS, false));
            })
        };
        let reader = {
            let w = w.clone();
            thread::spawn(move || {
                let c = w.counts(0, 2 * MS);
                assert_eq!(c.failures, 0, "epoch 0's failure read under epoch 2's tag");
                assert!(c.calls <= 1, "{c:?}");
            })
        };
        writer.join().unwrap();
        reader.join().unwrap();
        let c = w.counts(0, 2 * MS);
        assert_eq!((c.calls, c.failures), (1, 0));
    });
}

#[test]
fn a_finalized_live_bucket_is_counted_once() {
    model(|| {
        let w = Arc::new(WindowModel::new(2, MS));
        let first_counted = Arc::new(AtomicBool::new(false));
        let writer = {
            let (w, first_counted) = (w.clone(), first_counted.clone());
            thread::spawn(move || {
                assert!(w.record(false, 0, 0, false));
                first_counted.store(true, Ordering::Release);
                // Epoch 1: epoch 0's bucket is finalized and epoch 1's goes live.
                assert!(w.record(false, 0, MS, false));
            })
        };
        let reader = {
            let (w, first_counted) = (w.clone(), first_counted.clone());
            thread::spawn(move || {
                if first_counted.load(Ordering::Acquire) {
                    let c = w.counts(0, MS);
                    assert!(
                        (1..=2).contains(&c.calls),
                        "epoch 0's call lost or counted twice: {c:?}"
                    );
                }
            })
        };
        writer.join().unwrap();
        reader.join().unwrap();
        assert_eq!(w.counts(0, MS).calls, 2);
    });
}

#[test]
fn a_reader_never_counts_a_later_epoch_under_an_earlier_tag() {
    model(|| {
        let w = Arc::new(WindowModel::new(2, MS));
        let writer = {
            let w = w.clone();
            thread::spawn(move || {
                assert!(w.record(false, 0, 0, false));
                // Epoch 2 reuses epoch 0's slot: its failure is outside a window
                // that ends at epoch 1.
                assert!(w.record(false, 0, 2 * MS, true));
            })
        };
        let reader = {
            let w = w.clone();
            thread::spawn(move || {
                let c = w.counts(0, MS);
                assert_eq!(c.failures, 0, "epoch 2's failure read under epoch 0's tag");
                assert!(c.calls <= 1, "{c:?}");
            })
        };
        writer.join().unwrap();
        reader.join().unwrap();
    });
}

/// An owner of a 3-bucket window counts a failure in epoch 2 and two successes
/// in epoch 3 (its summary then holds epoch 2's bucket, for the window that ends
/// at epoch 3; a young window reads the buckets, not the summary), then records
/// at epoch `next` (a failure if `failed`) while a reader runs `read` if it has
/// seen the summary written. The model, after both.
fn summary_raced_by(next: u64, failed: bool, read: fn(&WindowModel)) -> Arc<WindowModel> {
    let w = Arc::new(WindowModel::new(3, MS));
    let ready = Arc::new(AtomicBool::new(false));
    let writer = {
        let (w, ready) = (w.clone(), ready.clone());
        thread::spawn(move || {
            assert!(w.record(false, 0, 2 * MS, true));
            assert!(w.record(false, 0, 3 * MS, false));
            assert!(w.record(false, 0, 3 * MS, false));
            ready.store(true, Ordering::Release);
            assert!(w.record(false, 0, next * MS, failed));
        })
    };
    let reader = {
        let (w, ready) = (w.clone(), ready.clone());
        thread::spawn(move || {
            if ready.load(Ordering::Acquire) {
                read(&w);
            }
        })
    };
    writer.join().unwrap();
    reader.join().unwrap();
    w
}

#[test]
fn a_reader_of_the_summary_never_pairs_it_with_another_rotation() {
    model(|| {
        // Epoch 4 (an unused slot: nothing is lost): epoch 3's bucket is
        // finalized and the summary rewritten for the window ending at 4, epochs
        // 2 and 3 (three calls, one failure).
        let w = summary_raced_by(4, false, |w| {
            // Epochs 2 and 3, exactly, however the rotation interleaves (the
            // summary of the window ending at 4 with epoch 3's live bucket would
            // be five calls).
            let c = w.counts(0, 3 * MS);
            assert_eq!((c.calls, c.failures), (3, 1), "{c:?}");
            let c = w.counts(0, 4 * MS);
            assert!((3..=4).contains(&c.calls) && c.failures == 1, "{c:?}");
        });
        let c = w.counts(0, 4 * MS);
        assert_eq!((c.calls, c.failures), (4, 1));
    });
}

#[test]
fn a_reader_of_the_summary_never_counts_the_live_slots_next_epoch() {
    model(|| {
        // Epoch 6 reuses epoch 3's slot, rotating its live bucket out.
        let w = summary_raced_by(6, true, |w| {
            // Epoch 2's failure and epoch 3's calls, or none of epoch 3's if
            // they went with their slot during the read; never epoch 6's.
            let c = w.counts(0, 3 * MS);
            let exact = c.failures == 1 && (c.calls == 3 || c.calls == 1);
            assert!(exact, "epoch 6 read in epoch 3's window: {c:?}");
        });
        let c = w.counts(0, 6 * MS);
        assert_eq!((c.calls, c.failures), (1, 1));
    });
}
