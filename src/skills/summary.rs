//! summary: the agent's `<completion_summary>` for its stage; it alone marks the agent
//! finished in the stage.

use super::{SkillError, SkillOutcome};
use crate::parse;
use crate::state::{StageAgentState, StepState};
use serde_json::json;

/// The text of the summary step the runtime adds when a reflection finds nothing left to do.
/// It names what to report: a real 1.5B model handed back the older wording ("Reflection found
/// nothing left to do; summarise what was achieved") as its summary, re-asked three times.
pub const CLOSING: &str = "Report the result of my goal in this stage: the result itself (the text, answer or file name, in full when it is short, such as a poem) and how it was reached.";

pub fn interpret(step: &StepState, answer: &str) -> Result<SkillOutcome, SkillError> {
    if step.stage_id.stage().is_none() {
        return Err(SkillError::Invalid(
            "a summary closes a stage, but this step belongs to no stage".into(),
        ));
    }
    let summary = parse::completion_summary(answer)?;
    // A small model may hand back its own instruction ("summarise what was achieved") as the
    // summary; the manager would then judge the stage on nothing (seen on Qwen2.5 1.5B, whose
    // manager planned the whole stage again).
    let plain = |s: &str| {
        s.split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect::<Vec<_>>()
            .join(" ")
    };
    let said = plain(&summary);
    if !said.is_empty()
        && (plain(&step.text_content).contains(&said)
            || plain(&step.step_intention).contains(&said))
    {
        return Err(SkillError::Invalid(
            "the summary repeats this step's instruction: report what you did in the stage and \
             what came of it, with the result itself when it is short (a poem, a number, a name)"
                .into(),
        ));
    }
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
        // Its own instruction handed back is no summary.
        let echo = running(&mut a, Skill::Summary, CLOSING);
        let why = interpret(
            &echo,
            &format!("<completion_summary>{CLOSING}</completion_summary>"),
        )
        .err()
        .unwrap()
        .to_string();
        assert!(why.contains("repeats this step's instruction"), "{why}");
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
