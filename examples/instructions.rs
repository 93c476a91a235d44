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

#[allow(dead_code)]
#[path = "../benches/common/mod.rs"]
mod common;

use common::{Run, Subject, fail, succeed};
use std::hint::black_box;
use std::sync::Barrier;

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
    let usage =
        "usage: instructions <closed|open|failing> <name> <calls> | instructions list <scenario>";
    match args.as_slice() {
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
