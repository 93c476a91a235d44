//! A registry entry: one key's breaker, when it was last used, and the claim a
//! sweep or an eviction takes on it (see the parent module's Orderings).

use super::*;

/// The last-used value of an entry a sweep has claimed: no clock reading takes it
/// (readings are capped one below), and it is the maximum, so a lookup's
/// `fetch_max` leaves it in place and sees it.
pub(super) const EVICTED: u64 = u64::MAX;

/// The id of the overflow entry: the id counter never reaches it.
pub(super) const OVERFLOW_ID: u64 = u64::MAX;

/// One key's breaker and when it was last used.
pub(super) struct Entry<C: Clock> {
    pub(super) breaker: Arc<CircuitBreaker<C>>,
    /// Clock nanoseconds, written at most once per resolution period; [`EVICTED`]
    /// once a sweep has claimed the entry.
    pub(super) last_used: AtomicU64,
    /// Unique in the registry: tells this entry from a later one for the same key.
    pub(super) id: u64,
}

impl<C: Clock> Entry<C> {
    /// Marks the entry used at `now`. `false` if a sweep has claimed it: the
    /// caller must look the key up again.
    #[inline]
    pub(super) fn touch(&self, now: u64, resolution: u64) -> bool {
        // Relaxed: see the module's Orderings.
        let seen = self.last_used.load(Ordering::Relaxed);
        if seen == EVICTED {
            return false;
        }
        if now.saturating_sub(seen) < resolution {
            return true;
        }
        // Relaxed: as above. `fetch_max` keeps the hint from going backwards when
        // threads that read the clock at different times race here, and is the
        // read-modify-write that a sweep's claim cannot miss.
        self.last_used
            .fetch_max(now.min(EVICTED - 1), Ordering::Relaxed)
            != EVICTED
    }

    /// Whether a sweep has claimed the entry.
    #[inline]
    pub(super) fn is_claimed(&self) -> bool {
        // Relaxed: see the module's Orderings.
        self.last_used.load(Ordering::Relaxed) == EVICTED
    }
}

/// The streak of consecutive failures of `breaker` if it would otherwise behave
/// exactly like a new one: Closed, no call in flight, nothing in its window.
/// (Generation, lifetime counters and transition counts differ, but decide
/// nothing.)
fn streak_if_otherwise_new<C: Clock>(breaker: &CircuitBreaker<C>) -> Option<u64> {
    if breaker.in_flight() != 0 {
        return None;
    }
    let m = breaker.metrics();
    (m.state == State::Closed && m.window.calls == 0).then_some(m.consecutive_failures)
}

/// Whether `breaker` would behave exactly like a new one: no streak either.
pub(super) fn behaves_like_new<C: Clock>(breaker: &CircuitBreaker<C>) -> bool {
    streak_if_otherwise_new(breaker) == Some(0)
}

/// Whether an idle sweep may evict `breaker`: as a new one would behave but for
/// its streak, which no time ends (a key whose last call failed would be kept
/// for ever), forgotten after the idle period. A sweep's rule only: an eviction
/// at the key cap takes only breakers that [behave like new](behaves_like_new),
/// so that a crowd of new keys cannot wipe a real key's streak.
pub(super) fn idle_forgettable<C: Clock>(breaker: &CircuitBreaker<C>) -> bool {
    streak_if_otherwise_new(breaker).is_some()
}
