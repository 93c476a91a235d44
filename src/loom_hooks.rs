//! Internal access for the loom models of the sliding window
//! (`loom-tests/tests/window.rs`) and of a stripe's first writer
//! (`loom-tests/tests/stripes.rs`). Exists only under `--cfg cutout_loom`; not part
//! of the API.

use crate::state::{Snapshot, StateWord, TimeSlot};
use crate::stripe::Stripes;
use crate::window::WindowCounts;
use crate::window::{Sample, Window};

/// Whether breakers built from now on, in this process, allocate each stripe with
/// its first writer (`true`, as outside loom) or all of them when built (`false`,
/// the default under loom, which keeps the other models' interleavings few). Call it
/// before `loom::model`; every test in the same test binary must ask the same.
pub fn lazy_stripes(lazy: bool) {
    crate::sync::set_lazy_stripes(lazy);
}

/// A bare sliding window and its stripes, driven with explicit times, and the
/// state word of the breaker it belongs to: a closed phase, moved on only by
/// [`WindowModel::close_again`].
pub struct WindowModel {
    window: Window,
    stripes: Stripes,
    word: StateWord,
    slot: TimeSlot,
}

impl std::fmt::Debug for WindowModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WindowModel")
            .field("window", &self.window)
            .finish_non_exhaustive()
    }
}

impl WindowModel {
    /// `buckets` buckets of `bucket_nanos` each.
    pub fn new(buckets: u32, bucket_nanos: u64) -> WindowModel {
        let window = Window::new(
            crate::config::WindowConfig {
                bucket_nanos,
                buckets,
            },
            0,
        );
        let stripes = Stripes::new(window.buckets());
        let phase = Snapshot::closed(0);
        WindowModel {
            window,
            stripes,
            word: StateWord::at(phase),
            slot: TimeSlot::starting(phase, 0),
        }
    }

    /// Moves the breaker on to a closed phase of `generation`, one transition
    /// at a time (as a trip, its cooldown and its probes would), so outcomes of
    /// the phases before it are stale.
    pub fn close_again(&self, generation: u32) {
        // As the word holds it (3 bits wide with tiny generations).
        let generation = Snapshot::closed(generation).generation();
        loop {
            let seen = self.word.load();
            if seen.generation() == generation {
                return;
            }
            let next = Snapshot::closed(seen.generation().wrapping_add(1));
            let _ = self
                .word
                .transition(&self.slot, seen, false, |_| Some((next, 0)));
        }
    }

    /// Records one outcome at `nanos` for a call admitted in `generation`'s closed
    /// phase (stale if the breaker has moved on since): in the stripe every
    /// unowned thread shares when `shared`, else in the calling thread's own
    /// stripe (or the shared one if it owns none). Returns whether it was counted.
    pub fn record(&self, shared: bool, generation: u32, nanos: u64, failed: bool) -> bool {
        let r = if shared {
            self.stripes.stripe(0)
        } else {
            self.stripes.mine()
        };
        let sample = Sample {
            failed,
            slow: false,
        };
        let phase = Snapshot::closed(generation);
        self.window
            .record(&self.stripes, r, (phase, &self.word), nanos, sample)
            .is_some()
    }

    /// The window's counts for `generation` at `nanos`.
    pub fn counts(&self, generation: u32, nanos: u64) -> WindowCounts {
        self.window.counts(&self.stripes, generation, nanos)
    }
}
