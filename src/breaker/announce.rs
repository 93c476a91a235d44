//! Announcing a transition (see `transitions.rs`): its delivery to the built-in
//! observers and the user's listener, after the CAS and with nothing held.

use super::*;

impl<C: Clock> CircuitBreaker<C> {
    /// Counts and delivers a transition this thread made, after its CAS and with
    /// nothing held. Returns the newest word either way.
    pub(super) fn announce(
        &self,
        update: Update,
        reason: Reason,
        window: WindowCounts,
        streak: u64,
    ) -> Snapshot {
        self.deliver(update, reason, window, streak, |_, start| start)
    }

    /// [`announce`](Self::announce), with the transition's time given by `at`
    /// (from the new word and its start).
    pub(super) fn deliver(
        &self,
        update: Update,
        reason: Reason,
        window: WindowCounts,
        streak: u64,
        at: impl FnOnce(Snapshot, u64) -> u64,
    ) -> Snapshot {
        let (from, to, start) = match update {
            Update::Declined(cur) => return cur,
            Update::Moved { from, to, start } => (from, to, start),
        };
        // Relaxed: a statistic; the event itself is ordered by the CAS.
        self.transitions[reason.index()].fetch_add(1, Ordering::Relaxed);
        let candidacy = self.candidacy();
        if crate::OBSERVERS.is_empty() && self.listener.is_none() && candidacy.is_none() {
            return to; // no one to tell: the event is not built
        }
        let at = at(to, start).saturating_sub(self.bias);
        if let Some(candidacy) = candidacy {
            // An Open phase's deadline (its start is still in the slot, the
            // phase after next not yet claimed over it), for its books.
            let until = match from.is(State::Open) {
                true => self.phase.time.start_of(from).map_or(at, |start| {
                    self.time_of(from, start).saturating_sub(self.bias)
                }),
                false => at,
            };
            candidacy.note(from.state(), to.state(), at, until);
        }
        let event = Transition {
            from: from.state(),
            to: to.state(),
            generation: to.generation(),
            reason,
            at: ticks_to_duration(at),
            level: to.level(),
            window,
            consecutive_failures: streak,
            shadow: self.config.shadow,
            open_until: to
                .is(State::Open)
                .then(|| ticks_to_duration(self.time_of(to, start).saturating_sub(self.bias))),
        };
        // The built-in observers (the observability integrations enabled), then the
        // user's listener. While the thread unwinds, a panic in any of them (a
        // tracing subscriber's, a metrics recorder's, the listener's) is caught.
        // Otherwise an observer's panic is held until the listener has the event
        // (a broken recorder must not cost the listener, a fleet's say, its
        // transition), and resumed when `held` drops.
        // A candidate's transitions are its live breaker's name's, labelled with
        // the candidate's.
        let unwinding = std::thread::panicking();
        let (name, candidate) = (&self.config.name, candidacy.map(|c| &c.name));
        let mut held = super::candidates::Deferred::default();
        for observe in crate::OBSERVERS {
            match unwinding {
                false => held.catch(|| observe(name, candidate, &event)),
                true => deliver_unwinding(|| observe(name, candidate, &event)),
            }
        }
        if let Some(listener) = &self.listener {
            match unwinding {
                false => listener(&event),
                true => deliver_unwinding(|| listener(&event)),
            }
            // The listener may have moved the breaker on (a `reset` or
            // `force_open` of its own): the caller goes on from the word as it is
            // now, not from the one this transition installed.
            return self.hot.word.load();
        }
        to
    }
}

/// Delivers an event (`deliver` calls an observer or the listener with it) from a
/// drop that runs while the thread unwinds (a permit dropped by a panicking call,
/// recorded as dropped: a probe's reopening, say). A panic in the observer or the
/// listener then would be a panic during a panic, which aborts the process; it is
/// caught and dropped instead, as the first panic goes on.
#[cold]
#[inline(never)]
fn deliver_unwinding(deliver: impl FnOnce()) {
    // `AssertUnwindSafe`: the event is only read, and the breaker's state is in its
    // atomics, which a panicking observer cannot leave half-written.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(deliver));
}
