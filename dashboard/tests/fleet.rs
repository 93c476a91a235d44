//! Fleet-wide controls through cutout-fleet, against a real redis-server (the
//! fleet crate's own helper starts it; without one the test skips, unless
//! `CUTOUT_FLEET_REQUIRE_REDIS` is set): two instances, the dashboard on the
//! first; force open and disable reach both, for the time asked; reset
//! releases the override everywhere and resets the local breaker.

mod common;
#[path = "../../fleet/tests/common/mod.rs"]
mod fleet_common;

use common::{get, request, serve, snapshot_until};
use cutout::{CircuitBreaker, State};
use cutout_dashboard::Source;
use cutout_fleet::{Fleet, OverrideMode};
use fleet_common::{Redis, builder, config, namespace, redis_available, wait_for};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// How long the other instance may take to hear of an override (polled).
const ARRIVE: Duration = Duration::from_secs(10);

async fn post(addr: SocketAddr, query: &str) -> u16 {
    let path = format!("/breakers/api/control?{query}");
    request(addr, "POST", &path, &[("sec-fetch-site", "same-origin")])
        .await
        .status
}

/// Waits (off the async workers) until `breaker` is in `state`.
fn until_state(what: &str, breaker: &CircuitBreaker, state: State) {
    tokio::task::block_in_place(|| wait_for(what, ARRIVE, || breaker.state() == state));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controls_act_on_every_instance_through_the_fleet() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start();
    let ns = namespace("dashboard-controls");
    let here = Arc::new(Fleet::start(config(&redis, &ns, "here")).unwrap());
    let there = Fleet::start(config(&redis, &ns, "there")).unwrap();
    let db_here = here.breaker("db", builder()).unwrap();
    let db_there = there.breaker("db", builder()).unwrap();
    let source = Source::new()
        .breaker("db", db_here.clone())
        .fleet(here.clone())
        .controls(true);
    let app = axum::Router::new().nest("/breakers", cutout_dashboard::router(source));
    let addr = serve(app).await;
    let page = get(addr, "/breakers/api/snapshot").await.json();
    assert_eq!(page["fleet"]["controls"], true);
    assert_eq!(page["fleet"]["override_default_s"], 600);
    assert!(page["breakers"][0]["fleet_override"].is_null());

    // A duration out of range, or unreadable, changes nothing anywhere.
    for bad in ["0", "86401", "ten"] {
        let status = post(addr, &format!("name=db&action=force_open&for_s={bad}")).await;
        assert_eq!(status, 400, "for_s={bad}");
    }
    assert_eq!(here.override_of("db"), None);
    assert_eq!(db_here.state(), State::Closed);

    // Force open: here at once, there when the message arrives; shown as the
    // fleet's override.
    assert_eq!(post(addr, "name=db&action=force_open&for_s=60").await, 204);
    assert_eq!(db_here.state(), State::ForcedOpen);
    assert_eq!(here.override_of("db"), Some(OverrideMode::ForceOpen));
    until_state("forced open there", &db_there, State::ForcedOpen);
    snapshot_until(addr, "/breakers/api/snapshot", |v| {
        v["breakers"][0]["fleet_override"] == "force_open"
    })
    .await;

    // Disable, for the default time; then reset releases it everywhere.
    assert_eq!(post(addr, "name=db&action=disable").await, 204);
    assert_eq!(db_here.state(), State::Disabled);
    until_state("disabled there", &db_there, State::Disabled);
    assert_eq!(post(addr, "name=db&action=reset").await, 204);
    assert_eq!(db_here.state(), State::Closed);
    assert_eq!(here.override_of("db"), None);
    until_state("released there", &db_there, State::Closed);
    snapshot_until(addr, "/breakers/api/snapshot", |v| {
        v["breakers"][0]["fleet_override"].is_null()
    })
    .await;

    // Reset also closes what no override did: this breaker's own trip.
    let _ = db_here.call(|| Err::<(), _>("down"));
    assert_eq!(db_here.state(), State::Open);
    assert_eq!(post(addr, "name=db&action=reset").await, 204);
    assert_eq!(db_here.state(), State::Closed);

    // The override lasts as long as asked: three seconds (room for a loaded
    // machine to answer and assert first), then the fleet ends it and resets
    // the breaker it set. (Not asserted there: the message may come after the
    // deadline on a loaded machine, and then sets nothing.)
    assert_eq!(post(addr, "name=db&action=force_open&for_s=3").await, 204);
    assert_eq!(db_here.state(), State::ForcedOpen);
    until_state("ended here", &db_here, State::Closed);
    assert_eq!(here.override_of("db"), None);
}

/// Reset resets the local breaker whatever opened it: also one whose name the
/// fleet cannot carry (over 200 bytes), which no fleet override can name, and
/// one with no override while the fleet's table of overrides is full. (Redis
/// unreachable: the fleet still takes controls here.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_resets_a_breaker_that_no_fleet_override_names() {
    let fleet = Fleet::start(
        cutout_fleet::FleetConfig::new("redis://127.0.0.1:9/").join_wait(Duration::ZERO),
    )
    .unwrap();
    for i in 0..cutout_fleet::MAX_OVERRIDES {
        fleet
            .force_open(&format!("other{i}"), Duration::from_secs(60))
            .unwrap();
    }
    let long = "k".repeat(cutout_fleet::MAX_NAME_BYTES + 1);
    let names = [long.as_str(), "db"];
    let mut source = Source::new().fleet(Arc::new(fleet)).controls(true);
    let mut breakers = Vec::new();
    for name in names {
        let breaker = Arc::new(CircuitBreaker::builder().build().unwrap());
        breaker.force_open();
        source = source.breaker(name, breaker.clone());
        breakers.push(breaker);
    }
    let app = axum::Router::new().nest("/breakers", cutout_dashboard::router(source));
    let addr = serve(app).await;
    for (name, breaker) in names.iter().zip(&breakers) {
        assert_eq!(post(addr, &format!("name={name}&action=reset")).await, 204);
        assert_eq!(breaker.state(), State::Closed);
    }
}
