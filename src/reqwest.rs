//! A breaker per backend for [`reqwest`] clients, as a
//! [`reqwest-middleware`](::reqwest_middleware) middleware (the `reqwest` feature).
//!
//! # Where the breaker goes
//! Around the client that calls a dependency, one breaker per backend: when a
//! service calls several backends, one sick backend opens its own breaker and
//! leaves the others alone. [`CircuitBreakerMiddleware`] picks the breaker for
//! each request from a [`Registry`] the caller keeps (to read its breakers,
//! publish their metrics, or save them), keyed by the request URL's
//! `host[:port]` (no user info, no path) unless [`key`](CircuitBreakerMiddleware::key)
//! says otherwise (per route, per tenant). reqwest follows redirects inside
//! the request the middleware wraps, so a request redirected to another host
//! counts in the first host's breaker; where that matters, build the client with
//! [`redirect::Policy::none()`](::reqwest::redirect::Policy::none) and follow
//! redirects above the middleware, each hop a request of its own.
//!
//! # Order with retry and timeout
//! - **Retry outside the breaker**: `.with(RetryTransientMiddleware::..)` before
//!   `.with(CircuitBreakerMiddleware::..)`. Each attempt then goes through the
//!   breaker and counts in it, and once the breaker opens, the next attempt is
//!   rejected at once with an error that `reqwest-retry` treats as fatal (it
//!   never retries a middleware's error): an open breaker stops the retries. One
//!   backoff sleep is still spent, the one `reqwest-retry` takes before the
//!   attempt that the breaker rejects (it sleeps, then tries); none after it. With the retry
//!   inside, the breaker would see one outcome per series of attempts, and an
//!   open breaker could not stop a series already under way.
//! - **The timeout inside the breaker**: reqwest's own
//!   [`ClientBuilder::timeout`](::reqwest::ClientBuilder::timeout) (or a
//!   per-request timeout) turns a hung backend into an error the breaker sees
//!   and counts as a failure. A timeout outside the breaker (a
//!   `tokio::time::timeout` around `send()`) drops the middleware's future
//!   instead: the call then counts as [`Dropped`](crate::Dropped) says, a
//!   failure only with [`Builder::on_drop`](crate::Builder::on_drop) or the
//!   slow-call policy.
//!
//! # Classification
//! [`DefaultClassifier`] decides what each result counts as:
//!
//! | result | counts as | why |
//! |---|---|---|
//! | a `5xx` response | failure | the backend failed |
//! | `429 Too Many Requests` | ignored | the backend is up and asks this caller to slow down: a retry with its `Retry-After` is the answer, not an open breaker |
//! | any other response (`2xx`-`4xx`) | success | the backend answered |
//! | a connect error, a timeout, an error while sending the request or reading its response head (a reset, a closed connection) | failure | the backend is unreachable or hung |
//! | a redirect error (too many, or refused by the redirect policy) | ignored | the backend answered; the caller's policy refused it |
//! | a body or decode error (a request body the caller gave that fails as it is sent included), a builder error | ignored | the caller's own request (the response body is read after the middleware returns, where no breaker sees it) |
//! | another middleware's error (one placed after this one) | ignored | not the backend's answer |
//!
//! [`CircuitBreakerMiddleware::classify`] takes any other
//! [`Classify`] of `Result<reqwest::Response, reqwest_middleware::Error>`, a
//! closure included.
//!
//! # Rejections
//! A request the breaker rejects is never sent. It fails with a
//! [`reqwest_middleware::Error::Middleware`] holding a [`Rejection`], and walking
//! the error's [`source`](std::error::Error::source) chain reaches the
//! [`Rejected`], with its [`retry_after`](Rejected::retry_after); [`rejected`]
//! does that walk.
//!
//! # Hashing and cost
//! Each request costs one registry lookup on a key borrowed from the URL (no
//! allocation unless the key is new), one clone and drop of the breaker's `Arc`
//! (the future cannot hold the registry's guard across `.await`: two locked
//! instructions on a line that every request to that backend writes), an
//! admission and a record. The registry's default hasher is foldhash; choose
//! SipHash where an attacker may choose the keys (see
//! [Hashing](crate::Registry#hashing)). The measured figures are in
//! `docs/PERFORMANCE.md`.
//!
//! Backends that come and go (a pod's address) leave their breakers behind:
//! an idle sweep ([`evict_idle_after`](crate::RegistryBuilder::evict_idle_after))
//! takes the Closed ones, but an Open breaker stays until a call or
//! [`Registry::remove`] moves it, so remove a backend's key when discovery
//! drops it. The same holds for `BackendLayer`.
//!
//! # Examples
//! ```
//! use cutout::{CircuitBreaker, Registry, reqwest::CircuitBreakerMiddleware};
//! use reqwest_middleware::ClientBuilder;
//! use std::{sync::Arc, time::Duration};
//!
//! let breakers: Arc<Registry<String>> =
//!     Arc::new(Registry::new(CircuitBreaker::builder().consecutive_failures(5))?);
//! let client = ClientBuilder::new(
//!     reqwest::Client::builder().timeout(Duration::from_secs(2)).build()?,
//! )
//! .with(CircuitBreakerMiddleware::new(breakers.clone()))
//! .build();
//! // client.get("http://orders.internal:8080/orders").send().await ...
//! # let _ = client;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::classify::Classify;
use crate::clock::{Clock, DefaultClock};
use crate::permit::Outcome;
use crate::recording::Recorder;
use crate::{Registry, Rejected};
use ::http::Extensions;
use ::reqwest::{Request, Response, Url};
use ::reqwest_middleware::{Middleware, Next};
use std::borrow::Cow;
use std::fmt;
use std::hash::BuildHasher;
use std::sync::Arc;

/// A key function: the registry key of a request, borrowed from it where it can be.
type KeyFn = dyn for<'r> Fn(&'r Request) -> Cow<'r, str> + Send + Sync;

/// A [`reqwest-middleware`](::reqwest_middleware) middleware that sends each
/// request through its backend's breaker, from a [`Registry`] keyed by the URL's
/// `host[:port]`. See the [module docs](self) for where it goes, its order with
/// retry and timeouts, and what counts as a failure.
///
/// # Examples
/// A key per route instead of per host:
/// ```
/// use cutout::{CircuitBreaker, Registry, reqwest::CircuitBreakerMiddleware};
/// use std::{borrow::Cow, sync::Arc};
///
/// let breakers = Arc::new(Registry::new(CircuitBreaker::builder())?);
/// let middleware = CircuitBreakerMiddleware::new(breakers).key(|request: &reqwest::Request| {
///     let url = request.url();
///     match url.path().starts_with("/search") {
///         true => Cow::Owned(format!("{}/search", url.host_str().unwrap_or(""))),
///         false => Cow::Borrowed(url.host_str().unwrap_or("")),
///     }
/// });
/// # let _ = middleware;
/// # Ok::<(), cutout::ConfigError>(())
/// ```
pub struct CircuitBreakerMiddleware<
    C: Clock = DefaultClock,
    S = foldhash::fast::RandomState,
    K = DefaultClassifier,
> {
    registry: Arc<Registry<String, C, S>>,
    key: Option<Arc<KeyFn>>,
    classify: K,
    recorder: Option<Recorder>,
}

impl<C: Clock, S> CircuitBreakerMiddleware<C, S> {
    /// A middleware whose breakers come from `registry`, one per `host[:port]`,
    /// classified by [`DefaultClassifier`].
    pub fn new(registry: Arc<Registry<String, C, S>>) -> Self {
        CircuitBreakerMiddleware {
            registry,
            key: None,
            classify: DefaultClassifier,
            recorder: None,
        }
    }
}

impl<C: Clock, S, K> CircuitBreakerMiddleware<C, S, K> {
    /// Keys each request by `key(request)` instead of its URL's `host[:port]`: a
    /// route, a tenant, a pool. Borrow from the request where you can
    /// (`Cow::Borrowed`): a key that must be built allocates on every request.
    /// Keys that come from what a client sends need a key cap (see
    /// [Keying safely](crate::Registry#keying-safely)).
    #[must_use]
    pub fn key<F>(mut self, key: F) -> Self
    where
        F: for<'r> Fn(&'r Request) -> Cow<'r, str> + Send + Sync + 'static,
    {
        self.key = Some(Arc::new(key));
        self
    }

    /// Classifies each result with `classify` instead of [`DefaultClassifier`]:
    /// any [`Classify`] of `Result<reqwest::Response, reqwest_middleware::Error>`.
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, Classify, Outcome, Registry};
    /// use cutout::reqwest::{CircuitBreakerMiddleware, DefaultClassifier};
    /// use std::sync::Arc;
    ///
    /// let breakers = Arc::new(Registry::new(CircuitBreaker::builder())?);
    /// // A 429 counts as a failure too.
    /// let middleware = CircuitBreakerMiddleware::new(breakers).classify(
    ///     |r: &Result<reqwest::Response, reqwest_middleware::Error>| match r {
    ///         Ok(response) if response.status() == 429 => Outcome::Failure,
    ///         _ => DefaultClassifier.classify(r),
    ///     },
    /// );
    /// # let _ = middleware;
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn classify<K2>(self, classify: K2) -> CircuitBreakerMiddleware<C, S, K2> {
        CircuitBreakerMiddleware {
            registry: self.registry,
            key: self.key,
            classify,
            recorder: self.recorder,
        }
    }

    /// Records each request a breaker admitted to `recorder`: when it ended, its
    /// latency (from the breaker's admission to the response head or the error),
    /// the outcome the classifier gave the breaker, and its registry key
    /// (features `replay` and `reqwest`). A rejected request was never sent and
    /// is not recorded (see [`replay`](crate::replay#what-a-layer-records)); nor is
    /// one whose future was dropped before it ended. Recording never blocks a
    /// request: a call that finds the recorder's queue full is dropped and
    /// counted ([`Recorder::dropped`](crate::replay::Recorder::dropped)).
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, Registry, reqwest::CircuitBreakerMiddleware};
    /// use cutout::replay::Recorder;
    /// use std::sync::Arc;
    ///
    /// let path = std::env::temp_dir().join(format!("client-doc-{}.csv", std::process::id()));
    /// let recorder = Recorder::to_file(&path, 4096)?;
    /// let breakers = Arc::new(Registry::new(CircuitBreaker::builder())?);
    /// let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
    ///     .with(CircuitBreakerMiddleware::new(breakers).record(recorder.clone()))
    ///     .build();
    /// // client.get("http://orders.internal:8080/orders").send().await ...
    /// recorder.flush()?; // at_ms,latency_ms,outcome,key rows, one a request
    /// # let _ = client;
    /// # std::fs::remove_file(&path)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(feature = "replay")]
    #[cfg_attr(docsrs, doc(cfg(feature = "replay")))]
    #[must_use]
    pub fn record(self, recorder: Recorder) -> Self {
        CircuitBreakerMiddleware {
            recorder: Some(recorder),
            ..self
        }
    }

    /// The registry the breakers come from.
    pub fn registry(&self) -> &Arc<Registry<String, C, S>> {
        &self.registry
    }
}

impl<C: Clock, S, K: Clone> Clone for CircuitBreakerMiddleware<C, S, K> {
    fn clone(&self) -> Self {
        CircuitBreakerMiddleware {
            registry: self.registry.clone(),
            key: self.key.clone(),
            classify: self.classify.clone(),
            recorder: self.recorder.clone(),
        }
    }
}

impl<C: Clock, S, K> fmt::Debug for CircuitBreakerMiddleware<C, S, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CircuitBreakerMiddleware")
            .field(
                "keyed_by",
                &if self.key.is_some() {
                    "a key function"
                } else {
                    "host[:port]"
                },
            )
            .finish_non_exhaustive()
    }
}

/// The URL's `host[:port]`, borrowed: no scheme, user info, path or query. The
/// port is there only when the URL names one other than its scheme's default.
///
/// # Examples
/// ```
/// let url = reqwest::Url::parse("http://user:secret@Orders.Internal:8080/v1?id=7")?;
/// assert_eq!(cutout::reqwest::host_key(&url), "orders.internal:8080");
/// let url = reqwest::Url::parse("https://search.internal:443/q")?;
/// assert_eq!(cutout::reqwest::host_key(&url), "search.internal");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn host_key(url: &Url) -> &str {
    &url[url::Position::BeforeHost..url::Position::AfterPort]
}

#[async_trait::async_trait]
impl<C, S, K> Middleware for CircuitBreakerMiddleware<C, S, K>
where
    C: Clock + Clone + Send + Sync + 'static,
    S: BuildHasher + Send + Sync + 'static,
    K: Classify<Response, reqwest_middleware::Error> + Send + Sync + 'static,
{
    async fn handle(
        &self,
        request: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        let key = match &self.key {
            Some(key) => key(&request),
            None => Cow::Borrowed(host_key(request.url())),
        };
        let permit = match self.registry.acquire_owned(&*key) {
            Ok(permit) => permit,
            Err(rejected) => {
                return Err(reqwest_middleware::Error::middleware(Rejection {
                    rejected,
                    key: key.into_owned(),
                }));
            }
        };
        let tap = self.recorder.as_ref().map(|r| r.start(&key));
        drop(key);
        let result = next.run(request, extensions).await;
        let outcome = self.classify.classify(&result);
        permit.record(outcome);
        if let Some(tap) = tap {
            tap.finish(outcome);
        }
        result
    }
}

/// The default classification of [`CircuitBreakerMiddleware`]: see the table in
/// the [module docs](self#classification).
///
/// # Examples
/// ```
/// use cutout::{Classify, Outcome, reqwest::DefaultClassifier};
///
/// let status = |code: u16| {
///     let response = http::Response::builder().status(code).body("").unwrap();
///     Ok(reqwest::Response::from(response))
/// };
/// assert_eq!(DefaultClassifier.classify(&status(503)), Outcome::Failure);
/// assert_eq!(DefaultClassifier.classify(&status(429)), Outcome::Ignored);
/// assert_eq!(DefaultClassifier.classify(&status(404)), Outcome::Success);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DefaultClassifier;

impl Classify<Response, reqwest_middleware::Error> for DefaultClassifier {
    fn classify(&self, result: &Result<Response, reqwest_middleware::Error>) -> Outcome {
        match result {
            Ok(response) if response.status().is_server_error() => Outcome::Failure,
            Ok(response) if response.status() == ::http::StatusCode::TOO_MANY_REQUESTS => {
                Outcome::Ignored
            }
            Ok(_) => Outcome::Success,
            Err(reqwest_middleware::Error::Reqwest(e)) if e.is_connect() || e.is_timeout() => {
                Outcome::Failure
            }
            Err(reqwest_middleware::Error::Reqwest(e)) if e.is_request() && !is_own_body(e) => {
                Outcome::Failure
            }
            Err(_) => Outcome::Ignored,
        }
    }
}

/// Whether request error `e` is the caller's own request body failing as it was
/// sent (a stream the caller gave that broke): reqwest reports it as a request
/// error whose sources hold the body's error, itself a reqwest body error.
fn is_own_body(e: &reqwest::Error) -> bool {
    let mut source = std::error::Error::source(e);
    while let Some(error) = source {
        if error
            .downcast_ref::<reqwest::Error>()
            .is_some_and(reqwest::Error::is_body)
        {
            return true;
        }
        source = error.source();
    }
    false
}

/// The error of a request that [`CircuitBreakerMiddleware`] rejected, inside a
/// [`reqwest_middleware::Error::Middleware`]: the request was never sent. Its
/// [`source`](std::error::Error::source) is the [`Rejected`], and so is the
/// source of the `reqwest_middleware::Error` around it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejection {
    rejected: Rejected,
    key: String,
}

impl Rejection {
    /// The breaker's rejection: its state and
    /// [`retry_after`](Rejected::retry_after).
    pub fn rejected(&self) -> &Rejected {
        &self.rejected
    }

    /// The registry key of the breaker that rejected the request: by default
    /// its URL's `host[:port]`.
    pub fn key(&self) -> &str {
        &self.key
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The rejection itself is the source: a chain walker prints it once.
        write!(
            f,
            "request to {} not sent: its circuit breaker rejected it",
            self.key
        )
    }
}

impl std::error::Error for Rejection {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.rejected)
    }
}

/// The [`Rejected`] in `error`'s [`source`](std::error::Error::source) chain,
/// if a breaker rejected the request: `None` for the backend's own errors.
///
/// # Examples
/// ```
/// use cutout::reqwest::rejected;
///
/// let error = reqwest_middleware::Error::middleware(std::io::Error::other("not a breaker"));
/// assert!(rejected(&error).is_none());
/// ```
pub fn rejected(error: &reqwest_middleware::Error) -> Option<&Rejected> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        if let Some(rejected) = e.downcast_ref::<Rejected>() {
            return Some(rejected);
        }
        source = e.source();
    }
    None
}
