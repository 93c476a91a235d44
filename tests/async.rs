//! `call_async`: the permit is taken at the first poll and travels with the future,
//! across threads too (recorded once, the `Dropped` policy applied wherever it is
//! dropped); a cancelled, panicking or ignored probe gives its slot back (DESIGN.md
//! contract lines 2 and 13 through the async path); a listener may call the breaker
//! from inside a poll. Runs on a hand-written no-op-waker executor and on tokio with
//! paused time; nothing sleeps.

mod common;

use common::{block_on, on_manual_clock, poll_once, trips_after, within};
use cutout::{CircuitBreaker, Dropped, Error, ManualClock, Outcome, State};
use std::cell::Cell;
use std::future::{Future, pending};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

const COOLDOWN: Duration = Duration::from_secs(5);

/// How long a test that could deadlock its own thread may take before it fails.
const BOUND: Duration = Duration::from_secs(10);

/// A future that stays pending until its gate opens, and counts its polls.
struct Gate<'a> {
    open: &'a Cell<bool>,
    polls: &'a Cell<u32>,
    result: Result<u32, &'static str>,
}

impl Future for Gate<'_> {
    type Output = Result<u32, &'static str>;
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
        self.polls.set(self.polls.get() + 1);
        if self.open.get() {
            Poll::Ready(self.result)
        } else {
            Poll::Pending
        }
    }
}

/// A future that stays pending until its flag is set (on any thread), then
/// succeeds: a [`Gate`] that can move between threads.
struct Flag(Arc<AtomicBool>);

impl Future for Flag {
    type Output = Result<u8, &'static str>;
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
        if self.0.load(Ordering::SeqCst) {
            Poll::Ready(Ok(1))
        } else {
            Poll::Pending
        }
    }
}

/// A breaker that trips on one failure, with `probes` half-open probes.
fn breaker(clock: &ManualClock, probes: u32) -> CircuitBreaker<ManualClock> {
    trips_after(1, COOLDOWN)
        .half_open_probes(probes)
        .clock(clock.clone())
        .build()
        .unwrap()
}

/// Trips `b` and waits out its cooldown: the next call is a probe.
fn to_probing(b: &CircuitBreaker<ManualClock>, clock: &ManualClock) {
    let _ = b.call(|| Err::<(), _>("trip"));
    assert_eq!(b.state(), State::Open);
    clock.advance(COOLDOWN);
}

/// A breaker that trips on one failure, with one probe, tripped and its cooldown
/// waited out: the next call is its probe.
fn probing() -> CircuitBreaker<ManualClock> {
    let clock = ManualClock::new();
    let b = breaker(&clock, 1);
    to_probing(&b, &clock);
    b
}

#[test]
fn outcomes_are_recorded_and_errors_returned() {
    let clock = ManualClock::new();
    let b = breaker(&clock, 1);
    assert_eq!(block_on(b.call_async(async { Ok::<_, ()>(5) })), Ok(5));
    assert_eq!(b.metrics().lifetime.successes, 1);
    assert_eq!(
        block_on(b.call_async(async { Err::<(), _>("refused") })),
        Err(Error::Inner("refused"))
    );
    assert_eq!(b.metrics().lifetime.failures, 1);
    assert_eq!(b.state(), State::Open);
}

#[test]
fn a_rejected_call_is_never_polled() {
    let clock = ManualClock::new();
    let b = breaker(&clock, 1);
    b.force_open();
    let (open, polls) = (Cell::new(true), Cell::new(0));
    let gate = Gate {
        open: &open,
        polls: &polls,
        result: Ok(1),
    };
    match block_on(b.call_async(gate)) {
        Err(Error::Rejected(r)) => assert_eq!(r.state(), State::ForcedOpen),
        other => panic!("expected a rejection, got {other:?}"),
    }
    assert_eq!(polls.get(), 0);
    assert_eq!(b.metrics().lifetime.rejected, 1);
}

#[test]
fn the_permit_is_taken_at_the_first_poll() {
    let clock = ManualClock::new();
    let b = breaker(&clock, 1);
    let _ = b.call(|| Err::<(), _>("trip"));
    // Created while Open ...
    let created = b.call_async(async { Ok::<_, ()>("probe") });
    assert_eq!(b.metrics().lifetime.admitted, 1);
    // ... polled after the cooldown: admitted as the probe, and it closes.
    clock.advance(COOLDOWN);
    assert_eq!(block_on(created), Ok("probe"));
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn dropping_before_the_first_poll_records_nothing() {
    let clock = ManualClock::new();
    let b = breaker(&clock, 1);
    drop(b.call_async(async { Ok::<_, ()>(()) }));
    let m = b.metrics();
    assert_eq!((m.lifetime.admitted, m.lifetime.dropped), (0, 0));
}

#[test]
fn a_dropped_probe_gives_its_slot_back_and_the_breaker_still_decides() {
    let b = probing();
    let (open, polls) = (Cell::new(false), Cell::new(0));
    {
        let mut probe = pin!(b.call_async(Gate {
            open: &open,
            polls: &polls,
            result: Ok(1),
        }));
        assert!(poll_once(probe.as_mut()).is_pending());
        assert_eq!(b.state(), State::HalfOpen);
        // The only slot is taken: another call is rejected.
        let other = block_on(b.call_async(async { Ok::<_, &str>(0) }));
        assert_eq!(
            other.unwrap_err().rejected().unwrap().state(),
            State::HalfOpen
        );
    } // the probe is dropped mid-flight: cancelled
    let m = b.metrics();
    assert_eq!((m.lifetime.dropped, m.lifetime.failures), (1, 1)); // only the trip
    assert_eq!(b.state(), State::HalfOpen);
    // The slot came back: a new probe is admitted and decides.
    assert_eq!(block_on(b.call_async(async { Ok::<_, ()>(2) })), Ok(2));
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn a_panicking_probe_gives_its_slot_back() {
    let b = probing();
    let boom = async {
        if b.state() == State::HalfOpen {
            panic!("probe panicked");
        }
        Ok::<(), &str>(())
    };
    let mut probe = Box::pin(b.call_async(boom));
    let unwound = catch_unwind(AssertUnwindSafe(|| poll_once(probe.as_mut())));
    assert!(unwound.is_err());
    drop(probe);
    assert_eq!(b.metrics().lifetime.dropped, 1);
    assert_eq!(b.state(), State::HalfOpen);
    // A failing probe now gets the slot and reopens the breaker: a verdict.
    let failed = block_on(b.call_async(async { Err::<(), _>("still down") }));
    assert_eq!(failed, Err(Error::Inner("still down")));
    assert_eq!(b.state(), State::Open);
}

#[test]
fn an_ignored_probe_gives_its_slot_back() {
    let clock = ManualClock::new();
    let b = breaker(&clock, 2);
    to_probing(&b, &clock);
    let cancelled = |_: &Result<(), &str>| Outcome::Ignored;
    for _ in 0..5 {
        // More ignored probes than slots: each gave its slot back.
        let r = block_on(b.call_async_with(cancelled, async { Err("caller cancelled") }));
        assert_eq!(r, Err(Error::Inner("caller cancelled")));
    }
    assert_eq!(b.state(), State::HalfOpen);
    assert_eq!(b.metrics().lifetime.ignored, 5);
    for _ in 0..2 {
        assert!(block_on(b.call_async(async { Ok::<_, ()>(()) })).is_ok());
    }
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn ignored_counts_as_neither_success_nor_failure() {
    let (b, _) = on_manual_clock(
        CircuitBreaker::builder()
            .consecutive_failures(2)
            .window(Duration::from_secs(10), 10)
            .failure_rate(0.9, 100),
    );
    let ignore = |_: &Result<(), &str>| Outcome::Ignored;
    let _ = block_on(b.call_async(async { Err::<(), _>("fail") }));
    let _ = block_on(b.call_async_with(ignore, async { Ok(()) }));
    let m = b.metrics();
    // The ignored success did not end the streak, nor enter the window.
    assert_eq!(m.consecutive_failures, 1);
    assert_eq!((m.window.calls, m.window.failures), (1, 1));
    assert_eq!((m.lifetime.successes, m.lifetime.ignored), (0, 1));
    let _ = block_on(b.call_async_with(ignore, async { Err("fail") }));
    assert_eq!(b.metrics().consecutive_failures, 1);
    assert_eq!(b.state(), State::Closed);
    let _ = block_on(b.call_async(async { Err::<(), _>("fail") }));
    assert_eq!(b.state(), State::Open); // two real failures in a row
}

#[test]
fn the_future_is_send_when_its_inner_future_is() {
    fn assert_send<T: Send>(_: &T) {}
    let b = CircuitBreaker::builder().build().unwrap();
    let call = b.call_async(async { Ok::<_, std::io::Error>(1) });
    assert_send(&call);
    let with = b.call_async_with(|_: &Result<u8, ()>| Outcome::Success, async { Ok(1) });
    assert_send(&with);
    assert_eq!(block_on(call).unwrap(), 1);
    assert_eq!(block_on(with), Ok(1));
}

/// A wrapped future that fails and then panics when dropped: its failure is
/// recorded before it is dropped (it was dropped first, and the panic left the
/// call counted as dropped, the failure lost: a reviewer's finding), the panic
/// reaches the poller, and the future is done.
#[test]
fn a_call_whose_drop_panics_after_it_completed_keeps_its_outcome() {
    struct PanicsOnDrop;
    impl Drop for PanicsOnDrop {
        fn drop(&mut self) {
            if !std::thread::panicking() {
                panic!("the call's future panicked in its drop");
            }
        }
    }
    struct FailsThenPanicsOnDrop(#[allow(dead_code)] PanicsOnDrop);
    impl Future for FailsThenPanicsOnDrop {
        type Output = Result<(), &'static str>;
        fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
            Poll::Ready(Err("connection refused"))
        }
    }
    let b = CircuitBreaker::builder()
        .consecutive_failures(1)
        .clock(ManualClock::new())
        .build()
        .unwrap();
    let mut call = pin!(b.call_async(FailsThenPanicsOnDrop(PanicsOnDrop)));
    let first = catch_unwind(AssertUnwindSafe(|| poll_once(call.as_mut())));
    assert!(first.is_err(), "the drop's panic reaches the poller");
    let m = b.metrics();
    assert_eq!(
        (m.lifetime.admitted, m.lifetime.failures, m.lifetime.dropped),
        (1, 1, 0)
    );
    assert_eq!(m.state, State::Open);
    assert!(poll_once(call.as_mut()).is_pending(), "done");
    assert_eq!(format!("{:?}", call), "CallAsync { stage: \"done\", .. }");
}

#[test]
fn the_default_classifier_is_named_and_takes_no_room() {
    use cutout::{CallAsync, ErrIsFailure};
    let b = CircuitBreaker::builder()
        .consecutive_failures(1)
        .build()
        .unwrap();
    let inner = async { Err::<u8, _>("down") };
    let size = std::mem::size_of_val(&inner);
    // The future's type can be written out, to keep it in a struct's field.
    let call: CallAsync<'_, _, ErrIsFailure, _> = b.call_async(inner);
    // No bigger than with a closure that captures nothing: no pointer is held for
    // the classifier (a function pointer would take eight bytes).
    let with = b.call_async_with(|r: &Result<u8, &str>| Outcome::of(r), async {
        Err::<u8, _>("down")
    });
    assert_eq!(std::mem::size_of_val(&call), std::mem::size_of_val(&with));
    assert!(std::mem::size_of_val(&call) > size);
    // And it says `Err` is a failure.
    assert_eq!(block_on(call).unwrap_err().into_inner(), Some("down"));
    assert_eq!(b.state(), State::Open);
    assert!(matches!(block_on(with), Err(Error::Rejected(_))));
}

#[tokio::test(start_paused = true)]
async fn a_timeout_that_cancels_a_probe_releases_its_slot() {
    let b = probing();
    let hung = b.call_async(async {
        tokio::time::sleep(Duration::from_secs(60)).await;
        Ok::<_, &str>("too late")
    });
    // Paused time: the runtime jumps to the deadline, no real waiting.
    let timed_out = tokio::time::timeout(Duration::from_secs(1), hung).await;
    assert!(timed_out.is_err());
    let m = b.metrics();
    assert_eq!(m.lifetime.dropped, 1);
    assert_eq!(m.lifetime.failures, 1); // the trip only: a cancellation is not a failure
    assert_eq!(b.state(), State::HalfOpen);
    let probe = b.call_async(async {
        tokio::time::sleep(Duration::from_millis(10)).await;
        Ok::<_, &str>("ok")
    });
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(1), probe).await,
        Ok(Ok("ok"))
    );
    assert_eq!(b.state(), State::Closed);
}

#[tokio::test(start_paused = true)]
async fn an_aborted_task_releases_its_probe() {
    let clock = ManualClock::new();
    let b = Arc::new(breaker(&clock, 1));
    to_probing(&b, &clock);
    let task = tokio::spawn({
        let b = b.clone();
        async move {
            b.call_async(async {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok::<_, &str>(())
            })
            .await
        }
    });
    // Let the task take the probe.
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert!(b.try_acquire().is_err(), "the task holds the only probe");
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    assert_eq!(b.metrics().lifetime.dropped, 1);
    let probe = b
        .try_acquire()
        .expect("the aborted probe gave its slot back");
    probe.failure();
    assert_eq!(b.state(), State::Open);
}

/// A probe admitted on one thread and finished on another, then polled again: its
/// outcome is recorded once (the permit travels with the future), the breaker
/// closes, and the finished future stays pending.
#[test]
fn a_probe_finished_on_another_thread_records_once() {
    let b = probing();
    let flag = Arc::new(AtomicBool::new(false));
    std::thread::scope(|s| {
        let mut fut = Box::pin(b.call_async(Flag(flag.clone())));
        assert!(poll_once(fut.as_mut()).is_pending());
        assert!(b.try_acquire().is_err(), "the one probe is out");
        let flag = flag.clone();
        s.spawn(move || {
            flag.store(true, Ordering::SeqCst);
            assert!(matches!(poll_once(fut.as_mut()), Poll::Ready(Ok(1))));
            assert!(poll_once(fut.as_mut()).is_pending());
            assert!(poll_once(fut.as_mut()).is_pending());
        })
        .join()
        .unwrap();
    });
    assert_eq!(b.state(), State::Closed);
    let l = b.metrics().lifetime;
    assert_eq!((l.admitted, l.successes, l.dropped), (2, 1, 0));
}

/// A probe dropped on another thread follows `Dropped::FailureAfter` by how long it
/// ran, not where it ended: dropped at exactly the threshold, its slot comes back;
/// past it, it is a failed probe and the breaker reopens.
#[test]
fn a_probe_dropped_on_another_thread_follows_the_dropped_policy() {
    let (b, clock) = on_manual_clock(
        trips_after(1, COOLDOWN).on_drop(Dropped::FailureAfter(Duration::from_millis(500))),
    );
    to_probing(&b, &clock);
    std::thread::scope(|s| {
        let mut quick = Box::pin(b.call_async(pending::<Result<(), ()>>()));
        assert!(poll_once(quick.as_mut()).is_pending());
        clock.advance(Duration::from_millis(500)); // exactly: not a failure
        s.spawn(move || drop(quick)).join().unwrap();
    });
    assert_eq!(b.state(), State::HalfOpen);
    std::thread::scope(|s| {
        let mut slow = Box::pin(b.call_async(pending::<Result<(), ()>>()));
        assert!(poll_once(slow.as_mut()).is_pending(), "the slot came back");
        clock.advance(Duration::from_millis(501));
        s.spawn(move || drop(slow)).join().unwrap();
    });
    assert_eq!(b.state(), State::Open);
    let l = b.metrics().lifetime;
    // The trip's failure, and the slow probe's drop, a failure too.
    assert_eq!((l.dropped, l.failures), (2, 2));
}

/// A transition listener that calls back into the breaker (`call` and
/// `call_async`) when a probe polled by `call_async` closes it: no lock is held
/// across the listener, so nothing deadlocks, and the re-entrant calls count.
#[test]
fn a_listener_may_call_the_breaker_from_inside_a_poll() {
    within(BOUND, || {
        let clock = ManualClock::new();
        let slot: Arc<OnceLock<Weak<CircuitBreaker<ManualClock>>>> = Arc::new(OnceLock::new());
        let seen = slot.clone();
        let reentered = Arc::new(AtomicU32::new(0));
        let count = reentered.clone();
        let b = Arc::new(
            trips_after(1, COOLDOWN)
                .clock(clock.clone())
                .on_transition(move |t| {
                    if let Some(b) = seen.get().and_then(Weak::upgrade) {
                        if t.to == State::Closed {
                            let _ = b.call(|| Ok::<_, ()>(()));
                            let _ = block_on(b.call_async(async { Ok::<_, ()>(()) }));
                            count.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                })
                .build()
                .unwrap(),
        );
        slot.set(Arc::downgrade(&b)).unwrap();
        to_probing(&b, &clock);
        assert_eq!(block_on(b.call_async(async { Ok::<_, ()>(5) })), Ok(5));
        assert_eq!(reentered.load(Ordering::SeqCst), 1);
        assert_eq!(b.state(), State::Closed);
        assert_eq!(b.metrics().lifetime.successes, 3);
    });
}

/// A listener that panics on the move to HalfOpen, made by a `call_async`'s first
/// poll: the panic reaches the poller, nothing was admitted (no slot taken), and
/// the future is not poisoned: polled again, it is admitted as the round's probe,
/// runs its call and closes the breaker.
#[test]
fn a_listener_panicking_during_admission_leaves_the_future_waiting() {
    let clock = ManualClock::new();
    let panicked = Arc::new(AtomicBool::new(false));
    let once = panicked.clone();
    let b = trips_after(1, COOLDOWN)
        .clock(clock.clone())
        .on_transition(move |t| {
            if t.to == State::HalfOpen && !once.swap(true, Ordering::SeqCst) {
                panic!("listener");
            }
        })
        .build()
        .unwrap();
    to_probing(&b, &clock);
    let ran = Cell::new(false);
    let mut call = pin!(b.call_async(async {
        ran.set(true);
        Ok::<_, ()>(3)
    }));
    let first = catch_unwind(AssertUnwindSafe(|| poll_once(call.as_mut())));
    assert!(first.is_err(), "the listener's panic reaches the poller");
    assert!(panicked.load(Ordering::SeqCst));
    assert!(!ran.get(), "nothing was admitted");
    assert_eq!(b.state(), State::HalfOpen);
    assert!(format!("{call:?}").contains("waiting"), "{call:?}");
    assert_eq!(poll_once(call.as_mut()), Poll::Ready(Ok(3)));
    assert!(ran.get());
    assert_eq!(b.state(), State::Closed, "the probe's success closes");
}

/// Panics when dropped (unless already unwinding).
struct PanicOnDrop;

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            panic!("drop");
        }
    }
}

/// Polls `call`, a `call_async` on `b` (forced open) whose rejection panics in a
/// drop: the panic reaches the poller, and the future is done. Polled again once
/// `b` is reset, it takes no permit.
fn assert_done_after_a_panicking_rejection<F>(b: &CircuitBreaker, mut call: Pin<&mut F>)
where
    F: Future + std::fmt::Debug,
{
    assert!(catch_unwind(AssertUnwindSafe(|| poll_once(call.as_mut()))).is_err());
    b.reset();
    let before = b.metrics().lifetime.admitted;
    assert!(poll_once(call.as_mut()).is_pending(), "done: nothing to do");
    assert_eq!(b.metrics().lifetime.admitted, before, "no permit taken");
    assert!(format!("{call:?}").contains("done"), "{call:?}");
}

/// A rejected `call_async` whose call panics when dropped: the panic reaches the
/// poller, and the future is done: polled again, it takes no permit.
#[test]
fn a_rejected_call_whose_drop_panics_leaves_the_future_done() {
    let b = CircuitBreaker::builder().build().unwrap();
    b.force_open();
    let guard = PanicOnDrop;
    let call = pin!(b.call_async(async move {
        let _guard = &guard;
        Ok::<_, ()>(1)
    }));
    assert_done_after_a_panicking_rejection(&b, call);
}

/// The same with a classifier whose drop panics: done, not poisoned (the call
/// never ran).
#[test]
fn a_rejected_call_whose_classifier_panics_when_dropped_leaves_the_future_done() {
    let b = CircuitBreaker::builder().build().unwrap();
    b.force_open();
    let guard = PanicOnDrop;
    let classify = move |r: &Result<u32, ()>| {
        let _guard = &guard;
        Outcome::of(r)
    };
    let call = pin!(b.call_async_with(classify, async { Ok::<_, ()>(1) }));
    assert_done_after_a_panicking_rejection(&b, call);
}

/// A `call_async` whose probe succeeds, with a listener that panics as the
/// success closes the breaker: the outcome is recorded, the panic reaches the
/// poller, and the future is poisoned as a call's panic leaves it (as its docs
/// say): polled again, it panics, and takes no permit.
#[test]
fn a_listener_that_panics_as_the_outcome_is_recorded_reaches_the_poller() {
    let clock = ManualClock::new();
    let b = CircuitBreaker::builder()
        .consecutive_failures(1)
        .open_duration(Duration::from_secs(1))
        .on_transition(|t: &cutout::Transition| {
            if t.to == State::Closed {
                std::panic::resume_unwind(Box::new("a listener that fails, on purpose"));
            }
        })
        .clock(clock.clone())
        .build()
        .unwrap();
    let _ = b.call(|| Err::<(), _>("down"));
    clock.advance(Duration::from_secs(1));
    let mut call = pin!(b.call_async(async { Ok::<u8, ()>(7) }));
    assert!(catch_unwind(AssertUnwindSafe(|| poll_once(call.as_mut()))).is_err());
    assert_eq!(b.state(), State::Closed, "the outcome was recorded");
    let admitted = b.metrics().lifetime.admitted;
    assert!(catch_unwind(AssertUnwindSafe(|| poll_once(call.as_mut()))).is_err());
    assert_eq!(b.metrics().lifetime.admitted, admitted, "no permit taken");
}

/// A `Classify` type classifies a `call_async_with` through a closure, as its
/// docs show.
#[test]
fn a_classify_type_goes_in_a_closure() {
    use cutout::{Classify, ErrIsFailure};
    let b = CircuitBreaker::builder()
        .consecutive_failures(1)
        .build()
        .unwrap();
    let failed =
        block_on(b.call_async_with(|r| ErrIsFailure.classify(r), async { Err::<u8, _>(1) }));
    assert!(failed.is_err());
    assert_eq!(b.state(), State::Open);
}

#[test]
#[should_panic(expected = "still pending after")]
fn block_on_gives_up_on_a_future_that_never_completes() {
    // The bound that makes a test of wrong code fail instead of hang.
    block_on(std::future::pending::<()>());
}

/// One gated `call_async` on `b`: `before` passes on `clock` before its first poll,
/// `took` between that poll (its admission) and the one that completes it, whose
/// result this returns.
fn timed_call(
    b: &CircuitBreaker<ManualClock>,
    clock: &ManualClock,
    result: Result<u32, &'static str>,
    before: Duration,
    took: Duration,
) -> Poll<Result<u32, Error<&'static str>>> {
    let (open, polls) = (Cell::new(false), Cell::new(0));
    let mut f = pin!(b.call_async(Gate {
        open: &open,
        polls: &polls,
        result,
    }));
    clock.advance(before);
    assert!(poll_once(f.as_mut()).is_pending());
    clock.advance(took);
    open.set(true);
    poll_once(f.as_mut())
}

/// The slow-call threshold of `a_call_is_timed_from_its_first_poll_to_its_last`.
const SLOW: Duration = Duration::from_millis(100);

/// `call_async` times a call from its first poll (its admission), not from the
/// future's creation, to the poll that completes it; a call is slow strictly past
/// the threshold.
#[test]
fn a_call_is_timed_from_its_first_poll_to_its_last() {
    let (b, clock) = on_manual_clock(
        CircuitBreaker::builder()
            .window(Duration::from_secs(60), 6)
            .slow_calls(SLOW, 1.0)
            .minimum_calls(100),
    );
    // Before admission: not the call's time.
    let done = timed_call(&b, &clock, Ok(1), SLOW * 10, SLOW / 2);
    assert!(matches!(done, Poll::Ready(Ok(1))));
    let m = b.metrics();
    assert_eq!((m.window.calls, m.window.slow, m.lifetime.slow), (1, 0, 0));

    let done = timed_call(
        &b,
        &clock,
        Ok(2),
        Duration::ZERO,
        SLOW + Duration::from_nanos(1),
    );
    assert!(matches!(done, Poll::Ready(Ok(2))));
    let m = b.metrics();
    assert_eq!((m.window.calls, m.window.slow, m.lifetime.slow), (2, 1, 1));
    // exactly the threshold is not slow
    let done = timed_call(&b, &clock, Err("x"), Duration::ZERO, SLOW);
    assert!(matches!(done, Poll::Ready(Err(Error::Inner("x")))));
    let m = b.metrics();
    assert_eq!(
        (m.window.calls, m.window.slow, m.window.failures),
        (3, 1, 1)
    );
    common::assert_each_admitted_call_finished_once(&b);
}
