//! What a skill is, as one trait: its answer's tags and schema, the history its prompt shows,
//! how its answer becomes effects, and what may plan it. Each skill's folder under `skills/`
//! implements it; `Skill::kind` (made from the registry, `state::for_each_skill`) finds it.

use super::{SkillError, SkillOutcome};
use crate::clock::Now;
use crate::state::{Agent, Skill, StepResult, StepState};
use serde_json::{Map, Value};

/// Which history section a skill's prompt has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HistoryKind {
    /// No history: the step's own text is all the skill needs.
    None,
    /// Every other step of the current task and stage.
    Stage,
    /// The tool's call chain (tool_decision).
    ToolChain,
}

/// One skill: everything about it that is not its prompt text (`prompts/<lang>/skills/`).
/// The required items are what every skill must say; the provided ones are the usual case.
pub trait SkillKind {
    /// The answer tags its prompt's `return_format` must show (SPEC §7), besides the
    /// `<persistent_memory>` block every skill may add.
    fn answer_tags(&self) -> &'static [&'static str];

    /// Which history its prompt shows.
    fn history(&self) -> HistoryKind;

    /// The JSON schema of its answer for `agent` running `step`, for endpoints that constrain
    /// a model by one (see `skills::answer_schema`). `agents` are the team's agents (a
    /// message's possible receivers) when there are few enough to list.
    fn answer_schema(&self, agent: &Agent, step: &StepState, agents: &[String]) -> Value;

    /// Interprets `answer` as the result of `step`, applying the agent's local effects (new
    /// steps, step lock) and saying what SyncState must do.
    fn interpret(
        &self,
        agent: &mut Agent,
        step: &StepState,
        answer: &str,
        now: Now,
    ) -> Result<SkillOutcome, SkillError>;

    /// Whether its answer is worth constraining by [`SkillKind::answer_schema`]: a free text
    /// gains nothing from a schema (see `skills::answer_schema::constrained`).
    fn constrained(&self) -> bool {
        true
    }

    /// Words its prompt's `skill_prompt` or `return_format` must mention: the names of
    /// actions, queries and fields its parser knows.
    fn contract_words(&self) -> &'static [&'static str] {
        &[]
    }

    /// Whether its prompt file has a `with_tools` text, shown to an agent that has tools.
    fn with_tools(&self) -> bool {
        false
    }

    /// Whether it writes tool calls, so its prompt shows how MCP servers are called.
    fn calls_tools(&self) -> bool {
        false
    }

    /// Whether it writes the call of a tool step queued for it, so its prompt shows that step
    /// and its server's description (instruction_generation).
    fn fills_a_tool_step(&self) -> bool {
        false
    }

    /// Whether a step of it may be put in a plan by `planner` (planning, reflection, decision,
    /// tool_decision).
    fn plannable_by(&self, planner: Skill) -> bool {
        let _ = planner;
        true
    }

    /// Whether it acts through the team (tasks, hiring, asking, messages) rather than doing
    /// the work itself: what a decision on a message asking a manager to act may plan.
    fn acts_through_the_team(&self) -> bool {
        false
    }

    /// Whether a step of it does (part of) the agent's work itself, rather than planning,
    /// judging, reporting, digesting or asking about it: a stage plan or a summary needs a step
    /// that does (`work_step_inserted`, `work_before_summary`). Most skills do.
    fn does_work(&self) -> bool {
        true
    }

    /// Its recorded `output` as a prompt's history shows it: what the model wrote, without
    /// what the runtime set around it (a plan as each step's outline, a message without its
    /// ids). Every call after the step carries this line. As recorded, by default.
    fn history_output(&self, output: &mut Map<String, Value>) {
        let _ = output;
    }

    /// What a finished step of it produced that the agent's completion report gives (its
    /// `result`, as the step recorded it): a thought, a message sent. `None` for the skills
    /// that only plan, digest, ask or report (the usual case).
    fn reported(&self, result: &StepResult) -> Option<String> {
        let _ = result;
        None
    }

    /// An answer still unusable after its re-asks (failing with `error`), repaired where the
    /// runtime can do the skill's job itself; `None` fails the step.
    fn repair(&self, agent: &Agent, step: &StepState, error: &SkillError) -> Option<SkillOutcome> {
        let _ = (agent, step, error);
        None
    }
}

impl Skill {
    /// Whether a decision on a message that asks a manager to act (an operator's goal, a runtime
    /// notice) may plan this: what acts through the team (tasks, hiring, asking, messages), not
    /// the work itself. A real 1.5B model answered a goal with a quick_think that wrote the
    /// haiku, and the goal never became a task.
    pub fn acts_through_the_team(self) -> bool {
        self.kind().acts_through_the_team()
    }

    /// Whether a step of it does (part of) the agent's work: its [`SkillKind::does_work`].
    pub fn does_work(self) -> bool {
        self.kind().does_work()
    }

    /// Skills an agent may put in a plan (planning/reflection/decision/tool_decision): each
    /// skill's [`SkillKind::plannable_by`].
    pub fn plannable_by(self, planner: Skill) -> bool {
        self.kind().plannable_by(planner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_reflection_may_plan_a_summary_and_nobody_plans_tool_decision() {
        assert!(Skill::Summary.plannable_by(Skill::Reflection));
        assert!(!Skill::Summary.plannable_by(Skill::Planning));
        assert!(!Skill::Planning.plannable_by(Skill::Planning));
        assert!(Skill::Planning.plannable_by(Skill::Reflection));
        assert!(!Skill::Summary.plannable_by(Skill::Decision));
        assert!(!Skill::ToolDecision.plannable_by(Skill::Planning));
        assert!(!Skill::ToolDecision.plannable_by(Skill::Reflection));
        assert!(Skill::Think.plannable_by(Skill::Planning));
        assert!(!Skill::ProcessMessage.plannable_by(Skill::Decision));
        assert!(!Skill::Decision.plannable_by(Skill::Decision));
    }

    /// Malformed answers a model might write inside a skill's tag.
    const MALFORMED: &[&str] = &[
        "",
        "[",
        "{",
        "{\"a\":",
        "null",
        "5",
        "\"text\"",
        "[{}]",
        "[null, 1, \"x\"]",
        "{\"action\": 5}",
        "{\"action\": \"finish_task\", \"task_id\": {}}",
        "{\"steps\": [null]}",
        "{\"receiver\": [], \"message\": null}",
        "🎋\u{0}\u{202e}",
        "}]}]",
    ];

    #[test]
    fn no_skill_panics_on_a_malformed_answer_in_its_own_tags() {
        use crate::skills::test_support::{agent, now, running};
        let team = agent(&Skill::ALL);
        let deep = "[".repeat(2000);
        for skill in Skill::ALL {
            for tag in skill.kind().answer_tags() {
                let name = tag.trim_start_matches('<').trim_end_matches('>');
                for body in MALFORMED.iter().copied().chain([deep.as_str()]) {
                    for answer in [
                        format!("<{name}>{body}</{name}>"),
                        format!("<{name}>{body}"),
                    ] {
                        let mut a = team.clone();
                        let step = running(&mut a, skill, "");
                        let _ = skill.kind().interpret(&mut a, &step, &answer, now());
                    }
                }
            }
        }
    }

    #[test]
    fn only_the_planners_reports_digests_and_questions_do_no_work() {
        let idle: Vec<Skill> = Skill::ALL.into_iter().filter(|s| !s.does_work()).collect();
        assert_eq!(
            idle,
            [
                Skill::Planning,
                Skill::Reflection,
                Skill::Summary,
                Skill::Decision,
                Skill::ProcessMessage,
                Skill::AskInfo,
                Skill::ToolDecision,
            ]
        );
    }

    #[test]
    fn every_skills_schema_has_a_property_for_each_of_its_answer_tags() {
        use crate::skills::test_support::{agent, running};
        let a = agent(&Skill::ALL);
        for skill in Skill::ALL {
            let step = running(&mut a.clone(), skill, "");
            let schema = skill.kind().answer_schema(&a, &step, &[]).to_string();
            for tag in skill.kind().answer_tags() {
                let key = tag.trim_start_matches('<').trim_end_matches('>');
                assert!(schema.contains(&format!("\"{key}\"")), "{skill}: {key}");
            }
        }
    }

    #[test]
    fn only_the_managers_skills_and_messages_act_through_the_team() {
        let acting: Vec<Skill> = Skill::ALL
            .into_iter()
            .filter(|s| s.acts_through_the_team())
            .collect();
        assert_eq!(
            acting,
            [
                Skill::SendMessage,
                Skill::TaskManager,
                Skill::AgentManager,
                Skill::AskInfo
            ]
        );
    }
}
