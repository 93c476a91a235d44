//! HTTP services (the `http` feature): a rejection answers `503 Service
//! Unavailable` with `Retry-After`, and responses are classified by status.
//!
//! [`HttpLayer`] is [`CircuitBreakerLayer`] for services whose responses are
//! [`http::Response`]s: axum routers and handlers, hyper services, tower-http
//! stacks. Where the tower layer's error is
//! [`Error<S::Error>`](crate::Error), this layer's error is the inner service's own
//! error type, unchanged:
//!
//! - **A rejection is a response**, not an error: `503 Service Unavailable`, a
//!   `Retry-After` header in whole seconds (rounded up, at least 1; none while
//!   [forced open](crate::CircuitBreaker::force_open), which has no deadline), an
//!   empty body, and the [`Rejected`] itself in the response's extensions (to tell
//!   it from the backend's own 503, or to rewrite the body in a `map_response`).
//!   See [`rejection_response`].
//! - **The inner service's errors pass through unchanged**, as the same `Err` of
//!   the same type, and its responses as they are. So an axum route, whose error is
//!   `Infallible`, stays `Infallible`: axum 0.8 takes the layer with no
//!   `HandleErrorLayer` and no glue.
//! - **Responses are classified by status** ([`ServerErrorIsFailure`]): a 5xx is a
//!   failure (but an inner breaker's rejection is ignored), anything else (a 404
//!   included) a success, and an `Err` a failure.
//!   [`HttpLayer::classify`] takes any other [`Classify`].
//!
//! For the client side, `BackendLayer` (with the `registry` feature) keeps one breaker per backend: it picks
//! each request's breaker from a [`Registry`](crate::Registry) by the request's
//! authority (hyper-util's client, or any `Service<http::Request<B>>`).
//!
//! The feature is named `http`, not `axum`: it needs only the `http` crate's
//! `Request`/`Response` types (and tower), which axum, hyper and tonic share, so it
//! serves all of them and pulls in no web framework.
//!
//! # Timeouts
//! Where a timeout sits decides what the breaker sees:
//!
//! - **Outside** (timeout → breaker → backend, e.g. a router-wide
//!   `tower_http::timeout::TimeoutLayer`): the timeout drops the breaker's future,
//!   so the call counts as [`Dropped`](crate::Dropped) says. It trips the breaker
//!   only with the slow-call policy on (a threshold below the timeout) or with
//!   [`Builder::on_drop`](crate::Builder::on_drop) making dropped calls failures;
//!   with neither it counts for nothing.
//! - **Inside** (breaker → timeout → backend): the breaker sees what the timeout
//!   returns. tower-http's `TimeoutLayer` answers `408 Request Timeout` by default,
//!   which is not a 5xx, so it counts as a success; build it with
//!   `TimeoutLayer::with_status_code(StatusCode::GATEWAY_TIMEOUT, ..)` (a 504 is a
//!   failure), or turn the slow-call policy on (the call was slow either way).
//!
//! # Examples
//! An axum 0.8 router with the breaker around its routes and a timeout outside it
//! (the README's lines):
//! ```
//! use axum::{Router, http::StatusCode, routing::get};
//! use cutout::{CircuitBreaker, Dropped, http::HttpLayer};
//! use std::{sync::Arc, time::Duration};
//! use tower_http::timeout::TimeoutLayer;
//! # async fn orders() -> &'static str { "from the orders service" }
//!
//! let breaker = Arc::new(CircuitBreaker::builder()
//!     .consecutive_failures(5)
//!     .on_drop(Dropped::FailureAfter(Duration::from_secs(1))) // what the timeout gave up on
//!     .build()?);
//! let app: Router = Router::new()
//!     .route("/orders", get(orders))
//!     .route_layer(HttpLayer::new(breaker)) // the breaker, around the routes
//!     .layer(TimeoutLayer::with_status_code(StatusCode::GATEWAY_TIMEOUT, Duration::from_secs(2)));
//! # Ok::<(), cutout::ConfigError>(())
//! ```

#[cfg(feature = "registry")]
#[cfg_attr(docsrs, doc(cfg(feature = "registry")))]
pub use crate::tower::keyed::{BackendFuture, BackendLayer, BackendService};

use crate::classify::Classify;
use crate::clock::{Clock, DefaultClock};
use crate::permit::Outcome;
use crate::tower::{CircuitBreakerLayer, CircuitBreakerService};
use crate::{CircuitBreaker, Error, Rejected};
use ::http::{HeaderValue, Response, StatusCode, header};
use ::tower::{Layer, Service};
use pin_project_lite::pin_project;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

/// The default HTTP classifier: a `5xx` response is a failure, any other response
/// a success (a `404` says the dependency is up), an `Err` a failure. A
/// [`rejection_response`] (a `503` that carries its [`Rejected`]) is ignored: an
/// inner breaker turned the request away before it reached the dependency, so
/// an outer breaker (a router-wide [`HttpLayer`] over per-route ones) does not
/// open because an inner one is open.
///
/// # Examples
/// ```
/// use cutout::{Classify, Outcome, http::ServerErrorIsFailure};
/// use http::{Response, StatusCode};
///
/// let status = |code: u16| {
///     let mut response = Response::new(());
///     *response.status_mut() = StatusCode::from_u16(code).unwrap();
///     Ok::<_, std::io::Error>(response)
/// };
/// assert_eq!(ServerErrorIsFailure.classify(&status(502)), Outcome::Failure);
/// assert_eq!(ServerErrorIsFailure.classify(&status(404)), Outcome::Success);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServerErrorIsFailure;

impl<B, E> Classify<Response<B>, E> for ServerErrorIsFailure {
    #[inline]
    fn classify(&self, result: &Result<Response<B>, E>) -> Outcome {
        match result {
            Ok(response) if response.status().is_server_error() => {
                match response.extensions().get::<Rejected>() {
                    Some(_) => Outcome::Ignored,
                    None => Outcome::Failure,
                }
            }
            Ok(_) => Outcome::Success,
            Err(_) => Outcome::Failure,
        }
    }
}

/// The response to a rejected request: `503 Service Unavailable`, with a
/// `Retry-After` header in whole seconds, rounded up and at least 1 (so no client
/// comes back early, and none is told `0`), unless the breaker is forced open and
/// has no deadline. The body is `B::default()` (empty for axum's `Body` and for
/// `http_body_util::{Empty, Full}`), and the [`Rejected`] is in the response's
/// extensions.
///
/// [`HttpService`] answers every rejection with it; call it yourself where a
/// rejection reaches you as an error (the tower layer, or
/// [`CircuitBreaker::call_async`]).
///
/// # Examples
/// ```
/// use cutout::{CircuitBreaker, Rejected, http::rejection_response};
///
/// let breaker = CircuitBreaker::builder().build()?;
/// breaker.force_open();
/// let rejected = breaker.try_acquire().unwrap_err();
/// let response = rejection_response::<String>(&rejected);
/// assert_eq!(response.status(), http::StatusCode::SERVICE_UNAVAILABLE);
/// assert!(response.headers().get(http::header::RETRY_AFTER).is_none()); // no deadline
/// assert_eq!(response.extensions().get::<Rejected>(), Some(&rejected));
/// # Ok::<(), cutout::ConfigError>(())
/// ```
pub fn rejection_response<B: Default>(rejected: &Rejected) -> Response<B> {
    let mut response = Response::new(B::default());
    *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    if let Some(secs) = rejected.retry_after_secs() {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    response.extensions_mut().insert(*rejected);
    response
}

/// A tower [`Layer`] that puts one shared breaker in front of an HTTP service:
/// rejections become `503` responses, inner errors and responses pass through
/// unchanged, and responses are classified by status. See the
/// [module docs](crate::http) for the rules and where a timeout goes.
///
/// # Examples
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use axum::{Router, body::Body, http::{Request, StatusCode}, routing::get};
/// use cutout::{CircuitBreaker, http::HttpLayer};
/// use std::sync::Arc;
/// use tower::ServiceExt;
///
/// let breaker = Arc::new(CircuitBreaker::builder().consecutive_failures(2).build()?);
/// let app: Router = Router::new()
///     .route("/flaky", get(|| async { StatusCode::BAD_GATEWAY }))
///     .route_layer(HttpLayer::new(breaker.clone()));
///
/// let get = |path| Request::get(path).body(Body::empty()).unwrap();
/// for _ in 0..2 {
///     // The route's own 502s: failures, passed through as they are.
///     let response = app.clone().oneshot(get("/flaky")).await?;
///     assert_eq!(response.status(), StatusCode::BAD_GATEWAY);
/// }
/// let response = app.oneshot(get("/flaky")).await?; // tripped: never runs
/// assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
/// assert_eq!(response.headers()["retry-after"], "1"); // the 1 s cooldown
/// # Ok(())
/// # }
/// ```
pub struct HttpLayer<C: Clock + 'static = DefaultClock, K = ServerErrorIsFailure> {
    inner: CircuitBreakerLayer<C, K>,
}

impl<C: Clock + 'static> HttpLayer<C> {
    /// A layer whose services all go through `breaker`, a `5xx` or an `Err` being
    /// a failure ([`ServerErrorIsFailure`]).
    pub fn new(breaker: Arc<CircuitBreaker<C>>) -> Self {
        HttpLayer {
            inner: CircuitBreakerLayer::new(breaker).classify(ServerErrorIsFailure),
        }
    }
}

impl<C: Clock + 'static, K> HttpLayer<C, K> {
    /// Classifies each `Result<Response<B>, Error>` with `classify` instead: any
    /// [`Classify`], such as a closure.
    ///
    /// # Examples
    /// ```
    /// use axum::{body::Body, http::Response};
    /// use cutout::{CircuitBreaker, Outcome, http::HttpLayer};
    /// use std::{convert::Infallible, sync::Arc};
    ///
    /// let breaker = Arc::new(CircuitBreaker::builder().build()?);
    /// // A 429 from the dependency says it is overloaded: a failure too.
    /// let layer = HttpLayer::new(breaker).classify(|r: &Result<Response<Body>, Infallible>| {
    ///     match r {
    ///         Ok(res) if res.status().is_server_error() || res.status() == 429 => Outcome::Failure,
    ///         _ => Outcome::Success,
    ///     }
    /// });
    /// # let _ = layer;
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn classify<K2>(self, classify: K2) -> HttpLayer<C, K2> {
        HttpLayer {
            inner: self.inner.classify(classify),
        }
    }

    /// The shared breaker.
    pub fn breaker(&self) -> &Arc<CircuitBreaker<C>> {
        self.inner.breaker()
    }

    /// This layer over a [`RecordLayer`](crate::replay::RecordLayer) that
    /// records each call the breaker admitted to `recorder`, as this layer's
    /// classifier judged it, keyed by the breaker's
    /// [`name`](CircuitBreaker::name) (feature `replay`); as
    /// [`CircuitBreakerLayer::record`]. A request answered `503` by the breaker
    /// reached no service and is not recorded.
    ///
    /// # Examples
    /// ```
    /// use axum::{Router, routing::get};
    /// use cutout::{CircuitBreaker, http::HttpLayer, replay::Recorder};
    /// use std::sync::Arc;
    ///
    /// let recorder = Recorder::to_writer(std::io::sink(), false, 1024)?;
    /// let breaker = Arc::new(CircuitBreaker::builder().name("orders").build()?);
    /// let app: Router = Router::new()
    ///     .route("/orders", get(|| async { "orders" }))
    ///     .route_layer(HttpLayer::new(breaker).record(recorder));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(feature = "replay")]
    #[cfg_attr(docsrs, doc(cfg(feature = "replay")))]
    pub fn record(
        self,
        recorder: crate::replay::Recorder,
    ) -> ::tower::layer::util::Stack<crate::replay::RecordLayer<K>, Self>
    where
        K: Clone,
    {
        let record =
            crate::replay::RecordLayer::behind(recorder, self.breaker(), &self.inner.classify);
        ::tower::layer::util::Stack::new(record, self)
    }
}

impl<C: Clock + 'static, K: Clone> Clone for HttpLayer<C, K> {
    fn clone(&self) -> Self {
        HttpLayer {
            inner: self.inner.clone(),
        }
    }
}

impl<S, C: Clock + 'static, K: Clone> Layer<S> for HttpLayer<C, K> {
    type Service = HttpService<S, C, K>;

    fn layer(&self, inner: S) -> Self::Service {
        HttpService {
            inner: self.inner.layer(inner),
        }
    }
}

impl<C: Clock + 'static, K> fmt::Debug for HttpLayer<C, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpLayer")
            .field("breaker", self.inner.breaker())
            .finish_non_exhaustive()
    }
}

/// An HTTP service behind a circuit breaker; built by [`HttpLayer`] or
/// [`HttpService::new`].
///
/// Its `poll_ready` is ready at once while the breaker is Open inside its cooldown
/// or forced open (the request is then answered [`rejection_response`] without the
/// inner service, which a sick dependency may never make ready), and the inner
/// service's otherwise; it takes no permit, so readiness never uses a half-open
/// probe, and an error from the inner service's readiness counts as a failed call
/// (see [`CircuitBreakerLayer`]). Its response is the inner service's, or
/// [`rejection_response`] when the breaker rejects the request, which then never
/// reaches the inner service. Its error is the inner service's, unchanged.
///
/// # Examples
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use cutout::{CircuitBreaker, http::HttpService};
/// use http::{Request, Response, StatusCode};
/// use std::{convert::Infallible, sync::Arc};
/// use tower::{ServiceExt, service_fn};
///
/// let breaker = Arc::new(CircuitBreaker::builder().build()?);
/// let hello = service_fn(|_: Request<()>| async {
///     Ok::<_, Infallible>(Response::new(String::from("hello")))
/// });
/// let service = HttpService::new(hello, breaker.clone());
/// let response = service.clone().oneshot(Request::new(())).await?;
/// assert_eq!(response.body(), "hello");
///
/// breaker.force_open();
/// let response = service.oneshot(Request::new(())).await?;
/// assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
/// assert_eq!(response.body(), ""); // String::default()
/// # Ok(())
/// # }
/// ```
pub struct HttpService<S, C: Clock + 'static = DefaultClock, K = ServerErrorIsFailure> {
    inner: CircuitBreakerService<S, C, K>,
}

impl<S, C: Clock + 'static> HttpService<S, C> {
    /// `inner` behind `breaker`, a `5xx` or an `Err` being a failure.
    pub fn new(inner: S, breaker: Arc<CircuitBreaker<C>>) -> Self {
        HttpService {
            inner: CircuitBreakerService::new(inner, breaker).classify(ServerErrorIsFailure),
        }
    }
}

impl<S, C: Clock + 'static, K> HttpService<S, C, K> {
    /// Classifies each `Result<Response<B>, Error>` with `classify` instead.
    pub fn classify<K2>(self, classify: K2) -> HttpService<S, C, K2> {
        HttpService {
            inner: self.inner.classify(classify),
        }
    }

    /// The shared breaker.
    pub fn breaker(&self) -> &Arc<CircuitBreaker<C>> {
        self.inner.breaker()
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        self.inner.get_ref()
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        self.inner.get_mut()
    }

    /// Unwraps the inner service.
    pub fn into_inner(self) -> S {
        self.inner.into_inner()
    }
}

impl<S, C, K, Request, B> Service<Request> for HttpService<S, C, K>
where
    S: Service<Request, Response = Response<B>>,
    B: Default,
    C: Clock + 'static,
    K: Classify<Response<B>, S::Error> + Clone,
{
    type Response = Response<B>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, K, C>;

    /// As [`CircuitBreakerService`]'s: ready at once while the breaker is Open
    /// inside its cooldown or forced open (the next call is answered `503`);
    /// otherwise the inner service's readiness, an error counted as a failed call
    /// and passed on as it is. Takes no permit.
    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready_inner(cx)
    }

    #[inline]
    fn call(&mut self, request: Request) -> Self::Future {
        ResponseFuture {
            inner: self.inner.call(request),
        }
    }
}

impl<S: Clone, C: Clock + 'static, K: Clone> Clone for HttpService<S, C, K> {
    fn clone(&self) -> Self {
        HttpService {
            inner: self.inner.clone(),
        }
    }
}

impl<S: fmt::Debug, C: Clock + 'static, K> fmt::Debug for HttpService<S, C, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpService")
            .field("inner", self.inner.get_ref())
            .field("breaker", self.inner.breaker())
            .finish_non_exhaustive()
    }
}

pin_project! {
    /// The response future of [`HttpService`]: the inner service's response or
    /// error, or [`rejection_response`] at once for a rejected request.
    ///
    /// Dropping it before the response arrives (a timeout outside the breaker, a
    /// client that went away) counts the call as `dropped` and records it as
    /// [`Dropped`](crate::Dropped) says.
    #[must_use = "futures do nothing unless polled"]
    pub struct ResponseFuture<F, K, C = DefaultClock>
    where
        C: Clock,
        C: 'static,
    {
        #[pin]
        inner: crate::tower::ResponseFuture<F, K, C>,
    }
}

impl<F, K, B, E, C> Future for ResponseFuture<F, K, C>
where
    F: Future<Output = Result<Response<B>, E>>,
    K: Classify<Response<B>, E>,
    B: Default,
    C: Clock + 'static,
{
    type Output = Result<Response<B>, E>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Poll::Ready(match ready!(self.project().inner.poll(cx)) {
            Ok(response) => Ok(response),
            Err(Error::Rejected(rejected)) => Ok(rejection_response(&rejected)),
            Err(Error::Inner(e)) => Err(e),
        })
    }
}

impl<F, K, C: Clock + 'static> fmt::Debug for ResponseFuture<F, K, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("inner", &self.inner)
            .finish()
    }
}

#[cfg(all(test, not(cutout_loom)))]
mod tests {
    use super::*;
    use crate::State;

    #[test]
    fn retry_after_is_whole_seconds_rounded_up_and_at_least_one() {
        for (ms, secs) in [
            (0, 1),
            (1, 1),
            (1000, 1),
            (1001, 2),
            (19_500, 20),
            (60_000, 60),
        ] {
            let rejected = Rejected::after_ms(State::Open, ms);
            assert_eq!(rejected.retry_after_secs(), Some(secs), "{ms} ms");
        }
        let forced = Rejected::until_reset(State::ForcedOpen);
        assert_eq!(forced.retry_after_secs(), None);
    }

    #[test]
    fn a_rejection_is_a_503_with_its_rejected_and_retry_after() {
        let rejected = Rejected::after_ms(State::Open, 2_500);
        let response: Response<String> = rejection_response(&rejected);
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()[header::RETRY_AFTER], "3");
        assert_eq!(response.extensions().get::<Rejected>(), Some(&rejected));
        assert!(response.body().is_empty());
        let forced: Response<()> = rejection_response(&Rejected::until_reset(State::ForcedOpen));
        assert!(!forced.headers().contains_key(header::RETRY_AFTER));
    }
}
