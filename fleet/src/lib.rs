//! A fleet view for [`cutout`] circuit breakers, over Redis: what one instance
//! learns about a dependency, its peers know within a heartbeat, and no call path
//! pays for it.
//!
//! # What it does
//! - **Publishes off the hot path.** A breaker's transition listener
//!   ([`Fleet::listener`]) only pushes the transition onto a bounded lock-free
//!   queue; a background thread publishes it on the namespace's channel. A full
//!   queue drops the oldest transition and counts it. Every
//!   [`heartbeat_every`](FleetConfig::heartbeat_every) the same thread writes a
//!   heartbeat key with a TTL, listing the keys this instance holds Open.
//! - **In generation order.** Two threads' transitions can reach the listener out
//!   of order (each thread delivers its own, after its CAS), so the publisher
//!   keeps each key's latest generation (compared with wrapping) and drops an
//!   older transition, unpublished and counted
//!   ([`FleetStats::stale_dropped`]): a probe's Closed delivered after the next
//!   trip's Open does not withdraw the Open. A key's transitions come from one
//!   breaker at a time: a breaker rebuilt under the key (a registry's eviction
//!   and re-creation, a removal, a restore) starts again at generation 0, and its
//!   first transition (generation 1) is always taken, the key's order going on
//!   from it. A key's generation is kept while it is held Open, and otherwise for
//!   [`max_open`](FleetConfig::max_open) after its last transition.
//! - **Keeps a view.** A second thread subscribes to the channel and keeps, per key,
//!   which live peers report it Open and until when ([`FleetView::open_reports`]).
//!   A peer is live while its latest heartbeat is younger than
//!   [`live_after`](FleetConfig::live_after).
//! - **Opens by quorum.** When at least [`Quorum`] live peers (2 by default) report
//!   a key Open, the attached local breaker opens until the earliest reported
//!   deadline, through [`CircuitBreaker::open_for`](cutout::CircuitBreaker::open_for)
//!   (reported as [`Reason::External`](cutout::Reason::External)); after that it
//!   probes on its own. A quorum is decided as reports arrive, and again within
//!   a second when the number of live peers changes: a
//!   [`Fraction`](Quorum::Fraction) reached as quiet peers age out opens too.
//!   Only a Closed breaker opens: a half-open round decides
//!   for itself, a forced-open or disabled breaker is left alone. The same reports
//!   open a breaker once: after its own probes close it, only a new report (a
//!   peer's new trip) can open it again. A report is its peer's instance id and
//!   breaker generation; each one a quorum was applied from is remembered while
//!   its peer holds it, live or not (a peer whose heartbeat was late comes back
//!   with the same report, which opens nothing), and forgotten once the peer
//!   reports the key Closed or sends a heartbeat without it, so a peer restarted
//!   under the same id, whose fresh breaker trips at generation 1 again, makes a
//!   new report. An open a quorum caused is an echo, not evidence: it is
//!   not published as a transition (each trip would cost the fleet a message
//!   per peer, delivered to every peer), only listed in the heartbeat with its
//!   reason, and counts toward no other quorum. In an attached [`Registry`](cutout::Registry), only a key's own
//!   breaker opens: a key without a place at the registry's `max_keys` cap (its
//!   lookup goes to the overflow breaker every such key shares) is left alone,
//!   and counted ([`FleetStats::quorum_overflow_skipped`]).
//! - **Joins from the picture.** [`Fleet::start`] subscribes, then reads every
//!   live heartbeat, waiting up to [`join_wait`](FleetConfig::join_wait) (500 ms
//!   by default) for that. A breaker built after it with [`Fleet::breaker`]
//!   starts from the picture: under a fleet-wide override, ForcedOpen or
//!   Disabled as it says; else, if a quorum reports its key Open, the builder
//!   restores a [`SavedState`](cutout::SavedState) Open until the earliest
//!   reported deadline ([`Fleet::saved_state`], [`Builder::restore`](cutout::Builder::restore)).
//!   For a [`Registry`](cutout::Registry) whose keys are created on first use,
//!   [`Fleet::initial_state`] is the `RegistryBuilder::initial_state` hook that
//!   does the same per key. **Before the picture is read** (Redis slow or down at
//!   start), breakers start Closed and decide locally; when the picture arrives,
//!   the quorum opens the attached ones it concerns.
//!
//! - **Takes an operator's override.** [`Fleet::force_open`],
//!   [`Fleet::disable`] and [`Fleet::release`] set a key's breakers on every
//!   instance (through the breaker's own `force_open`, `disable` and `reset`),
//!   for a bounded time ([`MAX_OVERRIDE`]). An override is a control message
//!   (signed with the fleet's key, if set), and every heartbeat relays the
//!   overrides its instance knows ([`Heartbeat::overrides`]), so an instance
//!   that joins later, or missed the message, learns them within a heartbeat.
//!   Per key, the override issued last wins (by the issuers' wall clocks, ties
//!   by issuer id); a release is kept as long as the override it ended would
//!   have lasted (at most [`MAX_OVERRIDE`], as far as its receivers take), so
//!   a stale relay cannot bring that one back. When an
//!   override ends (released or expired), an attached breaker of its key still
//!   in the state it sets (forced open, or disabled) is reset to Closed; one an
//!   operator set to the other state since is left alone, while the same state
//!   set before the override cannot be told from the override's (see
//!   [`Fleet::release`]).
//!
//! # What it does not promise
//! - **Eventual.** A peer's trip reaches this instance after a publish and a
//!   delivery (about a millisecond over loopback; see `docs/PERFORMANCE.md`), and
//!   a message published while Redis is down is lost: the next heartbeat carries
//!   the picture again.
//! - **Advisory and quorum-gated.** The view only ever *opens* a Closed breaker,
//!   and only on a quorum of live peers. **It never closes a breaker**: closing
//!   takes local probes.
//!
//! # Trust
//! - **Who can publish.** Only holders of the Redis credentials: protect them
//!   (`AUTH` with a password or an ACL user limited to the namespace's keys and
//!   channel, [`FleetConfig::redis_user`]; TLS with `rediss://`).
//! - **Signed messages.** With [`FleetConfig::signing_key`], every message
//!   carries its send time and an HMAC-SHA256 of it under the fleet's shared
//!   key and namespace; an unsigned message, one signed with another key or
//!   altered, and one older than [`live_after`](FleetConfig::live_after) (a
//!   replay) are refused and counted ([`FleetStats`]). Without a key, messages
//!   keep the unsigned wire format of [`VERSION`].
//! - **What remains.** Instance ids are self-declared, and the key is shared: a
//!   holder of the key (any instance of the fleet, or whoever steals its
//!   configuration) can pose as another instance, or as many, and so reach a
//!   quorum alone; and a signed message can be sent again while its stamp is
//!   younger than `live_after` (for up to `live_after` plus `max_skew` after it
//!   was sent, where the sender's clock runs ahead).
//!   The quorum defends against faulty instances (a broken clock, a bug, a bad
//!   network), not against a malicious holder of the key.
//! - **Bounded by design.** A message stamped beyond this host's clock plus
//!   [`max_skew`](FleetConfig::max_skew) (1 s) is refused, so no stamp holds a
//!   peer's later messages off; a peer's heartbeats are kept in order for
//!   `live_after` at most. The peer table holds [`MAX_PEERS`]: a live peer that
//!   reports a key Open keeps its place, and a newcomer that reports one may
//!   take the place of any other (one that is not live first), so a flood of
//!   made-up ids cannot keep out a real peer that trips.
//!
//! # Faults
//! With Redis down or unreachable, breakers keep deciding locally (the call path
//! never touches Redis), the view ages out (heartbeats stop, peers stop being
//! live), and both threads reconnect with a jittered exponential backoff
//! ([`FleetConfig::reconnect`]). A connection that goes silent without closing
//! (a NAT or load balancer dropped it: no FIN, no RST) fails the publisher's
//! next command within [`io_timeout`](FleetConfig::io_timeout); the subscriber
//! only reads, so it counts its subscription lost once a message this instance
//! published has not come back on it within
//! [`live_after`](FleetConfig::live_after), and subscribes again (reading the
//! picture again, as on any reconnection). Messages are validated ([`Message::decode`]):
//! garbage, an unknown version, a message over [`MAX_MESSAGE_BYTES`], a field out
//! of range, a deadline beyond [`max_open`](FleetConfig::max_open), or a report
//! from a peer that is not live counts for nothing, and is counted
//! ([`FleetStats`]). A namespace ([`FleetConfig::namespace`]) separates fleets on
//! one Redis: a key under its heartbeat prefix whose name is not UTF-8, or whose
//! heartbeat names another instance, is left out of the picture, uncounted.
//!
//! Wall clocks matter twice, and both are bounded: a deadline travels as
//! wall-clock time (a peer whose clock runs ahead reports deadlines up to
//! [`max_open`](FleetConfig::max_open) late, never more), and a heartbeat's age is
//! read against this host's clock (a peer whose clock runs behind by more than
//! [`live_after`](FleetConfig::live_after) never looks live, so its reports count
//! for nothing, and one whose clock runs ahead by more than
//! [`max_skew`](FleetConfig::max_skew) is refused: keep hosts on NTP).
//!
//! Dropping a [`Fleet`] stops its threads and waits for them: at most about one
//! [`io_timeout`](FleetConfig::io_timeout), if a Redis command is in flight.
//! The overrides it applied end here with it (see [`Fleet`]).
//!
//! # Examples
//! ```no_run
//! use cutout::CircuitBreaker;
//! use cutout_fleet::{Fleet, FleetConfig};
//! use std::time::Duration;
//!
//! let fleet = Fleet::start(
//!     FleetConfig::new("redis://127.0.0.1:6379/")
//!         .namespace("checkout")
//!         .live_after(Duration::from_secs(3)),
//! )?;
//! let db = fleet.breaker("db", CircuitBreaker::builder().consecutive_failures(5))?;
//! match db.call(|| Ok::<_, std::io::Error>("row")) {
//!     Ok(row) => println!("{row}"),
//!     Err(e) => println!("{e}"),
//! }
//! println!("peers reporting db open: {}", fleet.view().open_reports("db").len());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! With a [`Registry`](cutout::Registry) of `String` keys, give
//! [`Fleet::registry_listener`] to `RegistryBuilder::on_transition` and
//! [`Fleet::initial_state`] to `RegistryBuilder::initial_state`, then call
//! [`Fleet::attach_registry`]:
//!
//! ```no_run
//! use cutout::{CircuitBreaker, Registry};
//! use cutout_fleet::{Fleet, FleetConfig};
//! use std::sync::Arc;
//!
//! let fleet = Fleet::start(FleetConfig::new("redis://127.0.0.1:6379/"))?;
//! let registry: Arc<Registry<String>> = Arc::new(
//!     Registry::builder(CircuitBreaker::builder())
//!         .on_transition(fleet.registry_listener())
//!         .initial_state(fleet.initial_state())
//!         .build()?,
//! );
//! fleet.attach_registry(&registry);
//! let _ = registry.call("inventory", || Ok::<_, std::io::Error>(()));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Features
//! - `metrics`: `FleetView::record_metrics` publishes the view through the
//!   `metrics` facade; the subscriber thread calls it once a second, Redis
//!   reachable or not.

#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

mod config;
mod control;
mod fleet;
mod held;
mod message;
mod quorum;
mod sign;
mod view;

pub use config::{FleetConfig, FleetError};
pub use control::{MAX_OVERRIDE, MAX_OVERRIDES, Override, OverrideMode};
pub use fleet::Fleet;
pub use message::{
    Heartbeat, Invalid, MAX_MESSAGE_BYTES, MAX_NAME_BYTES, MAX_OPEN_PER_HEARTBEAT, Message,
    OpenEntry, Report, SIGNED_VERSION, VERSION,
};
pub use quorum::Quorum;
pub use view::{FleetStats, FleetView, MAX_KEYS_PER_PEER, MAX_PEERS, OpenReport};

/// A fleet view without a fleet: feed it message bytes at times of your choosing
/// and read what its quorum would do, to test your own setup (which messages a
/// view takes, and when a quorum forms) without Redis or threads.
///
/// # Examples
/// ```
/// use cutout_fleet::testing::ViewHarness;
/// use cutout_fleet::{Heartbeat, Message, Quorum};
/// use std::time::{Duration, Instant, SystemTime};
///
/// let (now, wall) = (Instant::now(), SystemTime::now());
/// let mut view = ViewHarness::new("me", Duration::from_secs(3), Duration::from_secs(600));
/// let beat = Message::Heartbeat(Heartbeat {
///     instance: "a".into(),
///     sent_at: wall + Duration::from_secs(86_400),
///     open: Vec::new(),
///     more: false,
///     overrides: Vec::new(),
/// });
/// // A day ahead of this host's clock: refused, and counted.
/// view.apply(&beat.encode(), now, wall);
/// assert_eq!(view.stats().from_future, 1);
/// assert_eq!(view.verdict("db", Quorum::default(), now, wall), None);
/// ```
pub mod testing {
    use crate::Quorum;
    use crate::sign::SigningKey;
    use crate::view::ViewState;
    use std::time::{Duration, Instant, SystemTime};

    /// A view for one instance, fed raw messages.
    #[derive(Debug)]
    pub struct ViewHarness(ViewState);

    impl ViewHarness {
        /// A view for instance `own`, with the default skew (1 s), taking
        /// unsigned messages.
        pub fn new(own: &str, live_after: Duration, max_open: Duration) -> ViewHarness {
            ViewHarness(ViewState::new(own.into(), live_after, max_open))
        }
        /// Refuses messages stamped more than `skew` ahead of the wall time
        /// given to [`apply`](Self::apply)
        /// ([`FleetConfig::max_skew`](crate::FleetConfig::max_skew)).
        #[must_use]
        pub fn max_skew(self, skew: Duration) -> ViewHarness {
            ViewHarness(self.0.max_skew(skew))
        }
        /// Takes only messages signed with `key` for fleet `namespace`
        /// ([`FleetConfig::signing_key`](crate::FleetConfig::signing_key),
        /// [`Message::encode_signed`](crate::Message::encode_signed)).
        #[must_use]
        pub fn signing_key(self, key: &[u8], namespace: &str) -> ViewHarness {
            ViewHarness(self.0.signing_key(Some(SigningKey::new(key, namespace))))
        }
        /// Applies `bytes` at the given times; the keys whose reports changed.
        pub fn apply(&mut self, bytes: &[u8], now: Instant, wall: SystemTime) -> Vec<String> {
            self.0.apply(bytes, now, wall)
        }
        /// The deadline a quorum gives `key`, if any.
        pub fn verdict(
            &self,
            key: &str,
            quorum: Quorum,
            now: Instant,
            wall: SystemTime,
        ) -> Option<SystemTime> {
            self.0.verdict(key, quorum, now, wall).map(|v| v.0)
        }
        /// The fleet-wide override in force for `key` at `wall`, if any.
        pub fn override_of(&self, key: &str, wall: SystemTime) -> Option<crate::OverrideMode> {
            self.0.override_mode(key, wall)
        }
        /// How many peers are live at `now`.
        pub fn live_peers(&self, now: Instant) -> usize {
            self.0.live_peers(now)
        }
        /// How many peers the view holds, live or not (at most
        /// [`MAX_PEERS`](crate::MAX_PEERS)).
        pub fn peers(&self) -> usize {
            self.0.peer_count()
        }
        /// The counters.
        pub fn stats(&self) -> crate::FleetStats {
            self.0.stats()
        }
    }
}

/// The README's examples, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
