//! A tool call that fails for a passing reason is made again within its step (seed 000 §5.2,
//! §9.2), after growing pauses, when the tool says a repeat is harmless: a read-only lookup
//! whose server does not answer in time twice, then answers, finishes with its two retries
//! kept on the step; an append (no hints: it may have acted) that does not answer in time is
//! made once and fails. The MCP server is a real one over streamable HTTP whose tools count
//! their calls.

#[path = "support/scratch.rs"]
mod scratch;

use cohort::actors::{Host, start_team};
use cohort::config::load_team;
use cohort::state::{Executor, StepExecutionState};
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
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

#[derive(Default)]
struct Counts {
    append: AtomicUsize,
    lookup: AtomicUsize,
}

#[derive(Clone)]
struct Flaky {
    counts: Arc<Counts>,
    tool_router: ToolRouter<Self>,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct TextArgs {
    /// Some text.
    text: String,
}

/// Longer than the server's `timeout_secs`: the call times out.
const TOO_LONG: Duration = Duration::from_secs(3);

#[tool_router]
impl Flaky {
    #[tool(description = "Append a line to the ledger (not safe to repeat).")]
    async fn append(&self, Parameters(a): Parameters<TextArgs>) -> String {
        self.counts.append.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(TOO_LONG).await;
        format!("appended {}", a.text)
    }

    #[tool(
        description = "Look a line up in the ledger.",
        annotations(read_only_hint = true)
    )]
    async fn lookup(&self, Parameters(a): Parameters<TextArgs>) -> String {
        // The first two calls do not answer in time; the third does.
        if self.counts.lookup.fetch_add(1, Ordering::SeqCst) < 2 {
            tokio::time::sleep(TOO_LONG).await;
        }
        format!("found {}", a.text)
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Flaky {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}

async fn serve(counts: Arc<Counts>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = Flaky {
        counts,
        tool_router: Flaky::tool_router(),
    };
    let service: StreamableHttpService<Flaky, LocalSessionManager> = StreamableHttpService::new(
        move || Ok(server.clone()),
        Default::default(),
        StreamableHttpServerConfig::default(),
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    tokio::spawn(async move { axum::serve(listener, router).await });
    format!("http://{addr}/mcp")
}

const SCRIPT: &str = r#"
replies:
  manager:
    task_manager:
      - when: "GOAL#"
        text: '<task_instruction>{"action": "add_task", "task_name": "Ledger", "task_intention": "Use the ledger."}</task_instruction>'
      - when: "was created with you as its manager"
        text: '<task_instruction>{"action": "add_stage", "task_id": "{{task_id}}", "stages": [{"stage_intention": "Ledger work", "agent_allocation": {"writer": "WRITE# one line", "reader": "READ# one line"}}]}</task_instruction>'
      - when: "has submitted its completion summary"
        text: '<task_instruction>{"action": "finish_stage", "task_id": "{{task_id}}", "stage_id": "{{stage_id}}"}</task_instruction>'
      - when: "cannot go on"
        text: '<task_instruction>{"action": "finish_stage", "task_id": "{{task_id}}", "stage_id": "{{stage_id}}"}</task_instruction>'
      - when: "has no stage left to run"
        text: '<task_instruction>{"action": "finish_task", "task_id": "{{task_id}}", "task_summary": "Done."}</task_instruction>'
  writer:
    planning:
      - when: "WRITE#"
        text: '<planned_step>[{"step_intention": "Prepare", "type": "skill", "executor": "instruction_generation", "text_content": "PREP-APPEND"}, {"step_intention": "Append", "type": "tool", "executor": "ledger", "text_content": "append it"}]</planned_step>'
    instruction_generation:
      - when: "PREP-APPEND"
        text: '<tool_instruction>{"tool_name": "append", "arguments": {"text": "one line"}}</tool_instruction>'
    tool_decision:
      - when: "Decide how to go on"
        text: 'Enough.<planned_step>[]</planned_step>'
    reflection:
      - when: "every planned step has run"
        text: '<planned_step>[{"step_intention": "Report", "type": "skill", "executor": "summary", "text_content": "SUMMARY#"}]</planned_step>'
    summary:
      - when: "SUMMARY#"
        text: '<completion_summary>Handled the ledger.</completion_summary>'
  reader:
    planning:
      - when: "READ#"
        text: '<planned_step>[{"step_intention": "Prepare", "type": "skill", "executor": "instruction_generation", "text_content": "PREP-LOOKUP"}, {"step_intention": "Look up", "type": "tool", "executor": "ledger", "text_content": "look it up"}]</planned_step>'
    instruction_generation:
      - when: "PREP-LOOKUP"
        text: '<tool_instruction>{"tool_name": "lookup", "arguments": {"text": "one line"}}</tool_instruction>'
    tool_decision:
      - when: "Decide how to go on"
        text: 'Enough.<planned_step>[]</planned_step>'
    reflection:
      - when: "every planned step has run"
        text: '<planned_step>[{"step_intention": "Report", "type": "skill", "executor": "summary", "text_content": "SUMMARY#"}]</planned_step>'
    summary:
      - when: "SUMMARY#"
        text: '<completion_summary>Read the ledger.</completion_summary>'
"#;

fn write_team(dir: &Path, url: &str) -> std::path::PathBuf {
    std::fs::create_dir_all(dir.join("servers")).unwrap();
    std::fs::write(
        dir.join("servers/ledger.yaml"),
        format!("name: ledger\ndescription: A ledger.\nurl: {url}\ntimeout_secs: 1\n"),
    )
    .unwrap();
    std::fs::write(dir.join("script.yaml"), SCRIPT).unwrap();
    let team = dir.join("team.yaml");
    std::fs::write(
        &team,
        "name: ledger\nlanguage: en\nmcp_servers: servers\nllm:\n  provider: scripted\n  script: script.yaml\n\
         agents:\n\
         \x20 - {id: manager, name: M, role: manager, profile: p, skills: [process_message, decision, task_manager]}\n\
         \x20 - {id: writer, name: W, role: writer, profile: p, skills: [planning, reflection, summary, instruction_generation, tool_decision], tools: [ledger]}\n\
         \x20 - {id: reader, name: R, role: reader, profile: p, skills: [planning, reflection, summary, instruction_generation, tool_decision], tools: [ledger]}\n",
    )
    .unwrap();
    team
}

#[actix::test]
async fn a_harmless_call_that_times_out_is_made_again_and_one_that_may_have_acted_is_not() {
    let dir = Scratch::new("tool-retry");
    let counts = Arc::new(Counts::default());
    let url = serve(counts.clone()).await;
    let cfg = load_team(&write_team(&dir, &url)).unwrap();
    let vars = |_: &str| None;
    let team = start_team(&cfg, &Host::new(&vars, env!("CARGO_BIN_EXE_cohort"))).unwrap();
    team.submit_goal(None, "GOAL# use the ledger")
        .await
        .unwrap();
    let tool_step = |agent: &str| {
        team.monitor.read(|s| {
            s.steps()
                .find(|st| {
                    st.agent_id.as_str() == agent && matches!(st.executor, Executor::Tool(_))
                })
                .cloned()
        })
    };
    let over = |agent: &str| tool_step(agent).is_some_and(|s| s.execution_state.is_over());
    for _ in 0..1_500 {
        if over("reader") && over("writer") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let lookup = tool_step("reader").expect("the reader's tool step");
    assert_eq!(
        lookup.execution_state,
        StepExecutionState::Finished,
        "{lookup:?}"
    );
    let result = lookup.execute_result.as_ref().unwrap();
    let waited: Vec<u64> = result.tool_retries.iter().map(|r| r.waited_ms).collect();
    assert_eq!(
        waited,
        [250, 500],
        "two retries, the pause doubling: {result}"
    );
    assert!(
        result
            .tool_retries
            .iter()
            .all(|r| r.error.contains("did not answer within")),
        "{result}"
    );
    assert_eq!(counts.lookup.load(Ordering::SeqCst), 3);
    // Seen by clients as the step's result.
    assert_eq!(
        result.to_value()["tool_retries"].as_array().unwrap().len(),
        2
    );

    let append = tool_step("writer").expect("the writer's tool step");
    let result = append.execute_result.as_ref().unwrap();
    assert!(
        result
            .error
            .as_deref()
            .is_some_and(|e| e.contains("did not answer within")),
        "{result}"
    );
    assert!(result.tool_retries.is_empty(), "{result}");
    assert_eq!(
        counts.append.load(Ordering::SeqCst),
        1,
        "made once: it may have acted"
    );
    team.shutdown().await;
}
