//! Team configuration: the raw YAML shape (`raw.rs`, unknown fields rejected) and its
//! validation into a `TeamConfig` (`team.rs`) whose errors name the file and the field.

mod agent;
mod raw;
mod team;
mod templates;

pub use raw::{RawAgent, RawLlm, RawTeam, RawTemplate, RawTemplateItem, RawTemplates};
pub use team::{AgentConfig, ConfigError, HumanEntry, LlmConfig, Problem, TeamConfig, load_team};
pub use templates::AgentTemplate;
