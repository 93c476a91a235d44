//! Model 8: the consecutive-failure counter when a success's reset races failures.
//!
//! Each outcome is recorded on a permit admitted (in Closed) before the threads
//! start, so only the recording races. A linearization is an interleaving of the
//! threads' outcomes that keeps each thread's program order.
//!
//! Proves:
//! - Threshold 3, thread 1 records failure, success, failure and thread 2 one
//!   failure. No linearization has three failures in a row (the success separates
//!   thread 1's two, and thread 2's joins only one side), so the breaker must never
//!   trip, in any interleaving; the final count is 1 or 2 (some linearization's
//!   final run).
//! - Threshold 2, thread 1 records three failures and thread 2 one success. Every
//!   linearization has two failures in a row, so the breaker must always trip,
//!   exactly once, and the trip reports a count of exactly 2 (the threshold, not
//!   a count inflated by a lost reset).
//! - Threshold 3, two failures in generation 0, then `reset()`: the streak word
//!   still holds generation 0's count. Thread 1 records a success (which empties the
//!   earlier phase's word) while thread 2 records a failure, then the main thread
//!   records one more failure. The new phase has at most two failures in a row, so
//!   it must never trip: the old count never leaks into it, whichever of the
//!   success's empty-out and the failure's first count lands first.

#![cfg(cutout_loom)]

use cutout::{ManualClock, Outcome, Reason, State};
use loom::thread;
use loom_tests::{Events, model, shared_breaker};
use std::sync::Arc;

use Outcome::{Failure as F, Success as S};

fn run(
    threshold: u32,
    t1: &'static [Outcome],
    t2: &'static [Outcome],
) -> (Arc<cutout::CircuitBreaker<ManualClock>>, Events) {
    let (_clock, events, breaker) = shared_breaker(|b| b.consecutive_failures(threshold));
    let spawn = |outcomes: &'static [Outcome]| {
        let permits: Vec<_> = outcomes
            .iter()
            .map(|_| breaker.try_acquire_owned().unwrap())
            .collect();
        thread::spawn(move || {
            for (p, &o) in permits.into_iter().zip(outcomes) {
                p.record(o);
            }
        })
    };
    let (a, b) = (spawn(t1), spawn(t2));
    a.join().unwrap();
    b.join().unwrap();
    (breaker, events)
}

#[test]
fn a_success_between_failures_is_never_skipped() {
    model(|| {
        let (breaker, events) = run(3, &[F, S, F], &[F]);
        let m = breaker.metrics();
        assert_eq!(
            (m.state, m.generation),
            (State::Closed, 0),
            "tripped below 3 in a row"
        );
        assert!(events.get().is_empty());
        assert!((1..=2).contains(&m.consecutive_failures), "{m:?}");
        assert_eq!((m.lifetime.failures, m.lifetime.successes), (3, 1));
    });
}

#[test]
fn failures_in_a_row_in_every_order_always_trip() {
    model(|| {
        let (breaker, events) = run(2, &[F, F, F], &[S]);
        let m = breaker.metrics();
        assert_eq!((m.state, m.generation), (State::Open, 1));
        assert_eq!(m.transitions(Reason::ConsecutiveFailures), 1);
        let ev = events.get();
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].consecutive_failures, 2);
    });
}

#[test]
fn an_earlier_phases_streak_never_leaks_into_the_next() {
    model(|| {
        let (_clock, events, breaker) = shared_breaker(|b| b.consecutive_failures(3));
        for _ in 0..2 {
            breaker.try_acquire().unwrap().failure();
        }
        breaker.reset(); // generation 1; the word still says (0, 2)
        let success = breaker.try_acquire_owned().unwrap();
        let failure = breaker.try_acquire_owned().unwrap();
        let a = thread::spawn(move || success.success());
        let b = thread::spawn(move || failure.failure());
        a.join().unwrap();
        b.join().unwrap();
        let streak = breaker.metrics().consecutive_failures;
        assert!((0..=1).contains(&streak), "{streak}");
        breaker.try_acquire().unwrap().failure();
        let m = breaker.metrics();
        assert_eq!(
            (m.state, m.generation),
            (State::Closed, 1),
            "generation 0's failures leaked into generation 1"
        );
        assert_eq!(m.consecutive_failures, streak + 1);
        assert_eq!(m.transitions(Reason::Reset), 1);
        assert_eq!(events.get().len(), 1, "only the reset");
    });
}
