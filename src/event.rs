//! Transition events.

use crate::State;
use crate::window::WindowCounts;
use std::fmt;
use std::time::Duration;

/// Why a transition happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Reason {
    /// Closed → Open: the consecutive-failure threshold was reached.
    ConsecutiveFailures,
    /// Closed → Open: the window's failure rate reached its threshold.
    FailureRate,
    /// Closed → Open: the window's slow-call rate reached its threshold.
    SlowCallRate,
    /// Open → HalfOpen: a call arrived after the cooldown.
    CooldownElapsed,
    /// HalfOpen → Closed (→ Recovering with
    /// [`ramp_up`](crate::Builder::ramp_up)): every probe succeeded.
    ProbesSucceeded,
    /// HalfOpen → Open: a probe failed (or, with the slow-call policy, was slow),
    /// or was dropped unrecorded as a failure or a slow call (see
    /// [`Dropped`](crate::Dropped)).
    ProbeFailed,
    /// HalfOpen → Open: the round went `half_open_timeout` without a verdict.
    HalfOpenTimeout,
    /// → ForcedOpen: [`force_open`](crate::CircuitBreaker::force_open).
    ForcedOpen,
    /// → Disabled: [`disable`](crate::CircuitBreaker::disable).
    Disabled,
    /// → Closed: [`reset`](crate::CircuitBreaker::reset).
    Reset,
    /// Closed → Open: something outside the breaker's own policies opened it with
    /// [`open_for`](crate::CircuitBreaker::open_for) (for example a fleet view's
    /// quorum).
    External,
    /// Recovering → Closed: the ramp's duration passed without a trip (see
    /// [`ramp_up`](crate::Builder::ramp_up)).
    RampCompleted,
    /// Recovering → Open, at the next backoff level: a trip policy's condition held
    /// during the ramp. The event's `window` and `consecutive_failures` say which.
    RampFailed,
}

impl Reason {
    /// Every reason, in declaration order. Private: a public array's length would
    /// make every new reason a breaking change; [`Reason::iter`] is the public view.
    pub(crate) const ALL: [Reason; 13] = [
        Reason::ConsecutiveFailures,
        Reason::FailureRate,
        Reason::SlowCallRate,
        Reason::CooldownElapsed,
        Reason::ProbesSucceeded,
        Reason::ProbeFailed,
        Reason::HalfOpenTimeout,
        Reason::ForcedOpen,
        Reason::Disabled,
        Reason::Reset,
        Reason::External,
        Reason::RampCompleted,
        Reason::RampFailed,
    ];

    /// Every reason, in declaration order: for integrations that label a count per
    /// reason (with [`Metrics::transitions`](crate::Metrics::transitions)). A later
    /// release may yield more reasons.
    ///
    /// # Examples
    /// ```
    /// use cutout::Reason;
    ///
    /// assert!(Reason::iter().any(|r| r == Reason::HalfOpenTimeout));
    /// assert_eq!(Reason::iter().next(), Some(Reason::ConsecutiveFailures));
    /// ```
    pub fn iter() -> impl ExactSizeIterator<Item = Reason> + Clone {
        Reason::ALL.into_iter()
    }

    /// A snake_case name for logs and metric labels.
    pub const fn as_str(self) -> &'static str {
        match self {
            Reason::ConsecutiveFailures => "consecutive_failures",
            Reason::FailureRate => "failure_rate",
            Reason::SlowCallRate => "slow_call_rate",
            Reason::CooldownElapsed => "cooldown_elapsed",
            Reason::ProbesSucceeded => "probes_succeeded",
            Reason::ProbeFailed => "probe_failed",
            Reason::HalfOpenTimeout => "half_open_timeout",
            Reason::ForcedOpen => "forced_open",
            Reason::Disabled => "disabled",
            Reason::Reset => "reset",
            Reason::External => "external",
            Reason::RampCompleted => "ramp_completed",
            Reason::RampFailed => "ramp_failed",
        }
    }

    pub(crate) const fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One transition, as delivered to [`on_transition`](crate::Builder::on_transition).
///
/// # Examples
/// ```
/// use cutout::{CircuitBreaker, ManualClock, Reason, State};
/// use std::sync::{Arc, Mutex};
///
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let log = seen.clone();
/// let breaker = CircuitBreaker::builder()
///     .consecutive_failures(2)
///     .clock(ManualClock::new())
///     .on_transition(move |t| log.lock().unwrap().push((t.from, t.to, t.reason)))
///     .build()?;
/// for _ in 0..2 {
///     let _ = breaker.call(|| Err::<(), _>("down"));
/// }
/// assert_eq!(
///     *seen.lock().unwrap(),
///     [(State::Closed, State::Open, Reason::ConsecutiveFailures)]
/// );
/// # Ok::<(), cutout::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct Transition {
    /// The state before.
    pub from: State,
    /// The state after.
    pub to: State,
    /// The generation the transition started (32 bits, wrapping).
    pub generation: u32,
    /// Why.
    pub reason: Reason,
    /// When, as time since the breaker was built (millisecond ticks).
    pub at: Duration,
    /// The backoff level after the transition.
    pub level: u8,
    /// For a policy's trip ([`ConsecutiveFailures`](Reason::ConsecutiveFailures),
    /// [`FailureRate`](Reason::FailureRate), [`SlowCallRate`](Reason::SlowCallRate),
    /// [`RampFailed`](Reason::RampFailed)): the window's counts that tripped it
    /// (zero without a window); zero for every other transition.
    pub window: WindowCounts,
    /// For a policy's trip, as for [`window`](Self::window): the
    /// consecutive-failure count at the time (zero without the consecutive-failures
    /// policy); zero for every other transition.
    pub consecutive_failures: u64,
    /// For a transition to Open: its deadline (when a call may half-open it), as
    /// time since the breaker was built, like [`at`](Self::at). `None` otherwise.
    pub open_until: Option<Duration>,
    /// Whether a shadow breaker made it (see
    /// [`Builder::shadow`](crate::Builder::shadow)): it rejects nothing, so the
    /// transition says what a live breaker would have done. A what-if
    /// candidate is a shadow breaker (see
    /// [`Builder::candidate`](crate::Builder::candidate)).
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, ManualClock};
    /// use std::sync::{Arc, Mutex};
    ///
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let log = seen.clone();
    /// let breaker = CircuitBreaker::builder()
    ///     .consecutive_failures(1)
    ///     .shadow()
    ///     .clock(ManualClock::new())
    ///     .on_transition(move |t| log.lock().unwrap().push(t.shadow))
    ///     .build()?;
    /// let _ = breaker.call(|| Err::<(), _>("down"));
    /// assert_eq!(*seen.lock().unwrap(), [true]);
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub shadow: bool,
}

std::thread_local! {
    /// The combined listeners (by `id`) delivering an event on this thread, each
    /// with the events raised meanwhile that its second part has yet to take.
    static DELIVERING: std::cell::RefCell<Vec<(usize, Vec<Transition>)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// `first`, then `then`, for `t` (see `Builder::also_on_transition`), so that
/// each sees this thread's events in generation order even when one moves the
/// breaker on: an event raised during the delivery (a listener's `force_open`)
/// reaches `first` at once, as any event does, and `then` after the events
/// before it. A panic in `first` skips `then` for `t` and the events held.
///
/// `id` names the combined listener: the address of a field it holds, so that
/// two combinations sharing a `first` (builders cloned from one) hold their
/// events apart, and an event of another breaker reaches its own `then`.
pub(crate) fn deliver_both(
    id: usize,
    first: &dyn Fn(&Transition),
    then: &dyn Fn(&Transition),
    t: &Transition,
) {
    let nested = DELIVERING.try_with(|d| {
        let mut d = d.borrow_mut();
        match d.iter_mut().find(|(i, _)| *i == id) {
            Some((_, held)) => {
                held.push(*t);
                true
            }
            None => {
                d.push((id, Vec::new()));
                false
            }
        }
    });
    match nested {
        Ok(true) => return first(t),
        Ok(false) => {}
        // The thread's locals are gone (a delivery from a destructor of its
        // own as the thread exits): no holding.
        Err(_) => {
            first(t);
            return then(t);
        }
    }
    /// Takes this delivery's entry off, however it ends.
    struct Done(usize);
    impl Drop for Done {
        fn drop(&mut self) {
            let _ = DELIVERING.try_with(|d| d.borrow_mut().retain(|(i, _)| *i != self.0));
        }
    }
    let _done = Done(id);
    first(t);
    then(t);
    let take = || {
        DELIVERING.try_with(|d| {
            let mut d = d.borrow_mut();
            let held = &mut d.iter_mut().find(|(i, _)| *i == id)?.1;
            (!held.is_empty()).then(|| held.remove(0))
        })
    };
    while let Ok(Some(next)) = take() {
        then(&next);
    }
}
