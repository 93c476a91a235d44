//! The view's data: per peer, its liveness and the keys it reports Open, and the
//! rules a message passes before it counts.
//!
//! Pure bookkeeping: [`ViewState::apply`] takes a message's bytes and the time
//! (monotonic and wall-clock) as arguments and never reads a clock or the network,
//! so the property tests drive it directly.

use super::peers::{self, Admission, Peer};
use super::{FleetStats, MAX_KEYS_PER_PEER, OpenReport};
use crate::control::{Override, OverrideMode, Overrides};
use crate::message::{Decoded, Invalid, Message, OpenEntry};
use crate::quorum::Quorum;
use crate::sign::SigningKey;
use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime};

/// The view's data, behind the [`FleetView`](super::FleetView)'s lock.
#[derive(Debug)]
pub(crate) struct ViewState {
    own: String,
    live_after: Duration,
    max_open: Duration,
    max_skew: Duration,
    /// With a key, only messages it signed are taken.
    key: Option<SigningKey>,
    peers: HashMap<String, Peer>,
    /// How many peers were live at the last [`prune`](Self::prune).
    live_seen: usize,
    overrides: Overrides,
    stats: FleetStats,
}

/// How far ahead of this host's wall clock a message's stamp may be, by default
/// ([`FleetConfig::max_skew`](crate::FleetConfig::max_skew)).
pub(crate) const DEFAULT_MAX_SKEW: Duration = Duration::from_secs(1);

impl ViewState {
    /// A view for instance `own`, with the default skew, taking unsigned
    /// messages.
    pub(crate) fn new(own: String, live_after: Duration, max_open: Duration) -> ViewState {
        ViewState {
            own,
            live_after,
            max_open,
            max_skew: DEFAULT_MAX_SKEW,
            key: None,
            peers: HashMap::new(),
            live_seen: 0,
            overrides: Overrides::default(),
            stats: FleetStats::default(),
        }
    }

    /// Refuses messages stamped more than `skew` ahead of this host's clock.
    pub(crate) fn max_skew(mut self, skew: Duration) -> ViewState {
        self.max_skew = skew;
        self
    }

    /// Takes only messages that `key` signed (if any).
    pub(crate) fn signing_key(mut self, key: Option<SigningKey>) -> ViewState {
        self.key = key;
        self
    }

    /// How many peers the view holds (live or not).
    pub(crate) fn peer_count(&self) -> usize {
        self.peers.len()
    }

    /// Counts a message, or a heartbeat's entry, refused by rule `e`.
    fn refused(&mut self, e: Invalid) {
        let s = &mut self.stats;
        *match e {
            Invalid::TooLarge => &mut s.too_large,
            Invalid::Garbage => &mut s.garbage,
            Invalid::Version => &mut s.unknown_version,
            Invalid::DeadlineTooFar => &mut s.deadline_too_far,
            Invalid::FromFuture => &mut s.from_future,
            Invalid::Replayed => &mut s.replayed,
            Invalid::Unsigned => &mut s.unsigned,
            Invalid::BadSignature => &mut s.bad_signature,
            _ => &mut s.bad_field,
        } += 1;
    }

    fn is_live(&self, peer: &Peer, now: Instant) -> bool {
        peer.is_live(now, self.live_after)
    }

    /// Why a message stamped `sent` (by its sender's clock) is refused at `wall`,
    /// if it is: stamped beyond this host's clock plus the skew allowed, or, if
    /// signed, older than `live_after` (a replay: a signed message cannot be
    /// forged, but it can be sent again).
    fn stale(&self, sent: SystemTime, signed: bool, wall: SystemTime) -> Option<Invalid> {
        if self.is_ahead(sent, wall) {
            return Some(Invalid::FromFuture);
        }
        let age = wall.duration_since(sent).unwrap_or(Duration::ZERO);
        (signed && age > self.live_after).then_some(Invalid::Replayed)
    }

    /// Whether `stamp` is further ahead of `wall` than the skew allowed.
    fn is_ahead(&self, stamp: SystemTime, wall: SystemTime) -> bool {
        wall.checked_add(self.max_skew)
            .is_some_and(|latest| stamp > latest)
    }

    /// Applies the message in `bytes`, received at `now` (monotonic) and `wall`
    /// (wall-clock). Returns the keys whose reports changed (empty if refused).
    pub(crate) fn apply(&mut self, bytes: &[u8], now: Instant, wall: SystemTime) -> Vec<String> {
        self.apply_from(bytes, None, now, wall)
    }

    /// [`apply`](Self::apply), for a message read from `instance`'s heartbeat
    /// key if given: one from another instance is not this fleet's (the key of
    /// a fleet whose namespace extends this one's prefix, `{ns}:hb:x`, matches
    /// this fleet's scan), and is left out uncounted.
    pub(crate) fn apply_from(
        &mut self,
        bytes: &[u8],
        instance: Option<&str>,
        now: Instant,
        wall: SystemTime,
    ) -> Vec<String> {
        let (max_open, key) = (self.max_open, self.key.as_ref());
        let decoded = Message::decode_counted(bytes, wall, max_open, self.max_skew, key);
        let Decoded {
            mut message,
            refused,
            stamp,
            signed,
        } = match decoded {
            Ok(decoded) => decoded,
            Err(e) => {
                self.refused(e);
                return Vec::new();
            }
        };
        if instance.is_some_and(|i| i != message.instance()) {
            return Vec::new();
        }
        // Heartbeat entries left out, each counted by the rule it broke.
        refused.into_iter().for_each(|e| self.refused(e));
        if message.instance() == self.own {
            self.stats.own += 1;
            return Vec::new();
        }
        if let Some(e) = stamp.and_then(|sent| self.stale(sent, signed, wall)) {
            self.refused(e);
            return Vec::new();
        }
        // Overrides count whoever sends them (a signature, where the fleet has
        // a key, is the trust): a control message, or a heartbeat's relay.
        let overrides = match &mut message {
            Message::Control(o) => vec![o.clone()],
            Message::Heartbeat(h) => std::mem::take(&mut h.overrides),
            Message::Transition(_) => Vec::new(),
        };
        for o in overrides {
            // A relay's stamp is its heartbeat's: each override's own issue is
            // held to the skew as a control message's stamp is, or an issuer's
            // clock once ahead would outrank every later release.
            if self.is_ahead(o.issued_at, wall) {
                self.refused(Invalid::FromFuture);
                continue;
            }
            self.take_override(o, wall);
        }
        if matches!(message, Message::Control(_)) {
            self.stats.accepted += 1;
            return Vec::new();
        }
        let opens = peers::reports_open(&message, wall);
        let at = (now, wall);
        match peers::admit(
            &mut self.peers,
            message.instance(),
            opens,
            at,
            self.live_after,
        ) {
            Admission::In => {}
            Admission::Displaced => self.stats.peers_displaced += 1,
            Admission::Refused => {
                self.stats.peers_refused += 1;
                return Vec::new();
            }
        }
        let live_after = self.live_after;
        let Some(peer) = self.peers.get_mut(message.instance()) else {
            return Vec::new();
        };
        let live = peer.is_live(now, live_after);
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
            Message::Control(_) => return Vec::new(),
            Message::Heartbeat(h) if peer.out_of_order(h.sent_at, now, live_after) => {
                self.stats.out_of_order += 1;
                return Vec::new();
            }
            Message::Heartbeat(h) => {
                peer.sent = Some((h.sent_at, now));
                // Its age by the sender's clock, never negative: a sender whose
                // clock runs ahead reads as just heard.
                let age = wall.duration_since(h.sent_at).unwrap_or(Duration::ZERO);
                let heard = now.checked_sub(age);
                if heard > peer.heard || peer.heard.is_none() {
                    peer.heard = heard;
                }
                // A peer that was not live and is now: each of its reports
                // counts from now, so each key it held or holds may change its
                // quorum. A live one: only the keys whose entry changed do (a
                // heartbeat repeats the picture, and re-deciding each key it
                // lists, each beat, costs every instance keys x peers a beat).
                let woke = !live && peer.is_live(now, live_after);
                let before = std::mem::take(&mut peer.open);
                let last = h.open.iter().map(|e| e.until).max();
                let mut open: HashMap<String, OpenEntry> =
                    h.open.into_iter().map(|e| (e.key.clone(), e)).collect();
                if h.more {
                    // It listed its earliest-ending keys only: those it reported
                    // Open (by transition) that end no sooner than the last listed
                    // (with nothing listed, all of them) stay (keys tied at the
                    // cut may be held), within the bound.
                    let beyond = |e: &OpenEntry| last.is_none_or(|last| e.until >= last);
                    for (key, entry) in &before {
                        if beyond(entry) && open.len() < MAX_KEYS_PER_PEER {
                            open.entry(key.clone()).or_insert_with(|| entry.clone());
                        }
                    }
                }
                let mut changed: Vec<String> = before
                    .iter()
                    .filter(|(key, entry)| woke || open.get(*key) != Some(entry))
                    .map(|(key, _)| key.clone())
                    .collect();
                changed.extend(
                    open.iter()
                        .filter(|(key, entry)| woke || before.get(*key) != Some(entry))
                        .map(|(key, _)| key.clone()),
                );
                peer.open = open;
                changed.sort_unstable();
                changed.dedup();
                changed
            }
        };
        self.stats.accepted += 1;
        changed
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

    /// Takes override `o` if it is the key's latest; counted as an overflow if
    /// the table is full. Whether it was taken.
    pub(crate) fn take_override(&mut self, o: Override, wall: SystemTime) -> bool {
        match self.overrides.take(o, wall) {
            Some(taken) => taken,
            None => {
                self.stats.overflow += 1;
                false
            }
        }
    }

    /// The fleet-wide override in force for `key` at `wall`, if any.
    pub(crate) fn override_mode(&self, key: &str, wall: SystemTime) -> Option<OverrideMode> {
        self.overrides.mode(key, wall)
    }

    /// Forgets the overrides ended by `wall`; then the keys whose override in
    /// force differs from `set`, the mode the local breakers were last set to
    /// (see [`Overrides::changes`]), and when the next override ends.
    pub(crate) fn override_changes(
        &mut self,
        wall: SystemTime,
        set: &HashMap<String, OverrideMode>,
    ) -> (Vec<String>, Option<SystemTime>) {
        self.overrides.expire(wall);
        (self.overrides.changes(wall, set), self.overrides.next_end())
    }

    /// The overrides a heartbeat relays at `wall`.
    pub(crate) fn relay_overrides(&self, wall: SystemTime) -> Vec<Override> {
        self.overrides.relay(wall)
    }

    /// When to issue a new override of `key` at `wall` (see
    /// [`Overrides::issue_time`]).
    pub(crate) fn issue_time(&self, key: &str, wall: SystemTime) -> SystemTime {
        self.overrides.issue_time(key, wall)
    }

    /// A release of `key` by `issuer` at `wall` (see [`Overrides::release`]).
    pub(crate) fn release_override(&self, key: &str, issuer: &str, wall: SystemTime) -> Override {
        let linger = self.live_after.saturating_mul(2);
        self.overrides.release(key, issuer, wall, linger)
    }

    /// The view's own counters.
    pub(crate) fn stats(&self) -> FleetStats {
        self.stats
    }

    /// Forgets peers not heard from for far longer than the liveness age; the
    /// keys whose quorum may have changed with no message to say so: those
    /// the forgotten peers reported Open (whose reports changed), and, if the
    /// number of live peers changed since the last call (a peer aged out, or
    /// came back), every key a live peer reports Open, since a
    /// [`Fraction`](Quorum::Fraction)'s number needed follows it. Called on a
    /// tick: a quorum that quiet peers' ageing out makes is applied then.
    pub(crate) fn prune(&mut self, now: Instant) -> Vec<String> {
        let forget = self.live_after.saturating_mul(10);
        let mut keys = Vec::new();
        self.peers.retain(|_, p| {
            let keep = p.heard_within(now, forget);
            if !keep {
                keys.extend(p.open.keys().cloned());
            }
            keep
        });
        let live = self.live_peers(now);
        if live != self.live_seen {
            self.live_seen = live;
            let reported = (self.peers.values())
                .filter(|p| self.is_live(p, now))
                .flat_map(|p| p.open.keys().cloned());
            keys.extend(reported);
        }
        keys.sort_unstable();
        keys.dedup();
        keys
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
            overrides: Vec::new(),
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
            sent_at: None,
        })
        .encode()
    }

    /// A peer known only by an Open report (no heartbeat ever) is kept while
    /// its heartbeat may yet come, and forgotten as a silent peer is.
    #[test]
    fn a_peer_without_heartbeats_is_forgotten_as_a_silent_one() {
        let (now, wall) = (Instant::now(), SystemTime::now());
        let mut v = ViewState::new("me".into(), LIVE, MAX);
        v.apply(
            &transition("ghost", State::Open, Some(wall + LIVE)),
            now,
            wall,
        );
        v.prune(now + LIVE);
        assert_eq!(v.peer_count(), 1, "its heartbeat may yet come");
        v.prune(now + LIVE * 10);
        assert_eq!(v.peer_count(), 0, "silent for ten liveness ages");
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

    /// Under a fractional quorum the number needed follows the live peers:
    /// when quiet peers age out, the reports left may be a quorum with no
    /// message to say so, so the tick that finds the live count changed
    /// re-decides each key a live peer reports Open.
    #[test]
    fn a_quorum_reached_as_quiet_peers_age_out_is_re_decided() {
        let wall = SystemTime::UNIX_EPOCH
            + Duration::from_millis(crate::message::to_ms(SystemTime::now()));
        let now = Instant::now();
        let s = Duration::from_secs;
        let half = Quorum::Fraction {
            of_live: 0.5,
            at_least: NonZeroUsize::MIN,
        };
        let mut v = ViewState::new("me".into(), LIVE, MAX);
        let until = wall + s(60);
        for i in 0..6 {
            v.apply(&heartbeat(&format!("quiet{i}"), wall, &[]), now, wall);
        }
        for i in 0..4 {
            let beat = heartbeat(&format!("open{i}"), wall + s(2), &[("db", until)]);
            v.apply(&beat, now + s(2), wall + s(2));
        }
        let (now, wall) = (now + s(2), wall + s(2));
        assert_eq!(v.live_peers(now), 10);
        assert_eq!(v.verdict("db", half, now, wall), None, "4 of 10");
        v.prune(now);
        assert!(v.prune(now).is_empty(), "nothing changed");
        // The quiet ones, heard 2 s earlier, age out first.
        let (now, wall) = (now + s(2), wall + s(2));
        assert_eq!(v.live_peers(now), 4);
        assert_eq!(v.verdict("db", half, now, wall).map(|v| v.0), Some(until));
        assert_eq!(v.prune(now), ["db"], "4 of 4: re-decided");
        assert!(v.prune(now).is_empty(), "once");
    }

    /// A heartbeat that says it holds more than it lists keeps the keys its
    /// sender reported Open by transition that end no sooner than the last
    /// listed: with nothing listed, all of them. One that holds no more drops
    /// those it does not list.
    #[test]
    fn a_heartbeat_listing_nothing_but_more_keeps_every_reported_key() {
        let wall = SystemTime::UNIX_EPOCH
            + Duration::from_millis(crate::message::to_ms(SystemTime::now()));
        let now = Instant::now();
        let s = Duration::from_secs;
        let beat = |sent: SystemTime, more: bool| {
            Message::Heartbeat(Heartbeat {
                instance: "a".into(),
                sent_at: sent,
                open: Vec::new(),
                more,
                overrides: Vec::new(),
            })
            .encode()
        };
        let mut v = ViewState::new("me".into(), LIVE, MAX);
        v.apply(&beat(wall, false), now, wall);
        v.apply(&transition("a", State::Open, Some(wall + s(60))), now, wall);
        assert_eq!(v.open_reports("db", now, wall).len(), 1);
        let (now, wall) = (now + s(1), wall + s(1));
        assert!(v.apply(&beat(wall, true), now, wall).is_empty(), "kept");
        assert_eq!(v.open_reports("db", now, wall).len(), 1);
        let (now, wall) = (now + s(1), wall + s(1));
        assert_eq!(v.apply(&beat(wall, false), now, wall), ["db"], "dropped");
        assert!(v.open_reports("db", now, wall).is_empty());
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
            sent_at: None,
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

    /// A live peer's heartbeat that repeats its picture re-decides no key:
    /// only a new, changed or withdrawn entry does, or the peer becoming live
    /// (its reports count from then).
    #[test]
    fn a_repeated_heartbeat_re_decides_only_what_changed() {
        let wall = SystemTime::UNIX_EPOCH
            + Duration::from_millis(crate::message::to_ms(SystemTime::now()));
        let now = Instant::now();
        let s = Duration::from_secs;
        let mut v = ViewState::new("me".into(), LIVE, MAX);
        let until = wall + s(60);
        let both = [("db", until), ("cache", until)];
        assert_eq!(
            v.apply(&heartbeat("a", wall, &both), now, wall),
            ["cache", "db"]
        );
        let beat = heartbeat("a", wall + s(1), &both);
        assert!(v.apply(&beat, now + s(1), wall + s(1)).is_empty());
        let one = heartbeat("a", wall + s(2), &[("db", until)]);
        assert_eq!(
            v.apply(&one, now + s(2), wall + s(2)),
            ["cache"],
            "withdrawn"
        );
        let later = heartbeat("a", wall + s(3), &[("db", until + s(1))]);
        assert_eq!(v.apply(&later, now + s(3), wall + s(3)), ["db"], "changed");
        // Silent past `live_after`, then back: each key it lists counts again.
        let back = heartbeat("a", wall + s(10), &[("db", until + s(1))]);
        assert_eq!(
            v.apply(&back, now + s(10), wall + s(10)),
            ["db"],
            "live again"
        );
    }

    /// A message read from an instance's heartbeat key is taken only if that
    /// instance sent it: another fleet's key that this one's scan matches is
    /// left out, uncounted.
    #[test]
    fn a_message_read_under_another_instances_key_is_left_out() {
        let (now, wall) = (Instant::now(), SystemTime::now());
        let mut v = ViewState::new("me".into(), LIVE, MAX);
        let beat = heartbeat("a", wall, &[("db", wall + LIVE)]);
        assert!(v.apply_from(&beat, Some("b"), now, wall).is_empty());
        assert_eq!((v.peer_count(), v.stats.accepted), (0, 0));
        assert_eq!(v.apply_from(&beat, Some("a"), now, wall), ["db"]);
        assert_eq!((v.peer_count(), v.stats.accepted), (1, 1));
    }

    /// A control message taken is counted as accepted; it changes no key's
    /// reports.
    #[test]
    fn a_control_message_taken_is_counted_accepted() {
        let wall = SystemTime::UNIX_EPOCH
            + Duration::from_millis(crate::message::to_ms(SystemTime::now()));
        let now = Instant::now();
        let mut v = ViewState::new("me".into(), LIVE, MAX);
        let o = Override {
            key: "db".into(),
            mode: OverrideMode::ForceOpen,
            issuer: "ops".into(),
            issued_at: wall,
            until: wall + Duration::from_secs(60),
        };
        assert!(v.apply(&Message::Control(o).encode(), now, wall).is_empty());
        assert_eq!(v.stats.accepted, 1);
        assert_eq!(v.override_mode("db", wall), Some(OverrideMode::ForceOpen));
    }

    /// A heartbeat that holds more than it lists keeps the keys its sender
    /// reported by transition, up to `MAX_KEYS_PER_PEER` in all, the listed
    /// ones first.
    #[test]
    fn keys_kept_past_a_heartbeats_list_stay_within_the_bound() {
        let wall = SystemTime::UNIX_EPOCH
            + Duration::from_millis(crate::message::to_ms(SystemTime::now()));
        let now = Instant::now();
        let s = Duration::from_secs;
        let mut v = ViewState::new("me".into(), LIVE, MAX);
        v.apply(&heartbeat("a", wall, &[]), now, wall);
        for i in 0..MAX_KEYS_PER_PEER {
            let report = Message::Transition(Report {
                key: format!("k{i}"),
                instance: "a".into(),
                generation: 1,
                state: State::Open,
                open_until: Some(wall + s(60)),
                level: 0,
                reason: "failure_rate".into(),
                sent_at: None,
            });
            v.apply(&report.encode(), now, wall);
        }
        assert_eq!(v.peers["a"].open.len(), MAX_KEYS_PER_PEER);
        let beat = Message::Heartbeat(Heartbeat {
            instance: "a".into(),
            sent_at: wall + s(1),
            open: vec![OpenEntry {
                key: "new".into(),
                until: wall + s(30),
                generation: 1,
                level: 0,
                external: false,
            }],
            more: true,
            overrides: Vec::new(),
        });
        v.apply(&beat.encode(), now + s(1), wall + s(1));
        let open = &v.peers["a"].open;
        assert_eq!(open.len(), MAX_KEYS_PER_PEER);
        assert!(open.contains_key("new"), "the listed key first");
    }

    /// Every key a live peer reports Open with a deadline after `wall`, once
    /// each, sorted: none of a peer that is not live, nor one ending at `wall`.
    #[test]
    fn open_keys_lists_each_live_report_once() {
        let wall = SystemTime::UNIX_EPOCH
            + Duration::from_millis(crate::message::to_ms(SystemTime::now()));
        let now = Instant::now() + LIVE * 2;
        let s = Duration::from_secs;
        let mut v = ViewState::new("me".into(), LIVE, MAX);
        let a = [
            ("db", wall + s(5)),
            ("cache", wall + s(5)),
            ("ends", wall + s(1)),
        ];
        v.apply(&heartbeat("a", wall, &a), now, wall);
        v.apply(&heartbeat("b", wall, &[("db", wall + s(9))]), now, wall);
        let quiet = heartbeat("quiet", wall - LIVE, &[("gone", wall + s(5))]);
        v.apply(&quiet, now, wall);
        assert_eq!(v.live_peers(now), 2);
        assert_eq!(v.open_keys(now, wall), ["cache", "db", "ends"]);
        assert_eq!(v.open_keys(now, wall + s(1)), ["cache", "db"], "ended");
    }
}
