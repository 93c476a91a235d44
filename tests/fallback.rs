//! Fallbacks: a rejection, and on request a failure, answered by a
//! fallback that receives the `Rejected` or the error; the fallback runs outside
//! the breaker, so one that fails or panics changes nothing in it, nor does a call
//! or a fallback future dropped part way. Sync, async, and (with the `tower`
//! feature) the tower form.

mod common;

use common::{block_on, on_manual_clock, poll_once, trips_after};
use cutout::{CircuitBreaker, Error, ManualClock, Metrics, Rejected, State};
use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::pin;
use std::time::Duration;

const COOLDOWN: Duration = Duration::from_secs(10);

/// Trips after `failures` in a row; one probe; time stands still unless moved.
fn breaker(failures: u32) -> (CircuitBreaker<ManualClock>, ManualClock) {
    on_manual_clock(trips_after(failures, COOLDOWN))
}

/// `b`, tripped by one failure, then asked twice and answered twice by a
/// fallback, one failing and one panicking: still Open with the one failure and
/// two rejections, and its cooldown's probe closes it.
fn assert_untouched_by_two_fallbacks(b: &CircuitBreaker<ManualClock>, clock: &ManualClock) {
    let m = b.metrics();
    assert_eq!(
        (
            m.state,
            m.lifetime.admitted,
            m.lifetime.rejected,
            m.lifetime.failures
        ),
        (State::Open, 1, 2, 1)
    );
    clock.advance(COOLDOWN);
    let probe = b.try_acquire().expect("the probe slot is free");
    probe.success();
    assert_eq!(b.state(), State::Closed);
}

fn fail(b: &CircuitBreaker<ManualClock>) {
    let _ = b.call(|| Err::<(), _>("down"));
}

/// The breaker is open and a probe is due: the half-open round starts with the
/// next call, and its one probe decides.
fn open_with_probe_due(b: &CircuitBreaker<ManualClock>, clock: &ManualClock) {
    fail(b);
    assert_eq!(b.state(), State::Open);
    clock.advance(COOLDOWN);
}

/// Everything a fallback must not change: the metrics snapshot (state, generation,
/// window, streak, lifetime counters, transitions).
fn unchanged(b: &CircuitBreaker<ManualClock>, before: &Metrics) {
    assert_eq!(&b.metrics(), before, "the fallback changed the breaker");
}

#[test]
fn a_rejection_is_answered_by_the_fallback_with_the_rejection_in_hand() {
    let (b, clock) = breaker(1);
    fail(&b);
    clock.advance(Duration::from_secs(4));
    let ran = Cell::new(false);
    let seen = Cell::new(None);
    let answer = b.call_or_else(
        || {
            ran.set(true);
            Ok::<_, &str>("fresh")
        },
        |r: Rejected| {
            seen.set(Some((r.state(), r.retry_after())));
            Ok("cached")
        },
    );
    assert_eq!(answer, Ok("cached"));
    assert!(!ran.get(), "a rejected call never runs");
    assert_eq!(
        seen.get(),
        Some((State::Open, Some(Duration::from_secs(6))))
    );
    let l = b.metrics().lifetime;
    assert_eq!((l.admitted, l.rejected, l.successes), (1, 1, 0));
}

#[test]
fn an_admitted_call_keeps_its_result_and_call_or_else_leaves_failures_alone() {
    let (b, _) = breaker(3);
    let fallback_ran = Cell::new(0);
    let fallback = |_: Rejected| {
        fallback_ran.set(fallback_ran.get() + 1);
        Ok(0)
    };
    assert_eq!(b.call_or_else(|| Ok::<_, &str>(1), fallback), Ok(1));
    assert_eq!(b.call_or_else(|| Err("down"), fallback), Err("down"));
    assert_eq!(fallback_ran.get(), 0);
    let m = b.metrics();
    assert_eq!((m.lifetime.successes, m.lifetime.failures), (1, 1));
    assert_eq!(m.consecutive_failures, 1);
}

#[test]
fn call_or_recover_answers_a_failure_which_still_counts_as_one() {
    let (b, _) = breaker(2);
    let seen = Cell::new(None);
    let answer = b.call_or_recover(
        || Err::<u32, _>("timed out"),
        |e: Error<&str>| {
            seen.set(Some(e));
            Ok::<_, String>(0)
        },
    );
    assert_eq!(answer, Ok(0));
    assert_eq!(seen.get(), Some(Error::Inner("timed out")));
    let m = b.metrics();
    assert_eq!((m.lifetime.failures, m.consecutive_failures), (1, 1));
    // A second answered failure trips the breaker: answering does not hide it.
    let _ = b.call_or_recover(|| Err::<u32, _>("timed out"), |_| Ok::<_, ()>(0));
    assert_eq!(b.state(), State::Open);
    // Then the fallback receives the rejection.
    let answer = b.call_or_recover(
        || Ok::<u32, &str>(1),
        |e| match e {
            Error::Rejected(r) => Ok(u32::from(r.state() == State::Open) * 7),
            Error::Inner(_) => Err("unexpected"),
        },
    );
    assert_eq!(answer, Ok(7));
}

#[test]
fn a_failing_fallback_changes_nothing_in_the_breaker() {
    // Open, with a probe due: a fallback's failure must not count as a probe's.
    let (b, clock) = breaker(1);
    fail(&b);
    let before = b.metrics();
    assert_eq!(
        b.call_or_else(|| Ok::<_, &str>(()), |_| Err("no cache")),
        Err("no cache")
    );
    let mut expected = before;
    expected.lifetime.rejected += 1; // the rejection itself, and nothing else
    unchanged(&b, &expected);
    clock.advance(COOLDOWN);
    assert!(b.call(|| Ok::<_, ()>(())).is_ok(), "the probe is admitted");
    assert_eq!(b.state(), State::Closed);

    // Closed: a failed call answered by a failing fallback is one failure, no more.
    let (b, _) = breaker(2);
    let _ = b.call_or_recover(|| Err::<(), _>("down"), |_| Err::<(), _>("no cache"));
    let m = b.metrics();
    assert_eq!((m.lifetime.failures, m.consecutive_failures), (1, 1));
    assert_eq!(m.state, State::Closed);
}

#[test]
fn a_panicking_fallback_changes_nothing_in_the_breaker() {
    // On a rejection, while a probe is due: the panic takes no probe slot.
    let (b, clock) = breaker(1);
    fail(&b);
    let rejected = catch_unwind(AssertUnwindSafe(|| {
        b.call_or_else(|| Ok::<_, ()>(()), |_| panic!("the cache is gone"))
    }));
    assert!(rejected.is_err());
    let before = b.metrics();
    clock.advance(COOLDOWN);
    let probe = b.try_acquire().expect("the probe slot is free");
    assert!(probe.is_probe());
    probe.success();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(before.lifetime.failures, 1);

    // On a failure: recorded before the fallback ran, once.
    let (b, _) = breaker(2);
    let answered = catch_unwind(AssertUnwindSafe(|| {
        b.call_or_recover(
            || Err::<(), _>("down"),
            |_| -> Result<(), ()> { panic!("the cache is gone") },
        )
    }));
    assert!(answered.is_err());
    let m = b.metrics();
    assert_eq!(
        (m.lifetime.admitted, m.lifetime.failures, m.lifetime.dropped),
        (1, 1, 0),
        "one failure, recorded before the fallback: not a dropped permit"
    );
    assert_eq!((m.consecutive_failures, m.state), (1, State::Closed));
}

#[test]
fn a_fallback_takes_no_probe_while_half_open() {
    let (b, clock) = breaker(1);
    open_with_probe_due(&b, &clock);
    let probe = b.try_acquire().unwrap(); // the one probe, held
    let before = b.metrics();
    for _ in 0..3 {
        let answer = b.call_or_else(
            || Ok::<_, &str>("fresh"),
            |r| {
                assert_eq!(r.state(), State::HalfOpen);
                Err("no cache")
            },
        );
        assert_eq!(answer, Err("no cache"));
    }
    let after = b.metrics();
    assert_eq!(after.lifetime.rejected, before.lifetime.rejected + 3);
    assert_eq!(
        (after.state, after.generation, after.lifetime.failures),
        (before.state, before.generation, before.lifetime.failures)
    );
    probe.success();
    assert_eq!(b.state(), State::Closed);
}

/// A call that panics under `call_or_recover`: the panic propagates, the fallback
/// never runs (there is no error to hand it), and the permit counts as dropped,
/// not as a failure.
#[test]
fn a_panicking_call_propagates_without_running_the_fallback() {
    let (b, _) = breaker(1);
    let ran = Cell::new(false);
    let caught = catch_unwind(AssertUnwindSafe(|| {
        b.call_or_recover(
            || -> Result<u8, ()> { panic!("inner") },
            |_| {
                ran.set(true);
                Ok::<u8, ()>(0)
            },
        )
    }));
    assert!(caught.is_err(), "the panic propagates");
    assert!(!ran.get(), "the fallback ran");
    let m = b.metrics();
    assert_eq!((m.lifetime.failures, m.lifetime.dropped), (0, 1));
    assert_eq!(m.state, State::Closed);
}

/// `call_or_recover` times its call as `call` does: slow successes count as slow
/// and trip the slow-call policy, and the fallback, which only answers errors,
/// never runs for them.
#[test]
fn slow_successes_through_call_or_recover_count_as_slow_and_trip() {
    let (b, clock) = on_manual_clock(
        CircuitBreaker::builder()
            .window(Duration::from_secs(10), 10)
            .slow_calls(Duration::from_millis(100), 0.5)
            .minimum_calls(2),
    );
    for _ in 0..2 {
        let answer = b.call_or_recover(
            || {
                clock.advance(Duration::from_millis(200));
                Ok::<u8, ()>(1)
            },
            |_| Ok::<u8, ()>(0),
        );
        assert_eq!(answer, Ok(1), "the call's own success, not the fallback's");
    }
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.metrics().lifetime.slow, 2);
}

// Async -------------------------------------------------------------------------

/// A fallback whose cache is gone: it panics when polled.
async fn cache_gone<T, E>() -> Result<T, E> {
    panic!("the cache is gone")
}

#[test]
fn async_a_rejection_is_answered_by_the_fallback_future() {
    let (b, _) = breaker(1);
    fail(&b);
    let ran = Cell::new(false);
    let answer = b.call_async_or_else(
        async {
            ran.set(true);
            Ok::<_, &str>("fresh")
        },
        |r: Rejected| async move {
            assert_eq!(r.state(), State::Open);
            Ok("cached")
        },
    );
    assert_eq!(block_on(answer), Ok("cached"));
    assert!(!ran.get());
    let l = b.metrics().lifetime;
    assert_eq!((l.admitted, l.rejected), (1, 1));
}

#[test]
fn async_call_or_recover_answers_failures_after_recording_them() {
    let (b, _) = breaker(2);
    let answer = b.call_async_or_recover(async { Err::<u8, _>("502") }, |e| async move {
        assert_eq!(e, Error::Inner("502"));
        Ok::<_, ()>(0)
    });
    assert_eq!(block_on(answer), Ok(0));
    let m = b.metrics();
    assert_eq!((m.lifetime.failures, m.consecutive_failures), (1, 1));
    // Success passes through without the fallback.
    let answer =
        b.call_async_or_recover(async { Ok::<u8, &str>(5) }, |_| async { Err::<u8, ()>(()) });
    assert_eq!(block_on(answer), Ok(5));
}

#[test]
fn async_a_failing_or_panicking_fallback_changes_nothing_in_the_breaker() {
    let (b, clock) = breaker(1);
    fail(&b);
    let failed = b.call_async_or_else(async { Ok::<(), _>(()) }, |_| async { Err("no cache") });
    assert_eq!(block_on(failed), Err("no cache"));
    let panicked = catch_unwind(AssertUnwindSafe(|| {
        block_on(b.call_async_or_else(async { Ok::<(), &str>(()) }, |_| cache_gone()))
    }));
    assert!(panicked.is_err());
    assert_untouched_by_two_fallbacks(&b, &clock);

    // A failure answered by a panicking fallback: one failure, recorded before.
    let (b, _) = breaker(2);
    let panicked = catch_unwind(AssertUnwindSafe(|| {
        block_on(
            b.call_async_or_recover(async { Err::<(), &str>("down") }, |_| {
                cache_gone::<(), ()>()
            }),
        )
    }));
    assert!(panicked.is_err());
    let m = b.metrics();
    assert_eq!(
        (
            m.lifetime.failures,
            m.lifetime.dropped,
            m.consecutive_failures
        ),
        (1, 0, 1)
    );
}

/// An async call dropped while its probe is pending: the probe's slot comes back,
/// and the fallback, never reached, changes nothing.
#[test]
fn async_a_probe_dropped_while_pending_gives_its_slot_back() {
    let (b, clock) = breaker(1);
    open_with_probe_due(&b, &clock);
    {
        let mut answer = pin!(b.call_async_or_recover(
            std::future::pending::<Result<u8, ()>>(),
            |_: Error<()>| async { Ok::<u8, ()>(0) },
        ));
        assert!(poll_once(answer.as_mut()).is_pending());
        assert_eq!(b.state(), State::HalfOpen);
        assert!(b.try_acquire().is_err(), "the one probe is out");
    }
    b.try_acquire()
        .expect("the probe's slot came back")
        .success();
    assert_eq!(b.state(), State::Closed);
}

/// A fallback future dropped before it answers: the rejection that started it is
/// counted, and nothing else changes.
#[test]
fn async_a_fallback_dropped_while_answering_changes_nothing() {
    let (b, _) = breaker(1);
    fail(&b);
    let before = b.metrics();
    {
        let mut answer = pin!(b.call_async_or_else(async { Ok::<u8, ()>(1) }, |_| {
            std::future::pending::<Result<u8, ()>>()
        }));
        assert!(poll_once(answer.as_mut()).is_pending());
    }
    let mut expected = before;
    expected.lifetime.rejected += 1; // the rejection itself, and nothing else
    unchanged(&b, &expected);
}

#[test]
fn the_async_fallback_futures_are_send() {
    fn assert_send<T: Send>(_: &T) {}
    let b = CircuitBreaker::builder().build().unwrap();
    let f = b.call_async_or_else(async { Ok::<u8, ()>(1) }, |_| async { Ok(0) });
    assert_send(&f);
    let g = b.call_async_or_recover(async { Ok::<u8, ()>(1) }, |_| async { Ok::<u8, ()>(0) });
    assert_send(&g);
    assert_eq!((block_on(f), block_on(g)), (Ok(1), Ok(1)));
}

// Tower -------------------------------------------------------------------------

#[cfg(feature = "tower")]
mod tower_form {
    use super::*;
    use cutout::{
        CircuitBreakerLayer, CircuitBreakerService, FallbackLayer, FallbackService, fallback_fn,
    };
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::task::{Context, Poll};
    use tower::{Service, ServiceBuilder, ServiceExt, service_fn};

    type Breaker = Arc<CircuitBreaker<ManualClock>>;

    /// A backend that answers `Ok(n)` or `Err(n)` for odd `n`, and counts its calls.
    fn backend(
        calls: &Arc<AtomicU32>,
    ) -> impl Service<u32, Response = u32, Error = u32, Future: Send> + Clone {
        let calls = calls.clone();
        service_fn(move |n: u32| {
            calls.fetch_add(1, Ordering::Relaxed);
            async move { if n % 2 == 1 { Err(n) } else { Ok(n) } }
        })
    }

    fn open_breaker(failures: u32) -> (Breaker, ManualClock) {
        let (b, clock) = breaker(failures);
        let b = Arc::new(b);
        fail(&b);
        (b, clock)
    }

    #[test]
    fn a_rejection_is_answered_by_a_fallback_function() {
        let (b, _) = open_breaker(1);
        let calls = Arc::new(AtomicU32::new(0));
        let svc = ServiceBuilder::new()
            .layer(FallbackLayer::new(fallback_fn(|r: Rejected| async move {
                assert_eq!(r.retry_after(), Some(COOLDOWN));
                Ok::<u32, u32>(1000)
            })))
            .layer(CircuitBreakerLayer::new(b.clone()))
            .service(backend(&calls));
        assert_eq!(block_on(svc.clone().oneshot(2)), Ok(1000));
        assert_eq!(
            calls.load(Ordering::Relaxed),
            0,
            "a rejected call never runs"
        );
        let l = b.metrics().lifetime;
        assert_eq!((l.admitted, l.rejected), (1, 1));
    }

    #[test]
    fn a_rejection_is_answered_by_a_fallback_service_and_errors_pass_through() {
        let (b, clock) = open_breaker(1);
        clock.advance(COOLDOWN);
        let calls = Arc::new(AtomicU32::new(0));
        let fallback_calls = Arc::new(AtomicU32::new(0));
        let fallback = {
            let fallback_calls = fallback_calls.clone();
            service_fn(move |_: Rejected| {
                fallback_calls.fetch_add(1, Ordering::Relaxed);
                async { Ok::<u32, u32>(1000) }
            })
        };
        let svc = FallbackService::new(
            CircuitBreakerService::new(backend(&calls), b.clone()),
            fallback,
        );
        // The probe goes through and fails: its error passes through, as it is.
        assert_eq!(block_on(svc.clone().oneshot(3)), Err(3));
        assert_eq!(b.state(), State::Open);
        // Open again: answered.
        assert_eq!(block_on(svc.clone().oneshot(2)), Ok(1000));
        assert_eq!(
            (
                calls.load(Ordering::Relaxed),
                fallback_calls.load(Ordering::Relaxed)
            ),
            (1, 1)
        );
        clock.advance(COOLDOWN * 2);
        assert_eq!(block_on(svc.oneshot(2)), Ok(2), "the next probe closes it");
        assert_eq!(b.state(), State::Closed);
        assert_eq!(fallback_calls.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_failing_or_panicking_fallback_service_changes_nothing_in_the_breaker() {
        let (b, clock) = open_breaker(1);
        let calls = Arc::new(AtomicU32::new(0));
        let svc = ServiceBuilder::new()
            .layer(FallbackLayer::new(fallback_fn(|_: Rejected| async {
                Err::<u32, u32>(503)
            })))
            .layer(CircuitBreakerLayer::new(b.clone()))
            .service(backend(&calls));
        assert_eq!(block_on(svc.oneshot(2)), Err(503));
        let panics = ServiceBuilder::new()
            .layer(FallbackLayer::new(fallback_fn(|_: Rejected| {
                cache_gone::<u32, u32>()
            })))
            .layer(CircuitBreakerLayer::new(b.clone()))
            .service(backend(&calls));
        assert!(catch_unwind(AssertUnwindSafe(|| block_on(panics.oneshot(2)))).is_err());
        assert_untouched_by_two_fallbacks(&b, &clock);
    }

    /// A service that reports a rejection from `poll_ready` (a breaker's service
    /// never does; another may).
    #[derive(Clone)]
    struct RejectsWhenPolled(Rejected);

    impl Service<u32> for RejectsWhenPolled {
        type Response = u32;
        type Error = Error<u32>;
        type Future = std::future::Ready<Result<u32, Error<u32>>>;
        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Err(Error::Rejected(self.0)))
        }
        fn call(&mut self, _: u32) -> Self::Future {
            panic!("called after rejecting in poll_ready")
        }
    }

    #[test]
    fn a_rejection_from_poll_ready_is_answered_without_calling_the_inner_service() {
        let (b, _) = open_breaker(1);
        let rejected = b.try_acquire().unwrap_err();
        let svc = FallbackService::new(
            RejectsWhenPolled(rejected),
            fallback_fn(|r: Rejected| async move {
                Ok::<u32, u32>(if r.state() == State::Open { 100 } else { 0 })
            }),
        );
        assert_eq!(block_on(svc.oneshot(2)), Ok(100));
    }

    /// A service that reports one rejection from `poll_ready`, then is ready and
    /// answers `1`, counting its calls; its clones share both.
    #[derive(Clone)]
    struct RejectsOnce {
        rejection: Arc<std::sync::Mutex<Option<Rejected>>>,
        calls: Arc<AtomicU32>,
    }

    impl Service<u32> for RejectsOnce {
        type Response = u32;
        type Error = Error<u32>;
        type Future = std::future::Ready<Result<u32, Error<u32>>>;
        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            match self.rejection.lock().unwrap().take() {
                Some(r) => Poll::Ready(Err(Error::Rejected(r))),
                None => Poll::Ready(Ok(())),
            }
        }
        fn call(&mut self, _: u32) -> Self::Future {
            self.calls.fetch_add(1, Ordering::Relaxed);
            std::future::ready(Ok(1))
        }
    }

    /// Tower's clone-and-swap (ready the service, swap a clone in, call the ready
    /// one): the clone does not inherit the rejection stored for the ready
    /// service's call, so one rejection answers one request.
    #[test]
    fn a_clone_does_not_inherit_a_rejection_stored_by_poll_ready() {
        let (b, _) = open_breaker(1);
        let inner = RejectsOnce {
            rejection: Arc::new(std::sync::Mutex::new(Some(b.try_acquire().unwrap_err()))),
            calls: Arc::new(AtomicU32::new(0)),
        };
        let inner_calls = inner.calls.clone();
        let answered = Arc::new(AtomicU32::new(0));
        let fallback = {
            let answered = answered.clone();
            fallback_fn(move |_: Rejected| {
                answered.fetch_add(1, Ordering::Relaxed);
                async { Ok::<u32, u32>(0) }
            })
        };
        let mut svc = FallbackService::new(inner, fallback);
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert!(matches!(svc.poll_ready(&mut cx), Poll::Ready(Ok(()))));
        let clone = svc.clone();
        let mut ready = std::mem::replace(&mut svc, clone);
        assert_eq!(block_on(ready.call(2)), Ok(0), "the rejection's fallback");
        assert!(matches!(svc.poll_ready(&mut cx), Poll::Ready(Ok(()))));
        assert_eq!(
            block_on(svc.call(2)),
            Ok(1),
            "the next request reaches the inner service"
        );
        assert_eq!(
            (
                answered.load(Ordering::Relaxed),
                inner_calls.load(Ordering::Relaxed)
            ),
            (1, 1)
        );
    }

    #[test]
    fn the_futures_are_send_and_debug_shows_the_stage() {
        fn assert_send<T: Send>(_: &T) {}
        let (b, _) = open_breaker(1);
        let calls = Arc::new(AtomicU32::new(0));
        let mut svc = FallbackLayer::new(fallback_fn(|_: Rejected| async { Ok(0) }))
            .layer_service(CircuitBreakerLayer::new(b).layer_service(backend(&calls)));
        let fut = block_on(svc.ready()).unwrap().call(2);
        assert_send(&fut);
        assert!(format!("{fut:?}").contains("calling"), "{fut:?}");
        assert_eq!(block_on(fut), Ok(0));
    }

    /// `Layer::layer` under a name that reads in a chain.
    trait LayerService<S>: tower::Layer<S> {
        fn layer_service(&self, s: S) -> Self::Service {
            self.layer(s)
        }
    }
    impl<S, L: tower::Layer<S>> LayerService<S> for L {}
}

/// The async fallbacks' futures are `Send` when the call, the fallback and its
/// future are, as documented, whatever the call's output and error: with
/// `Box<dyn Error>` (not `Send`) as the call's error they were not, since the
/// call's result was held across the fallback's `await` (a reviewer's finding).
#[test]
fn the_async_fallbacks_are_send_whatever_the_calls_error() {
    fn assert_send<T: Send>(_: &T) {}
    type BoxError = Box<dyn std::error::Error>;
    let b = CircuitBreaker::builder().build().unwrap();
    let or_else = b.call_async_or_else(async { Ok::<u8, BoxError>(1) }, |_: Rejected| async {
        Ok::<u8, BoxError>(0)
    });
    assert_send(&or_else);
    let or_recover = b.call_async_or_recover(
        async { Err::<u8, BoxError>("down".into()) },
        |_: Error<BoxError>| async { Ok::<u8, &'static str>(0) },
    );
    assert_send(&or_recover);
    assert_eq!(block_on(or_else).unwrap(), 1);
    assert_eq!(block_on(or_recover), Ok(0));
}
