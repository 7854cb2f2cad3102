//! The task_manager instructions as SyncState carries them out: add_task, add_stage,
//! finish_stage, finish_task, retry_stage, and the stage hand-over they trigger.

use super::{Applied, Malformed, SyncCore, SyncError, notices};
use crate::event::{Change, StageChange, TaskChange};
use crate::ids::{AgentId, StageId, StageRef, TaskId};
use crate::message::{Colleague, Instruction, Message, StagePlan, TaskInstruction, TaskOutcome};
use crate::policy::Repair;
use crate::report::TaskWritten;
use crate::state::{ExecutionState, StageState, TaskState};

impl SyncCore {
    /// Ends a task as `state` with its summary (the words, and what the runtime wrote of it):
    /// its open stages fail (or are cancelled with it), its group is told to drop the task's
    /// work, and it is retired. Its record says `why`, or why the runtime or a person ended it
    /// (`TaskWritten::why`).
    pub(super) fn close_task(
        &mut self,
        task_id: &TaskId,
        state: ExecutionState,
        (summary, written): (String, Option<Box<TaskWritten>>),
        why: Option<String>,
        applied: &mut Applied,
    ) {
        let stage_state = match state {
            ExecutionState::Cancelled => ExecutionState::Cancelled,
            _ => ExecutionState::Failed,
        };
        for sid in self.tasks[task_id].stage_list.clone() {
            if !self.stages[&sid].execution_state.is_over() {
                self.set_stage_state(&sid, stage_state, applied);
            }
        }
        let why = why.or_else(|| written.as_deref().and_then(|w| w.why(&self.texts)));
        let outcome = self.task_end(task_id, state, why);
        let told = notices::task_ended(
            &self.tasks[task_id],
            state,
            (&summary, written.as_deref()),
            outcome.as_deref(),
            &self.roster,
            &self.texts,
        );
        applied.messages.extend(told);
        self.emit(
            applied,
            Change::Task(TaskChange::State {
                task_id: task_id.clone(),
                execution_state: state,
                task_summary: Some(summary),
                summary_written: written,
                outcome,
            }),
        );
        applied.messages.push(Message::instruction(
            task_id.clone(),
            AgentId::from(crate::message::TASK_STATE_SENDER),
            self.tasks[task_id].task_group.clone(),
            StageRef::NoRelative,
            &Instruction::FinishTask {
                task_id: task_id.clone(),
            },
            &self.texts,
        ));
        self.retire_task(task_id, applied);
    }

    pub(super) fn check_instruction(
        &self,
        agent: &AgentId,
        i: &TaskInstruction,
    ) -> Result<(), SyncError> {
        match i {
            TaskInstruction::AddTask { task_id, .. } => {
                if self.tasks.contains_key(task_id) {
                    return Err(SyncError::Invalid(Malformed::TaskExists(task_id.clone())));
                }
                Ok(())
            }
            TaskInstruction::AddStage { task_id, stages } => {
                self.managed_open_task(agent, task_id)?;
                stages.iter().try_for_each(|s| self.check_plan(s))
            }
            TaskInstruction::FinishStage { task_id, stage_id } => {
                self.managed_open_task(agent, task_id)?;
                let s = self.stage_of(task_id, stage_id)?;
                if s.execution_state != ExecutionState::Running {
                    return Err(SyncError::StageNotRunning {
                        stage: stage_id.clone(),
                        state: s.execution_state,
                    });
                }
                Ok(())
            }
            TaskInstruction::FinishTask { task_id, .. } => {
                self.managed_open_task(agent, task_id).map(|_| ())
            }
            TaskInstruction::RetryStage {
                task_id,
                stage_id,
                agent_allocation,
                stage_intention,
            } => {
                self.managed_open_task(agent, task_id)?;
                let old = self.stage_of(task_id, stage_id)?;
                // Only the running stage can be retried: retrying a finished or already
                // retried stage would queue work out of order.
                if old.execution_state != ExecutionState::Running {
                    return Err(SyncError::StageNotRunning {
                        stage: stage_id.clone(),
                        state: old.execution_state,
                    });
                }
                self.check_plan(&retried(old, stage_intention, agent_allocation))
            }
        }
    }

    /// A manager's instruction checked like any (see `check_instruction`) and, where the
    /// repair policy has `stage_run_limit`, against the runs of its stage goal. An operator's
    /// own retry is not held to that limit: it is a person's decision, not a model's loop.
    pub(super) fn check_models_instruction(
        &self,
        agent: &AgentId,
        i: &TaskInstruction,
    ) -> Result<(), SyncError> {
        self.check_instruction(agent, i)?;
        if !self.repairs.allows(Repair::StageRunLimit) {
            return Ok(());
        }
        match i {
            TaskInstruction::AddStage { task_id, stages } => {
                let task = &self.tasks[task_id];
                stages.iter().try_for_each(|s| self.within_runs(task, s))
            }
            TaskInstruction::RetryStage {
                task_id,
                stage_id,
                agent_allocation,
                stage_intention,
            } => {
                let old = self.stage_of(task_id, stage_id)?;
                let plan = retried(old, stage_intention, agent_allocation);
                self.within_runs(&self.tasks[task_id], &plan)
            }
            _ => Ok(()),
        }
    }

    fn managed_open_task(
        &self,
        agent: &AgentId,
        task_id: &TaskId,
    ) -> Result<&TaskState, SyncError> {
        if task_id == &self.base_task {
            return Err(SyncError::BaseTask);
        }
        let t = self
            .tasks
            .get(task_id)
            .ok_or_else(|| SyncError::UnknownTask(task_id.clone()))?;
        if &t.task_manager != agent {
            return Err(SyncError::NotManager {
                agent: agent.clone(),
                task: task_id.clone(),
            });
        }
        if t.execution_state.is_over() {
            return Err(SyncError::TaskOver(task_id.clone(), t.execution_state));
        }
        Ok(t)
    }

    pub(super) fn stage_of(
        &self,
        task_id: &TaskId,
        stage_id: &StageId,
    ) -> Result<&StageState, SyncError> {
        self.stages
            .get(stage_id)
            .filter(|s| &s.task_id == task_id)
            .ok_or_else(|| SyncError::UnknownStage {
                task: task_id.clone(),
                stage: stage_id.clone(),
            })
    }

    /// A stage goal asked for again, by add_stage after it finished or by retry_stage while
    /// it runs, is a new try the manager's judgement chose (a small model's writer may miss the
    /// goal once or twice); past `repairs.stage_runs` runs in one task, with whichever agents, it is a
    /// loop, not work (real 1.5B managers re-added their finished stage again and again, and
    /// one handed the same goal to the writer and the reviewer by turns, six stages in an
    /// hour), and is refused with what to do instead. Stages an operator cancelled do not count.
    fn within_runs(&self, task: &TaskState, plan: &StagePlan) -> Result<(), SyncError> {
        let same = |a: &str, b: &str| a.trim().eq_ignore_ascii_case(b.trim());
        let runs = task
            .stage_list
            .iter()
            .filter_map(|id| self.stages.get(id))
            .filter(|st| {
                st.execution_state != ExecutionState::Cancelled
                    && same(&st.stage_intention, &plan.stage_intention)
            })
            .count();
        if runs < self.repairs.thresholds.stage_runs {
            return Ok(());
        }
        Err(SyncError::RunLimit {
            goal: plan.stage_intention.clone(),
            runs,
        })
    }

    fn check_plan(&self, s: &StagePlan) -> Result<(), SyncError> {
        if s.agent_allocation.is_empty() {
            return Err(SyncError::Invalid(Malformed::NoAgentAllocated(
                s.stage_intention.clone(),
            )));
        }
        match s.agent_allocation.keys().find(|a| !self.knows(a)) {
            Some(a) => Err(SyncError::UnknownAgent(a.clone())),
            None => Ok(()),
        }
    }

    /// Carries out an instruction that `check_instruction` accepted.
    pub(super) fn run_instruction(
        &mut self,
        agent: &AgentId,
        i: &TaskInstruction,
        applied: &mut Applied,
    ) {
        match i.clone() {
            TaskInstruction::AddTask {
                task_id,
                task_name,
                task_intention,
                requested_by,
                goal_step,
                attachments,
                trace_id,
            } => {
                let mut task = TaskState::new(task_id, task_name, task_intention, agent.clone());
                task.requested_by = requested_by;
                crate::attachment::list_on_task(&mut task.attachments, &attachments);
                task.goal_step = goal_step;
                task.trace_id =
                    Some(trace_id.unwrap_or_else(|| crate::event::trace::trace_of_task(&task)));
                self.count_opened();
                applied
                    .messages
                    .push(notices::task_created(&task, &self.roster, &self.texts));
                self.emit(
                    applied,
                    Change::Task(TaskChange::Created {
                        task: Box::new(task),
                    }),
                );
            }
            TaskInstruction::AddStage { task_id, stages } => {
                self.add_stages(&task_id, stages, applied);
            }
            TaskInstruction::FinishStage { task_id, stage_id } => {
                self.finish_stage(&task_id, &stage_id, applied);
            }
            TaskInstruction::FinishTask {
                task_id,
                task_summary,
                outcome,
                summary_written,
            } => {
                let asked = match outcome {
                    TaskOutcome::Finished => ExecutionState::Finished,
                    TaskOutcome::Failed => ExecutionState::Failed,
                };
                let (state, why) = self.finish_state(i, asked);
                let summary = (task_summary, summary_written);
                self.close_task(&task_id, state, summary, why, applied);
            }
            TaskInstruction::RetryStage {
                task_id,
                stage_id,
                stage_intention,
                agent_allocation,
            } => self.retry_stage(
                &task_id,
                &stage_id,
                stage_intention,
                agent_allocation,
                applied,
            ),
        }
    }

    /// Appends `stages` to the task, tells their agents, and starts one if none runs.
    fn add_stages(&mut self, task_id: &TaskId, stages: Vec<StagePlan>, applied: &mut Applied) {
        for plan in stages {
            let stage =
                StageState::new(task_id.clone(), plan.stage_intention, plan.agent_allocation);
            self.join(task_id, stage.agent_allocation.keys(), applied);
            // Each allocated agent records the stage in its working memory now, so it
            // knows the work ahead before the stage starts (seed §2.4.1).
            applied.messages.push(Message::instruction(
                task_id.clone(),
                AgentId::from(crate::message::TASK_STATE_SENDER),
                stage.agent_allocation.keys().cloned().collect(),
                StageRef::NoRelative,
                &Instruction::UpdateWorkingMemory {
                    task_id: task_id.clone(),
                    stage_id: Some(StageRef::Stage(stage.stage_id.clone())),
                },
                &self.texts,
            ));
            let at = self.tasks[task_id].stage_list.len();
            self.emit(
                applied,
                Change::Stage(StageChange::Added { stage, list_at: at }),
            );
        }
        if !self.has_running_stage(task_id) {
            self.start_next_stage(task_id, applied);
        }
    }

    /// Finishes a stage, tells its agents, and starts the task's next stage.
    fn finish_stage(&mut self, task_id: &TaskId, stage_id: &StageId, applied: &mut Applied) {
        let agents: Vec<AgentId> = self.stages[stage_id]
            .agent_allocation
            .keys()
            .cloned()
            .collect();
        self.set_stage_state(stage_id, ExecutionState::Finished, applied);
        applied
            .messages
            .push(finish_stage_message(task_id, stage_id, agents, &self.texts));
        self.start_next_stage(task_id, applied);
    }

    /// Fails a stage, puts a new try of it right after it, and starts the next stage.
    fn retry_stage(
        &mut self,
        task_id: &TaskId,
        stage_id: &StageId,
        stage_intention: Option<String>,
        agent_allocation: std::collections::BTreeMap<AgentId, String>,
        applied: &mut Applied,
    ) {
        let old = &self.stages[stage_id];
        let old_agents: Vec<AgentId> = old.agent_allocation.keys().cloned().collect();
        let intention = stage_intention.unwrap_or_else(|| old.stage_intention.clone());
        self.set_stage_state(stage_id, ExecutionState::Failed, applied);
        let mut new = StageState::new(task_id.clone(), intention, agent_allocation);
        new.retry_of = Some(stage_id.clone());
        self.join(task_id, new.agent_allocation.keys(), applied);
        let list = &self.tasks[task_id].stage_list;
        let at = list
            .iter()
            .position(|s| s == stage_id)
            .map_or(list.len(), |i| i + 1);
        self.emit(
            applied,
            Change::Stage(StageChange::Added {
                stage: new,
                list_at: at,
            }),
        );
        applied.messages.push(finish_stage_message(
            task_id,
            stage_id,
            old_agents,
            &self.texts,
        ));
        self.start_next_stage(task_id, applied);
    }

    /// Adds the agents not in the task group yet to it.
    fn join<'a>(
        &mut self,
        task: &TaskId,
        agents: impl Iterator<Item = &'a AgentId>,
        applied: &mut Applied,
    ) {
        let group = &self.tasks[task].task_group;
        let mut new: Vec<AgentId> = Vec::new();
        for a in agents {
            if !group.contains(a) && !new.contains(a) {
                new.push(a.clone());
            }
        }
        if !new.is_empty() {
            self.tell_if_paused(task, &new, applied);
            self.emit(
                applied,
                Change::Task(TaskChange::Joined {
                    task_id: task.clone(),
                    agents: new,
                }),
            );
        }
    }

    pub(super) fn set_stage_state(
        &mut self,
        stage: &StageId,
        state: ExecutionState,
        applied: &mut Applied,
    ) {
        self.emit(
            applied,
            Change::Stage(StageChange::State {
                stage_id: stage.clone(),
                execution_state: state,
            }),
        );
    }

    fn has_running_stage(&self, task: &TaskId) -> bool {
        self.tasks[task]
            .stage_list
            .iter()
            .any(|s| self.stages[s].execution_state == ExecutionState::Running)
    }

    /// Starts the first stage not yet started; with none left, asks the manager to judge the task.
    pub(super) fn start_next_stage(&mut self, task_id: &TaskId, applied: &mut Applied) {
        let task = &self.tasks[task_id];
        let next = task
            .stage_list
            .iter()
            .find(|s| self.stages[*s].execution_state == ExecutionState::Init)
            .cloned();
        let Some(next) = next else {
            applied.messages.push(notices::judge_task(
                task,
                task.stage_list.iter().map(|s| &self.stages[s]),
                &self.texts,
            ));
            return;
        };
        if task.execution_state != ExecutionState::Running {
            self.emit(
                applied,
                Change::Task(TaskChange::State {
                    task_id: task_id.clone(),
                    execution_state: ExecutionState::Running,
                    task_summary: None,
                    summary_written: None,
                    outcome: None,
                }),
            );
        }
        self.set_stage_state(&next, ExecutionState::Running, applied);
        let task = &self.tasks[task_id];
        let stage = &self.stages[&next];
        // Each agent learns who else works in the stage, but a stage of thousands would make
        // that list quadratic in messages and prompts: the first few are named, the rest counted.
        let colleagues: Vec<Colleague> = stage
            .agent_allocation
            .iter()
            .take(COLLEAGUES_LISTED)
            .map(|(a, goal)| Colleague {
                agent_id: a.clone(),
                role: self.member(a).map(|m| m.role.clone()).unwrap_or_default(),
                goal: goal.clone(),
            })
            .collect();
        let unlisted = stage
            .agent_allocation
            .len()
            .saturating_sub(colleagues.len());
        for (agent, goal) in &stage.agent_allocation {
            let i = Instruction::StartStage {
                stage_id: next.clone(),
                task_intention: task.task_intention.clone(),
                attachments: task.attachments.clone(),
                stage_intention: stage.stage_intention.clone(),
                goal: goal.clone(),
                colleagues: colleagues.clone(),
                colleagues_unlisted: unlisted,
            };
            applied.messages.push(Message::instruction(
                task_id.clone(),
                AgentId::from(crate::message::TASK_STATE_SENDER),
                vec![agent.clone()],
                StageRef::Stage(next.clone()),
                &i,
                &self.texts,
            ));
        }
    }
}

/// How many of a stage's agents a start_stage instruction names (the rest are counted).
pub const COLLEAGUES_LISTED: usize = 12;

pub(super) fn finish_stage_message(
    task: &TaskId,
    stage: &StageId,
    agents: Vec<AgentId>,
    t: &crate::texts::Texts,
) -> Message {
    Message::instruction(
        task.clone(),
        AgentId::from(crate::message::TASK_STATE_SENDER),
        agents,
        StageRef::Stage(stage.clone()),
        &Instruction::FinishStage {
            stage_id: stage.clone(),
        },
        t,
    )
}

/// The stage a retry_stage runs: its new intention, or the old one when none is given, with
/// the corrected allocation.
fn retried(
    old: &StageState,
    intention: &Option<String>,
    allocation: &std::collections::BTreeMap<AgentId, String>,
) -> StagePlan {
    StagePlan {
        stage_intention: intention
            .clone()
            .unwrap_or_else(|| old.stage_intention.clone()),
        agent_allocation: allocation.clone(),
    }
}
