//! A model-based test of the retry helpers (`retry_with_sleep`, `retry_async`)
//! against what `src/retry.rs` documents:
//!
//! - retry `n` (counting from 0, the index of the attempt that failed) waits a
//!   time between zero and `min(cap, base * 2^n)`; the same seed gives the same
//!   waits;
//! - at most `max_attempts` attempts; a success ends the retries with its value,
//!   a non-retryable error or the last attempt's error with `Error::Inner`;
//! - after a failure that left the breaker open (Open, HalfOpen, ForcedOpen) the
//!   next attempt is made without sleeping; a rejection ends the retries at once
//!   with `Error::Rejected`;
//! - a panic in the operation propagates, and nothing else panics, whatever the
//!   settings.
//!
//! Random breakers (on a `ManualClock`) and random policies; each attempt's outcome
//! is drawn (a success, a retryable or a non-retryable error, a panic, a slow call,
//! a call that forces open / disables / resets the breaker before it fails). The
//! breaker's side of the model is a shadow breaker built from the same settings on
//! its own `ManualClock`, driven through the two-step API in lockstep (the sleeps
//! move both clocks): it says what state each failure left, whether the next
//! attempt is admitted, and what the lifetime counters must be. Independently of
//! it, the counters must account for every attempt the operation log shows.
//! (Breakers with a ramp have no shadow: their shedding decision draws on a
//! thread-local table the two breakers would share. There the real breaker's state
//! is checked at each sleep instead.)

#![cfg(feature = "retry")]

mod common;

use common::{on_manual_clock, poll_once, with_policies};
use cutout::{
    CircuitBreaker, Dropped, Error, Lifetime, ManualClock, RetryPolicy, State, retry_async,
    retry_with_sleep,
};
use proptest::prelude::*;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::{Pin, pin};
use std::sync::Once;
use std::task::{Context, Poll};
use std::time::Duration;

/// The operation's error: which attempt made it, and whether the policy's
/// predicate retries it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Oops {
    attempt: u32,
    retryable: bool,
}

type Pred = fn(&Oops) -> bool;

fn is_retryable(e: &Oops) -> bool {
    e.retryable
}

/// The payload of the operation's own panics.
struct OpPanic;

/// Silences the operation's own panics (they are expected); any other panic is
/// reported as usual.
fn quiet_op_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.payload().downcast_ref::<OpPanic>().is_none() {
                default(info);
            }
        }));
    });
}

// ---- the reference ceiling ------------------------------------------------------

/// `min(cap, base * 2^n)`, computed exactly in nanoseconds.
fn ceiling(base: Duration, cap: Duration, n: u32) -> Duration {
    let (b, c) = (base.as_nanos(), cap.as_nanos());
    let product = if b == 0 {
        0
    } else if n >= 100 {
        u128::MAX
    } else {
        b.saturating_mul(1u128 << n)
    };
    from_nanos(product.min(c))
}

fn from_nanos(n: u128) -> Duration {
    Duration::new((n / 1_000_000_000) as u64, (n % 1_000_000_000) as u32)
}

// ---- the scenario ---------------------------------------------------------------

#[derive(Clone, Debug)]
struct BreakerCfg {
    consecutive: Option<u32>,
    window: Option<(u64, u32)>,
    failure_rate: Option<(f64, u32)>,
    slow: Option<(u64, f64)>,
    open_ms: u64,
    multiplier: f64,
    max_open_ms: Option<u64>,
    probes: u32,
    half_open_timeout_ms: u64,
    on_drop_failure: bool,
    ramp_ms: Option<u64>,
}

impl BreakerCfg {
    fn build(&self, clock: &ManualClock) -> CircuitBreaker<ManualClock> {
        let ms = Duration::from_millis;
        let mut b = CircuitBreaker::builder()
            .open_duration(ms(self.open_ms))
            .backoff_multiplier(self.multiplier)
            .half_open_probes(self.probes)
            .half_open_timeout(ms(self.half_open_timeout_ms))
            .on_drop(if self.on_drop_failure {
                Dropped::Failure
            } else {
                Dropped::Ignored
            });
        b = with_policies(
            b,
            self.consecutive,
            self.window,
            self.failure_rate,
            self.slow,
        );
        if let Some(max) = self.max_open_ms {
            b = b.max_open_duration(ms(max.max(self.open_ms)));
        }
        if let Some(ramp) = self.ramp_ms {
            b = b.ramp_up(ms(ramp));
        }
        b.clock(clock.clone())
            .build()
            .expect("the generator makes valid breakers")
    }
}

#[derive(Clone, Debug)]
struct PolicyCfg {
    base: Duration,
    cap: Duration,
    max_attempts: u32,
    seed: u64,
}

impl PolicyCfg {
    fn build(&self) -> RetryPolicy<Pred> {
        RetryPolicy::builder()
            .base(self.base)
            .cap(self.cap)
            .max_attempts(self.max_attempts)
            .seed(self.seed)
            .retryable(is_retryable as Pred)
            .build()
            .expect("cap >= base, max_attempts >= 1")
    }
}

/// What an attempt does.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Step {
    Ok,
    /// A retryable error.
    Fail,
    /// An error the policy does not retry.
    Fatal,
    Panic,
    /// Takes this many milliseconds (the clocks move), then succeeds or fails.
    Slow(u64, bool),
    /// Forces the breaker open, then fails (a stale outcome).
    ForceOpen,
    /// Disables the breaker, then fails.
    Disable,
    /// Resets the breaker, then fails.
    Reset,
}

/// Something done to both breakers before or between retry loops.
#[derive(Clone, Copy, Debug)]
enum Pre {
    Call(bool),
    Advance(u64),
    AdvanceMax,
    ForceOpen,
    Disable,
    Reset,
}

#[derive(Clone, Copy, Debug)]
enum Mode {
    Sync,
    /// Polled by hand; dropped after this many polls if given.
    Async {
        cancel_after: Option<u32>,
    },
}

#[derive(Clone, Debug)]
struct Loop {
    before: Vec<Pre>,
    mode: Mode,
    /// The attempts' steps; attempts past the plan succeed.
    plan: Vec<Step>,
}

#[derive(Clone, Debug)]
struct Scenario {
    breaker: BreakerCfg,
    policy: PolicyCfg,
    loops: Vec<Loop>,
}

// ---- strategies -----------------------------------------------------------------

fn duration() -> impl Strategy<Value = Duration> {
    prop_oneof![
        2 => Just(Duration::ZERO),
        2 => Just(Duration::MAX),
        1 => Just(Duration::from_nanos(1)),
        4 => (0u64..5_000).prop_map(Duration::from_millis),
        2 => (0u64..u64::MAX).prop_map(Duration::from_nanos),
        1 => (0u64..=u64::MAX, 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n)),
    ]
}

fn policy_cfg() -> impl Strategy<Value = PolicyCfg> {
    (
        duration(),
        duration(),
        prop_oneof![
            3 => Just(1u32),
            6 => 2u32..12,
            2 => 12u32..64,
            1 => Just(u32::MAX),
        ],
        any::<u64>(),
    )
        .prop_map(|(a, b, max_attempts, seed)| PolicyCfg {
            base: a.min(b),
            cap: a.max(b),
            max_attempts,
            seed,
        })
}

fn breaker_cfg() -> impl Strategy<Value = BreakerCfg> {
    (
        (
            proptest::option::weighted(0.7, 1u32..6),
            proptest::option::of(prop_oneof![
                (10u64..10_000, 1u32..10),
                Just((1u64, 1u32)),
                Just((2u64, 2u32))
            ]),
            proptest::option::weighted(0.4, (prop_oneof![Just(1.0), 0.1f64..1.0], 1u32..6)),
            proptest::option::weighted(0.25, (1u64..500, prop_oneof![Just(1.0), 0.1f64..1.0])),
        ),
        (
            prop_oneof![Just(1u64), 1u64..100_000],
            prop_oneof![Just(1.0f64), 1.5f64..4.0],
            proptest::option::of(1u64..200_000),
            1u32..4,
            prop_oneof![Just(1u64), 1u64..100_000],
            any::<bool>(),
            proptest::option::weighted(0.15, 1u64..10_000),
        ),
    )
        .prop_map(
            |(
                (consecutive, window, failure_rate, slow),
                (open_ms, multiplier, max_open_ms, probes, hot, on_drop_failure, ramp_ms),
            )| BreakerCfg {
                consecutive,
                window,
                failure_rate,
                slow,
                open_ms,
                multiplier,
                max_open_ms,
                probes,
                half_open_timeout_ms: hot,
                on_drop_failure,
                ramp_ms,
            },
        )
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => Just(Step::Ok),
        12 => Just(Step::Fail),
        2 => Just(Step::Fatal),
        2 => Just(Step::Panic),
        2 => (prop_oneof![0u64..1_000, 1_000u64..100_000], any::<bool>())
            .prop_map(|(ms, fail)| Step::Slow(ms, fail)),
        1 => Just(Step::ForceOpen),
        1 => Just(Step::Disable),
        1 => Just(Step::Reset),
    ]
}

fn pre() -> impl Strategy<Value = Pre> {
    prop_oneof![
        4 => any::<bool>().prop_map(Pre::Call),
        4 => prop_oneof![0u64..1_000, 1_000u64..300_000].prop_map(Pre::Advance),
        1 => Just(Pre::AdvanceMax),
        1 => Just(Pre::ForceOpen),
        1 => Just(Pre::Disable),
        2 => Just(Pre::Reset),
    ]
}

fn mode() -> impl Strategy<Value = Mode> {
    prop_oneof![
        1 => Just(Mode::Sync),
        1 => proptest::option::weighted(0.3, 0u32..20)
            .prop_map(|cancel_after| Mode::Async { cancel_after }),
    ]
}

fn a_loop() -> impl Strategy<Value = Loop> {
    (
        proptest::collection::vec(pre(), 0..8),
        mode(),
        proptest::collection::vec(step(), 0..14),
    )
        .prop_map(|(before, mode, plan)| Loop { before, mode, plan })
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (
        breaker_cfg(),
        policy_cfg(),
        proptest::collection::vec(a_loop(), 1..5),
    )
        .prop_map(|(breaker, policy, loops)| Scenario {
            breaker,
            policy,
            loops,
        })
}

// ---- the rig --------------------------------------------------------------------

/// What the model says comes next in a retry loop.
#[derive(Clone, Debug, PartialEq)]
enum Expect {
    /// An attempt: admitted (the operation runs) or rejected (the loop returns
    /// the rejection).
    Attempt,
    /// A sleep of at most this, then an attempt.
    Sleep(Duration),
    /// Without a shadow (a ramp): a sleep of at most this if the failure left the
    /// breaker Closed, Disabled or Recovering, else an attempt at once; which, is
    /// checked against the real breaker's state at the sleep, or at the attempt.
    Either(Duration),
    /// The loop returns this.
    Return(Result<u32, Oops>),
    /// The operation's panic propagates.
    Panic,
    /// The loop was dropped (async only).
    Gone,
}

struct Rig<'a> {
    cfg: &'a Scenario,
    clock: ManualClock,
    b: CircuitBreaker<ManualClock>,
    /// The shadow breaker and its clock; `None` for a ramp.
    shadow: Option<(ManualClock, CircuitBreaker<ManualClock>)>,
    expect: RefCell<Expect>,
    /// Every difference found, with where it was found.
    problems: RefCell<Vec<String>>,
    /// The whole run, for the reproducibility check.
    trace: RefCell<Vec<String>>,
    /// This loop's operation log.
    ops: Cell<u32>,
    oks: Cell<u32>,
    errs: Cell<u32>,
    panics: Cell<u32>,
    /// Attempts whose permit is held right now (async: polled, not finished).
    in_flight: Cell<u32>,
    /// Steps in this loop that could make an outcome stale or its class depend
    /// on the breaker (side effects, slow calls under the slow-call policy).
    fuzzy: Cell<bool>,
    attempt: Cell<u32>,
}

impl<'a> Rig<'a> {
    fn new(cfg: &'a Scenario) -> Rig<'a> {
        let clock = ManualClock::new();
        let b = cfg.breaker.build(&clock);
        let shadow = cfg.breaker.ramp_ms.is_none().then(|| {
            let c = ManualClock::new();
            let s = cfg.breaker.build(&c);
            (c, s)
        });
        Rig {
            cfg,
            clock,
            b,
            shadow,
            expect: RefCell::new(Expect::Attempt),
            problems: RefCell::new(Vec::new()),
            trace: RefCell::new(Vec::new()),
            ops: Cell::new(0),
            oks: Cell::new(0),
            errs: Cell::new(0),
            panics: Cell::new(0),
            in_flight: Cell::new(0),
            fuzzy: Cell::new(false),
            attempt: Cell::new(0),
        }
    }

    fn problem(&self, what: String) {
        self.problems.borrow_mut().push(what);
    }

    fn advance(&self, d: Duration) {
        self.clock.advance(d);
        if let Some((c, _)) = &self.shadow {
            c.advance(d);
        }
    }

    fn on_both(&self, f: impl Fn(&CircuitBreaker<ManualClock>)) {
        f(&self.b);
        if let Some((_, s)) = &self.shadow {
            f(s);
        }
    }

    fn pre(&self, p: Pre) {
        match p {
            Pre::Call(ok) => {
                let real = self.b.call(|| if ok { Ok(()) } else { Err(()) });
                if let Some((_, s)) = &self.shadow {
                    let shadow = match s.try_acquire() {
                        Ok(permit) => {
                            if ok {
                                permit.success();
                                Ok(())
                            } else {
                                permit.failure();
                                Err(Error::Inner(()))
                            }
                        }
                        Err(r) => Err(Error::Rejected(r)),
                    };
                    if real != shadow {
                        self.problem(format!("pre-call: real {real:?}, shadow {shadow:?}"));
                    }
                }
            }
            Pre::Advance(ms) => self.advance(Duration::from_millis(ms)),
            Pre::AdvanceMax => self.advance(Duration::MAX),
            Pre::ForceOpen => self.on_both(CircuitBreaker::force_open),
            Pre::Disable => self.on_both(CircuitBreaker::disable),
            Pre::Reset => self.on_both(CircuitBreaker::reset),
        }
    }

    fn max_attempts(&self) -> u32 {
        self.cfg.policy.max_attempts
    }

    /// The attempt `attempt` has been admitted by the real breaker and starts:
    /// checks that one was expected and takes the shadow's permit.
    fn start(&self, attempt: u32) -> Option<cutout::Permit<'_, ManualClock>> {
        let state = self.b.state();
        self.trace
            .borrow_mut()
            .push(format!("attempt {attempt} in {state:?}"));
        self.ops.set(self.ops.get() + 1);
        self.in_flight.set(self.in_flight.get() + 1);
        let expect = self.expect.replace(Expect::Attempt);
        match expect {
            Expect::Attempt => {}
            Expect::Either(_) => {
                // No sleep after the failure: the breaker must have been left open
                // (no time has passed: the attempt is a probe).
                if state != State::HalfOpen {
                    self.problem(format!(
                        "attempt {attempt} made without a sleep, admitted in {state:?}"
                    ));
                }
            }
            other => self.problem(format!("attempt {attempt} made, expected {other:?}")),
        }
        if attempt >= self.max_attempts() {
            self.problem(format!(
                "attempt {attempt} made, max_attempts {}",
                self.max_attempts()
            ));
        }
        let (_, s) = self.shadow.as_ref()?;
        match s.try_acquire() {
            Ok(p) => Some(p),
            Err(r) => {
                self.problem(format!(
                    "attempt {attempt}: the real breaker admitted it, the shadow rejected it ({r:?})"
                ));
                None
            }
        }
    }

    /// Runs the attempt's step (the real breaker admitted it), recording it on the
    /// shadow's permit and setting what must come next.
    fn run_step(
        &self,
        attempt: u32,
        step: Step,
        permit: Option<cutout::Permit<'_, ManualClock>>,
    ) -> Result<u32, Oops> {
        let slow_policy = self.cfg.breaker.slow.is_some();
        let (ok, retryable) = match step {
            Step::Ok => (true, true),
            Step::Fail => (false, true),
            Step::Fatal => (false, false),
            Step::Panic => {
                self.panics.set(self.panics.get() + 1);
                *self.expect.borrow_mut() = Expect::Panic;
                self.in_flight.set(self.in_flight.get() - 1);
                std::panic::panic_any(OpPanic); // the shadow's permit drops here
            }
            Step::Slow(ms, fail) => {
                self.advance(Duration::from_millis(ms));
                if slow_policy {
                    self.fuzzy.set(true);
                }
                (!fail, true)
            }
            Step::ForceOpen | Step::Disable | Step::Reset => {
                self.fuzzy.set(true);
                match step {
                    Step::ForceOpen => self.on_both(CircuitBreaker::force_open),
                    Step::Disable => self.on_both(CircuitBreaker::disable),
                    _ => self.on_both(CircuitBreaker::reset),
                }
                (false, true)
            }
        };
        self.in_flight.set(self.in_flight.get() - 1);
        self.attempt.set(attempt + 1);
        let shadow_state = permit.map(|p| {
            if ok {
                p.success();
            } else {
                p.failure();
            }
            self.shadow.as_ref().map(|(_, s)| s.state())
        });
        let shadow_state = shadow_state.flatten();
        let result = if ok {
            self.oks.set(self.oks.get() + 1);
            Ok(attempt)
        } else {
            self.errs.set(self.errs.get() + 1);
            Err(Oops { attempt, retryable })
        };
        let next = match &result {
            Ok(_) => Expect::Return(result.clone()),
            Err(e) if !e.retryable || attempt.saturating_add(1) >= self.max_attempts() => {
                Expect::Return(result.clone())
            }
            Err(_) => {
                let ceiling = ceiling(self.cfg.policy.base, self.cfg.policy.cap, attempt);
                match (&self.shadow, shadow_state) {
                    (Some(_), Some(State::Open | State::HalfOpen | State::ForcedOpen)) => {
                        Expect::Attempt
                    }
                    (Some(_), Some(_)) => Expect::Sleep(ceiling),
                    // The shadow rejected the attempt (reported): anything goes.
                    (Some(_), None) => Expect::Either(ceiling),
                    (None, _) => Expect::Either(ceiling),
                }
            }
        };
        *self.expect.borrow_mut() = next;
        result
    }

    /// The retry loop asked for a sleep of `d`.
    fn sleep(&self, d: Duration) {
        let state = self.b.state();
        let attempt = self.attempt.get();
        self.trace
            .borrow_mut()
            .push(format!("sleep {d:?} in {state:?}"));
        let expect = self.expect.replace(Expect::Attempt);
        match expect {
            Expect::Sleep(ceiling) | Expect::Either(ceiling) => {
                if d > ceiling {
                    self.problem(format!(
                        "the wait after attempt {} is {d:?}, above its ceiling {ceiling:?}",
                        attempt - 1
                    ));
                }
                if !matches!(state, State::Closed | State::Disabled | State::Recovering) {
                    self.problem(format!(
                        "slept {d:?} after attempt {} with the breaker {state:?}",
                        attempt - 1
                    ));
                }
            }
            other => self.problem(format!(
                "slept {d:?} after attempt {}, expected {other:?}",
                attempt.wrapping_sub(1)
            )),
        }
    }

    /// The loop returned `result` (or panicked, `None`, or was dropped).
    fn finish(&self, result: Option<&Result<u32, Error<Oops>>>, cancelled: bool) {
        self.trace.borrow_mut().push(format!("returned {result:?}"));
        let expect = self.expect.replace(Expect::Gone);
        let slept = expect == Expect::Attempt;
        if cancelled {
            return;
        }
        match (result, expect) {
            (None, Expect::Panic) => {}
            (None, other) => self.problem(format!("the loop panicked, expected {other:?}")),
            (Some(Err(Error::Rejected(r))), Expect::Attempt | Expect::Either(_)) => {
                if let Some((_, s)) = &self.shadow {
                    match s.try_acquire() {
                        Err(shadow) if shadow == *r => {}
                        Err(shadow) => self.problem(format!(
                            "rejected with {r:?}, the shadow rejects with {shadow:?}"
                        )),
                        Ok(p) => {
                            drop(p);
                            self.problem(format!("rejected with {r:?}, the shadow admits"));
                        }
                    }
                } else if !(matches!(r.state(), State::Open | State::HalfOpen | State::ForcedOpen)
                    || slept && r.state() == State::Recovering)
                {
                    // Without a sleep since the failure, the failure left it open;
                    // after one, a Recovering breaker may shed the attempt.
                    self.problem(format!("rejected by a {:?} breaker", r.state()));
                }
            }
            (Some(Err(Error::Rejected(r))), other) => {
                self.problem(format!("returned the rejection {r:?}, expected {other:?}"))
            }
            (Some(result), Expect::Return(want)) => {
                let got = result
                    .clone()
                    .map_err(|e| e.into_inner().expect("not a rejection"));
                if got != want {
                    self.problem(format!("returned {result:?}, expected {want:?}"));
                }
            }
            (Some(result), other) => {
                self.problem(format!("returned {result:?}, expected {other:?}"))
            }
        }
    }

    fn reset_log(&self) {
        *self.expect.borrow_mut() = Expect::Attempt;
        self.ops.set(0);
        self.oks.set(0);
        self.errs.set(0);
        self.panics.set(0);
        self.in_flight.set(0);
        self.fuzzy.set(false);
        self.attempt.set(0);
    }

    /// The lifetime counters moved by exactly this loop's attempts.
    fn check_counters(&self, before: Lifetime, rejected: bool, cancelled_in_flight: u32) {
        let after = self.b.metrics().lifetime;
        let d = |f: fn(&Lifetime) -> u64| f(&after) - f(&before);
        let ops = u64::from(self.ops.get());
        let check = |what: &str, got: u64, want: u64| {
            if got != want {
                self.problem(format!(
                    "lifetime.{what} moved by {got}, the log says {want} ({before:?} -> {after:?})"
                ));
            }
        };
        check("admitted", d(|l| l.admitted), ops);
        check("rejected", d(|l| l.rejected), u64::from(rejected));
        check(
            "dropped",
            d(|l| l.dropped),
            u64::from(self.panics.get() + cancelled_in_flight),
        );
        // A dropped call that counted as a failure (in its own phase) is in
        // `failures` and in `dropped`: the sum counts it twice.
        let sum = d(|l| l.successes + l.failures + l.ignored + l.stale + l.dropped);
        let twice = sum.wrapping_sub(ops);
        if sum < ops || twice > d(|l| l.dropped) || (twice > 0 && !self.cfg.breaker.on_drop_failure)
        {
            self.problem(format!(
                "lifetime.successes+failures+ignored+stale+dropped moved by {sum}, the log says {ops} plus at most the dropped calls counted as failures ({before:?} -> {after:?})"
            ));
        }
        if !self.fuzzy.get() {
            check("successes", d(|l| l.successes), u64::from(self.oks.get()));
            // The failed attempts, and the dropped ones counted as failures.
            check(
                "failures",
                d(|l| l.failures),
                u64::from(self.errs.get()) + twice,
            );
            check("stale", d(|l| l.stale), 0);
            check("ignored", d(|l| l.ignored), 0);
        }
        if let Some((_, s)) = &self.shadow {
            let (m, sm) = (self.b.metrics(), s.metrics());
            if (
                m.lifetime,
                m.state,
                m.level,
                m.consecutive_failures,
                m.window,
                m.retry_after,
            ) != (
                sm.lifetime,
                sm.state,
                sm.level,
                sm.consecutive_failures,
                sm.window,
                sm.retry_after,
            ) {
                self.problem(format!("the breaker {m:?}\nthe shadow {sm:?}"));
            }
        }
    }

    fn run_sync(&self, plan: &[Step], policy: &RetryPolicy<Pred>) {
        let before = self.b.metrics().lifetime;
        let mut next = 0u32;
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            retry_with_sleep(
                &self.b,
                policy,
                |d| {
                    self.sleep(d);
                    self.advance(d);
                },
                || {
                    let attempt = next;
                    next += 1;
                    let permit = self.start(attempt);
                    let step = plan.get(attempt as usize).copied().unwrap_or(Step::Ok);
                    self.run_step(attempt, step, permit)
                },
            )
        }));
        let rejected = match &outcome {
            Ok(result) => {
                self.finish(Some(result), false);
                result.as_ref().is_err_and(Error::is_rejected)
            }
            Err(payload) => {
                self.panicked(&**payload);
                false
            }
        };
        self.check_counters(before, rejected, 0);
    }

    /// The run panicked with `payload`: a problem unless it is the operation's
    /// own panic; the shadow finishes with no result.
    fn panicked(&self, payload: &(dyn std::any::Any + Send)) {
        if payload.downcast_ref::<OpPanic>().is_none() {
            self.problem(format!(
                "a panic not the operation's: {}",
                describe(payload)
            ));
        }
        self.finish(None, false);
    }

    fn run_async(&self, plan: &[Step], policy: &RetryPolicy<Pred>, cancel_after: Option<u32>) {
        let before = self.b.metrics().lifetime;
        let next = Cell::new(0u32);
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            let retrying = pin!(retry_async(
                &self.b,
                policy,
                |d| {
                    self.sleep(d);
                    YieldThen {
                        yielded: false,
                        then: Some(move || self.advance(d)),
                    }
                },
                || {
                    let attempt = next.get();
                    next.set(attempt + 1);
                    let step = plan.get(attempt as usize).copied().unwrap_or(Step::Ok);
                    async move {
                        let permit = self.start(attempt);
                        // Pending once with the shadow's permit held.
                        YieldThen {
                            yielded: false,
                            then: Some(|| ()),
                        }
                        .await;
                        self.run_step(attempt, step, permit)
                    }
                },
            ));
            drive(retrying, cancel_after)
        }));
        let (rejected, cancelled) = match &outcome {
            Ok(Some(result)) => {
                self.finish(Some(result), false);
                (result.as_ref().is_err_and(Error::is_rejected), false)
            }
            Ok(None) => {
                self.finish(None, true);
                (false, true)
            }
            Err(payload) => {
                self.panicked(&**payload);
                (false, false)
            }
        };
        let in_flight = if cancelled { self.in_flight.get() } else { 0 };
        self.check_counters(before, rejected, in_flight);
    }
}

fn describe(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "a non-string payload".to_owned())
}

/// Pending once, then runs `then` and is ready.
struct YieldThen<F> {
    yielded: bool,
    then: Option<F>,
}

impl<F: FnOnce() + Unpin> Future for YieldThen<F> {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if !self.yielded {
            self.yielded = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        if let Some(then) = self.then.take() {
            then();
        }
        Poll::Ready(())
    }
}

/// Polls to completion, or drops the future after `cancel_after` polls (`None`).
fn drive<F: Future>(mut f: Pin<&mut F>, cancel_after: Option<u32>) -> Option<F::Output> {
    let limit = cancel_after.unwrap_or(common::MAX_POLLS);
    for _ in 0..limit {
        if let Poll::Ready(out) = poll_once(f.as_mut()) {
            return Some(out);
        }
    }
    assert!(cancel_after.is_some(), "still pending after {limit} polls");
    None
}

/// Runs the scenario; returns the problems found and the trace.
fn run(s: &Scenario) -> (Vec<String>, Vec<String>) {
    quiet_op_panics();
    let rig = Rig::new(s);
    let policy = s.policy.build();
    for (i, l) in s.loops.iter().enumerate() {
        for &p in &l.before {
            rig.pre(p);
        }
        rig.reset_log();
        rig.trace.borrow_mut().push(format!("loop {i}"));
        match l.mode {
            Mode::Sync => rig.run_sync(&l.plan, &policy),
            Mode::Async { cancel_after } => rig.run_async(&l.plan, &policy, cancel_after),
        }
        common::assert_each_admitted_call_finished_once(&rig.b);
        if !rig.problems.borrow().is_empty() {
            rig.problems.borrow_mut().push(format!("in loop {i}"));
            break;
        }
    }
    (rig.problems.take(), rig.trace.take())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 384,
        ..ProptestConfig::default()
    })]

    /// The retry loops behave as the model says, and a scenario without a ramp
    /// (deterministic) runs the same again from the same seed.
    #[test]
    fn retry_loops_follow_the_model(s in scenario()) {
        let (problems, trace) = run(&s);
        prop_assert!(problems.is_empty(), "{}\ntrace:\n{}", problems.join("\n"), trace.join("\n"));
        if s.breaker.ramp_ms.is_none() {
            let (again_problems, again) = run(&s);
            prop_assert!(again_problems.is_empty(), "{}", again_problems.join("\n"));
            prop_assert_eq!(trace, again, "the same seed, other waits");
        }
    }

    /// `ceiling(n)` is `min(cap, base * 2^n)` for every `n`, without overflow.
    #[test]
    fn ceilings_match_the_formula(p in policy_cfg(), n in prop_oneof![0u32..80, any::<u32>()]) {
        let policy = p.build();
        prop_assert_eq!(policy.ceiling(n), ceiling(p.base, p.cap, n));
        prop_assert_eq!(policy.max_attempts(), p.max_attempts);
    }

    /// Bad settings are a `ConfigError` naming the field, never a panic; good
    /// ones build a policy that keeps them.
    #[test]
    fn the_builder_validates(
        base in duration(),
        cap in duration(),
        max_attempts in prop_oneof![Just(0u32), Just(1u32), any::<u32>()],
        retryable in any::<bool>(),
    ) {
        let built = catch_unwind(|| {
            let b = RetryPolicy::builder().base(base).cap(cap).max_attempts(max_attempts);
            match retryable {
                true => b.retryable(is_retryable as Pred).build().map(|p| (p.ceiling(0), p.max_attempts())),
                false => b.build().map(|p| (p.ceiling(0), p.max_attempts())),
            }
        });
        let built = built.map_err(|p| describe(&*p));
        let built = match built {
            Ok(b) => b,
            Err(panic) => return Err(TestCaseError::fail(format!("build panicked: {panic}"))),
        };
        match built {
            Ok((c0, n)) => {
                prop_assert!(max_attempts >= 1 && cap >= base, "built with {base:?} {cap:?} {max_attempts}");
                prop_assert_eq!(c0, base);
                prop_assert_eq!(n, max_attempts);
            }
            Err(e) => {
                let fields: Vec<&str> = [(max_attempts == 0, "max_attempts"), (cap < base, "cap")]
                    .iter()
                    .filter(|(bad, _)| *bad)
                    .map(|(_, f)| *f)
                    .collect();
                prop_assert!(fields.contains(&e.field()), "refused naming {:?} ({e}); bad: {fields:?}", e.field());
            }
        }
    }
}

/// The waits are uniform between zero and their ceiling: over many loops, the
/// mean wait is half the ceiling, and both ends of the range are reached.
#[test]
fn waits_spread_over_the_whole_range() {
    let (b, _) = on_manual_clock(CircuitBreaker::builder().consecutive_failures(u32::MAX / 2));
    let p = RetryPolicy::builder()
        .base(Duration::from_secs(1))
        .cap(Duration::from_secs(1))
        .max_attempts(5)
        .seed(99)
        .build()
        .unwrap();
    let mut fractions = Vec::new();
    for _ in 0..500 {
        let _ = retry_with_sleep(
            &b,
            &p,
            |d| fractions.push(d.as_secs_f64()),
            || Err::<(), _>(()),
        );
    }
    assert_eq!(fractions.len(), 2000);
    let mean = fractions.iter().sum::<f64>() / fractions.len() as f64;
    assert!((0.47..0.53).contains(&mean), "mean {mean}");
    assert!(fractions.iter().any(|&f| f < 0.01));
    assert!(fractions.iter().any(|&f| f > 0.99));
    assert!(fractions.iter().all(|&f| f <= 1.0));
}
