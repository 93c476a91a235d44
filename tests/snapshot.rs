//! The `metrics()` snapshot and the breaker's `Debug`.

mod common;

use common::{four_threads_call, on_manual_clock, rate_window};
use cutout::{CircuitBreaker, ManualClock, Reason, State, WindowCounts};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const SEC: Duration = Duration::from_secs(1);

#[test]
fn the_snapshot_reports_state_time_window_and_every_lifetime_counter() {
    let (b, clock) = on_manual_clock(
        CircuitBreaker::builder()
            .name("ledger")
            .window(10 * SEC, 10)
            .failure_rate(0.5, 6)
            .slow_calls(Duration::from_millis(100), 1.0)
            .open_duration(2 * SEC),
    );

    let _ = b.call(|| Ok::<_, ()>(()));
    let _ = b.call(|| Err::<(), _>(()));
    let slow = b.try_acquire().unwrap();
    clock.advance(Duration::from_millis(150));
    slow.success();
    b.try_acquire().unwrap().ignore();
    drop(b.try_acquire().unwrap()); // dropped unrecorded
    let stale = b.try_acquire().unwrap(); // finishes after a reset

    let m = b.metrics();
    assert_eq!((m.state, m.generation, m.level), (State::Closed, 0, 0));
    assert_eq!(m.time_in_state, Duration::from_millis(150));
    assert_eq!(m.retry_after, Some(Duration::ZERO));
    assert_eq!(
        (m.window.calls, m.window.failures, m.window.slow),
        (3, 1, 1)
    );
    assert_eq!(m.window.failure_rate(), 1.0 / 3.0);
    assert_eq!(m.window.slow_call_rate(), 1.0 / 3.0);

    b.reset();
    stale.failure();
    for _ in 0..3 {
        let _ = b.call(|| Err::<(), _>(()));
    }
    for _ in 0..2 {
        let _ = b.call(|| Ok::<_, ()>(()));
    }
    assert_eq!(b.state(), State::Closed, "5 calls: below minimum_calls");
    // 3 of 6: the success that brings the window up to minimum_calls trips.
    let _ = b.call(|| Ok::<_, ()>(()));
    let m = b.metrics();
    assert_eq!(m.state, State::Open);
    assert_eq!(
        m.window,
        WindowCounts::default(),
        "no window outside Closed"
    );
    assert_eq!(m.tripped_by, Some(WindowCounts::new(6, 3, 0)));
    assert!(b.call(|| Ok::<_, ()>(())).is_err());
    clock.advance(Duration::from_millis(500));
    let m = b.metrics();
    assert_eq!(m.time_in_state, Duration::from_millis(500));
    assert_eq!(m.retry_after, Some(Duration::from_millis(1500)));
    let l = m.lifetime;
    assert_eq!(
        (l.admitted, l.rejected, l.successes, l.failures),
        (12, 1, 5, 4)
    );
    assert_eq!((l.slow, l.ignored, l.stale, l.dropped), (1, 1, 1, 1));
    assert_eq!(
        l.admitted,
        l.successes + l.failures + l.ignored + l.stale + l.dropped
    );
    assert_eq!(m.transitions(Reason::Reset), 1);
    assert_eq!(m.transitions(Reason::FailureRate), 1);
    assert_eq!(m.total_transitions(), 2);

    b.force_open();
    assert_eq!(b.metrics().retry_after, None);
}

#[test]
fn counters_from_many_threads_add_up_exactly() {
    let b = CircuitBreaker::builder()
        .clock(ManualClock::new())
        .consecutive_failures(u32::MAX / 2)
        .build()
        .unwrap();
    four_threads_call(&b, 5_000, |_| {});
    let l = b.metrics().lifetime;
    assert_eq!(l.admitted, 20_000);
    assert_eq!(l.successes + l.failures, 20_000);
    // Per thread, i + t ≡ 0 (mod 3) for 1,667 or 1,666 values of i in 0..5000.
    assert_eq!(l.failures, 1_667 + 1_667 + 1_666 + 1_667);
}

/// `Debug` is cheap: name, state and generation, one load of the state
/// word; it sums no stripe and reads no clock. `metrics()` has the rest.
#[test]
fn debug_prints_name_state_and_generation_only() {
    let (b, _) = on_manual_clock(rate_window(10 * SEC, 10, 0.5, 100).name("payments"));
    let _ = b.call(|| Err::<(), _>(()));
    assert_eq!(
        format!("{b:?}"),
        "CircuitBreaker { name: \"payments\", state: Closed, generation: 0, .. }"
    );
    b.force_open();
    assert_eq!(
        format!("{b:?}"),
        "CircuitBreaker { name: \"payments\", state: ForcedOpen, generation: 1, .. }"
    );
}

/// `Metrics`' `Debug` names each transition count by its reason, and leaves out
/// the reasons with none (it printed 13 unlabelled numbers, in declaration order).
#[test]
fn metrics_debug_names_the_transitions_by_reason() {
    let b = CircuitBreaker::builder().build().unwrap();
    b.force_open();
    b.reset();
    b.force_open();
    let printed = format!("{:?}", b.metrics());
    assert!(
        printed.contains("transitions: {ForcedOpen: 2, Reset: 1}"),
        "{printed}"
    );
    let fresh = CircuitBreaker::builder().build().unwrap();
    let printed = format!("{:#?}", fresh.metrics());
    assert!(printed.contains("transitions: {},"), "{printed}");
    assert!(printed.contains("lifetime: Lifetime {"), "{printed}");
}

/// An Open word keeps its deadline; the time it opened is derived from it. With a
/// jittered cooldown, the snapshot and the event still report the opening time.
#[test]
fn with_jitter_open_reports_when_it_opened_and_when_it_may_half_open() {
    let clock = ManualClock::new();
    let events = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = events.clone();
    let b = CircuitBreaker::builder()
        .clock(clock.clone())
        .consecutive_failures(1)
        .open_duration(10 * SEC)
        .jitter(0.5)
        .on_transition(move |t| log.lock().unwrap().push(*t))
        .build()
        .unwrap();
    clock.advance(Duration::from_millis(700));
    let _ = b.call(|| Err::<(), _>(()));
    clock.advance(Duration::from_millis(300));
    let m = b.metrics();
    assert_eq!(m.state, State::Open);
    assert_eq!(m.time_in_state, Duration::from_millis(300));
    let cooldown = m.time_in_state + m.retry_after.unwrap();
    assert!(
        (5 * SEC..=10 * SEC).contains(&cooldown),
        "a jittered cooldown of at most half off: {cooldown:?}"
    );
    assert_eq!(events.lock().unwrap()[0].at, Duration::from_millis(700));

    // Admitted exactly at the deadline, not a millisecond before.
    clock.advance(m.retry_after.unwrap() - Duration::from_millis(1));
    assert!(b.try_acquire().is_err());
    clock.advance(Duration::from_millis(1));
    b.try_acquire().unwrap().success();
    assert_eq!(b.state(), State::Closed);
    let e = events.lock().unwrap();
    assert_eq!(
        e[1].at,
        Duration::from_millis(700) + cooldown,
        "half-opened at the deadline"
    );
}

/// Over random operations (sub-millisecond and longer clock steps, jitter, 1-3
/// probes, half-open timeouts, a ramp or none, manual control, `open_for`, held
/// and dropped permits), `metrics()` predicts the next admission: `retry_after` is
/// zero exactly when the next call is admitted (but for a ramp's share), and
/// otherwise is the rejection's (through `call`'s lean cached rejection too). The
/// events chain (each `from` the last `to`, the generation one on, times ordered),
/// the snapshot's state, level, generation and time in state agree with the last
/// event, and the lifetime counters add up. Under tiny generations (CI runs it so)
/// it found a thread's cached Open deadline taken for a phase a whole generation
/// cycle later (`tests/long_life.rs`).
#[test]
fn metrics_predict_each_admission_over_random_operations() {
    for seed in 0..4000u64 {
        let mut x = seed.wrapping_mul(0x9E3779B97F4A7C15) | 1;
        let mut rnd = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let clock = ManualClock::new();
        let ramp = rnd(2) == 0;
        let mut bld = CircuitBreaker::builder()
            .consecutive_failures(1 + rnd(2) as u32)
            .half_open_probes(1 + rnd(3) as u32)
            .open_duration(Duration::from_millis(1 + rnd(50)))
            .max_open_duration(Duration::from_millis(200))
            .half_open_timeout(Duration::from_millis(1 + rnd(100)))
            .jitter([0.0, 0.5, 1.0][rnd(3) as usize]);
        if ramp {
            bld = bld.ramp_up(Duration::from_millis(1 + rnd(100)));
        }
        let log: Arc<Mutex<Vec<cutout::Transition>>> = Arc::default();
        let sink = log.clone();
        let b = bld
            .clock(clock.clone())
            .on_transition(move |t| sink.lock().unwrap().push(*t))
            .build()
            .unwrap();
        let mut held: Vec<cutout::Permit<'_, ManualClock>> = Vec::new();
        for step in 0..300 {
            match rnd(12) {
                0 => clock.advance(Duration::from_micros(rnd(60_000))),
                1 => clock.advance(Duration::from_nanos(rnd(2_000_000))),
                2 => {
                    if rnd(10) == 0 {
                        b.force_open()
                    } else if rnd(3) == 0 {
                        b.reset()
                    }
                }
                3 => {
                    if rnd(20) == 0 {
                        b.disable()
                    }
                }
                4 => {
                    if let Some(p) = held.pop() {
                        match rnd(4) {
                            0 => p.success(),
                            1 => p.failure(),
                            2 => p.ignore(),
                            _ => drop(p),
                        }
                    }
                }
                5 => {
                    let _ = b.open_for(Duration::from_micros(rnd(100_000)));
                }
                _ => {
                    let m = b.metrics();
                    let ctx = format!("seed {seed} step {step} {m:?}");
                    if rnd(2) == 0 {
                        match b.call(|| Ok::<_, ()>(())) {
                            Ok(()) => assert!(
                                matches!(m.retry_after, Some(d) if d.is_zero()),
                                "admitted: {ctx}"
                            ),
                            Err(e) => {
                                let r = *e.rejected().unwrap();
                                if m.state == State::Recovering {
                                    continue;
                                }
                                assert_eq!(
                                    m.retry_after,
                                    r.retry_after(),
                                    "call rejected {r:?}: {ctx}"
                                );
                            }
                        }
                        continue;
                    }
                    match b.try_acquire() {
                        Ok(p) => {
                            assert!(
                                matches!(m.retry_after, Some(d) if d.is_zero()),
                                "admitted: {ctx}"
                            );
                            if rnd(3) == 0 {
                                held.push(p)
                            } else if rnd(2) == 0 {
                                p.failure()
                            } else {
                                p.success()
                            }
                        }
                        Err(r) => {
                            if m.state == State::Recovering {
                                continue;
                            }
                            assert_eq!(m.retry_after, r.retry_after(), "rejected {r:?}: {ctx}");
                            assert!(
                                m.retry_after != Some(Duration::ZERO),
                                "rejected {r:?}: {ctx}"
                            );
                        }
                    }
                }
            }
        }
        drop(held);
        let log = log.lock().unwrap();
        let m = b.metrics();
        assert_eq!(m.total_transitions(), log.len() as u64);
        for w in log.windows(2) {
            assert_eq!(w[1].from, w[0].to, "seed {seed}");
            assert!(
                w[1].generation == w[0].generation.wrapping_add(1) || w[1].generation == 0,
                "seed {seed}"
            );
            assert!(
                w[1].at >= w[0].at || w[0].reason == cutout::Reason::External,
                "seed {seed} {:?}",
                w
            );
        }
        if let Some(last) = log.last() {
            assert_eq!(
                (m.generation, m.state, m.level),
                (last.generation, last.to, last.level),
                "seed {seed}"
            );
            if last.reason != cutout::Reason::External {
                assert_eq!(
                    m.time_in_state,
                    clock.elapsed().saturating_sub(last.at) / 1_000_000 * 1_000_000,
                    "seed {seed} {last:?}"
                );
            }
        }
        let l = m.lifetime;
        assert_eq!(
            l.admitted,
            l.successes + l.failures + l.ignored + l.stale + l.dropped
        );
    }
}
