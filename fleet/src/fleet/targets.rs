//! The quorum's targets: the breakers and registries attached to the fleet, and
//! how a quorum of peers' reports opens them, once per fresh set of reports.

use super::handed::{HandedOut, LOOK_EVERY};
use super::{Inner, UNPLANNED};
use crate::control::OverrideMode;
use crate::message::to_ms;
use crate::view::Counters;
use cutout::{CircuitBreaker, Clock, Registry, State};
use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant, SystemTime};

/// What a quorum's open did to a target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Opened {
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
    pub(super) fn count(self, counters: &Counters) {
        match self {
            Opened::Yes => Counters::bump(&counters.quorum_opens),
            Opened::NotOwn => Counters::bump(&counters.quorum_overflow_skipped),
            Opened::No => {}
        }
    }
}

/// What a fleet-wide override does to a key's breaker here.
#[derive(Clone, Copy, Debug)]
pub(super) enum Apply {
    /// The override is in force: forced open or disabled.
    Set(OverrideMode),
    /// The override applied here ended: reset to Closed if the breaker is
    /// still in the state it set (not one an operator set since).
    End(OverrideMode),
}

/// Something the quorum can open: a breaker, or a registry's breaker by key.
pub(super) trait Target: Send + Sync {
    /// Opens `key`'s own breaker for `duration` if it is Closed.
    fn open_for(&self, key: &str, duration: Duration) -> Opened;
    /// Sets `key`'s own breaker as a fleet-wide override says; whether it
    /// reset one (an end that found it in the state its override sets).
    fn set_override(&self, key: &str, apply: Apply) -> bool;
}

/// The state an override in `mode` sets.
pub(super) fn set_by(mode: OverrideMode) -> Option<State> {
    match mode {
        OverrideMode::ForceOpen => Some(State::ForcedOpen),
        OverrideMode::Disable => Some(State::Disabled),
        OverrideMode::Release => None,
    }
}

impl<C: Clock> Target for CircuitBreaker<C> {
    fn set_override(&self, _key: &str, apply: Apply) -> bool {
        match apply {
            Apply::Set(OverrideMode::ForceOpen) => self.force_open(),
            Apply::Set(OverrideMode::Disable) => self.disable(),
            Apply::Set(OverrideMode::Release) => {}
            Apply::End(mode) => {
                if set_by(mode) == Some(self.state()) {
                    self.reset();
                    return true;
                }
            }
        }
        false
    }

    fn open_for(&self, _key: &str, duration: Duration) -> Opened {
        if CircuitBreaker::open_for(self, duration) {
            Opened::Yes
        } else {
            Opened::No
        }
    }
}

impl<C: Clock + Clone, S: BuildHasher + Send + Sync> Target for Registry<String, C, S> {
    fn set_override(&self, key: &str, apply: Apply) -> bool {
        match apply {
            // Set: the key's breaker, created if the registry has none (one
            // created later takes the override through `initial_state`, where
            // the registry has the hook).
            Apply::Set(OverrideMode::ForceOpen | OverrideMode::Disable) => self.with(key, |b| {
                // The overflow breaker is every other key's too: left alone.
                !self.overflow().is_some_and(|o| std::ptr::eq(o, b))
                    && Target::set_override(b, key, apply)
            }),
            // Ended or released: only a breaker the registry holds (an end
            // created none, and took no key slot at the cap; the overflow
            // breaker is held under no key).
            Apply::Set(OverrideMode::Release) | Apply::End(_) => {
                (self.find(key)).is_some_and(|b| Target::set_override(&*b, key, apply))
            }
        }
    }

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

/// Sets `key`'s breakers in `targets` as `apply` says, with no lock held but
/// the pass's: the breaker's listener runs inside (see `apply_quorum`), and one
/// that panics must not stop the others. Whether it reset any.
pub(super) fn set_override(targets: &[Arc<dyn Target>], key: &str, apply: Apply) -> bool {
    let mut reset = false;
    for target in targets {
        let one = panic::catch_unwind(AssertUnwindSafe(|| target.set_override(key, apply)));
        // A listener's panic comes after the transition: it was reset.
        reset |= one.unwrap_or(true);
    }
    reset
}

/// The reports a quorum rests on: (instance, generation) of each.
type ReportIds = HashSet<(String, u32)>;

/// A key a quorum reports Open: until when, and on which reports.
type Verdict = (String, SystemTime, ReportIds);

#[derive(Default)]
pub(super) struct Attached {
    /// Breakers attached under their key.
    pub(super) breakers: HashMap<String, Vec<Weak<dyn Target>>>,
    /// The number of keys in `breakers` at which `attach` next drops the keys
    /// whose breakers are all gone (see [`Attached::prune`]).
    prune_at: usize,
    /// Registries: every key. Those dropped go at the next `attach_registry`.
    pub(super) registries: Vec<Weak<dyn Target>>,
    /// Keys a fleet-wide override was applied to here, and not yet released,
    /// with its mode: only these are reset when it ends, and only from the
    /// state it set. What `sync_overrides` compares the modes in force with, so
    /// a key is acted on whenever the two differ, however its override ended.
    pub(super) overridden: HashMap<String, OverrideMode>,
    /// The override states `saved_state` handed out, and the search an
    /// override's end makes for breakers made from them.
    pub(super) handed: HandedOut,
    /// Per key, the reports (instance, generation) a quorum was applied from, each
    /// kept while its peer holds it (live or not): the same reports do not open a
    /// breaker again after its own probes closed it.
    applied: HashMap<String, ReportIds>,
}

impl Attached {
    /// The live breakers attached under `key`, and every live registry.
    pub(super) fn targets_of(&self, key: &str) -> Vec<Arc<dyn Target>> {
        let breakers = self.breakers.get(key).into_iter().flatten();
        breakers
            .filter_map(Weak::upgrade)
            .chain(self.registries.iter().filter_map(Weak::upgrade))
            .collect()
    }

    /// Drops every key whose breakers are all gone, once the keys have doubled
    /// since the last time (at least 64): a dead `Weak` keeps its breaker's whole
    /// allocation, so keys attached once and dropped would otherwise hold memory
    /// for the fleet's life. Amortized, a constant cost an attach.
    pub(super) fn prune(&mut self) {
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
    /// Acts on the fleet-wide overrides whose mode in force differs from the
    /// one the local breakers were last set to (`overridden`), an end included,
    /// on the attached breakers and registries, and looks again for breakers
    /// in a state `saved_state` handed out ([`Inner::look_again`]); when the
    /// next one ends, or, while such a search is on, [`LOOK_EVERY`] from now.
    ///
    /// One pass at a time (`syncing`): a change taken by one pass (the
    /// publisher's, woken by an override just issued) is applied before the
    /// next pass takes the changes after it, so an override and its release
    /// are applied in order, and an issuer's own pass returns only after what
    /// it issued is applied. A pass called from inside one (a listener that
    /// issues an override) returns at once: the pass it is inside takes its
    /// change in its next round (at most `ROUNDS`; any left, the next pass).
    pub(super) fn sync_overrides(&self) -> Option<SystemTime> {
        const ROUNDS: usize = 16;
        let _pass = Pass::enter(&self.syncing)?;
        let mut next = None;
        for _ in 0..ROUNDS {
            let wall = SystemTime::now();
            // Taken first: the two locks are never held together. Only
            // `saved_state` adds to it outside a pass, and only a mode in force,
            // so a copy this stale at worst sets that mode once more.
            let set = self.lock_attached().overridden.clone();
            let keys;
            (keys, next) = self.view.lock().override_changes(wall, &set);
            if keys.is_empty() {
                break;
            }
            for key in keys {
                self.sync_override(key, wall);
            }
        }
        if self.look_again() {
            let now = SystemTime::now();
            let again = now.checked_add(LOOK_EVERY).unwrap_or(now);
            next = Some(next.map_or(again, |next| next.min(again)));
        }
        next
    }

    /// The publisher's pass of `sync_overrides`: when the next override ends,
    /// kept as the wake-up it plans ([`Inner::override_wake`]).
    ///
    /// Unplanned while the pass reads the table: an override another thread
    /// takes after that read, and finds ending before the plan stored after
    /// it, wakes the publisher (see `sync_overrides_and_wake`); one taken
    /// before the read is within the plan.
    pub(super) fn sync_overrides_and_plan(&self) -> Option<SystemTime> {
        // Relaxed: the view's lock orders this store before the pass reads the
        // table, and so before the load of a thread that takes an override
        // after that read.
        self.override_wake.store(UNPLANNED, Ordering::Relaxed);
        let next = self.sync_overrides();
        // Relaxed: a load that misses it sees `UNPLANNED`, and wakes the
        // publisher once more than needed.
        (self.override_wake).store(next.map_or(UNPLANNED, to_ms), Ordering::Relaxed);
        next
    }

    /// A pass of `sync_overrides` on a thread other than the publisher's
    /// (the subscriber, after a peer's message): wakes the publisher if the
    /// next override ends before the wake-up it planned, so that an override
    /// learned from a peer (or a shorter one of the same mode, which changes
    /// nothing when it arrives) ends at its end, not at the publisher's next
    /// heartbeat.
    pub(super) fn sync_overrides_and_wake(&self) {
        let Some(end) = self.sync_overrides() else {
            return;
        };
        // Relaxed: see `sync_overrides_and_plan`.
        if to_ms(end) < self.override_wake.load(Ordering::Relaxed) {
            if let Some(publisher) = self.publisher.get() {
                publisher.unpark();
            }
        }
    }

    /// Applies `key`'s override in force at `wall` (or its end) to the attached
    /// breakers and registries. An override pauses the search for breakers
    /// made from a state `saved_state` handed out for `key`; an end resets
    /// those in any such state too, and the search goes on after it
    /// ([`HandedOut::end`]).
    fn sync_override(&self, key: String, wall: SystemTime) {
        let mode = self.view.lock().override_mode(&key, wall);
        let (apply, handed, targets) = {
            let mut attached = self.lock_attached();
            // A release resets only where an override was applied.
            let (apply, handed) = match mode {
                Some(mode) => {
                    attached.overridden.insert(key.clone(), mode);
                    attached.handed.pause(&key);
                    (Apply::Set(mode), Vec::new())
                }
                None => match attached.overridden.remove(&key) {
                    Some(ended) => {
                        let handed = attached.handed.end(&key, Instant::now());
                        let handed = handed.into_iter().filter(|&m| m != ended);
                        (Apply::End(ended), handed.collect())
                    }
                    None => return,
                },
            };
            (apply, handed, attached.targets_of(&key))
        };
        set_override(&targets, &key, apply);
        for mode in handed {
            set_override(&targets, &key, Apply::End(mode));
        }
    }

    /// Ends every override applied here on the attached breakers and
    /// registries, as its end would: for a fleet being dropped, whose passes
    /// stop while the breakers (the caller's) live on. Its threads have
    /// stopped; `saved_state` hands out no override's state from now on.
    ///
    /// A target that another live fleet of this process has attached and
    /// holds an override of the key on ([`Inner::held_elsewhere`]) is left to
    /// it: it ends that override there. Left as it is if that override is of
    /// the same mode; else, if this fleet's state is on it, set as that
    /// override says (which that fleet's record says it did).
    pub(super) fn end_overrides(&self) {
        let _pass = Pass::enter(&self.syncing);
        let ended: Vec<(String, OverrideMode)> = {
            let mut attached = self.lock_attached();
            let handed = attached.handed.take_all();
            let overridden = std::mem::take(&mut attached.overridden);
            overridden.into_iter().chain(handed).collect()
        };
        for (key, mode) in ended {
            let targets = self.lock_attached().targets_of(&key);
            for target in targets {
                let held = self.held_elsewhere(&key, &target);
                if held == Some(mode) {
                    continue;
                }
                let target = [target];
                let reset = set_override(&target, &key, Apply::End(mode));
                if let (Some(held), true) = (held, reset) {
                    set_override(&target, &key, Apply::Set(held));
                }
            }
        }
    }

    /// Forgets the peers the view has not heard from for long (see
    /// `ViewState::prune`), and with them the reports their keys' quorums were
    /// applied from: those would otherwise stay until each key changed again.
    /// If the number of live peers changed, re-decides each key a live peer
    /// reports Open: a fractional quorum may be reached as quiet peers age out.
    pub(super) fn prune_view(&self, now: Instant) {
        let keys = self.view.lock().prune(now);
        if !keys.is_empty() {
            self.apply_quorum(&keys);
        }
    }

    /// Opens, for each of `keys`, the attached breakers that a quorum of live
    /// peers says should be Open, once per fresh set of reports: the reports a
    /// quorum was already applied from do not open a breaker again after its own
    /// probes closed it; a new report (a peer's new trip) does.
    pub(super) fn apply_quorum(&self, keys: &[String]) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::FleetConfig;
    use crate::fleet::threads::heartbeat;
    use crate::message::{Message, OpenEntry, Report};
    use cutout::State;

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
                sent_at: None,
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
            let beat = heartbeat(id, wall, Vec::new(), Vec::new(), None);
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

    /// Peers that report keys Open (a quorum), then fall silent and are
    /// forgotten, take the reports applied for those keys with them: a fleet
    /// whose peers come and go, reporting ever new keys, keeps none of theirs.
    #[test]
    fn the_reports_applied_go_with_the_peers_forgotten() {
        let inner = Inner::new(FleetConfig::new("redis://127.0.0.1:9/")).unwrap();
        let (t0, w0) = (Instant::now(), SystemTime::now());
        let step = Duration::from_secs(31); // past ten liveness ages (3 s)
        for round in 0..20u32 {
            let (now, wall) = (t0 + step * round, w0 + step * round);
            let entry = |j| OpenEntry {
                key: format!("k{round}-{j}"),
                until: wall + Duration::from_secs(60),
                generation: 1,
                level: 0,
                external: false,
            };
            let open: Vec<OpenEntry> = (0..100).map(entry).collect();
            for id in ["x", "y"] {
                let beat = heartbeat(
                    &format!("{id}{round}"),
                    wall,
                    open.clone(),
                    Vec::new(),
                    None,
                );
                let changed = inner.view.lock().apply(&beat, now, wall);
                inner.apply_quorum(&changed);
            }
            assert_eq!(inner.lock_attached().applied.len(), 100, "a quorum each");
            inner.prune_view(now + step);
        }
        assert_eq!(inner.view.lock().peer_count(), 0);
        assert!(inner.lock_attached().applied.is_empty());
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

    /// The keys are pruned when their number reaches the mark, twice the keys
    /// left by the last pruning (at least 64), and not before: 63 keys whose
    /// breakers are gone stay, the 64th takes them all; with 100 live keys
    /// left, 99 dead keys stay, the 100th takes them all.
    #[test]
    fn keys_are_pruned_when_they_reach_the_mark() {
        let mut attached = Attached::default();
        attached.prune();
        assert_eq!(attached.prune_at, 64);
        for i in 0..64 {
            assert_eq!(attached.breakers.len(), i, "pruned before the mark");
            let dropped = Arc::downgrade(&breaker());
            attached.breakers.insert(format!("key-{i}"), vec![dropped]);
            attached.prune();
        }
        assert!(attached.breakers.is_empty(), "not pruned at the mark");
        // With 100 live keys left, the mark is 200: 99 dead keys stay.
        let live: Vec<Arc<dyn Target>> = (0..100).map(|_| breaker()).collect();
        for (i, b) in live.iter().enumerate() {
            let key = format!("live-{i}");
            attached.breakers.insert(key, vec![Arc::downgrade(b)]);
        }
        attached.prune_at = 0;
        for i in 0..100 {
            attached.prune();
            assert_eq!(attached.breakers.len(), 100 + i, "pruned before the mark");
            let dropped = Arc::downgrade(&breaker());
            attached.breakers.insert(format!("key-{i}"), vec![dropped]);
        }
        attached.prune();
        assert_eq!(attached.breakers.len(), 100, "not pruned at the mark");
    }
}

std::thread_local! {
    /// Whether this thread is inside a pass of `sync_overrides`.
    static IN_PASS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A pass of [`Inner::sync_overrides`] (or an override applied to a target just
/// attached): its lock held, and this thread marked as inside it until dropped.
pub(super) struct Pass<'a> {
    _lock: std::sync::MutexGuard<'a, ()>,
}

impl<'a> Pass<'a> {
    /// `None` if this thread is inside a pass already (it would wait for itself).
    pub(super) fn enter(lock: &'a Mutex<()>) -> Option<Pass<'a>> {
        if IN_PASS.get() {
            return None;
        }
        // Nothing behind the lock: usable after a panic.
        let lock = lock.lock().unwrap_or_else(PoisonError::into_inner);
        IN_PASS.set(true);
        Some(Pass { _lock: lock })
    }
}

impl Drop for Pass<'_> {
    fn drop(&mut self) {
        IN_PASS.set(false);
    }
}
