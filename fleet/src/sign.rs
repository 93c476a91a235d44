//! Signed messages: a fleet's shared key, and the envelope that carries a message
//! of [`VERSION`](crate::VERSION) with its stamp and HMAC-SHA256.
//!
//! On the wire, `{"v":2,"sent_ms":MS,"sig":HEX,"msg":MESSAGE}`, where `MESSAGE` is
//! the message's own encoding, byte for byte, and `HEX` the HMAC-SHA256, under
//! the key, of a domain label, the fleet's namespace (length first), `MS` and
//! `MESSAGE`. Naming the namespace keeps a message signed for one fleet from
//! being taken by another that shares the key.

use crate::message::{Invalid, Message, Report, SIGNED_VERSION, to_ms};
use hmac::{Hmac, Mac};
use serde::Deserialize;
use serde_json::value::RawValue;
use sha2::Sha256;
use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

/// What a signature covers first: these bytes name the scheme.
const DOMAIN: &[u8] = b"cutout-fleet signed message v2\0";

/// A fleet's shared key, for one namespace. Its `Debug` never shows the key.
#[derive(Clone)]
pub(crate) struct SigningKey {
    secret: Arc<[u8]>,
    namespace: Arc<str>,
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigningKey")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct Envelope<'a> {
    sent_ms: u64,
    sig: &'a str,
    #[serde(borrow)]
    msg: &'a RawValue,
}

impl SigningKey {
    pub(crate) fn new(secret: &[u8], namespace: &str) -> SigningKey {
        SigningKey {
            secret: secret.into(),
            namespace: namespace.into(),
        }
    }

    /// The MAC of `message` stamped `sent_ms`, if the key makes one (HMAC takes
    /// a key of any length: it always does).
    fn mac(&self, sent_ms: u64, message: &[u8]) -> Option<Hmac<Sha256>> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.secret).ok()?;
        mac.update(DOMAIN);
        mac.update(&(self.namespace.len() as u64).to_be_bytes());
        mac.update(self.namespace.as_bytes());
        mac.update(&sent_ms.to_be_bytes());
        mac.update(message);
        Some(mac)
    }

    /// `message`, stamped and signed. A transition without a stamp is stamped
    /// now.
    pub(crate) fn seal(&self, message: &Message) -> Vec<u8> {
        let stamped;
        let message = match message {
            Message::Transition(r) if r.sent_at.is_none() => {
                stamped = Message::Transition(Report {
                    sent_at: Some(SystemTime::now()),
                    ..r.clone()
                });
                &stamped
            }
            m => m,
        };
        let sent_ms = message.stamp().map_or(0, to_ms);
        let inner = message.encode();
        let Some(mac) = self.mac(sent_ms, &inner) else {
            return Vec::new();
        };
        let sig = hex(&mac.finalize().into_bytes());
        let mut bytes = Vec::with_capacity(inner.len() + 120);
        bytes.extend_from_slice(
            format!(r#"{{"v":{SIGNED_VERSION},"sent_ms":{sent_ms},"sig":"{sig}","msg":"#)
                .as_bytes(),
        );
        bytes.extend_from_slice(&inner);
        bytes.push(b'}');
        bytes
    }
}

/// The inner message of a signed message and its stamp (ms), the signature
/// checked if a `key` is given.
pub(crate) fn open<'a>(
    bytes: &'a [u8],
    key: Option<&SigningKey>,
) -> Result<(&'a [u8], u64), Invalid> {
    let envelope: Envelope<'a> = serde_json::from_slice(bytes).map_err(|_| Invalid::Garbage)?;
    let inner = envelope.msg.get().as_bytes();
    if let Some(key) = key {
        let sig = unhex(envelope.sig).ok_or(Invalid::BadSignature)?;
        let mac = key
            .mac(envelope.sent_ms, inner)
            .ok_or(Invalid::BadSignature)?;
        // In constant time.
        mac.verify_slice(&sig).map_err(|_| Invalid::BadSignature)?;
    }
    Ok((inner, envelope.sent_ms))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The 32 bytes that 64 hex digits spell, if they do.
fn unhex(s: &str) -> Option<[u8; 32]> {
    let digits = s.as_bytes();
    if digits.len() != 64 {
        return None;
    }
    let nibble = |c: u8| (c as char).to_digit(16);
    let mut out = [0u8; 32];
    for (i, pair) in digits.chunks_exact(2).enumerate() {
        out[i] = u8::try_from(nibble(pair[0])? << 4 | nibble(pair[1])?).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Decoded, Heartbeat};
    use std::time::{Duration, UNIX_EPOCH};

    const MAX: Duration = Duration::from_secs(600);

    fn beat(at: SystemTime) -> Message {
        Message::Heartbeat(Heartbeat {
            instance: "a".into(),
            sent_at: at,
            open: Vec::new(),
            more: false,
            overrides: Vec::new(),
        })
    }

    fn decode(bytes: &[u8], key: Option<&SigningKey>) -> Result<Decoded, Invalid> {
        Message::decode_counted(bytes, UNIX_EPOCH, MAX, Duration::ZERO, key)
    }

    #[test]
    fn a_signed_message_is_taken_with_its_key_only() {
        let at = UNIX_EPOCH + Duration::from_millis(1_800_000_000_123);
        let key = SigningKey::new(b"0123456789abcdef", "shop");
        let bytes = key.seal(&beat(at));
        let got = decode(&bytes, Some(&key)).expect("taken");
        assert_eq!(
            (got.message, got.stamp, got.signed),
            (beat(at), Some(at), true)
        );
        let other = SigningKey::new(b"0123456789abcdeF", "shop");
        assert_eq!(
            decode(&bytes, Some(&other)).err(),
            Some(Invalid::BadSignature)
        );
        let elsewhere = SigningKey::new(b"0123456789abcdef", "shop2");
        assert_eq!(
            decode(&bytes, Some(&elsewhere)).err(),
            Some(Invalid::BadSignature)
        );
        // Unchecked without a key; an unsigned message refused with one.
        assert!(decode(&bytes, None).is_ok_and(|d| d.signed));
        assert_eq!(
            decode(&beat(at).encode(), Some(&key)).err(),
            Some(Invalid::Unsigned)
        );
    }

    #[test]
    fn every_byte_is_covered() {
        let at = UNIX_EPOCH + Duration::from_millis(1_800_000_000_000);
        let key = SigningKey::new(b"0123456789abcdef", "shop");
        let bytes = key.seal(&beat(at));
        let mut altered = 0;
        for i in 0..bytes.len() {
            for flip in [1u8, 0x20] {
                let mut b = bytes.clone();
                b[i] ^= flip;
                match decode(&b, Some(&key)) {
                    // The few flips that leave the same message: the case of a
                    // hex digit of the signature.
                    Ok(d) => assert_eq!(d.message, beat(at), "byte {i}"),
                    Err(_) => altered += 1,
                }
            }
        }
        assert!(
            altered > bytes.len(),
            "{altered} of {} refused",
            2 * bytes.len()
        );
        // The stamp outside and inside must agree.
        let text = String::from_utf8(bytes).unwrap();
        let moved = text.replacen(
            "\"sent_ms\":1800000000000,\"sig\"",
            "\"sent_ms\":1800000000001,\"sig\"",
            1,
        );
        assert_eq!(decode(moved.as_bytes(), None).err(), Some(Invalid::Field));
    }

    #[test]
    fn hex_round_trips() {
        let bytes: Vec<u8> = (0..32).map(|i| i * 7).collect();
        assert_eq!(unhex(&hex(&bytes)).map(|b| b.to_vec()), Some(bytes));
        assert_eq!(unhex("zz"), None);
        assert_eq!(unhex(&"g".repeat(64)), None);
    }

    /// A Closed report of "db" by instance "a", without a stamp.
    fn unstamped() -> Report {
        Report {
            key: "db".into(),
            instance: "a".into(),
            generation: 1,
            state: cutout::State::Closed,
            open_until: None,
            level: 0,
            reason: "x".into(),
            sent_at: None,
        }
    }

    /// A transition without a stamp is stamped as it is sealed (the publisher
    /// leaves it to the seal): a receiver with the key takes it, stamped with
    /// the time of sealing.
    #[test]
    fn an_unstamped_transition_is_stamped_when_sealed() {
        let key = SigningKey::new(b"0123456789abcdef", "shop");
        let report = unstamped();
        let before = SystemTime::now();
        let bytes = key.seal(&Message::Transition(report.clone()));
        let after = SystemTime::now();
        let got =
            Message::decode_counted(&bytes, after, MAX, Duration::ZERO, Some(&key)).expect("taken");
        let stamp = got.stamp.expect("stamped");
        assert!(to_ms(before) <= to_ms(stamp) && stamp <= after);
        let stamped = Report {
            sent_at: Some(stamp),
            ..report
        };
        assert_eq!(got.message, Message::Transition(stamped));
    }

    #[test]
    fn its_debug_names_the_namespace_never_the_secret() {
        let shown = format!("{:?}", SigningKey::new(b"0123456789abcdef", "shop"));
        assert!(shown.contains("shop"), "{shown}");
        assert!(!shown.contains("0123456789abcdef"), "{shown}");
    }

    /// A signed transition without a stamp is not what a signer sends: with a
    /// key it is unsigned (its signature, over a stamp of 0, checks), without
    /// one a field out of range.
    #[test]
    fn a_signed_transition_without_a_stamp_is_refused_by_its_rule() {
        let key = SigningKey::new(b"0123456789abcdef", "shop");
        let inner = Message::Transition(unstamped()).encode();
        let mac = key.mac(0, &inner).expect("a mac");
        let sig = hex(&mac.finalize().into_bytes());
        let mut bytes = format!(r#"{{"v":2,"sent_ms":0,"sig":"{sig}","msg":"#).into_bytes();
        bytes.extend_from_slice(&inner);
        bytes.push(b'}');
        assert_eq!(decode(&bytes, Some(&key)).err(), Some(Invalid::Unsigned));
        assert_eq!(decode(&bytes, None).err(), Some(Invalid::Field));
    }
}
