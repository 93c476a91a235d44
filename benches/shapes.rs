//! The call shapes, wall time, every implementation that can take part:
//!
//! - `closed/<shape>`: closed success on the default-config breakers (cutout's
//!   10 s window; failsafe's consecutive policy; recloser's default), the call
//!   written inline, through one shared generic helper that is not inlined
//!   (handed the breaker through `black_box`, and `loaded`: read from memory
//!   where nothing was just stored, `common::loaded`), and through a `&dyn Fn`
//!   (`dyn`: from a loop of the implementation's own, `common::drive_dyn`; `dyn,
//!   shared site`: from one loop every implementation's callback goes through,
//!   `common::drive_dyn_shared`, a site that costs a callee up to 3 cycles more
//!   on the Zen 4 where its targets alternate, as in `examples/paired`; here each
//!   row keeps one target for seconds, and the two rows measured alike);
//! - `open/fresh thread`: open rejection on a thread whose first call is a
//!   rejection (the breaker was tripped by another thread);
//! - `closed/after a crowd`: closed success on a thread started while a crowd of
//!   threads held every owned stripe slot, measured after the crowd left;
//! - `closed/beside a crowd`: the same, measured while the crowd still holds
//!   them (cutout: a thread on a shared stripe for its whole run);
//! - `tower/layer, <n> threads`: cutout's tower layer over an always-ready
//!   service, polled once with a no-op waker, each thread with its own service
//!   built by the layer, against `call_async` and `call`;
//! - `tower/<call_async or layer>, polled as a task`: both futures made in place
//!   and polled through a function pointer, as an executor polls a task, so each
//!   poll is a function of its own (`common::as_a_task`): the like-for-like
//!   comparison, which does not depend on what the compiler inlined into the loop;
//! - `tower/<call_async or layer>, as four tasks`: the same, four futures made and
//!   then each polled (`common::four_tasks`), so no poll reads a future the
//!   instruction before wrote (the as-a-task rows pay that stall);
//! - `tower/layer, a clone per request, <n> threads`: the same, driven as axum's
//!   router drives a service: one service, cloned for each thread and again for
//!   each request;
//! - `tower/tower-resilience layer, <n> threads`: the same for tower-resilience
//!   0.13's `CircuitBreakerLayer` (its defaults: a count-based window of 100 calls),
//!   the tower peer. Built with `build_with_handle`, so the services
//!   the layer builds share one circuit, as cutout's share one breaker (its plain
//!   `build` gives each service a circuit of its own). Two differences in how it is
//!   driven: `poll_ready` before each `call` (its readiness is where its circuit is
//!   checked, an open one reserving the rejection there; closed, over this service,
//!   it is always ready; cutout's `poll_ready` loads the breaker's state word and
//!   asks the inner service, always ready here, so its scenarios leave it out, as
//!   `call_async` has none), and a real waker: its future (boxed) takes a
//!   `tokio::sync::Mutex` twice, which the other thread may hold, so it can be
//!   pending. Each thread polls with a waker that unparks it and parks while the
//!   future is pending, as a thread blocking on a future does (one thread: never
//!   pending, so this is the same single poll). Polling again with the no-op
//!   waker instead measured 1.5-8.8 us per call at two threads here, with tens of
//!   pending polls per call: each poll of a queued waiter takes the lock of tokio's
//!   wait list, which the releasing thread needs too. No tokio runtime is needed
//!   while the circuit stays closed (it does not leave closed here): its timer,
//!   used by `poll_ready` when the circuit is not closed, would need one.
//!
//! Wall time on a 2-vCPU machine shared with other work: noisy, and the
//! two-thread figures are bimodal. `benches/instructions.sh` counts the same
//! shapes with callgrind, which is the firmer evidence.

#[allow(dead_code)]
mod common;

use common::{
    LONG, Subject, across_threads, as_a_task, drive_dyn, drive_dyn_shared, echo, fail, four_tasks,
    helper, poll_once, succeed,
};
use criterion::{Criterion, criterion_group, criterion_main};
use cutout::{CircuitBreaker, CircuitBreakerLayer};
use std::future::{Future, ready};
use std::hint::black_box;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};
use tower::{Layer, Service};
use tower_resilience::circuitbreaker::CircuitBreakerLayer as ResilienceLayer;

fn timed(iters: u64, mut f: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    for _ in 0..iters {
        black_box(f());
    }
    start.elapsed()
}

/// `iters` successful calls of `s` through a `&dyn Fn` made opaque once (a
/// callback held in a struct), from a loop of `S`'s own, or from the one loop
/// every implementation's callback goes through (`shared`).
fn timed_dyn<S: Subject>(s: &S, iters: u64, shared: bool) -> Duration {
    let call = || succeed!(s);
    let f: &dyn Fn() -> bool = black_box(&call);
    let start = Instant::now();
    let ran = match shared {
        false => drive_dyn::<S>(f, iters),
        true => drive_dyn_shared(f, iters),
    };
    let elapsed = start.elapsed();
    assert_eq!(ran, iters, "a closed breaker runs every call");
    elapsed
}

/// `iters` calls made four at a time by `four` (which returns how many of its four
/// succeeded), scaled to `iters` when that is not a multiple of four.
fn timed_fours(iters: u64, mut four: impl FnMut() -> u64) -> Duration {
    let rounds = iters.div_ceil(4);
    let start = Instant::now();
    for _ in 0..rounds {
        assert_eq!(four(), 4, "a closed breaker runs every call");
    }
    start.elapsed().mul_f64(iters as f64 / (4 * rounds) as f64)
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
/// (as many as cutout has), after the crowd left.
fn after_a_crowd<S: Subject>(s: &S, iters: u64) -> Duration {
    common::after_a_crowd(s, || {
        let _ = succeed!(s);
        timed(iters, || succeed!(s))
    })
}

/// Closed success timed on a thread started while a crowd held every owned slot,
/// while the crowd still holds them.
fn beside_a_crowd<S: Subject>(s: &S, iters: u64) -> Duration {
    common::beside_a_crowd(s, || {
        let _ = succeed!(s);
        timed(iters, || succeed!(s))
    })
}

/// [`poll_once`], never inlined: the future is moved into a function of its own
/// that polls it. The future's own `poll` may still be inlined there (it is for
/// `call_async`'s), so this is not yet a task's shape: see `common::as_a_task`.
#[inline(never)]
fn poll_out_of_line<F: Future>(f: F) -> F::Output {
    poll_once(f)
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
            // The same helper handed the breaker read from memory, not stored and
            // reloaded by `black_box` at each call (`common::loaded`).
            g.bench_function(format!("closed/helper, loaded/{}", $name), |b| {
                let slot = &s;
                b.iter_custom(|iters| timed(iters, || helper(common::loaded(&slot))))
            });
            g.bench_function(format!("closed/dyn/{}", $name), |b| {
                b.iter_custom(|iters| timed_dyn(&s, iters, false))
            });
            g.bench_function(format!("closed/dyn, shared site/{}", $name), |b| {
                b.iter_custom(|iters| timed_dyn(&s, iters, true))
            });
            g.bench_function(format!("closed/after a crowd/{}", $name), |b| {
                b.iter_custom(|iters| after_a_crowd(&s, iters))
            });
            g.bench_function(format!("closed/beside a crowd/{}", $name), |b| {
                b.iter_custom(|iters| beside_a_crowd(&s, iters))
            });
        }};
    }
    // The shape's own cost: the closure called with no breaker.
    shapes!("direct", common::Direct);
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

/// Cutout's layer: `call`, its future polled once.
fn tower_threads(layer: &CircuitBreakerLayer, threads: usize, iters: u64) -> Duration {
    across_threads(
        threads,
        iters,
        || layer.layer(echo::<()>()),
        |service| poll_once(service.call(black_box(1))).is_ok(),
    )
}

/// Cutout's layer as axum's router drives it: one service, cloned for each thread
/// and again for each request, then called.
fn tower_clones(layer: &CircuitBreakerLayer, threads: usize, iters: u64) -> Duration {
    let service = layer.layer(echo::<u16>());
    across_threads(
        threads,
        iters,
        || service.clone(),
        |service| poll_once(service.clone().call(black_box(1))).is_ok(),
    )
}

/// Wakes a thread parked on a future.
struct Unpark(std::thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// A waker that unparks the current thread.
fn parking_waker() -> Waker {
    Waker::from(Arc::new(Unpark(std::thread::current())))
}

/// `f` polled until it is ready, the thread parked while it is pending (`cx`'s
/// waker unparks it): tower-resilience's future waits for its `tokio::sync::Mutex`
/// when another thread holds it.
fn poll_parking<F: Future>(f: F, cx: &mut Context<'_>) -> F::Output {
    let mut f = pin!(f);
    loop {
        if let Poll::Ready(out) = f.as_mut().poll(cx) {
            return out;
        }
        std::thread::park();
    }
}

/// tower-resilience's layer: `poll_ready` (ready at once: the circuit is closed,
/// the inner service always ready), then `call`, its future polled to the end.
fn tower_resilience_threads(layer: &ResilienceLayer, threads: usize, iters: u64) -> Duration {
    across_threads(
        threads,
        iters,
        || (layer.layer(echo::<()>()), None),
        |(service, waker)| {
            // Made by the service's thread, at its first (warm-up) call.
            let mut cx = Context::from_waker(waker.get_or_insert_with(parking_waker));
            let ready = service.poll_ready(&mut cx);
            assert!(
                matches!(ready, Poll::Ready(Ok(()))),
                "a closed circuit is ready"
            );
            poll_parking(service.call(black_box(1)), &mut cx).is_ok()
        },
    )
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
    // Both futures moved into an out-of-line poll (`poll_out_of_line`): the
    // compiler may still inline `call_async`'s poll there, and the layer's move
    // costs a store-forwarding stall; the as-a-task and as-four-tasks rows below
    // compare like for like.
    g.bench_function("tower/call_async, polled out of line", |b| {
        b.iter_custom(|iters| {
            timed(iters, || {
                poll_out_of_line(breaker.call_async(ready(Ok::<_, ()>(black_box(1u64))))).is_ok()
            })
        })
    });
    g.bench_function("tower/layer, polled out of line", |b| {
        let mut service = layer.layer(echo::<u32>());
        b.iter_custom(|iters| {
            timed(iters, || {
                poll_out_of_line(service.call(black_box(1))).is_ok()
            })
        })
    });
    // Both polled as an executor polls a task (`common::as_a_task`): each future's
    // poll a function of its own. The error type is `u8` so that each future is a
    // type of its own: with the address of its poll taken here, the loops of the
    // other rows would stop inlining it too (see `echo`).
    g.bench_function("tower/call_async, polled as a task", |b| {
        let mut call = as_a_task(|| breaker.call_async(ready(Ok::<_, u8>(black_box(1u64)))));
        b.iter_custom(|iters| timed(iters, || call().is_ok()))
    });
    g.bench_function("tower/layer, polled as a task", |b| {
        let mut service = layer.layer(echo::<u8>());
        let mut call = as_a_task(|| service.call(black_box(1)));
        b.iter_custom(|iters| timed(iters, || call().is_ok()))
    });
    // Four futures made, then each polled (`common::four_tasks`), as an executor
    // polls tasks spawned before: no poll waits for the stores that made its
    // future, which the as-a-task rows pay (6 ns with no breaker at all).
    g.bench_function("tower/call_async, as four tasks", |b| {
        let mut four = four_tasks(|| breaker.call_async(ready(Ok::<_, u8>(black_box(1u64)))));
        b.iter_custom(|iters| timed_fours(iters, &mut four))
    });
    g.bench_function("tower/layer, as four tasks", |b| {
        let mut service = layer.layer(echo::<u8>());
        let mut four = four_tasks(|| service.call(black_box(1)));
        b.iter_custom(|iters| timed_fours(iters, &mut four))
    });
    let (peer, _handle) = ResilienceLayer::builder().build_with_handle().unwrap();
    for threads in [1, 2] {
        // Criterion's figure: wall time over one thread's calls (per thread).
        g.bench_function(format!("tower/layer, {threads} threads"), |b| {
            b.iter_custom(|iters| tower_threads(&layer, threads, iters))
        });
        g.bench_function(
            format!("tower/layer, a clone per request, {threads} threads"),
            |b| b.iter_custom(|iters| tower_clones(&layer, threads, iters)),
        );
        g.bench_function(
            format!("tower/tower-resilience layer, {threads} threads"),
            |b| b.iter_custom(|iters| tower_resilience_threads(&peer, threads, iters)),
        );
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
