//! Progressive recovery ([`Builder::ramp_up`](crate::Builder::ramp_up)): the share
//! of calls a [`Recovering`](crate::State::Recovering) breaker admits, and the
//! admission decision. Pure schedule, no clock: the breaker hands in the ticks.
//!
//! # The schedule
//! A share is a fixed-point fraction of [`ONE`] (2^16). It rises linearly, every
//! tick (millisecond), from [`START`] (10%) when the ramp begins to [`ONE`] at its
//! end: `START + (ONE - START) * elapsed / ramp`.
//!
//! # The decision
//! Each thread keeps, per breaker, a running sum of the shares of the calls it
//! asked to make during ramps. A call adds the current share and is admitted when
//! the sum passes a multiple of [`ONE`]: a whole call's worth of share. So over
//! any run of consecutive calls the admitted count is the sum of their shares,
//! within one call (a Bresenham line, or a sigma-delta modulator): within 0.1
//! percentage points of the schedule over 1,000 calls, whatever the schedule did
//! meanwhile.
//!
//! The sums live in a small thread-local table of [`RAMP_SUMS`] entries, one per
//! breaker, keyed by the address of the calling thread's stripe of it (a stripe's
//! counter line has no word to spare: see [`crate::stripe`]) mixed with the
//! breaker's random seed, so that a breaker built where a dropped one was (the
//! allocator may give its stripe the same address) never takes the dropped one's
//! sum for its own. The table is direct-mapped, and a dropped breaker's entries
//! stay until another key takes their place. A sum that starts in an empty entry
//! starts one short of a whole call, so a thread's first call in its first ramps
//! is admitted; one that takes another key's entry (a thread that alternates
//! between ramping breakers whose entries collide, or a new breaker in the entry
//! of a dropped one) starts at a pseudo-random fraction of a call, so it admits
//! its next call with probability equal to the share: the schedule holds on
//! average, with the spread of random sampling instead of one call. Either way no shared cache line is
//! written and no locked instruction is issued. Only a thread whose thread-locals
//! are already torn down (a permit dropped by a destructor), which then writes a
//! shared stripe, uses that stripe's sum ([`START_OR_RAMP_SUM`], a word the window leaves
//! alone on shared stripes), with a `fetch_add`.
//!
//! A sum is left as it is between ramps (it is only ever read by the next
//! decision, and the fraction of a call it carries is as good a start as any).
//!
//! # Orderings
//! The sum is `Relaxed`: it publishes nothing, and each decision needs only its
//! own read-modify-write to be atomic (on the shared stripe) or unobserved by any
//! other writer (on an owned one).

use crate::stripe::START_OR_RAMP_SUM;
use crate::stripe::{StripeRef, Stripes};
use crate::sync::{Ordering, RAMP_SUMS, with_ramp_sums};
use crate::util::splitmix64;

/// A whole call: shares are fractions of this.
pub(crate) const ONE: u64 = 1 << 16;
/// The share admitted when a ramp begins: 10% (of [`ONE`], rounded up).
pub(crate) const START: u64 = ONE.div_ceil(10);
/// What a fresh stripe's sum reads as: one short of a whole call, so its first
/// call is admitted.
const BIAS: u64 = ONE - 1;

/// The share admitted `elapsed` ticks into a ramp of `ramp` ticks (`ramp > 0`):
/// [`START`] at 0, rising linearly to [`ONE`] at `ramp` and after it.
#[inline]
pub(crate) fn share(elapsed: u64, ramp: u64) -> u64 {
    if elapsed >= ramp {
        return ONE;
    }
    // `elapsed < ramp <= TICKS_MAX` (< 2^44), so the product is below 2^60.
    START + (ONE - START) * elapsed / ramp.max(1)
}

/// Whether the call at `share` is admitted, deciding on stripe `r` (the calling
/// thread's) of the breaker whose seed is `seed`: adds `share` to the thread's sum
/// for this breaker and says whether it passed a multiple of [`ONE`].
#[inline]
pub(crate) fn admit(r: StripeRef<'_>, seed: u64, share: u64) -> bool {
    let sum = Stripes::scratch(r, START_OR_RAMP_SUM);
    let key = (sum as *const _ as u64) ^ seed;
    let before = match (local(key, share), r.as_owned()) {
        (Some(before), _) => before,
        // An owner without thread-locals any more: its last calls are admitted.
        (None, Some(_)) => return true,
        // Relaxed: see the module's Orderings.
        (None, None) => sum.fetch_add(share, Ordering::Relaxed),
    };
    crossed(before, share)
}

/// Whether adding `share` to a sum of `before` passes a multiple of [`ONE`] (the
/// sum read as [`BIAS`] more than it holds).
#[inline]
fn crossed(before: u64, share: u64) -> bool {
    let before = before.wrapping_add(BIAS);
    // Wrapping is harmless: 2^64 is a multiple of ONE.
    before / ONE != before.wrapping_add(share) / ONE
}

/// Adds `share` to the calling thread's own sum for the breaker and stripe `key`
/// names (see [`admit`]), and returns the sum before; `None` if the thread has no
/// table (see [`with_ramp_sums`]).
#[cold]
#[inline(never)]
fn local(key: u64, share: u64) -> Option<u64> {
    with_ramp_sums(|table| {
        let mut sums = table.get();
        let mixed = splitmix64(key);
        let entry = &mut sums[(mixed % RAMP_SUMS as u64) as usize];
        if entry.0 != key {
            // A fresh sum. In an empty entry it starts one short of a whole call
            // (its first call is admitted: what a thread's first ramp on a breaker
            // does, exactly). In place of another breaker's, it starts at a
            // pseudo-random fraction of a call, so that breakers that keep evicting
            // each other admit each call with probability `share`, not every first
            // call after an eviction.
            let start = match entry.0 {
                0 => 0,
                _ => splitmix64(mixed ^ entry.1),
            };
            *entry = (key, start);
        }
        let before = entry.1;
        entry.1 = before.wrapping_add(share);
        table.set(sums);
        before
    })
}

/// Runs `f` with the calling thread's ramp sums empty, as on a thread of its
/// own, and puts them back after (even if `f` panics): a replay's draws then
/// depend on its own calls alone, whatever ran on the thread before.
#[cfg(feature = "replay")]
pub(crate) fn with_fresh_sums<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(Option<[(u64, u64); RAMP_SUMS]>);
    impl Drop for Restore {
        fn drop(&mut self) {
            if let Some(saved) = self.0 {
                with_ramp_sums(|table| table.set(saved));
            }
        }
    }
    let _restore = Restore(with_ramp_sums(|table| table.replace([(0, 0); RAMP_SUMS])));
    f()
}

#[cfg(all(test, not(cutout_loom)))]
mod tests {
    use super::*;
    use crate::stripe::Stripes;

    #[test]
    fn the_share_rises_from_ten_percent_to_all() {
        assert_eq!(share(0, 1000), START);
        assert!((START as f64 / ONE as f64 - 0.1).abs() < 1e-4);
        assert_eq!(share(500, 1000), START + (ONE - START) / 2);
        assert!(share(999, 1000) < ONE);
        assert_eq!(share(1000, 1000), ONE);
        assert_eq!(share(u64::MAX, 1), ONE);
        // The longest ramp the word holds does not overflow.
        let max = crate::state::TICKS_MAX;
        assert!(share(max - 1, max) < ONE);
    }

    /// The admitted count over every run of `len` consecutive decisions is within
    /// one call of the sum of their shares.
    fn assert_tracks(shares: &[u64], admitted: &[bool], len: usize) {
        for (start, (s, a)) in shares.windows(len).zip(admitted.windows(len)).enumerate() {
            let scheduled = s.iter().sum::<u64>() as f64 / ONE as f64;
            let got = a.iter().filter(|&&x| x).count() as f64;
            assert!(
                (got - scheduled).abs() <= 1.0,
                "calls {start}..{}: {got} admitted, {scheduled} scheduled",
                start + len
            );
        }
    }

    #[test]
    fn every_run_of_calls_is_admitted_in_its_share_on_either_kind_of_stripe() {
        let stripes = Stripes::new(0);
        // A schedule that rises, jumps and falls: any shares at all.
        let shares: Vec<u64> = (0..5000u64)
            .map(|i| match i {
                0..2000 => share(i, 2000),
                2000..3000 => START,
                _ => (i * 7919) % ONE,
            })
            .collect();
        // An owned stripe, and a thread that owns none (its thread-local table).
        for r in [stripes.stripe(crate::stripe::SHARED), stripes.stripe(0)] {
            let admitted: Vec<bool> = shares.iter().map(|&s| admit(r, 7, s)).collect();
            assert_tracks(&shares, &admitted, 1000);
            assert_tracks(&shares, &admitted, 10);
        }
        assert_eq!(
            Stripes::scratch(stripes.stripe(0), START_OR_RAMP_SUM).load(Ordering::Relaxed),
            0,
            "a thread that owns no stripe wrote nothing shared"
        );
        let owned = stripes.stripe(crate::stripe::SHARED);
        assert!(admit(owned, 7, ONE), "a full share admits every call");
        assert!(!admit(owned, 7, 0), "a zero share admits none");
    }

    #[test]
    fn threads_without_a_stripe_keep_a_sum_per_breaker() {
        // Alternating between 2 breakers at 50%, and between 8 (more than the
        // table holds, so some collide and restart): each breaker gets half of
        // its calls (one sum for all would give one breaker every call and the
        // other none; a sum restarted at a fixed point, every call). Restarted sums
        // admit at random, with a standard deviation of 16 calls in 1000.
        for n in [2, 8] {
            let breakers: Vec<Stripes> = (0..n).map(|_| Stripes::new(0)).collect();
            let mut admitted = vec![0; n];
            for _ in 0..1000 {
                for (i, s) in breakers.iter().enumerate() {
                    admitted[i] += usize::from(admit(s.stripe(0), 7, ONE / 2));
                }
            }
            assert!(
                admitted.iter().all(|&a| a.abs_diff(500) <= 100),
                "{n} breakers: {admitted:?}"
            );
        }
    }

    /// A breaker built where a dropped one was may find its stripes at the same
    /// addresses: its sums are its own, keyed by its seed too. Before, it went on
    /// from the dropped breaker's sum, and its first call in a ramp was rejected
    /// (here: always, the sum being just past a whole call).
    #[test]
    fn a_stripe_address_used_again_by_another_breaker_starts_a_fresh_sum() {
        std::thread::spawn(|| {
            let stripes = Stripes::new(0);
            let r = stripes.stripe(crate::stripe::SHARED);
            let key = |seed: u64| Stripes::scratch(r, START_OR_RAMP_SUM) as *const _ as u64 ^ seed;
            let slot = |seed: u64| splitmix64(key(seed)) % RAMP_SUMS as u64;
            // A second seed whose entry is another (this thread's table is empty).
            let second = (2..).find(|&seed| slot(seed) != slot(1)).unwrap();
            assert!(admit(r, 1, START), "the first breaker's first call");
            assert!(!admit(r, 1, START), "its next one, at 10%");
            assert!(admit(r, second, START), "the second breaker's first call");
            assert!(!admit(r, second, START));
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_sum_passes_a_whole_call_exactly_when_it_crosses_a_multiple() {
        assert!(crossed(0, 1), "a fresh sum: the first call");
        assert!(!crossed(1, ONE - 1));
        assert!(crossed(1, ONE));
        assert!(crossed(u64::MAX - BIAS, 1), "across the wrap");
    }
}
