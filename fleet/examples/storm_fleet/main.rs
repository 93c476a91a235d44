//! The storm demo (`examples/storm` at the workspace root) served by N instances,
//! each with its own breaker, twice side by side: once sharing a fleet view over
//! Redis (quorum 2, a Redis client per instance), once with N breakers that each
//! learn alone. Reports the calls that reached the sick dependency and how long
//! the instances took to agree it was sick.
//!
//! ```text
//! cargo run --release -p cutout-fleet --example storm_fleet -- --instances 3 --scale 0.5
//! ```
//!
//! Flags: `--instances N` (2 to 16, default 3), `--threads N` (workers in all,
//! default 32), `--scale X` (0.1 to 10, default 1), `--seed S` (default 42) and
//! `--redis URL` (default: start a `redis-server` on a free loopback port).
//!
//! `--scenario worth` runs instances that differ instead (see `worth.rs`): one
//! busy, `--quiet N` (default 3) with a tenth of its traffic, one that joins
//! mid-outage, over `--seeds N` seeds (default 10) from `--seed`:
//!
//! ```text
//! cargo run --release -p cutout-fleet --example storm_fleet -- --scenario worth --seeds 10
//! ```

// The storm's simulation, statistics and workers, shared with the storm demo;
// this example uses only part of each.
#[allow(dead_code)]
#[path = "../../../examples/storm/sim.rs"]
mod sim;
#[allow(dead_code)]
#[path = "../../../examples/storm/stats.rs"]
mod stats;
#[allow(dead_code)]
#[path = "../../../examples/storm/worker.rs"]
mod worker;

mod fleet;
mod worth;

use std::process::ExitCode;

const USAGE: &str = "usage: storm_fleet [--instances N] [--threads N] [--scale X] [--seed S] \
     [--redis URL] [--scenario storm|worth] [--seeds N] [--quiet N]";

struct Args {
    instances: usize,
    threads: usize,
    scale: f64,
    seed: u64,
    redis: Option<String>,
    worth: bool,
    seeds: u64,
    quiet: usize,
}

fn parse() -> Result<Args, String> {
    let mut args = Args {
        instances: 3,
        threads: 32,
        scale: 1.0,
        seed: 42,
        redis: None,
        worth: false,
        seeds: 10,
        quiet: 3,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it
            .next()
            .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
        let bad = |what: &str| format!("{flag} {value}: {what}\n{USAGE}");
        match flag.as_str() {
            "--instances" => {
                args.instances = value.parse().map_err(|_| bad("not a number"))?;
                if !(2..=16).contains(&args.instances) {
                    return Err(bad("outside 2..=16"));
                }
            }
            "--threads" => {
                args.threads = value.parse().map_err(|_| bad("not a number"))?;
                if !(1..=256).contains(&args.threads) {
                    return Err(bad("outside 1..=256"));
                }
            }
            "--scale" => {
                args.scale = value.parse().map_err(|_| bad("not a number"))?;
                if !(0.1..=10.0).contains(&args.scale) {
                    return Err(bad("outside 0.1..=10"));
                }
            }
            "--seed" => args.seed = value.parse().map_err(|_| bad("not a number"))?,
            "--redis" => args.redis = Some(value),
            "--scenario" => match value.as_str() {
                "storm" => args.worth = false,
                "worth" => args.worth = true,
                _ => return Err(bad("not storm or worth")),
            },
            "--seeds" => {
                args.seeds = value.parse().map_err(|_| bad("not a number"))?;
                if !(1..=100).contains(&args.seeds) {
                    return Err(bad("outside 1..=100"));
                }
            }
            "--quiet" => {
                args.quiet = value.parse().map_err(|_| bad("not a number"))?;
                if !(1..=15).contains(&args.quiet) {
                    return Err(bad("outside 1..=15"));
                }
            }
            _ => return Err(format!("unknown flag {flag}\n{USAGE}")),
        }
    }
    Ok(args)
}

fn main() -> ExitCode {
    let result = parse().and_then(|args| {
        if args.worth {
            let (url, _own) = match args.redis {
                Some(url) => (url, None),
                None => fleet::start_redis().map(|(url, own)| (url, Some(own)))?,
            };
            return worth::run(&url, args.seed, args.seeds, args.quiet);
        }
        let scenario = sim::Scenario::new(args.threads, args.scale);
        fleet::run(&scenario, args.seed, args.instances, args.redis.as_deref())
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("storm_fleet: {e}");
            ExitCode::FAILURE
        }
    }
}
