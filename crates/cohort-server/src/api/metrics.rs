//! `GET /metrics`: the team's figures in Prometheus' text format, for Prometheus, Grafana and
//! alerts. Counters come from the monitor's tally (every change counted once as it is applied:
//! steps by executor and outcome, step durations, tokens and USD by agent and model, repairs by
//! rule, re-asks), gauges from the states as they are now (steps running and queued, waits for
//! a person, tasks by state, messages in flight), and the process's own timings (LLM calls by
//! model and outcome, store commits) and feeds. Operators only, or on a bind address of its own
//! (`http.metrics_bind`, or `--metrics-bind`) for a scraper on the operators' network.

use super::reason::{Missing, OperatorAction};
use super::{ApiState, AppError, Caller};
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use cohort_core::event::tally::{Histogram, STEP_SECONDS};
use cohort_llm::recorded::CALL_SECONDS;
use cohort_runtime::monitor::COMMIT_SECONDS;
use std::fmt::Write;

/// The content type Prometheus scrapes the text format as.
const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

pub async fn metrics(State(state): State<ApiState>, caller: Caller) -> Result<Response, AppError> {
    caller.must_be_operator(OperatorAction::ReadMetrics)?;
    Ok(exposition(&state))
}

/// The metrics alone, without a token (the `http.metrics_bind` listener): any other path is
/// not found.
pub fn router(state: ApiState) -> axum::Router {
    let wording = state.wording();
    axum::Router::new()
        .route(
            "/metrics",
            axum::routing::get(|State(s): State<ApiState>| async move { exposition(&s) }),
        )
        .fallback(|| async { AppError::NotFound(Missing::OnlyMetrics.into()) })
        .with_state(state)
        .layer(axum::middleware::from_fn_with_state(
            wording,
            super::error::in_team_language,
        ))
}

/// The figures as a scrape's answer (no caller: the `http.metrics_bind` listener).
pub fn exposition(state: &ApiState) -> Response {
    let text = render(state);
    ([(header::CONTENT_TYPE, TEXT_FORMAT)], text).into_response()
}

/// Every family, in the text format.
fn render(state: &ApiState) -> String {
    let mut out = Text::default();
    let inner = &state.inner;
    inner.monitor.read(|s| {
        let t = s.tally();
        out.family("cohort_steps_total", "counter", "Steps that ended since the server started, by executor (a skill, or a tool step's server) and outcome.");
        for ((executor, outcome), n) in &t.steps {
            out.sample("cohort_steps_total", &[("executor", executor), ("outcome", outcome.name())], *n as f64);
        }
        out.family("cohort_step_duration_seconds", "histogram", "How long the steps that ended ran, from their start to their end, by executor.");
        for (executor, h) in &t.step_seconds {
            out.histogram("cohort_step_duration_seconds", &[("executor", executor)], STEP_SECONDS, h);
        }
        out.family("cohort_tokens_total", "counter", "Tokens the agents' model calls spent, by agent, model and kind (prompt, of them cached, completion).");
        for ((agent, model), u) in &t.usage {
            for (kind, n) in [("prompt", u.prompt_tokens), ("cached_prompt", u.cached_prompt_tokens), ("completion", u.completion_tokens)] {
                out.sample("cohort_tokens_total", &[("agent", agent), ("model", model), ("kind", kind)], n as f64);
            }
        }
        out.family("cohort_cost_usd_total", "counter", "USD the agents' model calls cost, by agent and model (0 for a model without a price).");
        for ((agent, model), u) in &t.usage {
            out.sample("cohort_cost_usd_total", &[("agent", agent), ("model", model)], u.cost_usd);
        }
        out.family("cohort_repairs_total", "counter", "Repairs the runtime made to models' answers, by rule (the steps that ended).");
        for (rule, n) in &t.repairs {
            out.sample("cohort_repairs_total", &[("rule", rule)], *n as f64);
        }
        out.family("cohort_reasks_total", "counter", "Answers that could not be used and were asked about again, by executor.");
        for (executor, n) in &t.reasks {
            out.sample("cohort_reasks_total", &[("executor", executor)], *n as f64);
        }
        now_figures(&mut out, s);
    });
    out.family(
        "cohort_llm_call_duration_seconds",
        "histogram",
        "How long model calls took (retries included), by model and outcome.",
    );
    for ((model, outcome), h) in &inner.calls.timings() {
        out.histogram(
            "cohort_llm_call_duration_seconds",
            &[("model", model), ("outcome", outcome.name())],
            CALL_SECONDS,
            h,
        );
    }
    out.family(
        "cohort_store_commit_duration_seconds",
        "histogram",
        "How long the journal's commits to the store took.",
    );
    out.histogram(
        "cohort_store_commit_duration_seconds",
        &[],
        COMMIT_SECONDS,
        &inner.monitor.commit_timings(),
    );
    out.family(
        "cohort_websocket_feeds",
        "gauge",
        "Websocket feeds open now.",
    );
    out.sample(
        "cohort_websocket_feeds",
        &[],
        inner.feed_slots.open() as f64,
    );
    memory_figures(&mut out, inner);
    if let Some(traces) = &inner.traces {
        trace_figures(&mut out, traces);
    }
    out.0
}

/// The memory budget and what its bounded parts hold now: the steps kept for readers and the
/// live feed's backlog (each held to its share; the rest of the budget bounds the tasks'
/// pools, agents' queues and private chats, each by its own cap).
fn memory_figures(out: &mut Text, inner: &super::Inner) {
    let budget = inner.memory;
    let retired = inner.monitor.read(|s| s.retired_bytes());
    out.family("cohort_memory_budget_bytes", "gauge", "The team's memory budget (retention.memory_mib) and the shares of it its parts are held to.");
    for (part, bytes) in [
        ("total", budget.bytes),
        ("retired_steps", budget.retired_steps()),
        ("feed", budget.feed()),
        ("task_pools", budget.all_pools()),
    ] {
        out.sample(
            "cohort_memory_budget_bytes",
            &[("part", part)],
            bytes as f64,
        );
    }
    out.family(
        "cohort_memory_held_bytes",
        "gauge",
        "What the parts held to a share of the memory budget hold now.",
    );
    for (part, bytes) in [
        ("retired_steps", retired),
        ("feed", inner.monitor.feed_bytes()),
    ] {
        out.sample("cohort_memory_held_bytes", &[("part", part)], bytes as f64);
    }
}

/// What became of the team's spans.
fn trace_figures(out: &mut Text, traces: &cohort_runtime::otel::TraceStats) {
    out.family(
        "cohort_trace_spans_total",
        "counter",
        "Spans sent over OTLP (exported), dropped before sending (queue full, reader behind) or refused by the receiver (failed).",
    );
    for (outcome, n) in [
        ("exported", traces.exported()),
        ("dropped", traces.dropped()),
        ("failed", traces.failed()),
    ] {
        out.sample(
            "cohort_trace_spans_total",
            &[("outcome", outcome)],
            n as f64,
        );
    }
}

/// The gauges read from the states as they are now.
fn now_figures(out: &mut Text, s: &cohort_core::event::States) {
    let c = s.counters();
    out.family("cohort_steps_running", "gauge", "Steps running now.");
    out.sample("cohort_steps_running", &[], c.steps_running as f64);
    out.family("cohort_agents_working", "gauge", "Agents working now.");
    out.sample("cohort_agents_working", &[], c.agents_working as f64);
    let queued: usize = s.agents.values().map(|a| a.agent_step.todo_len()).sum();
    out.family(
        "cohort_steps_queued",
        "gauge",
        "Steps in the agents' queues, waiting to run.",
    );
    out.sample("cohort_steps_queued", &[], queued as f64);
    let waiting = s
        .agents
        .values()
        .flat_map(|a| a.agent_step.steps())
        .filter(|st| st.execution_state.waits_for_a_person())
        .count();
    out.family(
        "cohort_waits_for_a_person",
        "gauge",
        "Steps waiting for a person's verdict (an approval, a plan check, parameters).",
    );
    out.sample("cohort_waits_for_a_person", &[], waiting as f64);
    out.family("cohort_tasks", "gauge", "Tasks in memory, by state.");
    let mut by_state = std::collections::BTreeMap::<String, usize>::new();
    for t in s.tasks.values() {
        *by_state.entry(t.execution_state.to_string()).or_default() += 1;
    }
    for (state, n) in &by_state {
        out.sample("cohort_tasks", &[("state", state)], *n as f64);
    }
    out.family(
        "cohort_messages_in_flight",
        "gauge",
        "Messages routed and not yet taken by every receiver.",
    );
    out.sample(
        "cohort_messages_in_flight",
        &[],
        s.deliveries.in_flight_count() as f64,
    );
    out.family("cohort_retired_steps_bytes", "gauge", "Bytes of the steps kept for readers after they left their agents (held to the memory budget's share).");
    out.sample("cohort_retired_steps_bytes", &[], s.retired_bytes() as f64);
}

/// The text format, written family by family.
#[derive(Default)]
struct Text(String);

impl Text {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}");
        let _ = writeln!(self.0, "# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.0.push_str(name);
        self.labels(labels, None);
        let _ = writeln!(self.0, " {}", number(value));
    }

    /// A histogram's buckets (added up, as the format wants), sum and count.
    fn histogram(&mut self, name: &str, labels: &[(&str, &str)], bounds: &[f64], h: &Histogram) {
        let mut below = 0u64;
        for (i, bound) in bounds.iter().enumerate() {
            below += h.counts.get(i).copied().unwrap_or(0);
            let _ = write!(self.0, "{name}_bucket");
            self.labels(labels, Some(&number(*bound)));
            let _ = writeln!(self.0, " {below}");
        }
        let _ = write!(self.0, "{name}_bucket");
        self.labels(labels, Some("+Inf"));
        let _ = writeln!(self.0, " {}", h.count);
        let _ = write!(self.0, "{name}_sum");
        self.labels(labels, None);
        let _ = writeln!(self.0, " {}", number(h.sum));
        let _ = write!(self.0, "{name}_count");
        self.labels(labels, None);
        let _ = writeln!(self.0, " {}", h.count);
    }

    fn labels(&mut self, labels: &[(&str, &str)], le: Option<&str>) {
        if labels.is_empty() && le.is_none() {
            return;
        }
        self.0.push('{');
        let all = labels.iter().copied().chain(le.map(|le| ("le", le)));
        for (i, (k, v)) in all.enumerate() {
            if i > 0 {
                self.0.push(',');
            }
            let _ = write!(self.0, "{k}=\"{}\"", escaped(v));
        }
        self.0.push('}');
    }
}

/// A label value as the format quotes it: backslash, double quote and line feed escaped.
fn escaped(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A value as the format writes it (Go's float syntax: integers without a point).
fn number(v: f64) -> String {
    if v.is_finite() && v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_histogram_is_written_with_buckets_added_up_and_labels_escaped() {
        let mut h = Histogram::default();
        for v in [0.2, 0.2, 3.0] {
            h.observe(&[0.5, 1.0], v);
        }
        let mut t = Text::default();
        t.histogram("x_seconds", &[("a", "q\"\\\n")], &[0.5, 1.0], &h);
        assert_eq!(
            t.0,
            "x_seconds_bucket{a=\"q\\\"\\\\\\n\",le=\"0.5\"} 2\n\
             x_seconds_bucket{a=\"q\\\"\\\\\\n\",le=\"1\"} 2\n\
             x_seconds_bucket{a=\"q\\\"\\\\\\n\",le=\"+Inf\"} 3\n\
             x_seconds_sum{a=\"q\\\"\\\\\\n\"} 3.4\n\
             x_seconds_count{a=\"q\\\"\\\\\\n\"} 3\n"
        );
    }
}
