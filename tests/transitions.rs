//! Every transition of the state machine, one test each, on ManualClock; and
//! permits held across transitions and manual control (`force_open`, `disable`,
//! `reset`), whose outcomes are stale and decide nothing.

mod common;

use common::{Log, logged, rate_window, trips_after};
use cutout::{CircuitBreaker, ManualClock, Reason, SavedState, SavedWindow, State, WindowCounts};
use std::time::{Duration, UNIX_EPOCH};

const SEC: Duration = Duration::from_secs(1);
const MS: Duration = Duration::from_millis(1);

fn reasons(log: &Log) -> Vec<(State, State, Reason)> {
    log.lock()
        .unwrap()
        .iter()
        .map(|t| (t.from, t.to, t.reason))
        .collect()
}

fn ok<C: cutout::Clock>(b: &CircuitBreaker<C>) -> bool {
    b.call(|| Ok::<_, ()>(())).is_ok()
}

fn fail<C: cutout::Clock>(b: &CircuitBreaker<C>) {
    let _ = b.call(|| Err::<(), _>(()));
}

#[test]
fn closed_to_open_on_consecutive_failures_and_a_success_resets_the_count() {
    let (b, _, log) = logged(CircuitBreaker::builder().consecutive_failures(3));
    fail(&b);
    fail(&b);
    assert!(ok(&b));
    fail(&b);
    fail(&b);
    assert_eq!(b.state(), State::Closed, "the success broke the streak");
    fail(&b);
    assert_eq!(
        reasons(&log),
        [(State::Closed, State::Open, Reason::ConsecutiveFailures)]
    );
    assert_eq!(log.lock().unwrap()[0].consecutive_failures, 3);
}

#[test]
fn closed_to_open_on_failure_rate_at_exactly_the_threshold() {
    let (b, _, log) = logged(rate_window(10 * SEC, 10, 0.25, 8));
    for _ in 0..6 {
        assert!(ok(&b));
    }
    fail(&b);
    assert_eq!(b.state(), State::Closed, "7 calls: below minimum_calls");
    fail(&b);
    assert_eq!(b.state(), State::Open, "2 of 8 = 25%");
    let t = log.lock().unwrap()[0];
    assert_eq!(
        (t.reason, t.window.calls, t.window.failures),
        (Reason::FailureRate, 8, 2)
    );
}

#[test]
fn a_success_trips_only_by_bringing_the_window_to_minimum_calls() {
    // 1 failure of 5 calls is 20%: the success that makes the fifth call trips.
    let (b, _, log) = logged(CircuitBreaker::builder().failure_rate(0.1, 5));
    fail(&b);
    for _ in 0..3 {
        assert!(ok(&b));
    }
    assert_eq!(b.state(), State::Closed, "4 calls: below minimum_calls");
    assert!(ok(&b));
    assert_eq!(b.state(), State::Open);
    let t = log.lock().unwrap()[0];
    assert_eq!(
        (t.reason, t.window.calls, t.window.failures),
        (Reason::FailureRate, 5, 1)
    );
}

#[test]
fn any_other_success_never_trips_even_above_the_rate() {
    // A window restored at 50% over 10 calls, against 10%: a success only lowers
    // the rate, and checks nothing; the next failure trips.
    let t0 = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let mut saved = SavedState::new("orders", State::Closed, t0);
    saved.window = Some(SavedWindow::new(10 * SEC, 10, WindowCounts::new(10, 5, 0)));
    let b = CircuitBreaker::builder()
        .failure_rate(0.1, 5)
        .clock(ManualClock::new())
        .restore_at(saved, t0)
        .build()
        .unwrap();
    assert!(ok(&b));
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.metrics().window, WindowCounts::new(11, 5, 0));
    fail(&b);
    assert_eq!(b.state(), State::Open);
}

#[test]
fn closed_to_open_on_slow_call_rate() {
    let (b, clock, log) = logged(
        CircuitBreaker::builder()
            .window(10 * SEC, 10)
            .slow_calls(100 * MS, 0.5)
            .minimum_calls(4),
    );
    let slow = |b: &CircuitBreaker<ManualClock>| {
        b.call(|| {
            clock.advance(101 * MS);
            Ok::<_, ()>(())
        })
        .unwrap()
    };
    let exactly_threshold = |b: &CircuitBreaker<ManualClock>| {
        b.call(|| {
            clock.advance(100 * MS); // not strictly slower: not slow
            Ok::<_, ()>(())
        })
        .unwrap()
    };
    exactly_threshold(&b);
    exactly_threshold(&b);
    slow(&b);
    assert_eq!(b.state(), State::Closed, "3 calls, below minimum");
    slow(&b);
    assert_eq!(
        reasons(&log),
        [(State::Closed, State::Open, Reason::SlowCallRate)]
    );
    assert_eq!(b.metrics().lifetime.slow, 2);
}

#[test]
fn open_to_half_open_lazily_on_the_first_call_after_the_cooldown() {
    let (b, clock, log) = logged(CircuitBreaker::builder().consecutive_failures(1));
    fail(&b);
    clock.advance(SEC);
    assert_eq!(b.state(), State::Open, "state() never moves the breaker");
    let p = b.try_acquire().unwrap();
    assert_eq!(b.state(), State::HalfOpen);
    assert_eq!(
        reasons(&log)[1],
        (State::Open, State::HalfOpen, Reason::CooldownElapsed)
    );
    drop(p);
}

#[test]
fn half_open_to_closed_after_n_successes() {
    let (b, clock, log) = logged(
        CircuitBreaker::builder()
            .consecutive_failures(1)
            .half_open_probes(2),
    );
    fail(&b);
    clock.advance(SEC);
    assert!(ok(&b));
    assert_eq!(b.state(), State::HalfOpen);
    assert!(ok(&b));
    assert_eq!(
        reasons(&log)[2],
        (State::HalfOpen, State::Closed, Reason::ProbesSucceeded)
    );
    assert_eq!(b.metrics().level, 0);
}

#[test]
fn half_open_to_open_on_a_failed_probe_with_exponential_capped_backoff() {
    let (b, clock, log) = logged(
        CircuitBreaker::builder()
            .consecutive_failures(1)
            .backoff_multiplier(3.0)
            .max_open_duration(20 * SEC),
    );
    fail(&b);
    let mut expected = vec![SEC, 3 * SEC, 9 * SEC, 20 * SEC, 20 * SEC];
    let mut cooldown = expected.remove(0);
    for next in expected {
        clock.advance(cooldown);
        b.try_acquire().unwrap().failure();
        assert_eq!(b.try_acquire().unwrap_err().retry_after(), Some(next));
        cooldown = next;
    }
    assert!(reasons(&log).contains(&(State::HalfOpen, State::Open, Reason::ProbeFailed)));
    // A successful round resets the level.
    clock.advance(cooldown);
    assert!(ok(&b));
    fail(&b);
    assert_eq!(b.try_acquire().unwrap_err().retry_after(), Some(SEC));
}

#[test]
fn a_slow_probe_is_a_failed_probe() {
    let (b, clock, log) = logged(
        CircuitBreaker::builder()
            .consecutive_failures(1)
            .slow_calls(50 * MS, 1.0)
            .minimum_calls(100),
    );
    fail(&b);
    clock.advance(SEC);
    b.call(|| {
        clock.advance(51 * MS);
        Ok::<_, ()>(())
    })
    .unwrap();
    assert_eq!(b.state(), State::Open);
    assert_eq!(
        reasons(&log).last(),
        Some(&(State::HalfOpen, State::Open, Reason::ProbeFailed))
    );
}

#[test]
fn half_open_to_open_on_timeout_has_its_own_reason() {
    let (b, clock, log) = logged(
        CircuitBreaker::builder()
            .consecutive_failures(1)
            .half_open_timeout(5 * SEC),
    );
    fail(&b);
    clock.advance(SEC);
    let held = b.try_acquire().unwrap();
    clock.advance(5 * SEC - MS);
    assert_eq!(b.try_acquire().unwrap_err().retry_after(), Some(MS));
    clock.advance(MS);
    assert_eq!(b.try_acquire().unwrap_err().state(), State::Open);
    assert_eq!(
        reasons(&log).last(),
        Some(&(State::HalfOpen, State::Open, Reason::HalfOpenTimeout))
    );
    held.success(); // stale now
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.metrics().lifetime.stale, 1);
}

#[test]
fn force_open_rejects_everything_without_a_retry_time_until_reset() {
    let (b, clock, log) = logged(CircuitBreaker::builder().consecutive_failures(1));
    b.force_open();
    b.force_open(); // no second transition
    clock.advance(3600 * SEC);
    let r = b.try_acquire().unwrap_err();
    assert_eq!((r.state(), r.retry_after()), (State::ForcedOpen, None));
    b.reset();
    assert!(ok(&b));
    assert_eq!(
        reasons(&log),
        [
            (State::Closed, State::ForcedOpen, Reason::ForcedOpen),
            (State::ForcedOpen, State::Closed, Reason::Reset)
        ]
    );
}

#[test]
fn disabled_admits_everything_and_never_trips() {
    let (b, _, log) = logged(CircuitBreaker::builder().consecutive_failures(1));
    b.disable();
    for _ in 0..100 {
        fail(&b);
    }
    assert_eq!(b.state(), State::Disabled);
    assert_eq!(
        b.metrics().lifetime.failures,
        100,
        "outcomes are still counted"
    );
    b.reset();
    fail(&b);
    assert_eq!(b.state(), State::Open);
    assert_eq!(reasons(&log).len(), 3);
}

#[test]
fn every_transition_moves_the_generation_by_one() {
    let (b, clock, log) = logged(CircuitBreaker::builder().consecutive_failures(1));
    fail(&b);
    clock.advance(SEC);
    assert!(ok(&b));
    b.force_open();
    b.disable();
    b.reset();
    let gens: Vec<u32> = log.lock().unwrap().iter().map(|t| t.generation).collect();
    assert_eq!(gens, [1, 2, 3, 4, 5, 6]);
    assert_eq!(b.metrics().generation, 6);
}

#[test]
fn reset_from_closed_starts_a_fresh_window_and_streak() {
    let (b, _, _) = logged(
        CircuitBreaker::builder()
            .consecutive_failures(3)
            .failure_rate(0.9, 10),
    );
    fail(&b);
    fail(&b);
    b.reset();
    let m = b.metrics();
    assert_eq!((m.consecutive_failures, m.window.calls), (0, 0));
    fail(&b);
    fail(&b);
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn closing_starts_a_fresh_window() {
    let (b, clock, _) = logged(rate_window(60 * SEC, 6, 0.5, 4));
    for _ in 0..4 {
        fail(&b);
    }
    assert_eq!(b.state(), State::Open);
    clock.advance(SEC);
    assert!(ok(&b));
    assert_eq!(b.state(), State::Closed);
    assert_eq!(
        b.metrics().window.calls,
        0,
        "the failures before the trip are gone"
    );
    fail(&b);
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn jitter_shortens_the_cooldown_within_its_fraction() {
    let mut seen = std::collections::HashSet::new();
    for _ in 0..40 {
        let (b, _, _) = logged(
            CircuitBreaker::builder()
                .consecutive_failures(1)
                .jitter(0.5)
                .open_duration(10 * SEC),
        );
        fail(&b);
        let after = b.try_acquire().unwrap_err().retry_after().unwrap();
        assert!((5 * SEC..=10 * SEC).contains(&after), "{after:?}");
        seen.insert(after);
    }
    assert!(
        seen.len() > 5,
        "breakers that opened together should not probe together: {seen:?}"
    );
}

/// A full half-open round says when to come back: when the round can end, but no
/// later than the cooldown a failed round would start (2 s here: the next backoff
/// level), never the whole half-open timeout (a client told 30 s overshoots a round
/// its probes end in milliseconds).
#[test]
fn half_open_rejection_waits_at_most_the_next_cooldown() {
    let (b, clock, _) = logged(
        CircuitBreaker::builder()
            .consecutive_failures(1)
            .half_open_timeout(4 * SEC),
    );
    fail(&b);
    clock.advance(SEC);
    let _probe = b.try_acquire().unwrap();
    clock.advance(SEC);
    let r = b.try_acquire().unwrap_err();
    assert_eq!(
        (r.state(), r.retry_after()),
        (State::HalfOpen, Some(2 * SEC)),
        "3 s of the round are left; a failed round would wait 2 s"
    );
    clock.advance(2500 * MS);
    let r = b.try_acquire().unwrap_err();
    assert_eq!(
        r.retry_after(),
        Some(500 * MS),
        "the round times out in 0.5 s"
    );
}

/// With jitter, a full round's `retry_after` is the jittered cooldown a failed
/// round then starts, exactly: a client told it comes back as the reopened
/// breaker lets the next probe in (the jitter of the next generation, not the
/// current one's).
#[test]
fn a_full_rounds_retry_after_is_the_jittered_cooldown_a_failed_round_starts() {
    for i in 0..50u64 {
        let clock = ManualClock::new();
        let b = trips_after(1, SEC)
            .jitter(1.0)
            .half_open_timeout(30 * SEC)
            .clock(clock.clone())
            .build()
            .unwrap();
        clock.advance(Duration::from_millis(i)); // each case its own draw
        fail(&b);
        clock.advance(b.try_acquire().unwrap_err().retry_after().unwrap());
        let probe = b.try_acquire().unwrap();
        let promised = b.try_acquire().unwrap_err().retry_after().unwrap();
        probe.failure();
        let reopened = b.try_acquire().unwrap_err().retry_after();
        assert_eq!(reopened, Some(promised), "case {i}");
    }
}

#[test]
fn metrics_say_a_probe_can_go_now_while_a_slot_is_free() {
    let (b, clock, _) = logged(
        CircuitBreaker::builder()
            .consecutive_failures(1)
            .half_open_probes(2),
    );
    fail(&b);
    clock.advance(SEC);
    let first = b.try_acquire().unwrap();
    assert_eq!(
        b.metrics().retry_after,
        Some(Duration::ZERO),
        "one of two slots is free"
    );
    let _second = b.try_acquire().unwrap();
    assert_eq!(
        b.metrics().retry_after,
        Some(2 * SEC),
        "full: at most the next level's cooldown, not the 30 s timeout"
    );
    drop(first);
    assert_eq!(b.metrics().retry_after, Some(Duration::ZERO));
}

/// Permits admitted while Closed, held through `force_open`, `disable`, `reset`, a
/// trip, its cooldown and into a two-probe round: a late failure, a late ignore and
/// a late success are all stale, decide nothing and take no probe slot.
#[test]
fn a_permit_held_through_manual_control_and_a_trip_is_stale() {
    let (b, clock, _) = logged(
        CircuitBreaker::builder()
            .consecutive_failures(2)
            .half_open_probes(2),
    );
    let late_success = b.try_acquire().unwrap();
    let late_failure = b.try_acquire().unwrap();
    let late_ignore = b.try_acquire().unwrap();
    b.force_open();
    b.disable();
    b.reset();
    fail(&b);
    fail(&b);
    clock.advance(SEC);
    let probe = b.try_acquire().unwrap();
    assert!(probe.is_probe());
    late_failure.failure();
    late_ignore.ignore();
    assert_eq!(b.state(), State::HalfOpen, "a late failure does not reopen");
    late_success.success();
    assert_eq!(b.state(), State::HalfOpen, "a late success does not close");
    probe.success();
    assert_eq!(b.state(), State::HalfOpen, "one probe of two");
    let second = b.try_acquire().unwrap();
    assert!(b.try_acquire().is_err(), "exactly two probes");
    second.success();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.metrics().lifetime.stale, 3);
}

/// A probe still out when the breaker is forced open, reset and tripped again
/// belongs to the old round: its failure does not reopen the new round, and the new
/// round's own probe, dropped, gives its slot back.
#[test]
fn a_probe_held_through_force_open_and_reset_decides_nothing() {
    let (b, clock, _) = logged(CircuitBreaker::builder().consecutive_failures(1));
    fail(&b);
    clock.advance(SEC);
    let old = b.try_acquire().unwrap();
    assert!(old.is_probe());
    b.force_open();
    assert!(b.try_acquire().is_err());
    b.reset();
    fail(&b);
    clock.advance(SEC);
    let new = b.try_acquire().unwrap();
    assert!(new.is_probe());
    assert!(b.try_acquire().is_err(), "one probe");
    old.failure();
    assert_eq!(
        b.state(),
        State::HalfOpen,
        "the old probe's failure is stale"
    );
    drop(new);
    let again = b.try_acquire().unwrap();
    assert!(again.is_probe());
    again.success();
    assert_eq!(b.state(), State::Closed);
}

/// `disable` in the middle of a round at level 3, with its three probes out, then
/// `reset`: failures while disabled trip nothing, the old probes' successes are
/// stale, and the next trip starts afresh at level 0 with a round of exactly three
/// probes.
#[test]
fn disable_then_reset_mid_round_starts_afresh_at_level_zero() {
    let (b, clock, _) = logged(
        CircuitBreaker::builder()
            .consecutive_failures(1)
            .half_open_probes(3),
    );
    fail(&b);
    for _ in 0..3 {
        clock.advance(60 * SEC);
        b.try_acquire().unwrap().failure();
    }
    assert_eq!(b.metrics().level, 3);
    clock.advance(60 * SEC);
    let probes: Vec<_> = (0..3).map(|_| b.try_acquire().unwrap()).collect();
    assert!(b.try_acquire().is_err());
    b.disable();
    for _ in 0..10 {
        fail(&b);
    }
    assert_eq!(b.state(), State::Disabled);
    b.reset();
    assert_eq!(b.metrics().level, 0);
    for p in probes {
        p.success();
    }
    assert_eq!(b.state(), State::Closed);
    fail(&b);
    assert_eq!(b.try_acquire().unwrap_err().retry_after(), Some(SEC));
    clock.advance(SEC);
    let probes: Vec<_> = (0..3).map(|_| b.try_acquire().unwrap()).collect();
    assert!(b.try_acquire().is_err(), "exactly three");
    for p in probes {
        p.success();
    }
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.metrics().lifetime.stale, 3);
}

/// A permit admitted while Disabled and recorded after a `reset` is stale: its
/// failure does not trip the closed breaker.
#[test]
fn a_disabled_phases_permit_is_stale_after_reset() {
    let (b, _, _) = logged(CircuitBreaker::builder().consecutive_failures(1));
    b.disable();
    let p = b.try_acquire().unwrap();
    b.reset();
    p.failure();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.metrics().lifetime.stale, 1);
}

/// The metrics' `retry_after` is what a call's rejection would say now, in a
/// half-open round past its timeout too, with a probe hung or with the slot free
/// (the only probe ignored): the next call reopens the breaker one level up and is
/// rejected for that cooldown (2 s), not let through (the metrics once said 0).
#[test]
fn metrics_retry_after_of_a_timed_out_round_is_the_reopenings_cooldown() {
    for hung in [true, false] {
        let (b, clock, _log) = logged(trips_after(1, SEC).half_open_timeout(10 * SEC));
        let _ = b.call(|| Err::<(), _>("down"));
        clock.advance(SEC);
        let probe = b.try_acquire().unwrap();
        let held = match hung {
            true => Some(probe),
            false => {
                probe.ignore();
                None
            }
        };
        clock.advance(10 * SEC);
        let said = b.metrics().retry_after;
        let rejected = b.try_acquire().map(|_| ()).unwrap_err();
        assert_eq!(said, Some(2 * SEC), "hung {hung}");
        assert_eq!(rejected.retry_after(), said, "hung {hung}");
        assert_eq!((b.state(), b.metrics().level), (State::Open, 1));
        drop(held);
    }
}
