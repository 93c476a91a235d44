//! The key cap ([`RegistryBuilder::max_keys`]): the places, the overflow breaker,
//! and the least-recently-used eviction that makes room for a new key (see
//! [Keying safely](super::Registry#keying-safely)).

use super::*;

/// At the cap, one scan evicts up to `max_keys / SCAN_RATIO` breakers (at least
/// one), and a scan that evicts `k` fewer holds the next back until `k` more new
/// keys have come (`k - 1` go by unscanned): a scan visits at most `max_keys`
/// entries, so each new key at the cap costs about `SCAN_RATIO` entry visits,
/// amortized, however hostile the keys.
const SCAN_RATIO: usize = 32;

/// The scan gate's bit while a scan runs (no miss count reaches it), beside the
/// number of forks the scanning process is a child of: a scan a fork left behind
/// (its thread did not come along) does not shut a child's gate for ever.
const SCANNING: u64 = 1 << 63;

/// The key cap ([`RegistryBuilder::max_keys`]): the places, the overflow breaker
/// and the scan gate.
pub(super) struct Cap<C: Clock> {
    pub(super) max: usize,
    /// Entries in the map plus places reserved by inserts in progress; never above
    /// `max`, and never below the map's entry count (a place is reserved before
    /// its insert and given back after its entry has left the map).
    pub(super) held: AtomicUsize,
    /// The breaker every key without a place shares.
    pub(super) overflow: Entry<C>,
    /// Lookups routed to `overflow`.
    pub(super) overflowed: AtomicU64,
    /// New keys that found no free place.
    pub(super) misses: AtomicU64,
    /// The `misses` count from which the next scan may run; with [`SCANNING`] set while
    /// one runs.
    pub(super) next_scan: AtomicU64,
}

/// A scan at the cap while it runs: reopens the scan gate when it ends, also if a
/// key's `Hash` or `Eq` panics in it (see `Registry::evict_oldest`). A scan that
/// evicted fewer than a batch holds the next one back by the difference (in new
/// keys); a scan cut short by a panic counts as having evicted nothing.
struct ScanGate<'c, C: Clock> {
    cap: &'c Cap<C>,
    batch: usize,
    evicted: usize,
}

impl<C: Clock> Drop for ScanGate<'_, C> {
    fn drop(&mut self) {
        // Relaxed: a count that gates scans; it orders nothing.
        let misses = self.cap.misses.load(Ordering::Relaxed);
        let wait = self.batch.saturating_sub(self.evicted) as u64;
        self.cap
            .next_scan
            .store(misses.saturating_add(wait), Ordering::Relaxed);
    }
}

/// A place taken for an insert in progress: given back when dropped unkept, so an
/// insert that does not finish never holds one (another thread's entry for the
/// key won, or building the breaker panicked: a naming closure, an
/// [`initial_state`](RegistryBuilder::initial_state) hook, the key's `Hash`).
pub(super) struct Place<'c, C: Clock>(pub(super) Option<&'c Cap<C>>);

impl<C: Clock> Place<'_, C> {
    /// The insert finished: its entry holds the place now.
    pub(super) fn keep(mut self) {
        self.0 = None;
    }
}

impl<C: Clock> Drop for Place<'_, C> {
    fn drop(&mut self) {
        if let Some(cap) = self.0 {
            cap.release(1);
        }
    }
}

impl<C: Clock> Cap<C> {
    /// How many breakers one scan evicts at most.
    pub(super) fn batch(&self) -> usize {
        (self.max / SCAN_RATIO).max(1)
    }

    /// Takes a place for a new entry, if one is free.
    pub(super) fn reserve(&self) -> bool {
        self.held
            // Acquire: an entry whose place this is has left the map (see the
            // module's Orderings).
            .fetch_update(Ordering::Acquire, Ordering::Relaxed, |n| {
                (n < self.max).then_some(n + 1)
            })
            .is_ok()
    }

    /// Gives back `n` places, after their entries have left the map.
    pub(super) fn release(&self, n: usize) {
        if n > 0 {
            // Release: pairs with the Acquire in `reserve`.
            self.held.fetch_sub(n, Ordering::Release);
        }
    }
}

impl<K, C, S> Registry<K, C, S>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    C: Clock + Clone,
    S: BuildHasher,
{
    /// How many lookups found no breaker for their key and no room for one under
    /// [`max_keys`](RegistryBuilder::max_keys), and went to the overflow breaker,
    /// since the registry was built (0 without a cap). Every lookup counts: a key
    /// routed there ten times counts ten. Published by `publish_metrics` (feature
    /// `metrics`) as `circuit_breaker_registry_overflowed_total`.
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, Registry};
    ///
    /// let registry: Registry<u16> = Registry::builder(CircuitBreaker::builder())
    ///     .max_keys(1)
    ///     .build()?;
    /// let _held = registry.get(&80); // held: never evicted
    /// registry.get(&443);
    /// registry.get(&8080);
    /// assert_eq!((registry.len(), registry.overflowed()), (1, 2));
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn overflowed(&self) -> u64 {
        self.cap
            .as_ref()
            // Relaxed: a statistic.
            .map_or(0, |cap| cap.overflowed.load(Ordering::Relaxed))
    }

    /// The overflow breaker that keys without room share under
    /// [`max_keys`](RegistryBuilder::max_keys) (named `"overflow"` or as
    /// [`overflow_name`](RegistryBuilder::overflow_name) says, built from the
    /// shared builder); `None` without a cap. Not in [`for_each`](Self::for_each),
    /// [`len`](Self::len) or [`save_all`](Self::save_all).
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, Registry, State};
    ///
    /// let registry: Registry<u16> = Registry::builder(CircuitBreaker::builder())
    ///     .max_keys(100)
    ///     .build()?;
    /// assert_eq!(registry.overflow().map(|b| b.state()), Some(State::Closed));
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn overflow(&self) -> Option<&CircuitBreaker<C>> {
        self.cap.as_ref().map(|cap| &*cap.overflow.breaker)
    }

    /// Takes a place for a new entry, evicting the least recently used breakers
    /// that behave like new ones if the cap is reached: through the scan gate
    /// for a lookup, past it for `restore_all` (an explicit, rare call, whose
    /// keys must not be skipped while breakers it could evict are there).
    /// `false`: no room.
    pub(super) fn make_room(
        &self,
        map: &Pinned<'_, K, C, S>,
        cap: &Cap<C>,
        now: u64,
        gated: bool,
    ) -> bool {
        // A few tries: the places a scan frees may be taken by other inserts.
        for _ in 0..3 {
            if cap.reserve() {
                return true;
            }
            let evicted = match gated {
                true => self.evict_lru(map, cap, now),
                false => self.evict_oldest(map, cap, now, cap.batch()),
            };
            if evicted == 0 {
                return false;
            }
        }
        false
    }

    /// At the cap: scans for breakers to evict, unless the scan gate says the last
    /// scans have not yet been paid for (see `SCAN_RATIO`) or another thread is
    /// scanning. Returns how many it evicted.
    #[cold]
    #[inline(never)]
    pub(super) fn evict_lru(&self, map: &Pinned<'_, K, C, S>, cap: &Cap<C>, now: u64) -> usize {
        // Relaxed: a count that gates scans; it orders nothing.
        let miss = cap.misses.fetch_add(1, Ordering::Relaxed) + 1;
        // Relaxed: as above; the compare-and-swap picks one scanner.
        let due = cap.next_scan.load(Ordering::Relaxed);
        let scanning = SCANNING | crate::fork::forks();
        let open = match due & SCANNING {
            0 => miss >= due,
            // A scan runs here, or ran in the parent when this process forked
            // (its thread is gone, and so is the scan).
            _ => due != scanning,
        };
        if !open
            || cap
                .next_scan
                .compare_exchange(due, scanning, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return 0;
        }
        let mut gate = ScanGate {
            cap,
            batch: cap.batch(),
            evicted: 0,
        };
        gate.evicted = self.evict_oldest(map, cap, now, gate.batch);
        gate.evicted
    }

    /// Evicts up to `batch` breakers, least recently used first, among those
    /// unused for at least the idle resolution (their timestamps, which lag, two
    /// behind) that behave like new ones and are not held elsewhere (the sweep's
    /// rule and claim). Returns how many.
    pub(super) fn evict_oldest(
        &self,
        map: &Pinned<'_, K, C, S>,
        cap: &Cap<C>,
        now: u64,
        batch: usize,
    ) -> usize {
        let mut oldest: Vec<(u64, &K, &Entry<C>)> = map
            .iter()
            .filter_map(|(key, entry)| {
                // Relaxed: see the module's Orderings.
                let seen = entry.last_used.load(Ordering::Relaxed);
                // Unused for a resolution, as a sweep's `older_than` of one: a
                // lookup writes the word unless its reading is within a
                // resolution of it, and so a resolution before this one. A lookup
                // since then writes it, and the claim below fails (as in
                // `sweep`); only a caller stalled for a resolution between its
                // reading and its claim check can race it (see "Idle eviction").
                (seen != EVICTED
                    && now.saturating_sub(seen) >= self.idle_limit(self.resolution)
                    && Arc::strong_count(&entry.breaker) == 1)
                    .then_some((seen, key, entry))
            })
            .collect();
        oldest.sort_unstable_by_key(|&(seen, ..)| seen);
        let mut evicted = 0;
        for (seen, key, entry) in oldest {
            if evicted == batch {
                break;
            }
            if behaves_like_new(&entry.breaker)
                // The claim: fails if a lookup wrote the word since it was read.
                // Relaxed: see the module's Orderings.
                && entry
                    .last_used
                    .compare_exchange(seen, EVICTED, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
            {
                // Gone once this returns: removed here, or by a lookup that saw
                // the claim first. The place is given back after it, and not if
                // the key's `Hash` or `Eq` panics there: the entry may still be
                // in the map, which never holds more entries than the count (the
                // place is lost to the cap, one a panic; the scan gate reopens).
                let _ = map.remove_if(key, |_, e| e.id == entry.id);
                cap.release(1);
                self.departed(&entry.breaker);
                evicted += 1;
            }
        }
        evicted
    }
}
