//! The size cap on step text (`retention.step_chars`): a step keeps at most that many
//! characters in any one text (its intention, content, a tool's arguments or result), the
//! start and the end of a longer one with the cut said between them. A team that runs for
//! months must not keep a 50 MB tool result in memory, in every snapshot and in every prompt.

use serde_json::Value;

/// `retention.step_chars` when the team file does not set it.
pub const DEFAULT_STEP_CHARS: usize = 64 * 1024;

/// Cuts the middle out of `s` if it has more than `max` characters, keeping its start and
/// end; says how much was cut. Returns whether it cut.
pub fn cap_str(s: &mut String, max: usize) -> bool {
    let chars = s.chars().count();
    if chars <= max {
        return false;
    }
    let cut = chars - max;
    let head = max / 2;
    let tail = max - head;
    let start_end = s.char_indices().nth(head).map_or(s.len(), |(i, _)| i);
    let end_start = s
        .char_indices()
        .nth(chars - tail)
        .map_or(s.len(), |(i, _)| i);
    let mut out = String::with_capacity(max * 4 + 96);
    out.push_str(&s[..start_end]);
    out.push_str(&format!(
        "\n[… {cut} characters cut: step text is kept up to {max} characters (retention.step_chars) …]\n"
    ));
    out.push_str(&s[end_start..]);
    *s = out;
    true
}

/// [`cap_str`] on every string inside a JSON value (keys are left alone).
pub fn cap_value(v: &mut Value, max: usize) {
    match v {
        Value::String(s) => {
            cap_str(s, max);
        }
        Value::Array(items) => items.iter_mut().for_each(|i| cap_value(i, max)),
        Value::Object(map) => map.values_mut().for_each(|i| cap_value(i, max)),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Agent;
    use serde_json::json;

    #[test]
    fn short_text_is_untouched() {
        let mut s = "héllo".to_string();
        assert!(!cap_str(&mut s, 5));
        assert_eq!(s, "héllo");
    }

    #[test]
    fn long_text_keeps_start_and_end_and_says_what_was_cut() {
        let mut s = format!("{}{}{}", "a".repeat(10), "é".repeat(100), "z".repeat(10));
        assert!(cap_str(&mut s, 20));
        assert!(s.starts_with(&"a".repeat(10)));
        assert!(s.ends_with(&"z".repeat(10)));
        assert!(s.contains("[… 100 characters cut"), "{s}");
        assert!(s.contains("retention.step_chars"));
        assert!(!s.contains('é'));
    }

    #[test]
    fn every_string_in_a_value_is_capped() {
        let mut v =
            json!({"result": ["x".repeat(50), {"deep": "y".repeat(50)}], "n": 7, "ok": "short"});
        cap_value(&mut v, 10);
        let deep = v["result"][1]["deep"].as_str().unwrap();
        assert!(deep.starts_with("yyyyy") && deep.contains("40 characters cut"));
        assert!(
            v["result"][0]
                .as_str()
                .unwrap()
                .contains("40 characters cut")
        );
        assert_eq!(v["n"], 7);
        assert_eq!(v["ok"], "short");
    }

    /// Every way text enters a step goes through the cap, and readers get the capped text.
    #[test]
    fn an_agent_keeps_its_steps_text_under_its_cap() {
        use crate::event::{Change, StepChange, StepUpdate};
        use crate::ids::StageRef;
        use crate::state::{AgentState, Executor, StepResult, StepState};
        let mut a = Agent::from(AgentState::new(
            "w".into(),
            "W".into(),
            "r".into(),
            "p".into(),
        ));
        a.settings_mut().step_chars = 10;
        let mut step = StepState::new(
            "t".into(),
            StageRef::NoRelative,
            "w".into(),
            Executor::Tool("ws".into()),
            "i".repeat(30),
            "c".repeat(30),
        );
        step.instruction_content = Some(json!({"path": "p".repeat(30)}));
        let id = step.step_id.clone();
        a.add_steps(vec![step]);
        a.update_step(
            &id,
            StepUpdate {
                execute_result: Some(Box::new(StepResult::output(
                    json!({"text": "r".repeat(30)}),
                ))),
                ..Default::default()
            },
        );
        let kept = a.agent_step.get(&id).unwrap().clone();
        for text in [
            kept.step_intention.as_str(),
            kept.text_content.as_str(),
            kept.instruction_content.as_ref().unwrap()["path"]
                .as_str()
                .unwrap(),
            kept.execute_result.as_ref().unwrap()["text"]
                .as_str()
                .unwrap(),
        ] {
            assert!(text.contains("20 characters cut"), "{text}");
        }
        let changes = a.take_changes();
        let Some(Change::Step(StepChange::Added { step, .. })) = changes.first() else {
            panic!("{changes:?}");
        };
        assert_eq!(step.text_content, kept.text_content);
        let Some(Change::Step(StepChange::Updated { update, .. })) = changes.last() else {
            panic!("{changes:?}");
        };
        assert_eq!(
            update.execute_result.as_deref(),
            kept.execute_result.as_ref()
        );
    }
}
