//! Answers that carry plans, texts, tool calls and memory: `<planned_step>`,
//! `<completion_summary>`, `<think>`, `<quick_think>`, `<tool_instruction>`, `<persistent_memory>`.

use super::fields::{Obj, list_items, tagged_json, tagged_text};
use super::{At, JsonKind, ParseError};
use crate::state::MemoryOp;
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
pub fn plan(text: &str) -> Result<RawPlan, ParseError> {
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

/// The steps of a `<planned_step>` answer (see [`plan`]), for the skills whose plans are lists.
pub fn planned_steps(text: &str) -> Result<Vec<RawPlannedStep>, ParseError> {
    plan(text).map(|p| p.steps)
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

/// `<completion_summary>`: what this agent achieved in the stage.
pub fn completion_summary(text: &str) -> Result<String, ParseError> {
    tagged_text(text, "completion_summary")
}

/// `<think>`. Reasoning models may open their answer with their own `<think>` block; the last
/// block is the answer.
pub fn think(text: &str) -> Result<String, ParseError> {
    tagged_text(text, "think")
}

/// `<quick_think>`.
pub fn quick_think(text: &str) -> Result<String, ParseError> {
    tagged_text(text, "quick_think")
}

/// `<tool_instruction>`: a JSON object, checked by the tool executor. A list holding exactly one
/// object is accepted as that object.
pub fn tool_instruction(text: &str) -> Result<Value, ParseError> {
    const TAG: &str = "tool_instruction";
    match tagged_json(text, TAG)? {
        v @ Value::Object(_) => Ok(v),
        Value::Array(mut items) if items.len() == 1 && items[0].is_object() => Ok(items.remove(0)),
        other => Err(ParseError::WrongShape {
            tag: TAG,
            at: At::Whole,
            expected: JsonKind::JsonObject,
            found: JsonKind::of(&other),
        }),
    }
}

/// `<persistent_memory>[{"add": "text"}, {"delete": "20250613T103022"}]`. Optional: no tag, an
/// empty tag or `null` means no change. An entry holding both keys yields both operations.
pub fn persistent_memory(text: &str) -> Result<Vec<MemoryOp>, ParseError> {
    const TAG: &str = "persistent_memory";
    let value = match tagged_json(text, TAG) {
        Err(ParseError::MissingTag { .. } | ParseError::EmptyTag { .. }) => return Ok(Vec::new()),
        other => other?,
    };
    let mut ops = Vec::new();
    for (i, item) in list_items(TAG, value)?.iter().enumerate() {
        let o = Obj::new(TAG, At::Item(i + 1), item)?;
        let add = o.opt_str("add")?;
        let delete = o.opt_str("delete")?;
        if add.is_none() && delete.is_none() {
            return Err(o.missing("add` or `delete"));
        }
        ops.extend(add.map(MemoryOp::Add));
        ops.extend(delete.map(MemoryOp::Delete));
    }
    Ok(ops)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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

    #[test]
    fn text_answers_are_read_amid_noise() {
        assert_eq!(
            completion_summary("Done.\n<completion_summary>写完了 ✅</completion_summary>")
                .unwrap(),
            "写完了 ✅"
        );
        assert_eq!(
            think("<think>draft reasoning</think>\n<think>final thought</think>").unwrap(),
            "final thought"
        );
        assert_eq!(
            quick_think("<quick_think>\n```\nshort\n```\n</quick_think>").unwrap(),
            "short"
        );
        assert_eq!(
            quick_think("<quick_think>cut off 中文").unwrap(),
            "cut off 中文"
        );
    }

    #[test]
    fn broken_text_answers_say_what_is_wrong() {
        assert_eq!(
            think("just prose").unwrap_err().to_string(),
            "the answer has no <think> tag"
        );
        assert_eq!(
            quick_think("<quick_think></quick_think>")
                .unwrap_err()
                .to_string(),
            "the <quick_think> tag is empty"
        );
        assert_eq!(
            completion_summary("<think>x</think>").unwrap_err(),
            ParseError::MissingTag {
                tag: "completion_summary"
            }
        );
    }

    #[test]
    fn tool_instructions_are_objects() {
        let text = "Calling it:\n<tool_instruction>\n```json\n{\"tool_name\": \"read\", \"arguments\": {\"path\": \"a.md\",},}\n```\n</tool_instruction>";
        assert_eq!(
            tool_instruction(text).unwrap(),
            json!({"tool_name": "read", "arguments": {"path": "a.md"}})
        );
        let one =
            "<tool_instruction>[{\"instruction_type\": \"get_description\"}]</tool_instruction>";
        assert_eq!(
            tool_instruction(one).unwrap(),
            json!({"instruction_type": "get_description"})
        );
        assert_eq!(
            tool_instruction("<tool_instruction>[1, 2]</tool_instruction>")
                .unwrap_err()
                .to_string(),
            "<tool_instruction> should be a JSON object, found a list"
        );
        assert_eq!(
            tool_instruction("nothing").unwrap_err().to_string(),
            "the answer has no <tool_instruction> tag"
        );
        assert!(
            tool_instruction("<tool_instruction>{oops</tool_instruction>")
                .unwrap_err()
                .to_string()
                .starts_with("<tool_instruction> is not valid JSON: ")
        );
    }

    #[test]
    fn memory_ops_are_read() {
        let text = "Answer.\n<persistent_memory>[{\"add\": \"### 偏好\\nlikes tea\"}, {\"delete\": \"20250613T103022\"},]</persistent_memory>";
        assert_eq!(
            persistent_memory(text).unwrap(),
            vec![
                MemoryOp::Add("### 偏好\nlikes tea".into()),
                MemoryOp::Delete("20250613T103022".into())
            ]
        );
        assert_eq!(
            persistent_memory("<persistent_memory>{'add': 'one'}</persistent_memory>").unwrap(),
            vec![MemoryOp::Add("one".into())]
        );
    }

    #[test]
    fn absent_or_empty_memory_means_no_change() {
        assert_eq!(persistent_memory("no memory here").unwrap(), vec![]);
        assert_eq!(
            persistent_memory("<persistent_memory></persistent_memory>").unwrap(),
            vec![]
        );
        assert_eq!(
            persistent_memory("<persistent_memory>[]</persistent_memory>").unwrap(),
            vec![]
        );
        assert_eq!(
            persistent_memory("<persistent_memory>null</persistent_memory>").unwrap(),
            vec![]
        );
    }

    #[test]
    fn broken_memory_says_what_is_wrong() {
        let err = |t: &str| persistent_memory(t).unwrap_err().to_string();
        assert_eq!(
            err("<persistent_memory>[{\"remember\": \"x\"}]</persistent_memory>"),
            "<persistent_memory> item 1 field `add` or `delete` is missing"
        );
        assert_eq!(
            err("<persistent_memory>[{\"add\": 5}]</persistent_memory>"),
            "<persistent_memory> item 1 field `add` should be a string, found a number"
        );
        assert!(
            err("<persistent_memory>[{\"add\": </persistent_memory>")
                .starts_with("<persistent_memory> is not valid JSON")
        );
    }
}
