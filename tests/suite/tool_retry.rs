//! A tool call that fails for a passing reason is made again within its step (seed 000 §5.2,
//! §9.2), after growing pauses, when the tool says a repeat is harmless: a read-only lookup
//! whose server does not answer in time twice, then answers, finishes with its two retries
//! kept on the step; an append (no hints: it may have acted) that does not answer in time is
//! made once and fails. A native tool loop's call is made again the same way. The MCP server
//! is a real one over streamable HTTP whose tools count their calls.

use crate::support::openai_stub::{OpenAiStub, RecordedRequest, StubResponse};
use crate::support::{competent, ledger, scratch};

use cohort::actors::{Host, start_team};
use cohort::config::load_team;
use cohort::state::{Executor, StepExecutionState};
use ledger::TextArgs;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{ServerCapabilities, ServerConfig};
use rmcp::{ServerHandler, tool, tool_handler, tool_router};
use scratch::Scratch;
use serde_json::json;
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
    ledger::serve(Flaky {
        counts,
        tool_router: Flaky::tool_router(),
    })
    .await
}

#[actix::test]
async fn a_harmless_call_that_times_out_is_made_again_and_one_that_may_have_acted_is_not() {
    let dir = Scratch::new("tool-retry");
    let counts = Arc::new(Counts::default());
    let url = serve(counts.clone()).await;
    let cfg = load_team(&ledger::write_team(&dir, &url, 1)).unwrap();
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

/// The stub model for a clerk that calls tools natively: it plans one tool step on the
/// ledger, whose loop calls `lookup` once and then answers.
fn native_answer(req: &RecordedRequest) -> StubResponse {
    if req.body.get("tools").is_some() {
        let answered = req.body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["role"] == "tool");
        if answered {
            return StubResponse::reply_with_usage("Found it.", 50, 10);
        }
        let body = json!({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null, "tool_calls": [{"id": "call0", "type": "function",
            "function": {"name": "lookup", "arguments": "{\"text\": \"one line\"}"}}]}}],
            "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60}});
        return StubResponse::raw(200, body.to_string());
    }
    if req.body["response_format"]["json_schema"]["name"] == "planning" {
        let plan = json!({"planned_step": [
            {"step_intention": "Look it up", "type": "tool", "executor": "ledger",
             "text_content": "Look the line up."},
            {"step_intention": "Check the goal", "type": "skill", "executor": "reflection", "text_content": "done?"}]});
        return StubResponse::reply_with_usage(&plan.to_string(), 50, 10);
    }
    StubResponse::reply_with_usage(&competent::competent(req), 50, 10)
}

#[actix::test]
async fn a_native_loops_harmless_call_that_times_out_is_made_again_and_kept_on_its_step() {
    let dir = Scratch::new("tool-retry-native");
    let counts = Arc::new(Counts::default());
    let url = serve(counts.clone()).await;
    let stub = OpenAiStub::start().await;
    stub.set_fallback(native_answer);
    std::fs::create_dir_all(dir.join("servers")).unwrap();
    std::fs::write(
        dir.join("servers/ledger.yaml"),
        format!("name: ledger\ndescription: A ledger.\nurl: {url}\ntimeout_secs: 1\n"),
    )
    .unwrap();
    std::fs::write(
        dir.join("team.yaml"),
        format!(
            "mcp_servers: servers\n\
             llm: {{provider: openai, base_url: '{}', model: m, tool_calling: native}}\n\
             agents:\n\
             \x20 - {{id: manager, role: manager, skills: [process_message, decision, task_manager]}}\n\
             \x20 - {{id: clerk, role: clerk, skills: [planning, reflection, summary, think, instruction_generation, tool_decision], tools: [ledger]}}\n",
            stub.base_url()
        ),
    )
    .unwrap();
    let cfg = load_team(&dir.join("team.yaml")).unwrap();
    let team = start_team(&cfg, &Host::new(&|_| None, env!("CARGO_BIN_EXE_cohort"))).unwrap();
    team.submit_goal(None, "Please reach GOAL<ledger>.")
        .await
        .unwrap();
    let call_step = || {
        team.monitor.read(|s| {
            s.steps()
                .find(|st| st.agent_id.as_str() == "clerk" && st.origin.is_tool_call())
                .cloned()
        })
    };
    for _ in 0..1_500 {
        if call_step().is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let call = call_step().expect("the loop's call, as a step of its own");
    assert_eq!(
        call.execution_state,
        StepExecutionState::Finished,
        "{call:?}"
    );
    let result = call.execute_result.as_ref().unwrap();
    let waited: Vec<u64> = result.tool_retries.iter().map(|r| r.waited_ms).collect();
    assert_eq!(waited, [250, 500], "{result}");
    assert_eq!(counts.lookup.load(Ordering::SeqCst), 3);
    team.shutdown().await;
}
