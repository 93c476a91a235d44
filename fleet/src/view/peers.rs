//! The view's peer table: bounded, and shaped so that a flood of made-up
//! instance ids cannot lock a real peer out.
//!
//! An entry holds its place while its peer has news (a message taken, of any
//! kind) younger than `live_after`; past that, any newcomer may take it. When
//! every place is held, a newcomer that reports a key Open takes the place of a
//! peer that is not both live and reporting one (one that is not live first,
//! then the oldest news); a newcomer that reports none is refused. So a live
//! peer that reports a key Open, the evidence a quorum counts, is never
//! displaced; and a peer that trips during a flood of empty heartbeats gets in
//! with its report. Ids that only send Open reports, never a heartbeat, count
//! for no quorum, yet take places as any newcomer that reports one: with every
//! place held, each displaces a peer that is not live (such as another of
//! them) first, else a live one that reports nothing.

use super::MAX_PEERS;
use crate::message::{Message, OpenEntry};
use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime};

#[derive(Debug)]
pub(crate) struct Peer {
    /// When its latest message that found a place arrived, as this host's
    /// monotonic time: its place is its own for `live_after` from then.
    news: Instant,
    /// When its latest heartbeat was sent, as this host's monotonic time.
    pub(crate) heard: Option<Instant>,
    /// Its latest applied heartbeat's stamp (by its own clock), and when (by
    /// this host's monotonic clock) it was applied: an older one is not applied
    /// over it for `live_after` from then.
    pub(crate) sent: Option<(SystemTime, Instant)>,
    /// Keys it reports Open.
    pub(crate) open: HashMap<String, OpenEntry>,
}

impl Peer {
    fn new(now: Instant) -> Peer {
        Peer {
            news: now,
            heard: None,
            sent: None,
            open: HashMap::new(),
        }
    }

    pub(crate) fn is_live(&self, now: Instant, live_after: Duration) -> bool {
        self.heard
            .is_some_and(|h| now.saturating_duration_since(h) < live_after)
    }

    /// Whether it was heard from within `age` of `now`: its latest heartbeat,
    /// or, for a peer known by its Open reports alone (a transition before its
    /// first heartbeat), its latest message.
    pub(crate) fn heard_within(&self, now: Instant, age: Duration) -> bool {
        let within = |t: Instant| now.saturating_duration_since(t) < age;
        match self.heard {
            Some(heard) => within(heard),
            None => !self.open.is_empty() && within(self.news),
        }
    }

    /// Whether a heartbeat stamped `sent` is older than the last one applied,
    /// which was applied less than `live_after` ago. Bounded, so that no stamp
    /// (a clock stepped back on either side) holds a peer's heartbeats off for
    /// longer: past `live_after` the peer is no longer live anyway, and its next
    /// heartbeat is taken whatever its stamp.
    pub(crate) fn out_of_order(
        &self,
        sent: SystemTime,
        now: Instant,
        live_after: Duration,
    ) -> bool {
        self.sent.is_some_and(|(last, applied)| {
            sent < last && now.saturating_duration_since(applied) < live_after
        })
    }

    /// Whether it reports some key Open as evidence: not an external open, and
    /// ending after `wall`.
    fn reports_open(&self, wall: SystemTime) -> bool {
        self.open
            .values()
            .any(|e| evidence(e.external, e.until, wall))
    }
}

fn evidence(external: bool, until: SystemTime, wall: SystemTime) -> bool {
    !external && until > wall
}

/// Whether `message` reports some key Open as evidence.
pub(crate) fn reports_open(message: &Message, wall: SystemTime) -> bool {
    match message {
        Message::Transition(r) => r.open_until.is_some_and(|until| {
            evidence(r.reason == cutout::Reason::External.as_str(), until, wall)
        }),
        Message::Heartbeat(h) => h.open.iter().any(|e| evidence(e.external, e.until, wall)),
        Message::Control(_) => false,
    }
}

/// What became of a message's sender in the table (every message that finds a
/// place is news).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Admission {
    /// It has a place (it had one, or took a free or expired one).
    In,
    /// It took the place of a live peer that reports no key Open.
    Displaced,
    /// No place for it.
    Refused,
}

/// Finds `id` a place in `peers`, a message from it at hand (`opens`: whether
/// the message reports a key Open); on `In` or `Displaced`, `peers` holds `id`.
pub(crate) fn admit(
    peers: &mut HashMap<String, Peer>,
    id: &str,
    opens: bool,
    (now, wall): (Instant, SystemTime),
    live_after: Duration,
) -> Admission {
    if let Some(peer) = peers.get_mut(id) {
        peer.news = peer.news.max(now);
        return Admission::In;
    }
    let mut admission = Admission::In;
    if peers.len() >= MAX_PEERS {
        // The oldest news first. (A live peer has news: its heartbeat.)
        let expired = peers
            .iter()
            .filter(|(_, p)| now.saturating_duration_since(p.news) >= live_after)
            .min_by_key(|(_, p)| p.news);
        let victim = match expired {
            Some((victim, _)) => victim.clone(),
            None if !opens => return Admission::Refused,
            None => {
                let idle = peers
                    .iter()
                    .map(|(id, p)| (id, p, p.is_live(now, live_after)))
                    .filter(|(_, p, live)| !(*live && p.reports_open(wall)))
                    .min_by_key(|(_, p, live)| (*live, p.news));
                let Some((victim, ..)) = idle else {
                    return Admission::Refused;
                };
                admission = Admission::Displaced;
                victim.clone()
            }
        };
        peers.remove(&victim);
    }
    peers.insert(id.to_owned(), Peer::new(now));
    admission
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIVE: Duration = Duration::from_secs(3);

    fn live(now: Instant, opens: bool, wall: SystemTime) -> Peer {
        let mut p = Peer::new(now);
        p.heard = Some(now);
        if opens {
            let e = OpenEntry {
                key: "db".into(),
                until: wall + LIVE,
                generation: 1,
                level: 0,
                external: false,
            };
            p.open.insert("db".into(), e);
        }
        p
    }

    #[test]
    fn a_full_table_takes_the_expired_then_displaces_only_the_idle() {
        let (now, wall) = (Instant::now(), SystemTime::now());
        let mut peers = HashMap::new();
        for i in 0..MAX_PEERS {
            peers.insert(format!("p{i}"), live(now, i % 2 == 0, wall));
        }
        let at = (now, wall);
        assert_eq!(admit(&mut peers, "p0", false, at, LIVE), Admission::In);
        assert_eq!(
            admit(&mut peers, "new", false, at, LIVE),
            Admission::Refused
        );
        assert_eq!(
            admit(&mut peers, "new", true, at, LIVE),
            Admission::Displaced
        );
        assert_eq!(peers.len(), MAX_PEERS);
        assert!(peers.contains_key("new"));
        let kept = (0..MAX_PEERS)
            .step_by(2)
            .all(|i| peers.contains_key(&format!("p{i}")));
        assert!(kept, "every peer that reports an open keeps its place");
        // Past `live_after`, every place is open to anyone.
        let later = (now + LIVE, wall + LIVE);
        assert_eq!(
            admit(&mut peers, "quiet", false, later, LIVE),
            Admission::In
        );
        assert_eq!(peers.len(), MAX_PEERS);
        // A table of live peers that all report opens refuses even an opener.
        let mut full: HashMap<String, Peer> = (0..MAX_PEERS)
            .map(|i| (format!("p{i}"), live(now, true, wall)))
            .collect();
        assert_eq!(admit(&mut full, "new", true, at, LIVE), Admission::Refused);
    }

    #[test]
    fn ordering_holds_for_live_after_at_most() {
        let (now, wall) = (Instant::now(), SystemTime::now());
        let mut p = Peer::new(now);
        p.sent = Some((wall, now));
        let older = wall - Duration::from_millis(1);
        assert!(p.out_of_order(older, now + LIVE / 2, LIVE));
        assert!(
            !p.out_of_order(wall, now, LIVE),
            "the same stamp again is taken"
        );
        assert!(!p.out_of_order(older, now + LIVE, LIVE), "recovered");
    }

    /// A live peer holding `db` Open until `until`, `external` or not.
    fn holding(now: Instant, until: SystemTime, external: bool) -> Peer {
        let mut p = live(now, true, until);
        p.open.values_mut().for_each(|e| {
            e.until = until;
            e.external = external;
        });
        p
    }

    /// Evidence is an Open that is not external and ends after `wall`: a live
    /// peer whose only Open is an echo (external), or ends at `wall`, holds no
    /// place against an opener; and a newcomer whose only Open is one of those
    /// is no opener.
    #[test]
    fn an_external_or_ended_open_is_no_evidence() {
        let (now, wall) = (Instant::now(), SystemTime::now());
        let at = (now, wall);
        for (until, external) in [(wall + LIVE, true), (wall, false)] {
            let mut peers: HashMap<String, Peer> = (0..MAX_PEERS)
                .map(|i| (format!("p{i}"), holding(now, until, external)))
                .collect();
            let beat = Message::Heartbeat(crate::message::Heartbeat {
                instance: "new".into(),
                sent_at: wall,
                open: vec![OpenEntry {
                    key: "db".into(),
                    until,
                    generation: 1,
                    level: 0,
                    external,
                }],
                more: false,
                overrides: Vec::new(),
            });
            assert!(!reports_open(&beat, wall), "{external}: not an opener");
            let opens = reports_open(&beat, wall);
            assert_eq!(
                admit(&mut peers, "new", opens, at, LIVE),
                Admission::Refused
            );
            assert_eq!(
                admit(&mut peers, "new", true, at, LIVE),
                Admission::Displaced,
                "{external}: no peer holds evidence"
            );
        }
        assert!(evidence(false, wall + Duration::from_millis(1), wall));
    }
}
