//! The tuner on its shipped traces: the table's rows, the timelines, the
//! recorded client trace replays the example's decision, and bad inputs are errors that name
//! the file, the line and the field.

use cutout::replay::{Trace, replay};
use cutout::{CircuitBreaker, Outcome, State};
use cutout_tune::{Candidate, evaluate, load_trace};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn here(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn tune(args: &[&Path]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_cutout-tune"))
        .args(args)
        .output()
        .expect("the tuner runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The cells of the row titled `title`.
fn row<'a>(table: &'a str, title: &str) -> Vec<&'a str> {
    let line = table
        .lines()
        .find(|l| l.starts_with(title))
        .unwrap_or_else(|| panic!("no row {title:?} in\n{table}"));
    line.split('|').skip(1).map(str::trim).collect()
}

fn number(cell: &str) -> u64 {
    cell.parse()
        .unwrap_or_else(|_| panic!("{cell:?} is not a count"))
}

#[test]
fn the_storm_trace_under_two_settings_side_by_side() {
    let dir = std::env::temp_dir().join(format!("cutout-tune-test-{}", std::process::id()));
    let (ok, table, err) = tune(&[
        &here("traces/storm.csv"),
        &here("settings/storm.toml"),
        &here("settings/patient.toml"),
        Path::new("--svg"),
        &dir,
    ]);
    assert!(ok, "{err}");
    assert!(
        table.starts_with(&format!(
            "{}: 12755 calls over 20.0 s",
            here("traces/storm.csv").display()
        )),
        "{table}"
    );
    let header: Vec<&str> = table
        .lines()
        .nth(2)
        .unwrap()
        .split('|')
        .skip(1)
        .map(str::trim)
        .collect();
    assert_eq!(header, ["storm", "patient"]);
    let (admitted, rejected) = (row(&table, "admitted"), row(&table, "rejected"));
    for i in 0..2 {
        assert_eq!(number(admitted[i]) + number(rejected[i]), 12755, "{table}");
    }
    // The storm's own settings open in the spike (3 s to 7 s), as the demo did;
    // the patient ones, with a 10 s window, much later and far less.
    let first = row(&table, "first opened at (s)");
    let storm_first: f64 = first[0].parse().unwrap();
    assert!((3.0..7.0).contains(&storm_first), "{table}");
    assert!(
        number(row(&table, "failures spared")[0]) > 3 * number(row(&table, "failures spared")[1])
    );
    assert!(number(row(&table, "times opened")[0]) > number(row(&table, "times opened")[1]));
    for title in [
        "failures let through",
        "successes turned away",
        "time not closed (s)",
    ] {
        assert_eq!(row(&table, title).len(), 2, "{title}");
    }
    for name in ["storm", "patient"] {
        let svg = std::fs::read_to_string(dir.join(format!("storm-{name}.svg"))).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains(&format!("replayed under {name}")));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The shipped client trace, recorded by `examples/client.rs --record`: the
/// calls its breakers admitted, keyed by backend. Backend A answered once, then
/// failed three times (its breaker opened: no more rows for A); B answered.
fn recorded_client_trace() -> (Trace, String) {
    let trace = load_trace(&here("traces/client.csv")).unwrap();
    let a = trace.calls()[0]
        .key
        .clone()
        .expect("a recorded call has its key");
    let outcomes = |key: &str| -> Vec<Outcome> {
        let calls = trace.calls().iter();
        calls
            .filter(|c| c.key.as_deref() == Some(key))
            .map(|c| c.outcome)
            .collect()
    };
    use Outcome::{Failure, Success};
    assert_eq!(outcomes(&a), [Success, Failure, Failure, Failure]);
    let b: Vec<_> = trace
        .calls()
        .iter()
        .filter(|c| c.key.as_deref() != Some(&a))
        .collect();
    assert!(b.len() == 1 && b[0].outcome == Success && b[0].key.is_some());
    (trace, a)
}

#[test]
fn the_recorded_client_trace_replays_the_examples_decision() {
    let (trace, a) = recorded_client_trace();
    // The example's breakers: three failures in a row open one for 10 s.
    let builder = CircuitBreaker::builder()
        .consecutive_failures(3)
        .open_duration(Duration::from_secs(10));
    let report = replay(builder, &trace).unwrap();
    let third_failure = trace
        .calls()
        .iter()
        .filter(|c| c.outcome == Outcome::Failure)
        .nth(2)
        .unwrap();
    assert_eq!(report.transitions.len(), 1, "{report:?}");
    let opened = &report.transitions[0];
    assert_eq!((opened.from, opened.to), (State::Closed, State::Open));
    assert_eq!(opened.key.as_deref(), Some(a.as_str()));
    assert_eq!(opened.at, third_failure.at);
    assert_eq!((report.admitted, report.rejected), (5, 0));
}

#[test]
fn every_shipped_setting_replays_the_recorded_client_trace() {
    let (trace, _) = recorded_client_trace();
    for entry in std::fs::read_dir(here("settings")).unwrap() {
        let path = entry.unwrap().path();
        let candidate = Candidate::load(&path).unwrap();
        let (summary, report) = evaluate(&trace, &candidate).unwrap();
        assert_eq!(
            summary.admitted + summary.rejected,
            trace.calls().len() as u64
        );
        // Three failures in a row open the breakers that count a streak that
        // short; a failure rate needs more calls in its window than A had.
        let streak_of_three = matches!(candidate.settings.consecutive_failures, Some(n) if n <= 3);
        assert_eq!(
            report.opened_within(..),
            streak_of_three,
            "{}: {summary:?}",
            path.display()
        );
    }
}

#[test]
fn bad_inputs_name_the_file_the_line_and_the_field() {
    let dir = std::env::temp_dir().join(format!("cutout-tune-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("bad.csv");
    std::fs::write(
        &trace,
        "at_ms,latency_ms,outcome\n10,5,success\n20,5,maybe\n",
    )
    .unwrap();
    let (ok, _, err) = tune(&[&trace, &here("settings/storm.toml")]);
    assert!(!ok);
    assert!(err.contains("bad.csv: line 3, outcome"), "{err}");

    let settings = dir.join("typo.toml");
    std::fs::write(
        &settings,
        "consecutive_failures = 5\nopen_duraton = \"1s\"\n",
    )
    .unwrap();
    let (ok, _, err) = tune(&[&here("traces/client.csv"), &settings]);
    assert!(!ok);
    assert!(
        err.contains("typo.toml") && err.contains("open_duraton"),
        "{err}"
    );

    let zero = dir.join("zero.toml");
    std::fs::write(&zero, "half_open_probes = 0\n").unwrap();
    let (ok, _, err) = tune(&[&here("traces/client.csv"), &zero]);
    assert!(!ok);
    assert!(
        err.contains("zero.toml") && err.contains("half_open_probes"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);

    assert!(Trace::from_csv("".as_bytes()).is_err());
}

/// Two settings of one name would make two columns no reader could tell apart
/// and one timeline file written twice: refused, naming both files. With
/// `--svg`, names that make one file name are refused too.
#[test]
fn two_settings_of_one_name_are_refused() {
    let dir = std::env::temp_dir().join(format!("cutout-tune-names-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (a, b) = (dir.join("a.toml"), dir.join("b.toml"));
    std::fs::write(&a, "name = \"storm\"\n").unwrap();
    std::fs::write(&b, "name = \"storm\"\nconsecutive_failures = 2\n").unwrap();
    let trace = here("traces/client.csv");
    let (ok, _, err) = tune(&[&trace, &a, &b]);
    assert!(!ok);
    assert!(
        err.contains("a.toml and ") && err.contains("b.toml are both named `storm`"),
        "{err}"
    );
    // Two columns told apart, whose timelines would be one file (`storm_.svg`).
    std::fs::write(&a, "name = \"storm!\"\n").unwrap();
    std::fs::write(&b, "name = \"storm?\"\n").unwrap();
    let (ok, _, err) = tune(&[&trace, &a, &b]);
    assert!(ok, "{err}");
    let (ok, _, err) = tune(&[&trace, &a, &b, Path::new("--svg"), &dir]);
    assert!(
        !ok && err.contains("b.toml make one timeline file, storm_.svg"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A settings `name` that is empty or spans two lines would make a column with
/// no title or a broken header: refused, naming the file and `name`.
#[test]
fn a_settings_name_must_be_one_line_of_its_own() {
    let dir = std::env::temp_dir().join(format!("cutout-tune-title-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trace = here("traces/client.csv");
    for (file, text) in [
        ("split.toml", "name = \"a\\nb\"\n"),
        ("empty.toml", "name = \" \"\n"),
    ] {
        let settings = dir.join(file);
        std::fs::write(&settings, text).unwrap();
        let (ok, out, err) = tune(&[&trace, &settings]);
        assert!(!ok && out.is_empty(), "{out}");
        assert!(err.contains(file) && err.contains("name"), "{err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The table's columns line up whatever their cells: one as wide as a week
/// open over two keys (seconds to the hundredth) widens its column.
#[test]
fn the_tables_columns_are_as_wide_as_their_widest_cell() {
    let wide = cutout_tune::Summary {
        not_closed: Duration::from_secs(10_000_000_000),
        ..Default::default()
    };
    let columns = [("a", wide), ("é", cutout_tune::Summary::default())];
    let text = cutout_tune::table("t", &Trace::default(), &columns);
    let bars = |line: &str| -> Vec<usize> {
        let chars = line.chars().enumerate();
        chars
            .filter(|(_, c)| matches!(c, '|' | '+'))
            .map(|(i, _)| i)
            .collect()
    };
    let lines: Vec<&str> = text.lines().skip(2).collect();
    assert_eq!(lines.len(), 10, "{text}");
    for line in &lines {
        assert_eq!(bars(line), bars(lines[0]), "{line:?} in\n{text}");
    }
}

/// An error the tuner cannot write (standard error closed or full) still
/// exits 1, not with a panic's 101.
#[cfg(unix)]
#[test]
fn an_unwritable_standard_error_still_exits_1() {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let status = Command::new(env!("CARGO_BIN_EXE_cutout-tune"))
        .args([here("no-such.csv"), here("settings/eager.toml")])
        .stderr(full)
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(1), "{status}");
}

/// A reader that closes the output early (`| head -1`) does not stop the
/// tuner: it writes every timeline and exits 0.
#[test]
fn a_closed_standard_output_still_writes_every_timeline() {
    let dir = std::env::temp_dir().join(format!("cutout-tune-pipe-{}", std::process::id()));
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader); // closed before the tuner writes a byte
    let status = Command::new(env!("CARGO_BIN_EXE_cutout-tune"))
        .arg(here("traces/client.csv"))
        .args(["eager", "patient"].map(|n| here(&format!("settings/{n}.toml"))))
        .arg("--svg")
        .arg(&dir)
        .stdout(writer)
        .status()
        .unwrap();
    assert!(status.success(), "{status}");
    for name in ["eager", "patient"] {
        assert!(dir.join(format!("client-{name}.svg")).exists(), "{name}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The README's table is what its command prints: the replay is deterministic
/// (the jittered cooldowns take a fixed seed per key).
#[test]
fn the_readmes_table_is_what_its_command_prints() {
    let mut args = vec![here("traces/storm.csv")];
    for name in ["eager", "failures-only", "patient", "storm"] {
        args.push(here(&format!("settings/{name}.toml")));
    }
    let args: Vec<&Path> = args.iter().map(PathBuf::as_path).collect();
    let (ok, table, err) = tune(&args);
    assert!(ok, "{err}");
    let readme = std::fs::read_to_string(here("README.md")).unwrap();
    for line in table.lines().skip(1).filter(|l| !l.is_empty()) {
        assert!(readme.contains(line), "README.md lacks {line:?}");
    }
    // And its reading of `patient`: the failures admitted by its first opening.
    let trace = load_trace(&here("traces/storm.csv")).unwrap();
    let patient = Candidate::load(&here("settings/patient.toml")).unwrap();
    let (summary, report) = evaluate(&trace, &patient).unwrap();
    let first = summary.first_opened.unwrap();
    let admitted = (trace.calls().iter().enumerate())
        .filter(|(_, c)| c.outcome == Outcome::Failure && c.admitted() <= first)
        .filter(|(i, _)| report.was_admitted(*i) == Some(true))
        .count();
    let said = format!("having admitted {admitted} of the failures by then");
    let prose = readme.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(prose.contains(&said), "README.md lacks {said:?}");
}
