//! [`CircuitBreaker`]: admission, outcome recording and manual control. The only
//! place that reads the clock.
//!
//! # Orderings
//! The state word, the time slot and the tagged words (the half-open round, the
//! consecutive-failure streak) are changed by `AcqRel` CAS and loaded with
//! `Acquire` (see [`crate::state`]), except the lean path's streak check, which is
//! `Relaxed` (see [`TaggedWord::is_empty_relaxed`]).
//! Lifetime counters and window counts are `Relaxed` (see [`crate::stripe`]). A
//! failure or slow call issues a `SeqCst` fence between counting itself in the
//! window and summing the window, so of two racing failures the later sees both.

use crate::clock::{Clock, DefaultClock};
use crate::config::{Builder, Config, Listener, SlowCalls};
use crate::event::{Reason, Transition, WindowCounts};
use crate::metrics::{Lifetime, Metrics};
use crate::permit::{Kind, Outcome, OwnedPermit, Permit, Ticket};
use crate::policy;
use crate::ramp;
use crate::saved;
use crate::state::{
    Generation, NANOS_PER_TICK, Round, Snapshot, StateWord, TagUpdate, TaggedWord, TimeSlot,
    Update, next_generation, ticks_from_duration, ticks_from_nanos,
};
use crate::stripe::{Counter, OPEN_DEADLINE, Owned, PHASE_KEY, StripeRef, Stripes};
use crate::sync::{AtomicU64, Ordering, fence};
use crate::util::{random_seed, splitmix64};
use crate::window::{self, Sample, Window};
use crate::{Error, Rejected, State};
use crossbeam_utils::CachePadded;
use std::fmt;
use std::time::Duration;

/// A lock-free circuit breaker.
///
/// Share it by reference or in an `Arc`; every method takes `&self`. See the
/// [crate docs](crate) for the model and [`Builder`] for the settings.
///
/// # Examples
/// ```
/// use cutout::{CircuitBreaker, Error, ManualClock, State};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let breaker = CircuitBreaker::builder()
///     .consecutive_failures(3)
///     .open_duration(Duration::from_secs(5))
///     .clock(clock.clone())
///     .build()?;
///
/// for _ in 0..3 {
///     let _ = breaker.call(|| Err::<(), _>("connection refused"));
/// }
/// match breaker.call(|| Ok::<_, &str>("never runs")) {
///     Err(Error::Rejected(r)) => assert_eq!(r.retry_after(), Some(Duration::from_secs(5))),
///     other => panic!("expected a rejection, got {other:?}"),
/// }
/// clock.advance(Duration::from_secs(5));
/// assert_eq!(breaker.call(|| Ok::<_, &str>("probe")), Ok("probe"));
/// assert_eq!(breaker.state(), State::Closed);
/// # Ok::<(), cutout::ConfigError>(())
/// ```
pub struct CircuitBreaker<C = DefaultClock> {
    /// The state word and what the lean paths read with it (see [`Hot`]).
    hot: CachePadded<Hot>,
    /// The current phase's time, the half-open round, the streak and the
    /// transition counts (see [`Phase`]).
    phase: CachePadded<Phase>,
    window: Option<Window>,
    config: Config,
    clock: C,
    origin: u64,
    /// The tick of `origin`: the longest cooldown. Ticks count from one longest
    /// cooldown before the breaker was built, so that a restored Open phase, whose
    /// deadline may come sooner than a whole cooldown after the build, still has a
    /// start (its deadline less its cooldown) that a tick can hold.
    bias: u64,
    /// The last tick this breaker's clock can reach (`u64::MAX` ns from `origin`):
    /// deadlines saturate here, so a clock that saturates ends every cooldown.
    ticks_max: u64,
    seed: u64,
    listener: Option<Listener>,
}

impl CircuitBreaker<DefaultClock> {
    /// A builder with the default clock; see [`Builder`] for every setting.
    ///
    /// # Examples
    /// ```
    /// let breaker = cutout::CircuitBreaker::builder().build()?;
    /// assert!(breaker.call(|| Ok::<_, ()>(())).is_ok());
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn builder() -> Builder<DefaultClock> {
        Builder::new()
    }
}

/// The state word and the fields the lean paths of [`CircuitBreaker::call_with`]
/// load with it, first in one line: the word, the settings byte, the slow-call
/// threshold, and the counter lines' pointer and length (the first field of
/// [`Stripes`]). All fall within the line's first
/// [`LEAN_LOADS`](crate::stripe::LEAN_LOADS) bytes, where no lean path stores in
/// any line (4K aliasing). The line is written only when the word is.
#[repr(C)]
struct Hot {
    word: StateWord,
    /// What the lean path does for this configuration (see [`Lean`]).
    lean: Lean,
    /// With the slow-call policy timed by cheap readings, the elapsed nanoseconds
    /// from which a success is off the lean path (past the threshold).
    lean_slow_nanos: u64,
    stripes: Stripes,
}

/// The current phase's time, first in its line: an open rejection loads it (see
/// [`LEAN_LOADS`](crate::stripe::LEAN_LOADS)). Beside it the half-open round,
/// written only while HalfOpen, when no rejection takes the lean path; the streak,
/// which a closed call loads (also within `LEAN_LOADS`) and only a failure writes;
/// and the transition counts, written with the time. One line for all four keeps
/// the breaker small (a `Registry` may hold many) and writes no line on the lean
/// paths.
#[repr(C)]
struct Phase {
    time: TimeSlot,
    /// The half-open round, tagged with its generation (see [`Round`]).
    round: TaggedWord,
    /// Consecutive failures of the closed phase, tagged with its generation.
    streak: TaggedWord,
    transitions: [AtomicU64; Reason::ALL.len()],
}

/// What [`CircuitBreaker::take_probe`] found.
enum Probe {
    Taken,
    Full,
    /// The state word moved on; look again.
    Retry(Snapshot),
}

/// The settings the lean path of [`CircuitBreaker::call_with`] needs, in one byte:
/// it is read once per call and kept in a register, where reading each setting
/// would be a load of its own (and a reload after the call).
#[derive(Clone, Copy, Debug)]
struct Lean(u8);

impl Lean {
    /// A window: a success is counted in the owner's live bucket.
    const WINDOW: u8 = 1;
    /// Calls are timed by cheap readings: for the slow-call policy, or for a drop
    /// setting that needs a call's age ([`Dropped::FailureAfter`](crate::Dropped)).
    const TIMED: u8 = 2;
    /// The slow-call policy, with calls timed precisely: no lean path.
    const PRECISE: u8 = 4;

    fn of(config: &Config) -> Lean {
        let window = match config.window {
            Some(_) => Lean::WINDOW,
            None => 0,
        };
        let slow = match config.slow_calls {
            Some(slow) if slow.precise() => Lean::PRECISE,
            Some(_) => Lean::TIMED,
            None if config.on_drop.times_calls() => Lean::TIMED,
            None => 0,
        };
        Lean(window | slow)
    }

    #[inline]
    fn has(self, any: u8) -> bool {
        self.0 & any != 0
    }
}

/// Marks the branch that calls it as unlikely, so the compiler lays out the other
/// as the straight path (what `std::hint::cold_path` does from Rust 1.95).
#[cold]
#[inline(always)]
fn unlikely() {}

impl<C: Clock> CircuitBreaker<C> {
    pub(crate) fn from_parts(config: Config, clock: C, listener: Option<Listener>) -> Self {
        let origin = clock.now();
        let bias = config.max_cooldown();
        let window = config.window.map(|w| Window::new(w, origin));
        let stripes = Stripes::new(window.as_ref().map_or(0, Window::buckets));
        let seed = splitmix64(origin ^ random_seed());
        CircuitBreaker {
            hot: CachePadded::new(Hot {
                word: StateWord::new(),
                lean: Lean::of(&config),
                lean_slow_nanos: config.slow_calls.map_or(u64::MAX, |slow| {
                    slow.threshold_nanos.get().saturating_add(1)
                }),
                stripes,
            }),
            phase: CachePadded::new(Phase {
                time: TimeSlot::starting(Snapshot::INITIAL, bias),
                round: TaggedWord::new(),
                streak: TaggedWord::new(),
                transitions: std::array::from_fn(|_| AtomicU64::new(0)),
            }),
            window,
            config,
            clock,
            origin,
            bias,
            ticks_max: bias + ticks_from_nanos(u64::MAX - origin),
            seed,
            listener,
        }
    }

    /// The name given to [`Builder::name`] (default `"default"`).
    ///
    /// # Examples
    /// ```
    /// let breaker = cutout::CircuitBreaker::builder().build()?;
    /// assert_eq!(breaker.name(), "default");
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// The name as the builder holds it: cloning it copies a pointer for a
    /// `&'static str` name.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) fn name_cow(&self) -> &std::borrow::Cow<'static, str> {
        &self.config.name
    }

    /// The current state. A pure read: it never moves the breaker (an Open breaker
    /// past its cooldown reads Open until a call makes it HalfOpen).
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, State};
    ///
    /// let breaker = CircuitBreaker::builder().build()?;
    /// assert_eq!(breaker.state(), State::Closed);
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    #[inline]
    pub fn state(&self) -> State {
        self.hot.word.load().state()
    }

    /// Asks to make a call. On success the [`Permit`] carries the generation it was
    /// admitted under; record the call's outcome on it (or drop it: that counts as
    /// ignored and gives a half-open slot back).
    ///
    /// # Errors
    /// [`Rejected`] when the breaker is open, forced open, or half-open with every
    /// probe slot taken.
    ///
    /// # Examples
    /// ```
    /// use cutout::CircuitBreaker;
    ///
    /// let breaker = CircuitBreaker::builder().build()?;
    /// let permit = breaker.try_acquire()?;
    /// // ... make the call, perhaps on another thread ...
    /// permit.success();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn try_acquire(&self) -> Result<Permit<'_, C>, Rejected> {
        self.acquire().map(|ticket| Permit::new(self, ticket))
    }

    /// Like [`try_acquire`](Self::try_acquire), for a breaker in an `Arc`: the permit
    /// owns a clone of the `Arc`, so it can move into a `'static` future or thread.
    ///
    /// # Examples
    /// ```
    /// use cutout::CircuitBreaker;
    /// use std::sync::Arc;
    ///
    /// let breaker = Arc::new(CircuitBreaker::builder().build()?);
    /// let permit = breaker.try_acquire_owned()?;
    /// std::thread::spawn(move || permit.success()).join().unwrap();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_acquire_owned(self: &std::sync::Arc<Self>) -> Result<OwnedPermit<C>, Rejected> {
        self.acquire()
            .map(|ticket| OwnedPermit::new(self.clone(), ticket))
    }

    /// Runs `f` through the breaker: `Err` is a failure, `Ok` a success.
    ///
    /// A panic in `f` propagates unchanged; the permit's drop records it as ignored,
    /// so it never holds a half-open slot.
    ///
    /// # Errors
    /// [`Error::Rejected`] if the breaker did not run `f`, [`Error::Inner`] with
    /// `f`'s own error otherwise.
    ///
    /// # Examples
    /// ```
    /// use cutout::CircuitBreaker;
    ///
    /// let breaker = CircuitBreaker::builder().build()?;
    /// let body = breaker.call(|| Ok::<_, std::io::Error>("200 OK"))?;
    /// assert_eq!(body, "200 OK");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn call<T, E>(&self, f: impl FnOnce() -> Result<T, E>) -> Result<T, Error<E>> {
        self.call_with(Outcome::of, f)
    }

    /// Runs `f` through the breaker and lets `classify` say what its result means:
    /// a [`Success`](Outcome::Success), a [`Failure`](Outcome::Failure), or
    /// [`Ignored`](Outcome::Ignored) (neither, like a 404 or the caller's own
    /// cancellation).
    ///
    /// # Errors
    /// As [`call`](Self::call).
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, Outcome};
    ///
    /// let breaker = CircuitBreaker::builder().consecutive_failures(1).build()?;
    /// let not_found = |r: &Result<u16, u16>| match r {
    ///     Err(404) => Outcome::Ignored,
    ///     Err(_) => Outcome::Failure,
    ///     Ok(_) => Outcome::Success,
    /// };
    /// let _ = breaker.call_with(not_found, || Err::<u16, _>(404));
    /// assert_eq!(breaker.state(), cutout::State::Closed); // a 404 is not a failure
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    #[inline]
    pub fn call_with<T, E>(
        &self,
        classify: impl FnOnce(&Result<T, E>) -> Outcome,
        f: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, Error<E>> {
        let s = self.hot.word.load();
        // The lean path: a closed admission by a thread that owns its stripe, timed
        // (if the slow-call policy times calls) by a cheap reading, and a success
        // recorded by the common case (`record_lean_success`). Everything else is
        // one out-of-line call: an admission off this path is made and finished by
        // `call_off_lean`, an outcome off it is recorded by `record_general`. So the
        // path itself calls nothing but `f`, and keeps few values in registers that
        // need saving.
        if !s.is_closed() {
            // An Open rejection inside the cooldown, inline too: one compare of the
            // clock with the deadline the word holds. Only for a thread that owns
            // its stripe here; any other (its first call to this breaker included)
            // takes `call_off_lean`, which gives it its slot and stripe. So the
            // path calls nothing, and saves no registers for a call.
            if s.is(State::Open) {
                if let Some(o) = self.hot.stripes.mine_if_owned() {
                    if let Some(rejected) = self.reject_cached(o, s) {
                        return Err(Error::Rejected(rejected));
                    }
                }
            }
            return self.call_off_lean(s, classify, f);
        }
        // Acquire and record run on this thread: one stripe lookup serves both. A
        // thread without a slot yet reads as owning no stripe, so it takes
        // `call_off_lean`, which gives it one.
        let Some(o) = self.hot.stripes.mine_if_owned() else {
            return self.call_off_lean(s, classify, f);
        };
        let r = o.stripe();
        let lean = self.hot.lean;
        let started = match lean.has(Lean::TIMED | Lean::PRECISE) {
            false => 0,
            true => {
                unlikely(); // the slow-call policy is the least common
                match self.clock.now_if_cheap() {
                    Some(now) if !lean.has(Lean::PRECISE) => now,
                    _ => return self.call_off_lean(s, classify, f),
                }
            }
        };
        o.bump(Counter::Admitted);
        let permit = Permit::new(self, Ticket::new(s, started));
        let result = f(); // a panic drops the permit: recorded as dropped
        let outcome = classify(&result);
        let ticket = permit.into_ticket();
        match outcome {
            // The same word as at admission (every transition moves the generation
            // on): still the phase the call was admitted in.
            Outcome::Success
                if self.hot.word.load() == s && self.record_lean_success(r, s, ticket, lean) => {}
            Outcome::Success => self.record_success_off_lean(r, ticket),
            _ => self.record_general(r, ticket, outcome),
        }
        result.map_err(Error::Inner)
    }

    /// [`record_general`](Self::record_general) for a success off the lean path: marked
    /// cold so the compiler lays the lean path out first.
    #[inline(never)]
    #[cold]
    fn record_success_off_lean(&self, r: StripeRef<'_>, ticket: Ticket) {
        self.record_general(r, ticket, Outcome::Success);
    }

    /// [`call_with`](Self::call_with) off its lean path: a rejection, a probe, a
    /// disabled breaker's call, a call timed by a precise reading, or one by a
    /// thread without a stripe of its own.
    #[inline(never)]
    #[cold]
    fn call_off_lean<T, E>(
        &self,
        s: Snapshot,
        classify: impl FnOnce(&Result<T, E>) -> Outcome,
        f: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, Error<E>> {
        let r = self.hot.stripes.mine();
        let ticket = match s.is_closed() {
            true => self.admit(r, s),
            false => self.acquire_not_closed(r, s).map_err(Error::Rejected)?,
        };
        let permit = Permit::new(self, ticket); // recorded as dropped on a panic
        let result = f();
        let outcome = classify(&result);
        self.record_in(r, permit.into_ticket(), outcome);
        result.map_err(Error::Inner)
    }

    /// Records the success of a call admitted in Closed if it is the common case:
    /// no streak to clear, a cheap clock reading, not slow (by a cheap reading), in
    /// the window's live bucket (which only a thread that owns its stripe has).
    /// `phase` is the state word the call was admitted under, which the caller has
    /// just loaded again: the phase is still current. Returns `false` having
    /// written nothing otherwise: [`record_general`](Self::record_general) does the rest.
    #[inline(always)]
    fn record_lean_success(
        &self,
        r: StripeRef<'_>,
        phase: Snapshot,
        ticket: Ticket,
        lean: Lean,
    ) -> bool {
        // The streak word is read whatever the policy (without one it stays empty):
        // a load costs less here than a branch around it.
        if !self.phase.streak.is_empty_relaxed() {
            return false;
        }
        if lean.has(Lean::WINDOW) {
            let Some(now) = self.clock.now_if_cheap() else {
                return false;
            };
            // The slow-call policy always comes with a window, so it is checked here,
            // against the same reading.
            if lean.has(Lean::TIMED | Lean::PRECISE) {
                unlikely();
                if lean.has(Lean::PRECISE) || ticket.elapsed(now) >= self.hot.lean_slow_nanos {
                    return false;
                }
            }
            if !r
                .as_owned()
                .is_some_and(|o| window::record_live_success(o, phase, now))
            {
                return false;
            }
        }
        Stripes::bump(r, Counter::Successes);
        true
    }

    /// Opens the breaker until [`reset`](Self::reset): every call is rejected. Calls in
    /// flight become stale. Does nothing if already forced open.
    ///
    /// # Examples
    /// ```
    /// let breaker = cutout::CircuitBreaker::builder().build()?;
    /// breaker.force_open();
    /// assert!(breaker.try_acquire().is_err());
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn force_open(&self) {
        self.manual(State::ForcedOpen, Reason::ForcedOpen);
    }

    /// Switches the breaker off until [`reset`](Self::reset): every call is admitted
    /// and nothing trips. Calls in flight become stale. Does nothing if already
    /// disabled.
    ///
    /// # Examples
    /// ```
    /// let breaker = cutout::CircuitBreaker::builder().consecutive_failures(1).build()?;
    /// breaker.disable();
    /// let _ = breaker.call(|| Err::<(), _>("down"));
    /// assert_eq!(breaker.state(), cutout::State::Disabled);
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn disable(&self) {
        self.manual(State::Disabled, Reason::Disabled);
    }

    /// Closes the breaker afresh, from any state: a new generation (calls in flight
    /// become stale), an empty window, no consecutive failures, backoff level 0.
    ///
    /// # Examples
    /// ```
    /// let breaker = cutout::CircuitBreaker::builder().build()?;
    /// breaker.force_open();
    /// breaker.reset();
    /// assert_eq!(breaker.state(), cutout::State::Closed);
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn reset(&self) {
        let now = self.ticks();
        let update = self.transition(self.hot.word.load(), |s| {
            Some((s.next(State::Closed, 0), now))
        });
        self.announce(update, Reason::Reset, WindowCounts::default(), 0);
    }

    /// Opens a Closed breaker for `duration` from now, reported as
    /// [`Reason::External`]: a decision made outside the breaker's own policies (a
    /// fleet of peers that all see the dependency down, an operator's signal).
    /// Returns whether this call opened it.
    ///
    /// Only a Closed breaker opens: an Open or HalfOpen one (a probe round in
    /// progress decides for itself), a ForcedOpen or a Disabled one is left as it
    /// is, and nothing ever closes through this method. The Open phase keeps the
    /// current backoff level and ends like any other: after the deadline the next
    /// call half-opens it and the probes decide. Calls in flight become stale. A
    /// `duration` under a millisecond (the breaker's tick) opens nothing; one beyond
    /// the clock's range saturates.
    ///
    /// (An externally opened phase is not a cooldown of the configured length, so
    /// [`Metrics::time_in_state`] reads it as if the phase began one cooldown
    /// before its deadline; the [`Transition`] reports the true time.)
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, ManualClock, Reason, State};
    /// use std::sync::{Arc, Mutex};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let reasons = Arc::new(Mutex::new(Vec::new()));
    /// let log = reasons.clone();
    /// let breaker = CircuitBreaker::builder()
    ///     .clock(clock.clone())
    ///     .on_transition(move |t| log.lock().unwrap().push(t.reason))
    ///     .build()?;
    /// assert!(breaker.open_for(Duration::from_secs(5)));
    /// assert_eq!(breaker.state(), State::Open);
    /// let rejected = breaker.try_acquire().unwrap_err();
    /// assert_eq!(rejected.retry_after(), Some(Duration::from_secs(5)));
    /// assert!(!breaker.open_for(Duration::from_secs(60))); // already open
    ///
    /// clock.advance(Duration::from_secs(5));
    /// breaker.try_acquire()?.success(); // the probe decides
    /// assert_eq!(breaker.state(), State::Closed);
    /// assert_eq!(reasons.lock().unwrap()[0], Reason::External);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open_for(&self, duration: Duration) -> bool {
        let ticks = ticks_from_duration(duration).unwrap_or(u64::MAX);
        if ticks == 0 {
            return false;
        }
        let now = self.ticks();
        let deadline = now.saturating_add(ticks).min(self.ticks_max);
        // An Open phase's time is its start plus the cooldown of its level and
        // generation (`time_of`, which every thread computes alike): so the phase
        // is given the start that puts its deadline where it was asked, as a trip
        // at that start would have. Ticks count from one longest cooldown before
        // the build (`bias`), so that start is never before tick 0.
        let update = self.transition(self.hot.word.load(), |cur| {
            cur.is_closed().then(|| {
                let next = cur.next(State::Open, cur.level());
                let cooldown = self.cooldown(next.level(), next.generation());
                (next, deadline.saturating_sub(cooldown))
            })
        });
        let moved = matches!(update, Update::Moved { .. });
        let _ = self.deliver(
            update,
            Reason::External,
            WindowCounts::default(),
            0,
            |_, _| now,
        );
        moved
    }

    fn manual(&self, to: State, reason: Reason) {
        let now = self.ticks();
        let update = self.transition(self.hot.word.load(), |s| {
            (s.state() != to).then(|| (s.next(to, s.level()), now))
        });
        self.announce(update, reason, WindowCounts::default(), 0);
    }

    /// [`StateWord::transition`] on this breaker's word and time slot.
    /// A closed or recovering phase starts with an empty streak and a half-open
    /// phase with an empty round: the winner re-tags the word it starts (see
    /// [`TaggedWord::begin`]), so no phase ever reads data tagged by an earlier one,
    /// even one a whole generation cycle back.
    fn transition(
        &self,
        seen: Snapshot,
        mut f: impl FnMut(Snapshot) -> Option<(Snapshot, u64)>,
    ) -> Update {
        // What each attempt saw of the word its phase starts, just before its CAS.
        let mut before = 0;
        let update = self.hot.word.transition(&self.phase.time, seen, |cur| {
            let next = f(cur)?;
            before = match next.0.state() {
                State::Closed | State::Recovering => self.phase.streak.raw(),
                State::HalfOpen => self.phase.round.raw(),
                _ => 0,
            };
            Some(next)
        });
        if let Update::Moved { to, .. } = update {
            match to.state() {
                State::Closed | State::Recovering => {
                    self.phase.streak.begin(before, to.generation())
                }
                State::HalfOpen => self.phase.round.begin(before, to.generation()),
                _ => {}
            }
        }
        update
    }

    /// A snapshot of the breaker's state, window and lifetime counters.
    ///
    /// Takes no lock and writes nothing. It reads the state word, and sums the
    /// window's buckets and the eight lifetime counters over every stripe (see
    /// [`Lifetime`] for what striping costs), so it is meant for a scrape or a tick,
    /// not for every call.
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
        let total = |c| self.hot.stripes.total(c);
        let lifetime = Lifetime {
            admitted: total(Counter::Admitted),
            rejected: total(Counter::Rejected),
            successes: total(Counter::Successes),
            failures: total(Counter::Failures),
            slow: total(Counter::Slow),
            ignored: total(Counter::Ignored),
            stale: total(Counter::Stale),
            dropped: total(Counter::Dropped),
        };
        // A read only: if `s` is over already, as if it started now.
        let start = self.phase.time.start_of(s).unwrap_or(now);
        let ticks = self.time_of(s, start);
        Metrics {
            state: s.state(),
            generation,
            level: s.level(),
            time_in_state: ticks_to_duration(now.saturating_sub(start)),
            retry_after: self.retry_after(s, ticks, now),
            window,
            consecutive_failures: match counts_calls(s) {
                true => u64::from(self.phase.streak.data_for(generation)),
                false => 0,
            },
            lifetime,
            // Relaxed: a snapshot of independent counters.
            transitions: std::array::from_fn(|i| self.phase.transitions[i].load(Ordering::Relaxed)),
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
    /// allocated on that thread's first call), and its backoff table.
    pub fn heap_bytes(&self) -> usize {
        self.hot.stripes.heap_bytes() + std::mem::size_of_val(&*self.config.cooldowns)
    }

    // ---- admission -------------------------------------------------------------

    #[inline]
    pub(crate) fn acquire(&self) -> Result<Ticket, Rejected> {
        self.acquire_in(self.hot.stripes.mine())
    }

    /// Admission, counting in the stripe `r` of the calling thread.
    #[inline]
    fn acquire_in(&self, r: StripeRef<'_>) -> Result<Ticket, Rejected> {
        let s = self.hot.word.load();
        if s.is_closed() {
            return Ok(self.admit(r, s));
        }
        self.acquire_not_closed(r, s)
    }

    /// The other hot path, a rejection inside the cooldown, kept apart from the
    /// transition loop so it stays small. Marked cold all the same: that only tells
    /// the compiler to lay the closed path out first (a rejection costs the same).
    #[inline(never)]
    #[cold]
    fn acquire_not_closed(&self, r: StripeRef<'_>, s: Snapshot) -> Result<Ticket, Rejected> {
        if s.is(State::Open) {
            if let Some(deadline) = self.phase_ticks(s) {
                if let Some(rejected) = self.reject_in_cooldown(r, s, deadline, self.clock.now()) {
                    return Err(rejected);
                }
            }
        }
        self.admit_general(r, s)
    }

    #[inline]
    /// Admits a call in phase `s` (Closed, HalfOpen for a probe whose slot is
    /// taken, or Disabled): its ticket.
    fn admit(&self, r: StripeRef<'_>, s: Snapshot) -> Ticket {
        Stripes::bump(r, Counter::Admitted);
        let started = match self.hot.lean.has(Lean::TIMED | Lean::PRECISE) {
            true => self.age_reading(),
            false => 0,
        };
        Ticket::new(s, started)
    }

    /// A rejection by `state` that admits a call in `ticks`.
    #[inline]
    fn reject(&self, r: StripeRef<'_>, state: State, ticks: u64) -> Rejected {
        self.bump_and_check_clock(r, Counter::Rejected);
        Rejected::after_ms(state, ticks) // a tick is a millisecond
    }

    /// The rejection of a call at clock reading `reading` by the Open phase `s`,
    /// whose deadline is tick `deadline`, if its cooldown is not over. A thread that
    /// owns its stripe keeps the deadline, as a clock reading, in its stripe (see
    /// [`OPEN_DEADLINE`]): its next rejections in this phase take the lean path,
    /// [`reject_cached`](Self::reject_cached).
    fn reject_in_cooldown(
        &self,
        r: StripeRef<'_>,
        s: Snapshot,
        deadline: u64,
        reading: u64,
    ) -> Option<Rejected> {
        // No overflow: a deadline is at most `ticks_max`, the last tick a reading
        // can reach from `origin`.
        let at = self
            .origin
            .saturating_add(deadline.saturating_sub(self.bias) * NANOS_PER_TICK);
        if reading >= at {
            return None;
        }
        if let Some(o) = r.as_owned() {
            // Relaxed: private to the owner (see `reject_cached`).
            o.scratch(OPEN_DEADLINE).store(at, Ordering::Relaxed);
            o.scratch(PHASE_KEY).store(s.key(), Ordering::Relaxed);
        }
        Some(self.reject(r, State::Open, (at - reading).div_ceil(NANOS_PER_TICK)))
    }

    /// The lean rejection: the rejection of a call by the Open phase `s` if the
    /// calling thread has its deadline in its stripe (see
    /// [`reject_in_cooldown`](Self::reject_in_cooldown)) and a cheap clock reading
    /// says it is not over. Three loads and three compares; the division that finds
    /// the time left is only made for a caller that reads it.
    #[inline(always)]
    fn reject_cached(&self, o: Owned<'_>, s: Snapshot) -> Option<Rejected> {
        // Relaxed: private to the owner, which wrote both (a phase has one word, so
        // a deadline cached for `s` is `s`'s).
        if o.scratch(PHASE_KEY).load(Ordering::Relaxed) != s.key() {
            return None;
        }
        let now = self.clock.now_if_cheap()?;
        let at = o.scratch(OPEN_DEADLINE).load(Ordering::Relaxed);
        // `at - now` is at least 1 here: its milliseconds, rounded up, are one more
        // than those of one nanosecond less, rounded down.
        (now < at)
            .then(|| self.reject(o.stripe(), State::Open, (at - now - 1) / NANOS_PER_TICK + 1))
    }

    #[inline(never)]
    fn admit_general(&self, r: StripeRef<'_>, mut s: Snapshot) -> Result<Ticket, Rejected> {
        loop {
            s = match s.state() {
                State::Closed | State::Disabled => return Ok(self.admit(r, s)),
                State::ForcedOpen => {
                    Stripes::bump(r, Counter::Rejected);
                    return Err(Rejected::until_reset(State::ForcedOpen));
                }
                State::Open => {
                    let reading = self.clock.now();
                    let now = self.ticks_at(reading);
                    let Some(deadline) = self.phase_ticks(s) else {
                        s = self.hot.word.load(); // `s` is over: look again
                        continue;
                    };
                    if let Some(rejected) = self.reject_in_cooldown(r, s, deadline, reading) {
                        return Err(rejected);
                    }
                    let update = self.transition(s, |cur| {
                        (cur == s).then(|| (cur.next(State::HalfOpen, cur.level()), now))
                    });
                    self.announce(update, Reason::CooldownElapsed, WindowCounts::default(), 0)
                }
                State::HalfOpen => {
                    let now = self.ticks();
                    let Some(started) = self.phase_ticks(s) else {
                        s = self.hot.word.load(); // `s` is over: look again
                        continue;
                    };
                    let ends = started.saturating_add(self.config.half_open_timeout);
                    if now >= ends {
                        // A round without a verdict for the whole timeout failed.
                        self.reopen(s, now, Reason::HalfOpenTimeout)
                    } else {
                        match self.take_probe(s) {
                            Probe::Taken => return Ok(self.admit(r, s)),
                            Probe::Full => {
                                let retry = self.half_open_retry(s, ends, now);
                                return Err(self.reject(r, State::HalfOpen, retry));
                            }
                            Probe::Retry(cur) => cur,
                        }
                    }
                }
                State::Recovering => match self.ramp_step(r, s) {
                    Ok(true) => return Ok(self.admit(r, s)),
                    Ok(false) => return Err(self.reject(r, State::Recovering, 0)),
                    Err(cur) => cur,
                },
            }
        }
    }

    /// A call to recovering phase `s`: whether the ramp admits it (see
    /// [`crate::ramp`]), deciding on the caller's stripe `r`; or, if the ramp is
    /// over, the word after it, which this call closes if no other thread did
    /// ([`Reason::RampCompleted`]); or the current word if `s` is over.
    fn ramp_step(&self, r: StripeRef<'_>, s: Snapshot) -> Result<bool, Snapshot> {
        let now = self.ticks();
        let Some(started) = self.phase_ticks(s) else {
            return Err(self.hot.word.load()); // `s` is over: look again
        };
        // Without a ramp configured (a word no build makes) the ramp is over at once.
        let length = self.config.ramp_up.unwrap_or(0);
        let elapsed = now.saturating_sub(started);
        if elapsed < length {
            return Ok(ramp::admit(r, ramp::share(elapsed, length)));
        }
        let update = self.transition(s, |cur| {
            (cur == s).then(|| (cur.next(State::Closed, 0), now))
        });
        Err(self.announce(update, Reason::RampCompleted, WindowCounts::default(), 0))
    }

    /// Takes one of the half-open round's slots for generation `s`.
    fn take_probe(&self, s: Snapshot) -> Probe {
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
                match (cur.generation() == generation, update) {
                    (true, TagUpdate::Updated { .. }) => Probe::Taken,
                    (true, _) => Probe::Full,
                    (false, _) => Probe::Retry(cur),
                }
            }
        }
    }

    /// Gives a probe slot of `generation`'s round back (an ignored or dropped probe).
    fn release_probe(&self, generation: Generation) {
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

    // ---- outcomes --------------------------------------------------------------

    /// Records the outcome of an admitted call.
    #[inline]
    pub(crate) fn record(&self, ticket: Ticket, outcome: Outcome) {
        self.record_in(self.hot.stripes.mine(), ticket, outcome);
    }

    /// Records an outcome, counting in the stripe `r` of the calling thread.
    ///
    /// Always inlined: the common case (see [`record_lean_success`]) is a few loads,
    /// compares and increments, and a call boundary (saving and restoring registers
    /// around it) would cost as much again. Everything else is out of line.
    ///
    /// [`record_lean_success`]: Self::record_lean_success
    #[inline(always)]
    pub(crate) fn record_in(&self, r: StripeRef<'_>, ticket: Ticket, outcome: Outcome) {
        if outcome == Outcome::Success && ticket.kind() == Kind::Closed {
            // The same generation means the same word: the phase the call was
            // admitted in, still Closed.
            let current = self.hot.word.load();
            if current == ticket.phase()
                && self.record_lean_success(r, current, ticket, self.hot.lean)
            {
                return;
            }
        }
        self.record_general(r, ticket, outcome);
    }

    /// Records any outcome: stale, ignored, failed, slow, a probe's, or a success
    /// that must clear the streak or rotate the window. Not marked cold: failures
    /// are the common case of a failing dependency.
    #[inline(never)]
    fn record_general(&self, r: StripeRef<'_>, ticket: Ticket, outcome: Outcome) {
        let s = self.hot.word.load();
        if s != ticket.phase() {
            // Admitted under an earlier phase: the breaker has moved on, and this
            // result must not decide the new phase.
            Stripes::bump(r, Counter::Stale);
            return;
        }
        let failed = match outcome {
            Outcome::Ignored => {
                Stripes::bump(r, Counter::Ignored);
                if ticket.kind() == Kind::Probe {
                    self.release_probe(ticket.generation());
                }
                return;
            }
            Outcome::Success => false,
            Outcome::Failure => true,
        };
        let slow = self.is_slow(ticket);
        if failed {
            self.bump_and_check_clock(r, Counter::Failures);
        } else {
            Stripes::bump(r, Counter::Successes);
        }
        if slow {
            Stripes::bump(r, Counter::Slow);
        }
        match ticket.kind() {
            Kind::Closed | Kind::Ramp => self.record_closed(r, s, Sample { failed, slow }, true),
            Kind::Probe if failed || slow => {
                let _ = self.reopen(s, self.ticks(), Reason::ProbeFailed);
            }
            Kind::Probe => self.probe_succeeded(s),
            Kind::Disabled => {}
        }
    }

    /// Records a permit dropped without an outcome, counted as dropped (and nothing
    /// else, if stale). In its own phase it is a failure if `on_drop` says so, and
    /// slow if it ran past the slow-call threshold; a slow call that is not a
    /// failure leaves the streak as it is. Neither: ignored, its probe slot back.
    #[inline(never)]
    pub(crate) fn abandon(&self, ticket: Ticket) {
        let r = self.hot.stripes.mine();
        Stripes::bump(r, Counter::Dropped);
        let s = self.hot.word.load();
        if s != ticket.phase() {
            return; // stale: the breaker has moved on
        }
        let failed = self
            .config
            .on_drop
            .is_failure(|| ticket.elapsed(self.age_reading()));
        let slow = self.is_slow(ticket);
        if slow {
            Stripes::bump(r, Counter::Slow);
        }
        match ticket.kind() {
            Kind::Probe if failed || slow => {
                let _ = self.reopen(s, self.ticks(), Reason::ProbeFailed);
            }
            Kind::Probe => self.release_probe(ticket.generation()),
            Kind::Closed | Kind::Ramp if failed || slow => {
                self.record_closed(r, s, Sample { failed, slow }, false);
            }
            Kind::Closed | Kind::Ramp | Kind::Disabled => {}
        }
    }

    /// Bumps `counter` (a rejection's or a failure's), and on every 256th count in
    /// the stripe has the clock check that its
    /// cheap reading still moves ([`Clock::revive`]: the default clock's refresh
    /// thread does not survive a `fork()`). Those paths read no clock but the cheap
    /// reading, so this is how a forked child's breaker notices; the test costs
    /// two instructions.
    #[inline(always)]
    fn bump_and_check_clock(&self, r: StripeRef<'_>, counter: Counter) {
        if Stripes::bump_to_multiple_of_256(r, counter) {
            self.revive_clock();
        }
    }

    #[cold]
    #[inline(never)]
    fn revive_clock(&self) {
        self.clock.revive();
    }

    #[inline]
    fn is_slow(&self, ticket: Ticket) -> bool {
        self.config
            .slow_calls
            .is_some_and(|s| ticket.elapsed(self.timer(s)) > s.threshold_nanos.get())
    }

    /// The reading a call's age is measured with: the slow-call policy's timer if
    /// it is on, else the cheap reading (see [`Lean::TIMED`]).
    #[inline]
    fn age_reading(&self) -> u64 {
        match self.config.slow_calls {
            Some(slow) => self.timer(slow),
            None => self.clock.now(),
        }
    }

    /// The reading that times calls for the slow-call policy (see `Builder::slow_calls`).
    #[inline]
    fn timer(&self, slow: SlowCalls) -> u64 {
        if slow.precise() {
            self.precise()
        } else {
            self.clock.now()
        }
    }

    /// [`Clock::precise`], out of line and marked cold: it costs tens of
    /// nanoseconds anyway, and a call the compiler sees as likely makes every
    /// call through the breaker save and restore registers around it.
    #[inline(never)]
    #[cold]
    fn precise(&self) -> u64 {
        self.clock.precise()
    }

    /// Counts a closed or recovering phase's outcome and trips if a policy says
    /// so: a closed phase to Open at level 0, a recovering one at the next level
    /// ([`Reason::RampFailed`]). A sample that is no failure clears the streak if
    /// `clears_streak` (a success does; a slow dropped call does not).
    // Inlined into its callers: called, it costs the failure path about 30
    // instructions of saved registers (callgrind: 136 against 106 a failure).
    #[inline(always)]
    fn record_closed(&self, r: StripeRef<'_>, s: Snapshot, sample: Sample, clears_streak: bool) {
        let generation = s.generation();
        let mut streak = 0;
        if self.config.consecutive_failures.is_some() {
            if sample.failed {
                streak = self.bump_streak(generation);
            } else if clears_streak {
                self.clear_streak(generation);
            }
        }
        let mut window = WindowCounts::default();
        let mut reason =
            policy::streak_trips(&self.config, streak).then_some(Reason::ConsecutiveFailures);
        if let Some(w) = &self.window {
            let now = self.clock.now();
            w.record(&self.hot.stripes, r, (s, &self.hot.word), now, sample);
            if sample.failed || sample.slow {
                // SeqCst: two failures recorded at once must not both miss each other's
                // count (store buffering); with this fence between each one's write
                // and its read, the later of the two sees both.
                fence(Ordering::SeqCst);
                window = w.counts(&self.hot.stripes, generation, now);
                reason = reason.or_else(|| policy::rate_trip(&self.config, window));
            }
        }
        if let Some(mut reason) = reason {
            self.revive_clock(); // a trip's cooldown starts at the true time
            let now = self.ticks();
            let mut level = 0;
            if s.is(State::Recovering) {
                (level, reason) = (self.next_level(s), Reason::RampFailed);
            }
            let update = self.transition(s, |cur| {
                (cur.generation() == generation && cur.state() == s.state())
                    .then(|| self.opened(cur, level, now))
            });
            let _ = self.announce(update, reason, window, streak);
        }
    }

    /// Adds a failure to `generation`'s streak and returns the new length (0 if the
    /// breaker has moved past `generation`: a stale failure must not touch a later
    /// phase's streak). Saturates at `u32::MAX`.
    fn bump_streak(&self, generation: Generation) -> u64 {
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
    fn clear_streak(&self, generation: Generation) {
        let _ = self
            .phase
            .streak
            .update(generation, &self.hot.word, |_| Some(0));
    }

    fn probe_succeeded(&self, s: Snapshot) {
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
        if Round::from_data(new).succeeded >= self.config.half_open_probes {
            let now = self.ticks();
            // With a ramp, the breaker recovers at the round's level: a trip during
            // the ramp reopens at the next one.
            let (to, level) = match self.config.ramp_up {
                Some(_) => (State::Recovering, s.level()),
                None => (State::Closed, 0),
            };
            let update = self.transition(s, |cur| {
                (cur.generation() == generation && cur.state() == State::HalfOpen)
                    .then(|| (cur.next(to, level), now))
            });
            let _ = self.announce(update, Reason::ProbesSucceeded, WindowCounts::default(), 0);
        }
    }

    /// HalfOpen `s` → Open at the next backoff level. Returns the newest word.
    /// (`now` was read by the caller; the clock is checked for the next reading.)
    fn reopen(&self, s: Snapshot, now: u64, reason: Reason) -> Snapshot {
        self.revive_clock();
        let generation = s.generation();
        let level = self.next_level(s);
        let update = self.transition(s, |cur| {
            (cur.generation() == generation && cur.state() == State::HalfOpen)
                .then(|| self.opened(cur, level, now))
        });
        self.announce(update, reason, WindowCounts::default(), 0)
    }

    /// The backoff level a reopening of `s` moves to.
    fn next_level(&self, s: Snapshot) -> u8 {
        s.level().saturating_add(1).min(self.config.max_level())
    }

    /// Counts and delivers a transition this thread made, after its CAS and with
    /// nothing held. Returns the newest word either way.
    fn announce(
        &self,
        update: Update,
        reason: Reason,
        window: WindowCounts,
        streak: u64,
    ) -> Snapshot {
        self.deliver(update, reason, window, streak, |_, start| start)
    }

    /// [`announce`](Self::announce), with the transition's time given by `at`
    /// (from the new word and its start).
    fn deliver(
        &self,
        update: Update,
        reason: Reason,
        window: WindowCounts,
        streak: u64,
        at: impl FnOnce(Snapshot, u64) -> u64,
    ) -> Snapshot {
        let (from, to, start) = match update {
            Update::Declined(cur) => return cur,
            Update::Moved { from, to, start } => (from, to, start),
        };
        // Relaxed: a statistic; the event itself is ordered by the CAS.
        self.phase.transitions[reason.index()].fetch_add(1, Ordering::Relaxed);
        let event = Transition {
            from: from.state(),
            to: to.state(),
            generation: to.generation(),
            reason,
            at: ticks_to_duration(at(to, start).saturating_sub(self.bias)),
            level: to.level(),
            window,
            consecutive_failures: streak,
            open_until: to
                .is(State::Open)
                .then(|| ticks_to_duration(self.time_of(to, start).saturating_sub(self.bias))),
        };
        // The built-in observers (the exporters of the enabled features), then the
        // user's listener.
        for observe in crate::OBSERVERS {
            observe(&self.config.name, &event);
        }
        if let Some(listener) = &self.listener {
            listener(&event);
        }
        to
    }

    // ---- time ------------------------------------------------------------------

    /// The current tick (milliseconds since the breaker was built, plus `bias`).
    #[inline]
    fn ticks(&self) -> u64 {
        self.ticks_at(self.clock.now())
    }

    /// The tick of the clock reading `reading`.
    #[inline]
    fn ticks_at(&self, reading: u64) -> u64 {
        self.bias + ticks_from_nanos(reading.saturating_sub(self.origin))
    }

    /// The Open word that follows `cur` at `now`, at backoff `level`, and when it
    /// starts.
    fn opened(&self, cur: Snapshot, level: u8, now: u64) -> (Snapshot, u64) {
        (cur.next(State::Open, level), now)
    }

    /// The time of phase `s` if it starts at `start` (see [`TimeSlot`]): for Open
    /// its deadline, `start` plus the cooldown of its level and generation
    /// (jittered, the same for every thread), so a rejection compares the clock
    /// with the deadline and computes nothing; otherwise `start`.
    fn time_of(&self, s: Snapshot, start: u64) -> u64 {
        if s.is(State::Open) {
            start
                .saturating_add(self.cooldown(s.level(), s.generation()))
                .min(self.ticks_max)
        } else {
            start
        }
    }

    /// The time of phase `s` (see [`time_of`](Self::time_of)), the same for every
    /// thread; `None` if the breaker has moved past `s`: the caller's word is stale.
    #[inline]
    fn phase_ticks(&self, s: Snapshot) -> Option<u64> {
        self.phase
            .time
            .start_of(s)
            .map(|start| self.time_of(s, start))
    }

    /// As [`phase_ticks`](Self::phase_ticks), or, if `s` is over already, what it
    /// would be had it started at `now` (a reader that only reports).
    fn peek_ticks(&self, s: Snapshot, now: u64) -> u64 {
        self.time_of(s, self.phase.time.start_of(s).unwrap_or(now))
    }

    /// The jittered cooldown, in ticks, of an Open phase at `level` in `generation`.
    fn cooldown(&self, level: u8, generation: Generation) -> u64 {
        self.config.cooldown(level, generation, self.seed)
    }

    /// How long a call rejected by a full half-open round of `s` should wait, at
    /// `now`, with the round's timeout at `ends`: until the round can end, but no
    /// longer than the cooldown a failed round would start. The round ends when its
    /// probes report, usually within a call's time: if they close the breaker, a
    /// retry is admitted; if they reopen it, a probe is next admitted after that
    /// cooldown. Waiting for the whole half-open timeout (30 s by default) would
    /// overshoot both.
    fn half_open_retry(&self, s: Snapshot, ends: u64, now: u64) -> u64 {
        let reopened = self.cooldown(self.next_level(s), next_generation(s.generation()));
        ends.saturating_sub(now).min(reopened)
    }

    /// The `retry_after` of phase `s`, whose time is `ticks`, at `now`.
    fn retry_after(&self, s: Snapshot, ticks: u64, now: u64) -> Option<Duration> {
        match s.state() {
            State::Open => Some(ticks_to_duration(ticks.saturating_sub(now))),
            State::HalfOpen => {
                let round = Round::from_data(self.phase.round.data_for(s.generation()));
                if round.issued < self.config.half_open_probes {
                    Some(Duration::ZERO) // a probe slot is free now
                } else {
                    let ends = ticks.saturating_add(self.config.half_open_timeout);
                    Some(ticks_to_duration(self.half_open_retry(s, ends, now)))
                }
            }
            State::ForcedOpen => None,
            // Recovering: the next call is admitted with the ramp's current share.
            State::Closed | State::Disabled | State::Recovering => Some(Duration::ZERO),
        }
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
        b.phase.streak = TaggedWord::holding(start.word.generation(), start.streak);
        if let (Some(w), Some(counts)) = (&b.window, start.window) {
            w.seed(&b.hot.stripes, (start.word, &b.hot.word), b.origin, counts);
        }
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
                true => self.phase.streak.data_for(s.generation()),
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

/// Whether phase `s` counts its calls against the trip policies (in the window
/// and the streak): Closed, and Recovering.
fn counts_calls(s: Snapshot) -> bool {
    s.is_closed() || s.is(State::Recovering)
}

fn ticks_to_duration(ticks: u64) -> Duration {
    Duration::from_nanos(ticks.saturating_mul(NANOS_PER_TICK))
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

#[cfg(all(test, not(cutout_loom)))]
mod tests {
    use super::*;
    use crate::ManualClock;

    fn breaker() -> CircuitBreaker<ManualClock> {
        CircuitBreaker::builder()
            .consecutive_failures(5)
            .clock(ManualClock::new())
            .build()
            .unwrap()
    }

    /// [`breaker`] after `g` resets: at generation `g`.
    fn at_generation(g: u32) -> CircuitBreaker<ManualClock> {
        let b = breaker();
        for _ in 0..g {
            b.reset();
        }
        assert_eq!(b.hot.word.load().generation(), g);
        b
    }

    #[test]
    fn a_threads_first_call_gives_it_a_slot_and_every_call_is_counted() {
        let clock = ManualClock::new();
        let b = CircuitBreaker::builder()
            .window(Duration::from_secs(1), 2)
            .failure_rate(0.5, 100)
            .clock(clock)
            .build()
            .unwrap();
        let assigned = std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let before = crate::slot::assigned();
                    for _ in 0..3 {
                        assert!(b.call(|| Ok::<_, ()>(())).is_ok());
                    }
                    (before, crate::slot::assigned())
                })
                .join()
                .unwrap()
        });
        assert_eq!(assigned, (false, true), "its first call gave it a slot");
        let m = b.metrics();
        assert_eq!((m.lifetime.admitted, m.lifetime.successes), (3, 3));
        assert_eq!(m.window.calls, 3);
    }

    /// A `ManualClock` whose reading is never "a load away", like the default clock
    /// without its refresh thread: every call leaves the lean path.
    struct NoCheapReading(ManualClock);

    impl Clock for NoCheapReading {
        fn now(&self) -> u64 {
            self.0.now()
        }
        fn now_if_cheap(&self) -> Option<u64> {
            None
        }
    }

    /// Runs one script of successes, failures and slow calls across bucket edges on
    /// a breaker with every policy, timed by `clock`; returns what it counted.
    fn scripted<C: Clock>(clock: C, time: &ManualClock) -> (State, WindowCounts, u64, Lifetime) {
        let b = CircuitBreaker::builder()
            .window(Duration::from_secs(10), 10)
            .failure_rate(0.9, 100)
            .slow_calls(Duration::from_millis(200), 0.9)
            .consecutive_failures(50)
            .clock(clock)
            .build()
            .unwrap();
        for i in 0..40u64 {
            let _ = b.call(|| {
                if i % 7 == 3 {
                    time.advance(Duration::from_millis(250)); // slow
                }
                if i % 5 == 0 { Err(i) } else { Ok(i) }
            });
            time.advance(Duration::from_millis(100)); // crosses bucket edges
        }
        let m = b.metrics();
        (m.state, m.window, m.consecutive_failures, m.lifetime)
    }

    /// Trips a consecutive-failures breaker timed by `clock`, then calls it during
    /// and after the cooldown; returns the rejections' `retry_after` and the counts.
    fn rejected<C: Clock>(clock: C, time: &ManualClock) -> (Vec<Option<Duration>>, Lifetime) {
        let b = CircuitBreaker::builder()
            .consecutive_failures(2)
            .open_duration(Duration::from_secs(1))
            .clock(clock)
            .build()
            .unwrap();
        let mut retry = Vec::new();
        for _ in 0..2 {
            let _ = b.call(|| Err::<(), _>(()));
        }
        for _ in 0..4 {
            time.advance(Duration::from_millis(300));
            if let Err(Error::Rejected(r)) = b.call(|| Ok::<_, ()>(())) {
                retry.push(r.retry_after());
            }
        }
        (retry, b.metrics().lifetime)
    }

    #[test]
    fn calls_off_the_lean_path_count_exactly_as_on_it() {
        let time = ManualClock::new();
        let lean = scripted(time.clone(), &time);
        let time = ManualClock::new();
        assert_eq!(lean, scripted(NoCheapReading(time.clone()), &time));
        let (_, window, _, lifetime) = lean;
        assert_eq!(
            (lifetime.admitted, lifetime.failures, lifetime.slow),
            (40, 8, 6)
        );
        assert!(window.calls > 0 && window.slow > 0, "{window:?}");

        let time = ManualClock::new();
        let lean = rejected(time.clone(), &time);
        let time = ManualClock::new();
        assert_eq!(lean, rejected(NoCheapReading(time.clone()), &time));
        let ms = Duration::from_millis;
        assert_eq!(lean.0, [Some(ms(700)), Some(ms(400)), Some(ms(100))]);
        assert_eq!((lean.1.rejected, lean.1.successes), (3, 1));
    }

    /// The owner's cached deadline belongs to one Open phase: a later Open phase,
    /// with an earlier deadline, is never judged by it, and the window's
    /// live-bucket cache, which shares its key word, counts right after it.
    #[test]
    fn a_cached_open_deadline_follows_the_phase() {
        let clock = ManualClock::new();
        let b = CircuitBreaker::builder()
            .window(Duration::from_secs(10), 10)
            .failure_rate(0.5, 2)
            .open_duration(Duration::from_secs(1))
            .clock(clock.clone())
            .build()
            .unwrap();
        let ms = Duration::from_millis;
        let retry = |b: &CircuitBreaker<ManualClock>| match b.call(|| Ok::<_, ()>(())) {
            Err(Error::Rejected(r)) => r.retry_after(),
            other => panic!("expected a rejection, got {other:?}"),
        };
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    for _ in 0..2 {
                        let _ = b.call(|| Err::<(), _>(()));
                    }
                    assert_eq!(retry(&b), Some(ms(1000))); // fills the cache
                    let o = b.hot.stripes.mine_if_owned().expect("an owned stripe");
                    assert_eq!(
                        o.scratch(PHASE_KEY).load(Ordering::Relaxed),
                        b.hot.word.load().key()
                    );
                    clock.advance(ms(400));
                    assert_eq!(retry(&b), Some(ms(600))); // from the cache
                    clock.advance(ms(600));
                    let _ = b.call(|| Err::<(), _>(())); // the probe fails: 2 s
                    assert_eq!(retry(&b), Some(ms(2000))); // cached: 2 s from now
                    // A new Open phase with a shorter cooldown: the cached deadline,
                    // a second later than its end, is another phase's.
                    b.reset();
                    for _ in 0..2 {
                        let _ = b.call(|| Err::<(), _>(()));
                    }
                    clock.advance(ms(1000));
                    assert!(b.call(|| Ok::<_, ()>(())).is_ok()); // the probe closes
                    for _ in 0..3 {
                        assert!(b.call(|| Ok::<_, ()>(())).is_ok());
                    }
                    let m = b.metrics();
                    assert_eq!(
                        (m.state, m.window.calls, m.window.failures),
                        (State::Closed, 3, 0)
                    );
                    assert_eq!(m.lifetime.rejected, 3);
                })
                .join()
                .unwrap();
        });
    }

    #[test]
    fn the_words_the_lean_paths_load_come_first_in_their_lines() {
        /// Where a load of `size` bytes at `field` ends in its 64 bytes.
        fn end<T>(field: &T, size: usize) -> usize {
            field as *const T as usize % 64 + size
        }
        let b = breaker();
        for end in [
            end(&b.hot.word, size_of::<StateWord>()),
            end(&b.hot.lean, size_of::<Lean>()),
            end(&b.hot.lean_slow_nanos, 8),
            // The counter lines' pointer and length: the first field of `Stripes`.
            end(&b.hot.stripes, 2 * size_of::<usize>()),
            end(&b.phase.streak, 8),
            end(&b.phase.time, 8),
        ] {
            assert!(
                end <= crate::stripe::LEAN_LOADS,
                "a load ends at byte {end}"
            );
        }
    }

    #[test]
    fn a_stale_failure_leaves_a_later_phases_streak_alone() {
        let mut b = at_generation(3);
        b.phase.streak = TaggedWord::holding(3, 3);
        assert_eq!(b.bump_streak(2), 0, "generation 2 is over");
        assert_eq!(b.phase.streak.data_for(3), 3);
        assert_eq!(b.bump_streak(3), 4);
        b.reset();
        assert_eq!(b.bump_streak(4), 1, "a new phase starts its own streak");
        assert_eq!(b.phase.streak.data_for(4), 1);
    }

    #[test]
    fn a_success_empties_its_own_or_an_earlier_streak_but_not_a_later_one() {
        let mut b = at_generation(3);
        b.phase.streak = TaggedWord::holding(3, 3);
        b.clear_streak(2);
        assert_eq!(
            b.phase.streak.data_for(3),
            3,
            "a later phase's streak stays"
        );
        b.clear_streak(3);
        assert!(b.phase.streak.is_empty_relaxed());
        b.phase.streak = TaggedWord::holding(3, 3);
        b.reset();
        b.reset();
        b.clear_streak(5);
        assert!(
            b.phase.streak.is_empty_relaxed(),
            "an earlier phase's streak is emptied"
        );
    }
}
