//! What a `fork()`ed child mends: the process-wide state whose owners did not come
//! along. Only the forking thread survives a `fork`, so in the child
//!
//! - the default clock's refresh thread is gone: the child forgets the cached
//!   reading, and its next reading starts a thread of its own
//!   ([`crate::clock`]). The clock's lazily built parts (its calibration, its
//!   origin) are built before the fork, so the child never inherits one half
//!   built by a thread it does not have, and waits for it for ever;
//! - the thread-slot pool's lock is taken before the fork and released on both
//!   sides after it, so the child never inherits it held by a thread it does not
//!   have ([`crate::slot`]);
//! - a capped registry's eviction scan may be running on a thread that did not
//!   come along: the child counts its forks ([`forks`]), and a scan gate shut
//!   under an earlier count reads as open (`Registry`'s scan at the key cap; the
//!   entry such a scan had claimed keeps its place, so the child's cap is one
//!   place smaller for it);
//! - a trace recorder's writer thread did not come along: a recorder made under
//!   an earlier count drops the child's calls (counted) and its `flush` fails,
//!   rather than waiting for ever on a queue nobody drains.
//!
//! One `pthread_atfork` registration, made once per process by whichever comes
//! first (the first refresh thread, the first slot, the first capped registry,
//! the first recorder), serves all of them; children inherit it. The prepare
//! handler takes a lock and may wait on the clock's calibration: not
//! async-signal-safe (documented on [`DefaultClock`](crate::DefaultClock)'s fork
//! safety). Only on the systems whose `libc` has `pthread_atfork` (Linux, Android,
//! macOS, the BSDs and Solaris); elsewhere this does nothing, and the clock's
//! fallback remains (see [`DefaultClock`](crate::DefaultClock)'s fork safety).

/// Forks this process is a child of, as its handler counted them (0 in a process
/// that was never forked, or whose handlers were not registered when it was).
static FORKS: crate::sync::ProcessAtomicU64 = crate::sync::ProcessAtomicU64::new(0);

/// How many forks this process is a child of: state a thread set that a fork
/// left behind (a registry's scan gate, a trace recorder's writer) carries the
/// count it was set under. (Only those read it; the count is kept whatever the
/// features.)
#[cfg(any(feature = "registry", feature = "replay"))]
pub(crate) fn forks() -> u64 {
    // Relaxed: written only by a child's handler, while it has one thread.
    FORKS.load(crate::sync::Ordering::Relaxed)
}

/// Registers the handlers (once per process; later calls return at once).
#[allow(unsafe_code)] // the crate's one `unsafe`: an FFI call with no Rust invariant
pub(crate) fn register() {
    #[cfg(any(
        target_os = "linux",
        target_os = "android",
        target_vendor = "apple",
        target_os = "freebsd",
        target_os = "netbsd",
        target_os = "openbsd",
        target_os = "dragonfly",
        target_os = "solaris",
        target_os = "illumos"
    ))]
    {
        use crate::sync::{Ordering, ProcessAtomicBool};

        /// In the parent, before the fork, on the forking thread.
        extern "C" fn prepare() {
            crate::clock::before_fork();
            crate::slot::before_fork();
        }
        /// In the parent, after the fork, on the forking thread.
        extern "C" fn parent() {
            crate::slot::after_fork();
        }
        /// In the child, right after the fork, on its only thread: atomic stores
        /// and the release of a lock this thread took in `prepare`; nothing that
        /// allocates or waits.
        extern "C" fn child() {
            // Relaxed: see `forks`.
            FORKS.fetch_add(1, Ordering::Relaxed);
            crate::clock::forget_after_fork();
            crate::slot::after_fork();
        }

        // A flag, not a `Once`: a fork while another thread runs a `Once`'s closure
        // leaves the child a `Once` that waits for ever. A child forked between the
        // swap and the registration has no handlers: the clock's fallback remains,
        // and its slots stay as the parent's were.
        // Relaxed: the swap only picks the one thread that registers.
        // Not under loom, whose models fork nothing (and whose pool is built
        // afresh in every execution).
        static REGISTERED: ProcessAtomicBool = ProcessAtomicBool::new(false);
        if crate::sync::LOOM || REGISTERED.swap(true, Ordering::Relaxed) {
            return;
        }
        // SAFETY:
        // - The three are `extern "C" fn()`s with no arguments, valid for the life
        //   of the process.
        // - None of them unwinds: what they call takes no lock but the slot pool's
        //   (see `crate::slot`) and panics on nothing.
        // - A failure (ENOMEM) registers nothing; see the flag above.
        let _ = unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) };
    }
}
