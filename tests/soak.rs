//! A soak through years of simulated life on `ManualClock` (DESIGN.md contract lines
//! 17-19): random outages with long runs of failed probe rounds and timed-out
//! rounds, flapping manual control, slow phases, idle gaps of up to a month, and
//! permits held across transitions. After every outage each breaker's policy must
//! trip exactly at its threshold, and every outcome admitted under an earlier phase
//! must be discarded as stale, changing nothing.
//!
//! One breaker per policy (consecutive failures, failure rate, slow-call rate), so
//! each threshold can be checked exactly. `soak_a_short_life` runs 100,000
//! transitions per breaker with every test; `soak_years_of_life` runs 1,000,000 per
//! breaker and at least 20 years of clock (past 2^39 ms, where the old tick field
//! saturated), `#[ignore]`d and run by CI in release.
//!
//! Under `--cfg cutout_tiny_generations` (3-bit generations) the generation
//! wraps every 8 transitions, so a permit held through a multiple of 8 can pass as
//! current, and an earlier phase's streak or bucket can alias the current one's.
//! Those runs assert what still holds at any generation distance: no policy dies
//! (each trips no later than its threshold), every permit held through a distance
//! that is not a whole cycle is stale, and a half-open round admits exactly its
//! probes.

use cutout::{Builder, CircuitBreaker, ManualClock, Permit, State};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Transitions after which a generation repeats.
#[cfg(not(cutout_tiny_generations))]
const CYCLE: u64 = 1 << 32;
#[cfg(cutout_tiny_generations)]
const CYCLE: u64 = 8;
/// Whether a whole-cycle alias is possible in a run this long (only with the tiny
/// generation): then thresholds are checked as upper bounds.
const ALIASES: bool = CYCLE <= 1 << 20;

const MS: Duration = Duration::from_millis(1);
const SLOW: Duration = Duration::from_millis(10);
const PROBES: u32 = 2;
const HALF_OPEN_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Clone, Copy, Debug)]
enum Policy {
    Consecutive(u32),
    FailureRate(u32),
    SlowCalls(u32),
}

/// A small PRNG (splitmix64): the soak is the same every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

struct Soak {
    clock: ManualClock,
    b: CircuitBreaker<ManualClock>,
    policy: Policy,
    /// Transitions so far, counted by a listener.
    transitions: Arc<AtomicU64>,
    rng: Rng,
}

impl Soak {
    fn new(policy: Policy, seed: u64) -> Soak {
        let clock = ManualClock::new();
        let transitions = Arc::new(AtomicU64::new(0));
        let counter = transitions.clone();
        let builder: Builder<ManualClock> = CircuitBreaker::builder()
            .open_duration(100 * MS)
            .max_open_duration(Duration::from_secs(5))
            .jitter(0.5)
            .half_open_probes(PROBES)
            .half_open_timeout(HALF_OPEN_TIMEOUT)
            .clock(clock.clone())
            .on_transition(move |_| {
                counter.fetch_add(1, Ordering::Relaxed);
            });
        let b = match policy {
            Policy::Consecutive(n) => builder.consecutive_failures(n),
            Policy::FailureRate(min) => builder
                .window(Duration::from_secs(10), 10)
                .failure_rate(0.5, min),
            Policy::SlowCalls(min) => builder
                .window(Duration::from_secs(10), 10)
                .minimum_calls(min)
                .slow_calls(SLOW, 0.5),
        }
        .build()
        .unwrap();
        Soak {
            clock,
            b,
            policy,
            transitions,
            rng: Rng(seed),
        }
    }

    fn transitions(&self) -> u64 {
        self.transitions.load(Ordering::Relaxed)
    }

    fn fail(&self) {
        let _ = self.b.call(|| Err::<(), _>("down"));
    }

    fn succeed(&self) {
        let _ = self.b.call(|| Ok::<_, ()>(()));
    }

    fn slow_success(&self) {
        let _ = self.b.call(|| {
            self.clock.advance(2 * SLOW);
            Ok::<_, ()>(())
        });
    }

    /// One outcome of the kind the policy counts.
    fn bad_call(&self) {
        match self.policy {
            Policy::SlowCalls(_) => self.slow_success(),
            _ => self.fail(),
        }
    }

    /// From a fresh closed phase, drives the policy to its threshold: it trips on
    /// exactly the threshold's outcome (no later, where generations alias).
    fn check_trips_at_threshold(&mut self, episode: u64) {
        assert_eq!(self.b.state(), State::Closed, "episode {episode}");
        let threshold = match self.policy {
            Policy::Consecutive(n) => {
                // Successes first: they must not count towards anything.
                for _ in 0..self.rng.below(5) {
                    self.succeed();
                }
                n
            }
            Policy::FailureRate(min) | Policy::SlowCalls(min) => min,
        };
        for i in 1..=threshold {
            self.bad_call();
            let tripped = self.b.state() == State::Open;
            if i < threshold && !ALIASES {
                assert!(
                    !tripped,
                    "episode {episode}: {:?} tripped after {i} of {threshold} at {} transitions",
                    self.policy,
                    self.transitions()
                );
            }
            if tripped {
                return;
            }
        }
        panic!(
            "episode {episode}: {:?} did not trip at its threshold, {} transitions in",
            self.policy,
            self.transitions()
        );
    }

    /// Open → rounds that fail or time out → a round that succeeds: Closed.
    fn outage(&mut self, episode: u64) {
        assert_eq!(self.b.state(), State::Open, "episode {episode}");
        for _ in 0..self.rng.below(60) {
            self.cool_down();
            if self.rng.below(8) == 0 {
                // A leaked probe: the round times out, which fails it.
                std::mem::forget(self.b.try_acquire().expect("a probe after the cooldown"));
                self.clock.advance(HALF_OPEN_TIMEOUT);
                assert!(
                    self.b.try_acquire().is_err(),
                    "the timed-out round reopened"
                );
            } else {
                let first = self.b.try_acquire().expect("a probe after the cooldown");
                assert!(first.is_probe());
                first.failure();
            }
            assert_eq!(self.b.state(), State::Open, "episode {episode}");
        }
        self.cool_down();
        let probes: Vec<Permit<'_, ManualClock>> = (0..PROBES)
            .map(|_| self.b.try_acquire().expect("a probe slot"))
            .collect();
        assert!(
            self.b.try_acquire().is_err(),
            "episode {episode}: a round admits exactly {PROBES} probes"
        );
        for p in probes {
            p.success();
        }
        assert_eq!(self.b.state(), State::Closed, "episode {episode}");
    }

    /// Waits out the current cooldown.
    fn cool_down(&self) {
        let wait = self.b.metrics().retry_after.expect("open has a deadline");
        self.clock.advance(wait);
    }

    /// Manual control, back and forth, ending Closed with a reset.
    fn flap(&mut self) {
        for _ in 0..self.rng.below(300) {
            match self.rng.below(3) {
                0 => self.b.force_open(),
                1 => self.b.disable(),
                _ => self.b.reset(),
            }
        }
        self.b.reset();
    }

    /// Permits admitted now, recorded after `moves` more transitions: every one is
    /// stale (unless the distance is a whole generation cycle), and recording them
    /// changes nothing.
    fn held_permits(&mut self, episode: u64) {
        let held: Vec<Permit<'_, ManualClock>> = (0..1 + self.rng.below(4))
            .filter_map(|_| self.b.try_acquire().ok())
            .collect();
        let before = self.transitions();
        for _ in 0..1 + self.rng.below(40) {
            match self.rng.below(4) {
                0 => self.b.force_open(),
                1 => self.b.disable(),
                _ => self.b.reset(),
            }
        }
        self.b.reset();
        let moved = self.transitions() - before;
        let m = self.b.metrics();
        let n = held.len() as u64;
        for p in held {
            match self.rng.below(3) {
                0 => p.success(),
                1 => p.failure(),
                _ => drop(p),
            }
        }
        if moved > 0 && moved.is_multiple_of(CYCLE) {
            // A whole generation cycle (tiny generations only): the permits pass as
            // current (see the module docs), and their failures may trip the
            // breaker. Nothing to assert; the next episode starts Closed.
            if self.b.state() != State::Closed {
                self.b.reset();
            }
            return;
        }
        // Held through at least one transition and not a whole cycle: stale.
        if moved > 0 {
            let after = self.b.metrics();
            let stale = after.lifetime.stale - m.lifetime.stale;
            let dropped = after.lifetime.dropped - m.lifetime.dropped;
            assert_eq!(
                stale + dropped,
                n,
                "episode {episode}: permits held through {moved} transitions"
            );
            assert_eq!(after.lifetime.failures, m.lifetime.failures);
            assert_eq!(after.lifetime.successes, m.lifetime.successes);
            assert_eq!(after.window, m.window, "episode {episode}");
            assert_eq!(after.consecutive_failures, m.consecutive_failures);
        }
        assert_eq!(
            self.transitions(),
            before + moved,
            "recording moved nothing"
        );
        assert_eq!(self.b.state(), State::Closed);
    }

    /// Runs until `transitions` transitions and `years` of clock have passed.
    fn run(&mut self, transitions: u64, years: u64) {
        let life = Duration::from_secs(years * 365 * 24 * 3600);
        let mut episode = 0;
        while self.transitions() < transitions || self.clock.elapsed() < life {
            episode += 1;
            match self.rng.below(4) {
                0 => self.flap(),
                1 => self.held_permits(episode),
                _ => {}
            }
            // An idle gap: a millisecond to 25 days, log-uniform.
            let scale = self.rng.below(32);
            let gap = 1 + self.rng.below(1 << scale);
            self.clock.advance(Duration::from_millis(gap));
            self.check_trips_at_threshold(episode);
            self.outage(episode);
            // The policy still trips after the outage, in the phase the probes
            // started.
            self.check_trips_at_threshold(episode);
            self.outage(episode);
        }
        eprintln!(
            "{:?}: {episode} episodes, {} transitions, {:.1} years",
            self.policy,
            self.transitions(),
            self.clock.elapsed().as_secs_f64() / (365.0 * 24.0 * 3600.0)
        );
    }
}

fn soak(transitions: u64, years: u64) {
    for (i, policy) in [
        Policy::Consecutive(5),
        Policy::FailureRate(20),
        Policy::SlowCalls(20),
    ]
    .into_iter()
    .enumerate()
    {
        let mut s = Soak::new(policy, 0x5eed + i as u64);
        s.run(transitions, years);
        let m = s.b.metrics();
        assert!(
            m.lifetime.stale > 0,
            "{policy:?}: the soak held permits through transitions"
        );
    }
}

#[test]
fn soak_a_short_life() {
    soak(100_000, 1);
}

#[test]
#[ignore = "a million transitions per policy and 20 years of clock: CI runs it in release"]
fn soak_years_of_life() {
    soak(1_000_000, 20);
}
