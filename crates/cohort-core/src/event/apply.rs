//! The pure `apply` functions: one change to a task, a stage, or an agent with its steps. The
//! owner of a state and every reader call these same functions, so a state rebuilt from the
//! changes is the owner's state. A change that names something the state does not have is
//! ignored (a reader may have started late, or the thing left memory).

use super::{AgentChange, Change, StageChange, StepChange, TaskChange};
use crate::ids::{StageId, TaskId};
use crate::state::{
    AgentState, StageAgentState, StageState, StepExecutionState, StepState, TaskState,
};
use std::collections::BTreeMap;

/// A change to one task (`Created` and `Evicted` are for the map that holds tasks, see
/// [`apply_sync`]).
pub fn apply_task(task: &mut TaskState, c: &TaskChange) {
    match c {
        TaskChange::Created { .. } | TaskChange::Evicted { .. } => {}
        TaskChange::Joined { agents, .. } => task.join(agents.iter().cloned()),
        TaskChange::State {
            execution_state,
            task_summary,
            summary_written,
            outcome,
            ..
        } => {
            task.execution_state = *execution_state;
            if let Some(s) = task_summary {
                task.task_summary = Some(s.clone());
                task.summary_written = summary_written.clone();
            }
            if let Some(o) = outcome {
                task.outcome = Some(o.clone());
            }
        }
        TaskChange::SharedInfo { entry, .. } => task.shared_info_pool.push_back(entry.clone()),
        TaskChange::Conversation { entry, .. } => {
            crate::attachment::list_on_task(&mut task.attachments, &entry.message.attachments);
            task.shared_conversation_pool.push_back(entry.clone())
        }
        TaskChange::Trimmed {
            shared_info,
            conversation,
            ..
        } => {
            let info = (*shared_info).min(task.shared_info_pool.len());
            task.shared_info_pool.drain(..info);
            task.shared_info_omitted += info as u64;
            let conv = (*conversation).min(task.shared_conversation_pool.len());
            task.shared_conversation_pool.drain(..conv);
            task.shared_conversation_omitted += conv as u64;
        }
        TaskChange::Tokens { usage, .. } => task.token_usage.add(*usage),
        TaskChange::Repaired { rules, .. } => {
            for r in rules {
                *task.repairs.entry(*r).or_default() += 1;
            }
        }
        TaskChange::Paused { paused, .. } => task.paused = *paused,
        TaskChange::Forked { from, .. } => task.forked_from = Some(from.clone()),
    }
}

/// A change to one stage (`Added` is for the maps, see [`apply_sync`]).
pub fn apply_stage(stage: &mut StageState, c: &StageChange) {
    match c {
        StageChange::Added { .. } => {}
        StageChange::State {
            execution_state, ..
        } => stage.execution_state = *execution_state,
        StageChange::Agent {
            agent_id, state, ..
        } => {
            stage.every_agent_state.insert(agent_id.clone(), *state);
        }
        StageChange::Completion {
            agent_id,
            summary,
            results,
            written,
            ..
        } => {
            stage
                .completion_summary
                .insert(agent_id.clone(), summary.clone());
            // A report given again replaces the one before, its results with it.
            if results.is_empty() {
                stage.completion_results.remove(agent_id);
            } else {
                stage
                    .completion_results
                    .insert(agent_id.clone(), results.clone());
            }
            if written.is_own() {
                stage.completion_written.remove(agent_id);
            } else {
                stage.completion_written.insert(agent_id.clone(), *written);
            }
            stage
                .every_agent_state
                .insert(agent_id.clone(), StageAgentState::Finished);
        }
    }
}

/// A task or stage change to the maps SyncState (and every reader) holds them in.
pub fn apply_sync(
    tasks: &mut BTreeMap<TaskId, TaskState>,
    stages: &mut BTreeMap<StageId, StageState>,
    c: &Change,
) {
    match c {
        Change::Task(TaskChange::Created { task }) => {
            tasks.insert(task.task_id.clone(), (**task).clone());
        }
        Change::Task(TaskChange::Evicted { task_id, .. }) => {
            if let Some(t) = tasks.remove(task_id) {
                for s in &t.stage_list {
                    stages.remove(s);
                }
            }
        }
        Change::Task(t) => {
            if let Some(task) = c.task_id().and_then(|id| tasks.get_mut(id)) {
                apply_task(task, t);
            }
        }
        Change::Stage(StageChange::Added { stage, list_at: at }) => {
            if let Some(task) = tasks.get_mut(&stage.task_id) {
                let at = (*at).min(task.stage_list.len());
                task.stage_list.insert(at, stage.stage_id.clone());
            }
            stages.insert(stage.stage_id.clone(), stage.clone());
        }
        Change::Stage(s) => {
            let id = match s {
                StageChange::State { stage_id, .. }
                | StageChange::Agent { stage_id, .. }
                | StageChange::Completion { stage_id, .. } => stage_id,
                StageChange::Added { .. } => return,
            };
            if let Some(stage) = stages.get_mut(id) {
                apply_stage(stage, s);
            }
        }
        Change::Agent(_) | Change::Step(_) => {}
    }
}

/// An agent or step change to the agent it belongs to. Returns the steps a `Removed` took out
/// of the agent's list (a reader may keep them; the owner has published them already).
pub fn apply_agent(agent: &mut AgentState, c: &Change) -> Vec<StepState> {
    match c {
        Change::Agent(a) => {
            apply_agent_change(agent, a);
            Vec::new()
        }
        Change::Step(s) => apply_step_change(agent, s),
        Change::Task(_) | Change::Stage(_) => Vec::new(),
    }
}

fn apply_agent_change(agent: &mut AgentState, c: &AgentChange) {
    match c {
        AgentChange::Added { .. } => {}
        AgentChange::WorkingState { state, .. } => agent.working_state = *state,
        AgentChange::WorkNoted {
            task_id, stage_id, ..
        } => note_work(agent, task_id, stage_id.as_ref()),
        AgentChange::WorkCleared {
            task_id, stage_id, ..
        } => clear_work(agent, task_id, stage_id.as_ref()),
        AgentChange::WaitsHeld {
            task_id,
            stage_id,
            ids,
            from,
            until,
            ..
        } => hold_waits(agent, task_id, stage_id, ids, from, until),
        AgentChange::WaitsReleased { ids, .. } => {
            for id in ids {
                agent.step_lock.release(id);
            }
        }
        AgentChange::MemoryAdded { key, text, .. } => {
            agent.persistent_memory.insert(key.clone(), text.clone());
        }
        AgentChange::MemoryDeleted { key, .. } => {
            agent.persistent_memory.remove(key);
        }
        AgentChange::Tokens { usage, .. } => agent.token_usage.add(*usage),
        AgentChange::Paused {
            paused, task_id, ..
        } => set_paused(agent, *paused, task_id.as_ref()),
        AgentChange::GoalOpened {
            task_id, stage_id, ..
        } => {
            agent.open_goals.insert((task_id.clone(), stage_id.clone()));
        }
        AgentChange::GoalClosed {
            task_id, stage_id, ..
        } => {
            agent
                .open_goals
                .remove(&(task_id.clone(), stage_id.clone()));
        }
        AgentChange::HistorySummarized { summary, .. } => replace_summary(agent, summary),
        AgentChange::PrivateMessage { with, entry, .. } => {
            agent
                .conversation_pool
                .get_or_insert_with(Default::default)
                .conversation_privates
                .entry(with.clone())
                .or_default()
                .push(entry.clone());
        }
        AgentChange::PrivateReplied { with, index, .. } => mark_replied(agent, with, *index),
        // The ledger of messages in flight is the reader's (`States`), not the agent's.
        AgentChange::Received { .. } => {}
        AgentChange::Notice { text, .. } => agent
            .conversation_pool
            .get_or_insert_with(Default::default)
            .global_messages
            .push(text.clone()),
        AgentChange::PrivateTrimmed { with, count, .. } => {
            trim_conversation(agent, with.as_ref(), *count)
        }
    }
}

/// Notes in the agent's working memory that it works in `task_id` (and in a stage of it).
fn note_work(agent: &mut AgentState, task_id: &TaskId, stage_id: Option<&crate::ids::StageRef>) {
    let entry = agent.working_memory.entry(task_id.clone()).or_default();
    if let Some(stage) = stage_id {
        entry.entry(stage.clone()).or_default();
    }
}

/// Forgets the agent's work, and its summaries, in a stage of `task_id` (or in all of it).
fn clear_work(agent: &mut AgentState, task_id: &TaskId, stage_id: Option<&crate::ids::StageRef>) {
    match stage_id {
        Some(stage) => {
            if let Some(t) = agent.working_memory.get_mut(task_id) {
                t.remove(stage);
            }
            agent
                .history_summaries
                .retain(|s| &s.task_id != task_id || &s.stage_id != stage);
        }
        None => {
            agent.working_memory.remove(task_id);
            agent.history_summaries.retain(|s| &s.task_id != task_id);
        }
    }
}

/// Takes the waits `ids`, `ids[i]` for `from[i]` until `until[i]` (either may be short).
fn hold_waits(
    agent: &mut AgentState,
    task_id: &TaskId,
    stage_id: &crate::ids::StageRef,
    ids: &[crate::ids::WaitId],
    from: &[crate::ids::AgentId],
    until: &[i64],
) {
    agent
        .step_lock
        .hold(ids.iter().enumerate().map(|(i, id)| crate::state::Wait {
            id: id.clone(),
            task: task_id.clone(),
            stage: stage_id.clone(),
            from: from.get(i).cloned(),
            until: until.get(i).copied(),
        }))
}

/// Puts `summary` in place of the agent's history summary of the same task and stage.
fn replace_summary(agent: &mut AgentState, summary: &crate::state::HistorySummary) {
    agent
        .history_summaries
        .retain(|s| s.task_id != summary.task_id || s.stage_id != summary.stage_id);
    agent.history_summaries.push(summary.clone());
}

/// Pauses or resumes the whole agent (`task_id` none) or only its work in one task.
fn set_paused(agent: &mut AgentState, paused: bool, task_id: Option<&TaskId>) {
    match task_id {
        None => agent.paused = paused,
        Some(t) => {
            if paused {
                agent.paused_tasks.insert(t.clone());
            } else {
                agent.paused_tasks.remove(t);
            }
        }
    }
}

/// Marks the message at `index` of the human's conversation with `with` as answered.
fn mark_replied(agent: &mut AgentState, with: &crate::ids::AgentId, index: usize) {
    if let Some(m) = agent
        .conversation_pool
        .as_mut()
        .and_then(|p| p.conversation_privates.get_mut(with))
        .and_then(|c| c.get_mut(index))
    {
        m.replied = true;
    }
}

/// Drops the oldest `count` messages of the human's talk with `with` (none: its notices).
fn trim_conversation(agent: &mut AgentState, with: Option<&crate::ids::AgentId>, count: usize) {
    let Some(pool) = agent.conversation_pool.as_mut() else {
        return;
    };
    match with {
        Some(w) => {
            if let Some(c) = pool.conversation_privates.get_mut(w) {
                c.drain(..count.min(c.len()));
            }
        }
        None => {
            let n = count.min(pool.global_messages.len());
            pool.global_messages.drain(..n);
            pool.global_messages_omitted += n as u64;
        }
    }
}

fn apply_step_change(agent: &mut AgentState, c: &StepChange) -> Vec<StepState> {
    match c {
        StepChange::Added {
            step,
            list_at,
            todo_at,
            remember,
            ..
        } => {
            if *remember {
                agent
                    .working_memory
                    .entry(step.task_id.clone())
                    .or_default()
                    .entry(step.stage_id.clone())
                    .or_default()
                    .push(step.step_id.clone());
            }
            agent
                .agent_step
                .insert((**step).clone(), *list_at, *todo_at);
        }
        StepChange::Started { step_id, .. } => agent.agent_step.start(step_id),
        StepChange::Updated {
            step_id, update, ..
        } => {
            // A step that is over is never queued: a queued step a person cancelled leaves the
            // queue (a started one left it when it started, so the queue is not searched).
            let mut leaves_queue = false;
            if let Some(v) = update.execution_state
                && let Some(was) = agent.agent_step.set_state(step_id, v)
            {
                leaves_queue = v.is_over()
                    && matches!(was, StepExecutionState::Init | StepExecutionState::Pending);
            }
            if let Some(s) = agent.agent_step.get_mut(step_id) {
                // A step that ended waits for nothing more.
                if update.execution_state.is_some_and(|v| v.is_over()) {
                    s.model_wait = None;
                }
                if let Some(v) = &update.execute_result {
                    s.execute_result = Some(crate::state::StepResult::clone(v));
                }
                if let Some(v) = &update.instruction_content {
                    s.instruction_content = Some(v.clone());
                }
                if let Some(v) = update.token_usage {
                    s.token_usage = v;
                }
                if let Some(v) = &update.model_wait {
                    s.model_wait = v.clone();
                }
            }
            if leaves_queue {
                agent.agent_step.unqueue(step_id);
            }
        }
        StepChange::Removed { step_ids, .. } => {
            for ids in agent
                .working_memory
                .values_mut()
                .flat_map(|t| t.values_mut())
            {
                ids.retain(|id| !step_ids.contains(id));
            }
            return agent.agent_step.remove_all(step_ids);
        }
        StepChange::CutLoose { step_ids, .. } => agent.agent_step.cut_loose(step_ids),
    }
    Vec::new()
}
