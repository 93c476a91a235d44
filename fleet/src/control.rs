//! Fleet-wide manual control: an operator's override of one key (force it open,
//! disable it, release it), and the table each instance keeps of them.
//!
//! An override travels as a control message when issued, and every instance's
//! heartbeat relays the overrides it knows, so an instance that joins later, or
//! one that missed the message, learns them within a heartbeat. Per key, the
//! latest issued wins (by the issuer's wall clock, then by issuer id): a release
//! is an override too, kept until the override it ended would have ended, so an
//! instance that still relays the older one cannot bring it back; and an
//! override that ends before one it replaced stays as a release until then.

use crate::message::Invalid;
use crate::message::{from_ms, name_ok, to_ms};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The longest an override may last. A receiver takes an override that ends
/// at most this long after its issue stamp, and after its own clock plus its
/// [`max_skew`](crate::FleetConfig::max_skew) (of which at most this long
/// counts).
pub const MAX_OVERRIDE: Duration = Duration::from_secs(24 * 3600);
/// The most overrides (releases included) one instance keeps, and one heartbeat
/// relays; a new key's override beyond it is refused and counted
/// ([`FleetStats::overflow`](crate::FleetStats::overflow)), and one issued here
/// is [`FleetError::OverridesFull`](crate::FleetError::OverridesFull).
pub const MAX_OVERRIDES: usize = 64;

/// What an override does to a key's breakers on every instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OverrideMode {
    /// Forced open ([`CircuitBreaker::force_open`](cutout::CircuitBreaker::force_open)):
    /// every call rejected.
    ForceOpen,
    /// Disabled ([`CircuitBreaker::disable`](cutout::CircuitBreaker::disable)):
    /// every call admitted, nothing trips.
    Disable,
    /// The override ended: a breaker the override set is reset to Closed, and
    /// its own policies decide again.
    Release,
}

impl OverrideMode {
    /// A snake_case name, as on the wire.
    pub const fn as_str(self) -> &'static str {
        match self {
            OverrideMode::ForceOpen => "force_open",
            OverrideMode::Disable => "disable",
            OverrideMode::Release => "release",
        }
    }

    fn parse(s: &str) -> Option<OverrideMode> {
        [
            OverrideMode::ForceOpen,
            OverrideMode::Disable,
            OverrideMode::Release,
        ]
        .into_iter()
        .find(|m| m.as_str() == s)
    }
}

/// An operator's override of one key, fleet-wide.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Override {
    /// The breaker's name (its key in a registry).
    pub key: String,
    /// What it does.
    pub mode: OverrideMode,
    /// The instance that issued it.
    pub issuer: String,
    /// When it was issued, by the issuer's wall clock: per key, the latest wins.
    pub issued_at: SystemTime,
    /// When it ends; for a release, when it is forgotten.
    pub until: SystemTime,
}

impl Override {
    /// The order in which overrides of one key win: the later issued, then the
    /// greater issuer id.
    fn rank(&self) -> (SystemTime, &str) {
        (self.issued_at, &self.issuer)
    }

    /// The mode in force at `wall`: `None` once it ended, or if it is a release.
    fn in_force(&self, wall: SystemTime) -> Option<OverrideMode> {
        (self.until > wall && self.mode != OverrideMode::Release).then_some(self.mode)
    }
}

/// An override on the wire (in a heartbeat's `overrides`).
#[derive(Serialize, Deserialize)]
pub(crate) struct WireOverride {
    key: String,
    mode: String,
    issuer: String,
    issued_ms: u64,
    until_ms: u64,
}

impl WireOverride {
    pub(crate) fn new(
        key: String,
        mode: String,
        issuer: String,
        issued_ms: u64,
        until_ms: u64,
    ) -> WireOverride {
        WireOverride {
            key,
            mode,
            issuer,
            issued_ms,
            until_ms,
        }
    }

    pub(crate) fn until_ms(&self) -> u64 {
        self.until_ms
    }

    pub(crate) fn from(o: &Override) -> WireOverride {
        WireOverride {
            key: o.key.clone(),
            mode: o.mode.as_str().to_owned(),
            issuer: o.issuer.clone(),
            issued_ms: to_ms(o.issued_at),
            until_ms: to_ms(o.until),
        }
    }

    /// The override, if it keeps the rules: names within
    /// [`MAX_NAME_BYTES`](crate::MAX_NAME_BYTES)
    /// without control characters, a known mode, an end no further than
    /// [`MAX_OVERRIDE`] after its issue stamp, nor after `now` plus `skew`
    /// (at most `MAX_OVERRIDE` of it). The skew is the one a receiver allows an
    /// issue stamp ([`FleetConfig::max_skew`](crate::FleetConfig::max_skew)):
    /// an override of `MAX_OVERRIDE` from an issuer whose clock runs that far
    /// ahead ends that far past `now + MAX_OVERRIDE`, and is taken; a skew
    /// set huge (to take any stamp) stretches no override past two days.
    pub(crate) fn read(self, now: SystemTime, skew: Duration) -> Result<Override, Invalid> {
        let mode = OverrideMode::parse(&self.mode).ok_or(Invalid::Field)?;
        if !name_ok(&self.key) || !name_ok(&self.issuer) {
            return Err(Invalid::Field);
        }
        let issued_at = from_ms(self.issued_ms).ok_or(Invalid::FromFuture)?;
        let until = from_ms(self.until_ms).ok_or(Invalid::DeadlineTooFar)?;
        let allowed = MAX_OVERRIDE.saturating_add(skew.min(MAX_OVERRIDE));
        let too_far =
            |from: SystemTime, allowed| from.checked_add(allowed).is_none_or(|last| until > last);
        if too_far(now, allowed) || too_far(issued_at, MAX_OVERRIDE) {
            return Err(Invalid::DeadlineTooFar);
        }
        Ok(Override {
            key: self.key,
            mode,
            issuer: self.issuer,
            issued_at,
            until,
        })
    }
}

/// The overrides an instance knows, per key the latest issued.
///
/// What the local breakers must be told is not kept here: it is the difference
/// between the modes in force and the modes the breakers were last set to
/// ([`Overrides::changes`]), so no order of takes, ends and sweeps can leave a
/// breaker in a mode that is no longer in force.
#[derive(Debug, Default)]
pub(crate) struct Overrides {
    by_key: HashMap<String, Held>,
}

/// A key's latest override, and the latest end of those it replaced.
#[derive(Debug)]
struct Held {
    o: Override,
    /// Until when it must hold off the overrides it replaced (its own end, if
    /// later): one that ends sooner stays as a release until then (see
    /// [`Overrides::expire`]).
    holds_off: SystemTime,
}

impl Overrides {
    /// The mode in force for `key` at `wall`.
    pub(crate) fn mode(&self, key: &str, wall: SystemTime) -> Option<OverrideMode> {
        self.by_key.get(key)?.o.in_force(wall)
    }

    /// Takes `o` if it is newer than the key's; whether it was taken, or `None`
    /// if the table is full.
    pub(crate) fn take(&mut self, o: Override, wall: SystemTime) -> Option<bool> {
        if o.until <= wall {
            return Some(false);
        }
        let holds_off = match self.by_key.get(&o.key) {
            Some(cur) if cur.o.rank() >= o.rank() => return Some(false),
            Some(cur) => cur.holds_off.max(o.until),
            None if self.by_key.len() >= MAX_OVERRIDES => {
                self.expire(wall);
                if self.by_key.len() >= MAX_OVERRIDES {
                    return None;
                }
                o.until
            }
            None => o.until,
        };
        self.by_key.insert(o.key.clone(), Held { o, holds_off });
        Some(true)
    }

    /// Forgets the overrides that ended by `wall`. One that replaced an
    /// override ending later becomes a release until then (its issue time
    /// kept), as an operator's release would be: an instance still relaying the
    /// replaced override can then neither bring it back here nor keep it, once
    /// it takes this relay.
    pub(crate) fn expire(&mut self, wall: SystemTime) {
        self.by_key.retain(|_, held| {
            if held.o.until > wall {
                return true;
            }
            let keep = held.holds_off > wall;
            if keep {
                held.o.mode = OverrideMode::Release;
                held.o.until = held.holds_off;
            }
            keep
        });
    }

    /// The keys whose mode in force at `wall` differs from `set`, the mode
    /// the local breakers were last set to per key (a key not in it: none),
    /// sorted. An override that ended counts as none whether or not
    /// [`expire`](Self::expire) has swept it yet.
    pub(crate) fn changes(
        &self,
        wall: SystemTime,
        set: &HashMap<String, OverrideMode>,
    ) -> Vec<String> {
        let in_table = (self.by_key.iter())
            .filter(|(key, held)| held.o.in_force(wall) != set.get(*key).copied())
            .map(|(key, _)| key);
        let gone = set.keys().filter(|key| !self.by_key.contains_key(*key));
        let mut keys: Vec<String> = in_table.chain(gone).cloned().collect();
        keys.sort_unstable();
        keys
    }

    /// Every override not ended at `wall`, for a heartbeat to relay.
    pub(crate) fn relay(&self, wall: SystemTime) -> Vec<Override> {
        let mut all: Vec<Override> = self
            .by_key
            .values()
            .filter(|h| h.o.until > wall)
            .map(|h| h.o.clone())
            .collect();
        all.sort_by(|a, b| a.key.cmp(&b.key));
        all
    }

    /// When the next override ends, if any does.
    pub(crate) fn next_end(&self) -> Option<SystemTime> {
        self.by_key.values().map(|h| h.o.until).min()
    }

    /// The time to issue a new override of `key` at `wall`: `wall` in whole
    /// milliseconds (as every receiver reads it), and after the override in
    /// force here, so that what an operator issues last wins here and, once its
    /// time is within the receivers' skew, everywhere.
    pub(crate) fn issue_time(&self, key: &str, wall: SystemTime) -> SystemTime {
        let ms = |t| from_ms(to_ms(t)).unwrap_or(t);
        let after = (self.by_key.get(key))
            .and_then(|h| ms(h.o.issued_at).checked_add(Duration::from_millis(1)));
        ms(wall).max(after.unwrap_or(UNIX_EPOCH))
    }

    /// A release of `key` issued by `issuer` at `wall`: kept until the override
    /// it ends would have ended, and at least `linger`, so that an instance
    /// still relaying that override cannot bring it back; but never past
    /// [`MAX_OVERRIDE`] after `wall`, as far as every receiver that takes its
    /// issue stamp takes its end (a later end is refused everywhere, and the
    /// override would stay in force on every other instance). The cap bites
    /// where `linger` is over a day, and where the override it ends came from
    /// a clock ahead: that one then outlives the release by at most the skew
    /// its receivers allow, and a stale relay of it in that time holds the key
    /// again until its own end.
    pub(crate) fn release(
        &self,
        key: &str,
        issuer: &str,
        wall: SystemTime,
        linger: Duration,
    ) -> Override {
        let floor = wall.checked_add(linger).unwrap_or(wall);
        let until = (self.by_key.get(key)).map_or(floor, |h| h.holds_off.max(floor));
        let until = wall
            .checked_add(MAX_OVERRIDE)
            .map_or(until, |last| until.min(last));
        Override {
            key: key.to_owned(),
            mode: OverrideMode::Release,
            issuer: issuer.to_owned(),
            issued_at: wall,
            until,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    fn at(s: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_800_000_000 + s)
    }

    fn o(mode: OverrideMode, issuer: &str, issued: u64, until: u64) -> Override {
        Override {
            key: "db".into(),
            mode,
            issuer: issuer.into(),
            issued_at: at(issued),
            until: at(until),
        }
    }

    /// The keys whose mode changed at `wall`, each then set in `set` as the
    /// fleet's sync does to its breakers.
    fn sync(
        t: &Overrides,
        set: &mut HashMap<String, OverrideMode>,
        wall: SystemTime,
    ) -> Vec<String> {
        let keys = t.changes(wall, set);
        for key in &keys {
            match t.mode(key, wall) {
                Some(mode) => set.insert(key.clone(), mode),
                None => set.remove(key),
            };
        }
        keys
    }

    /// A relayed override is read only with a known mode, a valid key and a
    /// valid issuer (each checked on its own), and an end at most
    /// `MAX_OVERRIDE` after its issue stamp and after now plus the skew (to the
    /// millisecond): here issued by a clock the whole skew ahead.
    #[test]
    fn a_relayed_override_is_read_within_the_rules() {
        let (now, skew) = (at(0), Duration::from_secs(1));
        let last = to_ms(now + MAX_OVERRIDE + skew);
        let read = |key: &str, mode: &str, issuer: &str, until_ms| {
            let (key, mode, issuer) = (key.into(), mode.into(), issuer.into());
            WireOverride::new(key, mode, issuer, to_ms(now + skew), until_ms).read(now, skew)
        };
        let mut longest = o(OverrideMode::Disable, "a", 1, 0);
        longest.until = now + MAX_OVERRIDE + skew;
        assert_eq!(read("db", "disable", "a", last), Ok(longest));
        let too_far = read("db", "disable", "a", last + 1);
        assert_eq!(too_far, Err(Invalid::DeadlineTooFar));
        for (key, mode, issuer) in [("", "disable", "a"), ("db", "disable", "a\u{7}")] {
            let bad = read(key, mode, issuer, last);
            assert_eq!(bad, Err(Invalid::Field), "{key:?} {issuer:?}");
        }
        assert_eq!(read("db", "open", "a", last), Err(Invalid::Field));
    }

    /// An override is relayed while it is in force, and not from its end, swept
    /// or not: a receiver would take it as ended.
    #[test]
    fn an_override_is_relayed_until_its_end() {
        let mut t = Overrides::default();
        let force = o(OverrideMode::ForceOpen, "a", 10, 100);
        assert_eq!(t.take(force.clone(), at(10)), Some(true));
        let just_before = at(100) - Duration::from_millis(1);
        assert_eq!(t.relay(just_before), [force]);
        assert!(t.relay(at(100)).is_empty(), "ended, not swept");
    }

    /// The latest issued wins; a stale relay of an older override, after its
    /// release, changes nothing; the override ends at its deadline.
    #[test]
    fn the_latest_issued_wins_and_a_release_holds_off_stale_relays() {
        let (mut t, mut set) = (Overrides::default(), HashMap::new());
        let force = o(OverrideMode::ForceOpen, "a", 10, 100);
        assert_eq!(t.take(force.clone(), at(10)), Some(true));
        assert_eq!(t.mode("db", at(11)), Some(OverrideMode::ForceOpen));
        assert_eq!(sync(&t, &mut set, at(11)), ["db"]);
        let release = t.release("db", "b", at(20), Duration::from_secs(3));
        assert_eq!(release.until, at(100), "kept as long as what it ended");
        assert_eq!(t.take(release, at(20)), Some(true));
        assert_eq!(t.mode("db", at(21)), None);
        assert_eq!(t.take(force, at(30)), Some(false), "a stale relay");
        assert_eq!(t.mode("db", at(31)), None);
        assert_eq!(sync(&t, &mut set, at(31)), ["db"]);
        let disable = o(OverrideMode::Disable, "a", 40, 50);
        assert_eq!(t.take(disable, at(40)), Some(true));
        assert_eq!(sync(&t, &mut set, at(40)), ["db"]);
        t.expire(at(49));
        assert_eq!(t.mode("db", at(49)), Some(OverrideMode::Disable));
        assert!(sync(&t, &mut set, at(49)).is_empty(), "no change");
        t.expire(at(50));
        assert_eq!(t.mode("db", at(50)), None);
        assert_eq!(sync(&t, &mut set, at(50)), ["db"]);
        // Still holding off the force-open, which would have run to 100.
        let held = [o(OverrideMode::Release, "a", 40, 100)];
        assert_eq!(t.relay(at(50)), held);
    }

    /// An override that ends while it outranks a longer one it replaced stays
    /// as a release until that one's end, relayed as such: a stale relay of the
    /// replaced override cannot bring it back here, and an instance that still
    /// holds it learns that it ended.
    #[test]
    fn an_override_that_replaced_a_longer_one_holds_it_off_once_ended() {
        let (mut t, mut set) = (Overrides::default(), HashMap::new());
        let force = o(OverrideMode::ForceOpen, "a", 10, 3600);
        assert_eq!(t.take(force.clone(), at(10)), Some(true));
        assert_eq!(sync(&t, &mut set, at(10)), ["db"]);
        assert_eq!(
            t.take(o(OverrideMode::Disable, "b", 20, 22), at(20)),
            Some(true)
        );
        assert_eq!(sync(&t, &mut set, at(20)), ["db"]);
        t.expire(at(22));
        assert_eq!(t.mode("db", at(22)), None);
        assert_eq!(sync(&t, &mut set, at(22)), ["db"]);
        assert_eq!(t.take(force.clone(), at(23)), Some(false), "a stale relay");
        assert_eq!(t.mode("db", at(23)), None);
        let relayed = t.relay(at(23));
        assert_eq!(relayed, [o(OverrideMode::Release, "b", 20, 3600)]);
        let mut behind = Overrides::default();
        behind.take(force, at(10));
        assert_eq!(behind.take(relayed[0].clone(), at(23)), Some(true));
        assert_eq!(behind.mode("db", at(23)), None);
        t.expire(at(3600));
        assert!(t.relay(at(3600)).is_empty() && t.next_end().is_none());
    }

    /// A release taken after an override ended but before the table swept it
    /// (it replaces the ended one) still reports the key changed: the
    /// breakers the override set are reset. So does an end never swept.
    #[test]
    fn release_after_unswept_end_still_reports_the_change() {
        let (mut t, mut set) = (Overrides::default(), HashMap::new());
        let force = o(OverrideMode::ForceOpen, "a", 10, 100);
        assert_eq!(t.take(force.clone(), at(10)), Some(true));
        assert_eq!(sync(&t, &mut set, at(10)), ["db"], "ForceOpen applied");
        let wall = at(100) + Duration::from_millis(500);
        let release = t.release("db", "ops", wall, Duration::from_secs(6));
        assert_eq!(t.take(release, wall), Some(true));
        t.expire(wall);
        assert_eq!(t.mode("db", wall), None);
        assert_eq!(sync(&t, &mut set, wall), ["db"], "the force-open's end");
        assert!(set.is_empty());

        let (mut t, mut set) = (Overrides::default(), HashMap::new());
        assert_eq!(t.take(force, at(10)), Some(true));
        assert_eq!(sync(&t, &mut set, at(10)), ["db"]);
        assert_eq!(sync(&t, &mut set, at(100)), ["db"], "ended, not swept");
        assert!(sync(&t, &mut set, at(101)).is_empty());
    }

    /// A release never ends further than `MAX_OVERRIDE` after its issue, where
    /// every receiver takes it: not with a linger over a day (twice a
    /// `live_after` over 12 h), nor after an override that ends later.
    #[test]
    fn a_release_ends_within_max_override() {
        let mut t = Overrides::default();
        let day = MAX_OVERRIDE.as_secs();
        let release = t.release("db", "ops", at(10), Duration::from_secs(26 * 3600));
        assert_eq!(release.until, at(10 + day), "the linger capped");
        let force = o(OverrideMode::ForceOpen, "a", 10, 11 + day);
        assert_eq!(t.take(force, at(10)), Some(true));
        let release = t.release("db", "ops", at(10), Duration::from_secs(3));
        assert_eq!(release.until, at(10 + day), "the override's end capped");
        let release = t.release("db", "ops", at(20), Duration::from_secs(3));
        assert_eq!(release.until, at(11 + day), "as long as what it ends");
    }

    /// Two overrides issued in the same millisecond are ordered by issuer, so
    /// every instance settles on the same one whatever order they arrive in.
    #[test]
    fn a_tie_is_broken_by_issuer_alike_everywhere() {
        let (x, y) = (
            o(OverrideMode::ForceOpen, "a", 10, 100),
            o(OverrideMode::Disable, "b", 10, 100),
        );
        for order in [[x.clone(), y.clone()], [y, x]] {
            let mut t = Overrides::default();
            for ov in order {
                t.take(ov, at(10));
            }
            assert_eq!(t.mode("db", at(11)), Some(OverrideMode::Disable));
        }
    }

    /// The table is bounded: a new key past the bound is refused, unless an
    /// ended override makes room.
    #[test]
    fn the_table_is_bounded() {
        let mut t = Overrides::default();
        for i in 0..MAX_OVERRIDES as u64 {
            let mut ov = o(OverrideMode::ForceOpen, "a", 1, 10 + i);
            ov.key = format!("k{i}");
            assert_eq!(t.take(ov, at(1)), Some(true));
        }
        let mut late = o(OverrideMode::ForceOpen, "a", 2, 500);
        late.key = "late".into();
        assert_eq!(t.take(late.clone(), at(2)), None);
        assert_eq!(t.take(late, at(11)), Some(true), "k0 and k1 ended by 11");
        assert_eq!(t.next_end(), Some(at(12)));
    }
}
