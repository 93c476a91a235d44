//! Child processes: a test of this binary run in a fresh process, and a forked
//! child waited for. Every wait is bounded: a child past its limit is killed.

use std::time::Duration;

/// What a child run of this test binary left: its exit status (`None` if it ran
/// past its limit and was killed), its stdout and its stderr.
pub struct Child {
    pub status: Option<std::process::ExitStatus>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs test `test` of this test binary in a child process (`args` added to the
/// harness's, with `env` set to `1`), for a fresh process or one whose abort must
/// not end this binary. Waits at most `limit`, then kills it. Its pipes are read on
/// threads of their own, so that a full pipe cannot stall it.
pub fn run_child(test: &str, args: &[&str], env: &str, limit: Duration) -> Child {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .args(args)
        .env(env, "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn a child of this test binary");
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let deadline = std::time::Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    Child {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    }
}

/// Waits for child process `pid` until `deadline`; `None` if it was still
/// running (then it is killed and reaped), else its exit code (128 + signal if a
/// signal ended it).
#[cfg(unix)]
pub fn wait_child(pid: libc::pid_t, deadline: std::time::Instant) -> Option<i32> {
    let mut status = 0;
    loop {
        // SAFETY: waits for our own child without blocking.
        let done = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if done == pid {
            return Some(match libc::WIFEXITED(status) {
                true => libc::WEXITSTATUS(status),
                false => 128 + libc::WTERMSIG(status),
            });
        }
        assert_eq!(done, 0, "waitpid failed");
        if std::time::Instant::now() > deadline {
            // SAFETY: kills and reaps our own child.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            return None;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}
