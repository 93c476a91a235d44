//! The `metrics` feature: values as a recorder sees them, through every state and
//! reason (the ramp's included), over many cycles, and under any breaker name.
#![cfg(feature = "metrics")]

mod common;

use common::{sorted_labels, trips_on};
use cutout::export::metrics as names;
use cutout::{CircuitBreaker, ManualClock, Reason, State};
use metrics::{
    Counter, CounterFn, Gauge, GaugeFn, Histogram, Key, KeyName, Metadata, Recorder, SharedString,
    Unit,
};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use metrics_util::{CompositeKey, MetricKind};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// (kind, name, sorted labels) -> value, for one snapshot of the recorder.
type Seen = BTreeMap<(MetricKind, String, Vec<(String, String)>), DebugValue>;

fn seen(snapshotter: &Snapshotter) -> Seen {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| (flatten(&key), value))
        .collect()
}

fn flatten(key: &CompositeKey) -> (MetricKind, String, Vec<(String, String)>) {
    (
        key.kind(),
        key.key().name().to_owned(),
        sorted_labels(key.key()),
    )
}

fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut v: Vec<_> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    v.sort();
    v
}

fn counter(seen: &Seen, name: &str, pairs: &[(&str, &str)]) -> Option<u64> {
    match seen.get(&(MetricKind::Counter, name.to_owned(), labels(pairs)))? {
        DebugValue::Counter(n) => Some(*n),
        other => panic!("{name} is not a counter: {other:?}"),
    }
}

fn gauge(seen: &Seen, name: &str, pairs: &[(&str, &str)]) -> Option<f64> {
    match seen.get(&(MetricKind::Gauge, name.to_owned(), labels(pairs)))? {
        DebugValue::Gauge(x) => Some(x.into_inner()),
        other => panic!("{name} is not a gauge: {other:?}"),
    }
}

#[test]
fn publish_sets_the_snapshot_and_transitions_are_counted_as_they_happen() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let clock = ManualClock::new();
    metrics::with_local_recorder(&recorder, || {
        let b = CircuitBreaker::builder()
            .name("orders")
            .clock(clock.clone())
            .window(Duration::from_secs(10), 10)
            .failure_rate(0.5, 4)
            .open_duration(Duration::from_secs(1))
            .build()
            .unwrap();
        let me = [("breaker", "orders")];

        for ok in [true, true, false] {
            let _ = b.call(|| if ok { Ok(()) } else { Err(()) });
        }
        b.try_acquire().unwrap().ignore();
        assert!(seen(&snapshotter).is_empty(), "nothing is pushed per call");

        b.publish_metrics();
        let s = seen(&snapshotter);
        let state =
            |s: &Seen, st: &str| gauge(s, names::STATE, &[("breaker", "orders"), ("state", st)]);
        assert_eq!(state(&s, "closed"), Some(1.0));
        for other in ["open", "half_open", "forced_open", "disabled"] {
            assert_eq!(state(&s, other), Some(0.0), "{other}");
        }
        let calls = |s: &Seen, outcome: &str| {
            counter(
                s,
                names::CALLS,
                &[("breaker", "orders"), ("outcome", outcome)],
            )
        };
        assert_eq!(calls(&s, "success"), Some(2));
        assert_eq!(calls(&s, "failure"), Some(1));
        assert_eq!(calls(&s, "ignored"), Some(1));
        assert_eq!(calls(&s, "stale"), Some(0));
        assert_eq!(calls(&s, "dropped"), Some(0));
        assert_eq!(counter(&s, names::REJECTED_CALLS, &me), Some(0));
        assert_eq!(counter(&s, names::SLOW_CALLS, &me), Some(0));
        assert_eq!(gauge(&s, names::FAILURE_RATE, &me), Some(1.0 / 3.0));
        assert_eq!(gauge(&s, names::SLOW_CALL_RATE, &me), Some(0.0));
        assert_eq!(gauge(&s, names::WINDOW_CALLS, &me), Some(3.0));
        assert_eq!(gauge(&s, names::TRIPPED_WINDOW_CALLS, &me), Some(0.0));
        assert_eq!(s.len(), 6 + 5 + 2 + 3 + 3, "{s:#?}");

        // Trip (2 of 4 failed), get rejected twice, then recover through a probe.
        let _ = b.call(|| Err::<(), _>(()));
        assert!(b.call(|| Ok::<_, ()>(())).is_err());
        assert!(b.call(|| Ok::<_, ()>(())).is_err());
        let s = seen(&snapshotter);
        let transitions = |s: &Seen, from: &str, to: &str, reason: &str| {
            counter(
                s,
                names::TRANSITIONS,
                &[
                    ("breaker", "orders"),
                    ("from", from),
                    ("to", to),
                    ("reason", reason),
                ],
            )
        };
        assert_eq!(transitions(&s, "closed", "open", "failure_rate"), Some(1));
        // The recorder's snapshot zeroes what it reads; calls are only pushed by the
        // next publish, never by the calls themselves.
        assert_eq!(calls(&s, "failure"), Some(0));
        assert_eq!(counter(&s, names::REJECTED_CALLS, &me), Some(0));

        clock.advance(Duration::from_secs(1));
        let _ = b.call(|| Ok::<_, ()>(()));
        b.publish_metrics();
        let s = seen(&snapshotter);
        assert_eq!(
            transitions(&s, "open", "half_open", "cooldown_elapsed"),
            Some(1)
        );
        assert_eq!(
            transitions(&s, "half_open", "closed", "probes_succeeded"),
            Some(1)
        );
        assert_eq!(state(&s, "closed"), Some(1.0));
        // Each publish adds what the breaker counted since the last: 3 successes,
        // 2 failures and 2 rejections in all.
        assert_eq!(calls(&s, "success"), Some(1));
        assert_eq!(calls(&s, "failure"), Some(1));
        assert_eq!(counter(&s, names::REJECTED_CALLS, &me), Some(2));
        assert_eq!(
            gauge(&s, names::WINDOW_CALLS, &me),
            Some(0.0),
            "a fresh window"
        );

        b.force_open();
        b.publish_metrics();
        let s = seen(&snapshotter);
        assert_eq!(state(&s, "forced_open"), Some(1.0));
        assert_eq!(state(&s, "closed"), Some(0.0));
        assert_eq!(
            transitions(&s, "closed", "forced_open", "forced_open"),
            Some(1)
        );
    });
}

#[test]
fn every_breaker_gets_its_own_label_and_describe_names_every_metric() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        cutout::export::metrics::describe();
        let a = CircuitBreaker::builder().name("a").build().unwrap();
        let b = CircuitBreaker::builder()
            .name(String::from("b"))
            .build()
            .unwrap();
        let _ = a.call(|| Ok::<_, ()>(()));
        b.force_open();
        a.publish_metrics();
        b.publish_metrics();
        let snapshot = snapshotter.snapshot().into_vec();
        let described = snapshot.iter().filter(|(_, _, d, _)| d.is_some()).count();
        assert_eq!(
            described,
            snapshot.len(),
            "every published metric is described"
        );
        let s: Seen = snapshot
            .into_iter()
            .map(|(k, _, _, v)| (flatten(&k), v))
            .collect();
        let a_state = gauge(&s, names::STATE, &[("breaker", "a"), ("state", "closed")]);
        let b_state = gauge(
            &s,
            names::STATE,
            &[("breaker", "b"), ("state", "forced_open")],
        );
        assert_eq!((a_state, b_state), (Some(1.0), Some(1.0)));
        let ok = |n: &str| counter(&s, names::CALLS, &[("breaker", n), ("outcome", "success")]);
        assert_eq!((ok("a"), ok("b")), (Some(1), Some(0)));
    });
}

/// The ramp after a successful round is published as the `recovering` state (the
/// only state gauge at 1), and each of its transitions is counted under its reason:
/// into the ramp, a failed ramp, and a completed one.
#[test]
fn the_ramp_is_published_as_recovering_and_its_transitions_are_counted() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let clock = ManualClock::new();
    metrics::with_local_recorder(&recorder, || {
        let b = CircuitBreaker::builder()
            .name("ramped")
            .clock(clock.clone())
            .consecutive_failures(1)
            .open_duration(Duration::from_secs(1))
            .ramp_up(Duration::from_secs(10))
            .build()
            .unwrap();
        let _ = b.call(|| Err::<(), _>(()));
        clock.advance(Duration::from_secs(1));
        assert!(b.call(|| Ok::<_, ()>(())).is_ok());
        assert_eq!(b.state(), State::Recovering);
        b.publish_metrics();
        let s = seen(&snapshotter);
        let state =
            |s: &Seen, st: &str| gauge(s, names::STATE, &[("breaker", "ramped"), ("state", st)]);
        assert_eq!(state(&s, "recovering"), Some(1.0));
        for other in ["closed", "open", "half_open", "forced_open", "disabled"] {
            assert_eq!(state(&s, other), Some(0.0), "{other}");
        }
        let transitions = |s: &Seen, from: &str, to: &str, reason: &str| {
            counter(
                s,
                names::TRANSITIONS,
                &[
                    ("breaker", "ramped"),
                    ("from", from),
                    ("to", to),
                    ("reason", reason),
                ],
            )
        };
        assert_eq!(
            transitions(&s, "closed", "open", "consecutive_failures"),
            Some(1)
        );
        assert_eq!(
            transitions(&s, "open", "half_open", "cooldown_elapsed"),
            Some(1)
        );
        assert_eq!(
            transitions(&s, "half_open", "recovering", "probes_succeeded"),
            Some(1)
        );

        // A failure during the ramp (the ramp sheds some calls first) reopens it.
        let _ = (0..100).find_map(|_| {
            b.call(|| Err::<(), _>(()))
                .err()
                .filter(|e| !e.is_rejected())
        });
        assert_eq!(b.state(), State::Open);
        let s = seen(&snapshotter);
        assert_eq!(
            transitions(&s, "recovering", "open", "ramp_failed"),
            Some(1)
        );

        // The next round's ramp runs its course: the level-1 cooldown is 2 s.
        clock.advance(Duration::from_secs(2));
        assert!(b.call(|| Ok::<_, ()>(())).is_ok());
        clock.advance(Duration::from_secs(10));
        let _ = b.call(|| Ok::<_, ()>(()));
        assert_eq!(b.state(), State::Closed);
        let s = seen(&snapshotter);
        assert_eq!(
            transitions(&s, "recovering", "closed", "ramp_completed"),
            Some(1)
        );
    });
}

/// Over 200 cycles of trips, failed and successful probes, and manual control, the
/// call counters, summed over the publishes' increments, are the lifetime counts
/// at each publish, and the transition counter, summed over its increments,
/// agrees with `Metrics::transitions` for every reason.
#[test]
fn counters_and_transitions_add_up_to_the_lifetime_counts_over_many_cycles() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let clock = ManualClock::new();
    metrics::with_local_recorder(&recorder, || {
        let b = CircuitBreaker::builder()
            .name("cyc")
            .clock(clock.clone())
            .consecutive_failures(2)
            .open_duration(Duration::from_secs(1))
            .max_open_duration(Duration::from_secs(1))
            .build()
            .unwrap();
        let me = [("breaker", "cyc")];
        let mut totals: BTreeMap<(String, String, String), u64> = BTreeMap::new();
        let (mut rejected, mut failures) = (0, 0);
        let failed = &[("breaker", "cyc"), ("outcome", "failure")];
        for round in 0..200u32 {
            let _ = b.call(|| Err::<(), _>(()));
            let _ = b.call(|| Err::<(), _>(()));
            let _ = b.call(|| Ok::<_, ()>(())); // rejected
            clock.advance(Duration::from_secs(1));
            if round % 3 == 0 {
                let _ = b.call(|| Err::<(), _>(())); // the probe fails
                clock.advance(Duration::from_secs(1));
            }
            let _ = b.call(|| Ok::<_, ()>(())); // the probe succeeds
            if round % 7 == 0 {
                b.force_open();
                b.reset();
            }
            if round % 11 == 0 {
                b.publish_metrics();
            }
            let s = seen(&snapshotter);
            for ((kind, name, labels), value) in &s {
                if *kind == MetricKind::Counter && name == names::TRANSITIONS {
                    let label = |k: &str| {
                        let (_, v) = labels.iter().find(|(a, _)| a == k).unwrap();
                        v.clone()
                    };
                    let DebugValue::Counter(n) = value else {
                        panic!("{name} is not a counter: {value:?}")
                    };
                    *totals
                        .entry((label("from"), label("to"), label("reason")))
                        .or_default() += n;
                }
            }
            // The debugging recorder zeroes a counter it reads: the snapshot
            // after a publish holds that publish's increment.
            if round % 11 == 0 {
                rejected += counter(&s, names::REJECTED_CALLS, &me).unwrap();
                failures += counter(&s, names::CALLS, failed).unwrap();
                let l = b.metrics().lifetime;
                assert_eq!((rejected, failures), (l.rejected, l.failures));
            }
        }
        b.publish_metrics();
        let s = seen(&snapshotter);
        let m = b.metrics();
        rejected += counter(&s, names::REJECTED_CALLS, &me).unwrap();
        assert_eq!(rejected, m.lifetime.rejected);
        failures += counter(&s, names::CALLS, failed).unwrap();
        assert_eq!(
            (rejected, failures),
            (m.lifetime.rejected, m.lifetime.failures)
        );
        for reason in Reason::iter() {
            let published: u64 = totals
                .iter()
                .filter(|((_, _, r), _)| r == reason.as_str())
                .map(|(_, n)| *n)
                .sum();
            assert_eq!(published, m.transitions(reason), "{reason}");
        }
    });
}

/// The window gauges (calls, failure rate, slow-call rate) read zero outside Closed
/// and Recovering, as documented: an Open breaker's window is not the one that
/// tripped it. The `tripped` gauges hold that one's figures while it is Open, and
/// read zero again once a probe round closes it.
#[test]
fn while_open_the_window_gauges_read_zero_and_the_tripped_gauges_the_trip() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let clock = ManualClock::new();
    metrics::with_local_recorder(&recorder, || {
        let b = CircuitBreaker::builder()
            .name("w")
            .clock(clock.clone())
            .window(Duration::from_secs(10), 10)
            .failure_rate(0.5, 4)
            .slow_calls(Duration::from_millis(100), 1.0)
            .open_duration(Duration::from_secs(1))
            .build()
            .unwrap();
        let _ = b.call(|| Ok::<_, ()>(()));
        let _ = b.call(|| {
            clock.advance(Duration::from_millis(200));
            Ok::<_, ()>(())
        });
        let _ = b.call(|| Err::<(), _>(()));
        let _ = b.call(|| Err::<(), _>(()));
        assert_eq!(b.state(), State::Open);
        b.publish_metrics();
        let s = seen(&snapshotter);
        let me = [("breaker", "w")];
        let figures = |s: &Seen, names: [&str; 3]| names.map(|name| gauge(s, name, &me));
        let window = [
            names::FAILURE_RATE,
            names::SLOW_CALL_RATE,
            names::WINDOW_CALLS,
        ];
        let tripped = [
            names::TRIPPED_FAILURE_RATE,
            names::TRIPPED_SLOW_CALL_RATE,
            names::TRIPPED_WINDOW_CALLS,
        ];
        assert_eq!(figures(&s, window), [Some(0.0); 3]);
        assert_eq!(figures(&s, tripped), [Some(0.5), Some(0.25), Some(4.0)]);

        clock.advance(Duration::from_secs(1));
        for _ in 0..10 {
            if b.state() != State::Closed {
                b.call(|| Ok::<_, ()>(())).unwrap();
            }
        }
        assert_eq!(b.state(), State::Closed, "closed by its probe round");
        b.publish_metrics();
        let s = seen(&snapshotter);
        assert_eq!(figures(&s, tripped), [Some(0.0); 3]);
    });
}

/// After a trip by the consecutive-failure streak, the `tripped` gauges hold the
/// window as it stood at the trip (a rate far from its own threshold): a
/// dashboard reads the rates beside the trip's reason.
#[test]
fn after_a_streak_trip_the_tripped_gauges_hold_the_window_at_the_trip() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let b = CircuitBreaker::builder()
            .name("s")
            .clock(ManualClock::new())
            .consecutive_failures(2)
            .window(Duration::from_secs(10), 10)
            .failure_rate(0.9, 100)
            .build()
            .unwrap();
        let _ = b.call(|| Ok::<_, ()>(()));
        let _ = b.call(|| Err::<(), _>(()));
        let _ = b.call(|| Err::<(), _>(()));
        assert_eq!(b.metrics().transitions(Reason::ConsecutiveFailures), 1);
        b.publish_metrics();
        let s = seen(&snapshotter);
        let me = [("breaker", "s")];
        let rate = gauge(&s, names::TRIPPED_FAILURE_RATE, &me).unwrap();
        let calls = gauge(&s, names::TRIPPED_WINDOW_CALLS, &me);
        assert!(
            (rate - 2.0 / 3.0).abs() < 1e-12 && calls == Some(3.0),
            "{rate} {calls:?}"
        );
    });
}

/// The one counting rule: calls a timeout gave up on, which `on_drop` counted as
/// failures and which tripped the breaker, are published as failures (and as
/// dropped), so a dashboard never shows a breaker opening on zero failures.
#[test]
fn dropped_calls_counted_as_failures_are_published_as_failures() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let clock = ManualClock::new();
    metrics::with_local_recorder(&recorder, || {
        let b = CircuitBreaker::builder()
            .name("timed-out")
            .clock(clock.clone())
            .consecutive_failures(3)
            .on_drop(cutout::Dropped::FailureAfter(Duration::from_millis(500)))
            .build()
            .unwrap();
        for _ in 0..3 {
            let permit = b.try_acquire().unwrap();
            clock.advance(Duration::from_secs(1)); // hung past the timeout, given up
            drop(permit);
        }
        assert_eq!(b.state(), State::Open);
        b.publish_metrics();
        let s = seen(&snapshotter);
        let outcome = |o| {
            counter(
                &s,
                names::CALLS,
                &[("breaker", "timed-out"), ("outcome", o)],
            )
        };
        assert_eq!(outcome("failure"), Some(3));
        assert_eq!(outcome("dropped"), Some(3));
    });
}

/// A breaker's name is its `breaker` label as it is: empty, non-ASCII with quotes
/// and braces, or 10,000 bytes long.
#[test]
fn odd_breaker_names_are_published_verbatim() {
    let long = "x".repeat(10_000);
    for name in [String::new(), "日本語 ✓ \"quoted\" {a=b}".to_owned(), long] {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        metrics::with_local_recorder(&recorder, || {
            let b = CircuitBreaker::builder()
                .name(name.clone())
                .consecutive_failures(1)
                .clock(ManualClock::new())
                .build()
                .unwrap();
            assert_eq!(b.name(), name);
            let _ = b.call(|| Err::<(), _>(()));
            b.publish_metrics();
            let s = seen(&snapshotter);
            assert_eq!(
                gauge(&s, names::STATE, &[("breaker", &name), ("state", "open")]),
                Some(1.0)
            );
            assert_eq!(
                counter(
                    &s,
                    names::TRANSITIONS,
                    &[
                        ("breaker", &name),
                        ("from", "closed"),
                        ("to", "open"),
                        ("reason", "consecutive_failures")
                    ]
                ),
                Some(1)
            );
        });
    }
}

/// With `overflow_name("(overflow)")`, a key named `overflow` and the overflow
/// breaker publish two series: the key's Open and the overflow breaker's Closed
/// both survive. (Under the default name, `"overflow"`, they would share one label
/// set, and one of the two states would be lost.)
#[cfg(feature = "registry")]
#[test]
fn overflow_name_keeps_a_key_named_overflow_apart_from_the_overflow_breaker() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let registry: cutout::Registry<String, ManualClock> =
            cutout::Registry::builder(trips_on(1, ManualClock::new()))
                .max_keys(1)
                .overflow_name("(overflow)")
                .build()
                .unwrap();
        let _ = registry.call("overflow", || Err::<(), _>(()));
        assert_eq!(registry.get("overflow").state(), State::Open);
        assert!(registry.call("other", || Ok::<_, ()>(())).is_ok()); // no room: overflow
        assert_eq!(registry.overflowed(), 1);
        registry.publish_metrics();
        let s = seen(&snapshotter);
        let state = |breaker: &str, st: &str| {
            gauge(&s, names::STATE, &[("breaker", breaker), ("state", st)])
        };
        assert_eq!(
            (state("overflow", "open"), state("overflow", "closed")),
            (Some(1.0), Some(0.0)),
            "the key's breaker"
        );
        assert_eq!(
            (state("(overflow)", "open"), state("(overflow)", "closed")),
            (Some(0.0), Some(1.0)),
            "the overflow breaker"
        );
        let calls = |breaker: &str, outcome: &str| {
            counter(
                &s,
                names::CALLS,
                &[("breaker", breaker), ("outcome", outcome)],
            )
        };
        assert_eq!(
            (calls("overflow", "failure"), calls("overflow", "success")),
            (Some(1), Some(0))
        );
        assert_eq!(
            (
                calls("(overflow)", "failure"),
                calls("(overflow)", "success")
            ),
            (Some(0), Some(1))
        );
    });
}

// ---- counters that never go back: a recorder that logs every value it is given

/// Every counter's values, by rendered key, in the order the recorder saw them.
type Log = Arc<Mutex<BTreeMap<String, Vec<u64>>>>;

/// Logs the value each counter holds after every `increment` (its last value
/// plus the increment) or `absolute` (the value given, as a recorder that stores
/// what it is told would show it), and each value a gauge is set to (its `f64`
/// bits); histograms are dropped.
struct Logging(Log);

struct Logged(String, Log);

impl Logged {
    fn log(&self, value: impl FnOnce(u64) -> u64) {
        let mut log = self.1.lock().unwrap();
        let values = log.entry(self.0.clone()).or_default();
        values.push(value(values.last().copied().unwrap_or(0)));
    }
}

impl CounterFn for Logged {
    fn increment(&self, value: u64) {
        self.log(|last| last + value);
    }
    fn absolute(&self, value: u64) {
        self.log(|_| value);
    }
}

impl GaugeFn for Logged {
    fn increment(&self, value: f64) {
        self.log(|last| (f64::from_bits(last) + value).to_bits());
    }
    fn decrement(&self, value: f64) {
        self.log(|last| (f64::from_bits(last) - value).to_bits());
    }
    fn set(&self, value: f64) {
        self.log(|_| value.to_bits());
    }
}

fn render(key: &Key) -> String {
    let mut labels: Vec<_> = key
        .labels()
        .map(|l| format!("{}={}", l.key(), l.value()))
        .collect();
    labels.sort();
    format!("{}{{{}}}", key.name(), labels.join(","))
}

impl Recorder for Logging {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(Arc::new(Logged(render(key), self.0.clone())))
    }
    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::from_arc(Arc::new(Logged(render(key), self.0.clone())))
    }
    fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::noop()
    }
}

/// The values `series` held, in order: they never go back, and the last is `last`.
fn assert_grew_to(log: &Log, series: &str, last: u64) {
    let values = log.lock().unwrap().get(series).cloned().unwrap_or_default();
    assert!(
        values.windows(2).all(|w| w[0] <= w[1]),
        "counter {series} went backwards: {values:?}"
    );
    assert_eq!(values.last(), Some(&last), "{series}: {values:?}");
}

/// lib.rs recommends a config reload as save -> build with new settings and
/// restore -> swap. The new breaker keeps the name (the `breaker` label) but its
/// lifetime counters start at zero: its publications add to the series, which
/// never goes back (set with `Counter::absolute`, it went from 5 to 3, or, with
/// the facade's atomic storage, whose `absolute` is a `fetch_max`, stayed frozen
/// until the new breaker passed the old count).
#[test]
fn a_reloaded_breaker_adds_to_its_predecessors_series() {
    let log: Log = Log::default();
    let recorder = Logging(log.clone());
    metrics::with_local_recorder(&recorder, || {
        let clock = ManualClock::new();
        let build = || {
            CircuitBreaker::builder()
                .name("db")
                .consecutive_failures(5)
                .clock(clock.clone())
        };
        let old = build().build().unwrap();
        for _ in 0..5 {
            old.call(|| Ok::<_, ()>(())).unwrap();
        }
        old.publish_metrics();

        // The reload lib.rs shows.
        let new = build()
            .consecutive_failures(10)
            .restore(old.save())
            .build()
            .unwrap();
        assert_eq!(new.name(), "db");
        for _ in 0..3 {
            new.call(|| Ok::<_, ()>(())).unwrap();
        }
        new.publish_metrics();
    });
    let series = format!("{}{{breaker=db,outcome=success}}", names::CALLS);
    assert_grew_to(&log, &series, 8);
}

/// The same through a `Registry`: an idle key is evicted ("loses nothing but its
/// lifetime counters") and recreated under the same `breaker` label.
#[cfg(feature = "registry")]
#[test]
fn a_registry_key_evicted_and_used_again_adds_to_its_series() {
    let log: Log = Log::default();
    let recorder = Logging(log.clone());
    metrics::with_local_recorder(&recorder, || {
        let clock = ManualClock::new();
        let registry: cutout::Registry<String, ManualClock> =
            cutout::Registry::new(trips_on(5, clock.clone())).unwrap();
        for _ in 0..5 {
            registry.call("db", || Ok::<_, ()>(())).unwrap();
        }
        registry.publish_metrics();
        clock.advance(Duration::from_secs(3600));
        assert_eq!(registry.evict_idle(Duration::from_secs(60)), 1);
        for _ in 0..3 {
            registry.call("db", || Ok::<_, ()>(())).unwrap();
        }
        registry.publish_metrics();
    });
    let series = format!("{}{{breaker=db,outcome=success}}", names::CALLS);
    assert_grew_to(&log, &series, 8);
}

/// A call in flight through a held handle (as the keyed tower layer and the
/// reqwest middleware hold one) while a reload replaces its key's breaker
/// records on the replaced breaker, which publishes it when its last handle
/// goes: the failure reaches the key's series.
#[cfg(feature = "registry")]
#[test]
fn a_call_in_flight_across_a_reload_reaches_the_keys_series() {
    let log: Log = Log::default();
    let recorder = Logging(log.clone());
    metrics::with_local_recorder(&recorder, || {
        let registry: cutout::Registry<String, ManualClock> =
            cutout::Registry::new(trips_on(5, ManualClock::new())).unwrap();
        registry.publish_metrics();
        let held = registry.get("db");
        let permit = held.try_acquire_owned().unwrap();
        drop(held);
        assert_eq!(registry.restore_all(registry.save_all()), Ok(1)); // a reload
        permit.failure();
        registry.publish_metrics();
    });
    let series = format!("{}{{breaker=db,outcome=failure}}", names::CALLS);
    assert_grew_to(&log, &series, 1);
}

/// A breaker that leaves a registry that publishes sets its gauges to zero: a
/// removed key left Open does not read Open for ever, even where a publisher
/// took it from the registry just before it left and publishes it after (the
/// registry's iteration does): it publishes its counters, and no gauge.
#[cfg(feature = "registry")]
#[test]
fn a_removed_keys_gauges_read_zero() {
    let log: Log = Log::default();
    let recorder = Logging(log.clone());
    let last = |series: &str| {
        let values = log.lock().unwrap().get(series).cloned().unwrap_or_default();
        values.last().map(|bits| f64::from_bits(*bits))
    };
    let open = format!("{}{{breaker=db,state=open}}", names::STATE);
    let tripped = format!("{}{{breaker=db}}", names::TRIPPED_WINDOW_CALLS);
    metrics::with_local_recorder(&recorder, || {
        let windowed = trips_on(1, ManualClock::new())
            .window(Duration::from_secs(10), 10)
            .failure_rate(0.9, 100);
        let registry: cutout::Registry<String, ManualClock> =
            cutout::Registry::new(windowed).unwrap();
        let _ = registry.call("db", || Err::<(), _>(()));
        registry.publish_metrics();
        assert_eq!((last(&open), last(&tripped)), (Some(1.0), Some(1.0)));
        let gone = registry.remove("db").unwrap();
        let _ = gone.call(|| Ok::<_, ()>(())); // rejected: Open
        gone.publish_metrics();
    });
    assert_eq!((last(&open), last(&tripped)), (Some(0.0), Some(0.0)));
    let rejected = format!("{}{{breaker=db}}", names::REJECTED_CALLS);
    assert_eq!(log.lock().unwrap()[&rejected].last(), Some(&1));
}

/// A metrics recorder that panics on every counter and gauge (this test's, on
/// purpose).
struct Panicking;

impl Recorder for Panicking {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, _: &Key, _: &Metadata<'_>) -> Counter {
        panic!("a recorder that fails (this test's, on purpose)")
    }
    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        panic!("a recorder that fails (this test's, on purpose)")
    }
    fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::noop()
    }
}

/// A metrics recorder that panics as a transition is exported does not cost
/// the breaker's listener (a fleet's, say) the transition: the listener has
/// it, then the panic goes on to the caller.
#[test]
fn a_recorder_that_panics_on_a_transition_still_lets_the_listener_have_it() {
    let seen: Arc<Mutex<Vec<State>>> = Arc::default();
    let log = seen.clone();
    let breaker = trips_on(1, ManualClock::new())
        .on_transition(move |t| log.lock().unwrap().push(t.to))
        .build()
        .unwrap();
    let tripped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        metrics::with_local_recorder(&Panicking, || breaker.call(|| Err::<(), _>("down")))
    }));
    assert!(tripped.is_err(), "the recorder's panic reached the caller");
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(*seen.lock().unwrap(), [State::Open]);
}

/// A metrics recorder that panics while a sweep publishes what it evicted costs
/// the registry no place under its cap: the places went back first.
#[cfg(feature = "registry")]
#[test]
fn a_recorder_that_panics_in_a_sweep_costs_no_place() {
    let clock = ManualClock::new();
    let registry: cutout::Registry<String, ManualClock> =
        cutout::Registry::builder(trips_on(5, clock.clone()))
            .max_keys(1)
            .build()
            .unwrap();
    registry.call("a", || Ok::<_, ()>(())).unwrap();
    metrics::with_local_recorder(&DebuggingRecorder::new(), || registry.publish_metrics());
    clock.advance(Duration::from_secs(3600));
    let swept = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        metrics::with_local_recorder(&Panicking, || registry.evict_idle(Duration::from_secs(60)))
    }));
    assert!(swept.is_err(), "the recorder panicked");
    assert_eq!(registry.len(), 0);
    registry.call("b", || Ok::<_, ()>(())).unwrap();
    assert_eq!(
        (registry.len(), registry.overflowed()),
        (1, 0),
        "b has its own place"
    );
}

/// The same for `restore_all`, which publishes the entry it replaces: the
/// restored entry has the place first, and the panic costs none.
#[cfg(all(feature = "registry", feature = "serde"))]
#[test]
fn a_recorder_that_panics_in_restore_all_costs_no_place() {
    let clock = ManualClock::new();
    let registry: cutout::Registry<String, ManualClock> =
        cutout::Registry::builder(trips_on(5, clock.clone()))
            .max_keys(1)
            .build()
            .unwrap();
    registry.call("a", || Ok::<_, ()>(())).unwrap();
    metrics::with_local_recorder(&DebuggingRecorder::new(), || registry.publish_metrics());
    let saved = cutout::SavedState::new("a", State::Closed, std::time::SystemTime::now());
    let restored = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        metrics::with_local_recorder(&Panicking, || registry.restore_all([("a".into(), saved)]))
    }));
    assert!(restored.is_err(), "the recorder panicked");
    assert_eq!(registry.len(), 1, "a, restored");
    clock.advance(Duration::from_secs(3600));
    registry.call("b", || Ok::<_, ()>(())).unwrap();
    assert_eq!(
        (registry.len(), registry.overflowed()),
        (1, 0),
        "b has a place: a's, evicted"
    );
}

/// `circuit_breaker_registry_overflowed_total` (and `_orphaned_total`) carry no
/// label: two registries in one process (one per kind of dependency) add to one
/// series, which counts both (set with `Counter::absolute`, it went back and
/// forth between their counts).
#[cfg(feature = "registry")]
#[test]
fn two_registries_add_their_overflows_to_one_series() {
    let log: Log = Log::default();
    let recorder = Logging(log.clone());
    metrics::with_local_recorder(&recorder, || {
        let capped = || -> cutout::Registry<String, ManualClock> {
            cutout::Registry::builder(trips_on(5, ManualClock::new()))
                .max_keys(1)
                .build()
                .unwrap()
        };
        let (hosts, tenants) = (capped(), capped());
        hosts.call("a", || Ok::<_, ()>(())).unwrap();
        for _ in 0..3 {
            hosts.call("b", || Ok::<_, ()>(())).unwrap(); // overflow
        }
        tenants.call("x", || Ok::<_, ()>(())).unwrap();
        tenants.call("y", || Ok::<_, ()>(())).unwrap(); // overflow
        assert_eq!((hosts.overflowed(), tenants.overflowed()), (3, 1));
        // A scrape publishes both, twice.
        for _ in 0..2 {
            hosts.publish_metrics();
            tenants.publish_metrics();
        }
    });
    let series = format!("{}{{}}", names::REGISTRY_OVERFLOWED);
    assert_grew_to(&log, &series, 4);
}

/// `heap_bytes` tells the truth about publishing too: the counts a breaker last
/// published, and the lock that orders its publications, take their bytes from
/// its first publication on, and no more after.
#[test]
fn the_first_publication_allocates_its_counts_and_heap_bytes_says_so() {
    let recorder = DebuggingRecorder::new();
    metrics::with_local_recorder(&recorder, || {
        let b = CircuitBreaker::builder().build().unwrap();
        let _ = b.call(|| Ok::<_, ()>(()));
        let before = b.heap_bytes();
        b.publish_metrics();
        let published = 8 * 8 + std::mem::size_of::<std::sync::Mutex<()>>();
        assert_eq!(b.heap_bytes(), before + published);
        b.publish_metrics();
        assert_eq!(b.heap_bytes(), before + published);
    });
}

/// A shadow breaker named "watched" that trips on its first failure.
fn watched_shadow() -> CircuitBreaker<ManualClock> {
    CircuitBreaker::builder()
        .name("watched")
        .clock(ManualClock::new())
        .consecutive_failures(1)
        .shadow()
        .build()
        .unwrap()
}

#[test]
fn a_shadow_breakers_transitions_are_labelled_shadow() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let b = watched_shadow();
        let _ = b.call(|| Err::<(), _>(()));
        assert!(b.call(|| Ok::<_, ()>(())).is_ok(), "a shadow never rejects");
        let s = seen(&snapshotter);
        let trip = |shadow: Option<&str>| {
            let mut pairs = vec![
                ("breaker", "watched"),
                ("from", "closed"),
                ("to", "open"),
                ("reason", "consecutive_failures"),
            ];
            pairs.extend(shadow.map(|v| ("shadow", v)));
            counter(&s, names::TRANSITIONS, &pairs)
        };
        assert_eq!(trip(Some("true")), Some(1));
        assert_eq!(trip(None), None, "not counted as a live transition");
    });
}

#[test]
fn a_shadow_breakers_would_be_rejections_are_published_and_no_other_breaker_has_the_series() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let shadow = watched_shadow();
        let live = trips_on(1, ManualClock::new())
            .name("live")
            .build()
            .unwrap();
        for b in [&shadow, &live] {
            let _ = b.call(|| Err::<(), _>(()));
            let _ = b.call(|| Ok::<_, ()>(()));
            let _ = b.call(|| Ok::<_, ()>(()));
            b.publish_metrics();
        }
        let s = seen(&snapshotter);
        // Every series of a shadow breaker is labelled so: its state gauge
        // reads open while it rejects nothing.
        let watched = [("breaker", "watched"), ("shadow", "true")];
        assert_eq!(counter(&s, names::WOULD_REJECT_CALLS, &watched), Some(2));
        assert_eq!(counter(&s, names::REJECTED_CALLS, &watched), Some(0));
        let open = [
            ("breaker", "watched"),
            ("shadow", "true"),
            ("state", "open"),
        ];
        assert_eq!(gauge(&s, names::STATE, &open), Some(1.0));
        assert_eq!(gauge(&s, names::STATE, &open[..1]), None);
        assert_eq!(gauge(&s, names::WINDOW_CALLS, &watched), Some(0.0));
        let unlabelled = |(_, _, labels): &(MetricKind, String, Vec<(String, String)>)| {
            labels.contains(&("breaker".into(), "watched".into()))
                && !labels.contains(&("shadow".into(), "true".into()))
        };
        assert!(
            !s.keys().any(unlabelled),
            "{:?}",
            s.keys().filter(|k| unlabelled(k))
        );
        let live_label = [("breaker", "live")];
        assert_eq!(counter(&s, names::WOULD_REJECT_CALLS, &live_label), None);
        assert_eq!(counter(&s, names::REJECTED_CALLS, &live_label), Some(2));
        let _ = shadow.call(|| Ok::<_, ()>(()));
        shadow.publish_metrics();
        let s = seen(&snapshotter);
        // The snapshot took what was counted before: this is the growth since.
        assert_eq!(counter(&s, names::WOULD_REJECT_CALLS, &watched), Some(1));
    });
}

/// A breaker "payments" that trips on 3 failures, with a candidate "eager"
/// that trips on 1.
fn payments_with_eager() -> CircuitBreaker<ManualClock> {
    CircuitBreaker::builder()
        .name("payments")
        .consecutive_failures(3)
        .clock(ManualClock::new())
        .candidate("eager", CircuitBreaker::builder().consecutive_failures(1))
        .build()
        .unwrap()
}

/// A what-if candidate is published with its live breaker: its state, its
/// would-be rejections, and of those the failures spared and the successes
/// turned away, each series labelled with its name and `shadow`, and the
/// counters grown by what it counted since the last publication.
#[test]
fn a_candidates_state_and_books_are_published_with_its_breaker() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let b = payments_with_eager();
        let _ = b.call(|| Err::<(), _>(())); // eager opens
        let _ = b.call(|| Err::<(), _>(())); // spared
        let _ = b.call(|| Ok::<_, ()>(())); // turned away
        b.publish_metrics();
        let s = seen(&snapshotter);
        let eager = [
            ("breaker", "payments"),
            ("candidate", "eager"),
            ("shadow", "true"),
        ];
        let state = |s: &Seen, state| {
            let mut pairs = eager.to_vec();
            pairs.push(("state", state));
            gauge(s, names::STATE, &pairs)
        };
        assert_eq!(
            (state(&s, "open"), state(&s, "closed")),
            (Some(1.0), Some(0.0))
        );
        let live_open = [("breaker", "payments"), ("state", "open")];
        assert_eq!(gauge(&s, names::STATE, &live_open), Some(0.0));
        assert_eq!(counter(&s, names::WOULD_REJECT_CALLS, &eager), Some(2));
        assert_eq!(
            counter(&s, names::CANDIDATE_FAILURES_SPARED, &eager),
            Some(1)
        );
        assert_eq!(
            counter(&s, names::CANDIDATE_SUCCESSES_TURNED_AWAY, &eager),
            Some(1)
        );
        let _ = b.call(|| Ok::<_, ()>(()));
        b.publish_metrics();
        let s = seen(&snapshotter);
        // The debugging recorder's snapshot holds the growth since the last one.
        assert_eq!(counter(&s, names::WOULD_REJECT_CALLS, &eager), Some(1));
        assert_eq!(
            counter(&s, names::CANDIDATE_SUCCESSES_TURNED_AWAY, &eager),
            Some(1)
        );
        assert_eq!(
            counter(&s, names::CANDIDATE_FAILURES_SPARED, &eager),
            Some(0)
        );
    });
}

#[test]
fn a_candidates_transitions_carry_its_name_beside_the_live_breakers() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let b = payments_with_eager();
        let _ = b.call(|| Err::<(), _>(()));
        let s = seen(&snapshotter);
        let mut pairs = vec![
            ("breaker", "payments"),
            ("from", "closed"),
            ("to", "open"),
            ("reason", "consecutive_failures"),
            ("shadow", "true"),
        ];
        assert_eq!(
            counter(&s, names::TRANSITIONS, &pairs),
            None,
            "no shadow of its own"
        );
        pairs.push(("candidate", "eager"));
        assert_eq!(counter(&s, names::TRANSITIONS, &pairs), Some(1));
        assert_eq!(b.state(), State::Closed);
    });
}
