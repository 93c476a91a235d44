//! Async calls: [`CircuitBreaker::call_async`] wraps any future, with no runtime
//! dependency.
//!
//! The wrapper takes its permit at its **first poll**, not when it is created, so a
//! future built early and polled late is admitted (or rejected) by the breaker's
//! state at the time it starts. The permit then travels inside the future: if the
//! future is dropped before it completes (the caller gave up, a timeout won the
//! race), the permit's drop counts it as `dropped` and records it as
//! [`Builder::on_drop`](crate::Builder::on_drop) says: ignored by default (a
//! half-open slot comes back), one slow call if the slow-call policy is on and it
//! ran past the threshold, or a failure if the setting says so. A cancelled call
//! never holds a slot. A call that panicked counts the same way and poisons its
//! future: polled again, it panics rather than admit a second time.

use crate::classify::{Classify, ErrIsFailure};
use crate::clock::Clock;
use crate::permit::{Outcome, Permit};
use crate::{CircuitBreaker, Error};
use pin_project_lite::pin_project;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

impl<C: Clock> CircuitBreaker<C> {
    /// Runs the future `call` through the breaker: `Err` is a failure, `Ok` a
    /// success (the classifier [`ErrIsFailure`], zero-sized: the returned future
    /// holds nothing for it and calls nothing through a pointer).
    ///
    /// Nothing happens until the returned future is first polled; then it asks the
    /// breaker for a permit and, if admitted, polls `call` to completion and records
    /// its outcome. If the returned future is dropped before `call` completes, the
    /// call counts as `dropped` in the metrics and as [`Dropped`](crate::Dropped)
    /// says (by default ignored, giving a half-open slot back). The future is `Send`
    /// when `call` is. If `call` panics, the panic reaches the poller, the call
    /// counts as dropped, and the future is poisoned: a later poll panics instead of
    /// taking a new permit (see [`CallAsync`]'s Panics).
    ///
    /// # Errors
    /// The future resolves to [`Error::Rejected`] if the breaker did not admit the
    /// call (`call` is then dropped unpolled), and to [`Error::Inner`] with `call`'s
    /// own error otherwise.
    ///
    /// # Examples
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use cutout::CircuitBreaker;
    ///
    /// async fn fetch_user(id: u32) -> Result<String, std::io::Error> {
    ///     Ok(format!("user {id}"))
    /// }
    ///
    /// let breaker = CircuitBreaker::builder().build()?;
    /// let user = breaker.call_async(fetch_user(42)).await?;
    /// assert_eq!(user, "user 42");
    /// # Ok(())
    /// # }
    /// ```
    #[inline]
    pub fn call_async<F, T, E>(&self, call: F) -> CallAsync<'_, F, ErrIsFailure, C>
    where
        F: Future<Output = Result<T, E>>,
    {
        CallAsync::new(self, ErrIsFailure, call)
    }

    /// Like [`call_async`](Self::call_async), with `classify` saying what the result
    /// means: a [`Success`](Outcome::Success), a [`Failure`](Outcome::Failure) or
    /// [`Ignored`](Outcome::Ignored) (a 404, the caller's own cancellation): any
    /// `Fn(&Result<T, E>) -> Outcome`. A closure, so that its argument's type is
    /// inferred; a [`Classify`] type goes in one:
    /// `breaker.call_async_with(|r| ErrIsFailure.classify(r), call)`.
    ///
    /// # Errors
    /// As [`call_async`](Self::call_async).
    ///
    /// # Examples
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), cutout::ConfigError> {
    /// use cutout::{CircuitBreaker, Outcome, State};
    ///
    /// let breaker = CircuitBreaker::builder().consecutive_failures(1).build()?;
    /// let not_found_is_fine = |r: &Result<(), u16>| match r {
    ///     Err(404) => Outcome::Ignored,
    ///     Err(_) => Outcome::Failure,
    ///     Ok(()) => Outcome::Success,
    /// };
    /// let result = breaker.call_async_with(not_found_is_fine, async { Err(404) }).await;
    /// assert_eq!(result.unwrap_err().into_inner(), Some(404));
    /// assert_eq!(breaker.state(), State::Closed); // a 404 is not a failure
    /// # Ok(())
    /// # }
    /// ```
    #[inline]
    pub fn call_async_with<F, K, T, E>(&self, classify: K, call: F) -> CallAsync<'_, F, K, C>
    where
        F: Future<Output = Result<T, E>>,
        K: Fn(&Result<T, E>) -> Outcome,
    {
        CallAsync::new(self, classify, call)
    }
}

pin_project! {
    /// The future of [`CircuitBreaker::call_async`] and
    /// [`call_async_with`](CircuitBreaker::call_async_with). `K` is its classifier:
    /// [`ErrIsFailure`] for `call_async`, the given closure for `call_async_with`.
    ///
    /// It resolves to `Result<T, Error<E>>`. Dropping it before it completes counts
    /// the call as `dropped` and records it as [`Dropped`](crate::Dropped) says (by
    /// default ignored, giving a half-open slot back); dropping it before its first
    /// poll does nothing at all. Polling it again after
    /// it completed returns `Pending`.
    ///
    /// # Panics
    /// A panic in the wrapped future (or in the classifier) unwinds through `poll`;
    /// the call's permit is dropped on the way, so the breaker counts the call as
    /// dropped and records it as [`Dropped`](crate::Dropped) says (by default
    /// ignored, and a half-open slot comes back; see [`Permit`]).
    /// The future is then poisoned, like an `async fn` whose body panicked: polling
    /// it again panics with "`CallAsync` polled after its call panicked", and never
    /// takes a new permit or polls the panicked future again. A transition
    /// listener's panic during admission (the first poll after a cooldown moves the
    /// breaker to HalfOpen) reaches the poller too, but poisons nothing: no permit
    /// was taken, the call has not run, and the next poll asks for a permit again.
    /// A wrapped future whose drop panics after it completed has its outcome
    /// recorded first; the panic reaches the poller, and the future is done (a
    /// later poll returns `Pending`). A transition listener's panic as the
    /// outcome is recorded (a probe's success closing the breaker) reaches the
    /// poller with the outcome recorded, and leaves the future poisoned as a
    /// call's panic does.
    ///
    /// # Examples
    /// ```
    /// use cutout::CircuitBreaker;
    /// use std::future::Future;
    /// use std::panic::{AssertUnwindSafe, catch_unwind};
    /// use std::task::{Context, Waker};
    ///
    /// async fn handler() -> Result<(), std::io::Error> {
    ///     panic!("the handler panicked")
    /// }
    ///
    /// let breaker = CircuitBreaker::builder().build()?;
    /// let mut call = Box::pin(breaker.call_async(handler()));
    /// let mut cx = Context::from_waker(Waker::noop());
    /// assert!(catch_unwind(AssertUnwindSafe(|| call.as_mut().poll(&mut cx))).is_err());
    /// assert!(catch_unwind(AssertUnwindSafe(|| call.as_mut().poll(&mut cx))).is_err());
    /// let lifetime = breaker.metrics().lifetime;
    /// assert_eq!((lifetime.admitted, lifetime.dropped), (1, 1)); // one permit only
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    #[must_use = "futures do nothing unless polled; the permit is taken at the first poll"]
    pub struct CallAsync<'a, F, K, C: Clock> {
        breaker: &'a CircuitBreaker<C>,
        // `Some` from admission to the outcome: dropping the future drops it, which
        // records the call as ignored.
        permit: Option<Permit<'a, C>>,
        // `None` once rejected or completed, and while the call is being polled: a
        // call still there without it is one whose poll (or classifier) panicked.
        classify: Option<K>,
        // `None` once rejected or completed, so the inner future is dropped early.
        #[pin]
        call: Option<F>,
    }
}

impl<'a, F, K, C: Clock> CallAsync<'a, F, K, C> {
    /// A call through `breaker` not yet polled: no permit yet.
    #[inline]
    fn new(breaker: &'a CircuitBreaker<C>, classify: K, call: F) -> Self {
        CallAsync {
            breaker,
            permit: None,
            classify: Some(classify),
            call: Some(call),
        }
    }
}

impl<F, K, T, E, C> Future for CallAsync<'_, F, K, C>
where
    F: Future<Output = Result<T, E>>,
    K: Classify<T, E>,
    C: Clock,
{
    type Output = Result<T, Error<E>>;

    // Always inlined, as `try_acquire` and `record` are: with only `#[inline]`,
    // the compiler calls a poll that has two callers (one future type awaited in
    // two places), and the called poll reads back from memory the future its
    // caller has just written there: on a Zen 1, 12.2 ns a call against 5.3
    // inlined, 2.7x the sync `call` against 1.2x (`examples/paired.rs`, "a
    // second loop"; `docs/PERFORMANCE.md`).
    #[inline(always)]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        // The permit and the classifier stay in locals while the call is polled and
        // go back into the future only if the call is pending: a call that is ready
        // at once never round-trips them through memory. A panic in the call unwinds
        // with them out, which poisons the future (see `CallAsync`'s Panics).
        let permit = match this.permit.take() {
            Some(permit) => permit,
            None if this.classify.is_none() => {
                if this.call.is_some() {
                    poisoned();
                }
                return Poll::Pending; // polled after completion
            }
            // A panic here (a transition listener's, on the move to HalfOpen)
            // leaves the future waiting: nothing was admitted, and the next poll
            // asks again.
            None => match this.breaker.try_acquire() {
                Ok(permit) => permit,
                Err(rejected) => {
                    // The classifier out first and dropped last: a call or a
                    // classifier whose drop panics leaves the future done, neither
                    // waiting to be admitted again nor poisoned.
                    let classify = this.classify.take();
                    this.call.set(None);
                    drop(classify);
                    return Poll::Ready(Err(Error::Rejected(rejected)));
                }
            },
        };
        // Unreachable both: a permit is held only with its classifier, and a call
        // is dropped only after its classifier. Were either gone, the permit is
        // dropped (counted as dropped, its slot given back), never kept.
        let Some(classify) = this.classify.take() else {
            return Poll::Pending;
        };
        let Some(call) = this.call.as_mut().as_pin_mut() else {
            return Poll::Pending;
        };
        // A panic in the call unwinds through here and drops the permit, which
        // records the call as ignored.
        match call.poll(cx) {
            Poll::Pending => {
                *this.permit = Some(permit);
                *this.classify = Some(classify);
                Poll::Pending
            }
            Poll::Ready(result) => {
                let outcome = classify.classify(&result);
                // Recorded before the call is dropped: a call whose drop panics
                // loses no outcome (the future is then done).
                permit.record(outcome);
                this.call.set(None);
                Poll::Ready(result.map_err(Error::Inner))
            }
        }
    }
}

/// A poll of a [`CallAsync`] whose call panicked: the panic std's `async fn` gives.
#[cold]
#[inline(never)]
#[track_caller]
fn poisoned() -> ! {
    panic!("`CallAsync` polled after its call panicked")
}

impl<F, K, C: Clock> fmt::Debug for CallAsync<'_, F, K, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let stage = match (&self.permit, &self.classify, &self.call) {
            (Some(_), _, _) => "running",
            (None, Some(_), _) => "waiting",
            (None, None, Some(_)) => "panicked",
            (None, None, None) => "done",
        };
        f.debug_struct("CallAsync")
            .field("stage", &stage)
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(cutout_loom)))]
mod tests {
    use super::*;
    use crate::{ManualClock, State};
    use std::task::Waker;
    use std::time::Duration;

    fn poll_once<F: Future>(f: Pin<&mut F>) -> Poll<F::Output> {
        f.poll(&mut Context::from_waker(Waker::noop()))
    }

    /// A future that is pending until `ready` is set.
    struct Gate<'a>(&'a std::cell::Cell<bool>);
    impl Future for Gate<'_> {
        type Output = Result<u8, &'static str>;
        fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
            if self.0.get() {
                Poll::Ready(Ok(7))
            } else {
                Poll::Pending
            }
        }
    }

    #[test]
    fn the_permit_is_taken_at_the_first_poll_not_at_creation() {
        let clock = ManualClock::new();
        let breaker = CircuitBreaker::builder()
            .consecutive_failures(1)
            .open_duration(Duration::from_secs(1))
            .clock(clock.clone())
            .build()
            .unwrap();
        let open = std::cell::Cell::new(true);
        // Created while Closed, first polled while Open: rejected.
        let mut early = std::pin::pin!(breaker.call_async(Gate(&open)));
        let _ = breaker.call(|| Err::<(), _>("trip"));
        assert_eq!(breaker.state(), State::Open);
        match poll_once(early.as_mut()) {
            Poll::Ready(Err(Error::Rejected(r))) => assert_eq!(r.state(), State::Open),
            other => panic!("expected a rejection, got {other:?}"),
        }
        assert_eq!(breaker.metrics().lifetime.admitted, 1);
        // Polling after completion is Pending, and records nothing more.
        assert!(poll_once(early.as_mut()).is_pending());
        assert_eq!(breaker.metrics().lifetime.rejected, 1);
    }

    /// A future that counts its polls and panics in each.
    struct Panics<'a>(&'a std::cell::Cell<u32>);
    impl Future for Panics<'_> {
        type Output = Result<(), ()>;
        fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
            self.0.set(self.0.get() + 1);
            panic!("the call panicked");
        }
    }

    #[test]
    fn a_poll_after_a_panic_panics_and_neither_admits_nor_polls_the_call_again() {
        use std::panic::{AssertUnwindSafe, catch_unwind};
        let clock = ManualClock::new();
        let breaker = CircuitBreaker::builder()
            .consecutive_failures(1)
            .clock(clock.clone())
            .build()
            .unwrap();
        let polls = std::cell::Cell::new(0);
        let mut call = std::pin::pin!(breaker.call_async(Panics(&polls)));
        let first = catch_unwind(AssertUnwindSafe(|| poll_once(call.as_mut())));
        let first = first.unwrap_err();
        assert_eq!(first.downcast_ref::<&str>(), Some(&"the call panicked"));
        assert!(format!("{call:?}").contains("panicked"));
        for _ in 0..3 {
            let again = catch_unwind(AssertUnwindSafe(|| poll_once(call.as_mut())));
            let message = again.unwrap_err();
            assert_eq!(
                message.downcast_ref::<&str>(),
                Some(&"`CallAsync` polled after its call panicked")
            );
        }
        assert_eq!(polls.get(), 1, "the panicked call was polled again");
        let lifetime = breaker.metrics().lifetime;
        assert_eq!(
            (lifetime.admitted, lifetime.dropped, lifetime.failures),
            (1, 1, 0),
            "one permit, given back as dropped"
        );
        assert_eq!(breaker.state(), State::Closed);
    }

    #[test]
    fn a_panicking_classifier_poisons_the_future_too() {
        use std::panic::{AssertUnwindSafe, catch_unwind};
        let breaker = CircuitBreaker::builder().build().unwrap();
        let classify = |_: &Result<u8, ()>| -> crate::Outcome { panic!("classifier") };
        let mut call = std::pin::pin!(breaker.call_async_with(classify, async { Ok(1) }));
        assert!(catch_unwind(AssertUnwindSafe(|| poll_once(call.as_mut()))).is_err());
        let again = catch_unwind(AssertUnwindSafe(|| poll_once(call.as_mut())));
        assert!(again.is_err(), "polled after its classifier panicked");
        assert_eq!(breaker.metrics().lifetime.admitted, 1);
    }

    #[test]
    fn debug_shows_the_stage() {
        let breaker = CircuitBreaker::builder().build().unwrap();
        let ready = std::cell::Cell::new(false);
        let mut call = std::pin::pin!(breaker.call_async(Gate(&ready)));
        assert!(format!("{call:?}").contains("waiting"));
        assert!(poll_once(call.as_mut()).is_pending());
        assert!(format!("{call:?}").contains("running"));
        ready.set(true);
        assert!(matches!(poll_once(call.as_mut()), Poll::Ready(Ok(7))));
        assert!(format!("{call:?}").contains("done"));
    }
}
