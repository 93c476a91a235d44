//! Striped counters: the memory behind the lifetime counters and the sliding window.
//!
//! A breaker has `owned + 1` stripes, each on its own cache lines. Stripe `i <
//! owned` belongs to the thread holding slot `i` (see [`crate::slot`]): that thread is
//! its only writer and updates it with a plain load and store, no locked
//! instruction. The last stripe is shared by every thread whose slot is beyond
//! `owned`, and is updated with atomic read-modify-writes. Readers (metrics, the trip
//! check) sum every stripe.
//!
//! A stripe holds [`COUNTERS`] lifetime counters followed by the window's buckets
//! (see [`crate::window`]), four words each.
//!
//! # Orderings
//! Counter updates are `Relaxed`: a counter publishes nothing but its own value, and
//! a reader's sum is a snapshot that may miss updates still in flight.

use crate::slot;
use crate::sync::{AtomicU64, Ordering};
use crossbeam_utils::CachePadded;

/// Words in one padded line.
const LINE_WORDS: usize = 16;
type Line = CachePadded<[AtomicU64; LINE_WORDS]>;

/// The lifetime counters, one word each at the start of every stripe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Counter {
    Admitted,
    Rejected,
    Successes,
    Failures,
    Slow,
    Ignored,
    Stale,
    Dropped,
}

/// How many lifetime counters a stripe starts with.
pub(crate) const COUNTERS: usize = 8;

/// Where this thread writes: a stripe and whether it owns it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StripeRef {
    first_line: usize,
    owned: bool,
}

pub(crate) struct Stripes {
    lines: Box<[Line]>,
    lines_per_stripe: usize,
    owned: usize,
}

/// Owned stripes per breaker: twice the parallelism, within 2..=64, read once per
/// process (`available_parallelism` is a system call).
fn owned_stripes() -> usize {
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

impl Stripes {
    /// Stripes with room for the counters and `extra_words` more words each.
    pub(crate) fn new(extra_words: usize) -> Stripes {
        let owned = owned_stripes();
        let lines_per_stripe = (COUNTERS + extra_words).div_ceil(LINE_WORDS);
        let lines = (0..(owned + 1) * lines_per_stripe)
            .map(|_| CachePadded::new(std::array::from_fn(|_| AtomicU64::new(0))))
            .collect();
        Stripes {
            lines,
            lines_per_stripe,
            owned,
        }
    }

    /// The stripe the calling thread writes.
    #[inline]
    pub(crate) fn mine(&self) -> StripeRef {
        let slot = slot::current();
        let owned = slot < self.owned;
        let stripe = if owned { slot } else { self.owned };
        StripeRef {
            first_line: stripe * self.lines_per_stripe,
            owned,
        }
    }

    /// Word `w` of a stripe.
    #[inline]
    pub(crate) fn word(&self, r: StripeRef, w: usize) -> &AtomicU64 {
        &self.lines[r.first_line + w / LINE_WORDS][w % LINE_WORDS]
    }

    /// Every stripe, for readers.
    pub(crate) fn all(&self) -> impl Iterator<Item = StripeRef> + '_ {
        (0..=self.owned).map(move |s| StripeRef {
            first_line: s * self.lines_per_stripe,
            owned: s < self.owned,
        })
    }

    /// Adds `n` to word `w` of the calling thread's stripe.
    #[inline]
    pub(crate) fn add(&self, r: StripeRef, w: usize, n: u64) {
        let word = self.word(r, w);
        if r.owned {
            // Relaxed: this thread is the stripe's only writer, so a plain load and
            // store cannot lose an update; readers only sum.
            word.store(
                word.load(Ordering::Relaxed).wrapping_add(n),
                Ordering::Relaxed,
            );
        } else {
            // Relaxed: the counter publishes nothing but itself.
            word.fetch_add(n, Ordering::Relaxed);
        }
    }

    #[inline]
    pub(crate) fn bump(&self, r: StripeRef, counter: Counter) {
        self.add(r, counter as usize, 1);
    }

    /// The sum of one counter over every stripe.
    pub(crate) fn total(&self, counter: Counter) -> u64 {
        self.all()
            // Relaxed: a snapshot; see the module's Orderings.
            .map(|r| self.word(r, counter as usize).load(Ordering::Relaxed))
            .fold(0, u64::wrapping_add)
    }

    pub(crate) fn is_owned(r: StripeRef) -> bool {
        r.owned
    }

    /// Heap bytes held.
    pub(crate) fn heap_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.lines)
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
                        stripes.bump(stripes.mine(), Counter::Successes);
                    }
                });
            }
        });
        assert_eq!(stripes.total(Counter::Successes), 80_000);
        assert_eq!(stripes.total(Counter::Failures), 0);
    }

    #[test]
    fn words_beyond_the_counters_spill_into_further_lines() {
        let stripes = Stripes::new(40);
        assert_eq!(stripes.lines_per_stripe, 3);
        let r = stripes.mine();
        stripes.add(r, 47, 5);
        assert_eq!(stripes.word(r, 47).load(Ordering::Relaxed), 5);
        assert_eq!(
            stripes.heap_bytes(),
            (stripes.owned + 1) * 3 * std::mem::size_of::<Line>()
        );
    }
}
