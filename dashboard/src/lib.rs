//! A live web dashboard for [`cutout`] circuit breakers.
//!
//! [`router`] returns an axum [`Router`] to mount at any path. It serves one page
//! (HTML, CSS and JavaScript from this binary, nothing fetched from elsewhere),
//! a server-sent-events stream of snapshots four times a second, and each
//! transition at once where the source's listener is wired in (`api/stream`),
//! and the same snapshot as JSON for scripts (`api/snapshot`).
//!
//! ```no_run
//! use cutout::{CircuitBreaker, Registry};
//! use std::sync::Arc;
//!
//! # async fn serve() -> Result<(), Box<dyn std::error::Error>> {
//! let registry: Arc<Registry<String>> = Arc::new(Registry::new(CircuitBreaker::builder())?);
//! let source = cutout_dashboard::Source::new().registry(registry.clone());
//! let app = axum::Router::new().nest("/breakers", cutout_dashboard::router(source));
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! axum::serve(listener, app).await?;
//! # Ok(())
//! # }
//! ```
//!
//! # What it reads
//! Nothing on the call path: one sampler per router reads every breaker's
//! [`metrics`](cutout::CircuitBreaker::metrics) each tick ([`TICK`], 250 ms,
//! unless [`Source::tick`] says otherwise), turns the lifetime counters into
//! admitted and rejected per second, and the per-reason transition counts into
//! events, so a transition between two ticks is never missed (several of one
//! reason in one tick show as one event with a count). Each client renders its
//! own page of that one sorted frame (sick first, filtered by name, at most 200
//! rows; clients that ask for the same page share one rendering), and holds one
//! frame at a time: a slow client skips frames instead of queueing them.
//!
//! # Pushed transitions
//! [`Source::listener`] (and [`Source::registry_listener`]), given to the
//! breakers' `on_transition` when they are built, pushes each transition to
//! the open streams at once rather than at the next tick. On the caller's
//! thread it only raises a flag and wakes the sampler; the sampler then reads
//! every breaker (states and transitions; the rates and charts move on ticks),
//! at most once per [`PUSH_GAP`] however many transitions come.
//!
//! # What it shows
//! Per breaker: its state and time in it, failure and slow-call rates against
//! the [`Thresholds`], admitted and rejected per second as a chart, the backoff
//! level and cooldown, recent transitions (those made before the sampler first
//! saw the breaker listed as earlier), its what-if candidates'
//! [`CandidateReport`](cutout::CandidateReport)s, and whether it is a shadow
//! breaker ([`CircuitBreaker::is_shadow`](cutout::CircuitBreaker::is_shadow)),
//! with the calls it would have rejected
//! ([`Lifetime::would_reject`](cutout::Lifetime::would_reject)).
//!
//! # Query
//! `api/snapshot` and `api/stream` take `q` (a name filter, case-insensitive),
//! `sick=1` (only breakers not Closed or Disabled), `page` (from 0) and
//! `per_page` (1 to 200, default 50). The filter keeps the names that contain
//! `q` once both are in Unicode lower case, each character lowercased alone
//! (`Σ` is `σ` wherever it stands). It is not case folding: `İ` is `i̇`, so
//! `q=İstanbul` does not find `istanbul`.
//!
//! # Hosts
//! Every route refuses (`403 Forbidden`) a request sent to a host the
//! dashboard is not reached by: its `Host` must be an IP address, `localhost`
//! or a name under `.localhost`, or a name given to [`Source::allow_host`]. A
//! page from another site whose name was made to resolve to this server (DNS
//! rebinding) is same-origin to the browser; its `Host` gives it away, so it
//! can neither read the breakers nor send a control. Behind a proxy, or at a
//! name of its own, allow each name the dashboard is reached by.
//!
//! # Controls
//! With [`Source::controls`]`(true)` the page offers force open, disable and reset
//! per breaker: `POST api/control?id=I&action=force_open|disable|reset`. Each
//! row of the snapshot carries an `id`, one per breaker and never reused, so
//! that breakers sharing a name (each with a card of its own) are told apart;
//! the page sends its card's. A script may send `name=N` instead, for every
//! breaker named `N`, and with both, the id must name a breaker called `N`. A
//! request is refused unless the browser marks it `Sec-Fetch-Site: same-origin`
//! or its `Origin` matches its `Host`; `GET` changes nothing. The dashboard has no
//! authentication of its own: mount a router with controls behind the
//! application's, for example
//!
//! ```no_run
//! # use std::sync::Arc;
//! # let registry: Arc<cutout::Registry<String>> = todo!();
//! # async fn require_operator(r: axum::extract::Request, next: axum::middleware::Next) -> axum::response::Response { next.run(r).await }
//! let admin = cutout_dashboard::router(cutout_dashboard::Source::new().registry(registry).controls(true))
//!     .layer(axum::middleware::from_fn(require_operator));
//! let app: axum::Router = axum::Router::new().nest("/admin/breakers", admin);
//! ```
//!
//! # A fleet
//! [`Source::fleet`] adds a fleet's picture: live peers and quorum opens in the
//! header, and per breaker how many live peers report it Open and the fleet-wide
//! override in force, if any. With the `fleet` feature, cutout-fleet's
//! `FleetView` is a [`FleetSource`] (the picture), and so is its `Fleet` (the
//! picture, the overrides, and the controls).
//!
//! With a `Fleet` and controls on, force open and disable act fleet-wide: they
//! are `Fleet::force_open` and `Fleet::disable` for `for_s` seconds
//! ([`OVERRIDE_DEFAULT`] unless the request says, at most [`OVERRIDE_MAX`]; the
//! page has a field for it). The fleet sets every instance's breakers attached
//! under that name, this one's at once, and ends the override at its deadline;
//! attach the breakers the page shows (`Fleet::breaker`, `Fleet::attach`,
//! `Fleet::attach_registry`), or a click changes only the other instances.
//! Reset does both: `Fleet::release` everywhere, and a reset of the local
//! breaker, whatever opened it. The id narrows the local action only: a
//! fleet's override is by name, so through a fleet force open and disable
//! reach every breaker of the id's name, and reset resets the local breaker the
//! id names. Without a fleet, or with one that takes no controls, each control
//! acts on the local breakers alone. [`FleetSource`]
//! has an example.
//!
//! Key names are shown as text: the page builds no HTML from data, and its
//! content security policy allows no inline script.

#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

mod control;
mod fleet;
mod http;
mod push;
mod sampler;
mod source;
mod view;

pub use axum::Router;
pub use fleet::{FleetAction, FleetOverride, FleetSource, OVERRIDE_DEFAULT, OVERRIDE_MAX};
pub use push::PUSH_GAP;
pub use source::{Breakers, MAX_STREAMS, MAX_TICK, MIN_TICK, Source, TICK, Thresholds};

use std::sync::Arc;

/// The dashboard for `source`, to mount with [`Router::nest`] (or serve as it is).
///
/// # Examples
/// ```
/// use cutout::CircuitBreaker;
/// use std::sync::Arc;
///
/// let db = Arc::new(CircuitBreaker::builder().build()?);
/// let app: axum::Router = axum::Router::new()
///     .nest("/breakers", cutout_dashboard::router(cutout_dashboard::Source::new().breaker("db", db)));
/// # drop(app);
/// # Ok::<(), cutout::ConfigError>(())
/// ```
pub fn router(source: Source) -> Router {
    http::routes(Arc::new(sampler::Shared::new(source.finish())))
}
