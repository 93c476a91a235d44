//! The fleet view: per key, which live peers report it Open and until when.
//!
//! Pure bookkeeping: [`ViewState::apply`] takes a message's bytes and the time
//! (monotonic and wall-clock) as arguments and never reads a clock or the network,
//! so the property tests drive it directly.

use crate::message::{Invalid, Message, OpenEntry};
use crate::quorum::Quorum;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

/// The most peers a view keeps; a message from one more evicts a peer that is not
/// live, or, if every peer is live, is refused (counted as `overflow`).
pub const MAX_PEERS: usize = 1024;
/// The most Open keys a view keeps per peer; reports beyond are refused (counted
/// as `overflow`).
pub const MAX_KEYS_PER_PEER: usize = 1024;

/// One live peer's report that a key is Open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenReport {
    /// The peer's instance id.
    pub instance: String,
    /// Its Open deadline, as wall-clock time.
    pub until: SystemTime,
    /// The peer's breaker generation for that Open phase.
    pub generation: u32,
    /// The peer's backoff level.
    pub level: u8,
    /// Whether the peer opened by [`Reason::External`](cutout::Reason::External)
    /// (its own fleet quorum, say): no independent evidence, so it never counts
    /// toward a quorum.
    pub external: bool,
}

/// What the view has received and what became of it, and what this instance's
/// publisher has done. Counters only grow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FleetStats {
    /// Valid messages from peers, applied to the view.
    pub accepted: u64,
    /// Refused: over the size limit.
    pub too_large: u64,
    /// Refused: not a message.
    pub garbage: u64,
    /// Refused: another wire version.
    pub unknown_version: u64,
    /// Refused: a field out of range (a message, or one entry of a heartbeat,
    /// which keeps the others).
    pub bad_field: u64,
    /// Refused: an Open deadline beyond the configured maximum (a transition, or
    /// one entry of a heartbeat, which keeps the others).
    pub deadline_too_far: u64,
    /// Transition reports from a sender that was not live when they arrived (kept,
    /// but they count for nothing until its heartbeat makes it live).
    pub not_live: u64,
    /// Refused: the view's bounds on peers or keys per peer were reached.
    pub overflow: u64,
    /// Ignored: a heartbeat sent before one already applied from its peer (one
    /// queued on the channel while a resubscription read the peers' latest). A
    /// peer whose wall clock steps back has its heartbeats ignored until its
    /// clock passes the last one applied.
    pub out_of_order: u64,
    /// This instance's own messages, echoed back by Redis (ignored).
    pub own: u64,
    /// Transitions dropped because the publish queue was full (the oldest go).
    pub queue_dropped: u64,
    /// This instance's transitions dropped as stale: older (by generation) than
    /// one of the same key already taken, their events having reached the
    /// listener out of order (two threads' transitions). Neither published nor
    /// listed in the heartbeat: the newer one stands.
    pub stale_dropped: u64,
    /// Messages this instance published.
    pub published: u64,
    /// Connection attempts or commands that failed (Redis down, timeouts).
    pub redis_errors: u64,
    /// Local breakers this instance opened because a quorum of peers reported Open.
    pub quorum_opens: u64,
    /// Keys a quorum of peers reported Open that an attached registry has no
    /// breaker of its own for (at its `max_keys` cap, the key's lookup went to the
    /// shared overflow breaker): not opened, since opening the overflow breaker
    /// would reject every other key that shares it. Counted where an open would
    /// be: once a registry each time a quorum is applied to the key (a fresh set
    /// of reports, or the registry's attach).
    pub quorum_overflow_skipped: u64,
}

/// The counters that the publisher and the quorum keep beside the view.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) queue_dropped: AtomicU64,
    pub(crate) stale_dropped: AtomicU64,
    pub(crate) published: AtomicU64,
    pub(crate) redis_errors: AtomicU64,
    pub(crate) quorum_opens: AtomicU64,
    pub(crate) quorum_overflow_skipped: AtomicU64,
}

impl Counters {
    pub(crate) fn bump(counter: &AtomicU64) {
        // Relaxed: a statistic, read on its own.
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

#[derive(Debug)]
struct Peer {
    /// When its latest heartbeat was sent, as this host's monotonic time.
    heard: Option<Instant>,
    /// When its latest heartbeat applied was sent, by its own clock: an older one
    /// (queued on the channel while a resubscription read the picture) is not
    /// applied over it.
    sent: Option<SystemTime>,
    /// Keys it reports Open.
    open: HashMap<String, OpenEntry>,
}

/// The view's data, behind the [`FleetView`]'s lock.
#[derive(Debug)]
pub(crate) struct ViewState {
    own: String,
    live_after: Duration,
    max_open: Duration,
    peers: HashMap<String, Peer>,
    stats: FleetStats,
}

impl ViewState {
    pub(crate) fn new(own: String, live_after: Duration, max_open: Duration) -> ViewState {
        ViewState {
            own,
            live_after,
            max_open,
            peers: HashMap::new(),
            stats: FleetStats::default(),
        }
    }

    /// Counts a message, or a heartbeat's entry, refused by rule `e`.
    fn refused(&mut self, e: Invalid) {
        let s = &mut self.stats;
        *match e {
            Invalid::TooLarge => &mut s.too_large,
            Invalid::Garbage => &mut s.garbage,
            Invalid::Version => &mut s.unknown_version,
            Invalid::DeadlineTooFar => &mut s.deadline_too_far,
            _ => &mut s.bad_field,
        } += 1;
    }

    fn is_live(&self, peer: &Peer, now: Instant) -> bool {
        peer.heard
            .is_some_and(|h| now.saturating_duration_since(h) < self.live_after)
    }

    /// Applies the message in `bytes`, received at `now` (monotonic) and `wall`
    /// (wall-clock). Returns the keys whose reports changed (empty if refused).
    pub(crate) fn apply(&mut self, bytes: &[u8], now: Instant, wall: SystemTime) -> Vec<String> {
        let message = match Message::decode_counted(bytes, wall, self.max_open) {
            Ok((m, refused)) => {
                // Heartbeat entries left out, each counted by the rule it broke.
                refused.into_iter().for_each(|e| self.refused(e));
                m
            }
            Err(e) => {
                self.refused(e);
                return Vec::new();
            }
        };
        if message.instance() == self.own {
            self.stats.own += 1;
            return Vec::new();
        }
        if !self.make_room(message.instance(), now) {
            self.stats.overflow += 1;
            return Vec::new();
        }
        let live = self
            .peers
            .get(message.instance())
            .is_some_and(|p| self.is_live(p, now));
        let peer = self
            .peers
            .entry(message.instance().to_owned())
            .or_insert_with(|| Peer {
                heard: None,
                sent: None,
                open: HashMap::new(),
            });
        let changed = match message {
            // In arrival order, the generation unchecked. A peer's publisher
            // sends its transitions in generation order per key (it drops a stale
            // one: see `held.rs`), one after another on one connection, and Redis
            // delivers one connection's messages in order. And a message names
            // no incarnation of its peer or breaker: a peer restarted under the
            // same id, or a breaker rebuilt under the key, starts again at
            // generation 1, which an order by generation here would drop as
            // stale until it passed the old one.
            Message::Transition(r) => {
                match r.open_until {
                    Some(until) => {
                        if !peer.open.contains_key(&r.key) && peer.open.len() >= MAX_KEYS_PER_PEER {
                            self.stats.overflow += 1;
                            return Vec::new();
                        }
                        let entry = OpenEntry {
                            key: r.key.clone(),
                            until,
                            generation: r.generation,
                            level: r.level,
                            external: r.reason == cutout::Reason::External.as_str(),
                        };
                        peer.open.insert(r.key.clone(), entry);
                    }
                    None => {
                        peer.open.remove(&r.key);
                    }
                }
                // Kept (not refused above), but counting for nothing yet.
                if !live {
                    self.stats.not_live += 1;
                }
                vec![r.key]
            }
            Message::Heartbeat(h) if peer.sent.is_some_and(|sent| h.sent_at < sent) => {
                self.stats.out_of_order += 1;
                return Vec::new();
            }
            Message::Heartbeat(h) => {
                peer.sent = Some(h.sent_at);
                // Its age by the sender's clock, never negative: a sender whose
                // clock runs ahead reads as just heard.
                let age = wall.duration_since(h.sent_at).unwrap_or(Duration::ZERO);
                let heard = now.checked_sub(age);
                if heard > peer.heard || peer.heard.is_none() {
                    peer.heard = heard;
                }
                let mut changed: Vec<String> = peer.open.keys().cloned().collect();
                let last = h.open.iter().map(|e| e.until).max();
                let mut open: HashMap<String, OpenEntry> =
                    h.open.into_iter().map(|e| (e.key.clone(), e)).collect();
                if h.more {
                    // It listed its earliest-ending keys only: those it reported
                    // Open (by transition) that end no sooner than the last listed
                    // stay (keys tied at the cut may be held), within the bound.
                    let beyond = |e: &OpenEntry| last.is_some_and(|last| e.until >= last);
                    for (key, entry) in peer.open.drain() {
                        if beyond(&entry) && open.len() < MAX_KEYS_PER_PEER {
                            open.entry(key).or_insert(entry);
                        }
                    }
                }
                peer.open = open;
                changed.extend(peer.open.keys().cloned());
                changed.sort_unstable();
                changed.dedup();
                changed
            }
        };
        self.stats.accepted += 1;
        changed
    }

    /// Whether a message from `instance` can be kept: it is known, or there is
    /// room, or a peer that is not live can be forgotten to make some.
    fn make_room(&mut self, instance: &str, now: Instant) -> bool {
        if self.peers.contains_key(instance) || self.peers.len() < MAX_PEERS {
            return true;
        }
        let stale = self
            .peers
            .iter()
            .find(|(_, p)| !self.is_live(p, now))
            .map(|(id, _)| id.clone());
        match stale {
            Some(id) => {
                self.peers.remove(&id);
                true
            }
            None => false,
        }
    }

    /// The live peers' reports that `key` is Open with a deadline after `wall`,
    /// earliest deadline first.
    pub(crate) fn open_reports(
        &self,
        key: &str,
        now: Instant,
        wall: SystemTime,
    ) -> Vec<OpenReport> {
        let mut reports: Vec<OpenReport> = self
            .peers
            .iter()
            .filter(|(_, p)| self.is_live(p, now))
            .filter_map(|(id, p)| {
                let e = p.open.get(key)?;
                (e.until > wall).then(|| OpenReport {
                    instance: id.clone(),
                    until: e.until,
                    generation: e.generation,
                    level: e.level,
                    external: e.external,
                })
            })
            .collect();
        reports.sort_by(|a, b| a.until.cmp(&b.until).then(a.instance.cmp(&b.instance)));
        reports
    }

    /// Whether a peer still holds report `id` (instance, generation) that `key` is
    /// Open, live or not: a report a quorum was applied from stays the same report
    /// while its peer's heartbeat is late, and is gone once the peer reports the
    /// key Closed or a heartbeat without it (a restart).
    pub(crate) fn holds_report(&self, key: &str, (instance, generation): &(String, u32)) -> bool {
        self.peers
            .get(instance)
            .and_then(|p| p.open.get(key))
            .is_some_and(|e| e.generation == *generation)
    }

    /// How many peers (other instances) are live at `now`.
    pub(crate) fn live_peers(&self, now: Instant) -> usize {
        self.peers.values().filter(|p| self.is_live(p, now)).count()
    }

    /// Every key some live peer reports Open at `wall`.
    pub(crate) fn open_keys(&self, now: Instant, wall: SystemTime) -> Vec<String> {
        let mut keys: Vec<String> = self
            .peers
            .values()
            .filter(|p| self.is_live(p, now))
            .flat_map(|p| {
                p.open
                    .values()
                    .filter(|e| e.until > wall)
                    .map(|e| e.key.clone())
            })
            .collect();
        keys.sort_unstable();
        keys.dedup();
        keys
    }

    /// What a quorum of live peers says about `key`: the earliest deadline among
    /// their reports, if enough of them report it Open. Reports of an external
    /// open (an echo of some quorum) do not count.
    pub(crate) fn verdict(
        &self,
        key: &str,
        quorum: Quorum,
        now: Instant,
        wall: SystemTime,
    ) -> Option<(SystemTime, Vec<OpenReport>)> {
        let mut reports = self.open_reports(key, now, wall);
        reports.retain(|r| !r.external);
        let needed = quorum.needed(self.live_peers(now));
        (reports.len() >= needed).then(|| (reports[0].until, reports))
    }

    /// The view's own counters.
    pub(crate) fn stats(&self) -> FleetStats {
        self.stats
    }

    /// Forgets peers whose heartbeat is far older than the liveness age.
    pub(crate) fn prune(&mut self, now: Instant) {
        let forget = self.live_after.saturating_mul(10);
        self.peers.retain(|_, p| {
            p.heard
                .is_some_and(|h| now.saturating_duration_since(h) < forget)
                || !p.open.is_empty() && p.heard.is_none()
        });
    }
}

/// A fleet's picture as this instance sees it: for each key, which live peers
/// report it Open and until when. Cheap to clone (a shared handle); every method
/// takes a short lock that only the fleet's background thread also takes, never
/// a breaker's call path.
///
/// A peer is live while its latest heartbeat is newer than
/// [`FleetConfig::live_after`](crate::FleetConfig::live_after); the reports of a
/// peer that is not live count for nothing. This instance's own reports are not in
/// the view.
///
/// # Examples
/// ```no_run
/// use cutout_fleet::{Fleet, FleetConfig};
///
/// let fleet = Fleet::start(FleetConfig::new("redis://127.0.0.1:6379/"))?;
/// let view = fleet.view();
/// for report in view.open_reports("db") {
///     println!("{} reports db open until {:?}", report.instance, report.until);
/// }
/// println!("{} live peers", view.live_peers());
/// # Ok::<(), cutout_fleet::FleetError>(())
/// ```
#[derive(Clone, Debug)]
pub struct FleetView {
    pub(crate) state: Arc<Mutex<ViewState>>,
    pub(crate) counters: Arc<Counters>,
    /// What the last `record_metrics` published.
    #[cfg(feature = "metrics")]
    shown: Arc<Mutex<Shown>>,
}

/// What a view's last `record_metrics` published: the keys whose gauge it set, and
/// the counters, so that the next adds their growth since.
#[cfg(feature = "metrics")]
#[derive(Debug, Default)]
struct Shown {
    keys: std::collections::HashSet<String>,
    stats: FleetStats,
}

impl FleetView {
    pub(crate) fn new(state: ViewState, counters: Arc<Counters>) -> FleetView {
        FleetView {
            state: Arc::new(Mutex::new(state)),
            counters,
            #[cfg(feature = "metrics")]
            shown: Arc::default(),
        }
    }

    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, ViewState> {
        // The view holds plain data, consistent after every statement that a
        // panic could interrupt; a poisoned lock is still a usable view.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The live peers' reports that `key` is Open, deadline still ahead, earliest
    /// deadline first.
    pub fn open_reports(&self, key: &str) -> Vec<OpenReport> {
        self.lock()
            .open_reports(key, Instant::now(), SystemTime::now())
    }

    /// How many other instances are live.
    pub fn live_peers(&self) -> usize {
        self.lock().live_peers(Instant::now())
    }

    /// Every key that some live peer reports Open.
    pub fn open_keys(&self) -> Vec<String> {
        self.lock().open_keys(Instant::now(), SystemTime::now())
    }

    /// The counters: messages accepted and refused (by cause), publisher drops and
    /// errors, quorum opens and the opens skipped.
    pub fn stats(&self) -> FleetStats {
        let mut stats = self.lock().stats;
        // Relaxed: statistics, each read on its own.
        let c = &self.counters;
        stats.queue_dropped = c.queue_dropped.load(Ordering::Relaxed);
        stats.stale_dropped = c.stale_dropped.load(Ordering::Relaxed);
        stats.published = c.published.load(Ordering::Relaxed);
        stats.redis_errors = c.redis_errors.load(Ordering::Relaxed);
        stats.quorum_opens = c.quorum_opens.load(Ordering::Relaxed);
        stats.quorum_overflow_skipped = c.quorum_overflow_skipped.load(Ordering::Relaxed);
        stats
    }

    /// Publishes the view through the `metrics` facade: gauges
    /// `cutout_fleet_live_peers` and `cutout_fleet_open_reports` (label `key`, for
    /// each key some live peer reports Open, and 0 for keys that no longer are),
    /// and counters `cutout_fleet_messages_total` (label `result`: `accepted` or
    /// the refusal's cause), `cutout_fleet_queue_dropped_total`,
    /// `cutout_fleet_stale_dropped_total`, `cutout_fleet_published_total`,
    /// `cutout_fleet_redis_errors_total`, `cutout_fleet_quorum_opens_total` and
    /// `cutout_fleet_quorum_overflow_skipped_total`. The fleet's background
    /// thread calls it once a second; call it yourself before a scrape if you
    /// like.
    #[cfg(feature = "metrics")]
    pub fn record_metrics(&self) {
        use std::collections::HashSet;
        let (now, wall) = (Instant::now(), SystemTime::now());
        let (live, reports) = {
            let state = self.lock();
            let keys = state.open_keys(now, wall);
            let reports: Vec<(String, usize)> = keys
                .into_iter()
                .map(|k| {
                    let n = state.open_reports(&k, now, wall).len();
                    (k, n)
                })
                .collect();
            (state.live_peers(now), reports)
        };
        metrics::gauge!("cutout_fleet_live_peers").set(live as f64);
        let mut shown = self.shown.lock().unwrap_or_else(PoisonError::into_inner);
        let current: HashSet<String> = reports.iter().map(|(k, _)| k.clone()).collect();
        for gone in shown.keys.difference(&current) {
            metrics::gauge!("cutout_fleet_open_reports", "key" => gone.clone()).set(0.0);
        }
        for (key, n) in reports {
            metrics::gauge!("cutout_fleet_open_reports", "key" => key).set(n as f64);
        }
        shown.keys = current;
        // Each counter grows by its growth since the last publication, so that
        // views recreated or side by side in one process add to one series,
        // which never goes back (set absolute, it did, or froze at the larger).
        let (s, last) = (self.stats(), shown.stats);
        shown.stats = s;
        let grown = |now: u64, then: u64| now.saturating_sub(then);
        for (result, n, then) in [
            ("accepted", s.accepted, last.accepted),
            ("too_large", s.too_large, last.too_large),
            ("garbage", s.garbage, last.garbage),
            ("unknown_version", s.unknown_version, last.unknown_version),
            ("bad_field", s.bad_field, last.bad_field),
            (
                "deadline_too_far",
                s.deadline_too_far,
                last.deadline_too_far,
            ),
            ("not_live", s.not_live, last.not_live),
            ("overflow", s.overflow, last.overflow),
            ("out_of_order", s.out_of_order, last.out_of_order),
        ] {
            metrics::counter!("cutout_fleet_messages_total", "result" => result)
                .increment(grown(n, then));
        }
        for (name, n, then) in [
            (
                "cutout_fleet_queue_dropped_total",
                s.queue_dropped,
                last.queue_dropped,
            ),
            (
                "cutout_fleet_stale_dropped_total",
                s.stale_dropped,
                last.stale_dropped,
            ),
            ("cutout_fleet_published_total", s.published, last.published),
            (
                "cutout_fleet_redis_errors_total",
                s.redis_errors,
                last.redis_errors,
            ),
            (
                "cutout_fleet_quorum_opens_total",
                s.quorum_opens,
                last.quorum_opens,
            ),
            (
                "cutout_fleet_quorum_overflow_skipped_total",
                s.quorum_overflow_skipped,
                last.quorum_overflow_skipped,
            ),
        ] {
            metrics::counter!(name).increment(grown(n, then));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Heartbeat, Report};
    use cutout::State;
    use std::num::NonZeroUsize;

    const LIVE: Duration = Duration::from_secs(3);
    const MAX: Duration = Duration::from_secs(600);

    fn heartbeat(id: &str, sent: SystemTime, open: &[(&str, SystemTime)]) -> Vec<u8> {
        Message::Heartbeat(Heartbeat {
            instance: id.into(),
            sent_at: sent,
            open: open
                .iter()
                .map(|(k, until)| OpenEntry {
                    key: (*k).into(),
                    until: *until,
                    generation: 1,
                    level: 0,
                    external: false,
                })
                .collect(),
            more: false,
        })
        .encode()
    }

    fn transition(id: &str, state: State, until: Option<SystemTime>) -> Vec<u8> {
        Message::Transition(Report {
            key: "db".into(),
            instance: id.into(),
            generation: 2,
            state,
            open_until: until,
            level: 0,
            reason: "failure_rate".into(),
        })
        .encode()
    }

    #[test]
    fn a_quorum_needs_k_live_peers_and_takes_the_earliest_deadline() {
        // Whole milliseconds, as the wire carries them.
        let wall = SystemTime::UNIX_EPOCH
            + Duration::from_millis(crate::message::to_ms(SystemTime::now()));
        let now = Instant::now();
        let q = Quorum::AtLeast(NonZeroUsize::new(2).unwrap());
        let mut v = ViewState::new("me".into(), LIVE, MAX);
        let soon = wall + Duration::from_secs(2);
        let later = wall + Duration::from_secs(5);
        v.apply(&heartbeat("a", wall, &[]), now, wall);
        v.apply(&transition("a", State::Open, Some(later)), now, wall);
        assert_eq!(v.verdict("db", q, now, wall), None, "one peer is no quorum");
        // A transition from a sender with no heartbeat counts for nothing.
        v.apply(&transition("b", State::Open, Some(soon)), now, wall);
        assert_eq!(v.stats.not_live, 1);
        assert_eq!(v.verdict("db", q, now, wall), None);
        v.apply(&heartbeat("b", wall, &[("db", soon)]), now, wall);
        assert_eq!(v.verdict("db", q, now, wall).map(|v| v.0), Some(soon));
        // Its own echo counts for nothing.
        v.apply(&transition("me", State::Open, Some(soon)), now, wall);
        assert_eq!(v.stats.own, 1);
        // Aged out: no longer live.
        let much_later = now + LIVE;
        assert_eq!(v.live_peers(much_later), 0);
        assert_eq!(v.verdict("db", q, much_later, wall), None);
        // A close withdraws the report.
        v.apply(&transition("b", State::HalfOpen, None), now, wall);
        assert_eq!(v.open_reports("db", now, wall).len(), 1);
    }

    #[test]
    fn an_external_open_is_an_echo_and_never_counts() {
        let wall = SystemTime::UNIX_EPOCH
            + Duration::from_millis(crate::message::to_ms(SystemTime::now()));
        let now = Instant::now();
        let q = Quorum::AtLeast(NonZeroUsize::new(2).unwrap());
        let mut v = ViewState::new("me".into(), LIVE, MAX);
        let until = wall + Duration::from_secs(5);
        for id in ["a", "b"] {
            v.apply(&heartbeat(id, wall, &[]), now, wall);
        }
        v.apply(&transition("a", State::Open, Some(until)), now, wall);
        let echo = Message::Transition(Report {
            key: "db".into(),
            instance: "b".into(),
            generation: 9,
            state: State::Open,
            open_until: Some(until),
            level: 0,
            reason: "external".into(),
        });
        v.apply(&echo.encode(), now, wall);
        assert_eq!(v.open_reports("db", now, wall).len(), 2, "shown");
        assert_eq!(v.verdict("db", q, now, wall), None, "not counted");
    }

    #[test]
    fn an_old_heartbeat_is_not_live_and_a_past_deadline_reports_nothing() {
        let (now, wall) = (Instant::now() + LIVE * 2, SystemTime::now());
        let mut v = ViewState::new("me".into(), LIVE, MAX);
        v.apply(
            &heartbeat("a", wall - LIVE, &[("db", wall + LIVE)]),
            now,
            wall,
        );
        assert_eq!(v.live_peers(now), 0);
        v.apply(&heartbeat("b", wall, &[("db", wall - LIVE)]), now, wall);
        assert_eq!(v.live_peers(now), 1);
        assert!(v.open_reports("db", now, wall).is_empty());
    }
}
