//! Saving: a breaker's state read as plain data ([`CircuitBreaker::save`]).

use super::*;

/// What `CircuitBreaker::taken` read from a breaker for [`CircuitBreaker::save`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Taken {
    pub(crate) state: State,
    pub(crate) level: u8,
    /// For Open: its deadline and the current tick.
    pub(crate) open_in: Option<(u64, u64)>,
    pub(crate) streak: u32,
    /// The window's shape and (for Closed) counts.
    pub(crate) window: Option<(WindowConfig, WindowCounts)>,
}

impl<C: Clock> CircuitBreaker<C> {
    /// The breaker's state as plain data, to restore later with
    /// [`Builder::restore`]: after a restart, in a new instance, or under a new
    /// configuration. Takes no lock and writes nothing (it reads the breaker as
    /// [`metrics`](Self::metrics) does), so no call waits for it. Reads the wall
    /// clock once; [`save_at`](Self::save_at) takes it as an argument.
    ///
    /// It holds the state, the backoff level, an Open deadline as wall-clock
    /// time, the consecutive failures, the window's totals and the name: see
    /// [`SavedState`]. A save racing calls sees each word as one of them left it.
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, State};
    ///
    /// let breaker = CircuitBreaker::builder().consecutive_failures(3).build()?;
    /// let _ = breaker.call(|| Err::<(), _>("refused"));
    /// let saved = breaker.save();
    /// assert_eq!((saved.state, saved.consecutive_failures), (State::Closed, 1));
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn save(&self) -> SavedState {
        self.save_at(SystemTime::now())
    }

    /// [`save`](Self::save) with the wall-clock time given: `now` is taken as the
    /// time of the breaker's clock reading, so tests need no sleeps.
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, ManualClock, State};
    /// use std::time::{Duration, UNIX_EPOCH};
    ///
    /// let clock = ManualClock::new();
    /// let breaker = CircuitBreaker::builder()
    ///     .consecutive_failures(1)
    ///     .open_duration(Duration::from_secs(5))
    ///     .clock(clock.clone())
    ///     .build()?;
    /// let _ = breaker.call(|| Err::<(), _>("refused"));
    /// clock.advance(Duration::from_secs(2));
    ///
    /// let now = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    /// let saved = breaker.save_at(now);
    /// assert_eq!(saved.state, State::Open);
    /// assert_eq!(saved.open_until, Some(now + Duration::from_secs(3)));
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn save_at(&self, now: SystemTime) -> SavedState {
        let t = self.taken();
        let open_until = t.open_in.map(|(deadline, at)| {
            let until = match deadline.checked_sub(at) {
                Some(ahead) => now.checked_add(Duration::from_millis(ahead)),
                None => now.checked_sub(Duration::from_millis(at - deadline)),
            };
            whole_ms(until.unwrap_or(now), true)
        });
        SavedState {
            version: SavedState::VERSION,
            name: self.name().to_owned(),
            saved_at: whole_ms(now, false),
            state: t.state,
            level: t.level,
            open_until,
            consecutive_failures: t.streak,
            window: t.window.map(|(shape, counts)| SavedWindow {
                // Whole milliseconds, rounded down, as the wire carries it: a
                // saved state round-trips exactly, and a window as long as this
                // one (its length not a whole number of milliseconds) still takes
                // the totals back.
                length: Duration::from_millis(
                    shape.bucket_nanos.saturating_mul(u64::from(shape.buckets)) / 1_000_000,
                ),
                buckets: shape.buckets,
                // A raced shared bucket may show more failures than calls (see the
                // window's Exactness); a saved state never does.
                counts: WindowCounts {
                    calls: counts.calls,
                    failures: counts.failures.min(counts.calls),
                    slow: counts.slow.min(counts.calls),
                },
            }),
        }
    }
}
