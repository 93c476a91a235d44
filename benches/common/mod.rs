//! The implementations every harness compares, behind one small trait, and the
//! sets of them each scenario builds (closed, tripped open, failing below the
//! threshold). Shared by the criterion harnesses and by `examples/instructions.rs`
//! and `examples/memory.rs`, so every figure measures the same code.
//!
//! A scenario hands each implementation to a [`Visit`] by value and by concrete
//! type, so the measured loop is monomorphised: no dynamic dispatch is timed.

use criterion::measurement::Measurement;
use cutout::{CircuitBreaker, Clock, DefaultClock, Error, ManualClock};
use std::future::Future;
use std::hint::black_box;
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// A cooldown no benchmark outlives.
pub const LONG: Duration = Duration::from_secs(3600);

/// One implementation under test.
///
/// `call` is generic over the closure, as every breaker's own `call` is, and every
/// call site passes a closure literal of its own ([`succeed!`] and [`fail!`] write
/// one): so each measured call is its own instantiation with one caller, as a
/// user's `breaker.call(|| ...)` is, and the compiler inlines it into the loop or
/// not by the measure it applies to the user's code. A method called from several
/// places would not be measured so: the compiler inlines a small one (the floors')
/// into the loop and calls a larger one (cutout's), so the harness would compare an
/// inlined floor with a called breaker.
pub trait Subject: Sync {
    /// Runs `f` through the implementation. Returns whether it ran (false: rejected).
    fn call(&self, f: impl FnOnce() -> Result<u64, u64>) -> bool;
}

/// A call whose closure succeeds, through a [`Subject`], with a closure of its own:
/// whether the closure ran.
macro_rules! succeed {
    ($s:expr) => {
        $s.call(|| Ok(::std::hint::black_box(1)))
    };
}
#[allow(unused_imports)] // by path, for the harnesses that use it
pub(crate) use succeed;

/// A call whose closure fails, through a [`Subject`], with a closure of its own:
/// whether the closure ran.
macro_rules! fail {
    ($s:expr) => {
        $s.call(|| Err(::std::hint::black_box(1)))
    };
}
#[allow(unused_imports)] // as `succeed`
pub(crate) use fail;

/// The call shapes that the harnesses share, each a loop of its own
/// that is never inlined (callgrind collects inside `*drive_*` only): `calls`
/// successful calls through `s` written at the call site, inlined into the loop.
/// Returns how many ran.
#[inline(never)]
pub fn drive_succeed<S: Subject>(s: &S, calls: u64) -> u64 {
    let mut ran = 0;
    for _ in 0..calls {
        ran += u64::from(succeed!(black_box(s)));
    }
    ran
}

/// A shared generic helper that is not inlined, as one called from many places
/// would be: one instantiation per implementation.
#[inline(never)]
pub fn helper<S: Subject>(s: &S) -> bool {
    succeed!(s)
}

/// [`drive_succeed`] through [`helper`].
#[inline(never)]
pub fn drive_helper<S: Subject>(s: &S, calls: u64) -> u64 {
    let mut ran = 0;
    for _ in 0..calls {
        ran += u64::from(helper(black_box(s)));
    }
    ran
}

/// `s` as a caller that keeps its breaker in a struct field reaches it: read from
/// memory at every call, where nothing was just stored. The loops above hand
/// each call `black_box(s)`, which stores `s` to the stack and loads it straight
/// back: a CPU without memory renaming (a Zen 1, for one) forwards that store to
/// the load in about six cycles, at the head of every load the call makes, and
/// so charges the harness's round trip to the shape (`docs/PERFORMANCE.md`,
/// "Call shapes"). A volatile read of a slot written once is as opaque to
/// the compiler, so no load of the breaker's is hoisted out of the loop.
#[inline(always)]
pub fn loaded<'s, S>(slot: &&'s S) -> &'s S {
    // SAFETY: `slot` is a reference, so valid and aligned for a read of `&S`.
    unsafe { std::ptr::read_volatile(slot) }
}

/// [`drive_succeed`] with the subject [`loaded`] at each call, not passed
/// through `black_box`.
#[inline(never)]
pub fn drive_succeed_loaded<S: Subject>(s: &S, calls: u64) -> u64 {
    let slot = s;
    let mut ran = 0;
    for _ in 0..calls {
        ran += u64::from(succeed!(loaded(&slot)));
    }
    ran
}

/// [`drive_helper`] with the subject [`loaded`] at each call.
#[inline(never)]
pub fn drive_helper_loaded<S: Subject>(s: &S, calls: u64) -> u64 {
    let slot = s;
    let mut ran = 0;
    for _ in 0..calls {
        ran += u64::from(helper(loaded(&slot)));
    }
    ran
}

/// `calls` calls of a `&dyn Fn` callback (one held in a struct, say), in a loop of
/// `S`'s own: each implementation's calls go through an indirect call site that
/// calls only its callback, as a user's loop over one callback does.
///
/// The loop's code does not depend on `S`, so without the `type_name` below LLVM's
/// function merging (which rustc turns on) would fold every instantiation into
/// one, and every implementation would share one site. A site that has jumped to
/// more than one target is predicted another way (from the branch history, not the
/// target it last had), most likely, which on the Zen 4 costs up to 3 cycles a
/// call, breaker or none: the consecutive policy's call measured 2.98 ns through a
/// shared site and 2.17 ns through its own (`docs/PERFORMANCE.md`, "Call shapes").
/// [`drive_dyn_shared`] keeps the shared site, to show that cost.
#[inline(never)]
pub fn drive_dyn<S>(f: &dyn Fn() -> bool, calls: u64) -> u64 {
    black_box(std::any::type_name::<S>()); // a constant of `S`'s: not merged
    dyn_loop(f, calls)
}

/// [`drive_dyn`] through one site that every implementation's callback goes
/// through, as a dispatcher's over many callbacks does.
#[inline(never)]
pub fn drive_dyn_shared(f: &dyn Fn() -> bool, calls: u64) -> u64 {
    dyn_loop(f, calls)
}

#[inline(always)]
fn dyn_loop(f: &dyn Fn() -> bool, calls: u64) -> u64 {
    let mut ran = 0;
    for _ in 0..calls {
        ran += u64::from(f());
    }
    ran
}

/// Polls `f` once with a no-op waker, in place: the output of a future that is
/// ready at once (panics if it is pending). `#[inline]`: without the hint, a
/// harness's loop no longer inlines `call_async`'s whole future (76 -> 114
/// instructions in `examples/instructions.rs`), though the code is the same as
/// when each harness had its own copy.
#[inline]
pub fn poll_once<F: Future>(f: F) -> F::Output {
    match pin!(f).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(out) => out,
        Poll::Pending => unreachable!("the future is ready"),
    }
}

/// Polls each future `make` makes as an executor polls a task, for the async and
/// tower shapes: the future is pinned where it was made (never moved) and polled
/// once, through a function pointer the compiler cannot see through, as an
/// executor reaches a task's poll through its vtable. So the future's poll is a
/// function of its own, whatever the compiler would have inlined into a loop that
/// polls it directly: the shape in which an async breaker and a tower layer
/// compare like for like. Panics if a future is pending.
pub fn as_a_task<F: Future>(mut make: impl FnMut() -> F) -> impl FnMut() -> F::Output {
    // Opaque once, outside the measured loop: the pointer is one word, so no
    // store-forwarding stall of a two-word `black_box` is measured with it.
    let poll: fn(Pin<&mut F>, &mut Context<'_>) -> Poll<F::Output> = black_box(F::poll);
    move || {
        let future = pin!(make());
        match poll(future, &mut Context::from_waker(Waker::noop())) {
            Poll::Ready(out) => out,
            Poll::Pending => unreachable!("the future is ready"),
        }
    }
}

/// Like [`as_a_task`], four futures at a time, as an executor polls tasks
/// spawned before: all four are made (each pinned where it was made), then each
/// polled once through a function pointer made opaque once. So no poll reads a
/// future its maker has only just written, which `as_a_task` does: there the
/// poll's first loads wait for the stores that made the future (a ready future
/// with no breaker, polled as a task, costs 6 ns on the AMD EPYC machine of
/// `docs/PERFORMANCE.md`, 0.3 ns in the loop). Returns how many of the four
/// succeeded.
pub fn four_tasks<F, E>(mut make: impl FnMut() -> F) -> impl FnMut() -> u64
where
    F: Future<Output = Result<u64, E>>,
{
    let poll: fn(Pin<&mut F>, &mut Context<'_>) -> Poll<F::Output> = black_box(F::poll);
    move || {
        let tasks = [pin!(make()), pin!(make()), pin!(make()), pin!(make())];
        let mut ok = 0;
        for task in tasks {
            match poll(task, &mut Context::from_waker(Waker::noop())) {
                Poll::Ready(out) => ok += u64::from(out.is_ok()),
                Poll::Pending => unreachable!("the future is ready"),
            }
        }
        ok
    }
}

/// The always-ready inner service of the tower shapes (`benches/shapes.rs`,
/// `examples/paired.rs`, `examples/instructions.rs`), with error type `E`.
///
/// Each way of polling the layer's future takes its own `E`, as each way of
/// polling `call_async`'s does, so that each is a future type of its own: with one
/// type for all, the layer's `poll` is one function, its address taken for the
/// as-a-task rows, and the compiler does not inline it into the loops of the
/// others (170 instructions a call in the loop, not 117). The harnesses use `()` in a loop, `u8` as a task,
/// `u16` for a clone per request and `u32` out of line.
pub fn echo<E: Send + 'static>()
-> impl tower::Service<u64, Response = u64, Error = E, Future = std::future::Ready<Result<u64, E>>>
+ Clone
+ Send
+ 'static {
    tower::service_fn(|x: u64| -> std::future::Ready<Result<u64, E>> { std::future::ready(Ok(x)) })
}

/// Runs `measure` on a thread started while a crowd of threads held every owned
/// stripe slot of `s` (as many as cutout has: twice the cores, 16 to 64), after the crowd
/// exited: the "after a crowd" shape (a thread's slot history). Each
/// thread, the measured one too, makes one call first, which takes its slot.
pub fn after_a_crowd<S: Subject, R: Send>(s: &S, measure: impl FnOnce() -> R + Send) -> R {
    crowded(s, true, measure)
}

/// Runs `measure` on a thread started while a crowd of threads held every owned
/// stripe slot of `s`, and the crowd still holds them while it runs: a thread
/// beyond the owned stripes for its whole run (cutout's shared stripes).
pub fn beside_a_crowd<S: Subject, R: Send>(s: &S, measure: impl FnOnce() -> R + Send) -> R {
    crowded(s, false, measure)
}

/// [`after_a_crowd`] if `leave_first`, else [`beside_a_crowd`].
fn crowded<S: Subject, R: Send>(s: &S, leave_first: bool, measure: impl FnOnce() -> R + Send) -> R {
    let crowd = cutout::owned_stripes_per_breaker();
    let holding = Barrier::new(crowd + 1);
    let leave = Barrier::new(crowd + 1);
    let (started, begin) = (Barrier::new(2), Barrier::new(2));
    std::thread::scope(|scope| {
        let crowd: Vec<_> = (0..crowd)
            .map(|_| {
                scope.spawn(|| {
                    let _ = succeed!(s);
                    holding.wait();
                    leave.wait();
                })
            })
            .collect();
        holding.wait();
        let pool = scope.spawn(|| {
            let _ = succeed!(s); // behind the crowd
            started.wait();
            begin.wait();
            measure()
        });
        started.wait();
        if leave_first {
            leave.wait();
            // Joined: each has exited and released its slot.
            for thread in crowd {
                thread.join().unwrap();
            }
            begin.wait();
            pool.join().unwrap()
        } else {
            begin.wait();
            let measured = pool.join().unwrap();
            leave.wait();
            measured
        }
    })
}

/// Receives each implementation of a scenario, by concrete type.
pub trait Visit {
    fn visit<S: Subject>(&mut self, name: &str, subject: S);
}

// ---- references ------------------------------------------------------------------

/// Calling the closure directly: the baseline.
pub struct Direct;

impl Subject for Direct {
    #[inline]
    fn call(&self, f: impl FnOnce() -> Result<u64, u64>) -> bool {
        let _ = f();
        true
    }
}

/// A floor: an admission check and nothing else, in front of the direct call.
trait Floor: Sync {
    /// Whether the call may run (the state word says closed).
    fn admit(&self) -> bool;
}

impl<F: Floor> Subject for F {
    #[inline]
    fn call(&self, f: impl FnOnce() -> Result<u64, u64>) -> bool {
        if !self.admit() {
            return false;
        }
        let _ = f();
        true
    }
}

/// The cheapest possible admission: one load of a state word.
pub struct FloorLoad {
    state: AtomicU64,
}

impl FloorLoad {
    pub fn new(open: bool) -> Self {
        FloorLoad {
            state: AtomicU64::new(u64::from(open)),
        }
    }
}

impl Floor for FloorLoad {
    #[inline]
    fn admit(&self) -> bool {
        self.state.load(Ordering::Acquire) == 0
    }
}

/// The ideal closed path: load the state word, then one atomic increment of a
/// counter (one shared counter: under contention this is the cost of a hot line).
pub struct FloorLoadAdd {
    state: AtomicU64,
    count: crossbeam_utils::CachePadded<AtomicU64>,
}

impl FloorLoadAdd {
    pub fn new(open: bool) -> Self {
        FloorLoadAdd {
            state: AtomicU64::new(u64::from(open)),
            count: Default::default(),
        }
    }
}

impl Floor for FloorLoadAdd {
    #[inline]
    fn admit(&self) -> bool {
        let closed = self.state.load(Ordering::Acquire) == 0;
        // A rejection is counted too, as every breaker here counts it.
        self.count.fetch_add(1, Ordering::Relaxed);
        closed
    }
}

/// DESIGN.md's "ideal closed path": load the state word, then one atomic increment of
/// this thread's stripe of a counter. The stripe is found the way cutout finds its
/// own (a `const` thread-local read once per call, a number handed out on a
/// thread's first call); unlike cutout it counts with a locked `fetch_add` and counts
/// nothing else.
pub struct FloorStriped {
    state: AtomicU64,
    stripes: Box<[crossbeam_utils::CachePadded<AtomicU64>]>,
}

std::thread_local! {
    static FLOOR_STRIPE: std::cell::Cell<usize> = const { std::cell::Cell::new(usize::MAX) };
}

impl FloorStriped {
    pub fn new(open: bool) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        FloorStriped {
            state: AtomicU64::new(u64::from(open)),
            stripes: (0..2 * cores).map(|_| Default::default()).collect(),
        }
    }
}

impl Floor for FloorStriped {
    #[inline]
    fn admit(&self) -> bool {
        let closed = self.state.load(Ordering::Acquire) == 0;
        let mut i = FLOOR_STRIPE.with(std::cell::Cell::get);
        if i == usize::MAX {
            static NEXT: AtomicU64 = AtomicU64::new(0);
            i = NEXT.fetch_add(1, Ordering::Relaxed) as usize;
            FLOOR_STRIPE.with(|s| s.set(i));
        }
        self.stripes[i % self.stripes.len()].fetch_add(1, Ordering::Relaxed);
        closed
    }
}

/// The naive reference: a consecutive-failure breaker behind a `std::sync::Mutex`,
/// locked once to admit and once to record.
pub struct MutexBreaker {
    inner: Mutex<MutexState>,
    threshold: u32,
    cooldown: Duration,
}

struct MutexState {
    open_until: Option<Instant>,
    failures: u32,
}

impl MutexBreaker {
    pub fn new(threshold: u32, cooldown: Duration) -> Self {
        MutexBreaker {
            inner: Mutex::new(MutexState {
                open_until: None,
                failures: 0,
            }),
            threshold,
            cooldown,
        }
    }

    #[inline]
    fn call(&self, f: impl FnOnce() -> Result<u64, u64>) -> bool {
        {
            let mut s = self.inner.lock().unwrap();
            if let Some(until) = s.open_until {
                if Instant::now() < until {
                    return false;
                }
                s.open_until = None; // half-open, naively: admit everyone
            }
        }
        let r = f();
        let mut s = self.inner.lock().unwrap();
        match r {
            Ok(_) => s.failures = 0,
            Err(_) => {
                s.failures += 1;
                if s.failures >= self.threshold {
                    s.failures = 0;
                    s.open_until = Some(Instant::now() + self.cooldown);
                }
            }
        }
        true
    }
}

impl Subject for MutexBreaker {
    #[inline]
    fn call(&self, f: impl FnOnce() -> Result<u64, u64>) -> bool {
        MutexBreaker::call(self, f)
    }
}

// ---- cutout and the peers ----------------------------------------------------------

/// A cutout breaker with any clock.
pub struct Cutout<C: Clock = DefaultClock>(pub CircuitBreaker<C>);

impl<C: Clock> Subject for Cutout<C> {
    #[inline]
    fn call(&self, f: impl FnOnce() -> Result<u64, u64>) -> bool {
        !matches!(self.0.call(f), Err(Error::Rejected(_)))
    }
}

/// failsafe 1.3's `StateMachine` (a `parking_lot::Mutex` around the policy).
pub struct Failsafe<P>(pub failsafe::StateMachine<P, ()>);

impl<P: failsafe::FailurePolicy + Send> Subject for Failsafe<P> {
    #[inline]
    fn call(&self, f: impl FnOnce() -> Result<u64, u64>) -> bool {
        use failsafe::CircuitBreaker as _;
        !matches!(self.0.call(f), Err(failsafe::Error::Rejected))
    }
}

/// recloser 1.4 (an epoch-managed state pointer and a spin-locked ring buffer).
pub struct Recloser(pub recloser::Recloser);

impl Subject for Recloser {
    #[inline]
    fn call(&self, f: impl FnOnce() -> Result<u64, u64>) -> bool {
        !matches!(self.0.call(f), Err(recloser::Error::Rejected))
    }
}

// ---- constructors ----------------------------------------------------------------

/// cutout with the consecutive-failure policy.
pub fn cutout_consecutive(n: u32) -> Cutout {
    Cutout(
        CircuitBreaker::builder()
            .consecutive_failures(n)
            .open_duration(LONG)
            .build()
            .unwrap(),
    )
}

/// cutout with the consecutive-failure policy, a name and an `on_transition`
/// listener: with `--features metrics,tracing` it also carries both exports. A
/// success makes no event, so this must cost what `cutout_consecutive` costs.
pub fn cutout_observed(n: u32) -> Cutout {
    Cutout(
        CircuitBreaker::builder()
            .name("bench")
            .consecutive_failures(n)
            .open_duration(LONG)
            .on_transition(|t| {
                black_box(t);
            })
            .build()
            .unwrap(),
    )
}

/// cutout with the default rate window (10 s, 10 buckets, 50% of at least
/// `minimum_calls`).
pub fn cutout_window(minimum_calls: u32) -> Cutout {
    Cutout(
        CircuitBreaker::builder()
            .window(Duration::from_secs(10), 10)
            .failure_rate(0.5, minimum_calls)
            .open_duration(LONG)
            .build()
            .unwrap(),
    )
}

/// cutout with the rate window and the slow-call policy (two precise clock reads a
/// call).
pub fn cutout_window_slow(minimum_calls: u32) -> Cutout {
    Cutout(
        CircuitBreaker::builder()
            .window(Duration::from_secs(10), 10)
            .failure_rate(0.5, minimum_calls)
            .slow_calls(Duration::from_secs(1), 0.5)
            .open_duration(LONG)
            .build()
            .unwrap(),
    )
}

type FailsafeConsecutive =
    Failsafe<failsafe::failure_policy::ConsecutiveFailures<failsafe::backoff::Constant>>;

/// failsafe with its consecutive-failure policy and a constant backoff.
pub fn failsafe_consecutive(n: u32, cooldown: Duration) -> FailsafeConsecutive {
    let policy =
        failsafe::failure_policy::consecutive_failures(n, failsafe::backoff::constant(cooldown));
    Failsafe(failsafe::Config::new().failure_policy(policy).build())
}

/// failsafe's default configuration: a success-rate EMA over 30 s or 5
/// consecutive failures, equal-jittered backoff from 10 s.
pub fn failsafe_default() -> Failsafe<impl failsafe::FailurePolicy + Send> {
    Failsafe(failsafe::Config::new().build())
}

/// recloser's defaults (a 100-call ring, 50%), with `open_wait`.
pub fn recloser_default(open_wait: Duration) -> Recloser {
    Recloser(recloser::Recloser::custom().open_wait(open_wait).build())
}

/// Calls `fail` until `s` rejects, at most `limit` times. Panics if it never trips:
/// a benchmark of an open breaker must not measure a closed one.
pub fn trip<S: Subject>(name: &str, s: S, limit: u32) -> S {
    for _ in 0..limit {
        if !fail!(s) {
            return s;
        }
    }
    panic!("{name} did not trip after {limit} failures");
}

// ---- scenarios -------------------------------------------------------------------

/// Every implementation in the Closed state, for successful calls.
pub fn closed(v: &mut impl Visit) {
    v.visit("direct", Direct);
    v.visit("floor_load", FloorLoad::new(false));
    v.visit("floor_load_fetch_add", FloorLoadAdd::new(false));
    v.visit("floor_striped", FloorStriped::new(false));
    v.visit("cutout_consecutive", cutout_consecutive(5));
    v.visit("cutout_observed", cutout_observed(5));
    v.visit("cutout_window", cutout_window(20));
    v.visit("cutout_window_slow", cutout_window_slow(20));
    v.visit("failsafe_consecutive", failsafe_consecutive(5, LONG));
    v.visit("failsafe_default", failsafe_default());
    v.visit("recloser_default", recloser_default(LONG));
    v.visit("mutex", MutexBreaker::new(5, LONG));
}

/// The implementations that share one breaker across threads (`closed` without the
/// direct call and the bare load).
pub fn contended(v: &mut impl Visit) {
    v.visit("floor_load_fetch_add", FloorLoadAdd::new(false));
    v.visit("floor_striped", FloorStriped::new(false));
    v.visit("cutout_consecutive", cutout_consecutive(5));
    v.visit("cutout_window", cutout_window(20));
    v.visit("failsafe_consecutive", failsafe_consecutive(5, LONG));
    v.visit("failsafe_default", failsafe_default());
    v.visit("recloser_default", recloser_default(LONG));
    v.visit("mutex", MutexBreaker::new(5, LONG));
}

/// Every breaker tripped open with a cooldown of an hour. (failsafe's default
/// backoff starts at 10 s, shorter than a run, so failsafe is measured with its
/// consecutive policy and a constant hour.)
pub fn open(v: &mut impl Visit) {
    v.visit("floor_load", FloorLoad::new(true));
    v.visit("floor_load_fetch_add", FloorLoadAdd::new(true));
    v.visit("floor_striped", FloorStriped::new(true));
    let c = "cutout_consecutive";
    v.visit(c, trip(c, cutout_consecutive(5), 100));
    let c = "cutout_window";
    v.visit(c, trip(c, cutout_window(20), 100));
    let c = "cutout_window_slow";
    v.visit(c, trip(c, cutout_window_slow(20), 100));
    let c = "failsafe_consecutive";
    v.visit(c, trip(c, failsafe_consecutive(5, LONG), 100));
    let c = "recloser_default";
    v.visit(c, trip(c, recloser_default(LONG), 300));
    let c = "mutex";
    v.visit(c, trip(c, MutexBreaker::new(5, LONG), 100));
}

/// `cutout_window` (ten buckets, never tripping) over 100 ms instead of 10 s, and
/// past its first 90 ms: a whole window, as the default one is after its first nine
/// seconds and as a service's failures find it. (Each benchmark builds its breaker,
/// so `cutout_window` is measured young, in its first seconds, when its window
/// spans fewer buckets: see the implementation notes, "The owner's summary".)
pub fn cutout_window_whole() -> Cutout {
    let b = CircuitBreaker::builder()
        .window(Duration::from_millis(100), 10)
        .failure_rate(0.5, u32::MAX)
        .open_duration(LONG)
        .build()
        .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    Cutout(b)
}

/// A whole window in which every failure reads the window: ten buckets of 1 s on a
/// `ManualClock` held in the last, a failure in each and one success in the first, under a
/// failure rate of 1.0 over at least one call. No failure trips (one call in the
/// window succeeded), and the failure budget covers none (the rate leaves room for
/// one more failure, which its margin takes): each sums the window, as a failure
/// near the threshold does. (In `cutout_window` and `cutout_window_whole`, far below
/// the threshold, the budget covers nearly every failure.)
pub fn cutout_window_read() -> Cutout<ManualClock> {
    let clock = ManualClock::new();
    let b = CircuitBreaker::builder()
        .window(Duration::from_secs(10), 10)
        .failure_rate(1.0, 1)
        .open_duration(LONG)
        .clock(clock.clone())
        .build()
        .unwrap();
    let _ = b.call(|| Ok::<_, ()>(())); // first: a failure alone would trip
    for second in 0..10 {
        if second > 0 {
            clock.advance(Duration::from_secs(1));
        }
        let _ = b.call(|| Err::<(), _>(()));
    }
    let counts = b.metrics().window;
    assert_eq!((counts.calls, counts.failures), (11, 10), "a whole window");
    Cutout(b)
}

/// Every breaker set so that failures never trip it: each call records a failure
/// and evaluates its policy (cutout counts it in its window; the failure budget
/// lets it skip the read of the window in all rows but `cutout_window_read`).
pub fn failing(v: &mut impl Visit) {
    v.visit("direct", Direct);
    // The longest streak a breaker counts (2^31 - 1): more failures than a run makes.
    v.visit("cutout_consecutive", cutout_consecutive(u32::MAX / 2));
    // The window is summed on every failure; the minimum is never reached.
    v.visit("cutout_window", cutout_window(u32::MAX));
    v.visit("cutout_window_slow", cutout_window_slow(u32::MAX));
    v.visit("cutout_window_whole", cutout_window_whole());
    v.visit("cutout_window_read", cutout_window_read());
    v.visit("failsafe_consecutive", failsafe_consecutive(u32::MAX, LONG));
    // A required success rate of 0 is never missed: the EMA is updated, never trips.
    let policy = failsafe::failure_policy::success_rate_over_time_window(
        0.0,
        1,
        Duration::from_secs(30),
        failsafe::backoff::constant(LONG),
    );
    v.visit(
        "failsafe_rate",
        Failsafe(failsafe::Config::new().failure_policy(policy).build()),
    );
    // A rate can never exceed 1.0, so the ring is updated and never trips.
    v.visit(
        "recloser_default",
        Recloser(
            recloser::Recloser::custom()
                .error_rate(1.5)
                .open_wait(LONG)
                .build(),
        ),
    );
    v.visit("mutex", MutexBreaker::new(u32::MAX, LONG));
}

/// What [`run_one`] runs: a function of the subject, generic over its type.
pub trait Run {
    fn run<S: Subject>(&mut self, subject: &S);
}

/// Passes the implementation called `name` to a [`Run`].
struct Only<'a, R> {
    name: &'a str,
    found: bool,
    run: &'a mut R,
}

impl<R: Run> Visit for Only<'_, R> {
    fn visit<S: Subject>(&mut self, name: &str, subject: S) {
        if name == self.name {
            self.found = true;
            self.run.run(&subject);
        }
    }
}

/// Runs `run` on the implementation `name` of `scenario` ("closed", "open",
/// "failing"). Returns false if there is no such scenario or implementation.
pub fn run_one(scenario: &str, name: &str, run: &mut impl Run) -> bool {
    let mut only = Only {
        name,
        found: false,
        run,
    };
    match scenario {
        "closed" => closed(&mut only),
        "open" => open(&mut only),
        "failing" => failing(&mut only),
        _ => return false,
    }
    only.found
}

/// The names of a scenario's implementations.
pub fn names(scenario: &str) -> Vec<String> {
    struct Names(Vec<String>);
    impl Visit for Names {
        fn visit<S: Subject>(&mut self, name: &str, _: S) {
            self.0.push(name.to_string());
        }
    }
    let mut n = Names(Vec::new());
    match scenario {
        "closed" => closed(&mut n),
        "open" => open(&mut n),
        "failing" => failing(&mut n),
        "contended" => contended(&mut n),
        _ => {}
    }
    n.0
}

// ---- criterion glue --------------------------------------------------------------

/// What a single-threaded harness measures on each implementation.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Successful calls that must be admitted.
    Succeed,
    /// Failing calls that must be admitted (and never trip).
    Fail,
    /// Calls that must be rejected.
    Rejected,
    /// Calls that must be admitted, one in `n` failing (and never tripping): a
    /// dependency in partial trouble.
    FailOneIn(u32),
}

/// Benchmarks `op` on every implementation it visits, one criterion function each,
/// and checks before and after that the implementation is in the intended state.
pub struct Group<'a, 'c, M: Measurement> {
    pub group: &'a mut criterion::BenchmarkGroup<'c, M>,
    pub op: Op,
}

impl<M: Measurement> Visit for Group<'_, '_, M> {
    fn visit<S: Subject>(&mut self, name: &str, s: S) {
        let (op, group) = (self.op, &mut *self.group);
        let ready = |s: &S| match op {
            Op::Succeed | Op::FailOneIn(_) => succeed!(s),
            Op::Fail => fail!(s),
            Op::Rejected => !succeed!(s),
        };
        assert!(ready(&s), "{name} is not in the state this benchmark needs");
        // Each measured call written where it is measured (see `Subject`).
        match op {
            Op::Succeed | Op::Rejected => group.bench_function(name, |b| b.iter(|| succeed!(s))),
            Op::Fail => group.bench_function(name, |b| b.iter(|| fail!(s))),
            Op::FailOneIn(n) => group.bench_function(name, |b| {
                let mut i = 0;
                b.iter(|| {
                    i = if i + 1 == n { 0 } else { i + 1 };
                    if i == 0 { fail!(s) } else { succeed!(s) }
                })
            }),
        };
        assert!(ready(&s), "{name} changed state while it was measured");
    }
}

/// The calling thread's CPU time: what the single-threaded suites measure, so that
/// time the thread spends descheduled on a shared machine is not counted. Formatted
/// as a duration, like wall time.
pub struct CpuTime(criterion::measurement::WallTime);

impl CpuTime {
    /// The criterion configuration the single-threaded suites use.
    pub fn criterion() -> criterion::Criterion<CpuTime> {
        criterion::Criterion::default().with_measurement(CpuTime(criterion::measurement::WallTime))
    }
}

/// Nanoseconds of CPU time the calling thread has used.
#[cfg(unix)]
fn thread_cpu_nanos() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant the
    // platform defines.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Elsewhere, wall time since the first call.
#[cfg(not(unix))]
fn thread_cpu_nanos() -> u64 {
    static ORIGIN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    ORIGIN.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

impl Measurement for CpuTime {
    type Intermediate = u64;
    type Value = u64;
    fn start(&self) -> u64 {
        thread_cpu_nanos()
    }
    fn end(&self, start: u64) -> u64 {
        thread_cpu_nanos() - start
    }
    fn add(&self, a: &u64, b: &u64) -> u64 {
        a + b
    }
    fn zero(&self) -> u64 {
        0
    }
    fn to_f64(&self, v: &u64) -> f64 {
        *v as f64
    }
    fn formatter(&self) -> &dyn criterion::measurement::ValueFormatter {
        self.0.formatter()
    }
}

/// `threads` threads, each with its own state from `make` (a service, or `()`),
/// one warm-up call and then, after a common barrier, `iters` calls each through
/// `once`: wall time from the first start to the last finish.
pub fn across_threads<S: Send>(
    threads: usize,
    iters: u64,
    make: impl Fn() -> S,
    once: impl Fn(&mut S) -> bool + Sync,
) -> Duration {
    let barrier = Barrier::new(threads);
    let spans: Vec<(Instant, Instant)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let mut service = make();
                let (barrier, once) = (&barrier, &once);
                scope.spawn(move || {
                    let _ = once(&mut service);
                    barrier.wait();
                    let start = Instant::now();
                    for _ in 0..iters {
                        black_box(once(&mut service));
                    }
                    (start, Instant::now())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let first = spans.iter().map(|s| s.0).min().unwrap();
    let last = spans.iter().map(|s| s.1).max().unwrap();
    last - first
}
