//! Helpers shared by the integration tests (`mod common;` in each). Every wait here
//! is bounded, so a test of wrong code fails instead of hanging.
#![allow(dead_code)] // each test binary uses some of these

mod build;
mod events;
pub mod hostile;
mod process;

#[allow(unused_imports)] // each test binary uses some of these
pub use build::*;
#[allow(unused_imports)]
pub use events::*;
#[allow(unused_imports)]
pub use process::*;

use cutout::CircuitBreaker;
use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::mpsc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// Polls once with a no-op waker.
pub fn poll_once<F: Future>(f: Pin<&mut F>) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(Waker::noop()))
}

/// How many polls [`block_on`] makes before it gives up. The futures the tests
/// pass need a handful; one that is still pending after this many never completes
/// (a call the code under test should have rejected, stuck on a hanging service).
pub const MAX_POLLS: u32 = 100_000;

/// Polls until ready, and panics (a failed test, not a hung one) if the future is
/// still pending after [`MAX_POLLS`] polls.
pub fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    for _ in 0..MAX_POLLS {
        if let Poll::Ready(out) = poll_once(f.as_mut()) {
            return out;
        }
    }
    panic!("the future was still pending after {MAX_POLLS} polls");
}

/// Runs `f` on a thread of its own and returns what it returns, or panics (a failed
/// test, not a hung one) if it has not finished within `limit`: for a test whose
/// wrong code could deadlock its own thread. A panic in `f` is the caller's panic.
pub fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => {
            let _ = worker.join();
            out
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => match worker.join() {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(()) => unreachable!("the worker sends before it returns"),
        },
        // The worker is left behind, blocked; the test binary exits without it.
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("not finished within {limit:?}: a deadlock?")
        }
    }
}

/// Every call `b` admitted finished exactly one way (no call in flight): its
/// lifetime counters' admissions equal their successes, failures, ignored, stale
/// and dropped calls, less the dropped calls counted as failures, which are in
/// both `failures` and `dropped` (at most `dropped` of them).
pub fn assert_each_admitted_call_finished_once<C: cutout::Clock>(b: &cutout::CircuitBreaker<C>) {
    let l = b.metrics().lifetime;
    let sum = l.successes + l.failures + l.ignored + l.stale + l.dropped;
    assert!(
        (l.admitted..=l.admitted + l.dropped).contains(&sum),
        "{l:?}"
    );
}

/// Four threads each make `calls` calls through `b`, call `i` of thread `t`
/// failing when `(i + t) % 3 == 0`, and run `then(i)` after each.
pub fn four_threads_call<C: cutout::Clock>(
    b: &CircuitBreaker<C>,
    calls: u64,
    then: impl Fn(u64) + Sync,
) {
    let then = &then;
    std::thread::scope(|s| {
        for t in 0..4 {
            s.spawn(move || {
                for i in 0..calls {
                    let _ = b.call(|| if (i + t) % 3 == 0 { Err(()) } else { Ok(()) });
                    then(i);
                }
            });
        }
    });
}

/// A tiny deterministic PRNG (xorshift64), seeded with a nonzero word.
pub struct XorShift(pub u64);

impl XorShift {
    /// The next number, below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Any outcome a call can have.
pub fn any_outcome() -> impl proptest::strategy::Strategy<Value = cutout::Outcome> + Clone {
    use cutout::Outcome;
    use proptest::prelude::Just;
    proptest::prop_oneof![
        Just(Outcome::Success),
        Just(Outcome::Failure),
        Just(Outcome::Ignored)
    ]
}

/// A metric key's labels, sorted: (key, value) pairs.
#[cfg(feature = "metrics")]
pub fn sorted_labels(key: &metrics::Key) -> Vec<(String, String)> {
    let mut labels: Vec<_> = key
        .labels()
        .map(|l| (l.key().to_owned(), l.value().to_owned()))
        .collect();
    labels.sort();
    labels
}
