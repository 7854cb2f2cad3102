//! Each of the eleven ask_info queries: what the answer says, and that it returns the asker's
//! wait id to the asker, in the asker's task and stage.

use super::super::{Catalog, Member, SyncCore};
use crate::config::{AgentTemplate, LlmConfig};
use crate::ids::{AgentId, StageId, StageRef, TaskId, WaitId};
use crate::message::{
    AskInfoQuery, AskInfoRequest, ExecuteOutput, Message, StagePlan, TaskInstruction,
};
use crate::state::Skill;
use serde_json::json;

fn member(id: &str, role: &str, skills: &[Skill]) -> Member {
    Member {
        profile: format!("{id} does {role} work"),
        skills: skills.to_vec(),
        ..Member::new(id, role)
    }
}

fn template(name: &str, tools: &[&str]) -> AgentTemplate {
    AgentTemplate {
        name: name.into(),
        role: format!("{name} role"),
        profile: format!("A {name} for hire"),
        skills: vec![Skill::Planning, Skill::Summary],
        tools: tools.iter().map(|t| t.to_string()).collect(),
        llm: LlmConfig::Scripted {
            script: "s.yaml".into(),
            max_in_flight: 1,
        },
        file: "team.yaml".into(),
    }
}

/// A manager `m` and workers `a`, `b`, one task of `m` with a running stage (a) and a
/// pending one (b); returns (core, task, [stages]).
fn setup() -> (SyncCore, TaskId, Vec<StageId>) {
    let roster = vec![
        member("m", "manager", &[Skill::TaskManager, Skill::AskInfo]),
        member("a", "analyst", &[Skill::Planning, Skill::Think]),
        member("b", "writer", &[Skill::Planning]),
        Member {
            human: true,
            ..member("h", "operator", &[])
        },
    ];
    let catalog = Catalog {
        templates: vec![
            template("researcher", &["web"]),
            template("coder", &["workspace"]),
        ],
        skills: vec![
            (Skill::Think, "Think before acting.".into()),
            (Skill::AskInfo, "Ask the runtime.".into()),
        ],
        tools: vec![("workspace".into(), "Files in a sandbox.".into())],
        ..Default::default()
    };
    let mut c = SyncCore::new(roster, &["m".into()], &["h".into()]).with_catalog(catalog);
    let t = TaskId::from("t1");
    let run = |c: &mut SyncCore, i: TaskInstruction| {
        let a = c.apply(
            &ExecuteOutput {
                agent_id: Some("m".into()),
                // Given in the base task, where add_task comes from.
                task_id: Some(c.base_task().clone()),
                task_instruction: Some(i),
                ..Default::default()
            },
            "now",
        );
        assert!(a.refused.is_none(), "{:?}", a.refused);
    };
    run(
        &mut c,
        TaskInstruction::AddTask {
            attachments: Vec::new(),
            task_id: t.clone(),
            task_name: "Report".into(),
            task_intention: "Write the report".into(),
            requested_by: None,
            goal_step: None,
            trace_id: None,
        },
    );
    let plan = |intention: &str, agent: &str| StagePlan {
        stage_intention: intention.into(),
        agent_allocation: [(AgentId::from(agent), format!("{agent}: do {intention}"))].into(),
    };
    run(
        &mut c,
        TaskInstruction::AddStage {
            task_id: t.clone(),
            stages: vec![plan("research", "a"), plan("write", "b")],
        },
    );
    let stages = c.task(&t).unwrap().stage_list.clone();
    (c, t, stages)
}

fn ask(c: &SyncCore, asker: &str, query: AskInfoQuery) -> Message {
    let req = AskInfoRequest {
        query,
        waiting_id: WaitId::from("w-1"),
        sender_task_id: "t1".into(),
        sender_stage: StageRef::NoRelative,
    };
    let states = |id: &AgentId| {
        (id.as_str() == "a").then(|| {
            json!({"agent_id": "a", "name": "Ann", "role": "analyst", "profile": "p", "working_state": "waiting",
                   "skills": ["planning"], "tools": [], "step_lock": ["w9"],
                   "agent_step": {"step_list": ["s1", "s2"], "todo": ["s2"]},
                   "working_memory": {"t1": {"st": ["s1", "s2"]}},
                   "persistent_memory": {"20250613T103022": "likes tables"},
                   "llm_config": {"provider": "openai", "model": "gpt-x"},
                   "token_usage": {"prompt_tokens": 120, "completion_tokens": 7},
                   "steps": [
                       {"executor": "think", "execution_state": "finished", "step_intention": "old", "task_id": "t1", "stage_id": "st"},
                       {"executor": "send_message", "execution_state": "running", "step_intention": "Ask b", "task_id": "t1", "stage_id": "st"},
                       {"executor": "summary", "execution_state": "init", "step_intention": "Sum up", "task_id": "t1", "stage_id": "st"}]})
        })
    };
    let m = c.answer(&asker.into(), &req, &states);
    // Every answer goes back to the asker only, returns its wait id and needs no reply.
    assert_eq!(m.receiver, vec![AgentId::from(asker)]);
    assert_eq!(m.return_waiting_id, Some(WaitId::from("w-1")));
    assert_eq!(m.sender_id.as_str(), "[SyncState]");
    assert_eq!(m.task_id.as_str(), "t1");
    assert!(!m.need_reply && m.waiting.is_none());
    // The answer nests in prompts: no heading above level 3.
    for l in m.message.lines() {
        let hashes = l.chars().take_while(|c| *c == '#').count();
        assert!(hashes == 0 || hashes >= 3, "heading too high: {l}");
    }
    m
}

fn has(m: &Message, needles: &[&str]) {
    for n in needles {
        assert!(m.message.contains(n), "missing {n:?} in:\n{}", m.message);
    }
}

fn lacks(m: &Message, needles: &[&str]) {
    for n in needles {
        assert!(
            !m.message.contains(n),
            "unexpected {n:?} in:\n{}",
            m.message
        );
    }
}

#[test]
fn managed_tasks_lists_the_askers_tasks_with_every_stage() {
    let (c, _, stages) = setup();
    let m = ask(&c, "m", AskInfoQuery::ManagedTasks);
    has(
        &m,
        &[
            "query `managed_tasks`",
            "Task `t1`: Report",
            "Write the report",
            "state: running",
            stages[0].as_str(),
            stages[1].as_str(),
            "MAS base task",
            "base task",
        ],
    );
    let m = ask(&c, "a", AskInfoQuery::ManagedTasks);
    has(&m, &["You manage no task."]);
}

#[test]
fn joined_tasks_shows_only_the_stages_the_asker_works_in() {
    let (c, _, stages) = setup();
    let m = ask(&c, "a", AskInfoQuery::JoinedTasks);
    has(&m, &["Task `t1`", stages[0].as_str(), "a: do research"]);
    lacks(&m, &[stages[1].as_str(), "MAS base task"]);
    let m = ask(&c, "h", AskInfoQuery::JoinedTasks);
    has(&m, &["MAS base task"]);
    lacks(&m, &["Task `t1`"]);
}

#[test]
fn task_shows_its_stages_and_latest_shared_info_and_an_unknown_task_is_said_so() {
    let (c, _, stages) = setup();
    let m = ask(
        &c,
        "a",
        AskInfoQuery::Task {
            task_id: "t1".into(),
        },
    );
    has(
        &m,
        &[
            "Task `t1`",
            "manager: `m`",
            "task group: `m`, `a`, `b`",
            stages[1].as_str(),
            "Latest shared information",
        ],
    );
    let m = ask(
        &c,
        "a",
        AskInfoQuery::Task {
            task_id: "nope".into(),
        },
    );
    has(&m, &["There is no task `nope`."]);
}

#[test]
fn stage_shows_allocation_and_states_with_or_without_task_id() {
    let (c, t, stages) = setup();
    let m = ask(
        &c,
        "a",
        AskInfoQuery::Stage {
            task_id: None,
            stage_id: stages[0].clone(),
        },
    );
    has(
        &m,
        &[
            "Stage `",
            "research",
            "`a` (idle): a: do research",
            "state: running",
        ],
    );
    let m = ask(
        &c,
        "a",
        AskInfoQuery::Stage {
            task_id: Some(t),
            stage_id: stages[1].clone(),
        },
    );
    has(&m, &["state: init", "`b`"]);
    let m = ask(
        &c,
        "a",
        AskInfoQuery::Stage {
            task_id: Some("other".into()),
            stage_id: stages[0].clone(),
        },
    );
    has(&m, &["belongs to task `t1`, not to task `other`"]);
    let m = ask(
        &c,
        "a",
        AskInfoQuery::Stage {
            task_id: None,
            stage_id: "ghost".into(),
        },
    );
    has(&m, &["There is no stage `ghost`."]);
}

#[test]
fn agent_templates_lists_each_and_flags_one_the_team_cannot_run() {
    let (c, _, _) = setup();
    let m = ask(&c, "m", AskInfoQuery::AgentTemplates);
    has(
        &m,
        &[
            "Template `researcher`",
            "A researcher for hire",
            "`planning`, `summary`",
            "Template `coder`",
            "needs MCP server(s) `web`",
        ],
    );
    lacks(&m, &["needs MCP server(s) `workspace`"]);
    let empty = SyncCore::new(vec![member("m", "manager", &[])], &["m".into()], &[]);
    let req = AskInfoRequest {
        query: AskInfoQuery::AgentTemplates,
        waiting_id: "w".into(),
        sender_task_id: empty.base_task().clone(),
        sender_stage: StageRef::NoRelative,
    };
    assert!(
        empty
            .answer(&"m".into(), &req, &|_| None)
            .message
            .contains("no agent templates")
    );
}

#[test]
fn all_agent_profiles_covers_agents_and_people() {
    let (c, _, _) = setup();
    let m = ask(&c, "a", AskInfoQuery::AllAgentProfiles);
    has(
        &m,
        &[
            "`m` (m)",
            "`a` (a)",
            "`b` (b)",
            "`h` (h)",
            "a does analyst work",
            "kind: human",
            "kind: LLM agent",
        ],
    );
}

#[test]
fn team_profiles_adds_skills_tools_and_current_work() {
    let (c, _, stages) = setup();
    let m = ask(&c, "m", AskInfoQuery::TeamProfiles);
    has(
        &m,
        &[
            "The team",
            "skills: `planning`, `think`",
            &format!("working in: stage `{}` of task `t1`", stages[0]),
            "working in: no running stage",
        ],
    );
}

#[test]
fn task_group_profiles_lists_the_group_or_says_the_task_is_unknown() {
    let (c, _, _) = setup();
    let m = ask(
        &c,
        "a",
        AskInfoQuery::TaskGroupProfiles {
            task_id: "t1".into(),
        },
    );
    has(
        &m,
        &["Task group of task `t1`", "`m` (m)", "`a` (a)", "`b` (b)"],
    );
    lacks(&m, &["`h` (h)"]);
    let m = ask(
        &c,
        "a",
        AskInfoQuery::TaskGroupProfiles {
            task_id: "x".into(),
        },
    );
    has(&m, &["There is no task `x`."]);
}

#[test]
fn stage_profiles_lists_allocated_agents_with_their_goal() {
    let (c, _, stages) = setup();
    let m = ask(
        &c,
        "a",
        AskInfoQuery::StageProfiles {
            task_id: Some("t1".into()),
            stage_id: stages[1].clone(),
        },
    );
    has(
        &m,
        &[
            "Agents of stage",
            "`b` (b)",
            "goal in the stage: b: do write",
            "state in the stage: idle",
        ],
    );
    lacks(&m, &["`a` (a)"]);
    let m = ask(
        &c,
        "a",
        AskInfoQuery::StageProfiles {
            task_id: None,
            stage_id: "ghost".into(),
        },
    );
    has(&m, &["There is no stage `ghost`."]);
}

#[test]
fn agent_states_renders_live_state_and_names_unknown_agents() {
    let (c, _, _) = setup();
    let m = ask(
        &c,
        "m",
        AskInfoQuery::AgentStates {
            agent_ids: vec!["a".into(), "b".into(), "zed".into()],
        },
    );
    has(
        &m,
        &[
            "Agent `a`",
            "working state: waiting",
            "steps held: 2 (1 still to run)",
            "replies waited for: 1",
            "task `t1`: st: 2",
            "likes tables",
            "llm: openai gpt-x",
            "tokens spent: 120 prompt + 7 completion",
            "running: `send_message` running: Ask b (task `t1`, stage st)",
            "next steps (1 queued):",
            "`summary` init: Sum up",
            "Agent `b`",
            "not been published yet",
            "There is no agent `zed` in the team.",
        ],
    );
    let m = ask(&c, "m", AskInfoQuery::AgentStates { agent_ids: vec![] });
    has(&m, &["No agent id was given."]);
}

#[test]
fn skills_and_tools_lists_descriptions() {
    let (c, _, _) = setup();
    let m = ask(&c, "a", AskInfoQuery::SkillsAndTools);
    has(
        &m,
        &[
            "### Skills",
            "`think`: Think before acting.",
            "`ask_info`: Ask the runtime.",
            "### Tools (MCP servers)",
            "`workspace`: Files in a sandbox.",
        ],
    );
}

#[test]
fn a_query_is_answered_through_apply_even_when_nothing_else_is_asked() {
    let (mut c, _, _) = setup();
    let req = AskInfoRequest {
        query: AskInfoQuery::ManagedTasks,
        waiting_id: "w".into(),
        sender_task_id: "t1".into(),
        sender_stage: StageRef::NoRelative,
    };
    let a = c.apply(
        &ExecuteOutput {
            agent_id: Some("m".into()),
            ask_info: Some(req.clone()),
            ..Default::default()
        },
        "now",
    );
    assert_eq!(a.queries, vec![(AgentId::from("m"), req)]);
    assert!(a.refused.is_none());
}

/// A team with every kind of fact an answer shows (shared info, a summary, a completion
/// summary, an agent made from a template, an allocated agent not in the team), and one with
/// nothing (no templates, servers or agents), each asked every query; the answers' texts.
fn every_answer(texts: std::sync::Arc<crate::texts::Texts>) -> Vec<String> {
    let (mut c, t, stages) = setup();
    let task = c.tasks.get_mut(&t).unwrap();
    task.task_summary = Some("Half done.\nMore to come.".into());
    task.shared_info_pool.push_back(crate::state::SharedInfo {
        agent_id: "a".into(),
        role: "analyst".into(),
        stage_id: StageRef::Stage(stages[0].clone()),
        content: "Found three sources.".into(),
        timestamp: "2025-06-13 10:30:22".into(),
    });
    let first = c.stages.get_mut(&stages[0]).unwrap();
    first
        .completion_summary
        .insert("a".into(), "Sources found.".into());
    first
        .agent_allocation
        .insert("ghost".into(), "haunt".into());
    c.roster.push(Member {
        template: Some("researcher".into()),
        ..member("r", "researcher", &[Skill::Think])
    });
    let c = c.with_texts(texts.clone());
    let empty = SyncCore::new(vec![], &[], &[]).with_texts(texts);
    let staged = |stage_id: &StageId, task_id: Option<TaskId>| {
        [
            AskInfoQuery::Stage {
                task_id: task_id.clone(),
                stage_id: stage_id.clone(),
            },
            AskInfoQuery::StageProfiles {
                task_id,
                stage_id: stage_id.clone(),
            },
        ]
    };
    let mut queries = vec![
        AskInfoQuery::ManagedTasks,
        AskInfoQuery::JoinedTasks,
        AskInfoQuery::Task { task_id: t.clone() },
        AskInfoQuery::Task {
            task_id: "nope".into(),
        },
        AskInfoQuery::AgentTemplates,
        AskInfoQuery::AllAgentProfiles,
        AskInfoQuery::TeamProfiles,
        AskInfoQuery::TaskGroupProfiles { task_id: t.clone() },
        AskInfoQuery::TaskGroupProfiles {
            task_id: "nope".into(),
        },
        AskInfoQuery::AgentStates {
            agent_ids: vec!["a".into(), "b".into(), "zed".into()],
        },
        AskInfoQuery::AgentStates { agent_ids: vec![] },
        AskInfoQuery::SkillsAndTools,
    ];
    queries.extend(staged(&stages[0], None));
    queries.extend(staged(&stages[1], Some(t)));
    queries.extend(staged(&stages[0], Some("other".into())));
    queries.extend(staged(&"ghost".into(), None));
    let mut out: Vec<String> = ["m", "a", "h"]
        .into_iter()
        .flat_map(|asker| queries.iter().map(move |q| (asker, q.clone())))
        .map(|(asker, q)| ask(&c, asker, q).message)
        .collect();
    for q in queries {
        let req = AskInfoRequest {
            query: q,
            waiting_id: "w".into(),
            sender_task_id: empty.base_task().clone(),
            sender_stage: StageRef::NoRelative,
        };
        out.push(empty.answer(&"m".into(), &req, &|_| None).message);
    }
    out
}

/// What the fixture's team wrote (names, intentions, goals, roles, profiles, descriptions,
/// a published state's values): the team's words, in whatever language it writes them.
const FACTS: &[&str] = &[
    "A researcher for hire",
    "A coder for hire",
    "Think before acting.",
    "Ask the runtime.",
    "Files in a sandbox.",
    "Found three sources.",
    "Sources found.",
    "Half done.",
    "More to come.",
    "Write the report",
    "MAS base task",
    "a: do research",
    "b: do write",
    "researcher role",
    "coder role",
    "openai gpt-x",
    "likes tables",
    "Ask b",
    "Sum up",
    "20250613T103022",
    "Report",
    "researcher",
    "research",
    "write",
    "haunt",
    "analyst",
    "writer",
    "manager",
    "operator",
    "does",
    "work",
    "Ann",
    "st",
];

#[test]
fn a_chinese_teams_answers_hold_no_english_word_the_runtime_wrote() {
    let zh = crate::texts::Texts::builtin(crate::texts::Language::Zh);
    for answer in every_answer(zh) {
        let mut text = answer.clone();
        for fact in FACTS {
            text = text.replace(fact, " ");
        }
        let found = crate::texts::english_words(&text, &[]);
        assert!(found.is_empty(), "English words {found:?} in:\n{answer}");
    }
}

#[test]
fn the_english_answers_keep_their_wording() {
    // The catalog's English texts are the answers' former literals: a few whole lines.
    let all = every_answer(crate::texts::Texts::english()).join("\n");
    for line in [
        "[SyncState] Answer to your ask_info query `managed_tasks`:\n\n### Tasks you manage\n",
        "\n- 2025-06-13 10:30:22 `a` (analyst), stage ",
        "\n- stages (2 in all, in order):\n",
        "\n  - `ghost` (unknown): haunt\n",
        "\n    completion summary: Sources found.\n",
        "\n#### `ghost`\n- not in the team\n- goal in the stage: haunt\n- state in the stage: unknown\n",
        "\n- kind: LLM agent\n- created from template `researcher`\n",
        "\n- working memory (task → stage: steps):\n  - task `t1`: st: 2\n- persistent memory:\n",
        "\n### Tasks you manage\nYou manage no task.",
        "\n### The team\nNobody.",
        "\n### Tools (MCP servers)\nThe team has no MCP servers.",
    ] {
        assert!(all.contains(line), "missing {line:?}");
    }
}
