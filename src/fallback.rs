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
    /// use cutout::CircuitBreaker;
    /// # fn block_on<F: std::future::Future>(f: F) -> F::Output {
    /// #     let mut f = std::pin::pin!(f);
    /// #     let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    /// #     for _ in 0..1000 {
    /// #         if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; }
    /// #     }
    /// #     panic!("still pending after 1000 polls")
    /// # }
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
    /// assert_eq!(block_on(fresh)?, "profile 7");
    /// breaker.force_open();
    /// let cached = breaker.call_async_or_else(fetch_profile(7), |_| cached_profile(7));
    /// assert_eq!(block_on(cached)?, "profile 7 (cached)");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
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
    /// use cutout::{CircuitBreaker, Error};
    /// # fn block_on<F: std::future::Future>(f: F) -> F::Output {
    /// #     let mut f = std::pin::pin!(f);
    /// #     let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    /// #     for _ in 0..1000 {
    /// #         if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; }
    /// #     }
    /// #     panic!("still pending after 1000 polls")
    /// # }
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
    /// assert_eq!(block_on(answer), Ok(0));
    /// assert_eq!(breaker.state(), cutout::State::Open); // the failure still counted
    /// # Ok::<(), cutout::ConfigError>(())
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

#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub use self::service::{FallbackFn, FallbackFuture, FallbackLayer, FallbackService, fallback_fn};

/// The tower form: [`FallbackLayer`] over a [`CircuitBreakerLayer`](crate::CircuitBreakerLayer).
#[cfg(feature = "tower")]
mod service {
    use crate::{Error, Rejected};
    use ::tower::{Layer, Service};
    use pin_project_lite::pin_project;
    use std::fmt;
    use std::future::Future;
    use std::pin::Pin;
    use std::task::{Context, Poll, ready};

    /// A tower [`Layer`] that answers the rejections of the service below it (a
    /// [`CircuitBreakerService`](crate::CircuitBreakerService)) with a fallback
    /// service: any `Service<Rejected>` with the same response and the inner error,
    /// or a function through [`fallback_fn`].
    ///
    /// The wrapped service's error is [`Error<E>`](Error); the fallback service's
    /// is `E`, and so is the [`FallbackService`]'s: a rejection becomes the
    /// fallback's answer, `Error::Inner(e)` becomes `e`. The fallback receives the
    /// [`Rejected`] (for example for a `Retry-After` header), not the request, which
    /// the breaker's service consumed. It runs outside the breaker: its result is
    /// not an outcome, and a fallback that fails or panics changes nothing in the
    /// breaker.
    ///
    /// The fallback is cloned into each call's future (as a classifier is), so
    /// keep its clone cheap: a function, or a closure over a `&'static` or a small
    /// `Copy` value. A closure that holds an `Arc` clones it on every call.
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, CircuitBreakerLayer, FallbackLayer, Rejected, fallback_fn};
    /// use std::sync::Arc;
    /// use tower::{ServiceBuilder, ServiceExt, service_fn};
    /// # fn block_on<F: std::future::Future>(f: F) -> F::Output {
    /// #     let mut f = std::pin::pin!(f);
    /// #     let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    /// #     for _ in 0..1000 {
    /// #         if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; }
    /// #     }
    /// #     panic!("still pending after 1000 polls")
    /// # }
    ///
    /// let breaker = Arc::new(CircuitBreaker::builder().build()?);
    /// let backend = service_fn(|path: &'static str| async move {
    ///     Ok::<String, std::io::Error>(format!("fresh {path}"))
    /// });
    /// let service = ServiceBuilder::new()
    ///     .layer(FallbackLayer::new(fallback_fn(|_: Rejected| async {
    ///         Ok::<_, std::io::Error>("stale, from the cache".to_owned())
    ///     })))
    ///     .layer(CircuitBreakerLayer::new(breaker.clone()))
    ///     .service(backend);
    ///
    /// assert_eq!(block_on(service.clone().oneshot("/price"))?, "fresh /price");
    /// breaker.force_open();
    /// assert_eq!(block_on(service.oneshot("/price"))?, "stale, from the cache");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[derive(Clone, Debug)]
    pub struct FallbackLayer<F> {
        fallback: F,
    }

    impl<F> FallbackLayer<F> {
        /// A layer whose services answer rejections with `fallback`, a
        /// `Service<Rejected>` (see [`fallback_fn`] for a function).
        ///
        /// # Examples
        /// ```
        /// use cutout::{FallbackLayer, Rejected, fallback_fn};
        ///
        /// let layer = FallbackLayer::new(fallback_fn(|r: Rejected| async move {
        ///     Ok::<_, std::io::Error>(format!("busy, retry after {:?}", r.retry_after()))
        /// }));
        /// # let _ = layer;
        /// ```
        pub fn new(fallback: F) -> Self {
            FallbackLayer { fallback }
        }
    }

    impl<S, F: Clone> Layer<S> for FallbackLayer<F> {
        type Service = FallbackService<S, F>;

        fn layer(&self, inner: S) -> Self::Service {
            FallbackService::new(inner, self.fallback.clone())
        }
    }

    /// A service whose rejections are answered by a fallback service; see
    /// [`FallbackLayer`].
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, CircuitBreakerService, FallbackService, Rejected, fallback_fn};
    /// use std::sync::Arc;
    /// use tower::{ServiceExt, service_fn};
    /// # fn block_on<F: std::future::Future>(f: F) -> F::Output {
    /// #     let mut f = std::pin::pin!(f);
    /// #     let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    /// #     for _ in 0..1000 {
    /// #         if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; }
    /// #     }
    /// #     panic!("still pending after 1000 polls")
    /// # }
    ///
    /// let breaker = Arc::new(CircuitBreaker::builder().build()?);
    /// breaker.force_open();
    /// let guarded = CircuitBreakerService::new(
    ///     service_fn(|n: u32| async move { Ok::<u32, std::io::Error>(n * 2) }),
    ///     breaker,
    /// );
    /// let service = FallbackService::new(guarded, fallback_fn(|_: Rejected| async { Ok(0) }));
    /// assert_eq!(block_on(service.oneshot(21))?, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[derive(Debug)]
    pub struct FallbackService<S, F> {
        inner: S,
        fallback: F,
        /// A rejection the inner service reported from `poll_ready`: the next call
        /// is answered by the fallback without reaching the inner service.
        rejected: Option<Rejected>,
    }

    /// A clone is not ready: a rejection this service stored from `poll_ready`
    /// answers its own next call, not the clone's too (tower's clone-and-swap
    /// calls the ready service and keeps the clone for the next request).
    impl<S: Clone, F: Clone> Clone for FallbackService<S, F> {
        fn clone(&self) -> Self {
            FallbackService::new(self.inner.clone(), self.fallback.clone())
        }
    }

    impl<S, F> FallbackService<S, F> {
        /// `inner` (a [`CircuitBreakerService`](crate::CircuitBreakerService)), with
        /// its rejections answered by `fallback`.
        ///
        /// # Examples
        /// See [`FallbackService`].
        pub fn new(inner: S, fallback: F) -> Self {
            FallbackService {
                inner,
                fallback,
                rejected: None,
            }
        }

        /// The wrapped service.
        ///
        /// # Examples
        /// ```
        /// use cutout::{FallbackService, Rejected, fallback_fn};
        ///
        /// let fallback = fallback_fn(|_: Rejected| async { Ok::<u8, ()>(0) });
        /// let service = FallbackService::new("inner", fallback);
        /// assert_eq!(*service.get_ref(), "inner");
        /// assert_eq!(service.into_inner(), "inner");
        /// ```
        pub fn get_ref(&self) -> &S {
            &self.inner
        }

        /// The wrapped service, mutably.
        ///
        /// # Examples
        /// ```
        /// use cutout::{FallbackService, Rejected, fallback_fn};
        ///
        /// let fallback = fallback_fn(|_: Rejected| async { Ok::<u8, ()>(0) });
        /// let mut service = FallbackService::new(1u8, fallback);
        /// *service.get_mut() += 1;
        /// assert_eq!(*service.get_ref(), 2);
        /// ```
        pub fn get_mut(&mut self) -> &mut S {
            &mut self.inner
        }

        /// The wrapped service, unwrapped.
        ///
        /// # Examples
        /// See [`get_ref`](Self::get_ref).
        pub fn into_inner(self) -> S {
            self.inner
        }
    }

    impl<S, F, Request, E> Service<Request> for FallbackService<S, F>
    where
        S: Service<Request, Error = Error<E>>,
        F: Service<Rejected, Response = S::Response, Error = E> + Clone,
    {
        type Response = S::Response;
        type Error = E;
        type Future = FallbackFuture<S::Future, F>;

        /// The inner service's readiness. A rejection reported here (a breaker's
        /// service never does: its readiness takes no permit) makes this service
        /// ready, and the next call is answered by the fallback.
        fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            if self.rejected.is_some() {
                return Poll::Ready(Ok(()));
            }
            match ready!(self.inner.poll_ready(cx)) {
                Ok(()) => Poll::Ready(Ok(())),
                Err(Error::Inner(e)) => Poll::Ready(Err(e)),
                Err(Error::Rejected(rejected)) => {
                    self.rejected = Some(rejected);
                    Poll::Ready(Ok(()))
                }
            }
        }

        fn call(&mut self, request: Request) -> Self::Future {
            let stage = match self.rejected.take() {
                Some(rejected) => Stage::Readying {
                    fallback: self.fallback.clone(),
                    rejected,
                },
                None => Stage::Calling {
                    future: self.inner.call(request),
                    fallback: Some(self.fallback.clone()),
                },
            };
            FallbackFuture { stage }
        }
    }

    pin_project! {
        /// The response future of [`FallbackService`]: the inner call's, then, if
        /// it was rejected, the fallback's.
        ///
        /// Polling it again after it completed returns `Pending`.
        #[must_use = "futures do nothing unless polled"]
        pub struct FallbackFuture<Fut, F>
        where
            F: Service<Rejected>,
        {
            #[pin]
            stage: Stage<Fut, F>,
        }
    }

    pin_project! {
        #[project = StageProj]
        enum Stage<Fut, F>
        where
            F: Service<Rejected>,
        {
            // The inner service's call; `fallback` is `Some` until it is rejected.
            Calling { #[pin] future: Fut, fallback: Option<F> },
            // Rejected: waiting for the fallback service to be ready.
            Readying { fallback: F, rejected: Rejected },
            // The fallback's call.
            Answering { #[pin] future: F::Future },
            Done,
        }
    }

    impl<Fut, F, T, E> Future for FallbackFuture<Fut, F>
    where
        Fut: Future<Output = Result<T, Error<E>>>,
        F: Service<Rejected, Response = T, Error = E>,
    {
        type Output = Result<T, E>;

        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
            let mut stage = self.project().stage;
            loop {
                match stage.as_mut().project() {
                    StageProj::Calling { future, fallback } => {
                        let rejected = match ready!(future.poll(cx)) {
                            Ok(response) => {
                                stage.set(Stage::Done);
                                return Poll::Ready(Ok(response));
                            }
                            Err(Error::Inner(e)) => {
                                stage.set(Stage::Done);
                                return Poll::Ready(Err(e));
                            }
                            Err(Error::Rejected(rejected)) => rejected,
                        };
                        match fallback.take() {
                            Some(fallback) => stage.set(Stage::Readying { fallback, rejected }),
                            None => stage.set(Stage::Done), // unreachable: taken only here
                        }
                    }
                    StageProj::Readying { fallback, rejected } => {
                        if let Err(e) = ready!(fallback.poll_ready(cx)) {
                            stage.set(Stage::Done);
                            return Poll::Ready(Err(e));
                        }
                        let future = fallback.call(*rejected);
                        stage.set(Stage::Answering { future });
                    }
                    StageProj::Answering { future } => {
                        let answer = ready!(future.poll(cx));
                        stage.set(Stage::Done);
                        return Poll::Ready(answer);
                    }
                    StageProj::Done => return Poll::Pending, // polled after completion
                }
            }
        }
    }

    impl<Fut, F: Service<Rejected>> fmt::Debug for FallbackFuture<Fut, F> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            let stage = match &self.stage {
                Stage::Calling { .. } => "calling",
                Stage::Readying { .. } => "readying the fallback",
                Stage::Answering { .. } => "answering",
                Stage::Done => "done",
            };
            f.debug_struct("FallbackFuture")
                .field("stage", &stage)
                .finish_non_exhaustive()
        }
    }

    /// A fallback service made of a function from the [`Rejected`] to a future of
    /// the answer, for [`FallbackLayer`]: always ready.
    ///
    /// # Examples
    /// ```
    /// use cutout::{Rejected, fallback_fn};
    ///
    /// let busy = fallback_fn(|r: Rejected| async move {
    ///     Ok::<_, std::io::Error>((503, r.retry_after()))
    /// });
    /// # let _ = busy;
    /// ```
    pub fn fallback_fn<G>(f: G) -> FallbackFn<G> {
        FallbackFn { f }
    }

    /// The service of [`fallback_fn`].
    ///
    /// # Examples
    /// See [`fallback_fn`].
    #[derive(Clone, Copy)]
    pub struct FallbackFn<G> {
        f: G,
    }

    impl<G, Fut, T, E> Service<Rejected> for FallbackFn<G>
    where
        G: FnMut(Rejected) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        type Response = T;
        type Error = E;
        type Future = Fut;

        #[inline]
        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), E>> {
            Poll::Ready(Ok(()))
        }

        #[inline]
        fn call(&mut self, rejected: Rejected) -> Fut {
            (self.f)(rejected)
        }
    }

    impl<G> fmt::Debug for FallbackFn<G> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("FallbackFn").finish_non_exhaustive()
        }
    }
}
