//! The map's lookups and the calls made through them (see
//! [Lookups](super::Registry#lookups) and
//! [Calls in flight](super::Registry#calls-in-flight)).

use super::*;

impl<K, C, S> Registry<K, C, S>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    C: Clock + Clone,
    S: BuildHasher,
{
    /// Runs `f` with `key`'s breaker, creating it on first use. The breaker is
    /// borrowed, not cloned: no reference count is touched.
    ///
    /// The lookup's epoch guard is held while `f` runs, as in [`call`](Self::call)
    /// (see [Calls in flight](Registry#calls-in-flight)). Unlike `call`, `with`
    /// cannot count an outcome lost to the one race of
    /// [Idle eviction](Self#idle-eviction) (a caller stalled for the idle period
    /// between its lookup and its call): the outcome of a call made in `f` on a
    /// breaker evicted so is lost uncounted.
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, Registry};
    ///
    /// let registry: Registry<u16> = Registry::new(CircuitBreaker::builder())?;
    /// let permit = registry.with(&8080, |breaker| breaker.try_acquire().is_ok());
    /// assert!(permit);
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    #[inline]
    pub fn with<Q, R>(&self, key: &Q, f: impl FnOnce(&CircuitBreaker<C>) -> R) -> R
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.with_entry(key, |entry| f(&entry.breaker))
    }

    /// [`CircuitBreaker::call`] on `key`'s breaker: one lookup, no lock and no
    /// reference count.
    ///
    /// The lookup's epoch guard is held while `f` runs (see
    /// [Calls in flight](Registry#calls-in-flight)): breakers removed or evicted
    /// meanwhile, by any thread, are freed only once `f` has returned. The
    /// breaker is not evicted until its outcome is recorded.
    ///
    /// # Errors
    /// As [`CircuitBreaker::call`].
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, Registry};
    ///
    /// let registry: Registry<String> = Registry::new(CircuitBreaker::builder())?;
    /// let body = registry.call("users", || Ok::<_, std::io::Error>("ada"))?;
    /// assert_eq!(body, "ada");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn call<Q, T, E>(&self, key: &Q, f: impl FnOnce() -> Result<T, E>) -> Result<T, Error<E>>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.call_with(key, Outcome::of, f)
    }

    /// [`CircuitBreaker::call_with`] on `key`'s breaker, with one lookup, as
    /// [`call`](Self::call).
    ///
    /// # Errors
    /// As [`CircuitBreaker::call`].
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, Outcome, Registry, State};
    ///
    /// let registry: Registry<String> =
    ///     Registry::new(CircuitBreaker::builder().consecutive_failures(1))?;
    /// let not_found = |r: &Result<(), u16>| match r {
    ///     Err(404) => Outcome::Ignored,
    ///     _ => Outcome::of(r),
    /// };
    /// let _ = registry.call_with("users", not_found, || Err(404));
    /// assert_eq!(registry.get("users").state(), State::Closed);
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    #[inline]
    pub fn call_with<Q, T, E>(
        &self,
        key: &Q,
        classify: impl FnOnce(&Result<T, E>) -> Outcome,
        f: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, Error<E>>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let map = self.map.pin();
        let (ticket, entry) = self.admit(&map, key).map_err(Error::Rejected)?;
        // Records the call as dropped if `f` panics.
        let in_flight = InFlight {
            registry: self,
            entry,
            ticket: Some(ticket),
        };
        let result = f();
        let outcome = classify(&result);
        in_flight.finish(outcome);
        result.map_err(Error::Inner)
    }

    /// Admits a call on `key`'s breaker: its ticket and the entry.
    #[inline]
    fn admit<'m, Q>(
        &'m self,
        map: &'m Pinned<'_, K, C, S>,
        key: &Q,
    ) -> Result<(Ticket, &'m Entry<C>), Rejected>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        loop {
            let entry = self.live_entry(map, key);
            let ticket = entry.breaker.acquire()?;
            // A caller stalled between its lookup and its admission for longer than
            // the idle period may find its entry claimed by a sweep that counted no
            // call in flight: then the breaker is going, and the admission with it,
            // given back (a probe slot it took returns to whoever holds the breaker
            // still) before the call is admitted on the key's next breaker.
            if !entry.is_claimed() {
                return Ok((ticket, entry));
            }
            Permit::new(&*entry.breaker, ticket).record(Outcome::Ignored);
            self.finish_claim(map, key, entry);
        }
    }

    /// Records `ticket`'s outcome (`None`: dropped unrecorded) on `entry`, the
    /// breaker it was admitted on. A breaker that has left the key while the call
    /// ran (claimed: evicted, swept, removed or replaced; the guard held since the
    /// lookup keeps it allocated) loses it, and [`orphaned`](Self::orphaned)
    /// counts it; the breaker still gets the ticket back, as ignored, so that a
    /// probe slot it holds returns to whoever still holds that breaker.
    #[inline]
    fn settle(&self, entry: &Entry<C>, ticket: Ticket, outcome: Option<Outcome>) {
        let permit = Permit::new(&*entry.breaker, ticket);
        if entry.is_claimed() {
            permit.record(Outcome::Ignored);
            // Relaxed: a statistic.
            self.orphaned.fetch_add(1, Ordering::Relaxed);
            return;
        }
        match outcome {
            Some(outcome) => permit.record(outcome),
            None => drop(permit), // recorded as dropped
        }
    }

    /// `key`'s breaker, created on first use, as an `Arc` to keep: for async calls,
    /// a tower layer, or another thread. Cloning the `Arc` writes its shared
    /// reference count; on a hot synchronous path prefer [`with`](Self::with) or
    /// [`call`](Self::call). A breaker held this way is never evicted (but for
    /// the stalled caller's race of [Idle eviction](Self#idle-eviction): a caller
    /// stalled between its lookup and its clone for the idle period may get a
    /// breaker the registry has just evicted).
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, Registry};
    /// use std::sync::Arc;
    ///
    /// let registry: Registry<String> = Registry::new(CircuitBreaker::builder())?;
    /// let a = registry.get("search");
    /// let b = registry.get("search");
    /// assert!(Arc::ptr_eq(&a, &b));
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn get<Q>(&self, key: &Q) -> Arc<CircuitBreaker<C>>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let map = self.map.pin();
        loop {
            let entry = self.live_entry(&map, key);
            let breaker = entry.breaker.clone();
            // As in `admit`: a caller stalled between its lookup and this clone for
            // longer than the idle period may find its entry claimed by a sweep that
            // saw no other handle. That breaker is going: look again.
            if !entry.is_claimed() {
                return breaker;
            }
            drop(breaker);
            self.finish_claim(&map, key, entry);
        }
    }

    /// `key`'s breaker if the registry holds one, as [`get`](Self::get) gives
    /// it, without creating one: for a caller that acts on breakers in use only
    /// (a fleet's override ending). Does not count as a use, and takes no key
    /// slot (a capped registry counts no overflow).
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, Registry};
    ///
    /// let registry: Registry<String> = Registry::new(CircuitBreaker::builder())?;
    /// assert!(registry.find("search").is_none());
    /// registry.get("search");
    /// assert!(registry.find("search").is_some());
    /// assert_eq!(registry.len(), 1);
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn find<Q>(&self, key: &Q) -> Option<Arc<CircuitBreaker<C>>>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let map = self.map.pin();
        let entry = map.get(key)?;
        // Cloned, then checked, as in `get`: a claimed entry is being evicted
        // (no other handle was seen), as good as gone.
        let breaker = entry.breaker.clone();
        (!entry.is_claimed()).then_some(breaker)
    }

    /// A permit on `key`'s breaker that owns the breaker's `Arc`, for a call that
    /// outlives the lookup's guard (an async call: the reqwest middleware, the
    /// keyed tower layer). One lookup and one `Arc` clone, as [`get`](Self::get)
    /// (with its claim check), then the admission.
    #[cfg(any(feature = "reqwest", feature = "http"))]
    pub(crate) fn acquire_owned<Q>(&self, key: &Q) -> Result<OwnedPermit<C>, Rejected>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let breaker = self.get(key);
        let ticket = breaker.acquire()?;
        Ok(OwnedPermit::new(breaker, ticket))
    }

    /// Removes `key`'s breaker; the next lookup creates a fresh one. Returns the
    /// removed breaker, if there was one. Unlike eviction, this removes a breaker
    /// whatever its state; the outcome of a [`call`](Self::call) in flight on it is
    /// then lost, and counted by [`orphaned`](Self::orphaned); the removed breaker
    /// gets the call back as ignored, so a half-open probe's slot it took is
    /// free again for whoever holds that breaker (a handle from
    /// [`get`](Self::get) still records on it).
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, Registry, State};
    ///
    /// let registry: Registry<String> = Registry::new(CircuitBreaker::builder())?;
    /// registry.get("legacy").force_open();
    /// assert!(registry.remove("legacy").is_some());
    /// assert_eq!(registry.get("legacy").state(), State::Closed);
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn remove<Q>(&self, key: &Q) -> Option<Arc<CircuitBreaker<C>>>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let map = self.map.pin();
        let removed = map.remove(key)?;
        self.forget(removed);
        Some(removed.breaker.clone())
    }

    /// Calls `f` with every key and its breaker, to publish metrics. Entries added
    /// or removed meanwhile may or may not be seen. Does not count as a use.
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, Registry, State};
    ///
    /// let registry: Registry<String> = Registry::new(CircuitBreaker::builder())?;
    /// registry.get("a");
    /// registry.get("b").force_open();
    /// let mut open = Vec::new();
    /// registry.for_each(|key, breaker| {
    ///     if breaker.metrics().state == State::ForcedOpen {
    ///         open.push(key.clone());
    ///     }
    /// });
    /// assert_eq!(open, ["b"]);
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn for_each(&self, mut f: impl FnMut(&K, &CircuitBreaker<C>)) {
        for (key, entry) in self.map.pin().iter() {
            f(key, &entry.breaker);
        }
    }

    /// Outcomes lost because their breaker left the registry while the call ran: a
    /// [`call`](Self::call) or [`call_with`](Self::call_with) whose key was
    /// [`remove`](Self::remove)d or replaced by [`restore_all`](Self::restore_all)
    /// meanwhile, or evicted in the one race of [Idle eviction](Self#idle-eviction)
    /// (a caller stalled for the whole idle period, or for one idle resolution at
    /// the key cap). The breaker that left gets the call back as ignored, so that
    /// a probe slot it held returns to whoever still holds that breaker. Published
    /// by `publish_metrics` (the feature `metrics`) as
    /// `circuit_breaker_registry_orphaned_total`.
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, Registry};
    ///
    /// let registry: Registry<String> = Registry::new(CircuitBreaker::builder())?;
    /// let _ = registry.call("legacy", || {
    ///     registry.remove("legacy"); // removed while the call runs
    ///     Ok::<_, ()>(())
    /// });
    /// assert_eq!(registry.orphaned(), 1);
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn orphaned(&self) -> u64 {
        // Relaxed: a statistic.
        self.orphaned.load(Ordering::Relaxed)
    }

    /// How many breakers the registry holds: never more than
    /// [`max_keys`](RegistryBuilder::max_keys), and not counting the overflow
    /// breaker.
    ///
    /// # Examples
    /// ```
    /// let registry: cutout::Registry<u16> = cutout::Registry::new(cutout::CircuitBreaker::builder())?;
    /// registry.get(&80);
    /// assert_eq!(registry.len(), 1);
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn len(&self) -> usize {
        match &self.cap {
            None => self.map.len(),
            // The map's count is a sum of per-thread counters, which a reader
            // racing a removal and an insert can read one too high; the cap's count
            // of places is never below the entries, so it bounds the reading.
            // Acquire: as in `Cap::reserve`.
            Some(cap) => self.map.len().min(cap.held.load(Ordering::Acquire)),
        }
    }

    /// Whether the registry holds no breaker.
    ///
    /// # Examples
    /// ```
    /// let registry: cutout::Registry<u16> = cutout::Registry::new(cutout::CircuitBreaker::builder())?;
    /// assert!(registry.is_empty());
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Runs `f` with `key`'s entry, created on first use and marked as used now, while
    /// the lookup's epoch guard is held.
    #[inline]
    pub(super) fn with_entry<Q, R>(&self, key: &Q, f: impl FnOnce(&Entry<C>) -> R) -> R
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let map = self.map.pin();
        f(self.live_entry(&map, key))
    }

    /// `key`'s entry, created on first use and marked as used now; never one a
    /// sweep has claimed.
    #[inline]
    pub(super) fn live_entry<'r, Q>(&'r self, map: &'r Pinned<'_, K, C, S>, key: &Q) -> &'r Entry<C>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        loop {
            let entry = match map.get(key) {
                Some(entry) => entry,
                None => self.insert(map, key.to_owned()),
            };
            // The clock is read after the lookup: a reading older than the entry's
            // last-used word could make a stale word look fresh.
            if entry.touch(self.clock.now(), self.resolution) {
                return entry;
            }
            self.finish_claim(map, key, entry);
        }
    }

    /// Removes `entry`, which a sweep has claimed, if the sweep has not yet (both
    /// may: the second finds it gone).
    #[cold]
    #[inline(never)]
    pub(super) fn finish_claim<Q>(&self, map: &Pinned<'_, K, C, S>, key: &Q, entry: &Entry<C>)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let _ = map.remove_if(key, |_, e| e.id == entry.id);
    }

    /// A new entry for `key`, which had none; with a key cap, the overflow entry
    /// when there is no room (see [Keying safely](Registry#keying-safely)).
    #[cold]
    pub(super) fn insert<'r>(&'r self, map: &'r Pinned<'_, K, C, S>, key: K) -> &'r Entry<C> {
        let now = self.clock.now().min(EVICTED - 1);
        self.maybe_sweep(now);
        let parts = self.overrides.get(&key).unwrap_or(&self.shared);
        let Some(cap) = &self.cap else {
            let breaker = self.new_breaker(&key, parts);
            // If another thread inserted the key first, its breaker wins and ours
            // is dropped unused.
            return map.get_or_insert(key, self.entry(breaker, now));
        };
        // The place is taken before the insert, so the map never holds more
        // than `max` entries, however many threads insert at once.
        if !self.make_room(map, cap, now, true) {
            // Relaxed: a statistic.
            cap.overflowed.fetch_add(1, Ordering::Relaxed);
            return &cap.overflow;
        }
        let place = Place(Some(cap));
        let breaker = self.new_breaker(&key, parts);
        match map.try_insert(key, self.entry(breaker, now)) {
            Ok(entry) => {
                place.keep();
                entry
            }
            // Another thread inserted the key first: its breaker wins, and our
            // place goes back (`place`'s drop).
            Err(occupied) => occupied.current,
        }
    }
}

/// A call through [`Registry::call_with`] while it runs: if the call (or its
/// classifier) panics, its drop records the permit as dropped, as a [`Permit`]'s
/// drop would, on the breaker the call was admitted on.
struct InFlight<'r, K, C: Clock, S>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    C: Clock + Clone,
    S: BuildHasher,
{
    registry: &'r Registry<K, C, S>,
    /// Borrowed from the map under the caller's guard, which outlives this.
    entry: &'r Entry<C>,
    ticket: Option<Ticket>,
}

impl<K, C, S> InFlight<'_, K, C, S>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    C: Clock + Clone,
    S: BuildHasher,
{
    /// Records the call's `outcome` on the breaker it was admitted on.
    #[inline]
    fn finish(mut self, outcome: Outcome) {
        if let Some(ticket) = self.ticket.take() {
            self.registry.settle(self.entry, ticket, Some(outcome));
        }
    }
}

impl<K, C, S> Drop for InFlight<'_, K, C, S>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    C: Clock + Clone,
    S: BuildHasher,
{
    /// Only while a panic unwinds (the call's or its classifier's): records the
    /// call as dropped.
    #[inline]
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket.take() {
            self.registry.settle(self.entry, ticket, None);
        }
    }
}
