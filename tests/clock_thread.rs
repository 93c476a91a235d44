//! `cutout-clock`, the default clock's refresh thread, is started only by a breaker
//! that uses the default clock. A test binary of its own, so that
//! no other test starts the thread first; Linux only (it reads
//! `/proc/self/task/*/comm`).
#![cfg(target_os = "linux")]

mod common;

use common::{on_manual_clock, trips_after};
use cutout::{CircuitBreaker, Clock, DefaultClock, StdClock};
use std::time::Duration;

fn clock_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.trim() == "cutout-clock")
        .count()
}

/// One test, so the steps run in order in this process.
#[test]
fn only_the_default_clock_starts_the_refresh_thread() {
    let (manual, clock) = on_manual_clock(trips_after(1, Duration::from_secs(1)));
    let std = CircuitBreaker::builder()
        .window(Duration::from_secs(1), 10)
        .slow_calls(Duration::from_millis(100), 0.5)
        .clock(StdClock::new())
        .build()
        .unwrap();
    // Use them every way that reads a clock: calls, a trip, rejections, a probe.
    for _ in 0..300 {
        let _ = manual.call(|| Err::<(), _>("down"));
        let _ = std.call(|| Ok::<_, ()>(()));
    }
    clock.advance(Duration::from_secs(1));
    assert!(manual.call(|| Ok::<_, ()>(())).is_ok());
    let _ = (manual.metrics(), std.metrics());
    #[cfg(feature = "registry")]
    {
        let registry: cutout::Registry<String, cutout::ManualClock> =
            cutout::Registry::new(CircuitBreaker::builder().clock(clock.clone())).unwrap();
        let _ = registry.call("a", || Ok::<_, ()>(()));
    }
    assert_eq!(clock_threads(), 0, "no default clock, no refresh thread");

    // The control: the default clock does start it, once. Its first reading (the
    // one that starts it) is not ahead of the next: before, the next one read the
    // refresh thread's first value, a few microseconds earlier, so a breaker built
    // on the first reading saw its next reading before its own origin, and its
    // first rejection said `Retry-After: 2` for a 1 s cooldown.
    let first = DefaultClock::new().now();
    assert!(DefaultClock::new().now() >= first, "the clock went back");
    let default = CircuitBreaker::builder().build().unwrap();
    let _ = default.call(|| Ok::<_, ()>(()));
    let _other = CircuitBreaker::builder().build().unwrap();
    // A new thread names itself once it runs: wait for that, boundedly.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while clock_threads() == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(clock_threads(), 1);
}
