//! Model 10: a trip races the end of a ramp (`Builder::ramp_up`).
//!
//! Proves: a failure recorded during a ramp, whose ramp has just run its course,
//! and a call that arrives after the ramp's end make exactly one transition out of
//! Recovering between them: either the trip (Recovering → Open at the next backoff
//! level, `RampFailed`; the late call is rejected by the new cooldown) or the end
//! (Recovering → Closed, `RampCompleted`; the failure, admitted in the ramp,
//! is then stale, or was counted in the ramp just before its end, and changes
//! nothing in the closed phase; the late call is admitted). Never both,
//! never neither, one event and one counted transition either way; and each
//! way occurs among the executions.

#![cfg(cutout_loom)]

use cutout::{Error, Reason, State};
use loom::thread;
use loom_tests::{OPEN, model, shared_breaker, trip_and_cool};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

const RAMP: Duration = Duration::from_secs(10);

/// Executions that ended each way (std atomics: they outlive the executions).
static FAILED: AtomicUsize = AtomicUsize::new(0);
static COMPLETED: AtomicUsize = AtomicUsize::new(0);

#[test]
fn a_trip_racing_the_ramps_end_makes_one_transition() {
    model(|| {
        let (clock, events, breaker) = shared_breaker(|b| b.consecutive_failures(1).ramp_up(RAMP));
        trip_and_cool(&breaker, &clock);
        assert_eq!(breaker.call(|| Ok::<_, ()>("probe")), Ok("probe"));
        assert_eq!(breaker.state(), State::Recovering);
        // A stripe's first call in a ramp is admitted.
        let permit = breaker.try_acquire_owned().unwrap();
        clock.advance(RAMP); // the ramp is over: the next call ends it

        let tripper = thread::spawn(move || permit.failure());
        let b = breaker.clone();
        let late = thread::spawn(move || b.call(|| Ok::<_, ()>("late")));
        tripper.join().unwrap();
        let late = late.join().unwrap();

        let m = breaker.metrics();
        let ev = events.get();
        assert_eq!(ev.len(), 4, "{ev:?}");
        assert_eq!(m.total_transitions(), 4);
        assert_eq!(m.generation, 4, "one transition out of the ramp");
        let last = ev[3];
        assert_eq!((last.from, last.generation), (State::Recovering, 4));
        match last.reason {
            Reason::RampFailed => {
                FAILED.fetch_add(1, Ordering::Relaxed);
                assert_eq!((m.state, m.level, last.level), (State::Open, 1, 1));
                assert_eq!(m.retry_after, Some(OPEN * 2), "the level-1 cooldown");
                match late {
                    Err(Error::Rejected(r)) => {
                        assert_eq!((r.state(), r.retry_after()), (State::Open, Some(OPEN * 2)))
                    }
                    other => panic!("a call after the trip got {other:?}"),
                }
                assert_eq!(m.lifetime.stale, 0);
                assert_eq!(m.transitions(Reason::RampCompleted), 0);
            }
            Reason::RampCompleted => {
                COMPLETED.fetch_add(1, Ordering::Relaxed);
                assert_eq!((m.state, m.level), (State::Closed, 0));
                assert_eq!(late, Ok("late"));
                // The failure is stale if it arrived after the end, or counted, in
                // the ramp, if it arrived first and lost the race to trip: either
                // way it decides nothing in the closed phase.
                assert_eq!(m.lifetime.stale + m.lifetime.failures, 2, "{m:?}");
                assert_eq!(m.consecutive_failures, 0);
                assert_eq!(m.transitions(Reason::RampFailed), 0);
            }
            other => panic!("unexpected transition {other:?}"),
        }
    });
    let ways = (
        FAILED.load(Ordering::Relaxed),
        COMPLETED.load(Ordering::Relaxed),
    );
    assert!(
        ways.0 > 0 && ways.1 > 0,
        "executions (failed, completed): {ways:?}"
    );
}
