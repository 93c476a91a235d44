//! What-if candidates (see [`Builder::candidate`](crate::Builder::candidate)): the
//! report [`CircuitBreaker::candidates`](crate::CircuitBreaker::candidates) gives
//! for each, and the books a candidate keeps of its opening, written on its
//! transitions only. The offering of live outcomes is in `breaker/candidates.rs`.
//!
//! # Orderings
//! Every count here is a statistic written with `Relaxed` increments: none orders
//! another access, and a report reads each on its own (see [`CandidateReport`]).

use crate::State;
use crate::sync::{AtomicU64, Ordering};
use std::borrow::Cow;
use std::time::Duration;

/// What a what-if candidate would have done with the live breaker's calls (see
/// [`Builder::candidate`](crate::Builder::candidate) for the rule it follows).
///
/// The counts are read one at a time, without a lock: a report taken while calls
/// are recorded may see one count before another of the same call, and a
/// transition's books before or after its state.
///
/// # Examples
/// ```
/// use cutout::{CircuitBreaker, ManualClock, State};
///
/// let breaker = CircuitBreaker::builder()
///     .consecutive_failures(5)
///     .clock(ManualClock::new())
///     .candidate("tight", CircuitBreaker::builder().consecutive_failures(2))
///     .build()?;
/// for _ in 0..3 {
///     let _ = breaker.call(|| Err::<(), _>("down"));
/// }
/// let tight = &breaker.candidates()[0];
/// assert_eq!((tight.name.as_str(), tight.state), ("tight", State::Open));
/// assert_eq!((tight.opened, tight.would_reject, tight.failures_spared), (1, 1, 1));
/// assert_eq!(breaker.state(), State::Closed); // the live breaker decides alone
/// # Ok::<(), cutout::ConfigError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CandidateReport {
    /// The name given to [`Builder::candidate`](crate::Builder::candidate).
    pub name: String,
    /// Its state now.
    pub state: State,
    /// How many times it opened (a trip, or a reopening after a failed probe
    /// round).
    pub opened: u64,
    /// When it opened, as time since the live breaker was built: the most recent
    /// [`OPENED_AT_KEPT`](Self::OPENED_AT_KEPT) (16) openings, oldest first.
    pub opened_at: Vec<Duration>,
    /// The time it has spent Open: its cooldowns, each up to its deadline or
    /// the transition that ended it sooner (a reset), the current one up to now.
    /// Not the time after a deadline until a live call half-opened it (it would
    /// have admitted that call), nor a half-open round.
    pub time_open: Duration,
    /// The live calls it would have rejected.
    pub would_reject: u64,
    /// Of those, the calls that failed: failures the dependency would have been
    /// spared (a dropped permit among them where the candidate's
    /// [`on_drop`](crate::Builder::on_drop) counts it as a failure).
    pub failures_spared: u64,
    /// Of those, the calls that succeeded: successes it would have turned away,
    /// the cost of its tripping.
    pub successes_turned_away: u64,
    /// The calls it did not see: those the live breaker rejected, whose outcome
    /// is unknown.
    pub unseen: u64,
}

impl CandidateReport {
    /// How many of a candidate's most recent openings
    /// [`opened_at`](Self::opened_at) keeps.
    pub const OPENED_AT_KEPT: usize = 16;
}

const OPENED_AT_KEPT: usize = CandidateReport::OPENED_AT_KEPT;

/// The books a candidate keeps beside its breaker: its name, the outcomes of the
/// calls it would have rejected, and its openings. Written off the candidate's
/// closed path: a would-be rejection, a transition.
pub(crate) struct Candidacy {
    pub(crate) name: Cow<'static, str>,
    failures_spared: AtomicU64,
    successes_turned_away: AtomicU64,
    /// Openings started, and ended (each a transition out of Open).
    opened: AtomicU64,
    closed: AtomicU64,
    /// The sums of the openings' start and end ticks (an end no later than the
    /// opening's deadline): the time spent Open is the ends less the starts,
    /// however their transitions' books interleave.
    opened_ticks: AtomicU64,
    closed_ticks: AtomicU64,
    /// The start ticks of the last `OPENED_AT_KEPT` openings, by number.
    opened_at: [AtomicU64; OPENED_AT_KEPT],
}

impl Candidacy {
    pub(crate) fn new(name: Cow<'static, str>) -> Candidacy {
        Candidacy {
            name,
            failures_spared: AtomicU64::new(0),
            successes_turned_away: AtomicU64::new(0),
            opened: AtomicU64::new(0),
            closed: AtomicU64::new(0),
            opened_ticks: AtomicU64::new(0),
            closed_ticks: AtomicU64::new(0),
            opened_at: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// Tallies the outcome of a call the candidate would have rejected: a
    /// failure spared (`Some(true)`), a success turned away (`Some(false)`), or
    /// neither (`None`).
    pub(crate) fn would_have_rejected(&self, failed: Option<bool>) {
        let count = match failed {
            Some(true) => &self.failures_spared,
            Some(false) => &self.successes_turned_away,
            None => return,
        };
        // Relaxed: a statistic; it orders nothing.
        count.fetch_add(1, Ordering::Relaxed);
    }

    /// Notes a transition at tick `at` (counted from the build): into Open, out
    /// of Open (whose deadline was tick `until`: an opening ends there at the
    /// latest, the candidate admitting the next call), or neither.
    pub(crate) fn note(&self, from: State, to: State, at: u64, until: u64) {
        // Relaxed, all: statistics (see the module's orderings).
        if from == State::Open {
            self.closed.fetch_add(1, Ordering::Relaxed);
            self.closed_ticks
                .fetch_add(at.min(until), Ordering::Relaxed);
        }
        if to == State::Open {
            let n = self.opened.fetch_add(1, Ordering::Relaxed);
            self.opened_ticks.fetch_add(at, Ordering::Relaxed);
            self.opened_at[(n % OPENED_AT_KEPT as u64) as usize].store(at, Ordering::Relaxed);
        }
    }

    /// The report's fields from these books, at tick `now` (from the build), an
    /// opening still in progress counted to `open_end` (`now`, or its deadline
    /// if that passed): `opened`, `opened_at` (in ticks), `time_open` (in
    /// ticks), the failures spared and the successes turned away.
    pub(crate) fn books(&self, now: u64, open_end: u64) -> (u64, Vec<u64>, u64, u64, u64) {
        // Relaxed, all: statistics (see `CandidateReport`).
        let opened = self.opened.load(Ordering::Relaxed);
        let closed = self.closed.load(Ordering::Relaxed);
        let kept = opened.min(OPENED_AT_KEPT as u64);
        let mut opened_at: Vec<u64> = (opened - kept..opened)
            .map(|n| self.opened_at[(n % OPENED_AT_KEPT as u64) as usize].load(Ordering::Relaxed))
            .collect();
        // Two threads' openings may note their ticks out of order (one delayed
        // between its transition and its note, through a whole cooldown).
        opened_at.sort_unstable();
        // An opening not yet closed runs to `open_end`.
        let open_now = opened.saturating_sub(closed).min(1);
        let time_open = (self.closed_ticks.load(Ordering::Relaxed))
            .wrapping_add(open_now * open_end)
            .wrapping_sub(self.opened_ticks.load(Ordering::Relaxed));
        // Read mid-transition (a count seen without its tick), it may overshoot:
        // no opening is longer than the breaker's life.
        let time_open = time_open.min(now);
        (
            opened,
            opened_at,
            time_open,
            self.failures_spared.load(Ordering::Relaxed),
            self.successes_turned_away.load(Ordering::Relaxed),
        )
    }
}

#[cfg(all(test, not(cutout_loom)))]
mod tests {
    use super::*;

    #[test]
    fn openings_noted_out_of_order_are_reported_oldest_first() {
        let books = Candidacy::new("late".into());
        books.note(State::HalfOpen, State::Open, 300, 0); // the later opening, noted first
        books.note(State::Closed, State::Open, 100, 0);
        books.note(State::Open, State::HalfOpen, 200, 250);
        let (opened, opened_at, time_open, ..) = books.books(400, 400);
        assert_eq!((opened, opened_at, time_open), (2, vec![100, 300], 200));
    }
}
