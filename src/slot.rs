//! Per-thread stripe slots.
//!
//! Every thread that touches a breaker is given a small process-wide index, its
//! *slot*, the first time it does so; the index goes back to a free list when the
//! thread exits and is handed to the next new thread. Slot `i` owns stripe
//! `SHARED + i` of every breaker (see [`crate::stripe`]): it is the only thread that
//! writes there, so it may update its counters with a plain load and store instead
//! of a locked read-modify-write. Threads whose slot is beyond the owned stripes
//! spread over the [`SHARED`] shared stripes by slot number, with atomic
//! read-modify-writes.
//!
//! A thread beyond the owned stripes is not stuck there: when an owned slot is
//! released (its thread exited), the next call of such a thread that is off the
//! lean path (every call of a thread that owns no stripe is) sees it through one
//! relaxed load of a process-wide count and trades its slot for it. So a pool
//! started while a crowd held the owned slots owns stripes once the crowd is gone.
//! The lean path, which only owners take, pays nothing for it.
//!
//! A thread-local holds the index of the stripe the thread owns, or [`NOT_OWNED`]
//! (beyond every breaker's stripes) for a thread that owns none: one without a slot
//! yet, one whose slot is beyond the owned stripes, one that is exiting. So the
//! hottest path, which is for owners only, finds the thread's stripe with the one
//! bounds check it makes anyway (`Stripes::mine_if_owned`), and asks nothing else.
//! Every other path assigns a slot first ([`stripe`]).
//!
//! # Fork
//! A `fork()`ed child has only the forking thread. The pool's lock is taken by
//! the forking thread before the fork and released after it on both sides (see
//! [`crate::fork`]), so the child never inherits it held by a thread it does not
//! have, or the free list half changed. The slots the parent's other threads held
//! stay taken in the child: those threads stopped wherever they were, perhaps in
//! the middle of a call, with a stripe's bookkeeping (a rotation, a live bucket)
//! half written, so no thread of the child may take their stripes over. A child
//! forked from a process whose threads hold the owned slots therefore starts its
//! own threads on the slots after them (shared stripes, beyond the owned ones):
//! correct, and slower (see `MIN_OWNED_STRIPES`).
//!
//! # Orderings
//! The free list is a `Mutex`: a slot handed from an exited thread to a new one is
//! published by the lock, so the new owner's first plain load sees the old owner's
//! last store. The count of free owned slots is changed under the lock and read
//! `Relaxed` outside it, as a hint: a thread that acts on it takes the lock.

use crate::stripe::SHARED;
use crate::sync::{AtomicUsize, Mutex, MutexGuard, Ordering};
use std::cell::Cell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::mem::ManuallyDrop;
use std::num::NonZeroUsize;

/// The free list.
type Free = BinaryHeap<Reverse<usize>>;

/// The slot of a thread whose thread-local storage is already torn down (a permit
/// dropped from another thread-local's destructor): it always takes shared stripe 0.
pub(crate) const NO_SLOT: usize = usize::MAX;

struct SlotPool {
    /// Released slots, lowest first: a new thread takes the lowest free slot, so the
    /// owned stripes (the lowest slots) go to live threads even when threads come
    /// and go.
    free: Mutex<Free>,
    next: AtomicUsize,
    /// How many slots in `free` own a stripe (are below [`owned_stripes`]).
    free_owned: AtomicUsize,
}

impl SlotPool {
    fn new() -> SlotPool {
        SlotPool {
            free: Mutex::new(BinaryHeap::new()),
            next: AtomicUsize::new(0),
            free_owned: AtomicUsize::new(0),
        }
    }

    /// The free list, locked.
    fn lock(&self) -> Option<MutexGuard<'_, Free>> {
        self.free.lock().ok()
    }

    fn acquire(&self) -> usize {
        // Before the first slot is handed out, so that a fork never leaves a
        // child the pool's lock held by a thread it does not have.
        crate::fork::register();
        let reused = self.lock().and_then(|mut free| {
            let Reverse(slot) = free.pop()?;
            self.counted(slot, false);
            Some(slot)
        });
        // Relaxed: the counter only hands out distinct numbers; nothing is published
        // through it.
        reused.unwrap_or_else(|| self.next.fetch_add(1, Ordering::Relaxed))
    }

    #[cfg_attr(cutout_loom, allow(dead_code))]
    fn release(&self, slot: usize) {
        if let Some(mut free) = self.lock() {
            free.push(Reverse(slot));
            self.counted(slot, true);
        }
    }

    /// Keeps `free_owned` up to date as `slot` enters (`freed`) or leaves the free
    /// list; called under its lock.
    fn counted(&self, slot: usize, freed: bool) {
        if slot < owned_stripes() {
            // Relaxed: changed under the lock, which orders it; outside the lock
            // it is only a hint (see the module's Orderings).
            match freed {
                true => _ = self.free_owned.fetch_add(1, Ordering::Relaxed),
                false => _ = self.free_owned.fetch_sub(1, Ordering::Relaxed),
            }
        }
    }

    /// Whether an owned slot is free: a hint, one load of a line written only when
    /// an owner exits or a thread takes its slot.
    fn owned_free(&self) -> bool {
        // Relaxed: a hint; `trade` takes the lock.
        self.free_owned.load(Ordering::Relaxed) != 0
    }

    /// Trades `slot`, which owns no stripe, for the lowest free slot if that one
    /// owns a stripe.
    fn trade(&self, slot: usize) -> Option<usize> {
        let mut free = self.lock()?;
        match free.peek() {
            Some(&Reverse(low)) if low < owned_stripes() && low < slot => {
                free.pop();
                self.counted(low, false);
                free.push(Reverse(slot));
                self.counted(slot, true);
                Some(low)
            }
            _ => None,
        }
    }
}

/// The slot of a thread that has not asked for one yet.
const UNASSIGNED: usize = usize::MAX - 1;

/// The owned stripe of a thread that owns none: no breaker has this many stripes.
pub(crate) const NOT_OWNED: NonZeroUsize = NonZeroUsize::MAX;

/// Owned stripes per breaker, the same for every breaker in the process: twice the
/// parallelism, within [`MIN_OWNED_STRIPES`]..=[`MAX_OWNED_STRIPES`] (16 to 64),
/// read once (`available_parallelism` is a system call). A breaker allocates only
/// those its threads write; the count sets the room it keeps for them (a pointer
/// each).
///
/// [`MAX_OWNED_STRIPES`]: crate::stripe::MAX_OWNED_STRIPES
pub(crate) fn owned_stripes() -> usize {
    // Under loom: 2, the models' layout.
    if crate::sync::LOOM {
        return 2;
    }
    // Relaxed: the count is the only thing published through the word.
    match OWNED.load(Ordering::Relaxed) {
        0 => {
            let cores = std::env::var("CUTOUT_TEST_PARALLELISM")
                .ok()
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from));
            fix_owned(owned_for(cores))
        }
        n => n,
    }
}

/// Sets [`OWNED`] to `n` unless it is set: the count it holds from then on.
fn fix_owned(n: usize) -> usize {
    // Relaxed: as in `owned_stripes`. Racing first readers compute the same
    // count (or a test's simulated one wins); the first CAS fixes it.
    match OWNED.compare_exchange(0, n, Ordering::Relaxed, Ordering::Relaxed) {
        Ok(_) => n,
        Err(set) => set,
    }
}

/// The fewest owned stripes a breaker has room for, whatever the core count.
/// Threads beyond the owned stripes pay three locked instructions a call on a
/// shared line (a closed success with a window: 43-60 ns against 5 on an owned
/// stripe, and recloser's 28-39, on the Zen 1 of `docs/PERFORMANCE.md`), and a
/// small machine often runs more threads than twice its cores: a pool of 8 or 16
/// workers on 2 cores. Room for 16 costs a breaker 96 bytes more than room for 4 on
/// such a machine, and nothing else until a thread writes its stripe.
pub(crate) const MIN_OWNED_STRIPES: usize = 16;

/// The owned stripes per breaker, 0 until fixed. A word, not a `OnceLock`: a
/// `fork()` while another thread computes it (reading the environment and the
/// cgroup files) would leave a child a `OnceLock` that waits for ever. Not
/// modelled by loom (std's atomic): fixed once per process, before any model
/// runs.
static OWNED: crate::sync::ProcessAtomicUsize = crate::sync::ProcessAtomicUsize::new(0);

fn owned_for(cores: usize) -> usize {
    cores
        .saturating_mul(2)
        .clamp(MIN_OWNED_STRIPES, crate::stripe::MAX_OWNED_STRIPES)
}

/// **For tests and benchmarks only; not part of the API.** Makes every breaker in
/// this process size its stripes as if the machine had `cores` cores, as the
/// environment variable `CUTOUT_TEST_PARALLELISM` does when read (once, at the first
/// breaker). Returns `false`, changing nothing, once a breaker has been built (or
/// under loom).
#[cfg(feature = "__test-hooks")]
pub fn simulate_parallelism(cores: usize) -> bool {
    simulate_owned_stripes(owned_for(cores))
}

/// **For tests and benchmarks only; not part of the API.** Gives every breaker in
/// this process room for `n` owned stripes (at least 2, at most 64), fewer than any
/// machine gets, so that a few threads reach the shared stripes. Returns whether
/// every breaker now has room for `n`: `false`, changing nothing, once a breaker
/// has been built with another count (or under loom).
#[cfg(feature = "__test-hooks")]
pub fn simulate_owned_stripes(n: usize) -> bool {
    let n = n.clamp(2, crate::stripe::MAX_OWNED_STRIPES);
    !crate::sync::LOOM && fix_owned(n) == n
}

/// **For tests and benchmarks only; not part of the API.** The owned stripes every
/// breaker in this process has room for (see [`simulate_owned_stripes`]); asking
/// fixes the count, as building a breaker does.
#[cfg(feature = "__test-hooks")]
pub fn owned_stripes_per_breaker() -> usize {
    owned_stripes()
}

/// The stripe a thread with `slot` owns: `SHARED + slot` if its slot is below
/// [`owned_stripes`], else none.
fn owned_by(slot: usize) -> NonZeroUsize {
    match slot < owned_stripes() {
        true => NonZeroUsize::MIN.saturating_add(SHARED - 1 + slot),
        false => NOT_OWNED,
    }
}

/// Gives the thread's slot back when the thread exits.
struct Guard;

impl Drop for Guard {
    fn drop(&mut self) {
        // Not under loom: loom destroys a thread's locals after `join` has
        // returned, when the model's statics (the pool) may already be gone. Each
        // loom execution starts with a fresh pool anyway, so slots need not be
        // recycled there.
        if crate::sync::LOOM {
            return;
        }
        // After this, the exiting thread's remaining destructors take shared stripe 0.
        let slot = SLOT.with(|s| s.replace(NO_SLOT));
        STRIPE.with(|s| s.set(NOT_OWNED));
        if slot != NO_SLOT && slot != UNASSIGNED {
            with_pool(|r| r.release(slot));
        }
    }
}

fn with_pool<R>(f: impl FnOnce(&'static SlotPool) -> R) -> R {
    crate::sync::lazy_static! {
        static ref POOL: SlotPool = SlotPool::new();
    }
    f(&POOL)
}

/// [`crate::fork`]'s prepare handler: takes the pool's lock (building the pool if
/// no thread has, in the parent, before it forks), so that no thread holds it or
/// is changing the free list when the process forks.
pub(crate) fn before_fork() {
    let held = with_pool(|p| {
        p.free
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    });
    HELD_ACROSS_FORK.with(|h| h.set(Some(ManuallyDrop::new(held))));
}

/// [`crate::fork`]'s parent and child handlers: release the lock
/// [`before_fork`] took (in the child, on its only thread: an unlock, no
/// allocation, no wait).
pub(crate) fn after_fork() {
    if let Some(held) = HELD_ACROSS_FORK.with(Cell::take) {
        drop(ManuallyDrop::into_inner(held));
    }
}

// The slot and its owned stripe are `const` thread-locals without a destructor:
// reading one is a single load, with no lazy-initialisation check. The guard,
// registered once per thread on first use, carries the destructor.
crate::sync::thread_locals! {
    static SLOT: Cell<usize> = Cell::new(UNASSIGNED);
    // Non-zero, which tells the compiler an owned stripe is never the shared one.
    static STRIPE: Cell<NonZeroUsize> = Cell::new(NOT_OWNED);
    static GUARD: Guard = Guard;
    /// The pool's lock, held by the forking thread across `fork` (from
    /// [`before_fork`] to [`after_fork`]). `ManuallyDrop`: a thread-local without
    /// a destructor is never destroyed, so a fork from a thread-local's
    /// destructor, late in a thread's exit, still holds the lock across it.
    static HELD_ACROSS_FORK: Cell<Option<ManuallyDrop<MutexGuard<'static, Free>>>> = Cell::new(None);
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

/// Whether this thread has been given a slot.
#[cfg(all(test, not(cutout_loom)))]
pub(crate) fn assigned() -> bool {
    SLOT.with(std::cell::Cell::get) != UNASSIGNED
}

/// The stripe this thread writes: the one it owns, or a shared one. Assigns it a
/// slot first if it has none, and trades a slot beyond the owned stripes for an
/// owned one that has come free.
#[inline]
pub(crate) fn stripe() -> usize {
    match owned() {
        NOT_OWNED => not_owned(),
        owned => owned.get(),
    }
}

/// [`stripe`] for a thread that owns none (yet).
#[inline(never)]
fn not_owned() -> usize {
    let mut slot = SLOT.with(std::cell::Cell::get);
    if slot == UNASSIGNED {
        let owned = assign();
        if owned != NOT_OWNED {
            return owned.get();
        }
        slot = SLOT.with(std::cell::Cell::get);
    }
    if slot == NO_SLOT {
        return 0;
    }
    if with_pool(SlotPool::owned_free) {
        if let Some(low) = with_pool(|r| r.trade(slot)) {
            SLOT.with(|s| s.set(low));
            let owned = owned_by(low);
            STRIPE.with(|s| s.set(owned));
            return owned.get();
        }
    }
    slot % SHARED
}

/// The stripe this thread owns, or [`NOT_OWNED`] (also if it has no slot yet).
#[inline]
pub(crate) fn owned() -> NonZeroUsize {
    STRIPE.with(std::cell::Cell::get)
}

/// Takes a slot for this thread; returns the stripe it owns, as [`owned`].
#[cold]
fn assign() -> NonZeroUsize {
    // Touching the guard registers its destructor; if the thread is already
    // exiting, there is no slot to take.
    let slot = if GUARD.try_with(|_| ()).is_err() {
        NO_SLOT
    } else {
        with_pool(SlotPool::acquire)
    };
    SLOT.with(|s| s.set(slot));
    let owned = owned_by(slot);
    STRIPE.with(|s| s.set(owned));
    owned
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
    fn owned_stripes_are_twice_the_cores_within_16_and_64() {
        for (cores, owned) in [(0, 16), (1, 16), (2, 16), (8, 16), (9, 18), (31, 62)] {
            assert_eq!(owned_for(cores), owned, "{cores} cores");
        }
        for cores in [32, 33, 1_000, usize::MAX] {
            assert_eq!(owned_for(cores), 64, "{cores} cores");
        }
    }

    #[test]
    fn the_lowest_released_slot_is_handed_out_before_new_ones() {
        let pool = SlotPool::new();
        let slots: Vec<usize> = (0..4).map(|_| pool.acquire()).collect();
        assert_eq!(slots, [0, 1, 2, 3]);
        pool.release(3);
        pool.release(1);
        assert_eq!(pool.acquire(), 1, "the lowest free slot first");
        assert_eq!(pool.acquire(), 3);
        assert_eq!(pool.acquire(), 4);
    }
}
