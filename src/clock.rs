//! Time sources. Only [`CircuitBreaker`](crate::CircuitBreaker) reads a clock; the
//! decision code takes `now` as an argument.
//!
//! | clock            | `now()` cost here | resolution | use                                  |
//! |------------------|-------------------|------------|--------------------------------------|
//! | [`DefaultClock`] | ~1 ns (one load)  | 1 ms       | production: a cached reading refreshed every millisecond from quanta's TSC clock by one background thread per process, started by the first breaker built with this clock |
//! | [`StdClock`]     | 25-50 ns          | 1 ns       | where no background thread is wanted  |
//! | [`ManualClock`]  | one atomic load   | 1 ns       | tests, including your own             |
//!
//! Every clock is monotonic: wall-clock steps (NTP, a changed time zone) change
//! nothing, because none of them reads the wall clock.

use crate::sync::{AtomicU64, Ordering, ProcessAtomicU64};
use crossbeam_utils::CachePadded;
use std::sync::OnceLock;
use std::time::Duration;

/// A monotonic time source.
///
/// The breaker reads [`now`](Clock::now) on the paths that need the time (the open
/// state's cooldown check, the sliding window's bucket) and
/// [`precise`](Clock::precise) twice per call when the slow-call policy times calls.
///
/// # Examples
/// A clock that reads `std::time::Instant` (like [`StdClock`]):
/// ```
/// use cutout::{CircuitBreaker, Clock};
/// use std::time::Instant;
///
/// struct Mine(Instant);
/// impl Clock for Mine {
///     fn now(&self) -> u64 {
///         self.0.elapsed().as_nanos() as u64
///     }
/// }
///
/// let breaker = CircuitBreaker::builder().clock(Mine(Instant::now())).build()?;
/// assert!(breaker.call(|| Ok::<_, ()>(1)).is_ok());
/// # Ok::<(), cutout::ConfigError>(())
/// ```
pub trait Clock: Send + Sync {
    /// Nanoseconds since an origin of the clock's choosing. Must never decrease.
    fn now(&self) -> u64;

    /// A precise reading, for timing calls against the slow-call threshold.
    /// Defaults to [`now`](Clock::now).
    fn precise(&self) -> u64 {
        self.now()
    }

    /// How far [`now`](Clock::now) may lag the true time. A window bucket shorter
    /// than this is a configuration error. Defaults to one nanosecond.
    fn resolution(&self) -> Duration {
        Duration::from_nanos(1)
    }

    /// Not part of the API: it may change in any release, and implementations need
    /// not override it. [`now`](Clock::now) if the reading is a load away, else
    /// `None`: the breaker's closed path then takes its slow branch, so that only
    /// that branch holds the call a reading would cost. Defaults to
    /// `Some(self.now())`.
    #[doc(hidden)]
    #[inline]
    fn now_if_cheap(&self) -> Option<u64> {
        Some(self.now())
    }

    /// Not part of the API: it may change in any release, and implementations need
    /// not override it. Called off the lean paths now and then (on every trip and
    /// reopening, and on every 256th rejection or failure a thread counts): a clock
    /// whose cheap reading is kept fresh by someone else checks that it still is
    /// (see [`DefaultClock`]'s fork safety). Defaults to nothing.
    #[doc(hidden)]
    fn revive(&self) {}
}

/// The default clock: a cached reading (one load), refreshed every millisecond by a
/// background thread (named `cutout-clock`), one per process.
/// [`precise`](Clock::precise) reads quanta's `Instant::now()` (the TSC where it is
/// reliable, ~25 ns).
///
/// # The refresh thread
/// It starts with the first reading: [`DefaultClock::new`], or the first breaker
/// built with the default clock. [`CircuitBreaker::builder`](crate::CircuitBreaker::builder)
/// alone starts nothing, so a breaker built with `.clock(StdClock::new())` or a
/// [`ManualClock`] leaves the process without the thread.
///
/// If the thread cannot be started, [`now`](Clock::now) falls back to
/// [`precise`](Clock::precise): slower, never wrong.
///
/// quanta has a recent-time thread of its own (`quanta::Upkeep` with
/// `Instant::recent`), but its reading is one global of the quanta crate shared by
/// every library in the process: the first `Upkeep` started sets the interval for
/// all, a second one fails to start, and when its owner drops the handle the thread
/// stops and `recent()` keeps returning its last value. A thread of cutout's own
/// cannot be stopped or retuned by another library.
///
/// # Fork safety
/// A `fork()`ed child has no refresh thread (only the forking thread survives). On
/// Linux, Android, macOS, the BSDs and Solaris, a `pthread_atfork` handler
/// (registered with the first refresh thread or thread slot) clears the cached
/// reading in the child, so the child's first reading is precise and starts a
/// refresh thread of its own: from then on the window ages, calls are timed and cooldowns end as in
/// the parent. As a fallback (and for a starved thread), every trip and
/// reopening, and every 256th rejection or failure counted by a thread, compares
/// the cached reading with a precise one (off the lean paths, which still cost
/// one load); a reading more than 100 ms behind is brought up to date and, in a
/// process that has not started one, a new refresh thread is started. (So a
/// child's first reading, on whatever path, starts a thread and allocates: code
/// between `fork` and `exec` that must not should not read the default clock.)
///
/// The handlers (the crate's, registered with its first thread slot or refresh
/// thread) take the thread-slot pool's lock and build the clock's calibration
/// before the fork, so they are not async-signal-safe: a `fork()` from a signal
/// handler (which POSIX.1-2024 no longer lists as async-signal-safe; `_Fork` is,
/// and runs no handlers) may deadlock if the signal interrupted this crate on the
/// same thread while it held that lock (briefly, as a thread makes its first call
/// to any breaker, trades its slot, or exits) or built that calibration (the
/// first reading of the default clock).
///
/// # Examples
/// ```
/// use cutout::{Clock, DefaultClock};
///
/// let clock = DefaultClock::new();
/// let a = clock.now();
/// assert!(clock.now() >= a);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct DefaultClock {
    _private: (),
}

/// How often the refresh thread updates the cached reading.
const REFRESH_INTERVAL: Duration = Duration::from_millis(1);

/// How far the cached reading may lag a precise one before [`revive`] takes the
/// refresh thread for gone.
const STALE_AFTER: u64 = 100_000_000;

/// The cached reading: nanoseconds since [`origin`], at least 1 while a refresh
/// thread runs; 0 before the first reading, or if the thread could not start.
// Padded: at the start of its own line, so never at a stripe counter's place in a
// line (see `stripe::LEAN_LOADS`).
static RECENT: CachePadded<ProcessAtomicU64> = CachePadded::new(ProcessAtomicU64::new(0));

/// The process id of the process whose refresh thread runs (0: none started),
/// with [`NO_THREAD`] set if it could not start there.
static OWNER: ProcessAtomicU64 = ProcessAtomicU64::new(0);

/// In [`OWNER`]: the refresh thread could not be started; `now` reads precisely.
const NO_THREAD: u64 = 1 << 32;

/// Without a refresh thread ([`NO_THREAD`]): the largest reading returned, so that
/// precise readings, which another thread may have taken later but read as
/// earlier, never go back.
static PRECISE: ProcessAtomicU64 = ProcessAtomicU64::new(0);

fn origin() -> quanta::Instant {
    static ORIGIN: OnceLock<quanta::Instant> = OnceLock::new();
    *ORIGIN.get_or_init(quanta::Instant::now)
}

#[cold]
fn precise_nanos() -> u64 {
    let nanos = quanta::Instant::now()
        .saturating_duration_since(origin())
        .as_nanos();
    u64::try_from(nanos).unwrap_or(u64::MAX)
}

/// Starts the refresh thread in this process unless one runs here already (or
/// could not start here). `pid` is this process's id.
#[cold]
fn start_refresh(pid: u64) {
    // Before the owner is claimed: a fork between the claim and the thread's
    // start must find the handler registered.
    crate::fork::register();
    // Acquire/AcqRel: the owner word picks the one thread of this process that
    // starts the refresh thread; the loser reads precisely until it runs.
    let owner = OWNER.load(Ordering::Acquire);
    if owner & !NO_THREAD == pid
        || OWNER
            .compare_exchange(owner, pid, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
    {
        return;
    }
    // Relaxed (here and below): a time reading publishes nothing else. Every
    // writer takes the maximum, so the reading never goes backwards.
    RECENT.fetch_max(precise_nanos().max(1), Ordering::Relaxed);
    let refresh = || {
        loop {
            std::thread::sleep(REFRESH_INTERVAL);
            RECENT.fetch_max(precise_nanos().max(1), Ordering::Relaxed);
        }
    };
    if std::thread::Builder::new()
        .name("cutout-clock".into())
        .spawn(refresh)
        .is_err()
    {
        // Without the thread, `now` falls back to precise readings, kept monotone
        // and never behind the reading stored above (see `first_or_precise`).
        // SeqCst: a racing first reading that publishes after this store sees the
        // owner's mark and clears the cached reading again.
        OWNER.store(pid | NO_THREAD, Ordering::SeqCst);
        PRECISE.fetch_max(RECENT.swap(0, Ordering::SeqCst), Ordering::Relaxed);
    }
}

/// Builds the clock's lazily built parts (quanta's calibration, the origin of
/// the precise readings) if no thread has yet, or waits for the thread building
/// them: called by [`crate::fork`]'s prepare handler, so that a child never
/// inherits one half built by a thread it does not have (its first reading would
/// wait for ever). The first fork of a process that never read the default clock
/// pays the calibration here (a millisecond or so).
pub(crate) fn before_fork() {
    let _ = precise_nanos();
}

/// Makes a `fork()`ed child forget the cached reading and the refresh thread it
/// did not inherit: its next reading is precise and starts a thread of its own
/// (see [`DefaultClock`]'s fork safety). Called by [`crate::fork`]'s child
/// handler, registered before the first refresh thread starts, in the child, on
/// its only thread: two atomic stores, which are async-signal-safe.
pub(crate) fn forget_after_fork() {
    // Relaxed: the child has one thread, this one, until the handler returns.
    RECENT.store(0, Ordering::Relaxed);
    OWNER.store(0, Ordering::Relaxed);
}

/// The reading when the cached one is 0: the first readings in the process (the
/// first starts the refresh thread), or every reading where the thread could not
/// start. Every reading it returns is the maximum of a shared word, which it
/// raises: a precise reading may be behind one another thread took before (the
/// time counter is read unordered), and the refresh thread's first reading may be
/// published after a racing thread's later one, so returning a precise reading as
/// it is would let a thread's next reading go back.
#[cold]
fn first_or_precise() -> u64 {
    // Acquire: pairs with start_refresh's owner writes.
    if OWNER.load(Ordering::Acquire) == 0 {
        start_refresh(u64::from(std::process::id()));
    }
    let precise = precise_nanos().max(1);
    if OWNER.load(Ordering::Acquire) & NO_THREAD != 0 {
        // No refresh thread: the cached reading stays 0, so that every reading
        // comes here, and the readings' maximum is kept apart. Relaxed: as in
        // start_refresh.
        return PRECISE.fetch_max(precise, Ordering::Relaxed).max(precise);
    }
    // Published, as the refresh thread's readings are. SeqCst: see start_refresh's
    // spawn failure, which this re-checks after publishing.
    let reading = RECENT.fetch_max(precise, Ordering::SeqCst).max(precise);
    if OWNER.load(Ordering::SeqCst) & NO_THREAD != 0 {
        let published = RECENT.swap(0, Ordering::SeqCst);
        PRECISE.fetch_max(published.max(reading), Ordering::Relaxed);
    }
    reading
}

/// Brings a cached reading that lags by more than [`STALE_AFTER`] up to date, and
/// starts a refresh thread if this process has none (a `fork()`ed child).
#[cold]
#[inline(never)]
fn revive() {
    // Relaxed: see start_refresh.
    let recent = RECENT.load(Ordering::Relaxed);
    if recent == 0 {
        return; // not started, or no thread: `now` reads precisely
    }
    let precise = precise_nanos();
    if precise.saturating_sub(recent) <= STALE_AFTER {
        return;
    }
    // Relaxed: as above.
    RECENT.fetch_max(precise, Ordering::Relaxed);
    start_refresh(u64::from(std::process::id()));
}

impl DefaultClock {
    /// A handle on the process-wide clock; starts the refresh thread the first time.
    pub fn new() -> DefaultClock {
        let clock = DefaultClock::lazy();
        let _ = clock.now();
        clock
    }

    /// A handle that starts nothing until it is first read: what
    /// [`CircuitBreaker::builder`](crate::CircuitBreaker::builder) holds until
    /// `.clock(...)` replaces it or `build()` reads it.
    pub(crate) const fn lazy() -> DefaultClock {
        DefaultClock { _private: () }
    }
}

impl Default for DefaultClock {
    fn default() -> DefaultClock {
        DefaultClock::new()
    }
}

impl Clock for DefaultClock {
    #[inline]
    fn now(&self) -> u64 {
        // Relaxed: see the refresh thread.
        match RECENT.load(Ordering::Relaxed) {
            0 => first_or_precise(),
            n => n,
        }
    }

    fn precise(&self) -> u64 {
        precise_nanos()
    }

    fn resolution(&self) -> Duration {
        REFRESH_INTERVAL
    }

    #[inline]
    fn now_if_cheap(&self) -> Option<u64> {
        // Relaxed: see the refresh thread. 0: no refresh thread; `now` must call.
        match RECENT.load(Ordering::Relaxed) {
            0 => None,
            n => Some(n),
        }
    }

    fn revive(&self) {
        revive();
    }
}

/// A clock on `std::time::Instant`: no background thread, nanosecond resolution,
/// 25-50 ns a reading.
///
/// # Examples
/// ```
/// use cutout::{CircuitBreaker, StdClock};
///
/// let breaker = CircuitBreaker::builder().clock(StdClock::new()).build()?;
/// assert!(breaker.call(|| Ok::<_, ()>(())).is_ok());
/// # Ok::<(), cutout::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct StdClock {
    origin: std::time::Instant,
}

impl StdClock {
    /// A clock whose origin is now.
    pub fn new() -> StdClock {
        StdClock {
            origin: std::time::Instant::now(),
        }
    }
}

impl Default for StdClock {
    fn default() -> StdClock {
        StdClock::new()
    }
}

impl Clock for StdClock {
    fn now(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }
}

/// A clock that moves only when told to: for tests, yours included.
///
/// Clones share one time, so a test keeps a clone and advances the breaker's clock.
///
/// # Examples
/// ```
/// use cutout::{CircuitBreaker, ManualClock, State};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let breaker = CircuitBreaker::builder()
///     .consecutive_failures(1)
///     .open_duration(Duration::from_secs(1))
///     .clock(clock.clone())
///     .build()?;
/// let _ = breaker.call(|| Err::<(), _>("boom"));
/// assert_eq!(breaker.state(), State::Open);
///
/// clock.advance(Duration::from_secs(1));
/// assert!(breaker.call(|| Ok::<_, ()>(())).is_ok()); // the probe closes it
/// assert_eq!(breaker.state(), State::Closed);
/// # Ok::<(), cutout::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
pub struct ManualClock {
    nanos: crate::sync::Arc<AtomicU64>,
}

impl Default for ManualClock {
    fn default() -> ManualClock {
        ManualClock::new()
    }
}

impl ManualClock {
    /// A clock at time zero.
    pub fn new() -> ManualClock {
        ManualClock {
            nanos: crate::sync::Arc::new(AtomicU64::new(0)),
        }
    }

    /// Moves time forward by `by` (saturating at `u64::MAX` nanoseconds).
    pub fn advance(&self, by: Duration) {
        let by = crate::util::saturating_nanos(by);
        // AcqRel: readers that see the new time also see what the advancing thread
        // did before advancing.
        let _ = self
            .nanos
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                Some(n.saturating_add(by))
            });
    }

    /// The time since this clock was created.
    pub fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.now())
    }
}

impl Clock for ManualClock {
    #[inline]
    fn now(&self) -> u64 {
        // Acquire: pairs with the AcqRel of `advance`.
        self.nanos.load(Ordering::Acquire)
    }
}

impl<C: Clock + ?Sized> Clock for std::sync::Arc<C> {
    fn now(&self) -> u64 {
        (**self).now()
    }
    fn precise(&self) -> u64 {
        (**self).precise()
    }
    fn resolution(&self) -> Duration {
        (**self).resolution()
    }
    fn now_if_cheap(&self) -> Option<u64> {
        (**self).now_if_cheap()
    }
    fn revive(&self) {
        (**self).revive()
    }
}

#[cfg(all(test, not(cutout_loom)))]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_clones_share_one_time() {
        let clock = ManualClock::new();
        let other = clock.clone();
        other.advance(Duration::from_millis(1500));
        assert_eq!(clock.now(), 1_500_000_000);
        assert_eq!(clock.elapsed(), Duration::from_millis(1500));
    }

    #[test]
    fn manual_clock_saturates_instead_of_wrapping() {
        let clock = ManualClock::new();
        clock.advance(Duration::MAX);
        clock.advance(Duration::from_secs(1));
        assert_eq!(clock.now(), u64::MAX);
    }

    #[test]
    fn real_clocks_never_go_backwards() {
        let (d, s) = (DefaultClock::new(), StdClock::new());
        let (mut last_d, mut last_s, mut last_p) = (d.now(), s.now(), d.precise());
        for _ in 0..10_000 {
            let (nd, ns, np) = (d.now(), s.now(), d.precise());
            assert!(nd >= last_d && ns >= last_s && np >= last_p);
            (last_d, last_s, last_p) = (nd, ns, np);
        }
        assert_eq!(d.resolution(), REFRESH_INTERVAL);
    }
}
