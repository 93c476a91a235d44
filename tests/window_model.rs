//! The window and the lifetime counters against a reference model, across bucket
//! rotations, long gaps and threads that come and go: random sequences of calls
//! and clock steps compared step by step with a plain log of outcomes (the window
//! counts, every lifetime counter, and when and why the breaker trips); threads that
//! start, call and exit one at a time or in crowds beyond the owned stripes, or
//! record outcomes from their thread-local destructors, with nothing lost or
//! counted twice; and `heap_bytes` against what a counting allocator saw.
//!
//! Stripe slots are process-wide, so every test here runs alone, under one lock,
//! and every breaker has room for 2 owned stripes only (`simulate_owned_stripes`,
//! for tests): a few threads are enough to reach the shared stripes, where the
//! model cases run too (a crowd holds the owned ones). The counting allocator
//! counts per thread, so it sees only what the measuring thread allocates.

#[allow(dead_code)] // this file reads held bytes only, not allocation counts
#[path = "../benches/common/counting_alloc.rs"]
mod counting_alloc;

mod common;

use common::{logged_on, on_manual_clock, rate_window};
use counting_alloc::held_after;
use cutout::{CircuitBreaker, ManualClock, Outcome, OwnedPermit, Reason, State, WindowCounts};
use proptest::prelude::*;
use std::cell::RefCell;
use std::sync::mpsc;
use std::sync::{Arc, Barrier, Mutex, MutexGuard, OnceLock};
use std::thread;
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);
const SEC: Duration = Duration::from_secs(1);
const YEAR: Duration = Duration::from_secs(365 * 86_400);

static SERIAL: Mutex<()> = Mutex::new(());

/// Runs the calling test alone (they count the process's slots), with 2 owned
/// stripes a breaker: every test takes this first, so the simulation is in place
/// before any breaker exists.
fn serial() -> MutexGuard<'static, ()> {
    let _ = cutout::simulate_owned_stripes(2);
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn ok<C: cutout::Clock>(b: &CircuitBreaker<C>) {
    b.call(|| Ok::<_, ()>(())).unwrap();
}

fn fail<C: cutout::Clock>(b: &CircuitBreaker<C>) {
    let _ = b.call(|| Err::<(), _>(()));
}

/// A breaker that never trips, with a window of 6 buckets of 10 s.
fn never_trips(clock: &ManualClock) -> CircuitBreaker<ManualClock> {
    rate_window(60 * SEC, 6, 1.0, u32::MAX)
        .consecutive_failures(u32::MAX / 2)
        .clock(clock.clone())
        .build()
        .unwrap()
}

/// Threads that hold their slots (each has called a breaker) until dropped.
struct Crowd(Vec<(mpsc::Sender<()>, thread::JoinHandle<()>)>);

impl Crowd {
    fn new(n: usize) -> Crowd {
        static B: OnceLock<CircuitBreaker> = OnceLock::new();
        let b = B.get_or_init(|| {
            CircuitBreaker::builder()
                .consecutive_failures(1)
                .build()
                .unwrap()
        });
        let holders = (0..n)
            .map(|_| {
                let (go, wait) = mpsc::channel();
                let (ready, called) = mpsc::channel();
                let handle = thread::spawn(move || {
                    let _ = b.call(|| Ok::<_, ()>(()));
                    ready.send(()).unwrap();
                    let _ = wait.recv();
                });
                called.recv().unwrap();
                (go, handle)
            })
            .collect();
        Crowd(holders)
    }
}

impl Drop for Crowd {
    fn drop(&mut self) {
        for (go, handle) in self.0.drain(..) {
            let _ = go.send(());
            let _ = handle.join();
        }
    }
}

/// Runs `case` on this thread, or, if `shared`, on a new thread while a crowd holds
/// the owned stripes, so that the case writes a shared one.
fn on_a_stripe(
    shared: bool,
    case: impl FnOnce() -> Result<(), TestCaseError> + Send,
) -> Result<(), TestCaseError> {
    if !shared {
        return case();
    }
    let _crowd = Crowd::new(4);
    thread::scope(|s| s.spawn(case).join().unwrap())
}

/// The reference window: the counts of the outcomes `(time, failed, slow)` in
/// `log` that fall in the `buckets` buckets of `bucket` nanoseconds ending with the
/// one that holds `now`, buckets counted from `origin` (when the breaker was built).
fn reference(
    log: &[(u64, bool, bool)],
    origin: u64,
    now: u64,
    bucket: u64,
    buckets: u64,
) -> WindowCounts {
    let epoch = (now - origin) / bucket;
    let mut c = WindowCounts::default();
    for &(t, failed, slow) in log {
        let e = (t - origin) / bucket;
        if e <= epoch && e + buckets > epoch {
            c = WindowCounts::new(
                c.calls + 1,
                c.failures + u64::from(failed),
                c.slow + u64::from(slow),
            );
        }
    }
    c
}

/// A rate as `Builder::failure_rate` and `Builder::slow_calls` document it:
/// `count / calls >= threshold`, with at least one event.
fn reached(count: u64, calls: u64, threshold: f64) -> bool {
    count > 0 && count as f64 / calls as f64 >= threshold
}

// ---------------------------------------------------------------------------
// The window and the lifetime counters, step by step, on a breaker that never trips.

#[derive(Clone, Copy, Debug)]
enum Step {
    /// Advance the clock by this many half-milliseconds.
    Wait(u64),
    /// Advance by whole buckets.
    Buckets(u64),
    /// Advance by years.
    Years(u64),
    Ok,
    Fail,
    SlowOk,
    SlowFail,
    Ignored,
    Dropped,
    SlowDropped,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0u64..40).prop_map(Step::Wait),
        1 => (0u64..12).prop_map(Step::Buckets),
        1 => Just(Step::Years(3)),
        4 => Just(Step::Ok),
        3 => Just(Step::Fail),
        1 => Just(Step::SlowOk),
        1 => Just(Step::SlowFail),
        1 => Just(Step::Ignored),
        1 => Just(Step::Dropped),
        1 => Just(Step::SlowDropped),
    ]
}

fn window_case(
    buckets: u32,
    bucket_ms: u64,
    start: u64,
    steps: Vec<Step>,
) -> Result<(), TestCaseError> {
    let clock = ManualClock::new();
    clock.advance(Duration::from_nanos(start));
    let slow_after = Duration::from_micros(500);
    let b = CircuitBreaker::builder()
        .window(
            Duration::from_millis(bucket_ms * u64::from(buckets)),
            buckets,
        )
        .failure_rate(1.0, u32::MAX)
        .slow_calls(slow_after, 1.0)
        .consecutive_failures(u32::MAX / 2)
        .clock(clock.clone())
        .build()
        .unwrap();
    let bucket = bucket_ms * 1_000_000;
    let now = || clock.elapsed().as_nanos() as u64;
    let slowly = || clock.advance(slow_after + Duration::from_nanos(1));
    let mut log = Vec::new();
    let (mut admitted, mut successes, mut failures, mut slow, mut ignored, mut dropped) =
        (0, 0, 0, 0, 0, 0);
    for s in steps {
        match s {
            Step::Wait(halves) => clock.advance(Duration::from_micros(500 * halves)),
            Step::Buckets(n) => clock.advance(Duration::from_nanos(n * bucket)),
            Step::Years(y) => clock.advance(YEAR * y as u32),
            Step::Ok | Step::Fail | Step::SlowOk | Step::SlowFail => {
                let failed = matches!(s, Step::Fail | Step::SlowFail);
                let is_slow = matches!(s, Step::SlowOk | Step::SlowFail);
                let _ = b.call(|| {
                    if is_slow {
                        slowly();
                    }
                    if failed { Err(()) } else { Ok(()) }
                });
                admitted += 1;
                if failed {
                    failures += 1
                } else {
                    successes += 1
                }
                slow += u64::from(is_slow);
                log.push((now(), failed, is_slow));
            }
            Step::Ignored => {
                let _ = b.call_with(|_: &Result<(), ()>| Outcome::Ignored, || Ok(()));
                admitted += 1;
                ignored += 1;
            }
            Step::Dropped => {
                drop(b.try_acquire().unwrap());
                admitted += 1;
                dropped += 1;
            }
            Step::SlowDropped => {
                let p = b.try_acquire().unwrap();
                slowly();
                drop(p);
                admitted += 1;
                dropped += 1;
                slow += 1;
                // One slow call in the window, not a failure.
                log.push((now(), false, true));
            }
        }
        let m = b.metrics();
        prop_assert_eq!(m.state, State::Closed);
        let want = reference(&log, start, now(), bucket, u64::from(buckets));
        prop_assert_eq!(m.window, want, "at {} after {:?}", now(), s);
        let l = m.lifetime;
        prop_assert_eq!(
            (
                l.admitted,
                l.successes,
                l.failures,
                l.slow,
                l.ignored,
                l.dropped,
                l.stale,
                l.rejected
            ),
            (admitted, successes, failures, slow, ignored, dropped, 0, 0)
        );
    }
    Ok(())
}

proptest! {
    // About 1.5 s in a debug build.
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// After every step of a random sequence (calls of every kind, waits within a
    /// bucket, gaps of whole buckets, years), the window holds exactly the outcomes
    /// of the buckets it covers and every lifetime counter is what was done: on any
    /// bucket count and length, from any start, on an owned or a shared stripe.
    #[test]
    fn window_and_lifetime_counts_follow_the_model(
        buckets in 1u32..=6,
        bucket_ms in 1u64..=20,
        start in 0u64..5_000_000,
        steps in proptest::collection::vec(step(), 1..150),
        shared in any::<bool>(),
    ) {
        let _g = serial();
        on_a_stripe(shared, || window_case(buckets, bucket_ms, start, steps))?;
    }
}

// ---------------------------------------------------------------------------
// Trips against the model: the first step at which a policy's condition holds
// (evaluated on a failure or a slow call), with the event's figures; then a probe
// closes the breaker and the model starts a fresh window and streak.

#[derive(Clone, Copy, Debug)]
enum Act {
    Wait(u64),
    Ok,
    Fail,
    SlowOk,
    SlowFail,
    Ignored,
    SlowDropped,
}

fn act() -> impl Strategy<Value = Act> {
    prop_oneof![
        3 => (0u64..3_000).prop_map(Act::Wait),
        5 => Just(Act::Ok),
        4 => Just(Act::Fail),
        1 => Just(Act::SlowOk),
        1 => Just(Act::SlowFail),
        1 => Just(Act::Ignored),
        1 => Just(Act::SlowDropped),
    ]
}

/// Rate thresholds: exact binary fractions, and decimals at which a count can
/// reach the rate while the product of threshold and calls is above the count
/// (`0.28 * 25.0` is above 7, `0.56 * 25.0` above 14).
fn rate() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(0.25),
        Just(0.28),
        Just(0.5),
        Just(0.56),
        Just(0.75),
        Just(1.0)
    ]
}

#[derive(Clone, Copy, Debug)]
struct TripParams {
    buckets: u32,
    bucket_ms: u64,
    minimum: u32,
    failure_rate: f64,
    slow_rate: f64,
    streak_max: u32,
}

fn trip_case(p: TripParams, acts: Vec<Act>) -> Result<(), TestCaseError> {
    let clock = ManualClock::new();
    let origin = 777 * MS;
    clock.advance(origin);
    let (builder, log) = logged_on(&clock);
    let threshold = 50 * MS;
    let b = builder
        .window(
            Duration::from_millis(p.bucket_ms * u64::from(p.buckets)),
            p.buckets,
        )
        .failure_rate(p.failure_rate, p.minimum)
        .slow_calls(threshold, p.slow_rate)
        .consecutive_failures(p.streak_max)
        .open_duration(SEC)
        .backoff_multiplier(1.0)
        .build()
        .unwrap();
    let origin = origin.as_nanos() as u64;
    let bucket = p.bucket_ms * 1_000_000;
    let now = || clock.elapsed().as_nanos() as u64;
    let slowly = || clock.advance(threshold + Duration::from_nanos(1));
    let mut samples: Vec<(u64, bool, bool)> = Vec::new();
    let mut streak = 0u64;
    // Whether a check found the window below the minimum with a rate at its
    // threshold there: the next plain success checks the rates too.
    let mut check_due = false;
    let at_minimum = |w: WindowCounts| {
        let minimum = u64::from(p.minimum);
        w.calls < minimum
            && (reached(w.failures, minimum, p.failure_rate)
                || reached(w.slow, minimum, p.slow_rate))
    };
    let mut trips = 0usize;
    for (i, a) in acts.into_iter().enumerate() {
        // (failed, slow, clears the streak) for a sample in the window.
        let sample = match a {
            Act::Wait(ms) => {
                clock.advance(Duration::from_millis(ms));
                None
            }
            Act::Ok | Act::Fail | Act::SlowOk | Act::SlowFail => {
                let failed = matches!(a, Act::Fail | Act::SlowFail);
                let is_slow = matches!(a, Act::SlowOk | Act::SlowFail);
                let _ = b.call(|| {
                    if is_slow {
                        slowly();
                    }
                    if failed { Err(()) } else { Ok(()) }
                });
                Some((failed, is_slow, !failed))
            }
            Act::Ignored => {
                let _ = b.call_with(|_: &Result<(), ()>| Outcome::Ignored, || Err::<(), ()>(()));
                None
            }
            Act::SlowDropped => {
                let permit = b.try_acquire().unwrap();
                slowly();
                drop(permit);
                Some((false, true, false))
            }
        };
        let Some((failed, is_slow, clears)) = sample else {
            let w = reference(&samples, origin, now(), bucket, u64::from(p.buckets));
            prop_assert_eq!(b.state(), State::Closed);
            prop_assert_eq!(b.metrics().window, w);
            continue;
        };
        let t = now();
        samples.push((t, failed, is_slow));
        if failed {
            streak += 1;
        } else if clears {
            streak = 0;
        }
        let w = reference(&samples, origin, t, bucket, u64::from(p.buckets));
        let counted = w.calls >= u64::from(p.minimum);
        let checks = failed || is_slow || check_due;
        let tripped = if !checks {
            None
        } else if (failed || is_slow) && streak >= u64::from(p.streak_max) {
            Some(Reason::ConsecutiveFailures)
        } else if counted && reached(w.failures, w.calls, p.failure_rate) {
            Some(Reason::FailureRate)
        } else if counted && reached(w.slow, w.calls, p.slow_rate) {
            Some(Reason::SlowCallRate)
        } else {
            None
        };
        if tripped.is_none() && checks {
            if failed || is_slow {
                check_due |= at_minimum(w);
            } else {
                check_due = at_minimum(w);
            }
        }
        let Some(reason) = tripped else {
            prop_assert_eq!(
                b.state(),
                State::Closed,
                "step {} {:?}, window {:?}, streak {}",
                i,
                a,
                w,
                streak
            );
            prop_assert_eq!(b.metrics().window, w);
            prop_assert_eq!(b.metrics().consecutive_failures, streak);
            continue;
        };
        trips += 1;
        {
            let log = log.lock().unwrap();
            prop_assert_eq!(
                log.len(),
                3 * trips - 2,
                "step {} {:?}: {:?}",
                i,
                a,
                log.last()
            );
            let e = log.last().unwrap();
            prop_assert_eq!(e.reason, reason, "step {} {:?}: {:?}", i, a, e);
            prop_assert_eq!(e.window, w, "step {} {:?}", i, a);
            prop_assert_eq!(e.consecutive_failures, streak, "step {} {:?}", i, a);
        }
        prop_assert_eq!(b.state(), State::Open);
        clock.advance(SEC);
        ok(&b);
        prop_assert_eq!(b.state(), State::Closed);
        prop_assert_eq!(log.lock().unwrap().len(), 3 * trips);
        samples.clear();
        streak = 0;
        check_due = false;
        prop_assert_eq!(b.metrics().window, WindowCounts::default());
    }
    Ok(())
}

proptest! {
    // About 2.5 s in a debug build.
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// The breaker trips at exactly the step where the model's streak or rates
    /// (`count / calls >= threshold` once `minimum_calls` are in, checked after a
    /// failed or slow call, and after a success while a check found the window
    /// below `minimum_calls` with a rate at its threshold there) say so, never
    /// before, and its event names the policy and carries the model's window and
    /// streak, a slow dropped call's trip included; a probe then closes it onto a
    /// fresh window. On an owned or a shared stripe.
    #[test]
    fn trips_happen_exactly_when_the_model_says(
        buckets in 1u32..=5,
        bucket_ms in 100u64..=1_000,
        minimum in 1u32..=8,
        failure_rate in rate(),
        slow_rate in rate(),
        streak_max in 2u32..=6,
        acts in proptest::collection::vec(act(), 1..300),
        shared in any::<bool>(),
    ) {
        let _g = serial();
        let p = TripParams { buckets, bucket_ms, minimum, failure_rate, slow_rate, streak_max };
        on_a_stripe(shared, || trip_case(p, acts))?;
    }
}

// ---------------------------------------------------------------------------
// Threads that come and go.

/// What one worker did: its lifetime counts, and its (calls, failures, slow) in
/// the window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Tally {
    admitted: u64,
    successes: u64,
    failures: u64,
    slow: u64,
    ignored: u64,
    dropped: u64,
    window: (u64, u64, u64),
}

impl Tally {
    fn add(&mut self, o: Tally) {
        self.admitted += o.admitted;
        self.successes += o.successes;
        self.failures += o.failures;
        self.slow += o.slow;
        self.ignored += o.ignored;
        self.dropped += o.dropped;
        self.window.0 += o.window.0;
        self.window.1 += o.window.1;
        self.window.2 += o.window.2;
    }
}

/// `n` calls of every kind but slow (the clock belongs to the main thread).
fn work(b: &CircuitBreaker<ManualClock>, n: u64, salt: u64) -> Tally {
    let mut t = Tally::default();
    for i in 0..n {
        match (i + salt) % 5 {
            0 | 1 => {
                ok(b);
                t.successes += 1;
                t.window.0 += 1;
            }
            2 => {
                fail(b);
                t.failures += 1;
                t.window.0 += 1;
                t.window.1 += 1;
            }
            3 => {
                b.try_acquire().unwrap().ignore();
                t.ignored += 1;
            }
            _ => {
                drop(b.try_acquire().unwrap());
                t.dropped += 1;
            }
        }
        t.admitted += 1;
    }
    t
}

/// Asserts that `b`'s lifetime counters and window are `want`, with nothing stale
/// or rejected.
fn check(b: &CircuitBreaker<ManualClock>, want: Tally, what: &str) {
    let m = b.metrics();
    let l = m.lifetime;
    let got = Tally {
        admitted: l.admitted,
        successes: l.successes,
        failures: l.failures,
        slow: l.slow,
        ignored: l.ignored,
        dropped: l.dropped,
        window: (m.window.calls, m.window.failures, m.window.slow),
    };
    assert_eq!(got, want, "{what}");
    assert_eq!((l.stale, l.rejected), (0, 0), "{what}");
}

/// Each new thread takes the slot, and so the stripe and its cached bucket, of the
/// one that exited before it, at a later clock reading (the same, a bucket on, a
/// whole window on, a year on): every thread's calls count once, in the lifetime
/// counters and in the window buckets they belong to, and the breaker holds one
/// stripe for them all, not one per thread.
#[test]
fn threads_that_come_and_go_one_at_a_time_lose_and_double_nothing() {
    let _g = serial();
    let clock = ManualClock::new();
    let b = never_trips(&clock);
    let room = b.heap_bytes();
    let mut want = Tally::default();
    let mut window_log: Vec<(u64, Tally)> = Vec::new();
    let mut max_heap = 0;
    for round in 0..300u64 {
        clock.advance(match round % 7 {
            0 => Duration::ZERO,
            1 => 10 * SEC,
            2 => 60 * SEC,
            3 => YEAR,
            _ => 1_234 * MS,
        });
        let t = thread::scope(|s| s.spawn(|| work(&b, 10 + round % 13, round)).join()).unwrap();
        want.add(Tally {
            window: (0, 0, 0),
            ..t
        });
        let now = clock.elapsed();
        window_log.push((now.as_nanos() as u64, t));
        // The window: 6 buckets of 10 s from the build (at 0).
        let epoch = now.as_secs() / 10;
        let mut w = (0, 0, 0);
        for &(at, t) in &window_log {
            if at / 10_000_000_000 + 6 > epoch {
                w.0 += t.window.0;
                w.1 += t.window.1;
            }
        }
        check(&b, Tally { window: w, ..want }, &format!("round {round}"));
        max_heap = max_heap.max(b.heap_bytes());
    }
    // One thread at a time: one stripe (two or three if an exiting thread of an
    // earlier test still held the lowest slots once); not one per thread.
    let stripe = {
        let probe = never_trips(&clock);
        let empty = probe.heap_bytes();
        ok(&probe);
        probe.heap_bytes() - empty
    };
    assert!(
        max_heap <= room + 3 * stripe,
        "heap {max_heap}, room {room}, stripe {stripe}"
    );
}

/// Waves of up to 11 threads at once (beyond the 2 owned stripes, so most share
/// one) start, call and exit, and permits acquired on some threads are finished on
/// others after those exited: every outcome counts exactly once in the lifetime
/// counters and the window.
#[test]
fn crowds_beyond_the_owned_stripes_that_come_and_go_count_exactly() {
    let _g = serial();
    let clock = ManualClock::new();
    clock.advance(1_000 * SEC);
    let b = never_trips(&clock);
    let mut want = Tally::default();
    // The clock stands still: every bucket is rotated in once, from never written,
    // so no count may be lost to a racing rotation.
    for wave in 0..40u64 {
        let threads = 1 + (wave * 7) % 11;
        let barrier = Barrier::new(threads as usize);
        let tallies: Vec<Tally> = thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let (b, barrier) = (&b, &barrier);
                    s.spawn(move || {
                        barrier.wait();
                        work(b, 200 + t * 17, t + wave)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for t in tallies {
            want.add(t);
        }
        check(&b, want, &format!("wave {wave}"));
    }
    // Permits acquired on one thread and finished on another, across exits.
    let permits: Vec<_> = thread::scope(|s| {
        (0..6)
            .map(|_| {
                s.spawn(|| {
                    (0..50)
                        .map(|_| b.try_acquire().unwrap())
                        .collect::<Vec<_>>()
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    want.admitted += 300;
    let mut permits = permits.into_iter();
    thread::scope(|s| {
        for _ in 0..6 {
            let chunk: Vec<_> = permits.by_ref().take(50).collect();
            s.spawn(move || {
                for (i, p) in chunk.into_iter().enumerate() {
                    match i % 3 {
                        0 => p.success(),
                        1 => p.failure(),
                        _ => drop(p),
                    }
                }
            });
        }
    });
    want.successes += 6 * 17;
    want.failures += 6 * 17;
    want.dropped += 6 * 16;
    want.window.0 += 6 * 34;
    want.window.1 += 6 * 17;
    check(&b, want, "permits moved between threads");
}

/// What a thread does in its thread-local destructor, as it exits: lets its
/// permits run slow and drops them, then makes three calls (two failures).
struct OnExit {
    breaker: Arc<CircuitBreaker<ManualClock>>,
    permits: Vec<OwnedPermit<ManualClock>>,
    clock: ManualClock,
}

impl Drop for OnExit {
    fn drop(&mut self) {
        self.clock.advance(51 * MS);
        self.permits.clear(); // slow, dropped unrecorded
        fail(&self.breaker);
        ok(&self.breaker);
        self.breaker.try_acquire().unwrap().failure();
    }
}

thread_local! {
    static ON_EXIT: RefCell<Option<OnExit>> = const { RefCell::new(None) };
}

/// Outcomes recorded from a thread-local destructor, while the thread exits and
/// before or after its slot went back (the thread called the breaker before the
/// destructor was registered, or first calls it from there): each counts once, in
/// the lifetime counters and in the window, slow dropped permits as slow calls.
#[test]
fn outcomes_recorded_by_an_exiting_thread_count_once_in_the_window_and_lifetime() {
    let _g = serial();
    let clock = ManualClock::new();
    let b = Arc::new(
        rate_window(10 * SEC, 10, 1.0, u32::MAX)
            .slow_calls(50 * MS, 1.0)
            .consecutive_failures(u32::MAX / 2)
            .clock(clock.clone())
            .build()
            .unwrap(),
    );
    let mut rounds = 0u64;
    for first_call_in_destructor in [false, true, false, true] {
        let (breaker, clock) = (b.clone(), clock.clone());
        thread::spawn(move || {
            // A thread with permits has its slot (and the guard that gives it back)
            // before the destructor registers, so its guard may run first or last.
            let permits = match first_call_in_destructor {
                false => (0..3)
                    .map(|_| breaker.try_acquire_owned().unwrap())
                    .collect(),
                true => Vec::new(),
            };
            let on_exit = OnExit {
                breaker,
                permits,
                clock,
            };
            ON_EXIT.with(|e| *e.borrow_mut() = Some(on_exit));
        })
        .join()
        .unwrap();
        rounds += 1;
        let m = b.metrics();
        let l = m.lifetime;
        assert_eq!(
            l.successes + l.failures + l.ignored + l.stale + l.dropped,
            l.admitted,
            "round {rounds}: {l:?}"
        );
        assert_eq!(l.failures, 2 * rounds, "{l:?}");
        assert_eq!(l.successes, rounds, "{l:?}");
        // Each round's calls are 51 ms later than the last: all in the window.
        assert_eq!(m.window.failures, 2 * rounds, "round {rounds}: {m:?}");
        assert_eq!(
            m.window.calls,
            3 * rounds + l.dropped,
            "round {rounds}: {m:?}"
        );
        assert_eq!(m.window.slow, l.dropped, "round {rounds}: {m:?}");
        assert_eq!(l.slow, l.dropped, "round {rounds}: {l:?}");
    }
    assert_eq!(b.metrics().lifetime.dropped, 6);
}

/// Failures recorded at once on 6 threads (beyond the 2 owned stripes), the
/// failure rate reached by exactly the last of them: that one, whichever thread
/// records it, sees the others' failures and trips, once, in every round.
#[test]
fn the_failure_that_completes_a_crossing_trips_whichever_thread_records_it() {
    let _g = serial();
    let threads = 6u64;
    let per_thread = 40u64;
    let failures = threads * per_thread;
    for round in 0..150 {
        let (b, _) = on_manual_clock(rate_window(60 * SEC, 6, 0.5, 1));
        // As many successes as failures to come: 0.5 is reached by the last one.
        for _ in 0..failures {
            ok(&b);
        }
        let barrier = Barrier::new(threads as usize);
        thread::scope(|s| {
            for _ in 0..threads {
                let (b, barrier) = (&b, &barrier);
                s.spawn(move || {
                    let permits: Vec<_> =
                        (0..per_thread).map(|_| b.try_acquire().unwrap()).collect();
                    barrier.wait();
                    for p in permits {
                        p.failure();
                    }
                });
            }
        });
        let m = b.metrics();
        assert_eq!(
            (m.state, m.lifetime.failures, m.lifetime.stale),
            (State::Open, failures, 0),
            "round {round}: {m:?}"
        );
        assert_eq!(m.transitions(Reason::FailureRate), 1);
    }
}

// ---------------------------------------------------------------------------
// heap_bytes against what the allocator saw.

/// `heap_bytes` is exactly what the breaker holds on the heap, as the counting
/// allocator sees it: once built (with no window, and windows of 1 to 4096
/// buckets), and after a call has written this thread's stripe; dropping the
/// breaker frees all of it.
#[test]
fn heap_bytes_is_what_the_breaker_allocated() {
    let _g = serial();
    let clock = ManualClock::new();
    // This thread's slot first, so that what follows is the breakers' alone.
    ok(&never_trips(&clock));
    for (window, buckets) in [
        (None, 0u32),
        (Some(10 * SEC), 10),
        (Some(SEC), 1),
        (Some(64 * SEC), 64),
        (Some(100 * SEC), 100),
        (Some(4096 * SEC), 4096),
    ] {
        let what = format!("window {window:?} in {buckets} buckets");
        let (b, built) = held_after(|| {
            let builder = CircuitBreaker::builder()
                .consecutive_failures(3)
                .clock(clock.clone());
            match window {
                Some(w) => builder.window(w, buckets).failure_rate(0.5, 10),
                None => builder,
            }
            .build()
            .unwrap()
        });
        assert_eq!(b.heap_bytes() as i64, built, "built, {what}");
        let ((), called) = held_after(|| {
            ok(&b);
            fail(&b);
        });
        assert!(called > 0, "the first call wrote a stripe, {what}");
        assert_eq!(
            b.heap_bytes() as i64,
            built + called,
            "after a call, {what}"
        );
        let ((), freed) = held_after(|| drop(b));
        assert_eq!(freed, -(built + called), "all freed, {what}");
    }
}
