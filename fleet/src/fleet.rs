//! The running fleet: the publisher and subscriber threads, the listeners that
//! feed the publisher, and the quorum that opens local breakers.

use crate::config::{FleetConfig, FleetError};
use crate::held::Held;
use crate::message::{
    Heartbeat, MAX_MESSAGE_BYTES, MAX_NAME_BYTES, MAX_OPEN_PER_HEARTBEAT, Message, OpenEntry,
    Report,
};
use crate::view::{Counters, FleetView, ViewState};
use crossbeam_queue::ArrayQueue;
use cutout::{
    Builder, CircuitBreaker, Clock, ConfigError, Registry, SavedState, State, Transition,
};
use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError, Weak};
use std::thread::{self, JoinHandle, Thread};
use std::time::{Duration, Instant, SystemTime};

/// What a quorum's open did to a target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Opened {
    /// The key's breaker was Closed, and is Open now.
    Yes,
    /// The key's breaker was not Closed: left alone.
    No,
    /// The key has no breaker of its own (a registry's key at its `max_keys`
    /// cap, whose lookup went to the shared overflow breaker): left alone.
    NotOwn,
}

impl Opened {
    /// Counts what it did: an open, or an open skipped.
    fn count(self, counters: &Counters) {
        match self {
            Opened::Yes => Counters::bump(&counters.quorum_opens),
            Opened::NotOwn => Counters::bump(&counters.quorum_overflow_skipped),
            Opened::No => {}
        }
    }
}

/// Something the quorum can open: a breaker, or a registry's breaker by key.
trait Target: Send + Sync {
    /// Opens `key`'s own breaker for `duration` if it is Closed.
    fn open_for(&self, key: &str, duration: Duration) -> Opened;
}

impl<C: Clock> Target for CircuitBreaker<C> {
    fn open_for(&self, _key: &str, duration: Duration) -> Opened {
        if CircuitBreaker::open_for(self, duration) {
            Opened::Yes
        } else {
            Opened::No
        }
    }
}

impl<C: Clock + Clone, S: BuildHasher + Send + Sync> Target for Registry<String, C, S> {
    fn open_for(&self, key: &str, duration: Duration) -> Opened {
        self.with(key, |b| {
            // At the cap, the lookup of a key without a place gives the overflow
            // breaker that every such key shares: the very breaker
            // `Registry::overflow` returns, so its address tells it exactly (a
            // name would not: a key may be named as the overflow breaker is).
            if self.overflow().is_some_and(|o| std::ptr::eq(o, b)) {
                return Opened::NotOwn;
            }
            Target::open_for(b, key, duration)
        })
    }
}

/// The reports a quorum rests on: (instance, generation) of each.
type ReportIds = HashSet<(String, u32)>;

/// A key a quorum reports Open: until when, and on which reports.
type Verdict = (String, SystemTime, ReportIds);

#[derive(Default)]
struct Attached {
    /// Breakers attached under their key.
    breakers: HashMap<String, Vec<Weak<dyn Target>>>,
    /// The number of keys in `breakers` at which `attach` next drops the keys
    /// whose breakers are all gone (see [`Attached::prune`]).
    prune_at: usize,
    /// Registries: every key.
    registries: Vec<Weak<dyn Target>>,
    /// Per key, the reports (instance, generation) a quorum was applied from, each
    /// kept while its peer holds it (live or not): the same reports do not open a
    /// breaker again after its own probes closed it.
    applied: HashMap<String, ReportIds>,
}

struct Inner {
    config: FleetConfig,
    client: redis::Client,
    view: FleetView,
    counters: Arc<Counters>,
    queue: ArrayQueue<Report>,
    publisher: OnceLock<Thread>,
    stop: AtomicBool,
    attached: Mutex<Attached>,
    /// Set once the first picture has been read.
    synced: (Mutex<bool>, Condvar),
}

/// A running fleet view: this instance's transitions published to Redis, its peers'
/// collected into a [`FleetView`], and a quorum that opens local breakers.
///
/// Two background threads do all the network I/O (a publisher and a subscriber);
/// a breaker's call path never waits on them: a transition only pushes onto a
/// bounded lock-free queue. Dropping the `Fleet` stops both threads and removes
/// this instance's heartbeat.
///
/// # Examples
/// ```no_run
/// use cutout::CircuitBreaker;
/// use cutout_fleet::{Fleet, FleetConfig};
///
/// let fleet = Fleet::start(FleetConfig::new("redis://127.0.0.1:6379/").namespace("shop"))?;
/// let payments = fleet.breaker("payments", CircuitBreaker::builder().consecutive_failures(5))?;
/// let _ = payments.call(|| Ok::<_, std::io::Error>(()));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Fleet {
    inner: Arc<Inner>,
    threads: Vec<JoinHandle<()>>,
}

impl Fleet {
    /// Starts the fleet's background threads and waits up to
    /// [`join_wait`](FleetConfig::join_wait) for the fleet's current picture (every
    /// live peer's heartbeat). It returns once the picture is read, or at the end
    /// of the wait, Redis reachable or not: what is missing is adopted when it
    /// arrives.
    ///
    /// # Errors
    /// [`FleetError`] for a setting out of range or a URL that does not parse.
    pub fn start(config: FleetConfig) -> Result<Fleet, FleetError> {
        let inner = Arc::new(Inner::new(config)?);
        let publisher = spawn(&inner, "cutout-fleet-publish", publish_loop)?;
        let _ = inner.publisher.set(publisher.thread().clone());
        // The fleet owns the publisher before the subscriber is spawned: if that
        // spawn fails, dropping the fleet stops and joins the publisher.
        let mut fleet = Fleet {
            inner,
            threads: vec![publisher],
        };
        let subscriber = spawn(&fleet.inner, "cutout-fleet-subscribe", subscribe_loop)?;
        fleet.threads.push(subscriber);
        fleet.wait_synced(fleet.inner.config.join_wait);
        Ok(fleet)
    }

    /// Waits up to `timeout` for the first picture of the fleet; whether it has
    /// been read.
    pub fn wait_synced(&self, timeout: Duration) -> bool {
        let (lock, cond) = &self.inner.synced;
        let guard = lock.lock().unwrap_or_else(PoisonError::into_inner);
        let (guard, _) = cond
            .wait_timeout_while(guard, timeout, |synced| !*synced)
            .unwrap_or_else(PoisonError::into_inner);
        *guard
    }

    /// This instance's id.
    pub fn instance_id(&self) -> &str {
        &self.inner.config.instance_id
    }

    /// The fleet's picture as this instance sees it.
    pub fn view(&self) -> &FleetView {
        &self.inner.view
    }

    /// A transition listener for the breaker named `key`: it only pushes the
    /// transition onto the publisher's bounded queue (dropping the oldest when
    /// full) and wakes the publisher, which takes each key's transitions in
    /// generation order (see the crate docs): give one key's listener to one
    /// breaker at a time. Give it to
    /// [`Builder::on_transition`](cutout::Builder::on_transition), or call it from
    /// your own listener.
    pub fn listener(&self, key: impl Into<String>) -> impl Fn(&Transition) + Send + Sync + 'static {
        let inner = Arc::downgrade(&self.inner);
        let key: String = key.into();
        move |t: &Transition| {
            if let Some(inner) = inner.upgrade() {
                inner.enqueue(&key, t);
            }
        }
    }

    /// A transition listener for a [`Registry`]: like [`listener`](Self::listener),
    /// with the key from the registry. Give it to
    /// [`RegistryBuilder::on_transition`](cutout::RegistryBuilder::on_transition).
    pub fn registry_listener<K: AsRef<str>>(
        &self,
    ) -> impl Fn(&K, &Transition) + Send + Sync + 'static {
        let inner = Arc::downgrade(&self.inner);
        move |key: &K, t: &Transition| {
            if let Some(inner) = inner.upgrade() {
                inner.enqueue(key.as_ref(), t);
            }
        }
    }

    /// What the fleet's current picture says `key` should start as: if a quorum
    /// of live peers reports it Open, a [`SavedState`] Open until the earliest
    /// reported deadline (at the lowest reported backoff level); otherwise
    /// `None` (start fresh). For [`Builder::restore`], or a registry's
    /// [`initial_state`](cutout::RegistryBuilder::initial_state) (see
    /// [`initial_state`](Self::initial_state)).
    pub fn saved_state(&self, key: &str) -> Option<SavedState> {
        self.inner.saved_state(key)
    }

    /// A registry's initial-state hook: each key the registry creates later
    /// starts from the fleet's picture ([`saved_state`](Self::saved_state)). Give
    /// it to [`RegistryBuilder::initial_state`](cutout::RegistryBuilder::initial_state).
    /// It takes the view's lock briefly, on the lookup that creates the key.
    pub fn initial_state<K: AsRef<str>>(
        &self,
    ) -> impl Fn(&K) -> Option<SavedState> + Send + Sync + 'static {
        let inner = Arc::downgrade(&self.inner);
        move |key: &K| inner.upgrade()?.saved_state(key.as_ref())
    }

    /// Builds a breaker named `key` that starts from the fleet's picture
    /// ([`saved_state`](Self::saved_state) through [`Builder::restore`]: Open, if
    /// a quorum of live peers reports `key` Open), publishes its transitions, and
    /// that the quorum may open: [`Builder::name`], [`Builder::on_transition`]
    /// (replacing any listener the builder had; to keep yours, call
    /// [`listener`](Self::listener) from it and use [`attach`](Self::attach)), then
    /// [`attach`](Self::attach).
    ///
    /// # Errors
    /// The builder's [`ConfigError`].
    pub fn breaker<C: Clock + Clone + 'static>(
        &self,
        key: &str,
        builder: Builder<C>,
    ) -> Result<Arc<CircuitBreaker<C>>, ConfigError> {
        let builder = builder
            .name(key.to_owned())
            .on_transition(self.listener(key));
        // A picture the builder refuses (a deadline past its clock skew
        // tolerance, say) is dropped: the breaker starts fresh, and `attach`
        // still applies the quorum.
        let restored = self
            .saved_state(key)
            .and_then(|saved| builder.clone().restore(saved).build().ok());
        let breaker = Arc::new(match restored {
            Some(b) => b,
            None => builder.build()?,
        });
        self.attach(key, &breaker);
        Ok(breaker)
    }

    /// Lets the quorum open `breaker` (held weakly) as `key`, and applies the
    /// fleet's current picture to it at once: a breaker attached while a quorum
    /// of live peers reports `key` Open opens until the earliest reported
    /// deadline.
    pub fn attach<C: Clock + 'static>(&self, key: &str, breaker: &Arc<CircuitBreaker<C>>) {
        let target: Arc<dyn Target> = breaker.clone();
        {
            let mut attached = self.inner.lock_attached();
            let list = attached.breakers.entry(key.to_owned()).or_default();
            list.retain(|w| w.strong_count() > 0);
            list.push(Arc::downgrade(&target));
            attached.prune();
        }
        if let Some(left) = self.inner.verdict_for(key) {
            Target::open_for(&**breaker, key, left).count(&self.inner.counters);
        }
    }

    /// Lets the quorum open any key of `registry` (held weakly). A key that a
    /// quorum of peers reports Open is opened, created first if this instance
    /// has not used it yet, so its first call here is rejected: bound the
    /// registry with `max_keys` if peers may report many keys. At that cap, a
    /// key that finds no place (its lookup goes to the registry's overflow
    /// breaker, which every such key shares) is not opened, and
    /// [`FleetStats::quorum_overflow_skipped`](crate::FleetStats::quorum_overflow_skipped)
    /// counts it: opening the overflow breaker would reject keys no peer
    /// reported. (That lookup counts in the registry's `overflowed`, as any
    /// does.) Applies the current picture at once.
    pub fn attach_registry<C: Clock + Clone + 'static, S: BuildHasher + Send + Sync + 'static>(
        &self,
        registry: &Arc<Registry<String, C, S>>,
    ) {
        let target: Arc<dyn Target> = registry.clone();
        self.inner
            .lock_attached()
            .registries
            .push(Arc::downgrade(&target));
        for key in self.inner.view.open_keys() {
            if let Some(left) = self.inner.verdict_for(&key) {
                target.open_for(&key, left).count(&self.inner.counters);
            }
        }
    }
}

impl std::fmt::Debug for Fleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fleet")
            .field("config", &self.inner.config)
            .field("view", &self.inner.view.stats())
            .finish_non_exhaustive()
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        self.inner.stop.store(true, Ordering::Release);
        if let Some(t) = self.inner.publisher.get() {
            t.unpark();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Attached {
    /// Drops every key whose breakers are all gone, once the keys have doubled
    /// since the last time (at least 64): a dead `Weak` keeps its breaker's whole
    /// allocation, so keys attached once and dropped would otherwise hold memory
    /// for the fleet's life. Amortized, a constant cost an attach.
    fn prune(&mut self) {
        if self.breakers.len() < self.prune_at {
            return;
        }
        self.breakers.retain(|_, list| {
            list.retain(|w| w.strong_count() > 0);
            !list.is_empty()
        });
        self.prune_at = (self.breakers.len() * 2).max(64);
    }
}

impl Inner {
    /// The fleet's shared state, before its threads start.
    fn new(config: FleetConfig) -> Result<Inner, FleetError> {
        config.validate()?;
        let client =
            redis::Client::open(config.url.as_str()).map_err(|e| FleetError::Url(e.to_string()))?;
        let counters = Arc::new(Counters::default());
        let view = FleetView::new(
            ViewState::new(
                config.instance_id.clone(),
                config.live_after,
                config.max_open,
            ),
            counters.clone(),
        );
        Ok(Inner {
            queue: ArrayQueue::new(config.queue_capacity),
            config,
            client,
            view,
            counters,
            publisher: OnceLock::new(),
            stop: AtomicBool::new(false),
            attached: Mutex::new(Attached::default()),
            synced: (Mutex::new(false), Condvar::new()),
        })
    }

    fn lock_attached(&self) -> std::sync::MutexGuard<'_, Attached> {
        // Plain data, consistent between statements: usable after a panic.
        self.attached.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn stopping(&self) -> bool {
        // Acquire: pairs with the Release in `Fleet::drop`.
        self.stop.load(Ordering::Acquire)
    }

    /// The listener's whole job: a bounded push, a wake-up. No lock, no I/O.
    fn enqueue(&self, key: &str, t: &Transition) {
        let open_until = t.open_until.map(|until| {
            let left = until.saturating_sub(t.at);
            let now = SystemTime::now();
            now.checked_add(left).unwrap_or(now)
        });
        let report = Report {
            key: key.to_owned(),
            instance: self.config.instance_id.clone(),
            generation: t.generation,
            state: t.to,
            open_until,
            level: t.level,
            reason: t.reason.as_str().to_owned(),
        };
        if self.queue.force_push(report).is_some() {
            Counters::bump(&self.counters.queue_dropped);
        }
        if let Some(publisher) = self.publisher.get() {
            publisher.unpark();
        }
    }

    fn saved_state(&self, key: &str) -> Option<SavedState> {
        let (now, wall) = (Instant::now(), SystemTime::now());
        let (until, reports) = self
            .view
            .lock()
            .verdict(key, self.config.quorum, now, wall)?;
        let mut saved = SavedState::new(key, State::Open, wall);
        saved.open_until = Some(until);
        saved.level = reports.iter().map(|r| r.level).min().unwrap_or(0);
        Some(saved)
    }

    /// How long a quorum of live peers says `key` should stay Open, if one does.
    fn verdict_for(&self, key: &str) -> Option<Duration> {
        let (now, wall) = (Instant::now(), SystemTime::now());
        let (until, _) = self
            .view
            .lock()
            .verdict(key, self.config.quorum, now, wall)?;
        until.duration_since(wall).ok()
    }

    /// Opens, for each of `keys`, the attached breakers that a quorum of live
    /// peers says should be Open, once per fresh set of reports: the reports a
    /// quorum was already applied from do not open a breaker again after its own
    /// probes closed it; a new report (a peer's new trip) does.
    fn apply_quorum(&self, keys: &[String]) {
        let (now, wall) = (Instant::now(), SystemTime::now());
        // The reports each key's quorum was applied from (taken first: the two
        // locks are never held together).
        let applied: Vec<(String, ReportIds)> = {
            let attached = self.lock_attached();
            keys.iter()
                .filter_map(|key| Some((key.clone(), attached.applied.get(key)?.clone())))
                .collect()
        };
        let (verdicts, gone): (Vec<Verdict>, Vec<(String, ReportIds)>) = {
            let view = self.view.lock();
            // Those that no peer holds any more (it reported the key Closed, or
            // restarted) are forgotten below, so a peer restarted under the same
            // id, whose fresh breaker trips at generation 1 again, makes a new
            // report. A peer whose heartbeat is only late still holds its report:
            // the same reports do not open a breaker twice.
            let gone = applied
                .into_iter()
                .filter_map(|(key, ids)| {
                    let gone: ReportIds = ids
                        .into_iter()
                        .filter(|id| !view.holds_report(&key, id))
                        .collect();
                    (!gone.is_empty()).then_some((key, gone))
                })
                .collect();
            let verdicts: Vec<Verdict> = keys
                .iter()
                .filter_map(|key| {
                    let (until, reports) = view.verdict(key, self.config.quorum, now, wall)?;
                    let ids = reports
                        .into_iter()
                        .map(|r| (r.instance, r.generation))
                        .collect();
                    Some((key.clone(), until, ids))
                })
                .collect();
            (verdicts, gone)
        };
        let mut targets: Vec<(String, Duration, Arc<dyn Target>)> = Vec::new();
        {
            let mut attached = self.lock_attached();
            for (key, gone) in gone {
                if let Some(applied) = attached.applied.get_mut(&key) {
                    applied.retain(|id| !gone.contains(id));
                    if applied.is_empty() {
                        attached.applied.remove(&key);
                    }
                }
            }
            if verdicts.is_empty() {
                return;
            }
            let registries: Vec<Arc<dyn Target>> = attached
                .registries
                .iter()
                .filter_map(Weak::upgrade)
                .collect();
            for (key, until, ids) in verdicts {
                let applied = attached.applied.entry(key.clone()).or_default();
                let fresh = ids.iter().any(|id| !applied.contains(id));
                if !fresh {
                    continue;
                }
                // Added to, not replaced: a report applied before whose peer is
                // not live now (a late heartbeat) is still one applied, and its
                // peer's return must not make it new. Bounded: each call drops
                // (`gone`, above) the ids no peer holds any more, and a peer holds
                // one report a key, so a key's set is at most one id a peer.
                applied.extend(ids);
                let Ok(left) = until.duration_since(wall) else {
                    continue;
                };
                let breakers = attached.breakers.get(&key).into_iter().flatten();
                for t in breakers
                    .filter_map(Weak::upgrade)
                    .chain(registries.iter().cloned())
                {
                    targets.push((key.clone(), left, t));
                }
            }
        }
        // Opened with no lock held: the breaker's listener runs inside. A listener
        // that panics must not stop the view (this is its subscriber thread): it
        // runs only for a transition made, so the open is counted all the same.
        // `AssertUnwindSafe`: the breaker's state is in its atomics, which a
        // panicking listener cannot leave half-written.
        for (key, left, target) in targets {
            let opened = panic::catch_unwind(AssertUnwindSafe(|| target.open_for(&key, left)));
            opened.unwrap_or(Opened::Yes).count(&self.counters);
        }
    }
}

/// The heartbeat of `instance` at `now`, encoded: of the keys it holds `open`, the
/// earliest-ending ones that fit, at most [`MAX_OPEN_PER_HEARTBEAT`] and within
/// [`MAX_MESSAGE_BYTES`] (a receiver refuses a larger message whole), saying so if
/// it holds more ([`Heartbeat::more`]), and none whose key no receiver takes (over
/// [`MAX_NAME_BYTES`]).
fn heartbeat(instance: &str, now: SystemTime, mut open: Vec<OpenEntry>) -> Vec<u8> {
    open.retain(|e| e.key.len() <= MAX_NAME_BYTES);
    open.sort_by_key(|e| e.until);
    let held = open.len();
    open.truncate(MAX_OPEN_PER_HEARTBEAT);
    loop {
        let count = open.len();
        let bytes = Message::Heartbeat(Heartbeat {
            instance: instance.to_owned(),
            sent_at: now,
            open: open.clone(),
            more: count < held,
        })
        .encode();
        if bytes.len() <= MAX_MESSAGE_BYTES || count == 0 {
            return bytes;
        }
        // Drop the latest-ending entries, about as many as the excess takes at
        // the average entry's size (at least one), and encode again.
        let excess = bytes.len() - MAX_MESSAGE_BYTES;
        let drop = (excess * count).div_ceil(bytes.len()).max(1);
        open.truncate(count.saturating_sub(drop));
    }
}

/// The instant `d` from now, or a century from now if that is further than an
/// `Instant` reaches (a setting of `Duration::MAX`: never, in effect).
fn later(d: Duration) -> Instant {
    const CENTURY: Duration = Duration::from_secs(100 * 365 * 86_400);
    let now = Instant::now();
    now.checked_add(d.min(CENTURY)).unwrap_or(now)
}

/// A reconnection backoff: from `min`, doubling to `max`, each wait jittered down
/// by up to half.
struct Backoff {
    min: Duration,
    max: Duration,
    next: Duration,
    seed: u64,
}

impl Backoff {
    fn new(min: Duration, max: Duration) -> Backoff {
        let seed = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(1, |d| d.subsec_nanos().into())
            | 1;
        Backoff {
            min,
            max,
            next: min,
            seed,
        }
    }

    fn reset(&mut self) {
        self.next = self.min;
    }

    fn wait(&mut self) -> Duration {
        // xorshift64: jitter only.
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        let half = self.next / 2;
        let jitter = half.mul_f64((self.seed % 1000) as f64 / 1000.0);
        let wait = half + jitter;
        self.next = self.next.saturating_mul(2).min(self.max);
        wait
    }
}

/// Sleeps up to `d`, waking early when the fleet stops.
fn nap(inner: &Inner, d: Duration) {
    let end = later(d);
    while !inner.stopping() {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        thread::park_timeout(left.min(Duration::from_millis(50)));
    }
}

/// A connection with the fleet's timeouts, if one can be made; its caller counts
/// a failure (once, with whatever else its attempt failed at).
fn connect(inner: &Inner) -> Option<redis::Connection> {
    let timeout = inner.config.io_timeout;
    let con = inner.client.get_connection_with_timeout(timeout).ok()?;
    let ok =
        con.set_read_timeout(Some(timeout)).is_ok() && con.set_write_timeout(Some(timeout)).is_ok();
    ok.then_some(con)
}

/// Starts one of the fleet's two background threads, named `name`, running `body`
/// on the fleet's shared state.
fn spawn(inner: &Arc<Inner>, name: &str, body: fn(&Inner)) -> Result<JoinHandle<()>, FleetError> {
    let inner = inner.clone();
    thread::Builder::new()
        .name(name.into())
        .spawn(move || body(&inner))
        .map_err(|_| FleetError::Config {
            field: "threads",
            why: "could not be spawned",
        })
}

fn publish_loop(inner: &Inner) {
    let config = &inner.config;
    let channel = config.channel();
    let hb_key = config.heartbeat_key(&config.instance_id);
    let mut con: Option<redis::Connection> = None;
    let mut backoff = Backoff::new(config.reconnect_min, config.reconnect_max);
    let mut retry_at = Instant::now();
    let mut next_heartbeat = Instant::now();
    // The keys this instance holds Open, as its own transitions said, taken in
    // generation order per key.
    let mut held = Held::new(config.max_open);
    loop {
        if inner.stopping() {
            if let Some(con) = con.as_mut() {
                let _: redis::RedisResult<()> = redis::cmd("DEL").arg(&hb_key).query(con);
            }
            return;
        }
        if con.is_none() && Instant::now() >= retry_at {
            con = connect(inner);
            match con {
                Some(_) => {
                    backoff.reset();
                    next_heartbeat = Instant::now();
                }
                None => {
                    Counters::bump(&inner.counters.redis_errors);
                    retry_at = later(backoff.wait());
                }
            }
        }
        // Transitions: each updates what the heartbeat lists, and is published
        // if Redis is there (if not, the next heartbeat carries the picture).
        while let Some(report) = inner.queue.pop() {
            // A transition older than one of its key already taken (two threads'
            // events, delivered out of order) is stale: published, it would make
            // the peers withdraw the newer one.
            if !held.take(&report, Instant::now()) {
                Counters::bump(&inner.counters.stale_dropped);
                continue;
            }
            // The heartbeat key is the picture joiners read: keep it current.
            next_heartbeat = Instant::now();
            if let Some(c) = con.as_mut() {
                let bytes = Message::Transition(report).encode();
                let sent: redis::RedisResult<i64> =
                    redis::cmd("PUBLISH").arg(&channel).arg(bytes).query(c);
                if sent.is_ok() {
                    Counters::bump(&inner.counters.published);
                } else {
                    Counters::bump(&inner.counters.redis_errors);
                    con = None;
                    retry_at = later(backoff.wait());
                }
            }
        }
        if Instant::now() >= next_heartbeat {
            let now = SystemTime::now();
            held.prune(Instant::now(), now);
            if let Some(c) = con.as_mut() {
                let bytes = heartbeat(&config.instance_id, now, held.open());
                let ttl = u64::try_from(config.live_after.as_millis()).unwrap_or(u64::MAX);
                let sent: redis::RedisResult<()> = redis::pipe()
                    .cmd("SET")
                    .arg(&hb_key)
                    .arg(&bytes)
                    .arg("PX")
                    .arg(ttl)
                    .ignore()
                    .cmd("PUBLISH")
                    .arg(&channel)
                    .arg(&bytes)
                    .ignore()
                    .query(c);
                if sent.is_ok() {
                    Counters::bump(&inner.counters.published);
                } else {
                    Counters::bump(&inner.counters.redis_errors);
                    con = None;
                    retry_at = later(backoff.wait());
                }
            }
            next_heartbeat = later(config.heartbeat_every);
        }
        let wake = if con.is_some() {
            next_heartbeat
        } else {
            retry_at.min(next_heartbeat)
        };
        if inner.queue.is_empty() {
            thread::park_timeout(wake.saturating_duration_since(Instant::now()));
        }
    }
}

fn subscribe_loop(inner: &Inner) {
    let config = &inner.config;
    let mut backoff = Backoff::new(config.reconnect_min, config.reconnect_max);
    while !inner.stopping() {
        let began = Instant::now();
        if subscribe_once(inner).is_ok() {
            return;
        }
        Counters::bump(&inner.counters.redis_errors);
        // A session that lasted resets the backoff: this is a new outage.
        if began.elapsed() > config.reconnect_max {
            backoff.reset();
        }
        let wait = backoff.wait();
        nap(inner, wait);
    }
}

/// One subscription: subscribe, read the picture, then apply messages until the
/// connection fails (`Err`) or the fleet stops (`Ok`).
fn subscribe_once(inner: &Inner) -> Result<(), ()> {
    let config = &inner.config;
    let mut sub = connect(inner).ok_or(())?;
    let mut query = connect(inner).ok_or(())?;
    // Short reads, so that a stop is seen soon.
    sub.set_read_timeout(Some(Duration::from_millis(100)))
        .map_err(|_| ())?;
    let mut pubsub = sub.as_pubsub();
    pubsub.subscribe(config.channel()).map_err(|_| ())?;
    // Subscribed first, then the picture: nothing published in between is missed.
    read_picture(inner, &mut query)?;
    drop(query);
    let (lock, cond) = &inner.synced;
    *lock.lock().unwrap_or_else(PoisonError::into_inner) = true;
    cond.notify_all();
    let mut last_tick = Instant::now();
    loop {
        if inner.stopping() {
            return Ok(());
        }
        match pubsub.get_message() {
            Ok(msg) => apply(inner, msg.get_payload_bytes()),
            Err(e) if e.is_timeout() => {}
            Err(_) => return Err(()),
        }
        if last_tick.elapsed() >= Duration::from_secs(1) {
            last_tick = Instant::now();
            inner.view.lock().prune(last_tick);
            #[cfg(feature = "metrics")]
            inner.view.record_metrics();
        }
    }
}

/// Reads every heartbeat in the namespace: the fleet's current picture.
fn read_picture(inner: &Inner, con: &mut redis::Connection) -> Result<(), ()> {
    let pattern = inner.config.heartbeat_pattern();
    let mut cursor: u64 = 0;
    let mut rounds = 0;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(200)
            .query(con)
            .map_err(|_| ())?;
        if !keys.is_empty() {
            let values: Vec<Option<Vec<u8>>> =
                redis::cmd("MGET").arg(&keys).query(con).map_err(|_| ())?;
            for bytes in values.into_iter().flatten() {
                apply(inner, &bytes);
            }
        }
        cursor = next;
        rounds += 1;
        // Bounded: a namespace holds one key per instance.
        if cursor == 0 || rounds > 1000 || inner.stopping() {
            return Ok(());
        }
    }
}

fn apply(inner: &Inner, bytes: &[u8]) {
    let changed = inner
        .view
        .lock()
        .apply(bytes, Instant::now(), SystemTime::now());
    if !changed.is_empty() {
        inner.apply_quorum(&changed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The longest waits a `FleetConfig` takes (`Duration::MAX` for a reconnection
    /// or a heartbeat) are further than an `Instant` reaches: they saturate, a
    /// century on (`Instant::now() + d` panicked in the background threads).
    #[test]
    fn the_longest_waits_saturate() {
        let year = Duration::from_secs(365 * 86_400);
        let mut backoff = Backoff::new(Duration::MAX, Duration::MAX);
        for d in [Duration::MAX, backoff.wait(), backoff.wait(), year] {
            assert!(later(d) >= Instant::now() + year.min(d / 2), "{d:?}");
        }
    }

    /// A heartbeat of 256 Open keys of the longest name every receiver takes is
    /// past `MAX_MESSAGE_BYTES`: the publisher sends the earliest-ending ones that
    /// fit (receivers refuse a larger message whole), and none whose key no
    /// receiver takes.
    #[test]
    fn a_heartbeat_sends_the_earliest_ending_keys_that_fit() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let entry = |i: usize, len: usize| OpenEntry {
            key: format!("{i:03}{}", "k".repeat(len - 3)),
            until: now + Duration::from_secs(1 + i as u64),
            generation: 1,
            level: 0,
            external: false,
        };
        let mut open: Vec<OpenEntry> = (0..MAX_OPEN_PER_HEARTBEAT)
            .map(|i| entry(i, MAX_NAME_BYTES))
            .collect();
        open.push(entry(0, MAX_NAME_BYTES + 1));
        let bytes = heartbeat("a", now, open.clone());
        assert!(bytes.len() <= MAX_MESSAGE_BYTES, "{} bytes", bytes.len());
        let Ok(Message::Heartbeat(sent)) = Message::decode(&bytes, now, Duration::MAX) else {
            panic!("refused");
        };
        let n = sent.open.len();
        assert!(n > 200 && n < MAX_OPEN_PER_HEARTBEAT, "{n} entries");
        assert_eq!(sent.open, open[..n], "the earliest-ending, in order");
        assert!(sent.more, "it holds more than it lists");
        let few = heartbeat("a", now, open[..3].to_vec());
        let Ok(Message::Heartbeat(few)) = Message::decode(&few, now, Duration::MAX) else {
            panic!("refused");
        };
        assert_eq!((few.open.len(), few.more), (3, false));
    }

    /// The reports a key's quorum was applied from are added to on each fresh
    /// quorum, and each application forgets those no peer holds any more: a
    /// peer that trips again and again (a new generation each time, each a fresh
    /// quorum with another peer's standing report) leaves one id a peer, not one
    /// a trip; once no peer reports the key, the key is forgotten.
    #[test]
    fn the_reports_applied_stay_one_a_peer() {
        let inner = Inner::new(FleetConfig::new("redis://127.0.0.1:9/")).unwrap();
        let (now, wall) = (Instant::now(), SystemTime::now());
        let until = wall + Duration::from_secs(20);
        let transition = |id: &str, generation: u32, open: bool| {
            Message::Transition(Report {
                key: "db".into(),
                instance: id.into(),
                generation,
                state: if open { State::Open } else { State::Closed },
                open_until: open.then_some(until),
                level: 0,
                reason: cutout::Reason::ConsecutiveFailures.as_str().into(),
            })
            .encode()
        };
        let apply = |bytes: &[u8]| {
            let changed = inner.view.lock().apply(bytes, now, wall);
            assert_eq!(changed, ["db"], "applied");
            inner.apply_quorum(&changed);
        };
        let applied = || {
            let mut ids: Vec<(String, u32)> = inner
                .lock_attached()
                .applied
                .get("db")
                .map(|ids| ids.iter().cloned().collect())
                .unwrap_or_default();
            ids.sort();
            ids
        };
        for id in ["a", "b"] {
            let beat = heartbeat(id, wall, Vec::new());
            assert!(inner.view.lock().apply(&beat, now, wall).is_empty());
        }
        apply(&transition("b", 1, true));
        for generation in 1..=100 {
            apply(&transition("a", generation, true));
            assert_eq!(applied(), [("a".into(), generation), ("b".into(), 1)]);
        }
        apply(&transition("a", 101, false));
        assert_eq!(applied(), [("b".to_string(), 1)], "a's report withdrawn");
        apply(&transition("b", 2, false));
        assert!(inner.lock_attached().applied.is_empty(), "db forgotten");
    }

    fn breaker() -> Arc<dyn Target> {
        Arc::new(CircuitBreaker::builder().build().unwrap())
    }

    /// Keys whose breakers were all dropped go once the keys have doubled, so a
    /// fleet that attaches breakers for ever more keys, each dropped, holds a
    /// bounded number of them (a dead `Weak` keeps its breaker's allocation).
    #[test]
    fn keys_whose_breakers_are_gone_are_pruned_as_keys_double() {
        let mut attached = Attached::default();
        let live = breaker();
        attached
            .breakers
            .insert("live".into(), vec![Arc::downgrade(&live)]);
        let mut most = 0;
        for i in 0..10_000 {
            let dropped = breaker();
            attached
                .breakers
                .insert(format!("key-{i}"), vec![Arc::downgrade(&dropped)]);
            drop(dropped);
            attached.prune();
            most = most.max(attached.breakers.len());
        }
        assert!(most <= 128, "keys held at once: {most}");
        assert!(attached.breakers.contains_key("live"), "a live key stays");
        attached.prune_at = 0;
        attached.prune();
        assert_eq!(attached.breakers.len(), 1, "only the live key is left");
    }
}
