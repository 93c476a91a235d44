//! Replay a recorded trace of calls through a breaker's settings, on a
//! [`ManualClock`]: which calls would it have turned away, when would it have
//! opened? (feature `replay`)
//!
//! A [`Trace`] is read from CSV or JSON lines (see [`Trace`] for the format: a
//! call's end time, its latency and its outcome, and optionally a key), from a
//! recorder or from an access log. [`replay()`] runs any [`Builder`] over it and
//! returns a [`Report`]: the transitions, the calls admitted and rejected, the
//! failures the breaker spared the dependency and the successes it turned away.
//! With [`Report::opened_within`] a recorded incident becomes a test that the
//! breaker opens in time. A [`Recorder`] writes such a trace from a running
//! service, without blocking its calls.
//!
//! # What a layer records
//! The integrations take a recorder with `record(recorder)`:
//! `CircuitBreakerLayer::record` and `http::HttpLayer::record` (with the
//! `tower` and `http` features), `http::BackendLayer::record` and
//! `reqwest::CircuitBreakerMiddleware::record` (with `http` and `registry`, or
//! `reqwest`). Each call the breaker admitted becomes one row when it ends: its
//! end time, its latency, the outcome the layer's classifier gave the breaker
//! (`success`, `failure` or `ignored`), and its key (the breaker's name for the
//! single-breaker layers, the backend's registry key for the keyed ones). In
//! the single-breaker layers, an error from the service's readiness (a refused
//! connection) is a row too, with no latency: the dependency was asked, even
//! where the breaker then turns the call away (a half-open round already full).
//!
//! A trace is what the dependency did, so a call the breaker rejected is no
//! row: it never reached the dependency, and nothing says how it would have
//! ended. A trace recorded behind a breaker therefore has a gap while the
//! breaker was open: a replay under settings that would have stayed closed
//! there sees none of the calls they would have let through. To record all of
//! a dependency's calls,
//! record before it has a breaker, with `RecordLayer` (feature `tower`) alone
//! around its service, or with the breaker
//! [`disable`](crate::CircuitBreaker::disable)d. A call whose future is dropped
//! before it ends (a timeout outside the layer, a caller that went away) is no
//! row either: it has no outcome.
//!
//! Without a recorder a layer's path is as it was: the single-breaker layers
//! add the recording as an inner layer only when asked, and the keyed ones
//! hold an `Option` that costs a check where a call starts and one where it
//! ends (nothing without this feature).
//!
//! # The replay rule
//! Each call is admitted at `at - latency` and ends at `at`, holding a permit in
//! between, as it did in the recorded run: calls overlap as they overlapped then.
//! One event queue orders the whole replay:
//! - each call has two events: its admission (`try_acquire` at `at - latency`)
//!   and, if admitted, its end (its outcome recorded on its permit at `at`);
//! - events run in time order; at the same instant, ends run before admissions
//!   (an outcome known at `t` counts for a call admitted at `t`), ends in their
//!   calls' admission order, admissions in the trace's order (by admission,
//!   then by end: of two calls admitted together, the shorter first); a call
//!   with no latency is recorded at once on admission;
//! - the clock is moved to each event's time before it runs, so the breaker sees
//!   each call's real latency (the slow-call policy judges it) and each cooldown
//!   elapses as it would have.
//!
//! A rejected call has no end: it did not run. Its recorded outcome is what the
//! dependency did, or would have done, with it: a rejected failure is a failure
//! spared, a rejected success a success turned away.
//!
//! The trace is replayed open-loop: the calls come when they came in the
//! recorded run, whatever the breaker decides. Traffic that reacts to
//! rejections (callers that retry, or workers freed early by a fast rejection and
//! taking the next request sooner) would have come at other times under other
//! settings; a replay under the recorded run's own settings reproduces its
//! decisions, up to the recorded breaker's jitter (a random seed per live
//! breaker; a replay fixes its own, so it is deterministic: the same trace and
//! settings give the same report) and to events at the very same instant that
//! the recorded run ordered otherwise.

#[cfg(feature = "tower")]
mod layer;
mod record;
mod trace;

#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub use layer::{RecordFuture, RecordLayer, RecordService};
pub use record::Recorder;
#[cfg(all(feature = "http", feature = "registry"))]
pub(crate) use record::Timed;
pub use trace::{Call, Trace, TraceError};

use crate::util::splitmix64;
use crate::{Builder, CircuitBreaker, Clock, ConfigError, ManualClock, Outcome, Reason, State};
use std::collections::HashMap;
use std::ops::RangeBounds;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One transition in a replay.
///
/// # Examples
/// ```
/// use cutout::replay::{Trace, replay};
/// use cutout::{CircuitBreaker, State};
///
/// let trace = Trace::from_csv("at_ms,latency_ms,outcome\n10,5,failure\n".as_bytes())?;
/// let report = replay(CircuitBreaker::builder().consecutive_failures(1), &trace)?;
/// let t = &report.transitions[0];
/// assert_eq!((t.at.as_millis(), t.from, t.to), (10, State::Closed, State::Open));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Replayed {
    /// When, from the trace's time zero, to the nanosecond.
    pub at: Duration,
    /// The key of the breaker that moved, in a keyed trace.
    pub key: Option<String>,
    /// The state before.
    pub from: State,
    /// The state after.
    pub to: State,
    /// Why.
    pub reason: Reason,
}

/// What a [`replay()`] did with a trace.
///
/// # Examples
/// ```
/// use cutout::replay::{Trace, replay};
/// use cutout::CircuitBreaker;
/// use std::time::Duration;
///
/// let csv = "at_ms,latency_ms,outcome\n10,5,failure\n20,5,failure\n30,5,success\n";
/// let trace = Trace::from_csv(csv.as_bytes())?;
/// let report = replay(CircuitBreaker::builder().consecutive_failures(2), &trace)?;
/// assert_eq!((report.admitted, report.rejected), (2, 1));
/// assert_eq!(report.successes_turned_away, 1);
/// assert!(report.opened_within(..Duration::from_millis(25)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Report {
    /// Every transition, by time (at one instant, a key's in the order they
    /// happened, the keys in the order they first appear in the trace).
    pub transitions: Vec<Replayed>,
    /// Calls the breaker admitted.
    pub admitted: u64,
    /// Calls it rejected.
    pub rejected: u64,
    /// Rejected calls that had failed: failures the dependency was spared.
    pub failures_spared: u64,
    /// Rejected calls that had succeeded: successes turned away.
    pub successes_turned_away: u64,
    /// Whether each call of the trace was admitted, in [`Trace::calls`] order.
    admitted_calls: Vec<bool>,
}

impl Report {
    /// Whether a breaker opened (moved to [`State::Open`] by a trip or a failed
    /// probe round) at a time within `range`, counted from the trace's time zero.
    ///
    /// # Examples
    /// ```
    /// use cutout::replay::{Trace, replay};
    /// use cutout::CircuitBreaker;
    /// use std::time::Duration;
    ///
    /// let trace = Trace::from_csv("at_ms,latency_ms,outcome\n1500,5,failure\n".as_bytes())?;
    /// let report = replay(CircuitBreaker::builder().consecutive_failures(1), &trace)?;
    /// let s = Duration::from_secs;
    /// assert!(report.opened_within(s(1)..s(2)));
    /// assert!(!report.opened_within(..s(1)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn opened_within(&self, range: impl RangeBounds<Duration>) -> bool {
        self.transitions
            .iter()
            .any(|t| t.to == State::Open && range.contains(&t.at))
    }

    /// Whether call `i` of [`Trace::calls`] was admitted (`None` past the end).
    ///
    /// # Examples
    /// ```
    /// use cutout::replay::{Trace, replay};
    /// use cutout::CircuitBreaker;
    ///
    /// let trace = Trace::from_csv("at_ms,latency_ms,outcome\n10,5,failure\n20,5,success\n".as_bytes())?;
    /// let report = replay(CircuitBreaker::builder().consecutive_failures(1), &trace)?;
    /// assert_eq!(
    ///     (report.was_admitted(0), report.was_admitted(1), report.was_admitted(2)),
    ///     (Some(true), Some(false), None)
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn was_admitted(&self, i: usize) -> Option<bool> {
        self.admitted_calls.get(i).copied()
    }
}

/// What the replay's event queue holds, in the order events at one instant run.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    End,
    Admit,
}

/// Replays `trace` through breakers built from `builder`, one per key (one for a
/// trace without keys), on a [`ManualClock`] that starts at the trace's time zero.
/// See the [module docs](self) for the rule that orders the calls.
///
/// The builder's clock is replaced by the manual one, and its
/// [`on_transition`](Builder::on_transition) listener by the replay's own.
///
/// # Errors
/// The [`ConfigError`] of an invalid `builder`.
///
/// # Examples
/// ```
/// use cutout::replay::{Trace, replay};
/// use cutout::{Builder, Settings, State};
/// use std::time::Duration;
///
/// // An incident: every call fails for a second, from t = 1 s.
/// let mut csv = String::from("at_ms,latency_ms,outcome\n");
/// for i in 0..200 {
///     let outcome = if (100..200).contains(&i) { "failure" } else { "success" };
///     csv.push_str(&format!("{},{},{outcome}\n", i * 10 + 5, 5));
/// }
/// let trace = Trace::from_csv(csv.as_bytes())?;
/// let settings: Settings = serde_json::from_str(r#"{"consecutive_failures": 5}"#)?;
/// let report = replay(Builder::from_settings(&settings), &trace)?;
/// let ms = Duration::from_millis;
/// assert!(report.opened_within(ms(1000)..ms(1100)));
/// assert!(report.failures_spared > 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn replay<C: Clock>(builder: Builder<C>, trace: &Trace) -> Result<Report, ConfigError> {
    // A shadow setting replays as enforcing: the replay is the what-if.
    let builder = builder.reclocked(ManualClock::new()).enforcing();
    let calls = trace.calls();
    // Each key's calls, the keys in the order they first appear (an empty trace:
    // one keyless breaker, so a bad builder is still its error).
    let mut keys: Vec<(Option<&str>, Vec<usize>)> = Vec::new();
    let mut index: HashMap<Option<&str>, usize> = HashMap::new();
    for (i, call) in calls.iter().enumerate() {
        let key = call.key.as_deref();
        let n = *index.entry(key).or_insert_with(|| {
            keys.push((key, Vec::new()));
            keys.len() - 1
        });
        keys[n].1.push(i);
    }
    if keys.is_empty() {
        keys.push((None, Vec::new()));
    }
    let mut report = Report {
        transitions: Vec::new(),
        admitted: 0,
        rejected: 0,
        failures_spared: 0,
        successes_turned_away: 0,
        admitted_calls: vec![false; calls.len()],
    };
    for (n, (key, mine)) in keys.iter().enumerate() {
        let clock = ManualClock::new();
        let log: Arc<Mutex<Vec<Replayed>>> = Arc::default();
        let (written, time, owned) = (log.clone(), clock.clone(), key.map(str::to_owned));
        // A fixed seed for each key, by its first appearance: the same trace and
        // settings give the same jittered cooldowns.
        let breaker = builder
            .clone()
            .reclocked(clock.clone())
            .seeded(splitmix64(n as u64))
            .on_transition(move |t| {
                written
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(Replayed {
                        at: time.elapsed(),
                        key: owned.clone(),
                        from: t.from,
                        to: t.to,
                        reason: t.reason,
                    });
            })
            .build()?;
        // With the thread's ramp-up sums (see `Builder::ramp_up`) empty: they
        // hold this breaker's alone, so its draws too are the same in every
        // replay.
        crate::ramp::with_fresh_sums(|| replay_key(&breaker, &clock, calls, mine, &mut report));
        report
            .transitions
            .append(&mut log.lock().unwrap_or_else(|e| e.into_inner()));
    }
    // Each key's in order; together, by time (a stable sort: at one instant, in
    // the order the keys first appear).
    report.transitions.sort_by_key(|t| t.at);
    Ok(report)
}

/// Replays the calls `mine` (indices into `calls`, all of one key) through
/// `breaker` on `clock`, adding to `report`.
fn replay_key(
    breaker: &CircuitBreaker<ManualClock>,
    clock: &ManualClock,
    calls: &[Call],
    mine: &[usize],
    report: &mut Report,
) {
    let mut events: Vec<(Duration, Event, usize)> = Vec::with_capacity(mine.len() * 2);
    for &i in mine {
        let call = &calls[i];
        events.push((call.admitted(), Event::Admit, i));
        if !call.latency.is_zero() {
            events.push((call.at, Event::End, i));
        }
    }
    events.sort_unstable();

    let mut permits: HashMap<usize, crate::Permit<'_, ManualClock>> = HashMap::new();
    for (at, event, i) in events {
        clock.advance(at.saturating_sub(clock.elapsed()));
        let call = &calls[i];
        match event {
            Event::End => {
                if let Some(permit) = permits.remove(&i) {
                    permit.record(call.outcome);
                }
            }
            Event::Admit => match breaker.try_acquire() {
                Ok(permit) => {
                    report.admitted += 1;
                    report.admitted_calls[i] = true;
                    if call.latency.is_zero() {
                        permit.record(call.outcome);
                    } else {
                        permits.insert(i, permit);
                    }
                }
                Err(_) => {
                    report.rejected += 1;
                    match call.outcome {
                        Outcome::Failure => report.failures_spared += 1,
                        Outcome::Success => report.successes_turned_away += 1,
                        Outcome::Ignored => {}
                    }
                }
            },
        }
    }
}
