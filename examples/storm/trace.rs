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

use crate::stats::Attempt;
use std::io::{self, Write};
use std::time::Duration;

/// Writes `attempts` (in the order the calls end) as a CSV trace.
pub fn write_csv(attempts: &[Attempt], mut w: impl Write) -> io::Result<()> {
    writeln!(w, "at_ms,latency_ms,outcome")?;
    for a in attempts {
        let outcome = if a.ok { "success" } else { "failure" };
        writeln!(
            w,
            "{},{},{outcome}",
            millis(a.admitted + a.latency),
            millis(a.latency)
        )?;
    }
    w.flush()
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
    fn the_csv_is_exact_to_the_nanosecond() {
        let at = Duration::from_nanos;
        let attempts = [
            Attempt {
                admitted: at(20_000_001),
                latency: at(4_250_000),
                ok: true,
            },
            Attempt {
                admitted: at(10_000_000),
                latency: at(500_000_000),
                ok: false,
            },
        ];
        let mut out = Vec::new();
        write_csv(&attempts, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "at_ms,latency_ms,outcome\n24.250001,4.25,success\n510,500,failure\n"
        );
    }
}
