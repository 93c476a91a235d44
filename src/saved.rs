//! Save and restore: [`SavedState`], [`CircuitBreaker::save`] and
//! [`Builder::restore`].
//!
//! A saved state is plain data read the way [`CircuitBreaker::metrics`] reads the
//! breaker (loads only: no lock, no write, no call waits for it). Restoring builds
//! a new breaker whose first words are set from it before anyone can call it, so
//! the call path is the one every breaker has: nothing is checked per call.
//!
//! The rules (what `Builder::restore` documents to users):
//! - The generation starts fresh (0, as a new breaker's): no permit of the saving
//!   process can reach this breaker anyway.
//! - Open: the deadline travels as wall-clock time. At build the remaining time,
//!   `open_until - now` on the wall clock (rounded up to the 1 ms tick), becomes a
//!   deadline on the breaker's monotonic clock, counted from its origin; from then
//!   on only the monotonic clock counts, so a wall-clock step after the build
//!   changes nothing (contract 10). A deadline already passed gives a deadline of
//!   tick 0: the first call half-opens the breaker. A deadline further ahead than
//!   this configuration's longest cooldown is cut to it.
//! - HalfOpen restores as a fresh round started at the build; ForcedOpen and
//!   Disabled are kept; the backoff level is kept, cut to this configuration's
//!   highest level. Closed starts at level 0, as every Closed phase does.
//! - Recovering (a ramp, see `Builder::ramp_up`) restores as Closed, with the
//!   ramp's consecutive failures and window: the ramp's progress is not saved, and
//!   a restart usually comes long after the recovery it interrupted.
//! - The window travels as totals (see [`SavedWindow`] for why), restored into the
//!   bucket of the build's instant.

use crate::clock::Clock;
use crate::config::{Builder, Config, WindowConfig};
use crate::state::{LEVEL_MAX, NANOS_PER_TICK, Snapshot, TICKS_MAX};
use crate::window::WindowCounts;
use crate::{CircuitBreaker, ConfigError, State};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How far ahead of this host's wall clock a saved state's `saved_at` may be
/// before [`Builder::restore`] refuses it (see [`Builder::max_clock_skew`]).
mod restore;
mod save;

pub(crate) use restore::{Restore, Start};
pub(crate) use save::Taken;

const DEFAULT_CLOCK_SKEW: Duration = Duration::from_secs(60);

/// A breaker's state as plain data: what [`CircuitBreaker::save`] takes and
/// [`Builder::restore`] starts a new breaker from, in this process or another.
///
/// Every field is public, so code outside this crate (a fleet view, a store) can
/// read a saved state and build one with [`SavedState::new`] and field
/// assignments. The struct is `#[non_exhaustive]`: a later version may add fields,
/// with defaults, and a new [`VERSION`](Self::VERSION) if their meaning changes.
///
/// # Format
/// With the `serde` feature, `SavedState` is `Serialize` and `Deserialize` in this
/// format (version 1), here as JSON:
///
/// ```json
/// {
///   "version": 1,
///   "name": "payments",
///   "saved_at_ms": 1764600000000,
///   "state": "open",
///   "level": 2,
///   "open_until_ms": 1764600004000,
///   "consecutive_failures": 0,
///   "window": { "length_ms": 10000, "buckets": 10, "calls": 40, "failures": 25, "slow": 0 }
/// }
/// ```
///
/// - Times are whole milliseconds since the Unix epoch (UTC): `saved_at_ms`
///   rounded down, `open_until_ms` rounded up (a restored breaker never probes
///   early). [`save`](CircuitBreaker::save) takes whole milliseconds already, so its
///   states round-trip exactly. A time before the epoch cannot be serialized.
/// - `state` is [`State::as_str`]: `closed`, `open`, `half_open`, `forced_open`,
///   `disabled` or `recovering`. `recovering` was added within version 1 (a
///   compatible addition: a reader that predates it fails to deserialize such a
///   state, and no state it could read changed); it restores as `closed`.
/// - `open_until_ms` and `window` are left out when absent; `level` and
///   `consecutive_failures` default to 0. Unknown fields are ignored, so a reader
///   of this version reads a later version's additions as absent; a state whose
///   `version` it does not know deserializes, and [`Builder::restore`] refuses it.
///
/// # Examples
/// ```
/// use cutout::{CircuitBreaker, ManualClock, SavedState, State};
/// use std::time::{Duration, SystemTime};
///
/// let breaker = CircuitBreaker::builder().name("payments").consecutive_failures(1).build()?;
/// let _ = breaker.call(|| Err::<(), _>("connection refused"));
///
/// let saved: SavedState = breaker.save();
/// assert_eq!((saved.name.as_str(), saved.state), ("payments", State::Open));
/// assert!(saved.open_until.is_some());
///
/// // In the next process (here: the same one), with the same builder:
/// let restored = CircuitBreaker::builder()
///     .name("payments")
///     .consecutive_failures(1)
///     .restore(saved)
///     .build()?;
/// assert_eq!(restored.state(), State::Open);
/// # Ok::<(), cutout::ConfigError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SavedState {
    /// The format version, [`SavedState::VERSION`] for a state this version
    /// saved. [`Builder::restore`] refuses any other.
    pub version: u32,
    /// The saved breaker's name ([`CircuitBreaker::name`]). Restoring does not
    /// rename a breaker: the builder's name stands. It says whose state this is.
    pub name: String,
    /// When the state was saved, on the saving host's wall clock.
    pub saved_at: SystemTime,
    /// The state. An Open breaker past its cooldown reads Open (as
    /// [`CircuitBreaker::state`] does), with an `open_until` already passed.
    pub state: State,
    /// The backoff level: how many failed probe rounds since the breaker last
    /// closed (the next reopening waits `open_duration * multiplier^level`). At
    /// most [`MAX_LEVEL`](Self::MAX_LEVEL) (63).
    pub level: u8,
    /// When an Open breaker admits a probe, on the saving host's wall clock.
    /// Required for [`State::Open`], ignored for every other state.
    pub open_until: Option<SystemTime>,
    /// Failures in a row in a Closed or Recovering breaker (0 in any other state,
    /// and ignored there).
    pub consecutive_failures: u32,
    /// The window's shape and counts, for a breaker with a window. Only a Closed
    /// or Recovering breaker counts (the counts of any other state are zero and
    /// ignored).
    pub window: Option<SavedWindow>,
}

impl SavedState {
    /// The format version this version of cutout writes and reads.
    ///
    /// # Examples
    /// ```
    /// let saved = cutout::CircuitBreaker::builder().build()?.save();
    /// assert_eq!(saved.version, cutout::SavedState::VERSION);
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub const VERSION: u32 = 1;

    /// The highest backoff [`level`](Self::level) a breaker reaches, and a
    /// restore takes.
    pub const MAX_LEVEL: u8 = LEVEL_MAX;

    /// A saved state of `state` for the breaker named `name`, saved at `saved_at`,
    /// with the current [`VERSION`](Self::VERSION), level 0, no deadline, no
    /// consecutive failures and no window: set the other fields after.
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, SavedState, State};
    /// use std::time::{Duration, SystemTime};
    ///
    /// // A peer reports "payments" open for another 30 s.
    /// let now = SystemTime::now();
    /// let mut saved = SavedState::new("payments", State::Open, now);
    /// saved.open_until = Some(now + Duration::from_secs(30));
    /// let breaker = CircuitBreaker::builder().restore_at(saved, now).build()?;
    /// assert_eq!(breaker.state(), State::Open);
    /// assert!(breaker.try_acquire().is_err());
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn new(name: impl Into<String>, state: State, saved_at: SystemTime) -> SavedState {
        SavedState {
            version: SavedState::VERSION,
            name: name.into(),
            saved_at,
            state,
            level: 0,
            open_until: None,
            consecutive_failures: 0,
            window: None,
        }
    }

    /// The start of a breaker restored from this state under `config`, at wall
    /// time `now`, or why it cannot be restored.
    fn start(
        &self,
        config: &Config,
        now: SystemTime,
        skew: Duration,
    ) -> Result<Start, ConfigError> {
        let refuse = |reason: String| ConfigError::new("restore", reason);
        if self.version != SavedState::VERSION {
            return Err(refuse(format!(
                "format version {} is not one this version of cutout reads (it reads {})",
                self.version,
                SavedState::VERSION
            )));
        }
        if let Ok(ahead) = self.saved_at.duration_since(now) {
            if ahead > skew {
                return Err(refuse(format!(
                    "saved_at is {ahead:?} ahead of this host's wall clock, more than the tolerated clock skew of {skew:?} (see `max_clock_skew`)"
                )));
            }
        }
        if self.level > LEVEL_MAX {
            return Err(refuse(format!(
                "level {} is beyond the highest backoff level, {LEVEL_MAX}",
                self.level
            )));
        }
        let window = match &self.window {
            Some(w) => Some(w.check()?),
            None => None,
        };
        let level = self.level.min(config.max_level());
        let (word, ticks) = match self.state {
            // A recovering breaker restores as a Closed one (its ramp's progress
            // is not saved), with the ramp's streak and window.
            State::Closed | State::Recovering => (Snapshot::starting(State::Closed, 0), 0),
            State::Open => {
                let until = self.open_until.ok_or_else(|| {
                    refuse("an Open state needs `open_until`, its deadline".to_string())
                })?;
                let longest = config.cooldowns.last().copied().unwrap_or(0);
                let left = remaining_ticks(until, now).min(longest);
                (Snapshot::starting(State::Open, level), left)
            }
            state => (Snapshot::starting(state, level), 0),
        };
        let closed = matches!(self.state, State::Closed | State::Recovering);
        let elapsed = now.duration_since(self.saved_at).unwrap_or(Duration::ZERO);
        Ok(Start {
            word,
            ticks,
            streak: match closed && config.consecutive_failures.is_some() {
                true => self.consecutive_failures,
                false => 0,
            },
            window: match (closed, window, config.window) {
                (true, Some(w), Some(shape)) => w.restorable(shape, elapsed),
                _ => None,
            },
        })
    }
}

/// A saved window: its shape when saved and the totals it held.
///
/// Totals, not buckets. A window's bucket edges are set by its breaker's origin on
/// a monotonic clock, which means nothing in another process, and the restoring
/// breaker's window starts at its build: it has no buckets before it. Counts
/// restored per bucket would land in buckets of the wrong age anyway, off by up to
/// a bucket each, and all saved buckets would fall in the first. So the totals
/// travel, and a restored breaker counts them as calls made at its build: they
/// stay in its window for one window length, then leave it together. A saved
/// call would have left it sooner: by up to its age at the save (less than a
/// window length) plus the time from the save to the restore (less than another,
/// or the totals are not restored). A restored breaker remembers the calls before
/// it longer, its successes as its failures: restored in an outage's first
/// moments, the successes before it delay the trip until they leave. The
/// restored breaker keeps them in one bucket of a shared stripe, which holds at
/// most `u32::MAX` of each count: totals above half of that (more than two
/// billion calls in one window) are scaled down to it, keeping their rates
/// (rounded up, by less than one part in two billion), so the bucket keeps room
/// for as many calls counted there after them. Their calls then count as 2^31
/// towards a [`minimum_calls`](crate::Builder::failure_rate) above that: the
/// restored breaker waits for as many more calls before its rates decide.
///
/// # Examples
/// ```
/// use cutout::{CircuitBreaker, SavedWindow, WindowCounts};
/// use std::time::Duration;
///
/// let breaker = CircuitBreaker::builder()
///     .window(Duration::from_secs(10), 10)
///     .failure_rate(0.5, 100)
///     .build()?;
/// let _ = breaker.call(|| Err::<(), _>("timeout"));
/// let saved = breaker.save();
/// let w: SavedWindow = saved.window.expect("the breaker has a window");
/// assert_eq!((w.length, w.buckets), (Duration::from_secs(10), 10));
/// assert_eq!(w.counts, WindowCounts::new(1, 1, 0));
/// # Ok::<(), cutout::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SavedWindow {
    /// The window's length when saved, in whole milliseconds (rounded down).
    pub length: Duration,
    /// Its bucket count when saved (informative: the totals do not depend on it).
    pub buckets: u32,
    /// The window's totals. `failures` and `slow` are at most `calls`.
    pub counts: WindowCounts,
}

impl SavedWindow {
    /// A saved window of `length` in `buckets` buckets, holding `counts`.
    ///
    /// # Examples
    /// ```
    /// use cutout::{SavedWindow, WindowCounts};
    /// use std::time::Duration;
    ///
    /// let counts = WindowCounts::new(40, 25, 0);
    /// let w = SavedWindow::new(Duration::from_secs(10), 10, counts);
    /// assert_eq!(w.counts.failures, 25);
    /// ```
    pub fn new(length: Duration, buckets: u32, counts: WindowCounts) -> SavedWindow {
        SavedWindow {
            length,
            buckets,
            counts,
        }
    }

    fn check(&self) -> Result<SavedWindow, ConfigError> {
        let refuse = |reason: String| ConfigError::new("restore", reason);
        if self.buckets == 0 || self.length.is_zero() {
            return Err(refuse(format!(
                "a window of {:?} in {} buckets cannot have been saved",
                self.length, self.buckets
            )));
        }
        let c = self.counts;
        if c.failures > c.calls || c.slow > c.calls {
            return Err(refuse(format!(
                "the window counts {} failures and {} slow calls in only {} calls",
                c.failures, c.slow, c.calls
            )));
        }
        Ok(*self)
    }

    /// The counts a window of `shape` takes from this one, `elapsed` after it was
    /// saved: all of them if it is at least as long (they all fall inside it) and
    /// they are not all older than it; none otherwise (a shorter window cannot tell
    /// which of them fall inside it). A window's buckets are whole nanoseconds, each
    /// less than a nanosecond short of its share of the length asked for (a 10 s
    /// window in 3 buckets spans 9.999999999 s): the length compared is the
    /// buckets' span plus a nanosecond a bucket, which is more than the length
    /// asked for by at most that, so a window asked for as long as the saved one
    /// takes its totals (it took none, for a nanosecond), and one shorter by more
    /// than a few microseconds never does. The totals must be younger than the
    /// span, which they leave one span after the build.
    fn restorable(&self, shape: WindowConfig, elapsed: Duration) -> Option<WindowCounts> {
        let buckets = u64::from(shape.buckets);
        let span = shape.bucket_nanos.saturating_mul(buckets);
        let length = Duration::from_nanos(span.saturating_add(buckets));
        (length > self.length && elapsed < Duration::from_nanos(span)).then_some(self.counts)
    }
}

/// Ticks (whole ms, rounded up) from `now` to `until`; 0 if `until` has passed.
fn remaining_ticks(until: SystemTime, now: SystemTime) -> u64 {
    match until.duration_since(now) {
        Ok(d) => u64::try_from(d.as_nanos().div_ceil(u128::from(NANOS_PER_TICK)))
            .unwrap_or(u64::MAX)
            .min(TICKS_MAX),
        Err(_) => 0,
    }
}

/// `t` in whole milliseconds since the epoch, rounded `up` or down; `t` itself if
/// it is before the epoch or beyond what a `SystemTime` holds.
fn whole_ms(t: SystemTime, up: bool) -> SystemTime {
    let Ok(d) = t.duration_since(UNIX_EPOCH) else {
        return t;
    };
    let nanos = d.as_nanos();
    let ms = match up {
        true => nanos.div_ceil(1_000_000),
        false => nanos / 1_000_000,
    };
    u64::try_from(ms)
        .ok()
        .and_then(|ms| UNIX_EPOCH.checked_add(Duration::from_millis(ms)))
        .unwrap_or(t)
}

#[cfg(feature = "serde")]
mod wire;

#[cfg(all(test, not(cutout_loom)))]
mod tests {
    use super::*;

    #[test]
    fn whole_ms_rounds_as_asked_and_leaves_pre_epoch_times_alone() {
        let t = UNIX_EPOCH + Duration::from_nanos(1_500_000);
        assert_eq!(whole_ms(t, false), UNIX_EPOCH + Duration::from_millis(1));
        assert_eq!(whole_ms(t, true), UNIX_EPOCH + Duration::from_millis(2));
        let before = UNIX_EPOCH - Duration::from_nanos(1);
        assert_eq!(whole_ms(before, true), before);
    }

    #[test]
    fn remaining_ticks_round_up_and_a_passed_deadline_is_zero() {
        let now = UNIX_EPOCH + Duration::from_secs(100);
        assert_eq!(remaining_ticks(now + Duration::from_micros(1), now), 1);
        assert_eq!(remaining_ticks(now + Duration::from_millis(7), now), 7);
        assert_eq!(remaining_ticks(now, now), 0);
        assert_eq!(remaining_ticks(now - Duration::from_secs(1), now), 0);
    }
}
