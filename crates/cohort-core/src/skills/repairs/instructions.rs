//! The rules that mend a manager's task instruction: a verdict its action contradicts
//! (`verdict_agrees`, `verdict_carried_out`), a task summary that hands back the goal (`echo`)
//! or gives none of the stages' results (`stage_reports_appended`), a task whose intention
//! lost the person's goal (`goal_kept_as_intention`), an allocation with no goal
//! (`goal_only_names_agent`), a second try repeating the refused action
//! (`refused_action_barred`).

use super::words::{trigrams, words};
use crate::ids::AgentId;
use crate::message::{TaskInstruction, TaskOutcome};
use crate::notice::{Notice, stages_for_operator};
use crate::parse;
use crate::policy::{Fired, Repair, Repairs};
use crate::report::TaskWritten;
use crate::skills::task_manager::{
    VERDICT, disagreement, judged_task, stage_decided, stage_reports,
};
use crate::skills::{Refusal, SkillError, SkillOutcome, working};
use crate::state::{Agent, StepState};
use serde_json::json;
use std::collections::BTreeMap;

/// A task finished with a summary that gives none of what its stages reported (a 1.5B
/// manager wrote "The haiku about autumn rain is written and submitted by the writer agent.")
/// gets what the stages produced added beside it (`TaskWritten::ResultsAdded`): the operator
/// asked for the result, not for news of it. A summary gives a result when it shares three words in a row with what an agent's work
/// steps produced (its report's summary, when it has no recorded results) that are not the
/// goal's own words (the task's and stages' intentions, which a summary may restate without
/// giving anything); the runtime's own notes in a report are not looked for.
pub(in crate::skills) fn with_results(
    instruction: &mut TaskInstruction,
    notice: &Notice,
    t: &crate::texts::Texts,
) -> bool {
    let TaskInstruction::FinishTask {
        task_summary,
        outcome: TaskOutcome::Finished,
        summary_written,
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
    let results: Vec<String> = trigrams(&reported)
        .into_iter()
        .filter(|t| !goal.contains(t))
        .collect();
    let given = trigrams(task_summary);
    if results.is_empty() || results.iter().any(|r| given.contains(r)) {
        return false;
    }
    *summary_written = Some(Box::new(TaskWritten::ResultsAdded {
        reports: stages_for_operator(stages, t),
    }));
    true
}

/// Makes a person's `goal` the intention of the task `instruction` adds, when that intention
/// carries fewer than half of the goal's words (a 0.5B manager made the goal "Write a haiku
/// about autumn rain" the task "Create a task with a short name and a clear intention.", words
/// of its own rules, and every stage after it worked to those). The prompt asks for the goal as
/// the person gave it, so nothing the person asked for is lost by this.
pub(in crate::skills) fn keep_goal_as_intention(
    instruction: &mut TaskInstruction,
    goal: &str,
) -> bool {
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
fn goal_missing(allocation: &BTreeMap<AgentId, String>) -> Option<&AgentId> {
    let plain = |s: &str| words(s).collect::<Vec<_>>();
    allocation.iter().find_map(|(agent, goal)| {
        let goal = plain(goal);
        (goal.is_empty() || goal == plain(agent.as_str())).then_some(agent)
    })
}

/// A verdict and the action given with it must agree: the goal reached closes the work, the
/// goal missed corrects or adds to it.
pub(in crate::skills) fn check_verdict(
    answer: &str,
    instruction: &TaskInstruction,
) -> Result<(), SkillError> {
    let Some(reached) =
        parse::extract_tag(answer, VERDICT).and_then(|v| v.trim().parse::<bool>().ok())
    else {
        return Ok(());
    };
    let closes = match instruction {
        TaskInstruction::FinishStage { .. } => true,
        TaskInstruction::FinishTask { outcome, .. } => *outcome == TaskOutcome::Finished,
        TaskInstruction::AddStage { .. } | TaskInstruction::RetryStage { .. } => false,
        _ => return Ok(()),
    };
    if reached == closes {
        return Ok(());
    }
    Err(SkillError::Disagrees {
        reached,
        instruction: Box::new(instruction.clone()),
    })
}

/// A judgement whose verdict and action still disagree after the re-asks closes the work:
/// a verdict of "reached" is carried out (finish_stage on the stage decided, or finish_task
/// with a summary composed from the stages' reports); an action that closes although the
/// verdict says "not reached" stands, a task so closed ending failed. Asking a model that cannot make up its mind
/// once more only stalled the task (seen on Qwen2.5 0.5B); what was closed is recorded, and
/// the task's judgement or the operator sees it. `None` when the step judges nothing the
/// runtime can close.
pub(in crate::skills) fn carry_out_verdict(
    agent: &Agent,
    step: &StepState,
    reached: bool,
    instruction: &TaskInstruction,
) -> Option<SkillOutcome> {
    let closing = if !reached {
        // The work closes as the action says, but a task is not called a success its manager
        // judged unreached.
        let mut closing = instruction.clone();
        if let TaskInstruction::FinishTask { outcome, .. } = &mut closing {
            *outcome = TaskOutcome::Failed;
        }
        closing
    } else if let Some(stage) = stage_decided(agent, step) {
        TaskInstruction::FinishStage {
            task_id: step.task_id.clone(),
            stage_id: stage.clone(),
        }
    } else if let Some(notice) = judged_task(step) {
        let reports = stage_reports(notice, &agent.settings.texts)?;
        TaskInstruction::FinishTask {
            task_id: step.task_id.clone(),
            task_summary: String::new(),
            outcome: TaskOutcome::Finished,
            summary_written: Some(Box::new(TaskWritten::Composed { reports })),
        }
    } else {
        return None;
    };
    Some(SkillOutcome {
        task_instruction: Some(closing.clone()),
        repairs: vec![Fired::new(
            Repair::VerdictCarriedOut,
            agent
                .settings
                .texts
                .repair_verdict_carried_out(disagreement(reached, &agent.settings.texts)),
        )],
        ..working(json!({ "task_instruction": closing }))
    })
}

/// A finished task's summary, when it only hands back the task's goal (see `policy::echo`).
pub(in crate::skills) fn summary_echoing_goal(
    instruction: &TaskInstruction,
    notice: &Notice,
    repairs: &Repairs,
) -> Option<String> {
    let (
        TaskInstruction::FinishTask {
            task_summary,
            outcome: TaskOutcome::Finished,
            ..
        },
        Notice::NoStageLeft { task_intention, .. },
    ) = (instruction, notice)
    else {
        return None;
    };
    let slack = repairs.thresholds.echo_slack;
    crate::policy::echo::hands_back(task_summary, task_intention, slack)
        .then(|| task_summary.clone())
}

/// Refuses the action SyncState refused on the step's first try.
pub(in crate::skills) fn check_not_refused(
    refused: Option<&TaskInstruction>,
    repairs: &Repairs,
    instruction: &TaskInstruction,
) -> Result<(), SkillError> {
    if let Some(refused) = refused
        && repairs.allows(Repair::RefusedActionBarred)
        && refused.action() == instruction.action()
    {
        return Err(Refusal::RefusedJustNow(refused.action()).into());
    }
    Ok(())
}

/// Refuses a stage allocation that gives an agent no goal: none, a placeholder, or its name.
pub(in crate::skills) fn check_goals(
    instruction: &TaskInstruction,
    repairs: &Repairs,
) -> Result<(), SkillError> {
    let allocations: Vec<(&BTreeMap<AgentId, String>, &str)> = match instruction {
        TaskInstruction::AddStage { stages, .. } => stages
            .iter()
            .map(|s| (&s.agent_allocation, s.stage_intention.as_str()))
            .collect(),
        TaskInstruction::RetryStage {
            agent_allocation,
            stage_intention,
            ..
        } => vec![(
            agent_allocation,
            stage_intention.as_deref().unwrap_or_default(),
        )],
        _ => Vec::new(),
    };
    if let Some((agent, intention)) = allocations
        .into_iter()
        .find_map(|(a, intention)| goal_missing(a).map(|agent| (agent, intention)))
        .filter(|_| repairs.allows(Repair::GoalOnlyNamesAgent))
    {
        // The example is the stage's own intention: a small model copies the example it is
        // given, and a fixed one ("Write the haiku and give it in full") became a 0.5B
        // writer's goal, without the task's subject.
        return Err(Refusal::NoGoal {
            agent: agent.clone(),
            intention: intention.to_owned(),
        }
        .into());
    }
    Ok(())
}
