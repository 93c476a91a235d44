//! The benchmark a user writes to check a circuit breaker's speed: criterion's
//! `b.iter(|| breaker.call(op))`, the `Result` handed back to criterion as it is,
//! no harness of our own. For cutout and each peer in the dev-dependencies
//! (failsafe 1.3, recloser 1.4; tower-resilience 0.13 beside the tower layer),
//! closed and open.
//!
//! Rows, in one group so that one run compares like with like:
//! - `closed/<breaker>`: `b.iter(|| breaker.call(op))`;
//! - `closed/cutout, <shape>`: the ways a caller uses the `Result`, each beside
//!   its `is_ok` twin: `.is_ok()` in the loop, `.ok()`, `?` in the loop's closure,
//!   a `match` in place, and a function that is not inlined returning the
//!   `Result` (its twin: the same function returning `is_ok()`);
//! - `open/<breaker>`: rejections, in the loop of a thread rejected before;
//! - `open, fresh thread/<breaker>`: rejections on a thread started for the
//!   sample, whose first call to the breaker is a rejection;
//! - `closed, 2 threads/<breaker>` and `open, 2 threads/<breaker>`: criterion's
//!   `iter_custom`, two threads each in the same loop (each thread's time per
//!   call; the slower thread's);
//! - `transitions/...`: a round of three transitions on a manual clock, with and
//!   without a listener;
//! - `tower/<...>`: a ready service, `svc.ready().await?.call(1).await` through
//!   cutout's layer and tower-resilience's, and `svc.clone().oneshot(1)` through
//!   cutout's, against `breaker.call_async(..)` and `breaker.call(..)`, each driven
//!   by a `block_on` that polls with a no-op waker; and the same shapes without a
//!   breaker (over `echo` the compiler folds them away; over `opaque` it cannot:
//!   what tower's shape and the executor cost by themselves).
//!
//! Short by default (0.5 s warm-up, 1 s measurement a row, about 3 minutes in
//! all): `cargo bench --bench user --features tower`; criterion's own flags
//! (`-- --measurement-time 5`, a filter such as `-- closed/`) still apply.
//! `CUTOUT_BENCH_CPU_TIME=1` measures the thread's CPU time instead of wall time,
//! for a machine other work keeps busy. Figures: `docs/PERFORMANCE.md`, "The user's shape".

use criterion::Criterion;
use criterion::measurement::{Measurement, ValueFormatter, WallTime};
use cutout::{CircuitBreaker, CircuitBreakerLayer, Error, ManualClock, State};
use failsafe::CircuitBreaker as _;
use std::future::{Future, ready};
use std::hint::black_box;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};
use tower::{Layer, Service, ServiceExt};

/// The call every row makes: a success.
fn op() -> Result<u64, &'static str> {
    Ok(1)
}

/// The call that trips the breakers open.
fn down() -> Result<u64, &'static str> {
    Err("down")
}

/// A cooldown no run outlives.
const HOUR: Duration = Duration::from_secs(3600);

fn cutout() -> CircuitBreaker {
    CircuitBreaker::builder()
        .consecutive_failures(5)
        .open_duration(HOUR)
        .build()
        .unwrap()
}

fn failsafe() -> impl failsafe::CircuitBreaker {
    let backoff = failsafe::backoff::constant(HOUR);
    let policy = failsafe::failure_policy::consecutive_failures(5, backoff);
    failsafe::Config::new().failure_policy(policy).build()
}

fn recloser() -> recloser::Recloser {
    recloser::Recloser::custom().open_wait(HOUR).build()
}

/// `breaker.call(op)` returning the `Result`, in a function of its own that is
/// never inlined.
#[inline(never)]
fn not_inlined(breaker: &CircuitBreaker) -> Result<u64, Error<&'static str>> {
    breaker.call(op)
}

/// [`not_inlined`] without a breaker: the cost of the shape itself, a
/// `Result<u64, Error<&str>>` returned from a function that is not inlined.
#[inline(never)]
fn not_inlined_no_breaker() -> Result<u64, Error<&'static str>> {
    black_box(op()).map_err(Error::Inner)
}

/// [`not_inlined`]'s twin: the same function returning `is_ok()`.
#[inline(never)]
fn not_inlined_is_ok(breaker: &CircuitBreaker) -> bool {
    breaker.call(op).is_ok()
}

/// A call whose error is one word: its `Result<u64, Error<io::Error>>` is 16
/// bytes, which a function returns in registers.
fn op_io() -> Result<u64, std::io::Error> {
    Ok(1)
}

/// [`not_inlined`] with [`op_io`].
#[inline(never)]
fn not_inlined_io(breaker: &CircuitBreaker) -> Result<u64, Error<std::io::Error>> {
    breaker.call(op_io)
}

/// [`not_inlined_io`]'s twin.
#[inline(never)]
fn not_inlined_io_is_ok(breaker: &CircuitBreaker) -> bool {
    breaker.call(op_io).is_ok()
}

/// `iters` rounds of `call` on each of two threads, started together: the slower
/// thread's time. `call` is called from one place, the loop, so the compiler
/// inlines it there as it does a closure handed to `b.iter`.
fn two_threads<R>(iters: u64, call: impl Fn() -> R + Sync) -> Duration {
    let start = Barrier::new(2);
    std::thread::scope(|scope| {
        let threads = [(); 2].map(|()| {
            scope.spawn(|| {
                start.wait();
                let t = now();
                for _ in 0..iters {
                    black_box(call());
                }
                now() - t
            })
        });
        threads
            .map(|t| t.join().unwrap())
            .into_iter()
            .max()
            .unwrap()
    })
}

/// `iters` rounds of `call` on a thread started for them.
fn fresh_thread<R>(iters: u64, call: impl Fn() -> R + Sync) -> Duration {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let t = now();
                for _ in 0..iters {
                    black_box(call());
                }
                now() - t
            })
            .join()
            .unwrap()
    })
}

/// Polls `f` with a no-op waker until it is ready: the executor of the tower rows.
fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(out) = f.as_mut().poll(&mut cx) {
            return out;
        }
    }
}

fn closed(c: &mut Criterion<Clock>) {
    let mut g = c.benchmark_group("user");
    let breaker = cutout();
    let fs = failsafe();
    let rc = recloser();

    g.bench_function("closed/cutout", |b| b.iter(|| breaker.call(op)));
    g.bench_function("closed/failsafe", |b| b.iter(|| fs.call(op)));
    g.bench_function("closed/recloser", |b| b.iter(|| rc.call(op)));

    g.bench_function("closed/cutout, is_ok", |b| {
        b.iter(|| breaker.call(op).is_ok())
    });
    g.bench_function("closed/cutout, ok", |b| b.iter(|| breaker.call(op).ok()));
    g.bench_function("closed/cutout, ?", |b| {
        b.iter(|| -> Result<u64, Error<&str>> {
            let n = breaker.call(op)?;
            Ok(n + 1)
        })
    });
    g.bench_function("closed/cutout, match", |b| {
        b.iter(|| match breaker.call(op) {
            Ok(n) => n,
            Err(Error::Rejected(_)) => 0,
            Err(Error::Inner(_)) => 2,
        })
    });
    g.bench_function("closed/cutout, not inlined", |b| {
        b.iter(|| not_inlined(&breaker))
    });
    g.bench_function("closed/cutout, not inlined, is_ok", |b| {
        b.iter(|| not_inlined_is_ok(&breaker))
    });
    g.bench_function("closed/no breaker, not inlined", |b| {
        b.iter(not_inlined_no_breaker)
    });
    g.bench_function("closed/cutout, not inlined, io::Error", |b| {
        b.iter(|| not_inlined_io(&breaker))
    });
    g.bench_function("closed/cutout, not inlined, io::Error, is_ok", |b| {
        b.iter(|| not_inlined_io_is_ok(&breaker))
    });

    g.bench_function("closed, 2 threads/cutout", |b| {
        b.iter_custom(|iters| two_threads(iters, || breaker.call(op)))
    });
    g.bench_function("closed, 2 threads/failsafe", |b| {
        b.iter_custom(|iters| two_threads(iters, || fs.call(op)))
    });
    g.bench_function("closed, 2 threads/recloser", |b| {
        b.iter_custom(|iters| two_threads(iters, || rc.call(op)))
    });
    g.finish();
}

fn open(c: &mut Criterion<Clock>) {
    let mut g = c.benchmark_group("user");
    let breaker = cutout();
    let fs = failsafe();
    let rc = recloser();
    // Failures until each rejects: recloser's window is 100 calls long.
    for _ in 0..300 {
        let _ = breaker.call(down);
        let _ = fs.call(down);
        let _ = rc.call(down);
    }
    assert!(matches!(breaker.call(op), Err(Error::Rejected(_))));
    assert!(matches!(fs.call(op), Err(failsafe::Error::Rejected)));
    assert!(matches!(rc.call(op), Err(recloser::Error::Rejected)));

    g.bench_function("open/cutout", |b| b.iter(|| breaker.call(op)));
    g.bench_function("open/failsafe", |b| b.iter(|| fs.call(op)));
    g.bench_function("open/recloser", |b| b.iter(|| rc.call(op)));
    g.bench_function("open/cutout, is_ok", |b| {
        b.iter(|| breaker.call(op).is_ok())
    });

    g.bench_function("open, fresh thread/cutout", |b| {
        b.iter_custom(|iters| fresh_thread(iters, || breaker.call(op)))
    });
    g.bench_function("open, fresh thread/failsafe", |b| {
        b.iter_custom(|iters| fresh_thread(iters, || fs.call(op)))
    });
    g.bench_function("open, fresh thread/recloser", |b| {
        b.iter_custom(|iters| fresh_thread(iters, || rc.call(op)))
    });

    g.bench_function("open, 2 threads/cutout", |b| {
        b.iter_custom(|iters| two_threads(iters, || breaker.call(op)))
    });
    g.bench_function("open, 2 threads/failsafe", |b| {
        b.iter_custom(|iters| two_threads(iters, || fs.call(op)))
    });
    g.bench_function("open, 2 threads/recloser", |b| {
        b.iter_custom(|iters| two_threads(iters, || rc.call(op)))
    });
    g.finish();
}

/// A breaker on a manual clock that trips at its first failure.
fn tripping(listener: bool) -> (CircuitBreaker<ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    let mut builder = CircuitBreaker::builder()
        .consecutive_failures(1)
        .open_duration(Duration::from_secs(1))
        .clock(clock.clone());
    if listener {
        builder = builder.on_transition(|t| {
            black_box(t);
        });
    }
    (builder.build().unwrap(), clock)
}

/// One round of three transitions: a failure trips the breaker (Closed to Open),
/// and after the cooldown a probe's success closes it (Open to HalfOpen to
/// Closed).
fn round(
    breaker: &CircuitBreaker<ManualClock>,
    clock: &ManualClock,
) -> Result<u64, Error<&'static str>> {
    let _ = breaker.call(down);
    clock.advance(Duration::from_secs(2));
    breaker.call(op)
}

fn transitions(c: &mut Criterion<Clock>) {
    let mut g = c.benchmark_group("user");
    for listener in [false, true] {
        let (breaker, clock) = tripping(listener);
        assert_eq!(round(&breaker, &clock), Ok(1));
        assert_eq!(breaker.state(), State::Closed);
        let name = match listener {
            false => "transitions/3 a round",
            true => "transitions/3 a round, a listener",
        };
        g.bench_function(name, |b| b.iter(|| round(&breaker, &clock)));
    }
    g.finish();
}

fn tower(c: &mut Criterion<Clock>) {
    let mut g = c.benchmark_group("user");
    let echo = || tower::service_fn(|n: u64| ready(Ok::<u64, &'static str>(n)));
    let breaker = Arc::new(cutout());
    let mut layered = CircuitBreakerLayer::new(breaker.clone()).layer(echo());
    let mut peer = tower_resilience::circuitbreaker::CircuitBreakerLayer::builder()
        .build()
        .unwrap()
        .layer(echo());

    g.bench_function("tower/cutout, call", |b| b.iter(|| breaker.call(op)));
    g.bench_function("tower/cutout, call_async", |b| {
        b.iter(|| block_on(breaker.call_async(ready(op()))))
    });
    g.bench_function("tower/cutout, layer", |b| {
        b.iter(|| block_on(async { layered.ready().await?.call(1).await }))
    });
    g.bench_function("tower/cutout, layer, oneshot", |b| {
        b.iter(|| block_on(layered.clone().oneshot(1)))
    });
    // The shapes without a breaker: what the executor and tower's `ready()`
    // cost by themselves. Over `echo` the compiler folds the whole call away;
    // over `opaque` (its response hidden from the compiler) it cannot.
    let mut bare = echo();
    let opaque = || tower::service_fn(|n: u64| ready(black_box(Ok::<u64, &'static str>(n))));
    let mut hidden = opaque();
    g.bench_function("tower/no breaker, future", |b| {
        b.iter(|| block_on(ready(op())))
    });
    g.bench_function("tower/no breaker, service", |b| {
        b.iter(|| block_on(async { bare.ready().await?.call(1).await }))
    });
    g.bench_function("tower/no breaker, opaque service", |b| {
        b.iter(|| block_on(async { hidden.ready().await?.call(1).await }))
    });
    g.bench_function("tower/no breaker, opaque service, oneshot", |b| {
        b.iter(|| block_on(hidden.oneshot(1))) // a copy, as a clone
    });
    g.bench_function("tower/tower-resilience, layer", |b| {
        b.iter(|| block_on(async { peer.ready().await?.call(1).await }))
    });
    g.finish();
}

/// Whether the rows measure the thread's CPU time (`CUTOUT_BENCH_CPU_TIME=1`)
/// rather than wall time: on a machine other work keeps busy, time spent
/// descheduled is not counted.
static CPU_TIME: AtomicBool = AtomicBool::new(false);

/// The time the rows measure, from an arbitrary origin: wall time, or the calling
/// thread's CPU time.
fn now() -> Duration {
    static ORIGIN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    // Relaxed: set once, before any row runs.
    if !CPU_TIME.load(Ordering::Relaxed) {
        return ORIGIN.get_or_init(Instant::now).elapsed();
    }
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is the platform's.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Criterion's measurement: wall time as `WallTime` measures it, or the calling
/// thread's CPU time (`CUTOUT_BENCH_CPU_TIME=1`). One type either way, so each
/// row's code is one instantiation, as in a user's benchmark.
struct Clock;

impl Measurement for Clock {
    type Intermediate = Duration;
    type Value = Duration;
    fn start(&self) -> Duration {
        now()
    }
    fn end(&self, start: Duration) -> Duration {
        now() - start
    }
    fn add(&self, a: &Duration, b: &Duration) -> Duration {
        *a + *b
    }
    fn zero(&self) -> Duration {
        Duration::ZERO
    }
    fn to_f64(&self, v: &Duration) -> f64 {
        v.as_nanos() as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        static WALL: WallTime = WallTime;
        WALL.formatter()
    }
}

fn main() {
    // Relaxed: read by the rows' threads, which start after it.
    let cpu = std::env::var_os("CUTOUT_BENCH_CPU_TIME").is_some_and(|v| v == "1");
    CPU_TIME.store(cpu, Ordering::Relaxed);
    // Short by default: every row in a few minutes.
    let mut c = Criterion::default()
        .with_measurement(Clock)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(1))
        .configure_from_args();
    closed(&mut c);
    open(&mut c);
    transitions(&mut c);
    tower(&mut c);
    c.final_summary();
}
