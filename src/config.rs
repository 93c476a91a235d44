//! The builder, its defaults, and validation into the internal [`Config`].
//!
//! Every setting is stored as given and checked once, in [`Builder::build`]; a bad
//! value is a [`ConfigError`] naming the builder method, never a panic and never a
//! silently clamped value.

use crate::clock::{Clock, DefaultClock};
use crate::dropped::Dropped;
use crate::event::Transition;
use crate::saved::Restore;
use crate::state::{HALF_MAX, LEVEL_MAX, NANOS_PER_TICK, TICKS_MAX};
use crate::stripe;
use crate::{CircuitBreaker, ConfigError};
use std::borrow::Cow;
use std::fmt;
use std::num::NonZeroU64;
use std::sync::Arc;
use std::time::Duration;

mod candidates;
mod validate;

pub(crate) use validate::{Config, Parts, SlowCalls, WindowConfig};

pub(crate) type Listener = Arc<dyn Fn(&Transition) + Send + Sync>;

/// Default trip policy when none is configured: this failure rate ...
const DEFAULT_FAILURE_RATE: f64 = 0.5;
/// ... over at least this many calls in the window ...
const DEFAULT_MINIMUM_CALLS: u32 = 20;
/// ... of this length, split into this many buckets.
const DEFAULT_WINDOW: (Duration, u32) = (Duration::from_secs(10), 10);
const DEFAULT_OPEN_DURATION: Duration = Duration::from_secs(1);
const DEFAULT_MULTIPLIER: f64 = 2.0;
/// `max_open_duration` defaults to the larger of this and `open_duration`.
const DEFAULT_MAX_OPEN_DURATION: Duration = Duration::from_secs(60);
const DEFAULT_HALF_OPEN_TIMEOUT: Duration = Duration::from_secs(30);
/// The name of a breaker built without [`Builder::name`].
pub(crate) const DEFAULT_NAME: &str = "default";

/// Configures and builds a [`CircuitBreaker`]; start with
/// [`CircuitBreaker::builder`].
///
/// Trip policies are active only when configured: [`consecutive_failures`],
/// [`failure_rate`] and [`slow_calls`], in any combination (the breaker trips when
/// any of them says so). With none configured the breaker uses
/// `window(10 s, 10 buckets)` and `failure_rate(0.5, 20)`; configuring any policy
/// replaces that default entirely.
///
/// | setting                | default                              |
/// |------------------------|--------------------------------------|
/// | [`window`]             | 10 s in 10 buckets (when a rate policy is on) |
/// | [`minimum_calls`]      | 20                                   |
/// | [`open_duration`]      | 1 s                                  |
/// | [`backoff_multiplier`] | 2                                    |
/// | [`max_open_duration`]  | the larger of 60 s and `open_duration` |
/// | [`jitter`]             | 0 (none)                             |
/// | [`half_open_probes`]   | 1                                    |
/// | [`half_open_timeout`]  | 30 s                                 |
/// | [`on_drop`]            | [`Dropped::Ignored`] (a slow call stays slow) |
/// | [`ramp_up`]            | off: a successful round closes at once |
/// | [`name`]               | `"default"`                          |
/// | [`shadow`]             | off: the breaker rejects             |
///
/// [`consecutive_failures`]: Builder::consecutive_failures
/// [`failure_rate`]: Builder::failure_rate
/// [`slow_calls`]: Builder::slow_calls
/// [`window`]: Builder::window
/// [`minimum_calls`]: Builder::minimum_calls
/// [`open_duration`]: Builder::open_duration
/// [`backoff_multiplier`]: Builder::backoff_multiplier
/// [`max_open_duration`]: Builder::max_open_duration
/// [`jitter`]: Builder::jitter
/// [`half_open_probes`]: Builder::half_open_probes
/// [`half_open_timeout`]: Builder::half_open_timeout
/// [`name`]: Builder::name
/// [`on_drop`]: Builder::on_drop
/// [`ramp_up`]: Builder::ramp_up
/// [`shadow`]: Builder::shadow
///
/// A call whose permit is dropped before its outcome is recorded (a timeout
/// outside the breaker, a client that went away, a panic) counts as ignored by
/// default, or as one slow call if the slow-call policy is on and it had already
/// run past the threshold; [`on_drop`] can make it a failure instead. So a timeout
/// layered outside the breaker trips it only with one of those two settings: see
/// [`Dropped`].
///
/// # Examples
/// ```
/// use cutout::CircuitBreaker;
/// use std::time::Duration;
///
/// let breaker = CircuitBreaker::builder()
///     .consecutive_failures(5)
///     .window(Duration::from_secs(30), 30)
///     .failure_rate(0.5, 50)
///     .slow_calls(Duration::from_millis(500), 0.8)
///     .open_duration(Duration::from_secs(2))
///     .backoff_multiplier(2.0)
///     .max_open_duration(Duration::from_secs(120))
///     .jitter(0.2)
///     .half_open_probes(3)
///     .build()?;
/// # Ok::<(), cutout::ConfigError>(())
/// ```
#[must_use = "a builder does nothing until `build()`"]
#[derive(Clone)]
pub struct Builder<C = DefaultClock> {
    clock: C,
    settings: Settings,
    on_transition: Option<Listener>,
    /// What [`Builder::restore`] gave, if anything (see [`crate::saved`]).
    pub(crate) restore: Restore,
    /// The what-if candidates (see [`Builder::candidate`]).
    candidates: Vec<candidates::CandidateSpec>,
    /// How the candidates get their clock: set by [`Builder::candidate`], which
    /// asks for a clock that clones; [`Builder::clock`] drops it.
    clone_clock: Option<fn(&C) -> C>,
}

/// Every setting as given, checked only in [`Builder::build`].
#[derive(Clone, Debug)]
struct Settings {
    name: Cow<'static, str>,
    consecutive_failures: Option<u32>,
    window: Option<(Duration, u32)>,
    failure_rate: Option<f64>,
    slow_calls: Option<(Duration, f64)>,
    minimum_calls: Option<u32>,
    open_duration: Duration,
    backoff_multiplier: f64,
    max_open_duration: Option<Duration>,
    jitter: f64,
    half_open_probes: u32,
    half_open_timeout: Duration,
    on_drop: Dropped,
    ramp_up: Option<Duration>,
    shadow: bool,
    /// The breaker's seed (jitter, ramp-up), if fixed: only a replay fixes it.
    seed: Option<u64>,
}

impl Builder<DefaultClock> {
    pub(crate) fn new() -> Builder<DefaultClock> {
        Builder {
            // Started by `build()`'s first reading, never by a builder whose clock
            // `.clock(...)` replaces.
            clock: DefaultClock::lazy(),
            settings: Settings {
                name: Cow::Borrowed(DEFAULT_NAME),
                consecutive_failures: None,
                window: None,
                failure_rate: None,
                slow_calls: None,
                minimum_calls: None,
                open_duration: DEFAULT_OPEN_DURATION,
                backoff_multiplier: DEFAULT_MULTIPLIER,
                max_open_duration: None,
                jitter: 0.0,
                half_open_probes: 1,
                half_open_timeout: DEFAULT_HALF_OPEN_TIMEOUT,
                on_drop: Dropped::Ignored,
                ramp_up: None,
                shadow: false,
                seed: None,
            },
            on_transition: None,
            restore: Restore::default(),
            candidates: Vec::new(),
            clone_clock: None,
        }
    }
}

impl<C: Clock> Builder<C> {
    /// The breaker's name (default `"default"`): the `breaker` label of its metrics
    /// and the `breaker` field of its tracing events. Name each breaker after the
    /// dependency it guards.
    ///
    /// # Examples
    /// ```
    /// let breaker = cutout::CircuitBreaker::builder().name("billing-db").build()?;
    /// assert_eq!(breaker.name(), "billing-db");
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn name(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.settings.name = name.into();
        self
    }

    /// Trip after `n` failures in a row (a success resets the count; an ignored
    /// outcome leaves it as it is); 1 to 2,147,483,647 (2^31 - 1, the longest
    /// streak a breaker counts).
    pub fn consecutive_failures(mut self, n: u32) -> Self {
        self.settings.consecutive_failures = Some(n);
        self
    }

    /// The sliding window the rate policies count over: `length`, split into
    /// `buckets` buckets that rotate as time passes. More buckets make the window
    /// slide more smoothly and cost more to read when a failure is recorded.
    ///
    /// At most 4096 buckets, each at least 1 ms long (and at least the clock's
    /// resolution). The bound keeps what a breaker allocates bounded: each of its
    /// stripes (at most 68: two per core, 16 to 64, and four shared ones; only
    /// those the breaker's threads have written exist) holds the window's buckets,
    /// 32 bytes each, and one bucket's room more for a summary of them (four to a
    /// 128-byte line, in a stripe one class of lines long: at most 1.5 times the
    /// buckets' bytes beyond 64 buckets), so a breaker's stripes take at most
    /// 512 KiB each (about 128 KiB on x86-64) and 48 MiB together.
    /// More buckets are a [`ConfigError`], never an allocation the process cannot
    /// survive (a thread's first call allocates its stripe).
    ///
    /// # Examples
    /// ```
    /// use cutout::CircuitBreaker;
    /// use std::time::Duration;
    ///
    /// // An hour in one-second buckets.
    /// let hour = CircuitBreaker::builder().window(Duration::from_secs(3600), 3600).build();
    /// assert!(hour.is_ok());
    /// // 50 days in 4 billion buckets would need hundreds of gigabytes: refused.
    /// let err = CircuitBreaker::builder()
    ///     .window(Duration::from_secs(50 * 86_400), u32::MAX)
    ///     .build()
    ///     .unwrap_err();
    /// assert_eq!(err.field(), "window");
    /// ```
    pub fn window(mut self, length: Duration, buckets: u32) -> Self {
        self.settings.window = Some((length, buckets));
        self
    }

    /// Trip when `failures / calls >= threshold` over the window, once the window
    /// holds at least `minimum_calls` calls (this sets [`minimum_calls`](Self::minimum_calls)).
    /// `threshold` is in `(0, 1]`: a rate of 0 would hold with no failure at all.
    ///
    /// The rates are checked when a failed or slow call is recorded, and by the
    /// successes after one that found the window short of `minimum_calls` (see
    /// [`minimum_calls`](Self::minimum_calls)); no other success checks them. A
    /// window whose older successes left it, so that its rate rose with no call,
    /// trips at its next failed or slow call.
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, State};
    ///
    /// let breaker = CircuitBreaker::builder().failure_rate(0.5, 5).build()?;
    /// for _ in 0..3 {
    ///     let _ = breaker.call(|| Err::<(), _>("boom"));
    /// }
    /// let _ = breaker.call(|| Ok::<_, &str>(()));
    /// assert_eq!(breaker.state(), State::Closed, "4 calls: too few to judge");
    /// let _ = breaker.call(|| Ok::<_, &str>(()));
    /// assert_eq!(breaker.state(), State::Open, "5 calls, 3 failed: 60%");
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn failure_rate(mut self, threshold: f64, minimum_calls: u32) -> Self {
        self.settings.failure_rate = Some(threshold);
        self.settings.minimum_calls = Some(minimum_calls);
        self
    }

    /// A call taking longer than `threshold` (strictly, from admission to its
    /// recorded outcome) is slow; trip when `slow / calls >= rate` over the window,
    /// with the same [`minimum_calls`](Self::minimum_calls), checked as
    /// [`failure_rate`](Self::failure_rate) says: a slow call, a success included,
    /// runs the check. A slow probe is a failed probe. `rate` is in `(0, 1]`: a
    /// rate of 0 would hold with no slow call at all.
    ///
    /// Timing costs two clock readings per call. They are [`Clock::now`] (one load
    /// for the default clock) when `threshold` is at least 100 times the clock's
    /// [`resolution`](Clock::resolution), so the reading errs by at most 1% of the
    /// threshold, and [`Clock::precise`] (~25 ns each for the default clock) for a
    /// shorter threshold.
    pub fn slow_calls(mut self, threshold: Duration, rate: f64) -> Self {
        self.settings.slow_calls = Some((threshold, rate));
        self
    }

    /// How many calls the window must hold before a rate can trip the breaker
    /// (default 20). [`failure_rate`](Self::failure_rate) sets it too; the last call
    /// wins.
    ///
    /// A failed or slow call recorded while the window holds fewer calls checks
    /// whether a rate would stand at its threshold at `minimum_calls` calls; if one
    /// would, the successes that follow check the rates too, so the one that
    /// brings the window up to `minimum_calls` trips the breaker (failure,
    /// failure, failure, success, success at 50% of 5 calls trips at the second
    /// success). Among concurrent calls this is best effort: a check a success
    /// misses is made by the next failed or slow call.
    pub fn minimum_calls(mut self, n: u32) -> Self {
        self.settings.minimum_calls = Some(n);
        self
    }

    /// How long the breaker stays open after tripping, before it admits probes
    /// (default 1 s). At least 1 ms.
    pub fn open_duration(mut self, d: Duration) -> Self {
        self.settings.open_duration = d;
        self
    }

    /// Each failed probe round multiplies the next open duration by this (default
    /// 2; at least 1, and finite). The backoff must reach
    /// [`max_open_duration`](Self::max_open_duration) within 63 reopenings (the
    /// levels the state word counts): 1.05 from the default 1 s to 60 s takes 84,
    /// and is refused.
    pub fn backoff_multiplier(mut self, m: f64) -> Self {
        self.settings.backoff_multiplier = m;
        self
    }

    /// The longest open duration the backoff reaches (default: the larger of 60 s
    /// and `open_duration`).
    pub fn max_open_duration(mut self, d: Duration) -> Self {
        self.settings.max_open_duration = Some(d);
        self
    }

    /// Shorten each open duration by a random fraction of up to `fraction` of it
    /// (0 to 1; default 0), so breakers that opened together do not probe together.
    pub fn jitter(mut self, fraction: f64) -> Self {
        self.settings.jitter = fraction;
        self
    }

    /// How many probe calls the half-open state admits; that many successes close
    /// the breaker, any failure reopens it (default 1; 1 to 65,535).
    pub fn half_open_probes(mut self, n: u32) -> Self {
        self.settings.half_open_probes = n;
        self
    }

    /// How long a half-open round may go without a verdict (default 30 s). After it,
    /// the next call reopens the breaker at the next backoff level, so a probe that
    /// never reports (a leaked permit) cannot wedge it.
    pub fn half_open_timeout(mut self, d: Duration) -> Self {
        self.settings.half_open_timeout = d;
        self
    }

    /// What a call counts as when its permit is dropped before an outcome was
    /// recorded (default [`Dropped::Ignored`]): ignored, a failure, or a failure once
    /// it has run longer than a duration. With the slow-call policy on, a call
    /// dropped after running past its threshold is a slow call whatever this says
    /// (a failure too, if this says so). See [`Dropped`] for the details and for
    /// which timeouts protect.
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, Dropped, State};
    ///
    /// let breaker = CircuitBreaker::builder()
    ///     .consecutive_failures(1)
    ///     .on_drop(Dropped::Failure)
    ///     .build()?;
    /// drop(breaker.try_acquire()?); // the caller gave up: a failure here
    /// assert_eq!(breaker.state(), State::Open);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn on_drop(mut self, dropped: Dropped) -> Self {
        self.settings.on_drop = dropped;
        self
    }

    /// Progressive recovery (off by default): after a successful half-open round
    /// the breaker does not close at once but enters [`State::Recovering`] for
    /// `duration`, admitting a share of the calls that rises linearly, every
    /// millisecond, from 10% when the round succeeds to 100% at the end; then the
    /// next call closes it ([`Reason::RampCompleted`]). The full load no longer
    /// lands on a dependency that has just answered a few probes.
    ///
    /// - A call not admitted is rejected and counted as rejected; its
    ///   [`Rejected::state`] is `Recovering` and its
    ///   [`retry_after`](crate::Rejected::retry_after) is zero: the breaker is shedding a
    ///   share of the load, not closed to it, and the next call is admitted with
    ///   the current share.
    /// - Each thread's calls are admitted in the scheduled share, exactly: a
    ///   thread keeps a running sum of the shares of its calls and is admitted
    ///   whenever the sum passes a whole call, so over any run of its calls the
    ///   admitted count is within one call of the schedule. The sums live in a
    ///   small direct-mapped thread-local table (four entries; a thread that
    ///   alternates between ramping breakers whose entries collide restarts their
    ///   sums, and keeps the schedule on average). The decision writes no shared cache
    ///   line and takes no lock.
    /// - The trip policies apply to the admitted calls, from an empty window and
    ///   streak, and `minimum_calls` is not scaled: a rate over fewer calls than
    ///   that is noise whatever made the calls few. A trip reopens the breaker at
    ///   the next backoff level ([`Reason::RampFailed`]); the ramp's end resets
    ///   the level to 0, as closing does without a ramp.
    /// - A call admitted before the ramp (a late probe, a call from before the
    ///   trip) is stale in it: it can neither end the ramp nor trip it.
    ///
    /// `duration` must be at least 1 ms (the breaker's tick).
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, ManualClock, Reason, State};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let breaker = CircuitBreaker::builder()
    ///     .consecutive_failures(1)
    ///     .open_duration(Duration::from_secs(1))
    ///     .ramp_up(Duration::from_secs(10))
    ///     .clock(clock.clone())
    ///     .build()?;
    /// let _ = breaker.call(|| Err::<(), _>("down"));
    /// clock.advance(Duration::from_secs(1));
    /// let _ = breaker.call(|| Ok::<_, ()>("probe")); // the round succeeds
    /// assert_eq!(breaker.state(), State::Recovering);
    ///
    /// // Five seconds in, the share is 10% + 90% * 5/10 = 55%.
    /// clock.advance(Duration::from_secs(5));
    /// let admitted = (0..1000)
    ///     .filter(|_| breaker.call(|| Ok::<_, ()>(())).is_ok())
    ///     .count();
    /// assert!((540..=560).contains(&admitted), "{admitted}");
    ///
    /// clock.advance(Duration::from_secs(5));
    /// assert!(breaker.call(|| Ok::<_, ()>(())).is_ok());
    /// assert_eq!(breaker.state(), State::Closed);
    /// assert_eq!(breaker.metrics().transitions(Reason::RampCompleted), 1);
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    ///
    /// [`State::Recovering`]: crate::State::Recovering
    /// [`Reason::RampCompleted`]: crate::Reason::RampCompleted
    /// [`Reason::RampFailed`]: crate::Reason::RampFailed
    /// [`Rejected::state`]: crate::Rejected::state
    /// [`Rejected`]: crate::Rejected
    pub fn ramp_up(mut self, duration: Duration) -> Self {
        self.settings.ramp_up = Some(duration);
        self
    }

    /// Shadow mode: the breaker runs its whole state machine and reports it, but
    /// never rejects. Every call runs; one it would have rejected counts in
    /// [`Lifetime::would_reject`](crate::Lifetime::would_reject) (and
    /// [`rejected`](crate::Lifetime::rejected) stays 0), and its outcome counts
    /// for nothing: under this configuration the call would not have happened.
    /// Its transitions are delivered with
    /// [`Transition::shadow`](crate::Transition::shadow) set. Watch first, enforce
    /// later: drop `.shadow()` once its transitions fall where they should.
    ///
    /// # Examples
    /// ```
    /// use cutout::{CircuitBreaker, ManualClock, State};
    ///
    /// let breaker = CircuitBreaker::builder()
    ///     .consecutive_failures(2)
    ///     .shadow()
    ///     .clock(ManualClock::new())
    ///     .build()?;
    /// for _ in 0..2 {
    ///     let _ = breaker.call(|| Err::<(), _>("down"));
    /// }
    /// assert_eq!(breaker.state(), State::Open);
    /// assert_eq!(breaker.call(|| Ok::<_, ()>("runs all the same")), Ok("runs all the same"));
    /// let lifetime = breaker.metrics().lifetime;
    /// assert_eq!((lifetime.would_reject, lifetime.rejected), (1, 0));
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn shadow(mut self) -> Self {
        self.settings.shadow = true;
        self
    }

    /// This builder without [`shadow`](Self::shadow): what a replay runs.
    #[cfg(feature = "replay")]
    pub(crate) fn enforcing(mut self) -> Self {
        self.settings.shadow = false;
        self
    }

    /// This builder on `clock`, its candidates too (as if the clock had been
    /// set before them): what a replay runs.
    #[cfg(feature = "replay")]
    pub(crate) fn reclocked<C2: Clock + Clone>(self, clock: C2) -> Builder<C2> {
        let mut b = self.clock(clock);
        if !b.candidates.is_empty() {
            b.clone_clock = Some(C2::clone);
        }
        b
    }

    /// This builder with its breakers' seed fixed (the jitter of each cooldown,
    /// the ramp-up's draws), and its candidates' (each drawn from it), so that
    /// the same calls at the same times make the same decisions: what a replay
    /// needs. A live breaker's seed is random.
    #[cfg(feature = "replay")]
    pub(crate) fn seeded(mut self, seed: u64) -> Self {
        self.settings.seed = Some(seed);
        self
    }

    /// Call `f` once for every transition, on the thread whose compare-and-swap made
    /// it, after the swap, with nothing held: `f` may use the breaker (`state()`,
    /// `metrics()`, even `call()`). Events from different threads can reach `f` out of
    /// order; each carries its generation, and the events one thread delivers are in
    /// generation order. `f` runs inside the call that made the transition, so a slow
    /// `f` delays that call only; other threads keep being admitted or rejected
    /// meanwhile. A panic in `f` reaches that caller; the transition stands. (Except
    /// while that caller is already unwinding, when a panicking call's permit is
    /// dropped and records the call: a panic in `f` then would abort the process, so
    /// it is caught and dropped.) No event
    /// is delivered for a call that changes no state (a closed-state success).
    /// Replaces any listener given before; [`also_on_transition`](Self::also_on_transition)
    /// adds one.
    ///
    /// See [`Transition`] for an example.
    pub fn on_transition(mut self, f: impl Fn(&Transition) + Send + Sync + 'static) -> Self {
        self.on_transition = Some(Arc::new(f));
        self
    }

    /// Calls `f` for every transition too, after the listener given so far (by
    /// [`on_transition`](Self::on_transition) or an earlier `also_on_transition`),
    /// as `on_transition` says; a panic in an earlier listener skips `f`. Each
    /// sees one thread's events in generation order: a transition an earlier
    /// listener makes (a `force_open` on a trip) reaches that listener at once
    /// and `f` after the event it was handed. For code
    /// that adds its own listener to a builder it was handed without replacing the
    /// caller's (`cutout_fleet::Fleet::breaker` does).
    ///
    /// # Examples
    /// ```
    /// use cutout::CircuitBreaker;
    /// use std::sync::{Arc, Mutex};
    ///
    /// let log = Arc::new(Mutex::new(Vec::new()));
    /// let (first, second) = (log.clone(), log.clone());
    /// let breaker = CircuitBreaker::builder()
    ///     .consecutive_failures(1)
    ///     .on_transition(move |_| first.lock().unwrap().push("the caller's"))
    ///     .also_on_transition(move |_| second.lock().unwrap().push("added"))
    ///     .build()?;
    /// let _ = breaker.call(|| Err::<(), _>("boom"));
    /// assert_eq!(*log.lock().unwrap(), ["the caller's", "added"]);
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn also_on_transition(mut self, f: impl Fn(&Transition) + Send + Sync + 'static) -> Self {
        self.on_transition = Some(match self.on_transition.take() {
            None => Arc::new(f),
            Some(first) => Arc::new(move |t: &Transition| {
                // This combination's own field: its address names it.
                let id = std::ptr::from_ref(&first) as usize;
                crate::event::deliver_both(id, &*first, &f, t)
            }),
        });
        self
    }

    /// Use `clock` instead of the default quanta clock (for example a
    /// [`ManualClock`](crate::ManualClock) in tests).
    pub fn clock<C2: Clock>(self, clock: C2) -> Builder<C2> {
        Builder {
            clock,
            settings: self.settings,
            on_transition: self.on_transition,
            restore: self.restore,
            candidates: self.candidates,
            clone_clock: None,
        }
    }

    /// Checks every setting and builds the breaker.
    ///
    /// Durations count whole 1 ms ticks: a setting is rounded up to whole ticks,
    /// and a phase (an Open cooldown, a half-open round, a ramp) starts at the
    /// tick its transition's clock reading is in. So a phase ends between one tick
    /// less than its duration and its duration after the transition (exactly its
    /// duration on a [`ManualClock`](crate::ManualClock) moved in whole
    /// milliseconds), and the `retry_after` of a rejection right after a trip is
    /// the whole cooldown.
    ///
    /// # Errors
    /// A [`ConfigError`] naming the first setting that is out of range: a zero
    /// threshold, probe count or bucket count; more than 65,535 probes; a rate
    /// threshold outside `(0, 1]` or NaN; a jitter outside `0..=1`; a multiplier
    /// below 1, not finite, or too small to reach the maximum within 63
    /// reopenings; a maximum below the base; a duration below the 1 ms tick or
    /// beyond the longest the breaker's clock counts (`u64::MAX` nanoseconds in
    /// whole milliseconds: about 584 years); a window bucket shorter than the clock's
    /// resolution, or more than 4096 buckets (see [`window`](Self::window)); or, with
    /// [`restore`](Self::restore), one naming `restore` that says why the saved
    /// state cannot be restored; or one naming `candidate` for a what-if
    /// candidate that cannot be built (see [`candidate`](Self::candidate)).
    pub fn build(self) -> Result<CircuitBreaker<C>, ConfigError> {
        let config = self.validate()?;
        let candidates = self.candidate_parts()?;
        let seed = self.settings.seed;
        let breaker = match self.restore.start(&config)? {
            None => CircuitBreaker::from_parts(config, self.clock, self.on_transition),
            Some(start) => CircuitBreaker::restored(config, self.clock, self.on_transition, &start),
        };
        let breaker = match seed {
            Some(seed) => breaker.with_seed(seed),
            None => breaker,
        };
        Ok(breaker.attach_candidates(candidates, seed))
    }

    /// Checks every setting once and keeps what building a breaker needs, so a
    /// registry can build many breakers from one builder without checking again.
    #[cfg_attr(not(feature = "registry"), allow(dead_code))]
    pub(crate) fn into_parts(self) -> Result<Parts<C>, ConfigError> {
        self.restore.refuse_shared()?;
        if !self.candidates.is_empty() {
            return Err(ConfigError::new(
                "candidate",
                "a registry does not build what-if candidates: attach them to a breaker built on its own",
            ));
        }
        Ok(Parts {
            config: self.validate()?,
            skew: self.restore.skew(),
            clock: self.clock,
            listener: self.on_transition,
        })
    }
}

impl<C> fmt::Debug for Builder<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("settings", &self.settings)
            .field("on_transition", &self.on_transition.is_some())
            .field("candidates", &self.candidates.len())
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(cutout_loom)))]
mod tests;
