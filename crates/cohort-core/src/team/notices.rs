//! The notices a task sends its manager (a task was created, a stage is complete, every stage
//! is done, an agent is stuck), and the one it sends the person whose goal it served (it
//! ended), built as typed [`Notice`]s from the task's and stages' states. They carry ids so the
//! manager's next instruction can name them.

use super::Member;
use crate::ids::{AgentId, StageRef};
use crate::message::{Message, TASK_STATE_SENDER};
use crate::notice::{AGENTS_LISTED, Notice, Report, StageReports, Teammate};
use crate::report::Written;
use crate::state::{ExecutionState, StageState, TaskEnd, TaskState};
use crate::texts::Texts;

fn from_task(task: &TaskState, stage: StageRef, notice: Notice, t: &Texts) -> Message {
    Message::from_notice(
        task.task_id.clone(),
        AgentId::from(TASK_STATE_SENDER),
        vec![task.task_manager.clone()],
        stage,
        notice,
        t,
    )
}

/// Tells the person whose goal `task` served how it ended: its summary (the manager's words
/// and what the runtime `written` of it), and why it failed or which stages gave nothing.
/// `None` when nobody is to be told (a task the manager made on its own, or one whose
/// requester is not a person of the team).
pub fn task_ended(
    task: &TaskState,
    state: ExecutionState,
    (summary, written): (&str, Option<&crate::report::TaskWritten>),
    outcome: Option<&TaskEnd>,
    roster: &[Member],
    t: &Texts,
) -> Option<Message> {
    to_goal_giver(
        task,
        roster,
        Notice::TaskEnded {
            task_id: task.task_id.clone(),
            task_name: task.task_name.clone(),
            state,
            summary: summary.to_owned(),
            summary_written: written.cloned().map(Box::new),
            why: outcome.filter(|o| !o.is_empty()).map(|o| o.render(t)),
        },
        t,
    )
}

/// Tells the person whose goal `task` serves that it stalled, idle for `idle_secs`.
pub fn task_stalled(
    task: &TaskState,
    idle_secs: u64,
    roster: &[Member],
    t: &Texts,
) -> Option<Message> {
    to_goal_giver(
        task,
        roster,
        Notice::TaskStalled {
            task_id: task.task_id.clone(),
            task_name: task.task_name.clone(),
            task_manager: task.task_manager.clone(),
            idle_secs,
        },
        t,
    )
}

/// `notice` as a message to the person whose goal `task` serves, when they are a person of
/// the team.
fn to_goal_giver(
    task: &TaskState,
    roster: &[Member],
    notice: Notice,
    t: &Texts,
) -> Option<Message> {
    let person = task.requested_by.as_ref()?;
    if !roster.iter().any(|m| &m.id == person && m.human) {
        return None;
    }
    Some(Message::from_notice(
        task.task_id.clone(),
        AgentId::from(TASK_STATE_SENDER),
        vec![person.clone()],
        StageRef::NoRelative,
        notice,
        t,
    ))
}

/// Tells the manager of a new task its id, name and goal, and who is in the team (the first
/// [`AGENTS_LISTED`] of the roster), so it can plan the task's stages.
pub fn task_created(task: &TaskState, roster: &[Member], t: &Texts) -> Message {
    let team = roster
        .iter()
        .take(AGENTS_LISTED)
        .map(|m| Teammate {
            agent_id: m.id.clone(),
            role: m.role.clone(),
        })
        .collect();
    let notice = Notice::TaskCreated {
        task_id: task.task_id.clone(),
        task_name: task.task_name.clone(),
        task_intention: task.task_intention.clone(),
        team,
        unlisted: roster.len().saturating_sub(AGENTS_LISTED),
    };
    from_task(task, StageRef::NoRelative, notice, t)
}

/// Every agent allocated to the stage, with its goal and what it reported: its summary, and
/// its work's results only where the runtime added them to it (the stage's judgement reads the
/// reports as they read).
fn allocated(stage: &StageState) -> StageReports {
    let reports = stage.agent_allocation.iter().map(|(a, goal)| {
        let written = written_of(stage, a);
        Report {
            agent_id: a.clone(),
            goal: goal.clone(),
            summary: stage.completion_summary.get(a).cloned(),
            results: match written {
                Written::Own => Vec::new(),
                _ => results_of(stage, a),
            },
            written,
        }
    });
    listed(stage, reports, stage.agent_allocation.len())
}

/// The agents of the stage that reported, with what they reported and what their work steps
/// produced (the task's judgement checks its summary against those).
fn reported(stage: &StageState) -> StageReports {
    let reports = stage.completion_summary.iter().map(|(a, summary)| Report {
        agent_id: a.clone(),
        goal: stage.agent_allocation.get(a).cloned().unwrap_or_default(),
        summary: Some(summary.clone()),
        results: results_of(stage, a),
        written: written_of(stage, a),
    });
    listed(stage, reports, stage.completion_summary.len())
}

/// What `agent`'s work steps in the stage produced, as it reported them.
fn results_of(stage: &StageState, agent: &AgentId) -> Vec<String> {
    stage
        .completion_results
        .get(agent)
        .cloned()
        .unwrap_or_default()
}

/// What the runtime added to `agent`'s report in the stage.
fn written_of(stage: &StageState, agent: &AgentId) -> Written {
    stage
        .completion_written
        .get(agent)
        .copied()
        .unwrap_or_default()
}

/// The stage with the first [`AGENTS_LISTED`] of its `total` reports, the rest counted.
fn listed(stage: &StageState, reports: impl Iterator<Item = Report>, total: usize) -> StageReports {
    StageReports {
        stage_id: stage.stage_id.clone(),
        stage_intention: stage.stage_intention.clone(),
        state: stage.execution_state,
        reports: reports.take(AGENTS_LISTED).collect(),
        unlisted: total.saturating_sub(AGENTS_LISTED),
    }
}

/// Tells the manager that every agent allocated to `stage` reported, with their goals and
/// reports, so it can finish the stage or retry it.
pub fn stage_complete(task: &TaskState, stage: &StageState, t: &Texts) -> Message {
    let notice = Notice::StageComplete {
        task_id: task.task_id.clone(),
        stage: allocated(stage),
    };
    from_task(task, StageRef::Stage(stage.stage_id.clone()), notice, t)
}

/// Tells the manager that no stage of the task is left to start, with what each of `stages`
/// reported, so it judges whether the task's goal is reached: it finishes the task or adds a
/// stage.
pub fn judge_task<'a>(
    task: &TaskState,
    stages: impl Iterator<Item = &'a StageState>,
    t: &Texts,
) -> Message {
    let notice = Notice::NoStageLeft {
        task_id: task.task_id.clone(),
        task_intention: task.task_intention.clone(),
        stages: stages.map(reported).collect(),
    };
    from_task(task, StageRef::NoRelative, notice, t)
}

/// Tells the manager that `agent`, allocated to `stage`, failed and cannot go on (`why`), so
/// it can retry or finish the stage rather than wait for a report that will not come.
pub fn agent_stuck(
    task: &TaskState,
    stage: &StageState,
    agent: &AgentId,
    why: &str,
    t: &Texts,
) -> Message {
    let notice = Notice::AgentStuck {
        task_id: task.task_id.clone(),
        stage_id: stage.stage_id.clone(),
        stage_intention: stage.stage_intention.clone(),
        agent_id: agent.clone(),
        goal: stage.agent_allocation.get(agent).cloned(),
        reason: why.to_owned(),
    };
    from_task(task, StageRef::Stage(stage.stage_id.clone()), notice, t)
}
