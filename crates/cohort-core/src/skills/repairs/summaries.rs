//! The rules that mend a stage's completion summary: a first paragraph handing back the
//! instruction (`echoed_start_dropped`), a summary composed from the agent's own results when
//! its model gave none (`composed_summary`, `composed_after_reasks`), a summary given the
//! results it leaves out (`summary_results_added`); and the agent's results in a stage, which
//! its completion report also carries.

use super::words::trigrams;
use crate::policy::{Fired, Repair};
use crate::report::Written;
use crate::skills::SkillOutcome;
use crate::state::{Agent, Executor, StepExecutionState, StepState};

/// An answer whose first paragraph only hands something back (`handed_back`: the step's
/// instruction, say) before the real answer (a 1.5B reviewer began its summary with "Report
/// the result of my goal in this stage: …"): what comes after that paragraph. Otherwise the
/// whole answer.
pub fn after_echoed_start(answer: &str, handed_back: impl Fn(&str) -> bool) -> &str {
    let answer = answer.trim();
    match answer.split_once("\n\n") {
        Some((first, rest)) if !rest.trim().is_empty() && handed_back(first) => rest.trim(),
        _ => answer,
    }
}

/// A completion summary written by the runtime from the agent's own results in the stage,
/// when its model could not write one (`why`): the stage still closes on what was done, and
/// the summary says it was composed. `None` when the agent has no result there to report.
pub(in crate::skills) fn composed_summary(
    agent: &Agent,
    step: &StepState,
    rule: Repair,
    why: &str,
) -> Option<SkillOutcome> {
    let results = stage_results(agent, step);
    if results.is_empty() {
        return None;
    }
    // The report is the results alone, as paragraphs (`Written::Composed`): list items named
    // by their steps' intentions ("write the first line") read to a small manager as work
    // still to plan.
    let what = match results.len() - newest(agent, &results).len() {
        0 => agent.settings.texts.repair_composed_summary(why),
        older => agent
            .settings
            .texts
            .repair_composed_summary_older(why, older),
    };
    Some(SkillOutcome {
        repairs: vec![Fired::new(rule, what)],
        ..crate::skills::summary::finished(agent, step, String::new(), Written::Composed)
    })
}

/// What the agent's finished steps in the stage of `step` produced, oldest first.
fn stage_results(agent: &Agent, step: &StepState) -> Vec<String> {
    agent
        .agent_step
        .steps()
        .iter()
        .filter(|s| {
            s.task_id == step.task_id
                && s.stage_id == step.stage_id
                && s.execution_state == StepExecutionState::Finished
        })
        .filter_map(reported)
        .collect()
}

/// The newest of what the agent's finished steps in the stage of `step` produced (up to the
/// policy's `reported`): what its completion report carries beside its summary.
pub(in crate::skills) fn results_in_stage(agent: &Agent, step: &StepState) -> Vec<String> {
    newest(agent, &stage_results(agent, step)).to_vec()
}

/// The newest `reported` of `results`: what a report the runtime adds to or composes gives.
fn newest<'a>(agent: &Agent, results: &'a [String]) -> &'a [String] {
    &results[results
        .len()
        .saturating_sub(agent.settings.repairs.thresholds.reported)..]
}

/// `summary_results_added`: whether `summary` gives none of the agent's results in the stage
/// (its report then shows its newest results below it, `Written::ResultsAdded`: the manager
/// judges the stage, and the person reads it, on what it produced). A summary gives a result
/// when it shares three words in a row with one that are not the agent's goal's own words.
pub(in crate::skills) fn gives_no_result(agent: &Agent, step: &StepState, summary: &str) -> bool {
    let results = stage_results(agent, step);
    let goal = trigrams(&crate::skills::goal_in_stage(agent, step).unwrap_or_default());
    let given = trigrams(summary);
    let mut found = results
        .iter()
        .flat_map(|r| trigrams(r))
        .filter(|t| !goal.contains(t))
        .peekable();
    found.peek().is_some() && !found.any(|t| given.contains(&t))
}

/// How much of one result a composed summary quotes.
const RESULT_CHARS: usize = 800;

/// What a finished step produced that a summary reports: what its skill reports
/// (`SkillKind::reported`: a thought, a message sent), or a tool's answer.
fn reported(step: &StepState) -> Option<String> {
    let result = step.execute_result.as_ref()?;
    let text = match &step.executor {
        Executor::Skill(skill) => skill.kind().reported(result)?,
        Executor::Tool(_) => serde_json::to_string(result).ok()?,
    };
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    Some(if text.chars().count() > RESULT_CHARS {
        format!("{}…", text.chars().take(RESULT_CHARS).collect::<String>())
    } else {
        text.to_owned()
    })
}
