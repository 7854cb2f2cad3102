//! process_message: digest a message; `<react_action>` asks for a decision step right next.

pub(super) mod answer;

use super::answer_schema::{answer as object_of, step_request, text};
use super::{HistoryKind, Refusal, SkillError, SkillKind, SkillOutcome, working};
use crate::call::structured::PLAIN_TEXT_KEY;
use crate::clock::Now;
use crate::state::{Agent, Executor, Skill, StepOrigin, StepState};
use serde_json::{Value, json};

/// Records the digest; a `<react_action>` inserts a decision step right next.
pub fn interpret(
    agent: &mut Agent,
    step: &StepState,
    answer: &str,
) -> Result<SkillOutcome, SkillError> {
    let react = answer::react_action(answer)?;
    if react.is_none() && step.origin.asks_to_act() && agent.skills.contains(&Skill::Decision) {
        return Err(Refusal::MustReact.into());
    }
    let digest = answer::digest(answer);
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

/// process_message: digests a received message, optionally inserting a decision step.
pub struct ProcessMessage;

impl SkillKind for ProcessMessage {
    fn answer_tags(&self) -> &'static [&'static str] {
        &["<react_action>"]
    }

    /// It digests a message; a decision it inserts plans what follows.
    fn does_work(&self) -> bool {
        false
    }

    fn history(&self) -> HistoryKind {
        HistoryKind::Stage
    }

    /// A message that asks the agent to act must be acted on (see `asks_to_act`).
    fn answer_schema(&self, agent: &Agent, step: &StepState, _agents: &[String]) -> Value {
        let digest = (PLAIN_TEXT_KEY, text());
        let react = ("react_action", step_request());
        if step.origin.asks_to_act() && agent.skills.contains(&Skill::Decision) {
            object_of(&[digest, react], &[])
        } else {
            object_of(&[digest], &[react])
        }
    }

    fn interpret(
        &self,
        agent: &mut Agent,
        step: &StepState,
        answer: &str,
        _now: Now,
    ) -> Result<SkillOutcome, SkillError> {
        interpret(agent, step, answer)
    }

    /// Reading messages is not for a decision to plan: it would circle between the two.
    fn plannable_by(&self, planner: Skill) -> bool {
        planner != Skill::Decision
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skills::answer_schema::answer_schema;
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

    #[test]
    fn a_notice_that_asks_to_act_requires_a_react_action() {
        let a = agent(&[Skill::ProcessMessage, Skill::Decision, Skill::TaskManager]);
        let notice = acting(&mut a.clone(), Skill::ProcessMessage, "Stage done.");
        let chat = running(
            &mut a.clone(),
            Skill::ProcessMessage,
            "Message from agent `writer`:\n\nHi.",
        );
        let required =
            |step| answer_schema(Skill::ProcessMessage, &a, step, &[])["required"].clone();
        assert_eq!(required(&notice), json!(["text", "react_action"]));
        assert_eq!(required(&chat), json!(["text"]));
    }
}
