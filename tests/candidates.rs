//! What-if candidates: shadow breakers offered every outcome the live breaker
//! records, on its clock. A call a candidate would have rejected counts as its
//! would-be rejection and for nothing else; a call the live breaker rejected is
//! unseen by it.

use cutout::{
    Builder, CandidateReport, CircuitBreaker, Dropped, ManualClock, Reason, State, Transition,
    WindowCounts,
};
use std::sync::{Arc, Mutex};
use std::time::Duration;

type Live = CircuitBreaker<ManualClock>;

fn fail(b: &Live) {
    let _ = b.call(|| Err::<(), _>("down"));
}

fn succeed(b: &Live) {
    let _ = b.call(|| Ok::<_, ()>(()));
}

fn only(b: &Live) -> CandidateReport {
    let reports = b.candidates();
    assert_eq!(reports.len(), 1, "{reports:?}");
    reports.into_iter().next().unwrap()
}

/// The breaker `live` on a manual clock, with one candidate, `name`, built from
/// `candidate`.
fn with_candidate(live: Builder, name: &'static str, candidate: Builder) -> (Live, ManualClock) {
    let clock = ManualClock::new();
    let breaker = live
        .clock(clock.clone())
        .candidate(name, candidate)
        .build()
        .unwrap();
    (breaker, clock)
}

/// A live breaker that trips on `live` consecutive failures with one candidate,
/// "tight", that trips on `tight`; both cool down for 5 s, one probe.
fn pair(live: u32, tight: u32) -> (Live, ManualClock) {
    let five = Duration::from_secs(5);
    with_candidate(
        CircuitBreaker::builder()
            .consecutive_failures(live)
            .open_duration(five),
        "tight",
        CircuitBreaker::builder()
            .consecutive_failures(tight)
            .open_duration(five),
    )
}

/// A live breaker that trips on `n` consecutive failures.
fn live(n: u32) -> Builder {
    CircuitBreaker::builder().consecutive_failures(n)
}

#[test]
fn a_call_the_candidate_would_have_rejected_counts_only_as_its_would_be_rejection() {
    let (live, clock) = pair(10, 2);
    fail(&live);
    fail(&live);
    assert_eq!(only(&live).state, State::Open);
    clock.advance(Duration::from_secs(1));
    // Two more failures and a success: all run (the live breaker is Closed),
    // none counts for the candidate, which would have turned them away.
    fail(&live);
    fail(&live);
    succeed(&live);
    let r = only(&live);
    assert_eq!(r.state, State::Open);
    assert_eq!(
        (r.would_reject, r.failures_spared, r.successes_turned_away),
        (3, 2, 1)
    );
    assert_eq!((r.opened, r.unseen), (1, 0));
    assert_eq!(r.opened_at, [Duration::ZERO]);
    assert_eq!(r.time_open, Duration::from_secs(1));
    // The live breaker decided alone: four failures then a success, Closed.
    let m = live.metrics();
    assert_eq!(m.state, State::Closed);
    assert_eq!(
        (
            m.lifetime.failures,
            m.lifetime.successes,
            m.lifetime.rejected
        ),
        (4, 1, 0)
    );
    assert_eq!(m.lifetime.would_reject, 0, "the live breaker is no shadow");
}

#[test]
fn a_call_the_live_breaker_rejected_is_unseen_by_the_candidate() {
    // The live breaker trips first: the candidate is the looser one.
    let (live, clock) = pair(1, 3);
    fail(&live);
    assert_eq!(live.state(), State::Open);
    for _ in 0..4 {
        assert!(live.call(|| Ok::<_, ()>(())).is_err(), "rejected");
    }
    let r = only(&live);
    assert_eq!((r.unseen, r.would_reject, r.opened), (4, 0, 0));
    assert_eq!(
        r.state,
        State::Closed,
        "one failure seen, the rejections unseen"
    );
    // Its own streak is the one failure it saw: two more trip it.
    clock.advance(Duration::from_secs(5));
    fail(&live); // the live probe fails: live reopens, the candidate counts 2
    assert_eq!(only(&live).state, State::Closed);
    clock.advance(Duration::from_secs(10));
    fail(&live);
    assert_eq!(only(&live).state, State::Open);
}

#[test]
fn a_candidates_half_open_round_is_fed_by_live_outcomes() {
    let probing = CircuitBreaker::builder()
        .consecutive_failures(1)
        .open_duration(Duration::from_secs(2))
        .half_open_probes(2);
    let (live, clock) = with_candidate(live(100), "probing", probing);
    fail(&live);
    assert_eq!(only(&live).state, State::Open);
    clock.advance(Duration::from_secs(2));
    // The cooldown is over: the next live outcome is the candidate's first probe.
    succeed(&live);
    assert_eq!(only(&live).state, State::HalfOpen);
    // A live call while both probe slots are taken? Each offer takes and gives
    // back its slot at once, so the second success closes the round.
    succeed(&live);
    let r = only(&live);
    assert_eq!(r.state, State::Closed);
    assert_eq!((r.opened, r.would_reject), (1, 0));
    assert_eq!(
        r.time_open,
        Duration::from_secs(2),
        "the half-open round is not Open"
    );

    // Again, and this time the round fails: the candidate reopens.
    fail(&live);
    clock.advance(Duration::from_secs(2));
    succeed(&live);
    fail(&live);
    let r = only(&live);
    assert_eq!(r.state, State::Open);
    assert_eq!(r.opened, 3);
    assert_eq!(
        r.opened_at,
        [
            Duration::ZERO,
            Duration::from_secs(2),
            Duration::from_secs(4)
        ]
    );
    clock.advance(Duration::from_secs(1));
    // Open 2 s, 2 s, and 1 s of a reopening's cooldown (4 s at level 1) so far.
    assert_eq!(only(&live).time_open, Duration::from_secs(5));
    assert_eq!(live.state(), State::Closed);
}

#[test]
fn candidate_transitions_reach_their_own_listener_marked_shadow_and_not_the_live_one() {
    let live_seen: Arc<Mutex<Vec<Transition>>> = Arc::default();
    let candidate_seen: Arc<Mutex<Vec<Transition>>> = Arc::default();
    let (l, c) = (live_seen.clone(), candidate_seen.clone());
    let clock = ManualClock::new();
    let live = CircuitBreaker::builder()
        .consecutive_failures(3)
        .clock(clock.clone())
        .on_transition(move |t| l.lock().unwrap().push(*t))
        .candidate(
            "eager",
            CircuitBreaker::builder()
                .consecutive_failures(1)
                .on_transition(move |t| c.lock().unwrap().push(*t)),
        )
        .build()
        .unwrap();
    fail(&live);
    assert!(live_seen.lock().unwrap().is_empty());
    let seen = candidate_seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!((seen[0].from, seen[0].to), (State::Closed, State::Open));
    assert_eq!(seen[0].reason, Reason::ConsecutiveFailures);
    assert!(seen[0].shadow);
    fail(&live);
    fail(&live);
    let live_seen = live_seen.lock().unwrap();
    assert_eq!(live_seen.len(), 1);
    assert!(!live_seen[0].shadow, "the live breaker's own transition");
    assert_eq!(candidate_seen.lock().unwrap().len(), 1);
}

/// A candidate's listener that panics does so once the live breaker has
/// recorded the outcome: the live breaker's count and trip are never lost to it,
/// for a recorded failure and for a permit dropped as one.
#[test]
fn a_candidates_panicking_listener_changes_nothing_the_live_breaker_keeps() {
    use std::panic::{AssertUnwindSafe, catch_unwind};
    let panicking = || {
        CircuitBreaker::builder()
            .consecutive_failures(1)
            .on_drop(Dropped::Failure)
            .on_transition(|_| panic!("a candidate's listener (this test's, on purpose)"))
    };
    let (b, _) = with_candidate(live(1).on_drop(Dropped::Failure), "panicky", panicking());
    assert!(catch_unwind(AssertUnwindSafe(|| fail(&b))).is_err());
    let l = b.metrics().lifetime;
    assert_eq!((l.admitted, l.failures, b.state()), (1, 1, State::Open));

    let (b, _) = with_candidate(live(1).on_drop(Dropped::Failure), "panicky", panicking());
    let permit = b.try_acquire().unwrap();
    assert!(catch_unwind(AssertUnwindSafe(|| drop(permit))).is_err());
    let l = b.metrics().lifetime;
    assert_eq!((l.admitted, l.dropped, l.failures), (1, 1, 1));
    assert_eq!(b.state(), State::Open);
}

/// The live breaker's own listener panicking too, on the same call: the
/// candidate's panic, held, is dropped as the live one unwinds (two panics at
/// once would abort), and the live breaker has counted and tripped.
#[test]
fn a_candidates_panic_held_while_the_live_listener_panics_is_dropped() {
    use std::panic::{AssertUnwindSafe, catch_unwind};
    let (b, _) = with_candidate(
        live(1).on_transition(|_| panic!("the live listener (this test's, on purpose)")),
        "panicky",
        live(1).on_transition(|_| panic!("a candidate's listener (this test's, on purpose)")),
    );
    let caught = catch_unwind(AssertUnwindSafe(|| fail(&b))).unwrap_err();
    assert_eq!(
        caught.downcast_ref::<&str>(),
        Some(&"the live listener (this test's, on purpose)")
    );
    let l = b.metrics().lifetime;
    assert_eq!((l.admitted, l.failures, b.state()), (1, 1, State::Open));
    assert_eq!(b.candidates()[0].state, State::Open);
}

/// A candidate's listener panicking on a closed success the live breaker
/// records on its lean path (the candidate half-opens on it): every other
/// candidate is offered that success all the same, and the panic reaches the
/// caller after.
#[test]
fn a_candidates_panic_on_a_lean_success_skips_no_other_candidate() {
    use std::panic::{AssertUnwindSafe, catch_unwind};
    let clock = ManualClock::new();
    let tight = || live(1).open_duration(Duration::from_secs(1));
    let b = live(10)
        .clock(clock.clone())
        .candidate(
            "panicky",
            tight().on_transition(|t| {
                if t.to == State::HalfOpen {
                    panic!("a candidate's listener (this test's, on purpose)")
                }
            }),
        )
        .candidate("plain", tight())
        .build()
        .unwrap();
    fail(&b); // both candidates open
    succeed(&b); // clears the live streak: the next success is a lean one
    clock.advance(Duration::from_secs(1));
    assert!(catch_unwind(AssertUnwindSafe(|| succeed(&b))).is_err());
    assert_eq!(b.metrics().lifetime.successes, 2);
    let plain = &b.candidates()[1];
    assert_eq!(plain.state, State::Closed, "{plain:?}");
}

#[test]
fn reports_come_one_per_candidate_in_order() {
    let clock = ManualClock::new();
    let live = CircuitBreaker::builder()
        .clock(clock.clone())
        .candidate("a", CircuitBreaker::builder().consecutive_failures(1))
        .candidate("b", CircuitBreaker::builder().consecutive_failures(2))
        .candidate("c", CircuitBreaker::builder().consecutive_failures(3))
        .build()
        .unwrap();
    fail(&live);
    fail(&live);
    let reports = live.candidates();
    let names: Vec<_> = reports.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["a", "b", "c"]);
    let states: Vec<_> = reports.iter().map(|r| r.state).collect();
    assert_eq!(states, [State::Open, State::Open, State::Closed]);
    assert_eq!(reports[0].would_reject, 1);
    assert!(
        CircuitBreaker::builder()
            .build()
            .unwrap()
            .candidates()
            .is_empty()
    );
}

/// Reports and the exports' labels tell candidates apart by name: an empty
/// name, or one given twice, is a `ConfigError` naming `candidate`.
#[test]
fn a_candidate_without_a_name_or_with_anothers_is_refused() {
    for names in [["a", "a"], ["a", ""]] {
        let mut b = CircuitBreaker::builder().clock(ManualClock::new());
        for name in names {
            b = b.candidate(name, CircuitBreaker::builder());
        }
        let e = b.build().map(|_| ()).unwrap_err();
        assert_eq!(e.field(), "candidate", "{names:?}: {e}");
    }
}

/// Time open is the candidate's cooldowns: an opening whose deadline passed with
/// no live call to half-open it stops counting at the deadline (the candidate
/// would have admitted the next call), as the current one does.
#[test]
fn time_open_is_its_cooldowns_not_the_idle_time_after_them() {
    let once = CircuitBreaker::builder()
        .consecutive_failures(1)
        .open_duration(Duration::from_secs(1));
    let (live, clock) = with_candidate(live(1000), "once", once);
    fail(&live);
    clock.advance(Duration::from_millis(500));
    assert_eq!(only(&live).time_open, Duration::from_millis(500));
    clock.advance(Duration::from_secs(10)); // no live call comes
    let idle = only(&live);
    assert_eq!(
        (idle.state, idle.time_open),
        (State::Open, Duration::from_secs(1))
    );
    let _ = live.call(|| Ok::<_, ()>(())); // half-opens it: the probe closes it
    let r = only(&live);
    assert_eq!(
        (r.state, r.time_open),
        (State::Closed, Duration::from_secs(1))
    );
}

#[test]
fn opened_at_keeps_the_most_recent_openings() {
    let flappy = CircuitBreaker::builder()
        .consecutive_failures(1)
        .open_duration(Duration::from_secs(1))
        .backoff_multiplier(1.0);
    let (live, clock) = with_candidate(live(1000), "flappy", flappy);
    let kept = CandidateReport::OPENED_AT_KEPT as u64;
    for i in 0..kept + 4 {
        // Each second: the cooldown is over, a failing probe reopens it.
        fail(&live);
        assert_eq!(only(&live).opened, i + 1);
        clock.advance(Duration::from_secs(1));
    }
    let r = only(&live);
    let want: Vec<_> = (4..kept + 4).map(Duration::from_secs).collect();
    assert_eq!(r.opened_at, want);
    assert_eq!(r.time_open, Duration::from_secs(kept + 4));
}

/// A long life: a candidate that reopens every hour for ten simulated years
/// (87,600 openings) keeps exact books: its count, its time open, its most
/// recent openings.
#[test]
fn a_candidates_books_stay_exact_through_ten_years_of_hourly_openings() {
    let hour = Duration::from_secs(3600);
    let hourly = CircuitBreaker::builder()
        .consecutive_failures(1)
        .open_duration(hour)
        .backoff_multiplier(1.0);
    let (live, clock) = with_candidate(live(1_000_000), "hourly", hourly);
    fail(&live); // the first opening, at 0
    let hours = 10 * 365 * 24;
    for _ in 0..hours {
        clock.advance(hour);
        fail(&live); // the cooldown is over: a failing probe reopens it
    }
    let r = only(&live);
    assert_eq!((r.state, r.opened), (State::Open, hours + 1));
    // Every hour Open but the one just begun; the half-open rounds took no time.
    assert_eq!(r.time_open, hour * hours as u32);
    let kept = CandidateReport::OPENED_AT_KEPT as u64;
    let want: Vec<_> = (hours + 1 - kept..=hours)
        .map(|h| hour * h as u32)
        .collect();
    assert_eq!(r.opened_at, want);
    assert_eq!(live.state(), State::Closed);
}

#[test]
fn permits_and_drops_are_offered_too() {
    let (live, _clock) = pair(10, 1);
    live.try_acquire().unwrap().failure();
    assert_eq!(only(&live).state, State::Open);
    // A dropped permit: the candidate would have rejected it, and tallies
    // nothing of it but the rejection.
    drop(live.try_acquire().unwrap());
    live.try_acquire().unwrap().success();
    let r = only(&live);
    assert_eq!(
        (r.would_reject, r.failures_spared, r.successes_turned_away),
        (2, 0, 1)
    );
}

/// A dropped permit the candidate would have rejected is a failure spared when
/// its own `on_drop` counts such a drop as a failure (here after 1 s).
#[test]
fn a_would_be_rejected_drop_is_a_failure_spared_by_the_candidates_drop_rule() {
    let after = Dropped::FailureAfter(Duration::from_secs(1));
    let tight = live(1)
        .open_duration(Duration::from_secs(10))
        .on_drop(after);
    let (live, clock) = with_candidate(live(10), "tight", tight);
    fail(&live);
    drop(live.try_acquire().unwrap()); // given up at once: not a failure
    let permit = live.try_acquire().unwrap();
    clock.advance(Duration::from_millis(1500));
    drop(permit);
    let r = only(&live);
    assert_eq!((r.would_reject, r.failures_spared), (2, 1));
}

#[test]
fn a_candidate_that_cannot_be_built_is_a_config_error_naming_candidate() {
    let clock = ManualClock::new();
    let bad = CircuitBreaker::builder()
        .clock(clock.clone())
        .candidate("zero", CircuitBreaker::builder().consecutive_failures(0))
        .build()
        .unwrap_err();
    assert_eq!(bad.field(), "candidate");
    assert!(
        bad.reason().contains("zero") && bad.reason().contains("consecutive_failures"),
        "{bad}"
    );

    let nested = CircuitBreaker::builder()
        .clock(clock.clone())
        .candidate(
            "nested",
            CircuitBreaker::builder().candidate("inner", CircuitBreaker::builder()),
        )
        .build()
        .unwrap_err();
    assert_eq!(nested.field(), "candidate");

    // The clock after the candidates: the candidates would have none.
    let late = CircuitBreaker::builder()
        .candidate("late", CircuitBreaker::builder())
        .clock(clock)
        .build()
        .unwrap_err();
    assert_eq!(late.field(), "candidate");
    assert!(late.reason().contains("clock"), "{late}");
}

#[cfg(feature = "registry")]
#[test]
fn a_registry_refuses_candidates_by_name() {
    let template = CircuitBreaker::builder()
        .candidate("tight", CircuitBreaker::builder().consecutive_failures(1));
    let err = cutout::Registry::<String>::builder(template)
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "candidate");
}

#[test]
fn a_candidate_of_a_shadow_breaker_sees_every_call() {
    let clock = ManualClock::new();
    let live = CircuitBreaker::builder()
        .consecutive_failures(1)
        .shadow()
        .clock(clock.clone())
        .candidate("two", CircuitBreaker::builder().consecutive_failures(2))
        .build()
        .unwrap();
    fail(&live);
    fail(&live); // the live shadow would have rejected it: it ran all the same
    assert_eq!(live.metrics().lifetime.would_reject, 1);
    let r = only(&live);
    assert_eq!((r.state, r.unseen), (State::Open, 0));
}

/// A 1 ms clock whose cheap reading is floored to the millisecond, as the
/// default clock's lags, and whose precise reading is exact.
#[derive(Clone)]
struct Floored(ManualClock);

impl cutout::Clock for Floored {
    fn now(&self) -> u64 {
        self.0.now() / 1_000_000 * 1_000_000
    }
    fn precise(&self) -> u64 {
        self.0.now()
    }
    fn resolution(&self) -> Duration {
        Duration::from_millis(1)
    }
}

/// A candidate timing calls precisely (a 5 ms slow-call threshold on a 1 ms
/// clock) beside a live breaker that times nothing: each call is timed from a
/// precise admission, as a breaker of the candidate's settings times it (from
/// the live breaker's cheap reading, a 4.5 ms call read as up to 5.5 ms).
#[test]
fn a_candidate_timing_precisely_is_timed_from_a_precise_admission() {
    let precise = || {
        CircuitBreaker::builder()
            .window(Duration::from_secs(10), 10)
            .slow_calls(Duration::from_millis(5), 1.0)
            .minimum_calls(2)
    };
    let clock = ManualClock::new();
    clock.advance(Duration::from_micros(900));
    let b = live(5)
        .clock(Floored(clock.clone()))
        .candidate("precise", precise())
        .build()
        .unwrap();
    let alone = precise().clock(Floored(clock.clone())).build().unwrap();
    for _ in 0..2 {
        let (permit, own) = (b.try_acquire().unwrap(), alone.try_acquire().unwrap());
        clock.advance(Duration::from_micros(4_500));
        permit.success();
        own.success();
        clock.advance(Duration::from_micros(500));
    }
    assert_eq!(
        (alone.metrics().lifetime.slow, alone.state()),
        (0, State::Closed)
    );
    let r = &b.candidates()[0];
    assert_eq!((r.state, r.opened), (State::Closed, 0), "{r:?}");
}

/// A live breaker that times its own calls with the cheap reading (a 100.5 ms
/// threshold on a 1 ms clock) decides as it does alone beside a candidate that
/// would time them precisely: the candidate's calls are timed by the live
/// breaker's readings (a precise admission read against the live breaker's
/// cheap end made a 101 ms call, by the live breaker's own readings, 100.1 ms).
#[test]
fn a_precise_candidate_leaves_a_live_breaker_timing_its_calls_as_alone() {
    let timed = |threshold| {
        CircuitBreaker::builder()
            .window(Duration::from_secs(10), 10)
            .slow_calls(threshold, 1.0)
            .minimum_calls(1)
    };
    let clock = ManualClock::new();
    clock.advance(Duration::from_micros(900));
    let live = || timed(Duration::from_micros(100_500)).clock(Floored(clock.clone()));
    let alone = live().build().unwrap();
    let watched = live()
        .candidate("precise", timed(Duration::from_millis(5)))
        .build()
        .unwrap();
    let (a, w) = (alone.try_acquire().unwrap(), watched.try_acquire().unwrap());
    clock.advance(Duration::from_micros(100_100));
    a.success();
    w.success();
    let seen = |b: &CircuitBreaker<Floored>| (b.metrics().lifetime.slow, b.state());
    assert_eq!(seen(&alone), (1, State::Open));
    assert_eq!(seen(&watched), seen(&alone));
    // The candidate measured the call as the live breaker did: slow.
    assert_eq!(watched.candidates()[0].state, State::Open);
}

/// A candidate that trips when every call of at least two took 100 ms or more.
fn impatient() -> Builder {
    CircuitBreaker::builder()
        .window(Duration::from_secs(10), 10)
        .slow_calls(Duration::from_millis(100), 1.0)
        .minimum_calls(2)
}

/// Through a permit and through `call` (whose lean path offers some
/// successes inline), beside a live breaker with a window and without.
#[test]
fn a_slow_live_call_is_slow_for_a_candidate_timed_from_the_live_admission() {
    for (live_builder, through_call) in [(live(5), false), (live(5), true), (window(), true)] {
        let (live, clock) = with_candidate(live_builder, "impatient", impatient());
        for _ in 0..2 {
            let took_150ms = || clock.advance(Duration::from_millis(150));
            match through_call {
                true => live
                    .call(|| {
                        took_150ms();
                        Ok::<_, ()>(())
                    })
                    .unwrap(),
                false => {
                    let permit = live.try_acquire().unwrap();
                    took_150ms();
                    permit.success();
                }
            }
        }
        assert_eq!(
            live.metrics().lifetime.slow,
            0,
            "the live breaker has no slow-call policy"
        );
        let r = only(&live);
        assert_eq!((r.state, r.opened), (State::Open, 1), "{through_call}");
        assert_eq!(live.state(), State::Closed);
    }
}

/// The converse, long after the build: a fast live call is not slow for the
/// candidate (a live breaker that does not time its calls times them for it).
#[test]
fn a_fast_live_call_is_not_slow_for_a_candidate_long_after_the_build() {
    let (live, clock) = with_candidate(live(5), "impatient", impatient());
    clock.advance(Duration::from_secs(3600));
    for _ in 0..2 {
        let permit = live.try_acquire().unwrap();
        clock.advance(Duration::from_millis(10));
        permit.success();
    }
    let r = only(&live);
    assert_eq!((r.state, r.opened), (State::Closed, 0), "{r:?}");
}

/// A 10 s window that trips at half its calls failed, from 4 calls.
fn window() -> Builder {
    CircuitBreaker::builder()
        .window(Duration::from_secs(10), 10)
        .failure_rate(0.5, 4)
}

/// A live call admitted before a reset (a new Closed phase) ends stale, for the
/// live breaker with candidates as for any: counted nowhere in the new window.
#[test]
fn a_success_admitted_before_a_reset_is_stale_beside_candidates() {
    let (live, _clock) = with_candidate(window(), "same", window());
    let permit = live.try_acquire().unwrap();
    live.reset();
    let _ = live.call(|| Ok::<_, ()>(())); // the new phase's first call
    permit.success();
    let m = live.metrics();
    assert_eq!((m.lifetime.stale, m.window.calls), (1, 1), "{m:?}");
}

/// A live breaker with a window counts its own successes once each, with
/// candidates as without (they take it off the lean path).
#[test]
fn the_live_window_counts_each_success_once_beside_candidates() {
    let (live, _clock) = with_candidate(window(), "same", window());
    for _ in 0..3 {
        let _ = live.call(|| Ok::<_, ()>(()));
    }
    let _ = live.call(|| Err::<(), _>("down"));
    let m = live.metrics();
    assert_eq!(m.window, WindowCounts::new(4, 1, 0), "{m:?}");
    assert_eq!(only(&live).state, State::Closed);
}

/// A manual clock whose readings may lag by 1 ms: a slow-call threshold under
/// 100 ms is timed by precise readings, off the lean path.
#[derive(Clone)]
struct Coarse(ManualClock);

impl cutout::Clock for Coarse {
    fn now(&self) -> u64 {
        self.0.now()
    }
    fn resolution(&self) -> Duration {
        Duration::from_millis(1)
    }
}

#[test]
fn a_live_breaker_timing_calls_precisely_offers_each_success_once() {
    let clock = ManualClock::new();
    let live = CircuitBreaker::builder()
        .window(Duration::from_secs(10), 10)
        .slow_calls(Duration::from_millis(10), 1.0)
        .clock(Coarse(clock.clone()))
        .candidate(
            "strict",
            // One success and two failures trip it (2/3 >= 0.6); the success
            // offered twice would not (2/4).
            CircuitBreaker::builder()
                .window(Duration::from_secs(10), 10)
                .failure_rate(0.6, 3),
        )
        .build()
        .unwrap();
    let _ = live.call(|| Ok::<_, ()>(()));
    for _ in 0..2 {
        let _ = live.call(|| Err::<(), _>("down"));
    }
    let [strict] = &live.candidates()[..] else {
        panic!("one candidate")
    };
    assert_eq!(
        (strict.state, strict.opened),
        (State::Open, 1),
        "{strict:?}"
    );
}

mod model {
    //! The model: each candidate's report against a reference, a plain breaker
    //! with the candidate's settings on a clock of its own stepped alike, given
    //! only the calls the candidate would have admitted, at the time the live
    //! breaker records them, with the same outcomes.

    use super::*;
    use cutout::Outcome;
    use proptest::prelude::*;

    #[derive(Clone, Copy, Debug)]
    enum Op {
        /// A call whose outcome is recorded at once: through `call_with`
        /// (`true`, whose lean path offers a success inline) or a permit.
        Call(Outcome, bool),
        /// A permit dropped unrecorded.
        Drop,
        /// A permit taken now, recorded at the next `Finish` (stale for the live
        /// breaker if it moved on meanwhile).
        Start,
        Finish(Outcome),
        Advance(u64),
    }

    fn outcome() -> impl Strategy<Value = Outcome> {
        prop_oneof![
            4 => Just(Outcome::Failure),
            3 => Just(Outcome::Success),
            1 => Just(Outcome::Ignored),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (outcome(), any::<bool>()).prop_map(|(o, call)| Op::Call(o, call)),
            1 => Just(Op::Drop),
            1 => Just(Op::Start),
            1 => outcome().prop_map(Op::Finish),
            3 => (1u64..1500).prop_map(Op::Advance),
        ]
    }

    /// A candidate's settings: (consecutive failures, (buckets, minimum calls) of
    /// a 1 s failure-rate window at 0.5, cooldown in ms, probes).
    type Shape = (Option<u32>, Option<(u32, u32)>, u64, u32);

    fn shape() -> impl Strategy<Value = Shape> {
        (
            proptest::option::of(1u32..4),
            proptest::option::of((1u32..4, 1u32..5)),
            1u64..3000,
            1u32..3,
        )
    }

    fn builder(s: Shape) -> cutout::Builder {
        let mut b = CircuitBreaker::builder()
            .open_duration(Duration::from_millis(s.2))
            .half_open_probes(s.3);
        if let Some(n) = s.0 {
            b = b.consecutive_failures(n);
        }
        if let Some((buckets, min)) = s.1 {
            b = b
                .window(Duration::from_secs(1), buckets)
                .failure_rate(0.5, min);
        }
        b
    }

    /// A reference: the plain breaker and what it was given.
    struct Reference {
        breaker: Live,
        clock: ManualClock,
        /// Its transitions.
        seen: Arc<Mutex<Vec<Transition>>>,
        spared: u64,
        turned_away: u64,
    }

    impl Reference {
        fn new(s: Shape) -> Reference {
            let clock = ManualClock::new();
            let seen: Arc<Mutex<Vec<_>>> = Arc::default();
            let log = seen.clone();
            let breaker = builder(s)
                .clock(clock.clone())
                .on_transition(move |t| log.lock().unwrap().push(*t))
                .build()
                .unwrap();
            Reference {
                breaker,
                clock,
                seen,
                spared: 0,
                turned_away: 0,
            }
        }

        /// A live call's outcome (`None`: dropped), offered.
        fn offer(&mut self, outcome: Option<Outcome>) {
            match (self.breaker.try_acquire(), outcome) {
                (Ok(permit), Some(outcome)) => permit.record(outcome),
                (Ok(permit), None) => drop(permit),
                (Err(_), Some(Outcome::Failure)) => self.spared += 1,
                (Err(_), Some(Outcome::Success)) => self.turned_away += 1,
                (Err(_), _) => {}
            }
        }

        /// What the report should say at `now` (since the build).
        fn check(&self, r: &CandidateReport, now: Duration, unseen: u64) {
            let seen = self.seen.lock().unwrap();
            let opens: Vec<_> = seen
                .iter()
                .filter(|t| t.to == State::Open)
                .map(|t| t.at)
                .collect();
            // Each opening up to its end, or its deadline if that came first.
            let mut open = Duration::ZERO;
            let mut since: Option<(Duration, Duration)> = None;
            for t in seen.iter() {
                if t.from == State::Open {
                    let (start, deadline) = since.take().unwrap();
                    open += t.at.min(deadline) - start;
                }
                if t.to == State::Open {
                    since = Some((t.at, t.open_until.unwrap()));
                }
            }
            open += since.map_or(Duration::ZERO, |(start, deadline)| {
                now.min(deadline) - start
            });
            let kept = opens.len().saturating_sub(CandidateReport::OPENED_AT_KEPT);
            let m = self.breaker.metrics();
            assert_eq!(r.state, m.state, "{r:?}");
            assert_eq!(r.opened, opens.len() as u64, "{r:?}");
            assert_eq!(r.opened_at, opens[kept..], "{r:?}");
            assert_eq!(r.time_open, open, "{r:?}");
            assert_eq!(r.would_reject, m.lifetime.rejected, "{r:?}");
            assert_eq!(
                (r.failures_spared, r.successes_turned_away),
                (self.spared, self.turned_away)
            );
            assert_eq!(r.unseen, unseen, "{r:?}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn each_candidate_reports_what_a_plain_breaker_given_its_calls_does(
            live_after in 1u32..6,
            live_window in any::<bool>(),
            shapes in proptest::collection::vec(shape(), 1..3),
            ops in proptest::collection::vec(op(), 1..120),
        ) {
            let clock = ManualClock::new();
            let mut b = CircuitBreaker::builder()
                .consecutive_failures(live_after)
                .clock(clock.clone());
            if live_window {
                // A windowed live breaker offers at its window's reading.
                b = b.window(Duration::from_secs(1), 2).failure_rate(0.5, 3);
            }
            for (i, s) in shapes.iter().enumerate() {
                b = b.candidate(format!("c{i}"), builder(*s));
            }
            let live = b.build().unwrap();
            let mut refs: Vec<_> = shapes.iter().map(|s| Reference::new(*s)).collect();
            let mut now = Duration::ZERO;
            let mut held = Vec::new();
            for op in ops {
                match op {
                    Op::Call(outcome, true) => {
                        let ran = live.call_with(|_| outcome, || Ok::<_, ()>(()));
                        if !matches!(ran, Err(cutout::Error::Rejected(_))) {
                            refs.iter_mut().for_each(|r| r.offer(Some(outcome)));
                        }
                    }
                    Op::Call(outcome, false) => {
                        if let Ok(permit) = live.try_acquire() {
                            permit.record(outcome);
                            refs.iter_mut().for_each(|r| r.offer(Some(outcome)));
                        }
                    }
                    Op::Drop => {
                        if let Ok(permit) = live.try_acquire() {
                            drop(permit);
                            refs.iter_mut().for_each(|r| r.offer(None));
                        }
                    }
                    Op::Start => held.extend(live.try_acquire().ok()),
                    Op::Finish(outcome) => {
                        if let Some(permit) = held.pop() {
                            permit.record(outcome);
                            refs.iter_mut().for_each(|r| r.offer(Some(outcome)));
                        }
                    }
                    Op::Advance(ms) => {
                        let step = Duration::from_millis(ms);
                        now += step;
                        clock.advance(step);
                        refs.iter().for_each(|r| r.clock.advance(step));
                    }
                }
                let unseen = live.metrics().lifetime.rejected;
                for (report, reference) in live.candidates().iter().zip(&refs) {
                    reference.check(report, now, unseen);
                }
            }
        }
    }
}

/// Counts the calling thread's allocations (tests run on threads of their own).
struct Counting;

std::thread_local! {
    static ALLOCATIONS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

// SAFETY: every method forwards to `System` unchanged, and counts in a
// const-initialized thread-local `Cell`, which needs no allocation.
unsafe impl std::alloc::GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        // SAFETY: the caller upholds `alloc`'s contract.
        unsafe { std::alloc::System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: the caller upholds `dealloc`'s contract.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// No transition in the measured calls: with the `metrics` feature a
/// transition's export allocates its labels, as a live breaker's does.
#[test]
fn offering_allocates_nothing_once_the_thread_has_its_stripes() {
    let clock = ManualClock::new();
    let live = CircuitBreaker::builder()
        .consecutive_failures(1000)
        .clock(clock.clone())
        .candidate(
            "open",
            CircuitBreaker::builder()
                .consecutive_failures(1)
                .open_duration(Duration::from_secs(3600)),
        )
        .candidate(
            "closed",
            CircuitBreaker::builder()
                .window(Duration::from_secs(10), 10)
                .failure_rate(1.0, 1000),
        )
        .build()
        .unwrap();
    fail(&live); // this thread's first call (its stripes), and "open" trips
    let before = ALLOCATIONS.with(|n| n.get());
    for i in 0..1000 {
        match i % 2 {
            0 => fail(&live),
            _ => succeed(&live),
        }
        drop(live.try_acquire().unwrap());
        clock.advance(Duration::from_millis(7));
    }
    assert_eq!(
        ALLOCATIONS.with(|n| n.get()),
        before,
        "allocations on the call path"
    );
    let reports = live.candidates();
    assert_eq!(reports[0].would_reject, 2000, "{reports:?}");
    assert_eq!(
        (reports[1].state, reports[1].would_reject),
        (State::Closed, 0)
    );
}
