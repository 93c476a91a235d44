//! One client's page of a [`Frame`]: the query it asked for, and the JSON it gets.

use crate::fleet::{FleetOverride, OVERRIDE_DEFAULT, OVERRIDE_MAX};
use crate::sampler::{Frame, Row, rank};
use serde_json::{Value, json};
use std::time::Duration;

/// Rows per page unless the query says otherwise.
pub(crate) const PER_PAGE: usize = 50;
/// The most rows a page carries.
pub(crate) const MAX_PER_PAGE: usize = 200;
/// The longest filter kept (longer ones are cut).
const MAX_FILTER: usize = 200;

/// What a client asked to see.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Query {
    /// Keep the names that contain this, both in [`lower`] case.
    pub(crate) filter: String,
    /// Keep only the sick (not Closed and not Disabled).
    pub(crate) sick: bool,
    /// Zero-based page.
    pub(crate) page: usize,
    pub(crate) per_page: usize,
}

impl Query {
    /// Reads `q`, `sick`, `page` and `per_page` from a query string; anything
    /// unreadable is left at its default.
    pub(crate) fn parse(query: Option<&str>) -> Query {
        let mut q = Query {
            per_page: PER_PAGE,
            ..Query::default()
        };
        for pair in query.unwrap_or("").split('&') {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let v = decode(v);
            match k {
                "q" => q.filter = lower(v.chars().take(MAX_FILTER)),
                "sick" => q.sick = v == "1" || v == "true",
                "page" => q.page = v.parse().unwrap_or(0),
                "per_page" => q.per_page = page_size(&v),
                _ => {}
            }
        }
        q
    }

    fn keeps(&self, row: &Row) -> bool {
        (!self.sick || rank(row.state) < 3)
            && (self.filter.is_empty() || row.lower.contains(&self.filter))
    }
}

/// `chars` in lower case, each character lowercased alone: a name and a query
/// that contain the same text in any case contain it in the same lower case.
/// `str::to_lowercase` does not promise that, since it makes a word-final `Σ`
/// a `ς` and any other a `σ`, so that "ΟΔΟΣ" would not find "ΟΔΟΣΑ". This is
/// Unicode lowercasing, not case folding: `İ` becomes `i̇`, not `i`.
pub(crate) fn lower(chars: impl IntoIterator<Item = char>) -> String {
    chars.into_iter().flat_map(char::to_lowercase).collect()
}

/// Percent-decoding, `+` as a space; a bad escape is kept as it is.
pub(crate) fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push(h << 4 | l);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

fn ms(d: Duration) -> u64 {
    d.as_millis().min(u64::MAX as u128) as u64
}

fn row_json(row: &Row) -> Value {
    let counts =
        |c: cutout::WindowCounts| json!({"calls": c.calls, "failures": c.failures, "slow": c.slow});
    json!({
        "id": row.id,
        "name": &*row.name,
        "state": row.state.as_str(),
        "generation": row.generation,
        "level": row.level,
        "time_in_state_ms": ms(row.time_in_state),
        "retry_after_ms": row.retry_after.map(ms),
        "window": counts(row.window),
        "failure_rate": row.window.failure_rate(),
        "slow_call_rate": row.window.slow_call_rate(),
        "failure_threshold": row.thresholds.failure_rate,
        "slow_threshold": row.thresholds.slow_call_rate,
        "tripped_by": row.tripped_by.map(counts),
        "admitted_per_s": row.admitted_per_s,
        "rejected_per_s": row.rejected_per_s,
        "history": row.history.iter().map(|&(a, r)| [a, r]).collect::<Vec<_>>(),
        "fleet_open_reports": row.fleet_open,
        "fleet_override": row.fleet_override.map(FleetOverride::as_str),
        "shadow": row.shadow,
        "would_reject": row.would_reject,
        "candidates": row.candidates.iter().map(candidate_json).collect::<Vec<_>>(),
        "recent": row.recent.iter().map(|e| json!({
            "at_ms": e.at_ms, "reason": e.reason.as_str(), "count": e.count,
            "earlier": e.earlier,
        })).collect::<Vec<_>>(),
    })
}

fn candidate_json(c: &cutout::CandidateReport) -> Value {
    json!({
        "name": c.name,
        "state": c.state.as_str(),
        "opened": c.opened,
        "opened_at_ms": c.opened_at.iter().map(|&d| ms(d)).collect::<Vec<_>>(),
        "time_open_ms": ms(c.time_open),
        "would_reject": c.would_reject,
        "failures_spared": c.failures_spared,
        "successes_turned_away": c.successes_turned_away,
        "unseen": c.unseen,
    })
}

/// The page `query` asks for, with the totals a pager needs; past the last
/// page (breakers went, or the filter keeps fewer), the last page, numbered as
/// such.
pub(crate) fn page(frame: &Frame, query: &Query, controls: bool) -> Value {
    let sick = frame.rows.iter().filter(|r| rank(r.state) < 3).count();
    let kept: Vec<&Row> = frame.rows.iter().filter(|r| query.keeps(r)).collect();
    let pages = kept.len().div_ceil(query.per_page).max(1);
    let shown = query.page.min(pages - 1);
    let rows: Vec<Value> = (kept.chunks(query.per_page).nth(shown).unwrap_or_default())
        .iter()
        .map(|r| row_json(r))
        .collect();
    json!({
        "tick": frame.tick,
        "total": frame.rows.len(),
        "sick": sick,
        "matched": kept.len(),
        "page": shown,
        "per_page": query.per_page,
        "pages": pages,
        "controls": controls,
        "fleet": frame.fleet.map(|f| json!({
            "live_peers": f.live_peers,
            "quorum_opens": f.quorum_opens,
            "controls": controls && f.controls,
            "override_default_s": OVERRIDE_DEFAULT.as_secs(),
            "override_max_s": OVERRIDE_MAX.as_secs(),
        })),
        "breakers": rows,
    })
}

/// A `per_page` value: any whole number clamped to 1..=[`MAX_PER_PAGE`] (one
/// too large to parse is the most), anything else the default.
fn page_size(v: &str) -> usize {
    let (negative, digits) = v.strip_prefix('-').map_or((false, v), |d| (true, d));
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return PER_PAGE;
    }
    match negative {
        true => 1,
        false => digits.parse().unwrap_or(usize::MAX).clamp(1, MAX_PER_PAGE),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Source;
    use crate::sampler::Sampler;
    use cutout::CircuitBreaker;
    use std::sync::Arc;

    #[test]
    fn the_query_reads_its_fields_and_clamps_the_page_size() {
        let q = Query::parse(Some("q=Pay%20Ments&sick=1&page=3&per_page=100000&x=y"));
        assert_eq!(q.filter, "pay ments");
        assert!(q.sick);
        assert_eq!((q.page, q.per_page), (3, MAX_PER_PAGE));
        assert_eq!(Query::parse(None).per_page, PER_PAGE);
        let size = |v: &str| Query::parse(Some(&format!("per_page={v}"))).per_page;
        let sizes = ["99999999999999999999999", "-3", "0", "7", "x", ""].map(size);
        assert_eq!(sizes, [MAX_PER_PAGE, 1, 1, 7, PER_PAGE, PER_PAGE]);
        assert_eq!(decode("a%3Cb%zz%4"), "a<b%zz%4");
    }

    /// The names a filter keeps, of a frame of breakers with these names.
    fn kept(names: &[&str], q: &str) -> Vec<String> {
        let mut source = Source::new();
        for name in names {
            let breaker = Arc::new(CircuitBreaker::builder().build().unwrap());
            source = source.breaker(*name, breaker);
        }
        let frame = Sampler::new().sample(&source.finish(), false);
        let query = Query::parse(Some(&format!("q={q}")));
        let page = page(&frame, &query, false);
        let mut kept: Vec<String> = (page["breakers"].as_array().unwrap().iter())
            .map(|b| b["name"].as_str().unwrap().to_owned())
            .collect();
        kept.sort();
        kept
    }

    /// A page past the last (breakers went since the client asked) is the
    /// last page, numbered as such: the pager goes back from there.
    #[test]
    fn a_page_past_the_last_is_the_last() {
        let mut source = Source::new();
        for name in ["a", "b", "c"] {
            source = source.breaker(name, Arc::new(CircuitBreaker::builder().build().unwrap()));
        }
        let frame = Sampler::new().sample(&source.finish(), false);
        let names = |q: &str| {
            let page = page(&frame, &Query::parse(Some(q)), false);
            let rows = page["breakers"].as_array().unwrap().iter();
            let names: Vec<String> = rows.map(|b| b["name"].as_str().unwrap().into()).collect();
            (
                page["page"].as_u64().unwrap(),
                page["pages"].as_u64().unwrap(),
                names,
            )
        };
        assert_eq!(
            names("per_page=2&page=0"),
            (0, 2, vec!["a".into(), "b".into()])
        );
        assert_eq!(names("per_page=2&page=1"), (1, 2, vec!["c".into()]));
        assert_eq!(names("per_page=2&page=9"), (1, 2, vec!["c".into()]));
        assert_eq!(names("per_page=2&page=9&q=zz"), (0, 1, vec![]));
    }

    /// A capital sigma lowercases to σ wherever it stands, in the name and in
    /// the query alike: `str::to_lowercase` would make a word-final one ς, and
    /// a query that ends a word would then miss a name that goes on.
    #[test]
    fn the_filter_lowercases_each_character_alone() {
        let names = ["ΟΔΟΣΑ", "ΟΔΟΣ-1", "other"];
        assert_eq!(kept(&names, "ΟΔΟΣ"), ["ΟΔΟΣ-1", "ΟΔΟΣΑ"]);
        assert_eq!(kept(&names, "σ"), ["ΟΔΟΣ-1", "ΟΔΟΣΑ"]);
        assert_eq!(kept(&names, "OTHER"), ["other"]);
    }
}
