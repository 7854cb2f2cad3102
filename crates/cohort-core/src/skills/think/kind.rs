//! think and quick_think as skills: a free text in their own tag, with the stage's history
//! (think) or without (quick_think).

use super::{Thought, interpret};
use crate::clock::Now;
use crate::skills::answer_schema::{answer, text};
use crate::skills::{HistoryKind, SkillError, SkillKind, SkillOutcome};
use crate::state::{Agent, Skill, StepResult, StepState};
use serde_json::Value;

/// think: thinks about the stage's history (`<think>`).
pub struct Think;

impl SkillKind for Think {
    fn answer_tags(&self) -> &'static [&'static str] {
        &["<think>"]
    }

    fn history(&self) -> HistoryKind {
        HistoryKind::Stage
    }

    fn answer_schema(&self, _agent: &Agent, _step: &StepState, _agents: &[String]) -> Value {
        answer(&[("think", text())], &[])
    }

    fn interpret(
        &self,
        agent: &mut Agent,
        step: &StepState,
        answer: &str,
        _now: Now,
    ) -> Result<SkillOutcome, SkillError> {
        interpret(Skill::Think, agent, step, answer)
    }

    /// The thought.
    fn reported(&self, result: &StepResult) -> Option<String> {
        thought(result)
    }

    /// A thought gains nothing from a schema (see `answer_schema::constrained`).
    fn constrained(&self) -> bool {
        false
    }
}

/// quick_think: thinks without history (`<quick_think>`).
pub struct QuickThink;

impl SkillKind for QuickThink {
    fn answer_tags(&self) -> &'static [&'static str] {
        &["<quick_think>"]
    }

    fn history(&self) -> HistoryKind {
        HistoryKind::None
    }

    fn answer_schema(&self, _agent: &Agent, _step: &StepState, _agents: &[String]) -> Value {
        answer(&[("quick_think", text())], &[])
    }

    fn interpret(
        &self,
        agent: &mut Agent,
        step: &StepState,
        answer: &str,
        _now: Now,
    ) -> Result<SkillOutcome, SkillError> {
        interpret(Skill::QuickThink, agent, step, answer)
    }

    /// The thought.
    fn reported(&self, result: &StepResult) -> Option<String> {
        thought(result)
    }

    /// A thought gains nothing from a schema (see `answer_schema::constrained`).
    fn constrained(&self) -> bool {
        false
    }
}

/// The thought a think or quick_think step recorded.
fn thought(result: &StepResult) -> Option<String> {
    Some(result.read::<Thought>()?.text().to_owned())
}
