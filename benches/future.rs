//! `call_async` on a ready future against the synchronous `call`, single thread,
//! closed breaker. The future is polled once with a no-op waker.
//!
//! The future is polled by `common::poll_once`, the helper every harness shares,
//! which the compiler inlines into the measured loop. This file had a helper of
//! its own without that hint, which the compiler called: the future was built in
//! the loop's frame and moved into the helper's, and its output moved back, a
//! round trip through memory that cost 1.9x `call` on a Zen 4 and 3.9-4.2x on a Zen 1
//! (`docs/PERFORMANCE.md`, "Call shapes").

#[allow(dead_code)]
mod common;

use common::poll_once;
use criterion::{Criterion, criterion_group, criterion_main};
use cutout::CircuitBreaker;
use std::future::ready;
use std::hint::black_box;

fn future(c: &mut Criterion) {
    let mut g = c.benchmark_group("future");
    for (name, breaker) in [
        (
            "consecutive",
            CircuitBreaker::builder()
                .consecutive_failures(5)
                .build()
                .unwrap(),
        ),
        ("rate window", CircuitBreaker::builder().build().unwrap()),
    ] {
        g.bench_function(format!("{name}: ready future, no breaker"), |b| {
            b.iter(|| poll_once(ready(Ok::<_, ()>(black_box(1u64)))))
        });
        g.bench_function(format!("{name}: call"), |b| {
            b.iter(|| breaker.call(|| Ok::<_, ()>(black_box(1u64))))
        });
        g.bench_function(format!("{name}: call_async(ready)"), |b| {
            b.iter(|| poll_once(breaker.call_async(ready(Ok::<_, ()>(black_box(1u64))))))
        });
    }
    g.finish();
}

criterion_group!(benches, future);
criterion_main!(benches);
