//! The `http` feature in axum 0.8: `examples/axum.rs` served on 127.0.0.1 and driven
//! by a real HTTP client (503 + Retry-After once tripped, the backend untouched
//! while open, recovery after the cooldown, a timeout outside the breaker tripping
//! it too); and `HttpService`'s pass-through and classification rules.

#[allow(dead_code)]
#[path = "../examples/axum.rs"]
mod example;

mod common;

use common::trips_after;
use cutout::http::{HttpLayer, HttpService};
use cutout::{CircuitBreaker, Clock, ManualClock, Outcome, Rejected, State};
use example::{Backend, Mode};
use http::{Request, Response, StatusCode};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tower::{Layer, ServiceExt, service_fn};

/// How long the example's timeout waits for the hung backend (real time).
const TIMEOUT: Duration = Duration::from_millis(200);
/// The example's cooldown.
const COOLDOWN: Duration = Duration::from_secs(10);

/// Real time plus what the test skips on a `ManualClock`: the breaker sees the
/// timeout's real wait (so a request the timeout gave up on is old enough to be a
/// failure), and a cooldown passes without anyone waiting for it.
#[derive(Clone, Debug)]
struct Skippable {
    start: Instant,
    skipped: ManualClock,
}

impl Clock for Skippable {
    fn now(&self) -> u64 {
        let real = u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        real.saturating_add(self.skipped.now())
    }
}

/// A 503 with no body and a `Retry-After` of the cooldown left, in whole seconds
/// rounded up: at least what the breaker, read after the response, has left
/// (time only moves on), and at most the whole cooldown. Real time passes
/// between the trip and the response, so the exact figure is not fixed.
fn assert_rejected_for_the_cooldown_left<C: Clock>(
    breaker: &CircuitBreaker<C>,
    (status, retry_after, body): (u16, Option<String>, String),
) {
    assert_eq!((status, body.as_str()), (503, ""));
    let seconds: u64 = retry_after.expect("a Retry-After").parse().unwrap();
    let left = breaker
        .metrics()
        .retry_after
        .expect("Open, with a deadline");
    let least = left.as_secs() + u64::from(left.subsec_nanos() > 0);
    assert!(
        (least..=COOLDOWN.as_secs()).contains(&seconds),
        "Retry-After {seconds} with {left:?} left"
    );
}

#[tokio::test]
async fn the_axum_example_trips_answers_503_and_recovers_over_loopback() {
    let skipped = ManualClock::new();
    let clock = Skippable {
        start: Instant::now(),
        skipped: skipped.clone(),
    };
    let breaker = Arc::new(example::breaker(clock, TIMEOUT).unwrap());
    let backend = Arc::new(Backend::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = example::app(breaker.clone(), backend.clone(), TIMEOUT);
    let server = tokio::spawn(async move { axum::serve(listener, router).await });

    let exchange = async {
        let mut client = example::connect(addr).await.unwrap();
        let mut get = async || {
            let (status, retry_after, body) =
                example::get(&mut client, "/api/orders").await.unwrap();
            (
                status,
                retry_after,
                String::from_utf8(body.to_vec()).unwrap(),
            )
        };

        assert_eq!(get().await, (200, None, "orders".into()));

        // The backend's own 500s: failures, passed through as they are.
        backend.set(Mode::Failing);
        for _ in 0..3 {
            assert_eq!(get().await, (500, None, "backend failed".into()));
        }
        assert_eq!(breaker.state(), State::Open);
        for _ in 0..5 {
            let response = get().await;
            assert_rejected_for_the_cooldown_left(&breaker, response);
        }
        assert_eq!(backend.calls(), 4, "not called while open");

        // The cooldown passes (skipped): the next request is a probe, and it heals.
        backend.set(Mode::Healthy);
        skipped.advance(COOLDOWN);
        assert_eq!(get().await, (200, None, "orders".into()));
        assert_eq!(breaker.state(), State::Closed);

        // A hung backend: the timeout outside the breaker answers 504 and drops the
        // request, which had run past `FailureAfter(TIMEOUT / 2)`: a failure.
        backend.set(Mode::Hung);
        for _ in 0..3 {
            let started = Instant::now();
            assert_eq!(get().await.0, 504);
            assert!(started.elapsed() >= TIMEOUT);
        }
        assert_eq!(
            breaker.state(),
            State::Open,
            "the timeout outside tripped it"
        );
        assert_rejected_for_the_cooldown_left(&breaker, get().await);
        assert_eq!(backend.calls(), 8, "not called while open");

        // Forced open has no deadline: no Retry-After.
        breaker.force_open();
        assert_eq!(get().await, (503, None, String::new()));
        assert_eq!(backend.calls(), 8);
    };
    // A bound, not a sleep: the exchange takes three timeouts and milliseconds.
    tokio::time::timeout(Duration::from_secs(20), exchange)
        .await
        .expect("the loopback exchange finished");
    server.abort();

    let l = breaker.metrics().lifetime;
    assert_eq!((l.admitted, l.rejected), (8, 7));
    // The three timed-out requests tripped it as failures: in `failures` (with
    // the three 500s) and in `dropped`.
    assert_eq!((l.successes, l.failures, l.dropped), (2, 6, 3));
}

fn breaker(failures: u32) -> Arc<CircuitBreaker<ManualClock>> {
    Arc::new(
        trips_after(failures, Duration::from_millis(1500))
            .clock(ManualClock::new())
            .build()
            .unwrap(),
    )
}

fn status(code: u16) -> Response<String> {
    let mut response = Response::new(format!("status {code}"));
    *response.status_mut() = StatusCode::from_u16(code).unwrap();
    response
}

#[tokio::test]
async fn inner_errors_pass_through_unchanged_and_count_as_failures() {
    let b = breaker(2);
    let failing = service_fn(|_: Request<()>| async {
        Err::<Response<String>, _>(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "reset by peer",
        ))
    });
    let service = HttpService::new(failing, b.clone());
    for _ in 0..2 {
        let err: std::io::Error = service.clone().oneshot(Request::new(())).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::ConnectionReset);
        assert_eq!(err.to_string(), "reset by peer");
    }
    assert_eq!(b.state(), State::Open);
    let response = service.oneshot(Request::new(())).await.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(response.headers()["retry-after"], "2", "1.5 s, rounded up");
    let rejected = response.extensions().get::<Rejected>().unwrap();
    assert_eq!(rejected.state(), State::Open);
}

#[tokio::test]
async fn a_5xx_fails_anything_else_succeeds_and_a_classifier_can_say_otherwise() {
    let b = breaker(2);
    let calls = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let counted = calls.clone();
    let backend = service_fn(move |req: Request<u16>| {
        counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        async move { Ok::<_, Infallible>(status(*req.body())) }
    });
    let service = HttpLayer::new(b.clone()).layer(backend.clone());
    for code in [404, 502, 429, 503] {
        let response = service.clone().oneshot(Request::new(code)).await.unwrap();
        assert_eq!(response.status(), code, "the backend's own response");
        assert_eq!(response.body(), &format!("status {code}"));
    }
    assert_eq!(b.state(), State::Closed, "a 429 is a success by default");
    let response = service.clone().oneshot(Request::new(500)).await.unwrap();
    assert_eq!(response.status(), 500);
    assert_eq!(b.state(), State::Open);
    let response = service.oneshot(Request::new(200)).await.unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(calls.load(std::sync::atomic::Ordering::Relaxed), 5);

    // A classifier that counts 429 as a failure and ignores 404.
    let b = breaker(2);
    let service = HttpLayer::new(b.clone())
        .classify(|r: &Result<Response<String>, Infallible>| match r {
            Ok(res) if res.status() == 404 => Outcome::Ignored,
            Ok(res) if res.status() == 429 || res.status().is_server_error() => Outcome::Failure,
            _ => Outcome::Success,
        })
        .layer(backend);
    for code in [429, 404, 429] {
        let _ = service.clone().oneshot(Request::new(code)).await.unwrap();
    }
    assert_eq!(
        b.state(),
        State::Open,
        "two 429s in a row; the 404 in between ignored"
    );
}
