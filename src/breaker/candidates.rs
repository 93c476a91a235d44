//! What-if candidates (see [`Builder::candidate`]): each a shadow breaker on the
//! live breaker's clock, built at its origin, offered every outcome the live
//! breaker records. A breaker with candidates ([`Lean::OFFERS`]) leaves the
//! lean path with a closed success: it records it as the lean path would and
//! offers it to each candidate's lean path at the same clock reading. In
//! `call_with`, where windows are everyone's or no one's and no call is timed,
//! it does so inline up to the first candidate (`record_offering_windowed`,
//! `record_offering_quiet`): a call out of line, with its register moves, cost
//! more than a candidate's record. Elsewhere, and for the other shapes, it
//! calls `record_offering`. Its other outcomes reach `record_general` or
//! `abandon`, which offer them.

use super::*;
use crate::candidate::{Candidacy, CandidateReport};
use crate::slot;

impl<C: Clock> CircuitBreaker<C> {
    /// A candidate of this breaker, named `name`, built from `config` (a
    /// shadow's) at this breaker's origin, so that both count time from one build.
    pub(crate) fn new_candidate(
        &self,
        name: std::borrow::Cow<'static, str>,
        config: Config,
        clock: C,
        listener: Option<Listener>,
    ) -> CircuitBreaker<C> {
        debug_assert!(config.shadow, "a candidate is a shadow breaker");
        // Where this breaker times its calls, a candidate's are timed by its
        // readings: a call starts at one reading, which this breaker's own timing
        // decides (a candidate's precise one beside its cheap one changed its
        // decisions), and ends at a reading of the same kind.
        let mut config = config;
        let lean = self.hot.lean;
        if lean.has(Lean::TIMED | Lean::PRECISE) {
            config.time_calls_as(lean.has(Lean::PRECISE));
        }
        let mut candidate = Self::from_parts_at(config, clock, listener, self.origin);
        let shadowing = candidate
            .shadowing
            .get_or_insert_with(|| Box::new(Shadowing::new()));
        shadowing.candidacy = Some(Candidacy::new(name));
        candidate
    }

    /// This breaker with `candidates` (from [`new_candidate`](Self::new_candidate))
    /// attached, off the lean paths if there are any.
    pub(crate) fn with_candidates(mut self, candidates: Vec<CircuitBreaker<C>>) -> Self {
        if candidates.is_empty() {
            return self;
        }
        let shadowing = self
            .shadowing
            .get_or_insert_with(|| Box::new(Shadowing::new()));
        let any = |bits| candidates.iter().any(|c| c.hot.lean.has(bits));
        let mut offers = Lean::OFFERS;
        if any(Lean::TIMED | Lean::PRECISE) {
            offers |= Lean::OFFERS_TIMED;
        }
        if any(Lean::WINDOW) {
            offers |= Lean::OFFERS_WINDOW;
        }
        if any(Lean::PRECISE) {
            offers |= Lean::OFFERS_PRECISE;
        }
        let windowed = Lean::WINDOW | Lean::TIMED | Lean::PRECISE;
        if candidates
            .iter()
            .all(|c| c.hot.lean.0 & windowed == Lean::WINDOW)
        {
            offers |= Lean::OFFERS_WINDOWED;
        }
        shadowing.candidates = candidates.into_boxed_slice();
        self.hot.lean = Lean(self.hot.lean.0 | offers);
        self
    }

    /// This breaker's books as a candidate, if it is one.
    pub(super) fn candidacy(&self) -> Option<&Candidacy> {
        self.shadowing.as_ref()?.candidacy.as_ref()
    }

    /// Offers a live outcome this breaker records to each of its candidates
    /// (none for most breakers): `None` for a permit dropped unrecorded. Every
    /// outcome is offered, a stale one included: the call ran, and a candidate
    /// decides its own admission. Offered before this breaker records it; a
    /// candidate's listener that panics does so when the returned guard drops,
    /// at the end of the recording, so that this breaker's count and decision
    /// are never lost to it.
    #[inline]
    pub(super) fn offer(&self, ticket: Ticket, outcome: Option<Outcome>) -> Deferred {
        match &self.shadowing {
            Some(shadowing) if !shadowing.candidates.is_empty() => {
                Self::offer_to(&shadowing.candidates, ticket.started(), outcome)
            }
            _ => Deferred(None),
        }
    }

    /// [`offer`](Self::offer) to `candidates`, holding the first panic.
    #[cold]
    #[inline(never)]
    fn offer_to(candidates: &[Self], started: u64, outcome: Option<Outcome>) -> Deferred {
        let mut held = Deferred(None);
        for candidate in candidates {
            candidate.offered_holding(started, outcome, &mut held);
        }
        held
    }

    /// [`offered`](Self::offered), a panic of this candidate's listener caught
    /// and held in `held` (the first only), so that every other candidate is
    /// offered the outcome too.
    fn offered_holding(&self, started: u64, outcome: Option<Outcome>, held: &mut Deferred) {
        held.catch(|| self.offered(started, outcome));
    }

    /// After [`offer`](Self::offer), for a breaker that its candidates sent off
    /// the lean path ([`Lean::OFFERS`]): the lean path's record of a closed
    /// success, if it applies (`true`: recorded).
    #[inline]
    pub(super) fn recorded_lean_after_offer(
        &self,
        r: StripeRef<'_>,
        ticket: Ticket,
        outcome: Outcome,
    ) -> bool {
        // Not for calls timed precisely: they have no lean record (and would
        // come back here through `record_offering`).
        let lean = self.hot.lean;
        if outcome != Outcome::Success
            || ticket.kind() != Kind::Closed
            || !lean.has(Lean::OFFERS)
            || lean.has(Lean::PRECISE)
        {
            return false;
        }
        let current = self.hot.word.load();
        current == ticket.phase()
            && self.record_lean_success::<false>(r, current, ticket, Lean(lean.0 & !Lean::OFFERS))
    }

    /// The lean path's closed success of a breaker with candidates, admitted
    /// under `ticket` in the phase that is still current, by the thread that
    /// owns the stripe `o`, its streak clear: recorded as the lean path records
    /// it, then offered to each candidate at the same cheap reading (taken only
    /// if this breaker or a candidate has a window). Where the lean path's
    /// record does not apply (no cheap reading, a slow call, a window's bucket
    /// moved on), [`record_general`](Self::record_general) offers and records it
    /// as any other outcome.
    ///
    /// A leaf while each candidate takes its own lean path: what it calls
    /// otherwise, it calls last (a jump), so it saves no register. A breaker
    /// whose calls are timed precisely comes here too (one mask tests both) and
    /// goes on to `record_general`, which reads the clock.
    #[cold]
    #[inline(never)]
    pub(super) fn record_offering(&self, o: Owned<'_>, ticket: Ticket) {
        if !self.hot.lean.has(Lean::WINDOW | Lean::OFFERS_WINDOW) {
            // No window here or in a candidate: no reading, and no candidate
            // counts such a success; each only checks that it is one.
            o.bump(Counter::Successes);
            if let Some(shadowing) = &self.shadowing {
                Self::offer_quiet_to(&shadowing.candidates, ticket.started());
            }
            return;
        }
        self.record_offering_at_reading(o, ticket)
    }

    /// [`record_offering`](Self::record_offering)'s offer to `candidates`,
    /// none with a window, of a success admitted at `started`: each only checks
    /// that such a success changes nothing it keeps.
    #[inline(always)]
    fn offer_quiet_to(candidates: &[Self], started: u64) {
        let mut rest = candidates;
        while let Some((candidate, after)) = rest.split_first() {
            if candidate.quiet().is_none() {
                // No candidate reads `now` without a window.
                return Self::offer_success_to(rest, started, 0);
            }
            rest = after;
        }
    }

    /// `call_with`'s closed success of a breaker with a window and candidates
    /// that each have one, no call timed ([`Lean::INLINE_WINDOWED`]), admitted
    /// in `phase` by the thread that owns the stripe `o`, its streak clear:
    /// [`record_offering`](Self::record_offering)'s work, inline up to the
    /// first candidate's record (the others' is out of line). `false` having
    /// written nothing where the live breaker's lean record does not apply.
    /// No call is timed, so every start is 0, as `admit` gives it.
    #[inline(always)]
    pub(super) fn record_offering_windowed(&self, o: Owned<'_>, phase: Snapshot) -> bool {
        let Some(now) = self.clock.now_if_cheap() else {
            return false;
        };
        if !window::record_live_success(o, phase, now) {
            return false;
        }
        o.bump(Counter::Successes);
        let Some(shadowing) = &self.shadowing else {
            return true;
        };
        let Some((first, rest)) = shadowing.candidates.split_first() else {
            return true;
        };
        // `offered_lean` without its tests of the settings, and no closures:
        // one the compiler leaves out of line costs a call.
        let recorded = match first.quiet() {
            Some(s) => match first.hot.stripes.owned_at(slot::owned().get()) {
                Some(co) => window::record_live_success(co, s, now),
                None => false,
            },
            None => false,
        };
        match recorded {
            false => Self::offer_success_to(&shadowing.candidates, 0, now),
            true if !rest.is_empty() => Self::offer_lean_after_first(rest, now),
            true => {}
        }
        true
    }

    /// `call_with`'s closed success of a breaker with candidates, where no one
    /// has a window or times a call ([`Lean::INLINE_QUIET`]): as
    /// [`record_offering_windowed`](Self::record_offering_windowed), each
    /// candidate only checking that such a success changes nothing it keeps.
    #[inline(always)]
    pub(super) fn record_offering_quiet(&self, o: Owned<'_>) {
        o.bump(Counter::Successes);
        let Some(shadowing) = &self.shadowing else {
            return;
        };
        let Some((first, rest)) = shadowing.candidates.split_first() else {
            return;
        };
        match first.quiet() {
            None => Self::offer_success_to(&shadowing.candidates, 0, 0),
            Some(_) if !rest.is_empty() => Self::offer_quiet_after_first(rest),
            Some(_) => {}
        }
    }

    /// [`record_offering_windowed`](Self::record_offering_windowed)'s offer to
    /// the candidates after the first: out of line, so that the inline part
    /// stays one candidate long.
    #[cold]
    #[inline(never)]
    fn offer_lean_after_first(candidates: &[Self], now: u64) {
        Self::offer_lean_to(candidates, 0, now);
    }

    /// [`record_offering_quiet`](Self::record_offering_quiet)'s offer to the
    /// candidates after the first.
    #[cold]
    #[inline(never)]
    fn offer_quiet_after_first(candidates: &[Self]) {
        Self::offer_quiet_to(candidates, 0);
    }

    /// [`record_offering`](Self::record_offering) where this breaker or a
    /// candidate has a window: at one cheap reading.
    #[cold]
    #[inline(never)]
    fn record_offering_at_reading(&self, o: Owned<'_>, ticket: Ticket) {
        let Some(now) = self.clock.now_if_cheap() else {
            return self.record_general(o.stripe(), ticket, Outcome::Success);
        };
        let lean = Lean(self.hot.lean.0 & !Lean::OFFERS);
        if !self.record_lean_success_at(o, ticket.phase(), ticket, lean, now) {
            return self.record_general(o.stripe(), ticket, Outcome::Success);
        }
        if let Some(shadowing) = &self.shadowing {
            Self::offer_lean_to(&shadowing.candidates, ticket.started(), now);
        }
    }

    /// [`record_offering`](Self::record_offering)'s offer to `candidates`, one
    /// of them with a window, of a success admitted at `started`: each
    /// candidate's own lean path, if it applies. The thread's slot is read once
    /// for all of them.
    #[inline(always)]
    fn offer_lean_to(candidates: &[Self], started: u64, now: u64) {
        let slot = slot::owned().get();
        let mut rest = candidates;
        while let Some((candidate, after)) = rest.split_first() {
            if !candidate.offered_lean(started, now, slot) {
                return Self::offer_success_to(rest, started, now);
            }
            rest = after;
        }
    }

    /// [`record_offering`](Self::record_offering)'s offer to `candidates`, the
    /// first having declined its lean path. The live breaker has recorded the
    /// success: a candidate listener's panic is resumed once every candidate
    /// has been offered it.
    #[cold]
    #[inline(never)]
    fn offer_success_to(candidates: &[Self], started: u64, now: u64) {
        let mut held = Deferred(None);
        for candidate in candidates {
            if !candidate.offered_lean(started, now, slot::owned().get()) {
                candidate.offered_holding(started, Some(Outcome::Success), &mut held);
            }
        }
    }

    /// A candidate's part in a live call's success at the cheap reading `now`,
    /// if it is the common case: a closed admission with its streak clear, and
    /// (with a window) a success as the lean path records it in the live bucket
    /// of a stripe the thread owns, not slow by `now` (see `record_in`).
    /// Returns `false` having written nothing otherwise: [`offered`](Self::offered)
    /// does the rest.
    ///
    /// Without a window, such a success changes nothing a candidate keeps; with
    /// one, only its bucket. A candidate counts no closed admission, and no
    /// success here: nothing reads those counters (its report reads neither; a
    /// registry never holds a candidate).
    #[inline(always)]
    fn offered_lean(&self, started: u64, now: u64, slot: usize) -> bool {
        let Some(s) = self.quiet() else {
            return false;
        };
        let lean = self.hot.lean;
        if !lean.has(Lean::WINDOW) {
            return true;
        }
        if lean.has(Lean::TIMED | Lean::PRECISE)
            && (lean.has(Lean::PRECISE) || self.is_lean_slow(started, now))
        {
            return false;
        }
        self.hot
            .stripes
            .owned_at(slot)
            .is_some_and(|o| window::record_live_success(o, s, now))
    }

    /// This candidate's state word if a closed success would change nothing it
    /// keeps but its window's bucket: it is closed, its streak clear.
    #[inline(always)]
    fn quiet(&self) -> Option<Snapshot> {
        let s = self.hot.word.load();
        (s.is_closed() && self.phase.streak.is_empty_relaxed()).then_some(s)
    }

    /// A candidate's part in a live call: admitted or not now, by its own state,
    /// and, if admitted, its outcome recorded as if it ran from the live call's
    /// admission (`started`) to now. The outcome of a call it would have
    /// rejected counts for nothing but its tally of what rejecting it spared or
    /// cost. A closed admission is the lean path's: no clock reading (the live
    /// call's start serves), and no count of it (see `offered_lean`).
    #[inline(never)]
    fn offered(&self, started: u64, outcome: Option<Outcome>) {
        let r = self.hot.stripes.mine();
        let s = self.hot.word.load();
        if !s.is_closed() {
            return self.offered_not_closed(r, s, started, outcome);
        }
        let ticket = Ticket::new(s, started);
        // A success as the lean path records it (see `record_in`), if it applies.
        if outcome == Some(Outcome::Success)
            && self.hot.word.load() == s
            && self.record_lean_success::<false>(r, s, ticket, self.hot.lean)
        {
            return;
        }
        self.record_offered(r, ticket, outcome);
    }

    /// [`offered`](Self::offered) in any state but Closed: a shadow breaker
    /// admits every call, a would-be rejection on a shadow's ticket.
    #[cold]
    #[inline(never)]
    fn offered_not_closed(
        &self,
        r: StripeRef<'_>,
        s: Snapshot,
        started: u64,
        outcome: Option<Outcome>,
    ) {
        let Ok(ticket) = self.acquire_not_closed(r, s) else {
            return;
        };
        let ticket_then = Ticket::new(ticket.phase(), started);
        if ticket.is_shadow() {
            if let Some(candidacy) = self.candidacy() {
                candidacy.would_have_rejected(match outcome {
                    Some(Outcome::Success) => Some(false),
                    Some(Outcome::Failure) => Some(true),
                    Some(Outcome::Ignored) => None,
                    // A drop is a failure spared where this candidate's own
                    // `on_drop` makes it one, and neither otherwise.
                    None => self
                        .config
                        .on_drop
                        .is_failure(|| ticket_then.elapsed(self.age_reading()))
                        .then_some(true),
                });
            }
            return;
        }
        self.record_offered(r, ticket_then, outcome);
    }

    /// Records an offered outcome off the lean path (`None`: dropped).
    #[inline(never)]
    fn record_offered(&self, r: StripeRef<'_>, ticket: Ticket, outcome: Option<Outcome>) {
        match outcome {
            Some(outcome) => self.record_general(r, ticket, outcome),
            None => self.abandon(ticket),
        }
    }

    /// One report per candidate (see [`Builder::candidate`]), in the order they
    /// were given; empty for a breaker without candidates. Takes no lock and
    /// writes nothing; meant for a scrape or a dashboard, not for every call.
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, ManualClock, State};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let breaker = CircuitBreaker::builder()
    ///     .consecutive_failures(3)
    ///     .clock(clock.clone())
    ///     .candidate("eager", CircuitBreaker::builder().consecutive_failures(1))
    ///     .build()?;
    /// let _ = breaker.call(|| Err::<(), _>("down"));
    /// clock.advance(Duration::from_millis(400)); // within eager's 1 s cooldown
    /// let _ = breaker.call(|| Ok::<_, ()>("up again")); // eager would have refused it
    /// let [eager] = &breaker.candidates()[..] else { unreachable!() };
    /// assert_eq!(eager.opened_at, [Duration::ZERO]);
    /// assert_eq!((eager.would_reject, eager.successes_turned_away), (1, 1));
    /// assert_eq!(eager.time_open, Duration::from_millis(400));
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn candidates(&self) -> Vec<CandidateReport> {
        let Some(shadowing) = &self.shadowing else {
            return Vec::new();
        };
        let unseen = self.hot.stripes.total(Counter::Rejected);
        shadowing
            .candidates
            .iter()
            .filter_map(|c| c.candidate_report(unseen))
            .collect()
    }

    /// Calls `f` with each candidate and its report, in the order they were
    /// given (see [`candidates`](Self::candidates)).
    #[cfg(feature = "metrics")]
    pub(crate) fn for_each_candidate(&self, mut f: impl FnMut(&Self, CandidateReport)) {
        let Some(shadowing) = &self.shadowing else {
            return;
        };
        let unseen = self.hot.stripes.total(Counter::Rejected);
        for c in &shadowing.candidates {
            if let Some(report) = c.candidate_report(unseen) {
                f(c, report);
            }
        }
    }

    /// This candidate's report; `unseen`: its live breaker's rejections.
    fn candidate_report(&self, unseen: u64) -> Option<CandidateReport> {
        let candidacy = self.candidacy()?;
        let ticks = self.ticks();
        let s = self.hot.word.load();
        // An opening in progress counts up to its deadline.
        let open_end = match s.is(State::Open) {
            true => self.peek_ticks(s, ticks).min(ticks),
            false => ticks,
        };
        let (opened, opened_at, time_open, spared, turned_away) = candidacy.books(
            ticks.saturating_sub(self.bias),
            open_end.saturating_sub(self.bias),
        );
        Some(CandidateReport {
            name: candidacy.name.to_string(),
            state: self.state(),
            opened,
            opened_at: opened_at.into_iter().map(ticks_to_duration).collect(),
            time_open: ticks_to_duration(time_open),
            would_reject: self.would_reject(),
            failures_spared: spared,
            successes_turned_away: turned_away,
            unseen,
        })
    }
}

/// A panic held for later (a candidate's listener's, resumed at the end of the
/// live breaker's recording; an observer's, once the listener has its event):
/// resumed when this drops, unless the thread is already unwinding (a listener
/// of the live breaker's own panicked too), where it is dropped.
#[derive(Default)]
pub(super) struct Deferred(Option<Box<dyn std::any::Any + Send>>);

impl Deferred {
    /// Runs `f`, holding its panic if it panics (the first held only).
    pub(super) fn catch(&mut self, f: impl FnOnce()) {
        // `AssertUnwindSafe`: what `f` reads is the breaker's atomics and an
        // event, which a panic cannot leave half-written.
        if let Err(panic) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
            self.0.get_or_insert(panic);
        }
    }
}

impl Drop for Deferred {
    fn drop(&mut self) {
        // Nested, not a let chain: the crate builds with Rust 1.87.
        if let Some(panic) = self.0.take() {
            if !std::thread::panicking() {
                std::panic::resume_unwind(panic);
            }
        }
    }
}
