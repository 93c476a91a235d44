//! The behaviour contract of the design brief (`docs/DESIGN.md`), one test (or a
//! few) per line, all on ManualClock.
//! Lines 7 and 8 (events) are in tests/events.rs; line 15's allocation claim in
//! tests/alloc.rs.

mod common;

use common::{on_manual_clock, rate_window, trips_after};
use cutout::{CircuitBreaker, Error, ManualClock, Outcome, Reason, Rejected, State};
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

const SEC: Duration = Duration::from_secs(1);

fn consecutive(n: u32, probes: u32) -> (CircuitBreaker<ManualClock>, ManualClock) {
    on_manual_clock(
        trips_after(n, SEC)
            .backoff_multiplier(2.0)
            .max_open_duration(Duration::from_secs(60))
            .half_open_probes(probes)
            .half_open_timeout(Duration::from_secs(10)),
    )
}

fn fail<C: cutout::Clock>(b: &CircuitBreaker<C>) {
    let _ = b.call(|| Err::<(), _>("boom"));
}

fn trip<C: cutout::Clock>(b: &CircuitBreaker<C>, n: u32) {
    for _ in 0..n {
        fail(b);
    }
    assert_eq!(b.state(), State::Open);
}

fn rejection<C: cutout::Clock>(b: &CircuitBreaker<C>) -> Rejected {
    match b.try_acquire() {
        Err(r) => r,
        Ok(p) => panic!(
            "expected a rejection, got a permit of generation {}",
            p.generation()
        ),
    }
}

// 1 ------------------------------------------------------------------------------

#[test]
fn c01_a_forgotten_probe_permit_does_not_wedge_half_open() {
    let (b, clock) = consecutive(1, 1);
    trip(&b, 1);
    clock.advance(SEC);
    std::mem::forget(b.try_acquire().unwrap()); // the only probe slot, leaked
    assert_eq!(rejection(&b).state(), State::HalfOpen);

    clock.advance(Duration::from_secs(10)); // the half-open timeout
    let r = rejection(&b);
    assert_eq!(r.state(), State::Open, "the round without a verdict failed");
    assert_eq!(
        r.retry_after(),
        Some(2 * SEC),
        "reopened at the next backoff level"
    );
    assert_eq!(b.metrics().transitions(Reason::HalfOpenTimeout), 1);

    clock.advance(2 * SEC);
    let probe = b.try_acquire().expect("a new round admits a new probe");
    assert!(probe.is_probe());
    probe.success();
    assert_eq!(b.state(), State::Closed);
}

// 2 ------------------------------------------------------------------------------

#[test]
fn c02_a_dropped_probe_gives_its_slot_back() {
    let (b, clock) = consecutive(1, 1);
    trip(&b, 1);
    clock.advance(SEC);
    drop(b.try_acquire().unwrap());
    b.try_acquire().expect("the slot is free again").success();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.metrics().lifetime.dropped, 1);
}

#[test]
fn c02_a_panicking_probe_gives_its_slot_back_and_the_panic_propagates() {
    let (b, clock) = consecutive(1, 1);
    trip(&b, 1);
    clock.advance(SEC);
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = b.call(|| -> Result<(), ()> { panic!("probe blew up") });
    }));
    let payload = panicked.expect_err("the panic propagates");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"probe blew up"));
    assert_eq!(b.state(), State::HalfOpen);
    b.call(|| Ok::<_, ()>(())).expect("the slot came back");
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn c02_an_ignored_probe_gives_its_slot_back_and_a_verdict_follows() {
    let (b, clock) = consecutive(1, 2);
    trip(&b, 1);
    clock.advance(SEC);
    let (p1, p2) = (b.try_acquire().unwrap(), b.try_acquire().unwrap());
    assert_eq!(
        rejection(&b).state(),
        State::HalfOpen,
        "two slots, both taken"
    );
    p1.ignore();
    let p3 = b.try_acquire().expect("the ignored probe's slot");
    p2.success();
    assert_eq!(b.state(), State::HalfOpen, "one success of two");
    p3.success();
    assert_eq!(b.state(), State::Closed);
}

// 3 ------------------------------------------------------------------------------

#[test]
fn c03_half_open_admits_exactly_n_when_many_threads_arrive_at_once() {
    for probes in [1u32, 3] {
        let (b, clock) = consecutive(1, probes);
        trip(&b, 1);
        clock.advance(SEC);
        let threads = 16;
        let barrier = Barrier::new(threads);
        let admitted = Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    barrier.wait();
                    if let Ok(p) = b.try_acquire() {
                        admitted.lock().unwrap().push(p.generation());
                        std::mem::forget(p); // hold the slot for the count
                    }
                });
            }
        });
        let admitted = admitted.into_inner().unwrap();
        assert_eq!(admitted.len(), probes as usize, "{admitted:?}");
        assert_eq!(
            b.metrics().lifetime.rejected as usize,
            threads - probes as usize
        );
    }
}

// 4 ------------------------------------------------------------------------------

#[test]
fn c04_a_late_success_from_closed_does_not_close_a_half_open_breaker() {
    let (b, clock) = consecutive(1, 1);
    let late = b.try_acquire().unwrap();
    trip(&b, 1);
    clock.advance(SEC);
    let probe = b.try_acquire().unwrap();
    late.success();
    assert_eq!(
        b.state(),
        State::HalfOpen,
        "the late success decided nothing"
    );
    assert_eq!(
        rejection(&b).state(),
        State::HalfOpen,
        "and took no slot back or used one"
    );
    assert_eq!(b.metrics().lifetime.stale, 1);
    probe.success();
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn c04_a_late_failure_from_closed_neither_reopens_nor_extends() {
    let (b, clock) = consecutive(1, 1);
    let late = b.try_acquire().unwrap();
    trip(&b, 1);
    clock.advance(SEC);
    let probe = b.try_acquire().unwrap();
    let gen_before = b.metrics().generation;
    late.failure();
    assert_eq!(b.state(), State::HalfOpen);
    assert_eq!(b.metrics().generation, gen_before);
    probe.success();
    assert_eq!(b.state(), State::Closed);
}

// 5 ------------------------------------------------------------------------------

#[test]
fn c05_open_always_carries_its_opened_at_and_a_probe_follows_the_cooldown() {
    let (b, clock) = consecutive(1, 1);
    clock.advance(Duration::from_millis(12_345));
    trip(&b, 1);
    let m = b.metrics();
    assert_eq!(
        (m.state, m.time_in_state, m.retry_after),
        (State::Open, Duration::ZERO, Some(SEC))
    );
    clock.advance(Duration::from_millis(999));
    assert_eq!(rejection(&b).retry_after(), Some(Duration::from_millis(1)));
    clock.advance(Duration::from_millis(1));
    assert!(b.try_acquire().unwrap().is_probe());
}

#[test]
fn c05_threads_racing_the_trip_and_the_cooldown_always_find_a_probe() {
    for _ in 0..50 {
        let (b, clock) = consecutive(4, 1);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| fail(&b));
            }
        });
        assert_eq!(b.state(), State::Open);
        assert_eq!(b.metrics().transitions(Reason::ConsecutiveFailures), 1);
        clock.advance(SEC);
        let admitted = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    if let Ok(p) = b.try_acquire() {
                        admitted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        std::mem::forget(p);
                    }
                });
            }
        });
        assert_eq!(admitted.into_inner(), 1);
    }
}

// 6 ------------------------------------------------------------------------------

#[test]
fn c06_failures_while_open_neither_restart_nor_extend_the_cooldown() {
    let (b, clock) = consecutive(2, 1);
    let in_flight: Vec<_> = (0..5).map(|_| b.try_acquire().unwrap()).collect();
    trip(&b, 2);
    clock.advance(Duration::from_millis(400));
    for p in in_flight {
        p.failure();
    }
    fail(&b); // rejected, never ran
    assert_eq!(
        rejection(&b).retry_after(),
        Some(Duration::from_millis(600))
    );
    assert_eq!(b.metrics().lifetime.stale, 5);
    clock.advance(Duration::from_millis(600));
    assert!(b.try_acquire().is_ok());
}

// 9 ------------------------------------------------------------------------------

#[test]
fn c09_reset_while_open_then_a_new_trip_waits_the_full_base_duration() {
    let (b, clock) = consecutive(1, 1);
    trip(&b, 1);
    for _ in 0..3 {
        // Three failed rounds: level 3, an 8 s cooldown.
        clock.advance(Duration::from_secs(8));
        b.try_acquire().unwrap().failure();
    }
    assert_eq!(rejection(&b).retry_after(), Some(8 * SEC));
    clock.advance(Duration::from_millis(300));
    b.reset();
    assert_eq!(b.state(), State::Closed);
    fail(&b);
    assert_eq!(
        rejection(&b).retry_after(),
        Some(SEC),
        "level 0 again, a full cooldown"
    );
}

// 10 -----------------------------------------------------------------------------

/// A clock frozen at one reading: if the breaker consulted any other time source
/// (the wall clock), the cooldown would end.
struct Frozen(u64);
impl cutout::Clock for Frozen {
    fn now(&self) -> u64 {
        self.0
    }
}

#[test]
fn c10_time_comes_only_from_the_injected_clock() {
    let b = trips_after(1, Duration::from_millis(1))
        .clock(Frozen(123_456_789))
        .build()
        .unwrap();
    trip(&b, 1);
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_millis(20) {
        // Real time passes well beyond the 1 ms cooldown; the breaker does not see it.
        assert_eq!(rejection(&b).retry_after(), Some(Duration::from_millis(1)));
    }
}

#[test]
fn c10_the_manual_clock_is_monotonic_and_shared() {
    let (b, clock) = on_manual_clock(CircuitBreaker::builder().consecutive_failures(1));
    trip(&b, 1);
    clock.advance(Duration::from_millis(500));
    assert_eq!(b.metrics().time_in_state, Duration::from_millis(500));
}

// 11 -----------------------------------------------------------------------------

fn windowed(
    length: Duration,
    buckets: u32,
    min: u32,
) -> (CircuitBreaker<ManualClock>, ManualClock) {
    on_manual_clock(rate_window(length, buckets, 0.5, min))
}

#[test]
fn c11_after_an_idle_gap_one_failure_counts_as_one_call() {
    let (b, clock) = windowed(Duration::from_secs(10), 10, 2);
    for _ in 0..100 {
        b.call(|| Ok::<_, ()>(())).unwrap();
    }
    clock.advance(Duration::from_secs(11));
    fail(&b);
    let w = b.metrics().window;
    assert_eq!((w.calls, w.failures), (1, 1));
    assert_eq!(b.state(), State::Closed, "one call is below minimum_calls");
    fail(&b);
    assert_eq!(b.state(), State::Open, "2 of 2 failed");
}

#[test]
fn c11_one_and_two_bucket_windows_are_exact_at_their_edges() {
    for buckets in [1u32, 2] {
        let (b, clock) = windowed(Duration::from_millis(200), buckets, 100);
        let bucket = Duration::from_millis(200 / u64::from(buckets));
        fail(&b);
        clock.advance(bucket - Duration::from_nanos(1));
        b.call(|| Ok::<_, ()>(())).unwrap();
        assert_eq!(
            b.metrics().window.calls,
            2,
            "{buckets} buckets, same window"
        );
        clock.advance(Duration::from_nanos(1)); // the first bucket's end
        let expect = if buckets == 1 { 0 } else { 2 };
        assert_eq!(
            b.metrics().window.calls,
            expect,
            "{buckets} buckets at the first edge"
        );
        clock.advance(bucket);
        assert_eq!(
            b.metrics().window.calls,
            0,
            "{buckets} buckets, all expired"
        );
    }
}

// 12 -----------------------------------------------------------------------------

#[test]
fn c12_the_half_open_verdict_does_not_wait_for_minimum_calls() {
    let (b, clock) = on_manual_clock(
        CircuitBreaker::builder()
            .consecutive_failures(1)
            .minimum_calls(1000)
            .half_open_probes(3),
    );
    trip(&b, 1);
    clock.advance(SEC);
    for _ in 0..3 {
        b.call(|| Ok::<_, ()>(())).unwrap();
    }
    assert_eq!(b.state(), State::Closed);
}

// 13 -----------------------------------------------------------------------------

#[test]
fn c13_ignored_outcomes_count_as_neither_and_keep_the_streak() {
    let (b, _) = consecutive(3, 1);
    fail(&b);
    fail(&b);
    for _ in 0..10 {
        let _ = b.call_with(|_| Outcome::Ignored, || Err::<(), _>("cancelled"));
    }
    let m = b.metrics();
    assert_eq!(
        (
            m.consecutive_failures,
            m.lifetime.ignored,
            m.lifetime.failures
        ),
        (2, 10, 2)
    );
    fail(&b);
    assert_eq!(
        b.state(),
        State::Open,
        "the streak was neither reset nor extended"
    );
}

#[test]
fn c13_ignored_outcomes_stay_out_of_the_window() {
    let (b, _) = windowed(Duration::from_secs(10), 10, 2);
    for _ in 0..5 {
        let _ = b.call_with(|_| Outcome::Ignored, || Err::<(), _>("404"));
    }
    assert_eq!(b.metrics().window.calls, 0);
}

// 14 -----------------------------------------------------------------------------

#[test]
fn c14_reading_the_state_a_million_times_uses_no_probe() {
    let (b, clock) = consecutive(1, 1);
    trip(&b, 1);
    clock.advance(Duration::from_secs(5)); // well past the cooldown
    let before = b.metrics();
    for _ in 0..1_000_000 {
        assert_eq!(b.state(), State::Open);
    }
    let after = b.metrics();
    assert_eq!(
        (before.generation, before.lifetime),
        (after.generation, after.lifetime)
    );
    assert!(
        b.try_acquire().unwrap().is_probe(),
        "the one probe is still there"
    );
}

// 15 -----------------------------------------------------------------------------

/// A thread's first call allocates its stripe, once; if it started on a shared
/// stripe (other tests' threads held every owned slot), it may later move to an
/// owned one that a finished thread freed, once. So however many calls it makes, a
/// breaker used by one thread holds at most two stripes.
#[test]
fn c15_memory_does_not_grow_with_the_request_rate() {
    let (b, clock) = windowed(Duration::from_secs(10), 10, 1_000_000);
    let empty = b.heap_bytes();
    let _ = b.call(|| Ok::<_, ()>(()));
    let stripe = b.heap_bytes() - empty;
    assert!(stripe > 0, "the first call allocated the thread's stripe");
    for round in 0..2 {
        for i in 0..200_000u32 {
            if i % 1000 == 0 {
                clock.advance(Duration::from_millis(7));
            }
            let _ = b.call(|| if i % 3 == 0 { Err(()) } else { Ok(()) });
        }
        assert!(
            b.heap_bytes() <= empty + 2 * stripe,
            "round {round}: {} bytes, a stripe is {stripe}",
            b.heap_bytes()
        );
    }
}

#[test]
fn c15_counts_are_exact_when_no_call_races_a_rotation() {
    let (b, _) = windowed(Duration::from_secs(10), 10, 1_000_000);
    let b = Arc::new(b);
    std::thread::scope(|s| {
        for t in 0..6u32 {
            let b = &b;
            s.spawn(move || {
                for i in 0..10_000u32 {
                    let _ = b.call(|| if (i + t) % 5 == 0 { Err(()) } else { Ok(()) });
                }
            });
        }
    });
    let m = b.metrics();
    assert_eq!((m.window.calls, m.window.failures), (60_000, 12_000));
    assert_eq!(
        (
            m.lifetime.admitted,
            m.lifetime.successes,
            m.lifetime.failures
        ),
        (60_000, 48_000, 12_000)
    );
}

// 16 -----------------------------------------------------------------------------

#[test]
fn c16_bad_configuration_is_an_error_naming_the_field() {
    let cases: Vec<(&str, Result<CircuitBreaker, cutout::ConfigError>)> = vec![
        ("window", CircuitBreaker::builder().window(SEC, 0).build()),
        (
            "failure_rate",
            CircuitBreaker::builder().failure_rate(1.01, 5).build(),
        ),
        (
            "failure_rate",
            CircuitBreaker::builder().failure_rate(f64::NAN, 5).build(),
        ),
        (
            "slow_calls",
            CircuitBreaker::builder().slow_calls(SEC, -0.5).build(),
        ),
        (
            "half_open_probes",
            CircuitBreaker::builder().half_open_probes(0).build(),
        ),
        (
            "max_open_duration",
            CircuitBreaker::builder()
                .open_duration(2 * SEC)
                .max_open_duration(SEC)
                .build(),
        ),
        (
            "consecutive_failures",
            CircuitBreaker::builder().consecutive_failures(0).build(),
        ),
        (
            "minimum_calls",
            CircuitBreaker::builder().minimum_calls(0).build(),
        ),
        (
            "backoff_multiplier",
            CircuitBreaker::builder().backoff_multiplier(0.9).build(),
        ),
        ("jitter", CircuitBreaker::builder().jitter(2.0).build()),
        (
            "half_open_timeout",
            CircuitBreaker::builder()
                .half_open_timeout(Duration::MAX)
                .build(),
        ),
    ];
    for (field, result) in cases {
        let err = result.expect_err(field);
        assert_eq!(err.field(), field, "{err}");
        assert!(err.to_string().contains(field));
    }
}

/// Issue 15 item 4 (contract line 20): a window the breaker could not allocate
/// (687 GB of buckets) aborted the process; it is a `ConfigError` naming `window`.
#[test]
fn c20_a_window_too_large_to_allocate_is_an_error_not_an_abort() {
    let err = CircuitBreaker::builder()
        .window(Duration::from_secs(50 * 86_400), u32::MAX)
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "window", "{err}");
    // The largest window the docs promise builds, and counts.
    let (b, _) = on_manual_clock(rate_window(Duration::from_secs(4096), 4096, 1.0, 1));
    fail(&b);
    assert_eq!(b.state(), State::Open);
    assert_eq!(
        CircuitBreaker::builder()
            .window(Duration::from_secs(4097), 4097)
            .build()
            .unwrap_err()
            .field(),
        "window"
    );
}

/// Issue 15 item 5, first reproduction: `slow_calls(1 s, 0.0)` tripped on one fast
/// failure among 10 calls, as `SlowCallRate` with no slow call.
#[test]
fn c16_a_zero_slow_call_rate_is_refused_and_no_fast_failure_trips_as_slow() {
    let err = CircuitBreaker::builder()
        .failure_rate(0.5, 10)
        .slow_calls(SEC, 0.0)
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "slow_calls", "{err}");
    // The smallest rate that is allowed trips only on a slow call.
    let (b, clock) = on_manual_clock(
        CircuitBreaker::builder()
            .failure_rate(0.5, 10)
            .slow_calls(SEC, f64::MIN_POSITIVE),
    );
    for _ in 0..9 {
        assert!(b.call(|| Ok::<_, ()>(())).is_ok());
    }
    fail(&b);
    assert_eq!(b.state(), State::Closed, "one fast failure in 10 calls");
    let _ = b.call(|| {
        clock.advance(2 * SEC);
        Err::<(), _>("slow and failed")
    });
    assert_eq!(b.state(), State::Open);
    let m = b.metrics();
    assert_eq!(m.transitions(Reason::SlowCallRate), 1);
    assert_eq!(m.transitions(Reason::FailureRate), 0);
}

/// Issue 15 item 5, second reproduction: `failure_rate(0.0, 1)` tripped on a slow
/// success, as `FailureRate` with no failure.
#[test]
fn c16_a_zero_failure_rate_is_refused_and_no_success_trips_as_a_failure_rate() {
    let err = CircuitBreaker::builder()
        .failure_rate(0.0, 1)
        .slow_calls(SEC, 0.5)
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "failure_rate", "{err}");
    let (b, clock) = on_manual_clock(
        CircuitBreaker::builder()
            .failure_rate(f64::MIN_POSITIVE, 1)
            .slow_calls(SEC, 1.0),
    );
    assert!(b.call(|| Ok::<_, ()>(())).is_ok());
    let _ = b.call(|| {
        clock.advance(2 * SEC);
        Ok::<_, ()>(())
    });
    assert_eq!(b.state(), State::Closed, "one slow success in 2 calls");
    let m = b.metrics();
    assert_eq!(m.transitions(Reason::FailureRate), 0);
    assert_eq!(m.transitions(Reason::SlowCallRate), 0);
    fail(&b);
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.metrics().transitions(Reason::FailureRate), 1);
}

#[test]
fn rejected_calls_never_run() {
    let (b, _) = consecutive(1, 1);
    trip(&b, 1);
    let ran = std::cell::Cell::new(false);
    let r = b.call(|| {
        ran.set(true);
        Ok::<_, ()>(())
    });
    assert!(matches!(r, Err(Error::Rejected(_))));
    assert!(!ran.get());
}
