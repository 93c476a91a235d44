//! Settings at their extremes (DESIGN.md contract lines 16 and 20): the longest
//! duration, the largest count and the smallest rate a setting takes build a breaker
//! that works as set, and one step past them is a `ConfigError` naming the field,
//! never a panic or a silently clamped value. The everyday refusals (a zero, a rate
//! above 1, a cap below its base) are in tests/contract.rs.
//!
//! And a builder as a value: a clone builds a breaker of its own, with the same
//! listener and the same state to restore; and the public types are `Send`,
//! `Sync` and `Unpin`.

mod common;

use common::{on_manual_clock, rate_window, trips_after};
use cutout::{Builder, CircuitBreaker, ManualClock, State, WindowCounts};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

const SEC: Duration = Duration::from_secs(1);
const MS: Duration = Duration::from_millis(1);
/// The longest duration a setting takes: `u64::MAX` nanoseconds (584 years) in
/// whole milliseconds.
const LONGEST: Duration = Duration::from_millis(u64::MAX / 1_000_000);
/// A window or slow-call threshold as long as a tick can count.
const CLOCK_RANGE: Duration = Duration::from_nanos(u64::MAX);

fn fail<C: cutout::Clock>(b: &CircuitBreaker<C>) {
    let _ = b.call(|| Err::<(), _>("down"));
}

fn succeed<C: cutout::Clock>(b: &CircuitBreaker<C>) -> bool {
    b.call(|| Ok::<_, ()>(())).is_ok()
}

/// The field the build error names, or `"<built>"` if it built.
fn field_of<C: cutout::Clock>(b: Builder<C>) -> &'static str {
    match b.build() {
        Ok(_) => "<built>",
        Err(e) => e.field(),
    }
}

/// Each duration setting at [`LONGEST`]: the breaker trips, rejects for the cooldown
/// it should (the longest for `open_duration`, the 1 s default for the others), and
/// a clock advanced by `Duration::MAX` ends that cooldown; tripped again on the
/// saturated clock, its cooldown is over at once. (`ramp_up(LONGEST)` is in
/// tests/long_life.rs, `a_saturated_clock_ends_a_ramp_of_the_longest_ramp_up`.)
#[test]
fn the_longest_duration_of_each_setting_builds_and_works() {
    type Set = fn(Builder<ManualClock>) -> Builder<ManualClock>;
    let cases: [(&str, Set, Duration); 3] = [
        ("open_duration", |b| b.open_duration(LONGEST), LONGEST),
        ("max_open_duration", |b| b.max_open_duration(LONGEST), SEC),
        ("half_open_timeout", |b| b.half_open_timeout(LONGEST), SEC),
    ];
    for (setting, set, cooldown) in cases {
        let clock = ManualClock::new();
        let b = set(CircuitBreaker::builder()
            .consecutive_failures(1)
            .clock(clock.clone()))
        .build()
        .unwrap();
        fail(&b);
        let r = b.try_acquire().expect_err(setting);
        assert_eq!(r.retry_after(), Some(cooldown), "{setting}");
        clock.advance(Duration::MAX);
        assert!(succeed(&b), "{setting}: a probe on a saturated clock");
        assert_eq!(b.state(), State::Closed, "{setting}");
        fail(&b);
        assert_eq!(b.state(), State::Open, "{setting}");
        assert!(
            succeed(&b),
            "{setting}: the saturated clock ends the cooldown"
        );
    }
}

/// One millisecond past [`LONGEST`], a `ramp_up` under the 1 ms tick, a window or
/// slow-call threshold past the clock's range, an infinite or NaN rate or jitter, and
/// one probe more than a round can count: each is refused, naming its setting.
/// (A zero `ramp_up` is in tests/ramp.rs.)
#[test]
fn one_step_past_each_settings_range_is_refused_by_name() {
    let past = LONGEST + MS;
    let b = || CircuitBreaker::builder().clock(ManualClock::new());
    assert_eq!(field_of(b().open_duration(past)), "open_duration");
    assert_eq!(field_of(b().max_open_duration(past)), "max_open_duration");
    assert_eq!(field_of(b().half_open_timeout(past)), "half_open_timeout");
    assert_eq!(field_of(b().ramp_up(past)), "ramp_up");
    assert_eq!(field_of(b().ramp_up(Duration::from_micros(999))), "ramp_up");
    assert_eq!(
        field_of(b().window(Duration::MAX, 1).failure_rate(0.5, 1)),
        "window"
    );
    assert_eq!(field_of(b().slow_calls(Duration::MAX, 0.5)), "slow_calls");
    assert_eq!(field_of(b().failure_rate(f64::INFINITY, 1)), "failure_rate");
    assert_eq!(field_of(b().slow_calls(MS, f64::NAN)), "slow_calls");
    assert_eq!(field_of(b().jitter(f64::INFINITY)), "jitter");
    assert_eq!(field_of(b().half_open_probes(65_536)), "half_open_probes");
    let past_streak = b().consecutive_failures(STREAK_LONGEST + 1);
    assert_eq!(field_of(past_streak), "consecutive_failures");
}

/// The longest streak a breaker counts.
const STREAK_LONGEST: u32 = u32::MAX / 2;

/// A breaker restored one failure short of the longest streak it counts trips
/// on the next failure (contract 17: at its threshold), from a saved streak
/// even longer than that (it was saved under other settings).
#[test]
fn the_longest_streak_trips_at_its_threshold() {
    let t0 = std::time::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let restored = |streak: u32| {
        let mut saved = cutout::SavedState::new("db", State::Closed, t0);
        saved.consecutive_failures = streak;
        CircuitBreaker::builder()
            .consecutive_failures(STREAK_LONGEST)
            .clock(ManualClock::new())
            .restore_at(saved, t0)
            .build()
            .unwrap()
    };
    for streak in [STREAK_LONGEST - 1, u32::MAX] {
        let b = restored(streak);
        assert_eq!(b.state(), State::Closed);
        fail(&b);
        assert_eq!(b.state(), State::Open, "from a saved streak of {streak}");
    }
}

/// A window is checked whenever it is set, as every setting is, even where no rate
/// policy uses it (contract 16: zero buckets is a `ConfigError` naming the field);
/// the default window, used only by a rate policy, is not.
#[test]
fn a_window_set_is_checked_even_without_a_rate_policy() {
    let b = || {
        CircuitBreaker::builder()
            .clock(ManualClock::new())
            .consecutive_failures(3)
    };
    assert_eq!(field_of(b().window(Duration::ZERO, 0)), "window");
    assert_eq!(field_of(b().window(SEC * 5000, 5000)), "window");
    assert_eq!(field_of(b().window(SEC * 10, 10)), "<built>");
}

/// Durations count in whole 1 ms ticks, rounded up, so a cooldown is never shorter
/// than set: 1.999 ms rejects for 2 ms, and no probe is admitted at 1 ms. A
/// maximum is compared with its base as given: 1.5 ms below 1.9 ms is refused,
/// though both take two ticks.
#[test]
fn a_part_of_a_millisecond_rounds_a_duration_up_and_a_maximum_compares_as_given() {
    let (b, clock) = on_manual_clock(trips_after(1, Duration::from_micros(1_999)));
    fail(&b);
    let r = b.try_acquire().unwrap_err();
    assert_eq!(r.retry_after(), Some(2 * MS));
    clock.advance(MS);
    assert!(b.try_acquire().is_err(), "a probe 1 ms into 1.999 ms");
    clock.advance(MS);
    assert!(b.try_acquire().is_ok_and(|p| p.is_probe()));

    let base_above_max = CircuitBreaker::builder()
        .clock(ManualClock::new())
        .open_duration(Duration::from_micros(1_900))
        .max_open_duration(Duration::from_micros(1_500));
    assert_eq!(field_of(base_above_max), "max_open_duration");
}

/// The largest counts, the smallest rate, the largest multiplier, a negative-zero
/// jitter and an empty name all build, and each breaker does what its setting says:
/// a streak or minimum no run of failures reaches trips nothing, 65,535 probes make
/// a round, a negative-zero jitter shortens nothing.
#[test]
fn the_extreme_valid_value_of_each_setting_builds_and_works() {
    let clock = ManualClock::new();
    let b = || CircuitBreaker::builder().clock(clock.clone());
    let built = |b: Builder<ManualClock>| b.build().unwrap_or_else(|e| panic!("{e}"));

    for unreachable in [
        built(b().consecutive_failures(STREAK_LONGEST)),
        built(b().failure_rate(f64::MIN_POSITIVE, u32::MAX)),
        built(b().minimum_calls(u32::MAX)),
    ] {
        for _ in 0..1_000 {
            fail(&unreachable);
        }
        assert_eq!(unreachable.state(), State::Closed);
    }

    let round = built(b().consecutive_failures(1).half_open_probes(65_535));
    fail(&round);
    clock.advance(SEC);
    let probes: Vec<_> = (0..65_535).map(|_| round.try_acquire().unwrap()).collect();
    assert!(round.try_acquire().is_err(), "exactly 65,535 probes");
    drop(probes);

    let multiplied = built(b().consecutive_failures(1).backoff_multiplier(f64::MAX));
    fail(&multiplied);
    let r = multiplied.try_acquire().unwrap_err();
    assert_eq!(r.retry_after(), Some(SEC), "the first cooldown is the base");

    let unjittered = built(b().consecutive_failures(1).jitter(-0.0));
    fail(&unjittered);
    let r = unjittered.try_acquire().unwrap_err();
    assert_eq!(r.retry_after(), Some(SEC));

    assert_eq!(built(b().name("")).name(), "");
}

/// A window as long as the clock's range, in one bucket, two or the most allowed:
/// calls ten years apart count together, it trips at its rate, and after a clock
/// advanced by `Duration::MAX` the next closed phase's window counts and trips too.
#[test]
fn a_window_as_long_as_the_clock_counts_and_trips() {
    for buckets in [1, 2, 4096] {
        let (b, clock) = on_manual_clock(rate_window(CLOCK_RANGE, buckets, 0.5, 4));
        assert!(succeed(&b));
        assert!(succeed(&b));
        clock.advance(Duration::from_secs(86_400 * 365 * 10));
        fail(&b);
        assert_eq!(b.state(), State::Closed, "{buckets} buckets");
        let m = b.metrics();
        assert_eq!(
            (m.window.calls, m.window.failures),
            (3, 1),
            "{buckets} buckets"
        );
        fail(&b);
        assert_eq!(b.state(), State::Open, "{buckets} buckets: 2 of 4 failed");
        clock.advance(Duration::MAX);
        assert!(succeed(&b));
        assert_eq!(b.state(), State::Closed);
        // A fresh window at the clock's end.
        fail(&b);
        fail(&b);
        fail(&b);
        assert_eq!(b.state(), State::Closed, "{buckets} buckets: 3 calls < 4");
        fail(&b);
        assert_eq!(b.state(), State::Open, "{buckets} buckets");
    }
}

/// A slow-call threshold as long as the clock's range: even a call that lasts until
/// the clock saturates is not slower than it, so it is not slow.
#[test]
fn a_slow_call_threshold_as_long_as_the_clock_calls_nothing_slow() {
    let (b, clock) = on_manual_clock(
        CircuitBreaker::builder()
            .slow_calls(CLOCK_RANGE, 0.5)
            .minimum_calls(1),
    );
    let p = b.try_acquire().unwrap();
    clock.advance(Duration::MAX);
    p.success();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.metrics().lifetime.slow, 0);
}

/// A 1 ns slow-call threshold is exact: a call that takes 1 ns is not slow, one that
/// takes 2 ns is, and the rate counts them (1 of 2, then 2 of 3: below 100%).
#[test]
fn a_one_nanosecond_slow_call_threshold_is_exact() {
    let (b, clock) = on_manual_clock(
        CircuitBreaker::builder()
            .slow_calls(Duration::from_nanos(1), 1.0)
            .minimum_calls(2),
    );
    let p = b.try_acquire().unwrap();
    clock.advance(Duration::from_nanos(1));
    p.success();
    assert_eq!(b.metrics().lifetime.slow, 0);
    let p = b.try_acquire().unwrap();
    clock.advance(Duration::from_nanos(2));
    p.success();
    assert_eq!(b.metrics().lifetime.slow, 1);
    assert_eq!(b.state(), State::Closed, "1 slow of 2 < 100%");
    let p = b.try_acquire().unwrap();
    clock.advance(Duration::from_nanos(2));
    p.success();
    assert_eq!(b.state(), State::Closed, "2 slow of 3 < 100%");
    assert_eq!(b.metrics().lifetime.slow, 2);
}

/// The longest cooldowns and timeouts together, with full jitter and backoff up to
/// the cap: the first cooldown is at most the base, and on a clock advanced by
/// `Duration::MAX` every cooldown ends, a failed probe's reopening (its backoff at
/// the cap) included.
#[test]
fn the_longest_durations_together_with_full_jitter_still_end() {
    let (b, clock) = on_manual_clock(
        trips_after(1, LONGEST / 2)
            .max_open_duration(LONGEST)
            .half_open_timeout(LONGEST)
            .jitter(1.0),
    );
    fail(&b);
    let r = b.try_acquire().unwrap_err();
    assert!(r.retry_after().unwrap() <= LONGEST / 2, "{r:?}");
    clock.advance(Duration::MAX);
    let probe = b
        .try_acquire()
        .expect("a saturated clock ends the cooldown");
    assert!(b.try_acquire().is_err(), "one probe");
    probe.failure();
    assert_eq!((b.state(), b.metrics().level), (State::Open, 1));
    assert!(succeed(&b), "the reopened cooldown ends at once too");
    assert_eq!(b.state(), State::Closed);
}

/// A builder is a reusable value: clones build independent breakers (one tripping
/// leaves the others closed) that share its listener.
#[test]
fn a_cloned_builder_builds_independent_breakers_that_share_its_listener() {
    let clock = ManualClock::new();
    let events = Arc::new(AtomicUsize::new(0));
    let counter = events.clone();
    let builder = CircuitBreaker::builder()
        .consecutive_failures(1)
        .clock(clock.clone())
        .on_transition(move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
        });
    let breakers: Vec<_> = (0..20).map(|_| builder.clone().build().unwrap()).collect();
    fail(&breakers[3]);
    for (i, b) in breakers.iter().enumerate() {
        assert_eq!(b.state() == State::Open, i == 3, "breaker {i}");
    }
    assert_eq!(events.load(Ordering::SeqCst), 1);
}

/// A restoring builder, cloned, restores the saved state into each breaker it
/// builds, and the breakers go their own ways from there.
#[test]
fn each_build_of_a_cloned_restoring_builder_restores_the_saved_state() {
    let clock = ManualClock::new();
    let builder = || trips_after(1, 10 * SEC).clock(clock.clone());
    let source = builder().build().unwrap();
    fail(&source);
    let restoring = builder().restore(source.save());
    let a = restoring.clone().build().unwrap();
    let b = restoring.build().unwrap();
    assert_eq!((a.state(), b.state()), (State::Open, State::Open));
    a.reset();
    assert_eq!((a.state(), b.state()), (State::Closed, State::Open));
}

/// Every public type a service keeps or passes between threads is `Send`, `Sync`
/// and `Unpin`, and the error types box into `Box<dyn Error + Send + Sync>`.
#[test]
fn the_public_types_are_send_sync_and_unpin() {
    fn check<T: Send + Sync + Unpin>() {}
    check::<CircuitBreaker>();
    check::<CircuitBreaker<ManualClock>>();
    check::<cutout::Builder>();
    check::<cutout::Builder<ManualClock>>();
    check::<cutout::Permit<'static>>();
    check::<cutout::OwnedPermit>();
    check::<cutout::OwnedPermit<ManualClock>>();
    check::<cutout::SavedState>();
    check::<cutout::SavedWindow>();
    check::<cutout::Metrics>();
    check::<cutout::Lifetime>();
    check::<cutout::Transition>();
    check::<cutout::Reason>();
    check::<State>();
    check::<WindowCounts>();
    check::<cutout::Rejected>();
    check::<cutout::ConfigError>();
    check::<cutout::Error<std::io::Error>>();
    check::<cutout::Dropped>();
    #[cfg(feature = "retry")]
    check::<cutout::RetryPolicy>();
    #[cfg(feature = "retry")]
    check::<cutout::RetryPolicyBuilder>();
    #[cfg(feature = "registry")]
    check::<cutout::Registry<String>>();
    check::<
        cutout::CallAsync<
            'static,
            std::future::Ready<Result<(), ()>>,
            cutout::ErrIsFailure,
            cutout::DefaultClock,
        >,
    >();
    // The error types work behind `Box<dyn Error + Send + Sync>`.
    fn boxed<E: std::error::Error + Send + Sync + 'static>() {}
    boxed::<cutout::Rejected>();
    boxed::<cutout::ConfigError>();
    boxed::<cutout::Error<std::io::Error>>();
}
