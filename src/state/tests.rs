use super::*;
use proptest::prelude::*;
use std::time::Duration;
use time_slot::{Claim, SLOT_TAG_BITS};

fn any_state() -> impl Strategy<Value = State> {
    prop_oneof![
        Just(State::Closed),
        Just(State::Open),
        Just(State::HalfOpen),
        Just(State::ForcedOpen),
        Just(State::Disabled),
        Just(State::Recovering),
    ]
}

/// A word at generation `g`, in state `state`.
fn word_at(state: State, g: Generation) -> StateWord {
    StateWord::at(Snapshot::pack(state, 0, g))
}

proptest! {
    #[test]
    fn pack_then_unpack_returns_every_field(
        state in any_state(),
        level in 0..=LEVEL_MAX,
        generation in 0..=GEN_MASK,
    ) {
        let s = Snapshot::pack(state, level, generation);
        prop_assert_eq!(s.state(), state);
        prop_assert_eq!(s.is_closed(), state == State::Closed);
        prop_assert_eq!(s.level(), level);
        prop_assert_eq!(s.generation(), generation);
    }

    #[test]
    fn a_round_round_trips(issued in 0..=HALF_MAX, succeeded in 0..=HALF_MAX) {
        let r = Round { issued, succeeded };
        prop_assert_eq!(Round::from_data(r.data()), r);
    }

    /// The tagged-word rule at any generation distance: another phase's data is
    /// an earlier phase's (empty) while the state word is at the caller's
    /// generation, and the caller is stale once the state word has moved on.
    #[test]
    fn another_generations_data_is_empty_or_the_caller_is_stale(
        tag in 0..=GEN_MASK,
        distance in 1..=GEN_MASK,
        data in 1..u32::MAX,
    ) {
        let mine = tag.wrapping_add(distance) & GEN_MASK;
        let t = TaggedWord::holding(tag, data);
        let current = word_at(State::Closed, mine);
        prop_assert_eq!(t.data_for(mine), 0);
        prop_assert_eq!(
            t.update(mine, &current, |d| Some(d + 1)),
            TagUpdate::Updated { old: 0, new: 1 }
        );
        prop_assert_eq!(t.data_for(mine), 1);
        // The word now holds `mine`'s data; a caller still at `tag` is stale.
        prop_assert_eq!(
            t.update(tag, &current, |d| Some(d + 1)),
            TagUpdate::Stale(current.load())
        );
        prop_assert_eq!(t.data_for(mine), 1);
    }

    #[test]
    fn a_start_tagged_for_another_phase_is_not_read_as_this_ones(
        g in 0..=GEN_MASK,
        ticks in 0..=TICKS_MAX,
    ) {
        let s = Snapshot::pack(State::Open, 0, g);
        let slot = TimeSlot::starting(s, ticks);
        prop_assert_eq!(slot.start_of(s), Some(ticks));
        let next = s.next(State::HalfOpen, 0);
        prop_assert_eq!(slot.start_of(next), None);
        prop_assert_eq!(slot.claim(&StateWord::at(s), s, next, 1), Some(1));
        prop_assert_eq!(slot.start_of(s.next(State::HalfOpen, 0).next(State::Open, 0)), None);
    }
}

#[test]
fn next_bumps_the_generation_and_wraps() {
    let s = Snapshot::pack(State::Open, 3, GEN_MASK);
    let n = s.next(State::HalfOpen, 3);
    assert_eq!(n.generation(), 0);
    assert_eq!((n.state(), n.level()), (State::HalfOpen, 3));
}

/// A whole generation cycle on, the same state, level and generation make
/// another word (and key): the cycles moved on. They wrap too, at 2^23.
#[test]
fn a_word_a_generation_cycle_later_is_another_phases() {
    let first = Snapshot::pack(State::Open, 0, 0);
    // The generation's last value, then a wrap: a cycle after `first`.
    let later = Snapshot::pack(State::HalfOpen, 0, GEN_MASK).next(State::Open, 0);
    assert_eq!(
        (later.state(), later.level(), later.generation()),
        (first.state(), first.level(), first.generation())
    );
    assert_ne!(later, first);
    assert!(!later.key().is(first.key().to_bits()));
    assert_eq!(later.cycles(), 1);
    assert_eq!(
        later.next(State::Closed, 0).cycles(),
        1,
        "no wrap, no cycle"
    );
    let last =
        Snapshot(Snapshot::pack(State::Closed, 0, GEN_MASK).0 | mask(CYCLE_BITS) << CYCLE_SHIFT);
    assert_eq!(last.next(State::Open, 0), first, "the cycles wrap too");
}

#[test]
fn a_clock_reading_never_passes_the_largest_tick() {
    assert_eq!(ticks_from_nanos(u64::MAX), TICKS_MAX);
    assert!(TICKS_MAX.checked_mul(NANOS_PER_TICK).is_some());
    assert_eq!(ticks_from_nanos(2_500_000), 2);
    assert_eq!(
        ticks_from_duration(std::time::Duration::from_secs(u64::MAX)),
        None
    );
}

#[test]
fn a_transition_claims_its_start_and_every_candidate_takes_the_first_claim() {
    let word = StateWord::new();
    let slot = TimeSlot::starting(Snapshot::INITIAL, 3);
    let seen = word.load();
    assert_eq!(slot.start_of(seen), Some(3));
    assert_eq!(
        word.transition(&slot, seen, false, |_| None),
        Update::Declined(seen)
    );
    // A candidate for another transition out of `seen` claimed 5 first.
    let other = seen.next(State::ForcedOpen, 0);
    assert_eq!(slot.claim(&word, seen, other, 5), Some(5));
    let Update::Moved { from, to, start } =
        word.transition(&slot, seen, false, |s| Some((s.next(State::Open, 0), 7)))
    else {
        panic!("the CAS on an unchanged word must succeed");
    };
    assert_eq!(
        (from, to.state(), word.load(), start),
        (seen, State::Open, to, 5)
    );
    assert_eq!(slot.start_of(to), Some(5));
    // The previous phase's start stays readable in the other word...
    assert_eq!(slot.start_of(seen), Some(3));
    // ...until the phase after `to` claims it: then `seen` reads as over.
    let after = to.next(State::HalfOpen, 0);
    assert_eq!(slot.claim(&word, to, after, 9), Some(9));
    assert_eq!(slot.start_of(seen), None);
    // A stale candidate still holding `seen` writes nothing.
    assert_eq!(
        slot.claim(&word, seen, to, 11),
        Some(5),
        "`to`'s claim stands"
    );
    word.0.store(after.0, Ordering::Relaxed);
    let later = after.next(State::Open, 0);
    assert_eq!(slot.claim(&word, after, later, 12), Some(12));
    assert_eq!(
        slot.claim(&word, seen, to, 13),
        None,
        "`to`'s word is a later phase's now"
    );
    assert_eq!(slot.start_of(later), Some(12));
}

/// The slot's tags are the generation's low 16 bits (all 3 bits of a tiny
/// generation), so a candidate still holding a word from a whole tag cycle ago
/// can find, in the word of its next phase's parity, the current phase's tag
/// where it expects its own previous phase's. It must not claim over the
/// current phase's start. Before, it did: its CAS of the state word then
/// failed, but the current phase read as over for ever, and every admission
/// spun in `admit_general` (a CI run with tiny generations hung so in
/// `tests/stress.rs`: the word at generation 3, its slot tagged 5).
#[test]
fn a_candidate_a_tag_cycle_old_does_not_claim_over_the_current_phase() {
    let current = Snapshot::pack(State::Open, 1, 3);
    let word = StateWord::at(current);
    let slot = TimeSlot::starting(current, 100);
    // Its previous phase's tag is generation 3's: a tag cycle (or, with tiny
    // generations, a generation cycle) after generation 4.
    let stale_generation = (4 + (1 << SLOT_TAG_BITS)) & u64::from(GEN_MASK);
    let stale = Snapshot::pack(State::HalfOpen, 1, stale_generation as Generation);
    assert_ne!(stale, current);
    let next = stale.next(State::Open, 2);
    assert_eq!(
        TimeSlot::tag(next),
        TimeSlot::tag(current.next(State::HalfOpen, 1).next(State::Open, 2))
    );
    assert_eq!(
        word.transition(&slot, stale, false, |cur| (cur == stale)
            .then_some((cur.next(State::Open, 2), 200))),
        Update::Declined(current)
    );
    assert_eq!(
        slot.start_of(current),
        Some(100),
        "the current phase's start stands"
    );
    assert_eq!(slot.claim(&word, stale, next, 300), None);
    assert_eq!(slot.start_of(current), Some(100));
    // The current phase still moves on, and claims with its own start.
    let Update::Moved { to, start, .. } = word.transition(&slot, current, false, |cur| {
        Some((cur.next(State::HalfOpen, 1), 400))
    }) else {
        panic!("an unchanged word moves");
    };
    assert_eq!((start, slot.start_of(to)), (400, Some(400)));
}

/// The case `claim`'s check cannot rule out: a candidate for `seen`'s next
/// phase loads that word (its previous phase's, started at tick 100), checks
/// the state word (still `seen`), and is paused; the breaker makes a whole tag
/// cycle of transitions in tick 100, so the current phase's claim wrote those
/// very bits, and the candidate's CAS lands on the current phase's start.
/// Before, that phase read as over for ever, and every admission spun in
/// `admit_general` (loom-tests/tests/cycle.rs reaches it with tiny
/// generations). A reader that finds it so puts the start back, no earlier
/// than it was; a reader whose phase really is over writes nothing.
#[test]
fn a_current_start_claimed_over_a_tag_cycle_late_is_put_back() {
    let seen = Snapshot::pack(State::Closed, 0, 1);
    let current = Snapshot::pack(
        State::Open,
        0,
        ((1u64 << SLOT_TAG_BITS) & u64::from(GEN_MASK)) as Generation,
    );
    assert_eq!(TimeSlot::tag(current), TimeSlot::previous(seen));
    let word = StateWord::at(current);
    let slot = TimeSlot::starting(current, 100);
    // The late candidate's CAS, from the bits it loaded a cycle ago, with the
    // clock reading it took then (tick 100: the tick the cycle ran in).
    let next = seen.next(State::Open, 0);
    let loaded = TimeSlot::pack(current, 100);
    assert_eq!(
        slot.word(next).compare_exchange(
            loaded,
            TimeSlot::pack(next, 100),
            Ordering::AcqRel,
            Ordering::Acquire
        ),
        Ok(loaded),
        "the same word as the current phase's"
    );
    assert_eq!(slot.start_of(current), None, "claimed over");
    assert_eq!(slot.reclaim(&word, current, 250), Some(100));
    assert_eq!(slot.start_of(current), Some(100), "put back as it was");
    assert_eq!(slot.reclaim(&word, current, 300), Some(100), "once");

    // Put back no later than the reader's clock (a late candidate's reading
    // can be no newer than the reader's, but a clock is the caller's).
    slot.word(current)
        .store(TimeSlot::pack(next, 400), Ordering::Relaxed);
    assert_eq!(slot.reclaim(&word, current, 350), Some(350));

    // A reader whose phase is over finds another tag too, and writes nothing.
    let over = current.next(State::HalfOpen, 0).next(State::Open, 0);
    slot.word(over)
        .store(TimeSlot::pack(over, 500), Ordering::Relaxed);
    word.0.store(over.0, Ordering::Relaxed);
    assert_eq!(slot.reclaim(&word, current, 600), None);
    assert_eq!(slot.start_of(over), Some(500));
}

/// A current start claimed over a tag cycle late, in a phase that no reader
/// reads before it ends (a reset, a force-open, a trip): the transition out of
/// it puts the start back, so the claim's tag, which is also the tag of the
/// phase after next, is not taken for that phase's start (an Open phase's
/// cooldown counted from the stale tick: over as it began).
#[test]
fn a_start_claimed_over_in_a_phase_nobody_reads_is_not_the_next_but_ones() {
    let seen = Snapshot::pack(State::Closed, 0, 1);
    let current = Snapshot::pack(
        State::ForcedOpen,
        0,
        ((1u64 << SLOT_TAG_BITS) & u64::from(GEN_MASK)) as Generation,
    );
    let word = StateWord::at(current);
    let slot = TimeSlot::starting(current, 100);
    let next = seen.next(State::Open, 0);
    let loaded = TimeSlot::pack(current, 100);
    let late = TimeSlot::pack(next, 100);
    let cas = slot
        .word(next)
        .compare_exchange(loaded, late, Ordering::AcqRel, Ordering::Acquire);
    assert!(cas.is_ok(), "the late claim lands");
    // A reset at tick 5,000, then a trip at 6,000: neither reads a start.
    let moved = |s: Snapshot, to: State, at: u64| match word
        .transition(&slot, s, false, |s| Some((s.next(to, 0), at)))
    {
        Update::Moved { to, start, .. } => (to, start),
        Update::Declined(_) => panic!("declined"),
    };
    let (closed, start) = moved(current, State::Closed, 5_000);
    assert_eq!(start, 5_000);
    let (open, start) = moved(closed, State::Open, 6_000);
    assert_eq!((start, slot.start_of(open)), (6_000, Some(6_000)));
}

/// Generation 0's previous phase is the last generation of the cycle, at any
/// width: before, a 3-bit generation's wrap made every transition out of
/// generation 0 look stale, and the transition loop spun for ever.
#[test]
fn a_transition_out_of_generation_zero_claims_across_the_wrap() {
    let last = Snapshot::pack(State::Closed, 0, GEN_MASK);
    let word = StateWord::at(last);
    let slot = TimeSlot::starting(last, 1);
    let mut seen = last;
    for round in 0..60 {
        let Update::Moved { to, start, .. } = word.transition(&slot, seen, false, |s| {
            Some((s.next(State::Closed, 0), round))
        }) else {
            panic!("an unchanged word moves");
        };
        assert_eq!((start, slot.start_of(to)), (round, Some(round)));
        seen = to;
    }
}

#[test]
fn a_reading_stands_for_a_reading_and_a_worked_out_start_only_for_itself() {
    let reading = Claim {
        start: 5,
        fixed: false,
    };
    let worked_out = Claim {
        start: 1_000,
        fixed: true,
    };
    assert!(
        reading.serves(7, false),
        "two threads' readings of one moment"
    );
    assert!(
        !reading.serves(1_000, true),
        "open_for would take a trip's deadline"
    );
    assert!(
        !worked_out.serves(5, false),
        "a trip would take open_for's deadline"
    );
    assert!(
        !worked_out.serves(2_000, true),
        "another open_for's deadline"
    );
    assert!(worked_out.serves(1_000, true));
}

/// A Closed word, its slot, and the Open word a trip or `open_for` makes of it.
fn closed_at_3() -> (StateWord, TimeSlot, Snapshot, Snapshot) {
    let word = StateWord::new();
    let slot = TimeSlot::starting(Snapshot::INITIAL, 3);
    let seen = word.load();
    (word, slot, seen, seen.next(State::Open, 0))
}

/// `open_for` (its start worked out: 1000) after a trip claimed its start (5):
/// taking 5 would open the breaker for the trip's cooldown and report it as
/// `open_for`'s. It waits for the trip's CAS and finds the breaker Open.
#[test]
fn a_worked_out_start_waits_for_a_reading_claimed_first() {
    let (word, slot, seen, open) = closed_at_3();
    assert_eq!(slot.claim(&word, seen, open, 5), Some(5));
    std::thread::scope(|s| {
        let open_for = s.spawn(|| {
            word.transition_claiming(&slot, seen, true, Duration::from_secs(60), |cur| {
                cur.is_closed().then_some((open, 1_000))
            })
        });
        // Real time: the trip's CAS lands while `open_for` waits (a moment here
        // only makes that likely; either order must give the same result).
        std::thread::sleep(Duration::from_millis(20));
        let trip = word.transition(&slot, seen, false, |cur| (cur == seen).then_some((open, 6)));
        assert_eq!(
            trip,
            Update::Moved {
                from: seen,
                to: open,
                start: 5
            }
        );
        assert_eq!(open_for.join().unwrap(), Update::Declined(open));
    });
    assert_eq!(slot.start_of(open), Some(5));
}

/// The other order: `open_for` claimed 1000 first, and a trip (a reading, 5)
/// waits for its CAS rather than open the breaker until `open_for`'s deadline.
#[test]
fn a_reading_waits_for_a_worked_out_start_claimed_first() {
    let (word, slot, seen, open) = closed_at_3();
    let claimed = slot.claim_start(&word, seen, open, 1_000, true);
    assert_eq!(
        claimed,
        Some(Claim {
            start: 1_000,
            fixed: true
        })
    );
    std::thread::scope(|s| {
        let trip = s.spawn(|| {
            word.transition_claiming(&slot, seen, false, Duration::from_secs(60), |cur| {
                (cur == seen).then_some((open, 5))
            })
        });
        std::thread::sleep(Duration::from_millis(20));
        let open_for = word.transition(&slot, seen, true, |cur| {
            cur.is_closed().then_some((open, 1_000))
        });
        assert_eq!(
            open_for,
            Update::Moved {
                from: seen,
                to: open,
                start: 1_000
            }
        );
        assert_eq!(trip.join().unwrap(), Update::Declined(open));
    });
    assert_eq!(slot.start_of(open), Some(1_000));
}

/// A candidate that claimed first and never makes its CAS (a thread a `fork` left
/// behind) is waited for only as long as the patience: then its start is taken.
#[test]
fn a_candidate_that_never_lands_is_waited_for_a_bounded_time() {
    let (word, slot, seen, open) = closed_at_3();
    assert_eq!(slot.claim(&word, seen, open, 5), Some(5));
    let update = word.transition_claiming(&slot, seen, true, Duration::ZERO, |cur| {
        cur.is_closed().then_some((open, 1_000))
    });
    assert_eq!(
        update,
        Update::Moved {
            from: seen,
            to: open,
            start: 5
        }
    );
}

#[test]
fn an_empty_word_of_an_earlier_phase_is_not_written() {
    let word = word_at(State::Closed, 5);
    let t = TaggedWord::holding(2, 0);
    assert_eq!(
        t.update(5, &word, |_| Some(0)),
        TagUpdate::Updated { old: 0, new: 0 }
    );
    assert_eq!(t.0.load(Ordering::Relaxed), TaggedWord::pack(2, 0));
    assert_eq!(t.update(5, &word, |_| None), TagUpdate::Declined(0));
}

#[test]
fn debug_prints_decoded_fields() {
    let s = Snapshot::pack(State::HalfOpen, 1, 5);
    assert_eq!(
        format!("{s:?}"),
        "Snapshot { state: HalfOpen, generation: 5, level: 1, cycles: 0 }"
    );
}
