//! Loom models of cutout; see README.md.
