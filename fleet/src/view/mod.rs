//! The fleet view: per key, which live peers report it Open and until when. The
//! handle users hold and the counters are here; the data and its rules in
//! `state`, the bounded peer table in `peers`.

mod peers;
mod state;

pub(crate) use state::{DEFAULT_MAX_SKEW, ViewState};

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Instant, SystemTime};

/// The most peers a view keeps. A message from one more takes the place of a
/// peer without news (no message) for
/// [`live_after`](crate::FleetConfig::live_after); if every peer has news, one
/// that reports a key Open takes the place of a peer that is not both live and
/// reporting one, one that is not live first (counted `peers_displaced`), and
/// any other is refused (counted `peers_refused`). A live peer that reports a
/// key Open keeps its place.
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
    /// Refused: the view's bound on keys per peer was reached.
    pub overflow: u64,
    /// Refused: a message from an instance the view had no place for (every
    /// place held by a peer with news, and the message reported no key Open,
    /// or every such peer is live and reports one): a flood of made-up ids
    /// shows here.
    pub peers_refused: u64,
    /// Peers with news, not both live and reporting a key Open, forgotten to
    /// make room for an instance that reported one (see [`MAX_PEERS`]).
    pub peers_displaced: u64,
    /// Ignored: a heartbeat sent before one already applied from its peer,
    /// within [`live_after`](crate::FleetConfig::live_after) of applying that one
    /// (one queued on the channel while a resubscription read the peers'
    /// latest). A peer whose wall clock steps back has its heartbeats ignored
    /// until its clock passes the last one applied, or for `live_after` at most.
    pub out_of_order: u64,
    /// Refused: stamped later than this host's wall clock plus
    /// [`max_skew`](crate::FleetConfig::max_skew).
    pub from_future: u64,
    /// Refused: a signed message older than
    /// [`live_after`](crate::FleetConfig::live_after): a replay, or one from a
    /// peer whose clock runs that far behind this host's.
    pub replayed: u64,
    /// Refused: unsigned, where this instance has a
    /// [`signing_key`](crate::FleetConfig::signing_key).
    pub unsigned: u64,
    /// Refused: signed with another key, or altered.
    pub bad_signature: u64,
    /// This instance's own messages, echoed back by Redis (ignored).
    pub own: u64,
    /// Transitions dropped because the publish queue was full (the oldest go).
    pub queue_dropped: u64,
    /// This instance's transitions dropped as stale: older (by generation) than
    /// one of the same key already taken, their events having reached the
    /// listener out of order (two threads' transitions). Neither published nor
    /// listed in the heartbeat: the newer one stands.
    pub stale_dropped: u64,
    /// This instance's transitions of a key no receiver takes (over
    /// [`MAX_NAME_BYTES`](crate::MAX_NAME_BYTES), or holding a control
    /// character: a key [`Fleet::force_open`](crate::Fleet::force_open) refuses),
    /// dropped: neither published nor listed in the heartbeat. Its breaker
    /// decides locally only.
    pub bad_key_dropped: u64,
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
    pub(crate) bad_key_dropped: AtomicU64,
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
        let mut stats = self.lock().stats();
        // Relaxed: statistics, each read on its own.
        let c = &self.counters;
        stats.queue_dropped = c.queue_dropped.load(Ordering::Relaxed);
        stats.stale_dropped = c.stale_dropped.load(Ordering::Relaxed);
        stats.bad_key_dropped = c.bad_key_dropped.load(Ordering::Relaxed);
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
    /// `cutout_fleet_stale_dropped_total`, `cutout_fleet_bad_key_dropped_total`,
    /// `cutout_fleet_published_total`,
    /// `cutout_fleet_redis_errors_total`, `cutout_fleet_quorum_opens_total`,
    /// `cutout_fleet_peers_displaced_total` and
    /// `cutout_fleet_quorum_overflow_skipped_total`. The fleet's subscriber
    /// thread calls it once a second, Redis reachable or not; call it yourself
    /// before a scrape if you like. The `metrics` facade cannot remove a series, so a key's
    /// `cutout_fleet_open_reports` stays at 0 once no peer reports it: where
    /// peers report ever new keys, let the exporter drop idle series (the
    /// Prometheus exporter's `idle_timeout`).
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
            ("peers_refused", s.peers_refused, last.peers_refused),
            ("from_future", s.from_future, last.from_future),
            ("replayed", s.replayed, last.replayed),
            ("unsigned", s.unsigned, last.unsigned),
            ("bad_signature", s.bad_signature, last.bad_signature),
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
            (
                "cutout_fleet_bad_key_dropped_total",
                s.bad_key_dropped,
                last.bad_key_dropped,
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
                "cutout_fleet_peers_displaced_total",
                s.peers_displaced,
                last.peers_displaced,
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
