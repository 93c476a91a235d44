//! One [`tracing`] event per transition (feature `tracing`).
//!
//! The event is emitted by the thread whose compare-and-swap made the transition,
//! after it, with nothing held, just before the
//! [`on_transition`](crate::Builder::on_transition) callback. Its target is
//! `cutout`; its level is `WARN` when the breaker opens (to `open` or
//! `forced_open`) and `INFO` otherwise. Nothing is emitted on a call that changes
//! no state.
//!
//! | field | type | meaning |
//! |-------|------|---------|
//! | `message` | str | `circuit breaker transition` |
//! | `breaker` | str | the breaker's [`name`](crate::Builder::name) |
//! | `from`, `to` | str | the states ([`State::as_str`](crate::State::as_str)) |
//! | `generation` | u64 | the generation the transition started (32 bits, wrapping) |
//! | `reason` | str | [`Reason::as_str`](crate::Reason::as_str) |
//! | `at_ms` | u64 | when, in milliseconds since the breaker was built |
//! | `open_until_ms` | u64 | for a transition to Open only: its deadline (when a call may half-open it), on `at_ms`'s scale ([`Transition::open_until`](crate::Transition::open_until)); absent otherwise |
//! | `backoff_level` | u64 | the backoff level after the transition |
//! | `window_calls`, `window_failures`, `window_slow` | u64 | the window's counts that tripped it (a policy's trip, out of Closed or Recovering; zero otherwise) |
//! | `failure_rate`, `slow_call_rate` | f64 | the same counts as rates |
//! | `shadow` | bool | a shadow breaker's transition ([`Transition::shadow`](crate::Transition::shadow)): nothing was rejected |
//! | `candidate` | str | a what-if candidate's transition: the candidate's name ([`Builder::candidate`](crate::Builder::candidate)); absent otherwise |
//! | `consecutive_failures` | u64 | the failure streak when it tripped (a policy's trip, out of Closed or Recovering, whichever policy tripped it; zero without the consecutive-failures policy, and otherwise) |
//!
//! # Examples
//! With `tracing-subscriber`, `RUST_LOG=cutout=info` shows every transition and
//! `RUST_LOG=cutout=warn` only the openings.

use crate::State;
use crate::event::Transition;

/// The target of every event.
pub const TARGET: &str = "cutout";

/// Emits one event for `t`; called by the thread that made it, after its CAS.
// One signature for every observer (see `crate::OBSERVERS`).
#[allow(clippy::ptr_arg)]
pub(crate) fn transition(
    name: &std::borrow::Cow<'static, str>,
    candidate: Option<&std::borrow::Cow<'static, str>>,
    t: &Transition,
) {
    let name: &str = name;
    let candidate: Option<&str> = candidate.map(|c| &**c);
    macro_rules! emit {
        ($level:expr) => {
            ::tracing::event!(
                target: "cutout",
                $level,
                breaker = name,
                from = t.from.as_str(),
                to = t.to.as_str(),
                generation = t.generation,
                reason = t.reason.as_str(),
                at_ms = millis(t.at),
                open_until_ms = t.open_until.map(millis),
                backoff_level = t.level,
                window_calls = t.window.calls,
                window_failures = t.window.failures,
                window_slow = t.window.slow,
                failure_rate = t.window.failure_rate(),
                slow_call_rate = t.window.slow_call_rate(),
                consecutive_failures = t.consecutive_failures,
                shadow = t.shadow,
                candidate = candidate,
                "circuit breaker transition"
            )
        };
    }
    if matches!(t.to, State::Open | State::ForcedOpen) {
        emit!(::tracing::Level::WARN);
    } else {
        emit!(::tracing::Level::INFO);
    }
}

/// A time since the breaker was built, in whole milliseconds.
fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
