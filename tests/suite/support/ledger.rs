//! The ledger team the tool tests share (tool_restart, tool_retry): a writer
//! that appends a line and a reader that looks one up, both through MCP server `ledger` over
//! streamable HTTP, which each test serves with tools that behave as it needs.

use rmcp::ServerHandler;
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
};
use schemars::JsonSchema;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// A tool's arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct TextArgs {
    /// Some text.
    pub text: String,
}

/// Serves `server` over streamable HTTP on a free port; its URL.
pub async fn serve<S: ServerHandler + Clone + Send + Sync + 'static>(server: S) -> String {
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

pub const SCRIPT: &str = r#"
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

/// The ledger team in `dir`, its server at `url` answering within `timeout_secs`; the team
/// file.
pub fn write_team(dir: &Path, url: &str, timeout_secs: u64) -> PathBuf {
    std::fs::create_dir_all(dir.join("servers")).unwrap();
    std::fs::write(
        dir.join("servers/ledger.yaml"),
        format!("name: ledger\ndescription: A ledger.\nurl: {url}\ntimeout_secs: {timeout_secs}\n"),
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
