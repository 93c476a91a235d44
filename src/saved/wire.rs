//! The serde form of a [`SavedState`] (the `serde` feature): version 1 of the
//! format documented on [`SavedState`].

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
