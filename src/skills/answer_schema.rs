//! The JSON schema of each skill's answer, for endpoints that can constrain a model by one
//! (`response_format: json_schema`): an object with one property per answer tag (SPEC §7), and
//! what may be chosen (executors, actions, query types) given as enums of what this agent may
//! actually use at this step, so a constrained model cannot name a skill it lacks.
//!
//! The provider turns a constrained answer back into tagged text
//! ([`crate::llm::structured::tagged_answer`]), so the
//! parsers of `parse/` read one format whichever way the model was asked.

use crate::agent::asks_to_act;
use crate::llm::structured::PLAIN_TEXT_KEY;
use crate::state::{AgentState, Skill, StepState};
use serde_json::{Map, Value, json};

/// The most steps one plan may hold. A model asked for "a plan" without a bound writes lists a
/// team never finishes; these are generous for one stage's work.
fn max_plan_len(planner: Skill) -> usize {
    match planner {
        Skill::Planning | Skill::Reflection => 6,
        _ => 4,
    }
}

/// The most agents a message's receiver may be chosen from by name; a larger team leaves it
/// free (an enum of thousands would cost more prompt than it saves).
pub const RECEIVERS_LISTED: usize = 64;

/// The schema of `skill`'s answer for `agent` running `step`. `agents` are the team's agents
/// (a message's possible receivers) when there are at most [`RECEIVERS_LISTED`] of them.
pub fn answer_schema(
    skill: Skill,
    agent: &AgentState,
    step: &StepState,
    agents: &[String],
) -> Value {
    match skill {
        Skill::Planning | Skill::Reflection | Skill::Decision | Skill::ToolDecision => {
            let acting = skill == Skill::Decision && asks_to_act(step);
            let mut steps = plan(skill, agent, acting);
            if acting && steps.get("items").is_some() {
                steps["minItems"] = json!(1);
            }
            answer(&[("planned_step", steps)], &[])
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
        Skill::ProcessMessage if asks_to_act(step) && agent.skills.contains(&Skill::Decision) => {
            answer(
                &[(PLAIN_TEXT_KEY, text()), ("react_action", step_request())],
                &[],
            )
        }
        Skill::ProcessMessage => answer(
            &[(PLAIN_TEXT_KEY, text())],
            &[("react_action", step_request())],
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
fn plan(planner: Skill, agent: &AgentState, acting: bool) -> Value {
    let skills: Vec<&str> = agent
        .skills
        .iter()
        .filter(|s| s.plannable_by(planner))
        .filter(|s| !acting || s.acts_through_the_team())
        // A model that calls tools natively writes the calls itself.
        .filter(|s| !(agent.native_tools && **s == Skill::InstructionGeneration))
        .map(|s| s.name())
        .collect();
    let mut kinds = Vec::new();
    for (kind, names) in [
        ("skill", skills),
        (
            "tool",
            agent
                .tools
                .iter()
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
    json!({ "type": "array", "items": items, "maxItems": max_plan_len(planner) })
}

fn step_request() -> Value {
    object(
        json!({ "step_intention": line(), "text_content": text() }),
        &["step_intention", "text_content"],
    )
}

fn send_message(agent: &AgentState, agents: &[String]) -> Value {
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

/// A structured question for a person (`agent::ask::Ask`): optional.
fn ask() -> Value {
    let mode = |m: &str| json!({ "type": "string", "enum": [m] });
    let options = json!({
        "type": "array", "items": line(), "minItems": 2, "maxItems": crate::agent::ask::MAX_CHOICES,
    });
    let field = object(
        json!({
            "key": line(),
            "label": line(),
            "type": { "type": "string", "enum": ["text", "number", "boolean", "select"] },
            "required": { "type": "boolean" },
            "options": { "type": "array", "items": line() },
        }),
        &["key", "type", "required"],
    );
    json!({ "anyOf": [
        object(json!({ "mode": mode("text") }), &["mode"]),
        object(json!({ "mode": mode("select"), "options": options }), &["mode", "options"]),
        object(
            json!({ "mode": mode("form"), "fields": {
                "type": "array", "items": field, "minItems": 1, "maxItems": crate::agent::ask::MAX_CHOICES,
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
fn allocation(agent: &AgentState, agents: &[String]) -> Value {
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
fn task_instruction(agent: &AgentState, step: &StepState, agents: &[String]) -> Value {
    let allocation = || allocation(agent, agents);
    let stage = object(
        json!({ "stage_intention": text(), "agent_allocation": allocation() }),
        &["stage_intention", "agent_allocation"],
    );
    let add_task = variant(
        "action",
        "add_task",
        json!({ "task_name": line(), "task_intention": text() }),
        &["task_name", "task_intention"],
    );
    // Inside a task the ids are known: the step's own task, and its stage when the step
    // belongs to one (a stage complete, an agent stuck); stage actions need that stage.
    let in_a_task = agent.base_task.as_ref().is_some_and(|b| *b != step.task_id);
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
    let mut in_task = vec![variant(
        "action",
        "add_stage",
        json!({ "task_id": task_id, "stages": { "type": "array", "items": stage, "minItems": 1 } }),
        &["task_id", "stages"],
    )];
    if let Some(stage_id) = stage_id {
        in_task.push(variant(
            "action",
            "finish_stage",
            json!({ "task_id": task_id, "stage_id": stage_id }),
            &["task_id", "stage_id"],
        ));
        in_task.push(variant(
            "action",
            "retry_stage",
            json!({ "task_id": task_id, "stage_id": stage_id, "stage_intention": text(),
                    "agent_allocation": allocation() }),
            &["task_id", "stage_id", "stage_intention", "agent_allocation"],
        ));
    }
    in_task.push(variant(
        "action",
        "finish_task",
        json!({ "task_id": task_id, "task_summary": text(),
                "outcome": { "type": "string", "enum": ["finished", "failed"] } }),
        &["task_id", "task_summary", "outcome"],
    ));
    match &agent.base_task {
        Some(base) if *base == step.task_id => add_task,
        Some(_) => json!({ "anyOf": in_task }),
        None => {
            let mut all = vec![add_task];
            all.extend(in_task);
            json!({ "anyOf": all })
        }
    }
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
mod tests {
    use super::*;
    use crate::llm::structured::tagged_answer;
    use crate::parse;
    use crate::skills::test_support::{agent, running};

    fn enums(schema: &Value, into: &mut Vec<String>) {
        match schema {
            Value::Object(map) => {
                if let Some(Value::Array(names)) = map.get("enum") {
                    into.extend(names.iter().filter_map(|n| n.as_str().map(str::to_owned)));
                }
                map.values().for_each(|v| enums(v, into));
            }
            Value::Array(items) => items.iter().for_each(|v| enums(v, into)),
            _ => {}
        }
    }

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
        let mut names = Vec::new();
        enums(&schema["properties"]["planned_step"], &mut names);
        names.sort();
        // decision may not plan itself, process_message or summary; the tool is its own kind.
        assert_eq!(names, ["skill", "think", "tool", "workspace"]);
        assert_eq!(schema["properties"]["planned_step"]["maxItems"], 4);
        assert_eq!(schema["required"], json!(["planned_step"]));
    }

    #[test]
    fn a_notice_that_asks_to_act_requires_a_react_action() {
        let a = agent(&[Skill::ProcessMessage, Skill::Decision, Skill::TaskManager]);
        let notice = running(
            &mut a.clone(),
            Skill::ProcessMessage,
            "Message from agent `[TaskState]` (it asks you to act):\n\nStage done.",
        );
        let chat = running(
            &mut a.clone(),
            Skill::ProcessMessage,
            "Message from agent `writer`:\n\nHi.",
        );
        let required =
            |step| answer_schema(Skill::ProcessMessage, &a, step, &[])["required"].clone();
        assert_eq!(required(&notice), json!(["text", "react_action"]));
        assert_eq!(required(&chat), json!(["text"]));
    }

    #[test]
    fn a_decision_on_a_notice_must_plan_something() {
        let a = agent(&[
            Skill::Decision,
            Skill::TaskManager,
            Skill::AgentManager,
            Skill::Think,
        ]);
        let notice = running(
            &mut a.clone(),
            Skill::Decision,
            "Message from agent `operator` (it asks you to act):\n\nWrite a haiku.",
        );
        let free = running(&mut a.clone(), Skill::Decision, "React to the review.");
        let min = |step| {
            answer_schema(Skill::Decision, &a, step, &[])["properties"]["planned_step"]["minItems"]
                .clone()
        };
        assert_eq!(min(&notice), json!(1));
        assert_eq!(min(&free), Value::Null);
        // Acting on it goes through the team: the manager does not do the work itself.
        let executors = |step| {
            answer_schema(Skill::Decision, &a, step, &[])["properties"]["planned_step"]["items"]
                ["properties"]["executor"]["enum"]
                .clone()
        };
        assert_eq!(executors(&notice), json!(["task_manager", "agent_manager"]));
        assert_eq!(
            executors(&free),
            json!(["task_manager", "agent_manager", "think"])
        );
    }

    #[test]
    fn a_manager_creates_tasks_in_the_base_task_and_shapes_them_elsewhere() {
        let mut a = agent(&[Skill::TaskManager]);
        let step = running(&mut a.clone(), Skill::TaskManager, "");
        let actions = |a: &AgentState| {
            let mut names = Vec::new();
            let schema = answer_schema(Skill::TaskManager, a, &step, &[]);
            enums(&schema["properties"]["task_instruction"], &mut names);
            names.retain(|n| n != "finished" && n != "failed");
            names
        };
        assert_eq!(actions(&a).len(), 5, "base task unknown: every action");
        a.base_task = Some(step.task_id.clone());
        assert_eq!(actions(&a), ["add_task"]);
        a.base_task = Some("base".into());
        // The step is in stage s of task t: its ids are the only ones it may name.
        let ids: Vec<String> = actions(&a)
            .into_iter()
            .filter(|n| n == "t" || n == "s")
            .collect();
        assert!(ids.contains(&"t".to_owned()) && ids.contains(&"s".to_owned()));
        let named: Vec<String> = actions(&a)
            .into_iter()
            .filter(|n| n != "t" && n != "s")
            .collect();
        assert_eq!(
            named,
            ["add_stage", "finish_stage", "retry_stage", "finish_task"]
        );
        // A task-level step (no stage) may not finish or retry a stage.
        let mut task_level = step.clone();
        task_level.stage_id = crate::ids::StageRef::NoRelative;
        let schema = answer_schema(Skill::TaskManager, &a, &task_level, &[]);
        let mut names = Vec::new();
        enums(&schema["properties"]["task_instruction"], &mut names);
        names.retain(|n| !["t", "finished", "failed"].contains(&n.as_str()));
        assert_eq!(names, ["add_stage", "finish_task"]);
    }

    #[test]
    fn a_message_goes_to_another_agent_of_the_team() {
        let a = agent(&[Skill::SendMessage]);
        let step = running(&mut a.clone(), Skill::SendMessage, "");
        let team = ["w".to_owned(), "rook".to_owned()];
        let schema = answer_schema(Skill::SendMessage, &a, &step, &team);
        let send = &schema["anyOf"][0]["properties"]["send_message"];
        assert_eq!(
            send["properties"]["receiver"]["items"]["enum"],
            json!(["rook"])
        );
    }

    #[test]
    fn a_stage_allocates_the_teams_other_agents_unless_the_manager_may_hire() {
        let mut a = agent(&[Skill::TaskManager]);
        a.base_task = Some("base".into());
        let step = running(&mut a.clone(), Skill::TaskManager, "");
        let team = ["w".to_owned(), "writer".to_owned(), "rook".to_owned()];
        let allocation = |a: &AgentState| {
            let schema = answer_schema(Skill::TaskManager, a, &step, &team);
            let add_stage = schema["properties"]["task_instruction"]["anyOf"][0].clone();
            assert_eq!(
                add_stage["properties"]["action"]["enum"],
                json!(["add_stage"])
            );
            add_stage["properties"]["stages"]["items"]["properties"]["agent_allocation"].clone()
        };
        let fixed = allocation(&a);
        let names: Vec<&String> = fixed["properties"].as_object().unwrap().keys().collect();
        assert_eq!(names, ["rook", "writer"], "not the manager itself");
        assert_eq!(fixed["additionalProperties"], false);
        assert_eq!(fixed["minProperties"], 1);
        a.skills.push(Skill::AgentManager);
        assert!(
            allocation(&a)["additionalProperties"].is_object(),
            "a hire may be named"
        );
    }

    #[test]
    fn an_agent_without_plannable_executors_may_only_plan_nothing() {
        let mut a = agent(&[Skill::Decision]);
        let step = running(&mut a, Skill::Decision, "");
        let schema = answer_schema(Skill::Decision, &a, &step, &[]);
        assert_eq!(schema["properties"]["planned_step"]["maxItems"], 0);
    }

    #[test]
    fn a_constrained_answer_reads_like_the_tagged_one() {
        let answer = json!({
            "planned_step": [{"step_intention": "i", "type": "skill", "executor": "think",
                              "text_content": "say \"hi\" </planned_step>"}],
            "persistent_memory": null,
        })
        .to_string();
        let tagged = tagged_answer(&answer).unwrap();
        let steps = parse::planned_steps(&tagged).unwrap();
        assert_eq!(steps.len(), 1);
        assert_eq!(steps[0].text_content, "say \"hi\" </planned_step>");
        assert!(!tagged.contains("persistent_memory"));

        let think = tagged_answer(r#"{"think": "a <b> c"}"#).unwrap();
        assert_eq!(parse::think(&think).unwrap(), "a <b> c");

        let digest = tagged_answer(
            r#"{"text": "read it", "react_action": {"step_intention": "s", "text_content": "t"}}"#,
        )
        .unwrap();
        assert_eq!(parse::process_message_digest(&digest), "read it");
        assert!(parse::react_action(&digest).unwrap().is_some());

        let fenced = tagged_answer("```json\n{\"quick_think\": \"x\"}\n```").unwrap();
        assert_eq!(parse::quick_think(&fenced).unwrap(), "x");
        assert_eq!(tagged_answer("<think>plain</think>"), None);
        assert_eq!(tagged_answer("[1, 2]"), None);
    }

    #[test]
    fn every_skill_has_an_object_schema_with_an_optional_memory_block() {
        let a = agent(&Skill::ALL);
        for skill in Skill::ALL {
            let step = running(&mut a.clone(), skill, "");
            let schema = answer_schema(skill, &a, &step, &["w".into(), "x".into()]);
            let objects = match schema.get("anyOf") {
                Some(Value::Array(v)) => v.clone(),
                _ => vec![schema.clone()],
            };
            for o in objects {
                assert_eq!(o["type"], "object", "{skill}");
                assert!(o["properties"]["persistent_memory"].is_object(), "{skill}");
                let required = o["required"].as_array().unwrap();
                assert!(!required.contains(&json!("persistent_memory")), "{skill}");
            }
        }
    }
}
