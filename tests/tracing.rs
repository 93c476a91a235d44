//! The `tracing` feature: one event per transition, seen by a capturing subscriber.
#![cfg(feature = "tracing")]

mod common;

use common::trips_on;
use cutout::{CircuitBreaker, Error, ManualClock, State};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

#[derive(Clone, Debug, PartialEq)]
enum Value {
    U64(u64),
    F64(f64),
    Str(String),
}

#[derive(Debug)]
struct Captured {
    level: Level,
    target: String,
    fields: BTreeMap<String, Value>,
}

impl Captured {
    fn get(&self, name: &str) -> &Value {
        self.fields
            .get(name)
            .unwrap_or_else(|| panic!("no field {name} in {self:?}"))
    }
    fn str(&self, name: &str) -> &str {
        match self.get(name) {
            Value::Str(s) => s,
            other => panic!("{name} is {other:?}"),
        }
    }
    fn u64(&self, name: &str) -> u64 {
        match self.get(name) {
            Value::U64(n) => *n,
            other => panic!("{name} is {other:?}"),
        }
    }
    fn f64(&self, name: &str) -> f64 {
        match self.get(name) {
            Value::F64(x) => *x,
            other => panic!("{name} is {other:?}"),
        }
    }
}

impl Visit for Captured {
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.fields.insert(field.name().into(), Value::U64(value));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        let value = u64::try_from(value).expect("no negative field");
        self.fields.insert(field.name().into(), Value::U64(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.fields.insert(field.name().into(), Value::F64(value));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.fields
            .insert(field.name().into(), Value::Str(value.into()));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.fields
            .insert(field.name().into(), Value::Str(format!("{value:?}")));
    }
}

/// A subscriber that keeps every event and ignores spans.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<Captured>>>);

/// Each transition event's level, from, to and reason.
fn summary(events: &[Captured]) -> Vec<(Level, &str, &str, &str)> {
    events
        .iter()
        .map(|e| (e.level, e.str("from"), e.str("to"), e.str("reason")))
        .collect()
}

impl Subscriber for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut captured = Captured {
            level: *event.metadata().level(),
            target: event.metadata().target().into(),
            fields: BTreeMap::new(),
        };
        event.record(&mut captured);
        self.0.lock().unwrap().push(captured);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[test]
fn one_event_per_transition_warn_when_opening_info_otherwise() {
    let capture = Capture::default();
    let clock = ManualClock::new();
    tracing::subscriber::with_default(capture.clone(), || {
        let b = CircuitBreaker::builder()
            .name("catalog")
            .clock(clock.clone())
            .consecutive_failures(2)
            .window(Duration::from_secs(10), 10)
            .failure_rate(0.9, 100)
            .open_duration(Duration::from_secs(1))
            .build()
            .unwrap();
        for _ in 0..100 {
            let _ = b.call(|| Ok::<_, ()>(()));
        }
        assert!(capture.0.lock().unwrap().is_empty(), "no event on success");
        clock.advance(Duration::from_millis(40));
        let _ = b.call(|| Err::<(), _>(()));
        let _ = b.call(|| Err::<(), _>(()));
        let _ = b.call(|| Ok::<_, ()>(())); // rejected: no event
        clock.advance(Duration::from_secs(1));
        let probe = b.try_acquire().unwrap();
        probe.failure();
        b.force_open();
        b.reset();
    });

    let events = capture.0.lock().unwrap();
    assert_eq!(
        summary(&events),
        [
            (Level::WARN, "closed", "open", "consecutive_failures"),
            (Level::INFO, "open", "half_open", "cooldown_elapsed"),
            (Level::WARN, "half_open", "open", "probe_failed"),
            (Level::WARN, "open", "forced_open", "forced_open"),
            (Level::INFO, "forced_open", "closed", "reset"),
        ]
    );
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e.target, "cutout");
        assert_eq!(e.str("breaker"), "catalog");
        assert_eq!(e.u64("generation"), i as u64 + 1);
        assert_eq!(e.str("message"), "circuit breaker transition");
    }
    let trip = &events[0];
    assert_eq!(trip.u64("at_ms"), 40);
    assert_eq!(trip.u64("backoff_level"), 0);
    assert_eq!(trip.u64("consecutive_failures"), 2);
    assert_eq!(trip.u64("window_calls"), 102);
    assert_eq!(trip.u64("window_failures"), 2);
    assert_eq!(trip.u64("window_slow"), 0);
    assert_eq!(trip.f64("failure_rate"), 2.0 / 102.0);
    assert_eq!(trip.f64("slow_call_rate"), 0.0);
    // A transition to Open says until when: the cooldown at its level (1 s, then
    // 2 s with the default multiplier), on the same scale as `at_ms`. Other
    // transitions have no such field.
    assert_eq!(trip.u64("open_until_ms"), 1040);
    let reopen = &events[2];
    assert_eq!(reopen.u64("at_ms"), 1040);
    assert_eq!(reopen.u64("backoff_level"), 1);
    assert_eq!(reopen.u64("window_calls"), 0);
    assert_eq!(reopen.u64("open_until_ms"), 3040);
    for e in [&events[1], &events[3], &events[4]] {
        assert!(!e.fields.contains_key("open_until_ms"), "{e:?}");
    }
}

/// The transitions the first test does not reach each have their event at their
/// level: an external `open_for`, a half-open round that times out, a round that
/// starts the ramp, and a failed ramp (which reopens at the next backoff level);
/// and a name with non-ASCII characters and quotes is the `breaker` field as it is.
#[test]
fn external_timeout_and_ramp_transitions_have_their_events_under_an_odd_name() {
    let capture = Capture::default();
    let clock = ManualClock::new();
    let name = "zoé/ünï ✓ \"q\"";
    tracing::subscriber::with_default(capture.clone(), || {
        let b = CircuitBreaker::builder()
            .name(name)
            .clock(clock.clone())
            .consecutive_failures(1)
            .open_duration(Duration::from_secs(1))
            .half_open_timeout(Duration::from_secs(5))
            .ramp_up(Duration::from_secs(10))
            .build()
            .unwrap();
        assert!(b.open_for(Duration::from_secs(2)));
        clock.advance(Duration::from_secs(2));
        std::mem::forget(b.try_acquire().unwrap()); // a probe that never reports
        clock.advance(Duration::from_secs(5));
        assert!(b.try_acquire().is_err(), "the round timed out: reopened");
        clock.advance(Duration::from_secs(2));
        b.try_acquire().unwrap().success();
        assert_eq!(b.state(), State::Recovering);
        // The ramp sheds some calls; the first one admitted fails.
        let _ = (0..100).find(|_| matches!(b.call(|| Err::<(), _>(())), Err(Error::Inner(_))));
        assert_eq!(b.state(), State::Open);
    });

    let events = capture.0.lock().unwrap();
    assert_eq!(
        summary(&events),
        [
            (Level::WARN, "closed", "open", "external"),
            (Level::INFO, "open", "half_open", "cooldown_elapsed"),
            (Level::WARN, "half_open", "open", "half_open_timeout"),
            (Level::INFO, "open", "half_open", "cooldown_elapsed"),
            (Level::INFO, "half_open", "recovering", "probes_succeeded"),
            (Level::WARN, "recovering", "open", "ramp_failed"),
        ]
    );
    for e in events.iter() {
        assert_eq!(e.str("breaker"), name);
    }
    let ramp_failed = &events[5];
    assert_eq!(ramp_failed.u64("consecutive_failures"), 1);
    assert_eq!(ramp_failed.u64("backoff_level"), 2);
}

/// Issue 17: a registry's breakers were all named "default", so the events of
/// different keys could not be told apart.
#[cfg(feature = "registry")]
#[test]
fn a_registrys_events_name_their_key() {
    let capture = Capture::default();
    let clock = ManualClock::new();
    tracing::subscriber::with_default(capture.clone(), || {
        let registry: cutout::Registry<String, _> =
            cutout::Registry::new(trips_on(1, clock.clone())).unwrap();
        let _ = registry.call("payments", || Err::<(), _>(()));
        let _ = registry.call("search", || Err::<(), _>(()));
    });
    let events = capture.0.lock().unwrap();
    let names: Vec<_> = events.iter().map(|e| e.str("breaker")).collect();
    assert_eq!(names, ["payments", "search"]);
}

#[test]
fn a_shadow_breakers_events_say_shadow() {
    let capture = Capture::default();
    tracing::subscriber::with_default(capture.clone(), || {
        for shadow in [false, true] {
            let b = CircuitBreaker::builder()
                .clock(ManualClock::new())
                .consecutive_failures(1);
            let b = match shadow {
                true => b.shadow(),
                false => b,
            };
            let _ = b.build().unwrap().call(|| Err::<(), _>(()));
        }
    });
    let events = capture.0.lock().unwrap();
    let shadow: Vec<_> = events.iter().map(|e| e.str("shadow")).collect();
    assert_eq!(shadow, ["false", "true"]);
}

#[test]
fn a_candidates_events_name_it_and_the_live_breakers_do_not() {
    let capture = Capture::default();
    tracing::subscriber::with_default(capture.clone(), || {
        let b = CircuitBreaker::builder()
            .name("payments")
            .clock(ManualClock::new())
            .consecutive_failures(2)
            .candidate("eager", CircuitBreaker::builder().consecutive_failures(1))
            .build()
            .unwrap();
        let _ = b.call(|| Err::<(), _>(())); // the candidate trips
        let _ = b.call(|| Err::<(), _>(())); // the live breaker trips
    });
    let events = capture.0.lock().unwrap();
    let fields: Vec<_> = events
        .iter()
        .map(|e| {
            let candidate = e.fields.get("candidate").map(|_| e.str("candidate"));
            (e.str("breaker"), e.str("shadow"), candidate)
        })
        .collect();
    assert_eq!(
        fields,
        [
            ("payments", "true", Some("eager")),
            ("payments", "false", None), // no such field
        ]
    );
}
