//! Arbitrary messages: none panics, and none gives a quorum unless valid Open
//! reports came from enough live peers.

use cutout_fleet::testing::ViewHarness;
use cutout_fleet::{MAX_MESSAGE_BYTES, Quorum};
use proptest::prelude::*;
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant, UNIX_EPOCH};

const LIVE: Duration = Duration::from_secs(3);
const MAX_OPEN: Duration = Duration::from_secs(600);
/// The wall clock of the test: whole milliseconds, as on the wire.
const WALL_MS: u64 = 1_800_000_000_000;

/// A message as the generator sees it, with what a valid sender would mean.
#[derive(Clone, Debug)]
enum Shape {
    Bytes(Vec<u8>),
    Heartbeat {
        v: u32,
        instance: String,
        sent_offset_ms: i64,
        open: Vec<(String, i64)>,
    },
    Transition {
        v: u32,
        instance: String,
        key: String,
        state: String,
        until_offset_ms: Option<i64>,
    },
}

fn instance() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("me".to_owned()),
        Just("a".to_owned()),
        Just("b".to_owned()),
        Just("c".to_owned()),
        Just(String::new()),
        "[a-z]{1,3}",
        Just("x".repeat(300)),
        Just("a\tb".to_owned()),
    ]
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("db".to_owned()),
        Just("cache".to_owned()),
        Just(String::new()),
        Just("d\u{1}b".to_owned()),
    ]
}

fn offset() -> impl Strategy<Value = i64> {
    prop_oneof![
        -10_000i64..10_000,
        Just(599_000),
        Just(601_000),
        Just(i64::MAX / 2),
        Just(-(WALL_MS as i64) - 1),
    ]
}

fn version() -> impl Strategy<Value = u32> {
    prop_oneof![8 => Just(1u32), 1 => Just(0u32), 1 => Just(2u32), 1 => any::<u32>()]
}

fn shape() -> impl Strategy<Value = Shape> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..200).prop_map(Shape::Bytes),
        (
            version(),
            instance(),
            offset(),
            prop::collection::vec((key(), offset()), 0..3)
        )
            .prop_map(|(v, instance, sent_offset_ms, open)| Shape::Heartbeat {
                v,
                instance,
                sent_offset_ms,
                open
            }),
        (
            version(),
            instance(),
            key(),
            prop_oneof![
                Just("open"),
                Just("closed"),
                Just("half_open"),
                Just("ajar")
            ],
            prop::option::of(offset())
        )
            .prop_map(
                |(v, instance, key, state, until_offset_ms)| Shape::Transition {
                    v,
                    instance,
                    key,
                    state: state.to_owned(),
                    until_offset_ms,
                }
            ),
    ]
}

fn ms(offset: i64) -> i128 {
    i128::from(WALL_MS) + i128::from(offset)
}

fn encode(shape: &Shape) -> Vec<u8> {
    match shape {
        Shape::Bytes(b) => b.clone(),
        Shape::Heartbeat {
            v,
            instance,
            sent_offset_ms,
            open,
        } => {
            let open: Vec<String> = open
                .iter()
                .map(|(k, o)| {
                    format!(
                        r#"{{"key":"{k}","until_ms":{},"generation":1,"level":0}}"#,
                        ms(*o)
                    )
                })
                .collect();
            format!(
                r#"{{"v":{v},"kind":"heartbeat","instance":"{instance}","sent_ms":{},"open":[{}]}}"#,
                ms(*sent_offset_ms),
                open.join(",")
            )
            .into_bytes()
        }
        Shape::Transition {
            v,
            instance,
            key,
            state,
            until_offset_ms,
        } => {
            let until = until_offset_ms
                .map(|o| format!(r#","open_until_ms":{}"#, ms(o)))
                .unwrap_or_default();
            format!(
                r#"{{"v":{v},"kind":"transition","key":"{key}","instance":"{instance}","generation":3,"state":"{state}"{until},"level":0,"reason":"x"}}"#
            )
            .into_bytes()
        }
    }
}

fn valid_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= 200 && !s.chars().any(char::is_control)
}

fn valid_deadline(o: i64) -> bool {
    // Ahead of now (a past deadline reports nothing) and within the maximum.
    o > 0 && ms(o) <= i128::from(WALL_MS) + MAX_OPEN.as_millis() as i128
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn no_message_panics_and_none_opens_without_valid_live_reports(
        shapes in prop::collection::vec(shape(), 0..12),
        k in 1usize..4,
    ) {
        let wall = UNIX_EPOCH + Duration::from_millis(WALL_MS);
        let now = Instant::now() + Duration::from_secs(3600);
        let mut view = ViewHarness::new("me", LIVE, MAX_OPEN);
        // Which senders are live (a valid, fresh heartbeat), and which keys each
        // has validly reported Open with a deadline ahead: the most a quorum may
        // count on.
        let mut live: HashSet<String> = HashSet::new();
        let mut reported: HashMap<String, HashSet<String>> = HashMap::new();
        for shape in &shapes {
            let bytes = encode(shape);
            let _ = view.apply(&bytes, now, wall);
            if bytes.len() > MAX_MESSAGE_BYTES {
                continue;
            }
            match shape {
                Shape::Heartbeat { v: 1, instance, sent_offset_ms, open }
                    if valid_name(instance) && instance != "me" =>
                {
                    if *sent_offset_ms > -(LIVE.as_millis() as i64) {
                        live.insert(instance.clone());
                    }
                    for (k, o) in open {
                        if valid_name(k) && valid_deadline(*o) {
                            reported.entry(k.clone()).or_default().insert(instance.clone());
                        }
                    }
                }
                Shape::Transition { v: 1, instance, key, state, until_offset_ms: Some(o) }
                    if state == "open" && valid_name(instance) && valid_name(key)
                        && instance != "me" && valid_deadline(*o) =>
                {
                    reported.entry(key.clone()).or_default().insert(instance.clone());
                }
                _ => {}
            }
        }
        let quorum = Quorum::AtLeast(std::num::NonZeroUsize::new(k).unwrap());
        for key in ["db", "cache", ""] {
            if let Some(until) = view.verdict(key, quorum, now, wall) {
                let backers = reported
                    .get(key)
                    .map_or(0, |r| r.iter().filter(|i| live.contains(*i)).count());
                prop_assert!(backers >= k, "{key} opened with {backers} valid live reports, k = {k}");
                prop_assert!(until > wall && until <= wall + MAX_OPEN);
            }
        }
    }

    #[test]
    fn arbitrary_bytes_never_count(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        let wall = UNIX_EPOCH + Duration::from_millis(WALL_MS);
        let mut view = ViewHarness::new("me", LIVE, MAX_OPEN);
        let _ = view.apply(&bytes, Instant::now(), wall);
        prop_assert_eq!(view.verdict("db", Quorum::default(), Instant::now(), wall), None);
    }
}

/// A backoff level beyond cutout's highest (`SavedState::MAX_LEVEL`) is refused:
/// a transition whole, a heartbeat's entry alone. A quorum of such reports would
/// make a saved state that `Builder::restore` refuses.
#[test]
fn a_level_beyond_the_highest_is_refused() {
    let now = UNIX_EPOCH + Duration::from_millis(WALL_MS);
    let until = WALL_MS + 1_000;
    let max = cutout::SavedState::MAX_LEVEL;
    let transition = |level: u32| {
        format!(
            r#"{{"v":1,"kind":"transition","key":"db","instance":"b","generation":1,"state":"open","open_until_ms":{until},"level":{level},"reason":"x"}}"#
        )
    };
    let decode = |s: String| cutout_fleet::Message::decode(s.as_bytes(), now, MAX_OPEN);
    assert!(decode(transition(u32::from(max))).is_ok());
    assert!(decode(transition(u32::from(max) + 1)).is_err());
    let entry = |key: &str, level: u8| {
        format!(r#"{{"key":"{key}","until_ms":{until},"generation":1,"level":{level}}}"#)
    };
    let beat = format!(
        r#"{{"v":1,"kind":"heartbeat","instance":"b","sent_ms":{WALL_MS},"open":[{},{}],"more":false}}"#,
        entry("db", max),
        entry("cache", max + 1)
    );
    let Ok(cutout_fleet::Message::Heartbeat(h)) = decode(beat) else {
        panic!("the heartbeat is taken");
    };
    let keys: Vec<&str> = h.open.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(keys, ["db"]);
}
