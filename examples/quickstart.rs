//! The smallest tour of cutout: trip, reject with a retry time, probe, close.
//!
//! `cargo run --example quickstart`

use cutout::{CircuitBreaker, Error, ManualClock, State};
use std::time::Duration;

fn main() -> Result<(), cutout::ConfigError> {
    // A ManualClock makes the tour instant; production code leaves `.clock` out.
    let clock = ManualClock::new();
    let breaker = CircuitBreaker::builder()
        .consecutive_failures(3)
        .open_duration(Duration::from_secs(2))
        .on_transition(|t| {
            println!(
                "  transition: {} -> {} ({}), generation {}",
                t.from, t.to, t.reason, t.generation
            )
        })
        .clock(clock.clone())
        .build()?;

    println!("three failures in a row:");
    for _ in 0..3 {
        let _ = breaker.call(|| Err::<(), _>("connection refused"));
    }

    match breaker.call(|| Ok::<_, &str>("never runs")) {
        Err(Error::Rejected(r)) => println!(
            "rejected while {}: retry after {:?}",
            r.state(),
            r.retry_after()
        ),
        other => println!("unexpected: {other:?}"),
    }

    clock.advance(Duration::from_secs(2));
    println!("after the cooldown, one probe:");
    let reply = breaker.call(|| Ok::<_, &str>("pong"));
    println!(
        "probe answered {reply:?}; the breaker is {}",
        breaker.state()
    );
    assert_eq!(breaker.state(), State::Closed);

    let m = breaker.metrics();
    println!(
        "lifetime: {} admitted, {} rejected, {} failures, {} successes",
        m.lifetime.admitted, m.lifetime.rejected, m.lifetime.failures, m.lifetime.successes
    );
    Ok(())
}
