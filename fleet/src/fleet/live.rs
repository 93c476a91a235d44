//! The fleets live in this process, so that a fleet being dropped leaves a
//! breaker to another that holds an override of its key on it (a
//! reconfiguration: the new fleet attached to the same breakers and
//! registries before the old one is dropped). The rule is documented on
//! `Fleet`.

use super::Inner;
use super::targets::Target;
use crate::control::OverrideMode;
use std::sync::{Arc, Mutex, PoisonError, Weak};

/// Every fleet started in this process and not yet dropped (held weakly: a
/// dropped one goes at the next start or drop).
static LIVE: Mutex<Vec<Weak<Inner>>> = Mutex::new(Vec::new());

/// The list, usable after a panic: plain data, consistent between statements.
fn live() -> std::sync::MutexGuard<'static, Vec<Weak<Inner>>> {
    LIVE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Adds a fleet just started.
pub(super) fn join(inner: &Arc<Inner>) {
    let mut live = live();
    live.retain(|w| w.strong_count() > 0);
    live.push(Arc::downgrade(inner));
}

/// Removes a fleet being dropped.
pub(super) fn leave(inner: &Inner) {
    live().retain(|w| w.strong_count() > 0 && !std::ptr::eq(w.as_ptr(), inner));
}

/// Whether `attached` (a fleet's weak handle on a target) is `target`.
fn is(attached: &Weak<dyn Target>, target: &Arc<dyn Target>) -> bool {
    // The data pointers: one object's vtable pointers may differ.
    std::ptr::eq(
        attached.as_ptr().cast::<()>(),
        Arc::as_ptr(target).cast::<()>(),
    )
}

impl Inner {
    /// The mode of the override that another live fleet of this process
    /// applied to `key` and holds, where it has `target` attached (under `key`,
    /// or as a registry); `None` where none does. For a fleet being dropped:
    /// such a target is that fleet's to reset, at its override's end.
    pub(super) fn held_elsewhere(
        &self,
        key: &str,
        target: &Arc<dyn Target>,
    ) -> Option<OverrideMode> {
        // Taken first: no two of these locks are ever held together.
        let others: Vec<Arc<Inner>> = live().iter().filter_map(Weak::upgrade).collect();
        for other in others {
            if std::ptr::eq(&*other, self) || other.stopping() {
                continue;
            }
            let attached = other.lock_attached();
            let Some(&mode) = attached.overridden.get(key) else {
                continue;
            };
            let breakers = attached.breakers.get(key).into_iter().flatten();
            if breakers.chain(&attached.registries).any(|w| is(w, target)) {
                return Some(mode);
            }
        }
        None
    }
}
