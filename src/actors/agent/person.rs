//! The agent actor under a person's control: steps that wait for a person (a tool call's
//! approval, put on hold by `tool_gate.rs`; a plan's check; a call's missing arguments), each
//! with a deadline, and a person's verdict on them (`Decide`) that runs the call, queues the
//! plan or fails the step with their reason. Pause: a paused agent starts no step until
//! resumed (`SetPaused`).

use super::AgentActor;
use crate::actors::CheckTaskInstruction;
use crate::agent::approval::{Decided, Verdict, VerdictError, decide, verdict_due};
use crate::agent::cancel::fail_waiting_step;
use crate::agent::params::{await_params, param_request, params_notice};
use crate::agent::plan_check::{PlanCheck, confirmed_stages, finish_stage_check, plan_notice};
use crate::ids::{AgentId, StepId};
use crate::mcp::McpCall;
use crate::message::Message;
use crate::message::TaskInstruction;
use crate::state::{Executor, StepState};
use actix::prelude::*;

/// A person's verdict on a step waiting for approval.
#[derive(Message)]
#[rtype(result = "Result<(), VerdictError>")]
pub struct Decide {
    pub step_id: StepId,
    pub by: AgentId,
    pub verdict: Verdict,
}

impl AgentActor {
    /// While a step waits for approval the agent runs nothing else; if the step's stage or
    /// task ended meanwhile, or the step left, the wait is over.
    pub(super) fn check_awaiting_approval(&mut self, ctx: &mut Context<Self>) {
        let Some(id) = self.awaiting_approval.clone() else {
            return;
        };
        let step = self.state.agent_step.get(&id);
        match step {
            Some(s) if s.execution_state.waits_for_a_person() => {
                if !self.state.holds(&s.task_id, &s.stage_id) {
                    self.awaiting_approval = None;
                    let why = "its stage or task ended before a person decided on it";
                    self.fail_waiting(id, why.into(), ctx);
                }
            }
            _ => {
                self.awaiting_approval = None;
                self.busy = false;
            }
        }
    }
}

impl AgentActor {
    /// A planning step whose plan waits for a person's check: the agent runs nothing else
    /// until they decide, and the team's operators are told.
    pub(super) fn await_plan_check(&mut self, id: StepId, ctx: &mut Context<Self>) {
        let Some(step) = self.state.agent_step.get(&id).cloned() else {
            return;
        };
        let Some(check) = PlanCheck::of(&step) else {
            return;
        };
        if self.approvers.is_empty() {
            let why = "the plan waits for a person's check (tool_approval.check_plans), but the \
                       team has no operator to ask";
            return self.fail_waiting(id, why.into(), ctx);
        }
        tracing::info!(agent = %self.state.agent_id, step = %id, "a plan waits for a person's check");
        self.hold_for_a_person(id, ctx);
        self.tell_approvers(&step, plan_notice(&step, &check), ctx);
    }

    /// A tool call refused for its arguments: with `tool_approval.ask_for_params` and an
    /// operator to ask, the step waits for them to fill in the fields the tool's schema and the
    /// refusal name; otherwise it fails with the refusal (its decision step follows).
    pub(super) fn ask_for_params(
        &mut self,
        id: StepId,
        server: String,
        call: McpCall,
        reason: String,
        ctx: &mut Context<Self>,
    ) {
        let refused = |tool: &str| {
            format!("invalid arguments for tool `{tool}` of MCP server `{server}`: {reason}")
        };
        let McpCall::Tool { name, arguments } = &call else {
            return self.on_tool_result(id, Err(reason), ctx);
        };
        let schema = self
            .mcp
            .as_ref()
            .and_then(|m| m.cached_description(&server))
            .and_then(|d| {
                d["tools"]
                    .as_array()?
                    .iter()
                    .find(|t| t["name"] == name.as_str())
                    .map(|t| t["input_schema"].clone())
            });
        let step = self.state.agent_step.get(&id).cloned();
        let request = schema
            .filter(|_| self.state.tool_approval.ask_for_params && !self.approvers.is_empty())
            .and_then(|schema| param_request(&server, name, arguments, &schema, &reason));
        let (Some(req), Some(step)) = (request, step) else {
            return self.on_tool_result(id, Err(refused(name)), ctx);
        };
        if !self.state.holds(&step.task_id, &step.stage_id) {
            return self.on_tool_result(id, Err(refused(name)), ctx);
        }
        tracing::info!(agent = %self.state.agent_id, step = %id, tool = %req.tool, "a tool call waits for a person to fill in its arguments");
        await_params(&mut self.state, &id, &req);
        self.hold_for_a_person(id, ctx);
        self.tell_approvers(&step, params_notice(&step, &req), ctx);
    }

    /// Tells the team's operators what `step` waits for, stored with the agent's changes.
    pub(super) fn tell_approvers(
        &mut self,
        step: &StepState,
        text: String,
        ctx: &mut Context<Self>,
    ) {
        let notice = Message::notice(
            step.task_id.clone(),
            self.state.agent_id.clone(),
            self.approvers.to_vec(),
            step.stage_id.clone(),
            text,
        );
        self.submit_with_changes(vec![notice], ctx);
    }

    /// The step `id` now waits for a person's verdict: the agent runs nothing else until it
    /// comes or its deadline (`waits.human_secs`) passes, when the step ends as not decided.
    pub(super) fn hold_for_a_person(&mut self, id: StepId, ctx: &mut Context<Self>) {
        let now = crate::clock::Now::current().unix_ms;
        let patience = self.state.wait_patience.human;
        self.awaiting_approval = Some(id.clone());
        let Some(due) = verdict_due(&mut self.state, &id, now, patience) else {
            return;
        };
        let delay = std::time::Duration::from_millis(due.saturating_sub(now).max(0) as u64);
        ctx.run_later(delay, move |act, ctx| {
            // This wait's own deadline: a later wait of the same step has a deadline of its own.
            let still = act.awaiting_approval.as_ref() == Some(&id)
                && act.state.agent_step.get(&id).is_some_and(|s| {
                    s.execution_state.waits_for_a_person()
                        && s.execute_result
                            .as_ref()
                            .and_then(|r| r.get(crate::agent::approval::DUE))
                            .and_then(serde_json::Value::as_i64)
                            == Some(due)
                });
            if still {
                act.awaiting_approval = None;
                let why = format!(
                    "no operator decided within {} s (waits.human_secs); the step was not run",
                    patience.as_secs()
                );
                tracing::info!(agent = %act.state.agent_id, step = %id, "a wait for a person's verdict ran out of time");
                act.fail_waiting(id, why, ctx);
            }
        });
    }

    /// Ends a step that waited for a person and no longer can: a tool call fails as a tool
    /// result (its decision step follows), a plan fails as a stopped step.
    pub(super) fn fail_waiting(&mut self, id: StepId, why: String, ctx: &mut Context<Self>) {
        let tool = self
            .state
            .agent_step
            .get(&id)
            .is_some_and(|s| matches!(s.executor, Executor::Tool(_)));
        let stages = self
            .state
            .agent_step
            .get(&id)
            .and_then(PlanCheck::of)
            .is_some_and(|c| c.stages.is_some());
        if tool {
            self.on_tool_result(id, Err(why), ctx);
        } else if stages
            && !self.approvers.is_empty()
            && self
                .state
                .agent_step
                .get(&id)
                .is_some_and(|s| self.state.holds(&s.task_id, &s.stage_id))
        {
            // A manager's stages nobody checked: no stage work recovers a task without stages,
            // so the manager plans them again (and asks again), as after a rejection.
            let step = self.state.agent_step.get(&id).cloned();
            if let Some(step) = step {
                let verdict = crate::agent::plan_check::PlanVerdict::Reject { reason: why };
                let by = AgentId::from(crate::message::TASK_STATE_SENDER);
                if let Err(e) =
                    crate::agent::plan_check::decide_plan(&mut self.state, &step, &by, verdict)
                {
                    tracing::warn!(agent = %self.state.agent_id, step = %id, "{e}");
                }
            }
            if self.awaiting_approval.as_ref() == Some(&id) {
                self.awaiting_approval = None;
            }
            self.submit_with_changes(Vec::new(), ctx);
        } else {
            self.busy = true;
            let completion = fail_waiting_step(&mut self.state, &id, why);
            self.apply_completion(id, completion, ctx);
        }
    }
}

/// An operator pauses (`true`) or resumes the agent. A paused agent finishes the step it
/// runs, keeps taking messages, and starts no step until resumed.
#[derive(Message)]
#[rtype(result = "()")]
pub struct SetPaused(pub bool);

impl Handler<SetPaused> for AgentActor {
    type Result = ();
    fn handle(&mut self, SetPaused(paused): SetPaused, ctx: &mut Context<Self>) {
        if self.state.set_paused(paused) {
            tracing::info!(agent = %self.state.agent_id, paused, "an operator paused or resumed the agent");
        }
        self.try_run(ctx);
    }
}

impl AgentActor {
    /// Stores a person's verdict, then makes the call: at once (`judge_again` false: it was
    /// approved as it is) or through the risk check (arguments a person filled in). The
    /// verdict is stored first because after a crash a step that was running is never called
    /// again, so a verdict the store lost must not have reached the tool either.
    fn store_then_call(
        &mut self,
        id: StepId,
        call: McpCall,
        judge_again: bool,
        ctx: &mut Context<Self>,
    ) {
        let held = self.hand_over();
        let store = self.sync.send(crate::actors::SubmitMessages {
            messages: Vec::new(),
            held,
        });
        ctx.spawn(store.into_actor(self).map(move |res, act, ctx| {
            act.holding -= 1;
            act.publish();
            // A person may have cancelled the step while the verdict was stored: it ended then.
            let step = act.state.agent_step.get(&id).cloned();
            if step
                .as_ref()
                .is_some_and(|s| s.execution_state != crate::state::StepExecutionState::Running)
            {
                return;
            }
            let stored = match res {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            match (stored, act.mcp.clone(), step) {
                (Err(e), _, _) => act.on_tool_result(
                    id,
                    Err(format!("the verdict could not be stored: {e}")),
                    ctx,
                ),
                (_, None, _) | (_, _, None) => {
                    act.on_tool_result(id, Err("the team has no MCP client".into()), ctx)
                }
                (Ok(()), Some(client), Some(step)) => {
                    let server = step.executor.name().to_owned();
                    if judge_again {
                        act.gate_tool(step, server, call, client, ctx);
                    } else {
                        act.call_tool(id, server, call, client, ctx);
                    }
                }
            }
        }));
    }
}

/// A verdict that came while its step was being settled, and where its answer goes.
pub(super) type PendingVerdict = (
    Decide,
    tokio::sync::oneshot::Sender<Result<(), VerdictError>>,
);

impl Handler<Decide> for AgentActor {
    type Result = ResponseActFuture<Self, Result<(), VerdictError>>;
    fn handle(&mut self, d: Decide, ctx: &mut Context<Self>) -> Self::Result {
        // A plan's wait is published with its step's end, a moment before this agent takes
        // SyncState's answer: a verdict in that moment waits for it.
        if self.settling.as_ref() == Some(&d.step_id) && self.pending_verdict.is_none() {
            let (tx, rx) = tokio::sync::oneshot::channel();
            let id = d.step_id.clone();
            self.pending_verdict = Some((d, tx));
            return Box::pin(
                async move { rx.await.unwrap_or(Err(VerdictError::NotWaiting(id))) }
                    .into_actor(self),
            );
        }
        self.verdict(d, ctx)
    }
}

impl AgentActor {
    /// Decides a verdict that waited for its step to be settled.
    pub(super) fn take_pending_verdict(&mut self, ctx: &mut Context<Self>) {
        if let Some((d, tx)) = self.pending_verdict.take() {
            let answer = self.verdict(d, ctx);
            ctx.spawn(answer.map(move |r, _, _| {
                let _ = tx.send(r);
            }));
        }
    }

    fn verdict(
        &mut self,
        d: Decide,
        ctx: &mut Context<Self>,
    ) -> ResponseActFuture<Self, Result<(), VerdictError>> {
        match self.confirmed_stages(&d) {
            Some(Ok(add)) => self.apply_confirmed_stages(d, add),
            Some(Err(e)) => Box::pin(fut::ready(Err(e))),
            None => Box::pin(fut::ready(self.decide_now(d, ctx))),
        }
    }
}

impl AgentActor {
    /// A person's confirmation of a manager's stages, when `d` is one: the `add_stage` to
    /// check with SyncState (nothing changed yet).
    fn confirmed_stages(&self, d: &Decide) -> Option<Result<TaskInstruction, VerdictError>> {
        let step = self
            .state
            .agent_step
            .get(&d.step_id)
            .filter(|s| s.execution_state.waits_for_a_person())?;
        PlanCheck::of(step)?.stages?;
        match &d.verdict {
            Verdict::ApprovePlan {
                plan_hash,
                steps: None,
            } => Some(confirmed_stages(step, plan_hash, None)),
            Verdict::ApproveStages { plan_hash, stages } => {
                Some(confirmed_stages(step, plan_hash, Some(stages.clone())))
            }
            _ => None,
        }
    }

    /// Checks `add` with SyncState; if it may run, the step records the person's check and
    /// `add` goes to SyncState in the same commit. A refusal (an agent the team lacks, a task
    /// over) is the person's answer (422), and the stages keep waiting.
    fn apply_confirmed_stages(
        &mut self,
        d: Decide,
        add: TaskInstruction,
    ) -> ResponseActFuture<Self, Result<(), VerdictError>> {
        let check = self.sync.send(CheckTaskInstruction {
            agent: self.state.agent_id.clone(),
            instruction: add.clone(),
        });
        Box::pin(check.into_actor(self).map(move |res, act, ctx| {
            match res {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(VerdictError::BadPlan(e.to_string())),
                Err(e) => return Err(VerdictError::Unavailable(e.to_string())),
            }
            // A deadline, a cancel or another verdict may have ended the wait meanwhile (their
            // end replaces the plan in the step's result, or is being stored).
            let still = act.settling.as_ref() != Some(&d.step_id)
                && matches!(act.confirmed_stages(&d), Some(Ok(ref again)) if *again == add);
            if !still {
                return Err(VerdictError::NotWaiting(d.step_id));
            }
            let edited = matches!(d.verdict, Verdict::ApproveStages { .. });
            finish_stage_check(&mut act.state, &d.step_id, &d.by, edited, &add);
            tracing::info!(agent = %act.state.agent_id, step = %d.step_id, by = %d.by, edited, "a person confirmed a manager's stages");
            if act.awaiting_approval.as_ref() == Some(&d.step_id) {
                act.awaiting_approval = None;
            }
            let output = crate::message::ExecuteOutput {
                agent_id: Some(act.state.agent_id.clone()),
                task_id: act.state.agent_step.get(&d.step_id).map(|s| s.task_id.clone()),
                task_instruction: Some(add),
                ..Default::default()
            };
            let held = act.hand_over();
            let apply = act.sync.send(crate::actors::ApplyOutput {
                output,
                held,
                settle: None,
            });
            ctx.spawn(apply.into_actor(act).map(|res, act, ctx| {
                act.holding -= 1;
                if let Ok(Err(e)) = res {
                    tracing::warn!(agent = %act.state.agent_id, "SyncState refused confirmed stages: {e}");
                }
                act.try_run(ctx);
            }));
            Ok(())
        }))
    }

    fn decide_now(&mut self, d: Decide, ctx: &mut Context<Self>) -> Result<(), VerdictError> {
        let decided = decide(&mut self.state, &d.step_id, &d.by, d.verdict)?;
        self.awaiting_approval = None;
        tracing::info!(agent = %self.state.agent_id, step = %d.step_id, by = %d.by, "a person decided on a waiting step");
        match decided {
            Decided::Run(call) => self.store_then_call(d.step_id, call, false, ctx),
            Decided::Refill(call) => self.store_then_call(d.step_id, call, true, ctx),
            Decided::Rejected(why) => self.on_tool_result(d.step_id, Err(why), ctx),
            // The check and what it queued are stored before anything of it runs.
            Decided::Planned => {
                self.busy = false;
                self.submit_with_changes(Vec::new(), ctx)
            }
        }
        Ok(())
    }
}
