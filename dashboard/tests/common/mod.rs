//! Loopback helpers: serve a router on a free port, send one request, read a
//! server-sent event; every wait bounded.
#![allow(dead_code)]

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};

/// The longest any single wait in these tests lasts.
pub const WAIT: Duration = Duration::from_secs(10);

pub async fn serve(app: axum::Router) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

pub struct Reply {
    pub status: u16,
    pub headers: hyper::HeaderMap,
    pub body: String,
}

impl Reply {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap()
    }
}

async fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> hyper::Response<hyper::body::Incoming> {
    let stream = TcpStream::connect(addr).await.unwrap();
    let io = hyper_util::rt::TokioIo::new(stream);
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
    tokio::spawn(conn);
    let mut request = hyper::Request::builder().method(method).uri(path);
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        request = request.header("host", addr.to_string());
    }
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let request = request.body(Empty::<Bytes>::new()).unwrap();
    tokio::time::timeout(WAIT, sender.send_request(request))
        .await
        .expect("no answer in time")
        .unwrap()
}

/// The status line of the answer to `raw`, a whole HTTP/1.1 request as bytes
/// (for a header no client library would send).
pub async fn raw_status(addr: SocketAddr, raw: &[u8]) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(raw).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(WAIT, stream.read_to_end(&mut answer))
        .await
        .expect("no answer in time")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    answer.lines().next().unwrap_or("").to_owned()
}

pub async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> Reply {
    let response = send(addr, method, path, headers).await;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = tokio::time::timeout(WAIT, response.into_body().collect())
        .await
        .expect("no body in time")
        .unwrap()
        .to_bytes();
    Reply {
        status,
        headers,
        body: String::from_utf8(body.to_vec()).unwrap(),
    }
}

/// The status of a `GET` of `path`, its body left unread (an event stream's
/// never ends) and dropped with the connection.
pub async fn status(addr: SocketAddr, path: &str) -> u16 {
    send(addr, "GET", path, &[]).await.status().as_u16()
}

pub async fn get(addr: SocketAddr, path: &str) -> Reply {
    request(addr, "GET", path, &[]).await
}

/// An open event stream, read one `frame` event at a time.
pub struct Stream {
    body: hyper::body::Incoming,
    text: String,
}

impl Stream {
    pub async fn open(addr: SocketAddr, path: &str) -> Stream {
        let response = send(addr, "GET", path, &[]).await;
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        Stream {
            body: response.into_body(),
            text: String::new(),
        }
    }

    /// The next `frame` event's data, within [`WAIT`].
    pub async fn next(&mut self) -> serde_json::Value {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            while let Some(end) = self.text.find("\n\n") {
                let event: String = self.text.drain(..end + 2).collect();
                if let Some(data) = event.lines().find_map(|l| l.strip_prefix("data: ")) {
                    return serde_json::from_str(data).unwrap();
                }
            }
            let frame = tokio::time::timeout_at(deadline, self.body.frame())
                .await
                .expect("no event in time")
                .expect("stream ended")
                .unwrap();
            if let Ok(data) = frame.into_data() {
                self.text.push_str(std::str::from_utf8(&data).unwrap());
            }
        }
    }
}

/// The first `frame` event of the stream at `path` for which `accept` holds,
/// within [`WAIT`].
pub async fn stream_until(
    addr: SocketAddr,
    path: &str,
    mut accept: impl FnMut(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let mut stream = Stream::open(addr, path).await;
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let value = tokio::time::timeout_at(deadline, stream.next())
            .await
            .expect("no matching event in time");
        if accept(&value) {
            return value;
        }
    }
}

/// Polls `api/snapshot` under `prefix` until `accept` holds, within [`WAIT`].
pub async fn snapshot_until(
    addr: SocketAddr,
    path: &str,
    mut accept: impl FnMut(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let value = get(addr, path).await.json();
        if accept(&value) {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not seen in time: {value}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
