//! Admission off the lean path: a closed call's ticket, the rejections (and the
//! owner's cached Open deadline), the general path through Open, HalfOpen,
//! Recovering and the manual states.

use super::*;

impl<C: Clock> CircuitBreaker<C> {
    // ---- admission -------------------------------------------------------------

    /// Admission in the calling thread's stripe. Always inlined, as `acquire_in`:
    /// the closed path is a few loads and an increment (see `try_acquire`).
    #[inline(always)]
    pub(crate) fn acquire(&self) -> Result<Ticket, Rejected> {
        self.acquire_in(self.hot.stripes.mine())
    }

    /// Admission, counting in the stripe `r` of the calling thread.
    #[inline(always)]
    pub(super) fn acquire_in(&self, r: StripeRef<'_>) -> Result<Ticket, Rejected> {
        let s = self.hot.word.load();
        if s.is_closed() {
            return Ok(self.admit(r, s));
        }
        self.acquire_not_closed(r, s)
    }

    /// The other hot path, a rejection inside the cooldown, kept apart from the
    /// transition loop so it stays small. Marked cold all the same: that only tells
    /// the compiler to lay the closed path out first (a rejection costs the same).
    #[inline(never)]
    #[cold]
    pub(super) fn acquire_not_closed(
        &self,
        r: StripeRef<'_>,
        s: Snapshot,
    ) -> Result<Ticket, Rejected> {
        let admitted = 'admitted: {
            if s.is(State::Open) {
                if let Some(deadline) = self.phase_ticks(s) {
                    let reading = self.clock.now();
                    if let Some(rejected) = self.reject_in_cooldown(r, s, deadline, reading) {
                        break 'admitted Err(rejected);
                    }
                }
            }
            self.admit_general(r, s)
        };
        match admitted {
            // A shadow breaker runs the call it would have rejected (counted by
            // `count_rejected`), on a ticket whose outcome counts nowhere (but
            // for the candidates it is offered to, which read its start).
            Err(_) if self.config.shadow => Ok(Ticket::shadow(self.admission_reading())),
            admitted => admitted,
        }
    }

    #[inline]
    /// Admits a call in phase `s` (Closed, HalfOpen for a probe whose slot is
    /// taken, or Disabled): its ticket.
    pub(super) fn admit(&self, r: StripeRef<'_>, s: Snapshot) -> Ticket {
        Stripes::bump(r, Counter::Admitted);
        Ticket::new(s, self.admission_reading())
    }

    /// The start of a call admitted now: a clock reading if calls are timed
    /// (for the slow-call policy, `on_drop`, or a candidate's), else 0; a
    /// precise one where a candidate times calls precisely.
    #[inline]
    fn admission_reading(&self) -> u64 {
        let lean = self.hot.lean;
        match lean.has(Lean::TIMED | Lean::PRECISE | Lean::OFFERS_TIMED) {
            true if lean.has(Lean::OFFERS_PRECISE) => self.precise(),
            true => self.age_reading(),
            false => 0,
        }
    }

    /// A rejection by `state` that admits a call in `ticks`.
    #[inline]
    pub(super) fn reject(&self, r: StripeRef<'_>, state: State, ticks: u64) -> Rejected {
        self.count_rejected(r, true);
        Rejected::after_ms(state, ticks) // a tick is a millisecond
    }

    /// The rejection of a call at clock reading `reading` by the Open phase `s`,
    /// whose deadline is tick `deadline`, if its cooldown is not over. A thread that
    /// owns its stripe keeps the deadline, as a clock reading, in its stripe (see
    /// [`NEWEST_OR_DEADLINE`]): its next rejections in this phase take the lean path,
    /// [`reject_cached`](Self::reject_cached).
    pub(super) fn reject_in_cooldown(
        &self,
        r: StripeRef<'_>,
        s: Snapshot,
        deadline: u64,
        reading: u64,
    ) -> Option<Rejected> {
        let at = self.reading_at(deadline);
        if reading >= at {
            return None;
        }
        // A shadow breaker caches no deadline: its rejections stay off the lean
        // path, where they run the call instead.
        if let Some(o) = r.as_owned().filter(|_| !self.config.shadow) {
            // Relaxed: private to the owner (see `reject_cached`).
            o.scratch(NEWEST_OR_DEADLINE).store(at, Ordering::Relaxed);
            o.scratch(PHASE_KEY)
                .store(s.key().to_bits(), Ordering::Relaxed);
        }
        Some(self.reject(r, State::Open, (at - reading).div_ceil(NANOS_PER_TICK)))
    }

    /// The clock reading at which tick `deadline` starts.
    fn reading_at(&self, deadline: u64) -> u64 {
        // No overflow: a deadline is at most `ticks_max`, the last tick a reading
        // can reach from `origin`.
        self.origin
            .saturating_add(deadline.saturating_sub(self.bias) * NANOS_PER_TICK)
    }

    /// The rejection a call would meet now, if the breaker is Open inside its
    /// cooldown or forced open; `None` in every other state, where only an
    /// admission decides (it may take a probe slot, ask the ramp, or end the
    /// cooldown). A pure read: it counts, moves and caches nothing. For a tower
    /// service that answers its readiness for an open breaker without asking the
    /// service behind it (see `CircuitBreakerService::poll_ready`); the call it
    /// turns away is counted by [`count_rejection`](Self::count_rejection).
    #[cfg(feature = "tower")]
    #[inline]
    pub(crate) fn rejecting(&self) -> Option<Rejected> {
        let s = self.hot.word.load();
        if s.is_closed() {
            return None;
        }
        self.rejecting_not_closed(s)
    }

    #[cfg(feature = "tower")]
    #[cold]
    #[inline(never)]
    fn rejecting_not_closed(&self, s: Snapshot) -> Option<Rejected> {
        if self.config.shadow {
            return None; // a shadow breaker admits every call
        }
        match s.state() {
            State::ForcedOpen => Some(Rejected::until_reset(State::ForcedOpen)),
            State::Open => {
                let at = self.reading_at(self.phase_ticks(s)?);
                let reading = self.clock.now();
                (reading < at).then(|| {
                    Rejected::after_ms(State::Open, (at - reading).div_ceil(NANOS_PER_TICK))
                })
            }
            _ => None,
        }
    }

    /// Counts a call turned away by a rejection [`rejecting`](Self::rejecting)
    /// found, as the admission it stands for would have.
    #[cfg(feature = "tower")]
    #[cold]
    #[inline(never)]
    pub(crate) fn count_rejection(&self) {
        self.bump_and_check_clock(self.hot.stripes.mine(), Counter::Rejected);
    }

    /// The lean rejection: the rejection of a call by the Open phase `s` if the
    /// calling thread has its deadline in its stripe (see
    /// [`reject_in_cooldown`](Self::reject_in_cooldown)) and a cheap clock reading
    /// says it is not over. Three loads and three compares; the division that finds
    /// the time left is only made for a caller that reads it.
    #[inline(always)]
    pub(super) fn reject_cached(&self, o: Owned<'_>, s: Snapshot) -> Option<Rejected> {
        // Relaxed: private to the owner, which wrote both (a phase has one word, so
        // a deadline cached for `s` is `s`'s).
        if !s.key().is(o.scratch(PHASE_KEY).load(Ordering::Relaxed)) {
            return None;
        }
        let now = self.clock.now_if_cheap()?;
        let at = o.scratch(NEWEST_OR_DEADLINE).load(Ordering::Relaxed);
        // `at - now` is at least 1 here: its milliseconds, rounded up, are one more
        // than those of one nanosecond less, rounded down.
        // Counted here, not by `reject`: only a breaker that is not a shadow caches
        // a deadline, so the lean path never asks whether it is one.
        (now < at).then(|| {
            self.bump_and_check_clock(o.stripe(), Counter::Rejected);
            Rejected::after_ms(State::Open, (at - now - 1) / NANOS_PER_TICK + 1)
        })
    }

    #[inline(never)]
    pub(super) fn admit_general(
        &self,
        r: StripeRef<'_>,
        mut s: Snapshot,
    ) -> Result<Ticket, Rejected> {
        loop {
            s = match s.state() {
                State::Closed | State::Disabled => return Ok(self.admit(r, s)),
                State::ForcedOpen => {
                    self.count_rejected(r, false);
                    return Err(Rejected::until_reset(State::ForcedOpen));
                }
                State::Open => {
                    let reading = self.clock.now();
                    let now = self.ticks_at(reading);
                    let Some(deadline) = self.phase_ticks(s) else {
                        s = self.after(s); // `s` is over: look again
                        continue;
                    };
                    if let Some(rejected) = self.reject_in_cooldown(r, s, deadline, reading) {
                        return Err(rejected);
                    }
                    self.to_half_open(s, now)
                }
                State::HalfOpen => {
                    let now = self.ticks();
                    let Some(started) = self.phase_ticks(s) else {
                        s = self.after(s); // `s` is over: look again
                        continue;
                    };
                    if policy::round_timed_out(&self.config, self.ticks_max, started, now) {
                        // A round without a verdict for the whole timeout failed.
                        self.reopen(s, now, Reason::HalfOpenTimeout)
                    } else {
                        match self.take_probe(s) {
                            Probe::Taken => return Ok(self.admit(r, s)),
                            Probe::Full => {
                                let retry = policy::half_open_retry(
                                    &self.config,
                                    self.seed,
                                    self.ticks_max,
                                    s,
                                    started,
                                    now,
                                );
                                return Err(self.reject(r, State::HalfOpen, retry));
                            }
                            Probe::Retry(cur) => cur,
                        }
                    }
                }
                State::Recovering => match self.ramp_step(r, s) {
                    Ok(true) => return Ok(self.admit(r, s)),
                    Ok(false) => return Err(self.reject(r, State::Recovering, 0)),
                    Err(cur) => cur,
                },
            }
        }
    }

    /// The word after phase `s`, whose start reads as another phase's: `s` is
    /// over. Never `s` itself: a current phase's start stays readable, or is put
    /// back (see `TimeSlot::claim` and `reclaim`), and a word that still held `s`
    /// would make the admission loop spin; a debug build says so at once.
    fn after(&self, s: Snapshot) -> Snapshot {
        let current = self.hot.word.load();
        debug_assert_ne!(
            current, s,
            "the current phase's start reads as another phase's"
        );
        current
    }

    /// A call to recovering phase `s`: whether the ramp admits it (see
    /// [`crate::ramp`]), deciding on the caller's stripe `r`; or, if the ramp is
    /// over, the word after it, which this call closes if no other thread did
    /// ([`Reason::RampCompleted`]); or the current word if `s` is over.
    pub(super) fn ramp_step(&self, r: StripeRef<'_>, s: Snapshot) -> Result<bool, Snapshot> {
        let now = self.ticks();
        let Some(started) = self.phase_ticks(s) else {
            return Err(self.after(s)); // `s` is over: look again
        };
        // Without a ramp configured (a word no build makes) the ramp is over at once.
        // Its end saturates at the clock's last tick, as a cooldown's deadline
        // does, so a clock that saturates ends the ramp.
        let length = self.config.ramp_up.unwrap_or(0);
        let elapsed = now.saturating_sub(started);
        if now < started.saturating_add(length).min(self.ticks_max) {
            return Ok(ramp::admit(r, self.seed, ramp::share(elapsed, length)));
        }
        Err(self.close(s, now))
    }
}
