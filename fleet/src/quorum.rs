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
/// assert_eq!(half.needed(9), 5); // ceil(0.5 * 9)
/// assert_eq!(half.needed(2), 2); // never fewer than `at_least`
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Quorum {
    /// At least this many live peers.
    AtLeast(NonZeroUsize),
    /// At least this share (in (0, 1]) of the live peers, rounded up, and never
    /// fewer than `at_least`.
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
                let share = (of_live.clamp(0.0, 1.0) * live_peers as f64).ceil();
                // `share` is in [0, live_peers]: the cast is exact.
                (share as usize).max(at_least.get())
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
