//! StepOrigin: why a step exists, as a typed fact. The runtime decides on it (whether a step
//! must act, whether it is a second try, which goal a stage's steps serve); a step's intention
//! and text are rendered for its prompt and for people, and never read back.

use crate::ids::{AgentId, StageId, StepId};
use crate::notice::Notice;
use serde::{Deserialize, Serialize};

/// Why a step exists: the message, plan, stage start or runtime event that put it in the queue.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StepOrigin {
    /// Stored by a release before steps carried their origin, or made where the reason does
    /// not matter to any decision (a test's step).
    #[default]
    Unknown,
    /// A message from `from` to digest (process_message).
    Message {
        /// The message's sender.
        from: AgentId,
    },
    /// A message from `from` that is owed a reply (send_message).
    Reply {
        /// The sender awaiting the reply.
        from: AgentId,
    },
    /// A message that asks a manager to act: a person's goal or a task's notice. Ending such
    /// a step without acting would leave the work waiting for ever.
    Act {
        /// Who asks: a person, or the runtime sender of the notice.
        from: AgentId,
        /// The notice acted on; none for a person's goal.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        notice: Option<Box<Notice>>,
        /// A person's goal as they gave it (none for a notice): an add_task's intention is
        /// checked against it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        goal: Option<String>,
        /// The files the person attached to the goal: a task made for it lists them.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        attachments: Vec<crate::attachment::Attachment>,
        /// The second try at it, after the first failed or was refused (there is no third).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        second_try: bool,
    },
    /// A stage started with the agent in it: plan for `goal`.
    StageStart {
        /// The stage that started.
        stage_id: StageId,
        /// The agent's goal in it.
        goal: String,
    },
    /// Planned by the step `by` (planning, reflection, decision).
    Planned {
        /// The step whose plan holds this one.
        by: StepId,
    },
    /// A graph plan's step `after`, named in its `replan`, finished: the agent plans the steps
    /// of that plan (made by step `plan`) that have not started again, from what it learned.
    Replan {
        /// The step after which the plan is made again.
        after: StepId,
        /// The step whose plan is made again.
        plan: StepId,
    },
    /// The agent's last step failed and it had nothing left to run in the stage.
    Recovery {
        /// The step that failed.
        after: StepId,
    },
    /// Every planned step of the stage ran and no summary was written.
    ClosingReflection,
    /// One call of the native tool loop of step `parent`.
    ToolCall {
        /// The step running the tool loop.
        parent: StepId,
    },
    /// A tool returned: decide whether and how to go on using it.
    ToolDecision {
        /// The tool that returned.
        tool_name: String,
    },
    /// A reply the agent waited for from `from` did not come before the wait's deadline.
    NoReply {
        /// The receiver that did not answer, if known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from: Option<AgentId>,
    },
    /// What a person did (a message they sent), recorded as a step that never runs.
    Person,
}

impl StepOrigin {
    /// Whether the step handles a message that asks its agent to act.
    pub fn asks_to_act(&self) -> bool {
        matches!(self, StepOrigin::Act { .. })
    }

    /// Whether the step is the second try at a message that asks to act.
    pub fn is_second_try(&self) -> bool {
        matches!(
            self,
            StepOrigin::Act {
                second_try: true,
                ..
            }
        )
    }

    /// The person whose goal an acting step acts on (none for a runtime notice).
    pub fn goal_from(&self) -> Option<&AgentId> {
        match self {
            StepOrigin::Act {
                from, notice: None, ..
            } => Some(from),
            _ => None,
        }
    }

    /// The goal a person gave, which an acting step acts on (none for a runtime notice).
    pub fn persons_goal(&self) -> Option<&str> {
        match self {
            StepOrigin::Act { goal, .. } => goal.as_deref(),
            _ => None,
        }
    }

    /// The files attached to the goal an acting step acts on.
    pub fn goal_attachments(&self) -> &[crate::attachment::Attachment] {
        match self {
            StepOrigin::Act { attachments, .. } => attachments,
            _ => &[],
        }
    }

    /// The notice an acting step acts on.
    pub fn notice(&self) -> Option<&Notice> {
        match self {
            StepOrigin::Act { notice, .. } => notice.as_deref(),
            _ => None,
        }
    }

    /// The origin of a second try at the same message.
    pub fn second_try(&self) -> Option<StepOrigin> {
        match self {
            StepOrigin::Act {
                from,
                notice,
                goal,
                attachments,
                second_try: false,
            } => Some(StepOrigin::Act {
                from: from.clone(),
                notice: notice.clone(),
                goal: goal.clone(),
                attachments: attachments.clone(),
                second_try: true,
            }),
            _ => None,
        }
    }

    /// Whether the step records one call of a native tool loop (not a step the agent ran
    /// itself).
    pub fn is_tool_call(&self) -> bool {
        matches!(self, StepOrigin::ToolCall { .. })
    }

    /// Whether the step is a recovery decision after a failed step.
    pub fn is_recovery(&self) -> bool {
        matches!(self, StepOrigin::Recovery { .. })
    }

    /// The step of the same agent that made this one: it planned it, failed before it, ran
    /// the tool loop it is a call of, or finished before its plan is made again.
    pub fn made_by(&self) -> Option<&StepId> {
        match self {
            StepOrigin::Planned { by } => Some(by),
            StepOrigin::Replan { after, .. } | StepOrigin::Recovery { after } => Some(after),
            StepOrigin::ToolCall { parent } => Some(parent),
            _ => None,
        }
    }

    /// The agent's goal, on the step that started its part in a stage.
    pub fn stage_goal(&self) -> Option<&str> {
        match self {
            StepOrigin::StageStart { goal, .. } => Some(goal),
            _ => None,
        }
    }
}
