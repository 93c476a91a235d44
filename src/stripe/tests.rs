use super::*;

#[test]
fn threads_count_into_their_own_stripes_and_totals_are_exact() {
    let stripes = Stripes::new(0);
    std::thread::scope(|s| {
        for t in 0..8 {
            let stripes = &stripes;
            s.spawn(move || {
                // Half in their own stripes, half sharing two shared ones.
                let r = match t % 2 {
                    0 => stripes.mine(),
                    _ => stripes.stripe(t % 4 / 2),
                };
                for _ in 0..10_000 {
                    Stripes::bump(r, Counter::Successes);
                }
            });
        }
    });
    assert_eq!(stripes.total(Counter::Successes), 80_000);
    assert_eq!(stripes.total(Counter::Failures), 0);
}

#[test]
fn the_bucket_bound_keeps_a_breaker_within_its_byte_bounds() {
    assert_eq!(check_buckets(MAX_BUCKETS), Ok(()));
    assert!(check_buckets(MAX_BUCKETS + 1).is_err());
    assert!(check_buckets(u32::MAX).is_err());
    let largest = stripe_bytes(MAX_BUCKETS as usize).unwrap();
    assert!(largest <= MAX_STRIPE_BYTES && largest * MAX_STRIPES <= MAX_BREAKER_BYTES);
    // No size computation overflows, even for sizes no window may have.
    assert_eq!(stripe_bytes(usize::MAX), None);
    let stripes = Stripes::new(MAX_BUCKETS as usize);
    for index in 0..stripes.room.len() {
        let _ = stripes.stripe(index);
    }
    let room = stripes.room_bytes();
    assert_eq!(
        stripes.heap_bytes(),
        room + stripes.room.len() * largest,
        "every stripe allocated: the most a breaker can hold"
    );
    assert!(stripes.heap_bytes() <= MAX_BREAKER_BYTES);
}

#[test]
fn stripes_come_with_their_first_writer() {
    let stripes = Stripes::new(10);
    let room = stripes.room_bytes();
    assert_eq!(stripes.allocated(), 0);
    assert_eq!(stripes.heap_bytes(), room, "only the room for pointers");
    assert!(stripes.mine_if_owned().is_none(), "nothing written yet");
    let r = stripes.mine();
    Stripes::bump(r, Counter::Successes);
    let _ = stripes.mine();
    assert_eq!(stripes.allocated(), 1, "one stripe for one thread");
    assert_eq!(stripes.heap_bytes(), room + stripe_bytes(10).unwrap());
    std::thread::scope(|s| {
        s.spawn(|| Stripes::bump(stripes.mine(), Counter::Successes));
    });
    assert_eq!(stripes.allocated(), 2);
    assert_eq!(stripes.total(Counter::Successes), 2);
}

#[test]
fn readers_visit_exactly_the_stripes_that_exist_whatever_their_index() {
    // The most stripes a breaker has (64 owned: every bit of the word).
    let stripes = Stripes {
        room: Room::new(needed_lines(10), MAX_STRIPES),
        buckets: 10,
        stripe_lines: needed_lines(10),
        owned_bits: AtomicU64::new(0),
        shared_bits: AtomicU64::new(0),
    };
    let len = stripes.room.len();
    let visited = |s: &Stripes| -> Vec<u64> {
        // Each stripe's index, from its counter line.
        s.all()
            .map(|r| word(r.stripe, INDEX).load(Ordering::Relaxed))
            .collect()
    };
    assert_eq!(visited(&stripes), Vec::<u64>::new());
    // The last owned stripe (the highest bit), a middle one, a shared one:
    // shared first, then owned in index order, and nothing else.
    for index in [len - 1, SHARED + 1, 2] {
        Stripes::bump(stripes.stripe(index), Counter::Successes);
    }
    let want: Vec<u64> = [2, SHARED + 1, len - 1].map(|i| i as u64).to_vec();
    assert_eq!(visited(&stripes), want);
    assert_eq!(stripes.total(Counter::Successes), 3);
    // Written again, or found again, nothing changes.
    let _ = stripes.stripe(len - 1);
    assert_eq!(visited(&stripes), want);
    assert_eq!(stripes.allocated(), 3);
    // Every stripe, all 64 bits.
    for index in 0..len {
        let _ = stripes.stripe(index);
    }
    assert_eq!(visited(&stripes), (0..len as u64).collect::<Vec<_>>());
}

#[test]
fn bits_are_visited_lowest_first_and_the_top_bit_too() {
    assert_eq!(Bits(0).count(), 0);
    assert_eq!(Bits(1 << 63 | 1 << 5 | 1).collect::<Vec<_>>(), [0, 5, 63]);
    assert_eq!(Bits(u64::MAX).count(), 64);
}

#[test]
fn a_stripe_is_its_counter_line_and_its_ring() {
    let stripes = Stripes::new(10);
    let r = stripes.mine();
    Stripes::add(r, &stripes.bucket(r, 9)[1], 5);
    assert_eq!(stripes.bucket(r, 9)[1].load(Ordering::Relaxed), 5);
    assert_eq!(stripes.ring(r).len(), 3, "three lines of four buckets");
    // The counter line and three lines of four buckets: one allocation.
    assert_eq!(stripe_bytes(10), Some(4 * size_of::<Line>()));
    assert_eq!(stripes.lines(r).len(), 4);
}

#[test]
fn every_window_fits_the_smallest_class_that_holds_it_in_one_allocation() {
    assert!(CLASSES.windows(2).all(|w| w[0] < w[1]), "smallest first");
    for buckets in 0..=MAX_BUCKETS as usize {
        let needed = needed_lines(buckets);
        let lines = class_lines(buckets).expect("every allowed window has a class");
        assert!(lines >= needed, "{buckets} buckets");
        // Exact up to 64 buckets (and the summary), then at most 1.5 times the
        // ring.
        let (ring, needed_ring) = (lines - 1, needed - 1);
        assert!(
            ring == needed_ring || needed_ring > 17 && 2 * ring <= 3 * needed_ring,
            "{buckets} buckets in {lines} lines"
        );
    }
    // The largest class is the largest window's, no larger.
    assert_eq!(
        Some(needed_lines(MAX_BUCKETS as usize)),
        CLASSES.last().copied()
    );
    assert_eq!(class_lines(MAX_BUCKETS as usize + LINE_BUCKETS), None);
    for buckets in [1, 4, 5, 10, 60, 64, 65, 100, 1000, MAX_BUCKETS as usize] {
        let stripes = Stripes::new(buckets);
        let r = stripes.mine();
        assert_eq!(stripes.lines(r).len(), class_lines(buckets).unwrap());
        assert_eq!(stripes.ring(r).len(), needed_lines(buckets) - 1);
        // Every bucket is its own, in the stripe's lines.
        for b in 0..buckets {
            Stripes::add(r, &stripes.bucket(r, b)[1], b as u64 + 1);
        }
        let written: Vec<u64> = stripes
            .ring(r)
            .slots()
            .map(|bucket| bucket[1].load(Ordering::Relaxed))
            .collect();
        assert_eq!(
            written[..buckets],
            (1..=buckets as u64).collect::<Vec<_>>()[..]
        );
        assert!(
            written[buckets..].iter().all(|&w| w == 0),
            "the rest unwritten"
        );
        assert_eq!(
            stripes.heap_bytes(),
            stripes.room_bytes() + stripe_bytes(buckets).unwrap()
        );
        assert_eq!(Stripes::scratch(r, 0).load(Ordering::Relaxed), 0, "apart");
    }
}

#[test]
fn the_largest_stripe_is_built_on_the_heap_not_on_the_callers_stack() {
    // 128 KiB of lines (1,025 of 128 bytes), on the first call of a thread with
    // a 64 KiB stack: an array built by value and then boxed would overflow it
    // (and abort).
    let stripes = Stripes::new(MAX_BUCKETS as usize);
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn_scoped(s, || Stripes::bump(stripes.mine(), Counter::Successes))
            .unwrap()
            .join()
            .unwrap();
    });
    assert_eq!(stripes.total(Counter::Successes), 1);
    assert!(stripe_bytes(MAX_BUCKETS as usize).unwrap() > 2 * 64 * 1024);
}
