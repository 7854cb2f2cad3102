//! Tests of the answer schemas: what each skill's answer may hold for this agent at this step.
use super::*;
use crate::call::structured::tagged_answer;
use crate::parse;
use crate::skills::test_support::{acting, agent, running};

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
    let plan =
        crate::skills::plan::answer::read(&tagged_answer(&graph.to_string()).unwrap()).unwrap();
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
    assert_eq!(
        item["id"]["maxLength"],
        crate::skills::plan::schema::ID_CHARS
    );
    assert_eq!(
        item["depends_on"]["items"]["maxLength"],
        crate::skills::plan::schema::ID_CHARS
    );
    // A tool fix is two steps (its instruction and the call), unless the model calls natively.
    a.tools = vec!["workspace".into()];
    assert_eq!(list(&a, Skill::Reflection)["maxItems"], 5);
    a.settings_mut().native_tools = true;
    assert_eq!(list(&a, Skill::Reflection)["maxItems"], 3);
}

#[test]
fn a_notice_that_asks_to_act_requires_a_react_action() {
    let a = agent(&[Skill::ProcessMessage, Skill::Decision, Skill::TaskManager]);
    let notice = acting(&mut a.clone(), Skill::ProcessMessage, "Stage done.");
    let chat = running(
        &mut a.clone(),
        Skill::ProcessMessage,
        "Message from agent `writer`:\n\nHi.",
    );
    let required = |step| answer_schema(Skill::ProcessMessage, &a, step, &[])["required"].clone();
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
fn a_manager_creates_tasks_in_the_base_task_and_shapes_them_elsewhere() {
    let mut a = agent(&[Skill::TaskManager]);
    let step = running(&mut a.clone(), Skill::TaskManager, "");
    let actions = |a: &Agent| {
        let mut names = Vec::new();
        let schema = answer_schema(Skill::TaskManager, a, &step, &[]);
        enums(&schema["properties"]["task_instruction"], &mut names);
        names.retain(|n| n != "finished" && n != "failed");
        names
    };
    assert_eq!(actions(&a).len(), 5, "base task unknown: every action");
    a.settings_mut().base_task = Some(step.task_id.clone());
    assert_eq!(actions(&a), ["add_task"]);
    a.settings_mut().base_task = Some("base".into());
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
    // Asked to judge a task whose stages all ran: its end is offered first.
    let task = crate::state::TaskState::new("t".into(), "h".into(), "a haiku".into(), "m".into());
    let judge = crate::team::notices::judge_task(
        &task,
        std::iter::empty(),
        &crate::texts::Texts::english(),
    );
    task_level.origin = crate::state::StepOrigin::Act {
        attachments: Vec::new(),
        from: crate::message::TASK_STATE_SENDER.into(),
        notice: judge.notice_body().cloned().map(Box::new),
        goal: None,
        second_try: false,
    };
    let schema = answer_schema(Skill::TaskManager, &a, &task_level, &[]);
    let mut names = Vec::new();
    enums(&schema["properties"]["task_instruction"], &mut names);
    names.retain(|n| !["t", "finished", "failed"].contains(&n.as_str()));
    assert_eq!(names, ["finish_task", "add_stage"]);
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
    a.settings_mut().base_task = Some("base".into());
    let step = running(&mut a.clone(), Skill::TaskManager, "");
    let team = ["w".to_owned(), "writer".to_owned(), "rook".to_owned()];
    let allocation = |a: &Agent| {
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
    let steps = crate::skills::plan::answer::planned_steps(&tagged).unwrap();
    assert_eq!(steps.len(), 1);
    assert_eq!(steps[0].text_content, "say \"hi\" </planned_step>");
    assert!(!tagged.contains("persistent_memory"));

    let think = tagged_answer(r#"{"think": "a <b> c"}"#).unwrap();
    assert_eq!(parse::tagged_text(&think, "think").unwrap(), "a <b> c");

    let digest = tagged_answer(
        r#"{"text": "read it", "react_action": {"step_intention": "s", "text_content": "t"}}"#,
    )
    .unwrap();
    assert_eq!(
        crate::skills::process_message::answer::digest(&digest),
        "read it"
    );
    assert!(
        crate::skills::process_message::answer::react_action(&digest)
            .unwrap()
            .is_some()
    );

    let fenced = tagged_answer("```json\n{\"quick_think\": \"x\"}\n```").unwrap();
    assert_eq!(parse::tagged_text(&fenced, "quick_think").unwrap(), "x");
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
