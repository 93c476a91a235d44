//! The loopback client's outage, generated: a deterministic stand-in for a trace
//! recorded from an HTTP client calling a server on the same machine, which
//! stalls, then goes away (connections refused), then comes back.
//! `traces/client.csv` is its output (`cargo run -p cutout-tune --example
//! client_outage > tune/traces/client.csv`; a test checks they agree).
//!
//! Eight client tasks each call in a loop, waiting 50 ms between calls (a closed
//! loop: a fast failure brings the next call sooner). The client's timeout is
//! 1 s. The script, in seconds:
//!
//! | from | to | the server |
//! |------|----|------------|
//! | 0 | 8 | healthy: answers in 1 to 4 ms; 2% of calls are a 404 (ignored), 0.5% fail |
//! | 8 | 10 | stalls: answers in 200 ms to 1.2 s; a call past the 1 s timeout fails |
//! | 10 | 18 | gone: every connection is refused within 0.3 ms (a failure) |
//! | 18 | 19 | warming up: answers in 10 to 40 ms, 10% fail |
//! | 19 | 30 | healthy again |

use cutout::Outcome;
use cutout::replay::{Call, Trace};
use std::time::Duration;

/// Client tasks calling at once.
const TASKS: u64 = 8;
/// The pause between one task's calls.
const THINK: Duration = Duration::from_millis(50);
/// The client's timeout.
const TIMEOUT: Duration = Duration::from_secs(1);
/// The trace's length.
const END: Duration = Duration::from_secs(30);

/// The outage trace: the same every time.
///
/// # Examples
/// ```
/// let trace = cutout_tune::client::outage();
/// assert_eq!(trace, cutout_tune::client::outage());
/// assert!(trace.end() <= std::time::Duration::from_secs(31));
/// ```
pub fn outage() -> Trace {
    let mut calls = Vec::new();
    for task in 0..TASKS {
        let mut rng = Rng(0x5eed_0000 + task);
        // Tasks start spread over the first pause.
        let mut start = THINK * (task as u32) / (TASKS as u32);
        while start < END {
            let (latency, outcome) = respond(start, &mut rng);
            let at = start + latency;
            calls.push(Call::new(at, latency, outcome));
            start = at + THINK;
        }
    }
    // Every call is admitted at or after time zero: none is refused.
    Trace::from_calls(calls).unwrap_or_default()
}

/// What the server does with a call starting at `t`.
fn respond(t: Duration, rng: &mut Rng) -> (Duration, Outcome) {
    let s = t.as_secs_f64();
    let millis = |lo: f64, hi: f64, rng: &mut Rng| {
        Duration::from_micros(((lo + (hi - lo) * rng.unit()) * 1000.0) as u64)
    };
    let healthy = |rng: &mut Rng| {
        let latency = millis(1.0, 4.0, rng);
        let roll = rng.unit();
        let outcome = if roll < 0.02 {
            Outcome::Ignored
        } else if roll < 0.025 {
            Outcome::Failure
        } else {
            Outcome::Success
        };
        (latency, outcome)
    };
    if !(8.0..19.0).contains(&s) {
        healthy(rng)
    } else if s < 10.0 {
        let latency = millis(200.0, 1200.0, rng);
        match latency > TIMEOUT {
            true => (TIMEOUT, Outcome::Failure),
            false => (latency, Outcome::Success),
        }
    } else if s < 18.0 {
        (millis(0.05, 0.3, rng), Outcome::Failure)
    } else {
        let latency = millis(10.0, 40.0, rng);
        let outcome = if rng.unit() < 0.1 {
            Outcome::Failure
        } else {
            Outcome::Success
        };
        (latency, outcome)
    }
}

/// splitmix64: small, seeded, the same on every platform.
struct Rng(u64);

impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}
