//! Idle eviction: sweeps, and the claim that takes an entry out of the map (see
//! [Idle eviction](super::Registry#idle-eviction)).

use super::*;

impl<K, C, S> Registry<K, C, S>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    C: Clock + Clone,
    S: BuildHasher,
{
    /// Removes the breakers not used for more than `older_than` that behave like
    /// new ones but for a streak of consecutive failures, which is forgotten, and
    /// are not held elsewhere (see [Idle eviction](Registry#idle-eviction));
    /// returns how many it removed. An entry goes once it has been idle for
    /// `older_than` plus the idle resolution (see [`RegistryBuilder::idle_resolution`]).
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, ManualClock, Registry};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let registry: Registry<String, _> = Registry::builder(CircuitBreaker::builder().clock(clock.clone()))
    ///     .idle_resolution(Duration::from_millis(10))
    ///     .build()?;
    /// registry.get("old-host");
    /// clock.advance(Duration::from_secs(60));
    /// registry.get("new-host");
    /// assert_eq!(registry.evict_idle(Duration::from_secs(30)), 1);
    /// assert_eq!(registry.len(), 1);
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn evict_idle(&self, older_than: Duration) -> usize {
        self.sweep(self.clock.now(), saturating_nanos(older_than))
    }

    /// Marks `entry`, which has left the map (removed or replaced), as claimed, so
    /// a lookup still holding it looks again; gives back its place unless a sweep
    /// or an eviction claimed it first (the claimer gives it back).
    pub(super) fn forget(&self, entry: &Entry<C>) {
        if let (true, Some(cap)) = (Self::claim(entry), &self.cap) {
            cap.release(1);
        }
        self.departed(&entry.breaker);
    }

    /// `breaker` has left the map: with the `metrics` feature, it publishes what
    /// it counted since the registry's last publication, if the registry
    /// publishes (see `Registry::publish_metrics`).
    pub(super) fn departed(&self, breaker: &CircuitBreaker<C>) {
        #[cfg(feature = "metrics")]
        self.publish_departed(breaker);
        #[cfg(not(feature = "metrics"))]
        let _ = breaker;
    }

    /// Marks `entry`, which has left the map, as claimed (as [`forget`] does) and
    /// says whether this thread claimed it, and so holds its place, which the caller
    /// then gives back or hands on; `false` if a sweep or an eviction claimed it
    /// first (the claimer gives it back).
    ///
    /// [`forget`]: Self::forget
    pub(super) fn claim(entry: &Entry<C>) -> bool {
        // Relaxed: see the module's Orderings.
        entry.last_used.swap(EVICTED, Ordering::Relaxed) != EVICTED
    }

    /// Sweeps if automatic eviction is on and the last sweep is old enough.
    pub(super) fn maybe_sweep(&self, now: u64) {
        let Some(after) = self.idle_after else {
            return;
        };
        // Relaxed: a timestamp; the CAS below picks one sweeper and orders nothing.
        let last = self.last_sweep.load(Ordering::Relaxed);
        if now.saturating_sub(last) >= after
            && self
                .last_sweep
                // Relaxed: as above.
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            self.sweep(now, after);
        }
    }

    /// How far behind a reading an entry's timestamp must be for the entry to be
    /// unused for `older_than`: the timestamp lags the last use by less than the
    /// resolution. The one rule of sweeps and of evictions at the cap.
    pub(super) fn idle_limit(&self, older_than: u64) -> u64 {
        older_than.saturating_add(self.resolution)
    }

    pub(super) fn sweep(&self, now: u64, older_than: u64) -> usize {
        let limit = self.idle_limit(older_than);
        let mut evicted = Vec::new();
        self.map.pin().retain(|_, entry| {
            // Relaxed: see the module's Orderings.
            let seen = entry.last_used.load(Ordering::Relaxed);
            // Claimed by an earlier sweep whose removal a lookup is finishing.
            if seen == EVICTED {
                return false;
            }
            let evict = now.saturating_sub(seen) >= limit
                && Arc::strong_count(&entry.breaker) == 1
                && idle_forgettable(&entry.breaker)
                // The claim: fails if a lookup wrote the word since it was read.
                // Relaxed: see the module's Orderings.
                && entry
                    .last_used
                    .compare_exchange(seen, EVICTED, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok();
            if evict {
                evicted.push(entry.breaker.clone());
            }
            !evict
        });
        // The claimed entries have left the map: their places go back, before
        // the breakers publish (a metrics recorder that panics costs no place).
        if let Some(cap) = &self.cap {
            cap.release(evicted.len());
        }
        for breaker in &evicted {
            self.departed(breaker);
        }
        evicted.len()
    }
}
