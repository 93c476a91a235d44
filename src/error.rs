//! What can go wrong: a call rejected by the breaker, a call that failed, and a bad
//! configuration.

use crate::State;
use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

/// A call the breaker did not let through.
///
/// It says why ([`state`](Rejected::state)) and when to try again
/// ([`retry_after`](Rejected::retry_after)), which is what an HTTP server needs for a
/// `503` with a `Retry-After` header.
///
/// # Examples
/// ```
/// use cutout::{CircuitBreaker, State};
///
/// let breaker = CircuitBreaker::builder().build()?;
/// breaker.force_open();
/// let rejected = breaker.try_acquire().unwrap_err();
/// assert_eq!(rejected.state(), State::ForcedOpen);
/// assert_eq!(rejected.retry_after(), None); // open until someone resets it
/// # Ok::<(), cutout::ConfigError>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Rejected {
    /// The state's code (3 bits) and the retry time in milliseconds (the breaker's
    /// tick) above it, or [`Rejected::NEVER`]: one word, so a `Result` of a permit
    /// or a rejection travels in registers.
    packed: u64,
}

impl Rejected {
    const STATE_BITS: u32 = 3;
    const NEVER: u64 = u64::MAX >> Rejected::STATE_BITS;

    /// A rejection by `state`, which admits a call in `ms` milliseconds.
    #[inline]
    pub(crate) fn after_ms(state: State, ms: u64) -> Rejected {
        Rejected {
            packed: ms.min(Rejected::NEVER - 1) << Rejected::STATE_BITS | state.code(),
        }
    }

    /// A rejection with no scheduled end (forced open).
    pub(crate) fn until_reset(state: State) -> Rejected {
        Rejected {
            packed: Rejected::NEVER << Rejected::STATE_BITS | state.code(),
        }
    }

    /// The state that rejected the call: `Open`, `HalfOpen` (every probe slot is
    /// taken), `ForcedOpen`, or `Recovering` (the ramp's share of calls turned it
    /// away: see [`Builder::ramp_up`](crate::Builder::ramp_up)).
    pub fn state(&self) -> State {
        State::from_code(self.packed & ((1 << Rejected::STATE_BITS) - 1))
    }

    /// How long until a call can be admitted.
    ///
    /// - `Open`: the time left in the cooldown; after it the next call is a probe.
    /// - `HalfOpen` (every probe slot taken): the time left until the half-open
    ///   timeout ends the round, but at most the cooldown a failed round would
    ///   start. The probes usually report within a call's time; if they fail, the
    ///   breaker admits its next probe after that cooldown.
    /// - `ForcedOpen`: `None`, since only [`reset`](crate::CircuitBreaker::reset) ends it.
    /// - `Recovering`: zero. The breaker sheds a share of the calls during its ramp;
    ///   the next call is admitted with the ramp's current share.
    ///
    /// One exception, in every state: a tower service whose `poll_ready` the
    /// breaker answered with a rejection rejects the `call` that follows, since
    /// the inner service was not made ready for it. If the breaker has stopped
    /// rejecting in between (its cooldown over, a reset, `disable`), that rejection
    /// carries the state that answered and zero: retry at once. So a `ForcedOpen`
    /// rejection can say zero too, once the breaker is no longer forced open.
    pub fn retry_after(&self) -> Option<Duration> {
        let ms = self.packed >> Rejected::STATE_BITS;
        (ms != Rejected::NEVER).then(|| Duration::from_millis(ms))
    }

    /// [`retry_after`](Self::retry_after) in whole seconds, as an HTTP
    /// `Retry-After` header carries it: rounded up, so that no client comes back
    /// early, and at least 1, so that none is told `0` (a ramp's shed, or a
    /// rejection with nothing left to wait, is no invitation to retry at once).
    /// `None` where only a reset ends the rejections.
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, ManualClock};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let breaker = CircuitBreaker::builder()
    ///     .consecutive_failures(1)
    ///     .open_duration(Duration::from_secs(10))
    ///     .clock(clock.clone())
    ///     .build()?;
    /// let _ = breaker.call(|| Err::<(), _>("down"));
    /// clock.advance(Duration::from_millis(7_500));
    /// let rejected = breaker.try_acquire().unwrap_err();
    /// assert_eq!(rejected.retry_after(), Some(Duration::from_millis(2_500)));
    /// assert_eq!(rejected.retry_after_secs(), Some(3));
    /// breaker.force_open();
    /// assert_eq!(breaker.try_acquire().unwrap_err().retry_after_secs(), None);
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn retry_after_secs(&self) -> Option<u64> {
        self.retry_after()
            .map(|after| (after.as_secs() + u64::from(after.subsec_nanos() > 0)).max(1))
    }
}

impl fmt::Debug for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rejected")
            .field("state", &self.state())
            .field("retry_after", &self.retry_after())
            .finish()
    }
}

impl fmt::Display for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "circuit breaker is {}", self.state())?;
        match self.retry_after() {
            Some(after) => write!(f, "; retry after {after:?}"),
            None => f.write_str("; closed only by a manual reset"),
        }
    }
}

impl std::error::Error for Rejected {}

/// The error of [`CircuitBreaker::call`](crate::CircuitBreaker::call): the breaker
/// rejected the call, or the call ran and returned its own error.
///
/// # Examples
/// ```
/// use cutout::{CircuitBreaker, Error};
///
/// let breaker = CircuitBreaker::builder().build()?;
/// match breaker.call(|| Err::<(), _>("refused")) {
///     Err(Error::Inner(e)) => assert_eq!(e, "refused"),
///     Err(Error::Rejected(r)) => panic!("a closed breaker rejected: {r}"),
///     Ok(()) => unreachable!(),
/// }
/// # Ok::<(), cutout::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error<E> {
    /// The breaker did not run the call.
    Rejected(Rejected),
    /// The call ran and returned this error.
    Inner(E),
}

impl<E> Error<E> {
    /// Whether the breaker rejected the call.
    pub fn is_rejected(&self) -> bool {
        matches!(self, Error::Rejected(_))
    }

    /// The call's own error, if it ran.
    pub fn into_inner(self) -> Option<E> {
        match self {
            Error::Inner(e) => Some(e),
            Error::Rejected(_) => None,
        }
    }

    /// The rejection, if the breaker did not run the call.
    pub fn rejected(&self) -> Option<&Rejected> {
        match self {
            Error::Rejected(r) => Some(r),
            Error::Inner(_) => None,
        }
    }
}

impl<E> From<Rejected> for Error<E> {
    fn from(r: Rejected) -> Self {
        Error::Rejected(r)
    }
}

/// Says what happened at this layer only, as the API guidelines ask: a rejection
/// prints the [`Rejected`] message, and a failed call prints "the call through the
/// breaker failed", leaving the call's own error to [`source`](std::error::Error::source),
/// so an error reporter that walks the chain prints each message once.
///
/// # Examples
/// ```
/// use std::error::Error as _;
///
/// let breaker = cutout::CircuitBreaker::builder().build()?;
/// let err = breaker
///     .call(|| Err::<(), _>(std::io::Error::other("connection refused")))
///     .unwrap_err();
/// assert_eq!(err.to_string(), "the call through the breaker failed");
/// assert_eq!(err.source().unwrap().to_string(), "connection refused");
/// # Ok::<(), cutout::ConfigError>(())
/// ```
impl<E> fmt::Display for Error<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Rejected(r) => r.fmt(f),
            Error::Inner(_) => f.write_str("the call through the breaker failed"),
        }
    }
}

/// [`source`](std::error::Error::source) is the call's own error for
/// [`Error::Inner`], and `None` for a rejection (its message says it all).
impl<E: std::error::Error + 'static> std::error::Error for Error<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Rejected(_) => None,
            Error::Inner(e) => Some(e),
        }
    }
}

/// A configuration the builder refused, naming the field and why.
///
/// # Examples
/// ```
/// use cutout::CircuitBreaker;
///
/// let err = CircuitBreaker::builder().half_open_probes(0).build().unwrap_err();
/// assert_eq!(err.field(), "half_open_probes");
/// assert_eq!(err.to_string(), "invalid `half_open_probes`: must be at least 1");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    field: &'static str,
    reason: Cow<'static, str>,
}

impl ConfigError {
    pub(crate) fn new(field: &'static str, reason: impl Into<Cow<'static, str>>) -> ConfigError {
        ConfigError {
            field,
            reason: reason.into(),
        }
    }

    /// The builder method whose value was refused, e.g. `"failure_rate"`.
    pub fn field(&self) -> &'static str {
        self.field
    }

    /// Why it was refused.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid `{}`: {}", self.field, self.reason)
    }
}

impl std::error::Error for ConfigError {}

#[cfg(all(test, not(cutout_loom)))]
mod tests {
    use super::*;

    #[test]
    fn rejection_message_says_state_and_when() {
        let r = Rejected::after_ms(State::Open, 250);
        assert_eq!(r.to_string(), "circuit breaker is open; retry after 250ms");
        let e: Error<std::io::Error> = r.into();
        assert!(e.is_rejected());
        assert_eq!(
            e.to_string(),
            r.to_string(),
            "a rejection is this layer's own"
        );
        assert!(std::error::Error::source(&e).is_none());
        assert_eq!(e.rejected(), Some(&r));
    }

    #[test]
    fn a_forced_rejection_has_no_retry_time() {
        let r = Rejected::until_reset(State::ForcedOpen);
        assert_eq!(r.retry_after(), None);
        assert_eq!(
            r.to_string(),
            "circuit breaker is forced_open; closed only by a manual reset"
        );
        assert_eq!(std::mem::size_of::<Rejected>(), 8);
    }

    #[test]
    fn inner_error_is_returned_unchanged() {
        let e = Error::Inner("boom");
        assert!(!e.is_rejected());
        assert_eq!(e.into_inner(), Some("boom"));
    }

    #[test]
    fn an_inner_error_is_printed_once_by_a_chain_walker() {
        let e: Error<std::io::Error> = Error::Inner(std::io::Error::other("refused"));
        assert_eq!(e.to_string(), "the call through the breaker failed");
        let mut chain = vec![e.to_string()];
        let mut next = std::error::Error::source(&e);
        while let Some(cause) = next {
            chain.push(cause.to_string());
            next = cause.source();
        }
        assert_eq!(chain, ["the call through the breaker failed", "refused"]);
    }
}
