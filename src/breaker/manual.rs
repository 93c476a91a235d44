//! Manual control: force open, disable, reset, and opening from outside (`open_for`).

use super::*;

impl<C: Clock> CircuitBreaker<C> {
    /// Opens the breaker until [`reset`](Self::reset): every call is rejected. Calls in
    /// flight become stale. Does nothing if already forced open.
    ///
    /// # Examples
    /// ```
    /// let breaker = cutout::CircuitBreaker::builder().build()?;
    /// breaker.force_open();
    /// assert!(breaker.try_acquire().is_err());
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn force_open(&self) {
        self.to_forced_open();
    }

    /// Switches the breaker off until [`reset`](Self::reset): every call is admitted
    /// and nothing trips. Calls in flight become stale. Does nothing if already
    /// disabled.
    ///
    /// # Examples
    /// ```
    /// let breaker = cutout::CircuitBreaker::builder().consecutive_failures(1).build()?;
    /// breaker.disable();
    /// let _ = breaker.call(|| Err::<(), _>("down"));
    /// assert_eq!(breaker.state(), cutout::State::Disabled);
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn disable(&self) {
        self.to_disabled();
    }

    /// Closes the breaker afresh, from any state: a new generation (calls in flight
    /// become stale), an empty window, no consecutive failures, backoff level 0.
    ///
    /// # Examples
    /// ```
    /// let breaker = cutout::CircuitBreaker::builder().build()?;
    /// breaker.force_open();
    /// breaker.reset();
    /// assert_eq!(breaker.state(), cutout::State::Closed);
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn reset(&self) {
        self.to_reset();
    }

    /// Opens a Closed breaker for `duration` from now, reported as
    /// [`Reason::External`]: a decision made outside the breaker's own policies (a
    /// fleet of peers that all see the dependency down, an operator's signal).
    /// Returns whether this call opened it: then the breaker is open until
    /// `duration` from now, even where a trip opened it at the same moment (one
    /// of the two did, and the breaker keeps its deadline: `false` and the trip's
    /// cooldown, or `true` and `duration`). A call that finds another transition
    /// under way waits for it, 20 ms at most: only a thread stalled mid-transition
    /// longer than that (descheduled, or left behind by a `fork`) has its start
    /// taken, and with it its deadline.
    ///
    /// Only a Closed breaker opens: an Open or HalfOpen one (a probe round in
    /// progress decides for itself), a ForcedOpen or a Disabled one is left as it
    /// is, and nothing ever closes through this method. The Open phase keeps the
    /// current backoff level and ends like any other: after the deadline the next
    /// call half-opens it and the probes decide. Calls in flight become stale. A
    /// `duration` under a millisecond (the breaker's tick) opens nothing; one beyond
    /// the clock's range saturates.
    ///
    /// (An externally opened phase is not a cooldown of the configured length, so
    /// [`Metrics::time_in_state`] reads it as if the phase began one cooldown
    /// before its deadline; the [`Transition`] reports the true time.)
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, ManualClock, Reason, State};
    /// use std::sync::{Arc, Mutex};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let reasons = Arc::new(Mutex::new(Vec::new()));
    /// let log = reasons.clone();
    /// let breaker = CircuitBreaker::builder()
    ///     .clock(clock.clone())
    ///     .on_transition(move |t| log.lock().unwrap().push(t.reason))
    ///     .build()?;
    /// assert!(breaker.open_for(Duration::from_secs(5)));
    /// assert_eq!(breaker.state(), State::Open);
    /// let rejected = breaker.try_acquire().unwrap_err();
    /// assert_eq!(rejected.retry_after(), Some(Duration::from_secs(5)));
    /// assert!(!breaker.open_for(Duration::from_secs(60))); // already open
    ///
    /// clock.advance(Duration::from_secs(5));
    /// breaker.try_acquire()?.success(); // the probe decides
    /// assert_eq!(breaker.state(), State::Closed);
    /// assert_eq!(reasons.lock().unwrap()[0], Reason::External);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open_for(&self, duration: Duration) -> bool {
        let ticks = ticks_from_duration(duration).unwrap_or(u64::MAX);
        if ticks == 0 {
            return false;
        }
        let now = self.ticks();
        let deadline = now.saturating_add(ticks).min(self.ticks_max);
        self.open_until(deadline, now)
    }
}
