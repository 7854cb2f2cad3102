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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::structured::tagged_answer;
    use crate::skills::answer_schema::{answer_schema, enums};
    use crate::skills::test_support::{acting, agent, running};

    #[test]
    fn a_plan_may_only_name_what_the_planner_may_plan_for_this_agent() {
        let mut a = agent(&[
            Skill::Decision,
            Skill::Think,
            Skill::ProcessMessage,
            Skill::Summary,
        ]);
        a.tools = vec!["workspace".into()];
        let step = running(&mut a.clone(), Skill::Decision, "");
        let schema = answer_schema(Skill::Decision, &a, &step, &[]);
        // A decision on no goal may answer a list or a graph of the same steps.
        let list = &schema["properties"]["planned_step"]["anyOf"][0];
        let mut names = Vec::new();
        enums(list, &mut names);
        names.sort();
        // decision may not plan itself, process_message or summary; the tool is its own kind.
        assert_eq!(names, ["skill", "think", "tool", "workspace"]);
        assert_eq!(list["maxItems"], 4);
        assert_eq!(schema["required"], json!(["planned_step"]));
    }

    #[test]
    fn a_planning_answer_may_be_a_list_or_a_graph_and_both_parse() {
        let a = agent(&[Skill::Planning, Skill::Think, Skill::Summary]);
        let step = running(&mut a.clone(), Skill::Planning, "");
        let schema = answer_schema(Skill::Planning, &a, &step, &[]);
        let forms = schema["properties"]["planned_step"]["anyOf"]
            .as_array()
            .unwrap();
        assert_eq!(forms[0]["type"], "array");
        assert_eq!(forms[1]["required"], json!(["steps"]));
        assert_eq!(forms[1]["properties"]["steps"], forms[0]);
        assert!(forms[0]["items"]["properties"]["depends_on"].is_object());
        let graph = json!({"planned_step": {"steps": [
        {"id": "a", "step_intention": "x", "type": "skill", "executor": "think", "text_content": ""},
        {"id": "b", "depends_on": ["a"], "step_intention": "y", "type": "skill", "executor": "summary", "text_content": ""}],
        "replan": ["a"]}});
        let plan = super::super::answer::read(&tagged_answer(&graph.to_string()).unwrap()).unwrap();
        assert_eq!(plan.replan, ["a"]);
        assert_eq!(plan.steps[1].depends_on, ["a"]);
        assert_eq!(plan.steps[0].id.as_deref(), Some("a"));
    }

    #[test]
    fn a_reflection_adds_at_most_two_fixes_and_a_check_and_ids_are_labels() {
        let mut a = agent(&[
            Skill::Planning,
            Skill::Reflection,
            Skill::Think,
            Skill::Summary,
            Skill::InstructionGeneration,
        ]);
        let list = |a: &Agent, skill| {
            let step = running(&mut a.clone(), skill, "");
            answer_schema(skill, a, &step, &[])["properties"]["planned_step"]["anyOf"][0].clone()
        };
        assert_eq!(list(&a, Skill::Reflection)["maxItems"], 3);
        assert_eq!(list(&a, Skill::Planning)["maxItems"], 6);
        let item = &list(&a, Skill::Reflection)["items"]["properties"];
        assert_eq!(item["id"]["maxLength"], ID_CHARS);
        assert_eq!(item["depends_on"]["items"]["maxLength"], ID_CHARS);
        // A tool fix is two steps (its instruction and the call), unless the model calls natively.
        a.tools = vec!["workspace".into()];
        assert_eq!(list(&a, Skill::Reflection)["maxItems"], 5);
        a.settings_mut().native_tools = true;
        assert_eq!(list(&a, Skill::Reflection)["maxItems"], 3);
    }

    #[test]
    fn a_decision_on_a_notice_must_plan_something() {
        let a = agent(&[
            Skill::Decision,
            Skill::TaskManager,
            Skill::AgentManager,
            Skill::Think,
        ]);
        let notice = acting(&mut a.clone(), Skill::Decision, "Write a haiku.");
        let free = running(&mut a.clone(), Skill::Decision, "React to the review.");
        let min = |step| {
            answer_schema(Skill::Decision, &a, step, &[])["properties"]["planned_step"]["minItems"]
                .clone()
        };
        assert_eq!(min(&notice), json!(1));
        assert_eq!(min(&free), Value::Null);
        // Acting on it goes through the team: the manager does not do the work itself. (A free
        // decision's list is the first of its two forms, list or graph.)
        let executors = |step| {
            let plan =
                answer_schema(Skill::Decision, &a, step, &[])["properties"]["planned_step"].clone();
            let list = if plan["anyOf"].is_array() {
                plan["anyOf"][0].clone()
            } else {
                plan
            };
            list["items"]["properties"]["executor"]["enum"].clone()
        };
        assert_eq!(executors(&notice), json!(["task_manager", "agent_manager"]));
        assert_eq!(
            executors(&free),
            json!(["task_manager", "agent_manager", "think"])
        );
    }

    #[test]
    fn an_agent_without_plannable_executors_may_only_plan_nothing() {
        let mut a = agent(&[Skill::Decision]);
        let step = running(&mut a, Skill::Decision, "");
        let schema = answer_schema(Skill::Decision, &a, &step, &[]);
        assert_eq!(schema["properties"]["planned_step"]["maxItems"], 0);
    }
}
