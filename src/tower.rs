//! A tower [`Layer`] and [`Service`] (the `tower` feature).
//!
//! See [`CircuitBreakerLayer`] for how readiness, calls and errors behave.

use crate::classify::{Classify, ErrIsFailure};
use crate::clock::{Clock, DefaultClock};
use crate::permit::Ticket;
use crate::{CircuitBreaker, Error, Rejected};
use ::tower::{Layer, Service};
use pin_project_lite::pin_project;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

mod fallback;
mod hold;
#[cfg(all(feature = "http", feature = "registry"))]
pub(crate) mod keyed;

pub use fallback::{FallbackFn, FallbackFuture, FallbackLayer, FallbackService, fallback_fn};
use hold::Hold;

/// A tower [`Layer`] that puts one shared breaker in front of a service.
///
/// [`CircuitBreakerService`] wraps any `Service<Request>`. Its `poll_ready` looks
/// at the breaker first, without side effects: while it is Open inside its
/// cooldown, or forced open, the service is ready at once without asking the inner
/// service (which may never be ready: a sick dependency's connection pool or
/// concurrency limit, full of hung calls), and the next `call` is rejected (with
/// a retry time of zero if the breaker has stopped rejecting by then: the inner
/// service was not made ready for it).
/// Otherwise it asks the inner service; it takes no permit, so readiness never
/// uses a half-open probe. An error from the inner service's readiness (a refused
/// connection, from a `Reconnect` or a hyper `SendRequest`) is a failed call for
/// the breaker: classified as a response's `Err` would be, it is recorded on a call
/// admitted for it, or counted as a rejection if the breaker turns that call away
/// (a half-open round whose probes are all taken), and passed on as
/// [`Error::Inner`]. Its `call` asks the breaker for a permit; a rejected request
/// never reaches the inner service and resolves at once to [`Error::Rejected`],
/// which carries [`retry_after`](crate::Rejected::retry_after) for a `503` with
/// `Retry-After`. An
/// admitted request's response future carries the permit and records the
/// classified outcome when it completes; dropped before that (a timeout outside
/// this layer, a client that went away), it records the call as
/// [`Dropped`](crate::Dropped) says: ignored by default, giving a half-open slot
/// back; slow if the slow-call policy is on and it ran past the threshold; a
/// failure if [`Builder::on_drop`](crate::Builder::on_drop) says so.
///
/// A response future keeps its breaker alive however long it lives, and a service
/// may be cloned for every request: neither writes the breaker's reference count.
/// Each takes one of the calling thread's *spare* handles on the breaker (a clone
/// only when the thread has none) and gives it back when done, so calls in a steady
/// state write no line that other threads write too. A thread keeps at most
/// sixteen spares (eight of breakers on the default clock, eight of breakers on
/// other clocks) and drops them when it exits. The layer, its services and their futures
/// all hold the breaker this way, so when the last of them goes, its thread drops
/// its spares of that breaker if nothing else holds it. Until then, or where
/// something else holds it last (an `Arc` of your own dropped after them, or
/// another thread that made calls), spares keep the breaker allocated (and keep a
/// [`Registry`](crate::Registry) from evicting it) until their threads keep newer
/// spares or exit.
///
/// The error is [`Error<S::Error>`](Error), a `std::error::Error` whenever the inner
/// error is one, so it boxes into tower's `BoxError` as it is. When the inner error
/// is already a `BoxError`, map it by hand: `Error::Rejected(r)` boxes as the
/// [`Rejected`] (for `downcast_ref`), `Error::Inner(e)` is `e`.
///
/// # Examples
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use cutout::{CircuitBreaker, CircuitBreakerLayer, Error, Outcome};
/// use std::sync::Arc;
/// use tower::{Layer, ServiceExt, service_fn};
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
///     assert_eq!(service.clone().oneshot(503).await?, 503);
/// }
/// // ... and the next request never reaches it.
/// match service.oneshot(200).await {
///     Err(Error::Rejected(r)) => assert!(r.retry_after().is_some()), // for Retry-After
///     other => panic!("expected a rejection, got {other:?}"),
/// }
/// # Ok(())
/// # }
/// ```
pub struct CircuitBreakerLayer<C: Clock + 'static = DefaultClock, K = ErrIsFailure> {
    /// A hold, as a service's is: the layer's drop gives it back, so the layer
    /// going last still drops its thread's spares of an otherwise unheld breaker.
    hold: Hold<C>,
    pub(crate) classify: K,
}

impl<C: Clock + 'static> CircuitBreakerLayer<C> {
    /// A layer whose services all go through `breaker`, classifying `Err` as a
    /// failure and `Ok` as a success.
    pub fn new(breaker: Arc<CircuitBreaker<C>>) -> Self {
        CircuitBreakerLayer {
            hold: Hold::new(breaker),
            classify: ErrIsFailure,
        }
    }
}

impl<C: Clock + 'static, K> CircuitBreakerLayer<C, K> {
    /// Classifies each `Result<Response, Error>` with `classify` instead.
    ///
    /// Each call clones the classifier into its response future, before it asks
    /// the breaker (so that nothing that can panic runs between an admission and
    /// the guard that records it), so a rejected call clones it too. A closure or a
    /// zero-sized type clones for free; one that holds an `Arc` writes that `Arc`'s
    /// count twice a call (a line every thread calling through the layer shares):
    /// hold shared state in a `'static` reference instead, where the hot path
    /// matters.
    pub fn classify<K2>(self, classify: K2) -> CircuitBreakerLayer<C, K2> {
        CircuitBreakerLayer {
            hold: self.hold,
            classify,
        }
    }

    /// The shared breaker.
    pub fn breaker(&self) -> &Arc<CircuitBreaker<C>> {
        self.hold.breaker()
    }

    /// This layer over a [`RecordLayer`](crate::replay::RecordLayer) that
    /// records to `recorder` each call the breaker admitted, as this layer's
    /// classifier judged it, keyed by the breaker's [`name`](CircuitBreaker::name)
    /// (feature `replay`). Calls the breaker rejected never reached the service
    /// and are not recorded (see [`replay`](crate::replay#what-a-layer-records)).
    /// The services it makes are this layer's around a
    /// [`RecordService`](crate::replay::RecordService); without it, nothing on
    /// their path changes.
    ///
    /// # Examples
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use cutout::{CircuitBreaker, CircuitBreakerLayer, Outcome};
    /// use cutout::replay::{Recorder, Trace};
    /// use std::sync::Arc;
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// let path = std::env::temp_dir().join(format!("layer-doc-{}.csv", std::process::id()));
    /// let recorder = Recorder::to_file(&path, 1024)?;
    /// let breaker = Arc::new(CircuitBreaker::builder().name("billing").build()?);
    /// let backend = service_fn(|n: u32| async move { if n > 0 { Ok(n) } else { Err("down") } });
    /// let service = CircuitBreakerLayer::new(breaker).record(recorder.clone()).layer(backend);
    /// let _ = service.clone().oneshot(0).await;
    /// let _ = service.oneshot(7).await;
    /// recorder.flush()?;
    /// let trace = Trace::from_csv(std::fs::File::open(&path)?)?;
    /// let outcomes: Vec<_> = trace.calls().iter().map(|c| c.outcome).collect();
    /// assert_eq!(outcomes, [Outcome::Failure, Outcome::Success]);
    /// assert_eq!(trace.calls()[0].key.as_deref(), Some("billing"));
    /// # std::fs::remove_file(&path)?;
    /// # Ok(())
    /// # }
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
        let record = crate::replay::RecordLayer::behind(recorder, self.breaker(), &self.classify);
        ::tower::layer::util::Stack::new(record, self)
    }
}

impl<C: Clock + 'static, K: Clone> Clone for CircuitBreakerLayer<C, K> {
    fn clone(&self) -> Self {
        CircuitBreakerLayer {
            hold: self.hold.clone(),
            classify: self.classify.clone(),
        }
    }
}

impl<S, C: Clock + 'static, K: Clone> Layer<S> for CircuitBreakerLayer<C, K> {
    type Service = CircuitBreakerService<S, C, K>;

    fn layer(&self, inner: S) -> Self::Service {
        CircuitBreakerService {
            inner,
            hold: self.hold.clone(),
            classify: self.classify.clone(),
            shed: None,
        }
    }
}

impl<C: Clock + 'static, K> fmt::Debug for CircuitBreakerLayer<C, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CircuitBreakerLayer")
            .field("breaker", self.hold.breaker())
            .finish_non_exhaustive()
    }
}

/// A service behind a circuit breaker; built by [`CircuitBreakerLayer`] or
/// [`CircuitBreakerService::new`].
///
/// # Examples
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use cutout::{CircuitBreaker, CircuitBreakerService, Error, State};
/// use std::sync::Arc;
/// use tower::{ServiceExt, service_fn};
///
/// let breaker = Arc::new(CircuitBreaker::builder().build()?);
/// let echo = service_fn(|req: &'static str| async move { Ok::<_, std::io::Error>(req) });
/// let service = CircuitBreakerService::new(echo, breaker.clone());
///
/// assert_eq!(service.clone().oneshot("ping").await?, "ping");
/// breaker.force_open();
/// match service.oneshot("ping").await {
///     Err(Error::Rejected(r)) => assert_eq!(r.state(), State::ForcedOpen),
///     other => panic!("expected a rejection, got {other:?}"),
/// }
/// # Ok(())
/// # }
/// ```
pub struct CircuitBreakerService<S, C: Clock + 'static = DefaultClock, K = ErrIsFailure> {
    inner: S,
    hold: Hold<C>,
    classify: K,
    /// The state of the breaker whose rejection made `poll_ready` ready without
    /// the inner service: the next `call` is rejected.
    shed: Option<crate::State>,
}

/// An admitted call in a response future: its breaker (a [`hold`] taken for the
/// call and given back when it ends), its ticket, and the classifier. Recorded when
/// the response arrives; abandoned (see [`Dropped`](crate::Dropped)) if dropped
/// before that.
struct Admitted<C: Clock + 'static, K> {
    /// `None` once recorded.
    breaker: Option<Arc<CircuitBreaker<C>>>,
    ticket: Ticket,
    classify: K,
}

impl<C: Clock + 'static, K> Admitted<C, K> {
    /// Records the call's `result` and gives the hold back.
    #[inline]
    fn finish<T, E>(mut self, result: &Result<T, E>)
    where
        K: Classify<T, E>,
    {
        // Classified before the breaker is taken: a classifier that panics leaves
        // the call to `drop`, which records it as dropped (a probe's slot back).
        let outcome = self.classify.classify(result);
        if let Some(breaker) = self.breaker.take() {
            breaker.record(self.ticket, outcome);
            hold::give_back(breaker);
        }
    }
}

impl<C: Clock + 'static, K> Drop for Admitted<C, K> {
    #[inline]
    fn drop(&mut self) {
        if let Some(breaker) = self.breaker.take() {
            abandon(breaker, self.ticket);
        }
    }
}

/// A response future dropped before its response: the call is abandoned and the
/// hold given back. Out of line: the hot path (a response) gives its hold back
/// inline, and only once.
#[cold]
#[inline(never)]
fn abandon<C: Clock + 'static>(breaker: Arc<CircuitBreaker<C>>, ticket: Ticket) {
    breaker.abandon(ticket);
    hold::give_back(breaker);
}

impl<S, C: Clock + 'static> CircuitBreakerService<S, C> {
    /// `inner` behind `breaker`, classifying `Err` as a failure and `Ok` as a
    /// success.
    pub fn new(inner: S, breaker: Arc<CircuitBreaker<C>>) -> Self {
        CircuitBreakerService {
            inner,
            hold: Hold::new(breaker),
            classify: ErrIsFailure,
            shed: None,
        }
    }
}

impl<S, C: Clock + 'static, K> CircuitBreakerService<S, C, K> {
    /// Classifies each `Result<Response, Error>` with `classify` instead (see
    /// [`CircuitBreakerLayer::classify`] for what a call clones).
    pub fn classify<K2>(self, classify: K2) -> CircuitBreakerService<S, C, K2> {
        CircuitBreakerService {
            inner: self.inner,
            hold: self.hold,
            classify,
            shed: self.shed,
        }
    }

    /// The shared breaker.
    pub fn breaker(&self) -> &Arc<CircuitBreaker<C>> {
        self.hold.breaker()
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
    C: Clock + 'static,
    K: Classify<S::Response, S::Error> + Clone,
{
    type Response = S::Response;
    type Error = Error<S::Error>;
    type Future = ResponseFuture<S::Future, K, C>;

    /// Ready at once while the breaker is Open inside its cooldown or forced open
    /// (the next call is rejected); otherwise the inner service's readiness, an
    /// error counted as a failed call (see [`CircuitBreakerLayer`]). Takes no
    /// permit: readiness never uses a probe.
    // Out of line: the compiler inlines tower's `Ready` future (generic code
    // compiled in the caller's crate) into the caller's async block only while it
    // is small, and this function inlined into it made it too big; the block then
    // moved through memory. `svc.ready().await?.call(req).await` in a criterion
    // loop: 14.6 ns out of line, 26.8 inlined (`benches/user.rs`, `tower/`).
    #[inline(never)]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.poll_ready_inner(cx).map_err(Error::Inner)
    }

    // `#[inline]` here and on the future's `poll`: the hint lets the compiler
    // inline both into the caller that makes and polls the future (an async fn's
    // poll, a loop), as it does `call_async`'s: 118 instructions a call in a loop,
    // against 188 without the hints (`examples/instructions.rs`, `tower_layer`).
    #[inline]
    fn call(&mut self, request: Request) -> Self::Future {
        if let Some(readied) = self.shed.take() {
            return ResponseFuture {
                state: State::Rejected {
                    rejected: self.shed(readied),
                },
            };
        }
        // Cloned first: nothing that can panic runs between the admission and its
        // guard.
        let classify = self.classify.clone();
        match self.hold.breaker().acquire() {
            Ok(ticket) => {
                // The admission is guarded before the inner service runs: if its
                // `call` panics, `admitted`'s drop records the call as dropped.
                let admitted = Admitted {
                    breaker: Some(hold::take(self.hold.breaker())),
                    ticket,
                    classify,
                };
                ResponseFuture {
                    state: State::Called {
                        response: self.inner.call(request),
                        admitted,
                    },
                }
            }
            Err(rejected) => ResponseFuture {
                state: State::Rejected { rejected },
            },
        }
    }
}

impl<S, C: Clock + 'static, K> CircuitBreakerService<S, C, K> {
    /// `poll_ready` with the inner service's error (`HttpService` passes it on as
    /// it is).
    #[inline]
    pub(crate) fn poll_ready_inner<Request>(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), S::Error>>
    where
        S: Service<Request>,
        K: Classify<S::Response, S::Error>,
    {
        // An open breaker answers without the inner service, which a sick
        // dependency may never make ready.
        self.shed = self.hold.breaker().rejecting().map(|r| r.state());
        if self.shed.is_some() {
            return Poll::Ready(Ok(()));
        }
        match ready!(self.inner.poll_ready(cx)) {
            Ok(()) => Poll::Ready(Ok(())),
            Err(e) => {
                let result: Result<S::Response, S::Error> = Err(e);
                self.readiness_failed(&result);
                Poll::Ready(result.map(drop))
            }
        }
    }

    /// The rejection of a call whose readiness a rejection by the breaker in state
    /// `readied` answered, counted: the inner service was not made ready, so the
    /// call is rejected, as the breaker rejects now or, if it has stopped
    /// rejecting since (its cooldown over, a reset), with a retry time of zero.
    #[cold]
    #[inline(never)]
    fn shed(&self, readied: crate::State) -> Rejected {
        let breaker = self.hold.breaker();
        breaker.count_rejection();
        breaker
            .rejecting()
            .unwrap_or_else(|| Rejected::after_ms(readied, 0))
    }

    /// Records the inner service's readiness error `result` as a call's outcome,
    /// on a call admitted for it (a rejection, counted, if the breaker turns it
    /// away).
    #[cold]
    #[inline(never)]
    fn readiness_failed<T, E>(&self, result: &Result<T, E>)
    where
        K: Classify<T, E>,
    {
        // Classified before the admission: nothing that can panic runs between
        // the admission and its record.
        let outcome = self.classify.classify(result);
        let breaker = self.hold.breaker();
        if let Ok(ticket) = breaker.acquire() {
            breaker.record(ticket, outcome);
        }
    }
}

impl<S: Clone, C: Clock + 'static, K: Clone> Clone for CircuitBreakerService<S, C, K> {
    fn clone(&self) -> Self {
        CircuitBreakerService {
            inner: self.inner.clone(),
            hold: self.hold.clone(),
            classify: self.classify.clone(),
            // A clone is not ready (tower's contract), whatever `self` is.
            shed: None,
        }
    }
}

impl<S: fmt::Debug, C: Clock + 'static, K> fmt::Debug for CircuitBreakerService<S, C, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CircuitBreakerService")
            .field("inner", &self.inner)
            .field("breaker", self.hold.breaker())
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
    ///
    /// The inner future is dropped as soon as it completes, before its outcome is
    /// recorded, so an inner future whose `Drop` panics then (which Rust code
    /// should never do) counts its call as dropped, not as its response. (Recording
    /// first would cost every call about ten instructions; `CallAsync` records
    /// first, at no cost.)
    #[must_use = "futures do nothing unless polled"]
    pub struct ResponseFuture<F, K, C = DefaultClock>
    where
        C: Clock,
        C: 'static,
    {
        #[pin]
        state: State<F, K, C>,
    }
}

pin_project! {
    #[project = StateProj]
    #[project_replace = StateReplace]
    enum State<F, K, C>
    where
        C: Clock,
        C: 'static,
    {
        // Admitted and called: the inner service's future.
        Called { #[pin] response: F, admitted: Admitted<C, K> },
        // Rejected: resolves at once.
        Rejected { rejected: Rejected },
        // Resolved.
        Done,
    }
}

impl<F, K, T, E, C> Future for ResponseFuture<F, K, C>
where
    F: Future<Output = Result<T, E>>,
    K: Classify<T, E>,
    C: Clock + 'static,
{
    type Output = Result<T, Error<E>>;

    #[inline] // see `CircuitBreakerService::call`
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        match state.as_mut().project() {
            StateProj::Called { response, .. } => {
                let result = ready!(response.poll(cx));
                if let StateReplace::Called { admitted, .. } = state.project_replace(State::Done) {
                    admitted.finish(&result);
                }
                Poll::Ready(result.map_err(Error::Inner))
            }
            StateProj::Rejected { rejected } => {
                let rejected = *rejected;
                state.project_replace(State::Done);
                Poll::Ready(Err(Error::Rejected(rejected)))
            }
            StateProj::Done => Poll::Pending, // polled after completion
        }
    }
}

impl<F, K, C: Clock + 'static> fmt::Debug for ResponseFuture<F, K, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("ResponseFuture");
        match &self.state {
            State::Called { admitted, .. } => d.field("ticket", &admitted.ticket),
            State::Rejected { rejected } => d.field("rejected", rejected),
            State::Done => d.field("done", &true),
        };
        d.finish_non_exhaustive()
    }
}
