//! Traces out over OpenTelemetry, when the standard variables ask for them
//! (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, protocol from
//! `OTEL_EXPORTER_OTLP_PROTOCOL`: `http/protobuf` by default, or `grpc`). A reader of the
//! monitor's changes and of the team's call log plans each span as its work ends
//! ([`cohort_core::event::trace`]) and `export` hands it to the OTLP exporter through a bounded
//! queue. Nothing of it exists without those variables, and it never holds the team back: the
//! reader polls the monitor's feed (whose sender never waits, and never wakes it) and the
//! queue drops, counting, what the exporter cannot take.
//!
//! Prompts and answers go in as span events only with
//! `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true` (they may hold secrets).

mod export;

use crate::monitor::Monitor;
use crate::monitor::Published;
use crate::monitor::feed::{FeedReceiver, RecvError};
use cohort_core::event::trace::{self, CallFacts, SpanPlan};
use cohort_core::event::{Change, StageChange, StepChange, TaskChange};
use cohort_core::ids::TaskId;
use cohort_llm::recorded::CallLog;
pub use export::TraceStats;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Why traces could not be started.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("the OTLP exporter could not be made: {0}")]
    Exporter(String),
}

/// Whether the environment asks for traces.
pub fn asked_for() -> bool {
    let set = |k: &str| std::env::var(k).is_ok_and(|v| !v.trim().is_empty());
    let is = |k: &str, v: &str| std::env::var(k).is_ok_and(|x| x.trim().eq_ignore_ascii_case(v));
    let off = is("OTEL_SDK_DISABLED", "true") || is("OTEL_TRACES_EXPORTER", "none");
    !off && (set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
}

/// The team's traces while they go out; see the module docs.
pub struct Traces {
    stats: Arc<TraceStats>,
    monitor: Monitor,
    /// The newest version the reader has made spans of.
    read_to: Arc<AtomicU64>,
    reader: tokio::task::JoinHandle<()>,
    exporter: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Traces {
    /// Starts the traces of a team (`team` its name, `base` its base task) when the environment
    /// asks for them; `None` when it does not.
    pub fn start(
        monitor: &Monitor,
        calls: Arc<CallLog>,
        base: TaskId,
        team: &str,
    ) -> Result<Option<Traces>, TraceError> {
        if !asked_for() {
            return Ok(None);
        }
        let stats = Arc::new(TraceStats::default());
        let (queue, exporter) = export::start(team, stats.clone())?;
        let read_to = Arc::new(AtomicU64::new(monitor.version()));
        let reader = Reader {
            monitor: monitor.clone(),
            calls,
            base,
            content: std::env::var("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
                .is_ok_and(|v| v.eq_ignore_ascii_case("true")),
            queue,
            read_to: read_to.clone(),
        };
        tracing::info!("traces go out over OTLP");
        Ok(Some(Traces {
            stats,
            monitor: monitor.clone(),
            read_to,
            reader: tokio::spawn(reader.run(monitor.subscribe())),
            exporter: std::sync::Mutex::new(Some(exporter)),
        }))
    }

    /// What went out, and what was dropped.
    pub fn stats(&self) -> Arc<TraceStats> {
        self.stats.clone()
    }

    /// Sends what the team did up to now, waiting at most `within`: the reader catches up
    /// with the monitor, then the exporter empties its queue. Once only; traces end.
    pub async fn finish(&self, within: Duration) {
        let until = tokio::time::Instant::now() + within;
        let target = self.monitor.version();
        while self.read_to.load(Ordering::Acquire) < target && tokio::time::Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // The reader holds the queue's sender: once it is gone the exporter drains and ends.
        self.reader.abort();
        let exporter = self
            .exporter
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(mut exporter) = exporter
            && tokio::time::timeout_at(until, &mut exporter).await.is_err()
        {
            // The receiver is too slow or down: what is still queued is not sent.
            exporter.abort();
            let _ = exporter.await;
            self.stats.give_up_queued();
        }
    }
}

impl Drop for Traces {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// Plans the spans of what ends, as the changes say it ends.
struct Reader {
    monitor: Monitor,
    calls: Arc<CallLog>,
    base: TaskId,
    content: bool,
    queue: export::Queue,
    read_to: Arc<AtomicU64>,
}

/// How the reader waits for changes. While the team is busy it polls rather than waits to be
/// woken: a sender wakes only a waiting reader, so a step that publishes pays for no wake-up
/// of the reader's thread. Each poll that finds nothing doubles the pause before the next (up
/// to [`MOST_PAUSE`]) and each that finds something halves it (down to [`LEAST_PAUSE`]), so a
/// team that publishes every so often is polled about that often. After [`IDLE`] of nothing
/// the reader waits to be woken by the next change: an idle team costs it nothing.
struct Polling {
    pause: Duration,
}

const LEAST_PAUSE: Duration = Duration::from_millis(2);
const MOST_PAUSE: Duration = Duration::from_millis(32);
const IDLE: Duration = Duration::from_millis(250);
/// The most changes the reader takes from the feed at once (under one lock of it).
const BATCH: usize = 512;

impl Polling {
    /// Fills `batch` with the changes there are.
    async fn next_batch(
        &mut self,
        feed: &mut FeedReceiver,
        batch: &mut Vec<Arc<Published>>,
    ) -> Result<(), RecvError> {
        let mut waited = Duration::ZERO;
        while waited < IDLE {
            feed.try_recv_many(BATCH, batch)?;
            if !batch.is_empty() {
                self.pause = (self.pause / 2).max(LEAST_PAUSE);
                return Ok(());
            }
            tokio::time::sleep(self.pause).await;
            waited += self.pause;
            self.pause = (self.pause * 2).min(MOST_PAUSE);
        }
        batch.push(feed.recv().await?);
        self.pause = LEAST_PAUSE;
        Ok(())
    }
}

impl Reader {
    async fn run(self, mut feed: FeedReceiver) {
        let mut batch = Vec::with_capacity(BATCH);
        let mut polling = Polling { pause: LEAST_PAUSE };
        loop {
            match polling.next_batch(&mut feed, &mut batch).await {
                Ok(()) => {
                    for p in batch.drain(..) {
                        for span in self.spans_of(&p.event.change, p.event.at) {
                            self.queue.offer(span);
                        }
                        self.read_to.store(p.event.version, Ordering::Release);
                    }
                    // A batch may be hundreds of spans: what shares the thread goes first.
                    tokio::task::yield_now().await;
                }
                // Spans of the changes missed are lost, and counted so.
                Err(RecvError::Lagged(n)) => self.queue.missed(n),
                Err(RecvError::Closed) => return,
            }
        }
    }

    fn spans_of(&self, change: &Change, at: i64) -> Vec<SpanPlan> {
        match change {
            Change::Step(StepChange::Updated {
                step_id, update, ..
            }) if update.execution_state.is_some_and(|s| s.is_over()) => {
                self.step_spans(step_id, at)
            }
            Change::Stage(StageChange::State {
                stage_id,
                execution_state,
            }) if execution_state.is_over() => self
                .monitor
                .read(|s| {
                    let stage = s.stages.get(stage_id)?;
                    let task = s.tasks.get(&stage.task_id)?;
                    Some(trace::stage_span(
                        stage,
                        task,
                        span_times(s.times.stage(stage_id), at),
                    ))
                })
                .into_iter()
                .collect(),
            Change::Task(TaskChange::State {
                task_id,
                execution_state,
                ..
            }) if execution_state.is_over() => self
                .monitor
                .read(|s| {
                    let task = s.tasks.get(task_id)?;
                    Some(trace::task_span(
                        task,
                        span_times(s.times.task(task_id), at),
                    ))
                })
                .into_iter()
                .collect(),
            _ => Vec::new(),
        }
    }

    /// A step's span, its wait for a person and its model calls.
    fn step_spans(&self, id: &cohort_core::ids::StepId, at: i64) -> Vec<SpanPlan> {
        let planned = self.monitor.read(|s| {
            let step = s.step(id)?;
            let times = s.times.step(id);
            let model = s
                .agents
                .get(&step.agent_id)
                .and_then(|a| a.llm_config.as_ref())
                .map(|l| l.label())
                .unwrap_or_default();
            let task = s.tasks.get(&step.task_id);
            let span = trace::step_span(step, task, &self.base, span_times(times, at));
            let wait = times
                .and_then(|t| Some((t.waited_from?, t.waited_to?)))
                .map(|(from, to)| trace::wait_span(&span, from, to));
            Some((span, wait, model))
        });
        let Some((span, wait, model)) = planned else {
            // The states let the step go before the reader came to it.
            self.queue.missed(1);
            return Vec::new();
        };
        let mut out: Vec<SpanPlan> = wait.into_iter().collect();
        // Made under the call log's lock from the fields a span needs (texts only when asked).
        let mut n = 0;
        out.extend(self.calls.map_step(id, |call| {
            let finish = match call.cut {
                Some(cohort_llm::Cut::TokenLimit) => "length",
                Some(cohort_llm::Cut::Repetition) => "repetition",
                None if call.error.is_some() => "error",
                None => "stop",
            };
            let facts = CallFacts {
                sent_ms: call.sent_at,
                answered_ms: call.answered_at,
                model: &model,
                usage: call.usage,
                error: call.error.as_deref(),
                finish_reason: finish,
                content: self.content.then_some((
                    &call.system,
                    &call.prompt,
                    call.reply.as_deref(),
                )),
            };
            n += 1;
            trace::call_span(&span, id, n - 1, &facts)
        }));
        out.push(span);
        out
    }
}

/// A span's start and end from the times the states keep (the change's time when missing).
fn span_times(times: Option<cohort_core::event::times::Times>, at: i64) -> (i64, i64) {
    let t = times.unwrap_or_default();
    let start = t.started_at.or(t.created_at).unwrap_or(at);
    (start, t.ended_at.unwrap_or(at).max(start))
}

#[cfg(test)]
mod tests {
    use super::*;
    use cohort_core::event::TaskChange;
    use cohort_core::state::TaskState;

    fn task(id: &str) -> Vec<Change> {
        let t = TaskState::new(id.into(), "n".into(), "i".into(), "m".into());
        vec![Change::Task(TaskChange::Created { task: Box::new(t) })]
    }

    #[tokio::test(start_paused = true)]
    async fn the_reader_polls_a_busy_feed_waits_to_be_woken_when_idle_and_counts_a_lag() {
        let monitor = Monitor::new(16);
        let mut feed = monitor.subscribe();
        let mut polling = Polling { pause: LEAST_PAUSE };
        let mut batch = Vec::new();
        // What is there is taken at once, in one batch.
        for i in 0..3 {
            monitor.publish(task(&format!("t{i}")));
        }
        polling.next_batch(&mut feed, &mut batch).await.unwrap();
        assert_eq!(batch.len(), 3);
        batch.clear();
        // Nothing for a minute: the reader backs off, then waits to be woken by the change.
        let m = monitor.clone();
        let later = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(60)).await;
            m.publish(task("late"));
        });
        let started = tokio::time::Instant::now();
        polling.next_batch(&mut feed, &mut batch).await.unwrap();
        assert_eq!(
            started.elapsed(),
            Duration::from_secs(60),
            "woken by the change"
        );
        assert_eq!(batch.len(), 1);
        assert_eq!(polling.pause, LEAST_PAUSE);
        later.await.unwrap();
        batch.clear();
        // A reader behind the ring is told how much it missed, then goes on.
        for i in 0..40 {
            monitor.publish(task(&format!("u{i}")));
        }
        let lagged = polling.next_batch(&mut feed, &mut batch).await;
        assert!(matches!(lagged, Err(RecvError::Lagged(24))), "{lagged:?}");
        polling.next_batch(&mut feed, &mut batch).await.unwrap();
        assert_eq!(batch.len(), 16);
        batch.clear();
        drop(monitor);
        let closed = polling.next_batch(&mut feed, &mut batch).await;
        assert!(matches!(closed, Err(RecvError::Closed)), "{closed:?}");
    }
}
