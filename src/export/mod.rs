//! Integrations with observability crates, each behind its own cargo feature.
//!
//! - [`metrics`] (feature `metrics`): publishes a breaker's snapshot and its
//!   transitions through the [`metrics`](::metrics) facade.
//! - [`tracing`] (feature `tracing`): one [`tracing`](::tracing) event per
//!   transition.
//!
//! Neither adds anything to the call path: they run when a transition happens
//! (rare, and never on a closed-state success) or when you ask for a snapshot.

#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub mod metrics;
#[cfg(feature = "tracing")]
#[cfg_attr(docsrs, doc(cfg(feature = "tracing")))]
pub mod tracing;
