//! What the breaker reports: its metrics snapshot, its heap, a cheap `Debug`, and
//! what save and restore read and write of its insides.

use super::phase::{CHECK_DUE, STREAK_MAX};
use super::*;

impl<C> CircuitBreaker<C> {
    /// The lifetime counters (see [`Metrics::lifetime`]): no clock reading.
    pub(crate) fn lifetime(&self) -> Lifetime {
        let total = |c| self.hot.stripes.total(c);
        Lifetime {
            admitted: total(Counter::Admitted),
            rejected: total(Counter::Rejected),
            successes: total(Counter::Successes),
            // Relaxed: a statistic, summed like the striped counters.
            failures: total(Counter::Failures)
                .wrapping_add(self.dropped_failures.load(Ordering::Relaxed)),
            slow: total(Counter::Slow),
            ignored: total(Counter::Ignored),
            stale: total(Counter::Stale),
            dropped: total(Counter::Dropped),
            would_reject: self.would_reject(),
        }
    }
}

impl<C: Clock> CircuitBreaker<C> {
    /// A snapshot of the breaker's state, window and lifetime counters.
    ///
    /// Takes no lock and writes nothing (but for one repair, which any reader of
    /// the phase makes: a current phase's start erased by a transition a whole tag
    /// cycle late is put back; see the implementation notes, "The ABA window"). It
    /// reads the state word, and sums the window's buckets and the eight lifetime
    /// counters over every stripe (see [`Lifetime`] for what striping costs), so it
    /// is meant for a scrape or a tick, not for every call.
    ///
    /// # Examples
    /// ```
    /// let breaker = cutout::CircuitBreaker::builder().build()?;
    /// let _ = breaker.call(|| Err::<(), _>("boom"));
    /// let m = breaker.metrics();
    /// assert_eq!((m.window.calls, m.window.failures, m.lifetime.failures), (1, 1, 1));
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn metrics(&self) -> Metrics {
        let s = self.hot.word.load();
        let reading = self.clock.now();
        let now = self.ticks_at(reading);
        let generation = s.generation();
        let window = match &self.window {
            Some(w) if counts_calls(s) => w.counts(&self.hot.stripes, generation, reading),
            _ => WindowCounts::default(),
        };
        let lifetime = self.lifetime();
        // If `s` is over already, as if it started now.
        let start = self.phase_start(s).unwrap_or(now);
        let ticks = self.time_of(s, start);
        Metrics {
            state: s.state(),
            generation,
            level: s.level(),
            time_in_state: ticks_to_duration(now.saturating_sub(start)),
            retry_after: self.retry_after(s, ticks, now),
            window,
            tripped_by: match s.is(State::Open) {
                true => self.tripped_by(generation),
                false => None,
            },
            consecutive_failures: match counts_calls(s) {
                true => u64::from(self.streak_of(generation)),
                false => 0,
            },
            lifetime,
            // Relaxed: a snapshot of independent counters.
            transitions: std::array::from_fn(|i| self.transitions[i].load(Ordering::Relaxed)),
        }
    }

    /// Calls admitted and not yet finished (recorded, or dropped unrecorded), from
    /// the lifetime counters. The outcomes are read before the admissions, so a
    /// call finishing meanwhile reads as in flight, never the other way round; a
    /// count read mid-update may wrap, which reads as in flight too.
    #[cfg(feature = "registry")]
    pub(crate) fn in_flight(&self) -> u64 {
        let total = |c| self.hot.stripes.total(c);
        let finished = [
            Counter::Successes,
            Counter::Failures,
            Counter::Ignored,
            Counter::Stale,
            Counter::Dropped,
        ]
        .map(total)
        .into_iter()
        .fold(0, u64::wrapping_add);
        total(Counter::Admitted).wrapping_sub(finished)
    }

    /// Heap bytes this breaker holds: the room for its stripes (a pointer each),
    /// the stripes its threads have written (one per thread that called it, each
    /// allocated on that thread's first call), its backoff table, with a window
    /// the window's line (its shape and failure budget), and once an integration
    /// has kept state beside it, that state (the feature `metrics`: the counts it
    /// last published). A shadow breaker, or one with what-if candidates, holds
    /// its count of would-be rejections there too, and each candidate whole.
    pub fn heap_bytes(&self) -> usize {
        let window = self
            .window
            .as_ref()
            .map_or(0, |w| std::mem::size_of_val(&**w));
        let attached = self.attached.heap_bytes();
        let cooldowns = std::mem::size_of_val(&*self.config.cooldowns);
        let shadowing = self.shadowing.as_ref().map_or(0, |s| {
            let candidates = s.candidates.iter();
            std::mem::size_of_val(&**s)
                + candidates
                    .map(|c| std::mem::size_of_val(c) + c.heap_bytes())
                    .sum::<usize>()
        });
        self.hot.stripes.heap_bytes() + cooldowns + window + attached + shadowing
    }
}

// Save and restore: what `crate::saved` needs from the breaker's insides.
impl<C: Clock> CircuitBreaker<C> {
    /// A breaker built from `config` that starts at `start` instead of a new
    /// breaker's Closed: a fresh generation (0), the phase's time counted from the
    /// breaker's origin, the streak and the window's counts as given. Nothing is
    /// shared yet, so plain writes do.
    pub(crate) fn restored(
        config: Config,
        clock: C,
        listener: Option<Listener>,
        start: &saved::Start,
    ) -> Self {
        let mut b = Self::from_parts(config, clock, listener);
        b.hot.word = StateWord::at(start.word);
        // An Open phase's deadline is `start.ticks` after the build; it started one
        // cooldown before (see `bias`). Any other phase starts at the build.
        let started = match start.word.state() {
            State::Open => (b.bias + start.ticks)
                .saturating_sub(b.cooldown(start.word.level(), start.word.generation())),
            _ => b.bias,
        };
        b.phase.time = TimeSlot::starting(start.word, started);
        let mut streak = start.streak.min(STREAK_MAX);
        if let (Some(w), Some(counts)) = (&b.window, start.window) {
            w.seed(&b.hot.stripes, (start.word, &b.hot.word), b.origin, counts);
            // Below `minimum_calls` at a rate that trips there: the success that
            // brings the window up must check it, as `record_closed` marks it.
            if policy::trips_at_minimum(&b.config, counts) {
                streak |= CHECK_DUE;
            }
        }
        b.phase.streak = TaggedWord::holding(start.word.generation(), streak);
        b
    }

    /// The breaker's state as [`save`](Self::save) records it, read without a
    /// lock or a write, as [`metrics`](Self::metrics) reads it.
    pub(crate) fn taken(&self) -> saved::Taken {
        let s = self.hot.word.load();
        let reading = self.clock.now();
        let now = self.ticks_at(reading);
        let ticks = self.peek_ticks(s, now);
        let closed = counts_calls(s);
        saved::Taken {
            state: s.state(),
            level: s.level(),
            open_in: s.is(State::Open).then_some((ticks, now)),
            streak: match closed {
                true => self.streak_of(s.generation()),
                false => 0,
            },
            window: self
                .window
                .as_ref()
                .zip(self.config.window)
                .map(|(w, shape)| {
                    let counts = match closed {
                        true => w.counts(&self.hot.stripes, s.generation(), reading),
                        false => WindowCounts::default(),
                    };
                    (shape, counts)
                }),
        }
    }
}

/// Name, state and generation: one load of the state word. (For the window and
/// the counters, which a reader sums over every stripe, see
/// [`metrics`](CircuitBreaker::metrics).)
impl<C: Clock> fmt::Debug for CircuitBreaker<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.hot.word.load();
        f.debug_struct("CircuitBreaker")
            .field("name", &self.config.name)
            .field("state", &s.state())
            .field("generation", &s.generation())
            .finish_non_exhaustive()
    }
}
