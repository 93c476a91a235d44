//! The admission guard: what a call carries from admission to its outcome.

use crate::breaker::CircuitBreaker;
use crate::clock::{Clock, DefaultClock};
use crate::state::{Generation, Snapshot, State};
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
    Closed = 0,
    Probe = 1,
    Disabled = 2,
    /// A call admitted by a recovering breaker's ramp.
    Ramp = 3,
}

/// What an admission hands the outcome: the state word the call was admitted
/// under (its phase: every transition moves the generation on, so a phase has one
/// word, and the call's kind follows from its state) and, when the slow-call policy
/// or `on_drop` times calls, the clock reading at admission, else 0. Two words,
/// both already in registers on the lean path: nothing to extract or pack.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ticket {
    phase: Snapshot,
    started: u64,
}

impl Ticket {
    /// The ticket of a call a shadow breaker would have rejected and runs all
    /// the same, admitted at `started`: its phase is a word no breaker holds, so
    /// its outcome reads as another phase's, and counts nowhere (see
    /// `Builder::shadow`).
    pub(crate) fn shadow(started: u64) -> Ticket {
        Ticket {
            phase: Snapshot::SHADOW,
            started,
        }
    }

    /// Whether this is a [`Ticket::shadow`].
    #[inline]
    pub(crate) fn is_shadow(self) -> bool {
        self.phase == Snapshot::SHADOW
    }

    #[inline]
    pub(crate) fn new(phase: Snapshot, started: u64) -> Ticket {
        Ticket { phase, started }
    }

    /// The clock reading at admission, if the breaker times calls; else 0.
    #[inline]
    pub(crate) fn started(self) -> u64 {
        self.started
    }

    /// The state word the call was admitted under.
    #[inline]
    pub(crate) fn phase(self) -> Snapshot {
        self.phase
    }

    #[inline]
    pub(crate) fn generation(self) -> Generation {
        self.phase.generation()
    }

    /// What the call is: a closed phase's call, a half-open probe, a recovering
    /// breaker's call, or a disabled breaker's call (the only states that admit).
    #[inline]
    pub(crate) fn kind(self) -> Kind {
        match self.phase.state() {
            State::Closed => Kind::Closed,
            State::HalfOpen => Kind::Probe,
            State::Recovering => Kind::Ramp,
            _ => Kind::Disabled,
        }
    }

    /// Nanoseconds from admission to `now` (a reading of the same clock; 0 if it
    /// reads earlier).
    #[inline]
    pub(crate) fn elapsed(self, now: u64) -> u64 {
        now.saturating_sub(self.started)
    }
}

impl fmt::Debug for Ticket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ticket")
            .field("phase", &self.phase)
            .field("started", &self.started)
            .finish()
    }
}

/// Permission to make one call, from [`CircuitBreaker::try_acquire`].
///
/// Record the outcome with [`success`](Permit::success),
/// [`failure`](Permit::failure), [`ignore`](Permit::ignore) or
/// [`record`](Permit::record). Dropping it unrecorded (an early return, a panic, a
/// cancelled future) counts as ignored and gives a half-open slot back, unless the
/// call ran past the slow-call threshold (then it is a slow call) or
/// [`Builder::on_drop`](crate::Builder::on_drop) makes it a failure. An outcome
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
    // Always inlined: see `CircuitBreaker::try_acquire`.
    #[inline(always)]
    pub fn record(self, outcome: Outcome) {
        let this = ManuallyDrop::new(self);
        this.breaker.record(this.ticket, outcome);
    }

    /// The ticket, without recording anything: the caller records it.
    #[inline]
    pub(crate) fn into_ticket(self) -> Ticket {
        ManuallyDrop::new(self).ticket
    }

    /// The generation this call was admitted under (32 bits, wrapping).
    pub fn generation(&self) -> u32 {
        self.ticket.generation()
    }

    /// Whether this call is a half-open probe.
    pub fn is_probe(&self) -> bool {
        self.ticket.kind() == Kind::Probe
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

    /// The generation this call was admitted under (32 bits, wrapping).
    pub fn generation(&self) -> u32 {
        self.ticket.map_or(0, Ticket::generation)
    }

    /// Whether this call is a half-open probe.
    pub fn is_probe(&self) -> bool {
        self.ticket.is_some_and(|t| t.kind() == Kind::Probe)
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

#[cfg(all(test, not(cutout_loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_ticket_keeps_its_phase_and_times_any_call() {
        for (state, kind) in [
            (State::Closed, Kind::Closed),
            (State::HalfOpen, Kind::Probe),
            (State::Disabled, Kind::Disabled),
            (State::Recovering, Kind::Ramp),
        ] {
            let phase = Snapshot::starting(state, 3);
            let t = Ticket::new(phase, 5_000);
            assert_eq!((t.phase(), t.kind(), t.generation()), (phase, kind, 0));
            assert_eq!(t.elapsed(7_500), 2_500);
            assert_eq!(t.elapsed(4_000), 0, "a reading before admission is 0");
        }
        let long = Ticket::new(Snapshot::INITIAL, 3);
        assert_eq!(long.elapsed(u64::MAX), u64::MAX - 3, "no modulus");
        // Two words (the lean path builds it from two registers); a rejection is
        // one word.
        assert_eq!(size_of::<Ticket>(), 2 * size_of::<u64>());
        assert_eq!(size_of::<crate::Rejected>(), size_of::<u64>());
    }
}
