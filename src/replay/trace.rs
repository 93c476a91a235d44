//! [`Trace`]: recorded calls, read from CSV or JSON lines, and written back.

use crate::Outcome;
use crate::settings::text::{format_millis, parse_millis};
use std::fmt;
use std::io::{self, BufRead, Write};
use std::time::Duration;

/// One recorded call: when it ended, how long it ran, what it came to, and
/// optionally which dependency it called.
///
/// # Examples
/// ```
/// use cutout::Outcome;
/// use cutout::replay::Call;
/// use std::time::Duration;
///
/// let call = Call::new(Duration::from_millis(900), Duration::from_millis(300), Outcome::Failure);
/// assert_eq!(call.admitted(), Duration::from_millis(600));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Call {
    /// When the call ended (its outcome was known), from the trace's time zero.
    pub at: Duration,
    /// How long it ran: it was admitted this long before `at`.
    pub latency: Duration,
    /// What it came to.
    pub outcome: Outcome,
    /// The dependency it called, for a trace of several: each key is replayed
    /// through a breaker of its own.
    pub key: Option<String>,
}

impl Call {
    /// A call with no key.
    ///
    /// # Examples
    /// ```
    /// use cutout::{Outcome, replay::Call};
    /// use std::time::Duration;
    ///
    /// let call = Call::new(Duration::from_secs(1), Duration::ZERO, Outcome::Success);
    /// assert_eq!(call.key, None);
    /// ```
    pub fn new(at: Duration, latency: Duration, outcome: Outcome) -> Call {
        Call {
            at,
            latency,
            outcome,
            key: None,
        }
    }

    /// The same call, with `key`.
    ///
    /// # Examples
    /// ```
    /// use cutout::{Outcome, replay::Call};
    /// use std::time::Duration;
    ///
    /// let call = Call::new(Duration::from_secs(1), Duration::ZERO, Outcome::Success).with_key("db");
    /// assert_eq!(call.key.as_deref(), Some("db"));
    /// ```
    pub fn with_key(self, key: impl Into<String>) -> Call {
        Call {
            key: Some(key.into()),
            ..self
        }
    }

    /// When the call was admitted: `at - latency` (zero if the latency is longer).
    ///
    /// # Examples
    /// ```
    /// use cutout::{Outcome, replay::Call};
    /// use std::time::Duration;
    ///
    /// let call = Call::new(Duration::from_secs(2), Duration::from_secs(1), Outcome::Success);
    /// assert_eq!(call.admitted(), Duration::from_secs(1));
    /// ```
    pub fn admitted(&self) -> Duration {
        self.at.saturating_sub(self.latency)
    }

    /// A trace's order: by admission, then by end. A file written in end order
    /// (as [`Trace::write_csv`] and a recorder write) reads back to the order
    /// it was written from.
    fn order(&self) -> (Duration, Duration) {
        (self.admitted(), self.at)
    }
}

/// A recorded trace of calls, in admission order.
///
/// The format, CSV or JSON lines, is one call per line with the fields
/// `at_ms,latency_ms,outcome[,key]`:
/// - `at_ms`: when the call ended, in milliseconds from the trace's time zero; a
///   decimal number, exact to the nanosecond ("1500", "1500.25").
/// - `latency_ms`: how long it ran, the same way; it was admitted `latency_ms`
///   before `at_ms`, which must not be before time zero.
/// - `outcome`: `success`, `failure` or `ignored`.
/// - `key` (optional): the dependency called; each key gets a breaker of its own
///   in a [`replay`](super::replay()).
///
/// A CSV trace starts with a header naming the columns (in any order); its
/// fields hold no commas or quotes and are trimmed, and an empty `key` is no key.
/// A JSON-lines trace has one object per line
/// (`{"at_ms": 1500, "latency_ms": 20, "outcome": "success"}`, each field once), with no header;
/// its numbers are read as JSON numbers are (64-bit floats), so they are exact to
/// about 15 significant digits (a nanosecond in 11 days), where CSV is exact.
/// Blank lines are skipped, and so is a byte-order mark at the start (as a
/// spreadsheet's export writes); lines need not be in time order. A bad line is a
/// [`TraceError`] naming its line (1-based, the header being line 1) and field.
///
/// # Examples
/// ```
/// use cutout::replay::Trace;
///
/// let csv = "at_ms,latency_ms,outcome\n120,20,success\n640,500,failure\n";
/// let trace = Trace::from_csv(csv.as_bytes())?;
/// assert_eq!(trace.calls().len(), 2);
///
/// let err = Trace::from_csv("at_ms,latency_ms,outcome\n120,20,sucess\n".as_bytes()).unwrap_err();
/// assert_eq!((err.line(), err.field()), (2, Some("outcome")));
/// # Ok::<(), cutout::replay::TraceError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trace {
    /// Sorted by admission time, stably (lines admitted at once keep their order).
    calls: Vec<Call>,
}

/// The columns of a trace.
const AT: &str = "at_ms";
const LATENCY: &str = "latency_ms";
const OUTCOME: &str = "outcome";
const KEY: &str = "key";

impl Trace {
    /// The latest time a call of a trace may end: 2^62 ns, about 146 years. Its
    /// breakers' deadlines (an end plus a cooldown of up to 584 years) then
    /// never reach the end of their clock, where a cooldown could not run.
    pub const MAX_AT: Duration = Duration::from_nanos(1 << 62);

    /// A trace of `calls`, in any order.
    ///
    /// # Errors
    /// A [`TraceError`] naming `latency_ms` for a call admitted before time zero
    /// (a latency longer than its `at`), or `at_ms` for one that ends after
    /// [`MAX_AT`](Self::MAX_AT); its line is the call's 1-based position.
    ///
    /// # Examples
    /// ```
    /// use cutout::{Outcome, replay::{Call, Trace}};
    /// use std::time::Duration;
    ///
    /// let ms = Duration::from_millis;
    /// let trace = Trace::from_calls(vec![Call::new(ms(50), ms(10), Outcome::Success)])?;
    /// assert_eq!(trace.calls()[0].admitted(), ms(40));
    /// assert!(Trace::from_calls(vec![Call::new(ms(5), ms(10), Outcome::Success)]).is_err());
    /// # Ok::<(), cutout::replay::TraceError>(())
    /// ```
    pub fn from_calls(calls: Vec<Call>) -> Result<Trace, TraceError> {
        for (i, call) in calls.iter().enumerate() {
            check_admission(call, i + 1)?;
        }
        let mut calls = calls;
        calls.sort_by_key(Call::order);
        Ok(Trace { calls })
    }

    /// Reads a CSV trace (see [`Trace`] for the format).
    ///
    /// # Errors
    /// A [`TraceError`] naming the line and, where one is at fault, the field: a
    /// missing or unknown column, a field that is not a number or an outcome, a
    /// call admitted before time zero, or a read that failed.
    ///
    /// # Examples
    /// ```
    /// use cutout::replay::Trace;
    ///
    /// let trace = Trace::from_csv("outcome,at_ms,latency_ms,key\nfailure,10,2.5,db\n".as_bytes())?;
    /// assert_eq!(trace.calls()[0].key.as_deref(), Some("db"));
    /// # Ok::<(), cutout::replay::TraceError>(())
    /// ```
    pub fn from_csv(reader: impl io::Read) -> Result<Trace, TraceError> {
        let mut lines = io::BufReader::new(reader).lines();
        let header = match lines.next() {
            None => return Err(TraceError::new(1, None, "the trace is empty: no header")),
            Some(line) => line.map_err(|e| TraceError::read(1, &e))?,
        };
        // A byte-order mark, as spreadsheets write before a CSV export, is no
        // part of the first column's name.
        let columns = header_columns(header.strip_prefix('\u{feff}').unwrap_or(&header))?;
        let mut calls = Vec::new();
        for (i, line) in lines.enumerate() {
            let n = i + 2;
            let line = line.map_err(|e| TraceError::read(n, &e))?;
            if line.trim().is_empty() {
                continue;
            }
            let fields: Vec<&str> = line.split(',').map(str::trim).collect();
            if fields.len() != columns.len() {
                return Err(TraceError::new(
                    n,
                    None,
                    format!(
                        "{} fields where the header has {} columns",
                        fields.len(),
                        columns.len()
                    ),
                ));
            }
            let get = |name: &str| columns.iter().position(|c| *c == name).map(|i| fields[i]);
            let (at, latency, outcome) = (
                get(AT).unwrap_or_default(),
                get(LATENCY).unwrap_or_default(),
                get(OUTCOME).unwrap_or_default(),
            );
            let call = Call {
                at: millis(n, AT, at)?,
                latency: millis(n, LATENCY, latency)?,
                outcome: outcome_of(n, outcome)?,
                key: get(KEY).filter(|k| !k.is_empty()).map(str::to_owned),
            };
            check_admission(&call, n)?;
            calls.push(call);
        }
        calls.sort_by_key(Call::order);
        Ok(Trace { calls })
    }

    /// Reads a JSON-lines trace: one object per line with the fields `at_ms`,
    /// `latency_ms` (numbers), `outcome` (a string) and optionally `key` (a string
    /// or null); no header, so the first line is line 1.
    ///
    /// # Errors
    /// A [`TraceError`] naming the line and, where one is at fault, the field: a
    /// line that is not a JSON object, a missing, unknown or ill-typed field, a call
    /// admitted before time zero, or a read that failed.
    ///
    /// # Examples
    /// ```
    /// use cutout::replay::Trace;
    ///
    /// let lines = r#"{"at_ms": 120, "latency_ms": 20, "outcome": "success"}
    /// {"at_ms": 640.5, "latency_ms": 500, "outcome": "failure", "key": "db"}"#;
    /// let trace = Trace::from_json_lines(lines.as_bytes())?;
    /// assert_eq!(trace.calls().len(), 2);
    /// let err = Trace::from_json_lines(r#"{"at_ms": 1, "outcome": "success"}"#.as_bytes())
    ///     .unwrap_err();
    /// assert_eq!((err.line(), err.field()), (1, Some("latency_ms")));
    /// # Ok::<(), cutout::replay::TraceError>(())
    /// ```
    pub fn from_json_lines(reader: impl io::Read) -> Result<Trace, TraceError> {
        use serde_json::Value;
        let mut calls = Vec::new();
        for (i, line) in io::BufReader::new(reader).lines().enumerate() {
            let n = i + 1;
            let line = line.map_err(|e| TraceError::read(n, &e))?;
            // A byte-order mark before the first line is no part of it.
            let line = match n {
                1 => line.strip_prefix('\u{feff}').unwrap_or(&line),
                _ => &line,
            };
            if line.trim().is_empty() {
                continue;
            }
            let Entries(entries) = serde_json::from_str(line).map_err(|e| match e.classify() {
                serde_json::error::Category::Data => TraceError::new(n, None, "not a JSON object"),
                _ => TraceError::new(n, None, format!("not JSON: {e}")),
            })?;
            let mut object = serde_json::Map::new();
            for (name, value) in entries {
                let Some(&field) = [AT, LATENCY, OUTCOME, KEY].iter().find(|f| **f == name) else {
                    return Err(TraceError::unknown_column(n, &name));
                };
                if object.insert(name, value).is_some() {
                    return Err(TraceError::new(n, Some(field), "given twice"));
                }
            }
            let field = |name: &'static str| {
                object
                    .get(name)
                    .ok_or_else(|| TraceError::new(n, Some(name), "missing"))
            };
            let number = |name: &'static str| match field(name)? {
                Value::Number(x) => millis(n, name, &plain_decimal(&x.to_string())),
                other => Err(TraceError::new(
                    n,
                    Some(name),
                    format!("{other} is not a number"),
                )),
            };
            let (at, latency) = (number(AT)?, number(LATENCY)?);
            let outcome = match field(OUTCOME)? {
                Value::String(s) => outcome_of(n, s)?,
                other => {
                    return Err(TraceError::new(
                        n,
                        Some(OUTCOME),
                        format!("{other} is not a string"),
                    ));
                }
            };
            let key = match object.get(KEY) {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => Some(s.clone()),
                Some(other) => {
                    return Err(TraceError::new(
                        n,
                        Some(KEY),
                        format!("{other} is not a string"),
                    ));
                }
            };
            let call = Call {
                at,
                latency,
                outcome,
                key,
            };
            check_admission(&call, n)?;
            calls.push(call);
        }
        calls.sort_by_key(Call::order);
        Ok(Trace { calls })
    }

    /// Writes the trace as CSV, in time order of the calls' ends, with a `key`
    /// column if any call has a key. [`from_csv`](Self::from_csv) reads it back
    /// to the same trace.
    ///
    /// # Errors
    /// The writer's error, or [`io::ErrorKind::InvalidInput`] for a key CSV would
    /// read back otherwise: one holding a comma, a quote or a line break, an
    /// empty one, or one with spaces around it (JSON lines can carry those).
    ///
    /// # Examples
    /// ```
    /// use cutout::replay::Trace;
    ///
    /// let trace = Trace::from_csv("at_ms,latency_ms,outcome\n120,20.5,success\n".as_bytes())?;
    /// let mut out = Vec::new();
    /// trace.write_csv(&mut out)?;
    /// assert_eq!(String::from_utf8(out)?, "at_ms,latency_ms,outcome\n120,20.5,success\n");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn write_csv(&self, mut w: impl Write) -> io::Result<()> {
        let keyed = self.calls.iter().any(|c| c.key.is_some());
        writeln!(
            w,
            "{AT},{LATENCY},{OUTCOME}{}",
            if keyed { ",key" } else { "" }
        )?;
        for call in self.by_end() {
            write_csv_row(&mut w, call, keyed)?;
        }
        Ok(())
    }

    /// Writes the trace as JSON lines, in time order of the calls' ends.
    /// [`from_json_lines`](Self::from_json_lines) reads it back to the same trace.
    ///
    /// # Errors
    /// The writer's.
    ///
    /// # Examples
    /// ```
    /// use cutout::replay::Trace;
    ///
    /// let trace = Trace::from_csv("at_ms,latency_ms,outcome\n120,20,ignored\n".as_bytes())?;
    /// let mut out = Vec::new();
    /// trace.write_json_lines(&mut out)?;
    /// assert_eq!(Trace::from_json_lines(out.as_slice())?, trace);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn write_json_lines(&self, mut w: impl Write) -> io::Result<()> {
        for call in self.by_end() {
            write_json_line(&mut w, call)?;
        }
        Ok(())
    }

    /// The calls, in admission order (`at - latency`; calls admitted at the same
    /// time in the order they ended, then in the order they were read).
    ///
    /// # Examples
    /// ```
    /// use cutout::replay::Trace;
    ///
    /// // The second line ended later but was admitted first.
    /// let trace = Trace::from_csv("at_ms,latency_ms,outcome\n100,10,success\n200,150,failure\n".as_bytes())?;
    /// assert_eq!(trace.calls()[0].latency.as_millis(), 150);
    /// # Ok::<(), cutout::replay::TraceError>(())
    /// ```
    pub fn calls(&self) -> &[Call] {
        &self.calls
    }

    /// When the last call ended (zero for an empty trace).
    ///
    /// # Examples
    /// ```
    /// use cutout::replay::Trace;
    ///
    /// let trace = Trace::from_csv("at_ms,latency_ms,outcome\n900,10,success\n200,150,failure\n".as_bytes())?;
    /// assert_eq!(trace.end().as_millis(), 900);
    /// # Ok::<(), cutout::replay::TraceError>(())
    /// ```
    pub fn end(&self) -> Duration {
        self.calls.iter().map(|c| c.at).max().unwrap_or_default()
    }

    fn by_end(&self) -> Vec<&Call> {
        let mut calls: Vec<&Call> = self.calls.iter().collect();
        calls.sort_by_key(|c| c.at);
        calls
    }
}

/// A JSON object's entries as written: a name given twice is kept twice (a map
/// would keep only the last).
struct Entries(Vec<(String, serde_json::Value)>);

impl<'de> serde::Deserialize<'de> for Entries {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Entries, D::Error> {
        struct Object;
        impl<'de> serde::de::Visitor<'de> for Object {
            type Value = Entries;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Entries, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    entries.push(entry);
                }
                Ok(Entries(entries))
            }
        }
        d.deserialize_map(Object)
    }
}

/// One CSV row (with a `key` field if `keyed`). A key that CSV would read back
/// otherwise is refused: one with a comma, a quote or a line break, an empty one
/// (an empty field is no key), or one with spaces around it (fields are trimmed).
pub(super) fn write_csv_row(mut w: impl Write, call: &Call, keyed: bool) -> io::Result<()> {
    write!(
        w,
        "{},{},{}",
        format_millis(call.at),
        format_millis(call.latency),
        outcome_name(call.outcome)
    )?;
    if keyed {
        let key = call.key.as_deref().unwrap_or_default();
        let empty = call.key.is_some() && key.is_empty();
        if empty || key.trim() != key || key.contains([',', '"', '\n', '\r']) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("the key {key:?} cannot be written to CSV; use JSON lines"),
            ));
        }
        write!(w, ",{key}")?;
    }
    writeln!(w)
}

/// One JSON line.
pub(super) fn write_json_line(mut w: impl Write, call: &Call) -> io::Result<()> {
    // The milliseconds as the CSV writes them: exact, not through a float.
    write!(
        w,
        r#"{{"{AT}":{},"{LATENCY}":{},"{OUTCOME}":"{}""#,
        format_millis(call.at),
        format_millis(call.latency),
        outcome_name(call.outcome)
    )?;
    if let Some(key) = &call.key {
        write!(w, r#","{KEY}":{}"#, serde_json::Value::from(key.as_str()))?;
    }
    writeln!(w, "}}")
}

/// The column names of a CSV header, checked: each known, none twice, the three
/// required ones present.
fn header_columns(header: &str) -> Result<Vec<&str>, TraceError> {
    let columns: Vec<&str> = header.split(',').map(str::trim).collect();
    for (i, c) in columns.iter().enumerate() {
        if ![AT, LATENCY, OUTCOME, KEY].contains(c) {
            return Err(TraceError::unknown_column(1, c));
        }
        if columns[..i].contains(c) {
            return Err(TraceError::new(1, Some(c), "named twice in the header"));
        }
    }
    for required in [AT, LATENCY, OUTCOME] {
        if !columns.contains(&required) {
            return Err(TraceError::new(
                1,
                Some(required),
                "missing from the header",
            ));
        }
    }
    Ok(columns)
}

fn millis(line: usize, field: &'static str, text: &str) -> Result<Duration, TraceError> {
    parse_millis(text)
        .map_err(|why| TraceError::new(line, Some(field), format!("{why} (milliseconds)")))
}

/// A JSON number as a plain decimal: "1e-6" as "0.000001", "1.5e3" as "1500";
/// anything else as it is (the millisecond parser then says what is wrong).
fn plain_decimal(number: &str) -> String {
    let Some((mantissa, exponent)) = number.split_once(['e', 'E']) else {
        return number.to_owned();
    };
    let Ok(exponent) = exponent.parse::<i32>() else {
        return number.to_owned();
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if whole.starts_with('-') || exponent.unsigned_abs() > 40 {
        return number.to_owned();
    }
    let digits = format!("{whole}{fraction}");
    // The decimal point's position in `digits`.
    let point = i64::try_from(whole.len()).unwrap_or(0) + i64::from(exponent);
    if point <= 0 {
        let zeros = usize::try_from(-point).unwrap_or(0);
        format!("0.{}{digits}", "0".repeat(zeros))
    } else {
        let point = usize::try_from(point).unwrap_or(0);
        if point >= digits.len() {
            format!("{digits}{}", "0".repeat(point - digits.len()))
        } else {
            format!("{}.{}", &digits[..point], &digits[point..])
        }
    }
}

fn outcome_of(line: usize, text: &str) -> Result<Outcome, TraceError> {
    match text {
        "success" => Ok(Outcome::Success),
        "failure" => Ok(Outcome::Failure),
        "ignored" => Ok(Outcome::Ignored),
        other => Err(TraceError::new(
            line,
            Some(OUTCOME),
            format!("`{other}` is not success, failure or ignored"),
        )),
    }
}

fn outcome_name(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Success => "success",
        Outcome::Failure => "failure",
        Outcome::Ignored => "ignored",
    }
}

fn check_admission(call: &Call, line: usize) -> Result<(), TraceError> {
    if call.at > Trace::MAX_AT {
        return Err(TraceError::new(
            line,
            Some(AT),
            format!(
                "{} ms is later than the latest a trace holds, {} ms (about 146 years)",
                format_millis(call.at),
                format_millis(Trace::MAX_AT)
            ),
        ));
    }
    if call.latency > call.at {
        return Err(TraceError::new(
            line,
            Some(LATENCY),
            format!(
                "{} ms is longer than at_ms {}: the call would start before time zero",
                format_millis(call.latency),
                format_millis(call.at)
            ),
        ));
    }
    Ok(())
}

/// A trace that could not be read: its line (1-based; a CSV header is line 1),
/// the field at fault if one is, and why.
///
/// # Examples
/// ```
/// use cutout::replay::Trace;
///
/// let err = Trace::from_csv("at_ms,latency_ms,outcome\n10,20,success\n".as_bytes()).unwrap_err();
/// assert_eq!((err.line(), err.field()), (2, Some("latency_ms")));
/// assert!(err.to_string().starts_with("line 2, latency_ms: "), "{err}");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceError {
    line: usize,
    field: Option<String>,
    reason: String,
}

impl TraceError {
    fn new(line: usize, field: Option<&str>, reason: impl Into<String>) -> TraceError {
        TraceError {
            line,
            field: field.map(str::to_owned),
            reason: reason.into(),
        }
    }

    fn unknown_column(line: usize, name: &str) -> TraceError {
        TraceError {
            line,
            field: Some(name.to_owned()),
            reason: format!(
                "unknown field `{name}` (the fields are {AT}, {LATENCY}, {OUTCOME} and {KEY})"
            ),
        }
    }

    fn read(line: usize, e: &io::Error) -> TraceError {
        TraceError::new(line, None, format!("cannot read: {e}"))
    }

    /// The line at fault, 1-based (a CSV header is line 1).
    ///
    /// # Examples
    /// ```
    /// let err = cutout::replay::Trace::from_csv("at_ms,outcome\n".as_bytes()).unwrap_err();
    /// assert_eq!(err.line(), 1);
    /// ```
    pub fn line(&self) -> usize {
        self.line
    }

    /// The field at fault, if one is; for an unknown field, its name as written.
    ///
    /// # Examples
    /// ```
    /// let err = cutout::replay::Trace::from_csv("at_ms,latency,outcome\n".as_bytes()).unwrap_err();
    /// assert_eq!(err.field(), Some("latency"));
    /// ```
    pub fn field(&self) -> Option<&str> {
        self.field.as_deref()
    }

    /// Why the line was refused.
    ///
    /// # Examples
    /// ```
    /// let err = cutout::replay::Trace::from_csv("".as_bytes()).unwrap_err();
    /// assert!(err.reason().contains("empty"));
    /// ```
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.field() {
            Some(field) => write!(f, "line {}, {field}: {}", self.line, self.reason),
            None => write!(f, "line {}: {}", self.line, self.reason),
        }
    }
}

impl std::error::Error for TraceError {}
