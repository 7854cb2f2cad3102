//! SyncState's answers to the eleven ask_info queries (SPEC §7): readable Markdown (headings
//! from level 3 down, so the answer nests inside any prompt) in a message that returns the
//! asker's wait id. Every query is answered; an unknown task, stage or agent is said so. The
//! words are the team's language's (the `info_*` texts of its catalog); ids, skill and tool
//! names, states' wire names and the query's kind stay as they are, as the model writes them.

use super::{Member, SyncCore};
use crate::ids::{AgentId, StageId, TaskId};
use crate::message::{AskInfoQuery, AskInfoRequest, Message, SYNC_STATE_SENDER};
use crate::prompt::markdown::{bullet, one_line};
use crate::state::{StageState, TaskState};
use crate::texts::Texts;
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
        let t = self.texts().as_ref();
        let body = match &req.query {
            AskInfoQuery::ManagedTasks => self.managed_tasks(asker),
            AskInfoQuery::JoinedTasks => self.joined_tasks(asker),
            AskInfoQuery::Task { task_id } => self.one_task(task_id),
            AskInfoQuery::Stage { task_id, stage_id } => {
                match self.find_stage(task_id.as_ref(), stage_id) {
                    Ok(s) => stage_block(t, s, 3),
                    Err(why) => why,
                }
            }
            AskInfoQuery::AgentTemplates => self.templates(),
            AskInfoQuery::AllAgentProfiles => {
                let all: Vec<&Member> = self.roster.iter().collect();
                profiles(t, &t.info_everyone(), &all, |m| brief(t, m))
            }
            AskInfoQuery::TeamProfiles => self.team(),
            AskInfoQuery::TaskGroupProfiles { task_id } => match self.tasks.get(task_id) {
                Some(task) => {
                    let group: Vec<&Member> = task
                        .task_group
                        .iter()
                        .filter_map(|a| self.member(a))
                        .collect();
                    profiles(t, &t.info_task_group_of(task_id), &group, |m| full(t, m))
                }
                None => no_task(t, task_id),
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
            format!("{}\n\n{}", t.info_answer(kind), body.trim_end()),
        );
        m.return_waiting_id = Some(req.waiting_id.clone());
        m
    }

    fn managed_tasks(&self, asker: &AgentId) -> String {
        let t = self.texts();
        let mut out = format!("### {}\n", t.info_managed());
        let managed: Vec<&TaskState> = self
            .tasks
            .values()
            .filter(|task| &task.task_manager == asker)
            .collect();
        if managed.is_empty() {
            out.push_str(&t.info_managed_none());
            out.push('\n');
        }
        for task in managed {
            out.push('\n');
            out.push_str(&self.task_block(task, 4, |_| true));
        }
        out
    }

    fn joined_tasks(&self, asker: &AgentId) -> String {
        let t = self.texts();
        let mut out = format!("### {}\n", t.info_joined());
        let joined: Vec<&TaskState> = self
            .tasks
            .values()
            .filter(|task| task.task_group.contains(asker))
            .collect();
        if joined.is_empty() {
            out.push_str(&t.info_joined_none());
            out.push('\n');
        }
        for task in joined {
            out.push('\n');
            // Only the stages the asker is allocated in: the others are not its business.
            out.push_str(&self.task_block(task, 4, |s| s.agent_allocation.contains_key(asker)));
        }
        out
    }

    fn one_task(&self, id: &TaskId) -> String {
        let t = self.texts();
        let Some(task) = self.tasks.get(id) else {
            return no_task(t, id);
        };
        let mut out = self.task_block(task, 3, |_| true);
        out.push_str(&format!("\n#### {}\n", t.info_shared()));
        let pool = &task.shared_info_pool;
        if pool.is_empty() {
            out.push_str(&t.info_none());
            out.push('\n');
        }
        for i in pool
            .iter()
            .skip(pool.len().saturating_sub(SHARED_INFO_SHOWN))
        {
            let line = t.info_shared_line(
                &i.timestamp,
                &i.agent_id,
                one_line(&i.role),
                &i.stage_id,
                one_line(&i.content),
            );
            out.push_str(&format!("- {line}\n"));
        }
        out
    }

    /// A task with its stages (those `show` selects) under a heading of `level`.
    fn task_block(
        &self,
        task: &TaskState,
        level: usize,
        show: impl Fn(&StageState) -> bool,
    ) -> String {
        let t = self.texts().as_ref();
        let none = t.info_none();
        let mut out = format!(
            "{} {}\n",
            "#".repeat(level),
            t.info_task(&task.task_id, one_line(&task.task_name))
        );
        let mut lines = vec![
            bullet(&t.info_intention(), &task.task_intention, level + 1, &none),
            item(&t.info_state(), task.execution_state),
            item(&t.info_manager(), format!("`{}`", task.task_manager)),
            item(&t.info_task_group(), ids(t, &task.task_group)),
        ];
        if task.task_id == self.base_task {
            lines.push(format!("- {}", t.info_base_task()));
        }
        if let Some(s) = task.summary_text(t) {
            lines.push(bullet(&t.info_summary(), &s, level + 1, &none));
        }
        out.push_str(&lines.join("\n"));
        out.push('\n');
        let stages: Vec<&StageState> = task
            .stage_list
            .iter()
            .filter_map(|s| self.stages.get(s))
            .filter(|s| show(s))
            .collect();
        if !task.stage_list.is_empty() {
            out.push_str(&format!("- {}\n", t.info_stages(task.stage_list.len())));
        }
        for s in stages {
            out.push('\n');
            out.push_str(&stage_block(t, s, (level + 1).min(6)));
        }
        out
    }

    fn find_stage(&self, task: Option<&TaskId>, stage: &StageId) -> Result<&StageState, String> {
        let t = self.texts();
        let why = match self.stages.get(stage) {
            Some(s) if task.is_none_or(|id| id == &s.task_id) => return Ok(s),
            Some(s) => t.info_stage_elsewhere(
                stage,
                &s.task_id,
                task.map(|id| id.as_str()).unwrap_or_default(),
            ),
            None => t.info_no_stage(stage),
        };
        Err(format!("### {}\n{why}\n", t.info_stage_title(stage)))
    }

    fn templates(&self) -> String {
        let t = self.texts().as_ref();
        let mut out = format!("### {}\n{}\n", t.info_templates(), t.info_templates_hint());
        if self.catalog.templates.is_empty() {
            out.push_str(&format!("\n{}\n", t.info_no_templates()));
        }
        for tpl in &self.catalog.templates {
            let missing = self.catalog.missing_tools(tpl);
            out.push_str(&format!("\n#### {}\n", t.info_template(&tpl.name)));
            let mut lines = vec![
                item(&t.info_role(), one_line(&tpl.role)),
                bullet(&t.info_profile(), &tpl.profile, 5, &t.info_none()),
                item(
                    &t.info_skills(),
                    list(t, tpl.skills.iter().map(|s| s.name())),
                ),
                item(
                    &t.info_tools(),
                    list(t, tpl.tools.iter().map(String::as_str)),
                ),
            ];
            if !missing.is_empty() {
                let servers = list(t, missing.into_iter());
                lines.push(format!("- {}", t.info_template_lacks(servers)));
            }
            out.push_str(&lines.join("\n"));
            out.push('\n');
        }
        out
    }

    /// The team: every member, what it can do, and the running stages it works in.
    fn team(&self) -> String {
        let t = self.texts().as_ref();
        let members: Vec<&Member> = self.roster.iter().collect();
        profiles(t, &t.info_team(), &members, |m| {
            let busy: Vec<String> = self
                .stages
                .values()
                .filter(|st| {
                    st.execution_state == crate::state::ExecutionState::Running
                        && st.agent_allocation.contains_key(&m.id)
                })
                .map(|st| t.info_running_stage(&st.stage_id, &st.task_id))
                .collect();
            let busy = if busy.is_empty() {
                t.info_no_running_stage()
            } else {
                busy.join(", ")
            };
            format!("{}\n{}", full(t, m), item(&t.info_working_in(), busy))
        })
    }

    fn stage_profiles(&self, s: &StageState) -> String {
        let t = self.texts().as_ref();
        let mut out = format!("### {}\n", t.info_stage_agents(&s.stage_id, &s.task_id));
        for (a, goal) in &s.agent_allocation {
            out.push('\n');
            match self.member(a) {
                Some(m) => out.push_str(&format!("#### {}\n{}", member_title(t, m), full(t, m))),
                None => out.push_str(&format!("#### `{a}`\n- {}", t.info_not_in_team())),
            }
            out.push_str(&format!(
                "\n{}\n{}\n",
                bullet(&t.info_goal_in_stage(), goal, 5, &t.info_none()),
                item(&t.info_state_in_stage(), agent_state(t, s, a))
            ));
        }
        out
    }

    fn agent_states(&self, ids: &[AgentId], state: &dyn Fn(&AgentId) -> Option<Value>) -> String {
        let t = self.texts().as_ref();
        let mut out = format!("### {}\n", t.info_agent_states());
        if ids.is_empty() {
            out.push_str(&format!("{}\n", t.info_no_agent_ids()));
        }
        for id in ids {
            out.push_str(&format!("\n#### {}\n", t.info_agent(id)));
            match (self.member(id), state(id)) {
                (Some(_), Some(v)) => out.push_str(&state_lines(t, &v)),
                (Some(_), None) => out.push_str(&format!("{}\n", t.info_unpublished())),
                (None, _) => out.push_str(&format!("{}\n", t.info_no_agent(id))),
            }
        }
        out
    }

    fn skills_and_tools(&self) -> String {
        let t = self.texts().as_ref();
        let undescribed = t.info_no_description();
        let mut out = format!("### {}\n", t.info_skills_heading());
        for (skill, description) in &self.catalog.skills {
            let name = format!("`{}`", skill.name());
            out.push_str(&bullet(&name, description, 4, &undescribed));
            out.push('\n');
        }
        out.push_str(&format!("\n### {}\n", t.info_tools_heading()));
        if self.catalog.tools.is_empty() {
            out.push_str(&format!("{}\n", t.info_no_servers()));
        }
        for (name, description) in &self.catalog.tools {
            out.push_str(&bullet(&format!("`{name}`"), description, 4, &undescribed));
            out.push('\n');
        }
        out
    }
}

/// A list item `- label: value` on one line (what [`bullet`] writes for a short text).
fn item(label: &str, value: impl std::fmt::Display) -> String {
    format!("- {label}: {value}")
}

fn no_task(t: &Texts, id: &TaskId) -> String {
    format!("### {}\n{}\n", t.info_task_title(id), t.info_no_task(id))
}

/// How agent `a` is doing in stage `s`, by its state's wire name.
fn agent_state(t: &Texts, s: &StageState, a: &AgentId) -> String {
    s.every_agent_state
        .get(a)
        .map(|st| st.to_string())
        .unwrap_or_else(|| t.info_unknown())
}

fn stage_block(t: &Texts, s: &StageState, level: usize) -> String {
    let mut out = format!(
        "{} {}\n",
        "#".repeat(level),
        t.info_stage(&s.stage_id, &s.task_id)
    );
    let mut lines = vec![
        bullet(
            &t.info_intention(),
            &s.stage_intention,
            level + 1,
            &t.info_none(),
        ),
        item(&t.info_state(), s.execution_state),
        format!("- {}:", t.info_allocation()),
    ];
    for (a, goal) in &s.agent_allocation {
        let allocated = t.info_allocated(a, agent_state(t, s, a), one_line(goal));
        lines.push(format!("  - {allocated}"));
        if let Some(report) = s.report_of(a, t) {
            let label = t.info_completion_summary();
            lines.push(format!("    {label}: {}", one_line(&report)));
        }
    }
    out.push_str(&lines.join("\n"));
    out.push('\n');
    out
}

fn profiles(
    t: &Texts,
    title: &str,
    members: &[&Member],
    describe: impl Fn(&Member) -> String,
) -> String {
    let mut out = format!("### {title}\n");
    if members.is_empty() {
        out.push_str(&format!("{}\n", t.info_nobody()));
    }
    for m in members {
        out.push_str(&format!("\n#### {}\n{}\n", member_title(t, m), describe(m)));
    }
    out
}

/// A member's heading: its id and name.
fn member_title(t: &Texts, m: &Member) -> String {
    t.info_member(&m.id, one_line(&m.name))
}

/// Who an agent is.
fn brief(t: &Texts, m: &Member) -> String {
    let kind = if m.human {
        t.info_human()
    } else {
        t.info_llm_agent()
    };
    let mut lines = vec![
        item(&t.info_role(), one_line(&m.role)),
        bullet(&t.info_profile(), &m.profile, 5, &t.info_none()),
        item(&t.info_kind(), kind),
    ];
    if let Some(template) = &m.template {
        lines.push(format!("- {}", t.info_from_template(template)));
    }
    lines.join("\n")
}

/// Who an agent is and what it can do.
fn full(t: &Texts, m: &Member) -> String {
    format!(
        "{}\n{}\n{}",
        brief(t, m),
        item(&t.info_skills(), list(t, m.skills.iter().map(|s| s.name()))),
        item(&t.info_tools(), list(t, m.tools.iter().map(String::as_str)))
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
fn state_lines(t: &Texts, v: &Value) -> String {
    let mut lines = identity_lines(t, v);
    lines.extend(step_lines(t, v));
    lines.extend(working_memory_lines(t, v));
    lines.extend(persistent_memory_lines(t, v));
    if let Some(template) = v.get("template").and_then(Value::as_str) {
        lines.push(format!("- {}", t.info_from_template(template)));
    }
    lines.join("\n") + "\n"
}

/// Who the agent of a published state is, what it can do, its model and its spending.
fn identity_lines(t: &Texts, v: &Value) -> Vec<String> {
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
            .unwrap_or_else(|| t.info_none())
    };
    let mut lines = vec![
        item(&t.info_name(), one_line(&s_of(v, "name"))),
        item(&t.info_role(), one_line(&s_of(v, "role"))),
        bullet(&t.info_profile(), &s_of(v, "profile"), 5, &t.info_none()),
        item(&t.info_working_state(), s_of(v, "working_state")),
        item(&t.info_skills(), names("skills")),
        item(&t.info_tools(), names("tools")),
    ];
    if let Some(llm) = v.get("llm_config").filter(|l| l.is_object()) {
        let model = format!("{} {}", s_of(llm, "provider"), s_of(llm, "model"));
        lines.push(item(&t.info_llm(), model));
    }
    if let Some(u) = v.get("token_usage") {
        let spent = t.info_tokens_spent(
            u["prompt_tokens"].as_u64().unwrap_or(0),
            u["completion_tokens"].as_u64().unwrap_or(0),
        );
        lines.push(format!("- {spent}"));
    }
    lines
}

/// The steps and waits a published state holds, and (from `steps`) which run and are next.
fn step_lines(t: &Texts, v: &Value) -> Vec<String> {
    let count = |list: Option<&Value>| list.and_then(Value::as_array).map_or(0, Vec::len);
    let todo = count(v.pointer("/agent_step/todo"));
    let all = count(v.pointer("/agent_step/step_list"));
    let waits = count(v.get("step_lock"));
    let mut lines = vec![
        format!("- {}", t.info_steps_held(all, todo)),
        item(&t.info_replies_waited(), waits),
    ];
    let steps: Vec<&Value> = v
        .get("steps")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .collect();
    if let Some(r) = steps.iter().find(|st| st["execution_state"] == "running") {
        lines.push(item(&t.info_running(), step_line(t, r)));
    }
    let queued: Vec<&&Value> = steps
        .iter()
        .filter(|st| st["execution_state"] == "init")
        .collect();
    if !queued.is_empty() {
        lines.push(format!("- {}", t.info_next_steps(queued.len())));
        for st in queued.iter().take(QUEUED_SHOWN) {
            lines.push(format!("  - {}", step_line(t, st)));
        }
    }
    lines
}

/// One published step state on a line: who runs it, its state and intention, and where.
fn step_line(t: &Texts, st: &Value) -> String {
    t.info_step(
        s_of(st, "executor"),
        s_of(st, "execution_state"),
        one_line(&s_of(st, "step_intention")),
        s_of(st, "task_id"),
        s_of(st, "stage_id"),
    )
}

/// A published state's working memory: for each task, its stages and how many steps each holds.
fn working_memory_lines(t: &Texts, v: &Value) -> Vec<String> {
    let mut lines = vec![format!("- {}", t.info_working_memory())];
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
                let stages = stages
                    .filter(|x| !x.is_empty())
                    .unwrap_or_else(|| t.info_no_stage_held());
                lines.push(format!("  - {}", t.info_memory_task(task, stages)));
            }
        }
        _ => lines.push(format!("  - {}", t.info_none())),
    }
    lines
}

/// A published state's persistent memory, one key a line (nothing when it is empty).
fn persistent_memory_lines(t: &Texts, v: &Value) -> Vec<String> {
    let Some(m) = v
        .get("persistent_memory")
        .and_then(Value::as_object)
        .filter(|m| !m.is_empty())
    else {
        return Vec::new();
    };
    let mut lines = vec![format!("- {}:", t.info_persistent_memory())];
    for (key, text) in m {
        lines.push(format!(
            "  - {key}: {}",
            one_line(text.as_str().unwrap_or_default())
        ));
    }
    lines
}

fn ids(t: &Texts, agents: &[AgentId]) -> String {
    list(t, agents.iter().map(|a| a.as_str()))
}

fn list<'a>(t: &Texts, items: impl Iterator<Item = &'a str>) -> String {
    let v: Vec<String> = items.map(|i| format!("`{i}`")).collect();
    if v.is_empty() {
        t.info_none()
    } else {
        v.join(", ")
    }
}

#[cfg(test)]
mod tests;
