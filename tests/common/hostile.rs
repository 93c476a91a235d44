//! A key type and a clock that let a test stop a registry operation at a chosen
//! point, or make it panic there: for `tests/registry.rs` and
//! `tests/registry_races.rs`.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::hash::{Hash, Hasher};

/// What a hook runs.
type Hook = Box<dyn FnOnce()>;

thread_local! {
    /// While set, hashing a key named "victim" panics (on this thread only, so
    /// tests running in parallel do not disturb each other).
    pub static POISON: Cell<bool> = const { Cell::new(false) };
    /// Runs once, on this thread's next reading of a `Hooked` clock.
    static HOOK: RefCell<Option<Hook>> = const { RefCell::new(None) };
    /// Runs once, when this thread next hashes the key it names.
    static HASH_HOOK: RefCell<Option<(String, Hook)>> = const { RefCell::new(None) };
}

/// A key whose `Hash` panics for the name "victim" while `POISON` is set (a key
/// type whose `Hash` reads state of its own, say a `RefCell` the call borrowed),
/// and runs a hook set by [`on_next_hash_of`].
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Key(pub String);

impl Hash for Key {
    fn hash<H: Hasher>(&self, h: &mut H) {
        if self.0 == "victim" && POISON.with(Cell::get) {
            panic!("hostile hash");
        }
        let hook = HASH_HOOK.with(|hook| {
            let mut hook = hook.borrow_mut();
            match &*hook {
                Some((name, _)) if *name == self.0 => hook.take().map(|(_, f)| f),
                _ => None,
            }
        });
        if let Some(f) = hook {
            f();
        }
        self.0.hash(h);
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

pub fn key(s: &str) -> Key {
    Key(s.to_string())
}

/// A `ManualClock` whose readings run this thread's hook (once), after the
/// reading: a way to stop a thread at a chosen point of a registry operation.
#[derive(Clone)]
pub struct Hooked(pub cutout::ManualClock);

impl cutout::Clock for Hooked {
    fn now(&self) -> u64 {
        let now = self.0.now();
        if let Some(hook) = HOOK.with(|h| h.borrow_mut().take()) {
            hook();
        }
        now
    }
}

/// Runs `f` once, when this thread next hashes the key named `name`.
pub fn on_next_hash_of(name: &str, f: impl FnOnce() + 'static) {
    HASH_HOOK.with(|h| *h.borrow_mut() = Some((name.to_string(), Box::new(f))));
}

/// Runs `f` once, on this thread's next reading of a `Hooked` clock.
pub fn on_next_reading(f: impl FnOnce() + 'static) {
    HOOK.with(|h| *h.borrow_mut() = Some(Box::new(f)));
}
