//! A model-based test of the fleet view: random sequences of transitions,
//! heartbeats and clock steps, from peers "a".."d" (and this instance's own
//! echo, "me"), for a few keys, are applied to a `ViewHarness` and, side by side,
//! to a plain reference model written from the documented semantics (the crate
//! docs, `Heartbeat::more`, `FleetStats`, the README's fleet section). After
//! every step the verdict of every key under several quorums, and the counters
//! the docs pin, must agree.
//!
//! The documented rules the model follows:
//! - a peer is live while its latest heartbeat is younger than `live_after`,
//!   the age read against this host's clock (never negative: a sender whose
//!   clock runs ahead reads as just heard);
//! - a message stamped later than this host's wall clock plus the skew allowed
//!   (1 s by default) is refused, and counted `from_future`;
//! - a heartbeat sent before one already applied from its peer, less than
//!   `live_after` (by this host's monotonic clock) after that one was applied, is
//!   ignored, and counted `out_of_order`;
//! - a transition from a peer that is not live is kept, counted `not_live`, and
//!   counts for nothing until a heartbeat makes the peer live;
//! - a heartbeat replaces the peer's Open keys; with `more`, the sender holds more
//!   keys than it lists, each ending no sooner than the last listed, and the
//!   receiver keeps those it learned that end no sooner than that (with nothing
//!   listed, all of them);
//! - a report whose deadline has passed counts for nothing; an Open deadline
//!   further than `max_open` ahead is refused (a transition whole, a heartbeat
//!   entry alone), counted `deadline_too_far`;
//! - an external open (an echo of a quorum) is shown but never counts;
//! - a quorum is as many non-external reports as `Quorum` asks of the live
//!   peers (`AtLeast(k)`: `k`; `Fraction`: the fewest `k` whose share `k / live`,
//!   in `f64`, is at least `of_live`, and never fewer than `at_least`), and its
//!   deadline the earliest of them.

use cutout::{Reason, State};
use cutout_fleet::testing::ViewHarness;
use cutout_fleet::{Heartbeat, Message, OpenEntry, Quorum, Report};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::num::NonZeroUsize;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Whole milliseconds, as on the wire.
const WALL_MS: u64 = 1_800_000_000_000;
const LIVE_MS: i64 = 3_000;
/// The default skew allowed: `FleetConfig::max_skew`.
const SKEW_MS: i64 = 1_000;
const MAX_OPEN_MS: i64 = 60_000;
const PEERS: [&str; 5] = ["a", "b", "c", "d", "me"];
const OWN: usize = 4;
const KEYS: [&str; 3] = ["k0", "k1", "k2"];
/// `Heartbeat::more`: the keys held but not listed end "no sooner than the last
/// listed", so a key learned ending exactly then may still be held, and is kept.
const TIES_KEPT: bool = true;
/// Whether "the last listed" counts an entry the receiver left out (a deadline
/// beyond its `max_open`). The docs are ambiguous: `Heartbeat::more` speaks of
/// the last the sender listed, `Message::decode` says a refused entry "is left
/// out of the heartbeat". The code takes the last entry it kept (view.rs, `last`
/// over the decoded entries), so a learned key ending between the last kept
/// entry and the last refused one stays until its deadline; the model follows
/// the code here.
const LAST_OVER_REFUSED: bool = false;

// ---------------------------------------------------------------- the events

#[derive(Clone, Debug)]
enum Kind {
    /// Open until `until` ms after the current wall time.
    Open {
        until: i64,
    },
    Closed,
    HalfOpen,
    Recovering,
}

#[derive(Clone, Copy, Debug)]
enum Gen {
    Next,
    Same,
    Older,
    Restart,
}

#[derive(Clone, Copy, Debug)]
enum Sent {
    /// `off` ms from the current wall time.
    Rel(i64),
    /// The peer's last applied heartbeat's `sent_at`, again.
    SameAsLast,
    /// `d` ms before the peer's last applied heartbeat's `sent_at`.
    Older(i64),
}

#[derive(Clone, Debug)]
struct Entry {
    key: usize,
    /// ms after the current wall time.
    until: i64,
    generation: u32,
    external: bool,
}

#[derive(Clone, Debug)]
enum Event {
    Now(i64),
    Wall(i64),
    Both(i64),
    Transition {
        peer: usize,
        key: usize,
        kind: Kind,
        generation: Gen,
        external: bool,
    },
    Heartbeat {
        peer: usize,
        sent: Sent,
        entries: Vec<Entry>,
        more: bool,
    },
    /// A heartbeat listing what the model says the peer holds, earliest-ending
    /// first (ties by key, descending), the first `n` of them, with `more` if it
    /// holds more: what a sender over `MAX_OPEN_PER_HEARTBEAT` sends.
    Truncated {
        peer: usize,
        sent: Sent,
        n: usize,
    },
}

fn peer() -> impl Strategy<Value = usize> {
    prop_oneof![12 => 0usize..4, 1 => Just(OWN)]
}

fn until() -> impl Strategy<Value = i64> {
    prop_oneof![
        10 => (-4i64..=24).prop_map(|k| k * 500),
        1 => Just(MAX_OPEN_MS),
        1 => MAX_OPEN_MS + 1..MAX_OPEN_MS + 3_000,
    ]
}

fn sent() -> impl Strategy<Value = Sent> {
    prop_oneof![
        6 => (-16i64..=6).prop_map(|k| Sent::Rel(k * 250)),
        1 => Just(Sent::SameAsLast),
        2 => (1i64..=8).prop_map(|k| Sent::Older(k * 250)),
    ]
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        4 => until().prop_map(|until| Kind::Open { until }),
        2 => Just(Kind::Closed),
        1 => Just(Kind::HalfOpen),
        1 => Just(Kind::Recovering),
    ]
}

fn generation() -> impl Strategy<Value = Gen> {
    prop_oneof![
        4 => Just(Gen::Next),
        1 => Just(Gen::Same),
        1 => Just(Gen::Older),
        1 => Just(Gen::Restart),
    ]
}

fn entry() -> impl Strategy<Value = Entry> {
    (
        0usize..KEYS.len(),
        until(),
        0u32..6,
        prop::bool::weighted(0.2),
    )
        .prop_map(|(key, until, generation, external)| Entry {
            key,
            until,
            generation,
            external,
        })
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        3 => (0i64..=8).prop_map(|k| Event::Now(k * 250)),
        3 => (-8i64..=8).prop_map(|k| Event::Wall(k * 250)),
        2 => (0i64..=8).prop_map(|k| Event::Both(k * 250)),
        8 => (peer(), 0usize..KEYS.len(), kind(), generation(), prop::bool::weighted(0.2))
            .prop_map(|(peer, key, kind, generation, external)| Event::Transition {
                peer,
                key,
                kind,
                generation,
                external,
            }),
        6 => (peer(), sent(), prop::collection::vec(entry(), 0..4), prop::bool::weighted(0.4))
            .prop_map(|(peer, sent, entries, more)| Event::Heartbeat {
                peer,
                sent,
                entries,
                more,
            }),
        2 => (peer(), sent(), 0usize..4).prop_map(|(peer, sent, n)| Event::Truncated {
            peer,
            sent,
            n,
        }),
    ]
}

// ---------------------------------------------------------------- the model

/// One key a peer reports Open: its deadline (ms of wall time) and whether it is
/// an external open.
#[derive(Clone, Copy, Debug, PartialEq)]
struct MEntry {
    until: i64,
    generation: u32,
    external: bool,
}

#[derive(Clone, Debug, Default)]
struct MPeer {
    /// When its youngest applied heartbeat was sent, as this host's monotonic ms.
    heard: Option<i64>,
    /// Its latest applied heartbeat's `sent_at` (wall ms), and when it was
    /// applied (monotonic ms).
    sent: Option<i64>,
    applied: i64,
    open: BTreeMap<usize, MEntry>,
    /// The last generation it used per key (only to generate inputs).
    generation: BTreeMap<usize, u32>,
}

#[derive(Clone, Debug, Default, PartialEq)]
struct MStats {
    accepted: u64,
    deadline_too_far: u64,
    not_live: u64,
    out_of_order: u64,
    from_future: u64,
    own: u64,
}

#[derive(Debug, Default)]
struct Model {
    /// Monotonic ms since the test's origin.
    now: i64,
    /// Wall-clock ms since the test's origin.
    wall: i64,
    peers: [MPeer; 4],
    stats: MStats,
}

impl Model {
    fn live(&self, p: &MPeer) -> bool {
        p.heard.is_some_and(|h| self.now - h < LIVE_MS)
    }

    fn too_far(&self, until: i64) -> bool {
        until > self.wall + MAX_OPEN_MS
    }

    /// `Quorum`'s documented rule, by search: the fewest of the live peers whose
    /// share is at least the fraction (none of none).
    fn needed(quorum: Quorum, live: usize) -> usize {
        match quorum {
            Quorum::AtLeast(k) => k.get(),
            Quorum::Fraction { of_live, at_least } => (0..=live)
                .find(|&k| live == 0 || k as f64 / live as f64 >= of_live)
                .expect("all the live peers are every share")
                .max(at_least.get()),
        }
    }

    /// The earliest deadline of a quorum's reports for `key`, if a quorum has one.
    fn verdict(&self, key: usize, quorum: Quorum) -> Option<i64> {
        let live: Vec<&MPeer> = self.peers.iter().filter(|p| self.live(p)).collect();
        let reports: Vec<i64> = live
            .iter()
            .filter_map(|p| p.open.get(&key))
            .filter(|e| e.until > self.wall && !e.external)
            .map(|e| e.until)
            .collect();
        (reports.len() >= Self::needed(quorum, live.len()))
            .then(|| reports.iter().copied().min())
            .flatten()
    }

    fn resolve_sent(&self, peer: usize, sent: Sent) -> i64 {
        let last = if peer == OWN {
            None
        } else {
            self.peers[peer].sent
        };
        match (sent, last) {
            (Sent::Rel(off), _) => self.wall + off,
            (Sent::SameAsLast, Some(last)) => last,
            (Sent::Older(d), Some(last)) => last - d,
            (Sent::SameAsLast, None) => self.wall,
            (Sent::Older(d), None) => self.wall - d,
        }
    }

    /// A transition; the keys whose report from this peer changed.
    fn transition(
        &mut self,
        peer: usize,
        key: usize,
        until: Option<i64>,
        generation: u32,
        external: bool,
    ) -> BTreeSet<usize> {
        if until.is_some_and(|u| self.too_far(u)) {
            self.stats.deadline_too_far += 1;
            return BTreeSet::new();
        }
        if peer == OWN {
            self.stats.own += 1;
            return BTreeSet::new();
        }
        if !self.live(&self.peers[peer]) {
            self.stats.not_live += 1;
        }
        self.stats.accepted += 1;
        let p = &mut self.peers[peer];
        let before = p.open.get(&key).copied();
        match until {
            Some(until) => {
                p.open.insert(
                    key,
                    MEntry {
                        until,
                        generation,
                        external,
                    },
                );
            }
            None => {
                p.open.remove(&key);
            }
        }
        let after = p.open.get(&key).copied();
        if before != after {
            BTreeSet::from([key])
        } else {
            BTreeSet::new()
        }
    }

    /// A heartbeat (entries with absolute deadlines); the keys whose report from
    /// this peer changed.
    fn heartbeat(
        &mut self,
        peer: usize,
        sent: i64,
        entries: &[(usize, MEntry)],
        more: bool,
    ) -> BTreeSet<usize> {
        // Each entry beyond `max_open` is left out, and counted, on decoding.
        let accepted: Vec<(usize, MEntry)> = entries
            .iter()
            .copied()
            .filter(|(_, e)| !self.too_far(e.until))
            .collect();
        self.stats.deadline_too_far += (entries.len() - accepted.len()) as u64;
        if peer == OWN {
            self.stats.own += 1;
            return BTreeSet::new();
        }
        let (now, wall) = (self.now, self.wall);
        if sent > wall + SKEW_MS {
            self.stats.from_future += 1;
            return BTreeSet::new();
        }
        let p = &mut self.peers[peer];
        if p.sent.is_some_and(|last| sent < last) && now - p.applied < LIVE_MS {
            self.stats.out_of_order += 1;
            return BTreeSet::new();
        }
        self.stats.accepted += 1;
        p.sent = Some(sent);
        p.applied = now;
        let heard = now - (wall - sent).max(0);
        p.heard = Some(p.heard.map_or(heard, |h| h.max(heard)));
        let mut open: BTreeMap<usize, MEntry> = accepted.iter().copied().collect();
        if more {
            // "It holds more keys Open than it lists, each ending no sooner than
            // the last listed: a receiver keeps those it learned [...] that end
            // no sooner than the last listed (with nothing listed, all of them)."
            let last = match LAST_OVER_REFUSED {
                true => entries.iter().map(|(_, e)| e.until).max(),
                false => accepted.iter().map(|(_, e)| e.until).max(),
            };
            let beyond = |until: i64, last: i64| match TIES_KEPT {
                true => until >= last,
                false => until > last,
            };
            for (k, e) in &p.open {
                if !open.contains_key(k) && last.is_none_or(|last| beyond(e.until, last)) {
                    open.insert(*k, *e);
                }
            }
        }
        let mut changed = BTreeSet::new();
        for k in p.open.keys().chain(open.keys()) {
            if p.open.get(k) != open.get(k) {
                changed.insert(*k);
            }
        }
        p.open = open;
        changed
    }
}

// ---------------------------------------------------------------- the run

fn wall_time(ms: i64) -> SystemTime {
    let base = UNIX_EPOCH + Duration::from_millis(WALL_MS);
    if ms >= 0 {
        base + Duration::from_millis(ms as u64)
    } else {
        base - Duration::from_millis(ms.unsigned_abs())
    }
}

fn wall_ms(t: SystemTime) -> i64 {
    (t.duration_since(UNIX_EPOCH).unwrap().as_millis() as i64) - WALL_MS as i64
}

fn quorums() -> Vec<Quorum> {
    let n = |k| NonZeroUsize::new(k).unwrap();
    vec![
        Quorum::AtLeast(n(1)),
        Quorum::AtLeast(n(2)),
        Quorum::AtLeast(n(3)),
        Quorum::Fraction {
            of_live: 0.5,
            at_least: n(1),
        },
        Quorum::Fraction {
            of_live: 0.75,
            at_least: n(2),
        },
        Quorum::Fraction {
            of_live: 2.0 / 3.0,
            at_least: n(1),
        },
    ]
}

fn run(events: &[Event]) -> Result<(), TestCaseError> {
    let origin = Instant::now() + Duration::from_secs(3_600);
    let mut view = ViewHarness::new(
        "me",
        Duration::from_millis(LIVE_MS as u64),
        Duration::from_millis(MAX_OPEN_MS as u64),
    );
    let mut model = Model::default();
    for (step, event) in events.iter().enumerate() {
        let (now, wall) = (
            origin + Duration::from_millis(model.now as u64),
            wall_time(model.wall),
        );
        let mut sent_bytes: Option<(Vec<u8>, BTreeSet<usize>)> = None;
        match event {
            Event::Now(d) => model.now += d,
            Event::Wall(d) => model.wall += d,
            Event::Both(d) => {
                model.now += d;
                model.wall += d;
            }
            Event::Transition {
                peer,
                key,
                kind,
                generation,
                external,
            } => {
                let last = model
                    .peers
                    .get(*peer)
                    .and_then(|p| p.generation.get(key).copied())
                    .unwrap_or(0);
                let g = match generation {
                    Gen::Next => last + 1,
                    Gen::Same => last,
                    Gen::Older => last.saturating_sub(1),
                    Gen::Restart => 1,
                };
                if let Some(p) = model.peers.get_mut(*peer) {
                    p.generation.insert(*key, g);
                }
                let (state, until) = match kind {
                    Kind::Open { until } => (State::Open, Some(model.wall + until)),
                    Kind::Closed => (State::Closed, None),
                    Kind::HalfOpen => (State::HalfOpen, None),
                    Kind::Recovering => (State::Recovering, None),
                };
                let reason = if *external {
                    Reason::External.as_str()
                } else {
                    Reason::ConsecutiveFailures.as_str()
                };
                let bytes = Message::Transition(Report {
                    key: KEYS[*key].into(),
                    instance: PEERS[*peer].into(),
                    generation: g,
                    state,
                    open_until: until.map(wall_time),
                    level: 1,
                    reason: reason.into(),
                    sent_at: None,
                })
                .encode();
                let changed = model.transition(*peer, *key, until, g, *external);
                sent_bytes = Some((bytes, changed));
            }
            Event::Heartbeat {
                peer,
                sent,
                entries,
                more,
            } => {
                let sent = model.resolve_sent(*peer, *sent);
                // One entry per key (the first), as a sender lists them.
                let mut seen = BTreeSet::new();
                let listed: Vec<(usize, MEntry)> = entries
                    .iter()
                    .filter(|e| seen.insert(e.key))
                    .map(|e| {
                        (
                            e.key,
                            MEntry {
                                until: model.wall + e.until,
                                generation: e.generation,
                                external: e.external,
                            },
                        )
                    })
                    .collect();
                let bytes = encode_heartbeat(*peer, sent, &listed, *more);
                let changed = model.heartbeat(*peer, sent, &listed, *more);
                sent_bytes = Some((bytes, changed));
            }
            Event::Truncated { peer, sent, n } => {
                let sent = model.resolve_sent(*peer, *sent);
                let mut held: Vec<(usize, MEntry)> = model
                    .peers
                    .get(*peer)
                    .map(|p| {
                        p.open
                            .iter()
                            .filter(|(_, e)| e.until > model.wall)
                            .map(|(k, e)| (*k, *e))
                            .collect()
                    })
                    .unwrap_or_default();
                held.sort_by(|a, b| a.1.until.cmp(&b.1.until).then(b.0.cmp(&a.0)));
                let more = *n < held.len();
                held.truncate(*n);
                let bytes = encode_heartbeat(*peer, sent, &held, more);
                let changed = model.heartbeat(*peer, sent, &held, more);
                sent_bytes = Some((bytes, changed));
            }
        }
        if let Some((bytes, changed)) = sent_bytes {
            let reported: BTreeSet<usize> = view
                .apply(&bytes, now, wall)
                .iter()
                .map(|k| KEYS.iter().position(|x| x == k).expect("a known key"))
                .collect();
            prop_assert!(
                changed.is_subset(&reported),
                "step {step}: reports of {changed:?} changed, apply returned {reported:?}"
            );
        }
        let (now, wall) = (
            origin + Duration::from_millis(model.now as u64),
            wall_time(model.wall),
        );
        for (key, name) in KEYS.iter().enumerate() {
            for quorum in quorums() {
                let got = view.verdict(name, quorum, now, wall).map(wall_ms);
                let want = model.verdict(key, quorum);
                prop_assert_eq!(
                    got,
                    want,
                    "step {}: verdict of {} under {:?} (now {} ms, wall {} ms); model {:?}",
                    step,
                    name,
                    quorum,
                    model.now,
                    model.wall,
                    model.peers
                );
            }
        }
        let s = view.stats();
        let got = MStats {
            accepted: s.accepted,
            deadline_too_far: s.deadline_too_far,
            not_live: s.not_live,
            out_of_order: s.out_of_order,
            from_future: s.from_future,
            own: s.own,
        };
        prop_assert_eq!(&got, &model.stats, "step {}: stats", step);
        prop_assert_eq!(
            (
                s.too_large,
                s.garbage,
                s.unknown_version,
                s.bad_field,
                s.overflow
            ),
            (0, 0, 0, 0, 0),
            "step {}: refusals the run never causes",
            step
        );
    }
    Ok(())
}

fn encode_heartbeat(peer: usize, sent: i64, listed: &[(usize, MEntry)], more: bool) -> Vec<u8> {
    Message::Heartbeat(Heartbeat {
        instance: PEERS[peer].into(),
        sent_at: wall_time(sent),
        open: listed
            .iter()
            .map(|(k, e)| OpenEntry {
                key: KEYS[*k].into(),
                until: wall_time(e.until),
                generation: e.generation,
                level: 1,
                external: e.external,
            })
            .collect(),
        more,
        overrides: Vec::new(),
    })
    .encode()
}

proptest! {
    // No regressions file: the shrunk case is pinned below as a plain test.
    #![proptest_config(ProptestConfig {
        cases: 1024,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn the_view_agrees_with_the_documented_model(
        events in prop::collection::vec(event(), 1..60),
    ) {
        run(&events)?;
    }
}

// ---------------------------------------------------------------- the defects, pinned

fn open_report(id: &str, key: &str, until: SystemTime, generation: u32) -> Vec<u8> {
    Message::Transition(Report {
        key: key.into(),
        instance: id.into(),
        generation,
        state: State::Open,
        open_until: Some(until),
        level: 1,
        reason: Reason::ConsecutiveFailures.as_str().into(),
        sent_at: None,
    })
    .encode()
}

/// The shrunk case of the model test, through transitions: two peers each hold
/// "listed" and "extra" Open until the same millisecond (tripped together, with
/// one cooldown) and list only the earliest-ending key, saying they hold more.
/// `Heartbeat::more`: the keys it does not list end "no sooner than the last
/// listed", and the receiver keeps those it learned; "extra" ends exactly then.
#[test]
fn a_learned_key_ending_with_the_last_listed_stays_when_the_sender_holds_more() {
    let (now, wall) = (Instant::now(), wall_time(0));
    let two = Quorum::AtLeast(NonZeroUsize::new(2).unwrap());
    let mut v = ViewHarness::new(
        "me",
        Duration::from_millis(LIVE_MS as u64),
        Duration::from_millis(MAX_OPEN_MS as u64),
    );
    let until = wall + Duration::from_secs(10);
    let listed = [(
        0,
        MEntry {
            until: 10_000,
            generation: 1,
            external: false,
        },
    )];
    for (i, id) in ["a", "b"].into_iter().enumerate() {
        v.apply(&encode_heartbeat(i, 0, &[], false), now, wall);
        v.apply(&open_report(id, "k0", until, 1), now, wall);
        v.apply(&open_report(id, "k1", until, 1), now, wall);
    }
    assert_eq!(v.verdict("k1", two, now, wall), Some(until), "sanity");
    for i in 0..2 {
        v.apply(&encode_heartbeat(i, 0, &listed, true), now, wall);
    }
    assert_eq!(
        v.verdict("k1", two, now, wall),
        Some(until),
        "k1 ends no sooner than the last listed (k0, same deadline): kept"
    );
}

/// `FleetStats::not_live` counts transition reports from a sender that was not
/// live, "kept, but they count for nothing": a report refused for the per-peer
/// bound is not kept, and is counted `overflow` only.
#[test]
fn a_report_refused_for_overflow_is_not_counted_not_live() {
    let (now, wall) = (Instant::now(), wall_time(0));
    let mut v = ViewHarness::new(
        "me",
        Duration::from_millis(LIVE_MS as u64),
        Duration::from_millis(MAX_OPEN_MS as u64),
    );
    let until = wall + Duration::from_secs(10);
    let max = cutout_fleet::MAX_KEYS_PER_PEER;
    for i in 0..=max {
        v.apply(&open_report("a", &format!("k{i}"), until, 1), now, wall);
    }
    let s = v.stats();
    assert_eq!(s.overflow, 1, "the last is refused");
    assert_eq!(s.accepted, max as u64);
    assert_eq!(s.not_live, max as u64, "only the kept reports are not_live");
}

fn fraction(of_live: f64) -> Quorum {
    Quorum::Fraction {
        of_live,
        at_least: NonZeroUsize::MIN,
    }
}

/// `Quorum::Fraction`: "At least this share (in (0, 1]) of the live peers,
/// rounded up". 7% of 100 live peers is 7, 55% of 100 is 55, 14% of 50 is 7, 28%
/// of 25 is 7; multiplied in binary floating point (`0.07 * 100.0` is
/// `7.000000000000001`) and rounded up, the share asked for 8, 56, 8 and 8: one
/// peer more than the configured share, so exactly that share of peers reporting
/// a key Open never opened it.
#[test]
fn a_fraction_quorum_of_a_whole_share_asks_for_exactly_that_share() {
    let got = [
        (fraction(0.07).needed(100), 7),
        (fraction(0.55).needed(100), 55),
        (fraction(0.14).needed(50), 7),
        (fraction(0.28).needed(25), 7),
        (fraction(2.0 / 3.0).needed(3), 2),
        (fraction(2.0 / 3.0).needed(300), 200),
    ];
    assert!(
        got.iter().all(|(needed, share)| needed == share),
        "(needed, the share rounded up): {got:?}"
    );
}

/// Every share in thousandths, of every count of live peers a view holds: a
/// fraction of `p / 1000` asks for `ceil(p * live / 1000)` peers (in integers,
/// exact), at least one, as the model's rule (a search, compared up to 64 live
/// peers) says too; and the floor `at_least` holds.
#[test]
fn a_fraction_quorum_rounds_a_decimal_share_up_exactly() {
    for p in 1..=1000usize {
        let of_live = p as f64 / 1000.0;
        for live in 0..=cutout_fleet::MAX_PEERS {
            let exact = (p * live).div_ceil(1000).max(1);
            let needed = fraction(of_live).needed(live);
            assert_eq!(needed, exact, "{p}/1000 of {live} live peers");
            if live <= 64 {
                assert_eq!(needed, Model::needed(fraction(of_live), live), "the model");
            }
        }
    }
    let floor = Quorum::Fraction {
        of_live: 0.001,
        at_least: NonZeroUsize::new(3).unwrap(),
    };
    assert_eq!((floor.needed(10), floor.needed(2_000)), (3, 3));
    assert_eq!(floor.needed(3_001), 4);
}
