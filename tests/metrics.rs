//! The `metrics` feature: values as a recorder sees them, through every state and
//! reason (the ramp's included), over many cycles, and under any breaker name.
#![cfg(feature = "metrics")]

use cutout::export::metrics as names;
use cutout::{CircuitBreaker, ManualClock, Reason, State};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use metrics_util::{CompositeKey, MetricKind};
use std::collections::BTreeMap;
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
    let mut labels: Vec<_> = key
        .key()
        .labels()
        .map(|l| (l.key().to_owned(), l.value().to_owned()))
        .collect();
    labels.sort();
    (key.kind(), key.key().name().to_owned(), labels)
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
        assert_eq!(s.len(), 6 + 5 + 2 + 3, "{s:#?}");

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
        assert_eq!(calls(&s, "success"), Some(3));
        assert_eq!(calls(&s, "failure"), Some(2));
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

/// Over 200 cycles of trips, failed and successful probes, and manual control, each
/// publish sets the counters to their absolute lifetime values (never a
/// per-publish delta, never going back), and the transition counter, summed over
/// its increments, agrees with `Metrics::transitions` for every reason.
#[test]
fn counters_stay_absolute_and_transitions_add_up_over_many_cycles() {
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
        let mut last_rejected = 0;
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
            // The debugging recorder zeroes a counter it reads: only the snapshot
            // right after a publish holds the absolute value.
            if round % 11 == 0 {
                let rejected = counter(&s, names::REJECTED_CALLS, &me).unwrap();
                assert_eq!(rejected, b.metrics().lifetime.rejected);
                assert!(rejected >= last_rejected, "{rejected} < {last_rejected}");
                last_rejected = rejected;
            }
        }
        b.publish_metrics();
        let s = seen(&snapshotter);
        let m = b.metrics();
        assert_eq!(
            counter(&s, names::REJECTED_CALLS, &me),
            Some(m.lifetime.rejected)
        );
        assert_eq!(
            counter(
                &s,
                names::CALLS,
                &[("breaker", "cyc"), ("outcome", "failure")]
            ),
            Some(m.lifetime.failures)
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
/// tripped it.
#[test]
fn window_gauges_are_zero_while_open() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let clock = ManualClock::new();
    metrics::with_local_recorder(&recorder, || {
        let b = CircuitBreaker::builder()
            .name("w")
            .clock(clock.clone())
            .window(Duration::from_secs(10), 10)
            .failure_rate(0.5, 2)
            .build()
            .unwrap();
        let _ = b.call(|| Err::<(), _>(()));
        let _ = b.call(|| Err::<(), _>(()));
        assert_eq!(b.state(), State::Open);
        b.publish_metrics();
        let s = seen(&snapshotter);
        let me = [("breaker", "w")];
        assert_eq!(gauge(&s, names::WINDOW_CALLS, &me), Some(0.0));
        assert_eq!(gauge(&s, names::FAILURE_RATE, &me), Some(0.0));
        assert_eq!(gauge(&s, names::SLOW_CALL_RATE, &me), Some(0.0));
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
        let registry: cutout::Registry<String, ManualClock> = cutout::Registry::builder(
            CircuitBreaker::builder()
                .consecutive_failures(1)
                .clock(ManualClock::new()),
        )
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
