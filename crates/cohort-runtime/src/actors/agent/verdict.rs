//! A person's verdict on a step that waits for one (`Decide`): a tool call approved runs
//! (stored first), arguments filled in go through the risk gate again, a rejection fails the
//! call; a plan's check queues the plan or has it made again; a manager's stages confirmed
//! are checked with SyncState and then added. A verdict that comes while its step's end is
//! being stored waits for that end.

use super::AgentActor;
use super::commit::Handover;
use super::messages::Decide;
use crate::actors::CheckTaskInstruction;
use actix::prelude::*;
use cohort_core::ids::StepId;
use cohort_core::message::TaskInstruction;
use cohort_core::step::approval::{Decided, Verdict, VerdictError, decide};
use cohort_core::step::plan_check::{PlanCheck, confirmed_stages, finish_stage_check};
use cohort_mcp::McpCall;

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
        if let Some(pending) = self.phase.verdict_slot(&d.step_id) {
            let (tx, rx) = tokio::sync::oneshot::channel();
            let id = d.step_id.clone();
            *pending = Some((d, tx));
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
    pub(super) fn decide_pending(&mut self, (d, tx): PendingVerdict, ctx: &mut Context<Self>) {
        let answer = self.verdict(d, ctx);
        ctx.spawn(answer.map(move |r, _, _| {
            let _ = tx.send(r);
        }));
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
        let check = self.sync.check.send(CheckTaskInstruction {
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
            let still = !act.phase.settling(&d.step_id)
                && matches!(act.confirmed_stages(&d), Some(Ok(ref again)) if *again == add);
            if !still {
                return Err(VerdictError::NotWaiting(d.step_id));
            }
            let edited = matches!(d.verdict, Verdict::ApproveStages { .. });
            finish_stage_check(&mut act.state, &d.step_id, &d.by, edited, &add);
            tracing::info!(agent = %act.state.agent_id, step = %d.step_id, by = %d.by, edited, "a person confirmed a manager's stages");
            act.phase.stop_waiting(&d.step_id);
            let output = cohort_core::message::ExecuteOutput {
                agent_id: Some(act.state.agent_id.clone()),
                task_id: act.state.agent_step.get(&d.step_id).map(|s| s.task_id.clone()),
                task_instruction: Some(add),
                ..Default::default()
            };
            let commit = act.commit(Handover::Output(output, None));
            ctx.spawn(commit.map(|res, act, ctx| act.committed(res, "confirmed stages", ctx)));
            Ok(())
        }))
    }

    /// Carries out a verdict on a step held for a person, or on a plan's check.
    fn decide_now(&mut self, d: Decide, ctx: &mut Context<Self>) -> Result<(), VerdictError> {
        let decided = decide(&mut self.state, &d.step_id, &d.by, d.verdict)?;
        // A held call runs on (or ends); a plan's wait is over.
        self.phase.stop_waiting(&d.step_id);
        tracing::info!(agent = %self.state.agent_id, step = %d.step_id, by = %d.by, "a person decided on a waiting step");
        match decided {
            Decided::Run(call) => self.store_then_call(d.step_id, call, false, ctx),
            Decided::Refill(call) => self.store_then_call(d.step_id, call, true, ctx),
            Decided::Rejected(why) => self.on_tool_result(d.step_id, Err(why), ctx),
            // The check and what it queued are stored before anything of it runs.
            Decided::Planned => self.submit_with_changes(Vec::new(), ctx),
            Decided::Elicited(answer) => self.answered(&d.step_id, answer, ctx),
        }
        Ok(())
    }

    /// Stores a person's verdict, then makes the call: at once (`judge_again` false: it was
    /// approved as it is) or through the risk check (arguments a person filled in). The
    /// verdict is stored first because after a crash a step that was running is never called
    /// again, so a verdict the store lost must not have reached the tool either.
    pub(super) fn store_then_call(
        &mut self,
        id: StepId,
        call: McpCall,
        judge_again: bool,
        ctx: &mut Context<Self>,
    ) {
        let store = self.commit(Handover::Messages(Vec::new()));
        ctx.spawn(store.map(move |res, act, ctx| {
            act.publish();
            // A person may have cancelled the step while the verdict was stored: it ended then.
            let step = act.state.agent_step.get(&id).cloned();
            if step.as_ref().is_some_and(|s| {
                s.execution_state != cohort_core::state::StepExecutionState::Running
            }) {
                return;
            }
            let stored = match res {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            match (stored, act.mcp.clone(), step) {
                (Err(e), _, _) => {
                    let why = act.state.settings.texts.verdict_not_stored(e);
                    act.on_tool_result(id, Err(why), ctx)
                }
                (_, None, _) | (_, _, None) => {
                    let why = act.state.settings.texts.no_mcp_client();
                    act.on_tool_result(id, Err(why), ctx)
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
