//! One worker as a state machine, and the two drivers that run a crowd of them: real
//! threads that sleep through the dependency's latency (the demo), and a
//! discrete-event loop on a [`ManualClock`] that never sleeps (the test).
//!
//! A worker is handed a request every [`REQUEST_INTERVAL`](crate::sim::REQUEST_INTERVAL).
//! It serves them in order; a request waits while its worker is busy, and its caller
//! gives up after [`CALLER_DEADLINE`]. Half the requests need one dependency call,
//! through the breaker when the run has one; the others are served locally.

use crate::sim::{CALLER_DEADLINE, Dependency, LOCAL_WORK, Response, Scenario};
use crate::stats::Recorder;
#[cfg(test)]
use cutout::State;
use cutout::{CircuitBreaker, Clock, ManualClock, OwnedPermit, Transition};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What every worker of a run shares.
#[derive(Debug)]
pub struct Ctx<'a> {
    /// The script.
    pub scenario: &'a Scenario,
    /// The simulated dependency.
    pub dependency: Dependency,
    /// Where the run's events go.
    pub recorder: &'a Recorder,
}

/// What a busy worker is doing.
#[derive(Debug)]
enum Work<C: Clock> {
    /// A dependency call; `permit` is `None` in the run without a breaker.
    Call {
        response: Response,
        permit: Option<OwnedPermit<C>>,
    },
    /// A request served without the dependency.
    Local,
}

/// The request a worker is serving.
#[derive(Debug)]
struct InFlight<C: Clock> {
    /// When the caller started waiting: the request's arrival, or when its idle
    /// worker woke for it.
    waited_from: Duration,
    started: Duration,
    sick: bool,
    work: Work<C>,
}

/// One worker thread's logic, driven by whoever owns the time.
#[derive(Debug)]
pub struct Worker<C: Clock> {
    id: usize,
    /// The number of the next request to serve.
    next: u64,
    breaker: Option<Arc<CircuitBreaker<C>>>,
    in_flight: Option<InFlight<C>>,
    /// Whether the worker went idle waiting for request `next` to arrive.
    idle: bool,
}

impl<C: Clock> Worker<C> {
    /// Worker `id`, calling through `breaker` if there is one.
    pub fn new(id: usize, breaker: Option<Arc<CircuitBreaker<C>>>) -> Worker<C> {
        Worker {
            id,
            next: 0,
            breaker,
            in_flight: None,
            idle: false,
        }
    }

    /// Does everything due at `now` (run time) and says when to wake it next, or
    /// `None` when it is done.
    pub fn advance(&mut self, now: Duration, ctx: &Ctx<'_>) -> Option<Duration> {
        if let Some(busy) = self.in_flight.take() {
            let latency = now.saturating_sub(busy.waited_from);
            match busy.work {
                Work::Call { response, permit } => {
                    if let Some(permit) = permit {
                        if response.ok {
                            permit.success();
                        } else {
                            permit.failure();
                        }
                    }
                    let call_time = now.saturating_sub(busy.started);
                    ctx.recorder
                        .completed(now, response, call_time, busy.sick, latency);
                }
                Work::Local => ctx.recorder.served_locally(now, latency),
            }
            self.next += 1;
        }
        let end = ctx.scenario.duration();
        loop {
            let arrival = ctx.scenario.arrival(self.id, self.next);
            if arrival >= end {
                return None;
            }
            if now < arrival {
                self.idle = true;
                return Some(arrival);
            }
            // An idle worker woke for this request: the caller waited only for the
            // wake-up, which is the harness's timer slack, not the service's.
            let waited_from = if std::mem::take(&mut self.idle) {
                now
            } else {
                arrival
            };
            if now >= end && waited_from < now {
                self.give_up_the_rest(ctx);
                return None;
            }
            let needed = ctx.dependency.needed_by(self.id, self.next);
            if now - waited_from > CALLER_DEADLINE {
                ctx.recorder.gave_up(now, CALLER_DEADLINE, needed);
                self.next += 1;
                continue;
            }
            let phase = ctx.scenario.phase_at(now);
            if !needed {
                self.in_flight = Some(InFlight {
                    waited_from,
                    started: now,
                    sick: phase.is_sick(),
                    work: Work::Local,
                });
                return Some(now + LOCAL_WORK);
            }
            let response = ctx.dependency.respond(phase.behaviour, self.id, self.next);
            ctx.recorder.attempted(now, response);
            let permit = match &self.breaker {
                None => None,
                Some(breaker) => match breaker.try_acquire_owned() {
                    Ok(permit) => Some(permit),
                    Err(_) => {
                        ctx.recorder.rejected(now, now - waited_from);
                        self.next += 1;
                        continue;
                    }
                },
            };
            ctx.recorder.call(now, phase.is_sick());
            self.in_flight = Some(InFlight {
                waited_from,
                started: now,
                sick: phase.is_sick(),
                work: Work::Call { response, permit },
            });
            return Some(now + response.latency);
        }
    }

    /// The run is over: the requests still queued were never answered.
    fn give_up_the_rest(&mut self, ctx: &Ctx<'_>) {
        let end = ctx.scenario.duration();
        while ctx.scenario.arrival(self.id, self.next) < end {
            let needed = ctx.dependency.needed_by(self.id, self.next);
            ctx.recorder.unanswered(needed);
            self.next += 1;
        }
    }
}

/// Where run time comes from: a real stopwatch, or a [`ManualClock`].
#[derive(Clone, Debug)]
pub enum Timebase {
    /// Time since this instant.
    Real(Instant),
    /// The manual clock's time.
    Manual(ManualClock),
}

impl Timebase {
    /// Run time now.
    pub fn elapsed(&self) -> Duration {
        match self {
            Timebase::Real(start) => start.elapsed(),
            Timebase::Manual(clock) => clock.elapsed(),
        }
    }
}

/// A transition and when (run time) it happened.
#[derive(Clone, Copy, Debug)]
pub struct Logged {
    /// Run time of the event.
    pub at: Duration,
    /// The event.
    pub transition: Transition,
}

/// The breaker's transitions, as its `on_transition` callback reported them.
#[derive(Clone, Debug, Default)]
pub struct TransitionLog(Arc<Mutex<Vec<Logged>>>);

impl TransitionLog {
    /// The callback to give `Builder::on_transition`.
    pub fn listener(&self, time: Timebase) -> impl Fn(&Transition) + Send + Sync + 'static {
        let log = self.0.clone();
        move |t: &Transition| {
            let at = time.elapsed();
            log.lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(Logged { at, transition: *t });
        }
    }

    /// Every transition so far, in generation order (events from different threads
    /// can reach the callback out of order; the generation settles it).
    pub fn entries(&self) -> Vec<Logged> {
        let mut v = self.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
        v.sort_by_key(|l| (l.transition.generation, l.at));
        v
    }

    /// How many transitions happened in `[from, to)`.
    pub fn count_between(&self, from: Duration, to: Duration) -> usize {
        let log = self.0.lock().unwrap_or_else(|e| e.into_inner());
        log.iter().filter(|l| l.at >= from && l.at < to).count()
    }
}

/// Runs one worker on this thread in real time, sleeping through its waits.
pub fn run_thread<C: Clock>(mut worker: Worker<C>, start: Instant, ctx: &Ctx<'_>) {
    let mut now = start.elapsed();
    while let Some(wake) = worker.advance(now, ctx) {
        let target = start + wake;
        let left = target.saturating_duration_since(Instant::now());
        if !left.is_zero() {
            std::thread::sleep(left);
        }
        now = start.elapsed();
    }
}

/// Everything a simulated run produced.
#[derive(Debug)]
pub struct Simulated {
    /// The run with the breaker.
    pub with: Recorder,
    /// The run without.
    pub without: Recorder,
    /// The breaker's transitions.
    pub log: TransitionLog,
    /// The breaker, after the run.
    pub breaker: Arc<CircuitBreaker<ManualClock>>,
}

/// Runs the storm twice, with and without the breaker, as discrete events on a
/// [`ManualClock`]: no threads, no sleeps, the same script and the same dependency
/// as the live demo.
#[cfg_attr(not(test), allow(dead_code))]
pub fn simulate(scenario: &Scenario, seed: u64) -> Simulated {
    simulate_into(scenario, seed, Recorder::new(scenario))
}

/// [`simulate`], the run with the breaker recorded by `with` (a
/// [`Recorder::recording`] for `--record`).
pub fn simulate_into(scenario: &Scenario, seed: u64, with: Recorder) -> Simulated {
    let clock = ManualClock::new();
    let log = TransitionLog::default();
    let breaker = Arc::new(
        scenario
            .breaker(CircuitBreaker::builder().clock(clock.clone()))
            .on_transition(log.listener(Timebase::Manual(clock.clone())))
            .build()
            .expect("the demo's breaker configuration is valid"),
    );
    let dependency = Dependency::new(seed);
    let without = Recorder::new(scenario);
    simulate_one(scenario, dependency, &with, Some(&breaker), &clock);
    simulate_one(scenario, dependency, &without, None, &ManualClock::new());
    Simulated {
        with,
        without,
        log,
        breaker,
    }
}

fn simulate_one(
    scenario: &Scenario,
    dependency: Dependency,
    recorder: &Recorder,
    breaker: Option<&Arc<CircuitBreaker<ManualClock>>>,
    clock: &ManualClock,
) {
    /// Tick boundaries sort before worker events at the same instant: an event at
    /// the boundary belongs to the next tick.
    const TICK_EVENT: u8 = 0;
    const WORKER_EVENT: u8 = 1;
    let ctx = Ctx {
        scenario,
        dependency,
        recorder,
    };
    let mut workers: Vec<Worker<ManualClock>> = (0..scenario.threads)
        .map(|id| Worker::new(id, breaker.cloned()))
        .collect();
    let mut queue = BinaryHeap::new();
    for id in 0..workers.len() {
        queue.push(Reverse((Duration::ZERO, WORKER_EVENT, id)));
    }
    for i in 0..scenario.ticks() {
        queue.push(Reverse((scenario.tick_start(i + 1), TICK_EVENT, i)));
    }
    while let Some(Reverse((at, kind, i))) = queue.pop() {
        clock.advance(at.saturating_sub(clock.elapsed()));
        if kind == TICK_EVENT {
            recorder.close_tick(i, breaker.map(|b| b.state()));
        } else if let Some(wake) = workers[i].advance(at, &ctx) {
            queue.push(Reverse((wake, WORKER_EVENT, i)));
        }
    }
}

#[cfg(test)]
/// The state `log` says the breaker was in at run time `t`.
pub fn state_at(log: &[Logged], t: Duration) -> State {
    log.iter()
        .take_while(|l| l.at <= t)
        .last()
        .map_or(State::Closed, |l| l.transition.to)
}
