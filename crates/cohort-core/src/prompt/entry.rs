//! A history entry's result as a prompt shows it: one line of JSON with what the step produced,
//! not the bookkeeping around it. Every call after the step carries this line, so each token
//! left out here is saved on all of them.

use crate::state::{Executor, StepResult};
use serde_json::{Value, json};

/// A step's result for its history entry: what the step produced (and who cancelled it), not
/// the answers asked about again or the repairs made to it, which are records for people; empty
/// fields left out; what the runtime set around the model's answer left out by its skill
/// (`SkillKind::history_output`: a plan as each step's executor and intention, a sent message
/// as its sender wrote it).
pub fn result_line(executor: &Executor, result: &StepResult) -> String {
    // A 0.5B writer's history showed its planning step's re-asked answer (a passage written
    // over and over), and its later steps wrote that passage again: a model copies what its
    // prompt shows, so the answers that could not be used stay out of it.
    let mut output = result.output.clone();
    if let Some(skill) = executor.skill() {
        skill.kind().history_output(&mut output);
    }
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
        let line = result_line(&Executor::Skill(crate::state::Skill::TaskManager), &result);
        assert!(line.contains(r#""task_intention":"write one""#), "{line}");
        for set in ["requested_by", "goal_step", "trace_id", "4bf92f"] {
            assert!(!line.contains(set), "{set} in {line}");
        }
        // Nor what the runtime wrote of a task's summary beside the model's words.
        let result = StepResult::output(json!({"task_instruction": {
            "action": "finish_task", "task_id": "t1", "task_summary": "Done.",
            "summary_written": {"written": "results_added", "reports": "- stage: a poem"}}}));
        let line = result_line(&Executor::Skill(crate::state::Skill::TaskManager), &result);
        assert!(line.contains(r#""task_summary":"Done.""#), "{line}");
        assert!(
            !line.contains("summary_written") && !line.contains("a poem"),
            "{line}"
        );
    }
}
