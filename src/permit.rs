//! The admission guard: what a call carries from admission to its outcome.

use crate::breaker::CircuitBreaker;
use crate::clock::{Clock, DefaultClock};
use crate::stripe::StripeRef;
use std::fmt;
use std::mem::ManuallyDrop;
use std::sync::Arc;

/// What a call's result means to the breaker.
///
/// # Examples
/// ```
/// use cutout::Outcome;
///
/// assert_eq!(Outcome::of(&Ok::<_, ()>(1)), Outcome::Success);
/// assert_eq!(Outcome::of(&Err::<(), _>("boom")), Outcome::Failure);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The dependency did its job.
    Success,
    /// The dependency failed; counts towards tripping.
    Failure,
    /// Neither (a 404, the caller's own cancellation): not counted, the consecutive
    /// failure count is left as it is, and a half-open slot is given back.
    Ignored,
}

impl Outcome {
    /// The default classifier: `Ok` is a success, `Err` a failure.
    pub fn of<T, E>(result: &Result<T, E>) -> Outcome {
        if result.is_ok() {
            Outcome::Success
        } else {
            Outcome::Failure
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Closed,
    Probe,
    Disabled,
}

/// What an admission hands the outcome: the generation it was admitted under, as
/// what, and when (for the slow-call policy; 0 when calls are not timed).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ticket {
    pub(crate) generation: u16,
    pub(crate) kind: Kind,
    pub(crate) started: u64,
}

/// Permission to make one call, from [`CircuitBreaker::try_acquire`].
///
/// Record the outcome with [`success`](Permit::success),
/// [`failure`](Permit::failure), [`ignore`](Permit::ignore) or
/// [`record`](Permit::record). Dropping it unrecorded (an early return, a panic, a
/// cancelled future) counts as ignored and gives a half-open slot back. An outcome
/// recorded after the breaker has moved to another phase is discarded and counted
/// as stale.
///
/// # Examples
/// ```
/// use cutout::CircuitBreaker;
///
/// let breaker = CircuitBreaker::builder().build()?;
/// let permit = breaker.try_acquire()?;
/// match std::fs::metadata("/") {
///     Ok(_) => permit.success(),
///     Err(_) => permit.failure(),
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "dropping a permit records the call as ignored"]
pub struct Permit<'a, C: Clock = DefaultClock> {
    breaker: &'a CircuitBreaker<C>,
    ticket: Ticket,
}

impl<'a, C: Clock> Permit<'a, C> {
    pub(crate) fn new(breaker: &'a CircuitBreaker<C>, ticket: Ticket) -> Self {
        Permit { breaker, ticket }
    }

    /// The call succeeded.
    #[inline]
    pub fn success(self) {
        self.record(Outcome::Success);
    }

    /// The call failed.
    #[inline]
    pub fn failure(self) {
        self.record(Outcome::Failure);
    }

    /// The call's result says nothing about the dependency.
    #[inline]
    pub fn ignore(self) {
        self.record(Outcome::Ignored);
    }

    /// Records `outcome`.
    #[inline]
    pub fn record(self, outcome: Outcome) {
        let this = ManuallyDrop::new(self);
        this.breaker.record(this.ticket, outcome);
    }

    /// Records `outcome`, counting in the calling thread's stripe `r`.
    #[inline]
    pub(crate) fn record_in(self, r: StripeRef<'_>, outcome: Outcome) {
        let this = ManuallyDrop::new(self);
        this.breaker.record_in(r, this.ticket, outcome);
    }

    /// The generation this call was admitted under.
    pub fn generation(&self) -> u16 {
        self.ticket.generation
    }

    /// Whether this call is a half-open probe.
    pub fn is_probe(&self) -> bool {
        self.ticket.kind == Kind::Probe
    }
}

impl<C: Clock> Drop for Permit<'_, C> {
    fn drop(&mut self) {
        self.breaker.abandon(self.ticket);
    }
}

impl<C: Clock> fmt::Debug for Permit<'_, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("ticket", &self.ticket)
            .finish()
    }
}

/// A [`Permit`] that owns an `Arc` of its breaker, from
/// [`CircuitBreaker::try_acquire_owned`]: it can move into a `'static` future or
/// another thread. It behaves exactly like [`Permit`].
#[must_use = "dropping a permit records the call as ignored"]
pub struct OwnedPermit<C: Clock = DefaultClock> {
    breaker: Arc<CircuitBreaker<C>>,
    /// `None` once recorded.
    ticket: Option<Ticket>,
}

impl<C: Clock> OwnedPermit<C> {
    pub(crate) fn new(breaker: Arc<CircuitBreaker<C>>, ticket: Ticket) -> Self {
        OwnedPermit {
            breaker,
            ticket: Some(ticket),
        }
    }

    /// The call succeeded.
    pub fn success(self) {
        self.record(Outcome::Success);
    }

    /// The call failed.
    pub fn failure(self) {
        self.record(Outcome::Failure);
    }

    /// The call's result says nothing about the dependency.
    pub fn ignore(self) {
        self.record(Outcome::Ignored);
    }

    /// Records `outcome`.
    pub fn record(mut self, outcome: Outcome) {
        if let Some(ticket) = self.ticket.take() {
            self.breaker.record(ticket, outcome);
        }
    }

    /// The generation this call was admitted under.
    pub fn generation(&self) -> u16 {
        self.ticket.map_or(0, |t| t.generation)
    }

    /// Whether this call is a half-open probe.
    pub fn is_probe(&self) -> bool {
        self.ticket.is_some_and(|t| t.kind == Kind::Probe)
    }
}

impl<C: Clock> Drop for OwnedPermit<C> {
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket.take() {
            self.breaker.abandon(ticket);
        }
    }
}

impl<C: Clock> fmt::Debug for OwnedPermit<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedPermit")
            .field("ticket", &self.ticket)
            .finish()
    }
}
