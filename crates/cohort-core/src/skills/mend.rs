//! The repair policy's rules that mend a skill's answer (see `policy::repairs` for their names,
//! switches and thresholds): an answer that hands back its instruction, a summary composed
//! from the agent's own results, a finished task's summary given its stages' results, an
//! allocation without a goal, a stage plan with no step doing the work. Each is called where
//! its skill reads the answer, only when the policy allows it, and says what it changed.

use super::SkillOutcome;
use crate::ids::AgentId;
use crate::message::{TaskInstruction, TaskOutcome};
use crate::notice::{Notice, stages_for_operator};
use crate::policy::echo::{hands_back, hands_back_instruction};
use crate::policy::{Fired, Repair};
use crate::state::{Agent, Executor, PlannedStep, Skill, StepExecutionState, StepState};
use serde_json::json;
use std::collections::BTreeMap;

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
        || super::goal_in_stage(agent, step).is_some_and(|g| hands_back(text, &g, slack))
}

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
pub(super) fn composed_summary(
    agent: &Agent,
    step: &StepState,
    rule: Repair,
    why: &str,
) -> Option<SkillOutcome> {
    let results = stage_results(agent, step);
    if results.is_empty() {
        return None;
    }
    let newest = newest(agent, &results);
    // The results alone, as paragraphs: list items named by their steps' intentions ("write
    // the first line") read to a small manager as work still to plan.
    let summary = agent
        .settings
        .texts
        .composed_summary(&agent.name, newest.join("\n\n"));
    let what = match results.len() - newest.len() {
        0 => agent.settings.texts.repair_composed_summary(why),
        older => agent
            .settings
            .texts
            .repair_composed_summary_older(why, older),
    };
    Some(SkillOutcome {
        repairs: vec![Fired::new(rule, what)],
        ..super::summary::finished(json!({ "summary": summary }), summary)
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
pub fn results_in_stage(agent: &Agent, step: &StepState) -> Vec<String> {
    newest(agent, &stage_results(agent, step)).to_vec()
}

/// The newest `reported` of `results`: what a summary the runtime writes to gives.
fn newest<'a>(agent: &Agent, results: &'a [String]) -> &'a [String] {
    &results[results
        .len()
        .saturating_sub(agent.settings.repairs.thresholds.reported)..]
}

/// `summary_results_added`: adds the agent's newest results in the stage to a `summary` that
/// gives none of them, marked as added: the manager judges the stage, and the person reads it,
/// on what it produced. A summary gives a result when it shares
/// three words in a row with one that are not the agent's goal's own words.
pub(super) fn summary_with_results(agent: &Agent, step: &StepState, summary: &mut String) -> bool {
    let results = stage_results(agent, step);
    let mut goal = trigrams(&super::goal_in_stage(agent, step).unwrap_or_default());
    goal.extend(runtime_words(&agent.settings.texts));
    let given = trigrams(summary);
    let mut found = results
        .iter()
        .flat_map(|r| trigrams(r))
        .filter(|t| !goal.contains(t))
        .peekable();
    if found.peek().is_none() || found.any(|t| given.contains(&t)) {
        return false;
    }
    summary.push_str(&format!(
        "\n\n{}:\n\n{}",
        agent.settings.texts.results_added(),
        newest(agent, &results).join("\n\n")
    ));
    true
}

/// The trigrams of the runtime's own words in a summary (a composed summary's heading, and the
/// line above the results it added): they are no result of the stage's.
fn runtime_words(t: &crate::texts::Texts) -> std::collections::HashSet<String> {
    let mut words = trigrams(&t.composed_summary("", ""));
    words.extend(trigrams(&t.results_added()));
    words
}

/// How much of one result a composed summary quotes.
const RESULT_CHARS: usize = 800;

/// What a finished step produced that a summary reports: a thought, a message sent, or a
/// tool's answer (the steps that only plan, digest or ask report nothing of their own).
fn reported(step: &StepState) -> Option<String> {
    let result = step.execute_result.as_ref()?;
    let text = match step.executor {
        Executor::Skill(Skill::Think | Skill::QuickThink) => {
            result.read::<super::think::Thought>()?.text().to_owned()
        }
        Executor::Skill(Skill::SendMessage) => {
            let super::send_message::SentMessages::One(m) =
                result.read::<super::send_message::Sent>()?.send_message
            else {
                return None;
            };
            let to: Vec<&str> = m.receiver.iter().map(|r| r.as_str()).collect();
            format!("sent to {}: {}", to.join(", "), m.message)
        }
        Executor::Tool(_) => serde_json::to_string(result).ok()?,
        _ => return None,
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

/// The words of `text`, lower-cased, punctuation aside.
fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
}

/// Every three words in a row of `text` (lower-cased, punctuation aside).
fn trigrams(text: &str) -> std::collections::HashSet<String> {
    let words: Vec<String> = words(text).collect();
    words.windows(3).map(|w| w.join(" ")).collect()
}

/// A task finished with a summary that gives none of what its stages reported (a 1.5B
/// manager wrote "The haiku about autumn rain is written and submitted by the writer agent.")
/// gets what the stages produced added, marked: the operator asked for the result, not for
/// news of it. A summary gives a result when it shares three words in a row with what an agent's work
/// steps produced (its report's summary, when it has no recorded results) that are not the
/// goal's own words (the task's and stages' intentions, which a summary may restate without
/// giving anything); the runtime's own notes in a report are not looked for.
pub(super) fn with_results(
    instruction: &mut TaskInstruction,
    notice: &Notice,
    t: &crate::texts::Texts,
) -> bool {
    let TaskInstruction::FinishTask {
        task_summary,
        outcome: TaskOutcome::Finished,
        ..
    } = instruction
    else {
        return false;
    };
    let Notice::NoStageLeft {
        task_intention,
        stages,
        ..
    } = notice
    else {
        return false;
    };
    let mut goal = trigrams(task_intention);
    let mut reported = String::new();
    for stage in stages {
        goal.extend(trigrams(&stage.stage_intention));
        for r in &stage.reports {
            goal.extend(trigrams(&r.goal));
            // What the agent's work produced, when the runtime recorded it: a summary may pad
            // its result with news of the work, which a task summary can share without giving
            // anything. A person's report is their summary alone.
            if r.results.is_empty() {
                reported.push_str(r.summary.as_deref().unwrap_or_default());
            } else {
                reported.push_str(&r.results.join("\n"));
            }
            reported.push('\n');
        }
    }
    // The runtime's own words in a report (a composed summary's heading, the line above the
    // results it added) give no result.
    goal.extend(runtime_words(t));
    let results: Vec<String> = trigrams(&reported)
        .into_iter()
        .filter(|t| !goal.contains(t))
        .collect();
    let given = trigrams(task_summary);
    if results.is_empty() || results.iter().any(|r| given.contains(r)) {
        return false;
    }
    task_summary.push_str(&format!(
        "\n\n{}",
        t.stage_results_added(stages_for_operator(stages, t))
    ));
    true
}

/// Makes a person's `goal` the intention of the task `instruction` adds, when that intention
/// carries fewer than half of the goal's words (a 0.5B manager made the goal "Write a haiku
/// about autumn rain" the task "Create a task with a short name and a clear intention.", words
/// of its own rules, and every stage after it worked to those). The prompt asks for the goal as
/// the person gave it, so nothing the person asked for is lost by this.
pub(super) fn keep_goal_as_intention(instruction: &mut TaskInstruction, goal: &str) -> bool {
    let TaskInstruction::AddTask { task_intention, .. } = instruction else {
        return false;
    };
    // Words of one letter ("a") say nothing of what was asked.
    let set = |s: &str| -> std::collections::HashSet<String> {
        words(s).filter(|w| w.chars().count() > 1).collect()
    };
    let asked = set(goal);
    let kept = set(task_intention);
    if asked.is_empty() || 2 * asked.intersection(&kept).count() >= asked.len() {
        return false;
    }
    *task_intention = goal.trim().to_owned();
    true
}

/// An agent of `allocation` whose goal is empty or only names it (a 0.5B manager allocated
/// `{"writer": "writer"}`, and its writer worked to the goal "writer").
pub(super) fn goal_missing(allocation: &BTreeMap<AgentId, String>) -> Option<&AgentId> {
    let plain = |s: &str| words(s).collect::<Vec<_>>();
    allocation.iter().find_map(|(agent, goal)| {
        let goal = plain(goal);
        (goal.is_empty() || goal == plain(agent.as_str())).then_some(agent)
    })
}

/// Whether a planned step does (part of) the work itself, rather than plan, check, read,
/// ask about or report it.
pub(super) fn does_work(planned: &PlannedStep) -> bool {
    works(&planned.executor)
}

/// Whether a step of `executor` does (part of) the work itself (see [`does_work`]).
pub(super) fn works(executor: &Executor) -> bool {
    match executor {
        Executor::Tool(_) => true,
        Executor::Skill(s) => !matches!(
            s,
            Skill::Planning
                | Skill::Reflection
                | Skill::Summary
                | Skill::Decision
                | Skill::ToolDecision
                | Skill::ProcessMessage
                | Skill::AskInfo
        ),
    }
}

/// The step that does the agent's goal in the stage of `step` by thinking, when it may think.
/// Its text is the goal as the stage gave it, nothing around it: asked "Do my goal … and write
/// the result itself in full …: write a haiku about autumn rain", Qwen2.5 0.5B handed the text
/// back 3 times in 3; asked "Write a haiku about autumn rain." in the same prompt, it wrote a
/// haiku 3 times in 3 (the skill's rules already say the answer is the result itself).
pub(super) fn work_step(agent: &Agent, step: &StepState) -> Option<PlannedStep> {
    let skill = [Skill::Think, Skill::QuickThink]
        .into_iter()
        .find(|s| agent.skills.contains(s))?;
    let goal = super::goal_in_stage(agent, step)?;
    Some(PlannedStep::new(
        Executor::Skill(skill),
        agent.settings.texts.work_step_intention(),
        goal,
    ))
}

#[cfg(test)]
mod echo_tests {
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
