//! Pure trip decisions: window counts and configuration in, a reason out. No clock,
//! no atomics; the breaker calls these after recording a failure or a slow call
//! (never after a plain success, which can only lower a rate).

use crate::config::Config;
use crate::event::{Reason, WindowCounts};

/// Whether `streak` consecutive failures trip the breaker.
#[inline]
pub(crate) fn streak_trips(config: &Config, streak: u64) -> bool {
    config
        .consecutive_failures
        .is_some_and(|threshold| streak >= threshold)
}

/// Which rate policy, if any, trips on these window counts. The failure rate is
/// checked first. A rate at exactly its threshold trips.
pub(crate) fn rate_trip(config: &Config, c: WindowCounts) -> Option<Reason> {
    if c.calls < config.minimum_calls {
        return None;
    }
    let calls = c.calls as f64;
    if config
        .failure_rate
        .is_some_and(|t| c.failures as f64 >= t * calls)
    {
        return Some(Reason::FailureRate);
    }
    if config
        .slow_calls
        .is_some_and(|s| c.slow as f64 >= s.rate * calls)
    {
        return Some(Reason::SlowCallRate);
    }
    None
}

#[cfg(all(test, not(cutout_loom)))]
mod tests {
    use super::*;
    use crate::{CircuitBreaker, ManualClock};
    use std::time::Duration;

    fn counts(calls: u64, failures: u64, slow: u64) -> WindowCounts {
        WindowCounts {
            calls,
            failures,
            slow,
        }
    }

    #[test]
    fn a_rate_at_exactly_the_threshold_trips_once_minimum_calls_are_in() {
        let c = CircuitBreaker::builder()
            .clock(ManualClock::new())
            .failure_rate(0.5, 10)
            .validate()
            .unwrap();
        assert_eq!(rate_trip(&c, counts(10, 5, 0)), Some(Reason::FailureRate));
        assert_eq!(rate_trip(&c, counts(10, 4, 0)), None);
        assert_eq!(rate_trip(&c, counts(9, 9, 0)), None, "below minimum_calls");
    }

    #[test]
    fn slow_call_rate_trips_on_its_own_threshold() {
        let c = CircuitBreaker::builder()
            .clock(ManualClock::new())
            .failure_rate(0.5, 4)
            .slow_calls(Duration::from_millis(10), 0.75)
            .validate()
            .unwrap();
        assert_eq!(rate_trip(&c, counts(4, 1, 3)), Some(Reason::SlowCallRate));
        assert_eq!(rate_trip(&c, counts(4, 2, 3)), Some(Reason::FailureRate));
        assert_eq!(rate_trip(&c, counts(4, 1, 2)), None);
    }

    #[test]
    fn the_streak_policy_is_off_unless_configured() {
        let off = CircuitBreaker::builder()
            .clock(ManualClock::new())
            .validate()
            .unwrap();
        assert!(!streak_trips(&off, u64::MAX));
        let on = CircuitBreaker::builder()
            .clock(ManualClock::new())
            .consecutive_failures(3)
            .validate()
            .unwrap();
        assert!(!streak_trips(&on, 2) && streak_trips(&on, 3));
    }
}
