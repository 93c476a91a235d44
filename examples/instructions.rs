//! Makes N calls through one implementation, for `benches/instructions.sh` to count
//! under callgrind: `instructions <closed|open|failing> <name> <calls>`.
//!
//! The calls run in `drive_succeed` / `drive_fail` (never inlined), so callgrind can
//! collect inside them only (`--toggle-collect=*drive_*`) and `objdump` can find
//! them. One warm-up call runs first, outside them, so per-thread set-up (cutout's
//! stripe slot, a clock's first read) is not counted.
//! `instructions list <scenario>` prints the implementations. An optional fourth
//! argument runs that many threads on the one breaker, each making `calls` calls
//! (callgrind runs them one at a time, so this counts what each call executes when
//! threads share a breaker, not how they contend).
//!
//! `SHAPE` (environment) changes how or where the calls are made:
//! - `helper`: through one shared generic helper that is not inlined
//!   (`#[inline(never)]`, as a helper called from many places would be);
//! - `dyn`: through a `&dyn Fn() -> bool`;
//! - `fresh`: on a thread whose first call is the measured kind (for `open`: a
//!   rejection first; the breaker was tripped by another thread);
//! - `crowd`: on a thread started while a crowd of threads held every owned stripe
//!   slot, measured after the crowd exited (its slot history);
//! - `beside`: on a thread started while a crowd of threads held every owned
//!   stripe slot, measured while the crowd still holds them (cutout: a thread on
//!   a shared stripe for its whole run);
//! - `tower`: closed, for cutout: `call`, `call_async`, the tower layer (called,
//!   and cloned for each call as axum's router does), and the tower layer's former
//!   shape (a permit holding the breaker's `Arc`); and tower-resilience 0.13's
//!   layer (`tower_resilience`, its default config), driven as a tower client
//!   drives it: `poll_ready`, then `call`.
//!
//! Scenario `ramp`: successful calls to a breaker in the middle of a ramp-up
//! (`Builder::ramp_up`), its share frozen (a `ManualClock`) at 10%, 50% or 90%
//! (`cutout_ramp_10` ...): each call is an admission decision, then either a
//! rejection or an admitted call and its recorded success.
//!
//! Scenario `candidates`: closed successes through a breaker with 0 to 3
//! what-if candidates (`Builder::candidate`, each with the live breaker's
//! settings), consecutive-failure or rate-window (`cutout_window_1` ...): the
//! growth per candidate is what each costs a call.

#[allow(dead_code)]
#[path = "../benches/common/mod.rs"]
mod common;

use common::{Run, Subject, drive_helper, drive_succeed, fail, succeed};
use cutout::{CircuitBreaker, ManualClock, State};
use std::hint::black_box;
use std::sync::Barrier;
use std::time::Duration;

/// A breaker recovering on a `ManualClock` (scenario `ramp`).
struct Ramp(CircuitBreaker<ManualClock>);

impl Subject for Ramp {
    #[inline]
    fn call(&self, f: impl FnOnce() -> Result<u64, u64>) -> bool {
        self.0.call(f).is_ok()
    }
}

/// The `candidates` scenario's implementations: (name, a rate window, candidates).
const CANDIDATES: [(&str, bool, usize); 8] = [
    ("cutout_consecutive_0", false, 0),
    ("cutout_consecutive_1", false, 1),
    ("cutout_consecutive_2", false, 2),
    ("cutout_consecutive_3", false, 3),
    ("cutout_window_0", true, 0),
    ("cutout_window_1", true, 1),
    ("cutout_window_2", true, 2),
    ("cutout_window_3", true, 3),
];

/// A breaker of the `candidates` scenario: `cutout_consecutive` or
/// `cutout_window`'s settings (see `benches/common`), with `n` candidates of the
/// same settings.
fn with_candidates(window: bool, n: usize) -> common::Cutout {
    let settings = |b: cutout::Builder| match window {
        true => b.window(Duration::from_secs(10), 10).failure_rate(0.5, 20),
        false => b.consecutive_failures(5),
    };
    let mut b = settings(CircuitBreaker::builder()).open_duration(common::LONG);
    for i in 0..n {
        b = b.candidate(format!("c{i}"), settings(CircuitBreaker::builder()));
    }
    common::Cutout(b.build().unwrap())
}

/// The `ramp` scenario's implementations: the share each admits.
const RAMP_SHARES: [(&str, f64); 3] = [
    ("cutout_ramp_10", 0.1),
    ("cutout_ramp_50", 0.5),
    ("cutout_ramp_90", 0.9),
];

/// A consecutive-failure breaker (as `cutout_consecutive`) with a one-hour ramp,
/// tripped, probed and held `share` of the way up its ramp.
fn ramp(share: f64) -> Ramp {
    const RAMP: Duration = Duration::from_secs(3600);
    let clock = ManualClock::new();
    let b = CircuitBreaker::builder()
        .consecutive_failures(5)
        .ramp_up(RAMP)
        .clock(clock.clone())
        .build()
        .unwrap();
    for _ in 0..5 {
        let _ = b.call(|| Err::<(), _>(()));
    }
    clock.advance(Duration::from_secs(1));
    let _ = b.call(|| Ok::<_, ()>(()));
    assert_eq!(b.state(), State::Recovering);
    clock.advance(RAMP.mul_f64((share - 0.1) / 0.9));
    Ramp(b)
}

/// Scenario `failing`, implementation `cutout_window_whole`: here `cutout_window`
/// (10 s, ten buckets, never tripping) on a `ManualClock`, with a failure and a
/// success in each of its ten buckets, so that a failure's trip check reads a
/// whole window (nine finalized buckets and the live one), as it does after ten
/// seconds of a real service, the same at every run (the benches' version, on the
/// real clock, waits out a shorter window). The other `failing` rows run for a
/// fraction of a second: a young window, in one bucket.
fn window_whole() -> common::Cutout<ManualClock> {
    let clock = ManualClock::new();
    let b = CircuitBreaker::builder()
        .window(Duration::from_secs(10), 10)
        .failure_rate(0.5, u32::MAX)
        .clock(clock.clone())
        .build()
        .unwrap();
    for second in 0..10 {
        if second > 0 {
            clock.advance(Duration::from_secs(1));
        }
        let _ = b.call(|| Err::<(), _>(()));
        let _ = b.call(|| Ok::<_, ()>(()));
    }
    let counts = b.metrics().window;
    assert_eq!((counts.calls, counts.failures), (20, 10), "a whole window");
    common::Cutout(b)
}

#[inline(never)]
fn drive_fail<S: Subject>(s: &S, calls: u64) -> u64 {
    let mut ran = 0;
    for _ in 0..calls {
        ran += u64::from(fail!(black_box(s)));
    }
    ran
}

#[inline(never)]
fn drive_dyn(f: &dyn Fn() -> bool, calls: u64) -> u64 {
    let mut ran = 0;
    for _ in 0..calls {
        ran += u64::from(black_box(f)());
    }
    ran
}

#[derive(Clone, Copy, PartialEq)]
enum Shape {
    Inline,
    Helper,
    Dyn,
    Fresh,
    Crowd,
    Beside,
}

struct Drive {
    shape: Shape,
    fail: bool,
    calls: u64,
    threads: usize,
    ran: u64,
}

impl Drive {
    /// `calls` successful calls, inlined, on one thread.
    fn successes(calls: u64) -> Drive {
        Drive {
            shape: Shape::Inline,
            fail: false,
            calls,
            threads: 1,
            ran: 0,
        }
    }

    /// One thread's calls. Every thread makes its warm-up call (which takes its
    /// stripe slot) before any starts measuring, so all hold distinct slots.
    fn one<S: Subject>(&self, s: &S, started: &Barrier) -> u64 {
        // Warm-up, not counted.
        let _ = if self.fail { fail!(s) } else { succeed!(s) };
        started.wait();
        match (self.fail, self.shape) {
            (true, _) => drive_fail(s, self.calls),
            (false, Shape::Helper) => drive_helper(s, self.calls),
            (false, Shape::Dyn) => drive_dyn(&|| succeed!(s), self.calls),
            (false, _) => drive_succeed(s, self.calls),
        }
    }
}

impl Run for Drive {
    fn run<S: Subject>(&mut self, s: &S) {
        if self.shape == Shape::Fresh {
            let this = &*self;
            self.ran = std::thread::scope(|scope| {
                scope
                    .spawn(move || this.one(s, &Barrier::new(1)))
                    .join()
                    .unwrap()
            });
            return;
        }
        if self.shape == Shape::Crowd {
            self.ran = common::after_a_crowd(s, || self.one(s, &Barrier::new(1)));
            return;
        }
        if self.shape == Shape::Beside {
            self.ran = common::beside_a_crowd(s, || self.one(s, &Barrier::new(1)));
            return;
        }
        if self.threads <= 1 {
            self.ran = self.one(s, &Barrier::new(1));
            return;
        }
        let this = &*self;
        let started = &Barrier::new(self.threads);
        let ran: u64 = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..this.threads)
                .map(|_| scope.spawn(move || this.one(s, started)))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        self.ran = ran / self.threads as u64;
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: instructions <closed|open|failing|ramp|candidates> <name> <calls> | instructions list <scenario>";
    match args.as_slice() {
        [list, scenario] if list == "list" && scenario == "tower" => {
            for name in tower::NAMES {
                println!("{name}");
            }
        }
        [list, candidates] if list == "list" && candidates == "candidates" => {
            for (name, _, _) in CANDIDATES {
                println!("{name}");
            }
        }
        [scenario, name, calls] if scenario == "candidates" => {
            let calls: u64 = calls.parse().expect(usage);
            let (_, window, n) = CANDIDATES
                .iter()
                .find(|(c, _, _)| c == name)
                .expect("no such candidates implementation");
            let mut drive = Drive::successes(calls);
            drive.run(&with_candidates(*window, *n));
            assert_eq!(drive.ran, calls, "{name}: calls that ran");
            println!("candidates {name}: {calls} calls");
        }
        [list, ramp] if list == "list" && ramp == "ramp" => {
            for (name, _) in RAMP_SHARES {
                println!("{name}");
            }
        }
        [scenario, name, calls] if scenario == "ramp" => {
            let calls: u64 = calls.parse().expect(usage);
            let (_, share) = RAMP_SHARES
                .iter()
                .find(|(n, _)| n == name)
                .expect("no such ramp implementation");
            let mut drive = Drive::successes(calls);
            drive.run(&ramp(*share));
            let want = share * calls as f64;
            assert!(
                (drive.ran as f64 - want).abs() <= 2.0,
                "{name}: {} ran",
                drive.ran
            );
            println!("ramp {name}: {calls} calls, {} ran", drive.ran);
        }
        [list, scenario] if list == "list" => {
            for name in common::names(scenario) {
                println!("{name}");
            }
        }
        [scenario, name, calls, rest @ ..] if rest.len() <= 1 => {
            let calls: u64 = calls.parse().expect(usage);
            let threads: usize = rest.first().map_or(1, |t| t.parse().expect(usage));
            let shape = match std::env::var("SHAPE").as_deref() {
                Ok("helper") => Shape::Helper,
                Ok("dyn") => Shape::Dyn,
                Ok("fresh") => Shape::Fresh,
                Ok("crowd") => Shape::Crowd,
                Ok("beside") => Shape::Beside,
                _ => Shape::Inline,
            };
            if scenario == "tower" {
                tower::run(name, calls);
                return;
            }
            let mut drive = Drive {
                shape,
                fail: scenario == "failing",
                calls,
                threads,
                ran: 0,
            };
            let found = if (scenario.as_str(), name.as_str()) == ("failing", "cutout_window_whole")
            {
                drive.run(&window_whole());
                true
            } else {
                common::run_one(scenario, name, &mut drive)
            };
            assert!(found, "no implementation {name} in scenario {scenario}");
            let expected = if scenario == "open" { 0 } else { calls };
            assert_eq!(drive.ran, expected, "{name}: calls that ran");
            println!(
                "{scenario} {name}: {threads} thread(s) x {calls} calls, {} ran each",
                drive.ran
            );
        }
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    }
}

/// The async and tower shapes of one closed breaker (10 s window, the default),
/// each polled once with a no-op waker; and tower-resilience's layer (its
/// defaults: a count-based window of 100 calls) over the same service, the same
/// way, after its `poll_ready` (where it checks its circuit). On one thread its
/// `tokio::sync::Mutex` is never held by another, so its boxed future is ready at
/// the first poll, and no tokio runtime is needed while the circuit is closed.
mod tower {
    use super::black_box;
    use super::common::{as_a_task, echo, poll_once};
    use cutout::{CircuitBreaker, CircuitBreakerLayer, Outcome};
    use std::future::ready;
    use std::sync::Arc;
    use std::task::{Context, Poll, Waker};
    use tower::{Layer, Service};
    use tower_resilience::circuitbreaker::CircuitBreakerLayer as ResilienceLayer;

    pub const NAMES: [&str; 8] = [
        "call",
        "call_async",
        "call_async_as_a_task",
        "tower_layer",
        "tower_layer_as_a_task",
        "tower_clone_per_call",
        "tower_arc_permit",
        "tower_resilience",
    ];

    pub fn run(name: &str, calls: u64) {
        let breaker = Arc::new(CircuitBreaker::builder().build().unwrap());
        let layer = CircuitBreakerLayer::new(breaker.clone());
        let mut service = layer.layer(echo::<()>());
        // As in the shapes bench: services from this layer share one circuit.
        let (peer, _handle) = ResilienceLayer::builder().build_with_handle().unwrap();
        let mut resilient = peer.layer(echo::<()>());
        let ran = match name {
            "call" => drive_tower(
                || breaker.call(|| Ok::<_, ()>(black_box(1u64))).is_ok(),
                calls,
            ),
            "call_async" => drive_tower(
                || poll_once(breaker.call_async(ready(Ok::<_, ()>(black_box(1u64))))).is_ok(),
                calls,
            ),
            // Both futures polled as an executor polls a task (`common::as_a_task`):
            // each poll a function of its own, as the layer's always is. The call's
            // error type is `u8` so that its future is a type of its own: the
            // `call_async` row's poll, its address taken here, would no longer be
            // inlined there either (125 instructions, not 76).
            "call_async_as_a_task" => {
                let mut call =
                    as_a_task(|| breaker.call_async(ready(Ok::<_, u8>(black_box(1u64)))));
                drive_tower(|| call().is_ok(), calls)
            }
            "tower_layer_as_a_task" => {
                let mut service = layer.layer(echo::<u8>());
                let mut call = as_a_task(|| service.call(black_box(1u64)));
                drive_tower(|| call().is_ok(), calls)
            }
            "tower_layer" => {
                drive_tower(|| poll_once(service.call(black_box(1u64))).is_ok(), calls)
            }
            // As axum's router drives a service: a clone for each request.
            "tower_clone_per_call" => {
                let service = layer.layer(echo::<u16>());
                drive_tower(
                    || poll_once(service.clone().call(black_box(1u64))).is_ok(),
                    calls,
                )
            }
            // What the layer did before its spare holds: a permit that clones the
            // breaker's `Arc`, recorded when the ready response arrives.
            "tower_arc_permit" => drive_tower(
                || match breaker.try_acquire_owned() {
                    Ok(permit) => {
                        let result = poll_once(ready(Ok::<_, ()>(black_box(1u64))));
                        permit.record(Outcome::of(&result));
                        result.is_ok()
                    }
                    Err(_) => false,
                },
                calls,
            ),
            "tower_resilience" => drive_tower(
                || {
                    let ready = resilient.poll_ready(&mut Context::from_waker(Waker::noop()));
                    assert!(
                        matches!(ready, Poll::Ready(Ok(()))),
                        "a closed circuit is ready"
                    );
                    poll_once(resilient.call(black_box(1u64))).is_ok()
                },
                calls,
            ),
            _ => panic!("no tower shape {name}"),
        };
        assert_eq!(ran, calls);
        println!("tower {name}: {calls} calls");
    }

    /// One warm-up call (the thread's slot and stripe), then the measured ones.
    fn drive_tower(mut once: impl FnMut() -> bool, calls: u64) -> u64 {
        let _ = once();
        drive_tower_calls(&mut once, calls)
    }

    #[inline(never)]
    fn drive_tower_calls(once: &mut impl FnMut() -> bool, calls: u64) -> u64 {
        let mut ran = 0;
        for _ in 0..calls {
            ran += u64::from(once());
        }
        ran
    }
}
