//! The background threads' connections over a long life: a subscription whose
//! connection goes silent is replaced, a Redis slower than the subscriber's
//! poll is still subscribed to within `io_timeout`, and commands that fail on a
//! connection Redis accepted back off as a failed connection does, while a
//! connected instance opens no new connection. A loopback
//! TCP proxy ([`Proxy`]) in front of a real `redis-server` adds latency, or
//! makes the connections opened so far go silent (no FIN, no RST), as a NAT or
//! load balancer that dropped them would. Every wait is bounded.

mod common;

use common::{Peer, Redis, namespace, redis_available, within};
use cutout_fleet::{Fleet, FleetConfig};
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// A TCP proxy to 127.0.0.1:`upstream`: each chunk Redis sends is held
/// `delay`; [`freeze`](Proxy::freeze) makes every connection opened so far
/// silent for good (its sockets kept open, nothing forwarded), while new
/// connections work. Its threads end when it is dropped.
struct Proxy {
    port: u16,
    epoch: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl Proxy {
    fn start(upstream: u16, delay: Duration) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let epoch = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let graveyard: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let (e, s) = (epoch.clone(), stop.clone());
        thread::spawn(move || {
            // Relaxed: a flag; nothing else is read through it.
            while !s.load(Ordering::Relaxed) {
                let Ok((client, _)) = listener.accept() else {
                    // Non-blocking, so that a stop is seen: poll.
                    thread::sleep(Duration::from_millis(5));
                    continue;
                };
                client.set_nonblocking(false).unwrap();
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else {
                    continue;
                };
                // Relaxed: the epoch is read on its own.
                let born = e.load(Ordering::Relaxed);
                for (from, to, d) in [
                    (
                        client.try_clone().unwrap(),
                        server.try_clone().unwrap(),
                        Duration::ZERO,
                    ),
                    (server, client, delay),
                ] {
                    let (e, s, g) = (e.clone(), s.clone(), graveyard.clone());
                    thread::spawn(move || pump(from, to, d, born, &e, &s, &g));
                }
            }
        });
        Proxy { port, epoch, stop }
    }

    /// The URL of Redis through the proxy.
    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Every connection opened so far goes silent.
    fn freeze(&self) {
        // Relaxed: the epoch is read on its own.
        self.epoch.fetch_add(1, Ordering::Relaxed);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        // Relaxed: a flag; nothing else is read through it.
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Forwards `from` to `to`, each chunk held `delay`, until either side closes,
/// the proxy stops, or a freeze after `born` makes the connection silent.
fn pump(
    mut from: TcpStream,
    mut to: TcpStream,
    delay: Duration,
    born: u64,
    epoch: &AtomicU64,
    stop: &AtomicBool,
    graveyard: &Mutex<Vec<TcpStream>>,
) {
    from.set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let mut buf = [0u8; 65536];
    loop {
        // Relaxed: a flag and a counter, each read on its own.
        if stop.load(Ordering::Relaxed) {
            return;
        }
        if epoch.load(Ordering::Relaxed) > born {
            // Silent: both sockets stay open, nothing more is forwarded.
            graveyard.lock().unwrap().extend([from, to]);
            return;
        }
        match from.read(&mut buf) {
            Ok(0) => {
                let _ = to.shutdown(std::net::Shutdown::Write);
                return;
            }
            Ok(n) => {
                if !delay.is_zero() {
                    thread::sleep(delay);
                }
                if to.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return,
        }
    }
}

/// A simulated peer that heartbeats every 100 ms until dropped.
struct Beating(Arc<AtomicBool>);

impl Beating {
    fn start(redis: &Redis, ns: &str, id: &str) -> Beating {
        let stop = Arc::new(AtomicBool::new(false));
        let mut peer = Peer::new(redis, ns, id);
        let s = stop.clone();
        thread::spawn(move || {
            // Relaxed: a flag; nothing else is read through it.
            while !s.load(Ordering::Relaxed) {
                peer.heartbeat(&[]);
                thread::sleep(Duration::from_millis(100));
            }
        });
        Beating(stop)
    }
}

impl Drop for Beating {
    fn drop(&mut self) {
        // Relaxed: a flag; nothing else is read through it.
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Instance `me` of namespace `ns` through `url`: heartbeats every 100 ms,
/// peers live for 1 s, commands time out after 500 ms, reconnections from
/// 50 ms to 500 ms.
fn config(url: String, ns: &str) -> FleetConfig {
    FleetConfig::new(url)
        .namespace(ns.to_string())
        .instance_id("me")
        .heartbeat_every(Duration::from_millis(100))
        .live_after(Duration::from_secs(1))
        .io_timeout(Duration::from_millis(500))
        .reconnect(Duration::from_millis(50), Duration::from_millis(500))
        .join_wait(Duration::from_secs(2))
}

/// The connections open so far go silent (a NAT or load balancer dropped
/// them: no FIN, no RST). The publisher's next command times out and it
/// reconnects; the subscriber, which only reads, notices too (what this
/// instance publishes stops coming back on it for `live_after`, 1 s) and
/// subscribes again: the view hears its peer again.
#[test]
fn a_subscription_gone_silent_is_replaced() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start();
    let proxy = Proxy::start(redis.port, Duration::ZERO);
    let ns = namespace("silent");
    let _peer = Beating::start(&redis, &ns, "p");
    let me = Fleet::start(config(proxy.url(), &ns)).unwrap();
    assert!(
        within(Duration::from_secs(5), || me.view().live_peers() == 1),
        "the peer is live before"
    );
    // Messages flow on the subscription: its own heartbeats come back.
    assert!(
        within(Duration::from_secs(5), || me.view().stats().own >= 3),
        "the subscription delivers before"
    );
    proxy.freeze();
    // Real time is the subject: past live_after, and several io_timeouts.
    thread::sleep(Duration::from_secs(3));
    // The publisher did reconnect: its heartbeat key (TTL 1 s) is written again.
    let mut con = redis.connect();
    let hb: Option<Vec<u8>> = redis::cmd("GET")
        .arg(format!("{ns}:hb:me"))
        .query(&mut con)
        .unwrap();
    assert!(hb.is_some(), "the publisher reconnected");
    let back = within(Duration::from_secs(10), || me.view().live_peers() == 1);
    assert!(
        back,
        "the subscriber never noticed its silent connection: live peers {}, stats {:?}",
        me.view().live_peers(),
        me.view().stats()
    );
}

/// A Redis 50 ms away, under the subscriber's 100 ms poll, is subscribed to.
#[test]
fn a_redis_50ms_away_is_subscribed_to() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start();
    let proxy = Proxy::start(redis.port, Duration::from_millis(50));
    let ns = namespace("near");
    let me = Fleet::start(
        config(proxy.url(), &ns)
            .io_timeout(Duration::from_secs(2))
            .join_wait(Duration::ZERO),
    )
    .unwrap();
    assert!(me.wait_synced(Duration::from_secs(10)));
}

/// A Redis 150 ms away (a WAN link, a loaded server), with `io_timeout` set to
/// 2 s for it: "the timeout of connecting and of each Redis command". The
/// subscriber's SUBSCRIBE must be given that long too.
#[test]
fn a_redis_150ms_away_is_subscribed_to_within_io_timeout() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start();
    let proxy = Proxy::start(redis.port, Duration::from_millis(150));
    let ns = namespace("slow");
    let _peer = Beating::start(&redis, &ns, "p");
    let me = Fleet::start(
        config(proxy.url(), &ns)
            .io_timeout(Duration::from_secs(2))
            .join_wait(Duration::ZERO),
    )
    .unwrap();
    let synced = me.wait_synced(Duration::from_secs(10));
    let live = within(Duration::from_secs(5), || me.view().live_peers() == 1);
    assert!(
        synced && live,
        "synced {synced}, peer live {live}, stats {:?}",
        me.view().stats()
    );
}

/// `INFO stats`' total_connections_received.
fn connections(con: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("stats").query(con).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("total_connections_received:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Redis takes connections but refuses the heartbeat's SET (here: at its
/// `maxmemory`, `noeviction`; a replica's READONLY or an ACL without SET
/// does the same). "The reconnection backoff: from `min`, doubling (with
/// jitter) to `max`": with 100 ms to 5 s, at most about 6 reconnections in
/// 3 s, not one every 50 to 100 ms for as long as it lasts.
#[test]
fn commands_that_fail_on_a_live_connection_back_off() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start();
    let ns = namespace("oom");
    let me = Fleet::start(
        config(redis.url(), &ns)
            .heartbeat_every(Duration::from_millis(500))
            .reconnect(Duration::from_millis(100), Duration::from_secs(5)),
    )
    .unwrap();
    assert!(me.wait_synced(Duration::from_secs(5)));
    let mut con = redis.connect();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg("1")
        .query(&mut con)
        .unwrap();
    thread::sleep(Duration::from_millis(500)); // the first failure
    let (c0, e0) = (connections(&mut con), me.view().stats().redis_errors);
    thread::sleep(Duration::from_secs(3)); // real time is the subject
    let (c1, e1) = (connections(&mut con), me.view().stats().redis_errors);
    assert!(
        c1 - c0 <= 8,
        "{} connections and {} redis errors in 3 s",
        c1 - c0,
        e1 - e0
    );
}

/// An instance keeps its two connections while Redis takes its commands:
/// heartbeats every 100 ms for a second open no new one (nor does the
/// subscriber's poll, whose reads time out every 100 ms).
#[test]
fn a_connected_instance_keeps_its_connections() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start();
    let ns = namespace("keeps-connections");
    let me = Fleet::start(config(redis.url(), &ns)).unwrap();
    assert!(me.wait_synced(Duration::from_secs(5)));
    let mut con = redis.connect();
    // The publisher's first connection, if it has not connected yet.
    thread::sleep(Duration::from_millis(200));
    let c0 = connections(&mut con);
    thread::sleep(Duration::from_secs(1)); // real time is the subject
    let c1 = connections(&mut con);
    assert_eq!(c1 - c0, 0, "stats {:?}", me.view().stats());
}
