//! The fleet's two background threads: the publisher (transitions and
//! heartbeats) and the subscriber (the picture, then the channel), with their
//! reconnection backoff.

use super::Inner;
use crate::config::FleetError;
use crate::control::Override;
use crate::held::Held;
use crate::message::{Heartbeat, MAX_MESSAGE_BYTES, MAX_OPEN_PER_HEARTBEAT, Message, OpenEntry};
use crate::sign::SigningKey;
use crate::view::Counters;
use cutout::{Reason, State};
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime};

/// The heartbeat of `instance` at `now`, encoded: of the keys it holds `open`, the
/// earliest-ending ones that fit, at most [`MAX_OPEN_PER_HEARTBEAT`] and within
/// [`MAX_MESSAGE_BYTES`] (a receiver refuses a larger message whole), saying so if
/// it holds more ([`Heartbeat::more`]), and none whose key no receiver takes (over
/// [`MAX_NAME_BYTES`](crate::MAX_NAME_BYTES), or holding a control character).
/// Signed with `key`, if one is given.
pub(super) fn heartbeat(
    instance: &str,
    now: SystemTime,
    mut open: Vec<OpenEntry>,
    overrides: Vec<Override>,
    key: Option<&SigningKey>,
) -> Vec<u8> {
    open.retain(|e| crate::message::name_ok(&e.key));
    open.sort_by_key(|e| e.until);
    let held = open.len();
    open.truncate(MAX_OPEN_PER_HEARTBEAT);
    loop {
        let count = open.len();
        let beat = Message::Heartbeat(Heartbeat {
            instance: instance.to_owned(),
            sent_at: now,
            open: open.clone(),
            more: count < held,
            overrides: overrides.clone(),
        });
        let bytes = encode(&beat, key);
        if bytes.len() <= MAX_MESSAGE_BYTES || count == 0 {
            return bytes;
        }
        // Drop the latest-ending entries, about as many as the excess takes at
        // the average entry's size (at least one), and encode again.
        let excess = bytes.len() - MAX_MESSAGE_BYTES;
        let drop = (excess * count).div_ceil(bytes.len()).max(1);
        open.truncate(count.saturating_sub(drop));
    }
}

/// `message` encoded, signed with `key` if one is given (a transition stamped
/// now).
fn encode(message: &Message, key: Option<&SigningKey>) -> Vec<u8> {
    match key {
        Some(key) => key.seal(message),
        None => message.encode(),
    }
}

/// The instant `d` from now, or a century from now if that is further than an
/// `Instant` reaches (a setting of `Duration::MAX`: never, in effect).
fn later(d: Duration) -> Instant {
    const CENTURY: Duration = Duration::from_secs(100 * 365 * 86_400);
    let now = Instant::now();
    now.checked_add(d.min(CENTURY)).unwrap_or(now)
}

/// A reconnection backoff: from `min`, doubling to `max`, each wait jittered down
/// by up to half.
struct Backoff {
    min: Duration,
    max: Duration,
    next: Duration,
    seed: u64,
}

impl Backoff {
    fn new(min: Duration, max: Duration) -> Backoff {
        let seed = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(1, |d| d.subsec_nanos().into())
            | 1;
        Backoff {
            min,
            max,
            next: min,
            seed,
        }
    }

    fn reset(&mut self) {
        self.next = self.min;
    }

    fn wait(&mut self) -> Duration {
        // xorshift64: jitter only.
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        let half = self.next / 2;
        let jitter = half.mul_f64((self.seed % 1000) as f64 / 1000.0);
        let wait = half + jitter;
        self.next = self.next.saturating_mul(2).min(self.max);
        wait
    }
}

/// Sleeps up to `d`, waking early when the fleet stops, and keeping `tick`'s
/// upkeep on time meanwhile.
fn nap(inner: &Inner, d: Duration, tick: &mut Tick) {
    let end = later(d);
    while !inner.stopping() {
        tick.run(inner);
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        thread::park_timeout(left.min(Duration::from_millis(50)));
    }
}

/// The subscriber's upkeep, once a second, connected or not: the view drops
/// the peers it no longer hears from, and the quorums that changes are applied
/// ([`Inner::prune_view`]); with the `metrics` feature, the view is recorded.
struct Tick {
    last: Instant,
}

impl Tick {
    const EVERY: Duration = Duration::from_secs(1);

    fn new() -> Tick {
        Tick {
            last: Instant::now(),
        }
    }

    /// The upkeep, if a second has passed since the last.
    fn run(&mut self, inner: &Inner) {
        if self.last.elapsed() < Tick::EVERY {
            return;
        }
        self.last = Instant::now();
        inner.prune_view(self.last);
        #[cfg(feature = "metrics")]
        inner.view.record_metrics();
    }
}

/// A connection with the fleet's timeouts, if one can be made; its caller counts
/// a failure (once, with whatever else its attempt failed at).
fn connect(inner: &Inner) -> Option<redis::Connection> {
    let timeout = inner.config.io_timeout;
    let con = inner.client.get_connection_with_timeout(timeout).ok()?;
    let ok =
        con.set_read_timeout(Some(timeout)).is_ok() && con.set_write_timeout(Some(timeout)).is_ok();
    ok.then_some(con)
}

/// Starts one of the fleet's two background threads, named `name`, running `body`
/// on the fleet's shared state.
pub(super) fn spawn(
    inner: &Arc<Inner>,
    name: &str,
    body: fn(&Inner),
) -> Result<JoinHandle<()>, FleetError> {
    let inner = inner.clone();
    thread::Builder::new()
        .name(name.into())
        .spawn(move || body(&inner))
        .map_err(|_| FleetError::Config {
            field: "threads",
            why: "could not be spawned",
        })
}

/// The publisher's connection to Redis, and when to try another once it is
/// gone: its backoff grows with each failure, and is reset by a command that
/// succeeds.
struct Link {
    con: Option<redis::Connection>,
    backoff: Backoff,
    retry_at: Instant,
}

impl Link {
    /// Runs `send` on the connection, if there is one, and counts it published, or
    /// counts the error and drops the connection (see `failed`).
    fn send<T>(
        &mut self,
        inner: &Inner,
        send: impl FnOnce(&mut redis::Connection) -> redis::RedisResult<T>,
    ) {
        let Some(con) = self.con.as_mut() else {
            return;
        };
        match send(con) {
            Ok(_) => {
                Counters::bump(&inner.counters.published);
                // Redis took a command: the outage, if any, is over. Not on
                // connecting, which a Redis that refuses every write (at its
                // `maxmemory`, a read-only replica, an ACL) allows.
                self.backoff.reset();
            }
            Err(_) => self.failed(inner),
        }
    }

    /// Counts a Redis error, drops the connection, and backs off before the next.
    fn failed(&mut self, inner: &Inner) {
        Counters::bump(&inner.counters.redis_errors);
        self.con = None;
        self.retry_at = later(self.backoff.wait());
    }
}

pub(super) fn publish_loop(inner: &Inner) {
    let config = &inner.config;
    let channel = config.channel();
    let hb_key = config.heartbeat_key(&config.instance_id);
    let mut link = Link {
        con: None,
        backoff: Backoff::new(config.reconnect_min, config.reconnect_max),
        retry_at: Instant::now(),
    };
    let mut next_heartbeat = Instant::now();
    // The keys this instance holds Open, as its own transitions said, taken in
    // generation order per key.
    let mut held = Held::new(config.max_open);
    loop {
        if inner.stopping() {
            if let Some(con) = link.con.as_mut() {
                let _: redis::RedisResult<()> = redis::cmd("DEL").arg(&hb_key).query(con);
            }
            return;
        }
        if link.con.is_none() && Instant::now() >= link.retry_at {
            link.con = connect(inner);
            match link.con {
                Some(_) => next_heartbeat = Instant::now(),
                None => link.failed(inner),
            }
        }
        let mut outgoing = Vec::new();
        // Transitions: each updates what the heartbeat lists, and is published
        // if Redis is there (if not, the next heartbeat carries the picture).
        while let Some(report) = inner.queue.pop() {
            // A transition older than one of its key already taken (two threads'
            // events, delivered out of order) is stale: published, it would make
            // the peers withdraw the newer one.
            if !held.take(&report, Instant::now()) {
                Counters::bump(&inner.counters.stale_dropped);
                continue;
            }
            // An open a quorum caused is an echo: no peer counts it, and the
            // next heartbeat lists it. Published, each trip would cost the
            // fleet a message per peer's echo, delivered to every peer (peers
            // squared), and an early heartbeat each.
            if report.state == State::Open && report.reason == Reason::External.as_str() {
                continue;
            }
            // The heartbeat key is the picture joiners read: keep it current.
            next_heartbeat = Instant::now();
            outgoing.push(Message::Transition(report));
        }
        // Overrides issued here: sent at once too (if Redis is not there, the
        // heartbeats relay them).
        let issued =
            std::mem::take(&mut *inner.outbox.lock().unwrap_or_else(PoisonError::into_inner));
        outgoing.extend(issued.into_iter().map(Message::Control));
        for message in outgoing.drain(..) {
            let bytes = encode(&message, inner.signer.as_ref());
            link.send(inner, |c| {
                redis::cmd("PUBLISH")
                    .arg(&channel)
                    .arg(bytes)
                    .query::<i64>(c)
            });
        }
        // Overrides that ended are acted on here, Redis or not.
        let override_end = inner.sync_overrides_and_plan().map(|end| {
            let left = end.duration_since(SystemTime::now()).unwrap_or_default();
            later(left)
        });
        if Instant::now() >= next_heartbeat {
            let now = SystemTime::now();
            held.prune(Instant::now(), now);
            if link.con.is_some() {
                let key = inner.signer.as_ref();
                let relay = inner.view.lock().relay_overrides(now);
                let bytes = heartbeat(&config.instance_id, now, held.open(), relay, key);
                let ttl = u64::try_from(config.live_after.as_millis()).unwrap_or(u64::MAX);
                link.send(inner, |c| {
                    redis::pipe()
                        .cmd("SET")
                        .arg(&hb_key)
                        .arg(&bytes)
                        .arg("PX")
                        .arg(ttl)
                        .ignore()
                        .cmd("PUBLISH")
                        .arg(&channel)
                        .arg(&bytes)
                        .ignore()
                        .query::<()>(c)
                });
            }
            next_heartbeat = later(config.heartbeat_every);
        }
        let wake = if link.con.is_some() {
            next_heartbeat
        } else {
            link.retry_at.min(next_heartbeat)
        };
        let wake = override_end.map_or(wake, |end| end.min(wake));
        if inner.queue.is_empty() {
            thread::park_timeout(wake.saturating_duration_since(Instant::now()));
        }
    }
}

pub(super) fn subscribe_loop(inner: &Inner) {
    let config = &inner.config;
    let mut backoff = Backoff::new(config.reconnect_min, config.reconnect_max);
    // Kept on time between subscriptions too (Redis down is when the view's
    // ageing and the error counter matter most): late by one attempt at most
    // (two connections and a SUBSCRIBE, each within `io_timeout`, then the
    // picture).
    let mut tick = Tick::new();
    while !inner.stopping() {
        let began = Instant::now();
        if subscribe_once(inner, &mut tick).is_ok() {
            return;
        }
        Counters::bump(&inner.counters.redis_errors);
        // A session that lasted resets the backoff: this is a new outage.
        if began.elapsed() > config.reconnect_max {
            backoff.reset();
        }
        let wait = backoff.wait();
        nap(inner, wait, &mut tick);
    }
}

/// One subscription: subscribe, read the picture, then apply messages until the
/// connection fails (`Err`) or the fleet stops (`Ok`), running `tick`'s upkeep
/// meanwhile.
fn subscribe_once(inner: &Inner, tick: &mut Tick) -> Result<(), ()> {
    let config = &inner.config;
    let mut sub = connect(inner).ok_or(())?;
    let mut query = connect(inner).ok_or(())?;
    let mut pubsub = sub.as_pubsub();
    // Under `io_timeout`, as every command; then short reads, so that a stop
    // is seen soon (a reply slower than those is no failure).
    pubsub.subscribe(config.channel()).map_err(|_| ())?;
    pubsub
        .set_read_timeout(Some(Duration::from_millis(100)))
        .map_err(|_| ())?;
    // Subscribed first, then the picture: nothing published in between is missed.
    read_picture(inner, &mut query)?;
    drop(query);
    let (lock, cond) = &inner.synced;
    *lock.lock().unwrap_or_else(PoisonError::into_inner) = true;
    cond.notify_all();
    let mut echo = Echo::new(published(inner));
    loop {
        if inner.stopping() {
            return Ok(());
        }
        match pubsub.get_message() {
            Ok(msg) => {
                apply(inner, msg.get_payload_bytes());
                echo.heard(published(inner));
            }
            Err(e) if e.is_timeout() => {}
            Err(_) => return Err(()),
        }
        // The bound is `live_after`: a subscription that delivered nothing
        // this instance published for that long delivered none of its peers'
        // heartbeats either, and they age out of the view by then. A shorter
        // one would resubscribe (and read the picture again) where a loaded
        // Redis only delays delivery.
        if echo.deaf(published(inner), Instant::now(), config.live_after) {
            return Err(());
        }
        tick.run(inner);
    }
}

/// How many messages the publisher has got through to Redis.
fn published(inner: &Inner) -> u64 {
    // Relaxed: a count, read on its own (nothing it publishes is read through it).
    inner.counters.published.load(Ordering::Relaxed)
}

/// Whether a subscription still delivers. What this instance publishes comes
/// back on its own subscription (its heartbeats at least, every
/// `heartbeat_every`), and a connection that went silent without closing (a
/// NAT or load balancer that dropped it: no FIN, no RST) only times out reads,
/// as an idle one does. So a subscription is deaf once a message published
/// after the last one it delivered has not come back within a bound.
struct Echo {
    /// [`published`] when the subscription last delivered a message.
    published: u64,
    /// When a message published since was first seen not yet delivered.
    waiting_since: Option<Instant>,
}

impl Echo {
    fn new(published: u64) -> Echo {
        Echo {
            published,
            waiting_since: None,
        }
    }

    /// A message was delivered, with `published` counted by then: anything
    /// published before it may be on its way still.
    fn heard(&mut self, published: u64) {
        self.published = published;
        self.waiting_since = None;
    }

    /// Whether a message published since the last one delivered (`published`
    /// counted at `now`) has waited `bound` or longer.
    fn deaf(&mut self, published: u64, now: Instant, bound: Duration) -> bool {
        if published == self.published {
            return false;
        }
        let since = *self.waiting_since.get_or_insert(now);
        now.saturating_duration_since(since) >= bound
    }
}

/// Reads every heartbeat in the namespace: the fleet's current picture. The
/// scan walks the whole database (a pattern only filters what it returns), and
/// ends when Redis says it is done, which a full iteration always is, or when
/// the fleet stops: a database of millions of other keys is read through. A key
/// that names no instance ([`instance_of`]) is left out, unread and uncounted.
fn read_picture(inner: &Inner, con: &mut redis::Connection) -> Result<(), ()> {
    let pattern = inner.config.heartbeat_pattern();
    let prefix = inner.config.heartbeat_key("");
    let mut cursor: u64 = 0;
    loop {
        // Bytes: a name that is not UTF-8 would fail the whole reply as strings.
        let (next, keys): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(1000)
            .query(con)
            .map_err(|_| ())?;
        let ours: Vec<(&Vec<u8>, &str)> = keys
            .iter()
            .filter_map(|key| Some((key, instance_of(key, &prefix)?)))
            .collect();
        if !ours.is_empty() {
            let mut mget = redis::cmd("MGET");
            for (key, _) in &ours {
                mget.arg(*key);
            }
            let values: Vec<Option<Vec<u8>>> = mget.query(con).map_err(|_| ())?;
            for ((_, instance), bytes) in ours.iter().zip(values) {
                if let Some(bytes) = bytes {
                    apply_from(inner, &bytes, Some(instance));
                }
            }
        }
        cursor = next;
        if cursor == 0 || inner.stopping() {
            return Ok(());
        }
    }
}

/// The instance whose heartbeat key `key` is, under `prefix` (`{ns}:hb:`): none
/// for a name that is not UTF-8 (a broken or hostile client's: no instance id
/// is), or that does not start with the prefix (never to be applied unchecked).
fn instance_of<'k>(key: &'k [u8], prefix: &str) -> Option<&'k str> {
    std::str::from_utf8(key).ok()?.strip_prefix(prefix)
}

fn apply(inner: &Inner, bytes: &[u8]) {
    apply_from(inner, bytes, None);
}

/// [`apply`], for a message read from `instance`'s heartbeat key if given.
fn apply_from(inner: &Inner, bytes: &[u8], instance: Option<&str>) {
    let changed = inner
        .view
        .lock()
        .apply_from(bytes, instance, Instant::now(), SystemTime::now());
    if !changed.is_empty() {
        inner.apply_quorum(&changed);
    }
    inner.sync_overrides_and_wake();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::MAX_NAME_BYTES;
    use crate::{Fleet, FleetConfig, MAX_OVERRIDES, OverrideMode};
    use cutout::CircuitBreaker;

    /// The longest waits a `FleetConfig` takes (`Duration::MAX` for a
    /// reconnection) are further than an `Instant` reaches: they saturate, a
    /// century on (`Instant::now() + d` panicked in the background threads).
    #[test]
    fn the_longest_waits_saturate() {
        let year = Duration::from_secs(365 * 86_400);
        let mut backoff = Backoff::new(Duration::MAX, Duration::MAX);
        for d in [Duration::MAX, backoff.wait(), backoff.wait(), year] {
            assert!(later(d) >= Instant::now() + year.min(d / 2), "{d:?}");
        }
        // Each wait short of a century is kept whole.
        let before = Instant::now();
        assert!(later(year * 50) >= before + year * 50);
    }

    /// The reconnection backoff: from `min`, doubling to `max`, each wait
    /// jittered down by up to half (in the upper half of its step, and varying
    /// from wait to wait), and from `min` again once reset.
    #[test]
    fn a_backoff_doubles_with_jitter_and_starts_again_once_reset() {
        let (s, ms) = (Duration::from_secs, Duration::from_millis);
        for seed in [1, 12_345, 999_999_999] {
            let mut backoff = Backoff::new(s(1), s(8));
            backoff.seed = seed;
            for step in [1, 2, 4, 8, 8, 1] {
                if step == 1 {
                    backoff.reset();
                }
                let wait = backoff.wait();
                assert!(wait >= s(step) / 2 && wait < s(step), "{wait:?}");
            }
            let mut steady = Backoff::new(s(1), s(1));
            steady.seed = seed;
            let waits: std::collections::HashSet<Duration> =
                (0..100).map(|_| steady.wait()).collect();
            assert!(waits.len() > 50, "{} waits of 100 differ", waits.len());
            assert!(waits.iter().all(|w| *w >= ms(500) && *w < s(1)));
        }
    }

    /// A subscription is deaf once a message published after the last one it
    /// delivered has waited the bound, counted from when it was first seen
    /// waiting; one that delivers, or has nothing published to deliver (the
    /// publisher is disconnected), is not.
    #[test]
    fn a_subscription_is_deaf_once_a_published_message_waits_the_bound() {
        let bound = Duration::from_secs(1);
        let at = |s: u64| Instant::now() + Duration::from_secs(s);
        let mut echo = Echo::new(5);
        assert!(!echo.deaf(5, at(10), bound), "nothing published since");
        assert!(!echo.deaf(6, at(20), bound), "one just published");
        assert!(
            !echo.deaf(7, at(20) + bound / 2, bound),
            "not yet the bound"
        );
        assert!(echo.deaf(7, at(21), bound), "the bound since first seen");
        echo.heard(7);
        assert!(!echo.deaf(7, at(30), bound), "delivered");
        assert!(!echo.deaf(8, at(30), bound));
        echo.heard(7);
        assert!(
            !echo.deaf(8, at(31), bound),
            "waiting again from a delivery"
        );
        assert!(echo.deaf(8, at(32), bound));
    }

    /// A heartbeat key names its instance only under the exact prefix and in
    /// UTF-8: a name with a byte that is not, or a key the scan's pattern
    /// matched another way, names none.
    #[test]
    fn a_key_names_an_instance_only_under_the_exact_prefix_in_utf8() {
        let prefix = "ns:hb:";
        assert_eq!(instance_of(b"ns:hb:a", prefix), Some("a"));
        assert_eq!(instance_of(b"ns:hb:", prefix), Some(""));
        assert_eq!(instance_of(b"ns:hb:\xff", prefix), None);
        assert_eq!(instance_of(b"nsb:hb:a", prefix), None);
        assert_eq!(instance_of(b"xns:hb:a", prefix), None);
    }

    /// A heartbeat of 256 Open keys of the longest name every receiver takes is
    /// past `MAX_MESSAGE_BYTES`: the publisher sends the earliest-ending ones that
    /// fit (receivers refuse a larger message whole), and none whose key no
    /// receiver takes.
    #[test]
    fn a_heartbeat_sends_the_earliest_ending_keys_that_fit() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let entry = |i: usize, len: usize| OpenEntry {
            key: format!("{i:03}{}", "k".repeat(len - 3)),
            until: now + Duration::from_secs(1 + i as u64),
            generation: 1,
            level: 0,
            external: false,
        };
        let mut open: Vec<OpenEntry> = (0..MAX_OPEN_PER_HEARTBEAT)
            .map(|i| entry(i, MAX_NAME_BYTES))
            .collect();
        open.push(entry(0, MAX_NAME_BYTES + 1));
        let bytes = heartbeat("a", now, open.clone(), Vec::new(), None);
        assert!(bytes.len() <= MAX_MESSAGE_BYTES, "{} bytes", bytes.len());
        let Ok(Message::Heartbeat(sent)) = Message::decode(&bytes, now, Duration::MAX) else {
            panic!("refused");
        };
        let n = sent.open.len();
        assert!(n > 200 && n < MAX_OPEN_PER_HEARTBEAT, "{n} entries");
        assert_eq!(sent.open, open[..n], "the earliest-ending, in order");
        assert!(sent.more, "it holds more than it lists");
        let few = heartbeat("a", now, open[..3].to_vec(), Vec::new(), None);
        let Ok(Message::Heartbeat(few)) = Message::decode(&few, now, Duration::MAX) else {
            panic!("refused");
        };
        assert_eq!((few.open.len(), few.more), (3, false));
        // Signed, the envelope takes room too: still within the limit.
        let key = SigningKey::new(&[7; 32], "cutout");
        let signed = heartbeat("a", now, open.clone(), Vec::new(), Some(&key));
        assert!(signed.len() <= MAX_MESSAGE_BYTES, "{} bytes", signed.len());
        let Ok(Message::Heartbeat(sent)) = Message::decode(&signed, now, Duration::MAX) else {
            panic!("refused");
        };
        assert!(
            sent.open.len() > 200 && sent.more,
            "{} entries",
            sent.open.len()
        );
    }

    /// A signed heartbeat from an instance with the longest id, relaying the
    /// most overrides with the longest names, each character one JSON writes in
    /// two bytes (a quote), still fits, and lists Open keys beside them.
    #[test]
    fn a_heartbeat_relaying_the_most_overrides_of_the_longest_names_fits() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let quotes =
            |prefix: String| format!("{prefix}{}", "\"".repeat(MAX_NAME_BYTES - prefix.len()));
        let overrides: Vec<Override> = (0..MAX_OVERRIDES)
            .map(|i| Override {
                key: quotes(format!("{i:02}")),
                mode: OverrideMode::ForceOpen,
                issuer: quotes(String::new()),
                issued_at: now,
                until: now + Duration::from_secs(3600),
            })
            .collect();
        let open = |i: u64| OpenEntry {
            key: format!("k{i}"),
            until: now + Duration::from_secs(1 + i),
            generation: 1,
            level: 0,
            external: false,
        };
        let key = SigningKey::new(&[7; 32], "cutout");
        let id = quotes(String::new());
        let bytes = heartbeat(&id, now, (0..50).map(open).collect(), overrides, Some(&key));
        assert!(bytes.len() <= MAX_MESSAGE_BYTES, "{} bytes", bytes.len());
        let decoded =
            Message::decode_counted(&bytes, now, Duration::MAX, Duration::ZERO, Some(&key));
        let Ok(Message::Heartbeat(sent)) = decoded.map(|d| d.message) else {
            panic!("refused");
        };
        assert_eq!((sent.overrides.len(), sent.open.len()), (MAX_OVERRIDES, 50));
    }

    /// An override learned from a peer that ends before the publisher's next
    /// planned wake (a shorter one of the same mode: nothing to apply when it
    /// arrives) ends on time, not at the next heartbeat or reconnection.
    #[test]
    fn a_peers_override_ends_at_its_end() {
        let config = FleetConfig::new("redis://127.0.0.1:9/")
            .join_wait(Duration::ZERO)
            .heartbeat_every(Duration::from_secs(20))
            .live_after(Duration::from_secs(60))
            .reconnect(Duration::from_secs(20), Duration::from_secs(40));
        let fleet = Fleet::start(config).unwrap();
        // Attached, not built by the fleet: its transitions wake nothing.
        let db = Arc::new(CircuitBreaker::builder().build().unwrap());
        fleet.attach("db", &db);
        let wall = SystemTime::now();
        let force = |issuer: &str, issued_at, until| {
            let o = Override {
                key: "db".into(),
                mode: OverrideMode::ForceOpen,
                issuer: issuer.into(),
                issued_at,
                until,
            };
            Message::Control(o).encode()
        };
        apply(
            &fleet.inner,
            &force("a", wall, wall + Duration::from_secs(600)),
        );
        assert_eq!(db.state(), State::ForcedOpen);
        let end = wall + Duration::from_millis(300);
        apply(
            &fleet.inner,
            &force("b", wall + Duration::from_millis(1), end),
        );
        assert_eq!(db.state(), State::ForcedOpen, "the same mode");
        // Generous for a loaded machine; the publisher's next wake without the
        // override's end is the reconnection, 10 s or more away.
        let deadline = end + Duration::from_secs(5);
        while db.state() != State::Closed && SystemTime::now() < deadline {
            thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(db.state(), State::Closed, "reset at the override's end");
    }
}
