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

/// Which rate policy, if any, trips on these window counts: the reason is always
/// the policy whose own condition holds. The failure rate is checked first. A rate
/// at exactly its threshold trips.
pub(crate) fn rate_trip(config: &Config, c: WindowCounts) -> Option<Reason> {
    if c.calls < config.minimum_calls {
        return None;
    }
    if config
        .failure_rate
        .is_some_and(|t| rate_reached(c.failures, c.calls, t))
    {
        return Some(Reason::FailureRate);
    }
    if config
        .slow_calls
        .is_some_and(|s| rate_reached(c.slow, c.calls, s.rate))
    {
        return Some(Reason::SlowCallRate);
    }
    None
}

/// Whether `count / calls >= threshold`. A rate is never reached with a count of
/// zero: the builder refuses a threshold of 0, and this keeps a policy from
/// claiming a trip that none of its own events caused, whatever the threshold.
#[inline]
fn rate_reached(count: u64, calls: u64, threshold: f64) -> bool {
    count > 0 && count as f64 >= threshold * calls as f64
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
    fn a_rate_is_never_reached_with_none_of_its_own_events() {
        // The builder refuses a threshold of 0 (issue 15 item 5); a config that had
        // one still could not report a policy whose condition has no event behind it.
        let mut c = CircuitBreaker::builder()
            .clock(ManualClock::new())
            .failure_rate(0.5, 10)
            .slow_calls(Duration::from_secs(1), 0.5)
            .validate()
            .unwrap();
        let set_slow_rate = |c: &mut Config, rate| {
            if let Some(s) = c.slow_calls.as_mut() {
                s.rate = rate;
            }
        };
        set_slow_rate(&mut c, 0.0);
        assert_eq!(rate_trip(&c, counts(10, 1, 0)), None, "one fast failure");
        assert_eq!(rate_trip(&c, counts(10, 1, 1)), Some(Reason::SlowCallRate));
        set_slow_rate(&mut c, 0.5);
        c.failure_rate = Some(0.0);
        assert_eq!(rate_trip(&c, counts(10, 0, 1)), None, "one slow success");
        assert_eq!(rate_trip(&c, counts(10, 1, 0)), Some(Reason::FailureRate));
        assert_eq!(rate_trip(&c, counts(10, 0, 0)), None);
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
