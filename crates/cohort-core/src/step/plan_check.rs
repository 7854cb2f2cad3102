//! Plans that wait for a person (seed 001's agentPlanCheck): with `tool_approval.check_plans`,
//! a planning step's plan is not queued when the model gives it; the step waits
//! (`waiting_for_approval`, the plan and its hash in its result) until a person confirms it,
//! edits it (reorders, removes or changes steps; the edit is checked like the model's plan) or
//! rejects it with a comment, which queues a new planning step that sees the comment. A
//! confirmation is bound to the plan the person saw, by its hash.

use super::approval::VerdictError;
use crate::event::StepUpdate;
use crate::ids::{AgentId, StepId};
use crate::message::{StagePlan, TaskInstruction};
use crate::skills::RawPlannedStep;
pub use crate::state::plan_check::{
    KEY, PlanCheck, StagesPlan, awaits_check, checks, checks_stages,
};
use crate::state::{Agent, PlannedStep, Skill, StepExecutionState, StepResult, StepState};
use crate::texts::Texts;
use serde::Deserialize;
use serde::Serialize;
use serde_json::{Value, json};

/// One step of a person's edited plan, in the model's own format.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EditedStep {
    /// What the step is meant to achieve, in a line.
    pub step_intention: String,
    /// `"skill"` (the default) or `"tool"`, under the key `type`.
    #[serde(rename = "type", default = "skill")]
    pub step_type: String,
    /// The skill or MCP server that runs it.
    pub executor: String,
    /// The step's input text for its skill (empty by default).
    #[serde(default)]
    pub text_content: String,
    /// Its id in a graph plan, which `depends_on` of the plan's other steps name.
    #[serde(default)]
    pub id: Option<String>,
    /// The ids of the steps it waits for.
    #[serde(default)]
    pub depends_on: Vec<String>,
    /// Once it finishes, the rest of the plan is planned again.
    #[serde(default)]
    pub replan: bool,
}

fn skill() -> String {
    "skill".to_owned()
}

/// The message that tells a person about the plan waiting on `step`, in the team's language.
pub fn plan_notice(step: &StepState, check: &PlanCheck, t: &Texts) -> String {
    // For people: no hash and no route (the console and GET /api/approvals carry those).
    match &check.stages {
        Some(s) => {
            let list: Vec<String> = s
                .stages
                .iter()
                .enumerate()
                .map(|(i, st)| {
                    let who: Vec<&str> = st.agent_allocation.keys().map(|a| a.as_str()).collect();
                    t.plan_check_stage(i + 1, &st.stage_intention, who.join(", "))
                })
                .collect();
            t.plan_check_stages(&step.agent_id, &step.step_intention, list.join("\n"))
        }
        None => {
            let list: Vec<String> = check
                .steps
                .iter()
                .enumerate()
                .map(|(i, p)| format!("{}. [{}] {}", i + 1, p.executor, p.step_intention))
                .collect();
            t.plan_check_steps(&step.agent_id, &step.step_intention, list.join("\n"))
        }
    }
}

/// A person's check of the plan waiting on `step`: `Ok(Some(steps))` confirms (or, edited,
/// replaces) it, `Ok(None)` rejects it with `reason`. The steps are queued, or a new planning
/// step that sees the comment is queued next; the step itself is finished either way.
pub fn decide_plan(
    agent: &mut Agent,
    step: &StepState,
    by: &AgentId,
    verdict: PlanVerdict,
) -> Result<(), VerdictError> {
    let check =
        PlanCheck::of(step).ok_or_else(|| VerdictError::NotWaiting(step.step_id.clone()))?;
    let id = &step.step_id;
    match verdict {
        PlanVerdict::Confirm { .. } if check.stages.is_some() => {
            return Err(VerdictError::WrongKind(
                id.clone(),
                "a stage plan's check".into(),
                "its confirmation goes through SyncState".into(),
            ));
        }
        PlanVerdict::Confirm {
            plan_hash: seen,
            steps,
        } => {
            if seen != check.plan_hash {
                return Err(VerdictError::StaleHash);
            }
            let (plan, edited) = match steps {
                None => (check.steps, false),
                Some(edit) => (checked_edit(agent, edit)?, true),
            };
            finish(
                agent,
                id,
                json!({ "planned_step": plan, "plan_check": { "by": by, "edited": edited } }),
            );
            crate::skills::queue_plan(agent, step, Skill::Planning, plan);
        }
        PlanVerdict::Reject { reason } => {
            let reason = reason.trim();
            if reason.is_empty() {
                return Err(VerdictError::NoReason);
            }
            finish(
                agent,
                id,
                json!({ "planned_step": [], "plan_check": { "by": by, "rejected": reason } }),
            );
            let t = &agent.settings.texts;
            let proposed: Vec<String> = match &check.stages {
                Some(s) => s
                    .stages
                    .iter()
                    .map(|st| t.plan_rejected_stage(&st.stage_intention))
                    .collect(),
                None => check
                    .steps
                    .iter()
                    .map(|p| format!("- [{}] {}", p.executor, p.step_intention))
                    .collect(),
            };
            // The same kind of step plans again: planning, or a manager's task_manager.
            let again = StepState::new(
                step.task_id.clone(),
                step.stage_id.clone(),
                agent.agent_id.clone(),
                step.executor.clone(),
                step.step_intention.clone(),
                format!(
                    "{}\n\n{}",
                    step.text_content,
                    t.plan_rejected(by, proposed.join("\n"), reason),
                ),
            )
            .with_origin(step.origin.clone());
            agent.add_next_steps(vec![again]);
        }
    }
    Ok(())
}

/// The `add_stage` a person confirmed (as proposed, or with their `stages`) for the stage
/// plan waiting on `step`; nothing changes yet (SyncState checks it first, then
/// [`finish_stage_check`] records it).
pub fn confirmed_stages(
    step: &StepState,
    plan_hash: &str,
    stages: Option<Vec<StagePlan>>,
) -> Result<TaskInstruction, VerdictError> {
    let check =
        PlanCheck::of(step).ok_or_else(|| VerdictError::NotWaiting(step.step_id.clone()))?;
    let proposed = check.stages.ok_or_else(|| {
        VerdictError::WrongKind(
            step.step_id.clone(),
            "a plan of steps".into(),
            "send steps, not stages".into(),
        )
    })?;
    if plan_hash != check.plan_hash {
        return Err(VerdictError::StaleHash);
    }
    let stages = stages.unwrap_or(proposed.stages);
    if stages.is_empty() {
        return Err(VerdictError::BadPlan(
            "an edited stage plan needs at least one stage (reject it to have it planned again)"
                .into(),
        ));
    }
    Ok(TaskInstruction::AddStage {
        task_id: proposed.task_id,
        stages,
    })
}

/// Records on `id` that `by` confirmed `add` (`edited`: not as proposed); the step is done.
pub fn finish_stage_check(
    agent: &mut Agent,
    id: &StepId,
    by: &AgentId,
    edited: bool,
    add: &TaskInstruction,
) {
    finish(
        agent,
        id,
        json!({ "task_instruction": add, "plan_check": { "by": by, "edited": edited } }),
    );
}

/// A person's check of a plan.
#[derive(Clone, Debug, PartialEq)]
pub enum PlanVerdict {
    /// Run the plan whose hash is `plan_hash`, or `steps` in its place.
    Confirm {
        /// The hash of the plan the person saw.
        plan_hash: String,
        /// The person's edit, checked like the model's plan.
        steps: Option<Vec<EditedStep>>,
    },
    /// Plan again, following `reason`.
    Reject {
        /// The person's comment, which the new planning step sees.
        reason: String,
    },
}

/// An edited plan, checked like the model's: every step one the agent may run.
fn checked_edit(agent: &Agent, edit: Vec<EditedStep>) -> Result<Vec<PlannedStep>, VerdictError> {
    let replan: Vec<String> = edit
        .iter()
        .filter(|e| e.replan)
        .filter_map(|e| e.id.clone())
        .collect();
    let raw: Vec<RawPlannedStep> = edit
        .into_iter()
        .map(|e| RawPlannedStep {
            step_intention: e.step_intention,
            step_type: e.step_type,
            executor: e.executor,
            text_content: e.text_content,
            id: e.id,
            depends_on: e.depends_on,
        })
        .collect();
    let asked = raw.len();
    let (ok, rejected) = crate::skills::check_plan(
        raw,
        (agent, &agent.tools),
        Skill::Planning,
        false,
        &mut Vec::new(),
    );
    if asked == 0 {
        return Err(VerdictError::BadPlan(
            "an edited plan needs at least one step (reject the plan to have it planned again)"
                .into(),
        ));
    }
    if !rejected.is_empty() {
        // Said to the person who edited the plan, through the REST API: in English.
        let rejected: Vec<String> = rejected.iter().map(ToString::to_string).collect();
        return Err(VerdictError::BadPlan(rejected.join("; ")));
    }
    crate::skills::plan_graph::arrange(ok, &replan)
        .map_err(|e| VerdictError::BadPlan(e.to_string()))
}

fn finish(agent: &mut Agent, id: &StepId, result: Value) {
    agent.update_step(
        id,
        StepUpdate {
            execution_state: Some(StepExecutionState::Finished),
            execute_result: Some(Box::new(StepResult::output(result))),
            ..Default::default()
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{StageId, StageRef};
    use crate::state::AgentState;
    use crate::state::Executor;

    fn waiting_plan() -> (Agent, StepState) {
        let mut a = Agent::from(AgentState::new(
            "w".into(),
            "W".into(),
            "writer".into(),
            "".into(),
        ));
        a.skills = vec![Skill::Planning, Skill::Think, Skill::Reflection];
        a.settings_mut().tool_approval.check_plans = true;
        let s = StepState::new(
            "t".into(),
            StageRef::Stage(StageId::from("s")),
            "w".into(),
            Executor::Skill(Skill::Planning),
            "Plan my work",
            "Write a haiku.",
        );
        let id = s.step_id.clone();
        a.add_steps(vec![s]);
        a.start_next();
        let check = PlanCheck::new(vec![
            PlannedStep::new(Executor::Skill(Skill::Think), "draft", "write it"),
            PlannedStep::new(Executor::Skill(Skill::Reflection), "check", "is it 5-7-5?"),
        ]);
        a.update_step(
            &id,
            StepUpdate {
                execution_state: Some(StepExecutionState::WaitingForApproval),
                execute_result: Some(Box::new(StepResult::output(json!({ KEY: check })))),
                ..Default::default()
            },
        );
        let step = a.agent_step.get(&id).unwrap().clone();
        assert!(awaits_check(&step));
        (a, step)
    }

    fn todo(a: &Agent) -> Vec<(String, String)> {
        a.agent_step
            .todo()
            .map(|id| {
                let s = a.agent_step.get(id).unwrap();
                (s.executor.to_string(), s.step_intention.clone())
            })
            .collect()
    }

    #[test]
    fn a_confirmed_plan_is_queued_as_seen_and_a_stale_hash_is_refused() {
        let (mut a, step) = waiting_plan();
        let hash = PlanCheck::of(&step).unwrap().plan_hash;
        let stale = PlanVerdict::Confirm {
            plan_hash: "0".repeat(64),
            steps: None,
        };
        assert!(matches!(
            decide_plan(&mut a, &step, &"op".into(), stale),
            Err(VerdictError::StaleHash)
        ));
        assert!(todo(&a).is_empty());
        let ok = PlanVerdict::Confirm {
            plan_hash: hash,
            steps: None,
        };
        decide_plan(&mut a, &step, &"op".into(), ok).unwrap();
        assert_eq!(
            todo(&a),
            [
                ("think".into(), "draft".into()),
                ("reflection".into(), "check".into())
            ]
        );
        let done = a.agent_step.get(&step.step_id).unwrap();
        assert_eq!(done.execution_state, StepExecutionState::Finished);
        assert_eq!(
            done.execute_result.as_ref().unwrap()["plan_check"]["edited"],
            false
        );
    }

    #[test]
    fn an_edited_plan_is_checked_like_the_models_and_replaces_it() {
        let (mut a, step) = waiting_plan();
        let hash = PlanCheck::of(&step).unwrap().plan_hash;
        let edit = |v: Value| PlanVerdict::Confirm {
            plan_hash: hash.clone(),
            steps: Some(serde_json::from_value(v).unwrap()),
        };
        let bad = edit(json!([{"step_intention": "hire", "executor": "agent_manager"}]));
        let why = decide_plan(&mut a, &step, &"op".into(), bad)
            .unwrap_err()
            .to_string();
        assert!(why.contains("no `agent_manager` skill"), "{why}");
        let empty = decide_plan(&mut a, &step, &"op".into(), edit(json!([]))).unwrap_err();
        assert!(matches!(empty, VerdictError::BadPlan(_)));
        // Reordered, one removed, one changed.
        let good = edit(json!([
            {"step_intention": "check first", "executor": "reflection", "text_content": "rules?"},
        ]));
        decide_plan(&mut a, &step, &"op".into(), good).unwrap();
        assert_eq!(todo(&a), [("reflection".into(), "check first".into())]);
        let done = a.agent_step.get(&step.step_id).unwrap();
        assert_eq!(
            done.execute_result.as_ref().unwrap()["plan_check"]["edited"],
            true
        );
    }

    #[test]
    fn a_rejected_plan_is_planned_again_with_the_comment() {
        let (mut a, step) = waiting_plan();
        let no = PlanVerdict::Reject { reason: " ".into() };
        assert_eq!(
            decide_plan(&mut a, &step, &"op".into(), no).unwrap_err(),
            VerdictError::NoReason
        );
        let no = PlanVerdict::Reject {
            reason: "Check the syllables first.".into(),
        };
        decide_plan(&mut a, &step, &"op".into(), no).unwrap();
        let next: Vec<&StepState> = a
            .agent_step
            .todo()
            .map(|id| a.agent_step.get(id).unwrap())
            .collect();
        assert_eq!(next.len(), 1);
        assert_eq!(next[0].executor, Executor::Skill(Skill::Planning));
        assert!(
            next[0]
                .text_content
                .starts_with("Write a haiku.\n\nA person (`op`) rejected")
        );
        assert!(next[0].text_content.contains("- [think] draft"));
        assert!(
            next[0]
                .text_content
                .contains("Their comment: Check the syllables first.")
        );
        assert_eq!(
            next[0].origin, step.origin,
            "the plan is made again for the same reason"
        );
    }
}
