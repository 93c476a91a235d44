//! Publishing through the [`metrics`] facade (feature `metrics`).
//!
//! Counters that change on every call are never pushed on the call path. Instead
//! [`CircuitBreaker::publish_metrics`] reads the breaker's
//! [`metrics`](CircuitBreaker::metrics) snapshot, sets the gauges from it, and
//! adds to each counter what the breaker counted since its last publication:
//! call it on every scrape or on a timer. Transitions are rare,
//! so the transition counter is incremented when each one happens, by the thread
//! that made it. [`describe`] registers a unit and a description for every name.
//!
//! Every metric carries a `breaker` label: the breaker's [`name`](crate::Builder::name).
//! Every metric of a [shadow](crate::Builder::shadow) breaker also carries
//! `shadow="true"`: its state gauge reads `open` while it would reject, and it
//! rejects nothing (an alert on the state leaves it out with `shadow!="true"`).
//! A breaker's what-if candidates ([`Builder::candidate`](crate::Builder::candidate))
//! are published with it, under its `breaker` label, with `candidate` (the
//! candidate's name) and `shadow="true"`: their state gauge, their would-be
//! rejections, and of those the failures spared and the successes turned away
//! (their other figures are in [`CircuitBreaker::candidates`]).
//!
//! Cost: nothing on the call path. Each transition increments its counter through
//! the facade, which builds the labelled key: a small allocation per transition.
//!
//! | name | kind | other labels | value | updated by |
//! |------|------|--------------|-------|------------|
//! | `circuit_breaker_state` | gauge | `state`: `closed`, `open`, `half_open`, `forced_open`, `disabled`, `recovering` | 1 for the current state, 0 for the other five | `publish_metrics` |
//! | `circuit_breaker_calls_total` | counter | `outcome`: `success`, `failure`, `ignored`, `stale`, `dropped` | [`Lifetime`](crate::Lifetime) outcomes since the breaker was built, by its [one counting rule](crate::Lifetime#one-counting-rule): a dropped call counted as a failure is in `failure` and in `dropped` | `publish_metrics` |
//! | `circuit_breaker_slow_calls_total` | counter | | successes, failures and dropped calls slower than the slow-call threshold | `publish_metrics` |
//! | `circuit_breaker_rejected_calls_total` | counter | | calls turned away | `publish_metrics` |
//! | `circuit_breaker_would_reject_calls_total` | counter | | calls a shadow breaker would have turned away, and ran ([`Lifetime::would_reject`](crate::Lifetime::would_reject)), or a what-if candidate (with `candidate`); published from the first | `publish_metrics` |
//! | `circuit_breaker_candidate_failures_spared_total`, `circuit_breaker_candidate_successes_turned_away_total` | counter | `candidate`, `shadow` (see below) | of a what-if candidate's would-be rejections, the calls that failed and that succeeded ([`CandidateReport`](crate::CandidateReport)) | `publish_metrics` |
//! | `circuit_breaker_transitions_total` | counter | `from`, `to` (state names), `reason` ([`Reason::as_str`](crate::Reason::as_str)); `shadow`: `true` on a shadow breaker's ([`Transition::shadow`](crate::Transition::shadow)) and a what-if candidate's, which also has `candidate`: its name ([`Builder::candidate`](crate::Builder::candidate)) | transitions | each transition |
//! | `circuit_breaker_failure_rate` | gauge | | the window's failure rate, 0 to 1 | `publish_metrics` |
//! | `circuit_breaker_slow_call_rate` | gauge | | the window's slow-call rate, 0 to 1 | `publish_metrics` |
//! | `circuit_breaker_window_calls` | gauge | | calls in the sliding window | `publish_metrics` |
//! | `circuit_breaker_tripped_failure_rate`, `circuit_breaker_tripped_slow_call_rate`, `circuit_breaker_tripped_window_calls` | gauge | | while Open after a policy's trip, the window's figures at the trip ([`Metrics::tripped_by`](crate::Metrics::tripped_by)): those that tripped it, or, after a trip by the consecutive-failure streak, the window as it stood; 0 otherwise | `publish_metrics` |
//! | `circuit_breaker_registry_overflowed_total` | counter | (no `breaker` label) | lookups a `Registry` with `max_keys` routed to its overflow breaker (itself published with its own `breaker` label: `"overflow"`, or as `RegistryBuilder::overflow_name` says) | `Registry::publish_metrics` |
//! | `circuit_breaker_registry_orphaned_total` | counter | (no `breaker` label) | outcomes a `Registry` lost because their breaker was removed or replaced while the call ran, or evicted in eviction's one race ([`Registry::orphaned`](crate::Registry::orphaned)) | `Registry::publish_metrics` |
//!
//! The `*_total` counters other than transitions grow by
//! [`Counter::increment`](::metrics::Counter::increment), each publication by
//! what the breaker's lifetime counters grew since its last (its first, by all
//! it counted since it was built, whenever the recorder was installed). So a
//! series never goes back: a breaker that replaces another under the same name
//! (a reloaded configuration, a registry key evicted and used again) adds to its
//! series, and breakers that share a name (two registries' overflow breakers) add
//! to one. The transition counter counts from the recorder's installation.
//! Window figures are zero outside Closed and Recovering (each phase counts
//! afresh); the `tripped` gauges hold, while the breaker is Open, the figures that
//! tripped it.
//!
//! # Examples
//! ```
//! let breaker = cutout::CircuitBreaker::builder()
//!     .name("inventory")
//!     .consecutive_failures(3)
//!     .build()?;
//! cutout::export::metrics::describe();
//! // ... on every scrape:
//! breaker.publish_metrics();
//! # Ok::<(), cutout::ConfigError>(())
//! ```

use crate::attach::Attachment;
use crate::event::Transition;
use crate::sync::{AtomicU64, Ordering};
use crate::{CircuitBreaker, Clock, State};
use ::metrics::{Label, Unit, counter, describe_counter, describe_gauge, gauge};
use std::borrow::Cow;

/// How many lifetime counters a breaker publishes: five outcomes, slow,
/// rejected, would-be rejected.
const COUNTED: usize = 8;

/// What this exporter keeps beside a breaker (or a registry), in its
/// [`Attachment`], from its first publication: `N` counters as it last published
/// them, so that each publication adds their growth since, and a lock that puts
/// one publication of the publisher after another.
struct Marks<const N: usize> {
    counts: [AtomicU64; N],
    /// Held by a publication from its snapshot to its last write: the gauges are
    /// set, not added to, so two publications interleaved could leave one gauge
    /// from each (no state at 1, or two). One after the other, the last to finish
    /// has the newest snapshot. It holds whether the breaker has left a registry
    /// that publishes: its gauges were set to zero, and stay so (a publisher that
    /// took it from the registry just before it left publishes no gauge after).
    publishing: std::sync::Mutex<bool>,
}

impl<const N: usize> Marks<N> {
    /// The exporter's state in `attached`, attached now if this is the first
    /// publication. `None` only if another integration took the attachment, which
    /// none of this crate does.
    fn of(attached: &Attachment) -> Option<&Marks<N>> {
        attached.get_or_init(|| Marks {
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
            publishing: std::sync::Mutex::new(false),
        })
    }

    /// Runs one publication, after any other of this publisher's in progress,
    /// with whether its breaker has left its registry (see `publishing`).
    fn publish<R>(&self, publication: impl FnOnce(&mut bool) -> R) -> R {
        // A publication that panicked (in the recorder) left nothing to repair.
        let mut departed = self
            .publishing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        publication(&mut departed)
    }

    /// Counter `i`'s growth since it was last published, now that it reads `now`;
    /// `now` is published from here on.
    fn growth(&self, i: usize, now: u64) -> u64 {
        // Relaxed: `fetch_max` splits the growth between racing publishers, each
        // part published once (and a reading older than one published adds
        // nothing); it orders no other memory.
        now.saturating_sub(self.counts[i].fetch_max(now, Ordering::Relaxed))
    }
}

#[cfg(feature = "registry")]
impl<K, C: Clock, S> crate::Registry<K, C, S> {
    /// The registry's attachment, where this exporter keeps its state.
    fn attachment(&self) -> &Attachment {
        &self.attached
    }
}

/// Gauge: 1 for the current state, 0 for the others (label `state`).
pub const STATE: &str = "circuit_breaker_state";
/// Counter: outcomes recorded since the breaker was built (label `outcome`).
pub const CALLS: &str = "circuit_breaker_calls_total";
/// Counter: calls slower than the slow-call threshold.
pub const SLOW_CALLS: &str = "circuit_breaker_slow_calls_total";
/// Counter: calls rejected.
pub const REJECTED_CALLS: &str = "circuit_breaker_rejected_calls_total";
/// Counter: calls a shadow breaker would have rejected, and ran.
pub const WOULD_REJECT_CALLS: &str = "circuit_breaker_would_reject_calls_total";
/// Counter: of a what-if candidate's would-be rejections, the calls that failed.
pub const CANDIDATE_FAILURES_SPARED: &str = "circuit_breaker_candidate_failures_spared_total";
/// Counter: of a what-if candidate's would-be rejections, the calls that succeeded.
pub const CANDIDATE_SUCCESSES_TURNED_AWAY: &str =
    "circuit_breaker_candidate_successes_turned_away_total";
/// Counter: transitions (labels `from`, `to`, `reason`).
pub const TRANSITIONS: &str = "circuit_breaker_transitions_total";
/// Gauge: the window's failure rate.
pub const FAILURE_RATE: &str = "circuit_breaker_failure_rate";
/// Gauge: the window's slow-call rate.
pub const SLOW_CALL_RATE: &str = "circuit_breaker_slow_call_rate";
/// Gauge: calls in the window.
pub const WINDOW_CALLS: &str = "circuit_breaker_window_calls";
/// Gauge: while Open after a policy's trip, the window's failure rate at the trip.
pub const TRIPPED_FAILURE_RATE: &str = "circuit_breaker_tripped_failure_rate";
/// Gauge: while Open after a policy's trip, the window's slow-call rate at the trip.
pub const TRIPPED_SLOW_CALL_RATE: &str = "circuit_breaker_tripped_slow_call_rate";
/// Gauge: while Open after a policy's trip, the calls in the window at the
/// trip.
pub const TRIPPED_WINDOW_CALLS: &str = "circuit_breaker_tripped_window_calls";
/// The window's gauges: failure rate, slow-call rate, calls.
const WINDOW: [&str; 3] = [FAILURE_RATE, SLOW_CALL_RATE, WINDOW_CALLS];
/// The tripping window's gauges, in the same order.
const TRIPPED: [&str; 3] = [
    TRIPPED_FAILURE_RATE,
    TRIPPED_SLOW_CALL_RATE,
    TRIPPED_WINDOW_CALLS,
];
/// Counter: lookups a capped registry routed to its overflow breaker (no
/// `breaker` label).
pub const REGISTRY_OVERFLOWED: &str = "circuit_breaker_registry_overflowed_total";
/// Counter: outcomes a registry lost because their breaker left it while the call
/// ran (no `breaker` label).
pub const REGISTRY_ORPHANED: &str = "circuit_breaker_registry_orphaned_total";

/// The label every metric carries: the breaker's name.
pub const BREAKER_LABEL: &str = "breaker";

const STATES: [State; 6] = [
    State::Closed,
    State::Open,
    State::HalfOpen,
    State::ForcedOpen,
    State::Disabled,
    State::Recovering,
];

/// Registers a unit and a description for every metric in the
/// [table](self) with the installed recorder. Call it once, after installing the
/// recorder.
///
/// # Examples
/// ```
/// cutout::export::metrics::describe();
/// ```
pub fn describe() {
    describe_gauge!(
        STATE,
        "1 for the circuit breaker's current state, 0 otherwise"
    );
    describe_counter!(
        CALLS,
        Unit::Count,
        "calls through the circuit breaker, by outcome"
    );
    describe_counter!(
        SLOW_CALLS,
        Unit::Count,
        "calls slower than the circuit breaker's slow-call threshold"
    );
    describe_counter!(
        REJECTED_CALLS,
        Unit::Count,
        "calls the circuit breaker rejected"
    );
    describe_counter!(
        WOULD_REJECT_CALLS,
        Unit::Count,
        "calls a shadow circuit breaker would have rejected, and ran"
    );
    describe_counter!(
        CANDIDATE_FAILURES_SPARED,
        Unit::Count,
        "calls a what-if candidate would have rejected that failed"
    );
    describe_counter!(
        CANDIDATE_SUCCESSES_TURNED_AWAY,
        Unit::Count,
        "calls a what-if candidate would have rejected that succeeded"
    );
    describe_counter!(
        TRANSITIONS,
        Unit::Count,
        "circuit breaker state transitions, by from, to and reason"
    );
    describe_gauge!(
        FAILURE_RATE,
        "failure rate over the circuit breaker's sliding window, 0 to 1"
    );
    describe_gauge!(
        SLOW_CALL_RATE,
        "slow-call rate over the circuit breaker's sliding window, 0 to 1"
    );
    describe_gauge!(
        WINDOW_CALLS,
        Unit::Count,
        "calls in the circuit breaker's sliding window"
    );
    describe_gauge!(
        TRIPPED_FAILURE_RATE,
        "while open, the failure rate in the circuit breaker's window when it tripped, 0 to 1"
    );
    describe_gauge!(
        TRIPPED_SLOW_CALL_RATE,
        "while open, the slow-call rate in the circuit breaker's window when it tripped, 0 to 1"
    );
    describe_gauge!(
        TRIPPED_WINDOW_CALLS,
        Unit::Count,
        "while open, the calls in the circuit breaker's sliding window when it tripped"
    );
    describe_counter!(
        REGISTRY_OVERFLOWED,
        Unit::Count,
        "lookups a capped registry routed to its shared overflow breaker"
    );
    describe_counter!(
        REGISTRY_ORPHANED,
        Unit::Count,
        "outcomes a registry lost because their breaker left it while the call ran"
    );
}

impl<C: Clock> CircuitBreaker<C> {
    /// Publishes this breaker's [`metrics`](Self::metrics) snapshot to the installed
    /// `metrics` recorder: the state gauge, the call counters and the window gauges
    /// of the [table](crate::export::metrics). Call it on every scrape or on a
    /// timer; it costs one snapshot plus a recorder lookup per metric, and nothing
    /// on the call path. Once it has published, a breaker publishes its counters'
    /// growth once more when it is dropped, so its last calls reach its series.
    ///
    /// # Examples
    /// ```
    /// let breaker = cutout::CircuitBreaker::builder().name("search").build()?;
    /// let _ = breaker.call(|| Ok::<_, ()>(()));
    /// breaker.publish_metrics(); // circuit_breaker_calls_total{breaker="search",outcome="success"} 1
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
    pub fn publish_metrics(&self) {
        let Some(published) = Marks::<COUNTED>::of(&self.attached) else {
            return;
        };
        published.publish(|departed| {
            let m = self.metrics();
            let labels = |more: &[(&'static str, &'static str)]| self.labels(more);
            publish_counts(published, labels, m.lifetime);
            if *departed {
                return;
            }
            publish_state(labels, m.state);
            let tripped = m.tripped_by.unwrap_or_default();
            for (window, [rate, slow_rate, calls]) in [(m.window, WINDOW), (tripped, TRIPPED)] {
                gauge!(rate, labels(&[])).set(window.failure_rate());
                gauge!(slow_rate, labels(&[])).set(window.slow_call_rate());
                // Window counts are far below 2^53, where f64 stops being exact.
                gauge!(calls, labels(&[])).set(window.calls as f64);
            }
            self.for_each_candidate(publish_candidate);
        });
    }
}

impl<C> CircuitBreaker<C> {
    /// This breaker's labels (its name, and `shadow` on a shadow breaker's),
    /// then `more`.
    fn labels(&self, more: &[(&'static str, &'static str)]) -> Vec<Label> {
        let mut labels = vec![Label::new(BREAKER_LABEL, self.name_cow().clone())];
        if self.is_shadow() {
            labels.push(Label::new("shadow", "true"));
        }
        labels.extend(more.iter().map(|&(key, value)| Label::new(key, value)));
        labels
    }

    /// Sets this breaker's gauges to zero for good: it has left the registry
    /// that published them, and its later publications set none.
    #[cfg(feature = "registry")]
    fn clear_gauges(&self) {
        let Some(published) = Marks::<COUNTED>::of(&self.attached) else {
            return;
        };
        published.publish(|departed| {
            *departed = true;
            for state in STATES {
                gauge!(STATE, self.labels(&[("state", state.as_str())])).set(0.0);
            }
            for window in WINDOW.into_iter().chain(TRIPPED) {
                gauge!(window, self.labels(&[])).set(0.0);
            }
        });
    }

    /// Publishes the growth of this breaker's counters alone: what a breaker
    /// leaving a registry that publishes owes its series (see
    /// [`Registry::publish_metrics`](crate::Registry::publish_metrics)), and what
    /// one that has published owes as it goes.
    pub(crate) fn publish_counters(&self) {
        if let Some(published) = Marks::<COUNTED>::of(&self.attached) {
            let labels = |more: &[(&'static str, &'static str)]| self.labels(more);
            published.publish(|_| publish_counts(published, labels, self.lifetime()));
        }
    }
}

/// A breaker that has published publishes, as it goes, what it counted since its
/// last publication: the calls recorded through a handle kept after it left a
/// registry (an owned permit in flight, a tower or reqwest call) reach its
/// series, as the counts of one that never left do. Caught while the thread
/// unwinds, where a recorder's panic would abort the process.
impl<C> Drop for CircuitBreaker<C> {
    fn drop(&mut self) {
        if self.attached.get::<Marks<COUNTED>>().is_none() {
            return;
        }
        match std::thread::panicking() {
            false => self.publish_counters(),
            true => {
                let publish = std::panic::AssertUnwindSafe(|| self.publish_counters());
                let _ = std::panic::catch_unwind(publish);
            }
        }
    }
}

/// Adds to each counter of `l`, under the breaker's `labels`, its growth since
/// its last publication (in `published`).
fn publish_counts(
    published: &Marks<COUNTED>,
    labels: impl Fn(&[(&'static str, &'static str)]) -> Vec<Label>,
    l: crate::Lifetime,
) {
    let grown = |i, n| published.growth(i, n);
    for (i, (outcome, n)) in [
        ("success", l.successes),
        ("failure", l.failures),
        ("ignored", l.ignored),
        ("stale", l.stale),
        ("dropped", l.dropped),
    ]
    .into_iter()
    .enumerate()
    {
        counter!(CALLS, labels(&[("outcome", outcome)])).increment(grown(i, n));
    }
    counter!(SLOW_CALLS, labels(&[])).increment(grown(5, l.slow));
    counter!(REJECTED_CALLS, labels(&[])).increment(grown(6, l.rejected));
    // Only a shadow breaker counts these: any other has no such series.
    if l.would_reject != 0 {
        counter!(WOULD_REJECT_CALLS, labels(&[])).increment(grown(7, l.would_reject));
    }
}

/// Sets the state gauge, under a breaker's `labels`: 1 for `current`, 0 for
/// the other states.
fn publish_state(labels: impl Fn(&[(&'static str, &'static str)]) -> Vec<Label>, current: State) {
    for state in STATES {
        let value = if state == current { 1.0 } else { 0.0 };
        gauge!(STATE, labels(&[("state", state.as_str())])).set(value);
    }
}

/// Publishes a what-if candidate's state and counts (see the [module](self)):
/// its own attachment keeps what it last published.
fn publish_candidate<C>(candidate: &CircuitBreaker<C>, report: crate::CandidateReport) {
    let Some(published) = Marks::<3>::of(&candidate.attached) else {
        return;
    };
    let name = Label::new("candidate", report.name);
    let labels = |more: &[(&'static str, &'static str)]| {
        let mut labels = candidate.labels(more);
        labels.push(name.clone());
        labels
    };
    publish_state(labels, report.state);
    for (i, (metric, n)) in [
        (WOULD_REJECT_CALLS, report.would_reject),
        (CANDIDATE_FAILURES_SPARED, report.failures_spared),
        (
            CANDIDATE_SUCCESSES_TURNED_AWAY,
            report.successes_turned_away,
        ),
    ]
    .into_iter()
    .enumerate()
    {
        counter!(metric, labels(&[])).increment(published.growth(i, n));
    }
}

/// Counts one transition; called by the thread that made it, after its CAS.
// One signature for every observer (see `crate::OBSERVERS`); this one clones the
// `Cow`, a pointer copy for a static name.
#[allow(clippy::ptr_arg)]
pub(crate) fn transition(
    name: &Cow<'static, str>,
    candidate: Option<&Cow<'static, str>>,
    t: &Transition,
) {
    let mut labels = vec![
        Label::new(BREAKER_LABEL, name.clone()),
        Label::new("from", t.from.as_str()),
        Label::new("to", t.to.as_str()),
        Label::new("reason", t.reason.as_str()),
    ];
    if t.shadow {
        labels.push(Label::new("shadow", "true"));
    }
    if let Some(candidate) = candidate {
        labels.push(Label::new("candidate", candidate.clone()));
    }
    counter!(TRANSITIONS, labels).increment(1);
}

#[cfg(feature = "registry")]
impl<K, C, S> crate::Registry<K, C, S>
where
    K: std::hash::Hash + Eq + Clone + Send + Sync + 'static,
    C: Clock + Clone,
    S: std::hash::BuildHasher,
{
    /// Publishes every breaker's metrics ([`CircuitBreaker::publish_metrics`]), each
    /// with its own `breaker` label (its name: see [Names](crate::Registry#names)). Call it
    /// on every scrape or on a timer. Once a registry has published, a breaker that
    /// leaves it (evicted, removed, or replaced by `restore_all`) publishes its
    /// counters as it goes, so that what it counted since the last scrape is not
    /// lost to its series (a key evicted and used again adds to them), and sets
    /// its gauges to zero for good (a removed key left Open does not read Open,
    /// even published again by a scrape that took it just before it left); what calls
    /// in flight through a handle kept meanwhile (an owned permit, the keyed tower
    /// layer, the reqwest middleware) record on it after that, it publishes when
    /// its last handle goes.
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, Registry};
    ///
    /// let registry: Registry<String> = Registry::new(CircuitBreaker::builder())?;
    /// let _ = registry.call("payments", || Ok::<_, ()>(()));
    /// let _ = registry.call("search", || Err::<(), _>(()));
    /// // circuit_breaker_calls_total{breaker="payments",outcome="success"} 1
    /// // circuit_breaker_calls_total{breaker="search",outcome="failure"} 1 ...
    /// registry.publish_metrics();
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
    pub fn publish_metrics(&self) {
        let Some(published) = Marks::<2>::of(self.attachment()) else {
            return;
        };
        published.publish(|_| {
            self.for_each(|_, breaker| breaker.publish_metrics());
            if let Some(overflow) = self.overflow() {
                overflow.publish_metrics();
                counter!(REGISTRY_OVERFLOWED).increment(published.growth(0, self.overflowed()));
            }
            counter!(REGISTRY_ORPHANED).increment(published.growth(1, self.orphaned()));
        });
    }

    /// A breaker leaving the registry: publishes its counters and sets its
    /// gauges to zero (a key left Open would read Open for ever), if the
    /// registry has ever published (see [`publish_metrics`](Self::publish_metrics)).
    pub(crate) fn publish_departed(&self, breaker: &CircuitBreaker<C>) {
        if self.attachment().get::<Marks<2>>().is_some() {
            breaker.publish_counters();
            breaker.clear_gauges();
        }
    }
}
