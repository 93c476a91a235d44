//! A timeout in any layer order protects (DESIGN.md contract line 21), with tower's
//! own `TimeoutLayer` on tokio's paused clock, which the breaker reads too: no real
//! waiting. Timeout outside (timeout -> breaker -> backend): the timeout drops the
//! breaker's response future, so the call counts as `on_drop` and the slow-call
//! policy say, and with neither it counts for nothing. Timeout inside (breaker ->
//! timeout -> backend): the breaker sees the timeout's error, a failure.

use cutout::{Builder, CircuitBreaker, CircuitBreakerLayer, Clock, Dropped, Reason, State};
use std::future::pending;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tower::{BoxError, Service, ServiceBuilder, ServiceExt, service_fn};

const TIMEOUT: Duration = Duration::from_secs(1);
const CALLS: u32 = 5;

/// tokio's clock, paused in these tests: it moves only when every task waits on a
/// timer, straight to the next one.
#[derive(Clone, Copy, Debug)]
struct TokioClock(tokio::time::Instant);

impl Clock for TokioClock {
    fn now(&self) -> u64 {
        u64::try_from(self.0.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Order {
    /// timeout -> breaker -> backend
    TimeoutOutside,
    /// breaker -> timeout -> backend
    TimeoutInside,
}

/// What the breaker made of `CALLS` requests to a backend that never answers, each
/// given up by the timeout; then whether the next request reached the backend.
#[derive(Debug)]
struct Verdict {
    state: State,
    backend_calls: u32,
    dropped: u64,
    failures: u64,
    slow: u64,
    tripped_by: Option<Reason>,
}

async fn hung_backend(
    order: Order,
    settings: fn(Builder<TokioClock>) -> Builder<TokioClock>,
) -> Verdict {
    let clock = TokioClock(tokio::time::Instant::now());
    let breaker = Arc::new(
        settings(CircuitBreaker::builder().clock(clock))
            .build()
            .unwrap(),
    );
    let calls = Arc::new(AtomicU32::new(0));
    let counted = calls.clone();
    let backend = service_fn(move |_: ()| {
        counted.fetch_add(1, Ordering::Relaxed);
        async {
            pending::<()>().await; // hangs
            Ok::<_, std::io::Error>("never")
        }
    });
    let layer = CircuitBreakerLayer::new(breaker.clone());
    // Both stacks as one type: only the count of backend calls matters here.
    let mut service = match order {
        Order::TimeoutOutside => ServiceBuilder::new()
            .timeout(TIMEOUT)
            .layer(layer)
            .service(backend)
            .map_err(|e: BoxError| e.to_string())
            .boxed(),
        Order::TimeoutInside => ServiceBuilder::new()
            .layer(layer)
            .timeout(TIMEOUT)
            .service(backend)
            .map_err(|e| e.to_string())
            .boxed(),
    };
    for _ in 0..=CALLS {
        let started = tokio::time::Instant::now();
        let result = service.ready().await.unwrap().call(()).await;
        assert!(
            result.is_err(),
            "a hung call can only time out or be rejected"
        );
        assert!(
            started.elapsed() <= TIMEOUT,
            "no call waited beyond the timeout"
        );
    }
    let m = breaker.metrics();
    Verdict {
        state: breaker.state(),
        backend_calls: calls.load(Ordering::Relaxed),
        dropped: m.lifetime.dropped,
        failures: m.lifetime.failures,
        slow: m.lifetime.slow,
        tripped_by: [
            Reason::ConsecutiveFailures,
            Reason::FailureRate,
            Reason::SlowCallRate,
        ]
        .into_iter()
        .find(|&r| m.transitions(r) > 0),
    }
}

fn slow_calls(b: Builder<TokioClock>) -> Builder<TokioClock> {
    b.slow_calls(Duration::from_millis(200), 0.5)
        .minimum_calls(CALLS)
}

fn on_drop_failure(b: Builder<TokioClock>) -> Builder<TokioClock> {
    b.consecutive_failures(CALLS).on_drop(Dropped::Failure)
}

fn on_drop_failure_after(b: Builder<TokioClock>) -> Builder<TokioClock> {
    b.consecutive_failures(CALLS)
        .on_drop(Dropped::FailureAfter(Duration::from_millis(500)))
}

fn neither(b: Builder<TokioClock>) -> Builder<TokioClock> {
    b.consecutive_failures(CALLS)
}

/// The breaker tripped on the `CALLS` hung calls, and the next request never
/// reached the backend.
fn assert_tripped(v: &Verdict) {
    assert_eq!(v.state, State::Open, "{v:?}");
    assert_eq!(v.backend_calls, CALLS, "rejected while open: {v:?}");
}

#[tokio::test(start_paused = true)]
async fn a_timeout_outside_trips_with_the_slow_call_policy() {
    let v = hung_backend(Order::TimeoutOutside, slow_calls).await;
    assert_tripped(&v);
    assert_eq!(
        (v.dropped, v.slow, v.failures),
        (5, 5, 0),
        "slow, not failed"
    );
    assert_eq!(v.tripped_by, Some(Reason::SlowCallRate));
}

#[tokio::test(start_paused = true)]
async fn a_timeout_outside_trips_when_dropped_calls_are_failures() {
    for settings in [on_drop_failure, on_drop_failure_after] {
        let v = hung_backend(Order::TimeoutOutside, settings).await;
        assert_tripped(&v);
        assert_eq!(
            (v.dropped, v.failures),
            (5, 5),
            "in failures, what they counted as, and in dropped"
        );
        assert_eq!(v.tripped_by, Some(Reason::ConsecutiveFailures));
    }
}

#[tokio::test(start_paused = true)]
async fn a_timeout_outside_counts_for_nothing_without_either_setting() {
    let v = hung_backend(Order::TimeoutOutside, neither).await;
    assert_eq!(v.state, State::Closed, "{v:?}");
    assert_eq!(v.backend_calls, CALLS + 1, "every call reached the backend");
    assert_eq!((v.dropped, v.failures), (6, 0));
}

#[tokio::test(start_paused = true)]
async fn a_timeout_inside_trips_whatever_the_settings() {
    for settings in [slow_calls, on_drop_failure, on_drop_failure_after, neither] {
        let v = hung_backend(Order::TimeoutInside, settings).await;
        assert_tripped(&v);
        assert_eq!((v.dropped, v.failures), (0, 5), "the timeout's error");
    }
}
