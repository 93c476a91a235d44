//! One fleet instance driven over stdin, for the fleet's multi-process tests: a
//! breaker on one key, attached to a fleet. The test binary runs it in a child
//! process of its own (see `common::Node`), with its arguments in
//! `CUTOUT_FLEET_NODE`, one a line:
//!
//! ```text
//! --url redis://127.0.0.1:PORT/ --ns NS --id ID [--quorum K] [--key KEY]
//! [--hb-ms MS] [--live-ms MS] [--join-ms MS] [--open-ms MS]
//! ```
//! It prints `ready STATE SYNCED`, then answers each command with one line:
//! `fail N` (N failed calls: `done STATE MAX_CALL_US`), `call` (`admitted STATE` or
//! `rejected STATE`), `state`, `wait-open MS` (`open ELAPSED_MS` or `timeout
//! STATE`), `live N MS` (waits until exactly N peers are live: `live N` or `timeout N`), `stats`, `quit`.

use cutout::{CircuitBreaker, State};
use cutout_fleet::{Fleet, FleetConfig, Quorum};
use std::io::{BufRead, Write};
use std::num::NonZeroUsize;
use std::time::{Duration, Instant};

/// The instance, with `args` (flags and values, in pairs).
pub fn run(args: &[String]) {
    let mut url = String::from("redis://127.0.0.1:6379/");
    let (mut ns, mut id, mut key) = (
        String::from("test"),
        String::from("node"),
        String::from("dep"),
    );
    let (mut quorum, mut hb, mut live, mut join, mut open) =
        (2usize, 100u64, 1000u64, 1000u64, 5000u64);
    for pair in args.chunks(2) {
        let [flag, value] = pair else { break };
        let ms = || value.parse::<u64>().unwrap_or(0);
        match flag.as_str() {
            "--url" => url = value.clone(),
            "--ns" => ns = value.clone(),
            "--id" => id = value.clone(),
            "--key" => key = value.clone(),
            "--quorum" => quorum = value.parse().unwrap_or(2),
            "--hb-ms" => hb = ms(),
            "--live-ms" => live = ms(),
            "--join-ms" => join = ms(),
            "--open-ms" => open = ms(),
            _ => {}
        }
    }
    let config = FleetConfig::new(url)
        .namespace(ns)
        .instance_id(id)
        .quorum(Quorum::AtLeast(
            NonZeroUsize::new(quorum).unwrap_or(NonZeroUsize::MIN),
        ))
        .heartbeat_every(Duration::from_millis(hb))
        .live_after(Duration::from_millis(live))
        .join_wait(Duration::from_millis(join))
        .io_timeout(Duration::from_millis(500))
        .reconnect(Duration::from_millis(50), Duration::from_millis(400));
    let fleet = match Fleet::start(config) {
        Ok(f) => f,
        Err(e) => {
            println!("error {e}");
            return;
        }
    };
    let synced = fleet.wait_synced(Duration::ZERO);
    let builder = CircuitBreaker::builder()
        .consecutive_failures(3)
        .open_duration(Duration::from_millis(open));
    let breaker = match fleet.breaker(&key, builder) {
        Ok(b) => b,
        Err(e) => {
            println!("error {e}");
            return;
        }
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "ready {} {synced}", breaker.state());
    let _ = out.flush();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let words: Vec<&str> = line.split_whitespace().collect();
        let arg = |i: usize| {
            words
                .get(i)
                .and_then(|w| w.parse::<u64>().ok())
                .unwrap_or(0)
        };
        let answer = match words.first().copied() {
            Some("fail") => {
                for _ in 0..arg(1) {
                    let _ = breaker.call(|| Err::<(), _>("down"));
                }
                format!("done {}", breaker.state())
            }
            Some("call") => match breaker.call(|| Ok::<_, ()>(())) {
                Ok(()) => format!("admitted {}", breaker.state()),
                Err(_) => format!("rejected {}", breaker.state()),
            },
            Some("state") => breaker.state().to_string(),
            Some("wait-open") => {
                let start = Instant::now();
                let limit = Duration::from_millis(arg(1));
                loop {
                    if breaker.state() == State::Open {
                        break format!("open {}", start.elapsed().as_micros() as f64 / 1000.0);
                    }
                    if start.elapsed() >= limit {
                        break format!("timeout {}", breaker.state());
                    }
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
            Some("live") => {
                let start = Instant::now();
                let limit = Duration::from_millis(arg(2));
                loop {
                    let n = fleet.view().live_peers();
                    if n as u64 == arg(1) {
                        break format!("live {n}");
                    }
                    if start.elapsed() >= limit {
                        break format!("timeout {n}");
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
            Some("stats") => format!("{:?}", fleet.view().stats()),
            Some("quit") | None => break,
            Some(other) => format!("unknown {other}"),
        };
        let _ = writeln!(out, "{answer}");
        let _ = out.flush();
    }
}
