//! A history entry's result as a prompt shows it: one line of JSON with what the step produced,
//! not the bookkeeping around it. Every call after the step carries this line, so each token
//! left out here is saved on all of them.

use crate::message::Message;
use crate::skills::plan_key;
use crate::state::{PlannedStep, Skill, StepResult};
use serde::Deserialize;
use serde_json::{Map, Value, json};

/// A step's result for its history entry: what the step produced (and who cancelled it), not
/// the answers asked about again or the repairs made to it, which are records for people; empty
/// fields left out; a plan as each step's executor and intention (each planned step has an
/// entry of its own, with its text); a sent message as what its sender wrote, without the ids
/// the runtime filled in.
pub fn result_line(result: &StepResult) -> String {
    // A 0.5B writer's history showed its planning step's re-asked answer (a passage written
    // over and over), and its later steps wrote that passage again: a model copies what its
    // prompt shows, so the answers that could not be used stay out of it.
    let mut output = result.output.clone();
    compact_output(&mut output);
    if let Some(c) = &result.cancelled {
        output.insert("cancelled".into(), json!(c));
    }
    pruned_line(Value::Object(output))
}

/// A value as one line of JSON, its nulls and empty lists and objects left out. One line
/// cannot open a section, so it needs no fence.
pub fn json_line(v: &impl serde::Serialize) -> String {
    pruned_line(serde_json::to_value(v).unwrap_or_default())
}

fn pruned_line(mut v: Value) -> String {
    prune(&mut v);
    serde_json::to_string(&v).unwrap_or_default()
}

fn compact_output(output: &mut Map<String, Value>) {
    let planners = [
        Skill::Planning,
        Skill::Reflection,
        Skill::ToolDecision,
        Skill::Decision,
    ];
    for key in planners.map(plan_key) {
        let Some(plan) = output.get_mut(key) else {
            continue;
        };
        if let Ok(steps) = Vec::<PlannedStep>::deserialize(&*plan) {
            *plan = steps.iter().map(plan_outline).collect();
        }
    }
    if let Some(sent) = output.get_mut("send_message")
        && let Ok(m) = Message::deserialize(&*sent)
    {
        *sent = as_written(&m);
    }
    // What the skill sets on a new task (whose goal, the trace) is not the model's to repeat.
    if let Some(Value::Object(task)) = output.get_mut("task_instruction") {
        for key in ["requested_by", "goal_step", "trace_id"] {
            task.remove(key);
        }
    }
}

/// A planned step without its text (its own entry shows it).
fn plan_outline(s: &PlannedStep) -> Value {
    let mut v = json!({"executor": s.executor.name(), "step_intention": s.step_intention});
    if let Some(id) = &s.id {
        v["id"] = json!(id);
        v["depends_on"] = json!(s.depends_on);
    }
    v
}

/// A sent message as its sender wrote it: the runtime's wait ids become `waiting: true` (left
/// out when it does not wait); the task and sender (the entry's own) are left out.
fn as_written(m: &Message) -> Value {
    json!({
        "receiver": m.receiver,
        "message": m.message,
        "stage_relative": m.stage_relative,
        "need_reply": m.need_reply,
        "waiting": m.waiting.is_some().then_some(true),
        "ask": m.ask,
    })
}

fn prune(v: &mut Value) {
    let empty = |v: &Value| match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    };
    match v {
        Value::Object(o) => {
            o.values_mut().for_each(prune);
            o.retain(|_, v| !empty(v));
        }
        Value::Array(a) => a.iter_mut().for_each(prune),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_tasks_line_shows_what_the_model_wrote_not_what_the_skill_set() {
        let result = StepResult::output(json!({"task_instruction": {
            "action": "add_task", "task_name": "Haiku", "task_intention": "write one",
            "task_id": "t1", "requested_by": "op", "goal_step": "s1",
            "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736"}}));
        let line = result_line(&result);
        assert!(line.contains(r#""task_intention":"write one""#), "{line}");
        for set in ["requested_by", "goal_step", "trace_id", "4bf92f"] {
            assert!(!line.contains(set), "{set} in {line}");
        }
    }
}
