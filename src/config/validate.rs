//! Validation: every setting checked once, into the internal [`Config`] a breaker
//! is built from.

use super::*;

impl<C: Clock> Builder<C> {
    /// Checks every setting without building (useful for a registry that builds
    /// many breakers from one builder).
    pub(crate) fn validate(&self) -> Result<Config, ConfigError> {
        let consecutive_failures = match self.settings.consecutive_failures {
            Some(0) => {
                return Err(ConfigError::new(
                    "consecutive_failures",
                    "must be at least 1",
                ));
            }
            // A streak counts up to `STREAK_MAX`: a longer one would never trip.
            Some(n) if n > crate::breaker::STREAK_MAX => {
                return Err(ConfigError::new(
                    "consecutive_failures",
                    format!("must be at most {}", crate::breaker::STREAK_MAX),
                ));
            }
            n => n.map(u64::from),
        };
        let no_policy = consecutive_failures.is_none()
            && self.settings.failure_rate.is_none()
            && self.settings.slow_calls.is_none();
        let failure_rate = match (self.settings.failure_rate, no_policy) {
            (None, true) => Some(DEFAULT_FAILURE_RATE),
            (rate, _) => rate
                .map(|r| rate_threshold("failure_rate", r))
                .transpose()?,
        };
        let slow_calls = self
            .settings
            .slow_calls
            .map(|(threshold, rate)| {
                if threshold.is_zero() {
                    return Err(ConfigError::new(
                        "slow_calls",
                        "the duration threshold must be above zero",
                    ));
                }
                let threshold_nanos = u64::try_from(threshold.as_nanos()).map_err(|_| {
                    ConfigError::new("slow_calls", "the duration threshold is beyond 584 years")
                })?;
                // The cheap reading is within 1% of the threshold when the threshold
                // is at least 100 resolutions long.
                let resolution = self.clock.resolution().as_nanos();
                Ok(SlowCalls {
                    // Not zero: checked above.
                    threshold_nanos: NonZeroU64::new(threshold_nanos).unwrap_or(NonZeroU64::MIN),
                    rate: rate_threshold("slow_calls", rate)?,
                    precise: u8::from(
                        u128::from(threshold_nanos) < resolution.saturating_mul(SLOW_RESOLUTIONS),
                    ),
                })
            })
            .transpose()?;
        let minimum_calls = match self.settings.minimum_calls.unwrap_or(DEFAULT_MINIMUM_CALLS) {
            0 => return Err(ConfigError::new("minimum_calls", "must be at least 1")),
            n => u64::from(n),
        };
        // A window set is checked even where no rate policy uses it, as every
        // other setting is.
        let set = self
            .settings
            .window
            .map(|(length, buckets)| self.window_config(length, buckets))
            .transpose()?;
        let window = match (failure_rate.is_some() || slow_calls.is_some(), set) {
            (true, Some(window)) => Some(window),
            (true, None) => Some(self.window_config(DEFAULT_WINDOW.0, DEFAULT_WINDOW.1)?),
            (false, _) => None,
        };

        let open_ticks = duration_ticks("open_duration", self.settings.open_duration)?;
        let max_open = self
            .settings
            .max_open_duration
            .unwrap_or(DEFAULT_MAX_OPEN_DURATION.max(self.settings.open_duration));
        let max_ticks = duration_ticks("max_open_duration", max_open)?;
        // The durations as given, not their ticks: two within one tick of each
        // other round to the same one.
        if max_open < self.settings.open_duration {
            return Err(ConfigError::new(
                "max_open_duration",
                "must not be below open_duration",
            ));
        }
        let m = self.settings.backoff_multiplier;
        if !(m >= 1.0 && m.is_finite()) {
            return Err(ConfigError::new(
                "backoff_multiplier",
                "must be a finite number of at least 1",
            ));
        }
        let jitter = self.settings.jitter;
        if !(0.0..=1.0).contains(&jitter) {
            return Err(ConfigError::new(
                "jitter",
                format!("the fraction {jitter} is outside 0..=1"),
            ));
        }
        let half_open_probes = match self.settings.half_open_probes {
            0 => return Err(ConfigError::new("half_open_probes", "must be at least 1")),
            n if n > HALF_MAX => {
                return Err(ConfigError::new(
                    "half_open_probes",
                    format!("must be at most {HALF_MAX}"),
                ));
            }
            n => n,
        };
        let half_open_timeout =
            duration_ticks("half_open_timeout", self.settings.half_open_timeout)?;
        let ramp_up = self
            .settings
            .ramp_up
            .map(|d| duration_ticks("ramp_up", d))
            .transpose()?;

        Ok(Config {
            name: self.settings.name.clone(),
            consecutive_failures,
            window,
            failure_rate,
            slow_calls,
            minimum_calls,
            cooldowns: cooldowns(open_ticks, max_ticks, m)?,
            jitter,
            half_open_probes,
            half_open_timeout,
            on_drop: self.settings.on_drop,
            ramp_up,
            shadow: self.settings.shadow,
        })
    }

    fn window_config(&self, length: Duration, buckets: u32) -> Result<WindowConfig, ConfigError> {
        if buckets == 0 {
            return Err(ConfigError::new("window", "must have at least 1 bucket"));
        }
        stripe::check_buckets(buckets).map_err(|reason| ConfigError::new("window", reason))?;
        let length_nanos = u64::try_from(length.as_nanos())
            .map_err(|_| ConfigError::new("window", "the length is beyond 584 years"))?;
        let bucket_nanos = length_nanos / u64::from(buckets);
        // A bucket must span at least a tick, and at least what the clock resolves.
        let shortest = self
            .clock
            .resolution()
            .max(Duration::from_nanos(NANOS_PER_TICK));
        if Duration::from_nanos(bucket_nanos) < shortest {
            return Err(ConfigError::new(
                "window",
                format!(
                    "{buckets} buckets over {length:?} are {:?} each, shorter than {shortest:?} (the clock's resolution, and at least the 1ms tick)",
                    Duration::from_nanos(bucket_nanos)
                ),
            ));
        }
        Ok(WindowConfig {
            bucket_nanos,
            buckets,
        })
    }
}

/// A rate threshold: in `(0, 1]`. Zero is refused: a rate of zero holds with no
/// failure (or slow call) at all, so a policy set to it would trip on anything and
/// report itself as the reason.
fn rate_threshold(field: &'static str, x: f64) -> Result<f64, ConfigError> {
    if x > 0.0 && x <= 1.0 {
        Ok(x)
    } else {
        Err(ConfigError::new(
            field,
            format!("the rate {x} is outside (0, 1]"),
        ))
    }
}

/// A duration setting in ticks, rounded up (a part below the 1 ms tick makes one
/// more tick): counted from its phase's starting tick, a cooldown, timeout or ramp
/// is never more than one tick shorter than asked (see `Builder::build`).
fn duration_ticks(field: &'static str, d: Duration) -> Result<u64, ConfigError> {
    if d < Duration::from_nanos(NANOS_PER_TICK) {
        return Err(ConfigError::new(
            field,
            "must be at least 1ms (the breaker's tick)",
        ));
    }
    match u64::try_from(d.as_nanos().div_ceil(u128::from(NANOS_PER_TICK))) {
        Ok(t) if t <= TICKS_MAX => Ok(t),
        _ => Err(ConfigError::new(
            field,
            format!(
                "must be at most {:?}, the longest the breaker's clock counts",
                Duration::from_millis(TICKS_MAX)
            ),
        )),
    }
}

/// The open duration of every backoff level, in ticks: `open * m^level` capped at
/// `max`. The table ends at the first level that reaches `max` (or at level 0 when
/// `m == 1`), so the level in the state word stops growing there.
fn cooldowns(open: u64, max: u64, m: f64) -> Result<Box<[u64]>, ConfigError> {
    let mut table = vec![open];
    let mut d = open as f64;
    while m > 1.0 && *table.last().unwrap_or(&max) < max {
        if table.len() > usize::from(LEVEL_MAX) {
            return Err(ConfigError::new(
                "backoff_multiplier",
                format!(
                    "reaches max_open_duration only after more than {LEVEL_MAX} reopenings; raise it or lower max_open_duration"
                ),
            ));
        }
        d *= m;
        table.push(if d >= max as f64 { max } else { d as u64 });
    }
    Ok(table.into_boxed_slice())
}

/// A validated builder: what [`CircuitBreaker::from_parts`] needs.
#[cfg_attr(not(feature = "registry"), allow(dead_code))]
#[derive(Clone)]
pub(crate) struct Parts<C> {
    pub(crate) config: Config,
    pub(crate) clock: C,
    pub(crate) listener: Option<Listener>,
    /// The clock skew a restored state may show ([`Builder::max_clock_skew`]).
    pub(crate) skew: std::time::Duration,
}

/// A validated configuration.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    /// The breaker's name, for metric labels and tracing fields.
    pub(crate) name: Cow<'static, str>,
    pub(crate) consecutive_failures: Option<u64>,
    pub(crate) window: Option<WindowConfig>,
    pub(crate) failure_rate: Option<f64>,
    pub(crate) slow_calls: Option<SlowCalls>,
    pub(crate) minimum_calls: u64,
    /// Ticks of open duration per backoff level; never empty.
    pub(crate) cooldowns: Box<[u64]>,
    pub(crate) jitter: f64,
    pub(crate) half_open_probes: u32,
    pub(crate) half_open_timeout: u64,
    /// What a dropped permit counts as (besides a slow call).
    pub(crate) on_drop: Dropped,
    /// The ramp's length in ticks, if progressive recovery is on.
    pub(crate) ramp_up: Option<u64>,
    /// Shadow mode: what would be a rejection runs the call (see `Builder::shadow`).
    pub(crate) shadow: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WindowConfig {
    pub(crate) bucket_nanos: u64,
    pub(crate) buckets: u32,
}

/// The slow-call policy. `precise` is a `u8`, not a `bool`, so that the only niche
/// is the `NonZeroU64` threshold: `Option<SlowCalls>` is then `None` when that word
/// is 0, and the hot path's "is there a policy" is one compare with zero.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct SlowCalls {
    pub(crate) threshold_nanos: NonZeroU64,
    pub(crate) rate: f64,
    /// Whether calls are timed with [`Clock::precise`] rather than [`Clock::now`].
    precise: u8,
}

impl SlowCalls {
    pub(crate) fn precise(self) -> bool {
        self.precise != 0
    }
}

impl Config {
    /// This configuration's slow calls timed with precise readings or not, as
    /// `precise` says: a candidate's, timed by its live breaker's readings.
    pub(crate) fn time_calls_as(&mut self, precise: bool) {
        if let Some(slow) = &mut self.slow_calls {
            slow.precise = u8::from(precise);
        }
    }
}

/// A slow-call threshold of at least this many clock resolutions is timed with the
/// cheap reading.
const SLOW_RESOLUTIONS: u128 = 100;

impl Config {
    pub(crate) fn max_cooldown(&self) -> u64 {
        self.cooldowns.last().copied().unwrap_or(0)
    }

    /// The highest backoff level: the one whose cooldown reaches the maximum.
    pub(crate) fn max_level(&self) -> u8 {
        (self.cooldowns.len() - 1) as u8
    }
}
