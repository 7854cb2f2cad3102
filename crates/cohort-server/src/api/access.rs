//! Who sees what (`access:` of a human). An operator sees the whole team. A member sees the
//! tasks whose group includes them, those tasks' stages and steps, and the agents in those
//! groups, with no agent's memory or wait ids. Everyone is in the base task, where goals are
//! given: there a member sees only their own steps and the messages they sent or received.
//! Every read of states, REST and websocket alike, asks one `View`, so no route can forget
//! the rule.

use cohort_core::config::Access;
use cohort_core::event::{AgentChange, Change, StageChange, States, StepChange, TaskChange};
use cohort_core::ids::{AgentId, StageId, StepId, TaskId};
use cohort_runtime::monitor::StateKind;
use serde_json::{Map, Value};
use std::collections::BTreeSet;

/// What one person may see, taken from the states at one moment (a task's group can grow, so
/// a long-lived reader takes it again).
#[derive(Clone, Debug, PartialEq)]
pub enum View {
    All,
    Member {
        me: AgentId,
        base: Option<TaskId>,
        tasks: BTreeSet<TaskId>,
        agents: BTreeSet<AgentId>,
    },
}

impl View {
    /// `base` is the team's base task, where everyone is (seen in part by members).
    pub fn of(human: &AgentId, access: Access, base: Option<&TaskId>, s: &States) -> View {
        if access == Access::Operator {
            return View::All;
        }
        let mut tasks = BTreeSet::new();
        let mut agents = BTreeSet::from([human.clone()]);
        for t in s.tasks.values().filter(|t| t.task_group.contains(human)) {
            tasks.insert(t.task_id.clone());
            agents.extend(t.task_group.iter().cloned());
        }
        View::Member {
            me: human.clone(),
            base: base.cloned(),
            tasks,
            agents,
        }
    }

    /// For a member, whether `task` is the base task (seen only in part).
    fn is_base(&self, task: &TaskId) -> bool {
        matches!(self, View::Member { base: Some(b), .. } if b == task)
    }

    fn is_me(&self, agent: &AgentId) -> bool {
        matches!(self, View::Member { me, .. } if me == agent)
    }

    /// A message in a task's conversation: in the base task, only one the member sent or got.
    fn sees_message(&self, task: &TaskId, m: &cohort_core::message::Message) -> bool {
        self.sees_task(task)
            && (!self.is_base(task)
                || self.is_me(&m.sender_id)
                || m.receiver.iter().any(|r| self.is_me(r)))
    }

    pub fn sees_task(&self, task: &TaskId) -> bool {
        match self {
            View::All => true,
            View::Member { tasks, .. } => tasks.contains(task),
        }
    }

    pub fn sees_agent(&self, agent: &AgentId) -> bool {
        match self {
            View::All => true,
            View::Member { agents, .. } => agents.contains(agent),
        }
    }

    fn sees_stage(&self, s: &States, stage: &StageId) -> bool {
        matches!(self, View::All)
            || s.stages
                .get(stage)
                .is_some_and(|st| self.sees_task(&st.task_id))
    }

    pub fn sees_step(&self, s: &States, step: &StepId) -> bool {
        matches!(self, View::All) || s.step(step).is_some_and(|st| self.sees_step_state(st))
    }

    pub fn sees_step_state(&self, st: &cohort_core::state::StepState) -> bool {
        self.sees_task(&st.task_id) && (!self.is_base(&st.task_id) || self.is_me(&st.agent_id))
    }

    /// Whether the state `kind`/`id` is visible.
    pub fn sees(&self, s: &States, kind: StateKind, id: &str) -> bool {
        match kind {
            StateKind::Task => self.sees_task(&TaskId::from(id)),
            StateKind::Stage => self.sees_stage(s, &StageId::from(id)),
            StateKind::Agent => self.sees_agent(&AgentId::from(id)),
            StateKind::Step => self.sees_step(s, &StepId::from(id)),
        }
    }

    /// Whether a change may reach this person's feed (`s`: the states it was applied to).
    /// A person's private changes are filtered apart from this (only their owner gets them).
    pub fn sees_change(&self, s: &States, c: &Change) -> bool {
        if matches!(self, View::All) {
            return true;
        }
        match c {
            Change::Task(t) => match t {
                TaskChange::Created { task } => self.sees_task(&task.task_id),
                TaskChange::Conversation { task_id, entry, .. } => {
                    self.sees_message(task_id, &entry.message)
                }
                // In the base task a member holds only some entries: trimming by count, or
                // the team's shared notes, are not theirs.
                TaskChange::SharedInfo { task_id, .. } | TaskChange::Trimmed { task_id, .. } => {
                    self.sees_task(task_id) && !self.is_base(task_id)
                }
                _ => c.task_id().is_some_and(|t| self.sees_task(t)),
            },
            Change::Stage(st) => match st {
                StageChange::Added { stage, .. } => self.sees_task(&stage.task_id),
                StageChange::State { stage_id, .. }
                | StageChange::Agent { stage_id, .. }
                | StageChange::Completion { stage_id, .. } => self.sees_stage(s, stage_id),
            },
            Change::Agent(a) => match a {
                // Wait ids and agents' memory are shown to no other person; a whole agent
                // reaches a member in a snapshot, once it joins one of their tasks.
                AgentChange::WaitsHeld { .. }
                | AgentChange::WaitsReleased { .. }
                | AgentChange::MemoryAdded { .. }
                | AgentChange::MemoryDeleted { .. }
                | AgentChange::Added { .. } => false,
                AgentChange::WorkNoted {
                    agent_id, task_id, ..
                }
                | AgentChange::WorkCleared {
                    agent_id, task_id, ..
                }
                | AgentChange::GoalOpened {
                    agent_id, task_id, ..
                }
                | AgentChange::GoalClosed {
                    agent_id, task_id, ..
                } => self.sees_task(task_id) && (!self.is_base(task_id) || self.is_me(agent_id)),
                AgentChange::HistorySummarized { agent_id, summary } => {
                    self.sees_task(&summary.task_id)
                        && (!self.is_base(&summary.task_id) || self.is_me(agent_id))
                }
                // An agent's pause of one task names that task.
                AgentChange::Paused {
                    agent_id,
                    task_id: Some(task_id),
                    ..
                } => self.sees_agent(agent_id) && self.sees_task(task_id),
                _ => c.agent_id().is_some_and(|a| self.sees_agent(a)),
            },
            Change::Step(st) => match st {
                StepChange::Added { step, .. } => self.sees_step_state(step),
                StepChange::Started { step_id, .. } | StepChange::Updated { step_id, .. } => {
                    self.sees_step(s, step_id)
                }
                // Only ids leave with these; the agent's own list is what they change.
                StepChange::Removed { agent_id, .. } | StepChange::CutLoose { agent_id, .. } => {
                    self.sees_agent(agent_id)
                }
            },
        }
    }

    /// One state as this person may read it: an agent shows a member only its steps, working
    /// memory and goals in the member's tasks, and no wait ids. `None` if it is not visible.
    pub fn json(&self, s: &States, kind: StateKind, id: &str) -> Option<Value> {
        if !self.sees(s, kind, id) {
            return None;
        }
        let mut v = s.json(kind, id)?;
        if *self != View::All {
            match kind {
                StateKind::Agent => self.redact_agent(s, &mut v),
                StateKind::Task if self.is_base(&TaskId::from(id)) => self.redact_base(&mut v),
                _ => {}
            }
        }
        Some(v)
    }

    fn redact_agent(&self, s: &States, agent: &mut Value) {
        if let Some(steps) = agent.get_mut("agent_step") {
            for list in ["step_list", "todo"] {
                if let Some(Value::Array(ids)) = steps.get_mut(list) {
                    ids.retain(|id| {
                        id.as_str()
                            .is_some_and(|id| self.sees_step(s, &StepId::from(id)))
                    });
                }
            }
        }
        let mine = agent["agent_id"]
            .as_str()
            .is_some_and(|a| self.is_me(&AgentId::from(a)));
        if let Some(Value::Object(memory)) = agent.get_mut("working_memory") {
            memory.retain(|task, _| {
                let task = TaskId::from(task.as_str());
                self.sees_task(&task) && (mine || !self.is_base(&task))
            });
        }
        if let Some(lock) = agent.get_mut("step_lock") {
            *lock = Value::Array(Vec::new());
        }
        if let Some(Value::Array(summaries)) = agent.get_mut("history_summaries") {
            summaries.retain(|s| {
                let task = TaskId::from(s["task_id"].as_str().unwrap_or_default());
                self.sees_task(&task) && (mine || !self.is_base(&task))
            });
        }
        if let Some(Value::Array(paused)) = agent.get_mut("paused_tasks") {
            paused.retain(|t| t.as_str().is_some_and(|t| self.sees_task(&TaskId::from(t))));
        }
        if !mine && let Some(memory) = agent.get_mut("persistent_memory") {
            *memory = Value::Object(Map::new());
        }
    }

    /// One state as a list shows it to this person: a task without its pools (counted, as
    /// far as they may see them), anything else as [`View::json`] gives it.
    pub fn listed(&self, s: &States, kind: StateKind, id: &str) -> Option<Value> {
        if kind != StateKind::Task {
            return self.json(s, kind, id);
        }
        let task = TaskId::from(id);
        if !self.sees_task(&task) {
            return None;
        }
        let counts = match self {
            View::Member { me, .. } if self.is_base(&task) => {
                let pool = &s.tasks.get(&task)?.shared_conversation_pool;
                let mine = pool
                    .iter()
                    .filter(|e| e.message.sender_id == *me || e.message.receiver.contains(me))
                    .count();
                Some((0, mine))
            }
            _ => None,
        };
        s.task_summary_json(&task, counts)
    }

    /// The base task as a member sees it: only the messages they sent or got, no shared notes.
    fn redact_base(&self, task: &mut Value) {
        let View::Member { me, .. } = self else {
            return;
        };
        let involves_me = |m: &Value| {
            m["sender_id"] == me.as_str()
                || m["receiver"]
                    .as_array()
                    .is_some_and(|r| r.iter().any(|r| r == me.as_str()))
        };
        if let Some(Value::Array(entries)) = task.get_mut("shared_conversation_pool") {
            entries.retain(|e| involves_me(&e["message"]));
        }
        if let Some(Value::Array(notes)) = task.get_mut("shared_info_pool") {
            notes.clear();
        }
    }

    /// `{"task": {…}, "stage": {…}, "agent": {…}, "step": {…}}` of what is visible.
    pub fn all_json(&self, s: &States) -> Value {
        if matches!(self, View::All) {
            return s.all_json();
        }
        let mut out = Map::new();
        for k in StateKind::ALL {
            let of_kind: Map<String, Value> = s
                .ids(k, None)
                .into_iter()
                .filter_map(|id| self.json(s, k, &id).map(|v| (id, v)))
                .collect();
            out.insert(k.name().to_owned(), Value::Object(of_kind));
        }
        Value::Object(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cohort_core::ids::StageRef;
    use cohort_core::state::{AgentState, Executor, Skill, StageState, StepState, TaskState};

    /// The base task (group: manager, alice, bob) with the manager's step and alice's goal;
    /// task `mine` (group: bob, writer) and task `theirs` (group: alice, reviewer), each with
    /// a stage and a step.
    fn team() -> States {
        let mut s = States::default();
        let mut base = TaskState::new(
            "base".into(),
            "base".into(),
            String::new(),
            "manager".into(),
        );
        base.task_group.extend(["alice".into(), "bob".into()]);
        s.apply(&Change::Task(TaskChange::Created {
            task: Box::new(base),
        }));
        let goal = cohort_core::message::Message::notice(
            "base".into(),
            "alice".into(),
            vec!["manager".into()],
            StageRef::NoRelative,
            "alice's secret goal".into(),
        );
        s.apply(&Change::Task(TaskChange::Conversation {
            task_id: "base".into(),
            entry: cohort_core::state::ConversationEntry {
                timestamp: String::new(),
                message: std::sync::Arc::new(goal),
            },
            message_no: 1,
        }));
        let m = AgentState::new("manager".into(), "M".into(), "m".into(), "p".into());
        s.apply(&Change::Agent(cohort_core::event::AgentChange::Added {
            agent: Box::new(m),
        }));
        let mut step = StepState::new(
            "base".into(),
            StageRef::NoRelative,
            "manager".into(),
            Executor::Skill(Skill::Decision),
            "act on alice's secret goal",
            "",
        );
        step.step_id = "base-step".into();
        s.apply(&Change::Step(StepChange::Added {
            agent_id: "manager".into(),
            step: Box::new(step),
            list_at: 0,
            todo_at: Some(0),
            remember: false,
        }));
        for (task, who, agent) in [("mine", "bob", "writer"), ("theirs", "alice", "reviewer")] {
            let mut t = TaskState::new(task.into(), task.into(), String::new(), "manager".into());
            t.task_group.extend([who.into(), agent.into()]);
            s.apply(&Change::Task(TaskChange::Created { task: Box::new(t) }));
            let mut stage = StageState::new(task.into(), String::new(), Default::default());
            stage.stage_id = format!("{task}-s").into();
            s.apply(&Change::Stage(StageChange::Added { stage, list_at: 0 }));
            let a = AgentState::new(agent.into(), agent.into(), "r".into(), "p".into());
            s.apply(&Change::Agent(cohort_core::event::AgentChange::Added {
                agent: Box::new(a),
            }));
            let mut step = StepState::new(
                task.into(),
                StageRef::NoRelative,
                agent.into(),
                Executor::Skill(Skill::Think),
                "x",
                "",
            );
            step.step_id = format!("{task}-step").into();
            s.apply(&Change::Step(StepChange::Added {
                agent_id: agent.into(),
                step: Box::new(step),
                list_at: 0,
                todo_at: Some(0),
                remember: false,
            }));
        }
        s
    }

    #[test]
    fn a_member_sees_only_their_tasks_and_what_belongs_to_them() {
        let s = team();
        let bob = View::of(&"bob".into(), Access::Member, Some(&"base".into()), &s);
        assert!(bob.sees(&s, StateKind::Task, "mine"));
        assert!(!bob.sees(&s, StateKind::Task, "theirs"));
        assert!(bob.sees(&s, StateKind::Stage, "mine-s"));
        assert!(!bob.sees(&s, StateKind::Stage, "theirs-s"));
        assert!(bob.sees(&s, StateKind::Step, "mine-step"));
        assert!(!bob.sees(&s, StateKind::Step, "theirs-step"));
        assert!(bob.sees(&s, StateKind::Agent, "writer"));
        assert!(bob.sees(&s, StateKind::Agent, "bob"));
        assert!(!bob.sees(&s, StateKind::Agent, "reviewer"));
        let json = bob.all_json(&s);
        assert_eq!(
            json["task"].as_object().unwrap().len(),
            2,
            "the base task and his"
        );
        assert_eq!(json["step"].as_object().unwrap().len(), 1);
        let op = View::of(&"bob".into(), Access::Operator, Some(&"base".into()), &s);
        assert_eq!(op.all_json(&s), s.all_json());
    }

    #[test]
    fn in_the_base_task_a_member_sees_only_their_own_messages_and_steps() {
        let s = team();
        let bob = View::of(&"bob".into(), Access::Member, Some(&"base".into()), &s);
        assert!(bob.sees(&s, StateKind::Task, "base"));
        assert!(
            !bob.sees(&s, StateKind::Step, "base-step"),
            "the manager's step on alice's goal"
        );
        let json = bob.all_json(&s).to_string();
        assert!(!json.contains("secret goal"), "{json}");
        assert!(
            !json.contains("base-step"),
            "not even in the manager's step list"
        );
        let alice = View::of(&"alice".into(), Access::Member, Some(&"base".into()), &s);
        let task = alice.json(&s, StateKind::Task, "base").unwrap();
        assert_eq!(
            task["shared_conversation_pool"].as_array().unwrap().len(),
            1,
            "her own goal"
        );
    }

    #[test]
    fn a_members_feed_gets_only_changes_of_what_they_see() {
        let s = team();
        let bob = View::of(&"bob".into(), Access::Member, Some(&"base".into()), &s);
        let started = |id: &str, agent: &str| {
            Change::Step(StepChange::Started {
                agent_id: agent.into(),
                step_id: id.into(),
            })
        };
        assert!(bob.sees_change(&s, &started("mine-step", "writer")));
        assert!(!bob.sees_change(&s, &started("theirs-step", "reviewer")));
        let state = |stage: &str| {
            Change::Stage(StageChange::State {
                stage_id: stage.into(),
                execution_state: cohort_core::state::ExecutionState::Running,
            })
        };
        assert!(bob.sees_change(&s, &state("mine-s")));
        assert!(!bob.sees_change(&s, &state("theirs-s")));
        let tokens = |task: &str| {
            Change::Task(TaskChange::Tokens {
                task_id: task.into(),
                usage: Default::default(),
            })
        };
        assert!(bob.sees_change(&s, &tokens("mine")));
        assert!(!bob.sees_change(&s, &tokens("theirs")));
    }
}
