//! The default clock in a `fork()`ed child (contract line 19): the refresh thread
//! does not survive the fork, yet the child's breakers must see time move:
//! cooldowns end, slow calls are timed as slow (for a what-if candidate too), and
//! the window ages; in a child forked without the fork handlers too, which gets a
//! refresh thread of its own. And a trace recorder's writer thread, which stays
//! in the parent, leaves the child's calls dropped and its flush failing.
//!
//! A test binary of its own, with `harness = false`: the parent is single-threaded
//! apart from the clock's own refresh thread when it forks, so the child cannot
//! inherit a lock that some other test's thread held. Every wait is bounded: the
//! child exits on its own within seconds, and the parent kills it past a deadline.

mod common;

#[cfg(target_os = "linux")]
fn main() {
    linux::main();
}

#[cfg(not(target_os = "linux"))]
fn main() {
    println!("fork: skipped (Linux only)");
}

#[cfg(target_os = "linux")]
mod linux {
    use crate::common::{rate_window, trips_after, wait_child};
    use cutout::{CircuitBreaker, Clock, DefaultClock, State};
    use std::time::{Duration, Instant};

    /// Names of this process's threads.
    fn threads() -> Vec<String> {
        std::fs::read_dir("/proc/self/task")
            .map(|tasks| {
                tasks
                    .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
                    .map(|name| name.trim().to_string())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Whether a `cutout-clock` thread runs, waiting up to 5 s for a new thread to
    /// name itself.
    fn clock_thread_runs() -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if threads().iter().any(|t| t == "cutout-clock") {
                return true;
            }
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// `Ok` if `b` is open, else what `what` left it as: its state, slow calls and
    /// window.
    fn tripped(b: &CircuitBreaker, what: &str) -> Result<(), String> {
        let m = b.metrics();
        match m.state {
            State::Open => Ok(()),
            other => Err(format!(
                "{what} left it {other:?}, {} counted slow, {} calls in the window",
                m.lifetime.slow, m.window.calls
            )),
        }
    }

    /// `fork()` as the C library makes it, running the `pthread_atfork` handlers.
    fn fork() -> libc::pid_t {
        // SAFETY: the child keeps to what `in_child` says it may do.
        unsafe { libc::fork() }
    }

    /// A fork that runs no `pthread_atfork` handler, as `_Fork` (POSIX.1-2024) or
    /// a raw `clone` makes it: the child inherits the clock's state as the parent
    /// left it, its owner naming the parent.
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    fn fork_without_handlers() -> libc::pid_t {
        let none: libc::c_long = 0;
        // SAFETY: as `fork`'s; `clone` with only the exit signal, no new stack and
        // no shared parts is `fork` without the C library's handlers (the argument
        // order, after the flags, is these architectures').
        let pid = unsafe {
            libc::syscall(
                libc::SYS_clone,
                libc::c_long::from(libc::SIGCHLD),
                none,
                none,
                none,
                none,
            )
        };
        pid as libc::pid_t
    }

    /// Runs `child` in a child process forked by `fork` and returns its exit code;
    /// the child is killed if it has not exited within 20 s.
    fn in_child(fork: fn() -> libc::pid_t, child: impl FnOnce() -> Result<(), String>) -> i32 {
        // The parent has no thread but the clock's refresh thread, which holds no
        // lock the child needs (it sleeps and stores one atomic). The child only
        // uses the breaker, std's thread spawning, sleeping and the file system,
        // and leaves with `_exit`, running no destructor the parent owns.
        let pid = fork();
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let code = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(child)) {
                Ok(Ok(())) => 0,
                Ok(Err(why)) => {
                    eprintln!("fork child: {why}");
                    1
                }
                Err(_) => 2,
            };
            // SAFETY: ends the child at once, without running the parent's exit
            // handlers a second time.
            unsafe { libc::_exit(code) };
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        wait_child(pid, deadline).expect("the forked child hung")
    }

    pub(super) fn main() {
        let cooldown = Duration::from_millis(100);
        // Tripped in the child: its cooldown must end.
        let fresh = trips_after(1, cooldown).build().unwrap();
        // Open when the parent forks: the child inherits a deadline it must reach.
        let inherited = trips_after(1, cooldown).build().unwrap();
        assert!(clock_thread_runs(), "{:?}", threads());
        let parent = DefaultClock::new().now();

        // Child 1: a trip checks the clock, and the child gets a refresh thread of
        // its own.
        let code = in_child(fork, || {
            if threads().iter().any(|t| t == "cutout-clock") {
                return Err("a forked child has no refresh thread".into());
            }
            std::thread::sleep(Duration::from_millis(150)); // the cached reading goes stale
            let _ = fresh.call(|| Err::<(), _>("down"));
            if fresh.state() != State::Open {
                return Err(format!("not tripped: {:?}", fresh.state()));
            }
            if !clock_thread_runs() {
                return Err(format!("no refresh thread after a trip: {:?}", threads()));
            }
            let tripped = DefaultClock::new().now();
            if tripped < parent + 150_000_000 {
                return Err(format!("the reading did not move: {parent} then {tripped}"));
            }
            // A margin past the cooldown for a loaded machine: the cached reading
            // a refresh thread keeps may lag.
            std::thread::sleep(cooldown + Duration::from_millis(250));
            if fresh.call(|| Ok::<_, ()>(())).is_err() || fresh.state() != State::Closed {
                return Err("the child's own trip never reached its probe".into());
            }
            Ok(())
        });
        assert_eq!(code, 0, "child 1 failed (see its message above)");

        // Child 2: nothing trips; the breaker inherited Open is past its cooldown.
        // The fork handler cleared the cached reading, so the child's first call
        // reads the clock precisely and is the probe (without the handler, the
        // rejections' check every 256 counts in a stripe would admit it later).
        let _ = inherited.call(|| Err::<(), _>("down"));
        assert_eq!(inherited.state(), State::Open);
        let code = in_child(fork, || {
            std::thread::sleep(cooldown + Duration::from_millis(50));
            let admitted = (0..1000).position(|_| inherited.call(|| Ok::<_, ()>(())).is_ok());
            match admitted {
                Some(0) if inherited.state() == State::Closed => Ok(()),
                other => Err(format!(
                    "inherited Open: admitted at call {other:?}, {:?}",
                    inherited.state()
                )),
            }
        });
        assert_eq!(code, 0, "child 2 failed (see its message above)");

        // Child 3: a prefork worker whose dependency answers slowly but successfully.
        // A slow-call threshold of 100 ms or more is timed with the cheap reading,
        // which the child inherited frozen; the fork handler cleared it, so the
        // child's calls take the time they take. Real time is the subject: each call
        // sleeps 450 ms against a 200 ms threshold (a margin for a cached reading
        // that lags on a loaded machine).
        let slow_policy = || {
            CircuitBreaker::builder()
                .window(Duration::from_secs(10), 10)
                .slow_calls(Duration::from_millis(200), 0.5)
                .minimum_calls(3)
                .build()
                .unwrap()
        };
        let slow = || {
            std::thread::sleep(Duration::from_millis(450));
            Ok::<_, ()>(())
        };
        let worker = slow_policy();
        assert!(worker.call(|| Ok::<_, ()>(())).is_ok()); // this thread's stripe, before the fork
        // The control, in the parent: three slow successes trip it.
        let control = slow_policy();
        for _ in 0..3 {
            let _ = control.call(slow);
        }
        assert_eq!(control.state(), State::Open, "the control did not trip");
        let code = in_child(fork, || {
            for _ in 0..3 {
                let _ = worker.call(slow);
            }
            tripped(&worker, "three slow successes")
        });
        assert_eq!(code, 0, "child 3 failed (see its message above)");

        // Child 3b: the same slow successes through a live breaker that never
        // trips, with that policy as its what-if candidate: the candidate times
        // them from the live admissions, on the live breaker's clock, and trips.
        let live = CircuitBreaker::builder()
            .consecutive_failures(100)
            .candidate(
                "slow",
                CircuitBreaker::builder()
                    .window(Duration::from_secs(10), 10)
                    .slow_calls(Duration::from_millis(200), 0.5)
                    .minimum_calls(3),
            )
            .build()
            .unwrap();
        assert!(live.call(|| Ok::<_, ()>(())).is_ok()); // this thread's stripes, before the fork
        let code = in_child(fork, || {
            for _ in 0..3 {
                let _ = live.call(slow);
            }
            match &live.candidates()[..] {
                [c] if c.state == State::Open && live.state() == State::Closed => Ok(()),
                other => Err(format!("three slow successes left {other:?}")),
            }
        });
        assert_eq!(code, 0, "child 3b failed (see its message above)");

        // Child 4: the window ages in the child. After an idle gap longer than the
        // window, the successes before it have left, so ten failures are the whole
        // window and trip it. Real time is the subject: the child idles 1.2 s past a
        // 1 s window.
        let aging = rate_window(Duration::from_secs(1), 10, 0.5, 10)
            .build()
            .unwrap();
        assert!(aging.call(|| Ok::<_, ()>(())).is_ok()); // this thread's stripe, before the fork
        let code = in_child(fork, || {
            for _ in 0..20 {
                let _ = aging.call(|| Ok::<_, ()>(()));
            }
            std::thread::sleep(Duration::from_millis(1200));
            for _ in 0..10 {
                let _ = aging.call(|| Err::<(), _>("down"));
            }
            tripped(&aging, "ten failures after the idle gap")
        });
        assert_eq!(code, 0, "child 4 failed (see its message above)");

        // Child 5: forked without the handlers, so the child inherits the cached
        // reading and an owner that is the parent's process. A trip finds the
        // reading stale and starts a refresh thread, as the owner is not this
        // process: the child's reading then moves with no trip to bring it up.
        #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
        {
            let unhandled = trips_after(1, cooldown).build().unwrap();
            let code = in_child(fork_without_handlers, || {
                std::thread::sleep(Duration::from_millis(150)); // stale, as in child 1
                let _ = unhandled.call(|| Err::<(), _>("down"));
                if unhandled.state() != State::Open {
                    return Err(format!("not tripped: {:?}", unhandled.state()));
                }
                if !clock_thread_runs() {
                    return Err(format!(
                        "no refresh thread after a trip, the parent's owner mark kept: {:?}",
                        threads()
                    ));
                }
                let tripped = DefaultClock::new().now();
                let deadline = Instant::now() + Duration::from_secs(5);
                while DefaultClock::new().now() == tripped {
                    if Instant::now() > deadline {
                        return Err(format!("the reading stayed at {tripped} for 5 s"));
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                Ok(())
            });
            assert_eq!(code, 0, "child 5 failed (see its message above)");
        }

        // Child 6, last (its recorder adds a writer thread to the parent): a trace
        // recorder's writer stays in the parent, so the child's call counts as
        // dropped and its flush fails at once, rather than waiting for ever on a
        // queue nobody drains; the parent's recorder goes on writing.
        #[cfg(feature = "replay")]
        {
            use cutout::{Outcome, replay::Recorder};
            let recorder = Recorder::to_writer(std::io::sink(), false, 4).unwrap();
            recorder.record(Duration::ZERO, Outcome::Success, None);
            recorder.flush().unwrap();
            let code = in_child(fork, || {
                recorder.record(Duration::ZERO, Outcome::Failure, Some("db"));
                if recorder.dropped() != 1 {
                    return Err(format!(
                        "dropped {} of the child's call",
                        recorder.dropped()
                    ));
                }
                match recorder.flush() {
                    Err(_) => Ok(()),
                    Ok(()) => Err("the child's flush reported its call written".into()),
                }
            });
            assert_eq!(code, 0, "child 6 failed (see its message above)");
            recorder.record(Duration::ZERO, Outcome::Success, None);
            recorder.flush().unwrap();
            assert_eq!((recorder.written(), recorder.dropped()), (2, 0));
        }
        println!("fork: ok");
    }
}
