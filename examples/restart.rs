//! A restart that does not forget a dead dependency.
//!
//! ```text
//! cargo run --example restart --features serde
//! ```
//!
//! Run without arguments, it runs itself twice, as two processes:
//! 1. `restart trip FILE`: calls a dead dependency until the breaker opens, saves
//!    the breaker's state to `FILE` as JSON, and exits.
//! 2. `restart recover FILE`: a fresh process restores the breaker from `FILE`. It
//!    starts Open, rejects every call until the saved deadline, and then admits a
//!    probe, which finds the dependency back and closes the breaker.
//!
//! Without the saved state the second process would start Closed and send its
//! first calls to a dependency its predecessor knew was down. Every wait is
//! bounded: the second process gives up (and fails) a few seconds after the
//! deadline.

use cutout::{Builder, CircuitBreaker, Error, SavedState, State};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

/// The cooldown the first process's breaker opens for.
const OPEN_FOR: Duration = Duration::from_millis(1500);
/// How late after the deadline the second process may still see rejections:
/// the breaker's clock and the wall clock each resolve about 1 ms.
const CLOCK_SLACK: Duration = Duration::from_millis(5);
/// How long after the deadline the second process waits for its probe at most.
const GIVE_UP_AFTER: Duration = Duration::from_secs(5);

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// Both processes configure the breaker the same way.
fn builder() -> Builder {
    CircuitBreaker::builder()
        .name("inventory-db")
        .consecutive_failures(3)
        .open_duration(OPEN_FOR)
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    match (args.get(1).map(String::as_str), args.get(2)) {
        (Some("trip"), Some(file)) => trip(Path::new(file)),
        (Some("recover"), Some(file)) => recover(Path::new(file)),
        (None, _) => both(),
        _ => Err("usage: restart [trip FILE | recover FILE]".into()),
    }
}

/// Runs the two processes one after the other.
fn both() -> Result<()> {
    let file: PathBuf =
        std::env::temp_dir().join(format!("cutout-restart-{}.json", std::process::id()));
    let me = std::env::current_exe()?;
    let result = (|| -> Result<()> {
        for step in ["trip", "recover"] {
            let status = Command::new(&me).arg(step).arg(&file).status()?;
            if !status.success() {
                return Err(format!("the `{step}` process failed: {status}").into());
            }
        }
        Ok(())
    })();
    let _ = std::fs::remove_file(&file);
    result?;
    println!("ok: the restarted process kept the breaker open until the saved deadline");
    Ok(())
}

/// Process 1: trips on a dead dependency, saves, exits.
fn trip(file: &Path) -> Result<()> {
    let breaker = builder().build()?;
    let mut calls = 0;
    while breaker.state() == State::Closed && calls < 10 {
        calls += 1;
        let _ = breaker.call(|| Err::<(), _>("connection refused"));
    }
    if breaker.state() != State::Open {
        return Err(format!("expected Open after {calls} failures").into());
    }
    let saved = breaker.save();
    let json = serde_json::to_string_pretty(&saved)?;
    // Write, then rename: a reader never sees half a file.
    let partial = file.with_extension("partial");
    std::fs::write(&partial, &json)?;
    std::fs::rename(&partial, file)?;
    println!(
        "process 1: Open after {calls} failures; saved to {}:\n{json}",
        file.display()
    );
    Ok(())
}

/// Process 2: restores, stays Open until the saved deadline, then probes.
fn recover(file: &Path) -> Result<()> {
    let saved: SavedState = serde_json::from_str(&std::fs::read_to_string(file)?)?;
    let open_until = saved.open_until.ok_or("the saved state has no deadline")?;
    let ahead_at_start = open_until > SystemTime::now();
    let breaker = builder().restore(saved).build()?;
    if breaker.state() != State::Open {
        return Err(format!("restored as {}, expected open", breaker.state()).into());
    }
    println!("process 2: restored Open; the dependency is back, but the breaker does not know it");

    let give_up = Instant::now() + OPEN_FOR + GIVE_UP_AFTER;
    let mut rejected = 0u32;
    let probed_at = loop {
        if Instant::now() > give_up {
            return Err("no probe was admitted within the bound".into());
        }
        match breaker.call(|| Ok::<_, &str>("200 OK")) {
            Ok(_) => break SystemTime::now(),
            Err(Error::Rejected(r)) => {
                rejected += 1;
                let wait = r.retry_after().unwrap_or(Duration::ZERO);
                std::thread::sleep(wait.clamp(Duration::from_millis(1), Duration::from_millis(50)));
            }
            Err(Error::Inner(e)) => return Err(e.into()),
        }
    };
    if probed_at + CLOCK_SLACK < open_until {
        return Err(format!(
            "probed {:?} before the saved deadline",
            open_until.duration_since(probed_at).unwrap_or_default()
        )
        .into());
    }
    if ahead_at_start && rejected == 0 {
        return Err("the restored breaker admitted a call before its deadline".into());
    }
    if breaker.state() != State::Closed {
        return Err(format!("after a good probe: {}, expected closed", breaker.state()).into());
    }
    println!(
        "process 2: {rejected} calls rejected until the saved deadline; the probe at {:?} after it closed the breaker",
        probed_at.duration_since(open_until).unwrap_or_default()
    );
    Ok(())
}
