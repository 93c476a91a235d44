//! What one bad clock, one noisy client or one replayed message can do to a
//! view: a stamp from the future is refused and locks nobody out; a flood of
//! made-up instance ids cannot keep real peers out; with a fleet key, only
//! messages it signed count, and an old one is refused as a replay. Driven
//! through `ViewHarness`, at times the tests choose.

use cutout::{Reason, State};
use cutout_fleet::testing::ViewHarness;
use cutout_fleet::{
    Fleet, FleetConfig, FleetError, Heartbeat, MAX_PEERS, Message, OpenEntry, Override,
    OverrideMode, Quorum, Report,
};
use std::num::NonZeroUsize;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const LIVE: Duration = Duration::from_secs(3);
const MAX_OPEN: Duration = Duration::from_secs(600);
const KEY: &[u8] = b"the fleet's shared key, 32 bytes";
const NS: &str = "checkout";

fn two() -> Quorum {
    Quorum::AtLeast(NonZeroUsize::new(2).unwrap())
}

/// Whole milliseconds, as the wire carries them.
fn start() -> (Instant, SystemTime) {
    (
        Instant::now(),
        UNIX_EPOCH + Duration::from_millis(1_800_000_000_000),
    )
}

fn heartbeat(id: &str, sent_at: SystemTime, open: &[(&str, SystemTime)]) -> Message {
    Message::Heartbeat(Heartbeat {
        instance: id.into(),
        sent_at,
        open: open
            .iter()
            .map(|(key, until)| OpenEntry {
                key: (*key).into(),
                until: *until,
                generation: 1,
                level: 0,
                external: false,
            })
            .collect(),
        more: false,
        overrides: Vec::new(),
    })
}

fn open(id: &str, until: SystemTime, sent_at: Option<SystemTime>) -> Message {
    Message::Transition(Report {
        key: "db".into(),
        instance: id.into(),
        generation: 1,
        state: State::Open,
        open_until: Some(until),
        level: 0,
        reason: Reason::ConsecutiveFailures.as_str().into(),
        sent_at,
    })
}

fn view() -> ViewHarness {
    ViewHarness::new("me", LIVE, MAX_OPEN)
}

/// "a" and "b" heartbeat at `wall` and report db Open until +10 s: quorum 2.
fn real_reports(v: &mut ViewHarness, now: Instant, wall: SystemTime) -> SystemTime {
    let until = wall + Duration::from_secs(10);
    for id in ["a", "b"] {
        v.apply(&heartbeat(id, wall, &[]).encode(), now, wall);
        v.apply(&open(id, until, None).encode(), now, wall);
    }
    until
}

#[test]
fn a_stamp_from_the_future_is_refused_and_locks_nobody_out() {
    let (now, wall) = start();
    let mut v = view();
    // `sent_ms` = u64::MAX, as raw bytes, and a heartbeat one day ahead.
    let max =
        r#"{"v":1,"kind":"heartbeat","instance":"a","sent_ms":18446744073709551615,"open":[]}"#;
    assert!(v.apply(max.as_bytes(), now, wall).is_empty());
    let day = wall + Duration::from_secs(86_400);
    assert!(
        v.apply(&heartbeat("a", day, &[]).encode(), now, wall)
            .is_empty()
    );
    // Within the skew (1 s by default): taken.
    let ahead = wall + Duration::from_millis(900);
    v.apply(&heartbeat("c", ahead, &[]).encode(), now, wall);
    let s = v.stats();
    assert_eq!((s.from_future, s.accepted), (2, 1));
    // Real reports from "a" and "b" reach the quorum: "a" was not locked out.
    let until = real_reports(&mut v, now, wall);
    assert_eq!(v.stats().out_of_order, 0);
    assert_eq!(v.verdict("db", two(), now, wall), Some(until));
    // The skew is a setting.
    let mut strict = view().max_skew(Duration::ZERO);
    strict.apply(&heartbeat("c", ahead, &[]).encode(), now, wall);
    assert_eq!(strict.stats().from_future, 1);
}

/// An override relayed in a heartbeat is held to the skew as a control message
/// is: one stamped an hour ahead (its issuer's clock, since stepped back) is
/// refused, and cannot outrank the release an operator issues after it.
#[test]
fn a_relayed_override_from_the_future_is_refused_and_blocks_no_release() {
    let (now, wall) = start();
    let mut v = view();
    let hour = Duration::from_secs(3600);
    let ahead = Override {
        key: "db".into(),
        mode: OverrideMode::ForceOpen,
        issuer: "b".into(),
        issued_at: wall + hour,
        until: wall + hour + Duration::from_secs(600),
    };
    let relayed = |o: &Override| {
        let mut beat = heartbeat("b", wall, &[]);
        if let Message::Heartbeat(h) = &mut beat {
            h.overrides.push(o.clone());
        }
        beat.encode()
    };
    v.apply(&Message::Control(ahead.clone()).encode(), now, wall);
    v.apply(&relayed(&ahead), now, wall);
    assert_eq!(v.stats().from_future, 2, "sent, then relayed");
    assert_eq!(v.override_of("db", wall), None);
    // Within the skew, a relay is taken; a release issued after it ends it.
    let near = Override {
        issued_at: wall + Duration::from_millis(900),
        until: wall + Duration::from_secs(600),
        ..ahead
    };
    v.apply(&relayed(&near), now, wall);
    assert_eq!(v.override_of("db", wall), Some(OverrideMode::ForceOpen));
    let later = wall + Duration::from_secs(1);
    let release = Override {
        key: "db".into(),
        mode: OverrideMode::Release,
        issuer: "ops".into(),
        issued_at: later,
        until: later + Duration::from_secs(600),
    };
    v.apply(&Message::Control(release).encode(), now, later);
    assert_eq!(v.override_of("db", later), None);
}

/// Both clocks step back a day after "a"'s heartbeat (NTP fixing a host that ran
/// ahead): "a"'s next heartbeats are older than the one applied. They are out of
/// order for `live_after` at most; then "a" is taken again, and counts.
#[test]
fn an_instances_ordering_recovers_within_live_after() {
    let (now, wall) = start();
    let mut v = view();
    v.apply(&heartbeat("a", wall, &[]).encode(), now, wall);
    let back = wall - Duration::from_secs(86_400);
    let mut t = now;
    while t < now + LIVE {
        assert!(
            v.apply(&heartbeat("a", back, &[]).encode(), t, back)
                .is_empty()
        );
        t += Duration::from_millis(500);
    }
    assert_eq!(v.stats().out_of_order, 6);
    assert_eq!(v.live_peers(t), 0, "no heartbeat taken for live_after");
    let until = real_reports(&mut v, t, back);
    assert_eq!(v.stats().out_of_order, 6, "taken again");
    assert_eq!(v.live_peers(t), 2);
    assert_eq!(v.verdict("db", two(), t, back), Some(until));
}

/// 5,000 made-up instance ids send empty heartbeats, over and over: the table
/// stays bounded, the flood is counted, and real peers that report an open get
/// in and stay in; once the made-up ids go quiet for `live_after`, anyone gets in.
#[test]
fn a_flood_of_made_up_ids_cannot_keep_real_peers_out() {
    let (now, wall) = start();
    let mut v = view();
    let flood = |v: &mut ViewHarness, round: usize, now: Instant, opens: bool| {
        let until = wall + Duration::from_secs(10);
        for i in 0..5_000 {
            let open: &[(&str, SystemTime)] = if opens { &[("x", until)] } else { &[] };
            let beat = heartbeat(&format!("made-up-{round}-{i}"), wall, open);
            v.apply(&beat.encode(), now, wall);
        }
    };
    flood(&mut v, 0, now, false);
    assert_eq!(v.peers(), MAX_PEERS);
    assert_eq!(v.stats().peers_refused, 5_000 - MAX_PEERS as u64);
    // The real peers' heartbeats, reporting nothing, find no place; their open
    // reports do, in place of made-up ids that report none.
    let until = real_reports(&mut v, now, wall);
    assert_eq!(v.stats().peers_displaced, 2);
    for id in ["a", "b"] {
        v.apply(&heartbeat(id, wall, &[("db", until)]).encode(), now, wall);
    }
    assert_eq!(v.verdict("db", two(), now, wall), Some(until));
    // Further floods, with or without opens, leave them in.
    flood(&mut v, 1, now, false);
    flood(&mut v, 2, now, true);
    assert_eq!(v.peers(), MAX_PEERS);
    assert_eq!(v.verdict("db", two(), now, wall), Some(until));
    let s = v.stats();
    assert!(s.peers_refused > 10_000 - 2 * MAX_PEERS as u64, "{s:?}");
    // After live_after without news, a made-up id's place is anyone's.
    let later = now + LIVE;
    let refused = v.stats().peers_refused;
    v.apply(
        &heartbeat("c", wall + LIVE, &[]).encode(),
        later,
        wall + LIVE,
    );
    assert_eq!(v.stats().peers_refused, refused);
    assert_eq!(v.live_peers(later), 1);
}

/// Made-up ids that each send one Open report and never a heartbeat count for
/// no quorum, so they hold no place against live peers: real peers already in
/// keep theirs, and trip with a quorum.
#[test]
fn a_flood_of_open_reports_without_heartbeats_cannot_keep_real_peers_out() {
    let (now, wall) = start();
    let mut v = view();
    for id in ["a", "b"] {
        v.apply(&heartbeat(id, wall, &[]).encode(), now, wall);
    }
    let far = wall + Duration::from_secs(600);
    for i in 0..MAX_PEERS {
        v.apply(
            &open(&format!("made-up-{i}"), far, None).encode(),
            now,
            wall,
        );
    }
    let until = real_reports(&mut v, now, wall);
    for id in ["a", "b"] {
        v.apply(&heartbeat(id, wall, &[("db", until)]).encode(), now, wall);
    }
    assert_eq!(
        v.verdict("db", two(), now, wall),
        Some(until),
        "{:?}",
        v.stats()
    );
    assert_eq!(v.stats().peers_refused, 0, "{:?}", v.stats());
}

#[test]
fn with_a_key_only_signed_fresh_messages_count() {
    let (now, wall) = start();
    let mut v = view().signing_key(KEY, NS);
    let until = wall + Duration::from_secs(10);
    // Unsigned, signed with another key, signed for another fleet: refused.
    let forged = [
        open("x", until, None).encode(),
        open("y", until, Some(wall)).encode_signed(b"not the fleet's key, 32 bytes...", NS),
        open("z", until, Some(wall)).encode_signed(KEY, "another-fleet"),
    ];
    for id in ["x", "y", "z"] {
        v.apply(&heartbeat(id, wall, &[]).encode(), now, wall);
    }
    for bytes in &forged {
        assert!(v.apply(bytes, now, wall).is_empty());
    }
    let s = v.stats();
    assert_eq!((s.unsigned, s.bad_signature, s.accepted), (4, 2, 0));
    // Altered on the way: refused.
    let mut altered = open("a", until, Some(wall)).encode_signed(KEY, NS);
    let at = altered.len() - 20;
    altered[at] ^= 1;
    assert!(v.apply(&altered, now, wall).is_empty());
    assert_eq!(v.stats().bad_signature, 3);
    // Signed: taken, and a quorum forms.
    for id in ["a", "b"] {
        v.apply(&heartbeat(id, wall, &[]).encode_signed(KEY, NS), now, wall);
        v.apply(
            &open(id, until, Some(wall)).encode_signed(KEY, NS),
            now,
            wall,
        );
    }
    assert_eq!(v.stats().accepted, 4);
    assert_eq!(v.verdict("db", two(), now, wall), Some(until));
    // A signed message older than live_after is a replay; one just younger is not.
    let old = wall - LIVE - Duration::from_millis(1);
    let replay = heartbeat("c", old, &[]).encode_signed(KEY, NS);
    assert!(v.apply(&replay, now, wall).is_empty());
    assert_eq!(v.stats().replayed, 1);
    let fresh = heartbeat("c", wall - LIVE, &[]).encode_signed(KEY, NS);
    v.apply(&fresh, now, wall);
    assert_eq!((v.stats().replayed, v.stats().accepted), (1, 5));
    // And one from the future, signed or not, is refused as such.
    let ahead = heartbeat("d", wall + Duration::from_secs(2), &[]).encode_signed(KEY, NS);
    v.apply(&ahead, now, wall);
    assert_eq!(v.stats().from_future, 1);
}

/// Unsigned messages keep the wire format of version 1, byte for byte; a view
/// without a key reads a signed one too (it trusts the channel either way).
#[test]
fn unsigned_messages_keep_the_v1_wire_format() {
    let at = UNIX_EPOCH + Duration::from_millis(1_800_000_000_000);
    let bytes = open("a", at + Duration::from_secs(5), None).encode();
    assert_eq!(
        String::from_utf8(bytes).unwrap(),
        r#"{"v":1,"kind":"transition","key":"db","instance":"a","generation":1,"state":"open","open_until_ms":1800000005000,"level":0,"reason":"consecutive_failures"}"#
    );
    let beat = heartbeat("a", at, &[]);
    assert_eq!(
        String::from_utf8(beat.encode()).unwrap(),
        r#"{"v":1,"kind":"heartbeat","instance":"a","sent_ms":1800000000000,"open":[]}"#
    );
    let signed = beat.encode_signed(KEY, NS);
    assert!(signed.starts_with(br#"{"v":2,"sent_ms":1800000000000,"sig":""#));
    let mut v = view();
    v.apply(&signed, Instant::now(), at);
    assert_eq!(v.stats().accepted, 1);
}

/// A key too short to be a secret is a configuration error naming the field, and
/// neither the key nor a password is ever printed.
#[test]
fn a_short_key_is_refused_and_secrets_are_never_printed() {
    let short = FleetConfig::new("redis://127.0.0.1:9/").signing_key("short");
    match Fleet::start(short) {
        Err(FleetError::Config { field, .. }) => assert_eq!(field, "signing_key"),
        other => panic!("{other:?}"),
    }
    let config = FleetConfig::new("redis://:url-secret@127.0.0.1:9/")
        .signing_key(KEY)
        .redis_user("fleet", "user-secret");
    let shown = format!("{config:?}");
    for secret in ["url-secret", "user-secret", "32 bytes"] {
        assert!(!shown.contains(secret), "{shown}");
    }
    assert!(shown.contains("signed: true"), "{shown}");
}
