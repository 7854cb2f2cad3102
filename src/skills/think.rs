//! think (with the stage's history) and quick_think (without): text the agent writes for
//! itself, kept in the step's result where later steps see it.

use super::{SkillError, SkillOutcome, working};
use crate::parse;
use crate::state::Skill;
use serde_json::json;

pub fn interpret(skill: Skill, answer: &str) -> Result<SkillOutcome, SkillError> {
    Ok(match skill {
        Skill::QuickThink => working(json!({ "quick_think": parse::quick_think(answer)? })),
        _ => working(json!({ "think": parse::think(answer)? })),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn think_and_quick_think_read_their_own_tags() {
        assert_eq!(
            interpret(Skill::Think, "<think>a</think>").unwrap().result["think"],
            "a"
        );
        assert_eq!(
            interpret(Skill::QuickThink, "<quick_think>b</quick_think>")
                .unwrap()
                .result["quick_think"],
            "b"
        );
        assert!(interpret(Skill::QuickThink, "<think>a</think>").is_err());
    }
}
