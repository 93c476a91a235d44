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

/// A window bucket: tag, calls, failures, slow (see [`crate::window`]).
pub(crate) type Bucket = [AtomicU64; BUCKET_WORDS];
/// Words in a bucket.
const BUCKET_WORDS: usize = 4;
/// A stripe's unit: 128 bytes, padded (more where the cache line is longer):
/// the counter line, or four buckets of the ring.
pub(crate) type Line = CachePadded<[Bucket; LINE_BUCKETS]>;
/// Buckets in a line of the ring.
const LINE_BUCKETS: usize = 4;
/// Words of the counter line after the counters, written by the owner only (the
/// window's live bucket: see [`crate::window`]).
pub(crate) const SCRATCH: usize = 7;
/// Word of the counter line after the scratch words: the stripe's index in its
/// breaker's room, written before the stripe is published and never again, which
/// takes a holder of the counter line to its ring (see [`Stripes::lines`]).
const INDEX: usize = COUNTERS + SCRATCH;
const _: () = assert!(INDEX < BUCKET_WORDS * LINE_BUCKETS);

/// The most buckets a window may have: a reader sums them all, in every stripe,
/// whenever a failure is recorded, so far fewer is faster.
pub(crate) const MAX_BUCKETS: u32 = 4096;
/// The shared stripes: the threads beyond the owned stripes spread over them.
pub(crate) const SHARED: usize = 4;
/// The most stripes a breaker has: [`MAX_OWNED_STRIPES`] owned ones and the
/// [`SHARED`] ones.
pub(crate) const MAX_STRIPES: usize = MAX_OWNED_STRIPES + SHARED;
/// The most owned stripes a breaker has room for (see [`crate::slot::owned_stripes`]).
pub(crate) const MAX_OWNED_STRIPES: usize = 64;
/// The most heap bytes one stripe may take.
pub(crate) const MAX_STRIPE_BYTES: usize = 512 * 1024;
/// The most heap bytes a breaker's stripes may take together.
pub(crate) const MAX_BREAKER_BYTES: usize = 48 * 1024 * 1024;

// Today's layout: the bucket bound keeps a stripe and a whole breaker within theirs.
const _: () = {
    let stripe = match stripe_bytes(MAX_BUCKETS as usize) {
        Some(bytes) => bytes,
        None => panic!("no stripe class holds MAX_BUCKETS buckets"),
    };
    assert!(stripe <= MAX_STRIPE_BYTES);
    assert!(MAX_STRIPE_BYTES.checked_mul(MAX_STRIPES).is_some());
    assert!(MAX_STRIPE_BYTES * MAX_STRIPES <= MAX_BREAKER_BYTES);
};

/// Defines the stripe classes, each the number of lines its stripes have (the
/// counter line and the ring's), smallest first, and [`Room`], which holds the
/// stripes of one class. Each method of `Room` is one `match` whose arms differ
/// only in the class's length; where they touch only the counter line, the first
/// line in every class, they are the same code and compile to no dispatch at all.
macro_rules! room {
    ($($class:ident = $lines:literal,)* ; $last:ident = $last_lines:literal) => {
        /// The lines of every stripe class, smallest first.
        const CLASSES: [usize; [$($lines,)* $last_lines].len()] = [$($lines,)* $last_lines];

        /// Room for a breaker's stripes, all of one class: a pointer a stripe,
        /// each set by the stripe's first writer.
        enum Room {
            $($class(Box<[OnceBox<[Line; $lines]>]>),)*
            $last(Box<[OnceBox<[Line; $last_lines]>]>),
        }

        impl Room {
            /// Room for `len` stripes of at least `lines` lines each: the smallest
            /// class that holds them (the largest if none does, which a checked
            /// configuration never asks for).
            fn new(lines: usize, len: usize) -> Room {
                fn empty<T>(len: usize) -> Box<[OnceBox<T>]> {
                    (0..len).map(|_| crate::sync::stripe_box()).collect()
                }
                $(if lines <= $lines {
                    return Room::$class(empty(len));
                })*
                Room::$last(empty(len))
            }

            /// How many stripes there is room for.
            #[inline]
            fn len(&self) -> usize {
                match self {
                    $(Room::$class(room) => room.len(),)*
                    Room::$last(room) => room.len(),
                }
            }

            /// The counter line of stripe `index`, if it exists.
            #[inline]
            fn get(&self, index: usize) -> Option<&Line> {
                match self {
                    $(Room::$class(room) => room.get(index)?.get().map(|lines| &lines[0]),)*
                    Room::$last(room) => room.get(index)?.get().map(|lines| &lines[0]),
                }
            }

            /// The counter line of stripe `index`, allocated unless a racing thread
            /// has just done so. `index` is below [`len`](Self::len). The class's
            /// own code, called only to allocate: see [`Stripes::stripe`].
            #[cold]
            #[inline(never)]
            fn init(&self, index: usize) -> &Line {
                match self {
                    $(Room::$class(room) => &room[index].get_or_init(|| allocate(index))[0],)*
                    Room::$last(room) => &room[index].get_or_init(|| allocate(index))[0],
                }
            }

            /// Every line of stripe `index`: none if it does not exist.
            fn lines(&self, index: usize) -> &[Line] {
                match self {
                    $(Room::$class(room) => room.get(index).and_then(OnceBox::get).map_or(&[], |lines| &lines[..]),)*
                    Room::$last(room) => room.get(index).and_then(OnceBox::get).map_or(&[], |lines| &lines[..]),
                }
            }

            /// The heap bytes of one stripe of this class.
            fn stripe_bytes(&self) -> usize {
                match self {
                    $(Room::$class(_) => std::mem::size_of::<[Line; $lines]>(),)*
                    Room::$last(_) => std::mem::size_of::<[Line; $last_lines]>(),
                }
            }
        }
    };
}

// Exact up to 17 ring lines (64 buckets and the summary), then steps of at most
// 1.5 times; the largest holds `MAX_BUCKETS` and the summary.
room! {
    R0 = 1, R1 = 2, R2 = 3, R3 = 4, R4 = 5, R5 = 6, R6 = 7, R7 = 8, R8 = 9,
    R9 = 10, R10 = 11, R11 = 12, R12 = 13, R13 = 14, R14 = 15, R15 = 16, R16 = 17,
    R17 = 18, R24 = 25, R32 = 33, R48 = 49, R64 = 65, R96 = 97, R128 = 129, R192 = 193,
    R256 = 257, R384 = 385, R512 = 513, R768 = 769,
    ; R1025 = 1026
}

/// A zeroed stripe of `L` lines, stripe `index` of its room.
#[cold]
#[inline(never)]
fn allocate<const L: usize>(index: usize) -> Box<[Line; L]> {
    // Collected on the heap (an array built by value would be built on the stack
    // first): one allocation of exactly `L` lines.
    let lines: Box<[Line]> = (0..L).map(|_| CachePadded::new(zeroed_buckets())).collect();
    // Relaxed: published with the stripe (the `OnceBox`'s Release).
    word(&lines[0], INDEX).store(index as u64, Ordering::Relaxed);
    match lines.try_into() {
        Ok(stripe) => stripe,
        Err(_) => unreachable!("{L} lines were collected"),
    }
}

/// Word `i` of the counter line (which holds four buckets' words).
#[inline(always)]
fn word(line: &Line, i: usize) -> &AtomicU64 {
    &line[i / BUCKET_WORDS][i % BUCKET_WORDS]
}

/// The lines a stripe needs for `buckets` window buckets: the counter line, then
/// the ring's, four buckets to a line, and with a window one more bucket's room
/// after them, for the owner's summary (see [`Ring::summary`]).
const fn needed_lines(buckets: usize) -> usize {
    // Saturating: no size computation overflows (see `stripe_bytes`).
    let slots = if buckets == 0 {
        0
    } else {
        buckets.saturating_add(1)
    };
    1 + slots.div_ceil(LINE_BUCKETS)
}

/// The lines of the class that holds a stripe of `buckets` window buckets (see
/// [`needed_lines`]), `None` if no class is that large.
const fn class_lines(buckets: usize) -> Option<usize> {
    let lines = needed_lines(buckets);
    let mut i = 0;
    while i < CLASSES.len() {
        if CLASSES[i] >= lines {
            return Some(CLASSES[i]);
        }
        i += 1;
    }
    None
}

/// The heap bytes of one stripe with room for `buckets` window buckets: its
/// class's lines. `None` if no class is that large.
pub(crate) const fn stripe_bytes(buckets: usize) -> Option<usize> {
    match class_lines(buckets) {
        // At most 1026 lines of at most a few hundred bytes: no overflow.
        Some(lines) => Some(lines * std::mem::size_of::<Line>()),
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
#[allow(dead_code)] // used by const assertions only (see `clear_of_lean_loads`)
pub(crate) const LEAN_LOADS: usize = 40;

/// Whether word `i` of the counter line keeps clear of the lean paths' loads (see
/// [`LEAN_LOADS`]): what every word those paths store must be.
// Used by const assertions only, which rustc before 1.88 (the MSRV is 1.87) does
// not count as uses.
#[allow(dead_code)]
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
/// its live window bucket while Closed (the window's `CACHE_KEY`, see
/// [`crate::window`]), or, while Open, the deadline in [`OPEN_DEADLINE`]. One word
/// serves both, since a phase is Closed or Open, never both; whichever cache a word
/// does not match is missed and refilled.
pub(crate) const PHASE_KEY: usize = 1;
/// Scratch word: the deadline of the Open phase in [`PHASE_KEY`], as a clock
/// reading, which the owner's lean rejections compare the clock with (one load
/// and one compare: see `CircuitBreaker::call_with`), filled by the owner's first
/// rejection in that phase, off the lean path. It shares its word with the
/// window's `NEWEST`, the tag of the owner's newest bucket, which readers use only
/// to skip a stripe with nothing in the window: every bucket of a later closed
/// phase is written after a rotation, which writes `NEWEST` again, so while the
/// word holds a deadline the stripe holds nothing of any later phase, and no
/// reader of one can wrongly skip it. (A dedicated word would take the counter
/// line past one 128-byte line.) Within the line's first [`LEAN_LOADS`] bytes, as
/// the lean paths' loads must be.
pub(crate) const OPEN_DEADLINE: usize = 2;
const _: () = assert!((COUNTERS + OPEN_DEADLINE) * 8 % 64 < LEAN_LOADS);
const _: () = assert!((COUNTERS + PHASE_KEY) * 8 % 64 < LEAN_LOADS);

// The words the lean paths store, and the lines' pointer they load, where
// `LEAN_LOADS` says.
const _: () = {
    assert!(clear_of_lean_loads(Counter::Admitted as usize));
    assert!(clear_of_lean_loads(Counter::Rejected as usize));
    assert!(clear_of_lean_loads(Counter::Successes as usize));
    assert!(std::mem::offset_of!(Stripes, room) == 0);
};

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
        let stripe = self.room.get(slot::owned().get())?;
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
    /// Published first (as it once was), the stripe could be written and read back
    /// before the bit was set, and the writer's own trip check missed its failure.
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
mod tests {
    use super::*;

    #[test]
    fn threads_count_into_their_own_stripes_and_totals_are_exact() {
        let stripes = Stripes::new(0);
        std::thread::scope(|s| {
            for t in 0..8 {
                let stripes = &stripes;
                s.spawn(move || {
                    // Half in their own stripes, half sharing two shared ones.
                    let r = match t % 2 {
                        0 => stripes.mine(),
                        _ => stripes.stripe(t % 4 / 2),
                    };
                    for _ in 0..10_000 {
                        Stripes::bump(r, Counter::Successes);
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
        for index in 0..stripes.room.len() {
            let _ = stripes.stripe(index);
        }
        let room = stripes.room_bytes();
        assert_eq!(
            stripes.heap_bytes(),
            room + stripes.room.len() * largest,
            "every stripe allocated: the most a breaker can hold"
        );
        assert!(stripes.heap_bytes() <= MAX_BREAKER_BYTES);
    }

    #[test]
    fn stripes_come_with_their_first_writer() {
        let stripes = Stripes::new(10);
        let room = stripes.room_bytes();
        assert_eq!(stripes.allocated(), 0);
        assert_eq!(stripes.heap_bytes(), room, "only the room for pointers");
        assert!(stripes.mine_if_owned().is_none(), "nothing written yet");
        let r = stripes.mine();
        Stripes::bump(r, Counter::Successes);
        let _ = stripes.mine();
        assert_eq!(stripes.allocated(), 1, "one stripe for one thread");
        assert_eq!(stripes.heap_bytes(), room + stripe_bytes(10).unwrap());
        std::thread::scope(|s| {
            s.spawn(|| Stripes::bump(stripes.mine(), Counter::Successes));
        });
        assert_eq!(stripes.allocated(), 2);
        assert_eq!(stripes.total(Counter::Successes), 2);
    }

    #[test]
    fn readers_visit_exactly_the_stripes_that_exist_whatever_their_index() {
        // The most stripes a breaker has (64 owned: every bit of the word).
        let stripes = Stripes {
            room: Room::new(needed_lines(10), MAX_STRIPES),
            buckets: 10,
            stripe_lines: needed_lines(10),
            owned_bits: AtomicU64::new(0),
            shared_bits: AtomicU64::new(0),
        };
        let len = stripes.room.len();
        let visited = |s: &Stripes| -> Vec<u64> {
            // Each stripe's index, from its counter line.
            s.all()
                .map(|r| word(r.stripe, INDEX).load(Ordering::Relaxed))
                .collect()
        };
        assert_eq!(visited(&stripes), Vec::<u64>::new());
        // The last owned stripe (the highest bit), a middle one, a shared one:
        // shared first, then owned in index order, and nothing else.
        for index in [len - 1, SHARED + 1, 2] {
            Stripes::bump(stripes.stripe(index), Counter::Successes);
        }
        let want: Vec<u64> = [2, SHARED + 1, len - 1].map(|i| i as u64).to_vec();
        assert_eq!(visited(&stripes), want);
        assert_eq!(stripes.total(Counter::Successes), 3);
        // Written again, or found again, nothing changes.
        let _ = stripes.stripe(len - 1);
        assert_eq!(visited(&stripes), want);
        assert_eq!(stripes.allocated(), 3);
        // Every stripe, all 64 bits.
        for index in 0..len {
            let _ = stripes.stripe(index);
        }
        assert_eq!(visited(&stripes), (0..len as u64).collect::<Vec<_>>());
    }

    #[test]
    fn bits_are_visited_lowest_first_and_the_top_bit_too() {
        assert_eq!(Bits(0).count(), 0);
        assert_eq!(Bits(1 << 63 | 1 << 5 | 1).collect::<Vec<_>>(), [0, 5, 63]);
        assert_eq!(Bits(u64::MAX).count(), 64);
    }

    #[test]
    fn a_stripe_is_its_counter_line_and_its_ring() {
        let stripes = Stripes::new(10);
        let r = stripes.mine();
        Stripes::add(r, &stripes.bucket(r, 9)[1], 5);
        assert_eq!(stripes.bucket(r, 9)[1].load(Ordering::Relaxed), 5);
        assert_eq!(stripes.ring(r).len(), 3, "three lines of four buckets");
        // The counter line and three lines of four buckets: one allocation.
        assert_eq!(stripe_bytes(10), Some(4 * size_of::<Line>()));
        assert_eq!(stripes.lines(r).len(), 4);
    }

    #[test]
    fn every_window_fits_the_smallest_class_that_holds_it_in_one_allocation() {
        assert!(CLASSES.windows(2).all(|w| w[0] < w[1]), "smallest first");
        for buckets in 0..=MAX_BUCKETS as usize {
            let needed = needed_lines(buckets);
            let lines = class_lines(buckets).expect("every allowed window has a class");
            assert!(lines >= needed, "{buckets} buckets");
            // Exact up to 64 buckets (and the summary), then at most 1.5 times the
            // ring.
            let (ring, needed_ring) = (lines - 1, needed - 1);
            assert!(
                ring == needed_ring || needed_ring > 17 && 2 * ring <= 3 * needed_ring,
                "{buckets} buckets in {lines} lines"
            );
        }
        // The largest class is the largest window's, no larger.
        assert_eq!(
            Some(needed_lines(MAX_BUCKETS as usize)),
            CLASSES.last().copied()
        );
        assert_eq!(class_lines(MAX_BUCKETS as usize + LINE_BUCKETS), None);
        for buckets in [1, 4, 5, 10, 60, 64, 65, 100, 1000, MAX_BUCKETS as usize] {
            let stripes = Stripes::new(buckets);
            let r = stripes.mine();
            assert_eq!(stripes.lines(r).len(), class_lines(buckets).unwrap());
            assert_eq!(stripes.ring(r).len(), needed_lines(buckets) - 1);
            // Every bucket is its own, in the stripe's lines.
            for b in 0..buckets {
                Stripes::add(r, &stripes.bucket(r, b)[1], b as u64 + 1);
            }
            let written: Vec<u64> = stripes
                .ring(r)
                .slots()
                .map(|bucket| bucket[1].load(Ordering::Relaxed))
                .collect();
            assert_eq!(
                written[..buckets],
                (1..=buckets as u64).collect::<Vec<_>>()[..]
            );
            assert!(
                written[buckets..].iter().all(|&w| w == 0),
                "the rest unwritten"
            );
            assert_eq!(
                stripes.heap_bytes(),
                stripes.room_bytes() + stripe_bytes(buckets).unwrap()
            );
            assert_eq!(Stripes::scratch(r, 0).load(Ordering::Relaxed), 0, "apart");
        }
    }

    #[test]
    fn the_largest_stripe_is_built_on_the_heap_not_on_the_callers_stack() {
        // 128 KiB of lines (1,025 of 128 bytes), on the first call of a thread with
        // a 64 KiB stack: an array built by value and then boxed would overflow it
        // (and abort).
        let stripes = Stripes::new(MAX_BUCKETS as usize);
        std::thread::scope(|s| {
            std::thread::Builder::new()
                .stack_size(64 * 1024)
                .spawn_scoped(s, || Stripes::bump(stripes.mine(), Counter::Successes))
                .unwrap()
                .join()
                .unwrap();
        });
        assert_eq!(stripes.total(Counter::Successes), 1);
        assert!(stripe_bytes(MAX_BUCKETS as usize).unwrap() > 2 * 64 * 1024);
    }
}
