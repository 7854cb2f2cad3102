//! `GET /api/task/{id}/events` over real HTTP, as a client of the seeds' event stream reads it:
//! the tools example's task tells FLOW_START, each step's STEP_INIT → STEP_INPUT (a tool call
//! with its arguments) → STEP_OUTPUT, and FLOW_SUCCESS, in order; a client that drops the
//! connection and comes back with `Last-Event-ID` misses nothing and gets nothing twice; an
//! answer streamed from an OpenAI-compatible endpoint arrives as TEXT_ADD deltas that make the
//! answer the endpoint sent, ended by `agent_stream_done`.

use crate::support::openai_stub;
use crate::support::scratch;

use cohort::actors::{Host, Team, start_team};
use cohort::api::{ApiState, router};
use cohort::config::load_team;
use futures::StreamExt;
use openai_stub::{OpenAiStub, StubResponse};
use scratch::Scratch;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

/// One server-sent event.
#[derive(Clone, Debug, PartialEq)]
struct SseEvent {
    name: String,
    id: Option<String>,
    data: Value,
}

/// A client of one task's stream, reading its events one by one.
struct Stream {
    response: reqwest::Response,
    buf: String,
}

impl Stream {
    async fn open(
        addr: SocketAddr,
        token: &str,
        task: &str,
        query: &str,
        last: Option<&str>,
    ) -> Stream {
        let mut req = reqwest::Client::new()
            .get(format!("http://{addr}/api/task/{task}/events{query}"))
            .bearer_auth(token);
        if let Some(last) = last {
            req = req.header("last-event-id", last);
        }
        let response = req.send().await.unwrap();
        assert_eq!(response.status(), 200, "{:?}", response.headers());
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        Stream {
            response,
            buf: String::new(),
        }
    }

    /// The next event; `None` when the server ended the stream.
    async fn next(&mut self) -> Option<SseEvent> {
        loop {
            if let Some(at) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..at + 2).collect();
                if let Some(e) = parse(&block) {
                    return Some(e);
                }
                continue;
            }
            let chunk = tokio::time::timeout(Duration::from_secs(60), self.response.chunk())
                .await
                .expect("an event within a minute")
                .unwrap()?;
            self.buf.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    }

    /// Events up to and with the task's end (FLOW_SUCCESS/FAILED/CANCEL).
    async fn read_to_the_end(&mut self, got: &mut Vec<SseEvent>) {
        while let Some(e) = self.next().await {
            let end =
                e.name.starts_with("FLOW_") && e.name != "FLOW_START" && e.name != "FLOW_STOP";
            got.push(e);
            if end {
                return;
            }
        }
        panic!("the stream ended before the task did: {got:#?}");
    }
}

/// An event block (`event:`, `id:`, `data:` lines); comments (keep-alives) make none.
fn parse(block: &str) -> Option<SseEvent> {
    let (mut name, mut id, mut data) = (None, None, String::new());
    for line in block.lines() {
        if let Some(v) = line.strip_prefix("event:") {
            name = Some(v.trim().to_owned());
        } else if let Some(v) = line.strip_prefix("id:") {
            id = Some(v.trim().to_owned());
        } else if let Some(v) = line.strip_prefix("data:") {
            data.push_str(v.strip_prefix(' ').unwrap_or(v));
        }
    }
    Some(SseEvent {
        name: name?,
        id,
        data: serde_json::from_str(&data).unwrap(),
    })
}

/// The seq of an event id (`{epoch}-{seq}`).
fn seq(id: &str) -> u64 {
    id.rsplit_once('-').unwrap().1.parse().unwrap()
}

/// Serves `team`'s API on a free port; logs the operator in.
async fn serve(
    team: &Team,
    cfg: &cohort::config::TeamConfig,
    password: &str,
) -> (SocketAddr, String) {
    let state = ApiState::new(team, &cfg.humans, None, Vec::new());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router(state)).await.unwrap() });
    let login: Value = reqwest::Client::new()
        .post(format!("http://{addr}/api/bind_human_agent"))
        .json(&json!({"human_agent_id": "operator", "password": password}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    (addr, login["token"].as_str().unwrap().to_owned())
}

/// The tools example with every scripted answer written out over `delay_ms` (so each streams
/// in pieces, and the task lasts long enough to be followed from its start).
fn tools_example(delay_ms: u64) -> Scratch {
    let dir = Scratch::new("task-events");
    for sub in ["servers", "workspace"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    for f in ["team.yaml", "servers/workspace.yaml"] {
        std::fs::copy(Path::new("examples/tools").join(f), dir.join(f)).unwrap();
    }
    let script = std::fs::read_to_string("examples/tools/script.yaml").unwrap();
    let mut script: serde_yaml::Value = serde_yaml::from_str(&script).unwrap();
    for skills in script["replies"].as_mapping_mut().unwrap().values_mut() {
        for replies in skills.as_mapping_mut().unwrap().values_mut() {
            for reply in replies.as_sequence_mut().unwrap() {
                let text = reply.as_str().unwrap().to_owned();
                *reply = serde_yaml::to_value(json!({"text": text, "delay_ms": delay_ms})).unwrap();
            }
        }
    }
    std::fs::write(
        dir.join("script.yaml"),
        serde_yaml::to_string(&script).unwrap(),
    )
    .unwrap();
    dir
}

/// Each step's text as the TEXT_ADD deltas make it (each placed at its offset).
fn texts(events: &[SseEvent]) -> HashMap<String, String> {
    let mut texts: HashMap<String, String> = HashMap::new();
    for e in events.iter().filter(|e| e.name == "TEXT_ADD") {
        let text = texts
            .entry(e.data["step_id"].as_str().unwrap().to_owned())
            .or_default();
        let offset = e.data["offset"].as_u64().unwrap() as usize;
        assert!(offset <= text.chars().count(), "a gap before {e:?}");
        *text = text.chars().take(offset).collect();
        text.push_str(e.data["delta"].as_str().unwrap());
    }
    texts
}

/// The events but TEXT_ADD, which a late reader gets as fewer, larger deltas.
fn flow_of(events: &[SseEvent]) -> Vec<(String, Value)> {
    events
        .iter()
        .filter(|e| e.name != "TEXT_ADD")
        .map(|e| (e.name.clone(), e.data.clone()))
        .collect()
}

async fn task_of(team: &Team) -> String {
    for _ in 0..500 {
        let found = team.monitor.read(|s| {
            s.tasks
                .keys()
                .find(|t| **t != team.base_task)
                .map(|t| t.to_string())
        });
        if let Some(t) = found {
            return t;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no task was made for the goal");
}

#[actix::test]
async fn the_tools_example_reads_as_seed_000_tells_it_and_a_reconnect_misses_nothing() {
    let dir = tools_example(150);
    let cfg = load_team(&dir.join("team.yaml")).unwrap();
    let team = start_team(&cfg, &Host::new(&|_| None, env!("CARGO_BIN_EXE_cohort"))).unwrap();
    let (addr, token) = serve(&team, &cfg, "cohort-demo").await;
    team.submit_goal(None, "Write a greeting file")
        .await
        .unwrap();
    let task = task_of(&team).await;

    // One client follows the whole task; another drops its connection part way.
    let mut whole = Stream::open(addr, &token, &task, "", None).await;
    let mut first = Stream::open(addr, &token, &task, "", None).await;
    let follow_whole = tokio::spawn(async move {
        let mut got = Vec::new();
        whole.read_to_the_end(&mut got).await;
        got
    });
    let mut dropped = Vec::new();
    while dropped
        .iter()
        .filter(|e: &&SseEvent| e.name == "TEXT_ADD")
        .count()
        < 3
    {
        dropped.push(first.next().await.unwrap());
    }
    drop(first);
    let last = dropped.iter().rev().find_map(|e| e.id.clone()).unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let mut again = Stream::open(addr, &token, &task, "", Some(&last)).await;
    let mut resumed = Vec::new();
    again.read_to_the_end(&mut resumed).await;
    let whole = follow_whole.await.unwrap();

    // In order: the task's start, its steps, its end.
    let names: Vec<&str> = whole.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names[0], "FLOW_START", "{names:?}");
    // The plan's risk: the workspace server's tools, told or not yet described.
    let risk = &whole[0].data["risk"];
    assert!(
        ["low", "medium", "high"].contains(&risk["risk"].as_str().unwrap()),
        "{risk}"
    );
    assert!(
        risk["tool"].as_str().unwrap().starts_with("workspace/")
            || risk["unknown_servers"] == json!(["workspace"]),
        "{risk}"
    );
    assert_eq!(*names.last().unwrap(), "FLOW_SUCCESS", "{names:?}");
    let mut seen: HashMap<String, Vec<&str>> = HashMap::new();
    for e in &whole {
        if let Some(step) = e.data["step_id"].as_str() {
            seen.entry(step.to_owned())
                .or_default()
                .push(e.name.as_str());
        }
    }
    for (step, names) in &seen {
        let at = |n: &str| names.iter().position(|x| *x == n);
        assert_eq!(at("STEP_INIT"), Some(0), "{step}: {names:?}");
        if let Some(out) = at("STEP_OUTPUT") {
            assert!(
                at("STEP_INPUT").is_some_and(|i| i < out),
                "{step}: {names:?}"
            );
        }
    }
    // The tool step that writes the file carries its call's arguments and its result.
    let write = whole
        .iter()
        .find(|e| e.name == "STEP_INPUT" && e.data["input"]["tool_name"] == "write_file")
        .unwrap_or_else(|| panic!("no STEP_INPUT of write_file: {names:?}"));
    assert_eq!(write.data["input"]["arguments"]["path"], "hello.txt");
    assert_eq!(write.data["phase"], "workspace");
    assert!(
        whole
            .iter()
            .any(|e| e.name == "STEP_OUTPUT" && e.data["step_id"] == write.data["step_id"])
    );
    assert!(names.contains(&"agent_stream_done"), "{names:?}");

    // The reconnect went on just after the last id it had: no gap, nothing twice.
    let ids: Vec<u64> = resumed
        .iter()
        .filter_map(|e| e.id.as_deref())
        .map(seq)
        .collect();
    assert_eq!(ids[0], seq(&last) + 1, "{resumed:#?}");
    assert!(ids.windows(2).all(|w| w[1] == w[0] + 1), "{ids:?}");
    assert!(resumed.iter().all(|e| e.name != "stream_reset"));
    let mut joined = dropped.clone();
    joined.extend(resumed);
    assert_eq!(flow_of(&joined), flow_of(&whole));
    assert_eq!(texts(&joined), texts(&whole));

    // Each step's deltas make the answer its model gave (as the team's call log has it).
    let calls = team.calls.clone();
    for (step, text) in texts(&whole) {
        let answered = calls.of_step(&step.as_str().into());
        let reply = answered.last().and_then(|c| c.reply.clone()).unwrap();
        assert_eq!(text, &*reply, "step {step}");
    }

    // A client from another run (or too far behind) is told to start again, then told all.
    let mut stale = Stream::open(addr, &token, &task, "?names=seed004", Some("1-5")).await;
    let reset = stale.next().await.unwrap();
    assert_eq!(reset.name, "stream_reset");
    let mut replayed = Vec::new();
    stale.read_to_the_end(&mut replayed).await;
    assert_eq!(replayed[0].name, "FLOW_START");
    assert!(
        replayed.iter().any(|e| e.name == "process_event"),
        "seed 004's names"
    );
    assert_eq!(
        flow_of(&replayed)
            .iter()
            .filter(|(n, _)| n == "STEP_INIT")
            .count(),
        flow_of(&whole)
            .iter()
            .filter(|(n, _)| n == "STEP_INIT")
            .count()
    );
    // After the end the stream closes by itself.
    assert!(
        tokio::time::timeout(Duration::from_secs(10), stale.next())
            .await
            .unwrap()
            .is_none()
    );

    // The same flow on the websocket, one frame per event.
    let url = format!("ws://{addr}/ws?token={token}&format=flow&task={task}");
    let (mut socket, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let mut frames = Vec::new();
    while let Some(Ok(msg)) = socket.next().await {
        let Ok(text) = msg.to_text() else { break };
        if text.is_empty() {
            break;
        }
        let frame: Value = serde_json::from_str(text).unwrap();
        assert_eq!(frame["type"], "flow", "{frame}");
        let name = frame["name"].as_str().unwrap().to_owned();
        frames.push(SseEvent {
            id: frame["id"].as_str().map(str::to_owned),
            data: frame["data"].clone(),
            name,
        });
        if frames.last().unwrap().name == "FLOW_SUCCESS" {
            break;
        }
    }
    assert_eq!(
        flow_of(&frames),
        flow_of(&replayed)
            .into_iter()
            .map(|(n, d)| {
                let n = match n.as_str() {
                    "process_event" => d["event"].as_str().unwrap().to_owned(),
                    _ => n,
                };
                (n, d)
            })
            .collect::<Vec<_>>()
    );
    assert_eq!(
        frames.last().unwrap().id.as_deref().map(seq),
        replayed.last().unwrap().id.as_deref().map(seq)
    );

    let r = reqwest::Client::new()
        .get(format!("http://{addr}/api/task/no-such-task/events"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    team.stop(Duration::from_secs(5)).await;
}

/// A team on a streaming OpenAI-compatible endpoint: the manager's answer arrives as TEXT_ADD
/// deltas, placed at their offsets, that make exactly what the endpoint streamed.
#[actix::test]
async fn an_answer_streamed_from_the_endpoint_arrives_as_deltas_that_make_it() {
    let stub = OpenAiStub::start().await;
    let answer = r#"<task_instruction>{"action": "add_task", "task_name": "Haiku", "task_intention": "write one about rain"}</task_instruction>"#;
    let pieces: Vec<&str> = answer
        .as_bytes()
        .chunks(12)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    stub.push(
        StubResponse::streamed(&pieces, Some((40, 20))).with_event_delay(Duration::from_millis(60)),
    );
    let dir = Scratch::new("task-events-stream");
    let hash = cohort::auth::hash_password("pw-for-the-stream").unwrap();
    std::fs::write(
        dir.join("team.yaml"),
        format!(
            "llm: {{provider: openai, base_url: '{}', model: m, max_retries: 0, structured_output: off, stream: true, idle_timeout_secs: 30}}\n\
             humans:\n  - {{id: operator, role: operator, access: operator, password_hash: \"{hash}\"}}\n\
             agents:\n  - {{id: manager, role: manager, skills: [task_manager]}}\n",
            stub.base_url()
        ),
    )
    .unwrap();
    let cfg = load_team(&dir.join("team.yaml")).unwrap();
    let team = start_team(&cfg, &Host::new(&|_| None, env!("CARGO_BIN_EXE_cohort"))).unwrap();
    let (addr, token) = serve(&team, &cfg, "pw-for-the-stream").await;
    // The goal's step is in the base task, which never ends: follow it from before the goal.
    let base = team.base_task.to_string();
    let mut stream = Stream::open(addr, &token, &base, "", None).await;
    team.submit_goal(None, "a haiku").await.unwrap();
    let mut got = Vec::new();
    while !got
        .iter()
        .any(|e: &SseEvent| e.name == "STEP_OUTPUT" || e.name == "STEP_ERROR")
    {
        got.push(stream.next().await.unwrap());
    }
    let deltas = got.iter().filter(|e| e.name == "TEXT_ADD").count();
    assert!(deltas >= 2, "the answer came in pieces: {got:#?}");
    let texts = texts(&got);
    assert_eq!(texts.len(), 1, "{texts:?}");
    assert_eq!(texts.values().next().unwrap(), answer);
    let done = got.iter().find(|e| e.name == "agent_stream_done").unwrap();
    assert_eq!(done.data["chars"], answer.chars().count());
    let names: Vec<&str> = got.iter().map(|e| e.name.as_str()).collect();
    let at = |n: &str| names.iter().position(|x| *x == n).unwrap();
    assert!(
        at("STEP_INPUT") < at("TEXT_ADD") && at("agent_stream_done") < at("STEP_OUTPUT"),
        "{names:?}"
    );
    team.stop(Duration::from_secs(5)).await;
}

/// `docs/flow-events.schema.json` is the events' schema as the code makes them (each event one
/// of its `oneOf`); `UPDATE_GOLDEN=1 cargo test --test suite task_events::` rewrites it.
#[test]
fn the_documented_schema_of_each_flow_event_is_the_codes() {
    let schema = schemars::schema_for!(cohort::event::flow::FlowEvent);
    let made = serde_json::to_string_pretty(&schema).unwrap() + "\n";
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/flow-events.schema.json");
    if std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1") {
        std::fs::write(&path, &made).unwrap();
    }
    let documented = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(
        documented,
        made,
        "the flow events changed (`UPDATE_GOLDEN=1 cargo test --test suite task_events::` rewrites {})",
        path.display()
    );
    let events = schema.get("oneOf").and_then(Value::as_array).unwrap();
    assert_eq!(events.len(), 14, "one schema per event");
}
