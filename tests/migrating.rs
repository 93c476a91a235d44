//! Where cutout differs from Resilience4j, gobreaker, failsafe-rs, recloser and
//! Polly: one test per difference that docs/MIGRATING.md lists, named for it, on
//! `ManualClock`. The page names each test; a test renamed here is renamed there.

mod common;

use common::on_manual_clock;
use cutout::{
    CircuitBreaker, Dropped, Error, ManualClock, Reason, SavedState, State, WindowCounts,
};
use std::time::{Duration, UNIX_EPOCH};

const SEC: Duration = Duration::from_secs(1);
const MS: Duration = Duration::from_millis(1);

fn ok<C: cutout::Clock>(b: &CircuitBreaker<C>) -> bool {
    b.call(|| Ok::<_, ()>(())).is_ok()
}

fn fail<C: cutout::Clock>(b: &CircuitBreaker<C>) {
    let _ = b.call(|| Err::<(), _>(()));
}

/// A call that succeeds after `took` on `clock`.
fn ok_after(b: &CircuitBreaker<ManualClock>, clock: &ManualClock, took: Duration) {
    b.call(|| {
        clock.advance(took);
        Ok::<_, ()>(())
    })
    .unwrap();
}

/// Trips `b` (consecutive failures or a rate at 1 call) and moves `clock` past
/// its cooldown of `open`.
fn trip_and_wait(b: &CircuitBreaker<ManualClock>, clock: &ManualClock, open: Duration) {
    fail(b);
    assert_eq!(b.state(), State::Open);
    clock.advance(open);
}

#[test]
fn success_bringing_the_window_to_minimum_calls_trips() {
    // Failure, failure, failure, success, success at 50% over at least 5 calls:
    // the second success makes 5 calls at 60%, and trips, as Resilience4j and
    // recloser do.
    let (b, _) = on_manual_clock(CircuitBreaker::builder().failure_rate(0.5, 5));
    for _ in 0..3 {
        fail(&b);
    }
    assert!(ok(&b));
    assert_eq!(b.state(), State::Closed, "4 calls: below minimum_calls");
    assert!(ok(&b));
    assert_eq!(b.state(), State::Open, "5 calls at 60%");
    assert!(!ok(&b), "the next call is rejected");
    let m = b.metrics();
    assert_eq!(m.transitions(Reason::FailureRate), 1);
    assert_eq!(m.tripped_by, Some(WindowCounts::new(5, 3, 0)));
}

#[test]
fn success_bringing_the_window_to_minimum_calls_trips_on_the_slow_rate() {
    let (b, clock) = on_manual_clock(
        CircuitBreaker::builder()
            .slow_calls(Duration::from_millis(100), 0.5)
            .minimum_calls(4),
    );
    ok_after(&b, &clock, 200 * MS);
    ok_after(&b, &clock, 200 * MS);
    ok_after(&b, &clock, MS);
    assert_eq!(b.state(), State::Closed, "3 calls: below minimum_calls");
    ok_after(&b, &clock, MS);
    assert_eq!(b.state(), State::Open, "4 calls, 2 slow: 50%");
    assert_eq!(b.metrics().transitions(Reason::SlowCallRate), 1);
}

#[test]
fn success_below_the_rate_at_minimum_calls_does_not_trip() {
    // 2 failures of 5 calls is 40%: the success that brings the window to 5 calls
    // checks, and the breaker stays Closed; so do the successes after it.
    let (b, _) = on_manual_clock(CircuitBreaker::builder().failure_rate(0.5, 5));
    fail(&b);
    fail(&b);
    for _ in 0..10 {
        assert!(ok(&b));
    }
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.metrics().window, WindowCounts::new(12, 2, 0));
}

#[test]
fn slow_success_raises_the_slow_rate_and_trips() {
    // With the window past minimum_calls, a slow success can raise the slow rate
    // to its threshold: it trips on that success.
    let (b, clock) = on_manual_clock(
        CircuitBreaker::builder()
            .slow_calls(Duration::from_millis(100), 0.5)
            .minimum_calls(4),
    );
    for _ in 0..4 {
        ok_after(&b, &clock, MS);
    }
    for _ in 0..3 {
        ok_after(&b, &clock, 200 * MS);
    }
    assert_eq!(b.state(), State::Closed, "3 slow of 7");
    ok_after(&b, &clock, 200 * MS);
    assert_eq!(b.state(), State::Open, "4 slow of 8");
    assert_eq!(b.metrics().tripped_by, Some(WindowCounts::new(8, 0, 4)));
}

#[test]
fn half_open_verdict_is_all_probes_succeed() {
    // Resilience4j judges 10 probes at 50% and closes with 4 failed; cutout
    // reopens on the first failed probe, as gobreaker does.
    let (b, clock) = on_manual_clock(
        CircuitBreaker::builder()
            .consecutive_failures(1)
            .half_open_probes(10)
            .open_duration(SEC),
    );
    trip_and_wait(&b, &clock, SEC);
    let probes: Vec<_> = (0..10).map(|_| b.try_acquire().unwrap()).collect();
    assert!(probes.iter().all(|p| p.is_probe()));
    let mut probes = probes.into_iter();
    for p in probes.by_ref().take(5) {
        p.success();
    }
    assert_eq!(b.state(), State::HalfOpen);
    probes.next().unwrap().failure();
    assert_eq!(b.state(), State::Open, "1 failed probe of 6 reopens");
    let m = b.metrics();
    assert_eq!(m.transitions(Reason::ProbeFailed), 1);
    assert_eq!(m.level, 1, "at the next backoff level");
    // The other four are stale: they decide nothing.
    probes.for_each(|p| p.success());
    assert_eq!(b.state(), State::Open);
}

#[test]
fn half_open_admits_only_its_probes() {
    // failsafe-rs and recloser admit every call while half-open; cutout admits
    // `half_open_probes` calls and rejects the rest until the round ends.
    let (b, clock) = on_manual_clock(
        CircuitBreaker::builder()
            .consecutive_failures(1)
            .half_open_probes(2)
            .open_duration(SEC),
    );
    trip_and_wait(&b, &clock, SEC);
    let first = b.try_acquire().unwrap();
    let second = b.try_acquire().unwrap();
    let rejected = b.try_acquire().unwrap_err();
    assert_eq!(rejected.state(), State::HalfOpen);
    first.success();
    assert!(b.try_acquire().is_err(), "a finished probe frees no slot");
    second.success();
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn outcome_counts_in_bucket_of_record_time() {
    // A call admitted in one bucket and recorded 10.5 s later, past the 10 s
    // window's end for its admission: gobreaker would discard it (it straddles an
    // interval); cutout counts it where it is recorded.
    let (b, clock) = on_manual_clock(
        CircuitBreaker::builder()
            .window(10 * SEC, 10)
            .failure_rate(0.5, 100),
    );
    let permit = b.try_acquire().unwrap();
    clock.advance(10 * SEC + 500 * MS);
    permit.failure();
    assert_eq!(b.metrics().window, WindowCounts::new(1, 1, 0));
    clock.advance(9 * SEC);
    assert_eq!(b.metrics().window, WindowCounts::new(1, 1, 0), "still in");
    clock.advance(SEC);
    assert_eq!(b.metrics().window, WindowCounts::default(), "aged out");
}

#[test]
fn window_reads_zero_after_a_trip_and_tripped_by_keeps_the_figures() {
    // Resilience4j and gobreaker dashboards show the tripping figures while Open;
    // cutout's window starts again at each phase, and `tripped_by` keeps them.
    let (b, clock) = on_manual_clock(
        CircuitBreaker::builder()
            .slow_calls(Duration::from_millis(100), 0.6)
            .minimum_calls(5),
    );
    ok_after(&b, &clock, MS);
    ok_after(&b, &clock, MS);
    for _ in 0..3 {
        ok_after(&b, &clock, 200 * MS);
    }
    let m = b.metrics();
    assert_eq!(m.state, State::Open);
    assert_eq!(m.window, WindowCounts::default(), "the window reads zero");
    let tripped = m.tripped_by.expect("the figures that tripped it");
    assert_eq!(tripped, WindowCounts::new(5, 0, 3));
    assert_eq!(tripped.slow_call_rate(), 0.6);
}

#[test]
fn state_is_a_pure_read() {
    // gobreaker's state getter moves an Open breaker whose cooldown is over to
    // HalfOpen; cutout's `state()` reads, and the next call moves it.
    let (b, clock) = on_manual_clock(
        CircuitBreaker::builder()
            .consecutive_failures(1)
            .open_duration(SEC),
    );
    trip_and_wait(&b, &clock, 2 * SEC);
    for _ in 0..3 {
        assert_eq!(b.state(), State::Open);
    }
    assert_eq!(b.metrics().state, State::Open, "metrics read too");
    let probe = b.try_acquire().unwrap();
    assert!(probe.is_probe());
    assert_eq!(b.state(), State::HalfOpen);
    probe.success();
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn probe_admitted_at_exactly_the_cooldown() {
    // gobreaker, failsafe-rs and recloser admit a probe strictly after the
    // cooldown's end; cutout admits one at exactly its end.
    let (b, clock) = on_manual_clock(
        CircuitBreaker::builder()
            .consecutive_failures(1)
            .open_duration(SEC),
    );
    fail(&b);
    clock.advance(SEC - MS);
    let rejected = b.try_acquire().unwrap_err();
    assert_eq!(rejected.retry_after(), Some(MS));
    clock.advance(MS);
    assert!(b.try_acquire().unwrap().is_probe(), "at exactly 1 s");
}

#[test]
fn panic_counts_as_ignored_by_default() {
    // gobreaker counts a panic as a failure; cutout counts the dropped permit as
    // ignored unless `on_drop` says otherwise.
    let panicking = |b: &CircuitBreaker<ManualClock>| {
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            b.call(|| -> Result<(), ()> { panic!("the call panicked") })
        }));
        assert!(caught.is_err());
    };
    let (b, _) = on_manual_clock(CircuitBreaker::builder().consecutive_failures(1));
    panicking(&b);
    let m = b.metrics();
    assert_eq!(m.state, State::Closed);
    assert_eq!((m.lifetime.dropped, m.lifetime.failures), (1, 0));
    assert_eq!(m.consecutive_failures, 0);

    let (b, _) = on_manual_clock(
        CircuitBreaker::builder()
            .consecutive_failures(1)
            .on_drop(Dropped::Failure),
    );
    panicking(&b);
    assert_eq!(b.state(), State::Open, "on_drop(Dropped::Failure)");
}

#[test]
fn window_is_time_based_not_count_based() {
    // A count-based window (Resilience4j's COUNT_BASED, recloser's ring) keeps
    // the last N outcomes however old; cutout's window keeps the last `length`
    // of time, so old failures age out with no call at all.
    let (b, clock) = on_manual_clock(
        CircuitBreaker::builder()
            .window(10 * SEC, 10)
            .failure_rate(0.5, 4),
    );
    fail(&b);
    fail(&b);
    ok(&b);
    clock.advance(10 * SEC);
    assert_eq!(b.metrics().window, WindowCounts::default());
    fail(&b);
    assert_eq!(b.state(), State::Closed, "1 call in the window, not 4");
}

#[test]
fn restore_sets_the_initial_state() {
    // In place of Resilience4j's `initialState`: a saved state, built in place.
    let t0 = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let mut saved = SavedState::new("payments", State::Open, t0);
    saved.open_until = Some(t0 + 5 * SEC);
    let clock = ManualClock::new();
    let b = CircuitBreaker::builder()
        .clock(clock.clone())
        .restore_at(saved, t0)
        .build()
        .unwrap();
    assert_eq!(b.state(), State::Open);
    match b.call(|| Ok::<_, ()>(())) {
        Err(Error::Rejected(r)) => assert_eq!(r.retry_after(), Some(5 * SEC)),
        other => panic!("expected a rejection, got {other:?}"),
    }
    clock.advance(5 * SEC);
    assert!(ok(&b));
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn tripped_by_lasts_as_long_as_the_open_phase_of_the_trip() {
    let (b, clock) = on_manual_clock(
        CircuitBreaker::builder()
            .window(10 * SEC, 10)
            .failure_rate(0.5, 2)
            .open_duration(SEC),
    );
    assert!(ok(&b));
    fail(&b);
    assert_eq!(b.metrics().tripped_by, Some(WindowCounts::new(2, 1, 0)));
    clock.advance(SEC);
    let probe = b.try_acquire().unwrap();
    assert_eq!(b.metrics().tripped_by, None, "HalfOpen");
    probe.failure();
    let m = b.metrics();
    assert_eq!((m.state, m.tripped_by), (State::Open, None), "reopened");
    clock.advance(2 * SEC);
    b.try_acquire().unwrap().success();
    assert_eq!(b.metrics().tripped_by, None, "Closed");
    assert!(b.open_for(SEC));
    let m = b.metrics();
    assert_eq!(
        (m.state, m.tripped_by),
        (State::Open, None),
        "opened by hand"
    );
}
