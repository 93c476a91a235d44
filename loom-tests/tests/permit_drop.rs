//! Model 5: a probe's permit dropped unrecorded while other threads acquire.
//!
//! Proves: the dropped permit's slot comes back exactly once. With N = 1, a thread
//! racing the drop is admitted or rejected (HalfOpen), and afterwards exactly one
//! probe is held, whoever holds it, and its success closes the breaker. With N = 2
//! and both slots taken, one drop races two acquirers: at most one of them gets the
//! freed slot, and afterwards exactly two probes are held.

#![cfg(cutout_loom)]

use cutout::{Reason, State};
use loom::thread;
use loom_tests::{model, shared_breaker, trip_and_cool};

fn dropped(n: u32, acquirers: usize) {
    model(move || {
        let (clock, _events, breaker) =
            shared_breaker(|b| b.consecutive_failures(1).half_open_probes(n));
        trip_and_cool(&breaker, &clock);
        let mut held: Vec<_> = (0..n)
            .map(|_| breaker.try_acquire_owned().unwrap())
            .collect();
        let dropped = held.pop().unwrap();

        let dropper = thread::spawn(move || drop(dropped));
        let threads: Vec<_> = (0..acquirers)
            .map(|_| {
                let b = breaker.clone();
                thread::spawn(move || match b.try_acquire_owned() {
                    Ok(p) => Some(p),
                    Err(r) => {
                        assert_eq!(r.state(), State::HalfOpen);
                        None
                    }
                })
            })
            .collect();
        dropper.join().unwrap();
        for t in threads {
            held.extend(t.join().unwrap());
        }
        assert!(held.len() <= n as usize, "the slot was handed out twice");
        // Whatever the race left free is free now, exactly once.
        while held.len() < n as usize {
            held.push(
                breaker
                    .try_acquire_owned()
                    .expect("a freed slot is reusable"),
            );
        }
        assert_eq!(breaker.try_acquire().unwrap_err().state(), State::HalfOpen);

        let m = breaker.metrics();
        assert_eq!(m.lifetime.dropped, 1);
        assert_eq!((m.state, m.generation), (State::HalfOpen, 2));
        for p in held {
            assert!(p.is_probe());
            p.success();
        }
        let m = breaker.metrics();
        assert_eq!(m.state, State::Closed);
        assert_eq!(m.transitions(Reason::ProbesSucceeded), 1);
    });
}

#[test]
fn one_slot_dropped_while_another_thread_acquires() {
    dropped(1, 1);
}

#[test]
fn one_of_two_slots_dropped_while_two_threads_acquire() {
    dropped(2, 2);
}
