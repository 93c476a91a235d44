//! Implementation notes: how cutout works inside, for a reader changing it. Not
//! API: nothing here is code. (sharded-slab's `implementation` module is the
//! model.) The measured figures are in `docs/PERFORMANCE.md`.
//!
//! # The state word
//! State, backoff level and generation share one `AtomicU64`,
//! changed only by compare-and-swap:
//!
//! | bits   | field      | meaning |
//! |--------|------------|---------|
//! | 0-2    | state      | Closed, Open, HalfOpen, ForcedOpen, Disabled, Recovering |
//! | 3-8    | level      | backoff level (the cap is reached within 63 levels, or the builder refuses the multiplier) |
//! | 9-40   | generation | bumped by every transition, wrapping at 2^32 |
//! | 41-63  | cycles     | bumped each time the generation wraps (see The ABA window) |
//!
//! Every transition moves the generation on, so a phase has exactly one word: no
//! thread can see a generation with another state or level. A phase's time (Open:
//! its deadline; HalfOpen: when the round started; otherwise when the phase began)
//! follows from the word and the phase's start, which sits beside the word in a
//! time slot tagged with the phase's generation. The first candidate for a
//! transition claims the new phase's start before the word's CAS, so every thread
//! that sees the word sees its start, all agree on it, and none waits for another
//! (see the `state` module's docs), except in one race: `open_for` works its start
//! out from the deadline asked for, so it and another transition out of the same
//! Closed word (a trip, a reset, another `open_for`) take neither's start; the
//! later to claim waits for the other's CAS, 20 ms at most. A claim is made only while the word still
//! holds the candidate's: the slot's tags are 16 bits of the generation, and a
//! candidate a whole tag cycle behind would otherwise overwrite the current
//! phase's start and wedge admission. Each thread also keeps the deadline of the
//! Open phase it was last rejected by in its own stripe, keyed by the state word,
//! so a rejection is a compare of the clock with a word the thread wrote itself.
//! The half-open round's (issued, succeeded) counts and the consecutive-failure count live in two more words, each tagged with
//! the generation it belongs to, and a transition's winner starts the new phase's
//! word empty. One rule reads a tag, at any generation distance: the caller's own
//! generation is its phase's data; any other is an earlier phase's (empty) unless
//! the state word has moved past the caller, who is then the stale one and writes
//! nothing. A probe slot is taken by CAS on the round word and then validated
//! against the state word, so exactly `half_open_probes` probes are admitted per
//! round however many threads arrive at once.
//!
//!
//! # Generations
//! Every admitted call carries the state word it was admitted
//! under. Its outcome is compared with the current word; if the breaker has moved
//! on, the outcome is discarded and counted as `stale`. A late success cannot close
//! a breaker, a late failure cannot reopen one or extend its cooldown. The window's
//! buckets are tagged with the 32-bit generation of the closed phase that wrote them,
//! and read by the same rule, so a new closed phase always starts from an empty
//! window, however many transitions came before it (but for a bucket left
//! untouched for exactly a whole generation cycle, which the tag rule cannot tell
//! from the current phase's: see The ABA window, and `tests/model.rs`).
//!
//!
//! # The ABA window
//! The generation is 32 bits, and the word counts its wraps in 23 more: a whole
//! word repeats only after 2^55 transitions, so an outcome's check against the word
//! it was admitted under (and a thread's cached Open deadline, or live bucket, kept
//! beside the word) cannot be fooled within any lifetime. What is tagged with the
//! generation alone (the round, the streak, the window's shared counts, a bucket's
//! tag) can: a stale outcome could pass as fresh there only if exactly a multiple
//! of 2^32 = 4,294,967,296 transitions happened while its call was in flight and it
//! was delayed between the word's check and the tagged update. (A thread that held
//! a word through such a cycle during its admission takes a probe slot of the
//! current round by the round word's tag, finds the whole word changed, and gives
//! the slot back; every transition's CAS compares whole words.) At the fastest a
//! single breaker moves (about 140 ns a transition for a loop of nothing but
//! `force_open` and `reset`: 65,536 of them in 9 ms) that is 10 minutes of
//! uninterrupted manual transitions during one call; through trips, each cycle
//! (Closed → Open → HalfOpen → Closed) is three transitions around a cooldown of at
//! least 1 ms, so 1.43 billion cooldowns: 16.6 days of back-to-back 1 ms cooldowns,
//! or 45 years at the default 1 s. The tags of the time slot are 16 bits: one could
//! be misread only by a reader that held a word through 65,536 transitions between
//! two adjacent loads; and a transition's claim of its start, made by a thread
//! paused between its check of the state word and its CAS of the slot while 65,536
//! transitions ran in the same millisecond tick (only a clock that stands still, or
//! reads coarser than 9 ms, allows that: 65,536 transitions take 9 ms at the
//! fastest above), could erase the current phase's start. The first reader of that
//! phase puts it back (`TimeSlot::reclaim`, `metrics` included), so the phase never
//! reads as over for ever. The window's epoch keys repeat every 2^32 - 1 buckets
//! (49.7 days of the shortest, 1 ms buckets; 136 years of the default 1 s ones); a
//! bucket left untouched for exactly that long in one unbroken closed phase is read
//! once more as current, for one window (see the `window` module's docs).
//! `tests/long_life.rs` and `tests/soak.rs` drive the breaker through these
//! distances, and through 20 years of simulated time.
//!
//!
//! # Orderings
//! The state word is loaded `Acquire` and changed by `AcqRel` CAS,
//! which publishes the claimed start of its phase with it. The tagged words'
//! `AcqRel`/`Acquire` let a thread that reads a later phase's tag see that phase in
//! the state word too (`loom-tests/tests/two_rounds.rs` fails without them). Counters are `Relaxed`: they
//! publish nothing but themselves. Each module with atomics explains its choices
//! under "Orderings".
//!
//!
//! # The sliding window
//! Time is cut into buckets of `bucket_nanos`; bucket number `e` (the *epoch*) lives
//! in ring slot `e % K`. Each bucket is four words: a tag, calls, failures and slow
//! calls (on a shared stripe each count is tagged with its phase too: see
//! Exactness). The tag packs the generation of the closed phase that wrote it (32
//! bits) and an epoch key (32 bits: the epoch modulo `2^32 - 1`, plus one; tag 0 is
//! a bucket never written), so a bucket counts only for the closed phase that
//! wrote it: closing or resetting the breaker starts a fresh window without
//! touching any bucket.
//!
//! A writer that finds its slot tagged with another phase rotates it (empties the
//! counts and writes its own tag) if that phase is an earlier one, which it is
//! unless the breaker has moved past the writer's own phase (the rule of
//! `TaggedWord`, at any generation distance). In its
//! own phase it rotates a slot tagged with an older epoch; a slot tagged with a
//! newer epoch (at most `Window::ahead_max` epochs newer: a racing writer's)
//! means the writer's outcome took long to arrive, and it leaves the window alone.
//!
//! A reader at epoch `e` sums, over every stripe, the buckets tagged with the
//! current generation and an epoch in `e-K+1 ..= e`. After an idle gap longer than
//! the window every bucket is outside that range, so old counts never leak in. Each
//! owned stripe also publishes the tag of its newest bucket, so the reader skips an
//! idle thread's stripe with one load instead of reading its `K` buckets. A
//! failure's reader (the trip check) takes `e` from the tag its own record has just
//! written, with no division, and checks each tag with one subtraction and one
//! compare: a generation's tags in the window are one range of the tag word,
//! except for one window's length each key cycle (below), when a tag is checked
//! part by part.
//!
//! ## Epoch keys wrap
//! Epoch keys repeat every `2^32 - 1` epochs: 49.7 days of 1 ms buckets (the
//! shortest), 136 years of the default 1 s ones. Distances between keys are taken
//! modulo that, which is exact for every bucket rewritten within that time. A
//! bucket left untouched for a whole key cycle in one unbroken closed phase is the
//! exception: for one window length per cycle it reads as current (its old counts
//! are summed), and while it reads as up to `Window::ahead_max` epochs newer,
//! outcomes for its slot are dropped as late. An owner's summary (below) takes a
//! bucket only in the slot its key gives, and steps on only by as many epochs as
//! the live bucket's start is behind: a bucket of another cycle sits elsewhere
//! (the ring's slots do not repeat with the keys), and a summary that took it
//! would keep it for as long as its owner stepped on.
//!
//! The owner of a stripe remembers the bucket it counted in last, its *live*
//! bucket (its start, the phase it counts, that is the closed state word, and its
//! length, in the stripe's scratch words). While the time and the phase still
//! match, a success goes straight to that bucket: no division, no tag load. Only
//! the owner changes its stripe's tags, and it re-caches on every change, so the
//! memory cannot go stale.
//!
//! The live bucket's calls are not in the bucket at all: the owner counts them in
//! one word of its counter line (`LIVE_CALLS`, which only grows), so a success
//! costs the same increment wherever the live bucket is. The bucket's calls word
//! holds `LIVE` meanwhile, and its count is `LIVE_CALLS - LIVE_BASE` (the counter
//! when the bucket went live). When the owner moves on it *finalizes* the bucket:
//! it stores that difference in the calls word, and only then moves `LIVE_BASE`.
//!
//! ## The owner's summary
//! A failure's trip check reads the window, and a window of `K` buckets in every
//! active stripe is `K` buckets a stripe to read. So each owner also keeps, in the
//! slot after its ring's buckets, the sum of its finalized buckets in the window
//! that ends at its live bucket, written at each rotation (a step: the bucket just
//! finalized joins it, the oldest leaves it; summed anew after a gap or a phase
//! change), behind a sequence word that holds the live bucket's tag. A reader whose
//! window ends at that tag reads the summary and the live bucket, two buckets
//! instead of `K`, and reads the buckets as before otherwise: a stripe whose owner
//! has not yet moved into the reader's epoch, or a summary given up. A summary
//! spans what a window under its tag spans: `K - 1` epochs where the tag's key is
//! above `K - 1`, the epochs since the breaker began where it is not (a young
//! window, in its first `K - 1` epochs). A whole window whose keys have wrapped
//! that low (for `K - 1` epochs each key cycle) would be taken for a young one, so
//! its owner keeps no summary then. An outcome that arrives late (a reading
//! earlier than one its owner has counted: a thread that takes over an exited
//! thread's slot may bring one) is counted in its own finalized bucket, and gives
//! the summary up until the next rotation. It does not move the owner's newest tag
//! back either: a reader skips a stripe whose newest tag is older than its window.
//! The failing thread reads its own stripe as its owner: the summary it wrote and
//! the live bucket it has just counted in, with no sequence check or fence, and
//! without finding its ring again (the record found it). A debug build checks that
//! read against the one another thread would make.
//!
//! ## The failure budget
//! Even so, a failure's read costs about 130 instructions for each other active
//! stripe, and a cache miss or more each on a many-core machine. Most failures need
//! no read: after a read that did not trip, each later failure or slow call adds at
//! most one to its count, and the calls only grow (within one newest bucket), so
//! the next few cannot trip either. Every failed or slow sample takes a number from
//! one count between its record and its read (an `AcqRel` increment, so every
//! earlier number's record is in a later number's read: what also keeps two racing
//! failures from both missing each other); a read that does not trip grants, for
//! its tag and epoch, the numbers up to its own plus its allowance: the samples its
//! counts can take with neither rate reached, the calls as read (or
//! `minimum_calls`), less one for the shared stripes' race. A sample within the
//! grant skips its read. Far below the threshold nearly every failure skips; within
//! two samples of it every failure reads, as before. The grant is a small seqlock
//! in the window's own line (the window is allocated with the breaker, so a breaker
//! without one holds no such line); every transition to a counting phase withdraws
//! it, since a whole generation cycle brings its tag back. See
//! `src/window/budget.rs` and `loom-tests/tests/budget.rs`.
//!
//! ## A success's check
//! A success only lowers both rates once the window holds `minimum_calls` calls,
//! but the one that brings it up to `minimum_calls` may find a rate at its
//! threshold (failure, failure, failure, success, success at 50% of 5 calls). A
//! check that does not trip and finds the window below `minimum_calls` asks
//! whether the counts it read would trip at `minimum_calls` calls; if so, it sets
//! the top bit of the streak word (31 bits are left to the streak). The lean
//! success path lets through only a streak word whose data is 0, so the bit costs
//! it nothing: it sends the successes after it to the general path, which reads
//! the window, trips, or clears the bit once the counts could no longer trip at
//! `minimum_calls` (the window reached it, or the failures aged out). Its reads
//! race as the streak's do: a success that misses the bit (its `Relaxed` load is
//! stale) leaves the check to the successes after it and the next failure.
//!
//! ## Exactness
//! Owned stripes have one writer, so their counts are exact; a reader validates
//! each bucket it reads against a racing rotation (see Orderings). On a shared
//! stripe each count is a tagged word (read by `TaggedWord`'s rule, at any
//! generation distance): the generation of the closed phase that wrote it and a
//! 32-bit count, updated by CAS. So phases never mix there either: a writer whose
//! phase has ended since it checked the bucket's tag (the breaker tripped and
//! closed again meanwhile, and the later phase rotated the bucket) finds the later
//! phase's count and writes nothing, and a reader counts only the counts of its own
//! phase (a count not yet re-tagged by a rotation in progress reads as none). A
//! rotation into another phase empties the counts of the phase it replaces, empty
//! ones too, tagging them with its own: after its tag's CAS (whatever the breaker
//! has done since: the rotating writer may be stale by then), which guarantees it,
//! and, best effort, before it too (that phase is over: the writer has just seen
//! its own phase in the state word), so that a writer delayed between its CAS and
//! its emptying leaves little or nothing. It leaves its own phase's counts (its
//! writers may have found the new tag already), so it loses nothing, and a count of
//! any third generation (a bucket never written holds generation 0's empty counts).
//! A writer's staleness check comes before its CAS, so a stale writer can still
//! count into such a count, and its phase's other delayed writers after it (their
//! own phase's count: unchecked). So a writer that counts into an empty count takes
//! a second look at the tag, by a read-modify-write (the newest), and if another
//! phase has the bucket, empties every count of its phase there as that rotation
//! would have. The residual: a count that a rotation's emptying after its CAS, or a
//! second look, would have taken survives if that writer (the rotating one, or the
//! one looking) is delayed before its emptying until the count's generation comes
//! round again, which takes 2^32 transitions counted from the count's phase, not
//! from the delay's start (a bucket left alone for most of a cycle shortens the
//! delay needed, and such a delayed emptying can then also empty the current
//! phase's counts). `loom-tests/tests/window.rs` checks both races (a stale
//! writer's increment, a reader during the rotation), which without the tagged
//! counts would count an earlier phase's outcomes in a later phase's window, and,
//! with 3-bit generations, a rotating writer that goes stale before it empties the
//! counts, one or two stale writers' failures that land after a later phase's
//! rotation, and a rotating writer delayed after its CAS while the generation comes
//! round: each of them, unhandled, brings the counts back a generation cycle later.
//!
//! Within one phase, a rotation to a newer epoch zeroes the counts after its tag's
//! CAS: an increment by another writer of the phase that lands between the two is
//! lost, and one that read the old tag but lands after the zeroing is counted in
//! the new bucket. It empties them before the CAS too: counts carry only the
//! generation, so a reader that found the new tag before the zeroing took the
//! whole older bucket for the new epoch's (in a stress test, a one-bucket window
//! read 50 calls where it held 1, and a budget grant let a trip come late by
//! dozens of failures); with the first emptying it finds only what the old tag's
//! writers counted since then, one outcome each (unless the rotating writer
//! is delayed between the two). The first emptying is made only while the tag
//! still reads as the one the writer rotates from: a writer that read an older
//! epoch's tag before another's rotation would otherwise erase the new epoch's
//! counts (it still can if delayed between that check and its emptying, as a
//! rotating writer delayed between its CAS and its zeroing can). So per rotation of
//! a shared bucket, at most one outcome per other thread writing the shared stripe at that instant is counted in the newer
//! bucket, always in its own phase, and the outcomes the others count in the new
//! bucket before the zeroing are lost: one each, unless the rotating writer is
//! delayed between its CAS and the zeroing (then every one they count meanwhile,
//! which the failure budget's margin of one does not cover: see its docs). Without
//! a racing rotation the counts are exact. The bound holds per counter: one
//! outcome's call and failure increments can fall on either side of the zeroing, so
//! a raced bucket may show more failures than calls (the loom model of this race
//! finds 1 call, 2 failures). A shared bucket holds at most `u32::MAX` of each
//! count (49 days of a call every millisecond into one bucket of one shared
//! stripe): an outcome past that counts nowhere in the window, like one too late
//! for its bucket, and a restored window's totals are scaled down to half of that
//! (`Window::seed`), leaving the other half to the outcomes counted after them.
//! Owned counts are `u64`: no overflow in any realistic lifetime.
//!
