//! Fallbacks: an answer for a call the breaker rejected (and, if the caller says
//! so, for a call that failed), instead of an error.
//!
//! Sync and async: [`CircuitBreaker::call_or_else`] and
//! [`call_async_or_else`](CircuitBreaker::call_async_or_else) answer a rejection;
//! [`call_or_recover`](CircuitBreaker::call_or_recover) and
//! [`call_async_or_recover`](CircuitBreaker::call_async_or_recover) answer a
//! rejection or a failure. The fallback receives the [`Rejected`] (or the
//! [`Error`]) so it can choose: a cached value while the retry time is short, an
//! error when there is nothing to serve. With the `tower` feature,
//! `FallbackLayer` answers a `CircuitBreakerLayer`'s rejections with a fallback
//! service or function (`fallback_fn`).
//!
//! # The fallback runs outside the breaker
//! The call's outcome is recorded before the fallback starts, and the fallback
//! takes no permit: what it returns is not an outcome. A fallback that fails (or
//! panics) changes nothing in the breaker: no failure is counted, no streak grows,
//! no probe slot is used. A failed call answered by a fallback is still one failure;
//! a rejection answered by one is still one rejection.

use crate::clock::Clock;
use crate::{CircuitBreaker, Error, Rejected};
use std::future::Future;

impl<C: Clock> CircuitBreaker<C> {
    /// Runs `call` through the breaker (as [`call`](Self::call)); if the breaker
    /// rejects it, returns what `fallback` makes of the [`Rejected`] instead.
    ///
    /// `call`'s own result, success or error, is returned as it is. `fallback` runs
    /// outside the breaker: its result is not an outcome, and a fallback that fails
    /// or panics changes nothing in the breaker (see the [module](crate::fallback)).
    ///
    /// # Errors
    /// `call`'s error if it ran and failed; `fallback`'s if it was rejected and the
    /// fallback has nothing to serve.
    ///
    /// # Examples
    /// ```
    /// use cutout::CircuitBreaker;
    ///
    /// let breaker = CircuitBreaker::builder().build()?;
    /// breaker.force_open();
    /// let price = breaker.call_or_else(
    ///     || Err::<u32, _>("the pricing service is down"),
    ///     |rejected| {
    ///         assert!(rejected.retry_after().is_none()); // forced open
    ///         Ok(100) // the last known price
    ///     },
    /// );
    /// assert_eq!(price, Ok(100));
    /// assert_eq!(breaker.metrics().lifetime.rejected, 1);
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    #[inline]
    pub fn call_or_else<T, E>(
        &self,
        call: impl FnOnce() -> Result<T, E>,
        fallback: impl FnOnce(Rejected) -> Result<T, E>,
    ) -> Result<T, E> {
        match self.call(call) {
            Ok(value) => Ok(value),
            Err(Error::Inner(e)) => Err(e),
            Err(Error::Rejected(rejected)) => fallback(rejected),
        }
    }

    /// Runs `call` through the breaker (as [`call`](Self::call)); if the breaker
    /// rejects it or it fails, returns what `fallback` makes of the [`Error`]
    /// instead: [`Error::Rejected`] or [`Error::Inner`] with `call`'s error.
    ///
    /// A failure is recorded as a failure before `fallback` runs: answering it does
    /// not make it a success. `fallback` runs outside the breaker (see the
    /// [module](crate::fallback)).
    ///
    /// # Errors
    /// `fallback`'s error, if it has nothing to serve (it may pass `call`'s error on).
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, Error};
    ///
    /// let breaker = CircuitBreaker::builder().consecutive_failures(3).build()?;
    /// let greeting = breaker.call_or_recover(
    ///     || Err::<String, _>(std::io::Error::other("timed out")),
    ///     |error| match error {
    ///         Error::Rejected(_) => Ok("hello (from cache)".to_owned()),
    ///         Error::Inner(e) if e.kind() == std::io::ErrorKind::Other => {
    ///             Ok("hello (degraded)".to_owned())
    ///         }
    ///         Error::Inner(e) => Err(e),
    ///     },
    /// );
    /// assert_eq!(greeting?, "hello (degraded)");
    /// assert_eq!(breaker.metrics().lifetime.failures, 1); // still a failure
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn call_or_recover<T, E, E2>(
        &self,
        call: impl FnOnce() -> Result<T, E>,
        fallback: impl FnOnce(Error<E>) -> Result<T, E2>,
    ) -> Result<T, E2> {
        self.call(call).or_else(fallback)
    }

    /// The async [`call_or_else`](Self::call_or_else): runs the future `call`
    /// through the breaker (as [`call_async`](Self::call_async)); if the breaker
    /// rejects it, resolves to the future `fallback` makes of the [`Rejected`].
    ///
    /// `call`'s own result is returned as it is. Nothing happens until the returned
    /// future is polled; the fallback's future starts only after `call`'s outcome
    /// was settled (a rejection, here), outside the breaker. The future is `Send`
    /// when `call`, `fallback` and its future are.
    ///
    /// # Errors
    /// As [`call_or_else`](Self::call_or_else).
    ///
    /// # Panics
    /// If polled again after it completed (as any `async fn`'s future; a
    /// [`CallAsync`](crate::CallAsync) returns `Pending` instead).
    ///
    /// # Examples
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use cutout::CircuitBreaker;
    ///
    /// async fn fetch_profile(id: u32) -> Result<String, std::io::Error> {
    ///     Ok(format!("profile {id}"))
    /// }
    /// async fn cached_profile(id: u32) -> Result<String, std::io::Error> {
    ///     Ok(format!("profile {id} (cached)"))
    /// }
    ///
    /// let breaker = CircuitBreaker::builder().build()?;
    /// let fresh = breaker.call_async_or_else(fetch_profile(7), |_| cached_profile(7));
    /// assert_eq!(fresh.await?, "profile 7");
    /// breaker.force_open();
    /// let cached = breaker.call_async_or_else(fetch_profile(7), |_| cached_profile(7));
    /// assert_eq!(cached.await?, "profile 7 (cached)");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn call_async_or_else<F, G, FB, T, E>(&self, call: F, fallback: G) -> Result<T, E>
    where
        F: Future<Output = Result<T, E>>,
        G: FnOnce(Rejected) -> FB,
        FB: Future<Output = Result<T, E>>,
    {
        // The rejection out of the `match` before the fallback is awaited: a
        // scrutinee held across that `await` would make the future `Send` only
        // with `T` and `E` `Send` too.
        let rejected = match self.call_async(call).await {
            Ok(value) => return Ok(value),
            Err(Error::Inner(e)) => return Err(e),
            Err(Error::Rejected(rejected)) => rejected,
        };
        fallback(rejected).await
    }

    /// The async [`call_or_recover`](Self::call_or_recover): runs the future `call`
    /// through the breaker; if the breaker rejects it or it fails, resolves to the
    /// future `fallback` makes of the [`Error`].
    ///
    /// A failure is recorded before the fallback's future starts, outside the
    /// breaker. The future is `Send` when `call`, `fallback` and its future are.
    ///
    /// # Errors
    /// As [`call_or_recover`](Self::call_or_recover).
    ///
    /// # Panics
    /// If polled again after it completed, as
    /// [`call_async_or_else`](Self::call_async_or_else).
    ///
    /// # Examples
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), cutout::ConfigError> {
    /// use cutout::{CircuitBreaker, Error};
    ///
    /// let breaker = CircuitBreaker::builder().consecutive_failures(1).build()?;
    /// let answer = breaker.call_async_or_recover(
    ///     async { Err::<u32, _>("upstream 502") },
    ///     |error: Error<&str>| async move {
    ///         match error {
    ///             Error::Inner("upstream 502") | Error::Rejected(_) => Ok::<_, &str>(0),
    ///             Error::Inner(other) => Err(other),
    ///         }
    ///     },
    /// );
    /// assert_eq!(answer.await, Ok(0));
    /// assert_eq!(breaker.state(), cutout::State::Open); // the failure still counted
    /// # Ok(())
    /// # }
    /// ```
    pub async fn call_async_or_recover<F, G, FB, T, E, E2>(
        &self,
        call: F,
        fallback: G,
    ) -> Result<T, E2>
    where
        F: Future<Output = Result<T, E>>,
        G: FnOnce(Error<E>) -> FB,
        FB: Future<Output = Result<T, E2>>,
    {
        // As in `call_async_or_else`: nothing of the call's held across the
        // fallback's `await`.
        let error = match self.call_async(call).await {
            Ok(value) => return Ok(value),
            Err(error) => error,
        };
        fallback(error).await
    }
}
