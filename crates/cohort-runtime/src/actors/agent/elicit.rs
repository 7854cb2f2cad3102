//! A server's question during one of the agent's tool calls (MCP elicitation): the call goes
//! to the team's client with a [`StepAsker`], so a question the server asks during it comes
//! back to this agent ([`ServerAsks`]); the step waits (`waiting_for_param`) while its call
//! stays open, the team's operators are told, and a person's answer (`POST
//! /api/step/{id}/params`, or `/reject` to decline) goes back to the server through the call.
//! A question nobody can take up is declined; one nobody answers in time (`waits.human_secs`)
//! is cancelled, and the step runs on either way.

use super::AgentActor;
use actix::prelude::*;
use cohort_core::ids::StepId;
use cohort_core::state::StepExecutionState;
use cohort_core::step::elicitation::{
    ElicitationAnswer, await_elicitation, elicitation_notice, elicitation_request, resume_call,
};
use cohort_core::step::tool_call_for;
use cohort_mcp::McpCall;
use cohort_mcp::elicit::{Elicitor, Question};
use futures::future::BoxFuture;

/// Where a question during step `step`'s call goes: its agent.
pub(super) struct StepAsker {
    pub(super) agent: Addr<AgentActor>,
    pub(super) step: StepId,
}

impl Elicitor for StepAsker {
    fn ask(&self, question: Question) -> BoxFuture<'static, ElicitationAnswer> {
        let asked = self.agent.send(ServerAsks {
            step: self.step.clone(),
            question,
        });
        // An agent that stopped meanwhile answers nobody.
        Box::pin(async move { asked.await.unwrap_or(ElicitationAnswer::Cancel) })
    }
}

/// A server asks `question` during step `step`'s call; answered with the person's answer.
#[derive(Message)]
#[rtype(result = "ElicitationAnswer")]
pub(super) struct ServerAsks {
    step: StepId,
    question: Question,
}

impl Handler<ServerAsks> for AgentActor {
    type Result = ResponseFuture<ElicitationAnswer>;

    fn handle(&mut self, m: ServerAsks, ctx: &mut Context<Self>) -> Self::Result {
        match self.put_question(m, ctx) {
            Ok(answer) => {
                Box::pin(async move { answer.await.unwrap_or(ElicitationAnswer::Cancel) })
            }
            Err(now) => Box::pin(std::future::ready(now)),
        }
    }
}

impl AgentActor {
    /// Puts the server's question to the team's operators, the step waiting; where the answer
    /// will come, or the answer at once when nobody can be asked.
    fn put_question(
        &mut self,
        ServerAsks { step: id, question }: ServerAsks,
        ctx: &mut Context<Self>,
    ) -> Result<tokio::sync::oneshot::Receiver<ElicitationAnswer>, ElicitationAnswer> {
        let step = self.state.agent_step.get(&id).cloned();
        let Some(step) = step.filter(|s| s.execution_state == StepExecutionState::Running) else {
            return Err(ElicitationAnswer::Cancel);
        };
        if !self.state.holds(&step.task_id, &step.stage_id) {
            return Err(ElicitationAnswer::Cancel);
        }
        let declined = |why: &str| {
            tracing::info!(agent = %self.state.agent_id, step = %id, server = %question.server, "a server's question was declined: {why}");
            ElicitationAnswer::Decline
        };
        if self.approvers.is_empty() {
            return Err(declined("the team has no operator to ask"));
        }
        let tool = match tool_call_for(&self.state, &step, &question.server) {
            Ok(McpCall::Tool { name, .. }) => name,
            _ => String::new(),
        };
        let req = elicitation_request(&question.server, &tool, &question.message, &question.schema)
            .map_err(|why| declined(&why))?;
        let (to, answer) = tokio::sync::oneshot::channel();
        let Some(no) = self.phase.ask(&id, to) else {
            return Err(declined("a question of its call waits already"));
        };
        tracing::info!(agent = %self.state.agent_id, step = %id, server = %req.server, "a server's question waits for a person");
        await_elicitation(&mut self.state, &id, &req);
        let notice = elicitation_notice(&step, &req, &self.state.settings.texts);
        self.tell_approvers(&step, notice, ctx);
        let patience = self.state.settings.wait_patience.human;
        ctx.run_later(patience, move |act, ctx| {
            if let Some(to) = act.phase.take_asked(&id, Some(no)) {
                tracing::info!(agent = %act.state.agent_id, step = %id, "nobody answered a server's question in time: it is cancelled");
                resume_call(&mut act.state, &id);
                act.submit_with_changes(Vec::new(), ctx);
                let _ = to.send(ElicitationAnswer::Cancel);
            }
        });
        Ok(answer)
    }

    /// A person answered the question waiting on step `id` (the step runs on already): the
    /// answer goes back to the server, and the step's change is published.
    pub(super) fn answered(
        &mut self,
        id: &StepId,
        answer: ElicitationAnswer,
        ctx: &mut Context<Self>,
    ) {
        if let Some(to) = self.phase.take_asked(id, None) {
            let _ = to.send(answer);
        }
        self.submit_with_changes(Vec::new(), ctx);
    }
}
