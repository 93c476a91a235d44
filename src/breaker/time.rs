//! The breaker's time: ticks from its clock's readings, each phase's time from its
//! start (see [`TimeSlot`]), cooldowns and the `retry_after` a rejection carries.

use super::*;

impl<C: Clock> CircuitBreaker<C> {
    // ---- time ------------------------------------------------------------------

    /// The current tick (milliseconds since the breaker was built, plus `bias`).
    #[inline]
    pub(super) fn ticks(&self) -> u64 {
        self.ticks_at(self.clock.now())
    }

    /// The tick of the clock reading `reading`.
    #[inline]
    pub(super) fn ticks_at(&self, reading: u64) -> u64 {
        self.bias + ticks_from_nanos(reading.saturating_sub(self.origin))
    }

    /// The Open word that follows `cur` at `now`, at backoff `level`, and when it
    /// starts.
    pub(super) fn opened(&self, cur: Snapshot, level: u8, now: u64) -> (Snapshot, u64) {
        (cur.next(State::Open, level), now)
    }

    /// The time of phase `s` if it starts at `start` (see [`TimeSlot`]): for Open
    /// its deadline, `start` plus the cooldown of its level and generation
    /// (jittered, the same for every thread), so a rejection compares the clock
    /// with the deadline and computes nothing; otherwise `start`.
    pub(super) fn time_of(&self, s: Snapshot, start: u64) -> u64 {
        policy::phase_time(&self.config, self.seed, self.ticks_max, s, start)
    }

    /// When phase `s` started; `None` if the breaker has moved past `s`: the
    /// caller's word is stale. A current phase's start claimed over by a candidate
    /// a tag cycle late is put back ([`TimeSlot::reclaim`]), so the current phase
    /// always has one.
    #[inline]
    pub(super) fn phase_start(&self, s: Snapshot) -> Option<u64> {
        let time = &self.phase.time;
        time.start_of(s)
            .or_else(|| time.reclaim(&self.hot.word, s, self.ticks()))
    }

    /// The time of phase `s` (see [`time_of`](Self::time_of)), the same for every
    /// thread; `None` if the breaker has moved past `s`: the caller's word is stale.
    #[inline]
    pub(super) fn phase_ticks(&self, s: Snapshot) -> Option<u64> {
        self.phase_start(s).map(|start| self.time_of(s, start))
    }

    /// As [`phase_ticks`](Self::phase_ticks), or, if `s` is over already, what it
    /// would be had it started at `now` (a reader that reports).
    pub(super) fn peek_ticks(&self, s: Snapshot, now: u64) -> u64 {
        self.time_of(s, self.phase_start(s).unwrap_or(now))
    }

    /// The jittered cooldown, in ticks, of an Open phase at `level` in `generation`.
    pub(super) fn cooldown(&self, level: u8, generation: Generation) -> u64 {
        policy::cooldown(&self.config, level, generation, self.seed)
    }

    /// The `retry_after` of phase `s`, whose time is `ticks`, at `now`.
    pub(super) fn retry_after(&self, s: Snapshot, ticks: u64, now: u64) -> Option<Duration> {
        match s.state() {
            State::Open => Some(ticks_to_duration(ticks.saturating_sub(now))),
            // A round past its timeout: the next call reopens the breaker one level
            // up (see `admit_general`), and is rejected for that phase's cooldown.
            State::HalfOpen
                if policy::round_timed_out(&self.config, self.ticks_max, ticks, now) =>
            {
                let next = s.next(State::Open, self.next_level(s));
                Some(ticks_to_duration(
                    self.cooldown(next.level(), next.generation()),
                ))
            }
            State::HalfOpen => {
                let round = Round::from_data(self.phase.round.data_for(s.generation()));
                if round.issued < self.config.half_open_probes {
                    Some(Duration::ZERO) // a probe slot is free now
                } else {
                    let retry = policy::half_open_retry(
                        &self.config,
                        self.seed,
                        self.ticks_max,
                        s,
                        ticks,
                        now,
                    );
                    Some(ticks_to_duration(retry))
                }
            }
            State::ForcedOpen => None,
            // Recovering: the next call is admitted with the ramp's current share.
            State::Closed | State::Disabled | State::Recovering => Some(Duration::ZERO),
        }
    }
}

pub(super) fn ticks_to_duration(ticks: u64) -> Duration {
    Duration::from_nanos(ticks.saturating_mul(NANOS_PER_TICK))
}

impl<C: Clock> CircuitBreaker<C> {
    /// Bumps `counter` (a rejection's or a failure's), and on every 256th count in
    /// the stripe has the clock check that its
    /// cheap reading still moves ([`Clock::revive`]: the default clock's refresh
    /// thread does not survive a `fork()`). Those paths read no clock but the cheap
    /// reading, so this is how a forked child's breaker notices; the test costs
    /// two instructions.
    #[inline(always)]
    pub(super) fn bump_and_check_clock(&self, r: StripeRef<'_>, counter: Counter) {
        if Stripes::bump_to_multiple_of_256(r, counter) {
            self.revive_clock();
        }
    }

    #[cold]
    #[inline(never)]
    pub(super) fn revive_clock(&self) {
        self.clock.revive();
    }

    #[inline]
    pub(super) fn is_slow(&self, ticket: Ticket) -> bool {
        self.config
            .slow_calls
            .is_some_and(|s| ticket.elapsed(self.timer(s)) > s.threshold_nanos.get())
    }

    /// The reading a call's age is measured with: the slow-call policy's timer if
    /// it is on, else the cheap reading (see [`Lean::TIMED`]).
    #[inline]
    pub(super) fn age_reading(&self) -> u64 {
        match self.config.slow_calls {
            Some(slow) => self.timer(slow),
            None => self.clock.now(),
        }
    }

    /// The reading that times calls for the slow-call policy (see `Builder::slow_calls`).
    #[inline]
    pub(super) fn timer(&self, slow: SlowCalls) -> u64 {
        if slow.precise() {
            self.precise()
        } else {
            self.clock.now()
        }
    }

    /// [`Clock::precise`], out of line and marked cold: it costs tens of
    /// nanoseconds anyway, and a call the compiler sees as likely makes every
    /// call through the breaker save and restore registers around it.
    #[inline(never)]
    #[cold]
    pub(super) fn precise(&self) -> u64 {
        self.clock.precise()
    }
}
