use super::*;
use crate::ManualClock;

fn builder() -> Builder<ManualClock> {
    CircuitBreaker::builder().clock(ManualClock::new())
}

fn field_of(b: Builder<ManualClock>) -> &'static str {
    b.validate().unwrap_err().field()
}

#[test]
fn long_slow_call_thresholds_are_timed_with_the_cheap_reading() {
    let timed = |threshold| {
        CircuitBreaker::builder()
            .slow_calls(threshold, 0.5)
            .validate()
            .unwrap()
            .slow_calls
            .unwrap()
            .precise()
    };
    // The default clock resolves 1 ms.
    assert!(!timed(Duration::from_millis(100)));
    assert!(timed(Duration::from_millis(99)));
}

#[test]
fn no_policy_means_the_default_window_and_failure_rate() {
    let c = builder().validate().unwrap();
    assert_eq!(c.consecutive_failures, None);
    assert_eq!(c.failure_rate, Some(0.5));
    assert_eq!(c.minimum_calls, 20);
    assert_eq!(
        c.window,
        Some(WindowConfig {
            bucket_nanos: 1_000_000_000,
            buckets: 10
        })
    );
    assert_eq!(
        &*c.cooldowns,
        &[1000, 2000, 4000, 8000, 16000, 32000, 60000]
    );
    assert_eq!((c.half_open_probes, c.half_open_timeout), (1, 30_000));
}

#[test]
fn any_configured_policy_replaces_the_defaults() {
    let c = builder().consecutive_failures(3).validate().unwrap();
    assert_eq!(
        (c.consecutive_failures, c.failure_rate, c.window),
        (Some(3), None, None)
    );
    let c = builder()
        .slow_calls(Duration::from_millis(100), 0.5)
        .validate()
        .unwrap();
    assert_eq!(c.failure_rate, None);
    assert!(c.window.is_some(), "a rate policy gets the default window");
}

#[test]
fn max_open_duration_defaults_to_at_least_open_duration() {
    let c = builder()
        .open_duration(Duration::from_secs(90))
        .validate()
        .unwrap();
    assert_eq!(&*c.cooldowns, &[90_000]);
}

#[test]
fn every_bad_value_names_its_field() {
    let d = Duration::from_secs(1);
    assert_eq!(
        field_of(builder().consecutive_failures(0)),
        "consecutive_failures"
    );
    assert_eq!(field_of(builder().window(d, 0)), "window");
    assert_eq!(field_of(builder().window(Duration::ZERO, 1)), "window");
    assert_eq!(field_of(builder().failure_rate(1.5, 10)), "failure_rate");
    assert_eq!(
        field_of(builder().failure_rate(f64::NAN, 10)),
        "failure_rate"
    );
    assert_eq!(field_of(builder().failure_rate(-0.1, 10)), "failure_rate");
    assert_eq!(field_of(builder().failure_rate(0.5, 0)), "minimum_calls");
    assert_eq!(field_of(builder().minimum_calls(0)), "minimum_calls");
    assert_eq!(
        field_of(builder().slow_calls(Duration::ZERO, 0.5)),
        "slow_calls"
    );
    assert_eq!(field_of(builder().slow_calls(d, 2.0)), "slow_calls");
    assert_eq!(
        field_of(builder().open_duration(Duration::ZERO)),
        "open_duration"
    );
    assert_eq!(
        field_of(builder().open_duration(Duration::from_micros(999))),
        "open_duration"
    );
    assert_eq!(
        field_of(builder().open_duration(Duration::MAX)),
        "open_duration"
    );
    assert_eq!(
        field_of(builder().backoff_multiplier(0.5)),
        "backoff_multiplier"
    );
    assert_eq!(
        field_of(builder().backoff_multiplier(f64::NAN)),
        "backoff_multiplier"
    );
    assert_eq!(
        field_of(builder().backoff_multiplier(f64::INFINITY)),
        "backoff_multiplier"
    );
    assert_eq!(
        field_of(builder().backoff_multiplier(1.0001)),
        "backoff_multiplier"
    );
    assert_eq!(
        field_of(builder().open_duration(d * 2).max_open_duration(d)),
        "max_open_duration"
    );
    assert_eq!(field_of(builder().jitter(1.01)), "jitter");
    assert_eq!(field_of(builder().jitter(f64::NAN)), "jitter");
    assert_eq!(field_of(builder().half_open_probes(0)), "half_open_probes");
    assert_eq!(
        field_of(builder().half_open_probes(u32::MAX)),
        "half_open_probes"
    );
    assert_eq!(
        field_of(builder().half_open_timeout(Duration::ZERO)),
        "half_open_timeout"
    );
}

#[test]
fn a_window_beyond_the_bucket_bound_is_refused_not_allocated() {
    use crate::stripe::{MAX_BREAKER_BYTES, MAX_BUCKETS, MAX_STRIPE_BYTES, MAX_STRIPES};
    // The numbers `Builder::window` states.
    assert_eq!(
        (
            MAX_BUCKETS,
            MAX_STRIPES,
            MAX_STRIPE_BYTES,
            MAX_BREAKER_BYTES
        ),
        (4096, 68, 512 << 10, 48 << 20)
    );
    // Without the bounds, this would validate and abort on a 687 GB allocation.
    let err = builder()
        .window(Duration::from_secs(50 * 86_400), u32::MAX)
        .validate()
        .unwrap_err();
    assert_eq!(err.field(), "window");
    assert!(err.reason().contains("4096"), "{err}");
    let secs = |n: u32| Duration::from_secs(u64::from(n));
    assert!(
        builder()
            .window(secs(MAX_BUCKETS), MAX_BUCKETS)
            .validate()
            .is_ok()
    );
    assert_eq!(
        field_of(builder().window(secs(MAX_BUCKETS + 1), MAX_BUCKETS + 1)),
        "window"
    );
}

#[test]
fn a_rate_threshold_of_zero_is_refused_but_a_jitter_of_zero_is_not() {
    let d = Duration::from_secs(1);
    assert_eq!(field_of(builder().failure_rate(0.0, 1)), "failure_rate");
    assert_eq!(field_of(builder().failure_rate(-0.0, 1)), "failure_rate");
    assert_eq!(field_of(builder().slow_calls(d, 0.0)), "slow_calls");
    assert!(builder().failure_rate(1.0, 1).validate().is_ok());
    assert!(
        builder()
            .slow_calls(d, f64::MIN_POSITIVE)
            .validate()
            .is_ok()
    );
    assert_eq!(builder().jitter(0.0).validate().unwrap().jitter, 0.0);
    assert_eq!(builder().jitter(1.0).validate().unwrap().jitter, 1.0);
    assert_eq!(field_of(builder().jitter(-0.1)), "jitter");
}

#[test]
fn a_bucket_shorter_than_the_clock_resolution_is_refused() {
    let err = CircuitBreaker::builder()
        .window(Duration::from_millis(5), 10)
        .failure_rate(0.5, 10)
        .validate()
        .unwrap_err();
    assert_eq!(err.field(), "window");
    assert!(err.reason().contains("resolution"), "{err}");
    // The default clock resolves 1 ms; a manual clock 1 ns, but a bucket is
    // still at least one tick.
    assert!(
        builder()
            .window(Duration::from_millis(10), 10)
            .validate()
            .is_ok()
    );
    assert_eq!(
        field_of(builder().window(Duration::from_millis(5), 10)),
        "window"
    );
}

#[test]
fn jitter_only_shortens_and_is_the_same_for_the_same_generation() {
    let c = builder().jitter(0.5).validate().unwrap();
    for generation in 0..1000u32 {
        let d = crate::policy::cooldown(&c, 0, generation, 42);
        assert!((500..=1000).contains(&d), "{d}");
        assert_eq!(d, crate::policy::cooldown(&c, 0, generation, 42));
    }
    let spread: std::collections::HashSet<_> = (0..100u32)
        .map(|g| crate::policy::cooldown(&c, 0, g, 7))
        .collect();
    assert!(
        spread.len() > 50,
        "jitter should spread deadlines: {}",
        spread.len()
    );
}

#[test]
fn levels_beyond_the_table_use_the_cap() {
    let c = builder().validate().unwrap();
    assert_eq!(c.max_level(), 6);
    assert_eq!(crate::policy::cooldown(&c, 40, 0, 0), 60_000);
}

/// A seeded builder (a replay's) fixes its candidates' seeds too, each its own:
/// two builds make the same jittered cooldowns, so a candidate's time open is
/// the same, and another seed draws another.
#[cfg(feature = "replay")]
#[test]
fn a_seeded_builder_fixes_its_candidates_jitter() {
    let time_open = |seed| {
        let clock = ManualClock::new();
        let jittered = || {
            CircuitBreaker::builder()
                .consecutive_failures(1)
                .open_duration(Duration::from_secs(100))
                .jitter(0.5)
        };
        let b = CircuitBreaker::builder()
            .clock(clock.clone())
            .consecutive_failures(1000)
            .candidate("first", jittered())
            .candidate("second", jittered())
            .seeded(seed)
            .build()
            .unwrap();
        let _ = b.call(|| Err::<(), _>(()));
        clock.advance(Duration::from_secs(1000));
        let _ = b.call(|| Ok::<_, ()>(()));
        let reports = b.candidates();
        [reports[0].time_open, reports[1].time_open]
    };
    let [first, second] = time_open(7);
    assert_eq!(time_open(7), [first, second]);
    assert_ne!(first, second, "each candidate draws its own jitter");
    assert_ne!(time_open(8), [first, second]);
}
