//! The window's sums under real concurrency: writers that own their stripes rotate
//! their live buckets about a thousand times each while a reader sums the window.
//! Every call stays inside the window, so each sum must count every call finished
//! before it started, none twice, and never fewer than the sum before it.
//!
//! One test in its own binary, so that no other test's threads hold the process's
//! slots: the two writers are sure to own their stripes (every machine has at least
//! two owned stripes), which is the path whose sums are exact.

mod common;

use common::on_manual_clock;
use cutout::CircuitBreaker;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

const WRITERS: u64 = 2;
/// 1,000 buckets of 1 s; the clock runs from 0 to just under 1,000 s, so nothing
/// ever leaves the window.
const BUCKETS: u32 = 1_000;
const END: Duration = Duration::from_millis(999_900);

#[test]
fn window_sums_are_exact_and_never_go_back_while_owners_rotate() {
    let (breaker, clock) = on_manual_clock(
        CircuitBreaker::builder()
            .window(Duration::from_secs(u64::from(BUCKETS)), BUCKETS)
            // Never trips: fewer calls than the minimum.
            .failure_rate(1.0, u32::MAX),
    );
    // Calls finished, and failures among them, counted after each call returns.
    let done = AtomicU64::new(0);
    let failed = AtomicU64::new(0);
    let writing = AtomicU64::new(WRITERS);
    let mut reads = 0u64;

    std::thread::scope(|s| {
        for w in 0..WRITERS {
            let (breaker, clock, done, failed, writing) =
                (&breaker, &clock, &done, &failed, &writing);
            s.spawn(move || {
                // Counted out on drop, so that a writer that panics does not leave
                // the reader below waiting for ever.
                let _out = CountedOut(writing);
                let mut i = w;
                // The writers move time themselves, a millisecond a call: about a
                // thousand calls per bucket between them.
                while clock.elapsed() < END {
                    clock.advance(Duration::from_millis(1));
                    i += 1;
                    let fail = i.is_multiple_of(97);
                    let _ = breaker.call(|| if fail { Err(()) } else { Ok(()) });
                    if fail {
                        failed.fetch_add(1, Ordering::SeqCst);
                    }
                    done.fetch_add(1, Ordering::SeqCst);
                }
            });
        }
        let mut last = (0, 0);
        while writing.load(Ordering::SeqCst) > 0 {
            // SeqCst: a call counted in `done` before this load is in the window's
            // counts the sum below reads.
            let (before, failed_before) =
                (done.load(Ordering::SeqCst), failed.load(Ordering::SeqCst));
            let c = breaker.metrics().window;
            let after = done.load(Ordering::SeqCst);
            assert!(
                c.calls >= before,
                "a finished call is missing: {c:?}, {before} done"
            );
            assert!(c.failures >= failed_before, "a failure is missing: {c:?}");
            // Each writer may have one call counted but not yet in `done`.
            assert!(
                c.calls <= after + WRITERS,
                "counted twice: {c:?}, {after} done"
            );
            assert!(
                c.calls >= last.0 && c.failures >= last.1,
                "a sum went back: {c:?} after {last:?}"
            );
            last = (c.calls, c.failures);
            reads += 1;
        }
    });

    let c = breaker.metrics().window;
    assert_eq!(c.calls, done.load(Ordering::SeqCst));
    assert_eq!(c.failures, failed.load(Ordering::SeqCst));
    assert!(
        reads > 10,
        "the reader raced the writers only {reads} times"
    );
}

/// Takes one writer off the count when dropped, by a return or a panic.
struct CountedOut<'a>(&'a AtomicU64);

impl Drop for CountedOut<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}
