//! The worth scenario: instances that differ. One busy instance, several that
//! see a tenth of its traffic, and one that joins mid-outage; each run twice
//! side by side, with the fleet view and alone, and the calls each instance
//! sent to the dependency while it was down counted per instance.
//!
//! The dependency fails every call from 1.0 s to 4.0 s of a 5 s run, and
//! answers otherwise. Each breaker opens after 20 consecutive failures, for
//! 250 ms (doubling per failed probe round, to 2 s). The busy instance calls
//! at 2,000 a second, the quiet ones at 200, the joiner at 200 from 2.0 s. The
//! seed jitters each instance's call times and the outage's start (by up to
//! 100 ms).

use cutout::CircuitBreaker;
use cutout_fleet::{Fleet, FleetConfig};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const RUN: Duration = Duration::from_millis(5_000);
const SICK_FROM: Duration = Duration::from_millis(1_000);
const SICK_TO: Duration = Duration::from_millis(4_000);
const JOIN_AT: Duration = Duration::from_millis(2_000);
const BUSY_RATE: f64 = 2_000.0;

/// One instance's part: its rate, when it starts, and what it counts.
struct Role {
    name: String,
    rate: f64,
    from: Duration,
}

fn roles(quiet: usize) -> Vec<Role> {
    let mut roles = vec![Role {
        name: "busy".into(),
        rate: BUSY_RATE,
        from: Duration::ZERO,
    }];
    roles.extend((1..=quiet).map(|i| Role {
        name: format!("quiet-{i}"),
        rate: BUSY_RATE / 10.0,
        from: Duration::ZERO,
    }));
    roles.push(Role {
        name: "joiner".into(),
        rate: BUSY_RATE / 10.0,
        from: JOIN_AT,
    });
    roles
}

fn builder() -> cutout::Builder<cutout::DefaultClock> {
    CircuitBreaker::builder()
        .consecutive_failures(20)
        .open_duration(Duration::from_millis(250))
        .max_open_duration(Duration::from_secs(2))
}

/// xorshift64: jitter only.
fn next(seed: &mut u64) -> f64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    (*seed % 1_000_000) as f64 / 1_000_000.0
}

/// Runs one instance's calls from `start`; the calls that reached the
/// dependency while it was down.
fn instance(
    role: &Role,
    fleet: Option<FleetConfig>,
    start: Instant,
    sick: (Duration, Duration),
    mut seed: u64,
) -> Result<u64, String> {
    std::thread::sleep((start + role.from).saturating_duration_since(Instant::now()));
    // The joiner's fleet starts when it joins, and reads the picture then.
    let fleet = match fleet {
        Some(config) => Some(Fleet::start(config).map_err(|e| format!("fleet: {e}"))?),
        None => None,
    };
    let breaker: Arc<CircuitBreaker> = match &fleet {
        Some(f) => f
            .breaker("dependency", builder())
            .map_err(|e| e.to_string())?,
        None => Arc::new(builder().build().map_err(|e| e.to_string())?),
    };
    let reached = AtomicU64::new(0);
    let interval = 1.0 / role.rate;
    let mut at = role.from.as_secs_f64();
    while at < RUN.as_secs_f64() {
        at += interval * (0.5 + next(&mut seed));
        let due = start + Duration::from_secs_f64(at);
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        let t = start.elapsed();
        let _ = breaker.call(|| {
            if t >= sick.0 && t < sick.1 {
                // Relaxed: a tally read after the thread is joined.
                reached.fetch_add(1, Ordering::Relaxed);
                Err("down")
            } else {
                Ok(())
            }
        });
    }
    drop(fleet);
    Ok(reached.into_inner())
}

/// One seed: every role with the fleet view and alone, side by side; per role,
/// the calls (with, alone).
fn run_seed(url: &str, seed: u64, quiet: usize) -> Result<Vec<(String, u64, u64)>, String> {
    let roles = roles(quiet);
    let mut s = seed | 1;
    let shift = Duration::from_secs_f64(next(&mut s) * 0.1);
    let sick = (SICK_FROM + shift, SICK_TO + shift);
    let namespace = format!("worth-{}-{seed}", std::process::id());
    let start = Instant::now() + Duration::from_millis(200);
    std::thread::scope(|scope| {
        let mut handles = Vec::new();
        for (i, role) in roles.iter().enumerate() {
            let config = FleetConfig::new(url)
                .namespace(namespace.clone())
                .instance_id(role.name.clone())
                .heartbeat_every(Duration::from_millis(250))
                .live_after(Duration::from_secs(1))
                .join_wait(Duration::from_millis(500));
            let jitter = seed.wrapping_mul(31).wrapping_add(i as u64) | 1;
            let with = scope.spawn(move || instance(role, Some(config), start, sick, jitter));
            let alone = scope.spawn(move || instance(role, None, start, sick, jitter));
            handles.push((role.name.clone(), with, alone));
        }
        handles
            .into_iter()
            .map(|(name, with, alone)| {
                let with = with.join().map_err(|_| "a worker panicked")??;
                let alone = alone.join().map_err(|_| "a worker panicked")??;
                Ok((name, with, alone))
            })
            .collect()
    })
}

/// Runs the scenario for `seeds` seeds from `seed`, printing each seed's
/// figures per instance and the ratios (with / alone) per role across seeds.
pub fn run(url: &str, seed: u64, seeds: u64, quiet: usize) -> Result<(), String> {
    println!(
        "Worth scenario: one busy instance ({BUSY_RATE:.0} calls/s), {quiet} quiet ones \
         (a tenth of that), one that joins at {:.1} s, mid-outage ({:.1} s to {:.1} s).",
        JOIN_AT.as_secs_f64(),
        SICK_FROM.as_secs_f64(),
        SICK_TO.as_secs_f64()
    );
    println!(
        "Calls each instance sent to the dependency while it was down: with the fleet view / alone."
    );
    let mut per_role: Vec<(String, Vec<f64>, u64, u64)> = Vec::new();
    for s in seed..seed + seeds {
        let rows = run_seed(url, s, quiet)?;
        let cells: Vec<String> = rows
            .iter()
            .map(|(name, with, alone)| format!("{name} {with}/{alone}"))
            .collect();
        println!("seed {s}: {}", cells.join(", "));
        for (name, with, alone) in rows {
            // The quiet instances are one role.
            let role = if name.starts_with("quiet") {
                "quiet".to_owned()
            } else {
                name
            };
            let ratio = with as f64 / alone.max(1) as f64;
            match per_role.iter_mut().find(|(r, ..)| *r == role) {
                Some((_, ratios, w, a)) => {
                    ratios.push(ratio);
                    *w += with;
                    *a += alone;
                }
                None => per_role.push((role, vec![ratio], with, alone)),
            }
        }
    }
    println!(
        "\nper role, over {seeds} seeds: calls with / alone (all seeds), ratio mean (min to max)"
    );
    for (role, ratios, with, alone) in &per_role {
        let mean = ratios.iter().sum::<f64>() / ratios.len() as f64;
        let min = ratios.iter().copied().fold(f64::INFINITY, f64::min);
        let max = ratios.iter().copied().fold(0.0, f64::max);
        println!("  {role:<7} {with:>6} / {alone:<6}  {mean:.2} ({min:.2} to {max:.2})");
    }
    Ok(())
}
