//! The playground's simulated dependency and its two lanes of callers: one
//! through a real breaker, one with only a timeout. Each lane makes a fixed
//! number of calls a second, so the load stays bounded whatever the settings.

use axum::Router;
use axum::extract::State as Axum;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use cutout::CircuitBreaker;
use cutout_dashboard::{Breakers, Source, Thresholds};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Calls per second in each lane.
pub const RATE: u64 = 40;
/// The longest latency or timeout the sliders allow.
pub const MAX_MS: u64 = 5_000;
/// A key that would be a script if a page built HTML from it.
pub const HOSTILE: &str = "<script>alert(1)</script>";
/// Points of lane history (10 s).
const HISTORY: usize = 40;

/// The dependency and the breaker's settings, as the page's sliders and fields
/// set them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Settings {
    pub failure: f64,
    pub latency_ms: u64,
    pub timeout_ms: u64,
    pub failure_threshold: f64,
    pub minimum_calls: u32,
    pub open_ms: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            failure: 0.05,
            latency_ms: 50,
            timeout_ms: 1_000,
            failure_threshold: 0.5,
            minimum_calls: 20,
            open_ms: 3_000,
        }
    }
}

/// The name of the downstream breaker's what-if candidate.
pub const CANDIDATE: &str = "half the threshold";

/// The dashboard source's listener, shared by every rebuilt breaker.
type Listener = Arc<dyn Fn(&cutout::Transition) + Send + Sync>;

fn build(s: &Settings, listener: &Listener) -> Result<CircuitBreaker, cutout::ConfigError> {
    let listener = listener.clone();
    let breaker = |threshold: f64| {
        CircuitBreaker::builder()
            .window(Duration::from_secs(5), 10)
            .failure_rate(threshold, s.minimum_calls)
            .open_duration(Duration::from_millis(s.open_ms))
    };
    // The dashboard shows what a breaker tripping at half the threshold would
    // have done with the same calls.
    breaker(s.failure_threshold)
        .name("downstream")
        .candidate(CANDIDATE, breaker(s.failure_threshold / 2.0))
        // Each transition reaches the dashboard at once.
        .on_transition(move |t| listener(t))
        .build()
}

/// One lane's counters since the last tick, and its history.
#[derive(Default)]
struct Lane {
    ok: AtomicU64,
    failed: AtomicU64,
    rejected: AtomicU64,
    latency_us: AtomicU64,
    history: Mutex<VecDeque<[f64; 4]>>,
}

impl Lane {
    fn finish(&self, counter: &AtomicU64, took: Duration) {
        // Relaxed: plain statistics, read once a tick.
        counter.fetch_add(1, Ordering::Relaxed);
        // Relaxed: as above; the tick may split a call's count from its latency.
        self.latency_us
            .fetch_add(took.as_micros() as u64, Ordering::Relaxed);
    }

    /// Moves the counters into one history point: [ok/s, failed/s, rejected/s,
    /// mean latency ms].
    fn tick(&self, secs: f64) {
        // Relaxed: plain statistics, each swapped on its own.
        let ok = self.ok.swap(0, Ordering::Relaxed) as f64;
        // Relaxed: as above.
        let failed = self.failed.swap(0, Ordering::Relaxed) as f64;
        // Relaxed: as above.
        let rejected = self.rejected.swap(0, Ordering::Relaxed) as f64;
        // Relaxed: as above.
        let latency = self.latency_us.swap(0, Ordering::Relaxed) as f64;
        let n = ok + failed + rejected;
        let mean = if n > 0.0 { latency / n / 1000.0 } else { 0.0 };
        let mut history = self.history.lock().unwrap();
        if history.len() == HISTORY {
            history.pop_front();
        }
        history.push_back([ok / secs, failed / secs, rejected / secs, mean]);
    }
}

/// The simulation: settings, the breaker (rebuilt when its settings change),
/// and the two lanes.
pub struct Playground {
    settings: Mutex<Settings>,
    breaker: Mutex<Arc<CircuitBreaker>>,
    /// The dashboard's source, until `app` takes it, and its listener.
    source: Mutex<Option<Source>>,
    listener: Listener,
    lanes: [Lane; 2],
    seed: AtomicU64,
}

impl Breakers for Playground {
    fn for_each(&self, f: &mut dyn FnMut(&str, &CircuitBreaker, Thresholds)) {
        let breaker = self.breaker.lock().unwrap().clone();
        let threshold = self.settings.lock().unwrap().failure_threshold;
        let thresholds = Thresholds {
            failure_rate: Some(threshold),
            slow_call_rate: None,
        };
        f("downstream", &breaker, thresholds);
    }
}

impl Playground {
    pub fn new() -> Arc<Playground> {
        let settings = Settings::default();
        let source = Source::new();
        let listener: Listener = Arc::new(source.listener());
        let breaker = build(&settings, &listener).expect("the defaults are valid");
        Arc::new(Playground {
            breaker: Mutex::new(Arc::new(breaker)),
            settings: Mutex::new(settings),
            source: Mutex::new(Some(source)),
            listener,
            lanes: [Lane::default(), Lane::default()],
            seed: AtomicU64::new(0x9E37_79B9_7F4A_7C15),
        })
    }

    /// A number in [0, 1): xorshift, good enough for a simulation.
    fn chance(&self) -> f64 {
        // Relaxed: any interleaving gives a usable sequence.
        let mut x = self
            .seed
            .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed);
        x ^= x >> 30;
        x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x ^= x >> 27;
        (x >> 11) as f64 / (1u64 << 53) as f64
    }

    /// One call to the dependency, bounded by the caller's timeout: whether it
    /// succeeded.
    async fn dependency(&self, s: Settings) -> bool {
        let jitter = 0.8 + 0.4 * self.chance();
        let took = Duration::from_millis((s.latency_ms as f64 * jitter) as u64);
        let timeout = Duration::from_millis(s.timeout_ms);
        if took >= timeout {
            tokio::time::sleep(timeout).await;
            return false;
        }
        tokio::time::sleep(took).await;
        self.chance() >= s.failure
    }

    async fn call(self: Arc<Self>, lane: usize) {
        let s = *self.settings.lock().unwrap();
        let start = Instant::now();
        let l = &self.lanes[lane];
        if lane == 1 {
            let ok = self.dependency(s).await;
            return l.finish(if ok { &l.ok } else { &l.failed }, start.elapsed());
        }
        let breaker = self.breaker.lock().unwrap().clone();
        let Ok(permit) = breaker.try_acquire_owned() else {
            return l.finish(&l.rejected, start.elapsed());
        };
        if self.dependency(s).await {
            permit.success();
            l.finish(&l.ok, start.elapsed());
        } else {
            permit.failure();
            l.finish(&l.failed, start.elapsed());
        }
    }

    /// Starts the two lanes' callers and the ticker; they run until the process ends.
    pub fn start(self: &Arc<Self>) {
        for lane in 0..2 {
            let me = self.clone();
            tokio::spawn(async move {
                let mut every = tokio::time::interval(Duration::from_micros(1_000_000 / RATE));
                every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
                loop {
                    every.tick().await;
                    tokio::spawn(me.clone().call(lane));
                }
            });
        }
        let me = self.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_millis(250));
            let mut last = Instant::now();
            loop {
                every.tick().await;
                let secs = last.elapsed().as_secs_f64().max(0.001);
                last = Instant::now();
                for lane in &me.lanes {
                    lane.tick(secs);
                }
            }
        });
    }

    fn json(&self) -> String {
        let s = *self.settings.lock().unwrap();
        let state = self.breaker.lock().unwrap().state();
        let lanes: Vec<_> = self
            .lanes
            .iter()
            .map(|l| {
                l.history
                    .lock()
                    .unwrap()
                    .iter()
                    .copied()
                    .collect::<Vec<_>>()
            })
            .collect();
        serde_json::json!({
            "state": state.as_str(),
            "rate": RATE,
            "settings": {
                "failure": s.failure, "latency_ms": s.latency_ms, "timeout_ms": s.timeout_ms,
                "failure_threshold": s.failure_threshold, "minimum_calls": s.minimum_calls,
                "open_ms": s.open_ms,
            },
            "lanes": lanes,
        })
        .to_string()
    }

    /// Applies the fields present in `query`; rebuilds the breaker when one of
    /// its own settings changed.
    fn apply(&self, query: &str) -> Result<(), String> {
        let mut s = *self.settings.lock().unwrap();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let bad = || format!("{k}: cannot read {v:?}");
            let num = v.parse::<f64>().map_err(|_| bad())?;
            if !num.is_finite() || num < 0.0 {
                return Err(bad());
            }
            let ms = (num as u64).clamp(0, MAX_MS);
            match k {
                "failure" => s.failure = num.min(1.0),
                "latency_ms" => s.latency_ms = ms,
                "timeout_ms" => s.timeout_ms = ms.max(1),
                "failure_threshold" => s.failure_threshold = num,
                "minimum_calls" => s.minimum_calls = num.min(10_000.0) as u32,
                "open_ms" => s.open_ms = (num as u64).clamp(1, 600_000),
                _ => return Err(format!("{k}: no such setting")),
            }
        }
        let old = *self.settings.lock().unwrap();
        let rebuild = (s.failure_threshold, s.minimum_calls, s.open_ms)
            != (old.failure_threshold, old.minimum_calls, old.open_ms);
        if rebuild {
            let breaker = build(&s, &self.listener).map_err(|e| e.to_string())?;
            *self.breaker.lock().unwrap() = Arc::new(breaker);
        }
        *self.settings.lock().unwrap() = s;
        Ok(())
    }
}

const PAGE: &str = include_str!("page.html");
const SCRIPT: &str = include_str!("page.js");

/// The playground's routes, with the dashboard (controls on) at `/dashboard`.
pub fn app(playground: Arc<Playground>) -> Router {
    let idle = Arc::new(CircuitBreaker::builder().build().expect("default settings"));
    let source = playground.source.lock().unwrap().take();
    let source = source
        .unwrap_or_default()
        .breakers(playground.clone())
        .breaker(HOSTILE, idle)
        .controls(true);
    Router::new()
        .route(
            "/",
            get(|| async { ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], PAGE) }),
        )
        .route(
            "/page.js",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
                    SCRIPT,
                )
            }),
        )
        .route(
            "/api/lanes",
            get(|Axum(p): Axum<Arc<Playground>>| async move {
                ([(header::CONTENT_TYPE, "application/json")], p.json())
            }),
        )
        .route("/api/settings", post(settings))
        .with_state(playground)
        .nest("/dashboard", cutout_dashboard::router(source))
}

async fn settings(Axum(p): Axum<Arc<Playground>>, headers: HeaderMap, uri: Uri) -> Response {
    if headers
        .get("sec-fetch-site")
        .is_some_and(|v| v != "same-origin")
    {
        return (StatusCode::FORBIDDEN, "cross-origin request refused\n").into_response();
    }
    match p.apply(uri.query().unwrap_or("")) {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => (StatusCode::BAD_REQUEST, e).into_response(),
    }
}
