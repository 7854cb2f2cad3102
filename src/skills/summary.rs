//! summary: the agent's `<completion_summary>` for its stage; it alone marks the agent
//! finished in the stage.

use super::{SkillError, SkillOutcome};
use crate::parse;
use crate::state::{StageAgentState, StepState};
use serde_json::json;

pub fn interpret(step: &StepState, answer: &str) -> Result<SkillOutcome, SkillError> {
    if step.stage_id.stage().is_none() {
        return Err(SkillError::Invalid(
            "a summary closes a stage, but this step belongs to no stage".into(),
        ));
    }
    let summary = parse::completion_summary(answer)?;
    Ok(SkillOutcome {
        result: json!({ "summary": summary }),
        stage_state: StageAgentState::Finished,
        completion: Some(summary),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skills::test_support::*;
    use crate::state::Skill;

    #[test]
    fn summary_finishes_the_agent_in_its_stage() {
        let mut a = agent(&[Skill::Summary]);
        let step = running(&mut a, Skill::Summary, "");
        let o = interpret(
            &step,
            "Done.\n<completion_summary>wrote the draft</completion_summary>",
        )
        .unwrap();
        assert_eq!(o.completion.as_deref(), Some("wrote the draft"));
        assert_eq!(o.stage_state, StageAgentState::Finished);
    }

    #[test]
    fn summary_outside_a_stage_or_without_the_tag_fails() {
        let mut a = agent(&[Skill::Summary]);
        let mut step = running(&mut a, Skill::Summary, "");
        assert!(interpret(&step, "no tag here").is_err());
        step.stage_id = crate::ids::StageRef::NoRelative;
        assert!(interpret(&step, "<completion_summary>x</completion_summary>").is_err());
    }
}
