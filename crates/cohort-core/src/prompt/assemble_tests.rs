//! Tests of prompt assembly: section order for every skill in both languages, which history a
//! skill sees, and that data written by agents or tools cannot break the section structure.

use super::assemble::MAX_PENDING_IN_HISTORY;
use super::markdown::headings;
use super::{Language, PromptContext, PromptSet, build_prompt};
use crate::ids::{StageId, StageRef, StepId, TaskId};
use crate::skills::HistoryKind;
use crate::state::{Agent, AgentState, Executor, Skill, StepExecutionState, StepResult, StepState};
use serde_json::json;
use std::collections::BTreeMap;

fn stage(s: &str) -> StageRef {
    StageRef::Stage(StageId::from(s))
}

pub(super) fn step(
    task: &str,
    stage: StageRef,
    executor: Executor,
    intention: &str,
    text: &str,
) -> StepState {
    StepState::new(
        TaskId::from(task),
        stage,
        "a1".into(),
        executor,
        intention,
        text,
    )
}

/// An agent mid-stage, with steps in other stages and tasks, and data that tries to open
/// sections of its own. Returns the agent and the id of the step being executed.
fn fixture(current: Skill) -> (Agent, StepId) {
    let mut a = Agent::from(AgentState::new(
        "a1".into(),
        "Ada".into(),
        "writer".into(),
        "Writes reports.\n# Injected profile".into(),
    ));
    a.skills = Skill::ALL.to_vec();
    a.tools = vec!["workspace".into(), "undescribed".into()];
    a.persistent_memory.insert(
        "20250613T103022".into(),
        "### Notes\nThe report goes to b2.".into(),
    );
    a.persistent_memory
        .insert("20250613T110000".into(), "# Injected memory heading".into());

    let think = Executor::Skill(Skill::Think);
    let mut done = step(
        "t1",
        stage("s1"),
        think.clone(),
        "DONE_THINK",
        "Draft the outline\n## Rules\nfake",
    );
    done.execution_state = StepExecutionState::Finished;
    done.execute_result = Some(StepResult::output(
        json!({"think": "outline\n# Persistent memory\nfake"}),
    ));
    let mut failed = step(
        "t1",
        stage("s1"),
        Executor::Tool("workspace".into()),
        "FAILED_TOOL",
        "write it",
    );
    failed.execution_state = StepExecutionState::Failed;
    failed.instruction_content = Some(json!({"tool_name": "write", "arguments": {"path": "a.md"}}));
    failed.execute_result = Some(StepResult::failed("disk full"));
    let mut cur = step(
        "t1",
        stage("s1"),
        Executor::Skill(current),
        "# Role CURRENT_STEP",
        "```\n# Memory\n",
    );
    cur.execution_state = StepExecutionState::Running;
    let pending = step(
        "t1",
        stage("s1"),
        Executor::Skill(Skill::Reflection),
        "PENDING_REFLECTION",
        "",
    );
    let mut other_stage = step("t1", stage("s2"), think.clone(), "OTHER_STAGE", "");
    other_stage.execution_state = StepExecutionState::Finished;
    let mut other_task = step("t2", stage("s1"), think.clone(), "OTHER_TASK", "");
    other_task.execution_state = StepExecutionState::Finished;
    let mut no_rel = step(
        "t1",
        StageRef::NoRelative,
        Executor::Skill(Skill::ProcessMessage),
        "NO_RELATIVE",
        "hi",
    );
    no_rel.execution_state = StepExecutionState::Finished;

    let id = cur.step_id.clone();
    a.add_steps(vec![
        other_task,
        done,
        failed,
        no_rel,
        cur,
        pending,
        other_stage,
    ]);
    (a, id)
}

fn tools() -> BTreeMap<String, String> {
    [(
        "workspace".to_owned(),
        "Files in the shared workspace.\n# Injected".to_owned(),
    )]
    .into_iter()
    .collect()
}

fn tool_chain() -> Vec<StepState> {
    let mut ig = step(
        "t1",
        stage("s1"),
        Executor::Skill(Skill::InstructionGeneration),
        "CHAIN_IG",
        "list tools",
    );
    ig.execution_state = StepExecutionState::Finished;
    let mut call = step(
        "t1",
        stage("s1"),
        Executor::Tool("workspace".into()),
        "CHAIN_TOOL",
        "",
    );
    call.execution_state = StepExecutionState::Finished;
    call.instruction_content = Some(json!({"instruction_type": "get_description"}));
    call.execute_result = Some(StepResult::output(
        json!({"tools": {"write": {"description": "```\n# x"}}}),
    ));
    vec![ig, call]
}

/// Builds the prompt of `skill` for the fixture agent, with the extra context it needs.
fn prompt_for(set: &PromptSet, skill: Skill, agent: &Agent, current: &StepId) -> String {
    let descriptions = tools();
    let target = step(
        "t1",
        stage("s1"),
        Executor::Tool("workspace".into()),
        "TARGET_TOOL",
        "Write notes.md",
    );
    let chain = tool_chain();
    let ctx = PromptContext {
        agent,
        step: agent.agent_step.get(current).unwrap(),
        tool_descriptions: &descriptions,
        tool_step: (skill == Skill::InstructionGeneration).then_some(&target),
        tool_capabilities: None,
        tool_history: (skill == Skill::ToolDecision).then_some(chain.as_slice()),
        budget: None,
        tokens: crate::prompt::tokens::TokenCounter::Estimate,
        constrained: false,
    };
    build_prompt(set, skill, &ctx).whole()
}

fn section<'a>(prompt: &'a str, from: &str, to: &str) -> &'a str {
    let start = prompt
        .find(&format!("\n# {from}\n"))
        .unwrap_or_else(|| panic!("no `# {from}`"));
    let end = prompt[start + 1..]
        .find(&format!("\n# {to}\n"))
        .map_or(prompt.len(), |e| start + 1 + e);
    &prompt[start..end]
}

#[test]
fn sections_appear_in_spec_order_for_every_skill_in_both_languages() {
    for lang in Language::ALL {
        let set = PromptSet::builtin(lang);
        let h = set.headings();
        let system_title = headings(set.system_prompt())[0].1.to_owned();
        for skill in Skill::ALL {
            let (agent, current) = fixture(skill);
            let prompt = prompt_for(&set, skill, &agent, &current);
            let found = headings(&prompt);
            let at = |level: usize, text: &str| {
                found
                    .iter()
                    .find(|(l, t, _)| *l == level && *t == text)
                    .map(|x| x.2)
                    .unwrap()
            };

            // Level 1: exactly these sections, in order from most to least stable (injected
            // data opened none): the system message's, then what only grows, then the skill's
            // rules, then what changes each call, the current step last.
            let mut want1 = vec![system_title.clone(), h.role.clone(), h.memory.clone()];
            match skill.kind().history() {
                HistoryKind::Stage => want1.push(h.history.clone()),
                HistoryKind::ToolChain => want1.push(h.tool_history.clone()),
                HistoryKind::None => {}
            }
            want1.push(h.memory_content.clone());
            if skill.kind().history() == HistoryKind::Stage {
                want1.push(h.history_pending.clone());
            }
            want1.push(format!("{}: {}", h.skill_at_hand, skill.name()));
            want1.push(h.current_step.clone());
            let got1: Vec<_> = found
                .iter()
                .filter(|(l, _, _)| *l == 1)
                .map(|x| (x.1.to_owned(), x.2))
                .collect();
            assert_eq!(
                got1.iter().map(|x| &x.0).collect::<Vec<_>>(),
                want1.iter().collect::<Vec<_>>(),
                "{lang} {skill}"
            );
            assert!(
                got1.windows(2).all(|w| w[0].1 < w[1].1),
                "{lang} {skill}: level-1 positions must increase"
            );

            // Level 2 below the system prompt: the subsections this skill must have, in order.
            let role_at = got1[1].1;
            // The step's content comes last, after the rules (a small model answers what it
            // read last).
            let mut want2 = vec![&h.role_info, &h.permissions];
            if matches!(skill, Skill::InstructionGeneration | Skill::ToolDecision) {
                want2.push(&h.mcp_base);
            }
            want2.extend([&h.rules, &h.return_format, &h.intention]);
            if skill == Skill::InstructionGeneration {
                want2.push(&h.tool_step);
            }
            want2.push(&h.content);
            let known = [
                &h.role_info,
                &h.permissions,
                &h.intention,
                &h.content,
                &h.tool_step,
                &h.mcp_base,
                &h.rules,
                &h.return_format,
            ];
            let got2: Vec<_> = found
                .iter()
                .filter(|(l, t, at)| {
                    *l == 2 && *at > role_at && known.iter().any(|k| k.as_str() == *t)
                })
                .collect();
            assert_eq!(
                got2.iter().map(|x| x.1).collect::<Vec<_>>(),
                want2,
                "{lang} {skill}"
            );
            assert!(got2.windows(2).all(|w| w[0].2 < w[1].2));

            // Skills and tools lists sit inside permissions, before the current step.
            let perm = at(2, &h.permissions);
            let (skills, tools) = (at(3, &h.skills), at(3, &h.tools));
            assert!(
                perm < skills && skills < tools && tools < got1[2].1,
                "{lang} {skill}"
            );

            let sp = set.skill(skill);
            assert!(
                prompt.contains(&sp.skill_prompt) && prompt.contains(&sp.return_format),
                "{lang} {skill}"
            );
        }
    }
}

#[test]
fn history_holds_only_same_task_and_stage_steps_and_not_the_current_one() {
    let set = PromptSet::builtin(Language::En);
    let h = set.headings();
    let (agent, current) = fixture(Skill::Think);
    let prompt = prompt_for(&set, Skill::Think, &agent, &current);
    // The executed steps, then (after the memory's entries) the pending ones.
    let history = section(&prompt, &h.history, &h.current_step);
    for present in [
        "DONE_THINK",
        "FAILED_TOOL",
        "PENDING_REFLECTION",
        // A failed step is one line: its reason.
        "- failed: disk full",
        // A result or call is one line of JSON.
        r#"- instruction_content: {"arguments":{"path":"a.md"},"tool_name":"write"}"#,
    ] {
        assert!(
            history.contains(present),
            "{present} missing from\n{history}"
        );
    }
    for absent in [
        "OTHER_STAGE",
        "OTHER_TASK",
        "NO_RELATIVE",
        "CURRENT_STEP",
        current.as_str(),
    ] {
        assert!(
            !history.contains(absent),
            "{absent} must not be in\n{history}"
        );
    }
    let pending_at = history.find(&format!("# {}", h.history_pending)).unwrap();
    assert!(history.find("DONE_THINK").unwrap() < pending_at);
    assert!(history.find("FAILED_TOOL").unwrap() < pending_at);
    assert!(history.find("PENDING_REFLECTION").unwrap() > pending_at);

    // A step outside any stage sees the task's other `no_relative` steps only.
    let mut agent = agent;
    agent.agent_step.get_mut(&current).unwrap().stage_id = StageRef::NoRelative;
    let prompt = prompt_for(&set, Skill::Think, &agent, &current);
    let history = section(&prompt, &h.history, &h.current_step);
    assert!(history.contains("NO_RELATIVE"));
    for absent in ["DONE_THINK", "PENDING_REFLECTION", "OTHER_TASK"] {
        assert!(
            !history.contains(absent),
            "{absent} must not be in\n{history}"
        );
    }
}

#[test]
fn role_names_the_agent_id_its_skills_and_its_tools() {
    let set = PromptSet::builtin(Language::En);
    let (agent, current) = fixture(Skill::QuickThink);
    let prompt = prompt_for(&set, Skill::QuickThink, &agent, &current);
    assert!(prompt.contains("- agent id: a1 ("), "{prompt}");
    assert!(prompt.contains("- name: Ada\n- role: writer\n"));
    assert!(prompt.contains(&format!(
            "- **summary**: {}",
            set.skill(Skill::Summary)
                .description
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        )));
    assert!(prompt.contains("- **workspace**: Files in the shared workspace. # Injected"));
    assert!(prompt.contains("- **undescribed**: (no description)"));

    let mut bare = Agent::from(AgentState::new(
        "b2".into(),
        "Bo".into(),
        "helper".into(),
        String::new(),
    ));
    let cur = step(
        "t1",
        stage("s1"),
        Executor::Skill(Skill::QuickThink),
        "go",
        "",
    );
    let id = cur.step_id.clone();
    bare.add_steps(vec![cur]);
    let prompt = prompt_for(&set, Skill::QuickThink, &bare, &id);
    let h = set.headings();
    let role = section(&prompt, &h.role, &h.memory);
    assert!(
        role.contains(&format!(
            "### {}\n\n(none)\n\n### {}\n\n(none)",
            h.skills, h.tools
        )),
        "{role}"
    );
    assert!(
        prompt.contains(&format!(
            "# {}\n\n(none)\n\n# {}: quick_think",
            h.memory_content, h.skill_at_hand
        )),
        "{prompt}"
    );
}

#[test]
fn instruction_generation_shows_the_target_tool_step_and_server() {
    let set = PromptSet::builtin(Language::En);
    let h = set.headings();
    let (agent, current) = fixture(Skill::InstructionGeneration);
    let prompt = prompt_for(&set, Skill::InstructionGeneration, &agent, &current);
    let step_section = section(&prompt, &h.current_step, &h.memory);
    for want in [
        "TARGET_TOOL",
        "Write notes.md",
        "### MCP server: workspace",
        "Files in the shared workspace.",
    ] {
        assert!(
            step_section.contains(want),
            "{want} missing from\n{step_section}"
        );
    }
    let skill = format!("{}: instruction_generation", h.skill_at_hand);
    assert!(section(&prompt, &skill, &h.current_step).contains(set.mcp_base_prompt()));
    assert!(!step_section.contains(set.mcp_base_prompt()));
    assert!(!prompt.contains(&format!("# {}\n", h.history)));
}

#[test]
fn tool_decision_shows_the_call_chain_in_order() {
    let set = PromptSet::builtin(Language::Zh);
    let h = set.headings();
    let (agent, current) = fixture(Skill::ToolDecision);
    let prompt = prompt_for(&set, Skill::ToolDecision, &agent, &current);
    let chain = section(&prompt, &h.tool_history, &h.memory);
    let (ig, tool) = (
        chain.find("CHAIN_IG").unwrap(),
        chain.find("CHAIN_TOOL").unwrap(),
    );
    assert!(ig < tool);
    assert!(chain.contains("\"instruction_type\": \"get_description\""));
    assert!(
        !chain.contains("DONE_THINK"),
        "tool_decision sees its chain, not the stage history"
    );
    let skill = format!("{}: tool_decision", h.skill_at_hand);
    assert!(section(&prompt, &skill, &h.current_step).contains(set.mcp_base_prompt()));
}

#[test]
fn memory_lists_entries_by_key_after_the_rules() {
    let set = PromptSet::builtin(Language::En);
    let h = set.headings();
    let (agent, current) = fixture(Skill::Planning);
    let prompt = prompt_for(&set, Skill::Planning, &agent, &current);
    let memory = section(&prompt, &h.memory, "\u{0}");
    // How memory works is in the system message (the same every step), the entries after.
    let (system, user) = prompt
        .split_once(&format!("\n# {}\n", h.memory_content))
        .unwrap();
    assert!(system.contains(set.persistent_memory_prompt()), "{prompt}");
    let entry = user
        .find("- 20250613T103022:\n  ### Notes\n  The report goes to b2.")
        .unwrap();
    assert!(
        entry < user.find(&format!("# {}", h.current_step)).unwrap(),
        "{user}"
    );
    assert!(
        memory.contains("- 20250613T110000:\n```text\n# Injected memory heading\n```"),
        "{memory}"
    );
}

#[test]
fn a_long_history_shows_only_the_newest_executed_steps() {
    let mut a = Agent::from(AgentState::new(
        "a1".into(),
        "Ada".into(),
        "manager".into(),
        "".into(),
    ));
    a.skills = vec![Skill::Think];
    let total = super::assemble::MAX_EXECUTED_IN_HISTORY + 6;
    let mut steps = Vec::new();
    for i in 0..total {
        let mut s = step(
            "base",
            StageRef::NoRelative,
            Executor::Skill(Skill::Think),
            &format!("OLD_{i:03}"),
            "",
        );
        s.execution_state = StepExecutionState::Finished;
        steps.push(s);
    }
    let current = step(
        "base",
        StageRef::NoRelative,
        Executor::Skill(Skill::Think),
        "NOW",
        "",
    );
    let id = current.step_id.clone();
    steps.push(current);
    a.add_steps(steps);
    let set = PromptSet::builtin(Language::En);
    let tools = BTreeMap::new();
    let step = a.agent_step.get(&id).unwrap().clone();
    let ctx = PromptContext {
        agent: &a,
        step: &step,
        tool_descriptions: &tools,
        tool_step: None,
        tool_capabilities: None,
        tool_history: None,
        budget: None,
        tokens: crate::prompt::tokens::TokenCounter::Estimate,
        constrained: false,
    };
    let p = build_prompt(&set, Skill::Think, &ctx).whole();
    // Six over the cap: the oldest leave a block of half the cap (12) at once, so the entries
    // above stay the same for the next calls, numbered by their place in the whole history.
    assert!(!p.contains("OLD_011"), "the oldest steps are left out");
    assert!(p.contains("OLD_012") && p.contains(&format!("OLD_{:03}", total - 1)));
    assert!(p.contains("## 13. think · finished"), "{p}");
    assert!(p.contains(&format!("{} 12", set.phrases().history_omitted)));
}

#[test]
fn older_steps_leave_the_history_a_block_at_a_time() {
    use super::assemble::left_out;
    // Up to the cap nothing is left out; past it, blocks of half the cap.
    assert_eq!(left_out(24, 24), 0);
    assert_eq!(
        (25..=36).map(|n| left_out(n, 24)).collect::<Vec<_>>(),
        [12; 12]
    );
    assert_eq!(left_out(37, 24), 24);
    // A tight budget's five: blocks of two.
    assert_eq!(
        (5..=10).map(|n| left_out(n, 5)).collect::<Vec<_>>(),
        [0, 2, 2, 4, 4, 6]
    );
}

#[test]
fn a_long_queue_shows_only_the_next_steps_and_counts_the_rest() {
    let mut a = Agent::from(AgentState::new(
        "a1".into(),
        "Ada".into(),
        "clerk".into(),
        "".into(),
    ));
    a.skills = vec![Skill::Think];
    let step = |i: usize| {
        StepState::new(
            "t".into(),
            StageRef::NoRelative,
            "a1".into(),
            Executor::Skill(Skill::Think),
            format!("QUEUED_{i:03}"),
            "",
        )
    };
    a.add_steps((0..40).map(step).collect());
    let current = a.start_next().unwrap();
    let set = PromptSet::builtin(Language::En);
    let tools = BTreeMap::new();
    let ctx = PromptContext {
        agent: &a,
        step: &current,
        tool_descriptions: &tools,
        tool_step: None,
        tool_capabilities: None,
        tool_history: None,
        budget: None,
        tokens: crate::prompt::tokens::TokenCounter::Estimate,
        constrained: false,
    };
    let p = build_prompt(&set, Skill::Think, &ctx).whole();
    assert!(p.contains("QUEUED_001") && p.contains(&format!("QUEUED_{MAX_PENDING_IN_HISTORY:03}")));
    assert!(!p.contains(&format!("QUEUED_{:03}", MAX_PENDING_IN_HISTORY + 1)));
    assert!(p.contains(&format!(
        "{} {}",
        set.phrases().pending_omitted,
        39 - MAX_PENDING_IN_HISTORY
    )));
}

#[test]
fn instruction_generation_shows_the_servers_known_capabilities() {
    let mut a = Agent::from(AgentState::new(
        "a1".into(),
        "Ada".into(),
        "clerk".into(),
        "".into(),
    ));
    a.skills = vec![Skill::InstructionGeneration];
    a.tools = vec!["ws".into()];
    let ig = step(
        "t",
        stage("s"),
        Executor::Skill(Skill::InstructionGeneration),
        "prepare",
        "write a file",
    );
    let tool = step(
        "t",
        stage("s"),
        Executor::Tool("ws".into()),
        "write",
        "write a.txt",
    );
    let caps: crate::server_description::ServerDescription = serde_json::from_value(
        json!({"tools": [{"name": "write_file", "input_schema": {"required": ["path", "content"]}}]}),
    )
    .unwrap();
    let set = PromptSet::builtin(Language::En);
    let descriptions: BTreeMap<String, String> = [("ws".to_owned(), "files".to_owned())].into();
    let ctx = PromptContext {
        agent: &a,
        step: &ig,
        tool_descriptions: &descriptions,
        tool_step: Some(&tool),
        tool_capabilities: Some(&caps),
        tool_history: None,
        budget: None,
        tokens: crate::prompt::tokens::TokenCounter::Estimate,
        constrained: false,
    };
    let p = build_prompt(&set, Skill::InstructionGeneration, &ctx).whole();
    assert!(p.contains(&set.phrases().capabilities_note) && p.contains("write_file"));
    let without = PromptContext {
        tool_capabilities: None,
        ..ctx
    };
    assert!(
        !build_prompt(&set, Skill::InstructionGeneration, &without)
            .whole()
            .contains("write_file")
    );
}

/// The step's task and stage ids head a history with entries (the same for the stage's later
/// calls), and are in the current step otherwise: above an empty history they would be the
/// first difference between two stages' calls, ahead of the skill's rules.
#[test]
fn the_ids_head_a_history_with_entries_and_are_in_the_current_step_otherwise() {
    let set = PromptSet::builtin(Language::En);
    let h = set.headings();
    let (agent, current) = fixture(Skill::Think);
    let prompt = prompt_for(&set, Skill::Think, &agent, &current);
    let history = section(&prompt, &h.history, &h.memory_content);
    assert!(
        history.contains("- task_id: t1\n- stage_id: s1"),
        "{history}"
    );
    let head = section(&prompt, &h.current_step, "none");
    assert!(
        head.contains("- executor: think (skill)") && !head.contains("task_id"),
        "{head}"
    );

    let (agent, current) = fixture(Skill::Planning);
    let prompt = prompt_for(&set, Skill::Planning, &agent, &current);
    let head = section(&prompt, &h.current_step, "none");
    assert!(
        head.contains("- task_id: t1\n- stage_id: s1\n- executor: planning (skill)"),
        "{head}"
    );

    // A manager's task_manager steps on two stages, nothing executed or pending in either: the
    // same up to the current step, which names its own stage.
    let mut agent = Agent::from(AgentState::new(
        "m".into(),
        "Mo".into(),
        "manager".into(),
        "".into(),
    ));
    agent.skills = vec![Skill::TaskManager];
    let steps: Vec<StepState> = ["s1", "s2"]
        .iter()
        .map(|s| {
            let e = Executor::Skill(Skill::TaskManager);
            step("t1", stage(s), e, "Act on the notice", "Stage done")
        })
        .collect();
    let ids: Vec<StepId> = steps.iter().map(|s| s.step_id.clone()).collect();
    agent.add_steps(steps);
    let [one, two] = [&ids[0], &ids[1]].map(|id| prompt_for(&set, Skill::TaskManager, &agent, id));
    let cut = |p: &str| p.find(&format!("\n# {}\n", h.current_step)).unwrap();
    assert_eq!(one[..cut(&one)], two[..cut(&two)]);
    assert!(
        one[cut(&one)..].contains("- stage_id: s1") && two[cut(&two)..].contains("- stage_id: s2")
    );
}

/// A history entry shows what its step produced, not what other entries already show or the
/// runtime's bookkeeping: a plan is its steps' executors and intentions (each planned step has
/// an entry with its text), a sent message is what its sender wrote (no wait ids, task or
/// sender).
#[test]
fn a_history_entry_shows_a_plan_as_its_outline_and_a_message_as_written() {
    let set = PromptSet::builtin(Language::En);
    let h = set.headings();
    let (mut agent, current) = fixture(Skill::Reflection);
    let mut plan = step(
        "t1",
        stage("s1"),
        Executor::Skill(Skill::Planning),
        "PLAN",
        "Plan it",
    );
    plan.execution_state = StepExecutionState::Finished;
    let mut planned = StepResult::output(json!({
        "planned_step": [{"step_intention": "Draft it", "type": "skill", "executor": "think",
                          "text_content": "PLANNED_TEXT"}],
        "rejected": []
    }));
    // The answer asked about again and the repair made are records for people, not context.
    planned.reasked.push(crate::state::Try {
        error: "the answer has no <planned_step> tag".into(),
        answer: "REASKED_ANSWER".into(),
    });
    planned.repairs.push(crate::policy::Fired::new(
        crate::policy::Repair::WorkStepInserted,
        "REPAIR_NOTE",
    ));
    plan.execute_result = Some(planned);
    let mut sent = step(
        "t1",
        stage("s1"),
        Executor::Skill(Skill::SendMessage),
        "SEND",
        "Send it",
    );
    sent.execution_state = StepExecutionState::Finished;
    sent.execute_result = Some(StepResult::output(json!({"send_message": {
        "task_id": "t1", "sender_id": "a1", "receiver": ["b2"], "message": "the draft",
        "stage_relative": "s1", "need_reply": true, "waiting": ["WAIT_ID"],
        "return_waiting_id": null
    }})));
    agent.add_steps(vec![plan, sent]);
    let prompt = prompt_for(&set, Skill::Reflection, &agent, &current);
    let history = section(&prompt, &h.history, &h.memory_content);
    assert!(
        history.contains(
            r#"- execute_result: {"planned_step":[{"executor":"think","step_intention":"Draft it"}]}"#
        ),
        "{history}"
    );
    assert!(!history.contains("PLANNED_TEXT"), "{history}");
    assert!(!history.contains("REASKED_ANSWER"), "{history}");
    assert!(!history.contains("REPAIR_NOTE"), "{history}");
    assert!(
        history.contains(
            r#"- execute_result: {"send_message":{"message":"the draft","need_reply":true,"receiver":["b2"],"stage_relative":"s1","waiting":true}}"#
        ),
        "{history}"
    );
    assert!(!history.contains("WAIT_ID"), "{history}");
}
