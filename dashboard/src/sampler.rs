//! The one sampler per router: reads every breaker's metrics each tick, turns
//! counters into rates and transition counts into events, and publishes one
//! sorted [`Frame`] that every client renders its own page from.

use crate::fleet::{FleetOverride, MAX_FLEET_KEYS};
use crate::push::PUSH_GAP;
use crate::source::{Source, Thresholds};
use crate::view::{self, Query};
use cutout::{CandidateReport, Metrics, Reason, State, WindowCounts};
use std::collections::{HashMap, VecDeque};
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::watch;

/// Points kept per breaker for its chart (10 s at four ticks a second).
pub(crate) const HISTORY: usize = 40;
/// Transitions kept per breaker.
pub(crate) const RECENT: usize = 8;

/// One transition (or several of one reason within a tick).
#[derive(Clone, Debug)]
pub(crate) struct Event {
    /// Wall-clock milliseconds since the Unix epoch, at the tick that saw it.
    pub(crate) at_ms: u64,
    pub(crate) reason: Reason,
    pub(crate) count: u64,
    /// Seen at the breaker's first tick: made at any time before `at_ms`, since
    /// the breaker was built (a dashboard started during an incident shows it).
    pub(crate) earlier: bool,
}

/// A breaker as of the last tick.
#[derive(Clone, Debug)]
pub(crate) struct Row {
    /// Its track's id: one per breaker the sampler tells apart, never reused,
    /// so that a control names one breaker of a name that several share.
    pub(crate) id: u64,
    /// The breaker's address, with the name how a control finds it in the
    /// source again.
    pub(crate) address: usize,
    pub(crate) name: Arc<str>,
    /// The name in [`view::lower`] case, for the filter.
    pub(crate) lower: Arc<str>,
    pub(crate) state: State,
    pub(crate) generation: u32,
    pub(crate) level: u8,
    pub(crate) time_in_state: Duration,
    pub(crate) retry_after: Option<Duration>,
    pub(crate) window: WindowCounts,
    pub(crate) tripped_by: Option<WindowCounts>,
    pub(crate) thresholds: Thresholds,
    pub(crate) admitted_per_s: f64,
    pub(crate) rejected_per_s: f64,
    pub(crate) history: Arc<[(f32, f32)]>,
    pub(crate) recent: Arc<[Event]>,
    /// Live fleet peers that report this breaker's name Open.
    pub(crate) fleet_open: usize,
    /// The fleet-wide override in force for this breaker's name.
    pub(crate) fleet_override: Option<FleetOverride>,
    /// Whether it is a shadow breaker, and the calls it would have rejected
    /// (always 0 for one that is not).
    pub(crate) shadow: bool,
    pub(crate) would_reject: u64,
    /// Its what-if candidates' reports (none allocated without candidates).
    pub(crate) candidates: Vec<CandidateReport>,
}

impl Row {
    /// The failure rate the page shows: while Open the window counts afresh,
    /// so the one that tripped it.
    fn shown_failure_rate(&self) -> f64 {
        match self.tripped_by {
            Some(tripped) if self.window.calls == 0 => tripped.failure_rate(),
            _ => self.window.failure_rate(),
        }
    }
}

/// Every breaker, sick first.
#[derive(Debug, Default)]
pub(crate) struct Frame {
    pub(crate) tick: u64,
    pub(crate) rows: Vec<Row>,
    /// With a fleet: its picture.
    pub(crate) fleet: Option<FleetPicture>,
}

/// A fleet as of the last tick.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FleetPicture {
    pub(crate) live_peers: usize,
    /// Opens this instance made on a fleet quorum.
    pub(crate) quorum_opens: u64,
    /// Whether the fleet takes the controls.
    pub(crate) controls: bool,
}

/// Sick first: open, then half-open and recovering, then the rest.
pub(crate) fn rank(state: State) -> u8 {
    match state {
        State::Open | State::ForcedOpen => 0,
        State::HalfOpen => 1,
        State::Recovering => 2,
        State::Disabled => 3,
        _ => 4,
    }
}

/// What the sampler remembers of a breaker between ticks.
struct Track {
    id: u64,
    lower: Arc<str>,
    /// The lifetime counts the next regular tick's rates count from, read at
    /// `since`: each track keeps its own, since a tick may read some breakers
    /// and not others (a source that panics midway), and a breaker first seen
    /// in a pushed frame starts from there.
    admitted: u64,
    rejected: u64,
    since: Instant,
    transitions: Vec<u64>,
    history: VecDeque<(f32, f32)>,
    /// `history` as the frames share it, made again on regular ticks only.
    history_shared: Arc<[(f32, f32)]>,
    recent: VecDeque<Event>,
    recent_shared: Arc<[Event]>,
    /// Admitted and rejected per second, as of the last regular tick.
    per_s: (f64, f64),
    /// The last tick that read it (0 before the first: ticks count from 1).
    seen: u64,
}

impl Track {
    /// Takes this tick's read of the breaker, made at `now`: on a regular
    /// tick its rates and a chart point, on every tick its new transitions as
    /// events (`first`: made before the breaker was seen). A breaker whose
    /// counts went back is taken as new, and read as at its first tick.
    fn take(
        &mut self,
        m: &Metrics,
        counts: Vec<u64>,
        now: Instant,
        at_ms: u64,
        pushed: bool,
        first: bool,
    ) {
        // The counters only grow: one that went back is a new breaker in the
        // old one's place (rebuilt at its address), whose counts all count.
        let went_back = m.lifetime.admitted < self.admitted
            || m.lifetime.rejected < self.rejected
            || counts.iter().zip(&self.transitions).any(|(c, t)| c < t);
        if went_back {
            self.admitted = 0;
            self.rejected = 0;
            self.transitions.fill(0);
        }
        let first = first || went_back;
        let secs = now.duration_since(self.since).as_secs_f64();
        let rate = |count: u64, before: u64| {
            if secs > 0.0 {
                count.saturating_sub(before) as f64 / secs
            } else {
                0.0
            }
        };
        if !pushed {
            self.per_s = (
                rate(m.lifetime.admitted, self.admitted),
                rate(m.lifetime.rejected, self.rejected),
            );
            self.admitted = m.lifetime.admitted;
            self.rejected = m.lifetime.rejected;
            self.since = now;
            if self.history.len() == HISTORY {
                self.history.pop_front();
            }
            let (a, r) = self.per_s;
            self.history.push_back((a as f32, r as f32));
            self.history_shared = self.history.iter().copied().collect();
        }
        // Every transition since the last tick, by reason: the counters only
        // grow, so none between two ticks goes unseen.
        let mut changed = false;
        for (i, reason) in Reason::iter().enumerate() {
            let delta = counts[i].saturating_sub(self.transitions[i]);
            if delta > 0 {
                if self.recent.len() == RECENT {
                    self.recent.pop_front();
                }
                self.recent.push_back(Event {
                    at_ms,
                    reason,
                    count: delta,
                    earlier: first,
                });
                changed = true;
            }
        }
        self.transitions = counts;
        if changed {
            self.recent_shared = self.recent.iter().cloned().collect();
        }
    }
}

/// The sampler's state, owned by its task.
pub(crate) struct Sampler {
    /// Per name, each breaker of that name by its address: two breakers under
    /// one name (two registries' keys, say) keep their own counters.
    tracks: HashMap<Arc<str>, Vec<(usize, Track)>>,
    tick: u64,
    /// The last track id given out.
    ids: u64,
}

impl Sampler {
    pub(crate) fn new() -> Sampler {
        Sampler {
            tracks: HashMap::new(),
            tick: 0,
            ids: 0,
        }
    }

    /// Reads every breaker once and returns the sorted frame. A `pushed` frame
    /// (a transition woke the sampler early) takes states and transitions only:
    /// the rates and the charts move on regular ticks, one point per tick.
    pub(crate) fn sample(&mut self, source: &Source, pushed: bool) -> Frame {
        let now = Instant::now();
        self.tick += 1;
        let tick = self.tick;
        let at_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let mut fleet_open: HashMap<String, usize> = HashMap::new();
        let fleet = source.fleet.as_ref().map(|f| {
            for key in f.open_keys().into_iter().take(MAX_FLEET_KEYS) {
                let n = f.open_reports(&key);
                fleet_open.insert(key, n);
            }
            FleetPicture {
                live_peers: f.live_peers(),
                quorum_opens: f.quorum_opens(),
                controls: f.controls(),
            }
        });
        let mut rows = Vec::with_capacity(self.tracks.len());
        let (tracks, ids) = (&mut self.tracks, &mut self.ids);
        source.for_each(&mut |name, breaker, thresholds| {
            let m = breaker.metrics();
            let counts: Vec<u64> = Reason::iter().map(|r| m.transitions(r)).collect();
            let key: Arc<str> = match tracks.get_key_value(name) {
                Some((k, _)) => k.clone(),
                None => Arc::from(name),
            };
            let address = std::ptr::from_ref(breaker) as usize;
            let same_name = tracks.entry(key.clone()).or_default();
            let (at, first) = match same_name.iter().position(|(a, _)| *a == address) {
                Some(at) => (at, false),
                None => {
                    *ids += 1;
                    let track = Track {
                        id: *ids,
                        lower: Arc::from(view::lower(name.chars())),
                        admitted: m.lifetime.admitted,
                        rejected: m.lifetime.rejected,
                        since: now,
                        // Every transition since the build is new at the first tick.
                        transitions: vec![0; counts.len()],
                        history: VecDeque::with_capacity(HISTORY),
                        history_shared: Arc::from(Vec::new()),
                        recent: VecDeque::with_capacity(RECENT),
                        recent_shared: Arc::from(Vec::new()),
                        per_s: (0.0, 0.0),
                        seen: 0,
                    };
                    same_name.push((address, track));
                    (same_name.len() - 1, true)
                }
            };
            let track = &mut same_name[at].1;
            // A breaker the source lists twice is read once per tick: a second
            // read would find no new count, and take a zero rate and a second
            // chart point for it. Its second row repeats the first's figures.
            if track.seen != tick {
                track.take(&m, counts, now, at_ms, pushed, first);
                track.seen = tick;
            }
            let (admitted_per_s, rejected_per_s) = track.per_s;
            rows.push(Row {
                id: track.id,
                address,
                name: key,
                lower: track.lower.clone(),
                state: m.state,
                generation: m.generation,
                level: m.level,
                time_in_state: m.time_in_state,
                retry_after: m.retry_after,
                window: m.window,
                tripped_by: m.tripped_by,
                thresholds,
                admitted_per_s,
                rejected_per_s,
                history: track.history_shared.clone(),
                recent: track.recent_shared.clone(),
                fleet_open: fleet_open.get(name).copied().unwrap_or(0),
                fleet_override: source.fleet.as_ref().and_then(|f| f.override_of(name)),
                shadow: breaker.is_shadow(),
                would_reject: m.lifetime.would_reject,
                candidates: breaker.candidates(),
            });
        });
        // Breakers gone from the source (evicted, removed) are forgotten.
        tracks.retain(|_, same_name| {
            same_name.retain(|(_, t)| t.seen == tick);
            !same_name.is_empty()
        });
        rows.sort_by(|a, b| {
            rank(a.state)
                .cmp(&rank(b.state))
                .then(b.shown_failure_rate().total_cmp(&a.shown_failure_rate()))
                .then_with(|| a.name.cmp(&b.name))
        });
        Frame { tick, rows, fleet }
    }
}

/// The router's shared state: the source and the latest frame.
pub(crate) struct Shared {
    pub(crate) source: Source,
    pub(crate) frames: watch::Sender<Arc<Frame>>,
    started: std::sync::Once,
    /// Whether the first sample was taken: the first requests wait for it.
    sampled: watch::Sender<bool>,
    /// The pages rendered from the newest frame, by query: clients that ask for
    /// the same page share one rendering.
    pages: Mutex<(u64, HashMap<Query, Arc<str>>)>,
    /// The event streams open now: at most `source.max_streams`.
    pub(crate) streams: Arc<AtomicUsize>,
}

/// The most distinct pages kept per frame; others are rendered per client.
const CACHED_PAGES: usize = 256;

impl Shared {
    pub(crate) fn new(source: Source) -> Shared {
        Shared {
            source,
            frames: watch::Sender::new(Arc::new(Frame::default())),
            started: std::sync::Once::new(),
            sampled: watch::Sender::new(false),
            pages: Mutex::new((0, HashMap::new())),
            streams: Arc::default(),
        }
    }

    /// `query`'s page of `frame` as JSON, rendered once per frame and query.
    pub(crate) fn render(&self, frame: &Frame, query: &Query) -> Arc<str> {
        let controls = self.source.controls;
        {
            let mut pages = self.pages.lock().unwrap_or_else(|e| e.into_inner());
            // A newer frame starts the cache afresh; an older one (a slow
            // client's) is rendered for itself, leaving the newer pages.
            if frame.tick > pages.0 {
                *pages = (frame.tick, HashMap::new());
            }
            if let Some(page) = pages.1.get(query) {
                return page.clone();
            }
        }
        let page: Arc<str> = Arc::from(view::page(frame, query, controls).to_string());
        let mut pages = self.pages.lock().unwrap_or_else(|e| e.into_inner());
        if pages.0 == frame.tick && pages.1.len() < CACHED_PAGES {
            pages.1.insert(query.clone(), page.clone());
        }
        page
    }

    /// Samples into the frame clients read. A source that panics (a user's
    /// `Breakers` or `FleetSource`) leaves the last frame, and the panic hook
    /// reports it; the sampler goes on with the next tick.
    fn sample_into(&self, sampler: &mut Sampler, pushed: bool) {
        let sampled =
            panic::catch_unwind(AssertUnwindSafe(|| sampler.sample(&self.source, pushed)));
        if let Ok(frame) = sampled {
            self.frames.send_replace(Arc::new(frame));
        }
    }

    /// Starts the sampler on the first request (the router may be built outside
    /// a runtime), and waits for its first sample: taken off the async workers,
    /// as every sample is, so a source that blocks holds up the dashboard's
    /// requests, not the application's workers. The task holds the state
    /// weakly and ends with the router.
    pub(crate) async fn started(self: &Arc<Shared>) {
        self.started.call_once(|| {
            let weak: Weak<Shared> = Arc::downgrade(self);
            let push = self.source.push.clone();
            let tick = self.source.tick;
            tokio::spawn(async move {
                let Some(shared) = weak.upgrade() else { return };
                let first = tokio::task::spawn_blocking(move || {
                    let mut sampler = Sampler::new();
                    shared.sample_into(&mut sampler, false);
                    shared.sampled.send_replace(true);
                    sampler
                });
                let Ok(mut sampler) = first.await else { return };
                let mut every = tokio::time::interval(tick);
                every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                every.tick().await;
                let mut last = tokio::time::Instant::now();
                loop {
                    let pushed = tokio::select! {
                        _ = every.tick() => false,
                        () = push.poked() => {
                            // The regular ticks keep their time: pushed frames
                            // leave the rates and charts to them.
                            tokio::time::sleep_until(last + PUSH_GAP).await;
                            true
                        }
                    };
                    let Some(shared) = weak.upgrade() else { return };
                    // Before the read: a transition after it wakes the sampler again.
                    push.clear();
                    // Off the async workers: a tick over thousands of breakers
                    // takes milliseconds.
                    let done = tokio::task::spawn_blocking(move || {
                        shared.sample_into(&mut sampler, pushed);
                        sampler
                    });
                    match done.await {
                        Ok(back) => sampler = back,
                        Err(_) => return,
                    }
                    last = tokio::time::Instant::now();
                }
            });
        });
        let mut sampled = self.sampled.subscribe();
        let _ = sampled.wait_for(|taken| *taken).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cutout::CircuitBreaker;

    /// A client rendering an older frame than the cached one leaves the newer
    /// frame's pages cached: the next client of the newer frame shares them.
    #[test]
    fn an_older_frame_leaves_the_newer_frames_pages() {
        let shared = Shared::new(Source::new().finish());
        let frame = |tick| Frame {
            tick,
            ..Frame::default()
        };
        let (old, new, query) = (frame(1), frame(2), Query::parse(None));
        let first = shared.render(&new, &query);
        let _ = shared.render(&old, &query);
        assert!(Arc::ptr_eq(&first, &shared.render(&new, &query)));
    }

    /// Open breakers come by the failure rate that tripped them (the one the
    /// page shows; their window counts afresh), highest first.
    #[test]
    fn open_breakers_come_by_the_rate_that_tripped_them() {
        let tripped = |failed: usize| {
            let b = CircuitBreaker::builder()
                .failure_rate(0.5, 4)
                .build()
                .unwrap();
            for i in 0..4 {
                let _ = b.call(|| if i < failed { Err(()) } else { Ok(()) });
            }
            assert_eq!(b.state(), State::Open);
            Arc::new(b)
        };
        let source = Source::new()
            .breaker("a", tripped(2))
            .breaker("b", tripped(4))
            .finish();
        let frame = Sampler::new().sample(&source, false);
        let names: Vec<&str> = frame.rows.iter().map(|r| &*r.name).collect();
        assert_eq!(names, ["b", "a"]);
    }

    /// Two breakers under one name keep their own rates and transitions: with
    /// no call between two ticks, both rates are zero and no transition is new.
    /// The busy one's trip, made before the first tick, is listed once, as earlier.
    #[test]
    fn two_breakers_of_one_name_keep_their_own_counters() {
        let busy = Arc::new(
            CircuitBreaker::builder()
                .consecutive_failures(1)
                .build()
                .unwrap(),
        );
        let idle = Arc::new(CircuitBreaker::builder().build().unwrap());
        for _ in 0..1000 {
            let _ = busy.call(|| Ok::<_, ()>(()));
        }
        let _ = busy.call(|| Err::<(), _>(()));
        let source = Source::new()
            .breaker("db", busy)
            .breaker("db", idle)
            .finish();
        let mut sampler = Sampler::new();
        sampler.sample(&source, false);
        for _ in 0..3 {
            let frame = sampler.sample(&source, false);
            assert_eq!(frame.rows.len(), 2);
            for row in &frame.rows {
                let recent: Vec<_> = (row.recent.iter())
                    .map(|e| (e.reason, e.count, e.earlier))
                    .collect();
                let expected = match row.state {
                    State::Open => vec![(Reason::ConsecutiveFailures, 1, true)],
                    _ => vec![],
                };
                assert_eq!(
                    (row.admitted_per_s, row.rejected_per_s, recent),
                    (0.0, 0.0, expected),
                    "{:?}",
                    row.state
                );
            }
        }
    }

    /// One breaker listed twice (a registry's key, and the same breaker by
    /// name) is one track read once per tick: both rows show the first read's
    /// rates, and its chart gains one point per tick, not two.
    #[test]
    fn a_breaker_listed_twice_is_read_once_per_tick() {
        let registry: Arc<cutout::Registry<String>> =
            Arc::new(cutout::Registry::new(CircuitBreaker::builder()).unwrap());
        let db = registry.get("db");
        let source = Source::new()
            .registry(registry)
            .breaker("db", db.clone())
            .finish();
        let mut sampler = Sampler::new();
        sampler.sample(&source, false);
        for _ in 0..100 {
            let _ = db.call(|| Ok::<_, ()>(()));
        }
        let frame = sampler.sample(&source, false);
        assert_eq!(frame.rows.len(), 2);
        for row in &frame.rows {
            assert!(row.admitted_per_s > 0.0, "{}", row.admitted_per_s);
            assert_eq!(row.admitted_per_s, frame.rows[0].admitted_per_s);
            assert_eq!(row.history.len(), 2);
        }
    }

    /// `calls` successful calls through `breaker`.
    fn admit(breaker: &CircuitBreaker, calls: usize) {
        for _ in 0..calls {
            let _ = breaker.call(|| Ok::<_, ()>(()));
        }
    }

    /// How the rate shown compares with `calls` over the real time since
    /// `since`: about 1, a little more for the sampling time `since` counts.
    fn shown_over_real(row: &Row, calls: usize, since: Instant) -> f64 {
        row.admitted_per_s / (calls as f64 / since.elapsed().as_secs_f64())
    }

    /// Two breakers, and a switch that makes the read panic between them.
    struct Flaky {
        a: Arc<CircuitBreaker>,
        b: Arc<CircuitBreaker>,
        panic: std::sync::atomic::AtomicBool,
    }

    impl crate::Breakers for Flaky {
        fn for_each(&self, f: &mut dyn FnMut(&str, &CircuitBreaker, Thresholds)) {
            f("a", &self.a, Thresholds::default());
            if self.panic.load(std::sync::atomic::Ordering::Relaxed) {
                panic!("a source that fails between its breakers");
            }
            f("b", &self.b, Thresholds::default());
        }
    }

    /// A read that panics before it reaches a breaker leaves that breaker's
    /// rate to the next tick, over the whole time since its last read.
    #[test]
    fn a_panicked_read_leaves_the_rates_of_the_breakers_it_missed_right() {
        let new = || Arc::new(CircuitBreaker::builder().build().unwrap());
        let flaky = Arc::new(Flaky {
            a: new(),
            b: new(),
            panic: false.into(),
        });
        let source = Source::new().breakers(flaky.clone()).finish();
        let mut sampler = Sampler::new();
        let since = Instant::now();
        sampler.sample(&source, false);
        std::thread::sleep(Duration::from_millis(300));
        flaky
            .panic
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let sampled = panic::catch_unwind(AssertUnwindSafe(|| sampler.sample(&source, false)));
        assert!(sampled.is_err());
        flaky
            .panic
            .store(false, std::sync::atomic::Ordering::Relaxed);
        admit(&flaky.b, 1000);
        std::thread::sleep(Duration::from_millis(300));
        let frame = sampler.sample(&source, false);
        let b = frame.rows.iter().find(|r| &*r.name == "b").unwrap();
        let ratio = shown_over_real(b, 1000, since);
        assert!((0.5..1.5).contains(&ratio), "shown / real: {ratio}");
    }

    /// A breaker first seen in a pushed frame gets its first rate over the
    /// time since then, not since the regular tick before it.
    #[test]
    fn a_breaker_first_seen_in_a_pushed_frame_gets_its_rate_from_then() {
        let registry: Arc<cutout::Registry<String>> =
            Arc::new(cutout::Registry::new(CircuitBreaker::builder()).unwrap());
        let source = Source::new().registry(registry.clone()).finish();
        let mut sampler = Sampler::new();
        sampler.sample(&source, false);
        std::thread::sleep(Duration::from_millis(600));
        let b = registry.get("b");
        let since = Instant::now();
        sampler.sample(&source, true);
        admit(&b, 1000);
        std::thread::sleep(Duration::from_millis(200));
        let frame = sampler.sample(&source, false);
        let ratio = shown_over_real(&frame.rows[0], 1000, since);
        assert!((0.5..1.5).contains(&ratio), "shown / real: {ratio}");
    }

    /// A breaker that the application rebuilds in place, at the same address.
    struct Rebuilt(std::sync::RwLock<CircuitBreaker>);

    impl crate::Breakers for Rebuilt {
        fn for_each(&self, f: &mut dyn FnMut(&str, &CircuitBreaker, Thresholds)) {
            f("db", &self.0.read().unwrap(), Thresholds::default());
        }
    }

    /// A breaker rebuilt in place whose counts are below the old one's is a
    /// new breaker: every count of its own is new (its transitions made before
    /// this read, as earlier), and its track keeps the old one's chart and events.
    #[test]
    fn a_breaker_rebuilt_in_place_counts_afresh() {
        let tripping = || {
            (CircuitBreaker::builder().consecutive_failures(1))
                .build()
                .unwrap()
        };
        let old = tripping();
        admit(&old, 100);
        let _ = old.call(|| Err::<(), _>(()));
        let rebuilt = Arc::new(Rebuilt(std::sync::RwLock::new(old)));
        let source = Source::new().breakers(rebuilt.clone()).finish();
        let mut sampler = Sampler::new();
        sampler.sample(&source, false);
        let new = tripping();
        admit(&new, 10);
        let _ = new.call(|| Err::<(), _>(()));
        *rebuilt.0.write().unwrap() = new;
        let frame = sampler.sample(&source, false);
        let row = &frame.rows[0];
        let recent: Vec<_> = (row.recent.iter())
            .map(|e| (e.reason, e.count, e.earlier))
            .collect();
        let trip = (Reason::ConsecutiveFailures, 1, true);
        assert_eq!(recent, [trip, trip]);
        assert!(row.admitted_per_s > 0.0);
        assert_eq!(row.history.len(), 2);
    }
}
