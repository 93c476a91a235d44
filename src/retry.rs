//! Retries through a breaker, with full-jitter exponential backoff.
//!
//! See [`RetryPolicy`] for the backoff and how the breaker ends retries.
//!
//! # Orderings
//! The policy's draw counter is `Relaxed`: it only hands each retry loop a distinct
//! random stream.

use crate::clock::Clock;
use crate::sync::{AtomicU64, Ordering};
use crate::util::{random_seed, saturating_nanos, splitmix64};
use crate::{CircuitBreaker, ConfigError, Error, State};
use std::fmt;
use std::future::Future;
use std::time::Duration;

const DEFAULT_BASE: Duration = Duration::from_millis(100);
const DEFAULT_CAP: Duration = Duration::from_secs(10);
const DEFAULT_MAX_ATTEMPTS: u32 = 3;
/// splitmix64's increment (the golden ratio in 64 bits).
const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// Says whether an error is worth another attempt.
///
/// Implemented by every `Fn(&E) -> bool` and by [`RetryAny`], the default.
///
/// # Examples
/// ```
/// use cutout::Retryable;
/// use std::io::ErrorKind;
///
/// let transient = |e: &std::io::Error| e.kind() == ErrorKind::TimedOut;
/// assert!(transient.is_retryable(&ErrorKind::TimedOut.into()));
/// assert!(!transient.is_retryable(&ErrorKind::PermissionDenied.into()));
/// ```
pub trait Retryable<E> {
    /// Whether `error` is worth another attempt.
    fn is_retryable(&self, error: &E) -> bool;
}

impl<E, F: Fn(&E) -> bool> Retryable<E> for F {
    fn is_retryable(&self, error: &E) -> bool {
        self(error)
    }
}

/// The default [`Retryable`]: every error is worth another attempt.
///
/// # Examples
/// ```
/// use cutout::{RetryAny, Retryable};
///
/// assert!(RetryAny.is_retryable(&"anything"));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RetryAny;

impl<E> Retryable<E> for RetryAny {
    fn is_retryable(&self, _: &E) -> bool {
        true
    }
}

/// How to retry: full-jitter exponential backoff from `base` up to `cap`, at most
/// `max_attempts` attempts in all, retrying the errors `retryable` accepts.
///
/// Share one policy between threads; each retry loop draws its own random stream.
///
/// Retry `n` (counting from 0) waits a uniformly random time between zero and
/// `min(cap, base * 2^n)` ("full jitter"; a ceiling beyond `u64::MAX` nanoseconds,
/// 584 years, draws up to that), so clients that failed together do not retry
/// together. Every attempt goes through the breaker, and the breaker has the last
/// word: a rejection ends the retries at once, and after a failure that left the
/// breaker Open, HalfOpen or ForcedOpen, the next attempt is made without sleeping
/// (it is rejected at once, or admitted as a probe once the cooldown is over), so
/// no retry ever sleeps against an open breaker. The breaker's cooldown is the
/// backoff there. A [shadow](crate::Builder::shadow) breaker admits every call
/// whatever its state, so its retries back off as when closed.
///
/// The sleep is injected: [`retry`] uses `std::thread::sleep`, [`retry_with_sleep`]
/// any function, and [`retry_async`] any sleep-future factory (such as
/// `tokio::time::sleep`), so no runtime is forced on the caller. The jitter comes
/// from a small internal generator (splitmix64), seeded randomly or by
/// [`seed`](RetryPolicyBuilder::seed) for reproducible tests.
///
/// # Examples
/// ```
/// use cutout::RetryPolicy;
/// use std::time::Duration;
///
/// let policy = RetryPolicy::builder()
///     .base(Duration::from_millis(50))
///     .cap(Duration::from_secs(2))
///     .max_attempts(4)
///     .retryable(|e: &std::io::Error| e.kind() == std::io::ErrorKind::TimedOut)
///     .build()?;
/// assert_eq!(policy.ceiling(0), Duration::from_millis(50));
/// assert_eq!(policy.ceiling(3), Duration::from_millis(400));
/// assert_eq!(policy.ceiling(10), Duration::from_secs(2)); // capped
/// # Ok::<(), cutout::ConfigError>(())
/// ```
pub struct RetryPolicy<R = RetryAny> {
    base: Duration,
    cap: Duration,
    max_attempts: u32,
    retryable: R,
    seed: u64,
    /// Random streams handed out so far.
    draws: AtomicU64,
}

impl RetryPolicy {
    /// A builder with the defaults: base 100 ms, cap 10 s, 3 attempts, every error
    /// retryable, a random seed.
    pub fn builder() -> RetryPolicyBuilder {
        RetryPolicyBuilder {
            base: DEFAULT_BASE,
            cap: DEFAULT_CAP,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            retryable: RetryAny,
            seed: None,
        }
    }
}

impl<R> RetryPolicy<R> {
    /// The longest wait before retry `retry` (counting from 0): `min(cap, base *
    /// 2^retry)`. The actual wait is uniform between zero and this.
    pub fn ceiling(&self, retry: u32) -> Duration {
        // `Duration` multiplies by a `u32` only: past 2^31, double until the cap
        // is reached (from a base of a nanosecond, at most 64 more times before
        // `Duration::MAX`).
        let mut ceiling = self.base.saturating_mul(1 << retry.min(31));
        for _ in 31..retry {
            if ceiling >= self.cap || ceiling.is_zero() {
                break;
            }
            ceiling = ceiling.saturating_mul(2);
        }
        ceiling.min(self.cap)
    }

    /// The most attempts a retry loop makes, the first included.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// A fresh random stream for one retry loop.
    fn jitter(&self) -> Jitter {
        // Relaxed: only hands out distinct stream numbers.
        let stream = self.draws.fetch_add(1, Ordering::Relaxed);
        Jitter(splitmix64(self.seed ^ stream.wrapping_mul(GAMMA)))
    }

    /// What to do after attempt `attempt` (from 0) failed with `error`.
    fn after_failure<C: Clock, E>(
        &self,
        breaker: &CircuitBreaker<C>,
        attempt: u32,
        error: &E,
        jitter: &mut Option<Jitter>,
    ) -> Next
    where
        R: Retryable<E>,
    {
        if attempt.saturating_add(1) >= self.max_attempts || !self.retryable.is_retryable(error) {
            return Next::GiveUp;
        }
        // A shadow breaker admits every call, whatever its state: it is no
        // backoff, and the retries back off as when closed.
        let state = match breaker.is_shadow() {
            true => State::Closed,
            false => breaker.state(),
        };
        match state {
            // The breaker is the backoff: the next attempt is rejected at once, or
            // admitted as a probe.
            State::Open | State::HalfOpen | State::ForcedOpen => Next::Now,
            // Recovering admits a share of the calls: back off as when closed (a
            // shed attempt is a rejection, which ends the retries).
            State::Closed | State::Disabled | State::Recovering => {
                let ceiling = self.ceiling(attempt);
                let jitter = jitter.get_or_insert_with(|| self.jitter());
                Next::After(jitter.up_to(ceiling))
            }
        }
    }
}

/// A clone draws streams of its own: its seed is the next stream's number mixed
/// into the original's, so clients that each clone one policy and fail together
/// do not retry together. (A policy built with a fixed seed and cloned the same
/// way clones the same seeds, as a test wants.)
impl<R: Clone> Clone for RetryPolicy<R> {
    fn clone(&self) -> Self {
        // Relaxed: only hands out distinct stream numbers.
        let stream = self.draws.fetch_add(1, Ordering::Relaxed);
        RetryPolicy {
            base: self.base,
            cap: self.cap,
            max_attempts: self.max_attempts,
            retryable: self.retryable.clone(),
            seed: splitmix64(self.seed ^ stream.wrapping_mul(GAMMA) ^ CLONED),
            draws: AtomicU64::new(0),
        }
    }
}

/// Mixed into a clone's seed, so that it differs from the stream of the same
/// number the original hands a retry loop.
const CLONED: u64 = 0xd1b5_4a32_d192_ed03;

impl<R> fmt::Debug for RetryPolicy<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryPolicy")
            .field("base", &self.base)
            .field("cap", &self.cap)
            .field("max_attempts", &self.max_attempts)
            .finish_non_exhaustive()
    }
}

/// Configures a [`RetryPolicy`]; start with [`RetryPolicy::builder`].
///
/// # Examples
/// ```
/// use cutout::RetryPolicy;
/// use std::time::Duration;
///
/// let err = RetryPolicy::builder()
///     .base(Duration::from_secs(1))
///     .cap(Duration::from_millis(500))
///     .build()
///     .unwrap_err();
/// assert_eq!(err.field(), "cap");
/// ```
#[must_use = "a builder does nothing until `build()`"]
#[derive(Clone, Debug)]
pub struct RetryPolicyBuilder<R = RetryAny> {
    base: Duration,
    cap: Duration,
    max_attempts: u32,
    retryable: R,
    seed: Option<u64>,
}

impl<R> RetryPolicyBuilder<R> {
    /// The ceiling of the first retry's wait (default 100 ms); each retry doubles
    /// it, up to [`cap`](Self::cap). Zero retries at once.
    pub fn base(mut self, base: Duration) -> Self {
        self.base = base;
        self
    }

    /// The longest wait (default 10 s). Must not be below [`base`](Self::base).
    pub fn cap(mut self, cap: Duration) -> Self {
        self.cap = cap;
        self
    }

    /// The most attempts, the first included (default 3; 1 means no retry). Must
    /// be at least 1.
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n;
        self
    }

    /// Retries only the errors `retryable` accepts (default: every error).
    pub fn retryable<R2>(self, retryable: R2) -> RetryPolicyBuilder<R2> {
        RetryPolicyBuilder {
            base: self.base,
            cap: self.cap,
            max_attempts: self.max_attempts,
            retryable,
            seed: self.seed,
        }
    }

    /// Seeds the jitter, for reproducible waits (default: a random seed).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Checks the settings and builds the policy.
    ///
    /// # Errors
    /// A [`ConfigError`] naming `max_attempts` when it is zero, or `cap` when it is
    /// below `base`.
    pub fn build(self) -> Result<RetryPolicy<R>, ConfigError> {
        if self.max_attempts == 0 {
            return Err(ConfigError::new("max_attempts", "must be at least 1"));
        }
        if self.cap < self.base {
            return Err(ConfigError::new("cap", "must not be below base"));
        }
        Ok(RetryPolicy {
            base: self.base,
            cap: self.cap,
            max_attempts: self.max_attempts,
            retryable: self.retryable,
            seed: self.seed.unwrap_or_else(random_seed),
            draws: AtomicU64::new(0),
        })
    }
}

/// What a retry loop does after a failed attempt.
enum Next {
    GiveUp,
    Now,
    After(Duration),
}

/// A splitmix64 stream.
struct Jitter(u64);

impl Jitter {
    fn next_u64(&mut self) -> u64 {
        let out = splitmix64(self.0);
        self.0 = self.0.wrapping_add(GAMMA);
        out
    }

    /// Uniform in `0..=ceiling`, to the nanosecond.
    fn up_to(&mut self, ceiling: Duration) -> Duration {
        let nanos = saturating_nanos(ceiling);
        let span = u128::from(nanos) + 1;
        // Multiply-shift: the high half of a 64x65-bit product is uniform in 0..span
        // up to a bias of span / 2^64.
        Duration::from_nanos(((u128::from(self.next_u64()) * span) >> 64) as u64)
    }
}

/// Calls `op` through `breaker`, retrying failures as `policy` says, sleeping with
/// `std::thread::sleep` between attempts.
///
/// # Errors
/// [`Error::Rejected`] as soon as the breaker rejects an attempt; otherwise the last
/// attempt's error, as [`Error::Inner`], once it is not retryable or the attempts
/// are used up.
///
/// # Examples
/// ```
/// use cutout::{CircuitBreaker, RetryPolicy, retry};
/// use std::time::Duration;
///
/// let breaker = CircuitBreaker::builder().build()?;
/// let policy = RetryPolicy::builder().base(Duration::from_millis(1)).build()?;
/// let mut calls = 0;
/// let answer = retry(&breaker, &policy, || {
///     calls += 1;
///     if calls < 2 { Err(std::io::ErrorKind::TimedOut.into()) } else { Ok::<_, std::io::Error>(42) }
/// })?;
/// assert_eq!((answer, calls), (42, 2));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn retry<C, R, T, E>(
    breaker: &CircuitBreaker<C>,
    policy: &RetryPolicy<R>,
    op: impl FnMut() -> Result<T, E>,
) -> Result<T, Error<E>>
where
    C: Clock,
    R: Retryable<E>,
{
    retry_with_sleep(breaker, policy, std::thread::sleep, op)
}

/// [`retry`] with an injected `sleep` (a test's fake clock, a rate limiter, ...).
///
/// # Errors
/// As [`retry`].
///
/// # Examples
/// ```
/// use cutout::{CircuitBreaker, Error, RetryPolicy, retry_with_sleep};
/// use std::time::Duration;
///
/// let breaker = CircuitBreaker::builder().consecutive_failures(10).build()?;
/// let policy = RetryPolicy::builder().max_attempts(3).seed(7).build()?;
/// let mut slept = Vec::new();
/// let result = retry_with_sleep(&breaker, &policy, |d| slept.push(d), || Err::<(), _>("down"));
/// assert_eq!(result, Err(Error::Inner("down")));
/// assert_eq!(slept.len(), 2); // between three attempts
/// assert!(slept[1] <= policy.ceiling(1));
/// # Ok::<(), cutout::ConfigError>(())
/// ```
pub fn retry_with_sleep<C, R, T, E>(
    breaker: &CircuitBreaker<C>,
    policy: &RetryPolicy<R>,
    mut sleep: impl FnMut(Duration),
    mut op: impl FnMut() -> Result<T, E>,
) -> Result<T, Error<E>>
where
    C: Clock,
    R: Retryable<E>,
{
    let mut jitter = None;
    let mut attempt = 0;
    loop {
        let error = match breaker.call(&mut op) {
            Err(Error::Inner(error)) => error,
            done => return done,
        };
        match policy.after_failure(breaker, attempt, &error, &mut jitter) {
            Next::GiveUp => return Err(Error::Inner(error)),
            Next::Now => {}
            Next::After(wait) => sleep(wait),
        }
        attempt += 1;
    }
}

/// [`retry`] for async operations: `op` makes each attempt's future, and
/// `sleep(wait)` makes the future to wait on between attempts, from whatever runtime
/// the caller uses (`tokio::time::sleep`, for example). Each attempt goes through
/// [`CircuitBreaker::call_async`], so dropping the returned future mid-attempt
/// counts that attempt as dropped, recorded as [`Dropped`](crate::Dropped) says
/// (ignored by default). `op` is called for every attempt before the breaker is
/// asked (the permit is taken at the attempt future's first poll): an attempt the
/// breaker rejects drops its future unpolled, so keep `op` itself free of side
/// effects (an `async` block, whose work starts when polled, is).
///
/// # Errors
/// As [`retry`].
///
/// # Panics
/// If polled again after it completed (as any `async fn`'s future).
///
/// # Examples
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use cutout::{CircuitBreaker, RetryPolicy, retry_async};
/// use std::time::Duration;
///
/// let breaker = CircuitBreaker::builder().build()?;
/// let policy = RetryPolicy::builder().seed(1).build()?;
/// let no_wait = |_: Duration| async {}; // tokio::time::sleep in real code
/// let mut calls = 0;
/// let answer = retry_async(&breaker, &policy, no_wait, || {
///     calls += 1;
///     let n = calls;
///     async move { if n < 3 { Err(std::io::ErrorKind::TimedOut.into()) } else { Ok::<_, std::io::Error>(n) } }
/// }).await?;
/// assert_eq!(answer, 3);
/// # Ok(())
/// # }
/// ```
pub async fn retry_async<C, R, T, E, Op, Fut, Sleep, Wait>(
    breaker: &CircuitBreaker<C>,
    policy: &RetryPolicy<R>,
    mut sleep: Sleep,
    mut op: Op,
) -> Result<T, Error<E>>
where
    C: Clock,
    R: Retryable<E>,
    Op: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    Sleep: FnMut(Duration) -> Wait,
    Wait: Future<Output = ()>,
{
    let mut jitter = None;
    let mut attempt = 0;
    loop {
        // The error's scope ends before the sleep: held across the `await`, it
        // would make the future `Send` only where `E` is.
        let wait = {
            let error = match breaker.call_async(op()).await {
                Err(Error::Inner(error)) => error,
                done => return done,
            };
            match policy.after_failure(breaker, attempt, &error, &mut jitter) {
                Next::GiveUp => return Err(Error::Inner(error)),
                Next::Now => None,
                Next::After(wait) => Some(wait),
            }
        };
        if let Some(wait) = wait {
            sleep(wait).await;
        }
        attempt += 1;
    }
}

#[cfg(all(test, not(cutout_loom)))]
mod tests {
    use super::*;

    #[test]
    fn ceilings_double_and_saturate_at_the_cap() {
        let p = RetryPolicy::builder()
            .base(Duration::from_millis(10))
            .cap(Duration::from_secs(1))
            .build()
            .unwrap();
        let ceilings: Vec<_> = (0..9).map(|n| p.ceiling(n).as_millis()).collect();
        assert_eq!(ceilings, [10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
        assert_eq!(p.ceiling(40), Duration::from_secs(1));
        assert_eq!(p.ceiling(u32::MAX), Duration::from_secs(1));
    }

    #[test]
    fn jitter_is_uniform_over_the_whole_range() {
        let mut j = Jitter(3);
        let ceiling = Duration::from_millis(1000);
        let draws: Vec<_> = (0..10_000).map(|_| j.up_to(ceiling)).collect();
        assert!(draws.iter().all(|d| *d <= ceiling));
        let mean = draws.iter().map(Duration::as_secs_f64).sum::<f64>() / draws.len() as f64;
        assert!((0.48..0.52).contains(&mean), "mean {mean}");
        assert!(draws.iter().any(|d| *d < Duration::from_millis(5)));
        assert!(draws.iter().any(|d| *d > Duration::from_millis(995)));
        assert_eq!(Jitter(9).up_to(Duration::ZERO), Duration::ZERO);
    }

    #[test]
    fn each_loop_gets_its_own_stream_and_seeds_reproduce() {
        let p = RetryPolicy::builder().seed(11).build().unwrap();
        let q = RetryPolicy::builder().seed(11).build().unwrap();
        let first: Vec<u64> = (0..3).map(|_| p.jitter().next_u64()).collect();
        let again: Vec<u64> = (0..3).map(|_| q.jitter().next_u64()).collect();
        assert_eq!(first, again, "one seed, the same streams");
        assert!(
            first[0] != first[1] && first[1] != first[2],
            "one stream per loop"
        );
        let other = RetryPolicy::builder().seed(12).build().unwrap();
        assert_ne!(first[0], other.jitter().next_u64());
    }

    #[test]
    fn bad_settings_name_their_field() {
        let zero = RetryPolicy::builder().max_attempts(0).build().unwrap_err();
        assert_eq!(zero.field(), "max_attempts");
        let low = RetryPolicy::builder()
            .base(Duration::from_secs(2))
            .cap(Duration::from_secs(1))
            .build()
            .unwrap_err();
        assert_eq!(low.field(), "cap");
        assert!(RetryPolicy::builder().base(Duration::ZERO).build().is_ok());
    }
}
