//! [`CircuitBreaker`]: admission, outcome recording and manual control. The only
//! place that reads the clock.
//!
//! # Orderings
//! The state word, the time slot and the tagged words (the half-open round, the
//! consecutive-failure streak) are changed by `AcqRel` CAS and loaded with
//! `Acquire` (see [`crate::state`]), except the lean path's streak check, which is
//! `Relaxed` (see [`TaggedWord::is_empty_relaxed`]).
//! Lifetime counters and window counts are `Relaxed` (see [`crate::stripe`]). A
//! failure or slow call counted in the window takes a number from the failure
//! budget's count by an `AcqRel` increment between counting itself and summing the
//! window, so of two racing failures the later-numbered sees both (see
//! `window::budget`).

use crate::attach::Attachment;
use crate::clock::{Clock, DefaultClock};
use crate::config::{Builder, Config, Listener, SlowCalls};
use crate::event::{Reason, Transition};
use crate::metrics::{Lifetime, Metrics};
use crate::permit::{Kind, Outcome, OwnedPermit, Permit, Ticket};
use crate::policy;
use crate::ramp;
use crate::saved;
use crate::state::{
    Generation, NANOS_PER_TICK, Round, Snapshot, StateWord, TagUpdate, TaggedWord, TimeSlot,
    Update, ticks_from_duration, ticks_from_nanos,
};
use crate::stripe::{Counter, NEWEST_OR_DEADLINE, Owned, PHASE_KEY, StripeRef, Stripes};
use crate::sync::{AtomicU64, Ordering};
use crate::util::{random_seed, splitmix64};
use crate::window::WindowCounts;
use crate::window::{self, Sample, Window};
use crate::{Error, Rejected, State};
use crossbeam_utils::CachePadded;
use std::fmt;
use std::time::Duration;

mod admission;
mod announce;
mod candidates;
mod layout;
mod manual;
mod phase;
pub(crate) use phase::STREAK_MAX;
mod record;
mod report;
mod shadow;
mod time;
mod transitions;

use layout::{Hot, Lean, Phase, unlikely};
use phase::Probe;
use shadow::Shadowing;
use time::ticks_to_duration;

/// A lock-free circuit breaker.
///
/// Share it by reference or in an `Arc`; every method takes `&self`. See the
/// [crate docs](crate) for the model and [`Builder`] for the settings.
///
/// A `&CircuitBreaker` crosses `catch_unwind` (it is `RefUnwindSafe`): a panic
/// in a call leaves the breaker consistent (the call counts as dropped), and so
/// does a listener's, which reaches the caller once the transition is made (a
/// listener added after the one that panicked misses that transition).
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
    /// The window's shape and failure budget, a line of its own (see [`Window`]):
    /// allocated, so that a breaker without a window does not hold the line.
    window: Option<Box<Window>>,
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
    /// Transitions by reason: written only with a transition, read by metrics.
    transitions: [AtomicU64; Reason::ALL.len()],
    /// Dropped calls counted as failures (in their own phase): added to the
    /// striped `Failures` count in [`Lifetime::failures`](crate::Lifetime::failures),
    /// so that a trip on timed-out calls shows failures. Off the lean paths: only a
    /// drop that `on_drop` makes a failure writes it.
    dropped_failures: AtomicU64,
    /// What a shadow breaker, a candidate, or a breaker with candidates keeps
    /// (see [`Shadowing`]); `None` for any other, which then holds one pointer
    /// for it (the breaker's tail has no room for more).
    shadowing: Option<Box<Shadowing<C>>>,
    /// What an integration keeps beside the breaker (see [`Attachment`]).
    pub(crate) attached: Attachment,
}

// Every field a panic could leave half-written is an atomic (or a lock-free map
// of them) changed by one store or CAS; a listener, user code, runs once its
// transition is stored. So a panic leaves nothing that a later call misreads.
impl<C: std::panic::RefUnwindSafe> std::panic::RefUnwindSafe for CircuitBreaker<C> {}
impl<C: std::panic::UnwindSafe> std::panic::UnwindSafe for CircuitBreaker<C> {}

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

impl<C> CircuitBreaker<C> {
    /// The name as the builder holds it: cloning it copies a pointer for a
    /// `&'static str` name.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) fn name_cow(&self) -> &std::borrow::Cow<'static, str> {
        &self.config.name
    }
}

impl<C: Clock> CircuitBreaker<C> {
    /// This breaker with its seed fixed (see `Builder::seeded`), before any call.
    pub(crate) fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    pub(crate) fn from_parts(config: Config, clock: C, listener: Option<Listener>) -> Self {
        let origin = clock.now();
        Self::from_parts_at(config, clock, listener, origin)
    }

    /// [`from_parts`](Self::from_parts), built at clock reading `origin` (a
    /// candidate's is its live breaker's, so their times count from one build).
    fn from_parts_at(config: Config, clock: C, listener: Option<Listener>, origin: u64) -> Self {
        let bias = config.max_cooldown();
        let window = config.window.map(|w| Box::new(Window::new(w, origin)));
        let stripes = Stripes::new(window.as_ref().map_or(0, |w| w.buckets()));
        let seed = splitmix64(origin ^ random_seed());
        CircuitBreaker {
            hot: CachePadded::new(Hot {
                word: StateWord::new(),
                lean_slow_nanos: config.slow_calls.map_or(u32::MAX, |slow| {
                    let past = slow.threshold_nanos.get().saturating_add(1);
                    u32::try_from(past).unwrap_or(u32::MAX)
                }),
                lean: Lean::of(&config),
                stripes,
            }),
            phase: CachePadded::new(Phase {
                time: TimeSlot::starting(Snapshot::INITIAL, bias),
                round: TaggedWord::new(),
                streak: TaggedWord::new(),
                tripped: std::array::from_fn(|_| TaggedWord::new()),
            }),
            transitions: std::array::from_fn(|_| AtomicU64::new(0)),
            dropped_failures: AtomicU64::new(0),
            shadowing: config.shadow.then(|| Box::new(Shadowing::new())),
            attached: Attachment::default(),
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
    /// [`Rejected`] when the breaker is open, forced open, half-open with every
    /// probe slot taken, or recovering ([`ramp_up`](crate::Builder::ramp_up))
    /// and shedding the call: [`Rejected::state`] says which.
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
    // Always inlined, as `acquire` and `Permit::record` are: a future that calls
    // them from its `poll` (`call_async`'s) keeps its lean paths inline even where
    // the compiler, given the choice, would call them (a poll of its own, as a task
    // polls it: 167 instructions a call with the choice, 139 without).
    #[inline(always)]
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
    /// A panic in `f` propagates unchanged; the permit's drop counts the call as
    /// dropped and records it as [`Dropped`](crate::Dropped) says: ignored by
    /// default (a half-open slot comes back), slow if the slow-call policy is on
    /// and it ran past the threshold, a failure if
    /// [`Builder::on_drop`](crate::Builder::on_drop) says so. It never holds a
    /// half-open slot.
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
    // Always inlined, as `call_with` is: see there.
    #[inline(always)]
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
    // Always inlined: an instantiation called from several places (the same `fn`
    // item or classifier at each) is otherwise a function of its own, whose
    // `Result` (24 bytes for a `u64` and an `Error<&str>`) comes back through
    // memory, written a word at a time and read back at once by a wider load
    // where the caller keeps it whole (as criterion's `black_box` does): a
    // store-forwarding stall, 8-10 ns a closed call against 2 inlined
    // (`benches/user.rs`, "not inlined"; `docs/PERFORMANCE.md`). Inlined, the
    // `Result` is made where the caller keeps it. The lean path is small:
    // everything else is out of line (`admit_off_lean`, `record_off_lean`,
    // `record_success_off_lean`, `record_general`).
    #[inline(always)]
    pub fn call_with<T, E>(
        &self,
        classify: impl FnOnce(&Result<T, E>) -> Outcome,
        f: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, Error<E>> {
        let s = self.hot.word.load();
        // The lean path: a closed admission by a thread that owns its stripe, timed
        // (if the slow-call policy times calls) by a cheap reading, and a success
        // recorded by the common case (`record_lean_success`). Every other
        // admission is made by `admit_off_lean`, every other outcome recorded by
        // `record_general`, both out of line. The rare paths hand back only the
        // admission, never the call's `Result`: it is made in one place, here,
        // where the caller keeps it (a `Result` from a function of its own came
        // back through memory and joined the lean one there, and the caller read
        // it back before matching on it: a `?` cost 1.4x an `.is_ok()`).
        let admitted = 'lean: {
            if !s.is_closed() {
                // An Open rejection inside the cooldown, inline too: one compare of
                // the clock with the deadline the thread keeps in its own stripe for
                // this word (`reject_cached`). Only for a thread that owns its stripe
                // and has been rejected in this phase before; any other (its first
                // call to this breaker included) takes `admit_off_lean`, which gives
                // it its slot and stripe and fills that cache. So the path calls
                // nothing, and saves no registers for a call.
                if s.is(State::Open) {
                    if let Some(o) = self.hot.stripes.mine_if_owned() {
                        if let Some(rejected) = self.reject_cached(o, s) {
                            return Err(Error::Rejected(rejected));
                        }
                    }
                }
                break 'lean None;
            }
            // Acquire and record run on this thread: one stripe lookup serves both.
            // A thread without a slot yet reads as owning no stripe, so it takes
            // `admit_off_lean`, which gives it one.
            let Some(o) = self.hot.stripes.mine_if_owned() else {
                break 'lean None;
            };
            let lean = self.hot.lean;
            let started = match lean.has(Lean::TIMED | Lean::PRECISE | Lean::OFFERS_TIMED) {
                false => 0,
                true => {
                    unlikely(); // the slow-call policy is the least common
                    match self.clock.now_if_cheap() {
                        Some(now) if !lean.has(Lean::PRECISE | Lean::OFFERS_PRECISE) => now,
                        _ => break 'lean None,
                    }
                }
            };
            o.bump(Counter::Admitted);
            Some((o.stripe(), Ticket::new(s, started), Some(lean)))
        };
        let (r, ticket, lean) = match admitted {
            Some(admitted) => admitted,
            None => match self.admit_off_lean(s) {
                Ok((r, ticket)) => (r, ticket, None),
                Err(rejected) => return Err(Error::Rejected(rejected)),
            },
        };
        let permit = Permit::new(self, ticket);
        let result = f(); // a panic drops the permit: recorded as dropped
        let outcome = classify(&result);
        let ticket = permit.into_ticket();
        match (outcome, lean) {
            // The same word as at admission (every transition moves the generation
            // on): still the phase the call was admitted in.
            (Outcome::Success, Some(lean))
                if self.hot.word.load() == s
                    && self.record_lean_success::<true>(r, s, ticket, lean) => {}
            (Outcome::Success, Some(_)) => self.record_success_off_lean(r, ticket),
            (_, Some(_)) => self.record_general(r, ticket, outcome),
            (_, None) => self.record_off_lean(r, ticket, outcome),
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

    /// [`record_in`](Self::record_in) for a call [`admit_off_lean`](Self::admit_off_lean)
    /// admitted.
    #[inline(never)]
    #[cold]
    fn record_off_lean(&self, r: StripeRef<'_>, ticket: Ticket, outcome: Outcome) {
        self.record_in(r, ticket, outcome);
    }

    /// [`call_with`](Self::call_with)'s admission off its lean path: a rejection,
    /// a probe, a disabled breaker's call, a call timed by a precise reading, or
    /// one by a thread without a stripe of its own. The stripe to record in and the
    /// ticket, or the rejection.
    #[inline(never)]
    #[cold]
    fn admit_off_lean(&self, s: Snapshot) -> Result<(StripeRef<'_>, Ticket), Rejected> {
        let r = self.hot.stripes.mine();
        let ticket = match s.is_closed() {
            true => self.admit(r, s),
            false => self.acquire_not_closed(r, s)?,
        };
        Ok((r, ticket))
    }

    /// Records the success of a call admitted in Closed if it is the common case:
    /// no streak to clear, a cheap clock reading, not slow (by a cheap reading), in
    /// the window's live bucket (which only a thread that owns its stripe has).
    /// `phase` is the state word the call was admitted under, which the caller has
    /// just loaded again: the phase is still current. Returns `false` having
    /// written nothing otherwise: [`record_general`](Self::record_general) does the rest.
    ///
    /// `INLINE_OFFER`: `call_with` (alone) offers a success to a breaker's
    /// candidates inline where their shape allows (see the `candidates`
    /// module); the other callers, whose lean paths (the tower layer's, a
    /// permit's) the inline code would crowd, call `record_offering`.
    #[inline(always)]
    fn record_lean_success<const INLINE_OFFER: bool>(
        &self,
        r: StripeRef<'_>,
        phase: Snapshot,
        ticket: Ticket,
        lean: Lean,
    ) -> bool {
        // The streak word is read whatever the policy (without one it holds at most
        // the mark of a rate check due, `phase::CHECK_DUE`, which sends a success
        // here to its check): a load costs less here than a branch around it.
        if !self.phase.streak.is_empty_relaxed() {
            return false;
        }
        // The slow-call policy and what-if candidates (`Lean::OFFERS`) are tested
        // before the reading, by the mask that sends a window here: a breaker
        // with candidates records its success and offers it to them (inline in
        // `call_with` for the shapes `Lean::INLINE_WINDOWED` and `INLINE_QUIET`
        // name, else in `record_offering`), reading the clock only if a window
        // needs it.
        if lean.has(Lean::WINDOW | Lean::OFFERS) {
            let now = match lean.has(Lean::TIMED | Lean::PRECISE | Lean::OFFERS) {
                false => self.clock.now_if_cheap(),
                true => {
                    unlikely();
                    // A precise reading too: `record_offering` sends it on.
                    if lean.has(Lean::PRECISE | Lean::OFFERS) {
                        let Some(o) = r.as_owned() else {
                            return false;
                        };
                        if INLINE_OFFER && lean.matches(Lean::INLINE_WINDOWED) {
                            return self.record_offering_windowed(o, phase);
                        }
                        if INLINE_OFFER && lean.matches(Lean::INLINE_QUIET) {
                            self.record_offering_quiet(o);
                            return true;
                        }
                        self.record_offering(o, ticket);
                        return true;
                    }
                    // The slow-call policy always comes with a window.
                    match self.clock.now_if_cheap() {
                        Some(now) if !self.is_lean_slow(ticket.started(), now) => Some(now),
                        _ => return false,
                    }
                }
            };
            let Some(now) = now else {
                return false;
            };
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

    /// [`record_lean_success`](Self::record_lean_success) past the streak, in the
    /// owned stripe `o`, at the reading `now`, for settings `lean` without
    /// [`Lean::OFFERS`].
    #[inline(always)]
    fn record_lean_success_at(
        &self,
        o: Owned<'_>,
        phase: Snapshot,
        ticket: Ticket,
        lean: Lean,
        now: u64,
    ) -> bool {
        if lean.has(Lean::WINDOW) {
            if lean.has(Lean::TIMED | Lean::PRECISE)
                && (lean.has(Lean::PRECISE) || self.is_lean_slow(ticket.started(), now))
            {
                return false;
            }
            if !window::record_live_success(o, phase, now) {
                return false;
            }
        }
        o.bump(Counter::Successes);
        true
    }

    /// Whether a call started at `started` is past the slow-call threshold at the
    /// cheap reading `now`, as the lean path tells (see [`Hot::lean_slow_nanos`]):
    /// `now` at or past `started` plus that bound (never 0), with no elapsed time
    /// worked out, so a caller that tests it for some breakers only (a what-if
    /// candidate's) pays nothing for the others.
    #[inline(always)]
    fn is_lean_slow(&self, started: u64, now: u64) -> bool {
        started
            .checked_add(u64::from(self.hot.lean_slow_nanos))
            .is_none_or(|slow| now >= slow)
    }

    // ---- outcomes --------------------------------------------------------------

    /// Records the outcome of an admitted call: inline where the calling thread
    /// owns a stripe that exists, the rest (a first call, a thread on a shared
    /// stripe) out of line. Always inlined: see `try_acquire`.
    #[inline(always)]
    pub(crate) fn record(&self, ticket: Ticket, outcome: Outcome) {
        match self.hot.stripes.mine_if_owned() {
            Some(o) => self.record_in(o.stripe(), ticket, outcome),
            None => self.record_in_mine(ticket, outcome),
        }
    }

    /// [`record`](Self::record) from a thread without a stripe of its own.
    #[inline(never)]
    fn record_in_mine(&self, ticket: Ticket, outcome: Outcome) {
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
                && self.record_lean_success::<false>(r, current, ticket, self.hot.lean)
            {
                return;
            }
        }
        self.record_general(r, ticket, outcome);
    }
}

/// Whether phase `s` counts its calls against the trip policies (in the window
/// and the streak): Closed, and Recovering.
fn counts_calls(s: Snapshot) -> bool {
    s.is_closed() || s.is(State::Recovering)
}

#[cfg(all(test, not(cutout_loom)))]
mod tests;
