//! ask_info: a query for SyncState. It always takes a step lock: a fresh wait id goes on the
//! lock (tied to the step's task and stage) and SyncState's answer returns it, so the agent
//! runs nothing else until the answer is there.

use super::answer_schema::{answer, line, variant};
use super::{HistoryKind, SkillError, SkillKind, SkillOutcome, working};
use crate::clock::Now;
use crate::ids::{AgentId, WaitId};
use crate::message::{AskInfoQuery, AskInfoRequest, SYNC_STATE_SENDER};
use crate::parse::{ParseError, tagged_variant};
use crate::state::{Agent, StepState};
use serde_json::{Value, json};

/// ask_info: asks SyncState one of the ask_info queries and waits for the answer.
pub struct AskInfo;

impl SkillKind for AskInfo {
    fn answer_tags(&self) -> &'static [&'static str] {
        &["<ask_info>"]
    }

    /// It asks about the team; what it learns serves the steps that do the work.
    fn does_work(&self) -> bool {
        false
    }

    fn contract_words(&self) -> &'static [&'static str] {
        &[
            "managed_tasks",
            "joined_tasks",
            "`task`",
            "`stage`",
            "agent_templates",
            "all_agent_profiles",
            "team_profiles",
            "task_group_profiles",
            "stage_profiles",
            "agent_states",
            "skills_and_tools",
        ]
    }

    fn history(&self) -> HistoryKind {
        HistoryKind::None
    }

    fn answer_schema(&self, _agent: &Agent, _step: &StepState, _agents: &[String]) -> Value {
        answer(&[("ask_info", query())], &[])
    }

    fn interpret(
        &self,
        agent: &mut Agent,
        step: &StepState,
        answer: &str,
        now: Now,
    ) -> Result<SkillOutcome, SkillError> {
        interpret(agent, step, answer, now)
    }

    fn acts_through_the_team(&self) -> bool {
        true
    }
}

/// `<ask_info>`: one of the eleven queries.
fn query() -> Value {
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

/// `<ask_info>{"type": …, …}`. A single id where `agent_ids` wants a list is taken as that list.
pub(super) fn read(text: &str) -> Result<AskInfoQuery, ParseError> {
    tagged_variant(text, "ask_info", "type", |map| {
        if let Some(id @ Value::String(_)) = map.get_mut("agent_ids") {
            *id = Value::Array(vec![id.take()]);
        }
    })
}

/// The query for SyncState, with a fresh wait id on the agent's step lock.
pub fn interpret(
    agent: &mut Agent,
    step: &StepState,
    answer: &str,
    now: Now,
) -> Result<SkillOutcome, SkillError> {
    let query = read(answer)?;
    let waiting_id = WaitId::random();
    agent.hold_waits(
        vec![(waiting_id.clone(), AgentId::from(SYNC_STATE_SENDER))],
        &step.task_id,
        &step.stage_id,
        now.unix_ms,
        None,
    );
    let request = AskInfoRequest {
        query,
        waiting_id,
        sender_task_id: step.task_id.clone(),
        sender_stage: step.stage_id.clone(),
    };
    Ok(SkillOutcome {
        ask_info: Some(request.clone()),
        ..working(json!({ "ask_instruction": request }))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skills::test_support::*;
    use crate::state::Skill;

    #[test]
    fn every_ask_info_type_is_read() {
        let q = |json: &str| read(&format!("<ask_info>{json}</ask_info>"));
        for (json, want) in [
            (r#"{"type": "managed_tasks"}"#, AskInfoQuery::ManagedTasks),
            (r#"{"type": "joined_tasks"}"#, AskInfoQuery::JoinedTasks),
            (
                r#"{"type": "task", "task_id": "t"}"#,
                AskInfoQuery::Task {
                    task_id: "t".into(),
                },
            ),
            (
                r#"{"type": "stage", "stage_id": "s"}"#,
                AskInfoQuery::Stage {
                    task_id: None,
                    stage_id: "s".into(),
                },
            ),
            (
                r#"{"type": "Agent Templates"}"#,
                AskInfoQuery::AgentTemplates,
            ),
            (
                r#"{"type": "all_agent_profiles"}"#,
                AskInfoQuery::AllAgentProfiles,
            ),
            (r#"{"type": "team_profiles"}"#, AskInfoQuery::TeamProfiles),
            (
                r#"{"type": "task_group_profiles", "task_id": "t"}"#,
                AskInfoQuery::TaskGroupProfiles {
                    task_id: "t".into(),
                },
            ),
            (
                r#"{"type": "stage_profiles", "task_id": "t", "stage_id": "s"}"#,
                AskInfoQuery::StageProfiles {
                    task_id: Some("t".into()),
                    stage_id: "s".into(),
                },
            ),
            (
                r#"{"type": "agent_states", "agent_ids": "a"}"#,
                AskInfoQuery::AgentStates {
                    agent_ids: vec!["a".into()],
                },
            ),
            (
                r#"{"type": "skills_and_tools"}"#,
                AskInfoQuery::SkillsAndTools,
            ),
        ] {
            assert_eq!(q(json).unwrap(), want, "{json}");
        }
        let e = q(r#"{"type": "weather"}"#).unwrap_err();
        assert!(e.to_string().contains("unknown type `weather`"), "{e}");
        assert!(e.to_string().contains("skills_and_tools"), "{e}");
        let e = q(r#"{"type": "task"}"#).unwrap_err();
        assert!(e.to_string().contains("task_id"), "{e}");
        assert!(
            q(r#"{"task_id": "t"}"#)
                .unwrap_err()
                .to_string()
                .contains("type")
        );
    }

    #[test]
    fn a_query_takes_one_wait_id_that_the_request_carries() {
        let mut a = agent(&[Skill::AskInfo]);
        let step = running(&mut a, Skill::AskInfo, "who can help?");
        let o = interpret(
            &mut a,
            &step,
            r#"<ask_info>{"type": "all_agent_profiles"}</ask_info>"#,
            now(),
        )
        .unwrap();
        let r = o.ask_info.unwrap();
        assert_eq!(r.query, AskInfoQuery::AllAgentProfiles);
        assert_eq!(a.step_lock.ids().collect::<Vec<_>>(), vec![&r.waiting_id]);
        assert!(a.step_lock.holds_in(&step.task_id, &step.stage_id));
        assert!(
            a.step_lock
                .answered_by(&r.waiting_id, &SYNC_STATE_SENDER.into())
        );
        assert!(!a.step_lock.answered_by(&r.waiting_id, &"writer".into()));
        assert_eq!(
            (r.sender_task_id, r.sender_stage),
            (step.task_id, step.stage_id)
        );
        assert_eq!(o.result["ask_instruction"]["type"], "all_agent_profiles");
    }

    #[test]
    fn a_bad_query_takes_no_lock() {
        let mut a = agent(&[Skill::AskInfo]);
        let step = running(&mut a, Skill::AskInfo, "");
        assert!(
            interpret(
                &mut a,
                &step,
                r#"<ask_info>{"type": "gossip"}</ask_info>"#,
                now()
            )
            .is_err()
        );
        assert!(a.step_lock.is_empty());
    }
}
