//! The call shapes timed in pairs, for a machine too noisy for criterion's
//! ratios: `paired [rounds] [calls] [sync|async]` (defaults 400, 20,000, both).
//!
//! Criterion measures one shape for seconds, then the next; on a shared machine
//! the state moves between them (the same code measured 0.89x to 2.95x of itself
//! across four runs in one hour on the 2-vCPU Zen 4). Here
//! every round times `calls` calls of every shape of every implementation, one
//! after another within a millisecond, so a ratio is taken between two timings
//! made under the same conditions. The report gives the median of those
//! per-round ratios with its quartiles, and the ratio of the fastest rounds (the
//! machine at its quietest). The shapes are those of `benches/shapes.rs` and of
//! `examples/instructions.rs` (`SHAPE=`), each in a loop of its own that is never
//! inlined:
//!
//! - `inline`: the closure written at the call site, the call inlined into the loop;
//! - `helper`: through one shared generic helper that is not inlined;
//! - `dyn`: through a `&dyn Fn() -> bool` made opaque once (a callback held in a
//!   struct), so each call is an indirect call, from a loop of the
//!   implementation's own (`common::drive_dyn`);
//! - `dyn, shared site`: the same through one loop that every implementation's
//!   callback goes through in turn (`common::drive_dyn_shared`), as a
//!   dispatcher's over many callbacks: the site's own cost, up to 3 cycles a
//!   call on the Zen 4 by callee (none on the `direct` row's there), which the
//!   `added` ratio takes out;
//! - `inline, loaded` and `helper, loaded`: the first two with the breaker read
//!   from memory at each call (`common::drive_succeed_loaded`), as a caller
//!   reaches one kept in a struct field, instead of passed through `black_box`,
//!   which stores it and loads it straight back: a round trip a CPU without
//!   memory renaming (a Zen 1) charges to the shape. `dyn` reaches its breaker
//!   so already (a load from the closure).
//!
//! And the async shapes (`benches/shapes.rs`'s `tower/` rows), each polled once
//! with a no-op waker: `call_async` inlined whole into the loop that polls it, and
//! the tower layer over an always-ready service polled in that loop (its `call`
//! and `poll` stay functions of their own); then both polled as an executor polls
//! a task (`common::as_a_task`), and four at a time (`common::four_tasks`):
//! the like-for-like pairs. Beside them, the sync `call` on the same breaker,
//! and `call_async` polled in place in a second loop (`poll_in_place!`), as an
//! `.await` polls it: the same future type as the first loop's, so its poll has
//! two callers, which the compiler may call instead of inlining, unless it must
//! (`docs/PERFORMANCE.md`, "Call shapes").
//!
//! Each ratio is printed twice: the whole call (`total`), and what the breaker
//! adds (`added`: the time less that of the same shape with no breaker, `direct`,
//! in the same round) against what it adds in the shape compared with. The order
//! of the shapes turns each round, so none is always first.

#[allow(dead_code)]
#[path = "../benches/common/mod.rs"]
mod common;

use common::{
    Subject, as_a_task, drive_dyn, drive_dyn_shared, drive_helper, drive_helper_loaded,
    drive_succeed, drive_succeed_loaded, echo, four_tasks, poll_once, succeed,
};
use cutout::{CircuitBreaker, CircuitBreakerLayer};
use std::future::ready;
use std::hint::black_box;
use std::time::Instant;
use tower::{Layer, Service};

const SHAPES: [&str; 6] = [
    "inline",
    "helper",
    "dyn",
    "inline, loaded",
    "helper, loaded",
    "dyn, shared site",
];
/// Columns a subject takes in a round: one a shape.
const N: usize = SHAPES.len();

/// Nanoseconds per call of one shape of one implementation, `calls` calls.
fn time<S: Subject>(s: &S, shape: usize, calls: u64) -> f64 {
    let call = || succeed!(s);
    let f: &dyn Fn() -> bool = black_box(&call);
    let start = Instant::now();
    let ran = match shape {
        0 => drive_succeed(s, calls),
        1 => drive_helper(s, calls),
        2 => drive_dyn::<S>(f, calls),
        3 => drive_succeed_loaded(s, calls),
        4 => drive_helper_loaded(s, calls),
        _ => drive_dyn_shared(f, calls),
    };
    let ns = start.elapsed().as_nanos() as f64 / calls as f64;
    assert_eq!(ran, calls, "a closed breaker runs every call");
    ns
}

/// Polls a future once in place, with a no-op waker, as `.await` polls one: a
/// second writing of `common::poll_once`, so that each is the only caller of its
/// own instantiation while the future's poll has both as callers.
macro_rules! poll_in_place {
    ($f:expr) => {{
        let f = std::pin::pin!($f);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        match std::future::Future::poll(f, &mut cx) {
            std::task::Poll::Ready(out) => out,
            std::task::Poll::Pending => unreachable!("the future is ready"),
        }
    }};
}

/// `once` makes `per` calls and says how many succeeded.
#[inline(never)]
fn drive_async(once: &mut impl FnMut() -> u64, per: u64, calls: u64) -> u64 {
    let mut ran = 0;
    for _ in 0..calls / per {
        ran += once();
    }
    ran
}

/// Nanoseconds per call of `once`, which makes `per` calls, over `calls` calls.
fn time_async(per: u64, mut once: impl FnMut() -> u64, calls: u64) -> f64 {
    let calls = calls / per * per;
    let start = Instant::now();
    let ran = drive_async(&mut once, per, calls);
    let ns = start.elapsed().as_nanos() as f64 / calls as f64;
    assert_eq!(ran, calls, "a closed breaker runs every call");
    ns
}

fn ok<E>(r: Result<u64, E>) -> u64 {
    u64::from(r.is_ok())
}

/// The `q` quantile of `v` (sorted here), by nearest rank.
fn quantile(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}

/// "median (quartiles)" of `v`.
fn summary(mut v: Vec<f64>) -> String {
    let (lo, mid, hi) = (
        quantile(&mut v, 0.25),
        quantile(&mut v, 0.5),
        quantile(&mut v, 0.75),
    );
    format!("{mid:5.2} ({lo:.2}-{hi:.2})")
}

/// The fastest of a column's timings: the machine at its quietest.
fn fastest(times: &[Vec<f64>], column: usize) -> f64 {
    times
        .iter()
        .map(|t| t[column])
        .fold(f64::INFINITY, f64::min)
}

/// A ratio between two columns of a round's timings: its name, the numerator's
/// column, the denominator's, and the columns of the same two shapes with no
/// breaker. `total` is numerator / denominator; `added` is what the breaker adds
/// to each, (numerator - its direct) / (denominator - its direct).
type Ratio = (String, usize, usize, usize, usize);

/// Prints each column's time and each ratio over the rounds of `times`
/// (`times[round][column]`, ns per call): the median of the rounds with its
/// quartiles, and the fastest round (for a ratio, the ratio of the fastest
/// rounds). This machine moves between a fast and a slow state for seconds at a
/// time; the fastest rounds are all from the fast one.
fn report(times: &[Vec<f64>], columns: &[&str], ratios: &[Ratio]) {
    println!("ns per call: median (quartiles), fastest");
    for (c, name) in columns.iter().enumerate() {
        let v = times.iter().map(|t| t[c]).collect();
        println!("  {name:<37} {}  {:5.2}", summary(v), fastest(times, c));
    }
    println!("ratios: median of the per-round ratios (quartiles), ratio of the fastest");
    for &(ref name, num, den, num_direct, den_direct) in ratios {
        let total = times.iter().map(|t| t[num] / t[den]).collect();
        let added = times
            .iter()
            .map(|t| (t[num] - t[num_direct]) / (t[den] - t[den_direct]))
            .collect();
        let f = |c| fastest(times, c);
        println!(
            "  {name:<37} total {} {:4.2}  added {} {:4.2}",
            summary(total),
            f(num) / f(den),
            summary(added),
            (f(num) - f(num_direct)) / (f(den) - f(den_direct)),
        );
    }
}

/// A boxed timer of `s`'s shapes: `time(s, shape, calls)`.
fn timer<S: Subject + 'static>(s: S) -> Box<dyn Fn(usize, u64) -> f64> {
    Box::new(move |shape, calls| time(&s, shape, calls))
}

/// The sync shapes: each implementation `inline`, through the `helper` and
/// through the `dyn`. Beside cutout's two policies, the same shapes with no
/// breaker (`direct`, which every `added` is taken against), the two floors of
/// `benches/common` (a load of a state word; that and a locked increment of the
/// thread's stripe) and failsafe: a call that costs less or more inline, to show
/// how the ratio follows the inline call's cost.
fn sync_shapes(rounds: usize, calls: u64) {
    let subjects = [
        ("direct", timer(common::Direct)),
        ("cutout_window", timer(common::cutout_window(20))),
        ("cutout_consecutive", timer(common::cutout_consecutive(5))),
        ("floor_load", timer(common::FloorLoad::new(false))),
        ("floor_striped", timer(common::FloorStriped::new(false))),
        (
            "failsafe_consecutive",
            timer(common::failsafe_consecutive(5, common::LONG)),
        ),
    ];
    // Column N * implementation + shape.
    let mut times = vec![vec![0.0; N * subjects.len()]; rounds];
    for (round, t) in times.iter_mut().enumerate() {
        for k in 0..SHAPES.len() {
            let shape = (round + k) % SHAPES.len();
            for (i, (_, time)) in subjects.iter().enumerate() {
                t[N * i + shape] = time(shape, calls);
            }
        }
    }
    let columns: Vec<String> = subjects
        .iter()
        .flat_map(|(n, _)| SHAPES.iter().map(move |s| format!("{n}, {s}")))
        .collect();
    let columns: Vec<&str> = columns.iter().map(String::as_str).collect();
    let ratios: Vec<Ratio> = (1..subjects.len())
        .flat_map(|i| {
            let name = subjects[i].0;
            [
                (format!("{name}, helper / inline"), N * i + 1, N * i, 1, 0),
                (format!("{name}, dyn / inline"), N * i + 2, N * i, 2, 0),
                (
                    format!("{name}, helper / inline, loaded"),
                    N * i + 4,
                    N * i + 3,
                    4,
                    3,
                ),
                (
                    format!("{name}, dyn / inline, loaded"),
                    N * i + 2,
                    N * i + 3,
                    2,
                    3,
                ),
                (
                    format!("{name}, dyn, shared site / inline"),
                    N * i + 5,
                    N * i,
                    5,
                    0,
                ),
            ]
        })
        .collect();
    report(&times, &columns, &ratios);
}

/// The async shapes: no breaker, `call_async` and the tower layer (over the
/// default breaker, a 10 s window), each in the loop, as a task, and as four
/// tasks; and the sync `call` on the same breaker, which `call_async` is compared
/// with (DESIGN.md: within 2x).
fn async_shapes(rounds: usize, calls: u64) {
    let breaker = std::sync::Arc::new(CircuitBreaker::builder().build().unwrap());
    // As a task, the futures' and the services' error type is `u8`, so that each
    // future and service is a type of its own whose `call` and `poll` have only
    // the in-the-loop row as their caller there, as `call_async`'s do. (With one
    // type for both rows, the layer's `poll` was one function, its address taken
    // for the task, and the compiler did not inline it into the loop.)
    let layer = CircuitBreakerLayer::new(breaker.clone());
    let mut service = layer.layer(echo::<()>());
    let (mut for_task, mut for_tasks) = (layer.layer(echo::<u8>()), layer.layer(echo::<u8>()));
    let mut direct_task = as_a_task(|| ready(Ok::<_, u8>(black_box(1u64))));
    let mut call_async_task = as_a_task(|| breaker.call_async(ready(Ok::<_, u8>(black_box(1u64)))));
    let mut layer_task = as_a_task(move || for_task.call(black_box(1u64)));
    let mut direct_tasks = four_tasks(|| ready(Ok::<_, u8>(black_box(1u64))));
    let mut call_async_tasks =
        four_tasks(|| breaker.call_async(ready(Ok::<_, u8>(black_box(1u64)))));
    let mut layer_tasks = four_tasks(move || for_tasks.call(black_box(1u64)));
    const COLUMNS: [&str; 11] = [
        "direct, in the loop",
        "call_async, in the loop",
        "layer, in the loop",
        "direct, as a task",
        "call_async, as a task",
        "layer, as a task",
        "direct, as four tasks",
        "call_async, as four tasks",
        "layer, as four tasks",
        "call, in the loop",
        "call_async, a second loop",
    ];
    let mut times = vec![vec![0.0; COLUMNS.len()]; rounds];
    for (round, t) in times.iter_mut().enumerate() {
        for k in 0..COLUMNS.len() {
            let column = (round + k) % COLUMNS.len();
            t[column] = match column {
                0 => time_async(
                    1,
                    || ok(poll_once(ready(Ok::<_, ()>(black_box(1u64))))),
                    calls,
                ),
                1 => time_async(
                    1,
                    || {
                        ok(poll_once(
                            breaker.call_async(ready(Ok::<_, ()>(black_box(1u64)))),
                        ))
                    },
                    calls,
                ),
                2 => time_async(1, || ok(poll_once(service.call(black_box(1u64)))), calls),
                3 => time_async(1, || ok(direct_task()), calls),
                4 => time_async(1, || ok(call_async_task()), calls),
                5 => time_async(1, || ok(layer_task()), calls),
                6 => time_async(4, &mut direct_tasks, calls),
                7 => time_async(4, &mut call_async_tasks, calls),
                8 => time_async(4, &mut layer_tasks, calls),
                9 => time_async(
                    1,
                    || ok(breaker.call(|| Ok::<_, ()>(black_box(1u64)))),
                    calls,
                ),
                _ => time_async(
                    1,
                    || {
                        ok(poll_in_place!(
                            breaker.call_async(ready(Ok::<_, ()>(black_box(1u64))))
                        ))
                    },
                    calls,
                ),
            };
        }
    }
    let ratios: [Ratio; 5] = [
        ("call_async / call, in the loop".into(), 1, 9, 0, 0),
        ("call_async, a second loop / call".into(), 10, 9, 0, 0),
        ("layer / call_async, in the loop".into(), 2, 1, 0, 0),
        ("layer / call_async, as a task".into(), 5, 4, 3, 3),
        ("layer / call_async, as four tasks".into(), 8, 7, 6, 6),
    ];
    report(&times, &COLUMNS, &ratios);
}

fn main() {
    let usage = "usage: paired [rounds] [calls] [sync|async]";
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().map_or(400, |a| a.parse().expect(usage));
    let calls: u64 = args.next().map_or(20_000, |a| a.parse().expect(usage));
    let which = args.next().unwrap_or_default();
    assert!(rounds > 0 && calls > 0, "{usage}");
    println!("{rounds} rounds of {calls} calls per shape");
    if which != "async" {
        sync_shapes(rounds, calls);
    }
    if which != "sync" {
        async_shapes(rounds, calls);
    }
}
