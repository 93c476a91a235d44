//! What one run records: per-tick counts for the timeline and totals for the summary.
//!
//! Workers report each event with the run time it happened at; a mutex per run is
//! plenty for a few thousand events a second, and keeps the harness obviously right.

use crate::sim::{Response, SLOW_CALL, Scenario};
use cutout::State;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// One tick of one run.
#[derive(Clone, Debug, Default)]
pub struct Tick {
    /// Calls that reached the dependency (counted when they start).
    pub calls: u64,
    /// Requests the breaker turned away.
    pub rejected: u64,
    /// Requests answered OK: served locally, or the dependency succeeded.
    pub served: u64,
    /// Dependency calls that finished in this tick and succeeded ...
    pub ok: u64,
    /// ... or failed (an error or the timeout) ...
    pub failed: u64,
    /// ... and of those, how many took longer than the slow-call threshold.
    pub slow: u64,
    /// Requests whose caller gave up waiting for a worker.
    pub gave_up: u64,
    /// Caller latency (arrival to answer), in microseconds, of every request
    /// answered in this tick.
    pub latencies: Vec<u32>,
    /// The breaker's state at the end of the tick (`None` without a breaker, or
    /// before the tick ended).
    pub state: Option<State>,
}

impl Tick {
    /// Failed / finished dependency calls, if any finished.
    pub fn failure_rate(&self) -> Option<f64> {
        let n = self.ok + self.failed;
        (n > 0).then(|| self.failed as f64 / n as f64)
    }

    /// Slow / finished dependency calls, if any finished.
    pub fn slow_rate(&self) -> Option<f64> {
        let n = self.ok + self.failed;
        (n > 0).then(|| self.slow as f64 / n as f64)
    }

    /// The `p`th percentile (0..=100) of caller latency.
    pub fn latency(&self, p: f64) -> Option<Duration> {
        percentile(&self.latencies, p)
    }
}

/// The whole run.
#[derive(Clone, Debug, Default)]
pub struct Totals {
    /// Requests that did not need the dependency, served.
    pub local: u64,
    /// Requests answered with the dependency's success.
    pub ok: u64,
    /// Requests that called the dependency and failed.
    pub failed: u64,
    /// Requests the breaker turned away.
    pub rejected: u64,
    /// Requests whose caller gave up waiting for a worker.
    pub gave_up: u64,
    /// Of those, requests that did not even need the dependency.
    pub gave_up_local: u64,
    /// Requests still waiting when the run ended.
    pub unanswered: u64,
    /// Of those, requests that did not need the dependency.
    pub unanswered_local: u64,
    /// Requests that needed the dependency, whatever became of them.
    pub needed: u64,
    /// Calls that reached the dependency.
    pub calls: u64,
    /// Of those, calls made while it was sick (the spike and the outage).
    pub sick_calls: u64,
    /// Worker time spent inside dependency calls.
    pub waiting: Duration,
    /// Of that, in calls made while it was sick.
    pub sick_waiting: Duration,
    /// Caller latency of every answered request, in microseconds.
    pub latencies: Vec<u32>,
}

impl Totals {
    /// Every request handed to the workers.
    pub fn requests(&self) -> u64 {
        self.local + self.ok + self.failed + self.rejected + self.gave_up + self.unanswered
    }

    /// Requests answered OK.
    pub fn served(&self) -> u64 {
        self.local + self.ok
    }

    /// The `p`th percentile (0..=100) of caller latency.
    pub fn latency(&self, p: f64) -> Option<Duration> {
        percentile(&self.latencies, p)
    }
}

#[derive(Debug)]
struct Inner {
    ticks: Vec<Tick>,
    totals: Totals,
}

/// Collects one run's events.
#[derive(Debug)]
pub struct Recorder {
    tick: Duration,
    inner: Mutex<Inner>,
    /// The calls tried, for `--record` (see `trace.rs`); `None` records none.
    attempts: Option<Mutex<Vec<Attempt>>>,
}

/// One dependency call the run tried to make, for `--record`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attempt {
    /// When it was admitted (or turned away), in run time.
    pub admitted: Duration,
    /// How long it ran, or would have.
    pub latency: Duration,
    /// Whether it succeeded, or would have.
    pub ok: bool,
}

impl Recorder {
    /// A recorder with one tick per tick of the scenario.
    pub fn new(scenario: &Scenario) -> Recorder {
        Recorder {
            tick: scenario.tick,
            inner: Mutex::new(Inner {
                ticks: vec![Tick::default(); scenario.ticks().max(1)],
                totals: Totals::default(),
            }),
            attempts: None,
        }
    }

    /// The same recorder, keeping every call tried too (`--record`).
    pub fn recording(self) -> Recorder {
        Recorder {
            attempts: Some(Mutex::default()),
            ..self
        }
    }

    /// A worker is about to call the dependency at `now`, which will answer
    /// `response` if the breaker admits the call: kept if recording.
    pub fn attempted(&self, now: Duration, response: Response) {
        if let Some(attempts) = &self.attempts {
            attempts
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(Attempt {
                    admitted: now,
                    latency: response.latency,
                    ok: response.ok,
                });
        }
    }

    /// Every call tried, if recording, in the order the calls end (then as
    /// recorded).
    pub fn attempts(&self) -> Option<Vec<Attempt>> {
        let attempts = self.attempts.as_ref()?;
        let mut v = attempts.lock().unwrap_or_else(|e| e.into_inner()).clone();
        v.sort_by_key(|a| a.admitted + a.latency);
        Some(v)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A worker that panicked already failed the run; its counts are still good.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn with_tick(&self, now: Duration, f: impl FnOnce(&mut Tick, &mut Totals)) {
        let mut inner = self.lock();
        let Inner { ticks, totals } = &mut *inner;
        let i = ((now.as_nanos() / self.tick.as_nanos()) as usize).min(ticks.len() - 1);
        f(&mut ticks[i], totals);
    }

    /// A call reached the dependency at `now`.
    pub fn call(&self, now: Duration, sick: bool) {
        self.with_tick(now, |tick, totals| {
            tick.calls += 1;
            totals.calls += 1;
            totals.needed += 1;
            totals.sick_calls += u64::from(sick);
        });
    }

    /// The breaker turned a request away at `now`, `latency` after it arrived.
    pub fn rejected(&self, now: Duration, latency: Duration) {
        self.with_tick(now, |tick, totals| {
            tick.rejected += 1;
            totals.rejected += 1;
            totals.needed += 1;
            tick.latencies.push(micros(latency));
            totals.latencies.push(micros(latency));
        });
    }

    /// A request's caller gave up waiting for a worker; `needed` says whether the
    /// request needed the dependency.
    pub fn gave_up(&self, now: Duration, latency: Duration, needed: bool) {
        self.with_tick(now, |tick, totals| {
            tick.gave_up += 1;
            totals.gave_up += 1;
            totals.gave_up_local += u64::from(!needed);
            totals.needed += u64::from(needed);
            tick.latencies.push(micros(latency));
            totals.latencies.push(micros(latency));
        });
    }

    /// A request that did not need the dependency was served at `now`, `latency`
    /// after it arrived.
    pub fn served_locally(&self, now: Duration, latency: Duration) {
        self.with_tick(now, |tick, totals| {
            tick.served += 1;
            totals.local += 1;
            tick.latencies.push(micros(latency));
            totals.latencies.push(micros(latency));
        });
    }

    /// A dependency call finished at `now` with `response`, after blocking its
    /// worker for `call_time` (`sick`: the call started while the dependency was
    /// sick); its request arrived `latency` ago.
    pub fn completed(
        &self,
        now: Duration,
        response: Response,
        call_time: Duration,
        sick: bool,
        latency: Duration,
    ) {
        self.with_tick(now, |tick, totals| {
            if response.ok {
                tick.ok += 1;
                tick.served += 1;
                totals.ok += 1;
            } else {
                tick.failed += 1;
                totals.failed += 1;
            }
            tick.slow += u64::from(response.latency > SLOW_CALL);
            totals.waiting += call_time;
            if sick {
                totals.sick_waiting += call_time;
            }
            tick.latencies.push(micros(latency));
            totals.latencies.push(micros(latency));
        });
    }

    /// A request was still waiting when the run ended.
    pub fn unanswered(&self, needed: bool) {
        let totals = &mut self.lock().totals;
        totals.unanswered += 1;
        totals.unanswered_local += u64::from(!needed);
        totals.needed += u64::from(needed);
    }

    /// Notes the breaker's state at the end of tick `i`.
    pub fn close_tick(&self, i: usize, state: Option<State>) {
        if let Some(tick) = self.lock().ticks.get_mut(i) {
            tick.state = state;
        }
    }

    /// A copy of tick `i`.
    pub fn tick(&self, i: usize) -> Tick {
        self.lock().ticks.get(i).cloned().unwrap_or_default()
    }

    /// Everything recorded.
    pub fn finish(&self) -> (Vec<Tick>, Totals) {
        let inner = self.lock();
        (inner.ticks.clone(), inner.totals.clone())
    }
}

fn micros(d: Duration) -> u32 {
    u32::try_from(d.as_micros()).unwrap_or(u32::MAX)
}

/// The nearest-rank `p`th percentile (0..=100) of microsecond samples.
pub fn percentile(samples: &[u32], p: f64) -> Option<Duration> {
    if samples.is_empty() {
        return None;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    let i = rank.clamp(1, sorted.len()) - 1;
    Some(Duration::from_micros(u64::from(sorted[i])))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::CALLER_DEADLINE;

    #[test]
    fn nearest_rank_percentiles() {
        let xs: Vec<u32> = (1..=100).rev().collect();
        assert_eq!(percentile(&xs, 50.0), Some(Duration::from_micros(50)));
        assert_eq!(percentile(&xs, 99.0), Some(Duration::from_micros(99)));
        assert_eq!(percentile(&xs, 100.0), Some(Duration::from_micros(100)));
        assert_eq!(percentile(&xs, 0.0), Some(Duration::from_micros(1)));
        assert_eq!(percentile(&[], 50.0), None);
    }

    #[test]
    fn events_land_in_their_tick_and_the_totals() {
        let r = Recorder::new(&Scenario::new(1, 0.1)); // 2 s: 40 ticks of 50 ms
        let ok = Response {
            latency: Duration::from_millis(150),
            ok: true,
        };
        r.call(Duration::from_millis(10), true);
        r.completed(
            Duration::from_millis(60),
            ok,
            Duration::from_millis(150),
            true,
            Duration::from_millis(160),
        );
        r.served_locally(Duration::from_millis(70), Duration::from_millis(2));
        r.gave_up(Duration::from_millis(80), CALLER_DEADLINE, false);
        r.rejected(Duration::from_secs(60), Duration::from_micros(3)); // after the end: last tick
        let (ticks, totals) = r.finish();
        assert_eq!(
            (
                ticks[0].calls,
                ticks[1].ok,
                ticks[1].slow,
                ticks[39].rejected
            ),
            (1, 1, 1, 1)
        );
        assert_eq!(
            (ticks[1].served, ticks[1].gave_up, ticks[1].latencies.len()),
            (2, 1, 3)
        );
        assert_eq!(
            (totals.calls, totals.sick_calls, totals.requests()),
            (1, 1, 4)
        );
        assert_eq!(
            (totals.served(), totals.gave_up_local, totals.needed),
            (2, 1, 2)
        );
        assert_eq!(totals.waiting, Duration::from_millis(150));
        assert_eq!(totals.sick_waiting, Duration::from_millis(150));
        assert_eq!(ticks[1].failure_rate(), Some(0.0));
        assert_eq!(ticks[2].failure_rate(), None);
    }
}
