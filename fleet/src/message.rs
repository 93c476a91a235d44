//! What instances say to each other: a transition, or a heartbeat listing the keys
//! an instance holds Open. JSON on the wire, versioned, bounded in size.
//!
//! Decoding never panics: bytes that are not a message of [`VERSION`] (or a
//! signed one of [`SIGNED_VERSION`]), a message over [`MAX_MESSAGE_BYTES`], or
//! one whose fields are out of range is an [`Invalid`] that says which rule it
//! broke, and counts for nothing.

use crate::control::{Override, WireOverride};
use crate::sign::{self, SigningKey};
use cutout::{SavedState, State};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The wire format's version. A message of any other version (but a signed one,
/// [`SIGNED_VERSION`]) is refused.
pub const VERSION: u32 = 1;
/// The version of a signed message: a message of [`VERSION`], stamped, in an
/// envelope that carries its HMAC-SHA256 ([`Message::encode_signed`]).
pub const SIGNED_VERSION: u32 = 2;
/// The largest message accepted or sent, in bytes (a heartbeat of many Open keys is
/// the largest; see [`MAX_OPEN_PER_HEARTBEAT`]).
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024;
/// The longest breaker name (key) or instance id, in bytes. Neither may hold a
/// control character (JSON writes each in six bytes, and no name needs one), so
/// that a heartbeat relaying [`MAX_OVERRIDES`](crate::MAX_OVERRIDES) overrides of
/// the longest names still fits in [`MAX_MESSAGE_BYTES`].
pub const MAX_NAME_BYTES: usize = 200;
/// The most Open keys one heartbeat lists; an instance holding more lists the
/// earliest-ending ones that fit in [`MAX_MESSAGE_BYTES`], and says it holds more
/// ([`Heartbeat::more`]): the rest reach its peers as transitions, and the peers
/// keep them.
pub const MAX_OPEN_PER_HEARTBEAT: usize = 256;
/// The longest reason string, in bytes.
const MAX_REASON_BYTES: usize = 40;

/// One instance's report of one breaker's transition.
///
/// # Examples
/// ```
/// use cutout::State;
/// use cutout_fleet::{Message, Report};
/// use std::time::{Duration, UNIX_EPOCH};
///
/// // The wire carries whole milliseconds.
/// let now = UNIX_EPOCH + Duration::from_millis(1_800_000_000_000);
/// let report = Report {
///     key: "db".into(),
///     instance: "a".into(),
///     generation: 7,
///     state: State::Open,
///     open_until: Some(now + Duration::from_secs(2)),
///     level: 1,
///     reason: "consecutive_failures".into(),
///     sent_at: None,
/// };
/// let bytes = Message::Transition(report.clone()).encode();
/// let max_open = Duration::from_secs(600);
/// assert_eq!(Message::decode(&bytes, now, max_open)?, Message::Transition(report));
/// # Ok::<(), cutout_fleet::Invalid>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// The breaker's name (its key in a registry).
    pub key: String,
    /// The instance that sent it.
    pub instance: String,
    /// The breaker's generation after the transition.
    pub generation: u32,
    /// The state the breaker moved to.
    pub state: State,
    /// For Open: when a call may half-open it, as wall-clock time.
    pub open_until: Option<SystemTime>,
    /// The backoff level after the transition.
    pub level: u8,
    /// Why ([`cutout::Reason::as_str`]); informational.
    pub reason: String,
    /// When it was sent, by the sender's wall clock: set in a signed message
    /// (the signature covers it), `None` in an unsigned one, whose wire format
    /// has no stamp for a transition.
    pub sent_at: Option<SystemTime>,
}

/// A key an instance holds Open, as its heartbeat lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenEntry {
    /// The breaker's name.
    pub key: String,
    /// Its Open deadline, as wall-clock time.
    pub until: SystemTime,
    /// Its generation.
    pub generation: u32,
    /// Its backoff level.
    pub level: u8,
    /// Whether it opened by [`Reason::External`](cutout::Reason::External) (a
    /// quorum of its own peers, for instance): shown, but no independent evidence,
    /// so it never counts toward a quorum.
    pub external: bool,
}

/// An instance's heartbeat: it is alive, and these are the keys it holds Open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Heartbeat {
    /// The instance that sent it.
    pub instance: String,
    /// When it was sent, by the sender's wall clock.
    pub sent_at: SystemTime,
    /// The keys it holds Open (at most [`MAX_OPEN_PER_HEARTBEAT`]): all of them,
    /// or, if `more`, the earliest-ending ones.
    pub open: Vec<OpenEntry>,
    /// It holds more keys Open than it lists, each ending no sooner than the last
    /// listed: a receiver keeps those it learned from the sender's transitions
    /// that end no sooner than the last listed (with nothing listed, all of
    /// them).
    pub more: bool,
    /// The fleet-wide overrides it knows (at most
    /// [`MAX_OVERRIDES`](crate::MAX_OVERRIDES)), relayed so that an instance
    /// that joins later, or missed one, learns them.
    pub overrides: Vec<Override>,
}

/// A message between instances.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// A breaker's transition.
    Transition(Report),
    /// An instance's heartbeat.
    Heartbeat(Heartbeat),
    /// An operator's fleet-wide override, as its issuer sends it (a message of
    /// kind `control`: code that predates it refuses it as garbage, and reads
    /// the other kinds as before).
    Control(Override),
}

/// A message decoded, with what the receiver checks beyond its shape.
#[derive(Debug)]
pub(crate) struct Decoded {
    pub(crate) message: Message,
    /// The rule each heartbeat entry left out broke.
    pub(crate) refused: Vec<Invalid>,
    /// When its sender says it sent it, if it says.
    pub(crate) stamp: Option<SystemTime>,
    /// Whether it came signed (checked, where the receiver has a key).
    pub(crate) signed: bool,
}

/// Why a message was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Invalid {
    /// Over [`MAX_MESSAGE_BYTES`].
    TooLarge,
    /// Not JSON of the expected shape.
    Garbage,
    /// A version other than [`VERSION`].
    Version,
    /// A field out of range: an empty or over-long name, an unknown state, an Open
    /// report without a deadline, a heartbeat listing too many keys.
    Field,
    /// An Open deadline further ahead than the configured maximum.
    DeadlineTooFar,
    /// Stamped later than the receiver's wall clock plus the skew it allows
    /// ([`FleetConfig::max_skew`](crate::FleetConfig::max_skew)).
    FromFuture,
    /// A signed message older than
    /// [`live_after`](crate::FleetConfig::live_after): a replay, or one held up
    /// for that long.
    Replayed,
    /// Unsigned (or a signed transition without a stamp), where the receiver has
    /// a key.
    Unsigned,
    /// Signed with another key, or altered on the way.
    BadSignature,
}

impl Invalid {
    /// A snake_case name for logs and metric labels.
    pub const fn as_str(self) -> &'static str {
        match self {
            Invalid::TooLarge => "too_large",
            Invalid::Garbage => "garbage",
            Invalid::Version => "version",
            Invalid::Field => "field",
            Invalid::DeadlineTooFar => "deadline_too_far",
            Invalid::FromFuture => "from_future",
            Invalid::Replayed => "replayed",
            Invalid::Unsigned => "unsigned",
            Invalid::BadSignature => "bad_signature",
        }
    }
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::error::Error for Invalid {}

#[derive(Serialize, Deserialize)]
struct Wire {
    v: u32,
    #[serde(flatten)]
    body: Body,
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Body {
    Transition {
        key: String,
        instance: String,
        generation: u32,
        state: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        open_until_ms: Option<u64>,
        level: u8,
        reason: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sent_ms: Option<u64>,
    },
    Heartbeat {
        instance: String,
        sent_ms: u64,
        open: Vec<WireEntry>,
        #[serde(default, skip_serializing_if = "is_false")]
        more: bool,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        overrides: Vec<WireOverride>,
    },
    Control {
        instance: String,
        sent_ms: u64,
        key: String,
        mode: String,
        until_ms: u64,
    },
}

#[derive(Serialize, Deserialize)]
struct WireEntry {
    key: String,
    until_ms: u64,
    generation: u32,
    level: u8,
    #[serde(default, skip_serializing_if = "is_false")]
    external: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// Milliseconds since the Unix epoch (0 before it, saturating after `u64::MAX`).
pub(crate) fn to_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The time `ms` milliseconds after the Unix epoch, if the platform can hold it.
pub(crate) fn from_ms(ms: u64) -> Option<SystemTime> {
    UNIX_EPOCH.checked_add(Duration::from_millis(ms))
}

/// A message's version, read first, so that a later version's new shape reads as
/// a version mismatch rather than as garbage.
fn version(bytes: &[u8]) -> Result<u32, Invalid> {
    #[derive(Deserialize)]
    struct Versioned {
        v: u32,
    }
    let versioned: Versioned = serde_json::from_slice(bytes).map_err(|_| Invalid::Garbage)?;
    Ok(versioned.v)
}

fn state_from(name: &str) -> Option<State> {
    [
        State::Closed,
        State::Open,
        State::HalfOpen,
        State::ForcedOpen,
        State::Disabled,
        State::Recovering,
    ]
    .into_iter()
    .find(|s| s.as_str() == name)
}

/// Whether `s` may name a key or an instance: 1 to [`MAX_NAME_BYTES`] bytes, no
/// control character.
pub(crate) fn name_ok(s: &str) -> bool {
    !s.is_empty() && s.len() <= MAX_NAME_BYTES && !s.chars().any(char::is_control)
}

impl Message {
    /// The message as JSON bytes.
    pub fn encode(&self) -> Vec<u8> {
        let body = match self {
            Message::Transition(r) => Body::Transition {
                key: r.key.clone(),
                instance: r.instance.clone(),
                generation: r.generation,
                state: r.state.as_str().to_owned(),
                open_until_ms: r.open_until.map(to_ms),
                level: r.level,
                reason: r.reason.clone(),
                sent_ms: r.sent_at.map(to_ms),
            },
            Message::Heartbeat(h) => Body::Heartbeat {
                instance: h.instance.clone(),
                sent_ms: to_ms(h.sent_at),
                open: h
                    .open
                    .iter()
                    .map(|e| WireEntry {
                        key: e.key.clone(),
                        until_ms: to_ms(e.until),
                        generation: e.generation,
                        level: e.level,
                        external: e.external,
                    })
                    .collect(),
                more: h.more,
                overrides: h.overrides.iter().map(WireOverride::from).collect(),
            },
            Message::Control(o) => {
                let w = WireOverride::from(o);
                Body::Control {
                    instance: o.issuer.clone(),
                    sent_ms: to_ms(o.issued_at),
                    key: o.key.clone(),
                    mode: o.mode.as_str().to_owned(),
                    until_ms: w.until_ms(),
                }
            }
        };
        // Serializing plain strings and integers into a Vec cannot fail; an empty
        // message would be refused by every reader, never acted on.
        serde_json::to_vec(&Wire { v: VERSION, body }).unwrap_or_default()
    }

    /// The message, signed with the fleet's shared `key` for fleet `namespace`
    /// (see [`FleetConfig::signing_key`](crate::FleetConfig::signing_key)): a
    /// message of [`SIGNED_VERSION`] whose HMAC-SHA256 covers the namespace and
    /// the whole message, its stamp included. A heartbeat is stamped with its
    /// `sent_at`, a transition with its `sent_at` or, if it has none, the
    /// current time.
    ///
    /// # Examples
    /// ```
    /// use cutout_fleet::{Heartbeat, Invalid, Message};
    /// use std::time::{Duration, SystemTime};
    ///
    /// let key = b"a fleet key of 16 bytes or more";
    /// let beat = Message::Heartbeat(Heartbeat {
    ///     instance: "a".into(),
    ///     sent_at: SystemTime::now(),
    ///     open: Vec::new(),
    ///     more: false,
    ///     overrides: Vec::new(),
    /// });
    /// let bytes = beat.encode_signed(key, "checkout");
    /// // `decode` reads it, checking no signature: a receiver with the key
    /// // checks it, and refuses a message signed with another key.
    /// assert!(Message::decode(&bytes, SystemTime::now(), Duration::from_secs(60)).is_ok());
    /// assert_ne!(bytes, beat.encode_signed(b"another key of 16 bytes", "checkout"));
    /// # let _ = Invalid::BadSignature;
    /// ```
    pub fn encode_signed(&self, key: &[u8], namespace: &str) -> Vec<u8> {
        SigningKey::new(key, namespace).seal(self)
    }

    /// Decodes and validates `bytes`, at wall-clock time `now`: an Open deadline
    /// more than `max_open` after `now` is refused, and so is an override that
    /// ends more than [`MAX_OVERRIDE`](crate::MAX_OVERRIDE) after it or after
    /// its own issue stamp (a fleet allows its
    /// [`max_skew`](crate::FleetConfig::max_skew) beyond `now`'s bound, as it
    /// does an issue stamp). A heartbeat entry that breaks a
    /// rule (an over-long key, a deadline too far ahead) is left out of the
    /// heartbeat, which keeps the others: one key must not silence its peer.
    ///
    /// A signed message ([`SIGNED_VERSION`]) is read as its inner message, its
    /// signature unchecked: a fleet with a key checks it (and the stamps) before
    /// it takes a message.
    ///
    /// # Errors
    /// [`Invalid`], naming the rule the message broke.
    pub fn decode(bytes: &[u8], now: SystemTime, max_open: Duration) -> Result<Message, Invalid> {
        Message::decode_counted(bytes, now, max_open, Duration::ZERO, None).map(|d| d.message)
    }

    /// [`decode`](Self::decode), checking the signature where a `key` is given
    /// (refusing an unsigned message then), and saying what else the receiver
    /// checks: the message's stamp, and the rule each heartbeat entry left out
    /// broke. An override may end up to `skew` past `MAX_OVERRIDE` from `now`
    /// (see `WireOverride::read`).
    pub(crate) fn decode_counted(
        bytes: &[u8],
        now: SystemTime,
        max_open: Duration,
        skew: Duration,
        key: Option<&SigningKey>,
    ) -> Result<Decoded, Invalid> {
        if bytes.len() > MAX_MESSAGE_BYTES {
            return Err(Invalid::TooLarge);
        }
        match version(bytes)? {
            VERSION if key.is_some() => Err(Invalid::Unsigned),
            VERSION => {
                Message::decode_plain(bytes, now, max_open, skew).map(|(message, refused)| {
                    let stamp = message.stamp();
                    Decoded {
                        message,
                        refused,
                        stamp,
                        signed: false,
                    }
                })
            }
            SIGNED_VERSION => {
                let (inner, stamp) = sign::open(bytes, key)?;
                if version(inner)? != VERSION {
                    return Err(Invalid::Version);
                }
                let (message, refused) = Message::decode_plain(inner, now, max_open, skew)?;
                // The envelope's stamp is the message's: a transition without
                // one, or a heartbeat whose own differs, is not what a signer
                // sends.
                let stamp = match message.stamp() {
                    Some(own) if to_ms(own) == stamp => own,
                    Some(_) => return Err(Invalid::Field),
                    None if key.is_some() => return Err(Invalid::Unsigned),
                    None => return Err(Invalid::Field),
                };
                Ok(Decoded {
                    message,
                    refused,
                    stamp: Some(stamp),
                    signed: true,
                })
            }
            _ => Err(Invalid::Version),
        }
    }

    /// When the sender says it sent it: a heartbeat's `sent_at`, a transition's
    /// if it carries one.
    pub(crate) fn stamp(&self) -> Option<SystemTime> {
        match self {
            Message::Transition(r) => r.sent_at,
            Message::Heartbeat(h) => Some(h.sent_at),
            Message::Control(o) => Some(o.issued_at),
        }
    }

    /// Decodes a message of [`VERSION`] (already read), and the rule each
    /// heartbeat entry left out broke.
    fn decode_plain(
        bytes: &[u8],
        now: SystemTime,
        max_open: Duration,
        skew: Duration,
    ) -> Result<(Message, Vec<Invalid>), Invalid> {
        let wire: Wire = serde_json::from_slice(bytes).map_err(|_| Invalid::Garbage)?;
        let latest = now.checked_add(max_open);
        let deadline = |ms: u64| -> Result<SystemTime, Invalid> {
            let t = from_ms(ms).ok_or(Invalid::DeadlineTooFar)?;
            match latest {
                Some(latest) if t > latest => Err(Invalid::DeadlineTooFar),
                _ => Ok(t),
            }
        };
        match wire.body {
            Body::Transition {
                key,
                instance,
                generation,
                state,
                open_until_ms,
                level,
                reason,
                sent_ms,
            } => {
                let state = state_from(&state).ok_or(Invalid::Field)?;
                if !name_ok(&key)
                    || !name_ok(&instance)
                    || reason.len() > MAX_REASON_BYTES
                    || level > SavedState::MAX_LEVEL
                {
                    return Err(Invalid::Field);
                }
                let open_until = match (state, open_until_ms) {
                    (State::Open, Some(ms)) => Some(deadline(ms)?),
                    (State::Open, None) => return Err(Invalid::Field),
                    (_, _) => None,
                };
                let report = Report {
                    key,
                    instance,
                    generation,
                    state,
                    open_until,
                    level,
                    reason,
                    sent_at: match sent_ms {
                        Some(ms) => Some(from_ms(ms).ok_or(Invalid::FromFuture)?),
                        None => None,
                    },
                };
                Ok((Message::Transition(report), Vec::new()))
            }
            Body::Control {
                instance,
                sent_ms,
                key,
                mode,
                until_ms,
            } => {
                let wire = WireOverride::new(key, mode, instance, sent_ms, until_ms);
                Ok((Message::Control(wire.read(now, skew)?), Vec::new()))
            }
            Body::Heartbeat {
                instance,
                sent_ms,
                open,
                more,
                overrides,
            } => {
                if !name_ok(&instance)
                    || open.len() > MAX_OPEN_PER_HEARTBEAT
                    || overrides.len() > crate::MAX_OVERRIDES
                {
                    return Err(Invalid::Field);
                }
                let sent_at = from_ms(sent_ms).ok_or(Invalid::FromFuture)?;
                let mut refused = Vec::new();
                let open = open
                    .into_iter()
                    .filter_map(|e| {
                        let entry = match name_ok(&e.key) && e.level <= SavedState::MAX_LEVEL {
                            false => Err(Invalid::Field),
                            true => deadline(e.until_ms).map(|until| OpenEntry {
                                until,
                                key: e.key,
                                generation: e.generation,
                                level: e.level,
                                external: e.external,
                            }),
                        };
                        entry.map_err(|invalid| refused.push(invalid)).ok()
                    })
                    .collect();
                let overrides = overrides
                    .into_iter()
                    .filter_map(|w| w.read(now, skew).map_err(|e| refused.push(e)).ok())
                    .collect();
                let heartbeat = Heartbeat {
                    instance,
                    sent_at,
                    open,
                    more,
                    overrides,
                };
                Ok((Message::Heartbeat(heartbeat), refused))
            }
        }
    }

    /// The instance that sent it.
    pub fn instance(&self) -> &str {
        match self {
            Message::Transition(r) => &r.instance,
            Message::Heartbeat(h) => &h.instance,
            Message::Control(o) => &o.issuer,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: Duration = Duration::from_secs(600);

    fn at(ms: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(ms)
    }

    #[test]
    fn a_heartbeat_round_trips_at_millisecond_precision() {
        let h = Message::Heartbeat(Heartbeat {
            instance: "i-1".into(),
            sent_at: at(1_000),
            open: vec![OpenEntry {
                key: "db".into(),
                until: at(3_000),
                generation: u32::MAX,
                level: 63,
                external: true,
            }],
            more: true,
            overrides: Vec::new(),
        });
        assert_eq!(Message::decode(&h.encode(), at(1_000), MAX), Ok(h));
    }

    #[test]
    fn each_rule_is_named() {
        let now = at(1_000_000);
        let decode = |s: &str| Message::decode(s.as_bytes(), now, MAX);
        assert_eq!(decode("not json"), Err(Invalid::Garbage));
        assert_eq!(
            decode(r#"{"v":3,"kind":"whatever"}"#),
            Err(Invalid::Version)
        );
        assert_eq!(
            decode(r#"{"v":1,"kind":"whatever"}"#),
            Err(Invalid::Garbage)
        );
        let t = |state: &str, until: &str, key: &str| {
            format!(
                r#"{{"v":1,"kind":"transition","key":"{key}","instance":"b","generation":1,"state":"{state}"{until},"level":0,"reason":"x"}}"#
            )
        };
        assert!(decode(&t("open", r#","open_until_ms":1001000"#, "db")).is_ok());
        assert_eq!(decode(&t("open", "", "db")), Err(Invalid::Field));
        assert_eq!(decode(&t("ajar", "", "db")), Err(Invalid::Field));
        assert_eq!(
            decode(&t("open", r#","open_until_ms":1001000"#, "")),
            Err(Invalid::Field)
        );
        assert_eq!(
            decode(&t("open", r#","open_until_ms":18446744073709551615"#, "db")),
            Err(Invalid::DeadlineTooFar)
        );
        assert_eq!(
            decode(&t("open", r#","open_until_ms":1600001"#, "db")),
            Err(Invalid::DeadlineTooFar)
        );
        let big = vec![b' '; MAX_MESSAGE_BYTES + 1];
        assert_eq!(Message::decode(&big, now, MAX), Err(Invalid::TooLarge));
    }

    /// The control message's wire form, pinned: unsigned, it is a message of
    /// [`VERSION`] of kind `control`, which code that predates it refuses as
    /// garbage; a heartbeat relays overrides in a field such code ignores.
    #[test]
    fn a_control_message_keeps_its_wire_form() {
        use crate::control::{Override, OverrideMode};
        let o = Override {
            key: "db".into(),
            mode: OverrideMode::ForceOpen,
            issuer: "ops".into(),
            issued_at: at(1_000),
            until: at(61_000),
        };
        let bytes = Message::Control(o.clone()).encode();
        assert_eq!(
            String::from_utf8_lossy(&bytes),
            r#"{"v":1,"kind":"control","instance":"ops","sent_ms":1000,"key":"db","mode":"force_open","until_ms":61000}"#
        );
        assert_eq!(
            Message::decode(&bytes, at(1_000), MAX),
            Ok(Message::Control(o.clone()))
        );
        let beat = Message::Heartbeat(Heartbeat {
            instance: "a".into(),
            sent_at: at(2_000),
            open: Vec::new(),
            more: false,
            overrides: vec![o],
        });
        let text = String::from_utf8(beat.encode()).unwrap();
        assert_eq!(
            text,
            r#"{"v":1,"kind":"heartbeat","instance":"a","sent_ms":2000,"open":[],"overrides":[{"key":"db","mode":"force_open","issuer":"ops","issued_ms":1000,"until_ms":61000}]}"#
        );
        // A field a reader does not know is ignored, as older code ignores
        // `overrides`.
        let unknown = text.replace(r#""overrides""#, r#""later""#);
        let Ok(Message::Heartbeat(h)) = Message::decode(unknown.as_bytes(), at(2_000), MAX) else {
            panic!("refused");
        };
        assert!(h.overrides.is_empty());
        let far = r#"{"v":1,"kind":"control","instance":"ops","sent_ms":1000,"key":"db","mode":"disable","until_ms":999999999999}"#;
        assert_eq!(
            Message::decode(far.as_bytes(), at(1_000), MAX),
            Err(Invalid::DeadlineTooFar)
        );
        let odd = far.replace("disable", "ajar");
        assert_eq!(
            Message::decode(odd.as_bytes(), at(1_000), MAX),
            Err(Invalid::Field)
        );
    }

    /// A message of [`MAX_MESSAGE_BYTES`] is read; one byte more is too large.
    #[test]
    fn the_size_bound_is_inclusive() {
        let beat = Message::Heartbeat(Heartbeat {
            instance: "a".into(),
            sent_at: at(1_000),
            open: Vec::new(),
            more: false,
            overrides: Vec::new(),
        });
        let mut bytes = beat.encode();
        bytes.resize(MAX_MESSAGE_BYTES, b' ');
        assert_eq!(Message::decode(&bytes, at(1_000), MAX), Ok(beat));
        bytes.push(b' ');
        assert_eq!(
            Message::decode(&bytes, at(1_000), MAX),
            Err(Invalid::TooLarge)
        );
    }

    /// A reason of up to `MAX_REASON_BYTES` is read; a longer one is a field
    /// out of range.
    #[test]
    fn a_reason_over_its_bound_is_refused() {
        let report = |reason: &str| {
            Message::Transition(Report {
                key: "db".into(),
                instance: "a".into(),
                generation: 1,
                state: State::Closed,
                open_until: None,
                level: 0,
                reason: reason.into(),
                sent_at: None,
            })
        };
        let longest = report(&"r".repeat(MAX_REASON_BYTES));
        assert_eq!(
            Message::decode(&longest.encode(), at(1_000), MAX),
            Ok(longest)
        );
        let over = report(&"r".repeat(MAX_REASON_BYTES + 1)).encode();
        assert_eq!(Message::decode(&over, at(1_000), MAX), Err(Invalid::Field));
    }

    /// A heartbeat names its sender and lists at most
    /// `MAX_OPEN_PER_HEARTBEAT` keys: one with no name, or one more key, is a
    /// field out of range.
    #[test]
    fn a_heartbeat_over_its_bounds_is_refused() {
        let beat = |instance: &str, keys: usize| {
            Message::Heartbeat(Heartbeat {
                instance: instance.into(),
                sent_at: at(1_000),
                open: (0..keys)
                    .map(|i| OpenEntry {
                        key: format!("k{i}"),
                        until: at(2_000),
                        generation: 1,
                        level: 0,
                        external: false,
                    })
                    .collect(),
                more: true,
                overrides: Vec::new(),
            })
        };
        let full = beat("a", MAX_OPEN_PER_HEARTBEAT);
        assert_eq!(Message::decode(&full.encode(), at(1_000), MAX), Ok(full));
        for over in [beat("a", MAX_OPEN_PER_HEARTBEAT + 1), beat("", 0)] {
            assert_eq!(
                Message::decode(&over.encode(), at(1_000), MAX),
                Err(Invalid::Field)
            );
        }
    }
}
