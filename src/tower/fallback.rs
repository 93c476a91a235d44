//! The tower form of a fallback: [`FallbackLayer`] over a
//! [`CircuitBreakerLayer`](crate::CircuitBreakerLayer) (see [`crate::fallback`] for
//! the sync and async forms).

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
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use cutout::{CircuitBreaker, CircuitBreakerLayer, FallbackLayer, Rejected, fallback_fn};
/// use std::sync::Arc;
/// use tower::{ServiceBuilder, ServiceExt, service_fn};
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
/// assert_eq!(service.clone().oneshot("/price").await?, "fresh /price");
/// breaker.force_open();
/// assert_eq!(service.oneshot("/price").await?, "stale, from the cache");
/// # Ok(())
/// # }
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
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use cutout::{CircuitBreaker, CircuitBreakerService, FallbackService, Rejected, fallback_fn};
/// use std::sync::Arc;
/// use tower::{ServiceExt, service_fn};
///
/// let breaker = Arc::new(CircuitBreaker::builder().build()?);
/// breaker.force_open();
/// let guarded = CircuitBreakerService::new(
///     service_fn(|n: u32| async move { Ok::<u32, std::io::Error>(n * 2) }),
///     breaker,
/// );
/// let service = FallbackService::new(guarded, fallback_fn(|_: Rejected| async { Ok(0) }));
/// assert_eq!(service.oneshot(21).await?, 0);
/// # Ok(())
/// # }
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
