//! Save and restore: `CircuitBreaker::save`, `Builder::restore`, the
//! rules for each state, across configurations, the refusals, a proptest that no
//! saved state panics a restore, the registry's `save_all` / `restore_all` /
//! `initial_state`, and (feature `serde`) the format and its fixture.
//!
//! No sleeps: the monotonic side is a `ManualClock`, the wall clock an explicit
//! `SystemTime`.

mod common;

use common::{rate_window, trips_after};
use cutout::{
    Builder, CircuitBreaker, Error, ManualClock, Reason, SavedState, SavedWindow, State,
    WindowCounts,
};
use proptest::prelude::*;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A fixed wall-clock time: 2027-01-15.
fn t0() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

/// A microsecond.
const MICRO: Duration = Duration::from_micros(1);

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Consecutive failures (3), a 10 s cooldown, on `clock`.
fn consecutive(clock: &ManualClock) -> Builder<ManualClock> {
    CircuitBreaker::builder()
        .name("db")
        .consecutive_failures(3)
        .open_duration(secs(10))
        .clock(clock.clone())
}

/// A failure-rate window: 50% over 10 s in 10 buckets, from 4 calls.
fn windowed(clock: &ManualClock, length: Duration, buckets: u32) -> Builder<ManualClock> {
    rate_window(length, buckets, 0.5, 4)
        .open_duration(secs(10))
        .clock(clock.clone())
}

fn fail<C: cutout::Clock>(b: &CircuitBreaker<C>) {
    let _ = b.call(|| Err::<(), _>("down"));
}

fn succeed<C: cutout::Clock>(b: &CircuitBreaker<C>) -> bool {
    b.call(|| Ok::<_, ()>(())).is_ok()
}

/// The `retry_after` of a rejection, or `None` if the call was admitted.
fn rejected_for<C: cutout::Clock>(b: &CircuitBreaker<C>) -> Option<Option<Duration>> {
    match b.call(|| Ok::<_, ()>(())) {
        Err(Error::Rejected(r)) => Some(r.retry_after()),
        _ => None,
    }
}

#[test]
fn an_open_breaker_restored_in_another_process_stays_open_until_the_saved_deadline() {
    let clock = ManualClock::new();
    let old = consecutive(&clock).build().unwrap();
    for _ in 0..3 {
        fail(&old);
    }
    clock.advance(secs(3));
    let saved = old.save_at(t0());
    assert_eq!((saved.state, saved.level), (State::Open, 0));
    assert_eq!(saved.open_until, Some(t0() + secs(7)));
    assert_eq!(saved.name, "db");

    // The new process starts 2 s later, on a clock of its own.
    let clock = ManualClock::new();
    let new = consecutive(&clock)
        .restore_at(saved, t0() + secs(2))
        .build()
        .unwrap();
    assert_eq!(new.state(), State::Open);
    let m = new.metrics();
    assert_eq!(m.generation, 0, "the generation starts fresh");
    assert_eq!(m.retry_after, Some(secs(5)));
    assert_eq!(rejected_for(&new), Some(Some(secs(5))));
    clock.advance(ms(4_999));
    assert_eq!(rejected_for(&new), Some(Some(ms(1))));
    clock.advance(ms(1));
    assert!(succeed(&new), "the probe is admitted at the saved deadline");
    assert_eq!(new.state(), State::Closed);
}

#[test]
fn a_deadline_between_milliseconds_rounds_up_so_no_probe_is_early() {
    let clock = ManualClock::new();
    let mut saved = SavedState::new("db", State::Open, t0());
    saved.open_until = Some(t0() + Duration::from_micros(2_500));
    let b = consecutive(&clock).restore_at(saved, t0()).build().unwrap();
    clock.advance(Duration::from_micros(2_999));
    assert!(rejected_for(&b).is_some());
    clock.advance(Duration::from_micros(1));
    assert!(succeed(&b));
}

/// A reload loop (save, restore, save ... at one wall-clock instant between
/// milliseconds): each cycle rounds the deadline up, as documented, so the
/// cooldown ends at most a millisecond or two later a cycle, never sooner.
#[test]
fn a_reload_loop_moves_the_deadline_later_by_at_most_two_ms_a_cycle() {
    let now = t0() + Duration::from_micros(500);
    let live = consecutive(&ManualClock::new()).build().unwrap();
    for _ in 0..3 {
        fail(&live);
    }
    let mut saved = live.save_at(now);
    for _ in 0..100 {
        let before = saved.open_until.unwrap();
        let restored = consecutive(&ManualClock::new()).restore_at(saved, now);
        saved = restored.build().unwrap().save_at(now);
        let after = saved.open_until.unwrap().duration_since(before);
        assert!(after.as_ref().is_ok_and(|d| *d <= ms(2)), "{after:?}");
    }
}

#[test]
fn a_wall_clock_step_after_the_restore_changes_nothing() {
    // The deadline was converted at the build: only the breaker's clock counts.
    let clock = ManualClock::new();
    let mut saved = SavedState::new("db", State::Open, t0());
    saved.open_until = Some(t0() + secs(5));
    let b = consecutive(&clock).restore_at(saved, t0()).build().unwrap();
    // (The wall clock could jump here by hours: the breaker never reads it again.)
    clock.advance(ms(4_999));
    assert!(rejected_for(&b).is_some());
    clock.advance(ms(1));
    assert!(succeed(&b));
}

#[test]
fn an_open_state_whose_deadline_passed_is_ready_to_probe() {
    let clock = ManualClock::new();
    let mut saved = SavedState::new("db", State::Open, t0());
    saved.level = 2;
    saved.open_until = Some(t0() + secs(1));
    let b = consecutive(&clock)
        .restore_at(saved, t0() + secs(60))
        .build()
        .unwrap();
    assert_eq!(b.state(), State::Open, "a pure read, as for a live breaker");
    assert_eq!(b.metrics().retry_after, Some(Duration::ZERO));
    let probe = b.try_acquire().expect("ready to probe");
    assert_eq!(b.state(), State::HalfOpen);
    probe.failure();
    // The level was kept: the reopening waits 10 s * 2^3.
    let m = b.metrics();
    assert_eq!((m.state, m.level), (State::Open, 3));
    assert_eq!(
        m.retry_after,
        Some(secs(60)),
        "cut at max_open_duration (60 s)"
    );
}

#[test]
fn a_half_open_state_restores_as_a_fresh_round() {
    let clock = ManualClock::new();
    let old = consecutive(&clock).half_open_probes(2).build().unwrap();
    for _ in 0..3 {
        fail(&old);
    }
    clock.advance(secs(10));
    let held = old.try_acquire().unwrap();
    let _held_too = old.try_acquire().unwrap();
    assert!(old.try_acquire().is_err(), "both probe slots are taken");
    let saved = old.save_at(t0());
    drop(held);
    assert_eq!(saved.state, State::HalfOpen);

    let new = consecutive(&ManualClock::new())
        .half_open_probes(2)
        .restore_at(saved, t0())
        .build()
        .unwrap();
    assert_eq!(new.state(), State::HalfOpen);
    let a = new.try_acquire().expect("a fresh round: slot 1");
    let b = new.try_acquire().expect("a fresh round: slot 2");
    assert!(new.try_acquire().is_err());
    a.success();
    b.success();
    assert_eq!(new.state(), State::Closed);
}

#[test]
fn a_restored_half_open_round_times_out_from_the_restore() {
    let clock = ManualClock::new();
    let saved = SavedState::new("db", State::HalfOpen, t0());
    let b = consecutive(&clock)
        .half_open_timeout(secs(30))
        .restore_at(saved, t0())
        .build()
        .unwrap();
    std::mem::forget(b.try_acquire().unwrap()); // a leaked probe
    clock.advance(secs(30));
    assert!(b.try_acquire().is_err());
    let m = b.metrics();
    assert_eq!(m.state, State::Open);
    assert_eq!(m.transitions(Reason::HalfOpenTimeout), 1);
}

#[test]
fn forced_open_and_disabled_are_kept() {
    let clock = ManualClock::new();
    let old = consecutive(&clock).build().unwrap();
    old.force_open();
    let b = consecutive(&clock)
        .restore_at(old.save_at(t0()), t0())
        .build()
        .unwrap();
    assert_eq!(b.state(), State::ForcedOpen);
    clock.advance(secs(3600));
    assert_eq!(rejected_for(&b), Some(None), "until reset");
    b.reset();
    assert!(succeed(&b));

    old.disable();
    let b = consecutive(&clock)
        .restore_at(old.save_at(t0()), t0())
        .build()
        .unwrap();
    assert_eq!(b.state(), State::Disabled);
    for _ in 0..10 {
        fail(&b);
    }
    assert_eq!(b.state(), State::Disabled, "nothing trips");
}

#[test]
fn the_consecutive_failure_count_is_restored() {
    let clock = ManualClock::new();
    let old = consecutive(&clock).build().unwrap();
    fail(&old);
    fail(&old);
    let saved = old.save_at(t0());
    assert_eq!(
        (saved.state, saved.consecutive_failures),
        (State::Closed, 2)
    );

    let new = consecutive(&clock)
        .restore_at(saved.clone(), t0())
        .build()
        .unwrap();
    assert_eq!(new.metrics().consecutive_failures, 2);
    fail(&new);
    assert_eq!(new.state(), State::Open, "the third failure in a row");

    // A success still clears it.
    let new = consecutive(&clock)
        .restore_at(saved.clone(), t0())
        .build()
        .unwrap();
    assert!(succeed(&new));
    fail(&new);
    assert_eq!(new.state(), State::Closed);

    // A configuration without the policy has no streak to restore.
    let rate = windowed(&clock, secs(10), 10)
        .restore_at(saved, t0())
        .build()
        .unwrap();
    assert_eq!(rate.metrics().consecutive_failures, 0);
}

#[test]
fn the_window_totals_are_restored_and_count_toward_the_next_trip() {
    let clock = ManualClock::new();
    let old = windowed(&clock, secs(10), 10).build().unwrap();
    assert!(succeed(&old));
    assert!(succeed(&old));
    fail(&old);
    clock.advance(secs(3)); // another bucket
    let saved = old.save_at(t0());
    let w = saved.window.expect("a window");
    assert_eq!((w.length, w.buckets), (secs(10), 10));
    assert_eq!(w.counts, WindowCounts::new(3, 1, 0));

    let clock = ManualClock::new();
    let new = windowed(&clock, secs(10), 10)
        .restore_at(saved.clone(), t0() + secs(1))
        .build()
        .unwrap();
    assert_eq!(new.metrics().window, w.counts);
    fail(&new); // 2 of 4 calls failed: 50%
    assert_eq!(new.state(), State::Open);

    // Restored totals count as calls made at the build: gone one window later.
    let new = windowed(&clock, secs(10), 10)
        .restore_at(saved.clone(), t0())
        .build()
        .unwrap();
    clock.advance(ms(9_999));
    assert_eq!(new.metrics().window.calls, 3);
    clock.advance(ms(1));
    assert_eq!(new.metrics().window.calls, 0);

    // Whatever their age: restored just under a window after the save (3 s
    // after the calls), they stay another window, about 23 s after the calls
    // (see `SavedWindow`), and a window later still they are not restored.
    let new = windowed(&clock, secs(10), 10)
        .restore_at(saved.clone(), t0() + ms(9_999))
        .build()
        .unwrap();
    clock.advance(ms(9_999));
    assert_eq!(new.metrics().window.calls, 3);
    let late = windowed(&clock, secs(10), 10).restore_at(saved, t0() + secs(10));
    assert_eq!(late.build().unwrap().metrics().window.calls, 0);
}

#[test]
fn across_configurations_the_window_keeps_what_still_makes_sense() {
    let clock = ManualClock::new();
    let old = windowed(&clock, secs(10), 10).build().unwrap();
    fail(&old);
    fail(&old);
    let saved = old.save_at(t0());
    let counts = |b: &CircuitBreaker<ManualClock>| b.metrics().window.calls;
    let restore = |builder: Builder<ManualClock>, now| {
        builder.restore_at(saved.clone(), now).build().unwrap()
    };
    // Other bucket counts, same or longer length: the totals fit inside.
    assert_eq!(counts(&restore(windowed(&clock, secs(10), 5), t0())), 2);
    assert_eq!(counts(&restore(windowed(&clock, secs(10), 1), t0())), 2);
    assert_eq!(counts(&restore(windowed(&clock, secs(60), 60), t0())), 2);
    // A shorter window cannot tell which of them fall inside it, even half a
    // millisecond shorter (a saved length is whole milliseconds).
    assert_eq!(counts(&restore(windowed(&clock, secs(5), 5), t0())), 0);
    assert_eq!(
        counts(&restore(
            windowed(&clock, ms(9_999) + MICRO * 500, 10),
            t0()
        )),
        0
    );
    // Saved a whole (new) window length ago: all of them are older than it.
    assert_eq!(
        counts(&restore(windowed(&clock, secs(10), 10), t0() + secs(10))),
        0
    );
    assert_eq!(
        counts(&restore(windowed(&clock, secs(60), 6), t0() + secs(30))),
        2
    );
    // No window at all: nothing to restore into, the rest is restored.
    let b = restore(consecutive(&clock), t0());
    assert_eq!((b.state(), b.metrics().window.calls), (State::Closed, 0));
}

/// A saved level above this configuration's highest (63, the most a saved state
/// may carry) and a deadline past its longest cooldown are cut to both, with or
/// without jitter: the cooldown is the cap exactly, never a jittered share of it.
#[test]
fn the_level_is_cut_to_the_configurations_highest_and_the_deadline_to_its_longest_cooldown() {
    for jitter in [0.0, 0.5] {
        let clock = ManualClock::new();
        let mut saved = SavedState::new("db", State::Open, t0());
        saved.level = 63;
        saved.open_until = Some(t0() + secs(3600));
        let b = trips_after(1, secs(1))
            .max_open_duration(secs(4))
            .jitter(jitter)
            .clock(clock.clone())
            .restore_at(saved, t0())
            .build()
            .unwrap();
        let m = b.metrics();
        assert_eq!(
            (m.state, m.level),
            (State::Open, 2),
            "jitter {jitter}: 1 s, 2 s, 4 s: level 2"
        );
        assert_eq!(m.retry_after, Some(secs(4)), "jitter {jitter}");
        clock.advance(ms(3_999));
        assert!(rejected_for(&b).is_some(), "jitter {jitter}: 1 ms early");
        clock.advance(ms(1));
        assert!(succeed(&b), "jitter {jitter}");
        assert_eq!(b.state(), State::Closed);
    }
}

#[test]
fn the_builders_name_stands() {
    let saved = SavedState::new("old-name", State::Closed, t0());
    let b = CircuitBreaker::builder()
        .name("new-name")
        .restore_at(saved, t0())
        .build()
        .unwrap();
    assert_eq!(b.name(), "new-name");
}

/// The field and reason of the error that restoring `saved` at `now` gives.
fn refusal(saved: SavedState, now: SystemTime) -> String {
    let err = consecutive(&ManualClock::new())
        .restore_at(saved, now)
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "restore");
    err.reason().to_string()
}

#[test]
fn bad_input_is_refused_with_a_reason() {
    let closed = SavedState::new("db", State::Closed, t0());

    let mut s = closed.clone();
    s.version = 2;
    assert!(refusal(s, t0()).contains("format version 2"));

    // Saved "in the future": beyond the tolerated skew (1 minute by default).
    let s = SavedState::new("db", State::Closed, t0() + secs(61));
    assert!(refusal(s.clone(), t0()).contains("ahead of this host's wall clock"));
    assert!(
        consecutive(&ManualClock::new())
            .restore_at(s.clone(), t0() + secs(1))
            .build()
            .is_ok()
    );
    let lenient = consecutive(&ManualClock::new()).max_clock_skew(secs(120));
    assert!(lenient.restore_at(s, t0()).build().is_ok());

    let mut s = closed.clone();
    s.level = 64;
    assert!(refusal(s, t0()).contains("level 64"));

    let s = SavedState::new("db", State::Open, t0());
    assert!(refusal(s, t0()).contains("open_until"));

    let mut s = closed.clone();
    s.window = Some(SavedWindow::new(secs(10), 0, WindowCounts::default()));
    assert!(refusal(s, t0()).contains("0 buckets"));
    let mut s = closed.clone();
    s.window = Some(SavedWindow::new(
        Duration::ZERO,
        10,
        WindowCounts::default(),
    ));
    assert!(refusal(s, t0()).contains("window"));
    let mut s = closed;
    let counts = WindowCounts::new(1, 2, 0);
    s.window = Some(SavedWindow::new(secs(10), 10, counts));
    assert!(refusal(s, t0()).contains("2 failures"));
}

#[test]
fn a_bad_setting_is_still_named_before_the_saved_state() {
    let err = CircuitBreaker::builder()
        .half_open_probes(0)
        .restore_at(SavedState::new("db", State::Closed, t0()), t0())
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "half_open_probes");
}

#[test]
fn a_save_races_no_call_and_a_saved_state_restores_anywhere_a_live_one_would() {
    // Saving between the calls of several threads: each save restores.
    let clock = ManualClock::new();
    let b = consecutive(&clock).build().unwrap();
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                for i in 0..2_000 {
                    match i % 5 {
                        0 => fail(&b),
                        _ => _ = succeed(&b),
                    }
                }
            });
        }
        for _ in 0..200 {
            let saved = b.save_at(t0());
            assert!(consecutive(&clock).restore_at(saved, t0()).build().is_ok());
        }
    });
}

/// A half-open round at level 3, saved and restored in another process: a fresh
/// round of both probes at the same level, whose failed probe reopens at level 4,
/// as the live breaker's would.
#[test]
fn a_restored_half_open_round_keeps_its_level() {
    let builder = |clock: &ManualClock| {
        consecutive(clock)
            .half_open_probes(2)
            .max_open_duration(secs(600))
    };
    let clock = ManualClock::new();
    let old = builder(&clock).build().unwrap();
    for _ in 0..3 {
        fail(&old);
    }
    for _ in 0..3 {
        clock.advance(secs(600));
        old.try_acquire().unwrap().failure();
    }
    clock.advance(secs(600));
    let _probe = old.try_acquire().unwrap();
    let saved = old.save_at(t0());
    assert_eq!((saved.state, saved.level), (State::HalfOpen, 3));

    let new = builder(&ManualClock::new())
        .restore_at(saved, t0() + secs(5))
        .build()
        .unwrap();
    assert_eq!((new.state(), new.metrics().level), (State::HalfOpen, 3));
    let p = new.try_acquire().unwrap();
    let q = new.try_acquire().unwrap();
    assert!(new.try_acquire().is_err(), "a fresh round of two");
    p.failure();
    drop(q);
    assert_eq!(rejected_for(&new), Some(Some(secs(160))), "10 s * 2^4");
}

/// A Closed state restores at level 0 whatever level it carries: the next trip
/// waits the base cooldown.
#[test]
fn a_restored_closed_state_starts_at_level_zero() {
    let mut saved = SavedState::new("db", State::Closed, t0());
    saved.level = 5;
    let b = consecutive(&ManualClock::new())
        .restore_at(saved, t0())
        .build()
        .unwrap();
    assert_eq!(b.metrics().level, 0);
    for _ in 0..3 {
        fail(&b);
    }
    assert_eq!(rejected_for(&b), Some(Some(secs(10))));
}

/// Every state, built live, saved and restored at once and a century later: each
/// restores as its rule says (a ramp as Closed), saves again as that state, and
/// works: an Open one rejects until its deadline (long past a century later), a
/// Closed one keeps its streak.
#[test]
fn every_state_round_trips_at_once_and_a_century_later() {
    let century = secs(100 * 365 * 86_400);
    let states = [
        State::Closed,
        State::Open,
        State::HalfOpen,
        State::ForcedOpen,
        State::Disabled,
        State::Recovering,
    ];
    for state in states {
        for gap in [Duration::ZERO, century] {
            let clock = ManualClock::new();
            let builder = || {
                trips_after(2, secs(1))
                    .ramp_up(secs(10))
                    .clock(clock.clone())
            };
            let b = builder().build().unwrap();
            match state {
                State::Closed => fail(&b),
                State::Open => {
                    fail(&b);
                    fail(&b);
                }
                State::HalfOpen | State::Recovering => {
                    fail(&b);
                    fail(&b);
                    clock.advance(secs(1));
                    let p = b.try_acquire().unwrap();
                    if state == State::Recovering {
                        p.success();
                    } else {
                        std::mem::forget(p);
                    }
                }
                State::ForcedOpen => b.force_open(),
                _ => b.disable(),
            }
            assert_eq!(b.state(), state);
            let restored = builder()
                .restore_at(b.save_at(t0()), t0() + gap)
                .build()
                .unwrap_or_else(|e| panic!("{state:?} after {gap:?}: {e}"));
            let want = match state {
                State::Recovering => State::Closed,
                s => s,
            };
            assert_eq!(restored.state(), want, "{state:?} after {gap:?}");
            assert_eq!(restored.save_at(t0() + gap).state, want);
            match want {
                State::Open if gap.is_zero() => {
                    assert_eq!(rejected_for(&restored), Some(Some(secs(1))));
                }
                State::Open => assert!(succeed(&restored), "a century later it probes"),
                State::Closed => {
                    // The streak travelled (1 failure of 2 from Closed; the ramp's
                    // is empty): one or two more failures trip it.
                    fail(&restored);
                    if state == State::Recovering {
                        assert_eq!(restored.state(), State::Closed);
                        fail(&restored);
                    }
                    assert_eq!(restored.state(), State::Open, "{state:?} after {gap:?}");
                }
                _ => {}
            }
        }
    }
}

/// A breaker opened by `open_for` for an hour, or for `Duration::MAX` (saturated at
/// the clock's end): the saved deadline is the one `open_for` set, still
/// representable, and a restore keeps it Open, its deadline cut to the longest
/// cooldown (60 s here), never turned into "probe now".
#[test]
fn an_open_for_deadline_saves_as_set_and_restores_open() {
    for asked in [secs(3600), Duration::MAX] {
        let clock = ManualClock::new();
        let b = consecutive(&clock).build().unwrap();
        assert!(b.open_for(asked));
        let saved = b.save_at(t0());
        let until = saved
            .open_until
            .expect("an Open state carries its deadline");
        if asked == Duration::MAX {
            assert!(until > t0() + secs(100 * 365 * 86_400), "{until:?}");
        } else {
            assert_eq!(until, t0() + asked);
        }
        let clock = ManualClock::new();
        let r = consecutive(&clock).restore_at(saved, t0()).build().unwrap();
        assert_eq!(r.state(), State::Open, "{asked:?}");
        assert_eq!(rejected_for(&r), Some(Some(secs(60))), "{asked:?}");
        clock.advance(secs(60));
        assert!(succeed(&r), "{asked:?}");
    }
}

/// A restored window's totals may be as large as a `u64` holds (a `SavedState`
/// need not come from a real breaker; failures and slow calls within the calls).
/// They are put in a shared stripe's bucket, which holds at most `u32::MAX` of
/// each count, so the restore scales them down to half of that (2^31, leaving the
/// other half to the calls counted there after them), keeping their rates (rounded
/// up): the restore builds, later calls add to the scaled totals without
/// overflowing (a panic in a debug build), and the rate read is the restored one.
#[test]
fn huge_restored_window_totals_are_scaled_to_fit_keeping_their_rates() {
    const HALF: u64 = 1 << 31;
    const FULL: u64 = u32::MAX as u64;
    for (counts, fitted) in [
        (
            WindowCounts::new(u64::MAX, 0, 0),
            WindowCounts::new(HALF, 0, 0),
        ),
        (
            WindowCounts::new(u64::MAX, u64::MAX, u64::MAX),
            WindowCounts::new(HALF, HALF, HALF),
        ),
        (
            WindowCounts::new(u64::MAX - 1, 1, 0),
            WindowCounts::new(HALF, 1, 0),
        ),
        (
            WindowCounts::new(u64::MAX, u64::MAX / 4, u64::MAX / 8),
            WindowCounts::new(HALF, HALF / 4, HALF / 8),
        ),
        (
            WindowCounts::new(FULL, FULL / 3, 0),
            WindowCounts::new(HALF, HALF / 3 + 1, 0),
        ),
        (
            WindowCounts::new(HALF, HALF - 1, 7),
            WindowCounts::new(HALF, HALF - 1, 7),
        ),
    ] {
        let clock = ManualClock::new();
        let mut saved = SavedState::new("db", State::Closed, t0());
        saved.window = Some(SavedWindow::new(secs(10), 10, counts));
        let b = windowed(&clock, secs(10), 10)
            .restore_at(saved, t0())
            .build()
            .unwrap_or_else(|e| panic!("{counts:?}: {e}"));
        assert_eq!(b.metrics().window, fitted, "{counts:?}");
        // Another thread's call writes another stripe than the restored one.
        std::thread::scope(|s| {
            s.spawn(|| succeed(&b));
        });
        let _ = succeed(&b);
        assert_eq!(b.metrics().window.calls, fitted.calls + 2, "{counts:?}");
        // The rate read is the restored one (with the three calls since): a
        // failure trips where it reaches one half.
        fail(&b);
        let tripped = 2 * (fitted.failures + 1) >= fitted.calls + 3;
        let half = 2 * u128::from(counts.failures) >= u128::from(counts.calls);
        assert_eq!(tripped, half, "the restored rate {counts:?}");
        assert_eq!(b.state() == State::Open, tripped, "{counts:?}");
    }
}

/// A wall clock before the Unix epoch (a host with no RTC at boot): an Open state
/// saved there carries its deadline, and restored there (without serde, whose
/// format has no place for such times) rejects until that deadline.
#[test]
fn an_open_state_saved_and_restored_before_the_epoch_keeps_its_deadline() {
    let before = UNIX_EPOCH - secs(86_400);
    let clock = ManualClock::new();
    let old = consecutive(&clock).build().unwrap();
    for _ in 0..3 {
        fail(&old);
    }
    clock.advance(secs(3));
    let saved = old.save_at(before);
    assert_eq!(saved.state, State::Open);
    assert_eq!(saved.open_until, Some(before + secs(7)));

    let clock = ManualClock::new();
    let new = consecutive(&clock)
        .restore_at(saved, before + secs(2))
        .build()
        .unwrap();
    assert_eq!(rejected_for(&new), Some(Some(secs(5))));
    clock.advance(secs(5));
    assert!(succeed(&new), "the probe is admitted at the saved deadline");
}

/// An Open state whose deadline lies within this configuration's longest
/// cooldown, restored under full jitter at any level (0 to 63): the wait is the
/// saved deadline exactly, neither a jittered share of it nor the level's own
/// cooldown, and the probe is admitted then.
#[test]
fn a_restored_deadline_within_the_longest_cooldown_stands_whatever_the_level_and_jitter() {
    for level in [0u8, 1, 5, 63] {
        let clock = ManualClock::new();
        let mut saved = SavedState::new("db", State::Open, t0());
        saved.level = level;
        saved.open_until = Some(t0() + secs(4));
        let b = trips_after(1, secs(1))
            .max_open_duration(secs(30))
            .jitter(1.0)
            .clock(clock.clone())
            .restore_at(saved, t0())
            .build()
            .unwrap();
        assert_eq!(b.metrics().retry_after, Some(secs(4)), "level {level}");
        clock.advance(ms(3_999));
        assert!(rejected_for(&b).is_some(), "level {level}: 1 ms early");
        clock.advance(ms(1));
        assert!(b.try_acquire().is_ok(), "level {level}");
        assert_eq!(b.state(), State::HalfOpen);
    }
}

fn any_state() -> impl Strategy<Value = State> {
    prop_oneof![
        Just(State::Closed),
        Just(State::Open),
        Just(State::HalfOpen),
        Just(State::ForcedOpen),
        Just(State::Disabled),
    ]
}

/// Any wall-clock time within a few hundred years either side of the epoch.
fn any_time() -> impl Strategy<Value = SystemTime> {
    prop_oneof![
        1 => (0..u64::MAX / 2_000_000).prop_map(|ms| UNIX_EPOCH + Duration::from_millis(ms)),
        1 => (0..10_000_000_000u64).prop_map(|ms| UNIX_EPOCH - Duration::from_millis(ms)),
        4 => (0..200_000u64).prop_map(|ms| t0() + Duration::from_millis(ms)),
        4 => (0..200_000u64).prop_map(|ms| t0() - Duration::from_millis(ms)),
    ]
}

fn any_window() -> impl Strategy<Value = Option<SavedWindow>> {
    proptest::option::of(
        (
            any::<u64>(),
            any::<u32>(),
            0..1_000_000_000u64,
            any::<u32>(),
            any::<u64>(),
            any::<u64>(),
            any::<u64>(),
        )
            .prop_map(|(s, n, ns, buckets, calls, failures, slow)| {
                let length = match s % 3 {
                    0 => Duration::new(s, ns as u32),
                    _ => Duration::from_millis(s % 100_000),
                };
                let small = |x: u64| {
                    if calls % 2 == 0 {
                        x % (calls / 2 + 1)
                    } else {
                        x
                    }
                };
                let _ = n;
                SavedWindow::new(
                    length,
                    buckets % 20,
                    WindowCounts::new(
                        calls % 1_000_000,
                        small(failures) % 1_000_000,
                        small(slow) % 1_000_000,
                    ),
                )
            }),
    )
}

prop_compose! {
    fn any_saved()(
        version in prop_oneof![4 => Just(SavedState::VERSION), 1 => any::<u32>()],
        state in any_state(),
        saved_at in any_time(),
        level in prop_oneof![4 => 0..=63u8, 1 => any::<u8>()],
        open_until in proptest::option::weighted(0.8, any_time()),
        consecutive_failures in any::<u32>(),
        window in any_window(),
    ) -> SavedState {
        let mut s = SavedState::new("p", state, saved_at);
        s.version = version;
        s.level = level;
        s.open_until = open_until;
        s.consecutive_failures = consecutive_failures;
        s.window = window;
        s
    }
}

fn any_builder(clock: &ManualClock, which: u8) -> Builder<ManualClock> {
    match which % 4 {
        0 => consecutive(clock),
        1 => windowed(clock, secs(10), 10),
        2 => CircuitBreaker::builder()
            .consecutive_failures(2)
            .window(ms(100), 1)
            .failure_rate(0.2, 1)
            .slow_calls(ms(50), 0.5)
            .open_duration(ms(1))
            .max_open_duration(ms(1))
            .clock(clock.clone()),
        _ => CircuitBreaker::builder()
            .jitter(1.0)
            .half_open_probes(3)
            .clock(clock.clone()),
    }
}

proptest! {
    /// Any saved state: the restore either builds a breaker that works (its state
    /// by the rules, calls admitted or rejected, time moving it on) or names
    /// `restore` in its error. Never a panic.
    #[test]
    fn restoring_any_saved_state_builds_a_working_breaker_or_says_why_not(
        saved in any_saved(),
        now in any_time(),
        which in any::<u8>(),
        steps in proptest::collection::vec((any::<bool>(), 0..100_000u64), 0..12),
    ) {
        let clock = ManualClock::new();
        match any_builder(&clock, which).restore_at(saved.clone(), now).build() {
            Err(e) => prop_assert_eq!(e.field(), "restore"),
            Ok(b) => {
                prop_assert_eq!(saved.version, SavedState::VERSION);
                prop_assert!(saved.level <= 63);
                let expected = saved.state;
                prop_assert_eq!(b.state(), expected);
                prop_assert_eq!(b.metrics().generation, 0);
                for (ok, advance) in steps {
                    let _ = b.call(|| if ok { Ok(()) } else { Err(()) });
                    let _ = b.save_at(now);
                    clock.advance(Duration::from_millis(advance));
                }
                // Time ends every cooldown: after the longest (60 s here), a call
                // is admitted unless the breaker is forced open (a half-open round
                // timed out first reopens it: one more cooldown).
                let mut admitted = false;
                for _ in 0..2 {
                    clock.advance(secs(3600));
                    admitted = admitted || b.try_acquire().is_ok();
                }
                prop_assert!(admitted || b.state() == State::ForcedOpen, "{:?}", b);
            }
        }
    }
}

#[cfg(feature = "registry")]
mod registry {
    use super::*;
    use cutout::Registry;

    fn registry(clock: &ManualClock) -> Registry<String, ManualClock> {
        Registry::builder(consecutive(clock))
            .configure("cache".to_string(), windowed(clock, secs(10), 10))
            .build()
            .unwrap()
    }

    #[test]
    fn save_all_then_restore_all_carries_every_key() {
        let clock = ManualClock::new();
        let old = registry(&clock);
        for _ in 0..3 {
            let _ = old.call("db", || Err::<(), _>("down"));
        }
        let _ = old.call("cache", || Err::<(), _>("down"));
        old.get("search").force_open();
        let saved = old.save_all_at(t0());
        assert_eq!(saved.len(), 3);

        let new = registry(&ManualClock::new());
        new.get("db"); // replaced by the restore
        assert_eq!(new.restore_all_at(saved, t0() + secs(1)), Ok(3));
        assert_eq!(new.len(), 3);
        assert_eq!(new.get("db").state(), State::Open);
        assert_eq!(new.get("db").metrics().retry_after, Some(secs(9)));
        assert_eq!(new.get("search").state(), State::ForcedOpen);
        // "cache" was built from its own builder: its window came back.
        assert_eq!(new.get("cache").metrics().window.failures, 1);
    }

    #[test]
    fn restore_all_is_all_or_nothing() {
        let clock = ManualClock::new();
        let r = registry(&clock);
        let good = SavedState::new("a", State::ForcedOpen, t0());
        let mut bad = SavedState::new("b", State::Closed, t0());
        bad.level = 200;
        let err = r
            .restore_all_at([("a".to_string(), good), ("b".to_string(), bad)], t0())
            .unwrap_err();
        assert_eq!((err.0.as_str(), err.1.field()), ("b", "restore"));
        assert!(r.is_empty());
    }

    #[test]
    fn the_initial_state_hook_starts_each_new_key_and_a_bad_state_starts_fresh() {
        let now = SystemTime::now();
        let r: Registry<String> = Registry::builder(CircuitBreaker::builder())
            .initial_state(move |key: &String| match key.as_str() {
                "down" => {
                    let mut s = SavedState::new(key.as_str(), State::Open, now);
                    s.open_until = Some(now + secs(30));
                    Some(s)
                }
                "garbled" => {
                    let mut s = SavedState::new(key.as_str(), State::Open, now);
                    s.version = 7;
                    Some(s)
                }
                _ => None,
            })
            .build()
            .unwrap();
        assert_eq!(r.get("down").state(), State::Open);
        assert!(r.call("down", || Ok::<_, ()>(())).is_err());
        assert_eq!(r.get("garbled").state(), State::Closed);
        assert_eq!(r.get("other").state(), State::Closed);
    }

    #[test]
    fn a_registry_refuses_a_shared_builder_with_a_restore() {
        let saved = SavedState::new("x", State::Open, t0());
        let err = Registry::<String>::new(CircuitBreaker::builder().restore(saved)).unwrap_err();
        assert_eq!(err.field(), "restore");
        assert!(err.reason().contains("restore_all"), "{err}");
    }
    /// `restore_all` restores "by the rules of `Builder::restore`", with the
    /// registry's builder's `max_clock_skew`: a state saved 5 s ahead of this host
    /// is refused under a 1 s tolerance, as that builder's own restore refuses it,
    /// and nothing is restored.
    #[test]
    fn restore_all_refuses_a_state_past_the_builders_max_clock_skew() {
        let clock = ManualClock::new();
        let strict = || consecutive(&clock).max_clock_skew(secs(1));
        let saved = SavedState::new("db", State::ForcedOpen, t0() + secs(5));
        let err = strict()
            .restore_at(saved.clone(), t0())
            .build()
            .unwrap_err();
        assert_eq!(err.field(), "restore");

        let r: Registry<String, ManualClock> = Registry::new(strict()).unwrap();
        let err = r
            .restore_all_at([("db".to_string(), saved)], t0())
            .unwrap_err();
        assert_eq!((err.0.as_str(), err.1.field()), ("db", "restore"));
        assert!(r.is_empty());
    }

    /// The converse: a lenient tolerance (2 minutes) on the registry's builder
    /// lets `restore_all` restore a state saved 90 s ahead (past the default
    /// minute), as `Builder::restore` with it does.
    #[test]
    fn restore_all_accepts_a_state_within_the_builders_lenient_max_clock_skew() {
        let clock = ManualClock::new();
        let lenient = || consecutive(&clock).max_clock_skew(secs(120));
        let saved = SavedState::new("db", State::ForcedOpen, t0() + secs(90));
        assert!(lenient().restore_at(saved.clone(), t0()).build().is_ok());

        let r: Registry<String, ManualClock> = Registry::new(lenient()).unwrap();
        assert_eq!(
            r.restore_all_at([("db".to_string(), saved)], t0())
                .map_err(|(k, e)| (k, e.to_string())),
            Ok(1)
        );
        assert_eq!(r.get("db").state(), State::ForcedOpen);
    }
}

#[cfg(feature = "serde")]
mod serde_format {
    use super::*;

    /// Written by this version (`save_at` of the breakers in `fixture_states`).
    const FIXTURE: &str = include_str!("fixtures/saved_state_v1.json");

    fn fixture_states() -> Vec<SavedState> {
        let clock = ManualClock::new();
        let open = consecutive(&clock).build().unwrap();
        for _ in 0..3 {
            fail(&open);
        }
        clock.advance(ms(2_500));
        let closed = windowed(&clock, secs(10), 10)
            .name("cache")
            .build()
            .unwrap();
        assert!(succeed(&closed));
        fail(&closed);
        let forced = CircuitBreaker::builder().name("legacy").build().unwrap();
        forced.force_open();
        vec![
            open.save_at(t0()),
            closed.save_at(t0()),
            forced.save_at(t0()),
        ]
    }

    #[test]
    fn the_committed_fixture_decodes_to_what_this_version_saves() {
        let decoded: Vec<SavedState> = serde_json::from_str(FIXTURE).unwrap();
        assert_eq!(decoded, fixture_states());
        assert_eq!(decoded[0].open_until, Some(t0() + ms(7_500)));
        // And encodes to the same document: the format is stable.
        let fixture: serde_json::Value = serde_json::from_str(FIXTURE).unwrap();
        assert_eq!(serde_json::to_value(fixture_states()).unwrap(), fixture);
    }

    #[test]
    fn a_recovering_state_is_named_recovering_and_round_trips() {
        let saved = SavedState::new("db", State::Recovering, t0());
        let v = serde_json::to_value(&saved).unwrap();
        assert_eq!(v["state"], "recovering");
        assert_eq!(v["version"], 1, "adding a state name keeps the version");
        let back: SavedState = serde_json::from_value(v).unwrap();
        assert_eq!(back, saved);
    }

    #[test]
    fn the_format_is_the_documented_one() {
        let v = serde_json::to_value(&fixture_states()[0]).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "version": 1,
                "name": "db",
                "saved_at_ms": 1_800_000_000_000u64,
                "state": "open",
                "level": 0,
                "open_until_ms": 1_800_000_007_500u64,
                "consecutive_failures": 0,
            })
        );
    }

    #[test]
    fn missing_optional_fields_default_and_unknown_fields_are_ignored() {
        let s: SavedState = serde_json::from_str(
            r#"{"version":1,"name":"db","saved_at_ms":5,"state":"half_open","from_the_future":[1]}"#,
        )
        .unwrap();
        let mut expected = SavedState::new("db", State::HalfOpen, UNIX_EPOCH + ms(5));
        expected.level = 0;
        assert_eq!(s, expected);
    }

    #[test]
    fn an_unknown_version_decodes_and_the_restore_refuses_it() {
        let s: SavedState =
            serde_json::from_str(r#"{"version":2,"name":"db","saved_at_ms":5,"state":"closed"}"#)
                .unwrap();
        assert_eq!(s.version, 2);
        assert!(refusal(s, t0()).contains("format version 2"));
    }

    #[test]
    fn bad_documents_are_errors_not_panics() {
        for bad in [
            r#"{"version":1,"name":"db","saved_at_ms":5,"state":"ajar"}"#,
            r#"{"version":1,"name":"db","state":"closed"}"#,
            r#"{"version":1,"name":"db","saved_at_ms":-1,"state":"closed"}"#,
            r#"{"version":1,"name":"db","saved_at_ms":5,"state":"closed","level":300}"#,
            r#"[]"#,
        ] {
            assert!(serde_json::from_str::<SavedState>(bad).is_err(), "{bad}");
        }
        // A time before the epoch has no place in the format.
        let s = SavedState::new("db", State::Closed, UNIX_EPOCH - secs(1));
        let err = serde_json::to_string(&s).unwrap_err();
        assert!(err.to_string().contains("before the Unix epoch"), "{err}");
    }

    /// The largest window from a stored document: a JSON state whose window holds
    /// the largest `calls` a `u64` takes decodes and restores, scaled to half of
    /// what a shared bucket holds (2^31), and another thread's call adds to that.
    #[test]
    fn a_document_with_the_largest_window_totals_restores_scaled_to_fit() {
        let json = r#"{"version":1,"name":"db","saved_at_ms":1800000000000,"state":"closed",
            "window":{"length_ms":10000,"buckets":10,"calls":18446744073709551615,"failures":0,"slow":0}}"#;
        let saved: SavedState = serde_json::from_str(json).unwrap();
        assert_eq!(
            saved.window.map(|w| w.counts),
            Some(WindowCounts::new(u64::MAX, 0, 0))
        );
        let b = windowed(&ManualClock::new(), secs(10), 10)
            .restore_at(saved, t0())
            .build()
            .unwrap();
        std::thread::scope(|s| {
            s.spawn(|| succeed(&b));
        });
        assert_eq!(b.metrics().window.calls, (1 << 31) + 1);
    }

    proptest! {
        /// Every state with whole-millisecond times after the epoch round-trips
        /// exactly.
        #[test]
        fn json_round_trips(saved in any_saved()) {
            let whole = |t: SystemTime| {
                t.duration_since(UNIX_EPOCH)
                    .ok()
                    .map(|d| UNIX_EPOCH + Duration::from_millis(d.as_millis() as u64))
            };
            let mut saved = saved;
            let Some(at) = whole(saved.saved_at) else {
                return Ok(());
            };
            saved.saved_at = at;
            if let Some(until) = saved.open_until {
                let Some(until) = whole(until) else {
                    return Ok(());
                };
                saved.open_until = Some(until);
            }
            if let Some(w) = &mut saved.window {
                w.length = Duration::from_millis(w.length.as_millis() as u64);
            }
            let json = serde_json::to_string(&saved).unwrap();
            prop_assert_eq!(serde_json::from_str::<SavedState>(&json).unwrap(), saved);
        }
    }
}

/// A configuration reload that keeps a 10 s window in another number of buckets
/// takes the saved totals back (totals do not depend on the bucket count). A
/// window's buckets are whole nanoseconds, so 10 s in 3 buckets spans
/// 9.999999999 s: it was taken for shorter than the saved 10 s, and started
/// empty, for every bucket count that does not divide the length.
#[test]
fn a_window_of_the_same_length_in_other_buckets_takes_the_saved_totals() {
    let old = rate_window(secs(10), 10, 0.5, 100)
        .clock(ManualClock::new())
        .build()
        .unwrap();
    for _ in 0..5 {
        fail(&old);
    }
    let saved = old.save_at(t0());
    assert_eq!(saved.window.unwrap().length, secs(10));
    for buckets in [1, 2, 3, 6, 7, 10, 16] {
        let reloaded = rate_window(secs(10), buckets, 0.5, 100)
            .clock(ManualClock::new())
            .restore_at(saved.clone(), t0())
            .build()
            .unwrap();
        assert_eq!(
            reloaded.metrics().window,
            WindowCounts::new(5, 5, 0),
            "a 10 s window in {buckets} buckets lost the saved 10 s window's totals"
        );
    }
}

/// Saved below `minimum_calls` with a rate that trips there, a window restored
/// under the same settings trips on the success that brings it up to
/// `minimum_calls`, as the live breaker it was saved from does.
#[test]
fn a_restored_window_trips_on_the_success_that_reaches_minimum_calls() {
    let build = || {
        CircuitBreaker::builder()
            .window(secs(10), 10)
            .failure_rate(0.5, 4)
            .clock(ManualClock::new())
    };
    let live = build().build().unwrap();
    for _ in 0..3 {
        let _ = live.call(|| Err::<(), _>("down"));
    }
    let saved = live.save_at(t0());
    let restored = build().restore_at(saved, t0()).build().unwrap();
    for b in [&live, &restored] {
        assert_eq!(b.metrics().window.failures, 3);
        assert!(b.call(|| Ok::<_, ()>(())).is_ok());
        assert_eq!(b.state(), State::Open);
    }
}
