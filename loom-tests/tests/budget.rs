//! Model 11: the failure budget. After a read that did not trip, the failures it
//! grants skip their reads (see `src/window/budget.rs`); the failures that cross the
//! threshold must still trip, whichever skipped and whichever read.
//!
//! Proves, with `failure_rate(1.0, m)` over a one-bucket window and the main
//! thread's failures before the race leaving a grant: the failures the two
//! threads record together cross the threshold, and the breaker moves to Open
//! exactly once, with every failure counted; and a thread that has recorded its
//! last failure sees Closed (the other's crossing failure not in yet) or Open.
//!
//! Proves too that a sample never takes a grant read torn (the seqlock): epoch 0
//! leaves a grant whose limit is wide, then two threads fail in epoch 1, where the
//! first reader grants no more than its own number, and the third failure of epoch
//! 1 must read and trip. A sample that reads epoch 1's tag and reading with epoch
//! 0's limit while epoch 1's grant is being written, and trusts it, skips that
//! read and the breaker stays Closed. The model fails (Closed, not Open) with each
//! of these mutations of `src/window/budget.rs`: in `covers`, the
//! `fence(Acquire)` removed (B4), or the first load of the sequence word `Relaxed`
//! with the fence kept (the fence orders only what follows it, not the three words
//! before it), or both; in `grant`, the `fence(Release)` after the odd CAS removed
//! (B5), or the final store of the even value `Relaxed` (B6).

#![cfg(cutout_loom)]

use cutout::{Reason, State};
use loom::thread;
use loom_tests::{OPEN, assert_tripped_once, closed_or_open, fail_in_threads, model, rate_breaker};
use std::time::Duration;

/// `before` failures from the main thread (the last one's read grants the next
/// `minimum - before - 2`: the rate 1.0 over `minimum` calls, less the margin),
/// then a thread for each of `each`, failing that many times: together they reach
/// `minimum` failures in `minimum` calls.
fn race<const N: usize>(minimum: u32, before: u32, each: [u32; N]) {
    assert_eq!(before + each.iter().sum::<u32>(), minimum);
    model(move || {
        let (_clock, events, breaker) = rate_breaker(minimum);
        for _ in 0..before {
            let _ = breaker.call(|| Err::<(), _>("down"));
        }
        assert_eq!(breaker.state(), State::Closed);
        fail_in_threads(&breaker, each, closed_or_open);
        assert_tripped_once(&breaker, &events, Reason::FailureRate, u64::from(minimum));
    });
}

/// One failure before (a grant of one more: the next number skips), then one and
/// two: of the three racing numbers, the first skips and the other two read.
#[test]
fn a_skipped_failure_is_in_the_read_of_the_failure_that_crosses() {
    race(4, 1, [1, 2]);
}

/// Two before (a grant of two more), then two and two: two racing failures skip,
/// whichever threads they are on, and the last two read.
#[test]
fn two_skipped_failures_on_either_thread_are_in_the_crossing_read() {
    race(6, 2, [2, 2]);
}

/// One before (a grant of one), then three threads failing once each: the first
/// number skips, and the last reads with no failure of its own before it, so only
/// the count's `AcqRel` orders the skipped record before that read. (All three
/// models, and `trip.rs`'s `failure_rate_trips_once`, fail with a `Relaxed`
/// count: it is the only order between one failure's record and another's read.)
#[test]
fn a_skipped_failure_is_seen_by_a_third_threads_only_read() {
    race(4, 1, [1, 1, 1]);
}

/// Epoch 0 (reading 5 s): five successes, then failure number 1, whose read (6
/// calls, 1 failure) grants up to number 4. Epoch 1 (15 s, a new window): one
/// thread fails once and another twice, reaching 3 of 3. The first to read finds
/// 1 of 3 and grants its own number only (a room of 2 leaves no allowance), so
/// number 4 reads and trips. In the torn read each mutant lets through, number 4
/// takes epoch 1's tag and reading with epoch 0's limit (4) while the other thread
/// writes epoch 1's grant: a sequence word of 2 at both looks (B4, B5: the writer's
/// odd value not seen), or 4 at both with the stale limit (B6: the even value seen
/// without the words it publishes).
#[test]
fn a_grant_being_written_over_another_epochs_is_never_read_torn() {
    model(|| {
        let (clock, events, breaker) = rate_breaker(3);
        for _ in 0..5 {
            let _ = breaker.call(|| Ok::<(), &str>(()));
        }
        let _ = breaker.call(|| Err::<(), _>("down"));
        clock.advance(Duration::from_secs(10));
        let threads: Vec<_> = [1, 2]
            .into_iter()
            .map(|n| {
                let b = breaker.clone();
                thread::spawn(move || {
                    for _ in 0..n {
                        let _ = b.call(|| Err::<(), _>("down"));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let m = breaker.metrics();
        assert_eq!(m.state, State::Open, "epoch 1's third failure tripped");
        assert_eq!(m.transitions(Reason::FailureRate), 1);
        assert_eq!(m.total_transitions(), 1);
        assert_eq!(m.lifetime.failures, 4);
        assert_eq!(m.retry_after, Some(OPEN));
        let ev = events.get();
        assert_eq!(ev.len(), 1, "{ev:?}");
    });
}
