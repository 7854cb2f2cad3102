//! Notices: what a task tells its manager (a task was created, a stage is complete, no stage
//! is left, an agent is stuck), as typed data. The runtime decides on these fields; the text a
//! manager or a person reads is rendered from them ([`Notice::render`]) and never read back.

use crate::ids::{AgentId, StageId, TaskId};
use crate::state::ExecutionState;
use serde::{Deserialize, Serialize};

/// One notice from a task to its manager (SPEC §3: a message from `[TaskState]`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Notice {
    /// A task was created with the receiver as its manager: it is to split it into stages.
    TaskCreated {
        /// The new task.
        task_id: TaskId,
        /// Its name, as `add_task` gave it.
        task_name: String,
        /// Its goal (`task_intention`).
        task_intention: String,
        /// The team's agents, the first few (see [`AGENTS_LISTED`]).
        team: Vec<Teammate>,
        /// How many more agents the team has than `team` lists.
        #[serde(default, skip_serializing_if = "is_zero")]
        unlisted: usize,
    },
    /// Every agent of a stage reported: the manager judges the stage.
    StageComplete {
        /// The task the stage belongs to.
        task_id: TaskId,
        /// The stage, its state and its agents' reports.
        #[serde(flatten)]
        stage: StageReports,
    },
    /// A task has no stage left to run: the manager judges the whole task.
    NoStageLeft {
        /// The task to judge.
        task_id: TaskId,
        /// Its goal, to judge the stages against.
        task_intention: String,
        /// Each of its stages with what its agents reported, in order.
        stages: Vec<StageReports>,
    },
    /// An agent of a stage cannot go on (its last step failed and nothing is left to run).
    AgentStuck {
        /// The task of the stage.
        task_id: TaskId,
        /// The stage the agent is stuck in.
        stage_id: StageId,
        /// The stage's goal (`stage_intention`).
        stage_intention: String,
        /// The agent that cannot go on.
        agent_id: AgentId,
        /// The agent's goal in the stage, if it has one.
        goal: Option<String>,
        /// Why its last step failed.
        reason: String,
    },
    /// A task ended: told to the person whose goal it served (not to a manager).
    TaskEnded {
        /// The task that ended.
        task_id: TaskId,
        /// Its name.
        task_name: String,
        /// How it ended: finished, failed or cancelled.
        state: ExecutionState,
        /// Its summary (what it gave, or why it was cancelled).
        summary: String,
        /// Why it failed, or which of its stages gave nothing, when there is anything to say.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        why: Option<String>,
    },
    /// A task stalled: no agent has had work in it for a while, and it is not over. Told to
    /// the person whose goal it serves.
    TaskStalled {
        /// The task that stalled.
        task_id: TaskId,
        /// Its name.
        task_name: String,
        /// Its manager, whom the person may write to.
        task_manager: AgentId,
        /// How long nobody has worked in it, in seconds.
        idle_secs: u64,
    },
}

/// One agent of the team as a notice names it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Teammate {
    /// The agent the notice names.
    pub agent_id: AgentId,
    /// Its role, from its AgentState.
    pub role: String,
}

/// A stage and what its agents reported, as a judgement needs it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StageReports {
    /// The stage reported on.
    pub stage_id: StageId,
    /// Its goal (`stage_intention`).
    pub stage_intention: String,
    /// Its `execution_state` when the notice was made.
    pub state: ExecutionState,
    /// The stage's agents (the first few), each with its goal and what it reported.
    pub reports: Vec<Report>,
    /// How many more agents the stage has than `reports` lists.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unlisted: usize,
}

/// One agent's part of a stage: its goal and its completion summary, if it gave one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The reporting agent.
    pub agent_id: AgentId,
    /// Its goal in the stage, from the stage's `agent_allocation`.
    pub goal: String,
    /// Its completion summary, if it submitted one.
    pub summary: Option<String>,
    /// What its work steps produced, as the runtime recorded them (see
    /// `CompletionUpdate::results`): what a task's summary is checked against, and what the
    /// operator is given when it gives none. The manager reads the summary alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub results: Vec<String>,
}

/// How many agents a notice names one by one; a team or stage of thousands is summed up after
/// that (ask_info lists everything), so the manager's prompt stays bounded.
pub const AGENTS_LISTED: usize = 30;

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Notice {
    /// The stage a notice asks its manager to decide on (a complete stage, a stuck agent's).
    pub fn stage_decided(&self) -> Option<&StageId> {
        match self {
            Notice::StageComplete { stage, .. } => Some(&stage.stage_id),
            Notice::AgentStuck { stage_id, .. } => Some(stage_id),
            Notice::TaskCreated { .. }
            | Notice::NoStageLeft { .. }
            | Notice::TaskEnded { .. }
            | Notice::TaskStalled { .. } => None,
        }
    }

    /// The stages of a notice asking to judge a whole task.
    pub fn judged_stages(&self) -> Option<&[StageReports]> {
        match self {
            Notice::NoStageLeft { stages, .. } => Some(stages),
            _ => None,
        }
    }

    /// What the notice reports, in a few words (a step's title).
    pub fn headline(&self) -> String {
        match self {
            Notice::TaskCreated { task_name, .. } => format!("task \"{task_name}\" was created"),
            Notice::StageComplete { stage, .. } => {
                format!("stage \"{}\" is complete", stage.stage_intention)
            }
            Notice::NoStageLeft { .. } => "the task has no stage left".to_owned(),
            Notice::AgentStuck {
                agent_id,
                stage_intention,
                ..
            } => format!("`{agent_id}` cannot go on in stage \"{stage_intention}\""),
            Notice::TaskEnded {
                task_name, state, ..
            } => format!("task \"{task_name}\" {}", ended(*state)),
            Notice::TaskStalled { task_name, .. } => format!("task \"{task_name}\" stalled"),
        }
    }

    /// The notice as its receiver reads it: the manager, or the person whose task it reports.
    pub fn render(&self) -> String {
        match self {
            Notice::TaskCreated {
                task_id,
                task_name,
                task_intention,
                team,
                unlisted,
            } => render_task_created(task_id, task_name, task_intention, team, *unlisted),
            Notice::StageComplete { task_id, stage } => render_stage_complete(task_id, stage),
            Notice::NoStageLeft {
                task_id,
                task_intention,
                stages,
            } => render_no_stage_left(task_id, task_intention, stages),
            Notice::AgentStuck {
                task_id,
                stage_id,
                stage_intention,
                agent_id,
                goal,
                reason,
            } => format!(
                "[TaskState] Agent `{agent_id}` cannot go on in stage {stage_id} of task \
                 {task_id}: its last step failed and it has nothing left to run there.\n\
                 Reason: {reason}\nIts goal: {}\nStage intention: {stage_intention}\n\n\
                 As the manager, decide: retry the stage with task_manager retry_stage \
                 (task_id {task_id}, stage_id {stage_id}) and a corrected allocation, or end it \
                 with finish_stage if its goal is met anyway.",
                goal.as_deref().unwrap_or("(none)")
            ),
            Notice::TaskEnded {
                task_name,
                state,
                summary,
                why,
                ..
            } => {
                let how = ended(*state);
                let mut text = match (why, state) {
                    (Some(why), ExecutionState::Finished) => {
                        format!("Your task \"{task_name}\" {how}, but {why}.")
                    }
                    (Some(why), _) => format!("Your task \"{task_name}\" {how}: {why}."),
                    (None, _) => format!("Your task \"{task_name}\" {how}."),
                };
                if !summary.trim().is_empty() {
                    text.push_str(&format!("\n{summary}"));
                }
                text
            }
            Notice::TaskStalled {
                task_name,
                task_manager,
                idle_secs,
                ..
            } => format!(
                "Your task \"{task_name}\" has stalled: no agent has had anything to do in it \
                 for {} and it is not over. Write to its manager `{task_manager}` in the task \
                 to get it going, or cancel it.",
                crate::clock::span(*idle_secs)
            ),
        }
    }
}

/// How a task's end reads in a sentence.
fn ended(state: ExecutionState) -> &'static str {
    match state {
        ExecutionState::Finished => "finished",
        ExecutionState::Failed => "failed",
        ExecutionState::Cancelled => "was cancelled",
        _ => "ended",
    }
}

impl StageReports {
    /// The stage as an operator reads it in a task's summary: its state and goal (without its
    /// id), then what each agent's work produced, or its report where the runtime recorded no
    /// results (a person's): the operator asked for the result, which a report may only
    /// describe.
    pub fn for_operator(&self) -> String {
        format!(
            "- stage ({}): {}\n{}",
            self.state,
            self.stage_intention,
            self.entries(true)
        )
    }

    /// What each agent reported, as its manager reads it.
    fn reported(&self) -> String {
        self.entries(false)
    }

    /// One entry an agent, several lines indented inside it: its work's results when
    /// `results` asks for them and they were recorded, else its summary.
    fn entries(&self, results: bool) -> String {
        let mut lines = self
            .reports
            .iter()
            .filter_map(|r| {
                let (said, text) = if results && !r.results.is_empty() {
                    ("produced", r.results.join("\n\n"))
                } else {
                    ("reported", r.summary.clone()?)
                };
                Some(format!(
                    "  - `{}` {said}:\n{}",
                    r.agent_id,
                    indented(&text, 4)
                ))
            })
            .collect::<Vec<_>>()
            .join("\n");
        lines.push_str(&more(self.unlisted, "summaries"));
        lines
    }
}

/// The stages of a task judgement as an operator reads them.
pub fn stages_for_operator(stages: &[StageReports]) -> String {
    stages
        .iter()
        .map(StageReports::for_operator)
        .collect::<Vec<_>>()
        .join("\n")
}

fn render_task_created(
    task_id: &TaskId,
    name: &str,
    intention: &str,
    team: &[Teammate],
    unlisted: usize,
) -> String {
    let mut listed = team
        .iter()
        .map(|m| format!("- `{}` ({})", m.agent_id, m.role))
        .collect::<Vec<_>>()
        .join("\n");
    listed.push_str(&more(unlisted, "agents"));
    format!(
        "[TaskState] Task \"{name}\" was created with you as its manager.\n\
         task_id: {task_id}\nTask intention: {intention}\n\n\
         Next, split it into stages with the task_manager skill (action add_stage, task_id \
         {task_id}), giving each stage an intention and an allocation {{agent_id: that agent's \
         goal}}.\nAgents of the team:\n{listed}"
    )
}

fn render_stage_complete(task_id: &TaskId, stage: &StageReports) -> String {
    let mut lines = stage
        .reports
        .iter()
        .map(|r| {
            format!(
                "- agent `{}`\n  goal: {}\n  completion summary:\n{}",
                r.agent_id,
                r.goal,
                indented(r.summary.as_deref().unwrap_or("(none)"), 4)
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    lines.push_str(&more(stage.unlisted, "agents, each with a summary"));
    let stage_id = &stage.stage_id;
    format!(
        "[TaskState] Every agent of stage {stage_id} of task {task_id} has submitted its \
         completion summary.\nStage intention: {}\n{lines}\n\n\
         As the manager, judge the stage: if it met its goal, end it with task_manager \
         finish_stage (task_id {task_id}, stage_id {stage_id}); if not, correct course, e.g. \
         with task_manager retry_stage and a corrected allocation.",
        stage.stage_intention
    )
}

fn render_no_stage_left(task_id: &TaskId, intention: &str, stages: &[StageReports]) -> String {
    let lines = stages
        .iter()
        .map(|s| {
            format!(
                "- stage {} ({}): {}\n{}",
                s.stage_id,
                s.state,
                s.stage_intention,
                s.reported()
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    format!(
        "[TaskState] Task {task_id} has no stage left to run.\nTask intention: {intention}\n\
         Stages:\n{lines}\n\nAs the manager, judge the whole task: if its goal is reached, end \
         it with task_manager finish_task (task_id {task_id}, a task_summary for the operator \
         that gives the result itself: the text, answer or file name, in full when it is short, \
         such as a poem); if not, add the missing work with add_stage."
    )
}

/// `text` with every line indented by `by` spaces: a summary of several lines (a composed one
/// lists results) stays inside its agent's entry instead of reading as entries of its own.
fn indented(text: &str, by: usize) -> String {
    let pad = " ".repeat(by);
    text.lines()
        .map(|l| format!("{pad}{l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// "- … and N more" when `unlisted` is over zero.
fn more(unlisted: usize, what: &str) -> String {
    if unlisted > 0 {
        format!("\n- … and {unlisted} more {what} (ask_info lists them all)")
    } else {
        String::new()
    }
}
