//! Notices: what a task tells its manager (a task was created, a stage is complete, no stage
//! is left, an agent is stuck), as typed data. The runtime decides on these fields; the text a
//! manager or a person reads is rendered from them ([`Notice::render`]) and never read back.

use crate::ids::{AgentId, StageId, TaskId};
use crate::report::Written;
use crate::state::ExecutionState;
use crate::texts::Texts;
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
        /// Its summary in its manager's words.
        summary: String,
        /// What the runtime wrote of the summary beside those words (the results it added, or
        /// why it or a person ended the task).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        summary_written: Option<Box<crate::report::TaskWritten>>,
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
    /// Its completion summary in its own words, if it submitted one.
    pub summary: Option<String>,
    /// What its work steps produced, as the runtime recorded them (see
    /// `CompletionUpdate::results`): what a task's summary is checked against, and what the
    /// operator is given when it gives none. The manager reads them only where the runtime
    /// added them to the summary (`written`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub results: Vec<String>,
    /// What the runtime added to the summary (see `CompletionUpdate::written`).
    #[serde(default, skip_serializing_if = "Written::is_own")]
    pub written: Written,
}

impl Report {
    /// The report as the manager and the operator read it (see [`Written::render`]), if the
    /// agent gave one.
    pub fn text(&self, t: &Texts) -> Option<String> {
        let summary = self.summary.as_deref()?;
        Some(
            self.written
                .render(&self.agent_id, summary, &self.results, t),
        )
    }
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
    pub fn headline(&self, t: &Texts) -> String {
        match self {
            Notice::TaskCreated { task_name, .. } => t.headline_task_created(task_name),
            Notice::StageComplete { stage, .. } => {
                t.headline_stage_complete(&stage.stage_intention)
            }
            Notice::NoStageLeft { .. } => t.headline_no_stage_left(),
            Notice::AgentStuck {
                agent_id,
                stage_intention,
                ..
            } => t.headline_agent_stuck(agent_id, stage_intention),
            Notice::TaskEnded {
                task_name, state, ..
            } => t.headline_task_ended(task_name, ended(*state, t)),
            Notice::TaskStalled { task_name, .. } => t.headline_task_stalled(task_name),
        }
    }

    /// The notice as its receiver reads it: the manager, or the person whose task it reports.
    pub fn render(&self, t: &Texts) -> String {
        match self {
            Notice::TaskCreated {
                task_id,
                task_name,
                task_intention,
                team,
                unlisted,
            } => {
                let mut listed = lines(team.iter().map(|m| t.teammate_line(&m.agent_id, &m.role)));
                listed.push_str(&more(*unlisted, |n| t.more_agents(n)));
                t.notice_task_created(task_name, task_id, task_intention, listed)
            }
            Notice::StageComplete { task_id, stage } => render_stage_complete(task_id, stage, t),
            Notice::NoStageLeft {
                task_id,
                task_intention,
                stages,
            } => {
                let stages = lines(stages.iter().map(|s| {
                    let head = t.judged_stage(&s.stage_id, s.state, &s.stage_intention);
                    format!("{head}\n{}", s.entries(false, t))
                }));
                t.notice_no_stage_left(task_id, task_intention, stages)
            }
            Notice::AgentStuck {
                task_id,
                stage_id,
                stage_intention,
                agent_id,
                goal,
                reason,
            } => t.notice_agent_stuck(
                agent_id,
                stage_id,
                task_id,
                reason,
                goal.clone().unwrap_or_else(|| t.none()),
                stage_intention,
            ),
            Notice::TaskEnded {
                task_name,
                state,
                summary,
                summary_written,
                why,
                ..
            } => {
                let how = ended(*state, t);
                let mut text = match (why, state) {
                    (Some(why), ExecutionState::Finished) => {
                        t.notice_task_ended_but(task_name, how, why)
                    }
                    (Some(why), _) => t.notice_task_ended_because(task_name, how, why),
                    (None, _) => t.notice_task_ended(task_name, how),
                };
                // A task the runtime or a person ended has its `why` said once, above.
                let written = summary_written.as_deref();
                let rest =
                    crate::report::TaskWritten::beyond_why(summary, written, why.as_deref(), t);
                if !rest.trim().is_empty() {
                    text.push_str(&format!("\n{rest}"));
                }
                text
            }
            Notice::TaskStalled {
                task_name,
                task_manager,
                idle_secs,
                ..
            } => t.notice_task_stalled(task_name, crate::clock::span(*idle_secs, t), task_manager),
        }
    }
}

/// How a task's end reads in a sentence.
fn ended(state: ExecutionState, t: &Texts) -> String {
    match state {
        ExecutionState::Finished => t.ended_finished(),
        ExecutionState::Failed => t.ended_failed(),
        ExecutionState::Cancelled => t.ended_cancelled(),
        _ => t.ended_other(),
    }
}

impl StageReports {
    /// The stage as an operator reads it in a task's summary: its state and goal (without its
    /// id), then what each agent's work produced, or its report where the runtime recorded no
    /// results (a person's): the operator asked for the result, which a report may only
    /// describe.
    pub fn for_operator(&self, t: &Texts) -> String {
        format!(
            "{}\n{}",
            t.operator_stage(self.state, &self.stage_intention),
            self.entries(true, t)
        )
    }

    /// One entry an agent, several lines indented inside it: its work's results when
    /// `results` asks for them and they were recorded, else its summary.
    fn entries(&self, results: bool, t: &Texts) -> String {
        let mut entries = lines(self.reports.iter().filter_map(|r| {
            let (head, text) = if results && !r.results.is_empty() {
                (t.report_produced(&r.agent_id), r.results.join("\n\n"))
            } else {
                (t.report_reported(&r.agent_id), r.text(t)?)
            };
            Some(format!("  {head}\n{}", indented(&text, 4)))
        }));
        entries.push_str(&more(self.unlisted, |n| t.more_summaries(n)));
        entries
    }
}

/// The stages of a task judgement as an operator reads them.
pub fn stages_for_operator(stages: &[StageReports], t: &Texts) -> String {
    lines(stages.iter().map(|s| s.for_operator(t)))
}

fn render_stage_complete(task_id: &TaskId, stage: &StageReports, t: &Texts) -> String {
    let mut reports = lines(stage.reports.iter().map(|r| {
        let summary = r.text(t).unwrap_or_else(|| t.none());
        t.stage_report(&r.agent_id, &r.goal, indented(&summary, 4))
    }));
    reports.push_str(&more(stage.unlisted, |n| t.more_reports(n)));
    t.notice_stage_complete(&stage.stage_id, task_id, &stage.stage_intention, reports)
}

/// `items`, one a line.
fn lines(items: impl Iterator<Item = String>) -> String {
    items.collect::<Vec<_>>().join("\n")
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

/// The line that says a list was cut short (`said` writes it, only when it is needed) on a
/// line of its own, when `unlisted` is over zero.
fn more(unlisted: usize, said: impl Fn(usize) -> String) -> String {
    if unlisted > 0 {
        format!("\n{}", said(unlisted))
    } else {
        String::new()
    }
}
