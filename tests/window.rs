//! The sliding-window policies through the public API: rates at their thresholds,
//! minimum calls, combined policies, and stale outcomes that must not trip.

use cutout::{CircuitBreaker, ManualClock, Reason, State};
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);

fn ok<C: cutout::Clock>(b: &CircuitBreaker<C>) {
    b.call(|| Ok::<_, ()>(())).unwrap();
}

fn fail<C: cutout::Clock>(b: &CircuitBreaker<C>) {
    let _ = b.call(|| Err::<(), _>(()));
}

#[test]
fn combined_policies_trip_on_whichever_says_so_first() {
    let clock = ManualClock::new();
    let build = || {
        CircuitBreaker::builder()
            .consecutive_failures(3)
            .failure_rate(0.5, 6)
            .clock(clock.clone())
            .build()
            .unwrap()
    };
    // Three in a row, below minimum_calls: the streak trips.
    let b = build();
    fail(&b);
    fail(&b);
    fail(&b);
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.metrics().transitions(Reason::ConsecutiveFailures), 1);
    // Never two in a row, but half of six calls: the rate trips.
    let b = build();
    for _ in 0..3 {
        ok(&b);
        fail(&b);
    }
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.metrics().transitions(Reason::FailureRate), 1);
}

#[test]
fn the_slow_call_rate_trips_at_exactly_its_threshold_once_minimum_calls_are_in() {
    let clock = ManualClock::new();
    let b = CircuitBreaker::builder()
        .slow_calls(10 * MS, 0.5)
        .minimum_calls(4)
        .clock(clock.clone())
        .build()
        .unwrap();
    let slow = || {
        b.call(|| {
            clock.advance(11 * MS);
            Ok::<_, ()>(())
        })
        .unwrap()
    };
    slow();
    ok(&b);
    slow();
    assert_eq!(b.state(), State::Closed, "3 calls: below minimum_calls");
    ok(&b);
    assert_eq!(
        b.state(),
        State::Closed,
        "a fast success never evaluates the rate"
    );
    let m = b.metrics();
    assert_eq!(
        (m.window.calls, m.window.slow, m.window.slow_call_rate()),
        (4, 2, 0.5)
    );
    slow(); // 3 of 5 = 60%
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.metrics().transitions(Reason::SlowCallRate), 1);
}

#[test]
fn a_stale_failure_does_not_trip_the_new_generation() {
    let clock = ManualClock::new();
    let b = CircuitBreaker::builder()
        .failure_rate(0.5, 2)
        .half_open_probes(1)
        .clock(clock.clone())
        .build()
        .unwrap();
    let late: Vec<_> = (0..10).map(|_| b.try_acquire().unwrap()).collect();
    fail(&b);
    fail(&b);
    assert_eq!(b.state(), State::Open);
    clock.advance(Duration::from_secs(1));
    ok(&b); // the probe closes it: a fresh window
    assert_eq!(b.state(), State::Closed);
    ok(&b);
    for p in late {
        p.failure(); // would be 10 of 11 failed if they counted
    }
    assert_eq!(b.state(), State::Closed);
    let m = b.metrics();
    assert_eq!(
        (m.window.calls, m.window.failures, m.lifetime.stale),
        (1, 0, 10)
    );
}

#[test]
fn rates_are_reported_over_the_window_only() {
    let clock = ManualClock::new();
    let b = CircuitBreaker::builder()
        .window(Duration::from_secs(1), 4)
        .failure_rate(0.9, 100)
        .clock(clock.clone())
        .build()
        .unwrap();
    fail(&b);
    ok(&b);
    clock.advance(Duration::from_millis(500));
    ok(&b);
    ok(&b);
    assert_eq!(b.metrics().window.failure_rate(), 0.25);
    clock.advance(Duration::from_millis(500)); // the first two calls' bucket expires
    assert_eq!(b.metrics().window.failure_rate(), 0.0);
    assert_eq!(b.metrics().window.calls, 2);
}

#[test]
fn a_success_that_outlives_its_phase_is_stale_and_not_counted_by_call_or_permit() {
    let clock = ManualClock::new();
    for b in [
        CircuitBreaker::builder()
            .consecutive_failures(3)
            .clock(clock.clone())
            .build()
            .unwrap(),
        CircuitBreaker::builder()
            .failure_rate(0.5, 2)
            .clock(clock.clone())
            .build()
            .unwrap(),
    ] {
        ok(&b); // this thread's slot, the live bucket: the next call is the lean one
        let phase = b.call(|| {
            // Closed again, but another phase: the word is not the one admitted under.
            b.force_open();
            b.reset();
            Ok::<_, ()>(())
        });
        assert!(phase.is_ok());
        // The same through a permit.
        let permit = b.try_acquire().unwrap();
        b.force_open();
        b.reset();
        permit.success();
        assert_eq!(b.state(), State::Closed);
        let m = b.metrics();
        assert_eq!(
            (m.lifetime.successes, m.lifetime.stale, m.window.calls),
            (1, 2, 0),
            "counted as stale, and not in the new phase's window"
        );
    }
}
