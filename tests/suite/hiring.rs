//! Team management end to end: the hiring example (ask_info for templates, init_new_agent, the
//! new agent allocated in the same task), and the refusals a manager's agent_manager step gets.

use crate::support::scratch;
use crate::support::states;

use cohort::actors::{Host, start_team};
use cohort::config::load_team;
use cohort::run::{RunOptions, RunOutcome, run_goal};
use scratch::Scratch;
use serde_json::Value;
use states::*;
use std::path::Path;
use std::time::Duration;

fn host() -> Host<'static> {
    Host::new(&|_| None, env!("CARGO_BIN_EXE_cohort"))
}

/// The ids of an agent's steps, in its execution order, with their executors.
fn executors_in_order(s: &Value, agent: &str) -> Vec<String> {
    s["agent"][agent]["agent_step"]["step_list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|id| {
            s["step"][id.as_str().unwrap()]["executor"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

#[actix::test]
async fn the_manager_looks_up_templates_hires_an_analyst_and_allocates_it_in_the_same_task() {
    let cfg = load_team(Path::new("examples/hiring/team.yaml")).unwrap();
    let report = run_goal(
        &cfg,
        "Summarise last quarter's sales figures for the board",
        &RunOptions::default(),
        &host(),
        |_| {},
    )
    .await
    .unwrap();
    assert_eq!(report.outcome, RunOutcome::Finished);
    let s = &report.states;
    let task = the_task(s);
    assert_stages_finished(s, task);
    assert_quiet(s);
    let failed: Vec<_> = steps(s)
        .into_iter()
        .filter(|st| st["execution_state"] == "failed")
        .collect();
    assert!(failed.is_empty(), "steps failed: {failed:#?}");

    // The hired agent is a live agent like the others: published, made from its template.
    let analyst = &s["agent"]["analyst_1"];
    assert_eq!(analyst["name"], "Ada");
    assert_eq!(analyst["role"], "data analyst");
    assert_eq!(analyst["template"], "data_analyst");
    assert!(
        analyst["skills"]
            .as_array()
            .unwrap()
            .iter()
            .any(|k| k == "ask_info")
    );
    assert_eq!(analyst["working_state"], "idle");
    assert!(
        analyst["token_usage"]["prompt_tokens"].as_u64().unwrap() > 0,
        "it ran LLM steps"
    );

    // It was allocated and did its stage in the task that hired it.
    let stages = stages_of(s, task);
    assert!(stages[0]["agent_allocation"]["analyst_1"].is_string());
    assert!(
        stages[0]["completion_summary"]["analyst_1"]
            .as_str()
            .unwrap()
            .contains("north +15%")
    );
    assert!(
        task["task_group"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a == "analyst_1")
    );

    // ask_info: the answer returned the asker's wait id, and was read right after the query,
    // before the step that needed it.
    let base = tasks(s)
        .into_iter()
        .find(|t| t["task_name"] == "MAS base task")
        .unwrap();
    let ask = steps(s)
        .into_iter()
        .find(|st| st["agent_id"] == "manager" && st["executor"] == "ask_info")
        .expect("the manager's ask_info step");
    let wait = ask["execute_result"]["ask_instruction"]["waiting_id"]
        .as_str()
        .unwrap();
    let answer = base["shared_conversation_pool"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["message"])
        .find(|m| m["return_waiting_id"] == wait)
        .expect("an answer carrying the wait id");
    assert_eq!(answer["sender_id"], "[SyncState]");
    assert_eq!(answer["receiver"], serde_json::json!(["manager"]));
    assert!(
        answer["message"]
            .as_str()
            .unwrap()
            .contains("#### Template `data_analyst`")
    );
    let order = executors_in_order(s, "manager");
    let at = order.iter().position(|e| e == "ask_info").unwrap();
    assert_eq!(
        &order[at..at + 3],
        ["ask_info", "process_message", "agent_manager"],
        "{order:?}"
    );

    // The analyst's own query (about its task group) came back inside its stage.
    let group_answer = task["shared_conversation_pool"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["message"])
        .find(|m| m["sender_id"] == "[SyncState]")
        .expect("the analyst's answer is in its task's conversation");
    assert_eq!(group_answer["stage_relative"], stages[0]["stage_id"]);
    assert!(
        group_answer["message"]
            .as_str()
            .unwrap()
            .contains("`writer` (Wren)")
    );
}

const REFUSALS_TEAM: &str = "\
llm: {provider: scripted, script: script.yaml}
agents:
  - {id: manager, role: manager, skills: [process_message, decision, task_manager, agent_manager, ask_info]}
  - {id: writer, role: writer, skills: [planning, think]}
agent_templates:
  - {name: analyst, role: analyst, skills: [planning, think]}
  - {name: browser, role: browser, skills: [planning, instruction_generation], tools: [web]}
";

const REFUSALS_SCRIPT: &str = r#"
replies:
  manager:
    process_message:
      - "Noted."
      - "Noted."
    decision:
      # This manager may hire: the notice that its task was created is a decision step too.
      - when: "was created with you as its manager"
        text: '<planned_step>[{"step_intention": "Close it", "type": "skill", "executor": "task_manager", "text_content": "finish it"}]</planned_step>'
      - |
        <planned_step>[
          {"step_intention": "Hire from a template that does not exist", "type": "skill", "executor": "agent_manager", "text_content": "poet"},
          {"step_intention": "Hire under a taken id", "type": "skill", "executor": "agent_manager", "text_content": "writer"},
          {"step_intention": "Hire a browser", "type": "skill", "executor": "agent_manager", "text_content": "browser"},
          {"step_intention": "Hire an analyst", "type": "skill", "executor": "agent_manager", "text_content": "analyst"},
          {"step_intention": "Look at the new agent and myself", "type": "skill", "executor": "ask_info", "text_content": "agent_states"},
          {"step_intention": "Ask about a task that does not exist", "type": "skill", "executor": "ask_info", "text_content": "task"},
          {"step_intention": "Make the goal a task", "type": "skill", "executor": "task_manager", "text_content": "add_task"}
        ]</planned_step>
    task_manager:
      - when: "finish it"
        text: '<task_instruction>{"action": "finish_task", "task_id": "{{task_id}}", "task_summary": "grown"}</task_instruction>'
      - '<task_instruction>{"action": "add_task", "task_name": "Grow", "task_intention": "Grow the team"}</task_instruction>'
    agent_manager:
      - '<agent_instruction>{"action": "init_new_agent", "template": "poet", "agent_id": "p1"}</agent_instruction>'
      - '<agent_instruction>{"action": "init_new_agent", "template": "analyst", "agent_id": "writer"}</agent_instruction>'
      - '<agent_instruction>{"action": "init_new_agent", "template": "browser", "agent_id": "b1"}</agent_instruction>'
      - '<agent_instruction>{"action": "init_new_agent", "template": "analyst", "agent_id": "an1", "name": "Ann"}</agent_instruction>'
    ask_info:
      - '<ask_info>{"type": "agent_states", "agent_ids": ["an1", "manager"]}</ask_info>'
      - '<ask_info>{"type": "task", "task_id": "no-such-task"}</ask_info>'
"#;

#[actix::test]
async fn unknown_template_taken_id_and_a_missing_tool_fail_the_step_with_the_reason() {
    let dir = Scratch::new("hiring-refusals");
    std::fs::write(dir.join("team.yaml"), REFUSALS_TEAM).unwrap();
    std::fs::write(dir.join("script.yaml"), REFUSALS_SCRIPT).unwrap();
    let cfg = load_team(&dir.join("team.yaml")).unwrap();
    let team = start_team(&cfg, &host()).unwrap();
    team.submit_goal(None, "Grow the team").await.unwrap();

    // Done when the answer to the query about an unknown task has been read and the manager
    // has nothing left to do.
    let mut s = Value::Null;
    for _ in 0..400 {
        s = team.monitor.all();
        let read = steps(&s).iter().any(|st| {
            st["executor"] == "process_message"
                && st["execution_state"] == "finished"
                && st["text_content"]
                    .as_str()
                    .unwrap_or("")
                    .contains("There is no task `no-such-task`.")
        });
        // …and the task the plan ends with was made and closed.
        if read && s["agent"]["manager"]["working_state"] == "idle" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let hires: Vec<&Value> = executors_in_order(&s, "manager")
        .iter()
        .enumerate()
        .filter(|(_, e)| *e == "agent_manager")
        .map(|(i, _)| {
            &s["step"][s["agent"]["manager"]["agent_step"]["step_list"][i]
                .as_str()
                .unwrap()]
        })
        .collect();
    assert_eq!(hires.len(), 4, "{s:#}");
    for (step, why) in hires.iter().zip([
        "there is no agent template `poet` (templates: analyst, browser)",
        "agent id `writer` is taken",
        "names MCP server `web`, which this team does not have",
    ]) {
        assert_eq!(step["execution_state"], "failed", "{step:#}");
        let error = step["execute_result"]["error"].as_str().unwrap();
        assert!(error.contains(why), "{error}");
    }
    // The good hire after three refusals still lands: the agent runs and is published.
    assert_eq!(hires[3]["execution_state"], "finished");
    assert_eq!(s["agent"]["an1"]["name"], "Ann");
    assert_eq!(s["agent"]["an1"]["template"], "analyst");
    assert!(s["agent"].get("p1").is_none() && s["agent"].get("b1").is_none());

    // agent_states shows live states, with what each agent is running right now.
    let states = steps(&s)
        .into_iter()
        .find(|st| {
            st["executor"] == "process_message"
                && st["text_content"]
                    .as_str()
                    .unwrap_or("")
                    .contains("query `agent_states`")
        })
        .expect("the agent_states answer was read");
    let text = states["text_content"].as_str().unwrap();
    for want in [
        "#### Agent `an1`",
        "created from template `analyst`",
        "#### Agent `manager`",
        "running: `ask_info` running: Look at the new agent and myself",
        "next steps (2 queued):",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }

    // A query about an unknown task is answered with that fact; the asker's lock is free.
    let answered = steps(&s)
        .into_iter()
        .find(|st| {
            st["executor"] == "process_message"
                && st["text_content"]
                    .as_str()
                    .unwrap_or("")
                    .contains("query `task`")
        })
        .expect("the answer about the unknown task was read");
    assert!(
        answered["text_content"]
            .as_str()
            .unwrap()
            .contains("There is no task `no-such-task`.")
    );
    assert_eq!(answered["execution_state"], "finished");
    assert_eq!(s["agent"]["manager"]["step_lock"], serde_json::json!([]));
    assert_eq!(s["agent"]["manager"]["working_state"], "idle");
    team.shutdown().await;
}
