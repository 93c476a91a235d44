//! Helpers shared by the integration tests (`mod common;` in each). Every wait here
//! is bounded, so a test of wrong code fails instead of hanging.
#![allow(dead_code)] // each test binary uses some of these

pub mod hostile;

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

/// What a child run of this test binary left: its exit status (`None` if it ran
/// past its limit and was killed), its stdout and its stderr.
pub struct Child {
    pub status: Option<std::process::ExitStatus>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs test `test` of this test binary in a child process (`args` added to the
/// harness's, with `env` set to `1`), for a fresh process or one whose abort must
/// not end this binary. Waits at most `limit`, then kills it. Its pipes are read on
/// threads of their own, so that a full pipe cannot stall it.
pub fn run_child(test: &str, args: &[&str], env: &str, limit: Duration) -> Child {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .args(args)
        .env(env, "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn a child of this test binary");
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let deadline = std::time::Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    Child {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    }
}
