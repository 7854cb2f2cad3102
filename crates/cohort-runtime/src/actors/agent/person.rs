//! Steps that wait for a person: a tool call's approval (put on hold by `tool_gate.rs`), a
//! plan's check, a call's missing arguments. The team's operators are told; the agent runs
//! nothing else meanwhile; each wait has a deadline (`waits.human_secs`), and a wait that can
//! no longer be decided (its stage or task ended, no operator left) ends its step.

use super::AgentActor;
use actix::prelude::*;
use cohort_core::ids::{AgentId, StepId};
use cohort_core::message::Message;
use cohort_core::state::{Executor, StepState};
use cohort_core::step::approval::verdict_due;
use cohort_core::step::cancel::fail_waiting_step;
use cohort_core::step::params::{await_params, param_request, params_notice};
use cohort_core::step::plan_check::{PlanCheck, plan_notice};
use cohort_mcp::McpCall;

impl AgentActor {
    /// While a step waits for a person the agent runs nothing else; if the step's stage or
    /// task ended meanwhile, or the step left, the wait is over.
    pub(super) fn check_held(&mut self, ctx: &mut Context<Self>) {
        for id in self.phase.held() {
            let step = self.state.agent_step.get(&id);
            match step {
                Some(s) if s.execution_state.waits_for_a_person() => {
                    if !self.state.holds(&s.task_id, &s.stage_id) {
                        self.phase.stop_waiting(&id);
                        let why = self.state.settings.texts.person_wait_ended();
                        self.fail_waiting(id, why, ctx);
                    }
                }
                // It no longer waits (it ended, or left the agent): nothing holds the agent.
                _ => {
                    self.phase.stop_waiting(&id);
                    if !self.phase.settling(&id) {
                        self.phase.forget(&id);
                    }
                }
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
            let why = self.state.settings.texts.plan_check_nobody();
            return self.fail_waiting(id, why, ctx);
        }
        tracing::info!(agent = %self.state.agent_id, step = %id, "a plan waits for a person's check");
        self.hold_for_a_person(id, ctx);
        self.tell_approvers(
            &step,
            plan_notice(&step, &check, &self.state.settings.texts),
            ctx,
        );
    }

    /// A tool call refused for its arguments, to be put to a person (`told`: the refusal in
    /// plain words; `fields`: those at fault): the step waits for the team's operators to fill
    /// in those fields and the required ones left out, and this is true; false when there is
    /// no field to ask for or the step's work ended.
    pub(super) fn ask_for_params(
        &mut self,
        id: &StepId,
        server: &str,
        call: &McpCall,
        told: &str,
        fields: &[String],
        ctx: &mut Context<Self>,
    ) -> bool {
        let McpCall::Tool { name, arguments } = call else {
            return false;
        };
        let request = self
            .described_tool(server, name)
            .and_then(|t| param_request(server, name, arguments, &t.input_schema, told, fields));
        let step = self.state.agent_step.get(id).cloned();
        let (Some(req), Some(step)) = (request, step) else {
            return false;
        };
        if !self.state.holds(&step.task_id, &step.stage_id) {
            return false;
        }
        tracing::info!(agent = %self.state.agent_id, step = %id, tool = %req.tool, "a tool call waits for a person to fill in its arguments");
        let so_far = self.attempts(id).clone();
        await_params(&mut self.state, id, &req, &so_far);
        self.hold_for_a_person(id.clone(), ctx);
        self.tell_approvers(
            &step,
            params_notice(&step, &req, &self.state.settings.texts),
            ctx,
        );
        true
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
        let now = cohort_core::clock::Now::current().unix_ms;
        let patience = self.state.settings.wait_patience.human;
        // A tool call that waits is the agent's current step; a plan that waits was settled.
        let tool = self
            .state
            .agent_step
            .get(&id)
            .is_some_and(|s| matches!(s.executor, Executor::Tool(_)));
        if tool {
            self.phase.hold(id.clone());
        } else {
            self.phase.check_plan(id.clone());
        }
        let Some(due) = verdict_due(&mut self.state, &id, now, patience) else {
            return;
        };
        let delay = std::time::Duration::from_millis(due.saturating_sub(now).max(0) as u64);
        ctx.run_later(delay, move |act, ctx| {
            // This wait's own deadline: a later wait of the same step has a deadline of its own.
            let still = act.phase.waits_for_person(&id)
                && act.state.agent_step.get(&id).is_some_and(|s| {
                    s.execution_state.waits_for_a_person()
                        && s.execute_result
                            .as_ref()
                            .and_then(|r| r.get(cohort_core::step::approval::DUE))
                            .and_then(serde_json::Value::as_i64)
                            == Some(due)
                });
            if still {
                act.phase.stop_waiting(&id);
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
                let verdict = cohort_core::step::plan_check::PlanVerdict::Reject { reason: why };
                let by = AgentId::from(cohort_core::message::TASK_STATE_SENDER);
                if let Err(e) =
                    cohort_core::step::plan_check::decide_plan(&mut self.state, &step, &by, verdict)
                {
                    tracing::warn!(agent = %self.state.agent_id, step = %id, "{e}");
                }
            }
            self.phase.stop_waiting(&id);
            self.submit_with_changes(Vec::new(), ctx);
        } else {
            let completion = fail_waiting_step(&mut self.state, &id, why);
            self.apply_completion(id, completion, ctx);
        }
    }
}
