//! Pure transition decisions: the state word, counts, times and the configuration
//! in, a decision out. No clock, no atomics; the breaker reads the clock, applies a
//! decision with its CAS and announces it.
//!
//! - Trip: [`streak_trips`], [`rate_trip`] (after a failure or a slow call, and
//!   after a success only where [`trips_at_minimum`] said a check found the
//!   window below `minimum_calls` with a rate that stands at its threshold there:
//!   any other success only lowers the rates, or leaves the window below
//!   `minimum_calls`).
//! - Close: [`round_closes`]. Reopen: [`next_level`], the backoff level a failed or
//!   timed-out round reopens at; [`round_timed_out`], the half-open timeout.
//! - Cooldown: [`cooldown`] (with jitter, the same for every thread), and
//!   [`phase_time`], a phase's time from its start (Open: its deadline).
//! - What a rejection by a full round says: [`half_open_retry`].

use crate::config::Config;
use crate::event::Reason;
use crate::state::{Generation, Snapshot, State, next_generation};
use crate::util::splitmix64;
use crate::window::WindowCounts;

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

/// The tick at which a half-open round that started at tick `started` times out:
/// `half_open_timeout` later, saturated at `ticks_max` (the last tick the clock
/// reaches) as a cooldown's deadline is, so a clock that saturates ends a round in
/// progress. Not a round that started there: it would time out at once, reopen,
/// find its cooldown over (saturated too) and start another, for ever; its probes
/// decide it.
#[inline]
fn round_ends(config: &Config, ticks_max: u64, started: u64) -> u64 {
    let ends = started.saturating_add(config.half_open_timeout);
    match started < ticks_max {
        true => ends.min(ticks_max),
        false => ends,
    }
}

/// Whether a half-open round that started at tick `started` has gone
/// `half_open_timeout` without a verdict at tick `now` (see [`round_ends`]): it
/// failed.
#[inline]
pub(crate) fn round_timed_out(config: &Config, ticks_max: u64, started: u64, now: u64) -> bool {
    now >= round_ends(config, ticks_max, started)
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
    ticks_max: u64,
    s: Snapshot,
    started: u64,
    now: u64,
) -> u64 {
    let ends = round_ends(config, ticks_max, started);
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
    rate_verdict(config, c).err()
}

/// Whether counts `c`, read by a check that did not trip, hold fewer calls than
/// `minimum_calls` and would trip at `minimum_calls` calls with the failed and
/// slow calls they hold: then the success that brings the window up to
/// `minimum_calls` may trip it, and must check the rates.
#[inline]
pub(crate) fn trips_at_minimum(config: &Config, c: WindowCounts) -> bool {
    let calls = config.minimum_calls;
    c.calls < calls && rate_trip(config, WindowCounts { calls, ..c }).is_some()
}

/// [`rate_trip`]'s reason as `Err`; if neither rate trips, the failure budget's
/// allowance (see `window::budget`): how many more failed or slow samples the
/// counts `c`, read by a trip check, can take with neither rate reached, whatever
/// the calls do; `None` if not even one more is certain. Each sample adds at most
/// one failure and one slow call; the calls are taken as read (or as
/// `minimum_calls`, below which nothing trips), since within one newest bucket they
/// only grow, and a reader may see a racing sample's call before its failure.
///
/// A rate is reached when `count / calls >= threshold`, as the builder's docs say,
/// computed as written: the quotient and the threshold are each the `f64` nearest
/// their exact values, so a count exactly at a decimal threshold (55 of 100 at
/// 0.55) reaches it, where `count >= threshold * calls` would not (`0.55 * 100.0`
/// is 55.000000000000007). The allowance comes from the rate's room, the threshold
/// times the calls less the count: its floor less 2, the most samples strictly
/// below it, less one for the shared stripes' rotation race (a racing writer may
/// lose one call), which also covers the room's rounding for counts below 2^52 and
/// the few ulps by which the quotient and the product can disagree at a crossing.
#[inline]
pub(crate) fn rate_verdict(config: &Config, c: WindowCounts) -> Result<Option<u64>, Reason> {
    let counted = c.calls >= config.minimum_calls;
    let calls = float(c.calls.max(config.minimum_calls));
    let mut allowance = Some(u64::MAX);
    if let Some(threshold) = config.failure_rate {
        if counted && reached(c.failures, calls, threshold) {
            return Err(Reason::FailureRate);
        }
        allowance = allowance.min(headroom(threshold * calls - float(c.failures)));
    }
    if let Some(slow) = &config.slow_calls {
        if counted && reached(c.slow, calls, slow.rate) {
            return Err(Reason::SlowCallRate);
        }
        allowance = allowance.min(headroom(slow.rate * calls - float(c.slow)));
    }
    Ok(allowance)
}

/// Whether a rate of `count` events in `calls` reaches `threshold` (see
/// [`rate_verdict`]). Never with a count of zero: the builder refuses a threshold
/// of 0, and this keeps a policy from claiming a trip that none of its own events
/// caused, whatever the threshold (and a count above zero means calls above zero).
#[inline]
fn reached(count: u64, calls: f64, threshold: f64) -> bool {
    count > 0 && float(count) / calls >= threshold
}

/// The allowance a rate's room leaves (see [`rate_verdict`]): `as` takes the floor
/// of a room of 0 or more (no call to `floor`), turns NaN into 0 and a room beyond
/// `i64` into `i64::MAX`; a room below 2, negative ones included, leaves none.
#[inline]
fn headroom(room: f64) -> Option<u64> {
    // Through `i64`: one instruction and a fix-up on x86-64, where `u64` takes ten.
    (room as i64)
        .checked_sub(2)
        .and_then(|a| u64::try_from(a).ok())
}

/// A count as a float: exact below 2^53, as `as f64` is; through `i64` (one
/// instruction on x86-64, where `u64` takes eight), so a count of 2^63 or more
/// (centuries of calls at a billion a second) reads as 2^63.
#[inline]
fn float(n: u64) -> f64 {
    n.min(i64::MAX as u64) as i64 as f64
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
    fn a_success_checks_only_below_minimum_calls_with_a_rate_at_its_threshold_there() {
        let c = CircuitBreaker::builder()
            .clock(ManualClock::new())
            .failure_rate(0.5, 5)
            .slow_calls(Duration::from_millis(10), 0.8)
            .validate()
            .unwrap();
        assert!(trips_at_minimum(&c, counts(3, 3, 0)), "3 of 5 is 60%");
        assert!(!trips_at_minimum(&c, counts(3, 2, 0)), "2 of 5 is 40%");
        assert!(trips_at_minimum(&c, counts(4, 0, 4)), "4 slow of 5 is 80%");
        assert!(!trips_at_minimum(&c, counts(4, 0, 3)));
        assert!(
            !trips_at_minimum(&c, counts(5, 5, 5)),
            "at the minimum already"
        );
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
    fn the_allowance_is_what_neither_rate_can_take_less_one() {
        let c = CircuitBreaker::builder()
            .clock(ManualClock::new())
            .failure_rate(0.5, 20)
            .slow_calls(Duration::from_millis(10), 0.8)
            .validate()
            .unwrap();
        // 100 calls, 10 failed: 39 more stay below 50 (one less for the race: 38).
        assert_eq!(verdict(&c, counts(100, 10, 0)), Some(38));
        // The slow calls leave less: 79 stay below 80, less one, 78 - 70.
        assert_eq!(verdict(&c, counts(100, 10, 70)), Some(8));
        // Below minimum_calls the calls count as 20: 9 stay below 10, less one.
        assert_eq!(verdict(&c, counts(3, 1, 0)), Some(7));
        // Room for one: none beyond the race's margin; room for none: no grant.
        assert_eq!(verdict(&c, counts(100, 48, 0)), Some(0));
        assert_eq!(verdict(&c, counts(100, 49, 0)), None);
        assert_eq!(
            rate_verdict(&c, counts(100, 60, 0)),
            Err(Reason::FailureRate)
        );
        assert_eq!(
            verdict(&c, counts(10, 30, 0)),
            None,
            "over, below minimum_calls"
        );
    }

    fn verdict(c: &Config, counts: WindowCounts) -> Option<u64> {
        rate_verdict(c, counts).unwrap()
    }

    /// The rate check as the builder's docs state it: `count / calls >= threshold`.
    fn reference_trip(config: &Config, c: WindowCounts) -> Option<Reason> {
        let reached = |count: u64, t: f64| count > 0 && count as f64 / c.calls as f64 >= t;
        if c.calls < config.minimum_calls {
            None
        } else if config.failure_rate.is_some_and(|t| reached(c.failures, t)) {
            Some(Reason::FailureRate)
        } else if config.slow_calls.is_some_and(|s| reached(c.slow, s.rate)) {
            Some(Reason::SlowCallRate)
        } else {
            None
        }
    }

    /// A threshold: any rate, or a decimal one (`k / 100`), where the quotient and
    /// the product `threshold * calls` disagree at exact crossings.
    fn threshold() -> impl proptest::strategy::Strategy<Value = f64> {
        use proptest::strategy::Strategy;
        proptest::prop_oneof![
            0.01f64..=1.0,
            (1u32..=100).prop_map(|k| f64::from(k) / 100.0)
        ]
    }

    proptest::proptest! {
        /// However a read that did not trip is followed, no trip is possible while
        /// at most `allowance` more samples fail and are slow, the calls staying at
        /// least as read (less the one the shared stripes' race may lose).
        #[test]
        fn no_trip_is_possible_within_the_allowance(
            calls in 0u64..2_000,
            failures in 0u64..2_000,
            slow in 0u64..2_000,
            minimum in 1u64..200,
            failure_rate in proptest::option::of(threshold()),
            slow_rate in proptest::option::of(threshold()),
            more_calls in 0u64..1_000,
        ) {
            let (failures, slow) = (failures.min(calls), slow.min(calls));
            let mut c = CircuitBreaker::builder()
                .clock(ManualClock::new())
                .failure_rate(0.5, 1)
                .slow_calls(Duration::from_millis(10), 0.5)
                .validate()
                .unwrap();
            c.minimum_calls = minimum;
            c.failure_rate = failure_rate;
            if let (Some(s), Some(r)) = (&mut c.slow_calls, slow_rate) {
                s.rate = r;
            } else {
                c.slow_calls = None;
            }
            let read = counts(calls, failures, slow);
            proptest::prop_assert_eq!(rate_trip(&c, read), reference_trip(&c, read));
            let Ok(allowance) = rate_verdict(&c, read) else {
                return Ok(());
            };
            if let Some(a) = allowance {
                let later = counts(
                    (calls + more_calls).saturating_sub(1),
                    failures.saturating_add(a),
                    slow.saturating_add(a),
                );
                proptest::prop_assert_eq!(rate_trip(&c, later), None, "{:?} then {}", read, a);
                proptest::prop_assert_eq!(reference_trip(&c, later), None, "{:?} then {}", read, a);
            }
        }
    }

    #[test]
    fn a_rate_exactly_at_a_decimal_threshold_is_reached_and_one_less_is_not() {
        let mut c = CircuitBreaker::builder()
            .clock(ManualClock::new())
            .failure_rate(0.5, 1)
            .validate()
            .unwrap();
        for k in 1..=100u64 {
            c.failure_rate = Some(k as f64 / 100.0);
            // Every count of calls where the threshold is a whole count of failures.
            for calls in (1..=400u64).filter(|calls| calls * k % 100 == 0) {
                let at = calls * k / 100;
                let trip = rate_trip(&c, counts(calls, at, 0));
                assert_eq!(trip, Some(Reason::FailureRate), "{at} of {calls} at {k}%");
                let below = rate_trip(&c, counts(calls, at - 1, 0));
                assert_eq!(below, None, "{} of {calls} at {k}%", at - 1);
            }
        }
    }

    #[test]
    fn a_rate_is_never_reached_with_none_of_its_own_events() {
        // The builder refuses a threshold of 0; a config that had
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
        let max = u64::MAX;
        assert!(!round_timed_out(&c, max, 100, 30_099));
        assert!(round_timed_out(&c, max, 100, 30_100));
        assert!(
            round_timed_out(&c, max, u64::MAX - 5, u64::MAX),
            "no overflow"
        );
        // A clock that saturates at tick 20,000 ends the round there, but not one
        // that started there (its probes decide it).
        assert!(!round_timed_out(&c, 20_000, 100, 19_999));
        assert!(round_timed_out(&c, 20_000, 100, 20_000));
        assert!(!round_timed_out(&c, 20_000, 20_000, 20_000));
        assert!(!round_closes(&c, 1));
        assert!(round_closes(&c, 2));
        // A full round's rejection: the time left, at most the next cooldown (2 s).
        assert_eq!(half_open_retry(&c, 0, max, at(0), 100, 29_600), 500);
        assert_eq!(half_open_retry(&c, 0, max, at(0), 100, 200), 2_000);
        assert_eq!(half_open_retry(&c, 0, 19_900, at(0), 100, 19_800), 100);
    }
}
