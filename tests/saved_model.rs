//! A model of save and restore: a breaker with a random configuration (every
//! policy on in some cases) is driven through random calls, failures, clock steps
//! and manual controls, saved at a wall-clock time `W`, and restored at `W + d`
//! (`d` from zero to past every cooldown, and negative within and beyond
//! `max_clock_skew`) under the same or another configuration. The test checks
//! what `Builder::restore`, `SavedState` and `CircuitBreaker::save` document:
//!
//! - the save reads the breaker as `metrics` does (state, level, deadline, streak,
//!   window totals);
//! - the restore refuses a state saved more than the tolerated skew ahead, and
//!   otherwise starts the state by its rule: Open with the wall-clock time left
//!   (rounded up to the 1 ms tick, cut to the longest cooldown), an Open whose
//!   deadline passed ready to probe, HalfOpen as a fresh round at its level,
//!   ForcedOpen and Disabled kept, Closed (and Recovering) at level 0 with the
//!   streak (with the consecutive-failure policy) and the window's totals (into a
//!   window at least as long, less than a window length after the save, leaving
//!   together one window length after the build);
//! - the restored breaker behaves as the original would at the same time (same
//!   configuration): the next call admitted or rejected alike, the same
//!   `retry_after` within the rounding, the same trip on the next failure;
//! - (feature `serde`) the JSON form round-trips, and mutated documents never
//!   panic: they fail to decode, or decode and are refused with a `ConfigError`
//!   naming `restore` where the docs say so, or restore.
//!
//! No sleeps: the monotonic side is a `ManualClock`, the wall clock an explicit
//! `SystemTime`.

mod common;

use common::with_policies;
use cutout::{
    Builder, CircuitBreaker, ManualClock, Permit, Reason, SavedState, State, WindowCounts,
};
use proptest::prelude::*;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const MS: u64 = 1_000_000;

/// A fixed wall-clock time: 2027-01-15.
fn t0() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// `t` rounded to whole milliseconds since the epoch, down or up.
fn whole_ms(t: SystemTime, up: bool) -> SystemTime {
    let n = t.duration_since(UNIX_EPOCH).unwrap().as_nanos();
    let m = if up {
        n.div_ceil(1_000_000)
    } else {
        n / 1_000_000
    };
    UNIX_EPOCH + Duration::from_millis(m as u64)
}

/// `t + d` for a signed `d` in nanoseconds.
fn shift(t: SystemTime, d: i128) -> SystemTime {
    if d >= 0 {
        t + Duration::from_nanos(d as u64)
    } else {
        t - Duration::from_nanos((-d) as u64)
    }
}

/// Whole milliseconds, rounded up, from `now` to `until`; 0 if passed.
fn ceil_ms_between(until: SystemTime, now: SystemTime) -> u64 {
    match until.duration_since(now) {
        Ok(d) => d.as_nanos().div_ceil(1_000_000) as u64,
        Err(_) => 0,
    }
}

/// A configuration, as the test knows it (and can compute what the breaker
/// derives from it: the window's shape, the cooldown table).
#[derive(Clone, Debug, PartialEq)]
struct Cfg {
    consecutive: Option<u32>,
    /// Length in ms, buckets.
    window: Option<(u64, u32)>,
    /// Threshold, minimum calls.
    failure_rate: Option<(f64, u32)>,
    /// Threshold in ms, rate.
    slow: Option<(u64, f64)>,
    open_ms: u64,
    mult: f64,
    max_ms: Option<u64>,
    jitter: f64,
    probes: u32,
    half_open_timeout_ms: u64,
    ramp_ms: Option<u64>,
    skew_ms: Option<u64>,
    listen: bool,
}

type Events = Arc<Mutex<Vec<cutout::Transition>>>;

impl Cfg {
    fn builder(&self, clock: &ManualClock, events: &Events) -> Builder<ManualClock> {
        let mut b = CircuitBreaker::builder().name("model").clock(clock.clone());
        b = with_policies(
            b,
            self.consecutive,
            self.window,
            self.failure_rate,
            self.slow,
        );
        b = b
            .open_duration(ms(self.open_ms))
            .backoff_multiplier(self.mult)
            .jitter(self.jitter)
            .half_open_probes(self.probes)
            .half_open_timeout(ms(self.half_open_timeout_ms));
        if let Some(m) = self.max_ms {
            b = b.max_open_duration(ms(m));
        }
        if let Some(r) = self.ramp_ms {
            b = b.ramp_up(ms(r));
        }
        if let Some(s) = self.skew_ms {
            b = b.max_clock_skew(ms(s));
        }
        if self.listen {
            let log = events.clone();
            b = b.on_transition(move |t| log.lock().unwrap().push(*t));
        }
        b
    }

    fn no_policy(&self) -> bool {
        self.consecutive.is_none() && self.failure_rate.is_none() && self.slow.is_none()
    }

    /// The failure-rate threshold in force (the default one with no policy).
    fn rate(&self) -> Option<f64> {
        self.failure_rate
            .map(|r| r.0)
            .or(self.no_policy().then_some(0.5))
    }

    fn minimum_calls(&self) -> u64 {
        self.failure_rate.map_or(20, |r| u64::from(r.1))
    }

    /// The window in force: bucket length in ns, buckets (none without a rate
    /// policy, whatever `window` says).
    fn shape(&self) -> Option<(u64, u32)> {
        if self.rate().is_none() && self.slow.is_none() {
            return None;
        }
        let (len, buckets) = self.window.unwrap_or((10_000, 10));
        Some((len * MS / u64::from(buckets), buckets))
    }

    /// The window's length in ns as the breaker has it.
    fn window_nanos(&self) -> Option<u64> {
        self.shape().map(|(b, n)| b * u64::from(n))
    }

    /// The window's length in ns as configured (whole buckets of nanoseconds may
    /// span a little less): what a restore compares with the saved length.
    fn configured_nanos(&self) -> Option<u64> {
        self.shape()
            .map(|_| self.window.map_or(10_000, |(len, _)| len) * MS)
    }

    /// The cooldown of each level, in ms, as `config::cooldowns` builds it.
    fn cooldowns(&self) -> Vec<u64> {
        let open = self.open_ms;
        let max = self.max_ms.unwrap_or(open.max(60_000));
        let mut table = vec![open];
        let mut d = open as f64;
        while self.mult > 1.0 && *table.last().unwrap() < max {
            d *= self.mult;
            table.push(if d >= max as f64 { max } else { d as u64 });
        }
        table
    }

    fn max_level(&self) -> u8 {
        (self.cooldowns().len() - 1) as u8
    }

    fn longest(&self) -> u64 {
        *self.cooldowns().last().unwrap()
    }

    fn cooldown(&self, level: u8) -> u64 {
        let t = self.cooldowns();
        t[usize::from(level).min(t.len() - 1)]
    }

    fn skew(&self) -> Duration {
        ms(self.skew_ms.unwrap_or(60_000))
    }

    /// Whether one more (instant) failure trips a Closed breaker holding `streak`
    /// failures in a row and window counts `c` (see `policy::rate_verdict`).
    fn failure_trips(&self, streak: u64, c: WindowCounts) -> bool {
        if self.consecutive.is_some_and(|n| streak + 1 >= u64::from(n)) {
            return true;
        }
        if self.shape().is_none() {
            return false;
        }
        let (calls, failures, slow) = (c.calls + 1, c.failures + 1, c.slow);
        let min = self.minimum_calls();
        if calls < min {
            return false;
        }
        let n = calls.max(min) as f64;
        if let Some(t) = self.rate() {
            if failures > 0 && failures as f64 / n >= t {
                return true;
            }
        }
        if let Some((_, rate)) = self.slow {
            if slow > 0 && slow as f64 / n >= rate {
                return true;
            }
        }
        false
    }

    /// Whether one (instant) success trips a Closed breaker restored with window
    /// counts `c`: the one that brings the window up to `minimum_calls`, at a
    /// rate that trips there (a failure below it marked the check due).
    fn success_trips(&self, c: WindowCounts) -> bool {
        if self.shape().is_none() || c.calls + 1 != self.minimum_calls() {
            return false;
        }
        let n = (c.calls + 1) as f64;
        let rate = self
            .rate()
            .is_some_and(|t| c.failures > 0 && c.failures as f64 / n >= t);
        let slow = self
            .slow
            .is_some_and(|(_, r)| c.slow > 0 && c.slow as f64 / n >= r);
        rate || slow
    }

    /// Whether one slow success trips a Closed breaker holding window counts `c`:
    /// a slow call is recorded, so both rates are checked (a success never trips
    /// the consecutive-failure policy).
    fn slow_success_trips(&self, c: WindowCounts) -> bool {
        if self.shape().is_none() {
            return false;
        }
        let (calls, failures, slow) = (c.calls + 1, c.failures, c.slow + 1);
        let min = self.minimum_calls();
        if calls < min {
            return false;
        }
        let n = calls as f64;
        if let Some(t) = self.rate() {
            if failures > 0 && failures as f64 / n >= t {
                return true;
            }
        }
        if let Some((_, rate)) = self.slow {
            if slow as f64 / n >= rate {
                return true;
            }
        }
        false
    }
}

/// Whether `got` is the cooldown `base` ms shortened by a jitter of at most
/// `jitter` of it (exactly `base` without jitter).
fn is_jittered(base: u64, jitter: f64, got: Option<Duration>) -> bool {
    let lo = base - (base as f64 * jitter) as u64;
    matches!(got, Some(d) if d >= ms(lo) && d <= ms(base))
}

fn any_cfg() -> impl Strategy<Value = Cfg> {
    (
        (
            proptest::option::weighted(0.6, 1..=5u32),
            proptest::option::weighted(
                0.7,
                (
                    prop::sample::select(vec![50u64, 100, 1_000, 3_000, 10_000]),
                    1..=12u32,
                ),
            ),
            proptest::option::weighted(
                0.6,
                (
                    prop_oneof![Just(0.2), Just(0.5), Just(1.0), 0.05..=1.0f64],
                    1..=10u32,
                ),
            ),
            proptest::option::weighted(
                0.4,
                (
                    prop::sample::select(vec![1u64, 5, 50, 500]),
                    prop::sample::select(vec![0.3, 0.5, 1.0]),
                ),
            ),
        ),
        (
            prop_oneof![1..=50u64, 50..=5_000u64],
            prop::sample::select(vec![1.0, 1.5, 2.0, 3.0]),
            proptest::option::weighted(0.6, 1..=40u64),
            prop::sample::select(vec![0.0, 0.0, 0.25, 1.0]),
            1..=4u32,
            prop_oneof![1..=100u64, 100..=60_000u64],
            proptest::option::weighted(0.4, 1..=20_000u64),
            proptest::option::weighted(0.3, prop::sample::select(vec![0u64, 1, 1_000, 120_000])),
            any::<bool>(),
        ),
    )
        .prop_map(
            |(
                (consecutive, window, failure_rate, slow),
                (open_ms, mult, max_k, jitter, probes, hot, ramp, skew, listen),
            )| {
                Cfg {
                    consecutive,
                    window,
                    failure_rate,
                    slow,
                    open_ms,
                    mult,
                    max_ms: max_k.map(|k| open_ms * k),
                    jitter,
                    probes,
                    half_open_timeout_ms: hot,
                    ramp_ms: ramp,
                    skew_ms: skew,
                    listen,
                }
            },
        )
}

/// The restoring configuration: the same, a few settings changed, or another.
fn restoring_cfg(original: Cfg) -> impl Strategy<Value = Cfg> {
    let same = original.clone();
    prop_oneof![
        4 => Just(same),
        3 => (any_cfg(), any::<u16>()).prop_map(move |(other, mask)| {
            // Take each setting from `other` where `mask` says so.
            let mut c = original.clone();
            let pick = |bit: u16| mask & (1 << bit) != 0;
            if pick(0) { c.consecutive = other.consecutive; }
            if pick(1) { c.window = other.window; }
            if pick(2) { c.failure_rate = other.failure_rate; }
            if pick(3) { c.slow = other.slow; }
            if pick(4) { c.open_ms = other.open_ms; c.max_ms = other.max_ms; }
            if pick(5) { c.mult = other.mult; }
            if pick(6) { c.jitter = other.jitter; }
            if pick(7) { c.probes = other.probes; }
            if pick(8) { c.half_open_timeout_ms = other.half_open_timeout_ms; }
            if pick(9) { c.ramp_ms = other.ramp_ms; }
            if pick(10) { c.skew_ms = other.skew_ms; }
            c.listen = pick(11);
            c
        }),
        1 => any_cfg(),
    ]
}

#[derive(Clone, Debug)]
enum Op {
    /// A call: admitted or not; if admitted it takes `took_ns` and reports
    /// `outcome` (0 success, 1 failure, 2 ignored, 3 dropped unrecorded).
    Call {
        outcome: u8,
        took_ns: u64,
    },
    /// A call admitted now and held (reported by a later `Release`).
    Hold,
    Release {
        outcome: u8,
    },
    /// A permit forgotten (`mem::forget`): a leaked probe.
    Leak,
    Advance(u64),
    ForceOpen,
    Disable,
    Reset,
    OpenFor(u64),
    /// Failures until the breaker leaves Closed (at most 64 calls).
    Trip,
    /// The clock advanced to the end of the current cooldown (`retry_after`),
    /// plus `extra` ns.
    CoolDown(u64),
    /// A whole probe round: to the end of the cooldown, then probes (as many as
    /// are admitted, at most 4) that all succeed or all fail.
    ProbeRound(bool),
}

fn any_op() -> impl Strategy<Value = Op> {
    let took = prop_oneof![3 => Just(0u64), 3 => 0..10 * MS, 1 => 0..1_000 * MS];
    let step = prop_oneof![
        3 => 0..20 * MS,
        3 => 0..2_000 * MS,
        1 => 0..120_000 * MS,
        1 => 0..MS,
    ];
    prop_oneof![
        12 => (0..4u8, took).prop_map(|(o, t)| Op::Call {
            outcome: [0, 1, 1, 2, 3][usize::from(o)],
            took_ns: t
        }),
        7 => step.prop_map(Op::Advance),
        2 => Just(Op::Hold),
        1 => (0..4u8).prop_map(|outcome| Op::Release { outcome }),
        2 => Just(Op::Leak),
        1 => Just(Op::ForceOpen),
        1 => Just(Op::Disable),
        3 => Just(Op::Reset),
        1 => prop_oneof![1..=5_000u64, 1..=200_000u64].prop_map(Op::OpenFor),
        3 => Just(Op::Trip),
        3 => prop_oneof![Just(0u64), 0..2 * MS, 0..2_000 * MS].prop_map(Op::CoolDown),
        3 => any::<bool>().prop_map(Op::ProbeRound),
    ]
}

fn record(p: Permit<'_, ManualClock>, outcome: u8) {
    match outcome {
        0 => p.success(),
        1 => p.failure(),
        2 => p.ignore(),
        _ => drop(p),
    }
}

fn drive<'a>(b: &'a CircuitBreaker<ManualClock>, clock: &ManualClock, ops: &[Op]) {
    let mut held: Vec<Permit<'a, ManualClock>> = Vec::new();
    for op in ops {
        match op {
            Op::Call { outcome, took_ns } => {
                if let Ok(p) = b.try_acquire() {
                    clock.advance(Duration::from_nanos(*took_ns));
                    record(p, *outcome);
                }
            }
            Op::Hold => {
                if let Ok(p) = b.try_acquire() {
                    held.push(p);
                }
            }
            Op::Release { outcome } => {
                if let Some(p) = held.pop() {
                    record(p, *outcome);
                }
            }
            Op::Leak => {
                if let Ok(p) = b.try_acquire() {
                    std::mem::forget(p);
                }
            }
            Op::Advance(ns) => clock.advance(Duration::from_nanos(*ns)),
            Op::ForceOpen => b.force_open(),
            Op::Disable => b.disable(),
            Op::Reset => b.reset(),
            Op::OpenFor(m) => {
                let _ = b.open_for(ms(*m));
            }
            Op::Trip => {
                for _ in 0..64 {
                    if b.state() != State::Closed {
                        break;
                    }
                    if let Ok(p) = b.try_acquire() {
                        p.failure();
                    }
                }
            }
            Op::ProbeRound(ok) => {
                if let Some(d) = b.metrics().retry_after {
                    clock.advance(d);
                }
                let probes: Vec<_> = (0..4).filter_map(|_| b.try_acquire().ok()).collect();
                for p in probes {
                    record(p, u8::from(!*ok));
                }
            }
            Op::CoolDown(extra) => {
                if let Some(d) = b.metrics().retry_after {
                    clock.advance(d + Duration::from_nanos(*extra));
                }
            }
        }
    }
    // Permits still held are forgotten: dropping them later would record them
    // (as ignored, or slow) and move the original on after its save.
    for p in held {
        std::mem::forget(p);
    }
}

/// When the restore happens relative to the save.
#[derive(Clone, Copy, Debug)]
enum When {
    Same,
    Later(u64),
    LaterFraction(u64),
    AroundDeadline(i64),
    PastEverything(u64),
    BehindWithinSkew(u64),
    BehindBeyondSkew(u64),
    AtSkewEdge,
}

fn any_when() -> impl Strategy<Value = When> {
    prop_oneof![
        2 => Just(When::Same),
        2 => (0..5_000u64).prop_map(When::Later),
        1 => (0..5_000 * MS).prop_map(When::LaterFraction),
        3 => (-2..=2i64).prop_map(When::AroundDeadline),
        1 => (0..100_000u64).prop_map(When::PastEverything),
        2 => any::<u64>().prop_map(When::BehindWithinSkew),
        1 => (1..10_000u64).prop_map(When::BehindBeyondSkew),
        1 => Just(When::AtSkewEdge),
    ]
}

/// `d` in ns: the restore's wall clock is `W + d`.
fn offset(when: When, saved: &SavedState, w: SystemTime, cfg2: &Cfg) -> i128 {
    let skew = cfg2.skew().as_nanos() as i128;
    // `saved_at` is W rounded down: a restore at `saved_at - skew` is the
    // earliest accepted.
    let floor = saved
        .saved_at
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i128;
    let w_ns = w.duration_since(UNIX_EPOCH).unwrap().as_nanos() as i128;
    let earliest = floor - skew - w_ns;
    match when {
        When::Same => 0,
        When::Later(m) => i128::from(m) * MS as i128,
        When::LaterFraction(n) => i128::from(n),
        When::AroundDeadline(k) => {
            let left = match saved.open_until {
                Some(u) => match u.duration_since(w) {
                    Ok(d) => d.as_nanos() as i128,
                    Err(_) => 0,
                },
                None => 0,
            };
            (left + i128::from(k) * MS as i128).max(0)
        }
        When::PastEverything(m) => {
            (cfg2.longest() + cfg2.half_open_timeout_ms + m) as i128 * MS as i128
                + 200_000 * MS as i128
        }
        When::BehindWithinSkew(r) => {
            // From `earliest` to 0.
            let span = (-earliest).max(0) as u128 + 1;
            earliest + (u128::from(r) % span) as i128
        }
        When::BehindBeyondSkew(n) => earliest - i128::from(n) * 1_000,
        When::AtSkewEdge => earliest,
    }
}

fn rejection(b: &CircuitBreaker<ManualClock>) -> Option<cutout::Rejected> {
    b.try_acquire().err()
}

/// The state a saved `state` restores as.
fn restores_as(state: State) -> State {
    match state {
        State::Recovering => State::Closed,
        s => s,
    }
}

#[derive(Debug, Clone, Copy)]
struct Expect {
    state: State,
    level: u8,
    /// Open: ms left.
    left: Option<u64>,
    /// Whether the wall-clock time left was cut to the longest cooldown.
    cut: bool,
    streak: u64,
    window: WindowCounts,
}

fn expected(saved: &SavedState, cfg2: &Cfg, wr: SystemTime) -> Expect {
    let state = restores_as(saved.state);
    let closed = state == State::Closed;
    let level = if closed {
        0
    } else {
        saved.level.min(cfg2.max_level())
    };
    let (left, cut) = match state {
        State::Open => {
            let raw = ceil_ms_between(saved.open_until.unwrap(), wr);
            (Some(raw.min(cfg2.longest())), raw > cfg2.longest())
        }
        _ => (None, false),
    };
    let streak = match closed && cfg2.consecutive.is_some() {
        true => u64::from(saved.consecutive_failures),
        false => 0,
    };
    let elapsed = wr.duration_since(saved.saved_at).unwrap_or_default();
    let window = match (
        closed,
        saved.window,
        cfg2.window_nanos(),
        cfg2.configured_nanos(),
    ) {
        (true, Some(w), Some(len), Some(configured))
            if u128::from(configured) >= w.length.as_nanos()
                && elapsed.as_nanos() < u128::from(len) =>
        {
            w.counts
        }
        _ => WindowCounts::default(),
    };
    Expect {
        state,
        level,
        left,
        cut,
        streak,
        window,
    }
}

fn build(
    cfg: &Cfg,
    saved: &SavedState,
    wr: SystemTime,
) -> (
    ManualClock,
    Events,
    Result<CircuitBreaker<ManualClock>, cutout::ConfigError>,
) {
    let clock = ManualClock::new();
    let events = Events::default();
    let b = cfg
        .builder(&clock, &events)
        .restore_at(saved.clone(), wr)
        .build();
    (clock, events, b)
}

/// The restored breaker, step by step, by the rule of its state.
fn check_behaviour(
    cfg2: &Cfg,
    saved: &SavedState,
    wr: SystemTime,
    e: Expect,
    path: u8,
) -> Result<(), TestCaseError> {
    let (clock, events, b) = build(cfg2, saved, wr);
    let b = b.unwrap();
    let next = e.level.saturating_add(1).min(cfg2.max_level());
    match e.state {
        State::Open => {
            let left = e.left.unwrap();
            prop_assert_eq!(b.state(), State::Open);
            if left > 0 {
                clock.advance(ms(left) - Duration::from_nanos(1));
                let r = rejection(&b).expect("1 ns before the restored deadline");
                prop_assert_eq!((r.state(), r.retry_after()), (State::Open, Some(ms(1))));
                clock.advance(Duration::from_nanos(1));
            }
            prop_assert_eq!(b.state(), State::Open, "a pure read until a call");
            let p = b.try_acquire();
            prop_assert!(
                p.is_ok(),
                "the probe at the restored deadline: {:?}",
                p.err()
            );
            let p = p.unwrap();
            prop_assert!(p.is_probe());
            prop_assert_eq!(b.state(), State::HalfOpen);
            prop_assert_eq!(b.metrics().level, e.level);
            if cfg2.listen {
                let log = events.lock().unwrap();
                prop_assert_eq!(log.len(), 1);
                let t = log[0];
                prop_assert_eq!(
                    (t.from, t.to, t.reason, t.generation),
                    (State::Open, State::HalfOpen, Reason::CooldownElapsed, 1)
                );
                prop_assert_eq!((t.at, t.level), (ms(left), e.level));
            }
            if path.is_multiple_of(2) {
                p.failure();
                let m = b.metrics();
                prop_assert_eq!((m.state, m.level), (State::Open, next));
                if cfg2.listen {
                    let log = events.lock().unwrap();
                    let t = log.last().copied().unwrap();
                    prop_assert_eq!(
                        (t.from, t.to, t.reason, t.level),
                        (State::HalfOpen, State::Open, Reason::ProbeFailed, next)
                    );
                    prop_assert_eq!(t.at, ms(left));
                    prop_assert_eq!(t.open_until, m.retry_after.map(|r| r + ms(left)));
                }
                prop_assert!(
                    is_jittered(cfg2.cooldown(next), cfg2.jitter, m.retry_after),
                    "reopened at level {}: {:?}, table {:?}",
                    next,
                    m.retry_after,
                    cfg2.cooldowns()
                );
            } else {
                p.success();
                let m = b.metrics();
                let want = match (cfg2.probes, cfg2.ramp_ms) {
                    (1, None) => (State::Closed, 0),
                    (1, Some(_)) => (State::Recovering, e.level),
                    _ => (State::HalfOpen, e.level),
                };
                prop_assert_eq!((m.state, m.level), want);
            }
        }
        State::HalfOpen => {
            let m = b.metrics();
            prop_assert_eq!(
                (m.state, m.level, m.retry_after),
                (State::HalfOpen, e.level, Some(Duration::ZERO))
            );
            let mut probes = Vec::new();
            for i in 0..cfg2.probes {
                let p = b.try_acquire();
                prop_assert!(
                    p.is_ok(),
                    "a fresh round: slot {} of {}",
                    i + 1,
                    cfg2.probes
                );
                let p = p.unwrap();
                prop_assert!(p.is_probe());
                probes.push(p);
            }
            let r = rejection(&b).expect("every slot taken");
            let most = cfg2.half_open_timeout_ms.min(cfg2.cooldown(next));
            prop_assert_eq!(r.state(), State::HalfOpen);
            if cfg2.jitter == 0.0 {
                prop_assert_eq!(r.retry_after(), Some(ms(most)));
            } else {
                prop_assert!(r.retry_after().is_some_and(|d| d <= ms(most)));
            }
            prop_assert_eq!(b.metrics().retry_after, r.retry_after());
            match path % 3 {
                0 => {
                    let first = probes.remove(0);
                    first.failure();
                    drop(probes);
                    let m = b.metrics();
                    prop_assert_eq!((m.state, m.level), (State::Open, next));
                    prop_assert!(is_jittered(cfg2.cooldown(next), cfg2.jitter, m.retry_after));
                }
                1 => {
                    for p in probes {
                        p.success();
                    }
                    let m = b.metrics();
                    let want = match cfg2.ramp_ms {
                        None => (State::Closed, 0),
                        Some(_) => (State::Recovering, e.level),
                    };
                    prop_assert_eq!((m.state, m.level), want);
                }
                _ => {
                    for p in probes {
                        std::mem::forget(p);
                    }
                    // The round times out `half_open_timeout` after the build.
                    clock.advance(ms(cfg2.half_open_timeout_ms) - Duration::from_nanos(1));
                    let r = rejection(&b).expect("still a full round");
                    prop_assert_eq!(r.state(), State::HalfOpen);
                    clock.advance(Duration::from_nanos(1));
                    let r = rejection(&b).expect("the round timed out: reopened");
                    prop_assert_eq!(r.state(), State::Open);
                    let m = b.metrics();
                    prop_assert_eq!((m.state, m.level), (State::Open, next));
                    prop_assert_eq!(m.transitions(Reason::HalfOpenTimeout), 1);
                    prop_assert!(is_jittered(
                        cfg2.cooldown(next),
                        cfg2.jitter,
                        r.retry_after()
                    ));
                }
            }
        }
        State::ForcedOpen => {
            for _ in 0..2 {
                let r = rejection(&b).expect("forced open");
                prop_assert_eq!((r.state(), r.retry_after()), (State::ForcedOpen, None));
                clock.advance(Duration::from_secs(86_400));
            }
            b.reset();
            let m = b.metrics();
            prop_assert_eq!((m.state, m.level), (State::Closed, 0));
            prop_assert!(b.try_acquire().is_ok());
        }
        State::Disabled => {
            for _ in 0..6 {
                let p = b.try_acquire();
                prop_assert!(p.is_ok(), "disabled admits");
                p.unwrap().failure();
            }
            prop_assert_eq!(b.state(), State::Disabled);
        }
        _ => {
            let slow_fits = match (cfg2.slow, cfg2.window_nanos()) {
                (Some((t, _)), Some(len)) => (t + 1) * MS < len,
                _ => false,
            };
            if path % 4 == 3 && slow_fits {
                // A slow success is recorded as a slow call: the rates are
                // checked, with the restored totals.
                let trips = cfg2.slow_success_trips(e.window);
                let p = b.try_acquire();
                prop_assert!(p.is_ok());
                clock.advance(ms(cfg2.slow.unwrap().0 + 1));
                p.unwrap().success();
                let m = b.metrics();
                let want = if trips { State::Open } else { State::Closed };
                prop_assert_eq!(m.state, want, "window {:?}, cfg {:?}", e.window, cfg2);
                if !trips {
                    let w = e.window;
                    prop_assert_eq!(
                        m.window,
                        WindowCounts::new(w.calls + 1, w.failures, w.slow + 1)
                    );
                    prop_assert_eq!(m.consecutive_failures, 0);
                }
            } else if path.is_multiple_of(2) {
                // The next failure trips by the restored streak and totals (after
                // a success, which clears the streak and adds a call).
                let mut streak = e.streak;
                let mut window = e.window;
                if path % 4 == 2 {
                    let trips = cfg2.success_trips(window);
                    let p = b.try_acquire();
                    prop_assert!(p.is_ok());
                    p.unwrap().success();
                    if trips {
                        prop_assert_eq!(b.state(), State::Open, "window {:?}", window);
                        return Ok(());
                    }
                    streak = 0;
                    if cfg2.shape().is_some() {
                        window.calls += 1;
                    }
                    let m = b.metrics();
                    prop_assert_eq!(
                        (m.state, m.consecutive_failures, m.window),
                        (State::Closed, 0, window)
                    );
                }
                let trips = cfg2.failure_trips(streak, window);
                let p = b.try_acquire();
                prop_assert!(p.is_ok());
                p.unwrap().failure();
                let m = b.metrics();
                prop_assert_eq!(
                    m.state,
                    if trips { State::Open } else { State::Closed },
                    "streak {}, window {:?}, cfg {:?}",
                    e.streak,
                    e.window,
                    cfg2
                );
                if trips {
                    prop_assert_eq!(m.level, 0);
                    prop_assert!(is_jittered(cfg2.cooldown(0), cfg2.jitter, m.retry_after));
                    if cfg2.listen {
                        // The trip's event carries the restored streak and totals,
                        // and its reason is a policy whose condition holds.
                        let log = events.lock().unwrap();
                        let t = log.last().copied();
                        prop_assert!(t.is_some(), "a trip is reported");
                        let t = t.unwrap();
                        prop_assert_eq!(
                            (t.from, t.to, t.generation, t.level),
                            (State::Closed, State::Open, 1, 0)
                        );
                        prop_assert_eq!(t.at, Duration::ZERO);
                        prop_assert_eq!(t.open_until, m.retry_after);
                        let after =
                            WindowCounts::new(window.calls + 1, window.failures + 1, window.slow);
                        match t.reason {
                            Reason::ConsecutiveFailures => {
                                prop_assert_eq!(t.consecutive_failures, streak + 1);
                                prop_assert!(
                                    cfg2.consecutive.is_some_and(|n| streak + 1 >= u64::from(n))
                                );
                            }
                            Reason::FailureRate | Reason::SlowCallRate => {
                                prop_assert_eq!(t.window, after, "{:?}", t);
                            }
                            other => prop_assert!(false, "a trip for {:?}", other),
                        }
                    }
                }
            } else if let Some(len) = cfg2.window_nanos() {
                // The totals count as calls made at the build: they leave
                // together one window length later.
                clock.advance(Duration::from_nanos(len - 1));
                prop_assert_eq!(b.metrics().window, e.window);
                clock.advance(Duration::from_nanos(1));
                prop_assert_eq!(b.metrics().window, WindowCounts::default());
            }
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn model(
    cfg1: Cfg,
    ops: Vec<Op>,
    cfg2: Cfg,
    w_frac: u64,
    when: When,
    path: u8,
    mutation: (u8, u64),
) -> Result<(), TestCaseError> {
    let clock = ManualClock::new();
    let events = Events::default();
    let orig = cfg1.builder(&clock, &events).build().unwrap();
    drive(&orig, &clock, &ops);

    // ---- the save reads the breaker as `metrics` does --------------------------
    let w = t0() + Duration::from_nanos(w_frac);
    let m = orig.metrics();
    let saved = orig.save_at(w);
    prop_assert_eq!(saved.version, SavedState::VERSION);
    prop_assert_eq!(saved.name.as_str(), "model");
    prop_assert_eq!(saved.saved_at, whole_ms(w, false));
    prop_assert_eq!((saved.state, saved.level), (m.state, m.level));
    let counting = matches!(m.state, State::Closed | State::Recovering);
    prop_assert_eq!(
        u64::from(saved.consecutive_failures),
        if counting { m.consecutive_failures } else { 0 }
    );
    match m.state {
        State::Open => {
            let until = saved
                .open_until
                .expect("an Open state carries its deadline");
            let left = m.retry_after.unwrap();
            if left > Duration::ZERO {
                prop_assert_eq!(until, whole_ms(w + left, true));
            } else {
                prop_assert!(until <= whole_ms(w, true), "{:?} passed", until);
            }
        }
        _ => prop_assert_eq!(saved.open_until, None),
    }
    match (cfg1.shape(), saved.window) {
        (None, None) => {}
        (Some((bucket, n)), Some(sw)) => {
            // Whole milliseconds, rounded down (as the wire carries it).
            let length = bucket * u64::from(n) / 1_000_000;
            prop_assert_eq!(sw.length, Duration::from_millis(length));
            prop_assert_eq!(sw.buckets, n);
            prop_assert_eq!(sw.counts, m.window);
            if !counting {
                prop_assert_eq!(sw.counts, WindowCounts::default());
            }
        }
        (shape, w) => prop_assert!(false, "shape {:?}, saved window {:?}", shape, w),
    }

    // ---- the restore at W + d ------------------------------------------------------
    let d = offset(when, &saved, w, &cfg2);
    let wr = shift(w, d);
    let refused = saved
        .saved_at
        .duration_since(wr)
        .is_ok_and(|ahead| ahead > cfg2.skew());
    let (rclock, _revents, restored) = build(&cfg2, &saved, wr);
    if refused {
        let Err(err) = restored else {
            panic!("saved beyond the tolerated skew, and restored");
        };
        prop_assert_eq!(err.field(), "restore");
        prop_assert!(err.reason().contains("ahead"), "{}", err);
        return Ok(());
    }
    let r = match restored {
        Ok(r) => r,
        Err(e) => {
            prop_assert!(
                false,
                "refused a state it should restore: {} (d {} ns)",
                e,
                d
            );
            unreachable!()
        }
    };
    let e = expected(&saved, &cfg2, wr);
    let rm = r.metrics();
    prop_assert_eq!(rm.generation, 0);
    prop_assert_eq!(r.name(), "model");
    prop_assert_eq!((rm.state, rm.level), (e.state, e.level), "d {} ns", d);
    prop_assert_eq!(rm.consecutive_failures, e.streak);
    prop_assert_eq!(rm.window, e.window, "d {} ns", d);
    match e.state {
        State::Open => prop_assert_eq!(rm.retry_after, Some(ms(e.left.unwrap())), "d {} ns", d),
        State::ForcedOpen => prop_assert_eq!(rm.retry_after, None),
        _ => prop_assert_eq!(rm.retry_after, Some(Duration::ZERO)),
    }
    // A save of the restored breaker at once says the same (an Open one its
    // deadline, rounded to the tick).
    let again = r.save_at(wr);
    prop_assert_eq!((again.state, again.level), (e.state, e.level));
    if let Some(left) = e.left {
        prop_assert_eq!(again.open_until, Some(whole_ms(wr + ms(left), true)));
    }
    prop_assert_eq!(u64::from(again.consecutive_failures), e.streak);
    prop_assert_eq!(again.window.map(|w| w.counts).unwrap_or_default(), e.window);

    // ---- the restored breaker behaves as the original would --------------------
    if cfg2 == cfg1 && d >= 0 {
        clock.advance(Duration::from_nanos(d as u64));
        let om = orig.metrics();
        match saved.state {
            State::Open if !e.cut => {
                let (o, n) = (om.retry_after.unwrap(), rm.retry_after.unwrap());
                prop_assert!(
                    o <= n && n <= o + ms(2),
                    "original {:?}, restored {:?} (d {} ns)",
                    o,
                    n,
                    d
                );
                let (oa, ra) = (orig.try_acquire(), r.try_acquire());
                match (&oa, &ra) {
                    (Err(x), Err(y)) => {
                        prop_assert_eq!((x.state(), y.state()), (State::Open, State::Open));
                        let (x, y) = (x.retry_after().unwrap(), y.retry_after().unwrap());
                        prop_assert!(x <= y && y <= x + ms(2), "{:?} vs {:?}", x, y);
                    }
                    (Ok(_), Ok(_)) => {}
                    (Ok(_), Err(y)) => prop_assert!(
                        y.retry_after().unwrap() <= ms(2),
                        "the original probes, the restored waits {:?}",
                        y.retry_after()
                    ),
                    (Err(x), Ok(_)) => {
                        prop_assert!(false, "the restored probes early: original {:?}", x)
                    }
                }
            }
            State::ForcedOpen => {
                let (x, y) = (rejection(&orig), rejection(&r));
                prop_assert!(x.is_some() && y.is_some());
                prop_assert_eq!(x.unwrap().retry_after(), y.unwrap().retry_after());
            }
            State::Disabled => {
                prop_assert!(orig.try_acquire().is_ok() && r.try_acquire().is_ok());
            }
            State::Closed if d == 0 || cfg1.shape().is_none() => {
                if cfg1.consecutive.is_some() {
                    prop_assert_eq!(om.consecutive_failures, rm.consecutive_failures);
                }
                if d == 0 {
                    prop_assert_eq!(om.window, rm.window);
                }
                let (op, rp) = (orig.try_acquire(), r.try_acquire());
                prop_assert!(op.is_ok() && rp.is_ok());
                op.unwrap().failure();
                rp.unwrap().failure();
                let (om, rm2) = (orig.metrics(), r.metrics());
                prop_assert_eq!(
                    om.state,
                    rm2.state,
                    "the next failure trips both or neither"
                );
                if cfg1.jitter == 0.0 {
                    prop_assert_eq!(om.retry_after, rm2.retry_after);
                }
            }
            _ => {}
        }
    }
    drop(rclock);

    // ---- step by step, by the rule of the state --------------------------------
    check_behaviour(&cfg2, &saved, wr, e, path)?;

    #[cfg(feature = "serde")]
    serde_checks(&saved, &cfg2, mutation)?;
    #[cfg(not(feature = "serde"))]
    let _ = mutation;
    Ok(())
}

#[cfg(feature = "serde")]
fn serde_checks(
    saved: &SavedState,
    cfg2: &Cfg,
    (kind, raw): (u8, u64),
) -> Result<(), TestCaseError> {
    use serde_json::{Value, json};

    let text = serde_json::to_string(saved).unwrap();
    let back: SavedState = serde_json::from_str(&text).unwrap();
    // Exact: `save` takes whole milliseconds already.
    prop_assert_eq!(&back, saved, "{}", text);
    // Through JSON, a restore under the same settings finds the same state.
    let wr = saved.saved_at;
    let (_, _, a) = build(cfg2, saved, wr);
    let (_, _, b) = build(cfg2, &back, wr);
    let (a, b) = (a.unwrap().metrics(), b.unwrap().metrics());
    prop_assert_eq!(
        (a.state, a.level, a.retry_after, a.consecutive_failures),
        (b.state, b.level, b.retry_after, b.consecutive_failures)
    );
    if back == *saved {
        prop_assert_eq!(a.window, b.window);
    }

    /// What a mutated document must do.
    #[derive(Debug)]
    enum Want {
        /// Fail to decode.
        NoDecode,
        /// Decode, and be refused by the restore, the reason saying this.
        Refused(&'static str),
        /// Decode and restore.
        Restores,
        /// Fail to decode (a time this host cannot hold), or be refused.
        NoDecodeOrRefused(&'static str),
    }

    let mut v: Value = serde_json::to_value(saved).unwrap();
    let open = saved.state == State::Open;
    let pick = |xs: &[Value]| xs[(raw % xs.len() as u64) as usize].clone();
    let obj = v.as_object_mut().unwrap();
    let mut now = saved.saved_at;
    let mut text_override = None;
    /// What a restored breaker must show at once, beyond restoring.
    #[derive(Debug)]
    enum Check {
        Nothing,
        OpenFor(u64),
        Window(WindowCounts),
    }
    let mut check = Check::Nothing;
    let want = match kind % 24 {
        0 => {
            let version = match raw as u32 {
                1 => 2,
                n => n,
            };
            obj.insert("version".into(), json!(version));
            Want::Refused("format version")
        }
        1 => {
            obj.insert(
                "version".into(),
                pick(&[
                    json!(-1),
                    json!(4_294_967_296u64),
                    json!(1.5),
                    json!("1"),
                    Value::Null,
                ]),
            );
            Want::NoDecode
        }
        2 => {
            obj.insert(
                "state".into(),
                pick(&[
                    json!("ajar"),
                    json!("Open"),
                    json!("OPEN"),
                    json!("half-open"),
                    json!(""),
                    json!(3),
                    Value::Null,
                    json!("recovering "),
                ]),
            );
            Want::NoDecode
        }
        3 => {
            obj.insert("level".into(), json!(64 + raw % 192));
            Want::Refused("level")
        }
        4 => {
            obj.insert(
                "level".into(),
                pick(&[json!(256), json!(-1), json!(1000), json!("1"), json!(1.5)]),
            );
            Want::NoDecode
        }
        5 => {
            obj.remove("open_until_ms");
            if open {
                Want::Refused("open_until")
            } else {
                Want::Restores
            }
        }
        6 => {
            let field = ["version", "name", "saved_at_ms", "state"][(raw % 4) as usize];
            obj.remove(field);
            Want::NoDecode
        }
        7 => {
            // Saved further ahead of the restoring host than the skew it tolerates.
            let at = saved
                .saved_at
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_millis() as u64;
            let ahead = cfg2.skew().as_millis() as u64 + 1 + raw % 1_000_000_000;
            obj.insert("saved_at_ms".into(), json!(at + ahead));
            now = saved.saved_at;
            Want::Refused("ahead")
        }
        8 => {
            obj.insert("saved_at_ms".into(), json!(u64::MAX));
            Want::NoDecodeOrRefused("ahead")
        }
        9 => {
            obj.insert(
                "saved_at_ms".into(),
                pick(&[json!(-1), json!(1.5), json!("5"), Value::Null]),
            );
            Want::NoDecode
        }
        10 => {
            obj.insert("open_until_ms".into(), json!(u64::MAX));
            if open {
                // Cut to this configuration's longest cooldown.
                check = Check::OpenFor(cfg2.longest());
            }
            Want::Restores
        }
        11 => {
            obj.insert("state".into(), json!("open"));
            obj.insert("open_until_ms".into(), json!(raw % 4_000_000_000_000));
            Want::Restores
        }
        12 => {
            let calls = raw % 1_000_000;
            let (f, s) = match raw % 2 {
                0 => (calls + 1 + raw % 7, 0),
                _ => (0, calls + 1 + raw % 7),
            };
            obj.insert(
                "window".into(),
                json!({"length_ms": 1000, "buckets": 10, "calls": calls, "failures": f, "slow": s}),
            );
            Want::Refused(if f > 0 { "failures" } else { "slow" })
        }
        13 => {
            let (len, buckets) = match raw % 3 {
                0 => (0, 10),
                1 => (1000, 0),
                _ => (0, 0),
            };
            obj.insert(
                "window".into(),
                json!({"length_ms": len, "buckets": buckets, "calls": 3, "failures": 1, "slow": 1}),
            );
            Want::Refused("window")
        }
        14 => {
            let length = 1 + raw % 50;
            let failures = raw % 1000;
            obj.insert("state".into(), json!("closed"));
            obj.insert(
                "window".into(),
                json!({"length_ms": length, "buckets": (raw >> 32) as u32 | 1, "calls": u64::MAX, "failures": failures, "slow": u64::MAX}),
            );
            // Scaled to 2^31 calls, keeping the rates (rounded up).
            if cfg2
                .configured_nanos()
                .is_some_and(|len| len >= length * MS)
            {
                check = Check::Window(WindowCounts::new(1 << 31, u64::from(failures > 0), 1 << 31));
            }
            Want::Restores
        }
        15 => {
            let mut window =
                json!({"length_ms": 1000, "buckets": 10, "calls": 3, "failures": 1, "slow": 0});
            let w = window.as_object_mut().unwrap();
            match raw % 4 {
                0 => {
                    w.insert("calls".into(), json!(-3));
                }
                1 => {
                    w.remove("buckets");
                }
                2 => {
                    w.insert("length_ms".into(), json!(1e30));
                }
                _ => {
                    w.insert("buckets".into(), json!(4_294_967_296u64));
                }
            }
            obj.insert("window".into(), window);
            Want::NoDecode
        }
        16 => {
            obj.insert(
                "consecutive_failures".into(),
                pick(&[json!(4_294_967_296u64), json!(-1), json!("2")]),
            );
            Want::NoDecode
        }
        17 => {
            obj.insert("consecutive_failures".into(), json!(u32::MAX));
            Want::Restores
        }
        18 => {
            obj.insert("from_the_future".into(), json!({"a": [1, 2, 3]}));
            if let Some(w) = obj.get_mut("window").and_then(Value::as_object_mut) {
                w.insert("buckets_v2".into(), json!("x"));
            }
            Want::Restores
        }
        19 => {
            obj.insert("version".into(), json!(2 + raw % 1000));
            obj.insert("open_deadline_v2".into(), json!({"wall": 1, "mono": 2}));
            obj.insert("state".into(), json!("open"));
            obj.remove("open_until_ms");
            Want::Refused("format version")
        }
        20 => {
            obj.insert("name".into(), pick(&[json!(5), Value::Null, json!(["db"])]));
            Want::NoDecode
        }
        21 => {
            obj.insert("open_until_ms".into(), Value::Null);
            obj.insert("window".into(), Value::Null);
            if open {
                Want::Refused("open_until")
            } else {
                Want::Restores
            }
        }
        22 => {
            let cut = (raw as usize) % text.len();
            text_override = Some(text[..cut].to_string());
            Want::NoDecode
        }
        _ => {
            text_override = Some(
                ["[]", "{}", "null", "\"open\"", "1", "{\"version\":1}"][(raw % 6) as usize]
                    .to_string(),
            );
            Want::NoDecode
        }
    };
    let doc = text_override.unwrap_or_else(|| v.to_string());
    let decoded = serde_json::from_str::<SavedState>(&doc);
    let outcome = decoded.map(|s| {
        let at = if matches!(kind % 24, 7 | 8) {
            now
        } else {
            s.saved_at.max(now)
        };
        let (_, _, b) = build(cfg2, &s, at);
        b.map(|b| {
            let m = b.metrics();
            match check {
                Check::Nothing => {}
                Check::OpenFor(left) => assert_eq!(
                    (m.state, m.retry_after),
                    (State::Open, Some(ms(left))),
                    "{doc}"
                ),
                Check::Window(w) => assert_eq!((m.state, m.window), (State::Closed, w), "{doc}"),
            }
            // A restored breaker works: time moves it on.
            let _ = b.try_acquire().map(|p| p.failure());
            let _ = b.metrics();
            let _ = b.save_at(at);
            b.state()
        })
    });
    match (&want, &outcome) {
        (Want::NoDecode, Err(_)) => {}
        (Want::Refused(why), Ok(Err(e))) => {
            prop_assert_eq!(e.field(), "restore", "{}", doc);
            prop_assert!(e.reason().contains(why), "{} for {}", e, doc);
        }
        (Want::Restores, Ok(Ok(_))) => {}
        (Want::NoDecodeOrRefused(_), Err(_)) => {}
        (Want::NoDecodeOrRefused(why), Ok(Err(e))) => {
            prop_assert_eq!(e.field(), "restore", "{}", doc);
            prop_assert!(e.reason().contains(why), "{} for {}", e, doc);
        }
        _ => prop_assert!(
            false,
            "{:?} wanted, got {:?} for {}",
            want,
            outcome
                .as_ref()
                .map(|r| r.as_ref().map_err(|e| e.to_string()))
                .map_err(|e| e.to_string()),
            doc
        ),
    }
    Ok(())
}

/// `SavedState`'s docs: "`save` takes whole milliseconds already, so its states
/// round-trip exactly." A breaker with `window(50 ms, 3)` has buckets of
/// 16.666666 ms, a window of 49.999998 ms: `save` records it as 49 ms, as the
/// wire's `length_ms` carries it (it once recorded 49.999998 ms, and the decoded
/// state differed), and the same settings take the totals back.
#[cfg(feature = "serde")]
#[test]
fn a_saved_window_length_round_trips_through_json() {
    let builder = || common::rate_window(ms(50), 3, 0.5, 4).clock(ManualClock::new());
    let b = builder().build().unwrap();
    let _ = b.call(|| Err::<(), _>("down"));
    let saved = b.save_at(t0());
    let back: SavedState = serde_json::from_str(&serde_json::to_string(&saved).unwrap()).unwrap();
    assert_eq!(back, saved);
    let restored = builder().restore_at(back, t0()).build().unwrap();
    assert_eq!(restored.metrics().window, b.metrics().window);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn a_restored_breaker_keeps_what_the_docs_promise_and_behaves_as_the_original(
        (cfg1, cfg2) in any_cfg().prop_flat_map(|c| (Just(c.clone()), restoring_cfg(c))),
        ops in proptest::collection::vec(any_op(), 0..40),
        w_frac in prop_oneof![3 => Just(0u64), 1 => 0..MS],
        when in any_when(),
        path in any::<u8>(),
        mutation in (any::<u8>(), any::<u64>()),
    ) {
        model(cfg1, ops, cfg2, w_frac, when, path, mutation)?;
    }
}
