//! A `Registry` in a fleet: keys created on first use start from the fleet's
//! picture (the initial-state hook), and existing keys open by quorum. Three
//! fleets in one process, each with its own Redis clients, against a real
//! `redis-server`.

mod common;

use common::{Redis, namespace, redis_available, wait_for};
use cutout::{CircuitBreaker, Registry, State};
use cutout_fleet::{Fleet, FleetConfig};
use std::sync::Arc;
use std::time::Duration;

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
