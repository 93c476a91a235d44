//! The one place that names an atomic type.
//!
//! Under `--cfg cutout_loom` every atomic, the thread-local and the lazily built
//! statics come from [loom], so the `loom-tests/` crate model-checks the real
//! library code. Otherwise the atomics are [`portable_atomic`]'s (64-bit atomics on
//! every target, with a fallback where the hardware has none) and the rest is `std`.
//!
//! Nothing outside this module imports an atomic type directly.

#[cfg(cutout_loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, AtomicUsize, Ordering, fence};
#[cfg(cutout_loom)]
pub(crate) use loom::sync::{Arc, Mutex};

#[cfg(not(cutout_loom))]
pub(crate) use portable_atomic::{AtomicU64, AtomicUsize, Ordering, fence};
#[cfg(not(cutout_loom))]
pub(crate) use std::sync::{Arc, Mutex};

/// For the few process-wide statics that loom does not model: the default clock's
/// cached time (loom models drive time with `ManualClock`). A `const` constructor is
/// needed for a `static`, which loom's atomics do not have.
pub(crate) use std::sync::atomic::AtomicU64 as ProcessAtomicU64;

/// A pointer set once, for a stripe allocated by its first writer
/// ([`crate::stripe`]): `Acquire` to find it, `Release` (a CAS; the loser of a race
/// frees its copy) to publish it. loom does not model it, so under loom every
/// stripe is allocated when the breaker is built ([`EAGER_STRIPES`]) and the
/// models see the allocated layout.
pub(crate) use once_cell::race::OnceBox;

/// Whether a breaker allocates all its stripes when built: only under loom.
pub(crate) const EAGER_STRIPES: bool = cfg!(cutout_loom);
