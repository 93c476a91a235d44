//! A `redis-server` on a free loopback port in a temporary directory, fleet
//! instances as child processes driven over stdin, simulated peers, and the
//! settings the in-process tests share. Every wait is bounded.

#![allow(dead_code)]

use cutout::{CircuitBreaker, State};
use cutout_fleet::{Fleet, FleetConfig, Heartbeat, Message, OpenEntry, Report};
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant, SystemTime};

/// Whether a `redis-server` is installed. When it is not, the tests that need one
/// print why and pass, unless `CUTOUT_FLEET_REQUIRE_REDIS` is set (CI sets it,
/// after installing the server).
pub fn redis_available() -> bool {
    let found = Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        assert!(
            std::env::var_os("CUTOUT_FLEET_REQUIRE_REDIS").is_none(),
            "redis-server is required (CUTOUT_FLEET_REQUIRE_REDIS is set) but not installed"
        );
        eprintln!("skipped: redis-server is not installed (apt-get install -y redis-server)");
    }
    found
}

pub struct Redis {
    pub port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
    /// With a password (`requirepass`) and an ACL user, if secured.
    secured: Option<Secured>,
}

/// A secured server's credentials: the default user's password, and an ACL
/// user limited to one namespace's keys and channel.
#[derive(Clone)]
pub struct Secured {
    pub password: String,
    pub user: String,
    pub user_password: String,
    pub namespace: String,
}

impl Redis {
    pub fn start() -> Redis {
        Redis::start_with(None)
    }

    /// A server that asks for a password (`--requirepass`), with an ACL user
    /// (`fleet`) that may use namespace `ns`'s keys and channel only.
    pub fn start_secured(ns: &str) -> Redis {
        Redis::start_with(Some(Secured {
            password: "admin-secret".into(),
            user: "fleet".into(),
            user_password: "fleet-secret".into(),
            namespace: ns.into(),
        }))
    }

    /// Starts a server on a free port. A port found free can be taken again
    /// before the server binds it (another test's server, or a connection's
    /// local port): the server then exits, and another port is tried.
    fn start_with(secured: Option<Secured>) -> Redis {
        let mut redis = Redis {
            port: 0,
            dir: tempfile::tempdir().expect("a temporary directory"),
            child: None,
            secured,
        };
        for _ in 0..5 {
            redis.port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map(|a| a.port())
                .expect("a free port");
            if redis.spawn() {
                return redis;
            }
        }
        panic!("redis-server did not start on any of five free ports");
    }

    pub fn secured(&self) -> Option<&Secured> {
        self.secured.as_ref()
    }

    /// The URL, with the default user's password if the server asks for one.
    pub fn url(&self) -> String {
        match &self.secured {
            Some(s) => format!("redis://:{}@127.0.0.1:{}/", s.password, self.port),
            None => self.url_without_auth(),
        }
    }

    /// The URL, without credentials.
    pub fn url_without_auth(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// A connection of the test's own (2 s to connect).
    pub fn connect(&self) -> redis::Connection {
        let client = redis::Client::open(self.url()).unwrap();
        client
            .get_connection_with_timeout(Duration::from_secs(2))
            .unwrap()
    }

    /// Starts the server again, on the same port, and waits until it answers.
    pub fn restart(&mut self) {
        assert!(self.spawn(), "redis-server did not start again on its port");
    }

    /// Spawns the server on `self.port` and waits (10 s at most) until this
    /// server, not another process on the port, answers; false if it exited
    /// first (its port was taken).
    fn spawn(&mut self) -> bool {
        let mut command = Command::new("redis-server");
        command
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .arg("--dir")
            .arg(self.dir.path());
        if let Some(s) = &self.secured {
            // The ACL user: on, its password, the namespace's keys (`~`) and
            // channel (`&`), every command.
            let ns = &s.namespace;
            command.args(["--requirepass", &s.password]);
            command.args(["--user", &s.user, "on", &format!(">{}", s.user_password)]);
            command.args([&format!("~{ns}:*"), &format!("&{ns}:*"), "+@all"]);
        }
        let mut child = command
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if child.try_wait().expect("redis-server's status").is_some() {
                return false;
            }
            if self.answering_pid() == Some(child.id()) {
                self.child = Some(child);
                return true;
            }
            if Instant::now() >= deadline {
                let _ = child.kill(); // not left running on its port
                let _ = child.wait();
                panic!("redis-server did not answer within 10 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The process id of the server answering on the port (`INFO server`),
    /// if one answers: a connection that reached no server (refused, or a
    /// socket connected to itself) gives none.
    fn answering_pid(&self) -> Option<u32> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        if let Some(s) = &self.secured {
            write!(stream, "AUTH {}\r\n", s.password).ok()?;
        }
        stream.write_all(b"INFO server\r\n").ok()?;
        BufReader::new(stream)
            .lines()
            .map_while(Result::ok)
            .find_map(|line| line.strip_prefix("process_id:")?.trim().parse().ok())
    }

    /// Kills the server (SIGKILL: no goodbye to its clients).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Polls `f` every 5 ms until it holds; panics naming `what` past `limit`.
pub fn wait_for(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !f() {
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Polls `f` every 5 ms until it holds or `limit` passes; whether it held.
pub fn within(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The fleet instance `id` of namespace `ns` (quorum 2 by default): heartbeats
/// every 100 ms, peers live for 1 s after their last one, a join wait of 2 s.
pub fn config(redis: &Redis, ns: &str, id: &str) -> FleetConfig {
    FleetConfig::new(redis.url())
        .namespace(ns.to_string())
        .instance_id(id)
        .heartbeat_every(Duration::from_millis(100))
        .live_after(Duration::from_secs(1))
        .join_wait(Duration::from_secs(2))
}

/// A fleet that reaches no Redis (port 9, discard) and waits for none: its
/// overrides act here only, at once.
pub fn offline() -> Fleet {
    Fleet::start(FleetConfig::new("redis://127.0.0.1:9/").join_wait(Duration::ZERO)).unwrap()
}

/// Issues `fleet`'s override of `key` in `mode` (force open or disable) for
/// `duration`.
pub fn issue(
    fleet: &Fleet,
    key: &str,
    mode: cutout_fleet::OverrideMode,
    duration: Duration,
) -> Result<(), cutout_fleet::FleetError> {
    match mode {
        cutout_fleet::OverrideMode::ForceOpen => fleet.force_open(key, duration),
        _ => fleet.disable(key, duration),
    }
}

/// A registry of [`builder`]'s breakers whose new keys start from `fleet`'s
/// picture (its initial-state hook), attached to it.
pub fn hooked_registry(fleet: &Fleet) -> std::sync::Arc<cutout::Registry<String>> {
    let registry = cutout::Registry::builder(builder())
        .initial_state(fleet.initial_state())
        .build()
        .unwrap();
    let registry = std::sync::Arc::new(registry);
    fleet.attach_registry(&registry);
    registry
}

/// Opens on the first failure, for 30 s: only a quorum or its own call moves it.
pub fn builder() -> cutout::Builder<cutout::DefaultClock> {
    CircuitBreaker::builder()
        .consecutive_failures(1)
        .open_duration(Duration::from_secs(30))
}

/// The keys, with their generations, that instance `id`'s heartbeat key (what
/// joiners read) lists Open.
pub fn heartbeat_lists(redis: &Redis, ns: &str, id: &str) -> Vec<(String, u32)> {
    let mut con = redis.connect();
    let bytes: Option<Vec<u8>> = redis::cmd("GET")
        .arg(format!("{ns}:hb:{id}"))
        .query(&mut con)
        .unwrap();
    match bytes.map(|b| Message::decode(&b, SystemTime::now(), Duration::from_secs(600))) {
        Some(Ok(Message::Heartbeat(h))) => {
            h.open.into_iter().map(|e| (e.key, e.generation)).collect()
        }
        _ => Vec::new(),
    }
}

/// A namespace no other test uses.
pub fn namespace(test: &str) -> String {
    format!("t-{test}-{}", std::process::id())
}

/// The environment variable that makes a test binary's `node` test run an
/// instance, with these arguments, one a line.
pub const NODE_ARGS: &str = "CUTOUT_FLEET_NODE";

pub struct Node {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    /// The first line: `ready STATE SYNCED`.
    pub ready: String,
}

impl Node {
    /// An instance in a child process: this test binary again, running only its
    /// `node` test, which runs the instance with the arguments in
    /// `CUTOUT_FLEET_NODE` (see `tests/node`). So the instance is no installable
    /// binary, and always the one built with the test.
    pub fn spawn(redis_url: &str, ns: &str, id: &str, extra: &[&str]) -> Node {
        let args: Vec<&str> = ["--url", redis_url, "--ns", ns, "--id", id]
            .into_iter()
            .chain(extra.iter().copied())
            .collect();
        let exe = std::env::current_exe().expect("the test binary's path");
        let mut child = Command::new(exe)
            .args(["node", "--exact", "--include-ignored", "--nocapture"])
            .args(["--test-threads", "1", "--quiet"])
            .env(NODE_ARGS, args.join("\n"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the node binary starts");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        // The test harness's own lines come first.
        let deadline = Instant::now() + Duration::from_secs(10);
        let ready = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = lines
                .recv_timeout(left)
                .expect("the node is ready within 10 s");
            if line.starts_with("ready ") || line.starts_with("error ") {
                break line;
            }
        };
        Node {
            child,
            stdin,
            lines,
            ready,
        }
    }

    /// Sends `command` and returns its one-line answer (within `limit`).
    pub fn ask(&mut self, command: &str, limit: Duration) -> String {
        writeln!(self.stdin, "{command}").expect("the node reads commands");
        self.stdin.flush().expect("flush");
        self.lines
            .recv_timeout(limit)
            .unwrap_or_else(|_| panic!("no answer to `{command}` within {limit:?}"))
    }

    pub fn state(&mut self) -> String {
        self.ask("state", Duration::from_secs(5))
    }

    /// Waits (in the node) until `n` peers are live; panics past `ms`.
    pub fn await_live(&mut self, n: usize, ms: u64) {
        let answer = self.ask(&format!("live {n} {ms}"), Duration::from_millis(ms + 5_000));
        assert_eq!(answer, format!("live {n}"), "peers did not become live");
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "quit");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A simulated peer: writes its heartbeat key and publishes on the channel,
/// signing its messages if given a key.
pub struct Peer {
    id: String,
    ns: String,
    con: redis::Connection,
    key: Option<Vec<u8>>,
}

impl Peer {
    pub fn new(redis: &Redis, ns: &str, id: &str) -> Peer {
        Peer {
            id: id.into(),
            ns: ns.into(),
            con: redis.connect(),
            key: None,
        }
    }

    /// Signs its messages with `key` from now on.
    pub fn signed(mut self, key: &[u8]) -> Peer {
        self.key = Some(key.to_vec());
        self
    }

    fn encode(&self, message: Message) -> Vec<u8> {
        match &self.key {
            Some(key) => message.encode_signed(key, &self.ns),
            None => message.encode(),
        }
    }

    /// A heartbeat listing `open` (key, until, generation), sent now.
    pub fn heartbeat(&mut self, open: &[(&str, SystemTime, u32)]) {
        let bytes = self.encode(Message::Heartbeat(Heartbeat {
            instance: self.id.clone(),
            sent_at: SystemTime::now(),
            open: open
                .iter()
                .map(|(k, until, generation)| OpenEntry {
                    key: (*k).into(),
                    until: *until,
                    generation: *generation,
                    level: 0,
                    external: false,
                })
                .collect(),
            more: false,
            overrides: Vec::new(),
        }));
        let key = format!("{}:hb:{}", self.ns, self.id);
        let _: () = redis::cmd("SET")
            .arg(&key)
            .arg(&bytes)
            .arg("PX")
            .arg(10_000)
            .query(&mut self.con)
            .unwrap();
        self.publish(bytes);
    }

    /// A transition of this peer's breaker for `key`.
    pub fn transition(
        &mut self,
        key: &str,
        state: State,
        until: Option<SystemTime>,
        generation: u32,
    ) {
        let bytes = self.encode(Message::Transition(Report {
            key: key.into(),
            instance: self.id.clone(),
            generation,
            state,
            open_until: until,
            level: 0,
            reason: "consecutive_failures".into(),
            sent_at: None,
        }));
        self.publish(bytes);
    }

    pub fn publish(&mut self, bytes: Vec<u8>) {
        let _: i64 = redis::cmd("PUBLISH")
            .arg(format!("{}:events", self.ns))
            .arg(bytes)
            .query(&mut self.con)
            .unwrap();
    }
}
