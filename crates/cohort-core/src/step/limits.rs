//! Limits on how long an agent may go on in one stage (seed 000's AGENT_MAX_STEPS): a cap on the
//! steps it runs there, and a stop when it runs the same step again and again. A step past a
//! limit fails without calling its model, and the manager is told the agent cannot go on.

use crate::state::{Agent, StepState};

/// Why `step` may not run, or `None`. Only stage work is limited: the base task's steps
/// (goals, chat) are the team's whole life, not one piece of work.
///
/// Cost: one pass over the agent's steps, which its step list's own retention bounds.
pub fn stop_reason(agent: &Agent, step: &StepState) -> Option<String> {
    step.stage_id.stage()?;
    let limits = &agent.settings.step_limits;
    let done: Vec<&StepState> = agent
        .agent_step
        .ended_beside(step)
        // A native tool loop's calls belong to the one step that made them.
        .filter(|s| !s.origin.is_tool_call())
        .collect();
    if done.len() >= limits.per_stage {
        return Some(format!(
            "stopped: {} steps already ran in this stage (step_limits.per_stage is {})",
            done.len(),
            limits.per_stage
        ));
    }
    // The same executor, intention and text: steps made for messages share an intention
    // ("Process the message from agent `x`") but not a text.
    let same = |s: &&&StepState| {
        s.executor == step.executor
            && s.step_intention == step.step_intention
            && s.text_content == step.text_content
    };
    let run = done.iter().rev().take_while(|s| same(s)).count();
    (run >= limits.repeats).then(|| {
        format!(
            "stopped: `{}` \"{}\" ran {run} times in a row, the same each time (step_limits.repeats is {})",
            step.executor, step.step_intention, limits.repeats
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{StageId, StageRef};
    use crate::state::AgentState;
    use crate::state::StepLimits;
    use crate::state::{Executor, Skill, StepExecutionState};

    fn agent_with(done: &[(&str, Skill)]) -> Agent {
        let mut a = Agent::from(AgentState::new(
            "w".into(),
            "W".into(),
            "writer".into(),
            "".into(),
        ));
        for (intention, skill) in done {
            run(&mut a, step(intention, *skill));
        }
        a
    }

    /// Queues `s`, starts it and marks it finished.
    fn run(a: &mut Agent, s: StepState) {
        a.add_steps(vec![s]);
        let s = a.start_next().unwrap();
        a.update_step(
            &s.step_id,
            crate::event::StepUpdate {
                execution_state: Some(StepExecutionState::Finished),
                ..Default::default()
            },
        );
    }

    fn step(intention: &str, skill: Skill) -> StepState {
        StepState::new(
            "t".into(),
            StageRef::Stage(StageId::from("s")),
            "w".into(),
            Executor::Skill(skill),
            intention,
            "",
        )
    }

    #[test]
    fn the_same_step_a_fourth_time_in_a_row_is_stopped() {
        let a = agent_with(&[
            ("look", Skill::Think),
            ("look", Skill::Think),
            ("look", Skill::Think),
        ]);
        let why = stop_reason(&a, &step("look", Skill::Think)).unwrap();
        assert!(why.contains("3 times in a row"), "{why}");
        // Another intention, or the same one after something else, may run.
        assert_eq!(stop_reason(&a, &step("write", Skill::Think)), None);
        let b = agent_with(&[
            ("look", Skill::Think),
            ("look", Skill::Think),
            ("x", Skill::Think),
        ]);
        assert_eq!(stop_reason(&b, &step("look", Skill::Think)), None);
    }

    #[test]
    fn a_stage_past_its_step_cap_stops_every_further_step() {
        let limits = StepLimits {
            per_stage: 4,
            repeats: 10,
            ..StepLimits::default()
        };
        let names = ["a", "b", "c", "d"];
        let done: Vec<(&str, Skill)> = names.iter().map(|n| (*n, Skill::Think)).collect();
        let mut a = agent_with(&done[..3]);
        a.settings_mut().step_limits = limits;
        assert_eq!(stop_reason(&a, &step("e", Skill::Think)), None);
        let mut a = agent_with(&done);
        a.settings_mut().step_limits = limits;
        let why = stop_reason(&a, &step("e", Skill::Reflection)).unwrap();
        assert!(why.contains("4 steps already ran"), "{why}");
    }

    #[test]
    fn base_task_steps_are_not_limited() {
        let mut a = Agent::from(AgentState::new(
            "m".into(),
            "M".into(),
            "manager".into(),
            "".into(),
        ));
        let mut goal = step("read", Skill::ProcessMessage);
        goal.stage_id = StageRef::NoRelative;
        for _ in 0..5 {
            let mut s = goal.clone();
            s.step_id = crate::ids::StepId::random();
            run(&mut a, s);
        }
        a.settings_mut().step_limits = StepLimits {
            per_stage: 1,
            repeats: 1,
            ..StepLimits::default()
        };
        assert_eq!(stop_reason(&a, &goal), None);
    }
}
