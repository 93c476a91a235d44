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
//! ([`lazy_static`]), the once-set pointer ([`OnceBox`]), whether stripes are
//! allocated when a breaker is built ([`eager_stripes`]) and the one constant that
//! differs ([`LOOM`]) come from here.

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
/// frees its copy) to publish it. loom does not model once_cell's atomics, so under
/// loom it is `loom_once_box::OnceBox`, the same protocol on loom's `AtomicPtr`.
#[cfg(not(cutout_loom))]
pub(crate) use once_cell::race::OnceBox;

/// Under loom: the same protocol on loom's `AtomicPtr` (see `loom_once_box`).
#[cfg(cutout_loom)]
pub(crate) use loom_once_box::OnceBox;

/// once_cell's `race::OnceBox` (1.21), the part of it this crate calls, on loom's
/// `AtomicPtr`, so the models check a stripe's publication by its first writer.
/// The only `unsafe` besides `fork::register`, and only under loom: the raw
/// pointer a `Box` became, read back as that `Box` or borrowed.
#[cfg(cutout_loom)]
#[allow(unsafe_code)]
mod loom_once_box {
    use loom::sync::atomic::{AtomicPtr, Ordering};
    use std::marker::PhantomData;
    use std::ptr;

    /// A cell set once with a boxed value (see the module).
    pub(crate) struct OnceBox<T> {
        inner: AtomicPtr<T>,
        /// Whether `get` is a modelled load; see [`OnceBox::for_stripe`].
        modelled: bool,
        /// Owns a `T` behind the pointer (for `Send` and drop check).
        ghost: PhantomData<Option<Box<T>>>,
    }

    // SAFETY: as once_cell's: a `&OnceBox` hands out `&T` (so `T: Sync`) and lets
    // any thread store a `T` that the owner drops (so `T: Send`).
    unsafe impl<T: Sync + Send> Sync for OnceBox<T> {}

    impl<T> Default for OnceBox<T> {
        fn default() -> Self {
            Self::new()
        }
    }

    impl<T> Drop for OnceBox<T> {
        fn drop(&mut self) {
            // `&mut self`: loom checks that every store happened before this.
            let ptr = self.inner.with_mut(|ptr| *ptr);
            if !ptr.is_null() {
                // SAFETY: a non-null pointer came from `Box::into_raw` in `init`,
                // and nothing borrows from `self` any more.
                drop(unsafe { Box::from_raw(ptr) });
            }
        }
    }

    impl<T> OnceBox<T> {
        /// An empty cell.
        pub(crate) fn new() -> Self {
            Self {
                inner: AtomicPtr::new(ptr::null_mut()),
                modelled: true,
                ghost: PhantomData,
            }
        }

        /// An empty cell for a stripe ([`super::stripe_box`]): as [`new`](Self::new)
        /// when stripes are lazy. When they are eager (the default under loom), the
        /// one store to the cell is made by the thread that builds the breaker,
        /// before any other thread can reach it, so `get` reads it unmodelled
        /// (`unsync_load`, which loom still checks is ordered after every store):
        /// the models of everything else then explore and cost what they did when
        /// the cell was once_cell's, whose atomics loom does not see.
        pub(crate) fn for_stripe() -> Self {
            Self {
                inner: AtomicPtr::new(ptr::null_mut()),
                modelled: !super::eager_stripes(),
                ghost: PhantomData,
            }
        }

        /// The value, if set.
        pub(crate) fn get(&self) -> Option<&T> {
            let ptr = if self.modelled {
                // Acquire: pairs with `init`'s Release, so the value's writes (a
                // stripe's zeroed lines, its index) and what came before them in
                // the publishing thread (a stripe's bit) are seen with it.
                self.inner.load(Ordering::Acquire)
            } else {
                // SAFETY: loom's `unsync_load` is a plain read of the model's
                // value, which loom checks comes after every store to the cell
                // (an eager stripe's, made before the breaker is shared).
                unsafe { self.inner.unsync_load() }
            };
            // SAFETY: a non-null pointer came from `Box::into_raw` in `init` and
            // is freed only by `drop`, which `&self` rules out.
            (!ptr.is_null()).then(|| unsafe { &*ptr })
        }

        /// The value, set to `f()`'s if the cell is empty. Racing threads may each
        /// call their `f`; all return the one value that was published first.
        pub(crate) fn get_or_init(&self, f: impl FnOnce() -> Box<T>) -> &T {
            match self.get() {
                Some(value) => value,
                None => self.init(f),
            }
        }

        #[cold]
        #[inline(never)]
        fn init(&self, f: impl FnOnce() -> Box<T>) -> &T {
            let mut ptr = Box::into_raw(f());
            // Release (success): publishes the value, and everything its thread
            // did before, to a `get` that finds it (Acquire). Nothing to acquire
            // then: the cell held null, which no one stores with Release.
            // Acquire (failure): another thread's value was published with
            // Release; this thread returns it, so it must see that value's writes.
            let exchange = self.inner.compare_exchange(
                ptr::null_mut(),
                ptr,
                Ordering::Release,
                Ordering::Acquire,
            );
            if let Err(published) = exchange {
                // SAFETY: `ptr` came from `Box::into_raw` above and was never
                // shared: the loser frees its own copy.
                drop(unsafe { Box::from_raw(ptr) });
                ptr = published;
            }
            // SAFETY: `ptr` is the published value (this thread's or the winner's),
            // freed only by `drop`, which `&self` rules out.
            unsafe { &*ptr }
        }
    }
}

/// An empty [`OnceBox`] for a stripe's room: `OnceBox::new()`.
#[cfg(not(cutout_loom))]
#[inline(always)]
pub(crate) const fn stripe_box<T>() -> OnceBox<T> {
    OnceBox::new()
}

/// An empty [`OnceBox`] for a stripe's room: under loom, one whose reads are
/// unmodelled when stripes are eager (see `OnceBox::for_stripe`).
#[cfg(cutout_loom)]
pub(crate) fn stripe_box<T>() -> OnceBox<T> {
    OnceBox::for_stripe()
}

/// Whether a breaker allocates all its stripes when built: never, outside loom.
/// A constant, so the check in `Stripes::new` compiles to nothing.
#[cfg(not(cutout_loom))]
#[inline(always)]
pub(crate) const fn eager_stripes() -> bool {
    false
}

/// Whether a breaker allocates all its stripes when built: under loom, by
/// default, so the models that are not about a stripe's first writer explore
/// fewer interleavings; lazily (as outside loom) once a model has asked with
/// `loom_hooks::lazy_stripes(true)`.
#[cfg(cutout_loom)]
pub(crate) fn eager_stripes() -> bool {
    // Relaxed: set before the model runs, on the OS thread that runs it (see
    // `set_lazy_stripes`); a `std` atomic, outside the model, which loom neither
    // sees nor explores.
    !LAZY_STRIPES.load(std::sync::atomic::Ordering::Relaxed)
}

/// Set by `loom_hooks::lazy_stripes`: process-wide, so every test of a test
/// binary that sets it (`loom-tests/tests/stripes.rs`) must set it the same way.
#[cfg(cutout_loom)]
static LAZY_STRIPES: ProcessAtomicBool = ProcessAtomicBool::new(false);

/// Whether breakers built from now on allocate a stripe with its first writer
/// (`true`) or all of them when built (`false`, the default under loom).
#[cfg(cutout_loom)]
pub(crate) fn set_lazy_stripes(lazy: bool) {
    // Relaxed: read by `eager_stripes` on the OS thread that set it (loom runs a
    // model's threads as coroutines on the thread that calls `loom::model`).
    LAZY_STRIPES.store(lazy, std::sync::atomic::Ordering::Relaxed);
}

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
