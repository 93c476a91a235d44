//! The admission guard: what a call carries from admission to its outcome.

use crate::breaker::CircuitBreaker;
use crate::clock::{Clock, DefaultClock};
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
}

/// What an admission hands the outcome, packed in one `u64` so that it (and a
/// `Result` of it) travels in registers, never through a partial store and a wide
/// reload:
///
/// ```text
///  63                          18 17  16 15          0
/// +------------------------------+------+------------+
/// | started (low 46 bits of ns)  | kind | generation |
/// +------------------------------+------+------------+
/// ```
///
/// `started` is the clock reading at admission when the slow-call policy times
/// calls (else 0). Only its low 46 bits are kept: an elapsed time is their
/// difference modulo 2^46 ns (19.5 hours), exact for any call shorter than that.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ticket(u64);

const STARTED_SHIFT: u32 = 18;
const STARTED_MASK: u64 = (1 << (64 - STARTED_SHIFT)) - 1;

impl Ticket {
    #[inline]
    pub(crate) fn new(generation: u16, kind: Kind, started: u64) -> Ticket {
        Ticket(
            (started & STARTED_MASK) << STARTED_SHIFT | (kind as u64) << 16 | u64::from(generation),
        )
    }

    #[inline]
    pub(crate) fn generation(self) -> u16 {
        self.0 as u16
    }

    #[inline]
    pub(crate) fn kind(self) -> Kind {
        match self.0 >> 16 & 3 {
            0 => Kind::Closed,
            1 => Kind::Probe,
            _ => Kind::Disabled,
        }
    }

    /// Nanoseconds from admission to `now` (a reading of the same clock), modulo
    /// 2^46 ns.
    #[inline]
    pub(crate) fn elapsed(self, now: u64) -> u64 {
        now.wrapping_sub(self.0 >> STARTED_SHIFT) & STARTED_MASK
    }
}

impl fmt::Debug for Ticket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ticket")
            .field("generation", &self.generation())
            .field("kind", &self.kind())
            .field("started", &(self.0 >> STARTED_SHIFT))
            .finish()
    }
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

    /// The ticket, without recording anything: the caller records it.
    #[inline]
    pub(crate) fn into_ticket(self) -> Ticket {
        ManuallyDrop::new(self).ticket
    }

    /// The generation this call was admitted under.
    pub fn generation(&self) -> u16 {
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

    /// The generation this call was admitted under.
    pub fn generation(&self) -> u16 {
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
    fn a_ticket_keeps_its_fields_and_times_modulo_2_pow_46() {
        for kind in [Kind::Closed, Kind::Probe, Kind::Disabled] {
            let t = Ticket::new(0xbeef, kind, 5_000);
            assert_eq!((t.generation(), t.kind()), (0xbeef, kind));
            assert_eq!(t.elapsed(7_500), 2_500);
        }
        // A start whose high bits were dropped still times a short call exactly.
        let late = (1u64 << 50) + 123;
        assert_eq!(
            Ticket::new(1, Kind::Closed, late).elapsed(late + 1_000),
            1_000
        );
        // What the packing buys: a ticket and a rejection are one word each, so an
        // admission's `Result` is that word and a tag no wider than the word's
        // alignment (16 bytes in two registers on 64-bit targets; 12 on i686,
        // where a u64 is 4-byte aligned).
        assert_eq!(size_of::<Ticket>(), size_of::<u64>());
        assert_eq!(size_of::<crate::Rejected>(), size_of::<u64>());
        assert_eq!(
            size_of::<Result<Ticket, crate::Rejected>>(),
            size_of::<u64>() + align_of::<u64>()
        );
    }
}
