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
use crate::permit::{Outcome, Permit, Ticket};
use crate::sync::{AtomicU64, AtomicUsize, Ordering};
use crate::util::saturating_nanos;
use crate::{CircuitBreaker, ConfigError, Error, Rejected, SavedState, State};
use papaya::{HashMapRef, LocalGuard};
use std::borrow::{Borrow, Cow};
use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasher, Hash, RandomState};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// The default idle resolution: how far a last-used timestamp may lag.
const DEFAULT_RESOLUTION: Duration = Duration::from_secs(1);

type KeyedListener<K> = Arc<dyn Fn(&K, &Transition) + Send + Sync>;
type Namer<K> = Arc<dyn Fn(&K) -> Cow<'static, str> + Send + Sync>;
type Pinned<'m, K, C, S> = HashMapRef<'m, K, Entry<C>, S, LocalGuard<'m>>;

/// The last-used value of an entry a sweep has claimed: no clock reading takes it
/// (readings are capped one below), and it is the maximum, so a lookup's
/// `fetch_max` leaves it in place and sees it.
const EVICTED: u64 = u64::MAX;

/// The id of the overflow entry: the id counter never reaches it.
const OVERFLOW_ID: u64 = u64::MAX;

/// The overflow breaker's name (its `breaker` label and tracing field).
const OVERFLOW_NAME: &str = "overflow";

/// At the cap, one scan evicts up to `max_keys / SCAN_RATIO` breakers (at least
/// one), and a scan that evicts fewer lets that many fewer new keys go by before
/// the next: a scan visits at most `max_keys` entries, so each new key at the cap
/// costs about `SCAN_RATIO` entry visits, amortized, however hostile the keys.
const SCAN_RATIO: usize = 32;

/// The scan gate's bit while a scan runs (no miss count reaches it), beside the
/// number of forks the scanning process is a child of: a scan a fork left behind
/// (its thread did not come along) does not shut a child's gate for ever.
const SCANNING: u64 = 1 << 63;

/// One key's breaker and when it was last used.
struct Entry<C: Clock> {
    breaker: Arc<CircuitBreaker<C>>,
    /// Clock nanoseconds, written at most once per resolution period; [`EVICTED`]
    /// once a sweep has claimed the entry.
    last_used: AtomicU64,
    /// Unique in the registry: tells this entry from a later one for the same key.
    id: u64,
}

impl<C: Clock> Entry<C> {
    /// Marks the entry used at `now`. `false` if a sweep has claimed it: the
    /// caller must look the key up again.
    #[inline]
    fn touch(&self, now: u64, resolution: u64) -> bool {
        // Relaxed: see the module's Orderings.
        let seen = self.last_used.load(Ordering::Relaxed);
        if seen == EVICTED {
            return false;
        }
        if now.saturating_sub(seen) < resolution {
            return true;
        }
        // Relaxed: as above. `fetch_max` keeps the hint from going backwards when
        // threads that read the clock at different times race here, and is the
        // read-modify-write that a sweep's claim cannot miss.
        self.last_used
            .fetch_max(now.min(EVICTED - 1), Ordering::Relaxed)
            != EVICTED
    }

    /// Whether a sweep has claimed the entry.
    #[inline]
    fn is_claimed(&self) -> bool {
        // Relaxed: see the module's Orderings.
        self.last_used.load(Ordering::Relaxed) == EVICTED
    }
}

/// Whether `breaker` would behave exactly like a new one: Closed, no call in
/// flight, no consecutive failure, nothing in its window. (Generation, lifetime
/// counters and transition counts differ, but decide nothing.)
fn behaves_like_new<C: Clock>(breaker: &CircuitBreaker<C>) -> bool {
    if breaker.in_flight() != 0 {
        return false;
    }
    let m = breaker.metrics();
    m.state == State::Closed && m.consecutive_failures == 0 && m.window.calls == 0
}

/// The key cap ([`RegistryBuilder::max_keys`]): the places, the overflow breaker
/// and the scan gate.
struct Cap<C: Clock> {
    max: usize,
    /// Entries in the map plus places reserved by inserts in progress; never above
    /// `max`, and never below the map's entry count (a place is reserved before
    /// its insert and given back after its entry has left the map).
    held: AtomicUsize,
    /// The breaker every key without a place shares.
    overflow: Entry<C>,
    /// Lookups routed to `overflow`.
    overflowed: AtomicU64,
    /// New keys that found no free place.
    misses: AtomicU64,
    /// The `misses` count from which the next scan may run; with [`SCANNING`] set while
    /// one runs.
    next_scan: AtomicU64,
}

/// A scan at the cap while it runs: reopens the scan gate when it ends, also if a
/// key's `Hash` or `Eq` panics in it (see `Registry::evict_oldest`). A scan that
/// evicted fewer than a batch lets the difference go by before the next one; a
/// scan cut short by a panic counts as having evicted nothing.
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
struct Place<'c, C: Clock>(Option<&'c Cap<C>>);

impl<C: Clock> Place<'_, C> {
    /// The insert finished: its entry holds the place now.
    fn keep(mut self) {
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
    /// Takes a place for a new entry, if one is free.
    fn reserve(&self) -> bool {
        self.held
            // Acquire: an entry whose place this is has left the map (see the
            // module's Orderings).
            .fetch_update(Ordering::Acquire, Ordering::Relaxed, |n| {
                (n < self.max).then_some(n + 1)
            })
            .is_ok()
    }

    /// Gives back `n` places, after their entries have left the map.
    fn release(&self, n: usize) {
        if n > 0 {
            // Release: pairs with the Acquire in `reserve`.
            self.held.fetch_sub(n, Ordering::Release);
        }
    }
}

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
/// A hit is mostly the key's hash and the table's probe (std's SipHash by default;
/// a faster hasher can be set with [`RegistryBuilder::hasher`]; the measured costs
/// are in `docs/PERFORMANCE.md`, from `benches/registry.rs`).
/// [`with`](Registry::with) and [`call`](Registry::call) touch no reference count;
/// [`get`](Registry::get) clones the breaker's `Arc`, a write to a line shared by
/// every thread using the key.
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
/// [`call`](Registry::call) and [`call_with`](Registry::call_with) look the key up,
/// take a permit and let go of the map before running the call: a call holds
/// nothing that keeps other breakers alive. When it returns they look the key up
/// again and record the outcome on the same breaker (told apart from a later one
/// for the key by an id). The price is that second lookup (a hash and a probe, no
/// shared write: each lookup's epoch guard marks the calling thread's own slot).
/// The alternative, an `Arc` clone and drop per call, is fewer instructions but
/// writes a line that every thread calling the key writes, which does not stay flat
/// as threads are added; the crate's call paths write no shared line, and this
/// keeps it so. (The measured costs of both are in `docs/PERFORMANCE.md`.) A
/// sweep does not evict a breaker with a call in flight (below, with its one
/// race), so the second lookup finds it; a breaker
/// [`remove`](Registry::remove)d or replaced by
/// [`restore_all`](Registry::restore_all) meanwhile loses the outcome, and
/// [`orphaned`](Registry::orphaned) counts it.
///
/// [`with`](Registry::with) instead holds the map's epoch guard while its closure
/// runs, so the borrowed breaker, and any breaker evicted meanwhile, is freed only
/// after it returns: keep its closure short.
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
/// Only a breaker that behaves like a new one is evicted: idle for `older_than`
/// (plus the resolution), Closed, no call in flight (admitted and not yet recorded
/// or dropped, from its lifetime counters), no consecutive failure and nothing in
/// its sliding window (so idle for longer than its window, or with no call in it).
/// An Open breaker keeps its cooldown, a failing streak its count. An entry whose
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
/// proportional to the keys used in the last two idle periods, however many keys
/// have come and gone: keys that never repeat do not accumulate.
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
/// panic. One that panics when a [`call`](Registry::call)'s outcome is recorded,
/// in the key's second lookup, has the call recorded as dropped by the lookup
/// that follows the panic; if that one panics too, the outcome is lost to
/// [`orphaned`](Registry::orphaned), and the breaker keeps the call in flight, so
/// it is never evicted.)
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
/// breakers to evict lets that many more new keys go to overflow before the next
/// scan: each new key at the cap costs about 32 entry visits, amortized, and a key
/// may overflow for that long after a breaker has become evictable. Scans never
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
    /// `overflowed` and `orphaned` as `publish_metrics` last published them.
    #[cfg(feature = "metrics")]
    pub(crate) published: crate::export::metrics::Published<2>,
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
            hasher: RandomState::new(),
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
    /// Runs `f` with `key`'s breaker, creating it on first use. The breaker is
    /// borrowed, not cloned: no reference count is touched.
    ///
    /// The lookup's epoch guard is held while `f` runs, so the breaker, and every
    /// breaker evicted or removed meanwhile, is freed only after `f` returns: keep
    /// `f` short (a permit, a state read). A call that may take long belongs in
    /// [`call`](Self::call) or [`call_with`](Self::call_with), which hold nothing
    /// while it runs, and which count an outcome lost to the one race of
    /// [Idle eviction](Self#idle-eviction) (a caller stalled for the idle period
    /// between its lookup and its call), where `with` cannot: the outcome of a
    /// call made in `f` on a breaker evicted so is lost uncounted.
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

    /// [`CircuitBreaker::call`] on `key`'s breaker.
    ///
    /// No lock, guard or reference count is held while `f` runs (see
    /// [Calls in flight](Registry#calls-in-flight)), and the breaker is not evicted
    /// until its outcome is recorded.
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

    /// [`CircuitBreaker::call_with`] on `key`'s breaker, holding nothing while `f`
    /// runs, as [`call`](Self::call).
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
        let (ticket, id) = self.admit(key).map_err(Error::Rejected)?;
        // Records the call as dropped if `f` panics.
        let in_flight = InFlight {
            registry: self,
            key,
            id,
            ticket: Some(ticket),
        };
        let result = f();
        let outcome = classify(&result);
        in_flight.finish(outcome);
        result.map_err(Error::Inner)
    }

    /// Admits a call on `key`'s breaker: its ticket and the entry's id.
    fn admit<Q>(&self, key: &Q) -> Result<(Ticket, u64), Rejected>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let map = self.map.pin();
        loop {
            let entry = self.live_entry(&map, key);
            let ticket = entry.breaker.acquire()?;
            // A caller stalled between its lookup and its admission for longer than
            // the idle period may find its entry claimed by a sweep that counted no
            // call in flight: then the breaker is going, and the admission with it,
            // given back (a probe slot it took returns to whoever holds the breaker
            // still) before the call is admitted on the key's next breaker.
            if !entry.is_claimed() {
                return Ok((ticket, entry.id));
            }
            Permit::new(&*entry.breaker, ticket).record(Outcome::Ignored);
            self.finish_claim(&map, key, entry);
        }
    }

    /// Entry `id`, `key`'s breaker when the call was admitted, if it still is:
    /// `None` if it has been removed or replaced. (Looks `key` up: its `Hash` or
    /// `Eq` may panic.)
    fn admitted_on<'m, Q>(
        &'m self,
        map: &'m Pinned<'_, K, C, S>,
        key: &Q,
        id: u64,
    ) -> Option<&'m Entry<C>>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        match &self.cap {
            Some(cap) if id == OVERFLOW_ID => Some(&cap.overflow),
            _ => map.get(key).filter(|e| e.id == id),
        }
    }

    /// Records `ticket`'s outcome (`None`: dropped unrecorded) on `entry`, the
    /// breaker it was admitted on, found by [`admitted_on`](Self::admitted_on). A
    /// breaker gone from the key (`None`: removed or replaced), or going (claimed:
    /// evicted, swept, removed or replaced, and not yet out of the map), loses it,
    /// and [`orphaned`](Self::orphaned) counts it; a going breaker still gets the
    /// ticket back, as ignored, so that a probe slot it holds returns to whoever
    /// still holds that breaker.
    fn settle(&self, entry: Option<&Entry<C>>, ticket: Ticket, outcome: Option<Outcome>) {
        match entry {
            Some(entry) if !entry.is_claimed() => {
                let permit = Permit::new(&*entry.breaker, ticket);
                match outcome {
                    Some(outcome) => permit.record(outcome),
                    None => drop(permit), // recorded as dropped
                }
            }
            Some(going) => {
                Permit::new(&*going.breaker, ticket).record(Outcome::Ignored);
                self.orphan();
            }
            None => self.orphan(),
        }
    }

    /// Counts an outcome lost to the key.
    fn orphan(&self) {
        // Relaxed: a statistic.
        self.orphaned.fetch_add(1, Ordering::Relaxed);
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

    /// Removes `key`'s breaker; the next lookup creates a fresh one. Returns the
    /// removed breaker, if there was one. Unlike eviction, this removes a breaker
    /// whatever its state; the outcome of a [`call`](Self::call) in flight on it is
    /// then lost, and counted by [`orphaned`](Self::orphaned) (a handle from
    /// [`get`](Self::get) still records on it; such a call's permit is not given
    /// back to it, so a half-open probe's slot stays taken until the half-open
    /// timeout, when the next call reopens it).
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

    /// Outcomes lost because their breaker left the registry while the call ran: a
    /// [`call`](Self::call) or [`call_with`](Self::call_with) whose key was
    /// [`remove`](Self::remove)d or replaced by [`restore_all`](Self::restore_all)
    /// meanwhile, or evicted in the one race of [Idle eviction](Self#idle-eviction)
    /// (a caller stalled for the whole idle period, or for one idle resolution at
    /// the key cap); also the outcome of a call whose key's `Hash` or `Eq` panicked
    /// when it was recorded, and again when it was recorded as dropped. A breaker that has begun to leave (claimed, still in
    /// the map) when the outcome arrives gets the call back as ignored, so that a
    /// probe slot it held returns to whoever still holds that breaker. Published
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

    /// Removes the breakers not used for more than `older_than` that behave like
    /// new ones and are not held elsewhere (see [Idle eviction](Registry#idle-eviction));
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
    fn with_entry<Q, R>(&self, key: &Q, f: impl FnOnce(&Entry<C>) -> R) -> R
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
    fn live_entry<'r, Q>(&'r self, map: &'r Pinned<'_, K, C, S>, key: &Q) -> &'r Entry<C>
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
    fn finish_claim<Q>(&self, map: &Pinned<'_, K, C, S>, key: &Q, entry: &Entry<C>)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let _ = map.remove_if(key, |_, e| e.id == entry.id);
    }

    /// A new entry for `key`, which had none; with a key cap, the overflow entry
    /// when there is no room (see [Keying safely](Registry#keying-safely)).
    #[cold]
    fn insert<'r>(&'r self, map: &'r Pinned<'_, K, C, S>, key: K) -> &'r Entry<C> {
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
        if !self.make_room(map, cap, now) {
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

    /// Takes a place for a new entry, evicting the least recently used breakers
    /// that behave like new ones if the cap is reached. `false`: no room.
    fn make_room(&self, map: &Pinned<'_, K, C, S>, cap: &Cap<C>, now: u64) -> bool {
        // A few tries: the places a scan frees may be taken by other inserts.
        for _ in 0..3 {
            if cap.reserve() {
                return true;
            }
            if self.evict_lru(map, cap, now) == 0 {
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
    fn evict_lru(&self, map: &Pinned<'_, K, C, S>, cap: &Cap<C>, now: u64) -> usize {
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
            batch: (cap.max / SCAN_RATIO).max(1),
            evicted: 0,
        };
        gate.evicted = self.evict_oldest(map, cap, now, gate.batch);
        gate.evicted
    }

    /// Evicts up to `batch` breakers, least recently used first, among those
    /// unused for at least the idle resolution (their timestamps, which lag, two
    /// behind) that behave like new ones and are not held elsewhere (the sweep's
    /// rule and claim). Returns how many.
    fn evict_oldest(
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

    /// Marks `entry`, which has left the map (removed or replaced), as claimed, so
    /// a lookup still holding it looks again; gives back its place unless a sweep
    /// or an eviction claimed it first (the claimer gives it back).
    fn forget(&self, entry: &Entry<C>) {
        if let (true, Some(cap)) = (Self::claim(entry), &self.cap) {
            cap.release(1);
        }
        self.departed(&entry.breaker);
    }

    /// `breaker` has left the map: with the `metrics` feature, it publishes what
    /// it counted since the registry's last publication, if the registry
    /// publishes (see `Registry::publish_metrics`).
    fn departed(&self, breaker: &CircuitBreaker<C>) {
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
    fn claim(entry: &Entry<C>) -> bool {
        // Relaxed: see the module's Orderings.
        entry.last_used.swap(EVICTED, Ordering::Relaxed) != EVICTED
    }

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

    /// Sweeps if automatic eviction is on and the last sweep is old enough.
    fn maybe_sweep(&self, now: u64) {
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
    fn idle_limit(&self, older_than: u64) -> u64 {
        older_than.saturating_add(self.resolution)
    }

    fn sweep(&self, now: u64, older_than: u64) -> usize {
        let limit = self.idle_limit(older_than);
        let mut evicted = 0;
        self.map.pin().retain(|_, entry| {
            // Relaxed: see the module's Orderings.
            let seen = entry.last_used.load(Ordering::Relaxed);
            // Claimed by an earlier sweep whose removal a lookup is finishing.
            if seen == EVICTED {
                return false;
            }
            let evict = now.saturating_sub(seen) >= limit
                && Arc::strong_count(&entry.breaker) == 1
                && behaves_like_new(&entry.breaker)
                // The claim: fails if a lookup wrote the word since it was read.
                // Relaxed: see the module's Orderings.
                && entry
                    .last_used
                    .compare_exchange(seen, EVICTED, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok();
            if evict {
                self.departed(&entry.breaker);
                evicted += 1;
            }
            !evict
        });
        // The claimed entries have left the map: their places go back.
        if let Some(cap) = &self.cap {
            cap.release(evicted);
        }
        evicted
    }
}

/// A call through [`Registry::call_with`] while it runs: if the call panics, its
/// drop records the permit as dropped, as a [`Permit`]'s drop would. The ticket
/// stays here until the breaker to record on has been found, so that a key whose
/// `Hash` or `Eq` panics in that lookup loses no call uncounted: the drop records
/// it as dropped, or, if its own lookup panics too, counts it as orphaned (the
/// breaker then keeps the call in flight).
struct InFlight<'r, 'q, K, C: Clock, S, Q: ?Sized>
where
    K: Hash + Eq + Clone + Send + Sync + Borrow<Q> + 'static,
    C: Clock + Clone,
    S: BuildHasher,
    Q: Hash + Eq,
{
    registry: &'r Registry<K, C, S>,
    key: &'q Q,
    id: u64,
    ticket: Option<Ticket>,
}

impl<K, C, S, Q> InFlight<'_, '_, K, C, S, Q>
where
    K: Hash + Eq + Clone + Send + Sync + Borrow<Q> + 'static,
    C: Clock + Clone,
    S: BuildHasher,
    Q: Hash + Eq + ?Sized,
{
    /// Records the call's `outcome` on the breaker it was admitted on.
    fn finish(mut self, outcome: Outcome) {
        let registry = self.registry;
        let map = registry.map.pin();
        // Before the ticket leaves `self`: a panic here leaves it to the drop.
        let entry = registry.admitted_on(&map, self.key, self.id);
        if let Some(ticket) = self.ticket.take() {
            registry.settle(entry, ticket, Some(outcome));
        }
    }
}

impl<K, C, S, Q> Drop for InFlight<'_, '_, K, C, S, Q>
where
    K: Hash + Eq + Clone + Send + Sync + Borrow<Q> + 'static,
    C: Clock + Clone,
    S: BuildHasher,
    Q: Hash + Eq + ?Sized,
{
    /// Only while a panic unwinds (the call's, its classifier's, or the key's own
    /// in [`finish`](InFlight::finish)'s lookup): records the call as dropped. The
    /// lookup runs under `catch_unwind`, since a second panic escaping a drop
    /// during unwinding aborts the process; a key that panics again loses the
    /// call to [`orphaned`](Registry::orphaned).
    fn drop(&mut self) {
        let Some(ticket) = self.ticket.take() else {
            return;
        };
        let registry = self.registry;
        let map = registry.map.pin();
        let (key, id) = (self.key, self.id);
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            registry.admitted_on(&map, key, id)
        })) {
            Ok(entry) => registry.settle(entry, ticket, None),
            Err(_) => registry.orphan(),
        }
    }
}

/// A breaker's listener that calls the registry's keyed listener (after the shared
/// builder's own, if any).
fn keyed_listener<K: Send + Sync + 'static>(
    key: K,
    keyed: KeyedListener<K>,
    shared: Option<Listener>,
) -> Listener {
    Arc::new(move |t: &Transition| {
        if let Some(shared) = &shared {
            shared(t);
        }
        keyed(&key, t);
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
    shared: Builder<C>,
    overrides: Vec<(K, Builder<C>)>,
    on_transition: Option<KeyedListener<K>>,
    namer: Namer<K>,
    idle_after: Option<Duration>,
    resolution: Option<Duration>,
    hasher: S,
    initial: Option<InitialState<K>>,
    max_keys: Option<usize>,
    overflow_name: Cow<'static, str>,
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

    /// Calls `f` with the key and the event for every transition of every breaker
    /// (after the builder's own [`on_transition`](Builder::on_transition), if any).
    pub fn on_transition(mut self, f: impl Fn(&K, &Transition) + Send + Sync + 'static) -> Self {
        self.on_transition = Some(Arc::new(f));
        self
    }

    /// Evicts idle breakers automatically: a lookup that creates a new breaker
    /// first sweeps out those unused for `idle` (plus the idle resolution), at most
    /// once per `idle`. Memory then stays proportional to the keys used in the last
    /// two `idle` periods. Must be above zero.
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
    /// counted by [`Registry::overflowed`]. [`len`](Registry::len) never exceeds
    /// `n`, even with many threads inserting at once.
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

    /// Hashes keys with `hasher` (default: std's `RandomState`).
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
            #[cfg(feature = "metrics")]
            published: Default::default(),
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

// ---- save and restore ----------------------------------------------------------

type InitialState<K> = Arc<dyn Fn(&K) -> Option<SavedState> + Send + Sync>;

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
    /// [`get`](Self::get) still records on it). Returns how many it restored. Under
    /// [`max_keys`](RegistryBuilder::max_keys) a restored breaker takes the place
    /// of the key's breaker if it has one, else a place like a new key's (evicting
    /// one that behaves like new if it must); a key that finds no room is skipped
    /// and not counted.
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
            if let Some(cap) = &self.cap {
                // The key's own entry goes first, and hands its place to the
                // restored one (given back, a new key could take it first). A key
                // without one takes a new place; one that finds no room is skipped.
                let handed_on = map.remove(&key).is_some_and(Self::claim);
                if !handed_on && !self.make_room(&map, cap, used) {
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
            restored += 1;
        }
        Ok(restored)
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

#[cfg(all(test, not(cutout_loom)))]
mod tests {
    use super::*;
    use crate::ManualClock;

    fn registry(clock: &ManualClock, resolution: Duration) -> Registry<String, ManualClock> {
        Registry::builder(CircuitBreaker::builder().clock(clock.clone()))
            .idle_resolution(resolution)
            .build()
            .unwrap()
    }

    #[test]
    fn a_lookup_writes_the_timestamp_once_per_resolution() {
        let clock = ManualClock::new();
        let r = registry(&clock, Duration::from_millis(100));
        r.get("k");
        let stamp = || {
            let map = r.map.pin();
            map.get("k").unwrap().last_used.load(Ordering::Relaxed)
        };
        clock.advance(Duration::from_millis(99));
        r.get("k");
        assert_eq!(stamp(), 0, "within the resolution: not written");
        clock.advance(Duration::from_millis(1));
        r.get("k");
        assert_eq!(stamp(), 100_000_000);
    }

    #[test]
    fn eviction_never_takes_a_breaker_used_within_older_than() {
        let clock = ManualClock::new();
        let r = registry(&clock, Duration::from_millis(100));
        r.get("k"); // stamped at 0
        clock.advance(Duration::from_millis(99));
        r.get("k"); // used at 99 ms, timestamp still 0
        clock.advance(Duration::from_millis(1000));
        // Used exactly 1 s ago (1099 ms after the stale stamp): kept.
        assert_eq!(r.evict_idle(Duration::from_secs(1)), 0);
        clock.advance(Duration::from_millis(1));
        // Unused for more than 1 s: evicted.
        assert_eq!(r.evict_idle(Duration::from_secs(1)), 1);
        assert!(r.is_empty());
    }

    #[test]
    fn a_lookup_that_finds_a_claimed_entry_finishes_its_removal_and_starts_afresh() {
        let clock = ManualClock::new();
        let r = registry(&clock, Duration::from_millis(100));
        let old = r.get("k");
        old.force_open();
        // A sweep's claim, as if it had read no call in flight.
        r.map
            .pin()
            .get("k")
            .unwrap()
            .last_used
            .store(EVICTED, Ordering::Relaxed);
        let new = r.get("k");
        assert!(
            !Arc::ptr_eq(&old, &new),
            "a claimed breaker is never handed out"
        );
        assert_eq!(new.state(), State::Closed);
        assert_eq!(r.len(), 1);
        // A call that finds a claimed entry is admitted by a fresh breaker too.
        r.map
            .pin()
            .get("k")
            .unwrap()
            .last_used
            .store(EVICTED, Ordering::Relaxed);
        assert!(r.call("k", || Ok::<_, ()>(())).is_ok());
        assert_eq!(r.get("k").metrics().lifetime.successes, 1);
        assert_eq!(new.metrics().lifetime.admitted, 0);
    }

    #[test]
    fn a_clock_at_its_maximum_never_reads_as_a_claim() {
        let clock = ManualClock::new();
        let r = registry(&clock, Duration::from_millis(100));
        let b = r.get("k");
        clock.advance(Duration::MAX);
        assert!(Arc::ptr_eq(&b, &r.get("k")));
        assert_eq!(
            r.map
                .pin()
                .get("k")
                .unwrap()
                .last_used
                .load(Ordering::Relaxed),
            EVICTED - 1
        );
    }

    /// The cap's count of places equals the map's entries whenever no insert is
    /// in progress, through every way an entry leaves: eviction at the cap, idle
    /// sweeps, `remove`, `restore_all` replacing or adding, a lookup finishing a
    /// claim, and threads racing inserts.
    #[test]
    fn the_count_of_places_follows_every_insert_and_removal() {
        let clock = ManualClock::new();
        let r: Registry<String, ManualClock> =
            Registry::builder(CircuitBreaker::builder().clock(clock.clone()))
                .idle_resolution(Duration::from_millis(1))
                .max_keys(40)
                .build()
                .unwrap();
        let held = |r: &Registry<String, ManualClock>| {
            let cap = r.cap.as_ref().unwrap();
            let entries = r.map.pin().iter().count();
            assert_eq!(cap.held.load(Ordering::Relaxed), entries);
            assert!(entries <= cap.max);
            entries
        };
        for i in 0..100 {
            clock.advance(Duration::from_millis(1));
            r.get(&format!("k{i}"));
        }
        assert!(held(&r) >= 39);
        assert!(r.remove("k99").is_some());
        assert!(r.remove("k99").is_none());
        let n = held(&r);
        clock.advance(Duration::from_secs(10));
        assert_eq!(r.evict_idle(Duration::from_secs(1)), n);
        assert_eq!(held(&r), 0);
        // restore_all: adds a new key, replaces an existing one.
        r.get("k1");
        let saved = vec![
            ("k1".to_string(), r.get("k1").save()),
            ("k2".to_string(), r.get("k1").save()),
        ];
        assert_eq!(r.restore_all(saved), Ok(2));
        assert_eq!(held(&r), 2);
        // A lookup that finds a claimed entry removes it; the claimer's place
        // accounting is not disturbed (the test claims as a sweep would, then
        // gives the place back as the claimer does).
        r.map
            .pin()
            .get("k1")
            .unwrap()
            .last_used
            .store(EVICTED, Ordering::Relaxed);
        r.get("k1"); // removes the claimed entry, inserts a fresh one
        r.cap.as_ref().unwrap().release(1);
        assert_eq!(held(&r), 2);
        // Threads racing at the cap.
        std::thread::scope(|s| {
            for t in 0..4 {
                let (r, clock) = (&r, &clock);
                s.spawn(move || {
                    for i in 0..500 {
                        clock.advance(Duration::from_micros(100));
                        let _ = r.call(&format!("t{t}-{i}"), || Ok::<_, ()>(()));
                        if i % 7 == 0 {
                            r.remove(&format!("t{t}-{}", i / 2));
                        }
                    }
                });
            }
        });
        held(&r);
    }

    #[test]
    fn the_default_resolution_follows_a_short_idle_period() {
        let r: Registry<u8> = Registry::builder(CircuitBreaker::builder())
            .evict_idle_after(Duration::from_millis(400))
            .build()
            .unwrap();
        assert_eq!(r.resolution, 100_000_000);
        let r: Registry<u8> = Registry::new(CircuitBreaker::builder()).unwrap();
        assert_eq!(r.resolution, 1_000_000_000);
        assert!(format!("{r:?}").contains("len: 0"));
    }
}
