//! `cargo run --release -p cutout-fleet --example scale -- [--instances N]
//! [--keys K] [--storm S] [--rounds R] [--url REDIS_URL]`: many fleet instances
//! (threads in one process, each with its own Redis connections) and many keys
//! on one Redis. Starts a `redis-server` on a free loopback port unless given a
//! URL. Defaults: 50 instances, 10,000 keys, a storm of 1,000 keys, 100 rounds.
//!
//! Each instance holds a registry with every key, attached to its fleet. It
//! measures:
//! - **trip to Open on all**: two instances trip a fresh key (the default
//!   quorum is two), and the time until every other instance's breaker for it
//!   is Open (p50, p99 over the rounds);
//! - **messages**: Redis `PUBLISH` calls (`INFO commandstats`) and the
//!   messages the instances' subscribers received, per second, in steady
//!   state and while a storm of keys trips on two instances at once;
//! - **memory**: the process's resident set (`VmRSS`) before the fleets
//!   start, after they start, and after every instance created every key,
//!   per instance.

use cutout::{CircuitBreaker, Reason, Registry, State};
use cutout_fleet::{Fleet, FleetConfig};
use std::collections::HashMap;
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

type Opens = Arc<Mutex<HashMap<String, Instant>>>;

struct Instance {
    fleet: Fleet,
    registry: Arc<Registry<String>>,
    /// Each key this instance's quorum opened, and when.
    opens: Opens,
}

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1)?.parse().ok())
        .unwrap_or(default)
}

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

/// A `redis-server` on a free loopback port, and its URL.
fn start_redis() -> Result<(Child, String), Box<dyn std::error::Error>> {
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let dir = std::env::temp_dir().join(format!("fleet-scale-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no", "--maxclients", "10000"])
        .arg("--dir")
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            return Err("redis-server did not listen".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok((child, format!("redis://127.0.0.1:{port}/")))
}

/// Redis's count of `PUBLISH` calls so far.
fn publishes(con: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(con)
        .unwrap_or_default();
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_publish:calls="))
        .and_then(|rest| rest.split(',').next()?.parse().ok())
        .unwrap_or(0)
}

/// Messages every instance's subscriber has received so far.
fn received(instances: &[Instance]) -> u64 {
    instances
        .iter()
        .map(|i| {
            let s = i.fleet.view().stats();
            s.accepted + s.own + s.out_of_order + s.not_live
        })
        .sum()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(i).copied().unwrap_or_default()
}

/// Waits up to `limit` until every instance but the first two has opened all
/// of `keys`; when the last did, if all did. Each instance's log is locked
/// briefly (its subscriber thread writes it), and polled every 5 ms.
fn wait_opened(instances: &[Instance], keys: &[String], limit: Duration) -> Option<Instant> {
    let deadline = Instant::now() + limit;
    let mut last: Option<Instant> = None;
    let mut next = 2;
    while next < instances.len() {
        let found: Option<Option<Instant>> = {
            let opens = instances[next].opens.lock().unwrap();
            keys.iter()
                .map(|k| opens.get(k).copied())
                .collect::<Option<Vec<Instant>>>()
                .map(|times| times.into_iter().max())
        };
        match found {
            Some(at) => {
                last = last.max(at);
                next += 1;
            }
            None if Instant::now() > deadline => return None,
            None => std::thread::sleep(Duration::from_millis(5)),
        }
    }
    last
}

fn trip(instance: &Instance, key: &str) {
    let _ = instance.registry.call(key, || Err::<(), _>("down"));
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (n, keys, storm, rounds) = (
        arg("--instances", 50).max(3),
        arg("--keys", 10_000),
        arg("--storm", 1_000),
        arg("--rounds", 100),
    );
    let storm = storm.min(keys.saturating_sub(rounds));
    let url_arg = std::env::args()
        .position(|a| a == "--url")
        .and_then(|i| std::env::args().nth(i + 1));
    let (mut own, url) = match url_arg {
        Some(url) => (None, url),
        None => {
            let (child, url) = start_redis()?;
            (Some(child), url)
        }
    };
    let mut con =
        redis::Client::open(url.as_str())?.get_connection_with_timeout(Duration::from_secs(5))?;
    println!("{n} instances, {keys} keys, a storm of {storm} keys, {rounds} rounds");
    let ns = format!("scale-{}", std::process::id());
    let rss0 = rss_kib();
    let started = Instant::now();
    let mut instances = Vec::with_capacity(n);
    for i in 0..n {
        let fleet = Fleet::start(
            FleetConfig::new(url.clone())
                .namespace(ns.clone())
                .instance_id(format!("i{i}"))
                .join_wait(Duration::from_secs(5)),
        )?;
        let opens: Opens = Arc::default();
        let log = opens.clone();
        let publish = fleet.registry_listener::<String>();
        let registry = Arc::new(
            Registry::builder(
                CircuitBreaker::builder()
                    .consecutive_failures(1)
                    .open_duration(Duration::from_secs(300)),
            )
            .max_keys(keys + 16)
            .on_transition(move |key: &String, t| {
                publish(key, t);
                if t.to == State::Open && t.reason == Reason::External {
                    log.lock().unwrap().insert(key.clone(), Instant::now());
                }
            })
            .initial_state(fleet.initial_state())
            .build()?,
        );
        fleet.attach_registry(&registry);
        instances.push(Instance {
            fleet,
            registry,
            opens,
        });
    }
    let rss1 = rss_kib();
    let names: Vec<String> = (0..keys).map(|k| format!("key-{k:05}")).collect();
    for i in &instances {
        for key in &names {
            let _ = i.registry.call(key, || Ok::<_, ()>(()));
        }
    }
    let rss2 = rss_kib();
    println!(
        "started in {:.1} s; every instance sees {} live peers: {}",
        started.elapsed().as_secs_f64(),
        n - 1,
        instances
            .iter()
            .all(|i| i.fleet.view().live_peers() == n - 1)
    );
    let per = |kib: u64| kib as f64 / 1024.0 / n as f64;
    println!(
        "memory (RSS): {:.2} MiB an instance for its fleet (threads, connections, view), \
         {:.2} MiB an instance for {keys} breakers in its registry",
        per(rss1.saturating_sub(rss0)),
        per(rss2.saturating_sub(rss1)),
    );

    // Steady state: heartbeats only.
    let window = Duration::from_secs(5);
    let (p0, r0, t0) = (publishes(&mut con), received(&instances), Instant::now());
    std::thread::sleep(window);
    let secs = t0.elapsed().as_secs_f64();
    let (p1, r1) = (publishes(&mut con), received(&instances));
    println!(
        "steady state: {:.0} PUBLISH/s, {:.0} messages received/s (all instances)",
        (p1 - p0) as f64 / secs,
        (r1 - r0) as f64 / secs
    );

    // Trip to Open on all: a fresh key a round, tripped on the first two.
    let mut samples = Vec::with_capacity(rounds);
    for key in names.iter().take(rounds) {
        trip(&instances[0], key);
        let tripped = Instant::now();
        trip(&instances[1], key);
        match wait_opened(
            &instances,
            std::slice::from_ref(key),
            Duration::from_secs(10),
        ) {
            Some(last) => samples.push(last.saturating_duration_since(tripped)),
            None => println!("{key}: not open on every instance within 10 s"),
        }
    }
    samples.sort();
    println!(
        "trip on two to Open on all {}: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms ({} rounds)",
        n - 2,
        percentile(&samples, 0.5).as_secs_f64() * 1e3,
        percentile(&samples, 0.99).as_secs_f64() * 1e3,
        samples.last().copied().unwrap_or_default().as_secs_f64() * 1e3,
        samples.len()
    );

    // A storm: `storm` keys trip on the first two instances at once.
    let burst: Vec<String> = names[rounds..rounds + storm].to_vec();
    let (p0, r0, t0) = (publishes(&mut con), received(&instances), Instant::now());
    std::thread::scope(|s| {
        for i in &instances[..2] {
            let burst = &burst;
            s.spawn(move || burst.iter().for_each(|k| trip(i, k)));
        }
    });
    let done = wait_opened(&instances, &burst, Duration::from_secs(120));
    let secs = t0.elapsed().as_secs_f64();
    let (p1, r1) = (publishes(&mut con), received(&instances));
    match done {
        Some(last) => println!(
            "storm of {storm} keys: Open on all {} in {:.0} ms; {:.0} PUBLISH/s, \
             {:.0} messages received/s, {} PUBLISH and {} received in all",
            n - 2,
            last.saturating_duration_since(t0).as_secs_f64() * 1e3,
            (p1 - p0) as f64 / secs,
            (r1 - r0) as f64 / secs,
            p1 - p0,
            r1 - r0
        ),
        None => println!("storm of {storm} keys: not open on every instance within 120 s"),
    }
    // Steady state with the storm's keys held Open (heartbeats list them).
    let (p0, r0, t0) = (publishes(&mut con), received(&instances), Instant::now());
    std::thread::sleep(window);
    let secs = t0.elapsed().as_secs_f64();
    let (p1, r1) = (publishes(&mut con), received(&instances));
    println!(
        "after the storm (keys held Open): {:.0} PUBLISH/s, {:.0} messages received/s, RSS {:.2} MiB an instance",
        (p1 - p0) as f64 / secs,
        (r1 - r0) as f64 / secs,
        per(rss_kib().saturating_sub(rss0)),
    );
    let total = |f: fn(&cutout_fleet::FleetStats) -> u64| -> u64 {
        instances.iter().map(|i| f(&i.fleet.view().stats())).sum()
    };
    println!(
        "publish queue drops: {}, Redis errors (reconnections): {}",
        total(|s| s.queue_dropped),
        total(|s| s.redis_errors)
    );
    drop(instances);
    if let Some(child) = own.as_mut() {
        let _ = child.kill();
        let _ = child.wait();
    }
    Ok(())
}
