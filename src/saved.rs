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
    /// most 63.
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
/// stay in its window for one window length, then leave it together. (A saved
/// bucket would have left it sooner, by up to a window length: a restored breaker
/// remembers a sick dependency a little longer, never a healthy one.) The
/// restored breaker keeps them in one bucket of a shared stripe, which holds at
/// most `u32::MAX` of each count: totals above half of that (more than two
/// billion calls in one window) are scaled down to it, keeping their rates
/// (rounded up, by less than one part in two billion), so the bucket keeps room
/// for as many calls counted there after them.
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
    ///   totals (see below). A trip is decided when the next failure or slow call
    ///   is recorded, as always: restored counts already over a threshold trip the
    ///   breaker then.
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

#[cfg(feature = "serde")]
mod wire {
    //! The serde format, version 1 (documented on [`SavedState`]).

    use super::{SavedState, SavedWindow};
    use crate::{State, WindowCounts};
    use serde::{Deserialize, Deserializer, Serialize, Serializer, de, ser};
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    #[derive(Serialize, Deserialize)]
    struct Wire {
        version: u32,
        name: String,
        saved_at_ms: u64,
        state: WireState,
        #[serde(default)]
        level: u8,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        open_until_ms: Option<u64>,
        #[serde(default)]
        consecutive_failures: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        window: Option<WireWindow>,
    }

    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    enum WireState {
        Closed,
        Open,
        HalfOpen,
        ForcedOpen,
        Disabled,
        Recovering,
    }

    #[derive(Serialize, Deserialize)]
    struct WireWindow {
        length_ms: u64,
        buckets: u32,
        calls: u64,
        failures: u64,
        slow: u64,
    }

    /// Whole milliseconds since the epoch, rounded `up` or down.
    fn to_ms(field: &str, t: SystemTime, up: bool) -> Result<u64, String> {
        let d = t
            .duration_since(UNIX_EPOCH)
            .map_err(|_| format!("`{field}` is before the Unix epoch"))?;
        let nanos = d.as_nanos();
        let ms = if up {
            nanos.div_ceil(1_000_000)
        } else {
            nanos / 1_000_000
        };
        u64::try_from(ms).map_err(|_| format!("`{field}` is beyond u64 milliseconds"))
    }

    fn from_ms(field: &str, ms: u64) -> Result<SystemTime, String> {
        UNIX_EPOCH
            .checked_add(Duration::from_millis(ms))
            .ok_or_else(|| format!("`{field}` is beyond what this host's clock holds"))
    }

    impl TryFrom<&SavedState> for Wire {
        type Error = String;

        fn try_from(s: &SavedState) -> Result<Wire, String> {
            Ok(Wire {
                version: s.version,
                name: s.name.clone(),
                saved_at_ms: to_ms("saved_at", s.saved_at, false)?,
                state: match s.state {
                    State::Closed => WireState::Closed,
                    State::Open => WireState::Open,
                    State::HalfOpen => WireState::HalfOpen,
                    State::ForcedOpen => WireState::ForcedOpen,
                    State::Disabled => WireState::Disabled,
                    State::Recovering => WireState::Recovering,
                },
                level: s.level,
                open_until_ms: s
                    .open_until
                    .map(|t| to_ms("open_until", t, true))
                    .transpose()?,
                consecutive_failures: s.consecutive_failures,
                window: s
                    .window
                    .map(|w| {
                        Ok::<_, String>(WireWindow {
                            length_ms: u64::try_from(w.length.as_millis())
                                .map_err(|_| "the window's length is beyond u64 milliseconds")?,
                            buckets: w.buckets,
                            calls: w.counts.calls,
                            failures: w.counts.failures,
                            slow: w.counts.slow,
                        })
                    })
                    .transpose()?,
            })
        }
    }

    impl TryFrom<Wire> for SavedState {
        type Error = String;

        fn try_from(w: Wire) -> Result<SavedState, String> {
            Ok(SavedState {
                version: w.version,
                name: w.name,
                saved_at: from_ms("saved_at_ms", w.saved_at_ms)?,
                state: match w.state {
                    WireState::Closed => State::Closed,
                    WireState::Open => State::Open,
                    WireState::HalfOpen => State::HalfOpen,
                    WireState::ForcedOpen => State::ForcedOpen,
                    WireState::Disabled => State::Disabled,
                    WireState::Recovering => State::Recovering,
                },
                level: w.level,
                open_until: w
                    .open_until_ms
                    .map(|ms| from_ms("open_until_ms", ms))
                    .transpose()?,
                consecutive_failures: w.consecutive_failures,
                window: w.window.map(|w| SavedWindow {
                    length: Duration::from_millis(w.length_ms),
                    buckets: w.buckets,
                    counts: WindowCounts {
                        calls: w.calls,
                        failures: w.failures,
                        slow: w.slow,
                    },
                }),
            })
        }
    }

    impl Serialize for SavedState {
        fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            Wire::try_from(self)
                .map_err(ser::Error::custom)?
                .serialize(serializer)
        }
    }

    impl<'de> Deserialize<'de> for SavedState {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<SavedState, D::Error> {
            SavedState::try_from(Wire::deserialize(deserializer)?).map_err(de::Error::custom)
        }
    }
}

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
