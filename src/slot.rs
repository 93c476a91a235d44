//! Per-thread stripe slots.
//!
//! Every thread that touches a breaker is given a small process-wide index, its
//! *slot*, the first time it does so; the index goes back to a free list when the
//! thread exits and is handed to the next new thread. Slot `i` owns stripe `i + 1`
//! of every breaker (see [`crate::stripe`]): it is the only thread that writes
//! there, so it may update its counters with a plain load and store instead of a
//! locked read-modify-write. Threads whose slot is beyond a breaker's owned stripes
//! share stripe 0 with atomic read-modify-writes.
//!
//! A thread-local holds the thread's *stripe code*, `index << 2 | assigned << 1 |
//! owned`. It starts at 0, which reads as the shared stripe, not owned, not
//! assigned, so the hottest path can use it without asking whether the thread has a
//! slot yet: that path is for owners only, and every other path assigns first
//! ([`stripe`]).
//!
//! # Orderings
//! The free list is a `Mutex`: a slot handed from an exited thread to a new one is
//! published by the lock, so the new owner's first plain load sees the old owner's
//! last store.

use crate::sync::{Mutex, Ordering};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// The slot of a thread whose thread-local storage is already torn down (a permit
/// dropped from another thread-local's destructor): it always takes the shared stripe.
pub(crate) const NO_SLOT: usize = usize::MAX;

struct Registry {
    /// Released slots, lowest first: a new thread takes the lowest free slot, so the
    /// owned stripes (the lowest slots) go to live threads even when threads come
    /// and go.
    free: Mutex<BinaryHeap<Reverse<usize>>>,
    next: crate::sync::AtomicUsize,
}

impl Registry {
    fn acquire(&self) -> usize {
        let reused = self
            .free
            .lock()
            .ok()
            .and_then(|mut free| free.pop())
            .map(|Reverse(slot)| slot);
        // Relaxed: the counter only hands out distinct numbers; nothing is published
        // through it.
        reused.unwrap_or_else(|| self.next.fetch_add(1, Ordering::Relaxed))
    }

    #[cfg_attr(cutout_loom, allow(dead_code))]
    fn release(&self, slot: usize) {
        if let Ok(mut free) = self.free.lock() {
            free.push(Reverse(slot));
        }
    }
}

/// The slot of a thread that has not asked for one yet.
const UNASSIGNED: usize = usize::MAX - 1;

/// The stripe code's bits: whether the thread owns the stripe, and whether it has
/// been given a slot. The stripe's index is above them.
pub(crate) const OWNED: usize = 1;
const ASSIGNED: usize = 2;
pub(crate) const CODE_SHIFT: u32 = 2;

/// Owned stripes per breaker, the same for every breaker in the process: twice the
/// parallelism, within 2..=64, read once (`available_parallelism` is a system call).
pub(crate) fn owned_stripes() -> usize {
    #[cfg(cutout_loom)]
    {
        2
    }
    #[cfg(not(cutout_loom))]
    {
        static OWNED: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
        *OWNED.get_or_init(|| {
            let cores = std::thread::available_parallelism().map_or(1, usize::from);
            (2 * cores).clamp(2, 64)
        })
    }
}

/// The stripe code of a thread with `slot`: its own stripe, `slot + 1`, if its slot
/// is below [`owned_stripes`], else the shared one, 0.
fn stripe_code(slot: usize) -> usize {
    if slot < owned_stripes() {
        (slot + 1) << CODE_SHIFT | ASSIGNED | OWNED
    } else {
        ASSIGNED
    }
}

/// Gives the thread's slot back when the thread exits.
struct Guard;

// Not under loom: loom destroys a thread's locals after `join` has returned, when the
// model's statics (the registry) may already be gone. Each loom execution starts
// with a fresh registry anyway, so slots need not be recycled there.
#[cfg(not(cutout_loom))]
impl Drop for Guard {
    fn drop(&mut self) {
        // After this, the exiting thread's remaining destructors take the shared stripe.
        let slot = SLOT.with(|s| s.replace(NO_SLOT));
        STRIPE.with(|s| s.set(stripe_code(NO_SLOT)));
        if slot != NO_SLOT && slot != UNASSIGNED {
            with_registry(|r| r.release(slot));
        }
    }
}

#[cfg(not(cutout_loom))]
fn with_registry<R>(f: impl FnOnce(&Registry) -> R) -> R {
    static REGISTRY: Registry = Registry {
        free: Mutex::new(BinaryHeap::new()),
        next: crate::sync::AtomicUsize::new(0),
    };
    f(&REGISTRY)
}

#[cfg(cutout_loom)]
fn with_registry<R>(f: impl FnOnce(&Registry) -> R) -> R {
    loom::lazy_static! {
        static ref REGISTRY: Registry = Registry {
            free: Mutex::new(BinaryHeap::new()),
            next: crate::sync::AtomicUsize::new(0),
        };
    }
    f(&REGISTRY)
}

// The slot and its stripe code are `const` thread-locals without a destructor:
// reading one is a single load, with no lazy-initialisation check. The guard,
// registered once per thread on first use, carries the destructor.
#[cfg(not(cutout_loom))]
std::thread_local! {
    static SLOT: std::cell::Cell<usize> = const { std::cell::Cell::new(UNASSIGNED) };
    static STRIPE: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    static GUARD: Guard = const { Guard };
}

#[cfg(cutout_loom)]
loom::thread_local! {
    static SLOT: std::cell::Cell<usize> = std::cell::Cell::new(UNASSIGNED);
    static STRIPE: std::cell::Cell<usize> = std::cell::Cell::new(0);
    static GUARD: Guard = Guard;
}

/// This thread's slot, or [`NO_SLOT`] while its thread-locals are being destroyed.
#[inline]
#[cfg(all(test, not(cutout_loom)))]
pub(crate) fn current() -> usize {
    if SLOT.with(std::cell::Cell::get) == UNASSIGNED {
        assign();
    }
    SLOT.with(std::cell::Cell::get)
}

/// The stripe code of this thread (see the module docs), assigning it a slot first
/// if it has none.
#[inline]
pub(crate) fn stripe() -> usize {
    let code = stripe_if_assigned();
    if code & ASSIGNED == 0 { assign() } else { code }
}

/// The stripe code of this thread; 0 (the shared stripe, not owned) if it has no
/// slot yet.
#[inline]
pub(crate) fn stripe_if_assigned() -> usize {
    STRIPE.with(std::cell::Cell::get)
}

/// Takes a slot for this thread; returns its stripe code.
#[cold]
fn assign() -> usize {
    // Touching the guard registers its destructor; if the thread is already
    // exiting, there is no slot to take.
    let slot = if GUARD.try_with(|_| ()).is_err() {
        NO_SLOT
    } else {
        with_registry(Registry::acquire)
    };
    SLOT.with(|s| s.set(slot));
    let code = stripe_code(slot);
    STRIPE.with(|s| s.set(code));
    code
}

#[cfg(all(test, not(cutout_loom)))]
mod tests {
    use super::*;

    #[test]
    fn live_threads_have_distinct_slots() {
        let here = current();
        let other = std::thread::spawn(current).join().unwrap();
        assert_ne!(here, other);
        assert_ne!(here, NO_SLOT);
    }

    #[test]
    fn the_lowest_released_slot_is_handed_out_before_new_ones() {
        let registry = Registry {
            free: Mutex::new(BinaryHeap::new()),
            next: crate::sync::AtomicUsize::new(0),
        };
        let slots: Vec<usize> = (0..4).map(|_| registry.acquire()).collect();
        assert_eq!(slots, [0, 1, 2, 3]);
        registry.release(3);
        registry.release(1);
        assert_eq!(registry.acquire(), 1, "the lowest free slot first");
        assert_eq!(registry.acquire(), 3);
        assert_eq!(registry.acquire(), 4);
    }
}
