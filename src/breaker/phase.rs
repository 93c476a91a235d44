//! The data of one phase beside the state word: the half-open round's probe
//! slots and verdict, and the closed phase's consecutive-failure streak (with the
//! mark of a rate check due on the next success), each a [`TaggedWord`] updated
//! through its one helper; and the reopening that a failed round makes.

use super::*;

/// The streak word's top bit: a failed or slow call found the window below
/// `minimum_calls` with a rate that would stand at its threshold at
/// `minimum_calls` calls, so the success that brings the window up to
/// `minimum_calls` may trip it, and must check the rates (see `record_closed`).
/// Set, it also keeps successes off the lean path, which only a streak word
/// whose data is 0 lets through; so the check costs the lean path nothing.
pub(super) const CHECK_DUE: u32 = 1 << 31;

/// The streak word's other 31 bits: the streak, which saturates there. The
/// largest `consecutive_failures` a builder takes.
pub(crate) const STREAK_MAX: u32 = CHECK_DUE - 1;

/// What [`CircuitBreaker::take_probe`] found.
pub(super) enum Probe {
    Taken,
    Full,
    /// The state word moved on; look again.
    Retry(Snapshot),
}

impl<C: Clock> CircuitBreaker<C> {
    /// Takes one of the half-open round's slots for generation `s`.
    pub(super) fn take_probe(&self, s: Snapshot) -> Probe {
        let generation = s.generation();
        let probes = self.config.half_open_probes;
        let update = self.phase.round.update(generation, &self.hot.word, |data| {
            let round = Round::from_data(data);
            (round.issued < probes).then(|| {
                Round {
                    issued: round.issued + 1,
                    ..round
                }
                .data()
            })
        });
        match update {
            TagUpdate::Stale(cur) => Probe::Retry(cur),
            // Taken, or full; either way the answer stands only if the round is
            // still the current phase. A slot taken in a round that is over dies
            // with it; a full round that ended since `s` was read (its last probe
            // closed or reopened the breaker) must not turn the caller away.
            TagUpdate::Updated { .. } | TagUpdate::Declined(_) => {
                let cur = self.hot.word.load();
                // The whole word: a word of the same generation a whole cycle on
                // (the cycles differ) is another round's, whose slot this thread
                // took by the generation's tag: given back.
                match (cur == s, update) {
                    (true, TagUpdate::Updated { .. }) => Probe::Taken,
                    (true, _) => Probe::Full,
                    (false, TagUpdate::Updated { .. }) if cur.generation() == generation => {
                        self.release_probe(generation);
                        Probe::Retry(cur)
                    }
                    (false, _) => Probe::Retry(cur),
                }
            }
        }
    }

    /// Gives a probe slot of `generation`'s round back (an ignored or dropped probe).
    pub(super) fn release_probe(&self, generation: Generation) {
        let _ = self.phase.round.update(generation, &self.hot.word, |data| {
            let round = Round::from_data(data);
            (round.issued > 0).then(|| {
                Round {
                    issued: round.issued - 1,
                    ..round
                }
                .data()
            })
        });
    }

    /// Adds a failure to `generation`'s streak and returns the new length (0 if the
    /// breaker has moved past `generation`: a stale failure must not touch a later
    /// phase's streak). Saturates at [`STREAK_MAX`]; leaves [`CHECK_DUE`] as it is.
    pub(super) fn bump_streak(&self, generation: Generation) -> u64 {
        // Below `STREAK_MAX` an increment never carries into `CHECK_DUE`.
        match self.phase.streak.update(generation, &self.hot.word, |n| {
            Some(if n & STREAK_MAX == STREAK_MAX {
                n
            } else {
                n + 1
            })
        }) {
            TagUpdate::Updated { new, .. } => u64::from(new & STREAK_MAX),
            TagUpdate::Declined(_) | TagUpdate::Stale(_) => 0,
        }
    }

    /// Ends `generation`'s streak, as a success does: empties the streak word if it
    /// holds this generation's streak, or one left by an earlier phase (which reads
    /// as 0 for this one already; emptying it keeps the next successes on the lean
    /// path), but for [`CHECK_DUE`]. A later phase's streak is left alone, and an
    /// empty word is not written. Returns whether this success must check the
    /// rates: `generation`'s word holds `CHECK_DUE`.
    pub(super) fn clear_streak(&self, generation: Generation) -> bool {
        match self
            .phase
            .streak
            .update(generation, &self.hot.word, |n| Some(n & CHECK_DUE))
        {
            TagUpdate::Updated { new, .. } => new & CHECK_DUE != 0,
            TagUpdate::Declined(_) | TagUpdate::Stale(_) => false,
        }
    }

    /// Sets [`CHECK_DUE`] in `generation`'s streak word if `due`, else clears it
    /// (writing only a change, and nothing once the breaker has moved on).
    pub(super) fn mark_check_due(&self, generation: Generation, due: bool) {
        let _ = self.phase.streak.update(generation, &self.hot.word, |n| {
            let marked = match due {
                true => n | CHECK_DUE,
                false => n & !CHECK_DUE,
            };
            (marked != n).then_some(marked)
        });
    }

    /// The length of `generation`'s streak (0 if the word is another phase's).
    pub(super) fn streak_of(&self, generation: Generation) -> u32 {
        self.phase.streak.data_for(generation) & STREAK_MAX
    }

    pub(super) fn probe_succeeded(&self, s: Snapshot) {
        let generation = s.generation();
        let update = self.phase.round.update(generation, &self.hot.word, |data| {
            let round = Round::from_data(data);
            // A probe's round holds its slot; without one the round is not its own.
            (round.issued > 0).then(|| {
                Round {
                    succeeded: round.succeeded + 1,
                    ..round
                }
                .data()
            })
        });
        let TagUpdate::Updated { new, .. } = update else {
            return; // the round is over; this success is stale
        };
        if policy::round_closes(&self.config, Round::from_data(new).succeeded) {
            let _ = self.recover(s, self.ticks());
        }
    }

    /// Keeps the window's counts `c` that tripped the breaker, if `update` moved it
    /// to Open, for [`metrics`](Self::metrics) to show while that phase lasts: each
    /// count (saturated at `u32::MAX`) in a word tagged with the Open phase's
    /// generation, written only while that phase is current, so a trip's thread
    /// that finds it over writes nothing. The calls come last: a reader that sees
    /// them sees the other two (see [`tripped_by`](Self::tripped_by)). Every move
    /// to Open first keeps zeros ([`transition`](Self::transition)), so counts
    /// a whole generation cycle old never show. Nothing without a window.
    #[cold]
    pub(super) fn keep_tripped_by(&self, update: Update, c: WindowCounts) {
        let (Update::Moved { to, .. }, Some(_)) = (update, &self.window) else {
            return;
        };
        let [calls, failures, slow] = &self.phase.tripped;
        for (word, n) in [(slow, c.slow), (failures, c.failures), (calls, c.calls)] {
            let n = u32::try_from(n).unwrap_or(u32::MAX);
            let _ = word.update(to.generation(), &self.hot.word, |_| Some(n));
        }
    }

    /// The counts that tripped the breaker into the Open phase of `generation`
    /// (see [`keep_tripped_by`](Self::keep_tripped_by)), or `None` if none were
    /// kept for it: no window, or that phase began otherwise (a failed half-open
    /// round, a restore).
    pub(super) fn tripped_by(&self, generation: Generation) -> Option<WindowCounts> {
        // The calls first: see `keep_tripped_by`.
        let [calls, failures, slow] = self
            .phase
            .tripped
            .each_ref()
            .map(|word| u64::from(word.data_for(generation)));
        (calls > 0).then_some(WindowCounts {
            calls,
            failures,
            slow,
        })
    }

    /// The backoff level a reopening of `s` moves to.
    pub(super) fn next_level(&self, s: Snapshot) -> u8 {
        policy::next_level(&self.config, s)
    }
}
