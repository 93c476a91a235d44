//! [`BackendLayer`]: a client-side tower layer with one breaker per backend,
//! picked by each request's authority through a [`Registry`] (the `http` feature).
//! Re-exported from [`crate::http`].

use crate::classify::Classify;
use crate::clock::{Clock, DefaultClock};
use crate::http::ServerErrorIsFailure;
use crate::permit::OwnedPermit;
use crate::recording::{Recorder, Tap};
use crate::{Error, Registry, Rejected};
use ::http::{Request, Response, header};
use ::tower::{Layer, Service};
use pin_project_lite::pin_project;
use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::hash::BuildHasher;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

/// A tower [`Layer`] for HTTP clients (hyper-util's `Client`, or any
/// `Service<http::Request<B>>`) that sends each request through its backend's
/// breaker, from a [`Registry`] the caller keeps.
///
/// The key is the request URI's authority without user info (`host[:port]`: the
/// host as the URI writes it, in lower case; the port as a number, only where
/// it is not the scheme's default, 80 for `http` and `ws`, 443 for `https` and
/// `wss`, an empty port being the default: as the reqwest middleware keys it),
/// or its `Host` header for a URI with no authority (as a connection-level
/// client such as hyper's `SendRequest` takes; hyper-util's `Client` refuses
/// such a request with an `Err`, which fails), or the empty string for a
/// request that names neither. A rejected
/// request never reaches the inner service: its future fails at once with
/// [`Error::Rejected`]; the inner service's errors come as [`Error::Inner`].
/// Responses are classified by [`ServerErrorIsFailure`] (a `5xx` or an `Err`
/// fails), or by [`classify`](BackendLayer::classify).
///
/// Readiness is the inner service's: the breaker is known only once the
/// request's key is. Each request costs one registry lookup on a key borrowed
/// from the request (copied only to lower a capital), and one clone of the
/// breaker's `Arc` held by its future.
///
/// # Examples
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use cutout::{CircuitBreaker, Error, Registry, http::BackendLayer};
/// use http::{Request, Response, StatusCode};
/// use std::{convert::Infallible, sync::Arc};
/// use tower::{Layer, ServiceExt, service_fn};
///
/// let breakers = Arc::new(Registry::new(CircuitBreaker::builder().consecutive_failures(1))?);
/// // Stands in for hyper-util's client: backend "a" is sick, "b" is well.
/// let client = service_fn(|request: Request<()>| async move {
///     let mut response = Response::new(());
///     if request.uri().host() == Some("a") {
///         *response.status_mut() = StatusCode::BAD_GATEWAY;
///     }
///     Ok::<_, Infallible>(response)
/// });
/// let client = BackendLayer::new(breakers.clone()).layer(client);
/// let get = |uri: &str| Request::get(uri).body(()).unwrap();
///
/// let response = client.clone().oneshot(get("http://a:8080/x")).await?;
/// assert_eq!(response.status(), StatusCode::BAD_GATEWAY); // a failure: "a" opens
/// let rejected = client.clone().oneshot(get("http://a:8080/y")).await;
/// assert!(matches!(rejected, Err(Error::Rejected(_))));
/// let response = client.oneshot(get("http://b:8080/x")).await?; // its own breaker
/// assert_eq!(response.status(), StatusCode::OK);
/// assert_eq!(breakers.len(), 2); // "a:8080" and "b:8080"
/// # Ok(())
/// # }
/// ```
pub struct BackendLayer<
    C: Clock = DefaultClock,
    S = foldhash::fast::RandomState,
    K = ServerErrorIsFailure,
> {
    registry: Arc<Registry<String, C, S>>,
    classify: K,
    recorder: Option<Recorder>,
}

impl<C: Clock, S> BackendLayer<C, S> {
    /// A layer whose breakers come from `registry`, one per backend authority.
    pub fn new(registry: Arc<Registry<String, C, S>>) -> Self {
        BackendLayer {
            registry,
            classify: ServerErrorIsFailure,
            recorder: None,
        }
    }
}

impl<C: Clock, S, K> BackendLayer<C, S, K> {
    /// Classifies each `Result<Response<B>, Error>` with `classify` instead: any
    /// [`Classify`], such as a closure.
    pub fn classify<K2>(self, classify: K2) -> BackendLayer<C, S, K2> {
        BackendLayer {
            registry: self.registry,
            classify,
            recorder: self.recorder,
        }
    }

    /// Records each call a breaker admitted to `recorder`: when it ended, its
    /// latency (from the request to its response or error), the outcome the
    /// classifier gave the breaker, and its backend key (features `replay` and
    /// `http`). A rejected request reached no backend and is not recorded (see
    /// [`replay`](crate::replay#what-a-layer-records)); nor is one whose future
    /// was dropped before its response. [`Recorder::record`](crate::replay::Recorder::record)
    /// never blocks: a call that finds its queue full is dropped and counted.
    ///
    /// # Examples
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use cutout::{CircuitBreaker, Registry, http::BackendLayer};
    /// use cutout::replay::{Recorder, Trace};
    /// use http::{Request, Response};
    /// use std::{convert::Infallible, sync::Arc};
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// let path = std::env::temp_dir().join(format!("backend-doc-{}.csv", std::process::id()));
    /// let recorder = Recorder::to_file(&path, 1024)?;
    /// let breakers = Arc::new(Registry::new(CircuitBreaker::builder())?);
    /// let client = service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new(())) });
    /// let client = BackendLayer::new(breakers).record(recorder.clone()).layer(client);
    /// client.oneshot(Request::get("http://orders:8080/x").body(())?).await?;
    /// recorder.flush()?;
    /// let trace = Trace::from_csv(std::fs::File::open(&path)?)?;
    /// assert_eq!(trace.calls()[0].key.as_deref(), Some("orders:8080"));
    /// # std::fs::remove_file(&path)?;
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "replay")]
    #[cfg_attr(docsrs, doc(cfg(feature = "replay")))]
    #[must_use]
    pub fn record(self, recorder: Recorder) -> Self {
        BackendLayer {
            recorder: Some(recorder),
            ..self
        }
    }

    /// The registry the breakers come from.
    pub fn registry(&self) -> &Arc<Registry<String, C, S>> {
        &self.registry
    }
}

impl<C: Clock, S, K: Clone> Clone for BackendLayer<C, S, K> {
    fn clone(&self) -> Self {
        BackendLayer {
            registry: self.registry.clone(),
            classify: self.classify.clone(),
            recorder: self.recorder.clone(),
        }
    }
}

impl<Svc, C: Clock, S, K: Clone> Layer<Svc> for BackendLayer<C, S, K> {
    type Service = BackendService<Svc, C, S, K>;

    fn layer(&self, inner: Svc) -> Self::Service {
        BackendService {
            inner,
            registry: self.registry.clone(),
            classify: self.classify.clone(),
            recorder: self.recorder.clone(),
        }
    }
}

impl<C: Clock, S, K> fmt::Debug for BackendLayer<C, S, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BackendLayer").finish_non_exhaustive()
    }
}

/// An HTTP client service with a breaker per backend; built by [`BackendLayer`].
pub struct BackendService<
    Svc,
    C: Clock = DefaultClock,
    S = foldhash::fast::RandomState,
    K = ServerErrorIsFailure,
> {
    inner: Svc,
    registry: Arc<Registry<String, C, S>>,
    classify: K,
    recorder: Option<Recorder>,
}

impl<Svc, C: Clock, S, K> BackendService<Svc, C, S, K> {
    /// The inner service.
    pub fn get_ref(&self) -> &Svc {
        &self.inner
    }

    /// Unwraps the inner service.
    pub fn into_inner(self) -> Svc {
        self.inner
    }
}

/// The registry key of `request`: its URI's authority without user info, its
/// port as a number and only where it is not its scheme's default (an empty
/// port is the default), else its `Host` header, else the empty string; in
/// lower case, as DNS reads a host (`Orders:8080` is `orders:8080`). So a
/// backend keys as the reqwest middleware keys it. Borrowed, with no
/// allocation, unless it has a capital letter or a port written with a
/// leading zero.
fn backend_key<B>(request: &Request<B>) -> Cow<'_, str> {
    let uri = request.uri();
    let key = match uri.authority() {
        Some(authority) => {
            let all = authority.as_str();
            let host_port = all.rsplit_once('@').map_or(all, |(_, host_port)| host_port);
            // The port follows the last `:`, unless that is inside an IPv6 address.
            let (host, written) = match host_port.rsplit_once(':') {
                Some((host, port)) if !port.contains(']') => (host, port),
                _ => (host_port, ""),
            };
            let default = match uri.scheme_str() {
                Some(s) if s.eq_ignore_ascii_case("http") || s.eq_ignore_ascii_case("ws") => {
                    Some(80)
                }
                Some(s) if s.eq_ignore_ascii_case("https") || s.eq_ignore_ascii_case("wss") => {
                    Some(443)
                }
                _ => None,
            };
            match authority.port_u16() {
                // An empty port is the default; one past 65535, kept as written,
                // is no other backend's.
                None if written.is_empty() => Cow::Borrowed(host),
                None => Cow::Borrowed(host_port),
                Some(port) if default == Some(port) => Cow::Borrowed(host),
                Some(port) if written.len() > 1 && written.starts_with('0') => {
                    Cow::Owned(format!("{host}:{port}"))
                }
                Some(_) => Cow::Borrowed(host_port),
            }
        }
        None => Cow::Borrowed(
            request
                .headers()
                .get(header::HOST)
                .and_then(|host| host.to_str().ok())
                .unwrap_or(""),
        ),
    };
    match key.bytes().any(|b| b.is_ascii_uppercase()) {
        true => Cow::Owned(key.to_ascii_lowercase()),
        false => key,
    }
}

impl<Svc, B, RB, C, S, K> Service<Request<B>> for BackendService<Svc, C, S, K>
where
    Svc: Service<Request<B>, Response = Response<RB>>,
    C: Clock + Clone,
    S: BuildHasher,
    K: Classify<Response<RB>, Svc::Error> + Clone,
{
    type Response = Response<RB>;
    type Error = Error<Svc::Error>;
    type Future = BackendFuture<Svc::Future, K, C>;

    /// The inner service's readiness, its error as [`Error::Inner`].
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Error::Inner)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let key = backend_key(&request);
        match self.registry.acquire_owned(&*key) {
            Ok(permit) => BackendFuture {
                tap: self.recorder.as_ref().map(|r| r.start(&key)),
                inner: Some(self.inner.call(request)),
                permit: Some(permit),
                rejected: None,
                classify: self.classify.clone(),
            },
            Err(rejected) => BackendFuture {
                inner: None,
                permit: None,
                rejected: Some(rejected),
                classify: self.classify.clone(),
                tap: None,
            },
        }
    }
}

impl<Svc: Clone, C: Clock, S, K: Clone> Clone for BackendService<Svc, C, S, K> {
    fn clone(&self) -> Self {
        BackendService {
            inner: self.inner.clone(),
            registry: self.registry.clone(),
            classify: self.classify.clone(),
            recorder: self.recorder.clone(),
        }
    }
}

impl<Svc: fmt::Debug, C: Clock, S, K> fmt::Debug for BackendService<Svc, C, S, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BackendService")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

pin_project! {
    /// The response future of [`BackendService`]: the inner service's response,
    /// its error as [`Error::Inner`], or [`Error::Rejected`] at once for a
    /// rejected request. Dropping it before the response arrives counts the call
    /// as [`Dropped`](crate::Dropped) says. Polling it again after it completed
    /// returns `Pending` (a rejected one: the same rejection).
    #[must_use = "futures do nothing unless polled"]
    pub struct BackendFuture<F, K, C>
    where
        C: Clock,
    {
        #[pin]
        inner: Option<F>,
        permit: Option<OwnedPermit<C>>,
        rejected: Option<Rejected>,
        classify: K,
        // The call's recording, if the layer records.
        tap: Option<Tap>,
    }
}

impl<F, K, RB, E, C> Future for BackendFuture<F, K, C>
where
    F: Future<Output = Result<Response<RB>, E>>,
    K: Classify<Response<RB>, E>,
    C: Clock,
{
    type Output = Result<Response<RB>, Error<E>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let Some(inner) = this.inner.as_mut().as_pin_mut() else {
            // Rejected: the same rejection however often it is polled; completed
            // (its permit taken): nothing more.
            return match *this.rejected {
                Some(rejected) => Poll::Ready(Err(Error::Rejected(rejected))),
                None => Poll::Pending,
            };
        };
        let result = ready!(inner.poll(cx));
        this.inner.set(None); // done: never polled again
        if let Some(permit) = this.permit.take() {
            let outcome = this.classify.classify(&result);
            permit.record(outcome);
            if let Some(tap) = this.tap.take() {
                tap.finish(outcome);
            }
        }
        Poll::Ready(result.map_err(Error::Inner))
    }
}

impl<F, K, C: Clock> fmt::Debug for BackendFuture<F, K, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BackendFuture")
            .field("rejected", &self.rejected)
            .finish_non_exhaustive()
    }
}
