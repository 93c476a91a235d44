//! A source that blocks or panics (a user's `Breakers`): the dashboard reads it
//! off the async workers, so the application beside it keeps answering, and a
//! control request gets an answer either way. The server runs on a runtime of
//! its own with two workers, beside a `/health` route; every wait is bounded.

mod common;

use common::{WAIT, get, request};
use cutout::{CircuitBreaker, State};
use cutout_dashboard::{Breakers, Source, Thresholds};
use std::net::SocketAddr;
use std::sync::{Arc, Condvar, Mutex};

/// A source whose reads wait while its gate is shut (for at most three waits:
/// a test that never opens it fails on its own waits first).
struct Gated {
    open: Mutex<bool>,
    opened: Condvar,
    db: CircuitBreaker,
}

impl Gated {
    fn new(open: bool) -> Arc<Gated> {
        Arc::new(Gated {
            open: Mutex::new(open),
            opened: Condvar::new(),
            db: CircuitBreaker::builder().build().unwrap(),
        })
    }

    fn set(&self, open: bool) {
        *self.open.lock().unwrap() = open;
        self.opened.notify_all();
    }
}

impl Breakers for Gated {
    fn for_each(&self, f: &mut dyn FnMut(&str, &CircuitBreaker, Thresholds)) {
        let open = self.open.lock().unwrap();
        let waited = self
            .opened
            .wait_timeout_while(open, WAIT * 3, |open| !*open);
        drop(waited.unwrap());
        f("db", &self.db, Thresholds::default());
    }
}

struct Panicky;

impl Breakers for Panicky {
    fn for_each(&self, _: &mut dyn FnMut(&str, &CircuitBreaker, Thresholds)) {
        // Unwinds without the panic hook (no backtrace printed: slow on a loaded
        // machine).
        std::panic::resume_unwind(Box::new("a source that fails, on purpose"));
    }
}

/// Serves `source` at /breakers beside /health on a server runtime of its own,
/// with two workers (the requests come from the test's runtime).
fn serve_apart(source: Source) -> SocketAddr {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let app = axum::Router::new()
                .route("/health", axum::routing::get(|| async { "ok" }))
                .nest("/breakers", cutout_dashboard::router(source));
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    rx.recv_timeout(WAIT).unwrap()
}

const SAME_ORIGIN: [(&str, &str); 1] = [("sec-fetch-site", "same-origin")];

/// Three first requests wait for a first sample that blocks: the two workers
/// stay free (`/health` answers: before, the first sample ran on a worker and
/// the others waited for it there), and the requests get the sample once it
/// comes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_sample_that_blocks_leaves_the_workers_free() {
    let source = Gated::new(false);
    let addr = serve_apart(Source::new().breakers(source.clone()));
    let waiting: Vec<_> = (0..3)
        .map(|_| tokio::spawn(async move { get(addr, "/breakers/api/snapshot").await }))
        .collect();
    tokio::task::yield_now().await;
    assert_eq!(get(addr, "/health").await.body, "ok");
    source.set(true);
    for reply in waiting {
        let page = reply.await.unwrap().json();
        assert_eq!(page["breakers"][0]["name"], "db");
    }
}

/// Control requests read the source off the workers too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controls_that_wait_for_the_source_leave_the_workers_free() {
    let source = Gated::new(true);
    let addr = serve_apart(Source::new().breakers(source.clone()).controls(true));
    assert_eq!(get(addr, "/breakers/api/snapshot").await.status, 200);
    source.db.force_open();
    source.set(false);
    let path = "/breakers/api/control?name=db&action=reset";
    let waiting: Vec<_> = (0..3)
        .map(|_| tokio::spawn(async move { request(addr, "POST", path, &SAME_ORIGIN).await }))
        .collect();
    tokio::task::yield_now().await;
    assert_eq!(get(addr, "/health").await.body, "ok");
    source.set(true);
    for reply in waiting {
        assert_eq!(reply.await.unwrap().status, 204);
    }
    assert_eq!(source.db.state(), State::Closed);
}

/// A source whose breaker is gone by the control's second read (removed
/// meanwhile): the control says it found none, rather than 204 with nothing done.
#[tokio::test]
async fn a_breaker_removed_during_a_control_is_not_found() {
    struct Leaving {
        reads: std::sync::atomic::AtomicU32,
        db: CircuitBreaker,
    }
    impl Breakers for Leaving {
        fn for_each(&self, f: &mut dyn FnMut(&str, &CircuitBreaker, Thresholds)) {
            // Relaxed: a count, read on its own.
            if self
                .reads
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                == 0
            {
                f("db", &self.db, Thresholds::default());
            }
        }
    }
    let leaving = Leaving {
        reads: Default::default(),
        db: CircuitBreaker::builder().build().unwrap(),
    };
    let app = cutout_dashboard::router(Source::new().breakers(Arc::new(leaving)).controls(true));
    let addr = common::serve(app).await;
    let path = "/api/control?name=db&action=reset";
    assert_eq!(request(addr, "POST", path, &SAME_ORIGIN).await.status, 404);
}

/// A source that panics answers a control request with a 500 that says so
/// (the connection was dropped unanswered).
#[tokio::test]
async fn a_control_over_a_source_that_panics_is_answered() {
    let app = cutout_dashboard::router(Source::new().breakers(Arc::new(Panicky)).controls(true));
    let addr = common::serve(app).await;
    let path = "/api/control?name=db&action=reset";
    let reply = request(addr, "POST", path, &SAME_ORIGIN).await;
    assert_eq!(reply.status, 500, "{}", reply.body);
    assert!(reply.body.contains("panicked"), "{}", reply.body);
}
