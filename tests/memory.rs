//! Memory follows use (DESIGN.md contract 22): a breaker holds the stripes of the
//! threads that wrote to it, not one per core. The machine's parallelism is
//! simulated (`cutout::simulate_parallelism`, for tests only): one test in its own
//! binary, so that it sets it before any breaker exists.

use cutout::{CircuitBreaker, Registry};

const KEYS: u64 = 100_000;
const LIMIT: usize = 200 << 20;
/// Resident memory also holds the map, the allocator's headers and the padding of
/// the 128-byte-aligned allocations (about 225 MB on glibc: see
/// `docs/PERFORMANCE.md`); checked against a looser bound, so the test does not
/// depend on the allocator, and still far below today's layout (3.4 GB).
const RESIDENT_LIMIT: usize = 256 << 20;

/// This process's resident memory, from `/proc` (Linux only).
fn resident_bytes() -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[test]
fn a_registry_of_100_000_keys_each_called_by_one_thread_stays_under_200_mb_at_64_cores() {
    assert!(cutout::simulate_parallelism(64), "before any breaker");
    let registry: Registry<u64> = Registry::new(CircuitBreaker::builder()).unwrap();
    let before = resident_bytes();
    for key in 0..KEYS {
        registry.call(&key, || Ok::<_, ()>(())).unwrap();
    }
    let after = resident_bytes();

    // One thread called each: each breaker holds one stripe, whatever the cores.
    let fresh = CircuitBreaker::builder().build().unwrap();
    let room = fresh.heap_bytes();
    std::thread::scope(|s| {
        s.spawn(|| fresh.call(|| Ok::<_, ()>(())).unwrap());
    });
    let one_stripe = fresh.heap_bytes() - room;
    let mut heap = 0;
    registry.for_each(|_, b| {
        assert_eq!(b.heap_bytes(), room + one_stripe);
        // The breaker in its `Arc`: the two counts take a whole 128-byte line.
        heap += b.heap_bytes() + size_of::<CircuitBreaker>() + 128;
    });
    eprintln!(
        "{KEYS} keys at 64 simulated cores: breakers and stripes {} MB ({} B a key: the \
         breaker {} B and its Arc's counts 128 B, the room for 68 stripes' pointers, the backoff table and the window's line {} B, \
         one stripe {} B); resident memory grew by {:?} MB",
        heap >> 20,
        heap / KEYS as usize,
        size_of::<CircuitBreaker>(),
        room,
        one_stripe,
        before.zip(after).map(|(b, a)| (a - b) >> 20)
    );
    assert!(heap < LIMIT, "{heap} bytes");
    if let (Some(before), Some(after)) = (before, after) {
        assert!(
            after - before < RESIDENT_LIMIT,
            "resident memory grew by {} bytes",
            after - before
        );
    }
}
