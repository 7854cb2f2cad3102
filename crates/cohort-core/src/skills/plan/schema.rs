//! The schema of a planner's answer: a list (or graph) of steps naming only what this planner
//! may plan for this agent at this step, bounded in length.

use crate::skills::answer_schema::{answer, line, object};
use crate::state::{Agent, Skill, StepState};
use serde_json::{Value, json};

/// `planner`'s answer: `<planned_step>`, whose steps are what it may plan. A decision that acts
/// on a goal or notice must plan something.
pub fn answer_schema(planner: Skill, agent: &Agent, step: &StepState) -> Value {
    let acting = planner == Skill::Decision && step.origin.asks_to_act();
    let mut steps = plan(planner, (agent, step), acting);
    if acting && steps.get("items").is_some() {
        steps["minItems"] = json!(1);
    }
    answer(
        &[("planned_step", plan_or_graph(planner, acting, steps))],
        &[],
    )
}

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

/// What a planned step is to do: an instruction, not the work itself, so short; a small model
/// that starts repeating itself in one (seen on Qwen2.5 1.5B) then stops long before its token
/// limit cuts the whole plan off.
fn plan_text() -> Value {
    json!({ "type": "string", "minLength": 1, "maxLength": PLAN_TEXT_CHARS })
}

/// The longest text of one planned step, in characters.
const PLAN_TEXT_CHARS: usize = 400;

/// A planned step's own id in a graph (`skills::plan_graph`): a label such as `draft` or a
/// UUID, never a sentence.
fn id() -> Value {
    json!({ "type": "string", "minLength": 1, "maxLength": ID_CHARS })
}

/// The longest id of a planned step, in characters.
pub const ID_CHARS: usize = 40;

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
