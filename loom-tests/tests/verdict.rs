//! Model 4: a probe's success races the other probe's failure.
//!
//! With N = 2 and both probes admitted, thread 1 records a success and thread 2 a
//! failure (or a success: the closing variant). The reference rules: any failed
//! probe reopens, N successes close.
//!
//! Proves: with a failure the breaker always ends Open at backoff level 1 with the
//! doubled cooldown, never Closed and never Open without its level or opened-at;
//! with two successes it always ends Closed at level 0. Either way exactly one
//! verdict transition and one verdict event happen. In the failing variant a third
//! thread asking for admission meanwhile is always rejected, and if it sees Open it
//! sees the whole doubled cooldown (state, level and opened-at are one word).

#![cfg(cutout_loom)]

use cutout::{Outcome, Reason, State};
use loom::thread;
use loom_tests::{OPEN, model, shared_breaker, trip_and_cool};

fn verdict(second: Outcome) {
    model(move || {
        let (clock, events, breaker) = shared_breaker(|b| {
            b.consecutive_failures(1)
                .half_open_probes(2)
                .backoff_multiplier(2.0)
        });
        trip_and_cool(&breaker, &clock);
        let p1 = breaker.try_acquire_owned().unwrap();
        let p2 = breaker.try_acquire_owned().unwrap();

        let t1 = thread::spawn(move || p1.success());
        let t2 = thread::spawn(move || p2.record(second));
        let t3 = (second == Outcome::Failure).then(|| {
            let b = breaker.clone();
            thread::spawn(move || {
                let r = b.try_acquire().map(|_| ()).unwrap_err();
                match r.state() {
                    State::Open => assert_eq!(r.retry_after(), Some(2 * OPEN)),
                    State::HalfOpen => {}
                    other => panic!("rejected as {other:?}"),
                }
            })
        });
        t1.join().unwrap();
        t2.join().unwrap();
        if let Some(t3) = t3 {
            t3.join().unwrap();
        }

        let m = breaker.metrics();
        let ev = events.get();
        assert_eq!(ev.len(), 3, "{ev:?}");
        let last = ev[2];
        assert_eq!(m.generation, 3);
        if second == Outcome::Failure {
            assert_eq!((m.state, m.level), (State::Open, 1));
            assert_eq!(m.retry_after, Some(2 * OPEN));
            assert_eq!(m.transitions(Reason::ProbeFailed), 1);
            assert_eq!(m.transitions(Reason::ProbesSucceeded), 0);
            assert_eq!(
                (last.to, last.reason, last.level),
                (State::Open, Reason::ProbeFailed, 1)
            );
            // The success counted as a probe success, or arrived after the reopening.
            assert_eq!(m.lifetime.successes + m.lifetime.stale, 1);
        } else {
            assert_eq!((m.state, m.level), (State::Closed, 0));
            assert_eq!(m.transitions(Reason::ProbesSucceeded), 1);
            assert_eq!(m.transitions(Reason::ProbeFailed), 0);
            assert_eq!(
                (last.to, last.reason),
                (State::Closed, Reason::ProbesSucceeded)
            );
            assert_eq!((m.lifetime.successes, m.lifetime.stale), (2, 0));
        }
        assert_eq!((last.from, last.generation), (State::HalfOpen, 3));
    });
}

#[test]
fn success_and_failure_reopen_once() {
    verdict(Outcome::Failure);
}

#[test]
fn two_successes_close_once() {
    verdict(Outcome::Success);
}
