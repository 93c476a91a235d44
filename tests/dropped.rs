//! What a dropped permit counts as (DESIGN.md's decision, contract line 21, and
//! `Builder::on_drop`): ignored by default; one slow call once it ran past the
//! slow-call threshold (not a failure; the streak untouched, in the event of a
//! trip it causes too; a slow probe reopens); a failure when `on_drop` says so;
//! nothing at all when stale. A call whose classifier panics is dropped too, and a
//! permit recorded after the breaker moved on is stale, however it is recorded.

mod common;

use common::assert_each_admitted_call_finished_once;
use cutout::{Builder, CircuitBreaker, Dropped, Error, ManualClock, Outcome, State};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const SLOW: Duration = Duration::from_millis(100);
const COOLDOWN: Duration = Duration::from_secs(1);

fn builder(clock: &ManualClock) -> Builder<ManualClock> {
    CircuitBreaker::builder()
        .open_duration(COOLDOWN)
        .clock(clock.clone())
}

/// Acquires, lets `ran` pass on `clock`, and drops the permit unrecorded.
fn drop_after(b: &CircuitBreaker<ManualClock>, clock: &ManualClock, ran: Duration) {
    let permit = b.try_acquire().expect("admitted");
    clock.advance(ran);
    drop(permit);
}

fn trip(b: &CircuitBreaker<ManualClock>) {
    while b.state() == State::Closed {
        let _ = b.call(|| Err::<(), _>("down"));
    }
}

#[test]
fn by_default_a_dropped_call_is_ignored_even_a_long_one() {
    let clock = ManualClock::new();
    let b = builder(&clock).consecutive_failures(2).build().unwrap();
    let _ = b.call(|| Err::<(), _>("down"));
    for _ in 0..10 {
        drop_after(&b, &clock, Duration::from_secs(60));
    }
    let m = b.metrics();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(m.consecutive_failures, 1, "the streak is untouched");
    assert_eq!((m.lifetime.dropped, m.lifetime.failures), (10, 1));
}

#[test]
fn a_call_dropped_past_the_slow_threshold_is_one_slow_call_not_a_failure() {
    let clock = ManualClock::new();
    let b = builder(&clock)
        .consecutive_failures(3)
        .slow_calls(SLOW, 0.6)
        .minimum_calls(4)
        .build()
        .unwrap();
    let _ = b.call(|| Err::<(), _>("down"));
    drop_after(&b, &clock, SLOW); // exactly the threshold: not slow, ignored
    drop_after(&b, &clock, SLOW + Duration::from_millis(1)); // slow
    let m = b.metrics();
    assert_eq!(
        (m.window.calls, m.window.failures, m.window.slow),
        (2, 1, 1)
    );
    assert_eq!(m.consecutive_failures, 1, "a slow drop leaves the streak");
    assert_eq!(
        (m.lifetime.dropped, m.lifetime.slow, m.lifetime.failures),
        (2, 1, 1)
    );
    // Two more slow drops: 3 slow in 4 calls, 75% >= 60%: the slow-call rate trips.
    drop_after(&b, &clock, SLOW * 2);
    assert_eq!(b.state(), State::Closed, "3 calls: below minimum_calls");
    drop_after(&b, &clock, SLOW * 2);
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.metrics().transitions(cutout::Reason::SlowCallRate), 1);
}

#[test]
fn a_slow_dropped_probe_reopens_and_a_quick_one_gives_its_slot_back() {
    let clock = ManualClock::new();
    let b = builder(&clock)
        .consecutive_failures(1)
        .slow_calls(SLOW, 1.0)
        .build()
        .unwrap();
    trip(&b);
    clock.advance(COOLDOWN);
    drop_after(&b, &clock, Duration::from_millis(5));
    assert_eq!(b.state(), State::HalfOpen, "a quick drop decides nothing");
    drop_after(&b, &clock, SLOW * 3); // the slot came back: a second probe
    assert_eq!(b.state(), State::Open, "a slow probe is a failed probe");
    let m = b.metrics();
    assert_eq!(m.level, 1, "reopened at the next backoff level");
    assert_eq!(m.transitions(cutout::Reason::ProbeFailed), 1);
}

#[test]
fn on_drop_failure_counts_every_dropped_call_as_a_failure() {
    let clock = ManualClock::new();
    let b = builder(&clock)
        .consecutive_failures(3)
        .on_drop(Dropped::Failure)
        .build()
        .unwrap();
    for n in 1..=2 {
        drop(b.try_acquire().unwrap());
        assert_eq!(b.metrics().consecutive_failures, n);
    }
    drop(b.try_acquire().unwrap());
    assert_eq!(b.state(), State::Open);
    let l = b.metrics().lifetime;
    // Each in `failures`, what it counted as, and in `dropped`.
    assert_eq!((l.admitted, l.dropped, l.failures), (3, 3, 3));
    assert_eq!(l.admitted, l.successes + l.ignored + l.stale + l.dropped);
    // A dropped probe is a failed probe.
    clock.advance(COOLDOWN);
    drop(b.try_acquire().unwrap());
    assert_eq!((b.state(), b.metrics().level), (State::Open, 1));
}

#[test]
fn on_drop_failure_after_counts_only_calls_that_ran_longer() {
    let clock = ManualClock::new();
    let limit = Duration::from_millis(500);
    let b = builder(&clock)
        .window(Duration::from_secs(10), 10)
        .failure_rate(0.5, 4)
        .on_drop(Dropped::FailureAfter(limit))
        .build()
        .unwrap();
    drop_after(&b, &clock, limit); // not longer: ignored
    drop_after(&b, &clock, Duration::from_millis(10));
    assert_eq!(b.metrics().window.calls, 0);
    drop_after(&b, &clock, limit + Duration::from_millis(1));
    let m = b.metrics();
    assert_eq!((m.window.calls, m.window.failures), (1, 1));
    assert_eq!(m.lifetime.slow, 0, "no slow-call policy");
    for _ in 0..2 {
        let _ = b.call(|| Ok::<_, ()>(()));
    }
    drop_after(&b, &clock, Duration::from_secs(2));
    assert_eq!(b.state(), State::Open, "2 failures in 4 calls");
}

#[test]
fn a_call_that_panics_after_running_too_long_is_timed_on_the_sync_path() {
    // `call` with a consecutive-failure policy only: its lean path must time calls
    // for `FailureAfter`.
    let clock = ManualClock::new();
    let b = builder(&clock)
        .consecutive_failures(2)
        .on_drop(Dropped::FailureAfter(Duration::from_secs(1)))
        .build()
        .unwrap();
    let panics_after = |ran: Duration| {
        catch_unwind(AssertUnwindSafe(|| {
            let _ = b.call(|| -> Result<(), ()> {
                clock.advance(ran);
                panic!("handler panicked")
            });
        }))
        .unwrap_err();
    };
    for _ in 0..5 {
        panics_after(Duration::from_millis(999));
    }
    assert_eq!(b.metrics().consecutive_failures, 0, "quick panics: ignored");
    panics_after(Duration::from_secs(2));
    assert_eq!(b.metrics().consecutive_failures, 1);
    panics_after(Duration::from_secs(2));
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.metrics().lifetime.dropped, 7);
}

#[test]
fn a_stale_drop_decides_nothing() {
    let clock = ManualClock::new();
    let b = builder(&clock)
        .consecutive_failures(1)
        .slow_calls(SLOW, 1.0)
        .on_drop(Dropped::Failure)
        .build()
        .unwrap();
    let late = b.try_acquire().unwrap();
    trip(&b);
    clock.advance(COOLDOWN);
    let probe = b.try_acquire().unwrap();
    assert_eq!(b.state(), State::HalfOpen);
    clock.advance(SLOW * 10);
    drop(late); // admitted under Closed: stale, though slow and "a failure"
    assert_eq!(b.state(), State::HalfOpen);
    assert!(
        matches!(b.call(|| Ok::<_, ()>(())), Err(Error::Rejected(_))),
        "the stale drop took no slot and freed none"
    );
    drop(probe); // a failure here: reopens
    assert_eq!(b.state(), State::Open);
    let l = b.metrics().lifetime;
    assert_eq!((l.dropped, l.stale, l.slow), (2, 0, 1));
}

/// A permit keeps its call's start in full, so any `FailureAfter` is timed
/// exactly, however long: a day here, around which the old 46-bit start wrapped.
#[test]
fn a_failure_after_of_a_day_is_timed_exactly() {
    let clock = ManualClock::new();
    let day = Duration::from_secs(24 * 3600);
    let b = builder(&clock)
        .consecutive_failures(1)
        .on_drop(Dropped::FailureAfter(day))
        .build()
        .unwrap();
    drop_after(&b, &clock, day);
    assert_eq!(b.state(), State::Closed, "exactly a day is not past it");
    drop_after(&b, &clock, day + Duration::from_secs(3600));
    assert_eq!(b.state(), State::Open, "25 hours is");
}

/// A slow dropped call leaves the streak as it was, and a trip's event carries the
/// consecutive-failure count at the time: so the slow-call trip that a slow drop
/// causes reports the streak the failures before it built, not zero.
#[test]
fn a_trip_by_a_slow_dropped_call_reports_the_streak_as_it_stands() {
    let clock = ManualClock::new();
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = events.clone();
    let b = builder(&clock)
        .window(Duration::from_secs(10), 10)
        .slow_calls(SLOW, 0.5)
        .minimum_calls(3)
        .consecutive_failures(5)
        .on_transition(move |t| sink.lock().unwrap().push(*t))
        .build()
        .unwrap();
    let _ = b.call(|| Ok::<_, ()>(()));
    let _ = b.call(|| Err::<(), _>("down"));
    let _ = b.call(|| Err::<(), _>("down"));
    let slow = SLOW + Duration::from_millis(1);
    drop_after(&b, &clock, slow); // 1 slow of 4 calls: below 0.5
    assert_eq!(b.state(), State::Closed);
    assert_eq!(
        b.metrics().consecutive_failures,
        2,
        "the streak is untouched"
    );
    drop_after(&b, &clock, slow); // 2 of 5: below
    drop_after(&b, &clock, slow); // 3 of 6: trips
    assert_eq!(b.state(), State::Open);
    let events = events.lock().unwrap();
    let [t] = events.as_slice() else {
        panic!("one transition: {events:?}")
    };
    assert_eq!(t.reason, cutout::Reason::SlowCallRate);
    assert_eq!(t.window, cutout::WindowCounts::new(6, 2, 3));
    assert_eq!(t.consecutive_failures, 2, "the streak at the trip: {t:?}");
}

/// A classifier that panics decides nothing: the call counts as dropped (ignored,
/// by default), in the lean Closed path as in a half-open round, where the probe's
/// slot comes back so the next call can probe and close.
#[test]
fn a_classifier_that_panics_counts_as_dropped_and_frees_the_probe_slot() {
    let clock = ManualClock::new();
    let b = builder(&clock).consecutive_failures(1).build().unwrap();
    let classify_panicking = || {
        catch_unwind(AssertUnwindSafe(|| {
            b.call_with(
                |_: &Result<(), ()>| -> Outcome { panic!("the classifier panics") },
                || Ok(()),
            )
        }))
        .unwrap_err();
    };
    classify_panicking();
    assert_eq!(b.metrics().lifetime.dropped, 1);
    assert_each_admitted_call_finished_once(&b);
    trip(&b);
    clock.advance(COOLDOWN);
    classify_panicking();
    assert_eq!(b.state(), State::HalfOpen, "the panic decided nothing");
    assert_eq!(b.call(|| Ok::<_, ()>(())), Ok(()), "the slot came back");
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.metrics().lifetime.dropped, 2);
    assert_each_admitted_call_finished_once(&b);
}

/// A classifier that panics on a thread's first call to the breaker (the thread has
/// no stripe of it yet) is counted as dropped there too, not as the failure the call
/// returned.
#[test]
fn a_classifier_panic_on_a_threads_first_call_is_counted_as_dropped() {
    let clock = ManualClock::new();
    let b = builder(&clock).consecutive_failures(1).build().unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            catch_unwind(AssertUnwindSafe(|| {
                b.call_with(
                    |_: &Result<(), ()>| -> Outcome { panic!("the classifier panics") },
                    || Err(()),
                )
            }))
            .unwrap_err();
        });
    });
    assert_eq!(
        b.state(),
        State::Closed,
        "a panicking classifier decides nothing"
    );
    assert_each_admitted_call_finished_once(&b);
    let l = b.metrics().lifetime;
    assert_eq!((l.admitted, l.dropped, l.failures), (1, 1, 0), "{l:?}");
}

/// An owned permit admitted while Closed, recorded on another thread after the
/// breaker tripped and half-opened: the success is stale, counted once as such, and
/// neither closes the round nor takes the probe's place.
#[test]
fn an_owned_permit_recorded_after_a_trip_on_another_thread_is_stale() {
    let clock = ManualClock::new();
    let b = Arc::new(builder(&clock).consecutive_failures(1).build().unwrap());
    let late = b.try_acquire_owned().unwrap();
    trip(&b);
    clock.advance(COOLDOWN);
    let probe = b.try_acquire().unwrap();
    assert!(probe.is_probe() && !late.is_probe());
    std::thread::spawn(move || late.success()).join().unwrap();
    assert_eq!(b.state(), State::HalfOpen, "a stale success closes nothing");
    probe.success();
    assert_eq!(b.state(), State::Closed);
    let l = b.metrics().lifetime;
    assert_eq!((l.stale, l.successes), (1, 1), "{l:?}");
    assert_each_admitted_call_finished_once(&b);
}

/// A panic in `call`, in a `call_async` future, and a `retry_async` future dropped
/// mid-attempt are dropped calls, recorded as `on_drop` says (their docs say so):
/// with `Dropped::Failure`, a failure that trips, and a panicking probe reopens.
#[test]
fn panics_and_drops_on_every_call_path_are_recorded_as_on_drop_says() {
    let clock = ManualClock::new();
    let failing = || {
        builder(&clock)
            .consecutive_failures(1)
            .on_drop(Dropped::Failure)
            .build()
            .unwrap()
    };
    let b = failing();
    let panicked = catch_unwind(AssertUnwindSafe(|| {
        b.call(|| -> Result<(), ()> { panic!("handler bug") })
    }));
    assert!(panicked.is_err());
    assert_eq!(b.state(), State::Open, "the panicking call was a failure");
    assert_eq!(b.metrics().lifetime.dropped, 1);

    // A probe whose future panics: a failed probe, Open again at the next level.
    clock.advance(COOLDOWN);
    {
        let mut probe = std::pin::pin!(b.call_async(async {
            panic!("probe bug");
            #[allow(unreachable_code)]
            Ok::<(), ()>(())
        }));
        let polled = catch_unwind(AssertUnwindSafe(|| common::poll_once(probe.as_mut())));
        assert!(polled.is_err());
    }
    assert_eq!((b.state(), b.metrics().level), (State::Open, 1));

    #[cfg(feature = "retry")]
    {
        let b = failing();
        let policy = cutout::RetryPolicy::builder().seed(1).build().unwrap();
        {
            let mut retrying = std::pin::pin!(cutout::retry_async(
                &b,
                &policy,
                |_| async {},
                std::future::pending::<Result<(), ()>>,
            ));
            assert!(common::poll_once(retrying.as_mut()).is_pending());
        } // dropped mid-attempt
        assert_eq!(b.metrics().lifetime.dropped, 1);
        assert_eq!(b.state(), State::Open, "the dropped attempt was a failure");
    }
}

/// A probe's `OwnedPermit` dropped by a thread-local destructor (its thread's
/// thread-locals being torn down, its stripe slot perhaps given back already) is
/// recorded as `on_drop` says: the probe fails, and the breaker reopens one level
/// up, the call counted as dropped.
#[test]
fn a_probe_dropped_during_thread_local_teardown_counts_as_on_drop_says() {
    use std::cell::RefCell;
    thread_local! {
        static HELD: RefCell<Vec<cutout::OwnedPermit<ManualClock>>> =
            const { RefCell::new(Vec::new()) };
    }
    let clock = ManualClock::new();
    let b = Arc::new(
        CircuitBreaker::builder()
            .consecutive_failures(1)
            .half_open_probes(2)
            .ramp_up(COOLDOWN)
            .on_drop(Dropped::Failure)
            .clock(clock.clone())
            .build()
            .unwrap(),
    );
    let _ = b.call(|| Err::<(), _>("down"));
    clock.advance(COOLDOWN);
    let b2 = b.clone();
    std::thread::spawn(move || {
        let p = b2.try_acquire_owned().unwrap();
        assert!(p.is_probe());
        HELD.with(|h| h.borrow_mut().push(p));
    })
    .join()
    .unwrap();
    let m = b.metrics();
    assert_eq!(
        (m.state, m.level, m.lifetime.dropped),
        (State::Open, 1, 1),
        "{m:?}"
    );
    assert_eq!(m.lifetime.admitted, 2);
}

/// A breaker (and a registry) crosses `catch_unwind` as it is, no
/// `AssertUnwindSafe` needed: a panic in a call leaves it consistent, the call
/// counted as dropped. (Compiles only while both are `RefUnwindSafe`.)
#[test]
fn a_breaker_crosses_catch_unwind_without_asserting_it() {
    let clock = ManualClock::new();
    let b = builder(&clock).consecutive_failures(1).build().unwrap();
    let panicked = catch_unwind(|| b.call(|| -> Result<(), ()> { panic!("handler panicked") }));
    assert!(panicked.is_err());
    assert_eq!(b.metrics().lifetime.dropped, 1);
    assert_each_admitted_call_finished_once(&b);
    #[cfg(feature = "registry")]
    {
        let registry: cutout::Registry<String, ManualClock> =
            cutout::Registry::new(builder(&clock)).unwrap();
        let panicked = catch_unwind(|| {
            registry.call("search", || -> Result<(), ()> {
                panic!("handler panicked")
            })
        });
        assert!(panicked.is_err());
        assert_eq!(registry.get("search").metrics().lifetime.dropped, 1);
    }
}
