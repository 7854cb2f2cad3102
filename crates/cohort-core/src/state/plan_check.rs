//! PlanCheck: a plan waiting for a person's check (seed 001's agentPlanCheck), as the step that
//! planned it records it: an agent's steps or a manager's stages, bound to their hash. What a
//! person's verdict does with it is `step::plan_check`.

use super::{Agent, PlannedStep, Skill, StepExecutionState, StepState};
use crate::ids::TaskId;
use crate::message::StagePlan;
use crate::policy::args_hash;
use serde::{Deserialize, Serialize};

/// The key of a waiting plan in its step's `execute_result`.
pub const KEY: &str = "waiting_for_plan_check";

/// A plan waiting for a person: an agent's steps, or a manager's stages for a task.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlanCheck {
    /// The steps an agent's plan would add (empty for a manager's stages).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<PlannedStep>,
    /// The stages an `add_stage` would add (`tool_approval.check_stages`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stages: Option<StagesPlan>,
    /// The hash of the plan, which a person's verdict names so it applies to this exact plan.
    pub plan_hash: String,
}

/// The stages a manager's `add_stage` proposes for a task.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StagesPlan {
    /// The task the stages are for.
    pub task_id: TaskId,
    /// The proposed stages, in order.
    pub stages: Vec<StagePlan>,
}

impl PlanCheck {
    /// An agent's planned steps, waiting.
    pub fn new(steps: Vec<PlannedStep>) -> Self {
        let plan_hash = plan_hash(&steps);
        PlanCheck {
            steps,
            stages: None,
            plan_hash,
        }
    }

    /// A manager's stages for `task`, waiting.
    pub fn of_stages(task_id: TaskId, stages: Vec<StagePlan>) -> Self {
        let plan_hash = args_hash(&serde_json::to_value(&stages).unwrap_or_default());
        PlanCheck {
            steps: Vec::new(),
            stages: Some(StagesPlan { task_id, stages }),
            plan_hash,
        }
    }

    /// The plan waiting on `step`, if one does.
    pub fn of(step: &StepState) -> Option<PlanCheck> {
        let v = step.execute_result.as_ref()?.get(KEY)?;
        serde_json::from_value(v.clone()).ok()
    }
}

fn plan_hash(steps: &[PlannedStep]) -> String {
    args_hash(&serde_json::to_value(steps).unwrap_or_default())
}

/// Whether `agent` shows the plans of `planner` steps to a person first.
pub fn checks(agent: &Agent, planner: Skill) -> bool {
    planner == Skill::Planning && agent.settings.tool_approval.check_plans
}

/// Whether `step` waits for a person to check its plan.
pub fn awaits_check(step: &StepState) -> bool {
    step.execution_state == StepExecutionState::WaitingForApproval
        && step
            .execute_result
            .as_ref()
            .is_some_and(|r| r.get(KEY).is_some())
}

/// Whether `agent` shows its `add_stage` stages to a person first.
pub fn checks_stages(agent: &Agent) -> bool {
    agent.settings.tool_approval.check_stages
}
