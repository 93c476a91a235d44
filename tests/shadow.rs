//! Shadow mode: a breaker that runs its whole state machine and reports it, but
//! never rejects. A call it would have rejected runs, counts in `would_reject`, and
//! its outcome counts for nothing.

use cutout::{CircuitBreaker, ManualClock, Reason, State};
use std::sync::{Arc, Mutex};
use std::time::Duration;

type Seen = Arc<Mutex<Vec<(State, State, Reason, bool)>>>;

/// A shadow breaker that trips on two consecutive failures and cools down for
/// five seconds, with the transitions it delivers.
fn shadow(probes: u32) -> (CircuitBreaker<ManualClock>, ManualClock, Seen) {
    let clock = ManualClock::new();
    let seen: Seen = Arc::default();
    let log = seen.clone();
    let breaker = CircuitBreaker::builder()
        .consecutive_failures(2)
        .open_duration(Duration::from_secs(5))
        .half_open_probes(probes)
        .shadow()
        .clock(clock.clone())
        .on_transition(move |t| log.lock().unwrap().push((t.from, t.to, t.reason, t.shadow)))
        .build()
        .unwrap();
    (breaker, clock, seen)
}

fn fail(b: &CircuitBreaker<ManualClock>) {
    assert!(b.call(|| Err::<(), _>("down")).is_err());
}

#[test]
fn a_shadow_breaker_trips_yet_admits_every_call() {
    let (breaker, _clock, seen) = shadow(1);
    fail(&breaker);
    fail(&breaker);
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(
        *seen.lock().unwrap(),
        [(
            State::Closed,
            State::Open,
            Reason::ConsecutiveFailures,
            true
        )]
    );
    // The same thread, again and again: no call meets a rejection, cached or not.
    let mut ran = 0;
    for _ in 0..5 {
        let call = breaker.call(|| {
            ran += 1;
            Ok::<_, ()>(())
        });
        assert_eq!(call, Ok(()));
    }
    let mut permit_ran = false;
    if let Ok(permit) = breaker.try_acquire() {
        permit_ran = true;
        permit.failure();
    }
    assert_eq!((ran, permit_ran), (5, true));
    let lifetime = breaker.metrics().lifetime;
    assert_eq!(lifetime.would_reject, 6);
    assert_eq!(lifetime.rejected, 0);
    assert_eq!(
        lifetime.admitted, 2,
        "would-be rejections are not admissions"
    );
    assert_eq!(breaker.state(), State::Open);
}

/// A thread whose first call meets the shadow breaker open (it has no stripe
/// of it yet) runs its calls too.
#[test]
fn a_fresh_thread_meeting_it_open_runs_its_calls() {
    let (breaker, _clock, _seen) = shadow(1);
    fail(&breaker);
    fail(&breaker);
    assert_eq!(breaker.state(), State::Open);
    let ran = std::thread::scope(|s| {
        s.spawn(|| {
            (0..3)
                .filter(|_| breaker.call(|| Ok::<_, ()>(())).is_ok())
                .count()
        })
        .join()
        .unwrap()
    });
    assert_eq!(ran, 3);
    let lifetime = breaker.metrics().lifetime;
    assert_eq!((lifetime.would_reject, lifetime.rejected), (3, 0));
    assert_eq!(breaker.state(), State::Open, "still in its cooldown");
}

#[test]
fn would_be_rejected_outcomes_count_nowhere() {
    let (breaker, clock, seen) = shadow(1);
    fail(&breaker);
    fail(&breaker);
    let before = breaker.metrics().lifetime;
    for _ in 0..3 {
        fail(&breaker);
        assert!(breaker.call(|| Ok::<_, ()>(())).is_ok());
    }
    // A permit dropped unrecorded is no dropped call either.
    drop(breaker.try_acquire().unwrap());
    let after = breaker.metrics().lifetime;
    assert_eq!(after.would_reject, before.would_reject + 7);
    assert_eq!(
        (after.successes, after.failures, after.stale, after.dropped),
        (
            before.successes,
            before.failures,
            before.stale,
            before.dropped
        )
    );

    // Half-open with its one probe slot taken: a failing call beside the probe is
    // a would-be rejection and does not reopen the breaker; the probe decides.
    clock.advance(Duration::from_secs(5));
    let probe = breaker.try_acquire().unwrap();
    assert_eq!(breaker.state(), State::HalfOpen);
    fail(&breaker);
    assert_eq!(
        breaker.state(),
        State::HalfOpen,
        "a would-be rejection's failure"
    );
    assert_eq!(
        breaker.metrics().lifetime.would_reject,
        after.would_reject + 1
    );
    probe.success();
    assert_eq!(breaker.state(), State::Closed);
    let reasons: Vec<_> = seen.lock().unwrap().iter().map(|t| (t.2, t.3)).collect();
    assert_eq!(
        reasons,
        [
            (Reason::ConsecutiveFailures, true),
            (Reason::CooldownElapsed, true),
            (Reason::ProbesSucceeded, true),
        ]
    );
}

#[test]
fn after_the_cooldown_a_half_open_round_runs_on_live_outcomes() {
    let (breaker, clock, seen) = shadow(2);
    fail(&breaker);
    fail(&breaker);
    clock.advance(Duration::from_secs(5));
    // The first probe fails: the round reopens the breaker, as a live one would.
    fail(&breaker);
    assert_eq!(breaker.state(), State::Open);
    assert!(
        breaker.call(|| Ok::<_, ()>(())).is_ok(),
        "still never rejects"
    );
    // The next round: two probes succeed, and it closes.
    clock.advance(Duration::from_secs(10)); // the next backoff level's cooldown
    assert!(breaker.call(|| Ok::<_, ()>(())).is_ok());
    assert_eq!(breaker.state(), State::HalfOpen);
    assert!(breaker.call(|| Ok::<_, ()>(())).is_ok());
    assert_eq!(breaker.state(), State::Closed);
    let lifetime = breaker.metrics().lifetime;
    assert_eq!((lifetime.would_reject, lifetime.rejected), (1, 0));
    let seen = seen.lock().unwrap();
    let to: Vec<_> = seen.iter().map(|t| t.1).collect();
    assert_eq!(
        to,
        [
            State::Open,
            State::HalfOpen,
            State::Open,
            State::HalfOpen,
            State::Closed
        ]
    );
    assert!(
        seen.iter().all(|t| t.3),
        "every transition is marked shadow"
    );
}

#[test]
fn a_forced_open_shadow_breaker_runs_every_call() {
    let (breaker, _clock, _seen) = shadow(1);
    breaker.force_open();
    assert_eq!(breaker.call(|| Ok::<_, ()>(7)), Ok(7));
    let lifetime = breaker.metrics().lifetime;
    assert_eq!((lifetime.would_reject, lifetime.rejected), (1, 0));
}

#[test]
fn a_live_breaker_rejects_and_marks_nothing_shadow() {
    let seen: Seen = Arc::default();
    let log = seen.clone();
    let breaker = CircuitBreaker::builder()
        .consecutive_failures(1)
        .clock(ManualClock::new())
        .on_transition(move |t| log.lock().unwrap().push((t.from, t.to, t.reason, t.shadow)))
        .build()
        .unwrap();
    let _ = breaker.call(|| Err::<(), _>("down"));
    for _ in 0..3 {
        assert!(breaker.call(|| Ok::<_, ()>(())).is_err());
    }
    let lifetime = breaker.metrics().lifetime;
    assert_eq!((lifetime.would_reject, lifetime.rejected), (0, 3));
    assert!(!seen.lock().unwrap()[0].3);
}

#[test]
fn a_ramps_would_be_rejections_do_not_move_the_window() {
    let clock = ManualClock::new();
    let breaker = CircuitBreaker::builder()
        .failure_rate(0.9, 1000)
        .minimum_calls(1000)
        .consecutive_failures(1)
        .open_duration(Duration::from_secs(1))
        .ramp_up(Duration::from_secs(100))
        .shadow()
        .clock(clock.clone())
        .build()
        .unwrap();
    let _ = breaker.call(|| Err::<(), _>("down"));
    clock.advance(Duration::from_secs(1));
    assert!(breaker.call(|| Ok::<_, ()>(())).is_ok()); // the probe
    assert_eq!(breaker.state(), State::Recovering);
    let before = breaker.metrics().lifetime;
    // At the ramp's start it admits about one call in ten: the rest would have
    // been rejected, and run. Successes only: a failure would trip the streak.
    for _ in 0..200 {
        assert!(breaker.call(|| Ok::<_, ()>(())).is_ok());
    }
    let m = breaker.metrics();
    let admitted = m.lifetime.admitted - before.admitted;
    let would_reject = m.lifetime.would_reject - before.would_reject;
    assert_eq!(admitted + would_reject, 200);
    assert!(would_reject > 100, "{would_reject}");
    assert_eq!(m.lifetime.rejected, 0);
    assert_eq!(m.window.calls, admitted, "only admitted calls count");
    assert_eq!(m.lifetime.successes - before.successes, admitted);
}
