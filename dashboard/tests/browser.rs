//! The page in a real browser: Chromium driven over WebDriver by chromedriver,
//! against the playground (and a dashboard of two breakers under one name). Skips
//! with a message when either is missing, unless
//! `CUTOUT_DASHBOARD_REQUIRE_BROWSER=1` (CI) makes that a failure. Saves the
//! dashboard's screenshot under the target directory, and to docs/dashboard.png
//! only with `CUTOUT_DASHBOARD_SCREENSHOT=1`, so a plain `cargo test` leaves the
//! tree as it was.

#[allow(dead_code)]
#[path = "../examples/playground/sim.rs"]
mod sim;

mod common;

use cutout::{CircuitBreaker, State};
use cutout_dashboard::{Source, router};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// How long the page may take to show a change (polled, never asserted as a time).
const SHOW: Duration = Duration::from_secs(5);

/// chromedriver, ended when dropped.
/// chromedriver, and the profile of the browser it starts: on drop (a test that
/// failed before its session's `DELETE` included) it is killed, and so is any
/// browser still running on that profile, which is then removed.
struct Driver(Child, PathBuf);

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        // The profile's path is this test process's own: only its browser has it.
        let _ = Command::new("pkill")
            .args(["-KILL", "-f"])
            .arg(&self.1)
            .status();
        let _ = std::fs::remove_dir_all(&self.1);
    }
}

/// A WebDriver session over plain HTTP on loopback.
struct Session {
    driver: SocketAddr,
    id: String,
}

async fn wd(driver: SocketAddr, method: &str, path: &str, body: Option<Value>) -> Value {
    let stream = TcpStream::connect(driver).await.unwrap();
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(conn);
    let body = body.map_or_else(String::new, |b| b.to_string());
    let request = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("host", driver.to_string())
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .unwrap();
    let reply = async {
        let response = sender.send_request(request).await.unwrap();
        response.into_body().collect().await.unwrap().to_bytes()
    };
    let bytes = tokio::time::timeout(Duration::from_secs(30), reply)
        .await
        .expect("chromedriver did not answer in time");
    let value: Value = serde_json::from_slice(&bytes).unwrap();
    value["value"].clone()
}

impl Session {
    async fn cmd(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let value = wd(
            self.driver,
            method,
            &format!("/session/{}{path}", self.id),
            body,
        )
        .await;
        assert!(value.get("error").is_none(), "{path}: {value}");
        value
    }

    async fn run(&self, script: &str) -> Value {
        self.cmd(
            "POST",
            "/execute/sync",
            Some(json!({"script": script, "args": []})),
        )
        .await
    }

    /// Polls `script` until it returns `want`, for at most `SHOW`.
    async fn until(&self, script: &str, want: &str) {
        let deadline = tokio::time::Instant::now() + SHOW;
        loop {
            let got = self.run(script).await;
            if got == want {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "wanted {want:?}, the page shows {got}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Standard base64, for the screenshot.
fn base64(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        _ => 63,
    };
    let digits: Vec<u8> = text
        .bytes()
        .filter(|&c| c != b'=' && !c.is_ascii_whitespace())
        .map(value)
        .collect();
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for chunk in digits.chunks(4) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &d)| n | (d as u32) << (18 - 6 * i));
        out.extend_from_slice(&n.to_be_bytes()[1..chunk.len()]);
    }
    out
}

/// A whole PNG: the signature, an image header with a size, and the end chunk
/// last.
fn assert_png(png: &[u8]) {
    assert!(png.len() > 8 + 25 + 12, "{} bytes", png.len());
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "the PNG signature");
    assert_eq!(&png[12..16], b"IHDR", "the image header first");
    let width = u32::from_be_bytes(png[16..20].try_into().unwrap());
    let height = u32::from_be_bytes(png[20..24].try_into().unwrap());
    assert!(width > 0 && height > 0, "{width}x{height}");
    assert_eq!(
        &png[png.len() - 8..png.len() - 4],
        b"IEND",
        "the end chunk last"
    );
}

/// The state shown on the dashboard's card for `name`, or "" without one.
fn card_state(name: &str) -> String {
    format!(
        "for (const c of document.querySelectorAll('.breaker')) \
           if (c.querySelector('.name').textContent === {name}) \
             return c.querySelector('.state').textContent; \
         return '';",
        name = json!(name)
    )
}

fn click(name: &str, action: &str) -> String {
    format!(
        "for (const c of document.querySelectorAll('.breaker')) \
           if (c.querySelector('.name').textContent === {name}) \
             c.querySelector('button[data-action={action}]').click(); \
         return null;",
        name = json!(name)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_trips_resets_and_hostile_keys_as_text() {
    if !Path::new(CHROMIUM).exists() || !Path::new(CHROMEDRIVER).exists() {
        let message = format!(
            "{CHROMIUM} or {CHROMEDRIVER} missing (apt-get install chromium chromium-driver)"
        );
        assert!(
            std::env::var("CUTOUT_DASHBOARD_REQUIRE_BROWSER").as_deref() != Ok("1"),
            "{message}"
        );
        eprintln!("skipped: {message}");
        return;
    }
    let playground = sim::Playground::new();
    playground.start();
    let site = common::serve(sim::app(playground)).await;

    let port = free_port();
    let profile =
        std::env::temp_dir().join(format!("cutout-dashboard-chromium-{}", std::process::id()));
    let _driver = Driver(
        Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
        profile.clone(),
    );
    let driver: SocketAddr = ([127, 0, 0, 1], port).into();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(driver).await.is_err() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "chromedriver did not start"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let capabilities = json!({"capabilities": {"alwaysMatch": {
        "browserName": "chrome",
        "goog:chromeOptions": {"binary": CHROMIUM, "args": [
            "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--no-first-run", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--window-size=900,480",
            format!("--user-data-dir={}", profile.display()),
        ]},
    }}});
    let created = wd(driver, "POST", "/session", Some(capabilities)).await;
    let id = created["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("no session: {created}"));
    let session = Session {
        driver,
        id: id.to_owned(),
    };

    // The playground with its defaults: the failure slider at 100% trips the breaker.
    let url = format!("http://{site}/");
    session.cmd("POST", "/url", Some(json!({"url": url}))).await;
    session
        .until(
            "return document.getElementById('state').textContent;",
            "Closed",
        )
        .await;
    session
        .run(
            "const s = document.getElementById('failure'); s.value = 100; \
              s.dispatchEvent(new Event('input')); return null;",
        )
        .await;
    session
        .until(
            "return document.getElementById('state').textContent;",
            "Open",
        )
        .await;

    // The dashboard shows it too, and the hostile key as its characters.
    let url = format!("http://{site}/dashboard");
    session.cmd("POST", "/url", Some(json!({"url": url}))).await;
    session.until(&card_state("downstream"), "Open").await;
    session.until(&card_state(sim::HOSTILE), "Closed").await;
    let scripts = session
        .run("return document.querySelectorAll('script').length;")
        .await;
    assert_eq!(scripts, 1, "only the page's own script element");
    let names = session
        .run("return [...document.querySelectorAll('.name')].map(n => n.textContent + '|' + n.children.length);")
        .await;
    assert!(
        names
            .as_array()
            .unwrap()
            .contains(&json!(format!("{}|0", sim::HOSTILE))),
        "{names}"
    );
    // The downstream breaker's what-if candidate, in its card's table.
    let candidate = session
        .run(
            "for (const c of document.querySelectorAll('.breaker')) \
               if (c.querySelector('.name').textContent === 'downstream') \
                 return [...c.querySelectorAll('.candidates td:first-child')].map(t => t.textContent); \
             return null;",
        )
        .await;
    assert_eq!(candidate, json!([sim::CANDIDATE]));
    let png = session.cmd("GET", "/screenshot", None).await;
    let png = base64(png.as_str().unwrap());
    assert_png(&png);
    let saved = if std::env::var("CUTOUT_DASHBOARD_SCREENSHOT").as_deref() == Ok("1") {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/dashboard.png")
    } else {
        Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard.png")
    };
    std::fs::write(&saved, &png).unwrap();
    eprintln!("screenshot: {}", saved.display());

    // The dependency heals; force open then reset through the page's controls.
    session
        .run("fetch('/api/settings?failure=0', {method: 'POST'}); return null;")
        .await;
    session.run(&click("downstream", "force_open")).await;
    session
        .until(&card_state("downstream"), "Forced open")
        .await;
    session.run(&click("downstream", "reset")).await;
    session.until(&card_state("downstream"), "Closed").await;

    // Two breakers of one name (two registries' keys) get a card each: the
    // healthy one does not hide its forced-open twin, and its controls act on
    // it alone.
    let open = Arc::new(CircuitBreaker::builder().build().unwrap());
    open.force_open();
    let closed = Arc::new(CircuitBreaker::builder().build().unwrap());
    let twins = (Source::new().breaker("twin", open.clone()))
        .breaker("twin", closed.clone())
        .controls(true);
    let twins = common::serve(axum::Router::new().nest("/breakers", router(twins))).await;
    let url = format!("http://{twins}/breakers");
    session.cmd("POST", "/url", Some(json!({"url": url}))).await;
    let states =
        "return [...document.querySelectorAll('.breaker .state')].map(s => s.textContent).join();";
    session.until(states, "Forced open,Closed").await;
    session
        .run(
            "document.querySelectorAll('.breaker')[1]\
               .querySelector('button[data-action=disable]').click(); return null;",
        )
        .await;
    session.until(states, "Forced open,Disabled").await;
    assert_eq!(
        (open.state(), closed.state()),
        (State::ForcedOpen, State::Disabled)
    );

    // A refused control (here the server's answer is stood in for: the breaker
    // went) stays shown when the next frame rewrites the summary.
    session
        .run(
            "window.fetch = async () => new Response('no breaker by that id', {status: 404}); \
             document.getElementById('summary').textContent = 'stale'; \
             document.querySelectorAll('.breaker')[0]\
               .querySelector('button[data-action=reset]').click(); return null;",
        )
        .await;
    session
        .until(
            "const summary = document.getElementById('summary').textContent; \
             return summary === 'stale' ? summary : document.getElementById('error').textContent;",
            "reset of twin failed: 404 no breaker by that id",
        )
        .await;
    assert_eq!(open.state(), State::ForcedOpen);

    session.cmd("DELETE", "", None).await;
}
