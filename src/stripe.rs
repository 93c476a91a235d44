//! Striped counters: the memory behind the lifetime counters and the sliding window.
//!
//! A breaker has room for [`SHARED`] shared stripes and `owned` owned ones, but
//! holds only the stripes some thread has written: each is allocated by the first
//! thread that writes it, on that thread's first call to the breaker (off the lean
//! path), and never again. So a breaker's memory follows the threads that use it,
//! not the machine's core count: one used by one thread holds one stripe (two if
//! that thread moved from a shared stripe to an owned one, see [`crate::slot`]).
//!
//! Stripe `SHARED + i` belongs to the thread holding slot `i < owned` (see
//! [`crate::slot`]): that thread is its only writer and updates it with a plain load
//! and store, no locked instruction. Stripes `0..SHARED` are shared by the threads
//! whose slot is beyond `owned`, spread by slot number (so no one line is written by
//! every such thread), and are updated with atomic read-modify-writes. Readers
//! (metrics, the trip check) sum every stripe that exists, and only those: a word
//! of bits names the owned stripes that exist, so a reader's cost follows the
//! threads too (not the room's 68 stripes on a machine of 32 cores or more).
//!
//! A stripe is one allocation of 128-byte lines ([`Line`]): the counter line first,
//! with [`COUNTERS`] lifetime counters, [`SCRATCH`] words its owner writes for the
//! window (its live bucket's start, phase and length, private; the live bucket's
//! call counter, base and slot and the newest bucket's tag, read by readers) and the
//! stripe's own index; then its ring of window buckets (four words each, four to a
//! line; see [`crate::window`]) and one more bucket's room, where the owner keeps a
//! summary of its window for readers; no ring without a window. The stripes use no
//! `unsafe`, so a stripe's size cannot be chosen at run time behind the 8-byte
//! pointer the room keeps for it: a stripe is an array of a fixed number of lines,
//! one of a few dozen *classes* (see [`Room`]), and a breaker's room holds the
//! smallest class its window fits. The classes are exact up to 64 buckets (the
//! default window has 10: with the summary, 11 slots in three lines) and then at
//! most 1.5 times the ring. Every class keeps the counter line first, so the lean
//! paths, which touch only that line, compile to the same loads in
//! every class, and the compiler merges the class's `match` away (see
//! `docs/PERFORMANCE.md`, "Memory that follows use").
//!
//! # Limits
//! The largest allocation a breaker makes is a stripe, at most
//! [`MAX_STRIPE_BYTES`]; all its stripes together take at most [`MAX_BREAKER_BYTES`].
//! The bounds on it are constants here, in one place: [`MAX_BUCKETS`],
//! [`MAX_STRIPE_BYTES`] and [`MAX_BREAKER_BYTES`]. [`check_buckets`] checks all
//! three when a configuration is validated, so a setting the breaker cannot honour
//! is a `ConfigError` (field `window`), never an allocation the process cannot
//! survive, on a thread's first call or ever. With today's layout the bucket bound
//! is the one that binds (a const assertion says so).
//!
//! # Orderings
//! Counter updates are `Relaxed`: a counter publishes nothing but its own value, and
//! a reader's sum is a snapshot that may miss updates still in flight. A stripe is
//! published by the `Release` of its pointer's first store and found with `Acquire`
//! ([`OnceBox`]), so a reader or a writer that finds it sees it zeroed. Its bit
//! in `owned_bits` or `shared_bits`, which readers follow, is set before that
//! first store, so a thread that found a stripe, and every reader ordered after
//! that thread, finds its bit (see `Stripes::allocate`).

use crate::slot;
use crate::sync::{AtomicU64, OnceBox, Ordering};
use crossbeam_utils::CachePadded;

mod line;
mod room;

use line::INDEX;
pub(crate) use line::*;
pub(crate) use room::*;

/// A window bucket: tag, calls, failures, slow (see [`crate::window`]).
pub(crate) type Bucket = [AtomicU64; BUCKET_WORDS];
/// Words in a bucket.
const BUCKET_WORDS: usize = 4;
/// A stripe's unit: 128 bytes, padded (more where the cache line is longer):
/// the counter line, or four buckets of the ring.
pub(crate) type Line = CachePadded<[Bucket; LINE_BUCKETS]>;
/// Buckets in a line of the ring.
const LINE_BUCKETS: usize = 4;

/// Word `i` of the counter line (which holds four buckets' words).
#[inline(always)]
fn word(line: &Line, i: usize) -> &AtomicU64 {
    &line[i / BUCKET_WORDS][i % BUCKET_WORDS]
}

/// Where this thread writes: a stripe, and whether the thread owns it (a stripe
/// other than a shared one, `0..SHARED`, which a thread refers to only if it owns
/// it: see [`crate::slot`]). Two words, so it travels in registers; the flag is
/// set where the stripe is found, so the compiler knows it on the paths that find
/// an owned stripe, and drops the branch between a plain and a locked increment.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StripeRef<'a> {
    /// The stripe's counter line.
    stripe: &'a Line,
    owned: bool,
}

impl<'a> StripeRef<'a> {
    #[inline]
    fn owned(self) -> bool {
        self.owned
    }

    /// Whether `self` and `other` are the same stripe.
    #[inline]
    pub(crate) fn is(self, other: StripeRef<'_>) -> bool {
        std::ptr::eq(self.stripe, other.stripe)
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
        self.add(word(self.0.stripe, counter as usize), 1);
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

/// A stripe's ring, found once for several reads: `buckets` window buckets, four
/// to a line, then one bucket's room for the summary (see [`summary`]); the last
/// line's rest is never written.
///
/// [`summary`]: Ring::summary
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ring<'a> {
    lines: &'a [Line],
    buckets: usize,
}

impl<'a> Ring<'a> {
    /// The window's buckets: the lines they fill, then the rest of the next line
    /// (the summary's slot not among them).
    #[inline]
    pub(crate) fn buckets(self) -> (&'a [Line], &'a [Bucket]) {
        let (whole, rest) = (self.buckets / LINE_BUCKETS, self.buckets % LINE_BUCKETS);
        let tail = self.lines.get(whole).map_or(&[][..], |line| &line[..rest]);
        (self.lines.get(..whole).unwrap_or_default(), tail)
    }

    /// Slot `b`: window bucket `b`, or the summary's slot (`b` the bucket count);
    /// `None` beyond the ring.
    #[inline]
    pub(crate) fn bucket(self, b: usize) -> Option<&'a Bucket> {
        Some(&self.lines.get(b / LINE_BUCKETS)?[b % LINE_BUCKETS])
    }

    /// The slot after the window's buckets, where the owner of the stripe keeps
    /// the sum of its buckets in the window that ends at its live bucket (see
    /// [`crate::window`]). `None` without a window.
    #[inline]
    pub(crate) fn summary(self) -> Option<&'a Bucket> {
        self.bucket(self.buckets)
    }

    /// How many lines the ring takes.
    #[cfg(test)]
    pub(crate) fn len(self) -> usize {
        self.lines.len()
    }

    /// Every slot, the summary's and the unused ones too.
    #[cfg(test)]
    pub(crate) fn slots(self) -> impl Iterator<Item = &'a Bucket> {
        self.lines.iter().flat_map(|line| line.iter())
    }
}

/// `repr(C)`, the room first: its pointer and length (and its class) are what the
/// lean paths load, so they must fall in the breaker's first [`LEAN_LOADS`] bytes.
#[repr(C)]
pub(crate) struct Stripes {
    /// Stripes `0..SHARED` are shared, the rest owned; each allocated by the first
    /// thread that writes it.
    room: Room,
    /// Window buckets per stripe.
    buckets: usize,
    /// [`needed_lines`] of `buckets`, kept rather than computed at each ring
    /// lookup (two or three a failure: 16 instructions a failure).
    stripe_lines: usize,
    /// Bit `i`: owned stripe `SHARED + i` exists. Readers visit the stripes that
    /// exist, not all the room's (68 on a machine of 32 cores or more): a failure's
    /// window read and every metrics sum cost what the threads in use write, not
    /// what the core count reserves. Set when the stripe is allocated, never
    /// cleared (a stripe lives as long as its breaker).
    owned_bits: AtomicU64,
    /// Bit `i`: shared stripe `i` exists, as `owned_bits` says of owned ones (most
    /// processes never write a shared stripe: one load skips all four).
    shared_bits: AtomicU64,
}
const _: () = assert!(MAX_OWNED_STRIPES <= u64::BITS as usize);
const _: () = assert!(SHARED <= u64::BITS as usize);

fn zeroed<const N: usize>() -> [AtomicU64; N] {
    std::array::from_fn(|_| AtomicU64::new(0))
}

fn zeroed_buckets() -> [Bucket; LINE_BUCKETS] {
    std::array::from_fn(|_| zeroed())
}

/// The positions of a word's set bits, lowest first.
struct Bits(u64);

impl Iterator for Bits {
    type Item = usize;

    #[inline]
    fn next(&mut self) -> Option<usize> {
        let bit = self.0.trailing_zeros() as usize;
        // Clears the lowest set bit (none if the word is 0: then `None`).
        self.0 &= self.0.wrapping_sub(1);
        (bit < u64::BITS as usize).then_some(bit)
    }
}

impl Stripes {
    /// The bytes at the start of `Stripes` that the lean paths load: the room.
    #[allow(dead_code)] // used by a const assertion and a test only (see `clear_of_lean_loads`)
    pub(crate) const LEAN_BYTES: usize = std::mem::size_of::<Room>();

    /// Room for the stripes, each with the counters and `buckets` window buckets.
    /// Allocates only the room (one pointer a stripe): each stripe comes with its
    /// first writer.
    ///
    /// `buckets` has passed [`check_buckets`] and there are at most
    /// [`MAX_STRIPES`] stripes, so the sizes below stay within [`MAX_BREAKER_BYTES`]
    /// and cannot overflow.
    pub(crate) fn new(buckets: usize) -> Stripes {
        let owned = slot::owned_stripes();
        debug_assert!(owned <= MAX_OWNED_STRIPES);
        debug_assert!(
            stripe_bytes(buckets)
                .and_then(|bytes| bytes.checked_mul(owned + SHARED))
                .is_some_and(|bytes| bytes <= MAX_BREAKER_BYTES),
            "{buckets} buckets were not checked"
        );
        let stripes = Stripes {
            room: Room::new(needed_lines(buckets), SHARED + owned),
            buckets,
            stripe_lines: needed_lines(buckets),
            owned_bits: AtomicU64::new(0),
            shared_bits: AtomicU64::new(0),
        };
        // Only under loom, unless a model asked for lazy stripes (see `sync`).
        if crate::sync::eager_stripes() {
            for index in 0..stripes.room.len() {
                let _ = stripes.stripe(index);
            }
        }
        stripes
    }

    /// The stripe the calling thread writes: its own, or a shared one. Gives the
    /// thread a slot first if it has none, and allocates the stripe if no thread
    /// has written it yet.
    #[inline]
    pub(crate) fn mine(&self) -> StripeRef<'_> {
        self.stripe(slot::stripe())
    }

    /// The stripe the calling thread owns, if it owns one (and has a slot) and it
    /// exists: for the path that takes only owners and sends the rest to one that
    /// calls `mine`. One bounds check, which a thread that owns none fails, and one
    /// null check, which a thread's first call to this breaker fails.
    #[inline]
    pub(crate) fn mine_if_owned(&self) -> Option<Owned<'_>> {
        self.owned_at(slot::owned().get())
    }

    /// [`mine_if_owned`](Self::mine_if_owned) for a thread whose slot (from
    /// `slot::owned`) the caller has read already.
    #[inline]
    pub(crate) fn owned_at(&self, slot: usize) -> Option<Owned<'_>> {
        let stripe = self.room.get(slot)?;
        Some(Owned(StripeRef {
            stripe,
            owned: true,
        }))
    }

    /// Stripe `index`, allocated if no thread has written it yet: a thread's own
    /// (see [`mine`](Self::mine)), or any stripe as a test writes it.
    #[inline]
    pub(crate) fn stripe(&self, index: usize) -> StripeRef<'_> {
        // The common case, a stripe that exists, in the code every class shares
        // (no dispatch); the class's own code only to allocate.
        let stripe = match self.room.get(index) {
            Some(line) => line,
            None => self.allocate(index),
        };
        StripeRef {
            stripe,
            owned: index >= SHARED,
        }
    }

    /// Stripe `index`'s counter line, marked as existing for readers, then
    /// allocated (unless a racing thread did).
    ///
    /// The bit comes first. Another thread can find the stripe (`room.get`) the
    /// moment it is published, without calling this, and count in it; its own trip
    /// check must then read it, and so must every read that takes a later budget
    /// number than its sample (see `window::budget`). Both come after that thread's
    /// `room.get`, which comes after the publication, which comes after the bit.
    /// Were it published first, the stripe could be written and read back
    /// before the bit was set, and the writer's own trip check would miss its failure.
    /// A reader that sees the bit before the stripe is published skips it
    /// (`named`): nothing has been counted in it yet. Model-checked with lazy
    /// stripes by loom model 13 (`loom-tests/tests/stripes.rs`), which fails with
    /// the bit set after the publication.
    #[cold]
    #[inline(never)]
    fn allocate(&self, index: usize) -> &Line {
        let (bits, bit) = match index.checked_sub(SHARED) {
            Some(bit) => (&self.owned_bits, bit),
            None => (&self.shared_bits, index),
        };
        // Relaxed: the `OnceBox`'s Release publication comes after it, so a thread
        // that finds the stripe (with Acquire) has this bit before it, and so has
        // any thread that a later Acquire of its writes puts after it.
        bits.fetch_or(1 << bit, Ordering::Relaxed);
        self.room.init(index)
    }

    /// Every line of stripe `r`: its counter line, then its ring's.
    #[inline]
    fn lines<'a>(&'a self, r: StripeRef<'a>) -> &'a [Line] {
        // Relaxed: written before the stripe was published, and `r` was found
        // with the Acquire that saw it published.
        let index = word(r.stripe, INDEX).load(Ordering::Relaxed);
        self.room
            .lines(usize::try_from(index).unwrap_or(usize::MAX))
    }

    /// Bucket `b` of a stripe (`b` is below the window's bucket count).
    #[inline]
    pub(crate) fn bucket<'a>(&'a self, r: StripeRef<'a>, b: usize) -> &'a Bucket {
        &self.lines(r)[1 + b / LINE_BUCKETS][b % LINE_BUCKETS]
    }

    /// Stripe `r`'s ring, for readers: its window buckets, four to a line, then
    /// the summary's slot.
    #[inline]
    pub(crate) fn ring<'a>(&'a self, r: StripeRef<'a>) -> Ring<'a> {
        Ring {
            lines: self.lines(r).get(1..self.stripe_lines).unwrap_or_default(),
            buckets: self.buckets,
        }
    }

    /// Scratch word `i` of a stripe: written by its owner only.
    #[inline]
    pub(crate) fn scratch(r: StripeRef<'_>, i: usize) -> &AtomicU64 {
        word(r.stripe, COUNTERS + i)
    }

    /// Every stripe some thread has written, for readers: [`shared`](Self::shared),
    /// then [`owned`](Self::owned).
    pub(crate) fn all(&self) -> impl Iterator<Item = StripeRef<'_>> + '_ {
        self.shared().chain(self.owned())
    }

    /// The shared stripes some thread has written: those their bits name.
    pub(crate) fn shared(&self) -> impl Iterator<Item = StripeRef<'_>> + '_ {
        self.named(&self.shared_bits, 0, false)
    }

    /// The owned stripes some thread has written: those their bits name (the
    /// others cost a reader nothing).
    pub(crate) fn owned(&self) -> impl Iterator<Item = StripeRef<'_>> + '_ {
        self.named(&self.owned_bits, SHARED, true)
    }

    /// The stripes `bits` names, stripe `first + i` for bit `i`.
    #[inline]
    fn named<'a>(
        &'a self,
        bits: &AtomicU64,
        first: usize,
        owned: bool,
    ) -> impl Iterator<Item = StripeRef<'a>> + 'a {
        // Relaxed: what a reader must see (the stripes a thread found before it,
        // or a thread its own Acquire put it after) the bit's place before the
        // stripe's publication gives it (see `allocate`); a stripe it finds is
        // published to it by `room.get`'s own Acquire. A bit whose stripe is not
        // yet published names a stripe nobody has written: skipped.
        Bits(bits.load(Ordering::Relaxed)).filter_map(move |bit| {
            self.room
                .get(first + bit)
                .map(|stripe| StripeRef { stripe, owned })
        })
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
        Stripes::add(r, word(r.stripe, counter as usize), 1);
    }

    /// [`bump`](Self::bump), then whether the stripe's count is a multiple of 256:
    /// one compare of the count's low byte in memory after each kind of bump, which
    /// leaves the owner's bump a single increment.
    #[inline(always)]
    pub(crate) fn bump_to_multiple_of_256(r: StripeRef<'_>, counter: Counter) -> bool {
        let word = self::word(r.stripe, counter as usize);
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
        self.all()
            // Relaxed: a snapshot; see the module's Orderings.
            .map(|r| word(r.stripe, counter as usize).load(Ordering::Relaxed))
            .fold(0, u64::wrapping_add)
    }

    /// How many stripes exist (some thread has written them).
    #[cfg(test)]
    pub(crate) fn allocated(&self) -> usize {
        self.all().count()
    }

    /// Heap bytes held: the stripes' pointers and the stripes that exist.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.room_bytes() + self.all().count() * self.room.stripe_bytes()
    }

    /// Heap bytes of the room: a pointer a stripe.
    fn room_bytes(&self) -> usize {
        self.room.len() * std::mem::size_of::<OnceBox<Line>>()
    }
}

#[cfg(all(test, not(cutout_loom)))]
mod tests;
