//! process_message: digest a message; `<react_action>` asks for a decision step right next.

use super::{Refusal, SkillError, SkillOutcome, working};

use crate::parse;
use crate::state::{Agent, Executor, Skill, StepOrigin, StepState};
use serde_json::json;

pub fn interpret(
    agent: &mut Agent,
    step: &StepState,
    answer: &str,
) -> Result<SkillOutcome, SkillError> {
    let react = parse::react_action(answer)?;
    if react.is_none() && step.origin.asks_to_act() && agent.skills.contains(&Skill::Decision) {
        return Err(Refusal::MustReact.into());
    }
    let digest = parse::process_message_digest(answer);
    let mut result = json!({ "process_message": digest });
    if let Some(r) = react {
        result["react_action"] =
            json!({ "step_intention": r.step_intention, "text_content": r.text_content });
        let decision = StepState::new(
            step.task_id.clone(),
            step.stage_id.clone(),
            agent.agent_id.clone(),
            Executor::Skill(Skill::Decision),
            r.step_intention,
            r.text_content,
        )
        .with_origin(StepOrigin::Planned {
            by: step.step_id.clone(),
        });
        agent.add_next_steps(vec![decision]);
    }
    Ok(working(result))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skills::test_support::*;

    #[test]
    fn a_goal_or_notice_digested_without_acting_is_an_answer_to_ask_again() {
        let mut a = agent(&[Skill::ProcessMessage, Skill::Decision]);
        let goal = acting(&mut a, Skill::ProcessMessage, "Write a haiku.");
        let e = interpret(&mut a, &goal, "Sure, I will.").unwrap_err();
        assert!(e.to_string().contains("<react_action>"), "{e}");
        assert!(a.agent_step.todo().next().is_none());

        let mut b = agent(&[Skill::ProcessMessage, Skill::Decision]);
        let chat = running(
            &mut b,
            Skill::ProcessMessage,
            "Message from agent `writer`:\n\nThanks!",
        );
        assert!(interpret(&mut b, &chat, "Nothing to do.").is_ok());
    }

    #[test]
    fn react_action_inserts_a_decision_step_next() {
        let mut a = agent(&[Skill::ProcessMessage]);
        let step = running(&mut a, Skill::ProcessMessage, "msg");
        a.add_steps(vec![StepState::new(
            "t".into(),
            step.stage_id.clone(),
            "w".into(),
            Executor::Skill(Skill::Think),
            "later",
            "",
        )]);
        let o = interpret(&mut a, &step, "Noted.\n<react_action>{\"step_intention\": \"act\", \"text_content\": \"do X\"}</react_action>").unwrap();
        let next = a
            .agent_step
            .get(a.agent_step.todo().next().unwrap())
            .unwrap();
        assert_eq!(next.executor, Executor::Skill(Skill::Decision));
        assert_eq!(next.text_content, "do X");
        assert_eq!(o.result["process_message"], "Noted.");
    }

    #[test]
    fn a_plain_digest_adds_nothing() {
        let mut a = agent(&[Skill::ProcessMessage]);
        let step = running(&mut a, Skill::ProcessMessage, "msg");
        interpret(&mut a, &step, "Understood, nothing to do.").unwrap();
        assert_eq!(a.agent_step.todo_len(), 0);
    }
}
