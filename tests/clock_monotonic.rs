//! `DefaultClock::now()` and `now_if_cheap()` never go back, for a thread or for a
//! thread a reading was handed to, from the process's first reading on (`Clock::now`
//! must never decrease). The first readings once could, by a few hundred
//! nanoseconds: a racing thread's precise reading was returned unpublished, and the
//! refresh thread's first (earlier) reading was cached after it.
//!
//! - `first_start_race_in_fresh_processes`: each child process (this test binary,
//!   re-run with `REVIEW_CLOCK_CHILD=1`) has a fresh first start of the refresh
//!   thread; several threads race their first reading and check that no later
//!   reading of theirs (or of a thread that happens-after them) is smaller.
//! - `first_start_race_after_fork` (Linux): the same race in `fork()`ed
//!   grandchildren, where the atfork handler cleared the cached reading.
//! - `steady_state_and_revive`: many threads read, hand readings on, and call
//!   `revive` in a loop.
//!
//! Every wait is bounded; children are bounded in count and time.

mod common;

use cutout::{Clock, DefaultClock};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

const CHILD_ENV: &str = "REVIEW_CLOCK_CHILD";

/// `threads` threads start together and each take `reads` readings, the first of
/// which may be the process's first. Checks, per thread, that `now` /
/// `now_if_cheap` never go below an earlier reading of that thread ("own") or
/// below the largest reading another thread published (Release) before this one's
/// Acquire ("handed"). Each reading is classed as `cache` (`now_if_cheap` gave it)
/// or `precise` (`now_if_cheap` gave `None`, so `now` took its cold path).
fn race(threads: usize, reads: usize) -> Result<(), String> {
    let barrier = Arc::new(Barrier::new(threads));
    let handed = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..threads)
        .map(|i| {
            let (barrier, handed) = (barrier.clone(), handed.clone());
            std::thread::spawn(move || -> Result<(), String> {
                barrier.wait();
                // Every thread asks for the clock at once: one starts the refresh
                // thread, the others read while the cached reading is still 0.
                let clock = DefaultClock::new();
                let mut last = clock.now(); // the first reading: cold path
                let mut last_kind = "precise";
                handed.fetch_max(last, Ordering::AcqRel);
                for k in 0..reads {
                    let floor = handed.load(Ordering::Acquire);
                    let (n, kind) = match clock.now_if_cheap() {
                        Some(n) => (n, "cache"),
                        None => (clock.now(), "precise"),
                    };
                    if n < last {
                        return Err(format!(
                            "OWN {last_kind}->{kind}: thread {i} read {k}: {n} < its own \
                             earlier {last}: back by {} ns",
                            last - n
                        ));
                    }
                    if n < floor {
                        return Err(format!(
                            "HANDED ->{kind}: thread {i} read {k}: {n} < handed {floor} \
                             (own last {last_kind} {last}): back by {} ns",
                            floor - n
                        ));
                    }
                    last = n;
                    last_kind = kind;
                    handed.fetch_max(n, Ordering::AcqRel);
                }
                Ok(())
            })
        })
        .collect();
    let mut result = Ok(());
    for h in handles {
        let r = h
            .join()
            .map_err(|_| "thread panicked".to_string())
            .and_then(|r| r);
        if result.is_ok() {
            result = r;
        }
    }
    result
}

/// The child's side: run the race once in this fresh process (nothing has read
/// the default clock yet) and fail with the message if it went back.
#[test]
fn child_first_start() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return; // only meaningful as a child of the test below
    }
    if let Err(e) = race(6, 400) {
        println!("DECREASE: {e}");
        std::process::exit(3);
    }
    println!("CHILD OK");
}

#[test]
fn first_start_race_in_fresh_processes() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let deadline = Instant::now() + Duration::from_secs(4);
    let (mut runs, mut failures) = (0u32, 0u32);
    let mut cats = std::collections::BTreeMap::new();
    let mut examples: Vec<String> = Vec::new();
    while runs < 400 && Instant::now() < deadline {
        // Bounded wait: a child past 5 s is killed.
        let child = common::run_child("child_first_start", &[], CHILD_ENV, Duration::from_secs(5));
        runs += 1;
        let (status, out) = (child.status, child.stdout);
        match status {
            Some(s) if s.success() => assert!(out.contains("CHILD OK"), "{out}"),
            Some(s) if s.code() == Some(3) => {
                failures += 1;
                let line = out
                    .lines()
                    .find(|l| l.contains("DECREASE"))
                    .unwrap_or("?")
                    .to_string();
                let cat: String = line
                    .split("DECREASE: ")
                    .nth(1)
                    .unwrap_or("?")
                    .split(':')
                    .next()
                    .unwrap()
                    .into();
                *cats.entry(cat).or_insert(0u32) += 1;
                if !examples.iter().any(|e: &String| {
                    e.contains(
                        line.split("DECREASE: ")
                            .nth(1)
                            .unwrap_or("?")
                            .split(':')
                            .next()
                            .unwrap(),
                    )
                }) {
                    examples.push(line);
                }
            }
            other => panic!("child ended badly: {other:?}\n{out}"),
        }
    }
    println!("fresh processes: {runs} runs, {failures} with a decrease: {cats:?}");
    for e in &examples {
        println!("  e.g. {e}");
    }
    assert_eq!(failures, 0, "{cats:?}");
}

/// Linux: a child process (this binary re-run) starts the clock, then forks
/// grandchildren, each of which races its threads' first readings after the
/// atfork handler cleared the cached reading.
#[cfg(target_os = "linux")]
#[test]
fn child_fork_restart() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let clock = DefaultClock::new();
    let before = clock.now();
    let deadline = Instant::now() + Duration::from_secs(4);
    let (mut runs, mut failures) = (0u32, 0u32);
    while runs < 300 && Instant::now() < deadline {
        // SAFETY: the grandchild uses the clock, std threads, stdout, then `_exit`.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            let code = match race(6, 400) {
                Ok(()) if DefaultClock::new().now() >= before => 0,
                Ok(()) => {
                    println!("DECREASE: grandchild read below the parent's {before}");
                    3
                }
                Err(e) => {
                    println!("DECREASE after fork: {e}");
                    3
                }
            };
            use std::io::Write;
            let _ = std::io::stdout().flush();
            unsafe { libc::_exit(code) };
        }
        let Some(code) = common::wait_child(pid, Instant::now() + Duration::from_secs(3)) else {
            println!("grandchild killed");
            std::process::exit(4);
        };
        runs += 1;
        if code != 0 {
            failures += 1;
        }
    }
    println!("FORK RUNS {runs} FAILURES {failures}");
    std::process::exit(if failures == 0 { 0 } else { 3 });
}

#[cfg(target_os = "linux")]
#[test]
fn first_start_race_after_fork() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let child = common::run_child("child_fork_restart", &[], CHILD_ENV, Duration::from_secs(9));
    let (status, out) = (child.status, child.stdout);
    let summary: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("FORK RUNS") || l.contains("DECREASE") || l.contains("killed"))
        .take(4)
        .collect();
    println!("after fork: {summary:?}");
    assert!(
        matches!(status, Some(s) if s.success()),
        "{status:?}: {summary:?}"
    );
}

/// Steady state, with `revive` called all along: readings handed between threads
/// never go back.
#[test]
fn steady_state_and_revive() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let handed = Arc::new(AtomicU64::new(0));
    let stop = Instant::now() + Duration::from_secs(1);
    let handles: Vec<_> = (0..4)
        .map(|i| {
            let handed = handed.clone();
            std::thread::spawn(move || {
                let clock = DefaultClock::new();
                // Steady state: wait (boundedly) until the cached reading is up.
                let up = Instant::now() + Duration::from_secs(2);
                while clock.now_if_cheap().is_none() && Instant::now() < up {
                    std::thread::yield_now();
                }
                let mut last = clock.now_if_cheap().expect("cached reading up within 2 s");
                let mut k = 0u64;
                while Instant::now() < stop {
                    for _ in 0..1000 {
                        k += 1;
                        if k.is_multiple_of(64) {
                            clock.revive();
                        }
                        let floor = handed.load(Ordering::Acquire).max(last);
                        let n = if k.is_multiple_of(2) {
                            clock.now()
                        } else {
                            clock.now_if_cheap().unwrap()
                        };
                        assert!(n >= floor, "thread {i}: {n} < {floor}");
                        last = n;
                        handed.fetch_max(n, Ordering::AcqRel);
                    }
                }
                k
            })
        })
        .collect();
    let total: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    println!("steady state: {total} readings");
}
