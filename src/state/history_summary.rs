//! HistorySummary: a stage's older history folded into a few sentences by the agent's own
//! model (seed 004), kept on the agent (see `agent::history_summary` for when it is written).

use crate::ids::{StageRef, StepId, TaskId};
use serde::{Deserialize, Serialize};

/// A stage's older history in a few sentences, covering its executed steps up to `upto`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistorySummary {
    pub task_id: TaskId,
    pub stage_id: StageRef,
    pub upto: StepId,
    pub text: String,
}
