//! The agent actor's native tool loop (see `step::tool_loop`): describe the server, ask the
//! model with its tools as functions, run the calls it asks for, and ask again until it
//! answers. Every LLM call and MCP call runs as a spawned future; the mailbox stays open.

use super::mcp_call::call_retrying;
use super::{AgentActor, STORE_DEADLINE};
use actix::prelude::*;
use cohort_core::policy::tool_retry::ToolRetry;
use cohort_core::prompt::tokens::TokenCounter;
use cohort_core::prompt::{PromptContext, build_tool_loop_prompt};
use cohort_core::server_description::ServerDescription;
use cohort_core::state::{StepState, TokenUsage};
use cohort_core::step::complete_tool_loop;
use cohort_core::step::tool_loop::{ToolLoop, ToolSet, arguments, call_step, shown};
use cohort_llm::{ChatReply, ChatRequest, ToolCall, ToolRound};
use cohort_mcp::{McpCall, McpClient};
use futures::StreamExt;
use serde_json::Value;
use std::sync::Arc;

/// A loop in progress: its request (with the rounds so far), its state, what it cost.
struct Running {
    step: StepState,
    /// The functions offered, and the server and tool each calls.
    tools: Arc<ToolSet>,
    request: ChatRequest,
    state: ToolLoop,
    spent: TokenUsage,
}

impl AgentActor {
    /// Starts the loop of a tool step: the server's functions are fetched once the step's
    /// start is stored (a call may act), then the model is asked.
    pub(super) fn run_tool_loop(
        &mut self,
        step: StepState,
        server: String,
        ctx: &mut Context<Self>,
    ) {
        let model = self.model_for(&step).cloned();
        let (Some(mcp), Some(_)) = (self.mcp.clone(), &model) else {
            let why = self.state.settings.texts.tool_loop_unequipped(&server);
            return self.end_loop(&step, Err(why), TokenUsage::default(), ctx);
        };
        let prompt = build_tool_loop_prompt(
            &self.prompts,
            &PromptContext {
                agent: &self.state,
                step: &step,
                tool_descriptions: &self.tool_descriptions,
                tool_step: None,
                tool_capabilities: None,
                tool_history: None,
                budget: model.as_ref().and_then(|m| m.prompt_budget()),
                tokens: model
                    .as_ref()
                    .map_or(TokenCounter::Estimate, |m| m.token_counter()),
                constrained: model.as_ref().is_some_and(|m| m.constrains_answers()),
            },
        );
        let request = ChatRequest {
            images: self.images_for(&prompt.media),
            ..self.request_for(&step, "tool_loop", prompt.system, prompt.user)
        };
        let stored = self.outlet.stored();
        let servers = self.loop_servers(&server);
        let not_stored = self.state.settings.texts.tool_loop_start_not_stored();
        let describe = async move {
            let stored = tokio::time::timeout(STORE_DEADLINE, stored).await;
            if !matches!(stored, Ok(true)) {
                return Err(not_stored);
            }
            describe_servers(&mcp, servers).await
        };
        let (id_out, id_back) = (step.step_id.clone(), step.step_id.clone());
        let handle = ctx.spawn(describe.into_actor(self).map(move |res, act, ctx| {
            act.phase.call_returned(&id_back);
            if act.loop_cancelled(&step) {
                return;
            }
            let tools = match res {
                Ok(described) => ToolSet::new(described.iter().map(|(s, d)| (s.as_str(), &**d))),
                Err(e) => return act.end_loop(&step, Err(e), TokenUsage::default(), ctx),
            };
            if tools.specs.is_empty() {
                let why = act.state.settings.texts.server_offers_no_tools(&server);
                return act.end_loop(&step, Err(why), TokenUsage::default(), ctx);
            }
            let mut request = request;
            request.tools = tools.specs.clone();
            let running = Running {
                step,
                tools: Arc::new(tools),
                request,
                state: ToolLoop::default(),
                spent: TokenUsage::default(),
            };
            act.ask_loop(running, ctx);
        }));
        self.phase.call_out(&id_out, handle);
    }

    /// The servers a loop of a step of `server` offers the tools of: that one first, then the
    /// others the agent may use.
    fn loop_servers(&self, server: &str) -> Vec<String> {
        let others = self.state.tools.iter().filter(|t| *t != server).cloned();
        std::iter::once(server.to_owned()).chain(others).collect()
    }

    /// A person cancelled the loop's step: it was completed then, and the loop just stops.
    fn loop_cancelled(&self, step: &StepState) -> bool {
        self.state
            .agent_step
            .get(&step.step_id)
            .is_none_or(|s| s.execution_state != cohort_core::state::StepExecutionState::Running)
    }

    fn ask_loop(&mut self, running: Running, ctx: &mut Context<Self>) {
        if self.loop_cancelled(&running.step) {
            return;
        }
        let Some(llm) = self.model_for(&running.step).cloned() else {
            let why = Err(self.state.settings.texts.agent_has_no_model());
            return self.end_loop(&running.step, why, running.spent, ctx);
        };
        // Its stage or task ended meanwhile: the loop stops (the step records why).
        if !self
            .state
            .holds(&running.step.task_id, &running.step.stage_id)
        {
            return self.end_loop(&running.step, Ok(Value::Null), running.spent, ctx);
        }
        let mut request = running.request.clone();
        request.rounds = running.state.rounds.clone();
        let progress = self.answer_progress(&running.step.step_id);
        request.progress = Some(progress.clone());
        request.model_wait = Some(Self::wait_report(ctx, &running.step.step_id));
        // Each round counts the messages taken by its own ask (a replay keeps that order).
        request.intake = Some(self.intake.for_request());
        let (id_out, id_back) = (running.step.step_id.clone(), running.step.step_id.clone());
        let handle = ctx.spawn(
            llm.chat(request)
                .into_actor(self)
                .map(move |res, act, ctx| {
                    act.phase.call_returned(&id_back);
                    Self::tell_whole(&progress, &res);
                    if let Err(e @ cohort_llm::LlmError::EndpointDown { .. }) = &res {
                        if !act.loop_cancelled(&running.step) {
                            act.give_up_for_endpoint(running.step.step_id, e.to_string(), ctx);
                        }
                        return;
                    }
                    act.on_loop_answer(running, res.map_err(|e| e.to_string()), ctx)
                }),
        );
        self.phase.call_out(&id_out, handle);
    }

    fn on_loop_answer(
        &mut self,
        mut running: Running,
        reply: Result<ChatReply, String>,
        ctx: &mut Context<Self>,
    ) {
        if self.loop_cancelled(&running.step) {
            return;
        }
        let reply = match reply {
            Ok(r) => r,
            Err(e) => return self.end_loop(&running.step, Err(e), running.spent, ctx),
        };
        running.spent.add(reply.usage);
        // Its stage or task ended meanwhile: no call is made for work that is over.
        if !self
            .state
            .holds(&running.step.task_id, &running.step.stage_id)
        {
            return self.end_loop(&running.step, Ok(Value::Null), running.spent, ctx);
        }
        if reply.tool_calls.is_empty() {
            let result = Ok(running.state.result(&reply.text));
            return self.end_loop(&running.step, result, running.spent, ctx);
        }
        if !running.state.may_call(reply.tool_calls.len()) {
            let why = self
                .state
                .settings
                .texts
                .tool_loop_cap(cohort_core::step::tool_loop::TOOL_LOOP_CAP);
            return self.end_loop(&running.step, Err(why), running.spent, ctx);
        }
        let Some(mcp) = self.mcp.clone() else {
            let why = Err(self.state.settings.texts.no_mcp_client());
            return self.end_loop(&running.step, why, running.spent, ctx);
        };
        let calls = reply.tool_calls.clone();
        let run_calls = self.loop_calls(mcp, running.tools.clone(), calls);
        let (id_out, id_back) = (running.step.step_id.clone(), running.step.step_id.clone());
        let handle = ctx.spawn(run_calls.into_actor(self).map(move |made, act, ctx| {
            act.phase.call_returned(&id_back);
            if act.loop_cancelled(&running.step) {
                return;
            }
            let (mut results, retries): (Vec<_>, Vec<_>) = made.into_iter().unzip();
            for result in results.iter_mut() {
                act.keep_media(result);
            }
            act.add_images(&mut running.request, &results);
            let calls = reply.tool_calls;
            for ((call, result), retries) in calls.iter().zip(&results).zip(retries) {
                let texts = &act.state.settings.texts;
                let route = running.tools.route(&call.name, texts).ok();
                let done = call_step(&running.step, route, call, result, retries, texts);
                act.state.add_done(done);
            }
            act.publish();
            running.state.calls += calls.len();
            running.state.rounds.push(ToolRound {
                text: reply.text,
                results: results
                    .iter()
                    .map(|r| shown(r, &act.state.settings.texts))
                    .collect(),
                calls,
            });
            act.ask_loop(running, ctx);
        }));
        self.phase.call_out(&id_out, handle);
    }

    /// The calls a loop's model asked for, made once the loop's start is stored (a call may
    /// act), up to `step_limits.parallel_tool_calls` at a time, each made again after a
    /// passing failure where that is harmless (as a tool step's call is): each call's result in
    /// the order of the calls, or why it was not made, with its tries made again.
    fn loop_calls(
        &self,
        mcp: Arc<McpClient>,
        tools: Arc<ToolSet>,
        calls: Vec<ToolCall>,
    ) -> impl Future<Output = Vec<(Result<Value, String>, Vec<ToolRetry>)>> + use<> {
        let stored = self.outlet.stored();
        let at_once = self.state.settings.step_limits.parallel_tool_calls.max(1);
        // What the model is told of a call not made, in the team's language.
        let texts = self.state.settings.texts.clone();
        async move {
            let stored = tokio::time::timeout(STORE_DEADLINE, stored).await;
            if !matches!(stored, Ok(true)) {
                let why = texts.tool_loop_not_stored();
                return calls
                    .iter()
                    .map(|_| (Err(why.clone()), Vec::new()))
                    .collect();
            }
            let one = |call: ToolCall| {
                let (mcp, tools, texts) = (mcp.clone(), tools.clone(), texts.clone());
                async move {
                    let routed = tools.route(&call.name, &texts).and_then(|(server, tool)| {
                        let name = tool.to_owned();
                        Ok((
                            server,
                            McpCall::Tool {
                                name,
                                arguments: arguments(&call, &texts)?,
                            },
                        ))
                    });
                    let (server, call) = match routed {
                        Ok(routed) => routed,
                        Err(why) => return (Err(why), Vec::new()),
                    };
                    let (result, retries) = call_retrying(&mcp, server, &call, None).await;
                    (result.map_err(|e| e.to_string()), retries)
                }
            };
            // `buffered` keeps the calls' order whatever order they end in.
            futures::stream::iter(calls.into_iter().map(one))
                .buffered(at_once)
                .collect()
                .await
        }
    }

    /// The images a round's results brought, added to those the loop's model is sent (the
    /// newest [`MOST_IMAGES`](super::model::MOST_IMAGES) of all).
    fn add_images(&self, request: &mut ChatRequest, results: &[Result<Value, String>]) {
        let brought =
            cohort_core::call::media::media_in(results.iter().filter_map(|r| r.as_ref().ok()));
        request.images.extend(self.images_for(&brought));
        let over = request
            .images
            .len()
            .saturating_sub(super::model::MOST_IMAGES);
        request.images.drain(..over);
    }

    fn end_loop(
        &mut self,
        step: &StepState,
        result: Result<Value, String>,
        spent: TokenUsage,
        ctx: &mut Context<Self>,
    ) {
        if self.loop_cancelled(step) {
            return;
        }
        let completion = complete_tool_loop(&mut self.state, &step.step_id, result, spent);
        self.apply_completion(step.step_id.clone(), completion, ctx);
    }
}

/// Each server's description (`McpClient::describe`), the step's own first. The step's own
/// server must answer; another that cannot is left out of the loop (its tools are not
/// offered) rather than failing a step that did not ask for it.
async fn describe_servers(
    mcp: &McpClient,
    servers: Vec<String>,
) -> Result<Vec<(String, Arc<ServerDescription>)>, String> {
    let described = futures::future::join_all(servers.iter().map(|s| mcp.describe(s))).await;
    let mut out = Vec::with_capacity(servers.len());
    for (i, (server, result)) in servers.into_iter().zip(described).enumerate() {
        match result {
            Ok(description) => out.push((server, description)),
            Err(e) if i == 0 => return Err(e.to_string()),
            Err(e) => tracing::warn!(%server, "its tools are left out of a tool loop: {e}"),
        }
    }
    Ok(out)
}
