//! The fleet view at its edges: a transition to Recovering on the wire; a peer
//! holding one key no receiver takes (a cooldown past `max_open`, an over-long
//! name) still counts for its other keys, and a key named as none takes is
//! counted, not published; a listener that panics when a quorum
//! opens its breaker does not stop the view; two views' counters add up in one
//! metrics series; a failed connection is one Redis error, and failed ones
//! back off; an older
//! heartbeat, queued while a resubscription read the picture, does not bring
//! withdrawn reports back; a transition whose event reached the listener after
//! a newer one's does not withdraw the newer Open; a joiner reads its own
//! namespace's heartbeats only, joins past a heartbeat key whose name is not
//! UTF-8, and reads all of them in a database of a million other keys; the
//! view lists each key that live peers report Open once; a
//! namespace with a glob character, or a `live_after` over a day, is refused.
//! The Redis tests start a `redis-server` on a free loopback port (see
//! `common`); every wait is bounded.

mod common;

use common::{
    Peer, Redis, builder, config, heartbeat_lists, namespace, redis_available, wait_for, within,
};
use cutout::{CircuitBreaker, ManualClock, Reason, State, Transition};
use cutout_fleet::testing::ViewHarness;
use cutout_fleet::{
    Fleet, FleetConfig, FleetError, Heartbeat, MAX_NAME_BYTES, Message, OpenEntry, Quorum, Report,
};
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The wall clock of the pure tests: whole milliseconds, as on the wire.
const WALL_MS: u64 = 1_800_000_000_000;
const MAX_OPEN: Duration = Duration::from_secs(600);

fn wall() -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(WALL_MS)
}

fn two() -> Quorum {
    Quorum::AtLeast(NonZeroUsize::new(2).unwrap())
}

fn heartbeat(id: &str, sent_at: SystemTime, open: &[(&str, SystemTime, u32)]) -> Vec<u8> {
    listing(id, sent_at, open, false)
}

/// A heartbeat listing `open`, saying whether its sender holds `more`.
fn listing(id: &str, sent_at: SystemTime, open: &[(&str, SystemTime, u32)], more: bool) -> Vec<u8> {
    Message::Heartbeat(Heartbeat {
        instance: id.into(),
        sent_at,
        open: open
            .iter()
            .map(|(k, until, generation)| OpenEntry {
                key: (*k).into(),
                until: *until,
                generation: *generation,
                level: 0,
                external: false,
            })
            .collect(),
        more,
        overrides: Vec::new(),
    })
    .encode()
}

// ---------------------------------------------------------------------------
// 1. `State::Recovering` (cutout's ramp-up) is a state the decoder does not know.
// ---------------------------------------------------------------------------

/// A breaker with `ramp_up` moves HalfOpen -> Recovering; the fleet's listener
/// publishes that transition like any other (`Inner::enqueue`), and every peer's
/// decoder refuses it as a bad field: the crate refuses its own messages.
#[test]
fn a_transition_to_recovering_round_trips() {
    let report = Report {
        key: "db".into(),
        instance: "a".into(),
        generation: 3,
        state: State::Recovering,
        open_until: None,
        level: 1,
        reason: Reason::ProbesSucceeded.as_str().into(),
        sent_at: None,
    };
    let bytes = Message::Transition(report.clone()).encode();
    assert_eq!(
        Message::decode(&bytes, wall(), MAX_OPEN),
        Ok(Message::Transition(report)),
        "a message this crate sends for a state cutout has is refused"
    );
}

// ---------------------------------------------------------------------------
// 2. One entry a receiver refuses takes the whole heartbeat with it: the peer is
//    no longer live, and none of its reports count.
// ---------------------------------------------------------------------------

/// Peers `a` and `b` (real fleets) trip `db` for 30 s: a quorum of 2 must open
/// `me`'s `db`. Before that, `a` holds one other key Open that `me` refuses as
/// an entry (`key`, open for `open`): a long cooldown past `me`'s `max_open`, or a
/// breaker name over 200 bytes.
fn one_refused_entry_must_not_silence_its_peer(tag: &str, key: &str, open: Duration) {
    if !redis_available() {
        return;
    }
    let redis = Redis::start();
    let ns = namespace(tag);
    let me = Fleet::start(config(&redis, &ns, "me")).unwrap();
    let a = Fleet::start(config(&redis, &ns, "a")).unwrap();
    let b = Fleet::start(config(&redis, &ns, "b")).unwrap();
    let me_db = me.breaker("db", builder()).unwrap();
    let a_db = a.breaker("db", builder()).unwrap();
    let b_db = b.breaker("db", builder()).unwrap();
    let a_other = a
        .breaker(
            key,
            CircuitBreaker::builder()
                .consecutive_failures(1)
                .open_duration(open),
        )
        .unwrap();
    wait_for("a and b live", Duration::from_secs(5), || {
        me.view().live_peers() == 2
    });
    let _ = a_other.call(|| Err::<(), _>("down"));
    assert_eq!(a_other.state(), State::Open);
    // Past `live_after`: the heartbeats `a` sent since are what `me` has of it.
    std::thread::sleep(Duration::from_millis(1_500));
    let _ = a_db.call(|| Err::<(), _>("down"));
    let _ = b_db.call(|| Err::<(), _>("down"));
    assert_eq!((a_db.state(), b_db.state()), (State::Open, State::Open));
    let opened = within(Duration::from_secs(3), || me_db.state() == State::Open);
    assert!(
        opened,
        "a and b both report db Open (30 s, valid), yet no quorum: live peers {}, \
         db reports {:?}, stats {:?}",
        me.view().live_peers(),
        me.view().open_reports("db"),
        me.view().stats()
    );
}

#[test]
fn a_peer_holding_one_long_cooldown_open_still_counts_toward_a_quorum() {
    // cutout allows any open_duration; 15 min is past the default max_open (10 min).
    one_refused_entry_must_not_silence_its_peer("long-cooldown", "batch", Duration::from_secs(900));
}

#[test]
fn a_peer_holding_a_long_named_key_open_still_counts_toward_a_quorum() {
    let key = "k".repeat(MAX_NAME_BYTES + 1);
    one_refused_entry_must_not_silence_its_peer("long-name", &key, Duration::from_secs(30));
}

/// A breaker whose key no receiver takes (over `MAX_NAME_BYTES`, or holding a
/// control character) decides locally: its transitions are dropped and counted,
/// not published, and `force_open` refuses the same key by name.
#[test]
fn a_key_no_receiver_takes_is_counted_and_not_published() {
    let config = FleetConfig::new("redis://127.0.0.1:9/").join_wait(Duration::ZERO);
    let fleet = Fleet::start(config).unwrap();
    let long = "k".repeat(MAX_NAME_BYTES + 1);
    for key in [long.as_str(), "d\u{1}b"] {
        let breaker = fleet.breaker(key, builder()).unwrap();
        let _ = breaker.call(|| Err::<(), _>("down"));
        assert_eq!(breaker.state(), State::Open, "decides locally");
        match fleet.force_open(key, Duration::from_secs(60)) {
            Err(FleetError::Config { field, .. }) => assert_eq!(field, "key"),
            other => panic!("{other:?}"),
        }
    }
    let db = fleet.breaker("db", builder()).unwrap();
    let _ = db.call(|| Err::<(), _>("down"));
    assert_eq!(
        fleet.view().stats().bad_key_dropped,
        2,
        "the two bad keys' opens"
    );
}

// ---------------------------------------------------------------------------
// 4. A panic on the subscriber thread ends the view for good, silently.
// ---------------------------------------------------------------------------

/// The docs invite an application to keep its own listener and `attach` (the
/// listener then runs on the fleet's subscriber thread when a quorum opens the
/// breaker). One panic there kills the subscriber thread: nothing restarts it,
/// no counter shows it, and the view and every quorum stop for good.
#[test]
fn a_panicking_listener_does_not_stop_the_fleet_view() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start();
    let ns = namespace("panicking-listener");
    let (mut a, mut b) = (Peer::new(&redis, &ns, "a"), Peer::new(&redis, &ns, "b"));
    let fleet = Fleet::start(config(&redis, &ns, "me")).unwrap();
    assert!(fleet.wait_synced(Duration::from_secs(2)));
    let publish = fleet.listener("db");
    let db = Arc::new(
        builder()
            .name("db")
            .on_transition(move |t| {
                publish(t);
                if t.reason == Reason::External {
                    // A panic that skips the panic hook: a backtrace of this
                    // debug binary (RUST_BACKTRACE) took seconds on a loaded
                    // machine, on the subscriber thread.
                    std::panic::resume_unwind(Box::new("a bug in the application's listener"));
                }
            })
            .build()
            .unwrap(),
    );
    fleet.attach("db", &db);
    let cache = fleet.breaker("cache", builder()).unwrap();
    let until = SystemTime::now() + Duration::from_secs(20);
    a.heartbeat(&[("db", until, 1)]);
    b.heartbeat(&[("db", until, 1)]);
    // Generous bounds, for a loaded machine.
    wait_for("the quorum opens db", Duration::from_secs(10), || {
        db.state() == State::Open
    });
    // Later, both report `cache` Open too.
    a.heartbeat(&[("db", until, 1), ("cache", until, 1)]);
    b.heartbeat(&[("db", until, 1), ("cache", until, 1)]);
    let opened = within(Duration::from_secs(10), || cache.state() == State::Open);
    assert!(
        opened,
        "the view stopped after a listener panic: cache reports {:?}, stats {:?}",
        fleet.view().open_reports("cache"),
        fleet.view().stats()
    );
}

// ---------------------------------------------------------------------------
// 5. Metrics: `Counter::absolute` across two views.
// ---------------------------------------------------------------------------

/// Two views in one process (two fleets, or a fleet dropped and a new one started)
/// publish the same counter series. With `absolute` and the facade's `AtomicU64`
/// storage (`fetch_max`), the series shows the larger of the two and freezes,
/// instead of their sum.
#[cfg(feature = "metrics")]
#[test]
fn counters_of_two_views_add_up() {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};
    let start = || {
        Fleet::start(
            FleetConfig::new("redis://127.0.0.1:9/")
                .join_wait(Duration::ZERO)
                .io_timeout(Duration::from_millis(100))
                .reconnect(Duration::from_millis(10), Duration::from_millis(20)),
        )
        .expect("starts without Redis")
    };
    let first = start();
    wait_for("errors", Duration::from_secs(5), || {
        first.view().stats().redis_errors >= 6
    });
    let first_view = first.view().clone();
    drop(first); // its counters are final now
    let second = start();
    wait_for("errors", Duration::from_secs(5), || {
        second.view().stats().redis_errors >= 1
    });
    let second_view = second.view().clone();
    drop(second);
    let (e1, e2) = (
        first_view.stats().redis_errors,
        second_view.stats().redis_errors,
    );
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        first_view.record_metrics();
        second_view.record_metrics();
    });
    let total = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .find(|(k, ..)| k.key().name() == "cutout_fleet_redis_errors_total")
        .map(|(.., v)| v);
    assert_eq!(
        total,
        Some(DebugValue::Counter(e1 + e2)),
        "first view {e1} errors, second view {e2}"
    );
}

// ---------------------------------------------------------------------------
// 6. A failed connection attempt of the subscriber counts two Redis errors.
// ---------------------------------------------------------------------------

/// `FleetStats::redis_errors`: "Connection attempts or commands that failed". With
/// Redis unreachable and a 10-20 s backoff, each thread makes one attempt in the
/// first second: two failed attempts.
#[test]
fn one_failed_connection_attempt_is_one_redis_error() {
    let fleet = Fleet::start(
        FleetConfig::new("redis://127.0.0.1:9/")
            .join_wait(Duration::ZERO)
            .io_timeout(Duration::from_millis(100))
            .reconnect(Duration::from_secs(20), Duration::from_secs(20)),
    )
    .expect("starts without Redis");
    let errors = || fleet.view().stats().redis_errors;
    assert!(within(Duration::from_secs(10), || errors() >= 2));
    // The next attempts are 20 s away: a second count of either would show now.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        errors(),
        2,
        "two threads, one failed connection attempt each"
    );
}

/// Redis unreachable, with a backoff from 10 ms doubling to 10 s: each thread
/// backs off as its failures add up (the subscriber's quick failures are no
/// session that lasted, which would reset it), a handful of attempts in 1.5 s,
/// not one every 5 to 10 ms.
#[test]
fn failed_connection_attempts_back_off() {
    let fleet = Fleet::start(
        FleetConfig::new("redis://127.0.0.1:9/")
            .join_wait(Duration::ZERO)
            .io_timeout(Duration::from_millis(100))
            .reconnect(Duration::from_millis(10), Duration::from_secs(10)),
    )
    .expect("starts without Redis");
    // Real time is the subject: each thread's waits add up to 1.3 s by its
    // ninth attempt.
    std::thread::sleep(Duration::from_millis(1_500));
    let errors = fleet.view().stats().redis_errors;
    assert!(errors <= 20, "{errors} failed attempts in 1.5 s");
}

// ---------------------------------------------------------------------------
// 7. An older heartbeat applied after a newer one brings back withdrawn reports.
// ---------------------------------------------------------------------------

/// After a (re)subscription the subscriber applies each peer's latest heartbeat
/// from its key (the picture), then the messages buffered on the channel since
/// SUBSCRIBE: heartbeats older than the picture. The view keeps `heard` from
/// going back but replaces the Open set with the older heartbeat's: reports the
/// peers already withdrew make a quorum again.
#[test]
fn an_older_heartbeat_does_not_bring_back_withdrawn_reports() {
    let (now, wall) = (Instant::now(), wall());
    let mut v = ViewHarness::new("me", Duration::from_secs(3), MAX_OPEN);
    let until = wall + Duration::from_secs(20);
    let earlier = wall - Duration::from_millis(500);
    let old: Vec<Vec<u8>> = ["a", "b"]
        .iter()
        .map(|id| heartbeat(id, earlier, &[("db", until, 1)]))
        .collect();
    for id in ["a", "b"] {
        // The newest heartbeats (from the keys): db no longer Open.
        v.apply(&heartbeat(id, wall, &[]), now, wall);
    }
    assert_eq!(v.verdict("db", two(), now, wall), None, "sanity");
    // Then the older ones, buffered on the channel.
    for bytes in &old {
        v.apply(bytes, now, wall);
    }
    assert_eq!(
        v.verdict("db", two(), now, wall),
        None,
        "heartbeats older than the ones applied made a quorum of withdrawn reports"
    );
}

/// An instance holding more Open keys than a heartbeat lists sends the
/// earliest-ending ones and says it holds more: its peers keep the keys they
/// learned from its transitions that end later, so those still make a quorum
/// after its next heartbeat (which once erased them within milliseconds). A
/// heartbeat that lists everything (no `more`) withdraws what it does not list.
#[test]
fn keys_past_a_heartbeats_list_still_count_when_it_says_it_holds_more() {
    let (now, wall) = (Instant::now(), wall());
    let mut v = ViewHarness::new("me", Duration::from_secs(3), MAX_OPEN);
    let keys: Vec<String> = (0..4).map(|i| format!("k{i}")).collect();
    let listed: Vec<(&str, SystemTime, u32)> = keys
        .iter()
        .map(|k| (k.as_str(), wall + Duration::from_secs(10), 1))
        .collect();
    let late = wall + Duration::from_secs(60);
    let open_extra = |id: &str| {
        Message::Transition(Report {
            key: "extra".into(),
            instance: id.into(),
            generation: 1,
            state: State::Open,
            open_until: Some(late),
            level: 0,
            reason: Reason::ConsecutiveFailures.as_str().into(),
            sent_at: None,
        })
        .encode()
    };
    for id in ["a", "b"] {
        v.apply(&listing(id, wall, &listed, true), now, wall);
        v.apply(&open_extra(id), now, wall);
    }
    assert_eq!(v.verdict("extra", two(), now, wall), Some(late));
    // Each instance's next heartbeat lists the same earliest-ending keys.
    for id in ["a", "b"] {
        v.apply(&listing(id, wall, &listed, true), now, wall);
    }
    assert_eq!(v.verdict("extra", two(), now, wall), Some(late), "kept");
    // A heartbeat that lists all an instance holds withdraws the rest.
    v.apply(&listing("a", wall, &listed, false), now, wall);
    assert_eq!(v.verdict("extra", two(), now, wall), None, "withdrawn");
}

// ---------------------------------------------------------------------------
// 8. Transitions delivered out of generation order.
// ---------------------------------------------------------------------------

/// DESIGN.md (Decisions): "Events are delivered by the thread whose CAS made the
/// transition, after the CAS; two threads' events can reach a callback out of
/// order, so each carries its generation." The publisher applied transitions in
/// arrival order, so a stale one overrode a newer one.
///
/// Here thread A's probe closes `db` (HalfOpen -> Closed, generation 3), and
/// before A's listener has run (a preemption, made deterministic by a gate in the
/// application's own listener, as the `Fleet::breaker` docs invite) the main
/// thread's failing call trips it again (Closed -> Open, generation 4), whose
/// event is delivered first. The breaker is Open for 30 s: the late "Closed" is
/// stale, dropped and counted, and `db` stays in this instance's heartbeat and in
/// the peer's view (it was withdrawn from both, for the whole cooldown).
#[test]
fn a_late_delivered_older_transition_does_not_withdraw_a_newer_open() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start();
    let ns = namespace("reorder");
    let me = Fleet::start(config(&redis, &ns, "me")).unwrap();
    let peer = Fleet::start(config(&redis, &ns, "peer")).unwrap();
    let clock = ManualClock::new();
    let publish = me.listener("db");
    // The gate: a Closed event waits (bounded) until the Open after it is out.
    let (opened_tx, opened_rx) = channel::<()>();
    let (blocked_tx, blocked_rx) = channel::<()>();
    let opened_tx = Mutex::new(opened_tx);
    let opened_rx = Mutex::new(opened_rx);
    let blocked_tx = Mutex::new(blocked_tx);
    let armed = Arc::new(AtomicBool::new(false));
    let gate = armed.clone();
    let db = Arc::new(
        builder()
            .clock(clock.clone())
            .name("db")
            .on_transition(move |t: &Transition| {
                let gated = gate.load(Ordering::SeqCst);
                if gated && t.to == State::Closed {
                    let _ = blocked_tx.lock().unwrap().send(());
                    let _ = opened_rx
                        .lock()
                        .unwrap()
                        .recv_timeout(Duration::from_secs(5));
                }
                publish(t);
                if gated && t.to == State::Open {
                    let _ = opened_tx.lock().unwrap().send(());
                }
            })
            .build()
            .unwrap(),
    );
    me.attach("db", &db);
    wait_for("peers live", Duration::from_secs(5), || {
        me.view().live_peers() == 1 && peer.view().live_peers() == 1
    });
    // First trip (generation 1); its cooldown ends on the manual clock.
    let _ = db.call(|| Err::<(), _>("down"));
    assert_eq!(db.state(), State::Open);
    clock.advance(Duration::from_secs(31));
    armed.store(true, Ordering::SeqCst);
    let prober = {
        let db = db.clone();
        std::thread::spawn(move || {
            // HalfOpen (generation 2), then Closed (generation 3): its event waits.
            db.try_acquire().expect("a probe").success();
        })
    };
    blocked_rx
        .recv_timeout(Duration::from_secs(5))
        .expect("the probe's Closed event reached the listener");
    assert_eq!(db.state(), State::Closed);
    // A failure trips it again (generation 4); its event goes out first.
    let _ = db.call(|| Err::<(), _>("down again"));
    assert_eq!(db.state(), State::Open);
    prober.join().unwrap();
    wait_for("the late Closed is dropped", Duration::from_secs(2), || {
        me.view().stats().stale_dropped == 1
    });
    // Several heartbeats later: the breaker is Open for 30 s more.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(db.state(), State::Open);
    let reported = within(Duration::from_secs(2), || {
        peer.view()
            .open_reports("db")
            .iter()
            .any(|r| r.instance == "me" && r.generation == 4)
            && heartbeat_lists(&redis, &ns, "me") == [("db".to_string(), 4)]
    });
    assert!(
        reported,
        "db is Open (generation 4) on `me`, but a late-delivered Closed (generation \
         3) withdrew it: me's heartbeat lists {:?}, the peer's view of db {:?}",
        heartbeat_lists(&redis, &ns, "me"),
        peer.view().open_reports("db")
    );
    assert_eq!(
        me.view().stats().stale_dropped,
        1,
        "the one stale transition"
    );
}

/// A namespace reads its own heartbeats only: the heartbeat keys of a fleet
/// whose namespace extends this one's key prefix (`{ns}:hb:other`) match its
/// scan's pattern, and are left out.
#[test]
fn a_namespace_does_not_read_another_fleets_heartbeats() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start();
    let ns = namespace("prefix");
    let other = format!("{ns}:hb:other");
    let until = SystemTime::now() + Duration::from_secs(30);
    for id in ["p", "q"] {
        Peer::new(&redis, &other, id).heartbeat(&[("db", until, 1)]);
    }
    let joiner = Fleet::start(config(&redis, &ns, "j")).unwrap();
    assert!(joiner.wait_synced(Duration::from_secs(10)));
    let db = joiner.breaker("db", builder()).unwrap();
    let seen = (joiner.view().live_peers(), db.state());
    assert_eq!(seen, (0, State::Closed), "took {other}'s picture");
}

/// A namespace holding a glob character is refused by name: Redis reads
/// `\` in a scan's pattern as an escape, so namespace `x\b` would read fleet
/// `xb`'s heartbeats as its own.
#[test]
fn a_namespace_with_a_glob_character_is_refused() {
    for ns in ["t-x\\b", "t-x*", "t-x?", "t-[x]"] {
        let config = FleetConfig::new("redis://127.0.0.1:9/").namespace(ns);
        match Fleet::start(config) {
            Err(FleetError::Config { field, .. }) => assert_eq!(field, "namespace", "{ns}"),
            other => panic!("{ns}: {other:?}"),
        }
    }
}

/// A key under the heartbeat prefix whose name is not UTF-8 (a broken or
/// hostile client's) is left out of the picture: the joiner still joins and
/// opens by its peers' heartbeats.
#[test]
fn a_heartbeat_key_not_in_utf8_does_not_stop_a_join() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start();
    let ns = namespace("nonutf8");
    let mut con = redis.connect();
    let mut bad_key = format!("{ns}:hb:").into_bytes();
    bad_key.push(0xff);
    let _: () = redis::cmd("SET")
        .arg(&bad_key)
        .arg("x")
        .query(&mut con)
        .unwrap();
    let until = SystemTime::now() + Duration::from_secs(30);
    for id in ["p", "q"] {
        Peer::new(&redis, &ns, id).heartbeat(&[("db", until, 1)]);
    }
    let joiner = config(&redis, &ns, "j").live_after(Duration::from_secs(10));
    let joiner = Fleet::start(joiner).unwrap();
    let synced = joiner.wait_synced(Duration::from_secs(10));
    assert!(synced, "never synced: {:?}", joiner.view().stats());
    let db = joiner.breaker("db", builder()).unwrap();
    let seen = (joiner.view().live_peers(), db.state());
    assert_eq!(seen, (2, State::Open), "{:?}", joiner.view().stats());
    assert_eq!(joiner.view().stats().garbage, 0, "the key is left unread");
}

/// `live_after` is at most a day (it is the heartbeat key's expiry, which Redis
/// takes only so far): a longer one is refused by name, and a day's writes
/// the heartbeat key without an error.
#[test]
fn live_after_is_at_most_a_day_and_a_day_writes_the_heartbeat_key() {
    let day = Duration::from_secs(86_400);
    for age in [Duration::MAX, day + Duration::from_millis(1)] {
        let config = FleetConfig::new("redis://127.0.0.1:9/").live_after(age);
        match Fleet::start(config) {
            Err(FleetError::Config { field, .. }) => assert_eq!(field, "live_after", "{age:?}"),
            other => panic!("{age:?}: {other:?}"),
        }
    }
    if !redis_available() {
        return;
    }
    let redis = Redis::start();
    let ns = namespace("liveday");
    let a = Fleet::start(config(&redis, &ns, "a").live_after(day)).unwrap();
    let mut con = redis.connect();
    let mut ttl = || -> i64 {
        let key = format!("{ns}:hb:a");
        redis::cmd("PTTL").arg(key).query(&mut con).unwrap()
    };
    wait_for("the heartbeat key", Duration::from_secs(5), || ttl() > 0);
    let left = Duration::from_millis(ttl().try_into().unwrap());
    assert!(left > day - Duration::from_secs(60), "expires in {left:?}");
    assert_eq!(a.view().stats().redis_errors, 0);
}

/// A joiner reads every live heartbeat however many other keys the database
/// holds: its scan walks them all (it stopped after about 200,000).
#[test]
fn the_picture_holds_every_heartbeat_of_a_busy_database() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start();
    let ns = namespace("busy");
    let mut con = redis.connect();
    // A million keys of another application, set in ten server-side batches
    // (a scan that stopped at 200,000 would miss one of the four heartbeats
    // in all but about 1 run in 600).
    let fill =
        "for i = tonumber(ARGV[1]), tonumber(ARGV[2]) do redis.call('SET', 'app:' .. i, '') end";
    for batch in 0..10u64 {
        let _: () = redis::cmd("EVAL")
            .arg(fill)
            .arg(0)
            .arg(batch * 100_000)
            .arg(batch * 100_000 + 99_999)
            .query(&mut con)
            .unwrap();
    }
    let until = SystemTime::now() + Duration::from_secs(30);
    for id in ["p1", "p2", "p3", "p4"] {
        Peer::new(&redis, &ns, id).heartbeat(&[("db", until, 1)]);
        // Kept past the peer's 10 s expiry, however long a loaded machine's
        // scan takes.
        let _: () = redis::cmd("PERSIST")
            .arg(format!("{ns}:hb:{id}"))
            .query(&mut con)
            .unwrap();
    }
    let joiner = config(&redis, &ns, "j").live_after(Duration::from_secs(600));
    let joiner = Fleet::start(joiner).unwrap();
    assert!(joiner.wait_synced(Duration::from_secs(300)));
    let view = joiner.view();
    assert_eq!((view.live_peers(), view.stats().accepted), (4, 4));
}

/// The view's handle lists every key some live peer reports Open, once each:
/// `db` from two peers, `cache` from one.
#[test]
fn the_view_lists_each_key_live_peers_report_open_once() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start();
    let ns = namespace("open-keys");
    let me = Fleet::start(config(&redis, &ns, "me")).unwrap();
    assert!(me.wait_synced(Duration::from_secs(2)));
    let until = SystemTime::now() + Duration::from_secs(30);
    let (mut a, mut b) = (Peer::new(&redis, &ns, "a"), Peer::new(&redis, &ns, "b"));
    a.heartbeat(&[("db", until, 1), ("cache", until, 1)]);
    b.heartbeat(&[("db", until, 1)]);
    wait_for("cache and db listed", Duration::from_secs(2), || {
        me.view().open_keys() == ["cache", "db"]
    });
}
