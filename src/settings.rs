//! [`Settings`]: a breaker's settings as data, for the configuration files users
//! keep them in (TOML, YAML, JSON), and [`Builder::from_settings`].
//!
//! The fields are flat and named after the [`Builder`]'s methods; durations are
//! text ("500ms", "10s": see `text.rs`), rates are numbers. Nothing is checked
//! while parsing beyond the shape: a value out of range (a zero included) parses,
//! and [`Builder::build`] refuses it with a [`ConfigError`](crate::ConfigError)
//! naming the field, as it would refuse the same value given in code.

pub(crate) mod text;

use crate::{Builder, DefaultClock, Dropped};
use serde::{Deserialize, Deserializer, Serialize, Serializer, de};
use std::time::Duration;

/// The builder's window when only one of `window` and `window_buckets` is given:
/// its own default, 10 s in 10 buckets.
const DEFAULT_WINDOW: (Duration, u32) = (Duration::from_secs(10), 10);
/// The builder's `minimum_calls` when `failure_rate` is given without it.
const DEFAULT_MINIMUM_CALLS: u32 = 20;

/// A breaker's settings as data: the serde form users keep in a TOML, YAML or
/// JSON file (feature `serde`). Every field is optional; one left out keeps the
/// [`Builder`]'s default. [`Builder::from_settings`] turns it into a builder.
///
/// | field | builder method | form |
/// |-------|----------------|------|
/// | `name` | [`name`](Builder::name) | text |
/// | `consecutive_failures` | [`consecutive_failures`](Builder::consecutive_failures) | integer |
/// | `failure_rate` | [`failure_rate`](Builder::failure_rate)'s threshold | number in (0, 1] |
/// | `minimum_calls` | [`minimum_calls`](Builder::minimum_calls) | integer |
/// | `slow_calls` | [`slow_calls`](Builder::slow_calls)'s threshold | duration |
/// | `slow_call_rate` | [`slow_calls`](Builder::slow_calls)'s rate | number in (0, 1] |
/// | `window` | [`window`](Builder::window)'s length (default 10s) | duration |
/// | `window_buckets` | [`window`](Builder::window)'s buckets (default 10) | integer |
/// | `open_duration` | [`open_duration`](Builder::open_duration) | duration |
/// | `backoff_multiplier` | [`backoff_multiplier`](Builder::backoff_multiplier) | number |
/// | `max_open_duration` | [`max_open_duration`](Builder::max_open_duration) | duration |
/// | `jitter` | [`jitter`](Builder::jitter) | number in 0..=1 |
/// | `half_open_probes` | [`half_open_probes`](Builder::half_open_probes) | integer |
/// | `half_open_timeout` | [`half_open_timeout`](Builder::half_open_timeout) | duration |
/// | `on_drop` | [`on_drop`](Builder::on_drop) | `"ignored"`, `"failure"`, or a duration (a failure after it) |
/// | `ramp_up` | [`ramp_up`](Builder::ramp_up) | duration |
/// | `shadow` | [`shadow`](Builder::shadow) when `true` | `true` or `false` |
///
/// A duration is a decimal number and a unit: `ns`, `us` (or `µs`), `ms`, `s`,
/// `m` or `h` ("500ms", "10s", "1.5m"). `slow_calls` and `slow_call_rate` go
/// together: a file with one and not the other is refused while parsing, naming
/// the missing one. An unknown field is refused while parsing, naming it. A
/// value out of range parses, and [`Builder::build`] refuses it with a
/// [`ConfigError`](crate::ConfigError) whose [`field`](crate::ConfigError::field)
/// is the builder method's name.
///
/// # Examples
/// ```
/// use cutout::{Builder, Settings};
///
/// let settings: Settings = serde_json::from_str(
///     r#"{ "consecutive_failures": 5, "open_duration": "2s", "half_open_probes": 3 }"#,
/// )?;
/// assert_eq!(settings.open_duration, Some(std::time::Duration::from_secs(2)));
/// let breaker = Builder::from_settings(&settings).build()?;
/// # let _ = breaker;
///
/// // A zero parses, and the build names the field.
/// let zero: Settings = serde_json::from_str(r#"{ "half_open_probes": 0 }"#)?;
/// let err = Builder::from_settings(&zero).build().unwrap_err();
/// assert_eq!(err.field(), "half_open_probes");
///
/// // An unknown field is refused by name.
/// let typo = serde_json::from_str::<Settings>(r#"{ "open_duraton": "2s" }"#);
/// assert!(typo.unwrap_err().to_string().contains("open_duraton"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Fields", into = "Fields")]
#[non_exhaustive]
pub struct Settings {
    /// [`Builder::name`].
    pub name: Option<String>,
    /// [`Builder::consecutive_failures`].
    pub consecutive_failures: Option<u32>,
    /// [`Builder::failure_rate`]'s threshold; its `minimum_calls` is
    /// [`minimum_calls`](Self::minimum_calls), or 20.
    pub failure_rate: Option<f64>,
    /// [`Builder::minimum_calls`].
    pub minimum_calls: Option<u32>,
    /// [`Builder::slow_calls`]'s threshold (with [`slow_call_rate`](Self::slow_call_rate)).
    pub slow_calls: Option<Duration>,
    /// [`Builder::slow_calls`]'s rate (with [`slow_calls`](Self::slow_calls)).
    pub slow_call_rate: Option<f64>,
    /// [`Builder::window`]'s length (10 s if only the buckets are given).
    pub window: Option<Duration>,
    /// [`Builder::window`]'s bucket count (10 if only the length is given).
    pub window_buckets: Option<u32>,
    /// [`Builder::open_duration`].
    pub open_duration: Option<Duration>,
    /// [`Builder::backoff_multiplier`].
    pub backoff_multiplier: Option<f64>,
    /// [`Builder::max_open_duration`].
    pub max_open_duration: Option<Duration>,
    /// [`Builder::jitter`].
    pub jitter: Option<f64>,
    /// [`Builder::half_open_probes`].
    pub half_open_probes: Option<u32>,
    /// [`Builder::half_open_timeout`].
    pub half_open_timeout: Option<Duration>,
    /// [`Builder::on_drop`].
    pub on_drop: Option<Dropped>,
    /// [`Builder::ramp_up`].
    pub ramp_up: Option<Duration>,
    /// [`Builder::shadow`], when `Some(true)`.
    pub shadow: Option<bool>,
}

impl Builder<DefaultClock> {
    /// A builder with `settings`, the default clock, and every setting the file
    /// leaves out at the builder's default. [`build`](Builder::build) checks
    /// the values, as for settings given in code; change the clock with
    /// [`clock`](Builder::clock) and add a listener as usual.
    ///
    /// A [`Settings`] made in code with only one of `slow_calls` and
    /// `slow_call_rate` (the parser refuses that) is refused by `build`, with the
    /// field `slow_calls`.
    ///
    /// # Examples
    /// ```
    /// use cutout::{Builder, Settings, State};
    /// use std::time::Duration;
    ///
    /// let mut settings = Settings::default();
    /// settings.consecutive_failures = Some(2);
    /// settings.open_duration = Some(Duration::from_millis(500));
    /// let breaker = Builder::from_settings(&settings).build()?;
    /// for _ in 0..2 {
    ///     let _ = breaker.call(|| Err::<(), _>("down"));
    /// }
    /// assert_eq!(breaker.state(), State::Open);
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn from_settings(settings: &Settings) -> Builder<DefaultClock> {
        settings.apply(Builder::new())
    }
}

impl Settings {
    /// `builder` with every setting given here.
    fn apply<C: crate::Clock>(&self, mut b: Builder<C>) -> Builder<C> {
        if let Some(name) = &self.name {
            b = b.name(name.clone());
        }
        if let Some(n) = self.consecutive_failures {
            b = b.consecutive_failures(n);
        }
        if let Some(rate) = self.failure_rate {
            b = b.failure_rate(rate, self.minimum_calls.unwrap_or(DEFAULT_MINIMUM_CALLS));
        }
        if let Some(n) = self.minimum_calls {
            b = b.minimum_calls(n);
        }
        match (self.slow_calls, self.slow_call_rate) {
            (None, None) => {}
            // A missing half is a value the build refuses, naming `slow_calls`.
            (threshold, rate) => {
                b = b.slow_calls(
                    threshold.unwrap_or(Duration::ZERO),
                    rate.unwrap_or(f64::NAN),
                );
            }
        }
        if self.window.is_some() || self.window_buckets.is_some() {
            b = b.window(
                self.window.unwrap_or(DEFAULT_WINDOW.0),
                self.window_buckets.unwrap_or(DEFAULT_WINDOW.1),
            );
        }
        if let Some(d) = self.open_duration {
            b = b.open_duration(d);
        }
        if let Some(m) = self.backoff_multiplier {
            b = b.backoff_multiplier(m);
        }
        if let Some(d) = self.max_open_duration {
            b = b.max_open_duration(d);
        }
        if let Some(j) = self.jitter {
            b = b.jitter(j);
        }
        if let Some(n) = self.half_open_probes {
            b = b.half_open_probes(n);
        }
        if let Some(d) = self.half_open_timeout {
            b = b.half_open_timeout(d);
        }
        if let Some(d) = self.on_drop {
            b = b.on_drop(d);
        }
        if let Some(d) = self.ramp_up {
            b = b.ramp_up(d);
        }
        if self.shadow == Some(true) {
            b = b.shadow();
        }
        b
    }
}

/// The file form of [`Settings`]: durations as text, unknown fields refused.
#[derive(Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct Fields {
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    consecutive_failures: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    failure_rate: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    minimum_calls: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    slow_calls: Option<Text>,
    #[serde(skip_serializing_if = "Option::is_none")]
    slow_call_rate: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    window: Option<Text>,
    #[serde(skip_serializing_if = "Option::is_none")]
    window_buckets: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    open_duration: Option<Text>,
    #[serde(skip_serializing_if = "Option::is_none")]
    backoff_multiplier: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_open_duration: Option<Text>,
    #[serde(skip_serializing_if = "Option::is_none")]
    jitter: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    half_open_probes: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    half_open_timeout: Option<Text>,
    #[serde(skip_serializing_if = "Option::is_none")]
    on_drop: Option<OnDrop>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ramp_up: Option<Text>,
    #[serde(skip_serializing_if = "Option::is_none")]
    shadow: Option<bool>,
}

impl TryFrom<Fields> for Settings {
    type Error = String;

    fn try_from(f: Fields) -> Result<Settings, String> {
        match (&f.slow_calls, f.slow_call_rate) {
            (Some(_), None) => return Err("slow_calls needs slow_call_rate too".to_owned()),
            (None, Some(_)) => return Err("slow_call_rate needs slow_calls too".to_owned()),
            _ => {}
        }
        let d = |t: Option<Text>| t.map(|t| t.0);
        Ok(Settings {
            name: f.name,
            consecutive_failures: f.consecutive_failures,
            failure_rate: f.failure_rate,
            minimum_calls: f.minimum_calls,
            slow_calls: d(f.slow_calls),
            slow_call_rate: f.slow_call_rate,
            window: d(f.window),
            window_buckets: f.window_buckets,
            open_duration: d(f.open_duration),
            backoff_multiplier: f.backoff_multiplier,
            max_open_duration: d(f.max_open_duration),
            jitter: f.jitter,
            half_open_probes: f.half_open_probes,
            half_open_timeout: d(f.half_open_timeout),
            on_drop: f.on_drop.map(|o| o.0),
            ramp_up: d(f.ramp_up),
            shadow: f.shadow,
        })
    }
}

impl From<Settings> for Fields {
    fn from(s: Settings) -> Fields {
        let t = |d: Option<Duration>| d.map(Text);
        Fields {
            name: s.name,
            consecutive_failures: s.consecutive_failures,
            failure_rate: s.failure_rate,
            minimum_calls: s.minimum_calls,
            slow_calls: t(s.slow_calls),
            slow_call_rate: s.slow_call_rate,
            window: t(s.window),
            window_buckets: s.window_buckets,
            open_duration: t(s.open_duration),
            backoff_multiplier: s.backoff_multiplier,
            max_open_duration: t(s.max_open_duration),
            jitter: s.jitter,
            half_open_probes: s.half_open_probes,
            half_open_timeout: t(s.half_open_timeout),
            on_drop: s.on_drop.map(OnDrop),
            ramp_up: t(s.ramp_up),
            shadow: s.shadow,
        }
    }
}

/// A duration written as text.
struct Text(Duration);

impl Serialize for Text {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&written(self.0)?)
    }
}

/// `d` as text, if the parser reads it back: at most `u64::MAX` nanoseconds
/// (about 584 years), refused when written rather than when read.
fn written<E: serde::ser::Error>(d: Duration) -> Result<String, E> {
    match u64::try_from(d.as_nanos()) {
        Ok(_) => Ok(text::format_duration(d)),
        Err(_) => Err(E::custom(format!(
            "{d:?} is beyond 584 years (u64::MAX nanoseconds), the longest duration a settings file holds"
        ))),
    }
}

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Text, D::Error> {
        let s = String::deserialize(d)?;
        text::parse_duration(&s)
            .map(Text)
            .map_err(de::Error::custom)
    }
}

/// [`Dropped`] as text: "ignored", "failure", or a duration.
struct OnDrop(Dropped);

impl Serialize for OnDrop {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Dropped::Ignored => s.serialize_str("ignored"),
            Dropped::Failure => s.serialize_str("failure"),
            Dropped::FailureAfter(d) => s.serialize_str(&written(d)?),
        }
    }
}

impl<'de> Deserialize<'de> for OnDrop {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<OnDrop, D::Error> {
        let s = String::deserialize(d)?;
        match s.trim() {
            "ignored" => Ok(OnDrop(Dropped::Ignored)),
            "failure" => Ok(OnDrop(Dropped::Failure)),
            other => text::parse_duration(other)
                .map(|d| OnDrop(Dropped::FailureAfter(d)))
                .map_err(|why| {
                    de::Error::custom(format!(
                        "on_drop is \"ignored\", \"failure\" or a duration: {why}"
                    ))
                }),
        }
    }
}

#[cfg(all(test, not(cutout_loom)))]
mod tests {
    use super::*;
    use crate::ManualClock;

    fn parse(json: &str) -> Result<Settings, serde_json::Error> {
        serde_json::from_str(json)
    }

    #[test]
    fn every_field_round_trips_through_json() {
        let settings = Settings {
            name: Some("billing".into()),
            consecutive_failures: Some(5),
            failure_rate: Some(0.5),
            minimum_calls: Some(30),
            slow_calls: Some(Duration::from_millis(250)),
            slow_call_rate: Some(0.8),
            window: Some(Duration::from_secs(30)),
            window_buckets: Some(30),
            open_duration: Some(Duration::from_secs(2)),
            backoff_multiplier: Some(1.5),
            max_open_duration: Some(Duration::from_secs(120)),
            jitter: Some(0.2),
            half_open_probes: Some(3),
            half_open_timeout: Some(Duration::from_secs(10)),
            on_drop: Some(Dropped::FailureAfter(Duration::from_millis(500))),
            ramp_up: Some(Duration::from_secs(5)),
            shadow: Some(true),
        };
        let json = serde_json::to_string(&settings).unwrap();
        assert!(json.contains(r#""open_duration":"2s""#), "{json}");
        assert!(json.contains(r#""max_open_duration":"2m""#), "{json}");
        assert!(json.contains(r#""on_drop":"500ms""#), "{json}");
        assert!(json.contains(r#""shadow":true"#), "{json}");
        assert_eq!(parse(&json).unwrap(), settings);
        assert!(Builder::from_settings(&settings).build().is_ok());
        assert_eq!(serde_json::to_string(&Settings::default()).unwrap(), "{}");
    }

    #[test]
    fn a_zero_parses_and_the_build_names_its_field() {
        for (json, field) in [
            (r#"{"consecutive_failures": 0}"#, "consecutive_failures"),
            (r#"{"failure_rate": 0}"#, "failure_rate"),
            (
                r#"{"failure_rate": 0.5, "minimum_calls": 0}"#,
                "minimum_calls",
            ),
            (
                r#"{"slow_calls": "0ms", "slow_call_rate": 0.5}"#,
                "slow_calls",
            ),
            (r#"{"slow_calls": "1s", "slow_call_rate": 0}"#, "slow_calls"),
            (r#"{"window": "0s"}"#, "window"),
            (r#"{"window_buckets": 0}"#, "window"),
            (r#"{"open_duration": "0s"}"#, "open_duration"),
            (r#"{"backoff_multiplier": 0}"#, "backoff_multiplier"),
            (r#"{"max_open_duration": "0s"}"#, "max_open_duration"),
            (r#"{"jitter": 2}"#, "jitter"),
            (r#"{"half_open_probes": 0}"#, "half_open_probes"),
            (r#"{"half_open_timeout": "0s"}"#, "half_open_timeout"),
            (r#"{"ramp_up": "0s"}"#, "ramp_up"),
        ] {
            let settings = parse(json).unwrap_or_else(|e| panic!("{json}: {e}"));
            let err = Builder::from_settings(&settings)
                .clock(ManualClock::new())
                .build()
                .unwrap_err();
            assert_eq!(err.field(), field, "{json}: {err}");
        }
    }

    #[test]
    fn shapes_are_refused_while_parsing_naming_the_field() {
        for (json, names) in [
            (r#"{"open_duraton": "2s"}"#, "open_duraton"),
            (r#"{"slow_calls": "100ms"}"#, "slow_call_rate"),
            (r#"{"slow_call_rate": 0.5}"#, "slow_calls"),
            (r#"{"open_duration": "2 parsecs"}"#, "parsecs"),
            (r#"{"open_duration": 2}"#, "string"),
            (r#"{"on_drop": "sometimes"}"#, "on_drop"),
        ] {
            let err = parse(json).unwrap_err().to_string();
            assert!(err.contains(names), "{json}: {err}");
        }
    }

    #[test]
    fn settings_made_in_code_with_half_a_pair_are_refused_by_the_build() {
        let settings = Settings {
            slow_calls: Some(Duration::from_millis(100)),
            ..Settings::default()
        };
        let err = Builder::from_settings(&settings).build().unwrap_err();
        assert_eq!(err.field(), "slow_calls");
    }

    #[test]
    fn shadow_true_builds_a_shadow_breaker() {
        for (json, shadow) in [
            (r#"{"shadow": true}"#, true),
            (r#"{"shadow": false}"#, false),
            ("{}", false),
        ] {
            let settings = parse(json).unwrap();
            let b = Builder::from_settings(&settings)
                .consecutive_failures(1)
                .clock(ManualClock::new())
                .build()
                .unwrap();
            let _ = b.call(|| Err::<(), _>("down"));
            let ran = b.call(|| Ok::<_, ()>(())).is_ok();
            assert_eq!(ran, shadow, "{json}");
            assert_eq!(
                b.metrics().lifetime.would_reject,
                u64::from(shadow),
                "{json}"
            );
        }
    }

    #[test]
    fn a_window_given_by_half_keeps_the_default_other_half() {
        // 10 buckets of 100 ms, and 10 s in 4096 buckets would be too fine.
        let settings = parse(r#"{"window": "1s"}"#).unwrap();
        assert!(Builder::from_settings(&settings).build().is_ok());
        let settings = parse(r#"{"window_buckets": 5000}"#).unwrap();
        assert_eq!(
            Builder::from_settings(&settings)
                .build()
                .unwrap_err()
                .field(),
            "window"
        );
    }
}
