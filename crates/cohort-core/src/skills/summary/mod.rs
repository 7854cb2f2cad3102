//! summary: the agent's `<completion_summary>` for its stage; it alone marks the agent
//! finished in the stage.

use super::answer_schema::{answer, text};
use super::repairs::{echo, summaries};
use super::{HistoryKind, Refusal, SkillError, SkillKind, SkillOutcome};
use crate::clock::Now;
use crate::parse::tagged_text;
use crate::policy::{Fired, Repair};
use crate::report::{Completion, Written};
use crate::state::{Agent, Skill, StageAgentState, StepState};
use serde_json::{Value, json};

/// Keeps the summary (mended where the repair policy allows) and finishes the agent in the
/// stage.
pub fn interpret(
    agent: &Agent,
    step: &StepState,
    answer: &str,
) -> Result<SkillOutcome, SkillError> {
    if step.stage_id.stage().is_none() {
        return Err(Refusal::SummaryOutsideStage.into());
    }
    let summary = tagged_text(answer, "completion_summary")?;
    // A small model may hand back its own instruction ("summarise what was achieved") or its
    // goal ("Write a haiku about autumn rain", Qwen2.5 0.5B) as the summary; the manager
    // would then judge the stage on nothing (a 1.5B manager planned the whole stage again, a
    // 0.5B one finished the task with the goal as its result).
    let handed_back = |text: &str| echo::hands_back_work(agent, step, text);
    let mut repairs = Vec::new();
    let mut summary = summary.trim().to_owned();
    if agent.settings.repairs.allows(Repair::EchoedStartDropped) {
        let rest = summaries::after_echoed_start(&summary, handed_back);
        if rest.len() < summary.len() {
            let what = agent.settings.texts.repair_echoed_start_dropped();
            repairs.push(Fired::new(Repair::EchoedStartDropped, what));
            summary = rest.to_owned();
        }
    }
    if agent.settings.repairs.allows(Repair::ComposedSummary) && handed_back(&summary) {
        // An echo is an obvious slip: repaired from the agent's own results at once, as asking
        // again rarely helps (the same model echoed the reworded instruction four times in a
        // row, minutes a try on a CPU). Only with nothing to report is it asked again.
        let why = agent.settings.texts.repair_summary_handed_back();
        return summaries::composed_summary(agent, step, Repair::ComposedSummary, &why)
            .ok_or(SkillError::Refused(Refusal::SummaryEchoes));
    }
    // Otherwise an echo is asked about again, and never closes the stage as its result.
    if agent.settings.repairs.allows(Repair::Echo) && handed_back(&summary) {
        return Err(SkillError::Echo(summary));
    }
    let mut written = Written::Own;
    if agent.settings.repairs.allows(Repair::SummaryResultsAdded)
        && summaries::gives_no_result(agent, step, &summary)
    {
        let what = agent.settings.texts.repair_summary_results_added();
        repairs.push(Fired::new(Repair::SummaryResultsAdded, what));
        written = Written::ResultsAdded;
    }
    Ok(SkillOutcome {
        repairs,
        ..finished(agent, step, summary, written)
    })
}

/// The agent finished in its stage with `summary` (its own words), `written` as the runtime
/// made the report; the step's result is the report as it reads.
pub(super) fn finished(
    agent: &Agent,
    step: &StepState,
    summary: String,
    written: Written,
) -> SkillOutcome {
    let completion = Completion {
        summary,
        results: super::results_in_stage(agent, step),
        written,
    };
    SkillOutcome {
        result: json!({ "summary": completion.text(&agent.agent_id, &agent.settings.texts) }),
        stage_state: StageAgentState::Finished,
        completion: Some(completion),
        ..Default::default()
    }
}

/// summary: the agent's completion summary of its stage; it alone finishes the agent there.
pub struct Summary;

impl SkillKind for Summary {
    fn answer_tags(&self) -> &'static [&'static str] {
        &["<completion_summary>"]
    }

    /// It reports the work the other steps did.
    fn does_work(&self) -> bool {
        false
    }

    fn history(&self) -> HistoryKind {
        HistoryKind::Stage
    }

    fn answer_schema(&self, _agent: &Agent, _step: &StepState, _agents: &[String]) -> Value {
        answer(&[("completion_summary", text())], &[])
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

    /// A summary gains nothing from a schema (see `answer_schema::constrained`).
    fn constrained(&self) -> bool {
        false
    }

    /// Only reflection plans it: it ends the agent's work in the stage.
    fn plannable_by(&self, planner: Skill) -> bool {
        planner == Skill::Reflection
    }

    /// Composed from the agent's own results in the stage.
    fn repair(&self, agent: &Agent, step: &StepState, error: &SkillError) -> Option<SkillOutcome> {
        if !agent.settings.repairs.allows(Repair::ComposedAfterReasks) {
            return None;
        }
        let why = error.render(&agent.settings.texts);
        summaries::composed_summary(agent, step, Repair::ComposedAfterReasks, &why)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skills::test_support::*;
    use crate::state::StepExecutionState;

    /// The agent's words in the report `o` carries.
    fn summary_of(o: &SkillOutcome) -> Option<&str> {
        o.completion.as_ref().map(|c| c.summary.as_str())
    }

    /// What the runtime did with the report `o` carries.
    fn written_of(o: &SkillOutcome) -> Written {
        o.completion.as_ref().unwrap().written
    }

    /// The report as it reads (the step's result): the summary with what the runtime added.
    fn report(o: &SkillOutcome) -> String {
        o.result["summary"].as_str().unwrap().to_owned()
    }

    #[test]
    fn a_summary_is_read_amid_noise_and_its_tag_is_required() {
        let mut a = agent(&[Skill::Summary]);
        let step = running(&mut a, Skill::Summary, "Sum up");
        let o = interpret(
            &a,
            &step,
            "Done.\n<completion_summary>写完了 ✅</completion_summary>",
        )
        .unwrap();
        assert_eq!(summary_of(&o), Some("写完了 ✅"));
        assert_eq!(
            interpret(&a, &step, "<think>x</think>")
                .unwrap_err()
                .to_string(),
            "the answer has no <completion_summary> tag"
        );
    }

    /// The text of the summary step that closes a stage, as an English team's runtime writes it.
    fn closing() -> String {
        crate::texts::Texts::english().summary_closing_text()
    }

    #[test]
    fn summary_finishes_the_agent_in_its_stage() {
        let mut a = agent(&[Skill::Summary]);
        let step = running(&mut a, Skill::Summary, "");
        let o = interpret(
            &a,
            &step,
            "Done.\n<completion_summary>wrote the draft</completion_summary>",
        )
        .unwrap();
        assert_eq!(summary_of(&o), Some("wrote the draft"));
        assert_eq!(o.stage_state, StageAgentState::Finished);
        // Its own instruction handed back is no summary.
        let echo = running(&mut a, Skill::Summary, &closing());
        let why = interpret(
            &a,
            &echo,
            &format!("<completion_summary>{}</completion_summary>", closing()),
        )
        .err()
        .unwrap()
        .to_string();
        assert!(why.contains("repeats this step's instruction"), "{why}");
    }

    #[test]
    fn a_summary_that_hands_back_the_agents_goal_is_no_summary() {
        let mut a = agent(&[Skill::Think, Skill::Planning, Skill::Summary]);
        let goal = "Write a haiku about autumn rain";
        let plan = planning_for(&mut a, goal);
        finish(&mut a, &plan, json!({ "planned_step": [] }));
        // Nothing done to report: asked again, saying why.
        let step = running(&mut a, Skill::Summary, &closing());
        let answer = format!("<completion_summary>{goal}.</completion_summary>");
        let why = interpret(&a, &step, &answer).err().unwrap().to_string();
        assert!(why.contains("or your goal"), "{why}");
        // With a result: composed from it; a goal before the result is left out.
        let think = running(&mut a, Skill::Think, "write it");
        finish(&mut a, &think, json!({ "think": "Rain on red maples" }));
        let o = interpret(&a, &step, &answer).unwrap();
        assert_eq!(written_of(&o), Written::Composed);
        assert_eq!(summary_of(&o), Some(""));
        assert!(report(&o).ends_with("Rain on red maples"));
        let o = interpret(
            &a,
            &step,
            &format!("<completion_summary>{goal}\n\nRain on red maples, a cold wind.</completion_summary>"),
        )
        .unwrap();
        assert_eq!(summary_of(&o), Some("Rain on red maples, a cold wind."));
        // A summary that says what was done in the goal's words is one.
        let o = interpret(
            &a,
            &step,
            "<completion_summary>Wrote a haiku about autumn rain: Rain on red maples.</completion_summary>",
        )
        .unwrap();
        assert!(o.repairs.is_empty());
    }

    #[test]
    fn a_summary_that_tells_of_the_result_without_giving_it_gets_the_results_added() {
        let mut a = agent(&[Skill::Think, Skill::Planning, Skill::Summary]);
        let goal = "Write a haiku about autumn rain";
        let plan = planning_for(&mut a, goal);
        finish(&mut a, &plan, json!({ "planned_step": [] }));
        let step = running(&mut a, Skill::Summary, &closing());
        let news = "<completion_summary>I have written a haiku about autumn rain, which meets \
                    the goal. I am done.</completion_summary>";
        // Nothing produced in the stage: nothing to add.
        assert!(interpret(&a, &step, news).unwrap().repairs.is_empty());
        let think = running(&mut a, Skill::Think, goal);
        let poem = "Rain on red maples\nthe gutter hums all evening\none leaf, then another";
        finish(&mut a, &think, json!({ "think": poem }));
        let o = interpret(&a, &step, news).unwrap();
        assert!(o.fired(Repair::SummaryResultsAdded).is_some());
        // The summary keeps the agent's words; the runtime's part is typed beside them.
        assert!(summary_of(&o).unwrap().ends_with("I am done."));
        assert_eq!(written_of(&o), Written::ResultsAdded);
        let summary = report(&o);
        assert!(summary.starts_with("I have written a haiku"), "{summary}");
        assert!(summary.contains("added by the runtime") && summary.ends_with(poem));
        // A summary that gives the poem (three words of it in a row) is left as it is.
        let gives =
            "<completion_summary>Wrote it: the gutter hums all evening.</completion_summary>";
        assert!(interpret(&a, &step, gives).unwrap().repairs.is_empty());
        // The goal's own words are no result.
        let think = running(&mut a, Skill::Think, "again");
        finish(&mut a, &think, json!({ "think": goal }));
        let restated = "<completion_summary>Done: a haiku about autumn rain.</completion_summary>";
        let o = interpret(&a, &step, restated).unwrap();
        assert!(report(&o).contains(poem), "the poem is still added");
        // Switched off, a summary is taken as written.
        a.settings_mut()
            .repairs
            .switched
            .insert(Repair::SummaryResultsAdded, false);
        assert!(interpret(&a, &step, news).unwrap().repairs.is_empty());
    }

    #[test]
    fn summary_outside_a_stage_or_without_the_tag_fails() {
        let mut a = agent(&[Skill::Summary]);
        let mut step = running(&mut a, Skill::Summary, "");
        assert!(interpret(&a, &step, "no tag here").is_err());
        step.stage_id = crate::ids::StageRef::NoRelative;
        assert!(interpret(&a, &step, "<completion_summary>x</completion_summary>").is_err());
    }

    /// Finishes `step` of `a` with `result`.
    fn finish(a: &mut Agent, step: &StepState, result: Value) {
        a.update_step(
            &step.step_id,
            crate::event::StepUpdate {
                execution_state: Some(StepExecutionState::Finished),
                execute_result: Some(Box::new(crate::state::StepResult::output(result))),
                ..Default::default()
            },
        );
    }

    #[test]
    fn an_echoed_summary_is_composed_from_the_agents_results_in_the_stage() {
        let mut a = agent(&[Skill::Think, Skill::Planning, Skill::Summary]);
        let plan = running(&mut a, Skill::Planning, "");
        finish(&mut a, &plan, json!({ "planned_step": [] }));
        let think = running(&mut a, Skill::Think, "write it");
        finish(&mut a, &think, json!({ "think": "Rain on red maples" }));
        let echo = running(&mut a, Skill::Summary, &closing());
        let o = interpret(
            &a,
            &echo,
            &format!("<completion_summary>{}</completion_summary>", closing()),
        )
        .unwrap();
        assert_eq!(written_of(&o), Written::Composed);
        let summary = report(&o);
        assert!(summary.starts_with("(Composed by the runtime from w's results"));
        assert!(summary.ends_with("\n\nRain on red maples"), "{summary}");
        assert!(
            !summary.contains("planned_step"),
            "a plan is no result: {summary}"
        );
        assert_eq!(o.stage_state, StageAgentState::Finished);
        assert!(
            o.fired(Repair::ComposedSummary)
                .unwrap()
                .contains("the model handed back the step's instruction or its goal")
        );
        // Also when the answer stays unreadable after its re-asks.
        let err = SkillError::Parse(crate::parse::ParseError::MissingTag {
            tag: "completion_summary",
        });
        let o = crate::skills::repair(&a, &echo, &err).unwrap();
        assert_eq!(o.repairs[0].rule, Repair::ComposedAfterReasks);
        assert!(o.repairs[0].what.contains("no <completion_summary> tag"));
        // Another stage's results are not this one's.
        let mut other = echo.clone();
        other.stage_id = crate::ids::StageRef::Stage("s2".into());
        let other_stage = summaries::composed_summary(&a, &other, Repair::ComposedAfterReasks, "x");
        assert!(other_stage.is_none());
    }

    #[test]
    fn an_instruction_handed_back_before_the_summary_is_left_out() {
        let mut a = agent(&[Skill::Summary]);
        let step = running(&mut a, Skill::Summary, &closing());
        let o = interpret(
            &a,
            &step,
            &format!(
                "<completion_summary>{}\n\nI wrote the haiku: Rain on red maples.</completion_summary>",
                closing()
            ),
        )
        .unwrap();
        assert_eq!(
            summary_of(&o),
            Some("I wrote the haiku: Rain on red maples.")
        );
        // A first paragraph of its own stays.
        let o = interpret(
            &a,
            &step,
            "<completion_summary>The haiku is done.\n\nRain on red maples.</completion_summary>",
        )
        .unwrap();
        assert_eq!(
            summary_of(&o),
            Some("The haiku is done.\n\nRain on red maples.")
        );
    }
}
