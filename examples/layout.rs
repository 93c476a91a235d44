//! One closed call's wall time under a chosen memory layout, for
//! `benches/layout.sh`, which varies the layout and reports the spread.
//!
//! `layout <inline|dyn> <calls>`: a default-window breaker (10 s, 10 buckets), one
//! warm-up call, then the best of five timed runs of `calls` successful calls,
//! printed in picoseconds per call. What moves the layout:
//! - `HEAP_PAD` (environment, bytes): allocated, and kept, before the breaker, so
//!   the breaker, its stripe room and its stripe land elsewhere in the heap;
//! - the stack: the script pads the environment (which sits above the stack)
//!   under `setarch -R` (no address randomization), so every stack address moves;
//! - code alignment: not varied by the script; rebuild with LLVM's alignment flags
//!   (for example `RUSTFLAGS="-C llvm-args=-align-loops=64"`) and run it again, as
//!   the report's five code-alignment builds were made.

use cutout::CircuitBreaker;
use std::hint::black_box;
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: layout <inline|dyn> <calls>";
    let [shape, calls] = args.as_slice() else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let calls: u64 = calls.parse().unwrap_or_else(|_| {
        eprintln!("{usage}");
        std::process::exit(2);
    });
    let pad: usize = std::env::var("HEAP_PAD")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    let padding = black_box(vec![0u8; pad]);
    let breaker = CircuitBreaker::builder()
        .window(Duration::from_secs(10), 10)
        .build()
        .expect("a valid configuration");
    let call = || breaker.call(|| Ok::<_, ()>(black_box(1u64))).is_ok();
    assert!(call());
    let best = match shape.as_str() {
        "inline" => (0..5).map(|_| timed(calls, &call)).min(),
        "dyn" => {
            let f: &dyn Fn() -> bool = &call;
            (0..5).map(|_| timed(calls, || black_box(f)())).min()
        }
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    };
    let best = best.unwrap_or_default();
    println!("{}", best.as_nanos() * 1000 / u128::from(calls.max(1)));
    drop(padding);
}

#[inline(never)]
fn timed(calls: u64, mut f: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    for _ in 0..calls {
        black_box(f());
    }
    start.elapsed()
}
