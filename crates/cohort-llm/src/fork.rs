//! A fork of a recorded run (`cohort replay --fork-at`), the pure part: where the fork goes its
//! own way (the first recorded call of the chosen step: every call before it is answered from
//! the record, that one and all after by the live model), and an edited step text put into
//! the recorded answer that planned the step, so the replayed run makes the step with the new
//! text as though the model had written it (the step's state holds it, and so does its prompt).

use super::recorded::Call;
use cohort_core::ids::StepId;

/// Why a fork cannot be made as asked.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ForkError {
    #[error(
        "step `{0}` asked no model in the record (a tool step, a person's, or one whose calls \
         the ring no longer holds): fork at a step that asked the model"
    )]
    NoCall(StepId),
    #[error(
        "step `{0}`'s text was not written in a model's plan (it came from a goal, a message or \
         a stage's start), so an edited text cannot take its place: edit the agent's prompt in \
         the team file instead"
    )]
    NotPlanned(StepId),
    #[error(
        "no recorded answer of step `{planner}`, which planned step `{step}`, holds its text as \
         the step has it (the runtime mended it): an edited text cannot take its place"
    )]
    TextNotFound { step: StepId, planner: StepId },
}

/// The `seq` of the recorded call from which a fork at `step` goes its own way: the step's
/// first call.
pub fn fork_point(calls: &[Call], step: &StepId) -> Result<u64, ForkError> {
    calls
        .iter()
        .filter(|c| &c.step_id == step)
        .map(|c| c.seq)
        .min()
        .ok_or_else(|| ForkError::NoCall(step.clone()))
}

/// Puts `new` in place of step `step`'s text `old` in the newest answer of step `planner`
/// (the step whose plan made it) that holds it, as a JSON string (in the text or a tool
/// call's arguments); the `seq` of the answer edited.
pub fn edit_planned_text(
    calls: &mut [Call],
    step: &StepId,
    planner: &StepId,
    old: &str,
    new: &str,
) -> Result<u64, ForkError> {
    let (old, new) = (json_string(old), json_string(new));
    let holder = calls
        .iter_mut()
        .filter(|c| &c.step_id == planner)
        .rev()
        .find(|c| {
            c.reply.as_deref().is_some_and(|r| r.contains(&old))
                || c.tool_calls.iter().any(|t| t.arguments.contains(&old))
        })
        .ok_or_else(|| ForkError::TextNotFound {
            step: step.clone(),
            planner: planner.clone(),
        })?;
    if let Some(reply) = &mut holder.reply {
        *reply = reply.replace(&old, &new).into();
    }
    for t in &mut holder.tool_calls {
        t.arguments = t.arguments.replace(&old, &new);
    }
    Ok(holder.seq)
}

/// `text` as a JSON string, quotes and all.
fn json_string(text: &str) -> String {
    serde_json::Value::String(text.to_owned()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(step: &str, seq: u64, reply: &str) -> Call {
        serde_json::from_value(serde_json::json!({
            "step_id": step, "agent_id": "w", "skill": "planning", "seq": seq, "sent_at": 0,
            "answered_at": 0, "system": "", "prompt": "", "tool_rounds": 0, "reply": reply,
            "error": null, "usage": {"prompt_tokens": 1, "completion_tokens": 1}, "cut": null
        }))
        .unwrap()
    }

    #[test]
    fn a_fork_goes_its_own_way_from_the_steps_first_call() {
        let calls = [call("p", 1, ""), call("s", 4, ""), call("s", 3, "")];
        assert_eq!(fork_point(&calls, &"s".into()), Ok(3));
        assert_eq!(
            fork_point(&calls, &"tool-step".into()),
            Err(ForkError::NoCall("tool-step".into()))
        );
    }

    #[test]
    fn an_edited_text_takes_the_place_of_the_planned_one_in_the_plans_last_answer() {
        let plan = |text: &str| {
            format!(
                r#"<planned_step>[{{"executor": "think", "text_content": {text:?}}}]</planned_step>"#
            )
        };
        let mut calls = [
            call("p", 1, "not json at all"),
            call("p", 2, &plan("draft \"it\"")),
            call("other", 3, &plan("draft \"it\"")),
        ];
        let at = edit_planned_text(
            &mut calls,
            &"s".into(),
            &"p".into(),
            "draft \"it\"",
            "draft it in five words",
        );
        assert_eq!(at, Ok(2));
        assert_eq!(
            calls[1].reply.as_deref(),
            Some(plan("draft it in five words").as_str())
        );
        assert_eq!(
            calls[2].reply.as_deref(),
            Some(plan("draft \"it\"").as_str()),
            "another step's plan"
        );
        assert_eq!(
            edit_planned_text(&mut calls, &"s".into(), &"p".into(), "never planned", "x"),
            Err(ForkError::TextNotFound {
                step: "s".into(),
                planner: "p".into()
            })
        );
    }
}
