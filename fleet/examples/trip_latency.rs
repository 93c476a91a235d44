//! `cargo run --release -p cutout-fleet --example trip_latency [-- REDIS_URL]`: the
//! time from a trip on one instance to the open it causes on a peer, over
//! loopback. Starts a `redis-server` on a free port unless given a URL.
//!
//! Two fleets in one process, each with its own Redis clients: `a` trips its
//! breaker (three failed calls); `b` (quorum 1, so that one report is a quorum and
//! the path measured is the one a quorum's last report takes) watches its own
//! breaker's state. Both are reset between rounds.

use cutout::{CircuitBreaker, State};
use cutout_fleet::{Fleet, FleetConfig, Quorum};
use std::net::{TcpListener, TcpStream};
use std::num::NonZeroUsize;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut own = None;
    let url = match std::env::args().nth(1) {
        Some(url) => url,
        None => {
            let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
            let dir = std::env::temp_dir().join(format!("trip-latency-{}", std::process::id()));
            std::fs::create_dir_all(&dir)?;
            let child = Command::new("redis-server")
                .args([
                    "--port",
                    &port.to_string(),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                ])
                .arg("--dir")
                .arg(&dir)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()?;
            own = Some((child, dir));
            let deadline = Instant::now() + Duration::from_secs(10);
            while TcpStream::connect(("127.0.0.1", port)).is_err() {
                if Instant::now() > deadline {
                    return Err("redis-server did not listen".into());
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            format!("redis://127.0.0.1:{port}/")
        }
    };
    let config = |id: &str| {
        FleetConfig::new(url.clone())
            .namespace(format!("latency-{}", std::process::id()))
            .instance_id(id)
            .quorum(Quorum::AtLeast(NonZeroUsize::MIN))
            .heartbeat_every(Duration::from_millis(200))
            .live_after(Duration::from_secs(2))
    };
    let a = Fleet::start(config("a"))?;
    let b = Fleet::start(config("b"))?;
    let builder = || {
        CircuitBreaker::builder()
            .consecutive_failures(3)
            .open_duration(Duration::from_secs(30))
    };
    // Published, not attached: `a`'s quorum (of 1) must not reopen it from `b`'s
    // echo of the trip between rounds.
    let tripper = builder()
        .name("dep")
        .on_transition(a.listener("dep"))
        .build()?;
    let watcher = b.breaker("dep", builder())?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while b.view().live_peers() < 1 {
        if Instant::now() > deadline {
            return Err("the peers did not see each other".into());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let rounds = 500;
    let mut samples = Vec::with_capacity(rounds);
    for round in 0..rounds {
        let start = Instant::now();
        for _ in 0..3 {
            let _ = tripper.call(|| Err::<(), _>("down"));
        }
        while watcher.state() != State::Open {
            if start.elapsed() > Duration::from_secs(5) {
                return Err(format!(
                    "round {round}: the peer did not open within 5 s (tripper {}, view {:?}, {:?})",
                    tripper.state(),
                    b.view().open_reports("dep"),
                    b.view().stats()
                )
                .into());
            }
            std::hint::spin_loop();
        }
        samples.push(start.elapsed());
        tripper.reset();
        watcher.reset();
        // Let the close reach the peer before the next trip.
        let settle = Instant::now();
        while !b.view().open_reports("dep").is_empty() && settle.elapsed() < Duration::from_secs(5)
        {
            std::thread::sleep(Duration::from_micros(100));
        }
    }
    samples.sort();
    let pct = |p: f64| samples[((samples.len() - 1) as f64 * p).round() as usize];
    println!(
        "trip -> peer open over loopback, {rounds} rounds: p50 {:?}, p99 {:?}, max {:?}",
        pct(0.50),
        pct(0.99),
        pct(1.0)
    );
    drop((a, b));
    if let Some((mut child, dir)) = own {
        let _ = child.kill();
        let _ = child.wait();
        let _ = std::fs::remove_dir_all(dir);
    }
    Ok(())
}
