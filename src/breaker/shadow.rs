//! Shadow mode (see [`Builder::shadow`]): a breaker that runs its state machine
//! but rejects nothing. Its would-be rejections are counted here; admission turns
//! them into calls that run on a [`Ticket::shadow`], off the lean paths.

use super::*;
use crate::candidate::Candidacy;

/// What a shadow breaker keeps, and a breaker with what-if candidates (see
/// [`Builder::candidate`]): boxed beside the breaker, and built with it.
pub(crate) struct Shadowing<C> {
    /// A shadow breaker's would-be rejections (every candidate is one).
    pub(super) would_reject: AtomicU64,
    /// This breaker's candidates, each a shadow breaker on this breaker's clock.
    pub(super) candidates: Box<[CircuitBreaker<C>]>,
    /// This breaker's books as a candidate, if it is one.
    pub(super) candidacy: Option<Candidacy>,
}

impl<C> Shadowing<C> {
    pub(super) fn new() -> Shadowing<C> {
        Shadowing {
            would_reject: AtomicU64::new(0),
            candidates: Box::new([]),
            candidacy: None,
        }
    }
}

impl<C: Clock> CircuitBreaker<C> {
    /// Counts a rejection in the stripe `r`: a would-be rejection for a shadow
    /// breaker. `check_clock`: whether the count also revives a stopped clock
    /// reading (as an Open or half-open rejection's does).
    #[inline]
    pub(super) fn count_rejected(&self, r: StripeRef<'_>, check_clock: bool) {
        if self.config.shadow {
            if let Some(shadowing) = &self.shadowing {
                // Relaxed: a statistic (see `Lifetime::would_reject`); it orders
                // nothing.
                shadowing.would_reject.fetch_add(1, Ordering::Relaxed);
            }
        } else if check_clock {
            self.bump_and_check_clock(r, Counter::Rejected);
        } else {
            Stripes::bump(r, Counter::Rejected);
        }
    }
}

impl<C> CircuitBreaker<C> {
    /// Whether this breaker is a shadow (built with [`Builder::shadow`]): it
    /// decides, but never rejects.
    ///
    /// # Examples
    /// ```
    /// use cutout::CircuitBreaker;
    ///
    /// let watching = CircuitBreaker::builder().shadow().build()?;
    /// let enforcing = CircuitBreaker::builder().build()?;
    /// assert!(watching.is_shadow() && !enforcing.is_shadow());
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn is_shadow(&self) -> bool {
        self.config.shadow
    }

    /// A shadow breaker's would-be rejections (0 for any other).
    pub(super) fn would_reject(&self) -> u64 {
        self.shadowing.as_ref().map_or(0, |shadowing| {
            // Relaxed: a statistic, summed like the striped counters.
            shadowing.would_reject.load(Ordering::Relaxed)
        })
    }
}
