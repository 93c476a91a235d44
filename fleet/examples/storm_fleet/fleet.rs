//! The fleet run: the instances, their breakers and fleets, and the report.

use crate::sim::{Dependency, Scenario};
use crate::stats::Recorder;
use crate::worker::{self, Ctx, Timebase, TransitionLog, Worker};
use cutout::{CircuitBreaker, Reason, State};
use cutout_fleet::{Fleet, FleetConfig};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A `redis-server` this demo started (on a free loopback port, in a temporary
/// directory), stopped on drop.
pub struct OwnRedis {
    child: Child,
    dir: std::path::PathBuf,
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn start_redis() -> Result<(String, OwnRedis), String> {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free port: {e}"))?;
    let dir = std::env::temp_dir().join(format!("storm-redis-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .arg("--dir")
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| {
            format!(
                "storm_fleet needs redis-server (apt-get install redis-server) or --redis URL: {e}"
            )
        })?;
    let own = OwnRedis { child, dir };
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            return Err("redis-server did not listen within 10 s".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok((format!("redis://127.0.0.1:{port}/"), own))
}

/// One variant's instances: a breaker each, their transition logs, and (with
/// the fleet view) their fleets.
struct Instances {
    breakers: Vec<Arc<CircuitBreaker>>,
    logs: Vec<TransitionLog>,
    fleets: Vec<Fleet>,
}

fn instances(
    scenario: &Scenario,
    n: usize,
    start: Instant,
    redis: Option<&str>,
    namespace: &str,
) -> Result<Instances, String> {
    let mut out = Instances {
        breakers: Vec::new(),
        logs: Vec::new(),
        fleets: Vec::new(),
    };
    for i in 0..n {
        let log = TransitionLog::default();
        let logged = log.listener(Timebase::Real(start));
        let fleet = match redis {
            Some(url) => Some(
                Fleet::start(
                    FleetConfig::new(url)
                        .namespace(namespace)
                        .instance_id(format!("storm-{i}"))
                        .heartbeat_every(Duration::from_millis(250))
                        .live_after(Duration::from_secs(1)),
                )
                .map_err(|e| format!("fleet: {e}"))?,
            ),
            None => None,
        };
        let publish = fleet.as_ref().map(|f| f.listener("dependency"));
        let breaker = Arc::new(
            scenario
                .breaker(CircuitBreaker::builder())
                .name("dependency")
                .on_transition(move |t| {
                    logged(t);
                    if let Some(publish) = &publish {
                        publish(t);
                    }
                })
                .build()
                .map_err(|e| format!("the demo's breaker: {e}"))?,
        );
        if let Some(fleet) = &fleet {
            fleet.attach("dependency", &breaker);
        }
        out.breakers.push(breaker);
        out.logs.push(log);
        out.fleets.extend(fleet);
    }
    Ok(out)
}

/// When each instance first opened in `[from, to)`, and why.
fn first_opens(
    logs: &[TransitionLog],
    from: Duration,
    to: Duration,
) -> Vec<Option<(Duration, Reason)>> {
    logs.iter()
        .map(|log| {
            log.entries()
                .iter()
                .filter(|l| l.at >= from && l.at < to && l.transition.to == State::Open)
                .map(|l| (l.at, l.transition.reason))
                .min_by_key(|(at, _)| *at)
        })
        .collect()
}

/// Runs the fleet mode and prints its report.
pub fn run(scenario: &Scenario, seed: u64, n: usize, redis: Option<&str>) -> Result<(), String> {
    let (url, _own) = match redis {
        Some(url) => (url.to_owned(), None),
        None => {
            let (url, own) = start_redis()?;
            (url, Some(own))
        }
    };
    let namespace = format!("storm-{}", std::process::id());
    println!(
        "Fleet mode: {n} instances, {} workers in all, each worker served by instance (worker mod {n}).",
        scenario.threads
    );
    println!(
        "With the fleet view: {n} breakers, each with its own Redis client ({url}), quorum 2."
    );
    println!(
        "Without: {n} breakers that each learn alone. Both runs side by side, the same requests."
    );
    println!("Running for {:.1} s ...", scenario.duration().as_secs_f64());

    let built = Instant::now();
    let with = instances(scenario, n, built, Some(&url), &namespace)?;
    let alone = instances(scenario, n, built, None, &namespace)?;
    // The fleets are connected: the run starts now. The logs' times run from
    // `built`, `offset` earlier.
    let start = Instant::now();
    let offset = start.duration_since(built);
    let rec_with = Recorder::new(scenario);
    let rec_alone = Recorder::new(scenario);
    let dependency = Dependency::new(seed);
    let ctx_with = Ctx {
        scenario,
        dependency,
        recorder: &rec_with,
    };
    let ctx_alone = Ctx {
        scenario,
        dependency,
        recorder: &rec_alone,
    };
    std::thread::scope(|s| -> Result<(), String> {
        let spawn_error = |e: std::io::Error| format!("cannot start a worker thread: {e}");
        for id in 0..scenario.threads {
            for (variant, ctx, set) in [("fleet", &ctx_with, &with), ("alone", &ctx_alone, &alone)]
            {
                let worker = Worker::new(id, Some(set.breakers[id % n].clone()));
                std::thread::Builder::new()
                    .name(format!("{variant}-{id}"))
                    .stack_size(256 * 1024)
                    .spawn_scoped(s, move || worker::run_thread(worker, start, ctx))
                    .map_err(spawn_error)?;
            }
        }
        Ok(())
    })?;

    let (_, totals_with) = rec_with.finish();
    let (_, totals_alone) = rec_alone.finish();
    let sick = scenario
        .phases
        .iter()
        .find(|p| p.is_sick())
        .map_or((Duration::ZERO, scenario.duration()), |p| (p.start, p.end));
    let sick_end = scenario
        .phases
        .iter()
        .filter(|p| p.is_sick())
        .map(|p| p.end)
        .max()
        .unwrap_or(sick.1);
    println!();
    println!("                                             with the fleet view   each alone");
    println!(
        "calls that reached the sick dependency       {:>19}   {:>10}",
        totals_with.sick_calls, totals_alone.sick_calls
    );
    println!(
        "requests answered OK                         {:>19}   {:>10}",
        totals_with.ok, totals_alone.ok
    );
    let convergence = |logs: &[TransitionLog]| {
        let opens = first_opens(logs, sick.0 + offset, sick_end + offset);
        let times: Vec<Duration> = opens.iter().flatten().map(|(at, _)| *at).collect();
        let spread = match (times.iter().min(), times.iter().max()) {
            (Some(a), Some(b)) if times.len() == opens.len() => {
                format!("{:.0} ms", (*b - *a).as_secs_f64() * 1000.0)
            }
            _ => "never".to_owned(),
        };
        let who: Vec<String> = opens
            .iter()
            .enumerate()
            .map(|(i, o)| match o {
                Some((at, reason)) => format!(
                    "#{i} {:.2} s ({reason})",
                    at.saturating_sub(sick.0 + offset).as_secs_f64()
                ),
                None => format!("#{i} never"),
            })
            .collect();
        (spread, who.join(", "))
    };
    let (spread_with, who_with) = convergence(&with.logs);
    let (spread_alone, who_alone) = convergence(&alone.logs);
    println!("convergence (first to last instance Open)   {spread_with:>19}   {spread_alone:>10}");
    println!("  first Open after the sickness began, with the fleet: {who_with}");
    println!("  first Open after the sickness began, alone:          {who_alone}");
    let quorum_opens: u64 = with
        .fleets
        .iter()
        .map(|f| f.view().stats().quorum_opens)
        .sum();
    let published: u64 = with.fleets.iter().map(|f| f.view().stats().published).sum();
    println!("fleet: {quorum_opens} quorum opens, {published} messages published");
    Ok(())
}
