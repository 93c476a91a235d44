//! Internal access for the loom models of the sliding window
//! (`loom-tests/tests/window.rs`). Exists only under `--cfg cutout_loom`; not part of
//! the API.

use crate::event::WindowCounts;
use crate::state::{Snapshot, StateWord};
use crate::stripe::Stripes;
use crate::window::{Sample, Window};

/// A bare sliding window and its stripes, driven with explicit times.
pub struct WindowModel {
    window: Window,
    stripes: Stripes,
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
        WindowModel { window, stripes }
    }

    /// Records one outcome at `nanos` for `generation`, the current phase's: in the
    /// stripe every unowned thread shares when `shared`, else in the calling
    /// thread's own stripe (or the shared one if it owns none). Returns whether it
    /// was counted.
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
        let word = StateWord::at(phase);
        self.window
            .record(&self.stripes, r, (phase, &word), nanos, sample)
            .is_some()
    }

    /// The window's counts for `generation` at `nanos`.
    pub fn counts(&self, generation: u32, nanos: u64) -> WindowCounts {
        self.window.counts(&self.stripes, generation, nanos)
    }
}
