//! What a message chooses for the work it causes at its receiver (seed 004: the model and the
//! MCP servers a person picks for one message win over the agent's, which win over the
//! team's): a named model of the team and the servers to offer, each within what the agent
//! may be given. The steps the message becomes carry the choice, and the steps they plan
//! inherit it; the rest of the agent's work keeps its own model and tools.

use super::{AgentState, StepState};
use serde::{Deserialize, Serialize};

/// A message's choice; what it leaves out stays the agent's own.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Choice {
    /// The team's named model the steps call (one of the agent's `models`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm: Option<String>,
    /// The MCP servers the steps may use (of the agent's `tools`; empty: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_servers: Option<Vec<String>>,
}

/// Why a choice does not fit its receiver. Its text ([`ChoiceError::render`], in the team's
/// language) is what the REST API answers.
#[derive(Debug, PartialEq)]
pub enum ChoiceError {
    /// The model is not one the agent may be given.
    Model {
        /// The receiver.
        agent: String,
        /// The model asked for.
        model: String,
        /// The ones it may be given.
        allowed: Vec<String>,
    },
    /// A server is not one the agent may call.
    Server {
        /// The receiver.
        agent: String,
        /// The server asked for.
        server: String,
        /// The ones it may call.
        allowed: Vec<String>,
    },
}

impl ChoiceError {
    /// Why, in the language of `t`.
    pub fn render(&self, t: &crate::texts::Texts) -> String {
        let list = |names: &[String]| match names.is_empty() {
            true => t.choice_none(),
            false => names.join(", "),
        };
        match self {
            ChoiceError::Model {
                agent,
                model,
                allowed,
            } => t.choice_model(agent, model, list(allowed)),
            ChoiceError::Server {
                agent,
                server,
                allowed,
            } => t.choice_server(agent, server, list(allowed)),
        }
    }
}

/// In English, as logs show it.
impl std::fmt::Display for ChoiceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.render(&crate::texts::Texts::english()))
    }
}

impl std::error::Error for ChoiceError {}

impl Choice {
    /// Whether it chooses nothing.
    pub fn is_empty(&self) -> bool {
        self.llm.is_none() && self.mcp_servers.is_none()
    }

    /// Whether `agent` may be given this choice.
    pub fn check(&self, agent: &AgentState) -> Result<(), ChoiceError> {
        if let Some(model) = &self.llm
            && !agent.models.contains(model)
        {
            return Err(ChoiceError::Model {
                agent: agent.agent_id.to_string(),
                model: model.clone(),
                allowed: agent.models.clone(),
            });
        }
        for server in self.mcp_servers.iter().flatten() {
            if !agent.tools.contains(server) {
                return Err(ChoiceError::Server {
                    agent: agent.agent_id.to_string(),
                    server: server.clone(),
                    allowed: agent.tools.clone(),
                });
            }
        }
        Ok(())
    }
}

/// The MCP servers `step` may use: the agent's tools, narrowed to those its choice offers.
pub fn offered_tools<'a>(agent: &'a AgentState, step: &StepState) -> Vec<&'a String> {
    let offered = step.choice.as_ref().and_then(|c| c.mcp_servers.as_ref());
    agent
        .tools
        .iter()
        .filter(|t| offered.is_none_or(|o| o.contains(t)))
        .collect()
}

/// The named model `step` calls, when its choice names one.
pub fn chosen_model(step: &StepState) -> Option<&str> {
    step.choice.as_ref()?.llm.as_deref()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{StageRef, TaskId};
    use crate::state::{Executor, Skill};

    fn agent() -> AgentState {
        let mut a = AgentState::new("w".into(), "W".into(), "worker".into(), "p".into());
        a.tools = vec!["files".into(), "web".into()];
        a.models = vec!["strong".into()];
        a
    }

    fn step(choice: Option<Choice>) -> StepState {
        let mut s = StepState::new(
            TaskId::from("t"),
            StageRef::NoRelative,
            "w".into(),
            Executor::Skill(Skill::Planning),
            "plan",
            "",
        );
        s.choice = choice.map(Box::new);
        s
    }

    #[test]
    fn a_choice_must_be_within_what_the_agent_may_be_given() {
        let a = agent();
        let ok = Choice {
            llm: Some("strong".into()),
            mcp_servers: Some(vec!["web".into()]),
        };
        assert_eq!(ok.check(&a), Ok(()));
        let model = Choice {
            llm: Some("huge".into()),
            ..Choice::default()
        };
        let e = model.check(&a).unwrap_err().to_string();
        assert_eq!(
            e,
            "`w` cannot be given the model `huge` (its models: strong)"
        );
        let server = Choice {
            mcp_servers: Some(vec!["shell".into()]),
            ..Choice::default()
        };
        let e = server.check(&a).unwrap_err().to_string();
        assert_eq!(
            e,
            "`w` cannot call the MCP server `shell` (its tools: files, web)"
        );
    }

    #[test]
    fn a_step_is_offered_the_chosen_servers_only_and_calls_the_chosen_model() {
        let a = agent();
        assert_eq!(offered_tools(&a, &step(None)), ["files", "web"]);
        let narrowed = Choice {
            llm: Some("strong".into()),
            mcp_servers: Some(vec!["web".into()]),
        };
        let s = step(Some(narrowed));
        assert_eq!(offered_tools(&a, &s), ["web"]);
        assert_eq!(chosen_model(&s), Some("strong"));
        let none = Choice {
            mcp_servers: Some(Vec::new()),
            ..Choice::default()
        };
        assert!(offered_tools(&a, &step(Some(none))).is_empty());
    }
}
