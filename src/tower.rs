//! A tower [`Layer`] and [`Service`] (the `tower` feature).
//!
//! See [`CircuitBreakerLayer`] for how readiness, calls and errors behave.

use crate::clock::{Clock, DefaultClock};
use crate::permit::{Outcome, Ticket};
use crate::{CircuitBreaker, Error, Rejected};
use ::tower::{Layer, Service};
use pin_project_lite::pin_project;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

/// Says what a service's result means to the breaker.
///
/// Implemented by every `Fn(&Result<T, E>) -> Outcome` and by [`ErrIsFailure`], the
/// default. With HTTP, a classifier can make a `503` response a failure and a `404`
/// a success.
///
/// # Examples
/// ```
/// use cutout::{Classify, Outcome};
///
/// let by_status = |r: &Result<u16, std::io::Error>| match r {
///     Ok(status) if *status >= 500 => Outcome::Failure,
///     Ok(_) => Outcome::Success, // a 404 says the dependency is up
///     Err(_) => Outcome::Failure,
/// };
/// assert_eq!(by_status.classify(&Ok(503)), Outcome::Failure);
/// assert_eq!(by_status.classify(&Ok(404)), Outcome::Success);
/// ```
pub trait Classify<T, E> {
    /// The outcome of `result`.
    fn classify(&self, result: &Result<T, E>) -> Outcome;
}

impl<T, E, F: Fn(&Result<T, E>) -> Outcome> Classify<T, E> for F {
    #[inline]
    fn classify(&self, result: &Result<T, E>) -> Outcome {
        self(result)
    }
}

/// The default classifier: `Ok` is a success, `Err` a failure (as [`Outcome::of`]).
///
/// # Examples
/// ```
/// use cutout::{Classify, ErrIsFailure, Outcome};
///
/// assert_eq!(ErrIsFailure.classify(&Ok::<_, ()>(200)), Outcome::Success);
/// assert_eq!(ErrIsFailure.classify(&Err::<u16, _>("reset")), Outcome::Failure);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ErrIsFailure;

impl<T, E> Classify<T, E> for ErrIsFailure {
    #[inline]
    fn classify(&self, result: &Result<T, E>) -> Outcome {
        Outcome::of(result)
    }
}

/// A tower [`Layer`] that puts one shared breaker in front of a service.
///
/// [`CircuitBreakerService`] wraps any `Service<Request>`. Its `poll_ready` only
/// asks the inner service: it takes no permit and never uses a half-open probe. Its
/// `call` asks the breaker for a permit; a rejected request never reaches the inner
/// service and resolves at once to [`Error::Rejected`], which carries
/// [`retry_after`](crate::Rejected::retry_after) for a `503` with `Retry-After`. An
/// admitted request's response future carries the permit and records the
/// classified outcome when it completes; dropped before that (a timeout outside
/// this layer, a client that went away), it records the call as
/// [`Dropped`](crate::Dropped) says: ignored by default, giving a half-open slot
/// back; slow if the slow-call policy is on and it ran past the threshold; a
/// failure if [`Builder::on_drop`](crate::Builder::on_drop) says so.
///
/// The error is [`Error<S::Error>`](Error), a `std::error::Error` whenever the inner
/// error is one, so it boxes into tower's `BoxError` as it is. When the inner error
/// is already a `BoxError`, map it by hand: `Error::Rejected(r)` boxes as the
/// [`Rejected`] (for `downcast_ref`), `Error::Inner(e)` is `e`.
///
/// # Examples
/// ```
/// use cutout::{CircuitBreaker, CircuitBreakerLayer, Error, Outcome};
/// use std::sync::Arc;
/// use tower::{Layer, ServiceExt, service_fn};
/// # fn block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     let mut f = std::pin::pin!(f);
/// #     let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
/// #     loop {
/// #         if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; }
/// #     }
/// # }
///
/// let breaker = Arc::new(CircuitBreaker::builder().consecutive_failures(2).build()?);
/// let backend = service_fn(|status: u16| async move { Ok::<u16, std::io::Error>(status) });
/// let service = CircuitBreakerLayer::new(breaker)
///     .classify(|r: &Result<u16, std::io::Error>| match r {
///         Ok(status) if *status >= 500 => Outcome::Failure,
///         Ok(_) => Outcome::Success,
///         Err(_) => Outcome::Failure,
///     })
///     .layer(backend);
///
/// // Two 503s from the backend trip the breaker ...
/// for _ in 0..2 {
///     assert_eq!(block_on(service.clone().oneshot(503))?, 503);
/// }
/// // ... and the next request never reaches it.
/// match block_on(service.oneshot(200)) {
///     Err(Error::Rejected(r)) => assert!(r.retry_after().is_some()), // for Retry-After
///     other => panic!("expected a rejection, got {other:?}"),
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct CircuitBreakerLayer<C: Clock = DefaultClock, K = ErrIsFailure> {
    breaker: Arc<CircuitBreaker<C>>,
    classify: K,
}

impl<C: Clock> CircuitBreakerLayer<C> {
    /// A layer whose services all go through `breaker`, classifying `Err` as a
    /// failure and `Ok` as a success.
    pub fn new(breaker: Arc<CircuitBreaker<C>>) -> Self {
        CircuitBreakerLayer {
            breaker,
            classify: ErrIsFailure,
        }
    }
}

impl<C: Clock, K> CircuitBreakerLayer<C, K> {
    /// Classifies each `Result<Response, Error>` with `classify` instead.
    pub fn classify<K2>(self, classify: K2) -> CircuitBreakerLayer<C, K2> {
        CircuitBreakerLayer {
            breaker: self.breaker,
            classify,
        }
    }

    /// The shared breaker.
    pub fn breaker(&self) -> &Arc<CircuitBreaker<C>> {
        &self.breaker
    }
}

impl<C: Clock, K: Clone> Clone for CircuitBreakerLayer<C, K> {
    fn clone(&self) -> Self {
        CircuitBreakerLayer {
            breaker: self.breaker.clone(),
            classify: self.classify.clone(),
        }
    }
}

impl<S, C: Clock, K: Clone> Layer<S> for CircuitBreakerLayer<C, K> {
    type Service = CircuitBreakerService<S, C, K>;

    fn layer(&self, inner: S) -> Self::Service {
        CircuitBreakerService {
            inner,
            lease: Lease::new(self.breaker.clone()),
            classify: self.classify.clone(),
        }
    }
}

impl<C: Clock, K> fmt::Debug for CircuitBreakerLayer<C, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CircuitBreakerLayer")
            .field("breaker", &self.breaker)
            .finish_non_exhaustive()
    }
}

/// A service behind a circuit breaker; built by [`CircuitBreakerLayer`] or
/// [`CircuitBreakerService::new`].
///
/// # Examples
/// ```
/// use cutout::{CircuitBreaker, CircuitBreakerService, Error, State};
/// use std::sync::Arc;
/// use tower::{ServiceExt, service_fn};
/// # fn block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     let mut f = std::pin::pin!(f);
/// #     let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
/// #     loop {
/// #         if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; }
/// #     }
/// # }
///
/// let breaker = Arc::new(CircuitBreaker::builder().build()?);
/// let echo = service_fn(|req: &'static str| async move { Ok::<_, std::io::Error>(req) });
/// let service = CircuitBreakerService::new(echo, breaker.clone());
///
/// assert_eq!(block_on(service.clone().oneshot("ping"))?, "ping");
/// breaker.force_open();
/// match block_on(service.oneshot("ping")) {
///     Err(Error::Rejected(r)) => assert_eq!(r.state(), State::ForcedOpen),
///     other => panic!("expected a rejection, got {other:?}"),
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct CircuitBreakerService<S, C: Clock = DefaultClock, K = ErrIsFailure> {
    inner: S,
    lease: Arc<Lease<C>>,
    classify: K,
}

/// A service's hold on its breaker, which its response futures share: an admitted
/// call's future clones this `Arc`, not the breaker's, so the reference count it
/// writes (twice a call) is the service's own, on a line of its own, not one
/// that every thread's service writes. The service and its clones share one lease;
/// [`CircuitBreakerLayer::layer`] and [`CircuitBreakerService::new`] make a new one
/// (one allocation), so a service built for each connection or thread writes only
/// its own line (see `docs/PERFORMANCE.md`, "The tower path").
///
/// Aligned to 128 bytes: the counts of the `Arc` come first in its allocation and
/// take a whole 128-byte block (two lines, for the adjacent-line prefetcher), so no
/// neighbouring allocation shares it.
#[repr(align(128))]
struct Lease<C: Clock> {
    breaker: Arc<CircuitBreaker<C>>,
}

impl<C: Clock> Lease<C> {
    fn new(breaker: Arc<CircuitBreaker<C>>) -> Arc<Lease<C>> {
        Arc::new(Lease { breaker })
    }
}

/// An admitted call's permit in a response future: [`OwnedPermit`](crate::OwnedPermit)
/// with the service's lease instead of the breaker's `Arc`.
struct LeasedPermit<C: Clock> {
    lease: Arc<Lease<C>>,
    /// `None` once recorded.
    ticket: Option<Ticket>,
}

impl<C: Clock> LeasedPermit<C> {
    fn record(mut self, outcome: Outcome) {
        if let Some(ticket) = self.ticket.take() {
            self.lease.breaker.record(ticket, outcome);
        }
    }
}

impl<C: Clock> Drop for LeasedPermit<C> {
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket.take() {
            self.lease.breaker.abandon(ticket);
        }
    }
}

impl<C: Clock> fmt::Debug for LeasedPermit<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedPermit")
            .field("ticket", &self.ticket)
            .finish()
    }
}

impl<S, C: Clock> CircuitBreakerService<S, C> {
    /// `inner` behind `breaker`, classifying `Err` as a failure and `Ok` as a
    /// success.
    pub fn new(inner: S, breaker: Arc<CircuitBreaker<C>>) -> Self {
        CircuitBreakerService {
            inner,
            lease: Lease::new(breaker),
            classify: ErrIsFailure,
        }
    }
}

impl<S, C: Clock, K> CircuitBreakerService<S, C, K> {
    /// Classifies each `Result<Response, Error>` with `classify` instead.
    pub fn classify<K2>(self, classify: K2) -> CircuitBreakerService<S, C, K2> {
        CircuitBreakerService {
            inner: self.inner,
            lease: self.lease,
            classify,
        }
    }

    /// The shared breaker.
    pub fn breaker(&self) -> &Arc<CircuitBreaker<C>> {
        &self.lease.breaker
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Unwraps the inner service.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, C, K, Request> Service<Request> for CircuitBreakerService<S, C, K>
where
    S: Service<Request>,
    C: Clock,
    K: Classify<S::Response, S::Error> + Clone,
{
    type Response = S::Response;
    type Error = Error<S::Error>;
    type Future = ResponseFuture<S::Future, K, C>;

    /// The inner service's readiness. Takes no permit: a ready service whose breaker
    /// is open still rejects in `call`, and readiness never uses a probe.
    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Error::Inner)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        match self.lease.breaker.acquire() {
            Ok(ticket) => ResponseFuture {
                response: Some(self.inner.call(request)),
                permit: Some((
                    LeasedPermit {
                        lease: self.lease.clone(),
                        ticket: Some(ticket),
                    },
                    self.classify.clone(),
                )),
                rejected: None,
            },
            Err(rejected) => ResponseFuture {
                response: None,
                permit: None,
                rejected: Some(rejected),
            },
        }
    }
}

impl<S: Clone, C: Clock, K: Clone> Clone for CircuitBreakerService<S, C, K> {
    fn clone(&self) -> Self {
        CircuitBreakerService {
            inner: self.inner.clone(),
            lease: self.lease.clone(),
            classify: self.classify.clone(),
        }
    }
}

impl<S: fmt::Debug, C: Clock, K> fmt::Debug for CircuitBreakerService<S, C, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CircuitBreakerService")
            .field("inner", &self.inner)
            .field("breaker", &self.lease.breaker)
            .finish_non_exhaustive()
    }
}

pin_project! {
    /// The response future of [`CircuitBreakerService`]: the inner service's future
    /// with the call's permit, or a rejection that resolves at once.
    ///
    /// Dropping it before the response arrives counts the call as `dropped` and
    /// records it as [`Dropped`](crate::Dropped) says (by default ignored, giving a
    /// half-open slot back). Polling it again after it
    /// completed returns `Pending`.
    #[must_use = "futures do nothing unless polled"]
    pub struct ResponseFuture<F, K, C: Clock = DefaultClock> {
        // `None` when rejected, and once completed.
        #[pin]
        response: Option<F>,
        // The permit and the classifier, taken together when the response arrives.
        permit: Option<(LeasedPermit<C>, K)>,
        rejected: Option<Rejected>,
    }
}

impl<F, K, T, E, C> Future for ResponseFuture<F, K, C>
where
    F: Future<Output = Result<T, E>>,
    K: Classify<T, E>,
    C: Clock,
{
    type Output = Result<T, Error<E>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        // No response: a rejection (resolved once), or a call already completed.
        let Some(response) = this.response.as_mut().as_pin_mut() else {
            return match this.rejected.take() {
                Some(rejected) => Poll::Ready(Err(Error::Rejected(rejected))),
                None => Poll::Pending, // polled after completion
            };
        };
        let result = ready!(response.poll(cx));
        this.response.set(None);
        if let Some((permit, classify)) = this.permit.take() {
            permit.record(classify.classify(&result));
        }
        Poll::Ready(result.map_err(Error::Inner))
    }
}

impl<F, K, C: Clock> fmt::Debug for ResponseFuture<F, K, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("permit", &self.permit.as_ref().map(|(permit, _)| permit))
            .field("rejected", &self.rejected)
            .finish_non_exhaustive()
    }
}
