//! Progressive recovery (`Builder::ramp_up`), contract-style on `ManualClock`: the
//! schedule, a trip during the ramp, the end, and the generation rule.

mod common;

use common::{on_manual_clock, rate_window, trips_after};
use cutout::{CircuitBreaker, Error, ManualClock, Reason, SavedState, State, Transition};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, UNIX_EPOCH};

const SEC: Duration = Duration::from_secs(1);
const RAMP: Duration = Duration::from_secs(10);

type Log = Arc<Mutex<Vec<Transition>>>;

/// A breaker that trips on `n` consecutive failures, with a 1 s cooldown, one
/// probe and a 10 s ramp; its clock and its transition log.
fn ramped(n: u32) -> (CircuitBreaker<ManualClock>, ManualClock, Log) {
    let clock = ManualClock::new();
    let log = Log::default();
    let events = log.clone();
    let breaker = trips_after(n, SEC)
        .backoff_multiplier(2.0)
        .ramp_up(RAMP)
        .clock(clock.clone())
        .on_transition(move |t| events.lock().unwrap().push(*t))
        .build()
        .unwrap();
    (breaker, clock, log)
}

/// Trips `b` with `n` failures, waits out the cooldown of `level` and lets the
/// probe succeed: the breaker is recovering, at time 0 of its ramp.
fn recover(b: &CircuitBreaker<ManualClock>, clock: &ManualClock, n: u32) {
    for _ in 0..n {
        let _ = b.call(|| Err::<(), _>("down"));
    }
    assert_eq!(b.state(), State::Open);
    clock.advance(SEC * 2u32.pow(u32::from(b.metrics().level)));
    assert_eq!(b.call(|| Ok::<_, ()>("probe")), Ok("probe"));
    assert_eq!(b.state(), State::Recovering);
}

/// The share the docs promise `elapsed` into the ramp: 10% rising linearly to 100%.
fn scheduled(elapsed: Duration) -> f64 {
    (0.1 + 0.9 * elapsed.as_secs_f64() / RAMP.as_secs_f64()).min(1.0)
}

/// Makes `n` successful calls; returns how many were admitted, checking each
/// rejection on the way.
fn admitted(b: &CircuitBreaker<ManualClock>, n: usize) -> usize {
    (0..n)
        .filter(|_| match b.call(|| Ok::<_, ()>(())) {
            Ok(()) => true,
            Err(Error::Rejected(r)) => {
                assert_eq!(r.state(), State::Recovering);
                assert_eq!(r.retry_after(), Some(Duration::ZERO));
                false
            }
            Err(Error::Inner(())) => unreachable!(),
        })
        .count()
}

fn reasons(log: &Log) -> Vec<(State, State, Reason, u8)> {
    log.lock()
        .unwrap()
        .iter()
        .map(|t| (t.from, t.to, t.reason, t.level))
        .collect()
}

/// The transitions from Open to Closed through a round at `level` whose probes
/// succeed and a ramp that completes (at level 0).
fn recovered_at(level: u8) -> [(State, State, Reason, u8); 3] {
    [
        (State::Open, State::HalfOpen, Reason::CooldownElapsed, level),
        (
            State::HalfOpen,
            State::Recovering,
            Reason::ProbesSucceeded,
            level,
        ),
        (State::Recovering, State::Closed, Reason::RampCompleted, 0),
    ]
}

#[test]
fn the_admitted_share_follows_the_schedule_and_rejections_are_counted() {
    let (b, clock, _) = ramped(1);
    recover(&b, &clock, 1);
    let m = b.metrics();
    assert_eq!(
        (m.state, m.retry_after),
        (State::Recovering, Some(Duration::ZERO))
    );
    let before = m.lifetime;
    let mut elapsed = Duration::ZERO;
    let mut total = 0;
    for step in [0, 1, 2, 3, 2, 1] {
        clock.advance(SEC * step);
        elapsed += SEC * step;
        let got = admitted(&b, 1000);
        total += got;
        let want = scheduled(elapsed) * 1000.0;
        assert!(
            (got as f64 - want).abs() <= 20.0,
            "{elapsed:?} into the ramp: {got} of 1000 admitted, {want} scheduled"
        );
        assert_eq!(b.state(), State::Recovering);
    }
    let m = b.metrics();
    assert_eq!(m.lifetime.admitted - before.admitted, total as u64);
    assert_eq!(m.lifetime.successes - before.successes, total as u64);
    assert_eq!(
        m.lifetime.rejected - before.rejected,
        6000 - total as u64,
        "a call not admitted is counted as rejected"
    );
}

#[test]
fn every_thousand_consecutive_calls_of_a_thread_keep_to_the_schedule() {
    let (b, clock, _) = ramped(1);
    recover(&b, &clock, 1);
    // 1 ms every 3 calls: the share changes under the calls, 30,000 calls in all.
    let mut calls = Vec::new(); // (scheduled share, admitted)
    let mut elapsed = Duration::ZERO;
    while elapsed < RAMP {
        for _ in 0..3 {
            calls.push((scheduled(elapsed), admitted(&b, 1) == 1));
        }
        clock.advance(Duration::from_millis(1));
        elapsed += Duration::from_millis(1);
    }
    let worst = calls
        .windows(1000)
        .map(|w| {
            let want: f64 = w.iter().map(|c| c.0).sum();
            let got = w.iter().filter(|c| c.1).count() as f64;
            (got - want).abs()
        })
        .fold(0.0, f64::max);
    assert!(worst <= 20.0, "a run of 1000 calls was {worst} calls off");
    assert!(
        worst <= 2.0,
        "the running sum keeps within a call or two: {worst}"
    );
    assert!(b.call(|| Ok::<_, ()>(())).is_ok());
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn four_threads_together_and_each_keep_to_the_schedule() {
    threads_keep_to_the_schedule(4);
}

/// More threads than a breaker ever has owned stripes (64): some decide with their
/// thread-local sums, and each of them keeps to the schedule too.
#[test]
fn threads_without_a_stripe_keep_to_the_schedule_too() {
    threads_keep_to_the_schedule(70);
}

/// One thread alternating between more ramping breakers than its table of ramp sums
/// holds (entries collide and evict each other): each breaker still admits about its
/// scheduled share, 10% of 2,000 calls. A restarted sum admits at random with the
/// share's probability (a standard deviation of 13 calls here), so the bound is wide;
/// a restart that admitted every first call would admit them all.
#[test]
fn breakers_that_evict_each_others_ramp_sums_keep_near_the_schedule() {
    const BREAKERS: usize = 9;
    const ROUNDS: usize = 2_000;
    let breakers: Vec<_> = (0..BREAKERS)
        .map(|_| {
            let (b, clock, _) = ramped(1);
            recover(&b, &clock, 1);
            b
        })
        .collect();
    let mut got = [0; BREAKERS];
    for _ in 0..ROUNDS {
        for (b, got) in breakers.iter().zip(&mut got) {
            *got += admitted(b, 1);
        }
    }
    let want = scheduled(Duration::ZERO) * ROUNDS as f64;
    for (i, b) in breakers.iter().enumerate() {
        assert!(
            (got[i] as f64 - want).abs() <= 80.0,
            "breaker {i}: {got:?} admitted, {want} scheduled"
        );
        assert_eq!(b.state(), State::Recovering);
        assert_eq!(b.metrics().lifetime.rejected, (ROUNDS - got[i]) as u64);
    }
}

fn threads_keep_to_the_schedule(threads: usize) {
    let (b, clock, _) = ramped(1);
    recover(&b, &clock, 1);
    let barrier = Barrier::new(threads + 1);
    let steps = [0u32, 2, 3, 3];
    let per_step = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    steps
                        .iter()
                        .map(|_| {
                            barrier.wait(); // the clock is set
                            let got = admitted(&b, 1000);
                            barrier.wait(); // every thread is done with this step
                            got
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for &step in &steps {
            clock.advance(SEC * step);
            barrier.wait();
            barrier.wait();
        }
        workers
            .into_iter()
            .map(|w| w.join().unwrap())
            .collect::<Vec<_>>()
    });
    let mut elapsed = Duration::ZERO;
    for (i, &step) in steps.iter().enumerate() {
        elapsed += SEC * step;
        let want = scheduled(elapsed);
        let total: usize = per_step.iter().map(|t| t[i]).sum();
        assert!(
            (total as f64 / (threads * 1000) as f64 - want).abs() <= 0.02,
            "{elapsed:?}: {total} of {} admitted, {want} scheduled",
            threads * 1000
        );
        for t in &per_step {
            assert!(
                (t[i] as f64 / 1000.0 - want).abs() <= 0.02,
                "{elapsed:?}: a thread had {} of 1000 admitted, {want} scheduled",
                t[i]
            );
        }
    }
}

#[test]
fn the_end_of_the_ramp_closes_the_breaker_at_level_zero() {
    let (b, clock, log) = ramped(1);
    recover(&b, &clock, 1);
    clock.advance(RAMP - Duration::from_millis(1));
    assert_eq!(b.state(), State::Recovering, "a pure read moves nothing");
    let _ = admitted(&b, 10);
    assert_eq!(b.state(), State::Recovering, "1 ms before the end");
    clock.advance(Duration::from_millis(1));
    assert_eq!(
        admitted(&b, 100),
        100,
        "the call that ends the ramp is admitted"
    );
    assert_eq!(b.state(), State::Closed);
    let seen = reasons(&log);
    let tripped = (State::Closed, State::Open, Reason::ConsecutiveFailures, 0);
    assert_eq!(seen[0], tripped);
    assert_eq!(seen[1..], recovered_at(0));
    let ended = log.lock().unwrap()[3];
    assert_eq!(
        ended.at,
        SEC + RAMP,
        "the ramp ended at the first call after it"
    );
    let m = b.metrics();
    assert_eq!(m.transitions(Reason::RampCompleted), 1);
    assert_eq!(m.transitions(Reason::RampFailed), 0);
    assert_eq!((m.level, m.retry_after), (0, Some(Duration::ZERO)));
}

#[test]
fn a_trip_during_the_ramp_reopens_at_the_next_level_with_its_own_reason() {
    let (b, clock, log) = ramped(2);
    recover(&b, &clock, 2);
    clock.advance(SEC * 4);
    // The streak starts empty in the ramp and counts only admitted calls.
    let _ = b.call(|| Err::<(), _>("down"));
    assert_eq!(b.metrics().consecutive_failures, 1);
    assert_eq!(b.state(), State::Recovering);
    let mut tries = 0;
    while b.state() == State::Recovering {
        let _ = b.call(|| Err::<(), _>("down"));
        tries += 1;
        assert!(tries < 10, "the ramp admits at least 10% of the calls");
    }
    let m = b.metrics();
    assert_eq!((m.state, m.level), (State::Open, 1));
    assert_eq!(m.retry_after, Some(SEC * 2), "the level-1 cooldown");
    let tripped = *log.lock().unwrap().last().unwrap();
    assert_eq!(
        (tripped.from, tripped.reason, tripped.consecutive_failures),
        (State::Recovering, Reason::RampFailed, 2)
    );
    assert_eq!(m.transitions(Reason::RampFailed), 1);

    // Around again: the next ramp starts at the reopened level, and its end
    // resets the level.
    recover(&b, &clock, 0);
    assert_eq!(b.metrics().level, 1);
    clock.advance(RAMP);
    assert!(b.call(|| Ok::<_, ()>(())).is_ok());
    assert_eq!((b.state(), b.metrics().level), (State::Closed, 0));
    let seen = reasons(&log);
    assert_eq!(
        seen[3],
        (State::Recovering, State::Open, Reason::RampFailed, 1)
    );
    assert_eq!(seen[4..], recovered_at(1));
}

/// The ramp ends at the first call after its time, not at its time: a call
/// admitted in the ramp that fails after the ramp's time has passed, before
/// any call closed it, still trips the ramp.
#[test]
fn a_failure_after_the_ramps_time_before_the_call_that_ends_it_reopens() {
    let (b, clock, log) = ramped(1);
    recover(&b, &clock, 1);
    let permit = std::iter::repeat_with(|| b.try_acquire())
        .take(100)
        .find_map(Result::ok)
        .expect("the ramp admits 10% of the calls");
    clock.advance(RAMP + SEC);
    assert_eq!(b.state(), State::Recovering, "no call has ended it");
    permit.failure();
    let m = b.metrics();
    assert_eq!((m.state, m.level), (State::Open, 1));
    assert_eq!(m.transitions(Reason::RampFailed), 1);
    let tripped = *log.lock().unwrap().last().unwrap();
    assert_eq!(
        (tripped.from, tripped.reason),
        (State::Recovering, Reason::RampFailed)
    );
}

#[test]
fn the_rate_policies_apply_in_the_ramp_with_minimum_calls_unscaled() {
    let clock = ManualClock::new();
    let log = Log::default();
    let events = log.clone();
    let b = rate_window(Duration::from_secs(10), 10, 0.5, 4)
        .open_duration(SEC)
        .ramp_up(RAMP)
        .clock(clock.clone())
        .on_transition(move |t| events.lock().unwrap().push(*t))
        .build()
        .unwrap();
    for _ in 0..4 {
        let _ = b.call(|| Err::<(), _>("down"));
    }
    clock.advance(SEC);
    assert!(b.call(|| Ok::<_, ()>(())).is_ok());
    assert_eq!(b.state(), State::Recovering);
    assert_eq!(
        b.metrics().window.calls,
        0,
        "the ramp's window starts empty"
    );
    clock.advance(SEC * 9); // 91% of the calls admitted
    let mut failed = 0;
    while failed < 3 {
        if let Err(Error::Inner(_)) = b.call(|| Err::<(), _>("down")) {
            failed += 1;
        }
    }
    let m = b.metrics();
    assert_eq!(
        (m.state, m.window.calls, m.window.failures),
        (State::Recovering, 3, 3)
    );
    assert_eq!(m.consecutive_failures, 0, "no streak policy configured");
    while b.state() == State::Recovering {
        let _ = b.call(|| Err::<(), _>("down"));
    }
    let tripped = *log.lock().unwrap().last().unwrap();
    assert_eq!((tripped.reason, tripped.level), (Reason::RampFailed, 1));
    assert_eq!((tripped.window.calls, tripped.window.failures), (4, 4));
}

#[test]
fn an_outcome_admitted_before_the_ramp_cannot_trip_it_or_end_it() {
    let (b, clock, log) = ramped(1);
    let early = b.try_acquire().unwrap(); // admitted while Closed
    recover(&b, &clock, 1);
    early.failure(); // would trip the ramp at once if it counted
    assert_eq!(b.state(), State::Recovering);
    assert_eq!(b.metrics().lifetime.stale, 1);

    // A call admitted in the ramp that reports after the ramp ended is stale too.
    let mut in_ramp = None;
    while in_ramp.is_none() {
        in_ramp = b.try_acquire().ok();
    }
    clock.advance(RAMP);
    assert!(b.call(|| Ok::<_, ()>(())).is_ok());
    assert_eq!(b.state(), State::Closed);
    in_ramp.unwrap().failure();
    assert_eq!(
        b.state(),
        State::Closed,
        "a late failure from the ramp is stale"
    );
    assert_eq!(b.metrics().lifetime.stale, 2);
    assert_eq!(reasons(&log).len(), 4);
}

#[test]
fn a_dropped_call_in_the_ramp_is_ignored_and_a_manual_reset_ends_the_ramp() {
    let (b, clock, log) = ramped(1);
    recover(&b, &clock, 1);
    let mut permit = None;
    while permit.is_none() {
        permit = b.try_acquire().ok();
    }
    drop(permit);
    assert_eq!(b.state(), State::Recovering);
    assert_eq!(b.metrics().lifetime.dropped, 1);
    b.reset();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(
        reasons(&log).last(),
        Some(&(State::Recovering, State::Closed, Reason::Reset, 0))
    );
}

/// `open_for` leaves a ramp alone (tests/open_for.rs checks every other state), and
/// a `reset` from a ramp at level 1 closes at level 0: the next trip waits the base
/// cooldown.
#[test]
fn open_for_leaves_a_ramp_alone_and_a_reset_from_it_closes_at_level_zero() {
    let (b, clock, log) = ramped(1);
    let _ = b.call(|| Err::<(), _>("down"));
    clock.advance(SEC);
    let _ = b.call(|| Err::<(), _>("the probe fails")); // level 1
    recover(&b, &clock, 0);
    assert_eq!(b.metrics().level, 1);
    assert!(!b.open_for(SEC * 5));
    assert_eq!(b.state(), State::Recovering);
    b.reset();
    assert_eq!((b.state(), b.metrics().level), (State::Closed, 0));
    assert_eq!(
        reasons(&log).last(),
        Some(&(State::Recovering, State::Closed, Reason::Reset, 0))
    );
    let _ = b.call(|| Err::<(), _>("down"));
    assert_eq!(b.try_acquire().unwrap_err().retry_after(), Some(SEC));
}

#[test]
fn a_recovering_breaker_saves_as_recovering_and_restores_as_closed() {
    let (b, clock, _) = ramped(3);
    recover(&b, &clock, 3);
    while b.metrics().consecutive_failures == 0 {
        let _ = b.call(|| Err::<(), _>("down"));
    }
    let now = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let saved = b.save_at(now);
    assert_eq!(
        (saved.state, saved.consecutive_failures),
        (State::Recovering, 1)
    );
    let restored = CircuitBreaker::builder()
        .consecutive_failures(3)
        .ramp_up(RAMP)
        .clock(ManualClock::new())
        .restore_at(saved.clone(), now)
        .build()
        .unwrap();
    let m = restored.metrics();
    assert_eq!(
        (m.state, m.level, m.consecutive_failures),
        (State::Closed, 0, 1)
    );

    let by_hand = SavedState::new("db", State::Recovering, now);
    let restored = CircuitBreaker::builder()
        .clock(ManualClock::new())
        .restore_at(by_hand, now)
        .build()
        .unwrap();
    assert_eq!(restored.state(), State::Closed);
}

#[test]
fn a_zero_ramp_is_a_config_error_naming_it() {
    let e = CircuitBreaker::builder()
        .ramp_up(Duration::ZERO)
        .build()
        .unwrap_err();
    assert_eq!(e.field(), "ramp_up");
    let e = CircuitBreaker::builder()
        .ramp_up(Duration::MAX)
        .build()
        .unwrap_err();
    assert_eq!(e.field(), "ramp_up");
}

#[test]
fn without_ramp_up_a_successful_round_closes_at_once() {
    let (b, clock) = on_manual_clock(CircuitBreaker::builder().consecutive_failures(1));
    let _ = b.call(|| Err::<(), _>("down"));
    clock.advance(SEC);
    assert!(b.call(|| Ok::<_, ()>(())).is_ok());
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.metrics().transitions(Reason::RampCompleted), 0);
}
