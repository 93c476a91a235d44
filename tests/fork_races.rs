//! Forks that race the process's other threads (src/fork.rs, src/clock.rs,
//! src/slot.rs): a child forked while another thread starts the default clock,
//! builds the first breaker, or takes and gives back slots; a fork from a
//! thread-local destructor; many forks, and a grandchild, while threads churn.
//! Every child's first reading and call return, and every count stays exact.
//! Linux only.
//!
//! Every test runs its body in a process of its own (this binary re-run through
//! `common::run_child`, bounded), so that no other test's thread exists when it
//! forks; every forked child is waited for with a deadline and killed past it.

#![cfg(target_os = "linux")]

mod common;

use common::wait_child;
use cutout::{CircuitBreaker, Clock, DefaultClock, ManualClock};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Set in the child process that runs a test's body.
const CHILD_ENV: &str = "CUTOUT_FORK_RACES_CHILD";

/// `true` in the process that runs the body; in the test harness's process, runs
/// `name` in a child process (at most `limit_s` seconds), asserts it passed, and
/// returns `false`.
fn in_own_process(name: &str, limit_s: u64) -> bool {
    in_fresh_processes(name, 1, limit_s)
}

/// As [`in_own_process`], `tries` times, each in a fresh process: for a race
/// with something a process does once (its first clock reading, its first
/// breaker).
fn in_fresh_processes(name: &str, tries: usize, limit_s: u64) -> bool {
    fresh_outputs(name, tries, limit_s).is_none()
}

/// [`in_fresh_processes`], with what each process printed: `None` in the
/// process that runs the body.
fn fresh_outputs(name: &str, tries: usize, limit_s: u64) -> Option<Vec<String>> {
    if std::env::var_os(CHILD_ENV).is_some() {
        return None;
    }
    let run = |_| {
        let child = common::run_child(name, &[], CHILD_ENV, Duration::from_secs(limit_s));
        assert!(
            child.status.is_some_and(|s| s.success()),
            "{name}: status {:?} (None: killed past {limit_s} s)\n--- stdout\n{}\n--- stderr\n{}",
            child.status,
            child.stdout,
            child.stderr
        );
        child.stdout
    };
    Some((0..tries).map(run).collect())
}

/// In each of 30 fresh processes running test `name` (`None` in the harness's
/// process, which asserts they passed, and that they forked at least 10
/// children in all: a process whose `first` ends before its first fork races
/// nothing, and many do): forks children back to back (up to 40), each running `child`,
/// while another thread runs `first` (a process's first use of something built
/// lazily), and returns how many of them did not exit with 0 within 3 s, and
/// how many forked.
fn forks_during(name: &str, first: fn(), child: fn() -> i32) -> Option<(usize, usize)> {
    if let Some(outputs) = fresh_outputs(name, 30, 20) {
        let forked: usize = (outputs.iter().flat_map(|out| out.lines()))
            .filter_map(|line| {
                line.split_once("children forked: ")?
                    .1
                    .parse::<usize>()
                    .ok()
            })
            .sum();
        assert!(forked >= 10, "{name}: {forked} children in 30 processes");
        return None;
    }
    let started = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicBool::new(false));
    let starter = {
        let (started, done) = (started.clone(), done.clone());
        std::thread::spawn(move || {
            started.store(true, Ordering::SeqCst);
            first();
            done.store(true, Ordering::SeqCst);
        })
    };
    while !started.load(Ordering::SeqCst) {
        std::hint::spin_loop();
    }
    let mut pids = Vec::new();
    while !done.load(Ordering::SeqCst) && pids.len() < 40 {
        pids.push(fork(child));
    }
    starter.join().unwrap();
    let deadline = Instant::now() + Duration::from_secs(3);
    let hung = pids
        .iter()
        .filter(|&&pid| wait_child(pid, deadline) != Some(0))
        .count();
    // On the line the harness starts with the test's name.
    println!("children forked: {}", pids.len());
    Some((hung, pids.len()))
}

/// Forks; the child runs `body` and `_exit`s with its code (101 on a panic).
/// Returns the child's pid.
fn fork(body: impl FnOnce() -> i32) -> libc::pid_t {
    // SAFETY: the children only use the crate, std's threads and sleeping, and
    // leave with `_exit`, running no destructor the parent owns.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).unwrap_or(101);
        // SAFETY: ends the child at once.
        unsafe { libc::_exit(code) };
    }
    pid
}

/// A breaker that never trips, on a manual clock: its lifetime successes count
/// every call.
fn plain() -> &'static CircuitBreaker<ManualClock> {
    Box::leak(Box::new(
        CircuitBreaker::builder()
            .consecutive_failures(u32::MAX / 2)
            .clock(ManualClock::new())
            .build()
            .unwrap(),
    ))
}

/// Two threads that, until `stop`, start threads that call `b` once and exit,
/// each taking and giving back a slot: the pool's lock is often held.
fn churn(b: &'static CircuitBreaker<ManualClock>, stop: &Arc<AtomicBool>) -> Vec<JoinHandle<()>> {
    (0..2)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::spawn(move || {
                        let _ = b.call(|| Ok::<_, ()>(()));
                    })
                    .join()
                    .unwrap();
                }
            })
        })
        .collect()
}

/// `threads` threads at once call `b` `calls` times each; whether its successes
/// went up by exactly that many (two live threads sharing an owned stripe, which
/// they update with plain stores, lose counts).
fn counts_exact(b: &'static CircuitBreaker<ManualClock>, threads: usize, calls: u64) -> bool {
    let before = b.metrics().lifetime.successes;
    let barrier = Arc::new(std::sync::Barrier::new(threads));
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                for _ in 0..calls {
                    let _ = b.call(|| Ok::<_, ()>(()));
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    b.metrics().lifetime.successes - before == threads as u64 * calls
}

/// A child forked while another thread takes the process's first default-clock
/// reading reads the clock, and calls, in the child. The fork's prepare handler
/// builds the clock's lazily built parts (quanta's calibration, the origin) first;
/// before, the child could inherit them half built by a thread it does not have,
/// and its first reading waited for ever (up to 30 fresh processes a run; failed
/// in every run).
#[test]
fn a_child_forked_while_the_clock_starts_can_read_the_clock() {
    let Some((hung, forked)) = forks_during(
        "a_child_forked_while_the_clock_starts_can_read_the_clock",
        || _ = DefaultClock::new(), // the process's first reading
        || {
            let _ = DefaultClock::new().now();
            0
        },
    ) else {
        return;
    };
    assert_eq!(
        hung, 0,
        "{hung} of {forked} children forked while the clock started never finished \
         their first clock reading"
    );
}

/// A thread that forks from a thread-local destructor, late in its exit, still
/// holds the slot pool's lock across the fork (the lock's guard is kept in a
/// thread-local without a destructor, which is never destroyed): the child never
/// inherits the lock held by a thread it does not have. Before, the guard's
/// thread-local was gone by then, the fork went ahead without the lock, and a
/// child forked while another thread held it waited for ever (13 runs of 14).
#[test]
fn a_fork_from_a_thread_local_destructor_leaves_the_pool_usable() {
    if !in_own_process(
        "a_fork_from_a_thread_local_destructor_leaves_the_pool_usable",
        40,
    ) {
        return;
    }
    assert!(cutout::simulate_owned_stripes(2));
    let b = plain();
    let stop = Arc::new(AtomicBool::new(false));
    // Two parked threads hold the two owned slots.
    let (park_tx, park_rx) = std::sync::mpsc::channel::<()>();
    let park_rx = Arc::new(std::sync::Mutex::new(park_rx));
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let holders: Vec<_> = (0..2)
        .map(|_| {
            let (park_rx, held_tx) = (park_rx.clone(), held_tx.clone());
            std::thread::spawn(move || {
                let _ = b.call(|| Ok::<_, ()>(()));
                held_tx.send(()).unwrap();
                let _ = park_rx.lock().unwrap().recv();
            })
        })
        .collect();
    held_rx.recv().unwrap();
    held_rx.recv().unwrap();
    let churn = churn(b, &stop);

    struct ForkOnDrop(&'static CircuitBreaker<ManualClock>);
    static HUNG: AtomicU64 = AtomicU64::new(0);
    static TRIED: AtomicU64 = AtomicU64::new(0);
    impl Drop for ForkOnDrop {
        fn drop(&mut self) {
            let b = self.0;
            TRIED.fetch_add(1, Ordering::Relaxed);
            let pid = fork(move || i32::from(b.call(|| Ok::<_, ()>(())).is_err()));
            if wait_child(pid, Instant::now() + Duration::from_secs(2)) != Some(0) {
                HUNG.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    thread_local! {
        static FORKER: std::cell::RefCell<Option<ForkOnDrop>> =
            const { std::cell::RefCell::new(None) };
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    while HUNG.load(Ordering::Relaxed) == 0 && Instant::now() < deadline {
        std::thread::spawn(move || {
            let _ = b.call(|| Ok::<_, ()>(())); // a slot beyond the owned stripes
            // Registered after the slot's guard, so destroyed before it (LIFO).
            FORKER.with(|f| *f.borrow_mut() = Some(ForkOnDrop(b)));
            // This thread's first fork registers `HELD_ACROSS_FORK`'s destructor,
            // which then runs before `FORKER`'s.
            let pid = fork(|| 0);
            assert_eq!(
                wait_child(pid, Instant::now() + Duration::from_secs(2)),
                Some(0)
            );
        })
        .join()
        .unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    drop(park_tx);
    for t in churn.into_iter().chain(holders) {
        t.join().unwrap();
    }
    println!(
        "{} forks from a destructor, {} children hung",
        TRIED.load(Ordering::Relaxed),
        HUNG.load(Ordering::Relaxed)
    );
    assert_eq!(
        HUNG.load(Ordering::Relaxed),
        0,
        "a child forked from a thread-local destructor hung"
    );
}

/// A child forked while another thread builds the process's first breaker
/// builds and calls breakers. The owned-stripe count is a word fixed by CAS; it
/// was a `OnceLock` whose initialiser (the environment, `available_parallelism`)
/// a child could inherit half run, and wait on for ever.
#[test]
fn a_child_forked_while_the_first_breaker_is_built_can_build_one() {
    let Some((hung, forked)) = forks_during(
        "a_child_forked_while_the_first_breaker_is_built_can_build_one",
        || _ = plain(), // the process's first breaker
        || i32::from(plain().call(|| Ok::<_, ()>(())).is_err()),
    ) else {
        return;
    };
    assert_eq!(
        hung, 0,
        "{hung} of {forked} children forked while the first breaker was built hung"
    );
}

/// Threads coming and going (taking, trading and giving back slots) and hot
/// threads counting while the process forks many times, and each child (and a
/// grandchild) running more threads than there are owned stripes: every count in
/// the children and in the parent stays exact (no owned stripe written by two
/// live threads, no slot given back twice), the children's refresh threads run,
/// and nothing hangs.
#[test]
fn slots_stay_exclusive_across_forks_during_churn() {
    if !in_own_process("slots_stay_exclusive_across_forks_during_churn", 60) {
        return;
    }
    let b = plain();
    let _ = DefaultClock::new();
    // The forking thread holds a slot, which it keeps in the children.
    let mine = plain();
    let _ = mine.call(|| Ok::<_, ()>(()));
    let stop = Arc::new(AtomicBool::new(false));
    let churn = churn(b, &stop);
    // Hot threads of the parent, with exact counts of their own.
    let hot = plain();
    let hot_calls = Arc::new(AtomicU64::new(0));
    let hot_threads: Vec<_> = (0..2)
        .map(|_| {
            let (stop, hot_calls) = (stop.clone(), hot_calls.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..1000 {
                        let _ = hot.call(|| Ok::<_, ()>(()));
                    }
                    hot_calls.fetch_add(1000, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let mut failures = Vec::new();
    for round in 0..8 {
        std::thread::sleep(Duration::from_millis(20));
        let pid = fork(move || {
            let fresh = plain();
            // The forking thread writes its own stripe while the child's threads,
            // on the slots the parent's threads left free, write theirs.
            let before = mine.metrics().lifetime.successes;
            let others: Vec<_> = (0..20)
                .map(|_| {
                    std::thread::spawn(move || {
                        for _ in 0..100_000 {
                            let _ = mine.call(|| Ok::<_, ()>(()));
                        }
                    })
                })
                .collect();
            for _ in 0..1_000_000 {
                let _ = mine.call(|| Ok::<_, ()>(()));
            }
            for t in others {
                t.join().unwrap();
            }
            if mine.metrics().lifetime.successes - before != 20 * 100_000 + 1_000_000 {
                eprintln!("child: lost counts on the forking thread's breaker");
                return 2;
            }
            if !counts_exact(fresh, 20, 20_000) {
                eprintln!("child: lost counts");
                return 1;
            }
            // A grandchild, forked while this child's threads take slots.
            let churning = std::thread::spawn(move || counts_exact(fresh, 4, 20_000));
            let pid = fork(move || i32::from(!counts_exact(plain(), 20, 20_000)) * 3);
            let grandchild = wait_child(pid, Instant::now() + Duration::from_secs(8));
            if !churning.join().unwrap() {
                return 4;
            }
            if grandchild != Some(0) {
                eprintln!("grandchild: {grandchild:?}");
                return 5;
            }
            // The clock moves in the child: 10 ms on, within 3 s (a loaded
            // machine may keep the refresh thread waiting for a while).
            let t0 = DefaultClock::new().now();
            let deadline = Instant::now() + Duration::from_secs(3);
            while DefaultClock::new().now() < t0 + 10_000_000 {
                if Instant::now() > deadline {
                    return 6;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            0
        });
        let code = wait_child(pid, Instant::now() + Duration::from_secs(12));
        if code != Some(0) {
            failures.push((round, code));
        }
    }
    stop.store(true, Ordering::Relaxed);
    for t in churn.into_iter().chain(hot_threads) {
        t.join().unwrap();
    }
    assert!(failures.is_empty(), "children failed: {failures:?}");
    assert_eq!(
        hot.metrics().lifetime.successes,
        hot_calls.load(Ordering::Relaxed),
        "the parent's counts"
    );
}

/// A registry key whose `Hash` stalls for half a second while `STALL` is set
/// (user code a registry runs while it evicts), and says so in `STALLED`.
#[derive(Clone, PartialEq, Eq, Debug)]
struct Slow(&'static str);

static STALL: AtomicBool = AtomicBool::new(false);
static STALLED: AtomicBool = AtomicBool::new(false);

impl std::hash::Hash for Slow {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        if STALL.load(Ordering::SeqCst) && matches!(self.0, "a" | "b") {
            STALLED.store(true, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(500));
        }
        self.0.hash(h);
    }
}

impl std::fmt::Display for Slow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// A child forked while another thread runs a registry's eviction scan at the key
/// cap still evicts: a new key there takes the place of an idle breaker that
/// behaves like new, as `max_keys` says, instead of the overflow breaker. The
/// scan gate carries the fork count it was shut under, so a scan a fork left
/// behind does not shut the child's gate; it stayed shut for ever, and every new
/// key in the child went to the overflow breaker.
#[test]
fn a_registry_forked_mid_scan_still_evicts_in_the_child() {
    if !in_own_process("a_registry_forked_mid_scan_still_evicts_in_the_child", 30) {
        return;
    }
    let clock = ManualClock::new();
    let registry: &'static cutout::Registry<Slow, ManualClock> = Box::leak(Box::new(
        cutout::Registry::builder(CircuitBreaker::builder().clock(clock.clone()))
            .max_keys(2)
            .idle_resolution(Duration::from_millis(1))
            .build()
            .unwrap(),
    ));
    registry.get(&Slow("a"));
    registry.get(&Slow("b"));
    clock.advance(Duration::from_secs(20)); // both idle, both like new
    STALL.store(true, Ordering::SeqCst);
    let scanner = std::thread::spawn(move || registry.get(&Slow("c")).name().to_string());
    let deadline = Instant::now() + Duration::from_secs(10);
    while !STALLED.load(Ordering::SeqCst) {
        assert!(Instant::now() < deadline, "the scan never reached a key");
        std::thread::sleep(Duration::from_millis(1));
    }
    let pid = fork(move || {
        STALL.store(false, Ordering::SeqCst);
        // The scanner is gone here; a new key at the cap scans again.
        i32::from(registry.get(&Slow("d")).name() != "d")
    });
    let code = wait_child(pid, Instant::now() + Duration::from_secs(10));
    assert_eq!(
        scanner.join().unwrap(),
        "c",
        "the parent's scan evicted for \"c\""
    );
    assert_eq!(
        code,
        Some(0),
        "in the child, the new key went to the overflow breaker (1), or the child hung (None)"
    );
}
