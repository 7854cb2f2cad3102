//! Spans out to the OTLP exporter: a bounded queue the reader offers spans to (never waiting:
//! a full queue drops the span and counts it), and a task that sends them in batches, each
//! within a deadline, counting what went out and what the receiver refused or never took.

use cohort_core::event::trace::{
    Attr, SpanId as PlannedSpan, SpanKind, SpanPlan, TraceId as PlannedTrace,
};
use cohort_core::event::trace_context::TraceParent;
use opentelemetry::trace::{
    Link, SpanContext, SpanId, SpanKind as OtelKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue, Value};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanExporter as _, SpanLinks};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc;

/// Spans waiting for the exporter at most; more are dropped (and counted).
pub const QUEUE: usize = 4_096;
/// Spans in one export at most.
pub const BATCH: usize = 512;
/// How long one export may take before its spans count as failed.
pub const EXPORT_DEADLINE: Duration = Duration::from_secs(10);
/// The pause after a failed export, doubled after each failure up to [`BACKOFF_MAX`]: a
/// receiver that is down costs a try now and then, and the queue meanwhile fills and drops.
pub const BACKOFF_MIN: Duration = Duration::from_millis(500);
pub const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// What became of the spans planned.
#[derive(Debug, Default)]
pub struct TraceStats {
    /// Spans queued (the rest were dropped at once).
    queued: AtomicU64,
    exported: AtomicU64,
    dropped: AtomicU64,
    failed: AtomicU64,
}

impl TraceStats {
    /// Spans the receiver took.
    pub fn exported(&self) -> u64 {
        self.exported.load(Ordering::Relaxed)
    }
    /// Spans dropped before they were sent: the queue was full, or the reader fell behind.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
    /// Spans sent that the receiver refused or did not take in time.
    pub fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }

    /// The exporter was stopped with spans still queued: they count as dropped.
    pub(super) fn give_up_queued(&self) {
        let done = self.exported() + self.failed();
        let left = self.queued.load(Ordering::Relaxed).saturating_sub(done);
        self.dropped.fetch_add(left, Ordering::Relaxed);
    }
}

/// Where the reader offers spans.
pub(super) struct Queue {
    tx: mpsc::Sender<SpanPlan>,
    stats: Arc<TraceStats>,
}

impl Queue {
    /// Queues a span, or drops it when the queue is full.
    pub(super) fn offer(&self, span: SpanPlan) {
        match self.tx.try_send(span) {
            Ok(()) => self.stats.queued.fetch_add(1, Ordering::Relaxed),
            Err(_) => self.stats.dropped.fetch_add(1, Ordering::Relaxed),
        };
    }

    /// The reader missed `n` changes, or the states let go of what a span was to be made of
    /// before the reader came to it: those spans are lost (counted as one each).
    pub(super) fn missed(&self, n: u64) {
        self.stats.dropped.fetch_add(n, Ordering::Relaxed);
    }
}

/// The exporter the environment names, and the task feeding it.
pub(super) fn start(
    team: &str,
    stats: Arc<TraceStats>,
) -> Result<(Queue, tokio::task::JoinHandle<()>), super::TraceError> {
    let mut exporter = opentelemetry_otlp::SpanExporter::builder()
        .build()
        .map_err(|e| super::TraceError::Exporter(e.to_string()))?;
    let mut resource = opentelemetry_sdk::Resource::builder()
        .with_attribute(KeyValue::new("cohort.team", team.to_owned()));
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name("cohort");
    }
    exporter.set_resource(&resource.build());
    let (tx, mut rx) = mpsc::channel(QUEUE);
    let scope = InstrumentationScope::builder("cohort")
        .with_version(env!("CARGO_PKG_VERSION"))
        .build();
    let counts = stats.clone();
    let task = tokio::spawn(async move {
        let mut batch = Vec::with_capacity(BATCH);
        let mut backoff = BACKOFF_MIN;
        while rx.recv_many(&mut batch, BATCH).await > 0 {
            let n = batch.len() as u64;
            let spans = batch.drain(..).map(|p| span_data(p, &scope)).collect();
            let why = match tokio::time::timeout(EXPORT_DEADLINE, exporter.export(spans)).await {
                Ok(Ok(())) => {
                    counts.exported.fetch_add(n, Ordering::Relaxed);
                    backoff = BACKOFF_MIN;
                    continue;
                }
                Ok(Err(e)) => e.to_string(),
                Err(_) => format!("it took none in {EXPORT_DEADLINE:?}"),
            };
            counts.failed.fetch_add(n, Ordering::Relaxed);
            tracing::warn!(
                "the trace receiver did not take {n} spans ({why}); next try in {backoff:?}"
            );
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
    });
    Ok((Queue { tx, stats }, task))
}

fn time(ms: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64)
}

fn attrs(list: Vec<(&'static str, Attr)>) -> Vec<KeyValue> {
    list.into_iter()
        .map(|(k, v)| {
            let v = match v {
                Attr::Str(s) => Value::from(s),
                Attr::Int(i) => Value::from(i),
                Attr::List(l) => Value::Array(opentelemetry::Array::String(
                    l.into_iter().map(Into::into).collect(),
                )),
            };
            KeyValue::new(k, v)
        })
        .collect()
}

fn span_context(trace: PlannedTrace, span: PlannedSpan, remote: bool) -> SpanContext {
    SpanContext::new(
        TraceId::from_bytes(trace.0),
        SpanId::from_bytes(span.0),
        TraceFlags::SAMPLED,
        remote,
        TraceState::default(),
    )
}

/// The spans a span follows from: the step whose message caused it, possibly on another node
/// (a remote context, as a `traceparent` carried it).
fn links(from: Vec<TraceParent>) -> SpanLinks {
    let mut links = SpanLinks::default();
    links.links = from
        .into_iter()
        .map(|t| {
            let kind = KeyValue::new("cohort.link", "caused_by");
            Link::new(span_context(t.trace, t.span, true), vec![kind], 0)
        })
        .collect();
    links
}

/// A planned span as the SDK's exporters take it.
fn span_data(p: SpanPlan, scope: &InstrumentationScope) -> SpanData {
    let context = span_context(p.trace, p.span, false);
    // Not exhaustive: made by default, then filled.
    let mut events = SpanEvents::default();
    events.events = p
        .events
        .into_iter()
        .map(|e| opentelemetry::trace::Event::new(e.name, time(e.at_ms), attrs(e.attributes), 0))
        .collect();
    SpanData {
        span_context: context,
        parent_span_id: p
            .parent
            .map_or(SpanId::INVALID, |s| SpanId::from_bytes(s.0)),
        parent_span_is_remote: false,
        span_kind: match p.kind {
            SpanKind::Internal => OtelKind::Internal,
            SpanKind::Client => OtelKind::Client,
        },
        name: p.name.into(),
        start_time: time(p.start_ms),
        end_time: time(p.end_ms),
        attributes: attrs(p.attributes),
        dropped_attributes_count: 0,
        events,
        links: links(p.links),
        status: match p.error {
            Some(e) => Status::error(e),
            None => Status::Unset,
        },
        instrumentation_scope: scope.clone(),
    }
}
