//! The stripes' size classes and the bounds on a breaker's memory (see the
//! parent module's Limits).

use super::*;

/// The most buckets a window may have: a reader sums them all, in every stripe,
/// whenever a failure is recorded, so far fewer is faster.
pub(crate) const MAX_BUCKETS: u32 = 4096;
/// The shared stripes: the threads beyond the owned stripes spread over them.
pub(crate) const SHARED: usize = 4;
/// The most stripes a breaker has: [`MAX_OWNED_STRIPES`] owned ones and the
/// [`SHARED`] ones.
pub(crate) const MAX_STRIPES: usize = MAX_OWNED_STRIPES + SHARED;
/// The most owned stripes a breaker has room for (see [`crate::slot::owned_stripes`]).
pub(crate) const MAX_OWNED_STRIPES: usize = 64;
/// The most heap bytes one stripe may take.
pub(crate) const MAX_STRIPE_BYTES: usize = 512 * 1024;
/// The most heap bytes a breaker's stripes may take together.
pub(crate) const MAX_BREAKER_BYTES: usize = 48 * 1024 * 1024;

// Today's layout: the bucket bound keeps a stripe and a whole breaker within theirs.
const _: () = {
    let stripe = match stripe_bytes(MAX_BUCKETS as usize) {
        Some(bytes) => bytes,
        None => panic!("no stripe class holds MAX_BUCKETS buckets"),
    };
    assert!(stripe <= MAX_STRIPE_BYTES);
    assert!(MAX_STRIPE_BYTES.checked_mul(MAX_STRIPES).is_some());
    assert!(MAX_STRIPE_BYTES * MAX_STRIPES <= MAX_BREAKER_BYTES);
};

/// Defines the stripe classes, each the number of lines its stripes have (the
/// counter line and the ring's), smallest first, and [`Room`], which holds the
/// stripes of one class. Each method of `Room` is one `match` whose arms differ
/// only in the class's length; where they touch only the counter line, the first
/// line in every class, they are the same code and compile to no dispatch at all.
macro_rules! room {
    ($($class:ident = $lines:literal,)* ; $last:ident = $last_lines:literal) => {
        /// The lines of every stripe class, smallest first.
        pub(super) const CLASSES: [usize; [$($lines,)* $last_lines].len()] = [$($lines,)* $last_lines];

        /// Room for a breaker's stripes, all of one class: a pointer a stripe,
        /// each set by the stripe's first writer.
        pub(super) enum Room {
            $($class(Box<[OnceBox<[Line; $lines]>]>),)*
            $last(Box<[OnceBox<[Line; $last_lines]>]>),
        }

        impl Room {
            /// Room for `len` stripes of at least `lines` lines each: the smallest
            /// class that holds them (the largest if none does, which a checked
            /// configuration never asks for).
            pub(super) fn new(lines: usize, len: usize) -> Room {
                fn empty<T>(len: usize) -> Box<[OnceBox<T>]> {
                    (0..len).map(|_| crate::sync::stripe_box()).collect()
                }
                $(if lines <= $lines {
                    return Room::$class(empty(len));
                })*
                Room::$last(empty(len))
            }

            /// How many stripes there is room for.
            #[inline]
            pub(super) fn len(&self) -> usize {
                match self {
                    $(Room::$class(room) => room.len(),)*
                    Room::$last(room) => room.len(),
                }
            }

            /// The counter line of stripe `index`, if it exists.
            #[inline]
            pub(super) fn get(&self, index: usize) -> Option<&Line> {
                match self {
                    $(Room::$class(room) => room.get(index)?.get().map(|lines| &lines[0]),)*
                    Room::$last(room) => room.get(index)?.get().map(|lines| &lines[0]),
                }
            }

            /// The counter line of stripe `index`, allocated unless a racing thread
            /// has just done so. `index` is below [`len`](Self::len). The class's
            /// own code, called only to allocate: see [`Stripes::stripe`].
            #[cold]
            #[inline(never)]
            pub(super) fn init(&self, index: usize) -> &Line {
                match self {
                    $(Room::$class(room) => &room[index].get_or_init(|| allocate(index))[0],)*
                    Room::$last(room) => &room[index].get_or_init(|| allocate(index))[0],
                }
            }

            /// Every line of stripe `index`: none if it does not exist.
            pub(super) fn lines(&self, index: usize) -> &[Line] {
                match self {
                    $(Room::$class(room) => room.get(index).and_then(OnceBox::get).map_or(&[], |lines| &lines[..]),)*
                    Room::$last(room) => room.get(index).and_then(OnceBox::get).map_or(&[], |lines| &lines[..]),
                }
            }

            /// The heap bytes of one stripe of this class.
            pub(super) fn stripe_bytes(&self) -> usize {
                match self {
                    $(Room::$class(_) => std::mem::size_of::<[Line; $lines]>(),)*
                    Room::$last(_) => std::mem::size_of::<[Line; $last_lines]>(),
                }
            }
        }
    };
}

// Exact up to 17 ring lines (64 buckets and the summary), then steps of at most
// 1.5 times; the largest holds `MAX_BUCKETS` and the summary.
room! {
    R0 = 1, R1 = 2, R2 = 3, R3 = 4, R4 = 5, R5 = 6, R6 = 7, R7 = 8, R8 = 9,
    R9 = 10, R10 = 11, R11 = 12, R12 = 13, R13 = 14, R14 = 15, R15 = 16, R16 = 17,
    R17 = 18, R24 = 25, R32 = 33, R48 = 49, R64 = 65, R96 = 97, R128 = 129, R192 = 193,
    R256 = 257, R384 = 385, R512 = 513, R768 = 769,
    ; R1025 = 1026
}

/// A zeroed stripe of `L` lines, stripe `index` of its room.
#[cold]
#[inline(never)]
fn allocate<const L: usize>(index: usize) -> Box<[Line; L]> {
    // Collected on the heap (an array built by value would be built on the stack
    // first): one allocation of exactly `L` lines.
    let lines: Box<[Line]> = (0..L).map(|_| CachePadded::new(zeroed_buckets())).collect();
    // Relaxed: published with the stripe (the `OnceBox`'s Release).
    word(&lines[0], INDEX).store(index as u64, Ordering::Relaxed);
    match lines.try_into() {
        Ok(stripe) => stripe,
        Err(_) => unreachable!("{L} lines were collected"),
    }
}

/// The lines a stripe needs for `buckets` window buckets: the counter line, then
/// the ring's, four buckets to a line, and with a window one more bucket's room
/// after them, for the owner's summary (see [`Ring::summary`]).
pub(super) const fn needed_lines(buckets: usize) -> usize {
    // Saturating: no size computation overflows (see `stripe_bytes`).
    let slots = if buckets == 0 {
        0
    } else {
        buckets.saturating_add(1)
    };
    1 + slots.div_ceil(LINE_BUCKETS)
}

/// The lines of the class that holds a stripe of `buckets` window buckets (see
/// [`needed_lines`]), `None` if no class is that large.
pub(super) const fn class_lines(buckets: usize) -> Option<usize> {
    let lines = needed_lines(buckets);
    let mut i = 0;
    while i < CLASSES.len() {
        if CLASSES[i] >= lines {
            return Some(CLASSES[i]);
        }
        i += 1;
    }
    None
}

/// The heap bytes of one stripe with room for `buckets` window buckets: its
/// class's lines. `None` if no class is that large.
pub(crate) const fn stripe_bytes(buckets: usize) -> Option<usize> {
    match class_lines(buckets) {
        // At most 1026 lines of at most a few hundred bytes: no overflow.
        Some(lines) => Some(lines * std::mem::size_of::<Line>()),
        None => None,
    }
}

/// Whether a window of `buckets` buckets is within every bound above: `Ok`, or
/// the bound it breaks, in words. Checked arithmetic throughout: no setting can
/// make a size computation overflow.
pub(crate) fn check_buckets(buckets: u32) -> Result<(), String> {
    if buckets > MAX_BUCKETS {
        return Err(format!(
            "{buckets} buckets are more than the {MAX_BUCKETS} a window may have"
        ));
    }
    let stripe = usize::try_from(buckets)
        .ok()
        .and_then(stripe_bytes)
        .filter(|&bytes| bytes <= MAX_STRIPE_BYTES)
        .ok_or_else(|| {
            format!("{buckets} buckets take more than the {MAX_STRIPE_BYTES} bytes a stripe may")
        })?;
    match stripe.checked_mul(MAX_STRIPES) {
        Some(total) if total <= MAX_BREAKER_BYTES => Ok(()),
        _ => Err(format!(
            "{buckets} buckets in each of up to {MAX_STRIPES} stripes take more than the {MAX_BREAKER_BYTES} bytes a breaker may"
        )),
    }
}
