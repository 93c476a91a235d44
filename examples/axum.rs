//! An axum 0.8 server whose flaky backend route sits behind a circuit breaker, with
//! a timeout outside it: `cutout::http::HttpLayer` answers a rejection with `503
//! Service Unavailable` and `Retry-After`, passes the route's own responses
//! through, and needs no `HandleErrorLayer`.
//!
//! Run it with `cargo run --example axum --features http`. It serves on an
//! ephemeral port of 127.0.0.1 and sends itself requests while the backend is
//! healthy, failing, and hung, printing what came back. `tests/axum.rs` drives the
//! same server over loopback.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing;
use cutout::http::HttpLayer;
use cutout::{CircuitBreaker, Clock, ConfigError, Dropped};
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper::header;
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU32, Ordering};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tower_http::timeout::TimeoutLayer;

/// How the simulated backend behaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Mode {
    /// Answers `200 OK` at once.
    Healthy,
    /// Answers `500 Internal Server Error` at once.
    Failing,
    /// Never answers.
    Hung,
}

/// The flaky dependency behind `/api/orders`: switchable, and counting its calls.
#[derive(Debug, Default)]
pub struct Backend {
    mode: AtomicU8,
    calls: AtomicU32,
}

impl Backend {
    /// Switches the backend to `mode`.
    pub fn set(&self, mode: Mode) {
        self.mode.store(mode as u8, Ordering::Relaxed);
    }

    /// How many requests reached the backend.
    pub fn calls(&self) -> u32 {
        self.calls.load(Ordering::Relaxed)
    }
}

/// The route handler: the backend call itself (also `examples/client.rs`'s
/// backends).
pub async fn orders(State(backend): State<Arc<Backend>>) -> (StatusCode, &'static str) {
    backend.calls.fetch_add(1, Ordering::Relaxed);
    match backend.mode.load(Ordering::Relaxed) {
        m if m == Mode::Healthy as u8 => (StatusCode::OK, "orders"),
        m if m == Mode::Failing as u8 => (StatusCode::INTERNAL_SERVER_ERROR, "backend failed"),
        _ => std::future::pending().await, // hung: only the timeout ends it
    }
}

/// The breaker: three failures in a row trip it for 10 s. A 5xx is a failure, and
/// so is a request the timeout gave up on once it had run for half the timeout
/// (without `on_drop`, or the slow-call policy, a timeout outside the breaker
/// would count for nothing).
pub fn breaker<C: Clock>(clock: C, timeout: Duration) -> Result<CircuitBreaker<C>, ConfigError> {
    CircuitBreaker::builder()
        .consecutive_failures(3)
        .open_duration(Duration::from_secs(10))
        .on_drop(Dropped::FailureAfter(timeout / 2))
        .clock(clock)
        .build()
}

/// The app: `/api/orders` behind the breaker, the whole router behind a timeout
/// that answers `504 Gateway Timeout`.
pub fn app<C: Clock + 'static>(
    breaker: Arc<CircuitBreaker<C>>,
    backend: Arc<Backend>,
    timeout: Duration,
) -> Router {
    Router::new()
        .route("/api/orders", routing::get(orders))
        .route_layer(HttpLayer::new(breaker)) // the breaker, around the route
        .layer(TimeoutLayer::with_status_code(
            StatusCode::GATEWAY_TIMEOUT,
            timeout,
        ))
        .with_state(backend)
}

/// An HTTP/1 client connection to `addr`.
pub async fn connect(
    addr: SocketAddr,
) -> Result<SendRequest<Empty<Bytes>>, Box<dyn std::error::Error>> {
    let stream = TcpStream::connect(addr).await?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    Ok(sender)
}

/// `GET path`: the status, the `Retry-After` header if any, and the body.
pub async fn get(
    sender: &mut SendRequest<Empty<Bytes>>,
    path: &str,
) -> Result<(u16, Option<String>, Bytes), Box<dyn std::error::Error>> {
    sender.ready().await?;
    let request = hyper::Request::get(path)
        .header(header::HOST, "127.0.0.1")
        .body(Empty::new())?;
    let response = sender.send_request(request).await?;
    let status = response.status().as_u16();
    let retry_after = match response.headers().get(header::RETRY_AFTER) {
        Some(value) => Some(value.to_str()?.to_owned()),
        None => None,
    };
    let body = response.into_body().collect().await?.to_bytes();
    Ok((status, retry_after, body))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let timeout = Duration::from_millis(300);
    let breaker = Arc::new(breaker(cutout::DefaultClock::new(), timeout)?);
    let backend = Arc::new(Backend::default());
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let router = app(breaker.clone(), backend.clone(), timeout);
    let server = tokio::spawn(async move { axum::serve(listener, router).await });
    let mut client = connect(addr).await?;
    let script = [
        (Mode::Healthy, 1),
        (Mode::Failing, 4), // three 500s trip it; the fourth request gets a 503
        (Mode::Hung, 4),    // reset first: three 504s from the timeout trip it too
    ];
    for (mode, requests) in script {
        backend.set(mode);
        if mode == Mode::Hung {
            breaker.reset();
        }
        for _ in 0..requests {
            let (status, retry_after, body) = get(&mut client, "/api/orders").await?;
            println!(
                "backend {mode:?}: {status}, Retry-After {retry_after:?}, body {body:?}; breaker {:?}, backend called {} times",
                breaker.state(),
                backend.calls()
            );
        }
    }
    server.abort();
    Ok(())
}
