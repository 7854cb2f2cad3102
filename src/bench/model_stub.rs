//! An OpenAI-compatible endpoint on 127.0.0.1 that answers like a competent model, for the
//! benchmarks that need a real HTTP model without one (`load_outage`), and that can be taken
//! down: every call from a given one on, for a while, answers HTTP 500.
//!
//! What it answers (`competent`): the skill is read from the answer schema's name (constrained
//! JSON, the default `structured_output: auto`); a free-text skill gets its tag. The manager
//! acts on each notice (task created → one stage for the first worker listed; stage complete →
//! finish it; task judged → finish it), and on a goal that says `GOAL<name>` opens a task; it
//! carries what to do through its own steps as an `ACTION …` line. Workers plan a draft and a
//! check, think, reflect and sum up.
//!
//! With a [`ToolPlay`] (`parallel_tools`), workers plan one tool step on the named MCP server
//! instead, and a native tool loop's first request is answered with that many calls of the
//! first function it offers, all in one reply; the next request (the results in) with a text.

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The text between `start` and `end` in `text`.
fn between<'a>(text: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let from = text.find(start)? + start.len();
    let len = text[from..].find(end)?;
    Some(text[from..from + len].trim())
}

/// The current step's section of a user prompt, to its end (a re-ask adds to it): the section
/// that holds the step's `- executor:` line. The history, memory and pending steps come before
/// it and may quote earlier notices; data embedded in a prompt never opens a section.
pub fn current_step(user: &str) -> &str {
    let ids = user.rfind("\n- executor: ").unwrap_or(user.len());
    match user[..ids].rfind("\n# ") {
        Some(start) => &user[start + 1..],
        None => user,
    }
}

/// What a competent model answers to a request whose answer schema is named `schema` (None: a
/// free-text skill) and whose user prompt is `user`; None when it has no answer.
pub fn competent(schema: Option<&str>, user: &str) -> Option<String> {
    // The summary of older history an agent's prompt folds in (plain text, no step).
    if schema.is_none() && user.contains("Steps to fold into it") {
        return Some("Earlier: tasks were added.".into());
    }
    let user = current_step(user);
    match schema {
        Some(skill) => constrained(skill, user).map(|v| v.to_string()),
        None => match between(user, "- executor: ", " (")? {
            "think" => Some("<think>A draft.</think>".into()),
            "summary" => Some("<completion_summary>Wrote it.</completion_summary>".into()),
            _ => None,
        },
    }
}

fn constrained(skill: &str, user: &str) -> Option<Value> {
    let action = |a: String| json!({"text": "Noted.", "react_action": {"step_intention": "act", "text_content": a}});
    Some(match skill {
        "process_message" => match notice_action(user) {
            Some(a) => action(a),
            None => json!({"text": "Nothing to do."}),
        },
        "decision" => {
            let a = notice_action(user)
                .or_else(|| between(user, "ACTION", "\n").map(|a| format!("ACTION {a}")));
            match a {
                Some(a) => json!({"planned_step": [{"step_intention": "act", "type": "skill",
                    "executor": "task_manager", "text_content": a}]}),
                None => json!({"planned_step": []}),
            }
        }
        "task_manager" => json!({"task_instruction": task_instruction(user)?}),
        "planning" => json!({"planned_step": [
            {"step_intention": "draft", "type": "skill", "executor": "think", "text_content": "draft it"},
            {"step_intention": "check", "type": "skill", "executor": "reflection", "text_content": "done?"}]}),
        "reflection" => json!({"planned_step": []}),
        _ => return None,
    })
}

/// The manager's instruction: straight from the notice, or from the ACTION a decision step
/// carried.
fn task_instruction(user: &str) -> Option<Value> {
    let a = notice_action(user)
        .or_else(|| between(user, "ACTION", "\n").map(|a| format!("ACTION {a}")))?;
    let words: Vec<&str> = a.trim_start_matches("ACTION ").split_whitespace().collect();
    Some(match words.as_slice() {
        ["add_task", goal] => json!({"action": "add_task", "task_name": goal,
            "task_intention": format!("reach {goal}")}),
        ["add_stage", task, worker] => json!({"action": "add_stage", "task_id": task, "stages": [
            {"stage_intention": "do it", "agent_allocation": {*worker: "do it"}}]}),
        ["finish_stage", task, stage] => {
            json!({"action": "finish_stage", "task_id": task, "stage_id": stage})
        }
        ["finish_task", task] => json!({"action": "finish_task", "task_id": task,
            "task_summary": "done", "outcome": "finished"}),
        _ => return None,
    })
}

/// What a notice or goal in the current step asks the manager to do, as an `ACTION …` line.
fn notice_action(user: &str) -> Option<String> {
    if let Some(task) = between(user, "task_id: ", "\n")
        && user.contains("was created with you as its manager")
    {
        // The first agent of the team listed that is not the manager does the work.
        let team = user.split("Agents of the team:").nth(1).unwrap_or_default();
        let worker = team
            .split("\n- `")
            .skip(1)
            .filter_map(|l| l.split('`').next())
            .find(|id| *id != "manager")
            .unwrap_or("writer");
        return Some(format!("ACTION add_stage {task} {worker}"));
    }
    if let (Some(stage), Some(task)) = (
        between(user, "Every agent of stage ", " of task "),
        between(user, " of task ", " has submitted"),
    ) {
        return Some(format!("ACTION finish_stage {task} {stage}"));
    }
    if let (Some(stage), Some(task)) = (
        between(user, "cannot go on in stage ", " of task "),
        between(user, "cannot go on in stage ", ":").and_then(|s| s.split(" of task ").nth(1)),
    ) {
        // A stuck worker: the stage is accepted as it is.
        return Some(format!("ACTION finish_stage {task} {stage}"));
    }
    if let Some(task) = between(user, "[TaskState] Task ", " has no stage left") {
        return Some(format!("ACTION finish_task {task}"));
    }
    between(user, "GOAL<", ">").map(|goal| format!("ACTION add_task {goal}"))
}

/// When the endpoint is down: from the `from`-th call on, for `for`.
#[derive(Clone, Copy, Debug)]
pub struct Outage {
    pub from: usize,
    pub lasts: Duration,
}

/// What the stub's workers do instead of a draft: one tool step whose native loop asks for
/// `calls` calls at once.
#[derive(Clone, Debug)]
pub struct ToolPlay {
    /// The MCP server the planned tool step names.
    pub server: String,
    /// Calls of the first offered function in the loop's first reply.
    pub calls: usize,
}

/// The intention of the tool step a [`ToolPlay`] plans (to find it among the steps).
pub const TOOL_STEP: &str = "Call the tools at once";

struct Shared {
    calls: AtomicUsize,
    play: Option<ToolPlay>,
    outage: Option<Outage>,
    down_until: Mutex<Option<Instant>>,
    /// Calls answered 500 for the outage.
    refused: AtomicUsize,
}

/// The stub server; stops when dropped.
pub struct ModelStub {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    server: tokio::task::JoinHandle<()>,
}

impl ModelStub {
    /// Serves on 127.0.0.1 (a free port) in the current tokio runtime.
    pub async fn start(outage: Option<Outage>) -> std::io::Result<ModelStub> {
        Self::serve(outage, None).await
    }

    /// A stub whose workers plan `play`'s tool step (no outage).
    pub async fn start_play(play: ToolPlay) -> std::io::Result<ModelStub> {
        Self::serve(None, Some(play)).await
    }

    async fn serve(outage: Option<Outage>, play: Option<ToolPlay>) -> std::io::Result<ModelStub> {
        let shared = Arc::new(Shared {
            calls: AtomicUsize::new(0),
            play,
            outage,
            down_until: Mutex::new(None),
            refused: AtomicUsize::new(0),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(answer))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(ModelStub {
            addr,
            shared,
            server,
        })
    }

    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Calls received, and those answered 500 for the outage.
    pub fn calls(&self) -> (usize, usize) {
        (
            self.shared.calls.load(Ordering::SeqCst),
            self.shared.refused.load(Ordering::SeqCst),
        )
    }
}

impl Drop for ModelStub {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn answer(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let n = shared.calls.fetch_add(1, Ordering::SeqCst);
    if let Some(o) = shared.outage {
        let mut until = shared.down_until.lock().unwrap_or_else(|p| p.into_inner());
        if n == o.from {
            *until = Some(Instant::now() + o.lasts);
        }
        if until.is_some_and(|t| Instant::now() < t) {
            shared.refused.fetch_add(1, Ordering::SeqCst);
            let e = json!({"error": {"message": "upstream is down", "type": "server_error"}});
            return (StatusCode::INTERNAL_SERVER_ERROR, axum::Json(e)).into_response();
        }
    }
    let req: Value = serde_json::from_slice(&body).unwrap_or_default();
    let user = req["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default();
    let schema = req["response_format"]["json_schema"]["name"].as_str();
    if let Some(play) = &shared.play {
        if req.get("tools").is_some() {
            return tool_turn(play, &req);
        }
        if schema == Some("planning") {
            return completion(
                json!({"role": "assistant", "content": play_plan(play)}),
                "stop",
            );
        }
    }
    let Some(text) = competent(schema, user) else {
        let e = json!({"error": {"message": "the stub has no answer for this", "type": "invalid_request_error"}});
        return (StatusCode::BAD_REQUEST, axum::Json(e)).into_response();
    };
    if req["stream"] == true {
        return streamed(&text);
    }
    completion(json!({"role": "assistant", "content": text}), "stop")
}

/// A whole (not streamed) chat completion of one `message`.
fn completion(message: Value, finish: &str) -> Response {
    axum::Json(json!({
        "id": "stub", "object": "chat.completion", "created": 1_700_000_000u32, "model": "stub",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
    }))
    .into_response()
}

/// A worker's plan under a [`ToolPlay`]: the tool step, then a check.
fn play_plan(play: &ToolPlay) -> String {
    json!({"planned_step": [
        {"step_intention": TOOL_STEP, "type": "tool", "executor": play.server,
         "text_content": format!("Call the server's tool {} times at once.", play.calls)},
        {"step_intention": "check", "type": "skill", "executor": "reflection", "text_content": "done?"}]})
    .to_string()
}

/// A native tool loop's turn under a [`ToolPlay`]: before any result, `calls` calls of the
/// first function offered (ids `c0`, `c1`, …) in one reply; once the results are in, a text.
fn tool_turn(play: &ToolPlay, req: &Value) -> Response {
    let results = req["messages"]
        .as_array()
        .map_or(0, |m| m.iter().filter(|m| m["role"] == "tool").count());
    let function = req["tools"][0]["function"]["name"].as_str().unwrap_or("?");
    if results > 0 {
        let text = format!("The {results} calls of {function} are done.");
        return completion(json!({"role": "assistant", "content": text}), "stop");
    }
    let calls: Vec<Value> = (0..play.calls)
        .map(|i| {
            json!({"id": format!("c{i}"), "type": "function",
                   "function": {"name": function, "arguments": "{}"}})
        })
        .collect();
    let message = json!({"role": "assistant", "content": null, "tool_calls": calls});
    completion(message, "tool_calls")
}

/// The answer as server-sent events: the text in one chunk, its end, the usage, `[DONE]`.
fn streamed(text: &str) -> Response {
    let chunk = |delta: Value, finish: Option<&str>, usage: Option<Value>| {
        let mut c = json!({"id": "stub", "object": "chat.completion.chunk",
            "created": 1_700_000_000u32, "model": "stub",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        if let Some(u) = usage {
            c["choices"] = json!([]);
            c["usage"] = u;
        }
        format!("data: {c}\n\n")
    };
    let body = [
        chunk(json!({"role": "assistant", "content": text}), None, None),
        chunk(json!({}), Some("stop"), None),
        chunk(
            json!({}),
            None,
            Some(json!({"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120})),
        ),
        "data: [DONE]\n\n".to_owned(),
    ]
    .concat();
    ([("content-type", "text/event-stream")], body).into_response()
}
