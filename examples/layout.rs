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
//!
//! With `LAYOUT_ADDRS=1` it also prints, to stderr, where things landed: the
//! address of a local in the timed loop's frame, and of every allocation of 64
//! bytes or more made while the breaker was built and first called (the stripes
//! and the breaker), so that slow layouts can be matched with the low 12 bits of
//! those addresses (4K aliasing: `docs/PERFORMANCE.md`).

use cutout::CircuitBreaker;
use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The system allocator, which notes the allocations of 64 bytes or more made
/// while `RECORDING` is set (at most 16 of them).
struct Recorder;

static RECORDING: AtomicBool = AtomicBool::new(false);
static RECORDED: [AtomicUsize; 32] = [const { AtomicUsize::new(0) }; 32];
static NEXT: AtomicUsize = AtomicUsize::new(0);
/// The address of a local in the timed loop's frame.
static FRAME: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Recorder {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.alloc(layout) };
        if RECORDING.load(Ordering::Relaxed) && layout.size() >= 64 {
            let i = NEXT.fetch_add(1, Ordering::Relaxed);
            if i < 16 {
                RECORDED[2 * i].store(p as usize, Ordering::Relaxed);
                RECORDED[2 * i + 1].store(layout.size(), Ordering::Relaxed);
            }
        }
        p
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(p, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Recorder = Recorder;

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
    let addrs = std::env::var_os("LAYOUT_ADDRS").is_some();
    RECORDING.store(addrs, Ordering::Relaxed);
    let breaker = CircuitBreaker::builder()
        .window(Duration::from_secs(10), 10)
        .build()
        .expect("a valid configuration");
    let call = || breaker.call(|| Ok::<_, ()>(black_box(1u64))).is_ok();
    assert!(call());
    RECORDING.store(false, Ordering::Relaxed);
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
    if addrs {
        let frame = FRAME.load(Ordering::Relaxed);
        let mut line = format!("frame {frame:#x}");
        for i in 0..NEXT.load(Ordering::Relaxed).min(16) {
            let (p, size) = (&RECORDED[2 * i], &RECORDED[2 * i + 1]);
            let (p, size) = (p.load(Ordering::Relaxed), size.load(Ordering::Relaxed));
            line += &format!(" alloc {p:#x}+{size}");
        }
        eprintln!("{line}");
    }
    drop(padding);
}

#[inline(never)]
fn timed(calls: u64, mut f: impl FnMut() -> bool) -> Duration {
    let local = 0u8;
    FRAME.store(black_box(&local) as *const u8 as usize, Ordering::Relaxed);
    let start = Instant::now();
    for _ in 0..calls {
        black_box(f());
    }
    start.elapsed()
}
