//! The view's metrics through the `metrics` facade. No Redis needed: a fleet whose
//! Redis is unreachable still has a view (empty) and counters (its failed
//! connection attempts).

use cutout_fleet::{Fleet, FleetConfig};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use std::time::{Duration, Instant};

#[test]
fn the_view_is_published_as_gauges_and_counters() {
    // Port 9 on loopback: nothing listens there, the connection is refused.
    let fleet = Fleet::start(
        FleetConfig::new("redis://127.0.0.1:9/")
            .join_wait(Duration::ZERO)
            .io_timeout(Duration::from_millis(100))
            .reconnect(Duration::from_millis(10), Duration::from_millis(50)),
    )
    .expect("starts without Redis");
    let deadline = Instant::now() + Duration::from_secs(5);
    while fleet.view().stats().redis_errors == 0 {
        assert!(
            Instant::now() < deadline,
            "no connection attempt within 5 s"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || fleet.view().record_metrics());
    let values: Vec<(String, DebugValue)> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| (key.key().name().to_owned(), value))
        .collect();
    let value = |name: &str| {
        values
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v)
            .unwrap_or_else(|| panic!("{name} missing from {values:?}"))
    };
    assert!(matches!(value("cutout_fleet_live_peers"), &DebugValue::Gauge(g) if g.0 == 0.0));
    assert!(matches!(value("cutout_fleet_redis_errors_total"), &DebugValue::Counter(n) if n >= 1));
    assert!(matches!(
        value("cutout_fleet_messages_total"),
        DebugValue::Counter(0)
    ));
}
