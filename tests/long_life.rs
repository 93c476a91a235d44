//! A long life (DESIGN.md contract lines 17-19): every policy still trips after any
//! number of transitions, no outcome admitted under an earlier phase counts, and
//! time keeps working at the ends of its range. Each test is a regression test for a
//! finding of issue 15; the comment says what the code before did.
//!
//! Under `--cfg cutout_tiny_generations` (a 3-bit generation) the tests that rely
//! on a distance not being a whole generation cycle are left out: there a permit
//! held through a multiple of 8 transitions is taken for a current one by
//! construction.

use cutout::{CircuitBreaker, Error, ManualClock, State};
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);

fn fail(b: &CircuitBreaker<ManualClock>) {
    let _ = b.call(|| Err::<(), _>("down"));
}

fn succeed(b: &CircuitBreaker<ManualClock>) -> Result<(), Error<&'static str>> {
    b.call(|| Ok::<_, &str>(()))
}

/// Before: 16,385 failed probe rounds (32,770 transitions) left the streak word
/// tagged with a generation that read as *later* than every phase for the next
/// 32,767 transitions, and every failure then counted 0: after a 27-minute outage
/// the breaker never tripped again.
#[test]
fn the_consecutive_policy_trips_after_a_long_outage_of_failed_probes() {
    let clock = ManualClock::new();
    let b = CircuitBreaker::builder()
        .consecutive_failures(5)
        .open_duration(100 * MS)
        .backoff_multiplier(1.0)
        .clock(clock.clone())
        .build()
        .unwrap();
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
    let clock = ManualClock::new();
    let b = CircuitBreaker::builder()
        .window(Duration::from_secs(3600), 1)
        .failure_rate(0.5, 1_001)
        .clock(clock.clone())
        .build()
        .unwrap();
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
    let clock = ManualClock::new();
    let b = CircuitBreaker::builder()
        .consecutive_failures(1)
        .half_open_probes(2)
        .clock(clock.clone())
        .build()
        .unwrap();
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

/// Before: `advance(Duration::MAX)` saturated the tick field: an Open breaker
/// rejected nothing (every deadline had passed) but a half-open round never timed
/// out, so a leaked probe wedged the breaker for good.
#[test]
fn a_clock_advanced_by_duration_max_ends_every_cooldown_and_round() {
    for warm_up in [Duration::ZERO, Duration::from_secs(3600)] {
        let clock = ManualClock::new();
        clock.advance(warm_up); // the breaker's origin is not the clock's zero
        let b = CircuitBreaker::builder()
            .consecutive_failures(1)
            .open_duration(Duration::from_secs(10))
            .clock(clock.clone())
            .build()
            .unwrap();
        fail(&b);
        clock.advance(Duration::from_secs(10));
        std::mem::forget(b.try_acquire().unwrap()); // a leaked probe
        assert!(b.try_acquire().is_err(), "the round is full");
        clock.advance(Duration::MAX);
        // The leaked probe's round times out; the cooldown it starts cannot outlast
        // a saturated clock, so a probe is admitted at once.
        let probe = b.try_acquire().expect("not wedged");
        assert!(probe.is_probe());
        probe.success();
        assert_eq!(b.state(), State::Closed);
        // An Open breaker's cooldown ends too.
        fail(&b);
        assert_eq!(b.state(), State::Open);
        clock.advance(Duration::MAX);
        assert!(succeed(&b).is_ok());
        assert_eq!(b.state(), State::Closed);
    }
}

/// Before: past 2^39 ms (17.4 years) of breaker life the tick field saturated and
/// every cooldown ended at once. Now ticks are 48 bits and a clock reading never
/// passes them: a breaker that old works as a new one does.
#[test]
fn a_breaker_older_than_the_old_tick_field_works_normally() {
    let clock = ManualClock::new();
    let b = CircuitBreaker::builder()
        .consecutive_failures(2)
        .open_duration(Duration::from_secs(5))
        .clock(clock.clone())
        .build()
        .unwrap();
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
    let clock = ManualClock::new();
    let b = CircuitBreaker::builder()
        .consecutive_failures(3)
        .clock(clock.clone())
        .build()
        .unwrap();
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
