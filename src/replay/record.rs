//! [`Recorder`]: calls written to a trace file as they end, by a background
//! thread, through a bounded queue that never blocks the caller.

use super::trace::{Call, write_csv_row, write_json_line};
use crate::Outcome;
use std::fmt;
use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the writer thread is sent.
enum Message {
    Call(Call),
    /// Write out what is buffered, then answer.
    Flush(mpsc::Sender<io::Result<()>>),
}

/// Records calls to a trace (CSV, or JSON lines for a path ending in `.jsonl` or
/// `.ndjson`)
/// that [`Trace::from_csv`](super::Trace::from_csv) /
/// [`Trace::from_json_lines`](super::Trace::from_json_lines) read back: each call's
/// end time (from the recorder's creation), latency, outcome and optional key.
///
/// [`record`](Self::record) never blocks: it hands the call to a bounded queue
/// that a background thread drains into the file, flushing it whenever the queue
/// is empty. Every call recorded is counted once, by [`written`](Self::written)
/// once a flush has taken it to the file or by [`dropped`](Self::dropped): it
/// found the queue full, or the writer had failed. A write or flush error stops
/// the writing: the calls since the last good flush count as dropped (some may
/// be in the file), and so does every later one. Clones share the queue, the
/// file and the counts. When the last clone is dropped, it waits (up to
/// [`DROP_WAIT`](Self::DROP_WAIT)) until the writer has written and flushed what
/// it was handed, so a program that drops its recorder before it exits loses
/// nothing. A key in CSV has its commas, quotes and line breaks replaced by `_`,
/// and spaces around it trimmed (an empty one is none).
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
    inner: Arc<Inner>,
}

/// What a recorder's clones share.
struct Inner {
    /// `None` only while the last clone is dropped.
    queue: Option<SyncSender<Message>>,
    shared: Arc<Shared>,
    /// The forks this process was a child of when the writer started: under
    /// a later count, the writer is in another process.
    forks: u64,
    /// Disconnected when the writer thread ends.
    ended: Mutex<Receiver<()>>,
}

impl Drop for Inner {
    /// Ends the queue, then waits (bounded) for the writer to write and flush
    /// what it holds; not in a forked child, whose writer is in the parent.
    fn drop(&mut self) {
        drop(self.queue.take());
        if crate::fork::forks() == self.forks {
            let ended = self.ended.get_mut().unwrap_or_else(|e| e.into_inner());
            let _ = ended.recv_timeout(Recorder::DROP_WAIT);
        }
    }
}

/// The counts the writer thread shares with the recorders.
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
    /// How long the last clone's drop waits for the writer to write what it was
    /// handed: 5 seconds.
    pub const DROP_WAIT: Duration = Duration::from_secs(5);

    /// The most calls that wait in a recorder's queue, whatever capacity is
    /// asked for: 65,536 (the queue's room is allocated when it is built, about
    /// 4 MiB at this size).
    pub const MAX_CAPACITY: usize = 1 << 16;

    /// A recorder writing to the file at `path` (created, or truncated), as JSON
    /// lines if its name ends in `.jsonl` or `.ndjson`, as CSV otherwise; up to
    /// `capacity` calls wait in the queue (at least 1, at most
    /// [`MAX_CAPACITY`](Self::MAX_CAPACITY)).
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
        let json = path
            .extension()
            .is_some_and(|e| e == "jsonl" || e == "ndjson");
        let file = std::fs::File::create(path)?;
        Recorder::to_writer(io::BufWriter::new(file), json, capacity)
    }

    /// A recorder writing to `writer`, as JSON lines if `json_lines`, as CSV
    /// otherwise; up to `capacity` calls wait in the queue (at least 1, at most
    /// [`MAX_CAPACITY`](Self::MAX_CAPACITY)).
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
        let (queue, rx) = mpsc::sync_channel(capacity.clamp(1, Recorder::MAX_CAPACITY));
        let shared = Arc::new(Shared {
            start: Instant::now(),
            dropped: AtomicU64::new(0),
            written: AtomicU64::new(0),
        });
        let writer_shared = shared.clone();
        let (ending, ended) = mpsc::channel();
        std::thread::Builder::new()
            .name("cutout-recorder".into())
            .spawn(move || {
                drain(rx, writer, json_lines, &writer_shared);
                drop(ending);
            })?;
        Ok(Recorder {
            inner: Arc::new(Inner {
                queue: Some(queue),
                shared,
                forks,
                ended: Mutex::new(ended),
            }),
        })
    }

    /// Records a call that ends now, after running `latency`, never blocking.
    ///
    /// # Examples
    /// See [`Recorder`].
    pub fn record(&self, latency: Duration, outcome: Outcome, key: Option<&str>) {
        let at = self.inner.shared.start.elapsed().max(latency);
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
        let dropped = || {
            // Relaxed: a count, read on its own.
            self.inner.shared.dropped.fetch_add(1, Ordering::Relaxed);
        };
        let Some(queue) = self.queue() else {
            return dropped();
        };
        let call = Call {
            at,
            latency: latency.min(at),
            outcome,
            key: key.map(str::to_owned),
        };
        match queue.try_send(Message::Call(call)) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => dropped(),
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
        let Some(queue) = self.queue() else {
            return Err(io::Error::other(
                "the recorder's writer runs in the process that forked this one",
            ));
        };
        let (tx, rx) = mpsc::channel();
        let ended = || io::Error::other("the recorder's writer thread has ended");
        queue.send(Message::Flush(tx)).map_err(|_| ended())?;
        rx.recv().map_err(|_| ended())?
    }

    /// The writer's queue; `None` in a `fork()`ed child of the process whose
    /// writer thread it leads to.
    fn queue(&self) -> Option<&SyncSender<Message>> {
        let inner = &*self.inner;
        (crate::fork::forks() == inner.forks).then_some(inner.queue.as_ref()?)
    }

    /// Calls dropped: the queue was full, or the writer had stopped (or is in
    /// the process this one was forked from).
    ///
    /// # Examples
    /// See [`Recorder`].
    pub fn dropped(&self) -> u64 {
        // Relaxed: a count, read on its own.
        self.inner.shared.dropped.load(Ordering::Relaxed)
    }

    /// Calls written so far: taken to the file by a flush that succeeded.
    ///
    /// # Examples
    /// See [`Recorder::to_writer`].
    pub fn written(&self) -> u64 {
        // Relaxed: a count, read on its own.
        self.inner.shared.written.load(Ordering::Relaxed)
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

/// The writer thread: a header for CSV, then each call as it comes, flushed
/// whenever the queue is empty; until every recorder is gone. The first write
/// or flush error (or panic) ends the writing: the rows since the last good flush, and
/// every call after, count as dropped, and each flush asked for fails.
fn drain(rx: Receiver<Message>, w: impl Write, json: bool, shared: &Shared) {
    let mut out = Out {
        w: Some(w),
        pending: 0,
        shared,
    };
    if let Some(w) = &mut out.w {
        if !json && guarded(|| writeln!(w, "at_ms,latency_ms,outcome,key")).is_err() {
            out.stop();
        }
    }
    loop {
        let message = match rx.try_recv() {
            Ok(message) => message,
            Err(TryRecvError::Empty) => {
                if out.pending > 0 {
                    let _ = out.flush();
                }
                match rx.recv() {
                    Ok(message) => message,
                    Err(_) => break,
                }
            }
            Err(TryRecvError::Disconnected) => break,
        };
        match message {
            Message::Call(call) => {
                let call = sanitize(call, json);
                out.write(|w| match json {
                    true => write_json_line(w, &call),
                    false => write_csv_row(w, &call, true),
                });
            }
            Message::Flush(answer) => {
                let _ = answer.send(out.flush());
            }
        }
    }
    let _ = out.flush();
}

/// The writer's end of the file: `w` until its first error.
struct Out<'a, W> {
    w: Option<W>,
    /// Calls handed to `w` since its last flush.
    pending: u64,
    shared: &'a Shared,
}

impl<W: Write> Out<'_, W> {
    /// Writes one call with `write`, or counts it as dropped after an error.
    fn write(&mut self, write: impl FnOnce(&mut W) -> io::Result<()>) {
        self.pending += 1;
        if let Some(w) = &mut self.w {
            if guarded(|| write(w)).is_err() {
                self.stop();
            }
        }
        if self.w.is_none() {
            self.settle(false);
        }
    }

    /// Flushes `w`, counting the calls handed to it as written, or as dropped
    /// if it fails (or failed before).
    fn flush(&mut self) -> io::Result<()> {
        let result = match &mut self.w {
            Some(w) => guarded(|| w.flush()),
            None => Err(io::Error::other(
                "the recorder's writer stopped after a write error",
            )),
        };
        if result.is_err() {
            self.stop();
        }
        self.settle(result.is_ok());
        result
    }

    /// Drops `w` after its first error: a writer that panicked may panic again
    /// as it drops (a `BufWriter` writes what it holds).
    fn stop(&mut self) {
        let w = self.w.take();
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(w)));
    }

    /// Counts the pending calls as written or as dropped.
    fn settle(&mut self, written: bool) {
        let count = match written {
            true => &self.shared.written,
            false => &self.shared.dropped,
        };
        // Relaxed: a count, read on its own.
        count.fetch_add(std::mem::take(&mut self.pending), Ordering::Relaxed);
    }
}

/// What the user's writer did in `f`, a panic as an error: the writing stops
/// as after any error, and the calls it held count as dropped (the panic hook
/// has reported the panic).
fn guarded(f: impl FnOnce() -> io::Result<()>) -> io::Result<()> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .unwrap_or_else(|_| Err(io::Error::other("the recorder's writer panicked")))
}

/// A key CSV can hold: commas, quotes and line breaks become `_`, spaces
/// around it are trimmed, and an empty one is none.
fn sanitize(mut call: Call, json: bool) -> Call {
    if !json {
        call.key = (call.key)
            .map(|k| k.replace([',', '"', '\n', '\r'], "_").trim().to_owned())
            .filter(|k| !k.is_empty());
    }
    call
}
