//! A fleet's picture beside the local breakers, and fleet-wide controls:
//! [`FleetSource`], implemented with the `fleet` feature for cutout-fleet's
//! `FleetView` (the picture) and `Fleet` (the picture, its overrides, and the
//! controls).

use std::time::Duration;

/// How long a fleet-wide force open or disable lasts unless the request says
/// (`for_s`): ten minutes.
pub const OVERRIDE_DEFAULT: Duration = Duration::from_secs(600);
/// The longest fleet-wide force open or disable a request may ask for: a day,
/// cutout-fleet's `MAX_OVERRIDE`.
pub const OVERRIDE_MAX: Duration = Duration::from_secs(24 * 60 * 60);

/// A fleet-wide override in force for a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FleetOverride {
    /// Forced open on every instance: every call rejected.
    ForceOpen,
    /// Disabled on every instance: every call admitted, nothing trips.
    Disable,
}

impl FleetOverride {
    /// A snake_case name, as in the JSON.
    pub const fn as_str(self) -> &'static str {
        match self {
            FleetOverride::ForceOpen => "force_open",
            FleetOverride::Disable => "disable",
        }
    }
}

/// What an operator asks of the whole fleet for one key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FleetAction {
    /// Force the key's breakers open on every instance for this long.
    ForceOpen(Duration),
    /// Disable the key's breakers on every instance for this long.
    Disable(Duration),
    /// End the key's override everywhere.
    Release,
}

/// What the page shows of a fleet: its live peers, which keys they report Open,
/// how many opens a quorum made here, and the fleet-wide overrides; and, where
/// the source can issue them, the fleet-wide controls.
pub trait FleetSource: Send + Sync + 'static {
    /// How many other instances are live.
    fn live_peers(&self) -> usize;
    /// Every key that some live peer reports Open.
    fn open_keys(&self) -> Vec<String>;
    /// How many live peers report `key` Open.
    fn open_reports(&self, key: &str) -> usize;
    /// Opens this instance made on a fleet quorum, since it started.
    fn quorum_opens(&self) -> u64;
    /// The fleet-wide override in force for `key`; by default none (a view
    /// alone does not know them).
    fn override_of(&self, key: &str) -> Option<FleetOverride> {
        let _ = key;
        None
    }
    /// Whether [`control`](Self::control) acts on the fleet: then, with
    /// [`Source::controls`](crate::Source::controls), force open and disable go
    /// fleet-wide. By default `false`, and the controls act on the local
    /// breaker alone.
    fn controls(&self) -> bool {
        false
    }
    /// Issues `action` for `key` on every instance of the fleet; what was
    /// refused, as text, on error. By default refused.
    ///
    /// # Errors
    /// Whatever the fleet refuses (a key or a duration out of its range).
    fn control(&self, key: &str, action: FleetAction) -> Result<(), String> {
        let _ = (key, action);
        Err("this fleet source takes no controls".into())
    }
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

#[cfg(feature = "fleet")]
const _: () = assert!(OVERRIDE_MAX.as_secs() == cutout_fleet::MAX_OVERRIDE.as_secs());

/// The fleet's picture from its view, its overrides, and its controls: force
/// open and disable are `Fleet::force_open` and `Fleet::disable` (which set this
/// instance's attached breakers at once, and the other instances' when the
/// message arrives), and a release is `Fleet::release`.
///
/// ```no_run
/// use cutout::CircuitBreaker;
/// use cutout_fleet::{Fleet, FleetConfig};
/// use std::sync::Arc;
///
/// let fleet = Arc::new(Fleet::start(FleetConfig::new("redis://127.0.0.1:6379/"))?);
/// // Built through the fleet: attached, so fleet-wide controls move it too.
/// let payments = fleet.breaker("payments", CircuitBreaker::builder())?;
/// let source = cutout_dashboard::Source::new()
///     .breaker("payments", payments)
///     .fleet(fleet)
///     .controls(true);
/// let app: axum::Router = axum::Router::new().nest("/admin/breakers", cutout_dashboard::router(source));
/// # drop(app);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[cfg(feature = "fleet")]
impl FleetSource for cutout_fleet::Fleet {
    fn live_peers(&self) -> usize {
        self.view().live_peers()
    }
    fn open_keys(&self) -> Vec<String> {
        self.view().open_keys()
    }
    fn open_reports(&self, key: &str) -> usize {
        self.view().open_reports(key).len()
    }
    fn quorum_opens(&self) -> u64 {
        self.view().stats().quorum_opens
    }
    fn override_of(&self, key: &str) -> Option<FleetOverride> {
        match cutout_fleet::Fleet::override_of(self, key)? {
            cutout_fleet::OverrideMode::ForceOpen => Some(FleetOverride::ForceOpen),
            cutout_fleet::OverrideMode::Disable => Some(FleetOverride::Disable),
            cutout_fleet::OverrideMode::Release => None,
        }
    }
    fn controls(&self) -> bool {
        true
    }
    fn control(&self, key: &str, action: FleetAction) -> Result<(), String> {
        match action {
            FleetAction::ForceOpen(d) => self.force_open(key, d),
            FleetAction::Disable(d) => self.disable(key, d),
            // No override in force here for the key (none can name a key the
            // fleet cannot carry): nothing to release, and the reset goes on to
            // the local breakers, even with the fleet's table of overrides full.
            FleetAction::Release
                if key.len() > cutout_fleet::MAX_NAME_BYTES || self.override_of(key).is_none() =>
            {
                Ok(())
            }
            FleetAction::Release => self.release(key),
        }
        .map_err(|e| e.to_string())
    }
}

/// The most Open keys read from a fleet per tick.
pub(crate) const MAX_FLEET_KEYS: usize = 10_000;
