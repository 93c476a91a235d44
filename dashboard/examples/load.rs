//! The dashboard under load: 10,000 breakers (some open, all taking calls, one
//! forced open and reset over and over, each transition pushed by the source's
//! listener) and 100 open event streams, while a script asks for the JSON
//! snapshot. Prints the snapshot's round trip, the frames each stream received,
//! and the process's resident memory.
//!
//! `cargo run --release -p cutout-dashboard --example load`

#[path = "../tests/common/mod.rs"]
mod common;

use cutout::{CircuitBreaker, Registry};
use http_body_util::BodyExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

const BREAKERS: usize = 10_000;
const STREAMS: usize = 100;
const SECONDS: u64 = 10;

fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

#[tokio::main]
async fn main() {
    let source = cutout_dashboard::Source::new();
    let registry: Arc<Registry<String>> = Arc::new(
        Registry::builder(CircuitBreaker::builder().failure_rate(0.5, 10))
            .on_transition(source.registry_listener())
            .build()
            .expect("valid settings"),
    );
    for i in 0..BREAKERS {
        let breaker = registry.get(&format!("service-{i:05}"));
        if i.is_multiple_of(100) {
            breaker.force_open();
        }
    }
    // Traffic on every breaker from one thread (about 100,000 calls a second), a
    // tenth of it failing.
    let stop = Arc::new(AtomicBool::new(false));
    let traffic = {
        let (registry, stop) = (registry.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n = 0u64;
            // Relaxed: a stop flag, read once per call.
            while !stop.load(Ordering::Relaxed) {
                let key = format!("service-{:05}", n % BREAKERS as u64);
                let _ = registry.call(&key, || {
                    if n.is_multiple_of(10) {
                        Err(())
                    } else {
                        Ok(())
                    }
                });
                n += 1;
                // About 100,000 calls a second, leaving the server its share.
                if n.is_multiple_of(1_000) {
                    std::thread::sleep(Duration::from_millis(10));
                }
                // Two transitions every 10,000 calls (about 20 a second), each
                // pushed to the streams.
                match n % 10_000 {
                    0 => registry.get("service-00001").reset(),
                    5_000 => registry.get("service-00001").force_open(),
                    _ => {}
                }
            }
        })
    };
    let source = source.registry(registry.clone());
    let addr =
        common::serve(axum::Router::new().nest("/d", cutout_dashboard::router(source))).await;
    common::get(addr, "/d/api/snapshot").await;
    let before = rss_mib();

    let frames = Arc::new(AtomicU64::new(0));
    for i in 0..STREAMS {
        let frames = frames.clone();
        let path = format!("/d/api/stream?page={}", i % 5);
        tokio::spawn(async move {
            let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
            let io = hyper_util::rt::TokioIo::new(stream);
            let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
            tokio::spawn(conn);
            let request = hyper::Request::get(path)
                .header("host", addr.to_string())
                .body(http_body_util::Empty::<hyper::body::Bytes>::new())
                .unwrap();
            let mut body = sender.send_request(request).await.unwrap().into_body();
            while let Some(Ok(frame)) = body.frame().await {
                if let Ok(data) = frame.into_data() {
                    let events = data.windows(12).filter(|w| w == b"event: frame").count();
                    // Relaxed: a count, read at the end.
                    frames.fetch_add(events as u64, Ordering::Relaxed);
                }
            }
        });
    }

    let mut trips = Vec::new();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(SECONDS) {
        let t = Instant::now();
        let reply = common::get(addr, "/d/api/snapshot?q=service-0&per_page=50").await;
        assert_eq!(reply.status, 200);
        trips.push(t.elapsed());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let during = rss_mib();
    // Relaxed: a stop flag; the join below waits for the thread.
    stop.store(true, Ordering::Relaxed);
    traffic.join().unwrap();
    trips.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    // Relaxed: a count, read once; a late increment does not matter.
    let received = frames.load(Ordering::Relaxed) as f64;
    println!("{BREAKERS} breakers, {STREAMS} streams, {SECONDS} s, traffic on every breaker");
    println!(
        "snapshot round trip: median {:.1} ms, 99th percentile {:.1} ms, max {:.1} ms ({} requests)",
        ms(trips[trips.len() / 2]),
        ms(trips[trips.len() * 99 / 100]),
        ms(trips[trips.len() - 1]),
        trips.len()
    );
    println!(
        "frames per stream per second: {:.2} (4 ticks a second, and pushed transitions at most one per {:?})",
        received / STREAMS as f64 / SECONDS as f64,
        cutout_dashboard::PUSH_GAP
    );
    println!("resident memory: {before:.0} MiB before the streams, {during:.0} MiB with them");
}
