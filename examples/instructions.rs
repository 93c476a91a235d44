//! Makes N calls through one implementation, for `benches/instructions.sh` to count
//! under callgrind: `instructions <closed|open|failing> <name> <calls>`.
//!
//! The calls run in `drive_succeed` / `drive_fail` (never inlined), so callgrind can
//! collect inside them only (`--toggle-collect=*drive_*`) and `objdump` can find
//! them. One warm-up call runs first, outside them, so per-thread set-up (cutout's
//! stripe slot, a clock's first read) is not counted.
//! `instructions list <scenario>` prints the implementations. An optional fourth
//! argument runs that many threads on the one breaker, each making `calls` calls
//! (callgrind runs them one at a time, so this counts what each call executes when
//! threads share a breaker, not how they contend).
//!
//! Scenario `ramp`: successful calls to a breaker in the middle of a ramp-up
//! (`Builder::ramp_up`), its share frozen (a `ManualClock`) at 10%, 50% or 90%
//! (`cutout_ramp_10` ...): each call is an admission decision, then either a
//! rejection or an admitted call and its recorded success.

#[allow(dead_code)]
#[path = "../benches/common/mod.rs"]
mod common;

use common::{Run, Subject, fail, succeed};
use cutout::{CircuitBreaker, ManualClock, State};
use std::hint::black_box;
use std::sync::Barrier;
use std::time::Duration;

/// A breaker recovering on a `ManualClock` (scenario `ramp`).
struct Ramp(CircuitBreaker<ManualClock>);

impl Subject for Ramp {
    #[inline]
    fn call(&self, f: impl FnOnce() -> Result<u64, u64>) -> bool {
        self.0.call(f).is_ok()
    }
}

/// The `ramp` scenario's implementations: the share each admits.
const RAMP_SHARES: [(&str, f64); 3] = [
    ("cutout_ramp_10", 0.1),
    ("cutout_ramp_50", 0.5),
    ("cutout_ramp_90", 0.9),
];

/// A consecutive-failure breaker (as `cutout_consecutive`) with a one-hour ramp,
/// tripped, probed and held `share` of the way up its ramp.
fn ramp(share: f64) -> Ramp {
    const RAMP: Duration = Duration::from_secs(3600);
    let clock = ManualClock::new();
    let b = CircuitBreaker::builder()
        .consecutive_failures(5)
        .ramp_up(RAMP)
        .clock(clock.clone())
        .build()
        .unwrap();
    for _ in 0..5 {
        let _ = b.call(|| Err::<(), _>(()));
    }
    clock.advance(Duration::from_secs(1));
    let _ = b.call(|| Ok::<_, ()>(()));
    assert_eq!(b.state(), State::Recovering);
    clock.advance(RAMP.mul_f64((share - 0.1) / 0.9));
    Ramp(b)
}

#[inline(never)]
fn drive_succeed<S: Subject>(s: &S, calls: u64) -> u64 {
    let mut ran = 0;
    for _ in 0..calls {
        ran += u64::from(succeed!(black_box(s)));
    }
    ran
}

#[inline(never)]
fn drive_fail<S: Subject>(s: &S, calls: u64) -> u64 {
    let mut ran = 0;
    for _ in 0..calls {
        ran += u64::from(fail!(black_box(s)));
    }
    ran
}

struct Drive {
    fail: bool,
    calls: u64,
    threads: usize,
    ran: u64,
}

impl Drive {
    /// One thread's calls. Every thread makes its warm-up call (which takes its
    /// stripe slot) before any starts measuring, so all hold distinct slots.
    fn one<S: Subject>(&self, s: &S, started: &Barrier) -> u64 {
        // Warm-up, not counted.
        let _ = if self.fail { fail!(s) } else { succeed!(s) };
        started.wait();
        if self.fail {
            drive_fail(s, self.calls)
        } else {
            drive_succeed(s, self.calls)
        }
    }
}

impl Run for Drive {
    fn run<S: Subject>(&mut self, s: &S) {
        if self.threads <= 1 {
            self.ran = self.one(s, &Barrier::new(1));
            return;
        }
        let this = &*self;
        let started = &Barrier::new(self.threads);
        let ran: u64 = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..this.threads)
                .map(|_| scope.spawn(move || this.one(s, started)))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        self.ran = ran / self.threads as u64;
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: instructions <closed|open|failing|ramp> <name> <calls> | instructions list <scenario>";
    match args.as_slice() {
        [list, ramp] if list == "list" && ramp == "ramp" => {
            for (name, _) in RAMP_SHARES {
                println!("{name}");
            }
        }
        [scenario, name, calls] if scenario == "ramp" => {
            let calls: u64 = calls.parse().expect(usage);
            let (_, share) = RAMP_SHARES
                .iter()
                .find(|(n, _)| n == name)
                .expect("no such ramp implementation");
            let mut drive = Drive {
                fail: false,
                calls,
                threads: 1,
                ran: 0,
            };
            drive.run(&ramp(*share));
            let want = share * calls as f64;
            assert!(
                (drive.ran as f64 - want).abs() <= 2.0,
                "{name}: {} ran",
                drive.ran
            );
            println!("ramp {name}: {calls} calls, {} ran", drive.ran);
        }
        [list, scenario] if list == "list" => {
            for name in common::names(scenario) {
                println!("{name}");
            }
        }
        [scenario, name, calls, rest @ ..] if rest.len() <= 1 => {
            let calls: u64 = calls.parse().expect(usage);
            let threads: usize = rest.first().map_or(1, |t| t.parse().expect(usage));
            let mut drive = Drive {
                fail: scenario == "failing",
                calls,
                threads,
                ran: 0,
            };
            let found = common::run_one(scenario, name, &mut drive);
            assert!(found, "no implementation {name} in scenario {scenario}");
            let expected = if scenario == "open" { 0 } else { calls };
            assert_eq!(drive.ran, expected, "{name}: calls that ran");
            println!(
                "{scenario} {name}: {threads} thread(s) x {calls} calls, {} ran each",
                drive.ran
            );
        }
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    }
}
