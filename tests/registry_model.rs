//! `Registry` under random operation sequences on a `ManualClock` whose steps run
//! from a nanosecond to years: lookups, calls that succeed or fail, handles held
//! from `get` and dropped, removals, sweeps, saves and restores, with and without
//! a key cap. After every step: never more breakers than the cap; a breaker held
//! through `get` is the registry's for its key until `remove` or `restore_all`
//! replaces it; a breaker that is not Closed is never evicted (a streak, which
//! no time ends, an idle sweep may forget; `tests/registry.rs` pins that an
//! eviction at the cap never does); every call lands on a breaker the registry holds (nothing
//! orphaned, single-threaded); and the overflow count never goes back. Then, with
//! a cap, calls held in flight and keys tripped stay while new keys crowd in.
#![cfg(feature = "registry")]

mod common;

use common::trips_after;
use cutout::{CircuitBreaker, ManualClock, Registry, State};
use proptest::prelude::*;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

const KEYS: u8 = 6;

#[derive(Clone, Debug)]
enum Op {
    Get(u8),
    Hold(u8),
    Release(u8),
    Call(u8, bool),
    With(u8),
    Remove(u8),
    Sweep(Duration),
    Advance(Duration),
    SaveAndRestore,
}

fn duration() -> impl Strategy<Value = Duration> {
    prop_oneof![
        (1u64..2_000_000).prop_map(Duration::from_nanos),
        (1u64..5_000).prop_map(Duration::from_millis),
        (1u64..400).prop_map(|d| Duration::from_secs(d * 86_400)),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0..KEYS;
    prop_oneof![
        3 => key.clone().prop_map(Op::Get),
        1 => key.clone().prop_map(Op::Hold),
        1 => key.clone().prop_map(Op::Release),
        4 => (key.clone(), any::<bool>()).prop_map(|(k, ok)| Op::Call(k, ok)),
        1 => key.clone().prop_map(Op::With),
        1 => key.prop_map(Op::Remove),
        1 => duration().prop_map(Op::Sweep),
        3 => duration().prop_map(Op::Advance),
        1 => Just(Op::SaveAndRestore),
    ]
}

type Breaker = Arc<CircuitBreaker<ManualClock>>;

fn registry(clock: &ManualClock, cap: Option<usize>) -> Registry<u8, ManualClock> {
    let mut builder =
        Registry::builder(trips_after(2, Duration::from_secs(1)).clock(clock.clone()))
            .idle_resolution(Duration::from_millis(1))
            .evict_idle_after(Duration::from_secs(1));
    if let Some(cap) = cap {
        builder = builder.max_keys(cap);
    }
    builder.build().unwrap()
}

/// The keys the registry holds, and their breakers' states.
fn held(r: &Registry<u8, ManualClock>) -> HashMap<u8, State> {
    let mut keys = HashMap::new();
    r.for_each(|k, b| _ = keys.insert(*k, b.state()));
    keys
}

/// The keys whose breakers no eviction may take: those not Closed.
fn busy(r: &Registry<u8, ManualClock>) -> Vec<u8> {
    let kept = |k: u8| r.with(&k, |b| b.state() != State::Closed);
    held(r).into_keys().filter(|&k| kept(k)).collect()
}

/// Calls each of `keys` on `r`, one inside the other, and runs `then` in the
/// innermost call with the keys whose calls are in flight on breakers of their own
/// (a rejected call, or one on the overflow breaker, is not).
fn in_flight(
    r: &Registry<u8, ManualClock>,
    keys: &[u8],
    flying: &mut Vec<u8>,
    then: &mut dyn FnMut(&[u8]) -> Result<(), TestCaseError>,
) -> Result<(), TestCaseError> {
    let Some((&k, rest)) = keys.split_first() else {
        return then(flying);
    };
    let own = r.with(&k, |b| !r.overflow().is_some_and(|o| std::ptr::eq(b, o)));
    let mut inner = None;
    let _ = r.call(&k, || {
        flying.extend(own.then_some(k));
        inner = Some(in_flight(r, rest, flying, then));
        flying.retain(|&f| f != k);
        Ok::<_, ()>(())
    });
    inner.unwrap_or_else(|| in_flight(r, rest, flying, then))
}

/// At the cap, after a sequence: trips the keys in the mask `trips` and holds a
/// call in flight on each key in the mask `holds`, then pushes `pushes` new keys
/// past the cap, an idle resolution and more apart, which evict what behaves like
/// new. None of those breakers, nor any other that is busy, is evicted, and no
/// outcome is lost.
fn crowd(
    r: &Registry<u8, ManualClock>,
    clock: &ManualClock,
    (holds, trips, pushes): (u8, u8, u8),
) -> Result<(), TestCaseError> {
    let keys = |mask: u8| (0..KEYS).filter(move |k| mask & (1 << k) != 0);
    for k in keys(trips) {
        for _ in 0..2 {
            let _ = r.call(&k, || Err::<(), _>(()));
        }
    }
    let busy = busy(r);
    let holds: Vec<u8> = keys(holds).collect();
    in_flight(r, &holds, &mut Vec::new(), &mut |flying| {
        for new in KEYS..KEYS + pushes {
            clock.advance(Duration::from_millis(3));
            let _ = r.get(&new);
            let after = held(r);
            for k in flying.iter().chain(&busy) {
                prop_assert!(
                    after.contains_key(k),
                    "key {} evicted ({:?} in flight, {:?} busy)",
                    k,
                    flying,
                    busy
                );
            }
        }
        Ok(())
    })?;
    prop_assert_eq!(r.orphaned(), 0);
    Ok(())
}

fn run(ops: &[Op], cap: Option<usize>, crowded: (u8, u8, u8)) -> Result<(), TestCaseError> {
    let clock = ManualClock::new();
    let mut r = registry(&clock, cap);
    let mut handles: HashMap<u8, Breaker> = HashMap::new();
    let mut overflowed = 0;
    for op in ops {
        // Keys whose breakers are not Closed before this step: none may be
        // evicted by it.
        let busy = busy(&r);
        let mut replaced = None;
        match *op {
            Op::Get(k) => _ = r.get(&k),
            Op::Hold(k) => {
                let handle = r.get(&k);
                // At the cap with no room, the key's lookups share the overflow
                // breaker: not the key's own.
                if handle.name() != "overflow" {
                    handles.insert(k, handle);
                }
            }
            Op::Release(k) => _ = handles.remove(&k),
            Op::Call(k, ok) => {
                let admitted = r.with(&k, |b| b.state() == State::Closed);
                let lifetime =
                    |r: &Registry<u8, ManualClock>| r.with(&k, |b| b.metrics().lifetime.admitted);
                let before = lifetime(&r);
                let result = r.call(&k, || if ok { Ok(()) } else { Err(()) });
                // A closed breaker admits, and the call counts on the breaker the
                // registry holds for the key (or on the overflow breaker).
                if admitted && result.is_ok() == ok && r.overflowed() == overflowed {
                    prop_assert_eq!(lifetime(&r), before + 1, "key {}", k);
                }
            }
            Op::With(k) => _ = r.with(&k, |b| b.state()),
            Op::Remove(k) => {
                _ = r.remove(&k);
                replaced = Some(k);
            }
            Op::Sweep(d) => _ = r.evict_idle(d),
            Op::Advance(d) => clock.advance(d),
            Op::SaveAndRestore => {
                let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
                let saved = r.save_all_at(now);
                let keys: Vec<u8> = saved.iter().map(|(k, _)| *k).collect();
                let fresh = registry(&clock, cap);
                prop_assert_eq!(fresh.restore_all_at(saved, now), Ok(keys.len()));
                r = fresh;
                handles.clear(); // handles of the old registry's breakers
                overflowed = 0;
            }
        }
        let after = held(&r);
        if let Some(cap) = cap {
            prop_assert!(after.len() <= cap && r.len() <= cap, "{:?}", after);
        }
        prop_assert_eq!(r.orphaned(), 0);
        prop_assert!(r.overflowed() >= overflowed);
        overflowed = r.overflowed();
        if replaced.is_none() && !matches!(op, Op::SaveAndRestore) {
            for k in busy {
                prop_assert!(after.contains_key(&k), "{:?} evicted busy key {}", op, k);
            }
        }
        if let Some(k) = replaced {
            handles.remove(&k);
        }
        for (k, handle) in &handles {
            if after.contains_key(k) {
                prop_assert!(
                    Arc::ptr_eq(handle, &r.get(k)),
                    "key {} replaced under its handle",
                    k
                );
            } else {
                prop_assert!(false, "key {} evicted while held ({:?})", k, op);
            }
        }
    }
    if cap.is_some() {
        handles.clear();
        crowd(&r, &clock, crowded)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn a_registry_keeps_its_promises_under_any_sequence(
        ops in prop::collection::vec(op(), 1..80),
        cap in prop_oneof![Just(None), (1usize..=4).prop_map(Some)],
        crowd in (any::<u8>(), any::<u8>(), 1u8..40),
    ) {
        run(&ops, cap, crowd)?;
    }
}
