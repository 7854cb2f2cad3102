//! Prompts under a token budget: older results cut first, then only the newest entries shown.

use super::assemble_tests::step;
use super::{Language, PromptContext, PromptSet, build_prompt};
use crate::ids::{StageId, StageRef};
use crate::state::StepResult;
use crate::state::{Agent, AgentState, Executor, Skill, StepExecutionState};
use serde_json::json;
use std::collections::BTreeMap;

#[test]
fn a_prompt_over_its_budget_cuts_older_results_then_shows_only_the_newest_entries() {
    use super::assemble::KEPT_WHOLE;
    use crate::prompt::tokens::TokenCounter;
    let mut a = Agent::from(AgentState::new(
        "a1".into(),
        "Ada".into(),
        "writer".into(),
        "".into(),
    ));
    a.skills = vec![Skill::Think];
    let stage = StageRef::Stage(StageId::from("s"));
    let mut steps = Vec::new();
    for i in 0..10 {
        let mut s = step(
            "t",
            stage.clone(),
            Executor::Skill(Skill::Think),
            &format!("STEP_{i}"),
            "",
        );
        s.execution_state = StepExecutionState::Finished;
        s.execute_result = Some(StepResult::output(
            json!({ "think": format!("HEAD_{i} {} TAIL_{i}", "rain on the roof ".repeat(176)) }),
        ));
        steps.push(s);
    }
    let current = step("t", stage, Executor::Skill(Skill::Think), "NOW", "");
    let id = current.step_id.clone();
    steps.push(current);
    a.add_steps(steps);
    let set = PromptSet::builtin(Language::En);
    let tools = BTreeMap::new();
    let step = a.agent_step.get(&id).unwrap().clone();
    // Counted by a real tokenizer, as for a Qwen model.
    let tokens = TokenCounter::for_model("qwen2.5-7b-instruct");
    assert!(tokens.is_exact());
    let prompt = |budget| {
        let ctx = PromptContext {
            agent: &a,
            step: &step,
            tool_descriptions: &tools,
            tool_step: None,
            tool_capabilities: None,
            tool_history: None,
            budget,
            tokens,
            constrained: false,
        };
        build_prompt(&set, Skill::Think, &ctx)
    };
    let size = |p: &super::Prompt| tokens.count(&p.system) + tokens.count(&p.user);

    let whole = prompt(None).whole();
    assert!((0..10).all(|i| whole.contains(&format!("TAIL_{i}"))));

    // Room for the newest five whole and the older ones cut.
    let cut = prompt(Some(size(&prompt(None)) - 2000)).whole();
    let older = 10 - KEPT_WHOLE;
    assert!(
        (0..older)
            .all(|i| cut.contains(&format!("HEAD_{i}")) && !cut.contains(&format!("TAIL_{i}")))
    );
    assert!((older..10).all(|i| cut.contains(&format!("TAIL_{i}"))));

    // Less room still: at most the newest five entries (older ones leave two at a time), the
    // rest counted.
    let newest = prompt(Some(1000)).whole();
    assert!(!newest.contains("STEP_5") && newest.contains("STEP_6"));
    assert!(newest.contains(&format!("{} 6", set.phrases().history_omitted)));
    assert!(size(&prompt(Some(1000))) < size(&prompt(None)) * 2 / 3);
    assert_eq!(prompt(Some(1000)).history_omitted, 6);
    assert_eq!(prompt(None).history_omitted, 0);

    // The six left out are due for a summary; once the agent has one, it stands in for them.
    let job = crate::step::history_summary::summary_due(&a, &step, 6).expect("a summary is due");
    assert!(
        job.prompt.contains("STEP_0")
            && job.prompt.contains("STEP_5")
            && !job.prompt.contains("STEP_6")
    );
    let summary =
        crate::step::history_summary::summary_of(&step, &job, "SUMMARY: wrote five drafts")
            .unwrap();
    let mut b = a.clone();
    b.history_summaries.push(summary);
    let ctx = PromptContext {
        agent: &b,
        step: &step,
        tool_descriptions: &tools,
        tool_step: None,
        tool_capabilities: None,
        tool_history: None,
        budget: Some(1000),
        tokens: crate::prompt::tokens::TokenCounter::Estimate,
        constrained: false,
    };
    let with_summary = build_prompt(&set, Skill::Think, &ctx).whole();
    assert!(with_summary.contains(&set.phrases().history_summary_note));
    assert!(with_summary.contains("SUMMARY: wrote five drafts"));
    assert!(
        !prompt(None).whole().contains("SUMMARY"),
        "nothing left out, no summary shown"
    );
}
