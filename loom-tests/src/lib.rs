//! Loom models of cutout's concurrency claims; see README.md.
//!
//! Everything here exists only under `--cfg cutout_loom`; without it the crate is
//! empty, and so are its tests.

#[cfg(cutout_loom)]
mod support {
    use cutout::{Builder, CircuitBreaker, ManualClock, Transition};
    use loom::sync::Mutex;
    use std::sync::Arc;
    use std::time::Duration;

    /// Runs `f` under loom and prints how many executions it explored. `LOOM_MAX_PREEMPTIONS` is honoured and defaults to 2
    /// (an unbounded search of these models would not finish); the branch limit is
    /// raised because reading metrics touches every stripe.
    pub fn model<F>(f: F)
    where
        F: Fn() + Sync + Send + 'static,
    {
        let mut builder = loom::model::Builder::new();
        if builder.preemption_bound.is_none() {
            builder.preemption_bound = Some(2);
        }
        builder.max_branches = builder.max_branches.max(20_000);
        let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = runs.clone();
        builder.check(move || {
            count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            f();
        });
        eprintln!(
            "loom: {} executions",
            runs.load(std::sync::atomic::Ordering::Relaxed)
        );
    }

    /// Every transition a breaker reported, in delivery order.
    #[derive(Clone, Default, Debug)]
    pub struct Events(loom::sync::Arc<Mutex<Vec<Transition>>>);

    impl Events {
        /// A new, empty log.
        pub fn new() -> Events {
            Events(loom::sync::Arc::new(Mutex::new(Vec::new())))
        }

        /// A listener for [`Builder::on_transition`] that appends to this log.
        pub fn listener(&self) -> impl Fn(&Transition) + Send + Sync + 'static {
            let log = self.0.clone();
            move |t: &Transition| log.lock().unwrap().push(*t)
        }

        /// What was delivered so far.
        pub fn get(&self) -> Vec<Transition> {
            self.0.lock().unwrap().clone()
        }
    }

    /// The cooldown every model uses.
    pub const OPEN: Duration = Duration::from_secs(1);

    /// A builder on `clock` with [`OPEN`] as the cooldown, reporting to `events`.
    pub fn builder(clock: &ManualClock, events: &Events) -> Builder<ManualClock> {
        CircuitBreaker::builder()
            .open_duration(OPEN)
            .clock(clock.clone())
            .on_transition(events.listener())
    }

    /// A model's breaker, shared: a new clock and event log, and [`builder`] on them
    /// with `configure` applied.
    pub fn shared_breaker(
        configure: impl FnOnce(Builder<ManualClock>) -> Builder<ManualClock>,
    ) -> (ManualClock, Events, Arc<CircuitBreaker<ManualClock>>) {
        let clock = ManualClock::new();
        let events = Events::new();
        let breaker = configure(builder(&clock, &events)).build().unwrap();
        (clock, events, Arc::new(breaker))
    }

    /// A model's breaker that trips on `failure_rate(1.0, minimum)` over a 10 s
    /// window of one bucket, with the clock moved to 5 s (inside that bucket).
    pub fn rate_breaker(minimum: u32) -> (ManualClock, Events, Arc<CircuitBreaker<ManualClock>>) {
        let (clock, events, breaker) = shared_breaker(|b| {
            b.window(Duration::from_secs(10), 1)
                .failure_rate(1.0, minimum)
        });
        clock.advance(Duration::from_secs(5));
        (clock, events, breaker)
    }

    /// Trips `breaker` (built with `consecutive_failures(1)`) from the main thread
    /// and lets its cooldown pass, so the next call starts a half-open round.
    pub fn trip_and_cool(breaker: &CircuitBreaker<ManualClock>, clock: &ManualClock) {
        let _ = breaker.call(|| Err::<(), _>("down"));
        assert_eq!(breaker.state(), cutout::State::Open);
        clock.advance(OPEN);
    }
}

#[cfg(cutout_loom)]
pub use support::*;
