//! What the dashboard shows: [`Source`], a set of [`Breakers`] with names.

use crate::fleet::FleetSource;
use crate::push::Push;
use cutout::{CircuitBreaker, Registry, Transition};
use std::fmt::{Display, Write};
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

/// How often the sampler reads the breakers, unless [`Source::tick`] says otherwise.
pub const TICK: Duration = Duration::from_millis(250);
/// The shortest tick [`Source::tick`] takes.
pub const MIN_TICK: Duration = Duration::from_millis(50);
/// The longest tick [`Source::tick`] takes.
pub const MAX_TICK: Duration = Duration::from_secs(60);
/// The most event streams a router serves at once unless
/// [`Source::max_streams`] says otherwise: one per open page.
pub const MAX_STREAMS: usize = 128;

/// The thresholds a breaker's rates are drawn against. A breaker does not report
/// its configuration, so the source states them; `None` draws no line.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Thresholds {
    /// The failure-rate threshold, 0 to 1.
    pub failure_rate: Option<f64>,
    /// The slow-call-rate threshold, 0 to 1.
    pub slow_call_rate: Option<f64>,
}

/// Breakers with names, as the dashboard reads them once per tick.
///
/// Implemented for a [`Registry`] (through [`Source::registry`]) and for a list
/// of named breakers (through [`Source::breaker`]); implement it for anything
/// else that holds breakers, for example a breaker that is rebuilt at run time.
///
/// The dashboard tells breakers apart by name and address. A breaker rebuilt
/// in place (a `RwLock<CircuitBreaker>` whose content is replaced) keeps the
/// old one's card, chart and events, and is known for a new breaker when one
/// of its counts (admitted, rejected, or transitions of one reason) is below
/// the old one's: from then on all of its own counts count. One read first
/// when every one of its counts has caught up with the old one's is taken for
/// the old one, and only what it counted beyond them shows.
pub trait Breakers: Send + Sync + 'static {
    /// Calls `f` once per breaker with its name and thresholds.
    fn for_each(&self, f: &mut dyn FnMut(&str, &CircuitBreaker, Thresholds));
}

struct FromRegistry<K: Hash + Eq + Send + Sync + 'static> {
    registry: Arc<Registry<K>>,
    thresholds: Thresholds,
}

impl<K> Breakers for FromRegistry<K>
where
    K: Display + Hash + Eq + Clone + Send + Sync + 'static,
{
    fn for_each(&self, f: &mut dyn FnMut(&str, &CircuitBreaker, Thresholds)) {
        let mut name = String::new();
        self.registry.for_each(|key, breaker| {
            name.clear();
            // A Display into a String cannot fail.
            let _ = write!(name, "{key}");
            f(&name, breaker, self.thresholds);
        });
        // Not in the registry's `for_each`, yet Open it turns away every key
        // that finds no room: the page must show it.
        if let Some(overflow) = self.registry.overflow() {
            f(overflow.name(), overflow, self.thresholds);
        }
    }
}

struct Named {
    list: Vec<(String, Arc<CircuitBreaker>, Thresholds)>,
}

impl Breakers for Named {
    fn for_each(&self, f: &mut dyn FnMut(&str, &CircuitBreaker, Thresholds)) {
        for (name, breaker, thresholds) in &self.list {
            f(name, breaker, *thresholds);
        }
    }
}

/// What a dashboard shows, and whether it offers controls: pass it to
/// [`router`](crate::router).
///
/// # Examples
/// ```
/// use cutout::{CircuitBreaker, Registry};
/// use std::sync::Arc;
///
/// let registry: Arc<Registry<String>> = Arc::new(Registry::new(CircuitBreaker::builder())?);
/// let payments = Arc::new(CircuitBreaker::builder().name("payments").build()?);
/// let source = cutout_dashboard::Source::new()
///     .thresholds(Some(0.5), None)
///     .registry(registry)
///     .breaker("payments", payments);
/// let app: axum::Router = axum::Router::new().nest("/breakers", cutout_dashboard::router(source));
/// # drop(app);
/// # Ok::<(), cutout::ConfigError>(())
/// ```
pub struct Source {
    pub(crate) sets: Vec<Arc<dyn Breakers>>,
    named: Vec<(String, Arc<CircuitBreaker>, Thresholds)>,
    thresholds: Thresholds,
    pub(crate) controls: bool,
    pub(crate) fleet: Option<Arc<dyn FleetSource>>,
    pub(crate) tick: Duration,
    pub(crate) max_streams: usize,
    /// Host names a request may be sent to beyond the loopback names and IP
    /// addresses (see [`Source::allow_host`]), lowercased.
    pub(crate) hosts: Vec<String>,
    pub(crate) push: Arc<Push>,
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Source")
            .field("sets", &self.sets.len())
            .field("named", &self.named.len())
            .field("controls", &self.controls)
            .field("fleet", &self.fleet.is_some())
            .field("tick", &self.tick)
            .field("max_streams", &self.max_streams)
            .field("hosts", &self.hosts)
            .finish_non_exhaustive()
    }
}

impl Default for Source {
    fn default() -> Self {
        Source::new()
    }
}

impl Source {
    /// An empty source, without controls.
    #[must_use]
    pub fn new() -> Source {
        Source {
            sets: Vec::new(),
            named: Vec::new(),
            thresholds: Thresholds::default(),
            controls: false,
            fleet: None,
            tick: TICK,
            max_streams: MAX_STREAMS,
            hosts: Vec::new(),
            push: Arc::default(),
        }
    }

    /// How often the sampler reads every breaker: [`TICK`] (four times a second)
    /// unless set here, kept within [`MIN_TICK`] and [`MAX_TICK`]. Each stream
    /// gets a frame per tick, and one per push (see [`listener`](Self::listener)).
    #[must_use]
    pub fn tick(mut self, every: Duration) -> Self {
        self.tick = every.clamp(MIN_TICK, MAX_TICK);
        self
    }

    /// The most event streams (`api/stream`, one per open page) served at once:
    /// [`MAX_STREAMS`] unless set here, at least 1. One more is refused with
    /// `503 Service Unavailable`, saying why, until a stream closes; the JSON
    /// snapshot is not counted. Each stream costs a render of its page per
    /// frame (shared with the streams that show the same page).
    #[must_use]
    pub fn max_streams(mut self, n: usize) -> Self {
        self.max_streams = n.max(1);
        self
    }

    /// Accepts requests sent to `host` (the host name alone, `ops.example.com`,
    /// not a URL; a port or a trailing dot is ignored, and so is case) beside
    /// those the router always accepts: sent to an IP address, to `localhost`,
    /// or to a name under `.localhost`. Any other `Host` is refused with
    /// `403 Forbidden`, saying so: a page from another site whose name was made
    /// to resolve to this server (DNS rebinding) is refused, so it can neither
    /// read the breakers nor send a control as if from this origin. Add each
    /// name the dashboard is reached by, behind a proxy too.
    ///
    /// # Examples
    /// ```
    /// let source = cutout_dashboard::Source::new().allow_host("ops.example.com");
    /// # drop(source);
    /// ```
    #[must_use]
    pub fn allow_host(mut self, host: &str) -> Self {
        self.hosts
            .push(crate::http::host_name(host).to_ascii_lowercase());
        self
    }

    /// A transition listener that pushes each transition to the open streams at
    /// once, instead of at the next tick: give it to
    /// [`Builder::on_transition`](cutout::Builder::on_transition) when the
    /// breakers are built, or call it from a listener of your own. It only
    /// raises a flag and wakes the sampler (no allocation, no I/O, no lock
    /// unless the sampler is waiting), which then reads every breaker at once
    /// (after at least [`PUSH_GAP`](crate::PUSH_GAP) since its last frame, so a
    /// storm of transitions costs at most one frame per gap). Without it, a
    /// transition shows at the next tick: none is missed either way.
    ///
    /// # Examples
    /// ```
    /// use cutout::CircuitBreaker;
    /// use std::sync::Arc;
    ///
    /// let source = cutout_dashboard::Source::new();
    /// let db = Arc::new(CircuitBreaker::builder().on_transition(source.listener()).build()?);
    /// let app = cutout_dashboard::router(source.breaker("db", db));
    /// # drop(app);
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn listener(&self) -> impl Fn(&Transition) + Send + Sync + 'static {
        let push = self.push.clone();
        move |_: &Transition| push.poke()
    }

    /// [`listener`](Self::listener) for a registry: give it to
    /// [`RegistryBuilder::on_transition`](cutout::RegistryBuilder::on_transition).
    ///
    /// That listener hears the keyed breakers only, not the overflow breaker of
    /// a registry with [`max_keys`](cutout::RegistryBuilder::max_keys): to push
    /// its transitions too, give [`listener`](Self::listener) to the shared
    /// builder's [`on_transition`](cutout::Builder::on_transition) as well.
    /// Without that, they show at the next tick.
    pub fn registry_listener<K>(&self) -> impl Fn(&K, &Transition) + Send + Sync + 'static {
        let push = self.push.clone();
        move |_: &K, _: &Transition| push.poke()
    }

    /// The thresholds drawn for the breakers added after this call.
    #[must_use]
    pub fn thresholds(mut self, failure_rate: Option<f64>, slow_call_rate: Option<f64>) -> Self {
        self.thresholds = Thresholds {
            failure_rate,
            slow_call_rate,
        };
        self
    }

    /// Every breaker of `registry`, its overflow breaker included: a keyed one
    /// named by its key's `Display`, the overflow breaker of a registry with
    /// [`max_keys`](cutout::RegistryBuilder::max_keys) by its own name
    /// (`"overflow"` unless
    /// [`overflow_name`](cutout::RegistryBuilder::overflow_name) says otherwise).
    #[must_use]
    pub fn registry<K>(mut self, registry: Arc<Registry<K>>) -> Self
    where
        K: Display + Hash + Eq + Clone + Send + Sync + 'static,
    {
        let thresholds = self.thresholds;
        self.sets.push(Arc::new(FromRegistry {
            registry,
            thresholds,
        }));
        self
    }

    /// One breaker under `name`.
    #[must_use]
    pub fn breaker(mut self, name: impl Into<String>, breaker: Arc<CircuitBreaker>) -> Self {
        self.named.push((name.into(), breaker, self.thresholds));
        self
    }

    /// Breakers from a [`Breakers`] of the application's own.
    #[must_use]
    pub fn breakers(mut self, set: Arc<dyn Breakers>) -> Self {
        self.sets.push(set);
        self
    }

    /// Shows `fleet`'s picture beside the breakers: live peers and quorum opens,
    /// and per breaker (matched by name) how many live peers report it Open.
    #[must_use]
    pub fn fleet(mut self, fleet: Arc<dyn FleetSource>) -> Self {
        self.fleet = Some(fleet);
        self
    }

    /// With `true`, the page offers force open, disable and reset per breaker, and
    /// the router accepts them as same-origin `POST`s. Mount such a router behind
    /// the application's own authentication: see the crate docs.
    #[must_use]
    pub fn controls(mut self, on: bool) -> Self {
        self.controls = on;
        self
    }

    /// Every set, the named breakers last.
    pub(crate) fn finish(mut self) -> Source {
        if !self.named.is_empty() {
            let list = std::mem::take(&mut self.named);
            self.sets.push(Arc::new(Named { list }));
        }
        self
    }

    /// Calls `f` for every breaker of every set.
    pub(crate) fn for_each(&self, f: &mut dyn FnMut(&str, &CircuitBreaker, Thresholds)) {
        for set in &self.sets {
            set.for_each(f);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampler::{Sampler, rank};

    /// A capped registry's overflow breaker is listed under its name: Open, it
    /// turns away every key without room, and the page shows it.
    #[test]
    fn a_registry_lists_its_overflow_breaker() {
        let registry: Registry<String> =
            Registry::builder(CircuitBreaker::builder().consecutive_failures(1))
                .max_keys(1)
                .build()
                .unwrap();
        let _held = registry.get("a");
        let _ = registry.get("b").call(|| Err::<(), _>(()));
        let source = Source::new().registry(Arc::new(registry)).finish();
        let frame = Sampler::new().sample(&source, false);
        let rows: Vec<_> = (frame.rows.iter())
            .map(|r| (&*r.name, rank(r.state) < 3))
            .collect();
        assert_eq!(rows, [("overflow", true), ("a", false)]);
    }
}
