//! Message (SPEC §3), the `<instruction>` payloads a message may carry for the runtime, and
//! `ExecuteOutput`, what an executed step hands to SyncState (SPEC §6).

use crate::ids::{AgentId, StageId, StageRef, TaskId, WaitId};
use crate::notice::Notice;
use crate::report::Written;
use crate::state::{StageAgentState, TokenUsage};
use crate::texts::Texts;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Sender id of system notices from a task (stage completion, task judgement).
pub const TASK_STATE_SENDER: &str = "[TaskState]";

/// Sender id of goals given to the team (`cohort run --goal`, `POST /api/goal`).
pub const OPERATOR: &str = "operator";

/// Sender id of SyncState's answers to ask_info queries.
pub const SYNC_STATE_SENDER: &str = "[SyncState]";

/// One message between agents, people and the runtime (SPEC §3); every delivered message goes
/// to its task's `shared_conversation_pool`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// The task the message belongs to.
    pub task_id: TaskId,
    /// Who sent it: an agent, a person, or a runtime sender such as `[TaskState]`.
    pub sender_id: AgentId,
    /// The agents it is delivered to.
    pub receiver: Vec<AgentId>,
    /// Text for its reader (a model's prompt, a person); for a notice or an instruction it is
    /// rendered from `body`, which is what the runtime acts on.
    pub message: String,
    /// The stage it belongs to, or `no_relative`.
    pub stage_relative: StageRef,
    /// Whether a receiver is to answer it (an LLM agent adds a `send_message` step).
    pub need_reply: bool,
    /// One fresh wait id per receiver when the sender waits for replies.
    pub waiting: Option<Vec<WaitId>>,
    /// The wait id this message answers.
    pub return_waiting_id: Option<WaitId>,
    /// A structured question for a person (text, choice or form); their answer is checked
    /// against it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ask: Option<crate::state::Ask>,
    /// What the runtime reads from a message of its own: a notice or an instruction (boxed:
    /// most messages carry none, and a message is moved and queued by the thousand).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Box<MessageBody>>,
    /// The trace context it travels with (W3C `traceparent`): the span of the step that sent
    /// it, so the step it causes joins that trace wherever it runs (`event::trace_context`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<crate::event::trace_context::TraceParent>,
    /// Files a person attached (kept in the store; the receiver reads them by id).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<crate::attachment::Attachment>,
    /// The model and MCP servers the sender chose for the receiver's work on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub choice: Option<Box<crate::state::Choice>>,
}

/// The typed content of a message the runtime sends (`[TaskState]`): only the runtime sets it,
/// and a receiver acts on it, never on the message's text.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageBody {
    /// A notice from a task to its manager.
    Notice(Notice),
    /// An instruction the receiving agent carries out.
    Instruction(Instruction),
}

impl Message {
    /// A message that needs no reply.
    pub fn notice(
        task_id: TaskId,
        sender: AgentId,
        receiver: Vec<AgentId>,
        stage: StageRef,
        text: String,
    ) -> Self {
        Message {
            task_id,
            sender_id: sender,
            receiver,
            message: text,
            stage_relative: stage,
            need_reply: false,
            waiting: None,
            return_waiting_id: None,
            ask: None,
            body: None,
            traceparent: None,
            attachments: Vec::new(),
            choice: None,
        }
    }

    /// A notice from a task to its manager: its text is rendered from it.
    pub fn from_notice(
        task_id: TaskId,
        sender: AgentId,
        receiver: Vec<AgentId>,
        stage: StageRef,
        notice: Notice,
        t: &Texts,
    ) -> Self {
        Message {
            body: Some(Box::new(MessageBody::Notice(notice.clone()))),
            ..Self::notice(task_id, sender, receiver, stage, notice.render(t))
        }
    }

    /// A message carrying one runtime instruction: its text says what it asks.
    pub fn instruction(
        task_id: TaskId,
        sender: AgentId,
        receiver: Vec<AgentId>,
        stage: StageRef,
        i: &Instruction,
        t: &Texts,
    ) -> Self {
        Message {
            body: Some(Box::new(MessageBody::Instruction(i.clone()))),
            ..Self::notice(task_id, sender, receiver, stage, i.render(t))
        }
    }

    /// The notice the message carries, if the runtime sent one.
    pub fn notice_body(&self) -> Option<&Notice> {
        match self.body.as_deref() {
            Some(MessageBody::Notice(n)) => Some(n),
            _ => None,
        }
    }

    /// The instruction the message carries, if the runtime sent one.
    pub fn instruction_body(&self) -> Option<&Instruction> {
        match self.body.as_deref() {
            Some(MessageBody::Instruction(i)) => Some(i),
            _ => None,
        }
    }

    /// The wait id this receiver must return when answering, if the sender waits.
    pub fn wait_id_for(&self, me: &AgentId) -> Option<&WaitId> {
        let i = self.receiver.iter().position(|r| r == me)?;
        self.waiting.as_ref()?.get(i)
    }
}

/// Instructions the runtime embeds in messages to agents.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Instruction {
    /// Carries what the agent needs to plan: the task's and the stage's intention and this
    /// agent's goal in the stage.
    StartStage {
        /// The stage that starts.
        stage_id: StageId,
        /// The goal of the stage's task.
        #[serde(default)]
        task_intention: String,
        /// The goal of the stage.
        #[serde(default)]
        stage_intention: String,
        /// This agent's goal in the stage, from its `agent_allocation`.
        #[serde(default)]
        goal: String,
        /// The files attached to the task: each agent of the stage may read them.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        attachments: Vec<crate::attachment::Attachment>,
        /// Agents allocated to the stage (the first few), so the agent knows whom it works with.
        #[serde(default)]
        colleagues: Vec<Colleague>,
        /// How many more agents the stage has than `colleagues` lists.
        #[serde(default, skip_serializing_if = "is_zero")]
        colleagues_unlisted: usize,
    },
    /// The stage is finished: the agent drops its steps and working memory of it.
    FinishStage {
        /// The finished stage.
        stage_id: StageId,
    },
    /// The task is finished: the agent drops every step and its working memory of it.
    FinishTask {
        /// The finished task.
        task_id: TaskId,
    },
    /// An operator paused (or resumed) the task: start none of its steps until resumed.
    PauseTask {
        /// The paused or resumed task.
        task_id: TaskId,
        /// `true` to pause, `false` to resume.
        paused: bool,
    },
    /// Note a task (and a stage, if given) in the agent's `working_memory`, e.g. when it joins
    /// a task's group.
    UpdateWorkingMemory {
        /// The task to note.
        task_id: TaskId,
        /// The stage to note under it, if any.
        stage_id: Option<StageRef>,
    },
    /// A tool call returned: insert a `tool_decision` step to decide whether and how to go on.
    AddToolDecision {
        /// The tool whose call returned.
        tool_name: String,
    },
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// One agent of a stage as a start_stage instruction lists it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Colleague {
    /// The agent working alongside in the stage.
    pub agent_id: AgentId,
    /// Its role, from its AgentState.
    pub role: String,
    /// Its goal in the stage.
    pub goal: String,
}

impl Instruction {
    /// What the instruction asks, for a person reading the conversation (the receiver acts on
    /// the typed instruction, not on this).
    pub fn render(&self, t: &Texts) -> String {
        match self {
            Instruction::StartStage { stage_id, goal, .. } => {
                t.instruction_start_stage(stage_id, goal)
            }
            Instruction::FinishStage { stage_id } => t.instruction_finish_stage(stage_id),
            Instruction::FinishTask { task_id } => t.instruction_finish_task(task_id),
            Instruction::PauseTask { task_id, paused } => match paused {
                true => t.instruction_pause_task(task_id),
                false => t.instruction_resume_task(task_id),
            },
            Instruction::UpdateWorkingMemory { task_id, .. } => {
                t.instruction_update_memory(task_id)
            }
            Instruction::AddToolDecision { tool_name } => t.instruction_tool_decision(tool_name),
        }
    }
}

impl Message {
    /// A message stored before messages carried a typed body (stored data of earlier
    /// releases): a runtime instruction was then JSON inside the text, which is read once,
    /// here, as the message is loaded again. Nothing else reads a message's text.
    pub fn upgrade_stored(&mut self) {
        if self.body.is_some() || self.sender_id.as_str() != TASK_STATE_SENDER {
            return;
        }
        let json = self
            .message
            .split_once("<instruction>")
            .and_then(|(_, rest)| rest.split_once("</instruction>"))
            .map(|(json, _)| json);
        if let Some(i) = json.and_then(|j| serde_json::from_str(j).ok()) {
            self.body = Some(Box::new(MessageBody::Instruction(i)));
        }
    }
}

/// One stage as `add_stage` or `retry_stage` describes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StagePlan {
    /// The stage's goal (`stage_intention`).
    pub stage_intention: String,
    /// Who works in the stage: `{agent_id: that agent's goal}`.
    pub agent_allocation: BTreeMap<AgentId, String>,
}

/// How a finished task ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum TaskOutcome {
    /// The task reached its goal.
    #[default]
    Finished,
    /// The task was closed without reaching its goal.
    Failed,
}

/// The task_manager skill's instructions (`<task_instruction>{"action": …}`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum TaskInstruction {
    /// Create a task with the asking agent as its manager.
    AddTask {
        /// Chosen by the skill so the step that created the task records its id.
        #[serde(default = "TaskId::random")]
        task_id: TaskId,
        /// The new task's name.
        #[serde(default)]
        task_name: String,
        /// The new task's goal.
        task_intention: String,
        /// The person whose goal the task serves, told how it ends. Set by the skill from the
        /// step's origin; whatever a model writes here is replaced.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        requested_by: Option<AgentId>,
        /// The step that acted on the goal (or notice) the task serves: its trace's root. Set
        /// by the skill; whatever a model writes here is replaced.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        goal_step: Option<crate::ids::StepId>,
        /// The files attached to that goal: the task lists them. Set by the skill; whatever a
        /// model writes here is replaced.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        attachments: Vec<crate::attachment::Attachment>,
        /// The trace that step is in, which the task joins. Set by the skill; what a model
        /// writes here is replaced (and never refuses the answer: read leniently).
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "crate::event::trace_context::lenient_trace"
        )]
        trace_id: Option<crate::event::trace::TraceId>,
    },
    /// Append stages to a task's `stage_list`.
    AddStage {
        /// The task to extend.
        task_id: TaskId,
        /// The new stages, in order.
        stages: Vec<StagePlan>,
    },
    /// Mark a stage finished and start the next one (or ask for the task's judgement).
    FinishStage {
        /// The stage's task.
        task_id: TaskId,
        /// The stage to finish.
        stage_id: StageId,
    },
    /// End a task with its summary.
    FinishTask {
        /// The task to end.
        task_id: TaskId,
        /// What the task gave, for the operator (`task_summary`).
        #[serde(default)]
        task_summary: String,
        /// Whether it reached its goal.
        #[serde(default)]
        outcome: TaskOutcome,
        /// What the runtime wrote of the summary beside the manager's words (see
        /// [`TaskWritten`](crate::report::TaskWritten)). Set by the skill; whatever a model
        /// writes here is replaced.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        summary_written: Option<Box<crate::report::TaskWritten>>,
    },
    /// Replace a failed stage with a new one right after it, with a corrected allocation.
    RetryStage {
        /// The stage's task.
        task_id: TaskId,
        /// The stage to retry.
        stage_id: StageId,
        /// A new goal for the retry; the old stage's when absent.
        #[serde(default)]
        stage_intention: Option<String>,
        /// The retry's `{agent_id: goal}`.
        agent_allocation: BTreeMap<AgentId, String>,
    },
}

impl TaskInstruction {
    /// The action's name, as the answer spells it (`"action": …`).
    pub fn action(&self) -> &'static str {
        match self {
            TaskInstruction::AddTask { .. } => "add_task",
            TaskInstruction::AddStage { .. } => "add_stage",
            TaskInstruction::FinishStage { .. } => "finish_stage",
            TaskInstruction::FinishTask { .. } => "finish_task",
            TaskInstruction::RetryStage { .. } => "retry_stage",
        }
    }

    /// The task the instruction is about (for add_task, the one it creates).
    pub fn task(&self) -> &TaskId {
        match self {
            TaskInstruction::AddTask { task_id, .. }
            | TaskInstruction::AddStage { task_id, .. }
            | TaskInstruction::FinishStage { task_id, .. }
            | TaskInstruction::FinishTask { task_id, .. }
            | TaskInstruction::RetryStage { task_id, .. } => task_id,
        }
    }
}

/// The agent_manager skill's instructions (`<agent_instruction>{"action": …}`, SPEC §6).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum AgentInstruction {
    /// Start a new live agent from one of the team's agent templates.
    InitNewAgent {
        /// The agent template to instantiate.
        template: String,
        /// The new agent's id.
        agent_id: AgentId,
        /// Display name; the agent id when absent.
        #[serde(default)]
        name: Option<String>,
    },
    /// Add an existing agent to a task's group.
    AddTaskParticipant {
        /// The task whose group the agent joins.
        task_id: TaskId,
        /// The agent to add.
        agent_id: AgentId,
    },
}

/// The eleven ask_info queries (`<ask_info>{"type": …}`, SPEC §7).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AskInfoQuery {
    /// The tasks the asker manages, with their stages.
    ManagedTasks,
    /// The tasks the asker takes part in, with the stages it is allocated in.
    JoinedTasks,
    /// One task.
    Task {
        /// The task asked about.
        task_id: TaskId,
    },
    /// One stage. Stage ids are unique, so the task id may be left out.
    Stage {
        /// The stage's task, if the asker gave it.
        #[serde(default)]
        task_id: Option<TaskId>,
        /// The stage asked about.
        stage_id: StageId,
    },
    /// The agent templates a new agent can be started from.
    AgentTemplates,
    /// Every agent's profile, briefly.
    AllAgentProfiles,
    /// Every agent's full profile, with the running stages it works in.
    TeamProfiles,
    /// The profiles of one task's group.
    TaskGroupProfiles {
        /// The task whose `task_group` is listed.
        task_id: TaskId,
    },
    /// The profiles of the agents allocated in one stage.
    StageProfiles {
        /// The stage's task, if the asker gave it.
        #[serde(default)]
        task_id: Option<TaskId>,
        /// The stage whose agents are listed.
        stage_id: StageId,
    },
    /// The full AgentState of the given agents.
    AgentStates {
        /// The agents asked about.
        agent_ids: Vec<AgentId>,
    },
    /// Every skill and tool with its description.
    SkillsAndTools,
}

/// An ask_info query as SyncState receives it: where the asking step runs, and the wait id
/// the answer must return.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AskInfoRequest {
    /// What is asked.
    #[serde(flatten)]
    pub query: AskInfoQuery,
    /// The wait id the answering message returns (`return_waiting_id`).
    pub waiting_id: WaitId,
    /// The task of the asking step; the answer is sent in it.
    pub sender_task_id: TaskId,
    /// The stage of the asking step, or `no_relative`.
    pub sender_stage: StageRef,
}

/// `update_stage_agent_state`: set one agent's state in a stage (`every_agent_state`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StageAgentUpdate {
    /// The stage's task.
    pub task_id: TaskId,
    /// The stage the state is set in.
    pub stage_id: StageId,
    /// The agent whose state in the stage changes.
    pub agent_id: AgentId,
    /// Its new state in the stage.
    pub state: StageAgentState,
    /// Set with `failed` when the agent cannot go on in the stage (its last step there failed
    /// and nothing is left to run): SyncState tells the manager, who can retry the stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stuck: Option<String>,
}

/// `send_shared_info`: one line for a task's `shared_info_pool`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SharedInfoUpdate {
    /// The task whose pool gets the line.
    pub task_id: TaskId,
    /// The stage the line belongs to, or `no_relative`.
    pub stage_id: StageRef,
    /// The agent that shares it.
    pub agent_id: AgentId,
    /// That agent's role.
    pub role: String,
    /// What is shared.
    pub content: String,
}

/// `update_stage_agent_completion`: one agent's completion summary for a stage.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompletionUpdate {
    /// The stage's task.
    pub task_id: TaskId,
    /// The stage the agent completed its part of.
    pub stage_id: StageId,
    /// The reporting agent.
    pub agent_id: AgentId,
    /// What it did and found, in its own words, for the manager's judgement of the stage
    /// (empty when the runtime composed the report: see `written`).
    pub completion_summary: String,
    /// What its work steps in the stage produced (the newest few, as their results recorded
    /// them): what a judgement of the task checks its summary against, since a summary's own
    /// words may be only news of the work.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub results: Vec<String>,
    /// What the runtime added to the summary (its results, or the whole report), shown with
    /// it (`Written::render`) and never written into it.
    #[serde(default, skip_serializing_if = "Written::is_own")]
    pub written: Written,
}

/// What one executed step asks SyncState to do. Every field is optional.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ExecuteOutput {
    /// The agent whose step produced this (SyncState checks permissions against it).
    pub agent_id: Option<AgentId>,
    /// The task of the step that produced this (`add_task` is given only in the base task).
    pub task_id: Option<TaskId>,
    /// Set this agent's state in a stage.
    pub update_stage_agent_state: Option<StageAgentUpdate>,
    /// Append a line to a task's shared info pool.
    pub send_shared_info: Option<SharedInfoUpdate>,
    /// Store this agent's completion summary for a stage.
    pub update_stage_agent_completion: Option<CompletionUpdate>,
    /// A message to route.
    pub send_message: Option<Message>,
    /// A task_manager action to carry out.
    pub task_instruction: Option<TaskInstruction>,
    /// An agent_manager action to carry out.
    pub agent_instruction: Option<AgentInstruction>,
    /// A query SyncState answers with a message carrying `waiting_id`.
    pub ask_info: Option<AskInfoRequest>,
    /// Tokens the step spent, added to its task's total.
    pub token_usage: Option<(TaskId, TokenUsage)>,
    /// The step's model endpoint stayed down past `waits.model_secs`: why. The step's task
    /// ends failed with it (the base task goes on).
    pub endpoint_down: Option<String>,
    /// The repair rules that fired on the step (counted in its task).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repairs: Vec<crate::policy::Repair>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instruction_travels_typed_and_reads_as_text() {
        let i = Instruction::FinishStage {
            stage_id: "s1".into(),
        };
        let m = Message::instruction(
            "t".into(),
            TASK_STATE_SENDER.into(),
            vec!["a".into()],
            StageRef::NoRelative,
            &i,
            &crate::texts::Texts::english(),
        );
        assert_eq!(m.instruction_body(), Some(&i));
        assert!(!m.message.contains('{'), "{}", m.message);
        let wire = serde_json::to_value(&m).unwrap();
        assert_eq!(
            wire["body"],
            serde_json::json!({"instruction": {"finish_stage": {"stage_id": "s1"}}})
        );
    }

    #[test]
    fn a_stored_message_of_an_earlier_release_gets_its_instruction() {
        let mut m = Message::notice(
            "t".into(),
            TASK_STATE_SENDER.into(),
            vec!["a".into()],
            StageRef::NoRelative,
            r#"<instruction>{"finish_stage":{"stage_id":"s1"}}</instruction>"#.into(),
        );
        m.upgrade_stored();
        assert_eq!(
            m.instruction_body(),
            Some(&Instruction::FinishStage {
                stage_id: "s1".into()
            })
        );
        // The same text from anyone else stays text.
        let mut from_person = Message {
            sender_id: "op".into(),
            body: None,
            ..m.clone()
        };
        from_person.upgrade_stored();
        assert_eq!(from_person.body, None);
    }

    #[test]
    fn task_instruction_reads_the_action_tag() {
        let v = serde_json::json!({"action": "finish_stage", "task_id": "t", "stage_id": "s"});
        let i: TaskInstruction = serde_json::from_value(v).unwrap();
        assert_eq!(
            i,
            TaskInstruction::FinishStage {
                task_id: "t".into(),
                stage_id: "s".into()
            }
        );
        let v = serde_json::json!({"action": "add_task", "task_intention": "x"});
        match serde_json::from_value::<TaskInstruction>(v).unwrap() {
            TaskInstruction::AddTask { task_intention, .. } => assert_eq!(task_intention, "x"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn wait_id_is_picked_by_receiver_index() {
        let mut m = Message::notice(
            "t".into(),
            "a".into(),
            vec!["b".into(), "c".into()],
            StageRef::NoRelative,
            "hi".into(),
        );
        assert_eq!(m.wait_id_for(&"c".into()), None);
        m.waiting = Some(vec!["w1".into(), "w2".into()]);
        assert_eq!(m.wait_id_for(&"c".into()), Some(&WaitId::from("w2")));
        assert_eq!(m.wait_id_for(&"z".into()), None);
    }
}
