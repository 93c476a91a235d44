//! What this instance holds Open, as its own breakers' transitions say: the
//! publisher's bookkeeping, which its heartbeat lists.
//!
//! Transitions reach the publisher in the order their listeners ran, which is not
//! always the order they happened: a transition's event is delivered by the thread
//! whose CAS made it, after the CAS, so two threads' events can reach the listener
//! out of order (a probe's Closed, delivered after the next trip's Open). Each
//! carries its breaker's generation, and [`Held`] keeps, per key, the latest one
//! it took: an older report is stale, and is neither held nor published (its
//! peers would withdraw a newer Open on it).
//!
//! Pure bookkeeping: the time is an argument, so the unit tests drive it directly.

use crate::message::{OpenEntry, Report};
use cutout::{Reason, State};
use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime};

/// The generation of a breaker's first transition: a new breaker (and a restored
/// one) starts at generation 0, and each transition adds one.
const FIRST: u32 = 1;

/// Whether generation `new` comes after `old`. Generations wrap at 2^32, so this
/// is the wrapping distance: `new` is newer when it is ahead of `old` by less than
/// 2^31 (and not equal), which holds across the wrap as long as fewer than 2^31
/// transitions of one breaker separate the two reports.
fn newer(new: u32, old: u32) -> bool {
    (new.wrapping_sub(old) as i32) > 0
}

/// The generation of a key's latest report taken, and when it was taken.
#[derive(Clone, Copy, Debug)]
struct Latest {
    generation: u32,
    taken: Instant,
}

/// The keys this instance holds Open, and per key the generation of the latest
/// report taken.
///
/// The generation order is per key: a key's reports come from one breaker at a
/// time. A breaker rebuilt under the same key (a registry's eviction and
/// re-creation, `Registry::remove` or `restore_all`, a breaker built again from a
/// save) starts again at generation 0, so **a report of generation 1, a breaker's
/// first transition, is always taken**, and the key's generations go on from it.
/// (The one report this takes wrongly is a breaker's own first transition,
/// delivered after its second: its deadline, or the breaker's next transition,
/// ends it.)
///
/// A key's latest generation is kept while the key is held Open, and otherwise for
/// `keep` after its report was taken (the fleet's `max_open`): a report delayed
/// longer than that is taken, as if it were the key's first. That bounds the
/// memory to the keys held Open and those reported within `keep`.
#[derive(Debug)]
pub(crate) struct Held {
    open: HashMap<String, OpenEntry>,
    latest: HashMap<String, Latest>,
    keep: Duration,
}

impl Held {
    /// Nothing held; a key's latest generation kept for `keep` (see [`Held`]).
    pub(crate) fn new(keep: Duration) -> Held {
        Held {
            open: HashMap::new(),
            latest: HashMap::new(),
            keep,
        }
    }

    /// Takes `report`, one of this instance's transitions, at `now`, unless it is
    /// older than the latest report of its key taken: whether it was taken (a
    /// stale report is to be dropped, not published).
    pub(crate) fn take(&mut self, report: &Report, now: Instant) -> bool {
        let stale = self.latest.get(&report.key).is_some_and(|latest| {
            report.generation != FIRST && !newer(report.generation, latest.generation)
        });
        if stale {
            return false;
        }
        let latest = Latest {
            generation: report.generation,
            taken: now,
        };
        match self.latest.get_mut(&report.key) {
            Some(l) => *l = latest,
            None => {
                self.latest.insert(report.key.clone(), latest);
            }
        }
        match report.open_until {
            Some(until) => {
                self.open.insert(
                    report.key.clone(),
                    OpenEntry {
                        key: report.key.clone(),
                        until,
                        generation: report.generation,
                        level: report.level,
                        external: report.reason == Reason::External.as_str(),
                    },
                );
            }
            None if report.state != State::Open => {
                self.open.remove(&report.key);
            }
            None => {}
        }
        true
    }

    /// Forgets the keys whose Open deadline is not after `wall`, and the latest
    /// generation of each key not held Open whose report was taken `keep` or
    /// more before `now`.
    pub(crate) fn prune(&mut self, now: Instant, wall: SystemTime) {
        self.open.retain(|_, e| e.until > wall);
        let (open, keep) = (&self.open, self.keep);
        self.latest.retain(|key, l| {
            open.contains_key(key) || now.saturating_duration_since(l.taken) < keep
        });
    }

    /// The keys held Open, as the heartbeat lists them.
    pub(crate) fn open(&self) -> Vec<OpenEntry> {
        self.open.values().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEEP: Duration = Duration::from_secs(600);

    fn wall() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
    }

    fn report(key: &str, generation: u32, state: State) -> Report {
        Report {
            key: key.into(),
            instance: "me".into(),
            generation,
            state,
            open_until: (state == State::Open).then(|| wall() + Duration::from_secs(30)),
            level: 0,
            reason: Reason::ConsecutiveFailures.as_str().into(),
            sent_at: None,
        }
    }

    fn held(h: &Held) -> Vec<(String, u32)> {
        let mut open: Vec<(String, u32)> = h
            .open()
            .into_iter()
            .map(|e| (e.key, e.generation))
            .collect();
        open.sort();
        open
    }

    #[test]
    fn newer_is_the_wrapping_distance() {
        assert!(newer(4, 3));
        assert!(!newer(3, 4));
        assert!(!newer(3, 3));
        assert!(newer(0, u32::MAX), "across the wrap");
        assert!(newer(5, u32::MAX - 5), "across the wrap");
        assert!(!newer(u32::MAX, 0), "behind across the wrap");
        assert!(newer((1 << 31) - 1, 0), "just under half the circle ahead");
        assert!(!newer(1 << 31, 0), "half the circle: not ahead");
    }

    /// A probe's Closed (generation 3) delivered after the next trip's Open
    /// (generation 4) is stale: the key stays held, and the report is dropped.
    /// In order, each report is taken.
    #[test]
    fn an_older_report_after_a_newer_one_is_dropped() {
        let now = Instant::now();
        let mut h = Held::new(KEEP);
        assert!(h.take(&report("db", 1, State::Open), now));
        assert!(h.take(&report("db", 2, State::HalfOpen), now));
        assert_eq!(held(&h), []);
        assert!(h.take(&report("db", 4, State::Open), now));
        assert!(!h.take(&report("db", 3, State::Closed), now), "stale");
        assert_eq!(held(&h), [("db".into(), 4)]);
        // And the other way round: an Open delivered after a newer Closed.
        assert!(h.take(&report("db", 6, State::Closed), now));
        assert!(!h.take(&report("db", 4, State::Open), now), "stale");
        assert!(
            !h.take(&report("db", 6, State::Closed), now),
            "the same again"
        );
        assert_eq!(held(&h), []);
        // Another key has its own order.
        assert!(h.take(&report("cache", 2, State::Open), now));
        assert_eq!(held(&h), [("cache".into(), 2)]);
    }

    /// Generations wrap: one past `u32::MAX` is newer, and the report before the
    /// wrap, delivered late, is stale.
    #[test]
    fn the_order_holds_across_the_wrap() {
        let now = Instant::now();
        let mut h = Held::new(KEEP);
        assert!(h.take(&report("db", u32::MAX, State::HalfOpen), now));
        assert!(h.take(&report("db", 0, State::Open), now));
        assert!(!h.take(&report("db", u32::MAX, State::Closed), now));
        assert_eq!(held(&h), [("db".into(), 0)]);
    }

    /// A breaker rebuilt under the same key starts again at generation 0: its
    /// first transition (generation 1) is taken whatever the key's latest, held
    /// Open or not, and its later ones follow from it.
    #[test]
    fn a_rebuilt_breakers_first_transition_starts_the_key_again() {
        let now = Instant::now();
        let mut h = Held::new(KEEP);
        for (generation, state) in [(1, State::Open), (2, State::HalfOpen), (3, State::Closed)] {
            assert!(h.take(&report("db", generation, state), now));
        }
        // Evicted and created again (Closed, generation 0); it trips.
        assert!(
            h.take(&report("db", 1, State::Open), now),
            "a fresh breaker"
        );
        assert_eq!(held(&h), [("db".into(), 1)]);
        assert!(h.take(&report("db", 2, State::HalfOpen), now));
        assert!(h.take(&report("db", 3, State::Open), now));
        assert_eq!(held(&h), [("db".into(), 3)]);
        // Removed while Open, and built again from its save (Open, generation
        // 0): its first transition withdraws the old breaker's Open.
        assert!(h.take(&report("db", 1, State::HalfOpen), now));
        assert_eq!(held(&h), []);
    }

    /// Past its deadline a key is no longer held, and past `keep` its latest
    /// generation is forgotten (a report delayed that long is taken); a key held
    /// Open keeps its generation however old its report.
    #[test]
    fn generations_are_kept_while_held_or_for_keep() {
        let now = Instant::now();
        let mut h = Held::new(KEEP);
        let mut long = report("long", 5, State::Open);
        long.open_until = Some(wall() + KEEP * 2);
        assert!(h.take(&long, now));
        assert!(h.take(&report("db", 5, State::Closed), now));
        h.prune(now + KEEP - Duration::from_millis(1), wall());
        assert_eq!(h.latest.len(), 2, "both kept within `keep`");
        assert!(!h.take(&report("db", 4, State::Open), now), "stale");
        let later = now + KEEP;
        h.prune(later, wall() + KEEP);
        assert_eq!(held(&h), [("long".into(), 5)]);
        assert_eq!(h.latest.len(), 1, "db's generation forgotten, long's kept");
        assert!(
            !h.take(&report("long", 4, State::Closed), later),
            "still stale"
        );
        assert!(
            h.take(&report("db", 4, State::Open), later),
            "taken, as a first"
        );
        h.prune(later, wall() + KEEP * 2);
        assert_eq!(held(&h), []);
    }

    /// An Open by `Reason::External` (a quorum's echo) is held marked external,
    /// as the heartbeat lists it; a policy's trip is not.
    #[test]
    fn an_external_open_is_held_marked_external() {
        let now = Instant::now();
        let mut h = Held::new(KEEP);
        let mut echo = report("db", 1, State::Open);
        echo.reason = Reason::External.as_str().into();
        assert!(h.take(&echo, now));
        assert!(h.take(&report("cache", 1, State::Open), now));
        let mut open: Vec<(String, bool)> =
            h.open().into_iter().map(|e| (e.key, e.external)).collect();
        open.sort();
        assert_eq!(open, [("cache".into(), false), ("db".into(), true)]);
    }
}
