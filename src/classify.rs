//! Classifiers: what a call's result means to the breaker ([`Classify`]), and the
//! default one ([`ErrIsFailure`]).

use crate::permit::Outcome;

/// Says what a call's result means to the breaker.
///
/// Implemented by every `Fn(&Result<T, E>) -> Outcome` and by [`ErrIsFailure`], the
/// default of [`CircuitBreaker::call_async`](crate::CircuitBreaker::call_async) and
/// of the tower layer (the `tower` feature), where a classifier can make a `503`
/// response a failure and a `404` a success.
///
/// # Examples
/// ```
/// use cutout::{Classify, Outcome};
///
/// let by_status = |r: &Result<u16, std::io::Error>| match r {
///     Ok(status) if *status >= 500 => Outcome::Failure,
///     Ok(_) => Outcome::Success, // a 404 says the dependency is up
///     Err(_) => Outcome::Failure,
/// };
/// assert_eq!(by_status.classify(&Ok(503)), Outcome::Failure);
/// assert_eq!(by_status.classify(&Ok(404)), Outcome::Success);
/// ```
pub trait Classify<T, E> {
    /// The outcome of `result`.
    fn classify(&self, result: &Result<T, E>) -> Outcome;
}

impl<T, E, F: Fn(&Result<T, E>) -> Outcome> Classify<T, E> for F {
    #[inline]
    fn classify(&self, result: &Result<T, E>) -> Outcome {
        self(result)
    }
}

/// The default classifier: `Ok` is a success, `Err` a failure (as [`Outcome::of`]).
///
/// Zero-sized, so a future or a service that holds it holds nothing for it, and
/// calling it is inlined wherever the future is polled (a function pointer as the
/// default would be an indirect call in every poll that is not inlined).
///
/// # Examples
/// ```
/// use cutout::{Classify, ErrIsFailure, Outcome};
///
/// assert_eq!(ErrIsFailure.classify(&Ok::<_, ()>(200)), Outcome::Success);
/// assert_eq!(ErrIsFailure.classify(&Err::<u16, _>("reset")), Outcome::Failure);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ErrIsFailure;

impl<T, E> Classify<T, E> for ErrIsFailure {
    #[inline]
    fn classify(&self, result: &Result<T, E>) -> Outcome {
        Outcome::of(result)
    }
}
