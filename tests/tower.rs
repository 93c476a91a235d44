//! The tower layer: readiness takes no probe, rejections carry `retry_after`, the
//! classifier decides (a 503 fails, a 404 succeeds), a dropped, panicking or
//! ignored response future gives its half-open slot back, as does a panic in the
//! inner service's `call` or in the classifier (DESIGN.md contract lines 2 and 13
//! through tower), the `Dropped` policy and slow calls apply to dropped response
//! futures, each outcome lands on its own breaker whichever thread ends it, a
//! breaker goes when its last layer, service and future do (and a thread's spares
//! when it exits, even one kept while its thread-locals are torn down), and the hyper example
//! answers 503 + Retry-After over loopback.

#[allow(dead_code)]
#[path = "../examples/tower_http.rs"]
mod tower_http;

mod common;

use common::{block_on, poll_once, trips_after, trips_on};
use cutout::{
    CircuitBreaker, CircuitBreakerLayer, CircuitBreakerService, Dropped, Error, ManualClock,
    Outcome, Permit, State,
};
use std::cell::Cell;
use std::future::{Future, pending};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;
use tower::{Layer, Service, ServiceBuilder, ServiceExt, service_fn};

const COOLDOWN: Duration = Duration::from_secs(30);

fn breaker(clock: &ManualClock, failures: u32) -> Arc<CircuitBreaker<ManualClock>> {
    Arc::new(
        trips_after(failures, COOLDOWN)
            .clock(clock.clone())
            .build()
            .unwrap(),
    )
}

/// Trips `b` (a breaker that trips on one failure) and waits out its cooldown:
/// the next call is its one probe.
fn to_probing(b: &CircuitBreaker<ManualClock>, clock: &ManualClock) {
    let _ = b.call(|| Err::<(), _>("trip"));
    assert_eq!(b.state(), State::Open);
    clock.advance(COOLDOWN);
}

/// A breaker that trips on one failure, tripped and its cooldown waited out: the
/// next call is its one probe.
fn probing() -> Arc<CircuitBreaker<ManualClock>> {
    let clock = ManualClock::new();
    let b = breaker(&clock, 1);
    to_probing(&b, &clock);
    b
}

/// After `what`, a probe that ended as a dropped call: `b` is still half-open,
/// the call counted as dropped, and its probe slot free again for the permit
/// returned.
fn dropped_probe_came_back<'b>(
    b: &'b CircuitBreaker<ManualClock>,
    what: &str,
) -> Permit<'b, ManualClock> {
    assert_eq!(b.state(), State::HalfOpen);
    let m = b.metrics();
    assert_eq!(
        (m.lifetime.admitted, m.lifetime.dropped),
        (2, 1),
        "{what} is counted as dropped"
    );
    b.try_acquire()
        .unwrap_or_else(|_| panic!("the probe slot of {what} came back"))
}

/// An HTTP-ish classifier on status codes: 5xx fails, anything else succeeds.
fn by_status(r: &Result<u16, std::io::Error>) -> Outcome {
    match r {
        Ok(status) if *status >= 500 => Outcome::Failure,
        Ok(_) => Outcome::Success,
        Err(_) => Outcome::Failure,
    }
}

/// A backend that answers the status it is asked for and counts its calls.
fn backend(
    calls: &Arc<AtomicU32>,
) -> impl Service<u16, Response = u16, Error = std::io::Error, Future: Send> + Clone {
    let calls = calls.clone();
    service_fn(move |status: u16| {
        calls.fetch_add(1, Ordering::Relaxed);
        async move { Ok(status) }
    })
}

#[test]
fn a_503_fails_a_404_succeeds_and_a_rejection_carries_retry_after() {
    let clock = ManualClock::new();
    let b = breaker(&clock, 2);
    let calls = Arc::new(AtomicU32::new(0));
    let svc = CircuitBreakerLayer::new(b.clone())
        .classify(by_status)
        .layer(backend(&calls));
    for status in [404, 404, 503, 404, 503] {
        assert_eq!(block_on(svc.clone().oneshot(status)).unwrap(), status);
    }
    assert_eq!(
        b.state(),
        State::Closed,
        "a 404 in between ended the streak"
    );
    assert_eq!(block_on(svc.clone().oneshot(503)).unwrap(), 503);
    assert_eq!(b.state(), State::Open);
    clock.advance(Duration::from_secs(10));
    match block_on(svc.oneshot(200)) {
        Err(Error::Rejected(r)) => {
            assert_eq!(r.state(), State::Open);
            assert_eq!(r.retry_after(), Some(COOLDOWN - Duration::from_secs(10)));
        }
        other => panic!("expected a rejection, got {other:?}"),
    }
    assert_eq!(
        calls.load(Ordering::Relaxed),
        6,
        "the rejected request never reached it"
    );
}

#[test]
fn inner_errors_are_failures_by_default_and_returned_as_inner() {
    let clock = ManualClock::new();
    let b = breaker(&clock, 1);
    let failing = service_fn(|_: ()| async { Err::<(), _>("connection reset") });
    let svc = CircuitBreakerService::new(failing, b.clone());
    assert_eq!(
        block_on(svc.oneshot(())),
        Err(Error::Inner("connection reset"))
    );
    assert_eq!(b.state(), State::Open);
}

#[test]
fn poll_ready_takes_no_probe() {
    let clock = ManualClock::new();
    let b = breaker(&clock, 1);
    let _ = b.call(|| Err::<(), _>("trip"));
    clock.advance(COOLDOWN);
    let calls = Arc::new(AtomicU32::new(0));
    let mut svc = CircuitBreakerService::new(backend(&calls), b.clone()).classify(by_status);
    for _ in 0..1000 {
        assert!(poll_once(pin!(svc.ready())).is_ready());
    }
    assert_eq!(b.state(), State::Open, "readiness moved nothing");
    assert_eq!(b.metrics().lifetime.admitted, 1);
    // The probe is still there for the first real call.
    assert_eq!(block_on(svc.call(200)).unwrap(), 200);
    assert_eq!(b.state(), State::Closed);
}

/// A dependency that applies backpressure and is never ready (a concurrency
/// limit whose permits hung calls hold, a connection pool still connecting): counts
/// how often its readiness is asked for.
#[derive(Clone)]
struct NeverReady {
    asked: Arc<AtomicU32>,
}

impl<R> Service<R> for NeverReady {
    type Response = hyper::Response<String>;
    type Error = std::io::Error;
    type Future = std::future::Ready<Result<Self::Response, std::io::Error>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.asked.fetch_add(1, Ordering::Relaxed);
        Poll::Pending
    }
    fn call(&mut self, _: R) -> Self::Future {
        unreachable!("never ready, so never called")
    }
}

/// An open breaker answers at once, without asking a service that is not ready:
/// a request through it was `Pending` for as long as the sick dependency was not
/// ready (its readiness asked at every poll), and never got its rejection or its
/// 503 (a reviewer's finding). Readiness still takes no probe, a second
/// `poll_ready` decides afresh, and a service made ready so and dropped counts
/// nothing.
#[test]
fn an_open_breaker_is_ready_at_once_and_rejects_without_asking_a_service_that_is_not_ready() {
    let clock = ManualClock::new();
    let b = breaker(&clock, 1);
    let asked = Arc::new(AtomicU32::new(0));
    let backend = NeverReady {
        asked: asked.clone(),
    };
    let _ = b.call(|| Err::<(), _>("trip"));
    clock.advance(Duration::from_millis(500));

    // The http layer: a 503 with Retry-After at the first poll.
    #[cfg(feature = "http")]
    {
        let app = cutout::http::HttpLayer::new(b.clone()).layer(backend.clone());
        match poll_once(pin!(app.oneshot(()))) {
            Poll::Ready(Ok(response)) => {
                assert_eq!(response.status(), hyper::StatusCode::SERVICE_UNAVAILABLE);
                assert_eq!(response.headers()[hyper::header::RETRY_AFTER], "30");
            }
            other => panic!("expected a 503 at once, got {other:?}"),
        }
    }
    #[cfg(not(feature = "http"))]
    assert!(b.try_acquire().is_err()); // the same count as the 503's rejection
    // The tower layer: the rejection at the first poll, its retry time exact.
    let svc = CircuitBreakerLayer::new(b.clone()).layer(backend.clone());
    match poll_once(pin!(svc.clone().oneshot(()))) {
        Poll::Ready(Err(Error::Rejected(r))) => {
            assert_eq!(r.state(), State::Open);
            assert_eq!(r.retry_after(), Some(COOLDOWN - Duration::from_millis(500)));
        }
        other => panic!("expected a rejection at once, got {other:?}"),
    }
    assert_eq!(asked.load(Ordering::Relaxed), 0, "the dependency untouched");
    assert_eq!(
        b.metrics().lifetime.rejected,
        2,
        "each request one rejection"
    );

    // Made ready by the open breaker, then dropped without a call: nothing counted.
    let mut idle = svc.clone();
    assert!(poll_once(pin!(ServiceExt::<()>::ready(&mut idle))).is_ready());
    drop(idle);
    assert_eq!(b.metrics().lifetime.rejected, 2);

    // Ready for the open breaker; reset before the call: the next `poll_ready`
    // asks the inner service again, which is not ready.
    let mut svc2 = svc.clone();
    assert!(poll_once(pin!(ServiceExt::<()>::ready(&mut svc2))).is_ready());
    b.reset();
    assert!(poll_once(pin!(ServiceExt::<()>::ready(&mut svc2))).is_pending());
    assert_eq!(asked.load(Ordering::Relaxed), 1);

    // Ready for the open breaker, and the cooldown ends before the call: the
    // inner service was not made ready, so the call is rejected, retrying at once.
    let mut late = svc.clone();
    b.reset();
    let _ = b.call(|| Err::<(), _>("trip"));
    let rejected = rejected_after_readiness(&mut late, || clock.advance(COOLDOWN));
    assert_eq!(
        (rejected.state(), rejected.retry_after()),
        (State::Open, Some(Duration::ZERO))
    );
    // The example's hand-written 503 asks for at least a second, as the http
    // layer's does: nothing left to wait is no invitation to retry at once.
    let response = tower_http::rejected_response(&rejected);
    assert_eq!(response.headers()[hyper::header::RETRY_AFTER], "1");
    assert_eq!(b.state(), State::Open, "no probe taken by it");
    assert_eq!(asked.load(Ordering::Relaxed), 1);

    // Forced open: rejected until reset, at once.
    b.force_open();
    match poll_once(pin!(svc.clone().oneshot(()))) {
        Poll::Ready(Err(Error::Rejected(r))) => {
            assert_eq!((r.state(), r.retry_after()), (State::ForcedOpen, None));
        }
        other => panic!("expected a rejection at once, got {other:?}"),
    }
    // Ready for the forced-open breaker, reset before the call: rejected by the
    // state that answered, retrying at once (`Rejected::retry_after`'s exception;
    // the tower model found it on the default clock). Over http: Retry-After 1.
    let rejected = rejected_after_readiness(&mut svc.clone(), || b.reset());
    assert_eq!(
        (rejected.state(), rejected.retry_after()),
        (State::ForcedOpen, Some(Duration::ZERO))
    );
    #[cfg(feature = "http")]
    {
        let mut app = cutout::http::HttpLayer::new(b.clone()).layer(backend.clone());
        b.force_open();
        assert!(poll_once(pin!(ServiceExt::<()>::ready(&mut app))).is_ready());
        b.reset();
        match poll_once(pin!(app.call(()))) {
            Poll::Ready(Ok(response)) => {
                assert_eq!(response.status(), hyper::StatusCode::SERVICE_UNAVAILABLE);
                assert_eq!(response.headers()[hyper::header::RETRY_AFTER], "1");
            }
            other => panic!("expected a 503, got {other:?}"),
        }
    }

    // After the cooldown the inner service decides readiness; no probe is taken
    // for it, and the breaker stays Open until a call.
    b.reset();
    let _ = b.call(|| Err::<(), _>("trip"));
    clock.advance(COOLDOWN);
    let mut svc3 = svc.clone();
    assert!(poll_once(pin!(ServiceExt::<()>::ready(&mut svc3))).is_pending());
    assert_eq!(asked.load(Ordering::Relaxed), 2);
    assert_eq!(b.state(), State::Open, "readiness moved nothing");
}

/// Makes `svc` ready (a rejection answers it), runs `between`, then calls it:
/// the call's rejection.
fn rejected_after_readiness<S, E>(svc: &mut S, between: impl FnOnce()) -> cutout::Rejected
where
    S: Service<(), Error = Error<E>>,
    S::Response: std::fmt::Debug,
    E: std::fmt::Debug,
{
    assert!(poll_once(pin!(ServiceExt::<()>::ready(&mut *svc))).is_ready());
    between();
    match poll_once(pin!(svc.call(()))) {
        Poll::Ready(Err(Error::Rejected(r))) => r,
        other => panic!("expected a rejection, got {other:?}"),
    }
}

/// A dependency whose failures surface from `poll_ready`, as a `Reconnect`'s
/// refused connection or a hyper `SendRequest` whose connection closed do.
#[derive(Clone)]
struct ReadinessFails {
    asked: Arc<AtomicU32>,
}

impl Service<u16> for ReadinessFails {
    type Response = u16;
    type Error = &'static str;
    type Future = std::future::Ready<Result<u16, &'static str>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.asked.fetch_add(1, Ordering::Relaxed);
        Poll::Ready(Err("connection refused"))
    }
    fn call(&mut self, _: u16) -> Self::Future {
        unreachable!("its readiness failed")
    }
}

/// An error from the inner service's readiness is a failed call: it was passed on
/// and counted nowhere, so a breaker in front of a client whose connection errors
/// come from readiness never opened (a reviewer's finding). Classified as a
/// response's `Err`; on a call admitted for it, so a half-open probe's slot is
/// taken by it; and once the breaker is open the dependency is not asked.
#[test]
fn a_readiness_error_is_a_failed_call_classified_as_a_responses_error() {
    let clock = ManualClock::new();
    let b = breaker(&clock, 3);
    let asked = Arc::new(AtomicU32::new(0));
    let failing = ReadinessFails {
        asked: asked.clone(),
    };
    let svc = CircuitBreakerService::new(failing.clone(), b.clone());
    for _ in 0..3 {
        assert_eq!(
            block_on(svc.clone().oneshot(200)),
            Err(Error::Inner("connection refused"))
        );
    }
    let m = b.metrics();
    assert_eq!(m.state, State::Open);
    assert_eq!(m.transitions(cutout::Reason::ConsecutiveFailures), 1);
    assert_eq!((m.lifetime.admitted, m.lifetime.failures), (3, 3));
    // Open: rejected at once, the dependency not asked.
    assert!(matches!(
        block_on(svc.clone().oneshot(200)),
        Err(Error::Rejected(_))
    ));
    assert_eq!(asked.load(Ordering::Relaxed), 3);

    // After the cooldown the readiness error is the probe's failure: reopened.
    clock.advance(COOLDOWN);
    assert_eq!(
        block_on(svc.clone().oneshot(200)),
        Err(Error::Inner("connection refused"))
    );
    let m = b.metrics();
    assert_eq!(m.state, State::Open);
    assert_eq!(m.transitions(cutout::Reason::ProbeFailed), 1);
    assert_eq!(m.lifetime.failures, 4);

    // A classifier that ignores the error ignores it from readiness too.
    let lenient = Arc::new(
        CircuitBreaker::builder()
            .consecutive_failures(1)
            .clock(clock.clone())
            .build()
            .unwrap(),
    );
    let ignoring =
        CircuitBreakerService::new(failing, lenient.clone()).classify(|r: &Result<u16, &str>| {
            match r {
                Err(_) => Outcome::Ignored,
                Ok(_) => Outcome::Success,
            }
        });
    for _ in 0..5 {
        assert_eq!(
            block_on(ignoring.clone().oneshot(200)),
            Err(Error::Inner("connection refused"))
        );
    }
    let m = lenient.metrics();
    assert_eq!(m.state, State::Closed);
    assert_eq!((m.lifetime.admitted, m.lifetime.ignored), (5, 5));
}

/// A response future that fails and then panics when dropped: as documented, it is
/// dropped before its outcome is recorded, so the call counts as dropped (not as
/// its failure: that would cost every call about ten instructions), nothing is
/// lost uncounted, the panic reaches the poller, and the future is done.
#[test]
fn a_response_future_whose_drop_panics_counts_as_dropped() {
    struct PanicsOnDrop;
    impl Drop for PanicsOnDrop {
        fn drop(&mut self) {
            if !std::thread::panicking() {
                panic!("the response future panicked in its drop");
            }
        }
    }
    struct FailsThenPanicsOnDrop(#[allow(dead_code)] PanicsOnDrop);
    impl Future for FailsThenPanicsOnDrop {
        type Output = Result<u16, std::io::Error>;
        fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
            Poll::Ready(Err(std::io::Error::other("connection reset")))
        }
    }
    let clock = ManualClock::new();
    let b = breaker(&clock, 1);
    let mut svc = CircuitBreakerService::new(
        service_fn(|_: ()| FailsThenPanicsOnDrop(PanicsOnDrop)),
        b.clone(),
    );
    assert!(poll_once(pin!(svc.ready())).is_ready());
    let mut response = pin!(svc.call(()));
    let first = catch_unwind(AssertUnwindSafe(|| poll_once(response.as_mut())));
    assert!(first.is_err(), "the drop's panic reaches the poller");
    let m = b.metrics();
    assert_eq!(
        (m.lifetime.admitted, m.lifetime.failures, m.lifetime.dropped),
        (1, 0, 1)
    );
    assert_eq!(m.state, State::Closed);
    assert!(poll_once(response.as_mut()).is_pending(), "done");
}

/// A service whose response never comes (or panics when asked to).
#[derive(Clone)]
struct Hangs;

impl Service<bool> for Hangs {
    type Response = ();
    type Error = std::io::Error;
    type Future = Pin<Box<dyn Future<Output = Result<(), std::io::Error>> + Send>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, panics: bool) -> Self::Future {
        Box::pin(async move {
            if panics {
                panic!("handler panicked");
            }
            pending::<()>().await;
            Ok(())
        })
    }
}

#[test]
fn a_dropped_response_future_gives_its_probe_back() {
    let clock = ManualClock::new();
    let b = breaker(&clock, 1);
    let _ = b.call(|| Err::<(), _>("trip"));
    clock.advance(COOLDOWN);
    let mut svc = CircuitBreakerService::new(Hangs, b.clone());
    let mut in_flight = Box::pin(svc.call(false));
    assert!(poll_once(in_flight.as_mut()).is_pending());
    assert_eq!(b.state(), State::HalfOpen);
    assert!(
        block_on(svc.call(false)).unwrap_err().is_rejected(),
        "the one probe is out"
    );
    drop(in_flight); // the client went away
    let m = b.metrics();
    assert_eq!((m.lifetime.dropped, m.lifetime.failures), (1, 1));
    // The slot came back: the next probe decides.
    let permit = b.try_acquire().expect("a probe slot");
    permit.success();
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn a_panicking_handler_gives_its_probe_back() {
    let clock = ManualClock::new();
    let b = breaker(&clock, 1);
    let _ = b.call(|| Err::<(), _>("trip"));
    clock.advance(COOLDOWN);
    let mut svc = CircuitBreakerService::new(Hangs, b.clone());
    let mut fut = Box::pin(svc.call(true));
    assert!(catch_unwind(AssertUnwindSafe(|| poll_once(fut.as_mut()))).is_err());
    drop(fut);
    assert_eq!(b.metrics().lifetime.dropped, 1);
    let permit = b.try_acquire().expect("a probe slot");
    permit.failure();
    assert_eq!(
        b.state(),
        State::Open,
        "the breaker still reached a verdict"
    );
}

#[test]
fn ignored_responses_release_their_probe_and_count_as_neither() {
    let clock = ManualClock::new();
    let b = breaker(&clock, 1);
    let _ = b.call(|| Err::<(), _>("trip"));
    clock.advance(COOLDOWN);
    let calls = Arc::new(AtomicU32::new(0));
    let svc = CircuitBreakerLayer::new(b.clone())
        .classify(|r: &Result<u16, std::io::Error>| match r {
            Ok(499) => Outcome::Ignored, // the client closed the request
            other => by_status(other),
        })
        .layer(backend(&calls));
    for _ in 0..3 {
        assert_eq!(block_on(svc.clone().oneshot(499)).unwrap(), 499);
    }
    let m = b.metrics();
    assert_eq!(b.state(), State::HalfOpen);
    assert_eq!(
        (
            m.lifetime.ignored,
            m.lifetime.successes,
            m.lifetime.failures
        ),
        (3, 0, 1)
    );
    assert_eq!(block_on(svc.oneshot(200)).unwrap(), 200);
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn the_layer_composes_in_a_service_builder_and_futures_are_send() {
    fn assert_send<T: Send>(_: &T) {}
    let clock = ManualClock::new();
    let b = breaker(&clock, 1);
    let calls = Arc::new(AtomicU32::new(0));
    let layer = CircuitBreakerLayer::new(b.clone()).classify(by_status);
    assert!(format!("{layer:?}").contains("CircuitBreakerLayer"));
    let mut svc = ServiceBuilder::new().layer(layer).service(backend(&calls));
    let fut = svc.call(200);
    assert_send(&fut);
    assert_eq!(block_on(fut).unwrap(), 200);
    assert!(Arc::ptr_eq(svc.breaker(), &b));
}

#[tokio::test]
async fn the_hyper_example_answers_503_with_retry_after_over_loopback() {
    let clock = ManualClock::new();
    let b = breaker(&clock, 3);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(tower_http::serve(listener, b.clone(), 1));
    let exchange = async {
        let mut client = tower_http::connect(addr).await.unwrap();
        let mut get = async |path| tower_http::get(&mut client, path).await.unwrap();

        let (status, retry_after, _) = get("/missing").await;
        assert_eq!((status.as_u16(), retry_after), (404, None));
        for _ in 0..3 {
            // The upstream's own 503s: failures, passed through as they are.
            let (status, retry_after, body) = get("/fail").await;
            assert_eq!((status.as_u16(), retry_after), (503, None));
            assert_eq!(&body[..], b"from upstream");
        }
        assert_eq!(b.state(), State::Open);

        clock.advance(Duration::from_millis(10_500));
        let (status, retry_after, body) = get("/ok").await;
        assert_eq!(status.as_u16(), 503);
        assert_eq!(
            retry_after.as_deref(),
            Some("20"),
            "19.5 s left, rounded up"
        );
        assert_eq!(&body[..], b"circuit open");

        clock.advance(Duration::from_millis(19_500));
        let (status, _, _) = get("/ok").await;
        assert_eq!(status.as_u16(), 200, "the probe went through");
        assert_eq!(b.state(), State::Closed);

        b.force_open();
        let (status, retry_after, _) = get("/ok").await;
        assert_eq!(
            (status.as_u16(), retry_after),
            (503, None),
            "forced open: no promise"
        );
    };
    // A bound, not a sleep: the exchange takes milliseconds.
    tokio::time::timeout(Duration::from_secs(20), exchange)
        .await
        .expect("the loopback exchange finished");
    tokio::time::timeout(Duration::from_secs(20), server)
        .await
        .expect("the server stopped after its one connection")
        .unwrap()
        .unwrap();
    let m = b.metrics();
    assert_eq!((m.lifetime.rejected, m.lifetime.failures), (2, 3));
}

#[test]
fn the_response_future_is_pending_after_completion() {
    let clock = ManualClock::new();
    let b = breaker(&clock, 1);
    let calls = Arc::new(AtomicU32::new(0));
    let mut svc = CircuitBreakerService::new(backend(&calls), b.clone());
    let mut fut = pin!(svc.call(200));
    assert!(matches!(poll_once(fut.as_mut()), Poll::Ready(Ok(200))));
    assert!(poll_once(fut.as_mut()).is_pending());
    assert_eq!(b.metrics().lifetime.successes, 1);
}

#[test]
fn the_error_boxes_into_a_box_error() {
    let clock = ManualClock::new();
    let b = breaker(&clock, 1);
    b.force_open();
    let calls = Arc::new(AtomicU32::new(0));
    let svc = CircuitBreakerService::new(backend(&calls), b);
    let err: tower::BoxError = block_on(svc.oneshot(200)).unwrap_err().into();
    let err = err.downcast_ref::<Error<std::io::Error>>().unwrap();
    assert_eq!(err.rejected().unwrap().state(), State::ForcedOpen);
    assert!(err.to_string().contains("forced"), "{err}");
}

#[test]
fn calls_and_service_clones_write_no_reference_count_and_the_future_keeps_it_alive() {
    let clock = ManualClock::new();
    let b = breaker(&clock, 1);
    let layer = CircuitBreakerLayer::new(b.clone());
    let echo = service_fn(|x: u16| async move { Ok::<_, std::io::Error>(x) });
    let mut one = layer.layer(echo);
    let two = layer.layer(echo);
    // This thread's first request clones the service and calls it: each takes a
    // handle, and when they end, the handles are this thread's spares.
    assert_eq!(block_on(two.clone().call(100)).unwrap(), 100);
    let settled = Arc::strong_count(&b);
    // From then on, a call and a service cloned for each request (as axum's
    // router does) take those spares and give them back: the count never moves.
    for i in 0..1000 {
        let mut per_request = two.clone();
        let future = per_request.call(i);
        assert_eq!(Arc::strong_count(&b), settled, "a call wrote the count");
        drop(per_request);
        assert_eq!(block_on(future).unwrap(), i);
        assert_eq!(Arc::strong_count(&b), settled, "a call wrote the count");
    }
    // Futures outlive every other handle on the breaker, and still record.
    let first = one.call(200);
    let mut three = two.clone();
    let second = three.call(201);
    drop((one, two, three, layer));
    let weak = Arc::downgrade(&b);
    drop(b);
    assert!(
        weak.upgrade().is_some(),
        "the futures keep the breaker alive"
    );
    assert_eq!(block_on(first).unwrap(), 200);
    assert_eq!(weak.upgrade().unwrap().metrics().lifetime.successes, 1002);
    assert_eq!(block_on(second).unwrap(), 201);
    // This thread's spares were all that held it: the last future let it go.
    assert!(weak.upgrade().is_none(), "the last future let it go");
}

/// The layer's docs: a thread keeps at most eight spares of breakers on the
/// default clock and eight of breakers on other clocks, the newest. Twelve of
/// each, one call through a fresh service each (as a router makes per request):
/// the spares beyond the eight newest of each kind are let go, and the oldest
/// breakers are held by nothing but the test.
#[test]
fn a_thread_keeps_at_most_eight_spares_of_each_clock_kind() {
    std::thread::spawn(|| {
        let clock = ManualClock::new();
        let manual: Vec<_> = (0..12).map(|_| breaker(&clock, 1)).collect();
        let default: Vec<_> = (0..12)
            .map(|_| Arc::new(CircuitBreaker::builder().build().unwrap()))
            .collect();
        fn one_call<C: cutout::Clock + 'static>(b: &Arc<CircuitBreaker<C>>) {
            let echo = service_fn(|x: u8| async move { Ok::<_, std::io::Error>(x) });
            let service = CircuitBreakerService::new(echo, b.clone());
            assert_eq!(block_on(service.oneshot(1)).unwrap(), 1);
        }
        manual.iter().for_each(one_call);
        default.iter().for_each(one_call);
        // Every handle beyond the test's own is a spare of this thread's.
        fn spares<C: cutout::Clock>(breakers: &[Arc<CircuitBreaker<C>>]) -> Vec<usize> {
            breakers.iter().map(|b| Arc::strong_count(b) - 1).collect()
        }
        for kind in [spares(&manual), spares(&default)] {
            // A call leaves two (its service's and its future's): the newest
            // breakers hold the eight, the oldest none.
            assert_eq!(kind.iter().sum::<usize>(), 8, "{kind:?}");
            assert_eq!(kind[..4], [0; 4], "{kind:?}");
        }
    })
    .join()
    .unwrap();
}

#[test]
fn a_future_may_end_on_another_thread_and_a_thread_lets_its_spares_go_when_it_exits() {
    let clock = ManualClock::new();
    let b = breaker(&clock, 1);
    // Not through a layer: a layer dropped here would leave this thread a spare,
    // which the first clone below would take to the other thread.
    let service = CircuitBreakerService::new(
        service_fn(|x: u16| async move { Ok::<_, std::io::Error>(x) }),
        b.clone(),
    );
    let before = Arc::strong_count(&b);
    std::thread::scope(|scope| {
        let (send, receive) = std::sync::mpsc::channel();
        let mut started = service.clone();
        scope.spawn(move || {
            for i in 0..100 {
                send.send(started.call(i)).unwrap();
            }
        });
        let ends = scope.spawn(move || {
            let mut seen = 0;
            for future in receive {
                assert_eq!(block_on(future).unwrap(), seen);
                seen += 1;
            }
            seen
        });
        assert_eq!(ends.join().unwrap(), 100);
    });
    // Both threads exited: whatever spares they kept are gone. A scope ends when
    // its threads' closures have returned, which may be just before their
    // thread-locals (the spares) are dropped: wait for that, a bounded time.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while Arc::strong_count(&b) != before && std::time::Instant::now() < deadline {
        std::thread::yield_now();
    }
    assert_eq!(Arc::strong_count(&b), before);
    assert_eq!(b.metrics().lifetime.successes, 100);
}

#[cfg(feature = "registry")]
#[test]
fn spares_keep_a_registry_breaker_from_eviction_until_their_thread_exits() {
    use cutout::Registry;
    let clock = ManualClock::new();
    let registry: Registry<String, _> = Registry::builder(trips_on(5, clock.clone()))
        .build()
        .unwrap();
    let (called, wait) = std::sync::mpsc::channel();
    let (exit, exiting) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|scope| {
        let registry = &registry;
        let worker = scope.spawn(move || {
            let service = CircuitBreakerLayer::new(registry.get("host")).layer(service_fn(
                |x: u16| async move { Ok::<_, std::io::Error>(x) },
            ));
            assert_eq!(block_on(service.clone().oneshot(7)).unwrap(), 7);
            drop(service); // layer, service and future gone: spares are left
            called.send(()).unwrap();
            let _ = exiting.recv();
        });
        wait.recv().unwrap();
        clock.advance(Duration::from_secs(3600));
        // The worker's spares are handles: the idle breaker stays.
        assert_eq!(registry.evict_idle(Duration::from_secs(60)), 0);
        drop(exit);
        worker.join().unwrap();
    });
    // The worker exited and its spares went with it.
    assert_eq!(registry.evict_idle(Duration::from_secs(60)), 1);
    assert!(registry.is_empty());
}

/// A service whose `call` itself panics, before it returns a future: a handler
/// that unwraps a header, a router that panics on a bad path.
#[derive(Clone)]
struct PanicsInCall;

impl Service<u16> for PanicsInCall {
    type Response = u16;
    type Error = std::io::Error;
    type Future = std::future::Ready<Result<u16, std::io::Error>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, _: u16) -> Self::Future {
        panic!("the service panicked in call");
    }
}

/// A probe whose inner service panics in `call` (not in its future) is a dropped
/// call and gives its half-open slot back (contract line 2): the admission must be
/// guarded before the inner `call` runs, or the slot stays taken until the
/// half-open timeout.
#[test]
fn a_panic_in_the_inner_services_call_gives_its_probe_back() {
    let b = probing();
    let mut svc = CircuitBreakerService::new(PanicsInCall, b.clone());
    let panicked = catch_unwind(AssertUnwindSafe(|| drop(svc.call(200))));
    assert!(panicked.is_err());
    dropped_probe_came_back(&b, "the panicked call").success();
    assert_eq!(b.state(), State::Closed);
}

/// A classifier that panics on a probe's response is a dropped call too: the
/// classifier runs while the admission is still guarded, so its slot comes back
/// and the next probe decides.
#[test]
fn a_panicking_classifier_gives_its_probe_back() {
    let b = probing();
    let echo = service_fn(|x: u16| async move { Ok::<_, std::io::Error>(x) });
    let mut svc = CircuitBreakerLayer::new(b.clone())
        .classify(|_: &Result<u16, std::io::Error>| -> Outcome { panic!("classifier") })
        .layer(echo);
    let mut fut = Box::pin(svc.call(200));
    assert!(catch_unwind(AssertUnwindSafe(|| poll_once(fut.as_mut()))).is_err());
    drop(fut);
    dropped_probe_came_back(&b, "the probe whose classifier panicked").failure();
    assert_eq!(b.state(), State::Open);
}

/// A layer holds its breaker as a hold, so when the layer is the last thing to go
/// (after its services and their futures), this thread's spares go with it and
/// the breaker is freed, as it would be without spares.
#[test]
fn a_breaker_goes_when_its_last_layer_goes_after_its_services() {
    let clock = ManualClock::new();
    let b = breaker(&clock, 1);
    let weak = Arc::downgrade(&b);
    let layer = CircuitBreakerLayer::new(b);
    let svc = layer.layer(service_fn(
        |x: u16| async move { Ok::<_, std::io::Error>(x) },
    ));
    assert_eq!(block_on(svc.clone().oneshot(7)).unwrap(), 7);
    drop(svc);
    drop(layer);
    assert!(
        weak.upgrade().is_none(),
        "no layer, service or future is left, yet the breaker is alive \
         (strong count {})",
        weak.strong_count()
    );
}

/// Twenty breakers on one thread (more than its eight spares), futures created
/// interleaved, services cloned per request, futures finished in reverse order and
/// some dropped: every outcome lands on its own breaker, and once the handles are
/// dropped the spares keep at most eight breakers alive.
#[test]
fn twenty_breakers_on_one_thread_each_record_only_their_own_outcomes() {
    let clock = ManualClock::new();
    let breakers: Vec<_> = (0..20).map(|_| breaker(&clock, 1_000)).collect();
    let services: Vec<_> = breakers
        .iter()
        .map(|b| {
            CircuitBreakerLayer::new(b.clone()).layer(service_fn(|x: u32| async move {
                if x.is_multiple_of(3) {
                    Err(std::io::Error::other("x"))
                } else {
                    Ok(x)
                }
            }))
        })
        .collect();
    let mut expected = vec![(0u64, 0u64); 20];
    for round in 0..50u32 {
        let mut futures = Vec::new();
        for (i, svc) in services.iter().enumerate() {
            for j in 0..3u32 {
                let x = round * 7 + i as u32 + j;
                let mut per_request = svc.clone();
                futures.push((i, x, per_request.call(x)));
            }
        }
        while let Some((i, x, fut)) = futures.pop() {
            if x.is_multiple_of(5) {
                drop(fut);
                continue;
            }
            let _ = block_on(fut);
            if x.is_multiple_of(3) {
                expected[i].1 += 1;
            } else {
                expected[i].0 += 1;
            }
        }
    }
    for (i, b) in breakers.iter().enumerate() {
        let l = b.metrics().lifetime;
        assert_eq!((l.successes, l.failures), expected[i], "breaker {i}");
        assert_eq!(l.admitted, 150, "breaker {i}");
    }
    drop(services);
    let weaks: Vec<_> = breakers.iter().map(Arc::downgrade).collect();
    drop(breakers);
    let alive = weaks.iter().filter(|w| w.strong_count() > 0).count();
    assert!(alive <= 8, "{alive} breakers kept alive by spares");
}

/// `Dropped::FailureAfter` through tower: a probe's response future dropped past
/// the threshold (a timeout outside the layer gave up on it) is a failed probe,
/// and the breaker reopens.
#[test]
fn a_probe_dropped_past_failure_after_reopens() {
    let clock = ManualClock::new();
    let b = Arc::new(
        trips_after(1, COOLDOWN)
            .on_drop(Dropped::FailureAfter(Duration::from_millis(500)))
            .clock(clock.clone())
            .build()
            .unwrap(),
    );
    to_probing(&b, &clock);
    let mut svc = CircuitBreakerLayer::new(b.clone()).layer(service_fn(|_: u16| {
        pending::<Result<u16, std::io::Error>>()
    }));
    let mut fut = Box::pin(svc.call(1));
    assert!(poll_once(fut.as_mut()).is_pending());
    clock.advance(Duration::from_millis(501));
    drop(fut);
    assert_eq!(b.state(), State::Open, "the hung probe failed");
    assert_eq!(b.metrics().lifetime.dropped, 1);
}

/// A probe's response future created on one thread and dropped on another past the
/// slow-call threshold is one slow probe: the breaker reopens, whichever thread
/// ends the call.
#[test]
fn a_slow_probe_dropped_on_another_thread_reopens() {
    let clock = ManualClock::new();
    let b = Arc::new(
        CircuitBreaker::builder()
            .consecutive_failures(1)
            .slow_calls(Duration::from_millis(100), 0.5)
            .open_duration(COOLDOWN)
            .clock(clock.clone())
            .build()
            .unwrap(),
    );
    to_probing(&b, &clock);
    let mut svc = CircuitBreakerLayer::new(b.clone()).layer(service_fn(|_: u16| {
        pending::<Result<u16, std::io::Error>>()
    }));
    let fut = svc.call(1);
    clock.advance(Duration::from_millis(101));
    std::thread::spawn(move || drop(fut)).join().unwrap();
    assert_eq!(b.state(), State::Open);
}

/// `HttpLayer` (a `CircuitBreakerLayer` inside) over a route whose future panics:
/// the probe is a dropped call, its slot comes back, and the next request closes
/// the breaker.
#[cfg(feature = "http")]
#[test]
fn the_http_layer_gives_a_panicking_routes_probe_back() {
    use cutout::http::HttpLayer;
    use http::{Request, Response};
    let b = probing();
    let svc = HttpLayer::new(b.clone()).layer(service_fn(|req: Request<()>| async move {
        if req.uri().path() == "/boom" {
            panic!("route panicked")
        }
        Ok::<_, std::convert::Infallible>(Response::new(String::new()))
    }));
    let mut fut = Box::pin(svc.clone().oneshot(Request::get("/boom").body(()).unwrap()));
    assert!(catch_unwind(AssertUnwindSafe(|| poll_once(fut.as_mut()))).is_err());
    drop(fut);
    assert_eq!(b.metrics().lifetime.dropped, 1);
    let ok = block_on(svc.oneshot(Request::get("/ok").body(()).unwrap())).unwrap();
    assert_eq!(ok.status(), 200, "the probe slot came back");
    assert_eq!(b.state(), State::Closed);
}

/// A router-wide `HttpLayer` over a route's own: the route's breaker, open,
/// answers its rejection (a 503), which the outer breaker ignores rather than
/// counts a failure: it does not open because an inner one is open. The
/// backend's own 503 still fails.
#[cfg(feature = "http")]
#[test]
fn an_outer_http_layer_ignores_an_inner_breakers_rejection() {
    use cutout::http::HttpLayer;
    use http::{Request, Response, StatusCode};
    let clock = ManualClock::new();
    let (outer, inner) = (breaker(&clock, 1), breaker(&clock, 1));
    let route = HttpLayer::new(inner.clone()).layer(service_fn(|req: Request<()>| async move {
        let mut response = Response::new(String::new());
        if req.uri().path() == "/sick" {
            *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
        }
        Ok::<_, std::convert::Infallible>(response)
    }));
    let app = HttpLayer::new(outer.clone()).layer(route);
    let get = |path: &str| {
        let request = Request::get(path).body(()).unwrap();
        block_on(app.clone().oneshot(request)).unwrap().status()
    };
    inner.force_open();
    for _ in 0..5 {
        assert_eq!(get("/ok"), StatusCode::SERVICE_UNAVAILABLE);
    }
    let m = outer.metrics();
    assert_eq!((m.state, m.lifetime.failures), (State::Closed, 0), "{m:?}");
    inner.reset();
    assert_eq!(get("/sick"), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        outer.metrics().lifetime.failures,
        1,
        "the backend's own 503"
    );
}

/// A boxed response future of the `()`-returning services below.
type BoxFut = Pin<Box<dyn Future<Output = Result<(), Error<&'static str>>> + Send>>;

/// A backend whose calls never complete.
fn hang_svc()
-> impl Service<(), Response = (), Error = &'static str, Future: Send + 'static> + Clone {
    service_fn(|_: ()| pending::<Result<(), &'static str>>())
}

/// One poll of a boxed response future with a no-op waker.
fn poll_dyn(
    f: Pin<&mut (dyn Future<Output = Result<(), Error<&'static str>>> + Send)>,
) -> Poll<Result<(), Error<&'static str>>> {
    f.poll(&mut Context::from_waker(std::task::Waker::noop()))
}

thread_local! {
    /// Whether the `hang_or` backend answers on this poll.
    static FLIP: Cell<bool> = const { Cell::new(false) };
}

/// A backend whose future is pending unless `finish` and `FLIP` is set.
fn hang_or()
-> impl Service<bool, Response = (), Error = &'static str, Future: Send + 'static> + Clone {
    service_fn(|finish: bool| {
        std::future::poll_fn(move |_| {
            if finish && FLIP.with(|x| x.get()) {
                Poll::Ready(Ok(()))
            } else {
                Poll::Pending
            }
        })
    })
}

/// A thread whose first spare is kept while its thread-locals are torn down (its
/// service and future live in a thread-local of its own): the spares still go
/// when the thread has exited.
#[test]
fn a_first_spare_kept_during_thread_local_teardown_does_not_outlive_the_thread() {
    type Svc =
        CircuitBreakerService<tower::util::BoxCloneSyncService<(), (), &'static str>, ManualClock>;
    thread_local! {
        static HELD: std::cell::RefCell<(Vec<BoxFut>, Vec<Svc>)> =
            const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
    }
    let clock = ManualClock::new();
    let b = Arc::new(
        CircuitBreaker::builder()
            .consecutive_failures(1)
            .clock(clock.clone())
            .build()
            .unwrap(),
    );
    let b2 = b.clone();
    std::thread::spawn(move || {
        HELD.with(|_| ());
        let mut svc: Svc =
            CircuitBreakerService::new(tower::util::BoxCloneSyncService::new(hang_svc()), b2);
        let mut fut: BoxFut = Box::pin(svc.call(()));
        assert!(poll_dyn(fut.as_mut()).is_pending());
        HELD.with(|h| {
            let mut h = h.borrow_mut();
            h.0.push(fut);
            h.1.push(svc);
        });
    })
    .join()
    .unwrap();
    let l = b.metrics().lifetime;
    assert_eq!((l.admitted, l.dropped), (1, 1), "{l:?}");
    assert_eq!(Arc::strong_count(&b), 1);
}

/// Futures made on four threads, each finished or dropped on another, through
/// several breakers of both clock kinds: every call counted once on its own
/// breaker, and once the threads have exited no spare of theirs is left.
#[test]
fn futures_passed_between_threads_count_once_and_leave_no_spares() {
    use std::sync::mpsc;
    let manual: Vec<_> = (0..12)
        .map(|_| {
            Arc::new(
                CircuitBreaker::builder()
                    .consecutive_failures(u32::MAX / 2)
                    .clock(ManualClock::new())
                    .build()
                    .unwrap(),
            )
        })
        .collect();
    let default: Vec<_> = (0..12)
        .map(|_| {
            Arc::new(
                CircuitBreaker::builder()
                    .consecutive_failures(u32::MAX / 2)
                    .build()
                    .unwrap(),
            )
        })
        .collect();
    const THREADS: usize = 4;
    const CALLS: usize = 3000;
    let (txs, rxs): (Vec<_>, Vec<_>) = (0..THREADS)
        .map(|_| mpsc::channel::<(BoxFut, bool)>())
        .unzip();
    let mut handles = Vec::new();
    for (t, rx) in rxs.into_iter().enumerate() {
        let next = txs[(t + 1) % THREADS].clone();
        let manual = manual.clone();
        let default = default.clone();
        handles.push(std::thread::spawn(move || {
            let ms: Vec<_> = manual
                .iter()
                .map(|b| CircuitBreakerService::new(hang_or(), b.clone()))
                .collect();
            let mut ds: Vec<_> = default
                .iter()
                .map(|b| CircuitBreakerService::new(hang_or(), b.clone()))
                .collect();
            for i in 0..CALLS {
                let finish = i % 3 != 0;
                // A clone for each call on the manual clock, the service itself on
                // the default one.
                let mut f: BoxFut = if i % 2 == 0 {
                    Box::pin(ms[i % ms.len()].clone().call(finish))
                } else {
                    let n = ds.len();
                    Box::pin(ds[i % n].call(finish))
                };
                assert!(poll_dyn(f.as_mut()).is_pending());
                next.send((f, finish)).unwrap();
                while let Ok((mut f, finish)) = rx.try_recv() {
                    if finish {
                        FLIP.with(|x| x.set(true));
                        assert!(matches!(poll_dyn(f.as_mut()), Poll::Ready(Ok(()))));
                        FLIP.with(|x| x.set(false));
                    }
                    drop(f);
                }
            }
            drop(next);
            (rx, ms, ds)
        }));
    }
    drop(txs);
    let leftovers: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    // Finish what was still in flight, here, then let everything go.
    for (rx, ms, ds) in leftovers {
        drop((ms, ds));
        while let Ok((mut f, finish)) = rx.try_recv() {
            if finish {
                FLIP.with(|x| x.set(true));
                assert!(matches!(poll_dyn(f.as_mut()), Poll::Ready(Ok(()))));
                FLIP.with(|x| x.set(false));
            }
        }
    }
    let (mut admitted, mut ok, mut dropped) = (0, 0, 0);
    for l in manual
        .iter()
        .map(|b| b.metrics().lifetime)
        .chain(default.iter().map(|b| b.metrics().lifetime))
    {
        assert_eq!(l.admitted, l.successes + l.dropped, "{l:?}");
        admitted += l.admitted;
        ok += l.successes;
        dropped += l.dropped;
    }
    assert_eq!(admitted as usize, THREADS * CALLS);
    assert_eq!(ok as usize, THREADS * CALLS * 2 / 3);
    assert_eq!(dropped as usize, THREADS * CALLS / 3);
    // Other threads have exited: at most this thread's spares remain.
    let extra: usize = manual
        .iter()
        .map(|b| Arc::strong_count(b) - 1)
        .sum::<usize>()
        + default
            .iter()
            .map(|b| Arc::strong_count(b) - 1)
            .sum::<usize>();
    assert!(extra <= 16, "{extra} handles beyond the test's own");
}

#[test]
fn a_shadow_breakers_service_passes_every_request_through() {
    let b = Arc::new(
        CircuitBreaker::builder()
            .consecutive_failures(1)
            .shadow()
            .clock(ManualClock::new())
            .build()
            .unwrap(),
    );
    let calls = Arc::new(AtomicU32::new(0));
    let svc = CircuitBreakerLayer::new(b.clone())
        .classify(by_status)
        .layer(backend(&calls));
    assert_eq!(block_on(svc.clone().oneshot(503)).unwrap(), 503);
    assert_eq!(b.state(), State::Open);
    for _ in 0..3 {
        assert_eq!(block_on(svc.clone().oneshot(200)).unwrap(), 200);
    }
    assert_eq!(calls.load(Ordering::Relaxed), 4, "none was turned away");
    let lifetime = b.metrics().lifetime;
    assert_eq!((lifetime.would_reject, lifetime.rejected), (3, 0));
}

/// The keys (sorted) a `BackendLayer`'s registry holds after `requests`, each
/// with its admitted calls.
#[cfg(feature = "http")]
fn backend_keys(requests: impl IntoIterator<Item = http::Request<()>>) -> Vec<(String, u64)> {
    use cutout::{Registry, http::BackendLayer};
    let breakers = Arc::new(Registry::<String>::new(CircuitBreaker::builder()).unwrap());
    let svc = BackendLayer::new(breakers.clone()).layer(service_fn(|_: http::Request<()>| async {
        Ok::<_, std::convert::Infallible>(http::Response::new(()))
    }));
    for request in requests {
        block_on(svc.clone().oneshot(request)).unwrap();
    }
    let mut keys = Vec::new();
    breakers.for_each(|key, b| keys.push((key.clone(), b.metrics().lifetime.admitted)));
    keys.sort();
    keys
}

/// A GET of `uri`.
#[cfg(feature = "http")]
fn get(uri: &str) -> http::Request<()> {
    http::Request::get(uri).body(()).unwrap()
}

/// `BackendLayer` keys a backend by its host as DNS reads it, case-blind: a URI
/// or `Host` header that spells it in capitals reaches the same breaker, and the
/// key is written in lower case.
#[cfg(feature = "http")]
#[test]
fn the_backend_layer_keys_a_host_whatever_its_case() {
    let keys = backend_keys([
        get("http://Orders.Example:8080/a"),
        get("http://user@ORDERS.example:8080/b"),
        http::Request::get("/c")
            .header("host", "orders.EXAMPLE:8080")
            .body(())
            .unwrap(),
        get("http://orders.example:8080/d"),
    ]);
    assert_eq!(keys, [("orders.example:8080".to_string(), 4)]);
}

/// `BackendLayer` keys a backend as the reqwest middleware does: a port that
/// is its scheme's default is no part of the key (`http://h:80` is `h`, as
/// `http://h` is), another port is; a `Host` header, with no scheme to read,
/// keeps what it says.
#[cfg(feature = "http")]
#[test]
fn the_backend_layer_keys_a_default_port_as_no_port() {
    let keys = backend_keys([
        get("http://a:80/x"),
        get("http://A/y"),
        get("https://u@a:443/z"),
        get("https://a:80/w"),
        get("http://a:443/v"),
        http::Request::get("/u")
            .header("host", "a:80")
            .body(())
            .unwrap(),
    ]);
    let expected = [("a", 3), ("a:443", 1), ("a:80", 2)];
    assert_eq!(keys, expected.map(|(k, n)| (k.to_string(), n)));
}

/// However a URI writes a backend's port (empty, the scheme's default for
/// `ws` and `wss` too, with leading zeros), `BackendLayer` keys it as the
/// reqwest middleware does: one backend, one breaker. A port past 65535
/// (which reqwest refuses) is no other backend's: kept as written.
#[cfg(all(feature = "http", feature = "reqwest"))]
#[test]
fn the_backend_layer_keys_a_port_as_the_reqwest_middleware_does() {
    let uris = [
        "http://a:/x",
        "http://u@A:/x",
        "ws://a:80/x",
        "wss://a:443/x",
        "http://a:0080/x",
        "http://a:08080/x",
        "https://a:0/x",
        "http://[::1]:/x",
        "http://[::1]:08080/x",
        "http://[::1]/x",
    ];
    for uri in uris {
        let url = reqwest::Url::parse(uri).unwrap();
        let expected = (cutout::reqwest::host_key(&url).to_string(), 1);
        assert_eq!(backend_keys([get(uri)]), [expected], "{uri}");
    }
    assert_eq!(
        backend_keys([get("http://a:99999/x")]),
        [("a:99999".into(), 1)]
    );
}

/// A `BackendFuture` polled again after it completed is `Pending`, as the
/// layer's other futures are: its backend's future, done, is not polled again
/// (a `Ready` panics then), and the call counts once.
#[cfg(feature = "http")]
#[test]
fn a_backend_future_polled_after_it_completed_is_pending() {
    use cutout::{Registry, http::BackendLayer};
    use http::{Request, Response};
    let breakers = Arc::new(Registry::<String>::new(CircuitBreaker::builder()).unwrap());
    let mut svc = BackendLayer::new(breakers.clone()).layer(service_fn(|_: Request<()>| {
        std::future::ready(Ok::<_, std::convert::Infallible>(Response::new(())))
    }));
    let mut future = pin!(svc.call(Request::get("http://a/x").body(()).unwrap()));
    assert!(poll_once(future.as_mut()).is_ready());
    let again = catch_unwind(AssertUnwindSafe(|| poll_once(future.as_mut()).is_pending()));
    assert!(
        matches!(again, Ok(true)),
        "the backend's future was polled again"
    );
    assert_eq!(breakers.get("a").metrics().lifetime.successes, 1);
}
