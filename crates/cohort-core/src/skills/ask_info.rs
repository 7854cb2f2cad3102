//! ask_info: a query for SyncState. It always takes a step lock: a fresh wait id goes on the
//! lock (tied to the step's task and stage) and SyncState's answer returns it, so the agent
//! runs nothing else until the answer is there.

use super::{SkillError, SkillOutcome, working};
use crate::clock::Now;
use crate::ids::{AgentId, WaitId};
use crate::message::{AskInfoRequest, SYNC_STATE_SENDER};
use crate::parse;
use crate::state::{Agent, StepState};
use serde_json::json;

pub fn interpret(
    agent: &mut Agent,
    step: &StepState,
    answer: &str,
    now: Now,
) -> Result<SkillOutcome, SkillError> {
    let query = parse::ask_info(answer)?;
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
    use crate::message::AskInfoQuery;
    use crate::skills::test_support::*;
    use crate::state::Skill;

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
