//! What an agent is made of — skills, tools and an LLM — checked the same way whether it is a
//! configured agent or an agent template, so both get the same rules and the same messages.

use super::mcp_servers::McpServerConfig;
use super::raw::RawLlm;
use crate::problem::Problem;
use crate::state::Skill;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

/// Which LLM an agent calls.
#[expect(
    clippy::large_enum_variant,
    reason = "one per agent or template, read once at start: boxing buys nothing"
)]
#[derive(Clone, Debug, PartialEq)]
pub enum LlmConfig {
    /// `provider: openai`: an OpenAI-compatible chat-completions endpoint (OpenAI, or a local
    /// server such as Ollama).
    OpenAi {
        /// `base_url:`, the API root that `/chat/completions` is appended to (default
        /// `https://api.openai.com/v1`).
        base_url: String,
        /// `model:`, the model named in every request; empty when only `model_env` gives it, which
        /// must then be set when the team starts.
        model: String,
        /// The env var holding the API key; read only when the team starts.
        api_key_env: Option<String>,
        /// Env vars overriding base_url and model when set (read when the team starts).
        base_url_env: Option<String>,
        /// `model_env:`, an env var whose value, when set at start, replaces `model`.
        model_env: Option<String>,
        /// `temperature:`, from 0.0 to 2.0; unset leaves it to the endpoint.
        temperature: Option<f32>,
        /// `max_tokens:`, the most tokens an answer may have (below `context_window`); unset leaves
        /// it to the endpoint.
        max_tokens: Option<u32>,
        /// `timeout_secs:`, how long one HTTP attempt may take (default 120 s); with `stream`, how
        /// long the answer's first piece may take.
        timeout: Duration,
        /// `max_retries:`, retries of an attempt that failed in a retryable way (default 3).
        max_retries: u32,
        /// `structured_output:`, whether answers follow the skill's JSON schema (default `auto`).
        structured_output: StructuredOutput,
        /// `context_window:`, the model's window in tokens (at least 2,048); prompts are shortened
        /// to fit it.
        context_window: Option<u32>,
        /// `tool_calling: native`: tool steps run the native tool loop.
        native_tools: bool,
        /// `multimodal: true`: the model takes images, and is sent those the prompt's results
        /// refer to.
        multimodal: bool,
        /// `stream: true`: answers are streamed, and a stream idle this long is given up on.
        stream: Option<Duration>,
        /// What its tokens cost, when the config says (`cost_per_1k_prompt`/`_completion`).
        price: Option<Price>,
        /// How calls ask the endpoint to reuse their prompt prefix.
        cache: PromptCache,
        /// At most this many calls in flight to this endpoint (base URL and model), shared by
        /// every agent that uses it.
        max_in_flight: usize,
    },
    /// `provider: scripted`: replies read from a script file instead of a model, for offline runs
    /// and tests.
    Scripted {
        /// `script:`, the script file, resolved against the folder of the file that names it.
        script: PathBuf,
        /// At most this many calls in flight to this script, shared by every agent using it.
        max_in_flight: usize,
    },
}

/// Whether a step's answer is constrained by its skill's JSON schema (`response_format:
/// json_schema`) or asked for in the tag format the prompt describes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StructuredOutput {
    /// Constrained until the endpoint refuses `response_format` (a 400 or 422 that the same
    /// request without it does not get); then tags, for the rest of the process.
    #[default]
    Auto,
    /// Always constrained.
    JsonSchema,
    /// Never constrained: the tag format only.
    Off,
}

impl FromStr for StructuredOutput {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "auto" => Ok(Self::Auto),
            "json_schema" => Ok(Self::JsonSchema),
            "off" => Ok(Self::Off),
            other => Err(format!("`{other}` is not auto, json_schema or off")),
        }
    }
}

/// How an `openai` model's calls ask the endpoint to reuse their prompt prefix.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PromptCache {
    /// `prompt_cache_key:` send the agent's id as OpenAI's `prompt_cache_key` (default true).
    pub key: bool,
    /// `cache_slots:` a llama.cpp-style server's slot count: each agent keeps its own slot
    /// (`id_slot`, `cache_prompt: true`).
    pub slots: Option<u32>,
}

/// USD per 1,000 tokens of a model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Price {
    /// `cost_per_1k_prompt`: USD per 1,000 prompt tokens.
    pub prompt_per_1k: f64,
    /// `cost_per_1k_completion`: USD per 1,000 completion tokens.
    pub completion_per_1k: f64,
    /// `cost_per_1k_cached_prompt`: USD per 1,000 prompt tokens served from the endpoint's
    /// cache (the prompt price when not given).
    pub cached_prompt_per_1k: f64,
}

impl Price {
    /// What a call with this token usage cost, in USD (recorded as the call's `cost_usd`):
    /// cached prompt tokens at the cached rate, the rest at the prompt rate.
    pub fn cost(&self, usage: crate::state::TokenUsage) -> f64 {
        (usage.uncached_prompt_tokens() as f64 * self.prompt_per_1k
            + usage.cached_prompt_tokens as f64 * self.cached_prompt_per_1k
            + usage.completion_tokens as f64 * self.completion_per_1k)
            / 1000.0
    }
}

/// How long a streamed answer may send nothing before the attempt is given up (and retried).
pub const DEFAULT_IDLE_TIMEOUT_SECS: u64 = 60;

/// Calls in flight to one endpoint unless `max_in_flight` says otherwise: enough for a busy
/// team, few enough that a thousand agents do not open a thousand requests at once.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 64;

impl LlmConfig {
    /// The endpoint and model the team in fact talks to: `base_url` and `model` replaced by
    /// what their `*_env` variables hold, where set (read once, when the team starts, so the
    /// agents' states show the model that answers, not the file's default).
    pub fn with_env(&self, env: &dyn Fn(&str) -> Option<String>) -> LlmConfig {
        let mut llm = self.clone();
        if let LlmConfig::OpenAi {
            base_url,
            model,
            base_url_env,
            model_env,
            ..
        } = &mut llm
        {
            if let Some(url) = base_url_env.as_deref().and_then(env) {
                *base_url = url;
            }
            if let Some(name) = model_env.as_deref().and_then(env) {
                *model = name;
            }
        }
        llm
    }

    /// What the model's tokens cost, when its config says.
    pub fn price(&self) -> Option<Price> {
        match self {
            LlmConfig::OpenAi { price, .. } => *price,
            LlmConfig::Scripted { .. } => None,
        }
    }

    /// The most calls in flight at once to this endpoint or script (`max_in_flight`, default 64).
    pub fn max_in_flight(&self) -> usize {
        match self {
            LlmConfig::OpenAi { max_in_flight, .. } | LlmConfig::Scripted { max_in_flight, .. } => {
                *max_in_flight
            }
        }
    }
}

/// What validation collects as it goes: every problem, and the scripts to check once at the end
/// (with the field that named each, for a script that cannot be read).
#[derive(Default)]
pub(super) struct Findings {
    pub problems: Vec<Problem>,
    pub scripts: Vec<(String, PathBuf)>,
}

impl Findings {
    pub fn add(&mut self, file: &Path, field: impl Into<String>, message: impl Into<String>) {
        self.problems.push(Problem {
            file: file.to_path_buf(),
            field: field.into(),
            message: message.into(),
        });
    }
}

/// Where an agent or template was written: its file, the prefix its fields carry there
/// (`agents[2].`, `agent_templates[0].`, or nothing in a template's own file), and the folder
/// its relative paths (a script) start from.
pub(super) struct Site<'a> {
    pub file: &'a Path,
    pub prefix: String,
    pub base: &'a Path,
}

impl Site<'_> {
    pub fn field(&self, sub: &str) -> String {
        format!("{}{sub}", self.prefix)
    }
}

/// The team's top-level `llm`, checked once (in the team file) and then lent to every agent
/// and template that sets none of its own.
#[allow(
    clippy::large_enum_variant,
    reason = "one per team file, checked once: boxing saves nothing"
)]
pub(super) enum TeamLlm {
    Unset,
    /// Set but wrong; already reported, so borrowers stay quiet about it.
    Invalid,
    Valid(LlmConfig),
}

impl TeamLlm {
    pub fn check(raw: Option<&RawLlm>, team_file: &Path, base: &Path, out: &mut Findings) -> Self {
        let Some(l) = raw else {
            return TeamLlm::Unset;
        };
        match checked_llm(l, (team_file, "llm", base), out) {
            Some(c) => TeamLlm::Valid(c),
            None => TeamLlm::Invalid,
        }
    }
}

/// The `llm` block `l` at `field` of `file`, checked: its problems reported at
/// `field.SUB`, a script it names kept for the check that it can be read.
pub(super) fn checked_llm(
    l: &RawLlm,
    (file, field, base): (&Path, &str, &Path),
    out: &mut Findings,
) -> Option<LlmConfig> {
    match llm_config(l, base) {
        Ok(c) => {
            if let LlmConfig::Scripted { script, .. } = &c {
                out.scripts.push((field.to_owned(), script.clone()));
            }
            Some(c)
        }
        Err((sub, msg)) => {
            out.add(file, format!("{field}.{sub}"), msg);
            None
        }
    }
}

/// The checked skills and LLM of an agent or template. `llm` is `None` when it could not be
/// had; the reason is already in the findings.
pub(super) struct Body {
    pub skills: Vec<Skill>,
    pub llm: Option<LlmConfig>,
}

/// Checks what agents and templates share: skills known and listed once, tools only with the
/// instruction_generation skill (the only way a tool step gets its call), and an LLM that is
/// configured and valid. `what` names the thing in messages ("an agent", "a template").
pub(super) fn check_body(
    site: &Site,
    what: &str,
    skills: &[String],
    tools: &[String],
    llm: Option<&RawLlm>,
    team_llm: &TeamLlm,
    out: &mut Findings,
) -> Body {
    let mut known = Vec::new();
    for (j, s) in skills.iter().enumerate() {
        match s.parse::<Skill>() {
            Ok(skill) if known.contains(&skill) => out.add(
                site.file,
                site.field(&format!("skills[{j}]")),
                format!("skill `{skill}` is listed twice"),
            ),
            Ok(skill) => known.push(skill),
            Err(_) => out.add(
                site.file,
                site.field(&format!("skills[{j}]")),
                format!(
                    "unknown skill `{s}`; skills are: {}",
                    Skill::ALL
                        .iter()
                        .map(|k| k.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ),
        }
    }
    if !tools.is_empty() && !known.contains(&Skill::InstructionGeneration) {
        out.add(
            site.file,
            site.field("skills"),
            format!("{what} with tools needs the instruction_generation skill to call them"),
        );
    }
    let llm = match (llm, team_llm) {
        (Some(l), _) => checked_llm(l, (site.file, &site.field("llm"), site.base), out),
        (None, TeamLlm::Valid(c)) => Some(c.clone()),
        (None, TeamLlm::Invalid) => None,
        (None, TeamLlm::Unset) => {
            out.add(
                site.file,
                site.field("llm"),
                format!("no LLM configured (set `llm` at the top of the team file or on {what})"),
            );
            None
        }
    };
    Body { skills: known, llm }
}

/// A configured agent may only name MCP servers the team lists. (Templates are not held to
/// this: see `templates.rs`.)
pub(super) fn check_tools(
    site: &Site,
    tools: &[String],
    servers: &[McpServerConfig],
    out: &mut Findings,
) {
    for (j, t) in tools.iter().enumerate() {
        if !servers.iter().any(|s| &s.name == t) {
            let known = servers.iter().map(|s| s.name.as_str()).collect::<Vec<_>>();
            let known = if known.is_empty() {
                "the team names no mcp_servers".to_owned()
            } else {
                format!("known: {}", known.join(", "))
            };
            out.add(
                site.file,
                site.field(&format!("tools[{j}]")),
                format!("unknown MCP server `{t}` ({known})"),
            );
        }
    }
}

/// Checks one raw LLM block; an error is (sub-field, message), e.g. ("model", "…").
pub(super) fn llm_config(l: &RawLlm, base: &Path) -> Result<LlmConfig, (String, String)> {
    if l.max_in_flight == Some(0) {
        return Err(("max_in_flight".into(), "must be at least 1".into()));
    }
    let max_in_flight = l.max_in_flight.unwrap_or(DEFAULT_MAX_IN_FLIGHT);
    match l.provider.as_str() {
        "openai" => openai_config(l, max_in_flight),
        "scripted" => scripted_config(l, base, max_in_flight),
        other => Err((
            "provider".into(),
            format!("unknown provider `{other}` (use openai or scripted)"),
        )),
    }
}

/// An `openai` block: an OpenAI-compatible endpoint.
fn openai_config(l: &RawLlm, max_in_flight: usize) -> Result<LlmConfig, (String, String)> {
    let model = l.model.clone().filter(|m| !m.trim().is_empty());
    if model.is_none() && l.model_env.is_none() {
        return Err((
            "model".to_owned(),
            "the openai provider needs a model (or model_env)".to_owned(),
        ));
    }
    if let Some(t) = l.temperature
        && !(0.0..=2.0).contains(&t)
    {
        return Err(("temperature".into(), format!("{t} is outside 0.0..=2.0")));
    }
    if l.max_tokens == Some(0) {
        return Err(("max_tokens".into(), "must be at least 1".into()));
    }
    if l.script.is_some() {
        return Err((
            "script".into(),
            "only the scripted provider takes a script".into(),
        ));
    }
    let structured_output = match &l.structured_output {
        None => StructuredOutput::default(),
        Some(s) => s
            .parse()
            .map_err(|why| ("structured_output".to_owned(), why))?,
    };
    let price = price(l)?;
    let native_tools = match l.tool_calling.as_deref().map(str::trim) {
        None | Some("chain") => false,
        Some("native") => true,
        Some(other) => {
            return Err((
                "tool_calling".into(),
                format!("`{other}` is not chain or native"),
            ));
        }
    };
    let stream = stream(l)?;
    let timeout = Duration::from_secs(l.timeout_secs.unwrap_or(120).max(1));
    check_context_window(l)?;
    if l.cache_slots == Some(0) {
        return Err(("cache_slots".into(), "must be at least 1".into()));
    }
    let cache = PromptCache {
        key: l.prompt_cache_key.unwrap_or(true),
        slots: l.cache_slots,
    };
    Ok(LlmConfig::OpenAi {
        base_url: l
            .base_url
            .clone()
            .unwrap_or_else(|| "https://api.openai.com/v1".into()),
        model: model.unwrap_or_default(),
        api_key_env: l.api_key_env.clone(),
        base_url_env: l.base_url_env.clone(),
        model_env: l.model_env.clone(),
        temperature: l.temperature,
        max_tokens: l.max_tokens,
        timeout,
        max_retries: l.max_retries.unwrap_or(3),
        structured_output,
        context_window: l.context_window,
        native_tools,
        multimodal: l.multimodal.unwrap_or(false),
        stream,
        price,
        cache,
        max_in_flight,
    })
}

/// What the model costs: both prices or neither.
fn price(l: &RawLlm) -> Result<Option<Price>, (String, String)> {
    if l.cost_per_1k_cached_prompt.is_some_and(|c| c < 0.0) {
        return Err((
            "cost_per_1k_cached_prompt".into(),
            "costs may not be negative".into(),
        ));
    }
    match (l.cost_per_1k_prompt, l.cost_per_1k_completion) {
        (None, None) if l.cost_per_1k_cached_prompt.is_some() => Err((
            "cost_per_1k_cached_prompt".into(),
            "give it with cost_per_1k_prompt and cost_per_1k_completion".into(),
        )),
        (None, None) => Ok(None),
        (Some(p), Some(c)) if p >= 0.0 && c >= 0.0 => Ok(Some(Price {
            prompt_per_1k: p,
            completion_per_1k: c,
            cached_prompt_per_1k: l.cost_per_1k_cached_prompt.unwrap_or(p),
        })),
        (Some(_), Some(_)) => Err((
            "cost_per_1k_prompt".into(),
            "costs may not be negative".into(),
        )),
        _ => Err((
            "cost_per_1k_prompt".into(),
            "give both cost_per_1k_prompt and cost_per_1k_completion".into(),
        )),
    }
}

/// A streamed answer's idle timeout (None: the answer is not streamed).
fn stream(l: &RawLlm) -> Result<Option<Duration>, (String, String)> {
    match (l.stream, l.idle_timeout_secs) {
        (_, Some(0)) => Err(("idle_timeout_secs".into(), "must be at least 1".into())),
        (Some(true), idle) => Ok(Some(Duration::from_secs(
            idle.unwrap_or(DEFAULT_IDLE_TIMEOUT_SECS),
        ))),
        (_, Some(_)) => Err((
            "idle_timeout_secs".into(),
            "only a streamed answer (stream: true) has an idle timeout".into(),
        )),
        (_, None) => Ok(None),
    }
}

/// A context window holds a skill prompt and leaves room for it beside the answer.
fn check_context_window(l: &RawLlm) -> Result<(), (String, String)> {
    if let Some(w) = l.context_window
        && w < 2048
    {
        return Err((
            "context_window".into(),
            format!("{w} tokens cannot hold a skill prompt; at least 2048"),
        ));
    }
    if let (Some(w), Some(m)) = (l.context_window, l.max_tokens)
        && m >= w
    {
        return Err((
            "max_tokens".into(),
            format!("{m} leaves no room for the prompt in a context window of {w}"),
        ));
    }
    Ok(())
}

/// A `scripted` block: replies read from a script file, offline; none of the openai settings.
fn scripted_config(
    l: &RawLlm,
    base: &Path,
    max_in_flight: usize,
) -> Result<LlmConfig, (String, String)> {
    let script = l.script.as_ref().ok_or((
        "script".to_owned(),
        "the scripted provider needs a script file".to_owned(),
    ))?;
    let path = base.join(script);
    if !path.is_file() {
        return Err((
            "script".into(),
            format!("{} does not exist", path.display()),
        ));
    }
    if l.cost_per_1k_prompt.is_some() || l.cost_per_1k_completion.is_some() {
        return Err((
            "cost_per_1k_prompt".into(),
            "a scripted model costs nothing".into(),
        ));
    }
    if l.cost_per_1k_cached_prompt.is_some() {
        return Err((
            "cost_per_1k_cached_prompt".into(),
            "a scripted model costs nothing".into(),
        ));
    }
    if l.tool_calling.is_some() {
        return Err((
            "tool_calling".into(),
            "only the openai provider calls tools natively".into(),
        ));
    }
    if l.multimodal.is_some() {
        return Err((
            "multimodal".into(),
            "only the openai provider is sent images".into(),
        ));
    }
    if l.cache_slots.is_some() || l.prompt_cache_key.is_some() {
        let field = if l.cache_slots.is_some() {
            "cache_slots"
        } else {
            "prompt_cache_key"
        };
        return Err((
            field.into(),
            "only the openai provider asks an endpoint to cache prompts".into(),
        ));
    }
    if l.stream.is_some() || l.idle_timeout_secs.is_some() {
        return Err((
            "stream".into(),
            "only the openai provider streams answers".into(),
        ));
    }
    if l.context_window.is_some() {
        return Err((
            "context_window".into(),
            "only the openai provider takes a context window".into(),
        ));
    }
    if l.structured_output.is_some() {
        return Err((
            "structured_output".into(),
            "only the openai provider constrains answers".into(),
        ));
    }
    Ok(LlmConfig::Scripted {
        script: path,
        max_in_flight,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn llm(yaml: &str) -> Result<LlmConfig, (String, String)> {
        let raw: RawLlm = serde_yaml::from_str(yaml).unwrap();
        llm_config(&raw, Path::new("."))
    }

    #[test]
    fn stream_takes_an_idle_timeout_and_only_the_openai_provider_streams() {
        let stream = |yaml| match llm(yaml) {
            Ok(LlmConfig::OpenAi { stream, .. }) => stream,
            other => panic!("{other:?}"),
        };
        assert_eq!(stream("{provider: openai, model: m}"), None);
        assert_eq!(
            stream("{provider: openai, model: m, stream: true}"),
            Some(Duration::from_secs(DEFAULT_IDLE_TIMEOUT_SECS))
        );
        assert_eq!(
            stream("{provider: openai, model: m, stream: true, idle_timeout_secs: 5}"),
            Some(Duration::from_secs(5))
        );
        let field = |yaml| llm(yaml).unwrap_err().0;
        assert_eq!(
            field("{provider: openai, model: m, idle_timeout_secs: 5}"),
            "idle_timeout_secs"
        );
        assert_eq!(
            field("{provider: openai, model: m, stream: true, idle_timeout_secs: 0}"),
            "idle_timeout_secs"
        );
        assert_eq!(
            field("{provider: scripted, script: Cargo.toml, stream: true}"),
            "stream"
        );
    }

    #[test]
    fn the_prompt_cache_settings_and_the_cached_price() {
        let cache = |yaml| match llm(yaml) {
            Ok(LlmConfig::OpenAi { cache, price, .. }) => (cache, price),
            other => panic!("{other:?}"),
        };
        let (c, price) = cache("{provider: openai, model: m}");
        assert_eq!(
            c,
            PromptCache {
                key: true,
                slots: None
            }
        );
        assert_eq!(price, None);
        let (c, _) = cache("{provider: openai, model: m, cache_slots: 4, prompt_cache_key: false}");
        assert_eq!(
            c,
            PromptCache {
                key: false,
                slots: Some(4)
            }
        );
        let (_, p) = cache(
            "{provider: openai, model: m, cost_per_1k_prompt: 1.0, cost_per_1k_completion: 4.0, cost_per_1k_cached_prompt: 0.1}",
        );
        assert_eq!(p.unwrap().cached_prompt_per_1k, 0.1);
        let (_, p) = cache(
            "{provider: openai, model: m, cost_per_1k_prompt: 1.0, cost_per_1k_completion: 4.0}",
        );
        assert_eq!(
            p.unwrap().cached_prompt_per_1k,
            1.0,
            "the prompt rate by default"
        );
        let field = |yaml| llm(yaml).unwrap_err().0;
        assert_eq!(
            field("{provider: openai, model: m, cache_slots: 0}"),
            "cache_slots"
        );
        assert_eq!(
            field("{provider: openai, model: m, cost_per_1k_cached_prompt: 0.1}"),
            "cost_per_1k_cached_prompt"
        );
        assert_eq!(
            field("{provider: scripted, script: Cargo.toml, cache_slots: 2}"),
            "cache_slots"
        );
    }
}
