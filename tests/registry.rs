//! `Registry`: one breaker per key, per-key builders, names, keyed events,
//! iteration, idle eviction (bounded memory for keys that never repeat; `get`
//! racing sweeps), what a call in flight keeps alive and the outcomes lost to
//! `remove` or `restore_all` (`orphaned`), save and restore, panics in the caller's
//! closures, and the key cap (`max_keys`: least recently used eviction, the
//! overflow breaker, flat memory under hostile keys, no place lost to a panic in
//! a naming closure or hook, a key whose `Hash` panics in an eviction, lookups
//! racing an eviction at the idle resolution's edge).

mod common;

use common::hostile::{Hooked, Key, POISON, key, on_next_reading};
use common::{trips_on, within};
use cutout::{CircuitBreaker, ManualClock, Outcome, Reason, Registry, SavedState, State};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc;
use std::sync::{Arc, Barrier, Mutex, OnceLock, Weak};
use std::time::{Duration, SystemTime};

/// How long a test waits for another thread before it fails instead of hanging.
const BOUND: Duration = Duration::from_secs(10);

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
    let want = [
        (80, State::Closed),
        (443, State::ForcedOpen),
        (8080, State::Closed),
    ];
    assert_eq!(seen, want);
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
    let _ = r.call("idle", || Ok::<_, ()>(()));
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
    assert_eq!(r.get("idle").metrics().lifetime.admitted, 0);
    // Once let go, the held one is evicted too.
    drop(held);
    clock.advance(Duration::from_secs(31));
    assert_eq!(r.evict_idle(Duration::from_secs(30)), 3);
    assert!(r.is_empty());
}

/// An idle sweep evicts a breaker as a new one would behave but for a streak:
/// Closed, nothing in flight or in its window. The streak, which no time ends,
/// goes with it once the window has emptied; Open states stay.
#[test]
fn an_idle_sweep_evicts_closed_breakers_with_an_empty_window() {
    let clock = ManualClock::new();
    let r: Registry<String, _> = Registry::builder(
        CircuitBreaker::builder()
            .consecutive_failures(3)
            .window(Duration::from_secs(3600), 60)
            .failure_rate(0.5, 100)
            .clock(clock.clone()),
    )
    .idle_resolution(Duration::from_millis(100))
    .build()
    .unwrap();
    r.get("forced").force_open();
    for _ in 0..3 {
        let _ = r.call("open", || Err::<(), _>("down"));
    }
    let _ = r.call("streak", || Err::<(), _>("down"));
    let _ = r.call("window", || Ok::<_, ()>(()));
    r.get("fresh");
    assert_eq!(r.get("open").state(), State::Open);
    clock.advance(Duration::from_secs(60));
    // Idle for a minute: only the breaker with nothing to remember goes. The
    // window's calls (an hour's window: the streak's failure is one) and the two
    // open states would be lost by a fresh breaker.
    assert_eq!(r.evict_idle(Duration::from_secs(30)), 1);
    assert_eq!(r.len(), 4);
    assert_eq!(r.with("streak", |b| b.metrics().consecutive_failures), 1);
    assert_eq!(r.with("open", |b| b.state()), State::Open);
    // Once the window has emptied, the streak goes too; the states stay.
    clock.advance(Duration::from_secs(3600));
    assert_eq!(r.evict_idle(Duration::from_secs(30)), 2);
    let mut left = Vec::new();
    r.for_each(|k, _| left.push(k.clone()));
    left.sort();
    assert_eq!(left, ["forced", "open"]);
}

/// Keys whose only call failed (a streak below the threshold) do not pile up
/// under `evict_idle_after`: memory stays with the keys of the last idle periods.
#[test]
fn keys_whose_last_call_failed_do_not_accumulate() {
    let clock = ManualClock::new();
    let r: Registry<String, _> = Registry::builder(manual(&clock).consecutive_failures(5))
        .evict_idle_after(Duration::from_secs(60))
        .build()
        .unwrap();
    for i in 0..1_000 {
        let _ = r.call(&format!("host-{i}"), || Err::<(), _>("refused"));
        clock.advance(Duration::from_millis(10));
    }
    for i in 0..3 {
        clock.advance(Duration::from_secs(120));
        r.get(&format!("new-{i}")); // each new key may sweep
    }
    assert!(r.len() <= 3, "{} breakers left", r.len());
}

/// An evicted key with a per-key builder comes back from that builder (its name,
/// its threshold of 1), not from the shared one.
#[test]
fn an_evicted_configured_key_comes_back_with_its_own_builder() {
    let clock = ManualClock::new();
    let r: Registry<String, _> = Registry::builder(manual(&clock).consecutive_failures(5))
        .configure(
            "db".to_string(),
            manual(&clock).consecutive_failures(1).name("primary-db"),
        )
        .build()
        .unwrap();
    r.get("db");
    clock.advance(Duration::from_secs(120));
    assert_eq!(r.evict_idle(Duration::from_secs(60)), 1);
    assert_eq!(r.get("db").name(), "primary-db");
    let _ = r.call("db", || Err::<(), _>("down"));
    assert_eq!(r.get("db").state(), State::Open);
}

/// Runs `registry.call(key, ...)` on a thread of its own; the call blocks until
/// `finish` sends its result. Returns once the call is running.
fn call_in_flight(
    registry: &Arc<Registry<String, ManualClock>>,
    key: &'static str,
) -> (
    mpsc::Sender<Result<(), &'static str>>,
    std::thread::JoinHandle<()>,
) {
    let (finish, result) = mpsc::channel();
    let (running, started) = mpsc::channel();
    let registry = registry.clone();
    let thread = std::thread::spawn(move || {
        let _ = registry.call(key, || {
            running.send(()).unwrap();
            result
                .recv_timeout(BOUND)
                .expect("the test never finished the call")
        });
    });
    started.recv_timeout(BOUND).expect("the call never started");
    (finish, thread)
}

#[test]
fn a_breaker_with_a_call_in_flight_is_not_evicted_and_gets_its_outcome() {
    let clock = ManualClock::new();
    let r = Arc::new(
        Registry::builder(manual(&clock).consecutive_failures(1))
            .evict_idle_after(Duration::from_secs(1))
            .build()
            .unwrap(),
    );
    let (finish, thread) = call_in_flight(&r, "hung");
    // The call hangs for two minutes while other keys come and go, sweeping.
    for i in 0..120 {
        clock.advance(Duration::from_secs(1));
        r.get(&format!("churn-{i}"));
    }
    assert_eq!(
        r.evict_idle(Duration::from_secs(1)),
        0,
        "only fresh keys left"
    );
    assert_eq!(r.with("hung", |b| b.metrics().lifetime.admitted), 1);
    // It fails: the outcome trips the registry's breaker, not an orphan.
    finish.send(Err("timed out")).unwrap();
    thread.join().unwrap();
    assert_eq!(r.get("hung").state(), State::Open);
    assert_eq!(r.get("hung").metrics().lifetime.failures, 1);
}

/// A call holds its lookup's epoch guard while it runs (the Registry docs, Calls
/// in flight): breakers evicted meanwhile are freed once it returns, not before.
#[test]
fn a_slow_call_delays_freeing_evicted_breakers_until_it_returns() {
    let clock = ManualClock::new();
    let r = Arc::new(
        Registry::builder(manual(&clock))
            .idle_resolution(Duration::from_millis(10))
            .build()
            .unwrap(),
    );
    let (finish, thread) = call_in_flight(&r, "slow");
    // While it runs, 500 other keys are used once, go idle and are evicted.
    let mut evicted = Vec::new();
    for i in 0..500 {
        let b = r.get(&format!("key-{i}"));
        evicted.push(Arc::downgrade(&b));
    }
    clock.advance(Duration::from_secs(10));
    assert_eq!(r.evict_idle(Duration::from_secs(5)), 500);
    let alive = || evicted.iter().filter(|w| w.strong_count() > 0).count();
    assert!(alive() > 64, "freed under the call's guard: {}", alive());
    finish.send(Ok(())).unwrap();
    thread.join().unwrap();
    // Freed once the guard is gone: all but a reclamation batch or two (the map
    // frees retired entries in batches of 32).
    for i in 0..64 {
        r.remove(&format!("churn-{i}"));
        r.get(&format!("churn-{i}"));
        r.remove(&format!("churn-{i}"));
    }
    assert!(
        alive() <= 64,
        "{} of 500 evicted breakers are still alive",
        alive()
    );
    assert_eq!(r.get("slow").metrics().lifetime.successes, 1);
}

#[test]
fn a_panicking_call_counts_as_dropped_on_its_breaker() {
    let clock = ManualClock::new();
    let r: Registry<String, _> = Registry::new(manual(&clock)).unwrap();
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = r.call("p", || -> Result<(), ()> { panic!("boom") });
    }));
    assert!(panicked.is_err());
    let l = r.get("p").metrics().lifetime;
    assert_eq!((l.admitted, l.dropped), (1, 1));
    // Nothing in flight: it may go.
    clock.advance(Duration::from_secs(60));
    assert_eq!(r.evict_idle(Duration::from_secs(1)), 1);
}

#[test]
fn a_removed_breaker_loses_the_outcome_of_a_call_in_flight() {
    let clock = ManualClock::new();
    let r = Arc::new(Registry::new(manual(&clock).consecutive_failures(1)).unwrap());
    let (finish, thread) = call_in_flight(&r, "k");
    let removed = r.remove("k").unwrap();
    assert_eq!(r.orphaned(), 0, "nothing is lost until the call ends");
    finish.send(Err("down")).unwrap();
    thread.join().unwrap();
    // Neither the removed breaker nor the key's new one counts it; the registry
    // counts it as orphaned.
    assert_eq!(r.get("k").state(), State::Closed);
    assert_eq!(removed.state(), State::Closed);
    assert_eq!(r.get("k").metrics().lifetime.failures, 0);
    assert_eq!(r.orphaned(), 1);
}

/// `restore_all` replaces a key's breaker while a `Registry::call` on it runs: as
/// with `remove`, that call's outcome is lost (on neither breaker) and counted by
/// `orphaned`, while a handle from `get` still records on the replaced breaker.
#[test]
fn a_call_in_flight_across_restore_all_loses_its_outcome_and_counts_it_as_orphaned() {
    let clock = ManualClock::new();
    let r = Arc::new(Registry::new(manual(&clock).consecutive_failures(1)).unwrap());
    let old = r.get("db");
    let saved = r.save_all();
    let (finish, thread) = call_in_flight(&r, "db");
    assert_eq!(r.restore_all(saved), Ok(1));
    let new = r.get("db");
    assert!(!Arc::ptr_eq(&old, &new), "restore_all replaced the breaker");
    assert_eq!(r.orphaned(), 0);
    finish.send(Err("down")).unwrap();
    thread.join().unwrap();
    assert_eq!(r.orphaned(), 1, "the lost outcome is counted");
    assert_eq!(new.metrics().lifetime.failures, 0, "not on the new breaker");
    assert_eq!(new.state(), State::Closed);
    assert_eq!(old.metrics().lifetime.failures, 0, "nor on the old one");
    let _ = old.call(|| Err::<(), _>("down"));
    assert_eq!(old.state(), State::Open, "the held handle still records");
}

/// A classifier that panics in `Registry::call_with` on a half-open probe: the
/// call counts as dropped on its key's breaker and the probe slot comes back, so
/// the next call decides.
#[test]
fn a_panicking_classifier_in_call_with_gives_the_probe_back() {
    let clock = ManualClock::new();
    let r: Registry<String, _> = Registry::new(
        manual(&clock)
            .consecutive_failures(1)
            .open_duration(Duration::from_secs(30)),
    )
    .unwrap();
    let _ = r.call("k", || Err::<(), _>("down"));
    clock.advance(Duration::from_secs(30));
    let panicked = catch_unwind(AssertUnwindSafe(|| {
        let _ = r.call_with(
            "k",
            |_: &Result<(), ()>| -> Outcome { panic!("classifier") },
            || Ok(()),
        );
    }));
    assert!(panicked.is_err());
    assert_eq!(r.get("k").metrics().lifetime.dropped, 1);
    assert_eq!(r.call("k", || Ok::<_, ()>(())), Ok(()));
    assert_eq!(r.get("k").state(), State::Closed);
}

/// Permits taken on threads that exit before their outcome is recorded (a task
/// moved between worker threads), then recorded, ignored or dropped here: every
/// admission is accounted for, nothing is left in flight, and once idle the
/// breaker is evicted.
#[test]
fn permits_from_exited_threads_leave_nothing_in_flight() {
    let clock = ManualClock::new();
    let r: Registry<String, _> = Registry::new(manual(&clock).consecutive_failures(1_000)).unwrap();
    let b = r.get("k");
    let mut permits = Vec::new();
    for _ in 0..40 {
        let b = b.clone();
        permits.push(
            std::thread::spawn(move || b.try_acquire_owned().unwrap())
                .join()
                .unwrap(),
        );
    }
    // More threads come and go, each with one call.
    for _ in 0..40 {
        let b = b.clone();
        std::thread::spawn(move || b.call(|| Ok::<_, ()>(())).unwrap())
            .join()
            .unwrap();
    }
    for (i, p) in permits.into_iter().enumerate() {
        match i % 3 {
            0 => p.success(),
            1 => p.ignore(),
            _ => drop(p),
        }
    }
    let l = b.metrics().lifetime;
    assert_eq!(
        (l.admitted, l.successes + l.ignored + l.dropped),
        (80, 80),
        "{l:?}"
    );
    drop(b);
    clock.advance(Duration::from_secs(60));
    assert_eq!(r.evict_idle(Duration::from_secs(1)), 1);
}

/// A keyed listener that removes its own key and looks it up again from inside the
/// transition (fired by a `Registry::call`): nothing deadlocks, the key gets a
/// fresh breaker, and the transition is reported once.
#[test]
fn a_keyed_listener_may_remove_and_recreate_its_own_key() {
    within(BOUND, || {
        let slot: Arc<OnceLock<Weak<Registry<String>>>> = Arc::new(OnceLock::new());
        let seen = slot.clone();
        let log = Arc::new(Mutex::new(Vec::new()));
        let events = log.clone();
        let r = Arc::new(
            Registry::builder(CircuitBreaker::builder().consecutive_failures(1))
                .on_transition(move |key: &String, t| {
                    events.lock().unwrap().push((key.clone(), t.to));
                    if let Some(r) = seen.get().and_then(Weak::upgrade) {
                        if t.to == State::Open {
                            assert!(r.remove(key).is_some());
                            assert_eq!(r.get(key).state(), State::Closed);
                        }
                    }
                })
                .max_keys(4)
                .build()
                .unwrap(),
        );
        slot.set(Arc::downgrade(&r)).unwrap();
        let _ = r.call("db", || Err::<(), _>("down"));
        assert_eq!(r.get("db").state(), State::Closed, "recreated");
        assert_eq!(r.len(), 1);
        assert_eq!(
            log.lock().unwrap().as_slice(),
            [("db".to_string(), State::Open)]
        );
    });
}

/// `save_all` then `restore_all` into a registry built the same way (a per-key
/// builder and a cap): every key comes back in its state and named by its key, and
/// each keeps its own builder's settings (the shared streak of 3 for "cache").
#[test]
fn save_all_and_restore_all_round_trip_keeps_states_names_and_per_key_builders() {
    let clock = ManualClock::new();
    let build = || {
        Registry::<String, _>::builder(manual(&clock))
            .configure("db".to_string(), manual(&clock).consecutive_failures(1))
            .max_keys(3)
            .build()
            .unwrap()
    };
    let a = build();
    let _ = a.call("db", || Err::<(), _>("down"));
    let _ = a.call("cache", || Err::<(), _>("down"));
    a.get("search");
    let saved = a.save_all();
    let b = build();
    assert_eq!(b.restore_all(saved), Ok(3));
    assert_eq!(b.len(), 3);
    assert_eq!(b.get("db").state(), State::Open);
    assert_eq!(b.get("cache").state(), State::Closed);
    assert_eq!(b.get("db").name(), "db");
    let _ = b.call("cache", || Err::<(), _>("down"));
    assert_eq!(b.get("cache").state(), State::Closed);
    assert_eq!(b.overflowed(), 0);
}

/// `restore_all` restores states in the order given: a key given twice ends
/// with its later state, and both restores are counted (as documented).
#[test]
fn restore_all_of_a_key_given_twice_keeps_the_later_state_and_counts_both() {
    let clock = ManualClock::new();
    let build = || Registry::<String, _>::new(manual(&clock).consecutive_failures(1)).unwrap();
    let tripped = build();
    let _ = tripped.call("db", || Err::<(), _>("down"));
    let [(_, open)] = &tripped.save_all()[..] else {
        panic!("one key saved")
    };
    let closed = SavedState::new("db", State::Closed, SystemTime::now());
    let r = build();
    let db = |s: &SavedState| ("db".to_string(), s.clone());
    assert_eq!(r.restore_all([db(&closed), db(open)]), Ok(2));
    assert_eq!((r.len(), r.get("db").state()), (1, State::Open));
    assert_eq!(r.restore_all([db(open), db(&closed)]), Ok(2));
    assert_eq!((r.len(), r.get("db").state()), (1, State::Closed));
}

#[test]
fn each_breaker_is_named_by_its_key() {
    let r: Registry<String> = Registry::builder(CircuitBreaker::builder().name("shared"))
        .configure(
            "db".to_string(),
            CircuitBreaker::builder().name("primary-db"),
        )
        .configure("cache".to_string(), CircuitBreaker::builder())
        .build()
        .unwrap();
    assert_eq!(r.get("payments").name(), "payments");
    assert_eq!(r.get("search").name(), "search");
    assert_eq!(r.get("cache").name(), "cache");
    assert_eq!(
        r.get("db").name(),
        "primary-db",
        "a per-key name of its own wins"
    );

    let r: Registry<(String, u16)> =
        Registry::builder_named(CircuitBreaker::builder(), |(host, port): &(String, u16)| {
            format!("{host}:{port}")
        })
        .build()
        .unwrap();
    assert_eq!(r.get(&("db".to_string(), 5432)).name(), "db:5432");

    let r: Registry<u16> = Registry::builder(CircuitBreaker::builder())
        .name(|port: &u16| if *port == 443 { "tls" } else { "plain" })
        .build()
        .unwrap();
    assert_eq!((r.get(&443).name(), r.get(&80).name()), ("tls", "plain"));
}

#[cfg(feature = "metrics")]
#[test]
fn publish_metrics_gives_every_key_its_own_series() {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let clock = ManualClock::new();
    let r: Registry<String, _> = Registry::new(manual(&clock).consecutive_failures(1)).unwrap();
    metrics::with_local_recorder(&recorder, || {
        let _ = r.call("payments", || Err::<(), _>("down"));
        let _ = r.call("search", || Ok::<_, ()>(()));
        r.publish_metrics();
    });
    // (name, sorted labels) -> value
    let seen: std::collections::BTreeMap<(String, Vec<(String, String)>), DebugValue> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let labels = common::sorted_labels(key.key());
            ((key.key().name().to_owned(), labels), value)
        })
        .collect();
    let state = |breaker: &str, state: &str| {
        let labels = vec![
            ("breaker".to_string(), breaker.to_string()),
            ("state".to_string(), state.to_string()),
        ];
        match seen.get(&("circuit_breaker_state".to_string(), labels)) {
            Some(DebugValue::Gauge(x)) => Some(x.into_inner()),
            other => panic!("{breaker}/{state}: {other:?}"),
        }
    };
    assert_eq!(state("payments", "open"), Some(1.0));
    assert_eq!(state("search", "closed"), Some(1.0));
    assert_eq!(state("search", "open"), Some(0.0));
    // Two keys, two series of every metric: none is labelled "default".
    let breakers: std::collections::BTreeSet<&str> = seen
        .keys()
        .filter(|(name, _)| name == "circuit_breaker_calls_total")
        .flat_map(|(_, labels)| labels.iter().filter(|(k, _)| k == "breaker"))
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(
        breakers.into_iter().collect::<Vec<_>>(),
        ["payments", "search"]
    );
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

// ---- the key cap ---------------------------------------------------------------

/// Net bytes this thread has allocated (allocated minus freed): a counting global
/// allocator, per thread so tests running in parallel do not mix.
mod live_bytes {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    struct Counting;

    thread_local! {
        static NET: Cell<isize> = const { Cell::new(0) };
    }

    fn add(n: isize) {
        let _ = NET.try_with(|net| net.set(net.get() + n));
    }

    // SAFETY: every method forwards to `System` unchanged; the count is a
    // const-initialised thread-local without a destructor, which never allocates.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            add(layout.size() as isize);
            // SAFETY: the caller upholds `alloc`'s contract.
            unsafe { System.alloc(layout) }
        }
        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            add(layout.size() as isize);
            // SAFETY: the caller upholds `alloc_zeroed`'s contract.
            unsafe { System.alloc_zeroed(layout) }
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            add(-(layout.size() as isize));
            // SAFETY: the caller upholds `dealloc`'s contract.
            unsafe { System.dealloc(ptr, layout) }
        }
        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            add(new_size as isize - layout.size() as isize);
            // SAFETY: the caller upholds `realloc`'s contract.
            unsafe { System.realloc(ptr, layout, new_size) }
        }
    }

    #[global_allocator]
    static GLOBAL: Counting = Counting;

    /// Net bytes this thread holds.
    pub(crate) fn now() -> isize {
        NET.with(Cell::get)
    }
}

const CAP: usize = 1_000;

/// `keys` distinct keys, one call each, through a registry capped at 1,000, each
/// key 1 ms after the last (the idle resolution): `len()` never exceeds the cap,
/// no key overflows (the least recently used breakers are evictable), and the
/// memory this thread holds after the first 10,000 keys does not grow.
fn hostile_keys(keys: u64) {
    let clock = ManualClock::new();
    let r = Registry::builder(manual(&clock))
        .max_keys(CAP)
        .idle_resolution(Duration::from_millis(1))
        .build()
        .unwrap();
    let mut settled = None;
    let mut sample = Vec::new();
    for key in 0..keys {
        clock.advance(Duration::from_millis(1));
        r.call(&key, || Ok::<_, ()>(())).unwrap();
        let len = r.len();
        assert!(len <= CAP, "{len} breakers after key {key}");
        if key == 10_000 {
            settled = Some(live_bytes::now());
        }
        // Before the memory settles: a `Weak` keeps its breaker's allocation.
        if key < 10_000 && key % 100 == 0 {
            sample.push(Arc::downgrade(&r.get(&key)));
        }
    }
    let grown = live_bytes::now() - settled.expect("at least 10,001 keys");
    let mut heap = 0;
    r.for_each(|_, b| heap += b.heap_bytes());
    let per_breaker = heap / r.len();
    eprintln!(
        "{keys} keys capped at {CAP}: {} held, {} overflowed, breakers' heap {heap} B, \
         this thread's memory grew {grown} B after the first 10,000 keys",
        r.len(),
        r.overflowed()
    );
    assert_eq!(r.overflowed(), 0, "an evictable breaker was always there");
    // Full, less the places a batch evicted ahead of need (up to CAP / 32).
    assert!(r.len() >= CAP - CAP / 32, "{} held", r.len());
    // Flat: less than 100 breakers' worth of growth, whatever the key count (the
    // map's table, reclamation batches in flight).
    assert!(
        grown < (100 * (per_breaker + 1_024)) as isize,
        "memory grew by {grown} bytes"
    );
    // The evicted breakers are freed, not just unlinked.
    let alive = sample.iter().filter(|w| w.strong_count() > 0).count();
    assert!(alive <= 3, "{alive} sampled breakers still alive");
}

#[test]
fn fifty_thousand_distinct_keys_keep_a_capped_registry_at_its_cap_in_flat_memory() {
    hostile_keys(50_000);
}

/// CI runs it in release (`.ci/run`'s stress step).
#[test]
#[ignore = "a million keys: run in release, with --include-ignored"]
fn a_million_distinct_keys_keep_a_capped_registry_at_its_cap_in_flat_memory() {
    hostile_keys(1_000_000);
}

#[test]
fn at_the_cap_a_new_key_evicts_the_least_recently_used_breaker() {
    let clock = ManualClock::new();
    let r: Registry<String, _> = Registry::builder(manual(&clock))
        .max_keys(3)
        .idle_resolution(Duration::from_millis(1))
        .build()
        .unwrap();
    for key in ["a", "b", "c"] {
        r.get(key);
        clock.advance(Duration::from_millis(10));
    }
    r.get("a"); // "b" is now the least recently used
    clock.advance(Duration::from_millis(10));
    let a = Arc::downgrade(&r.get("a"));
    r.get("d");
    let mut keys = Vec::new();
    r.for_each(|k, _| keys.push(k.clone()));
    keys.sort();
    assert_eq!(keys, ["a", "c", "d"]);
    assert!(a.strong_count() > 0, "\"a\" kept its breaker");
    assert_eq!(r.overflowed(), 0);
}

#[test]
fn at_the_cap_a_breaker_that_behaves_like_new_is_evicted_before_a_tripped_or_busy_one() {
    let clock = ManualClock::new();
    let r = Arc::new(
        Registry::builder(manual(&clock).consecutive_failures(2))
            .max_keys(5)
            .idle_resolution(Duration::from_millis(1))
            .build()
            .unwrap(),
    );
    // Oldest first: a tripped breaker, one with a call in flight, one with a
    // failure in its streak, then two that behave like new.
    for _ in 0..2 {
        let _ = r.call("tripped", || Err::<(), _>("down"));
    }
    clock.advance(Duration::from_millis(10));
    let (finish, thread) = call_in_flight(&r, "busy");
    clock.advance(Duration::from_millis(10));
    let _ = r.call("streak", || Err::<(), _>("down"));
    clock.advance(Duration::from_millis(10));
    r.get("fresh");
    clock.advance(Duration::from_millis(10));
    r.get("fresher");
    clock.advance(Duration::from_millis(10));
    // "fresh" is the older of the two that behave like new.
    r.get("new");
    let mut keys = Vec::new();
    r.for_each(|k, _| keys.push(k.clone()));
    keys.sort();
    assert_eq!(keys, ["busy", "fresher", "new", "streak", "tripped"]);
    assert_eq!(r.get("tripped").state(), State::Open, "kept its cooldown");
    assert_eq!(r.get("streak").metrics().consecutive_failures, 1);
    finish.send(Ok(())).unwrap();
    thread.join().unwrap();
    assert_eq!(
        r.get("busy").metrics().lifetime.successes,
        1,
        "the busy breaker got its outcome"
    );
    assert_eq!(r.overflowed(), 0);
}

/// The overflow breaker is built from the shared builder: a key `configure`d to
/// trip on one failure runs on the shared settings (two failures) while it finds
/// no room, as `max_keys` documents.
#[test]
fn a_configured_key_without_room_runs_on_the_shared_settings() {
    let clock = ManualClock::new();
    let r: Registry<String, _> = Registry::builder(manual(&clock).consecutive_failures(2))
        .configure("db".to_string(), manual(&clock).consecutive_failures(1))
        .max_keys(1)
        .build()
        .unwrap();
    let _ = r.call("tripped", || Err::<(), _>("down"));
    let _ = r.call("tripped", || Err::<(), _>("down"));
    assert_eq!(r.get("tripped").state(), State::Open); // holds the only place
    let _ = r.call("db", || Err::<(), _>("down"));
    let overflow = r.overflow().unwrap();
    assert_eq!(
        (r.get("db").name(), overflow.state()),
        ("overflow", State::Closed)
    );
    let _ = r.call("db", || Err::<(), _>("down"));
    assert_eq!(overflow.state(), State::Open);
}

/// The scan gate, as "Keying safely" says: with 64 places a scan evicts up to 2
/// breakers (64 / 32), and one that evicts none holds the next scan back until
/// two more new keys have come: the first of them goes to overflow unscanned.
#[test]
fn a_scan_that_evicts_nothing_lets_a_batch_of_new_keys_overflow_before_the_next() {
    let clock = ManualClock::new();
    let r: Registry<String, _> = Registry::builder(manual(&clock).consecutive_failures(1))
        .max_keys(64)
        .idle_resolution(Duration::from_millis(1))
        .build()
        .unwrap();
    for i in 0..64 {
        let _ = r.call(&format!("k{i}"), || Err::<(), _>("down")); // Open: kept
    }
    assert_eq!((r.len(), r.is_empty()), (64, false));
    clock.advance(Duration::from_millis(10));
    assert_eq!(
        r.get("new0").name(),
        "overflow",
        "a scan that evicts nothing"
    );
    r.get("k0").reset(); // evictable once idle again
    clock.advance(Duration::from_millis(10));
    assert_eq!(r.get("new1").name(), "overflow", "the gate is shut");
    assert_eq!(r.get("new2").name(), "new2", "the next scan evicts k0");
    let mut kept = Vec::new();
    r.for_each(|key, _| kept.push(key.clone()));
    assert!(!kept.contains(&"k0".to_string()) && kept.contains(&"new2".to_string()));
    assert_eq!(r.overflowed(), 2);
}

/// The keyed listener hears from keyed breakers only; the overflow breaker's
/// transitions reach the shared builder's own listener, as `on_transition` says.
#[test]
fn the_overflow_breakers_transitions_reach_the_shared_listener_not_the_keyed_one() {
    let clock = ManualClock::new();
    let (keyed, shared) = (
        Arc::new(Mutex::new(Vec::new())),
        Arc::new(Mutex::new(Vec::new())),
    );
    let (k, s) = (keyed.clone(), shared.clone());
    let builder = manual(&clock)
        .consecutive_failures(1)
        .on_transition(move |t| s.lock().unwrap().push(t.to));
    let r: Registry<String, _> = Registry::builder(builder)
        .max_keys(1)
        .on_transition(move |key: &String, t| k.lock().unwrap().push((key.clone(), t.to)))
        .build()
        .unwrap();
    let _ = r.call("a", || Err::<(), _>("down")); // holds the only place, Open
    let _ = r.call("b", || Err::<(), _>("down")); // no room: the overflow breaker trips
    assert_eq!(r.overflow().unwrap().state(), State::Open);
    assert_eq!(*keyed.lock().unwrap(), [("a".to_string(), State::Open)]);
    assert_eq!(*shared.lock().unwrap(), [State::Open, State::Open]);
}

#[test]
fn when_every_breaker_is_tripped_or_busy_new_keys_share_the_overflow_breaker() {
    let clock = ManualClock::new();
    let r = Arc::new(
        Registry::builder(manual(&clock).consecutive_failures(2))
            .max_keys(2)
            .idle_resolution(Duration::from_millis(1))
            .build()
            .unwrap(),
    );
    for _ in 0..2 {
        let _ = r.call("tripped", || Err::<(), _>("down"));
    }
    let (finish, thread) = call_in_flight(&r, "busy");
    clock.advance(Duration::from_millis(10));

    // No room: "x" and "y" share the overflow breaker, and it is counted.
    let overflow = r.get("x");
    assert_eq!(overflow.name(), "overflow");
    assert!(std::ptr::eq(&*overflow, r.overflow().unwrap()));
    assert_eq!((r.len(), r.overflowed()), (2, 1));
    // A call through an overflowed key works, and is recorded on the overflow breaker.
    assert_eq!(r.call("y", || Ok::<_, ()>(7)).unwrap(), 7);
    assert_eq!(overflow.metrics().lifetime.successes, 1);
    assert_eq!(r.overflowed(), 2);
    // Failures through overflowed keys trip the overflow breaker, for all of them:
    // their isolation is lost; the keys with a breaker of their own keep it.
    let _ = r.call("x", || Err::<(), _>("down"));
    let _ = r.call("y", || Err::<(), _>("down"));
    assert_eq!(overflow.state(), State::Open);
    assert!(matches!(
        r.call("z", || Ok::<_, ()>(())),
        Err(cutout::Error::Rejected(_))
    ));
    assert_eq!(r.get("tripped").state(), State::Open);
    assert_eq!(r.with("busy", |b| b.state()), State::Closed);
    assert_eq!(r.len(), 2);

    // Once the busy call finishes, its breaker behaves like new: the next new key
    // evicts it and gets a breaker of its own (overflow is per lookup, not for good).
    finish.send(Ok(())).unwrap();
    thread.join().unwrap();
    clock.advance(Duration::from_millis(10));
    let overflowed = r.overflowed();
    let own = r.get("z");
    assert_eq!(own.name(), "z");
    assert_eq!(own.state(), State::Closed);
    assert_eq!(r.overflowed(), overflowed);
    let mut keys = Vec::new();
    r.for_each(|k, _| keys.push(k.clone()));
    keys.sort();
    assert_eq!(keys, ["tripped", "z"]);
}

#[test]
fn max_keys_zero_is_a_config_error_naming_the_field() {
    let err = Registry::<String>::builder(CircuitBreaker::builder())
        .max_keys(0)
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "max_keys");
}

/// A naming closure that panics on a hostile key (here, a byte slice on a short
/// key) runs while the new key's place under the cap is reserved: the panic must
/// give the place back, or an empty registry under `max_keys(1)` sends every new
/// key to the overflow breaker.
#[test]
fn a_panicking_naming_closure_gives_back_its_place_under_the_cap() {
    let clock = ManualClock::new();
    let r: Registry<String, _> = Registry::builder_named(manual(&clock), |key: &String| {
        key[..4].to_string() // panics on keys shorter than 4 bytes
    })
    .max_keys(1)
    .build()
    .unwrap();
    assert!(catch_unwind(AssertUnwindSafe(|| r.get("ab"))).is_err());
    assert_eq!(r.len(), 0, "nothing was inserted");
    let good = r.get("good-host");
    assert_eq!(
        (good.name(), r.len(), r.overflowed()),
        ("good", 1, 0),
        "an empty registry under its cap sent a new key to overflow"
    );
}

/// The same for an `initial_state` hook, which also runs while the place is
/// reserved: two panics under `max_keys(2)` cost no place.
#[test]
fn a_panicking_initial_state_hook_gives_back_its_place_under_the_cap() {
    let r: Registry<String> = Registry::builder(CircuitBreaker::builder())
        .initial_state(|key: &String| {
            assert!(key != "poison", "the fleet lookup failed");
            None
        })
        .max_keys(2)
        .build()
        .unwrap();
    for _ in 0..2 {
        assert!(catch_unwind(AssertUnwindSafe(|| r.get("poison"))).is_err());
    }
    r.get("a");
    r.get("b");
    assert_eq!(
        (r.len(), r.overflowed()),
        (2, 0),
        "two panics cost the registry both its places"
    );
}

/// `max_keys(1)` with four threads calling distinct keys while they also remove
/// keys and sweep: `len()` never exceeds the cap, no call is recorded twice
/// (overflow included), and once the churn stops the place can be taken again.
#[test]
fn max_keys_one_holds_under_concurrent_calls_removals_and_sweeps() {
    let clock = ManualClock::new();
    let r: Registry<String, _> = Registry::builder(manual(&clock).consecutive_failures(1_000_000))
        .idle_resolution(Duration::from_millis(1))
        .max_keys(1)
        .build()
        .unwrap();
    std::thread::scope(|s| {
        for t in 0..4 {
            let (r, clock) = (&r, &clock);
            s.spawn(move || {
                for i in 0..2_000 {
                    let key = format!("{t}-{i}");
                    let _ = r.call(&key, || Ok::<_, ()>(()));
                    assert!(r.len() <= 1, "len {} above the cap", r.len());
                    if i % 7 == 0 {
                        r.remove(&key);
                    }
                    if i % 11 == 0 {
                        clock.advance(Duration::from_millis(2));
                        r.evict_idle(Duration::from_millis(1));
                    }
                }
            });
        }
    });
    assert!(r.len() <= 1);
    // Removed and evicted breakers took their successes with them: at most.
    let mut successes = r.overflow().unwrap().metrics().lifetime.successes;
    r.for_each(|_, b| successes += b.metrics().lifetime.successes);
    assert!(successes <= 8_000, "{successes} successes from 8,000 calls");
    clock.advance(Duration::from_secs(5));
    r.evict_idle(Duration::from_millis(1));
    assert_eq!(r.get("after").name(), "after");
}

#[test]
fn threads_racing_at_the_cap_never_hold_more_than_it() {
    const THREADS: u64 = 4;
    const KEYS: u64 = 2_000;
    let clock = ManualClock::new();
    let r: Registry<u64, _> = Registry::builder(manual(&clock))
        .max_keys(50)
        .idle_resolution(Duration::from_nanos(1))
        .build()
        .unwrap();
    let barrier = Barrier::new(THREADS as usize);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (r, clock, barrier) = (&r, &clock, &barrier);
            s.spawn(move || {
                barrier.wait();
                for key in 0..KEYS {
                    clock.advance(Duration::from_nanos(1));
                    r.call(&(t * KEYS + key), || Ok::<_, ()>(())).unwrap();
                    assert!(r.len() <= 50);
                }
            });
        }
    });
    let mut entries = 0;
    r.for_each(|_, _| entries += 1);
    assert!(entries <= 50, "{entries} entries");
    assert_eq!(r.len(), entries);
}

#[cfg(feature = "metrics")]
#[test]
fn publish_metrics_reports_the_overflow_breaker_and_its_count() {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let clock = ManualClock::new();
    let r: Registry<String, _> = Registry::builder(manual(&clock).consecutive_failures(1))
        .max_keys(1)
        .build()
        .unwrap();
    metrics::with_local_recorder(&recorder, || {
        let _ = r.call("held", || Err::<(), _>("down")); // Open: never evicted
        let _ = r.call("a", || Ok::<_, ()>(()));
        let _ = r.call("b", || Ok::<_, ()>(()));
        r.publish_metrics();
    });
    let snapshot = snapshotter.snapshot().into_vec();
    let overflowed = snapshot
        .iter()
        .find(|(key, ..)| key.key().name() == cutout::export::metrics::REGISTRY_OVERFLOWED)
        .map(|(.., value)| value);
    assert_eq!(overflowed, Some(&DebugValue::Counter(2)));
    let successes = snapshot.iter().find(|(key, ..)| {
        key.key().name() == "circuit_breaker_calls_total"
            && key
                .key()
                .labels()
                .any(|l| l.key() == "breaker" && l.value() == "overflow")
            && key
                .key()
                .labels()
                .any(|l| l.key() == "outcome" && l.value() == "success")
    });
    assert_eq!(successes.map(|(.., v)| v), Some(&DebugValue::Counter(2)));
}

/// `publish_metrics` publishes `orphaned` (an outcome lost to a `remove` during
/// its `Registry::call`) as `circuit_breaker_registry_orphaned_total`, with or
/// without a key cap.
#[cfg(feature = "metrics")]
#[test]
fn publish_metrics_reports_the_orphaned_count() {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let clock = ManualClock::new();
    let r: Registry<String, _> = Registry::new(manual(&clock)).unwrap();
    metrics::with_local_recorder(&recorder, || {
        let _ = r.call("legacy", || {
            r.remove("legacy"); // removed while the call runs
            Ok::<_, ()>(())
        });
        r.publish_metrics();
    });
    assert_eq!(r.orphaned(), 1);
    let snapshot = snapshotter.snapshot().into_vec();
    let orphaned = snapshot
        .iter()
        .find(|(key, ..)| key.key().name() == cutout::export::metrics::REGISTRY_ORPHANED)
        .map(|(.., value)| value);
    assert_eq!(orphaned, Some(&DebugValue::Counter(1)));
}

#[test]
fn restore_all_under_the_cap_replaces_keys_in_place_and_skips_keys_without_room() {
    let clock = ManualClock::new();
    let r: Registry<String, _> = Registry::builder(manual(&clock).consecutive_failures(1))
        .max_keys(1)
        .build()
        .unwrap();
    let _ = r.call("db", || Err::<(), _>("down"));
    let saved = r.save_all();
    let other = ("cache".to_string(), saved[0].1.clone());
    // "db" takes its own place; "cache" finds none ("db" is Open).
    assert_eq!(r.restore_all(saved.into_iter().chain([other])), Ok(1));
    assert_eq!(r.len(), 1);
    assert_eq!(r.get("db").state(), State::Open);
}

/// `restore_all` at the cap takes a place from a breaker it may evict even when
/// a lookup's scan has just found none (the gate that paces lookups' scans does
/// not hold it back): a saved Open state is not skipped for want of a scan.
#[test]
fn restore_all_at_the_cap_evicts_past_the_lookups_scan_gate() {
    let clock = ManualClock::new();
    let r: Registry<String, _> = Registry::builder(manual(&clock).consecutive_failures(1))
        .max_keys(64)
        .build()
        .unwrap();
    let held: Vec<_> = (0..64).map(|i| r.get(&format!("k{i}"))).collect();
    r.get("busy"); // at the cap, every breaker held: the scan evicts nothing
    drop(held);
    clock.advance(Duration::from_secs(3600)); // every breaker idle, like new
    let t0 = std::time::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let mut open = cutout::SavedState::new("db", State::Open, t0);
    open.open_until = Some(t0 + Duration::from_secs(30));
    assert_eq!(r.restore_all_at([("db".to_string(), open)], t0), Ok(1));
    assert_eq!(r.get("db").state(), State::Open);
}

/// With or without a key cap, a breaker that `restore_all` replaces publishes
/// what it counted since the last publication: no success goes unpublished.
#[cfg(feature = "metrics")]
#[test]
fn restore_all_publishes_what_the_replaced_breaker_counted() {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};
    for cap in [None, Some(10)] {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let clock = ManualClock::new();
        metrics::with_local_recorder(&recorder, || {
            let mut b = Registry::builder(manual(&clock));
            if let Some(n) = cap {
                b = b.max_keys(n);
            }
            let r: Registry<String, ManualClock> = b.build().unwrap();
            for _ in 0..5 {
                r.call("db", || Ok::<_, ()>(())).unwrap();
            }
            r.publish_metrics();
            for _ in 0..2 {
                r.call("db", || Ok::<_, ()>(())).unwrap();
            }
            assert_eq!(r.restore_all(r.save_all()), Ok(1));
            r.publish_metrics();
        });
        let successes: u64 = (snapshotter.snapshot().into_vec().into_iter())
            .filter(|(key, ..)| {
                let label = |k, v| key.key().labels().any(|l| l.key() == k && l.value() == v);
                key.key().name() == cutout::export::metrics::CALLS
                    && label("breaker", "db")
                    && label("outcome", "success")
            })
            .map(|(.., value)| match value {
                DebugValue::Counter(n) => n,
                _ => 0,
            })
            .sum();
        assert_eq!(successes, 7, "max_keys {cap:?}");
    }
}

/// `restore_all` at the cap, replacing keys that hold every place (Open, so no
/// new key can evict them), while another thread's new keys race for places:
/// each replaced key hands its place to its restored breaker, so every key is
/// restored every time and the new keys share the overflow breaker.
#[test]
fn restore_all_at_the_cap_keeps_every_key_while_new_keys_race_for_places() {
    const KEYS: usize = 8;
    let clock = ManualClock::new();
    let r: Registry<String, ManualClock> =
        Registry::builder(manual(&clock).consecutive_failures(1))
            .max_keys(KEYS)
            .build()
            .unwrap();
    for k in 0..KEYS {
        let _ = r.call(&format!("k{k}"), || Err::<(), _>("down"));
    }
    let saved = r.save_all();
    assert_eq!(saved.len(), KEYS);
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut i = 0u64;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = r.call(&format!("new{i}"), || Ok::<_, ()>(()));
                i += 1;
            }
        });
        let rounds: Vec<_> = (0..3_000).map(|_| r.restore_all(saved.clone())).collect();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        let short: Vec<_> = rounds
            .iter()
            .enumerate()
            .filter(|(_, n)| **n != Ok(KEYS))
            .collect();
        assert!(
            short.is_empty(),
            "{} of 3,000 rounds restored fewer keys: {:?}",
            short.len(),
            &short[..short.len().min(5)]
        );
    });
    assert_eq!(r.len(), KEYS);
    for k in 0..KEYS {
        assert_eq!(r.get(&format!("k{k}")).state(), State::Open, "k{k}");
    }
}

// ---- the key cap's eviction against hostile keys and racing lookups ---------

/// `max_keys(1)`, 1 ms idle resolution, on `clock`.
fn capped(clock: &ManualClock) -> Registry<Key, ManualClock> {
    Registry::builder(trips_on(1, clock.clone()))
        .max_keys(1)
        .idle_resolution(Duration::from_millis(1))
        .build()
        .unwrap()
}

/// At the cap, a new key's lookup evicts the idle "victim", whose `Hash` panics in
/// the eviction's removal. The panic reaches the caller; the scan gate reopens
/// (scans go on evicting idle keys), and the victim keeps its place, since its
/// entry may still be in the map: the registry never holds more than the cap.
#[test]
fn a_key_whose_hash_panics_in_an_eviction_keeps_its_place_and_the_cap() {
    let clock = ManualClock::new();
    let r = capped(&clock);
    r.get(&key("victim"));
    r.get(&key("first")); // overflow: no room, and "victim" was just used
    clock.advance(Duration::from_secs(1));
    POISON.with(|p| p.set(true));
    let panicked = catch_unwind(AssertUnwindSafe(|| r.get(&key("a")))).is_err();
    POISON.with(|p| p.set(false));
    assert!(panicked, "the hostile hash ran in the eviction");
    // The victim's place is still taken: "b" overflows, and the map holds one
    // entry at most (the victim's, claimed, until its next lookup).
    assert_eq!(r.get(&key("b")).name(), "overflow");
    let mut held = 0;
    r.for_each(|_, _| held += 1);
    assert!(
        held <= 1,
        "max_keys(1) but the registry holds {held} breakers"
    );
    // The victim's entry, claimed, leaves the map at its next lookup; its place
    // stays taken, so every new key overflows from now on.
    r.get(&key("victim"));
    let overflowed = r.overflowed();
    for i in 0..10 {
        clock.advance(Duration::from_secs(1));
        assert_eq!(r.get(&key(&format!("k{i}"))).name(), "overflow");
    }
    assert_eq!(r.overflowed(), overflowed + 10);
    assert!(r.len() <= 1);
}

/// After an eviction whose removal panicked (the victim, the least recently used
/// key, has a hostile `Hash`), scans run again: each new key a second later evicts
/// the key before it. (A scan cut short by the panic once left the scan gate shut
/// for good, and every new key overflowed.)
#[test]
fn after_a_panicking_eviction_the_next_scans_evict_again() {
    let clock = ManualClock::new();
    let r: Registry<Key, ManualClock> = Registry::builder(trips_on(1, clock.clone()))
        .max_keys(2)
        .idle_resolution(Duration::from_millis(1))
        .build()
        .unwrap();
    r.get(&key("victim"));
    clock.advance(Duration::from_millis(1));
    r.get(&key("other"));
    clock.advance(Duration::from_secs(1));
    POISON.with(|p| p.set(true));
    // Both idle: the scan takes the least recently used, the victim.
    let panicked = catch_unwind(AssertUnwindSafe(|| r.get(&key("a")))).is_err();
    POISON.with(|p| p.set(false));
    assert!(panicked, "the hostile hash ran in the eviction");
    let mut own = 0;
    for i in 0..100 {
        clock.advance(Duration::from_secs(1));
        own += usize::from(r.get(&key(&format!("k{i}"))).name() != "overflow");
    }
    assert!(
        own >= 90,
        "{own} of 100 new keys got a breaker of their own"
    );
}

/// At the cap, an eviction takes an entry whose timestamp is two resolutions old,
/// as a sweep with an `older_than` of one resolution does: a `get` whose reading
/// is within a resolution of the timestamp writes nothing, and it must find its
/// entry in the registry however the eviction's scan and claim fall around its
/// clone and claim check. Here the `get` reads 999 ms after the last use (1 s
/// resolution), the evictor 1 ms later, and the getter clones between the scan
/// and the claim: the registry keeps "a", and the new key overflows. (Evicting at
/// one resolution, the registry took "a" from under the handle.)
#[test]
fn at_the_cap_a_get_at_the_resolutions_edge_keeps_its_breaker_in_the_registry() {
    let clock = ManualClock::new();
    let r: Registry<Key, Hooked> = Registry::builder(trips_on(1, Hooked(clock.clone())))
        .max_keys(1)
        .idle_resolution(Duration::from_secs(1))
        .build()
        .unwrap();
    r.get(&key("a")); // last used at 0
    clock.advance(Duration::from_millis(999));
    let (read_tx, read_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    std::thread::scope(|s| {
        let getter = s.spawn(|| {
            // `get`'s first reading is its `touch`'s: 999 ms, within the
            // resolution, so nothing is written. Then it pauses.
            on_next_reading(move || {
                read_tx.send(()).unwrap();
                go_rx.recv_timeout(BOUND).unwrap();
            });
            let held = r.get(&key("a"));
            done_tx.send(()).unwrap();
            held
        });
        read_rx.recv_timeout(BOUND).unwrap();
        clock.advance(Duration::from_millis(1)); // 1 s after "a"'s last use
        // The evictor (this thread): `insert` reads 1000 ms, the scan sees "a"
        // unused for the resolution and held nowhere, then `behaves_like_new`
        // reads the breaker's clock: here the getter finishes, before the claim.
        on_next_reading(move || {
            // The first reading (`insert`'s) arms the second (`behaves_like_new`'s).
            on_next_reading(move || {
                go_tx.send(()).unwrap();
                done_rx.recv_timeout(BOUND).unwrap();
            });
        });
        r.get(&key("b"));
        let held = getter.join().unwrap();
        let mut keys = Vec::new();
        r.for_each(|k, _| keys.push(k.0.clone()));
        // The handle's failure trips the handle's breaker; the registry's "a" is
        // another one.
        let _ = held.call(|| Err::<(), _>("down"));
        let now = r.get(&key("a"));
        assert!(
            keys.contains(&"a".to_string()),
            "the registry evicted \"a\" while a `get` handle holds it: keys now {keys:?}; \
             the handle is {:?}, the registry's \"a\" is {:?} named {:?}",
            held.state(),
            now.state(),
            now.name()
        );
    });
}

/// A breaker borrowed by `with` at the resolution's edge, while another thread's
/// new key arrives at the cap: not evicted (its timestamp is one resolution old,
/// not two), so the call made in the closure counts on the registry's breaker.
#[test]
fn at_the_cap_a_breaker_borrowed_by_with_at_the_resolutions_edge_is_not_evicted() {
    let clock = ManualClock::new();
    let r = capped(&clock);
    r.get(&key("a")); // last used at 0
    clock.advance(Duration::from_micros(999)); // within the 1 ms resolution
    r.with(&key("a"), |breaker| {
        // Another thread's new key, 1 us later: "a" is one resolution old.
        clock.advance(Duration::from_micros(1));
        assert_eq!(r.get(&key("b")).name(), "overflow");
        let _ = breaker.call(|| Err::<(), _>("down"));
    });
    assert_eq!(r.get(&key("a")).metrics().lifetime.failures, 1);
    assert_eq!(r.orphaned(), 0);
}
