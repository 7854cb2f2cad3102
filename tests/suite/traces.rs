//! Traces over OTLP as an operator's collector gets them: `cohort run` of the quickstart with
//! `OTEL_EXPORTER_OTLP_ENDPOINT` pointing at a receiver written here (HTTP/protobuf, decoded
//! with OpenTelemetry's own protobuf types) gives one trace for the goal, whose spans make the
//! tree goal step → task → stages → steps → model calls, with the GenAI attributes, and whose
//! model calls' tokens add up to the run's closing line; the same spans come over gRPC
//! (`OTEL_EXPORTER_OTLP_PROTOCOL=grpc`, the collector's TraceService served here). A run against
//! a dead receiver still ends.

use axum::Router;
use axum::body::Bytes;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use std::collections::{HashMap, HashSet};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Every span the receiver was sent.
type Received = Arc<Mutex<Vec<Span>>>;

async fn receiver() -> (std::net::SocketAddr, Received) {
    let got: Received = Arc::default();
    let store = got.clone();
    let app = Router::new().route(
        "/v1/traces",
        post(move |body: Bytes| {
            let store = store.clone();
            async move {
                let req = ExportTraceServiceRequest::decode(body).expect("OTLP protobuf");
                let mut spans = store.lock().unwrap();
                for rs in req.resource_spans {
                    for ss in rs.scope_spans {
                        spans.extend(ss.spans);
                    }
                }
                // An empty ExportTraceServiceResponse.
                Vec::<u8>::new()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (addr, got)
}

/// The collector's gRPC TraceService, keeping what it is sent.
struct Collector(Received);

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut spans = self.0.lock().unwrap();
        for rs in request.into_inner().resource_spans {
            for ss in rs.scope_spans {
                spans.extend(ss.spans);
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

/// A gRPC receiver (HTTP/2 without TLS, as collectors listen on 4317).
async fn grpc_receiver() -> (std::net::SocketAddr, Received) {
    let got: Received = Arc::default();
    let service = TraceServiceServer::new(Collector(got.clone()));
    let app = Router::new().route_service(
        "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
        service,
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (addr, got)
}

fn attr<'a>(s: &'a Span, key: &str) -> Option<&'a AnyValue> {
    s.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref()?.value.as_ref())
}

fn int(s: &Span, key: &str) -> i64 {
    match attr(s, key) {
        Some(AnyValue::IntValue(i)) => *i,
        other => panic!("{key} of {}: {other:?}", s.name),
    }
}

fn text<'a>(s: &'a Span, key: &str) -> &'a str {
    match attr(s, key) {
        Some(AnyValue::StringValue(v)) => v,
        other => panic!("{key} of {}: {other:?}", s.name),
    }
}

/// `cohort run --json` of the quickstart: its final states (stdout), what it said (stderr, the
/// closing line) and how long it took.
fn run_quickstart(endpoint: &str, extra: &[(&str, &str)]) -> (serde_json::Value, String, Duration) {
    let started = Instant::now();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cohort"));
    cmd.args([
        "run",
        "--team",
        "examples/quickstart/team.yaml",
        "--goal",
        "Write a haiku about autumn rain",
        "--json",
    ])
    .env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    .env_remove("OTEL_EXPORTER_OTLP_PROTOCOL");
    for (k, v) in extra {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let states = serde_json::from_slice(&out.stdout).expect("the final states");
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    (states, said, started.elapsed())
}

/// The prompt and completion tokens the closing line names (`… 1234 prompt (…) + 56 completion tokens …`).
fn closing_tokens(stdout: &str) -> (i64, i64) {
    let re = regex::Regex::new(r"(\d+) prompt.*?\+ (\d+) completion tokens").unwrap();
    let c = re
        .captures(stdout)
        .unwrap_or_else(|| panic!("no tokens in {stdout}"));
    (c[1].parse().unwrap(), c[2].parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quickstart_run_is_one_trace_with_the_genai_span_tree() {
    let (addr, got) = receiver().await;
    let endpoint = format!("http://{addr}");
    let (states, stdout, _) = tokio::task::spawn_blocking(move || run_quickstart(&endpoint, &[]))
        .await
        .unwrap();
    let spans = got.lock().unwrap().clone();
    assert!(spans.len() > 10, "{} spans", spans.len());

    // One goal, one trace.
    let traces: HashSet<&Vec<u8>> = spans.iter().map(|s| &s.trace_id).collect();
    assert_eq!(
        traces.len(),
        1,
        "{:#?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    // The task names its trace, as the console shows it.
    let hex: String = spans[0]
        .trace_id
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let task = states["task"]
        .as_object()
        .unwrap()
        .values()
        .find(|t| t["task_name"] != "MAS base task")
        .unwrap();
    assert_eq!(task["trace_id"], hex.as_str());
    // Every message of the task travelled in its trace (W3C traceparent), from its sender's
    // span: a span that was sent.
    let pool = task["shared_conversation_pool"].as_array().unwrap();
    assert!(pool.len() >= 3, "{pool:?}");
    for entry in pool {
        let tp = entry["message"]["traceparent"]
            .as_str()
            .unwrap_or_else(|| panic!("{entry}"));
        assert!(
            tp.starts_with(&format!("00-{hex}-")) && tp.ends_with("-01"),
            "{tp}"
        );
    }

    // The tree: one root (the manager's step on the goal); every other span's parent is sent.
    let ids: HashMap<&Vec<u8>, &Span> = spans.iter().map(|s| (&s.span_id, s)).collect();
    let roots: Vec<&Span> = spans
        .iter()
        .filter(|s| s.parent_span_id.is_empty())
        .collect();
    assert_eq!(
        roots.len(),
        1,
        "{:?}",
        roots.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    assert!(
        roots[0].name.starts_with("invoke_agent manager"),
        "{}",
        roots[0].name
    );
    for s in &spans {
        if !s.parent_span_id.is_empty() {
            assert!(
                ids.contains_key(&s.parent_span_id),
                "{}'s parent was not sent",
                s.name
            );
        }
    }
    let parent = |s: &Span| ids[&s.parent_span_id].name.clone();
    // A step made by another agent's message links to the sender's step (in the same trace,
    // and sent); one made by a runtime notice hangs under the stage it is about, no link.
    let linked: Vec<&Span> = spans.iter().filter(|s| !s.links.is_empty()).collect();
    assert_eq!(linked.len(), 2, "{} linked spans", linked.len());
    for s in &linked {
        for l in &s.links {
            assert_eq!(l.trace_id, spans[0].trace_id, "{}", s.name);
            assert!(
                ids.contains_key(&l.span_id),
                "{} links to a span never sent",
                s.name
            );
        }
    }
    // The writer asks the reviewer, who answers: each step links to the other's message.
    let pairs: Vec<(&str, &str)> = linked
        .iter()
        .map(|s| (s.name.as_str(), ids[&s.links[0].span_id].name.as_str()))
        .collect();
    for pair in [
        (
            "invoke_agent reviewer send_message",
            "invoke_agent writer send_message",
        ),
        (
            "invoke_agent writer process_message",
            "invoke_agent reviewer send_message",
        ),
    ] {
        assert!(pairs.contains(&pair), "{pair:?} not in {pairs:#?}");
    }
    let task = spans
        .iter()
        .find(|s| s.name.starts_with("task "))
        .expect("a task span");
    assert_eq!(task.parent_span_id, roots[0].span_id);
    let stages: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name.starts_with("stage "))
        .collect();
    assert_eq!(stages.len(), 2);
    assert!(stages.iter().all(|s| s.parent_span_id == task.span_id));
    let writer = spans
        .iter()
        .find(|s| s.name == "invoke_agent writer think")
        .expect("the writer's think step");
    assert!(parent(writer).starts_with("stage "), "{}", parent(writer));

    // Model calls: GenAI attributes, under their steps; their tokens are the run's.
    let chats: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name.starts_with("chat "))
        .collect();
    assert!(!chats.is_empty());
    for c in &chats {
        assert_eq!(text(c, "gen_ai.operation.name"), "chat");
        assert_eq!(text(c, "gen_ai.provider.name"), "scripted");
        assert!(!text(c, "gen_ai.request.model").is_empty());
        assert!(attr(c, "gen_ai.response.finish_reasons").is_some());
        assert!(parent(c).starts_with("invoke_agent "), "{}", parent(c));
        assert!(c.events.is_empty(), "prompts are not sent unless asked for");
    }
    let sum = |k| chats.iter().map(|c| int(c, k)).sum::<i64>();
    let (prompt, completion) = closing_tokens(&stdout);
    assert!(prompt > 0 && completion > 0, "{stdout}");
    assert_eq!(
        (
            sum("gen_ai.usage.input_tokens"),
            sum("gen_ai.usage.output_tokens")
        ),
        (prompt, completion),
        "{stdout}"
    );
    for s in spans.iter().filter(|s| s.name.starts_with("invoke_agent ")) {
        assert!(!text(s, "cohort.step_id").is_empty());
        assert!(!text(s, "gen_ai.agent.id").is_empty());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_go_as_span_events_only_when_asked_and_a_dead_receiver_never_holds_a_run() {
    let (addr, got) = receiver().await;
    let endpoint = format!("http://{addr}");
    let asked = [("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")];
    let (_, _, took) = tokio::task::spawn_blocking(move || run_quickstart(&endpoint, &asked))
        .await
        .unwrap();
    let spans = got.lock().unwrap().clone();
    let chat = spans.iter().find(|s| s.name.starts_with("chat ")).unwrap();
    let names: Vec<&str> = chat.events.iter().map(|e| e.name.as_str()).collect();
    assert!(
        names.contains(&"gen_ai.user.message") && names.contains(&"gen_ai.choice"),
        "{names:?}"
    );

    // Nobody listens on this port: the run still ends (its traces given up on within their
    // deadline); how much it costs is `cohort bench`'s to measure.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = dead.local_addr().unwrap().port();
    drop(dead);
    let (_, stdout, dead_took) = tokio::task::spawn_blocking(move || {
        run_quickstart(&format!("http://127.0.0.1:{port}"), &[])
    })
    .await
    .unwrap();
    closing_tokens(&stdout);
    assert!(
        dead_took < took + Duration::from_secs(60),
        "{dead_took:?} against {took:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_trace_comes_over_grpc() {
    let (addr, got) = grpc_receiver().await;
    let endpoint = format!("http://{addr}");
    let caller = "4bf92f3577b34da6a3ce929d0e0e4736";
    const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let grpc = [("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"), ("TRACEPARENT", TP)];
    let (_, said, _) = tokio::task::spawn_blocking(move || run_quickstart(&endpoint, &grpc))
        .await
        .unwrap();
    let spans = got.lock().unwrap().clone();
    assert!(
        spans.len() > 10,
        "{} spans over gRPC; the run said {said}",
        spans.len()
    );
    let traces: HashSet<&Vec<u8>> = spans.iter().map(|s| &s.trace_id).collect();
    assert_eq!(traces.len(), 1);
    // Started within a caller's trace (`TRACEPARENT`): the goal's work is in it, its root
    // under the caller's span and linked to it.
    let hex = |b: &[u8]| b.iter().map(|b| format!("{b:02x}")).collect::<String>();
    assert_eq!(hex(&spans[0].trace_id), caller);
    let goal = spans
        .iter()
        .find(|s| hex(&s.parent_span_id) == "00f067aa0ba902b7")
        .expect("a span under the caller's");
    assert!(
        goal.name.starts_with("invoke_agent manager"),
        "{}",
        goal.name
    );
    assert!(
        goal.links.is_empty(),
        "under the caller's span: no link besides"
    );
    let chats = spans.iter().filter(|s| s.name.starts_with("chat ")).count();
    assert!(chats > 0);
}
