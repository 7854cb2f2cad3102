//! The team file exactly as written (serde, `deny_unknown_fields`), before any validation.

use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTeam {
    /// A name for the team, shown in logs.
    #[serde(default)]
    pub name: Option<String>,
    /// Prompt language: `en` or `zh`.
    #[serde(default)]
    pub language: Option<String>,
    /// A prompts folder (with `en/` and `zh/`) to use instead of the built-in prompts.
    #[serde(default)]
    pub prompts_dir: Option<String>,
    /// MCP server files or folders (relative to this file) the team may use.
    #[serde(default)]
    pub mcp_servers: Option<OneOrMany>,
    /// The LLM every agent uses unless it names its own.
    #[serde(default)]
    pub llm: Option<RawLlm>,
    pub agents: Vec<RawAgent>,
    /// People who take part: they log in to the console and talk to agents.
    #[serde(default)]
    pub humans: Vec<RawHuman>,
}

#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct RawHuman {
    pub id: String,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub role: Option<String>,
    #[serde(default)]
    pub profile: String,
    /// An Argon2id hash (`cohort hash-password` prints one); never the password itself.
    pub password_hash: String,
}

#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct RawAgent {
    pub id: String,
    #[serde(default)]
    pub name: Option<String>,
    pub role: String,
    #[serde(default)]
    pub profile: String,
    pub skills: Vec<String>,
    #[serde(default)]
    pub tools: Vec<String>,
    #[serde(default)]
    pub llm: Option<RawLlm>,
}

#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct RawLlm {
    /// `openai` or `scripted`.
    pub provider: String,
    // openai
    #[serde(default)]
    pub base_url: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Env vars that, when set at start-up, override `base_url` / `model`.
    #[serde(default)]
    pub base_url_env: Option<String>,
    #[serde(default)]
    pub model_env: Option<String>,
    #[serde(default)]
    pub temperature: Option<f32>,
    #[serde(default)]
    pub max_tokens: Option<u32>,
    #[serde(default)]
    pub timeout_secs: Option<u64>,
    #[serde(default)]
    pub max_retries: Option<u32>,
    // scripted
    #[serde(default)]
    pub script: Option<String>,
}

/// A single path or a list of them.
#[derive(Debug, Deserialize, Clone)]
#[serde(untagged)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    pub fn items(&self) -> Vec<String> {
        match self {
            OneOrMany::One(s) => vec![s.clone()],
            OneOrMany::Many(v) => v.clone(),
        }
    }
}
