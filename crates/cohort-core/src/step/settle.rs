//! Closing a step once SyncState has answered its output. How the step closes is decided
//! before the output leaves the agent (a [`Settle`]), so SyncState stores the closing in the
//! same commit as the output: a restart never finds a step whose output was applied still
//! running (it would run again and apply its output twice).

use crate::event::{AgentChange, Change, StepChange, StepUpdate};
use crate::ids::{AgentId, StageRef, StepId, TaskId, WaitId};
use crate::message::Message;
use crate::policy::Fired;
use crate::policy::tool_retry::ToolRetry;
use crate::state::{Agent, Cancelled, ReplyTo, StepExecutionState, StepResult, StepState, Try};
use crate::team::SyncError;
use serde_json::Value;

/// How a step closes once SyncState answered its output.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Settle {
    /// The agent the step belongs to.
    pub agent_id: AgentId,
    /// The step to close.
    pub step_id: StepId,
    /// Why the step failed by itself (its answer or its call), if it did.
    pub failure: Option<String>,
    /// Wait ids the step put on the lock; taken back if it fails (its message never went).
    pub added_waits: Vec<WaitId>,
    /// What a failed step's result keeps beside the reason: the raw answer, and the answers
    /// the model was asked again after (`super::reask`).
    answer: Option<Value>,
    reasked: Vec<Try>,
    /// And the repairs made on the way, and a tool call's tries made again: a failure is
    /// seen with what was tried before it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    repairs: Vec<Fired>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    tool_retries: Vec<ToolRetry>,
    /// The step's place and who waits for its reply (told if it fails).
    task_id: TaskId,
    stage_id: StageRef,
    reply_to: Option<ReplyTo>,
    /// The agent's cap on a step's text (a failed result is capped like any other).
    step_chars: usize,
    /// Its plan waits for a person's check: the step closes waiting, not finished.
    awaits_check: bool,
    /// Who cancelled it and why, when a person did or its work ended under it: it closes
    /// cancelled, not failed.
    cancelled: Option<Cancelled>,
}

impl Settle {
    /// The plan for closing `step_id`; None if the step left the agent.
    pub fn of(
        agent: &Agent,
        step_id: &StepId,
        failure: Option<String>,
        added_waits: Vec<WaitId>,
    ) -> Option<Settle> {
        let step = agent.agent_step.get(step_id)?;
        let result = step.execute_result.as_ref();
        Some(Settle {
            agent_id: agent.agent_id.clone(),
            step_id: step_id.clone(),
            failure,
            added_waits,
            answer: result.and_then(|r| r.answer.clone()),
            reasked: result.map(|r| r.reasked.clone()).unwrap_or_default(),
            repairs: result.map(|r| r.repairs.clone()).unwrap_or_default(),
            tool_retries: result.map(|r| r.tool_retries.clone()).unwrap_or_default(),
            task_id: step.task_id.clone(),
            stage_id: step.stage_id.clone(),
            reply_to: step.reply_to.clone(),
            step_chars: agent.settings.step_chars,
            awaits_check: result.is_some_and(|r| r.get(super::plan_check::KEY).is_some()),
            cancelled: result.and_then(|r| r.cancelled.clone()),
        })
    }

    /// Why the step failed, given SyncState's answer: its own failure, SyncState's refusal of
    /// its output, or both.
    pub fn outcome(&self, refused: Option<&SyncError>, t: &crate::texts::Texts) -> Option<String> {
        match (&self.failure, refused) {
            (f, None) => f.clone(),
            (Some(f), Some(r)) => Some(t.refused_output_too(f, r.render(t))),
            (None, Some(r)) => Some(t.refused_output(r.render(t))),
        }
    }

    /// The changes that close the step: finished, or failed with the reason (and the waits it
    /// added taken back).
    pub fn changes(&self, failure: Option<&str>) -> Vec<Change> {
        let mut out = Vec::with_capacity(2);
        let update = match failure {
            None => StepUpdate {
                execution_state: Some(if self.awaits_check {
                    StepExecutionState::WaitingForApproval
                } else {
                    StepExecutionState::Finished
                }),
                ..Default::default()
            },
            Some(reason) => {
                if !self.added_waits.is_empty() {
                    out.push(Change::Agent(AgentChange::WaitsReleased {
                        agent_id: self.agent_id.clone(),
                        ids: self.added_waits.clone(),
                    }));
                }
                let mut result = StepResult {
                    answer: self.answer.clone(),
                    reasked: self.reasked.clone(),
                    repairs: self.repairs.clone(),
                    tool_retries: self.tool_retries.clone(),
                    cancelled: self.cancelled.clone(),
                    ..StepResult::failed(reason)
                };
                result.cap(self.step_chars);
                StepUpdate {
                    execution_state: Some(if self.cancelled.is_some() {
                        StepExecutionState::Cancelled
                    } else {
                        StepExecutionState::Failed
                    }),
                    execute_result: Some(Box::new(result)),
                    ..Default::default()
                }
            }
        };
        out.push(Change::Step(StepChange::Updated {
            agent_id: self.agent_id.clone(),
            step_id: self.step_id.clone(),
            update,
        }));
        out
    }

    /// The message returning the wait id of whoever waits for this step's reply, when the step
    /// failed: the sender must not wait for ever.
    pub fn release(&self, reason: &str) -> Option<Message> {
        release_message(
            &self.agent_id,
            &self.task_id,
            &self.stage_id,
            self.reply_to.as_ref()?,
            reason,
        )
    }
}

/// Closes a step by the agent itself (no SyncState stored it): finished, or failed with the
/// reason (then the wait ids it added are taken back, since its message was never sent).
pub fn settle_step(
    agent: &mut Agent,
    step_id: &StepId,
    failure: Option<String>,
    added_waits: &[WaitId],
) {
    let held: Vec<WaitId> = added_waits
        .iter()
        .filter(|w| agent.step_lock.holds(w))
        .cloned()
        .collect();
    if let Some(s) = Settle::of(agent, step_id, failure.clone(), held) {
        for c in s.changes(failure.as_deref()) {
            agent.emit(c);
        }
    }
}

/// When a step that owed a waiting sender its reply fails or is dropped, the sender must still
/// get its wait id back, with the reason, or it would wait forever.
pub fn release_for(agent: &Agent, step: &StepState, reason: &str) -> Option<Message> {
    release_message(
        &agent.agent_id,
        &step.task_id,
        &step.stage_id,
        step.reply_to.as_ref()?,
        reason,
    )
}

fn release_message(
    me: &AgentId,
    task: &TaskId,
    stage: &StageRef,
    reply_to: &ReplyTo,
    reason: &str,
) -> Option<Message> {
    let wait = reply_to.wait_id.clone()?;
    let mut m = Message::notice(
        task.clone(),
        me.clone(),
        vec![reply_to.agent_id.clone()],
        stage.clone(),
        format!("[{me} could not answer your message: {reason}]"),
    );
    m.return_waiting_id = Some(wait);
    Some(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::StepUpdate;
    use crate::ids::StageId;
    use crate::state::AgentState;
    use crate::state::{Executor, Skill};

    /// An agent whose running step answered a waiting sender and held a wait of its own.
    fn running_reply() -> (Agent, StepId, WaitId) {
        let mut a = Agent::from(AgentState::new(
            "w".into(),
            "W".into(),
            "r".into(),
            "p".into(),
        ));
        let stage = StageRef::Stage(StageId::from("s"));
        a.note_working_memory("t".into(), Some(stage.clone()));
        let mut s = StepState::new(
            "t".into(),
            stage.clone(),
            "w".into(),
            Executor::Skill(Skill::SendMessage),
            "reply",
            "text",
        );
        s.reply_to = Some(ReplyTo {
            agent_id: "boss".into(),
            wait_id: Some(WaitId::from("W-boss")),
        });
        a.add_steps(vec![s]);
        let id = a.start_next().unwrap().step_id;
        a.update_step(
            &id,
            StepUpdate {
                execute_result: Some(Box::new(StepResult {
                    answer: Some("raw".into()),
                    ..Default::default()
                })),
                ..Default::default()
            },
        );
        let mine = WaitId::from("W-mine");
        a.hold_waits(
            vec![(mine.clone(), "boss".into())],
            &"t".into(),
            &stage,
            0,
            None,
        );
        a.take_changes();
        (a, id, mine)
    }

    #[test]
    fn the_closing_applied_elsewhere_leaves_the_agent_as_closing_it_here() {
        let (a, id, mine) = running_reply();
        let settle = Settle::of(&a, &id, None, vec![mine.clone()]).unwrap();
        let refused = SyncError::Invalid(crate::team::Malformed::NoReceiver);
        let failure = settle.outcome(Some(&refused), &crate::texts::Texts::english());
        assert_eq!(
            failure.as_deref(),
            Some("SyncState refused the step's output: the message has no receiver")
        );
        // SyncState stores `changes`; the agent applies the same, unpublished.
        let mut stored = a.clone();
        stored.apply_stored(settle.changes(failure.as_deref()));
        assert!(stored.take_changes().is_empty(), "nothing to publish again");
        let mut here = a.clone();
        settle_step(&mut here, &id, failure.clone(), std::slice::from_ref(&mine));
        here.take_changes();
        assert_eq!(stored, here);
        let step = stored.agent_step.get(&id).unwrap();
        assert_eq!(step.execution_state, StepExecutionState::Failed);
        assert_eq!(
            step.execute_result.as_ref().map(StepResult::to_value),
            Some(serde_json::json!({
                "error": "SyncState refused the step's output: the message has no receiver",
                "answer": "raw",
            }))
        );
        assert!(!stored.step_lock.holds(&mine), "its own wait taken back");
        // Whoever waited for the reply gets its wait id back with the reason.
        let back = settle.release(failure.as_deref().unwrap()).unwrap();
        assert_eq!(back.receiver, vec![AgentId::from("boss")]);
        assert_eq!(back.return_waiting_id, Some(WaitId::from("W-boss")));
        assert!(back.message.contains("the message has no receiver"));
    }

    #[test]
    fn a_failure_keeps_the_repairs_and_retries_made_before_it() {
        use crate::policy::{Fired, Repair};
        let (mut a, id, _) = running_reply();
        let tried = StepResult {
            repairs: vec![Fired::new(Repair::RefusalJudged, "judged")],
            tool_retries: vec![ToolRetry {
                error: "timeout".into(),
                waited_ms: 250,
            }],
            ..StepResult::failed("refused")
        };
        a.update_step(
            &id,
            StepUpdate {
                execute_result: Some(Box::new(tried)),
                ..Default::default()
            },
        );
        let settle = Settle::of(&a, &id, Some("refused".into()), vec![]).unwrap();
        a.apply_stored(settle.changes(Some("refused")));
        let result = a
            .agent_step
            .get(&id)
            .unwrap()
            .execute_result
            .clone()
            .unwrap();
        assert_eq!(result.repairs.len(), 1);
        assert_eq!(result.tool_retries.len(), 1);
        assert_eq!(result.error.as_deref(), Some("refused"));
    }

    #[test]
    fn a_long_failure_is_capped_like_any_step_text() {
        let (mut a, id, _) = running_reply();
        a.settings_mut().step_chars = 100;
        let settle = Settle::of(&a, &id, None, vec![]).unwrap();
        let long = "x".repeat(10_000);
        a.apply_stored(settle.changes(Some(&long)));
        let text = a
            .agent_step
            .get(&id)
            .unwrap()
            .execute_result
            .as_ref()
            .unwrap()
            .error
            .as_deref()
            .unwrap()
            .to_owned();
        assert!(text.chars().count() < 200, "{}", text.len());
    }

    #[test]
    fn a_step_that_did_its_work_finishes_and_keeps_its_waits() {
        let (a, id, mine) = running_reply();
        let settle = Settle::of(&a, &id, None, vec![mine.clone()]).unwrap();
        assert_eq!(settle.outcome(None, &crate::texts::Texts::english()), None);
        let mut b = a.clone();
        b.apply_stored(settle.changes(None));
        assert_eq!(
            b.agent_step.get(&id).unwrap().execution_state,
            StepExecutionState::Finished
        );
        assert!(b.step_lock.holds(&mine));
        let own = Settle::of(&a, &id, Some("bad answer".into()), vec![]).unwrap();
        let refused = SyncError::Invalid(crate::team::Malformed::WaitIds);
        assert_eq!(
            own.outcome(Some(&refused), &crate::texts::Texts::english())
                .as_deref(),
            Some(
                "bad answer; SyncState also refused the output: a waiting message needs one \
                 wait id per receiver"
            )
        );
    }
}
