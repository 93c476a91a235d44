//! `cutout-tune TRACE SETTINGS.toml...`: replays one recorded trace under each
//! settings file, prints a side-by-side table, and with `--svg DIR` writes a
//! timeline per setting. See README.md.

use clap::Parser;
use cutout_tune::{Candidate, evaluate, load_trace, svg, table};
use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Replays a recorded trace of calls (CSV, or JSON lines as .jsonl) under
/// several cutout settings files (TOML) and compares what each breaker would
/// have done: calls admitted and rejected, failures spared, successes turned
/// away, when it opened.
#[derive(Parser, Debug)]
#[command(
    name = "cutout-tune",
    version,
    after_help = "Example: cargo run -p cutout-tune -- tune/traces/storm.csv tune/settings/*.toml --svg target/tune"
)]
struct Args {
    /// The trace: `at_ms,latency_ms,outcome[,key]` (see `cutout::replay`).
    trace: PathBuf,
    /// Settings files (TOML, the fields of `cutout::Settings`), one column each.
    #[arg(required = true)]
    settings: Vec<PathBuf>,
    /// Also write a timeline per setting to DIR/<trace>-<setting>.svg.
    #[arg(long, value_name = "DIR")]
    svg: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // A closed standard error (`2>&-`, `2>/dev/full`) loses the message,
            // not the exit status.
            let _ = writeln!(std::io::stderr(), "cutout-tune: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> Result<(), String> {
    let trace = load_trace(&args.trace)?;
    let candidates = args
        .settings
        .iter()
        .map(|p| Candidate::load(p))
        .collect::<Result<Vec<_>, _>>()?;
    // Two columns of one name could not be told apart, nor two timelines of
    // one file name.
    let mut names = HashMap::new();
    let mut files = HashMap::new();
    for (c, path) in candidates.iter().zip(&args.settings) {
        if let Some(first) = names.insert(c.name.as_str(), path) {
            return Err(format!(
                "{} and {} are both named `{}`: give one a `name` of its own",
                first.display(),
                path.display(),
                c.name
            ));
        }
        if args.svg.is_some() {
            let file = file_safe(&c.name);
            if let Some(first) = files.insert(file.clone(), path) {
                return Err(format!(
                    "{} and {} make one timeline file, {file}.svg: give one a `name` \
                     of letters, digits, `-` and `_` of its own",
                    first.display(),
                    path.display()
                ));
            }
        }
    }
    let mut columns = Vec::new();
    let mut reports = Vec::new();
    for (c, path) in candidates.iter().zip(&args.settings) {
        let (summary, report) =
            evaluate(&trace, c).map_err(|e| format!("{}: {e}", path.display()))?;
        columns.push((c.name.as_str(), summary));
        reports.push(report);
    }
    let label = args.trace.display().to_string();
    let mut out = Stdout::default();
    out.say(&table(&label, &trace, &columns));
    if let Some(dir) = &args.svg {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let stem = args
            .trace
            .file_stem()
            .map_or_else(|| "trace".into(), |s| s.to_string_lossy());
        for ((name, summary), report) in columns.iter().zip(&reports) {
            let path = dir.join(format!("{stem}-{}.svg", file_safe(name)));
            let chart = svg::timeline(&label, name, &trace, report, summary);
            std::fs::write(&path, chart)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            out.say(&format!("Timeline written to {}\n", path.display()));
        }
    }
    out.result()
}

/// Standard output that a reader may close early (`| head`): what cannot be
/// written is dropped, and the work (the timelines) goes on.
#[derive(Default)]
struct Stdout {
    /// The first error other than a closed pipe, reported at the end.
    error: Option<std::io::Error>,
    closed: bool,
}

impl Stdout {
    fn say(&mut self, text: &str) {
        if self.closed || self.error.is_some() {
            return;
        }
        match std::io::stdout().lock().write_all(text.as_bytes()) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => self.closed = true,
            Err(e) => self.error = Some(e),
        }
    }

    fn result(self) -> Result<(), String> {
        match self.error {
            Some(e) => Err(format!("cannot write to standard output: {e}")),
            None => Ok(()),
        }
    }
}

/// `name` with anything but letters, digits, `-` and `_` replaced by `_`.
fn file_safe(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse_and_a_trace_needs_settings() {
        assert!(Args::try_parse_from(["cutout-tune", "t.csv"]).is_err());
        let a = Args::try_parse_from(["cutout-tune", "t.csv", "a.toml", "b.toml", "--svg", "out"])
            .unwrap();
        assert_eq!(a.settings.len(), 2);
        assert_eq!(file_safe("a b/c"), "a_b_c");
    }
}
