//! The counter line: every word of it in one table, the lifetime counters and
//! the scratch words, with the rules on where the lean paths load and store.

use super::*;

/// Words of the counter line after the counters: the scratch words (their table
/// is below).
pub(crate) const SCRATCH: usize = 7;
/// Word of the counter line after the scratch words: the stripe's index in its
/// breaker's room, written before the stripe is published and never again, which
/// takes a holder of the counter line to its ring (see [`Stripes::lines`]).
pub(super) const INDEX: usize = COUNTERS + SCRATCH;
const _: () = assert!(INDEX < BUCKET_WORDS * LINE_BUCKETS);

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

// ---- the scratch words --------------------------------------------------------
//
// Words `COUNTERS..COUNTERS + SCRATCH` of the counter line, by index (one name for
// each word; where a word serves two caches, its name says both):
//
// | word | name                | written by                                       |
// |------|---------------------|--------------------------------------------------|
// | 0    | `START_OR_RAMP_SUM` | an owner: its live bucket's start; a shared stripe: the ramp's sum |
// | 1    | `PHASE_KEY`         | the owner: the phase its live bucket or Open deadline is for |
// | 2    | `NEWEST_OR_DEADLINE`| the owner: its newest bucket's tag, or the Open deadline |
// | 3    | `LIVE_BASE`         | the owner: `LIVE_CALLS` when the live bucket went live |
// | 4    | `CACHE_SPAN`        | the owner: its live bucket's length (0: nothing cached) |
// | 5    | `LIVE_CALLS`        | the owner: calls counted in its live buckets      |
// | 6    | `LIVE_SLOT`         | the owner: its live bucket's slot in the ring     |
//
// The window's words (all but the deadline and the ramp's sum) are the owner's
// cache of its live bucket: see [`crate::window`]. The owner sets them whenever it
// has made sure the bucket carries that tag, and it is the only thread that
// changes a tag of its stripe, so the cache stays true until the owner moves on.

/// An owned stripe's live bucket's start (a clock reading). In a *shared* stripe,
/// whose scratch words the window does not use (its caches are an owner's), the
/// ramp's admission sum (see [`crate::ramp`]).
pub(crate) const START_OR_RAMP_SUM: usize = 0;
/// The phase (the state word) the owner last cached something for: its live
/// window bucket while Closed, or, while Open, the deadline in
/// [`NEWEST_OR_DEADLINE`]. One word serves both, since a phase is Closed or Open,
/// never both; whichever cache a word does not match is missed and refilled.
pub(crate) const PHASE_KEY: usize = 1;
/// While Closed, the tag of the newest bucket the owner rotated in (0 if none),
/// which readers use only to skip a stripe whose every bucket is older than the
/// window. While Open, the deadline of the Open phase in [`PHASE_KEY`], as a clock
/// reading, which the owner's lean rejections compare the clock with (one load and
/// one compare: see `CircuitBreaker::call_with`), filled by the owner's first
/// rejection in that phase, off the lean path. Every bucket of a later closed
/// phase is written after a rotation, which writes the newest tag again, so while
/// the word holds a deadline the stripe holds nothing of any later phase, and no
/// reader of one can wrongly skip it. (A dedicated word would take the counter line
/// past one 128-byte line.) Within the line's first [`LEAN_LOADS`] bytes, as the
/// lean paths' loads must be.
pub(crate) const NEWEST_OR_DEADLINE: usize = 2;
/// The value of [`LIVE_CALLS`] when the current live bucket went live.
pub(crate) const LIVE_BASE: usize = 3;
/// The live bucket's length in nanoseconds (so the hot path reads only the owner's
/// line; 0 while nothing is cached, which no reading falls within).
pub(crate) const CACHE_SPAN: usize = 4;
/// Every call the owner put in a live bucket. Clear of the lean paths' loads (see
/// [`LEAN_LOADS`]).
pub(crate) const LIVE_CALLS: usize = 5;
/// The live bucket's slot in the ring, cached with its start, so that finding the
/// live bucket off the lean path (a failure's record) takes no division; readers
/// find it here too, with the owner's summary (see `summarized` in the window); 0
/// while nothing is cached.
pub(crate) const LIVE_SLOT: usize = 6;
const _: () = assert!((COUNTERS + NEWEST_OR_DEADLINE) * 8 % 64 < LEAN_LOADS);
const _: () = assert!((COUNTERS + PHASE_KEY) * 8 % 64 < LEAN_LOADS);
const _: () = assert!(clear_of_lean_loads(COUNTERS + LIVE_CALLS));
const _: () = assert!(LIVE_SLOT < SCRATCH);

// The words the lean paths store, and the lines' pointer they load, where
// `LEAN_LOADS` says.
const _: () = {
    assert!(clear_of_lean_loads(Counter::Admitted as usize));
    assert!(clear_of_lean_loads(Counter::Rejected as usize));
    assert!(clear_of_lean_loads(Counter::Successes as usize));
    assert!(std::mem::offset_of!(Stripes, room) == 0);
};
