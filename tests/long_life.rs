//! A long life (DESIGN.md contract lines 17-19): every policy still trips after any
//! number of transitions, no outcome admitted under an earlier phase counts, the
//! backoff and its jitter keep to their bounds over many cycles, every kind of
//! transition keeps the generation chain through its wraps, and time keeps working
//! at the ends of its range: a clock that saturates, or that never moves, a
//! cooldown's last nanoseconds, and the clocks themselves read from many threads. A
//! test that is a regression test for a finding says what the code before did.
//!
//! Under `--cfg cutout_tiny_generations` (a 3-bit generation) the tests that rely
//! on a distance not being a whole generation cycle are left out: there the
//! generation-tagged data of a phase 8 transitions on reads as a permit's own.

mod common;

use common::{Log, logged, on_manual_clock, rate_window, trips_after};
use cutout::{CircuitBreaker, Clock, DefaultClock, Error, ManualClock, Outcome, Reason, State};
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);
const SEC: Duration = Duration::from_secs(1);
/// The longest duration a setting takes: `u64::MAX` nanoseconds in whole ms.
const LONGEST: Duration = Duration::from_millis(u64::MAX / 1_000_000);
/// The generation's mask: 32 bits, or 3 under `--cfg cutout_tiny_generations`.
#[cfg(not(cutout_tiny_generations))]
const GEN_MASK: u32 = u32::MAX;
#[cfg(cutout_tiny_generations)]
const GEN_MASK: u32 = 7;

fn fail(b: &CircuitBreaker<ManualClock>) {
    let _ = b.call(|| Err::<(), _>("down"));
}

fn succeed(b: &CircuitBreaker<ManualClock>) -> Result<(), Error<&'static str>> {
    b.call(|| Ok::<_, &str>(()))
}

/// The `retry_after` of a rejection, or `None` if the call was admitted (and ran,
/// successfully).
fn rejected_for(b: &CircuitBreaker<ManualClock>) -> Option<Option<Duration>> {
    match succeed(b) {
        Err(Error::Rejected(r)) => Some(r.retry_after()),
        _ => None,
    }
}

/// Every logged transition's generation is one more than the last's (modulo the
/// generation's width) and its `from` is the last one's `to`.
fn assert_chained(log: &Log) {
    let log = log.lock().unwrap();
    for w in log.windows(2) {
        assert_eq!(w[1].generation, w[0].generation.wrapping_add(1) & GEN_MASK);
        assert_eq!(w[1].from, w[0].to, "{:?}", (w[0].reason, w[1].reason));
    }
}

/// Before: 16,385 failed probe rounds (32,770 transitions) left the streak word
/// tagged with a generation that read as *later* than every phase for the next
/// 32,767 transitions, and every failure then counted 0: after a 27-minute outage
/// the breaker never tripped again.
#[test]
fn the_consecutive_policy_trips_after_a_long_outage_of_failed_probes() {
    let (b, clock) = on_manual_clock(trips_after(5, 100 * MS).backoff_multiplier(1.0));
    for _ in 0..5 {
        fail(&b);
    }
    assert_eq!(b.state(), State::Open);
    for _ in 0..16_385 {
        clock.advance(100 * MS);
        fail(&b); // the probe fails: Open again
        assert_eq!(b.state(), State::Open);
    }
    clock.advance(100 * MS);
    assert!(succeed(&b).is_ok(), "the probe succeeds");
    assert_eq!(b.state(), State::Closed);
    for n in 1..5 {
        fail(&b);
        assert_eq!(b.metrics().consecutive_failures, n);
    }
    assert_eq!(b.state(), State::Closed);
    fail(&b);
    assert_eq!(b.state(), State::Open, "the fifth failure trips");
}

/// Before: 40,000 resets, then 1,000 failures: still Closed.
#[test]
fn the_consecutive_policy_trips_after_forty_thousand_resets() {
    let b = CircuitBreaker::builder()
        .consecutive_failures(5)
        .clock(ManualClock::new())
        .build()
        .unwrap();
    for _ in 0..40_000 {
        b.reset();
    }
    for _ in 0..4 {
        fail(&b);
    }
    assert_eq!(b.metrics().consecutive_failures, 4);
    fail(&b);
    assert_eq!(b.state(), State::Open);
}

/// Before: in a one-bucket window of an hour, 40,000 resets left the bucket tagged
/// with a generation that read as later, and 1,000 failures counted 0 calls.
/// (40,001 here: not a whole number of tiny-generation cycles, under which the
/// first phase's bucket would read as the last's by construction.)
#[test]
fn the_window_counts_after_forty_thousand_resets_in_one_bucket() {
    let (b, _) = on_manual_clock(rate_window(Duration::from_secs(3600), 1, 0.5, 1_001));
    fail(&b);
    for _ in 0..40_001 {
        b.reset();
    }
    for _ in 0..1_000 {
        fail(&b);
    }
    let m = b.metrics();
    assert_eq!((m.window.calls, m.window.failures), (1_000, 1_000));
    assert_eq!(m.state, State::Closed, "one call short of the minimum");
    fail(&b);
    assert_eq!(b.state(), State::Open);
}

/// Before: a permit held while 65,536 transitions happened (9 ms of `force_open`
/// and `reset`) was taken for a current one, and its failure tripped the breaker.
/// With a 32-bit generation it takes 2^32 transitions during one call.
#[cfg(not(cutout_tiny_generations))]
#[test]
fn a_permit_held_through_a_16_bit_generation_cycle_is_stale() {
    let b = CircuitBreaker::builder()
        .consecutive_failures(1)
        .clock(ManualClock::new())
        .build()
        .unwrap();
    let permit = b.try_acquire().unwrap();
    for _ in 0..32_768 {
        b.force_open();
        b.reset();
    }
    assert_eq!(b.metrics().generation, 65_536);
    permit.failure();
    let m = b.metrics();
    assert_eq!(m.state, State::Closed, "a stale failure trips nothing");
    assert_eq!((m.lifetime.stale, m.lifetime.failures), (1, 0));
}

/// Before: a probe held through a full 16-bit cycle counted toward the round then
/// running, and closed the breaker with that round's own probe still out.
#[cfg(not(cutout_tiny_generations))]
#[test]
fn a_probe_held_through_a_16_bit_generation_cycle_is_stale() {
    let (b, clock) = on_manual_clock(
        CircuitBreaker::builder()
            .consecutive_failures(1)
            .half_open_probes(2),
    );
    fail(&b);
    clock.advance(Duration::from_secs(1));
    let old = b.try_acquire().unwrap();
    assert!(old.is_probe());
    // 65,536 transitions later the breaker is half-open again, at the old
    // generation modulo 2^16: 65,534 of forcing open and resetting, a trip and
    // the next round.
    for _ in 0..32_767 {
        b.force_open();
        b.reset();
    }
    fail(&b); // Open
    clock.advance(Duration::from_secs(1));
    let new = b.try_acquire().unwrap();
    assert!(new.is_probe());
    assert_eq!(new.generation() % 65_536, old.generation() % 65_536);
    old.success();
    assert_eq!(
        b.state(),
        State::HalfOpen,
        "the old probe counts for nothing"
    );
    new.success();
    assert_eq!(b.state(), State::HalfOpen, "one probe of two is in");
    assert_eq!(b.metrics().lifetime.stale, 1);
}

/// A thread keeps the deadline of the Open phase that rejected it beside that
/// phase's state word. A whole generation cycle later an Open phase of the same
/// level and generation came back to the same state, level and generation: the
/// thread took the old deadline for the new phase's and was rejected until it (for
/// ever after an `open_for(Duration::MAX)`) while `metrics()` said the cooldown was
/// over. The word's cycles now tell the two phases apart. Only with tiny
/// generations (8 transitions a cycle; 2^32 in a normal build, with the cycles
/// tested in `state::tests`).
#[cfg(cutout_tiny_generations)]
#[test]
fn a_cached_open_deadline_is_not_taken_for_a_phase_a_generation_cycle_later() {
    let (b, clock) = on_manual_clock(trips_after(1, SEC));
    assert!(b.open_for(Duration::from_secs(3600))); // generation 1: Open, level 0
    for _ in 0..2 {
        assert!(
            succeed(&b).is_err(),
            "rejected; the second time from the cache"
        );
    }
    // Six manual transitions and a reset: generation 0, Closed.
    for _ in 0..3 {
        b.reset();
        b.force_open();
    }
    b.reset();
    fail(&b); // generation 1 again: Open at level 0, as the open_for phase was
    assert_eq!((b.state(), b.metrics().generation), (State::Open, 1));
    clock.advance(SEC);
    assert_eq!(b.metrics().retry_after, Some(Duration::ZERO));
    assert_eq!(succeed(&b), Ok(()), "the probe after the 1 s cooldown");
    assert_eq!(b.state(), State::Closed);
}

/// Before: `advance(Duration::MAX)` saturated the tick field: an Open breaker
/// rejected nothing (every deadline had passed) but a half-open round never timed
/// out, so a leaked probe wedged the breaker for good. Later, while a round's end
/// was not cut at the clock's end as a cooldown's deadline is, the leaked probe
/// still wedged it with the longest `half_open_timeout`, or on a breaker built less
/// than a timeout (30 s by default) before its clock's end.
#[test]
fn a_clock_advanced_by_duration_max_ends_every_cooldown_and_round() {
    let near_the_end = Duration::from_nanos(u64::MAX) - 20 * SEC;
    let cases = [
        ("from the clock's zero", Duration::ZERO, None),
        // The breaker's origin is not the clock's zero.
        ("an hour in", Duration::from_secs(3600), None),
        ("the longest timeout", Duration::ZERO, Some(LONGEST)),
        ("built 20 s before the end", near_the_end, None),
    ];
    for (case, warm_up, half_open_timeout) in cases {
        let clock = ManualClock::new();
        clock.advance(warm_up);
        let mut b = trips_after(1, 10 * SEC).clock(clock.clone());
        if let Some(timeout) = half_open_timeout {
            b = b.half_open_timeout(timeout);
        }
        let b = b.build().unwrap();
        fail(&b);
        clock.advance(10 * SEC);
        std::mem::forget(b.try_acquire().unwrap()); // a leaked probe
        assert!(b.try_acquire().is_err(), "{case}: the round is full");
        clock.advance(Duration::MAX);
        // The leaked probe's round times out; the cooldown it starts cannot outlast
        // a saturated clock, so a probe is admitted at once.
        let probe = b.try_acquire().expect(case);
        assert!(probe.is_probe(), "{case}");
        probe.success();
        assert_eq!(b.state(), State::Closed, "{case}");
        // An Open breaker's cooldown ends too.
        fail(&b);
        assert_eq!(b.state(), State::Open, "{case}");
        clock.advance(Duration::MAX);
        assert!(succeed(&b).is_ok(), "{case}");
        assert_eq!(b.state(), State::Closed, "{case}");
    }
}

/// On a clock advanced by `Duration::MAX` a failed probe reopens the breaker with a
/// cooldown cut at the clock's end, so the next call is a probe again (nothing
/// wedges), and the transition events' times saturate instead of wrapping: they
/// never go back, and no `open_until` is before its event.
#[test]
fn after_a_duration_max_advance_a_failed_probe_wedges_nothing_and_event_times_stay_ordered() {
    let (b, clock, log) = logged(trips_after(1, Duration::from_secs(3600)));
    fail(&b);
    clock.advance(Duration::MAX);
    b.try_acquire()
        .expect("the probe after the advance")
        .failure();
    assert_eq!(b.state(), State::Open);
    let probe = b
        .try_acquire()
        .expect("a cooldown cut at the clock's end is over");
    assert!(probe.is_probe());
    probe.success();
    assert_eq!(b.state(), State::Closed);
    let log = log.lock().unwrap();
    assert_eq!(log.len(), 5, "{log:?}");
    for t in log.iter() {
        if let Some(until) = t.open_until {
            assert!(until >= t.at, "{t:?}");
        }
    }
    for w in log.windows(2) {
        assert!(w[1].at >= w[0].at, "{log:?}");
    }
}

/// Before: past 2^39 ms (17.4 years) of breaker life the tick field saturated and
/// every cooldown ended at once. Now ticks are 48 bits and a clock reading never
/// passes them: a breaker that old works as a new one does.
#[test]
fn a_breaker_older_than_the_old_tick_field_works_normally() {
    let (b, clock) = on_manual_clock(trips_after(2, Duration::from_secs(5)));
    clock.advance(Duration::from_millis(1 << 40)); // 34.8 years
    fail(&b);
    fail(&b);
    let Err(Error::Rejected(r)) = succeed(&b) else {
        panic!("a tripped breaker rejects");
    };
    assert_eq!(r.retry_after(), Some(Duration::from_secs(5)));
    clock.advance(Duration::from_secs(4));
    assert!(succeed(&b).is_err(), "still cooling down");
    clock.advance(Duration::from_secs(1));
    assert!(succeed(&b).is_ok());
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.metrics().time_in_state, Duration::ZERO);
    clock.advance(Duration::from_secs(7));
    assert_eq!(b.metrics().time_in_state, Duration::from_secs(7));
    // A leaked probe's round still times out (before, a round that started past
    // the tick field's end never did, and wedged the breaker).
    fail(&b);
    fail(&b);
    clock.advance(Duration::from_secs(5));
    std::mem::forget(b.try_acquire().unwrap());
    clock.advance(Duration::from_secs(30));
    let Err(Error::Rejected(r)) = succeed(&b) else {
        panic!("the timed-out round reopens");
    };
    assert_eq!(
        (r.state(), r.retry_after()),
        (State::Open, Some(Duration::from_secs(10)))
    );
    clock.advance(Duration::from_secs(10));
    assert!(succeed(&b).is_ok());
    assert_eq!(b.state(), State::Closed);
}

/// After a long outage a success clears the streak a failed phase left behind, so
/// the next successes are counted as a fresh closed phase's (before, a leftover
/// non-empty streak also kept every success off the lean path).
#[test]
fn a_success_after_an_outage_starts_the_streak_afresh() {
    let (b, _) = on_manual_clock(CircuitBreaker::builder().consecutive_failures(3));
    fail(&b);
    fail(&b);
    for _ in 0..50_000 {
        b.reset();
    }
    assert_eq!(b.metrics().consecutive_failures, 0);
    assert!(succeed(&b).is_ok());
    fail(&b);
    fail(&b);
    assert_eq!(b.state(), State::Closed);
    fail(&b);
    assert_eq!(b.state(), State::Open);
}

/// Before: a ramp's end was not cut at the clock's end as a cooldown's deadline is,
/// so with the longest `ramp_up` a ramp in progress when the clock saturated never
/// ended, and the breaker shed 90% of its calls for good.
#[test]
fn a_saturated_clock_ends_a_ramp_of_the_longest_ramp_up() {
    let (b, clock) = on_manual_clock(trips_after(1, SEC).ramp_up(LONGEST));
    fail(&b);
    clock.advance(SEC);
    assert!(succeed(&b).is_ok());
    assert_eq!(b.state(), State::Recovering);
    clock.advance(Duration::MAX);
    let admitted = (0..100).filter(|_| succeed(&b).is_ok()).count();
    assert_eq!((b.state(), admitted), (State::Closed, 100));
}

/// Before: a ramp started on a saturated clock (of any `ramp_up`) never ended. Now
/// its end is cut at the clock's end, so the first call after the probe ends it.
#[test]
fn a_ramp_started_on_a_saturated_clock_ends_at_the_next_call() {
    let (b, clock) = on_manual_clock(trips_after(1, SEC).ramp_up(10 * SEC));
    clock.advance(Duration::MAX);
    fail(&b);
    assert!(succeed(&b).is_ok(), "the cooldown ends at the clock's end");
    assert_eq!(b.state(), State::Recovering);
    let admitted = (0..100).filter(|_| succeed(&b).is_ok()).count();
    assert_eq!((b.state(), admitted), (State::Closed, 100));
}

/// A breaker built 5 s before its clock's end trips, cools down and closes as any
/// other; a cooldown that reaches past the end is cut there, so a saturated clock
/// ends it.
#[test]
fn a_breaker_built_seconds_before_its_clocks_end_trips_and_recovers() {
    let clock = ManualClock::new();
    clock.advance(Duration::from_nanos(u64::MAX) - 5 * SEC);
    let b = trips_after(1, 2 * SEC)
        .clock(clock.clone())
        .build()
        .unwrap();
    assert!(succeed(&b).is_ok());
    fail(&b);
    assert_eq!(rejected_for(&b), Some(Some(2 * SEC)));
    clock.advance(2 * SEC);
    assert!(succeed(&b).is_ok());
    assert_eq!(b.state(), State::Closed);
    fail(&b); // a 2 s cooldown with 3 s of clock left
    clock.advance(SEC);
    assert!(rejected_for(&b).is_some());
    clock.advance(Duration::MAX);
    assert!(succeed(&b).is_ok());
    assert_eq!(b.state(), State::Closed);
}

/// On a clock that never moves a cooldown never ends, however often the breaker is
/// asked; manual control still works, and a thousand phases that all start at the
/// same instant each trip at their threshold.
#[test]
fn on_a_clock_that_stands_still_a_cooldown_never_ends_and_reset_still_works() {
    let b = CircuitBreaker::builder()
        .consecutive_failures(1)
        .clock(ManualClock::new())
        .build()
        .unwrap();
    fail(&b);
    for _ in 0..1000 {
        assert_eq!(rejected_for(&b), Some(Some(SEC)));
    }
    assert_eq!(b.state(), State::Open);
    b.reset();
    for _ in 0..1000 {
        fail(&b);
        assert_eq!(b.state(), State::Open);
        b.reset();
    }
    assert!(succeed(&b).is_ok());
}

/// Each failed round doubles the cooldown, exactly to the millisecond, up to the
/// cap; 200 rounds on (level 30 is the cap) it is still exactly the cap; a
/// successful round resets it to the base.
#[test]
fn backoff_doubles_to_the_cap_over_many_cycles_and_closing_resets_it() {
    let cap = Duration::from_millis(1 << 30);
    let (b, clock, log) = logged(trips_after(1, MS).max_open_duration(cap));
    fail(&b);
    let mut expected = MS;
    for round in 0..200u32 {
        assert_eq!(rejected_for(&b), Some(Some(expected)), "round {round}");
        clock.advance(expected - MS);
        assert!(rejected_for(&b).is_some(), "round {round}: 1 ms early");
        clock.advance(MS);
        fail(&b); // the probe fails
        expected = (expected * 2).min(cap);
    }
    assert_eq!(b.metrics().level, 30);
    clock.advance(cap);
    assert!(succeed(&b).is_ok());
    assert_eq!((b.state(), b.metrics().level), (State::Closed, 0));
    fail(&b);
    assert_eq!(rejected_for(&b), Some(Some(MS)));
    let last = *log.lock().unwrap().last().unwrap();
    assert_eq!((last.to, last.level), (State::Open, 0));
}

/// A multiplier of `f64::MAX`: the base, then straight to the cap (here the
/// longest duration, cut at the clock's end), and a saturated clock ends it.
#[test]
fn a_huge_multiplier_goes_straight_to_the_cap() {
    let (b, clock) = on_manual_clock(
        trips_after(1, MS)
            .backoff_multiplier(f64::MAX)
            .max_open_duration(LONGEST),
    );
    fail(&b);
    assert_eq!(rejected_for(&b), Some(Some(MS)));
    clock.advance(MS);
    fail(&b);
    // The cap, less the millisecond the clock has used: a deadline saturates at
    // the clock's end.
    assert_eq!(rejected_for(&b), Some(Some(LONGEST - MS)));
    clock.advance(LONGEST - 2 * MS);
    assert!(rejected_for(&b).is_some());
    clock.advance(Duration::MAX);
    fail(&b);
    assert_eq!(b.state(), State::Open);
    assert!(
        succeed(&b).is_ok(),
        "a saturated clock has ended every cooldown"
    );
}

/// Full jitter over 2,000 rounds and every backoff level: each cooldown is at least
/// a millisecond and at most its level's, and `retry_after` is exact: a probe 1 ms
/// earlier is rejected, one on time admitted.
#[test]
fn full_jitter_keeps_every_cooldown_within_its_level_and_retry_after_is_exact() {
    let (b, clock) = on_manual_clock(
        trips_after(1, Duration::from_millis(8))
            .max_open_duration(Duration::from_millis(64))
            .jitter(1.0),
    );
    fail(&b);
    for round in 0..2_000u32 {
        let level = b.metrics().level;
        let full = Duration::from_millis(8 << level.min(3));
        let r = rejected_for(&b).unwrap().unwrap();
        assert!(
            r >= MS && r <= full,
            "round {round}: {r:?} at level {level}"
        );
        clock.advance(r - MS);
        assert!(rejected_for(&b).is_some(), "round {round}: 1 ms early");
        clock.advance(MS);
        if round % 5 == 4 {
            // A successful probe closes and resets the level; trip again.
            assert!(succeed(&b).is_ok(), "round {round}: on time");
        }
        fail(&b);
        assert_eq!(b.state(), State::Open);
    }
}

/// A phase starts at the tick its transition's reading is in (`Builder::build`):
/// a trip 0.9 ms into a tick with a 5 ms cooldown is rejected for the whole 5 ms
/// (that is its `retry_after`), and admits its probe 4.1 ms after the trip, at the
/// tick's fifth boundary: never more than one tick early.
#[test]
fn a_cooldown_ends_at_most_one_tick_early_and_retry_after_reads_it_whole() {
    let (b, clock) = on_manual_clock(trips_after(1, 5 * MS));
    clock.advance(Duration::from_micros(900));
    fail(&b);
    assert_eq!(rejected_for(&b), Some(Some(5 * MS)));
    clock.advance(Duration::from_micros(4_099));
    assert_eq!(rejected_for(&b), Some(Some(MS)), "a microsecond short");
    clock.advance(Duration::from_nanos(1_000));
    assert_eq!(rejected_for(&b), None, "the probe, 4.1 ms after the trip");
}

/// A cooldown's last nanoseconds never read as "retry now": while Open, a
/// rejection's `retry_after` is at least a millisecond (rounded up from what is
/// left, so waiting it out reaches the probe), at every sub-millisecond step.
#[test]
fn a_sub_millisecond_remainder_of_a_cooldown_is_never_retry_now() {
    let (b, clock) = on_manual_clock(trips_after(1, 5 * MS));
    fail(&b);
    for step in [1, 499_999, 1, 999_999, 1_000_000, 2_499_999] {
        clock.advance(Duration::from_nanos(step));
        let left = (5 * MS).saturating_sub(clock.elapsed());
        match rejected_for(&b) {
            Some(Some(after)) => assert!(
                after >= MS && after >= left,
                "{left:?} left at {:?}: retry after {after:?}",
                clock.elapsed()
            ),
            other => panic!("at {:?}: {other:?}", clock.elapsed()),
        }
    }
}

/// Every kind of transition once, a half-open timeout, a failed and a completed
/// ramp, manual control and `open_for` among them: each transition's generation is
/// one more than the last's and its `from` is the last one's `to`, through the
/// wrap under tiny generations.
#[test]
fn every_kind_of_transition_chains() {
    let (b, clock, log) = logged(
        trips_after(1, SEC)
            .half_open_timeout(5 * SEC)
            .ramp_up(2 * SEC),
    );
    fail(&b); // Closed -> Open
    clock.advance(SEC);
    std::mem::forget(b.try_acquire().unwrap()); // -> HalfOpen, a leaked probe
    clock.advance(5 * SEC);
    assert!(rejected_for(&b).is_some()); // HalfOpen -> Open (timeout)
    clock.advance(2 * SEC);
    assert!(succeed(&b).is_ok()); // -> HalfOpen -> Recovering
    let _ = b.call_with(|_: &Result<(), ()>| Outcome::Failure, || Ok(())); // RampFailed
    b.force_open();
    b.disable();
    b.reset();
    assert!(b.open_for(SEC));
    clock.advance(SEC);
    assert!(succeed(&b).is_ok());
    clock.advance(2 * SEC);
    assert!(succeed(&b).is_ok());
    assert_eq!(b.state(), State::Closed);
    let reasons: Vec<_> = log.lock().unwrap().iter().map(|t| t.reason).collect();
    for reason in [
        Reason::HalfOpenTimeout,
        Reason::RampFailed,
        Reason::RampCompleted,
        Reason::External,
    ] {
        assert!(reasons.contains(&reason), "{reason:?} in {reasons:?}");
    }
    assert_chained(&log);
    let last = log.lock().unwrap().last().unwrap().generation;
    assert_eq!(b.metrics().generation, last);
}

/// Every kind of transition, in a cycle of 11 (not a multiple of a tiny
/// generation's 8), 200 times: each step does exactly what it should at every
/// position of the generation relative to its wrap, each Open phase rejects for
/// exactly its cooldown, and a round admits exactly its probes.
#[test]
fn every_kind_of_transition_at_every_position_of_the_wrap() {
    let (b, clock, log) = logged(
        trips_after(2, SEC)
            .max_open_duration(4 * SEC)
            .half_open_probes(2)
            .half_open_timeout(5 * SEC)
            .ramp_up(2 * SEC),
    );
    for cycle in 0..200u32 {
        let at = |what: &str| format!("cycle {cycle}: {what}, {:?}", b.metrics().generation);
        // Closed -> Open (ConsecutiveFailures), level 0.
        fail(&b);
        assert_eq!(b.state(), State::Closed, "{}", at("one failure"));
        fail(&b);
        assert_eq!(rejected_for(&b), Some(Some(SEC)), "{}", at("trip"));
        // -> HalfOpen, both probes leaked -> timeout -> Open level 1 (2 s).
        clock.advance(SEC);
        let p1 = b.try_acquire().unwrap();
        let p2 = b.try_acquire().unwrap();
        assert!(p1.is_probe() && p2.is_probe(), "{}", at("probes"));
        assert!(b.try_acquire().is_err(), "{}", at("exactly two"));
        std::mem::forget(p1);
        std::mem::forget(p2);
        clock.advance(5 * SEC);
        assert_eq!(rejected_for(&b), Some(Some(2 * SEC)), "{}", at("timeout"));
        // -> HalfOpen -> a failed probe -> Open level 2 (4 s).
        clock.advance(2 * SEC);
        let p = b.try_acquire().unwrap();
        let q = b.try_acquire().unwrap();
        p.failure();
        q.success(); // stale
        assert_eq!(
            rejected_for(&b),
            Some(Some(4 * SEC)),
            "{}",
            at("probe failed")
        );
        // -> HalfOpen -> two successes -> Recovering at level 2 -> RampFailed, capped.
        clock.advance(4 * SEC);
        assert!(succeed(&b).is_ok(), "{}", at("probe 1"));
        assert!(succeed(&b).is_ok(), "{}", at("probe 2"));
        assert_eq!(b.state(), State::Recovering, "{}", at("ramp"));
        // The ramp admits a share: fail every admitted call until two trip it.
        let mut admitted_failures = 0;
        for _ in 0..1000 {
            if b.state() != State::Recovering {
                break;
            }
            if b.call_with(|_: &Result<(), ()>| Outcome::Failure, || Ok(()))
                .is_ok()
            {
                admitted_failures += 1;
            }
        }
        assert_eq!(admitted_failures, 2, "{}", at("ramp failures"));
        assert_eq!(b.state(), State::Open, "{}", at("ramp failed"));
        assert_eq!(b.metrics().level, 2, "{}", at("ramp failed level: the cap"));
        assert_eq!(rejected_for(&b), Some(Some(4 * SEC)), "{}", at("capped"));
        // -> HalfOpen -> Recovering -> RampCompleted -> Closed at level 0.
        clock.advance(4 * SEC);
        assert!(
            succeed(&b).is_ok() && succeed(&b).is_ok(),
            "{}",
            at("probes")
        );
        clock.advance(2 * SEC);
        assert!(succeed(&b).is_ok(), "{}", at("ramp end"));
        assert_eq!(
            (b.state(), b.metrics().level),
            (State::Closed, 0),
            "{}",
            at("closed")
        );
        // Manual control, open_for, reset.
        b.force_open();
        b.disable();
        b.reset();
        let open_for = Duration::from_millis(1500);
        assert!(b.open_for(open_for), "{}", at("open_for"));
        assert_eq!(
            rejected_for(&b),
            Some(Some(open_for)),
            "{}",
            at("open_for deadline")
        );
        b.reset();
    }
    assert_chained(&log);
}

/// Four threads each advance one `ManualClock` 10,000 times: every advance counts
/// (none is lost to a race), and no thread sees the time go back.
#[test]
fn manual_clock_advances_from_many_threads_all_add_up() {
    let clock = ManualClock::new();
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let clock = clock.clone();
            std::thread::spawn(move || {
                let mut last = 0;
                for _ in 0..10_000 {
                    clock.advance(Duration::from_nanos(3));
                    let now = clock.now();
                    assert!(now >= last, "{now} < {last}");
                    last = now;
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(clock.now(), 4 * 10_000 * 3);
}

/// The default clock's readings, handed back and forth between two threads 2,000
/// times, never go back: neither the cheap reading nor the precise one is behind a
/// reading the other thread took before.
#[test]
fn default_clock_readings_handed_between_threads_never_go_back() {
    use std::sync::mpsc;
    let clock = DefaultClock::new();
    let (tx, rx) = mpsc::sync_channel::<u64>(0);
    let (back_tx, back_rx) = mpsc::sync_channel::<u64>(0);
    let other = std::thread::spawn(move || {
        let clock = DefaultClock::new();
        for seen in rx {
            let now = clock.now();
            assert!(now >= seen, "{now} < {seen}");
            let precise = clock.precise();
            assert!(precise >= seen, "precise {precise} < {seen}");
            if back_tx.send(now).is_err() {
                break;
            }
        }
    });
    for _ in 0..2_000 {
        tx.send(clock.now()).unwrap();
        let theirs = back_rx.recv().unwrap();
        let (now, precise) = (clock.now(), clock.precise());
        assert!(now >= theirs, "{now} < {theirs}");
        assert!(precise >= theirs, "precise {precise} < {theirs}");
    }
    drop(tx);
    other.join().unwrap();
}
