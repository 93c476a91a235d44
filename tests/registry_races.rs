//! The registry's races: a breaker that leaves the registry (removed, evicted)
//! between a call's lookup, admission and outcome, many threads on shared and
//! distinct keys at the cap, a key whose `Hash` panics once the call has begun, and
//! a registry dropped during a call. Every call is admitted once and its outcome
//! found once: on a breaker, or in `orphaned`.
//!
//! The races are set up, not waited for: a `Hooked` clock or a key's `Hash`
//! pauses a thread at a chosen point. Two tests hammer with real threads, each
//! bounded in time.

mod common;

use common::hostile::{Hooked, Key, POISON, key, on_next_hash_of, on_next_reading};
use common::{trips_after, trips_on};
use cutout::{CircuitBreaker, ManualClock, Registry, State};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc;
use std::time::Duration;

/// How long a test waits for another thread before it fails instead of hanging.
const BOUND: Duration = Duration::from_secs(10);

/// Admitted calls that have not finished, from a breaker's lifetime counters.
fn unfinished(b: &CircuitBreaker<impl cutout::Clock>) -> u64 {
    let l = b.metrics().lifetime;
    l.admitted - (l.successes + l.failures + l.ignored + l.stale + l.dropped)
}

// ---- a key that cannot be hashed once the call has begun -------------------

/// A call looks its key up once: a call that leaves its key unhashable (its
/// `Hash` panics from then on) still has its outcome recorded, on the breaker it
/// was admitted on, with nothing orphaned and nothing left in flight.
#[test]
fn a_call_that_poisons_its_key_is_recorded_without_a_second_lookup() {
    let clock = ManualClock::new();
    let r: Registry<Key, ManualClock> = Registry::builder(trips_on(5, clock.clone()))
        .idle_resolution(Duration::from_millis(1))
        .build()
        .unwrap();
    let result = catch_unwind(AssertUnwindSafe(|| {
        r.call(&key("victim"), || {
            POISON.with(|p| p.set(true)); // the call leaves the key unhashable
            Ok::<_, ()>(())
        })
    }));
    POISON.with(|p| p.set(false));
    assert!(matches!(result, Ok(Ok(()))), "no lookup ran after the call");
    assert_eq!(r.orphaned(), 0);
    let b = r.get(&key("victim"));
    assert_eq!((unfinished(&b), b.metrics().lifetime.successes), (0, 1));
}

/// A call that panics after leaving its key unhashable is recorded as dropped by
/// its guard, which needs no lookup: the caller's panic reaches `catch_unwind`
/// (a second panic in the guard's drop, during unwinding, would abort the
/// process), and nothing is orphaned. In a child process, so that an abort
/// cannot end this binary.
#[test]
fn a_panicking_call_with_a_poisoned_key_is_recorded_as_dropped() {
    if std::env::var_os(CHILD).is_some() {
        let r: Registry<Key> = Registry::new(CircuitBreaker::builder()).unwrap();
        let caught = catch_unwind(AssertUnwindSafe(|| {
            r.call(&key("victim"), || -> Result<(), ()> {
                POISON.with(|p| p.set(true));
                panic!("the call panics");
            })
        }));
        POISON.with(|p| p.set(false));
        assert!(caught.is_err());
        assert_eq!(r.orphaned(), 0);
        let l = r.get(&key("victim")).metrics().lifetime;
        assert_eq!((l.admitted, l.dropped), (1, 1));
        println!("CHILD-SURVIVED");
        return;
    }
    let child = common::run_child(
        "a_panicking_call_with_a_poisoned_key_is_recorded_as_dropped",
        &[],
        CHILD,
        BOUND,
    );
    assert!(
        child.status.is_some_and(|s| s.success()) && child.stdout.contains("CHILD-SURVIVED"),
        "the caller's panic never reached catch_unwind: {:?}\n{}",
        child.status,
        child.stderr
    );
}

/// Set in the child process of `a_panicking_call_with_a_poisoned_key_is_recorded_as_dropped`.
const CHILD: &str = "CUTOUT_REGISTRY_RACES_CHILD";

// ---- an admission on a breaker removed between lookup and admission --------

/// A call admitted on a breaker that `remove` claims before the call's claim
/// check is admitted again on the key's next breaker; the first admission is
/// given back (as ignored). It was dropped on the floor: the removed breaker,
/// which a `get` handle still records on, showed a call in flight that never ran
/// on it, and, half-open, had lost its one probe slot, so the handle rejected
/// every call until the half-open timeout reopened it with a longer cooldown.
#[test]
fn a_call_racing_remove_gives_its_first_admission_back() {
    let clock = ManualClock::new();
    let r: Registry<Key, Hooked> =
        Registry::builder(trips_after(1, Duration::from_secs(1)).clock(Hooked(clock.clone())))
            .build()
            .unwrap();
    let handle = r.get(&key("k"));
    let _ = handle.call(|| Err::<(), _>("down"));
    assert_eq!(handle.state(), State::Open);
    clock.advance(Duration::from_secs(1)); // the cooldown is over
    let (read_tx, read_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    std::thread::scope(|s| {
        let caller = s.spawn(|| {
            // The lookup's first reading is its `touch`'s; the second is the
            // admission's (the cooldown check): pause there, after `touch` found
            // the entry live and before the ticket is taken.
            on_next_reading(move || {
                on_next_reading(move || {
                    read_tx.send(()).unwrap();
                    go_rx.recv_timeout(BOUND).unwrap();
                });
            });
            r.call(&key("k"), || Ok::<_, ()>(()))
        });
        read_rx.recv_timeout(BOUND).unwrap();
        let removed = r.remove(&key("k")).expect("the key had a breaker");
        drop(removed);
        go_tx.send(()).unwrap();
        assert!(
            caller.join().unwrap().is_ok(),
            "admitted by the new breaker"
        );
    });
    assert_eq!(r.orphaned(), 0);
    assert_eq!(r.get(&key("k")).metrics().lifetime.successes, 1);
    let phantom = unfinished(&handle);
    let probe = handle.call(|| Ok::<_, ()>(()));
    assert!(
        phantom == 0 && probe.is_ok(),
        "no call runs on the removed breaker, yet it shows {phantom} in flight and is {:?}; \
         its handle's probe: {probe:?}",
        handle.state()
    );
}

// ---- the one race of eviction: its outcome and `orphaned` -------------------

/// In eviction's one race (a caller stalled for one idle resolution at the key
/// cap, admitted and checked between the eviction's read and claim) the call's
/// outcome is lost, and `orphaned` counts it (the `Registry` docs, Idle
/// eviction), also when it arrives after the claim and before the evictor has
/// taken the entry out of the map (the evictor is paused in the key's `Hash`
/// there). It was recorded on the evicted breaker and lost uncounted.
#[test]
fn an_outcome_lost_to_evictions_race_is_counted_as_orphaned() {
    let clock = ManualClock::new();
    let r: Registry<Key, Hooked> = Registry::builder(trips_on(1, Hooked(clock.clone())))
        .max_keys(1)
        .idle_resolution(Duration::from_millis(1))
        .build()
        .unwrap();
    r.get(&key("a")); // last used at 0
    clock.advance(Duration::from_micros(500));
    let (c_read_tx, c_read_rx) = mpsc::channel::<()>();
    let (c_go_tx, c_go_rx) = mpsc::channel::<()>();
    let (c_running_tx, c_running_rx) = mpsc::channel::<()>();
    let (claimed_tx, claimed_rx) = mpsc::channel::<()>();
    let (c_done_tx, c_done_rx) = mpsc::channel::<()>();
    std::thread::scope(|s| {
        let r = &r;
        let caller = s.spawn(move || {
            // The caller's `touch` reads 0.5 ms (within the resolution: nothing
            // written), then it stalls.
            on_next_reading(move || {
                c_read_tx.send(()).unwrap();
                c_go_rx.recv_timeout(BOUND).unwrap();
            });
            let result = r.call(&key("a"), move || {
                // Admitted and checked: let the evictor claim, then record.
                c_running_tx.send(()).unwrap();
                claimed_rx.recv_timeout(BOUND).unwrap();
                Err::<(), _>("down")
            });
            c_done_tx.send(()).unwrap();
            result
        });
        c_read_rx.recv_timeout(BOUND).unwrap();
        clock.advance(Duration::from_micros(1_500)); // 2 ms: "a" two resolutions old
        // The evictor (this thread): `insert` reads the clock, the scan takes "a",
        // `behaves_like_new` reads no call in flight and then the clock: there
        // the caller is let go; then the claim, and the removal hashes "a".
        on_next_reading(move || {
            on_next_reading(move || {
                on_next_hash_of("a", move || {
                    claimed_tx.send(()).unwrap();
                    c_done_rx.recv_timeout(BOUND).unwrap();
                });
                c_go_tx.send(()).unwrap();
                c_running_rx.recv_timeout(BOUND).unwrap();
            });
        });
        let b = r.get(&key("b"));
        assert_eq!(b.name(), "b", "\"a\" was evicted for \"b\"");
        drop(b);
        assert!(caller.join().unwrap().is_err());
    });
    assert_eq!(r.len(), 1);
    assert_eq!(
        r.orphaned(),
        1,
        "the failure was recorded on the evicted breaker and lost uncounted"
    );
}

// ---- threads hammering shared and distinct keys -----------------------------

/// Many threads call shared and distinct keys through a capped registry
/// with automatic and explicit sweeps, removals and a clock every thread moves.
/// Every call's failure is found exactly once: on a breaker still in the
/// registry, on one `remove` returned, on the overflow breaker, or in
/// `orphaned` (failures stay in each breaker's window of an hour, far longer than
/// the test's clock runs, so no breaker with one is ever evicted);
/// a key whose breaker is held through `get` keeps that one breaker for every
/// call; `len()` never exceeds the cap.
#[test]
fn failures_from_many_threads_are_each_found_exactly_once() {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    const THREADS: u64 = 4;
    const CAP: usize = 16;
    let clock = ManualClock::new();
    let never = (trips_on(u32::MAX / 2, clock.clone()))
        .window(Duration::from_secs(3600), 60)
        .failure_rate(1.0, u32::MAX);
    let r: Registry<String, ManualClock> = Registry::builder(never)
        .max_keys(CAP)
        .idle_resolution(Duration::from_micros(50))
        .evict_idle_after(Duration::from_micros(200))
        .build()
        .unwrap();
    let held = r.get("held");
    let admitted = AtomicU64::new(0);
    let on_held = AtomicU64::new(0);
    let removed = Mutex::new(Vec::new());
    let deadline = std::time::Instant::now() + BOUND;
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (r, clock, admitted, on_held, removed) =
                (&r, &clock, &admitted, &on_held, &removed);
            s.spawn(move || {
                for i in 0..20_000u64 {
                    if std::time::Instant::now() > deadline {
                        break;
                    }
                    clock.advance(Duration::from_micros(7));
                    let k = match i % 5 {
                        0 => "held".to_string(),
                        1 | 2 => format!("shared{}", i % 3),
                        _ => format!("t{t}-{i}"),
                    };
                    match r.call(&k, || Err::<(), _>(())) {
                        Err(cutout::Error::Inner(())) => {
                            admitted.fetch_add(1, Relaxed);
                            if k == "held" {
                                on_held.fetch_add(1, Relaxed);
                            }
                        }
                        other => panic!("{other:?}"),
                    }
                    assert!(r.len() <= CAP, "len {} above the cap", r.len());
                    if i % 13 == 0 {
                        if let Some(b) = r.remove(&format!("t{t}-{}", i.saturating_sub(3))) {
                            removed.lock().unwrap().push(b);
                        }
                    }
                    if i % 17 == 0 {
                        r.evict_idle(Duration::from_micros(100));
                    }
                }
            });
        }
    });
    let mut found = r.orphaned() + r.overflow().unwrap().metrics().lifetime.failures;
    r.for_each(|_, b| found += b.metrics().lifetime.failures);
    for b in removed.lock().unwrap().iter() {
        found += b.metrics().lifetime.failures;
    }
    assert_eq!(found, admitted.load(Relaxed));
    assert!(std::sync::Arc::ptr_eq(&held, &r.get("held")));
    assert_eq!(held.metrics().lifetime.failures, on_held.load(Relaxed));
}

/// Two threads call one key while a third removes it over and over (2 s): every
/// call is found exactly once, as a success on one of the breakers or in
/// `orphaned`, and a removed breaker shows in flight only calls `orphaned`
/// counted. Before, thousands of calls that raced a removal's claim were
/// admitted on two breakers.
#[test]
fn calls_racing_remove_are_each_found_once() {
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
    let clock = ManualClock::new();
    let r: Registry<String, ManualClock> = Registry::builder(trips_on(u32::MAX / 2, clock.clone()))
        .build()
        .unwrap();
    let mut removed = Vec::new();
    let stop = AtomicBool::new(false);
    let calls = std::sync::atomic::AtomicU64::new(0);
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    std::thread::scope(|s| {
        for _ in 0..2 {
            let (r, stop, calls) = (&r, &stop, &calls);
            s.spawn(move || {
                while !stop.load(Relaxed) {
                    r.call("k", || Ok::<_, ()>(())).unwrap();
                    calls.fetch_add(1, Relaxed);
                }
            });
        }
        while std::time::Instant::now() < deadline {
            removed.extend(r.remove("k"));
        }
        stop.store(true, Relaxed);
    });
    let in_flight: u64 = removed.iter().map(|b| unfinished(b)).sum();
    assert!(
        in_flight <= r.orphaned(),
        "{} removed breakers show {in_flight} calls in flight, {} orphaned",
        removed.len(),
        r.orphaned()
    );
    let successes: u64 = removed
        .iter()
        .chain(r.remove("k").as_ref())
        .map(|b| b.metrics().lifetime.successes)
        .sum();
    assert_eq!(successes + r.orphaned(), calls.load(Relaxed));
}

/// A registry dropped while another thread's call is in flight on a
/// breaker it handed out (an owned permit on a `get` handle): the call records
/// on that breaker after the drop, and the keyed listener, which the breaker
/// keeps, still reports the transition with its key.
#[test]
fn a_registry_dropped_during_a_call_on_its_breaker_leaves_the_call_whole() {
    use std::sync::{Arc, Mutex};
    let clock = ManualClock::new();
    let events = Arc::new(Mutex::new(Vec::new()));
    let log = events.clone();
    let r: Registry<String, ManualClock> = Registry::builder(trips_on(1, clock.clone()))
        .on_transition(move |k: &String, t| log.lock().unwrap().push((k.clone(), t.to)))
        .build()
        .unwrap();
    let (admitted_tx, admitted_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let handle = r.get("db");
    let worker = std::thread::spawn(move || {
        let permit = handle.try_acquire_owned().unwrap();
        admitted_tx.send(()).unwrap();
        go_rx.recv_timeout(BOUND).unwrap();
        permit.failure();
        handle
    });
    admitted_rx.recv_timeout(BOUND).unwrap();
    drop(r);
    go_tx.send(()).unwrap();
    let handle = worker.join().unwrap();
    assert_eq!(handle.state(), State::Open);
    assert_eq!(handle.metrics().lifetime.failures, 1);
    assert_eq!(*events.lock().unwrap(), [("db".to_string(), State::Open)]);
}
