//! A fleet's picture beside the local breakers: [`FleetSource`], implemented for
//! cutout-fleet's `FleetView` with the `fleet` feature.

/// What the page shows of a fleet: its live peers, which keys they report Open,
/// and how many opens a quorum made here.
pub trait FleetSource: Send + Sync + 'static {
    /// How many other instances are live.
    fn live_peers(&self) -> usize;
    /// Every key that some live peer reports Open.
    fn open_keys(&self) -> Vec<String>;
    /// How many live peers report `key` Open.
    fn open_reports(&self, key: &str) -> usize;
    /// Opens this instance made on a fleet quorum, since it started.
    fn quorum_opens(&self) -> u64;
}

#[cfg(feature = "fleet")]
impl FleetSource for cutout_fleet::FleetView {
    fn live_peers(&self) -> usize {
        cutout_fleet::FleetView::live_peers(self)
    }
    fn open_keys(&self) -> Vec<String> {
        cutout_fleet::FleetView::open_keys(self)
    }
    fn open_reports(&self, key: &str) -> usize {
        cutout_fleet::FleetView::open_reports(self, key).len()
    }
    fn quorum_opens(&self) -> u64 {
        self.stats().quorum_opens
    }
}

/// The most Open keys read from a fleet per tick.
pub(crate) const MAX_FLEET_KEYS: usize = 10_000;
