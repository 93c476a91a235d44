//! The owners' summaries under real concurrency: a window of four buckets slides
//! over thousands of epochs while two writers that own their stripes rotate into
//! each one (rewriting their summaries, a step on or anew) and a reader sums the
//! window between and during their calls. Time moves only between rounds, so each
//! call's epoch is known: every sum must count every call finished in the window
//! before it started, none twice, and never fewer than the sum before it in the
//! round; after each round, exactly the window's calls.
//!
//! One test in its own binary, so that no other test's threads hold the process's
//! slots: the two writers are sure to own their stripes (every machine has at least
//! two owned stripes), which is the path that keeps a summary.

mod common;

use common::on_manual_clock;
use cutout::CircuitBreaker;
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

const WRITERS: u64 = 2;
const BUCKETS: u64 = 4;
const BUCKET: Duration = Duration::from_millis(10);
const ROUNDS: u64 = 3_000;
const CALLS: u64 = 100;

/// Calls and failures finished in one epoch.
#[derive(Default)]
struct Done {
    calls: AtomicU64,
    failures: AtomicU64,
}

#[test]
fn summaries_are_exact_while_owners_rotate_and_the_window_slides() {
    let (breaker, clock) = on_manual_clock(
        CircuitBreaker::builder()
            .window(BUCKET * BUCKETS as u32, BUCKETS as u32)
            // Never trips: fewer calls than the minimum.
            .failure_rate(1.0, u32::MAX),
    );
    // The epoch of each round: mostly one bucket on, sometimes a gap shorter than
    // the window (a step of several epochs), sometimes longer (summed anew).
    let epochs: Vec<u64> = (0..ROUNDS)
        .scan(0, |epoch, round| {
            *epoch += match round % 50 {
                0 => 0,
                7 | 23 => 3,
                41 => BUCKETS + 2,
                _ => 1,
            };
            Some(*epoch)
        })
        .collect();
    let last = *epochs.last().unwrap();
    let done: Vec<Done> = (0..=last).map(|_| Done::default()).collect();
    // The writers wait at the start of each round (the reader has moved the clock
    // on) and at its end (so the reader can check the round's exact sum).
    let start = Barrier::new(WRITERS as usize + 1);
    let end = Barrier::new(WRITERS as usize + 1);
    let writing = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    // The reader's sums so far, for the writers to wait on (see below).
    let read = AtomicU64::new(0);
    let mut reads = 0u64;

    std::thread::scope(|s| {
        for w in 0..WRITERS {
            let (breaker, done, epochs, start, end, writing, stop, read) = (
                &breaker, &done, &epochs, &start, &end, &writing, &stop, &read,
            );
            s.spawn(move || {
                for &epoch in epochs {
                    start.wait();
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    // A round's calls take about a microsecond: the reader, on a
                    // 2-vCPU machine, could miss most rounds (it did, in some runs
                    // on a Zen 1, 400 sums in 3,000 rounds). So each writer starts
                    // its calls, the first of which rotates, only once the reader
                    // has made a sum in this round and so is summing in its loop,
                    // yielding meanwhile; bounded, so a reader that stopped cannot
                    // hold a writer.
                    let seen = read.load(Ordering::SeqCst);
                    for _ in 0..1_000_000 {
                        if read.load(Ordering::SeqCst) != seen {
                            break;
                        }
                        std::thread::yield_now();
                    }
                    for i in 0..CALLS {
                        let fail = (i + w) % 7 == 0;
                        let _ = breaker.call(|| if fail { Err(()) } else { Ok(()) });
                        let d = &done[epoch as usize];
                        if fail {
                            d.failures.fetch_add(1, Ordering::SeqCst);
                        }
                        d.calls.fetch_add(1, Ordering::SeqCst);
                    }
                    writing.fetch_sub(1, Ordering::SeqCst);
                    end.wait();
                }
            });
        }
        // Calls and failures finished in the window that ends at `epoch`.
        let in_window = |epoch: u64| {
            let first = epoch.saturating_sub(BUCKETS - 1);
            done[first as usize..=epoch as usize]
                .iter()
                .fold((0, 0), |(c, f), d| {
                    (
                        c + d.calls.load(Ordering::SeqCst),
                        f + d.failures.load(Ordering::SeqCst),
                    )
                })
        };
        // A panic here would leave the writers waiting at a barrier: stop them
        // first, through the round's end (if in a round) and the next start.
        let check = |ok: bool, in_round: bool, what: String| {
            if !ok {
                stop.store(true, Ordering::SeqCst);
                if in_round {
                    end.wait();
                }
                start.wait();
                panic!("{what}");
            }
        };
        let mut now = 0;
        for &epoch in &epochs {
            clock.advance(BUCKET * (epoch - now) as u32);
            now = epoch;
            writing.store(WRITERS, Ordering::SeqCst);
            start.wait();
            let mut prev = (0, 0);
            while writing.load(Ordering::SeqCst) > 0 {
                // SeqCst: a call counted in `done` before this load is in the
                // window's counts the sum below reads.
                let before = in_window(epoch);
                let c = breaker.metrics().window;
                let after = in_window(epoch);
                check(
                    c.calls >= before.0 && c.failures >= before.1,
                    true,
                    format!("epoch {epoch}: a finished call is missing: {c:?}, {before:?} done"),
                );
                // Each writer may have one call counted but not yet in `done`.
                check(
                    c.calls <= after.0 + WRITERS && c.failures <= after.1 + WRITERS,
                    true,
                    format!("epoch {epoch}: counted twice: {c:?}, {after:?} done"),
                );
                check(
                    c.calls >= prev.0 && c.failures >= prev.1,
                    true,
                    format!("epoch {epoch}: a sum went back: {c:?} after {prev:?}"),
                );
                prev = (c.calls, c.failures);
                reads += 1;
                read.store(reads, Ordering::SeqCst);
            }
            end.wait();
            let c = breaker.metrics().window;
            let want = in_window(epoch);
            check(
                (c.calls, c.failures) == want,
                false,
                format!("epoch {epoch}, the round over: {c:?}, {want:?} done"),
            );
        }
    });
    assert!(
        reads > ROUNDS,
        "the reader raced the writers only {reads} times"
    );
}
