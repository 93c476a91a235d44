//! The probe boundary. `cycle`: two failures trip the breaker, the cooldown passes,
//! two successful probes close it again: four calls and three transitions per
//! iteration, on every implementation that can be driven through it. `reject_full`
//! (cutout only: the peers admit every call while half-open): a call rejected
//! because the round's probe slots are taken.

#[allow(dead_code)]
mod common;

use common::{CpuTime, Cutout, MutexBreaker, Recloser, Subject, fail, succeed};
use criterion::{Criterion, criterion_group, criterion_main};
use cutout::{CircuitBreaker, ManualClock, State};
use std::hint::black_box;
use std::time::Duration;

/// cutout's shortest cooldown (one tick).
const TICK: Duration = Duration::from_millis(1);

/// Four calls: fail, fail, succeed, succeed. `pass` lets the cooldown pass.
/// Returns how many closures ran.
#[inline]
fn cycle<S: Subject>(s: &S, pass: impl Fn()) -> u32 {
    let mut ran = u32::from(fail!(s)) + u32::from(fail!(s));
    pass();
    ran += u32::from(succeed!(s)) + u32::from(succeed!(s));
    ran
}

fn half_open(c: &mut Criterion<CpuTime>) {
    let mut group = c.benchmark_group("half_open");

    let clock = ManualClock::new();
    let cutout = Cutout(
        CircuitBreaker::builder()
            .consecutive_failures(2)
            .open_duration(TICK)
            .backoff_multiplier(1.0)
            .half_open_probes(2)
            .clock(clock.clone())
            .build()
            .unwrap(),
    );
    let pass = || clock.advance(TICK);
    assert_eq!(cycle(&cutout, pass), 4);
    assert_eq!(cutout.0.metrics().total_transitions(), 3);
    group.bench_function("cycle_cutout", |b| b.iter(|| cycle(&cutout, pass)));
    assert_eq!(cutout.0.state(), State::Closed);

    // A zero cooldown: the next call after the trip is half-open.
    let failsafe = common::failsafe_consecutive(2, Duration::ZERO);
    assert_eq!(cycle(&failsafe, || ()), 4);
    group.bench_function("cycle_failsafe_consecutive", |b| {
        b.iter(|| cycle(&failsafe, || ()))
    });

    // recloser's rings report no rate until full; with rings of one call, the
    // second failure trips and the second probe closes.
    let recloser = Recloser(
        recloser::Recloser::custom()
            .closed_len(1)
            .half_open_len(1)
            .open_wait(Duration::ZERO)
            .build(),
    );
    assert_eq!(cycle(&recloser, || ()), 4);
    group.bench_function("cycle_recloser", |b| b.iter(|| cycle(&recloser, || ())));

    let mutex = MutexBreaker::new(2, Duration::ZERO);
    assert_eq!(cycle(&mutex, || ()), 4);
    group.bench_function("cycle_mutex", |b| b.iter(|| cycle(&mutex, || ())));

    // A round whose one slot is taken rejects everyone else.
    let clock = ManualClock::new();
    let full = CircuitBreaker::builder()
        .consecutive_failures(1)
        .open_duration(TICK)
        .clock(clock.clone())
        .build()
        .unwrap();
    let _ = full.call(|| Err::<(), _>(()));
    clock.advance(TICK);
    let probe = full.try_acquire().unwrap();
    assert_eq!(full.state(), State::HalfOpen);
    group.bench_function("reject_full_cutout", |b| {
        b.iter(|| black_box(full.try_acquire()).is_err())
    });
    probe.success();
    assert_eq!(full.state(), State::Closed);

    group.finish();
}

criterion_group! {
    name = benches;
    config = CpuTime::criterion();
    targets = half_open
}
criterion_main!(benches);
