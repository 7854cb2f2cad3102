//! The task_manager instructions as SyncState carries them out: add_task, add_stage,
//! finish_stage, finish_task, retry_stage, and the stage hand-over they trigger.

use super::{Applied, SyncCore, SyncError, notices};
use crate::ids::{AgentId, StageId, StageRef, TaskId};
use crate::message::{Colleague, Instruction, Message, StagePlan, TaskInstruction, TaskOutcome};
use crate::state::{ExecutionState, StageState, TaskState};

impl SyncCore {
    pub(super) fn check_instruction(
        &self,
        agent: &AgentId,
        i: &TaskInstruction,
    ) -> Result<(), SyncError> {
        match i {
            TaskInstruction::AddTask { task_id, .. } => {
                if self.tasks.contains_key(task_id) {
                    return Err(SyncError::Invalid(format!(
                        "task `{task_id}` exists already"
                    )));
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
                self.check_plan(&StagePlan {
                    stage_intention: stage_intention
                        .clone()
                        .unwrap_or_else(|| old.stage_intention.clone()),
                    agent_allocation: agent_allocation.clone(),
                })
            }
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

    fn stage_of(&self, task_id: &TaskId, stage_id: &StageId) -> Result<&StageState, SyncError> {
        self.stages
            .get(stage_id)
            .filter(|s| &s.task_id == task_id)
            .ok_or_else(|| SyncError::UnknownStage {
                task: task_id.clone(),
                stage: stage_id.clone(),
            })
    }

    fn check_plan(&self, s: &StagePlan) -> Result<(), SyncError> {
        if s.agent_allocation.is_empty() {
            return Err(SyncError::Invalid(format!(
                "stage \"{}\" allocates no agent",
                s.stage_intention
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
            } => {
                let task =
                    TaskState::new(task_id.clone(), task_name, task_intention, agent.clone());
                applied
                    .messages
                    .push(notices::task_created(&task, &self.roster));
                self.tasks.insert(task_id.clone(), task);
                applied.tasks.insert(task_id);
            }
            TaskInstruction::AddStage { task_id, stages } => {
                for plan in stages {
                    let stage = StageState::new(
                        task_id.clone(),
                        plan.stage_intention,
                        plan.agent_allocation,
                    );
                    let task = self.tasks.get_mut(&task_id).expect("checked");
                    task.join(stage.agent_allocation.keys().cloned());
                    task.stage_list.push(stage.stage_id.clone());
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
                    ));
                    applied.stages.insert(stage.stage_id.clone());
                    self.stages.insert(stage.stage_id.clone(), stage);
                }
                applied.tasks.insert(task_id.clone());
                if !self.has_running_stage(&task_id) {
                    self.start_next_stage(&task_id, applied);
                }
            }
            TaskInstruction::FinishStage { task_id, stage_id } => {
                let stage = self.stages.get_mut(&stage_id).expect("checked");
                stage.execution_state = ExecutionState::Finished;
                let agents: Vec<AgentId> = stage.agent_allocation.keys().cloned().collect();
                applied.stages.insert(stage_id.clone());
                applied
                    .messages
                    .push(finish_stage_message(&task_id, &stage_id, agents));
                self.start_next_stage(&task_id, applied);
            }
            TaskInstruction::FinishTask {
                task_id,
                task_summary,
                outcome,
            } => {
                for sid in self.tasks[&task_id].stage_list.clone() {
                    let s = self.stages.get_mut(&sid).expect("stage of task");
                    if !s.execution_state.is_over() {
                        s.execution_state = ExecutionState::Failed;
                        applied.stages.insert(sid);
                    }
                }
                let task = self.tasks.get_mut(&task_id).expect("checked");
                task.execution_state = match outcome {
                    TaskOutcome::Finished => ExecutionState::Finished,
                    TaskOutcome::Failed => ExecutionState::Failed,
                };
                task.task_summary = Some(task_summary);
                applied.messages.push(Message::instruction(
                    task_id.clone(),
                    AgentId::from(crate::message::TASK_STATE_SENDER),
                    task.task_group.clone(),
                    StageRef::NoRelative,
                    &Instruction::FinishTask {
                        task_id: task_id.clone(),
                    },
                ));
                applied.tasks.insert(task_id);
            }
            TaskInstruction::RetryStage {
                task_id,
                stage_id,
                stage_intention,
                agent_allocation,
            } => {
                let old = self.stages.get_mut(&stage_id).expect("checked");
                old.execution_state = ExecutionState::Failed;
                let old_agents: Vec<AgentId> = old.agent_allocation.keys().cloned().collect();
                let intention = stage_intention.unwrap_or_else(|| old.stage_intention.clone());
                let new = StageState::new(task_id.clone(), intention, agent_allocation);
                let new_id = new.stage_id.clone();
                let task = self.tasks.get_mut(&task_id).expect("checked");
                task.join(new.agent_allocation.keys().cloned());
                let at = task
                    .stage_list
                    .iter()
                    .position(|s| s == &stage_id)
                    .map_or(task.stage_list.len(), |i| i + 1);
                task.stage_list.insert(at, new_id.clone());
                self.stages.insert(new_id.clone(), new);
                applied.stages.extend([stage_id.clone(), new_id]);
                applied.tasks.insert(task_id.clone());
                applied
                    .messages
                    .push(finish_stage_message(&task_id, &stage_id, old_agents));
                self.start_next_stage(&task_id, applied);
            }
        }
    }

    fn has_running_stage(&self, task: &TaskId) -> bool {
        self.tasks[task]
            .stage_list
            .iter()
            .any(|s| self.stages[s].execution_state == ExecutionState::Running)
    }

    /// Starts the first stage not yet started; with none left, asks the manager to judge the task.
    fn start_next_stage(&mut self, task_id: &TaskId, applied: &mut Applied) {
        let task = self.tasks.get_mut(task_id).expect("task");
        let next = task
            .stage_list
            .iter()
            .find(|s| self.stages[*s].execution_state == ExecutionState::Init)
            .cloned();
        applied.tasks.insert(task_id.clone());
        let Some(next) = next else {
            applied.messages.push(notices::judge_task(
                task,
                task.stage_list.iter().map(|s| &self.stages[s]),
            ));
            return;
        };
        task.execution_state = ExecutionState::Running;
        let stage = self.stages.get_mut(&next).expect("stage");
        stage.execution_state = ExecutionState::Running;
        applied.stages.insert(next.clone());
        let colleagues: Vec<Colleague> = stage
            .agent_allocation
            .iter()
            .map(|(a, goal)| Colleague {
                agent_id: a.clone(),
                role: self
                    .roster
                    .iter()
                    .find(|m| &m.id == a)
                    .map(|m| m.role.clone())
                    .unwrap_or_default(),
                goal: goal.clone(),
            })
            .collect();
        for (agent, goal) in &stage.agent_allocation {
            let i = Instruction::StartStage {
                stage_id: next.clone(),
                task_intention: task.task_intention.clone(),
                stage_intention: stage.stage_intention.clone(),
                goal: goal.clone(),
                colleagues: colleagues.clone(),
            };
            applied.messages.push(Message::instruction(
                task_id.clone(),
                AgentId::from(crate::message::TASK_STATE_SENDER),
                vec![agent.clone()],
                StageRef::Stage(next.clone()),
                &i,
            ));
        }
    }
}

fn finish_stage_message(task: &TaskId, stage: &StageId, agents: Vec<AgentId>) -> Message {
    Message::instruction(
        task.clone(),
        AgentId::from(crate::message::TASK_STATE_SENDER),
        agents,
        StageRef::Stage(stage.clone()),
        &Instruction::FinishStage {
            stage_id: stage.clone(),
        },
    )
}
