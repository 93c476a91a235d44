//! What the breaker costs per call: its call path against a direct call, in a tight
//! loop on one thread.
//!
//! Measured on twins of the demo's breaker (the same builder settings), not on the
//! shared one, so that millions of extra calls do not show up in the storm's
//! counters; before the workers start, on a thread that owns its stripe, as the
//! first workers do (the rest, beyond twice the core count and at least 16, share
//! one of four shared stripes).

use crate::sim::Scenario;
use cutout::{CircuitBreaker, State};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Nanoseconds per call, medians over several rounds.
#[derive(Clone, Copy, Debug)]
pub struct Overhead {
    /// Calling the closure directly.
    pub direct: f64,
    /// Through the demo's breaker, closed: consecutive + window + slow-call
    /// policies (the slow-call policy times each call: two precise clock reads).
    pub closed: f64,
    /// The same breaker without the slow-call policy (no timing).
    pub closed_untimed: f64,
    /// A rejection by the open breaker (tripped, inside its cooldown).
    pub rejected: f64,
}

/// Short rounds, so that most run without being preempted; the median drops those
/// that were.
pub const ROUNDS: usize = 101;
/// Calls per round.
pub const CALLS: u32 = 10_000;

/// Measures; takes about `ROUNDS * CALLS * 60 ns` (~0.06 s).
pub fn measure(scenario: &Scenario) -> Overhead {
    let build = |b: cutout::Builder| {
        b.build()
            .expect("the demo's breaker configuration is valid")
    };
    let closed = build(scenario.breaker(CircuitBreaker::builder()));
    let untimed = build(
        CircuitBreaker::builder()
            .consecutive_failures(10)
            .window(scenario.breaker_window(), 10)
            .failure_rate(0.5, 20),
    );
    // Tripped the way the demo's breaker trips, with a cooldown that outlasts the
    // measurement (a forced-open breaker takes a slower, manual path).
    let open = build(
        scenario
            .breaker(CircuitBreaker::builder())
            .open_duration(Duration::from_secs(3600))
            .max_open_duration(Duration::from_secs(3600)),
    );
    while open.state() == State::Closed {
        let _ = open.call(|| Err::<u64, ()>(()));
    }

    // Each call site has a closure of its own, as an application's would: the
    // compiler inlines each breaker call into its loop as it would there.
    let mut samples = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
    for _ in 0..ROUNDS {
        samples[0].push(per_call(|| {
            let _ = black_box(Ok::<u64, ()>(black_box(1)));
        }));
        samples[1].push(per_call(|| {
            let _ = black_box(closed.call(|| Ok::<u64, ()>(black_box(1))));
        }));
        samples[2].push(per_call(|| {
            let _ = black_box(untimed.call(|| Ok::<u64, ()>(black_box(1))));
        }));
        samples[3].push(per_call(|| {
            let _ = black_box(open.call(|| Ok::<u64, ()>(black_box(1))));
        }));
    }
    let [direct, closed, closed_untimed, rejected] = samples.map(median);
    Overhead {
        direct,
        closed,
        closed_untimed,
        rejected,
    }
}

fn per_call(mut f: impl FnMut()) -> f64 {
    let start = Instant::now();
    for _ in 0..CALLS {
        f();
    }
    start.elapsed().as_nanos() as f64 / f64::from(CALLS)
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}
