//! A step's end: handed to SyncState with the agent's changes and how the step closes, stored
//! in one commit (a restart finds either nothing of the step's end, and it runs again, or all
//! of it, and it never runs twice); once stored, the same closing applied here, and what
//! follows: a refused instruction acted on again, history trimmed, a plan held for its check,
//! a verdict that waited decided, the next step run.

use super::commit::{Answer, Handover};
use super::verdict::PendingVerdict;
use super::{AgentActor, LOOSE_HISTORY_KEPT};
use actix::prelude::*;
use cohort_core::ids::{StageRef, StepId};
use cohort_core::step::{FollowUp, Settle, StepCompletion};

impl AgentActor {
    /// Hands a finished step's output to SyncState with the agent's changes and how the step
    /// closes; the agent settles it (it can no longer be cancelled) until SyncState answered.
    pub(super) fn apply_completion(
        &mut self,
        id: StepId,
        completion: StepCompletion,
        ctx: &mut Context<Self>,
    ) {
        let settle = Settle::of(&self.state, &id, completion.failure, completion.added_waits);
        self.phase.settle(id.clone());
        let commit = self.commit(Handover::Output(completion.output, settle.clone()));
        ctx.spawn(commit.map(move |res, act, ctx| act.on_stored(id, settle, res, ctx)));
    }

    /// SyncState answered the hand-over of step `id`'s end.
    fn on_stored(
        &mut self,
        id: StepId,
        settle: Option<Settle>,
        res: Answer,
        ctx: &mut Context<Self>,
    ) {
        match (res, settle) {
            // Stored by SyncState: the same closing is applied here, not published again
            // (SyncState also told whoever waited for a failed step's reply).
            (Ok(answer), Some(settle)) => {
                let verdict = self.phase.settled(&id);
                let refused = answer.err();
                let failure = settle.outcome(refused.as_ref(), &self.state.settings.texts);
                self.state.apply_stored(settle.changes(failure.as_deref()));
                if let (None, Some(why)) = (&settle.failure, &failure)
                    && refused.is_some()
                {
                    let barred = refused
                        .as_ref()
                        .is_some_and(cohort_core::team::SyncError::bars_the_action);
                    match cohort_core::step::act_again_after_refusal(
                        &mut self.state,
                        &id,
                        why,
                        barred,
                    ) {
                        FollowUp::Again => self.publish(),
                        FollowUp::Close(closing) => self.close_in_place(closing, ctx),
                        FollowUp::Nothing => {}
                    }
                }
                self.settled(&id, failure, verdict, ctx);
            }
            (Ok(_), None) => {
                let verdict = self.phase.settled(&id);
                self.settled(&id, Some("step vanished".into()), verdict, ctx)
            }
            // The team is stopping: nothing of the step's end was stored (a restart runs it
            // again), and nothing more is published or run. A verdict waiting for this end
            // gets its answer (dropped: refused).
            (Err(e), _) => {
                if self.phase.settling(&id) {
                    self.phase.stop();
                }
                tracing::warn!(agent = %self.state.agent_id, step = %id, "SyncState is unreachable: {e}");
            }
        }
    }

    /// After a step closed: trims history, lets go of a step whose work ended meanwhile, holds
    /// a plan for its check, decides the `verdict` that waited for the end, and runs the next
    /// step.
    fn settled(
        &mut self,
        id: &StepId,
        failure: Option<String>,
        verdict: Option<PendingVerdict>,
        ctx: &mut Context<Self>,
    ) {
        if let Some(f) = &failure {
            tracing::warn!(agent = %self.state.agent_id, step = %id, "step failed: {f}");
        }
        if let Some(task) = self
            .state
            .agent_step
            .get(id)
            .filter(|s| s.stage_id == StageRef::NoRelative)
            .map(|s| s.task_id.clone())
        {
            self.state.trim_loose_history(&task, LOOSE_HISTORY_KEPT);
        }
        // A step whose stage or task was finished while it ran leaves the queue once done.
        if let Some(s) = self.state.agent_step.get(id)
            && !self.state.holds(&s.task_id, &s.stage_id)
        {
            self.state.remove_step(id);
        }
        if failure.is_none()
            && self
                .state
                .agent_step
                .get(id)
                .is_some_and(cohort_core::step::plan_check::awaits_check)
        {
            self.await_plan_check(id.clone(), ctx);
        }
        if let Some(verdict) = verdict {
            self.decide_pending(verdict, ctx);
        }
        self.try_run(ctx);
    }
}
