//! `Registry`: one breaker per key, per-key builders, keyed events, iteration and
//! idle eviction (bounded memory for keys that never repeat).

use cutout::{CircuitBreaker, ManualClock, Reason, Registry, State};
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

fn manual(clock: &ManualClock) -> cutout::Builder<ManualClock> {
    CircuitBreaker::builder()
        .consecutive_failures(3)
        .clock(clock.clone())
}

#[test]
fn one_breaker_per_key_created_on_first_use() {
    let r: Registry<String> = Registry::new(CircuitBreaker::builder()).unwrap();
    assert!(r.is_empty());
    let a = r.get("a");
    assert!(Arc::ptr_eq(&a, &r.get("a")));
    assert!(!Arc::ptr_eq(&a, &r.get("b")));
    assert_eq!(r.len(), 2);
    // `with` borrows: it does not clone the Arc.
    r.with("a", |b| {
        assert!(std::ptr::eq(b, &*a));
        assert_eq!(Arc::strong_count(&a), 2); // the map's and ours
    });
}

#[test]
fn threads_that_race_on_a_new_key_share_one_breaker() {
    let r: Registry<&str> = Registry::new(CircuitBreaker::builder()).unwrap();
    let barrier = Barrier::new(4);
    let seen: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    r.get(&"shared") // a `&'static str` key is looked up by `&&str`
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(seen.iter().all(|b| Arc::ptr_eq(b, &seen[0])));
    assert_eq!(r.len(), 1);
}

#[test]
fn calls_trip_only_their_own_keys_breaker() {
    let clock = ManualClock::new();
    let r: Registry<String, _> = Registry::new(manual(&clock)).unwrap();
    for _ in 0..3 {
        assert!(r.call("down", || Err::<(), _>("503")).is_err());
        assert_eq!(r.call("up", || Ok::<_, ()>(1)), Ok(1));
    }
    assert_eq!(r.get("down").state(), State::Open);
    assert_eq!(r.get("up").state(), State::Closed);
    assert!(
        r.call("down", || Ok::<_, ()>(()))
            .unwrap_err()
            .is_rejected()
    );
}

#[test]
fn a_per_key_builder_overrides_the_shared_one() {
    let clock = ManualClock::new();
    let r = Registry::builder(manual(&clock))
        .configure("db".to_string(), manual(&clock).consecutive_failures(1))
        .build()
        .unwrap();
    let _ = r.call("db", || Err::<(), _>("timeout"));
    let _ = r.call("cache", || Err::<(), _>("timeout"));
    assert_eq!(r.get("db").state(), State::Open);
    assert_eq!(r.get("cache").state(), State::Closed);
    assert_eq!(r.get("cache").metrics().consecutive_failures, 1);
}

#[test]
fn invalid_settings_fail_at_construction_naming_the_field() {
    let shared = Registry::<u32>::new(CircuitBreaker::builder().failure_rate(1.5, 10));
    assert_eq!(shared.unwrap_err().field(), "failure_rate");
    let per_key = Registry::builder(CircuitBreaker::builder())
        .configure(7u32, CircuitBreaker::builder().half_open_probes(0))
        .build();
    assert_eq!(per_key.unwrap_err().field(), "half_open_probes");
    let idle = Registry::<u32>::builder(CircuitBreaker::builder())
        .evict_idle_after(Duration::ZERO)
        .build();
    assert_eq!(idle.unwrap_err().field(), "evict_idle_after");
    let resolution = Registry::<u32>::builder(CircuitBreaker::builder())
        .idle_resolution(Duration::ZERO)
        .build();
    assert_eq!(resolution.unwrap_err().field(), "idle_resolution");
}

#[test]
fn transitions_are_reported_with_their_key() {
    let clock = ManualClock::new();
    let shared_events = Arc::new(Mutex::new(0));
    let counter = shared_events.clone();
    let keyed = Arc::new(Mutex::new(Vec::new()));
    let log = keyed.clone();
    let r = Registry::builder(
        manual(&clock)
            .consecutive_failures(1)
            .on_transition(move |_| *counter.lock().unwrap() += 1),
    )
    .on_transition(move |key: &String, t| log.lock().unwrap().push((key.clone(), t.reason)))
    .build()
    .unwrap();
    let _ = r.call("a", || Err::<(), _>(()));
    r.get("b").force_open();
    assert_eq!(
        *keyed.lock().unwrap(),
        [
            ("a".to_string(), Reason::ConsecutiveFailures),
            ("b".to_string(), Reason::ForcedOpen)
        ]
    );
    assert_eq!(
        *shared_events.lock().unwrap(),
        2,
        "the builder's own listener still runs"
    );
}

#[test]
fn for_each_visits_every_breaker() {
    let r: Registry<u16> = Registry::new(CircuitBreaker::builder()).unwrap();
    for port in [80, 443, 8080] {
        r.get(&port);
    }
    r.get(&443).force_open();
    let mut seen = Vec::new();
    r.for_each(|port, b| seen.push((*port, b.state())));
    seen.sort_by_key(|(port, _)| *port);
    assert_eq!(
        seen,
        [
            (80, State::Closed),
            (443, State::ForcedOpen),
            (8080, State::Closed)
        ]
    );
}

#[test]
fn remove_forgets_a_key() {
    let r: Registry<String> = Registry::new(CircuitBreaker::builder()).unwrap();
    r.get("x").force_open();
    assert_eq!(r.remove("x").unwrap().state(), State::ForcedOpen);
    assert!(r.remove("x").is_none());
    assert_eq!(r.get("x").state(), State::Closed);
}

#[test]
fn evict_idle_removes_idle_breakers_but_not_held_or_recent_ones() {
    let clock = ManualClock::new();
    let r: Registry<String, _> = Registry::builder(manual(&clock))
        .idle_resolution(Duration::from_millis(100))
        .build()
        .unwrap();
    r.get("idle").force_open();
    let held = r.get("held");
    clock.advance(Duration::from_secs(50));
    r.get("recent");
    clock.advance(Duration::from_secs(9));
    assert_eq!(r.evict_idle(Duration::from_secs(30)), 1);
    let mut left = Vec::new();
    r.for_each(|k, _| left.push(k.clone()));
    left.sort();
    assert_eq!(left, ["held", "recent"]);
    // An evicted key comes back as a fresh breaker.
    assert_eq!(r.get("idle").state(), State::Closed);
    // Once let go, the held one is evicted too.
    drop(held);
    clock.advance(Duration::from_secs(31));
    assert_eq!(r.evict_idle(Duration::from_secs(30)), 3);
    assert!(r.is_empty());
}

#[test]
fn keys_that_never_repeat_do_not_grow_memory_with_idle_eviction() {
    let clock = ManualClock::new();
    let r = Registry::builder(manual(&clock))
        .evict_idle_after(Duration::from_millis(50))
        .idle_resolution(Duration::from_millis(10))
        .build()
        .unwrap();
    let mut sample = Vec::new();
    let mut most = 0;
    for key in 0..20_000u64 {
        clock.advance(Duration::from_millis(1));
        let breaker = r.get(&key);
        if key % 10 == 0 {
            sample.push(Arc::downgrade(&breaker));
        }
        drop(breaker);
        most = most.max(r.len());
    }
    // A sweep every 50 ms keeps the keys used in the last 50 + 10 ms, and up to
    // 50 more arrive before the next one.
    assert!(most <= 111, "the registry peaked at {most} keys");
    // The evicted breakers are freed, not just unlinked: of the sampled 2,000 only
    // the recent ones and a reclamation batch or two are still alive.
    let alive = sample.iter().filter(|w| w.strong_count() > 0).count();
    assert!(alive <= 40, "{alive} sampled breakers still alive");
}
