//! A lock-free circuit breaker for hot request paths shared by many threads.
//!
//! A breaker sits between a caller and a remote dependency. While the dependency is
//! healthy (**Closed**) calls go through and their outcomes are counted. When it is
//! clearly sick (too many consecutive failures, or a failure or slow-call rate above
//! a threshold over a sliding window) the breaker trips **Open**: calls are rejected
//! at once, with an error that says when to retry. After a cooldown the next call
//! moves it **HalfOpen** and an exact number of probe calls is admitted; their
//! verdict closes it again or reopens it with a longer (exponential, capped,
//! optionally jittered) cooldown. Transitions happen lazily on the call path: there
//! is no timer per breaker.
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
//! Three ways to call through a breaker:
//! - [`CircuitBreaker::call`] / [`call_with`](CircuitBreaker::call_with): run a closure;
//!   `call_with` takes a classifier that maps the result to an [`Outcome`] (Success,
//!   Failure, or Ignored: a 404, a caller's own cancellation).
//! - [`CircuitBreaker::try_acquire`]: a [`Permit`] now, the outcome later, from any
//!   thread. A permit dropped unrecorded counts as ignored and gives its half-open
//!   slot back, unless it ran past the slow-call threshold (a slow call) or
//!   [`Builder::on_drop`] makes it a failure (see [`Dropped`]).
//! - [`CircuitBreaker::try_acquire_owned`]: the same, owning an `Arc` of the breaker.
//!
//! Async, tower, many dependencies, retries:
//! - [`CircuitBreaker::call_async`] / [`call_async_with`](CircuitBreaker::call_async_with)
//!   wrap any future, on any runtime or none. The permit is taken at the first poll
//!   and travels inside the future: dropping it before it completes (a timeout, a
//!   cancelled request) counts the call as ignored and gives a half-open slot back
//!   (or, as [`Dropped`] explains, as a slow call or a failure: so a timeout
//!   outside the breaker protects only with the slow-call policy or
//!   [`Builder::on_drop`]).
//! - With the `tower` feature, `CircuitBreakerLayer` puts one shared breaker in
//!   front of any `Service`; a rejection is [`Error::Rejected`] with the
//!   `retry_after` an HTTP server needs for `503` + `Retry-After` (see
//!   `examples/tower_http.rs`), and a [`Classify`] can make a `503` response a
//!   failure and a `404` a success.
//! - With the `http` feature, `http::HttpLayer` does the same for services on the
//!   `http` crate's types (axum, hyper): a rejection is a `503` response with
//!   `Retry-After`, the inner service's errors pass through unchanged (an axum
//!   route stays `Infallible`, so no `HandleErrorLayer`), and a `5xx` is a failure.
//!   In axum 0.8: `.route_layer(cutout::http::HttpLayer::new(breaker))`. See
//!   `examples/axum.rs`.
//! - With the `registry` feature (on by default), a `Registry` holds one breaker per
//!   dependency key, built on first use from a shared [`Builder`] and named after
//!   its key, with lock-free lookups and optional idle eviction (only of breakers
//!   that behave like new ones; a call in flight keeps its own breaker, and only it;
//!   an outcome lost to `remove`, `restore_all` or eviction's one race is counted
//!   by `orphaned`).
//! - [`retry`](fn@retry), [`retry_with_sleep`] and [`retry_async`] retry with
//!   full-jitter exponential backoff ([`RetryPolicy`]); every attempt goes through
//!   the breaker, and an open breaker ends the retries at once, without sleeping.
//! - [Fallbacks](fallback): [`call_or_else`](CircuitBreaker::call_or_else) and
//!   [`call_async_or_else`](CircuitBreaker::call_async_or_else) answer a rejection
//!   (a cached or degraded value) instead of an error;
//!   [`call_or_recover`](CircuitBreaker::call_or_recover) and
//!   [`call_async_or_recover`](CircuitBreaker::call_async_or_recover) answer a
//!   failure too. With the `tower` feature, `FallbackLayer` answers a
//!   `CircuitBreakerLayer`'s rejections with a fallback service or function. A
//!   fallback runs outside the breaker: it is not an outcome, and one that fails or
//!   panics changes nothing in the breaker.
//!
//! ```
//! use cutout::{CircuitBreaker, RetryPolicy, retry};
//! use std::time::Duration;
//!
//! let breaker = CircuitBreaker::builder().consecutive_failures(5).build()?;
//! let policy = RetryPolicy::builder().base(Duration::from_millis(1)).build()?;
//! let user = retry(&breaker, &policy, || fetch_user(42))?;
//! assert_eq!(user, "ada");
//! # fn fetch_user(_: u32) -> Result<String, std::io::Error> { Ok("ada".into()) }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Manual control: [`force_open`](CircuitBreaker::force_open),
//! [`disable`](CircuitBreaker::disable), [`reset`](CircuitBreaker::reset). Observation:
//! [`state`](CircuitBreaker::state) (a pure read), [`metrics`](CircuitBreaker::metrics),
//! and [`on_transition`](Builder::on_transition) events.
//!
//! # Progressive recovery
//! By default a successful half-open round closes the breaker at once, and the whole
//! load lands on a dependency that has just answered a few probes. With
//! [`Builder::ramp_up`] the round moves the breaker to [`State::Recovering`]
//! instead: the share of calls admitted rises linearly from 10% to 100% over the
//! ramp's duration, then the next call closes it ([`Reason::RampCompleted`]). A
//! call not admitted is rejected (`Recovering`, `retry_after` zero), and counted
//! as rejected. The trip policies judge the admitted calls (`minimum_calls` not
//! scaled), and a trip reopens at the next backoff level ([`Reason::RampFailed`]).
//! Each thread's admissions follow the schedule to within one call over any run of
//! its calls, decided by a running sum in a small thread-local table: no shared
//! cache line is written, no lock is taken. A breaker without a ramp pays nothing for it: its
//! closed path never looks at it.
//!
//! ```
//! use cutout::{CircuitBreaker, ManualClock, State};
//! use std::time::Duration;
//!
//! let clock = ManualClock::new();
//! let breaker = CircuitBreaker::builder()
//!     .consecutive_failures(1)
//!     .ramp_up(Duration::from_secs(30))
//!     .clock(clock.clone())
//!     .build()?;
//! let _ = breaker.call(|| Err::<(), _>("down"));
//! clock.advance(Duration::from_secs(1));
//! breaker.call(|| Ok::<_, ()>("probe")).unwrap();
//! assert_eq!(breaker.state(), State::Recovering);
//! let admitted = (0..100).filter(|_| breaker.call(|| Ok::<_, ()>(())).is_ok()).count();
//! assert!((10..=11).contains(&admitted)); // 10% at first, to within one call
//! clock.advance(Duration::from_secs(30));
//! breaker.call(|| Ok::<_, ()>(())).unwrap();
//! assert_eq!(breaker.state(), State::Closed);
//! # Ok::<(), cutout::ConfigError>(())
//! ```
//!
//! # Observability
//! - [`on_transition`](Builder::on_transition): a callback for every transition, with
//!   its from, to, generation, [`Reason`], time and the window figures that caused it,
//!   called exactly once by the thread whose compare-and-swap made it, with nothing
//!   held.
//! - [`metrics`](CircuitBreaker::metrics): a [`Metrics`] snapshot of the state, the
//!   window and striped lifetime counters.
//! - Feature `metrics`: `CircuitBreaker::publish_metrics`, `Registry::publish_metrics`
//!   and the `export::metrics` module publish the snapshot through the `metrics`
//!   crate facade, with a `breaker` label from [`Builder::name`] (a registry's
//!   breakers are named after their keys).
//! - Feature `tracing`: one `tracing` event per transition (`WARN` when the breaker
//!   opens, `INFO` otherwise), documented in `export::tracing`.
//!
//! None of them adds work to a closed-state success.
//!
//! # Restarts and fleets
//! A breaker is per process: it knows what its own calls saw, and nothing is
//! shared between processes on the call path (gobreaker's distributed breaker
//! takes a Redis lock per call; cutout never puts a remote round trip there). What
//! a breaker knows can travel off the call path:
//! - [`CircuitBreaker::save`] takes a [`SavedState`]: the state, the backoff level,
//!   an Open deadline as wall-clock time, the consecutive failures, the window's
//!   totals and the name, read with loads only, so no call waits for it.
//! - [`Builder::restore`] builds a breaker that starts from it: Open until the saved
//!   deadline (the wall-clock time left is turned into a deadline on the breaker's
//!   monotonic clock once, at the build), ready to probe once it has passed,
//!   HalfOpen as a fresh round, ForcedOpen and Disabled kept, a fresh generation. A
//!   state saved under other settings restores what still makes sense, and bad input
//!   is a [`ConfigError`]; [`Builder::restore`] has the rules.
//! - With the `serde` feature, `SavedState` is `Serialize` / `Deserialize` in a
//!   stable, versioned format, documented on [`SavedState`].
//! - A `Registry` saves and restores every key (`save_all`, `restore_all`), and
//!   `RegistryBuilder::initial_state` gives each key created later its first state.
//!
//! So a restarted process starts Open against a dependency its predecessor knew was
//! down (`examples/restart.rs`), and a **config reload** keeps the state: save,
//! build with the new settings and restore, then swap the breaker where callers
//! find it (for example an `ArcSwap`). A breaker's settings never change in place,
//! which would cost every call a load. For a fleet, save/restore is the exchange
//! format: a new instance starts from what the others know, and an instance can
//! adopt a peer's Open state by restoring it; deciding when to do so (a quorum,
//! freshness) belongs to the fleet layer, off the call path.
//!
//! ```
//! use cutout::{CircuitBreaker, State};
//! use std::sync::{Arc, RwLock};
//!
//! // Callers find the breaker here (an `ArcSwap` avoids the lock).
//! let current = RwLock::new(Arc::new(CircuitBreaker::builder().consecutive_failures(1).build()?));
//! let _ = current.read().unwrap().call(|| Err::<(), _>("down"));
//!
//! // A config reload that keeps the state.
//! let saved = current.read().unwrap().save();
//! let reloaded = CircuitBreaker::builder().consecutive_failures(5).restore(saved).build()?;
//! *current.write().unwrap() = Arc::new(reloaded);
//! assert_eq!(current.read().unwrap().state(), State::Open);
//! # Ok::<(), cutout::ConfigError>(())
//! ```
//!
//! # Examples
//! Tests drive time with [`ManualClock`]; no sleeps:
//! ```
//! use cutout::{CircuitBreaker, ManualClock, State};
//! use std::time::Duration;
//!
//! let clock = ManualClock::new();
//! let breaker = CircuitBreaker::builder()
//!     .window(Duration::from_secs(10), 10)
//!     .failure_rate(0.5, 4)
//!     .open_duration(Duration::from_secs(2))
//!     .clock(clock.clone())
//!     .build()?;
//!
//! for ok in [true, false, true, false] {
//!     let _ = breaker.call(|| if ok { Ok(()) } else { Err("timeout") });
//! }
//! assert_eq!(breaker.state(), State::Open); // 2 failures in 4 calls = 50%
//!
//! clock.advance(Duration::from_secs(2));
//! let probe = breaker.try_acquire().expect("the cooldown is over");
//! assert_eq!(breaker.state(), State::HalfOpen);
//! probe.success();
//! assert_eq!(breaker.state(), State::Closed);
//! # Ok::<(), cutout::ConfigError>(())
//! ```
//!
//! # Configuration
//! See [`Builder`] for every setting and its default. Trip policies are active only
//! when configured; with none, the breaker trips at a 50% failure rate over a 10 s
//! window once it holds 20 calls. Bad settings are a [`ConfigError`] naming the
//! field; nothing is clamped silently.
//!
//! # Safety and correctness
//! No locks and no allocation on the call path, and no `unsafe` in this crate's
//! source but one call: `fork` handlers registered with `libc::pthread_atfork`,
//! which make a forked child's clock and thread slots whole (see
//! [`DefaultClock`]'s fork safety). (Two documented
//! exceptions to the first, both off the steady path: a `Registry` allocates the
//! breaker of a key it sees for the first time, and with the `metrics` feature a
//! transition builds its labelled metric key. The futures use `pin-project-lite`,
//! whose macro expands to `unsafe` projections.)
//!
//! **One state word, generations, tagged phase data.** State, backoff level and a
//! 32-bit generation share one `AtomicU64` changed only by compare-and-swap; every
//! admitted call carries the word it was admitted under, and an outcome recorded
//! after the breaker moved on is discarded and counted as `stale`. The word counts
//! the generation's wraps in its spare bits, so a stale outcome could pass the
//! check only after exactly a multiple of 2^55 transitions during its call (the
//! generation-tagged data it then updates, after 2^32 during the few instructions
//! between the check and the update). The [implementation notes](implementation) give the layout, the protocols
//! and the arithmetic.
//!
//! **Proofs.** The `loom-tests` crate model-checks the interleavings of tripping,
//! half-open admission, stale outcomes, probe verdicts, permit drops, window
//! rotation and manual control against this very code (`--cfg cutout_loom` swaps
//! every atomic for loom's).
//!
//! # Performance
//! A closed-state call reads the state word (a shared, read-mostly line) and writes
//! only the calling thread's own stripe of counters with a plain load and store: no
//! locked instruction and no shared written cache line, so per-thread cost stays flat
//! as threads are added. With a window it also reads the cached clock (one load) and
//! the start and generation of the thread's live bucket, whose calls it counts in
//! the same line. A failure costs more: a CAS on the streak word and, unless the
//! failure budget covers it, a sum over the window's buckets. An open-state
//! rejection is a load of the state word, a clock read compared with the deadline
//! the thread keeps in its own stripe for that word, and a counter.
//!
//! The measured figures (criterion medians and callgrind instruction counts,
//! against failsafe, recloser and a `Mutex` breaker, with the CPU named beside every
//! table) are in `docs/PERFORMANCE.md`, which says how to rerun them; they drift on
//! their own schedule, so the API docs do not repeat them.
//!
//! # Implementation notes
//! - `state.rs`: the packed word and its single CAS helper.
//! - `window.rs` / `stripe.rs` / `slot.rs`: per-thread stripes of counters and window
//!   buckets, each allocated on its thread's first call to the breaker, so a
//!   breaker's memory follows the threads that use it. Threads beyond a breaker's
//!   owned stripes (twice the core count, 16 to 64) spread over four shared stripes
//!   with atomic read-modify-writes, and take an owned one when one comes free.
//! - `policy.rs`: pure trip decisions. `breaker.rs` and `breaker/`: the only code
//!   that reads the clock on the call path.
//! - `event.rs` / `metrics.rs`: what observers see; `export/`: the `metrics` and
//!   `tracing` integrations, each behind its feature.
//! - `future.rs`: `call_async`'s future; `tower.rs`: the layer (feature `tower`);
//!   `http.rs`: the HTTP layer (feature `http`); `dropped.rs`: what a dropped
//!   permit counts as;
//!   `fallback.rs`: fallbacks, sync, async and tower;
//!   `registry.rs`: breakers by key on a `papaya` map (feature `registry`);
//!   `saved.rs`: save and restore, and the `serde` format (feature `serde`);
//!   `retry.rs`: backoff and the retry loops.

#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
// docs.rs labels every feature-gated item with the feature it needs.
#![cfg_attr(docsrs, feature(doc_cfg))]
// Denied, not forbidden: one function allows it (`fork::register`, which
// registers the fork handlers), and under loom only, the modelled `OnceBox`
// (`sync::loom_once_box`).
#![deny(unsafe_code)]

mod breaker;
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
pub use classify::{Classify, ErrIsFailure};
pub use clock::{Clock, DefaultClock, ManualClock, StdClock};
pub use config::Builder;
pub use dropped::Dropped;
pub use error::{ConfigError, Error, Rejected};
pub use event::{Reason, Transition, WindowCounts};
#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub use fallback::{FallbackFn, FallbackFuture, FallbackLayer, FallbackService, fallback_fn};
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
#[doc(hidden)]
pub use slot::{owned_stripes_per_breaker, simulate_owned_stripes, simulate_parallelism};
pub use state::State;

/// The built-in observers of every breaker's transitions: the exporters of the
/// enabled features. The core calls them as it calls a user's listener, after the
/// CAS and with nothing held, and knows nothing else of them.
pub(crate) const OBSERVERS: &[fn(&std::borrow::Cow<'static, str>, &Transition)] = &[
    #[cfg(feature = "metrics")]
    export::metrics::transition,
    #[cfg(feature = "tracing")]
    export::tracing::transition,
];
#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub use tower::{CircuitBreakerLayer, CircuitBreakerService, ResponseFuture};

/// README.md's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
