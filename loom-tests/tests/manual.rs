//! Model 7: manual control racing the automatic transitions.
//!
//! Proves:
//! - `reset()` racing a trip (and an observer's `try_acquire`): the breaker always
//!   ends Closed at level 0 with no consecutive failures, one Reset transition, and
//!   a generation that moved by one per transition made (1 or 2); an observer that
//!   sees Open sees the full cooldown; every admitted call is counted once. A trip
//!   after that has the full cooldown.
//! - `open_for()` racing a trip: one Open phase, the winner's, with the winner's
//!   deadline (the hour `open_for` asked for, or the trip's cooldown), as its
//!   transition reports and its rejections say; two `open_for()` calls with
//!   different durations: one opens it, for its own. (A model with two other
//!   transitions beside `open_for` exceeds loom's branch limit: under loom a
//!   waiter yields without a bound, and two waiters yield to each other; on a
//!   machine the wait is bounded, 20 ms.)
//! - `force_open()` racing a probe's success: the breaker always ends ForcedOpen
//!   (never Closed), the generation counts exactly the transitions made, and the
//!   success is counted once, as fresh or as stale; only a fresh one may close.
//! - `force_open()` racing a probe's admission: always ForcedOpen at the end; the
//!   racing thread is rejected as ForcedOpen (no retry_after), never as HalfOpen
//!   (the one slot is free), or holds a probe whose later success is stale and
//!   changes nothing.

#![cfg(cutout_loom)]

use cutout::{ManualClock, Reason, State};
use loom::thread;
use loom_tests::{Events, OPEN, builder, model, shared_breaker, trip_and_cool};
use std::sync::Arc;
use std::time::Duration;

#[test]
fn reset_races_a_trip() {
    model(|| {
        let (_clock, events, breaker) = shared_breaker(|b| b.consecutive_failures(1));
        let p = breaker.try_acquire_owned().unwrap();
        let t1 = thread::spawn(move || p.failure());
        let b = breaker.clone();
        let t2 = thread::spawn(move || b.reset());
        // An observer: if it sees Open, it sees the whole cooldown (opened-at is in
        // the same word); if admitted, its ignored outcome changes nothing.
        let b = breaker.clone();
        let t3 = thread::spawn(move || match b.try_acquire() {
            Ok(p) => p.ignore(),
            Err(r) => assert_eq!((r.state(), r.retry_after()), (State::Open, Some(OPEN))),
        });
        t1.join().unwrap();
        t2.join().unwrap();
        t3.join().unwrap();

        let m = breaker.metrics();
        let trips = m.transitions(Reason::ConsecutiveFailures);
        assert_eq!(
            (m.state, m.level, m.consecutive_failures),
            (State::Closed, 0, 0)
        );
        assert_eq!(m.transitions(Reason::Reset), 1);
        assert!(trips <= 1);
        assert_eq!(u64::from(m.generation), 1 + trips);
        assert_eq!(events.get().len() as u64, 1 + trips);
        let l = m.lifetime;
        assert_eq!(l.failures + l.ignored + l.stale, l.admitted, "{l:?}");

        let _ = breaker.call(|| Err::<(), _>("down"));
        let r = breaker.try_acquire().map(|_| ()).unwrap_err();
        assert_eq!((r.state(), r.retry_after()), (State::Open, Some(OPEN)));
    });
}

#[test]
fn open_for_races_a_trip() {
    model(|| {
        let (_clock, events, breaker) = shared_breaker(|b| b.consecutive_failures(1));
        let p = breaker.try_acquire_owned().unwrap();
        let t1 = thread::spawn(move || p.failure());
        let b = breaker.clone();
        let hour = Duration::from_secs(3600);
        let t2 = thread::spawn(move || b.open_for(hour));
        t1.join().unwrap();
        let opened = t2.join().unwrap();

        // One Open phase, the winner's, with the winner's deadline: a trip's start
        // is never `open_for`'s, nor `open_for`'s a trip's.
        let opens: Vec<_> = events
            .get()
            .iter()
            .map(|t| (t.reason, t.open_until.map(|until| until - t.at)))
            .collect();
        let winner = match opened {
            true => (Reason::External, Some(hour)),
            false => (Reason::ConsecutiveFailures, Some(OPEN)),
        };
        assert_eq!(opens, [winner]);
        let r = breaker.try_acquire().map(|_| ()).unwrap_err();
        assert_eq!(r.retry_after(), winner.1);
    });
}

#[test]
fn two_open_fors_race() {
    model(|| {
        let (_clock, events, breaker) = shared_breaker(|b| b.consecutive_failures(1));
        let (hour, two) = (Duration::from_secs(3600), Duration::from_secs(7200));
        let b = breaker.clone();
        let t1 = thread::spawn(move || b.open_for(hour));
        let b = breaker.clone();
        let t2 = thread::spawn(move || b.open_for(two));
        let (first, second) = (t1.join().unwrap(), t2.join().unwrap());

        // Exactly one opened it, for its own duration.
        assert!(first ^ second);
        let asked = if first { hour } else { two };
        let opens: Vec<_> = events
            .get()
            .iter()
            .map(|t| (t.reason, t.open_until.map(|until| until - t.at)))
            .collect();
        assert_eq!(opens, [(Reason::External, Some(asked))]);
    });
}

fn forced_open_breaker(events: &Events) -> (Arc<cutout::CircuitBreaker<ManualClock>>, ManualClock) {
    let clock = ManualClock::new();
    let breaker = Arc::new(
        builder(&clock, events)
            .consecutive_failures(1)
            .build()
            .unwrap(),
    );
    trip_and_cool(&breaker, &clock);
    (breaker, clock)
}

#[test]
fn force_open_races_a_probe_verdict() {
    model(|| {
        let events = Events::new();
        let (breaker, _clock) = forced_open_breaker(&events);
        let probe = breaker.try_acquire_owned().unwrap(); // HalfOpen, generation 2
        let t1 = thread::spawn(move || probe.success());
        let b = breaker.clone();
        let t2 = thread::spawn(move || b.force_open());
        t1.join().unwrap();
        t2.join().unwrap();

        let m = breaker.metrics();
        let closed = m.transitions(Reason::ProbesSucceeded);
        assert_eq!(m.state, State::ForcedOpen);
        assert_eq!(m.transitions(Reason::ForcedOpen), 1);
        assert_eq!(u64::from(m.generation), 3 + closed);
        // Counted once: fresh (it may still lose its verdict to force_open) or stale.
        assert_eq!(m.lifetime.successes + m.lifetime.stale, 1);
        assert!(closed <= m.lifetime.successes, "a stale success closed it");
        assert_eq!(events.get().len() as u64, 3 + closed);
        let r = breaker.try_acquire().map(|_| ()).unwrap_err();
        assert_eq!((r.state(), r.retry_after()), (State::ForcedOpen, None));
    });
}

#[test]
fn force_open_races_a_probe_admission() {
    model(|| {
        let events = Events::new();
        let (breaker, _clock) = forced_open_breaker(&events);
        let b = breaker.clone();
        let t1 = thread::spawn(move || b.try_acquire_owned());
        let b = breaker.clone();
        let t2 = thread::spawn(move || b.force_open());
        let got = t1.join().unwrap();
        t2.join().unwrap();

        let m = breaker.metrics();
        assert_eq!(m.state, State::ForcedOpen);
        assert_eq!(m.transitions(Reason::ForcedOpen), 1);
        let half_opened = m.transitions(Reason::CooldownElapsed);
        assert_eq!(u64::from(m.generation), 2 + half_opened);
        match got {
            Ok(p) => {
                assert!(p.is_probe());
                assert_eq!(half_opened, 1);
                p.success();
                let m = breaker.metrics();
                assert_eq!((m.state, m.lifetime.stale), (State::ForcedOpen, 1));
            }
            Err(r) => match r.state() {
                State::ForcedOpen => assert_eq!(r.retry_after(), None),
                other => panic!("rejected as {other:?} with a free slot"),
            },
        }
    });
}
