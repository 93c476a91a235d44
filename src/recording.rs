//! The recorder as the keyed integrations hold it (`http::BackendLayer` and the
//! reqwest middleware): with the `replay` feature, `crate::replay::Recorder`
//! and a call's `Timed`; without it, uninhabited stand-ins, so a layer's
//! `Option<Recorder>` and a future's `Option<Tap>` are zero-sized, their checks
//! fold away, and the code that uses them reads the same either way.

#[cfg(feature = "replay")]
pub(crate) use crate::replay::Recorder;

/// A call being timed for its layer's recorder.
#[cfg(all(feature = "replay", feature = "http"))]
pub(crate) type Tap = Box<crate::replay::Timed>;

#[cfg(not(feature = "replay"))]
pub(crate) use off::Recorder;
#[cfg(all(not(feature = "replay"), feature = "http"))]
pub(crate) use off::Tap;

#[cfg(not(feature = "replay"))]
mod off {
    use crate::Outcome;

    /// No recorder can exist without the `replay` feature.
    #[derive(Clone, Debug)]
    pub(crate) enum Recorder {}

    /// No call is timed without the `replay` feature.
    pub(crate) enum Tap {}

    impl Recorder {
        pub(crate) fn start(&self, _key: &str) -> Tap {
            match *self {}
        }
    }

    impl Tap {
        pub(crate) fn finish(self, _outcome: Outcome) {
            match self {}
        }
    }
}
