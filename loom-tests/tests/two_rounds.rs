//! Model 9: two half-open rounds in one execution.
//!
//! Proves: with N = 1, a thread that acquires while the breaker is HalfOpen in
//! generation g (it may act on that word long after) never gets a probe slot of
//! the round of generation g + 2, and never lets a second probe into it: while
//! another thread fails round g's probe, lets the doubled cooldown pass, takes
//! round g + 2's probe and asks once more, at most one probe of round g + 2 is ever
//! admitted.
//!
//! This is the model for the tagged words' orderings (`src/state.rs`, Orderings).
//! With the round word's loads and CASes `Relaxed`, the late thread can read round
//! g + 2's tag, then a state word still at g (nothing orders the two loads), take the
//! round for an earlier phase's and overwrite it, and the second request is then
//! admitted into a round that reads empty: this model fails.

#![cfg(cutout_loom)]

use cutout::State;
use loom::thread;
use loom_tests::{OPEN, model, shared_breaker};

#[test]
fn a_late_thread_never_lets_a_second_probe_into_a_later_round() {
    model(|| {
        let (clock, _events, breaker) = shared_breaker(|b| b.consecutive_failures(1));
        let _ = breaker.call(|| Err::<(), _>("down"));
        clock.advance(OPEN);
        // Round of generation 2: its probe is held by the main thread.
        let probe = breaker.try_acquire_owned().unwrap();
        assert!(probe.is_probe());
        assert_eq!(breaker.state(), State::HalfOpen);

        let late = {
            let b = breaker.clone();
            thread::spawn(move || b.try_acquire_owned().ok())
        };
        let prober = {
            let (b, clock) = (breaker.clone(), clock.clone());
            thread::spawn(move || {
                probe.failure(); // Open, generation 3, at level 1
                clock.advance(OPEN * 2);
                let first = b.try_acquire_owned().ok(); // Half-open, generation 4
                let second = b.try_acquire_owned().ok();
                (first, second)
            })
        };
        let late = late.join().unwrap();
        let (first, second) = prober.join().unwrap();

        let in_round_4 = [&late, &first, &second]
            .into_iter()
            .flatten()
            .filter(|p| p.is_probe() && p.generation() == 4)
            .count();
        assert!(in_round_4 <= 1, "{in_round_4} probes admitted into round 4");
        assert!(second.is_none(), "the round of generation 4 is full");
    });
}
