//! Tagged words: one phase's data beside the state word.
//! The half-open round and the consecutive-failure streak are [`TaggedWord`]s: 32
//! bits of data tagged with the generation they belong to (so are the counts of the
//! shared stripes' window buckets: see [`crate::window`]). One rule decides what a
//! tag means, at any generation distance: a tag equal to the caller's generation is
//! its phase's data; any other tag is an earlier phase's (empty for this one)
//! unless the state word has moved past the caller's generation, in which case the
//! caller is the stale one and writes nothing.

use super::*;

/// What [`TaggedWord::update`] did.
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TagUpdate {
    /// The word now holds `new` for the caller's generation (it held `old`).
    Updated { old: u32, new: u32 },
    /// The closure declined the caller's data, which is returned.
    Declined(u32),
    /// The breaker has moved past the caller's generation (to the word returned):
    /// nothing was written.
    Stale(Snapshot),
}

/// 32 bits of one phase's data tagged with that phase's generation: the half-open
/// round and the consecutive-failure streak. See the module docs for the rule.
///
/// ```text
///  63               32 31               0
/// +-------------------+------------------+
/// |  generation (32)  |     data (32)    |
/// +-------------------+------------------+
/// ```
pub(crate) struct TaggedWord(pub(super) AtomicU64);

impl TaggedWord {
    /// Generation 0, no data: empty for every phase.
    pub(crate) fn new() -> TaggedWord {
        TaggedWord(AtomicU64::new(0))
    }

    #[inline]
    pub(super) fn pack(generation: Generation, data: u32) -> u64 {
        u64::from(generation) << 32 | u64::from(data)
    }

    /// Whether the data is 0, whatever its phase: empty for every phase. `Relaxed`,
    /// for the lean path's check: a stale non-empty read only sends the call to the
    /// general path, and a stale empty read orders the racing write after it.
    #[inline]
    pub(crate) fn is_empty_relaxed(&self) -> bool {
        // Relaxed: see above.
        self.0.load(Ordering::Relaxed) as u32 == 0
    }

    /// The data if it is `generation`'s, else 0. A read only: it cannot tell an
    /// earlier phase's data from a later one's, and needs not (both are not
    /// `generation`'s).
    #[inline]
    pub(crate) fn data_for(&self, generation: Generation) -> u32 {
        TaggedWord::data_in(&self.0, generation)
    }

    /// [`data_for`](Self::data_for) on a tagged word kept elsewhere: a count of a
    /// shared stripe's window bucket (see [`crate::window`]).
    #[inline]
    pub(crate) fn data_in(tagged: &AtomicU64, generation: Generation) -> u32 {
        // Acquire: pairs with the Release of the CAS that wrote it.
        let raw = tagged.load(Ordering::Acquire);
        if (raw >> 32) as Generation == generation {
            raw as u32
        } else {
            0
        }
    }

    /// The one update of a tagged word: offers `f` the data of `generation` (0 if
    /// the word holds an earlier phase's) until it declines or this thread's CAS
    /// installs its answer. Writes nothing if `word` has moved past `generation`,
    /// or if the word already reads as the answer.
    pub(crate) fn update(
        &self,
        generation: Generation,
        word: &StateWord,
        f: impl FnMut(u32) -> Option<u32>,
    ) -> TagUpdate {
        TaggedWord::update_in(&self.0, generation, word, f)
    }

    /// [`update`](Self::update) on a tagged word kept elsewhere: a count of a
    /// shared stripe's window bucket (see [`crate::window`]).
    pub(crate) fn update_in(
        tagged: &AtomicU64,
        generation: Generation,
        word: &StateWord,
        mut f: impl FnMut(u32) -> Option<u32>,
    ) -> TagUpdate {
        // Acquire: pairs with the Release of the CAS that wrote it, so a later
        // phase's tag seen here implies that phase (or a newer one) in `word`.
        let mut seen = tagged.load(Ordering::Acquire);
        loop {
            let mine = (seen >> 32) as Generation == generation;
            let data = if mine {
                seen as u32
            } else {
                // Another phase's data. Earlier, unless the breaker has moved on.
                let cur = word.load();
                if cur.generation() != generation {
                    return TagUpdate::Stale(cur);
                }
                0
            };
            let Some(new) = f(data) else {
                return TagUpdate::Declined(data);
            };
            // Already reads as `new` for this phase: nothing to write (an earlier
            // phase's empty word is empty for this one too).
            if new == data && (mine || seen as u32 == 0) {
                return TagUpdate::Updated { old: data, new };
            }
            // AcqRel: Release publishes the data with its tag (see the module's
            // Orderings); Acquire hands back a newer word.
            match tagged.compare_exchange(
                seen,
                TaggedWord::pack(generation, new),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return TagUpdate::Updated { old: data, new },
                Err(actual) => seen = actual,
            }
        }
    }

    /// Makes a tagged word kept elsewhere that is generation `from`'s, empty or
    /// not, an empty word of generation `to` (whatever the state word says), and
    /// leaves a word of any other generation as it is: how a rotation of a shared
    /// stripe's window bucket claims the counts of the tag it replaced (see
    /// [`crate::window`]). An empty word of `from` is claimed too when `to` is
    /// another generation: left as it was, a delayed writer of `from` could still
    /// count in it, unchecked (its own generation's word), under a later tag.
    pub(crate) fn empty_in(tagged: &AtomicU64, from: Generation, to: Generation) {
        let empty = TaggedWord::pack(to, 0);
        // Acquire: as every load.
        let mut seen = tagged.load(Ordering::Acquire);
        while (seen >> 32) as Generation == from && seen != empty {
            // AcqRel: as in `update`.
            match tagged.compare_exchange(seen, empty, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return,
                Err(actual) => seen = actual,
            }
        }
    }

    /// The word as it is, for [`begin`](Self::begin). `Acquire`: as every load.
    #[inline]
    pub(crate) fn raw(&self) -> u64 {
        // Acquire: pairs with the Release of the CAS that wrote it.
        self.0.load(Ordering::Acquire)
    }

    /// Starts `generation`'s phase with empty data, if the word still holds `seen`
    /// (what the transition's winner read just before its CAS): a write since then
    /// is the new phase's own, and stays. The staleness rule alone already reads an
    /// earlier phase's data as empty; this also empties data a whole generation
    /// cycle old, whose tag the rule cannot tell from the current one.
    pub(crate) fn begin(&self, seen: u64, generation: Generation) {
        let fresh = TaggedWord::pack(generation, 0);
        if seen != fresh {
            // AcqRel: as in `update`. A failure means the word moved on: leave it.
            let _ = self
                .0
                .compare_exchange(seen, fresh, Ordering::AcqRel, Ordering::Acquire);
        }
    }

    /// A word holding `data` for `generation` (tests and restored breakers).
    pub(crate) fn holding(generation: Generation, data: u32) -> TaggedWord {
        TaggedWord(AtomicU64::new(TaggedWord::pack(generation, data)))
    }
}

/// The half-open round's data: probes issued and succeeded, 16 bits each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Round {
    pub(crate) issued: u32,
    pub(crate) succeeded: u32,
}

impl Round {
    #[inline]
    pub(crate) fn from_data(data: u32) -> Round {
        Round {
            issued: data >> 16,
            succeeded: data & 0xFFFF,
        }
    }

    #[inline]
    pub(crate) fn data(self) -> u32 {
        debug_assert!(self.issued <= HALF_MAX && self.succeeded <= HALF_MAX);
        self.issued << 16 | self.succeeded
    }
}

/// The largest probe count a [`Round`] can hold; it bounds `half_open_probes`.
pub(crate) const HALF_MAX: u32 = 0xFFFF;
