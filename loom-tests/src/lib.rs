//! Loom models of cutout's concurrency claims; see README.md.
//!
//! Everything here exists only under `--cfg cutout_loom`; without it the crate is
//! empty, and so are its tests.

#[cfg(cutout_loom)]
mod support {
    use cutout::{Builder, CircuitBreaker, ManualClock, Reason, State, Transition};
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

    /// Runs a thread for each number in `each`, which fails that many calls to
    /// `breaker` and then runs `after` on it, and joins them all.
    pub fn fail_in_threads(
        breaker: &Arc<CircuitBreaker<ManualClock>>,
        each: impl IntoIterator<Item = u32>,
        after: fn(&CircuitBreaker<ManualClock>),
    ) {
        let threads: Vec<_> = each
            .into_iter()
            .map(|n| {
                let b = breaker.clone();
                loom::thread::spawn(move || {
                    for _ in 0..n {
                        let _ = b.call(|| Err::<(), _>("down"));
                    }
                    after(&b);
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }

    /// A [`fail_in_threads`] check: the thread sees the breaker Closed (the other
    /// failures not in yet) or Open.
    pub fn closed_or_open(breaker: &CircuitBreaker<ManualClock>) {
        let s = breaker.state();
        assert!(s == State::Closed || s == State::Open, "{s:?}");
    }

    /// Asserts that `breaker`, new when the model began, tripped exactly once, for
    /// `reason`: Open in generation 1 with the whole cooldown ahead, one transition
    /// counted, `failures` failures counted, and one event delivered (returned).
    pub fn assert_tripped_once(
        breaker: &CircuitBreaker<ManualClock>,
        events: &Events,
        reason: Reason,
        failures: u64,
    ) -> Transition {
        let m = breaker.metrics();
        assert_eq!(m.state, State::Open, "the crossing failure tripped: {m:?}");
        assert_eq!(m.generation, 1, "one transition, one generation step");
        assert_eq!(m.transitions(reason), 1);
        assert_eq!(m.total_transitions(), 1);
        assert_eq!(m.retry_after, Some(OPEN), "opened-at is the trip's time");
        assert_eq!(m.lifetime.failures, failures);
        let ev = events.get();
        assert_eq!(ev.len(), 1, "{ev:?}");
        assert_eq!(
            (ev[0].from, ev[0].to, ev[0].reason, ev[0].generation),
            (State::Closed, State::Open, reason, 1)
        );
        ev[0]
    }

    /// Trips `breaker` (built with `consecutive_failures(1)`) from the main thread
    /// and lets its cooldown pass, so the next call starts a half-open round.
    pub fn trip_and_cool(breaker: &CircuitBreaker<ManualClock>, clock: &ManualClock) {
        let _ = breaker.call(|| Err::<(), _>("down"));
        assert_eq!(breaker.state(), State::Open);
        clock.advance(OPEN);
    }
}

#[cfg(cutout_loom)]
pub use support::*;
