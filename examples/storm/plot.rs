//! The chart `--plot` writes: hand-written SVG, no dependencies. The phases shade the
//! background; a strip shows the breaker's state from its transition events; three
//! panels show rates, load on the dependency, and caller latency, for the run with
//! the breaker (blue) and without (orange).

use crate::sim::{Behaviour, SLOW_CALL, Scenario};
use crate::stats::Tick;
use crate::worker::Logged;
use cutout::State;
use std::fmt::Write as _;
use std::time::Duration;

const WIDTH: f64 = 960.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 24.0;
const PLOT_W: f64 = WIDTH - LEFT - RIGHT;
const WITH: &str = "#1a73e8";
const WITHOUT: &str = "#e8710a";
const FONT: &str = "system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif";

/// A vertical band of the chart.
struct Panel {
    top: f64,
    height: f64,
}

impl Panel {
    fn new(top: f64, height: f64) -> Panel {
        Panel { top, height }
    }

    fn bottom(&self) -> f64 {
        self.top + self.height
    }
}

/// One line of a panel: its points (`None` breaks the line), colour and dash.
struct Series<'a> {
    points: Vec<Option<f64>>,
    color: &'a str,
    dash: Option<&'a str>,
    width: f64,
}

/// The whole chart.
pub fn svg(
    scenario: &Scenario,
    with: &[Tick],
    without: &[Tick],
    log: &[Logged],
    subtitle: &str,
) -> String {
    let total = scenario.duration().as_secs_f64().max(1e-9);
    let x = |t: f64| LEFT + PLOT_W * (t / total).clamp(0.0, 1.0);
    let tick = scenario.tick.as_secs_f64();
    let tick_t = |i: usize| (tick * (i as f64 + 0.5)).min(total);

    let phases = Panel::new(82.0, 20.0);
    let state = Panel::new(108.0, 22.0);
    let served = Panel::new(178.0, 110.0);
    let load = Panel::new(318.0, 110.0);
    let rates = Panel::new(458.0, 110.0);
    let lat = Panel::new(598.0, 130.0);
    let height = lat.bottom() + 44.0;

    let mut s = String::new();
    let _ = writeln!(
        s,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="{FONT}" font-size="12">"##
    );
    let _ = writeln!(s, r##"<rect width="100%" height="100%" fill="white"/>"##);
    let _ = writeln!(
        s,
        r##"<text x="{LEFT}" y="24" font-size="17" font-weight="600">cutout storm: a sick dependency, with one shared breaker in front of it and without</text>"##
    );
    let _ = writeln!(
        s,
        r##"<text x="{LEFT}" y="44" fill="#555">{}</text>"##,
        esc(subtitle)
    );
    // The run colours, once for the whole chart.
    let _ = writeln!(
        s,
        r##"<line x1="{LEFT}" x2="{:.1}" y1="62" y2="62" stroke="{WITH}" stroke-width="3"/><text x="{:.1}" y="66" font-weight="600" fill="{WITH}">with cutout</text>"##,
        LEFT + 24.0,
        LEFT + 30.0
    );
    let _ = writeln!(
        s,
        r##"<line x1="{:.1}" x2="{:.1}" y1="62" y2="62" stroke="{WITHOUT}" stroke-width="3"/><text x="{:.1}" y="66" font-weight="600" fill="{WITHOUT}">without a breaker</text>"##,
        LEFT + 130.0,
        LEFT + 154.0,
        LEFT + 160.0
    );

    // Phase shading behind everything, and the phase labels.
    for p in &scenario.phases {
        let (x0, x1) = (x(p.start.as_secs_f64()), x(p.end.as_secs_f64()));
        let (tint, label_fill) = match p.behaviour {
            Behaviour::Healthy => ("#ffffff", "#e6f4ea"),
            Behaviour::LatencySpike => ("#fff5e6", "#fde3c0"),
            Behaviour::Outage => ("#fdecea", "#f8c9c4"),
            Behaviour::PartialRecovery => ("#fffbe6", "#fbefb4"),
        };
        let _ = writeln!(
            s,
            r##"<rect x="{x0:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{tint}"/>"##,
            phases.top,
            x1 - x0,
            lat.bottom() - phases.top
        );
        let _ = writeln!(
            s,
            r##"<rect x="{x0:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{label_fill}" stroke="white"/>"##,
            phases.top,
            x1 - x0,
            phases.height
        );
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-weight="600" fill="#333">{}</text>"##,
            (x0 + x1) / 2.0,
            phases.top + 14.0,
            esc(phase_title(p.behaviour))
        );
    }
    row_label(&mut s, &phases, "phase");

    // The breaker's state, exactly as its transition events say.
    row_label(&mut s, &state, "breaker");
    let mut t0 = 0.0;
    let mut current = State::Closed;
    let mut segments = Vec::new();
    for l in log {
        let at = l.at.as_secs_f64().min(total);
        segments.push((t0, at, current));
        t0 = at;
        current = l.transition.to;
    }
    segments.push((t0, total, current));
    let ramped = segments
        .iter()
        .any(|&(a, b, st)| b > a && st == State::Recovering);
    for &(a, b, st) in &segments {
        if b <= a {
            continue;
        }
        let _ = writeln!(
            s,
            r##"<rect x="{:.2}" y="{:.1}" width="{:.2}" height="{:.1}" fill="{}"/>"##,
            x(a),
            state.top,
            (x(b) - x(a)).max(0.6),
            state.height,
            state_color(st)
        );
        if st == State::Recovering {
            // The ramp itself: the admitted share, from 10% to where it got.
            let share = |t: f64| 0.1 + 0.9 * (t / scenario.ramp().as_secs_f64()).min(1.0);
            let y = |f: f64| state.bottom() - state.height * f;
            let _ = writeln!(
                s,
                r##"<polygon points="{:.2},{:.1} {:.2},{:.1} {:.2},{:.1} {:.2},{:.1}" fill="{}"/>"##,
                x(a),
                state.bottom(),
                x(a),
                y(share(0.0)),
                x(b),
                y(share(b - a)),
                x(b),
                state.bottom(),
                state_color(State::Closed)
            );
        }
    }
    let mut lx = LEFT;
    let ly = state.bottom() + 16.0;
    let mut states = vec![
        (State::Closed, "closed"),
        (State::Open, "open: rejects at once"),
        (State::HalfOpen, "half-open: 3 probes"),
    ];
    if ramped {
        states.push((State::Recovering, "ramp-up: admits 10% rising to 100%"));
    }
    for (st, name) in states {
        let _ = writeln!(
            s,
            r##"<rect x="{lx:.1}" y="{:.1}" width="12" height="10" fill="{}"/><text x="{:.1}" y="{ly:.1}" fill="#333">{name}</text>"##,
            ly - 9.0,
            state_color(st),
            lx + 16.0
        );
        lx += 36.0 + 6.6 * name.len() as f64;
    }

    let per_s = |ticks: &[Tick], f: fn(&Tick) -> u64| -> Vec<Option<f64>> {
        ticks.iter().map(|t| Some(f(t) as f64 / tick)).collect()
    };

    // What callers got: requests answered OK.
    let arriving = scenario.threads as f64 / crate::sim::REQUEST_INTERVAL.as_secs_f64();
    linear_panel(
        &mut s,
        &served,
        "requests answered OK per second",
        &format!("{arriving:.0} arrive per second; half of them need the dependency"),
        vec![
            Series {
                points: per_s(without, |t| t.served),
                color: WITHOUT,
                dash: None,
                width: 2.0,
            },
            Series {
                points: per_s(with, |t| t.served),
                color: WITH,
                dash: None,
                width: 2.0,
            },
        ],
        &[],
        &x,
        total,
        &tick_t,
        |v| format!("{v:.0}"),
    );

    // What the dependency got.
    linear_panel(
        &mut s,
        &load,
        "calls per second that reached the dependency",
        "",
        vec![
            Series {
                points: per_s(with, |t| t.rejected),
                color: WITH,
                dash: Some("2 3"),
                width: 1.6,
            },
            Series {
                points: per_s(without, |t| t.calls),
                color: WITHOUT,
                dash: None,
                width: 2.0,
            },
            Series {
                points: per_s(with, |t| t.calls),
                color: WITH,
                dash: None,
                width: 2.0,
            },
        ],
        &[(
            WITH,
            Some("2 3"),
            "rejected at once by cutout (never reached it)",
        )],
        &x,
        total,
        &tick_t,
        |v| format!("{v:.0}"),
    );

    // How those calls went.
    // A rate over a handful of probes says little: such ticks are left out.
    const FEWEST: u64 = 10;
    let rate = |ticks: &[Tick], f: fn(&Tick) -> Option<f64>| -> Vec<Option<f64>> {
        ticks
            .iter()
            .map(|t| {
                f(t).filter(|_| t.ok + t.failed >= FEWEST)
                    .map(|r| r * 100.0)
            })
            .collect()
    };
    frame(
        &mut s,
        &rates,
        "of those calls: failed, slow (%)",
        &format!("ticks with fewer than {FEWEST} calls left out"),
        &x,
        total,
    );
    y_grid(
        &mut s,
        &rates,
        &[0.0, 25.0, 50.0, 75.0, 100.0],
        0.0,
        100.0,
        |v| format!("{v:.0}%"),
        false,
    );
    for se in [
        Series {
            points: rate(without, Tick::slow_rate),
            color: WITHOUT,
            dash: Some("5 3"),
            width: 1.6,
        },
        Series {
            points: rate(without, Tick::failure_rate),
            color: WITHOUT,
            dash: None,
            width: 2.0,
        },
        Series {
            points: rate(with, Tick::slow_rate),
            color: WITH,
            dash: Some("5 3"),
            width: 1.6,
        },
        Series {
            points: rate(with, Tick::failure_rate),
            color: WITH,
            dash: None,
            width: 2.0,
        },
    ] {
        polyline(&mut s, &se, &rates, 0.0, 100.0, false, &x, &tick_t);
    }
    legend(
        &mut s,
        &rates,
        &[
            ("#555", None, "failed".to_string()),
            ("#555", Some("5 3"), format!("slow (> {SLOW_CALL:?})")),
        ],
    );

    // What callers waited: p99 of arrival to answer, log scale.
    let p99 = |ticks: &[Tick]| -> Vec<Option<f64>> {
        ticks
            .iter()
            .map(|t| t.latency(99.0).map(|d| d.as_secs_f64() * 1e3))
            .collect()
    };
    let lines = [(p99(without), WITHOUT), (p99(with), WITH)];
    let hi = lines
        .iter()
        .flat_map(|l| l.0.iter().flatten())
        .fold(1.0f64, |m, &v| m.max(v));
    let (lo, hi) = (1.0, 10f64.powf(hi.log10().ceil()));
    frame(
        &mut s,
        &lat,
        "caller latency p99, arrival to answer (log scale)",
        "",
        &x,
        total,
    );
    let mut decades = Vec::new();
    let mut d = lo;
    while d <= hi * 1.0001 {
        decades.push(d);
        d *= 10.0;
    }
    y_grid(
        &mut s,
        &lat,
        &decades,
        lo,
        hi,
        |v| crate::report::latency(Some(Duration::from_secs_f64(v / 1e3))),
        true,
    );
    for (points, color) in lines {
        let se = Series {
            points,
            color,
            dash: None,
            width: 2.0,
        };
        polyline(&mut s, &se, &lat, lo, hi, true, &x, &tick_t);
    }

    // Time axis.
    let step = axis_step(total);
    let mut t = 0.0;
    while t <= total + 1e-9 {
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#444">{}</text>"##,
            x(t),
            lat.bottom() + 16.0,
            trim(t)
        );
        t += step;
    }
    let _ = writeln!(
        s,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#444">seconds</text>"##,
        LEFT + PLOT_W / 2.0,
        lat.bottom() + 34.0
    );
    s.push_str("</svg>\n");
    s
}

/// A panel with a linear axis from zero to a round top above every point.
#[allow(clippy::too_many_arguments)]
fn linear_panel(
    s: &mut String,
    p: &Panel,
    title: &str,
    note: &str,
    series: Vec<Series<'_>>,
    items: &[(&str, Option<&str>, &str)],
    x: &impl Fn(f64) -> f64,
    total: f64,
    tick_t: &impl Fn(usize) -> f64,
    label: impl Fn(f64) -> String,
) {
    let peak = series
        .iter()
        .flat_map(|se| se.points.iter().flatten())
        .fold(1.0f64, |m, &v| m.max(v));
    let (top, step) = nice_ceiling(peak);
    frame(s, p, title, note, x, total);
    let marks: Vec<f64> = (0..=4).map(|i| step * f64::from(i)).collect();
    y_grid(s, p, &marks, 0.0, top, label, false);
    for se in &series {
        polyline(s, se, p, 0.0, top, false, x, tick_t);
    }
    let items: Vec<(&str, Option<&str>, String)> = items
        .iter()
        .map(|&(c, d, l)| (c, d, l.to_string()))
        .collect();
    legend(s, p, &items);
}

fn row_label(s: &mut String, p: &Panel, text: &str) {
    let _ = writeln!(
        s,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="end" fill="#333">{}</text>"##,
        LEFT - 8.0,
        p.top + p.height / 2.0 + 4.0,
        esc(text)
    );
}

fn axis_step(total: f64) -> f64 {
    if total > 40.0 {
        5.0
    } else if total > 8.0 {
        2.0
    } else {
        0.5
    }
}

fn phase_title(b: Behaviour) -> &'static str {
    match b {
        Behaviour::Healthy => "healthy",
        Behaviour::LatencySpike => "latency spike",
        Behaviour::Outage => "hard outage",
        Behaviour::PartialRecovery => "partial recovery",
    }
}

fn state_color(st: State) -> &'static str {
    match st {
        State::Closed => "#34a853",
        State::Open | State::ForcedOpen => "#d93025",
        State::HalfOpen => "#fbbc04",
        // The ramp's background: the share admitted is drawn over it in green.
        State::Recovering => "#c8e6c9",
        // Disabled, and any state a later cutout adds (`State` is non-exhaustive).
        _ => "#9aa0a6",
    }
}

fn frame(s: &mut String, p: &Panel, title: &str, note: &str, x: &impl Fn(f64) -> f64, total: f64) {
    let _ = writeln!(
        s,
        r##"<text x="{LEFT}" y="{:.1}"><tspan font-weight="600" fill="#222">{}</tspan><tspan dx="8" fill="#666">{}</tspan></text>"##,
        p.top - 8.0,
        esc(title),
        if note.is_empty() {
            String::new()
        } else {
            format!("({})", esc(note))
        }
    );
    let _ = writeln!(
        s,
        r##"<rect x="{LEFT}" y="{:.1}" width="{PLOT_W}" height="{:.1}" fill="none" stroke="#bbb"/>"##,
        p.top, p.height
    );
    // Vertical grid at the time axis' marks.
    let step = axis_step(total);
    let mut t = step;
    while t < total - 1e-9 {
        let _ = writeln!(
            s,
            r##"<line x1="{0:.1}" x2="{0:.1}" y1="{1:.1}" y2="{2:.1}" stroke="#e3e3e3"/>"##,
            x(t),
            p.top,
            p.bottom()
        );
        t += step;
    }
}

fn y_of(v: f64, p: &Panel, lo: f64, hi: f64, log: bool) -> f64 {
    let f = if log {
        (v.max(lo).log10() - lo.log10()) / (hi.log10() - lo.log10())
    } else {
        (v - lo) / (hi - lo)
    };
    p.bottom() - p.height * f.clamp(0.0, 1.0)
}

fn y_grid(
    s: &mut String,
    p: &Panel,
    marks: &[f64],
    lo: f64,
    hi: f64,
    label: impl Fn(f64) -> String,
    log: bool,
) {
    for &m in marks {
        let y = y_of(m, p, lo, hi, log);
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}" stroke="#e3e3e3"/><text x="{:.1}" y="{:.1}" text-anchor="end" fill="#444">{}</text>"##,
            LEFT + PLOT_W,
            LEFT - 6.0,
            y + 4.0,
            esc(&label(m))
        );
    }
}

#[allow(clippy::too_many_arguments)]
fn polyline(
    s: &mut String,
    se: &Series<'_>,
    p: &Panel,
    lo: f64,
    hi: f64,
    log: bool,
    x: &impl Fn(f64) -> f64,
    tick_t: &impl Fn(usize) -> f64,
) {
    let dash = se
        .dash
        .map(|d| format!(r##" stroke-dasharray="{d}""##))
        .unwrap_or_default();
    let mut run: Vec<(f64, f64)> = Vec::new();
    let flush = |s: &mut String, run: &mut Vec<(f64, f64)>| {
        match run.len() {
            0 => {}
            1 => {
                let (cx, cy) = run[0];
                let _ = writeln!(
                    s,
                    r##"<circle cx="{cx:.1}" cy="{cy:.1}" r="2.2" fill="{}"/>"##,
                    se.color
                );
            }
            _ => {
                let pts: Vec<String> = run.iter().map(|(a, b)| format!("{a:.1},{b:.1}")).collect();
                let _ = writeln!(
                    s,
                    r##"<polyline points="{}" fill="none" stroke="{}" stroke-width="{}" stroke-linejoin="round"{dash}/>"##,
                    pts.join(" "),
                    se.color,
                    se.width
                );
            }
        }
        run.clear();
    };
    for (i, v) in se.points.iter().enumerate() {
        match v {
            Some(v) => run.push((x(tick_t(i)), y_of(*v, p, lo, hi, log))),
            None => flush(s, &mut run),
        }
    }
    flush(s, &mut run);
}

fn legend(s: &mut String, p: &Panel, items: &[(&str, Option<&str>, String)]) {
    let mut lx = LEFT + PLOT_W;
    // Right-aligned: lay out from the right edge.
    let widths: Vec<f64> = items
        .iter()
        .map(|(_, _, l)| 40.0 + 6.6 * l.chars().count() as f64)
        .collect();
    lx -= widths.iter().sum::<f64>();
    let y = p.top - 8.0;
    for ((color, dash, label), w) in items.iter().zip(widths) {
        let dash = dash
            .map(|d| format!(r##" stroke-dasharray="{d}""##))
            .unwrap_or_default();
        let _ = writeln!(
            s,
            r##"<line x1="{:.1}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="{color}" stroke-width="2"{dash}/><text x="{:.1}" y="{y:.1}" fill="#333">{}</text>"##,
            lx,
            lx + 22.0,
            y - 4.0,
            y - 4.0,
            lx + 26.0,
            esc(label)
        );
        lx += w;
    }
}

/// A round axis top at or above `peak`, and its quarter step.
fn nice_ceiling(peak: f64) -> (f64, f64) {
    let raw = peak / 4.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|&s| s >= raw)
        .unwrap_or(10.0 * mag);
    (step * 4.0, step)
}

fn trim(t: f64) -> String {
    if (t - t.round()).abs() < 1e-9 {
        format!("{t:.0}")
    } else {
        format!("{t:.1}")
    }
}

fn esc(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
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

    #[test]
    fn text_is_escaped() {
        assert_eq!(esc(r##"a<b & "c">"##), "a&lt;b &amp; &quot;c&quot;&gt;");
    }
}
