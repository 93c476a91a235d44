//! Fleet-wide manual control: an override reaches every instance, a release
//! ends it everywhere, an instance that joins later learns it from the
//! heartbeats, and it ends at its deadline. The view's rules through
//! `ViewHarness`; the whole path against a real redis-server.

mod common;

use common::{
    Peer, Redis, builder, config, hooked_registry, issue, namespace, offline, redis_available,
    wait_for,
};
use cutout::{ManualClock, Registry, State};
use cutout_fleet::testing::ViewHarness;
use cutout_fleet::{
    Fleet, FleetError, Heartbeat, MAX_OVERRIDE, MAX_OVERRIDES, Message, Override, OverrideMode,
};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const LIVE: Duration = Duration::from_secs(3);
const MAX_OPEN: Duration = Duration::from_secs(600);
const KEY: &[u8] = b"the fleet's shared key, 32 bytes";

fn t0() -> (Instant, SystemTime) {
    (
        Instant::now(),
        UNIX_EPOCH + Duration::from_millis(1_800_000_000_000),
    )
}

fn ov(mode: OverrideMode, issuer: &str, issued: SystemTime, until: SystemTime) -> Override {
    Override {
        key: "db".into(),
        mode,
        issuer: issuer.into(),
        issued_at: issued,
        until,
    }
}

fn relay(id: &str, sent_at: SystemTime, overrides: Vec<Override>) -> Message {
    Message::Heartbeat(Heartbeat {
        instance: id.into(),
        sent_at,
        open: Vec::new(),
        more: false,
        overrides,
    })
}

/// A control message sets the key's override; a heartbeat relaying its later
/// release ends it; a peer that still relays the older override cannot bring
/// it back; an override ends at its deadline.
#[test]
fn the_latest_override_wins_and_ends_at_its_deadline() {
    let (now, wall) = t0();
    let s = Duration::from_secs;
    let mut view = ViewHarness::new("me", LIVE, MAX_OPEN);
    let force = ov(OverrideMode::ForceOpen, "ops", wall, wall + s(60));
    view.apply(&Message::Control(force.clone()).encode(), now, wall);
    assert_eq!(view.override_of("db", wall), Some(OverrideMode::ForceOpen));
    assert_eq!(view.override_of("other", wall), None);
    let release = ov(OverrideMode::Release, "ops", wall + s(1), wall + s(60));
    let beat = relay("a", wall + s(1), vec![release]);
    view.apply(&beat.encode(), now + s(1), wall + s(1));
    assert_eq!(view.override_of("db", wall + s(1)), None, "released");
    let stale = relay("b", wall + s(2), vec![force]);
    view.apply(&stale.encode(), now + s(2), wall + s(2));
    assert_eq!(view.override_of("db", wall + s(2)), None, "a stale relay");
    let disable = ov(OverrideMode::Disable, "ops", wall + s(3), wall + s(10));
    view.apply(&Message::Control(disable).encode(), now + s(3), wall + s(3));
    assert_eq!(
        view.override_of("db", wall + s(9)),
        Some(OverrideMode::Disable)
    );
    assert_eq!(view.override_of("db", wall + s(10)), None, "ended");
}

/// An instance that joins later learns an override from any heartbeat that
/// relays it, and the view counts the control message it took.
#[test]
fn a_joiner_learns_an_override_from_a_heartbeat() {
    let (now, wall) = t0();
    let until = wall + Duration::from_secs(30);
    let mut joiner = ViewHarness::new("late", LIVE, MAX_OPEN);
    let beat = relay(
        "a",
        wall,
        vec![ov(OverrideMode::Disable, "ops", wall, until)],
    );
    joiner.apply(&beat.encode(), now, wall);
    assert_eq!(joiner.override_of("db", wall), Some(OverrideMode::Disable));
    assert_eq!(joiner.live_peers(now), 1, "the heartbeat counts as one");
}

/// With a fleet key, an unsigned or wrongly signed override changes nothing;
/// a signed one is taken; a signed one replayed past `live_after` is refused.
#[test]
fn with_a_key_only_a_fresh_signed_override_counts() {
    let (now, wall) = t0();
    let mut view = ViewHarness::new("me", LIVE, MAX_OPEN).signing_key(KEY, "ns");
    let force = Message::Control(ov(
        OverrideMode::ForceOpen,
        "ops",
        wall,
        wall + Duration::from_secs(60),
    ));
    view.apply(&force.encode(), now, wall);
    view.apply(
        &force.encode_signed(b"another key, 16 bytes+", "ns"),
        now,
        wall,
    );
    assert_eq!(view.override_of("db", wall), None);
    assert_eq!((view.stats().unsigned, view.stats().bad_signature), (1, 1));
    let late = wall + LIVE + Duration::from_secs(1);
    view.apply(&force.encode_signed(KEY, "ns"), now, late);
    assert_eq!(view.override_of("db", late), None);
    assert_eq!(view.stats().replayed, 1);
    view.apply(&force.encode_signed(KEY, "ns"), now, wall);
    assert_eq!(view.override_of("db", wall), Some(OverrideMode::ForceOpen));
}

/// An override of the longest duration (`MAX_OVERRIDE`) from an issuer whose
/// clock runs a little ahead (within `max_skew`, 1 s) is taken: its end may be
/// as far past `MAX_OVERRIDE` from the receiver's clock as its issue stamp may
/// be ahead. One that ends further still is refused.
#[test]
fn an_override_of_max_override_from_a_clock_a_little_ahead_is_taken() {
    let (now, wall) = t0();
    let ms = Duration::from_millis;
    let mut view = ViewHarness::new("me", LIVE, MAX_OPEN);
    let ahead = wall + ms(10);
    let longest = ov(OverrideMode::ForceOpen, "ops", ahead, ahead + MAX_OVERRIDE);
    view.apply(&Message::Control(longest).encode(), now, wall);
    assert_eq!(view.override_of("db", wall), Some(OverrideMode::ForceOpen));
    assert_eq!(view.stats().deadline_too_far, 0);
    let past_skew = wall + MAX_OVERRIDE + ms(1_001);
    let too_far = ov(OverrideMode::Disable, "ops", ahead + ms(1), past_skew);
    view.apply(&Message::Control(too_far).encode(), now, wall);
    assert_eq!(view.override_of("db", wall), Some(OverrideMode::ForceOpen));
    assert_eq!(view.stats().deadline_too_far, 1);
}

/// An override lasts at most `MAX_OVERRIDE` from its issue stamp, whatever
/// the receiver's skew: one set huge (to take any stamp) stretches none for
/// a century, and a long one stamped late is refused too.
#[test]
fn no_skew_stretches_an_override_past_max_override() {
    let (now, wall) = t0();
    let mut view = ViewHarness::new("me", LIVE, MAX_OPEN).max_skew(Duration::MAX);
    let century = Duration::from_secs(100 * 365 * 24 * 3600);
    let forever = ov(OverrideMode::ForceOpen, "ops", wall, wall + century);
    view.apply(&Message::Control(forever).encode(), now, wall);
    let two_days = ov(
        OverrideMode::ForceOpen,
        "ops",
        wall,
        wall + 2 * MAX_OVERRIDE,
    );
    view.apply(&Message::Control(two_days).encode(), now, wall);
    assert_eq!(view.override_of("db", wall), None);
    assert_eq!(view.stats().deadline_too_far, 2);
    let longest = ov(OverrideMode::ForceOpen, "ops", wall, wall + MAX_OVERRIDE);
    view.apply(&Message::Control(longest).encode(), now, wall);
    assert_eq!(view.override_of("db", wall), Some(OverrideMode::ForceOpen));
}

/// A duration of zero or over a day, or an empty key, is refused by name.
#[test]
fn a_bad_override_is_refused_by_name() {
    let fleet = offline();
    let field = |r: Result<(), FleetError>| match r {
        Err(FleetError::Config { field, .. }) => field,
        other => panic!("{other:?}"),
    };
    assert_eq!(field(fleet.force_open("db", Duration::ZERO)), "duration");
    assert_eq!(
        field(fleet.disable("db", Duration::from_secs(90_000))),
        "duration"
    );
    assert_eq!(field(fleet.release("")), "key");
    assert_eq!(
        field(fleet.force_open("d\u{1}b", Duration::from_secs(60))),
        "key"
    );
    // Redis unreachable: still in force here at once.
    fleet.force_open("db", Duration::from_secs(60)).unwrap();
    assert_eq!(fleet.override_of("db"), Some(OverrideMode::ForceOpen));
}

/// An override this instance has no room for is refused as such, not taken
/// quietly; a key that holds one takes the next, or its release, in its place.
#[test]
fn an_override_without_room_is_refused_as_full() {
    let fleet = offline();
    let minute = Duration::from_secs(60);
    for i in 0..MAX_OVERRIDES {
        fleet.force_open(&format!("k{i}"), minute).unwrap();
    }
    let full = fleet.force_open("payments", minute);
    assert!(matches!(full, Err(FleetError::OverridesFull)), "{full:?}");
    assert_eq!(fleet.override_of("payments"), None);
    fleet.release("k0").unwrap();
    assert_eq!(fleet.override_of("k0"), None);
    fleet.disable("k0", minute).unwrap();
    assert_eq!(fleet.override_of("k0"), Some(OverrideMode::Disable));
}

/// Forced open from one instance, every instance's breaker is ForcedOpen
/// within a second; released, every one is Closed and trips again on its own
/// policy; signed throughout.
#[test]
fn force_open_and_release_reach_every_instance() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start();
    let ns = namespace("control-force");
    let fleets: Vec<Fleet> = ["a", "b", "c"]
        .iter()
        .map(|id| Fleet::start(config(&redis, &ns, id).signing_key(KEY)).unwrap())
        .collect();
    let breakers: Vec<_> = fleets
        .iter()
        .map(|f| f.breaker("db", builder()).unwrap())
        .collect();
    for f in &fleets {
        wait_for("peers live", Duration::from_secs(5), || {
            f.view().live_peers() == 2
        });
    }
    fleets[0].force_open("db", Duration::from_secs(60)).unwrap();
    for b in &breakers {
        wait_for("forced open", Duration::from_secs(5), || {
            b.state() == State::ForcedOpen
        });
        assert!(b.try_acquire().is_err());
    }
    fleets[1].release("db").unwrap();
    for b in &breakers {
        wait_for("released", Duration::from_secs(5), || {
            b.state() == State::Closed
        });
    }
    // Its own policy decides again: one failure trips it.
    let _ = breakers[2].call(|| Err::<(), _>("down"));
    assert_eq!(breakers[2].state(), State::Open);
    assert_eq!(
        breakers[0].state(),
        State::Closed,
        "one report is no quorum"
    );
}

/// With `live_after` over 12 h (the config takes up to a day), a release still
/// reaches the peers: it lingers at least twice `live_after`, but never past
/// `MAX_OVERRIDE` from its issue, the furthest end a receiver takes (past it,
/// every peer refused it, and the override held there until its own end).
#[test]
fn a_release_reaches_peers_with_a_long_live_after() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start();
    let ns = namespace("control-long-live");
    let long = Duration::from_secs(13 * 3600);
    let a = Fleet::start(config(&redis, &ns, "a").live_after(long)).unwrap();
    let b = Fleet::start(config(&redis, &ns, "b").live_after(long)).unwrap();
    let db_b = b.breaker("db", builder()).unwrap();
    wait_for("peers live", Duration::from_secs(5), || {
        a.view().live_peers() == 1 && b.view().live_peers() == 1
    });
    a.force_open("db", Duration::from_secs(600)).unwrap();
    wait_for("forced open at b", Duration::from_secs(5), || {
        db_b.state() == State::ForcedOpen
    });
    a.release("db").unwrap();
    wait_for("released at b", Duration::from_secs(5), || {
        db_b.state() == State::Closed
    });
    assert_eq!(b.override_of("db"), None);
    assert_eq!(b.view().stats().deadline_too_far, 0);
}

/// An instance that joins while a disable is in force starts its breaker
/// Disabled, from the heartbeats; at the deadline every instance's breaker is
/// Closed again.
#[test]
fn a_joiner_learns_a_disable_and_it_ends_at_its_deadline() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start();
    let ns = namespace("control-join");
    let a = Fleet::start(config(&redis, &ns, "a")).unwrap();
    let db_a = a.breaker("db", builder()).unwrap();
    let b = Fleet::start(config(&redis, &ns, "b")).unwrap();
    let db_b = b.breaker("db", builder()).unwrap();
    wait_for("b live at a", Duration::from_secs(5), || {
        a.view().live_peers() == 1
    });
    // Long enough for a loaded machine to start `late` within it.
    a.disable("db", Duration::from_secs(6)).unwrap();
    wait_for("disabled at b", Duration::from_secs(5), || {
        db_b.state() == State::Disabled
    });
    let late = Fleet::start(config(&redis, &ns, "late")).unwrap();
    let db_late = late.breaker("db", builder()).unwrap();
    assert_eq!(late.override_of("db"), Some(OverrideMode::Disable));
    assert_eq!(db_late.state(), State::Disabled, "from the picture");
    let _ = db_late.call(|| Err::<(), _>("down"));
    assert_eq!(db_late.state(), State::Disabled, "nothing trips");
    for db in [&db_a, &db_b, &db_late] {
        wait_for("ended", Duration::from_secs(12), || {
            db.state() == State::Closed
        });
    }
}

/// An override learned from a peer's message ends here at its deadline, not at
/// this instance's next heartbeat, though it changes no breaker when it
/// arrives (a shorter one of the mode in force): the subscriber wakes the
/// publisher, whose plan was the longer one's end. Heartbeats every 30 s, so
/// none comes between.
#[test]
fn a_shorter_override_learned_from_a_peer_ends_at_its_deadline() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start();
    let ns = namespace("control-wake");
    let slow = |id| {
        let config = config(&redis, &ns, id).heartbeat_every(Duration::from_secs(30));
        Fleet::start(config.live_after(Duration::from_secs(60))).unwrap()
    };
    let (a, b) = (slow("a"), slow("b"));
    let db_b = b.breaker("db", builder()).unwrap();
    wait_for("b live at a", Duration::from_secs(5), || {
        a.view().live_peers() == 1
    });
    wait_for("a live at b", Duration::from_secs(5), || {
        b.view().live_peers() == 1
    });
    a.disable("db", Duration::from_secs(60)).unwrap();
    wait_for("disabled at b", Duration::from_secs(5), || {
        db_b.state() == State::Disabled
    });
    a.disable("db", Duration::from_secs(3)).unwrap();
    wait_for("ended at b", Duration::from_secs(10), || {
        db_b.state() == State::Closed
    });
}

/// A registry key made while an override is in force (here after the override
/// took the old one: a key evicted, removed, or never used before) starts as
/// the override says, through the fleet's initial-state hook; the release
/// resets it like any other. Redis unreachable: the override is in force here
/// at once.
#[test]
fn a_registry_key_made_during_an_override_starts_as_it_says() {
    let fleet = offline();
    let registry = hooked_registry(&fleet);
    for (mode, state) in [
        (OverrideMode::ForceOpen, State::ForcedOpen),
        (OverrideMode::Disable, State::Disabled),
    ] {
        issue(&fleet, "db", mode, Duration::from_secs(60)).unwrap();
        assert_eq!(
            registry.get("db").state(),
            state,
            "{mode:?}: the key it took"
        );
        registry.remove("db");
        assert_eq!(
            registry.get("db").state(),
            state,
            "{mode:?}: a key made after"
        );
        assert_eq!(registry.get("cache").state(), State::Closed, "another key");
        fleet.release("db").unwrap();
        assert_eq!(
            registry.get("db").state(),
            State::Closed,
            "{mode:?} released"
        );
    }
}

/// An override's end acts on the keys a registry holds only: a key removed
/// meanwhile is not created again to be reset, and a capped registry counts no
/// overflow for it (the override's start, which creates the key, counts one
/// where the key finds no place).
#[test]
fn an_overrides_end_creates_no_registry_key() {
    let fleet = offline();
    let registry = |max_keys| -> Arc<Registry<String>> {
        let registry = Registry::builder(builder())
            .max_keys(max_keys)
            .initial_state(fleet.initial_state());
        Arc::new(registry.build().unwrap())
    };
    let open = registry(100);
    let capped = registry(1);
    fleet.attach_registry(&open);
    fleet.attach_registry(&capped);
    let _local = capped.get("local");
    fleet.force_open("db", Duration::from_secs(60)).unwrap();
    assert_eq!((open.len(), capped.overflowed()), (1, 1), "the start");
    open.remove("db");
    fleet.release("db").unwrap();
    assert_eq!((open.len(), capped.overflowed()), (0, 1), "the end");
    assert_eq!(open.get("db").state(), State::Closed);
}

/// A fleet dropped while its overrides hold breakers (a reconfiguration, the
/// fleet's part shut down alone) ends them here: the breakers, the caller's,
/// outlive the fleet, and no pass of its would end them later. A breaker
/// attached or built by the fleet, and a registry's key, are Closed again once
/// the drop returns; a breaker an operator forced open here, no override's,
/// stays so.
#[test]
fn dropping_the_fleet_ends_the_overrides_it_applied_here() {
    let fleet = offline();
    let registry = hooked_registry(&fleet);
    let db = fleet.breaker("db", builder()).unwrap();
    let local = fleet.breaker("local", builder()).unwrap();
    fleet.force_open("db", Duration::from_secs(60)).unwrap();
    fleet.disable("cache", Duration::from_secs(60)).unwrap();
    local.force_open();
    assert_eq!(db.state(), State::ForcedOpen);
    assert_eq!(registry.get("cache").state(), State::Disabled);
    drop(fleet);
    assert_eq!(db.state(), State::Closed, "the breaker the fleet built");
    assert_eq!(
        registry.get("db").state(),
        State::Closed,
        "a registry's key"
    );
    assert_eq!(registry.get("cache").state(), State::Closed, "disabled");
    assert_eq!(local.state(), State::ForcedOpen, "an operator's, here");
}

/// Two fleets in one process share a registry and a breaker, and each holds
/// an override of the key on them. Dropping one leaves them to the other: as
/// its override says (forced open still; a breaker the dropped fleet forced
/// open under the other's Disable is disabled again), until its release.
#[test]
fn dropping_a_fleet_leaves_shared_breakers_to_a_live_fleet_holding_their_override() {
    let registry: Arc<Registry<String>> = Arc::new(Registry::builder(builder()).build().unwrap());
    let (a, b) = (offline(), offline());
    let db = Arc::new(builder().build().unwrap());
    let cache = Arc::new(builder().build().unwrap());
    for fleet in [&a, &b] {
        fleet.attach_registry(&registry);
        fleet.attach("db", &db);
        fleet.attach("cache", &cache);
    }
    b.force_open("db", Duration::from_secs(600)).unwrap();
    a.force_open("db", Duration::from_secs(600)).unwrap();
    b.disable("cache", Duration::from_secs(600)).unwrap();
    a.force_open("cache", Duration::from_secs(600)).unwrap();
    assert_eq!(cache.state(), State::ForcedOpen, "a's, applied last");
    drop(a);
    assert_eq!(db.state(), State::ForcedOpen, "b's force-open");
    assert_eq!(
        registry.get("db").state(),
        State::ForcedOpen,
        "b's, in the registry"
    );
    assert_eq!(cache.state(), State::Disabled, "b's disable");
    assert_eq!(registry.get("cache").state(), State::Disabled);
    b.release("db").unwrap();
    b.release("cache").unwrap();
    assert_eq!(db.state(), State::Closed, "b's release");
    assert_eq!(registry.get("db").state(), State::Closed);
    assert_eq!(cache.state(), State::Closed);
}

/// A reconfiguration: fleet `b` replaces fleet `a` on the same namespace and
/// the same registry while an override `a` issued holds `db` fleet-wide. `b`
/// learns it from Redis and applies it as the registry is attached; dropping
/// `a` then leaves `db` forced open, as `b` says, until `b` releases it.
#[test]
fn a_fleet_replaced_in_a_reconfiguration_leaves_the_override_in_force() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start();
    let ns = namespace("reconfigure");
    let registry: Arc<Registry<String>> = Arc::new(Registry::builder(builder()).build().unwrap());
    let a = Fleet::start(config(&redis, &ns, "a")).unwrap();
    a.attach_registry(&registry);
    a.force_open("db", Duration::from_secs(600)).unwrap();
    let b = Fleet::start(config(&redis, &ns, "b")).unwrap();
    wait_for("b learns the override", Duration::from_secs(5), || {
        b.override_of("db") == Some(OverrideMode::ForceOpen)
    });
    b.attach_registry(&registry);
    drop(a);
    assert_eq!(registry.get("db").state(), State::ForcedOpen, "b holds it");
    b.release("db").unwrap();
    assert_eq!(registry.get("db").state(), State::Closed, "b's release");
}

/// A quorum opened `db`, its own probe closed it while the peers' reports
/// still stand (the very case `applied` exists for). An operator then forces
/// `db` open fleet-wide and releases it: the release must leave `db` Closed
/// (the reports were already applied and recovered from), as before the
/// override.
#[test]
fn a_release_does_not_reopen_a_breaker_on_reports_it_recovered_from() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start();
    let ns = namespace("recovered-reports");
    let me = Fleet::start(config(&redis, &ns, "me").live_after(Duration::from_secs(10))).unwrap();
    assert!(me.wait_synced(Duration::from_secs(10)));
    let clock = ManualClock::new();
    let db = me.breaker("db", builder().clock(clock.clone())).unwrap();
    let until = SystemTime::now() + Duration::from_secs(60);
    let (mut p, mut q) = (Peer::new(&redis, &ns, "p"), Peer::new(&redis, &ns, "q"));
    p.heartbeat(&[("db", until, 1)]);
    q.heartbeat(&[("db", until, 1)]);
    wait_for("the quorum opens db", Duration::from_secs(10), || {
        db.state() == State::Open && me.view().stats().quorum_opens >= 1
    });
    clock.advance(db.metrics().retry_after.unwrap() + Duration::from_millis(1));
    db.try_acquire().expect("a probe").success();
    assert_eq!(db.state(), State::Closed, "closed by its own probe");
    // The same reports again: still Closed (the reports a quorum was applied
    // from do not open a breaker twice).
    p.heartbeat(&[("db", until, 1)]);
    q.heartbeat(&[("db", until, 1)]);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        db.state(),
        State::Closed,
        "the same reports do not reopen it"
    );
    me.force_open("db", Duration::from_secs(60)).unwrap();
    assert_eq!(db.state(), State::ForcedOpen);
    me.release("db").unwrap();
    assert_eq!(
        db.state(),
        State::Closed,
        "the release reopened db on reports it had recovered from; stats {:?}",
        me.view().stats()
    );
}

/// An override's end creates no registry key even where a quorum for it
/// stands (see `an_overrides_end_creates_no_registry_key`): the quorum opens
/// the key when it is next used, through `initial_state`.
#[test]
fn an_overrides_end_creates_no_registry_key_where_a_quorum_stands() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start();
    let ns = namespace("end-under-quorum");
    let me = Fleet::start(config(&redis, &ns, "me").live_after(Duration::from_secs(10))).unwrap();
    assert!(me.wait_synced(Duration::from_secs(10)));
    let registry: Arc<Registry<String>> = Arc::new(
        Registry::builder(builder())
            .max_keys(100)
            .initial_state(me.initial_state())
            .build()
            .unwrap(),
    );
    me.attach_registry(&registry);
    let until = SystemTime::now() + Duration::from_secs(60);
    let (mut p, mut q) = (Peer::new(&redis, &ns, "p"), Peer::new(&redis, &ns, "q"));
    p.heartbeat(&[("db", until, 1)]);
    q.heartbeat(&[("db", until, 1)]);
    wait_for("the quorum opens db", Duration::from_secs(10), || {
        registry
            .find("db")
            .is_some_and(|b| b.state() == State::Open)
    });
    me.force_open("db", Duration::from_secs(60)).unwrap();
    registry.remove("db");
    assert_eq!(registry.len(), 0);
    me.release("db").unwrap();
    assert_eq!(
        registry.len(),
        0,
        "the release created db in the registry (state {:?})",
        registry.find("db").map(|b| b.state())
    );
}

/// A release resets only what its override set: a breaker the fleet disabled
/// and an operator then forced open here stays forced open; one still disabled
/// is reset.
#[test]
fn a_release_leaves_what_an_operator_set_since() {
    let fleet = offline();
    let db = fleet.breaker("db", builder()).unwrap();
    let cache = fleet.breaker("cache", builder()).unwrap();
    for key in ["db", "cache"] {
        fleet.disable(key, Duration::from_secs(60)).unwrap();
    }
    assert_eq!(
        (db.state(), cache.state()),
        (State::Disabled, State::Disabled)
    );
    db.force_open(); // an operator, on this instance
    for key in ["db", "cache"] {
        fleet.release(key).unwrap();
    }
    assert_eq!(
        db.state(),
        State::ForcedOpen,
        "the operator's, not the override's"
    );
    assert_eq!(cache.state(), State::Closed, "the override's");
    // The same state an operator set before the override cannot be told from
    // the override's (as `Fleet::release` says): reset too.
    let queue = fleet.breaker("queue", builder()).unwrap();
    queue.force_open();
    fleet.force_open("queue", Duration::from_secs(60)).unwrap();
    fleet.release("queue").unwrap();
    assert_eq!(queue.state(), State::Closed);
}

/// An override and its release take effect here before they return, and stay:
/// each wakes the publisher, whose own pass over the overrides may take the
/// change first (it used to apply it after the call returned, and a release
/// it took could land before the override it ended, leaving the breaker
/// disabled for good).
#[test]
fn an_override_and_its_release_are_in_effect_when_they_return() {
    let fleet = offline();
    let keys = ["a", "b", "c", "d"];
    let breakers: Vec<_> = keys
        .iter()
        .map(|key| fleet.breaker(key, builder()).unwrap())
        .collect();
    for round in 0..300 {
        for key in keys {
            fleet.disable(key, Duration::from_secs(60)).unwrap();
        }
        for (key, breaker) in keys.iter().zip(&breakers) {
            assert_eq!(breaker.state(), State::Disabled, "round {round}: {key}");
        }
        for key in keys {
            fleet.release(key).unwrap();
        }
        for (key, breaker) in keys.iter().zip(&breakers) {
            assert_eq!(
                breaker.state(),
                State::Closed,
                "round {round}: {key} released"
            );
        }
    }
}

/// A listener that issues an override while an override is being applied
/// (inside the pass that applies it, on the same thread) neither waits for
/// itself nor loses it: the pass it is inside applies it before returning.
#[test]
fn a_listener_may_issue_an_override_while_one_is_applied() {
    use std::sync::{Arc, OnceLock, mpsc};
    let fleet = Arc::new(offline());
    let handle: Arc<OnceLock<std::sync::Weak<Fleet>>> = Arc::new(OnceLock::new());
    let from_listener = handle.clone();
    // `Fleet::breaker` keeps the builder's own listener (and adds the fleet's).
    let db = fleet
        .breaker(
            "db",
            builder().on_transition(move |t| {
                if t.to == State::Disabled {
                    if let Some(fleet) = from_listener.get().and_then(std::sync::Weak::upgrade) {
                        fleet.disable("cache", Duration::from_secs(60)).unwrap();
                    }
                }
            }),
        )
        .unwrap();
    let cache = fleet.breaker("cache", builder()).unwrap();
    handle.set(Arc::downgrade(&fleet)).unwrap();
    let (done, returned) = mpsc::channel();
    let issuer = fleet.clone();
    std::thread::spawn(move || {
        issuer.disable("db", Duration::from_secs(60)).unwrap();
        done.send(()).unwrap();
    });
    returned
        .recv_timeout(Duration::from_secs(10))
        .expect("the override returned");
    assert_eq!(db.state(), State::Disabled);
    assert_eq!(cache.state(), State::Disabled, "applied by the same pass");
}
