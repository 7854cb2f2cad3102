//! AgentState: who an agent is, what it may use, its working and persistent memory, its steps
//! and its step lock. LLM agents and human agents are the same type; they differ by data.

use super::{AgentStep, Skill, StepLock, TokenUsage, WorkingState};
use crate::ids::{AgentId, StageId, StageRef, StepId, TaskId, WaitId};
use chrono::NaiveDateTime;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// `{task_id: {stage_id: [step_id]}}`: the unfinished work an agent holds.
pub type WorkingMemory = BTreeMap<TaskId, BTreeMap<StageRef, Vec<StepId>>>;

/// The LLM settings an agent shows (never the API key itself).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LlmSettings {
    /// The provider that serves the model (`openai`, `scripted`, …).
    pub provider: String,
    /// The model's name at that provider.
    pub model: String,
    /// The endpoint, when the provider's default is not used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
}

impl LlmSettings {
    /// `provider/model`, as metrics name the model.
    pub fn label(&self) -> String {
        format!("{}/{}", self.provider, self.model)
    }
}

/// Settings of a human agent (its password is never part of its state).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HumanConfig {
    /// The person's name as the console shows it.
    pub display_name: String,
}

/// One message in a human agent's private conversation with another agent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PrivateMessage {
    /// The task the message belongs to.
    pub task_id: TaskId,
    /// Who sent it (the human or the other agent).
    pub sender_id: AgentId,
    /// The message text.
    pub content: String,
    /// The stage it belongs to, or `no_relative`.
    pub stage_relative: StageRef,
    /// When, as `%Y-%m-%d %H:%M:%S` local time.
    pub timestamp: String,
    /// Whether the sender asks for a reply.
    pub need_reply: bool,
    /// Whether the sender waits for the reply (holds a wait id for it).
    pub waiting: bool,
    /// The wait id this message answers, if it is a reply to a waiting message.
    pub return_waiting_id: Option<WaitId>,
    /// For a message the human must answer: whether the human has answered it.
    #[serde(default)]
    pub replied: bool,
    /// The question it asks, when it is a structured one (text, choice or form).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ask: Option<crate::state::Ask>,
    /// For a message whose sender waits for the person's reply: when the sender stops waiting
    /// (milliseconds since the Unix epoch), as the console shows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_by_ms: Option<i64>,
    /// The files that went with it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<crate::attachment::Attachment>,
}

/// A human agent's private conversations and global notices.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ConversationPool {
    /// The private conversations, by the other agent, oldest message first.
    pub conversation_privates: BTreeMap<AgentId, Vec<PrivateMessage>>,
    /// Notices for the person (e.g. "agent X waits for your reply"), newest last.
    pub global_messages: Vec<String>,
    /// Notices dropped from the front of `global_messages` (only the newest are kept), so a
    /// reader can number every notice ever received (the console's "new" count).
    #[serde(default)]
    pub global_messages_omitted: u64,
}

/// Serialised, this is the SPEC's wire form: steps and waits by id, no private pool, no
/// bookkeeping. Read back, those parts come out empty (what a new agent has); the store keeps
/// the whole of an agent as an `event::AgentRecord`. What the team file sets for it is no part
/// of it: that is its [`AgentSettings`](super::AgentSettings), given anew to whoever runs it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentState {
    /// The agent's id, unique in the team.
    pub agent_id: AgentId,
    /// Its display name.
    pub name: String,
    /// Its role in the team, as teammates and prompts see it.
    pub role: String,
    /// What it is and can do, in prose, for its prompts and for managers choosing agents.
    pub profile: String,
    /// Idle, working or waiting, derived from its queue and step lock.
    pub working_state: WorkingState,
    /// Its model's settings (LLM agents only).
    pub llm_config: Option<LlmSettings>,
    /// Its person's settings (human agents only).
    pub human_config: Option<HumanConfig>,
    /// The unfinished work it holds, by task and stage.
    pub working_memory: WorkingMemory,
    /// `{"%Y%m%dT%H%M%S": markdown}`, written only through [`AgentState::apply_memory_ops`].
    pub persistent_memory: BTreeMap<String, String>,
    /// Its steps in execution order and the ones still to run.
    #[serde(skip_deserializing)]
    pub agent_step: AgentStep,
    /// The waits it holds for replies; it starts no step while one is held.
    #[serde(skip_deserializing)]
    pub step_lock: StepLock,
    /// The skills it may run.
    pub skills: Vec<Skill>,
    /// The MCP servers it may call, by name.
    pub tools: Vec<String>,
    /// The team's named models a message may choose for it (`models:` in the team file).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<String>,
    /// The agent template this agent was created from by a manager (agent_manager), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    /// A human's private chats and notices. Never published with the rest of the state (every
    /// observer sees agent states); only its owner reads it, via `/api/human/{id}/conversations`.
    #[serde(skip)]
    pub conversation_pool: Option<ConversationPool>,
    /// Tokens its steps spent, summed.
    pub token_usage: TokenUsage,
    /// Paused by an operator: it finishes the step it runs, keeps taking messages and queuing
    /// steps, and starts none until resumed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    /// Tasks an operator paused: their steps stay queued and none starts until resumed.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub paused_tasks: BTreeSet<TaskId>,
    /// Summaries of older history its prompts leave out, one per open task and stage (see
    /// `step::history_summary`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history_summaries: Vec<crate::state::HistorySummary>,
    /// Stages this agent was started in and owes a summary for (internal bookkeeping: an
    /// agent whose plan runs dry in such a stage is given a closing reflection).
    #[serde(skip)]
    pub open_goals: BTreeSet<(TaskId, StageId)>,
    /// Changes made and not yet published (see `agent_changes.rs`).
    #[serde(skip)]
    pub outbox: Vec<crate::event::Change>,
}

/// One persistent-memory instruction from an LLM answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemoryOp {
    /// Store this text under a new timestamp key.
    Add(String),
    /// Remove the entry under this key.
    Delete(String),
}

/// The key format of persistent memory.
pub fn memory_key(t: NaiveDateTime) -> String {
    t.format("%Y%m%dT%H%M%S").to_string()
}

impl AgentState {
    /// A new idle agent with no model, person, skills, tools, memory or steps yet.
    pub fn new(agent_id: AgentId, name: String, role: String, profile: String) -> Self {
        AgentState {
            agent_id,
            name,
            role,
            profile,
            working_state: WorkingState::Idle,
            llm_config: None,
            human_config: None,
            working_memory: WorkingMemory::new(),
            persistent_memory: BTreeMap::new(),
            agent_step: AgentStep::default(),
            step_lock: StepLock::default(),
            skills: Vec::new(),
            tools: Vec::new(),
            models: Vec::new(),
            template: None,
            conversation_pool: None,
            token_usage: TokenUsage::default(),
            paused: false,
            paused_tasks: BTreeSet::new(),
            history_summaries: Vec::new(),
            open_goals: BTreeSet::new(),
            outbox: Vec::new(),
        }
    }

    /// Whether a step's task and stage are still held in working memory: false once the stage
    /// or task was finished while the step ran. Callers ask it for a step they run or settle,
    /// so it is also false while a step of this work that was cut loose by that finish still
    /// runs: a late message or `update_working_memory` may have re-opened the stage's entry
    /// meanwhile, and that must not adopt the old step (it would act on closed work and stay
    /// in the step list without a working-memory record).
    pub fn holds(&self, task: &TaskId, stage: &StageRef) -> bool {
        self.working_memory
            .get(task)
            .is_some_and(|t| t.contains_key(stage))
            && !self.agent_step.cut_loose_in(task, stage)
    }

    /// idle / working / waiting, derived from the queue and the lock.
    pub fn derive_working_state(&self) -> WorkingState {
        use super::StepExecutionState::Running;
        let current = self
            .agent_step
            .steps()
            .iter()
            .map(|s| s.execution_state)
            .find(|s| *s == Running || s.waits_for_a_person());
        if current.is_some_and(|s| s.waits_for_a_person()) {
            WorkingState::Waiting
        } else if current.is_some() {
            WorkingState::Working
        } else if !self.step_lock.is_empty() {
            WorkingState::Waiting
        } else if self.agent_step.todo_len() > 0 {
            WorkingState::Working
        } else {
            WorkingState::Idle
        }
    }
}

pub fn demote_headings(text: &str) -> String {
    text.lines()
        .map(|l| {
            let hashes = l.chars().take_while(|c| *c == '#').count();
            if (1..3).contains(&hashes) && l[hashes..].starts_with(' ') {
                format!("###{}", &l[hashes..])
            } else {
                l.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::StepUpdate;
    use crate::ids::StageId;
    use crate::state::Agent;
    use crate::state::{Executor, StepExecutionState, StepState};
    use chrono::NaiveDate;

    fn finished() -> StepUpdate {
        StepUpdate {
            execution_state: Some(StepExecutionState::Finished),
            ..Default::default()
        }
    }

    fn at(h: u32, m: u32, s: u32) -> NaiveDateTime {
        NaiveDate::from_ymd_opt(2025, 6, 13)
            .unwrap()
            .and_hms_opt(h, m, s)
            .unwrap()
    }

    fn agent() -> Agent {
        Agent::from(AgentState::new(
            "a".into(),
            "A".into(),
            "r".into(),
            "p".into(),
        ))
    }

    fn step(task: &str, stage: StageRef) -> StepState {
        StepState::new(
            task.into(),
            stage,
            "a".into(),
            Executor::Skill(Skill::Think),
            "i",
            "",
        )
    }

    #[test]
    fn memory_add_uses_timestamp_keys_and_delete_removes() {
        let mut a = agent();
        a.apply_memory_ops(
            &[MemoryOp::Add("one".into()), MemoryOp::Add("two".into())],
            at(10, 30, 22),
        );
        assert_eq!(a.persistent_memory.get("20250613T103022").unwrap(), "one");
        assert_eq!(a.persistent_memory.get("20250613T103023").unwrap(), "two");
        a.apply_memory_ops(&[MemoryOp::Delete("20250613T103022".into())], at(11, 0, 0));
        assert_eq!(a.persistent_memory.len(), 1);
        a.apply_memory_ops(&[MemoryOp::Delete("nope".into())], at(11, 0, 0));
        assert_eq!(a.persistent_memory.len(), 1);
    }

    #[test]
    fn memory_text_keeps_only_level_three_headings_and_below() {
        let mut a = agent();
        a.apply_memory_ops(
            &[MemoryOp::Add(
                "# Top\n## Sub\n### ok\n#### deep\n#tag".into(),
            )],
            at(1, 0, 0),
        );
        let v = a.persistent_memory.values().next().unwrap();
        assert_eq!(v, "### Top\n### Sub\n### ok\n#### deep\n#tag");
    }

    #[test]
    fn steps_are_recorded_in_working_memory_and_cleaned_by_stage_and_task() {
        let mut a = agent();
        let s1 = StageRef::Stage(StageId::from("s1"));
        let s2 = StageRef::Stage(StageId::from("s2"));
        a.add_steps(vec![step("t", s1.clone()), step("t", s2.clone())]);
        a.add_next_steps(vec![step("t", StageRef::NoRelative)]);
        assert_eq!(a.working_memory[&TaskId::from("t")].len(), 3);
        let dropped = a.finish_stage(&"t".into(), &s1, "done");
        assert_eq!(dropped.len(), 1);
        assert!(!a.holds(&"t".into(), &s1));
        assert!(a.holds(&"t".into(), &s2));
        let dropped = a.finish_task(&"t".into(), "done");
        assert_eq!(dropped.len(), 2);
        assert!(a.working_memory.is_empty());
        assert_eq!(a.agent_step.steps().len(), 0);
    }

    #[test]
    fn update_working_memory_with_a_stage_keeps_the_step_ids_already_there() {
        let mut a = agent();
        let s1 = StageRef::Stage(StageId::from("s1"));
        let st = step("t", s1.clone());
        let id = st.step_id.clone();
        a.add_steps(vec![st]);
        a.note_working_memory("t".into(), Some(s1.clone()));
        assert_eq!(a.working_memory[&TaskId::from("t")][&s1], [id]);
        // A stage not seen yet gets an empty entry, and is held from then on.
        let s2 = StageRef::Stage(StageId::from("s2"));
        a.note_working_memory("t".into(), Some(s2.clone()));
        assert!(a.working_memory[&TaskId::from("t")][&s2].is_empty());
        assert!(a.holds(&"t".into(), &s2));
        assert_eq!(a.working_memory[&TaskId::from("t")].len(), 2);
    }

    #[test]
    fn update_working_memory_without_a_stage_keeps_the_tasks_stages() {
        let mut a = agent();
        let s1 = StageRef::Stage(StageId::from("s1"));
        a.add_steps(vec![step("t", s1.clone()), step("t", StageRef::NoRelative)]);
        let before = a.working_memory.clone();
        // The seed's Python assigned the stage id over the task's entry; it must not wipe it.
        a.note_working_memory("t".into(), None);
        assert_eq!(a.working_memory, before);
        a.note_working_memory("u".into(), None);
        assert!(a.working_memory[&TaskId::from("u")].is_empty());
        assert!(!a.holds(&"u".into(), &StageRef::NoRelative));
        assert_eq!(
            a.working_memory[&TaskId::from("t")],
            before[&TaskId::from("t")]
        );
    }

    #[test]
    fn a_step_running_when_its_stage_finished_stays_cut_loose_when_the_stage_reopens() {
        let mut a = agent();
        let s = StageRef::Stage(StageId::from("s"));
        a.add_steps(vec![step("t", s.clone()), step("t", s.clone())]);
        let running = a.start_next().unwrap().step_id.clone();
        assert_eq!(
            a.finish_stage(&"t".into(), &s, "done").len(),
            1,
            "the pending one is dropped"
        );
        assert!(!a.holds(&"t".into(), &s));
        // A late message re-opens the stage while the old step still runs.
        a.add_steps(vec![step("t", s.clone())]);
        assert!(
            !a.holds(&"t".into(), &s),
            "the old step must not act on the re-opened stage"
        );
        // Settling as the agent actor does: finished, then removed as no longer held.
        a.update_step(&running, finished());
        assert!(!a.holds(&"t".into(), &s));
        a.remove_step(&running);
        assert!(a.holds(&"t".into(), &s), "the new step's work is held");
        let ids: Vec<_> = a.agent_step.steps().iter().map(|s| &s.step_id).collect();
        assert_eq!(ids.len(), 1);
        assert_eq!(a.working_memory[&TaskId::from("t")][&s], [ids[0].clone()]);
    }

    #[test]
    fn loose_history_is_trimmed_to_the_newest_steps_that_are_over() {
        let mut a = agent();
        let s1 = StageRef::Stage(StageId::from("s1"));
        a.add_steps((0..5).map(|_| step("base", StageRef::NoRelative)).collect());
        a.add_steps(vec![step("base", s1.clone())]);
        let ids: Vec<StepId> = a
            .agent_step
            .steps()
            .iter()
            .map(|s| s.step_id.clone())
            .collect();
        // Three over (one failed), one running, one still to run.
        for _ in 0..4 {
            a.start_next();
        }
        for (i, id) in ids[..3].iter().enumerate() {
            let state = if i == 1 {
                StepExecutionState::Failed
            } else {
                StepExecutionState::Finished
            };
            a.update_step(
                id,
                StepUpdate {
                    execution_state: Some(state),
                    ..Default::default()
                },
            );
        }
        assert_eq!(a.trim_loose_history(&"base".into(), 5), 0);
        assert_eq!(a.trim_loose_history(&"base".into(), 1), 2);
        let left: Vec<&StepId> = a.agent_step.steps().iter().map(|s| &s.step_id).collect();
        assert_eq!(
            left,
            [&ids[2], &ids[3], &ids[4], &ids[5]],
            "the newest over, the running, the pending, the stage's"
        );
        assert_eq!(
            a.working_memory[&TaskId::from("base")][&StageRef::NoRelative],
            ids[2..5]
        );
        assert_eq!(
            a.working_memory[&TaskId::from("base")][&s1],
            [ids[5].clone()]
        );
    }

    #[test]
    fn step_lock_blocks_until_every_wait_id_is_returned() {
        let mut a = agent();
        a.add_steps(vec![step("t", StageRef::NoRelative)]);
        a.hold_waits(
            vec![("w1".into(), "x".into()), ("w2".into(), "y".into())],
            &"t".into(),
            &StageRef::NoRelative,
            0,
            None,
        );
        assert_eq!(a.derive_working_state(), WorkingState::Waiting);
        assert!(!a.release_wait(&"w1".into(), &"y".into()), "not y's wait");
        assert!(a.release_wait(&"w1".into(), &"x".into()));
        assert!(!a.release_wait(&"w1".into(), &"x".into()));
        assert_eq!(a.derive_working_state(), WorkingState::Waiting);
        assert!(a.release_wait(&"w2".into(), &"y".into()));
        assert_eq!(a.derive_working_state(), WorkingState::Working);
        a.start_next();
        assert_eq!(
            a.agent_step.running().unwrap().execution_state,
            StepExecutionState::Running
        );
    }
}
