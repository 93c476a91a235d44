//! [`RegistryBuilder`]: per-key builders, keyed transition events, idle eviction,
//! the key cap and the hasher.

use super::*;

/// The default idle resolution: how far a last-used timestamp may lag.
const DEFAULT_RESOLUTION: Duration = Duration::from_secs(1);

/// The overflow breaker's name (its `breaker` label and tracing field).
pub(super) const OVERFLOW_NAME: &str = "overflow";

/// Configures a [`Registry`]; start with [`Registry::builder`].
///
/// # Examples
/// ```
/// use cutout::{CircuitBreaker, Registry};
/// use std::sync::{Arc, Mutex};
/// use std::time::Duration;
///
/// let opened = Arc::new(Mutex::new(Vec::new()));
/// let log = opened.clone();
/// let registry = Registry::builder(CircuitBreaker::builder().consecutive_failures(1))
///     .on_transition(move |key: &String, t| log.lock().unwrap().push((key.clone(), t.to)))
///     .evict_idle_after(Duration::from_secs(300))
///     .build()?;
/// let _ = registry.call("billing", || Err::<(), _>("down"));
/// assert_eq!(opened.lock().unwrap()[0], ("billing".to_string(), cutout::State::Open));
/// # Ok::<(), cutout::ConfigError>(())
/// ```
#[must_use = "a builder does nothing until `build()`"]
pub struct RegistryBuilder<K, C: Clock = DefaultClock, S = RandomState> {
    pub(super) shared: Builder<C>,
    pub(super) overrides: Vec<(K, Builder<C>)>,
    pub(super) on_transition: Option<KeyedListener<K>>,
    pub(super) namer: Namer<K>,
    pub(super) idle_after: Option<Duration>,
    pub(super) resolution: Option<Duration>,
    pub(super) hasher: S,
    pub(super) initial: Option<InitialState<K>>,
    pub(super) max_keys: Option<usize>,
    pub(super) overflow_name: Cow<'static, str>,
}

impl<K, C, S> RegistryBuilder<K, C, S>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    C: Clock + Clone,
    S: BuildHasher,
{
    /// Builds `key`'s breaker from `builder` instead of the shared one. Checked by
    /// [`build`](Self::build), like the shared builder. The breaker is named by the
    /// registry's naming closure, unless `builder` was given a
    /// [`name`](Builder::name) of its own.
    pub fn configure(mut self, key: K, builder: Builder<C>) -> Self {
        self.overrides.push((key, builder));
        self
    }

    /// Calls `f` with the key and the event for every transition of every keyed
    /// breaker (after the builder's own [`on_transition`](Builder::on_transition),
    /// if any, as [`also_on_transition`](Builder::also_on_transition) adds a
    /// listener: `f` sees each key's events in generation order, one the builder's
    /// listener makes included, and a panic in the builder's listener skips `f`).
    ///
    /// The overflow breaker of a capped registry ([`max_keys`](Self::max_keys))
    /// has no key, so `f` never hears from it: the shared builder's own
    /// `on_transition` does, and [`Registry::overflow`] reads it.
    pub fn on_transition(mut self, f: impl Fn(&K, &Transition) + Send + Sync + 'static) -> Self {
        self.on_transition = Some(Arc::new(f));
        self
    }

    /// Evicts idle breakers automatically: a lookup that creates a new breaker
    /// first sweeps out those unused for `idle` (plus the idle resolution), at most
    /// once per `idle`. Memory then stays proportional to the keys used in the last
    /// two `idle` periods, but for breakers left Open, forced open, disabled or
    /// recovering (see
    /// [Idle eviction](Registry#idle-eviction)). Must be above zero.
    pub fn evict_idle_after(mut self, idle: Duration) -> Self {
        self.idle_after = Some(idle);
        self
    }

    /// How far a last-used timestamp may lag: a lookup writes an entry's timestamp
    /// at most once per `resolution`. Default: 1 s, or a quarter of
    /// [`evict_idle_after`](Self::evict_idle_after) when that is shorter. Must be
    /// above zero.
    pub fn idle_resolution(mut self, resolution: Duration) -> Self {
        self.resolution = Some(resolution);
        self
    }

    /// Holds at most `n` breakers (at least 1): for keys that come from requests
    /// (see [Keying safely](Registry#keying-safely)). At the cap, a new key evicts
    /// the least recently used breaker that behaves like a new one; if there is
    /// none, it shares one overflow breaker with every other key in that case,
    /// counted by [`Registry::overflowed`]. The overflow breaker is built from the
    /// shared builder: a [`configure`](Self::configure)d key that finds no room
    /// runs on the shared settings until it has a place.
    /// [`len`](Registry::len) never exceeds `n`, even with many threads inserting
    /// at once.
    ///
    /// Lookups of keys the registry holds cost what they cost without a cap; only
    /// a new key does more work (about 32 entry visits, amortized).
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, ManualClock, Registry};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let registry: Registry<String, _> =
    ///     Registry::builder(CircuitBreaker::builder().clock(clock.clone()).consecutive_failures(1))
    ///         .max_keys(2)
    ///         .build()?;
    /// registry.get("a");
    /// let _ = registry.call("b", || Err::<(), _>("down")); // Open: never evicted
    /// clock.advance(Duration::from_secs(2)); // "a"'s timestamp two idle resolutions old
    /// registry.get("c"); // evicts "a", the one that behaves like new
    /// assert_eq!(registry.len(), 2);
    /// registry.get("d"); // no room: shares the overflow breaker
    /// assert_eq!((registry.len(), registry.overflowed()), (2, 1));
    /// assert_eq!(registry.get("d").name(), "overflow");
    ///
    /// let zero = Registry::<String>::builder(CircuitBreaker::builder()).max_keys(0).build();
    /// assert_eq!(zero.unwrap_err().field(), "max_keys");
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn max_keys(mut self, n: usize) -> Self {
        self.max_keys = Some(n);
        self
    }

    /// Names the overflow breaker of [`max_keys`](Self::max_keys) (default
    /// `"overflow"`): its `breaker` label in metrics and its field in tracing
    /// events. Those name every key's breaker too, so a key named as the overflow
    /// breaker is (a tenant called `overflow`, or a hostile key chosen so) would
    /// share its metric series: where keys may take any name, give the overflow
    /// breaker one they cannot (say, with a character your normalized keys never
    /// contain).
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, Registry};
    ///
    /// let registry: Registry<String> = Registry::builder(CircuitBreaker::builder())
    ///     .max_keys(1)
    ///     .overflow_name("(overflow)")
    ///     .build()?;
    /// registry.get("overflow"); // a key that takes the default's name
    /// assert_eq!(registry.get("another").name(), "(overflow)");
    /// assert_eq!(registry.get("overflow").name(), "overflow");
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn overflow_name(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.overflow_name = name.into();
        self
    }

    /// Names each breaker `name(key)` instead of the default (the key's `Display`
    /// from [`Registry::builder`], or the closure given to
    /// [`Registry::builder_named`]): the `breaker` label of its metrics and field of
    /// its tracing events.
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, Registry};
    ///
    /// let registry: Registry<u16> = Registry::builder(CircuitBreaker::builder())
    ///     .name(|port: &u16| format!("upstream-{port}"))
    ///     .build()?;
    /// assert_eq!(registry.get(&8080).name(), "upstream-8080");
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn name<N>(mut self, name: impl Fn(&K) -> N + Send + Sync + 'static) -> Self
    where
        N: Into<Cow<'static, str>>,
    {
        self.namer = Arc::new(move |key: &K| name(key).into());
        self
    }

    /// Hashes keys with `hasher` (default: foldhash's fast `RandomState`); std's
    /// [`RandomState`](std::hash::RandomState) (SipHash) for keys an attacker may
    /// choose (see [Hashing](Registry#hashing)).
    pub fn hasher<S2: BuildHasher>(self, hasher: S2) -> RegistryBuilder<K, C, S2> {
        RegistryBuilder {
            shared: self.shared,
            overrides: self.overrides,
            on_transition: self.on_transition,
            namer: self.namer,
            idle_after: self.idle_after,
            resolution: self.resolution,
            hasher,
            initial: self.initial,
            max_keys: self.max_keys,
            overflow_name: self.overflow_name,
        }
    }

    /// Checks the shared builder, every per-key builder and the eviction settings,
    /// and builds the registry.
    ///
    /// # Errors
    /// The first [`ConfigError`] of the shared builder or a per-key builder, or one
    /// naming `evict_idle_after`, `idle_resolution` or `max_keys` when it is zero.
    pub fn build(self) -> Result<Registry<K, C, S>, ConfigError> {
        let shared = self.shared.into_parts()?;
        let overrides = self
            .overrides
            .into_iter()
            .map(|(key, builder)| Ok((key, builder.into_parts()?)))
            .collect::<Result<HashMap<_, _>, ConfigError>>()?;
        let idle_after = match self.idle_after {
            Some(d) if d.is_zero() => {
                return Err(ConfigError::new("evict_idle_after", "must be above zero"));
            }
            d => d,
        };
        let resolution = match self.resolution {
            Some(d) if d.is_zero() => {
                return Err(ConfigError::new("idle_resolution", "must be above zero"));
            }
            Some(d) => d,
            None => idle_after.map_or(DEFAULT_RESOLUTION, |d| DEFAULT_RESOLUTION.min(d / 4)),
        };
        let clock = shared.clock.clone();
        let now = clock.now();
        if self.max_keys.is_some() {
            // A capped registry's scan gate reads the fork count, which only
            // registered handlers keep.
            crate::fork::register();
        }
        let cap = match self.max_keys {
            Some(0) => return Err(ConfigError::new("max_keys", "must be at least 1")),
            Some(max) => Some(Cap {
                max,
                held: AtomicUsize::new(0),
                overflow: Entry {
                    breaker: Arc::new(CircuitBreaker::from_parts(
                        crate::config::Config {
                            name: self.overflow_name,
                            ..shared.config.clone()
                        },
                        shared.clock.clone(),
                        shared.listener.clone(),
                    )),
                    last_used: AtomicU64::new(now.min(EVICTED - 1)),
                    id: OVERFLOW_ID,
                },
                overflowed: AtomicU64::new(0),
                misses: AtomicU64::new(0),
                next_scan: AtomicU64::new(0),
            }),
            None => None,
        };
        Ok(Registry {
            map: papaya::HashMap::with_hasher(self.hasher),
            shared,
            overrides,
            on_transition: self.on_transition,
            namer: self.namer,
            clock,
            next_id: AtomicU64::new(0),
            resolution: saturating_nanos(resolution).max(1),
            idle_after: idle_after.map(saturating_nanos),
            last_sweep: AtomicU64::new(now),
            initial: self.initial,
            cap,
            orphaned: AtomicU64::new(0),
            attached: Default::default(),
        })
    }
}

impl<K, C: Clock, S> fmt::Debug for RegistryBuilder<K, C, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegistryBuilder")
            .field("shared", &self.shared)
            .field("overrides", &self.overrides.len())
            .field("idle_after", &self.idle_after)
            .field("resolution", &self.resolution)
            .field("max_keys", &self.max_keys)
            .finish_non_exhaustive()
    }
}
