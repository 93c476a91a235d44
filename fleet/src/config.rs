//! The fleet's settings.

use crate::Quorum;
use crate::message::name_ok;
use crate::sign::SigningKey;
use redis::IntoConnectionInfo;
use std::fmt;
use std::time::Duration;

/// The longest [`FleetConfig::live_after`].
const MAX_LIVE_AFTER: Duration = Duration::from_secs(24 * 3600);

/// A fleet's settings: where Redis is, which fleet this is, who this instance is,
/// and the timings. Every setting has a default except the URL.
///
/// # Examples
/// ```
/// use cutout_fleet::{FleetConfig, Quorum};
/// use std::num::NonZeroUsize;
/// use std::time::Duration;
///
/// let config = FleetConfig::new("redis://:secret@127.0.0.1:6379/0")
///     .namespace("checkout")
///     .instance_id("checkout-7f9c")
///     .quorum(Quorum::AtLeast(NonZeroUsize::new(3).unwrap()))
///     .live_after(Duration::from_secs(3))
///     .max_open(Duration::from_secs(300));
/// assert_eq!(config.get_namespace(), "checkout");
/// ```
#[derive(Clone)]
pub struct FleetConfig {
    pub(crate) url: String,
    pub(crate) namespace: String,
    pub(crate) instance_id: String,
    pub(crate) quorum: Quorum,
    pub(crate) heartbeat_every: Duration,
    pub(crate) live_after: Duration,
    pub(crate) max_open: Duration,
    pub(crate) queue_capacity: usize,
    pub(crate) join_wait: Duration,
    pub(crate) io_timeout: Duration,
    pub(crate) reconnect_min: Duration,
    pub(crate) reconnect_max: Duration,
    pub(crate) max_skew: Duration,
    pub(crate) signing_key: Option<Vec<u8>>,
    pub(crate) redis_username: Option<String>,
    pub(crate) redis_password: Option<String>,
}

impl FleetConfig {
    /// Settings for a fleet on the Redis at `url`. The URL carries what the
    /// connection needs: `redis://[user:password@]host:port/db` sends `AUTH`;
    /// `rediss://` is TLS, which needs one of the `redis` crate's TLS features
    /// enabled in your own `Cargo.toml` (cargo unifies it with this crate's
    /// dependency).
    ///
    /// Defaults: namespace `"cutout"`, an instance id made of the process id and a
    /// random suffix, [`Quorum::default`] (2 peers), a heartbeat every 1 s, live
    /// for 3 s, deadlines at most 10 min ahead, a queue of 1024 transitions, a
    /// join wait of 500 ms, 1 s I/O timeouts, reconnection backoff from 100 ms to
    /// 5 s, stamps at most 1 s ahead ([`max_skew`](Self::max_skew)), messages
    /// unsigned.
    pub fn new(url: impl Into<String>) -> FleetConfig {
        FleetConfig {
            url: url.into(),
            namespace: "cutout".into(),
            instance_id: default_instance_id(),
            quorum: Quorum::default(),
            heartbeat_every: Duration::from_secs(1),
            live_after: Duration::from_secs(3),
            max_open: Duration::from_secs(600),
            queue_capacity: 1024,
            join_wait: Duration::from_millis(500),
            io_timeout: Duration::from_secs(1),
            reconnect_min: Duration::from_millis(100),
            reconnect_max: Duration::from_secs(5),
            max_skew: crate::view::DEFAULT_MAX_SKEW,
            signing_key: None,
            redis_username: None,
            redis_password: None,
        }
    }

    /// Separates fleets on one Redis: keys are `{namespace}:hb:{instance}`, the
    /// channel `{namespace}:events`. Not empty, and without the characters a
    /// Redis pattern gives a meaning (`*`, `?`, `[`, `]`, `\`): the picture is
    /// read with the pattern `{namespace}:hb:*`.
    #[must_use]
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = namespace.into();
        self
    }

    /// This instance's id, unique in the fleet (self-declared: see the crate docs'
    /// trust model). At most 200 bytes.
    #[must_use]
    pub fn instance_id(mut self, id: impl Into<String>) -> Self {
        self.instance_id = id.into();
        self
    }

    /// How many live peers must report a key Open to open it here.
    #[must_use]
    pub fn quorum(mut self, quorum: Quorum) -> Self {
        self.quorum = quorum;
        self
    }

    /// How often this instance writes its heartbeat. Must be under
    /// [`live_after`](Self::live_after).
    #[must_use]
    pub fn heartbeat_every(mut self, every: Duration) -> Self {
        self.heartbeat_every = every;
        self
    }

    /// A peer is live while its latest heartbeat is younger than this (also the
    /// heartbeat key's TTL). At least 1 ms, at most a day.
    #[must_use]
    pub fn live_after(mut self, age: Duration) -> Self {
        self.live_after = age;
        self
    }

    /// The furthest ahead a reported Open deadline may be; a report beyond it is
    /// refused and counted. Bounds what a faulty peer's clock can do.
    #[must_use]
    pub fn max_open(mut self, max: Duration) -> Self {
        self.max_open = max;
        self
    }

    /// How many transitions wait for the publisher; when full, the oldest is
    /// dropped and counted.
    #[must_use]
    pub fn queue_capacity(mut self, capacity: usize) -> Self {
        self.queue_capacity = capacity;
        self
    }

    /// How long [`Fleet::start`](crate::Fleet::start) waits for the fleet's picture
    /// before returning (zero: not at all). Past it, breakers start Closed and
    /// adopt the picture when it arrives.
    #[must_use]
    pub fn join_wait(mut self, wait: Duration) -> Self {
        self.join_wait = wait;
        self
    }

    /// The timeout of connecting and of each Redis command, on the background
    /// threads.
    #[must_use]
    pub fn io_timeout(mut self, timeout: Duration) -> Self {
        self.io_timeout = timeout;
        self
    }

    /// The reconnection backoff: from `min`, doubling (with jitter) to `max`,
    /// while connections or their commands fail (a Redis that accepts
    /// connections but refuses writes is backed off from as one that is down).
    #[must_use]
    pub fn reconnect(mut self, min: Duration, max: Duration) -> Self {
        self.reconnect_min = min;
        self.reconnect_max = max;
        self
    }

    /// How far ahead of this host's wall clock a peer's message may be stamped:
    /// a message stamped later is refused and counted
    /// ([`FleetStats::from_future`](crate::FleetStats::from_future)), so that no
    /// stamp, a forged one or one from a clock that later steps back, holds a
    /// peer's later messages off as out of order. An override's end gets the
    /// same allowance: one ending up to `max_skew` past
    /// [`MAX_OVERRIDE`](crate::MAX_OVERRIDE) from this host's clock is taken
    /// (an override of the longest duration, from an issuer whose clock runs
    /// ahead within the skew), though never more than `MAX_OVERRIDE` past its
    /// own issue stamp. Keep hosts on NTP.
    #[must_use]
    pub fn max_skew(mut self, skew: Duration) -> Self {
        self.max_skew = skew;
        self
    }

    /// Signs every message with this shared fleet key (HMAC-SHA256, at least 16
    /// bytes; 32 random bytes are plenty), and takes only messages signed with
    /// it: an unsigned message, or one signed with another key or altered, is
    /// refused and counted, and so is a signed message older than
    /// [`live_after`](Self::live_after) (a replay). Every instance of the fleet
    /// needs the same key. A holder of the key can still pose as any instance:
    /// see the crate docs' trust boundary.
    #[must_use]
    pub fn signing_key(mut self, key: impl AsRef<[u8]>) -> Self {
        self.signing_key = Some(key.as_ref().to_vec());
        self
    }

    /// The password Redis asks for (`AUTH password`, the `requirepass` of a
    /// server without ACL users), instead of one in the URL: no escaping needed.
    #[must_use]
    pub fn redis_password(mut self, password: impl Into<String>) -> Self {
        self.redis_password = Some(password.into());
        self
    }

    /// A Redis ACL user and its password (`AUTH username password`), instead of
    /// those in the URL. An ACL user limited to the namespace's keys and channel
    /// is enough for the fleet: see the crate's README.
    #[must_use]
    pub fn redis_user(mut self, username: impl Into<String>, password: impl Into<String>) -> Self {
        self.redis_username = Some(username.into());
        self.redis_password = Some(password.into());
        self
    }

    /// The namespace.
    pub fn get_namespace(&self) -> &str {
        &self.namespace
    }

    /// The instance id.
    pub fn get_instance_id(&self) -> &str {
        &self.instance_id
    }

    pub(crate) fn heartbeat_key(&self, instance: &str) -> String {
        format!("{}:hb:{instance}", self.namespace)
    }

    pub(crate) fn heartbeat_pattern(&self) -> String {
        format!("{}:hb:*", self.namespace)
    }

    pub(crate) fn channel(&self) -> String {
        format!("{}:events", self.namespace)
    }

    pub(crate) fn validate(&self) -> Result<(), FleetError> {
        let bad = |field: &'static str, why: &'static str| Err(FleetError::Config { field, why });
        if self.namespace.is_empty() || self.namespace.contains(['*', '?', '[', ']', '\\']) {
            return bad(
                "namespace",
                "must be non-empty, without glob characters (* ? [ ] \\)",
            );
        }
        if !name_ok(&self.instance_id) {
            return bad(
                "instance_id",
                "must be 1 to 200 bytes, without control characters",
            );
        }
        if !self.quorum.is_valid() {
            return bad("quorum", "a fraction must be in (0, 1]");
        }
        if self.heartbeat_every.is_zero() || self.heartbeat_every >= self.live_after {
            return bad("heartbeat_every", "must be above zero and under live_after");
        }
        // The heartbeat key's TTL, which Redis takes only so far (a `PX` whose
        // expiry overflows its clock is refused, and the key never written).
        if self.live_after.as_millis() == 0 || self.live_after > MAX_LIVE_AFTER {
            return bad("live_after", "must be at least 1 ms and at most a day");
        }
        if self.max_open.is_zero() {
            return bad("max_open", "must be above zero");
        }
        if self.queue_capacity == 0 {
            return bad("queue_capacity", "must be above zero");
        }
        if self.io_timeout.is_zero() {
            return bad("io_timeout", "must be above zero");
        }
        if self.reconnect_min.is_zero() || self.reconnect_max < self.reconnect_min {
            return bad("reconnect", "min must be above zero and max at least min");
        }
        if self.signing_key.as_ref().is_some_and(|k| k.len() < 16) {
            return bad("signing_key", "must be at least 16 bytes");
        }
        Ok(())
    }

    /// The key that signs this fleet's messages, if one is set.
    pub(crate) fn signer(&self) -> Option<SigningKey> {
        let key = self.signing_key.as_ref()?;
        Some(SigningKey::new(key, &self.namespace))
    }

    /// The Redis client: the URL, with the credentials set apart.
    pub(crate) fn client(&self) -> Result<redis::Client, FleetError> {
        let url = |e: redis::RedisError| FleetError::Url(e.to_string());
        let mut info = self.url.as_str().into_connection_info().map_err(url)?;
        let mut settings = info.redis_settings().clone();
        if let Some(username) = &self.redis_username {
            settings = settings.set_username(username);
        }
        if let Some(password) = &self.redis_password {
            settings = settings.set_password(password);
        }
        info = info.set_redis_settings(settings);
        redis::Client::open(info).map_err(url)
    }
}

impl fmt::Debug for FleetConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The URL may carry a password, and the key is secret: never printed.
        f.debug_struct("FleetConfig")
            .field("namespace", &self.namespace)
            .field("instance_id", &self.instance_id)
            .field("quorum", &self.quorum)
            .field("heartbeat_every", &self.heartbeat_every)
            .field("live_after", &self.live_after)
            .field("max_open", &self.max_open)
            .field("queue_capacity", &self.queue_capacity)
            .field("join_wait", &self.join_wait)
            .field("max_skew", &self.max_skew)
            .field("signed", &self.signing_key.is_some())
            .field("redis_username", &self.redis_username)
            .finish_non_exhaustive()
    }
}

fn default_instance_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    format!("{}-{:08x}", std::process::id(), h.finish() as u32)
}

/// Why a fleet could not start.
#[derive(Debug)]
#[non_exhaustive]
pub enum FleetError {
    /// A setting is out of range.
    Config {
        /// The setting.
        field: &'static str,
        /// What it must be.
        why: &'static str,
    },
    /// The Redis URL does not parse (the message never includes the URL).
    Url(String),
    /// An override was not issued: this instance holds
    /// [`MAX_OVERRIDES`](crate::MAX_OVERRIDES) for other keys (releases
    /// included, which linger), and none has ended yet.
    OverridesFull,
}

impl fmt::Display for FleetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FleetError::Config { field, why } => write!(f, "fleet setting `{field}` {why}"),
            FleetError::Url(e) => write!(f, "bad Redis URL: {e}"),
            FleetError::OverridesFull => write!(
                f,
                "the fleet holds MAX_OVERRIDES overrides for other keys: wait for one to end"
            ),
        }
    }
}

impl std::error::Error for FleetError {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::num::NonZeroUsize;

    fn config() -> FleetConfig {
        FleetConfig::new("redis://127.0.0.1:9/")
    }

    /// The setting `validate` refuses `config` for, if any.
    fn refused(config: &FleetConfig) -> Option<&'static str> {
        match config.validate() {
            Ok(()) => None,
            Err(FleetError::Config { field, .. }) => Some(field),
            Err(other) => panic!("{other:?}"),
        }
    }

    /// Each setting is refused by name just past its bound, and taken at it.
    #[test]
    fn each_setting_is_refused_by_name_past_its_bound() {
        let ms = Duration::from_millis;
        let s = Duration::from_secs;
        let two = Quorum::AtLeast(NonZeroUsize::new(2).unwrap());
        let bad = [
            (config().namespace(""), "namespace"),
            (config().instance_id(""), "instance_id"),
            (config().instance_id("a\nb"), "instance_id"),
            (config().instance_id("x".repeat(201)), "instance_id"),
            (
                config().quorum(Quorum::Fraction {
                    of_live: 0.0,
                    at_least: NonZeroUsize::MIN,
                }),
                "quorum",
            ),
            (config().heartbeat_every(Duration::ZERO), "heartbeat_every"),
            (
                config().heartbeat_every(s(3)).live_after(s(3)),
                "heartbeat_every",
            ),
            (
                config()
                    .heartbeat_every(Duration::from_micros(1))
                    .live_after(Duration::from_micros(999)),
                "live_after",
            ),
            (config().max_open(Duration::ZERO), "max_open"),
            (config().queue_capacity(0), "queue_capacity"),
            (config().io_timeout(Duration::ZERO), "io_timeout"),
            (config().reconnect(Duration::ZERO, s(1)), "reconnect"),
            (config().reconnect(s(2), ms(1999)), "reconnect"),
            (config().signing_key([7; 15]), "signing_key"),
        ];
        for (config, field) in bad {
            assert_eq!(refused(&config), Some(field), "{config:?}");
        }
        let good = [
            config().quorum(two),
            config().instance_id("x".repeat(200)),
            config().heartbeat_every(ms(999)).live_after(s(1)),
            config()
                .heartbeat_every(Duration::from_micros(1))
                .live_after(ms(1)),
            config().reconnect(s(2), s(2)),
            config().signing_key([7; 16]),
        ];
        for config in good {
            assert_eq!(refused(&config), None, "{config:?}");
        }
    }

    /// The accessors give what was set; a default instance id is valid, made
    /// of the process id and a suffix that differs between configurations.
    #[test]
    fn the_accessors_and_a_default_instance_id() {
        let (a, b) = (config(), config());
        assert_eq!(refused(&a), None);
        let pid = format!("{}-", std::process::id());
        assert!(a.get_instance_id().starts_with(&pid), "{a:?}");
        assert_ne!(a.get_instance_id(), b.get_instance_id());
        let c = config().namespace("checkout").instance_id("checkout-1");
        let got = (c.get_namespace(), c.get_instance_id());
        assert_eq!(got, ("checkout", "checkout-1"));
    }

    /// An error says what went wrong, and for a setting which one.
    #[test]
    fn an_error_names_its_setting() {
        let e = config().queue_capacity(0).validate().unwrap_err();
        let shown = e.to_string();
        assert_eq!(shown, "fleet setting `queue_capacity` must be above zero");
        let url = FleetError::Url("no host".into()).to_string();
        assert_eq!(url, "bad Redis URL: no host");
        assert!(
            FleetError::OverridesFull
                .to_string()
                .contains("MAX_OVERRIDES")
        );
    }
}
