//! An SVG timeline of one replay, in the storm chart's style
//! (`examples/storm/plot.rs`): the breaker's state as a strip, then what reached
//! the dependency and what was turned away, then how the trace's calls went.
//! Hand-written SVG, no dependencies.

use crate::Summary;
use cutout::replay::{Report, Trace};
use cutout::{Outcome, State};
use std::fmt::Write as _;

const WIDTH: f64 = 960.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 24.0;
const PLOT_W: f64 = WIDTH - LEFT - RIGHT;
/// The replay (the storm chart's "with cutout" blue) and the trace itself (its
/// "without a breaker" orange: what the dependency did with every call).
const WITH: &str = "#1a73e8";
const TRACE: &str = "#e8710a";
const FONT: &str = "system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif";
/// Time buckets across the chart.
const BUCKETS: usize = 80;
/// Keys drawn as state strips, at most.
const MAX_STRIPS: usize = 8;

/// The chart of `report`, a replay of `trace` (called `label`) under the setting
/// `name`.
///
/// # Examples
/// ```
/// use cutout::replay::{Trace, replay};
///
/// let trace = Trace::from_csv("at_ms,latency_ms,outcome\n10,5,failure\n900,5,success\n".as_bytes())?;
/// let report = replay(cutout::CircuitBreaker::builder().consecutive_failures(1), &trace)?;
/// let summary = cutout_tune::Summary::of(&trace, &report);
/// let svg = cutout_tune::svg::timeline("trace.csv", "eager", &trace, &report, &summary);
/// assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn timeline(
    label: &str,
    name: &str,
    trace: &Trace,
    report: &Report,
    summary: &Summary,
) -> String {
    let total = trace.end().as_secs_f64().max(1e-3);
    let x = |t: f64| LEFT + PLOT_W * (t / total).clamp(0.0, 1.0);
    let bucket = total / BUCKETS as f64;
    let index = |t: f64| ((t / bucket) as usize).min(BUCKETS - 1);

    // Per bucket: admitted, rejected (at admission); failed and finished calls of
    // the trace, and failed admitted ones (at their end).
    let mut admitted = vec![0u64; BUCKETS];
    let mut rejected = vec![0u64; BUCKETS];
    let mut ended = vec![0u64; BUCKETS];
    let mut failed = vec![0u64; BUCKETS];
    let mut ended_admitted = vec![0u64; BUCKETS];
    let mut failed_admitted = vec![0u64; BUCKETS];
    for (i, call) in trace.calls().iter().enumerate() {
        let was = report.was_admitted(i) == Some(true);
        let a = index(call.admitted().as_secs_f64());
        if was {
            admitted[a] += 1;
        } else {
            rejected[a] += 1;
        }
        if call.outcome == Outcome::Ignored {
            continue;
        }
        let e = index(call.at.as_secs_f64());
        let bad = u64::from(call.outcome == Outcome::Failure);
        ended[e] += 1;
        failed[e] += bad;
        if was {
            ended_admitted[e] += 1;
            failed_admitted[e] += bad;
        }
    }

    let mut keys: Vec<Option<&str>> = trace.calls().iter().map(|c| c.key.as_deref()).collect();
    keys.sort_unstable();
    keys.dedup();
    let undrawn = keys.len().saturating_sub(MAX_STRIPS);
    keys.truncate(MAX_STRIPS);
    let strip_top = 84.0;
    let strip_h = 22.0;
    let strips_bottom = strip_top + (strip_h + 4.0) * keys.len().max(1) as f64;
    // The line naming the keys left out, under the strips, moves the legend down.
    let legend_y = strips_bottom + if undrawn > 0 { 30.0 } else { 14.0 };
    let calls_top = legend_y + 40.0;
    let panel_h = 120.0;
    let rates_top = calls_top + panel_h + 50.0;
    let height = rates_top + panel_h + 44.0;

    let mut s = String::new();
    let _ = writeln!(
        s,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="{FONT}" font-size="12">"##
    );
    let _ = writeln!(s, r##"<rect width="100%" height="100%" fill="white"/>"##);
    let _ = writeln!(
        s,
        r##"<text x="{LEFT}" y="24" font-size="17" font-weight="600">cutout-tune: {} replayed under {}</text>"##,
        esc(label),
        esc(name)
    );
    let first = summary.first_opened.map_or("never opened".to_owned(), |t| {
        format!("first opened at {:.2} s", t.as_secs_f64())
    });
    let _ = writeln!(
        s,
        r##"<text x="{LEFT}" y="44" fill="#555">{} calls: {} admitted, {} rejected ({} failures spared, {} successes turned away); {first}</text>"##,
        summary.calls,
        summary.admitted,
        summary.rejected,
        summary.failures_spared,
        summary.successes_turned_away
    );

    // The state strips, exactly as the replay's transitions say; the keys past
    // the first few are named as left out, not dropped silently.
    if undrawn > 0 {
        let _ = writeln!(
            s,
            r##"<text x="{LEFT}" y="{:.1}" fill="#666">{undrawn} more key{} not drawn (the table counts every key)</text>"##,
            strips_bottom + 12.0,
            if undrawn == 1 { "" } else { "s" }
        );
    }
    for (k, key) in keys.iter().enumerate() {
        let top = strip_top + (strip_h + 4.0) * k as f64;
        let mut t0 = 0.0;
        let mut current = State::Closed;
        let mut segments = Vec::new();
        for t in report
            .transitions
            .iter()
            .filter(|t| t.key.as_deref() == *key)
        {
            let at = t.at.as_secs_f64().min(total);
            segments.push((t0, at, current));
            (t0, current) = (at, t.to);
        }
        segments.push((t0, total, current));
        for (a, b, st) in segments.into_iter().filter(|(a, b, _)| b > a) {
            let _ = writeln!(
                s,
                r##"<rect x="{:.2}" y="{top:.1}" width="{:.2}" height="{strip_h}" fill="{}"/>"##,
                x(a),
                (x(b) - x(a)).max(0.6),
                state_color(st)
            );
        }
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="end" fill="#333">{}</text>"##,
            LEFT - 8.0,
            top + strip_h / 2.0 + 4.0,
            esc(key.unwrap_or("breaker"))
        );
    }
    let mut lx = LEFT;
    let ly = legend_y;
    let ramped = report.transitions.iter().any(|t| t.to == State::Recovering);
    let states = [
        (State::Closed, "closed"),
        (State::Open, "open: rejects at once"),
        (State::HalfOpen, "half-open: probes"),
        (State::Recovering, "ramp-up"),
    ];
    for (st, text) in states
        .into_iter()
        .filter(|(st, _)| ramped || *st != State::Recovering)
    {
        let _ = writeln!(
            s,
            r##"<rect x="{lx:.1}" y="{:.1}" width="12" height="10" fill="{}"/><text x="{:.1}" y="{ly:.1}" fill="#333">{text}</text>"##,
            ly - 9.0,
            state_color(st),
            lx + 16.0
        );
        lx += 36.0 + 6.6 * text.len() as f64;
    }

    let per_s = |v: &[u64]| {
        v.iter()
            .map(|&n| Some(n as f64 / bucket))
            .collect::<Vec<_>>()
    };
    let top_rate = admitted
        .iter()
        .zip(&rejected)
        .map(|(a, r)| (a + r) as f64 / bucket)
        .fold(1.0, f64::max);
    let (ceiling, step) = nice_ceiling(top_rate);
    panel(
        &mut s,
        calls_top,
        panel_h,
        "calls per second",
        "by admission time",
        ceiling,
        step,
        &x,
        total,
    );
    line(
        &mut s,
        &per_s(&rejected),
        calls_top,
        panel_h,
        ceiling,
        WITH,
        Some("2 3"),
        &x,
        bucket,
    );
    line(
        &mut s,
        &per_s(&admitted),
        calls_top,
        panel_h,
        ceiling,
        WITH,
        None,
        &x,
        bucket,
    );
    legend(
        &mut s,
        calls_top,
        &[
            (WITH, None, "admitted: reached the dependency"),
            (WITH, Some("2 3"), "rejected at once"),
        ],
    );

    let rate = |bad: &[u64], all: &[u64]| {
        bad.iter()
            .zip(all)
            .map(|(&b, &n)| (n >= 5).then(|| 100.0 * b as f64 / n as f64))
            .collect::<Vec<_>>()
    };
    panel(
        &mut s,
        rates_top,
        panel_h,
        "calls that failed (%)",
        "by end time; buckets with fewer than 5 calls left out",
        100.0,
        25.0,
        &x,
        total,
    );
    line(
        &mut s,
        &rate(&failed, &ended),
        rates_top,
        panel_h,
        100.0,
        TRACE,
        None,
        &x,
        bucket,
    );
    line(
        &mut s,
        &rate(&failed_admitted, &ended_admitted),
        rates_top,
        panel_h,
        100.0,
        WITH,
        None,
        &x,
        bucket,
    );
    legend(
        &mut s,
        rates_top,
        &[
            (TRACE, None, "every call in the trace"),
            (WITH, None, "the admitted ones"),
        ],
    );
    let _ = writeln!(
        s,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#555">seconds into the trace</text>"##,
        LEFT + PLOT_W / 2.0,
        height - 8.0
    );
    s.push_str("</svg>\n");
    s
}

/// A panel's frame, title, y grid (`0..=ceiling` by `step`) and time axis.
#[allow(clippy::too_many_arguments)]
fn panel(
    s: &mut String,
    top: f64,
    height: f64,
    title: &str,
    note: &str,
    ceiling: f64,
    step: f64,
    x: &impl Fn(f64) -> f64,
    total: f64,
) {
    let _ = writeln!(
        s,
        r##"<text x="{LEFT}" y="{:.1}"><tspan font-weight="600" fill="#222">{}</tspan><tspan dx="8" fill="#666">({})</tspan></text>"##,
        top - 8.0,
        esc(title),
        esc(note)
    );
    let mut v = 0.0;
    while v <= ceiling + 1e-9 {
        let y = top + height - height * v / ceiling;
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}" stroke="#e0e0e0"/><text x="{:.1}" y="{:.1}" text-anchor="end" fill="#666">{v:.0}</text>"##,
            LEFT + PLOT_W,
            LEFT - 6.0,
            y + 4.0
        );
        v += step;
    }
    // About a dozen labels at a round step, however long the trace.
    let axis = nice_ceiling(total / 12.0).0;
    let mut t: f64 = 0.0;
    while t <= total + 1e-9 {
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#666">{}</text>"##,
            x(t),
            top + height + 14.0,
            if axis < 1.0 {
                format!("{t:.1}")
            } else {
                format!("{t:.0}")
            }
        );
        t += axis;
    }
    let _ = writeln!(
        s,
        r##"<rect x="{LEFT}" y="{top:.1}" width="{PLOT_W}" height="{height:.1}" fill="none" stroke="#bbb"/>"##
    );
}

/// A polyline of per-bucket values; `None` breaks it.
#[allow(clippy::too_many_arguments)]
fn line(
    s: &mut String,
    values: &[Option<f64>],
    top: f64,
    height: f64,
    ceiling: f64,
    color: &str,
    dash: Option<&str>,
    x: &impl Fn(f64) -> f64,
    bucket: f64,
) {
    let dash = dash.map_or(String::new(), |d| format!(r#" stroke-dasharray="{d}""#));
    let mut run: Vec<String> = Vec::new();
    let flush = |run: &mut Vec<String>, s: &mut String| {
        if run.len() > 1 {
            let _ = writeln!(
                s,
                r##"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2"{dash}/>"##,
                run.join(" ")
            );
        }
        run.clear();
    };
    for (i, v) in values.iter().enumerate() {
        match v {
            Some(v) => {
                let y = top + height - height * (v / ceiling).clamp(0.0, 1.0);
                run.push(format!("{:.1},{y:.1}", x(bucket * (i as f64 + 0.5))));
            }
            None => flush(&mut run, s),
        }
    }
    flush(&mut run, s);
}

fn legend(s: &mut String, top: f64, entries: &[(&str, Option<&str>, &str)]) {
    let mut lx = LEFT + PLOT_W - 6.6 * entries.iter().map(|e| e.2.len() as f64 + 7.0).sum::<f64>();
    for (color, dash, text) in entries {
        let dash = dash.map_or(String::new(), |d| format!(r#" stroke-dasharray="{d}""#));
        let _ = writeln!(
            s,
            r##"<line x1="{lx:.1}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="{color}" stroke-width="2"{dash}/><text x="{:.1}" y="{:.1}" fill="#333">{}</text>"##,
            lx + 20.0,
            top - 12.0,
            top - 12.0,
            lx + 24.0,
            top - 8.0,
            esc(text)
        );
        lx += 6.6 * (text.len() as f64 + 7.0);
    }
}

/// A round axis top at or above `v`, and its grid step.
fn nice_ceiling(v: f64) -> (f64, f64) {
    let magnitude = 10f64.powf(v.log10().floor());
    for m in [1.0, 2.0, 5.0, 10.0] {
        if v <= m * magnitude {
            return (m * magnitude, m * magnitude / 4.0);
        }
    }
    (10.0 * magnitude, 2.5 * magnitude)
}

fn state_color(st: State) -> &'static str {
    match st {
        State::Closed => "#34a853",
        State::Open | State::ForcedOpen => "#d93025",
        State::HalfOpen => "#fbbc04",
        State::Recovering => "#c8e6c9",
        _ => "#9aa0a6",
    }
}

/// `text` escaped for XML text and attributes; the characters XML 1.0 cannot
/// hold (all below U+0020 but tab, line feed and carriage return, and U+FFFE
/// and U+FFFF) become U+FFFD, so that a key holding one still makes a
/// well-formed file.
fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\t' | '\n' | '\r' => out.push(c),
            // The characters XML 1.0 forbids (Rust strings hold no surrogate).
            c if c < ' ' || c == '\u{fffe}' || c == '\u{ffff}' => {
                out.push(char::REPLACEMENT_CHARACTER)
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_tops_are_round() {
        assert_eq!(nice_ceiling(1280.0), (2000.0, 500.0));
        assert_eq!(nice_ceiling(90.0), (100.0, 25.0));
        assert_eq!(nice_ceiling(1.0), (1.0, 0.25));
    }

    /// A time axis of a dozen labels or so, whatever the trace's length: one of
    /// a month does not write millions of them.
    #[test]
    fn a_long_trace_has_a_short_time_axis() {
        use cutout::replay::{Call, Trace, replay};
        use cutout::{CircuitBreaker, Outcome};
        use std::time::Duration;
        let month = Duration::from_secs(30 * 86_400);
        let trace = Trace::from_calls(vec![
            Call::new(
                Duration::from_millis(10),
                Duration::from_millis(5),
                Outcome::Failure,
            ),
            Call::new(month, Duration::from_millis(5), Outcome::Success),
        ])
        .unwrap();
        let builder = CircuitBreaker::builder().consecutive_failures(1);
        let report = replay(builder, &trace).unwrap();
        let summary = crate::Summary::of(&trace, &report);
        let svg = timeline("t", "c", &trace, &report, &summary);
        let labels = svg.matches(r#"text-anchor="middle""#).count();
        assert!((2..=30).contains(&labels), "{labels} time labels");
    }

    /// Escaped for XML, and control characters XML 1.0 cannot hold replaced (a
    /// key holding one made the file ill-formed).
    #[test]
    fn text_is_escaped() {
        assert_eq!(esc(r#"a<b & "c">"#), "a&lt;b &amp; &quot;c&quot;&gt;");
        assert_eq!(esc("db\u{1}\t\u{1f}é"), "db\u{fffd}\t\u{fffd}é");
        assert_eq!(esc("\u{fffd}\u{fffe}\u{ffff}"), "\u{fffd}".repeat(3));
    }

    /// Keys past the strips drawn are counted on the chart, not left out
    /// silently.
    #[test]
    fn keys_past_the_strips_are_counted() {
        use cutout::replay::{Call, Trace, replay};
        use cutout::{CircuitBreaker, Outcome};
        use std::time::Duration;
        let calls = |keys: usize| {
            let call = |k| {
                Call::new(Duration::from_millis(10), Duration::ZERO, Outcome::Success)
                    .with_key(format!("k{k}"))
            };
            Trace::from_calls((0..keys).map(call).collect()).unwrap()
        };
        let chart = |trace: &Trace| {
            let report = replay(CircuitBreaker::builder(), trace).unwrap();
            timeline(
                "t",
                "c",
                trace,
                &report,
                &crate::Summary::of(trace, &report),
            )
        };
        let many = chart(&calls(MAX_STRIPS + 3));
        assert!(many.contains(">3 more keys not drawn"));
        // The note has a line of its own, above the legend's.
        let y_of = |text: &str| -> f64 {
            let line = many.lines().find(|l| l.contains(text)).unwrap();
            let y = &line[line.rfind("<text").unwrap()..];
            let y = &y[y.find("y=\"").unwrap() + 3..];
            y[..y.find('"').unwrap()].parse().unwrap()
        };
        assert!(y_of(">closed</text>") - y_of("more keys not drawn") >= 14.0);
        assert!(chart(&calls(MAX_STRIPS + 1)).contains(">1 more key not drawn"));
        assert!(!chart(&calls(MAX_STRIPS)).contains("not drawn"));
    }
}
