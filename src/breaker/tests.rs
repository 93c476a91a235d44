//! Unit tests of the breaker's insides.

use super::phase::STREAK_MAX;
use super::*;
use crate::ManualClock;

fn breaker() -> CircuitBreaker<ManualClock> {
    CircuitBreaker::builder()
        .consecutive_failures(5)
        .clock(ManualClock::new())
        .build()
        .unwrap()
}

/// [`breaker`] after `g` resets: at generation `g`.
fn at_generation(g: u32) -> CircuitBreaker<ManualClock> {
    let b = breaker();
    for _ in 0..g {
        b.reset();
    }
    assert_eq!(b.hot.word.load().generation(), g);
    b
}

#[test]
fn a_threads_first_call_gives_it_a_slot_and_every_call_is_counted() {
    let clock = ManualClock::new();
    let b = CircuitBreaker::builder()
        .window(Duration::from_secs(1), 2)
        .failure_rate(0.5, 100)
        .clock(clock)
        .build()
        .unwrap();
    let assigned = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let before = crate::slot::assigned();
                for _ in 0..3 {
                    assert!(b.call(|| Ok::<_, ()>(())).is_ok());
                }
                (before, crate::slot::assigned())
            })
            .join()
            .unwrap()
    });
    assert_eq!(assigned, (false, true), "its first call gave it a slot");
    let m = b.metrics();
    assert_eq!((m.lifetime.admitted, m.lifetime.successes), (3, 3));
    assert_eq!(m.window.calls, 3);
}

#[test]
fn a_permit_recorded_on_a_thread_without_a_stripe_here_is_counted() {
    // `record` takes the inline path only for a thread that owns a stripe of this
    // breaker; a permit recorded elsewhere goes through `record_in_mine`, which
    // gives the recording thread its slot and stripe first.
    let b = std::sync::Arc::new(
        CircuitBreaker::builder()
            .window(Duration::from_secs(1), 2)
            .failure_rate(0.5, 100)
            .clock(ManualClock::new())
            .build()
            .unwrap(),
    );
    let other = breaker();
    let (owned, fresh, elsewhere) = (
        b.try_acquire_owned().unwrap(),
        b.try_acquire_owned().unwrap(),
        b.try_acquire_owned().unwrap(),
    );
    owned.success(); // this thread owns its stripe: the inline path
    let here = b.clone();
    std::thread::spawn(move || {
        // A slot from another breaker, but no stripe of this one yet. (First: a
        // thread that exits gives its slot back, and a later thread taking it over
        // would find that thread's stripe here.)
        assert!(other.call(|| Ok::<_, ()>(())).is_ok());
        assert!(here.hot.stripes.mine_if_owned().is_none());
        elsewhere.success();
        assert!(
            here.hot.stripes.mine_if_owned().is_some(),
            "it has its stripe now"
        );
    })
    .join()
    .unwrap();
    let fresh_thread = std::thread::spawn(move || {
        let before = crate::slot::assigned();
        fresh.success(); // a thread with no slot at all
        (before, crate::slot::assigned())
    });
    assert_eq!(fresh_thread.join().unwrap(), (false, true));
    let m = b.metrics();
    assert_eq!((m.lifetime.admitted, m.lifetime.successes), (3, 3));
    assert_eq!(m.window.calls, 3, "every success is in the window");
}

/// A `ManualClock` whose reading is never "a load away", like the default clock
/// without its refresh thread: every call leaves the lean path.
struct NoCheapReading(ManualClock);

impl Clock for NoCheapReading {
    fn now(&self) -> u64 {
        self.0.now()
    }
    fn now_if_cheap(&self) -> Option<u64> {
        None
    }
}

/// Runs one script of successes, failures and slow calls across bucket edges on
/// a breaker with every policy, timed by `clock`; returns what it counted.
fn scripted<C: Clock>(clock: C, time: &ManualClock) -> (State, WindowCounts, u64, Lifetime) {
    let b = CircuitBreaker::builder()
        .window(Duration::from_secs(10), 10)
        .failure_rate(0.9, 100)
        .slow_calls(Duration::from_millis(200), 0.9)
        .consecutive_failures(50)
        .clock(clock)
        .build()
        .unwrap();
    for i in 0..40u64 {
        let _ = b.call(|| {
            if i % 7 == 3 {
                time.advance(Duration::from_millis(250)); // slow
            }
            if i % 5 == 0 { Err(i) } else { Ok(i) }
        });
        time.advance(Duration::from_millis(100)); // crosses bucket edges
    }
    let m = b.metrics();
    (m.state, m.window, m.consecutive_failures, m.lifetime)
}

/// Trips a consecutive-failures breaker timed by `clock`, then calls it during
/// and after the cooldown; returns the rejections' `retry_after` and the counts.
fn rejected<C: Clock>(clock: C, time: &ManualClock) -> (Vec<Option<Duration>>, Lifetime) {
    let b = CircuitBreaker::builder()
        .consecutive_failures(2)
        .open_duration(Duration::from_secs(1))
        .clock(clock)
        .build()
        .unwrap();
    let mut retry = Vec::new();
    for _ in 0..2 {
        let _ = b.call(|| Err::<(), _>(()));
    }
    for _ in 0..4 {
        time.advance(Duration::from_millis(300));
        if let Err(Error::Rejected(r)) = b.call(|| Ok::<_, ()>(())) {
            retry.push(r.retry_after());
        }
    }
    (retry, b.metrics().lifetime)
}

#[test]
fn calls_off_the_lean_path_count_exactly_as_on_it() {
    let time = ManualClock::new();
    let lean = scripted(time.clone(), &time);
    let time = ManualClock::new();
    assert_eq!(lean, scripted(NoCheapReading(time.clone()), &time));
    let (_, window, _, lifetime) = lean;
    assert_eq!(
        (lifetime.admitted, lifetime.failures, lifetime.slow),
        (40, 8, 6)
    );
    assert!(window.calls > 0 && window.slow > 0, "{window:?}");

    let time = ManualClock::new();
    let lean = rejected(time.clone(), &time);
    let time = ManualClock::new();
    assert_eq!(lean, rejected(NoCheapReading(time.clone()), &time));
    let ms = Duration::from_millis;
    assert_eq!(lean.0, [Some(ms(700)), Some(ms(400)), Some(ms(100))]);
    assert_eq!((lean.1.rejected, lean.1.successes), (3, 1));
}

/// The owner's cached deadline belongs to one Open phase: a later Open phase,
/// with an earlier deadline, is never judged by it, and the window's
/// live-bucket cache, which shares its key word, counts right after it.
#[test]
fn a_cached_open_deadline_follows_the_phase() {
    let clock = ManualClock::new();
    let b = CircuitBreaker::builder()
        .window(Duration::from_secs(10), 10)
        .failure_rate(0.5, 2)
        .open_duration(Duration::from_secs(1))
        .clock(clock.clone())
        .build()
        .unwrap();
    let ms = Duration::from_millis;
    let retry = |b: &CircuitBreaker<ManualClock>| match b.call(|| Ok::<_, ()>(())) {
        Err(Error::Rejected(r)) => r.retry_after(),
        other => panic!("expected a rejection, got {other:?}"),
    };
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                for _ in 0..2 {
                    let _ = b.call(|| Err::<(), _>(()));
                }
                assert_eq!(retry(&b), Some(ms(1000))); // fills the cache
                let o = b.hot.stripes.mine_if_owned().expect("an owned stripe");
                assert_eq!(
                    o.scratch(PHASE_KEY).load(Ordering::Relaxed),
                    b.hot.word.load().key().to_bits()
                );
                clock.advance(ms(400));
                assert_eq!(retry(&b), Some(ms(600))); // from the cache
                clock.advance(ms(600));
                let _ = b.call(|| Err::<(), _>(())); // the probe fails: 2 s
                assert_eq!(retry(&b), Some(ms(2000))); // cached: 2 s from now
                // A new Open phase with a shorter cooldown: the cached deadline,
                // a second later than its end, is another phase's.
                b.reset();
                for _ in 0..2 {
                    let _ = b.call(|| Err::<(), _>(()));
                }
                clock.advance(ms(1000));
                assert!(b.call(|| Ok::<_, ()>(())).is_ok()); // the probe closes
                for _ in 0..3 {
                    assert!(b.call(|| Ok::<_, ()>(())).is_ok());
                }
                let m = b.metrics();
                assert_eq!(
                    (m.state, m.window.calls, m.window.failures),
                    (State::Closed, 3, 0)
                );
                assert_eq!(m.lifetime.rejected, 3);
            })
            .join()
            .unwrap();
    });
}

#[test]
fn the_words_the_lean_paths_load_come_first_in_their_lines() {
    /// Where a load of `size` bytes at `field` ends in its 64 bytes.
    fn end<T>(field: &T, size: usize) -> usize {
        field as *const T as usize % 64 + size
    }
    let b = breaker();
    for end in [
        end(&b.hot.word, size_of::<StateWord>()),
        end(&b.hot.lean, size_of::<Lean>()),
        end(&b.hot.lean_slow_nanos, 4),
        // The room's pointer, length and class: the first field of `Stripes`.
        end(&b.hot.stripes, Stripes::LEAN_BYTES),
        end(&b.phase.streak, 8),
        end(&b.phase.time, 8),
    ] {
        assert!(
            end <= crate::stripe::LEAN_LOADS,
            "a load ends at byte {end}"
        );
    }
}

#[test]
fn a_stale_failure_leaves_a_later_phases_streak_alone() {
    let mut b = at_generation(3);
    b.phase.streak = TaggedWord::holding(3, 3);
    assert_eq!(b.bump_streak(2), 0, "generation 2 is over");
    assert_eq!(b.phase.streak.data_for(3), 3);
    assert_eq!(b.bump_streak(3), 4);
    b.reset();
    assert_eq!(b.bump_streak(4), 1, "a new phase starts its own streak");
    assert_eq!(b.phase.streak.data_for(4), 1);
}

#[test]
fn a_success_empties_its_own_or_an_earlier_streak_but_not_a_later_one() {
    let mut b = at_generation(3);
    b.phase.streak = TaggedWord::holding(3, 3);
    b.clear_streak(2);
    assert_eq!(
        b.phase.streak.data_for(3),
        3,
        "a later phase's streak stays"
    );
    b.clear_streak(3);
    assert!(b.phase.streak.is_empty_relaxed());
    b.phase.streak = TaggedWord::holding(3, 3);
    b.reset();
    b.reset();
    b.clear_streak(5);
    assert!(
        b.phase.streak.is_empty_relaxed(),
        "an earlier phase's streak is emptied"
    );
}

#[test]
fn the_check_due_mark_outlives_the_streak_and_stays_out_of_its_count() {
    let b = at_generation(3);
    assert_eq!(b.bump_streak(3), 1);
    b.mark_check_due(3, true);
    assert_eq!(b.bump_streak(3), 2, "the mark is not counted");
    assert_eq!(b.streak_of(3), 2);
    assert_eq!(b.metrics().consecutive_failures, 2);
    assert!(b.clear_streak(3), "a success finds the check due");
    assert_eq!(b.streak_of(3), 0);
    assert!(
        !b.phase.streak.is_empty_relaxed(),
        "the mark keeps the lean path off"
    );
    b.mark_check_due(3, false);
    assert!(b.phase.streak.is_empty_relaxed());
    assert!(!b.clear_streak(3));
    b.mark_check_due(2, true);
    assert!(b.phase.streak.is_empty_relaxed(), "generation 2 is over");
    // A new phase starts unmarked.
    b.mark_check_due(3, true);
    b.reset();
    assert!(!b.clear_streak(4));
    // The streak saturates below the mark.
    let _ = b.phase.streak.update(4, &b.hot.word, |_| Some(STREAK_MAX));
    assert_eq!(b.bump_streak(4), u64::from(STREAK_MAX));
    assert!(!b.clear_streak(4));
}

/// The lean path keeps the slow-call threshold in four bytes, at most 4.3 s: over a
/// longer threshold a success is judged off the lean path, against the threshold
/// itself, so one that took 5 s is not slow under 10 s, and one that took 11 s is.
#[test]
fn a_slow_call_threshold_beyond_four_seconds_is_judged_exactly() {
    let clock = ManualClock::new();
    let b = CircuitBreaker::builder()
        .failure_rate(0.5, 2)
        .slow_calls(Duration::from_secs(10), 1.0)
        .clock(clock.clone())
        .build()
        .unwrap();
    assert_eq!(b.hot.lean_slow_nanos, u32::MAX, "10 s + 1 ns, clamped");
    let took = |secs| {
        b.call(|| {
            clock.advance(Duration::from_secs(secs));
            Ok::<_, ()>(())
        })
        .unwrap()
    };
    took(0);
    took(5);
    took(5);
    let m = b.metrics().lifetime;
    assert_eq!((m.successes, m.slow), (3, 0), "5 s is not slow");
    took(11);
    assert_eq!(b.metrics().lifetime.slow, 1, "11 s is");
    took(4);
    let m = b.metrics().lifetime;
    assert_eq!((m.successes, m.slow), (5, 1), "4 s is not slow");
}

/// The failure budget's grant is withdrawn by every transition to a counting
/// phase. Eight transitions later, all in one epoch, a tiny generation is back to
/// the grant's (and so is its tag); the window's bucket was rotated in between, so
/// the grant, made when the window held 110 calls, would cover failures that now
/// trip. (With 32-bit generations the tag differs, and the test shows the trip.)
#[test]
fn a_failure_budget_grant_is_withdrawn_when_its_phase_ends() {
    let b = CircuitBreaker::builder()
        .window(Duration::from_secs(10), 1)
        .failure_rate(0.5, 20)
        .clock(ManualClock::new())
        .build()
        .unwrap();
    let ok = || b.call(|| Ok::<_, ()>(())).unwrap();
    let fail = || b.call(|| Err::<(), _>(())).unwrap_err();
    for _ in 0..100 {
        ok();
    }
    for _ in 0..10 {
        fail();
    }
    assert_eq!(b.state(), State::Closed);
    // The first failure read 101 calls, 1 failed: 50.5 - 1, less two, 47 more
    // cannot trip. The other nine were numbered within that, and skipped.
    let w = b.window.as_ref().unwrap();
    assert_eq!(w.budget_numbered_and_limit(), (10, 1 + 47));
    for _ in 0..4 {
        b.force_open();
        b.reset();
        ok(); // a success of the new phase rotates the window's one bucket
    }
    assert_eq!(b.hot.word.load().generation(), 8 & crate::state::GEN_MASK);
    for _ in 0..9 {
        ok();
    }
    for _ in 0..9 {
        fail();
    }
    assert_eq!(b.state(), State::Closed, "19 calls: below minimum_calls");
    fail();
    assert_eq!(b.state(), State::Open, "10 of 20 calls failed");
}
