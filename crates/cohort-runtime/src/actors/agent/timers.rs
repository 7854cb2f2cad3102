//! The timer for the agent's replies: each wait on its step lock has a deadline; one timer is
//! armed for the soonest and re-armed whenever that changes. When it fires, the waits whose
//! time is up are released by `step::expire_waits` and the agent goes on.

use super::AgentActor;
use actix::prelude::*;
use cohort_core::clock::Now;
use cohort_core::step::expire_waits;
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
