//! The `metrics` feature: values as a recorder sees them.
#![cfg(feature = "metrics")]

use cutout::export::metrics as names;
use cutout::{CircuitBreaker, ManualClock};
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
