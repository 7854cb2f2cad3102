//! Validation of a raw team file into a `TeamConfig`. Every problem found is reported at once,
//! each naming the file and the field (`agents[1].skills[2]`), so a user fixes them in one go.

use super::raw::{RawLlm, RawTeam};
use crate::ids::AgentId;
use crate::llm::scripted::Script;
use crate::mcp::{McpServerConfig, load_servers};
use crate::prompt::{Language, check_prompt_dir};
use crate::state::Skill;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use crate::problem::Problem;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{file}: cannot read: {source}")]
    Read {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("{file}: {message}")]
    Yaml { file: PathBuf, message: String },
    #[error("{} problem(s):\n{}", .0.len(), .0.iter().map(|p| format!("  {p}")).collect::<Vec<_>>().join("\n"))]
    Invalid(Vec<Problem>),
}

impl ConfigError {
    /// Every problem as (file, field, message) lines, for `cohort check`.
    pub fn problems(&self) -> Vec<Problem> {
        match self {
            ConfigError::Invalid(p) => p.clone(),
            ConfigError::Read { file, source } => {
                vec![Problem {
                    file: file.clone(),
                    field: "(file)".into(),
                    message: format!("cannot read: {source}"),
                }]
            }
            ConfigError::Yaml { file, message } => {
                let (field, msg) = split_yaml_message(message);
                vec![Problem {
                    file: file.clone(),
                    field,
                    message: msg,
                }]
            }
        }
    }
}

/// serde_yaml writes `agents[0].skills[1]: unknown variant …`; split the path off as the field.
fn split_yaml_message(m: &str) -> (String, String) {
    match m.split_once(": ") {
        Some((path, rest)) if !path.contains(' ') => (path.to_owned(), rest.to_owned()),
        _ => ("(document)".to_owned(), m.to_owned()),
    }
}

/// Which LLM an agent calls.
#[derive(Clone, Debug, PartialEq)]
pub enum LlmConfig {
    OpenAi {
        base_url: String,
        model: String,
        /// The env var holding the API key; read only when the team starts.
        api_key_env: Option<String>,
        /// Env vars overriding base_url and model when set (read when the team starts).
        base_url_env: Option<String>,
        model_env: Option<String>,
        temperature: Option<f32>,
        max_tokens: Option<u32>,
        timeout: Duration,
        max_retries: u32,
    },
    Scripted {
        script: PathBuf,
    },
}

#[derive(Clone, Debug)]
pub struct AgentConfig {
    pub id: AgentId,
    pub name: String,
    pub role: String,
    pub profile: String,
    pub skills: Vec<Skill>,
    pub tools: Vec<String>,
    pub llm: LlmConfig,
}

#[derive(Clone, Debug)]
pub struct TeamConfig {
    pub file: PathBuf,
    pub name: String,
    pub language: Language,
    pub prompts_dir: Option<PathBuf>,
    pub agents: Vec<AgentConfig>,
    /// The MCP servers the team may use.
    pub servers: Vec<McpServerConfig>,
    /// The people of the team (human agents).
    pub humans: Vec<HumanEntry>,
    /// Templates managers can instantiate new agents from (agent_manager).
    pub templates: Vec<super::AgentTemplate>,
}

/// A person of the team: who they are and how they log in.
#[derive(Clone, Debug)]
pub struct HumanEntry {
    pub id: AgentId,
    pub name: String,
    pub role: String,
    pub profile: String,
    /// Argon2id PHC string; checked with `crate::auth::verify_password`.
    pub password_hash: String,
}

impl TeamConfig {
    /// Agents that can turn a goal into a task: those with the task_manager skill. They join
    /// the base task.
    pub fn managers(&self) -> impl Iterator<Item = &AgentConfig> {
        self.agents
            .iter()
            .filter(|a| a.skills.contains(&Skill::TaskManager))
    }
}

/// Skills that need parts this version does not ship yet; naming them is an error, not a
/// silent no-op.
const UNSUPPORTED: [(Skill, &str); 2] = [
    (
        Skill::AgentManager,
        "agent_manager is not available in this version",
    ),
    (Skill::AskInfo, "ask_info is not available in this version"),
];

/// Reads and validates a team file (and the script or prompts it names).
pub fn load_team(path: &Path) -> Result<TeamConfig, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        file: path.into(),
        source,
    })?;
    let raw: RawTeam = serde_yaml::from_str(&text).map_err(|e| ConfigError::Yaml {
        file: path.into(),
        message: e.to_string(),
    })?;
    validate(raw, path)
}

fn validate(raw: RawTeam, file: &Path) -> Result<TeamConfig, ConfigError> {
    let base = file
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut problems = Vec::new();
    let mut problem = |field: String, message: String| {
        problems.push(Problem {
            file: file.to_path_buf(),
            field,
            message,
        });
    };

    let language = match raw.language.as_deref().unwrap_or("en").parse::<Language>() {
        Ok(l) => l,
        Err(_) => {
            problem(
                "language".into(),
                format!(
                    "`{}` is not a prompt language (use en or zh)",
                    raw.language.unwrap_or_default()
                ),
            );
            Language::En
        }
    };

    let prompts_dir = raw.prompts_dir.as_ref().map(|d| base.join(d));
    let mut prompt_problems = Vec::new();
    if let Some(dir) = &prompts_dir {
        if !dir.is_dir() {
            problem(
                "prompts_dir".into(),
                format!("{} is not a folder", dir.display()),
            );
        } else {
            prompt_problems = check_prompt_dir(dir);
        }
    }

    let (servers, server_problems) = match &raw.mcp_servers {
        None => (Vec::new(), Vec::new()),
        Some(paths) => {
            let paths: Vec<PathBuf> = paths.items().iter().map(|p| base.join(p)).collect();
            match load_servers(&paths) {
                Ok(s) => (s, Vec::new()),
                Err(p) => (Vec::new(), p),
            }
        }
    };

    if raw.agents.is_empty() {
        problem("agents".into(), "the team has no agents".into());
    }

    let mut seen = BTreeSet::new();
    let mut agents = Vec::new();
    let mut scripts: Vec<(String, PathBuf)> = Vec::new();
    for (i, a) in raw.agents.iter().enumerate() {
        let at = format!("agents[{i}]");
        let id = a.id.trim();
        if let Err(why) = claim_id(id, &mut seen) {
            problem(format!("{at}.id"), why);
        }
        let mut skills = Vec::new();
        for (j, s) in a.skills.iter().enumerate() {
            match s.parse::<Skill>() {
                Ok(skill) if skills.contains(&skill) => problem(
                    format!("{at}.skills[{j}]"),
                    format!("skill `{skill}` is listed twice"),
                ),
                Ok(skill) => {
                    if let Some((_, why)) = UNSUPPORTED.iter().find(|(u, _)| *u == skill) {
                        problem(format!("{at}.skills[{j}]"), (*why).to_owned());
                    }
                    skills.push(skill);
                }
                Err(_) => problem(
                    format!("{at}.skills[{j}]"),
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
        for (j, t) in a.tools.iter().enumerate() {
            if !servers.iter().any(|s| &s.name == t) {
                let known = servers.iter().map(|s| s.name.as_str()).collect::<Vec<_>>();
                let known = if known.is_empty() {
                    "the team names no mcp_servers".to_owned()
                } else {
                    format!("known: {}", known.join(", "))
                };
                problem(
                    format!("{at}.tools[{j}]"),
                    format!("unknown MCP server `{t}` ({known})"),
                );
            }
        }
        if !a.tools.is_empty() && !a.skills.iter().any(|s| s == "instruction_generation") {
            problem(
                format!("{at}.skills"),
                "an agent with tools needs the instruction_generation skill to call them".into(),
            );
        }
        let llm_source = a
            .llm
            .as_ref()
            .map(|l| (format!("{at}.llm"), l))
            .or(raw.llm.as_ref().map(|l| ("llm".to_owned(), l)));
        let llm = match llm_source {
            None => {
                problem(
                    format!("{at}.llm"),
                    "no LLM configured (set `llm` at the top of the file or on the agent)".into(),
                );
                None
            }
            Some((field, l)) => match llm_config(l, base) {
                Ok(c) => {
                    if let LlmConfig::Scripted { script } = &c {
                        scripts.push((field, script.clone()));
                    }
                    Some(c)
                }
                Err((sub, msg)) => {
                    problem(format!("{field}.{sub}"), msg);
                    None
                }
            },
        };
        if let Some(llm) = llm {
            agents.push(AgentConfig {
                id: AgentId::from(id),
                name: a.name.clone().unwrap_or_else(|| id.to_owned()),
                role: a.role.clone(),
                profile: a.profile.clone(),
                skills,
                tools: a.tools.clone(),
                llm,
            });
        }
    }
    let mut humans = Vec::new();
    for (i, h) in raw.humans.iter().enumerate() {
        let at = format!("humans[{i}]");
        let id = h.id.trim();
        if let Err(why) = claim_id(id, &mut seen) {
            problem(format!("{at}.id"), why);
        }
        if let Err(why) = crate::auth::check_hash(&h.password_hash) {
            problem(format!("{at}.password_hash"), why);
        }
        humans.push(HumanEntry {
            id: AgentId::from(id),
            name: h.name.clone().unwrap_or_else(|| id.to_owned()),
            role: h.role.clone().unwrap_or_else(|| "operator".to_owned()),
            profile: h.profile.clone(),
            password_hash: h.password_hash.clone(),
        });
    }

    if !raw.agents.is_empty()
        && !raw
            .agents
            .iter()
            .any(|a| a.skills.iter().any(|s| s == "task_manager"))
    {
        problem(
            "agents".into(),
            "no agent has the task_manager skill, so nobody can turn a goal into a task".into(),
        );
    }

    // A script is checked once, against the agents and skills of the team.
    let mut checked = BTreeSet::new();
    for (field, path) in scripts {
        if !checked.insert(path.clone()) {
            continue;
        }
        match Script::load(&path) {
            Ok(script) => {
                for p in script.check_against(
                    &raw.agents
                        .iter()
                        .map(|a| a.id.trim().to_owned())
                        .collect::<Vec<_>>(),
                ) {
                    problems.push(Problem {
                        file: path.clone(),
                        field: p.0,
                        message: p.1,
                    });
                }
            }
            Err(e) => problems.push(Problem {
                file: path.clone(),
                field: format!("({field}.script)"),
                message: e.to_string(),
            }),
        }
    }
    problems.extend(prompt_problems);
    problems.extend(server_problems);

    if !problems.is_empty() {
        return Err(ConfigError::Invalid(problems));
    }
    Ok(TeamConfig {
        file: file.to_path_buf(),
        name: raw.name.unwrap_or_else(|| "team".into()),
        language,
        prompts_dir,
        agents,
        servers,
        humans,
        templates: Vec::new(),
    })
}

/// Takes an id for an agent or a person: usable, and not taken (agents and humans share one
/// id space, since both receive messages).
fn claim_id(id: &str, seen: &mut BTreeSet<String>) -> Result<(), String> {
    if id.is_empty()
        || id
            .chars()
            .any(|c| c.is_whitespace() || c == '<' || c == '>')
    {
        return Err(format!(
            "`{id}` is not a usable id (no spaces or angle brackets)"
        ));
    }
    if !seen.insert(id.to_owned()) {
        return Err(format!(
            "id `{id}` is used twice (agents and people share one id space)"
        ));
    }
    Ok(())
}

fn llm_config(l: &RawLlm, base: &Path) -> Result<LlmConfig, (String, String)> {
    match l.provider.as_str() {
        "openai" => {
            let model = l.model.clone().filter(|m| !m.trim().is_empty());
            if model.is_none() && l.model_env.is_none() {
                return Err((
                    "model".to_owned(),
                    "the openai provider needs a model (or model_env)".to_owned(),
                ));
            }
            if let Some(t) = l.temperature {
                if !(0.0..=2.0).contains(&t) {
                    return Err(("temperature".into(), format!("{t} is outside 0.0..=2.0")));
                }
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
                timeout: Duration::from_secs(l.timeout_secs.unwrap_or(120).max(1)),
                max_retries: l.max_retries.unwrap_or(3),
            })
        }
        "scripted" => {
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
            Ok(LlmConfig::Scripted { script: path })
        }
        other => Err((
            "provider".into(),
            format!("unknown provider `{other}` (use openai or scripted)"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    fn tmp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("cohort-config-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn malformed_yaml_names_the_file_and_the_field() {
        let d = tmp("yaml");
        let f = write(
            &d,
            "team.yaml",
            "agents:\n  - id: a\n    role: r\n    skills: [planning]\n    colour: blue\n",
        );
        let err = load_team(&f).unwrap_err();
        let p = &err.problems()[0];
        assert_eq!(p.file, f);
        assert!(p.field.starts_with("agents[0]"), "{p}");
        assert!(p.message.contains("colour"), "{p}");
    }

    #[test]
    fn every_semantic_problem_is_reported_with_its_field() {
        let d = tmp("sem");
        let f = write(
            &d,
            "team.yaml",
            "language: fr\nllm: {provider: openai}\nagents:\n  - {id: a, role: r, skills: [planning, dance]}\n  - {id: a, role: r, skills: [think, think], tools: [web]}\n",
        );
        let problems = load_team(&f).unwrap_err().problems();
        let fields: Vec<_> = problems.iter().map(|p| p.field.as_str()).collect();
        for want in [
            "language",
            "llm.model",
            "agents[0].skills[1]",
            "agents[1].id",
            "agents[1].skills[1]",
            "agents[1].tools[0]",
            "agents",
        ] {
            assert!(fields.contains(&want), "missing {want} in {fields:?}");
        }
    }

    #[test]
    fn openai_defaults_apply() {
        let d = tmp("ok");
        let f = write(
            &d,
            "team.yaml",
            "llm: {provider: openai, model: m, api_key_env: KEY}\nagents:\n  - {id: m, role: manager, skills: [task_manager, process_message]}\n",
        );
        let t = load_team(&f).unwrap();
        match &t.agents[0].llm {
            LlmConfig::OpenAi {
                base_url,
                timeout,
                max_retries,
                ..
            } => {
                assert_eq!(base_url, "https://api.openai.com/v1");
                assert_eq!(*timeout, Duration::from_secs(120));
                assert_eq!(*max_retries, 3);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(t.managers().count(), 1);
    }

    #[test]
    fn people_need_an_argon2id_hash_and_an_id_no_agent_has() {
        let d = tmp("humans");
        let f = write(
            &d,
            "team.yaml",
            "llm: {provider: openai, model: m}\nagents:\n  - {id: m, role: manager, skills: [task_manager]}\nhumans:\n  - {id: m, password_hash: x}\n",
        );
        let problems = load_team(&f).unwrap_err().problems();
        let fields: Vec<_> = problems.iter().map(|p| p.field.as_str()).collect();
        assert!(
            fields.contains(&"humans[0].id") && fields.contains(&"humans[0].password_hash"),
            "{fields:?}"
        );
    }
}
