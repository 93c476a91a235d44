//! A thread's stripe does not depend on its history: its first call, even a
//! rejection, gives it a slot and its stripe; a thread beyond the owned stripes
//! owns one once one comes free; threads beyond the owned stripes spread over the
//! shared ones. Stripes are seen through `heap_bytes`: each exists once a thread
//! has written it.
//!
//! One test in its own binary: it gives every breaker room for 2 owned stripes
//! only (`simulate_owned_stripes`, for tests) and counts the process's slots, so no other test may hold one meanwhile.

use cutout::{CircuitBreaker, Error};
use std::sync::mpsc;
use std::thread;

/// A breaker without a window: a stripe is one 128-byte line.
fn breaker() -> CircuitBreaker {
    CircuitBreaker::builder()
        .consecutive_failures(1)
        .build()
        .unwrap()
}

/// A thread that calls `b` once with `f` and holds its slot until told to go.
fn holder(
    b: &'static CircuitBreaker,
    f: fn() -> Result<(), ()>,
) -> (mpsc::Sender<()>, thread::JoinHandle<()>) {
    let (go, wait) = mpsc::channel();
    let (ready, called) = mpsc::channel();
    let handle = thread::spawn(move || {
        let _ = b.call(f);
        ready.send(()).unwrap();
        let _ = wait.recv();
    });
    called.recv().unwrap();
    (go, handle)
}

#[test]
fn first_calls_and_thread_history_give_threads_their_own_stripes() {
    assert!(cutout::simulate_owned_stripes(2), "2 owned stripes");
    let crowd_breaker: &'static CircuitBreaker = Box::leak(Box::new(breaker()));
    let room = breaker().heap_bytes();
    let stripe = {
        let b = breaker();
        thread::scope(|s| {
            s.spawn(|| b.call(|| Ok::<_, ()>(())).unwrap());
        });
        b.heap_bytes() - room
    };
    assert_eq!(stripe, 128);

    // A fresh thread whose first call is a rejection gets its own stripe from it,
    // and keeps it: its second rejection writes no new one.
    let open: &'static CircuitBreaker = Box::leak(Box::new(breaker()));
    // Tripped by a thread that holds its slot meanwhile (this one must hold none).
    let (go, tripper) = holder(open, || Err(()));
    let before = open.heap_bytes();
    thread::spawn(|| {
        for _ in 0..3 {
            assert!(matches!(
                open.call(|| Ok::<_, ()>(())),
                Err(Error::Rejected(_))
            ));
        }
    })
    .join()
    .unwrap();
    assert_eq!(
        open.heap_bytes(),
        before + stripe,
        "one stripe, from the rejection"
    );
    go.send(()).unwrap();
    tripper.join().unwrap();

    // A crowd holds both owned slots; six more threads arrive: they spread over
    // the shared stripes (four: 2 and 3, 4 and 5, 6 and 7 share by slot number).
    let crowd: Vec<_> = (0..2).map(|_| holder(crowd_breaker, || Ok(()))).collect();
    let late: Vec<_> = (0..6).map(|_| holder(crowd_breaker, || Ok(()))).collect();
    assert_eq!(
        crowd_breaker.heap_bytes(),
        room + 2 * stripe + 4 * stripe,
        "two owned stripes, four shared ones"
    );
    for (go, handle) in late {
        go.send(()).unwrap();
        handle.join().unwrap();
    }

    // A pool thread starts while the crowd holds the owned slots: it writes a
    // shared stripe of `pool_breaker`.
    let pool_breaker: &'static CircuitBreaker = Box::leak(Box::new(breaker()));
    let (call, calls) = mpsc::channel::<mpsc::Sender<usize>>();
    let pool = thread::spawn(move || {
        for done in calls {
            let _ = pool_breaker.call(|| Ok::<_, ()>(()));
            done.send(pool_breaker.heap_bytes()).unwrap();
        }
    });
    let ask = || {
        let (done, heap) = mpsc::channel();
        call.send(done).unwrap();
        heap.recv().unwrap()
    };
    assert_eq!(ask(), room + stripe, "a shared stripe");
    assert_eq!(ask(), room + stripe);
    // The crowd leaves: the pool thread's next call trades its slot for a freed
    // owned one, and writes its own stripe from then on.
    for (go, handle) in crowd {
        go.send(()).unwrap();
        handle.join().unwrap();
    }
    assert_eq!(ask(), room + 2 * stripe, "its own stripe now");
    for _ in 0..3 {
        assert_eq!(ask(), room + 2 * stripe, "and only that one");
    }
    drop(call);
    pool.join().unwrap();
    let m = pool_breaker.metrics();
    assert_eq!((m.lifetime.admitted, m.lifetime.successes), (6, 6));
}
