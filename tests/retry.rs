//! Retries through a breaker: full-jitter backoff (clones of one policy each draw
//! their own waits), attempts and predicate limits, settings at their maximum, an
//! open or recovering breaker that stops the retries at once without sleeping, and
//! a retry loop that panics or is dropped mid-way holding nothing. Time is a
//! `ManualClock` moved by a recording fake sleep (or tokio's paused clock).

mod common;

use common::{block_on, on_manual_clock, poll_once, trips_after};
use cutout::{
    CircuitBreaker, Error, ManualClock, RetryPolicy, Retryable, State, retry_async,
    retry_with_sleep,
};
use std::cell::RefCell;
use std::future::Future;
use std::pin::pin;
use std::time::Duration;

const COOLDOWN: Duration = Duration::from_secs(30);

fn policy(max_attempts: u32, seed: u64) -> RetryPolicy {
    RetryPolicy::builder()
        .base(Duration::from_millis(100))
        .cap(Duration::from_secs(1))
        .max_attempts(max_attempts)
        .seed(seed)
        .build()
        .unwrap()
}

/// A breaker on a `ManualClock` (trips after `failures` in a row), and a sleep that
/// records each wait and moves the clock by it.
struct Rig {
    clock: ManualClock,
    b: CircuitBreaker<ManualClock>,
    waits: RefCell<Vec<Duration>>,
}

impl Rig {
    fn new(failures: u32) -> Rig {
        let clock = ManualClock::new();
        Rig {
            b: trips_after(failures, COOLDOWN)
                .clock(clock.clone())
                .build()
                .unwrap(),
            clock,
            waits: RefCell::new(Vec::new()),
        }
    }

    /// Fails one call: with a threshold of 1, the breaker trips.
    fn trip(&self) {
        let _ = self.b.call(|| Err::<(), _>("trip"));
    }

    fn sleep(&self, d: Duration) {
        self.waits.borrow_mut().push(d);
        self.clock.advance(d);
    }

    fn waits(&self) -> Vec<Duration> {
        self.waits.borrow().clone()
    }

    /// `retry_with_sleep` through this rig's breaker and sleep.
    fn retry<R: Retryable<E>, T, E>(
        &self,
        p: &RetryPolicy<R>,
        op: impl FnMut() -> Result<T, E>,
    ) -> Result<T, Error<E>> {
        retry_with_sleep(&self.b, p, |d| self.sleep(d), op)
    }

    /// `retry_async` through this rig's breaker and sleep, run to completion.
    fn retry_async<T, E, Fut: Future<Output = Result<T, E>>>(
        &self,
        p: &RetryPolicy,
        op: impl FnMut() -> Fut,
    ) -> Result<T, Error<E>> {
        let sleep = |d| {
            self.sleep(d);
            async {}
        };
        block_on(retry_async(&self.b, p, sleep, op))
    }
}

/// A shadow breaker that has tripped still admits every attempt: the retries
/// back off as when closed, not back to back.
#[test]
fn a_tripped_shadow_breaker_leaves_the_backoff_on() {
    let clock = ManualClock::new();
    let rig = Rig {
        b: trips_after(1, COOLDOWN)
            .shadow()
            .clock(clock.clone())
            .build()
            .unwrap(),
        clock,
        waits: RefCell::new(Vec::new()),
    };
    let mut calls = 0;
    let result = rig.retry(&policy(5, 1), || {
        calls += 1;
        Err::<(), _>("down")
    });
    assert_eq!(result, Err(Error::Inner("down")));
    assert_eq!((calls, rig.b.state()), (5, State::Open));
    assert_eq!(rig.waits().len(), 4, "{:?}", rig.waits());
}

#[test]
fn retries_until_success_with_jittered_waits_under_each_ceiling() {
    let rig = Rig::new(100);
    let p = policy(10, 42);
    let mut attempts = 0;
    let result = rig.retry(&p, || {
        attempts += 1;
        if attempts < 6 {
            Err("flaky")
        } else {
            Ok(attempts)
        }
    });
    assert_eq!(result, Ok(6));
    let waits = rig.waits();
    assert_eq!(waits.len(), 5);
    for (n, wait) in waits.iter().enumerate() {
        assert!(*wait <= p.ceiling(n as u32), "wait {n} = {wait:?}");
    }
    assert_eq!(rig.clock.elapsed(), waits.iter().sum::<Duration>());
    let m = rig.b.metrics();
    assert_eq!(
        (
            m.lifetime.admitted,
            m.lifetime.failures,
            m.lifetime.successes
        ),
        (6, 5, 1)
    );
}

#[test]
fn the_same_seed_gives_the_same_waits() {
    let run = |seed| {
        let rig = Rig::new(100);
        let _ = rig.retry(&policy(6, seed), || Err::<(), _>(()));
        rig.waits()
    };
    assert_eq!(run(7), run(7));
    assert_ne!(run(7), run(8));
}

/// Clients that fail together must not retry together: clones of one policy, handed
/// to two workers, each draw waits of their own, whether the policy's seed is random
/// or fixed; and a fixed seed's clones still reproduce. Before, a clone copied the
/// seed and the stream count, and the two workers retried in lockstep.
#[test]
fn clones_of_one_policy_draw_waits_of_their_own() {
    let run = |p: &RetryPolicy| {
        let rig = Rig::new(100);
        let _ = rig.retry(p, || Err::<(), _>(()));
        rig.waits()
    };
    let random = RetryPolicy::builder()
        .base(Duration::from_millis(100))
        .cap(Duration::from_secs(10))
        .max_attempts(6)
        .build()
        .unwrap();
    let (a, b) = (random.clone(), random.clone());
    let (wa, wb) = (run(&a), run(&b));
    assert_eq!(wa.len(), 5);
    assert_ne!(
        wa, wb,
        "two clones of a random policy retry at the same instants"
    );

    let fixed = policy(6, 7);
    let (a, b) = (fixed.clone(), fixed.clone());
    assert_ne!(
        run(&a),
        run(&b),
        "two clones of a seeded policy retry together"
    );
    assert_eq!(run(&policy(6, 7).clone()), run(&policy(6, 7).clone()));
}

#[test]
fn gives_up_after_max_attempts_with_the_last_error() {
    let rig = Rig::new(100);
    let mut attempts = 0;
    let result = rig.retry(&policy(4, 1), || {
        attempts += 1;
        Err::<(), _>(attempts)
    });
    assert_eq!(result, Err(Error::Inner(4)));
    assert_eq!(rig.waits().len(), 3);
}

/// With one attempt there is nothing to retry: one call, no sleep, and its error
/// as it is.
#[test]
fn one_attempt_makes_one_call_and_never_sleeps() {
    let rig = Rig::new(100);
    let mut attempts = 0;
    let result = rig.retry(&policy(1, 1), || {
        attempts += 1;
        Err::<(), _>("down")
    });
    assert_eq!(result, Err(Error::Inner("down")));
    assert_eq!((attempts, rig.waits().len()), (1, 0));
}

/// Settings at their maximum (`Duration::MAX` base and cap, `u32::MAX` attempts)
/// are honoured without an overflow panic: the backoff saturates at
/// `Duration::MAX` and the retries still end at the first success.
#[test]
fn the_largest_settings_saturate_without_a_panic() {
    let (b, _) = on_manual_clock(CircuitBreaker::builder().consecutive_failures(100));
    let p = RetryPolicy::builder()
        .base(Duration::MAX)
        .cap(Duration::MAX)
        .max_attempts(u32::MAX)
        .seed(3)
        .build()
        .unwrap();
    // The waits are recorded, not slept: the clock stays where it is.
    let mut waits = Vec::new();
    let mut attempts = 0;
    let result = retry_with_sleep(
        &b,
        &p,
        |d| waits.push(d),
        || {
            attempts += 1;
            if attempts < 40 {
                Err("down")
            } else {
                Ok(attempts)
            }
        },
    );
    assert_eq!(result, Ok(40));
    assert_eq!(waits.len(), 39);
    assert_eq!(p.ceiling(u32::MAX), Duration::MAX);
}

/// `ceiling(n)` is `min(cap, base * 2^n)` for every `n`, past 31 too: before, the
/// factor stopped at `2^32 - 1`, so from the 32nd retry on every wait was at most
/// `base * (2^32 - 1)`, whatever the cap.
#[test]
fn the_ceiling_keeps_doubling_past_retry_31() {
    let p = RetryPolicy::builder()
        .base(Duration::from_nanos(1))
        .cap(Duration::from_secs(3600))
        .max_attempts(64)
        .build()
        .unwrap();
    for n in [31, 32, 33, 40] {
        assert_eq!(p.ceiling(n), Duration::from_nanos(1 << n), "retry {n}");
    }
    assert_eq!(p.ceiling(50), Duration::from_secs(3600), "the cap");
}

/// A ceiling beyond `u64::MAX` nanoseconds (a base of a quarter of the longest
/// `Duration`, no cap): each wait is drawn up to `u64::MAX` nanoseconds, never above
/// its ceiling, without an overflow panic; and `Debug` shows the settings.
#[test]
fn huge_settings_keep_every_wait_within_its_ceiling() {
    let rig = Rig::new(100);
    let p = RetryPolicy::builder()
        .base(Duration::from_secs(u64::MAX / 4))
        .cap(Duration::MAX)
        .max_attempts(6)
        .seed(2)
        .build()
        .unwrap();
    let _ = rig.retry(&p, || Err::<(), _>(()));
    let waits = rig.waits();
    assert_eq!(waits.len(), 5);
    for (n, wait) in waits.iter().enumerate() {
        assert!(*wait <= p.ceiling(n as u32), "wait {n} = {wait:?}");
    }
    assert!(format!("{p:?}").contains("max_attempts: 6"), "{p:?}");
}

#[test]
fn a_non_retryable_error_stops_at_once() {
    let rig = Rig::new(100);
    let p = RetryPolicy::builder()
        .max_attempts(5)
        .retryable(|e: &&str| *e == "timeout")
        .build()
        .unwrap();
    let mut errors = vec!["forbidden", "timeout", "timeout"];
    let result = rig.retry(&p, || Err::<(), _>(errors.pop().unwrap()));
    assert_eq!(result, Err(Error::Inner("forbidden")));
    assert_eq!(rig.waits().len(), 2); // after each timeout
}

#[test]
fn a_breaker_that_trips_mid_retry_stops_it_without_sleeping() {
    let rig = Rig::new(2);
    let mut attempts = 0;
    let result = rig.retry(&policy(10, 3), || {
        attempts += 1;
        Err::<(), _>("down")
    });
    // Attempt 1 fails (wait), attempt 2 fails and trips the breaker: no wait, the
    // next attempt is rejected at once and ends the retries.
    assert_eq!(attempts, 2);
    assert_eq!(rig.waits().len(), 1);
    match result {
        Err(Error::Rejected(r)) => {
            assert_eq!(r.state(), State::Open);
            assert_eq!(r.retry_after(), Some(COOLDOWN));
        }
        other => panic!("expected a rejection, got {other:?}"),
    }
}

#[test]
fn an_open_breaker_is_never_called_nor_slept_against() {
    let rig = Rig::new(1);
    rig.trip();
    let mut attempts = 0;
    let result = rig.retry(&policy(10, 3), || {
        attempts += 1;
        Ok::<_, ()>(())
    });
    assert!(result.unwrap_err().is_rejected());
    assert_eq!((attempts, rig.waits().len()), (0, 0));
}

#[test]
fn a_failed_probe_ends_the_retries_with_the_reopened_breakers_rejection() {
    let rig = Rig::new(1);
    rig.trip();
    rig.clock.advance(COOLDOWN);
    let mut attempts = 0;
    let result = rig.retry(&policy(10, 3), || {
        attempts += 1;
        Err::<(), _>("still down")
    });
    assert_eq!(attempts, 1, "only the probe ran");
    assert!(rig.waits().is_empty());
    let rejected = *result.unwrap_err().rejected().unwrap();
    assert_eq!(rejected.state(), State::Open);
    assert_eq!(rejected.retry_after(), Some(2 * COOLDOWN)); // the next backoff level
}

/// A probe whose closure panics mid-retry: the panic propagates out of the retry
/// loop, the attempt counts as dropped (not as a failure), and the probe's slot
/// comes back for the next caller.
#[test]
fn a_panicking_probe_ends_the_retries_and_gives_its_slot_back() {
    let rig = Rig::new(1);
    rig.trip();
    rig.clock.advance(COOLDOWN);
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rig.retry(&policy(5, 1), || -> Result<(), ()> { panic!("boom") })
    }));
    assert!(caught.is_err(), "the panic propagates");
    assert!(rig.waits().is_empty());
    assert_eq!(rig.b.state(), State::HalfOpen);
    let m = rig.b.metrics();
    assert_eq!((m.lifetime.failures, m.lifetime.dropped), (1, 1));
    rig.b
        .try_acquire()
        .expect("the probe's slot came back")
        .success();
    assert_eq!(rig.b.state(), State::Closed);
}

/// While Recovering, an attempt is either shed (a rejection, which ends the
/// retries) or admitted, and its failure reopens the breaker: either way the
/// retries end after at most one call, without sleeping.
#[test]
fn a_recovering_breaker_ends_the_retries_at_its_first_shed_or_failure() {
    let (b, clock) = on_manual_clock(trips_after(1, COOLDOWN).ramp_up(Duration::from_secs(10)));
    let _ = b.call(|| Err::<(), _>("trip"));
    clock.advance(COOLDOWN);
    b.try_acquire().unwrap().success();
    assert_eq!(b.state(), State::Recovering);
    let mut attempts = 0;
    let mut sleeps = 0;
    let result = retry_with_sleep(
        &b,
        &policy(50, 4),
        |_| sleeps += 1,
        || {
            attempts += 1;
            Err::<(), _>("down")
        },
    );
    assert!(result.unwrap_err().is_rejected());
    assert!(attempts <= 1, "{attempts} attempts");
    assert_eq!(sleeps, 0);
}

#[test]
fn async_retries_use_the_injected_sleep_future() {
    let rig = Rig::new(100);
    let mut attempts = 0;
    let result = rig.retry_async(&policy(5, 9), || {
        attempts += 1;
        let n = attempts;
        async move { if n < 4 { Err("flaky") } else { Ok(n) } }
    });
    assert_eq!(result, Ok(4));
    assert_eq!(rig.waits().len(), 3);
    assert_eq!(rig.b.metrics().lifetime.admitted, 4);
}

#[test]
fn async_retries_stop_at_an_open_breaker() {
    let rig = Rig::new(1);
    let result = rig.retry_async(&policy(5, 9), || async { Err::<(), _>("down") });
    assert_eq!(result.unwrap_err().rejected().unwrap().state(), State::Open);
    assert!(rig.waits().is_empty());
    assert_eq!(rig.b.metrics().lifetime.admitted, 1);
}

/// `retry_async`'s future is `Send` where its attempts' futures are, whatever
/// the error (here one that is not `Send`): the error of a failed attempt is
/// not held across the sleep.
#[test]
fn async_retries_are_send_with_an_error_that_is_not() {
    fn assert_send<T: Send>(_: &T) {}
    let breaker = CircuitBreaker::builder().build().unwrap();
    let p = policy(3, 1);
    let attempt = || async { Err::<u8, std::rc::Rc<str>>("down".into()) };
    let retrying = retry_async(&breaker, &p, |_| async {}, attempt);
    assert_send(&retrying);
}

/// `retry_async` dropped while it sleeps between attempts holds no permit: the
/// failed attempt was recorded before the sleep, and the drop records nothing more.
#[test]
fn async_retries_dropped_while_sleeping_hold_no_permit() {
    let rig = Rig::new(100);
    let p = policy(5, 1);
    {
        let mut retrying = pin!(retry_async(
            &rig.b,
            &p,
            |_| std::future::pending::<()>(),
            || async { Err::<(), _>("down") }
        ));
        for _ in 0..3 {
            assert!(poll_once(retrying.as_mut()).is_pending());
        }
    }
    let m = rig.b.metrics();
    assert_eq!(
        (m.lifetime.admitted, m.lifetime.failures, m.lifetime.dropped),
        (1, 1, 0)
    );
}

#[tokio::test(start_paused = true)]
async fn async_retries_on_tokio_wait_in_paused_time() {
    let b = CircuitBreaker::builder()
        .consecutive_failures(100)
        .build()
        .unwrap();
    let waits = RefCell::new(Vec::new());
    let start = tokio::time::Instant::now();
    let mut attempts = 0;
    let result = retry_async(
        &b,
        &policy(4, 5),
        |d| {
            waits.borrow_mut().push(d);
            tokio::time::sleep(d)
        },
        || {
            attempts += 1;
            async { Err::<(), _>("down") }
        },
    )
    .await;
    assert_eq!(result, Err(Error::Inner("down")));
    assert_eq!(attempts, 4);
    let waited: Duration = waits.borrow().iter().sum();
    assert_eq!(waits.borrow().len(), 3);
    assert!(
        start.elapsed() >= waited,
        "the virtual clock moved by the waits"
    );
}
