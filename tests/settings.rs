//! `Settings` read from the files users keep them in: TOML (the tuner's format)
//! and JSON. Bad values parse and are refused by `build()`, naming the field;
//! bad shapes are refused while parsing, naming the field.

use cutout::{Builder, ManualClock, Settings, State};
use std::time::Duration;

const STORM: &str = r#"
name = "storm"
consecutive_failures = 10
failure_rate = 0.5
minimum_calls = 20
slow_calls = "100ms"
slow_call_rate = 0.5
window = "500ms"
window_buckets = 10
open_duration = "250ms"
backoff_multiplier = 2.0
max_open_duration = "1s"
jitter = 0.2
half_open_probes = 3
half_open_timeout = "1s"
"#;

#[test]
fn a_toml_file_gives_the_breaker_it_describes() {
    let settings: Settings = toml::from_str(STORM).unwrap();
    assert_eq!(settings.slow_calls, Some(Duration::from_millis(100)));
    assert_eq!(settings.max_open_duration, Some(Duration::from_secs(1)));
    let clock = ManualClock::new();
    let breaker = Builder::from_settings(&settings)
        .clock(clock.clone())
        .build()
        .unwrap();
    assert_eq!(breaker.name(), "storm");
    for _ in 0..9 {
        let _ = breaker.call(|| Err::<(), _>("down"));
    }
    assert_eq!(breaker.state(), State::Closed);
    let _ = breaker.call(|| Err::<(), _>("down"));
    assert_eq!(breaker.state(), State::Open);
    // The cooldown is the file's 250 ms (jitter only shortens it).
    clock.advance(Duration::from_millis(250));
    assert!(breaker.try_acquire().is_ok());
    assert_eq!(breaker.state(), State::HalfOpen);
}

#[test]
fn toml_round_trips() {
    let settings: Settings = toml::from_str(STORM).unwrap();
    let text = toml::to_string(&settings).unwrap();
    assert!(text.contains("open_duration = \"250ms\""), "{text}");
    assert_eq!(toml::from_str::<Settings>(&text).unwrap(), settings);
}

/// What a settings file writes, it reads back: a duration up to `u64::MAX`
/// nanoseconds round-trips, and a longer one (a `Settings` made in code) is
/// refused as it is written, naming the limit, not when it is read.
#[test]
fn durations_past_what_a_file_reads_are_refused_when_written() {
    let with = |open: Duration, dropped: Duration| {
        let mut settings = Settings::default();
        settings.open_duration = Some(open);
        settings.on_drop = Some(cutout::Dropped::FailureAfter(dropped));
        settings
    };
    let longest = Duration::from_nanos(u64::MAX);
    let settings = with(longest, longest);
    let text = toml::to_string(&settings).unwrap();
    assert_eq!(toml::from_str::<Settings>(&text).unwrap(), settings);
    let one_more = longest + Duration::from_nanos(1);
    for too_long in [with(Duration::MAX, longest), with(longest, one_more)] {
        let err = toml::to_string(&too_long).unwrap_err().to_string();
        assert!(err.contains("584 years"), "{err}");
    }
}

#[test]
fn a_zero_in_toml_parses_and_build_names_the_field() {
    let settings: Settings =
        toml::from_str("half_open_probes = 0\nopen_duration = \"0s\"").unwrap();
    let err = Builder::from_settings(&settings).build().unwrap_err();
    assert_eq!(err.field(), "open_duration");
    let settings: Settings = toml::from_str("half_open_probes = 0").unwrap();
    let err = Builder::from_settings(&settings).build().unwrap_err();
    assert_eq!(err.field(), "half_open_probes");
    assert!(err.to_string().contains("half_open_probes"), "{err}");
}

#[test]
fn bad_shapes_in_toml_name_the_field() {
    for (text, names) in [
        ("consecutive_failure = 5", "consecutive_failure"),
        ("open_duration = \"10 parsecs\"", "open_duration"),
        ("open_duration = 10", "open_duration"),
        ("half_open_probes = -1", "half_open_probes"),
        ("slow_calls = \"100ms\"", "slow_call_rate"),
    ] {
        let err = toml::from_str::<Settings>(text).unwrap_err().to_string();
        assert!(err.contains(names), "{text}: {err}");
    }
}

#[test]
fn json_reads_the_same_settings() {
    let json = r#"{"consecutive_failures": 3, "open_duration": "1.5s", "on_drop": "failure"}"#;
    let settings: Settings = serde_json::from_str(json).unwrap();
    assert_eq!(settings.open_duration, Some(Duration::from_millis(1500)));
    assert_eq!(settings.on_drop, Some(cutout::Dropped::Failure));
    assert!(Builder::from_settings(&settings).build().is_ok());
}
