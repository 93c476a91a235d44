//! The sliding-window policies through the public API: rates at their thresholds
//! (decimal ones included), minimum calls, combined policies, the window's edges
//! after gaps, and stale outcomes that must not trip or count.

mod common;

use common::{XorShift, on_manual_clock, rate_window};
use cutout::{CircuitBreaker, ManualClock, Reason, State, WindowCounts};
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);
const SEC: Duration = Duration::from_secs(1);

fn ok<C: cutout::Clock>(b: &CircuitBreaker<C>) {
    b.call(|| Ok::<_, ()>(())).unwrap();
}

fn fail<C: cutout::Clock>(b: &CircuitBreaker<C>) {
    let _ = b.call(|| Err::<(), _>(()));
}

/// A window whose older successes left it (its rate rose with no call) is not
/// checked by the success that brings it back up to `minimum_calls`: only the
/// successes after a failure that found it short are. It trips at its next
/// failure, as `failure_rate`'s docs say.
#[test]
fn a_rate_raised_by_successes_leaving_trips_at_the_next_failure() {
    let clock = ManualClock::new();
    let b = CircuitBreaker::builder()
        .window(Duration::from_secs(10), 10)
        .failure_rate(0.5, 5)
        .clock(clock.clone())
        .build()
        .unwrap();
    (0..10).for_each(|_| ok(&b));
    clock.advance(Duration::from_secs(5));
    (0..4).for_each(|_| fail(&b)); // 4 of 14
    clock.advance(Duration::from_millis(5_500)); // the successes have left
    assert_eq!(b.metrics().window, WindowCounts::new(4, 4, 0));
    ok(&b);
    assert_eq!(b.metrics().window, WindowCounts::new(5, 4, 0));
    assert_eq!(b.state(), State::Closed, "no success checked the rate");
    fail(&b);
    assert_eq!(b.state(), State::Open);
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
    let (b, clock) = on_manual_clock(
        CircuitBreaker::builder()
            .slow_calls(10 * MS, 0.5)
            .minimum_calls(4),
    );
    let slow = || {
        b.call(|| {
            clock.advance(11 * MS);
            Ok::<_, ()>(())
        })
        .unwrap()
    };
    slow();
    ok(&b);
    ok(&b);
    assert_eq!(b.state(), State::Closed, "3 calls: below minimum_calls");
    ok(&b);
    assert_eq!(b.state(), State::Closed, "1 slow of 4: 25%");
    slow();
    assert_eq!(b.state(), State::Closed, "2 slow of 5: 40%");
    slow(); // 3 of 6 = 50%
    let m = b.metrics();
    assert_eq!(m.state, State::Open);
    assert_eq!(m.transitions(Reason::SlowCallRate), 1);
    assert_eq!(m.tripped_by, Some(WindowCounts::new(6, 0, 3)));
}

/// `b` is open, tripped once, by `reason`; `why` says what should have tripped it.
fn assert_tripped_once(b: &CircuitBreaker<ManualClock>, reason: Reason, why: &str) {
    let m = b.metrics();
    assert_eq!(
        (m.state, m.transitions(reason)),
        (State::Open, 1),
        "{why}, window {:?}",
        m.window
    );
}

/// A rate is reached when `failures / calls >= threshold` (`Builder::failure_rate`),
/// so 55 failures of 100 trip at 0.55, though `0.55 * 100.0` is a little above 55;
/// likewise 7 of 100 at 0.07 and 7 of 50 at 0.14.
#[test]
fn a_failure_rate_exactly_at_a_decimal_threshold_trips() {
    for (threshold, calls, failures) in [(0.55, 100u32, 55u32), (0.07, 100, 7), (0.14, 50, 7)] {
        assert!(f64::from(failures) / f64::from(calls) >= threshold);
        let b = rate_window(10 * SEC, 10, threshold, calls)
            .clock(ManualClock::new())
            .build()
            .unwrap();
        for _ in 0..calls - failures {
            ok(&b);
        }
        for _ in 0..failures - 1 {
            fail(&b);
        }
        assert_eq!(
            b.state(),
            State::Closed,
            "threshold {threshold}: below minimum_calls"
        );
        fail(&b);
        let why = format!("threshold {threshold}: {failures} of {calls} failed");
        assert_tripped_once(&b, Reason::FailureRate, &why);
    }
}

/// The slow-call rate likewise: 14 slow calls of 25 trip at 0.56, though
/// `0.56 * 25.0` is a little above 14.
#[test]
fn a_slow_call_rate_exactly_at_a_decimal_threshold_trips() {
    let (threshold, calls, slow) = (0.56, 25u32, 14u32);
    assert!(f64::from(slow) / f64::from(calls) >= threshold);
    let (b, clock) = on_manual_clock(
        CircuitBreaker::builder()
            .window(10 * SEC, 10)
            .slow_calls(10 * MS, threshold)
            .minimum_calls(calls),
    );
    for _ in 0..calls - slow {
        ok(&b);
    }
    for _ in 0..slow {
        b.call(|| {
            clock.advance(11 * MS);
            Ok::<_, ()>(())
        })
        .unwrap();
    }
    assert_tripped_once(&b, Reason::SlowCallRate, &format!("{slow} of {calls} slow"));
}

#[test]
fn a_stale_failure_does_not_trip_the_new_generation() {
    let (b, clock) = on_manual_clock(
        CircuitBreaker::builder()
            .failure_rate(0.5, 2)
            .half_open_probes(1),
    );
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
    let (b, clock) = on_manual_clock(rate_window(Duration::from_secs(1), 4, 0.9, 100));
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

/// Every kind of outcome from the phase before a trip (a failure, a success, an
/// ignored outcome, a dropped permit), finished after a probe closed the breaker
/// again, stays out of the new window: the recorded ones count as stale (an
/// ignored one too, not as ignored), the dropped one as dropped only.
#[test]
fn late_outcomes_of_every_kind_stay_out_of_the_restarted_window() {
    let (b, clock) = on_manual_clock(rate_window(10 * SEC, 10, 0.5, 4).open_duration(SEC));
    let [f1, f2, s, i, d] = std::array::from_fn(|_| b.try_acquire().unwrap());
    ok(&b);
    ok(&b);
    fail(&b);
    fail(&b); // 2 of 4: trips
    assert_eq!(b.state(), State::Open);
    clock.advance(SEC);
    ok(&b); // the probe closes it
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.metrics().window, WindowCounts::default(), "a new window");
    f1.failure();
    f2.failure();
    s.success();
    i.ignore();
    drop(d);
    let m = b.metrics();
    assert_eq!(
        (m.state, m.window),
        (State::Closed, WindowCounts::default())
    );
    let l = m.lifetime;
    // 5 late + 4 closed + 1 probe.
    assert_eq!(l.admitted, 10);
    assert_eq!((l.stale, l.dropped, l.ignored), (4, 1, 0), "{l:?}");
    assert_eq!((l.successes, l.failures), (3, 2), "{l:?}");
    assert_eq!(
        l.successes + l.failures + l.ignored + l.stale + l.dropped,
        l.admitted
    );
}

/// In a window of 4 buckets of 1 s, a bucket leaves exactly 4 s after it began
/// while the next one stays; after a gap of exactly one window every bucket has
/// left, and a write into the ring slot the old bucket used starts from zero
/// rather than adding to it; so does one after a gap of 20 years.
#[test]
fn gaps_of_exactly_one_bucket_and_one_window_slide_the_window_exactly() {
    let (b, clock) = on_manual_clock(rate_window(4 * SEC, 4, 1.0, 1_000));
    fail(&b); // bucket 0
    clock.advance(SEC);
    ok(&b); // bucket 1
    assert_eq!(b.metrics().window, WindowCounts::new(2, 1, 0));
    clock.advance(3 * SEC); // bucket 4: bucket 0 has left, bucket 1 is still in
    assert_eq!(b.metrics().window, WindowCounts::new(1, 0, 0));
    fail(&b); // bucket 4, in bucket 0's slot
    assert_eq!(b.metrics().window, WindowCounts::new(2, 1, 0));
    clock.advance(4 * SEC); // exactly a window: bucket 8, nothing left
    assert_eq!(b.metrics().window, WindowCounts::default());
    fail(&b); // bucket 8, in the same slot as bucket 4
    assert_eq!(b.metrics().window, WindowCounts::new(1, 1, 0));
    clock.advance(Duration::from_secs(20 * 365 * 86_400));
    assert_eq!(b.metrics().window, WindowCounts::default());
    fail(&b);
    assert_eq!(b.metrics().window, WindowCounts::new(1, 1, 0));
    assert_eq!(b.metrics().lifetime.failures, 4);
}

/// The failure budget with slow-call samples, and rates exactly at their
/// thresholds: random sequences of successes, failures and slow calls (each slow
/// call advances the clock past the threshold, inside one bucket) trip at exactly
/// the first failed or slow sample whose window reaches either rate (`count /
/// calls >= threshold` in f64, with at least `minimum_calls`), or the success
/// after which it does while a check found the window below `minimum_calls` with
/// a rate reached there, never earlier or later, whichever samples the budget lets
/// skip their reads. Every threshold in hundredths, and a third.
#[test]
fn failed_and_slow_samples_trip_exactly_at_either_threshold_whatever_the_budget_skips() {
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let mut thresholds: Vec<f64> = (1..=100).map(|i| f64::from(i) / 100.0).collect();
    thresholds.push(1.0 / 3.0);
    let (mut cases, mut tripped) = (0, 0);
    for &failure_rate in &thresholds {
        for _ in 0..12 {
            let slow_rate = thresholds[rng.below(thresholds.len() as u64) as usize];
            let min = [1, 2, 5, 20, 57][rng.below(5) as usize];
            let (b, clock) = on_manual_clock(
                rate_window(Duration::from_secs(100_000), 1, failure_rate, min)
                    .slow_calls(Duration::from_millis(10), slow_rate),
            );
            // Mostly successes first (grants with room), then a mix.
            let lead = rng.below(150);
            let (mut calls, mut failures, mut slow) = (0u64, 0u64, 0u64);
            let mut check_due = false;
            for step in 0..400u64 {
                let (failed, is_slow) = if step < lead {
                    (rng.below(10) == 0, rng.below(10) == 0)
                } else {
                    (rng.below(3) == 0, rng.below(3) == 0)
                };
                let r = b.call(|| {
                    if is_slow {
                        clock.advance(Duration::from_millis(11));
                    }
                    if failed { Err(()) } else { Ok(()) }
                });
                assert!(
                    r.as_ref().err().is_none_or(|e| !e.is_rejected()),
                    "rejected while Closed"
                );
                calls += 1;
                failures += u64::from(failed);
                slow += u64::from(is_slow);
                let reached_at = |calls: u64, count: u64, rate: f64| {
                    count > 0 && count as f64 / calls as f64 >= rate
                };
                let reached = |calls: u64| {
                    reached_at(calls, failures, failure_rate) || reached_at(calls, slow, slow_rate)
                };
                let minimum = u64::from(min);
                let checks = failed || is_slow || check_due;
                let trips = checks && calls >= minimum && reached(calls);
                if !trips && checks {
                    let at_minimum = calls < minimum && reached(minimum);
                    check_due = at_minimum || (check_due && (failed || is_slow));
                }
                let state = b.state();
                assert_eq!(
                    state == cutout::State::Open,
                    trips,
                    "thresholds {failure_rate} / {slow_rate}, minimum {min}: after {calls} \
                     calls, {failures} failed, {slow} slow: {:?}",
                    b.metrics()
                );
                if trips {
                    tripped += 1;
                    break;
                }
            }
            cases += 1;
        }
    }
    assert!(
        cases > 1_000 && tripped > cases / 2,
        "{tripped} of {cases} tripped"
    );
}
