//! A clock that breaks its contract: [`Clock::now`] must never decrease, and a
//! user's clock may do so anyway (a wall clock stepped back, a clock read from a
//! file, a test double). The breaker's promise then is a weaker one: no panic, no
//! hang, and the manual controls still work. Random operation sequences, with the
//! clock (and the precise clock, which times slow calls) jumping to any reading,
//! backwards and forwards, up to the last one, are run in the test profile (debug
//! assertions and overflow checks on); every step's result is checked where the
//! contract still pins it.

mod common;

use common::{any_outcome, rate_window};
use cutout::{CircuitBreaker, Clock, Dropped, Outcome, OwnedPermit, State};
use proptest::prelude::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A clock whose readings the test sets, in any order.
#[derive(Clone, Default)]
struct Jumpy {
    now: Arc<AtomicU64>,
    precise: Arc<AtomicU64>,
}

impl Clock for Jumpy {
    fn now(&self) -> u64 {
        self.now.load(Ordering::Relaxed)
    }

    fn precise(&self) -> u64 {
        self.precise.load(Ordering::Relaxed)
    }
}

#[derive(Clone, Debug)]
enum Op {
    Acquire,
    Record(usize, Outcome),
    Drop(usize),
    Call(bool),
    Now(u64),
    Precise(u64),
    ForceOpen,
    Disable,
    Reset,
    OpenFor(Duration),
    Read,
    SaveAndRestore(u64),
}

/// A reading: the edges (0, the last ones) as often as anything in between.
fn reading() -> impl Strategy<Value = u64> {
    prop_oneof![
        1 => Just(0),
        1 => (0u64..4).prop_map(|k| u64::MAX - k),
        1 => 0u64..1 << 40,
        // Within a few windows' length (the window is 400 ms), in any order.
        4 => (0u64..2_400).prop_map(|ms| ms * 1_000_000),
        1 => 1u64 << 40..u64::MAX - 4,
        1 => any::<u64>(),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let outcome = any_outcome();
    let duration = prop_oneof![
        Just(Duration::ZERO),
        Just(Duration::MAX),
        (0u64..u64::MAX).prop_map(Duration::from_nanos),
        (0u64..10_000).prop_map(Duration::from_millis),
    ];
    prop_oneof![
        4 => Just(Op::Acquire),
        4 => (0usize..8, outcome).prop_map(|(i, o)| Op::Record(i, o)),
        1 => (0usize..8).prop_map(Op::Drop),
        4 => any::<bool>().prop_map(Op::Call),
        3 => reading().prop_map(Op::Now),
        2 => reading().prop_map(Op::Precise),
        1 => Just(Op::ForceOpen),
        1 => Just(Op::Disable),
        1 => Just(Op::Reset),
        1 => duration.prop_map(Op::OpenFor),
        1 => Just(Op::Read),
        1 => reading().prop_map(Op::SaveAndRestore),
    ]
}

/// Every policy on, each with short settings so that sequences trip, probe, ramp
/// and back off: the most code a jumping clock can reach.
fn build(
    clock: &Jumpy,
    restore: Option<(cutout::SavedState, SystemTime)>,
) -> Arc<CircuitBreaker<Jumpy>> {
    let mut builder = CircuitBreaker::builder()
        .consecutive_failures(3)
        .window(Duration::from_millis(400), 4)
        .failure_rate(0.5, 4)
        .slow_calls(Duration::from_millis(50), 0.75)
        .open_duration(Duration::from_secs(1))
        .backoff_multiplier(2.0)
        .max_open_duration(Duration::from_secs(5))
        .jitter(0.5)
        .half_open_probes(2)
        .half_open_timeout(Duration::from_secs(3))
        .on_drop(Dropped::Failure)
        .ramp_up(Duration::from_secs(2));
    if let Some((saved, wall)) = restore {
        builder = builder.restore_at(saved, wall);
    }
    Arc::new(
        builder
            .clock(clock.clone())
            .build()
            .expect("a valid configuration"),
    )
}

fn run(ops: &[Op]) -> Result<(), TestCaseError> {
    let clock = Jumpy::default();
    let mut breaker = build(&clock, None);
    let mut held: Vec<OwnedPermit<Jumpy>> = Vec::new();
    for op in ops {
        match *op {
            Op::Acquire => {
                if let Ok(permit) = breaker.try_acquire_owned() {
                    held.push(permit);
                }
            }
            Op::Record(i, outcome) if i < held.len() => held.swap_remove(i).record(outcome),
            Op::Drop(i) if i < held.len() => drop(held.swap_remove(i)),
            Op::Record(..) | Op::Drop(_) => {}
            Op::Call(ok) => {
                let _ = breaker.call(|| if ok { Ok(()) } else { Err(()) });
            }
            Op::Now(at) => clock.now.store(at, Ordering::Relaxed),
            Op::Precise(at) => clock.precise.store(at, Ordering::Relaxed),
            Op::ForceOpen => {
                breaker.force_open();
                prop_assert_eq!(breaker.state(), State::ForcedOpen);
                prop_assert!(breaker.call(|| Ok::<_, ()>(())).is_err());
            }
            Op::Disable => {
                breaker.disable();
                prop_assert_eq!(breaker.state(), State::Disabled);
                prop_assert!(breaker.call(|| Ok::<_, ()>(())).is_ok());
            }
            Op::Reset => {
                breaker.reset();
                prop_assert_eq!(breaker.state(), State::Closed);
                prop_assert!(breaker.call(|| Ok::<_, ()>(())).is_ok());
            }
            Op::OpenFor(d) => {
                let was_closed = breaker.state() == State::Closed;
                let moved = breaker.open_for(d);
                // A zero duration opens nothing; from Closed anything longer does.
                prop_assert_eq!(moved, was_closed && d >= Duration::from_millis(1));
            }
            Op::Read => {
                let m = breaker.metrics();
                prop_assert_eq!(m.state, breaker.state());
                prop_assert!(breaker.heap_bytes() > 0);
            }
            Op::SaveAndRestore(at) => {
                // Any wall-clock time, including ones `SystemTime` cannot add to.
                let wall = UNIX_EPOCH + Duration::from_nanos(at);
                let saved = breaker.save_at(wall);
                let state = saved.state;
                held.clear();
                breaker = build(&clock, Some((saved, wall)));
                if matches!(state, State::ForcedOpen | State::Disabled) {
                    prop_assert_eq!(breaker.state(), state);
                }
            }
        }
    }
    // Whatever the clock did, reset closes the breaker and it admits again.
    held.clear();
    breaker.reset();
    prop_assert_eq!(breaker.state(), State::Closed);
    prop_assert!(breaker.call(|| Ok::<_, ()>(())).is_ok());
    let _ = breaker.save_at(SystemTime::now());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn a_clock_that_jumps_anywhere_panics_nothing_and_manual_controls_hold(
        ops in prop::collection::vec(op(), 1..120)
    ) {
        run(&ops)?;
    }
}

/// The same clock jumping while four threads call, hold and drop permits: no
/// panic (a debug assertion included) and no hang, and the breaker resets after.
#[test]
fn a_clock_that_jumps_under_concurrent_calls_panics_nothing() {
    let clock = Jumpy::default();
    let breaker = build(&clock, None);
    let callers: Vec<_> = (0..4u64)
        .map(|t| {
            let breaker = Arc::clone(&breaker);
            std::thread::spawn(move || {
                let mut held = Vec::new();
                for i in 0..20_000u64 {
                    let pick = i
                        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
                        .rotate_left(t as u32 * 7);
                    match pick % 5 {
                        0 => _ = breaker.call(|| if pick % 3 == 0 { Err(()) } else { Ok(()) }),
                        1 => held.extend(breaker.try_acquire_owned().ok()),
                        2 => held.pop().map_or((), |p: OwnedPermit<Jumpy>| p.failure()),
                        3 => held.pop().map_or((), OwnedPermit::success),
                        _ => drop(held.pop()),
                    }
                }
            })
        })
        .collect();
    let mut x = 0x2545_f491_4f6c_dd1d_u64;
    while !callers.iter().all(|c| c.is_finished()) {
        // xorshift: readings all over the range, edges included now and then.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let at = match x % 8 {
            0 => 0,
            1 => u64::MAX - x % 4,
            _ => x >> (x % 48),
        };
        clock.now.store(at, Ordering::Relaxed);
        clock.precise.store(at.rotate_left(3), Ordering::Relaxed);
        std::thread::yield_now();
    }
    for caller in callers {
        caller.join().expect("a caller panicked");
    }
    // The breaker went through its phases while the clock jumped: it counted
    // failures, tripped and rejected.
    let m = breaker.metrics();
    assert!(m.generation > 0, "{m:?}");
    assert!(m.lifetime.rejected > 0 && m.lifetime.failures > 0, "{m:?}");
    breaker.reset();
    assert_eq!(breaker.state(), State::Closed);
    assert!(breaker.call(|| Ok::<_, ()>(())).is_ok());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Readings out of order within a few windows' length, where the window's
    /// buckets and the owner's summary of them see every order: the summary's
    /// steps agree with a sum of the buckets (a debug assertion in the crate
    /// checks each), and the window never reads more calls than were made.
    #[test]
    fn readings_out_of_order_within_a_few_windows_keep_the_window_whole(
        steps in prop::collection::vec((0u64..2_400, any::<bool>()), 1..200)
    ) {
        let clock = Jumpy::default();
        let breaker = rate_window(Duration::from_millis(400), 4, 1.0, u32::MAX)
            .clock(clock.clone())
            .build()
            .expect("a valid configuration");
        for (i, &(ms, failed)) in steps.iter().enumerate() {
            clock.now.store(ms * 1_000_000, Ordering::Relaxed);
            let _ = breaker.call(|| if failed { Err(()) } else { Ok(()) });
            let window = breaker.metrics().window;
            prop_assert!(window.calls <= i as u64 + 1, "{window:?} after {} calls", i + 1);
        }
    }
}

/// A capped registry on the same clock, with idle sweeps and evictions at the cap
/// while readings jump anywhere: no panic, never more breakers than the cap, and
/// a breaker held through `get` stays the key's (a timestamp read from a later
/// reading than the clock now gives must not make an idle breaker look fresh for
/// ever, nor a held one evictable).
#[cfg(feature = "registry")]
#[test]
fn a_registry_on_a_clock_that_jumps_anywhere_keeps_its_cap_and_held_breakers() {
    use cutout::Registry;
    let mut x = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..50 {
        let clock = Jumpy::default();
        let r: Registry<u8, Jumpy> = Registry::builder(
            CircuitBreaker::builder()
                .consecutive_failures(2)
                .window(Duration::from_millis(400), 4)
                .failure_rate(0.5, 4)
                .clock(clock.clone()),
        )
        .max_keys(3)
        .idle_resolution(Duration::from_millis(1))
        .evict_idle_after(Duration::from_millis(10))
        .build()
        .unwrap();
        let held = r.get(&0);
        for _ in 0..400 {
            let pick = next();
            let at = match pick % 6 {
                0 => 0,
                1 => u64::MAX - pick % 4,
                2 => pick % 5_000_000_000,
                _ => pick >> (pick % 48),
            };
            clock.now.store(at, Ordering::Relaxed);
            clock.precise.store(at, Ordering::Relaxed);
            let key = (pick >> 8) as u8 % 8;
            match (pick >> 16) % 5 {
                0 => _ = r.call(&key, || if pick % 3 == 0 { Err(()) } else { Ok(()) }),
                1 => _ = r.get(&key),
                2 => _ = r.evict_idle(Duration::from_nanos(pick >> 40)),
                3 => _ = r.with(&key, |b| b.state()),
                _ => _ = r.remove(&(key | 1)), // never key 0, which the test holds
            }
            let mut n = 0;
            r.for_each(|_, _| n += 1);
            assert!(n <= 3 && r.len() <= 3, "{n} breakers under a cap of 3");
            assert!(
                Arc::ptr_eq(&held, &r.get(&0)),
                "the held breaker was replaced"
            );
        }
    }
}
