//! Tool calls that wait for a person (seed 000's confirm_before_step): whether a call needs
//! approval under the agent's policy, the step waiting with what the approver must see (tool,
//! exact arguments and their hash, risk and reason), and a person's verdict: approve (as
//! written, or with edited arguments) or reject with a reason the agent sees. An approval is
//! bound to the arguments the approver saw: a verdict for another hash is refused.

use super::params::{ParamRequest, fill_params};
use super::plan_check::{EditedStep, PlanCheck, PlanVerdict, decide_plan};
use crate::call::McpCall;
use crate::event::StepUpdate;
use crate::ids::{AgentId, StepId};
use crate::policy::{ToolRisk, args_hash};
use crate::state::{Agent, StepExecutionState, StepResult, StepState};
use crate::texts::Texts;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// What a person is asked to approve.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    /// The MCP server the tool is called on.
    pub server: String,
    /// The tool to call.
    pub tool: String,
    /// The exact arguments the agent wrote, as a JSON object.
    pub arguments: Value,
    /// The hash of `arguments`, which an approval must send back to show what it approves.
    pub args_hash: String,
    /// How risky the call is and why (more than the agent's policy runs unasked).
    #[serde(flatten)]
    pub risk: ToolRisk,
    /// For a HIGH call, the warning a person reads before approving it (seed 000 §11.1:
    /// HIGH is confirmed with a warning): what the call may do, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

/// The warning a HIGH call of `tool` carries (none below HIGH): what it may do, from its risk's
/// reason, and that the team cannot take it back; in `t`'s language.
pub fn high_risk_warning(tool: &str, risk: &ToolRisk, t: &Texts) -> Option<String> {
    (risk.risk == crate::policy::Risk::High).then(|| t.risk_high_warning(tool, &risk.reason))
}

/// A person's verdict on a waiting call or plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Verdict {
    /// Run it: `args_hash` is the hash of the arguments the person saw; `arguments`, when
    /// given, replace them (an edit).
    Approve {
        /// The hash of the arguments the person saw.
        args_hash: String,
        /// Edited arguments to call with instead, as a JSON object.
        arguments: Option<Value>,
    },
    /// Run the plan whose hash is `plan_hash`, or the edited `steps` in its place.
    ApprovePlan {
        /// The hash of the plan the person saw.
        plan_hash: String,
        /// The person's edit of the plan, run in its place.
        steps: Option<Vec<EditedStep>>,
    },
    /// Run the stages whose hash is `plan_hash` as `stages` (an edited `add_stage`).
    ApproveStages {
        /// The hash of the stages the person saw.
        plan_hash: String,
        /// The stages to add, as the person edited them.
        stages: Vec<crate::message::StagePlan>,
    },
    /// The fields a call waiting for parameters asked for, as a JSON object.
    FillParams {
        /// The values, by field name; checked against the request's form.
        values: Value,
    },
    /// Fail the call, or have the plan planned again, for `reason`.
    Reject {
        /// Why, in words the agent can act on (it may not be blank).
        reason: String,
    },
}

/// Why a person's verdict was refused; the step keeps waiting, unchanged. Its text
/// ([`VerdictError::render`], in the team's language) is what the REST API answers.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
pub enum VerdictError {
    /// The step waits for no person: it never did, or its wait already ended (a verdict, a
    /// cancel or its deadline came first).
    NotWaiting(StepId),
    /// The hash sent is not the hash of what waits. The right hash is not told: a verdict
    /// must be given on what the person read, not on a hash copied from an error.
    StaleHash,
    /// The edited arguments (or the ones waiting) are not a JSON object.
    BadArguments,
    /// A rejection came with a blank reason.
    NoReason,
    /// The verdict is for another kind of wait: the step, what it waits for, and what to send
    /// instead (both in English).
    WrongKind(StepId, String, String),
    /// The person's edited plan or stages cannot run (empty, a step the agent may not run,
    /// stages SyncState refuses), with why (in English).
    BadPlan(String),
    /// The values given for a parameter request do not fit its form.
    BadParams(crate::state::AskError),
    /// The verdict could not be checked because the runtime did not answer (the team is
    /// stopping), with why.
    Unavailable(String),
}

impl VerdictError {
    /// Why, in the language of `t`.
    pub fn render(&self, t: &crate::texts::Texts) -> String {
        match self {
            VerdictError::NotWaiting(step) => t.verdict_not_waiting(step),
            VerdictError::StaleHash => t.verdict_stale_hash(),
            VerdictError::BadArguments => t.verdict_bad_arguments(),
            VerdictError::NoReason => t.verdict_no_reason(),
            VerdictError::WrongKind(step, waits_for, instead) => {
                t.verdict_wrong_kind(step, waits_for, instead)
            }
            VerdictError::BadPlan(why) => t.verdict_bad_plan(why),
            VerdictError::BadParams(why) => t.verdict_bad_params(why.render(t)),
            VerdictError::Unavailable(why) => t.verdict_unavailable(why),
        }
    }
}

/// In English, as logs show it.
impl std::fmt::Display for VerdictError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.render(&crate::texts::Texts::english()))
    }
}

impl std::error::Error for VerdictError {}

/// What a verdict leaves to do.
#[derive(Debug, PartialEq)]
pub enum Decided {
    /// Call the tool now (the step is running again).
    Run(McpCall),
    /// The step fails with this reason.
    Rejected(String),
    /// A plan was confirmed, edited or rejected; the agent's queue holds what comes next.
    Planned,
    /// Parameters were filled in: make the call again (its risk is judged again).
    Refill(McpCall),
    /// A server's question was answered: the answer goes back through the call still open.
    Elicited(super::elicitation::ElicitationAnswer),
}

/// The request for `call`, if it needs a person under the agent's policy.
pub fn approval_needed(
    agent: &Agent,
    server: &str,
    call: &McpCall,
    risk: ToolRisk,
) -> Option<ApprovalRequest> {
    let McpCall::Tool { name, arguments } = call else {
        return None;
    };
    if !agent.settings.tool_approval.needs_approval(risk.risk) {
        return None;
    }
    let arguments = Value::Object(arguments.clone());
    Some(ApprovalRequest {
        server: server.to_owned(),
        tool: name.clone(),
        args_hash: args_hash(&arguments),
        arguments,
        warning: high_risk_warning(name, &risk, &agent.settings.texts),
        risk,
    })
}

/// Puts the running step `id` on hold for `req` (state `waiting_for_approval`, the request in
/// its result for everyone to see).
pub fn await_approval(agent: &mut Agent, id: &StepId, req: &ApprovalRequest) {
    agent.update_step(
        id,
        StepUpdate {
            execution_state: Some(StepExecutionState::WaitingForApproval),
            execute_result: Some(Box::new(StepResult::output(
                json!({ "waiting_for_approval": req }),
            ))),
            ..Default::default()
        },
    );
}

/// How much of the arguments an approver's message shows (the whole are in the step and in
/// `GET /api/approvals`; the hash binds the approval to them either way).
const NOTICE_ARGS_CHARS: usize = 2_000;

/// The message that tells an approver about `req`, in the team's language.
pub fn approval_notice(step: &StepState, req: &ApprovalRequest, t: &Texts) -> String {
    let mut args = serde_json::to_string_pretty(&req.arguments).unwrap_or_default();
    let n = args.chars().count();
    if n > NOTICE_ARGS_CHARS {
        args = args.chars().take(NOTICE_ARGS_CHARS).collect();
        args.push('\n');
        args.push_str(&t.approval_args_cut(n - NOTICE_ARGS_CHARS));
    }
    // For people: no hash and no route (the console and GET /api/approvals carry those).
    let warning = req
        .warning
        .as_ref()
        .map(|w| format!("{w}\n"))
        .unwrap_or_default();
    let risk = req.risk.risk.word(t);
    t.approval_notice(
        &step.agent_id,
        &req.tool,
        &req.server,
        &step.step_intention,
        warning,
        risk,
        &req.risk.reason,
        args,
    )
}

/// Applies `by`'s verdict on step `id`.
pub fn decide(
    agent: &mut Agent,
    id: &StepId,
    by: &AgentId,
    verdict: Verdict,
) -> Result<Decided, VerdictError> {
    let step = agent
        .agent_step
        .get(id)
        .filter(|s| s.execution_state.waits_for_a_person())
        .cloned()
        .ok_or_else(|| VerdictError::NotWaiting(id.clone()))?;
    if super::elicitation::ElicitationRequest::of(&step).is_some() {
        return super::elicitation::answer_elicitation(agent, &step, by, verdict)
            .map(Decided::Elicited);
    }
    if let Some(req) = ParamRequest::of(&step) {
        return decide_params(agent, id, &step, &req, by, verdict);
    }
    if PlanCheck::of(&step).is_some() {
        return decide_plan_check(agent, id, &step, by, verdict);
    }
    decide_call(agent, id, &step, by, verdict)
}

/// Applies `by`'s verdict on `step`, which waits for the arguments of a call (`req`).
fn decide_params(
    agent: &mut Agent,
    id: &StepId,
    step: &StepState,
    req: &ParamRequest,
    by: &AgentId,
    verdict: Verdict,
) -> Result<Decided, VerdictError> {
    match verdict {
        Verdict::FillParams { values } => {
            fill_params(agent, step, by, &values).map(Decided::Refill)
        }
        Verdict::Reject { reason } if reason.trim().is_empty() => Err(VerdictError::NoReason),
        Verdict::Reject { reason } => Ok(Decided::Rejected(format!(
            "`{by}` rejected the call to `{}` instead of filling in its arguments: {}",
            req.tool,
            reason.trim()
        ))),
        _ => Err(VerdictError::WrongKind(
            id.clone(),
            "parameters".into(),
            "send them with POST /api/step/{id}/params {values}".into(),
        )),
    }
}

/// Applies `by`'s verdict on `step`, which waits for a person to check its plan.
fn decide_plan_check(
    agent: &mut Agent,
    id: &StepId,
    step: &StepState,
    by: &AgentId,
    verdict: Verdict,
) -> Result<Decided, VerdictError> {
    let verdict = match verdict {
        Verdict::ApprovePlan { plan_hash, steps } => PlanVerdict::Confirm { plan_hash, steps },
        Verdict::Reject { reason } => PlanVerdict::Reject { reason },
        Verdict::Approve { .. } | Verdict::FillParams { .. } | Verdict::ApproveStages { .. } => {
            return Err(VerdictError::WrongKind(
                id.clone(),
                "a plan check".into(),
                "send plan_hash (and steps to edit it), not args_hash".into(),
            ));
        }
    };
    decide_plan(agent, step, by, verdict)?;
    Ok(Decided::Planned)
}

/// Applies `by`'s verdict on `step`, which waits for the approval of a tool call.
fn decide_call(
    agent: &mut Agent,
    id: &StepId,
    step: &StepState,
    by: &AgentId,
    verdict: Verdict,
) -> Result<Decided, VerdictError> {
    let req: ApprovalRequest = step
        .execute_result
        .as_ref()
        .and_then(|r| r.get("waiting_for_approval"))
        .and_then(|r| serde_json::from_value(r.clone()).ok())
        .ok_or_else(|| VerdictError::NotWaiting(id.clone()))?;
    match verdict {
        Verdict::Reject { reason } => {
            let reason = reason.trim();
            if reason.is_empty() {
                return Err(VerdictError::NoReason);
            }
            Ok(Decided::Rejected(format!(
                "`{by}` rejected the call to `{}`: {reason}",
                req.tool
            )))
        }
        Verdict::ApprovePlan { .. }
        | Verdict::FillParams { .. }
        | Verdict::ApproveStages { .. } => Err(VerdictError::WrongKind(
            id.clone(),
            "a tool call's approval".into(),
            "send args_hash (and arguments to edit them), not plan_hash".into(),
        )),
        Verdict::Approve {
            args_hash: seen,
            arguments,
        } => {
            if seen != req.args_hash {
                return Err(VerdictError::StaleHash);
            }
            let (arguments, edited) = approved_arguments(arguments, &req)?;
            let approved = Value::Object(arguments.clone());
            agent.update_step(
                id,
                StepUpdate {
                    execution_state: Some(StepExecutionState::Running),
                    instruction_content: Some(
                        json!({ "tool_name": req.tool, "arguments": approved }),
                    ),
                    execute_result: Some(Box::new(StepResult::output(json!({ "approved": {
                        "by": by, "args_hash": args_hash(&approved), "edited": edited,
                    }})))),
                    ..Default::default()
                },
            );
            Ok(Decided::Run(McpCall::Tool {
                name: req.tool,
                arguments,
            }))
        }
    }
}

/// The arguments an approved call runs with (the edit, else `req`'s), and whether edited.
fn approved_arguments(
    edit: Option<Value>,
    req: &ApprovalRequest,
) -> Result<(serde_json::Map<String, Value>, bool), VerdictError> {
    match edit {
        Some(Value::Object(a)) => Ok((a, true)),
        Some(_) => Err(VerdictError::BadArguments),
        None => match req.arguments.clone() {
            Value::Object(a) => Ok((a, false)),
            _ => Err(VerdictError::BadArguments),
        },
    }
}

/// The key of the time (ms since the Unix epoch) by which a person must decide on a waiting
/// step, in its `execute_result`.
pub const DUE: &str = "decide_by_ms";

/// When a person must have decided on the waiting step `id`: the time it already has, or
/// `now_ms` plus `patience` (then recorded on the step, so a restart keeps it).
pub fn verdict_due(
    agent: &mut Agent,
    id: &StepId,
    now_ms: i64,
    patience: std::time::Duration,
) -> Option<i64> {
    let step = agent.agent_step.get(id)?;
    if let Some(due) = step
        .execute_result
        .as_ref()
        .and_then(|r| r.get(DUE))
        .and_then(Value::as_i64)
    {
        return Some(due);
    }
    let due = now_ms.saturating_add(patience.as_millis() as i64);
    let mut result = step.execute_result.clone().unwrap_or_default();
    result.set(DUE, json!(due));
    agent.update_step(
        id,
        StepUpdate {
            execute_result: Some(Box::new(result)),
            ..Default::default()
        },
    );
    Some(due)
}

/// Steps left waiting for approval (after a restart the agent waits on them again).
pub fn waiting_for_approval(agent: &Agent) -> Option<StepId> {
    agent
        .agent_step
        .steps()
        .iter()
        .find(|s| s.execution_state.waits_for_a_person())
        .map(|s| s.step_id.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::StageRef;
    use crate::policy::{ApprovalPolicy, Risk};
    use crate::state::AgentState;
    use crate::state::Executor;

    fn waiting() -> (Agent, StepId, ApprovalRequest) {
        let mut a = Agent::from(AgentState::new(
            "clerk".into(),
            "C".into(),
            "r".into(),
            "p".into(),
        ));
        a.settings_mut().tool_approval = ApprovalPolicy {
            auto_run_up_to: Some(Risk::Medium),
            ..Default::default()
        };
        let s = StepState::new(
            "t".into(),
            StageRef::NoRelative,
            "clerk".into(),
            Executor::Tool("workspace".into()),
            "write it",
            "",
        );
        let id = s.step_id.clone();
        a.add_steps(vec![s]);
        a.start_next();
        let mut args = serde_json::Map::new();
        args.insert("path".into(), json!("a.txt"));
        let call = McpCall::Tool {
            name: "write_file".into(),
            arguments: args,
        };
        let high = ToolRisk {
            risk: Risk::High,
            reason: "it may overwrite".into(),
        };
        let low = ToolRisk {
            risk: Risk::Low,
            reason: "reads".into(),
        };
        assert_eq!(approval_needed(&a, "workspace", &call, low), None);
        let req = approval_needed(&a, "workspace", &call, high).unwrap();
        await_approval(&mut a, &id, &req);
        (a, id, req)
    }

    #[test]
    fn an_approval_for_the_arguments_seen_runs_the_call() {
        let (mut a, id, req) = waiting();
        let step = a.agent_step.get(&id).unwrap();
        assert_eq!(step.execution_state, StepExecutionState::WaitingForApproval);
        let notice = approval_notice(step, &req, &Texts::english());
        assert!(notice.contains("Risk HIGH: it may overwrite"), "{notice}");
        // HIGH is asked with a warning that names what the call may do; MEDIUM without.
        assert!(
            notice.contains("Careful: `write_file` is HIGH risk: it may overwrite."),
            "{notice}"
        );
        let medium = ToolRisk {
            risk: Risk::Medium,
            reason: "it only adds".into(),
        };
        assert_eq!(
            high_risk_warning("append_file", &medium, &Texts::english()),
            None
        );
        let mut big = req.clone();
        big.arguments = json!({ "content": "x".repeat(10_000) });
        let notice = approval_notice(step, &big, &Texts::english());
        assert!(
            notice.len() < 3_000 && notice.contains("more characters"),
            "{notice}"
        );
        assert_eq!(waiting_for_approval(&a), Some(id.clone()));
        let stale = Verdict::Approve {
            args_hash: "other".into(),
            arguments: None,
        };
        assert!(matches!(
            decide(&mut a, &id, &"op".into(), stale),
            Err(VerdictError::StaleHash)
        ));
        let ok = Verdict::Approve {
            args_hash: req.args_hash.clone(),
            arguments: None,
        };
        let Decided::Run(McpCall::Tool { name, arguments }) =
            decide(&mut a, &id, &"op".into(), ok.clone()).unwrap()
        else {
            panic!("not a run")
        };
        assert_eq!(
            (name.as_str(), &arguments["path"]),
            ("write_file", &json!("a.txt"))
        );
        assert_eq!(
            a.agent_step.get(&id).unwrap().execution_state,
            StepExecutionState::Running
        );
        assert_eq!(
            decide(&mut a, &id, &"op".into(), ok),
            Err(VerdictError::NotWaiting(id)),
            "a verdict counts once"
        );
    }

    #[test]
    fn edited_arguments_replace_the_instruction() {
        let (mut a, id, req) = waiting();
        let edit = Verdict::Approve {
            args_hash: req.args_hash,
            arguments: Some(json!({"path": "b.txt"})),
        };
        decide(&mut a, &id, &"op".into(), edit).unwrap();
        let step = a.agent_step.get(&id).unwrap();
        assert_eq!(
            step.instruction_content.as_ref().unwrap()["arguments"]["path"],
            "b.txt"
        );
        assert_eq!(
            step.execute_result.as_ref().unwrap()["approved"]["edited"],
            true
        );
    }

    #[test]
    fn a_rejection_needs_a_reason_and_says_who_rejected() {
        let (mut a, id, _) = waiting();
        let none = Verdict::Reject { reason: " ".into() };
        assert_eq!(
            decide(&mut a, &id, &"op".into(), none),
            Err(VerdictError::NoReason)
        );
        let no = Verdict::Reject {
            reason: "not that file".into(),
        };
        let Decided::Rejected(why) = decide(&mut a, &id, &"op".into(), no).unwrap() else {
            panic!()
        };
        assert!(why.contains("`op` rejected") && why.contains("not that file"));
    }
}
