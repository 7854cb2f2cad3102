//! What the agent actor waits on: replies, each with a deadline (one timer, armed for the
//! soonest deadline on its step lock and re-armed whenever that changes; when it fires, the
//! waits whose time is up are released by `agent::expire_waits` and the agent goes on), and
//! its call in flight, abandoned when the work it belongs to ends.

use super::AgentActor;
use crate::agent::expire_waits;
use crate::clock::Now;
use actix::prelude::*;
use std::time::Duration;

/// The armed timer: the deadline it fires for (ms since the Unix epoch) and its handle.
pub(super) type WaitTimer = Option<(i64, SpawnHandle)>;

impl AgentActor {
    /// Arms the timer for the soonest wait deadline, unless it is armed for it already.
    pub(super) fn arm_wait_timer(&mut self, ctx: &mut Context<Self>) {
        let next = self.state.step_lock.next_deadline();
        if next == self.wait_timer.as_ref().map(|(at, _)| *at) {
            return;
        }
        if let Some((_, h)) = self.wait_timer.take() {
            ctx.cancel_future(h);
        }
        if let Some(at) = next {
            let delay = at.saturating_sub(Now::current().unix_ms).max(0) as u64;
            let h = ctx.run_later(Duration::from_millis(delay), |act, ctx| {
                act.wait_timer = None;
                act.on_wait_deadline(ctx);
            });
            self.wait_timer = Some((at, h));
        }
    }

    fn on_wait_deadline(&mut self, ctx: &mut Context<Self>) {
        for w in expire_waits(&mut self.state, Now::current().unix_ms) {
            tracing::info!(
                agent = %self.state.agent_id,
                wait = %w.id,
                from = ?w.from,
                "a wait ran out of time"
            );
        }
        if self.state.human_config.is_some() {
            self.publish();
            self.arm_wait_timer(ctx);
        } else {
            self.try_run(ctx);
        }
    }
}

impl AgentActor {
    /// A call in flight for a step whose stage or task ended (finished, or cancelled by a
    /// person) is abandoned: its future is dropped, which stops the LLM request or the tool
    /// call, and the step fails saying why.
    pub(super) fn abandon_ended_call(&mut self, ctx: &mut Context<Self>) {
        let Some((id, _)) = &self.in_flight else {
            return;
        };
        let Some(step) = self.state.agent_step.get(id) else {
            return;
        };
        if self.state.holds(&step.task_id, &step.stage_id) {
            return;
        }
        let is_tool = matches!(step.executor, crate::state::Executor::Tool(_));
        let Some((id, handle)) = self.in_flight.take() else {
            return;
        };
        ctx.cancel_future(handle);
        tracing::info!(agent = %self.state.agent_id, step = %id, "abandoned a call whose work ended");
        // The step no longer belongs to live work, so completing it only records why it ended.
        let why = "abandoned".to_owned();
        let completion = if is_tool {
            crate::agent::complete_tool_step(&mut self.state, &id, Err(why))
        } else {
            match crate::agent::complete_step(&mut self.state, &id, Err(why), Now::current(), false)
            {
                crate::agent::Completion::Done(c) => c,
                // Never asked again: `may_ask_again` is false.
                crate::agent::Completion::AskAgain { .. } => return,
            }
        };
        self.apply_completion(id, completion, ctx);
    }
}
