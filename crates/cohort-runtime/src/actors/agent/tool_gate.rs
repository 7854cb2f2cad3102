//! The gate before a tool call: the call's risk (its annotations and the server's `risk:`,
//! then, with `tool_approval.judge_with_llm`, the agent's model judging these exact
//! arguments), and, when the agent's policy says the risk needs a person, the step held
//! (`waiting_for_approval`) while the team's operators are told. A call that cannot be made as
//! written is not put to anyone: making it fails, or asks for its arguments.

use super::AgentActor;
use actix::prelude::*;
use cohort_core::policy::{Risk, ToolRisk};
use cohort_core::state::StepState;
use cohort_core::step::approval::{approval_needed, approval_notice, await_approval};
use cohort_core::step::risk_judge::{judge_prompt, with_judgement};
use cohort_llm::scripted::RISK_JUDGE;
use cohort_mcp::{McpCall, McpClient, McpError};
use std::sync::Arc;

impl AgentActor {
    /// Calls the tool of `step` at once, or, when its risk needs a person, puts it on hold.
    pub(super) fn gate_tool(
        &mut self,
        step: StepState,
        server: String,
        call: McpCall,
        client: Arc<McpClient>,
        ctx: &mut Context<Self>,
    ) {
        let id = step.step_id.clone();
        let never_asks = self.state.settings.tool_approval.auto_run_up_to == Some(Risk::High);
        let (tool, args) = match &call {
            McpCall::Tool { name, arguments } if !never_asks => (name.clone(), arguments.clone()),
            _ => return self.call_tool(id, server, call, client, ctx),
        };
        let (asked, srv) = (client.clone(), server.clone());
        let (id_out, id_back) = (step.step_id.clone(), step.step_id.clone());
        let lookup = ctx.spawn(
            async move {
                // Only a call refused for its arguments skips approval (it cannot be made as
                // written); a server that cannot be asked now is no reason to skip it.
                let unfit = matches!(
                    asked.check_tool_call(&srv, &tool, &args).await,
                    Err(McpError::InvalidArguments { .. })
                );
                (!unfit, asked.tool_risk(&srv, &tool).await)
            }
            .into_actor(self)
            .map(move |(fits, risk), act, ctx| {
                act.phase.call_returned(&id_back);
                if !act.still_live(&step) {
                    return act.on_tool_result(step.step_id, Err("ended".into()), ctx);
                }
                if !fits {
                    return act.call_tool(step.step_id, server, call, client, ctx);
                }
                let judged = act.state.settings.tool_approval.judge_with_llm
                    && !act.state.settings.tool_approval.needs_approval(risk.risk)
                    && act.llm.is_some();
                if judged {
                    act.judge_risk(step, server, call, client, risk, ctx);
                } else {
                    act.put_to_approver(step, server, call, client, risk, ctx);
                }
            }),
        );
        self.phase.call_out(&id_out, lookup);
    }

    /// Whether `step` still runs for live work (its stage or task may have ended while the
    /// gate asked something).
    pub(super) fn still_live(&self, step: &StepState) -> bool {
        self.state
            .agent_step
            .get(&step.step_id)
            .is_some_and(|s| self.state.holds(&s.task_id, &s.stage_id))
    }

    /// Asks the agent's model how risky this exact call is; its judgement may only raise
    /// `annotated` (see `step::risk_judge`).
    fn judge_risk(
        &mut self,
        step: StepState,
        server: String,
        call: McpCall,
        client: Arc<McpClient>,
        annotated: ToolRisk,
        ctx: &mut Context<Self>,
    ) {
        let (Some(llm), McpCall::Tool { name, arguments }) = (self.llm.clone(), &call) else {
            return self.put_to_approver(step, server, call, client, annotated, ctx);
        };
        let description = self
            .described_tool(&server, name)
            .and_then(|t| t.description)
            .unwrap_or_default();
        let prompt = judge_prompt(
            (&server, name),
            &description,
            &serde_json::Value::Object(arguments.clone()),
            &step.step_intention,
            &self.state.settings.texts,
        );
        let system = self.prompts.phrases().risk_judge.clone();
        let ask = (RISK_JUDGE, system, prompt);
        let then = move |act: &mut Self, step, answer: Result<String, String>, ctx: &mut _| {
            let risk = with_judgement(
                annotated,
                answer.as_deref().map_err(String::as_str),
                &act.state.settings.texts,
            );
            act.put_to_approver(step, server, call, client, risk, ctx);
        };
        self.ask_about_call(llm, step, ask, then, ctx);
    }

    /// Makes the call, or, when `risk` needs a person under the agent's policy, holds the
    /// step for one (failing it when the team has no operator to ask).
    fn put_to_approver(
        &mut self,
        step: StepState,
        server: String,
        call: McpCall,
        client: Arc<McpClient>,
        risk: ToolRisk,
        ctx: &mut Context<Self>,
    ) {
        let id = step.step_id.clone();
        match approval_needed(&self.state, &server, &call, risk) {
            None => self.call_tool(id, server, call, client, ctx),
            Some(req) if self.approvers.is_empty() => {
                let why = format!(
                    "calling `{}` needs a person's approval (risk {}: {}), but the team has no \
                     operator to ask",
                    req.tool, req.risk.risk, req.risk.reason
                );
                self.on_tool_result(id, Err(why), ctx);
            }
            Some(req) => {
                tracing::info!(agent = %self.state.agent_id, step = %id, tool = %req.tool, risk = %req.risk.risk, "a tool call waits for approval");
                await_approval(&mut self.state, &id, &req);
                self.hold_for_a_person(id, ctx);
                self.tell_approvers(
                    &step,
                    approval_notice(&step, &req, &self.state.settings.texts),
                    ctx,
                );
            }
        }
    }
}
