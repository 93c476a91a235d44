//! What-if candidates on the builder (see [`Builder::candidate`]): each kept as
//! its settings and listener, and built in [`Builder::build`] beside the live
//! breaker, on its clock.

use super::*;

/// A candidate as given to [`Builder::candidate`].
#[derive(Clone)]
pub(super) struct CandidateSpec {
    name: Cow<'static, str>,
    settings: Settings,
    listener: Option<Listener>,
    /// Why it cannot be built, if it asked for what a candidate cannot have.
    refused: Option<&'static str>,
}

/// A candidate checked, with what building it takes.
pub(super) struct CandidateParts<C> {
    name: Cow<'static, str>,
    config: Config,
    clock: C,
    listener: Option<Listener>,
}

impl<C: Clock + Clone> Builder<C> {
    /// Attaches a what-if candidate: a shadow breaker (see
    /// [`shadow`](Self::shadow)) configured by `candidate`, which is offered the
    /// outcome of every call this breaker records, on this breaker's clock, and
    /// reported by [`CircuitBreaker::candidates`] under `name` (not empty, and
    /// no other candidate's: reports and the exports' labels tell candidates
    /// apart by name, and the build's [`ConfigError`] names `candidate`
    /// otherwise). Its decisions never change this breaker's, nor does its
    /// listener panicking (the panic reaches the caller once this breaker has
    /// recorded the outcome). Of
    /// `candidate`, only the settings and
    /// [`on_transition`](Self::on_transition) are used (its clock is this
    /// breaker's); it may have no candidates of its own and no
    /// [`restore`](Self::restore). Set this breaker's [`clock`](Self::clock)
    /// before its candidates. A `Registry` refuses a builder with candidates
    /// (its build's [`ConfigError`] names `candidate`): build such a breaker on
    /// its own.
    ///
    /// The counterfactual rule: a candidate decides its own admission of each
    /// call when the live breaker records the call's outcome, and records that
    /// outcome as if the call had run from the live admission to now.
    /// - A call it would have rejected counts as its would-be rejection, and the
    ///   outcome counts for nothing else: under its settings the call would not
    ///   have happened. The outcome is tallied as a failure the dependency would
    ///   have been spared, or a success turned away (an ignored call as neither;
    ///   a dropped permit as a failure where the candidate's own
    ///   [`on_drop`](Self::on_drop) makes it one, else neither).
    /// - A call the live breaker rejected is not offered: its outcome is unknown.
    ///   It counts as unseen.
    /// - A live outcome that arrives after the live breaker moved to another
    ///   phase (stale for it) is offered all the same: the call ran.
    ///
    /// Its limit: the candidate sees the dependency as it behaved under the live
    /// breaker's load. How the dependency would have behaved with fewer calls
    /// (had the candidate shed them) is unknown, so a candidate that opens sooner
    /// may look worse (it sees no recovery that shedding would have brought) or
    /// better than it would be.
    ///
    /// Cost: a breaker with candidates records a closed success off its lean
    /// path and offers it to each candidate's own lean path at one clock
    /// reading (none if neither it nor a candidate has a window). A closed
    /// candidate without a window only checks that its streak is clear; one
    /// with a window counts the success in its bucket. Through
    /// [`CircuitBreaker::call`](crate::CircuitBreaker::call) and `call_with`,
    /// where windows are everyone's or no one's and no call is timed, that is
    /// inline up to the first candidate's record; otherwise (and through a
    /// permit, `call_async` or the tower layer) one call out of line. Each
    /// candidate costs a closed success fewer instructions than the live
    /// breaker's own closed path, with no lock and no allocation (the figures
    /// are in `docs/PERFORMANCE.md`). Calls are timed only
    /// where this breaker or a candidate times them: where this breaker times
    /// its own, a candidate's are timed by the same readings (a slow-call
    /// threshold under 100 clock resolutions, which a breaker of its own would
    /// time precisely, is then timed by the cheap reading where this breaker's
    /// is), so that no candidate changes how this breaker times a call; else
    /// from a precise reading where a candidate times them precisely. Without
    /// candidates nothing changes. Transitions of a candidate reach its own
    /// `on_transition`, not this breaker's, marked
    /// [`shadow`](crate::Transition::shadow); the `metrics` and `tracing`
    /// exports label them with the candidate's name, and this breaker's
    /// `publish_metrics` publishes each candidate's state and books beside its
    /// own (feature `metrics`).
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, ManualClock, State};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let breaker = CircuitBreaker::builder()
    ///     .consecutive_failures(10)
    ///     .clock(clock.clone())
    ///     .candidate("five", CircuitBreaker::builder().consecutive_failures(5))
    ///     .candidate(
    ///         "rate",
    ///         CircuitBreaker::builder()
    ///             .window(Duration::from_secs(10), 10)
    ///             .failure_rate(0.5, 4),
    ///     )
    ///     .build()?;
    /// for _ in 0..4 {
    ///     let _ = breaker.call(|| Err::<(), _>("down"));
    /// }
    /// let reports = breaker.candidates();
    /// assert_eq!(reports[0].state, State::Closed);
    /// assert_eq!(reports[1].state, State::Open);
    /// assert_eq!(breaker.state(), State::Closed);
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn candidate<C2>(
        mut self,
        name: impl Into<Cow<'static, str>>,
        candidate: Builder<C2>,
    ) -> Self {
        let refused = match () {
            _ if !candidate.candidates.is_empty() => {
                Some("a candidate cannot have candidates of its own")
            }
            _ if candidate.restore.refuse_shared().is_err() => {
                Some("a candidate starts fresh: it cannot be restored")
            }
            _ => None,
        };
        self.candidates.push(CandidateSpec {
            name: name.into(),
            settings: candidate.settings,
            listener: candidate.on_transition,
            refused,
        });
        self.clone_clock = Some(C::clone);
        self
    }
}

impl<C: Clock> Builder<C> {
    /// Checks every candidate, as a shadow breaker named as this one, on a clone
    /// of this builder's clock. A bad setting is a [`ConfigError`] naming
    /// `candidate`, whose reason names the candidate and its setting.
    pub(super) fn candidate_parts(&self) -> Result<Vec<CandidateParts<C>>, ConfigError> {
        let mut parts = Vec::with_capacity(self.candidates.len());
        for (i, spec) in self.candidates.iter().enumerate() {
            let refuse = |reason: &dyn fmt::Display| {
                ConfigError::new("candidate", format!("`{}`: {reason}", spec.name))
            };
            if let Some(reason) = spec.refused {
                return Err(refuse(&reason));
            }
            // A report, a metric's label and a trace tell candidates apart by name.
            if spec.name.is_empty() {
                return Err(refuse(&"a candidate needs a name"));
            }
            if self.candidates[..i].iter().any(|c| c.name == spec.name) {
                return Err(refuse(&"another candidate has this name"));
            }
            let Some(clone) = self.clone_clock else {
                return Err(refuse(&"set the breaker's clock before its candidates"));
            };
            let mut settings = spec.settings.clone();
            settings.name = self.settings.name.clone();
            settings.shadow = true;
            let checking = Builder {
                clock: clone(&self.clock),
                settings,
                on_transition: None,
                restore: Restore::default(),
                candidates: Vec::new(),
                clone_clock: None,
            };
            let config = checking.validate().map_err(|e| refuse(&e))?;
            parts.push(CandidateParts {
                name: spec.name.clone(),
                config,
                clock: checking.clock,
                listener: spec.listener.clone(),
            });
        }
        Ok(parts)
    }
}

impl<C: Clock> CircuitBreaker<C> {
    /// This breaker with the candidates of `parts` built beside it; with a
    /// fixed `seed` (see `Builder::seeded`), each candidate's is drawn from it.
    pub(super) fn attach_candidates(
        self,
        parts: Vec<CandidateParts<C>>,
        seed: Option<u64>,
    ) -> CircuitBreaker<C> {
        let candidates = parts
            .into_iter()
            .enumerate()
            .map(|(i, p)| {
                let candidate = self.new_candidate(p.name, p.config, p.clock, p.listener);
                match seed {
                    Some(seed) => candidate.with_seed(crate::util::splitmix64(seed ^ i as u64)),
                    None => candidate,
                }
            })
            .collect();
        self.with_candidates(candidates)
    }
}
