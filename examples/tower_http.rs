//! An HTTP server (hyper 1) whose upstream sits behind a circuit breaker, through
//! cutout's tower layer: while the breaker is open a request never reaches the
//! upstream and gets `503 Service Unavailable` with a `Retry-After` header.
//!
//! Run it with `cargo run --example tower_http --features tower`. It serves on an
//! ephemeral port of 127.0.0.1, sends itself a few requests (three upstream 503s
//! trip the breaker) and prints what came back. `tests/tower.rs` runs the same code
//! with a `ManualClock`.
//!
//! It maps a rejection to its 503 by hand, with the `tower` feature alone; the
//! `http` feature's `cutout::http::HttpLayer` does that mapping for you (see
//! `examples/axum.rs`).

use cutout::{CircuitBreaker, CircuitBreakerLayer, Clock, Error, Outcome, Rejected};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Bytes, Incoming};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{self, HeaderValue};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tower::{Layer, ServiceExt};

pub type Body = Full<Bytes>;

/// The dependency behind the breaker. It answers by path: `/fail` is a 503 from the
/// upstream itself, `/missing` a 404, anything else a 200.
pub async fn upstream(req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    let status = match req.uri().path() {
        "/fail" => StatusCode::SERVICE_UNAVAILABLE,
        "/missing" => StatusCode::NOT_FOUND,
        _ => StatusCode::OK,
    };
    let mut response = Response::new(Full::new(Bytes::from_static(b"from upstream")));
    *response.status_mut() = status;
    Ok(response)
}

/// A 5xx from the upstream is a failure; anything else, a 404 included, says the
/// upstream is up.
pub fn classify(result: &Result<Response<Body>, Infallible>) -> Outcome {
    match result {
        Ok(response) if response.status().is_server_error() => Outcome::Failure,
        Ok(_) => Outcome::Success,
        Err(never) => match *never {},
    }
}

/// What a client gets when the breaker rejects its request: a 503, with
/// `Retry-After` in whole seconds (rounded up, so nobody comes back early, and at
/// least 1: a rejection with nothing left to wait, a ramp's or one answered just
/// as the cooldown ended, is no invitation to retry at once) unless the breaker
/// was forced open and only a reset will close it.
pub fn rejected_response(rejected: &Rejected) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from_static(b"circuit open")));
    *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    if let Some(seconds) = rejected.retry_after_secs() {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}

/// Serves `connections` connections from `listener`, each request going to the
/// upstream through `breaker`.
pub async fn serve<C: Clock + 'static>(
    listener: TcpListener,
    breaker: Arc<CircuitBreaker<C>>,
    connections: usize,
) -> std::io::Result<()> {
    let guarded = CircuitBreakerLayer::new(breaker)
        .classify(classify)
        .layer(tower::service_fn(upstream));
    for _ in 0..connections {
        let (stream, _) = listener.accept().await?;
        let guarded = guarded.clone();
        let handler = hyper::service::service_fn(move |req| {
            let guarded = guarded.clone();
            async move {
                Ok::<_, Infallible>(match guarded.oneshot(req).await {
                    Ok(response) => response,
                    Err(Error::Rejected(rejected)) => rejected_response(&rejected),
                    Err(Error::Inner(never)) => match never {},
                })
            }
        });
        tokio::spawn(async move {
            let io = TokioIo::new(stream);
            if let Err(e) = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, handler)
                .await
            {
                eprintln!("connection error: {e}");
            }
        });
    }
    Ok(())
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
) -> Result<(StatusCode, Option<String>, Bytes), Box<dyn std::error::Error>> {
    sender.ready().await?;
    let request = Request::get(path)
        .header(header::HOST, "127.0.0.1")
        .body(Empty::new())?;
    let response = sender.send_request(request).await?;
    let status = response.status();
    let retry_after = match response.headers().get(header::RETRY_AFTER) {
        Some(value) => Some(value.to_str()?.to_owned()),
        None => None,
    };
    let body = response.into_body().collect().await?.to_bytes();
    Ok((status, retry_after, body))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let breaker = Arc::new(
        CircuitBreaker::builder()
            .consecutive_failures(3)
            .open_duration(Duration::from_secs(30))
            .build()?,
    );
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let server = tokio::spawn(serve(listener, breaker.clone(), 1));
    let mut client = connect(addr).await?;
    for path in ["/ok", "/missing", "/fail", "/fail", "/fail", "/ok"] {
        let (status, retry_after, body) = get(&mut client, path).await?;
        println!(
            "GET {path:<8} -> {status}, Retry-After: {retry_after:?}, body {body:?}; breaker {:?}",
            breaker.state()
        );
    }
    drop(client);
    server.await??;
    Ok(())
}
