//! The routes: the page and its two files, the JSON snapshot, the event stream,
//! and the controls (in `control`).

use crate::control;
use crate::sampler::Shared;
use crate::view::Query;
use axum::Router;
use axum::extract::{OriginalUri, State};
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

const PAGE: &str = include_str!("../assets/index.html");
const SCRIPT: &str = include_str!("../assets/app.js");
const STYLE: &str = include_str!("../assets/app.css");

/// No script, style or connection from anywhere but this server, and no inline
/// script at all: data can never become code on the page.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; \
    frame-ancestors 'self'";

pub(crate) fn routes(shared: Arc<Shared>) -> Router {
    let mut router = Router::new()
        .route("/", get(page))
        .route(
            "/app.js",
            get(|| async { file(SCRIPT, "text/javascript; charset=utf-8") }),
        )
        .route(
            "/app.css",
            get(|| async { file(STYLE, "text/css; charset=utf-8") }),
        )
        .route("/api/snapshot", get(snapshot))
        .route("/api/stream", get(stream));
    if shared.source.controls {
        router = router.route("/api/control", post(control::control));
    }
    let hosts = axum::middleware::from_fn_with_state(shared.clone(), refuse_other_hosts);
    router.layer(hosts).with_state(shared)
}

/// Refuses a request sent to a host the dashboard is not reached by (see
/// [`Source::allow_host`](crate::Source::allow_host)). One without a host (not
/// from a browser, which always names it) passes; one whose `Host` is not
/// visible ASCII does not.
async fn refuse_other_hosts(
    State(shared): State<Arc<Shared>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    // A `Host` that is not visible ASCII names no host this serves: "".
    let host = match request.headers().get(header::HOST) {
        Some(host) => Some(host.to_str().unwrap_or("")),
        None => request.uri().authority().map(|a| a.as_str()),
    };
    match host {
        Some(host) if !allowed(host, &shared.source.hosts) => {
            let why = format!(
                "this dashboard is not served as {host:?}: add the name with Source::allow_host\n"
            );
            (StatusCode::FORBIDDEN, why).into_response()
        }
        _ => next.run(request).await,
    }
}

/// Whether a request sent to `host` (a `Host` header's value) is taken: an IP
/// address, `localhost` or a name under it, or one of `names` (lowercased).
fn allowed(host: &str, names: &[String]) -> bool {
    let name = host_name(host);
    if let Some(v6) = name.strip_prefix('[').and_then(|n| n.strip_suffix(']')) {
        return v6.parse::<std::net::Ipv6Addr>().is_ok();
    }
    let lower = name.to_ascii_lowercase();
    name.parse::<std::net::Ipv4Addr>().is_ok()
        || lower == "localhost"
        || lower.ends_with(".localhost")
        || names.contains(&lower)
}

/// The name in a `Host` value: without a port (digits after the last `:`,
/// where that ends a name or a bracketed IPv6 address) or a trailing dot.
pub(crate) fn host_name(host: &str) -> &str {
    let name = match host.rsplit_once(':') {
        Some((name, port))
            if port.bytes().all(|b| b.is_ascii_digit())
                && (name.ends_with(']') || !name.contains(':')) =>
        {
            name
        }
        _ => host,
    };
    name.strip_suffix('.').unwrap_or(name)
}

fn file(body: &'static str, kind: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::CACHE_CONTROL, "no-cache"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body,
    )
        .into_response()
}

/// Escapes text for an HTML attribute.
fn attribute(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// The page. Its two files are linked relative to where it is mounted: served at
/// `/breakers` (no trailing slash) they are `breakers/app.js`, at `/breakers/`
/// just `app.js`.
async fn page(OriginalUri(uri): OriginalUri) -> Response {
    let path = uri.path();
    let base = match path.rsplit_once('/') {
        Some((_, last)) if !last.is_empty() => format!("{last}/"),
        _ => String::new(),
    };
    let html = PAGE.replace("{{base}}", &attribute(&base));
    let mut response = file("", "text/html; charset=utf-8");
    *response.body_mut() = html.into();
    response.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(POLICY),
    );
    response
}

async fn snapshot(State(shared): State<Arc<Shared>>, uri: Uri) -> Response {
    shared.started().await;
    let query = Query::parse(uri.query());
    let frame = shared.frames.borrow().clone();
    let body = shared.render(&frame, &query).to_string();
    (
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response()
}

/// One event per frame, each the client's page of the newest frame (rendered
/// once per frame and query, whoever asks). A slow client skips frames rather
/// than queueing them: it holds one receiver and one frame. The stream holds the
/// router's state weakly, and ends with it. At most `max_streams` at once: one
/// more is refused (503) until one closes.
async fn stream(State(shared): State<Arc<Shared>>, uri: Uri) -> Response {
    let max = shared.source.max_streams;
    let Some(open) = Open::take(&shared.streams, max) else {
        let why = format!("{max} event streams are open, the most this dashboard serves\n");
        return (StatusCode::SERVICE_UNAVAILABLE, why).into_response();
    };
    shared.started().await;
    let query = Query::parse(uri.query());
    let mut frames = shared.frames.subscribe();
    frames.mark_changed();
    let weak = Arc::downgrade(&shared);
    drop(shared);
    let state = (frames, query, open);
    let events = futures_util::stream::unfold(state, move |(mut frames, query, open)| {
        let weak = weak.clone();
        async move {
            frames.changed().await.ok()?;
            let frame = frames.borrow_and_update().clone();
            let data = weak.upgrade()?.render(&frame, &query);
            let event = Event::default().event("frame").data(&*data);
            Some((Ok::<_, Infallible>(event), (frames, query, open)))
        }
    });
    (
        [(header::CACHE_CONTROL, "no-store")],
        Sse::new(events).keep_alive(KeepAlive::default()),
    )
        .into_response()
}

/// One open event stream, counted in the router's `streams` until it drops
/// (the client went, or the router did).
struct Open(Arc<AtomicUsize>);

impl Open {
    /// Counts one more stream in `streams`, if fewer than `max` are open.
    fn take(streams: &Arc<AtomicUsize>, max: usize) -> Option<Open> {
        // Relaxed: the count guards no other memory, only its own bound.
        (streams.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
            (n < max).then(|| n + 1)
        }))
        .ok()
        .map(|_| Open(streams.clone()))
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        // Relaxed: as in `take`.
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_is_taken_by_its_name_alone() {
        let names = ["ops.example.com".to_owned()];
        for host in [
            "[::1]",
            "[::1]:80",
            "10.0.0.7:8080",
            "LOCALHOST",
            "a.localhost.",
            "ops.example.com:",
        ] {
            assert!(allowed(host, &names), "{host}");
        }
        let refused = [
            "::1", // an IPv6 address without brackets is no Host
            "[not-an-address]:80",
            "127.0.0.1.nip.io", // a name that resolves to loopback
            "localhost.evil.example",
            "ops.example.com.evil.example",
            "",
        ];
        for host in refused {
            assert!(!allowed(host, &names), "{host}");
        }
    }
}
