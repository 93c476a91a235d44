//! Quorum opens of attached breakers against a real `redis-server`, with the
//! peers simulated by raw messages on the namespace's channel and heartbeat keys:
//! the same reports open a breaker once (after its own probe closes it they do not
//! open it again, whether it was opened live or joined Open), and a peer restarted
//! under the same instance id, whose fresh breaker trips at generation 1 again,
//! makes a new report that opens the key again; a peer whose heartbeat was only
//! late, back with the same report, does not, even after another peer's new
//! report opened the key again meanwhile. A shadow breaker's open, and a
//! what-if candidate's, are not reported at all, nor a quorum's own open (an
//! echo) published as a transition.
//!
//! Real time: the fleet's messages travel through Redis. Every wait is bounded.

mod common;

use common::{Peer, Redis, builder, namespace, redis_available, wait_for};
use cutout::{CircuitBreaker, ManualClock, State};
use cutout_fleet::{Fleet, FleetConfig, Message};
use std::time::{Duration, Instant, SystemTime};

/// The fleet instance `id` (quorum 2 by default): heartbeats every 500 ms, peers
/// live for 5 s after their last one.
fn config(redis: &Redis, ns: &str, id: &str) -> FleetConfig {
    FleetConfig::new(redis.url())
        .namespace(ns.to_string())
        .instance_id(id)
        .heartbeat_every(Duration::from_millis(500))
        .live_after(Duration::from_secs(5))
        .join_wait(Duration::from_secs(2))
}

/// Three peers report `db` Open: `a` until +3 s, `b` and `c` until +20 s. The
/// quorum (2) opens the local breaker until the earliest deadline, either live
/// (`join` false: attached first, then the reports arrive) or from the picture
/// (`join` true: the reports are there before this instance starts); its own
/// probe closes it after. Then `b` and `c` repeat the same reports for 500 ms:
/// they must not open it again, since the same reports open a breaker once and
/// only a new report (a peer's new trip) may open it again.
fn the_same_reports_do_not_reopen(join: bool) {
    if !redis_available() {
        return;
    }
    let redis = Redis::start();
    let ns = namespace(if join { "join-reopen" } else { "attach-reopen" });
    let (mut a, mut b, mut c) = (
        Peer::new(&redis, &ns, "a"),
        Peer::new(&redis, &ns, "b"),
        Peer::new(&redis, &ns, "c"),
    );
    // `a`'s deadline, set as its report is made, leaves time for a loaded
    // machine to start the fleet and sync (up to 2 s) or for the quorum to open
    // (up to 2 s) before it passes.
    let soon = || SystemTime::now() + Duration::from_millis(3_000);
    let later = SystemTime::now() + Duration::from_secs(20);
    // The breaker's clock is manual: its cooldown ends when the test says, not
    // when a cached reading of a loaded machine's clock catches up.
    let clock = ManualClock::new();
    let fleet;
    let breaker;
    if join {
        a.heartbeat(&[("db", soon(), 1)]);
        b.heartbeat(&[("db", later, 1)]);
        c.heartbeat(&[("db", later, 1)]);
        fleet = Fleet::start(config(&redis, &ns, "me")).unwrap();
        assert!(fleet.wait_synced(Duration::from_secs(2)));
        breaker = fleet.breaker("db", builder().clock(clock.clone())).unwrap();
    } else {
        fleet = Fleet::start(config(&redis, &ns, "me")).unwrap();
        assert!(fleet.wait_synced(Duration::from_secs(2)));
        breaker = fleet.breaker("db", builder().clock(clock.clone())).unwrap();
        assert_eq!(breaker.state(), State::Closed);
        a.heartbeat(&[("db", soon(), 1)]);
        b.heartbeat(&[("db", later, 1)]);
        c.heartbeat(&[("db", later, 1)]);
        // All three applied: a report arriving after the probe would be a new
        // one, which may open db again.
        wait_for("the quorum opens db", Duration::from_secs(5), || {
            breaker.state() == State::Open && fleet.view().stats().accepted >= 3
        });
    }
    assert_eq!(breaker.state(), State::Open);
    let left = breaker.metrics().retry_after.unwrap();
    assert!(left <= Duration::from_millis(3_000), "{left:?}");
    // Past the earliest deadline, the local probe succeeds: Closed.
    clock.advance(left + Duration::from_millis(1));
    breaker.try_acquire().expect("a probe").success();
    assert_eq!(breaker.state(), State::Closed);
    // `b` and `c` still hold db Open and keep saying so.
    b.heartbeat(&[("db", later, 1)]);
    c.heartbeat(&[("db", later, 1)]);
    let until = Instant::now() + Duration::from_millis(500);
    while Instant::now() < until {
        assert_eq!(
            breaker.state(),
            State::Closed,
            "join={join}: the same reports (b and c, generation 1) opened db again \
             after its own probe closed it; stats {:?}",
            fleet.view().stats()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Attached Closed, opened live by a quorum, closed by its own probe: the same
/// reports repeated do not open it again.
#[test]
fn the_same_reports_do_not_reopen_a_breaker_opened_live_and_closed_by_its_probe() {
    the_same_reports_do_not_reopen(false);
}

/// Built Open from the fleet's picture when this instance joined, closed by its
/// own probe: the same reports repeated do not open it again.
#[test]
fn the_same_reports_do_not_reopen_a_breaker_joined_open_and_closed_by_its_probe() {
    the_same_reports_do_not_reopen(true);
}

/// Two peers trip `db` (generation 1) and the quorum opens it; they recover,
/// withdraw their reports, and restart under the same (configured) instance ids.
/// Their fresh breakers' first trips have generation 1 again: that is a new
/// outage, not the reports the first quorum was applied from, and it opens `db`
/// again.
#[test]
fn a_peer_restarted_under_the_same_id_opens_a_key_by_quorum_again() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start();
    let ns = namespace("restarted-peer");
    let (mut a, mut b) = (Peer::new(&redis, &ns, "a"), Peer::new(&redis, &ns, "b"));
    let fleet = Fleet::start(config(&redis, &ns, "me")).unwrap();
    assert!(fleet.wait_synced(Duration::from_secs(2)));
    let clock = ManualClock::new();
    let breaker = fleet.breaker("db", builder().clock(clock.clone())).unwrap();
    a.heartbeat(&[]);
    b.heartbeat(&[]);
    wait_for("peers live", Duration::from_secs(2), || {
        fleet.view().live_peers() == 2
    });
    // First outage: both trip (generation 1) for 3 s (the quorum must see the
    // reports before their deadline, on a loaded machine too).
    let until = SystemTime::now() + Duration::from_secs(3);
    a.transition("db", State::Open, Some(until), 1);
    b.transition("db", State::Open, Some(until), 1);
    wait_for("the quorum opens db", Duration::from_secs(2), || {
        breaker.state() == State::Open
    });
    clock.advance(breaker.metrics().retry_after.unwrap() + Duration::from_millis(1));
    breaker.try_acquire().expect("a probe").success();
    assert_eq!(breaker.state(), State::Closed);
    // Both recover (their probes close them: generation 3), then restart.
    a.transition("db", State::Closed, None, 3);
    b.transition("db", State::Closed, None, 3);
    a.heartbeat(&[]);
    b.heartbeat(&[]);
    wait_for("reports withdrawn", Duration::from_secs(2), || {
        fleet.view().open_reports("db").is_empty()
    });
    // Second outage, after both restarted: fresh breakers, generation 1 again.
    let until = SystemTime::now() + Duration::from_secs(20);
    a.transition("db", State::Open, Some(until), 1);
    b.transition("db", State::Open, Some(until), 1);
    wait_for("two reports of db", Duration::from_secs(2), || {
        fleet.view().open_reports("db").len() == 2
    });
    wait_for(
        "the restarted peers' new outage opens db",
        Duration::from_secs(5),
        || breaker.state() == State::Open,
    );
}

/// How long a silent peer stays live in the late-heartbeat tests: short, so a
/// peer falls late soon, and long beside a loaded machine's pauses, so a peer
/// the test keeps sending for never does. Each wait sends the heartbeats of
/// every peer meant to be live, and checks what it must in the same poll.
const LATE: Duration = Duration::from_millis(1_500);

/// Two peers report `db` Open (generation 1) and the quorum (2) opens it; its own
/// probe closes it (its clock is manual: the cooldown ends while the reports still
/// stand). Then `a`'s heartbeat is late past `live_after`, so `b`'s heartbeats find
/// no quorum; `a` comes back with the same report. The quorum stands again, on the
/// reports it was applied from: a late heartbeat does not make them new, and `db`
/// stays Closed.
#[test]
fn a_late_heartbeat_does_not_make_the_same_reports_new() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start();
    let ns = namespace("late-heartbeat");
    let (mut a, mut b) = (Peer::new(&redis, &ns, "a"), Peer::new(&redis, &ns, "b"));
    let fleet = Fleet::start(
        config(&redis, &ns, "me")
            .heartbeat_every(Duration::from_millis(100))
            .live_after(LATE),
    )
    .unwrap();
    assert!(fleet.wait_synced(Duration::from_secs(2)));
    let clock = ManualClock::new();
    let breaker = fleet.breaker("db", builder().clock(clock.clone())).unwrap();
    assert_eq!(breaker.state(), State::Closed);
    // The peers' messages published so far: the fleet accepts each (none is read
    // from the heartbeat keys after the picture).
    let mut sent = 0;
    let report = [("db", SystemTime::now() + Duration::from_secs(20), 1)];
    a.heartbeat(&report);
    b.heartbeat(&report);
    sent += 2;
    // The open is counted just after it is made: wait for both.
    wait_for("the quorum opens db", Duration::from_secs(5), || {
        breaker.state() == State::Open && fleet.view().stats().quorum_opens >= 1
    });
    let opens = fleet.view().stats().quorum_opens;
    assert_eq!(opens, 1);
    // Its own cooldown ends (its clock) and its probe succeeds: Closed.
    clock.advance(breaker.metrics().retry_after.unwrap() + Duration::from_millis(1));
    breaker.try_acquire().expect("a probe").success();
    assert_eq!(breaker.state(), State::Closed);
    // `a` falls silent; `b` keeps sending until `a` is no longer live, and
    // one of its heartbeats (`without_a`, the first sent once `a` is seen not
    // live) is applied without `a`: no quorum.
    let mut without_a = None;
    wait_for("a's heartbeat is late", Duration::from_secs(10), || {
        b.heartbeat(&report);
        sent += 1;
        if fleet.view().live_peers() == 1 {
            without_a.get_or_insert(sent + 1); // the next one
        }
        without_a.is_some_and(|n| fleet.view().stats().accepted >= n)
            && fleet.view().open_reports("db").len() == 1
    });
    assert_eq!(breaker.state(), State::Closed);
    // `a` is back, with the same report (generation 1): a quorum again.
    a.heartbeat(&report);
    sent += 1;
    wait_for("a is live again", Duration::from_secs(10), || {
        a.heartbeat(&report); // both kept live
        b.heartbeat(&report);
        fleet.view().stats().accepted >= sent
            && fleet.view().live_peers() == 2
            && fleet.view().open_reports("db").len() == 2
    });
    let until = Instant::now() + Duration::from_millis(200);
    while Instant::now() < until {
        assert_eq!(
            breaker.state(),
            State::Closed,
            "a late heartbeat made the same reports (a and b, generation 1) new: \
             they opened db again after its own probe closed it; stats {:?}",
            fleet.view().stats()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(fleet.view().stats().quorum_opens, opens);
}

/// The reports a quorum was applied from are added to on each fresh quorum (they
/// were replaced by its reports, which forgot a report whose peer was not live at
/// that moment while the peer still held it). Here `a`, `b`, `c` report `db`
/// (generation 1) and the quorum opens it; its probe closes it. `c` is late for a
/// moment, and meanwhile `a` trips again (generation 3): a new report, which
/// rightly opens `db` again; its probe closes it. Then `c` is back with the very
/// report (c, 1) that opened `db` the first time: every report now standing has
/// opened `db` already, and `db` stays Closed.
#[test]
fn a_report_already_applied_does_not_open_again_after_its_peer_was_late() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start();
    let ns = namespace("applied");
    let (mut a, mut b, mut c) = (
        Peer::new(&redis, &ns, "a"),
        Peer::new(&redis, &ns, "b"),
        Peer::new(&redis, &ns, "c"),
    );
    let fleet = Fleet::start(
        config(&redis, &ns, "me")
            .heartbeat_every(Duration::from_millis(100))
            .live_after(LATE),
    )
    .unwrap();
    assert!(fleet.wait_synced(Duration::from_secs(2)));
    let clock = ManualClock::new();
    let db = fleet.breaker("db", builder().clock(clock.clone())).unwrap();
    let until = SystemTime::now() + Duration::from_secs(20);
    let first = [("db", until, 1)];
    let mut sent = 0;
    a.heartbeat(&first);
    b.heartbeat(&first);
    c.heartbeat(&first);
    sent += 3;
    // A message is counted before the quorum it makes opens db, and the open
    // before it is counted: wait for all three.
    wait_for("all three applied", Duration::from_secs(5), || {
        let stats = fleet.view().stats();
        stats.accepted >= sent
            && db.state() == State::Open
            && stats.quorum_opens >= 1
            && fleet.view().open_reports("db").len() == 3
    });
    assert_eq!(fleet.view().stats().quorum_opens, 1);
    let close = |db: &CircuitBreaker<ManualClock>| {
        clock.advance(db.metrics().retry_after.unwrap() + Duration::from_millis(1));
        db.try_acquire().expect("a probe").success();
        assert_eq!(db.state(), State::Closed);
    };
    close(&db);
    // `c` falls silent; `a` and `b` keep sending until `c` is no longer live.
    wait_for("c's heartbeat is late", Duration::from_secs(10), || {
        a.heartbeat(&first);
        b.heartbeat(&first);
        sent += 2;
        fleet.view().live_peers() == 2
    });
    // `a` trips again (generation 3): a new report, a fresh quorum with `b`.
    let second = [("db", until, 3)];
    a.heartbeat(&second);
    b.heartbeat(&first);
    sent += 2;
    wait_for("a's new trip opens db", Duration::from_secs(5), || {
        a.heartbeat(&second); // both kept live
        b.heartbeat(&first);
        let stats = fleet.view().stats();
        stats.accepted >= sent && db.state() == State::Open && stats.quorum_opens >= 2
    });
    assert_eq!(fleet.view().stats().quorum_opens, 2);
    close(&db);
    // `c` is back with the report (c, 1) that opened db the first time.
    c.heartbeat(&first);
    a.heartbeat(&second);
    b.heartbeat(&first);
    sent += 3;
    wait_for("c is live again", Duration::from_secs(10), || {
        c.heartbeat(&first); // all three kept live
        a.heartbeat(&second);
        b.heartbeat(&first);
        fleet.view().stats().accepted >= sent
            && fleet.view().live_peers() == 3
            && fleet.view().open_reports("db").len() == 3
    });
    let end = Instant::now() + Duration::from_millis(200);
    while Instant::now() < end {
        assert_eq!(
            db.state(),
            State::Closed,
            "the reports (a, 3), (b, 1), (c, 1) each opened db already, yet they opened \
             it again after its probe closed it; stats {:?}",
            fleet.view().stats()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(fleet.view().stats().quorum_opens, 2);
}

/// A shadow breaker's open, and a what-if candidate's (given the fleet's
/// listener), are what a breaker would have done: `me` reports neither, so no
/// peer counts them toward a quorum. Its live breaker's open, made after both,
/// is reported: once the peer sees it, it would have seen the others.
#[test]
fn shadow_and_candidate_opens_are_not_reported_to_the_fleet() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start();
    let ns = namespace("shadow-quiet");
    let me = Fleet::start(config(&redis, &ns, "me")).unwrap();
    let peer = Fleet::start(config(&redis, &ns, "peer")).unwrap();
    assert!(me.wait_synced(Duration::from_secs(2)));
    assert!(peer.wait_synced(Duration::from_secs(2)));
    let shadow = me.breaker("db", common::builder().shadow()).unwrap();
    let candidate = common::builder().on_transition(me.listener("pay"));
    let pay = CircuitBreaker::builder()
        .consecutive_failures(100)
        .clock(ManualClock::new())
        .candidate("eager", candidate)
        .build()
        .unwrap();
    let api = me.breaker("api", common::builder()).unwrap();
    let _ = shadow.call(|| Err::<(), _>("down"));
    let _ = pay.call(|| Err::<(), _>("down"));
    assert_eq!(shadow.state(), State::Open);
    assert_eq!(pay.candidates()[0].state, State::Open);
    let _ = api.call(|| Err::<(), _>("down"));
    wait_for("the peer sees api Open", Duration::from_secs(10), || {
        !peer.view().open_reports("api").is_empty()
    });
    assert!(peer.view().open_reports("db").is_empty());
    assert!(peer.view().open_reports("pay").is_empty());
    // The heartbeat key is written apart from the transition's message: it may
    // come a little later, and lists api alone.
    wait_for("me's heartbeat lists api", Duration::from_secs(10), || {
        !common::heartbeat_lists(&redis, &ns, "me").is_empty()
    });
    assert_eq!(
        common::heartbeat_lists(&redis, &ns, "me"),
        [("api".to_string(), 1)]
    );
}

/// An open a quorum caused is an echo (`Reason::External`): `me` does not
/// publish it as a transition (no peer counts it; its heartbeat lists it),
/// while its heartbeats go on.
#[test]
fn a_quorums_open_is_not_published_as_a_transition() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start();
    let ns = namespace("echo-unpublished");
    let (mut a, mut b) = (Peer::new(&redis, &ns, "a"), Peer::new(&redis, &ns, "b"));
    let fleet = Fleet::start(config(&redis, &ns, "me")).unwrap();
    assert!(fleet.wait_synced(Duration::from_secs(2)));
    let breaker = fleet.breaker("db", builder()).unwrap();
    let mut sub = redis.connect();
    let mut sub = sub.as_pubsub();
    sub.subscribe(format!("{ns}:events")).unwrap();
    sub.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    a.heartbeat(&[]);
    b.heartbeat(&[]);
    wait_for("peers live", Duration::from_secs(2), || {
        fleet.view().live_peers() == 2
    });
    let until = SystemTime::now() + Duration::from_secs(20);
    a.transition("db", State::Open, Some(until), 1);
    b.transition("db", State::Open, Some(until), 1);
    wait_for("the quorum opens db", Duration::from_secs(2), || {
        breaker.state() == State::Open
    });
    // Real time is the subject: two heartbeats of `me` (every 500 ms) after
    // the open.
    let (mut heartbeats, mut transitions) = (0, Vec::new());
    let end = Instant::now() + Duration::from_millis(1_200);
    while Instant::now() < end {
        let Ok(msg) = sub.get_message() else { continue };
        let bytes = msg.get_payload_bytes();
        match Message::decode(bytes, SystemTime::now(), Duration::from_secs(600)) {
            Ok(Message::Heartbeat(h)) if h.instance == "me" => heartbeats += 1,
            Ok(Message::Transition(r)) if r.instance == "me" => transitions.push(r),
            _ => {}
        }
    }
    assert!(heartbeats >= 1, "no heartbeat of me heard");
    assert!(transitions.is_empty(), "published: {transitions:?}");
}
