//! How many live peers must report a key Open before this instance opens it too.

use std::num::NonZeroUsize;

/// How many live peers (other instances) must report a key Open before the local
/// breaker opens too.
///
/// The default, `AtLeast(2)`, is what makes one faulty instance unable to open the
/// fleet: its reports alone never reach the quorum. `AtLeast(1)` gives that up.
///
/// # Examples
/// ```
/// use cutout_fleet::Quorum;
/// use std::num::NonZeroUsize;
///
/// assert_eq!(Quorum::default().needed(10), 2);
/// let half = Quorum::Fraction { of_live: 0.5, at_least: NonZeroUsize::new(2).unwrap() };
/// assert_eq!(half.needed(9), 5); // 4 of 9 is under half
/// assert_eq!(half.needed(2), 2); // never fewer than `at_least`
/// // A whole share asks for exactly that share: 7 of 100, 2 of 3.
/// let one = NonZeroUsize::MIN;
/// assert_eq!(Quorum::Fraction { of_live: 0.07, at_least: one }.needed(100), 7);
/// assert_eq!(Quorum::Fraction { of_live: 2.0 / 3.0, at_least: one }.needed(3), 2);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Quorum {
    /// At least this many live peers.
    AtLeast(NonZeroUsize),
    /// At least this share (in (0, 1]) of the live peers, rounded up, and never
    /// fewer than `at_least`: the fewest peers `k` such that `k / live`, computed
    /// in `f64` (rounded to the nearest, as `of_live` itself is), is at least
    /// `of_live`. So a share that is exactly `k / live`, written as a decimal
    /// (`0.07` of 100) or a quotient (`2.0 / 3.0` of 3), asks for exactly `k`,
    /// although `0.07 * 100.0` is `7.000000000000001` in `f64`. With no live
    /// peer, `at_least`.
    Fraction {
        /// The share of live peers.
        of_live: f64,
        /// The floor.
        at_least: NonZeroUsize,
    },
}

const TWO: NonZeroUsize = match NonZeroUsize::new(2) {
    Some(n) => n,
    None => NonZeroUsize::MIN,
};

impl Default for Quorum {
    fn default() -> Quorum {
        Quorum::AtLeast(TWO)
    }
}

impl Quorum {
    /// How many reports make a quorum when `live_peers` peers are live. Never 0.
    pub fn needed(self, live_peers: usize) -> usize {
        match self {
            Quorum::AtLeast(k) => k.get(),
            Quorum::Fraction { of_live, at_least } => {
                share_of(of_live, live_peers).max(at_least.get())
            }
        }
    }

    pub(crate) fn is_valid(self) -> bool {
        match self {
            Quorum::AtLeast(_) => true,
            Quorum::Fraction { of_live, .. } => of_live > 0.0 && of_live <= 1.0,
        }
    }
}

/// The fewest of `live` peers whose share, `k / live` rounded to an `f64`, is at
/// least `of_live` (clamped to [0, 1]); 0 of none, and 0 for a NaN share (which
/// no valid `Quorum` has).
fn share_of(of_live: f64, live: usize) -> usize {
    if of_live.is_nan() {
        return 0;
    }
    let share = of_live.clamp(0.0, 1.0);
    let meets = |k: usize| k as f64 / live as f64 >= share;
    // The product's rounding puts its ceiling a peer or so off the answer
    // (`0.07 * 100.0` is `7.000000000000001`): an estimate (saturating, cut to
    // `live`), then corrected to the fewest `k` that meet the share. `meets`
    // only grows with `k`, and `k = live` meets any share (1.0), so both loops
    // end, after a step or none.
    let mut k = ((share * live as f64).ceil() as usize).min(live);
    while k > 0 && meets(k - 1) {
        k -= 1;
    }
    while k < live && !meets(k) {
        k += 1;
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE: NonZeroUsize = NonZeroUsize::MIN;

    fn fraction(of_live: f64) -> Quorum {
        Quorum::Fraction {
            of_live,
            at_least: ONE,
        }
    }

    /// A share in (0, 1] is valid, and a whole number of peers always is; zero,
    /// a share over 1 and NaN are not.
    #[test]
    fn a_fraction_is_valid_above_zero_up_to_one() {
        assert!(Quorum::AtLeast(ONE).is_valid());
        for share in [f64::MIN_POSITIVE, 0.5, 1.0] {
            assert!(fraction(share).is_valid(), "{share}");
        }
        for share in [0.0, -0.5, 1.0 + f64::EPSILON, 2.0, f64::NAN] {
            assert!(!fraction(share).is_valid(), "{share}");
        }
    }

    /// A share one ulp over `k / live`, whose product with `live` rounds back
    /// to `k`: the estimate is `k`, which `k / live` (rounded) falls short of,
    /// so the fewest peers that meet the share is `k + 1`.
    #[test]
    fn a_share_just_over_a_whole_one_asks_for_one_more() {
        for (k, live) in [(1, 3), (2, 3), (1, 6), (3, 7)] {
            let exact = k as f64 / live as f64;
            let share = f64::from_bits(exact.to_bits() + 1);
            assert_eq!((share * live as f64).ceil() as usize, k, "the estimate");
            assert_eq!(fraction(share).needed(live), k + 1, "{k} of {live}");
        }
    }
}
