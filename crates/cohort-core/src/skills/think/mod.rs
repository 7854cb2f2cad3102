//! think (with the stage's history) and quick_think (without): text the agent writes for
//! itself, kept in the step's result where later steps see it.

mod kind;

pub use kind::{QUICK_THINK, THINK};

use super::repairs::echo::hands_back_work;
use super::{SkillError, SkillOutcome, working};
use crate::parse::{ParseError, tagged_text};
use crate::policy::Repair;
use crate::state::{Agent, Skill, StepState};
use serde::{Deserialize, Serialize};

/// What a think or quick_think step keeps: `{"think": text}` or `{"quick_think": text}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Thought {
    /// With the stage's history.
    Think(String),
    /// Without it.
    QuickThink(String),
}

impl Thought {
    /// The text the agent wrote.
    pub fn text(&self) -> &str {
        match self {
            Thought::Think(t) | Thought::QuickThink(t) => t,
        }
    }
}

/// `<quick_think>` for quick_think, else `<think>`. Reasoning models may open their answer with
/// their own `<think>` block; the last block is the answer.
fn read(skill: Skill, answer: &str) -> Result<Thought, ParseError> {
    Ok(match skill {
        Skill::QuickThink => Thought::QuickThink(tagged_text(answer, "quick_think")?),
        _ => Thought::Think(tagged_text(answer, "think")?),
    })
}

/// Keeps the thought `skill` wrote, unless it only hands back the step's instruction or goal.
pub fn interpret(
    skill: Skill,
    agent: &Agent,
    step: &StepState,
    answer: &str,
) -> Result<SkillOutcome, SkillError> {
    let thought = read(skill, answer)?;
    let text = thought.text();
    // The instruction or the goal handed back is no result: the model is asked again, and
    // still so after the re-asks, the step fails (issue: a 0.5B writer's "think" returned
    // its goal, and the task was reported finished with no haiku anywhere).
    if agent.settings.repairs.allows(Repair::Echo) && hands_back_work(agent, step, text) {
        return Err(SkillError::Echo(text.to_owned()));
    }
    let result = serde_json::to_value(&thought).unwrap_or_default();
    Ok(working(result))
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::policy::{Preset, Repairs};
    use crate::skills::test_support::*;

    #[test]
    fn thoughts_are_read_amid_noise() {
        let text = |t: Result<Thought, ParseError>| t.unwrap().text().to_owned();
        assert_eq!(
            text(read(
                Skill::Think,
                "<think>draft reasoning</think>\n<think>final thought</think>"
            )),
            "final thought"
        );
        assert_eq!(
            text(read(
                Skill::QuickThink,
                "<quick_think>\n```\nshort\n```\n</quick_think>"
            )),
            "short"
        );
        assert_eq!(
            text(read(Skill::QuickThink, "<quick_think>cut off 中文")),
            "cut off 中文"
        );
    }

    #[test]
    fn broken_thoughts_say_what_is_wrong() {
        assert_eq!(
            read(Skill::Think, "just prose").unwrap_err().to_string(),
            "the answer has no <think> tag"
        );
        assert_eq!(
            read(Skill::QuickThink, "<quick_think></quick_think>")
                .unwrap_err()
                .to_string(),
            "the <quick_think> tag is empty"
        );
    }

    #[test]
    fn think_and_quick_think_read_their_own_tags() {
        let mut a = agent(&[Skill::Think, Skill::QuickThink]);
        let step = running(&mut a, Skill::Think, "Write a haiku about rain");
        assert_eq!(
            interpret(Skill::Think, &a, &step, "<think>a</think>")
                .unwrap()
                .result["think"],
            "a"
        );
        assert_eq!(
            interpret(Skill::QuickThink, &a, &step, "<quick_think>b</quick_think>")
                .unwrap()
                .result["quick_think"],
            "b"
        );
        assert!(interpret(Skill::QuickThink, &a, &step, "<think>a</think>").is_err());
    }

    #[test]
    fn an_answer_that_hands_back_the_instruction_is_no_result() {
        let mut a = agent(&[Skill::Think]);
        let step = running(
            &mut a,
            Skill::Think,
            "Write a haiku about autumn rain, focusing on the sound.",
        );
        for echo in [
            "Write a haiku about autumn rain, focusing on the sound.",
            "write a haiku about autumn rain, focusing",
            "Write a haiku about autumn rain focusing on the sound. The poem should be written",
        ] {
            let why = interpret(Skill::Think, &a, &step, &format!("<think>{echo}</think>"))
                .err()
                .unwrap()
                .to_string();
            assert!(
                why.contains("repeats this step's instruction"),
                "{echo}: {why}"
            );
        }
        let poem = "Cold rain on the eaves\nthe maple lets go its red\none leaf at a time";
        assert!(interpret(Skill::Think, &a, &step, &format!("<think>{poem}</think>")).is_ok());
        // Still the echo after asking again: kept as it is, and said so.
        let e = interpret(
            Skill::QuickThink,
            &a,
            &step,
            "<quick_think>write a haiku about autumn rain, focusing on the sound</quick_think>",
        )
        .err()
        .unwrap();
        assert!(matches!(e, SkillError::Echo(_)));
        // Its re-asks spent, an echo is not repaired: the step fails.
        let quick = running(&mut a, Skill::QuickThink, "x");
        assert!(crate::skills::repair(&a, &quick, &e).is_none());
        // A passage from further in the instruction is an answer (the plan carried the draft).
        let carried = running(
            &mut a,
            Skill::QuickThink,
            "Write a haiku. Rain on the roof, the maple lets go its red leaves one by one.",
        );
        let poem = "<quick_think>Rain on the roof, the maple lets go its red leaves one by one.</quick_think>";
        assert!(interpret(Skill::QuickThink, &a, &carried, poem).is_ok());
        // A short answer that happens to be words of the instruction is an answer.
        assert!(interpret(Skill::Think, &a, &step, "<think>autumn rain</think>").is_ok());
    }

    #[test]
    fn with_the_echo_rule_off_an_echo_is_the_answer_as_given() {
        for preset in [Preset::Strict, Preset::Auto] {
            let mut a = agent(&[Skill::Think]);
            a.settings_mut().repairs = Repairs::preset(preset);
            a.settings_mut()
                .repairs
                .switched
                .insert(Repair::Echo, false);
            let step = running(&mut a, Skill::Think, "Write a haiku about autumn rain.");
            let o = interpret(
                Skill::Think,
                &a,
                &step,
                "<think>Write a haiku about autumn rain.</think>",
            )
            .unwrap();
            assert_eq!(o.result["think"], "Write a haiku about autumn rain.");
            assert!(o.repairs.is_empty());
        }
    }
}
