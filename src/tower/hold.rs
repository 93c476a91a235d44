//! A response future's hold on its breaker, and each thread's spare holds: how a
//! tower call keeps its breaker alive without writing the breaker's reference count.
//!
//! A `'static` response future must keep its breaker alive however long it lives,
//! so it owns a strong `Arc`. Cloning one for each call and dropping it when the
//! call ends writes the `Arc`'s count twice a call with a locked instruction, on
//! one line that every thread calling the breaker writes: the shared written line
//! the closed path was built to avoid (on one Intel machine, 66 ns a call at two
//! threads against 37 ns at one).
//!
//! A [`Hold`] is such an `Arc`; what differs is where it comes from and where it
//! goes. A new hold is a *spare* this thread kept of the same breaker, if it has
//! one, and a clone only if not; a hold that is dropped becomes a spare of the
//! thread that drops it. So a thread whose calls each take a hold and give it back
//! moves the same `Arc`s around and writes no reference count: the counts change
//! only when a thread holds more of one breaker at once than it kept spares (its
//! first calls, a burst of concurrent requests) or when futures end on another
//! thread than the one that started them. The services hold their breaker the same
//! way, so a framework that clones its service for every request (axum's router
//! does) writes no count either.
//!
//! A spare is a strong handle, so it keeps its breaker alive. What bounds that:
//! - A thread keeps at most [`MAX_SPARES`] spares of breakers on the default clock
//!   and as many of breakers on other clocks; the oldest goes when a newer one
//!   needs the room.
//! - A hold given back when the breaker has no handle left but this thread's
//!   spares is not kept, and those spares go with it: nothing could take them
//!   again. Layers hold their breaker as holds too, so where one thread made a
//!   breaker's tower calls, the breaker goes when its last layer, service and
//!   future do, as it would without spares. A plain `Arc` dropped after them (one
//!   the caller kept) cannot see the spares: they stay until the thread keeps
//!   newer ones or exits.
//! - A thread's spares are dropped when it exits (and a hold given back after that,
//!   by another thread-local's destructor, is dropped, not kept).
//!
//! What remains: where several threads made tower calls to a breaker, or a plain
//! `Arc` of it went last, it can outlive its last layer, service and future by the
//! spares that threads keep, until they keep newer spares or exit; and a
//! [`Registry`](crate::Registry) does not evict a breaker while spares of it exist
//! (they are handles). Nothing else can tell: a spare is never called through.
//!
//! No atomics of this module's own, so no orderings to choose: the list is a
//! thread-local, and the `Arc`s carry their own synchronization.

use crate::CircuitBreaker;
use crate::clock::Clock;
use crate::clock::DefaultClock;
use std::any::{Any, TypeId};
use std::cell::Cell;
use std::mem::ManuallyDrop;
use std::sync::Arc;

/// The most spare holds a thread keeps in each of its two lists (breakers on the
/// default clock, breakers on others): enough for a service and a few calls in
/// flight to each of a few breakers.
const MAX_SPARES: usize = 8;

/// A thread's spare holds of one type: a stack, newest on top, each with its
/// breaker's address beside it (a plain compare finds one). `Cell`s, not a
/// `RefCell`: every access is a move in or out, so there is no borrow to check or
/// to find taken.
///
/// The lists are thread-locals without a destructor (a `ManuallyDrop`), so reaching
/// one is an address computation, with no check for a destructor to register or for
/// a list already destroyed; a [`Guard`] registered when a thread first keeps a
/// spare empties them when the thread exits.
struct Spares<T> {
    /// How many spares there are: `spares[..len]` are `Some`. Or [`UNREGISTERED`]
    /// or [`CLOSED`], which are beyond [`MAX_SPARES`]: `keep` takes its slow path
    /// for them, and `take` finds nothing.
    len: Cell<usize>,
    addresses: [Cell<usize>; MAX_SPARES],
    spares: [Cell<Option<T>>; MAX_SPARES],
}

impl<T> Spares<T> {
    const fn new() -> Self {
        Spares {
            len: Cell::new(UNREGISTERED),
            addresses: [const { Cell::new(0) }; MAX_SPARES],
            spares: [const { Cell::new(None) }; MAX_SPARES],
        }
    }

    /// Takes the newest spare of the breaker at `address`, if there is one.
    #[inline(always)]
    fn take(&self, address: usize) -> Option<T> {
        // The top spare is the one a thread's calls to one breaker take back.
        // `wrapping_sub`: an empty list (and `UNREGISTERED`, `CLOSED`) has no top.
        let top = self.len.get().wrapping_sub(1);
        if top < MAX_SPARES && self.addresses[top].get() == address {
            self.len.set(top);
            return self.spares[top].take();
        }
        self.take_below(address)
    }

    /// [`take`](Self::take) when the top spare is not the one.
    #[cold]
    #[inline(never)]
    fn take_below(&self, address: usize) -> Option<T> {
        let len = self.len.get();
        if len > MAX_SPARES {
            return None; // `UNREGISTERED` or `CLOSED`: no spares
        }
        let at = (0..len)
            .rev()
            .find(|&i| self.addresses[i].get() == address)?;
        let top = len - 1;
        // The top spare fills the hole.
        let spare = self.spares[at].replace(self.spares[top].take());
        self.addresses[at].set(self.addresses[top].get());
        self.len.set(top);
        spare
    }

    /// Keeps `spare`, one of `handles` strong handles of the breaker at `address`,
    /// on top. The oldest spare makes room if the list is full; if every other
    /// handle of the breaker is a spare here, nothing can take them again, and
    /// they are dropped with `spare` instead.
    ///
    /// Whatever is dropped is dropped after the list is whole again: a breaker's
    /// drop runs its fields' drops (callbacks among them), which may use the list.
    #[inline(always)]
    fn keep(&self, address: usize, spare: T, handles: usize) {
        let len = self.len.get();
        // `handles <= len + 1`: every other handle may be a spare here.
        if len >= MAX_SPARES || handles <= len + 1 {
            return self.keep_slow(address, spare, handles);
        }
        self.addresses[len].set(address);
        self.len.set(len + 1);
        // The slot above the top is always empty, so there is nothing to drop, and
        // forgetting it keeps drop code for an `Arc` off this path (were the slot
        // not empty, forgetting would only leak).
        std::mem::forget(self.spares[len].replace(Some(spare)));
    }

    /// [`keep`](Self::keep) when the list is full or the breaker may be held by
    /// this list alone.
    #[cold]
    #[inline(never)]
    fn keep_slow(&self, address: usize, spare: T, handles: usize) {
        let mut len = self.len.get();
        if len == UNREGISTERED {
            // This thread's first spare: its guard will empty the lists at exit.
            if GUARD.try_with(|_| ()).is_err() {
                self.len.set(CLOSED); // the thread is exiting already
            } else {
                self.len.set(0);
                len = 0;
            }
        }
        if len == CLOSED {
            return drop(spare);
        }
        let mine = (0..len)
            .filter(|&i| self.addresses[i].get() == address)
            .count();
        if mine + 1 == handles {
            // Unreachable but through this list: drop its spares and `spare`.
            let mut orphans: [Option<T>; MAX_SPARES] = [const { None }; MAX_SPARES];
            let mut kept = 0;
            for (i, orphan) in orphans.iter_mut().enumerate().take(len) {
                if self.addresses[i].get() == address {
                    *orphan = self.spares[i].take();
                } else {
                    self.spares[kept].set(self.spares[i].take());
                    self.addresses[kept].set(self.addresses[i].get());
                    kept += 1;
                }
            }
            self.len.set(kept);
            drop((orphans, spare));
            return;
        }
        let mut evicted = None;
        if len == MAX_SPARES {
            evicted = self.spares[0].take();
            for i in 1..MAX_SPARES {
                self.spares[i - 1].set(self.spares[i].take());
                self.addresses[i - 1].set(self.addresses[i].get());
            }
        }
        let top = len.min(MAX_SPARES - 1);
        self.addresses[top].set(address);
        self.spares[top].set(Some(spare));
        self.len.set(top + 1);
        drop(evicted);
    }

    /// Empties the list for good (the thread is exiting): dropped, its spares.
    fn close(&self) {
        let len = self.len.replace(CLOSED).min(MAX_SPARES);
        let spares: [Option<T>; MAX_SPARES] = std::array::from_fn(|i| match i < len {
            true => self.spares[i].take(),
            false => None,
        });
        drop(spares);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        Some(self.len.get())
            .filter(|&len| len <= MAX_SPARES)
            .unwrap_or(0)
    }
}

/// [`Spares::len`] before the thread's first spare (its guard not yet registered).
const UNREGISTERED: usize = usize::MAX;
/// [`Spares::len`] once the thread's guard has emptied the list.
const CLOSED: usize = usize::MAX - 1;

/// Empties this thread's lists when it exits (registered with its first spare).
struct Guard;

impl Drop for Guard {
    fn drop(&mut self) {
        DEFAULT.with(|spares| spares.close());
        OTHER.with(|spares| spares.close());
    }
}

crate::sync::thread_locals! {
    /// This thread's spares of breakers on the default clock: typed, so that taking
    /// one needs no type check at run time.
    static DEFAULT: ManuallyDrop<Spares<Arc<CircuitBreaker<DefaultClock>>>> =
        ManuallyDrop::new(Spares::new());
    /// This thread's spares of breakers on other clocks, their type erased.
    static OTHER: ManuallyDrop<Spares<Arc<dyn Any + Send + Sync>>> =
        ManuallyDrop::new(Spares::new());
    static GUARD: Guard = Guard;
}

/// `breaker` as an `Arc` of `T`, if that is its type. Free when the types are known
/// to be the same where it is inlined (the check folds away).
#[inline]
fn retype<A: Send + Sync + 'static, T: Send + Sync + 'static>(breaker: Arc<A>) -> Option<Arc<T>> {
    let erased: Arc<dyn Any + Send + Sync> = breaker;
    erased.downcast().ok()
}

/// Whether `C` is the default clock (a constant once monomorphized).
#[inline]
fn is_default<C: 'static>() -> bool {
    TypeId::of::<C>() == TypeId::of::<DefaultClock>()
}

/// A strong handle on a breaker that, dropped, becomes a spare of the thread that
/// drops it (see the module docs). `Clone` takes a spare of this thread if it has
/// one.
pub(crate) struct Hold<C: Clock + 'static> {
    /// `None` only while the hold is being dropped.
    breaker: Option<Arc<CircuitBreaker<C>>>,
}

impl<C: Clock + 'static> Hold<C> {
    /// A hold that is `breaker` itself (no spare, no clone).
    pub(crate) fn new(breaker: Arc<CircuitBreaker<C>>) -> Self {
        Hold {
            breaker: Some(breaker),
        }
    }

    /// A hold on `breaker`: a spare of this thread, or a clone of `breaker`.
    #[inline]
    pub(crate) fn of(breaker: &Arc<CircuitBreaker<C>>) -> Self {
        Hold::new(take(breaker))
    }

    /// The breaker.
    #[inline]
    pub(crate) fn breaker(&self) -> &Arc<CircuitBreaker<C>> {
        match &self.breaker {
            Some(breaker) => breaker,
            // `breaker` is taken in `drop` only, after which no method runs.
            None => unreachable!("a hold is used after it was dropped"),
        }
    }
}

impl<C: Clock + 'static> Clone for Hold<C> {
    #[inline]
    fn clone(&self) -> Self {
        Hold::of(self.breaker())
    }
}

impl<C: Clock + 'static> Drop for Hold<C> {
    #[inline]
    fn drop(&mut self) {
        if let Some(breaker) = self.breaker.take() {
            give_back(breaker);
        }
    }
}

/// A strong handle on `breaker`: a spare of this thread, or a clone of `breaker`.
#[inline(always)]
pub(crate) fn take<C: Clock + 'static>(breaker: &Arc<CircuitBreaker<C>>) -> Arc<CircuitBreaker<C>> {
    match take_spare(address(breaker)) {
        Some(spare) => spare,
        None => cloned(breaker),
    }
}

/// [`take`] when this thread has no spare of `breaker`.
#[cold]
#[inline(never)]
fn cloned<C: Clock + 'static>(breaker: &Arc<CircuitBreaker<C>>) -> Arc<CircuitBreaker<C>> {
    breaker.clone()
}

/// Gives a handle from [`take`] back: it becomes a spare of this thread (see
/// [`keep_spare`] for when it does not).
#[inline(always)]
pub(crate) fn give_back<C: Clock + 'static>(breaker: Arc<CircuitBreaker<C>>) {
    let address = address(&breaker);
    keep_spare(breaker, address);
}

/// The address that identifies `breaker` among the spares.
#[inline]
fn address<C: Clock>(breaker: &Arc<CircuitBreaker<C>>) -> usize {
    Arc::as_ptr(breaker).addr()
}

/// Takes this thread's newest spare of `breaker` (at `address`), if it has one.
#[inline(always)]
fn take_spare<C: Clock + 'static>(address: usize) -> Option<Arc<CircuitBreaker<C>>> {
    // `try_with`, not `with`: the lists have no destructor, so it never fails,
    // and without `with`'s panic path the compiler inlines it (it left `with`
    // out of line, the thread-local's accessor called through a pointer: 30 more
    // instructions a call). `None` from `retype` or `downcast` never happens (a
    // spare at `address` is that breaker, so it has its type); were it to, the
    // caller clones instead.
    if is_default::<C>() {
        retype(DEFAULT.try_with(|spares| spares.take(address)).ok()??)
    } else {
        OTHER
            .try_with(|spares| spares.take(address))
            .ok()??
            .downcast()
            .ok()
    }
}

/// Keeps `breaker` (at `address`) as a spare of this thread, unless it is the
/// breaker's last handle or all its other handles are this thread's spares (then
/// they are dropped, and the breaker with them; see [`Spares::keep`]).
#[inline(always)]
fn keep_spare<C: Clock + 'static>(breaker: Arc<CircuitBreaker<C>>, address: usize) {
    let handles = Arc::strong_count(&breaker);
    if handles == 1 {
        return;
    }
    // `try_with`: see `take_spare`.
    if is_default::<C>() {
        if let Some(breaker) = retype(breaker) {
            let _ = DEFAULT.try_with(|spares| spares.keep(address, breaker, handles));
        }
    } else {
        let _ = OTHER.try_with(|spares| spares.keep(address, breaker, handles));
    }
}

/// How many spares this thread keeps, of all breakers. For tests.
#[cfg(test)]
fn spares() -> usize {
    DEFAULT.with(|s| s.len()) + OTHER.with(|s| s.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ManualClock;

    fn breaker() -> Arc<CircuitBreaker<ManualClock>> {
        Arc::new(
            CircuitBreaker::builder()
                .clock(ManualClock::new())
                .build()
                .unwrap(),
        )
    }

    #[test]
    fn a_dropped_hold_is_the_next_one_and_no_count_changes() {
        let b = breaker();
        let first = Hold::of(&b);
        let address = Arc::as_ptr(first.breaker());
        assert_eq!(Arc::strong_count(&b), 2);
        drop(first);
        assert_eq!(spares(), 1);
        // The spare is taken and given back, call after call: the count stays.
        for _ in 0..1000 {
            let hold = Hold::of(&b);
            assert_eq!(Arc::as_ptr(hold.breaker()), address);
            assert_eq!(Arc::strong_count(&b), 2);
        }
        assert_eq!(spares(), 1);
        drop(b);
    }

    #[test]
    fn a_closed_list_finds_nothing_and_keeps_nothing() {
        let list: Spares<Arc<u32>> = Spares::new();
        let a = Arc::new(1);
        assert!(list.take(7).is_none(), "a new list has nothing");
        for address in 1..=7 {
            list.keep(address, a.clone(), 9); // 9: other handles exist
        }
        assert_eq!((list.len(), Arc::strong_count(&a)), (7, 8));
        list.close(); // as the thread's guard does when it exits
        assert_eq!((list.len(), Arc::strong_count(&a)), (0, 1));
        // Its addresses are still there: neither they nor the marker mislead it.
        for address in 1..=7 {
            assert!(list.take(address).is_none());
        }
        list.keep(7, a.clone(), 3);
        assert_eq!(
            Arc::strong_count(&a),
            1,
            "a hold given back after the close"
        );
        assert!(list.take(7).is_none());
    }

    #[test]
    fn the_last_handle_is_not_kept() {
        let b = breaker();
        let hold = Hold::of(&b);
        drop(b);
        drop(hold);
        assert_eq!(spares(), 0);
    }

    #[test]
    fn spares_that_are_all_that_holds_a_breaker_go_with_its_last_other_handle() {
        let keep = breaker(); // another breaker's spare stays through all this
        drop(Hold::of(&keep));
        let b = breaker();
        let weak = Arc::downgrade(&b);
        let holds: Vec<_> = (0..3).map(|_| Hold::of(&b)).collect();
        let last = Hold::of(&b);
        drop(holds);
        assert_eq!(spares(), 4);
        drop(b);
        // The spares and `last` are all that hold it: giving `last` back drops them.
        assert!(weak.upgrade().is_some());
        drop(last);
        assert!(weak.upgrade().is_none(), "the spares let the breaker go");
        assert_eq!(spares(), 1);
        assert_eq!(Arc::strong_count(&keep), 2);
    }

    #[test]
    fn a_thread_keeps_at_most_max_spares_and_the_oldest_goes_first() {
        let breakers: Vec<_> = (0..MAX_SPARES + 2).map(|_| breaker()).collect();
        for b in &breakers {
            drop(Hold::of(b));
        }
        assert_eq!(spares(), MAX_SPARES);
        // The two oldest were dropped; every newer one is still a spare.
        assert_eq!(Arc::strong_count(&breakers[0]), 1);
        assert_eq!(Arc::strong_count(&breakers[1]), 1);
        assert!(breakers[2..].iter().all(|b| Arc::strong_count(b) == 2));
        // A hold beyond the spares clones; its spare returns to the list.
        let holds: Vec<_> = (0..3).map(|_| Hold::of(&breakers[5])).collect();
        assert_eq!(Arc::strong_count(&breakers[5]), 4);
        drop(holds);
        assert_eq!(spares(), MAX_SPARES);
    }

    #[test]
    fn a_thread_drops_its_spares_when_it_exits() {
        let b = breaker();
        let other = b.clone();
        std::thread::spawn(move || {
            drop(Hold::of(&other));
            assert_eq!(spares(), 1);
        })
        .join()
        .unwrap();
        assert_eq!(Arc::strong_count(&b), 1);
    }

    #[test]
    fn breakers_of_other_clock_types_share_the_list() {
        let manual = breaker();
        let default = Arc::new(CircuitBreaker::builder().build().unwrap());
        drop(Hold::of(&manual));
        drop(Hold::of(&default));
        let again = Hold::of(&manual);
        assert!(Arc::ptr_eq(again.breaker(), &manual));
        assert_eq!(Arc::strong_count(&manual), 2);
        assert_eq!(spares(), 1);
    }
}
