//! `cutout-tune`: replays one recorded trace under several cutout settings files
//! and compares them, in a side-by-side table and an SVG timeline per setting.
//! See README.md for the command line, and `cutout::replay` for the trace format
//! and the replay rule.
//!
//! # Examples
//! ```
//! use cutout::replay::Trace;
//! use cutout_tune::{Candidate, evaluate, table};
//!
//! let trace = Trace::from_csv("at_ms,latency_ms,outcome\n10,5,failure\n20,5,failure\n30,5,success\n".as_bytes())?;
//! let candidate = Candidate::from_toml("one", "consecutive_failures = 1")?;
//! let (summary, _report) = evaluate(&trace, &candidate)?;
//! assert_eq!((summary.admitted, summary.rejected), (1, 2));
//! let text = table("example", &trace, &[(candidate.name.as_str(), summary)]);
//! assert!(text.contains("failures spared"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod svg;

use cutout::replay::{Report, Trace, replay};
use cutout::{Builder, Outcome, Settings, State};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

/// One settings file to try: its name (the file's `name`, or its file name) and
/// its settings.
#[derive(Clone, Debug)]
pub struct Candidate {
    /// The column title.
    pub name: String,
    /// The settings.
    pub settings: Settings,
}

impl Candidate {
    /// Parses TOML `text`; `fallback` names the candidate unless the file has a
    /// `name`.
    ///
    /// # Errors
    /// The parser's message (it names the line and the field), or one naming
    /// `name` if it is empty or holds a control character (a line break).
    ///
    /// # Examples
    /// ```
    /// let c = cutout_tune::Candidate::from_toml("file", "name = \"fast\"\nopen_duration = \"2s\"")?;
    /// assert_eq!(c.name, "fast");
    /// assert!(cutout_tune::Candidate::from_toml("file", "open_duraton = \"2s\"").is_err());
    /// assert!(cutout_tune::Candidate::from_toml("file", "name = \"a\\nb\"").is_err());
    /// # Ok::<(), String>(())
    /// ```
    pub fn from_toml(fallback: &str, text: &str) -> Result<Candidate, String> {
        let settings: Settings = toml::from_str(text).map_err(|e| e.to_string())?;
        let name = settings.name.clone().unwrap_or_else(|| fallback.to_owned());
        // A column title, and a timeline's file name: one line, not empty.
        if name.trim().is_empty() || name.chars().any(char::is_control) {
            return Err(format!(
                "name {name:?}: a column title needs a name of its own, on one line"
            ));
        }
        Ok(Candidate { name, settings })
    }

    /// Reads the TOML file at `path`, named after the file unless it has a `name`.
    ///
    /// # Errors
    /// A message naming the file: it cannot be read, or does not parse (the
    /// parser names the line and the field).
    ///
    /// # Examples
    /// ```
    /// let err = cutout_tune::Candidate::load("no/such/file.toml".as_ref()).unwrap_err();
    /// assert!(err.contains("no/such/file.toml"));
    /// ```
    pub fn load(path: &Path) -> Result<Candidate, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
        let stem = path
            .file_stem()
            .map_or_else(|| "settings".into(), |s| s.to_string_lossy());
        Candidate::from_toml(&stem, &text).map_err(|e| format!("{}: {e}", path.display()))
    }
}

/// Reads the trace at `path`: JSON lines if it ends in `.jsonl` or `.ndjson`,
/// CSV otherwise.
///
/// # Errors
/// A message naming the file, the line and the field.
///
/// # Examples
/// ```
/// let err = cutout_tune::load_trace("no/such/trace.csv".as_ref()).unwrap_err();
/// assert!(err.contains("no/such/trace.csv"));
/// ```
pub fn load_trace(path: &Path) -> Result<Trace, String> {
    let file =
        std::fs::File::open(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    let json = matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("jsonl" | "ndjson")
    );
    let trace = if json {
        Trace::from_json_lines(file)
    } else {
        Trace::from_csv(file)
    };
    trace.map_err(|e| format!("{}: {e}", path.display()))
}

/// What one setting did with the trace: the table's column.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Summary {
    /// Calls in the trace.
    pub calls: u64,
    /// Calls admitted.
    pub admitted: u64,
    /// Calls rejected.
    pub rejected: u64,
    /// Admitted calls that failed: failures the dependency still got.
    pub failures_let_through: u64,
    /// Rejected calls that had failed.
    pub failures_spared: u64,
    /// Rejected calls that had succeeded.
    pub successes_turned_away: u64,
    /// Transitions to Open (trips and failed probe rounds).
    pub opened: u64,
    /// The first, if any.
    pub first_opened: Option<Duration>,
    /// Time the breakers spent out of Closed (summed over keys), up to the
    /// trace's end.
    pub not_closed: Duration,
}

impl Summary {
    /// The summary of `report`, a replay of `trace`.
    ///
    /// # Examples
    /// ```
    /// use cutout::replay::{Trace, replay};
    ///
    /// let trace = Trace::from_csv("at_ms,latency_ms,outcome\n10,5,failure\n20,5,success\n".as_bytes())?;
    /// let report = replay(cutout::CircuitBreaker::builder().consecutive_failures(1), &trace)?;
    /// let summary = cutout_tune::Summary::of(&trace, &report);
    /// assert_eq!(summary.first_opened, Some(std::time::Duration::from_millis(10)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn of(trace: &Trace, report: &Report) -> Summary {
        let failures_let_through = trace
            .calls()
            .iter()
            .enumerate()
            .filter(|(i, c)| c.outcome == Outcome::Failure && report.was_admitted(*i) == Some(true))
            .count() as u64;
        let opens = report.transitions.iter().filter(|t| t.to == State::Open);
        let mut out_since: HashMap<Option<&str>, Duration> = HashMap::new();
        let mut not_closed = Duration::ZERO;
        for t in &report.transitions {
            let key = t.key.as_deref();
            match (t.from == State::Closed, t.to == State::Closed) {
                (true, false) => {
                    out_since.insert(key, t.at);
                }
                (false, true) => {
                    if let Some(since) = out_since.remove(&key) {
                        not_closed += t.at.saturating_sub(since);
                    }
                }
                _ => {}
            }
        }
        let end = trace.end();
        for since in out_since.values() {
            not_closed += end.saturating_sub(*since);
        }
        Summary {
            calls: trace.calls().len() as u64,
            admitted: report.admitted,
            rejected: report.rejected,
            failures_let_through,
            failures_spared: report.failures_spared,
            successes_turned_away: report.successes_turned_away,
            opened: opens.clone().count() as u64,
            first_opened: opens.map(|t| t.at).min(),
            not_closed,
        }
    }
}

impl Summary {
    /// The table's rows: each title and this column's cell.
    fn cells(&self) -> [(&'static str, String); 8] {
        let seconds = |d: Duration| format!("{:.2}", d.as_secs_f64());
        [
            ("admitted", self.admitted.to_string()),
            ("rejected", self.rejected.to_string()),
            (
                "failures let through",
                self.failures_let_through.to_string(),
            ),
            ("failures spared", self.failures_spared.to_string()),
            (
                "successes turned away",
                self.successes_turned_away.to_string(),
            ),
            ("times opened", self.opened.to_string()),
            (
                "first opened at (s)",
                self.first_opened.map_or("never".into(), seconds),
            ),
            ("time not closed (s)", seconds(self.not_closed)),
        ]
    }
}

/// Replays `trace` under `candidate`'s settings.
///
/// # Errors
/// The settings' [`ConfigError`](cutout::ConfigError), as a message naming the
/// candidate and the field.
///
/// # Examples
/// ```
/// use cutout::replay::Trace;
/// use cutout_tune::{Candidate, evaluate};
///
/// let bad = Candidate::from_toml("zero", "half_open_probes = 0")?;
/// let err = evaluate(&Trace::default(), &bad).unwrap_err();
/// assert!(err.contains("half_open_probes"), "{err}");
/// # Ok::<(), String>(())
/// ```
pub fn evaluate(trace: &Trace, candidate: &Candidate) -> Result<(Summary, Report), String> {
    let report = replay(Builder::from_settings(&candidate.settings), trace)
        .map_err(|e| format!("{}: {e}", candidate.name))?;
    Ok((Summary::of(trace, &report), report))
}

/// The side-by-side table: one row per measure, one column per setting.
///
/// # Examples
/// See the [crate docs](crate).
pub fn table(label: &str, trace: &Trace, columns: &[(&str, Summary)]) -> String {
    let failed = trace
        .calls()
        .iter()
        .filter(|c| c.outcome == Outcome::Failure)
        .count();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{label}: {} calls over {:.1} s, {failed} of them failed",
        trace.calls().len(),
        trace.end().as_secs_f64()
    );
    let _ = writeln!(out);
    let cells: Vec<[(&str, String); 8]> = columns.iter().map(|(_, s)| s.cells()).collect();
    // As wide as the widest title or cell, in characters (as `{:>width$}` pads).
    let titles = columns.iter().map(|(name, _)| name.chars().count());
    let figures = cells.iter().flatten().map(|(_, cell)| cell.chars().count());
    let width = titles.chain(figures).max().unwrap_or(0).max(9);
    let _ = write!(out, "{:<22}", "");
    for (name, _) in columns {
        let _ = write!(out, " | {name:>width$}");
    }
    let _ = writeln!(out);
    let _ = write!(out, "{:-<22}", "");
    for _ in columns {
        let _ = write!(out, "-+-{:-<width$}", "");
    }
    let _ = writeln!(out);
    for (r, (title, _)) in Summary::default().cells().iter().enumerate() {
        let _ = write!(out, "{title:<22}");
        for column in &cells {
            let _ = write!(out, " | {:>width$}", column[r].1);
        }
        let _ = writeln!(out);
    }
    out
}
