//! Model 13: a stripe allocated by its first writer.
//!
//! Every other model runs with every stripe allocated when the breaker is built;
//! these ask for lazy stripes (`cutout::loom_hooks::lazy_stripes`), as outside loom,
//! so a thread's first call allocates its stripe, sets its bit in `owned_bits` or
//! `shared_bits` and publishes it through the `OnceBox` (under loom, the same
//! protocol on loom's `AtomicPtr`, in `src/sync.rs`), racing the other threads'
//! writes and reads (see `Stripes::allocate` in `src/stripe.rs`).
//!
//! Proves: two threads whose first calls each record a failure, allocating their
//! stripes, always trip a `failure_rate(1.0, 2)` breaker, once, with both failures
//! counted; a reader racing a thread's first failure counts it or not, never reads a
//! stripe it was not published, and counts it once the thread is joined; and two
//! threads whose first writes race for one shared stripe both count in the one that
//! is published (the loser's copy freed), and each one's read of the window counts
//! its own outcome, even when it found the stripe published by the other and did
//! not allocate it itself.
//!
//! Fails: with `allocate`'s `fetch_or` of the bit after the publication
//! (`a_writer_that_finds_a_shared_stripe_counts_its_own_outcome`); with the
//! `OnceBox`'s publication (the CAS's success ordering) `Relaxed`, or its `get`
//! `Relaxed` (all three: loom reports the stripe's atomics read by a thread the
//! allocation does not happen before); with the CAS's failure ordering `Relaxed`
//! (the shared-stripe model: the loser writes in the winner's stripe unordered).

#![cfg(cutout_loom)]

use cutout::loom_hooks::{WindowModel, lazy_stripes};
use cutout::{Reason, State};
use loom::thread;
use loom_tests::{assert_tripped_once, closed_or_open, fail_in_threads, model, rate_breaker};
use std::sync::Arc;

#[test]
fn two_first_failures_each_allocating_its_stripe_trip_once() {
    lazy_stripes(true);
    model(|| {
        let (_clock, events, breaker) = rate_breaker(2); // lazy stripes: none allocated
        // Each thread's first call takes a slot (an owned stripe, under loom's
        // two) and allocates that stripe.
        fail_in_threads(&breaker, [1, 1], closed_or_open);
        assert_tripped_once(&breaker, &events, Reason::FailureRate, 2);
        assert_eq!(breaker.metrics().lifetime.admitted, 2);
    });
}

#[test]
fn a_reader_racing_a_first_failure_counts_it_or_not() {
    lazy_stripes(true);
    model(|| {
        let (_clock, _, breaker) = rate_breaker(2);
        let writer = {
            let b = breaker.clone();
            thread::spawn(move || {
                let _ = b.call(|| Err::<(), _>("down"));
            })
        };
        let reader = {
            let b = breaker.clone();
            thread::spawn(move || {
                let m = b.metrics();
                assert!(m.lifetime.failures <= 1, "{m:?}");
                assert!(m.lifetime.admitted <= 1, "{m:?}");
                assert!(m.window.failures <= 1, "{m:?}");
                assert!(m.window.calls <= 1, "{m:?}");
                assert_eq!(m.state, State::Closed);
            })
        };
        writer.join().unwrap();
        reader.join().unwrap();
        let m = breaker.metrics();
        assert_eq!(m.state, State::Closed, "one failure of a minimum of 2");
        assert_eq!((m.lifetime.admitted, m.lifetime.failures), (1, 1));
        assert_eq!((m.window.calls, m.window.failures), (1, 1));
    });
}

#[test]
fn a_writer_that_finds_a_shared_stripe_counts_its_own_outcome() {
    lazy_stripes(true);
    model(|| {
        // One bucket of 10 s; both threads record in shared stripe 0, which
        // neither has allocated.
        let window = Arc::new(WindowModel::new(1, 10_000_000_000));
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let w = window.clone();
                thread::spawn(move || {
                    assert!(w.record(true, 0, 1, true));
                    // Its own failure, whichever thread allocated the stripe: a
                    // thread that found it published reads the bit set before.
                    let c = w.counts(0, 1);
                    assert!(c.failures >= 1 && c.calls >= 1, "{c:?}");
                    assert!(c.failures <= 2 && c.calls <= 2, "{c:?}");
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let c = window.counts(0, 1);
        assert_eq!((c.calls, c.failures), (2, 2), "both in the one stripe");
    });
}
