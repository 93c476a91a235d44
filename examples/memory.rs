//! Memory figures for `benches/report.sh`: the breaker's size, its heap, and the
//! allocations per call of every implementation in each scenario, counted by a
//! global allocator (this thread's allocations only).

#[allow(dead_code)]
#[path = "../benches/common/mod.rs"]
mod common;

use common::{Run, Subject};
use cutout::{CircuitBreaker, ManualClock};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::Duration;

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every method forwards to `System` unchanged; the count is a const-initialised
// thread-local without a destructor, which never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        // SAFETY: the caller upholds `alloc`'s contract.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller upholds `dealloc`'s contract.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        // SAFETY: the caller upholds `realloc`'s contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

const CALLS: u64 = 10_000;

struct PerCall {
    fail: bool,
    per_call: f64,
}

impl Run for PerCall {
    fn run<S: Subject>(&mut self, s: &S) {
        let call = |s: &S| if self.fail { s.fail() } else { s.succeed() };
        call(s); // warm-up: per-thread set-up is not a per-call cost
        let before = allocations();
        for _ in 0..CALLS {
            std::hint::black_box(call(s));
        }
        self.per_call = (allocations() - before) as f64 / CALLS as f64;
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
    println!(
        "| `heap_bytes()`, default window (10 s, 10 buckets), {cores} cores | {} |",
        default.heap_bytes()
    );
    println!(
        "| `heap_bytes()`, consecutive failures only, {cores} cores | {} |",
        consecutive.heap_bytes()
    );
    let long = CircuitBreaker::builder()
        .window(Duration::from_secs(60), 60)
        .build()
        .unwrap();
    println!(
        "| `heap_bytes()`, 60-bucket window, {cores} cores | {} |",
        long.heap_bytes()
    );
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
