//! [`Dropped`]: what a call counts as when its permit is dropped before an outcome
//! was recorded (a panic, a cancelled future, a timeout outside the breaker).

use std::time::Duration;

/// What a call counts as when its permit is dropped unrecorded: the caller gave up
/// on it (a timeout outside the breaker, a client that went away, a panic). Set
/// with [`Builder::on_drop`](crate::Builder::on_drop).
///
/// Whatever this setting says, a dropped call always counts in
/// [`Lifetime::dropped`](crate::Lifetime::dropped); one this setting makes a
/// failure counts in [`Lifetime::failures`](crate::Lifetime::failures) too (the
/// [one counting rule](crate::Lifetime#one-counting-rule)). A dropped half-open
/// probe that counts as nothing gives its slot back, and a call dropped after the
/// breaker moved to another phase decides nothing (it is stale).
///
/// With the slow-call policy on ([`Builder::slow_calls`](crate::Builder::slow_calls)),
/// a call dropped after running longer than the threshold is one slow call in any
/// case: counted in the window's calls and slow counts, not as a failure, the
/// consecutive-failure count unchanged; a slow dropped probe reopens the breaker.
/// It was slow before anyone gave up on it.
///
/// So a timeout *outside* the breaker (timeout → breaker → backend) protects when
/// the slow-call policy is on with a threshold below the timeout, or when this
/// setting makes dropped calls failures. With neither, such a timeout counts for
/// nothing: a hung dependency never trips the breaker. A timeout *inside* the
/// breaker (breaker → timeout → backend) hands the breaker an error, which the
/// classifier sees like any other.
///
/// # Examples
/// ```
/// use cutout::{CircuitBreaker, Dropped, ManualClock, State};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let breaker = CircuitBreaker::builder()
///     .consecutive_failures(2)
///     .on_drop(Dropped::FailureAfter(Duration::from_millis(500)))
///     .clock(clock.clone())
///     .build()?;
///
/// drop(breaker.try_acquire()?); // given up at once: ignored
/// assert_eq!(breaker.metrics().consecutive_failures, 0);
/// for _ in 0..2 {
///     let permit = breaker.try_acquire()?;
///     clock.advance(Duration::from_secs(1)); // hung for a second, then abandoned
///     drop(permit);
/// }
/// assert_eq!(breaker.state(), State::Open);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Dropped {
    /// Counts as [`Ignored`](crate::Outcome::Ignored) (the default): the caller's
    /// own cancellation says nothing about the dependency. Except for a slow call,
    /// as above.
    #[default]
    Ignored,
    /// Counts as a [`Failure`](crate::Outcome::Failure), however long it ran.
    Failure,
    /// Counts as a failure once the call has run longer than this (strictly, from
    /// admission to the drop); a call dropped sooner is ignored (or slow, as
    /// above). Timed with the slow-call policy's readings when that policy is on
    /// (precise ones for a short threshold), and with the clock's cheap reading
    /// ([`Clock::now`](crate::Clock::now)) otherwise, which may lag by its
    /// [`resolution`](crate::Clock::resolution): with the default clock, about
    /// 1 ms.
    FailureAfter(Duration),
}

impl Dropped {
    /// Whether a call must be timed from its admission for this setting.
    pub(crate) fn times_calls(self) -> bool {
        matches!(self, Dropped::FailureAfter(_))
    }

    /// Whether a call dropped `age()` nanoseconds after admission is a failure.
    /// `age` is only asked for [`FailureAfter`](Dropped::FailureAfter).
    pub(crate) fn is_failure(self, age: impl FnOnce() -> u64) -> bool {
        match self {
            Dropped::Ignored => false,
            Dropped::Failure => true,
            Dropped::FailureAfter(d) => u128::from(age()) > d.as_nanos(),
        }
    }
}

#[cfg(all(test, not(cutout_loom)))]
mod tests {
    use super::*;

    #[test]
    fn failure_after_is_strict_and_only_times_when_it_must() {
        let after = Dropped::FailureAfter(Duration::from_nanos(100));
        assert!(!after.is_failure(|| 100));
        assert!(after.is_failure(|| 101));
        assert!(Dropped::Failure.is_failure(|| unreachable!("not timed")));
        assert!(!Dropped::Ignored.is_failure(|| unreachable!("not timed")));
        assert!(after.times_calls() && !Dropped::Failure.times_calls());
        assert_eq!(Dropped::default(), Dropped::Ignored);
    }
}
