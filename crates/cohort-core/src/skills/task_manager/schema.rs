//! The schema of a task_manager answer: the actions this manager may take here, with the ids
//! it may name, and (for a judgement) its verdict first.

use crate::skills::answer_schema::{answer, line, object, text, variant};
use crate::state::{Agent, Skill, StepState};
use serde_json::{Map, Value, json};

/// `<task_instruction>`; a judgement (a stage complete, a task with no stage left) states its
/// verdict before the action: asked for the action alone, Qwen2.5 1.5B re-added a stage 3 times
/// in 3, while with the verdict first it closed the task 2 times in 3 and kept them agreeing.
pub fn answer_schema(agent: &Agent, step: &StepState, agents: &[String]) -> Value {
    let instruction = ("task_instruction", task_instruction(agent, step, agents));
    if super::judges(agent, step) {
        answer(
            &[(super::VERDICT, json!({ "type": "boolean" })), instruction],
            &[],
        )
    } else {
        answer(&[instruction], &[])
    }
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
pub fn task_instruction(agent: &Agent, step: &StepState, agents: &[String]) -> Value {
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
    if super::judged_task(step).is_some() {
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
    if super::stage_decided(agent, step).is_none() {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skills::answer_schema::{answer_schema, enums};
    use crate::skills::test_support::{agent, running};

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
        let task =
            crate::state::TaskState::new("t".into(), "h".into(), "a haiku".into(), "m".into());
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
}
