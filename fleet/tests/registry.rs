//! A `Registry` in a fleet: keys created on first use start from the fleet's
//! picture (the initial-state hook), and existing keys open by quorum; a key
//! without a place of its own at the `max_keys` cap is not opened (its lookup
//! goes to the overflow breaker every such key shares); and a key evicted and
//! created again publishes its new breaker's transitions, which start again at
//! generation 1. Fleets in one process, each with its own Redis clients, against
//! a real `redis-server`, or peers simulated by raw messages.

mod common;

use common::{
    Peer, Redis, builder, config, heartbeat_lists, namespace, redis_available, wait_for, within,
};
use cutout::{CircuitBreaker, ManualClock, Registry, State};
use cutout_fleet::{Fleet, FleetConfig};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

#[test]
fn registry_keys_start_from_the_picture_and_open_by_quorum() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start();
    let ns = namespace("registry");
    let fleet = |id: &str| {
        Fleet::start(
            FleetConfig::new(redis.url())
                .namespace(ns.clone())
                .instance_id(id)
                .heartbeat_every(Duration::from_millis(100))
                .live_after(Duration::from_secs(2)),
        )
        .expect("the fleet starts")
    };
    let (a, b, c) = (fleet("a"), fleet("b"), fleet("c"));
    let builder = || {
        CircuitBreaker::builder()
            .consecutive_failures(1)
            .open_duration(Duration::from_secs(30))
    };
    let registry: Arc<Registry<String>> = Arc::new(
        Registry::builder(builder())
            .on_transition(c.registry_listener())
            .initial_state(c.initial_state())
            .build()
            .expect("the registry builds"),
    );
    c.attach_registry(&registry);
    assert_eq!(registry.get("cache").state(), State::Closed);
    wait_for("peers live", Duration::from_secs(5), || {
        c.view().live_peers() == 2
    });

    let mut tripped = Vec::new(); // attached and Open for the whole test
    for (fleet, key) in [(&a, "db"), (&b, "db"), (&a, "cache"), (&b, "cache")] {
        let breaker = fleet.breaker(key, builder()).expect("builds");
        let _ = breaker.call(|| Err::<(), _>("down"));
        assert_eq!(breaker.state(), State::Open);
        tripped.push(breaker);
    }
    // An existing key opens by quorum, with no call.
    wait_for("cache opens", Duration::from_secs(2), || {
        registry.with("cache", |b| b.state() == State::Open)
    });
    // A key created now starts Open from the picture.
    wait_for("two reports of db", Duration::from_secs(2), || {
        c.view().open_reports("db").len() == 2
    });
    let db = registry.get("db");
    assert_eq!(db.state(), State::Open);
    assert!(db.try_acquire().is_err());
    // A key nobody reports starts Closed.
    assert_eq!(registry.get("search").state(), State::Closed);
}

/// `Fleet::attach_registry`: a key a quorum reports Open is opened, created first
/// if this instance has not used it yet. At `max_keys` (the one place held), the
/// registry routes a new key to its shared overflow breaker; opening that (as the
/// quorum once did) rejected every other key without a place, keys no peer
/// reported, for the reported cooldown. The key is skipped instead, and counted.
#[test]
fn a_quorum_for_one_key_does_not_open_the_registrys_overflow_breaker() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start();
    let ns = namespace("overflow");
    let (mut a, mut b) = (Peer::new(&redis, &ns, "a"), Peer::new(&redis, &ns, "b"));
    let fleet = Fleet::start(config(&redis, &ns, "me")).unwrap();
    assert!(fleet.wait_synced(Duration::from_secs(2)));
    let registry: Arc<Registry<String>> = Arc::new(
        Registry::builder(builder())
            .max_keys(1)
            .on_transition(fleet.registry_listener())
            .initial_state(fleet.initial_state())
            .build()
            .unwrap(),
    );
    fleet.attach_registry(&registry);
    // This instance's one key, in use (held): the registry's one place.
    let local = registry.get("local");
    assert_eq!(local.state(), State::Closed);
    assert!(
        registry.call("healthy", || Ok::<_, &str>(())).is_ok(),
        "sanity: a key without a place is admitted while nothing is reported"
    );
    // Two peers report `db` Open: a quorum for `db`, and for nothing else.
    let until = SystemTime::now() + Duration::from_secs(20);
    a.heartbeat(&[("db", until, 1)]);
    b.heartbeat(&[("db", until, 1)]);
    wait_for("the quorum for db, skipped", Duration::from_secs(2), || {
        fleet.view().stats().quorum_overflow_skipped == 1
    });
    assert_eq!(fleet.view().open_reports("db").len(), 2);
    assert_eq!(fleet.view().stats().quorum_opens, 0);
    assert_eq!(registry.overflow().map(|o| o.state()), Some(State::Closed));
    let admitted = registry.call("healthy", || Ok::<_, &str>(()));
    assert!(
        admitted.is_ok(),
        "no peer reports `healthy`, yet it is rejected ({:?}): the quorum for `db` \
         opened the overflow breaker that every key without a place shares",
        admitted.err().map(|e| e.to_string()),
    );
    // A key with a place of its own still opens: `local`, reported too.
    a.heartbeat(&[("db", until, 1), ("local", until, 1)]);
    b.heartbeat(&[("db", until, 1), ("local", until, 1)]);
    // The open is counted just after it is made: wait for both.
    wait_for("the quorum opens local", Duration::from_secs(2), || {
        local.state() == State::Open && fleet.view().stats().quorum_opens == 1
    });
    assert_eq!(registry.overflow().map(|o| o.state()), Some(State::Closed));
}

/// A breaker rebuilt under the same key starts again at generation 0: here a
/// registry's key trips (generation 1), probes and closes (generation 3), is
/// evicted idle and created again on its next call, which trips the new breaker
/// (generation 1). The publisher keeps each key's transitions in generation
/// order, and takes a breaker's first transition whatever the key's latest: the
/// new trip is in this instance's heartbeat and in the peer's view (were it
/// taken for a stale report, older than 3, neither would show it).
#[test]
fn a_key_evicted_and_created_again_publishes_its_new_breakers_trip() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start();
    let ns = namespace("rebuilt");
    let me = Fleet::start(config(&redis, &ns, "me")).unwrap();
    let peer = Fleet::start(config(&redis, &ns, "peer")).unwrap();
    let clock = ManualClock::new();
    let registry: Arc<Registry<String, ManualClock>> = Arc::new(
        Registry::builder(builder().clock(clock.clone()))
            .idle_resolution(Duration::from_millis(10))
            .on_transition(me.registry_listener())
            .build()
            .unwrap(),
    );
    let reported = |generation: u32| {
        peer.view()
            .open_reports("db")
            .iter()
            .any(|r| r.instance == "me" && r.generation == generation)
    };
    let _ = registry.call("db", || Err::<(), _>("down"));
    wait_for("the first trip is reported", Duration::from_secs(2), || {
        reported(1)
    });
    clock.advance(Duration::from_secs(31));
    registry.with("db", |b| b.try_acquire().expect("a probe").success());
    assert_eq!(registry.with("db", |b| b.state()), State::Closed);
    wait_for("the close is reported", Duration::from_secs(2), || {
        peer.view().open_reports("db").is_empty()
    });
    clock.advance(Duration::from_secs(60));
    assert_eq!(registry.evict_idle(Duration::from_secs(30)), 1, "evicted");
    assert_eq!(registry.len(), 0);
    // Created again on this call (generation 0), which trips it (generation 1).
    let _ = registry.call("db", || Err::<(), _>("down again"));
    assert_eq!(registry.with("db", |b| b.state()), State::Open);
    let shown = within(Duration::from_secs(2), || {
        reported(1) && heartbeat_lists(&redis, &ns, "me") == [("db".to_string(), 1)]
    });
    assert!(
        shown,
        "the new breaker's trip (generation 1) was dropped as older than the old \
         breaker's close (generation 3): me's heartbeat lists {:?}, the peer's view \
         of db {:?}",
        heartbeat_lists(&redis, &ns, "me"),
        peer.view().open_reports("db")
    );
    assert_eq!(me.view().stats().stale_dropped, 0);
}
