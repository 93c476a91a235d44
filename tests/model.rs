//! Model-based test: random operation sequences run against the real breaker and a
//! plain sequential reference model, compared after every step (admission decision,
//! probe flag, state, backoff level, generation, retry_after, window counts,
//! lifetime counters).
//! Each sequence runs with and without `ramp_up`; with it, the model decides the
//! ramp's admissions by the documented schedule and running sum (see `ramp.rs` in
//! the crate), so every admission and rejection in a ramp is compared too.
//!
//! Under `--cfg cutout_tiny_generations` (CI runs it so) the generation is 3 bits,
//! and sequences cross its wrap every 8 transitions. The comparison is then exact
//! up to the first step where the generation's width can show: a permit recorded
//! or dropped a whole number of cycles after its admission (it passes as current by
//! construction), or a window bucket of a phase a whole cycle back still inside the
//! window (its tag reads as the current phase's). A case ends there; everything
//! before it (staleness at every other distance, streaks and rounds that start
//! empty in every phase, the window's phases kept apart) was checked.

mod common;

use common::any_outcome;
use cutout::{CircuitBreaker, ManualClock, Outcome, OwnedPermit, State};
use proptest::prelude::*;
use std::sync::Arc;
use std::time::Duration;

const MS: u64 = 1_000_000;
const STREAK: u64 = 3;
const PROBES: u64 = 2;
const MIN_CALLS: u64 = 4;
const RATE: f64 = 0.5;
const SLOW_NANOS: u64 = 50 * MS;
const SLOW_RATE: f64 = 0.75;
const BUCKET_NANOS: u64 = 100 * MS;
const BUCKETS: u64 = 4;
const OPEN_MS: u64 = 1000;
const MAX_OPEN_MS: u64 = 5000;
const TIMEOUT_MS: u64 = 3000;
const RAMP_MS: u64 = 2000;
/// The ramp's arithmetic, as `Builder::ramp_up` documents it: shares of `ONE`
/// rising from 10% (rounded up) to all, and a running sum per stripe.
const ONE: u64 = 1 << 16;
const START: u64 = ONE.div_ceil(10);
/// Transitions after which a generation repeats.
#[cfg(not(cutout_tiny_generations))]
const CYCLE: u64 = 1 << 32;
#[cfg(cutout_tiny_generations)]
const CYCLE: u64 = 8;

#[derive(Clone, Copy, Debug)]
enum Op {
    Acquire,
    /// Records a held permit's outcome: the first, or the second if the ramp
    /// admitted it.
    Record(usize, Outcome, Outcome),
    /// Records the newest held permit's outcome, as `Record` does.
    RecordNewest(Outcome, Outcome),
    /// Calls in a row: an `Acquire` and a `RecordNewest` each. Runs of failing
    /// calls take the breaker round its states, into a ramp and through one.
    Calls(usize, Outcome, Outcome),
    Drop(usize),
    Advance(u64),
    ForceOpen,
    Disable,
    Reset,
}

fn op() -> impl Strategy<Value = Op> {
    let outcome = any_outcome();
    // Mostly failures: a ramp admits few calls, and only a streak or a failure
    // rate among them trips it, before the ramp ends.
    let in_ramp = prop_oneof![
        1 => Just(Outcome::Success),
        4 => Just(Outcome::Failure),
        1 => Just(Outcome::Ignored)
    ];
    prop_oneof![
        60 => Just(Op::Acquire),
        60 => (any::<usize>(), outcome.clone(), in_ramp.clone())
            .prop_map(|(i, o, r)| Op::Record(i, o, r)),
        20 => (1usize..40, outcome, in_ramp).prop_map(|(n, o, r)| Op::Calls(n, o, r)),
        10 => any::<usize>().prop_map(Op::Drop),
        30 => prop_oneof![0u64..120, Just(999), Just(1000), Just(2000), Just(3000), 0u64..6000]
            .prop_map(|ms| Op::Advance(ms * MS + if ms % 7 == 0 { MS / 2 } else { 0 })),
        1 => Just(Op::ForceOpen),
        1 => Just(Op::Disable),
        2 => Just(Op::Reset),
    ]
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum MState {
    Closed,
    Open {
        opened: u64,
        level: u64,
    },
    HalfOpen {
        start: u64,
        level: u64,
        issued: u64,
        succeeded: u64,
    },
    Forced {
        level: u64,
    },
    Disabled {
        level: u64,
    },
    Recovering {
        start: u64,
        level: u64,
    },
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Closed,
    Probe,
    Disabled,
    Ramp,
}

#[derive(Clone, Copy, Debug)]
struct Held {
    generation: u64,
    kind: Kind,
    started: u64,
}

#[derive(Default, Debug, PartialEq, Eq)]
struct Counts {
    admitted: u64,
    rejected: u64,
    successes: u64,
    failures: u64,
    slow: u64,
    ignored: u64,
    stale: u64,
    dropped: u64,
}

/// The reference: an enum state machine, a streak, and a log of the closed phase's
/// outcomes.
struct Model {
    st: MState,
    generation: u64,
    streak: u64,
    /// Whether a check found the window below the minimum with a rate at its
    /// threshold there: the next success checks the rates too.
    check_due: bool,
    log: Vec<(u64, bool, bool)>,
    /// Every window write ever: its time and generation (for [`Model::aliased`]).
    writes: Vec<(u64, u64)>,
    now: u64,
    counts: Counts,
    /// Whether `ramp_up` is on.
    ramp: bool,
    /// The ramp's running sum: each case's one thread decides on its own stripe
    /// (a stripe's sum starts at 0 for a new breaker; the two tests' threads hold
    /// the first slots, and every breaker owns at least two stripes).
    sum: u64,
}

fn cooldown_ms(level: u64) -> u64 {
    (OPEN_MS << level).min(MAX_OPEN_MS)
}
const MAX_LEVEL: u64 = 3; // 1000, 2000, 4000, 5000

impl Model {
    fn ticks(&self) -> u64 {
        self.now / MS
    }

    fn moved(&mut self, st: MState) {
        self.st = st;
        self.generation += 1;
        self.check_due = false;
        if matches!(st, MState::Closed | MState::Recovering { .. }) {
            self.streak = 0;
            self.log.clear();
        }
    }

    /// Whether an earlier phase a whole number of generation cycles back has a
    /// window bucket still inside the window: its tag reads as this phase's.
    fn aliased(&self) -> bool {
        let e = self.now / BUCKET_NANOS;
        self.writes.iter().any(|&(t, g)| {
            g != self.generation
                && (self.generation - g).is_multiple_of(CYCLE)
                && t / BUCKET_NANOS + BUCKETS > e
        })
    }

    /// Whether a permit of generation `g` passes as current by construction.
    fn passes_as_current(&self, g: u64) -> bool {
        g != self.generation && (self.generation - g).is_multiple_of(CYCLE)
    }

    fn window(&self) -> (u64, u64, u64) {
        let e = self.now / BUCKET_NANOS;
        self.log
            .iter()
            .filter(|(t, _, _)| t / BUCKET_NANOS + BUCKETS > e)
            .fold((0, 0, 0), |(c, f, s), &(_, fl, sl)| {
                (c + 1, f + u64::from(fl), s + u64::from(sl))
            })
    }

    /// Puts a sample in the window now: whether a rate trips the window, and
    /// whether one would at the minimum number of calls with the window below it.
    fn sample(&mut self, failed: bool, slow: bool) -> (bool, bool) {
        self.log.push((self.now, failed, slow));
        self.writes.push((self.now, self.generation));
        let (calls, failures, slows) = self.window();
        let reached = |calls: u64| {
            failures as f64 >= RATE * calls as f64 || slows as f64 >= SLOW_RATE * calls as f64
        };
        (
            calls >= MIN_CALLS && reached(calls),
            calls < MIN_CALLS && reached(MIN_CALLS),
        )
    }

    /// Ok(probe?) or Err((state, retry_after ms)).
    fn acquire(&mut self) -> Result<Held, (State, Option<u64>)> {
        loop {
            let now = self.ticks();
            match self.st {
                MState::Closed | MState::Disabled { .. } => {
                    self.counts.admitted += 1;
                    let kind = if self.st == MState::Closed {
                        Kind::Closed
                    } else {
                        Kind::Disabled
                    };
                    return Ok(Held {
                        generation: self.generation,
                        kind,
                        started: self.now,
                    });
                }
                MState::Forced { .. } => {
                    self.counts.rejected += 1;
                    return Err((State::ForcedOpen, None));
                }
                MState::Recovering { start, .. } => {
                    let elapsed = now.saturating_sub(start);
                    if elapsed >= RAMP_MS {
                        self.moved(MState::Closed);
                        continue;
                    }
                    let share = START + (ONE - START) * elapsed / RAMP_MS;
                    let before = self.sum.wrapping_add(ONE - 1);
                    self.sum = self.sum.wrapping_add(share);
                    if before / ONE == before.wrapping_add(share) / ONE {
                        self.counts.rejected += 1;
                        return Err((State::Recovering, Some(0)));
                    }
                    self.counts.admitted += 1;
                    return Ok(Held {
                        generation: self.generation,
                        kind: Kind::Ramp,
                        started: self.now,
                    });
                }
                MState::Open { opened, level } => {
                    let deadline = opened + cooldown_ms(level);
                    if now < deadline {
                        self.counts.rejected += 1;
                        return Err((State::Open, Some(deadline - now)));
                    }
                    self.moved(MState::HalfOpen {
                        start: now,
                        level,
                        issued: 0,
                        succeeded: 0,
                    });
                }
                MState::HalfOpen {
                    start,
                    level,
                    issued,
                    succeeded,
                } => {
                    if now >= start + TIMEOUT_MS {
                        self.moved(MState::Open {
                            opened: now,
                            level: (level + 1).min(MAX_LEVEL),
                        });
                        continue;
                    }
                    if issued >= PROBES {
                        self.counts.rejected += 1;
                        // Until the round can end, but no longer than the cooldown
                        // a failed round would start.
                        let reopened = cooldown_ms((level + 1).min(MAX_LEVEL));
                        let retry = (start + TIMEOUT_MS - now).min(reopened);
                        return Err((State::HalfOpen, Some(retry)));
                    }
                    self.st = MState::HalfOpen {
                        start,
                        level,
                        issued: issued + 1,
                        succeeded,
                    };
                    self.counts.admitted += 1;
                    return Ok(Held {
                        generation: self.generation,
                        kind: Kind::Probe,
                        started: self.now,
                    });
                }
            }
        }
    }

    fn release(&mut self) {
        if let MState::HalfOpen {
            start,
            level,
            issued,
            succeeded,
        } = self.st
        {
            self.st = MState::HalfOpen {
                start,
                level,
                issued: issued - 1,
                succeeded,
            };
        }
    }

    fn record(&mut self, h: Held, outcome: Outcome) {
        if h.generation != self.generation {
            self.counts.stale += 1;
            return;
        }
        let failed = match outcome {
            Outcome::Ignored => {
                self.counts.ignored += 1;
                if h.kind == Kind::Probe {
                    self.release();
                }
                return;
            }
            Outcome::Success => false,
            Outcome::Failure => true,
        };
        let slow = self.now - h.started > SLOW_NANOS;
        if failed {
            self.counts.failures += 1;
        } else {
            self.counts.successes += 1;
        }
        self.counts.slow += u64::from(slow);
        let now = self.ticks();
        match (h.kind, self.st) {
            (Kind::Closed, MState::Closed) | (Kind::Ramp, MState::Recovering { .. }) => {
                self.streak = if failed { self.streak + 1 } else { 0 };
                let (rate_trip, at_minimum) = self.sample(failed, slow);
                let checks = failed || slow || self.check_due;
                if self.streak >= STREAK || checks && rate_trip {
                    self.trip(now);
                } else if failed || slow {
                    self.check_due |= at_minimum;
                } else if checks {
                    self.check_due = at_minimum;
                }
            }
            (
                Kind::Probe,
                MState::HalfOpen {
                    start,
                    level,
                    issued,
                    succeeded,
                },
            ) => {
                if failed || slow {
                    self.moved(MState::Open {
                        opened: now,
                        level: (level + 1).min(MAX_LEVEL),
                    });
                } else if succeeded + 1 >= PROBES && self.ramp {
                    self.moved(MState::Recovering { start: now, level });
                } else if succeeded + 1 >= PROBES {
                    self.moved(MState::Closed);
                } else {
                    self.st = MState::HalfOpen {
                        start,
                        level,
                        issued,
                        succeeded: succeeded + 1,
                    };
                }
            }
            _ => {}
        }
    }

    /// A dropped permit: counted as dropped; in its own phase, one slow call if it
    /// ran past the threshold (the streak untouched, a slow probe reopens), else
    /// ignored.
    fn abandon(&mut self, h: Held) {
        self.counts.dropped += 1;
        if h.generation != self.generation {
            return;
        }
        if self.now - h.started <= SLOW_NANOS {
            if h.kind == Kind::Probe {
                self.release();
            }
            return;
        }
        self.counts.slow += 1;
        let now = self.ticks();
        match (h.kind, self.st) {
            (Kind::Closed, MState::Closed) | (Kind::Ramp, MState::Recovering { .. }) => {
                let (rate_trip, at_minimum) = self.sample(false, true);
                if rate_trip {
                    self.trip(now);
                } else {
                    self.check_due |= at_minimum;
                }
            }
            (Kind::Probe, MState::HalfOpen { level, .. }) => self.moved(MState::Open {
                opened: now,
                level: (level + 1).min(MAX_LEVEL),
            }),
            _ => {}
        }
    }

    /// A trip policy's condition held: Closed opens at level 0, Recovering at the
    /// next level.
    fn trip(&mut self, now: u64) {
        let level = match self.st {
            MState::Recovering { level, .. } => (level + 1).min(MAX_LEVEL),
            _ => 0,
        };
        self.moved(MState::Open { opened: now, level });
    }

    fn manual(&mut self, op: Op) {
        let level = self.level();
        match op {
            Op::ForceOpen if !matches!(self.st, MState::Forced { .. }) => {
                self.moved(MState::Forced { level })
            }
            Op::Disable if !matches!(self.st, MState::Disabled { .. }) => {
                self.moved(MState::Disabled { level })
            }
            Op::Reset => self.moved(MState::Closed),
            _ => {}
        }
    }

    /// The backoff level: the next cooldown's in Open and HalfOpen, the one a
    /// trip from Recovering builds on, and the one kept while forced open or
    /// disabled; Closed is at level 0.
    fn level(&self) -> u64 {
        match self.st {
            MState::Open { level, .. }
            | MState::HalfOpen { level, .. }
            | MState::Forced { level }
            | MState::Disabled { level }
            | MState::Recovering { level, .. } => level,
            MState::Closed => 0,
        }
    }

    fn state(&self) -> State {
        match self.st {
            MState::Closed => State::Closed,
            MState::Open { .. } => State::Open,
            MState::HalfOpen { .. } => State::HalfOpen,
            MState::Forced { .. } => State::ForcedOpen,
            MState::Disabled { .. } => State::Disabled,
            MState::Recovering { .. } => State::Recovering,
        }
    }
}

fn run(ops: Vec<Op>, ramp: bool) -> Result<(), TestCaseError> {
    let clock = ManualClock::new();
    let mut builder = CircuitBreaker::builder();
    if ramp {
        builder = builder.ramp_up(Duration::from_millis(RAMP_MS));
    }
    let breaker = Arc::new(
        builder
            .consecutive_failures(STREAK as u32)
            .window(Duration::from_nanos(BUCKET_NANOS * BUCKETS), BUCKETS as u32)
            .failure_rate(RATE, MIN_CALLS as u32)
            .slow_calls(Duration::from_nanos(SLOW_NANOS), SLOW_RATE)
            .open_duration(Duration::from_millis(OPEN_MS))
            .max_open_duration(Duration::from_millis(MAX_OPEN_MS))
            .half_open_probes(PROBES as u32)
            .half_open_timeout(Duration::from_millis(TIMEOUT_MS))
            .clock(clock.clone())
            .build()
            .unwrap(),
    );
    let mut model = Model {
        st: MState::Closed,
        generation: 0,
        streak: 0,
        check_due: false,
        log: Vec::new(),
        writes: Vec::new(),
        now: 0,
        counts: Counts::default(),
        ramp,
        sum: 0,
    };
    let mut held: Vec<(OwnedPermit<ManualClock>, Held)> = Vec::new();
    let ops = ops.into_iter().flat_map(|op| match op {
        Op::Calls(n, o, r) => [Op::Acquire, Op::RecordNewest(o, r)].repeat(n),
        op => vec![op],
    });
    for (step, op) in ops.enumerate() {
        let op = match op {
            Op::RecordNewest(o, r) => Op::Record(held.len().wrapping_sub(1), o, r),
            op => op,
        };
        match op {
            Op::Acquire => {
                let real = breaker.try_acquire_owned();
                let want = model.acquire();
                match (real, want) {
                    (Ok(p), Ok(h)) => {
                        prop_assert_eq!(p.is_probe(), h.kind == Kind::Probe, "step {}", step);
                        prop_assert_eq!(
                            u64::from(p.generation()),
                            h.generation % CYCLE,
                            "step {}",
                            step
                        );
                        held.push((p, h));
                    }
                    (Err(r), Err((state, after))) => {
                        prop_assert_eq!(r.state(), state, "step {}", step);
                        prop_assert_eq!(
                            r.retry_after(),
                            after.map(Duration::from_millis),
                            "step {}",
                            step
                        );
                    }
                    (real, want) => {
                        return Err(TestCaseError::fail(format!(
                            "step {step}: real {:?}, model {want:?}",
                            real.map(|p| p.is_probe())
                        )));
                    }
                }
            }
            Op::Record(i, ..) | Op::Drop(i)
                if !held.is_empty()
                    && model.passes_as_current(held[i % held.len()].1.generation) =>
            {
                return Ok(()); // the generation's width shows: see the module docs
            }
            Op::Record(i, outcome, in_ramp) if !held.is_empty() => {
                let (p, h) = held.swap_remove(i % held.len());
                let outcome = if h.kind == Kind::Ramp {
                    in_ramp
                } else {
                    outcome
                };
                p.record(outcome);
                model.record(h, outcome);
            }
            Op::Drop(i) if !held.is_empty() => {
                let (p, h) = held.swap_remove(i % held.len());
                drop(p);
                model.abandon(h);
            }
            Op::Record(..) | Op::Drop(_) => {}
            Op::RecordNewest(..) | Op::Calls(..) => unreachable!("expanded above"),
            Op::Advance(nanos) => {
                clock.advance(Duration::from_nanos(nanos));
                model.now += nanos;
            }
            Op::ForceOpen => {
                breaker.force_open();
                model.manual(op);
            }
            Op::Disable => {
                breaker.disable();
                model.manual(op);
            }
            Op::Reset => {
                breaker.reset();
                model.manual(op);
            }
        }
        if model.aliased() {
            return Ok(()); // the generation's width shows: see the module docs
        }
        let m = breaker.metrics();
        prop_assert_eq!(m.state, model.state(), "step {}: {:?}", step, op);
        prop_assert_eq!(u64::from(m.level), model.level(), "step {}: {:?}", step, op);
        prop_assert_eq!(
            u64::from(m.generation),
            model.generation % CYCLE,
            "step {}",
            step
        );
        if matches!(model.state(), State::Closed | State::Recovering) {
            let (calls, failures, slow) = model.window();
            prop_assert_eq!(
                (m.window.calls, m.window.failures, m.window.slow),
                (calls, failures, slow),
                "step {}",
                step
            );
            prop_assert_eq!(m.consecutive_failures, model.streak, "step {}", step);
        }
        let l = m.lifetime;
        let real = Counts {
            admitted: l.admitted,
            rejected: l.rejected,
            successes: l.successes,
            failures: l.failures,
            slow: l.slow,
            ignored: l.ignored,
            stale: l.stale,
            dropped: l.dropped,
        };
        prop_assert_eq!(&real, &model.counts, "step {}", step);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn the_breaker_agrees_with_the_reference_model_at_every_step(ops in prop::collection::vec(op(), 1..150)) {
        run(ops, false)?;
    }

    /// On a thread of its own per case: a thread's ramp sums live in a small
    /// thread-local table, and the model knows a thread's first sum for a breaker
    /// (it admits the first call), not one left behind by an earlier case's breaker.
    #[test]
    fn with_ramp_up_the_breaker_agrees_with_the_reference_model_at_every_step(ops in prop::collection::vec(op(), 1..150)) {
        std::thread::spawn(move || run(ops, true)).join().expect("the case panicked")?;
    }
}
