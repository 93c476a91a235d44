//! `--record FILE`: the dependency calls the run with the breaker tried to make,
//! written as a trace that `cutout::replay` and the tuner (`tune/`) read: CSV,
//! `at_ms,latency_ms,outcome`, one line per call in the order the calls ended.
//!
//! A call the breaker turned away is recorded too, with what the simulated
//! dependency would have done with it (its latency and outcome are drawn before
//! the breaker is asked): a replay under other settings may admit it. The trace
//! is exact to the nanosecond, so a replay under the demo's own settings makes
//! the demo's decisions (up to the jitter: see `cutout::replay`). Two recordings
//! of one seed differ a little: the jitter's seed is random, and a call turned
//! away frees its worker sooner, so the later requests come at other times.

use crate::sim::Response;
use std::io::{self, Write};
use std::sync::Mutex;
use std::time::Duration;

/// One call the run tried to make.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attempt {
    /// When it was admitted (or turned away), in run time.
    pub admitted: Duration,
    /// How long it ran, or would have.
    pub latency: Duration,
    /// Whether it succeeded, or would have.
    pub ok: bool,
}

/// The attempts of one run, from every worker.
#[derive(Debug, Default)]
pub struct Attempts(Mutex<Vec<Attempt>>);

impl Attempts {
    /// A worker is about to call the dependency at `now`, which will answer
    /// `response` (if the breaker admits the call).
    pub fn push(&self, now: Duration, response: Response) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Attempt {
                admitted: now,
                latency: response.latency,
                ok: response.ok,
            });
    }

    /// Every attempt so far, in the order the calls end (then as recorded).
    pub fn sorted(&self) -> Vec<Attempt> {
        let mut v = self.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
        v.sort_by_key(|a| a.admitted + a.latency);
        v
    }

    /// Writes the trace as CSV.
    pub fn write_csv(&self, mut w: impl Write) -> io::Result<()> {
        writeln!(w, "at_ms,latency_ms,outcome")?;
        for a in self.sorted() {
            let outcome = if a.ok { "success" } else { "failure" };
            writeln!(
                w,
                "{},{},{outcome}",
                millis(a.admitted + a.latency),
                millis(a.latency)
            )?;
        }
        Ok(())
    }
}

/// `d` as decimal milliseconds, exact to the nanosecond, no trailing zeros.
fn millis(d: Duration) -> String {
    let nanos = d.as_nanos();
    let fraction = format!("{:06}", nanos % 1_000_000);
    let fraction = fraction.trim_end_matches('0');
    match fraction {
        "" => format!("{}", nanos / 1_000_000),
        _ => format!("{}.{fraction}", nanos / 1_000_000),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_csv_is_exact_and_in_end_order() {
        let attempts = Attempts::default();
        let at = |nanos| Duration::from_nanos(nanos);
        attempts.push(
            at(10_000_000),
            Response {
                latency: at(500_000_000),
                ok: false,
            },
        );
        attempts.push(
            at(20_000_001),
            Response {
                latency: at(4_250_000),
                ok: true,
            },
        );
        let mut out = Vec::new();
        attempts.write_csv(&mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "at_ms,latency_ms,outcome\n24.250001,4.25,success\n510,500,failure\n"
        );
    }
}
