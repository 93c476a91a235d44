//! Recording outcomes off the lean path: a stale, ignored, failed or slow outcome, a
//! probe's verdict, a permit dropped unrecorded, and the closed phase's trip check.

use super::*;

impl<C: Clock> CircuitBreaker<C> {
    /// Records any outcome: stale, ignored, failed, slow, a probe's, or a success
    /// that must clear the streak or rotate the window. Not marked cold: failures
    /// are the common case of a failing dependency.
    #[inline(never)]
    pub(super) fn record_general(&self, r: StripeRef<'_>, ticket: Ticket, outcome: Outcome) {
        if self.shadowing.is_some() {
            return self.record_general_offered(r, ticket, outcome);
        }
        self.record_own(r, ticket, outcome);
    }

    /// [`record_general`](Self::record_general) for a shadow breaker or one with
    /// candidates: the outcome offered to the candidates first (see
    /// [`offer`](Self::offer)), then recorded here.
    #[cold]
    #[inline(never)]
    fn record_general_offered(&self, r: StripeRef<'_>, ticket: Ticket, outcome: Outcome) {
        let _offered = self.offer(ticket, Some(outcome));
        if !self.recorded_lean_after_offer(r, ticket, outcome) {
            self.record_own(r, ticket, outcome);
        }
    }

    /// [`record_general`](Self::record_general)'s record in this breaker.
    #[inline(always)]
    fn record_own(&self, r: StripeRef<'_>, ticket: Ticket, outcome: Outcome) {
        let s = self.hot.word.load();
        if s != ticket.phase() {
            if ticket.is_shadow() {
                return; // a would-be rejection's: the call would not have happened
            }
            // Admitted under an earlier phase: the breaker has moved on, and this
            // result must not decide the new phase.
            Stripes::bump(r, Counter::Stale);
            return;
        }
        let failed = match outcome {
            Outcome::Ignored => {
                Stripes::bump(r, Counter::Ignored);
                if ticket.kind() == Kind::Probe {
                    self.release_probe(ticket.generation());
                }
                return;
            }
            Outcome::Success => false,
            Outcome::Failure => true,
        };
        let slow = self.is_slow(ticket);
        if failed {
            self.bump_and_check_clock(r, Counter::Failures);
        } else {
            Stripes::bump(r, Counter::Successes);
        }
        if slow {
            Stripes::bump(r, Counter::Slow);
        }
        match ticket.kind() {
            Kind::Closed | Kind::Ramp => self.record_closed(r, s, Sample { failed, slow }, true),
            Kind::Probe if failed || slow => {
                let _ = self.reopen(s, self.ticks(), Reason::ProbeFailed);
            }
            Kind::Probe => self.probe_succeeded(s),
            Kind::Disabled => {}
        }
    }

    /// Records a permit dropped without an outcome, counted as dropped (and nothing
    /// else, if stale). In its own phase it is a failure if `on_drop` says so
    /// (counted in `failures` too), and slow if it ran past the slow-call threshold
    /// (counted in `slow`); a slow call that is not a failure leaves the streak as
    /// it is. Neither: ignored, its probe slot back.
    #[inline(never)]
    pub(crate) fn abandon(&self, ticket: Ticket) {
        let _offered = self.offer(ticket, None);
        if ticket.is_shadow() {
            return; // a would-be rejection's: the call would not have happened
        }
        let r = self.hot.stripes.mine();
        Stripes::bump(r, Counter::Dropped);
        let s = self.hot.word.load();
        if s != ticket.phase() {
            return; // stale: the breaker has moved on
        }
        let failed = self
            .config
            .on_drop
            .is_failure(|| ticket.elapsed(self.age_reading()));
        let slow = self.is_slow(ticket);
        if slow {
            Stripes::bump(r, Counter::Slow);
        }
        if failed {
            // Relaxed: a statistic (see `Lifetime::failures`); the striped counts
            // that `in_flight` sums leave it out, so it orders nothing.
            self.dropped_failures.fetch_add(1, Ordering::Relaxed);
        }
        match ticket.kind() {
            Kind::Probe if failed || slow => {
                let _ = self.reopen(s, self.ticks(), Reason::ProbeFailed);
            }
            Kind::Probe => self.release_probe(ticket.generation()),
            Kind::Closed | Kind::Ramp if failed || slow => {
                self.record_closed(r, s, Sample { failed, slow }, false);
            }
            Kind::Closed | Kind::Ramp | Kind::Disabled => {}
        }
    }

    /// Counts a closed or recovering phase's outcome and trips if a policy says
    /// so: a closed phase to Open at level 0, a recovering one at the next level
    /// ([`Reason::RampFailed`]). A sample that is no failure clears the streak if
    /// `clears_streak` (a success does; a slow dropped call does not).
    ///
    /// The rates are checked after a failed or slow sample, and after a success
    /// while the streak word holds [`CHECK_DUE`](super::phase::CHECK_DUE): a rate
    /// stood at its threshold at `minimum_calls` when a check found fewer calls,
    /// so the success that brings the window up to `minimum_calls` may trip it.
    /// Any other success only lowers both rates, or leaves the window below
    /// `minimum_calls`. (See the implementation notes, "A success's check".)
    // Inlined into its callers: called, it costs the failure path about 30
    // instructions of saved registers (callgrind: 136 against 106 a failure).
    #[inline(always)]
    pub(super) fn record_closed(
        &self,
        r: StripeRef<'_>,
        s: Snapshot,
        sample: Sample,
        clears_streak: bool,
    ) {
        let generation = s.generation();
        let mut streak = 0;
        let mut check_due = false;
        if sample.failed {
            if self.config.consecutive_failures.is_some() {
                streak = self.bump_streak(generation);
            }
        } else if clears_streak {
            check_due = self.clear_streak(generation);
        }
        let mut window = WindowCounts::default();
        let mut reason =
            policy::streak_trips(&self.config, streak).then_some(Reason::ConsecutiveFailures);
        if let Some(w) = &self.window {
            let now = self.clock.now();
            let counted = w.record(&self.hot.stripes, r, (s, &self.hot.word), now, sample);
            if !sample.failed && !sample.slow {
                if check_due {
                    window = match counted {
                        Some(counted) => w.counts_after(&self.hot.stripes, counted, now),
                        None => w.counts(&self.hot.stripes, generation, now),
                    };
                    reason = reason.or_else(|| policy::rate_trip(&self.config, window));
                    if reason.is_none() && !policy::trips_at_minimum(&self.config, window) {
                        self.mark_check_due(generation, false);
                    }
                }
            } else {
                match counted {
                    Some(counted) => {
                        // Two failures recorded at once must not both miss each
                        // other's count (store buffering). Each takes a number
                        // between its record and its read, by an `AcqRel` increment
                        // of one count: the later-numbered one's read sees the
                        // other's record (what a `SeqCst` fence between the two did
                        // here before). The failure budget: a sample its grant
                        // covers cannot trip, and skips the read (a trip already
                        // decided reads, for its event).
                        let (covered, number) = w.covered(&counted, now);
                        if reason.is_some() || !covered {
                            window = w.counts_after(&self.hot.stripes, counted, now);
                            let verdict = policy::rate_verdict(&self.config, window);
                            reason = reason.or(verdict.err());
                            if let (None, Ok(Some(allowance))) = (reason, verdict) {
                                w.grant(&counted, now, number, allowance);
                            }
                            if reason.is_none() && policy::trips_at_minimum(&self.config, window) {
                                self.mark_check_due(generation, true);
                            }
                        }
                    }
                    None => {
                        // Too late for its bucket: counted nowhere, so nothing of it
                        // need be seen, and its read needs no order.
                        window = w.counts(&self.hot.stripes, generation, now);
                        reason = reason.or_else(|| policy::rate_trip(&self.config, window));
                        if reason.is_none() && policy::trips_at_minimum(&self.config, window) {
                            self.mark_check_due(generation, true);
                        }
                    }
                }
            }
        }
        if let Some(mut reason) = reason {
            if !sample.failed && !clears_streak && self.config.consecutive_failures.is_some() {
                // A sample that left the streak as it was (a slow dropped call):
                // its trip's event reports the streak as it stands.
                streak = u64::from(self.streak_of(generation));
            }
            self.revive_clock(); // a trip's cooldown starts at the true time
            let now = self.ticks();
            let mut level = 0;
            if s.is(State::Recovering) {
                (level, reason) = (self.next_level(s), Reason::RampFailed);
            }
            let _ = self.trip(s, level, now, reason, window, streak);
        }
    }
}
