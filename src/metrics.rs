//! [`Metrics`]: a snapshot of a breaker for a scrape or a dashboard. (The state
//! word's decoded copy is `state::Snapshot`.)

use crate::State;
use crate::event::Reason;
use crate::window::WindowCounts;
use std::time::Duration;

/// A point-in-time view of a breaker, from
/// [`CircuitBreaker::metrics`](crate::CircuitBreaker::metrics).
///
/// Counters are summed over the breaker's stripes without stopping writers, so a
/// snapshot taken while calls are in flight may miss the newest of them.
///
/// `Debug` prints the transition counts as a map from [`Reason`] to count,
/// leaving out the reasons with none.
#[derive(Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct Metrics {
    /// The state.
    pub state: State,
    /// The generation (32 bits, wrapping).
    pub generation: u32,
    /// The backoff level: an Open phase at level `l` waits
    /// `open_duration * multiplier^l`; a failed half-open round reopens one level
    /// up (to the cap), and closing returns to 0.
    pub level: u8,
    /// Time since the last transition.
    pub time_in_state: Duration,
    /// As a rejection's [`retry_after`](crate::Rejected::retry_after) would say now.
    /// Open: time left in the cooldown. HalfOpen: zero while a probe slot is free,
    /// else the time left until the half-open timeout, but at most the cooldown a
    /// failed round would start; once the round has lasted the half-open timeout,
    /// free slot or not, the cooldown its reopening (by the next call) will start.
    /// Closed, Disabled and Recovering: zero. ForcedOpen: `None`.
    pub retry_after: Option<Duration>,
    /// The sliding window's counts (zero outside Closed and Recovering, or without
    /// a window). Each phase counts afresh: right after a trip they read zero, and
    /// [`tripped_by`](Self::tripped_by) keeps the figures that tripped it.
    pub window: WindowCounts,
    /// While Open after a trip by a policy: the window's counts that tripped it, as
    /// the trip's [`Transition::window`](crate::Transition::window) reported them
    /// (each saturated at `u32::MAX`). `None` in every other state, and in an Open
    /// phase that a failed half-open round or a restore began, or whose trip
    /// found the window empty; always `None` without a window.
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, State, WindowCounts};
    ///
    /// let breaker = CircuitBreaker::builder().failure_rate(0.5, 4).build()?;
    /// let _ = breaker.call(|| Ok::<_, &str>(()));
    /// for _ in 0..3 {
    ///     let _ = breaker.call(|| Err::<(), _>("boom"));
    /// }
    /// let m = breaker.metrics();
    /// assert_eq!(m.state, State::Open);
    /// assert_eq!(m.window, WindowCounts::default(), "the Open phase counts nothing");
    /// assert_eq!(m.tripped_by, Some(WindowCounts::new(4, 3, 0)));
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub tripped_by: Option<WindowCounts>,
    /// The current run of consecutive failures (zero outside Closed and
    /// Recovering, or without the consecutive-failures policy).
    pub consecutive_failures: u64,
    /// Counters since the breaker was built.
    pub lifetime: Lifetime,
    /// Transitions since the breaker was built, by reason: read with
    /// [`Metrics::transitions`]. Private, so that a new [`Reason`] changes no type.
    pub(crate) transitions: [u64; Reason::ALL.len()],
}

impl Metrics {
    /// How many transitions happened for `reason` since the breaker was built.
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, Reason};
    ///
    /// let breaker = CircuitBreaker::builder().build()?;
    /// breaker.force_open();
    /// breaker.reset();
    /// let m = breaker.metrics();
    /// assert_eq!(m.transitions(Reason::ForcedOpen), 1);
    /// assert_eq!(m.transitions(Reason::Reset), 1);
    /// assert_eq!(m.transitions(Reason::FailureRate), 0);
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn transitions(&self, reason: Reason) -> u64 {
        self.transitions[reason.index()]
    }

    /// Transitions since the breaker was built, whatever their reason.
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, Reason};
    ///
    /// let breaker = CircuitBreaker::builder().build()?;
    /// breaker.force_open();
    /// breaker.reset();
    /// let m = breaker.metrics();
    /// assert_eq!(m.total_transitions(), 2);
    /// assert_eq!(m.total_transitions(), Reason::iter().map(|r| m.transitions(r)).sum::<u64>());
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn total_transitions(&self) -> u64 {
        self.transitions.iter().sum()
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        /// The transition counts, by reason, those with none left out.
        struct Transitions<'a>(&'a Metrics);
        impl std::fmt::Debug for Transitions<'_> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                let counted = Reason::iter().map(|r| (r, self.0.transitions(r)));
                f.debug_map()
                    .entries(counted.filter(|&(_, n)| n != 0))
                    .finish()
            }
        }
        // Destructured, so that a new field cannot be left out.
        let Metrics {
            state,
            generation,
            level,
            time_in_state,
            retry_after,
            window,
            tripped_by,
            consecutive_failures,
            lifetime,
            transitions: _,
        } = self;
        f.debug_struct("Metrics")
            .field("state", state)
            .field("generation", generation)
            .field("level", level)
            .field("time_in_state", time_in_state)
            .field("retry_after", retry_after)
            .field("window", window)
            .field("tripped_by", tripped_by)
            .field("consecutive_failures", consecutive_failures)
            .field("lifetime", lifetime)
            .field("transitions", &Transitions(self))
            .finish()
    }
}

/// Counters since the breaker was built.
///
/// # One counting rule
/// Every outcome that moved a decision shows in the counter of what it counted
/// as. A permit dropped unrecorded (a timeout outside the breaker, a cancelled
/// future, a panic) counts in `dropped`, and also: in `failures` when
/// [`Builder::on_drop`](crate::Builder::on_drop) made it a failure in its own
/// phase, and in `slow` when it ran past the slow-call threshold. So a breaker
/// tripped by timed-out calls under `on_drop(Dropped::FailureAfter(..))` shows
/// those calls as failures. A dropped call that counted as nothing (ignored, or
/// stale) is in `dropped` alone.
///
/// Once every permit is finished, `admitted = successes + failures + ignored +
/// stale + dropped`, less the dropped calls counted as failures (in both).
///
/// # Cost
/// The counters are striped like the window, so counting adds no shared written
/// cache line to the call path. A breaker has room for `2 x cores` owned stripes
/// (at least 16, at most 64) and 4 shared ones, and holds those some thread has
/// written: a thread's first call to it allocates that thread's stripe (one line of
/// 128 bytes on x86-64 and aarch64; the eight counters take its first 64 bytes). A
/// thread that owns a stripe bumps a counter with a plain load and store (no locked
/// instruction); threads beyond the owned stripes spread over the shared ones with
/// an atomic add (and take an owned one when one comes free). A closed-state call
/// bumps two counters (`admitted`, then its outcome; with a window, also its live
/// bucket's call count, in the same line) and a rejection one (`rejected`), on a
/// line only the calling thread writes.
///
/// The price is memory and reads, in proportion to the threads that used the
/// breaker: one line per such thread for these counters (see
/// [`heap_bytes`](crate::CircuitBreaker::heap_bytes)), plus its ring of window
/// buckets with a window. And [`metrics`](crate::CircuitBreaker::metrics) reads
/// `8 x stripes` words for these counters, on top of `buckets x stripes` buckets for
/// the window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Lifetime {
    /// Calls let through.
    pub admitted: u64,
    /// Calls turned away.
    pub rejected: u64,
    /// Successes recorded in their own generation.
    pub successes: u64,
    /// Failures recorded in their own generation, and dropped calls counted as
    /// failures in their own generation (see [One counting rule](Lifetime#one-counting-rule)).
    pub failures: u64,
    /// Of the successes, failures and dropped calls, calls slower than the
    /// slow-call threshold.
    pub slow: u64,
    /// Outcomes classified [`Ignored`](crate::Outcome::Ignored) in their own generation.
    pub ignored: u64,
    /// Outcomes discarded because the breaker had moved to a later generation.
    pub stale: u64,
    /// Permits dropped without an outcome, whatever they counted as (see
    /// [`Dropped`](crate::Dropped)): one counted as a failure is in `failures` too;
    /// none is in `successes`, `ignored` or `stale`.
    pub dropped: u64,
    /// Calls a shadow breaker would have rejected, and ran (see
    /// [`Builder::shadow`](crate::Builder::shadow)): their outcomes count
    /// nowhere, and they are not in `admitted`. Always 0 for a breaker that is not
    /// a shadow.
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, ManualClock};
    ///
    /// let breaker = CircuitBreaker::builder().shadow().clock(ManualClock::new()).build()?;
    /// breaker.force_open();
    /// assert!(breaker.call(|| Ok::<_, ()>(())).is_ok());
    /// let lifetime = breaker.metrics().lifetime;
    /// assert_eq!((lifetime.would_reject, lifetime.rejected, lifetime.admitted), (1, 0, 0));
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub would_reject: u64,
}
