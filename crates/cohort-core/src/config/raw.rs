//! The team file exactly as written (serde, `deny_unknown_fields`), before any validation.

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use std::fmt;

/// A team file as written: every key optional but `agents`, unknown keys refused.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[serde(expecting = "a team file: a mapping with `agents` and the team's settings")]
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
    /// Named models a message may choose for an agent that lists the name in its `models`.
    #[serde(default)]
    pub models: std::collections::BTreeMap<String, RawLlm>,
    /// `agents:`, the team's LLM agents: at least one, and one of them with the task_manager skill.
    pub agents: Vec<RawAgent>,
    /// People who take part: they log in to the console and talk to agents.
    #[serde(default)]
    pub humans: Vec<RawHuman>,
    /// What managers may create new agents from (agent_manager `init_new_agent`).
    #[serde(default)]
    pub agent_templates: Option<RawTemplates>,
    /// How many agents managers may create in one run of the team (default 32).
    #[serde(default)]
    pub max_hired_agents: Option<usize>,
    /// How much a long-running team keeps in memory (see `Retention`).
    #[serde(default)]
    pub retention: Option<RawRetention>,
    /// How long a person's login lasts, in hours (default 168: a week).
    #[serde(default)]
    pub session_ttl_hours: Option<u64>,
    /// Limits of the websocket feeds (see `Feeds`).
    #[serde(default)]
    pub feeds: Option<RawFeeds>,
    /// How far one agent may go on in one stage (see `state::StepLimits`).
    #[serde(default)]
    pub step_limits: Option<RawStepLimits>,
    /// When a tool call waits for a person's approval (see `policy::ApprovalPolicy`).
    #[serde(default)]
    pub tool_approval: Option<RawApproval>,
    /// How long a wait for a reply lasts (see `state::WaitPatience`).
    #[serde(default)]
    pub waits: Option<RawWaits>,
    /// How much work models may open (see `TaskLimits`).
    #[serde(default)]
    pub task_limits: Option<RawTaskLimits>,
    /// What the team's store keeps and how often it is compacted (see `Compaction`).
    #[serde(default)]
    pub store: Option<RawStore>,
    /// The HTTP server of `cohort serve`: timeouts, connection cap, trusted proxies (see
    /// `config::Http`).
    #[serde(default)]
    pub http: Option<RawHttp>,
    /// Which rules mend a model's slips, and their thresholds (see `policy::Repairs`).
    #[serde(default)]
    pub repairs: Option<super::repairs::RawRepairs>,
}

/// `http:`, how `cohort serve` treats connections.
#[derive(Debug, Deserialize, Clone, Default)]
#[serde(deny_unknown_fields)]
#[serde(
    expecting = "a mapping of HTTP settings (header_timeout_s, idle_timeout_s, max_connections, …)"
)]
pub struct RawHttp {
    #[serde(default)]
    pub header_timeout_s: Option<u64>,
    #[serde(default)]
    pub idle_timeout_s: Option<u64>,
    #[serde(default)]
    pub max_connections: Option<usize>,
    #[serde(default)]
    pub max_requests_per_connection: Option<usize>,
    /// Addresses and CIDRs (`10.0.0.0/8`) of reverse proxies whose forwarded-for headers are
    /// believed.
    #[serde(default)]
    pub trusted_proxies: Vec<String>,
    /// Where to serve `GET /metrics` without a token, for a scraper (`127.0.0.1:9464`).
    #[serde(default)]
    pub metrics_bind: Option<String>,
    #[serde(default)]
    pub running_tasks: Option<usize>,
    #[serde(default)]
    pub goals_per_person: Option<usize>,
    #[serde(default)]
    pub goal_window_s: Option<u64>,
}

/// `store:`, what the store keeps beyond what recovery needs, and how often it is compacted.
#[derive(Debug, Deserialize, Clone, Default)]
#[serde(deny_unknown_fields)]
#[serde(
    expecting = "a mapping of store settings (keep_events_hours, keep_events_mb, compact_every_s)"
)]
pub struct RawStore {
    #[serde(default)]
    pub keep_events_hours: Option<u64>,
    #[serde(default)]
    pub keep_events_mb: Option<u64>,
    #[serde(default)]
    pub compact_every_s: Option<u64>,
}

/// `task_limits:`, how much work models may open.
#[derive(Debug, Deserialize, Clone, Default)]
#[serde(deny_unknown_fields)]
#[serde(expecting = "a mapping of task limits (open_tasks, tasks_per_goal, …)")]
pub struct RawTaskLimits {
    #[serde(default)]
    pub open_tasks: Option<usize>,
    #[serde(default)]
    pub tasks_per_goal: Option<usize>,
    #[serde(default)]
    pub stages_per_task: Option<usize>,
    #[serde(default)]
    pub base_messages_per_goal: Option<usize>,
}

#[derive(Debug, Deserialize, Clone, Default)]
#[serde(deny_unknown_fields)]
#[serde(expecting = "a mapping of waits in seconds (human_secs, agent_secs, model_secs, …)")]
pub struct RawWaits {
    #[serde(default)]
    pub human_secs: Option<u64>,
    #[serde(default)]
    pub agent_secs: Option<u64>,
    #[serde(default)]
    pub model_secs: Option<u64>,
    #[serde(default)]
    pub stall_secs: Option<u64>,
}

#[derive(Debug, Deserialize, Clone, Default)]
#[serde(deny_unknown_fields)]
#[serde(expecting = "a mapping of step limits (per_stage, repeats, task_tokens, …)")]
pub struct RawStepLimits {
    #[serde(default)]
    pub per_stage: Option<usize>,
    #[serde(default)]
    pub repeats: Option<usize>,
    #[serde(default)]
    pub task_tokens: Option<u64>,
    #[serde(default)]
    pub task_steps: Option<u64>,
    #[serde(default)]
    pub asks: Option<usize>,
    #[serde(default)]
    pub reflections: Option<usize>,
    #[serde(default)]
    pub parallel_tool_calls: Option<usize>,
    #[serde(default)]
    pub replans: Option<usize>,
    #[serde(default)]
    pub parallel_steps: Option<usize>,
}

#[derive(Debug, Deserialize, Clone, Default)]
#[serde(deny_unknown_fields)]
#[serde(
    expecting = "a mapping of retention settings (finished_tasks, message_chars, memory_mib, …)"
)]
pub struct RawRetention {
    #[serde(default)]
    pub finished_tasks: Option<usize>,
    #[serde(default)]
    pub shared_pool_entries: Option<usize>,
    #[serde(default)]
    pub message_chars: Option<usize>,
    #[serde(default)]
    pub step_chars: Option<usize>,
    #[serde(default)]
    pub memory_mib: Option<usize>,
    /// MiB of recorded model calls the store keeps per agent (0: none are recorded).
    #[serde(default)]
    pub recorded_calls_mib: Option<usize>,
}

/// `feeds:`, the websocket monitor feeds `cohort serve` gives the console.
#[derive(Debug, Deserialize, Clone, Default)]
#[serde(deny_unknown_fields)]
#[serde(expecting = "a mapping of websocket feed settings (per_human, total, …)")]
pub struct RawFeeds {
    #[serde(default)]
    pub per_human: Option<usize>,
    #[serde(default)]
    pub total: Option<usize>,
    #[serde(default)]
    pub frame_interval_ms: Option<u64>,
    #[serde(default)]
    pub send_timeout_s: Option<u64>,
    #[serde(default)]
    pub ping_s: Option<u64>,
}

#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
#[serde(
    expecting = "a person: a mapping with `id` and `password_hash` (and name, role, profile, access)"
)]
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
    /// What this person may see and do through the API (default `member`).
    #[serde(default)]
    pub access: super::Access,
}

/// One entry of `agents:` as written.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
#[serde(
    expecting = "an agent: a mapping with `id`, `role` and `skills` (and name, profile, tools, llm, …)"
)]
pub struct RawAgent {
    /// Unique among agents and people (one id space); messages are addressed to it.
    pub id: String,
    /// Display name (default: the id).
    #[serde(default)]
    pub name: Option<String>,
    /// The agent's role, as teammates and its prompts see it.
    pub role: String,
    /// What it is and can do, in prose, for its prompts and for managers choosing agents (default
    /// empty).
    #[serde(default)]
    pub profile: String,
    /// Skill names (`think`, `task_manager`, …), each known and listed once.
    pub skills: Vec<String>,
    /// Names of MCP servers from the team's `mcp_servers`; calling them needs the
    /// instruction_generation skill.
    #[serde(default)]
    pub tools: Vec<String>,
    /// This agent's own LLM (else the team's `llm`).
    #[serde(default)]
    pub llm: Option<RawLlm>,
    /// The team's named models a message may choose for this agent (none: only its own).
    #[serde(default)]
    pub models: Vec<String>,
    /// This agent's own `tool_approval` (else the team's).
    #[serde(default)]
    pub tool_approval: Option<RawApproval>,
    /// This agent's own `parallel_steps` (else the team's `step_limits.parallel_steps`).
    #[serde(default)]
    pub parallel_steps: Option<usize>,
}

/// `tool_approval: {auto_run_up_to: low | medium | high | none, check_plans: bool}`.
#[derive(Debug, Deserialize, Clone, Copy)]
#[serde(deny_unknown_fields)]
#[serde(
    expecting = "a mapping (auto_run_up_to, check_plans, ask_for_params, judge_with_llm, check_stages)"
)]
pub struct RawApproval {
    /// None: the default (see [`RawApproval::policy`]).
    #[serde(default)]
    pub auto_run_up_to: Option<AutoRunLevel>,
    #[serde(default)]
    pub check_plans: bool,
    /// None: the default (see [`RawApproval::policy`]).
    #[serde(default)]
    pub ask_for_params: Option<bool>,
    #[serde(default)]
    pub judge_with_llm: bool,
    #[serde(default)]
    pub check_stages: bool,
}

#[derive(Debug, Deserialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
#[serde(expecting = "one of low, medium, high, none")]
pub enum AutoRunLevel {
    Low,
    Medium,
    High,
    None,
}

impl RawApproval {
    /// The policy `raw` (the agent's own, else the team's) sets. A level not set is seed 000's
    /// (§11.1: MEDIUM and HIGH calls are confirmed by a person, HIGH with a warning) when the
    /// team has an operator to confirm them (`asker`), else HIGH: calls run unasked, as nobody
    /// could answer. A call refused for its arguments is put to that operator (seed 000 §4.2)
    /// unless `ask_for_params` says otherwise (see [`crate::policy::ApprovalPolicy`]).
    pub fn policy(raw: Option<RawApproval>, asker: bool) -> crate::policy::ApprovalPolicy {
        use crate::policy::Risk;
        let level = raw.and_then(|r| r.auto_run_up_to);
        let auto_run_up_to = match level {
            Some(AutoRunLevel::Low) => Some(Risk::Low),
            Some(AutoRunLevel::Medium) => Some(Risk::Medium),
            Some(AutoRunLevel::High) => Some(Risk::High),
            Some(AutoRunLevel::None) => None,
            None if asker => Some(Risk::Low),
            None => Some(Risk::High),
        };
        let raw = raw.unwrap_or(RawApproval {
            auto_run_up_to: None,
            check_plans: false,
            ask_for_params: None,
            judge_with_llm: false,
            check_stages: false,
        });
        crate::policy::ApprovalPolicy {
            auto_run_up_to,
            check_plans: raw.check_plans,
            ask_for_params: raw.ask_for_params,
            judge_with_llm: raw.judge_with_llm,
            check_stages: raw.check_stages,
        }
    }
}

/// An `llm:` block as written, of the team, an agent or a template: the provider and its settings.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
#[serde(expecting = "a mapping with `provider` (openai or scripted) and its settings")]
pub struct RawLlm {
    /// `openai` or `scripted`.
    pub provider: String,
    // openai
    /// API root (default `https://api.openai.com/v1`).
    #[serde(default)]
    pub base_url: Option<String>,
    /// Model name; `openai` needs it unless `model_env` gives it.
    #[serde(default)]
    pub model: Option<String>,
    /// The env var holding the API key, read when the team starts; unset sends no key (local
    /// servers).
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Env vars that, when set at start-up, override `base_url` / `model`.
    #[serde(default)]
    pub base_url_env: Option<String>,
    /// Env var that, when set at start-up, overrides `model`.
    #[serde(default)]
    pub model_env: Option<String>,
    /// Sampling temperature, 0.0 to 2.0 (unset: the endpoint's default).
    #[serde(default)]
    pub temperature: Option<f32>,
    /// The most tokens an answer may have: at least 1, and below `context_window`.
    #[serde(default)]
    pub max_tokens: Option<u32>,
    /// How long one HTTP attempt may take, in seconds (default 120).
    #[serde(default)]
    pub timeout_secs: Option<u64>,
    /// Retries of an attempt that failed in a retryable way (default 3).
    #[serde(default)]
    pub max_retries: Option<u32>,
    /// `auto` (default), `json_schema` or `off`: whether answers are constrained by the
    /// skill's JSON schema.
    #[serde(default)]
    pub structured_output: Option<String>,
    /// The model's context window in tokens (prompts are shortened to fit it).
    #[serde(default)]
    pub context_window: Option<u32>,
    /// Stream answers (`stream: true`): the step's text grows live, and an endpoint that stops
    /// sending for `idle_timeout_secs` (default 60) is given up on at once.
    #[serde(default)]
    pub stream: Option<bool>,
    /// Seconds a streamed answer may send nothing before the attempt is given up on (default 60;
    /// only with `stream: true`).
    #[serde(default)]
    pub idle_timeout_secs: Option<u64>,
    /// `chain` (default) or `native`: how tool steps call MCP tools.
    #[serde(default)]
    pub tool_calling: Option<String>,
    /// Whether the model takes images: the images tools returned are sent to it beside the
    /// prompt (default false: the prompt describes them).
    #[serde(default)]
    pub multimodal: Option<bool>,
    /// USD per 1,000 prompt / completion tokens (both or neither), for the run's cost.
    #[serde(default)]
    pub cost_per_1k_prompt: Option<f64>,
    /// USD per 1,000 completion tokens; given together with `cost_per_1k_prompt`.
    #[serde(default)]
    pub cost_per_1k_completion: Option<f64>,
    /// USD per 1,000 prompt tokens the endpoint served from its prompt cache (default: the
    /// prompt price).
    #[serde(default)]
    pub cost_per_1k_cached_prompt: Option<f64>,
    /// Send each agent's id as OpenAI's `prompt_cache_key` (default true), so its calls meet
    /// the same cache; dropped for good if the endpoint refuses the field.
    #[serde(default)]
    pub prompt_cache_key: Option<bool>,
    /// A llama.cpp-style server's slot count: each agent keeps a slot of its own (`id_slot`,
    /// `cache_prompt: true`) so agents stop evicting each other's prompt prefix. Unset sends
    /// neither field.
    #[serde(default)]
    pub cache_slots: Option<u32>,
    /// At most this many calls in flight to this endpoint (default 64).
    #[serde(default)]
    pub max_in_flight: Option<usize>,
    // scripted
    /// `scripted` only: the script file, relative to the file that names it.
    #[serde(default)]
    pub script: Option<String>,
}

/// One agent template as written, inline in the team file or alone in its own file.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
#[serde(
    expecting = "an agent template: a mapping with `role` and `skills` (and name, profile, tools, llm)"
)]
pub struct RawTemplate {
    /// Required inline; in its own file it defaults to the file stem.
    #[serde(default)]
    pub name: Option<String>,
    /// The role every agent made from it gets.
    pub role: String,
    /// The profile every agent made from it gets (default empty).
    #[serde(default)]
    pub profile: String,
    /// Skill names, checked as an agent's are.
    pub skills: Vec<String>,
    /// MCP server names; not checked against this team's `mcp_servers`, since templates may be
    /// shared between teams.
    #[serde(default)]
    pub tools: Vec<String>,
    /// Defaults to the team's top-level `llm`.
    #[serde(default)]
    pub llm: Option<RawLlm>,
}

/// `agent_templates:` — one path, or a list of paths and inline templates.
#[derive(Debug, Clone)]
pub enum RawTemplates {
    /// A single path: a template file, or a folder of them.
    One(String),
    /// A list of paths and inline templates.
    Many(Vec<RawTemplateItem>),
}

/// One entry of an `agent_templates:` list.
#[derive(Debug, Clone)]
#[allow(
    clippy::large_enum_variant,
    reason = "a few per team file, read once: boxing saves nothing"
)]
pub enum RawTemplateItem {
    /// A template file, or a folder whose `*.yaml`/`*.yml` files each hold one template.
    Path(String),
    /// A template written in place; it must have a `name`.
    Inline(RawTemplate),
}

// These two are hand-written rather than `#[serde(untagged)]`: untagged buffers the value and
// then reports only "data did not match any variant", losing which field was wrong. Choosing the
// variant by the YAML node's kind keeps serde_yaml's path (`agent_templates[1].colour`).
impl<'de> Deserialize<'de> for RawTemplates {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawTemplates;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a path, or a list of paths and inline templates")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawTemplates, E> {
                Ok(RawTemplates::One(v.to_owned()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<RawTemplates, A::Error> {
                Vec::deserialize(de::value::SeqAccessDeserializer::new(seq)).map(RawTemplates::Many)
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for RawTemplateItem {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawTemplateItem;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a template file or folder path, or an inline template")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawTemplateItem, E> {
                Ok(RawTemplateItem::Path(v.to_owned()))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RawTemplateItem, A::Error> {
                RawTemplate::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(RawTemplateItem::Inline)
            }
        }
        d.deserialize_any(V)
    }
}

/// A single path or a list of them.
#[derive(Debug, Deserialize, Clone)]
#[serde(untagged)]
#[serde(expecting = "must be a path, or a list of paths")]
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
