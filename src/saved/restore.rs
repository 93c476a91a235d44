//! Restoring: what [`Builder::restore`] gives a builder, and the start of the
//! breaker it builds.

use super::*;

/// What a restored breaker starts with (see `CircuitBreaker::restored`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Start {
    /// The first state word: generation 0.
    pub(crate) word: Snapshot,
    /// Its phase's time, in ticks from the breaker's origin.
    pub(crate) ticks: u64,
    /// The consecutive-failure count.
    pub(crate) streak: u32,
    /// The window's counts, put in the bucket of the origin.
    pub(crate) window: Option<WindowCounts>,
}

/// What [`Builder::restore`] gave a builder.
#[derive(Clone, Debug)]
pub(crate) struct Restore {
    saved: Option<Box<SavedState>>,
    /// The wall-clock time of the build, if given ([`Builder::restore_at`]).
    now: Option<SystemTime>,
    skew: Duration,
}

impl Default for Restore {
    fn default() -> Restore {
        Restore {
            saved: None,
            now: None,
            skew: DEFAULT_CLOCK_SKEW,
        }
    }
}

impl Restore {
    /// The tolerated clock skew ([`Builder::max_clock_skew`]), which a registry
    /// built from the builder applies to the states it restores.
    #[cfg_attr(not(feature = "registry"), allow(dead_code))]
    pub(crate) fn skew(&self) -> Duration {
        self.skew
    }

    /// The restored breaker's start under `config`, if a state was given.
    pub(crate) fn start(&self, config: &Config) -> Result<Option<Start>, ConfigError> {
        let Some(saved) = &self.saved else {
            return Ok(None);
        };
        let now = self.now.unwrap_or_else(SystemTime::now);
        saved.start(config, now, self.skew).map(Some)
    }

    /// Refuses a restore on a builder a registry shares between keys.
    #[cfg_attr(not(feature = "registry"), allow(dead_code))]
    pub(crate) fn refuse_shared(&self) -> Result<(), ConfigError> {
        match self.saved {
            None => Ok(()),
            Some(_) => Err(ConfigError::new(
                "restore",
                "a registry builds many breakers from one builder: restore them with `Registry::restore_all` or `RegistryBuilder::initial_state`",
            )),
        }
    }
}

impl SavedState {
    /// The start of a breaker restored from this state under `config` at wall time
    /// `now`, tolerating `skew` (for a registry: its builder's).
    #[cfg(feature = "registry")]
    pub(crate) fn restoring(
        &self,
        config: &Config,
        now: SystemTime,
        skew: Duration,
    ) -> Result<Start, ConfigError> {
        self.start(config, now, skew)
    }
}

impl<C: Clock> Builder<C> {
    /// Starts the breaker from `saved` (see [`CircuitBreaker::save`]) instead of
    /// Closed. The wall clock is read once, by [`build`](Self::build);
    /// [`restore_at`](Self::restore_at) takes it as an argument.
    ///
    /// What the built breaker starts with:
    /// - **Open** with a deadline still ahead: Open until then. The wall-clock time
    ///   left at the build, `open_until - now` rounded up to the 1 ms tick, becomes
    ///   a deadline on the breaker's own monotonic clock, counted from the build;
    ///   from then on only that clock counts, so a later wall-clock step changes
    ///   nothing. A deadline further ahead than this configuration's longest
    ///   cooldown ([`max_open_duration`](Self::max_open_duration)) is cut to it.
    ///   A save rounds the deadline up to a whole millisecond and a restore up to
    ///   a tick, so that no restored breaker probes early: a state saved and
    ///   restored again and again (a reload loop) ends its cooldown up to a
    ///   millisecond or two later each time, never sooner.
    ///   ([`Metrics::time_in_state`](crate::Metrics::time_in_state) reads the
    ///   phase as if it began one cooldown of its level before the deadline, as
    ///   for [`open_for`](CircuitBreaker::open_for): 0 while more than that is
    ///   left.)
    /// - **Open** with a deadline passed: ready to probe. It reads Open until the
    ///   first call moves it to HalfOpen, as a live breaker past its cooldown does.
    /// - **HalfOpen**: a fresh round, started at the build (the old round's probes
    ///   belong to the old process).
    /// - **ForcedOpen**, **Disabled**: kept, until [`reset`](CircuitBreaker::reset).
    /// - **Closed**: Closed, with the consecutive failures (if this configuration
    ///   has [`consecutive_failures`](Self::consecutive_failures)) and the window's
    ///   totals (see below). A trip is decided when the next outcome is recorded
    ///   that would decide one live: a failure or a slow call (restored counts
    ///   already over a threshold trip the breaker then), or the success that
    ///   brings a window below `minimum_calls` up to it.
    /// - **Recovering**: Closed, as above, with the ramp's consecutive failures
    ///   and window; the ramp's progress and level are not kept (a restart usually
    ///   comes long after the recovery it interrupted).
    /// - The backoff level is kept, cut to this configuration's highest; the
    ///   generation starts fresh; the name is this builder's.
    ///
    /// **Another configuration.** The window's totals are restored when this
    /// configuration has a window at least as long as the saved one (any bucket
    /// count: totals do not depend on it), and the save is less than a window
    /// length old; otherwise the window starts empty (a shorter window cannot
    /// tell which saved calls fall inside it). Restored totals count as calls made
    /// at the build: they leave the window one window length later (see
    /// [`SavedWindow`]). The deadline and level are cut as above; the streak needs
    /// the consecutive-failures policy. Nothing else of a configuration travels.
    ///
    /// **Refused.** [`build`](Self::build) returns a [`ConfigError`] naming
    /// `restore` and builds nothing for: an unknown [`version`](SavedState::version),
    /// a `saved_at` more than the tolerated clock skew ahead of this host's wall
    /// clock ([`max_clock_skew`](Self::max_clock_skew), default 1 minute), a level
    /// above 63, an Open state without `open_until`, a window of no length or no
    /// buckets, or one with more failures or slow calls than calls.
    ///
    /// **Config reload without losing state**: save, build with the new settings
    /// and restore, then swap the breaker where callers find it (for example in an
    /// `ArcSwap`). A breaker's settings never change in place: that would cost
    /// every call a load.
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, State};
    /// use std::sync::{Arc, RwLock};
    /// use std::time::Duration;
    ///
    /// let current = RwLock::new(Arc::new(
    ///     CircuitBreaker::builder().consecutive_failures(1).build()?,
    /// ));
    /// let _ = current.read().unwrap().call(|| Err::<(), _>("down"));
    ///
    /// // The reload: new settings, same state.
    /// let saved = current.read().unwrap().save();
    /// let reloaded = CircuitBreaker::builder()
    ///     .consecutive_failures(5)
    ///     .open_duration(Duration::from_secs(10))
    ///     .restore(saved)
    ///     .build()?;
    /// *current.write().unwrap() = Arc::new(reloaded);
    /// assert_eq!(current.read().unwrap().state(), State::Open);
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn restore(mut self, saved: SavedState) -> Self {
        self.restore = Restore {
            saved: Some(Box::new(saved)),
            now: None,
            ..self.restore
        };
        self
    }

    /// [`restore`](Self::restore) with the wall-clock time of the build given as
    /// `now`: what `SystemTime::now()` would return at [`build`](Self::build). For
    /// tests (no sleeps, with a [`ManualClock`](crate::ManualClock) for the
    /// monotonic side), and for a caller that read the wall clock already.
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, ManualClock, SavedState, State};
    /// use std::time::{Duration, UNIX_EPOCH};
    ///
    /// let t0 = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    /// let mut saved = SavedState::new("db", State::Open, t0);
    /// saved.open_until = Some(t0 + Duration::from_secs(10));
    ///
    /// // Restored 4 s after the save: Open for 6 s more.
    /// let clock = ManualClock::new();
    /// let breaker = CircuitBreaker::builder()
    ///     .clock(clock.clone())
    ///     .restore_at(saved, t0 + Duration::from_secs(4))
    ///     .build()?;
    /// clock.advance(Duration::from_millis(5_999));
    /// assert!(breaker.try_acquire().is_err());
    /// clock.advance(Duration::from_millis(1));
    /// assert!(breaker.try_acquire().is_ok());
    /// assert_eq!(breaker.state(), State::HalfOpen);
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn restore_at(mut self, saved: SavedState, now: SystemTime) -> Self {
        self.restore = Restore {
            saved: Some(Box::new(saved)),
            now: Some(now),
            ..self.restore
        };
        self
    }

    /// How far ahead of this host's wall clock a saved state's `saved_at` may be
    /// (default 1 minute): a state saved "in the future" by more than this says a
    /// clock is wrong, and [`build`](Self::build) refuses it rather than trust its
    /// deadline. Within it, a deadline is taken as it is, so a skew of `d` can
    /// lengthen or shorten a restored cooldown by up to `d`. A
    /// [`Registry`](crate::Registry) built from this builder applies it to the
    /// states it restores ([`restore_all`](crate::Registry::restore_all),
    /// [`initial_state`](crate::RegistryBuilder::initial_state)); a per-key builder
    /// ([`configure`](crate::RegistryBuilder::configure)) to its key's.
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, SavedState, State};
    /// use std::time::{Duration, SystemTime};
    ///
    /// let now = SystemTime::now();
    /// let saved = SavedState::new("db", State::Closed, now + Duration::from_secs(5));
    /// let strict = CircuitBreaker::builder()
    ///     .max_clock_skew(Duration::from_secs(1))
    ///     .restore_at(saved.clone(), now)
    ///     .build();
    /// assert_eq!(strict.unwrap_err().field(), "restore");
    /// assert!(CircuitBreaker::builder().restore_at(saved, now).build().is_ok());
    /// ```
    pub fn max_clock_skew(mut self, skew: Duration) -> Self {
        self.restore.skew = skew;
        self
    }
}
