//! HistorySummary: a stage's older history folded into a few sentences by the agent's own
//! model (seed 004), kept on the agent (see `step::history_summary` for when it is written).

use crate::ids::{StageRef, StepId, TaskId};
use serde::{Deserialize, Serialize};

/// A stage's older history in a few sentences, covering its executed steps up to `upto`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistorySummary {
    /// The task of the summed-up stage.
    pub task_id: TaskId,
    /// The stage whose history it covers, or `no_relative`.
    pub stage_id: StageRef,
    /// The last executed step it covers.
    pub upto: StepId,
    /// The summary, as the agent's model wrote it.
    pub text: String,
}
