//! Transition events: contract lines 7 and 8 of DESIGN.md.
//!
//! 7. Each transition happens exactly once and is reported exactly once, with its
//!    generation; the events one thread delivers are in generation order.
//! 8. A transition callback may call `state()`, `metrics()` and even `call()` without
//!    deadlock, and a slow callback does not delay admission on other threads.
//!
//! Also the listener that misbehaves: one that panics (the transition stands and is
//! counted once; the panic reaches the caller, or is dropped if the caller already
//! unwinds), and one that calls back into the breaker to reset, force open, open
//! or disable it, or take the probe itself.

mod common;

use common::{
    Log, XorShift, assert_each_admitted_call_finished_once, in_generation_order, logged_on,
    trips_after, valid, within,
};
use cutout::{
    Builder, CircuitBreaker, Dropped, Error, ManualClock, Reason, State, Transition, WindowCounts,
};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, Weak};
use std::thread::{self, ThreadId};
use std::time::Duration;

const SEC: Duration = Duration::from_secs(1);
/// The longest a test waits for another thread: far beyond what a handshake needs,
/// so it only ends a wait that would otherwise never end.
const WAIT: Duration = Duration::from_secs(30);
/// Set in the environment of the child process that
/// `a_listener_that_panics_while_a_probe_unwinds_does_not_abort` starts.
const CHILD: &str = "CUTOUT_EVENTS_CHILD";
/// What that child prints once its checks passed.
const SURVIVED: &str = "the child survived";

fn fail(b: &CircuitBreaker<ManualClock>) {
    let _ = b.call(|| Err::<(), _>("down"));
}

fn succeed(b: &CircuitBreaker<ManualClock>) -> Result<(), Error<&'static str>> {
    b.call(|| Ok::<_, &str>(()))
}

/// (from, to, generation, reason, level)
type Brief = (State, State, u32, Reason, u8);

fn briefs(log: &Log) -> Vec<Brief> {
    log.lock()
        .unwrap()
        .iter()
        .map(|t| (t.from, t.to, t.generation, t.reason, t.level))
        .collect()
}

/// A breaker builder on `clock` whose listener logs every event, then panics when
/// `panics` says so.
fn panicking(
    clock: &ManualClock,
    panics: impl Fn(&Transition) -> bool + Send + Sync + 'static,
) -> (Builder<ManualClock>, Log) {
    let log = Log::default();
    let sink = log.clone();
    let builder = CircuitBreaker::builder()
        .clock(clock.clone())
        .on_transition(move |t| {
            sink.lock().unwrap().push(*t);
            if panics(t) {
                panic!("the listener panics on {:?}", t.reason);
            }
        });
    (builder, log)
}

/// Builds `builder` on `clock` with a listener that logs every event and then runs
/// `act` on the breaker itself (held weakly, so the breaker can be dropped).
fn reentrant(
    clock: &ManualClock,
    builder: Builder,
    act: impl Fn(&CircuitBreaker<ManualClock>, &Transition) + Send + Sync + 'static,
) -> (Arc<CircuitBreaker<ManualClock>>, Log) {
    let log = Log::default();
    let sink = log.clone();
    let clock = clock.clone();
    let b = Arc::new_cyclic(|me: &Weak<CircuitBreaker<ManualClock>>| {
        let me = me.clone();
        builder
            .clock(clock)
            .on_transition(move |t| {
                sink.lock().unwrap().push(*t);
                if let Some(b) = me.upgrade() {
                    act(&b, t);
                }
            })
            .build()
            .unwrap()
    });
    (b, log)
}

/// The logged events, put in generation order, are one per generation and a valid
/// walk of the state machine from Closed to the breaker's state now, and the
/// breaker counted each of them. (Events delivered re-entrantly, from inside a
/// listener, may be logged out of order.)
fn assert_one_valid_stream(log: &Log, b: &CircuitBreaker<ManualClock>) {
    let events = log.lock().unwrap().clone();
    let mut stream = events.clone();
    stream.sort_by_key(|t| t.generation);
    let mut state = State::Closed;
    for (i, t) in stream.iter().enumerate() {
        assert_eq!(
            t.generation as usize,
            i + 1,
            "one per generation: {events:#?}"
        );
        assert_eq!(t.from, state, "not a walk: {events:#?}");
        assert!(valid(t, false), "{t:?}");
        state = t.to;
    }
    let m = b.metrics();
    assert_eq!(m.total_transitions(), events.len() as u64);
    assert_eq!(m.generation as usize, events.len());
    assert_eq!(m.state, state);
}

#[test]
fn every_transition_is_reported_once_with_its_generation_reason_level_and_time() {
    use Reason::{CooldownElapsed, HalfOpenTimeout, ProbeFailed, ProbesSucceeded};
    use State::{Closed, HalfOpen, Open};
    let clock = ManualClock::new();
    let (builder, log) = logged_on(&clock);
    let b = builder
        .consecutive_failures(3)
        .open_duration(SEC)
        .backoff_multiplier(2.0)
        .half_open_probes(2)
        .half_open_timeout(10 * SEC)
        .build()
        .unwrap();

    fail(&b);
    fail(&b);
    succeed(&b).unwrap(); // ends the streak: no event
    fail(&b);
    fail(&b);
    assert!(log.lock().unwrap().is_empty(), "{:?}", briefs(&log));
    clock.advance(Duration::from_millis(250));
    fail(&b); // the third in a row trips
    let trip = log.lock().unwrap()[0];
    assert_eq!(trip.consecutive_failures, 3);
    assert_eq!(trip.window, WindowCounts::default(), "no window configured");
    assert_eq!(trip.at, Duration::from_millis(250));
    fail(&b); // rejected while open: no event
    assert!(matches!(b.try_acquire(), Err(r) if r.state() == Open));

    clock.advance(SEC);
    let probe = b.try_acquire().unwrap(); // the cooldown is over: HalfOpen
    probe.failure(); // reopens at level 1
    clock.advance(2 * SEC);
    let leaked = b.try_acquire().unwrap();
    std::mem::forget(leaked); // a probe that never reports
    clock.advance(10 * SEC);
    assert!(b.try_acquire().is_err(), "the timed-out round reopens");
    clock.advance(4 * SEC);
    let p1 = b.try_acquire().unwrap();
    let p2 = b.try_acquire().unwrap();
    p1.success();
    p2.success(); // both probes succeeded: Closed, level 0
    b.force_open();
    b.force_open(); // already forced open: no event
    b.disable();
    b.disable();
    b.reset();

    assert_eq!(
        briefs(&log),
        [
            (Closed, Open, 1, Reason::ConsecutiveFailures, 0),
            (Open, HalfOpen, 2, CooldownElapsed, 0),
            (HalfOpen, Open, 3, ProbeFailed, 1),
            (Open, HalfOpen, 4, CooldownElapsed, 1),
            (HalfOpen, Open, 5, HalfOpenTimeout, 2),
            (Open, HalfOpen, 6, CooldownElapsed, 2),
            (HalfOpen, Closed, 7, ProbesSucceeded, 0),
            (Closed, State::ForcedOpen, 8, Reason::ForcedOpen, 0),
            (State::ForcedOpen, State::Disabled, 9, Reason::Disabled, 0),
            (State::Disabled, Closed, 10, Reason::Reset, 0),
        ]
    );
    let at: Vec<u64> = log
        .lock()
        .unwrap()
        .iter()
        .map(|t| t.at.as_millis() as u64)
        .collect();
    assert_eq!(
        at,
        [
            250, 1250, 1250, 3250, 13250, 17250, 17250, 17250, 17250, 17250
        ]
    );
    let m = b.metrics();
    assert_eq!(m.generation, 10);
    for reason in Reason::iter() {
        let seen = briefs(&log).iter().filter(|e| e.3 == reason).count() as u64;
        assert_eq!(m.transitions(reason), seen, "{reason}");
    }
}

#[test]
fn a_rate_trip_carries_the_window_figures_that_tripped_it() {
    let clock = ManualClock::new();
    let (builder, log) = logged_on(&clock);
    let b = builder
        .window(10 * SEC, 10)
        .failure_rate(0.5, 4)
        .build()
        .unwrap();
    for ok in [true, false, true] {
        let _ = b.call(|| if ok { Ok(()) } else { Err("down") });
    }
    assert!(log.lock().unwrap().is_empty());
    fail(&b);
    let t = log.lock().unwrap()[0];
    assert_eq!(
        (t.from, t.to, t.reason),
        (State::Closed, State::Open, Reason::FailureRate)
    );
    assert_eq!(
        (t.window.calls, t.window.failures, t.window.slow),
        (4, 2, 0)
    );
    assert_eq!(t.window.failure_rate(), 0.5);
}

#[test]
fn a_slow_call_trip_carries_the_slow_count() {
    let clock = ManualClock::new();
    let (builder, log) = logged_on(&clock);
    let b = builder
        .slow_calls(Duration::from_millis(100), 0.6)
        .minimum_calls(3)
        .build()
        .unwrap();
    let slow = |b: &CircuitBreaker<ManualClock>| {
        let p = b.try_acquire().unwrap();
        clock.advance(Duration::from_millis(101));
        p.success();
    };
    slow(&b); // 1 call: below the minimum
    succeed(&b).unwrap(); // a fast success is never evaluated
    slow(&b); // 2 of 3 slow: 0.67 >= 0.6
    let events = log.lock().unwrap().clone();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].reason, Reason::SlowCallRate);
    let w = events[0].window;
    assert_eq!((w.calls, w.failures, w.slow), (3, 0, 2));
    assert_eq!(b.metrics().lifetime.slow, 2);
}

#[test]
fn a_callback_may_read_and_call_through_its_own_breaker() {
    // Bounded: wrong code here deadlocks its own thread.
    within(
        WAIT,
        a_callback_may_read_and_call_through_its_own_breaker_body,
    );
}

fn a_callback_may_read_and_call_through_its_own_breaker_body() {
    use State::*;
    let clock = ManualClock::new();
    let log = Log::default();
    let sink = log.clone();
    let b = Arc::new_cyclic(|me: &std::sync::Weak<CircuitBreaker<ManualClock>>| {
        let me = me.clone();
        CircuitBreaker::builder()
            .clock(clock.clone())
            .consecutive_failures(2)
            .open_duration(SEC)
            .on_transition(move |t| {
                sink.lock().unwrap().push(*t);
                let b = me.upgrade().expect("the breaker outlives its calls");
                // Delivered after the CAS: the breaker already shows the transition.
                assert_eq!(b.state(), t.to);
                let m = b.metrics();
                assert_eq!((m.state, m.generation), (t.to, t.generation));
                assert!(m.transitions(t.reason) >= 1, "counted before delivery");
                match t.reason {
                    Reason::ConsecutiveFailures => match b.call(|| Ok::<_, ()>(())) {
                        Err(Error::Rejected(r)) => assert_eq!(r.retry_after(), Some(SEC)),
                        other => panic!("an open breaker admitted a call: {other:?}"),
                    },
                    // Take the probe from inside the callback: it closes the breaker,
                    // and that transition is delivered here, re-entrantly.
                    Reason::CooldownElapsed => assert_eq!(b.call(|| Ok::<_, ()>(7)), Ok(7)),
                    _ => {}
                }
            })
            .build()
            .unwrap()
    });
    fail(&b);
    fail(&b);
    assert_eq!(b.state(), Open);
    clock.advance(SEC);
    // This call moves the breaker to HalfOpen; the callback's probe closes it, so
    // this call finds it closed and goes through.
    assert_eq!(succeed(&b), Ok(()));
    assert_eq!(b.state(), Closed);
    assert_eq!(
        briefs(&log),
        [
            (Closed, Open, 1, Reason::ConsecutiveFailures, 0),
            (Open, HalfOpen, 2, Reason::CooldownElapsed, 0),
            (HalfOpen, Closed, 3, Reason::ProbesSucceeded, 0),
        ]
    );
    let l = b.metrics().lifetime;
    assert_eq!(
        (l.admitted, l.rejected, l.successes, l.failures),
        (4, 1, 2, 2)
    );
}

#[test]
fn a_slow_callback_delays_only_its_own_caller() {
    let clock = ManualClock::new();
    let (entered_tx, entered_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let go_rx = Mutex::new(go_rx);
    let log = Log::default();
    let sink = log.clone();
    let b = CircuitBreaker::builder()
        .clock(clock.clone())
        .consecutive_failures(1)
        .open_duration(SEC)
        .on_transition(move |t| {
            sink.lock().unwrap().push(*t);
            if t.reason == Reason::ConsecutiveFailures {
                // The slow part: hold this caller until the main thread says go, or
                // gives up (then the main thread's checks fail instead of hanging,
                // if they were blocked by this callback).
                entered_tx.send(()).unwrap();
                let _ = go_rx.lock().unwrap().recv_timeout(WAIT);
            }
        })
        .build()
        .unwrap();
    thread::scope(|s| {
        // Moved in, so that a failed check here drops it and the callback stops
        // waiting at once.
        let go_tx = go_tx;
        let tripper = s.spawn(|| fail(&b));
        entered_rx
            .recv_timeout(WAIT)
            .expect("the tripping call reached its callback");
        // The tripping thread is still inside its callback. Everyone else goes on.
        assert_eq!(b.state(), State::Open);
        assert!(matches!(b.try_acquire(), Err(r) if r.retry_after() == Some(SEC)));
        assert_eq!(b.metrics().transitions(Reason::ConsecutiveFailures), 1);
        clock.advance(SEC);
        assert_eq!(succeed(&b), Ok(()), "the probe is admitted and closes it");
        assert_eq!(b.state(), State::Closed);
        assert!(
            !tripper.is_finished(),
            "the slow callback still holds its caller"
        );
        go_tx.send(()).unwrap();
        tripper.join().unwrap();
    });
    let reasons: Vec<_> = log
        .lock()
        .unwrap()
        .iter()
        .map(|t| (t.generation, t.reason))
        .collect();
    assert_eq!(
        reasons,
        [
            (1, Reason::ConsecutiveFailures),
            (2, Reason::CooldownElapsed),
            (3, Reason::ProbesSucceeded)
        ]
    );
}

#[test]
fn no_event_on_closed_successes_or_rejections() {
    let clock = ManualClock::new();
    let (builder, log) = logged_on(&clock);
    let b = builder.consecutive_failures(2).build().unwrap();
    for _ in 0..1000 {
        succeed(&b).unwrap();
    }
    b.try_acquire().unwrap().ignore();
    drop(b.try_acquire().unwrap());
    assert!(log.lock().unwrap().is_empty());
    b.force_open();
    for _ in 0..1000 {
        assert!(succeed(&b).is_err());
        let _ = b.state();
        let _ = b.metrics();
    }
    assert_eq!(log.lock().unwrap().len(), 1);
}

/// A listener that panics on every event: each panic reaches the caller whose call
/// made the transition, yet every transition stands, is counted once, and no probe
/// slot is held by the admission that panicked; the breaker goes on tripping.
#[test]
fn a_listener_that_panics_on_every_event_never_wedges_the_breaker() {
    let clock = ManualClock::new();
    let (builder, log) = panicking(&clock, |_| true);
    let b = builder
        .consecutive_failures(2)
        .open_duration(SEC)
        .half_open_probes(2)
        .build()
        .unwrap();
    fail(&b);
    // The trip's listener panics into the failing call.
    catch_unwind(AssertUnwindSafe(|| fail(&b))).unwrap_err();
    assert_eq!(b.state(), State::Open);
    clock.advance(SEC);
    // Open -> HalfOpen: the listener panics in the admission; no slot is held.
    catch_unwind(AssertUnwindSafe(|| b.try_acquire().map(|p| p.success()))).unwrap_err();
    assert_eq!(b.state(), State::HalfOpen);
    let p1 = b.try_acquire().expect("slot 1 free");
    let p2 = b.try_acquire().expect("slot 2 free");
    assert!(b.try_acquire().is_err(), "exactly two probes");
    p1.success();
    // The closing probe's listener panics; the transition stands.
    catch_unwind(AssertUnwindSafe(|| p2.success())).unwrap_err();
    assert_eq!(b.state(), State::Closed);
    let m = b.metrics();
    assert_eq!(m.transitions(Reason::ConsecutiveFailures), 1);
    assert_eq!(m.transitions(Reason::CooldownElapsed), 1);
    assert_eq!(m.transitions(Reason::ProbesSucceeded), 1);
    assert_eq!(log.lock().unwrap().len(), 3, "{:?}", briefs(&log));
    assert_each_admitted_call_finished_once(&b);
    fail(&b);
    catch_unwind(AssertUnwindSafe(|| fail(&b))).unwrap_err();
    assert_eq!(b.state(), State::Open, "it still trips");
}

/// A listener that panics inside an owned permit's `failure()`: the call is
/// counted once, as the failure it was, not also as a dropped permit.
#[test]
fn a_listener_panic_in_an_owned_permits_record_counts_the_call_once() {
    let clock = ManualClock::new();
    let (builder, _log) = panicking(&clock, |_| true);
    let b = Arc::new(builder.consecutive_failures(1).build().unwrap());
    let p = b.try_acquire_owned().unwrap();
    catch_unwind(AssertUnwindSafe(|| p.failure())).unwrap_err();
    let l = b.metrics().lifetime;
    assert_eq!((l.admitted, l.failures, l.dropped), (1, 1, 0), "{l:?}");
    assert_each_admitted_call_finished_once(&b);
}

/// A probe dropped with `on_drop(Failure)` reopens the breaker, and its listener
/// panics into the dropper: the reopening stands, is delivered once, and the next
/// round admits and closes as usual.
#[test]
fn a_listener_panic_on_a_dropped_probes_reopening_reaches_the_dropper_once() {
    let clock = ManualClock::new();
    let (builder, log) = panicking(&clock, |t| t.reason == Reason::ProbeFailed);
    let b = builder
        .consecutive_failures(1)
        .open_duration(SEC)
        .on_drop(Dropped::Failure)
        .build()
        .unwrap();
    fail(&b);
    clock.advance(SEC);
    let p = b.try_acquire().unwrap();
    catch_unwind(AssertUnwindSafe(|| drop(p))).unwrap_err();
    assert_eq!(b.state(), State::Open);
    assert_eq!(log.lock().unwrap().len(), 3, "{:?}", briefs(&log));
    clock.advance(2 * SEC);
    b.try_acquire().unwrap().success();
    assert_eq!(b.state(), State::Closed);
    assert_each_admitted_call_finished_once(&b);
}

/// A listener that panics while its caller already unwinds (a probe whose call
/// panics, dropped as a failure, reopening the breaker) would be a panic during a
/// panic, which aborts the process; the breaker catches it instead. Run in a child
/// process, so that an abort fails this test rather than ending the test binary.
/// The child is waited for at most [`WAIT`], then killed.
#[test]
fn a_listener_that_panics_while_a_probe_unwinds_does_not_abort() {
    let child = common::run_child(
        "a_listener_that_panics_while_a_probe_unwinds_child",
        &["--ignored"],
        CHILD,
        WAIT,
    );
    let Some(status) = child.status else {
        panic!("the child did not finish within {WAIT:?}");
    };
    let (stdout, stderr) = (child.stdout, child.stderr);
    assert!(
        status.success() && stdout.contains(SURVIVED),
        "the child died: {status:?}\n{stdout}\n{stderr}"
    );
}

/// The child of the test above; run on its own (without [`CHILD`] set) it checks
/// nothing and passes.
#[test]
#[ignore = "run in a child process by a_listener_that_panics_while_a_probe_unwinds_does_not_abort"]
fn a_listener_that_panics_while_a_probe_unwinds_child() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let clock = ManualClock::new();
    let (builder, log) = panicking(&clock, |t| t.reason == Reason::ProbeFailed);
    let b = builder
        .consecutive_failures(1)
        .open_duration(SEC)
        .on_drop(Dropped::Failure)
        .build()
        .unwrap();
    fail(&b);
    clock.advance(SEC);
    let panic = catch_unwind(AssertUnwindSafe(|| {
        b.call(|| -> Result<(), ()> { panic!("the probe panics") })
    }))
    .unwrap_err();
    assert_eq!(
        panic.downcast_ref::<&str>(),
        Some(&"the probe panics"),
        "the probe's panic goes on, the listener's is dropped"
    );
    assert_eq!(b.state(), State::Open, "the reopening stands");
    assert_eq!(b.metrics().transitions(Reason::ProbeFailed), 1);
    assert_eq!(log.lock().unwrap().len(), 3, "{:?}", briefs(&log));
    println!("{SURVIVED}");
}

/// A listener that resets the breaker on every trip: each trip and its reset are
/// two events, in one valid stream, and every call still finishes once.
#[test]
fn a_listener_that_resets_on_every_trip_keeps_one_valid_stream() {
    within(WAIT, || {
        let clock = ManualClock::new();
        let builder = CircuitBreaker::builder().consecutive_failures(1);
        let (b, log) = reentrant(&clock, builder, |b, t| {
            if t.to == State::Open {
                b.reset();
            }
        });
        for _ in 0..5 {
            fail(&b);
            assert_eq!(b.state(), State::Closed);
        }
        assert_one_valid_stream(&log, &b);
        assert_eq!(log.lock().unwrap().len(), 10);
        assert_each_admitted_call_finished_once(&b);
    });
}

/// A listener that forces the breaker open when the cooldown ends: the call whose
/// admission half-opened it is rejected and never runs, rather than taking a probe
/// slot of a round that no longer exists.
#[test]
fn a_listener_that_force_opens_when_the_cooldown_ends_rejects_the_admitting_call() {
    within(WAIT, || {
        let clock = ManualClock::new();
        let builder = trips_after(1, SEC);
        let (b, log) = reentrant(&clock, builder, |b, t| {
            if t.reason == Reason::CooldownElapsed {
                b.force_open();
            }
        });
        fail(&b);
        clock.advance(SEC);
        let ran = AtomicBool::new(false);
        let r = b.call(|| {
            ran.store(true, Ordering::SeqCst);
            Ok::<_, ()>(())
        });
        assert!(matches!(r, Err(Error::Rejected(_))), "{r:?}");
        assert!(!ran.load(Ordering::SeqCst));
        assert_eq!(b.state(), State::ForcedOpen);
        assert_one_valid_stream(&log, &b);
        b.reset();
        assert_eq!(b.call(|| Ok::<_, ()>(1)), Ok(1));
        assert_each_admitted_call_finished_once(&b);
    });
}

/// A listener that forces the breaker open and resets it when the cooldown ends:
/// the admitting call finds it Closed and goes through, without deadlock.
#[test]
fn a_listener_that_force_opens_then_resets_when_the_cooldown_ends_admits_the_call() {
    within(WAIT, || {
        let clock = ManualClock::new();
        let builder = trips_after(1, SEC);
        let (b, log) = reentrant(&clock, builder, |b, t| {
            if t.reason == Reason::CooldownElapsed {
                b.force_open();
                b.reset();
            }
        });
        fail(&b);
        clock.advance(SEC);
        assert_eq!(b.call(|| Ok::<_, ()>(5)), Ok(5));
        assert_eq!(b.state(), State::Closed);
        assert_one_valid_stream(&log, &b);
        assert_each_admitted_call_finished_once(&b);
    });
}

/// Listeners that chain manual transitions: `open_for` on a reset, `disable` on
/// the external trip that follows. The chain ends Disabled, one valid stream, and a
/// disabled breaker passes calls through.
#[test]
fn a_listener_may_chain_open_for_and_disable_from_its_events() {
    within(WAIT, || {
        let clock = ManualClock::new();
        let builder = CircuitBreaker::builder().consecutive_failures(1);
        let (b, log) = reentrant(&clock, builder, |b, t| match t.reason {
            Reason::Reset => assert!(b.open_for(SEC)),
            Reason::External => b.disable(),
            _ => {}
        });
        b.reset();
        assert_eq!(b.state(), State::Disabled);
        assert_one_valid_stream(&log, &b);
        assert_eq!(log.lock().unwrap().len(), 3);
        assert_eq!(b.call(|| Err::<(), _>("x")), Err(Error::Inner("x")));
        assert_eq!(b.state(), State::Disabled);
    });
}

/// A listener that takes the probe itself when the cooldown ends, and fails it:
/// the breaker reopens, so the outer call that half-opened it is rejected, not
/// wedged; the next round goes the same way.
#[test]
fn a_listener_that_fails_the_probe_itself_reopens_and_rejects_the_outer_call() {
    within(WAIT, || {
        let clock = ManualClock::new();
        let builder = trips_after(1, SEC);
        let (b, log) = reentrant(&clock, builder, |b, t| {
            if t.reason == Reason::CooldownElapsed {
                assert_eq!(b.call(|| Err::<(), _>("probe")), Err(Error::Inner("probe")));
            }
        });
        fail(&b);
        clock.advance(SEC);
        let r = succeed(&b);
        assert!(matches!(r, Err(Error::Rejected(_))), "{r:?}");
        assert_eq!(b.state(), State::Open);
        assert_one_valid_stream(&log, &b);
        clock.advance(2 * SEC);
        assert!(matches!(succeed(&b), Err(Error::Rejected(_))));
        assert_eq!(b.state(), State::Open);
        assert_eq!(b.metrics().transitions(Reason::ProbeFailed), 2);
        assert_one_valid_stream(&log, &b);
        assert_each_admitted_call_finished_once(&b);
    });
}

fn contended_stream(threads: u64, ops: u64) {
    let clock = ManualClock::new();
    let log: Arc<Mutex<Vec<(ThreadId, Transition)>>> = Arc::default();
    let sink = log.clone();
    let b = CircuitBreaker::builder()
        .clock(clock.clone())
        .consecutive_failures(4)
        .window(10 * SEC, 10)
        .failure_rate(0.6, 10)
        .open_duration(Duration::from_millis(100))
        .max_open_duration(Duration::from_millis(400))
        .half_open_probes(2)
        .half_open_timeout(Duration::from_millis(500))
        .on_transition(move |t| sink.lock().unwrap().push((thread::current().id(), *t)))
        .build()
        .unwrap();
    thread::scope(|s| {
        for seed in 0..threads {
            let (b, clock) = (&b, &clock);
            s.spawn(move || {
                let mut rng = XorShift(0x9e37_79b9_7f4a_7c15 ^ ((seed + 1) * 0x2545_f491));
                for _ in 0..ops {
                    match rng.below(1000) {
                        0..=399 => drop(b.call(|| Ok::<_, ()>(()))),
                        400..=799 => drop(b.call(|| Err::<(), _>(()))),
                        800..=899 => {
                            if let Ok(p) = b.try_acquire() {
                                match rng.below(4) {
                                    0 => p.ignore(),
                                    1 => drop(p),
                                    2 => std::mem::forget(p),
                                    _ => p.success(),
                                }
                            }
                        }
                        900..=989 => clock.advance(Duration::from_millis(20 + rng.below(150))),
                        990..=993 => b.reset(),
                        994..=996 => b.force_open(),
                        _ => b.disable(),
                    }
                }
            });
        }
    });

    let log = log.lock().unwrap().clone();
    let m = b.metrics();
    assert!(
        log.len() < 30_000,
        "keep clear of the 16-bit generation wrap"
    );
    assert_eq!(log.len() as u64, m.total_transitions());
    assert_eq!(m.generation as usize, log.len());

    // Per delivering thread, generations strictly increase. Every generation is
    // reported exactly once, and the stream, in generation order, is a valid walk
    // of the state machine from Closed to today's state.
    let stream = in_generation_order(&log);
    let mut state = State::Closed;
    for (i, t) in stream.iter().enumerate() {
        assert_eq!(t.generation as usize, i + 1, "each generation exactly once");
        assert_eq!(t.from, state, "event {t:?} does not follow {state:?}");
        assert!(valid(t, false), "{t:?}");
        state = t.to;
    }
    assert_eq!(state, m.state);
    for reason in Reason::iter() {
        let seen = stream.iter().filter(|t| t.reason == reason).count() as u64;
        assert_eq!(m.transitions(reason), seen, "{reason}");
    }
    // The run is not vacuous: the breaker went round its cycle many times.
    for reason in [
        Reason::CooldownElapsed,
        Reason::ProbesSucceeded,
        Reason::ProbeFailed,
        Reason::Reset,
    ] {
        assert!(m.transitions(reason) > 0, "no {reason} in {m:?}");
    }
    assert!(m.transitions(Reason::ConsecutiveFailures) + m.transitions(Reason::FailureRate) > 0);
}

#[test]
fn events_from_many_threads_form_one_valid_stream() {
    contended_stream(4, 5_000);
}

#[test]
#[ignore = "stress: run with --release --ignored"]
fn events_from_many_threads_form_one_valid_stream_stress() {
    for _ in 0..20 {
        contended_stream(8, 50_000);
    }
}

/// A listener that resets or forces the breaker open on the event of the very
/// transition a call's admission made (a half-open round timed out, a ramp
/// completed): the call is decided by the word the listener left, not by the one
/// the transition installed. Admitted in a new Closed phase, it runs and counts
/// as a success; in ForcedOpen it is rejected as ForcedOpen. (The admission once
/// went on from the ended phase: a rejection by an Open phase already over, a
/// forced-open breaker that ran the call, a success counted as stale.)
#[test]
fn a_call_whose_admissions_transition_a_listener_overrides_follows_the_listener() {
    let clock = ManualClock::new();
    for (on, reset) in [
        (Reason::HalfOpenTimeout, true),
        (Reason::HalfOpenTimeout, false),
        (Reason::RampCompleted, true),
        (Reason::RampCompleted, false),
    ] {
        let mut builder = trips_after(1, SEC).half_open_timeout(10 * SEC);
        if on == Reason::RampCompleted {
            builder = builder.ramp_up(SEC);
        }
        let (b, _log) = reentrant(&clock, builder, move |b, t| {
            if t.reason == on {
                if reset { b.reset() } else { b.force_open() }
            }
        });
        fail(&b);
        clock.advance(SEC);
        let probe = b.try_acquire().unwrap();
        let hung = match on {
            Reason::HalfOpenTimeout => {
                clock.advance(10 * SEC); // the round times out at the next call
                Some(probe)
            }
            _ => {
                probe.success(); // Recovering
                clock.advance(SEC); // the ramp completes at the next call
                None
            }
        };
        let ran = std::cell::Cell::new(false);
        let r = b.call(|| {
            ran.set(true);
            Ok::<_, &str>(7)
        });
        let case = format!("{on} then {}", if reset { "reset" } else { "force_open" });
        if reset {
            assert_eq!(
                (r, ran.get(), b.state()),
                (Ok(7), true, State::Closed),
                "{case}"
            );
        } else {
            let rejected = match r {
                Err(Error::Rejected(rejected)) => rejected,
                other => panic!("{case}: {other:?}"),
            };
            assert_eq!(
                (rejected.state(), rejected.retry_after()),
                (State::ForcedOpen, None)
            );
            assert!(!ran.get(), "{case}: a forced-open breaker ran the call");
        }
        drop(hung); // dropped after its phase ended: counted as dropped only
        let l = b.metrics().lifetime;
        assert_eq!(l.stale, 0, "{case}: {l:?}");
        assert_eq!(
            l.admitted,
            l.successes + l.failures + l.ignored + l.dropped,
            "{case}"
        );
    }
}

/// `also_on_transition`'s listener sees one thread's events in generation order
/// even when the listener before it moves the breaker on (a `force_open` on a
/// trip): that transition reaches the added listener after the trip, not before.
#[test]
fn an_added_listener_sees_events_in_generation_order_when_the_first_moves_the_breaker() {
    let seen: Arc<Mutex<Vec<(u32, Reason)>>> = Arc::default();
    let log = seen.clone();
    let first_seen: Arc<Mutex<Vec<u32>>> = Arc::default();
    let first_log = first_seen.clone();
    let b = Arc::new_cyclic(|me: &Weak<CircuitBreaker<ManualClock>>| {
        let me = me.clone();
        CircuitBreaker::builder()
            .consecutive_failures(1)
            .clock(ManualClock::new())
            .on_transition(move |t: &Transition| {
                first_log.lock().unwrap().push(t.generation);
                if t.reason == Reason::ConsecutiveFailures
                    && let Some(b) = me.upgrade()
                {
                    b.force_open();
                }
            })
            .also_on_transition(move |t| log.lock().unwrap().push((t.generation, t.reason)))
            .build()
            .unwrap()
    });
    let _ = b.call(|| Err::<(), _>("down"));
    assert_eq!(
        *seen.lock().unwrap(),
        [(1, Reason::ConsecutiveFailures), (2, Reason::ForcedOpen)]
    );
    // The first listener takes each as it comes (its own force_open's inside it).
    assert_eq!(*first_seen.lock().unwrap(), [1, 2]);
}

/// Two breakers built from clones of one builder share its first listener, each
/// with an added listener of its own. The first listener, handling `a`'s trip,
/// forces `b` open: `b`'s event reaches `b`'s added listener, not `a`'s (the
/// events held during a delivery were kept by the shared first listener, and
/// drained into the listener of the delivery under way).
#[test]
fn an_event_raised_during_another_breakers_delivery_reaches_its_own_added_listener() {
    type Seen = Arc<Mutex<Vec<(u32, Reason)>>>;
    let other: Arc<std::sync::OnceLock<CircuitBreaker<ManualClock>>> = Arc::default();
    let force = other.clone();
    let base = CircuitBreaker::builder()
        .consecutive_failures(1)
        .clock(ManualClock::new())
        .on_transition(move |t: &Transition| {
            if t.reason == Reason::ConsecutiveFailures {
                force.get().expect("b is built").force_open();
            }
        });
    let (seen_a, seen_b): (Seen, Seen) = Default::default();
    let (log_a, log_b) = (seen_a.clone(), seen_b.clone());
    let a = (base.clone())
        .also_on_transition(move |t| log_a.lock().unwrap().push((t.generation, t.reason)))
        .build()
        .unwrap();
    let b = base
        .also_on_transition(move |t| log_b.lock().unwrap().push((t.generation, t.reason)))
        .build()
        .unwrap();
    assert!(other.set(b).is_ok());
    let _ = a.call(|| Err::<(), _>("down"));
    assert_eq!(*seen_a.lock().unwrap(), [(1, Reason::ConsecutiveFailures)]);
    assert_eq!(*seen_b.lock().unwrap(), [(1, Reason::ForcedOpen)]);
}

/// A registry's keyed listener sees a key's events in generation order when the
/// shared builder's listener moves the breaker on (a `force_open` on a trip), as
/// an added listener does.
#[cfg(feature = "registry")]
#[test]
fn a_keyed_listener_sees_events_in_generation_order_when_the_shared_one_moves_the_breaker() {
    let registry: Arc<std::sync::OnceLock<cutout::Registry<String, ManualClock>>> = Arc::default();
    let force = registry.clone();
    let seen: Arc<Mutex<Vec<(String, u32, Reason)>>> = Arc::default();
    let log = seen.clone();
    let shared = CircuitBreaker::builder()
        .consecutive_failures(1)
        .clock(ManualClock::new())
        .on_transition(move |t: &Transition| {
            if t.reason == Reason::ConsecutiveFailures {
                force.get().expect("built").get("db").force_open();
            }
        });
    let built = cutout::Registry::builder(shared)
        .on_transition(move |key: &String, t| {
            log.lock()
                .unwrap()
                .push((key.clone(), t.generation, t.reason));
        })
        .build()
        .unwrap();
    assert!(registry.set(built).is_ok());
    let _ = registry.get().unwrap().call("db", || Err::<(), _>("down"));
    let db = |g, r| ("db".to_string(), g, r);
    assert_eq!(
        *seen.lock().unwrap(),
        [
            db(1, Reason::ConsecutiveFailures),
            db(2, Reason::ForcedOpen)
        ]
    );
}
