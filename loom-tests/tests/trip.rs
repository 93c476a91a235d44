//! Model 1: two threads record the failure that crosses the threshold.
//!
//! Proves: whichever thread's failure crosses the threshold, the breaker moves to
//! Open exactly once: one CAS wins, one event is delivered, one transition is
//! counted, the generation moves by exactly one, and the opened-at timestamp is in
//! the same word as the state (a thread that sees Open sees the full cooldown ahead).

#![cfg(cutout_loom)]

use cutout::{CircuitBreaker, ManualClock, Reason, State};
use loom::thread;
use loom_tests::{Events, OPEN, model, rate_breaker, shared_breaker};
use std::sync::Arc;
use std::time::Duration;

/// What a thread that has recorded its failure sees when it asks again: either
/// Closed (the other failure is not in yet) or Open with the whole cooldown ahead.
fn check_after(breaker: &CircuitBreaker<ManualClock>) {
    match breaker.try_acquire() {
        Ok(permit) => permit.ignore(),
        Err(r) => assert_eq!((r.state(), r.retry_after()), (State::Open, Some(OPEN))),
    }
}

fn race(breaker: Arc<CircuitBreaker<ManualClock>>, events: Events, reason: Reason) {
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let b = breaker.clone();
            thread::spawn(move || {
                let _ = b.call(|| Err::<(), _>("down"));
                check_after(&b);
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let m = breaker.metrics();
    assert_eq!(m.state, State::Open);
    assert_eq!(m.generation, 1, "one transition, one generation step");
    assert_eq!(m.transitions(reason), 1);
    assert_eq!(m.total_transitions(), 1);
    assert_eq!(m.retry_after, Some(OPEN), "opened-at is the trip's time");
    assert_eq!(m.lifetime.failures, 2);
    let ev = events.get();
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(
        (ev[0].from, ev[0].to, ev[0].reason, ev[0].generation),
        (State::Closed, State::Open, reason, 1)
    );
    assert_eq!(ev[0].at, Duration::from_secs(5));
}

#[test]
fn consecutive_failures_trip_once() {
    model(|| {
        let (clock, events, breaker) = shared_breaker(|b| b.consecutive_failures(2));
        // Time is data: set before the threads start, so opened-at is 5 s, not 0.
        clock.advance(Duration::from_secs(5));
        race(breaker, events.clone(), Reason::ConsecutiveFailures);
    });
}

#[test]
fn failure_rate_trips_once() {
    model(|| {
        let (_clock, events, breaker) = rate_breaker(2);
        race(breaker, events.clone(), Reason::FailureRate);
    });
}
