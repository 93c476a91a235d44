//! The scripted storm: the phases, the simulated dependency, and the breaker the
//! demo puts in front of it. Everything here is pure: no clock, no threads, no sleeps.

use cutout::{Builder, Clock};
use std::time::Duration;

/// The caller's timeout on one dependency call: a call that would take longer fails
/// after this long.
pub const CALL_TIMEOUT: Duration = Duration::from_millis(500);
/// A caller gives up on a request that waited this long for a free worker.
pub const CALLER_DEADLINE: Duration = Duration::from_secs(2);
/// Each worker is handed one request this often.
pub const REQUEST_INTERVAL: Duration = Duration::from_millis(25);
/// A request that does not need the dependency keeps its worker this long.
pub const LOCAL_WORK: Duration = Duration::from_millis(2);
/// The breaker's slow-call threshold (also what the timeline counts as slow).
pub const SLOW_CALL: Duration = Duration::from_millis(100);
/// The timeline's resolution at scale 1 (it stretches with the script, so the
/// timeline always has 40 lines).
const TICK: Duration = Duration::from_millis(500);

/// How the dependency behaves during a phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Behaviour {
    /// Fast, a rare error.
    Healthy,
    /// Answers, but slowly; the slowest calls hit the caller's timeout.
    LatencySpike,
    /// Most calls hang until the timeout, the rest are refused at once.
    Outage,
    /// Fast again, but one call in ten fails.
    PartialRecovery,
}

impl Behaviour {
    /// One line for the phase headers.
    pub fn describe(self) -> &'static str {
        match self {
            Behaviour::Healthy => "answers in ~4 ms, 0.5% errors",
            Behaviour::LatencySpike => "answers in ~220 ms, 1 call in 8 hits the 500 ms timeout",
            Behaviour::Outage => "80% of calls hang until the 500 ms timeout, 20% refused",
            Behaviour::PartialRecovery => "answers in ~15 ms, but 10% of calls fail",
        }
    }
}

/// One scripted phase, `[start, end)` in run time.
#[derive(Clone, Debug)]
pub struct Phase {
    /// A short name for the timeline.
    pub name: &'static str,
    /// What the dependency does.
    pub behaviour: Behaviour,
    /// When it starts.
    pub start: Duration,
    /// When it ends.
    pub end: Duration,
}

impl Phase {
    /// Whether the dependency is sick in this phase (the spike and the outage).
    pub fn is_sick(&self) -> bool {
        matches!(self.behaviour, Behaviour::LatencySpike | Behaviour::Outage)
    }
}

/// The whole run: its phases, its workers and its timing.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// The phases, back to back from time zero.
    pub phases: Vec<Phase>,
    /// Worker threads per run.
    pub threads: usize,
    /// The stretch applied to the phases and to the breaker's cooldowns.
    pub scale: f64,
    /// The timeline's resolution.
    pub tick: Duration,
    /// Whether the breaker recovers progressively (`--ramp-up`).
    pub ramp_up: bool,
    /// The breaker's cooldown jitter (0.2). Its random seed is the breaker's only
    /// randomness, so measurements that compare two settings like for like turn
    /// it off.
    pub jitter: f64,
}

/// The script at scale 1: 20 s.
const SCRIPT: [(&str, Behaviour, u64); 5] = [
    ("healthy", Behaviour::Healthy, 3000),
    ("spike", Behaviour::LatencySpike, 4000),
    ("outage", Behaviour::Outage, 5000),
    ("partial", Behaviour::PartialRecovery, 4000),
    ("healthy", Behaviour::Healthy, 4000),
];

impl Scenario {
    /// The script with every phase stretched by `scale`.
    pub fn new(threads: usize, scale: f64) -> Scenario {
        let mut start = Duration::ZERO;
        let phases = SCRIPT
            .iter()
            .map(|&(name, behaviour, millis)| {
                let end = start + Duration::from_millis(millis).mul_f64(scale);
                let phase = Phase {
                    name,
                    behaviour,
                    start,
                    end,
                };
                start = end;
                phase
            })
            .collect();
        Scenario {
            phases,
            threads,
            scale,
            tick: TICK.mul_f64(scale),
            ramp_up: false,
            jitter: 0.2,
        }
    }

    /// The same script, with the breaker's cooldowns not jittered: with a seeded
    /// simulation, two runs then differ only by the setting compared.
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn without_jitter(self) -> Scenario {
        Scenario {
            jitter: 0.0,
            ..self
        }
    }

    /// The same script, with the breaker's progressive recovery on (`--ramp-up`).
    pub fn with_ramp_up(self, on: bool) -> Scenario {
        Scenario {
            ramp_up: on,
            ..self
        }
    }

    /// The ramp's length with `--ramp-up`: it stretches with the script.
    pub fn ramp(&self) -> Duration {
        self.scaled(1000)
    }

    /// The run's length.
    pub fn duration(&self) -> Duration {
        self.phases.last().map_or(Duration::ZERO, |p| p.end)
    }

    /// The index of the phase running at `t` (the last one after the end).
    pub fn phase_index(&self, t: Duration) -> usize {
        self.phases
            .iter()
            .position(|p| t < p.end)
            .unwrap_or(self.phases.len() - 1)
    }

    /// The phase running at `t`.
    pub fn phase_at(&self, t: Duration) -> &Phase {
        &self.phases[self.phase_index(t)]
    }

    /// When worker `worker`'s `k`th request arrives. Workers are staggered evenly
    /// over one interval so that arrivals are spread, not bunched.
    pub fn arrival(&self, worker: usize, k: u64) -> Duration {
        let offset = REQUEST_INTERVAL.mul_f64(worker as f64 / self.threads.max(1) as f64);
        offset + REQUEST_INTERVAL * u32::try_from(k).unwrap_or(u32::MAX)
    }

    /// How many timeline ticks the run has.
    pub fn ticks(&self) -> usize {
        self.duration().as_nanos().div_ceil(self.tick.as_nanos()) as usize
    }

    /// When tick `i` starts; it ends where tick `i + 1` starts.
    pub fn tick_start(&self, i: usize) -> Duration {
        self.tick * u32::try_from(i).unwrap_or(u32::MAX)
    }

    /// The tick run time `t` falls in.
    #[cfg(test)]
    pub fn tick_of(&self, t: Duration) -> usize {
        (t.as_nanos() / self.tick.as_nanos()) as usize
    }

    /// A scaled duration, at least 1 ms (the breaker's tick).
    fn scaled(&self, millis: u64) -> Duration {
        Duration::from_millis(millis)
            .mul_f64(self.scale)
            .max(Duration::from_millis(1))
    }

    /// The breaker's sliding window. It does not stretch with the scenario: it
    /// must hold enough calls (at least 20) to judge a rate.
    pub fn breaker_window(&self) -> Duration {
        Duration::from_millis(500)
    }

    /// The nominal cooldown at backoff `level` (before jitter shortens it).
    pub fn cooldown(&self, level: u8) -> Duration {
        (self.scaled(250) * 2u32.saturating_pow(u32::from(level))).min(self.scaled(1000))
    }

    /// The breaker the demo puts in front of the dependency: all three trip policies,
    /// exponential backoff with jitter, three probes. Its cooldowns stretch with the
    /// scenario; its window and call timings (slow-call threshold, half-open
    /// timeout) do not, since the request rate and the dependency's latencies do not.
    /// With `--ramp-up`, a successful round starts a ramp of [`ramp`](Self::ramp).
    pub fn breaker<C: Clock>(&self, builder: Builder<C>) -> Builder<C> {
        let builder = match self.ramp_up {
            true => builder.ramp_up(self.ramp()),
            false => builder,
        };
        builder
            .consecutive_failures(10)
            .window(self.breaker_window(), 10)
            .failure_rate(0.5, 20)
            .slow_calls(SLOW_CALL, 0.5)
            .open_duration(self.scaled(250))
            .backoff_multiplier(2.0)
            .max_open_duration(self.scaled(1000))
            .jitter(self.jitter)
            .half_open_probes(3)
            .half_open_timeout(CALL_TIMEOUT * 2)
    }

    /// The breaker's settings in words, for the intro.
    pub fn describe_breaker(&self) -> String {
        let ramp = match self.ramp_up {
            true => format!(
                ";\n  then a ramp-up: 10% of the calls admitted, rising to 100% over {:?}",
                self.ramp()
            ),
            false => String::new(),
        };
        format!(
            "trips on 10 consecutive failures, or >= 50% failures or >= 50% slow calls (> {:?})\n  \
             over a {:?} window (20 calls at least); cooldown {:?} doubling up to {:?}, 20% jitter; 3 probes{ramp}",
            SLOW_CALL,
            self.breaker_window(),
            self.scaled(250),
            self.scaled(1000)
        )
    }
}

/// What the dependency does with one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Response {
    /// How long the call takes, at most [`CALL_TIMEOUT`].
    pub latency: Duration,
    /// Whether it succeeds (a call that hit the timeout fails).
    pub ok: bool,
}

/// The simulated dependency: each request's fate is a pure function of the seed,
/// the worker, the request's number and the phase, so two runs with one seed see
/// the same dependency, request for request.
#[derive(Clone, Copy, Debug)]
pub struct Dependency {
    seed: u64,
}

impl Dependency {
    /// The dependency for `seed`.
    pub fn new(seed: u64) -> Dependency {
        Dependency { seed }
    }

    /// The random stream of worker `worker`'s `k`th request, for one purpose.
    fn rng(&self, worker: usize, k: u64, purpose: u64) -> Rng {
        let request = ((worker as u64) << 40) ^ k;
        Rng::new(self.seed ^ mix(request.wrapping_add(GOLDEN)) ^ mix(purpose))
    }

    /// Whether worker `worker`'s `k`th request needs the dependency. Half do; the
    /// others are served locally in [`LOCAL_WORK`], if their worker is free.
    pub fn needed_by(&self, worker: usize, k: u64) -> bool {
        self.rng(worker, k, 1).chance(0.5)
    }

    /// Worker `worker`'s `k`th request, made while the dependency behaves as
    /// `behaviour`.
    pub fn respond(&self, behaviour: Behaviour, worker: usize, k: u64) -> Response {
        let mut rng = self.rng(worker, k, 2);
        let (latency, failed) = match behaviour {
            Behaviour::Healthy => (rng.lognormal(4.0, 0.5), rng.chance(0.005)),
            Behaviour::LatencySpike => (rng.lognormal(220.0, 0.6), rng.chance(0.01)),
            Behaviour::Outage => {
                if rng.chance(0.8) {
                    (f64::INFINITY, true)
                } else {
                    (1.0 + rng.unit(), true)
                }
            }
            Behaviour::PartialRecovery => (rng.lognormal(15.0, 0.6), rng.chance(0.1)),
        };
        let limit = CALL_TIMEOUT.as_secs_f64() * 1000.0;
        if latency > limit {
            Response {
                latency: CALL_TIMEOUT,
                ok: false,
            }
        } else {
            Response {
                latency: Duration::from_secs_f64(latency / 1000.0),
                ok: !failed,
            }
        }
    }
}

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's output function: a strong 64-bit mix.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// SplitMix64: tiny, fast, and good enough for a simulation.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GOLDEN);
        mix(self.0)
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// A standard normal sample (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let u = 1.0 - self.unit(); // (0, 1]: ln is finite
        let v = self.unit();
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }

    /// A log-normal sample with this median and spread (sigma of the log).
    pub fn lognormal(&mut self, median: f64, sigma: f64) -> f64 {
        median * (sigma * self.normal()).exp()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_seed_one_dependency() {
        let (a, b, c) = (Dependency::new(7), Dependency::new(7), Dependency::new(8));
        let fates = |d: Dependency| -> Vec<Response> {
            (0..200)
                .map(|k| d.respond(Behaviour::LatencySpike, 3, k))
                .collect()
        };
        assert_eq!(fates(a), fates(b));
        assert_ne!(fates(a), fates(c));
        let needed = (0..10_000).filter(|&k| a.needed_by(1, k)).count();
        assert!((4800..5200).contains(&needed), "{needed}");
    }

    #[test]
    fn behaviours_look_like_their_descriptions() {
        let d = Dependency::new(1);
        let stats = |b: Behaviour| {
            let rs: Vec<Response> = (0..20_000)
                .map(|k| d.respond(b, (k % 16) as usize, k))
                .collect();
            let failed = rs.iter().filter(|r| !r.ok).count() as f64 / rs.len() as f64;
            let slow = rs.iter().filter(|r| r.latency > SLOW_CALL).count() as f64 / rs.len() as f64;
            assert!(rs.iter().all(|r| r.latency <= CALL_TIMEOUT));
            (failed, slow)
        };
        let (failed, slow) = stats(Behaviour::Healthy);
        assert!(failed < 0.01 && slow < 0.001, "{failed} {slow}");
        let (failed, slow) = stats(Behaviour::LatencySpike);
        assert!(
            (0.08..0.2).contains(&failed) && slow > 0.9,
            "{failed} {slow}"
        );
        let (failed, slow) = stats(Behaviour::Outage);
        assert!(
            failed == 1.0 && (0.75..0.85).contains(&slow),
            "{failed} {slow}"
        );
        let (failed, slow) = stats(Behaviour::PartialRecovery);
        assert!(
            (0.08..0.12).contains(&failed) && slow < 0.01,
            "{failed} {slow}"
        );
    }

    #[test]
    fn phases_tile_the_run() {
        let s = Scenario::new(4, 0.5);
        assert_eq!(s.duration(), Duration::from_secs(10));
        assert_eq!(s.phases[0].start, Duration::ZERO);
        for w in s.phases.windows(2) {
            assert_eq!(w[0].end, w[1].start);
        }
        assert_eq!(s.phase_at(Duration::from_millis(1499)).name, "healthy");
        assert_eq!(s.phase_at(Duration::from_millis(1500)).name, "spike");
        assert_eq!(s.phase_index(Duration::from_secs(99)), 4);
        assert_eq!(s.arrival(2, 3), REQUEST_INTERVAL / 2 + REQUEST_INTERVAL * 3);
        assert_eq!((s.ticks(), s.tick), (40, Duration::from_millis(250)));
        assert_eq!(
            (s.tick_start(3), s.tick_of(Duration::from_millis(999))),
            (Duration::from_millis(750), 3)
        );
    }
}
