//! `cutout::replay`: traces read from CSV and JSON lines (bad ones refused by
//! line and field, never a panic), and replays that follow the documented rule:
//! calls hold permits from admission to end, overlapping as recorded. The
//! recorder on its own and at the edges (the tower layer, the http layers; the
//! reqwest middleware's is in `tests/reqwest.rs`): rows read back with the
//! breaker's outcomes and keys, rejected calls are no rows, and a full queue
//! drops and counts without blocking a call.

use cutout::replay::{Call, Trace, replay};
use cutout::{Builder, CircuitBreaker, Outcome, Reason, Settings, State};
use std::time::Duration;

const HEADER: &str = "at_ms,latency_ms,outcome\n";

fn csv(rows: &str) -> Trace {
    Trace::from_csv(format!("{HEADER}{rows}").as_bytes()).unwrap()
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A trace ends by `Trace::MAX_AT` (about 146 years): a breaker that reopens
/// at its end stays open for its cooldown, as it does an hour in. One later
/// (`u64::MAX` ns, where a cooldown's deadline could not lie past the clock's
/// end, and would pass at once) is refused by field and line.
#[test]
fn a_trace_ends_early_enough_for_every_cooldown_to_run() {
    for end in [Duration::from_secs(3600), Trace::MAX_AT] {
        let trace = Trace::from_calls(vec![
            Call::new(ms(10), ms(1), Outcome::Failure),
            Call::new(end, ms(1), Outcome::Failure),
            Call::new(end, Duration::ZERO, Outcome::Success),
        ])
        .unwrap();
        let report = replay(CircuitBreaker::builder().consecutive_failures(1), &trace).unwrap();
        let opened = report.transitions.iter().filter(|t| t.to == State::Open);
        assert_eq!(opened.count(), 2, "{end:?}: {report:?}");
        assert_eq!((report.admitted, report.rejected), (2, 1), "{end:?}");
    }
    let late = Call::new(Duration::from_nanos(u64::MAX), ms(1), Outcome::Success);
    let err = Trace::from_calls(vec![Call::new(ms(1), ms(1), Outcome::Success), late]).unwrap_err();
    assert_eq!((err.line(), err.field()), (2, Some("at_ms")));
    let err = Trace::from_csv(format!("{HEADER}18446744073709.551615,1,failure\n").as_bytes());
    assert_eq!(err.unwrap_err().field(), Some("at_ms"));
    let json = r#"{"at_ms": 4611686018427.387905, "latency_ms": 0, "outcome": "success"}"#;
    let err = Trace::from_json_lines(json.as_bytes()).unwrap_err();
    assert!(err.to_string().contains("later than the latest"), "{err}");
}

#[test]
fn csv_and_json_lines_read_the_same_trace_and_write_it_back() {
    let rows = "120,20,success,\n640.5,500,failure,\n90,0.000001,ignored,\n";
    let a = Trace::from_csv(format!("at_ms,latency_ms,outcome,key\n{rows}").as_bytes()).unwrap();
    let json = r#"{"at_ms": 120, "latency_ms": 20, "outcome": "success"}

{"at_ms": 640.5, "latency_ms": 500, "outcome": "failure", "key": null}
{"outcome": "ignored", "latency_ms": 0.000001, "at_ms": 90}
"#;
    let b = Trace::from_json_lines(json.as_bytes()).unwrap();
    assert_eq!(a, b);
    assert_eq!(a.calls()[0].latency, Duration::from_nanos(1)); // admitted first
    assert_eq!(a.calls()[2].at, Duration::from_micros(640_500));
    assert_eq!(a.end(), Duration::from_micros(640_500));

    let mut out = Vec::new();
    a.write_csv(&mut out).unwrap();
    let text = String::from_utf8(out.clone()).unwrap();
    assert_eq!(
        text,
        "at_ms,latency_ms,outcome\n90,0.000001,ignored\n120,20,success\n640.5,500,failure\n"
    );
    assert_eq!(Trace::from_csv(out.as_slice()).unwrap(), a);
    let mut out = Vec::new();
    a.write_json_lines(&mut out).unwrap();
    assert_eq!(Trace::from_json_lines(out.as_slice()).unwrap(), a);
}

/// Two calls admitted at one instant are ordered by their ends, whatever order
/// the file lists them in: a trace written (in end order) and read back is the
/// same trace, and replays the same (here the half-open probe goes to the
/// shorter call either way).
#[test]
fn calls_admitted_together_keep_their_order_through_a_write_and_a_read() {
    let b = || {
        CircuitBreaker::builder()
            .consecutive_failures(1)
            .open_duration(ms(100))
            .half_open_probes(1)
    };
    let listed_long_first = csv("10,0,failure\n200,90,success\n120,10,failure\n");
    let listed_short_first = csv("10,0,failure\n120,10,failure\n200,90,success\n");
    assert_eq!(listed_long_first, listed_short_first);
    assert_eq!(listed_long_first.calls()[1].at, ms(120));
    let trace = listed_long_first;
    let mut out = Vec::new();
    trace.write_csv(&mut out).unwrap();
    assert_eq!(Trace::from_csv(out.as_slice()).unwrap(), trace);
    let mut out = Vec::new();
    trace.write_json_lines(&mut out).unwrap();
    let back = Trace::from_json_lines(out.as_slice()).unwrap();
    assert_eq!(back, trace);
    let report = replay(b(), &trace).unwrap();
    assert_eq!(report, replay(b(), &back).unwrap());
    assert_eq!(
        report.transitions.last().unwrap().reason,
        Reason::ProbeFailed
    );
}

#[test]
fn keys_round_trip_and_a_key_csv_cannot_hold_is_refused() {
    let trace = Trace::from_calls(vec![
        Call::new(ms(10), ms(1), Outcome::Success).with_key("db"),
        Call::new(ms(20), ms(1), Outcome::Failure),
    ])
    .unwrap();
    let mut out = Vec::new();
    trace.write_csv(&mut out).unwrap();
    assert_eq!(Trace::from_csv(out.as_slice()).unwrap(), trace);
    // Keys CSV would read back otherwise (an empty field is no key, fields are
    // trimmed) are refused; JSON lines hold them.
    for key in ["a,b", "", " db"] {
        let bad = Trace::from_calls(vec![
            Call::new(ms(10), ms(1), Outcome::Success).with_key(key),
        ])
        .unwrap();
        assert!(bad.write_csv(Vec::new()).is_err(), "{key:?}");
        let mut out = Vec::new();
        bad.write_json_lines(&mut out).unwrap();
        assert_eq!(Trace::from_json_lines(out.as_slice()).unwrap(), bad);
    }
}

/// A byte-order mark before the first line, as a spreadsheet's CSV export (or
/// an editor's UTF-8 file) begins with, is read past: it is no part of the
/// first column's name, nor of the first JSON object.
#[test]
fn a_byte_order_mark_is_read_past() {
    let plain = csv("120,20,success\n");
    let marked = format!("\u{feff}{HEADER}120,20,success\n");
    assert_eq!(Trace::from_csv(marked.as_bytes()).unwrap(), plain);
    let json = "\u{feff}{\"at_ms\": 120, \"latency_ms\": 20, \"outcome\": \"success\"}\n";
    assert_eq!(Trace::from_json_lines(json.as_bytes()).unwrap(), plain);
}

#[test]
fn bad_csv_names_the_line_and_the_field() {
    for (text, line, field, why) in [
        ("", 1, None, "empty"),
        ("at_ms,latency_ms\n", 1, Some("outcome"), "missing"),
        (
            "at_ms,latency_ms,outcome,when\n",
            1,
            Some("when"),
            "unknown",
        ),
        (
            "at_ms,at_ms,latency_ms,outcome\n",
            1,
            Some("at_ms"),
            "twice",
        ),
        (
            "at_ms,latency_ms,outcome\n1,1,success\n\n5,x,success\n",
            4,
            Some("latency_ms"),
            "decimal",
        ),
        (
            "at_ms,latency_ms,outcome\n-5,1,success\n",
            2,
            Some("at_ms"),
            "decimal",
        ),
        (
            "at_ms,latency_ms,outcome\n5,1,succes\n",
            2,
            Some("outcome"),
            "succes",
        ),
        ("at_ms,latency_ms,outcome\n5,1\n", 2, None, "fields"),
        (
            "at_ms,latency_ms,outcome\n5,6,success\n",
            2,
            Some("latency_ms"),
            "before time zero",
        ),
        (
            "at_ms,latency_ms,outcome\n5,1,success,db\n",
            2,
            None,
            "fields",
        ),
        (
            "at_ms,latency_ms,outcome\n99999999999999999,1,success\n",
            2,
            Some("at_ms"),
            "584 years",
        ),
    ] {
        let err = Trace::from_csv(text.as_bytes()).unwrap_err();
        assert_eq!((err.line(), err.field()), (line, field), "{text:?}: {err}");
        assert!(err.to_string().contains(why), "{text:?}: {err}");
        assert!(
            err.to_string().starts_with(&format!("line {line}")),
            "{err}"
        );
    }
}

#[test]
fn bad_json_lines_name_the_line_and_the_field() {
    let good = r#"{"at_ms": 5, "latency_ms": 1, "outcome": "success"}"#;
    for (bad, field, why) in [
        ("{", None, "not JSON"),
        ("[1, 2]", None, "not a JSON object"),
        (
            r#"{"at_ms": 5, "at_ms": 9, "latency_ms": 1, "outcome": "success"}"#,
            Some("at_ms"),
            "given twice",
        ),
        (
            r#"{"at_ms": 5, "latency_ms": 1}"#,
            Some("outcome"),
            "missing",
        ),
        (
            r#"{"at_ms": "5", "latency_ms": 1, "outcome": "success"}"#,
            Some("at_ms"),
            "not a number",
        ),
        (
            r#"{"at_ms": -5, "latency_ms": 1, "outcome": "success"}"#,
            Some("at_ms"),
            "decimal",
        ),
        (
            r#"{"at_ms": 5, "latency_ms": 1, "outcome": 1}"#,
            Some("outcome"),
            "not a string",
        ),
        (
            r#"{"at_ms": 5, "latency_ms": 1, "outcome": "ok"}"#,
            Some("outcome"),
            "not success",
        ),
        (
            r#"{"at_ms": 5, "latency_ms": 1, "outcome": "success", "key": 3}"#,
            Some("key"),
            "not a string",
        ),
        (
            r#"{"at_ms": 5, "latency_ms": 1, "outcome": "success", "host": "a"}"#,
            Some("host"),
            "unknown",
        ),
        (
            r#"{"at_ms": 5, "latency_ms": 9, "outcome": "success"}"#,
            Some("latency_ms"),
            "before time zero",
        ),
    ] {
        let text = format!("{good}\n{good}\n{bad}\n{good}\n");
        let err = Trace::from_json_lines(text.as_bytes()).unwrap_err();
        assert_eq!((err.line(), err.field()), (3, field), "{bad}: {err}");
        assert!(err.to_string().contains(why), "{bad}: {err}");
    }
}

#[test]
fn a_recorded_incident_opens_the_breaker_in_time() {
    // 100 calls a second; every call fails from 2 s to 4 s.
    let mut rows = String::new();
    for i in 0..600 {
        let outcome = if (200..400).contains(&i) {
            "failure"
        } else {
            "success"
        };
        rows.push_str(&format!("{},5,{outcome}\n", i * 10 + 5));
    }
    let trace = csv(&rows);
    let settings: Settings = serde_json::from_str(
        r#"{"consecutive_failures": 5, "open_duration": "500ms", "half_open_probes": 2}"#,
    )
    .unwrap();
    let report = replay(Builder::from_settings(&settings), &trace).unwrap();
    assert!(
        report.opened_within(ms(2000)..ms(2100)),
        "{:?}",
        report.transitions
    );
    assert!(!report.opened_within(..ms(2000)));
    assert!(!report.opened_within(ms(4100)..));
    assert_eq!(report.transitions[0].reason, Reason::ConsecutiveFailures);
    // The fifth failure, ending at 2045 ms, trips it.
    assert_eq!(report.transitions[0].at, ms(2045));
    assert_eq!(report.admitted + report.rejected, 600);
    assert!(report.failures_spared > 150, "{report:?}");
    // Closed again after the incident (the backoff doubled the cooldown through
    // it: 0.5 s, 1 s, 2 s), and it stays closed.
    let last = report.transitions.last().unwrap();
    assert_eq!(last.to, State::Closed);
    assert!(last.at > ms(4000) && last.at < ms(6000), "{last:?}");
    assert_eq!(report.was_admitted(599), Some(true));
}

/// A replay is deterministic: jittered cooldowns and a ramp-up, which draw on a
/// breaker's seed, give the same report from the same trace and settings.
#[test]
fn the_same_trace_and_settings_give_the_same_report() {
    // Two keys, 100 calls a second each for 30 s, failing in bursts: the
    // breakers trip, cool down (jittered), probe and ramp up many times.
    let mut rows = String::new();
    for i in 0..3000 {
        let outcome = if (i / 200) % 2 == 1 {
            "failure"
        } else {
            "success"
        };
        let key = if i % 2 == 0 { "a" } else { "b" };
        rows.push_str(&format!("{},3,{outcome},{key}\n", i * 10 + 5));
    }
    let trace =
        Trace::from_csv(format!("at_ms,latency_ms,outcome,key\n{rows}").as_bytes()).unwrap();
    let settings = || {
        CircuitBreaker::builder()
            .consecutive_failures(3)
            .open_duration(ms(400))
            .jitter(0.9)
            .ramp_up(ms(300))
    };
    let first = replay(settings(), &trace).unwrap();
    assert!(first.transitions.len() > 20, "{:?}", first.transitions);
    for _ in 0..3 {
        let again = replay(settings(), &trace).unwrap();
        assert_eq!(again.transitions, first.transitions);
        assert_eq!(again, first);
    }
}

/// Settings exported from a shadow breaker replay as enforcing: the replay is
/// already the what-if, and a shadow would reject nothing.
#[test]
fn a_shadow_setting_replays_as_enforcing() {
    let trace = csv("10,0,failure\n20,0,failure\n30,0,success\n");
    let settings = || CircuitBreaker::builder().consecutive_failures(1);
    let shadow = replay(settings().shadow(), &trace).unwrap();
    let spared = (shadow.failures_spared, shadow.successes_turned_away);
    assert_eq!((shadow.rejected, spared), (2, (1, 1)));
    assert_eq!(shadow, replay(settings(), &trace).unwrap());
}

#[test]
fn overlapping_calls_hold_their_permits_across_time() {
    // Two probes' worth: the slow call admitted first holds the only half-open
    // slot while a second call arrives; the second is rejected though it ends first.
    let builder = CircuitBreaker::builder()
        .consecutive_failures(1)
        .open_duration(ms(100))
        .half_open_probes(1);
    let trace = csv("10,0,failure\n400,290,success\n150,30,success\n");
    let report = replay(builder, &trace).unwrap();
    let admitted: Vec<_> = (0..3).map(|i| report.was_admitted(i).unwrap()).collect();
    // In admission order: the failure (10), the slow probe (110), the fast call (120).
    assert_eq!(admitted, [true, true, false]);
    assert_eq!(report.successes_turned_away, 1);
    let states: Vec<_> = report.transitions.iter().map(|t| (t.at, t.to)).collect();
    assert_eq!(
        states,
        [
            (ms(10), State::Open),
            (ms(110), State::HalfOpen),
            (ms(400), State::Closed)
        ]
    );
}

#[test]
fn latencies_are_replayed_so_the_slow_call_policy_judges_them() {
    let builder = CircuitBreaker::builder()
        .slow_calls(ms(100), 0.5)
        .window(Duration::from_secs(10), 10)
        .minimum_calls(4);
    // Four successes, three of them slow: the rate trips on the fourth end.
    let trace = csv("50,50,success\n300,250,success\n420,300,success\n500,101,success\n");
    let report = replay(builder, &trace).unwrap();
    assert_eq!(report.transitions.len(), 1, "{:?}", report.transitions);
    assert_eq!(report.transitions[0].reason, Reason::SlowCallRate);
    assert_eq!(report.transitions[0].at, ms(500));
}

#[test]
fn an_end_and_an_admission_at_one_instant_count_the_end_first() {
    let builder = CircuitBreaker::builder().consecutive_failures(1);
    // The failure ends at 100; the call admitted at 100 sees the breaker open.
    let report = replay(builder, &csv("100,50,failure\n120,20,success\n")).unwrap();
    assert_eq!(report.was_admitted(1), Some(false));
}

#[test]
fn each_key_is_replayed_through_a_breaker_of_its_own() {
    let trace = Trace::from_calls(
        (0..10)
            .flat_map(|i| {
                [
                    Call::new(ms(i * 10 + 5), ms(1), Outcome::Failure).with_key("sick"),
                    Call::new(ms(i * 10 + 5), ms(1), Outcome::Success).with_key("fine"),
                ]
            })
            .collect(),
    )
    .unwrap();
    let report = replay(CircuitBreaker::builder().consecutive_failures(3), &trace).unwrap();
    assert_eq!(report.transitions.len(), 1);
    assert_eq!(report.transitions[0].key.as_deref(), Some("sick"));
    assert_eq!((report.admitted, report.rejected), (13, 7));
    assert_eq!(report.failures_spared, 7);
}

#[test]
fn a_bad_builder_is_its_config_error_and_an_empty_trace_replays_to_nothing() {
    let err = replay(
        CircuitBreaker::builder().half_open_probes(0),
        &Trace::default(),
    )
    .unwrap_err();
    assert_eq!(err.field(), "half_open_probes");
    let report = replay(CircuitBreaker::builder(), &Trace::default()).unwrap();
    assert_eq!(
        (report.admitted, report.rejected, report.transitions.len()),
        (0, 0, 0)
    );
}

mod recorder {
    use cutout::Outcome;
    use cutout::replay::{Call, Recorder, Trace};
    use std::io::{self, Write};
    use std::sync::mpsc;
    use std::time::Duration;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn temp(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("cutout-recorder-{}-{name}", std::process::id()))
    }

    #[test]
    fn recorded_calls_read_back_as_the_same_trace_in_csv_and_json_lines() {
        for name in ["t.csv", "t.jsonl", "t.ndjson"] {
            let path = temp(name);
            let recorder = Recorder::to_file(&path, 64).unwrap();
            recorder.record_at(ms(20), ms(5), Outcome::Success, None);
            recorder.record_at(ms(30), ms(25), Outcome::Failure, Some("db"));
            recorder.record_at(ms(31), ms(40), Outcome::Ignored, Some("a,b"));
            recorder.record_at(ms(32), ms(1), Outcome::Success, Some(" "));
            recorder.flush().unwrap();
            assert_eq!((recorder.written(), recorder.dropped()), (4, 0));
            let file = std::fs::File::open(&path).unwrap();
            let json = !name.ends_with("csv");
            let trace = if json {
                Trace::from_json_lines(file).unwrap()
            } else {
                Trace::from_csv(file).unwrap()
            };
            // A latency past the start is cut to it; CSV cannot hold a comma in a
            // key, nor a key of spaces (trimmed, it is none).
            let key = if json { "a,b" } else { "a_b" };
            let spaces = Call::new(ms(32), ms(1), Outcome::Success);
            let spaces = if json { spaces.with_key(" ") } else { spaces };
            let expected = Trace::from_calls(vec![
                Call::new(ms(20), ms(5), Outcome::Success),
                Call::new(ms(30), ms(25), Outcome::Failure).with_key("db"),
                Call::new(ms(31), ms(31), Outcome::Ignored).with_key(key),
                spaces,
            ])
            .unwrap();
            assert_eq!(trace, expected, "{name}");
            let _ = std::fs::remove_file(&path);
        }
    }

    /// A writer stuck until the test lets it go.
    struct Gate(mpsc::Receiver<()>);

    impl Write for Gate {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            // Bounded: the test opens the gate, or fails and ends.
            let _ = self.0.recv_timeout(Duration::from_secs(30));
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_full_queue_drops_and_counts_and_never_blocks_the_caller() {
        let (open, gate) = mpsc::channel();
        let recorder = Recorder::to_writer(Gate(gate), false, 2).unwrap();
        // The writer is stuck on the header: two calls fit in the queue, the
        // other eight are dropped at once.
        for i in 0..10 {
            recorder.record_at(ms(i), Duration::ZERO, Outcome::Success, None);
        }
        assert_eq!(recorder.dropped(), 8);
        for _ in 0..64 {
            let _ = open.send(());
        }
        recorder.flush().unwrap();
        assert_eq!((recorder.written(), recorder.dropped()), (2, 8));
    }

    struct Broken;

    impl Write for Broken {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::Error::other("disk full"))
        }
        fn flush(&mut self) -> io::Result<()> {
            Err(io::Error::other("disk full"))
        }
    }

    #[test]
    fn a_writer_that_fails_stops_and_every_call_counts_as_dropped() {
        let recorder = Recorder::to_writer(Broken, true, 16).unwrap();
        for i in 0..10 {
            recorder.record_at(ms(i), Duration::ZERO, Outcome::Success, None);
        }
        // The writer stopped at its first write: the flush says so, and each
        // call is counted, the queued ones too.
        assert!(recorder.flush().is_err());
        assert_eq!((recorder.written(), recorder.dropped()), (0, 10));
        recorder.record_at(ms(11), Duration::ZERO, Outcome::Success, None);
        assert!(recorder.flush().is_err());
        assert_eq!((recorder.written(), recorder.dropped()), (0, 11));
    }

    /// A writer that panics (on its fourth write) stops the writing as an
    /// error does: every call counts, as written before it or as dropped,
    /// and the recorder goes on counting.
    #[test]
    fn a_writer_that_panics_stops_and_every_call_counts() {
        struct Panics(u32);
        impl Write for Panics {
            fn write(&mut self, b: &[u8]) -> io::Result<usize> {
                self.0 += 1;
                assert!(self.0 <= 3, "the writer's own bug");
                Ok(b.len())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let recorder = Recorder::to_writer(Panics(0), true, 1024).unwrap();
        for i in 0..100 {
            recorder.record_at(ms(i), Duration::ZERO, Outcome::Success, None);
        }
        assert!(recorder.flush().is_err());
        assert_eq!(recorder.written() + recorder.dropped(), 100);
        assert!(recorder.dropped() >= 97, "{recorder:?}");
        recorder.record_at(ms(100), Duration::ZERO, Outcome::Success, None);
        assert!(recorder.flush().is_err());
        assert_eq!(recorder.written() + recorder.dropped(), 101);
    }

    /// A queue asked for beyond `Recorder::MAX_CAPACITY` has that room (it is
    /// allocated up front: `usize::MAX` overflowed, `1 << 32` aborted).
    #[test]
    fn a_huge_capacity_is_the_most() {
        let recorder = Recorder::to_writer(io::sink(), false, usize::MAX).unwrap();
        recorder.record_at(ms(1), Duration::ZERO, Outcome::Success, None);
        recorder.flush().unwrap();
        assert_eq!(recorder.written(), 1);
    }

    /// A disk that is full takes rows into the file's buffer, then fails the
    /// flush: those rows count as dropped, not as written.
    #[cfg(target_os = "linux")]
    #[test]
    fn rows_a_failed_flush_could_not_write_count_as_dropped() {
        let recorder = Recorder::to_file("/dev/full", 1024).unwrap();
        for i in 0..10 {
            recorder.record_at(ms(i), Duration::ZERO, Outcome::Failure, None);
        }
        assert!(recorder.flush().is_err());
        assert_eq!((recorder.written(), recorder.dropped()), (0, 10));
    }

    /// A writer slow enough that the calls are still queued when the recorder
    /// is dropped, into a buffer the test reads.
    #[derive(Clone)]
    struct Slow(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl Write for Slow {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            std::thread::sleep(Duration::from_millis(2));
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn dropping_the_last_clone_waits_until_every_call_is_written() {
        let out = Slow(Default::default());
        let recorder = Recorder::to_writer(out.clone(), true, 16).unwrap();
        let clone = recorder.clone();
        for i in 0..5 {
            clone.record_at(ms(i), Duration::ZERO, Outcome::Success, None);
        }
        drop(clone);
        drop(recorder);
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        let trace = Trace::from_json_lines(text.as_bytes()).unwrap();
        assert_eq!(trace.calls().len(), 5);
    }

    #[cfg(feature = "tower")]
    #[test]
    fn the_layer_records_each_call_that_reaches_the_service() {
        use cutout::replay::RecordLayer;
        use tower::{Layer, Service, ServiceExt, service_fn};

        let path = temp("layer.csv");
        let recorder = Recorder::to_file(&path, 64).unwrap();
        let layer =
            RecordLayer::new(recorder.clone())
                .key("billing")
                .classify(|r: &Result<u32, &str>| match r {
                    Ok(404) => Outcome::Ignored,
                    Ok(_) => Outcome::Success,
                    Err(_) => Outcome::Failure,
                });
        let mut service = layer.layer(service_fn(|n: u32| async move {
            match n {
                0 => Err("down"),
                n => Ok(n),
            }
        }));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(async {
            for n in [200, 0, 404] {
                let _ = service.ready().await.unwrap().call(n).await;
            }
        });
        recorder.flush().unwrap();
        let trace = Trace::from_csv(std::fs::File::open(&path).unwrap()).unwrap();
        let mut outcomes: Vec<_> = trace.calls().iter().map(|c| c.outcome).collect();
        outcomes.sort_by_key(|o| *o as u8);
        assert_eq!(
            outcomes,
            [Outcome::Success, Outcome::Failure, Outcome::Ignored]
        );
        assert!(
            trace
                .calls()
                .iter()
                .all(|c| c.key.as_deref() == Some("billing"))
        );
        let _ = std::fs::remove_file(&path);
    }

    /// Reads back what `recorder` wrote to `path`, then removes the file.
    #[cfg(feature = "tower")]
    fn read_back(recorder: &Recorder, path: &std::path::Path) -> Trace {
        recorder.flush().unwrap();
        let trace = Trace::from_csv(std::fs::File::open(path).unwrap()).unwrap();
        let _ = std::fs::remove_file(path);
        trace
    }

    #[cfg(feature = "tower")]
    fn outcomes_and_keys(trace: &Trace) -> Vec<(Outcome, &str)> {
        let calls = trace.calls().iter();
        calls
            .map(|c| (c.outcome, c.key.as_deref().unwrap_or("")))
            .collect()
    }

    #[cfg(feature = "tower")]
    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(f)
    }

    #[cfg(feature = "tower")]
    #[test]
    fn the_tower_layer_records_what_its_breaker_admitted_as_its_classifier_judged_it() {
        use cutout::{CircuitBreaker, CircuitBreakerLayer, Error, ManualClock};
        use std::sync::Arc;
        use tower::{Layer, ServiceExt, service_fn};

        let path = temp("tower.csv");
        let recorder = Recorder::to_file(&path, 64).unwrap();
        let breaker = CircuitBreaker::builder()
            .name("billing")
            .consecutive_failures(2)
            .clock(ManualClock::new())
            .build()
            .unwrap();
        let service = CircuitBreakerLayer::new(Arc::new(breaker))
            .classify(|r: &Result<u32, &str>| match r {
                Ok(404) => Outcome::Ignored,
                Ok(_) => Outcome::Success,
                Err(_) => Outcome::Failure,
            })
            .record(recorder.clone())
            .layer(service_fn(|n: u32| async move {
                match n {
                    0 => Err("down"),
                    n => Ok(n),
                }
            }));
        block_on(async {
            for n in [200, 404, 0, 0] {
                let _ = service.clone().oneshot(n).await;
            }
            // Two failures in a row opened it: this call never reaches the
            // service, and is no row.
            let rejected = service.clone().oneshot(200).await;
            assert!(matches!(rejected, Err(Error::Rejected(_))));
        });
        let trace = read_back(&recorder, &path);
        use Outcome::{Failure, Ignored, Success};
        assert_eq!(
            outcomes_and_keys(&trace),
            [
                (Success, "billing"),
                (Ignored, "billing"),
                (Failure, "billing"),
                (Failure, "billing")
            ]
        );
        assert_eq!(recorder.dropped(), 0);
    }

    /// A service whose readiness fails: a refused connection.
    #[cfg(feature = "tower")]
    #[derive(Clone)]
    struct Refusing;

    #[cfg(feature = "tower")]
    impl tower::Service<u32> for Refusing {
        type Response = u32;
        type Error = &'static str;
        type Future = std::future::Ready<Result<u32, &'static str>>;

        fn poll_ready(
            &mut self,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Result<(), &'static str>> {
            std::task::Poll::Ready(Err("connection refused"))
        }

        fn call(&mut self, n: u32) -> Self::Future {
            std::future::ready(Ok(n))
        }
    }

    #[cfg(feature = "tower")]
    #[test]
    fn a_readiness_error_is_a_row_that_ended_at_once_as_the_breaker_counted_it() {
        use cutout::{CircuitBreaker, CircuitBreakerLayer, ManualClock};
        use std::sync::Arc;
        use tower::{Layer, ServiceExt};

        let path = temp("ready.csv");
        let recorder = Recorder::to_file(&path, 64).unwrap();
        let breaker = Arc::new(
            CircuitBreaker::builder()
                .clock(ManualClock::new())
                .build()
                .unwrap(),
        );
        let layer = CircuitBreakerLayer::new(breaker.clone()).record(recorder.clone());
        let refused = block_on(layer.layer(Refusing).oneshot(1));
        assert!(refused.is_err());
        assert_eq!(breaker.metrics().lifetime.failures, 1);
        let trace = read_back(&recorder, &path);
        assert_eq!(outcomes_and_keys(&trace), [(Outcome::Failure, "default")]);
        assert_eq!(trace.calls()[0].latency, Duration::ZERO);
    }

    #[cfg(feature = "tower")]
    #[test]
    fn a_full_queue_behind_a_layer_drops_and_counts_and_every_call_completes() {
        use cutout::{CircuitBreaker, CircuitBreakerLayer, ManualClock};
        use std::sync::Arc;
        use tower::{Layer, ServiceExt, service_fn};

        let (open, gate) = mpsc::channel();
        let recorder = Recorder::to_writer(Gate(gate), false, 2).unwrap();
        let breaker = CircuitBreaker::builder()
            .clock(ManualClock::new())
            .build()
            .unwrap();
        let service = CircuitBreakerLayer::new(Arc::new(breaker))
            .record(recorder.clone())
            .layer(service_fn(|n: u32| async move { Ok::<_, ()>(n) }));
        // The writer is stuck on the header: every call still completes, two
        // rows wait in the queue and the other eight are dropped.
        let answers: Vec<_> = block_on(async {
            let mut answers = Vec::new();
            for n in 0..10 {
                answers.push(service.clone().oneshot(n).await.unwrap());
            }
            answers
        });
        assert_eq!(answers, (0..10).collect::<Vec<_>>());
        assert_eq!(recorder.dropped(), 8);
        for _ in 0..64 {
            let _ = open.send(());
        }
        recorder.flush().unwrap();
        assert_eq!((recorder.written(), recorder.dropped()), (2, 8));
    }

    #[cfg(feature = "http")]
    #[test]
    fn the_http_layer_records_responses_by_status_and_no_row_for_its_503() {
        use cutout::{CircuitBreaker, ManualClock, Rejected, http::HttpLayer};
        use http::{Request, Response, StatusCode};
        use std::convert::Infallible;
        use std::sync::Arc;
        use tower::{Layer, ServiceExt, service_fn};

        let path = temp("http.csv");
        let recorder = Recorder::to_file(&path, 64).unwrap();
        let breaker = CircuitBreaker::builder()
            .name("orders")
            .consecutive_failures(2)
            .clock(ManualClock::new())
            .build()
            .unwrap();
        let service = HttpLayer::new(Arc::new(breaker))
            .record(recorder.clone())
            .layer(service_fn(|request: Request<()>| async move {
                let mut response = Response::new(());
                *response.status_mut() = match request.uri().path() {
                    "/down" => StatusCode::BAD_GATEWAY,
                    "/missing" => StatusCode::NOT_FOUND,
                    _ => StatusCode::OK,
                };
                Ok::<_, Infallible>(response)
            }));
        let get = |path: &str| Request::get(path).body(()).unwrap();
        block_on(async {
            for path in ["/", "/missing", "/down", "/down"] {
                service.clone().oneshot(get(path)).await.unwrap();
            }
            let shed = service.clone().oneshot(get("/")).await.unwrap();
            assert_eq!(shed.status(), StatusCode::SERVICE_UNAVAILABLE);
            assert!(shed.extensions().get::<Rejected>().is_some());
        });
        let trace = read_back(&recorder, &path);
        use Outcome::{Failure, Success};
        assert_eq!(
            outcomes_and_keys(&trace),
            [
                (Success, "orders"),
                (Success, "orders"), // a 404 says the dependency is up
                (Failure, "orders"),
                (Failure, "orders")
            ]
        );
    }

    #[cfg(all(feature = "http", feature = "registry"))]
    #[test]
    fn the_backend_layer_records_each_call_under_its_backends_key() {
        use cutout::{CircuitBreaker, Error, ManualClock, Registry, http::BackendLayer};
        use http::{Request, Response, StatusCode};
        use std::convert::Infallible;
        use std::sync::Arc;
        use tower::{Layer, ServiceExt, service_fn};

        let path = temp("backend.csv");
        let recorder = Recorder::to_file(&path, 64).unwrap();
        let builder = CircuitBreaker::builder()
            .consecutive_failures(1)
            .clock(ManualClock::new());
        let breakers = Arc::new(Registry::new(builder).unwrap());
        // Backend "a" is sick, "b" is well.
        let client = BackendLayer::new(breakers)
            .record(recorder.clone())
            .layer(service_fn(|request: Request<()>| async move {
                let mut response = Response::new(());
                if request.uri().host() == Some("a") {
                    *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
                }
                Ok::<_, Infallible>(response)
            }));
        let get = |uri: &str| Request::get(uri).body(()).unwrap();
        block_on(async {
            client.clone().oneshot(get("http://b:80/x")).await.unwrap();
            client
                .clone()
                .oneshot(get("http://a:8080/x"))
                .await
                .unwrap();
            let rejected = client.clone().oneshot(get("http://a:8080/y")).await;
            assert!(matches!(rejected, Err(Error::Rejected(_))));
            client.clone().oneshot(get("http://b:80/y")).await.unwrap();
        });
        let trace = read_back(&recorder, &path);
        use Outcome::{Failure, Success};
        assert_eq!(
            outcomes_and_keys(&trace),
            [(Success, "b"), (Failure, "a:8080"), (Success, "b")]
        );
    }
}

/// A builder that builds with candidates replays too: the replay gives its
/// candidates the replay's clock, as it gives the breaker (it refused them,
/// asking for a clock set before the candidates, which the caller had done).
#[test]
fn a_builder_with_candidates_replays_as_without() {
    let trace = csv("10,0,failure\n20,0,failure\n30,0,success\n");
    let settings = || CircuitBreaker::builder().consecutive_failures(1);
    let with = settings()
        .clock(cutout::ManualClock::new())
        .candidate("eager", CircuitBreaker::builder().consecutive_failures(1));
    assert!(with.clone().build().is_ok());
    assert_eq!(replay(with, &trace), replay(settings(), &trace));
}
