//! The optional push: a transition listener that wakes the sampler, so a
//! transition reaches the open streams at once instead of at the next tick.
//!
//! # Orderings
//! The listener runs on the caller's thread after the transition is made; it
//! raises `pending` and, if it was down, wakes the sampler. The sampler lowers
//! `pending` before it reads the breakers. Both are `AcqRel` swaps: the
//! sampler's swap that reads a listener's `true` also sees that listener's
//! transition, and a transition whose listener swaps after the sampler's finds
//! `pending` down and wakes it again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::Notify;

/// The least time between a pushed frame and the frame before it: a storm of
/// transitions costs the sampler at most one extra read of every breaker per gap.
pub const PUSH_GAP: Duration = Duration::from_millis(50);

/// The wake-up that every listener of one [`Source`](crate::Source) shares.
#[derive(Debug, Default)]
pub(crate) struct Push {
    pending: AtomicBool,
    wake: Notify,
}

impl Push {
    /// From a listener: one atomic swap, and a wake-up when none is pending.
    /// No allocation, no I/O; `Notify` takes its lock only while the sampler
    /// waits, once per wake-up.
    pub(crate) fn poke(&self) {
        // AcqRel: the Release half publishes the transition to the sampler's
        // swap in `clear`; see the module's Orderings.
        if !self.pending.swap(true, Ordering::AcqRel) {
            self.wake.notify_one();
        }
    }

    /// Waits for a poke (one made while nobody waited is kept).
    pub(crate) async fn poked(&self) {
        self.wake.notified().await;
    }

    /// Lowers the flag, before a sample.
    pub(crate) fn clear(&self) {
        // AcqRel: the Acquire half pairs with the Release in `poke`.
        self.pending.swap(false, Ordering::AcqRel);
    }
}
