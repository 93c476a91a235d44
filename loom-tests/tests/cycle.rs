//! Model 12: a thread that holds a word through a whole generation cycle.
//!
//! Under `--cfg cutout_tiny_generations` the generation is 3 bits wide, so the
//! tags of the time slot and the tagged words (the generation's low bits) come
//! round again after 8 transitions. A thread that read a word, then was paused
//! while another thread drove the breaker through 7 or 8 transitions, finds tags
//! that look like its own phase's (or its previous phase's) but belong to the
//! current one. Only the re-checks against the whole state word keep it from
//! acting on them; these models reach that case in a handful of transitions.
//!
//! Proves:
//! - A probe slot taken a cycle late. With N = 1, a thread asks for admission
//!   while the breaker is HalfOpen in generation 2, whose one probe is held;
//!   another thread fails that probe (Open, 3), resets five times (Closed, 4 to 0),
//!   trips (Open, 1), lets the cooldown pass, takes round 2's probe of the next
//!   cycle and drops it. The round of the next cycle is never wedged by the cycle
//!   before's (one of the two threads is admitted as its probe: the winner of the
//!   transition empties the round word, `TaggedWord::begin`), and a probe the late
//!   thread holds is one of the current round: its success closes the breaker
//!   (`take_probe` compares whole words, so a slot taken by a word a cycle old is
//!   given back and taken again for the current word).
//! - A claim a cycle late. A failure admitted in Closed (generation 0), a tick
//!   after the build, trips the breaker, or is paused between its load of the
//!   state word and its claim of the next phase's start while another thread
//!   force-opens, resets five times and trips (Open, 7). The paused candidate then
//!   finds the current phase's tag where it expects its previous phase's; it must
//!   not claim over the current start (`TimeSlot::claim` checks the state word
//!   first): the cooldown still ends on time and a probe is admitted. The same race
//!   within the build's tick gets past that check (the second model below says
//!   how); the current start it overwrites is put back by its first reader.
//! - A stale writer of the round word, behind a later round's first write. A
//!   thread asks twice while the breaker is HalfOpen in generation 2 (one slot,
//!   free), and another force-opens, resets, trips and takes round 6's probe after
//!   the cooldown. The late thread's first slot may land between the transition's
//!   read of the round word and its `begin`, whose CAS then fails: round 6's first
//!   write is the probe's, by `TaggedWord::update_in`. The late thread's second
//!   request reads that write, and must then see the state word past generation 2
//!   (the write's `Release` half) and write nothing: round 6 never admits a
//!   second probe. This one needs no wrap (two_rounds.rs is its sibling, whose
//!   first write of the later round is always `begin`'s).
//!
//! Each fails with its mutant: `take_probe` comparing only generations, or
//! returning `Taken` without the re-check ("round 2's probe ... closed nothing");
//! `begin` a no-op ("round 2 of the next cycle admitted no probe"); `claim`
//! without its check of the state word ("the cooldown ... did not end on time");
//! `phase_start` without `reclaim` (the same, in the same tick); `update_in`'s
//! success ordering `Acquire` ("2 probes admitted into round 6").

#![cfg(all(cutout_loom, cutout_tiny_generations))]

use cutout::{Reason, State};
use loom::thread;
use loom_tests::{OPEN, model, shared_breaker};
use std::time::Duration;

#[test]
fn a_probe_slot_taken_a_generation_cycle_late_is_the_current_rounds() {
    model(|| {
        let (clock, _events, breaker) = shared_breaker(|b| b.consecutive_failures(1));
        let _ = breaker.call(|| Err::<(), _>("down")); // Open, generation 1
        clock.advance(OPEN);
        // Round 2: its one probe is held by the driver.
        let probe = breaker.try_acquire_owned().unwrap();
        assert_eq!((probe.is_probe(), probe.generation()), (true, 2));

        let late = {
            let b = breaker.clone();
            thread::spawn(move || b.try_acquire_owned().ok())
        };
        let driver = {
            let (b, clock) = (breaker.clone(), clock.clone());
            thread::spawn(move || {
                probe.failure(); // Open, 3 (level 1); round 2 still holds its slot
                for _ in 0..5 {
                    b.reset(); // Closed, 4 to 0
                }
                let _ = b.call(|| Err::<(), _>("down")); // Open, 1 (level 0)
                clock.advance(OPEN);
                // HalfOpen, 2 again: a whole generation cycle on.
                let probe = b.try_acquire_owned().ok();
                probe.is_some_and(|p| p.is_probe()) // dropped: its slot comes back
            })
        };
        let late = late.join().unwrap();
        let driver_probe = driver.join().unwrap();

        let m = breaker.metrics();
        assert_eq!((m.state, m.generation), (State::HalfOpen, 2));
        assert_eq!(m.total_transitions(), 10);
        assert_eq!(m.transitions(Reason::CooldownElapsed), 2);
        let late_probe = late.as_ref().is_some_and(|p| p.is_probe());
        assert!(
            driver_probe || late_probe,
            "round 2 of the next cycle admitted no probe: the cycle before's slot wedged it"
        );
        match late {
            Some(p) if p.is_probe() => {
                assert_eq!(p.generation(), 2);
                p.success();
                assert_eq!(
                    breaker.state(),
                    State::Closed,
                    "round 2's probe, taken by a word a generation cycle old, closed nothing"
                );
            }
            other => {
                drop(other); // a call admitted in a closed phase of the way: stale
                let p = breaker
                    .try_acquire()
                    .expect("round 2's one slot is free again");
                assert!(p.is_probe());
                p.success();
                assert_eq!(breaker.state(), State::Closed);
            }
        }
    });
}

/// A failure admitted in Closed (generation 0) races a thread that force-opens,
/// resets five times and trips (Open, 7); with `tick`, every start is claimed a
/// millisecond after the one the breaker was built with.
fn late_claim(tick: bool) {
    model(move || {
        let (clock, _events, breaker) = shared_breaker(|b| b.consecutive_failures(1));
        let failure = breaker.try_acquire_owned().unwrap(); // Closed, generation 0
        if tick {
            clock.advance(Duration::from_millis(1));
        }

        // Trips (Open, 1), or is stale, or is paused in its trip's claim.
        let late = thread::spawn(move || failure.failure());
        let driver = {
            let b = breaker.clone();
            thread::spawn(move || {
                b.force_open(); // ForcedOpen
                for _ in 0..5 {
                    b.reset(); // Closed
                }
                let _ = b.call(|| Err::<(), _>("down")); // Open: 7, or 0 after the late trip
            })
        };
        late.join().unwrap();
        driver.join().unwrap();

        let m = breaker.metrics();
        let trips = m.transitions(Reason::ConsecutiveFailures);
        assert_eq!((m.state, m.level), (State::Open, 0));
        assert!((1..=2).contains(&trips), "{m:?}");
        assert_eq!(m.total_transitions(), 6 + trips);
        assert_eq!(u64::from(m.generation), (6 + trips) % 8);
        assert_eq!(m.retry_after, Some(OPEN));

        clock.advance(OPEN);
        assert_eq!(
            breaker.metrics().retry_after,
            Some(Duration::ZERO),
            "the cooldown of generation {} did not end on time",
            m.generation
        );
        let probe = breaker.try_acquire().expect("the cooldown has passed");
        assert!(probe.is_probe());
    });
}

#[test]
fn a_candidate_a_generation_cycle_late_does_not_claim_over_the_current_start() {
    late_claim(true);
}

/// The same race with every start claimed at the tick the breaker was built
/// with. The paused candidate loaded its next phase's word as the breaker was
/// built (tagged 7, the phase before generation 0, at the build's tick) and saw
/// the state word still at 0; the driver's trip to generation 7 then claims that
/// word with the very same bits (tag 7, the same tick), so the candidate's CAS,
/// made from the value it loaded, succeeds and overwrites generation 7's start.
/// The check of the state word comes before the CAS, and nothing ties the two:
/// the slot's value, tag and tick, comes back. Before, generation 7 then read as
/// over for ever: its cooldown never ended ("the cooldown of generation 7 did
/// not end on time"), and an admission spun in `admit_general` (loom: "Model
/// exceeded maximum number of branches"). Now the first reader of the current
/// phase that finds its start gone puts it back (`TimeSlot::reclaim`), as the
/// late candidate's clock read it: the build's tick, generation 7's own start.
#[test]
fn a_candidate_a_generation_cycle_late_in_the_same_tick() {
    late_claim(false);
}

#[test]
fn a_stale_writer_of_the_round_never_lets_a_second_probe_into_a_later_round() {
    model(|| {
        let (clock, _events, breaker) = shared_breaker(|b| b.consecutive_failures(1));
        let _ = breaker.call(|| Err::<(), _>("down")); // Open, generation 1
        clock.advance(OPEN);
        let probe = breaker.try_acquire_owned().unwrap(); // HalfOpen, 2
        assert!(probe.is_probe());

        let late = {
            let b = breaker.clone();
            thread::spawn(move || {
                let first = b.try_acquire_owned().ok();
                let second = b.try_acquire_owned().ok();
                (first, second)
            })
        };
        let driver = {
            let (b, clock) = (breaker.clone(), clock.clone());
            thread::spawn(move || {
                // Round 2's slot back. This thread's first call, so it takes its
                // stripe here: a thread takes one under the slot pool's lock, which
                // orders the later taker after all the earlier one did, and the late
                // thread must be free to take its own without seeing the moves below.
                drop(probe);
                b.force_open(); // 3
                b.reset(); // Closed, 4
                let _ = b.call(|| Err::<(), _>("down")); // Open, 5
                clock.advance(OPEN);
                b.try_acquire_owned().ok() // HalfOpen, 6
            })
        };
        let (first, second) = late.join().unwrap();
        let driver = driver.join().unwrap();
        let m = breaker.metrics();
        assert_eq!((m.state, m.generation), (State::HalfOpen, 6), "{m:?}");
        // Ask once more: the round is full if any probe of it is held.
        let last = breaker.try_acquire().ok();

        let in_round_6 = [&first, &second, &driver]
            .into_iter()
            .flatten()
            .filter(|p| p.is_probe() && p.generation() == 6)
            .count()
            + usize::from(last.as_ref().is_some_and(|p| p.is_probe()));
        assert!(in_round_6 <= 1, "{in_round_6} probes admitted into round 6");
        assert_eq!(
            in_round_6, 1,
            "round 6's slot is free, yet no probe took it"
        );
    });
}
