//! More threads than a breaker has owned stripes, all calling at once: the owners
//! take the lean path (plain increments in their own stripes), the rest share one
//! stripe through the general path (atomic increments). Every call is counted
//! exactly once either way, in the lifetime counters and in the window.
//!
//! One test in its own binary, so that its threads are the process's only ones
//! holding slots while they run.

use cutout::{CircuitBreaker, ManualClock};
use std::sync::Barrier;
use std::time::Duration;

const CALLS: u64 = 50_000;
/// Every tenth call fails.
const FAILS: u64 = CALLS / 10;

#[test]
fn owners_and_sharers_count_every_call_once() {
    // This many threads always leaves some on the shared stripes.
    let threads = cutout::owned_stripes_per_breaker() + 4;
    let clock = ManualClock::new();
    let breaker = CircuitBreaker::builder()
        .consecutive_failures(u32::MAX / 2)
        .window(Duration::from_secs(60), 6)
        // Never trips: a tenth of the calls fail.
        .failure_rate(1.0, 1)
        .clock(clock)
        .build()
        .unwrap();
    // Every thread holds its slot until all have one, so they hold distinct slots.
    let all_in = Barrier::new(threads);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let first = breaker.call(|| Ok::<_, ()>(()));
                // Checked after the barrier: a thread that failed before it would
                // leave the others waiting there for ever.
                all_in.wait();
                assert!(first.is_ok());
                for i in 1..CALLS {
                    let fail = i % 10 == 0;
                    let _ = breaker.call(|| if fail { Err(()) } else { Ok(()) });
                }
            });
        }
    });
    let total = threads as u64 * CALLS;
    let failures = threads as u64 * (FAILS - 1);
    let m = breaker.metrics();
    assert_eq!(
        (
            m.lifetime.admitted,
            m.lifetime.successes,
            m.lifetime.failures
        ),
        (total, total - failures, failures)
    );
    assert_eq!((m.window.calls, m.window.failures), (total, failures));
}
