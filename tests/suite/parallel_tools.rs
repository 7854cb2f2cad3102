//! Several tool calls of one native reply run at once, over real HTTP to real MCP servers: the
//! model asks for three `meet` calls in one reply, and each call waits (up to 10 s) until all
//! three are in the server together, so they can only meet if the loop makes them
//! concurrently. Their results go back in the order of the calls. The loop offers the tools of
//! both the agent's servers, with the name they share qualified by server.

use crate::support::competent;
use crate::support::openai_stub;
use crate::support::scratch;

use cohort::actors::{Host, start_team};
use cohort::config::load_team;
use cohort::monitor::StateKind;
use openai_stub::{OpenAiStub, RecordedRequest, StubResponse};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{ServerCapabilities, ServerConfig};
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
};
use rmcp::{ServerHandler, tool, tool_handler, tool_router};
use schemars::JsonSchema;
use scratch::Scratch;
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How many `meet` calls are in the server now, and the most there ever were at once.
#[derive(Default)]
struct Room {
    inside: AtomicUsize,
    most: AtomicUsize,
}

#[derive(Clone)]
struct Meeting {
    room: Arc<Room>,
    tool_router: ToolRouter<Self>,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct Who {
    /// Who comes to the meeting.
    who: String,
}

#[tool_router]
impl Meeting {
    #[tool(description = "Wait in the meeting room until three people are in it.")]
    async fn meet(&self, Parameters(w): Parameters<Who>) -> String {
        let now = self.room.inside.fetch_add(1, Ordering::SeqCst) + 1;
        self.room.most.fetch_max(now, Ordering::SeqCst);
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.room.inside.load(Ordering::SeqCst) < 3 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let met = self.room.most.load(Ordering::SeqCst);
        // Stay until everyone saw the full room, then leave.
        tokio::time::sleep(Duration::from_millis(50)).await;
        self.room.inside.fetch_sub(1, Ordering::SeqCst);
        format!("{} met {} in the room", w.who, met)
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Meeting {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}

/// The second server: its own `stamp`, and a `meet` of the same name as the first's.
#[derive(Clone)]
struct Desk {
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl Desk {
    #[tool(description = "Stamp a paper.")]
    async fn stamp(&self, Parameters(w): Parameters<Who>) -> String {
        format!("stamped for {}", w.who)
    }

    #[tool(description = "Meet at the desk.")]
    async fn meet(&self, Parameters(w): Parameters<Who>) -> String {
        format!("{} met at the desk", w.who)
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Desk {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}

async fn serve<S: ServerHandler + Clone + Send + Sync + 'static>(server: S) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let service: StreamableHttpService<S, LocalSessionManager> = StreamableHttpService::new(
        move || Ok(server.clone()),
        Default::default(),
        StreamableHttpServerConfig::default(),
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    tokio::spawn(async move { axum::serve(listener, router).await });
    format!("http://{addr}/mcp")
}

fn team_dir(base_url: &str, meeting: &str, desk: &str) -> Scratch {
    let dir = Scratch::new("parallel-tools");
    std::fs::create_dir_all(dir.join("servers")).unwrap();
    let server = |name: &str, url: &str| {
        let yaml =
            format!("name: {name}\ndescription: The {name}.\nurl: {url}\ntimeout_secs: 30\n");
        std::fs::write(dir.join(format!("servers/{name}.yaml")), yaml).unwrap();
    };
    server("meeting", meeting);
    server("desk", desk);
    std::fs::write(
        dir.join("team.yaml"),
        format!(
            "mcp_servers: servers\n\
             llm: {{provider: openai, base_url: '{base_url}', model: m, tool_calling: native}}\n\
             agents:\n\
             \x20 - {{id: manager, role: manager, skills: [process_message, decision, task_manager]}}\n\
             \x20 - {{id: clerk, role: clerk, skills: [planning, reflection, summary, think, instruction_generation, tool_decision], tools: [meeting, desk]}}\n"
        ),
    )
    .unwrap();
    dir
}

/// A reply asking for the tool calls `calls` (name, who), ids `c0`, `c1`, ….
fn calls(calls: &[(&str, &str)]) -> StubResponse {
    let tool_calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, who))| {
            json!({"id": format!("c{i}"), "type": "function", "function": {
                "name": name, "arguments": json!({"who": who}).to_string()}})
        })
        .collect();
    let body = json!({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": null, "tool_calls": tool_calls}}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60}});
    StubResponse::raw(200, body.to_string())
}

/// The competent stub, with the clerk planning one tool step whose loop asks for three
/// meetings at once, then a stamp from the other server, then answers.
fn answer(req: &RecordedRequest) -> StubResponse {
    if req.body.get("tools").is_some() {
        let messages = req.body["messages"].as_array().unwrap();
        let results = messages.iter().filter(|m| m["role"] == "tool").count();
        return match results {
            0 => calls(&[
                ("meeting__meet", "ann"),
                ("meeting__meet", "bob"),
                ("meeting__meet", "cy"),
            ]),
            3 => calls(&[("stamp", "ann")]),
            _ => StubResponse::reply_with_usage("The three met; the paper is stamped.", 50, 10),
        };
    }
    if req.body["response_format"]["json_schema"]["name"] == "planning" {
        let plan = json!({"planned_step": [
            {"step_intention": "Hold the meeting", "type": "tool", "executor": "meeting",
             "text_content": "Bring ann, bob and cy together, then have the paper stamped."},
            {"step_intention": "Check the goal", "type": "skill", "executor": "reflection", "text_content": "done?"}]});
        return StubResponse::reply_with_usage(&plan.to_string(), 50, 10);
    }
    StubResponse::reply_with_usage(&competent::competent(req), 50, 10)
}

#[actix::test]
async fn a_replys_tool_calls_run_at_once_and_answer_in_their_order() {
    let room = Arc::new(Room::default());
    let meeting = serve(Meeting {
        room: room.clone(),
        tool_router: Meeting::tool_router(),
    })
    .await;
    let desk = serve(Desk {
        tool_router: Desk::tool_router(),
    })
    .await;
    let stub = OpenAiStub::start().await;
    stub.set_fallback(answer);
    let dir = team_dir(&stub.base_url(), &meeting, &desk);
    let cfg = load_team(&dir.join("team.yaml")).unwrap();
    let vars = |_: &str| None;
    let team = start_team(&cfg, &Host::new(&vars, env!("CARGO_BIN_EXE_cohort"))).unwrap();
    team.submit_goal(None, "Please reach GOAL<meet>.")
        .await
        .unwrap();

    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let tasks = team.monitor.snapshot(StateKind::Task);
        if tasks
            .values()
            .any(|t| t["task_name"] == "meet" && t["execution_state"] == "finished")
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the task never finished: {tasks:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        room.most.load(Ordering::SeqCst),
        3,
        "the three calls of one reply were in the server together"
    );

    let reqs = stub.requests();
    let looped: Vec<&RecordedRequest> = reqs
        .iter()
        .filter(|r| r.body.get("tools").is_some())
        .collect();
    assert_eq!(looped.len(), 3, "meetings, stamp, answer");
    let offered: Vec<&str> = looped[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert_eq!(
        offered,
        ["meeting__meet", "desk__meet", "stamp"],
        "{offered:?}"
    );
    // The results answer their calls in the calls' order.
    let answered: Vec<(String, String)> = looped[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            let id = m["tool_call_id"].as_str().unwrap().to_owned();
            (id, m["content"].as_str().unwrap().to_owned())
        })
        .collect();
    let ids: Vec<&str> = answered.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["c0", "c1", "c2"]);
    for ((_, text), who) in answered.iter().zip(["ann", "bob", "cy"]) {
        assert_eq!(text, &format!("{who} met 3 in the room"));
    }

    // Each call is a step of its own, made to the server its name routes to.
    let steps: Vec<Value> = team
        .monitor
        .snapshot(StateKind::Step)
        .into_values()
        .collect();
    let made = |server: &str, tool: &str| {
        steps
            .iter()
            .filter(|s| s["executor"] == server && s["instruction_content"]["tool_name"] == tool)
            .count()
    };
    assert_eq!((made("meeting", "meet"), made("desk", "stamp")), (3, 1));
    team.shutdown().await;
}
