//! Small helpers more than one module needs: random seeds, the splitmix64 step,
//! and the saturating conversion of a `Duration` to nanoseconds.

use std::time::Duration;

/// One step of splitmix64: a counter-based PRNG, the same output for the same
/// input (the breaker's jitter relies on that: every thread computes the same
/// cooldown from the same word).
pub(crate) fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A random 64-bit seed: std's per-instance hash keys, which the OS seeds.
pub(crate) fn random_seed() -> u64 {
    use std::hash::BuildHasher;
    std::collections::hash_map::RandomState::new().hash_one(0x5eed_u16)
}

/// `d` in nanoseconds, saturated at `u64::MAX` (584 years).
pub(crate) fn saturating_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(all(test, not(cutout_loom)))]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_is_a_function_and_mixes() {
        assert_eq!(splitmix64(1), splitmix64(1));
        assert_ne!(splitmix64(1), splitmix64(2));
        // The reference value of splitmix64 from a state of 0.
        assert_eq!(splitmix64(0), 0xe220_a839_7b1d_cdaf);
        assert_ne!(
            random_seed(),
            random_seed(),
            "two seeds differ (2^-64 to fail)"
        );
    }

    #[test]
    fn nanoseconds_saturate() {
        assert_eq!(saturating_nanos(Duration::from_nanos(7)), 7);
        assert_eq!(saturating_nanos(Duration::MAX), u64::MAX);
    }
}
