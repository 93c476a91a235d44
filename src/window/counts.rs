//! The window's totals, as a breaker reports them.

/// Call counts over the sliding window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WindowCounts {
    /// Calls with a success or failure outcome, and dropped calls counted as slow
    /// or failed (see [`Dropped`](crate::Dropped)).
    pub calls: u64,
    /// Of those, failures.
    pub failures: u64,
    /// Of those, calls slower than the slow-call threshold.
    pub slow: u64,
}

impl WindowCounts {
    /// Counts of `calls`, of which `failures` failed and `slow` were slow (to build
    /// a [`SavedWindow`](crate::SavedWindow), or to compare with a breaker's).
    ///
    /// # Examples
    /// ```
    /// let c = cutout::WindowCounts::new(4, 1, 2);
    /// assert_eq!((c.calls, c.failure_rate(), c.slow_call_rate()), (4, 0.25, 0.5));
    /// ```
    pub const fn new(calls: u64, failures: u64, slow: u64) -> WindowCounts {
        WindowCounts {
            calls,
            failures,
            slow,
        }
    }

    /// `failures / calls`, or 0 with no calls.
    pub fn failure_rate(&self) -> f64 {
        ratio(self.failures, self.calls)
    }

    /// `slow / calls`, or 0 with no calls.
    pub fn slow_call_rate(&self) -> f64 {
        ratio(self.slow, self.calls)
    }

    /// Adds `other`'s counts, saturating: stripes' counts never sum past `u64`
    /// in use, but a restored state's need not be real (a `SavedState` from
    /// anywhere).
    pub(crate) fn add(&mut self, other: WindowCounts) {
        self.calls = self.calls.saturating_add(other.calls);
        self.failures = self.failures.saturating_add(other.failures);
        self.slow = self.slow.saturating_add(other.slow);
    }
}

fn ratio(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}
