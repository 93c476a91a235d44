//! A lock-free circuit breaker for hot request paths shared by many threads.
//!
//! A breaker sits between a caller and a remote dependency. While the dependency is
//! healthy (**Closed**) calls go through and their outcomes are counted. When it is
//! clearly sick (too many consecutive failures, or a failure or slow-call rate above
//! a threshold over a sliding window) the breaker trips **Open**: calls are rejected
//! at once, with the time until a retry can succeed. After a cooldown the next call
//! moves it **HalfOpen** and an exact number of probes is admitted; their verdict
//! closes it again or reopens it with a longer (exponential, capped, optionally
//! jittered) cooldown. Transitions happen on the call path: there is no timer.
//!
//! # Usage
//! ```
//! use cutout::{CircuitBreaker, Error};
//! use std::time::Duration;
//!
//! let breaker = CircuitBreaker::builder()
//!     .consecutive_failures(5)
//!     .open_duration(Duration::from_secs(1))
//!     .build()?;
//!
//! match breaker.call(|| fetch_user(42)) {
//!     Ok(user) => println!("{user}"),
//!     Err(Error::Rejected(r)) => println!("503, Retry-After: {:?}", r.retry_after()),
//!     Err(Error::Inner(e)) => println!("502: {e}"),
//! }
//! # fn fetch_user(_: u32) -> Result<String, std::io::Error> { Ok("ada".into()) }
//! # Ok::<(), cutout::ConfigError>(())
//! ```
//!
//! - [`call`](CircuitBreaker::call) / [`call_with`](CircuitBreaker::call_with) run a
//!   closure; `call_with` takes a classifier that maps the result to an [`Outcome`]
//!   (Success, Failure, or Ignored: a 404, the caller's own cancellation).
//! - [`try_acquire`](CircuitBreaker::try_acquire) gives a [`Permit`] now, the outcome
//!   later, from any thread; what a permit dropped unrecorded counts as is [`Dropped`].
//! - [`call_async`](CircuitBreaker::call_async) /
//!   [`call_async_with`](CircuitBreaker::call_async_with) wrap a future, on any runtime.
//! - Feature `tower`: `CircuitBreakerLayer` around any `Service`. Feature `http`:
//!   `http::HttpLayer` answers a rejection with `503` and `Retry-After`
//!   (`examples/axum.rs`); `http::BackendLayer` keeps one breaker per backend
//!   around an HTTP client service, picked by each request's authority.
//! - Feature `reqwest`: `reqwest::CircuitBreakerMiddleware` for `reqwest-middleware`
//!   clients, one breaker per backend `host[:port]` (`examples/client.rs`).
//! - Feature `registry` (default): `Registry`, one breaker per dependency key.
//! - Feature `retry` (default): [`retry`](fn@retry) and [`retry_async`] stop at an open breaker.
//! - [Fallbacks](fallback) answer a rejection, or a failure, with a cached value.
//! - Manual control: [`force_open`](CircuitBreaker::force_open),
//!   [`disable`](CircuitBreaker::disable), [`reset`](CircuitBreaker::reset).
//!
//! # Testing your code
//! [`ManualClock`] drives time by hand, with no sleeps:
//! ```
//! use cutout::{CircuitBreaker, ManualClock, State};
//! use std::time::Duration;
//!
//! let clock = ManualClock::new();
//! let breaker = CircuitBreaker::builder()
//!     .consecutive_failures(1)
//!     .open_duration(Duration::from_secs(2))
//!     .clock(clock.clone())
//!     .build()?;
//! let _ = breaker.call(|| Err::<(), _>("timeout"));
//! assert_eq!(breaker.state(), State::Open);
//! clock.advance(Duration::from_secs(2));
//! breaker.call(|| Ok::<_, ()>("probe")).unwrap();
//! assert_eq!(breaker.state(), State::Closed);
//! # Ok::<(), cutout::ConfigError>(())
//! ```
//!
//! # Configuration
//! [`Builder`] documents every setting, its default and its bounds. With no policy
//! configured, a breaker trips at a 50% failure rate over a 10 s window once it
//! holds 20 calls. A bad setting is a [`ConfigError`] naming the field; nothing is
//! clamped silently. [`Builder::ramp_up`] recovers gradually: after a good probe
//! round the admitted share rises from 10% to 100% over a duration.
//!
//! # Observing, saving and restoring
//! [`on_transition`](Builder::on_transition) reports every transition once, after the
//! compare-and-swap that made it, with nothing held; [`metrics`](CircuitBreaker::metrics)
//! is a snapshot; features `metrics` and `tracing` publish both (`export`).
//! [`save`](CircuitBreaker::save) and [`Builder::restore`] carry a breaker's state
//! across a restart or a config reload (`examples/restart.rs`; feature `serde` for
//! the format documented on [`SavedState`]); `cutout-fleet` shares it between
//! instances, off the call path.
//!
//! # Design, correctness and performance
//! No lock and no allocation on the call path: a closed call writes only its own
//! thread's stripe of counters. The one `unsafe` call registers `fork` handlers (see
//! [`DefaultClock`]). The [implementation notes](implementation) are the design: the
//! state word, generations and the ABA window, the sliding window, the orderings.
//! The `loom-tests` crate model-checks the concurrency claims against this code
//! (`docs/TESTING.md`), and `docs/PERFORMANCE.md` holds the measured figures, per
//! CPU, with the commands that reproduce them.

#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
// docs.rs labels every feature-gated item with the feature it needs.
#![cfg_attr(docsrs, feature(doc_cfg))]
// Denied, not forbidden: one function allows it (`fork::register`, which
// registers the fork handlers), and under loom only, the modelled `OnceBox`
// (`sync::loom_once_box`).
#![deny(unsafe_code)]

mod attach;
mod breaker;
mod candidate;
mod classify;
mod clock;
mod config;
mod dropped;
mod error;
mod event;
#[cfg(any(feature = "metrics", feature = "tracing"))]
#[cfg_attr(docsrs, doc(cfg(any(feature = "metrics", feature = "tracing"))))]
pub mod export;
pub mod fallback;
mod fork;
mod future;
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub mod http;
pub mod implementation;
#[cfg(cutout_loom)]
#[doc(hidden)]
pub mod loom_hooks;
mod metrics;
mod permit;
mod policy;
mod ramp;
#[cfg(feature = "registry")]
mod registry;
#[cfg(feature = "replay")]
#[cfg_attr(docsrs, doc(cfg(feature = "replay")))]
pub mod replay;
#[cfg(feature = "reqwest")]
#[cfg_attr(docsrs, doc(cfg(feature = "reqwest")))]
pub mod reqwest;
#[cfg(feature = "retry")]
#[cfg_attr(docsrs, doc(cfg(feature = "retry")))]
mod retry;
mod saved;
#[cfg(feature = "serde")]
mod settings;
mod slot;
mod state;
mod stripe;
mod sync;
#[cfg(feature = "tower")]
mod tower;
mod util;
mod window;

pub use breaker::CircuitBreaker;
pub use candidate::CandidateReport;
pub use classify::{Classify, ErrIsFailure};
pub use clock::{Clock, DefaultClock, ManualClock, StdClock};
pub use config::Builder;
pub use dropped::Dropped;
pub use error::{ConfigError, Error, Rejected};
pub use event::{Reason, Transition};
pub use future::CallAsync;
pub use metrics::{Lifetime, Metrics};
pub use permit::{Outcome, OwnedPermit, Permit};
#[cfg(feature = "registry")]
#[cfg_attr(docsrs, doc(cfg(feature = "registry")))]
pub use registry::{Registry, RegistryBuilder};
#[cfg(feature = "retry")]
#[cfg_attr(docsrs, doc(cfg(feature = "retry")))]
pub use retry::{
    RetryAny, RetryPolicy, RetryPolicyBuilder, Retryable, retry, retry_async, retry_with_sleep,
};
pub use saved::{SavedState, SavedWindow};
#[cfg(feature = "serde")]
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
pub use settings::Settings;
#[cfg(feature = "__test-hooks")]
#[doc(hidden)]
pub use slot::{owned_stripes_per_breaker, simulate_owned_stripes, simulate_parallelism};
pub use state::State;

/// The built-in observers of every breaker's transitions: the exporters of the
/// enabled features. The core calls them as it calls a user's listener, after the
/// CAS and with nothing held, and knows nothing else of them. Each is given the
/// breaker's name and, for a what-if candidate's transition, the candidate's.
pub(crate) type Observer =
    fn(&std::borrow::Cow<'static, str>, Option<&std::borrow::Cow<'static, str>>, &Transition);

/// See [`Observer`].
pub(crate) const OBSERVERS: &[Observer] = &[
    #[cfg(feature = "metrics")]
    export::metrics::transition,
    #[cfg(feature = "tracing")]
    export::tracing::transition,
];
#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub use tower::{
    CircuitBreakerLayer, CircuitBreakerService, FallbackFn, FallbackFuture, FallbackLayer,
    FallbackService, ResponseFuture, fallback_fn,
};
pub use window::WindowCounts;

/// README.md's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// The package's README (what crates.io shows), compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.crate.md")]
struct CrateReadmeDoctests;
