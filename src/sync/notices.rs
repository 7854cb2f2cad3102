//! The system messages a task sends its manager: a task was created, a stage is complete,
//! every stage is done. They carry ids so the manager's next instruction can name them.

use super::Member;
use crate::ids::{AgentId, StageRef};
use crate::message::{Message, TASK_STATE_SENDER};
use crate::state::{StageState, TaskState};

fn from_task(task: &TaskState, stage: StageRef, text: String) -> Message {
    Message::notice(
        task.task_id.clone(),
        AgentId::from(TASK_STATE_SENDER),
        vec![task.task_manager.clone()],
        stage,
        text,
    )
}

/// How many agents a notice to the manager names one by one; a team or stage of thousands is
/// summed up after that (ask_info lists everything), so the manager's prompt stays bounded.
pub const AGENTS_LISTED: usize = 30;

/// "- … and N more" when `total` is over what was listed.
fn more(total: usize, listed: usize, what: &str) -> String {
    if total > listed {
        format!(
            "\n- … and {} more {what} (ask_info lists them all)",
            total - listed
        )
    } else {
        String::new()
    }
}

pub fn task_created(task: &TaskState, roster: &[Member]) -> Message {
    let mut team = roster
        .iter()
        .take(AGENTS_LISTED)
        .map(|m| format!("- `{}` ({})", m.id, m.role))
        .collect::<Vec<_>>()
        .join("\n");
    team.push_str(&more(roster.len(), AGENTS_LISTED, "agents"));
    from_task(
        task,
        StageRef::NoRelative,
        format!(
            "[TaskState] Task \"{}\" was created with you as its manager.\n\
             task_id: {}\nTask intention: {}\n\n\
             Next, split it into stages with the task_manager skill (action add_stage, task_id {}), \
             giving each stage an intention and an allocation {{agent_id: that agent's goal}}.\n\
             Agents of the team:\n{team}",
            task.task_name, task.task_id, task.task_intention, task.task_id
        ),
    )
}

pub fn stage_complete(task: &TaskState, stage: &StageState) -> Message {
    let mut lines = stage
        .agent_allocation
        .iter()
        .take(AGENTS_LISTED)
        .map(|(a, goal)| {
            let summary = stage
                .completion_summary
                .get(a)
                .map(String::as_str)
                .unwrap_or("(none)");
            format!(
                "- agent `{a}`\n  goal: {goal}\n  completion summary:\n{}",
                indented(summary, 4)
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    lines.push_str(&more(
        stage.agent_allocation.len(),
        AGENTS_LISTED,
        "agents, each with a summary",
    ));
    from_task(
        task,
        StageRef::Stage(stage.stage_id.clone()),
        format!(
            "[TaskState] Every agent of stage {} of task {} has submitted its completion summary.\n\
             Stage intention: {}\n{lines}\n\n\
             As the manager, judge the stage: if it met its goal, end it with task_manager \
             finish_stage (task_id {}, stage_id {}); if not, correct course, e.g. with task_manager \
             retry_stage and a corrected allocation.",
            stage.stage_id, task.task_id, stage.stage_intention, task.task_id, stage.stage_id
        ),
    )
}

/// `text` with every line indented by `by` spaces: a summary of several lines (a composed one
/// lists results) stays inside its agent's entry instead of reading as entries of its own (a
/// 1.5B manager took such lines for stages and planned each again).
fn indented(text: &str, by: usize) -> String {
    let pad = " ".repeat(by);
    text.lines()
        .map(|l| format!("{pad}{l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// What every notice asking a manager to judge a whole task says (see [`judges_task`]).
const NO_STAGE_LEFT: &str = "has no stage left to run.";

/// Whether a text carries the notice that asks its manager to judge a whole task.
pub fn judges_task(text: &str) -> bool {
    text.contains(NO_STAGE_LEFT)
}

/// The stages and their agents' reports in a task judgement notice (`judge_task`'s text), as
/// they are written there.
fn reports_section(text: &str) -> Option<&str> {
    if !judges_task(text) {
        return None;
    }
    // Both searched from the end: a task intention may itself hold "Stages:".
    let to = text.rfind(JUDGE)?;
    let from = text[..to].rfind(STAGES)? + STAGES.len();
    Some(text[from..to].trim_end())
}

/// The stages and their agents' reports in a task judgement notice, for an operator to read:
/// each stage's state and goal (without its id), then what each agent reported.
pub fn stage_reports(text: &str) -> Option<String> {
    let lines = reports_section(text)?.lines().map(|l| {
        match l
            .strip_prefix("- stage ")
            .and_then(|rest| rest.split_once(" ("))
        {
            Some((_id, rest)) => format!("- stage ({rest}"),
            None => l.to_owned(),
        }
    });
    Some(lines.collect::<Vec<_>>().join("\n"))
}

/// The lines the agents reported in a task judgement notice (what the stages gave).
pub fn reported_lines(text: &str) -> Vec<&str> {
    reports_section(text)
        .map(|s| {
            s.lines()
                .filter_map(|l| l.strip_prefix("    "))
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// Where the stages start and end in a task judgement notice.
const STAGES: &str = "\nStages:\n";
const JUDGE: &str = "\n\nAs the manager, judge the whole task";

pub fn judge_task<'a>(task: &TaskState, stages: impl Iterator<Item = &'a StageState>) -> Message {
    let lines = stages
        .map(|s| {
            let mut sums = s
                .completion_summary
                .iter()
                .take(AGENTS_LISTED)
                .map(|(a, t)| format!("  - `{a}` reported:\n{}", indented(t, 4)))
                .collect::<Vec<_>>()
                .join("\n");
            sums.push_str(&more(
                s.completion_summary.len(),
                AGENTS_LISTED,
                "summaries",
            ));
            format!(
                "- stage {} ({}): {}\n{sums}",
                s.stage_id, s.execution_state, s.stage_intention
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    from_task(
        task,
        StageRef::NoRelative,
        format!(
            "[TaskState] Task {} {NO_STAGE_LEFT}\nTask intention: {}{STAGES}{lines}{JUDGE}: \
             if its goal is reached, end it with task_manager \
             finish_task (task_id {}, a task_summary for the operator that gives the result itself: \
             the text, answer or file name, in full when it is short, such as a poem); if not, \
             add the missing work with add_stage.",
            task.task_id, task.task_intention, task.task_id
        ),
    )
}

pub fn agent_stuck(task: &TaskState, stage: &StageState, agent: &AgentId, why: &str) -> Message {
    let goal = stage
        .agent_allocation
        .get(agent)
        .map(String::as_str)
        .unwrap_or("(none)");
    from_task(
        task,
        StageRef::Stage(stage.stage_id.clone()),
        format!(
            "[TaskState] Agent `{agent}` cannot go on in stage {} of task {}: its last step failed and \
             it has nothing left to run there.\nReason: {why}\nIts goal: {goal}\nStage intention: {}\n\n\
             As the manager, decide: retry the stage with task_manager retry_stage (task_id {}, \
             stage_id {}) and a corrected allocation, or end it with finish_stage if its goal is met \
             anyway.",
            stage.stage_id, task.task_id, stage.stage_intention, task.task_id, stage.stage_id
        ),
    )
}
