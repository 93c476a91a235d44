//! One breaker shared by 1, 2, 4 and 8 threads, each making successful calls
//! (`CUTOUT_BENCH_THREADS=1,2,4,8,16` chooses other counts: the 16-core run in
//! `docs/PERFORMANCE.md`).
//!
//! Each thread makes one warm-up call, then `iters` calls after a common barrier;
//! the time is from the first thread's start to the last thread's finish.
//! Criterion's figure is thus the per-thread time per call (wall time / calls per
//! thread); the aggregate time per call is that divided by the thread count
//! (`benches/report.sh` prints both).
//! With more threads than cores, threads take turns: the aggregate is the figure to
//! compare there.

#[allow(dead_code)]
mod common;

use common::{Subject, Visit, across_threads, succeed};
use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, BenchmarkId, Criterion, criterion_group, criterion_main};
use std::time::Duration;

/// The thread counts: `CUTOUT_BENCH_THREADS` (comma-separated), or 1, 2, 4 and 8.
fn thread_counts() -> Vec<usize> {
    match std::env::var("CUTOUT_BENCH_THREADS") {
        Ok(list) => list
            .split(',')
            .map(|t| {
                t.trim()
                    .parse()
                    .expect("CUTOUT_BENCH_THREADS: counts like 1,2,4")
            })
            .collect(),
        Err(_) => vec![1, 2, 4, 8],
    }
}

/// `threads` threads make `iters` successful calls each on `s` (after one warm-up
/// call each, which takes the thread's slot and stripe).
fn run<S: Subject>(s: &S, threads: usize, iters: u64) -> Duration {
    across_threads(threads, iters, || (), |_| succeed!(s))
}

struct Contended<'a, 'c>(&'a mut BenchmarkGroup<'c, WallTime>);

impl Visit for Contended<'_, '_> {
    fn visit<S: Subject>(&mut self, name: &str, s: S) {
        assert!(succeed!(s), "{name} rejected a call");
        for threads in thread_counts() {
            self.0
                .bench_with_input(BenchmarkId::new(name, threads), &threads, |b, &t| {
                    b.iter_custom(|iters| run(&s, t, iters))
                });
        }
        assert!(succeed!(s), "{name} tripped while it was measured");
    }
}

fn contended(c: &mut Criterion) {
    let mut group = c.benchmark_group("contended");
    common::contended(&mut Contended(&mut group));
    group.finish();
}

criterion_group!(benches, contended);
criterion_main!(benches);
