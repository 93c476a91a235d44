//! What a registry lookup and the reqwest middleware add to a call, for callgrind
//! and for a wall clock: `registry_cost <name> <calls>` makes `calls` calls of one
//! shape inside a `drive_*` function (never inlined), after one warm-up call;
//! `registry_cost time` times every shape.
//!
//! Shapes: `breaker` (a direct `CircuitBreaker::call`), `registry_call` and
//! `registry_call_siphash` (`Registry::call` on an 11-byte `String` key, with the
//! default hasher and with std's SipHash), `middleware_without` and
//! `middleware_with` (a `reqwest-middleware` client whose last middleware answers
//! at once, without and with `CircuitBreakerMiddleware` before it: their
//! difference is the middleware's own cost per request).
//!
//! Instructions per call, as `benches/instructions.sh` counts them:
//! ```text
//! cargo build --release --example registry_cost --features reqwest
//! for n in 0 100000; do valgrind --tool=callgrind --collect-bus=yes \
//!   --toggle-collect='*drive_*' --callgrind-out-file=cg.$n \
//!   target/release/examples/registry_cost registry_call $n; done
//! ```
//! then (Ir(100000) - Ir(0)) / 100000 from the two files' `totals:` lines, and Ge
//! (locked instructions) likewise.

use cutout::reqwest::CircuitBreakerMiddleware;
use cutout::{CircuitBreaker, Registry};
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware, Middleware, Next};
use std::future::Future;
use std::hash::RandomState;
use std::hint::black_box;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

/// An 11-byte key, as a host name often is.
const KEY: &str = "payments-v2";

/// The last middleware: answers `200` at once, sending nothing.
struct Answer;

#[async_trait::async_trait]
impl Middleware for Answer {
    async fn handle(
        &self,
        _: reqwest::Request,
        _: &mut http::Extensions,
        _: Next<'_>,
    ) -> reqwest_middleware::Result<reqwest::Response> {
        Ok(reqwest::Response::from(http::Response::new("")))
    }
}

fn poll_once<F: Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("the stub answers at once"),
    }
}

#[inline(never)]
fn drive_breaker(b: &CircuitBreaker, calls: u64) {
    for i in 0..calls {
        let _ = black_box(b.call(|| Ok::<_, ()>(black_box(i))));
    }
}

#[inline(never)]
fn drive_registry<S: std::hash::BuildHasher>(
    r: &Registry<String, cutout::DefaultClock, S>,
    key: &str,
    calls: u64,
) {
    for i in 0..calls {
        let _ = black_box(r.call(black_box(key), || Ok::<_, ()>(black_box(i))));
    }
}

#[inline(never)]
fn drive_client(client: &ClientWithMiddleware, url: &reqwest::Url, calls: u64) {
    for _ in 0..calls {
        let request = reqwest::Request::new(reqwest::Method::GET, url.clone());
        let response = poll_once(client.execute(request)).unwrap();
        black_box(response.status());
    }
}

fn client(with_breaker: bool) -> ClientWithMiddleware {
    let mut builder = ClientBuilder::new(reqwest::Client::new());
    if with_breaker {
        let registry = Arc::new(Registry::new(CircuitBreaker::builder()).unwrap());
        builder = builder.with(CircuitBreakerMiddleware::new(registry));
    }
    builder.with(Answer).build()
}

/// Runs `calls` calls of shape `name` (one warm-up call first).
fn run(name: &str, calls: u64) {
    let url = reqwest::Url::parse(&format!("http://{KEY}:8080/orders")).unwrap();
    match name {
        "breaker" => {
            let b = CircuitBreaker::builder().build().unwrap();
            drive_breaker(&b, 1);
            drive_breaker(&b, calls);
        }
        "registry_call" => {
            let r: Registry<String> = Registry::new(CircuitBreaker::builder()).unwrap();
            drive_registry(&r, KEY, 1);
            drive_registry(&r, KEY, calls);
        }
        "registry_call_siphash" => {
            let r = Registry::builder(CircuitBreaker::builder())
                .hasher(RandomState::new())
                .build()
                .unwrap();
            drive_registry(&r, KEY, 1);
            drive_registry(&r, KEY, calls);
        }
        "middleware_without" | "middleware_with" => {
            let client = client(name == "middleware_with");
            drive_client(&client, &url, 1);
            drive_client(&client, &url, calls);
        }
        _ => panic!("no shape {name}"),
    }
}

const SHAPES: [&str; 5] = [
    "breaker",
    "registry_call",
    "registry_call_siphash",
    "middleware_without",
    "middleware_with",
];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [time] if time == "time" => {
            for name in SHAPES {
                let calls = if name.starts_with("middleware") {
                    1_000_000
                } else {
                    20_000_000
                };
                let best = (0..5)
                    .map(|_| {
                        let start = Instant::now();
                        run(name, calls);
                        start.elapsed().as_secs_f64() * 1e9 / calls as f64
                    })
                    .fold(f64::INFINITY, f64::min);
                println!("{name}: {best:.1} ns/call (best of 5 runs of {calls})");
            }
        }
        [name, calls] => run(name, calls.parse().expect("calls: a number")),
        _ => {
            eprintln!(
                "usage: registry_cost <{}> <calls> | registry_cost time",
                SHAPES.join("|")
            );
            std::process::exit(2);
        }
    }
}
