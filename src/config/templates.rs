//! Agent templates: what a manager can instantiate with agent_manager `init_new_agent` (role,
//! profile, skills, tools, llm). They come from the team file's `agent_templates:`.

use super::LlmConfig;
use crate::state::Skill;
use std::path::PathBuf;

/// A validated agent template.
#[derive(Clone, Debug)]
pub struct AgentTemplate {
    /// The name managers use in `init_new_agent`.
    pub name: String,
    pub role: String,
    pub profile: String,
    pub skills: Vec<Skill>,
    /// MCP server names. A template may name a server this team lacks (templates can be shared
    /// between teams); instantiating it then fails with that reason.
    pub tools: Vec<String>,
    pub llm: LlmConfig,
    /// Where the template was written (the team file, or its own file).
    pub file: PathBuf,
}
