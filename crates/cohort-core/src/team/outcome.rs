//! Honest outcomes: a task ends `finished` only when its work produced a result. At least one
//! of its stages must have finished (a failed one counts only through a retry of it that
//! finished), and its summary as the operator gets it (the manager's words, with the stages'
//! results the runtime added when they gave none) must say more than the task's goal handed
//! back. A manager's `finish_task` with `outcome: finished` that falls short is refused with
//! the reason once (its second try sees it); given again, the task ends `failed`, saying why.
//! A task that finished with stages that gave nothing says which, in its record.

use super::{SyncCore, SyncError};
use crate::ids::{StageId, TaskId};
use crate::message::{TaskInstruction, TaskOutcome};
use crate::policy::echo::hands_back;
use crate::report::TaskWritten;
use crate::state::{ExecutionState, FailedStage, StageAgentState, StageState, TaskEnd};
use crate::texts::Texts;

/// Characters a task summary may add to the task's goal and still only hand it back (at most
/// half the goal's length).
const SUMMARY_SLACK: usize = 40;

/// Why a `finish_task` with `outcome: finished` reports work its task did not do.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Hollow {
    /// No stage finished with a result; the first stage that gave none, when there is one.
    NoStageResult(Option<FailedStage>),
    /// The task summary only hands back the task's goal.
    GoalHandedBack,
}

impl Hollow {
    /// The reason, said to the manager: which stage gave nothing, and why.
    pub(super) fn detail(&self, t: &Texts) -> String {
        match self {
            Hollow::NoStageResult(Some(f)) => t.hollow_no_stage_which(&f.stage_intention, &f.why),
            Hollow::NoStageResult(None) => t.hollow_no_stage(),
            Hollow::GoalHandedBack => t.hollow_goal(),
        }
    }

    /// The reason, in the task's record (its failed stages are listed beside it).
    fn brief(&self, t: &Texts) -> String {
        match self {
            Hollow::NoStageResult(_) => t.hollow_no_stage(),
            Hollow::GoalHandedBack => t.hollow_goal(),
        }
    }
}

impl SyncCore {
    /// Why `finish_task` with `outcome: finished` would report work the task did not do; None
    /// when its work produced a result (or the instruction is no such finish).
    pub(super) fn hollow_finish(&self, i: &TaskInstruction) -> Option<Hollow> {
        let TaskInstruction::FinishTask {
            task_id,
            task_summary,
            outcome: TaskOutcome::Finished,
            summary_written,
        } = i
        else {
            return None;
        };
        let task = self.tasks.get(task_id)?;
        let stages: Vec<&StageState> = task
            .stage_list
            .iter()
            .filter_map(|s| self.stages.get(s))
            .collect();
        if !stages.iter().any(|s| gave_a_result(s)) {
            let first = self.failed_stages(task_id).into_iter().next();
            return Some(Hollow::NoStageResult(first));
        }
        let goal = [&task.task_intention, &task.task_name];
        // A few words added to a long goal ("… Done.") are still the goal; a short goal's
        // name followed by what happened is a summary.
        let slack = |g: &str| SUMMARY_SLACK.min(g.chars().count() / 2);
        // What the operator is given: the results the runtime added to the words, or composed
        // the summary from, are given too.
        let given = TaskWritten::whole(task_summary, summary_written.as_deref(), &self.texts);
        goal.iter()
            .any(|g| hands_back(&given, g, slack(g)))
            .then_some(Hollow::GoalHandedBack)
    }

    /// The refusal of a hollow finish, the first time a task's manager gives one.
    pub(super) fn refuse_hollow_finish(&self, i: &TaskInstruction) -> Result<(), SyncError> {
        if self.hollow_refused.contains(i.task()) {
            return Ok(());
        }
        match self.hollow_finish(i) {
            Some(hollow) => Err(SyncError::HollowFinish(hollow)),
            None => Ok(()),
        }
    }

    /// The state a manager's `finish_task` ends its task in, and why it failed when it did:
    /// a finish given again after its refusal as hollow ends the task failed, with the reason
    /// (the stages that gave nothing are listed in the record beside it).
    pub(super) fn finish_state(
        &self,
        i: &TaskInstruction,
        asked: ExecutionState,
    ) -> (ExecutionState, Option<String>) {
        match self.hollow_finish(i) {
            Some(hollow) => (
                ExecutionState::Failed,
                Some(self.texts.declared_finished_but(hollow.brief(&self.texts))),
            ),
            None => (asked, None),
        }
    }

    /// How a task that just ended as `state` is recorded beyond its state: `why` it failed, and
    /// its stages that gave no result. A cancelled task's stages cancelled with it did not
    /// fail: they are not listed.
    pub(super) fn task_end(
        &self,
        task_id: &TaskId,
        state: ExecutionState,
        why: Option<String>,
    ) -> Option<Box<TaskEnd>> {
        let mut failed_stages = self.failed_stages(task_id);
        if state == ExecutionState::Cancelled {
            failed_stages.retain(|f| {
                self.stages
                    .get(&f.stage_id)
                    .is_none_or(|s| s.execution_state != ExecutionState::Cancelled)
            });
        }
        let end = TaskEnd { why, failed_stages };
        (!end.is_empty()).then(|| Box::new(end))
    }

    /// The task's stages that gave no result, each with why (a stage retried is listed only
    /// when no retry of it gave one).
    pub(super) fn failed_stages(&self, task_id: &TaskId) -> Vec<FailedStage> {
        let Some(task) = self.tasks.get(task_id) else {
            return Vec::new();
        };
        let stages: Vec<&StageState> = task
            .stage_list
            .iter()
            .filter_map(|s| self.stages.get(s))
            .collect();
        stages
            .iter()
            .filter(|s| s.execution_state.is_over() && !gave_a_result(s))
            .filter(|s| !retried_with_a_result(s, &stages))
            .map(|s| FailedStage {
                stage_id: s.stage_id.clone(),
                stage_intention: s.stage_intention.clone(),
                why: why_no_result(s, &self.texts),
            })
            .collect()
    }
}

/// Whether a stage finished (a manager or a person judged its work done; a failed or
/// cancelled stage gave nothing) with some agent's work in it: one closed as finished after
/// every agent in it failed, with no completion summary, gave nothing either (a manager told
/// that its only agent cannot go on may still answer `finish_stage`).
fn gave_a_result(s: &StageState) -> bool {
    s.execution_state == ExecutionState::Finished
        && (!s.completion_summary.is_empty() || !all_agents_failed(s))
}

fn all_agents_failed(s: &StageState) -> bool {
    !s.every_agent_state.is_empty()
        && s.every_agent_state
            .values()
            .all(|a| *a == StageAgentState::Failed)
}

/// Whether a later stage retried `s` (its `retry_of`) and gave a result.
fn retried_with_a_result(s: &StageState, stages: &[&StageState]) -> bool {
    let mut at: &StageId = &s.stage_id;
    for _ in 0..stages.len() {
        let Some(retry) = stages.iter().find(|r| r.retry_of.as_ref() == Some(at)) else {
            return false;
        };
        if gave_a_result(retry) {
            return true;
        }
        at = &retry.stage_id;
    }
    false
}

/// Why a stage that is over gave no result: how its agents ended in it.
fn why_no_result(s: &StageState, t: &Texts) -> String {
    let agents: Vec<String> = s
        .every_agent_state
        .iter()
        .map(|(a, st)| t.stage_agent(a, st))
        .collect();
    let how = if agents.is_empty() {
        String::new()
    } else {
        t.stage_agents(agents.join(", "))
    };
    let why = match s.execution_state {
        ExecutionState::Cancelled => t.stage_why_cancelled(how),
        ExecutionState::Finished => t.stage_why_all_failed(how),
        _ => t.stage_why_ended(s.execution_state, how),
    };
    why.trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::AgentId;
    use crate::team::tests::{TryApply, by, two_stage_task};
    use std::collections::BTreeMap;

    fn finish(t: &TaskId, summary: &str) -> crate::message::ExecuteOutput {
        by(
            "m",
            TaskInstruction::FinishTask {
                task_id: t.clone(),
                task_summary: summary.into(),
                outcome: TaskOutcome::Finished,
                summary_written: None,
            },
        )
    }

    fn fail_stage(c: &mut SyncCore, t: &TaskId, s: &StageId) {
        let retry = TaskInstruction::RetryStage {
            task_id: t.clone(),
            stage_id: s.clone(),
            stage_intention: None,
            agent_allocation: BTreeMap::from([(AgentId::from("a"), "again".to_owned())]),
        };
        c.try_apply(&by("m", retry), "now").unwrap();
    }

    #[test]
    fn a_cancelled_task_does_not_list_the_stages_cancelled_with_it_as_failed() {
        let (mut c, t, _) = two_stage_task();
        c.cancel_task(&t, &AgentId::from("m"), "not needed")
            .unwrap();
        let task = c.task(&t).unwrap();
        assert_eq!(task.execution_state, ExecutionState::Cancelled);
        assert!(
            task.outcome
                .as_ref()
                .is_none_or(|o| o.failed_stages.is_empty()),
            "{:?}",
            task.outcome
        );
    }

    #[test]
    fn a_finish_without_a_finished_stage_is_refused_then_ends_the_task_failed_saying_why() {
        let (mut c, t, stages) = two_stage_task();
        fail_stage(&mut c, &t, &stages[0]);
        let why = c.apply(&finish(&t, "The haiku is written."), "now").refused;
        let why = why.expect("refused").to_string();
        assert!(
            why.contains("no stage of the task finished with a result"),
            "{why}"
        );
        assert!(why.contains("outcome failed"), "{why}");
        // The manager is told which stage gave nothing.
        assert!(why.contains("(stage \"one\": it ended failed"), "{why}");
        assert!(!c.task(&t).unwrap().execution_state.is_over());
        // Given again, the manager insists: the task ends failed, saying why.
        let again = c.apply(&finish(&t, "The haiku is written."), "now");
        assert!(again.refused.is_none());
        let task = c.task(&t).unwrap();
        assert_eq!(task.execution_state, ExecutionState::Failed);
        let end = task.outcome.as_deref().unwrap();
        assert!(
            end.why
                .as_deref()
                .unwrap()
                .starts_with("the manager declared it finished")
        );
        assert_eq!(end.failed_stages[0].stage_intention, "one");
        // The record names the stages beside the reason, not in it.
        assert_eq!(
            end.why.as_deref(),
            Some(
                "the manager declared it finished, but no stage of the task finished with a result"
            )
        );
        assert!(
            end.render(&crate::texts::Texts::english())
                .contains("; stage \"one\" failed: it ended failed"),
            "{}",
            end.render(&crate::texts::Texts::english())
        );
    }

    #[test]
    fn a_summary_that_only_hands_back_the_goal_is_refused() {
        let (mut c, t, stages) = two_stage_task();
        for s in &stages {
            let f = TaskInstruction::FinishStage {
                task_id: t.clone(),
                stage_id: s.clone(),
            };
            c.try_apply(&by("m", f), "now").unwrap();
        }
        let why = c
            .apply(&finish(&t, "n"), "now")
            .refused
            .unwrap()
            .to_string();
        assert!(why.contains("only hands back the task's goal"), "{why}");
        let done = c.apply(&finish(&t, "n: two stages gave three lines"), "now");
        assert!(done.refused.is_none());
        let task = c.task(&t).unwrap();
        assert_eq!(task.execution_state, ExecutionState::Finished);
        assert!(task.outcome.is_none(), "nothing failed");
    }

    #[test]
    fn a_task_finished_with_a_stage_that_gave_nothing_says_which() {
        let (mut c, t, stages) = two_stage_task();
        let f = TaskInstruction::FinishStage {
            task_id: t.clone(),
            stage_id: stages[0].clone(),
        };
        c.try_apply(&by("m", f), "now").unwrap();
        // Stage two runs; the manager finishes the task on stage one's result.
        c.try_apply(&finish(&t, "Stage one gave the lines."), "now")
            .unwrap();
        let task = c.task(&t).unwrap();
        assert_eq!(task.execution_state, ExecutionState::Finished);
        let end = task.outcome.as_deref().unwrap();
        assert_eq!(end.why, None);
        let failed: Vec<&str> = end
            .failed_stages
            .iter()
            .map(|f| f.stage_intention.as_str())
            .collect();
        assert_eq!(failed, ["two"]);
    }

    #[test]
    fn a_failed_stage_whose_retry_finished_is_not_held_against_the_task() {
        let (mut c, t, stages) = two_stage_task();
        fail_stage(&mut c, &t, &stages[0]);
        // The retry (running now) and stage two both finish: the first stage's retry gave a
        // result, so only what never got one is listed.
        let list = c.task(&t).unwrap().stage_list.clone();
        for s in &list[1..] {
            let f = TaskInstruction::FinishStage {
                task_id: t.clone(),
                stage_id: s.clone(),
            };
            c.try_apply(&by("m", f), "now").unwrap();
        }
        c.try_apply(&finish(&t, "Both stages gave their lines."), "now")
            .unwrap();
        let task = c.task(&t).unwrap();
        assert_eq!(task.execution_state, ExecutionState::Finished);
        assert!(task.outcome.is_none(), "{:?}", task.outcome);
    }

    fn stage(state: ExecutionState, agent: StageAgentState) -> StageState {
        let mut s = StageState::new(
            "t".into(),
            "Write the haiku".into(),
            BTreeMap::from([(AgentId::from("writer"), "write it".to_owned())]),
        );
        s.execution_state = state;
        s.every_agent_state.insert("writer".into(), agent);
        s
    }

    #[test]
    fn a_stage_gives_a_result_only_when_it_finished_with_some_work_in_it() {
        use ExecutionState as E;
        use StageAgentState as A;
        assert!(gave_a_result(&stage(E::Finished, A::Finished)));
        assert!(gave_a_result(&stage(E::Finished, A::Working)));
        assert!(!gave_a_result(&stage(E::Failed, A::Finished)));
        // Closed as finished with its only agent failed and no summary: nothing came of it.
        let closed = stage(E::Finished, A::Failed);
        assert!(!gave_a_result(&closed));
        assert_eq!(
            why_no_result(&closed, &crate::texts::Texts::english()),
            "it was closed with every agent in it failed (writer failed)"
        );
        let mut reported = closed.clone();
        reported
            .completion_summary
            .insert("writer".into(), "three lines".into());
        assert!(gave_a_result(&reported));
        assert_eq!(
            why_no_result(
                &stage(E::Failed, A::Failed),
                &crate::texts::Texts::english()
            ),
            "it ended failed (writer failed)"
        );
    }

    #[test]
    fn a_failed_stage_counts_as_done_when_a_retry_of_it_gave_a_result() {
        let failed = stage(ExecutionState::Failed, StageAgentState::Failed);
        let mut retry = stage(ExecutionState::Finished, StageAgentState::Finished);
        retry.retry_of = Some(failed.stage_id.clone());
        assert!(retried_with_a_result(&failed, &[&failed, &retry]));
        let mut bad = stage(ExecutionState::Failed, StageAgentState::Failed);
        bad.retry_of = Some(failed.stage_id.clone());
        assert!(!retried_with_a_result(&failed, &[&failed, &bad]));
    }
}
