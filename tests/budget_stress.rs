//! The failure budget under real concurrency (`src/window/budget.rs`; the loom
//! models in `loom-tests/tests/budget.rs` prove it for two and three threads).
//! Threads race failures that together reach the failure rate exactly with the
//! last of them, while a grant made before the race lets the first ones skip their
//! reads and later reads grant again: whichever failures skip, the breaker trips
//! exactly once, after the last, with every failure in the counts that tripped it.
//!
//! Its own binary, so that the racing threads find the process's stripe slots free
//! (a thread beyond them shares a stripe, which works as well: each thread counts
//! a success before the race, so no shared bucket rotates during it).

mod common;

use common::rate_window;
use cutout::{ManualClock, Reason, State, Transition};
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

const THREADS: u64 = 4;
const EACH: u64 = 25;
/// Failures before the race: the first one's read grants the next 52.
const BEFORE: u64 = 10;
/// Successes in all: as many as the failures, so the rate 0.5 is reached with the
/// last failure and not before.
const SUCCESSES: u64 = BEFORE + THREADS * EACH;

fn race() {
    let events = Arc::new(Mutex::new(Vec::<Transition>::new()));
    let log = events.clone();
    let breaker = rate_window(Duration::from_secs(10), 10, 0.5, 20)
        .clock(ManualClock::new()) // frozen: one epoch, no bucket rotates
        .on_transition(move |t| log.lock().unwrap().push(*t))
        .build()
        .unwrap();
    // Each racing thread counts one success before the race.
    for _ in 0..SUCCESSES - THREADS {
        breaker.call(|| Ok::<_, ()>(())).unwrap();
    }
    for _ in 0..BEFORE {
        breaker.call(|| Err::<(), _>(())).unwrap_err();
    }
    assert_eq!(breaker.state(), State::Closed);
    let start = Barrier::new(THREADS as usize);
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            let (breaker, start) = (&breaker, &start);
            s.spawn(move || {
                breaker.call(|| Ok::<_, ()>(())).unwrap();
                start.wait();
                for _ in 0..EACH {
                    // Admitted every time: the rate is reached only by the last.
                    let e = breaker.call(|| Err::<(), _>(())).unwrap_err();
                    assert!(e.into_inner().is_some(), "rejected before the last failure");
                }
            });
        }
    });
    let m = breaker.metrics();
    assert_eq!(m.state, State::Open, "the last failure tripped");
    assert_eq!(m.total_transitions(), 1);
    assert_eq!(m.transitions(Reason::FailureRate), 1);
    assert_eq!(m.lifetime.failures, BEFORE + THREADS * EACH);
    let events = events.lock().unwrap();
    assert_eq!(events.len(), 1, "{events:?}");
    let all = BEFORE + THREADS * EACH;
    let w = events[0].window;
    assert_eq!(
        (w.calls, w.failures),
        (SUCCESSES + all, all),
        "the read that tripped saw every failure"
    );
}

#[test]
fn racing_failures_trip_once_whichever_skip_their_reads() {
    for _ in 0..500 {
        race();
    }
}
