//! The native tool loop over real HTTP and a real MCP server: a clerk whose model calls tools
//! natively gets the workspace server's tools as functions, writes a file and reads it back in
//! one tool step, with each call recorded as a step of its own, and no
//! instruction_generation or tool_decision step. The same work on the three-call chain (the
//! tools example) takes six LLM calls: three instruction_generation and three tool_decision.

use crate::support::competent;
use crate::support::openai_stub;
use crate::support::scratch;

use cohort::actors::{Host, start_team};
use cohort::config::load_team;
use cohort::monitor::StateKind;
use openai_stub::{OpenAiStub, RecordedRequest, StubResponse};
use scratch::Scratch;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

fn team_dir(tag: &str, base_url: &str) -> Scratch {
    // Each test its own folder: `cargo test` runs a binary's tests side by side in one process.
    let dir = Scratch::new(&format!("native-tools-{tag}"));
    std::fs::create_dir_all(dir.join("servers")).unwrap();
    std::fs::create_dir_all(dir.join("ws")).unwrap();
    std::fs::write(
        dir.join("servers/workspace.yaml"),
        "name: workspace\ndescription: Text files of the team.\nbuiltin: workspace\nargs: [--root, ../ws]\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("team.yaml"),
        format!(
            "mcp_servers: servers\n\
             llm: {{provider: openai, base_url: '{base_url}', model: m, tool_calling: native}}\n\
             agents:\n\
             \x20 - {{id: manager, role: manager, skills: [process_message, decision, task_manager]}}\n\
             \x20 - {{id: clerk, role: clerk, skills: [planning, reflection, summary, think, instruction_generation, tool_decision], tools: [workspace]}}\n"
        ),
    )
    .unwrap();
    dir
}

/// The competent stub, with the clerk planning one tool step and the tool loop calling
/// write_file, then read_file, then answering.
fn answer(req: &RecordedRequest) -> StubResponse {
    let skill = req.body["response_format"]["json_schema"]["name"].as_str();
    if req.body.get("tools").is_some() {
        let results = req.body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "tool")
            .count();
        let call = |name: &str, args: Value| {
            let body = json!({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": null, "tool_calls": [{"id": format!("call{results}"),
                "type": "function", "function": {"name": name, "arguments": args.to_string()}}]}}],
                "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60}});
            StubResponse::raw(200, body.to_string())
        };
        return match results {
            0 => call(
                "write_file",
                json!({"path": "hello.txt", "content": "Hello, native!\n"}),
            ),
            1 => call("read_file", json!({"path": "hello.txt"})),
            _ => StubResponse::reply_with_usage("Wrote hello.txt and read it back.", 50, 10),
        };
    }
    if skill == Some("planning") {
        let plan = json!({"planned_step": [
            {"step_intention": "Write and check the file", "type": "tool", "executor": "workspace",
             "text_content": "Write hello.txt with a greeting, then read it back."},
            {"step_intention": "Check the goal", "type": "skill", "executor": "reflection", "text_content": "done?"}]});
        return StubResponse::reply_with_usage(&plan.to_string(), 50, 10);
    }
    StubResponse::reply_with_usage(&competent::competent(req), 50, 10)
}

#[actix::test]
async fn a_native_tool_step_calls_the_servers_functions_itself() {
    let stub = OpenAiStub::start().await;
    stub.set_fallback(answer);
    let dir = team_dir("loop", &stub.base_url());
    let cfg = load_team(&dir.join("team.yaml")).unwrap();
    let vars = |_: &str| None;
    let team = start_team(&cfg, &Host::new(&vars, env!("CARGO_BIN_EXE_cohort"))).unwrap();
    team.submit_goal(None, "Please reach GOAL<hello>.")
        .await
        .unwrap();

    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let tasks = team.monitor.snapshot(StateKind::Task);
        if tasks
            .values()
            .any(|t| t["task_name"] == "hello" && t["execution_state"] == "finished")
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
        std::fs::read_to_string(dir.join("ws/hello.txt")).unwrap(),
        "Hello, native!\n"
    );

    let steps: Vec<Value> = team
        .monitor
        .snapshot(StateKind::Step)
        .into_values()
        .collect();
    let clerk: Vec<&Value> = steps.iter().filter(|s| s["agent_id"] == "clerk").collect();
    let ran = |executor: &str| clerk.iter().filter(|s| s["executor"] == executor).count();
    assert_eq!(ran("instruction_generation") + ran("tool_decision"), 0);
    // The planned tool step, and one step per call it made.
    assert_eq!(ran("workspace"), 3);
    let loop_step = clerk
        .iter()
        .find(|s| s["execute_result"]["tool_calls"] == 2)
        .expect("the loop's step");
    assert_eq!(loop_step["execution_state"], "finished");
    assert_eq!(
        loop_step["execute_result"]["answer"],
        "Wrote hello.txt and read it back."
    );
    assert_eq!(loop_step["token_usage"]["prompt_tokens"], 150);
    let calls: Vec<&str> = clerk
        .iter()
        .filter_map(|s| s["instruction_content"]["tool_name"].as_str())
        .collect();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert!(calls.contains(&"write_file") && calls.contains(&"read_file"));

    let reqs = stub.requests();
    let looped: Vec<&RecordedRequest> = reqs
        .iter()
        .filter(|r| r.body.get("tools").is_some())
        .collect();
    assert_eq!(
        looped.len(),
        3,
        "three LLM calls for two tool calls and the answer"
    );
    let tools: Vec<&str> = looped[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(
        tools.contains(&"write_file") && tools.contains(&"search"),
        "{tools:?}"
    );
    // The read's result reaches the model as a tool message answering its call.
    let last = looped[2].body["messages"].as_array().unwrap();
    let read = last.last().unwrap();
    assert_eq!(
        (read["role"].as_str(), read["tool_call_id"].as_str()),
        (Some("tool"), Some("call1"))
    );
    assert!(read["content"].as_str().unwrap().contains("Hello, native!"));
    // Planning may not plan instruction_generation for a model that calls tools itself.
    let planning = reqs
        .iter()
        .find(|r| r.body["response_format"]["json_schema"]["name"] == "planning")
        .unwrap();
    assert!(!planning.raw_body.contains("\"instruction_generation\""));
    team.shutdown().await;
}

#[actix::test]
async fn an_agent_whose_calls_may_wait_for_approval_calls_tools_through_the_chain() {
    let stub = OpenAiStub::start().await;
    let dir = team_dir("approval", &stub.base_url());
    let mut cfg = load_team(&dir.join("team.yaml")).unwrap();
    let vars = |_: &str| None;
    let native = |team: &cohort::actors::Team| {
        let clerk = team.agents[&"clerk".into()].clone();
        async move {
            clerk
                .send(cohort::actors::GetAgentSettings)
                .await
                .unwrap()
                .native_tools
        }
    };
    let team = start_team(&cfg, &Host::new(&vars, env!("CARGO_BIN_EXE_cohort"))).unwrap();
    assert!(
        native(&team).await,
        "by default the clerk's model calls tools natively"
    );
    team.shutdown().await;
    // Each call that may wait for a person must be a step of its own.
    for a in cfg.agents.iter_mut() {
        a.tool_approval = cohort::policy::ApprovalPolicy {
            auto_run_up_to: Some(cohort::policy::Risk::Medium),
            ..Default::default()
        };
    }
    let team = start_team(&cfg, &Host::new(&vars, env!("CARGO_BIN_EXE_cohort"))).unwrap();
    assert!(!native(&team).await);
    team.shutdown().await;
}
