//! Zero allocations per call (behaviour contract 15): a counting global allocator
//! counts what the calling thread allocates while it makes calls through a breaker.
//!
//! Each test builds its breaker and makes one warm-up call first: a thread's first
//! call takes its stripe slot and allocates its stripe of this breaker (counted on
//! its own below). Only the calls after that are counted. Counts are per thread, so
//! tests running in parallel do not mix.

#[path = "../benches/common/counting_alloc.rs"]
mod counting_alloc;

mod common;

use common::{on_manual_clock, rate_window, trips_after};
use counting_alloc::allocations_in;
use cutout::{CircuitBreaker, Clock, DefaultClock, Error, ManualClock, State};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

const CALLS: usize = 10_000;

fn succeed<C: Clock>(b: &CircuitBreaker<C>) -> bool {
    b.call(|| Ok::<_, ()>(std::hint::black_box(1))).is_ok()
}

fn fail<C: Clock>(b: &CircuitBreaker<C>) -> Result<u32, Error<&'static str>> {
    b.call(|| Err::<u32, _>("down"))
}

#[test]
fn the_allocator_counts_this_threads_allocations() {
    // The other tests assert zero; this shows the counter sees an allocation.
    let n = allocations_in(|| drop(std::hint::black_box(Box::new(7u64))));
    assert_eq!(n, 1);
}

#[test]
fn a_threads_first_call_allocates_its_stripe_once_and_building_allocates_no_stripe() {
    // Issue 16: at most one allocation per (thread, breaker), with or without a
    // window (its ring is in the stripe's one allocation).
    let stripe_allocations = 1;
    for builder in [
        // The counter line only.
        CircuitBreaker::builder().consecutive_failures(5),
        // The counter line and the ring of buckets.
        CircuitBreaker::<DefaultClock>::builder(),
        // A window of a larger class.
        CircuitBreaker::<DefaultClock>::builder().window(Duration::from_secs(60), 600),
    ] {
        let b = builder.build().unwrap();
        let built = b.heap_bytes();
        let first = allocations_in(|| assert!(succeed(&b)));
        assert!(b.heap_bytes() > built, "the first call wrote a stripe");
        // The slot list may grow on this thread's first call to any breaker: at
        // most one more.
        assert!(
            first == stripe_allocations || first == stripe_allocations + 1,
            "{first} allocations in the first call"
        );
        assert_eq!(allocations_in(|| assert!(succeed(&b))), 0);
        // A rejection from a thread new to the breaker allocates its stripe too.
        b.force_open();
        std::thread::scope(|s| {
            s.spawn(|| {
                let _ = fail(&CircuitBreaker::builder().build().unwrap()); // the slot
                let n = allocations_in(|| assert!(fail(&b).is_err()));
                assert_eq!(n, stripe_allocations, "the rejection's stripe");
                assert_eq!(allocations_in(|| assert!(fail(&b).is_err())), 0);
            });
        });
    }
}

#[test]
fn a_closed_success_with_the_consecutive_policy_allocates_nothing() {
    let b = CircuitBreaker::builder()
        .consecutive_failures(5)
        .build()
        .unwrap();
    assert!(succeed(&b));
    let mut admitted = 0;
    let n = allocations_in(|| admitted = (0..CALLS).filter(|_| succeed(&b)).count());
    assert_eq!(admitted, CALLS);
    assert_eq!(n, 0, "{n} allocations in {CALLS} calls");
}

#[test]
fn a_closed_success_with_the_window_policies_allocates_nothing() {
    for builder in [
        CircuitBreaker::<DefaultClock>::builder(), // the default window
        rate_window(Duration::from_secs(10), 10, 0.5, 20).slow_calls(Duration::from_secs(1), 0.5),
    ] {
        let b = builder.build().unwrap();
        assert!(succeed(&b));
        let mut admitted = 0;
        let n = allocations_in(|| admitted = (0..CALLS).filter(|_| succeed(&b)).count());
        assert_eq!(admitted, CALLS);
        assert_eq!(n, 0, "{n} allocations in {CALLS} calls");
        assert_eq!(b.metrics().window.calls, CALLS as u64 + 1);
    }
}

#[test]
fn a_closed_success_across_bucket_rotations_allocates_nothing() {
    let (b, clock) =
        on_manual_clock(CircuitBreaker::builder().window(Duration::from_millis(10), 2));
    assert!(succeed(&b));
    let n = allocations_in(|| {
        for _ in 0..CALLS {
            clock.advance(Duration::from_millis(1));
            assert!(succeed(&b));
        }
    });
    assert_eq!(n, 0, "{n} allocations in {CALLS} calls");
}

#[test]
fn an_open_rejection_allocates_nothing() {
    let b = trips_after(1, Duration::from_secs(60))
        .clock(ManualClock::new())
        .build()
        .unwrap();
    let _ = fail(&b);
    assert_eq!(b.state(), State::Open);
    assert!(!succeed(&b)); // warm-up of the rejection path
    let mut rejected = 0;
    let n = allocations_in(|| rejected = (0..CALLS).filter(|_| !succeed(&b)).count());
    assert_eq!(rejected, CALLS);
    assert_eq!(n, 0, "{n} allocations in {CALLS} rejections");
    let r = b.try_acquire().unwrap_err();
    assert_eq!(r.retry_after(), Some(Duration::from_secs(60)));
}

#[test]
fn failures_that_trip_allocate_nothing_even_with_a_listener() {
    let events = Arc::new(AtomicUsize::new(0));
    let seen = events.clone();
    let consecutive = CircuitBreaker::builder()
        .consecutive_failures(3)
        .on_transition(move |t| {
            assert_eq!(t.to, State::Open);
            seen.fetch_add(1, Ordering::Relaxed);
        })
        .clock(ManualClock::new())
        .build()
        .unwrap();
    let window = rate_window(Duration::from_secs(10), 10, 0.5, 20)
        .clock(ManualClock::new())
        .build()
        .unwrap();
    // Warm-up: one success each (this thread's stripe slot).
    assert!(succeed(&consecutive) && succeed(&window));
    let n = allocations_in(|| {
        for _ in 0..3 {
            assert!(matches!(fail(&consecutive), Err(Error::Inner("down"))));
        }
        for _ in 0..19 {
            assert!(matches!(fail(&window), Err(Error::Inner("down"))));
        }
    });
    assert_eq!(
        (consecutive.state(), window.state()),
        (State::Open, State::Open)
    );
    assert_eq!(events.load(Ordering::Relaxed), 1);
    if cfg!(feature = "metrics") {
        // With the `metrics` feature each transition (two here) builds its labelled
        // metric key, a small allocation; the calls themselves allocate nothing.
        assert!(n <= 2 * 2, "{n} allocations while failing and tripping");
    } else {
        assert_eq!(n, 0, "{n} allocations while failing and tripping");
    }
}

#[cfg(feature = "tower")]
#[test]
fn a_tower_call_and_a_service_cloned_for_it_allocate_nothing() {
    use std::future::{Future, Ready, ready};
    use std::task::{Context, Poll, Waker};
    use tower::{Layer, Service, service_fn};

    fn poll_once<F: Future>(f: F) -> Poll<F::Output> {
        std::pin::pin!(f).poll(&mut Context::from_waker(Waker::noop()))
    }
    let b = Arc::new(CircuitBreaker::builder().build().unwrap());
    let echo = service_fn(|x: usize| -> Ready<Result<usize, ()>> { ready(Ok(x)) });
    let service = cutout::CircuitBreakerLayer::new(b.clone()).layer(echo);
    // The warm-up: the stripe, and this thread's spare holds of the breaker.
    assert!(matches!(
        poll_once(service.clone().call(0)),
        Poll::Ready(Ok(0))
    ));
    let n = allocations_in(|| {
        for i in 0..CALLS {
            let future = service.clone().call(i);
            assert!(matches!(poll_once(future), Poll::Ready(Ok(x)) if x == i));
        }
    });
    assert_eq!(n, 0);
    assert_eq!(b.metrics().lifetime.successes, CALLS as u64 + 1);
}
