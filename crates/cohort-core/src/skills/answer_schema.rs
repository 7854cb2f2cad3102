//! The JSON schema of each skill's answer, for endpoints that can constrain a model by one
//! (`response_format: json_schema`): an object with one property per answer tag (SPEC §7), and
//! what may be chosen (executors, actions, query types) given as enums of what this agent may
//! actually use at this step, so a constrained model cannot name a skill it lacks.
//!
//! The provider turns a constrained answer back into tagged text
//! ([`crate::call::structured::tagged_answer`]), so the
//! parsers of `parse/` read one format whichever way the model was asked.

use crate::call::structured::PLAIN_TEXT_KEY;
use crate::state::{Agent, Skill, StepState};
use serde_json::{Map, Value, json};

/// The most steps one plan may hold. A model asked for "a plan" without a bound writes lists a
/// team never finishes; these are generous for one stage's work. A reflection adds two fixes at
/// most and a check (a tool fix is two steps: its `instruction_generation` and the call; when
/// the queue runs out without a summary the runtime adds a closing reflection anyway), and no
/// more: a constrained model may fill a list to its bound, so a loose bound is paid for in
/// generated tokens (BENCHMARKS.md, "a reflection's bound").
fn max_plan_len(planner: Skill, agent: &Agent) -> usize {
    match planner {
        Skill::Planning => 6,
        Skill::Reflection if agent.tools.is_empty() || agent.settings.native_tools => 3,
        Skill::Reflection => 5,
        _ => 4,
    }
}

/// The most agents a message's receiver may be chosen from by name; a larger team leaves it
/// free (an enum of thousands would cost more prompt than it saves).
pub const RECEIVERS_LISTED: usize = 64;

/// Whether `skill`'s answer is worth constraining. A free text (a thought, a summary) gains
/// nothing from a schema, and loses the work: constrained to `{"think": "…"}`, Qwen2.5 1.5B
/// handed back its instruction 3 times in 3 where, asked for the tag, it wrote the poem 3 times
/// in 3 (the same prompt, three temperatures). Its tag format is read as well either way.
pub fn constrained(skill: Skill) -> bool {
    !matches!(skill, Skill::Think | Skill::QuickThink | Skill::Summary)
}

/// The schema of `skill`'s answer for `agent` running `step`. `agents` are the team's agents
/// (a message's possible receivers) when there are at most [`RECEIVERS_LISTED`] of them.
pub fn answer_schema(skill: Skill, agent: &Agent, step: &StepState, agents: &[String]) -> Value {
    match skill {
        Skill::Planning | Skill::Reflection | Skill::Decision | Skill::ToolDecision => {
            let acting = skill == Skill::Decision && step.origin.asks_to_act();
            let mut steps = plan(skill, (agent, step), acting);
            if acting && steps.get("items").is_some() {
                steps["minItems"] = json!(1);
            }
            answer(
                &[("planned_step", plan_or_graph(skill, acting, steps))],
                &[],
            )
        }
        Skill::Summary => answer(&[("completion_summary", text())], &[]),
        Skill::Think => answer(&[("think", text())], &[]),
        Skill::QuickThink => answer(&[("quick_think", text())], &[]),
        Skill::InstructionGeneration => answer(&[("tool_instruction", tool_instruction())], &[]),
        Skill::SendMessage => json!({
            "anyOf": [
                answer(&[("send_message", send_message(agent, agents))], &[]),
                answer(&[("get_more_info", step_request())], &[]),
            ]
        }),
        // A message that asks the agent to act must be acted on (see `asks_to_act`).
        Skill::ProcessMessage
            if step.origin.asks_to_act() && agent.skills.contains(&Skill::Decision) =>
        {
            answer(
                &[(PLAIN_TEXT_KEY, text()), ("react_action", step_request())],
                &[],
            )
        }
        Skill::ProcessMessage => answer(
            &[(PLAIN_TEXT_KEY, text())],
            &[("react_action", step_request())],
        ),
        // A judgement (a stage complete, a task with no stage left) states its verdict before
        // the action: asked for the action alone, Qwen2.5 1.5B re-added a stage 3 times in 3,
        // while with the verdict first it closed the task 2 times in 3 and kept them agreeing.
        Skill::TaskManager if super::task_manager::judges(agent, step) => answer(
            &[
                (super::task_manager::VERDICT, json!({ "type": "boolean" })),
                ("task_instruction", task_instruction(agent, step, agents)),
            ],
            &[],
        ),
        Skill::TaskManager => answer(
            &[("task_instruction", task_instruction(agent, step, agents))],
            &[],
        ),
        Skill::AgentManager => answer(&[("agent_instruction", agent_instruction())], &[]),
        Skill::AskInfo => answer(&[("ask_info", ask_info())], &[]),
    }
}

/// An answer object: the required tags, the optional ones, and the optional memory block every
/// skill may add.
fn answer(required: &[(&str, Value)], optional: &[(&str, Value)]) -> Value {
    let mut properties = Map::new();
    for (key, schema) in required.iter().chain(optional) {
        properties.insert((*key).to_owned(), schema.clone());
    }
    properties.insert("persistent_memory".into(), memory());
    let required: Vec<&str> = required.iter().map(|(k, _)| *k).collect();
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

/// A text the parsers want to be there: never empty, and bounded, so a small model that starts
/// repeating itself stops at the bound instead of at its token limit.
fn text() -> Value {
    json!({ "type": "string", "minLength": 1, "maxLength": TEXT_CHARS })
}

/// What a planned step is to do: an instruction, not the work itself, so short; a small model
/// that starts repeating itself in one (seen on Qwen2.5 1.5B) then stops long before its token
/// limit cuts the whole plan off.
fn plan_text() -> Value {
    json!({ "type": "string", "minLength": 1, "maxLength": PLAN_TEXT_CHARS })
}

/// The longest text of one planned step, in characters.
pub const PLAN_TEXT_CHARS: usize = 400;

/// A name, an id or an intention: one short line.
fn line() -> Value {
    json!({ "type": "string", "minLength": 1, "maxLength": LINE_CHARS })
}

/// A planned step's own id in a graph (`skills::plan_graph`): a label such as `draft` or a
/// UUID, never a sentence.
fn id() -> Value {
    json!({ "type": "string", "minLength": 1, "maxLength": ID_CHARS })
}

/// The longest id of a planned step, in characters.
pub const ID_CHARS: usize = 40;

/// The longest text an answer's field may hold, in characters.
pub const TEXT_CHARS: usize = 2_000;
/// The longest name, id or intention, in characters.
pub const LINE_CHARS: usize = 200;

fn object(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

fn memory() -> Value {
    json!({
        "type": "array",
        "items": {
            "type": "object",
            "properties": { "add": text(), "delete": line() },
            "minProperties": 1,
            "additionalProperties": false,
        },
    })
}

/// A planned step list whose `type`/`executor` pairs are exactly what `planner` may plan for
/// this agent: its plannable skills, or its tools.
fn plan(planner: Skill, (agent, step): (&Agent, &StepState), acting: bool) -> Value {
    let skills: Vec<&str> = agent
        .skills
        .iter()
        .filter(|s| s.plannable_by(planner))
        .filter(|s| !acting || s.acts_through_the_team())
        // A model that calls tools natively writes the calls itself.
        .filter(|s| !(agent.settings.native_tools && **s == Skill::InstructionGeneration))
        .map(|s| s.name())
        .collect();
    let mut kinds = Vec::new();
    for (kind, names) in [
        ("skill", skills),
        (
            "tool",
            crate::state::offered_tools(agent, step)
                .into_iter()
                .filter(|_| !acting)
                .map(String::as_str)
                .collect(),
        ),
    ] {
        if names.is_empty() {
            continue;
        }
        kinds.push(object(
            json!({
                "step_intention": line(),
                "type": { "type": "string", "enum": [kind] },
                "executor": { "type": "string", "enum": names },
                "text_content": plan_text(),
                "id": id(),
                "depends_on": { "type": "array", "items": id() },
            }),
            &["step_intention", "type", "executor", "text_content"],
        ));
    }
    let items = match kinds.len() {
        // Nothing may be planned: only the empty plan (`anyOf: []` is no valid schema).
        0 => return json!({ "type": "array", "maxItems": 0 }),
        1 => kinds.remove(0),
        _ => json!({ "anyOf": kinds }),
    };
    json!({ "type": "array", "items": items, "maxItems": max_plan_len(planner, agent) })
}

/// A plan's list, or (planning, reflection, decision) the graph form `{"steps": [...],
/// "replan": [ids]}` whose steps carry `id` and `depends_on` (see `skills::plan_graph`). A
/// decision that acts on a goal or a notice keeps to the list: it hands the work to the team in
/// one or two steps, and a small manager model is asked for it most (its tag form still reads a
/// graph); tool_decision plans a call or two, never a graph.
fn plan_or_graph(planner: Skill, acting: bool, steps: Value) -> Value {
    let graphs = matches!(planner, Skill::Planning | Skill::Reflection)
        || (planner == Skill::Decision && !acting);
    if !graphs || steps.get("items").is_none() {
        return steps;
    }
    let graph = object(
        json!({ "steps": steps, "replan": { "type": "array", "items": id() } }),
        &["steps"],
    );
    json!({ "anyOf": [steps, graph] })
}

fn step_request() -> Value {
    object(
        json!({ "step_intention": line(), "text_content": text() }),
        &["step_intention", "text_content"],
    )
}

fn send_message(agent: &Agent, agents: &[String]) -> Value {
    let others: Vec<&String> = agents
        .iter()
        .filter(|a| **a != agent.agent_id.as_str())
        .collect();
    let receiver = if others.is_empty() {
        text()
    } else {
        json!({ "type": "string", "enum": others })
    };
    object(
        json!({
            "receiver": { "type": "array", "items": receiver, "minItems": 1 },
            "message": text(),
            "stage_relative": line(),
            "need_reply": { "type": "boolean" },
            "waiting": { "type": "boolean" },
            "ask": ask(),
        }),
        &["receiver", "message", "need_reply", "waiting"],
    )
}

/// A structured question for a person (`state::Ask`): optional.
fn ask() -> Value {
    let mode = |m: &str| json!({ "type": "string", "enum": [m] });
    // An option is a text, or a key with the label a person reads.
    let keyed = object(json!({ "key": line(), "label": line() }), &["key", "label"]);
    let options = json!({
        "type": "array", "items": { "anyOf": [line(), keyed] },
        "minItems": 2, "maxItems": crate::state::MAX_CHOICES,
    });
    let field = object(
        json!({
            "key": line(),
            "label": line(),
            "type": { "type": "string", "enum": ["text", "textarea", "number", "boolean", "select"] },
            "required": { "type": "boolean" },
            "options": { "type": "array", "items": line() },
            "description": line(),
            "max_length": { "type": "integer", "minimum": 1 },
        }),
        &["key", "type", "required"],
    );
    json!({ "anyOf": [
        object(json!({ "mode": mode("text") }), &["mode"]),
        object(
            json!({ "mode": mode("select"), "options": options, "multiple": { "type": "boolean" } }),
            &["mode", "options"],
        ),
        object(
            json!({ "mode": mode("form"), "fields": {
                "type": "array", "items": field, "minItems": 1, "maxItems": crate::state::MAX_CHOICES,
            }}),
            &["mode", "fields"],
        ),
    ]})
}

fn tool_instruction() -> Value {
    let arguments = json!({ "type": "object" });
    json!({ "anyOf": [
        object(
            json!({ "instruction_type": { "type": "string", "enum": ["get_description"] } }),
            &["instruction_type"],
        ),
        object(json!({ "tool_name": line(), "arguments": arguments }), &["tool_name", "arguments"]),
        object(
            json!({ "resource_name": line(), "arguments": arguments }),
            &["resource_name", "arguments"],
        ),
        object(json!({ "prompt_name": line(), "arguments": arguments }), &["prompt_name", "arguments"]),
    ]})
}

/// One variant of an instruction selected by `key` (`action` or `type`).
fn variant(key: &str, name: &str, fields: Value, required: &[&str]) -> Value {
    let mut properties = fields.as_object().cloned().unwrap_or_default();
    properties.insert(key.into(), json!({ "type": "string", "enum": [name] }));
    let mut all = vec![key];
    all.extend_from_slice(required);
    object(Value::Object(properties), &all)
}

/// A stage's allocation `{agent_id: goal}`. Its keys are the team's other agents when the list is
/// known and fixed for this manager: one that may hire could name an agent it has just created.
fn allocation(agent: &Agent, agents: &[String]) -> Value {
    let others: Vec<&String> = agents
        .iter()
        .filter(|a| **a != agent.agent_id.as_str())
        .collect();
    if others.is_empty() || agent.skills.contains(&Skill::AgentManager) {
        return json!({ "type": "object", "additionalProperties": text(), "minProperties": 1 });
    }
    let goals: Map<String, Value> = others.iter().map(|a| ((*a).clone(), text())).collect();
    json!({ "type": "object", "properties": goals, "additionalProperties": false, "minProperties": 1 })
}

/// In the base task a manager creates tasks; in a task it manages, it shapes and ends that task.
fn task_instruction(agent: &Agent, step: &StepState, agents: &[String]) -> Value {
    let add_task = variant(
        "action",
        "add_task",
        json!({ "task_name": line(), "task_intention": text() }),
        &["task_name", "task_intention"],
    );
    let in_task = in_task_actions(agent, step, agents);
    match &agent.settings.base_task {
        Some(base) if *base == step.task_id => add_task,
        Some(_) => json!({ "anyOf": in_task }),
        None => {
            let mut all = vec![add_task];
            all.extend(in_task);
            json!({ "anyOf": all })
        }
    }
}

/// The actions a manager may take inside a task, in the order they are offered.
fn in_task_actions(agent: &Agent, step: &StepState, agents: &[String]) -> Vec<Value> {
    let (task_id, stage_id) = known_ids(agent, step);
    let mut in_task = stage_actions(agent, step, agents, &task_id, stage_id);
    let finish_task = variant(
        "action",
        "finish_task",
        json!({ "task_id": task_id, "task_summary": text(),
                "outcome": { "type": "string", "enum": ["finished", "failed"] } }),
        &["task_id", "task_summary", "outcome"],
    );
    // Asked to judge a task whose stages all ran, its end comes first: a small constrained
    // model tends to the first choice it is offered, and a real 1.5B manager re-added its one
    // finished stage instead of closing the task.
    if super::task_manager::judged_task(step).is_some() {
        in_task.insert(0, finish_task);
    } else {
        in_task.push(finish_task);
    }
    // A second try after SyncState refused an action is offered the others (when there are).
    if let Some(refused) = &step.refused_instruction
        && agent
            .settings
            .repairs
            .allows(crate::policy::Repair::RefusedActionBarred)
    {
        let is_refused = |v: &Value| v["properties"]["action"]["enum"][0] == refused.action();
        if in_task.iter().any(|v| !is_refused(v)) {
            in_task.retain(|v| !is_refused(v));
        }
    }
    in_task
}

/// The schemas of the task id and (if any may be named) stage id an action names.
fn known_ids(agent: &Agent, step: &StepState) -> (Value, Option<Value>) {
    // Inside a task the ids are known: the step's own task, and its stage when the step
    // belongs to one (a stage complete, an agent stuck); stage actions need that stage.
    let in_a_task = agent
        .settings
        .base_task
        .as_ref()
        .is_some_and(|b| *b != step.task_id);
    let task_id = if in_a_task {
        json!({ "type": "string", "enum": [step.task_id.as_str()] })
    } else {
        line()
    };
    let stage_id = match step.stage_id.stage() {
        Some(s) if in_a_task => Some(json!({ "type": "string", "enum": [s.as_str()] })),
        _ if in_a_task => None,
        _ => Some(line()),
    };
    (task_id, stage_id)
}

/// The stage actions: add_stage, and finish_stage and retry_stage when a stage can be named.
fn stage_actions(
    agent: &Agent,
    step: &StepState,
    agents: &[String],
    task_id: &Value,
    stage_id: Option<Value>,
) -> Vec<Value> {
    let allocation = || allocation(agent, agents);
    let stage = object(
        json!({ "stage_intention": text(), "agent_allocation": allocation() }),
        &["stage_intention", "agent_allocation"],
    );
    let mut actions = Vec::new();
    // A notice about one stage is answered by finishing or retrying that stage.
    if super::task_manager::stage_decided(agent, step).is_none() {
        actions.push(variant(
            "action",
            "add_stage",
            json!({ "task_id": task_id, "stages": { "type": "array", "items": stage, "minItems": 1 } }),
            &["task_id", "stages"],
        ));
    }
    if let Some(stage_id) = stage_id {
        actions.push(variant(
            "action",
            "finish_stage",
            json!({ "task_id": task_id, "stage_id": stage_id }),
            &["task_id", "stage_id"],
        ));
        actions.push(variant(
            "action",
            "retry_stage",
            json!({ "task_id": task_id, "stage_id": stage_id, "stage_intention": text(),
                    "agent_allocation": allocation() }),
            &["task_id", "stage_id", "stage_intention", "agent_allocation"],
        ));
    }
    actions
}

fn agent_instruction() -> Value {
    json!({ "anyOf": [
        variant("action", "init_new_agent",
            json!({ "template": line(), "agent_id": line(), "name": line() }),
            &["template", "agent_id"]),
        variant("action", "add_task_participant",
            json!({ "task_id": line(), "agent_id": line() }),
            &["task_id", "agent_id"]),
    ]})
}

fn ask_info() -> Value {
    let bare = |name| variant("type", name, json!({}), &[]);
    let task = |name| variant("type", name, json!({ "task_id": line() }), &["task_id"]);
    let stage = |name| {
        variant(
            "type",
            name,
            json!({ "task_id": line(), "stage_id": line() }),
            &["stage_id"],
        )
    };
    json!({ "anyOf": [
        bare("managed_tasks"), bare("joined_tasks"), task("task"), stage("stage"),
        bare("agent_templates"), bare("all_agent_profiles"), bare("team_profiles"),
        task("task_group_profiles"), stage("stage_profiles"),
        variant("type", "agent_states",
            json!({ "agent_ids": { "type": "array", "items": line(), "minItems": 1 } }),
            &["agent_ids"]),
        bare("skills_and_tools"),
    ]})
}

#[cfg(test)]
mod tests;
