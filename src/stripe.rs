//! Striped counters: the memory behind the lifetime counters and the sliding window.
//!
//! A breaker has `owned + 1` stripes, each on its own cache lines. Stripe `i + 1`
//! belongs to the thread holding slot `i < owned` (see [`crate::slot`]): that thread
//! is its only writer and updates it with a plain load and store, no locked
//! instruction. Stripe 0 is shared by every thread whose slot is beyond `owned`,
//! and is updated with atomic read-modify-writes. Readers (metrics, the trip check)
//! sum every stripe.
//!
//! A stripe is a padded line of [`COUNTERS`] lifetime counters and [`SCRATCH`] words
//! its owner writes for the window (its live bucket's start, phase and
//! position, private; the live bucket's call counter and base and the newest
//! bucket's tag, read by readers), plus padded lines for the window's buckets (see
//! [`crate::window`]), four words each.
//!
//! # Limits
//! The largest allocation a breaker makes is its stripes: up to [`MAX_STRIPES`] of
//! [`stripe_bytes`] each. The bounds on it are constants here, in one place:
//! [`MAX_BUCKETS`], [`MAX_STRIPE_BYTES`] and [`MAX_BREAKER_BYTES`].
//! [`check_buckets`] checks all three when a configuration is validated, so a
//! setting the breaker cannot honour is a `ConfigError` (field `window`), never an
//! allocation the process cannot survive. With today's layout the bucket bound is
//! the one that binds (a const assertion says so); the byte bounds hold whatever a
//! stripe's layout becomes, and whether stripes are allocated up front or per thread.
//!
//! # Orderings
//! Counter updates are `Relaxed`: a counter publishes nothing but its own value, and
//! a reader's sum is a snapshot that may miss updates still in flight.

use crate::slot;
use crate::sync::{AtomicU64, Ordering};
use crossbeam_utils::CachePadded;

/// A window bucket: tag, calls, failures, slow (see [`crate::window`]).
pub(crate) type Bucket = [AtomicU64; 4];
/// Buckets in one padded line.
const LINE_BUCKETS: usize = 4;
pub(crate) type Line = CachePadded<[Bucket; LINE_BUCKETS]>;
/// Words of the counter line after the counters, written by the owner only (the
/// window's live bucket: see [`crate::window`]).
pub(crate) const SCRATCH: usize = 8;

/// The most buckets a window may have: a reader sums them all, in every stripe,
/// whenever a failure is recorded, so far fewer is faster.
pub(crate) const MAX_BUCKETS: u32 = 4096;
/// The most stripes a breaker has: [`MAX_OWNED_STRIPES`] owned ones and the shared one.
pub(crate) const MAX_STRIPES: usize = MAX_OWNED_STRIPES + 1;
/// The most owned stripes a breaker has (see [`crate::slot::owned_stripes`]).
pub(crate) const MAX_OWNED_STRIPES: usize = 64;
/// The most heap bytes one stripe may take.
pub(crate) const MAX_STRIPE_BYTES: usize = 256 * 1024;
/// The most heap bytes a breaker's stripes may take together.
pub(crate) const MAX_BREAKER_BYTES: usize = 32 * 1024 * 1024;

// Today's layout: the bucket bound keeps a stripe and a whole breaker within theirs.
const _: () = {
    let stripe = match stripe_bytes(MAX_BUCKETS as usize) {
        Some(bytes) => bytes,
        None => panic!("a stripe of MAX_BUCKETS buckets overflows usize"),
    };
    assert!(stripe <= MAX_STRIPE_BYTES);
    assert!(MAX_STRIPE_BYTES.checked_mul(MAX_STRIPES).is_some());
    assert!(MAX_STRIPE_BYTES * MAX_STRIPES <= MAX_BREAKER_BYTES);
};

/// The heap bytes of one stripe with room for `buckets` window buckets: its counter
/// line and its lines of buckets. `None` if the size does not fit in a `usize`.
pub(crate) const fn stripe_bytes(buckets: usize) -> Option<usize> {
    let counters = std::mem::size_of::<CachePadded<[AtomicU64; COUNTERS + SCRATCH]>>();
    match buckets
        .div_ceil(LINE_BUCKETS)
        .checked_mul(std::mem::size_of::<Line>())
    {
        Some(lines) => lines.checked_add(counters),
        None => None,
    }
}

/// Whether a window of `buckets` buckets is within every bound above: `Ok`, or
/// the bound it breaks, in words. Checked arithmetic throughout: no setting can
/// make a size computation overflow.
pub(crate) fn check_buckets(buckets: u32) -> Result<(), String> {
    if buckets > MAX_BUCKETS {
        return Err(format!(
            "{buckets} buckets are more than the {MAX_BUCKETS} a window may have"
        ));
    }
    let stripe = usize::try_from(buckets)
        .ok()
        .and_then(stripe_bytes)
        .filter(|&bytes| bytes <= MAX_STRIPE_BYTES)
        .ok_or_else(|| {
            format!("{buckets} buckets take more than the {MAX_STRIPE_BYTES} bytes a stripe may")
        })?;
    match stripe.checked_mul(MAX_STRIPES) {
        Some(total) if total <= MAX_BREAKER_BYTES => Ok(()),
        _ => Err(format!(
            "{buckets} buckets in each of up to {MAX_STRIPES} stripes take more than the {MAX_BREAKER_BYTES} bytes a breaker may"
        )),
    }
}

/// Where the lean paths (a closed call's, a rejection's) load the words they read
/// outside the stripes: bytes `0..LEAN_LOADS` of their lines (the breaker's `Hot`
/// line, the streak word, the default clock's reading). Every stripe word those
/// paths store sits at `LEAN_LOADS` or beyond within each 64 bytes of the counter
/// line (see [`Counter`]). Where `CachePadded` is at least 64 bytes (128 on x86-64
/// and aarch64; 32 on a few 32-bit targets, where this does not hold), all of these
/// lines are that aligned, so such a load and store never share their low 12 address
/// bits, which the CPU would take for a dependency of the load on the store ("4K
/// aliasing": a stall on every call, in the memory layouts where it happens; about
/// one run in five of the closed-path benchmark before).
pub(crate) const LEAN_LOADS: usize = 40;

/// Whether word `i` of the counter line keeps clear of the lean paths' loads (see
/// [`LEAN_LOADS`]): what every word those paths store must be.
pub(crate) const fn clear_of_lean_loads(i: usize) -> bool {
    i * 8 % 64 >= LEAN_LOADS
}

/// The lifetime counters, one word each in every stripe.
///
/// The three that a lean path bumps (`Admitted` and `Successes` for a closed call,
/// `Rejected` for a rejection) come last, at bytes 40-63 of the line: clear of the
/// lean paths' loads (see [`LEAN_LOADS`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Counter {
    Failures,
    Slow,
    Ignored,
    Stale,
    Dropped,
    Admitted,
    Rejected,
    Successes,
}

/// How many lifetime counters a stripe has.
pub(crate) const COUNTERS: usize = 8;

/// Scratch word: the phase (the state word) the owner last cached something for:
/// its live window bucket while Closed (see [`crate::window`]), or, while Open,
/// the deadline in [`OPEN_DEADLINE`]. One word serves both, since a phase is
/// Closed or Open, never both; whichever cache a word does not match is simply
/// missed and refilled.
pub(crate) const PHASE_KEY: usize = 1;
/// Scratch word: the deadline of the Open phase in [`PHASE_KEY`], as a clock
/// reading, which the owner's lean rejections compare the clock with (one load
/// and one compare: see `CircuitBreaker::call_with`). Filled by the owner's first
/// rejection in that phase, off the lean path. Within the line's first
/// [`LEAN_LOADS`] bytes, as the lean paths' loads must be.
pub(crate) const OPEN_DEADLINE: usize = 4;
const _: () = assert!((COUNTERS + OPEN_DEADLINE) * 8 % 64 < LEAN_LOADS);
const _: () = assert!((COUNTERS + PHASE_KEY) * 8 % 64 < LEAN_LOADS);

// The words the lean paths store, and the lines' pointer they load, where
// `LEAN_LOADS` says.
const _: () = {
    assert!(clear_of_lean_loads(Counter::Admitted as usize));
    assert!(clear_of_lean_loads(Counter::Rejected as usize));
    assert!(clear_of_lean_loads(Counter::Successes as usize));
    assert!(std::mem::offset_of!(Stripes, counters) == 0);
};

/// Where this thread writes: a stripe's counter line and its index. Two words, so
/// it travels in registers. A thread refers to a stripe other than the shared one,
/// 0, only if it owns it (see [`crate::slot`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct StripeRef<'a> {
    counters: &'a [AtomicU64; COUNTERS + SCRATCH],
    index: usize,
}

impl<'a> StripeRef<'a> {
    #[inline]
    fn index(self) -> usize {
        self.index
    }

    #[inline]
    fn owned(self) -> bool {
        self.index != 0
    }

    /// The stripe as its owner's, if the calling thread owns it.
    #[inline]
    pub(crate) fn as_owned(self) -> Option<Owned<'a>> {
        self.owned().then_some(Owned(self))
    }
}

/// A stripe the calling thread owns (see [`StripeRef::as_owned`]): it is the only
/// writer, so every update is a plain load and store.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Owned<'a>(StripeRef<'a>);

impl<'a> Owned<'a> {
    /// Adds `n` to `word`, which is in this stripe.
    #[inline]
    pub(crate) fn add(self, word: &AtomicU64, n: u64) {
        // Relaxed: this thread is the stripe's only writer, so a plain load and
        // store cannot lose an update; readers only sum.
        word.store(
            word.load(Ordering::Relaxed).wrapping_add(n),
            Ordering::Relaxed,
        );
    }

    #[inline]
    pub(crate) fn bump(self, counter: Counter) {
        self.add(&self.0.counters[counter as usize], 1);
    }

    /// Scratch word `i`.
    #[inline]
    pub(crate) fn scratch(self, i: usize) -> &'a AtomicU64 {
        Stripes::scratch(self.0, i)
    }

    #[inline]
    pub(crate) fn stripe(self) -> StripeRef<'a> {
        self.0
    }
}

/// `repr(C)`, counters first: their pointer and length are what the lean paths load,
/// so they must fall in the breaker's first [`LEAN_LOADS`] bytes.
#[repr(C)]
pub(crate) struct Stripes {
    /// One padded line of lifetime counters and scratch words per stripe.
    counters: Box<[CachePadded<[AtomicU64; COUNTERS + SCRATCH]>]>,
    /// `lines_per_stripe` padded lines of window buckets per stripe.
    lines: Box<[Line]>,
    lines_per_stripe: usize,
    /// Stripe 0 is shared; stripes `1..=owned` are owned.
    owned: usize,
}

fn zeroed<const N: usize>() -> [AtomicU64; N] {
    std::array::from_fn(|_| AtomicU64::new(0))
}

impl Stripes {
    /// Stripes with the counters and room for `buckets` window buckets each.
    ///
    /// `buckets` has passed [`check_buckets`] and there are at most
    /// [`MAX_STRIPES`] stripes, so the sizes below stay within [`MAX_BREAKER_BYTES`]
    /// and cannot overflow.
    pub(crate) fn new(buckets: usize) -> Stripes {
        let owned = slot::owned_stripes();
        debug_assert!(owned < MAX_STRIPES);
        debug_assert!(
            stripe_bytes(buckets)
                .and_then(|bytes| bytes.checked_mul(owned + 1))
                .is_some_and(|bytes| bytes <= MAX_BREAKER_BYTES),
            "{buckets} buckets were not checked"
        );
        let lines_per_stripe = buckets.div_ceil(LINE_BUCKETS);
        Stripes {
            counters: (0..=owned).map(|_| CachePadded::new(zeroed())).collect(),
            lines: (0..(owned + 1) * lines_per_stripe)
                .map(|_| CachePadded::new(std::array::from_fn(|_| zeroed())))
                .collect(),
            lines_per_stripe,
            owned,
        }
    }

    /// The stripe the calling thread writes: its own, or the shared one.
    #[inline]
    pub(crate) fn mine(&self) -> StripeRef<'_> {
        self.stripe(slot::stripe())
    }

    /// The stripe the calling thread owns, if it owns one (and has a slot): for the
    /// path that takes only owners and sends the rest to one that calls `mine`. One
    /// bounds check, which a thread that owns none fails.
    #[inline]
    pub(crate) fn mine_if_owned(&self) -> Option<Owned<'_>> {
        let index = slot::owned().get();
        let counters = self.counters.get(index)?;
        Some(Owned(StripeRef { counters, index }))
    }

    /// Stripe `index`: a thread's own (see [`mine`](Self::mine)), or any stripe as
    /// a reader (or a test) sees it.
    #[inline]
    pub(crate) fn stripe(&self, index: usize) -> StripeRef<'_> {
        StripeRef {
            counters: &self.counters[index],
            index,
        }
    }

    /// Bucket `b` of a stripe.
    #[inline]
    pub(crate) fn bucket(&self, r: StripeRef<'_>, b: usize) -> &Bucket {
        self.bucket_at(self.position(r, b))
    }

    /// Where bucket `b` of a stripe is among every stripe's buckets: a number
    /// [`bucket_at`](Self::bucket_at) turns back into the bucket with no multiplication.
    #[inline]
    pub(crate) fn position(&self, r: StripeRef<'_>, b: usize) -> usize {
        r.index() * self.lines_per_stripe * LINE_BUCKETS + b
    }

    /// The bucket at `position`.
    #[inline]
    pub(crate) fn bucket_at(&self, position: usize) -> &Bucket {
        &self.lines[position / LINE_BUCKETS][position % LINE_BUCKETS]
    }

    /// Every bucket of stripe `r`, for readers, padding buckets included: its
    /// lines of buckets (two plain loops compile better than a `flat_map`).
    pub(crate) fn buckets_of(&self, r: StripeRef<'_>) -> &[Line] {
        let first = r.index() * self.lines_per_stripe;
        &self.lines[first..first + self.lines_per_stripe]
    }

    /// Scratch word `i` of a stripe: written by its owner only.
    #[inline]
    pub(crate) fn scratch<'a>(r: StripeRef<'a>, i: usize) -> &'a AtomicU64 {
        &r.counters[COUNTERS + i]
    }

    /// Every stripe, for readers.
    pub(crate) fn all(&self) -> impl Iterator<Item = StripeRef<'_>> + '_ {
        (0..=self.owned).map(move |index| self.stripe(index))
    }

    /// Adds `n` to `word`, which is in the stripe `r`.
    #[inline]
    pub(crate) fn add(r: StripeRef<'_>, word: &AtomicU64, n: u64) {
        match r.as_owned() {
            Some(owned) => owned.add(word, n),
            // Relaxed: the counter publishes nothing but itself.
            None => _ = word.fetch_add(n, Ordering::Relaxed),
        }
    }

    #[inline]
    pub(crate) fn bump(r: StripeRef<'_>, counter: Counter) {
        Stripes::add(r, &r.counters[counter as usize], 1);
    }

    /// [`bump`](Self::bump), then whether the stripe's count is a multiple of 256:
    /// one compare of the count's low byte in memory after each kind of bump, which
    /// leaves the owner's bump a single increment.
    #[inline(always)]
    pub(crate) fn bump_to_multiple_of_256(r: StripeRef<'_>, counter: Counter) -> bool {
        let word = &r.counters[counter as usize];
        // Relaxed (the loads): a statistic; another thread's add to the shared
        // stripe may or may not be seen.
        match r.as_owned() {
            Some(owned) => {
                owned.add(word, 1);
                word.load(Ordering::Relaxed) as u8 == 0
            }
            None => {
                // Relaxed: the counter publishes nothing but itself.
                word.fetch_add(1, Ordering::Relaxed) as u8 == 255
            }
        }
    }

    /// The sum of one counter over every stripe.
    pub(crate) fn total(&self, counter: Counter) -> u64 {
        self.counters
            .iter()
            // Relaxed: a snapshot; see the module's Orderings.
            .map(|c| c[counter as usize].load(Ordering::Relaxed))
            .fold(0, u64::wrapping_add)
    }

    /// Heap bytes held.
    pub(crate) fn heap_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.counters) + std::mem::size_of_val(&*self.lines)
    }
}

#[cfg(all(test, not(cutout_loom)))]
mod tests {
    use super::*;

    #[test]
    fn threads_count_into_their_own_stripes_and_totals_are_exact() {
        let stripes = Stripes::new(0);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for _ in 0..10_000 {
                        Stripes::bump(stripes.mine(), Counter::Successes);
                    }
                });
            }
        });
        assert_eq!(stripes.total(Counter::Successes), 80_000);
        assert_eq!(stripes.total(Counter::Failures), 0);
    }

    #[test]
    fn the_bucket_bound_keeps_a_breaker_within_its_byte_bounds() {
        assert_eq!(check_buckets(MAX_BUCKETS), Ok(()));
        assert!(check_buckets(MAX_BUCKETS + 1).is_err());
        assert!(check_buckets(u32::MAX).is_err());
        let largest = stripe_bytes(MAX_BUCKETS as usize).unwrap();
        assert!(largest <= MAX_STRIPE_BYTES && largest * MAX_STRIPES <= MAX_BREAKER_BYTES);
        // No size computation overflows, even for sizes no window may have.
        assert_eq!(stripe_bytes(usize::MAX), None);
        let stripes = Stripes::new(MAX_BUCKETS as usize);
        assert!(stripes.heap_bytes() <= (stripes.owned + 1) * largest);
        assert!(stripes.heap_bytes() <= MAX_BREAKER_BYTES);
    }

    #[test]
    fn buckets_spill_into_further_lines() {
        let stripes = Stripes::new(10);
        assert_eq!(stripes.lines_per_stripe, 3);
        let r = stripes.mine();
        Stripes::add(r, &stripes.bucket(r, 9)[1], 5);
        assert_eq!(stripes.bucket(r, 9)[1].load(Ordering::Relaxed), 5);
        let lines = (stripes.owned + 1) * 3 * std::mem::size_of::<Line>();
        let counters = (stripes.owned + 1) * std::mem::size_of::<CachePadded<[AtomicU64; 16]>>();
        assert_eq!(stripes.heap_bytes(), lines + counters);
    }
}
