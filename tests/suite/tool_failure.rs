//! A bad tool instruction fails the tool step with the server's reason, and the tool_decision
//! after it sees that reason in its prompt (run on the openai provider against a local server,
//! which records every prompt).

use crate::support::openai_stub;
use crate::support::scratch;

use cohort::actors::{Host, SubmitMessage, start_team};
use cohort::config::load_team;
use cohort::ids::{AgentId, StageRef};
use cohort::message::Message;
use cohort::monitor::StateKind;
use openai_stub::{OpenAiStub, StubResponse};
use scratch::Scratch;
use serde_json::Value;
use std::time::Duration;

#[actix::test]
async fn an_unknown_tool_fails_the_step_and_the_decision_after_it_sees_why() {
    let stub = OpenAiStub::start().await;
    stub.push_all([
        StubResponse::reply(r#"<react_action>{"step_intention": "use the workspace", "text_content": "write a file"}</react_action>"#),
        StubResponse::reply(
            r#"<planned_step>[{"step_intention": "prepare", "type": "skill", "executor": "instruction_generation", "text_content": "write a.txt"},
               {"step_intention": "write", "type": "tool", "executor": "workspace", "text_content": "write a.txt"}]</planned_step>"#,
        ),
        StubResponse::reply(r#"<tool_instruction>{"tool_name": "scribble", "arguments": {"path": "a.txt"}}</tool_instruction>"#),
        StubResponse::reply("The tool does not exist; stop here.<planned_step>[]</planned_step>"),
    ]);
    let dir = Scratch::new("tool-failure");
    std::fs::create_dir_all(dir.join("ws")).unwrap();
    std::fs::write(
        dir.join("workspace.yaml"),
        "name: workspace\ndescription: files\nbuiltin: workspace\nargs: [--root, ws]\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("team.yaml"),
        format!(
            "mcp_servers: workspace.yaml\nllm: {{provider: openai, base_url: '{}', model: m, max_retries: 0}}\n\
             agents:\n  - {{id: manager, role: manager, skills: [process_message, decision, task_manager, instruction_generation, tool_decision], tools: [workspace]}}\n",
            stub.base_url()
        ),
    )
    .unwrap();
    let cfg = load_team(&dir.join("team.yaml")).unwrap();
    let vars = |_: &str| None;
    let team = start_team(&cfg, &Host::new(&vars, env!("CARGO_BIN_EXE_cohort"))).unwrap();
    // A colleague's request (not an operator's goal, which a manager acts on only through the
    // team): process_message, then a decision that uses the tool itself.
    let ask = Message::notice(
        team.base_task.clone(),
        AgentId::from("colleague"),
        vec![AgentId::from("manager")],
        StageRef::NoRelative,
        "please write a.txt".into(),
    );
    team.sync.send(SubmitMessage(ask)).await.unwrap().unwrap();

    let mut steps: Vec<Value> = Vec::new();
    for _ in 0..400 {
        steps = team
            .monitor
            .snapshot(StateKind::Step)
            .into_values()
            .collect();
        if steps
            .iter()
            .any(|s| s["executor"] == "tool_decision" && s["execution_state"] == "finished")
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let tool = steps
        .iter()
        .find(|s| s["executor"] == "workspace")
        .expect("a tool step");
    assert_eq!(tool["execution_state"], "failed");
    let reason = tool["execute_result"]["error"].as_str().unwrap();
    assert!(reason.contains("scribble"), "{reason}");
    let decision = steps
        .iter()
        .find(|s| s["executor"] == "tool_decision")
        .expect("a tool_decision step");
    assert_eq!(decision["execution_state"], "finished");
    let prompts = stub.requests();
    assert_eq!(prompts.len(), 4);
    let prompt = prompts[3].prompt().unwrap();
    assert!(
        prompt.contains(reason),
        "the decision sees the failure reason:
{prompt}"
    );
    assert!(!dir.join("ws/a.txt").exists());
    team.shutdown().await;
}
