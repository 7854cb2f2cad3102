//! What a stalled run waits for people to do, read from the final states' typed facts: the
//! waits agents hold on a person's reply (the wait names whom it waits for; the question is
//! the message that carried its wait id), and steps held for a person's verdict (a plan check,
//! a tool call's approval, its arguments). `cohort run` cannot answer them; it says so.

use cohort_core::event::States;
use cohort_core::ids::{AgentId, TaskId};
use cohort_core::state::{Executor, StepExecutionState};
use cohort_core::texts::Texts;

/// The most characters of a question a one-line report shows.
pub const ASKED_CHARS: usize = 120;

/// One thing the team waits for a person to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PersonWait {
    /// The agent that waits.
    pub agent: AgentId,
    /// The person it waits for; `None` for a verdict any operator may give.
    pub person: Option<AgentId>,
    /// The task it waits in.
    pub task: TaskId,
    pub asked: Asked,
}

/// What the person is asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Asked {
    /// A reply to this question (its text; `None` when the task no longer keeps the message).
    Reply(Option<String>),
    /// A check of the plan this step made.
    PlanCheck { step: String },
    /// An approval of this step's tool call.
    Approval { step: String },
    /// The arguments of this step's tool call.
    Params { step: String },
    /// An answer to what a server asks during this step's tool call.
    ServerQuestion {
        step: String,
        server: String,
        message: String,
    },
}

/// Everything the team waits for people to do, agent by agent.
pub fn person_waits(s: &States) -> Vec<PersonWait> {
    let mut out = Vec::new();
    for agent in s.agents.values().filter(|a| a.human_config.is_none()) {
        for w in agent.step_lock.waits() {
            let Some(person) = w.from.as_ref().filter(|p| is_person(s, p)) else {
                continue;
            };
            out.push(PersonWait {
                agent: agent.agent_id.clone(),
                person: Some(person.clone()),
                task: w.task.clone(),
                asked: Asked::Reply(question(s, &w.task, &w.id)),
            });
        }
        for step in agent.agent_step.steps() {
            let step_name = || {
                step.step_intention
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .to_owned()
            };
            let question = cohort_core::step::elicitation::ElicitationRequest::of(step);
            let asked = match (step.execution_state, question) {
                (StepExecutionState::WaitingForParam, Some(q)) => Asked::ServerQuestion {
                    step: step_name(),
                    server: q.server,
                    message: shortened(&q.message),
                },
                (StepExecutionState::WaitingForParam, None) => Asked::Params { step: step_name() },
                (StepExecutionState::WaitingForApproval, _) => match step.executor {
                    Executor::Tool(_) => Asked::Approval { step: step_name() },
                    Executor::Skill(_) => Asked::PlanCheck { step: step_name() },
                },
                _ => continue,
            };
            out.push(PersonWait {
                agent: agent.agent_id.clone(),
                person: None,
                task: step.task_id.clone(),
                asked,
            });
        }
    }
    out
}

fn is_person(s: &States, id: &AgentId) -> bool {
    s.agents.get(id).is_some_and(|a| a.human_config.is_some())
}

/// The text of the message in `task` that took wait `id`, shortened to one line.
fn question(s: &States, task: &TaskId, id: &cohort_core::ids::WaitId) -> Option<String> {
    let pool = &s.tasks.get(task)?.shared_conversation_pool;
    let m = pool
        .iter()
        .rev()
        .map(|e| &e.message)
        .find(|m| m.waiting.as_ref().is_some_and(|w| w.contains(id)))?;
    Some(shortened(&m.message))
}

/// The first line of `text`, at most [`ASKED_CHARS`] characters (cut with `…`).
pub fn shortened(text: &str) -> String {
    let line = text.trim().lines().next().unwrap_or_default().trim();
    match line.char_indices().nth(ASKED_CHARS) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None if text.trim().lines().nth(1).is_some() => format!("{line} …"),
        None => line.to_owned(),
    }
}

impl PersonWait {
    /// One line for a person, in the team's language: who waits, for whom, for what.
    pub fn render(&self, t: &Texts) -> String {
        let who = self
            .person
            .as_ref()
            .map_or_else(|| t.run_an_operator(), |p| format!("`{p}`"));
        let agent = &self.agent;
        match &self.asked {
            Asked::Reply(Some(q)) => t.wait_reply(agent, who, q),
            Asked::Reply(None) => t.wait_reply_unknown(agent, who),
            Asked::PlanCheck { step } => t.wait_plan_check(agent, who, step),
            Asked::Approval { step } => t.wait_approval(agent, who, step),
            Asked::Params { step } => t.wait_params(agent, who, step),
            Asked::ServerQuestion {
                step,
                server,
                message,
            } => t.wait_server_question(agent, who, server, step, message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_question_is_shown_on_one_line_and_cut_when_long() {
        assert_eq!(shortened("  Which season?  "), "Which season?");
        assert_eq!(
            shortened("Which season?\nSpring or autumn"),
            "Which season? …"
        );
        let long = "x".repeat(ASKED_CHARS + 10);
        let cut = shortened(&long);
        assert_eq!(cut.chars().count(), ASKED_CHARS + 1);
        assert!(cut.ends_with('…'));
    }

    #[test]
    fn a_wait_says_who_waits_for_whom_and_what() {
        let w = PersonWait {
            agent: "manager".into(),
            person: Some("operator".into()),
            task: "t".into(),
            asked: Asked::Reply(Some("Which season?".into())),
        };
        assert_eq!(
            w.render(&Texts::english()),
            "`manager` waits for `operator` to answer: \"Which season?\""
        );
        let plan = PersonWait {
            person: None,
            asked: Asked::PlanCheck {
                step: "Plan the steps".into(),
            },
            ..w
        };
        assert_eq!(
            plan.render(&Texts::english()),
            "`manager` waits for an operator to check the plan of its step \"Plan the steps\""
        );
    }
}
