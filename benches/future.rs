//! `call_async` on a ready future against the synchronous `call`, single thread,
//! closed breaker. The future is polled once with a no-op waker.

use criterion::{Criterion, criterion_group, criterion_main};
use cutout::CircuitBreaker;
use std::future::{Future, ready};
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

fn poll_ready_once<F: Future>(f: F) -> F::Output {
    match pin!(f).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(out) => out,
        Poll::Pending => unreachable!("the future is ready"),
    }
}

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
            b.iter(|| poll_ready_once(ready(Ok::<_, ()>(black_box(1u64)))))
        });
        g.bench_function(format!("{name}: call"), |b| {
            b.iter(|| breaker.call(|| Ok::<_, ()>(black_box(1u64))))
        });
        g.bench_function(format!("{name}: call_async(ready)"), |b| {
            b.iter(|| poll_ready_once(breaker.call_async(ready(Ok::<_, ()>(black_box(1u64))))))
        });
    }
    g.finish();
}

criterion_group!(benches, future);
criterion_main!(benches);
