//! `cargo run --release --example storm`: a dependency gets sick, and many threads
//! call it through one shared cutout breaker, side by side with the same storm and
//! no breaker. About 20 seconds.
//!
//! - `sim.rs`: the script (phases), the simulated dependency, the breaker's settings.
//! - `worker.rs`: a worker as a state machine; real threads for the demo, a
//!   discrete-event loop on a `ManualClock` (no sleeps) for the test below.
//! - `stats.rs`: per-tick and total counts. `report.rs`: the text. `plot.rs`: the SVG.
//! - `overhead.rs`: the breaker's cost per call against a direct call.

mod overhead;
mod plot;
mod report;
mod sim;
mod stats;
mod worker;

use clap::Parser;
use cutout::CircuitBreaker;
use report::Style;
use sim::{Dependency, Scenario};
use stats::Recorder;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};
use worker::{Ctx, Timebase, TransitionLog, Worker};

/// A dependency gets sick: a latency spike, a hard outage, a partial recovery.
/// Worker threads call it through one shared cutout circuit breaker, side by side
/// with the same storm and no breaker; the timeline shows both, live, and the
/// summary compares them.
#[derive(Parser, Debug)]
#[command(
    name = "storm",
    version,
    after_help = "Example: cargo run --release --example storm -- --plot storm.svg"
)]
struct Args {
    /// Worker threads per run (the run without a breaker gets as many again). Below
    /// about 10, too few calls reach the breaker's window for its rate policies
    /// (20 calls at least): only its consecutive-failure policy trips.
    #[arg(short, long, default_value_t = 32, value_parser = clap::value_parser!(u16).range(1..=256))]
    threads: u16,

    /// Stretch (> 1) or shrink (< 1) the scripted phases and the breaker's
    /// cooldowns, from 0.1 to 10; 1 runs for 20 s. Below about 0.5 the sick phases
    /// get shorter than the callers' 2 s patience and the contrast fades.
    #[arg(short, long, default_value_t = 1.0, value_parser = parse_scale)]
    scale: f64,

    /// Seed of the simulated dependency's behaviour.
    #[arg(long, default_value_t = 42)]
    seed: u64,

    /// Also write a chart of state, rates and latency over time (SVG) to this file.
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,

    /// Run the same storm on a simulated clock instead of real time: no sleeping,
    /// done at once. The breaker's overhead is still measured for real.
    #[arg(long)]
    simulate: bool,

    /// Recover progressively: after a successful probe round the breaker admits
    /// 10% of the calls, rising to 100% over 1 s (stretched by --scale), instead
    /// of closing at once (cutout's `Builder::ramp_up`).
    #[arg(long)]
    ramp_up: bool,
}

fn parse_scale(s: &str) -> Result<f64, String> {
    let x: f64 = s.parse().map_err(|_| format!("`{s}` is not a number"))?;
    if (0.1..=10.0).contains(&x) {
        Ok(x)
    } else {
        Err(format!("{x} is outside 0.1..=10"))
    }
}

fn main() -> ExitCode {
    let args = Args::parse(); // a bad flag: clap prints why and exits with status 2
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("storm: {e}");
            ExitCode::FAILURE
        }
    }
}

/// What a finished storm hands the report.
struct Finished {
    with: Recorder,
    without: Recorder,
    log: TransitionLog,
    overhead: overhead::Overhead,
    metrics: cutout::Metrics,
}

fn run(args: &Args) -> Result<(), String> {
    let scenario = Scenario::new(usize::from(args.threads), args.scale).with_ramp_up(args.ramp_up);
    let terminal = std::io::stdout().is_terminal();
    let style = Style {
        color: terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
    };
    // Fail on an unwritable plot path now, not after the run.
    let plot_file = args
        .plot
        .as_ref()
        .map(|path| {
            std::fs::File::create(path)
                .map(|f| (path, f))
                .map_err(|e| format!("cannot write the plot to {}: {e}", path.display()))
        })
        .transpose()?;

    println!("{}", report::intro(&scenario, args.seed, style));
    let wall = Instant::now();
    let finished = if args.simulate {
        simulated(&scenario, args.seed, style)
    } else {
        live(&scenario, args.seed, style, terminal)?
    };
    let elapsed = wall.elapsed();

    let (ticks_with, with) = finished.with.finish();
    let (ticks_without, without) = finished.without.finish();
    let log = finished.log.entries();
    println!();
    println!(
        "{}",
        report::summary(&scenario, args.seed, &with, &without, style)
    );
    println!("{}", report::metrics(&finished.metrics));
    println!("{}", report::transitions(&scenario, &log, style));
    let when = if args.simulate {
        "before the simulated run"
    } else {
        "before the run"
    };
    println!("{}", report::overhead(&finished.overhead, when, style));
    println!(
        "{}",
        report::headline(&with, &without, &finished.overhead, style)
    );

    if let Some((path, mut file)) = plot_file {
        let subtitle = format!(
            "{} worker threads per run, the same requests in both, seed {}, {:.1} s{}",
            scenario.threads,
            args.seed,
            scenario.duration().as_secs_f64(),
            if args.simulate {
                " (simulated clock)"
            } else {
                ""
            }
        );
        let svg = plot::svg(&scenario, &ticks_with, &ticks_without, &log, &subtitle);
        file.write_all(svg.as_bytes())
            .map_err(|e| format!("cannot write the plot to {}: {e}", path.display()))?;
        println!("Chart written to {}", path.display());
    }
    println!("Done in {:.1} s.", elapsed.as_secs_f64());
    Ok(())
}

/// The demo: real threads, real sleeps, a live timeline.
fn live(scenario: &Scenario, seed: u64, style: Style, terminal: bool) -> Result<Finished, String> {
    // Before the workers start, so that nothing else runs on the cores meanwhile and
    // this thread owns its stripe, as the first workers do.
    let overhead = overhead::measure(scenario);
    let start = Instant::now();
    let log = TransitionLog::default();
    let breaker = Arc::new(
        scenario
            .breaker(CircuitBreaker::builder())
            .on_transition(log.listener(Timebase::Real(start)))
            .build()
            .map_err(|e| format!("the demo's breaker: {e}"))?,
    );
    let with = Recorder::new(scenario);
    let without = Recorder::new(scenario);
    let dependency = Dependency::new(seed);
    let ctx_with = Ctx {
        scenario,
        dependency,
        recorder: &with,
    };
    let ctx_without = Ctx {
        scenario,
        dependency,
        recorder: &without,
    };

    std::thread::scope(|s| -> Result<(), String> {
        let spawn_error = |e: std::io::Error| format!("cannot start a worker thread: {e}");
        for id in 0..scenario.threads {
            let worker = Worker::new(id, Some(breaker.clone()));
            let ctx = &ctx_with;
            std::thread::Builder::new()
                .name(format!("with-{id}"))
                .stack_size(256 * 1024)
                .spawn_scoped(s, move || worker::run_thread(worker, start, ctx))
                .map_err(spawn_error)?;
            let worker = Worker::<cutout::DefaultClock>::new(id, None);
            let ctx = &ctx_without;
            std::thread::Builder::new()
                .name(format!("without-{id}"))
                .stack_size(256 * 1024)
                .spawn_scoped(s, move || worker::run_thread(worker, start, ctx))
                .map_err(spawn_error)?;
        }
        timeline(
            scenario, &with, &without, &breaker, &log, start, style, terminal,
        );
        Ok(())
    })?;
    Ok(Finished {
        with,
        without,
        log,
        overhead,
        metrics: breaker.metrics(),
    })
}

/// The live timeline, on the main thread: a line per tick, and on a terminal a
/// progress bar redrawn below it.
#[allow(clippy::too_many_arguments)]
fn timeline(
    scenario: &Scenario,
    with: &Recorder,
    without: &Recorder,
    breaker: &CircuitBreaker,
    log: &TransitionLog,
    start: Instant,
    style: Style,
    terminal: bool,
) {
    /// Events of a tick may be recorded a moment after it ends.
    const GRACE: Duration = Duration::from_millis(20);
    const REDRAW: Duration = Duration::from_millis(100);
    const CLEAR_LINE: &str = "\r\x1b[2K";
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}\n", report::legend());
    let _ = writeln!(out, "{}", report::header(style));
    let mut phase = None;
    for i in 0..scenario.ticks() {
        let end = scenario.tick_start(i + 1);
        loop {
            let now = start.elapsed();
            if now >= end + GRACE {
                break;
            }
            if terminal {
                let _ = write!(out, "{CLEAR_LINE}{}", report::progress(scenario, now));
                let _ = out.flush();
            }
            std::thread::sleep((end + GRACE - now).min(REDRAW));
        }
        with.close_tick(i, Some(breaker.state()));
        if terminal {
            let _ = write!(out, "{CLEAR_LINE}");
        }
        let p = scenario.phase_index(scenario.tick_start(i));
        if phase != Some(p) {
            let _ = writeln!(out, "{}", report::phase_header(scenario, p, style));
            phase = Some(p);
        }
        let line = report::tick_line(
            scenario,
            i,
            &with.tick(i),
            &without.tick(i),
            log.count_between(scenario.tick_start(i), end),
            style,
        );
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }
}

/// The same storm on a `ManualClock`, at once; prints the timeline afterwards.
fn simulated(scenario: &Scenario, seed: u64, style: Style) -> Finished {
    let overhead = overhead::measure(scenario);
    let sim = worker::simulate(scenario, seed);
    println!("{}\n", report::legend());
    println!("{}", report::header(style));
    let mut phase = None;
    for i in 0..scenario.ticks() {
        let p = scenario.phase_index(scenario.tick_start(i));
        if phase != Some(p) {
            println!("{}", report::phase_header(scenario, p, style));
            phase = Some(p);
        }
        let transitions = sim
            .log
            .count_between(scenario.tick_start(i), scenario.tick_start(i + 1));
        println!(
            "{}",
            report::tick_line(
                scenario,
                i,
                &sim.with.tick(i),
                &sim.without.tick(i),
                transitions,
                style
            )
        );
    }
    Finished {
        with: sim.with,
        without: sim.without,
        log: sim.log,
        overhead,
        metrics: sim.breaker.metrics(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cutout::State;
    use std::time::Duration;

    /// The demo's headline claims, on its own core at a small scale (16 workers, a
    /// 10 s script), driven by a `ManualClock`: no threads, no sleeps. Three seeds,
    /// so that no claim rests on one lucky draw.
    #[test]
    fn storm_headline_claims_hold_on_a_manual_clock() {
        for seed in [1, 7, 42] {
            headline_claims(seed);
        }
    }

    fn headline_claims(seed: u64) {
        headline_claims_of(Scenario::new(16, 0.5), seed);
    }

    fn headline_claims_of(scenario: Scenario, seed: u64) {
        let sim = worker::simulate(&scenario, seed);
        let (ticks, with) = sim.with.finish();
        let (_, without) = sim.without.finish();
        let log = sim.log.entries();
        let phase = |b: sim::Behaviour| {
            scenario
                .phases
                .iter()
                .find(|p| p.behaviour == b)
                .expect("the script has every behaviour")
        };
        let (spike, outage) = (
            phase(sim::Behaviour::LatencySpike),
            phase(sim::Behaviour::Outage),
        );
        let healthy_again = scenario.phases.last().expect("the script has phases");

        // Both runs were handed the same requests, and all were answered one way
        // or another.
        assert_eq!(with.requests(), without.requests());
        assert_eq!(with.needed, without.needed);
        assert_eq!(with.requests(), 16 * 40 * 10);

        // The breaker opens during the spike, on slow calls, and stays out of
        // Closed through the whole outage, turning requests away in every tick.
        let first_open = log
            .iter()
            .find(|l| l.transition.to == State::Open)
            .expect("the breaker opened");
        assert_eq!(first_open.transition.from, State::Closed);
        assert_eq!(first_open.transition.reason, cutout::Reason::SlowCallRate);
        assert!(
            spike.start < first_open.at && first_open.at < spike.end,
            "seed {seed}: {first_open:?}"
        );
        let mut t = outage.start;
        while t < outage.end {
            assert_ne!(
                worker::state_at(&log, t),
                State::Closed,
                "seed {seed}: closed at {t:?}"
            );
            t += Duration::from_millis(50);
        }
        let outage_ticks = &ticks[scenario.tick_of(outage.start)..scenario.tick_of(outage.end)];
        assert!(
            outage_ticks.iter().all(|t| t.rejected > 0),
            "seed {seed}: {outage_ticks:?}"
        );

        // Far fewer calls reach the sick dependency, and workers are not stuck on it.
        assert!(
            with.sick_calls * 3 < without.sick_calls,
            "seed {seed}: {} vs {} calls while sick",
            with.sick_calls,
            without.sick_calls
        );
        assert!(
            with.sick_waiting * 3 < without.sick_waiting,
            "seed {seed}: {:?} vs {:?} waiting",
            with.sick_waiting,
            without.sick_waiting
        );
        assert!(with.latency(99.0) < without.latency(99.0), "seed {seed}");
        // Requests that never needed the dependency are not lost behind it.
        assert!(without.gave_up_local > 100, "seed {seed}: {without:?}");
        assert!(
            with.gave_up_local * 10 < without.gave_up_local,
            "seed {seed}"
        );

        // It closes again once the dependency recovers, and stays closed to the end.
        let last = log.last().expect("transitions were logged");
        assert_eq!(last.transition.to, State::Closed, "seed {seed}: {last:?}");
        assert!(last.at > outage.end, "seed {seed}: {last:?}");
        assert!(
            last.at < healthy_again.start + Duration::from_secs(1),
            "seed {seed}: {last:?}"
        );
        assert_eq!(sim.breaker.state(), State::Closed);
        assert!(ticks.last().is_some_and(|t| t.state == Some(State::Closed)));

        // The breaker's own counters agree with what the workers saw.
        let m = sim.breaker.metrics();
        assert_eq!(m.lifetime.admitted, with.calls);
        assert_eq!(m.lifetime.rejected, with.rejected);
        assert_eq!(
            m.lifetime.successes + m.lifetime.failures + m.lifetime.stale,
            with.ok + with.failed
        );
        assert_eq!(m.total_transitions(), log.len() as u64);
    }

    /// What the partial-recovery phase of one simulated storm saw: trips (to Open
    /// from Closed, or from Recovering), failed probe rounds (to Open from
    /// HalfOpen), and calls that reached the dependency.
    fn partial_recovery(scenario: &Scenario, seed: u64) -> [u64; 3] {
        let sim = worker::simulate(scenario, seed);
        let partial = scenario
            .phases
            .iter()
            .find(|p| p.behaviour == sim::Behaviour::PartialRecovery)
            .expect("the script has a partial recovery")
            .clone();
        let log = sim.log.entries();
        let reopened = |from: &[State]| {
            log.iter()
                .filter(|l| l.transition.to == State::Open && from.contains(&l.transition.from))
                .filter(|l| partial.start <= l.at && l.at < partial.end)
                .count() as u64
        };
        let (ticks, _) = sim.with.finish();
        let calls = ticks[scenario.tick_of(partial.start)..scenario.tick_of(partial.end)]
            .iter()
            .map(|t| t.calls)
            .sum();
        [
            reopened(&[State::Closed, State::Recovering]),
            reopened(&[State::HalfOpen]),
            calls,
        ]
    }

    /// [`partial_recovery`] summed over `seeds`, without and with `--ramp-up`, the
    /// cooldowns not jittered, so that the two runs of a seed differ only by the
    /// ramp (the jitter's random seed made the failed probe rounds before any ramp
    /// differ between them: 131 / 130 over 200 seeds).
    fn partial_recoveries(threads: usize, scale: f64, seeds: u64) -> [[u64; 3]; 2] {
        let scenario = Scenario::new(threads, scale).without_jitter();
        let mut sums = [[0; 3]; 2];
        for seed in 1..=seeds {
            for (ramp, sum) in sums.iter_mut().enumerate() {
                let one = partial_recovery(&scenario.clone().with_ramp_up(ramp == 1), seed);
                for (s, x) in sum.iter_mut().zip(one) {
                    *s += x;
                }
            }
        }
        eprintln!(
            "{threads} workers, scale {scale}, {seeds} seeds, partial recovery, without / with ramp-up: \
             {} / {} trips, {} / {} failed probe rounds, {} / {} calls reached the dependency",
            sums[0][0], sums[1][0], sums[0][1], sums[1][1], sums[0][2], sums[1][2]
        );
        sums
    }

    /// The ramp's measure: with `--ramp-up` the partial-recovery phase reopens the
    /// breaker no more often than without: no more trips, no more failed probe
    /// rounds; and the ramp sheds calls.
    #[test]
    fn ramp_up_trips_no_more_often_in_the_partial_recovery() {
        let [without, with] = partial_recoveries(16, 0.5, 10);
        assert!(with[0] <= without[0], "{with:?} vs {without:?}");
        assert!(with[1] <= without[1], "{with:?} vs {without:?}");
        assert!(
            with[2] < without[2],
            "the ramp sheds calls: {with:?} vs {without:?}"
        );
    }

    /// The README's figures: the demo's own storm (32 workers, scale 1), 200 seeds.
    #[test]
    #[ignore = "measurement: cargo test --release --example storm -- --ignored --nocapture"]
    fn ramp_up_partial_recovery_figures() {
        let [without, with] = partial_recoveries(32, 1.0, 200);
        assert!(with[0] <= without[0], "{with:?} vs {without:?}");
        assert!(with[1] <= without[1], "{with:?} vs {without:?}");
    }

    /// The headline claims hold with `--ramp-up` too.
    #[test]
    fn storm_headline_claims_hold_with_ramp_up() {
        for seed in [1, 7, 42] {
            headline_claims_of(Scenario::new(16, 0.5).with_ramp_up(true), seed);
        }
    }

    #[test]
    fn bad_flags_are_errors_not_panics() {
        assert!(Args::try_parse_from(["storm", "--threads", "0"]).is_err());
        assert!(Args::try_parse_from(["storm", "--threads", "many"]).is_err());
        assert!(Args::try_parse_from(["storm", "--scale", "0"]).is_err());
        assert!(Args::try_parse_from(["storm", "--scale", "NaN"]).is_err());
        assert!(Args::try_parse_from(["storm", "--bogus"]).is_err());
        let ok = Args::try_parse_from([
            "storm", "-t", "4", "-s", "0.5", "--seed", "9", "--plot", "x.svg",
        ])
        .expect("valid flags");
        assert_eq!((ok.threads, ok.scale, ok.seed), (4, 0.5, 9));
    }
}
