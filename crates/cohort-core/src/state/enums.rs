//! Lifecycle enums of tasks, stages, agents and steps, with the SPEC's wire names.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Lifecycle of a task or a stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ExecutionState {
    /// Created, not started yet.
    #[default]
    Init,
    /// Under way: a stage is the active one of its task.
    Running,
    /// Ended with its goal judged met.
    Finished,
    /// Ended without reaching its goal (a retried stage, a task closed as failed).
    Failed,
    /// Stopped by a person (`POST /api/task/{id}/cancel`).
    Cancelled,
}

impl ExecutionState {
    /// Finished, failed or cancelled: nothing will change it any more.
    pub fn is_over(self) -> bool {
        matches!(
            self,
            ExecutionState::Finished | ExecutionState::Failed | ExecutionState::Cancelled
        )
    }
}

/// Lifecycle of one step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum StepExecutionState {
    /// Created in the queue, not started yet.
    #[default]
    Init,
    /// Not started yet: waits for the steps it depends on.
    Pending,
    /// Being executed now.
    Running,
    /// A tool call or a plan waits for a person's approval (see `step::approval`).
    WaitingForApproval,
    /// A tool call waits for a person to fill in arguments (see `step::params`).
    WaitingForParam,
    /// Ran to its end; its result is recorded.
    Finished,
    /// Could not be carried out; the failure is recorded.
    Failed,
    /// Set aside: a person cancelled it (see `step::cancel`), or its stage or task ended while
    /// it ran.
    Cancelled,
}

impl StepExecutionState {
    /// Held until a person decides (an approval, a plan check, parameters to fill).
    pub fn waits_for_a_person(self) -> bool {
        matches!(
            self,
            StepExecutionState::WaitingForApproval | StepExecutionState::WaitingForParam
        )
    }

    /// Finished, failed or cancelled: the step will not run again.
    pub fn is_over(self) -> bool {
        matches!(
            self,
            StepExecutionState::Finished
                | StepExecutionState::Failed
                | StepExecutionState::Cancelled
        )
    }
}

/// What an agent is doing right now, across all its tasks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum WorkingState {
    /// No step running and none to run.
    #[default]
    Idle,
    /// Running a step, or has steps to run.
    Working,
    /// Held by its step lock (a reply it waits for) or by a person's decision.
    Waiting,
}

/// An agent's progress inside one stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum StageAgentState {
    /// Allocated in the stage, not working in it yet.
    #[default]
    Idle,
    /// Working towards its goal in the stage.
    Working,
    /// Done: it submitted its completion summary.
    Finished,
    /// Cannot go on in the stage: a step of it failed.
    Failed,
}

macro_rules! display_as_serde {
    ($($t:ty),*) => {$(
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let v = serde_json::to_value(self).map_err(|_| fmt::Error)?;
                f.write_str(v.as_str().unwrap_or_default())
            }
        }
    )*};
}
display_as_serde!(
    ExecutionState,
    StepExecutionState,
    WorkingState,
    StageAgentState
);
