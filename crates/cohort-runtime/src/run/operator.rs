//! A scripted operator for runs no person watches (`cohort eval`'s `answers:`): each question
//! an agent asks a person and waits on gets the next scripted answer, sent as that person's
//! reply through their agent (as the console's send does), so a goal whose work needs a
//! person's word can finish unattended. Verdicts (approvals, plan checks, filled-in
//! arguments) are not answered: they stay what the run reports it waits for.

use super::waits::{Asked, PersonWait, person_waits};
use crate::actors::{HumanSend, Team};
use cohort_core::ids::StageRef;
use cohort_core::step::HumanMessage;
use std::collections::{HashSet, VecDeque};

/// The answers left, and the questions answered (agent, task, question), so one is answered
/// once however often the run looks.
pub struct ScriptedOperator {
    left: VecDeque<String>,
    answered: HashSet<(String, String, String)>,
}

impl ScriptedOperator {
    pub fn new(answers: &[String]) -> ScriptedOperator {
        ScriptedOperator {
            left: answers.iter().cloned().collect(),
            answered: HashSet::new(),
        }
    }

    /// Answers each question the team waits on that was not answered yet, while answers are
    /// left; a send that fails is logged (the run then stalls on it, as it would unanswered).
    pub async fn answer(&mut self, team: &Team) {
        if self.left.is_empty() {
            return;
        }
        let waits = team.monitor.read(person_waits);
        for w in waits {
            let PersonWait {
                agent,
                person: Some(person),
                task,
                asked: Asked::Reply(question),
            } = w
            else {
                continue;
            };
            let key = (
                agent.as_str().to_owned(),
                task.as_str().to_owned(),
                question.unwrap_or_default(),
            );
            if self.answered.contains(&key) {
                continue;
            }
            let Some(content) = self.left.pop_front() else {
                return;
            };
            self.answered.insert(key);
            let Some(addr) = team.agents.get(&person) else {
                tracing::warn!(person = %person, "the scripted operator answers as no agent of the team");
                continue;
            };
            let reply = HumanMessage {
                choice: None,
                attachments: Vec::new(),
                task_id: task,
                receiver: vec![agent],
                content,
                stage_relative: StageRef::NoRelative,
                need_reply: false,
                waiting: false,
                wait_secs: None,
                traceparent: None,
            };
            match addr.send(HumanSend(reply)).await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => tracing::warn!("the scripted operator's answer was refused: {e}"),
                Err(e) => tracing::warn!("the scripted operator's answer was not sent: {e}"),
            }
        }
    }
}
