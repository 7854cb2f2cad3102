//! What the nodes of a team say to each other over NATS once its agents are spread over them:
//! the team's node (the one that holds the team's lease and runs SyncState, the dispatcher and
//! the journal) and the nodes that run agents for it. JSON, so `nats sub` shows it readably.
//!
//! Every call names the agent and its [`Hold`]: the term of the team's node that placed it
//! there and the agent's own lease token. A call under any other hold than the current one is
//! refused, so an agent that moved (or whose node was given up for dead) changes nothing from
//! where it was.

use cohort_core::event::AgentRecord;
use cohort_core::event::Change;
use cohort_core::event::trace_context::TraceParent;
use cohort_core::ids::{AgentId, StepId, TaskId};
use cohort_core::message::{ExecuteOutput, Message, TaskInstruction};
use cohort_core::step::Settle;
use cohort_core::step::approval::{Verdict, VerdictError};
use cohort_core::step::cancel::CancelError;
use cohort_core::team::SyncError;
use cohort_llm::recorded::{Call, CallOutcome};
use serde::{Deserialize, Serialize};

/// Where an agent runs, as the team's node granted it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hold {
    /// The team lease's token of the node that granted it.
    pub term: i64,
    /// The agent's own lease token.
    pub token: i64,
}

/// A call of an agent on another node to the team's node.
#[derive(Debug, Serialize, Deserialize)]
pub struct ToCore {
    pub agent: AgentId,
    pub hold: Hold,
    pub call: CoreCall,
}

/// What an agent asks of the team's node: what it asks of SyncState and the monitor when
/// both are on its own node.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "call", rename_all = "snake_case")]
pub enum CoreCall {
    /// Its own changes, published.
    Publish { changes: Vec<Change> },
    /// A step's output for SyncState, with its changes since it last published.
    Apply {
        output: Box<ExecuteOutput>,
        held: Vec<Change>,
        settle: Option<Box<Settle>>,
    },
    /// Messages it sends, with its changes since it last published.
    Submit {
        messages: Vec<Message>,
        held: Vec<Change>,
    },
    /// Whether it may give this task instruction now.
    Check { instruction: TaskInstruction },
    /// Answered once everything it published or handed over before is stored; `taken`, the
    /// sequence of the message of its inbox it took last (the receipt it waits for), tells the
    /// team's node that its node reads the inbox.
    Stored {
        #[serde(default)]
        taken: Option<u64>,
    },
    /// An answer being written (a glimpse for the live feed; never answered).
    Writing { step: StepId, text: String },
    /// A model call that ended, for the team's call log (the console's step view, the
    /// traces and the metrics read it there); never answered.
    Called {
        record: Box<Call>,
        model: String,
        outcome: CallOutcome,
    },
}

impl CoreCall {
    /// The trace context of the message the call hands over, if it hands one over.
    pub fn traceparent(&self) -> Option<TraceParent> {
        match self {
            CoreCall::Apply { output, .. } => output.send_message.as_ref()?.traceparent,
            CoreCall::Submit { messages, .. } => messages.first()?.traceparent,
            _ => None,
        }
    }
}

/// Why the team's node did not do what an agent asked.
#[derive(Debug, PartialEq, Serialize, Deserialize, thiserror::Error)]
pub enum CoreRefusal {
    /// SyncState refused it.
    #[error(transparent)]
    Sync(SyncError),
    /// The agent runs elsewhere now (the call's hold is not the current one).
    #[error("agent `{0}` no longer runs on the node that asked")]
    NotHeld(AgentId),
    /// What it published could not be stored (the team's node is stopping).
    #[error("the team's store did not store it")]
    NotStored,
    /// The team's node could not be reached or could not act, with why.
    #[error("the team's node did not answer: {0}")]
    Unavailable(String),
}

/// The team's node's answer to a [`ToCore`] call.
pub type CoreAnswer = Result<(), CoreRefusal>;

/// What the team's node tells a node that runs agents for it.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "call", rename_all = "snake_case")]
pub enum ToHost {
    /// Run this agent, carrying on from its record (as the store keeps it: whole, its steps
    /// and waits too).
    Run {
        hold: Hold,
        record: Box<AgentRecord>,
        base_task: TaskId,
    },
    /// A person's verdict on one of its waiting steps.
    Decide {
        agent: AgentId,
        hold: Hold,
        step_id: StepId,
        by: AgentId,
        verdict: Verdict,
    },
    /// A person cancels one of its steps.
    Cancel {
        agent: AgentId,
        hold: Hold,
        step_id: StepId,
        by: AgentId,
        reason: String,
    },
    /// An operator pauses or resumes it.
    Pause {
        agent: AgentId,
        hold: Hold,
        paused: bool,
    },
    /// Stop it once its steps under way have landed and everything it did is stored (it runs
    /// elsewhere next).
    Release { agent: AgentId, hold: Hold },
}

impl ToHost {
    /// The hold the call is made under (none for `Run`, which grants one).
    pub fn hold(&self) -> Option<Hold> {
        match self {
            ToHost::Run { .. } => None,
            ToHost::Decide { hold, .. }
            | ToHost::Cancel { hold, .. }
            | ToHost::Pause { hold, .. }
            | ToHost::Release { hold, .. } => Some(*hold),
        }
    }

    /// The agent the call is about.
    pub fn agent(&self) -> &AgentId {
        match self {
            ToHost::Run { record, .. } => &record.agent.agent_id,
            ToHost::Decide { agent, .. }
            | ToHost::Cancel { agent, .. }
            | ToHost::Pause { agent, .. }
            | ToHost::Release { agent, .. } => agent,
        }
    }
}

/// Why a node that runs agents did not do what the team's node asked.
#[derive(Debug, PartialEq, Serialize, Deserialize, thiserror::Error)]
pub enum HostRefusal {
    #[error(transparent)]
    Verdict(VerdictError),
    #[error(transparent)]
    Cancel(CancelError),
    /// It does not run the agent under that hold (any more).
    #[error("agent `{0}` does not run here")]
    NotHere(AgentId),
    /// It could not, with why.
    #[error("{0}")]
    Failed(String),
}

/// The answer to a [`ToHost`] call.
pub type HostAnswer = Result<(), HostRefusal>;

#[cfg(test)]
mod tests {
    use super::*;
    use cohort_core::report::TaskWritten;
    use cohort_core::state::AgentState;

    #[test]
    fn calls_and_answers_read_back_as_they_were_sent() {
        let hold = Hold { term: 3, token: 7 };
        let call = ToCore {
            agent: AgentId::from("writer"),
            hold,
            call: CoreCall::Check {
                instruction: TaskInstruction::FinishTask {
                    task_id: TaskId::from("t1"),
                    outcome: Default::default(),
                    task_summary: "done".into(),
                    summary_written: Some(Box::new(TaskWritten::ResultsAdded {
                        reports: "- a poem".into(),
                    })),
                },
            },
        };
        let back: ToCore = serde_json::from_slice(&serde_json::to_vec(&call).unwrap()).unwrap();
        assert_eq!(back.hold, hold);
        // What the runtime wrote of a summary crosses to the team's node with the words.
        let CoreCall::Check { instruction } = &back.call else {
            panic!("{:?}", back.call)
        };
        let CoreCall::Check { instruction: sent } = &call.call else {
            unreachable!()
        };
        assert_eq!(instruction, sent);
        let refused: CoreAnswer = Err(CoreRefusal::Sync(SyncError::BaseTask));
        let json = serde_json::to_vec(&refused).unwrap();
        assert_eq!(
            serde_json::from_slice::<CoreAnswer>(&json).unwrap(),
            refused
        );
        // An agent's record goes whole: its steps, not only their ids as the wire state has them.
        let mut agent = cohort_core::state::Agent::from(AgentState::new(
            "writer".into(),
            "W".into(),
            "writer".into(),
            String::new(),
        ));
        agent.add_next_steps(vec![cohort_core::state::StepState::new(
            TaskId::from("t1"),
            cohort_core::ids::StageRef::NoRelative,
            agent.agent_id.clone(),
            cohort_core::state::Executor::Skill(cohort_core::state::Skill::Think),
            "think",
            "about it",
        )]);
        let run = ToHost::Run {
            hold,
            record: Box::new(AgentRecord::of(&agent)),
            base_task: TaskId::from("t0"),
        };
        let ToHost::Run { record, .. } =
            serde_json::from_slice(&serde_json::to_vec(&run).unwrap()).unwrap()
        else {
            panic!("not a run");
        };
        let back = record.into_state();
        assert_eq!(back.agent_step.steps().len(), 1);
        assert_eq!(
            back.next_runnable().map(|s| &s.text_content),
            Some(&"about it".to_owned())
        );
        let not_here: HostAnswer = Err(HostRefusal::NotHere(AgentId::from("writer")));
        let json = serde_json::to_vec(&not_here).unwrap();
        assert_eq!(
            serde_json::from_slice::<HostAnswer>(&json).unwrap(),
            not_here
        );
    }
}
