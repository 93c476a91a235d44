//! Thread slots and stripes (`src/slot.rs`, `src/stripe.rs`) as threads come and
//! go: a slot handed to a new thread while its old one still calls from a
//! thread-local destructor, a slot taken in a destructor, a slot taken over in the
//! middle of a window bucket, a forked child's slots, a stripe found by a second
//! thread the moment it is allocated, the memory all of it holds, and readers and
//! failures racing a shared stripe's rotation.
//!
//! Every test takes `serial()` first: the slot pool is process-wide, and several
//! tests count stripes through `heap_bytes`. The process gives every breaker room
//! for 2 owned stripes (`simulate_owned_stripes`), so a few threads reach the
//! shared ones.

mod common;

use common::{on_manual_clock, rate_window};
use cutout::{CircuitBreaker, ManualClock, State};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Barrier, Mutex, MutexGuard};
use std::time::{Duration, Instant};

const SEC: Duration = Duration::from_secs(1);

/// Serializes the tests of this binary and fixes the owned stripes at 2.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    let guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let _ = cutout::simulate_owned_stripes(2);
    assert_eq!(cutout::owned_stripes_per_breaker(), 2);
    guard
}

/// A breaker without a window (a stripe is one 128-byte line) that never trips.
fn plain() -> CircuitBreaker<ManualClock> {
    CircuitBreaker::builder()
        .consecutive_failures(u32::MAX / 2)
        .clock(ManualClock::new())
        .build()
        .unwrap()
}

/// How many distinct stripes `n` threads alive at once write to a fresh breaker,
/// each calling it once: 2 owned ones and up to 4 shared ones when the process's
/// free slots are the lowest ones (what it should be between tests).
fn stripes_of_concurrent_threads(n: usize) -> usize {
    let b = plain();
    let room = b.heap_bytes();
    let all_in = std::sync::Barrier::new(n);
    let counted = std::sync::Barrier::new(n);
    let bytes = slotted(n, |_| {
        b.call(|| Ok::<_, ()>(())).unwrap();
        let bytes = all_in.wait().is_leader().then(|| b.heap_bytes() - room);
        counted.wait();
        bytes
    });
    let bytes = bytes.into_iter().flatten().next().unwrap();
    assert_eq!(bytes % 128, 0);
    bytes / 128
}

/// What [`stripes_of_concurrent_threads`] gives when slots `0..n` are free.
fn expected_stripes(n: usize) -> usize {
    n.min(2) + n.saturating_sub(2).min(4)
}

/// A breaker used from a thread-local destructor that runs after the slot's guard
/// has given the slot back (std runs the destructors last registered first)
/// writes shared stripe 0 with atomic adds, while a new thread that took the slot
/// writes the owned stripe with plain stores: no count is lost on either side.
#[test]
fn a_thread_exiting_after_its_slot_went_to_a_new_thread_loses_no_count() {
    let _s = serial();
    const CALLS: u64 = 200_000;
    let b: &'static CircuitBreaker<ManualClock> = Box::leak(Box::new(plain()));
    let start = std::sync::Arc::new(std::sync::Barrier::new(2));

    struct Late(
        &'static CircuitBreaker<ManualClock>,
        std::sync::Arc<std::sync::Barrier>,
    );
    impl Drop for Late {
        fn drop(&mut self) {
            self.1.wait();
            for i in 0..CALLS {
                let _ = self.0.call(|| if i % 3 == 0 { Err(()) } else { Ok(()) });
            }
        }
    }
    thread_local! {
        static LATE: std::cell::RefCell<Option<Late>> = const { std::cell::RefCell::new(None) };
    }

    let exiting = {
        let start = start.clone();
        std::thread::spawn(move || {
            // Registered before the slot's guard, so destroyed after it.
            LATE.with(|l| *l.borrow_mut() = Some(Late(b, start)));
            b.call(|| Ok::<_, ()>(())).unwrap();
        })
    };
    // The slot the exiting thread gave back goes to this one (the lowest free).
    let newcomer = std::thread::spawn(move || {
        start.wait();
        for i in 0..CALLS {
            let _ = b.call(|| if i % 3 == 0 { Err(()) } else { Ok(()) });
        }
    });
    exiting.join().unwrap();
    newcomer.join().unwrap();
    // Two stripes: the owned one (both threads' slot in turn) and shared stripe 0.
    assert_eq!(b.heap_bytes() - plain().heap_bytes(), 2 * 128);
    let l = b.metrics().lifetime;
    assert_eq!(l.admitted, 2 * CALLS + 1, "{l:?}");
    assert_eq!(l.failures, 2 * CALLS.div_ceil(3), "{l:?}");
    assert_eq!(l.successes, 2 * (CALLS - CALLS.div_ceil(3)) + 1, "{l:?}");
}

/// A thread whose first call to any breaker is made from a thread-local
/// destructor takes a slot then, and still gives it back when it exits (the guard
/// registered during destruction runs too): after a thousand such threads the
/// owned stripes still go to new threads.
#[test]
fn a_slot_taken_in_a_thread_local_destructor_comes_back() {
    let _s = serial();
    let b: &'static CircuitBreaker<ManualClock> = Box::leak(Box::new(plain()));
    struct Use(&'static CircuitBreaker<ManualClock>);
    impl Drop for Use {
        fn drop(&mut self) {
            self.0.call(|| Ok::<_, ()>(())).unwrap();
        }
    }
    thread_local! {
        static USE: std::cell::RefCell<Option<Use>> = const { std::cell::RefCell::new(None) };
    }
    for _ in 0..1000 {
        std::thread::spawn(move || USE.with(|u| *u.borrow_mut() = Some(Use(b))))
            .join()
            .unwrap();
    }
    assert_eq!(b.metrics().lifetime.successes, 1000);
    assert_eq!(stripes_of_concurrent_threads(7), expected_stripes(7));
}

/// Set in the child process that runs the fork test's body.
const FORK_CHILD: &str = "CUTOUT_SLOTS_FORK";

/// A forked child keeps the slots of the parent's threads that did not come along
/// taken (those threads may have stopped in the middle of a call, their stripes
/// half written: `src/slot.rs`, Fork): seven threads of the child write the four
/// shared stripes, correctly, while the parent, its crowd gone, gives the owned
/// stripes to new threads again.
#[cfg(target_os = "linux")]
#[test]
fn in_a_forked_child_the_parents_other_threads_slots_stay_taken() {
    let _s = serial();
    if std::env::var_os(FORK_CHILD).is_none() {
        // The body in a process of its own, where no other test's thread runs.
        let child = common::run_child(
            "in_a_forked_child_the_parents_other_threads_slots_stay_taken",
            &[],
            FORK_CHILD,
            Duration::from_secs(30),
        );
        assert!(
            child.status.is_some_and(|s| s.success()),
            "{}\n{}",
            child.stdout,
            child.stderr
        );
        return;
    }
    // Two threads of the parent hold the two owned slots when it forks.
    let b: &'static CircuitBreaker<ManualClock> = Box::leak(Box::new(plain()));
    let (go, wait) = std::sync::mpsc::channel::<()>();
    let wait = std::sync::Arc::new(Mutex::new(wait));
    let (ready, called) = std::sync::mpsc::channel();
    let crowd: Vec<_> = (0..2)
        .map(|_| {
            let (wait, ready) = (wait.clone(), ready.clone());
            std::thread::spawn(move || {
                b.call(|| Ok::<_, ()>(())).unwrap();
                ready.send(()).unwrap();
                let _ = wait.lock().unwrap().recv();
            })
        })
        .collect();
    called.recv().unwrap();
    called.recv().unwrap();

    // SAFETY: the other threads of this process wait on a channel or in the test
    // harness; the child uses the breaker and std's threads, and leaves with
    // `_exit`.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        // The crowd does not exist here, but its slots stay taken: seven new threads
        // take the slots after them, all beyond the owned stripes.
        let got = std::panic::catch_unwind(|| stripes_of_concurrent_threads(7)).unwrap_or(0);
        eprintln!("forked child: 7 threads wrote {got} stripes");
        // SAFETY: ends the forked child without running the parent's handlers.
        unsafe { libc::_exit(got as i32) };
    }
    let mut status = 0;
    // SAFETY: waits for our own child (it exits on its own within milliseconds).
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status));
    let in_child = libc::WEXITSTATUS(status) as usize;

    for _ in 0..2 {
        go.send(()).unwrap();
    }
    for t in crowd {
        t.join().unwrap();
    }
    let in_parent = stripes_of_concurrent_threads(7);
    assert_eq!(in_parent, expected_stripes(7), "the parent, the crowd gone");
    assert_eq!(in_child, 4, "the forked child: the four shared stripes");
}

/// Bytes the process holds on the heap (allocated less freed), by every thread.
static HELD: std::sync::atomic::AtomicIsize = std::sync::atomic::AtomicIsize::new(0);

struct Counting;

// SAFETY: every method forwards to `System` unchanged and counts with an atomic add.
unsafe impl std::alloc::GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        HELD.fetch_add(layout.size() as isize, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: the caller upholds `alloc`'s contract.
        unsafe { std::alloc::System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        HELD.fetch_add(layout.size() as isize, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: the caller upholds `alloc_zeroed`'s contract.
        unsafe { std::alloc::System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        HELD.fetch_sub(layout.size() as isize, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: the caller upholds `dealloc`'s contract.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new: usize) -> *mut u8 {
        HELD.fetch_add(
            new as isize - layout.size() as isize,
            std::sync::atomic::Ordering::Relaxed,
        );
        // SAFETY: the caller upholds `realloc`'s contract.
        unsafe { std::alloc::System.realloc(ptr, layout, new) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn held() -> isize {
    HELD.load(std::sync::atomic::Ordering::SeqCst)
}

/// `heap_bytes` is exactly what the breaker frees when dropped, after threads
/// come and go (owners, sharers, threads that took an exited one's slot, a thread
/// racing others to allocate the same shared stripe), and it stays within the
/// room's stripes however many threads come and go.
#[test]
fn heap_bytes_is_what_the_breaker_frees_after_threads_come_and_go() {
    let _s = serial();
    // Held here too, so that dropping the breaker does not free the clock's `Arc`.
    let clock = ManualClock::new();
    let b = windowed(&clock);
    let stripe = {
        let room = b.heap_bytes();
        slotted(1, |_| b.call(|| Ok::<_, ()>(())).unwrap());
        b.heap_bytes() - room
    };
    for round in 0..50 {
        slotted(1 + round % 9, |_| {
            for i in 0..100 {
                let _ = b.call(|| if i % 7 == 0 { Err(()) } else { Ok(()) });
            }
        });
    }
    let heap = b.heap_bytes();
    let room = windowed(&clock).heap_bytes();
    assert!(heap <= room + 6 * stripe, "{heap}");
    let before = held();
    drop(b);
    let freed = before - held();
    assert_eq!(freed as usize, heap, "heap_bytes {heap}, freed {freed}");
}

/// A breaker with a 10-bucket window that never trips.
fn windowed(clock: &ManualClock) -> CircuitBreaker<ManualClock> {
    rate_window(Duration::from_secs(10), 10, 1.0, 1_000_000)
        .clock(clock.clone())
        .build()
        .unwrap()
}

/// Threads that each take a slot in turn (the lowest free one, in spawn order:
/// thread `i` takes slot `i` when slots `0..n` are free), then run `f(i)`
/// together; every thread keeps its slot until all have returned from `f` (so
/// none trades its slot for one another has freed). Returns their results in
/// order, once every one of them has given its slot back. (`std::thread::scope` returns
/// when the threads' closures have, before their thread-locals are destroyed: a
/// slot is given back a moment later, and the next test's threads could find it
/// taken.)
fn slotted<T: Send>(n: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    /// Says so when its thread's locals are destroyed: registered before the
    /// thread's slot guard, it is destroyed after it.
    struct Exited(std::sync::mpsc::Sender<()>);
    impl Drop for Exited {
        fn drop(&mut self) {
            let _ = self.0.send(());
        }
    }
    thread_local! {
        static EXITED: std::cell::RefCell<Option<Exited>> = const { std::cell::RefCell::new(None) };
    }
    let warm = plain();
    let go = std::sync::Barrier::new(n);
    let done = std::sync::Barrier::new(n);
    let (exited, all_exited) = std::sync::mpsc::channel();
    let results = std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|i| {
                let (ready, called) = std::sync::mpsc::channel();
                let (warm, go, done, f, exited) = (&warm, &go, &done, &f, exited.clone());
                let h = s.spawn(move || {
                    EXITED.with(|e| *e.borrow_mut() = Some(Exited(exited)));
                    warm.call(|| Ok::<_, ()>(())).unwrap();
                    ready.send(()).unwrap();
                    go.wait();
                    let result = f(i);
                    done.wait();
                    result
                });
                called.recv().unwrap();
                h
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for _ in 0..n {
        all_exited
            .recv_timeout(Duration::from_secs(10))
            .expect("a thread's locals destroyed");
    }
    results
}

/// A stripe is marked as existing before it is published (`Stripes::allocate`):
/// a second thread of a shared stripe that finds it the moment it is allocated,
/// and counts a failure in it, reads it in that failure's trip check. Marked
/// after (as it once was), the check could miss the failure: a failure rate of 1
/// in at most 2 calls, over a threshold of 0.5 with a minimum of 1 call, left the
/// breaker Closed within a few seconds of rounds. A race: release builds only
/// (CI's stress step), bounded at 10 s.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "a race: shows in release builds (--release)"
)]
fn a_failure_on_a_shared_stripe_another_thread_just_allocated_is_seen_by_its_own_trip_check() {
    let _s = serial();
    const PAIRS: usize = 4;
    const BREAKERS: usize = 20_000;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut rounds = 0;
    while std::time::Instant::now() < deadline {
        rounds += 1;
        let clock = ManualClock::new();
        let lists: Vec<Vec<CircuitBreaker<ManualClock>>> = (0..PAIRS)
            .map(|_| {
                (0..BREAKERS)
                    .map(|_| {
                        rate_window(Duration::from_secs(60), 1, 0.5, 1)
                            .clock(clock.clone())
                            .build()
                            .unwrap()
                    })
                    .collect()
            })
            .collect();
        // Two threads hold the owned slots 0 and 1; then threads 2..2+2*PAIRS
        // take slots 2.., and thread `2 + p` shares its stripe with `2 + p + 4`
        // (slot % 4): one pair a list, one thread of it succeeding, one failing.
        assert_eq!(PAIRS, 4);
        slotted(2 + 2 * PAIRS, |i| {
            if i < 2 {
                return;
            }
            let p = (i - 2) % PAIRS;
            let fail = i - 2 >= PAIRS;
            for b in &lists[p] {
                let _ = b.call(|| if fail { Err(()) } else { Ok(()) });
            }
        });
        for list in &lists {
            for b in list {
                let m = b.metrics();
                assert_eq!(m.lifetime.failures, 1);
                assert_eq!(
                    b.state(),
                    State::Open,
                    "round {rounds}: a failure (1 of at most 2 calls, threshold 0.5, \
                     minimum 1) did not trip: {m:?}"
                );
            }
        }
    }
    eprintln!(
        "{rounds} rounds of {} breakers, every one tripped",
        PAIRS * BREAKERS
    );
}

/// Nothing grows with use as threads come and go and breakers are built, used by
/// several threads (owners and sharers), and dropped while those threads' slots
/// live on: the process holds the same heap bytes after 300 rounds as after the
/// first, and one thread's stripes of many breakers go with the breakers.
#[test]
fn thread_and_breaker_churn_holds_no_memory() {
    let _s = serial();
    let clock = ManualClock::new();
    let round = || {
        let breakers: Vec<_> = (0..3)
            .map(|_| {
                rate_window(Duration::from_secs(10), 10, 0.9, 100)
                    .ramp_up(Duration::from_secs(1))
                    .clock(clock.clone())
                    .build()
                    .unwrap()
            })
            .collect();
        slotted(7, |_| {
            for b in &breakers {
                for i in 0..20 {
                    let _ = b.call(|| if i % 5 == 0 { Err(()) } else { Ok(()) });
                }
            }
        });
        // One thread, many breakers, each dropped as the thread goes on.
        slotted(1, |_| {
            for _ in 0..50 {
                let b = plain();
                let _ = b.call(|| Ok::<_, ()>(()));
            }
        });
    };
    round();
    let before = held();
    for _ in 0..300 {
        round();
    }
    let grown = held() - before;
    assert!(grown.abs() < 4096, "the process holds {grown} bytes more");
}

/// A thread that takes over an exited thread's slot takes over its stripe's live
/// window bucket and summary as they are: the window counts each of the two
/// threads' calls once, in the live bucket and after rotations, and the rate
/// policy trips at exactly its threshold across the handover.
#[test]
fn a_slot_taken_over_mid_bucket_counts_both_threads_calls_once() {
    let _s = serial();
    let (b, clock) = on_manual_clock(rate_window(Duration::from_secs(10), 5, 0.5, 40));
    let run = |calls: u64, fails: u64| {
        slotted(1, |_| {
            for i in 0..calls {
                let _ = b.call(|| if i < fails { Err(()) } else { Ok(()) });
            }
        });
    };
    // Each thread in turn takes slot 0 (the lowest free one) and its stripe.
    run(10, 2);
    let stripe_bytes = b.heap_bytes();
    run(10, 2);
    assert_eq!(
        b.heap_bytes(),
        stripe_bytes,
        "one stripe: the slot was taken over"
    );
    assert_eq!(b.metrics().window.calls, 20);
    clock.advance(Duration::from_secs(2)); // the next bucket
    run(9, 9);
    clock.advance(Duration::from_secs(2));
    run(1, 0);
    let w = b.metrics().window;
    assert_eq!((w.calls, w.failures), (30, 13));
    assert_eq!(b.state(), State::Closed);
    // 39 calls, 19 failures: below the minimum; the 40th call, a failure, makes
    // 20 of 40: the rate reached.
    run(9, 6);
    assert_eq!(b.state(), State::Closed, "{:?}", b.metrics().window);
    run(1, 1);
    assert_eq!(b.state(), State::Open, "{:?}", b.metrics().window);
}

/// A reader racing a shared stripe's rotation into a newer epoch of the same phase
/// never counts the older epoch's bucket: the rotation empties the counts before
/// its tag's CAS as well as after. It emptied them only after, and a reader in
/// between took the older bucket for the new epoch's (counts carry only the
/// generation): 50 calls in a one-bucket window that held 1, within a second or
/// so. Release builds only (CI's stress step), bounded at 5 s.
#[test]
#[cfg_attr(debug_assertions, ignore = "a race: release builds (--release)")]
fn a_reader_racing_a_shared_rotation_never_counts_the_previous_epochs_bucket() {
    let _s = serial();
    let clock = ManualClock::new();
    // One bucket of 1 s: a reader at epoch `e` counts only epoch `e`.
    let b = CircuitBreaker::builder()
        .window(SEC, 1)
        .failure_rate(1.0, u32::MAX) // never trips
        .clock(clock.clone())
        .build()
        .unwrap();
    const BIG: u64 = 50;
    let stop = AtomicBool::new(false);
    let worst = AtomicU64::new(0);
    let deadline = Instant::now() + Duration::from_secs(5);
    // Slots 0 and 1 own stripes; slot 2 shares stripe 2.
    slotted(3, |i| match i {
        0 => {
            // The reader: at an odd epoch the window holds at most the writer's
            // one call (and one racing call misattributed, at most).
            while !stop.load(Ordering::Relaxed) {
                let before = clock.elapsed().as_secs();
                let m = b.metrics();
                let after = clock.elapsed().as_secs();
                if before == after && before % 2 == 1 && m.window.calls > 2 {
                    worst.fetch_max(m.window.calls, Ordering::Relaxed);
                    stop.store(true, Ordering::Relaxed);
                }
            }
        }
        2 => {
            // The writer, on a shared stripe: `BIG` calls at each even epoch,
            // one at each odd one.
            while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                clock.advance(SEC);
                let _ = b.call(|| Ok::<_, ()>(()));
                clock.advance(SEC);
                for _ in 0..BIG {
                    let _ = b.call(|| Ok::<_, ()>(()));
                }
            }
            stop.store(true, Ordering::Relaxed);
        }
        _ => {}
    });
    let worst = worst.load(Ordering::Relaxed);
    assert!(
        worst == 0,
        "a read at an odd epoch (at most 1 call there) counted {worst} calls: \
         the previous epoch's bucket under the new tag"
    );
}

/// The same race through the failure budget: a failure's trip check racing the
/// rotation took the older epoch's 100 successes as current and granted the next
/// failures of its epoch a skip, and the breaker stayed Closed through 6 failures
/// against at most 1 success in its one-bucket window (rate 0.5, minimum 4: the
/// 4th failure must trip). Release builds only, bounded at 5 s.
#[test]
#[cfg_attr(debug_assertions, ignore = "a race: release builds (--release)")]
fn a_failure_racing_a_shared_rotation_is_not_granted_a_skip_by_the_previous_epochs_calls() {
    let _s = serial();
    const BREAKERS: usize = 5_000;
    const OLD: u64 = 100;
    const FAILURES: u64 = 6;
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut rounds = 0;
    let mut missed = Vec::new();
    while missed.is_empty() && Instant::now() < deadline {
        rounds += 1;
        let breakers: Vec<_> = (0..BREAKERS)
            .map(|_| {
                let (b, clock) = on_manual_clock(rate_window(SEC, 1, 0.5, 4));
                (clock, b)
            })
            .collect();
        // How far the failing thread has got (breaker index + 1).
        let reached = AtomicU64::new(0);
        let prepared = Barrier::new(2);
        // Slot 0: the failing thread (owns its stripe); slot 1 idle (owned);
        // slot 2: the writer on shared stripe 2.
        slotted(3, |i| match i {
            0 => {
                for (_, b) in &breakers {
                    b.call(|| Ok::<_, ()>(())).unwrap(); // its stripe exists
                }
                prepared.wait();
                for (j, (clock, b)) in breakers.iter().enumerate() {
                    clock.advance(SEC); // epoch 1
                    reached.store(j as u64 + 1, Ordering::Release);
                    for _ in 0..FAILURES {
                        let _ = b.call(|| Err::<(), _>(()));
                    }
                }
            }
            2 => {
                for (_, b) in &breakers {
                    for _ in 0..OLD {
                        b.call(|| Ok::<_, ()>(())).unwrap(); // epoch 0
                    }
                }
                prepared.wait();
                for (j, (_, b)) in breakers.iter().enumerate() {
                    // Rotates the shared bucket into epoch 1 as the failures begin.
                    let spin = Instant::now();
                    while reached.load(Ordering::Acquire) <= j as u64 {
                        if spin.elapsed() > Duration::from_secs(10) {
                            return;
                        }
                        std::hint::spin_loop();
                    }
                    let _ = b.call(|| Ok::<_, ()>(()));
                }
            }
            _ => {}
        });
        for (_, b) in &breakers {
            let m = b.metrics();
            if m.state == cutout::State::Closed {
                missed.push(m);
            }
        }
    }
    assert!(
        missed.is_empty(),
        "round {rounds}: {} breakers stayed Closed after {FAILURES} failures against \
         at most 1 success in their window (rate 0.5, minimum 4), e.g. {:?}",
        missed.len(),
        missed[0]
    );
}
