//! Transitions: a log that collects them, and what a valid stream of them is.

use super::on_manual_clock;
use cutout::{Builder, CircuitBreaker, ManualClock, Transition};
use std::sync::{Arc, Mutex};

/// The transitions a breaker announced, in order.
pub type Log = Arc<Mutex<Vec<Transition>>>;

/// A new log, and a listener that appends each transition to it.
pub fn log() -> (Log, impl Fn(&Transition) + Send + Sync + 'static) {
    let log = Log::default();
    let sink = log.clone();
    (log, move |t: &Transition| sink.lock().unwrap().push(*t))
}

/// `builder` built on a new `ManualClock`, its transitions logged: the breaker,
/// its clock and the log.
pub fn logged(builder: Builder) -> (CircuitBreaker<ManualClock>, ManualClock, Log) {
    let (log, listener) = log();
    let (breaker, clock) = on_manual_clock(builder.on_transition(listener));
    (breaker, clock, log)
}

/// A breaker builder on `clock` whose transitions land in the returned log.
pub fn logged_on(clock: &ManualClock) -> (Builder<ManualClock>, Log) {
    let (log, listener) = log();
    let builder = CircuitBreaker::builder()
        .clock(clock.clone())
        .on_transition(listener);
    (builder, log)
}

/// Whether `t`'s reason may make its move, on a breaker with or without
/// `ramp_up`: a successful half-open round goes to Recovering with it, to Closed
/// without.
pub fn valid(t: &Transition, ramp: bool) -> bool {
    use cutout::{Reason, State::*};
    let recovered = if ramp { Recovering } else { Closed };
    match t.reason {
        Reason::ConsecutiveFailures | Reason::FailureRate | Reason::SlowCallRate => {
            (t.from, t.to) == (Closed, Open)
        }
        Reason::CooldownElapsed => (t.from, t.to) == (Open, HalfOpen),
        Reason::ProbesSucceeded => (t.from, t.to) == (HalfOpen, recovered),
        Reason::ProbeFailed | Reason::HalfOpenTimeout => (t.from, t.to) == (HalfOpen, Open),
        Reason::ForcedOpen => t.to == ForcedOpen && t.from != ForcedOpen,
        Reason::Disabled => t.to == Disabled && t.from != Disabled,
        Reason::Reset => t.to == Closed,
        Reason::External => (t.from, t.to) == (Closed, Open),
        Reason::RampCompleted => ramp && (t.from, t.to) == (Recovering, Closed),
        Reason::RampFailed => ramp && (t.from, t.to) == (Recovering, Open),
        _ => false,
    }
}

/// The transitions of `log`, each with the thread that delivered it, in
/// generation order; asserts that each thread delivered its own in generation
/// order.
pub fn in_generation_order(log: &[(std::thread::ThreadId, Transition)]) -> Vec<Transition> {
    let mut last = std::collections::HashMap::new();
    for (thread, t) in log {
        if let Some(prev) = last.insert(*thread, t.generation) {
            assert!(
                t.generation > prev,
                "{thread:?} delivered {} after {prev}",
                t.generation
            );
        }
    }
    let mut stream: Vec<Transition> = log.iter().map(|(_, t)| *t).collect();
    stream.sort_by_key(|t| t.generation);
    stream
}
