#![cfg(all(feature = "tower", feature = "http"))]
//! Model-based test of outcome accounting through the tower layers: random
//! sequences of requests through `CircuitBreakerLayer`, `http::HttpLayer` and a
//! `FallbackLayer` over a `CircuitBreakerLayer`, on a `ManualClock` breaker with
//! random policies (every one of them on in some cases).
//!
//! Each request's inner service answers `Ok`, an `Err`, a 2xx/4xx/5xx response,
//! stays `Pending` for a few polls, or panics (in `call` or in its future); the
//! classifier itself panics for one status. Response futures are polled to
//! completion, dropped before their first poll, dropped mid-flight, polled again
//! after completion, or moved to another thread and finished (or dropped) there;
//! services and layers are cloned and dropped; `poll_ready` is called with or
//! without a following `call`; the clock steps through cooldowns and half-open
//! timeouts; the breaker is forced open, disabled and reset.
//!
//! A reference count of what each request should count as, per the docs (success,
//! failure, ignored, dropped, rejected, slow; stale when the generation moved on
//! between admission and outcome), is compared with `metrics().lifetime` exactly
//! after every step, with `admitted = successes + failures + ignored + stale +
//! dropped + in flight`. Rejections are checked against the docs' HTTP mapping
//! (503, `Retry-After` in whole seconds rounded up and at least 1, none when forced
//! open, the `Rejected` in the extensions) and against `metrics().retry_after` /
//! `state` at the time of the rejection. The breaker's strong count stays within
//! the live holds plus this thread's (at most eight) spares, and when every layer,
//! service and future is gone the breaker is freed (no handle of the test's own;
//! unless the last of them went on another thread, which the docs allow to leave
//! this thread's spares behind) or back to the test's one handle once the calling
//! thread exited. Calls are also checked against the admission the docs imply
//! from a `metrics()` snapshot taken just before (Closed/Disabled admit,
//! ForcedOpen rejects, Open admits a probe once `retry_after` is zero, a call whose
//! `poll_ready` the breaker answered (Open inside its cooldown, or forced open)
//! is rejected, retrying at once if the breaker stopped rejecting since, HalfOpen
//! admits while a slot is free within its timeout), and a rejection's
//! `retry_after` against its documented bound. One run uses the default clock
//! (its spares sit in the other per-thread list) with no duration in reach.

mod common;

use common::poll_once;
use cutout::http::HttpLayer;
use cutout::{
    CircuitBreaker, CircuitBreakerLayer, Clock, DefaultClock, Dropped, Error, FallbackLayer,
    Lifetime, ManualClock, Outcome, Rejected, State, fallback_fn,
};
use http::{Response, StatusCode, header};
use proptest::prelude::*;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::{Arc, Mutex, Once, Weak};
use std::task::{Context, Poll};
use std::time::Duration;
use tower::{Layer, Service};

/// The clocks a run can use: a `ManualClock` (time moves only when the run says
/// so) or the default clock (time stands still as far as a run can tell: its
/// cases keep clear of every duration).
trait TestClock: Clock + Clone + Send + Sync + 'static {
    const MANUAL: bool;
    fn advance_by(&self, by: Duration);
    fn nanos(&self) -> u64;
}

impl TestClock for ManualClock {
    const MANUAL: bool = true;
    fn advance_by(&self, by: Duration) {
        self.advance(by);
    }
    fn nanos(&self) -> u64 {
        u64::try_from(self.elapsed().as_nanos()).unwrap()
    }
}

impl TestClock for DefaultClock {
    const MANUAL: bool = false;
    fn advance_by(&self, _: Duration) {}
    fn nanos(&self) -> u64 {
        self.now()
    }
}

/// Every panic this test provokes carries this marker (the hook keeps them quiet).
const MARK: &str = "cutout-tower-model-panic";
/// The status whose classification panics (tower and fallback stacks only).
const CLASSIFIER_PANICS: u16 = 599;
/// What the fallback answers a rejection with (unless the breaker is forced open).
const FALLBACK_STATUS: u16 = 299;

fn quiet_expected_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let text = payload_text(info.payload());
            if !text.contains(MARK) {
                previous(info);
            }
        }));
    });
}

fn payload_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        String::from("<non-string panic>")
    }
}

// ---------------------------------------------------------------------------
// The inner service.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reply {
    Status(u16),
    Err,
    PanicInCall,
    PanicInPoll,
}

#[derive(Clone, Copy, Debug)]
struct Req {
    id: u64,
    reply: Reply,
    /// Polls that answer `Pending` before the reply.
    pending: u8,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BackendErr {
    Backend,
    Fallback,
}

/// Answers what each request asks for; logs the ids it was called with.
struct Backend<R> {
    log: Arc<Mutex<Vec<u64>>>,
    make: fn(u16) -> R,
}

impl<R> Clone for Backend<R> {
    fn clone(&self) -> Self {
        Backend {
            log: self.log.clone(),
            make: self.make,
        }
    }
}

struct BackendFut<R> {
    pending: u8,
    reply: Reply,
    make: fn(u16) -> R,
    done: bool,
}

impl<R> Future for BackendFut<R> {
    type Output = Result<R, BackendErr>;
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        assert!(
            !this.done,
            "the backend's future was polled after it completed"
        );
        if this.pending > 0 {
            this.pending -= 1;
            return Poll::Pending;
        }
        this.done = true;
        match this.reply {
            Reply::Status(s) => Poll::Ready(Ok((this.make)(s))),
            Reply::Err => Poll::Ready(Err(BackendErr::Backend)),
            Reply::PanicInPoll => panic!("{MARK}: backend future"),
            Reply::PanicInCall => unreachable!("call panicked"),
        }
    }
}

impl<R> Service<Req> for Backend<R> {
    type Response = R;
    type Error = BackendErr;
    type Future = BackendFut<R>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BackendErr>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, req: Req) -> BackendFut<R> {
        self.log.lock().unwrap().push(req.id);
        if req.reply == Reply::PanicInCall {
            panic!("{MARK}: backend call");
        }
        BackendFut {
            pending: req.pending,
            reply: req.reply,
            make: self.make,
            done: false,
        }
    }
}

fn status_u16(s: u16) -> u16 {
    s
}

fn status_response(s: u16) -> Response<String> {
    let mut r = Response::new(String::from("backend"));
    *r.status_mut() = StatusCode::from_u16(s).unwrap();
    r
}

type Cls = fn(&Result<u16, BackendErr>) -> Outcome;

/// The tower stacks' classifier: 5xx and `Err` fail, 4xx is ignored, the rest
/// succeed; 599 panics.
fn classify(r: &Result<u16, BackendErr>) -> Outcome {
    match r {
        Ok(s) if *s == CLASSIFIER_PANICS => panic!("{MARK}: classifier"),
        Ok(s) if *s >= 500 => Outcome::Failure,
        Ok(s) if *s >= 400 => Outcome::Ignored,
        Ok(_) => Outcome::Success,
        Err(_) => Outcome::Failure,
    }
}

type FbFut = std::future::Ready<Result<u16, BackendErr>>;
/// The fallback layer the model stacks over the breaker's.
type Fallback = FallbackLayer<cutout::FallbackFn<fn(Rejected) -> FbFut>>;

/// The fallback: an answer, or an error while forced open (nothing to serve).
fn fallback(r: Rejected) -> FbFut {
    std::future::ready(match r.state() {
        State::ForcedOpen => Err(BackendErr::Fallback),
        _ => Ok(FALLBACK_STATUS),
    })
}

// ---------------------------------------------------------------------------
// The stacks, behind one object-safe face.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stack {
    Tower,
    Http,
    Fallback,
}

/// What a response future resolved to, whatever the stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Obs {
    /// The backend's response, passed through.
    Inner(u16),
    /// The backend's error, passed through.
    InnerErr,
    /// A rejection (tower: `Error::Rejected`; http: the 503 response's).
    Rejected(Rejected),
    /// The fallback's answer.
    FallbackOk,
    /// The fallback's error.
    FallbackErr,
}

type BoxFut = Pin<Box<dyn Future<Output = Obs> + Send>>;

/// Polls once with a no-op waker.
fn poll1(f: &mut BoxFut) -> Poll<Obs> {
    poll_once(Pin::new(f))
}

struct MapFut<F: Future> {
    fut: Pin<Box<F>>,
    map: fn(F::Output) -> Obs,
}

impl<F: Future> Future for MapFut<F> {
    type Output = Obs;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Obs> {
        let map = self.map;
        self.fut.as_mut().poll(cx).map(map)
    }
}

trait Svc {
    fn ready(&mut self) -> Poll<bool>;
    fn call(&mut self, req: Req) -> BoxFut;
    fn clone_box(&self) -> Box<dyn Svc>;
    /// The model's note: the state of the breaker whose rejection answered this
    /// service's last readiness (Open inside its cooldown, or forced open), until
    /// its next call.
    fn readied_by(&mut self) -> &mut Option<State>;
}

struct Wrapped<S: Service<Req>> {
    svc: S,
    map: fn(Result<S::Response, S::Error>) -> Obs,
    readied_by: Option<State>,
}

impl<S> Svc for Wrapped<S>
where
    S: Service<Req> + Clone + 'static,
    S::Future: Send + 'static,
{
    fn ready(&mut self) -> Poll<bool> {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        self.svc.poll_ready(&mut cx).map(|r| r.is_ok())
    }
    fn call(&mut self, req: Req) -> BoxFut {
        Box::pin(MapFut {
            fut: Box::pin(self.svc.call(req)),
            map: self.map,
        })
    }
    fn clone_box(&self) -> Box<dyn Svc> {
        Box::new(Wrapped {
            svc: self.svc.clone(),
            map: self.map,
            readied_by: None, // a clone is not ready
        })
    }
    fn readied_by(&mut self) -> &mut Option<State> {
        &mut self.readied_by
    }
}

fn map_tower(r: Result<u16, Error<BackendErr>>) -> Obs {
    match r {
        Ok(s) => Obs::Inner(s),
        Err(Error::Inner(_)) => Obs::InnerErr,
        Err(Error::Rejected(r)) => Obs::Rejected(r),
    }
}

/// `Retry-After` as `http.rs` documents it: whole seconds, rounded up, at least 1.
fn documented_retry_after(after: Duration) -> u64 {
    let whole = after.as_secs() + u64::from(after.subsec_nanos() > 0);
    whole.max(1)
}

fn map_http(r: Result<Response<String>, BackendErr>) -> Obs {
    match r {
        Err(_) => Obs::InnerErr,
        Ok(response) => match response.extensions().get::<Rejected>() {
            None => {
                assert_eq!(response.body(), "backend", "a backend response was changed");
                Obs::Inner(response.status().as_u16())
            }
            Some(rejected) => {
                assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
                assert!(response.body().is_empty(), "a rejection's body is empty");
                let header = response.headers().get(header::RETRY_AFTER).map(|v| {
                    v.to_str()
                        .expect("ascii")
                        .parse::<u64>()
                        .expect("whole seconds")
                });
                let expected = rejected.retry_after().map(documented_retry_after);
                assert_eq!(
                    header, expected,
                    "Retry-After of {rejected:?} (docs: whole seconds rounded up, at least 1, none when it has no retry time)"
                );
                // Forced open has no retry time, but for a call whose readiness
                // it answered and which it no longer rejects (reset or disabled
                // since): retry at once (`Rejected::retry_after`'s exception).
                if rejected.state() == State::ForcedOpen {
                    assert!(
                        matches!(rejected.retry_after(), None | Some(Duration::ZERO)),
                        "forced open retries only at once, or never: {rejected:?}"
                    );
                }
                Obs::Rejected(*rejected)
            }
        },
    }
}

fn map_fallback(r: Result<u16, BackendErr>) -> Obs {
    match r {
        Ok(FALLBACK_STATUS) => Obs::FallbackOk,
        Ok(s) => Obs::Inner(s),
        Err(BackendErr::Backend) => Obs::InnerErr,
        Err(BackendErr::Fallback) => Obs::FallbackErr,
    }
}

trait LayerObj {
    fn make(&self) -> Box<dyn Svc>;
    fn clone_box(&self) -> Box<dyn LayerObj>;
}

struct TowerL<C: TestClock> {
    layer: CircuitBreakerLayer<C, Cls>,
    backend: Backend<u16>,
}
impl<C: TestClock> LayerObj for TowerL<C> {
    fn make(&self) -> Box<dyn Svc> {
        Box::new(Wrapped {
            svc: self.layer.layer(self.backend.clone()),
            map: map_tower,
            readied_by: None,
        })
    }
    fn clone_box(&self) -> Box<dyn LayerObj> {
        Box::new(TowerL {
            layer: self.layer.clone(),
            backend: self.backend.clone(),
        })
    }
}

struct HttpL<C: TestClock> {
    layer: HttpLayer<C>,
    backend: Backend<Response<String>>,
}
impl<C: TestClock> LayerObj for HttpL<C> {
    fn make(&self) -> Box<dyn Svc> {
        Box::new(Wrapped {
            svc: self.layer.layer(self.backend.clone()),
            map: map_http,
            readied_by: None,
        })
    }
    fn clone_box(&self) -> Box<dyn LayerObj> {
        Box::new(HttpL {
            layer: self.layer.clone(),
            backend: self.backend.clone(),
        })
    }
}

struct FallbackL<C: TestClock> {
    fallback: Fallback,
    layer: CircuitBreakerLayer<C, Cls>,
    backend: Backend<u16>,
}
impl<C: TestClock> LayerObj for FallbackL<C> {
    fn make(&self) -> Box<dyn Svc> {
        Box::new(Wrapped {
            svc: self.fallback.layer(self.layer.layer(self.backend.clone())),
            map: map_fallback,
            readied_by: None,
        })
    }
    fn clone_box(&self) -> Box<dyn LayerObj> {
        Box::new(FallbackL {
            fallback: self.fallback.clone(),
            layer: self.layer.clone(),
            backend: self.backend.clone(),
        })
    }
}

fn new_layer<C: TestClock>(
    stack: Stack,
    breaker: Arc<CircuitBreaker<C>>,
    log: &Arc<Mutex<Vec<u64>>>,
) -> Box<dyn LayerObj> {
    match stack {
        Stack::Tower => Box::new(TowerL {
            layer: CircuitBreakerLayer::new(breaker).classify(classify as Cls),
            backend: Backend {
                log: log.clone(),
                make: status_u16,
            },
        }),
        Stack::Http => Box::new(HttpL {
            layer: HttpLayer::new(breaker),
            backend: Backend {
                log: log.clone(),
                make: status_response,
            },
        }),
        Stack::Fallback => Box::new(FallbackL {
            fallback: FallbackLayer::new(fallback_fn(fallback as fn(Rejected) -> FbFut)),
            layer: CircuitBreakerLayer::new(breaker).classify(classify as Cls),
            backend: Backend {
                log: log.clone(),
                make: status_u16,
            },
        }),
    }
}

// ---------------------------------------------------------------------------
// Configuration and operations.

#[derive(Clone, Debug)]
struct Config {
    consecutive: Option<u32>,
    /// (buckets, failure rate, minimum calls)
    rate: Option<(u32, f64, u32)>,
    /// (threshold ms, rate)
    slow: Option<(u64, f64)>,
    open_ms: u64,
    multiplier: f64,
    max_open_ms: Option<u64>,
    jitter: f64,
    probes: u32,
    half_open_timeout_ms: u64,
    on_drop: Dropped,
    ramp_ms: Option<u64>,
}

impl Config {
    fn build<C: TestClock>(&self, clock: &C) -> CircuitBreaker<C> {
        let mut b = CircuitBreaker::builder()
            .open_duration(Duration::from_millis(self.open_ms))
            .backoff_multiplier(self.multiplier)
            .jitter(self.jitter)
            .half_open_probes(self.probes)
            .half_open_timeout(Duration::from_millis(self.half_open_timeout_ms))
            .on_drop(self.on_drop);
        if let Some(n) = self.consecutive {
            b = b.consecutive_failures(n);
        }
        if self.rate.is_some() || self.slow.is_some() {
            let buckets = self.rate.map_or(4, |r| r.0);
            b = b.window(Duration::from_secs(4), buckets);
        }
        if let Some((_, rate, min)) = self.rate {
            b = b.failure_rate(rate, min);
        }
        if let Some((ms, rate)) = self.slow {
            b = b.slow_calls(Duration::from_millis(ms), rate);
            if self.rate.is_none() {
                b = b.minimum_calls(3);
            }
        }
        if let Some(ms) = self.max_open_ms {
            b = b.max_open_duration(Duration::from_millis(ms.max(self.open_ms)));
        }
        if let Some(ms) = self.ramp_ms {
            b = b.ramp_up(Duration::from_millis(ms));
        }
        b.clock(clock.clone())
            .build()
            .expect("a valid configuration")
    }

    fn slow_nanos(&self) -> Option<u64> {
        self.slow.map(|(ms, _)| ms * 1_000_000)
    }
}

fn config() -> impl Strategy<Value = Config> {
    (
        (
            proptest::option::of(1u32..4),
            proptest::option::of((
                1u32..5,
                prop_oneof![Just(0.25), Just(0.5), Just(1.0)],
                1u32..5,
            )),
            proptest::option::of((
                prop_oneof![Just(50u64), Just(300), Just(1500)],
                prop_oneof![Just(0.3), Just(1.0)],
            )),
            prop_oneof![Just(100u64), Just(1000), Just(2500)],
            prop_oneof![Just(1.0f64), Just(2.0)],
            proptest::option::of(prop_oneof![Just(1500u64), Just(4000)]),
        ),
        (
            prop_oneof![Just(0.0f64), Just(0.5)],
            1u32..4,
            prop_oneof![Just(700u64), Just(5000)],
            prop_oneof![
                Just(Dropped::Ignored),
                Just(Dropped::Failure),
                Just(Dropped::FailureAfter(Duration::from_millis(200)))
            ],
            proptest::option::of(prop_oneof![Just(300u64), Just(2000)]),
        ),
    )
        .prop_map(
            |(
                (consecutive, rate, slow, open_ms, multiplier, max_open_ms),
                (jitter, probes, half_open_timeout_ms, on_drop, ramp_ms),
            )| Config {
                consecutive,
                rate,
                slow,
                open_ms,
                multiplier,
                max_open_ms,
                jitter,
                probes,
                half_open_timeout_ms,
                on_drop,
                ramp_ms,
            },
        )
}

/// For the default clock: no duration a case could reach (a minute's cooldown
/// and half-open timeout, no slow calls, no timed drops), so only calls and
/// manual control move the breaker.
fn timeless_config() -> impl Strategy<Value = Config> {
    config().prop_map(|mut c| {
        c.slow = None;
        c.open_ms = 60_000;
        c.max_open_ms = None;
        c.half_open_timeout_ms = 60_000;
        if let Dropped::FailureAfter(_) = c.on_drop {
            c.on_drop = Dropped::Failure;
        }
        c
    })
}

/// Every policy on.
fn full_config() -> impl Strategy<Value = Config> {
    config().prop_map(|mut c| {
        c.consecutive.get_or_insert(2);
        c.rate.get_or_insert((3, 0.5, 2));
        c.slow.get_or_insert((300, 0.3));
        c.max_open_ms.get_or_insert(4000);
        c.ramp_ms.get_or_insert(300);
        if c.on_drop == Dropped::Ignored {
            c.on_drop = Dropped::FailureAfter(Duration::from_millis(200));
        }
        c
    })
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Call {
        svc: usize,
        reply: Reply,
        pending: u8,
        ready_first: bool,
    },
    PollReady {
        svc: usize,
    },
    /// Polls a live future `times` times (a completed one: once more).
    Poll {
        flight: usize,
        times: u8,
    },
    /// Drops a future (before its first poll, mid-flight or after completion).
    DropFlight {
        flight: usize,
    },
    /// Moves a future to another thread, polls it there up to `polls` times,
    /// then drops it there if it is still pending.
    OnThread {
        flight: usize,
        polls: u8,
    },
    CloneService {
        svc: usize,
    },
    DropService {
        svc: usize,
    },
    NewService {
        layer: usize,
    },
    CloneLayer {
        layer: usize,
    },
    DropLayer {
        layer: usize,
    },
    Advance {
        ms: u64,
    },
    ForceOpen,
    Disable,
    Reset,
}

fn reply() -> impl Strategy<Value = Reply> {
    prop_oneof![
        12 => prop_oneof![
            4 => Just(200u16), 1 => Just(204), 1 => Just(404), 1 => Just(429),
            2 => Just(500), 1 => Just(503), 1 => Just(CLASSIFIER_PANICS)
        ]
        .prop_map(Reply::Status),
        4 => Just(Reply::Err),
        1 => Just(Reply::PanicInCall),
        1 => Just(Reply::PanicInPoll),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let idx = 0usize..8;
    prop_oneof![
        14 => (idx.clone(), reply(), prop_oneof![3 => Just(0u8), 1 => 1u8..4], any::<bool>())
            .prop_map(|(svc, reply, pending, ready_first)| Op::Call { svc, reply, pending, ready_first }),
        2 => idx.clone().prop_map(|svc| Op::PollReady { svc }),
        16 => (idx.clone(), 1u8..4).prop_map(|(flight, times)| Op::Poll { flight, times }),
        2 => idx.clone().prop_map(|flight| Op::DropFlight { flight }),
        2 => (idx.clone(), 0u8..5).prop_map(|(flight, polls)| Op::OnThread { flight, polls }),
        2 => idx.clone().prop_map(|svc| Op::CloneService { svc }),
        2 => idx.clone().prop_map(|svc| Op::DropService { svc }),
        1 => idx.clone().prop_map(|layer| Op::NewService { layer }),
        1 => idx.clone().prop_map(|layer| Op::CloneLayer { layer }),
        1 => idx.clone().prop_map(|layer| Op::DropLayer { layer }),
        6 => prop_oneof![
            // Exactly a threshold, cooldown or timeout the configs use, and the
            // millisecond either side of one.
            3 => prop::sample::select(vec![50u64, 100, 200, 300, 700, 1000, 1500, 2500, 5000])
                .prop_flat_map(|ms| prop_oneof![Just(ms), Just(ms - 1), Just(ms + 1)]),
            1 => 0u64..60,
            1 => 100u64..400,
            1 => 900u64..3000,
            1 => 4000u64..9000,
        ]
        .prop_map(|ms| Op::Advance { ms }),
        1 => prop_oneof![1 => Just(Op::ForceOpen), 1 => Just(Op::Disable), 3 => Just(Op::Reset)],
    ]
}

// ---------------------------------------------------------------------------
// The run.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Not yet resolved (an admitted call in flight, or a rejection not polled).
    Live,
    /// Resolved; kept to be polled again.
    Done,
}

/// When a call was admitted: its generation and the clock, in nanoseconds.
#[derive(Clone, Copy, Debug)]
struct Ticket {
    generation: u32,
    at: u64,
}

struct Flight {
    fut: BoxFut,
    req: Req,
    admitted: bool,
    /// The generation and clock at admission.
    ticket: Ticket,
    /// `metrics()` state and retry_after right after a rejection.
    rejected_as: Option<(State, Option<Duration>)>,
    phase: Phase,
}

struct World<C: TestClock> {
    stack: Stack,
    cfg: Config,
    clock: C,
    /// The breaker: a handle of the test's own (`Ok`), or none (`Err`).
    handle: Result<Arc<CircuitBreaker<C>>, Weak<CircuitBreaker<C>>>,
    log: Arc<Mutex<Vec<u64>>>,
    layers: Vec<Box<dyn LayerObj>>,
    services: Vec<Box<dyn Svc>>,
    flights: Vec<Flight>,
    next_id: u64,
    expect: Lifetime,
    /// Of the dropped calls, those counted as failures too.
    dropped_failures: u64,
    generation0: u32,
    /// Handles held outside the run.
    extra: usize,
    /// Whether the last hold given back went on another thread.
    last_hold_elsewhere: bool,
    trace: Vec<String>,
}

impl<C: TestClock> World<C> {
    fn breaker(&self) -> Arc<CircuitBreaker<C>> {
        match &self.handle {
            Ok(b) => b.clone(),
            Err(w) => w
                .upgrade()
                .expect("the breaker is alive while anything holds it"),
        }
    }

    fn generation(&self) -> u32 {
        self.breaker().metrics().generation
    }

    /// The outcome the stack's classifier gives `reply` (`None`: it panics).
    fn outcome_of(&self, reply: Reply) -> Option<Outcome> {
        match (self.stack, reply) {
            (_, Reply::Err) => Some(Outcome::Failure),
            (Stack::Http, Reply::Status(s)) => Some(if s >= 500 {
                Outcome::Failure
            } else {
                Outcome::Success
            }),
            (_, Reply::Status(s)) => {
                let r = Ok(s);
                if s == CLASSIFIER_PANICS {
                    None
                } else {
                    Some(classify(&r))
                }
            }
            (_, Reply::PanicInCall | Reply::PanicInPoll) => None,
        }
    }

    /// Whether polling this admitted flight to its end panics.
    fn ends_in_panic(&self, f: &Flight) -> bool {
        f.admitted
            && match f.req.reply {
                Reply::PanicInPoll => true,
                Reply::Status(CLASSIFIER_PANICS) => self.stack != Stack::Http,
                _ => false,
            }
    }

    /// Checks a resolved flight's output against what it should be.
    fn check_output(&self, f: &Flight, obs: Obs) {
        if f.admitted {
            let want = match f.req.reply {
                Reply::Status(s) => Obs::Inner(s),
                Reply::Err => Obs::InnerErr,
                _ => unreachable!("a panicking call resolved"),
            };
            assert_eq!(obs, want, "an admitted call's answer");
            return;
        }
        let (state, retry_after) = f.rejected_as.expect("a rejection");
        match (self.stack, obs) {
            (Stack::Tower | Stack::Http, Obs::Rejected(r)) => {
                assert_eq!(r.state(), state, "the rejection's state against metrics()");
                if C::MANUAL {
                    assert_eq!(
                        r.retry_after(),
                        retry_after,
                        "the rejection's retry_after against metrics() at that time"
                    );
                } else {
                    // metrics() was read a moment after the rejection.
                    assert_eq!(r.retry_after().is_some(), retry_after.is_some());
                }
            }
            (Stack::Fallback, Obs::FallbackErr) => assert_eq!(state, State::ForcedOpen),
            (Stack::Fallback, Obs::FallbackOk) => assert_ne!(state, State::ForcedOpen),
            (_, other) => panic!("a rejected call resolved to {other:?}"),
        }
    }

    /// Whether the breaker rejects at once, as `metrics()` says: Open inside its
    /// cooldown, or forced open (what a service's readiness answers without its
    /// inner service).
    fn rejects(m: &cutout::Metrics) -> bool {
        match m.state {
            State::ForcedOpen => true,
            State::Open => m.retry_after != Some(Duration::ZERO),
            _ => false,
        }
    }

    /// Readies service `i` (always ready: the backend is, and a rejecting
    /// breaker answers for it), noting whether the breaker answered.
    fn ready(&mut self, i: usize) {
        let rejects = Self::rejects(&self.breaker().metrics());
        let state = self.breaker().metrics().state;
        assert_eq!(self.services[i].ready(), Poll::Ready(true));
        *self.services[i].readied_by() = rejects.then_some(state);
    }

    /// Whether the next call is admitted, as the docs say from a metrics snapshot
    /// (`None`: not decided by it here, e.g. a recovering ramp's share).
    fn predict_admission(&self, m: &cutout::Metrics) -> Option<bool> {
        let timeout = Duration::from_millis(self.cfg.half_open_timeout_ms);
        match m.state {
            State::Closed | State::Disabled => Some(true),
            State::ForcedOpen => Some(false),
            // After the cooldown the next call is a probe.
            State::Open => Some(m.retry_after == Some(Duration::ZERO)),
            // A free slot (retry_after zero) admits a probe while the round is
            // within its timeout; after it, the call reopens the breaker.
            State::HalfOpen if m.time_in_state < timeout => {
                Some(m.retry_after == Some(Duration::ZERO))
            }
            State::HalfOpen if m.time_in_state > timeout => Some(false),
            _ => None,
        }
    }

    /// The cooldown of an Open phase at `level`, before jitter (which only
    /// shortens it).
    fn cooldown(&self, level: u8) -> Duration {
        let base = self.cfg.open_ms as f64;
        let max = self
            .cfg
            .max_open_ms
            .map_or(base.max(60_000.0), |ms| (ms as f64).max(base));
        let ms = (base * self.cfg.multiplier.powi(i32::from(level))).min(max);
        Duration::from_millis(ms.ceil() as u64)
    }

    /// A rejection's `retry_after` (as `metrics()` says it right after) within
    /// what the docs allow: Open, the cooldown left; HalfOpen with every slot
    /// taken, at most the next level's cooldown; Recovering, zero; ForcedOpen,
    /// none.
    fn check_retry_after_bound(&self, m: &cutout::Metrics) {
        let bound = match m.state {
            State::Open => Some(self.cooldown(m.level)),
            State::HalfOpen => Some(self.cooldown(m.level.saturating_add(1))),
            State::Recovering => Some(Duration::ZERO),
            State::ForcedOpen => None,
            other => panic!("a rejection while {other:?}"),
        };
        match (m.retry_after, bound) {
            (Some(after), Some(bound)) => assert!(
                after <= bound,
                "retry_after {after:?} beyond {bound:?} while {:?} at level {}",
                m.state,
                m.level
            ),
            (None, None) => {}
            other => panic!("retry_after while {:?}: {other:?}", m.state),
        }
    }

    /// `m` without what moves with real time on a clock the run does not drive.
    fn timeless(&self, mut m: cutout::Metrics) -> cutout::Metrics {
        if !C::MANUAL {
            m.time_in_state = Duration::ZERO;
            m.retry_after = m.retry_after.map(|_| Duration::ZERO);
        }
        m
    }

    fn live_holds(&self) -> usize {
        self.layers.len()
            + self.services.len()
            + self
                .flights
                .iter()
                .filter(|f| f.admitted && f.phase == Phase::Live)
                .count()
    }

    fn in_flight(&self) -> u64 {
        self.flights
            .iter()
            .filter(|f| f.admitted && f.phase == Phase::Live)
            .count() as u64
    }

    fn check(&self, step: &str) {
        let b = self.breaker();
        let m = b.metrics();
        let l = m.lifetime;
        assert_eq!(
            l,
            self.expect,
            "lifetime after {step}\ntrace:\n{}",
            self.trace.join("\n")
        );
        assert_eq!(
            l.admitted,
            l.successes + l.failures + l.ignored + l.stale + l.dropped + self.in_flight()
                - self.dropped_failures,
            "admitted = outcomes + in flight (dropped failures counted once), after {step}"
        );
        assert_eq!(
            m.total_transitions(),
            u64::from(m.generation.wrapping_sub(self.generation0)),
            "each transition moves the generation on once"
        );
        // The test's own handle (and the one in `b`), the live holds, and at most
        // eight spares of this thread.
        let own = 1 + usize::from(self.handle.is_ok()) + self.extra;
        let count = Arc::strong_count(&b);
        let holds = self.live_holds() + own;
        assert!(
            (holds..=holds + 8).contains(&count),
            "strong count {count} against {holds} holds (+ at most 8 spares) after {step}"
        );
    }

    fn pick<T>(v: &[T], i: usize) -> Option<usize> {
        (!v.is_empty()).then(|| i % v.len())
    }

    fn step(&mut self, op: Op) {
        self.trace.push(format!("{op:?}"));
        self.last_hold_elsewhere = matches!(op, Op::OnThread { .. });
        match op {
            Op::Call {
                svc,
                reply,
                pending,
                ready_first,
            } => {
                let Some(i) = Self::pick(&self.services, svc) else {
                    return;
                };
                if ready_first {
                    self.ready(i);
                }
                let readied_by = self.services[i].readied_by().take();
                let id = self.next_id;
                self.next_id += 1;
                let req = Req { id, reply, pending };
                let at = self.clock.nanos();
                let before = self.breaker().metrics();
                // A call whose readiness the breaker's rejection answered is
                // rejected: the inner service was not made ready for it.
                let predicted = match readied_by {
                    Some(_) => Some(false),
                    None => self.predict_admission(&before),
                };
                let result = if reply == Reply::PanicInCall {
                    catch_unwind(AssertUnwindSafe(|| self.services[i].call(req)))
                } else {
                    Ok(self.services[i].call(req))
                };
                let admitted = self.log.lock().unwrap().last() == Some(&id);
                let m = self.breaker().metrics();
                self.trace.push(format!(
                    "  admitted {admitted} -> {:?} gen {} retry_after {:?}",
                    m.state, m.generation, m.retry_after
                ));
                if let Some(p) = predicted {
                    assert_eq!(
                        admitted,
                        p,
                        "admission of a call on {:?} (retry_after {:?}, {:?} in state)\ntrace:\n{}",
                        before.state,
                        before.retry_after,
                        before.time_in_state,
                        self.trace.join("\n")
                    );
                }
                if admitted {
                    self.expect.admitted += 1;
                } else {
                    self.expect.rejected += 1;
                    // (A call readied by a breaker that has stopped rejecting
                    // since retries at once: checked with its output.)
                    if readied_by.is_none() || Self::rejects(&m) {
                        self.check_retry_after_bound(&m);
                    }
                }
                let fut = match result {
                    Ok(fut) => {
                        assert!(
                            !(admitted && reply == Reply::PanicInCall),
                            "the inner service's panic in call did not propagate"
                        );
                        fut
                    }
                    Err(payload) => {
                        assert!(admitted, "a rejected call panicked");
                        assert!(payload_text(&*payload).contains(MARK));
                        // The admission's guard recorded it as dropped, at once:
                        // in its own phase, after no time at all.
                        let t = Ticket {
                            generation: m.generation,
                            at,
                        };
                        self.account(t, None, m.generation);
                        return;
                    }
                };
                self.flights.push(Flight {
                    fut,
                    req,
                    admitted,
                    ticket: Ticket {
                        generation: m.generation,
                        at,
                    },
                    // As the breaker rejects now; one whose readiness the
                    // breaker answered and which has stopped rejecting since:
                    // by the state that answered, retry at once.
                    rejected_as: (!admitted).then_some(match readied_by {
                        Some(state) if !Self::rejects(&m) => (state, Some(Duration::ZERO)),
                        _ => (m.state, m.retry_after),
                    }),
                    phase: Phase::Live,
                });
            }
            Op::PollReady { svc } => {
                let Some(i) = Self::pick(&self.services, svc) else {
                    return;
                };
                let before = self.breaker().metrics();
                self.ready(i);
                assert_eq!(
                    self.timeless(self.breaker().metrics()),
                    self.timeless(before),
                    "poll_ready changed the breaker"
                );
            }
            Op::Poll { flight, times } => {
                let Some(i) = Self::pick(&self.flights, flight) else {
                    return;
                };
                if self.flights[i].phase == Phase::Done {
                    let before = self.breaker().metrics();
                    let f = &mut self.flights[i];
                    assert!(
                        poll1(&mut f.fut).is_pending(),
                        "a completed future polled again is Pending"
                    );
                    assert_eq!(
                        self.timeless(self.breaker().metrics()),
                        self.timeless(before),
                        "a completed future polled again changed the breaker"
                    );
                    return;
                }
                for _ in 0..times {
                    if self.poll_live(i) {
                        break;
                    }
                }
            }
            Op::DropFlight { flight } => {
                let Some(i) = Self::pick(&self.flights, flight) else {
                    return;
                };
                let f = self.flights.remove(i);
                let live_admitted = f.admitted && f.phase == Phase::Live;
                if live_admitted {
                    let generation = self.generation();
                    drop(f.fut);
                    self.account(f.ticket, None, generation);
                }
            }
            Op::OnThread { flight, polls } => {
                let Some(i) = Self::pick(&self.flights, flight) else {
                    return;
                };
                if self.flights[i].phase == Phase::Done {
                    return;
                }
                let mut f = self.flights.remove(i);
                let expect_panic = self.ends_in_panic(&f);
                // Accounted before the thread runs: nothing else moves meanwhile,
                // and the generation and clock are the same there.
                let generation = self.generation();
                let fut = std::mem::replace(&mut f.fut, Box::pin(std::future::pending()));
                let handle = std::thread::spawn(move || {
                    let mut fut = fut;
                    for _ in 0..polls {
                        let r = catch_unwind(AssertUnwindSafe(|| poll1(&mut fut)));
                        match r {
                            Ok(Poll::Ready(obs)) => return Ok(Some(obs)),
                            Ok(Poll::Pending) => {}
                            Err(payload) => {
                                drop(fut);
                                return Err(payload_text(&*payload));
                            }
                        }
                    }
                    drop(fut);
                    Ok(None)
                });
                let out = handle.join().expect("the thread itself did not panic");
                match out {
                    Ok(Some(obs)) => {
                        assert!(!expect_panic, "expected a panic, got {obs:?}");
                        self.check_output(&f, obs);
                        if f.admitted {
                            let o = self.outcome_of(f.req.reply);
                            self.account(f.ticket, o, generation);
                        }
                    }
                    Ok(None) => {
                        if f.admitted {
                            self.account(f.ticket, None, generation);
                        }
                    }
                    Err(text) => {
                        assert!(
                            expect_panic && text.contains(MARK),
                            "unexpected panic: {text}"
                        );
                        self.account(f.ticket, None, generation);
                    }
                }
            }
            Op::CloneService { svc } => {
                if let Some(i) = Self::pick(&self.services, svc) {
                    let s = self.services[i].clone_box();
                    self.services.push(s);
                }
            }
            Op::DropService { svc } => {
                if let Some(i) = Self::pick(&self.services, svc) {
                    drop(self.services.remove(i));
                }
            }
            Op::NewService { layer } => {
                if let Some(i) = Self::pick(&self.layers, layer) {
                    let s = self.layers[i].make();
                    self.services.push(s);
                }
            }
            Op::CloneLayer { layer } => {
                if let Some(i) = Self::pick(&self.layers, layer) {
                    let l = self.layers[i].clone_box();
                    self.layers.push(l);
                }
            }
            Op::DropLayer { layer } => {
                if let Some(i) = Self::pick(&self.layers, layer) {
                    drop(self.layers.remove(i));
                }
            }
            Op::Advance { ms } => self.clock.advance_by(Duration::from_millis(ms)),
            Op::ForceOpen => self.breaker().force_open(),
            Op::Disable => self.breaker().disable(),
            Op::Reset => self.breaker().reset(),
        }
    }

    /// Polls live flight `i` once; `true` when it resolved (or panicked and was
    /// dropped).
    fn poll_live(&mut self, i: usize) -> bool {
        let expect_panic = self.ends_in_panic(&self.flights[i]);
        let generation = self.generation();
        let result = {
            let f = &mut self.flights[i];
            if expect_panic {
                catch_unwind(AssertUnwindSafe(|| poll1(&mut f.fut)))
            } else {
                Ok(poll1(&mut f.fut))
            }
        };
        match result {
            Ok(Poll::Pending) => {
                let f = &self.flights[i];
                assert!(
                    f.admitted,
                    "a rejected call's future resolves at its first poll"
                );
                false
            }
            Ok(Poll::Ready(obs)) => {
                assert!(!expect_panic, "expected a panic, got {obs:?}");
                let f = &self.flights[i];
                self.check_output(f, obs);
                let (admitted, reply, ticket) = (f.admitted, f.req.reply, f.ticket);
                self.flights[i].phase = Phase::Done;
                if admitted {
                    let o = self.outcome_of(reply);
                    self.account(ticket, o, generation);
                }
                true
            }
            Err(payload) => {
                let text = payload_text(&*payload);
                assert!(text.contains(MARK), "unexpected panic: {text}");
                // Dropped now: a future whose inner call panicked is not polled again.
                let f = self.flights.remove(i);
                drop(f.fut);
                self.account(f.ticket, None, generation);
                true
            }
        }
    }

    /// What an admitted call's outcome (`None`: dropped) counts as, given the
    /// generation read just before it was recorded (the recording itself may move
    /// the generation on), at the current time.
    fn account(&mut self, t: Ticket, outcome: Option<Outcome>, generation: u32) {
        let elapsed = self.clock.nanos().saturating_sub(t.at);
        let fresh = generation == t.generation;
        let slow = fresh && self.cfg.slow_nanos().is_some_and(|t| elapsed > t);
        match outcome {
            None => {
                self.expect.dropped += 1;
                if slow {
                    self.expect.slow += 1;
                }
                // Counted as a failure too (in its own phase), as `on_drop` says.
                let failed = fresh
                    && match self.cfg.on_drop {
                        Dropped::Ignored => false,
                        Dropped::Failure => true,
                        Dropped::FailureAfter(d) => u128::from(elapsed) > d.as_nanos(),
                        _ => unreachable!("no other setting is generated"),
                    };
                if failed {
                    self.expect.failures += 1;
                    self.dropped_failures += 1;
                }
                self.trace.push(format!(
                    "  -> dropped (fresh {fresh}, elapsed {}ms)",
                    elapsed / 1_000_000
                ));
            }
            Some(_) if !fresh => {
                self.expect.stale += 1;
                self.trace.push("  -> stale".into());
            }
            Some(o) => {
                match o {
                    Outcome::Success => self.expect.successes += 1,
                    Outcome::Failure => self.expect.failures += 1,
                    Outcome::Ignored => self.expect.ignored += 1,
                }
                if slow && o != Outcome::Ignored {
                    self.expect.slow += 1;
                }
                self.trace
                    .push(format!("  -> {o:?} (elapsed {}ms)", elapsed / 1_000_000));
            }
        }
    }
}

/// How the run ends: the order in which the last holders go.
#[derive(Clone, Copy, Debug)]
enum Teardown {
    FlightsServicesLayers,
    LayersServicesFlights,
    ServicesFlightsLayers,
    LayersFlightsServices,
}

/// Runs `ops` on `breaker` (built from `cfg` on `clock`). `own_handle`: the run
/// keeps `breaker` as a handle of its own; else it keeps only a `Weak`. `extra`:
/// handles held elsewhere (by the caller).
#[allow(clippy::too_many_arguments)]
fn run<C: TestClock>(
    stack: Stack,
    cfg: Config,
    clock: C,
    breaker: Arc<CircuitBreaker<C>>,
    ops: Vec<Op>,
    own_handle: bool,
    extra: usize,
    teardown: Teardown,
) {
    quiet_expected_panics();
    let generation0 = breaker.metrics().generation;
    let log = Arc::new(Mutex::new(Vec::new()));
    let layer = new_layer(stack, breaker.clone(), &log);
    let handle = if own_handle {
        Ok(breaker)
    } else {
        let weak = Arc::downgrade(&breaker);
        drop(breaker);
        Err(weak)
    };
    let mut w = World {
        stack,
        cfg,
        clock,
        handle,
        log,
        services: vec![layer.make()],
        layers: vec![layer],
        flights: Vec::new(),
        next_id: 0,
        expect: Lifetime::default(),
        dropped_failures: 0,
        generation0,
        extra,
        last_hold_elsewhere: false,
        trace: Vec::new(),
    };
    w.check("the start");
    for (n, op) in ops.into_iter().enumerate() {
        w.step(op);
        if w.handle.is_err() && w.live_holds() == 0 {
            // The last layer, service and future went: nothing holds the breaker
            // but this thread's spares, which go with the last of them (when it
            // went on this thread; where it went on another, the docs let this
            // thread's spares keep the breaker until it keeps newer ones or exits).
            let Err(weak) = &w.handle else { unreachable!() };
            if w.last_hold_elsewhere {
                assert!(weak.strong_count() <= 8, "{}", weak.strong_count());
                return;
            }
            assert!(
                weak.upgrade().is_none(),
                "every layer, service and future is gone (on this thread), but the breaker is still held (strong count {}) after step {n}: {op:?}\ntrace:\n{}",
                weak.strong_count(),
                w.trace.join("\n")
            );
            return;
        }
        w.check(&format!("step {n}: {op:?}"));
    }

    // Teardown: every layer, service and future goes.
    let weak = match &w.handle {
        Ok(b) => Arc::downgrade(b),
        Err(w) => w.clone(),
    };
    let drop_flights = |w: &mut World<C>| {
        while !w.flights.is_empty() {
            w.step(Op::DropFlight { flight: 0 });
            if w.live_holds() > 0 || w.handle.is_ok() {
                w.check("a teardown drop");
            }
        }
    };
    let drop_services = |w: &mut World<C>| w.services.clear();
    let drop_layers = |w: &mut World<C>| w.layers.clear();
    match teardown {
        Teardown::FlightsServicesLayers => {
            drop_flights(&mut w);
            drop_services(&mut w);
            drop_layers(&mut w);
        }
        Teardown::LayersServicesFlights => {
            drop_layers(&mut w);
            drop_services(&mut w);
            drop_flights(&mut w);
        }
        Teardown::ServicesFlightsLayers => {
            drop_services(&mut w);
            drop_flights(&mut w);
            drop_layers(&mut w);
        }
        Teardown::LayersFlightsServices => {
            drop_layers(&mut w);
            drop_flights(&mut w);
            drop_services(&mut w);
        }
    }
    match &w.handle {
        Ok(b) => {
            let l = b.metrics().lifetime;
            assert_eq!(l, w.expect, "lifetime after the teardown");
            assert_eq!(
                l.admitted,
                l.successes + l.failures + l.ignored + l.stale + l.dropped - w.dropped_failures
            );
        }
        Err(_) => assert!(
            weak.upgrade().is_none(),
            "every layer, service and future is gone (on this thread), but the breaker is still held: strong count {}",
            weak.strong_count()
        ),
    }
}

fn stack() -> impl Strategy<Value = Stack> {
    prop_oneof![Just(Stack::Tower), Just(Stack::Http), Just(Stack::Fallback)]
}

fn teardown() -> impl Strategy<Value = Teardown> {
    prop_oneof![
        Just(Teardown::FlightsServicesLayers),
        Just(Teardown::LayersServicesFlights),
        Just(Teardown::ServicesFlightsLayers),
        Just(Teardown::LayersFlightsServices),
    ]
}

/// Runs the case with no handle of the test's own: when the last layer, service
/// and future goes, this thread's spares go with it and the breaker is freed.
fn run_unheld<C: TestClock>(clock: C, stack: Stack, cfg: Config, ops: Vec<Op>, teardown: Teardown) {
    let breaker = Arc::new(cfg.build(&clock));
    run(stack, cfg, clock, breaker, ops, false, 0, teardown);
}

/// Runs the case on a thread of its own, with the test holding a handle here and
/// the run one there: spares stay while that thread lives (the docs: a plain `Arc`
/// dropped after them cannot see them), and go when it exits, leaving the test's
/// handle the only one.
fn run_held(stack: Stack, cfg: Config, ops: Vec<Op>, teardown: Teardown) {
    let clock = ManualClock::new();
    let breaker = Arc::new(cfg.build(&clock));
    let theirs = breaker.clone();
    let joined = std::thread::spawn(move || {
        run(stack, cfg, clock, theirs, ops, true, 1, teardown);
    })
    .join();
    if let Err(panic) = joined {
        std::panic::resume_unwind(panic);
    }
    assert_eq!(
        Arc::strong_count(&breaker),
        1,
        "the thread that made the calls exited: its spares are gone"
    );
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        ..ProptestConfig::default()
    })]

    #[test]
    fn outcomes_through_the_layers_are_counted_as_documented(
        stack in stack(),
        cfg in config(),
        ops in proptest::collection::vec(op(), 1..80),
        teardown in teardown(),
    ) {
        run_unheld(ManualClock::new(), stack, cfg, ops, teardown);
    }

    #[test]
    fn with_every_policy_on(
        stack in stack(),
        cfg in full_config(),
        ops in proptest::collection::vec(op(), 1..80),
        teardown in teardown(),
    ) {
        run_unheld(ManualClock::new(), stack, cfg, ops, teardown);
    }

    #[test]
    fn on_the_default_clock(
        stack in stack(),
        cfg in timeless_config(),
        ops in proptest::collection::vec(op(), 1..80),
        teardown in teardown(),
    ) {
        run_unheld(DefaultClock::new(), stack, cfg, ops, teardown);
    }

    #[test]
    fn with_a_handle_of_the_tests_own_released_when_the_thread_exits(
        stack in stack(),
        cfg in config(),
        ops in proptest::collection::vec(op(), 1..40),
        teardown in teardown(),
    ) {
        run_held(stack, cfg, ops, teardown);
    }
}
