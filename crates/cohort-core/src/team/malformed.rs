//! Why SyncState refuses a message or an instruction that is malformed in itself (no receiver,
//! a text too long, a template the team lacks, …), as opposed to one that names what does not
//! exist or breaks a limit (the other [`SyncError`](super::SyncError) variants). Each kind
//! carries its facts and is worded through the team's catalog: the refused step's model reads
//! it in its re-ask, and is to write its answer again in its own language.

use crate::ids::{AgentId, StageId, TaskId};
use crate::state::ExecutionState;
use crate::texts::Texts;
use serde::{Deserialize, Serialize};

/// What is wrong with a message or an instruction SyncState cannot carry out as given.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Malformed {
    /// A message from outside the team's steps speaks as the runtime (its sender).
    ReservedSender(AgentId),
    /// A message for a stage that is over, and the state it ended in.
    StageOver {
        /// The stage.
        stage: StageId,
        /// The state it is in.
        state: ExecutionState,
    },
    /// A message that names no receiver.
    NoReceiver,
    /// A message over the team's length (`retention.message_chars`).
    TooLong {
        /// Its characters.
        chars: usize,
        /// The team's limit.
        limit: usize,
    },
    /// A waiting message whose wait ids are not one per receiver.
    WaitIds,
    /// init_new_agent names a template the team does not have; the templates it has.
    NoTemplate {
        /// The template named.
        template: String,
        /// The team's templates (none, possibly).
        known: Vec<String>,
    },
    /// The managers created as many agents as the team allows (`max_hired_agents`).
    HiredLimit {
        /// The agents created by managers so far.
        hired: usize,
    },
    /// init_new_agent names an id an agent has already.
    AgentIdTaken(AgentId),
    /// The template asks for an MCP server the team does not have.
    TemplateLacksServer {
        /// The template.
        template: String,
        /// Its file, as the team configuration names it.
        file: String,
        /// The server it names.
        server: String,
    },
    /// add_task with an id a task has already.
    TaskExists(TaskId),
    /// A stage that allocates no agent (its intention).
    NoAgentAllocated(String),
    /// The node that runs the team did not take a hand-over (never shown to a model: the
    /// agent stops), with the transport's words.
    HandOver(String),
}

impl Malformed {
    /// Why, in the language of `t`.
    pub fn render(&self, t: &Texts) -> String {
        use Malformed as M;
        match self {
            M::ReservedSender(sender) => t.refused_reserved_sender(sender),
            M::StageOver { stage, state } => t.refused_stage_over(stage, state),
            M::NoReceiver => t.refused_no_receiver(),
            M::TooLong { chars, limit } => t.refused_too_long(chars, limit),
            M::WaitIds => t.refused_wait_ids(),
            M::NoTemplate { template, known } => {
                let known = if known.is_empty() {
                    t.refused_no_templates()
                } else {
                    t.refused_templates(known.join(", "))
                };
                t.refused_no_template(template, known)
            }
            M::HiredLimit { hired } => t.refused_hired_limit(hired),
            M::AgentIdTaken(agent) => t.refused_agent_id_taken(agent),
            M::TemplateLacksServer {
                template,
                file,
                server,
            } => t.refused_template_lacks(template, file, server),
            M::TaskExists(task) => t.refused_task_exists(task),
            M::NoAgentAllocated(intention) => t.refused_no_agent_allocated(intention),
            M::HandOver(detail) => t.refused_hand_over(detail),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::texts::{Language, english_words};

    fn every() -> Vec<Malformed> {
        vec![
            Malformed::ReservedSender("[TaskState]".into()),
            Malformed::StageOver {
                stage: "s1".into(),
                state: ExecutionState::Finished,
            },
            Malformed::NoReceiver,
            Malformed::TooLong { chars: 9, limit: 8 },
            Malformed::WaitIds,
            Malformed::NoTemplate {
                template: "poet".into(),
                known: vec![],
            },
            Malformed::NoTemplate {
                template: "poet".into(),
                known: vec!["writer".into(), "reviewer".into()],
            },
            Malformed::HiredLimit { hired: 3 },
            Malformed::AgentIdTaken("writer".into()),
            Malformed::TemplateLacksServer {
                template: "poet".into(),
                file: "agents/poet.yaml".into(),
                server: "web".into(),
            },
            Malformed::TaskExists("t1".into()),
            Malformed::NoAgentAllocated("写一首俳句".into()),
            Malformed::HandOver("连接已关闭".into()),
        ]
    }

    #[test]
    fn english_reads_as_it_always_did() {
        let en = Texts::english();
        let said: Vec<String> = every().iter().map(|m| m.render(&en)).collect();
        assert_eq!(said[0], "`[TaskState]` is reserved for the runtime");
        assert_eq!(said[1], "stage `s1` is already finished");
        assert_eq!(said[2], "the message has no receiver");
        assert_eq!(
            said[3],
            "the message has 9 characters, more than the team's limit of 8 \
             (retention.message_chars)"
        );
        assert_eq!(said[4], "a waiting message needs one wait id per receiver");
        assert_eq!(
            said[5],
            "there is no agent template `poet` (the team has no templates)"
        );
        assert_eq!(
            said[6],
            "there is no agent template `poet` (templates: writer, reviewer)"
        );
        assert_eq!(
            said[7],
            "the team already has 3 agents created by managers, its limit \
             (max_hired_agents in the team file)"
        );
        assert_eq!(said[8], "agent id `writer` is taken; choose another");
        assert_eq!(said[10], "task `t1` exists already");
    }

    #[test]
    fn chinese_holds_no_english_word() {
        let zh = Texts::builtin(Language::Zh);
        for m in every() {
            let said = m.render(&zh);
            let words = english_words(&said, &["writer", "reviewer", "poet"]);
            assert!(words.is_empty(), "{m:?}: {said} ({words:?})");
        }
    }
}
