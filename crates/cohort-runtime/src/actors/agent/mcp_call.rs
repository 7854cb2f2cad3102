//! The agent actor's MCP tool calls: a tool step's call through the team's shared client
//! (made only once the step's start is stored), and one a restart cut off (made again only
//! when the tool says that is harmless).

use super::{AgentActor, STORE_DEADLINE};
use actix::prelude::*;
use cohort_core::ids::StepId;
use cohort_core::policy::tool_retry::{ToolRetry, pause_before_retry};
use cohort_core::state::StepState;
use cohort_core::step::{ToolAttempts, complete_tool_step_after, tool_call_for};
use cohort_mcp::{McpClient, McpError};
use std::sync::Arc;

impl AgentActor {
    /// A tool step goes to the one shared MCP client; the call runs as a spawned future too.
    pub(super) fn run_tool(&mut self, step: StepState, server: String, ctx: &mut Context<Self>) {
        let id = step.step_id.clone();
        match (tool_call_for(&self.state, &step, &server), &self.mcp) {
            (Err(why), _) => self.on_tool_result(id, Err(why), ctx),
            (Ok(_), None) => {
                let why = self.state.settings.texts.no_mcp_server(&server);
                self.on_tool_result(id, Err(why), ctx)
            }
            (Ok(call), Some(client)) => {
                let client = client.clone();
                self.gate_tool(step, server, call, client, ctx);
            }
        }
    }

    /// Calls the tool of step `id` now.
    pub(super) fn call_tool(
        &mut self,
        id: StepId,
        server: String,
        call: cohort_mcp::McpCall,
        client: Arc<McpClient>,
        ctx: &mut Context<Self>,
    ) {
        // The tool is called only once the step's start is stored: after a crash a started
        // tool step is never run again (it may have acted), so a start the store lost must
        // not have reached the tool either.
        let stored = self.outlet.stored();
        let (asked, made) = (server.clone(), call.clone());
        let not_stored = self.state.settings.texts.step_start_not_stored();
        // A question the server asks during the call comes back to this agent.
        let asker: Arc<dyn cohort_mcp::elicit::Elicitor> = Arc::new(super::elicit::StepAsker {
            agent: ctx.address(),
            step: id.clone(),
        });
        let call_server = async move {
            let stored = tokio::time::timeout(STORE_DEADLINE, stored).await;
            if !matches!(stored, Ok(true)) {
                return Err(not_stored);
            }
            Ok(call_retrying(&client, &asked, &made, Some(asker)).await)
        };
        let (id_out, id_back) = (id.clone(), id.clone());
        let handle = ctx.spawn(call_server.into_actor(self).map(move |res, act, ctx| {
            act.phase.call_returned(&id_back);
            let (result, retries) = match res {
                Ok(made) => made,
                Err(why) => return act.on_tool_result(id, Err(why), ctx),
            };
            act.attempts(&id).retries.extend(retries);
            match result {
                Ok(v) => act.on_tool_result(id, Ok(v), ctx),
                Err(e) => match act.refusal_of(&server, &call, &e) {
                    Some(refusal) => act.on_refusal(id, server, call, refusal, e.to_string(), ctx),
                    None => act.on_tool_result(id, Err(e.to_string()), ctx),
                },
            }
        }));
        self.phase.call_out(&id_out, handle);
    }

    /// What the tool step `id`'s call has taken so far (kept until its result). Entries of
    /// steps that ended (or left) are dropped here, so the map holds only calls under way or
    /// waiting for a person. A call this actor did not start (a restart came while it waited
    /// for a person) begins with what its step kept of it.
    pub(super) fn attempts(&mut self, id: &StepId) -> &mut ToolAttempts {
        let steps = &self.state.agent_step;
        self.tool_attempts
            .retain(|k, _| k == id || steps.get(k).is_some_and(|s| !s.execution_state.is_over()));
        let kept = steps.get(id).and_then(|s| s.execute_result.as_ref());
        self.tool_attempts
            .entry(id.clone())
            .or_insert_with(|| ToolAttempts {
                retries: kept.map(|r| r.tool_retries.clone()).unwrap_or_default(),
                repairs: kept.map(|r| r.repairs.clone()).unwrap_or_default(),
            })
    }

    /// `tool` of `server` as the client last saw it described.
    pub(super) fn described_tool(
        &self,
        server: &str,
        tool: &str,
    ) -> Option<cohort_core::server_description::ToolDescription> {
        self.mcp.as_ref()?.cached_tool(server, tool)
    }

    /// A tool step a restart cut off: called again when the call is read-only or idempotent
    /// (MCP tool annotations), otherwise failed without calling it (it may have acted).
    pub(super) fn resume_tool_step(&mut self, id: StepId, ctx: &mut Context<Self>) {
        let step = self.state.agent_step.get(&id).cloned();
        let interrupted = move |act: &mut Self, ctx: &mut Context<Self>| {
            act.on_tool_result(
                id,
                Err(cohort_core::step::interrupted_tool_call(
                    &act.state.settings.texts,
                )),
                ctx,
            )
        };
        let Some(step) = step else {
            return interrupted(self, ctx);
        };
        let server = step.executor.name().to_owned();
        let (Ok(call), Some(client)) = (tool_call_for(&self.state, &step, &server), &self.mcp)
        else {
            return interrupted(self, ctx);
        };
        let client = client.clone();
        let asked = server.clone();
        let (id_out, id_back) = (step.step_id.clone(), step.step_id.clone());
        let lookup = ctx.spawn(
            async move { client.safe_to_repeat(&asked, &call).await }
                .into_actor(self)
                .map(move |again, act, ctx| {
                    act.phase.call_returned(&id_back);
                    if again && act.state.holds(&step.task_id, &step.stage_id) {
                        tracing::info!(agent = %act.state.agent_id, step = %step.step_id, "a read-only or idempotent tool call cut off by a restart is made again");
                        act.run_tool(step, server, ctx);
                    } else {
                        interrupted(act, ctx);
                    }
                }),
        );
        self.phase.call_out(&id_out, lookup);
    }

    /// A tool step's result, with what its call took on the way (`attempts`).
    pub(super) fn on_tool_result(
        &mut self,
        id: StepId,
        mut result: Result<serde_json::Value, String>,
        ctx: &mut Context<Self>,
    ) {
        self.keep_media(&mut result);
        let attempts = self.tool_attempts.remove(&id).unwrap_or_default();
        let completion = complete_tool_step_after(&mut self.state, &id, result, attempts);
        self.apply_completion(id, completion, ctx);
    }

    /// Takes the images and sounds out of a tool's result, each kept (before the result that
    /// refers to it is published) and left there as a reference (see `call::media`).
    pub(super) fn keep_media(&self, result: &mut Result<serde_json::Value, String>) {
        if let Ok(v) = result {
            for blob in cohort_core::call::media::take_media(v) {
                self.outlet.keep_blob(blob);
            }
        }
    }
}

/// Makes `call` on `server` (a server's questions during it going to `asker`, where there is
/// one), and again after a pause while it fails for a passing reason and the tool says a
/// repeat is harmless (`policy::tool_retry`); the last outcome, with the tries that failed
/// before it.
pub(super) async fn call_retrying(
    client: &McpClient,
    server: &str,
    call: &cohort_mcp::McpCall,
    asker: Option<Arc<dyn cohort_mcp::elicit::Elicitor>>,
) -> (Result<serde_json::Value, McpError>, Vec<ToolRetry>) {
    let mut retries = Vec::new();
    loop {
        let result = match &asker {
            Some(asker) => client.call_asking(server, call, asker.clone()).await,
            None => client.call(server, call).await,
        };
        let Err(e) = &result else {
            return (result, retries);
        };
        let transient = e.is_transient();
        let repeatable = transient && client.safe_to_repeat(server, call).await;
        let Some(pause) = pause_before_retry(retries.len(), transient, repeatable) else {
            return (result, retries);
        };
        tracing::info!(server, error = %e, ?pause, "a harmless tool call that failed for a passing reason is made again");
        retries.push(ToolRetry {
            error: e.to_string(),
            waited_ms: pause.as_millis() as u64,
        });
        tokio::time::sleep(pause).await;
    }
}
