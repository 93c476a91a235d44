//! The data of one phase beside the state word: the half-open round's probe
//! slots and verdict, and the closed phase's consecutive-failure streak, each a
//! [`TaggedWord`] updated through its one helper.

use super::*;

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
    /// phase's streak). Saturates at `u32::MAX`.
    pub(super) fn bump_streak(&self, generation: Generation) -> u64 {
        match self
            .phase
            .streak
            .update(generation, &self.hot.word, |n| Some(n.saturating_add(1)))
        {
            TagUpdate::Updated { new, .. } => u64::from(new),
            TagUpdate::Declined(_) | TagUpdate::Stale(_) => 0,
        }
    }

    /// Ends `generation`'s streak: empties the streak word if it holds this
    /// generation's streak, or one left by an earlier phase (which reads as 0 for
    /// this one already; emptying it keeps the next successes on the lean path). A
    /// later phase's streak is left alone, and an empty word is not written.
    pub(super) fn clear_streak(&self, generation: Generation) {
        let _ = self
            .phase
            .streak
            .update(generation, &self.hot.word, |_| Some(0));
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

    /// The backoff level a reopening of `s` moves to.
    pub(super) fn next_level(&self, s: Snapshot) -> u8 {
        policy::next_level(&self.config, s)
    }
}
