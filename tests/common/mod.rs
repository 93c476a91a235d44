//! Helpers shared by the integration tests (`mod common;` in each). Every wait here
//! is bounded, so a test of wrong code fails instead of hanging.
#![allow(dead_code)] // each test binary uses some of these

pub mod hostile;

use cutout::{Builder, CircuitBreaker, ManualClock, Transition};
use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::{Arc, Mutex, mpsc};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// A breaker builder that trips on `failures` consecutive failures and stays open
/// for `cooldown`.
pub fn trips_after(failures: u32, cooldown: Duration) -> Builder {
    CircuitBreaker::builder()
        .consecutive_failures(failures)
        .open_duration(cooldown)
}

/// A breaker builder that trips at a failure rate of `rate` once `min` calls are
/// in its window of `length` in `buckets` buckets.
pub fn rate_window(length: Duration, buckets: u32, rate: f64, min: u32) -> Builder {
    CircuitBreaker::builder()
        .window(length, buckets)
        .failure_rate(rate, min)
}

/// A breaker builder on `clock` that trips on `failures` consecutive failures.
pub fn trips_on<C: cutout::Clock>(failures: u32, clock: C) -> Builder<C> {
    CircuitBreaker::builder()
        .consecutive_failures(failures)
        .clock(clock)
}

/// `builder` built on a new `ManualClock`: the breaker and its clock.
pub fn on_manual_clock(builder: Builder) -> (CircuitBreaker<ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    let breaker = builder.clock(clock.clone()).build().unwrap();
    (breaker, clock)
}

/// The transitions a breaker announced, in order.
pub type Log = Arc<Mutex<Vec<Transition>>>;

/// A new log, and a listener that appends each transition to it.
pub fn log() -> (Log, impl Fn(&Transition) + Send + Sync + 'static) {
    let log = Log::default();
    let sink = log.clone();
    (log, move |t: &Transition| sink.lock().unwrap().push(*t))
}

/// `builder` built on a new `ManualClock`, its transitions logged: the breaker,
/// its clock and the log.
pub fn logged(builder: Builder) -> (CircuitBreaker<ManualClock>, ManualClock, Log) {
    let (log, listener) = log();
    let (breaker, clock) = on_manual_clock(builder.on_transition(listener));
    (breaker, clock, log)
}

/// A breaker builder on `clock` whose transitions land in the returned log.
pub fn logged_on(clock: &ManualClock) -> (Builder<ManualClock>, Log) {
    let (log, listener) = log();
    let builder = CircuitBreaker::builder()
        .clock(clock.clone())
        .on_transition(listener);
    (builder, log)
}

/// Whether `t`'s reason may make its move, on a breaker with or without
/// `ramp_up`: a successful half-open round goes to Recovering with it, to Closed
/// without.
pub fn valid(t: &Transition, ramp: bool) -> bool {
    use cutout::{Reason, State::*};
    let recovered = if ramp { Recovering } else { Closed };
    match t.reason {
        Reason::ConsecutiveFailures | Reason::FailureRate | Reason::SlowCallRate => {
            (t.from, t.to) == (Closed, Open)
        }
        Reason::CooldownElapsed => (t.from, t.to) == (Open, HalfOpen),
        Reason::ProbesSucceeded => (t.from, t.to) == (HalfOpen, recovered),
        Reason::ProbeFailed | Reason::HalfOpenTimeout => (t.from, t.to) == (HalfOpen, Open),
        Reason::ForcedOpen => t.to == ForcedOpen && t.from != ForcedOpen,
        Reason::Disabled => t.to == Disabled && t.from != Disabled,
        Reason::Reset => t.to == Closed,
        Reason::External => (t.from, t.to) == (Closed, Open),
        Reason::RampCompleted => ramp && (t.from, t.to) == (Recovering, Closed),
        Reason::RampFailed => ramp && (t.from, t.to) == (Recovering, Open),
        _ => false,
    }
}

/// `b` with the trip policies a generated configuration sets, each if given: a
/// streak; a window (its length in ms, its buckets); a failure rate (threshold,
/// minimum calls); slow calls (threshold in ms, rate).
pub fn with_policies<C: cutout::Clock>(
    mut b: Builder<C>,
    consecutive: Option<u32>,
    window: Option<(u64, u32)>,
    failure_rate: Option<(f64, u32)>,
    slow: Option<(u64, f64)>,
) -> Builder<C> {
    let ms = Duration::from_millis;
    if let Some(n) = consecutive {
        b = b.consecutive_failures(n);
    }
    if let Some((len, buckets)) = window {
        b = b.window(ms(len), buckets);
    }
    if let Some((rate, min)) = failure_rate {
        b = b.failure_rate(rate, min);
    }
    if let Some((threshold, rate)) = slow {
        b = b.slow_calls(ms(threshold), rate);
    }
    b
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

/// The transitions of `log`, each with the thread that delivered it, in
/// generation order; asserts that each thread delivered its own in generation
/// order.
pub fn in_generation_order(log: &[(std::thread::ThreadId, Transition)]) -> Vec<Transition> {
    let mut last = std::collections::HashMap::new();
    for (thread, t) in log {
        if let Some(prev) = last.insert(*thread, t.generation) {
            assert!(
                t.generation > prev,
                "{thread:?} delivered {} after {prev}",
                t.generation
            );
        }
    }
    let mut stream: Vec<Transition> = log.iter().map(|(_, t)| *t).collect();
    stream.sort_by_key(|t| t.generation);
    stream
}

/// Waits for child process `pid` until `deadline`; `None` if it was still
/// running (then it is killed and reaped), else its exit code (128 + signal if a
/// signal ended it).
#[cfg(unix)]
pub fn wait_child(pid: libc::pid_t, deadline: std::time::Instant) -> Option<i32> {
    let mut status = 0;
    loop {
        // SAFETY: waits for our own child without blocking.
        let done = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if done == pid {
            return Some(match libc::WIFEXITED(status) {
                true => libc::WEXITSTATUS(status),
                false => 128 + libc::WTERMSIG(status),
            });
        }
        assert_eq!(done, 0, "waitpid failed");
        if std::time::Instant::now() > deadline {
            // SAFETY: kills and reaps our own child.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            return None;
        }
        std::thread::sleep(Duration::from_millis(1));
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

/// Every call `b` admitted finished exactly one way: its lifetime counters'
/// admissions equal their successes, failures, ignored, stale and dropped calls
/// (no call in flight).
pub fn assert_each_admitted_call_finished_once<C: cutout::Clock>(b: &cutout::CircuitBreaker<C>) {
    let l = b.metrics().lifetime;
    assert_eq!(
        l.admitted,
        l.successes + l.failures + l.ignored + l.stale + l.dropped,
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
