//! The breakers the tests start from: builders for the common policies, and a
//! breaker built on a `ManualClock` of its own.

use cutout::{Builder, CircuitBreaker, Clock, ManualClock};
use std::time::Duration;

/// A breaker builder that trips on `failures` consecutive failures and stays open
/// for `cooldown`.
pub fn trips_after(failures: u32, cooldown: Duration) -> Builder {
    CircuitBreaker::builder()
        .consecutive_failures(failures)
        .open_duration(cooldown)
}

/// A breaker builder that trips at a failure rate of `rate` once `min` calls are
/// in its window of `length` in `buckets` buckets.
pub fn rate_window(length: Duration, buckets: u32, rate: f64, min: u32) -> Builder {
    CircuitBreaker::builder()
        .window(length, buckets)
        .failure_rate(rate, min)
}

/// A breaker builder on `clock` that trips on `failures` consecutive failures.
pub fn trips_on<C: Clock>(failures: u32, clock: C) -> Builder<C> {
    CircuitBreaker::builder()
        .consecutive_failures(failures)
        .clock(clock)
}

/// `builder` built on a new `ManualClock`: the breaker and its clock.
pub fn on_manual_clock(builder: Builder) -> (CircuitBreaker<ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    let breaker = builder.clock(clock.clone()).build().unwrap();
    (breaker, clock)
}

/// `b` with the trip policies a generated configuration sets, each if given: a
/// streak; a window (its length in ms, its buckets); a failure rate (threshold,
/// minimum calls); slow calls (threshold in ms, rate).
pub fn with_policies<C: Clock>(
    mut b: Builder<C>,
    consecutive: Option<u32>,
    window: Option<(u64, u32)>,
    failure_rate: Option<(f64, u32)>,
    slow: Option<(u64, f64)>,
) -> Builder<C> {
    let ms = Duration::from_millis;
    if let Some(n) = consecutive {
        b = b.consecutive_failures(n);
    }
    if let Some((len, buckets)) = window {
        b = b.window(ms(len), buckets);
    }
    if let Some((rate, min)) = failure_rate {
        b = b.failure_rate(rate, min);
    }
    if let Some((threshold, rate)) = slow {
        b = b.slow_calls(ms(threshold), rate);
    }
    b
}
