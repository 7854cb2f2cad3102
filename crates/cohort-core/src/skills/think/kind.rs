//! think and quick_think as skills: a free text in their own tag, with the stage's history
//! (think) or without (quick_think). One kind, two settings.

use super::{Thought, interpret};
use crate::clock::Now;
use crate::skills::answer_schema::{answer, text};
use crate::skills::{HistoryKind, SkillError, SkillKind, SkillOutcome};
use crate::state::{Agent, Skill, StepResult, StepState};
use serde_json::Value;

/// A thinking skill: which one, its answer's tag and the history its prompt shows.
pub struct Thinking {
    skill: Skill,
    tag: &'static str,
    history: HistoryKind,
}

/// think: thinks about the stage's history (`<think>`).
pub const THINK: Thinking = Thinking {
    skill: Skill::Think,
    tag: "think",
    history: HistoryKind::Stage,
};

/// quick_think: thinks without history (`<quick_think>`).
pub const QUICK_THINK: Thinking = Thinking {
    skill: Skill::QuickThink,
    tag: "quick_think",
    history: HistoryKind::None,
};

impl SkillKind for Thinking {
    fn answer_tags(&self) -> &'static [&'static str] {
        match self.skill {
            Skill::QuickThink => &["<quick_think>"],
            _ => &["<think>"],
        }
    }

    fn history(&self) -> HistoryKind {
        self.history
    }

    fn answer_schema(&self, _agent: &Agent, _step: &StepState, _agents: &[String]) -> Value {
        answer(&[(self.tag, text())], &[])
    }

    fn interpret(
        &self,
        agent: &mut Agent,
        step: &StepState,
        answer: &str,
        _now: Now,
    ) -> Result<SkillOutcome, SkillError> {
        interpret(self.skill, agent, step, answer)
    }

    /// A thought gains nothing from a schema (see `answer_schema::constrained`).
    fn constrained(&self) -> bool {
        false
    }

    /// The thought.
    fn reported(&self, result: &StepResult) -> Option<String> {
        Some(result.read::<Thought>()?.text().to_owned())
    }
}
