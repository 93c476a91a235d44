//! Every transition of the state word, each a named function over the one update
//! helper ([`StateWord::transition`], wrapped by [`CircuitBreaker::transition`]
//! here, which starts the new phase's tagged words): no other code moves the word.
//! Each applies its decision and announces it (see `announce.rs`), and returns the
//! newest word.
//!
//! | function | from | to | [`Reason`] |
//! |---|---|---|---|
//! | [`trip`](CircuitBreaker::trip) | Closed, Recovering | Open | the policy's, `RampFailed` |
//! | [`to_half_open`](CircuitBreaker::to_half_open) | Open | HalfOpen | `CooldownElapsed` |
//! | [`recover`](CircuitBreaker::recover) | HalfOpen | Closed, Recovering | `ProbesSucceeded` |
//! | [`reopen`](CircuitBreaker::reopen) | HalfOpen | Open | `ProbeFailed`, `HalfOpenTimeout` |
//! | [`close`](CircuitBreaker::close) | Recovering | Closed | `RampCompleted` |
//! | [`to_forced_open`](CircuitBreaker::to_forced_open) | any other | ForcedOpen | `ForcedOpen` |
//! | [`to_disabled`](CircuitBreaker::to_disabled) | any other | Disabled | `Disabled` |
//! | [`to_reset`](CircuitBreaker::to_reset) | any | Closed | `Reset` |
//! | [`open_until`](CircuitBreaker::open_until) | Closed | Open | `External` |

use super::*;

impl<C: Clock> CircuitBreaker<C> {
    /// Closed or Recovering `s` → Open at backoff `level` ([`Reason::ConsecutiveFailures`],
    /// [`Reason::FailureRate`], [`Reason::SlowCallRate`] or [`Reason::RampFailed`]),
    /// starting at `now`. `window` and `streak` are what the trip check read, for the event.
    pub(super) fn trip(
        &self,
        s: Snapshot,
        level: u8,
        now: u64,
        reason: Reason,
        window: WindowCounts,
        streak: u64,
    ) -> Snapshot {
        let update = self.transition(s, |cur| (cur == s).then(|| self.opened(cur, level, now)));
        self.keep_tripped_by(update, window);
        self.announce(update, reason, window, streak)
    }

    /// Open `s` → HalfOpen at the same level ([`Reason::CooldownElapsed`]), at `now`.
    pub(super) fn to_half_open(&self, s: Snapshot, now: u64) -> Snapshot {
        let update = self.transition(s, |cur| {
            (cur == s).then(|| (cur.next(State::HalfOpen, cur.level()), now))
        });
        self.announce(update, Reason::CooldownElapsed, WindowCounts::default(), 0)
    }

    /// HalfOpen `s` → Recovering at the round's level with a ramp, else Closed at
    /// level 0 ([`Reason::ProbesSucceeded`]), at `now`.
    pub(super) fn recover(&self, s: Snapshot, now: u64) -> Snapshot {
        // With a ramp, the breaker recovers at the round's level: a trip during
        // the ramp reopens at the next one.
        let (to, level) = match self.config.ramp_up {
            Some(_) => (State::Recovering, s.level()),
            None => (State::Closed, 0),
        };
        let update = self.transition(s, |cur| (cur == s).then(|| (cur.next(to, level), now)));
        self.announce(update, Reason::ProbesSucceeded, WindowCounts::default(), 0)
    }

    /// HalfOpen `s` → Open at the next backoff level ([`Reason::ProbeFailed`] or
    /// [`Reason::HalfOpenTimeout`]). Returns the newest word.
    /// (`now` was read by the caller; the clock is checked for the next reading.)
    pub(super) fn reopen(&self, s: Snapshot, now: u64, reason: Reason) -> Snapshot {
        self.revive_clock();
        let level = self.next_level(s);
        let update = self.transition(s, |cur| (cur == s).then(|| self.opened(cur, level, now)));
        self.announce(update, reason, WindowCounts::default(), 0)
    }

    /// Recovering `s` → Closed at level 0 ([`Reason::RampCompleted`]), at `now`.
    pub(super) fn close(&self, s: Snapshot, now: u64) -> Snapshot {
        let update = self.transition(s, |cur| {
            (cur == s).then(|| (cur.next(State::Closed, 0), now))
        });
        self.announce(update, Reason::RampCompleted, WindowCounts::default(), 0)
    }

    /// Any state but ForcedOpen → ForcedOpen, at the same level ([`Reason::ForcedOpen`]).
    pub(super) fn to_forced_open(&self) {
        self.manual(State::ForcedOpen, Reason::ForcedOpen);
    }

    /// Any state but Disabled → Disabled, at the same level ([`Reason::Disabled`]).
    pub(super) fn to_disabled(&self) {
        self.manual(State::Disabled, Reason::Disabled);
    }

    /// Any state → Closed afresh at level 0 ([`Reason::Reset`]).
    pub(super) fn to_reset(&self) {
        let now = self.ticks();
        let update = self.transition(self.hot.word.load(), |s| {
            Some((s.next(State::Closed, 0), now))
        });
        self.announce(update, Reason::Reset, WindowCounts::default(), 0);
    }

    /// Closed → Open at the same level with its deadline at tick `deadline`
    /// ([`Reason::External`]), reported as made at `now`. Returns whether this
    /// call opened the breaker.
    pub(super) fn open_until(&self, deadline: u64, now: u64) -> bool {
        // An Open phase's time is its start plus the cooldown of its level and
        // generation (`time_of`, which every thread computes alike): so the phase
        // is given the start that puts its deadline where it was asked, as a trip
        // at that start would have. Ticks count from one longest cooldown before
        // the build (`bias`), so that start is never before tick 0.
        // Worked out, not read: no candidate made at the same moment (a trip, a
        // reset) takes it, and this one takes none of theirs; the later of two
        // waits for the other's CAS (see `StateWord::transition_claiming`).
        let update = self.transition_from(self.hot.word.load(), true, |cur| {
            cur.is_closed().then(|| {
                let next = cur.next(State::Open, cur.level());
                let cooldown = self.cooldown(next.level(), next.generation());
                (next, deadline.saturating_sub(cooldown))
            })
        });
        let moved = matches!(update, Update::Moved { .. });
        let _ = self.deliver(
            update,
            Reason::External,
            WindowCounts::default(),
            0,
            |_, _| now,
        );
        moved
    }

    /// The current word's state, if not `to` already → `to` at the same level,
    /// reported as `reason`: the manual states.
    fn manual(&self, to: State, reason: Reason) {
        let now = self.ticks();
        let update = self.transition(self.hot.word.load(), |s| {
            (s.state() != to).then(|| (s.next(to, s.level()), now))
        });
        self.announce(update, reason, WindowCounts::default(), 0);
    }

    /// [`StateWord::transition`] on this breaker's word and time slot: the one
    /// update helper every transition above goes through.
    /// A closed or recovering phase starts with an empty streak and a half-open
    /// phase with an empty round: the winner re-tags the word it starts (see
    /// [`TaggedWord::begin`]), so no phase ever reads data tagged by an earlier one,
    /// even one a whole generation cycle back. An Open phase starts with no
    /// counts that tripped it (a trip then keeps its own: see
    /// [`keep_tripped_by`](Self::keep_tripped_by)).
    fn transition(
        &self,
        seen: Snapshot,
        f: impl FnMut(Snapshot) -> Option<(Snapshot, u64)>,
    ) -> Update {
        self.transition_from(seen, false, f)
    }

    /// [`transition`](Self::transition), `f`'s starts `fixed` (worked out for a
    /// deadline, see [`StateWord::transition`]) or clock readings.
    fn transition_from(
        &self,
        seen: Snapshot,
        fixed: bool,
        mut f: impl FnMut(Snapshot) -> Option<(Snapshot, u64)>,
    ) -> Update {
        // What each attempt saw of the word its phase starts, just before its CAS.
        let mut before = 0;
        let step = |cur| {
            let next = f(cur)?;
            before = match next.0.state() {
                State::Closed | State::Recovering => {
                    // Before the CAS: whoever sees the new phase sees its predecessor's
                    // failure budget withdrawn (a loser's withdrawal costs only reads).
                    if let Some(w) = &self.window {
                        w.withdraw_grant();
                    }
                    self.phase.streak.raw()
                }
                State::HalfOpen => self.phase.round.raw(),
                _ => 0,
            };
            Some(next)
        };
        let update = self
            .hot
            .word
            .transition(&self.phase.time, seen, fixed, step);
        if let Update::Moved { to, .. } = update {
            match to.state() {
                State::Closed | State::Recovering => {
                    self.phase.streak.begin(before, to.generation())
                }
                State::HalfOpen => self.phase.round.begin(before, to.generation()),
                State::Open => self.keep_tripped_by(update, WindowCounts::default()),
                _ => {}
            }
        }
        update
    }
}
