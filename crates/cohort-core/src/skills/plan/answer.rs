//! A planner's answer as the model wrote it: `<planned_step>`, a list of steps or a graph plan,
//! read leniently (`parse`); what may be planned is checked by the skill.

use crate::parse::{At, Obj, ParseError, list_items, tagged_json};
use serde_json::Value;

/// One planned step as the model wrote it. Checking that the executor exists, and that this
/// planner may plan it, belongs to the skill, which knows the agent's skills and tools.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawPlannedStep {
    /// What the step is for, in one line (the step's title in the plan).
    pub step_intention: String,
    /// `"skill"` or `"tool"` as written (key `type`; `step_type` is accepted too).
    pub step_type: String,
    /// The skill or MCP server name that should run the step, not yet checked.
    pub executor: String,
    /// The step's input for its executor; empty when the model left it out.
    pub text_content: String,
    /// Its id in a graph plan (`id`, a string or a number), if it has one.
    pub id: Option<String>,
    /// The ids of the steps it waits for (`depends_on`).
    pub depends_on: Vec<String>,
}

/// A plan as the model wrote it: its steps, and the ids after which the rest is planned again
/// (`replan`). Its structure is checked by `skills::plan_graph`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RawPlan {
    /// The planned steps, in the plan's order.
    pub steps: Vec<RawPlannedStep>,
    /// `replan`: the ids of the steps after which the agent plans the rest again.
    pub replan: Vec<String>,
}

/// `<planned_step>[{step_intention, type, executor, text_content}, …]</planned_step>`, or a graph
/// plan `{"steps": [{"id", "depends_on", …}, …], "replan": [ids]}`. An empty list is valid
/// (tool_decision: stop). `text_content` defaults to empty.
pub fn read(text: &str) -> Result<RawPlan, ParseError> {
    const TAG: &str = "planned_step";
    let (list, replan) = split_plan(TAG, tagged_json(text, TAG)?)?;
    let items = list_items(TAG, list)?;
    let steps = items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let o = Obj::new(TAG, At::Item(i + 1), item)?;
            Ok(RawPlannedStep {
                step_intention: o.str("step_intention")?,
                step_type: o.str_any(&["type", "step_type"])?,
                executor: o.str("executor")?,
                text_content: o.text("text_content")?,
                id: o.opt_id("id")?,
                depends_on: o.id_list("depends_on")?,
            })
        })
        .collect::<Result<_, ParseError>>()?;
    Ok(RawPlan { steps, replan })
}

#[cfg(test)]
/// The steps of a `<planned_step>` answer (see [`read`]), for the skills whose plans are lists.
pub(crate) fn planned_steps(text: &str) -> Result<Vec<RawPlannedStep>, ParseError> {
    read(text).map(|p| p.steps)
}

/// A plan object's step list and its `replan` ids. `{"steps": […], "replan": […]}` is a graph
/// plan; an object with one list field is that list (some models wrap the list in an object);
/// anything else is the list itself.
fn split_plan(tag: &'static str, value: Value) -> Result<(Value, Vec<String>), ParseError> {
    match value {
        whole @ Value::Object(_) if whole.get("steps").is_some_and(Value::is_array) => {
            let replan = Obj::new(tag, At::Plan, &whole)?.id_list("replan")?;
            let Value::Object(mut map) = whole else {
                return Ok((Value::Null, replan));
            };
            Ok((map.remove("steps").unwrap_or_default(), replan))
        }
        Value::Object(mut map) if map.len() == 1 && map.values().all(Value::is_array) => {
            let list = map.values_mut().next().map(Value::take).unwrap_or_default();
            Ok((list, Vec::new()))
        }
        other => Ok((other, Vec::new())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(intention: &str, ty: &str, executor: &str, text: &str) -> RawPlannedStep {
        RawPlannedStep {
            step_intention: intention.into(),
            step_type: ty.into(),
            executor: executor.into(),
            text_content: text.into(),
            id: None,
            depends_on: Vec::new(),
        }
    }

    const PLAN: &str = r#"<planned_step>
[
  {"step_intention": "Read the brief", "type": "skill", "executor": "think", "text_content": "What is asked?"},
  {"step_intention": "List files", "type": "tool", "executor": "workspace", "text_content": ""}
]
</planned_step>"#;

    #[test]
    fn a_clean_plan_is_read() {
        let steps = planned_steps(PLAN).unwrap();
        assert_eq!(
            steps,
            vec![
                step("Read the brief", "skill", "think", "What is asked?"),
                step("List files", "tool", "workspace", ""),
            ]
        );
    }

    #[test]
    fn a_noisy_plan_is_read() {
        let text = "Let me plan.\n```json\n<planned_step>\n[\n  {'step_intention': '写一份报告 📝', 'type': 'skill', \
                    'executor': 'quick_think', 'extra': True,}, // one step\n]\n```\nDone.";
        assert_eq!(
            planned_steps(text).unwrap(),
            vec![step("写一份报告 📝", "skill", "quick_think", "")]
        );
    }

    #[test]
    fn a_plan_quoted_in_the_format_then_answered_takes_the_answer() {
        let text = format!("Format: <planned_step>[...]</planned_step>\n{PLAN}");
        assert_eq!(planned_steps(&text).unwrap().len(), 2);
    }

    #[test]
    fn an_unclosed_plan_at_the_end_is_read() {
        let text = "<planned_step>[{\"step_intention\": \"x\", \"type\": \"skill\", \"executor\": \"think\"}]";
        assert_eq!(
            planned_steps(text).unwrap(),
            vec![step("x", "skill", "think", "")]
        );
    }

    #[test]
    fn an_empty_list_a_single_object_and_a_wrapped_list_are_accepted() {
        assert_eq!(
            planned_steps("<planned_step>[]</planned_step>").unwrap(),
            vec![]
        );
        let one = r#"<planned_step>{"step_intention": "x", "step_type": "skill", "executor": "think"}</planned_step>"#;
        assert_eq!(
            planned_steps(one).unwrap(),
            vec![step("x", "skill", "think", "")]
        );
        let wrapped = r#"<planned_step>{"steps": [{"step_intention": "x", "type": "tool", "executor": "web"}]}</planned_step>"#;
        assert_eq!(
            planned_steps(wrapped).unwrap(),
            vec![step("x", "tool", "web", "")]
        );
    }

    #[test]
    fn broken_plans_say_what_is_wrong() {
        let err = |t: &str| planned_steps(t).unwrap_err().to_string();
        assert_eq!(
            err("I have no plan."),
            "the answer has no <planned_step> tag"
        );
        assert_eq!(
            err("<planned_step> </planned_step>"),
            "the <planned_step> tag is empty"
        );
        assert_eq!(
            err("<planned_step>[{\"a\": 1}\n  {\"b\": 2}]</planned_step>"),
            "<planned_step> is not valid JSON: expected `,` or `]` at line 2 column 3"
        );
        assert_eq!(
            err(
                r#"<planned_step>[{"step_intention": "a", "type": "skill", "executor": "think"}, {"step_intention": "b", "type": "skill"}]</planned_step>"#
            ),
            "<planned_step> item 2 field `executor` is missing"
        );
        assert_eq!(
            err(
                r#"<planned_step>[{"step_intention": "a", "type": "skill", "executor": ["think"]}]</planned_step>"#
            ),
            "<planned_step> item 1 field `executor` should be a string, found a list"
        );
        assert_eq!(
            err("<planned_step>\"think\"</planned_step>"),
            "<planned_step> should be a JSON list, found a string"
        );
        assert_eq!(
            err("<planned_step>[\"think\"]</planned_step>"),
            "<planned_step> item 1 should be a JSON object, found a string"
        );
    }
}
