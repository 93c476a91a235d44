//! Model 2: half-open admission at the instant the cooldown ends.
//!
//! Proves: when three threads race `try_acquire` after the cooldown, exactly one of
//! them moves the breaker Open → HalfOpen (one event, one generation step), exactly
//! `N` are admitted as probes of that generation, and every other one is rejected
//! with state HalfOpen and `retry_after` equal to the cooldown a failed round would
//! start (shorter than the time left in the round). The `N` probes' successes then
//! close the breaker.

#![cfg(cutout_loom)]

use cutout::{Reason, State};
use loom::thread;
use loom_tests::{model, shared_breaker, trip_and_cool};
use std::time::Duration;

const HALF_OPEN_TIMEOUT: Duration = Duration::from_secs(30);
/// What a rejection by a full round says: the cooldown a failed round would start
/// (the next backoff level's: twice the 1 s of `OPEN`), shorter than the time left
/// in the round.
const NEXT_COOLDOWN: Duration = Duration::from_secs(2);

fn admission(n: u32) {
    model(move || {
        let (clock, events, breaker) = shared_breaker(|b| {
            b.consecutive_failures(1)
                .half_open_probes(n)
                .half_open_timeout(HALF_OPEN_TIMEOUT)
        });
        trip_and_cool(&breaker, &clock);

        let threads: Vec<_> = (0..3)
            .map(|_| {
                let b = breaker.clone();
                thread::spawn(move || b.try_acquire_owned())
            })
            .collect();
        let results: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();

        let mut probes = Vec::new();
        for r in results {
            match r {
                Ok(p) => {
                    assert!(p.is_probe());
                    assert_eq!(p.generation(), 2);
                    probes.push(p);
                }
                Err(r) => assert_eq!(
                    (r.state(), r.retry_after()),
                    (State::HalfOpen, Some(NEXT_COOLDOWN))
                ),
            }
        }
        assert_eq!(probes.len(), n as usize, "exactly N admitted");

        let m = breaker.metrics();
        assert_eq!((m.state, m.generation), (State::HalfOpen, 2));
        assert_eq!(m.transitions(Reason::CooldownElapsed), 1);
        assert_eq!(m.lifetime.admitted, 1 + u64::from(n));
        assert_eq!(m.lifetime.rejected, 3 - u64::from(n));
        let ev = events.get();
        assert_eq!(ev.len(), 2, "{ev:?}");
        assert_eq!(
            (ev[1].from, ev[1].to, ev[1].generation),
            (State::Open, State::HalfOpen, 2)
        );

        for p in probes {
            p.success();
        }
        assert_eq!(breaker.state(), State::Closed);
        assert_eq!(breaker.metrics().transitions(Reason::ProbesSucceeded), 1);
    });
}

#[test]
fn exactly_one_probe_of_three() {
    admission(1);
}

#[test]
fn exactly_two_probes_of_three() {
    admission(2);
}
