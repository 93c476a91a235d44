//! The observers at their edges, beyond tests/metrics.rs and tests/tracing.rs: a
//! registry's breakers that leave between scrapes, two publishers of one breaker
//! at once, counters published by racing threads, a tracing subscriber that
//! panics while a call's panic unwinds; and `retry_async` dropped mid-probe, and
//! `Send`.
#![cfg(all(feature = "metrics", feature = "tracing", feature = "retry"))]

mod common;

use common::{four_threads_call, on_manual_clock, poll_once, trips_after, trips_on};
use cutout::export::metrics as names;
use cutout::{CircuitBreaker, Dropped, ManualClock, RetryPolicy, State, retry_async};
use metrics::{
    Counter, CounterFn, Gauge, GaugeFn, Histogram, Key, KeyName, Metadata, Recorder, SharedString,
    Unit,
};
use std::collections::BTreeMap;
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

// ---- a recorder that logs every counter value and keeps every gauge's last value,
// and can run a hook from inside one gauge `set` (to let another thread's
// publisher run between two of the first publisher's writes).

type Hook = Box<dyn FnOnce() + Send>;

#[derive(Default)]
struct Shared {
    counters: BTreeMap<String, Vec<u64>>,
    gauges: BTreeMap<String, f64>,
    /// (series, value) that fires the hook, and the hook.
    hook: Option<(String, f64, Hook)>,
}

#[derive(Clone, Default)]
struct Rec(Arc<Mutex<Shared>>);

fn render(key: &Key) -> String {
    let mut labels: Vec<_> = key
        .labels()
        .map(|l| format!("{}={}", l.key(), l.value()))
        .collect();
    labels.sort();
    format!("{}{{{}}}", key.name(), labels.join(","))
}

struct C(String, Arc<Mutex<Shared>>);
impl CounterFn for C {
    fn increment(&self, value: u64) {
        let mut s = self.1.lock().unwrap();
        let v = s.counters.entry(self.0.clone()).or_default();
        let last = v.last().copied().unwrap_or(0);
        v.push(last + value);
    }
    fn absolute(&self, value: u64) {
        self.1
            .lock()
            .unwrap()
            .counters
            .entry(self.0.clone())
            .or_default()
            .push(value);
    }
}

struct G(String, Arc<Mutex<Shared>>);
impl GaugeFn for G {
    fn increment(&self, _: f64) {}
    fn decrement(&self, _: f64) {}
    fn set(&self, value: f64) {
        let hook = {
            let mut s = self.1.lock().unwrap();
            s.gauges.insert(self.0.clone(), value);
            match &s.hook {
                Some((series, v, _)) if *series == self.0 && *v == value => {
                    s.hook.take().map(|(_, _, h)| h)
                }
                _ => None,
            }
        };
        if let Some(hook) = hook {
            hook();
        }
    }
}

impl Recorder for Rec {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(Arc::new(C(render(key), self.0.clone())))
    }
    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::from_arc(Arc::new(G(render(key), self.0.clone())))
    }
    fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::noop()
    }
}

impl Rec {
    /// The last value of counter `series`, checking it never went back.
    fn last(&self, series: &str) -> u64 {
        let s = self.0.lock().unwrap();
        let v = s.counters.get(series).cloned().unwrap_or_default();
        assert!(
            v.windows(2).all(|w| w[0] <= w[1]),
            "{series} went backwards: {v:?}"
        );
        v.last().copied().unwrap_or(0)
    }

    fn gauge(&self, series: &str) -> Option<f64> {
        self.0.lock().unwrap().gauges.get(series).copied()
    }
}

fn success_series(name: &str) -> String {
    format!("{}{{breaker={name},outcome=success}}", names::CALLS)
}

fn state_series(name: &str, state: &str) -> String {
    format!("{}{{breaker={name},state={state}}}", names::STATE)
}

const STATES: [&str; 6] = [
    "closed",
    "open",
    "half_open",
    "forced_open",
    "disabled",
    "recovering",
];

// ---- metrics ------------------------------------------------------------------

/// A registry's breaker evicted between two scrapes publishes what it counted
/// since the last one as it goes, so its key's series loses nothing (here 8
/// successes for key "db": it ended at 4, the 4 made after the first scrape lost
/// with the evicted breaker).
#[cfg(feature = "registry")]
#[test]
fn an_evicted_registry_breaker_publishes_what_it_counted_since_the_last_scrape() {
    let rec = Rec::default();
    metrics::with_local_recorder(&rec, || {
        let clock = ManualClock::new();
        let registry: cutout::Registry<String, ManualClock> =
            cutout::Registry::new(trips_on(5, clock.clone())).unwrap();
        registry.call("db", || Ok::<_, ()>(())).unwrap();
        registry.publish_metrics(); // scrape: 1
        for _ in 0..4 {
            registry.call("db", || Ok::<_, ()>(())).unwrap();
        }
        // No scrape in between: the breaker goes idle and is evicted.
        clock.advance(Duration::from_secs(3600));
        assert_eq!(registry.evict_idle(Duration::from_secs(60)), 1);
        for _ in 0..3 {
            registry.call("db", || Ok::<_, ()>(())).unwrap();
        }
        registry.publish_metrics();
    });
    assert_eq!(
        rec.last(&success_series("db")),
        8,
        "8 successes were recorded for key db"
    );
}

/// Two publishers of one breaker (two scrapers, or a timer and a scrape) run one
/// after the other: the state gauge is left with exactly one state at 1, the
/// current one. Here publisher A has read its snapshot (Closed) and written
/// `closed=1` when the breaker is forced open on another thread, whose publisher
/// B starts then; A's hook waits (bounded) for B. Interleaved, B's whole
/// publication ran there and A then wrote the rest of its stale snapshot
/// (`forced_open=0`): no state at 1.
#[test]
fn two_publishers_of_one_breaker_leave_one_current_state() {
    let rec = Rec::default();
    let b = Arc::new(
        CircuitBreaker::builder()
            .name("pub2")
            .clock(ManualClock::new())
            .build()
            .unwrap(),
    );
    let (started, b_started) = std::sync::mpsc::channel::<()>();
    let (finished, b_finished) = std::sync::mpsc::channel::<()>();
    let publisher_b = {
        let (rec, b) = (rec.clone(), b.clone());
        std::thread::spawn(move || {
            b_started.recv().unwrap();
            b.force_open();
            metrics::with_local_recorder(&rec, || b.publish_metrics());
            let _ = finished.send(()); // A may have stopped waiting
        })
    };
    rec.0.lock().unwrap().hook = Some((
        state_series("pub2", "closed"),
        1.0,
        Box::new(move || {
            started.send(()).unwrap();
            // B cannot finish while A publishes: give it a bounded chance.
            let _ = b_finished.recv_timeout(Duration::from_millis(300));
        }),
    ));
    metrics::with_local_recorder(&rec, || b.publish_metrics());
    publisher_b.join().unwrap();
    assert_eq!(b.state(), State::ForcedOpen);
    let ones: Vec<_> = STATES
        .iter()
        .filter(|s| rec.gauge(&state_series("pub2", s)) == Some(1.0))
        .collect();
    assert_eq!(
        ones,
        [&"forced_open"],
        "after both publications the gauge says the breaker is in {ones:?}"
    );
}

/// Counters published by racing threads, while calls are made, neither go back
/// nor double: each series ends at the breaker's lifetime count (tests/metrics.rs
/// publishes from one thread only). Uses the global recorder, which no other test
/// in this file touches.
#[test]
fn counters_published_by_racing_threads_add_up_exactly() {
    let rec = Rec::default();
    metrics::set_global_recorder(rec.clone()).unwrap();
    let b = CircuitBreaker::builder()
        .name("racing")
        .consecutive_failures(1_000_000)
        .build()
        .unwrap();
    four_threads_call(&b, 2_000, |i| {
        if i % 16 == 0 {
            b.publish_metrics();
        }
    });
    b.publish_metrics();
    let l = b.metrics().lifetime;
    assert_eq!(rec.last(&success_series("racing")), l.successes);
    assert_eq!(
        rec.last(&format!(
            "{}{{breaker=racing,outcome=failure}}",
            names::CALLS
        )),
        l.failures
    );
    assert_eq!(l.successes + l.failures, 8_000);
}

// ---- tracing ------------------------------------------------------------------

/// A subscriber whose every event panics (a buggy layer, a `RefCell` borrowed
/// twice in a writer, ...).
struct Panicking;

impl tracing::Subscriber for Panicking {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, _: &tracing::Event<'_>) {
        panic!("the subscriber panicked");
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// Set in the child process of
/// `a_subscriber_panic_during_an_unwinding_transition_is_caught` whose listener
/// panics (the control).
const CHILD_LISTENER: &str = "CUTOUT_OBSERVERS_LISTENER";
/// Set in its child process whose tracing subscriber panics.
const CHILD_SUBSCRIBER: &str = "CUTOUT_OBSERVERS_SUBSCRIBER";

/// A call that panics, whose dropped permit makes a transition (`Dropped::Failure`
/// and a threshold of one: the drop trips the breaker), has the transition's
/// tracing event emitted while the thread unwinds. A subscriber that panics there
/// panics during a panic: caught, as the user's listener's is, so the process
/// lives on (contract 20). The built-in observers were called bare, and the
/// process aborted. In child processes, so that an abort cannot end this binary.
#[test]
fn a_subscriber_panic_during_an_unwinding_transition_is_caught() {
    let listener = std::env::var_os(CHILD_LISTENER).is_some();
    if listener || std::env::var_os(CHILD_SUBSCRIBER).is_some() {
        let mut builder = CircuitBreaker::builder()
            .consecutive_failures(1)
            .on_drop(Dropped::Failure)
            .clock(ManualClock::new());
        if listener {
            builder = builder.on_transition(|_| panic!("the listener panicked"));
        }
        let b = builder.build().unwrap();
        let run = || {
            std::panic::set_hook(Box::new(|_| {})); // quiet
            let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                b.call(|| -> Result<(), ()> { panic!("the call panicked") })
            }));
            assert!(caught.is_err());
        };
        match listener {
            true => run(),
            false => tracing::subscriber::with_default(Panicking, run),
        }
        assert_eq!(b.state(), State::Open);
        return;
    }
    let test = "a_subscriber_panic_during_an_unwinding_transition_is_caught";
    // The control first: the same panic in the user's listener is caught.
    for mode in [CHILD_LISTENER, CHILD_SUBSCRIBER] {
        let child = common::run_child(test, &[], mode, Duration::from_secs(30));
        assert!(
            child.status.is_some_and(|s| s.success()),
            "{mode}: the child process died: {:?} (a panic during a panic aborts)\n{}",
            child.status,
            child.stderr
        );
    }
}

// ---- retry ----------------------------------------------------------------------

/// `retry_async` dropped mid-attempt while its attempt is the half-open probe
/// gives the probe's slot back (the next caller is admitted and closes the
/// breaker) and counts the attempt once, as dropped; dropped before its first
/// poll it calls nothing and counts nothing. (tests/retry.rs drops it only
/// mid-sleep.)
#[test]
fn retry_async_dropped_mid_probe_gives_the_slot_back_and_counts_it_once() {
    let (b, clock) = on_manual_clock(trips_after(1, Duration::from_secs(1)));
    let _ = b.call(|| Err::<(), _>("trip"));
    clock.advance(Duration::from_secs(1));
    let p = RetryPolicy::builder()
        .max_attempts(5)
        .seed(3)
        .build()
        .unwrap();
    let mut made = 0;
    {
        let unpolled = retry_async(
            &b,
            &p,
            |_| async {},
            || {
                made += 1;
                async { Ok::<(), ()>(()) }
            },
        );
        drop(unpolled);
    }
    assert_eq!((made, b.metrics().lifetime.admitted), (0, 1)); // the trip's
    {
        let mut retrying = pin!(retry_async(
            &b,
            &p,
            |_| async {},
            std::future::pending::<Result<(), ()>>
        ));
        assert!(poll_once(retrying.as_mut()).is_pending());
        assert_eq!(b.state(), State::HalfOpen);
        assert!(b.try_acquire().is_err(), "the attempt holds the only slot");
    }
    let m = b.metrics().lifetime;
    assert_eq!((m.admitted, m.dropped, m.failures), (2, 1, 1)); // trip + probe
    b.try_acquire().expect("the slot came back").success();
    assert_eq!(b.state(), State::Closed);
}

/// `retry_async`'s future is `Send` (it can be `tokio::spawn`ed) with a closure
/// predicate and a runtime's sleep.
#[test]
fn retry_async_is_send() {
    fn is_send<T: Send>(_: &T) {}
    let b = CircuitBreaker::builder().build().unwrap();
    let p = RetryPolicy::builder()
        .retryable(|e: &std::io::Error| e.kind() == std::io::ErrorKind::TimedOut)
        .build()
        .unwrap();
    let f = retry_async(&b, &p, tokio::time::sleep, || async {
        Err::<(), std::io::Error>(std::io::ErrorKind::TimedOut.into())
    });
    is_send(&f);
}
