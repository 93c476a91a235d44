//! The background thread's once-a-second `record_metrics` goes on while Redis
//! is down. Its own test binary: the fleet's threads record, so the recorder is
//! the global one. Every wait is bounded.

mod common;

use common::{Redis, config, namespace, redis_available, within};
use cutout_fleet::Fleet;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use std::time::Duration;

/// The values recorded since the last snapshot (a snapshot takes them: each
/// counter counts from zero again, each gauge reads zero until set).
fn snapshot(snapshotter: &Snapshotter) -> Vec<(String, DebugValue)> {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, v)| (key.key().name().to_owned(), v))
        .collect()
}

/// The value of the metric `name` in `values`, if recorded.
fn value<'v>(values: &'v [(String, DebugValue)], name: &str) -> Option<&'v DebugValue> {
    values.iter().find(|(n, _)| n == name).map(|(_, v)| v)
}

/// While Redis is down, when the gauges and the error counter matter most, the
/// recording goes on once a second: `cutout_fleet_live_peers` falls to 0 with
/// the view, and `cutout_fleet_redis_errors_total` grows with
/// `stats().redis_errors`.
#[test]
fn metrics_are_recorded_while_redis_is_down() {
    if !redis_available() {
        return;
    }
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::set_global_recorder(recorder).unwrap();
    let mut redis = Redis::start();
    let ns = namespace("metrics-outage");
    let me = Fleet::start(config(&redis, &ns, "me")).unwrap();
    let _peer = Fleet::start(config(&redis, &ns, "p")).unwrap();
    assert!(within(Duration::from_secs(5), || {
        value(&snapshot(&snapshotter), "cutout_fleet_live_peers")
            .is_some_and(|v| *v == DebugValue::Gauge(1.0.into()))
    }));
    redis.kill();
    // The view ages out (live_after 1 s) and errors are counted.
    assert!(within(Duration::from_secs(5), || {
        me.view().live_peers() == 0 && me.view().stats().redis_errors >= 4
    }));
    // Counters count from here, and the gauge is set to a mark that only a
    // recording replaces.
    snapshot(&snapshotter);
    metrics::gauge!("cutout_fleet_live_peers").set(99.0);
    let errors_before = me.view().stats().redis_errors;
    // Real time is the subject: three ticks of the once-a-second recording.
    std::thread::sleep(Duration::from_secs(3));
    let grown = me.view().stats().redis_errors - errors_before;
    let values = snapshot(&snapshotter);
    let gauge = value(&values, "cutout_fleet_live_peers");
    let errors = value(&values, "cutout_fleet_redis_errors_total");
    // Both instances record into the one counter; the last second's errors
    // may not be recorded yet.
    let ok = matches!(gauge, Some(DebugValue::Gauge(g)) if g.0 == 0.0)
        && matches!(errors, Some(DebugValue::Counter(n)) if *n >= 1 && *n + 2 >= grown);
    assert!(
        ok,
        "in 3 s the view: live {}, {grown} more redis errors; recorded: live {gauge:?}, errors {errors:?}",
        me.view().live_peers(),
    );
}
