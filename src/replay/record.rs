//! [`Recorder`]: calls written to a trace file as they end, by a background
//! thread, through a bounded queue that never blocks the caller.

use super::trace::{Call, write_csv_row, write_json_line};
use crate::Outcome;
use std::fmt;
use std::io::{self, Write};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::time::{Duration, Instant};

/// What the writer thread is sent.
enum Message {
    Call(Call),
    /// Write out what is buffered, then answer.
    Flush(mpsc::Sender<io::Result<()>>),
}

/// Records calls to a trace (CSV, or JSON lines for a path ending in `.jsonl`)
/// that [`Trace::from_csv`](super::Trace::from_csv) /
/// [`Trace::from_json_lines`](super::Trace::from_json_lines) read back: each call's
/// end time (from the recorder's creation), latency, outcome and optional key.
///
/// [`record`](Self::record) never blocks: it hands the call to a bounded queue
/// that a background thread drains into the file. A call that finds the queue
/// full is dropped and counted by [`dropped`](Self::dropped); a write error stops
/// the writer, and every later call counts as dropped. Clones share the queue,
/// the file and the counts; the writer ends when the last clone is gone, after
/// writing what it was handed. A key in CSV has its commas, quotes and line
/// breaks replaced by `_`.
///
/// In a `fork()`ed child the writer thread is gone (only the forking thread
/// survives a fork): a recorder made before the fork counts the child's calls
/// as dropped and its `flush` returns an error, rather than waiting for ever
/// (where the crate's fork handler runs: Linux, Android, macOS, the BSDs and
/// Solaris).
///
/// The integrations record through one: `record(recorder)` on the tower
/// layer, the http layers and the reqwest middleware writes each call their
/// breaker admitted, as their classifier judged it; `replay::RecordLayer` (with
/// the `tower` feature) records the calls that reach a service with no breaker.
///
/// # Examples
/// ```
/// use cutout::Outcome;
/// use cutout::replay::{Recorder, Trace};
/// use std::time::Duration;
///
/// let path = std::env::temp_dir().join(format!("recorder-doc-{}.csv", std::process::id()));
/// let recorder = Recorder::to_file(&path, 1024)?;
/// recorder.record(Duration::from_millis(20), Outcome::Success, None);
/// recorder.record(Duration::from_millis(500), Outcome::Failure, Some("db"));
/// recorder.flush()?;
/// let trace = Trace::from_csv(std::fs::File::open(&path)?)?;
/// assert_eq!(trace.calls().len() as u64 + recorder.dropped(), 2);
/// # std::fs::remove_file(&path)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Recorder {
    queue: SyncSender<Message>,
    shared: Arc<Shared>,
    /// The forks this process was a child of when the writer started: under
    /// a later count, the writer is in another process.
    forks: u64,
}

struct Shared {
    start: Instant,
    dropped: AtomicU64,
    written: AtomicU64,
}

impl fmt::Debug for Recorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Recorder")
            .field("written", &self.written())
            .field("dropped", &self.dropped())
            .finish_non_exhaustive()
    }
}

impl Recorder {
    /// A recorder writing to the file at `path` (created, or truncated), as JSON
    /// lines if its name ends in `.jsonl`, as CSV otherwise; up to `capacity`
    /// calls wait in the queue (at least 1).
    ///
    /// # Errors
    /// The file cannot be created, or the writer thread cannot be started.
    ///
    /// # Examples
    /// ```
    /// let dir = std::env::temp_dir().join("no/such/folder/at/all");
    /// assert!(cutout::replay::Recorder::to_file(dir.join("t.csv"), 16).is_err());
    /// ```
    pub fn to_file(path: impl AsRef<Path>, capacity: usize) -> io::Result<Recorder> {
        let path = path.as_ref();
        let json = path.extension().is_some_and(|e| e == "jsonl");
        let file = std::fs::File::create(path)?;
        Recorder::to_writer(io::BufWriter::new(file), json, capacity)
    }

    /// A recorder writing to `writer`, as JSON lines if `json_lines`, as CSV
    /// otherwise; up to `capacity` calls wait in the queue (at least 1).
    ///
    /// # Errors
    /// The writer thread cannot be started.
    ///
    /// # Examples
    /// ```
    /// let recorder = cutout::replay::Recorder::to_writer(std::io::sink(), false, 64)?;
    /// recorder.record(std::time::Duration::ZERO, cutout::Outcome::Ignored, None);
    /// recorder.flush()?;
    /// assert_eq!(recorder.written() + recorder.dropped(), 1);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn to_writer(
        writer: impl Write + Send + 'static,
        json_lines: bool,
        capacity: usize,
    ) -> io::Result<Recorder> {
        // Before the writer starts: a fork after it is counted.
        crate::fork::register();
        let forks = crate::fork::forks();
        let (queue, rx) = mpsc::sync_channel(capacity.max(1));
        let shared = Arc::new(Shared {
            start: Instant::now(),
            dropped: AtomicU64::new(0),
            written: AtomicU64::new(0),
        });
        let writer_shared = shared.clone();
        std::thread::Builder::new()
            .name("cutout-recorder".into())
            .spawn(move || drain(rx, writer, json_lines, &writer_shared))?;
        Ok(Recorder {
            queue,
            shared,
            forks,
        })
    }

    /// Records a call that ends now, after running `latency`, never blocking.
    ///
    /// # Examples
    /// See [`Recorder`].
    pub fn record(&self, latency: Duration, outcome: Outcome, key: Option<&str>) {
        let at = self.shared.start.elapsed().max(latency);
        self.record_at(at, latency, outcome, key);
    }

    /// Records a call that ended at `at` (from the recorder's creation), never
    /// blocking; for callers that keep their own time. A latency longer than
    /// `at` is cut to `at` (the trace starts at zero).
    ///
    /// # Examples
    /// ```
    /// use cutout::{Outcome, replay::Recorder};
    /// use std::time::Duration;
    ///
    /// let recorder = Recorder::to_writer(std::io::sink(), true, 8)?;
    /// recorder.record_at(Duration::from_secs(2), Duration::from_millis(5), Outcome::Success, None);
    /// recorder.flush()?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn record_at(&self, at: Duration, latency: Duration, outcome: Outcome, key: Option<&str>) {
        if self.forked() {
            // Relaxed: a count, read on its own.
            self.shared.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let call = Call {
            at,
            latency: latency.min(at),
            outcome,
            key: key.map(str::to_owned),
        };
        match self.queue.try_send(Message::Call(call)) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                // Relaxed: a count, read on its own.
                self.shared.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Waits until every call recorded so far is written and the writer flushed
    /// (this one blocks; [`record`](Self::record) never does).
    ///
    /// # Errors
    /// The writer's error, or one saying the writer has stopped after an earlier
    /// error, or that it runs in the process this one was forked from.
    ///
    /// # Examples
    /// See [`Recorder`].
    pub fn flush(&self) -> io::Result<()> {
        if self.forked() {
            return Err(io::Error::other(
                "the recorder's writer runs in the process that forked this one",
            ));
        }
        let (tx, rx) = mpsc::channel();
        let stopped = || io::Error::other("the recorder's writer stopped after a write error");
        self.queue.send(Message::Flush(tx)).map_err(|_| stopped())?;
        rx.recv().map_err(|_| stopped())?
    }

    /// Whether this process is a `fork()`ed child of the one whose writer
    /// thread this recorder hands its calls to.
    fn forked(&self) -> bool {
        crate::fork::forks() != self.forks
    }

    /// Calls dropped: the queue was full, or the writer had stopped (or is in
    /// the process this one was forked from).
    ///
    /// # Examples
    /// See [`Recorder`].
    pub fn dropped(&self) -> u64 {
        // Relaxed: a count, read on its own.
        self.shared.dropped.load(Ordering::Relaxed)
    }

    /// Calls written so far.
    ///
    /// # Examples
    /// See [`Recorder::to_writer`].
    pub fn written(&self) -> u64 {
        // Relaxed: a count, read on its own.
        self.shared.written.load(Ordering::Relaxed)
    }
}

/// A call an integration admitted, timed from its start; [`finish`](Self::finish)
/// records it with the breaker's outcome. Boxed where it is held (8 bytes in a
/// future, `None` when its layer has no recorder).
#[cfg(any(all(feature = "http", feature = "registry"), feature = "reqwest"))]
pub(crate) struct Timed {
    recorder: Recorder,
    start: Instant,
    key: String,
}

#[cfg(any(all(feature = "http", feature = "registry"), feature = "reqwest"))]
impl Recorder {
    /// Starts timing a call to the dependency `key`.
    #[cold]
    pub(crate) fn start(&self, key: &str) -> Box<Timed> {
        Box::new(Timed {
            recorder: self.clone(),
            start: Instant::now(),
            key: key.to_owned(),
        })
    }
}

#[cfg(any(all(feature = "http", feature = "registry"), feature = "reqwest"))]
impl Timed {
    /// Records the call as ending now, with `outcome`; never blocks.
    #[cold]
    pub(crate) fn finish(self, outcome: Outcome) {
        self.recorder
            .record(self.start.elapsed(), outcome, Some(&self.key));
    }
}

/// The writer thread: a header for CSV, then each call as it comes. Stops at the
/// first write error (the queue's receiver is dropped, so later calls count as
/// dropped) or when every recorder is gone.
fn drain(rx: Receiver<Message>, mut w: impl Write, json: bool, shared: &Shared) {
    if !json && writeln!(w, "at_ms,latency_ms,outcome,key").is_err() {
        return;
    }
    for message in rx {
        match message {
            Message::Call(call) => {
                let call = sanitize(call, json);
                let written = if json {
                    write_json_line(&mut w, &call)
                } else {
                    write_csv_row(&mut w, &call, true)
                };
                if written.is_err() {
                    return;
                }
                // Relaxed: a count, read on its own.
                shared.written.fetch_add(1, Ordering::Relaxed);
            }
            Message::Flush(answer) => {
                let result = w.flush();
                let failed = result.is_err();
                let _ = answer.send(result);
                if failed {
                    return;
                }
            }
        }
    }
    let _ = w.flush();
}

/// A key CSV can hold: commas, quotes and line breaks become `_`.
fn sanitize(mut call: Call, json: bool) -> Call {
    if !json {
        call.key = call.key.map(|k| k.replace([',', '"', '\n', '\r'], "_"));
    }
    call
}
