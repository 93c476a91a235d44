//! Everything the demo prints: the intro, the live timeline, the summary, the
//! transition log and the overhead. Plain text; colour and the progress bar only on
//! a terminal.

use crate::overhead::Overhead;
use crate::sim::{
    CALL_TIMEOUT, CALLER_DEADLINE, LOCAL_WORK, Phase, REQUEST_INTERVAL, SLOW_CALL, Scenario,
};
use crate::stats::{Tick, Totals};
use crate::worker::Logged;
use cutout::State;
use std::fmt::Write as _;
use std::time::Duration;

/// How to print: with ANSI colour or without.
#[derive(Clone, Copy, Debug)]
pub struct Style {
    /// Whether to use colour (a terminal, and `NO_COLOR` unset).
    pub color: bool,
}

impl Style {
    fn paint(self, text: &str, code: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }

    fn bold(self, text: &str) -> String {
        self.paint(text, "1")
    }

    fn dim(self, text: &str) -> String {
        self.paint(text, "2")
    }

    /// A state, padded to `width` before painting so that columns line up.
    fn state(self, state: Option<State>, width: usize) -> String {
        let (name, code) = match state {
            None => ("-", "2"),
            Some(State::Closed) => ("closed", "32"),
            Some(State::Open) => ("OPEN", "1;31"),
            Some(State::HalfOpen) => ("half-open", "33"),
            Some(State::ForcedOpen) => ("FORCED", "1;31"),
            Some(State::Disabled) => ("disabled", "2"),
            Some(State::Recovering) => ("ramp-up", "36"),
            Some(_) => ("other", "2"), // `State` is non-exhaustive
        };
        self.paint(&format!("{name:<width$}"), code)
    }
}

/// A latency for a narrow column: `85µs`, `4.2ms`, `250ms`, `1.25s`.
pub fn latency(d: Option<Duration>) -> String {
    let Some(d) = d else {
        return "-".into();
    };
    let us = d.as_secs_f64() * 1e6;
    if us < 1.0 {
        "<1µs".into()
    } else if us < 1000.0 {
        format!("{us:.0}µs")
    } else if us < 10_000.0 {
        format!("{:.1}ms", us / 1000.0)
    } else if us < 1e6 {
        format!("{:.0}ms", us / 1000.0)
    } else {
        format!("{:.2}s", us / 1e6)
    }
}

fn percent(rate: Option<f64>) -> String {
    rate.map_or_else(|| "-".into(), |r| format!("{:.0}%", r * 100.0))
}

/// `12345` as `12,345`.
pub fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn per_second(scenario: &Scenario, n: u64) -> String {
    format!("{:.0}", n as f64 / scenario.tick.as_secs_f64())
}

fn phase_label(scenario: &Scenario, i: usize) -> String {
    format!(
        "{}/{} {}",
        i + 1,
        scenario.phases.len(),
        scenario.phases[i].name
    )
}

/// What is about to happen.
pub fn intro(scenario: &Scenario, seed: u64, style: Style) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}",
        style.bold(
            "cutout storm: a dependency gets sick; one breaker in front of it, one run without"
        )
    );
    let _ = writeln!(
        s,
        "{} worker threads serve requests through one shared cutout breaker in front of a simulated\n\
         dependency, while {} more serve the same requests (seed {seed}) with no breaker. Side by side.\n\
         Each worker is handed a request every {:?}. Half the requests call the dependency (timeout {:?});\n\
         the other half need only {:?} of local work. A request waits while its worker is busy; its caller\n\
         gives up after {:?}.",
        scenario.threads,
        scenario.threads,
        REQUEST_INTERVAL,
        CALL_TIMEOUT,
        LOCAL_WORK,
        CALLER_DEADLINE,
    );
    let _ = writeln!(s, "Breaker: {}", scenario.describe_breaker());
    let script: Vec<String> = scenario
        .phases
        .iter()
        .map(|p| format!("{} {:.1}s", p.name, (p.end - p.start).as_secs_f64()))
        .collect();
    let _ = writeln!(
        s,
        "Script ({:.1} s): {}",
        scenario.duration().as_secs_f64(),
        script.join(" -> ")
    );
    s
}

/// The timeline's column headers.
pub fn header(style: Style) -> String {
    let top = format!("{:18}│ {:<58}│ {}", "", "with cutout", "without a breaker");
    let cols = format!(
        "{:>5} {:<12}│ {:<9} {:>3} {:>5} {:>6} {:>6} {:>4} {:>4} {:>6} {:>6} │ {:>5} {:>7} {:>4} {:>6} {:>6}",
        "t",
        "phase",
        "state",
        "chg",
        "ok/s",
        "adm/s",
        "rej/s",
        "fail",
        "slow",
        "p50",
        "p99",
        "ok/s",
        "calls/s",
        "fail",
        "p50",
        "p99"
    );
    format!("{}\n{}", style.dim(&top), style.bold(&cols))
}

/// What the columns mean, printed once under the timeline.
pub fn legend() -> String {
    format!(
        "ok/s: requests answered OK per second; adm/s, calls/s: calls that reached the dependency; rej/s: refused\n\
         by the breaker; fail, slow: of the calls that reached it, failed / slower than {SLOW_CALL:?}; p50, p99: caller\n\
         latency, arrival to answer; chg: breaker transitions in the tick. The timeline is a live view; the summary\n\
         below counts every request."
    )
}

/// The line that opens phase `i`.
pub fn phase_header(scenario: &Scenario, i: usize, style: Style) -> String {
    let p: &Phase = &scenario.phases[i];
    let text = format!(
        "── phase {}/{} at {:.1} s: {} ({}) ",
        i + 1,
        scenario.phases.len(),
        p.start.as_secs_f64(),
        p.name,
        p.behaviour.describe()
    );
    let pad = 108usize.saturating_sub(text.chars().count());
    style.bold(&format!("{text}{}", "─".repeat(pad)))
}

/// One tick of the timeline: the run with the breaker, then the run without.
pub fn tick_line(
    scenario: &Scenario,
    i: usize,
    with: &Tick,
    without: &Tick,
    transitions: usize,
    style: Style,
) -> String {
    let t = scenario.tick_start(i + 1);
    let phase = scenario.phase_index(scenario.tick_start(i));
    let chg = if transitions == 0 {
        String::new()
    } else {
        transitions.to_string()
    };
    format!(
        "{:>5.*} {:<12}│ {} {:>3} {:>5} {:>6} {:>6} {:>4} {:>4} {:>6} {:>6} │ {:>5} {:>7} {:>4} {:>6} {:>6}",
        if scenario.tick < Duration::from_millis(500) {
            2
        } else {
            1
        },
        t.as_secs_f64(),
        phase_label(scenario, phase),
        style.state(with.state, 9),
        chg,
        per_second(scenario, with.served),
        per_second(scenario, with.calls),
        per_second(scenario, with.rejected),
        percent(with.failure_rate()),
        percent(with.slow_rate()),
        latency(with.latency(50.0)),
        latency(with.latency(99.0)),
        per_second(scenario, without.served),
        per_second(scenario, without.calls),
        percent(without.failure_rate()),
        latency(without.latency(50.0)),
        latency(without.latency(99.0)),
    )
}

/// The terminal's progress bar: where the run is and which phase.
pub fn progress(scenario: &Scenario, now: Duration) -> String {
    const WIDTH: usize = 40;
    let total = scenario.duration().as_secs_f64();
    let mut bar = String::new();
    for c in 0..WIDTH {
        let t = Duration::from_secs_f64(total * (c as f64 + 0.5) / WIDTH as f64);
        bar.push(if t <= now { '█' } else { '░' });
    }
    let i = scenario.phase_index(now);
    format!(
        "  [{bar}] {:>5.1} / {:.1} s   phase {}",
        now.as_secs_f64().min(total),
        total,
        phase_label(scenario, i)
    )
}

/// Both runs side by side.
pub fn summary(
    scenario: &Scenario,
    seed: u64,
    with: &Totals,
    without: &Totals,
    style: Style,
) -> String {
    let worker_time = scenario.duration().as_secs_f64() * scenario.threads as f64;
    let share = |d: Duration| {
        format!(
            "{:.1} s ({:.0}%)",
            d.as_secs_f64(),
            100.0 * d.as_secs_f64() / worker_time
        )
    };
    let both = |f: &dyn Fn(&Totals) -> String| (f(with), f(without));
    let rows: Vec<(String, (String, String))> = vec![
        ("requests".into(), both(&|t| count(t.requests()))),
        (
            "  ... that need the dependency (the rest are local)".into(),
            both(&|t| count(t.needed)),
        ),
        ("served (answered OK)".into(), both(&|t| count(t.served()))),
        (
            "  ... needing the dependency (it answered OK)".into(),
            both(&|t| count(t.ok)),
        ),
        (
            "  ... not needing it (served locally)".into(),
            both(&|t| count(t.local)),
        ),
        (
            "failed fast (rejected by the breaker)".into(),
            (count(with.rejected), "-".into()),
        ),
        (
            format!("failed after calling (error, {CALL_TIMEOUT:?} timeout)"),
            both(&|t| count(t.failed)),
        ),
        (
            format!("callers gave up waiting for a worker (> {CALLER_DEADLINE:?})"),
            both(&|t| count(t.gave_up)),
        ),
        (
            "  ... though their request did not need the dependency".into(),
            both(&|t| count(t.gave_up_local)),
        ),
        (
            "still queued when the run ended".into(),
            both(&|t| count(t.unanswered)),
        ),
        (
            "calls that reached the dependency".into(),
            both(&|t| count(t.calls)),
        ),
        (
            "  ... while it was sick (spike + outage)".into(),
            both(&|t| count(t.sick_calls)),
        ),
        (
            "worker time spent waiting on it".into(),
            both(&|t| share(t.waiting)),
        ),
        (
            "  ... while it was sick".into(),
            both(&|t| share(t.sick_waiting)),
        ),
        (
            "caller latency p50".into(),
            both(&|t| latency(t.latency(50.0))),
        ),
        (
            "caller latency p99".into(),
            both(&|t| latency(t.latency(99.0))),
        ),
        (
            "caller latency max".into(),
            both(&|t| latency(t.latency(100.0))),
        ),
    ];
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}",
        style.bold(&format!(
            "Summary: {:.1} s, {} workers per run, seed {seed}",
            scenario.duration().as_secs_f64(),
            scenario.threads
        ))
    );
    let _ = writeln!(
        s,
        "  {:<56} {:>15} {:>19}",
        "", "with cutout", "without a breaker"
    );
    for (label, (a, b)) in rows {
        let _ = writeln!(s, "  {label:<56} {a:>15} {b:>19}");
    }
    s
}

/// The breaker's transitions, from its `on_transition` events.
pub fn transitions(scenario: &Scenario, log: &[Logged], style: Style) -> String {
    const HEAD: usize = 24;
    const TAIL: usize = 8;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}",
        style.bold(&format!(
            "Transitions ({}, from on_transition events):",
            log.len()
        ))
    );
    for (i, l) in log.iter().enumerate() {
        if log.len() > HEAD + TAIL && i == HEAD {
            let _ = writeln!(s, "  ... {} more ...", log.len() - HEAD - TAIL);
        }
        if log.len() > HEAD + TAIL && (HEAD..log.len() - TAIL).contains(&i) {
            continue;
        }
        let t = &l.transition;
        let detail = match t.to {
            State::Open if matches!(t.from, State::Closed | State::Recovering) => format!(
                "window {} calls, {} failed, {} slow; {} failures in a row",
                t.window.calls, t.window.failures, t.window.slow, t.consecutive_failures
            ),
            State::Open => format!(
                "backoff level {}: cooldown up to {:?}",
                t.level,
                scenario.cooldown(t.level)
            ),
            _ => String::new(),
        };
        let _ = writeln!(
            s,
            "  {:>6.2} s  {:<11} {} -> {}  {:<20} {}",
            l.at.as_secs_f64(),
            phase_label(scenario, scenario.phase_index(l.at)),
            style.state(Some(t.from), 9),
            style.state(Some(t.to), 9),
            t.reason.as_str(),
            detail
        );
    }
    s
}

/// What the breaker costs per call.
pub fn overhead(o: &Overhead, when: &str, style: Style) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}",
        style.bold(&format!(
            "Breaker overhead per call: one thread, a tight loop, on a twin of the demo's breaker (same\n  \
             settings), {when}; medians of {} rounds of {} calls:",
            crate::overhead::ROUNDS,
            count(u64::from(crate::overhead::CALLS))
        ))
    );
    let _ = writeln!(
        s,
        "  direct call (no breaker)                           {:>7.1} ns/call",
        o.direct
    );
    let _ = writeln!(
        s,
        "  through the demo's breaker, closed                 {:>7.1} ns/call  (+{:.1} ns; its slow-call policy times every call)",
        o.closed,
        o.closed - o.direct
    );
    let _ = writeln!(
        s,
        "  same, without the slow-call policy                 {:>7.1} ns/call  (+{:.1} ns)",
        o.closed_untimed,
        o.closed_untimed - o.direct
    );
    let _ = writeln!(
        s,
        "  rejected by the open breaker                       {:>7.1} ns/call",
        o.rejected
    );
    s
}

/// The breaker's own view, from `metrics()`.
pub fn metrics(m: &cutout::Metrics) -> String {
    let l = &m.lifetime;
    format!(
        "The breaker's own counters (metrics().lifetime): admitted {}, rejected {}, successes {}, failures {},\n  \
         slow {}, stale {} (outcomes that arrived after the breaker moved on, discarded); now {}, {} transitions.\n",
        count(l.admitted),
        count(l.rejected),
        count(l.successes),
        count(l.failures),
        count(l.slow),
        count(l.stale),
        m.state,
        m.total_transitions()
    )
}

/// The few lines a reader should take away, computed from this run.
pub fn headline(with: &Totals, without: &Totals, o: &Overhead, style: Style) -> String {
    let local_lost = without.gave_up_local + without.unanswered_local;
    let mut s = String::new();
    let _ = writeln!(s, "{}", style.bold("In short:"));
    let _ = writeln!(
        s,
        "  - served: {} requests with cutout, {} without.",
        count(with.served()),
        count(without.served()),
    );
    if local_lost > 0 {
        let _ = writeln!(
            s,
            "    Without a breaker, {} of the {} requests that never needed the dependency were lost too:\n    \
             their callers gave up while the workers hung on the sick dependency.",
            count(local_lost),
            count(without.local + local_lost),
        );
    }
    let _ = writeln!(
        s,
        "  - the sick dependency got {} calls through cutout against {} without it ({}); {} requests\n    \
         were refused at once instead.",
        count(with.sick_calls),
        count(without.sick_calls),
        fewer(with.sick_calls, without.sick_calls),
        count(with.rejected),
    );
    let _ = writeln!(
        s,
        "  - workers spent {:.1} s blocked on the sick dependency instead of {:.1} s; p99 caller latency was\n    \
         {} instead of {}.",
        with.sick_waiting.as_secs_f64(),
        without.sick_waiting.as_secs_f64(),
        latency(with.latency(99.0)),
        latency(without.latency(99.0))
    );
    let _ = writeln!(
        s,
        "  - the breaker itself costs {:.0} ns a call (a healthy call takes ~4 ms: {:.4}% of it), {:.0} ns to reject.",
        o.closed - o.direct,
        100.0 * (o.closed - o.direct) / 4e6,
        o.rejected
    );
    s
}

/// How many times fewer `a` is than `b`, in words.
fn fewer(a: u64, b: u64) -> String {
    if a >= b {
        "no fewer".into()
    } else if a == 0 {
        "none at all".into()
    } else {
        let ratio = b as f64 / a as f64;
        let digits = if ratio < 10.0 { 1 } else { 0 };
        format!("{ratio:.digits$}x fewer")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_well() {
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(1000), "1,000");
        assert_eq!(count(1_234_567), "1,234,567");
        assert_eq!(latency(Some(Duration::from_micros(85))), "85µs");
        assert_eq!(latency(Some(Duration::from_micros(4210))), "4.2ms");
        assert_eq!(latency(Some(Duration::from_millis(250))), "250ms");
        assert_eq!(latency(Some(Duration::from_millis(1250))), "1.25s");
        assert_eq!(latency(Some(Duration::ZERO)), "<1µs");
        assert_eq!(latency(None), "-");
        assert_eq!(fewer(100, 911), "9.1x fewer");
        assert_eq!(fewer(10, 911), "91x fewer");
        assert_eq!(
            (fewer(0, 5), fewer(5, 5)),
            ("none at all".into(), "no fewer".into())
        );
    }

    #[test]
    fn plain_style_has_no_control_codes() {
        let scenario = Scenario::new(4, 1.0);
        let plain = Style { color: false };
        let tick = Tick {
            state: Some(State::Open),
            ..Tick::default()
        };
        let text = [
            intro(&scenario, 1, plain),
            header(plain),
            phase_header(&scenario, 1, plain),
            tick_line(&scenario, 3, &tick, &Tick::default(), 2, plain),
        ]
        .concat();
        assert!(!text.contains('\x1b'), "{text}");
        // The column separators line up in the headers and the ticks.
        let bars = |line: &str| -> Vec<usize> {
            line.chars()
                .enumerate()
                .filter(|&(_, c)| c == '│')
                .map(|(i, _)| i)
                .collect()
        };
        let line = tick_line(&scenario, 3, &tick, &Tick::default(), 2, plain);
        for h in header(plain).lines() {
            assert_eq!(bars(h), bars(&line), "{h}\n{line}");
        }
        assert!(
            Style { color: true }
                .state(Some(State::Open), 9)
                .contains('\x1b')
        );
    }
}
