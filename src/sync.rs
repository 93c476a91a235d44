//! The one place that names an atomic type.
//!
//! Under `--cfg cutout_loom` every atomic, the thread-local and the lazily built
//! statics come from [loom](https://docs.rs/loom), so the `loom-tests/` crate
//! model-checks the real library code. Otherwise the atomics are
//! [`portable_atomic`]'s (64-bit atomics on every target, with a fallback where the
//! hardware has none) and the rest is `std`.
//!
//! Nothing outside this module imports an atomic type directly, and no other file
//! says `cfg(cutout_loom)` (apart from test-module gates and test-only helpers):
//! the thread-locals ([`thread_locals`]), the lazily built statics
//! ([`lazy_static`]) and the one constant that differs ([`LOOM`]) come from here.

#[cfg(cutout_loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, AtomicUsize, Ordering, fence};
#[cfg(cutout_loom)]
pub(crate) use loom::sync::{Arc, Mutex, MutexGuard};

#[cfg(not(cutout_loom))]
pub(crate) use portable_atomic::{AtomicU64, AtomicUsize, Ordering, fence};
#[cfg(not(cutout_loom))]
pub(crate) use std::sync::{Arc, Mutex, MutexGuard};

/// The calling thread's ramp sums, one for each breaker it ramps on (see
/// [`crate::ramp`]): `f` gets a table of `(key, sum)` pairs. `None` while the
/// thread's locals are torn down, and always under loom, whose models keep to
/// owned stripes and the shared one (a `std` thread-local would outlive a loom
/// execution and make the next one differ).
#[cfg(not(cutout_loom))]
pub(crate) fn with_ramp_sums<R>(
    f: impl FnOnce(&std::cell::Cell<[(u64, u64); RAMP_SUMS]>) -> R,
) -> Option<R> {
    std::thread_local! {
        static SUMS: std::cell::Cell<[(u64, u64); RAMP_SUMS]> =
            const { std::cell::Cell::new([(0, 0); RAMP_SUMS]) };
    }
    SUMS.try_with(f).ok()
}

/// See the other `with_ramp_sums`: under loom, none.
#[cfg(cutout_loom)]
pub(crate) fn with_ramp_sums<R>(
    _: impl FnOnce(&std::cell::Cell<[(u64, u64); RAMP_SUMS]>) -> R,
) -> Option<R> {
    None
}

/// Entries in a thread's table of ramp sums ([`with_ramp_sums`]).
pub(crate) const RAMP_SUMS: usize = 4;

/// For the few process-wide statics that loom does not model: the default clock's
/// cached time (loom models drive time with `ManualClock`), the owned-stripe count
/// and the fork handlers' registration (set once per process; no model forks). A
/// `const` constructor is needed for a `static`, which loom's atomics do not have.
pub(crate) use std::sync::atomic::{
    AtomicBool as ProcessAtomicBool, AtomicU64 as ProcessAtomicU64,
    AtomicUsize as ProcessAtomicUsize,
};

/// A pointer set once, for a stripe allocated by its first writer
/// ([`crate::stripe`]): `Acquire` to find it, `Release` (a CAS; the loser of a race
/// frees its copy) to publish it. loom does not model it, so under loom every
/// stripe is allocated when the breaker is built ([`EAGER_STRIPES`]) and the
/// models see the allocated layout.
pub(crate) use once_cell::race::OnceBox;

/// Whether a breaker allocates all its stripes when built: only under loom.
pub(crate) const EAGER_STRIPES: bool = cfg!(cutout_loom);

/// Whether this build runs under loom: for the few decisions that differ there
/// (see [`crate::slot`]) without a `cfg` outside this module.
pub(crate) const LOOM: bool = cfg!(cutout_loom);

/// Thread-locals of `Cell`s: std's `const` form (a single load to read, no lazy
/// initialization check), or loom's, which has no `const` form.
#[cfg(not(cutout_loom))]
macro_rules! thread_locals {
    ($( $(#[$attr:meta])* static $name:ident: $ty:ty = $init:expr; )*) => {
        std::thread_local! { $( $(#[$attr])* static $name: $ty = const { $init }; )* }
    };
}
#[cfg(cutout_loom)]
macro_rules! thread_locals {
    ($( $(#[$attr:meta])* static $name:ident: $ty:ty = $init:expr; )*) => {
        loom::thread_local! { $( $(#[$attr])* static $name: $ty = $init; )* }
    };
}
pub(crate) use thread_locals;

/// A static built on first use: std's `LazyLock`, or, under loom, one built afresh
/// in every model execution.
#[cfg(not(cutout_loom))]
macro_rules! lazy_static {
    (static ref $name:ident: $ty:ty = $init:expr;) => {
        static $name: std::sync::LazyLock<$ty> = std::sync::LazyLock::new(|| $init);
    };
}
#[cfg(cutout_loom)]
macro_rules! lazy_static {
    (static ref $name:ident: $ty:ty = $init:expr;) => {
        loom::lazy_static! { static ref $name: $ty = $init; }
    };
}
pub(crate) use lazy_static;
