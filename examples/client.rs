//! The client side: an axum frontend that calls two backends through reqwest,
//! with one circuit breaker per backend (`cutout::reqwest::CircuitBreakerMiddleware`
//! over a `Registry` keyed by `host:port`), retries outside the breaker and
//! reqwest's timeout inside it.
//!
//! Run it with `cargo run --example client --features reqwest,http`. It serves the
//! frontend and two backends on ephemeral ports of 127.0.0.1, makes backend A sick
//! (500s) while B stays well, and prints what
//! the frontend answered and how many calls reached each backend: once A's breaker
//! opens, A gets no more calls, the frontend answers `503` with `Retry-After` at
//! once, and B's breaker stays closed. `tests/client.rs` drives the same servers
//! over loopback.
//!
//! With `--record PATH` (and the `replay` feature: `cargo run --example client
//! --features reqwest,http,replay -- --record PATH`) the middleware also records
//! each call a breaker admitted to `PATH`, keyed by backend: a trace that
//! `cutout-tune` replays (`tune/traces/client.csv` is one).

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing;
use cutout::reqwest::{CircuitBreakerMiddleware, rejected};
use cutout::{CircuitBreaker, Clock, ConfigError, Registry};
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};
use reqwest_retry::{RetryTransientMiddleware, policies::ExponentialBackoff};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

/// The switchable backend (`Mode`, `Backend`) and its handler, shared with
/// `examples/axum.rs`.
#[allow(dead_code)]
#[path = "axum.rs"]
mod flaky;

pub use flaky::{Backend, Mode};

/// Serves `router` on an ephemeral port of 127.0.0.1, in a task of its own.
pub async fn serve(router: Router) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, router).await });
    Ok(addr)
}

/// A backend's server: `GET /work` answers as `backend`'s mode says.
pub async fn spawn_backend(backend: Arc<Backend>) -> std::io::Result<SocketAddr> {
    serve(
        Router::new()
            .route("/work", routing::get(flaky::orders))
            .with_state(backend),
    )
    .await
}

/// The breakers, one per backend `host:port`: three consecutive failures open
/// one for 10 s.
pub fn breakers<C: Clock + Clone>(clock: C) -> Result<Arc<Registry<String, C>>, ConfigError> {
    let builder = CircuitBreaker::builder()
        .consecutive_failures(3)
        .open_duration(Duration::from_secs(10))
        .clock(clock);
    Ok(Arc::new(Registry::builder(builder).max_keys(64).build()?))
}

/// The frontend's HTTP client: retries outside the breaker (an open breaker ends
/// them), the breaker per backend, and reqwest's timeout inside it (a backend that
/// hangs before its response head is a failure; a body that stalls later is read
/// after the middleware returns, where no breaker sees it).
pub fn client<C>(breakers: Arc<Registry<String, C>>, timeout: Duration) -> ClientWithMiddleware
where
    C: Clock + Clone + Send + Sync + 'static,
{
    client_with(CircuitBreakerMiddleware::new(breakers), timeout)
}

/// [`client`] with `breakers`, a middleware set up by the caller (one that
/// records, for `--record`).
pub fn client_with<C>(
    breakers: CircuitBreakerMiddleware<C>,
    timeout: Duration,
) -> ClientWithMiddleware
where
    C: Clock + Clone + Send + Sync + 'static,
{
    let retry = ExponentialBackoff::builder()
        .retry_bounds(Duration::from_millis(10), Duration::from_millis(50))
        .build_with_max_retries(2);
    let client = reqwest::Client::builder()
        .timeout(timeout)
        .build()
        .expect("a client without TLS builds");
    ClientBuilder::new(client)
        .with(RetryTransientMiddleware::new_with_policy(retry))
        .with(breakers)
        .build()
}

/// What the frontend holds: its client and where the backends are.
#[derive(Clone, Debug)]
pub struct Frontend {
    /// The client, with the breakers.
    pub client: ClientWithMiddleware,
    /// Backend `a` and backend `b`.
    pub backends: [SocketAddr; 2],
}

/// `GET /orders/{a|b}`: calls that backend's `/work`. A rejection answers `503`
/// with `Retry-After` (whole seconds, rounded up) at once; a backend error `502`.
async fn orders(State(frontend): State<Frontend>, Path(name): Path<String>) -> Response {
    let addr = match name.as_str() {
        "a" => frontend.backends[0],
        "b" => frontend.backends[1],
        _ => return StatusCode::NOT_FOUND.into_response(),
    };
    match frontend
        .client
        .get(format!("http://{addr}/work"))
        .send()
        .await
    {
        // The body is read after the middleware returns, where no breaker sees
        // it: a body that breaks off is the frontend's 502, not a 200.
        Ok(response) if response.status().is_success() => match response.text().await {
            Ok(text) => (StatusCode::OK, text).into_response(),
            Err(_) => StatusCode::BAD_GATEWAY.into_response(),
        },
        Ok(_) => StatusCode::BAD_GATEWAY.into_response(),
        Err(e) => match rejected(&e).map(|r| r.retry_after_secs()) {
            Some(Some(secs)) => (
                StatusCode::SERVICE_UNAVAILABLE,
                [(header::RETRY_AFTER, secs.to_string())],
            )
                .into_response(),
            Some(None) => StatusCode::SERVICE_UNAVAILABLE.into_response(),
            None => StatusCode::BAD_GATEWAY.into_response(),
        },
    }
}

/// The frontend's router.
pub fn frontend(frontend: Frontend) -> Router {
    Router::new()
        .route("/orders/{name}", routing::get(orders))
        .with_state(frontend)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let breakers = breakers(cutout::DefaultClock::new())?;
    let middleware = CircuitBreakerMiddleware::new(breakers.clone());
    match std::env::args().skip(1).collect::<Vec<_>>().as_slice() {
        [] => demo(breakers, middleware).await,
        [flag, path] if flag == "--record" => record(breakers, middleware, path).await,
        _ => Err("usage: client [--record PATH]".into()),
    }
}

/// `--record PATH`: the demo, its middleware recording to `PATH`.
#[cfg(feature = "replay")]
async fn record(
    breakers: Arc<Registry<String>>,
    middleware: CircuitBreakerMiddleware,
    path: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    let recorder = cutout::replay::Recorder::to_file(path, 1024)?;
    demo(breakers, middleware.record(recorder.clone())).await?;
    recorder.flush()?;
    println!(
        "recorded {} calls to {path} ({} dropped)",
        recorder.written(),
        recorder.dropped()
    );
    Ok(())
}

#[cfg(not(feature = "replay"))]
async fn record(
    _: Arc<Registry<String>>,
    _: CircuitBreakerMiddleware,
    _: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    Err("--record needs the replay feature: --features reqwest,http,replay".into())
}

/// The script: A healthy, then failing until its breaker opens, B well
/// throughout, then A hung behind its open breaker.
async fn demo(
    breakers: Arc<Registry<String>>,
    middleware: CircuitBreakerMiddleware,
) -> Result<(), Box<dyn std::error::Error>> {
    let (a, b) = (Arc::new(Backend::default()), Arc::new(Backend::default()));
    let backends = [
        spawn_backend(a.clone()).await?,
        spawn_backend(b.clone()).await?,
    ];
    let client = client_with(middleware, Duration::from_millis(300));
    let addr = serve(frontend(Frontend { client, backends })).await?;
    let outside = reqwest::Client::new();
    let script = [
        (Mode::Healthy, "a", 1),
        (Mode::Failing, "a", 3), // three 500s (one request, two retries) open A's breaker
        (Mode::Failing, "b", 1), // B is well: its own breaker lets it through
        (Mode::Hung, "a", 2),    // A's breaker is open: 503 at once, A never called
    ];
    for (mode, name, requests) in script {
        a.set(mode);
        for _ in 0..requests {
            let response = outside
                .get(format!("http://{addr}/orders/{name}"))
                .send()
                .await?;
            let retry_after = response.headers().get(header::RETRY_AFTER).cloned();
            println!(
                "A {mode:?}, GET /orders/{name}: {}, Retry-After {retry_after:?}; calls reached A {}, B {}",
                response.status(),
                a.calls(),
                b.calls(),
            );
        }
    }
    for (name, addr) in ["a", "b"].into_iter().zip(backends) {
        println!(
            "breaker {name}: {:?}",
            breakers.get(&addr.to_string()).state()
        );
    }
    Ok(())
}
