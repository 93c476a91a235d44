//! Helpers shared by the integration tests (`mod common;` in each).

use std::future::Future;
use std::pin::{Pin, pin};
use std::task::{Context, Poll, Waker};

/// Polls once with a no-op waker.
pub fn poll_once<F: Future>(f: Pin<&mut F>) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(Waker::noop()))
}

/// Polls until ready; every future the tests pass is ready after finitely many polls.
pub fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    loop {
        if let Poll::Ready(out) = poll_once(f.as_mut()) {
            return out;
        }
    }
}
