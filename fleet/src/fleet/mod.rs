//! The running fleet: its shared state, the listeners that feed the publisher,
//! and the handle users hold. The background threads are in `threads`, the
//! quorum's targets in `targets`, the search for breakers made from the
//! override states `saved_state` handed out in `handed`, the fleets live in
//! this process in `live`.

mod handed;
mod live;
mod targets;
mod threads;

use crate::config::{FleetConfig, FleetError};
use crate::control::{MAX_OVERRIDE, Override, OverrideMode};
use crate::message::Report;
use crate::sign::SigningKey;
use crate::view::{Counters, FleetView, ViewState};
use crossbeam_queue::ArrayQueue;
use cutout::{
    Builder, CircuitBreaker, Clock, ConfigError, Registry, SavedState, State, Transition,
};
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant, SystemTime};
use targets::{Apply, Attached, Pass, Target};
use threads::{publish_loop, spawn, subscribe_loop};

struct Inner {
    config: FleetConfig,
    client: redis::Client,
    /// Signs every message sent, if the fleet has a key.
    signer: Option<SigningKey>,
    view: FleetView,
    counters: Arc<Counters>,
    queue: ArrayQueue<Report>,
    /// Overrides issued here, for the publisher to send.
    outbox: Mutex<Vec<Override>>,
    publisher: OnceLock<Thread>,
    stop: AtomicBool,
    attached: Mutex<Attached>,
    /// Held through a pass of `sync_overrides`, so that a change one thread
    /// takes is applied before another's pass (a caller's, after it issued an
    /// override) returns, and passes apply their changes in the order taken.
    syncing: Mutex<()>,
    /// When the publisher next acts on the overrides' ends, by the wall clock
    /// in ms since the epoch, or [`UNPLANNED`]: the subscriber wakes it when it
    /// learns an override that ends sooner (see `sync_overrides_and_wake`).
    override_wake: AtomicU64,
    /// Set once the first picture has been read.
    synced: (Mutex<bool>, Condvar),
}

/// [`Inner::override_wake`] while the publisher plans no wake for an
/// override's end: none is held, or its pass is reading them now.
const UNPLANNED: u64 = u64::MAX;

/// A running fleet view: this instance's transitions published to Redis, its peers'
/// collected into a [`FleetView`], and a quorum that opens local breakers.
///
/// Two background threads do all the network I/O (a publisher and a subscriber);
/// a breaker's call path never waits on them: a transition only pushes onto a
/// bounded lock-free queue. Dropping the `Fleet` stops both threads (within a
/// few [`io_timeout`](FleetConfig::io_timeout)s, where a command is in flight)
/// and removes this instance's heartbeat if Redis is reachable then (else the
/// key expires after [`live_after`](FleetConfig::live_after)); transitions still
/// queued are not sent. The overrides it applied here end with it, since no
/// pass of its will end them later: the attached breakers and registry keys
/// still in an override's state are reset, as the override's end would. On
/// the other instances the override holds until its release or its end.
/// Another `Fleet` live in this process may hold the same override on the
/// same breakers (a reconfiguration: the new fleet attached to the same
/// breakers and registries, then the old one dropped): a breaker (or a
/// registry, for the key) that a live fleet has attached and has applied an
/// override of the key to is left to it, as that override says, and reset at
/// that override's end; a live fleet that applies the override only later
/// (it learns it after the drop, or attaches after it) sets the breakers
/// then. A
/// registry key that another thread's lookup makes while the fleet is being
/// dropped may still start in an override's state, and stay in it.
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
        live::join(&inner);
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
    /// [`Builder::also_on_transition`](cutout::Builder::also_on_transition) (or
    /// `on_transition`), or call it from your own listener. A
    /// [`shadow`](Transition::shadow) transition (a shadow breaker's, or a what-if
    /// candidate's given the same listener) is left out: it says what a breaker
    /// would have done, and opens nothing in the fleet. So is one of a `key` no
    /// receiver takes (one [`force_open`](Self::force_open) refuses), counted
    /// ([`FleetStats::bad_key_dropped`](crate::FleetStats::bad_key_dropped)).
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

    /// What the fleet's current picture says `key` should start as: under a
    /// fleet-wide override ([`force_open`](Self::force_open),
    /// [`disable`](Self::disable)), a [`SavedState`] ForcedOpen or Disabled
    /// (which the override's end resets where the breaker is attached:
    /// [`attach`](Self::attach), [`breaker`](Self::breaker), a registry's
    /// through [`attach_registry`](Self::attach_registry)); else, if a quorum of live peers
    /// reports it Open, one Open until the earliest reported deadline (at the
    /// lowest reported backoff level); otherwise `None` (start fresh). For [`Builder::restore`], or a registry's
    /// [`initial_state`](cutout::RegistryBuilder::initial_state) (see
    /// [`initial_state`](Self::initial_state)).
    ///
    /// An override may end between this call and the attach (or a registry's
    /// insert, right after its hook), and others of `key` may come and go
    /// meanwhile: the end then finds no breaker of `key` to reset. So the
    /// fleet keeps which states it handed out for `key` (ForcedOpen,
    /// Disabled, or both) until a minute after the hand-out, or after the last
    /// end of an override of `key`, whichever is later. While an override
    /// holds `key`, it sets the attached breakers (an attach applies it).
    /// Each end of an override of `key` resets the attached breakers of `key`
    /// in any state handed out, not only the ended override's; and until the
    /// record goes, a breaker of `key` still in such a state is reset when it
    /// is attached, and a registry's key when the publisher next looks (every
    /// 100 ms meanwhile). Past that, a breaker made from the state and
    /// attached only then keeps it. Meanwhile the search also resets a breaker
    /// of `key` an operator sets to such a state locally, as a release does.
    /// At most [`MAX_OVERRIDES`](crate::MAX_OVERRIDES) keys are kept; the one
    /// to go soonest gives way.
    pub fn saved_state(&self, key: &str) -> Option<SavedState> {
        self.inner.saved_state(key)
    }

    /// A registry's initial-state hook: each key the registry creates later
    /// starts from the fleet's picture ([`saved_state`](Self::saved_state)). Give
    /// it to [`RegistryBuilder::initial_state`](cutout::RegistryBuilder::initial_state).
    /// It takes the view's lock briefly, on the lookup that creates the key. A
    /// key made as an override ends is reset as `saved_state` says.
    pub fn initial_state<K: AsRef<str>>(
        &self,
    ) -> impl Fn(&K) -> Option<SavedState> + Send + Sync + 'static {
        let inner = Arc::downgrade(&self.inner);
        move |key: &K| inner.upgrade()?.saved_state(key.as_ref())
    }

    /// Builds a breaker named `key` that starts from the fleet's picture (Open,
    /// if a quorum of live peers reports `key` Open, through [`Builder::restore`];
    /// as an override in force says, through `attach`), publishes its transitions, and
    /// that the quorum may open: [`Builder::name`],
    /// [`Builder::also_on_transition`] (after any listener the builder had,
    /// which a transition still reaches first; one that panics skips the
    /// fleet's publication of that transition), then [`attach`](Self::attach).
    /// A `key` no receiver takes (one [`force_open`](Self::force_open) refuses)
    /// builds a breaker that decides locally only (see
    /// [`listener`](Self::listener)).
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
            .also_on_transition(self.listener(key));
        // A picture the builder refuses (a deadline past its clock skew
        // tolerance, say) is dropped: the breaker starts fresh, and `attach`
        // still applies the quorum.
        let restored = self
            .inner
            .quorum_state(key)
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
    /// deadline, and one attached under a fleet-wide override is set as it says.
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
        self.inner
            .apply_override_now(key, |apply| Target::set_override(&**breaker, key, apply));
        self.inner.look_again();
    }

    /// Forces `key`'s breakers open on every instance of the fleet for
    /// `duration` (or until [`release`](Self::release)): every call is
    /// rejected. Here at once; on the other instances when the message
    /// arrives (about a millisecond over loopback), and on an instance that
    /// joins later from the heartbeats. Signed when the fleet has a
    /// [`signing_key`](FleetConfig::signing_key). Per key, the override issued
    /// last (by the issuers' wall clocks) wins.
    ///
    /// Overrides are applied one pass at a time, and a breaker's listeners run
    /// inside the pass that moves it: a listener may issue an override itself
    /// (the pass it runs in applies it), but must not wait for another thread
    /// that issues one, which waits for that pass.
    ///
    /// # Errors
    /// [`FleetError::Config`] for a `duration` of zero or over [`MAX_OVERRIDE`],
    /// or a `key` over [`MAX_NAME_BYTES`](crate::MAX_NAME_BYTES) or holding a
    /// control character;
    /// [`FleetError::OverridesFull`] where this instance holds
    /// [`MAX_OVERRIDES`](crate::MAX_OVERRIDES) for other keys.
    pub fn force_open(&self, key: &str, duration: Duration) -> Result<(), FleetError> {
        self.issue(key, OverrideMode::ForceOpen, duration)
    }

    /// Disables `key`'s breakers on every instance of the fleet for `duration`
    /// (or until [`release`](Self::release)): every call is admitted, nothing
    /// trips. Reaches the fleet as [`force_open`](Self::force_open) does.
    ///
    /// # Errors
    /// As [`force_open`](Self::force_open).
    pub fn disable(&self, key: &str, duration: Duration) -> Result<(), FleetError> {
        self.issue(key, OverrideMode::Disable, duration)
    }

    /// Ends `key`'s fleet-wide override everywhere: an attached breaker of
    /// `key` in the state the override sets (forced open or disabled) is reset
    /// to Closed, and its own policies decide again; one an operator has set to
    /// the other state since is left alone (unless
    /// [`saved_state`](Self::saved_state) handed that state out for `key`
    /// lately: see there), and so is a registry key no
    /// breaker holds now (none is created). The state an override sets cannot
    /// be told from the same state an operator set before it: a breaker forced
    /// open here and then force-opened fleet-wide is reset by the release. A
    /// quorum reached while the override held the key does not open it after
    /// the release (its reports count as applied); a new report does. Here at
    /// once; on the other instances as [`force_open`](Self::force_open) reaches
    /// them.
    ///
    /// # Errors
    /// [`FleetError::Config`] for a `key` over
    /// [`MAX_NAME_BYTES`](crate::MAX_NAME_BYTES) or holding a control
    /// character; [`FleetError::OverridesFull`]
    /// as for [`force_open`](Self::force_open), for a key that holds none.
    pub fn release(&self, key: &str) -> Result<(), FleetError> {
        check_key(key)?;
        let wall = SystemTime::now();
        let release = {
            let view = self.inner.view.lock();
            let at = view.issue_time(key, wall);
            view.release_override(key, self.instance_id(), at)
        };
        self.inner.send(release, wall)
    }

    fn issue(&self, key: &str, mode: OverrideMode, duration: Duration) -> Result<(), FleetError> {
        check_key(key)?;
        if duration.is_zero() || duration > MAX_OVERRIDE {
            return Err(FleetError::Config {
                field: "duration",
                why: "must be above zero and at most MAX_OVERRIDE (24 h)",
            });
        }
        let wall = SystemTime::now();
        let issued_at = self.inner.view.lock().issue_time(key, wall);
        let o = Override {
            key: key.to_owned(),
            mode,
            issuer: self.instance_id().to_owned(),
            issued_at,
            until: wall.checked_add(duration).unwrap_or(wall),
        };
        self.inner.send(o, wall)
    }

    /// The fleet-wide override in force for `key`, as this instance knows it.
    pub fn override_of(&self, key: &str) -> Option<OverrideMode> {
        self.inner.view.lock().override_mode(key, SystemTime::now())
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
        {
            let mut attached = self.inner.lock_attached();
            // A dead `Weak` keeps its registry's allocation: registries are
            // few, so each attach drops the dropped ones.
            attached.registries.retain(|w| w.strong_count() > 0);
            attached.registries.push(Arc::downgrade(&target));
        }
        for key in self.inner.view.open_keys() {
            if let Some(left) = self.inner.verdict_for(&key) {
                target.open_for(&key, left).count(&self.inner.counters);
            }
        }
        let overrides = self.inner.view.lock().relay_overrides(SystemTime::now());
        for o in overrides {
            self.inner
                .apply_override_now(&o.key, |apply| target.set_override(&o.key, apply));
        }
        self.inner.look_again();
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
        self.inner.end_overrides();
        live::leave(&self.inner);
    }
}

/// A key an override may name: one every receiver takes.
fn check_key(key: &str) -> Result<(), FleetError> {
    match crate::message::name_ok(key) {
        false => Err(FleetError::Config {
            field: "key",
            why: "must be 1 to MAX_NAME_BYTES (200) bytes, without control characters",
        }),
        true => Ok(()),
    }
}

impl Inner {
    /// Takes override `o`, issued here at `wall`: acted on here at once, and
    /// handed to the publisher. Issued after the one in force for its key (see
    /// `issue_time`), it is refused only for want of room.
    fn send(&self, o: Override, wall: SystemTime) -> Result<(), FleetError> {
        if !self.view.lock().take_override(o.clone(), wall) {
            return Err(FleetError::OverridesFull);
        }
        self.sync_overrides();
        self.outbox
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(o);
        if let Some(publisher) = self.publisher.get() {
            publisher.unpark();
        }
        Ok(())
    }

    /// The fleet's shared state, before its threads start.
    fn new(config: FleetConfig) -> Result<Inner, FleetError> {
        config.validate()?;
        let client = config.client()?;
        let counters = Arc::new(Counters::default());
        let signer = config.signer();
        let state = ViewState::new(
            config.instance_id.clone(),
            config.live_after,
            config.max_open,
        )
        .max_skew(config.max_skew)
        .signing_key(signer.clone());
        let view = FleetView::new(state, counters.clone());
        Ok(Inner {
            signer,
            queue: ArrayQueue::new(config.queue_capacity),
            outbox: Mutex::new(Vec::new()),
            config,
            client,
            view,
            counters,
            publisher: OnceLock::new(),
            stop: AtomicBool::new(false),
            attached: Mutex::new(Attached::default()),
            syncing: Mutex::new(()),
            override_wake: AtomicU64::new(UNPLANNED),
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
        if t.shadow {
            // A shadow breaker's (or a what-if candidate's) transition says what
            // a live breaker would have done: it is no part of the fleet's picture.
            return;
        }
        // Every receiver would refuse it, and the heartbeat leaves it out.
        if !crate::message::name_ok(key) {
            Counters::bump(&self.counters.bad_key_dropped);
            return;
        }
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
            // Stamped when published, if signed.
            sent_at: None,
        };
        if self.queue.force_push(report).is_some() {
            Counters::bump(&self.counters.queue_dropped);
        }
        if let Some(publisher) = self.publisher.get() {
            publisher.unpark();
        }
    }

    /// What `key` should start as: under an override in force, as it says
    /// (and `key` is kept among the overridden ones, so that its end resets
    /// it); else [`quorum_state`](Self::quorum_state).
    fn saved_state(&self, key: &str) -> Option<SavedState> {
        loop {
            // A fleet being dropped ends its overrides here (`end_overrides`):
            // it hands out none.
            let mode = self.override_mode(key).filter(|_| !self.stopping());
            let Some(mode) = mode else {
                return self.quorum_state(key);
            };
            // Kept, then read again (the two locks are never held together): an
            // end synced before the key was kept would not reset it. Kept as
            // handed out too: the key's ends search for breakers made from
            // this state.
            {
                let mut attached = self.lock_attached();
                attached.overridden.insert(key.to_owned(), mode);
                attached.handed.hand_out(key, mode, Instant::now());
            }
            if self.override_mode(key) == Some(mode) {
                let state = targets::set_by(mode)?;
                return Some(SavedState::new(key, state, SystemTime::now()));
            }
        }
    }

    /// The override in force for `key` now, if any.
    fn override_mode(&self, key: &str) -> Option<OverrideMode> {
        self.view.lock().override_mode(key, SystemTime::now())
    }

    /// Applies the override in force for `key` to a target just made known
    /// (`apply`), keeping `key` among the overridden ones. Within a pass of
    /// `sync_overrides` (this thread's own, or after another's has ended): no
    /// pass applies a change between the reading and the apply, and one that
    /// comes after finds the target attached and the key kept, so its end
    /// reaches this target too.
    fn apply_override_now(&self, key: &str, apply: impl Fn(Apply) -> bool) {
        let _pass = Pass::enter(&self.syncing);
        if let Some(mode) = self.override_mode(key) {
            self.lock_attached().overridden.insert(key.to_owned(), mode);
            apply(Apply::Set(mode));
        }
    }

    /// What a quorum of live peers says `key` should start as: Open until the
    /// earliest reported deadline, at the lowest reported backoff level.
    fn quorum_state(&self, key: &str) -> Option<SavedState> {
        let (now, wall) = (Instant::now(), SystemTime::now());
        let verdict = self.view.lock().verdict(key, self.config.quorum, now, wall);
        let (until, reports) = verdict?;
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Message;

    /// A peer's override issued ahead of this instance's clock (within the
    /// skew) is in force here; what an operator issues here after it still
    /// wins: a release ends it, and a new override replaces that.
    #[test]
    fn what_is_issued_here_outranks_a_peers_override_stamped_ahead() {
        let fleet =
            Fleet::start(FleetConfig::new("redis://127.0.0.1:9/").join_wait(Duration::ZERO))
                .unwrap();
        let wall = SystemTime::now();
        let peer = Override {
            key: "db".into(),
            mode: OverrideMode::ForceOpen,
            issuer: "peer".into(),
            issued_at: wall + Duration::from_millis(500),
            until: wall + Duration::from_secs(600),
        };
        let control = Message::Control(peer).encode();
        fleet
            .inner
            .view
            .lock()
            .apply(&control, Instant::now(), wall);
        assert_eq!(fleet.override_of("db"), Some(OverrideMode::ForceOpen));
        fleet.release("db").unwrap();
        assert_eq!(fleet.override_of("db"), None);
        fleet.disable("db", Duration::from_secs(60)).unwrap();
        assert_eq!(fleet.override_of("db"), Some(OverrideMode::Disable));
    }

    /// Registries attached and then dropped are let go of (a dead `Weak` keeps
    /// its registry's whole allocation): a fleet that attaches a registry per
    /// request, say, holds a bounded number; a live one stays attached.
    #[test]
    fn registries_attached_and_dropped_are_not_kept() {
        let fleet =
            Fleet::start(FleetConfig::new("redis://127.0.0.1:9/").join_wait(Duration::ZERO))
                .unwrap();
        let registry = || -> Arc<Registry<String>> {
            Arc::new(
                Registry::builder(CircuitBreaker::builder())
                    .build()
                    .unwrap(),
            )
        };
        let live = registry();
        fleet.attach_registry(&live);
        for _ in 0..10_000 {
            fleet.attach_registry(&registry());
        }
        let attached = fleet.inner.lock_attached();
        let kept = attached.registries.len();
        assert!(kept <= 128, "{kept} dropped registries kept");
        let live: Arc<dyn Target> = live;
        let live_kept = attached
            .registries
            .iter()
            .any(|w| w.upgrade().is_some_and(|r| Arc::ptr_eq(&r, &live)));
        assert!(live_kept, "the live registry stays attached");
    }
}
