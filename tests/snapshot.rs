//! The `metrics()` snapshot and the breaker's `Debug`.

use cutout::{CircuitBreaker, ManualClock, Reason, State, WindowCounts};
use std::time::Duration;

const SEC: Duration = Duration::from_secs(1);

#[test]
fn the_snapshot_reports_state_time_window_and_every_lifetime_counter() {
    let clock = ManualClock::new();
    let b = CircuitBreaker::builder()
        .name("ledger")
        .clock(clock.clone())
        .window(10 * SEC, 10)
        .failure_rate(0.5, 6)
        .slow_calls(Duration::from_millis(100), 1.0)
        .open_duration(2 * SEC)
        .build()
        .unwrap();

    let _ = b.call(|| Ok::<_, ()>(()));
    let _ = b.call(|| Err::<(), _>(()));
    let slow = b.try_acquire().unwrap();
    clock.advance(Duration::from_millis(150));
    slow.success();
    b.try_acquire().unwrap().ignore();
    drop(b.try_acquire().unwrap()); // dropped unrecorded
    let stale = b.try_acquire().unwrap(); // finishes after a reset

    let m = b.metrics();
    assert_eq!((m.state, m.generation, m.level), (State::Closed, 0, 0));
    assert_eq!(m.time_in_state, Duration::from_millis(150));
    assert_eq!(m.retry_after, Some(Duration::ZERO));
    assert_eq!(
        (m.window.calls, m.window.failures, m.window.slow),
        (3, 1, 1)
    );
    assert_eq!(m.window.failure_rate(), 1.0 / 3.0);
    assert_eq!(m.window.slow_call_rate(), 1.0 / 3.0);

    b.reset();
    stale.failure();
    for _ in 0..3 {
        let _ = b.call(|| Err::<(), _>(()));
    }
    for _ in 0..3 {
        let _ = b.call(|| Ok::<_, ()>(()));
    }
    // 3 of 6 is not evaluated on a success; the next failure makes 4 of 7 and trips.
    let _ = b.call(|| Err::<(), _>(()));
    let m = b.metrics();
    assert_eq!(m.state, State::Open);
    assert_eq!(
        m.window,
        WindowCounts::default(),
        "no window outside Closed"
    );
    assert!(b.call(|| Ok::<_, ()>(())).is_err());
    clock.advance(Duration::from_millis(500));
    let m = b.metrics();
    assert_eq!(m.time_in_state, Duration::from_millis(500));
    assert_eq!(m.retry_after, Some(Duration::from_millis(1500)));
    let l = m.lifetime;
    assert_eq!(
        (l.admitted, l.rejected, l.successes, l.failures),
        (13, 1, 5, 5)
    );
    assert_eq!((l.slow, l.ignored, l.stale, l.dropped), (1, 1, 1, 1));
    assert_eq!(
        l.admitted,
        l.successes + l.failures + l.ignored + l.stale + l.dropped
    );
    assert_eq!(m.transitions(Reason::Reset), 1);
    assert_eq!(m.transitions(Reason::FailureRate), 1);
    assert_eq!(m.total_transitions(), 2);

    b.force_open();
    assert_eq!(b.metrics().retry_after, None);
}

#[test]
fn counters_from_many_threads_add_up_exactly() {
    let b = CircuitBreaker::builder()
        .clock(ManualClock::new())
        .consecutive_failures(u32::MAX)
        .build()
        .unwrap();
    std::thread::scope(|s| {
        for t in 0..4 {
            let b = &b;
            s.spawn(move || {
                for i in 0..5_000 {
                    let _ = b.call(|| if (i + t) % 3 == 0 { Err(()) } else { Ok(()) });
                }
            });
        }
    });
    let l = b.metrics().lifetime;
    assert_eq!(l.admitted, 20_000);
    assert_eq!(l.successes + l.failures, 20_000);
    // Per thread, i + t ≡ 0 (mod 3) for 1,667 or 1,666 values of i in 0..5000.
    assert_eq!(l.failures, 1_667 + 1_667 + 1_666 + 1_667);
}

/// `Debug` is cheap (issue 20): name, state and generation, one load of the state
/// word; it sums no stripe and reads no clock. `metrics()` has the rest.
#[test]
fn debug_prints_name_state_and_generation_only() {
    let clock = ManualClock::new();
    let b = CircuitBreaker::builder()
        .name("payments")
        .clock(clock.clone())
        .window(10 * SEC, 10)
        .failure_rate(0.5, 100)
        .build()
        .unwrap();
    let _ = b.call(|| Err::<(), _>(()));
    assert_eq!(
        format!("{b:?}"),
        "CircuitBreaker { name: \"payments\", state: Closed, generation: 0, .. }"
    );
    b.force_open();
    assert_eq!(
        format!("{b:?}"),
        "CircuitBreaker { name: \"payments\", state: ForcedOpen, generation: 1, .. }"
    );
}

/// An Open word keeps its deadline; the time it opened is derived from it. With a
/// jittered cooldown, the snapshot and the event still report the opening time.
#[test]
fn with_jitter_open_reports_when_it_opened_and_when_it_may_half_open() {
    let clock = ManualClock::new();
    let events = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = events.clone();
    let b = CircuitBreaker::builder()
        .clock(clock.clone())
        .consecutive_failures(1)
        .open_duration(10 * SEC)
        .jitter(0.5)
        .on_transition(move |t| log.lock().unwrap().push(*t))
        .build()
        .unwrap();
    clock.advance(Duration::from_millis(700));
    let _ = b.call(|| Err::<(), _>(()));
    clock.advance(Duration::from_millis(300));
    let m = b.metrics();
    assert_eq!(m.state, State::Open);
    assert_eq!(m.time_in_state, Duration::from_millis(300));
    let cooldown = m.time_in_state + m.retry_after.unwrap();
    assert!(
        (5 * SEC..=10 * SEC).contains(&cooldown),
        "a jittered cooldown of at most half off: {cooldown:?}"
    );
    assert_eq!(events.lock().unwrap()[0].at, Duration::from_millis(700));

    // Admitted exactly at the deadline, not a millisecond before.
    clock.advance(m.retry_after.unwrap() - Duration::from_millis(1));
    assert!(b.try_acquire().is_err());
    clock.advance(Duration::from_millis(1));
    b.try_acquire().unwrap().success();
    assert_eq!(b.state(), State::Closed);
    let e = events.lock().unwrap();
    assert_eq!(
        e[1].at,
        Duration::from_millis(700) + cooldown,
        "half-opened at the deadline"
    );
}
