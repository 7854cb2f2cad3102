//! SyncState's answers to the eleven ask_info queries (SPEC §7): readable Markdown (headings
//! from level 3 down, so the answer nests inside any prompt) in a message that returns the
//! asker's wait id. Every query is answered; an unknown task, stage or agent is said so.

use super::{Member, SyncCore};
use crate::ids::{AgentId, StageId, TaskId};
use crate::message::{AskInfoQuery, AskInfoRequest, Message, SYNC_STATE_SENDER};
use crate::prompt::markdown::{bullet, one_line};
use crate::state::{StageState, TaskState};
use serde_json::Value;

/// How many of a task's latest shared-info lines the `task` query shows.
const SHARED_INFO_SHOWN: usize = 20;
/// How many queued steps the `agent_states` query lists per agent.
const QUEUED_SHOWN: usize = 5;

impl SyncCore {
    /// The answer to `req`, asked by `asker`. `agent_state` gives an agent's published state
    /// (SyncState does not own agent states; the monitor has the latest of each).
    pub fn answer(
        &self,
        asker: &AgentId,
        req: &AskInfoRequest,
        agent_state: &dyn Fn(&AgentId) -> Option<Value>,
    ) -> Message {
        let body = match &req.query {
            AskInfoQuery::ManagedTasks => self.managed_tasks(asker),
            AskInfoQuery::JoinedTasks => self.joined_tasks(asker),
            AskInfoQuery::Task { task_id } => self.one_task(task_id),
            AskInfoQuery::Stage { task_id, stage_id } => {
                match self.find_stage(task_id.as_ref(), stage_id) {
                    Ok(s) => stage_block(s, 3),
                    Err(why) => why,
                }
            }
            AskInfoQuery::AgentTemplates => self.templates(),
            AskInfoQuery::AllAgentProfiles => {
                let all: Vec<&Member> = self.roster.iter().collect();
                profiles("Every agent in the system", &all, brief)
            }
            AskInfoQuery::TeamProfiles => self.team(),
            AskInfoQuery::TaskGroupProfiles { task_id } => match self.tasks.get(task_id) {
                Some(t) => {
                    let group: Vec<&Member> =
                        t.task_group.iter().filter_map(|a| self.member(a)).collect();
                    profiles(&format!("Task group of task `{task_id}`"), &group, |m| {
                        full(m)
                    })
                }
                None => no_task(task_id),
            },
            AskInfoQuery::StageProfiles { task_id, stage_id } => {
                match self.find_stage(task_id.as_ref(), stage_id) {
                    Ok(s) => self.stage_profiles(s),
                    Err(why) => why,
                }
            }
            AskInfoQuery::AgentStates { agent_ids } => self.agent_states(agent_ids, agent_state),
            AskInfoQuery::SkillsAndTools => self.skills_and_tools(),
        };
        let kind = serde_json::to_value(&req.query)
            .ok()
            .and_then(|v| v.get("type").and_then(Value::as_str).map(str::to_owned))
            .unwrap_or_default();
        let mut m = Message::notice(
            req.sender_task_id.clone(),
            AgentId::from(SYNC_STATE_SENDER),
            vec![asker.clone()],
            req.sender_stage.clone(),
            format!(
                "[SyncState] Answer to your ask_info query `{kind}`:\n\n{}",
                body.trim_end()
            ),
        );
        m.return_waiting_id = Some(req.waiting_id.clone());
        m
    }

    fn managed_tasks(&self, asker: &AgentId) -> String {
        let mut out = String::from("### Tasks you manage\n");
        let managed: Vec<&TaskState> = self
            .tasks
            .values()
            .filter(|t| &t.task_manager == asker)
            .collect();
        if managed.is_empty() {
            out.push_str("You manage no task.\n");
        }
        for t in managed {
            out.push('\n');
            out.push_str(&self.task_block(t, 4, |_| true));
        }
        out
    }

    fn joined_tasks(&self, asker: &AgentId) -> String {
        let mut out = String::from("### Tasks you take part in\n");
        let joined: Vec<&TaskState> = self
            .tasks
            .values()
            .filter(|t| t.task_group.contains(asker))
            .collect();
        if joined.is_empty() {
            out.push_str("You take part in no task.\n");
        }
        for t in joined {
            out.push('\n');
            // Only the stages the asker is allocated in: the others are not its business.
            out.push_str(&self.task_block(t, 4, |s| s.agent_allocation.contains_key(asker)));
        }
        out
    }

    fn one_task(&self, id: &TaskId) -> String {
        let Some(t) = self.tasks.get(id) else {
            return no_task(id);
        };
        let mut out = self.task_block(t, 3, |_| true);
        out.push_str("\n#### Latest shared information\n");
        let pool = &t.shared_info_pool;
        if pool.is_empty() {
            out.push_str("none\n");
        }
        for i in pool
            .iter()
            .skip(pool.len().saturating_sub(SHARED_INFO_SHOWN))
        {
            out.push_str(&format!(
                "- {} `{}` ({}), stage {}: {}\n",
                i.timestamp,
                i.agent_id,
                one_line(&i.role),
                i.stage_id,
                one_line(&i.content)
            ));
        }
        out
    }

    /// A task with its stages (those `show` selects) under a heading of `level`.
    fn task_block(
        &self,
        t: &TaskState,
        level: usize,
        show: impl Fn(&StageState) -> bool,
    ) -> String {
        let mut out = format!(
            "{} Task `{}`: {}\n",
            "#".repeat(level),
            t.task_id,
            one_line(&t.task_name)
        );
        let mut lines = vec![
            bullet("intention", &t.task_intention, level + 1, "none"),
            format!("- state: {}", t.execution_state),
            format!("- manager: `{}`", t.task_manager),
            format!("- task group: {}", ids(&t.task_group)),
        ];
        if t.task_id == self.base_task {
            lines.push("- this is the base task: it never finishes".into());
        }
        if let Some(s) = &t.task_summary {
            lines.push(bullet("summary", s, level + 1, "none"));
        }
        out.push_str(&lines.join("\n"));
        out.push('\n');
        let stages: Vec<&StageState> = t
            .stage_list
            .iter()
            .filter_map(|s| self.stages.get(s))
            .filter(|s| show(s))
            .collect();
        if !t.stage_list.is_empty() {
            out.push_str(&format!(
                "- stages ({} in all, in order):\n",
                t.stage_list.len()
            ));
        }
        for s in stages {
            out.push('\n');
            out.push_str(&stage_block(s, (level + 1).min(6)));
        }
        out
    }

    fn find_stage(&self, task: Option<&TaskId>, stage: &StageId) -> Result<&StageState, String> {
        match self.stages.get(stage) {
            Some(s) if task.is_none_or(|t| t == &s.task_id) => Ok(s),
            Some(s) => Err(format!(
                "### Stage `{stage}`\nStage `{stage}` belongs to task `{}`, not to task `{}`.\n",
                s.task_id,
                task.map(|t| t.as_str()).unwrap_or_default()
            )),
            None => Err(format!(
                "### Stage `{stage}`\nThere is no stage `{stage}`.\n"
            )),
        }
    }

    fn templates(&self) -> String {
        let mut out = String::from(
            "### Agent templates\nNew agents can be created from these with agent_manager `init_new_agent`.\n",
        );
        if self.catalog.templates.is_empty() {
            out.push_str("\nThe team has no agent templates.\n");
        }
        for t in &self.catalog.templates {
            let missing = self.catalog.missing_tools(t);
            out.push_str(&format!("\n#### Template `{}`\n", t.name));
            let mut lines = vec![
                format!("- role: {}", one_line(&t.role)),
                bullet("profile", &t.profile, 5, "none"),
                format!("- skills: {}", list(t.skills.iter().map(|s| s.name()))),
                format!("- tools: {}", list(t.tools.iter().map(String::as_str))),
            ];
            if !missing.is_empty() {
                lines.push(format!(
                    "- cannot be instantiated in this team: it needs MCP server(s) {} that the team lacks",
                    list(missing.into_iter())
                ));
            }
            out.push_str(&lines.join("\n"));
            out.push('\n');
        }
        out
    }

    /// The team: every member, what it can do, and the running stages it works in.
    fn team(&self) -> String {
        let members: Vec<&Member> = self.roster.iter().collect();
        profiles("The team", &members, |m| {
            let mut s = full(m);
            let busy: Vec<String> = self
                .stages
                .values()
                .filter(|st| {
                    st.execution_state == crate::state::ExecutionState::Running
                        && st.agent_allocation.contains_key(&m.id)
                })
                .map(|st| format!("stage `{}` of task `{}`", st.stage_id, st.task_id))
                .collect();
            s.push_str(&format!(
                "\n- working in: {}",
                if busy.is_empty() {
                    "no running stage".to_owned()
                } else {
                    busy.join(", ")
                }
            ));
            s
        })
    }

    fn stage_profiles(&self, s: &StageState) -> String {
        let mut out = format!(
            "### Agents of stage `{}` (task `{}`)\n",
            s.stage_id, s.task_id
        );
        for (a, goal) in &s.agent_allocation {
            out.push('\n');
            match self.member(a) {
                Some(m) => out.push_str(&format!(
                    "#### `{}` ({})\n{}",
                    m.id,
                    one_line(&m.name),
                    full(m)
                )),
                None => out.push_str(&format!("#### `{a}`\n- not in the team")),
            }
            out.push_str(&format!(
                "\n{}\n- state in the stage: {}\n",
                bullet("goal in the stage", goal, 5, "none"),
                s.every_agent_state
                    .get(a)
                    .map(|st| st.to_string())
                    .unwrap_or_else(|| "unknown".into())
            ));
        }
        out
    }

    fn agent_states(&self, ids: &[AgentId], state: &dyn Fn(&AgentId) -> Option<Value>) -> String {
        let mut out = String::from("### Agent states\n");
        if ids.is_empty() {
            out.push_str("No agent id was given.\n");
        }
        for id in ids {
            out.push_str(&format!("\n#### Agent `{id}`\n"));
            match (self.member(id), state(id)) {
                (Some(_), Some(v)) => out.push_str(&state_lines(&v)),
                (Some(_), None) => out.push_str("Its state has not been published yet.\n"),
                (None, _) => out.push_str(&format!("There is no agent `{id}` in the team.\n")),
            }
        }
        out
    }

    fn skills_and_tools(&self) -> String {
        let mut out = String::from("### Skills\n");
        for (skill, description) in &self.catalog.skills {
            out.push_str(&bullet(
                &format!("`{}`", skill.name()),
                description,
                4,
                "no description",
            ));
            out.push('\n');
        }
        out.push_str("\n### Tools (MCP servers)\n");
        if self.catalog.tools.is_empty() {
            out.push_str("The team has no MCP servers.\n");
        }
        for (name, description) in &self.catalog.tools {
            out.push_str(&bullet(
                &format!("`{name}`"),
                description,
                4,
                "no description",
            ));
            out.push('\n');
        }
        out
    }
}

fn no_task(id: &TaskId) -> String {
    format!("### Task `{id}`\nThere is no task `{id}`.\n")
}

fn stage_block(s: &StageState, level: usize) -> String {
    let mut out = format!(
        "{} Stage `{}` (task `{}`)\n",
        "#".repeat(level),
        s.stage_id,
        s.task_id
    );
    let mut lines = vec![
        bullet("intention", &s.stage_intention, level + 1, "none"),
        format!("- state: {}", s.execution_state),
        "- allocation:".to_owned(),
    ];
    for (a, goal) in &s.agent_allocation {
        let state = s
            .every_agent_state
            .get(a)
            .map(|st| st.to_string())
            .unwrap_or_else(|| "unknown".into());
        lines.push(format!("  - `{a}` ({state}): {}", one_line(goal)));
        if let Some(summary) = s.completion_summary.get(a) {
            lines.push(format!("    completion summary: {}", one_line(summary)));
        }
    }
    out.push_str(&lines.join("\n"));
    out.push('\n');
    out
}

fn profiles(title: &str, members: &[&Member], describe: impl Fn(&Member) -> String) -> String {
    let mut out = format!("### {title}\n");
    if members.is_empty() {
        out.push_str("Nobody.\n");
    }
    for m in members {
        out.push_str(&format!(
            "\n#### `{}` ({})\n{}\n",
            m.id,
            one_line(&m.name),
            describe(m)
        ));
    }
    out
}

/// Who an agent is.
fn brief(m: &Member) -> String {
    let mut lines = vec![
        format!("- role: {}", one_line(&m.role)),
        bullet("profile", &m.profile, 5, "none"),
        format!("- kind: {}", if m.human { "human" } else { "LLM agent" }),
    ];
    if let Some(t) = &m.template {
        lines.push(format!("- created from template `{t}`"));
    }
    lines.join("\n")
}

/// Who an agent is and what it can do.
fn full(m: &Member) -> String {
    format!(
        "{}\n- skills: {}\n- tools: {}",
        brief(m),
        list(m.skills.iter().map(|s| s.name())),
        list(m.tools.iter().map(String::as_str))
    )
}

fn s_of(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// The parts of a published agent state that say what the agent is doing (`steps` holds its
/// step states, when the caller has them).
fn state_lines(v: &Value) -> String {
    let mut lines = identity_lines(v);
    lines.extend(step_lines(v));
    lines.extend(working_memory_lines(v));
    lines.extend(persistent_memory_lines(v));
    if let Some(t) = v.get("template").and_then(Value::as_str) {
        lines.push(format!("- created from template `{t}`"));
    }
    lines.join("\n") + "\n"
}

/// Who the agent of a published state is, what it can do, its model and its spending.
fn identity_lines(v: &Value) -> Vec<String> {
    let names = |k: &str| {
        v.get(k)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .filter(|l| !l.is_empty())
            .unwrap_or_else(|| "none".into())
    };
    let mut lines = vec![
        format!("- name: {}", one_line(&s_of(v, "name"))),
        format!("- role: {}", one_line(&s_of(v, "role"))),
        bullet("profile", &s_of(v, "profile"), 5, "none"),
        format!("- working state: {}", s_of(v, "working_state")),
        format!("- skills: {}", names("skills")),
        format!("- tools: {}", names("tools")),
    ];
    if let Some(llm) = v.get("llm_config").filter(|l| l.is_object()) {
        lines.push(format!(
            "- llm: {} {}",
            s_of(llm, "provider"),
            s_of(llm, "model")
        ));
    }
    if let Some(t) = v.get("token_usage") {
        lines.push(format!(
            "- tokens spent: {} prompt + {} completion",
            t["prompt_tokens"].as_u64().unwrap_or(0),
            t["completion_tokens"].as_u64().unwrap_or(0)
        ));
    }
    lines
}

/// The steps and waits a published state holds, and (from `steps`) which run and are next.
fn step_lines(v: &Value) -> Vec<String> {
    let count = |list: Option<&Value>| list.and_then(Value::as_array).map_or(0, Vec::len);
    let todo = count(v.pointer("/agent_step/todo"));
    let all = count(v.pointer("/agent_step/step_list"));
    let waits = count(v.get("step_lock"));
    let mut lines = vec![
        format!("- steps held: {all} ({todo} still to run)"),
        format!("- replies waited for: {waits}"),
    ];
    let steps: Vec<&Value> = v
        .get("steps")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .collect();
    if let Some(r) = steps.iter().find(|st| st["execution_state"] == "running") {
        lines.push(format!("- running: {}", step_line(r)));
    }
    let queued: Vec<&&Value> = steps
        .iter()
        .filter(|st| st["execution_state"] == "init")
        .collect();
    if !queued.is_empty() {
        lines.push(format!("- next steps ({} queued):", queued.len()));
        for st in queued.iter().take(QUEUED_SHOWN) {
            lines.push(format!("  - {}", step_line(st)));
        }
    }
    lines
}

/// One published step state on a line: who runs it, its state and intention, and where.
fn step_line(st: &Value) -> String {
    format!(
        "`{}` {}: {} (task `{}`, stage {})",
        s_of(st, "executor"),
        s_of(st, "execution_state"),
        one_line(&s_of(st, "step_intention")),
        s_of(st, "task_id"),
        s_of(st, "stage_id")
    )
}

/// A published state's working memory: for each task, its stages and how many steps each holds.
fn working_memory_lines(v: &Value) -> Vec<String> {
    let mut lines = vec!["- working memory (task → stage: steps):".to_owned()];
    match v.get("working_memory").and_then(Value::as_object) {
        Some(wm) if !wm.is_empty() => {
            for (task, stages) in wm {
                let stages = stages.as_object().map(|st| {
                    st.iter()
                        .map(|(stage, steps)| {
                            format!("{stage}: {}", steps.as_array().map_or(0, Vec::len))
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                });
                lines.push(format!(
                    "  - task `{task}`: {}",
                    stages
                        .filter(|x| !x.is_empty())
                        .unwrap_or_else(|| "no stage".into())
                ));
            }
        }
        _ => lines.push("  - none".into()),
    }
    lines
}

/// A published state's persistent memory, one key a line (nothing when it is empty).
fn persistent_memory_lines(v: &Value) -> Vec<String> {
    let Some(m) = v
        .get("persistent_memory")
        .and_then(Value::as_object)
        .filter(|m| !m.is_empty())
    else {
        return Vec::new();
    };
    let mut lines = vec!["- persistent memory:".to_owned()];
    for (key, text) in m {
        lines.push(format!(
            "  - {key}: {}",
            one_line(text.as_str().unwrap_or_default())
        ));
    }
    lines
}

fn ids(agents: &[AgentId]) -> String {
    list(agents.iter().map(|a| a.as_str()))
}

fn list<'a>(items: impl Iterator<Item = &'a str>) -> String {
    let v: Vec<String> = items.map(|i| format!("`{i}`")).collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

#[cfg(test)]
mod tests;
