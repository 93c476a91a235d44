//! Model 14: a what-if candidate's state word and counts when two threads record
//! into its live breaker at once.
//!
//! Each outcome is recorded on a live permit admitted (in Closed) before the
//! threads start; the live breaker never trips (threshold 10). The offers race:
//! each decides the candidate's admission and records into it.
//!
//! Proves:
//! - Candidate threshold 2, each thread records one failure: the candidate admits
//!   both (a trip needs both failures, each admitted before its own record) and
//!   trips exactly once: Open, one opening, no would-be rejection.
//! - Candidate threshold 1, thread 1 records a failure and thread 2 a success: the
//!   candidate always trips exactly once, on the failure; the success is either
//!   admitted (counted before the trip, or stale after it) or a would-be
//!   rejection, tallied as a success turned away: `would_reject` is 0 or 1 and
//!   equals `successes_turned_away`; nothing is spared, nothing unseen. The
//!   same with two successes made through `call` in the second thread (the
//!   second on its lean path, which offers it inline): each admitted or turned
//!   away.

#![cfg(cutout_loom)]

use cutout::{CircuitBreaker, ManualClock, Outcome, State};
use loom::thread;
use loom_tests::{model, shared_breaker};
use std::sync::Arc;

/// Threads recording `t1` and `t2` on permits admitted before they start; with
/// `t2_through_call`, the second thread makes two calls (successes) through
/// `call` instead: its first takes its stripe, so the second takes the lean
/// path.
fn run(
    candidate_threshold: u32,
    t1: Outcome,
    t2: Outcome,
    t2_through_call: bool,
) -> Arc<CircuitBreaker<ManualClock>> {
    let (_clock, _events, breaker) = shared_breaker(|b| {
        b.consecutive_failures(10).candidate(
            "c",
            CircuitBreaker::builder().consecutive_failures(candidate_threshold),
        )
    });
    let spawn = |outcome: Outcome| {
        let permit = breaker.try_acquire_owned().unwrap();
        thread::spawn(move || permit.record(outcome))
    };
    let a = spawn(t1);
    let b = match t2_through_call {
        false => spawn(t2),
        true => {
            assert_eq!(t2, Outcome::Success);
            let breaker = breaker.clone();
            thread::spawn(move || {
                for _ in 0..2 {
                    breaker.call(|| Ok::<_, ()>(())).unwrap();
                }
            })
        }
    };
    a.join().unwrap();
    b.join().unwrap();
    breaker
}

#[test]
fn two_failures_offered_at_once_trip_the_candidate_once() {
    model(|| {
        let breaker = run(2, Outcome::Failure, Outcome::Failure, false);
        assert_eq!(
            breaker.state(),
            State::Closed,
            "the live breaker decides alone"
        );
        let [c] = &breaker.candidates()[..] else {
            panic!("one candidate")
        };
        assert_eq!(
            (c.state, c.opened, c.would_reject),
            (State::Open, 1, 0),
            "{c:?}"
        );
        assert_eq!(
            (c.failures_spared, c.successes_turned_away, c.unseen),
            (0, 0, 0)
        );
    });
}

#[test]
fn a_success_racing_the_trip_is_admitted_or_turned_away_never_lost() {
    for through_call in [false, true] {
        model(move || success_racing_the_trip(through_call));
    }
}

fn success_racing_the_trip(through_call: bool) {
    let breaker = run(1, Outcome::Failure, Outcome::Success, through_call);
    let successes = 1 + u64::from(through_call);
    let m = breaker.metrics();
    assert_eq!(
        (m.state, m.lifetime.failures, m.lifetime.successes),
        (State::Closed, 1, successes)
    );
    let [c] = &breaker.candidates()[..] else {
        panic!("one candidate")
    };
    assert_eq!((c.state, c.opened), (State::Open, 1), "{c:?}");
    assert!(c.would_reject <= successes, "{c:?}");
    assert_eq!(c.successes_turned_away, c.would_reject, "{c:?}");
    assert_eq!((c.failures_spared, c.unseen), (0, 0), "{c:?}");
}
