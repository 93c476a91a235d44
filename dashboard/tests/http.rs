//! The router over loopback: the page and its files, the JSON snapshot, the
//! stream, and the controls.

mod common;

use common::{Stream, WAIT, get, raw_status, request, serve, snapshot_until, status, stream_until};
use cutout::{CircuitBreaker, Registry, State};
use cutout_dashboard::{Breakers, MIN_TICK, Source, Thresholds};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

const HOSTILE: &str = "<script>alert(1)</script>";

fn registry(keys: &[&str]) -> Arc<Registry<String>> {
    let registry: Registry<String> = Registry::new(CircuitBreaker::builder()).unwrap();
    for key in keys {
        registry.get(*key);
    }
    Arc::new(registry)
}

fn app(source: Source) -> axum::Router {
    axum::Router::new().nest("/breakers", cutout_dashboard::router(source))
}

fn names(page: &serde_json::Value) -> Vec<String> {
    page["breakers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn the_page_links_its_files_where_it_is_mounted_and_carries_no_data() {
    let source = || Source::new().registry(registry(&[HOSTILE, "db"]));
    let addr = serve(app(source())).await;
    let root = serve(cutout_dashboard::router(source())).await;
    for (addr, path, link) in [
        (addr, "/breakers", "\"breakers/app.js"),
        (root, "/", "\"app.js"),
    ] {
        let page = get(addr, path).await;
        assert_eq!(page.status, 200, "{path}");
        assert!(page.body.contains(link), "{path}: {}", page.body);
        let policy = page.headers["content-security-policy"].to_str().unwrap();
        assert!(policy.contains("script-src 'self'") && !policy.contains("unsafe-inline"));
        // The page is the same whatever the breakers are: no name reaches the HTML.
        assert!(!page.body.contains("alert") && !page.body.contains("db"));
    }
    let script = get(addr, "/breakers/app.js").await;
    assert_eq!(script.status, 200);
    assert!(
        script.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/javascript")
    );
    assert!(script.body.contains("textContent"));
    for sink in [
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
    ] {
        assert!(!script.body.contains(sink), "the script uses {sink}");
    }
    assert_eq!(get(addr, "/breakers/app.css").await.status, 200);
}

#[tokio::test]
async fn the_snapshot_sorts_the_sick_first_filters_and_pages() {
    let keys = ["a", "b", "c", "d", "e"];
    let reg = registry(&keys);
    reg.get("d").force_open();
    reg.get(HOSTILE).disable();
    let addr = serve(app(Source::new().registry(reg.clone()))).await;
    let all = get(addr, "/breakers/api/snapshot").await;
    assert_eq!(all.status, 200);
    assert_eq!(all.headers["content-type"], "application/json");
    let all = all.json();
    assert_eq!(
        (all["total"].as_u64(), all["sick"].as_u64()),
        (Some(6), Some(1))
    );
    let order = names(&all);
    assert_eq!(order[0], "d", "{order:?}");
    assert_eq!(order[1], HOSTILE, "disabled comes before closed: {order:?}");
    assert_eq!(all["breakers"][0]["state"], "forced_open");
    assert!(all["breakers"][0]["retry_after_ms"].is_null());

    let page = get(addr, "/breakers/api/snapshot?per_page=2&page=1")
        .await
        .json();
    assert_eq!(names(&page), ["a", "b"]);
    assert_eq!(
        (page["pages"].as_u64(), page["matched"].as_u64()),
        (Some(3), Some(6))
    );
    let filtered = get(addr, "/breakers/api/snapshot?q=%3CSCRIPT").await.json();
    assert_eq!(names(&filtered), [HOSTILE]);
    let sick = get(addr, "/breakers/api/snapshot?sick=1").await.json();
    assert_eq!(names(&sick), ["d"]);
}

#[tokio::test]
async fn transitions_between_two_ticks_are_all_reported() {
    let db = Arc::new(CircuitBreaker::builder().build().unwrap());
    let addr = serve(app(Source::new().breaker("db", db.clone()))).await;
    // The sampler starts with the first request, from the state as it is then.
    get(addr, "/breakers/api/snapshot").await;
    db.force_open();
    db.reset();
    let seen = snapshot_until(addr, "/breakers/api/snapshot", |v| {
        v["breakers"][0]["recent"].as_array().unwrap().len() >= 2
    })
    .await;
    let mut reasons: Vec<&str> = seen["breakers"][0]["recent"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["reason"].as_str().unwrap())
        .collect();
    reasons.sort_unstable();
    assert_eq!(reasons, ["forced_open", "reset"]);
    assert_eq!(seen["breakers"][0]["state"], "closed");
}

/// A user's source that panics on its first two reads.
struct Flaky {
    reads: AtomicU32,
    db: CircuitBreaker,
}

impl Breakers for Flaky {
    fn for_each(&self, f: &mut dyn FnMut(&str, &CircuitBreaker, Thresholds)) {
        // Relaxed: a count, read on its own.
        if self.reads.fetch_add(1, Ordering::Relaxed) < 2 {
            // Unwinds without the panic hook (no backtrace printed: slow on a
            // loaded machine).
            std::panic::resume_unwind(Box::new("a source that fails, on purpose"));
        }
        f("db", &self.db, Thresholds::default());
    }
}

/// A source that panics costs the frames it was read for, not the sampler: the
/// first request is answered, and the breakers show once the source recovers.
#[tokio::test]
async fn a_source_that_panics_costs_a_frame_not_the_sampler() {
    let flaky = Flaky {
        reads: AtomicU32::new(0),
        db: CircuitBreaker::builder().build().unwrap(),
    };
    let addr = serve(app(Source::new().breakers(Arc::new(flaky)))).await;
    assert_eq!(get(addr, "/breakers/api/snapshot").await.status, 200);
    let seen = snapshot_until(addr, "/breakers/api/snapshot", |v| {
        v["breakers"].as_array().unwrap().len() == 1
    })
    .await;
    assert_eq!(seen["breakers"][0]["name"], "db");
}

/// A dashboard started during an incident lists the transitions made before its
/// first tick, marked as earlier, and the later ones as seen.
#[tokio::test]
async fn transitions_before_the_first_tick_are_listed_as_earlier() {
    let db = Arc::new(CircuitBreaker::builder().build().unwrap());
    db.force_open();
    db.reset();
    db.force_open();
    let addr = serve(app(Source::new().breaker("db", db.clone()))).await;
    get(addr, "/breakers/api/snapshot").await;
    db.reset();
    let seen = snapshot_until(addr, "/breakers/api/snapshot", |v| {
        v["breakers"][0]["state"] == "closed"
    })
    .await;
    let recent: Vec<_> = (seen["breakers"][0]["recent"].as_array().unwrap().iter())
        .map(|e| {
            (
                e["reason"].as_str().unwrap(),
                e["count"].as_u64().unwrap(),
                e["earlier"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        recent,
        [
            ("forced_open", 2, true),
            ("reset", 1, true),
            ("reset", 1, false)
        ]
    );
}

#[tokio::test]
async fn the_stream_sends_the_clients_page_and_follows_changes() {
    let reg = registry(&["alpha", "beta"]);
    let addr = serve(app(Source::new().registry(reg.clone()))).await;
    let first = stream_until(addr, "/breakers/api/stream?q=bet", |_| true).await;
    assert_eq!(names(&first), ["beta"]);
    reg.get("beta").force_open();
    let later = stream_until(addr, "/breakers/api/stream?q=bet", |v| {
        v["breakers"][0]["state"] == "forced_open"
    })
    .await;
    assert_eq!(later["sick"], 1);
}

/// A router serves at most `max_streams` event streams at once: one more is
/// refused, saying why, and served again once a stream has closed. The JSON
/// snapshot is not counted.
#[tokio::test]
async fn streams_beyond_the_most_are_refused_until_one_closes() {
    let source = Source::new().registry(registry(&["alpha"])).tick(MIN_TICK);
    let addr = serve(app(source.max_streams(2))).await;
    let mut first = Stream::open(addr, "/breakers/api/stream").await;
    let _second = Stream::open(addr, "/breakers/api/stream?q=al").await;
    first.next().await;
    let refused = get(addr, "/breakers/api/stream").await;
    assert_eq!(refused.status, 503);
    assert!(
        refused.body.contains("2 event streams are open"),
        "{}",
        refused.body
    );
    assert_eq!(get(addr, "/breakers/api/snapshot").await.status, 200);
    // The server sees the first stream gone when it next writes to it.
    drop(first);
    let deadline = tokio::time::Instant::now() + WAIT;
    while status(addr, "/breakers/api/stream").await != 200 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no stream after one closed"
        );
        tokio::time::sleep(MIN_TICK).await;
    }
}

#[tokio::test]
async fn controls_are_absent_unless_asked_for() {
    let reg = registry(&["db"]);
    let addr = serve(app(Source::new().registry(reg.clone()))).await;
    let origin = format!("http://{addr}");
    let post = request(
        addr,
        "POST",
        "/breakers/api/control?name=db&action=force_open",
        &[("origin", &origin)],
    )
    .await;
    assert_eq!(post.status, 404);
    assert_eq!(reg.get("db").state(), State::Closed);
    assert_eq!(
        get(addr, "/breakers/api/snapshot").await.json()["controls"],
        false
    );
}

#[tokio::test]
async fn controls_take_same_origin_posts_only() {
    let reg = registry(&["db", HOSTILE]);
    let addr = serve(app(Source::new().registry(reg.clone()).controls(true))).await;
    let path = "/breakers/api/control?name=db&action=force_open";
    let origin = format!("http://{addr}");
    // No side effect on GET, and none from another origin or without one.
    assert_eq!(get(addr, path).await.status, 405);
    for headers in [
        vec![],
        vec![("origin", "http://evil.example")],
        vec![
            ("sec-fetch-site", "cross-site"),
            ("origin", origin.as_str()),
        ],
    ] {
        assert_eq!(
            request(addr, "POST", path, &headers).await.status,
            403,
            "{headers:?}"
        );
    }
    assert_eq!(reg.get("db").state(), State::Closed);

    let ok = request(addr, "POST", path, &[("origin", &origin)]).await;
    assert_eq!(ok.status, 204);
    assert_eq!(reg.get("db").state(), State::ForcedOpen);
    let same_site = [("sec-fetch-site", "same-origin")];
    let disable = "/breakers/api/control?name=%3Cscript%3Ealert(1)%3C%2Fscript%3E&action=disable";
    assert_eq!(request(addr, "POST", disable, &same_site).await.status, 204);
    assert_eq!(reg.get(HOSTILE).state(), State::Disabled);
    let reset = "/breakers/api/control?name=db&action=reset";
    assert_eq!(request(addr, "POST", reset, &same_site).await.status, 204);
    assert_eq!(reg.get("db").state(), State::Closed);

    // A duration is for a fleet's override: refused without one.
    let timed = "/breakers/api/control?name=db&action=force_open&for_s=60";
    assert_eq!(request(addr, "POST", timed, &same_site).await.status, 400);
    assert_eq!(reg.get("db").state(), State::Closed);

    let unknown = "/breakers/api/control?name=nobody&action=reset";
    assert_eq!(request(addr, "POST", unknown, &same_site).await.status, 404);
    let bad = "/breakers/api/control?name=db&action=explode";
    assert_eq!(request(addr, "POST", bad, &same_site).await.status, 400);
}

/// A page from another site whose name resolves to this server (DNS
/// rebinding) is same-origin to the browser: the `Host` it names refuses it,
/// reading and controlling alike, unless the name is allowed.
#[tokio::test]
async fn a_request_sent_to_another_host_is_refused() {
    let reg = registry(&["db"]);
    let source = Source::new().registry(reg.clone()).controls(true);
    let addr = serve(app(source.allow_host("Ops.Example.com"))).await;
    let control = "/breakers/api/control?name=db&action=force_open";
    let port = addr.port();
    let rebound = format!("rebound.example:{port}");
    for path in [
        "/breakers",
        "/breakers/api/snapshot",
        "/breakers/api/stream",
    ] {
        let refused = request(addr, "GET", path, &[("host", &rebound)]).await;
        assert_eq!(refused.status, 403, "{path}");
        assert!(refused.body.contains("allow_host"), "{}", refused.body);
    }
    let as_page = [
        ("host", rebound.as_str()),
        ("sec-fetch-site", "same-origin"),
    ];
    assert_eq!(request(addr, "POST", control, &as_page).await.status, 403);
    assert_eq!(reg.get("db").state(), State::Closed);

    // Loopback names, IP addresses and the allowed name pass.
    let v6 = format!("[::1]:{port}");
    for host in [
        "localhost",
        "app.localhost:80",
        "127.0.0.1.",
        &v6,
        "ops.example.COM.:443",
    ] {
        let page = request(addr, "GET", "/breakers/api/snapshot", &[("host", host)]).await;
        assert_eq!(page.status, 200, "{host}");
    }
    // A Host that is not visible ASCII names no host served here.
    let raw = b"POST /breakers/api/control?name=db&action=force_open HTTP/1.1\r\n\
        Host: rebound\xe9.example\r\nSec-Fetch-Site: same-origin\r\n\
        Content-Length: 0\r\nConnection: close\r\n\r\n";
    assert_eq!(raw_status(addr, raw).await, "HTTP/1.1 403 Forbidden");
    assert_eq!(reg.get("db").state(), State::Closed);
    let as_page = [
        ("host", "ops.example.com"),
        ("sec-fetch-site", "same-origin"),
    ];
    assert_eq!(request(addr, "POST", control, &as_page).await.status, 204);
    assert_eq!(reg.get("db").state(), State::ForcedOpen);
}

/// Breakers that share a name have a card and an id each: a control that
/// names an id acts on that breaker alone, one that names only the name on
/// every breaker of the name.
#[tokio::test]
async fn a_control_with_an_id_acts_on_that_breaker_alone() {
    let new = || Arc::new(CircuitBreaker::builder().build().unwrap());
    let (busy, idle) = (new(), new());
    for _ in 0..3 {
        let _ = busy.call(|| Ok::<_, ()>(()));
    }
    let source = (Source::new().breaker("db", busy.clone()))
        .breaker("db", idle.clone())
        .controls(true);
    let addr = serve(app(source)).await;
    let page = snapshot_until(addr, "/breakers/api/snapshot", |p| p["total"] == 2).await;
    let id_of = |calls: u64| {
        let rows = page["breakers"].as_array().unwrap();
        let row = rows.iter().find(|r| r["window"]["calls"] == calls).unwrap();
        row["id"].as_u64().expect("a row carries its id")
    };
    let (busy_id, idle_id) = (id_of(3), id_of(0));
    assert_ne!(busy_id, idle_id);

    let same_site = [("sec-fetch-site", "same-origin")];
    let post = |query: String| async move {
        let path = format!("/breakers/api/control?{query}");
        request(addr, "POST", &path, &same_site).await.status
    };
    assert_eq!(post(format!("id={busy_id}&action=force_open")).await, 204);
    assert_eq!(
        (busy.state(), idle.state()),
        (State::ForcedOpen, State::Closed)
    );
    assert_eq!(
        post(format!("name=db&id={idle_id}&action=disable")).await,
        204
    );
    assert_eq!(
        (busy.state(), idle.state()),
        (State::ForcedOpen, State::Disabled)
    );
    // An id that names no breaker, or another breaker than the name does.
    assert_eq!(post("id=999999&action=reset".into()).await, 404);
    assert_eq!(
        post(format!("name=other&id={idle_id}&action=reset")).await,
        400
    );
    assert_eq!(post("id=x&action=reset".into()).await, 400);
    // Without an id, every breaker of the name.
    assert_eq!(post("name=db&action=reset".into()).await, 204);
    assert_eq!((busy.state(), idle.state()), (State::Closed, State::Closed));
}

#[tokio::test]
async fn a_page_is_bounded_and_removed_breakers_leave_it() {
    let keys: Vec<String> = (0..300).map(|i| format!("k{i:03}")).collect();
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    let reg = registry(&keys);
    let addr = serve(app(Source::new().registry(reg.clone()))).await;
    let page = get(addr, "/breakers/api/snapshot?per_page=1000")
        .await
        .json();
    assert_eq!(
        page["breakers"].as_array().unwrap().len(),
        200,
        "at most 200 rows a page"
    );
    assert_eq!(
        (page["total"].as_u64(), page["pages"].as_u64()),
        (Some(300), Some(2))
    );
    reg.remove("k000");
    let later = snapshot_until(addr, "/breakers/api/snapshot?q=k000", |v| v["total"] == 299).await;
    assert!(names(&later).is_empty());
}

/// A fleet of three live peers, two of which report `db` Open.
struct Peers;

impl cutout_dashboard::FleetSource for Peers {
    fn live_peers(&self) -> usize {
        3
    }
    fn open_keys(&self) -> Vec<String> {
        vec!["db".into(), "elsewhere".into()]
    }
    fn open_reports(&self, key: &str) -> usize {
        if key == "db" { 2 } else { 1 }
    }
    fn quorum_opens(&self) -> u64 {
        1
    }
}

#[tokio::test]
async fn a_fleets_picture_shows_beside_the_breakers() {
    let reg = registry(&["db", "cache"]);
    let addr = serve(app(Source::new().registry(reg).fleet(Arc::new(Peers)))).await;
    let page = get(addr, "/breakers/api/snapshot").await.json();
    assert_eq!(page["fleet"]["live_peers"], 3);
    assert_eq!(page["fleet"]["quorum_opens"], 1);
    for row in page["breakers"].as_array().unwrap() {
        let want = if row["name"] == "db" { 2 } else { 0 };
        assert_eq!(row["fleet_open_reports"], want, "{row}");
    }
    assert_eq!(page["fleet"]["controls"], false);
    assert!(page["breakers"][0]["fleet_override"].is_null());

    // A fleet that takes no controls leaves them local.
    let reg = registry(&["db"]);
    let source = Source::new().registry(reg.clone()).fleet(Arc::new(Peers));
    let local = serve(app(source.controls(true))).await;
    let path = "/breakers/api/control?name=db&action=force_open";
    let same_site = [("sec-fetch-site", "same-origin")];
    assert_eq!(request(local, "POST", path, &same_site).await.status, 204);
    assert_eq!(reg.get("db").state(), State::ForcedOpen);
    let page = get(local, "/breakers/api/snapshot").await.json();
    assert_eq!(page["fleet"]["controls"], false);

    let alone = serve(app(Source::new().registry(registry(&["db"])))).await;
    assert!(get(alone, "/breakers/api/snapshot").await.json()["fleet"].is_null());
}

/// The row of breaker `name` in `page`.
fn row(page: &serde_json::Value, name: &str) -> serde_json::Value {
    page["breakers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {page}"))
        .clone()
}

fn reasons(row: &serde_json::Value) -> Vec<&str> {
    row["recent"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["reason"].as_str().unwrap())
        .collect()
}

/// With the source's listener wired in, a transition reaches an open stream in
/// the very next frame: the tick is a minute, so no regular tick comes between.
#[tokio::test]
async fn the_listener_pushes_a_transition_before_the_next_tick() {
    let source = Source::new().tick(Duration::from_secs(60));
    let db = Arc::new(
        CircuitBreaker::builder()
            .on_transition(source.listener())
            .build()
            .unwrap(),
    );
    let reg: Arc<Registry<String>> = Arc::new(
        Registry::builder(CircuitBreaker::builder())
            .on_transition(source.registry_listener())
            .build()
            .unwrap(),
    );
    reg.get("cache");
    let addr = serve(app(source.registry(reg.clone()).breaker("db", db.clone()))).await;
    let mut stream = Stream::open(addr, "/breakers/api/stream").await;
    let first = stream.next().await;
    assert_eq!(names(&first), ["cache", "db"]);
    assert_eq!(first["sick"], 0);

    db.force_open();
    let pushed = stream.next().await;
    assert_eq!(pushed["tick"], first["tick"].as_u64().unwrap() + 1);
    assert_eq!(names(&pushed), ["db", "cache"], "sick first");
    assert_eq!(pushed["breakers"][0]["state"], "forced_open");
    assert_eq!(reasons(&pushed["breakers"][0]), ["forced_open"]);

    reg.get("cache").disable();
    db.reset();
    // One pushed frame or two (the sampler may read between the two): each a
    // tick after the one before, the last showing both.
    let mut tick = pushed["tick"].as_u64().unwrap();
    let both = loop {
        let frame = stream.next().await;
        tick += 1;
        assert_eq!(frame["tick"].as_u64(), Some(tick), "only pushed frames");
        let (cache, db) = (row(&frame, "cache"), row(&frame, "db"));
        if cache["state"] == "disabled" && db["state"] == "closed" {
            break (cache, db);
        }
        assert!(tick < pushed["tick"].as_u64().unwrap() + 3, "{frame}");
    };
    assert_eq!(reasons(&both.0), ["disabled"]);
    assert_eq!(reasons(&both.1), ["forced_open", "reset"]);
}

/// Transitions pushed more often than the tick do not hold the regular ticks
/// back: a busy breaker's rate still moves while another flaps all the time.
#[tokio::test]
async fn a_storm_of_pushes_leaves_the_regular_ticks_running() {
    let source = Source::new().tick(Duration::from_millis(100));
    let flapping = Arc::new(
        CircuitBreaker::builder()
            .on_transition(source.listener())
            .build()
            .unwrap(),
    );
    let busy = Arc::new(CircuitBreaker::builder().build().unwrap());
    let addr = serve(app(source
        .breaker("flapping", flapping.clone())
        .breaker("busy", busy.clone())))
    .await;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let storm = {
        let stop = stop.clone();
        tokio::spawn(async move {
            // A transition every 10 ms (a push every PUSH_GAP), and calls.
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                flapping.force_open();
                flapping.reset();
                for _ in 0..100 {
                    let _ = busy.call(|| Ok::<_, ()>(()));
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
    };
    let frame = stream_until(addr, "/breakers/api/stream", |frame| {
        row(frame, "busy")["admitted_per_s"].as_f64() > Some(0.0)
    })
    .await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    storm.await.unwrap();
    assert!(
        !row(&frame, "busy")["history"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}

/// Each breaker's what-if candidates come in its row, and a shadow breaker
/// shows as one, with the calls it would have rejected.
#[tokio::test]
async fn candidates_and_shadow_breakers_show_in_their_rows() {
    // Cooldowns of an hour: nothing half-opens while the test reads.
    let hour = Duration::from_secs(3600);
    let live = CircuitBreaker::builder()
        .consecutive_failures(5)
        .candidate(
            "tight",
            CircuitBreaker::builder()
                .consecutive_failures(2)
                .open_duration(hour),
        )
        .candidate("loose", CircuitBreaker::builder().consecutive_failures(10))
        .build()
        .unwrap();
    for _ in 0..3 {
        let _ = live.call(|| Err::<(), _>("down"));
    }
    let shadow = CircuitBreaker::builder()
        .consecutive_failures(1)
        .open_duration(hour)
        .shadow()
        .build()
        .unwrap();
    let _ = shadow.call(|| Err::<(), _>("down"));
    assert!(
        shadow.call(|| Ok::<_, ()>(())).is_ok(),
        "a shadow never rejects"
    );
    // A shadow that has held nothing back yet is still shown as one.
    let fresh = CircuitBreaker::builder().shadow().build().unwrap();
    let source = Source::new()
        .breaker("live", Arc::new(live))
        .breaker("shadow", Arc::new(shadow))
        .breaker("fresh shadow", Arc::new(fresh));
    let addr = serve(app(source)).await;
    let page = get(addr, "/breakers/api/snapshot").await.json();
    let row = |name: &str| row(&page, name);
    let live = row("live");
    assert_eq!(live["state"], "closed");
    assert_eq!(live["shadow"], false);
    let candidates = live["candidates"].as_array().unwrap();
    let tight = &candidates[0];
    assert_eq!(tight["name"], "tight");
    assert_eq!(tight["state"], "open");
    assert_eq!(
        (
            &tight["opened"],
            &tight["would_reject"],
            &tight["failures_spared"]
        ),
        (&1.into(), &1.into(), &1.into())
    );
    assert_eq!(tight["opened_at_ms"].as_array().unwrap().len(), 1);
    assert_eq!(tight["successes_turned_away"], 0);
    assert_eq!(tight["unseen"], 0);
    assert_eq!(candidates[1]["name"], "loose");
    assert_eq!(candidates[1]["state"], "closed");
    assert_eq!(candidates[1]["would_reject"], 0);

    let shadow = row("shadow");
    assert_eq!(shadow["state"], "open");
    assert_eq!(
        (&shadow["shadow"], &shadow["would_reject"]),
        (&true.into(), &1.into())
    );
    assert_eq!(shadow["candidates"], serde_json::json!([]));
    let fresh = row("fresh shadow");
    assert_eq!(
        (&fresh["shadow"], &fresh["would_reject"]),
        (&true.into(), &0.into())
    );
    assert_eq!(row("live")["shadow"], false);
}
