//! Memory figures for `benches/report.sh`: the breaker's size, its heap, and the
//! allocations per call of every implementation in each scenario, counted by a
//! global allocator (this thread's allocations only).

#[allow(dead_code)]
#[path = "../benches/common/mod.rs"]
mod common;

#[path = "../benches/common/counting_alloc.rs"]
mod counting_alloc;

use common::{Run, Subject, fail, succeed};
use counting_alloc::allocations_in;
use cutout::{CircuitBreaker, ManualClock};
use std::time::Duration;

const CALLS: u64 = 10_000;

struct PerCall {
    fail: bool,
    per_call: f64,
}

impl Run for PerCall {
    fn run<S: Subject>(&mut self, s: &S) {
        let call = |s: &S| if self.fail { fail!(s) } else { succeed!(s) };
        call(s); // warm-up: per-thread set-up is not a per-call cost
        let n = allocations_in(|| {
            for _ in 0..CALLS {
                std::hint::black_box(call(s));
            }
        });
        self.per_call = n as f64 / CALLS as f64;
    }
}

fn main() {
    let default = CircuitBreaker::builder().build().unwrap();
    let consecutive = CircuitBreaker::builder()
        .consecutive_failures(5)
        .build()
        .unwrap();
    let manual = CircuitBreaker::builder()
        .clock(ManualClock::new())
        .build()
        .unwrap();
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    println!("| memory | bytes |");
    println!("|---|---|");
    println!(
        "| `size_of::<CircuitBreaker>()` (default clock) | {} |",
        std::mem::size_of_val(&default)
    );
    println!(
        "| `size_of::<CircuitBreaker<ManualClock>>()` | {} |",
        std::mem::size_of_val(&manual)
    );
    let long = CircuitBreaker::builder()
        .window(Duration::from_secs(60), 60)
        .build()
        .unwrap();
    // Stripes come with the threads that write them: none before a call, one per
    // writing thread after.
    for (name, b) in [
        ("default window (10 s, 10 buckets)", &default),
        ("consecutive failures only", &consecutive),
        ("60-bucket window", &long),
    ] {
        let unused = b.heap_bytes();
        let _ = b.call(|| Ok::<_, ()>(()));
        let one = b.heap_bytes();
        std::thread::scope(|s| {
            s.spawn(|| b.call(|| Ok::<_, ()>(())));
        });
        println!(
            "| `heap_bytes()`, {name}, {cores} cores: unused / one thread / two threads | {unused} / {one} / {} |",
            b.heap_bytes()
        );
    }
    println!();
    println!(
        "| allocations per call | closed success | open rejection | failure below threshold |"
    );
    println!("|---|---|---|---|");
    let mut names = common::names("closed");
    for n in common::names("open")
        .into_iter()
        .chain(common::names("failing"))
    {
        if !names.contains(&n) {
            names.push(n);
        }
    }
    for name in names {
        let mut cells = Vec::new();
        for scenario in ["closed", "open", "failing"] {
            let mut run = PerCall {
                fail: scenario == "failing",
                per_call: 0.0,
            };
            cells.push(if common::run_one(scenario, &name, &mut run) {
                format!("{}", run.per_call)
            } else {
                "-".to_string()
            });
        }
        println!("| {name} | {} |", cells.join(" | "));
    }
}
