//! Issue 16's shapes, wall time, every implementation that can take part:
//!
//! - `closed/<shape>`: closed success on the default-config breakers (cutout's
//!   10 s window; failsafe's consecutive policy; recloser's default), the call
//!   written inline, through one shared generic helper that is not inlined, and
//!   through a `&dyn Fn`;
//! - `open/fresh thread`: open rejection on a thread whose first call is a
//!   rejection (the breaker was tripped by another thread);
//! - `closed/after a crowd`: closed success on a thread started while a crowd of
//!   threads held every owned stripe slot, measured after the crowd left;
//! - `tower/<n> threads`: cutout's tower layer over an always-ready service,
//!   polled once with a no-op waker, each thread with its own service built by the
//!   layer, against `call_async` and `call` (tower-resilience, the peer the issue
//!   measured, is not a dependency here).
//!
//! Wall time on a 2-vCPU machine shared with other work: noisy, and the
//! two-thread figures are bimodal. `benches/instructions.sh` counts the same
//! shapes with callgrind, which is the firmer evidence.

#[allow(dead_code)]
mod common;

use common::{LONG, Subject, fail, succeed};
use criterion::{Criterion, criterion_group, criterion_main};
use cutout::{CircuitBreaker, CircuitBreakerLayer};
use std::future::{Future, Ready, ready};
use std::hint::black_box;
use std::pin::pin;
use std::sync::{Arc, Barrier};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};
use tower::{Layer, Service, service_fn};

#[inline(never)]
fn helper<S: Subject>(s: &S) -> bool {
    succeed!(s)
}

fn timed(iters: u64, mut f: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    for _ in 0..iters {
        black_box(f());
    }
    start.elapsed()
}

/// `f` timed on a new thread, after `warm_up` ran there first.
fn on_fresh_thread<S: Subject>(s: &S, iters: u64, warm_up: impl Fn(&S) -> bool + Sync) -> Duration {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let _ = warm_up(s);
                timed(iters, || fail!(s))
            })
            .join()
            .unwrap()
    })
}

/// Closed success timed on a thread started while a crowd held every owned slot
/// (two per core), after the crowd left.
fn after_a_crowd<S: Subject>(s: &S, iters: u64) -> Duration {
    common::after_a_crowd(s, || {
        let _ = succeed!(s);
        timed(iters, || succeed!(s))
    })
}

fn poll_once<F: Future>(f: F) -> F::Output {
    match pin!(f).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(out) => out,
        Poll::Pending => unreachable!("the future is ready"),
    }
}

fn closed(c: &mut Criterion) {
    let mut g = c.benchmark_group("shapes");
    macro_rules! shapes {
        ($name:expr, $s:expr) => {{
            let s = $s;
            g.bench_function(format!("closed/inline/{}", $name), |b| {
                b.iter_custom(|iters| timed(iters, || succeed!(s)))
            });
            g.bench_function(format!("closed/helper/{}", $name), |b| {
                b.iter_custom(|iters| timed(iters, || helper(black_box(&s))))
            });
            g.bench_function(format!("closed/dyn/{}", $name), |b| {
                let f: &dyn Fn() -> bool = &|| succeed!(s);
                b.iter_custom(|iters| timed(iters, || black_box(f)()))
            });
            g.bench_function(format!("closed/after a crowd/{}", $name), |b| {
                b.iter_custom(|iters| after_a_crowd(&s, iters))
            });
        }};
    }
    shapes!("cutout_window", common::cutout_window(20));
    shapes!("cutout_consecutive", common::cutout_consecutive(5));
    shapes!(
        "failsafe_consecutive",
        common::failsafe_consecutive(5, LONG)
    );
    shapes!("recloser_default", common::recloser_default(LONG));

    macro_rules! fresh {
        ($name:expr, $s:expr, $limit:expr) => {{
            let s = common::trip($name, $s, $limit);
            g.bench_function(format!("open/fresh thread/{}", $name), |b| {
                b.iter_custom(|iters| on_fresh_thread(&s, iters, |s| fail!(s)))
            });
            g.bench_function(format!("open/inline/{}", $name), |b| {
                b.iter_custom(|iters| timed(iters, || fail!(s)))
            });
        }};
    }
    fresh!("cutout_window", common::cutout_window(20), 100);
    fresh!(
        "failsafe_consecutive",
        common::failsafe_consecutive(5, LONG),
        100
    );
    fresh!("recloser_default", common::recloser_default(LONG), 300);
    fresh!("mutex", common::MutexBreaker::new(5, LONG), 100);
    g.finish();
}

/// `threads` threads, each with its own service from one layer, `iters` calls each:
/// wall time from the first start to the last finish.
fn tower_threads(layer: &CircuitBreakerLayer, threads: usize, iters: u64) -> Duration {
    let barrier = Barrier::new(threads);
    let spans: Vec<(Instant, Instant)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let echo = service_fn(|x: u64| -> Ready<Result<u64, ()>> { ready(Ok(x)) });
                let mut service = layer.layer(echo);
                let barrier = &barrier;
                scope.spawn(move || {
                    let _ = poll_once(service.call(1));
                    barrier.wait();
                    let start = Instant::now();
                    for _ in 0..iters {
                        black_box(poll_once(service.call(black_box(1))).is_ok());
                    }
                    (start, Instant::now())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let first = spans.iter().map(|s| s.0).min().unwrap();
    let last = spans.iter().map(|s| s.1).max().unwrap();
    last - first
}

fn tower(c: &mut Criterion) {
    let mut g = c.benchmark_group("shapes");
    let breaker = Arc::new(CircuitBreaker::builder().build().unwrap());
    let layer = CircuitBreakerLayer::new(breaker.clone());
    g.bench_function("tower/call", |b| {
        b.iter_custom(|iters| {
            timed(iters, || {
                breaker.call(|| Ok::<_, ()>(black_box(1u64))).is_ok()
            })
        })
    });
    g.bench_function("tower/call_async", |b| {
        b.iter_custom(|iters| {
            timed(iters, || {
                poll_once(breaker.call_async(ready(Ok::<_, ()>(black_box(1u64))))).is_ok()
            })
        })
    });
    for threads in [1, 2] {
        // Criterion's figure: wall time over one thread's calls (per thread).
        g.bench_function(format!("tower/layer, {threads} threads"), |b| {
            b.iter_custom(|iters| tower_threads(&layer, threads, iters))
        });
    }
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_millis(700))
}

criterion_group! {
    name = benches;
    config = config();
    targets = closed, tower
}
criterion_main!(benches);
