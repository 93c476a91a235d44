//! Pure transition decisions: the state word, counts, times and the configuration
//! in, a decision out. No clock, no atomics; the breaker reads the clock, applies a
//! decision with its CAS and announces it.
//!
//! - Trip: [`streak_trips`], [`rate_trip`] (after a failure or a slow call, never
//!   after a plain success, which can only lower a rate).
//! - Close: [`round_closes`]. Reopen: [`next_level`], the backoff level a failed or
//!   timed-out round reopens at; [`round_timed_out`], the half-open timeout.
//! - Cooldown: [`cooldown`] (with jitter, the same for every thread), and
//!   [`phase_time`], a phase's time from its start (Open: its deadline).
//! - What a rejection by a full round says: [`half_open_retry`].

use crate::config::Config;
use crate::event::{Reason, WindowCounts};
use crate::state::{Generation, Snapshot, State, next_generation};
use crate::util::splitmix64;

/// The jittered cooldown, in ticks, of an Open phase at `level` in `generation`:
/// the open duration of the level, shortened by the generation's jitter. A
/// counter-based PRNG: the same (`seed`, `generation`) always gives the same
/// jitter, so every thread computes the same deadline from the same word.
#[inline]
pub(crate) fn cooldown(config: &Config, level: u8, generation: Generation, seed: u64) -> u64 {
    // `level` never exceeds `max_level()` (see `next_level`); a miss reads the cap.
    let base = config
        .cooldowns
        .get(usize::from(level))
        .copied()
        .unwrap_or(config.max_cooldown());
    if config.jitter == 0.0 {
        return base;
    }
    let u = (splitmix64(seed ^ u64::from(generation)) >> 11) as f64 / (1u64 << 53) as f64;
    base - (base as f64 * config.jitter * u) as u64
}

/// The time of phase `s` if it started at tick `start`: for Open its deadline,
/// `start` plus its cooldown (saturated at `ticks_max`, the last tick the clock
/// can reach, so a saturated clock ends every cooldown); otherwise `start`.
#[inline]
pub(crate) fn phase_time(
    config: &Config,
    seed: u64,
    ticks_max: u64,
    s: Snapshot,
    start: u64,
) -> u64 {
    if s.is(State::Open) {
        start
            .saturating_add(cooldown(config, s.level(), s.generation(), seed))
            .min(ticks_max)
    } else {
        start
    }
}

/// The backoff level a failed (or timed-out) round of `s` reopens at.
#[inline]
pub(crate) fn next_level(config: &Config, s: Snapshot) -> u8 {
    s.level().saturating_add(1).min(config.max_level())
}

/// Whether a half-open round that started at tick `started` has gone
/// `half_open_timeout` without a verdict at tick `now`: it failed.
#[inline]
pub(crate) fn round_timed_out(config: &Config, started: u64, now: u64) -> bool {
    now >= started.saturating_add(config.half_open_timeout)
}

/// Whether `succeeded` probe successes close the round.
#[inline]
pub(crate) fn round_closes(config: &Config, succeeded: u32) -> bool {
    succeeded >= config.half_open_probes
}

/// How long a call rejected by a full half-open round of `s` that started at
/// `started` should wait, at `now`: until the round can end, but no longer than the
/// cooldown a failed round would start. The round ends when its probes report,
/// usually within a call's time: if they close the breaker, a retry is admitted; if
/// they reopen it, a probe is next admitted after that cooldown. Waiting for the
/// whole half-open timeout (30 s by default) would overshoot both.
pub(crate) fn half_open_retry(
    config: &Config,
    seed: u64,
    s: Snapshot,
    started: u64,
    now: u64,
) -> u64 {
    let ends = started.saturating_add(config.half_open_timeout);
    let reopened = cooldown(
        config,
        next_level(config, s),
        next_generation(s.generation()),
        seed,
    );
    ends.saturating_sub(now).min(reopened)
}

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

    fn config(b: crate::Builder<ManualClock>) -> Config {
        b.into_parts().expect("valid").config
    }

    #[test]
    fn a_phase_time_is_its_start_or_for_open_its_deadline() {
        let c = config(
            CircuitBreaker::builder()
                .open_duration(Duration::from_secs(1))
                .clock(ManualClock::new()),
        );
        let open = Snapshot::starting(State::Open, 0);
        assert_eq!(phase_time(&c, 7, u64::MAX, open, 500), 1_500);
        assert_eq!(phase_time(&c, 7, 1_200, open, 500), 1_200, "saturated");
        let half = Snapshot::starting(State::HalfOpen, 0);
        assert_eq!(phase_time(&c, 7, u64::MAX, half, 500), 500);
    }

    #[test]
    fn a_round_reopens_one_level_up_to_the_cap_and_times_out_and_closes() {
        let c = config(
            CircuitBreaker::builder()
                .open_duration(Duration::from_secs(1))
                .max_open_duration(Duration::from_secs(4))
                .half_open_probes(2)
                .half_open_timeout(Duration::from_secs(30))
                .clock(ManualClock::new()),
        );
        let at = |level| Snapshot::starting(State::HalfOpen, level);
        assert_eq!(next_level(&c, at(0)), 1);
        assert_eq!(next_level(&c, at(2)), 2, "4 s is the cap: level 2");
        assert!(!round_timed_out(&c, 100, 30_099));
        assert!(round_timed_out(&c, 100, 30_100));
        assert!(round_timed_out(&c, u64::MAX - 5, u64::MAX), "no overflow");
        assert!(!round_closes(&c, 1));
        assert!(round_closes(&c, 2));
        // A full round's rejection: the time left, at most the next cooldown (2 s).
        assert_eq!(half_open_retry(&c, 0, at(0), 100, 29_600), 500);
        assert_eq!(half_open_retry(&c, 0, at(0), 100, 200), 2_000);
    }
}
