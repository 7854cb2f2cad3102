//! The call chain a tool_decision step sees (seed §5.9): going back from the newest tool step
//! of the stage, pairs of [tool] → [tool_decision] that belong to one long-tail use of that
//! tool. instruction_generation and send_message steps in between are allowed gaps; any other
//! step ends the chain, so an earlier, separate use of the tool is not mixed in.

use crate::state::{Agent, Executor, Skill, StepState};

fn is_gap(s: &StepState) -> bool {
    matches!(
        s.executor,
        Executor::Skill(Skill::InstructionGeneration | Skill::SendMessage)
    )
}

fn is_decision(s: &StepState) -> bool {
    s.executor == Executor::Skill(Skill::ToolDecision)
}

/// The chain for the tool_decision step `current`, oldest first, without `current` itself.
pub fn tool_chain(agent: &Agent, current: &StepState) -> Vec<StepState> {
    let before: Vec<&StepState> = agent
        .agent_step
        .steps()
        .iter()
        .take_while(|s| s.step_id != current.step_id)
        .filter(|s| {
            s.task_id == current.task_id
                && s.stage_id == current.stage_id
                && s.execution_state.is_over()
        })
        .collect();
    // The newest tool step is where the chain ends.
    let Some(end) = before
        .iter()
        .rposition(|s| matches!(s.executor, Executor::Tool(_)))
    else {
        return Vec::new();
    };
    let tool = before[end].executor.clone();
    let mut chain = vec![before[end]];
    let mut i = end;
    loop {
        // Back from this tool step, over gaps, to a tool_decision…
        let mut j = i;
        while j > 0 && is_gap(before[j - 1]) {
            j -= 1;
        }
        if j == 0 || !is_decision(before[j - 1]) {
            break;
        }
        let decision = j - 1;
        // …and from it, over gaps, to the same tool's previous call.
        let mut k = decision;
        while k > 0 && is_gap(before[k - 1]) {
            k -= 1;
        }
        if k == 0 || before[k - 1].executor != tool {
            break;
        }
        chain.push(before[decision]);
        chain.push(before[k - 1]);
        i = k - 1;
    }
    chain.reverse();
    chain.into_iter().cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{StageId, StageRef};
    use crate::state::AgentState;
    use crate::state::StepExecutionState;

    fn agent(seq: &[&str]) -> (Agent, StepState) {
        let mut a = Agent::from(AgentState::new(
            "w".into(),
            "W".into(),
            "r".into(),
            "p".into(),
        ));
        let stage = StageRef::Stage(StageId::from("s"));
        let mut steps: Vec<StepState> = seq
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let ex = match *e {
                    "ws" | "notes" => Executor::Tool((*e).into()),
                    other => Executor::Skill(other.parse().unwrap()),
                };
                let mut s = StepState::new(
                    "t".into(),
                    stage.clone(),
                    "w".into(),
                    ex,
                    format!("{i}:{e}"),
                    "",
                );
                s.execution_state = StepExecutionState::Finished;
                s
            })
            .collect();
        let current = StepState::new(
            "t".into(),
            stage,
            "w".into(),
            Executor::Skill(Skill::ToolDecision),
            "now",
            "",
        );
        steps.push(current.clone());
        a.add_steps(steps);
        (a, current)
    }

    fn names(chain: &[StepState]) -> Vec<String> {
        chain.iter().map(|s| s.step_intention.clone()).collect()
    }

    #[test]
    fn a_long_tail_chain_is_recovered_in_order() {
        let (a, cur) = agent(&[
            "planning",
            "instruction_generation",
            "ws",
            "tool_decision",
            "instruction_generation",
            "ws",
            "tool_decision",
            "instruction_generation",
            "ws",
        ]);
        assert_eq!(
            names(&tool_chain(&a, &cur)),
            ["2:ws", "3:tool_decision", "5:ws", "6:tool_decision", "8:ws"]
        );
    }

    #[test]
    fn an_earlier_separate_use_of_the_tool_is_not_mixed_in() {
        let (a, cur) = agent(&[
            "instruction_generation",
            "ws",
            "tool_decision",
            "think",
            "instruction_generation",
            "ws",
        ]);
        assert_eq!(names(&tool_chain(&a, &cur)), ["5:ws"]);
    }

    #[test]
    fn another_tool_breaks_the_chain_and_no_tool_gives_none() {
        let (a, cur) = agent(&[
            "instruction_generation",
            "notes",
            "tool_decision",
            "instruction_generation",
            "ws",
        ]);
        assert_eq!(names(&tool_chain(&a, &cur)), ["4:ws"]);
        let (a, cur) = agent(&["think"]);
        assert!(tool_chain(&a, &cur).is_empty());
    }

    #[test]
    fn interleaved_stages_keep_separate_chains_of_the_same_tool() {
        // Stage A and stage B of two tasks both use `ws`, their steps interleaved in one queue
        // (seed §10.3): each tool_decision sees only its own stage's calls.
        let (mut a, _) = agent(&[]);
        a.agent_step = Default::default();
        let mut step = |task: &str, stage: &str, e: &str, done: bool| {
            let ex = match e {
                "ws" => Executor::Tool("ws".into()),
                other => Executor::Skill(other.parse().unwrap()),
            };
            let mut s = StepState::new(
                task.into(),
                StageRef::Stage(StageId::from(stage)),
                "w".into(),
                ex,
                format!("{stage}:{e}"),
                "",
            );
            if done {
                s.execution_state = StepExecutionState::Finished;
            }
            a.add_steps(vec![s.clone()]);
            s
        };
        step("t1", "A", "ws", true);
        step("t2", "B", "ws", true);
        step("t1", "A", "tool_decision", true);
        step("t2", "B", "tool_decision", true);
        step("t1", "A", "instruction_generation", true);
        step("t2", "B", "instruction_generation", true);
        step("t1", "A", "ws", true);
        step("t2", "B", "ws", true);
        let cur_a = step("t1", "A", "tool_decision", false);
        let cur_b = step("t2", "B", "tool_decision", false);
        assert_eq!(
            names(&tool_chain(&a, &cur_a)),
            ["A:ws", "A:tool_decision", "A:ws"]
        );
        assert_eq!(
            names(&tool_chain(&a, &cur_b)),
            ["B:ws", "B:tool_decision", "B:ws"]
        );
    }
}
