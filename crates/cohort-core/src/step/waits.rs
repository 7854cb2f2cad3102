//! Waits that ran out of time (SPEC §5, "every wait has a deadline"): each is released, and
//! the one who waited is told. An agent gets a step next that says whose reply never came
//! and asks it to go on without it or ask again; a person gets a notice.

use crate::state::{Agent, Executor, Skill, StepOrigin, StepState, Wait};

/// Releases every wait of `agent` whose deadline is at or before `now_ms`; returns them.
pub fn expire_waits(agent: &mut Agent, now_ms: i64) -> Vec<Wait> {
    let expired = agent.step_lock.expired(now_ms);
    if expired.is_empty() {
        return expired;
    }
    let ids: Vec<_> = expired.iter().map(|w| w.id.clone()).collect();
    agent.release_waits(&ids);
    let mut steps = Vec::new();
    let t = agent.settings.texts.clone();
    for w in &expired {
        let from = w
            .from
            .as_ref()
            .map_or_else(|| t.no_reply_receiver(), |f| t.no_reply_agent(f));
        if agent.human_config.is_some() {
            agent.add_notice(t.no_reply_notice(&from, &w.task));
            continue;
        }
        // Work that ended meanwhile already freed its waits; this is only a guard.
        if !agent.holds(&w.task, &w.stage) {
            continue;
        }
        let skill = if agent.skills.contains(&Skill::Decision) {
            Skill::Decision
        } else {
            Skill::ProcessMessage
        };
        steps.push(
            StepState::new(
                w.task.clone(),
                w.stage.clone(),
                agent.agent_id.clone(),
                Executor::Skill(skill),
                t.no_reply_intention(&from),
                t.no_reply_text(&from),
            )
            .with_origin(StepOrigin::NoReply {
                from: w.from.clone(),
            }),
        );
    }
    agent.add_next_steps(steps);
    expired
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{StageId, StageRef};
    use crate::state::AgentState;
    use crate::state::{ConversationPool, HumanConfig};

    fn waiting(skills: &[Skill]) -> Agent {
        let mut a = Agent::from(AgentState::new(
            "b".into(),
            "B".into(),
            "r".into(),
            "p".into(),
        ));
        a.skills = skills.to_vec();
        let s = StageRef::Stage(StageId::from("s"));
        a.note_working_memory("t".into(), Some(s.clone()));
        a.hold_waits(
            vec![("soon".into(), "w".into())],
            &"t".into(),
            &s,
            0,
            Some(secs(60)),
        );
        a.hold_waits(
            vec![("late".into(), "x".into())],
            &"t".into(),
            &s,
            0,
            Some(secs(600)),
        );
        a
    }

    fn secs(s: u64) -> std::time::Duration {
        std::time::Duration::from_secs(s)
    }

    #[test]
    fn an_expired_wait_is_released_and_the_agent_decides_without_it() {
        let mut a = waiting(&[Skill::Decision]);
        assert!(expire_waits(&mut a, 59_999).is_empty());
        let gone = expire_waits(&mut a, 60_000);
        assert_eq!(gone.len(), 1);
        assert!(!a.step_lock.holds(&"soon".into()));
        assert!(a.step_lock.holds(&"late".into()), "the other wait goes on");
        let next = a.agent_step.next().unwrap();
        assert_eq!(next.executor, Executor::Skill(Skill::Decision));
        assert!(next.step_intention.contains("agent `w`"));
        assert_eq!(next.stage_id, StageRef::Stage(StageId::from("s")));
    }

    #[test]
    fn without_decision_the_agent_reads_it_as_a_message() {
        let mut a = waiting(&[]);
        expire_waits(&mut a, i64::MAX);
        assert!(a.step_lock.is_empty());
        let skills: Vec<_> = a
            .agent_step
            .todo()
            .map(|id| a.agent_step.get(id).unwrap().executor.clone())
            .collect();
        assert_eq!(skills, vec![Executor::Skill(Skill::ProcessMessage); 2]);
    }

    #[test]
    fn a_person_is_told_and_gets_no_step() {
        let mut a = waiting(&[]);
        a.human_config = Some(HumanConfig {
            display_name: "B".into(),
        });
        a.conversation_pool = Some(ConversationPool::default());
        expire_waits(&mut a, 60_000);
        assert_eq!(a.agent_step.todo_len(), 0);
        let notices = &a.conversation_pool.as_ref().unwrap().global_messages;
        assert!(
            notices
                .iter()
                .any(|n| n.contains("No reply from agent `w`"))
        );
    }
}
