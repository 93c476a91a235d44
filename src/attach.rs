//! State an integration keeps beside a breaker: an [`Attachment`], empty until the
//! integration's first use, which the core holds without knowing its type (as it
//! holds the user's listener without knowing what it does). An exporter that
//! publishes what changed since its last publication (the `metrics` exporter)
//! keeps its high-water marks there; a registry holds one of its own for its own
//! counters.
//!
//! One integration per attachment: the first to attach decides its type, and
//! another type then finds nothing (no integration of this crate shares one).

use std::any::Any;
use std::sync::OnceLock;

/// One integration's state, attached at its first use; see the [module](self).
/// Holds nothing on the heap until then.
#[derive(Default)]
// The exporters that use it are each behind their own feature.
#[allow(dead_code)]
pub(crate) struct Attachment(OnceLock<Box<dyn Any + Send + Sync>>);

#[allow(dead_code)] // see `Attachment`
impl Attachment {
    /// The attached state, if a `T` is attached.
    pub(crate) fn get<T: Any>(&self) -> Option<&T> {
        self.0.get()?.downcast_ref()
    }

    /// The attached `T`, attaching `init()` first if nothing is attached (racing
    /// first uses attach one value: the others' `init` is not called). `None` if
    /// something other than a `T` is attached.
    pub(crate) fn get_or_init<T: Any + Send + Sync>(&self, init: impl FnOnce() -> T) -> Option<&T> {
        self.0.get_or_init(|| Box::new(init())).downcast_ref()
    }

    /// The heap bytes of the attached state: none until something is attached.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.0
            .get()
            .map_or(0, |state| std::mem::size_of_val(&**state))
    }
}

impl std::fmt::Debug for Attachment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attachment")
            .field("attached", &self.0.get().is_some())
            .finish()
    }
}

#[cfg(all(test, not(cutout_loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_first_type_attached_is_the_one_found_and_counted() {
        let a = Attachment::default();
        assert_eq!(a.heap_bytes(), 0);
        assert!(a.get::<[u64; 3]>().is_none());
        assert_eq!(a.get_or_init(|| [7u64; 3]), Some(&[7; 3]));
        assert_eq!(a.get_or_init(|| [9u64; 3]), Some(&[7; 3]), "attached once");
        assert_eq!(a.heap_bytes(), 24);
        assert!(
            a.get_or_init(|| 1u8).is_none(),
            "another type finds nothing"
        );
        assert_eq!(a.get::<[u64; 3]>(), Some(&[7; 3]));
    }
}
