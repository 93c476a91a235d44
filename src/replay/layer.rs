//! [`RecordLayer`]: a tower layer that records each call reaching its service
//! to a [`Recorder`] (features `replay` and `tower`); the breaker's layers record
//! through one (`CircuitBreakerLayer::record`, `HttpLayer::record`).

use super::Recorder;
use crate::{CircuitBreaker, Classify, Clock, ErrIsFailure};
use pin_project_lite::pin_project;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tower::{Layer, Service};

/// Records every call that reaches the inner service, with its latency (from
/// `call` to the response) and its outcome by a [`Classify`] (default: `Err` is
/// a failure), to a [`Recorder`], which never blocks the call. An error from
/// the inner service's readiness (a refused connection) is recorded as a call
/// that ended at once, classified as a response's `Err` would be.
///
/// The breaker's layers record through one placed inside them:
/// [`CircuitBreakerLayer::record`](crate::CircuitBreakerLayer::record) gives it
/// the layer's classifier and the breaker's name. Use it on its own to record a
/// dependency that has no breaker yet: every call then reaches it, so the trace
/// holds all of them, which a replay under candidate settings needs (a trace
/// recorded behind a breaker lacks the calls it rejected). A call whose future
/// is dropped before it completes (a timeout outside, a cancelled request) is
/// not recorded.
///
/// # Examples
/// ```
/// use cutout::replay::{RecordLayer, Recorder};
/// use tower::{Layer, Service, ServiceExt, service_fn};
///
/// # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
/// let recorder = Recorder::to_writer(std::io::sink(), false, 1024)?;
/// let layer = RecordLayer::new(recorder.clone()).key("billing");
/// let mut service = layer.layer(service_fn(|n: u32| async move {
///     if n % 2 == 0 { Ok(n) } else { Err("odd") }
/// }));
/// for n in 0..4 {
///     let _ = service.ready().await?.call(n).await;
/// }
/// recorder.flush()?;
/// assert_eq!(recorder.written() + recorder.dropped(), 4);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct RecordLayer<F = ErrIsFailure> {
    recorder: Recorder,
    classify: F,
    key: Option<Arc<str>>,
}

impl RecordLayer {
    /// Records to `recorder`, an `Err` as a failure, with no key.
    ///
    /// # Examples
    /// See [`RecordLayer`].
    pub fn new(recorder: Recorder) -> RecordLayer {
        RecordLayer {
            recorder,
            classify: ErrIsFailure,
            key: None,
        }
    }
}

impl<F> RecordLayer<F> {
    /// The layer that records inside a breaker's: its classifier, the breaker's
    /// name as the key.
    pub(crate) fn behind<C: Clock>(
        recorder: Recorder,
        breaker: &CircuitBreaker<C>,
        classify: &F,
    ) -> RecordLayer<F>
    where
        F: Clone,
    {
        RecordLayer {
            recorder,
            classify: classify.clone(),
            key: Some(breaker.name().into()),
        }
    }

    /// Each call's outcome by `classify` instead.
    ///
    /// # Examples
    /// ```
    /// use cutout::Outcome;
    /// use cutout::replay::{RecordLayer, Recorder};
    ///
    /// let recorder = Recorder::to_writer(std::io::sink(), false, 16)?;
    /// let layer = RecordLayer::new(recorder).classify(|r: &Result<u16, ()>| match r {
    ///     Ok(status) if *status >= 500 => Outcome::Failure,
    ///     Ok(_) => Outcome::Success,
    ///     Err(_) => Outcome::Failure,
    /// });
    /// # let _ = layer;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn classify<F2>(self, classify: F2) -> RecordLayer<F2> {
        RecordLayer {
            recorder: self.recorder,
            classify,
            key: self.key,
        }
    }

    /// Each call's key in the trace (the dependency's name).
    ///
    /// # Examples
    /// See [`RecordLayer`].
    pub fn key(self, key: impl Into<Arc<str>>) -> RecordLayer<F> {
        RecordLayer {
            key: Some(key.into()),
            ..self
        }
    }

    /// Records `result`, which took `latency`, as a call that ends now.
    fn record<T, E>(&self, latency: Duration, result: &Result<T, E>)
    where
        F: Classify<T, E>,
    {
        let outcome = self.classify.classify(result);
        self.recorder.record(latency, outcome, self.key.as_deref());
    }
}

impl<S, F: Clone> Layer<S> for RecordLayer<F> {
    type Service = RecordService<S, F>;

    fn layer(&self, inner: S) -> RecordService<S, F> {
        RecordService {
            inner,
            layer: Arc::new(self.clone()),
        }
    }
}

/// The service of a [`RecordLayer`].
///
/// # Examples
/// See [`RecordLayer`].
#[derive(Clone, Debug)]
pub struct RecordService<S, F = ErrIsFailure> {
    inner: S,
    // Shared with each call's future: one count written a call, not the
    // recorder's, the key's and the classifier's.
    layer: Arc<RecordLayer<F>>,
}

impl<S, F, Request> Service<Request> for RecordService<S, F>
where
    S: Service<Request>,
    F: Classify<S::Response, S::Error>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = RecordFuture<S::Future, F>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        match std::task::ready!(self.inner.poll_ready(cx)) {
            Ok(()) => Poll::Ready(Ok(())),
            Err(e) => {
                let result: Result<S::Response, S::Error> = Err(e);
                self.layer.record(Duration::ZERO, &result);
                Poll::Ready(result.map(drop))
            }
        }
    }

    fn call(&mut self, request: Request) -> Self::Future {
        RecordFuture {
            start: Instant::now(),
            inner: self.inner.call(request),
            layer: Some(self.layer.clone()),
        }
    }
}

pin_project! {
    /// The future of a [`RecordService`]: the inner future, recorded when it
    /// completes.
    ///
    /// # Examples
    /// See [`RecordLayer`].
    #[derive(Debug)]
    pub struct RecordFuture<Fut, F> {
        #[pin]
        inner: Fut,
        start: Instant,
        // Taken when the call is recorded.
        layer: Option<Arc<RecordLayer<F>>>,
    }
}

impl<Fut, T, E, F> Future for RecordFuture<Fut, F>
where
    Fut: Future<Output = Result<T, E>>,
    F: Classify<T, E>,
{
    type Output = Result<T, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T, E>> {
        let this = self.project();
        let result = std::task::ready!(this.inner.poll(cx));
        if let Some(layer) = this.layer.take() {
            layer.record(this.start.elapsed(), &result);
        }
        Poll::Ready(result)
    }
}
