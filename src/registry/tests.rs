//! The registry's unit tests.

use super::*;
use crate::ManualClock;

fn registry(clock: &ManualClock, resolution: Duration) -> Registry<String, ManualClock> {
    Registry::builder(CircuitBreaker::builder().clock(clock.clone()))
        .idle_resolution(resolution)
        .build()
        .unwrap()
}

#[test]
fn a_lookup_writes_the_timestamp_once_per_resolution() {
    let clock = ManualClock::new();
    let r = registry(&clock, Duration::from_millis(100));
    r.get("k");
    let stamp = || {
        let map = r.map.pin();
        map.get("k").unwrap().last_used.load(Ordering::Relaxed)
    };
    clock.advance(Duration::from_millis(99));
    r.get("k");
    assert_eq!(stamp(), 0, "within the resolution: not written");
    clock.advance(Duration::from_millis(1));
    r.get("k");
    assert_eq!(stamp(), 100_000_000);
}

#[test]
fn eviction_never_takes_a_breaker_used_within_older_than() {
    let clock = ManualClock::new();
    let r = registry(&clock, Duration::from_millis(100));
    r.get("k"); // stamped at 0
    clock.advance(Duration::from_millis(99));
    r.get("k"); // used at 99 ms, timestamp still 0
    clock.advance(Duration::from_millis(1000));
    // Used exactly 1 s ago (1099 ms after the stale stamp): kept.
    assert_eq!(r.evict_idle(Duration::from_secs(1)), 0);
    clock.advance(Duration::from_millis(1));
    // Unused for more than 1 s: evicted.
    assert_eq!(r.evict_idle(Duration::from_secs(1)), 1);
    assert!(r.is_empty());
}

#[test]
fn a_lookup_that_finds_a_claimed_entry_finishes_its_removal_and_starts_afresh() {
    let clock = ManualClock::new();
    let r = registry(&clock, Duration::from_millis(100));
    let old = r.get("k");
    old.force_open();
    // A sweep's claim, as if it had read no call in flight.
    r.map
        .pin()
        .get("k")
        .unwrap()
        .last_used
        .store(EVICTED, Ordering::Relaxed);
    let new = r.get("k");
    assert!(
        !Arc::ptr_eq(&old, &new),
        "a claimed breaker is never handed out"
    );
    assert_eq!(new.state(), State::Closed);
    assert_eq!(r.len(), 1);
    // A call that finds a claimed entry is admitted by a fresh breaker too.
    r.map
        .pin()
        .get("k")
        .unwrap()
        .last_used
        .store(EVICTED, Ordering::Relaxed);
    assert!(r.call("k", || Ok::<_, ()>(())).is_ok());
    assert_eq!(r.get("k").metrics().lifetime.successes, 1);
    assert_eq!(new.metrics().lifetime.admitted, 0);
}

#[test]
fn a_clock_at_its_maximum_never_reads_as_a_claim() {
    let clock = ManualClock::new();
    let r = registry(&clock, Duration::from_millis(100));
    let b = r.get("k");
    clock.advance(Duration::MAX);
    assert!(Arc::ptr_eq(&b, &r.get("k")));
    assert_eq!(
        r.map
            .pin()
            .get("k")
            .unwrap()
            .last_used
            .load(Ordering::Relaxed),
        EVICTED - 1
    );
}

/// The cap's count of places equals the map's entries whenever no insert is
/// in progress, through every way an entry leaves: eviction at the cap, idle
/// sweeps, `remove`, `restore_all` replacing or adding, a lookup finishing a
/// claim, and threads racing inserts.
#[test]
fn the_count_of_places_follows_every_insert_and_removal() {
    let clock = ManualClock::new();
    let r: Registry<String, ManualClock> =
        Registry::builder(CircuitBreaker::builder().clock(clock.clone()))
            .idle_resolution(Duration::from_millis(1))
            .max_keys(40)
            .build()
            .unwrap();
    let held = |r: &Registry<String, ManualClock>| {
        let cap = r.cap.as_ref().unwrap();
        let entries = r.map.pin().iter().count();
        assert_eq!(cap.held.load(Ordering::Relaxed), entries);
        assert!(entries <= cap.max);
        entries
    };
    for i in 0..100 {
        clock.advance(Duration::from_millis(1));
        r.get(&format!("k{i}"));
    }
    assert!(held(&r) >= 39);
    assert!(r.remove("k99").is_some());
    assert!(r.remove("k99").is_none());
    let n = held(&r);
    clock.advance(Duration::from_secs(10));
    assert_eq!(r.evict_idle(Duration::from_secs(1)), n);
    assert_eq!(held(&r), 0);
    // restore_all: adds a new key, replaces an existing one.
    r.get("k1");
    let saved = vec![
        ("k1".to_string(), r.get("k1").save()),
        ("k2".to_string(), r.get("k1").save()),
    ];
    assert_eq!(r.restore_all(saved), Ok(2));
    assert_eq!(held(&r), 2);
    // A lookup that finds a claimed entry removes it; the claimer's place
    // accounting is not disturbed (the test claims as a sweep would, then
    // gives the place back as the claimer does).
    r.map
        .pin()
        .get("k1")
        .unwrap()
        .last_used
        .store(EVICTED, Ordering::Relaxed);
    r.get("k1"); // removes the claimed entry, inserts a fresh one
    r.cap.as_ref().unwrap().release(1);
    assert_eq!(held(&r), 2);
    // Threads racing at the cap.
    std::thread::scope(|s| {
        for t in 0..4 {
            let (r, clock) = (&r, &clock);
            s.spawn(move || {
                for i in 0..500 {
                    clock.advance(Duration::from_micros(100));
                    let _ = r.call(&format!("t{t}-{i}"), || Ok::<_, ()>(()));
                    if i % 7 == 0 {
                        r.remove(&format!("t{t}-{}", i / 2));
                    }
                }
            });
        }
    });
    held(&r);
}

#[test]
fn the_default_resolution_follows_a_short_idle_period() {
    let r: Registry<u8> = Registry::builder(CircuitBreaker::builder())
        .evict_idle_after(Duration::from_millis(400))
        .build()
        .unwrap();
    assert_eq!(r.resolution, 100_000_000);
    let r: Registry<u8> = Registry::new(CircuitBreaker::builder()).unwrap();
    assert_eq!(r.resolution, 1_000_000_000);
    assert!(format!("{r:?}").contains("len: 0"));
}
