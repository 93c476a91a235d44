//! The `reqwest` feature over loopback: `CircuitBreakerMiddleware` with
//! `reqwest-middleware` (keys, classification, rejections whose sources reach
//! `Rejected`, and `reqwest-retry` outside the breaker, stopped at once by an open
//! breaker); and the `http` feature's `BackendLayer` around hyper-util's client,
//! one breaker per backend authority. With the `replay` feature, the middleware's
//! recorder. Backends are `examples/client.rs`'s, served on 127.0.0.1; breakers
//! run on a `ManualClock`.

#[allow(dead_code)]
#[path = "../examples/client.rs"]
mod example;

use cutout::reqwest::{CircuitBreakerMiddleware, Rejection, rejected};
use cutout::{CircuitBreaker, Error, ManualClock, Registry, State};
use example::{Backend, Mode};
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};
use reqwest_retry::{RetryTransientMiddleware, policies::ExponentialBackoff};
use std::borrow::Cow;
use std::error::Error as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

const COOLDOWN: Duration = Duration::from_secs(10);

fn breakers(clock: &ManualClock, failures: u32) -> Arc<Registry<String, ManualClock>> {
    let builder = CircuitBreaker::builder()
        .consecutive_failures(failures)
        .open_duration(COOLDOWN)
        .clock(clock.clone());
    Arc::new(Registry::new(builder).unwrap())
}

/// A client with only the breaker middleware, and a generous timeout.
fn client(middleware: CircuitBreakerMiddleware<ManualClock>) -> ClientWithMiddleware {
    ClientBuilder::new(reqwest_client(Duration::from_secs(30)))
        .with(middleware)
        .build()
}

fn reqwest_client(timeout: Duration) -> reqwest::Client {
    reqwest::Client::builder().timeout(timeout).build().unwrap()
}

async fn backend(mode: Mode) -> (Arc<Backend>, SocketAddr) {
    let backend = Arc::new(Backend::default());
    backend.set(mode);
    let addr = example::spawn_backend(backend.clone()).await.unwrap();
    (backend, addr)
}

#[tokio::test]
async fn a_rejection_is_a_middleware_error_whose_sources_reach_rejected() {
    let clock = ManualClock::new();
    let registry = breakers(&clock, 2);
    let (sick, addr) = backend(Mode::Failing).await;
    let client = client(CircuitBreakerMiddleware::new(registry.clone()));
    let url = format!("http://{addr}/work");
    for _ in 0..2 {
        let response = client.get(&url).send().await.unwrap();
        assert_eq!(
            response.status(),
            500,
            "the backend's own answer, passed on"
        );
    }
    let key = addr.to_string(); // host:port
    assert_eq!(registry.get(&key).state(), State::Open);
    let error = client.get(&url).send().await.unwrap_err();
    assert_eq!(sick.calls(), 2, "never sent");
    // The chain: Middleware(anyhow(Rejection)) -> Rejected.
    let reqwest_middleware::Error::Middleware(inner) = &error else {
        panic!("not a middleware error: {error:?}");
    };
    let rejection = inner.downcast_ref::<Rejection>().expect("a Rejection");
    assert_eq!(rejection.key(), key);
    let via_source = error
        .source()
        .and_then(|s| s.downcast_ref::<cutout::Rejected>())
        .expect("source() is the Rejected");
    assert_eq!(via_source, rejection.rejected());
    assert_eq!(rejected(&error), Some(via_source));
    assert_eq!(via_source.retry_after(), Some(COOLDOWN));
    // After the cooldown, a healthy backend closes it again.
    sick.set(Mode::Healthy);
    clock.advance(COOLDOWN);
    assert_eq!(client.get(&url).send().await.unwrap().status(), 200);
    assert_eq!(registry.get(&key).state(), State::Closed);
}

#[tokio::test]
async fn a_timeout_is_a_failure_and_429_and_404_are_not() {
    let clock = ManualClock::new();
    let registry = breakers(&clock, 2);
    let (hung, addr) = backend(Mode::Hung).await;
    let client = ClientBuilder::new(reqwest_client(Duration::from_millis(300)))
        .with(CircuitBreakerMiddleware::new(registry.clone()))
        .build();
    let url = format!("http://{addr}/work");
    for _ in 0..2 {
        let error = client.get(&url).send().await.unwrap_err();
        assert!(error.is_timeout(), "{error:?}");
    }
    assert_eq!(registry.get(&addr.to_string()).state(), State::Open);
    assert!(rejected(&client.get(&url).send().await.unwrap_err()).is_some());
    assert_eq!(hung.calls(), 2);

    // 429 (ignored) and 404 (success) never open a breaker.
    let router = axum::Router::new()
        .route(
            "/busy",
            axum::routing::get(|| async { axum::http::StatusCode::TOO_MANY_REQUESTS }),
        )
        .fallback(|| async { axum::http::StatusCode::NOT_FOUND });
    let other = example::serve(router).await.unwrap();
    for path in ["busy", "missing", "busy", "missing", "busy"] {
        let status = client
            .get(format!("http://{other}/{path}"))
            .send()
            .await
            .unwrap()
            .status();
        assert!(status == 429 || status == 404, "{status}");
    }
    let m = registry.get(&other.to_string()).metrics();
    assert_eq!(
        (
            m.state,
            m.lifetime.ignored,
            m.lifetime.successes,
            m.lifetime.failures
        ),
        (State::Closed, 3, 2, 0)
    );
}

/// A request body that fails at once: the caller's own.
struct BrokenBody;

impl hyper::body::Body for BrokenBody {
    type Data = hyper::body::Bytes;
    type Error = std::io::Error;
    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        std::task::Poll::Ready(Some(Err(std::io::Error::other("the caller's body broke"))))
    }
}

/// reqwest reports a request body the caller gave that fails as it is sent as a
/// request error (the same kind as a reset): the table's "a body error", ignored.
/// It opened the backend's breaker for every caller of the host.
#[tokio::test]
async fn the_callers_own_broken_request_body_is_not_a_backend_failure() {
    let clock = ManualClock::new();
    let registry = breakers(&clock, 1);
    let (hung, addr) = backend(Mode::Hung).await;
    let error = client(CircuitBreakerMiddleware::new(registry.clone()))
        .post(format!("http://{addr}/upload"))
        .body(reqwest::Body::wrap(BrokenBody))
        .send()
        .await
        .unwrap_err();
    assert!(error.is_request() && !error.is_timeout(), "{error:?}");
    let m = registry.get(&addr.to_string()).metrics();
    assert_eq!(
        (m.state, m.lifetime.failures, m.lifetime.ignored),
        (State::Closed, 0, 1),
        "{error:?}"
    );
    drop(hung);
}

#[tokio::test]
async fn a_key_function_gives_each_route_its_own_breaker() {
    let clock = ManualClock::new();
    let registry = breakers(&clock, 1);
    let (sick, addr) = backend(Mode::Failing).await;
    let by_path = CircuitBreakerMiddleware::new(registry.clone())
        .key(|request: &reqwest::Request| Cow::Borrowed(request.url().path()));
    let client = client(by_path);
    assert_eq!(
        client
            .get(format!("http://{addr}/work"))
            .send()
            .await
            .unwrap()
            .status(),
        500
    );
    assert_eq!(registry.get("/work").state(), State::Open);
    // Another route of the same host: its own breaker, let through (a 404 here).
    let other = client
        .get(format!("http://{addr}/elsewhere"))
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), 404);
    assert_eq!(registry.get("/elsewhere").state(), State::Closed);
    assert_eq!(sick.calls(), 1);
}

/// `reqwest-retry` outside the breaker: the attempts count in the breaker, and
/// once it opens, the next attempt's rejection is fatal to the retry loop: the
/// call ends at once with the rejection, long before its retries are spent.
#[tokio::test]
async fn retries_outside_the_breaker_stop_at_once_when_it_opens() {
    let clock = ManualClock::new();
    let registry = breakers(&clock, 2);
    let (sick, addr) = backend(Mode::Failing).await;
    let retry = ExponentialBackoff::builder()
        .retry_bounds(Duration::from_millis(1), Duration::from_millis(5))
        .build_with_max_retries(8);
    let client = ClientBuilder::new(reqwest_client(Duration::from_secs(30)))
        .with(RetryTransientMiddleware::new_with_policy(retry))
        .with(CircuitBreakerMiddleware::new(registry.clone()))
        .build();
    let error = client
        .get(format!("http://{addr}/work"))
        .send()
        .await
        .unwrap_err();
    let rejection = rejected(&error).expect("ended by the rejection");
    assert_eq!(rejection.state(), State::Open);
    assert_eq!(
        sick.calls(),
        2,
        "two attempts, not nine: the open breaker stopped them"
    );
    // And while it stays open, a call is never sent at all.
    assert!(
        rejected(
            &client
                .get(format!("http://{addr}/work"))
                .send()
                .await
                .unwrap_err()
        )
        .is_some()
    );
    assert_eq!(sick.calls(), 2);
}

/// `BackendLayer` around hyper-util's client: one breaker per authority, a sick
/// backend A rejected without being called, backend B untouched.
#[tokio::test]
async fn the_backend_layer_keys_hyper_utils_client_by_authority() {
    use cutout::http::BackendLayer;
    use http_body_util::Empty;
    use hyper::body::Bytes;
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::TokioExecutor;
    use tower::{Layer, ServiceExt};

    let clock = ManualClock::new();
    let registry = breakers(&clock, 3);
    let (a, a_addr) = backend(Mode::Failing).await;
    let (b, b_addr) = backend(Mode::Healthy).await;
    let hyper_client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let client = BackendLayer::new(registry.clone()).layer(hyper_client);
    let get = |addr: SocketAddr| {
        let request = http::Request::get(format!("http://{addr}/work"))
            .body(Empty::<Bytes>::new())
            .unwrap();
        client.clone().oneshot(request)
    };
    for _ in 0..3 {
        let response = get(a_addr).await.unwrap();
        assert_eq!(response.status(), 500);
    }
    for _ in 0..3 {
        match get(a_addr).await {
            Err(Error::Rejected(r)) => assert_eq!(r.retry_after(), Some(COOLDOWN)),
            other => panic!("expected a rejection, got {other:?}"),
        }
        assert_eq!(get(b_addr).await.unwrap().status(), 200);
    }
    assert_eq!((a.calls(), b.calls()), (3, 3));
    assert_eq!(registry.get(&b_addr.to_string()).state(), State::Closed);
    // Recovery after the cooldown.
    a.set(Mode::Healthy);
    clock.advance(COOLDOWN);
    assert_eq!(get(a_addr).await.unwrap().status(), 200);
    assert_eq!(registry.get(&a_addr.to_string()).state(), State::Closed);
}

#[cfg(feature = "replay")]
#[tokio::test]
async fn the_middleware_records_each_sent_request_by_key_and_outcome() {
    use cutout::Outcome::{Failure, Ignored, Success};
    use cutout::replay::{Recorder, Trace};

    let path = std::env::temp_dir().join(format!("cutout-reqwest-{}.csv", std::process::id()));
    let recorder = Recorder::to_file(&path, 64).unwrap();
    let clock = ManualClock::new();
    let registry = breakers(&clock, 2);
    let (_, well) = backend(Mode::Healthy).await;
    let (sick, sick_addr) = backend(Mode::Failing).await;
    let busy = axum::Router::new().fallback(|| async { axum::http::StatusCode::TOO_MANY_REQUESTS });
    let busy = example::serve(busy).await.unwrap();
    let client = client(CircuitBreakerMiddleware::new(registry).record(recorder.clone()));
    for addr in [well, busy, sick_addr, sick_addr] {
        client
            .get(format!("http://{addr}/work"))
            .send()
            .await
            .unwrap();
    }
    // Two failures opened the sick backend's breaker: this request is never
    // sent, and is no row.
    let error = client
        .get(format!("http://{sick_addr}/work"))
        .send()
        .await
        .unwrap_err();
    assert!(rejected(&error).is_some());
    assert_eq!(sick.calls(), 2);

    recorder.flush().unwrap();
    let trace = Trace::from_csv(std::fs::File::open(&path).unwrap()).unwrap();
    let _ = std::fs::remove_file(&path);
    let rows: Vec<_> = trace
        .calls()
        .iter()
        .map(|c| (c.outcome, c.key.clone().unwrap_or_default()))
        .collect();
    let (well, busy, sick) = (well.to_string(), busy.to_string(), sick_addr.to_string());
    assert_eq!(
        rows,
        [
            (Success, well),
            (Ignored, busy),
            (Failure, sick.clone()),
            (Failure, sick)
        ]
    );
    assert_eq!(recorder.dropped(), 0);
}
