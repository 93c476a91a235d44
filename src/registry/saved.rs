//! Save and restore: every key's breaker saved at once, restored at once, and the
//! initial state of keys created later.

use super::*;

pub(super) type InitialState<K> = Arc<dyn Fn(&K) -> Option<SavedState> + Send + Sync>;

impl<K, C, S> Registry<K, C, S>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    C: Clock + Clone,
    S: BuildHasher,
{
    /// Every key's breaker saved (see [`CircuitBreaker::save`]), at one wall-clock
    /// reading. Takes no lock and writes nothing; keys added or removed meanwhile
    /// may or may not be saved. Restore them with [`restore_all`](Self::restore_all).
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, Registry, State};
    ///
    /// let registry: Registry<String> =
    ///     Registry::new(CircuitBreaker::builder().consecutive_failures(1))?;
    /// let _ = registry.call("db", || Err::<(), _>("down"));
    /// registry.get("cache");
    /// let mut saved = registry.save_all();
    /// saved.sort_by(|a, b| a.0.cmp(&b.0));
    /// assert_eq!(saved[0].0, "cache");
    /// assert_eq!((saved[1].0.as_str(), saved[1].1.state), ("db", State::Open));
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn save_all(&self) -> Vec<(K, SavedState)> {
        self.save_all_at(SystemTime::now())
    }

    /// [`save_all`](Self::save_all) with the wall-clock time given (see
    /// [`CircuitBreaker::save_at`]).
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, Registry};
    /// use std::time::SystemTime;
    ///
    /// let registry: Registry<u16> = Registry::new(CircuitBreaker::builder())?;
    /// registry.get(&5432);
    /// let now = SystemTime::now();
    /// let saved = registry.save_all_at(now);
    /// assert_eq!(saved.len(), 1);
    /// assert!(saved[0].1.saved_at <= now);
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn save_all_at(&self, now: SystemTime) -> Vec<(K, SavedState)> {
        let mut saved = Vec::with_capacity(self.len());
        self.for_each(|key, breaker| saved.push((key.clone(), breaker.save_at(now))));
        saved
    }

    /// Builds each key's breaker from its builder (the per-key one, if
    /// [`configure`](RegistryBuilder::configure)d, else the shared one), restored
    /// from its saved state by the rules of [`Builder::restore`], and puts it in
    /// the registry, in place of the key's breaker if it has one (as with
    /// [`remove`](Self::remove), the outcome of a [`call`](Self::call) in flight on
    /// that one is lost and counted by [`orphaned`](Self::orphaned); a handle from
    /// [`get`](Self::get) still records on it, and with the `metrics` feature its
    /// series gets that outcome: see `publish_metrics`).
    /// Returns how many it restored. Under
    /// [`max_keys`](RegistryBuilder::max_keys) a restored breaker takes the place
    /// of the key's breaker if it has one, else a place like a new key's (evicting
    /// one that behaves like new if it must); a key that finds no room is skipped
    /// and not counted. States are restored in the order given: a key given twice
    /// ends with its later state, and both restores are counted.
    ///
    /// # Errors
    /// All or nothing: if any state cannot be restored, the first such key and its
    /// [`ConfigError`] are returned, and the registry is left as it was.
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, Registry, State};
    ///
    /// let old: Registry<String> =
    ///     Registry::new(CircuitBreaker::builder().consecutive_failures(1))?;
    /// let _ = old.call("db", || Err::<(), _>("down"));
    ///
    /// // After a restart:
    /// let new: Registry<String> =
    ///     Registry::new(CircuitBreaker::builder().consecutive_failures(1))?;
    /// assert_eq!(new.restore_all(old.save_all()), Ok(1));
    /// assert_eq!(new.get("db").state(), State::Open);
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn restore_all(
        &self,
        states: impl IntoIterator<Item = (K, SavedState)>,
    ) -> Result<usize, (K, ConfigError)> {
        self.restore_all_at(states, SystemTime::now())
    }

    /// [`restore_all`](Self::restore_all) with the wall-clock time of the restore
    /// given (see [`Builder::restore_at`]).
    ///
    /// # Errors
    /// As [`restore_all`](Self::restore_all).
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, Registry, SavedState, State};
    /// use std::time::{Duration, SystemTime};
    ///
    /// let registry: Registry<String> = Registry::new(CircuitBreaker::builder())?;
    /// let now = SystemTime::now();
    /// let mut saved = SavedState::new("db", State::Open, now);
    /// saved.version = 99;
    /// let (key, err) = registry.restore_all_at([("db".to_string(), saved)], now).unwrap_err();
    /// assert_eq!((key.as_str(), err.field()), ("db", "restore"));
    /// assert!(registry.is_empty(), "nothing restored");
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn restore_all_at(
        &self,
        states: impl IntoIterator<Item = (K, SavedState)>,
        now: SystemTime,
    ) -> Result<usize, (K, ConfigError)> {
        let mut built = Vec::new();
        for (key, saved) in states {
            let parts = self.overrides.get(&key).unwrap_or(&self.shared);
            match saved.restoring(&parts.config, now, parts.skew) {
                Ok(start) => {
                    let breaker = CircuitBreaker::restored(
                        self.config_of(&key, parts),
                        parts.clock.clone(),
                        self.listener_of(&key, parts),
                        &start,
                    );
                    built.push((key, breaker));
                }
                Err(e) => return Err((key, e)),
            }
        }
        let mut restored = 0;
        let map = self.map.pin();
        let used = self.clock.now().min(EVICTED - 1);
        for (key, breaker) in built {
            let mut place = None;
            let mut departed = None;
            if let Some(cap) = &self.cap {
                // The key's own entry goes first, and hands its place to the
                // restored one (given back, a new key could take it first). A key
                // without one takes a new place; one that finds no room is skipped.
                let handed_on = map.remove(&key).is_some_and(|old| {
                    departed = Some(old);
                    Self::claim(old)
                });
                if !handed_on && !self.make_room(&map, cap, used, false) {
                    continue;
                }
                place = Some(Place(Some(cap))); // given back if the insert panics
            }
            if let Some(old) = map.insert(key, self.entry(breaker, used)) {
                self.forget(old);
            }
            if let Some(place) = place {
                place.keep();
            }
            // Published once the place is the restored entry's: a metrics
            // recorder that panics costs no place (as in `sweep`).
            if let Some(old) = departed {
                self.departed(&old.breaker);
            }
            restored += 1;
        }
        Ok(restored)
    }
}

impl<K, C, S> RegistryBuilder<K, C, S>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    C: Clock + Clone,
    S: BuildHasher,
{
    /// Gives the initial state of each key created later: when a lookup creates a
    /// key's breaker, `f(key)` may return a [`SavedState`] to start it from (by the
    /// rules of [`Builder::restore`], at the wall-clock time of the lookup). A
    /// state that cannot be restored is skipped: the key starts fresh, as it does
    /// when `f` returns `None`. For a fleet, `f` reads what the other instances
    /// know; `f` runs on the lookup that creates the key, so keep it quick.
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, Registry, SavedState, State};
    /// use std::time::{Duration, SystemTime};
    ///
    /// let registry: Registry<String> = Registry::builder(CircuitBreaker::builder())
    ///     .initial_state(|key: &String| {
    ///         (key == "db").then(|| {
    ///             let now = SystemTime::now();
    ///             let mut saved = SavedState::new(key.as_str(), State::Open, now);
    ///             saved.open_until = Some(now + Duration::from_secs(30));
    ///             saved
    ///         })
    ///     })
    ///     .build()?;
    /// assert_eq!(registry.get("db").state(), State::Open);
    /// assert_eq!(registry.get("cache").state(), State::Closed);
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn initial_state(
        mut self,
        f: impl Fn(&K) -> Option<SavedState> + Send + Sync + 'static,
    ) -> Self {
        self.initial = Some(Arc::new(f));
        self
    }
}
