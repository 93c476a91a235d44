//! Shadow mode (see [`Builder::shadow`]): a breaker that runs its state machine
//! but rejects nothing. Its would-be rejections are counted here; admission turns
//! them into calls that run on [`Ticket::SHADOW`], off the lean paths.

use super::*;

impl<C: Clock> CircuitBreaker<C> {
    /// Counts a rejection in the stripe `r`: a would-be rejection for a shadow
    /// breaker. `check_clock`: whether the count also revives a stopped clock
    /// reading (as an Open or half-open rejection's does).
    #[inline]
    pub(super) fn count_rejected(&self, r: StripeRef<'_>, check_clock: bool) {
        if self.config.shadow {
            // Relaxed: a statistic (see `Lifetime::would_reject`); it orders nothing.
            self.would_reject.fetch_add(1, Ordering::Relaxed);
        } else if check_clock {
            self.bump_and_check_clock(r, Counter::Rejected);
        } else {
            Stripes::bump(r, Counter::Rejected);
        }
    }
}
