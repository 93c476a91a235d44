//! Model 1: two threads record the failure that crosses the threshold.
//!
//! Proves: whichever thread's failure crosses the threshold, the breaker moves to
//! Open exactly once: one CAS wins, one event is delivered, one transition is
//! counted, the generation moves by exactly one, and the opened-at timestamp is in
//! the same word as the state (a thread that sees Open sees the full cooldown ahead).

#![cfg(cutout_loom)]

use cutout::{CircuitBreaker, ManualClock, Reason, State};
use loom_tests::{
    Events, OPEN, assert_tripped_once, fail_in_threads, model, rate_breaker, shared_breaker,
};
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
    fail_in_threads(&breaker, [1, 1], check_after);
    let event = assert_tripped_once(&breaker, &events, reason, 2);
    assert_eq!(event.at, Duration::from_secs(5));
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
