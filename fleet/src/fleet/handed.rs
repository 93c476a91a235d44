//! The override states `saved_state` handed out, and the search an override's
//! end makes for breakers made from them: such a breaker may be attached (or a
//! registry's key inserted) after the end found none to reset. The rule is
//! documented on `Fleet::saved_state`.

use super::Inner;
use super::targets::{Apply, Pass, set_override};
use crate::control::{MAX_OVERRIDES, OverrideMode};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long a key's record ([`Handed`]) is kept past its hand-out, or past
/// the last end of the key's override, whichever is later: far longer than a
/// registry takes from its hook to the insert, or a caller from `saved_state`
/// through `Builder::restore` to `attach`.
pub(super) const HANDED_FOR: Duration = Duration::from_secs(60);

/// How often the publisher looks again while a search is on.
pub(super) const LOOK_EVERY: Duration = Duration::from_millis(100);

/// What `saved_state` handed out for one key.
#[derive(Clone, Copy, Debug)]
struct Handed {
    /// It handed out ForcedOpen (a ForceOpen in force).
    forced_open: bool,
    /// It handed out Disabled (a Disable in force).
    disabled: bool,
    /// Whether the search is on: an override of the key ended, and none has
    /// held it since (the override in force sets the attached breakers, and an
    /// attach applies it).
    looking: bool,
    /// When the record goes: [`HANDED_FOR`] past the hand-out or the last
    /// end, the later. Not while an override holds the key: its end comes.
    until: Instant,
}

impl Handed {
    /// The modes whose state was handed out.
    fn modes(self) -> Vec<OverrideMode> {
        let forced = self.forced_open.then_some(OverrideMode::ForceOpen);
        let disabled = self.disabled.then_some(OverrideMode::Disable);
        forced.into_iter().chain(disabled).collect()
    }

    /// Kept [`HANDED_FOR`] past `now` at least.
    fn keep_from(&mut self, now: Instant) {
        let until = now.checked_add(HANDED_FOR).unwrap_or(now);
        self.until = self.until.max(until);
    }
}

/// Per key, the override states `saved_state` handed out: at most
/// [`MAX_OVERRIDES`] keys (the one to go soonest gives way), each kept
/// [`HANDED_FOR`] past its hand-out or its override's last end.
#[derive(Debug, Default)]
pub(super) struct HandedOut {
    keys: HashMap<String, Handed>,
}

impl HandedOut {
    /// `saved_state` handed out the state of `key`'s override in `mode` at
    /// `now`.
    pub(super) fn hand_out(&mut self, key: &str, mode: OverrideMode, now: Instant) {
        if self.keys.len() >= MAX_OVERRIDES && !self.keys.contains_key(key) {
            let soonest = self.keys.iter().min_by_key(|(_, h)| h.until);
            if let Some(soonest) = soonest.map(|(k, _)| k.clone()) {
                self.keys.remove(&soonest);
            }
        }
        let handed = self.keys.entry(key.to_owned()).or_insert(Handed {
            forced_open: false,
            disabled: false,
            looking: false,
            until: now,
        });
        match mode {
            OverrideMode::ForceOpen => handed.forced_open = true,
            OverrideMode::Disable => handed.disabled = true,
            OverrideMode::Release => {}
        }
        handed.keep_from(now);
    }

    /// An override holds `key`: the search pauses (the record stays).
    pub(super) fn pause(&mut self, key: &str) {
        if let Some(handed) = self.keys.get_mut(key) {
            handed.looking = false;
        }
    }

    /// `key`'s override ended at `now`: the search is on, kept [`HANDED_FOR`]
    /// from now at least. The modes whose state was handed out (none if no
    /// state was).
    pub(super) fn end(&mut self, key: &str, now: Instant) -> Vec<OverrideMode> {
        let Some(handed) = self.keys.get_mut(key) else {
            return Vec::new();
        };
        handed.looking = true;
        handed.keep_from(now);
        handed.modes()
    }

    /// Drops the records searched for past their time; the keys searched for
    /// now, with the modes whose state was handed out.
    fn due(&mut self, now: Instant) -> Vec<(String, Vec<OverrideMode>)> {
        self.keys.retain(|_, h| !h.looking || h.until > now);
        let looking = self.keys.iter().filter(|(_, h)| h.looking);
        looking.map(|(k, h)| (k.clone(), h.modes())).collect()
    }

    /// Whether a search is on.
    fn looking(&self) -> bool {
        self.keys.values().any(|h| h.looking)
    }

    /// Every record, taken: each key with a mode whose state was handed out.
    pub(super) fn take_all(&mut self) -> Vec<(String, OverrideMode)> {
        let mut taken = Vec::new();
        for (key, handed) in std::mem::take(&mut self.keys) {
            taken.extend(handed.modes().into_iter().map(|m| (key.clone(), m)));
        }
        taken
    }
}

impl Inner {
    /// Searches for breakers in a state `saved_state` handed out, of the keys
    /// whose override ended and that no override holds now
    /// ([`HandedOut::end`]): each attached breaker of such a key found in one
    /// of those states (a registry's key inserted, or a breaker attached,
    /// since the end) is reset. Records past their time go. Whether a search
    /// is still on.
    pub(super) fn look_again(&self) -> bool {
        let _pass = Pass::enter(&self.syncing);
        let due = self.lock_attached().handed.due(Instant::now());
        for (key, modes) in due {
            // The override in force sets the key's breakers; its pass pauses
            // the search.
            if self.override_mode(&key).is_some() {
                continue;
            }
            let targets = self.lock_attached().targets_of(&key);
            let mut reset = false;
            for mode in modes {
                reset |= set_override(&targets, &key, Apply::End(mode));
            }
            if reset {
                // An override taken since the reading above, whose state
                // `saved_state` handed to the breaker just reset, sets it again.
                self.apply_override_now(&key, |apply| set_override(&targets, &key, apply));
            }
        }
        self.lock_attached().handed.looking()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::FleetConfig;

    /// The records are bounded: at most `MAX_OVERRIDES` keys (the one to go
    /// soonest gives way); a key searched for goes `HANDED_FOR` past its last
    /// end, found or not; one an override holds stays until its end.
    #[test]
    fn the_records_are_bounded_in_number_and_time() {
        let inner = Inner::new(FleetConfig::new("redis://127.0.0.1:9/")).unwrap();
        let (now, mode) = (Instant::now(), OverrideMode::ForceOpen);
        {
            let mut attached = inner.lock_attached();
            for i in 0..1_000u64 {
                let at = now + Duration::from_millis(i);
                attached.handed.hand_out(&format!("k{i}"), mode, at);
                attached.handed.end(&format!("k{i}"), at);
            }
            let keys = &attached.handed.keys;
            assert_eq!(keys.len(), MAX_OVERRIDES);
            assert!(keys.contains_key("k936") && !keys.contains_key("k935"));
        }
        assert!(inner.look_again(), "none past its time");
        let Some(then) = now.checked_sub(HANDED_FOR) else {
            return; // a host up for under a minute: no Instant that early
        };
        {
            let mut attached = inner.lock_attached();
            attached.handed.keys.clear();
            for key in ["ended", "held"] {
                attached.handed.hand_out(key, mode, then);
            }
            attached.handed.end("ended", then);
        }
        assert!(!inner.look_again(), "past its time");
        let handed = &inner.lock_attached().handed;
        assert!(!handed.keys.contains_key("ended"), "gone");
        assert!(handed.keys.contains_key("held"), "held: its end comes");
    }

    /// A key's record holds each state handed out, and goes on through the
    /// key's later overrides: an override pauses the search, an end resumes
    /// it for both states.
    #[test]
    fn a_record_keeps_both_states_through_later_overrides() {
        let mut handed = HandedOut::default();
        let now = Instant::now();
        handed.hand_out("db", OverrideMode::ForceOpen, now);
        assert!(
            handed.due(now).is_empty(),
            "not searched for under its override"
        );
        handed.hand_out("db", OverrideMode::Disable, now);
        let both = vec![OverrideMode::ForceOpen, OverrideMode::Disable];
        assert_eq!(handed.end("db", now), both);
        assert_eq!(handed.due(now), [("db".to_string(), both.clone())]);
        handed.pause("db");
        assert!(!handed.looking(), "paused by the next override");
        assert_eq!(handed.end("db", now), both, "resumed by its end");
        assert!(handed.looking());
        assert_eq!(handed.take_all().len(), 2);
        assert!(handed.keys.is_empty());
    }
}
