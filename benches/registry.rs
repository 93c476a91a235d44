//! The registry's lookup cost: a hit on an existing key, against calling the
//! breaker directly. Single thread, and two threads on one key (a lookup writes no
//! shared line, so the per-call cost should stay flat). With a key cap
//! (`max_keys`): a hit (the same as without), and a new key at the cap, evicting
//! or routed to the overflow breaker.

use criterion::{Criterion, criterion_group, criterion_main};
use cutout::{CircuitBreaker, ManualClock, Registry};
use std::hash::{BuildHasherDefault, Hasher};
use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

const KEYS: usize = 100;

fn registry(c: &mut Criterion) {
    let mut g = c.benchmark_group("registry");
    let builder = CircuitBreaker::builder().consecutive_failures(5);
    let direct = builder.clone().build().unwrap();
    let names: Vec<String> = (0..KEYS).map(|i| format!("upstream-{i}")).collect();
    let by_name: Registry<String> = Registry::new(builder.clone()).unwrap();
    let by_id: Registry<u64> = Registry::new(builder.clone()).unwrap();
    let fx = Registry::builder(builder.clone())
        .hasher(BuildHasherDefault::<Fx>::default())
        .build()
        .unwrap();
    let sip = Registry::builder(builder)
        .hasher(std::hash::RandomState::new())
        .build()
        .unwrap();
    for (i, name) in names.iter().enumerate() {
        by_name.get(name.as_str());
        by_id.get(&(i as u64));
        fx.get(name.as_str());
        sip.get(name.as_str());
    }
    let key = names[KEYS / 2].as_str();

    g.bench_function("breaker.call (no registry)", |b| {
        b.iter(|| direct.call(|| Ok::<_, ()>(black_box(1u64))))
    });
    g.bench_function("with(&str) lookup only", |b| {
        b.iter(|| by_name.with(black_box(key), |br| br.state()))
    });
    g.bench_function("call(&str)", |b| {
        b.iter(|| by_name.call(black_box(key), || Ok::<_, ()>(black_box(1u64))))
    });
    g.bench_function("call(&str), SipHash (std's RandomState)", |b| {
        b.iter(|| sip.call(black_box(key), || Ok::<_, ()>(black_box(1u64))))
    });
    g.bench_function("with(&str) lookup only, Fx hasher", |b| {
        b.iter(|| fx.with(black_box(key), |br| br.state()))
    });
    g.bench_function("with(&u64) lookup only", |b| {
        b.iter(|| by_id.with(black_box(&50), |br| br.state()))
    });
    g.bench_function("get(&str) (Arc clone)", |b| {
        b.iter(|| by_name.get(black_box(key)))
    });
    g.bench_function("2 threads: call(&str), same key", |b| {
        b.iter_custom(|iters| {
            two_threads(iters, || {
                let _ = by_name.call(black_box(key), || Ok::<_, ()>(black_box(1u64)));
            })
        })
    });
    g.bench_function("2 threads: get(&str), same key (Arc clone)", |b| {
        b.iter_custom(|iters| {
            two_threads(iters, || {
                black_box(by_name.get(black_box(key)));
            })
        })
    });
    g.finish();
}

/// Registries capped at 1,000 keys, full.
fn capped(c: &mut Criterion) {
    const CAP: usize = 1_000;
    let mut g = c.benchmark_group("registry, max_keys(1000)");
    let clock = ManualClock::new();
    let builder = CircuitBreaker::builder()
        .consecutive_failures(1)
        .clock(clock.clone());
    let capped = |builder: cutout::Builder<ManualClock>| {
        Registry::builder(builder)
            .max_keys(CAP)
            .idle_resolution(Duration::from_nanos(1))
            .build()
            .unwrap()
    };
    let r: Registry<u64, _> = capped(builder.clone());
    for key in 0..CAP as u64 {
        r.get(&key);
    }
    g.bench_function("with(&u64) lookup only, hit", |b| {
        b.iter(|| r.with(black_box(&500), |br| br.state()))
    });
    // Every key new: each evicts the least recently used (a scan per 31 keys).
    let mut next = CAP as u64;
    g.bench_function("call(&u64), a new key each time, evicting", |b| {
        b.iter(|| {
            clock.advance(Duration::from_nanos(1));
            next += 1;
            r.call(black_box(&next), || Ok::<_, ()>(black_box(1u64)))
        })
    });
    // Every breaker Open: each new key goes to the overflow breaker (a scan per
    // 31 keys finds nothing).
    let tripped: Registry<u64, _> = capped(builder);
    for key in 0..CAP as u64 {
        let _ = tripped.call(&key, || Err::<(), _>(()));
    }
    let mut next = CAP as u64;
    g.bench_function("with(&u64), a new key each time, overflowed", |b| {
        b.iter(|| {
            next += 1;
            tripped.with(black_box(&next), |br| br.state())
        })
    });
    assert!(tripped.overflowed() > 0 && tripped.len() == CAP);
    g.finish();
}

/// A multiply-rotate hasher (as rustc's FxHash), beside the default (foldhash)
/// and SipHash.
#[derive(Default)]
struct Fx(u64);

impl Hasher for Fx {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// Runs `f` `iters` times on each of two threads; returns the slower thread's time
/// (per-call cost per thread).
fn two_threads(iters: u64, f: impl Fn() + Sync) -> Duration {
    let barrier = Barrier::new(2);
    std::thread::scope(|s| {
        let run = || {
            barrier.wait();
            let start = Instant::now();
            for _ in 0..iters {
                f();
            }
            start.elapsed()
        };
        let a = s.spawn(run);
        let b = s.spawn(run);
        a.join().unwrap().max(b.join().unwrap())
    })
}

criterion_group!(benches, registry, capped);
criterion_main!(benches);
