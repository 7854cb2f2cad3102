//! The seeds' event stream of one task, made from the typed changes (one source of truth):
//! seed 000 §7.1's FLOW_START/STOP/SUCCESS/FAILED/CANCEL, STEP_INIT/INPUT/OUTPUT/ERROR/CANCEL/
//! WAITING_FOR_START/WAITING_FOR_PARAM and TEXT_ADD, with seed 004's `agent_stream_done` at the
//! end of an answer's text and its process fields (`phase`, `status`) on the step events.
//!
//! A [`TaskFlow`] is a reader's fold of one task: it keeps what the stream needs to know of the
//! task and its steps (their state, the input a step's STEP_INPUT carries, the text of an
//! answer being written) and turns each change into the flow events it means. Every event comes
//! from one step or task moving from one state to another ([`step_moved`], [`task_moved`]), so
//! catching up from the states (a new reader, a reader that fell behind) and following the
//! changes one by one say the same thing in the same order.

use super::{Change, StepChange, TaskChange};
use crate::ids::{AgentId, StepId, TaskId};
use crate::policy::ToolRisk;
use crate::state::{
    ExecutionState, Executor, StepExecutionState, StepResult, StepState, TaskState,
};
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::HashMap;

/// The most bytes of JSON a step's input or output carries in one event; past it the event
/// carries the JSON's start as text, with `cut: true`.
pub const FLOW_VALUE_BYTES: usize = 16 * 1024;

/// The most bytes of an answer being written that a fold keeps (to send a late reader what was
/// written before it came); past it, deltas go on but a late reader's catch-up starts cut.
pub const TEXT_KEPT_BYTES: usize = 256 * 1024;

/// The most steps of one task a fold follows; past it the oldest that ended are forgotten.
pub const FLOW_STEPS: usize = 4_096;

/// The plan's risk at FLOW_START (seed 000 §3.1): the highest risk of the tools its agents may
/// call, and the tool that sets it.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct FlowRisk {
    /// The highest risk found, with why.
    #[serde(flatten)]
    pub risk: ToolRisk,
    /// The tool that has it, as `server/tool`.
    pub tool: String,
    /// Tool servers whose tools could not be told yet (not started, or down): their risk is
    /// not in the figure.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unknown_servers: Vec<String>,
}

/// The plan's risk from what its agents' tool servers are known to offer: each server with
/// the risk of each of its tools, or `None` when it was not described yet. `None` when no tool
/// is known at all (a plan without tools, or servers not described yet) and no server is
/// unknown.
pub fn plan_risk<'a>(
    servers: impl IntoIterator<Item = (&'a str, Option<Vec<(String, ToolRisk)>>)>,
    t: &crate::texts::Texts,
) -> Option<FlowRisk> {
    let mut highest: Option<(String, ToolRisk)> = None;
    let mut unknown_servers = Vec::new();
    for (server, tools) in servers {
        let Some(tools) = tools else {
            unknown_servers.push(server.to_owned());
            continue;
        };
        for (tool, risk) in tools {
            if highest.as_ref().is_none_or(|(_, h)| risk.risk > h.risk) {
                highest = Some((format!("{server}/{tool}"), risk));
            }
        }
    }
    let (tool, risk) = match highest {
        Some(h) => h,
        None if unknown_servers.is_empty() => return None,
        // Nothing known: the servers not described may do anything.
        None => (
            String::new(),
            ToolRisk {
                risk: crate::policy::Risk::High,
                reason: t.risk_servers_not_described(),
            },
        ),
    };
    Some(FlowRisk {
        risk,
        tool,
        unknown_servers,
    })
}

/// Why a flow stopped (FLOW_STOP).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// A person paused the task.
    Paused,
    /// A step waits for a person (an approval, a plan check, arguments to fill).
    WaitingForPerson,
}

/// What seed 004's process events call a phase's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PhaseStatus {
    /// The step runs.
    Running,
    /// It ended with a result.
    Completed,
    /// It failed.
    Error,
}

/// The fields every step event carries: which step, whose, and its phase (seed 004: the
/// executor, a skill's or a tool server's name).
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct StepRef {
    /// The step.
    pub step_id: StepId,
    /// The agent whose step it is.
    pub agent_id: AgentId,
    /// Its executor's name.
    pub phase: String,
}

/// One event of a task's flow. On the wire `{"event": "FLOW_START", "task_id", …}`; the
/// fields are named as in the states (`task_id`, `step_id`, …), and their JSON schemas are in
/// `docs/flow-events.schema.json`.
#[allow(missing_docs)]
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(tag = "event", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum FlowEvent {
    /// The task's flow began (the task was made), with the risk of what its plan may call.
    FlowStart {
        task_id: TaskId,
        #[serde(skip_serializing_if = "Option::is_none")]
        risk: Option<FlowRisk>,
    },
    /// The task stopped for a person: paused, or a step waits for one.
    FlowStop { task_id: TaskId, reason: StopReason },
    /// The task ended with its goal judged met.
    FlowSuccess {
        task_id: TaskId,
        #[serde(skip_serializing_if = "Option::is_none")]
        summary: Option<String>,
        /// What the runtime wrote of the summary beside the manager's words.
        #[serde(skip_serializing_if = "Option::is_none")]
        summary_written: Option<Box<crate::report::TaskWritten>>,
    },
    /// The task ended without its goal.
    FlowFailed {
        task_id: TaskId,
        #[serde(skip_serializing_if = "Option::is_none")]
        why: Option<String>,
    },
    /// A person cancelled the task.
    FlowCancel { task_id: TaskId },
    /// A step was made.
    StepInit {
        #[serde(flatten)]
        step: StepRef,
        intention: String,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        depends_on: Vec<StepId>,
    },
    /// A step started: a tool step's call arguments, a skill step's ask.
    StepInput {
        #[serde(flatten)]
        step: StepRef,
        status: PhaseStatus,
        input: Value,
    },
    /// A step ended with its result.
    StepOutput {
        #[serde(flatten)]
        step: StepRef,
        status: PhaseStatus,
        output: Value,
    },
    /// A step failed.
    StepError {
        #[serde(flatten)]
        step: StepRef,
        status: PhaseStatus,
        error: String,
    },
    /// A step was set aside: cancelled, or dropped as its stage or task ended.
    StepCancel {
        #[serde(flatten)]
        step: StepRef,
        reason: String,
    },
    /// A step waits for a person to approve its tool call or plan (the request holds the risk).
    StepWaitingForStart {
        #[serde(flatten)]
        step: StepRef,
        request: Value,
    },
    /// A step waits for a person to fill in its call's arguments, or to answer what its call's
    /// server asks.
    StepWaitingForParam {
        #[serde(flatten)]
        step: StepRef,
        form: Value,
    },
    /// More of an answer being written: `delta` goes at character `offset` of the step's text
    /// (a client keeps the text's first `offset` characters and appends; an answer asked for
    /// again starts at 0).
    TextAdd {
        #[serde(flatten)]
        step: StepRef,
        offset: usize,
        delta: String,
    },
    /// The answer's text is whole (seed 004's name).
    #[serde(rename = "agent_stream_done")]
    TextDone {
        #[serde(flatten)]
        step: StepRef,
        chars: usize,
    },
}

impl FlowEvent {
    /// The event's name as seed 000 names it (`agent_stream_done` for the end of a text).
    pub fn name(&self) -> &'static str {
        match self {
            FlowEvent::FlowStart { .. } => "FLOW_START",
            FlowEvent::FlowStop { .. } => "FLOW_STOP",
            FlowEvent::FlowSuccess { .. } => "FLOW_SUCCESS",
            FlowEvent::FlowFailed { .. } => "FLOW_FAILED",
            FlowEvent::FlowCancel { .. } => "FLOW_CANCEL",
            FlowEvent::StepInit { .. } => "STEP_INIT",
            FlowEvent::StepInput { .. } => "STEP_INPUT",
            FlowEvent::StepOutput { .. } => "STEP_OUTPUT",
            FlowEvent::StepError { .. } => "STEP_ERROR",
            FlowEvent::StepCancel { .. } => "STEP_CANCEL",
            FlowEvent::StepWaitingForStart { .. } => "STEP_WAITING_FOR_START",
            FlowEvent::StepWaitingForParam { .. } => "STEP_WAITING_FOR_PARAM",
            FlowEvent::TextAdd { .. } => "TEXT_ADD",
            FlowEvent::TextDone { .. } => "agent_stream_done",
        }
    }

    /// The name seed 004 gives it: `agent_stream_chunk` for text, `process_event` for a step
    /// starting or ending; the others keep seed 000's.
    pub fn seed004_name(&self) -> &'static str {
        match self {
            FlowEvent::TextAdd { .. } => "agent_stream_chunk",
            FlowEvent::StepInput { .. }
            | FlowEvent::StepOutput { .. }
            | FlowEvent::StepError { .. } => "process_event",
            other => other.name(),
        }
    }
}

/// A JSON value as an event carries it: whole up to [`FLOW_VALUE_BYTES`], else its start.
pub fn bounded(v: &Value) -> Value {
    let text = v.to_string();
    if text.len() <= FLOW_VALUE_BYTES {
        return v.clone();
    }
    let mut end = FLOW_VALUE_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    json!({"cut": true, "bytes": text.len(), "start": &text[..end]})
}

/// What a fold keeps of one step.
#[derive(Clone, Debug, PartialEq)]
pub struct StepView {
    /// The agent whose step it is.
    pub agent_id: AgentId,
    /// What runs it.
    pub executor: Executor,
    /// What it is for.
    pub intention: String,
    /// The steps it waits for.
    pub depends_on: Vec<StepId>,
    /// Where it is.
    pub state: StepExecutionState,
    /// What STEP_INPUT carries (the tool call, or the skill's ask).
    input: Value,
    /// STEP_INPUT went out (a step approved while queued may end without running).
    input_sent: bool,
    /// The answer's text written so far (at most [`TEXT_KEPT_BYTES`]), whether that is all of
    /// it, and its length in characters (which goes on past the cap).
    text: String,
    text_whole: bool,
    text_chars: usize,
    /// The event that told where the step is now (waiting, its output, error or cancel).
    last: Option<FlowEvent>,
}

impl StepView {
    /// A step as it is made (before it moves).
    pub fn of(s: &StepState) -> StepView {
        StepView {
            agent_id: s.agent_id.clone(),
            executor: s.executor.clone(),
            intention: s.step_intention.clone(),
            depends_on: s.depends_on.clone(),
            state: StepExecutionState::Init,
            input: input_of(s.instruction_content.as_ref(), s),
            input_sent: false,
            text: String::new(),
            text_whole: true,
            text_chars: 0,
            last: None,
        }
    }

    fn reference(&self, id: &StepId) -> StepRef {
        StepRef {
            step_id: id.clone(),
            agent_id: self.agent_id.clone(),
            phase: self.executor.name().to_owned(),
        }
    }
}

/// A tool step's input is its call; a skill step's, what it is asked.
fn input_of(instruction: Option<&Value>, s: &StepState) -> Value {
    match instruction {
        Some(call) => bounded(call),
        None => bounded(&json!({"intention": s.step_intention, "text": s.text_content})),
    }
}

/// The events of step `id` moving from `from` (`None`: it is new) to where `view` is now,
/// with `result` its result there. `view` is updated (input sent, text ended).
pub fn step_moved(
    id: &StepId,
    view: &mut StepView,
    from: Option<StepExecutionState>,
    result: Option<&StepResult>,
) -> Vec<FlowEvent> {
    use StepExecutionState as S;
    let mut out = Vec::new();
    let step = view.reference(id);
    if from.is_none() {
        out.push(FlowEvent::StepInit {
            step: step.clone(),
            intention: view.intention.clone(),
            depends_on: view.depends_on.clone(),
        });
    }
    let to = view.state;
    if from == Some(to) {
        return out;
    }
    let ran = matches!(to, S::Running | S::Finished | S::Failed);
    let dropped = result.is_some_and(|r| r.dropped);
    if ran && !dropped && !view.input_sent {
        view.input_sent = true;
        out.push(FlowEvent::StepInput {
            step: step.clone(),
            status: PhaseStatus::Running,
            input: view.input.clone(),
        });
    }
    if to != S::Running && view.text_chars > 0 {
        out.push(FlowEvent::TextDone {
            step: step.clone(),
            chars: view.text_chars,
        });
        view.text.clear();
        view.text_chars = 0;
        view.text_whole = true;
    }
    let told = arrived(step, to, result, dropped);
    out.extend(told.clone());
    view.last = told;
    out
}

/// The event that tells a step arrived at `to` with `result` there (`dropped`: removed before
/// it ran); none for a state that is told by the input alone.
fn arrived(
    step: StepRef,
    to: StepExecutionState,
    result: Option<&StepResult>,
    dropped: bool,
) -> Option<FlowEvent> {
    use StepExecutionState as S;
    let output = || result.map(|r| bounded(&Value::Object(r.output.clone())));
    // Only the request a person is asked to decide on, each bounded on its own.
    let request = |key: &str| result.and_then(|r| r.output.get(key)).map(bounded);
    match to {
        S::Init | S::Pending | S::Running => None,
        S::WaitingForApproval => Some(FlowEvent::StepWaitingForStart {
            step,
            request: request("waiting_for_approval")
                .or_else(|| request("waiting_for_plan_check"))
                .unwrap_or(Value::Null),
        }),
        // Missing arguments, or a server's question during the call.
        S::WaitingForParam => Some(FlowEvent::StepWaitingForParam {
            step,
            form: request(crate::state::PARAMS_KEY)
                .or_else(|| request(crate::state::ELICITATION_KEY))
                .unwrap_or(Value::Null),
        }),
        S::Finished => Some(FlowEvent::StepOutput {
            step,
            status: PhaseStatus::Completed,
            output: output().unwrap_or(Value::Null),
        }),
        S::Failed if dropped => Some(FlowEvent::StepCancel {
            step,
            reason: error_of(result).unwrap_or_else(|| "its work ended first".into()),
        }),
        S::Failed => Some(FlowEvent::StepError {
            step,
            status: PhaseStatus::Error,
            error: error_of(result).unwrap_or_default(),
        }),
        S::Cancelled => Some(FlowEvent::StepCancel {
            step,
            reason: result
                .and_then(|r| r.cancelled.as_ref().map(|c| c.reason.clone()))
                .or_else(|| error_of(result))
                .unwrap_or_default(),
        }),
    }
}

fn error_of(result: Option<&StepResult>) -> Option<String> {
    result.and_then(|r| r.error.clone())
}

/// What a fold keeps of the task itself.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TaskView {
    /// Its flow began: the task was made (FLOW_START was told).
    pub begun: bool,
    /// Where the task is in its lifecycle.
    pub state: ExecutionState,
    /// A person paused it.
    pub paused: bool,
    /// The manager's summary, once it has one.
    pub summary: Option<String>,
    /// What the runtime wrote of it beside the manager's words.
    pub summary_written: Option<Box<crate::report::TaskWritten>>,
    /// Why it failed, when it did.
    pub why: Option<String>,
}

impl TaskView {
    /// What a fold keeps of `t`.
    pub fn of(t: &TaskState) -> TaskView {
        TaskView {
            begun: true,
            state: t.execution_state,
            paused: t.paused,
            summary: t.task_summary.clone(),
            summary_written: t.summary_written.clone(),
            why: t.outcome.as_ref().and_then(|o| o.why.clone()),
        }
    }

    /// A task just made: begun, nothing else yet.
    fn begun() -> TaskView {
        TaskView {
            begun: true,
            ..TaskView::default()
        }
    }
}

/// The events of task `id` moving from `from` to `to`; `risk` tells the plan's risk when it
/// starts.
pub fn task_moved(
    id: &TaskId,
    from: &TaskView,
    to: &TaskView,
    risk: &dyn Fn() -> Option<FlowRisk>,
) -> Vec<FlowEvent> {
    let mut out = Vec::new();
    let task_id = id.clone();
    if !from.begun && to.begun {
        out.push(FlowEvent::FlowStart {
            task_id: task_id.clone(),
            risk: risk(),
        });
    }
    if to.paused && !from.paused && !to.state.is_over() {
        out.push(FlowEvent::FlowStop {
            task_id: task_id.clone(),
            reason: StopReason::Paused,
        });
    }
    if from.state != to.state {
        match to.state {
            ExecutionState::Finished => out.push(FlowEvent::FlowSuccess {
                task_id,
                summary: to.summary.clone(),
                summary_written: to.summary_written.clone(),
            }),
            ExecutionState::Failed => out.push(FlowEvent::FlowFailed {
                task_id,
                why: to.why.clone().or_else(|| to.summary.clone()),
            }),
            ExecutionState::Cancelled => out.push(FlowEvent::FlowCancel { task_id }),
            ExecutionState::Init | ExecutionState::Running => {}
        }
    }
    out
}

/// A reader's fold of one task's flow (see the module docs).
#[derive(Clone, Debug)]
pub struct TaskFlow {
    task_id: TaskId,
    task: TaskView,
    steps: HashMap<StepId, StepView>,
    /// Step ids in the order they were made, for catching up and forgetting the oldest.
    order: Vec<StepId>,
    /// The risk FLOW_START told, told again to a late reader.
    risk: Option<FlowRisk>,
}

impl TaskFlow {
    /// A fold of a task not seen yet (nothing has happened to it).
    pub fn new(task_id: TaskId) -> TaskFlow {
        TaskFlow {
            task_id,
            task: TaskView::default(),
            steps: HashMap::new(),
            order: Vec::new(),
            risk: None,
        }
    }

    /// Keeps the risk a FLOW_START among `events` told.
    fn remember_risk(&mut self, events: &[FlowEvent]) {
        for e in events {
            if let FlowEvent::FlowStart { risk, .. } = e {
                self.risk = risk.clone();
            }
        }
    }

    /// The task it follows.
    pub fn task_id(&self) -> &TaskId {
        &self.task_id
    }

    /// Whether step `id` is one of this task's.
    pub fn has_step(&self, id: &StepId) -> bool {
        self.steps.contains_key(id)
    }

    /// Brings the fold to the states given (the task as it is and its steps in the order they
    /// were made) and returns the events of everything that moved since the fold last saw it:
    /// from a new fold, the whole flow so far.
    pub fn catch_up<'a>(
        &mut self,
        task: Option<&TaskState>,
        steps: impl IntoIterator<Item = &'a StepState>,
        risk: &dyn Fn() -> Option<FlowRisk>,
    ) -> Vec<FlowEvent> {
        let mut out = Vec::new();
        let to = task.map(TaskView::of).unwrap_or_else(|| self.task.clone());
        // The start first, a stop or the end after the steps.
        let start = match self.task.begun {
            true => self.task.clone(),
            false => TaskView::begun(),
        };
        if to.begun {
            out.extend(task_moved(&self.task_id, &self.task, &start, risk));
        }
        for s in steps {
            out.extend(self.step_to(s));
        }
        out.extend(task_moved(&self.task_id, &start, &to, risk));
        self.task = to;
        self.remember_risk(&out);
        out
    }

    /// The events of one step moving to where `s` is (a new step is made first).
    fn step_to(&mut self, s: &StepState) -> Vec<FlowEvent> {
        let from = self.steps.get(&s.step_id).map(|v| v.state);
        if from.is_none() {
            self.add(s);
        }
        let view = self.steps.get_mut(&s.step_id).expect("added above");
        view.state = s.execution_state;
        if let Some(call) = &s.instruction_content {
            view.input = bounded(call);
        }
        step_moved(&s.step_id, view, from, s.execute_result.as_ref())
    }

    fn add(&mut self, s: &StepState) {
        if self.order.len() >= FLOW_STEPS {
            self.forget_oldest_ended();
        }
        self.order.push(s.step_id.clone());
        self.steps.insert(s.step_id.clone(), StepView::of(s));
    }

    fn forget_oldest_ended(&mut self) {
        let steps = &self.steps;
        let at = self
            .order
            .iter()
            .position(|id| steps.get(id).is_none_or(|v| v.state.is_over()))
            .unwrap_or(0);
        let id = self.order.remove(at);
        self.steps.remove(&id);
    }

    /// The events one change means for this task (none for a change to anything else).
    pub fn apply(
        &mut self,
        change: &Change,
        risk: &dyn Fn() -> Option<FlowRisk>,
    ) -> Vec<FlowEvent> {
        match change {
            Change::Task(t) if change.task_id() == Some(&self.task_id) => self.task_change(t, risk),
            Change::Step(s) => self.step_change(s),
            _ => Vec::new(),
        }
    }

    fn task_change(
        &mut self,
        t: &TaskChange,
        risk: &dyn Fn() -> Option<FlowRisk>,
    ) -> Vec<FlowEvent> {
        let mut to = self.task.clone();
        match t {
            TaskChange::Created { task } => to = TaskView::of(task),
            TaskChange::State {
                execution_state,
                task_summary,
                summary_written,
                outcome,
                ..
            } => {
                to.state = *execution_state;
                if task_summary.is_some() {
                    to.summary = task_summary.clone();
                    to.summary_written = summary_written.clone();
                }
                to.why = outcome.as_ref().and_then(|o| o.why.clone());
            }
            TaskChange::Paused { paused, .. } => to.paused = *paused,
            _ => return Vec::new(),
        }
        let out = task_moved(&self.task_id, &self.task, &to, risk);
        self.task = to;
        self.remember_risk(&out);
        out
    }

    fn step_change(&mut self, s: &StepChange) -> Vec<FlowEvent> {
        match s {
            StepChange::Added { step, .. } if step.task_id == self.task_id => {
                // A step of a task not seen made begins its flow (a reader may come in
                // between the task's creation and its first step).
                let mut out = Vec::new();
                if !self.task.begun {
                    let start = TaskView::begun();
                    out = task_moved(&self.task_id, &self.task, &start, &|| None);
                    self.task = start;
                }
                out.extend(self.step_to(step));
                out
            }
            StepChange::Started { step_id, .. } => {
                self.move_step(step_id, StepExecutionState::Running, None)
            }
            StepChange::Updated {
                step_id, update, ..
            } => {
                if let (Some(view), Some(call)) =
                    (self.steps.get_mut(step_id), &update.instruction_content)
                {
                    view.input = bounded(call);
                }
                match update.execution_state {
                    Some(to) => self.move_step(step_id, to, update.execute_result.as_deref()),
                    None => Vec::new(),
                }
            }
            _ => Vec::new(),
        }
    }

    fn move_step(
        &mut self,
        id: &StepId,
        to: StepExecutionState,
        result: Option<&StepResult>,
    ) -> Vec<FlowEvent> {
        let Some(view) = self.steps.get_mut(id) else {
            return Vec::new();
        };
        let from = view.state;
        view.state = to;
        let mut out = step_moved(id, view, Some(from), result);
        if to.waits_for_a_person() && from != to {
            out.push(FlowEvent::FlowStop {
                task_id: self.task_id.clone(),
                reason: StopReason::WaitingForPerson,
            });
        }
        out
    }

    /// The answer of step `id` so far (the whole text of its model call): a TEXT_ADD with what
    /// is new, if the step is this task's and something is. A text that does not go on from
    /// what was sent is a new answer (the model was asked again) and starts at 0.
    pub fn text(&mut self, id: &StepId, so_far: &str) -> Option<FlowEvent> {
        let view = self.steps.get_mut(id).filter(|v| !v.state.is_over())?;
        let goes_on = so_far.starts_with(&view.text);
        let (offset, delta) = if goes_on && view.text_whole {
            (view.text_chars, &so_far[view.text.len()..])
        } else if goes_on {
            // Past the cap only the kept start and the length can be compared.
            let skip: usize = so_far
                .chars()
                .take(view.text_chars)
                .map(char::len_utf8)
                .sum();
            (view.text_chars, &so_far[skip..])
        } else {
            (0, so_far)
        };
        if delta.is_empty() {
            return None;
        }
        if offset == 0 {
            view.text.clear();
            view.text_chars = 0;
            view.text_whole = true;
        }
        if view.text_whole && view.text.len() + delta.len() <= TEXT_KEPT_BYTES {
            view.text.push_str(delta);
        } else {
            view.text_whole = false;
        }
        view.text_chars += delta.chars().count();
        Some(FlowEvent::TextAdd {
            step: view.reference(id),
            offset,
            delta: delta.to_owned(),
        })
    }

    /// The whole flow so far as a new reader is told it: the task's start, each step made,
    /// started and where it is now (with the text of an answer being written), the task's
    /// stop or end.
    pub fn replay(&self) -> Vec<FlowEvent> {
        let mut out = Vec::new();
        let begun = TaskView::begun();
        if self.task.begun {
            out.extend(task_moved(
                &self.task_id,
                &TaskView::default(),
                &begun,
                &|| self.risk.clone(),
            ));
        }
        for id in &self.order {
            let Some(v) = self.steps.get(id) else {
                continue;
            };
            let step = v.reference(id);
            out.push(FlowEvent::StepInit {
                step: step.clone(),
                intention: v.intention.clone(),
                depends_on: v.depends_on.clone(),
            });
            if v.input_sent {
                out.push(FlowEvent::StepInput {
                    step: step.clone(),
                    status: PhaseStatus::Running,
                    input: v.input.clone(),
                });
            }
            if v.text_chars > 0 {
                out.push(FlowEvent::TextAdd {
                    step,
                    offset: 0,
                    delta: v.text.clone(),
                });
            }
            out.extend(v.last.clone());
        }
        out.extend(task_moved(&self.task_id, &begun, &self.task, &|| None));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::StepUpdate;
    use crate::ids::StageRef;
    use crate::state::Skill;

    fn task() -> TaskState {
        TaskState::new("t".into(), "n".into(), "i".into(), "m".into())
    }

    fn step(executor: Executor) -> StepState {
        StepState::new(
            "t".into(),
            StageRef::NoRelative,
            "w".into(),
            executor,
            "write it",
            "a haiku",
        )
    }

    fn added(s: &StepState) -> Change {
        Change::Step(StepChange::Added {
            agent_id: s.agent_id.clone(),
            step: Box::new(s.clone()),
            list_at: 0,
            todo_at: Some(0),
            remember: true,
        })
    }

    fn moved(id: &StepId, to: StepExecutionState, result: Option<StepResult>) -> Change {
        Change::Step(StepChange::Updated {
            agent_id: "w".into(),
            step_id: id.clone(),
            update: StepUpdate {
                execution_state: Some(to),
                execute_result: result.map(Box::new),
                ..Default::default()
            },
        })
    }

    fn task_state(to: ExecutionState) -> Change {
        Change::Task(TaskChange::State {
            task_id: "t".into(),
            execution_state: to,
            task_summary: Some("done".into()),
            summary_written: None,
            outcome: None,
        })
    }

    fn names(events: &[FlowEvent]) -> Vec<&'static str> {
        events.iter().map(FlowEvent::name).collect()
    }

    fn no_risk() -> Option<FlowRisk> {
        None
    }

    /// Follows a task's changes one by one, as a live reader does.
    fn follow(flow: &mut TaskFlow, changes: &[Change]) -> Vec<FlowEvent> {
        changes
            .iter()
            .flat_map(|c| flow.apply(c, &no_risk))
            .collect()
    }

    #[test]
    fn a_task_run_reads_as_seed_000_tells_it_and_a_late_reader_is_told_the_same() {
        let mut s = step(Executor::Tool("workspace".into()));
        s.instruction_content =
            Some(json!({"tool_name": "write_file", "arguments": {"path": "a"}}));
        let id = s.step_id.clone();
        let mut output = StepResult::default();
        output.output.insert("result".into(), json!("written"));
        let changes = [
            Change::Task(TaskChange::Created {
                task: Box::new(task()),
            }),
            task_state(ExecutionState::Running),
            added(&s),
            Change::Step(StepChange::Started {
                agent_id: "w".into(),
                step_id: id.clone(),
            }),
            moved(&id, StepExecutionState::Finished, Some(output)),
            task_state(ExecutionState::Finished),
        ];
        let mut flow = TaskFlow::new("t".into());
        let live = follow(&mut flow, &changes);
        assert_eq!(
            names(&live),
            [
                "FLOW_START",
                "STEP_INIT",
                "STEP_INPUT",
                "STEP_OUTPUT",
                "FLOW_SUCCESS"
            ]
        );
        let FlowEvent::StepInput { input, step, .. } = &live[2] else {
            panic!("{live:?}")
        };
        assert_eq!(input["arguments"]["path"], "a");
        assert_eq!(step.phase, "workspace");
        // A reader that comes later is told the same story, and one that folds the states
        // from scratch too.
        assert_eq!(flow.replay(), live);
        let mut done = s.clone();
        done.execution_state = StepExecutionState::Finished;
        done.execute_result = match &changes[4] {
            Change::Step(StepChange::Updated { update, .. }) => {
                update.execute_result.as_deref().cloned()
            }
            _ => None,
        };
        let mut finished = task();
        finished.execution_state = ExecutionState::Finished;
        finished.task_summary = Some("done".into());
        let caught = TaskFlow::new("t".into()).catch_up(Some(&finished), [&done], &no_risk);
        assert_eq!(caught, live);
    }

    #[test]
    fn a_tasks_end_carries_what_the_runtime_wrote_of_its_summary() {
        use crate::report::TaskWritten;
        let t = crate::texts::Texts::english();
        let ended = |to, words: &str, written: TaskWritten| {
            // Its record's why, as SyncState gives a task the runtime closed (`close_task`).
            let why = written.why(&t);
            let outcome = why.map(|why| {
                Box::new(crate::state::TaskEnd {
                    why: Some(why),
                    ..Default::default()
                })
            });
            let change = Change::Task(TaskChange::State {
                task_id: "t".into(),
                execution_state: to,
                task_summary: Some(words.into()),
                summary_written: Some(Box::new(written)),
                outcome,
            });
            let created = Change::Task(TaskChange::Created {
                task: Box::new(task()),
            });
            let mut flow = TaskFlow::new("t".into());
            let live = follow(&mut flow, &[created, change]);
            assert_eq!(flow.replay(), live, "a later reader is told the same");
            live.last().cloned().unwrap()
        };
        let added = TaskWritten::ResultsAdded {
            reports: "- a poem".into(),
        };
        let FlowEvent::FlowSuccess {
            summary,
            summary_written,
            ..
        } = ended(ExecutionState::Finished, "Done.", added.clone())
        else {
            panic!()
        };
        assert_eq!(summary.as_deref(), Some("Done."));
        assert_eq!(summary_written.as_deref(), Some(&added));
        // A task the runtime closed says the runtime's reason (its record's why), not the
        // (empty) words.
        let closed = TaskWritten::ClosedByRuntime {
            reason: "refused twice".into(),
            reports: None,
        };
        let FlowEvent::FlowFailed { why, .. } = ended(ExecutionState::Failed, "", closed) else {
            panic!()
        };
        let why = why.unwrap_or_default();
        assert!(why.contains("refused twice"), "{why}");
    }

    #[test]
    fn an_approval_stops_the_flow_and_a_dropped_step_is_cancelled_not_failed() {
        let s = step(Executor::Tool("workspace".into()));
        let id = s.step_id.clone();
        let mut flow = TaskFlow::new("t".into());
        let mut ask = StepResult::default();
        ask.output
            .insert("waiting_for_approval".into(), json!({"risk": "high"}));
        let mut dropped = StepResult::failed("its stage ended");
        dropped.dropped = true;
        let events = follow(
            &mut flow,
            &[
                added(&s),
                moved(&id, StepExecutionState::WaitingForApproval, Some(ask)),
                moved(&id, StepExecutionState::Failed, Some(dropped)),
            ],
        );
        assert_eq!(
            names(&events),
            [
                "FLOW_START",
                "STEP_INIT",
                "STEP_WAITING_FOR_START",
                "FLOW_STOP",
                "STEP_CANCEL"
            ],
            "a step of a task not seen made begins its flow"
        );
        let FlowEvent::StepWaitingForStart { request, .. } = &events[2] else {
            panic!()
        };
        assert_eq!(request["risk"], "high");
    }

    #[test]
    fn text_goes_out_as_deltas_that_make_the_answer_and_ends_with_done() {
        let s = step(Executor::Skill(Skill::Think));
        let id = s.step_id.clone();
        let mut flow = TaskFlow::new("t".into());
        follow(&mut flow, &[added(&s)]);
        let mut deltas = Vec::new();
        for so_far in [
            "<th",
            "<think>héllo",
            "<think>héllo",
            "<think>héllo wörld</think>",
        ] {
            deltas.extend(flow.text(&id, so_far));
        }
        // A text of another task's step is none of this fold's business.
        assert!(flow.text(&StepId::from("other"), "x").is_none());
        let mut text = String::new();
        for d in &deltas {
            let FlowEvent::TextAdd { offset, delta, .. } = d else {
                panic!()
            };
            assert_eq!(*offset, text.chars().count());
            text.push_str(delta);
        }
        assert_eq!(text, "<think>héllo wörld</think>");
        assert_eq!(deltas.len(), 3, "an unchanged text sends nothing");
        // A late reader gets the text so far at once.
        let replayed = flow.replay();
        assert!(
            matches!(&replayed[2], FlowEvent::TextAdd { offset: 0, delta, .. } if *delta == text)
        );
        // An answer asked for again starts over at 0.
        let again = flow.text(&id, "<think>").unwrap();
        assert!(matches!(again, FlowEvent::TextAdd { offset: 0, .. }));
        let end = follow(&mut flow, &[moved(&id, StepExecutionState::Finished, None)]);
        assert_eq!(
            names(&end),
            ["STEP_INPUT", "agent_stream_done", "STEP_OUTPUT"]
        );
        assert!(matches!(end[1], FlowEvent::TextDone { chars: 7, .. }));
    }

    #[test]
    fn the_plan_risk_is_the_highest_tool_risk_and_names_servers_not_described() {
        use crate::policy::Risk;
        let r = |risk, reason: &str| ToolRisk {
            risk,
            reason: reason.into(),
        };
        let known = vec![
            ("read".to_owned(), r(Risk::Low, "reads")),
            ("write".to_owned(), r(Risk::Medium, "adds")),
        ];
        let risk = plan_risk(
            [("fs", Some(known)), ("web", None)],
            &crate::texts::Texts::english(),
        )
        .unwrap();
        assert_eq!(risk.risk.risk, Risk::Medium);
        assert_eq!(risk.tool, "fs/write");
        assert_eq!(risk.unknown_servers, ["web"]);
        assert_eq!(
            plan_risk([("fs", Some(Vec::new()))], &crate::texts::Texts::english()),
            None
        );
        assert_eq!(
            plan_risk([("web", None)], &crate::texts::Texts::english())
                .unwrap()
                .risk
                .risk,
            Risk::High
        );
    }

    #[test]
    fn big_values_are_cut_on_a_character_boundary() {
        let v = json!({"text": "é".repeat(FLOW_VALUE_BYTES)});
        let cut = bounded(&v);
        assert_eq!(cut["cut"], true);
        assert!(cut["start"].as_str().unwrap().len() <= FLOW_VALUE_BYTES);
        assert_eq!(bounded(&json!({"a": 1})), json!({"a": 1}));
    }

    #[test]
    fn a_fold_follows_at_most_flow_steps_forgetting_the_oldest_ended_first() {
        let mut flow = TaskFlow::new("t".into());
        let first = step(Executor::Skill(Skill::Think));
        follow(&mut flow, &[added(&first)]);
        for _ in 0..FLOW_STEPS + 5 {
            let s = step(Executor::Skill(Skill::Think));
            let id = s.step_id.clone();
            follow(
                &mut flow,
                &[added(&s), moved(&id, StepExecutionState::Finished, None)],
            );
        }
        assert_eq!(flow.steps.len(), FLOW_STEPS);
        assert!(
            flow.has_step(&first.step_id),
            "the one still queued is kept"
        );
    }
}
