//! `CircuitBreaker::open_for`: an external decision opens only a Closed breaker,
//! until its deadline, and never closes one.

mod common;

use common::{on_manual_clock, trips_after};
use cutout::{CircuitBreaker, ManualClock, Reason, State, Transition};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn breaker() -> (
    CircuitBreaker<ManualClock>,
    ManualClock,
    Arc<Mutex<Vec<Transition>>>,
) {
    let clock = ManualClock::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let breaker = trips_after(2, Duration::from_secs(1))
        .clock(clock.clone())
        .on_transition(move |t| log.lock().unwrap().push(*t))
        .build()
        .unwrap();
    (breaker, clock, seen)
}

#[test]
fn opens_a_closed_breaker_until_the_deadline_then_probes_decide() {
    let (b, clock, seen) = breaker();
    clock.advance(Duration::from_secs(3));
    assert!(b.open_for(Duration::from_millis(2500)));
    assert_eq!(b.state(), State::Open);
    let t = seen.lock().unwrap()[0];
    assert_eq!(
        (t.from, t.to, t.reason),
        (State::Closed, State::Open, Reason::External)
    );
    assert_eq!(t.at, Duration::from_secs(3));
    assert_eq!(t.open_until, Some(Duration::from_millis(5500)));
    assert_eq!(b.metrics().transitions(Reason::External), 1);

    clock.advance(Duration::from_millis(2499));
    let r = b.try_acquire().unwrap_err();
    assert_eq!(r.retry_after(), Some(Duration::from_millis(1)));
    clock.advance(Duration::from_millis(1));
    let probe = b.try_acquire().unwrap();
    assert_eq!(b.state(), State::HalfOpen);
    probe.failure();
    // A failed probe reopens at the next backoff level, as after any trip.
    assert_eq!(b.state(), State::Open);
    assert_eq!(seen.lock().unwrap().last().unwrap().level, 1);
}

#[test]
fn leaves_every_state_but_closed_alone_and_never_closes() {
    let (b, clock, seen) = breaker();
    for _ in 0..2 {
        let _ = b.call(|| Err::<(), _>("down"));
    }
    assert_eq!(b.state(), State::Open);
    let n = seen.lock().unwrap().len();
    assert!(
        !b.open_for(Duration::from_secs(60)),
        "already Open: no extension"
    );
    assert_eq!(
        b.try_acquire().unwrap_err().retry_after(),
        Some(Duration::from_secs(1))
    );

    clock.advance(Duration::from_secs(1));
    let probe = b.try_acquire().unwrap();
    assert!(
        !b.open_for(Duration::from_secs(60)),
        "a half-open round decides for itself"
    );
    assert_eq!(b.state(), State::HalfOpen);
    probe.success();
    assert_eq!(b.state(), State::Closed);

    b.force_open();
    assert!(!b.open_for(Duration::from_secs(60)));
    assert_eq!(b.state(), State::ForcedOpen);
    b.disable();
    assert!(!b.open_for(Duration::from_secs(60)));
    assert_eq!(b.state(), State::Disabled);
    b.reset();
    assert!(!b.open_for(Duration::ZERO), "a zero duration opens nothing");
    assert!(!b.open_for(Duration::from_micros(999)));
    assert_eq!(b.state(), State::Closed);
    let reasons: Vec<_> = seen.lock().unwrap()[n..].iter().map(|t| t.reason).collect();
    assert!(!reasons.contains(&Reason::External));
}

#[test]
fn a_huge_duration_saturates_and_reset_still_closes() {
    let (b, _clock, _) = breaker();
    assert!(b.open_for(Duration::MAX));
    assert_eq!(b.state(), State::Open);
    assert!(b.try_acquire().is_err());
    b.reset();
    assert_eq!(b.state(), State::Closed);
    assert!(b.try_acquire().is_ok());
}

#[test]
fn calls_in_flight_become_stale() {
    let (b, clock, _) = breaker();
    let permit = b.try_acquire().unwrap();
    assert!(b.open_for(Duration::from_secs(1)));
    permit.failure();
    clock.advance(Duration::from_secs(1));
    b.try_acquire().unwrap().success();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.metrics().lifetime.stale, 1);
}

#[test]
fn the_deadline_is_exact_with_jitter_even_in_a_young_breaker() {
    let (b, clock) = on_manual_clock(trips_after(2, Duration::from_secs(10)).jitter(0.5));
    // Young: less than one cooldown since the build. Never earlier than asked.
    assert!(b.open_for(Duration::from_millis(200)));
    let early = b.try_acquire().unwrap_err().retry_after().unwrap();
    assert!(
        early >= Duration::from_millis(200) && early <= Duration::from_secs(10),
        "{early:?}"
    );
    b.reset();
    // Older: exactly as asked, whatever the jitter.
    clock.advance(Duration::from_secs(60));
    for ms in [1, 3_000, 25_000] {
        assert!(b.open_for(Duration::from_millis(ms)));
        let r = b.try_acquire().unwrap_err();
        assert_eq!(r.retry_after(), Some(Duration::from_millis(ms)));
        b.reset();
    }
}

/// The tick is 1 ms: a duration under one tick opens nothing, and exactly one tick
/// opens the breaker for exactly that long.
#[test]
fn one_tick_opens_for_exactly_one_tick_and_less_opens_nothing() {
    let (b, clock, seen) = breaker();
    assert!(!b.open_for(Duration::from_nanos(999_999)));
    assert_eq!(b.state(), State::Closed);
    assert!(seen.lock().unwrap().is_empty());
    assert!(b.open_for(Duration::from_millis(1)));
    let r = b.try_acquire().unwrap_err();
    assert_eq!(r.retry_after(), Some(Duration::from_millis(1)));
    clock.advance(Duration::from_millis(1));
    b.try_acquire().unwrap().success();
    assert_eq!(b.state(), State::Closed);
}

/// Durations at and past the edge of the tick range (`u64::MAX` ns), on a breaker
/// an hour old with jitter: each opens it with a deadline far off (no wrap to a
/// short one), `metrics` and `save` read it, and a clock advanced by
/// `Duration::MAX` ends it. On that saturated clock, a fresh `open_for` ends at once.
#[test]
fn huge_durations_saturate_and_a_saturated_clock_ends_them() {
    for d in [
        Duration::from_millis(u64::MAX / 1_000_000),
        Duration::from_millis(u64::MAX / 1_000_000 + 1),
        Duration::from_secs(u64::MAX / 1000),
        Duration::MAX,
    ] {
        let (b, clock) = on_manual_clock(
            CircuitBreaker::builder()
                .consecutive_failures(1)
                .jitter(0.5),
        );
        clock.advance(Duration::from_secs(3600));
        assert!(b.open_for(d), "{d:?}");
        let r = b.try_acquire().unwrap_err();
        assert!(
            r.retry_after().unwrap() > Duration::from_secs(1 << 33),
            "{d:?} {r:?}"
        );
        assert_eq!(b.metrics().state, State::Open);
        let _ = b.save();
        clock.advance(Duration::MAX);
        b.try_acquire().expect("a saturated clock").success();
        assert_eq!(b.state(), State::Closed, "{d:?}");
        assert!(b.open_for(Duration::from_secs(1)));
        b.try_acquire()
            .expect("a saturated clock ends every cooldown")
            .success();
        assert_eq!(b.state(), State::Closed, "{d:?}");
    }
}

/// `open_for` and a trip at the same moment (real threads): whichever opens the
/// breaker, the Open phase is the winner's. `open_for` used to take a trip's
/// start claimed a moment before its own CAS, and so opened the breaker for the
/// trip's cooldown while it reported the hour it was asked for. The loom model
/// `open_for_races_a_trip` checks every interleaving; this runs the real code
/// many times.
#[test]
fn open_for_racing_a_trip_keeps_the_winners_deadline() {
    use std::sync::atomic::{AtomicU32, Ordering};
    const ROUNDS: u32 = 100_000;
    let hour = Duration::from_secs(3600);
    let (b, _clock, seen) = breaker();
    let b = Arc::new(b);
    // Round `i` starts when `go` reaches it; the tripping thread marks it done.
    let (go, done) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    let tripper = {
        let (b, go, done) = (b.clone(), go.clone(), done.clone());
        std::thread::spawn(move || {
            for i in 1..=ROUNDS {
                while go.load(Ordering::Acquire) < i {
                    std::hint::spin_loop();
                }
                // The second failure trips: each thread starts at a spread of moments.
                let _ = b.call(|| Err::<(), _>("down"));
                for _ in 0..i % 64 {
                    std::hint::spin_loop();
                }
                let _ = b.call(|| Err::<(), _>("down"));
                done.store(i, Ordering::Release);
            }
        })
    };
    let mut opened_by = [0u32; 2];
    for i in 1..=ROUNDS {
        b.reset();
        seen.lock().unwrap().clear();
        go.store(i, Ordering::Release);
        for _ in 0..(i / 64) % 64 {
            std::hint::spin_loop();
        }
        let opened = b.open_for(hour);
        while done.load(Ordering::Acquire) < i {
            std::hint::spin_loop();
        }
        let opens: Vec<_> = seen
            .lock()
            .unwrap()
            .iter()
            .filter(|t| t.to == State::Open)
            .map(|t| (t.reason, t.open_until.map(|until| until - t.at)))
            .collect();
        let winner = match opened {
            true => (Reason::External, Some(hour)),
            false => (Reason::ConsecutiveFailures, Some(Duration::from_secs(1))),
        };
        assert_eq!(opens, [winner], "round {i}: open_for returned {opened}");
        opened_by[usize::from(opened)] += 1;
    }
    go.store(ROUNDS, Ordering::Release);
    tripper.join().unwrap();
    eprintln!("opened by a trip / by open_for: {opened_by:?}");
}
