//! A tool call its server refused (`step::tool_refusal` decides): a refusal the rules cannot
//! place is judged by the agent's model; one about the arguments goes to a person's form, or,
//! with nobody to ask, back to the model, which writes the arguments anew, and the corrected
//! call is stored and made through the risk check like any call.

use super::AgentActor;
use actix::prelude::*;
use cohort_core::event::StepUpdate;
use cohort_core::ids::StepId;
use cohort_core::policy::{Fired, Repair};
use cohort_core::state::StepState;
use cohort_core::step::tool_refusal::{
    Refusal, RefusalKind, RefusedCall, Route, Routes, changed_fields, read_correction,
    read_judgement,
};
use cohort_llm::scripted::{CORRECT_ARGUMENTS, REFUSAL_JUDGE};
use cohort_mcp::{McpCall, McpError};
use serde_json::json;

/// Which of the model's two questions about a refused call is asked.
#[derive(Clone, Copy)]
enum Question {
    /// Is the refusal about the arguments?
    Judge,
    /// Which arguments would the tool accept?
    Correct,
}

impl AgentActor {
    /// The refusal in `e`, when the call was refused rather than failed: by the runtime's
    /// schema check, as the server's `invalid params`, or as the tool's own error.
    pub(super) fn refusal_of(&self, server: &str, call: &McpCall, e: &McpError) -> Option<Refusal> {
        let McpCall::Tool { name, .. } = call else {
            return None;
        };
        let schema = self
            .described_tool(server, name)
            .map(|t| t.input_schema)
            .unwrap_or_default();
        match e {
            McpError::InvalidArguments { reason, .. } | McpError::ParamsRefused { reason, .. } => {
                Some(Refusal::of_parameters(name, reason, &schema))
            }
            McpError::ToolFailed { message, .. } => {
                Some(Refusal::of_result(name, message, &schema))
            }
            _ => None,
        }
    }

    /// A refused call (`error`: the failure as the client put it): about something else, it
    /// fails the step; about the arguments, they are asked for; unplaced, the model judges.
    pub(super) fn on_refusal(
        &mut self,
        id: StepId,
        server: String,
        call: McpCall,
        refusal: Refusal,
        error: String,
        ctx: &mut Context<Self>,
    ) {
        let made = self.attempts(&id).fired(Repair::ArgumentsReasked);
        let judged = self.state.settings.repairs.allows(Repair::RefusalJudged)
            && self.llm.is_some()
            && self.refusal_routes().worth_judging(made);
        match refusal.kind.clone() {
            Some(RefusalKind::Arguments { fields }) => {
                self.on_argument_refusal(id, server, call, refusal, &fields, ctx)
            }
            None if judged => {
                let refused = Refused {
                    server,
                    call,
                    refusal,
                    told: error,
                };
                self.ask_model(Question::Judge, id, refused, ctx)
            }
            Some(RefusalKind::Other) | None => self.on_tool_result(id, Err(error), ctx),
        }
    }

    /// What may be done about this agent's refused calls (see `step::tool_refusal::Routes`).
    fn refusal_routes(&self) -> Routes {
        Routes {
            ask_for_params: self.state.settings.tool_approval.ask_for_params,
            operator: !self.approvers.is_empty(),
            model: self.llm.is_some()
                && self.state.settings.repairs.allows(Repair::ArgumentsReasked),
            reasks: self.state.settings.repairs.thresholds.reasks,
        }
    }

    /// A refusal about the arguments: a person fills them in where one can be asked, else
    /// the model writes them anew while `reasks` allows, else the step fails with the refusal
    /// in plain words.
    fn on_argument_refusal(
        &mut self,
        id: StepId,
        server: String,
        call: McpCall,
        refusal: Refusal,
        fields: &[String],
        ctx: &mut Context<Self>,
    ) {
        let told = refusal.describe(fields, &self.state.settings.texts);
        let routes = self.refusal_routes();
        let made = self.attempts(&id).fired(Repair::ArgumentsReasked);
        if routes.route(made) == Route::Person
            && self.ask_for_params(&id, &server, &call, &told, fields, ctx)
        {
            return;
        }
        // No form could be made (no field to name): the model, as with nobody to ask.
        let without_person = Routes {
            operator: false,
            ..routes
        };
        if without_person.route(made) != Route::Model {
            let why = match made {
                0 => told,
                n => self.state.settings.texts.tool_refused_after(told, n),
            };
            return self.on_tool_result(id, Err(why), ctx);
        }
        let refused = Refused {
            server,
            call,
            refusal,
            told,
        };
        self.ask_model(Question::Correct, id, refused, ctx)
    }

    /// Asks the agent's model `question` about the refused call of step `id`; its answer is
    /// read once it comes, for a step still live.
    fn ask_model(
        &mut self,
        question: Question,
        id: StepId,
        refused: Refused,
        ctx: &mut Context<Self>,
    ) {
        let (Some(llm), Some(step), McpCall::Tool { arguments, .. }) = (
            self.llm.clone(),
            self.state.agent_step.get(&id).cloned(),
            &refused.call,
        ) else {
            return self.on_tool_result(id, Err(refused.told), ctx);
        };
        let Refused {
            server,
            refusal,
            told,
            ..
        } = &refused;
        let tool = self.described_tool(server, &refusal.tool);
        let (description, schema) = tool
            .map(|t| (t.description.unwrap_or_default(), t.input_schema))
            .unwrap_or_default();
        let shown = RefusedCall {
            server,
            description: &description,
            schema: &schema,
            arguments,
            intention: &step.step_intention,
        };
        let prompt = shown.prompt(refusal, told, &self.state.settings.texts);
        let phrases = self.prompts.phrases();
        let (name, system) = match question {
            Question::Judge => (REFUSAL_JUDGE, phrases.refusal_judge.clone()),
            Question::Correct => (CORRECT_ARGUMENTS, phrases.correct_arguments.clone()),
        };
        let then = move |act: &mut Self, step: StepState, answer, ctx: &mut _| match question {
            Question::Judge => act.on_judgement(step.step_id, refused, answer, ctx),
            Question::Correct => act.on_correction(step.step_id, refused, answer, ctx),
        };
        self.ask_about_call(llm, step, (name, system, prompt), then, ctx);
    }

    /// The model judged a refusal the rules could not place; its judgement is kept on the step.
    fn on_judgement(
        &mut self,
        id: StepId,
        refused: Refused,
        answer: Result<String, String>,
        ctx: &mut Context<Self>,
    ) {
        let Refused {
            server,
            call,
            refusal,
            told: error,
        } = refused;
        let schema = self
            .described_tool(&server, &refusal.tool)
            .map(|t| t.input_schema)
            .unwrap_or_default();
        let t = self.state.settings.texts.clone();
        let judged = answer.and_then(|text| read_judgement(&text, &schema, &t));
        let what = match &judged {
            Ok(RefusalKind::Arguments { fields }) if fields.is_empty() => {
                t.repair_refusal_arguments()
            }
            Ok(RefusalKind::Arguments { fields }) => t.repair_refusal_fields(fields.join(", ")),
            Ok(RefusalKind::Other) => t.repair_refusal_other(),
            Err(why) => t.repair_refusal_unusable(why),
        };
        self.attempts(&id)
            .repairs
            .push(Fired::new(Repair::RefusalJudged, what));
        match judged {
            Ok(RefusalKind::Arguments { fields }) => {
                self.on_argument_refusal(id, server, call, refusal, &fields, ctx)
            }
            _ => self.on_tool_result(id, Err(error), ctx),
        }
    }

    /// The model wrote a refused call's arguments anew: stored as the step's instruction, then
    /// called through the risk check; an answer that cannot be used ends the step.
    fn on_correction(
        &mut self,
        id: StepId,
        refused: Refused,
        answer: Result<String, String>,
        ctx: &mut Context<Self>,
    ) {
        let Refused { call, told, .. } = refused;
        let McpCall::Tool { name, arguments } = call else {
            return self.on_tool_result(id, Err(told), ctx);
        };
        let t = self.state.settings.texts.clone();
        let corrected = match answer.and_then(|text| read_correction(&text, &arguments, &t)) {
            Ok(corrected) => corrected,
            Err(why) => {
                let why = t.tool_correction_unusable(told, why);
                return self.on_tool_result(id, Err(why), ctx);
            }
        };
        let changed = changed_fields(&arguments, &corrected);
        let what = t.repair_arguments_reasked(&told, changed.join(", "));
        tracing::info!(agent = %self.state.agent_id, step = %id, tool = %name, "a call refused for its arguments is made again with the model's corrected ones");
        self.attempts(&id)
            .repairs
            .push(Fired::new(Repair::ArgumentsReasked, what));
        self.state.update_step(
            &id,
            StepUpdate {
                instruction_content: Some(json!({ "tool_name": name, "arguments": corrected })),
                ..Default::default()
            },
        );
        let call = McpCall::Tool {
            name,
            arguments: corrected,
        };
        self.store_then_call(id, call, true, ctx);
    }
}

/// A refused call, with what answering a question about it needs.
struct Refused {
    server: String,
    call: McpCall,
    refusal: Refusal,
    /// How the refusal was put to the model (the failure as the client put it, for a
    /// judgement).
    told: String,
}
