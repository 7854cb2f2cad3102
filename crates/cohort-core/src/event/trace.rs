//! Traces of the team's work, planned from its states (plain data, no exporter): one goal is
//! one trace, rooted at the step that acted on it, with the task it made, the task's stages,
//! their steps, and each step's model calls and wait for a person below. Ids are derived from
//! the stored ids (a hash of each), so a trace goes on across a restart and every reader names
//! the same span the same way. Attributes follow OpenTelemetry's GenAI conventions
//! (`gen_ai.operation.name`, `gen_ai.request.model`, `gen_ai.usage.input_tokens`, …) beside
//! Cohort's own ids (`cohort.task_id`, …).

use super::trace_context::TraceParent;
use crate::ids::{StageRef, StepId, TaskId};
use crate::message::Message;
use crate::state::{Executor, StageState, StepExecutionState, StepState, TaskState, TokenUsage};
use sha2::{Digest, Sha256};

/// A trace's id: the first 16 bytes of a hash of what it is rooted in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TraceId(pub [u8; 16]);

/// A span's id: the first 8 bytes of a hash of what it stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SpanId(pub [u8; 8]);

fn digest(kind: &str, id: &str) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(kind.as_bytes());
    h.update(b":");
    h.update(id.as_bytes());
    h.finalize().into()
}

impl TraceId {
    /// The trace rooted in a thing of `kind` with id `id`.
    pub fn of(kind: &str, id: &str) -> TraceId {
        let d = digest(kind, id);
        TraceId(d[..16].try_into().expect("32 bytes"))
    }
}

impl SpanId {
    /// The span of a thing of `kind` (`task`, `stage`, `step`, …) with id `id`.
    pub fn of(kind: &str, id: &str) -> SpanId {
        let d = digest(kind, id);
        SpanId(d[16..24].try_into().expect("32 bytes"))
    }
}

/// A span attribute's value.
#[derive(Clone, Debug, PartialEq)]
pub enum Attr {
    /// Text.
    Str(String),
    /// A whole number.
    Int(i64),
    /// A list of texts.
    List(Vec<String>),
}

/// An event in a span (a prompt or an answer, when content is recorded).
#[derive(Clone, Debug, PartialEq)]
pub struct SpanEvent {
    /// Its name (`gen_ai.user.message`, …).
    pub name: &'static str,
    /// When, in ms since the Unix epoch.
    pub at_ms: i64,
    /// What it carries.
    pub attributes: Vec<(&'static str, Attr)>,
}

/// Whether a span reaches out of the process (a model or tool call) or stays in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpanKind {
    /// Work in the process.
    Internal,
    /// A call out of it.
    Client,
}

/// One span, ready for an exporter.
#[derive(Clone, Debug, PartialEq)]
pub struct SpanPlan {
    /// The trace it is in.
    pub trace: TraceId,
    /// Its own id.
    pub span: SpanId,
    /// The span it is part of; none for a trace's root.
    pub parent: Option<SpanId>,
    /// Its name, as the conventions say (`chat {model}`, `execute_tool {tool}`, …).
    pub name: String,
    /// In the process or a call out.
    pub kind: SpanKind,
    /// When it started and ended, ms since the Unix epoch.
    pub start_ms: i64,
    /// See `start_ms`.
    pub end_ms: i64,
    /// What it was.
    pub attributes: Vec<(&'static str, Attr)>,
    /// What happened in it (prompts and answers, when recorded).
    pub events: Vec<SpanEvent>,
    /// Why it failed, when it did.
    pub error: Option<String>,
    /// Spans it follows from in other work: the step whose message caused it.
    pub links: Vec<TraceParent>,
}

/// Where a step's span hangs: its trace and its parent. In a task: the task's trace, under
/// its stage (or the task). In the base task: the trace the step was put in as it was added,
/// under the span of the step whose message caused it, else of the step that made it; a
/// step with neither (a person's goal acted on) roots its trace.
fn place_of_step(
    step: &StepState,
    task: Option<&TaskState>,
    base: &TaskId,
) -> (TraceId, Option<SpanId>) {
    let Some(task) = task.filter(|_| &step.task_id != base) else {
        let made_by = step.origin.made_by();
        let trace = step.trace_id.unwrap_or_else(|| {
            // Stored before steps carried their trace: a planned step joins its planner's.
            let root = made_by.unwrap_or(&step.step_id);
            TraceId::of("step", root.as_str())
        });
        let parent = step
            .caused_by
            .map(|c| c.span)
            .or_else(|| made_by.map(|by| SpanId::of("step", by.as_str())));
        return (trace, parent);
    };
    (
        trace_of_task(task),
        Some(span_of_place(&step.stage_id, task)),
    )
}

/// The span of what `place` names in `task`: its stage, or the task itself.
fn span_of_place(place: &StageRef, task: &TaskState) -> SpanId {
    match place {
        StageRef::Stage(stage) => SpanId::of("stage", stage.as_str()),
        _ => SpanId::of("task", task.task_id.as_str()),
    }
}

/// The trace of a task: the one it was put in as it was made (its goal's), else its goal
/// step's own, else its own.
pub fn trace_of_task(task: &TaskState) -> TraceId {
    if let Some(trace) = task.trace_id {
        return trace;
    }
    match &task.goal_step {
        Some(step) => TraceId::of("step", step.as_str()),
        None => TraceId::of("task", task.task_id.as_str()),
    }
}

/// The trace context of a message of `task`'s: the task's trace (where every step of the
/// task has its span), from the span of the agent's step that sent it (`from_a_step`), else
/// of its stage or task (a runtime notice; a person's message, whose caller's span, if any,
/// is in another trace).
pub fn context_in_task(m: &Message, task: &TaskState, from_a_step: bool) -> TraceParent {
    let sender = m.traceparent.filter(|_| from_a_step).map(|t| t.span);
    let span = sender.unwrap_or_else(|| span_of_place(&m.stage_relative, task));
    TraceParent {
        trace: trace_of_task(task),
        span,
    }
}

fn usage_attrs(usage: &TokenUsage, out: &mut Vec<(&'static str, Attr)>) {
    out.push((
        "gen_ai.usage.input_tokens",
        Attr::Int(usage.prompt_tokens as i64),
    ));
    out.push((
        "gen_ai.usage.output_tokens",
        Attr::Int(usage.completion_tokens as i64),
    ));
    if usage.cached_prompt_tokens > 0 {
        out.push((
            "gen_ai.usage.cache_read.input_tokens",
            Attr::Int(usage.cached_prompt_tokens as i64),
        ));
    }
}

/// The span of a step that ended, from `start_ms` to `end_ms`.
pub fn step_span(
    step: &StepState,
    task: Option<&TaskState>,
    base: &TaskId,
    (start_ms, end_ms): (i64, i64),
) -> SpanPlan {
    let (trace, parent) = place_of_step(step, task, base);
    let mut attributes = vec![
        ("cohort.task_id", Attr::Str(step.task_id.to_string())),
        ("cohort.step_id", Attr::Str(step.step_id.to_string())),
        ("gen_ai.agent.id", Attr::Str(step.agent_id.to_string())),
        (
            "cohort.executor",
            Attr::Str(step.executor.name().to_owned()),
        ),
        (
            "cohort.state",
            Attr::Str(format!("{:?}", step.execution_state).to_lowercase()),
        ),
    ];
    if let StageRef::Stage(stage) = &step.stage_id {
        attributes.push(("cohort.stage_id", Attr::Str(stage.to_string())));
    }
    let name = match &step.executor {
        Executor::Tool(server) => {
            attributes.push(("gen_ai.operation.name", Attr::Str("execute_tool".into())));
            let tool = step
                .instruction_content
                .as_ref()
                .and_then(|c| c.get("tool_name"))
                .and_then(|t| t.as_str())
                .unwrap_or("get_description");
            attributes.push(("gen_ai.tool.name", Attr::Str(tool.to_owned())));
            attributes.push(("cohort.tool_server", Attr::Str(server.clone())));
            format!("execute_tool {tool}")
        }
        Executor::Skill(skill) => {
            attributes.push(("gen_ai.operation.name", Attr::Str("invoke_agent".into())));
            format!("invoke_agent {} {}", step.agent_id, skill.name())
        }
    };
    usage_attrs(&step.token_usage, &mut attributes);
    let result = step.execute_result.as_ref();
    if let Some(r) = result.filter(|r| !r.repairs.is_empty()) {
        let rules = r.repairs.iter().map(|f| f.rule.name().to_owned()).collect();
        attributes.push(("cohort.repairs", Attr::List(rules)));
    }
    let error = match step.execution_state {
        StepExecutionState::Failed => {
            Some(result.and_then(|r| r.error.clone()).unwrap_or_default())
        }
        _ => None,
    };
    SpanPlan {
        trace,
        span: SpanId::of("step", step.step_id.as_str()),
        parent,
        name,
        kind: if matches!(step.executor, Executor::Tool(_)) {
            SpanKind::Client
        } else {
            SpanKind::Internal
        },
        start_ms,
        end_ms,
        attributes,
        events: Vec::new(),
        error,
        // The sender's span, unless the span hangs under it already.
        links: step
            .caused_by
            .filter(|c| Some(c.span) != parent)
            .into_iter()
            .collect(),
    }
}

/// A step's wait for a person's verdict (an approval, a plan check, arguments to fill).
pub fn wait_span(step: &SpanPlan, from_ms: i64, to_ms: i64) -> SpanPlan {
    SpanPlan {
        trace: step.trace,
        span: SpanId::of("wait", &format!("{:?}-{from_ms}", step.span.0)),
        parent: Some(step.span),
        name: "wait_for_person".into(),
        kind: SpanKind::Internal,
        start_ms: from_ms,
        end_ms: to_ms,
        attributes: Vec::new(),
        events: Vec::new(),
        error: None,
        links: Vec::new(),
    }
}

/// What a model call of a step was, as the call log kept it.
#[derive(Clone, Debug)]
pub struct CallFacts<'a> {
    /// When it was sent, ms since the Unix epoch.
    pub sent_ms: i64,
    /// When its answer (or failure) came.
    pub answered_ms: i64,
    /// `provider/model`.
    pub model: &'a str,
    /// The tokens it spent.
    pub usage: TokenUsage,
    /// Why it failed, when it did.
    pub error: Option<&'a str>,
    /// Why its answer was cut short (`length` for a token limit), else `stop`.
    pub finish_reason: &'a str,
    /// The system message, prompt and answer, when content is recorded.
    pub content: Option<(&'a str, &'a str, Option<&'a str>)>,
}

/// The `n`-th model call of a step.
pub fn call_span(step: &SpanPlan, step_id: &StepId, n: usize, call: &CallFacts<'_>) -> SpanPlan {
    let (provider, model) = call.model.split_once('/').unwrap_or(("", call.model));
    let mut attributes = vec![
        ("gen_ai.operation.name", Attr::Str("chat".into())),
        ("gen_ai.provider.name", Attr::Str(provider.to_owned())),
        ("gen_ai.request.model", Attr::Str(model.to_owned())),
        (
            "gen_ai.response.finish_reasons",
            Attr::List(vec![call.finish_reason.to_owned()]),
        ),
    ];
    usage_attrs(&call.usage, &mut attributes);
    let mut events = Vec::new();
    if let Some((system, prompt, reply)) = call.content {
        events.push(SpanEvent {
            name: "gen_ai.system.message",
            at_ms: call.sent_ms,
            attributes: vec![("content", Attr::Str(system.to_owned()))],
        });
        events.push(SpanEvent {
            name: "gen_ai.user.message",
            at_ms: call.sent_ms,
            attributes: vec![("content", Attr::Str(prompt.to_owned()))],
        });
        if let Some(reply) = reply {
            events.push(SpanEvent {
                name: "gen_ai.choice",
                at_ms: call.answered_ms,
                attributes: vec![("content", Attr::Str(reply.to_owned()))],
            });
        }
    }
    SpanPlan {
        trace: step.trace,
        span: SpanId::of("call", &format!("{step_id}/{n}")),
        parent: Some(step.span),
        name: format!("chat {model}"),
        kind: SpanKind::Client,
        start_ms: call.sent_ms,
        end_ms: call.answered_ms.max(call.sent_ms),
        attributes,
        events,
        error: call.error.map(str::to_owned),
        links: Vec::new(),
    }
}

/// The span of a task that ended, under the step that made it.
pub fn task_span(task: &TaskState, (start_ms, end_ms): (i64, i64)) -> SpanPlan {
    let mut attributes = vec![
        ("cohort.task_id", Attr::Str(task.task_id.to_string())),
        (
            "cohort.state",
            Attr::Str(format!("{:?}", task.execution_state).to_lowercase()),
        ),
    ];
    usage_attrs(&task.token_usage, &mut attributes);
    let error = (task.execution_state == crate::state::ExecutionState::Failed).then(|| {
        task.outcome
            .as_ref()
            .and_then(|o| o.why.clone())
            .unwrap_or_default()
    });
    SpanPlan {
        trace: trace_of_task(task),
        span: SpanId::of("task", task.task_id.as_str()),
        parent: task
            .goal_step
            .as_ref()
            .map(|s| SpanId::of("step", s.as_str())),
        name: format!("task {}", task.task_name),
        kind: SpanKind::Internal,
        start_ms,
        end_ms,
        attributes,
        events: Vec::new(),
        error,
        links: Vec::new(),
    }
}

/// The span of a stage that ended, under its task.
pub fn stage_span(
    stage: &StageState,
    task: &TaskState,
    (start_ms, end_ms): (i64, i64),
) -> SpanPlan {
    SpanPlan {
        trace: trace_of_task(task),
        span: SpanId::of("stage", stage.stage_id.as_str()),
        parent: Some(SpanId::of("task", task.task_id.as_str())),
        name: format!(
            "stage {}",
            stage.stage_intention.chars().take(60).collect::<String>()
        ),
        kind: SpanKind::Internal,
        start_ms,
        end_ms,
        attributes: vec![
            ("cohort.task_id", Attr::Str(task.task_id.to_string())),
            ("cohort.stage_id", Attr::Str(stage.stage_id.to_string())),
            (
                "cohort.state",
                Attr::Str(format!("{:?}", stage.execution_state).to_lowercase()),
            ),
        ],
        events: Vec::new(),
        error: None,
        links: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::StageId;
    use crate::state::{Skill, StepOrigin, StepResult};

    fn task_made_by(goal: &StepState) -> TaskState {
        let mut t = TaskState::new("t".into(), "Haiku".into(), "write one".into(), "m".into());
        t.goal_step = Some(goal.step_id.clone());
        t
    }

    fn step(task: &str, stage: StageRef, executor: Executor, origin: StepOrigin) -> StepState {
        StepState::new(task.into(), stage, "w".into(), executor, "do it", "text")
            .with_origin(origin)
    }

    #[test]
    fn one_goal_is_one_trace_from_its_step_to_the_task_its_stages_and_their_steps() {
        let base = TaskId::from("base");
        let act = StepOrigin::Act {
            from: "op".into(),
            notice: None,
            goal: Some("a haiku".into()),
            attachments: Vec::new(),
            second_try: false,
        };
        let goal = step(
            "base",
            StageRef::NoRelative,
            Executor::Skill(Skill::TaskManager),
            act,
        );
        let goal_span = step_span(&goal, None, &base, (0, 1));
        assert_eq!(goal_span.parent, None, "the goal's step is the root");
        let task = task_made_by(&goal);
        let t = task_span(&task, (1, 9));
        assert_eq!((t.trace, t.parent), (goal_span.trace, Some(goal_span.span)));
        let mut stage = StageState::new("t".into(), "write".into(), Default::default());
        stage.stage_id = StageId::from("s1");
        let st = stage_span(&stage, &task, (2, 8));
        assert_eq!((st.trace, st.parent), (goal_span.trace, Some(t.span)));
        let mut work = step(
            "t",
            StageRef::Stage("s1".into()),
            Executor::Tool("fs".into()),
            StepOrigin::Unknown,
        );
        work.instruction_content = Some(serde_json::json!({"tool_name": "write_file"}));
        work.execution_state = StepExecutionState::Failed;
        work.execute_result = Some(StepResult::failed("disk full"));
        let w = step_span(&work, Some(&task), &base, (3, 4));
        assert_eq!((w.trace, w.parent), (goal_span.trace, Some(st.span)));
        assert_eq!(w.name, "execute_tool write_file");
        assert_eq!(w.kind, SpanKind::Client);
        assert_eq!(w.error.as_deref(), Some("disk full"));
        // The ids come from the stored ids: the same after a restart.
        assert_eq!(step_span(&work, Some(&task), &base, (3, 4)).span, w.span);
        assert_eq!(w.trace.to_string().len(), 32);
    }

    #[test]
    fn a_step_caused_by_another_agents_message_joins_its_trace_under_and_linked_to_its_span() {
        let base = TaskId::from("base");
        let mut sender = step(
            "base",
            StageRef::NoRelative,
            Executor::Skill(Skill::SendMessage),
            StepOrigin::Unknown,
        );
        sender.trace_id = Some(TraceId::of("step", "the-goal"));
        let sent = TraceParent::of_step(&sender).unwrap();
        let mut reply = step(
            "base",
            StageRef::NoRelative,
            Executor::Skill(Skill::ProcessMessage),
            StepOrigin::Message { from: "w".into() },
        );
        (reply.trace_id, reply.caused_by) = (Some(sent.trace), Some(sent));
        let s = step_span(&sender, None, &base, (0, 1));
        let r = step_span(&reply, None, &base, (2, 3));
        assert_eq!((r.trace, r.parent), (s.trace, Some(s.span)));
        assert!(
            r.links.is_empty(),
            "under its sender's span: no link besides"
        );
        assert!(s.links.is_empty());
        // A step it planned is in the same trace, under it.
        let mut planned = step(
            "base",
            StageRef::NoRelative,
            Executor::Skill(Skill::Think),
            StepOrigin::Planned {
                by: reply.step_id.clone(),
            },
        );
        planned.trace_id = reply.trace_id;
        let p = step_span(&planned, None, &base, (3, 4));
        assert_eq!((p.trace, p.parent), (s.trace, Some(r.span)));
        // A message of a task: the task's trace, from the sender's span or the stage's.
        let mut task = task_made_by(&sender);
        task.trace_id = Some(TraceId::of("caller", "x"));
        let mut m = Message::notice(
            "t".into(),
            "w".into(),
            vec!["m".into()],
            StageRef::Stage("s1".into()),
            "hi".into(),
        );
        let from_stage = context_in_task(&m, &task, true);
        assert_eq!(from_stage.trace, TraceId::of("caller", "x"));
        assert_eq!(from_stage.span, SpanId::of("stage", "s1"));
        m.traceparent = Some(sent);
        assert_eq!(context_in_task(&m, &task, true).span, sent.span);
        assert_eq!(
            context_in_task(&m, &task, true).trace,
            TraceId::of("caller", "x")
        );
        // A person's caller's span is in the caller's trace: the stage's stands in.
        assert_eq!(context_in_task(&m, &task, false), from_stage);
    }

    #[test]
    fn a_call_span_carries_the_genai_attributes_and_content_only_when_given() {
        let base = TaskId::from("base");
        let s = step(
            "base",
            StageRef::NoRelative,
            Executor::Skill(Skill::Think),
            StepOrigin::Unknown,
        );
        let parent = step_span(&s, None, &base, (0, 5));
        let mut facts = CallFacts {
            sent_ms: 1,
            answered_ms: 4,
            model: "openai/gpt-x",
            usage: TokenUsage::new(10, 3),
            error: None,
            finish_reason: "stop",
            content: None,
        };
        let c = call_span(&parent, &s.step_id, 0, &facts);
        let get = |k: &str| {
            c.attributes
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(get("gen_ai.request.model"), Some(Attr::Str("gpt-x".into())));
        assert_eq!(
            get("gen_ai.provider.name"),
            Some(Attr::Str("openai".into()))
        );
        assert_eq!(get("gen_ai.usage.input_tokens"), Some(Attr::Int(10)));
        assert_eq!(c.parent, Some(parent.span));
        assert!(c.events.is_empty());
        facts.content = Some(("sys", "prompt", Some("answer")));
        assert_eq!(call_span(&parent, &s.step_id, 0, &facts).events.len(), 3);
        assert_ne!(call_span(&parent, &s.step_id, 1, &facts).span, c.span);
    }
}
