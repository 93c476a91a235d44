//! Model 3: a stale outcome.
//!
//! Two calls are admitted in Closed (generation 0). Thread A records one outcome;
//! thread B records a failure (tripping the breaker), lets the cooldown pass (its
//! own clock move, after its trip) and takes a half-open probe. A's outcome
//! lands before the trip (then it counts normally) or after (then it is stale).
//!
//! Proves, in every interleaving: each outcome is counted exactly once, as fresh or
//! as `lifetime.stale`, and A's is stale whenever A saw the breaker past Closed
//! before recording; the breaker trips exactly once and goes HalfOpen exactly
//! once; a stale success never closes the breaker or counts as a probe success, a
//! stale failure never reopens it or extends the cooldown (B's probe is admitted
//! exactly at the end of the cooldown), and neither takes a probe slot: with N = 2
//! a second probe is still admitted, a third is not, and it takes both probes'
//! successes to close.

#![cfg(cutout_loom)]

use cutout::{Outcome, Reason, State};
use loom::thread;
use loom_tests::{OPEN, model, shared_breaker};
use std::time::Duration;

fn stale(a: Outcome) {
    model(move || {
        let (clock, events, breaker) =
            shared_breaker(|b| b.consecutive_failures(1).half_open_probes(2));
        let pa = breaker.try_acquire_owned().unwrap();
        let pb = breaker.try_acquire_owned().unwrap();

        let b = breaker.clone();
        let ta = thread::spawn(move || {
            // If A already sees the breaker past Closed, its outcome must be stale.
            let moved_on = b.state() != State::Closed;
            pa.record(a);
            moved_on
        });
        let b = breaker.clone();
        let tb_clock = clock.clone();
        let tb = thread::spawn(move || {
            pb.failure();
            tb_clock.advance(OPEN);
            let probe = b.try_acquire_owned().expect("the cooldown has passed");
            assert!(probe.is_probe());
            probe
        });
        let a_moved_on = ta.join().unwrap();
        let probe = tb.join().unwrap();

        let m = breaker.metrics();
        assert_eq!((m.state, m.generation), (State::HalfOpen, 2));
        assert_eq!(probe.generation(), 2);
        assert_eq!(m.transitions(Reason::ConsecutiveFailures), 1);
        assert_eq!(m.transitions(Reason::CooldownElapsed), 1);
        assert_eq!(m.total_transitions(), 2);
        assert_eq!(
            m.retry_after,
            Some(Duration::ZERO),
            "the second probe slot is free"
        );
        let l = m.lifetime;
        match a {
            Outcome::Success => assert_eq!((l.successes + l.stale, l.failures), (1, 1)),
            _ => assert_eq!(l.failures + l.stale, 2),
        }
        if a_moved_on {
            assert!(
                l.stale >= 1,
                "A's late outcome was not counted stale: {l:?}"
            );
            assert_eq!(l.successes, 0, "{l:?}");
        }
        assert_eq!(events.get().len(), 2);

        let second = breaker
            .try_acquire()
            .expect("the stale outcome took no slot");
        let third = breaker.try_acquire().unwrap_err();
        assert_eq!(third.state(), State::HalfOpen);
        probe.success();
        assert_eq!(
            breaker.state(),
            State::HalfOpen,
            "one success of two closes nothing"
        );
        second.success();
        assert_eq!(breaker.state(), State::Closed);
    });
}

#[test]
fn a_stale_success_decides_nothing() {
    stale(Outcome::Success);
}

#[test]
fn a_stale_failure_decides_nothing() {
    stale(Outcome::Failure);
}
