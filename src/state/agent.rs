//! AgentState: who an agent is, what it may use, its working and persistent memory, its steps
//! and its step lock. LLM agents and human agents are the same type; they differ by data.

use super::{AgentStep, Skill, StepLock, StepState, TokenUsage, WorkingState};
use crate::ids::{AgentId, StageId, StageRef, StepId, TaskId, WaitId};
use chrono::NaiveDateTime;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// `{task_id: {stage_id: [step_id]}}`: the unfinished work an agent holds.
pub type WorkingMemory = BTreeMap<TaskId, BTreeMap<StageRef, Vec<StepId>>>;

/// The LLM settings an agent shows (never the API key itself).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LlmSettings {
    pub provider: String,
    pub model: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
}

/// Settings of a human agent (its password is never part of its state).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HumanConfig {
    pub display_name: String,
}

/// One message in a human agent's private conversation with another agent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PrivateMessage {
    pub task_id: TaskId,
    pub sender_id: AgentId,
    pub content: String,
    pub stage_relative: StageRef,
    pub timestamp: String,
    pub need_reply: bool,
    pub waiting: bool,
    pub return_waiting_id: Option<WaitId>,
    /// For a message the human must answer: whether the human has answered it.
    #[serde(default)]
    pub replied: bool,
}

/// A human agent's private conversations and global notices.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ConversationPool {
    pub conversation_privates: BTreeMap<AgentId, Vec<PrivateMessage>>,
    pub global_messages: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct AgentState {
    pub agent_id: AgentId,
    pub name: String,
    pub role: String,
    pub profile: String,
    pub working_state: WorkingState,
    pub llm_config: Option<LlmSettings>,
    pub human_config: Option<HumanConfig>,
    pub working_memory: WorkingMemory,
    /// `{"%Y%m%dT%H%M%S": markdown}`, written only through [`AgentState::apply_memory_ops`].
    pub persistent_memory: BTreeMap<String, String>,
    pub agent_step: AgentStep,
    pub step_lock: StepLock,
    pub skills: Vec<Skill>,
    pub tools: Vec<String>,
    /// The agent template this agent was created from by a manager (agent_manager), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    /// A human's private chats and notices. Never published with the rest of the state (every
    /// observer sees agent states); only its owner reads it, via `/api/human/{id}/conversations`.
    #[serde(skip_serializing)]
    pub conversation_pool: Option<ConversationPool>,
    pub token_usage: TokenUsage,
    /// Stages this agent was started in and owes a summary for (internal bookkeeping: an
    /// agent whose plan runs dry in such a stage is given a closing reflection).
    #[serde(skip)]
    pub open_goals: BTreeSet<(TaskId, StageId)>,
}

/// One persistent-memory instruction from an LLM answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemoryOp {
    Add(String),
    Delete(String),
}

/// The key format of persistent memory.
pub fn memory_key(t: NaiveDateTime) -> String {
    t.format("%Y%m%dT%H%M%S").to_string()
}

impl AgentState {
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
            template: None,
            conversation_pool: None,
            token_usage: TokenUsage::default(),
            open_goals: BTreeSet::new(),
        }
    }

    /// Appends steps and records them in working memory.
    pub fn add_steps(&mut self, steps: Vec<StepState>) {
        self.remember(&steps);
        self.agent_step.add_steps(steps);
    }

    /// Inserts steps before the next pending one and records them in working memory.
    pub fn add_next_steps(&mut self, steps: Vec<StepState>) {
        self.remember(&steps);
        self.agent_step.add_next_steps(steps);
    }

    fn remember(&mut self, steps: &[StepState]) {
        for s in steps {
            self.working_memory
                .entry(s.task_id.clone())
                .or_default()
                .entry(s.stage_id.clone())
                .or_default()
                .push(s.step_id.clone());
        }
    }

    /// `update_working_memory`: make sure the task (and stage) has an entry.
    pub fn note_working_memory(&mut self, task: TaskId, stage: Option<StageRef>) {
        let entry = self.working_memory.entry(task).or_default();
        if let Some(stage) = stage {
            entry.entry(stage).or_default();
        }
    }

    /// `finish_stage`: drops the stage's steps (returned, for publishing), its working memory
    /// and the waits taken in it.
    pub fn finish_stage(&mut self, task: &TaskId, stage: &StageRef) -> Vec<StepState> {
        if let Some(t) = self.working_memory.get_mut(task) {
            t.remove(stage);
        }
        if let Some(s) = stage.stage() {
            self.open_goals.remove(&(task.clone(), s.clone()));
        }
        self.step_lock.release_work(task, Some(stage));
        self.agent_step.drop_steps(task, Some(stage))
    }

    /// `finish_task`: drops every step, the working memory and the waits of the task.
    pub fn finish_task(&mut self, task: &TaskId) -> Vec<StepState> {
        self.working_memory.remove(task);
        self.open_goals.retain(|(t, _)| t != task);
        self.step_lock.release_work(task, None);
        self.agent_step.drop_steps(task, None)
    }

    /// Keeps at most `keep` finished or failed `no_relative` steps of a task in the step list
    /// and working memory, dropping the oldest. The base task never ends, so without this a
    /// long-lived manager's or person's list would only grow. The steps stay published (the
    /// monitor has each one), and prompts show only the newest few anyway.
    pub fn trim_loose_history(&mut self, task: &TaskId, keep: usize) -> usize {
        let gone = self.agent_step.trim_over(task, &StageRef::NoRelative, keep);
        if let Some(ids) = self
            .working_memory
            .get_mut(task)
            .and_then(|t| t.get_mut(&StageRef::NoRelative))
        {
            ids.retain(|id| !gone.contains(id));
        }
        gone.len()
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

    /// Frees one wait id; false when the id was not held (a late or duplicate reply).
    pub fn release_wait(&mut self, id: &WaitId) -> bool {
        self.step_lock.release(id)
    }

    /// Applies `<persistent_memory>` instructions. `add` stores under the timestamp key of `now`
    /// (moved forward a second at a time if that key is taken); `delete` removes a key.
    /// Headings above level 3 are demoted, as the SPEC allows only `###` and below.
    pub fn apply_memory_ops(&mut self, ops: &[MemoryOp], now: NaiveDateTime) {
        let mut t = now;
        for op in ops {
            match op {
                MemoryOp::Add(text) => {
                    while self.persistent_memory.contains_key(&memory_key(t)) {
                        t += chrono::Duration::seconds(1);
                    }
                    self.persistent_memory
                        .insert(memory_key(t), demote_headings(text));
                }
                MemoryOp::Delete(key) => {
                    self.persistent_memory.remove(key.trim());
                }
            }
        }
    }

    /// idle / working / waiting, derived from the queue and the lock.
    pub fn derive_working_state(&self) -> WorkingState {
        if self.agent_step.running().is_some() {
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

fn demote_headings(text: &str) -> String {
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
    use crate::ids::StageId;
    use crate::state::{Executor, StepExecutionState};
    use chrono::NaiveDate;

    fn at(h: u32, m: u32, s: u32) -> NaiveDateTime {
        NaiveDate::from_ymd_opt(2025, 6, 13)
            .unwrap()
            .and_hms_opt(h, m, s)
            .unwrap()
    }

    fn agent() -> AgentState {
        AgentState::new("a".into(), "A".into(), "r".into(), "p".into())
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
        let dropped = a.finish_stage(&"t".into(), &s1);
        assert_eq!(dropped.len(), 1);
        assert!(!a.holds(&"t".into(), &s1));
        assert!(a.holds(&"t".into(), &s2));
        let dropped = a.finish_task(&"t".into());
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
        let running = a.agent_step.start_next().unwrap().step_id.clone();
        assert_eq!(
            a.finish_stage(&"t".into(), &s).len(),
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
        a.agent_step.get_mut(&running).unwrap().execution_state = StepExecutionState::Finished;
        assert!(!a.holds(&"t".into(), &s));
        a.agent_step.remove(&running);
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
            a.agent_step.start_next();
        }
        for (i, id) in ids[..3].iter().enumerate() {
            a.agent_step.get_mut(id).unwrap().execution_state = if i == 1 {
                StepExecutionState::Failed
            } else {
                StepExecutionState::Finished
            };
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
        a.step_lock.hold(
            ["w1".into(), "w2".into()],
            &"t".into(),
            &StageRef::NoRelative,
        );
        assert_eq!(a.derive_working_state(), WorkingState::Waiting);
        assert!(a.release_wait(&"w1".into()));
        assert!(!a.release_wait(&"w1".into()));
        assert_eq!(a.derive_working_state(), WorkingState::Waiting);
        assert!(a.release_wait(&"w2".into()));
        assert_eq!(a.derive_working_state(), WorkingState::Working);
        a.agent_step.start_next();
        assert_eq!(
            a.agent_step.running().unwrap().execution_state,
            StepExecutionState::Running
        );
    }
}
