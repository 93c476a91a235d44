//! [`Registry`]: one breaker per dependency, created on first use from a shared
//! builder (the `registry` feature, on by default).
//!
//! The map's choice, the cost of idle tracking and the eviction rule are documented
//! on [`Registry`].
//!
//! # Orderings
//! The last-sweep time and the entry ids are `Relaxed`: they order no other memory.
//! An entry's last-used word is `Relaxed` too, but it is also the eviction protocol's
//! one shared word: a sweep claims an entry by a compare-and-swap from the idle
//! timestamp it read to [`EVICTED`], and a lookup that finds the timestamp stale
//! writes it with `fetch_max`. Both are read-modify-writes of one word, so one of
//! the two sees the other, whatever the ordering: the claim fails, or the lookup
//! sees the claim and looks again. The map orders its own contents.
//!
//! With a key cap, the count of held places (entries plus inserts in progress) is
//! taken with an `Acquire` read-modify-write and given back with `Release`, after
//! the entry has left the map: an insert that takes a freed place comes after that
//! removal, so the map never holds more entries than the count. `restore_all` hands
//! a replaced entry's place to its restored breaker without giving it back: one
//! thread removes the one and inserts the other, in that order, so it needs no
//! ordering of its own. The overflow counters and the scan gate are `Relaxed`:
//! statistics and a hint that orders no other memory (the claim on each entry still
//! decides every eviction).

use crate::clock::{Clock, DefaultClock};
use crate::config::{Builder, Listener, Parts};
use crate::event::Transition;
#[cfg(any(feature = "reqwest", feature = "http"))]
use crate::permit::OwnedPermit;
use crate::permit::{Outcome, Permit, Ticket};
use crate::sync::{AtomicU64, AtomicUsize, Ordering};
use crate::util::saturating_nanos;
use crate::{CircuitBreaker, ConfigError, Error, Rejected, SavedState, State};
use papaya::{HashMapRef, LocalGuard};
use std::borrow::{Borrow, Cow};
use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasher, Hash};

/// The default hasher of a [`Registry`]'s keys: foldhash's fast, randomly seeded
/// hasher (see [Hashing](Registry#hashing)).
type RandomState = foldhash::fast::RandomState;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

mod builder;
mod cap;
mod entry;
mod evict;
mod lookup;
mod saved;
#[cfg(all(test, not(cutout_loom)))]
mod tests;

use builder::OVERFLOW_NAME;
pub use builder::RegistryBuilder;
use cap::{Cap, Place};
use entry::{EVICTED, Entry, OVERFLOW_ID, behaves_like_new, idle_forgettable};
use saved::InitialState;

type KeyedListener<K> = Arc<dyn Fn(&K, &Transition) + Send + Sync>;
type Namer<K> = Arc<dyn Fn(&K) -> Cow<'static, str> + Send + Sync>;
type Pinned<'m, K, C, S> = HashMapRef<'m, K, Entry<C>, S, LocalGuard<'m>>;

/// Circuit breakers keyed by dependency, created on first use from one shared
/// [`Builder`], with optional per-key builders.
///
/// Keys are looked up by any borrowed form (`&str` for `String` keys); a
/// `&'static str` key is looked up as `&"name"`.
///
/// # Lookups
/// Breakers live in a [`papaya`] hash map: lookups of existing keys are lock-free
/// and write no shared memory (an epoch guard is entered on the calling thread),
/// inserts are lock-free too, and the table resizes incrementally and shrinks when
/// it is mostly empty, so a churning key set does not leave a big table behind.
/// `dashmap` takes a shard's reader lock on every lookup (a locked write to a shared
/// line); an `arc-swap`ped `HashMap` copies the whole map on every insert, which is
/// quadratic for keys that never repeat.
///
/// A hit is mostly the key's hash and the table's probe (see [Hashing](#hashing);
/// the measured costs are in `docs/PERFORMANCE.md`, from `benches/registry.rs`).
/// [`with`](Registry::with) and [`call`](Registry::call) touch no reference count;
/// [`get`](Registry::get) clones the breaker's `Arc`, a write to a line shared by
/// every thread using the key.
///
/// # Hashing
/// Keys are hashed with [foldhash](https://docs.rs/foldhash)'s
/// `foldhash::fast::RandomState` by default (the third type parameter, `S`): a
/// fast hasher, seeded at random per process and per registry, several times
/// cheaper on a short `String` key than std's SipHash-1-3 (the figures are in
/// `docs/PERFORMANCE.md`). It resists only casual collisions: a client who can
/// choose many keys and time the lookups could pick keys that collide. Where keys come from
/// requests and an attacker may choose them (a tenant id, a host name taken
/// from the request), choose SipHash, std's
/// [`RandomState`](std::hash::RandomState), with
/// [`RegistryBuilder::hasher`], and cap the keys
/// ([Keying safely](#keying-safely)):
///
/// ```
/// use cutout::{CircuitBreaker, Registry};
/// use std::hash::RandomState;
///
/// let registry: Registry<String, _, RandomState> = Registry::builder(CircuitBreaker::builder())
///     .hasher(RandomState::new()) // SipHash-1-3, keyed at random
///     .max_keys(10_000)
///     .build()?;
/// registry.get("tenant-42");
/// # Ok::<(), cutout::ConfigError>(())
/// ```
///
/// # Names
/// Each breaker is named after its key (see [`Builder::name`]): the `breaker` label
/// of its metrics and the `breaker` field of its tracing events, so keys stay apart
/// in both. [`Registry::new`] and [`Registry::builder`] name a breaker by the key's
/// `Display` (they need `K: Display`); [`Registry::builder_named`] takes a naming
/// closure for any key type, and [`RegistryBuilder::name`] replaces the closure. A
/// per-key builder ([`RegistryBuilder::configure`]) given its own name keeps it
/// (any name but `"default"`, a builder's name when none is given).
///
/// # Calls in flight
/// [`call`](Registry::call) and [`call_with`](Registry::call_with) look the key up
/// once, take a permit, run the call and record its outcome on the breaker they
/// borrowed, all under the lookup's epoch guard: no reference count is touched,
/// and the guard marks only the calling thread's own slot, so a call writes no
/// line that other threads write (the measured costs are in
/// `docs/PERFORMANCE.md`). [`with`](Registry::with) holds the guard the same way
/// while its closure runs.
///
/// The price is memory while the call runs: a breaker removed from the map
/// ([`remove`](Registry::remove), eviction, [`restore_all`](Registry::restore_all)),
/// by any thread, is freed only once every guard that could see it is gone, so
/// a long call delays freeing what leaves the registry meanwhile (an `Arc` clone
/// per call would not, but would write a line that every thread calling the key
/// writes). For calls that last, or that `.await`, take the breaker with
/// [`get`](Registry::get), which holds no guard.
///
/// A sweep does not evict a breaker with a call in flight (below, with its one
/// race); a breaker [`remove`](Registry::remove)d or replaced by
/// [`restore_all`](Registry::restore_all) while the call runs loses the outcome,
/// and [`orphaned`](Registry::orphaned) counts it.
///
/// # Idle eviction
/// Each entry keeps the time it was last used, but a lookup writes it only when it
/// has moved by at least the *idle resolution* (default 1 s): between those writes
/// the entry's line is only read, so a key shared by many threads adds no shared
/// written cache line per call, only one write per resolution period. The cost per
/// lookup is one read of the registry's clock (one load with the default clock) and
/// one load of the timestamp. Because the timestamp lags the last use by less than
/// the resolution, [`evict_idle`](Registry::evict_idle) evicts an entry only once it has been
/// unused for `older_than` plus the resolution: it never evicts a breaker used within
/// `older_than`.
///
/// Only a breaker that behaves like a new one but for its streak is evicted: idle
/// for `older_than` (plus the resolution), Closed, no call in flight (admitted and
/// not yet recorded or dropped, from its lifetime counters) and nothing in its
/// sliding window (so idle for longer than its window, or with no call in it). A
/// streak of consecutive failures, which no time ends, is forgotten with it (a
/// key whose last call failed would otherwise stay for ever); an Open, forced-open,
/// disabled or recovering breaker stays until a call or
/// [`remove`](Registry::remove) moves it. An entry whose
/// breaker is held elsewhere (an `Arc` from [`get`](Registry::get)) is never
/// evicted either, so a held breaker and the registry never disagree about a key.
///
/// A sweep claims an entry with a compare-and-swap on its last-used word, which a
/// lookup of an idle entry writes (the resolution has passed): a lookup racing the
/// sweep either makes the claim fail or sees it and creates a fresh breaker. A
/// [`call`](Registry::call) also checks for a claim after its admission is counted,
/// and [`get`](Registry::get) after its clone, for a caller stalled between its
/// lookup and that step for longer than the idle period. Checking costs no shared
/// write per call: a hit reads the clock and the last-used word, as before, plus
/// one more load of that word. The check is a load, not a fence: a sweep that read
/// the breaker's counts before such a stalled caller's admission (or clone) and
/// claims the entry after its check still evicts it. The call's outcome is then
/// counted by [`orphaned`](Registry::orphaned) (a handle from `get` keeps a breaker
/// the registry no longer holds). That takes a caller stalled for the whole idle
/// period (one idle resolution, for an eviction at the [key cap](#keying-safely),
/// whose idle period is one resolution) with its admission and check falling
/// between the sweep's read and claim of that one entry. [`with`](Registry::with)
/// makes no such check (its closure may not even call): an outcome recorded in its
/// closure on a breaker evicted so is not counted by `orphaned`.
///
/// With [`RegistryBuilder::evict_idle_after`], a lookup that creates a new entry also
/// sweeps the map when the last sweep is at least that long ago. Memory then stays
/// proportional to the keys used in the last two idle periods (and their windows),
/// however many keys have come and gone: keys that never repeat do not accumulate,
/// unless their breakers were left Open (or forced open, or disabled).
///
/// # Keying safely
/// Keys often come from requests: a host, a tenant, a route. Without a cap, a
/// burst of distinct keys within one idle period grows the registry without
/// bound (each breaker is a few hundred bytes plus a stripe per calling thread),
/// so a registry keyed by anything a client controls needs
/// [`RegistryBuilder::max_keys`]. Normalize keys before the lookup, so one
/// dependency is one key: lower-case host names, strip ports that are the
/// default, user info, query strings and fragments, and key by the route
/// *template* (`/users/{id}`), never the raw path. Key by what fails together
/// (an upstream host or pool), not by what a client sends. Keys with a per-key
/// builder ([`configure`](RegistryBuilder::configure)) count toward the cap like
/// any other.
///
/// With `max_keys(n)` the registry never holds more than `n` breakers
/// ([`len`](Registry::len)), whatever the keys and however many threads insert
/// at once: an insert reserves its place in an atomic count before it inserts
/// (and gives it back if another thread inserted the key first), and an evicted
/// or removed entry gives its place back only after it has left the map. (A key
/// whose `Hash` or `Eq` panics while an eviction removes it keeps its place, since
/// its entry may still be in the map: the cap is one place smaller for each such
/// panic.)
///
/// At the cap, a new key evicts breakers that behave like new ones (the rule of
/// [Idle eviction](#idle-eviction): Closed, nothing in flight, no streak, an empty
/// window, not held through [`get`](Registry::get)) and that have been unused for
/// at least the idle resolution (as a sweep with an `older_than` of one
/// resolution: their timestamps, which lag by up to one, are two behind), least
/// recently used first: one thread scans the entries (at most `n`), sorts those by
/// their last-used time, and claims up to `n / 32` of them (at least one) as a
/// sweep does. Evicting a breaker that behaves like a new one loses nothing but
/// its lifetime counters (with the `metrics` feature, a registry that publishes
/// publishes them first), so the batch only spares the next keys a scan. Recency
/// is as coarse as the idle resolution: breakers used within one resolution
/// period (or two, by their timestamps) are never evicted, so a burst of new keys
/// arriving faster than that overflows (a shorter
/// [`idle_resolution`](RegistryBuilder::idle_resolution) tightens it).
///
/// A new key that finds no room shares one *overflow* breaker with every other
/// such key, and [`overflowed`](Registry::overflowed) counts it. The overflow
/// breaker is built from the shared builder, named `"overflow"` (or as
/// [`overflow_name`](RegistryBuilder::overflow_name) says: choose a name no key
/// can take, so that no key shares its metric series)
/// ([`overflow`](Registry::overflow)), and published by `publish_metrics` (the
/// `metrics` feature) beside the counter. Those keys lose their isolation:
/// failures of any of them count together and can open the overflow breaker for
/// all of them, while the keys that hold a breaker keep theirs. A key is routed to
/// overflow per lookup, not for good: once a place is free, its next lookup gets a
/// breaker of its own. The keyed
/// [`on_transition`](RegistryBuilder::on_transition) listener has no key to report
/// for the overflow breaker (the shared builder's own listener still runs). So
/// that hostile keys cost bounded work, a scan that finds fewer than `n / 32`
/// breakers to evict (at least one) holds the next scan back until as many more
/// new keys have come as it fell short by, those before it going to overflow:
/// each new key at the cap costs about 32 entry visits, amortized, and a key may
/// overflow for that long after a breaker has become evictable. Scans never
/// run concurrently; a new key arriving during one goes to overflow.
///
/// # Examples
/// ```
/// use cutout::{CircuitBreaker, Registry, State};
///
/// let registry: Registry<String> =
///     Registry::new(CircuitBreaker::builder().consecutive_failures(2))?;
///
/// for _ in 0..2 {
///     let _ = registry.call("payments", || Err::<(), _>("503"));
/// }
/// assert_eq!(registry.get("payments").state(), State::Open);
/// assert_eq!(registry.get("search").state(), State::Closed); // its own breaker
/// assert_eq!(registry.len(), 2);
/// # Ok::<(), cutout::ConfigError>(())
/// ```
pub struct Registry<K, C: Clock = DefaultClock, S = RandomState> {
    map: papaya::HashMap<K, Entry<C>, S>,
    shared: Parts<C>,
    overrides: HashMap<K, Parts<C>>,
    on_transition: Option<KeyedListener<K>>,
    namer: Namer<K>,
    clock: C,
    /// The next entry's id.
    next_id: AtomicU64,
    /// Nanoseconds a last-used timestamp may lag.
    resolution: u64,
    /// Automatic sweeps: evict entries idle this long (nanoseconds).
    idle_after: Option<u64>,
    /// Clock nanoseconds of the last automatic sweep.
    last_sweep: AtomicU64,
    /// The initial state of each key created later (see `initial_state`).
    initial: Option<InitialState<K>>,
    /// The key cap, if [`RegistryBuilder::max_keys`] set one.
    cap: Option<Cap<C>>,
    /// Outcomes of calls whose breaker left the registry while they ran.
    orphaned: AtomicU64,
    /// What an integration keeps beside the registry (see
    /// [`Attachment`](crate::attach::Attachment)). Unread in a build whose
    /// integrations keep nothing per registry.
    #[allow(dead_code)]
    pub(crate) attached: crate::attach::Attachment,
}

// As a breaker's (see `CircuitBreaker`): the map and counts are atomics, an
// insert's reserved place goes back in a guard's drop, and so does the scan
// gate; the closures (naming, initial state) run before an insert, a listener
// once its transition is stored, and a metrics recorder after a place is given
// back or handed on.
impl<K, C, S> std::panic::RefUnwindSafe for Registry<K, C, S>
where
    K: std::panic::RefUnwindSafe,
    C: Clock + std::panic::RefUnwindSafe,
    S: std::panic::RefUnwindSafe,
{
}
impl<K, C, S> std::panic::UnwindSafe for Registry<K, C, S>
where
    K: std::panic::UnwindSafe + std::panic::RefUnwindSafe,
    C: Clock + std::panic::UnwindSafe + std::panic::RefUnwindSafe,
    S: std::panic::UnwindSafe,
{
}

impl<K, C> Registry<K, C>
where
    K: Hash + Eq + Clone + Send + Sync + fmt::Display + 'static,
    C: Clock + Clone,
{
    /// A registry whose breakers are all built from `builder`, each named by its
    /// key's `Display` (see [Names](Registry#names)).
    ///
    /// # Errors
    /// The [`ConfigError`] that `builder.build()` would return.
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, Registry};
    ///
    /// let bad = Registry::<&str>::new(CircuitBreaker::builder().half_open_probes(0));
    /// assert_eq!(bad.unwrap_err().field(), "half_open_probes");
    /// ```
    pub fn new(builder: Builder<C>) -> Result<Self, ConfigError> {
        Registry::builder(builder).build()
    }

    /// A [`RegistryBuilder`] for per-key builders, keyed transition events and idle
    /// eviction. Breakers are named by their key's `Display` unless
    /// [`RegistryBuilder::name`] says otherwise; for a key type without `Display`,
    /// use [`Registry::builder_named`].
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, Registry, State};
    /// use std::time::Duration;
    ///
    /// let registry = Registry::builder(CircuitBreaker::builder().consecutive_failures(5))
    ///     .configure("db".to_string(), CircuitBreaker::builder().consecutive_failures(1))
    ///     .evict_idle_after(Duration::from_secs(600))
    ///     .build()?;
    /// let _ = registry.call("db", || Err::<(), _>("timeout"));
    /// assert_eq!(registry.get("db").state(), State::Open);
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn builder(builder: Builder<C>) -> RegistryBuilder<K, C> {
        Registry::builder_named(builder, |key: &K| key.to_string())
    }
}

impl<K, C> Registry<K, C>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    C: Clock + Clone,
{
    /// A [`RegistryBuilder`] whose breakers are named by `name(key)`: for keys
    /// without `Display`, or names other than the key's (see
    /// [Names](Registry#names)).
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, Registry};
    ///
    /// #[derive(Clone, Debug, PartialEq, Eq, Hash)]
    /// struct Upstream {
    ///     host: &'static str,
    ///     port: u16,
    /// }
    ///
    /// let registry = Registry::builder_named(CircuitBreaker::builder(), |u: &Upstream| {
    ///     format!("{}:{}", u.host, u.port)
    /// })
    /// .build()?;
    /// let db = Upstream { host: "db", port: 5432 };
    /// assert_eq!(registry.get(&db).name(), "db:5432");
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn builder_named<N>(
        builder: Builder<C>,
        name: impl Fn(&K) -> N + Send + Sync + 'static,
    ) -> RegistryBuilder<K, C>
    where
        N: Into<Cow<'static, str>>,
    {
        RegistryBuilder {
            shared: builder,
            overrides: Vec::new(),
            on_transition: None,
            namer: Arc::new(move |key: &K| name(key).into()),
            idle_after: None,
            resolution: None,
            hasher: RandomState::default(),
            initial: None,
            max_keys: None,
            overflow_name: Cow::Borrowed(OVERFLOW_NAME),
        }
    }
}

impl<K, C, S> Registry<K, C, S>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    C: Clock + Clone,
    S: BuildHasher,
{
    /// A new map entry holding `breaker`, last used at `now`.
    fn entry(&self, breaker: CircuitBreaker<C>, now: u64) -> Entry<C> {
        Entry {
            breaker: Arc::new(breaker),
            last_used: AtomicU64::new(now),
            // Relaxed: a unique number; it orders nothing.
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// The configuration of `key`'s breaker from `parts`: the naming closure names
    /// every breaker, except one whose per-key builder was given a name of its own.
    fn config_of(&self, key: &K, parts: &Parts<C>) -> crate::config::Config {
        let mut config = parts.config.clone();
        if std::ptr::eq(parts, &self.shared) || config.name == crate::config::DEFAULT_NAME {
            config.name = (self.namer)(key);
        }
        config
    }

    /// A new breaker for `key` from `parts`: restored from the
    /// [`initial_state`](RegistryBuilder::initial_state) hook's state if it gives
    /// one that can be restored, else fresh.
    fn new_breaker(&self, key: &K, parts: &Parts<C>) -> CircuitBreaker<C> {
        let config = self.config_of(key, parts);
        let listener = self.listener_of(key, parts);
        let start = self
            .initial
            .as_ref()
            .and_then(|initial| initial(key))
            .and_then(|saved| saved.restoring(&config, SystemTime::now(), parts.skew).ok());
        match start {
            Some(start) => CircuitBreaker::restored(config, parts.clock.clone(), listener, &start),
            None => CircuitBreaker::from_parts(config, parts.clock.clone(), listener),
        }
    }

    /// The listener of `key`'s breaker built from `parts` (as `insert` builds it).
    fn listener_of(&self, key: &K, parts: &Parts<C>) -> Option<Listener> {
        match &self.on_transition {
            None => parts.listener.clone(),
            Some(keyed) => Some(keyed_listener(
                key.clone(),
                keyed.clone(),
                parts.listener.clone(),
            )),
        }
    }
}

/// A breaker's listener that calls the registry's keyed listener (after the shared
/// builder's own, if any, as `Builder::also_on_transition` combines them: each
/// sees the breaker's events in generation order, a transition the shared one
/// makes included).
fn keyed_listener<K: Send + Sync + 'static>(
    key: K,
    keyed: KeyedListener<K>,
    shared: Option<Listener>,
) -> Listener {
    Arc::new(move |t: &Transition| match &shared {
        // This listener's own field: its address names the combination.
        Some(shared) => crate::event::deliver_both(
            std::ptr::from_ref(&keyed) as usize,
            &**shared,
            &|t| keyed(&key, t),
            t,
        ),
        None => keyed(&key, t),
    })
}

impl<K: Hash + Eq, C: Clock, S: BuildHasher> fmt::Debug for Registry<K, C, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("len", &self.map.len())
            .field("overrides", &self.overrides.len())
            .field("resolution", &Duration::from_nanos(self.resolution))
            .field("idle_after", &self.idle_after.map(Duration::from_nanos))
            .field("max_keys", &self.cap.as_ref().map(|cap| cap.max))
            // Relaxed: a statistic.
            .field(
                "overflowed",
                &self
                    .cap
                    .as_ref()
                    .map(|cap| cap.overflowed.load(Ordering::Relaxed)),
            )
            // Relaxed: a statistic.
            .field("orphaned", &self.orphaned.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}
