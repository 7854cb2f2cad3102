//! `echo`: an answer that only hands back its instruction or its goal (a thought, a summary, a
//! message's text) produced nothing. The text tests themselves are `policy::echo`'s.

use crate::policy::echo::{hands_back, hands_back_instruction};
use crate::state::{Agent, StepState};

/// Whether an answer only hands back the step's own instruction (its intention, or its text
/// when that reads as an instruction): the echo rule's test, see `policy::echo`.
pub fn echoes(answer: &str, step: &StepState, slack: usize) -> bool {
    hands_back_instruction(answer, &step.text_content, slack)
        || hands_back(answer, &step.step_intention, slack)
}

/// Whether a text the step produced (a thought, a summary, a message's body) only hands back
/// the step's instruction or the agent's goal in its stage: no result, whatever skill wrote it.
pub fn hands_back_work(agent: &Agent, step: &StepState, text: &str) -> bool {
    let slack = agent.settings.repairs.thresholds.echo_slack;
    echoes(text, step, slack)
        || crate::skills::goal_in_stage(agent, step).is_some_and(|g| hands_back(text, &g, slack))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skills::test_support::*;
    use crate::state::Skill;

    #[test]
    fn a_step_text_handed_back_is_an_echo_only_when_it_is_an_instruction() {
        let mut a = agent(&[Skill::QuickThink]);
        let short = running(&mut a, Skill::QuickThink, "Write a haiku about autumn rain");
        assert!(echoes("Write a haiku about autumn rain.", &short, 40));
        let draft = "Write a haiku about autumn rain, with a gentle breeze and the leaves rustle in \
                     the wind, a quiet moment of beauty in the fall. The raindrops fall gently, a \
                     symphony of nature's music. The air is crisp and fresh, a reminder of autumn.";
        assert!(draft.chars().count() > crate::policy::echo::INSTRUCTION_CHARS);
        let long = running(&mut a, Skill::QuickThink, draft);
        assert!(!echoes(draft, &long, 40), "the plan's draft, delivered");
        // Its intention still counts.
        assert!(echoes(&long.step_intention.clone(), &long, 40));
    }
}
