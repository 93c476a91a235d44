//! Memory figures for `benches/report.sh`: the breaker's size, its heap, the
//! memory per key of every implementation (cutout at this machine's core count,
//! or at a simulated one: `memory per-key 64`), and the allocations per call of
//! every implementation in each scenario, counted by a global allocator (this
//! thread's allocations only).

#[allow(dead_code)]
#[path = "../benches/common/mod.rs"]
mod common;

#[path = "../benches/common/counting_alloc.rs"]
mod counting_alloc;

use common::{Cutout, Run, Subject, fail, succeed};
use counting_alloc::{allocations_in, held_after};
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

/// How many breakers the per-key table builds of each implementation.
const KEYS: usize = 10_000;

/// Bytes per key held by [`KEYS`] breakers from `make`, each built and called once
/// on this thread, as the breakers of a registry's keys that one thread calls
/// each: the breaker itself (in a `Vec`, so its own size counts) and what it
/// allocated. One breaker is built, called and dropped first, so the thread's and
/// the process's one-time set-up (a slot, a clock) is not counted.
fn per_key<S: Subject>(make: impl Fn() -> S) -> f64 {
    let warm = make();
    succeed!(warm);
    drop(warm);
    let (all, bytes) = held_after(|| {
        let mut all = Vec::with_capacity(KEYS);
        for _ in 0..KEYS {
            let s = make();
            succeed!(s);
            all.push(s);
        }
        all
    });
    drop(all);
    bytes as f64 / KEYS as f64
}

/// The per-key table: cutout's breakers as `cores` cores would size them, the
/// peers' (which do not depend on the core count) beside them.
fn per_key_table(cores: usize) {
    println!(
        "| memory per key ({KEYS} breakers, each called once by one thread), cutout at {cores} cores | bytes |"
    );
    println!("|---|---|");
    let rows: [(&str, f64); 6] = [
        (
            "cutout, its defaults (a 10 s window of 10 buckets)",
            per_key(|| Cutout(CircuitBreaker::builder().build().unwrap())),
        ),
        (
            "cutout, consecutive failures only",
            per_key(|| {
                Cutout(
                    CircuitBreaker::builder()
                        .consecutive_failures(5)
                        .build()
                        .unwrap(),
                )
            }),
        ),
        (
            "failsafe 1.3, consecutive failures",
            per_key(|| common::failsafe_consecutive(5, common::LONG)),
        ),
        ("failsafe 1.3, default", per_key(common::failsafe_default)),
        (
            "recloser 1.4, default",
            per_key(|| common::recloser_default(common::LONG)),
        ),
        (
            "`Mutex` breaker",
            per_key(|| common::MutexBreaker::new(5, common::LONG)),
        ),
    ];
    for (name, bytes) in rows {
        println!("| {name} | {bytes:.0} |");
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [per_key, cores] = args.as_slice() {
        let cores: usize = match (per_key.as_str(), cores.parse()) {
            ("per-key", Ok(cores)) => cores,
            _ => {
                eprintln!("usage: memory [per-key CORES]");
                std::process::exit(2);
            }
        };
        // Before any breaker is built: the count is read once.
        assert!(cutout::simulate_parallelism(cores), "no breaker yet");
        per_key_table(cores);
        return;
    }
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
    per_key_table(cores);
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
