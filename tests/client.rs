//! `examples/client.rs` over loopback: an axum frontend calling two backends
//! through reqwest with one breaker per backend. Backend A turns sick (500s, then
//! hung past the client's timeout): once its breaker opens, A receives no more
//! calls and callers get a rejection carrying `retry_after`; the breaker recovers
//! after the cooldown; backend B's breaker is never touched. The breakers run on
//! a `ManualClock` (the cooldown passes without a wait); real time is only the
//! loopback's and the client's timeout. Every loop is bounded; nothing is timed.

#[allow(dead_code)]
#[path = "../examples/client.rs"]
mod example;

use cutout::reqwest::rejected;
use cutout::{ManualClock, State};
use example::{Backend, Frontend, Mode};
use reqwest::StatusCode;
use std::sync::Arc;
use std::time::Duration;

/// The frontend client's timeout: generous, so a healthy call on a busy machine
/// never reaches it; a hung backend costs it per attempt.
const TIMEOUT: Duration = Duration::from_secs(2);
/// The example's cooldown.
const COOLDOWN: Duration = Duration::from_secs(10);
/// The most requests a loop makes before the test fails instead.
const BOUND: usize = 10;

#[tokio::test]
async fn a_sick_backend_opens_its_own_breaker_stops_receiving_calls_and_recovers() {
    let clock = ManualClock::new();
    let breakers = example::breakers(clock.clone()).unwrap();
    let (a, b) = (Arc::new(Backend::default()), Arc::new(Backend::default()));
    let backends = [
        example::spawn_backend(a.clone()).await.unwrap(),
        example::spawn_backend(b.clone()).await.unwrap(),
    ];
    let client = example::client(breakers.clone(), TIMEOUT);
    let frontend = Frontend {
        client: client.clone(),
        backends,
    };
    let addr = example::serve(example::frontend(frontend)).await.unwrap();
    let outside = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let get = async |name: &str| {
        let response = outside
            .get(format!("http://{addr}/orders/{name}"))
            .send()
            .await
            .unwrap();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .map(|v| v.to_str().unwrap().to_owned());
        (response.status(), retry_after)
    };
    let breaker_of = |i: usize| breakers.get(&backends[i].to_string());

    // Healthy: both answer, both breakers closed.
    assert_eq!(get("a").await, (StatusCode::OK, None));
    assert_eq!(get("b").await, (StatusCode::OK, None));

    for sickness in [Mode::Failing, Mode::Hung] {
        a.set(sickness);
        // Requests until A's breaker opens (each one up to three attempts).
        let mut tries = 0;
        while breaker_of(0).state() != State::Open {
            tries += 1;
            assert!(tries <= BOUND, "{sickness:?}: A's breaker never opened");
            let (status, _) = get("a").await;
            assert_eq!(
                status,
                StatusCode::BAD_GATEWAY,
                "{sickness:?}: A's own failure"
            );
        }
        let reached = a.calls();
        // Open: answered at once, A never called again, the cooldown in the answer.
        for _ in 0..5 {
            assert_eq!(
                get("a").await,
                (StatusCode::SERVICE_UNAVAILABLE, Some("10".to_owned())),
                "{sickness:?}"
            );
        }
        assert_eq!(
            a.calls(),
            reached,
            "{sickness:?}: no call reached A while open"
        );
        // The rejection itself, through the middleware client: `retry_after`
        // reached by walking the error's sources.
        let error = client
            .get(format!("http://{}/work", backends[0]))
            .send()
            .await
            .unwrap_err();
        let rejection = rejected(&error).expect("a rejection");
        assert_eq!(rejection.retry_after(), Some(COOLDOWN));
        assert_eq!(a.calls(), reached);
        // B is well, and its breaker never saw A's failures.
        assert_eq!(get("b").await, (StatusCode::OK, None));
        let b_metrics = breaker_of(1).metrics();
        assert_eq!(
            (b_metrics.state, b_metrics.lifetime.failures),
            (State::Closed, 0)
        );
        // The cooldown passes; A is well again: the probe closes its breaker.
        a.set(Mode::Healthy);
        clock.advance(COOLDOWN);
        assert_eq!(get("a").await, (StatusCode::OK, None));
        assert_eq!(breaker_of(0).state(), State::Closed, "{sickness:?}");
        assert_eq!(a.calls(), reached + 1, "{sickness:?}: the probe");
    }
    assert_eq!(breakers.len(), 2, "one breaker per backend host:port");
}

/// A backend whose response head says 200 and whose body breaks off (a
/// `content-length` of 100, 5 bytes sent, the connection closed): the breaker
/// saw a success (it classifies the head), and the frontend answers 502, not a
/// 200 with an empty body.
#[tokio::test]
async fn a_body_that_breaks_off_is_the_frontends_502() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let broken = listener.local_addr().unwrap();
    // Serves whatever connections come (left blocked in `accept` at the end).
    std::thread::spawn(move || {
        for mut socket in listener.incoming().map_while(Result::ok) {
            let mut request = [0u8; 4096];
            let _ = socket.read(&mut request);
            let head = "HTTP/1.1 200 OK\r\ncontent-length: 100\r\nconnection: close\r\n\r\nhello";
            let _ = socket.write_all(head.as_bytes());
        }
    });
    let breakers = example::breakers(ManualClock::new()).unwrap();
    let well = example::spawn_backend(Arc::new(Backend::default()))
        .await
        .unwrap();
    let frontend = Frontend {
        client: example::client(breakers.clone(), TIMEOUT),
        backends: [broken, well],
    };
    let addr = example::serve(example::frontend(frontend)).await.unwrap();
    let response = reqwest::get(format!("http://{addr}/orders/a"))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_GATEWAY);
    let breaker = breakers.get(&broken.to_string());
    assert_eq!(breaker.state(), State::Closed, "the head was a success");
}
