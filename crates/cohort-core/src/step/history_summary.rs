//! Older history summarized by the agent's own model (seed 004). When a prompt leaves older
//! executed steps of its stage out (over the model's context budget, or past the history's
//! length cap), the agent first asks its model to fold the left-out steps into a running
//! summary of the stage, kept on the agent (one per task and stage, dropped with the stage);
//! prompts then show that summary where the old steps were, and the newest steps verbatim. A
//! summary is redone only once [`SUMMARY_EVERY`] more steps were left out, so its cost stays
//! a fraction of the work it describes.

use crate::ids::{StageRef, StepId, TaskId};
use crate::prompt::stage_history;
use crate::state::{Agent, AgentState, HistorySummary, StepState};

/// Left-out steps the summary may lag behind before it is redone.
pub const SUMMARY_EVERY: usize = 5;
/// The longest summary kept, in characters.
pub const SUMMARY_CHARS: usize = 3_000;
/// What a summary request shows of one step's result, in characters (seed 004: 500).
const RESULT_SHOWN: usize = 500;

/// A summary to write before a step's prompt: what to ask, and the newest step it covers.
#[derive(Clone, Debug, PartialEq)]
pub struct SummaryJob {
    /// The request to the agent's model: the summary so far and the steps to fold into it.
    pub prompt: String,
    /// The newest step folded in; the summary written is recorded as covering up to it.
    pub upto: StepId,
}

impl AgentState {
    /// The summary of the older history of `task`/`stage`, if one was written.
    pub fn history_summary(&self, task: &TaskId, stage: &StageRef) -> Option<&HistorySummary> {
        self.history_summaries
            .iter()
            .find(|s| &s.task_id == task && &s.stage_id == stage)
    }
}

/// The summary `step`'s prompt needs first, when it leaves the oldest `omitted` executed
/// steps of its stage out and the stored summary lags [`SUMMARY_EVERY`] or more behind them.
pub fn summary_due(agent: &Agent, step: &StepState, omitted: usize) -> Option<SummaryJob> {
    if omitted == 0 {
        return None;
    }
    let (done, _) = stage_history(agent, step);
    let omitted = omitted.min(done.len());
    let prev = agent.history_summary(&step.task_id, &step.stage_id);
    // Steps up to `upto` are in the summary; if `upto` left the list (trimmed), everything
    // still listed is newer than it.
    let covered = prev
        .and_then(|s| done.iter().position(|d| d.step_id == s.upto))
        .map_or(0, |i| i + 1)
        .min(omitted);
    let lag = omitted - covered;
    if lag == 0 || (prev.is_some() && lag < SUMMARY_EVERY) {
        return None;
    }
    // The request is in the team's language, as the `summarize_history` phrase that asks it.
    let t = &agent.settings.texts;
    let mut prompt = match prev {
        Some(p) => format!("{}\n\n", t.history_summary_so_far(&p.text)),
        None => String::new(),
    };
    prompt.push_str(&t.history_summary_steps());
    prompt.push('\n');
    for s in &done[covered..omitted] {
        let result = s
            .execute_result
            .as_ref()
            .map(|v| serde_json::to_string(v).unwrap_or_default())
            .unwrap_or_default();
        prompt.push_str(&t.history_summary_step(
            &s.executor,
            s.execution_state,
            one_line(&s.step_intention),
            one_line(&cut(&result, RESULT_SHOWN)),
        ));
        prompt.push('\n');
    }
    Some(SummaryJob {
        prompt,
        upto: done[omitted - 1].step_id.clone(),
    })
}

/// The summary a model wrote for `job` in `step`'s stage (cut to [`SUMMARY_CHARS`]).
pub fn summary_of(step: &StepState, job: &SummaryJob, text: &str) -> Option<HistorySummary> {
    let text = text.trim();
    (!text.is_empty()).then(|| HistorySummary {
        task_id: step.task_id.clone(),
        stage_id: step.stage_id.clone(),
        upto: job.upto.clone(),
        text: cut(text, SUMMARY_CHARS),
    })
}

fn cut(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_owned()
    } else {
        s.chars().take(n).collect::<String>() + " […]"
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::StepUpdate;
    use crate::ids::StageId;
    use crate::state::{Executor, Skill, StepExecutionState};

    fn agent_with_done(n: usize) -> (Agent, StepState) {
        let mut a = Agent::from(AgentState::new(
            "w".into(),
            "W".into(),
            "r".into(),
            "".into(),
        ));
        let stage = StageRef::Stage(StageId::from("s"));
        for i in 0..n {
            let s = StepState::new(
                "t".into(),
                stage.clone(),
                "w".into(),
                Executor::Skill(Skill::Think),
                format!("step {i}"),
                "",
            );
            let id = s.step_id.clone();
            a.add_steps(vec![s]);
            a.start_next();
            a.update_step(
                &id,
                StepUpdate {
                    execution_state: Some(StepExecutionState::Finished),
                    execute_result: Some(Box::new(crate::state::StepResult::output(
                        serde_json::json!({ "think": format!("found {i}") }),
                    ))),
                    ..Default::default()
                },
            );
        }
        let now = StepState::new(
            "t".into(),
            stage,
            "w".into(),
            Executor::Skill(Skill::Think),
            "now",
            "",
        );
        a.add_steps(vec![now.clone()]);
        (a, now)
    }

    #[test]
    fn left_out_steps_are_summarized_once_and_again_only_after_five_more() {
        let (mut a, now) = agent_with_done(10);
        assert_eq!(
            summary_due(&a, &now, 0),
            None,
            "nothing left out, nothing to summarize"
        );
        let job = summary_due(&a, &now, 4).unwrap();
        assert!(
            job.prompt.contains("step 0")
                && job.prompt.contains("step 3")
                && !job.prompt.contains("step 4")
        );
        assert!(job.prompt.contains("found 3"));
        let s = summary_of(&now, &job, " Thought four times. ").unwrap();
        assert_eq!(s.text, "Thought four times.");
        a.history_summaries.push(s);
        // Two more left out: the summary lags too little to be redone.
        assert_eq!(summary_due(&a, &now, 6), None);
        let again = summary_due(&a, &now, 9).unwrap();
        assert!(
            again
                .prompt
                .starts_with("Your summary so far:\nThought four times.")
        );
        assert!(
            again.prompt.contains("step 4")
                && again.prompt.contains("step 8")
                && !again.prompt.contains("step 3 ")
        );
        assert!(
            summary_of(&now, &again, "  ").is_none(),
            "an empty answer is no summary"
        );
    }
}
