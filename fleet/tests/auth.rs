//! Redis authentication and signed fleets, against a real `redis-server` on a free
//! loopback port started with a password (`--requirepass`) and an ACL user
//! limited to one namespace's keys and channel.
//!
//! Real time: the fleet's messages travel through Redis. Every wait is bounded.

mod common;

use common::{Peer, Redis, builder, namespace, redis_available, wait_for};
use cutout::State;
use cutout_fleet::{Fleet, FleetConfig};
use std::time::{Duration, SystemTime};

const KEY: &[u8] = b"the fleet's shared key, 32 bytes";

/// Instance `id` of namespace `ns` on `url`: heartbeats every 100 ms, peers live
/// for 2 s, a join wait of 2 s, quick reconnection.
fn config(url: String, ns: &str, id: &str) -> FleetConfig {
    FleetConfig::new(url)
        .namespace(ns.to_string())
        .instance_id(id)
        .heartbeat_every(Duration::from_millis(100))
        .live_after(Duration::from_secs(2))
        .join_wait(Duration::from_secs(2))
        .io_timeout(Duration::from_millis(500))
        .reconnect(Duration::from_millis(20), Duration::from_millis(100))
}

#[test]
fn a_fleet_authenticates_with_a_password_or_an_acl_user() {
    if !redis_available() {
        return;
    }
    let ns = namespace("auth");
    let redis = Redis::start_secured(&ns);
    let s = redis.secured().unwrap().clone();
    let port = redis.port;

    // Without credentials, or with a wrong password: no picture, errors counted.
    for config in [
        config(redis.url_without_auth(), &ns, "none"),
        config(redis.url_without_auth(), &ns, "wrong").redis_password("not-it"),
    ] {
        let fleet = Fleet::start(config.join_wait(Duration::ZERO)).unwrap();
        assert!(!fleet.wait_synced(Duration::from_millis(500)));
        assert!(fleet.view().stats().redis_errors > 0);
    }
    // The default user's password, in the URL or set apart; the ACL user, in
    // the URL or set apart: each reads the picture, and sees the others.
    let user_url = format!("redis://{}:{}@127.0.0.1:{port}/", s.user, s.user_password);
    let fleets: Vec<Fleet> = [
        config(redis.url(), &ns, "password-url"),
        config(redis.url_without_auth(), &ns, "password").redis_password(&s.password),
        config(user_url, &ns, "user-url"),
        config(redis.url_without_auth(), &ns, "user").redis_user(&s.user, &s.user_password),
    ]
    .into_iter()
    .map(|c| Fleet::start(c).unwrap())
    .collect();
    for fleet in &fleets {
        assert!(fleet.wait_synced(Duration::from_secs(2)), "{fleet:?}");
        wait_for("the three others are live", Duration::from_secs(5), || {
            fleet.view().live_peers() == 3
        });
    }
    // The ACL user may not write another namespace's keys: it publishes
    // nothing there, and counts the refusals.
    let other = config(redis.url_without_auth(), "elsewhere", "user")
        .redis_user(&s.user, &s.user_password)
        .join_wait(Duration::ZERO);
    let fleet = Fleet::start(other).unwrap();
    wait_for("refused", Duration::from_secs(5), || {
        fleet.view().stats().redis_errors >= 2
    });
    assert_eq!(fleet.view().stats().published, 0);
}

/// Three signed instances on the secured server: forged opens (unsigned, or
/// signed with another key) from two made-up peers open nothing and are
/// counted; two real instances' trips open the third.
#[test]
fn a_signed_fleet_opens_on_a_signed_quorum_only() {
    if !redis_available() {
        return;
    }
    let ns = namespace("signed");
    let redis = Redis::start_secured(&ns);
    let s = redis.secured().unwrap().clone();
    let signed = |id: &str| {
        let c = config(redis.url_without_auth(), &ns, id)
            .redis_user(&s.user, &s.user_password)
            .signing_key(KEY);
        Fleet::start(c).unwrap()
    };
    let (a, b, c) = (signed("a"), signed("b"), signed("c"));
    let breakers: Vec<_> = [&a, &b, &c]
        .iter()
        .map(|f| f.breaker("db", builder()).unwrap())
        .collect();
    for fleet in [&a, &b, &c] {
        wait_for("the two others are live", Duration::from_secs(5), || {
            fleet.view().live_peers() == 2
        });
    }

    // Forgers who can publish on the channel (the admin's password), without
    // the fleet's key.
    let until = SystemTime::now() + Duration::from_secs(20);
    let mut x = Peer::new(&redis, &ns, "x");
    let mut y = Peer::new(&redis, &ns, "y").signed(b"a key that is not the fleet's...");
    for forger in [&mut x, &mut y] {
        forger.heartbeat(&[("db", until, 1)]);
        forger.transition("db", State::Open, Some(until), 2);
    }
    wait_for("the forgeries are counted", Duration::from_secs(5), || {
        let s = c.view().stats();
        s.unsigned >= 2 && s.bad_signature >= 2
    });
    assert_eq!(c.view().live_peers(), 2, "no forger is a peer");
    assert_eq!(breakers[2].state(), State::Closed);

    // Two real trips: a signed quorum.
    for breaker in &breakers[..2] {
        let _ = breaker.call(|| Err::<(), _>("down"));
        assert_eq!(breaker.state(), State::Open);
    }
    wait_for("the quorum opens c", Duration::from_secs(5), || {
        breakers[2].state() == State::Open
    });
    let s = c.view().stats();
    assert_eq!((s.replayed, s.from_future), (0, 0), "{s:?}");
    assert!(s.accepted > 0, "signed messages were taken: {s:?}");
}
