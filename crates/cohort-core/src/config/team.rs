//! Validation of a raw team file into a `TeamConfig`. Every problem found is reported at once,
//! each naming the file and the field (`agents[1].skills[2]`), so a user fixes them in one go.

use super::agent::{Findings, Site, TeamLlm, check_body, check_tools};
use super::limits::{
    Compaction, Feeds, Retention, TaskLimits, compaction, feeds, retention, session_ttl,
    step_limits, task_limits, waits,
};
use super::mcp_servers::{McpServerConfig, load_servers};
use super::raw::{RawApproval, RawTeam};
use super::script::Script;
use super::templates::{AgentTemplate, load_templates};
use crate::ids::AgentId;
use crate::prompt::{Language, check_prompt_dir};
use crate::state::Skill;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

pub use super::agent::LlmConfig;
pub use crate::problem::Problem;

/// Why a team file could not be loaded; [`ConfigError::problems`] gives each problem as file, field
/// and message.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{file}: cannot read: {source}")]
    Read {
        /// The team file.
        file: PathBuf,
        /// Why reading it failed.
        source: std::io::Error,
    },
    /// The file does not have a team file's shape (a wrong type, an unknown key), or its values
    /// are wrong: every problem found, each naming its file and field.
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
        }
    }
}

/// One agent of `agents:`, checked: what the runtime starts an LLM agent from.
#[derive(Clone, Debug)]
pub struct AgentConfig {
    /// `id:`, unique among agents and people (one id space); messages are addressed to it.
    pub id: AgentId,
    /// `name:`, its display name (default: the id).
    pub name: String,
    /// `role:`, its role as teammates and its prompts see it.
    pub role: String,
    /// `profile:`, what it is and can do in prose, for its prompts and for managers choosing
    /// agents.
    pub profile: String,
    /// `skills:`, each known and listed once; `task_manager` makes it a manager
    /// ([`TeamConfig::managers`]).
    pub skills: Vec<Skill>,
    /// `tools:`, the MCP servers (of `mcp_servers`) it may call, through its instruction_generation
    /// steps.
    pub tools: Vec<String>,
    /// The model it calls: its own `llm:`, else the team's.
    pub llm: LlmConfig,
    /// `models:`, the team's named models a message may choose for it instead (seed 004).
    pub models: Vec<String>,
    /// When its tool calls wait for a person (`tool_approval:`, else the team's).
    pub tool_approval: crate::policy::ApprovalPolicy,
    /// `parallel_steps:`, the ready steps of one graph plan it runs at once, when it sets its
    /// own (else `step_limits.parallel_steps`).
    pub parallel_steps: Option<usize>,
}

/// A team file, validated: what the runtime starts a team from.
#[derive(Clone, Debug)]
pub struct TeamConfig {
    /// The team file it was read from.
    pub file: PathBuf,
    /// `name:`, shown in logs (default `team`).
    pub name: String,
    /// `language:`, the prompts' language (`en`, the default, or `zh`).
    pub language: Language,
    /// `prompts_dir:`, resolved against the team file's folder: prompts used instead of the
    /// built-in ones.
    pub prompts_dir: Option<PathBuf>,
    /// `agents:`, the LLM agents the team starts with.
    pub agents: Vec<AgentConfig>,
    /// The MCP servers the team may use.
    pub servers: Vec<McpServerConfig>,
    /// `models:`, named models a message may choose for the agents that list them.
    pub models: std::collections::BTreeMap<String, LlmConfig>,
    /// The people of the team (human agents).
    pub humans: Vec<HumanEntry>,
    /// Templates managers can instantiate new agents from (agent_manager).
    pub templates: Vec<AgentTemplate>,
    /// The most agents managers may create while the team runs: a model that keeps hiring
    /// would otherwise start actors without end.
    pub max_hired_agents: usize,
    /// What the team keeps in memory (`retention:`).
    pub retention: Retention,
    /// Limits of the console's websocket feeds (`feeds:`).
    pub feeds: Feeds,
    /// How far one agent may go on in one stage (`step_limits:`).
    pub step_limits: crate::state::StepLimits,
    /// How long a person's login lasts (`session_ttl_hours`, default a week).
    pub session_ttl: std::time::Duration,
    /// When tool calls wait for a person (`tool_approval:`; agents may set their own).
    pub tool_approval: crate::policy::ApprovalPolicy,
    /// How long a wait for a reply lasts (`waits:`); `humans` is filled in at start.
    pub waits: crate::state::WaitPatience,
    /// How much work models may open (`task_limits:`).
    pub task_limits: TaskLimits,
    /// What the team's store keeps and how often it is compacted (`store:`).
    pub store: Compaction,
    /// How `cohort serve` treats HTTP connections (`http:`).
    pub http: super::Http,
    /// Which rules mend a model's slips (`repairs:`).
    pub repairs: crate::policy::Repairs,
}

impl TeamConfig {
    /// The team with every agent's and template's LLM as its env variables set it
    /// ([`LlmConfig::with_env`]).
    pub fn with_env(&self, env: &dyn Fn(&str) -> Option<String>) -> TeamConfig {
        let mut cfg = self.clone();
        for a in &mut cfg.agents {
            a.llm = a.llm.with_env(env);
        }
        for t in &mut cfg.templates {
            t.llm = t.llm.with_env(env);
        }
        for m in cfg.models.values_mut() {
            *m = m.with_env(env);
        }
        cfg
    }
}

/// `max_hired_agents` when the team file does not set it.
pub const DEFAULT_MAX_HIRED_AGENTS: usize = 32;

/// A person of the team: who they are and how they log in.
#[derive(Clone, Debug)]
pub struct HumanEntry {
    /// `id:`, what they log in as and are messaged at (one id space with the agents).
    pub id: AgentId,
    /// `name:`, their display name (default: the id).
    pub name: String,
    /// `role:`, shown to the agents (default `operator`); a label only, what they may do is
    /// `access`.
    pub role: String,
    /// `profile:`, about them in prose, for the agents (default empty).
    pub profile: String,
    /// Argon2id PHC string; checked with `crate::auth::verify_password`.
    pub password_hash: String,
    /// `access:`, what they may see and do through the API (default `member`).
    pub access: Access,
}

/// What a person may see and do through the API and the console (`access:` of a human).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[serde(expecting = "member or operator")]
pub enum Access {
    /// Sees and controls the whole team.
    Operator,
    /// Sees the tasks whose group includes them, with those tasks' stages, steps and agents,
    /// and posts only there.
    #[default]
    Member,
}

impl TeamConfig {
    /// The team's prompts: its `prompts_dir:` in its language, or the built-in ones.
    pub fn prompt_set(&self) -> Result<crate::prompt::PromptSet, crate::prompt::PromptError> {
        match &self.prompts_dir {
            Some(dir) => crate::prompt::PromptSet::load(dir, self.language),
            None => Ok(crate::prompt::PromptSet::builtin(self.language)),
        }
    }

    /// Agents that can turn a goal into a task: those with the task_manager skill. They join
    /// the base task.
    pub fn managers(&self) -> impl Iterator<Item = &AgentConfig> {
        self.agents
            .iter()
            .filter(|a| a.skills.contains(&Skill::TaskManager))
    }
}

/// Reads and validates a team file (and the script or prompts it names).
pub fn load_team(path: &Path) -> Result<TeamConfig, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        file: path.into(),
        source,
    })?;
    let read = super::yaml::read::<RawTeam>(&text);
    if read.slips.is_empty()
        && let Some(raw) = read.value
    {
        return validate(raw, path);
    }
    let mut problems: Vec<Problem> = read
        .slips
        .into_iter()
        .map(|s| Problem {
            file: path.into(),
            field: s.field,
            message: s.message,
        })
        .collect();
    // The rest of the file, checked without what did not fit: its problems too, but for those
    // that only follow from what was set aside.
    if let Some(raw) = read.value
        && let Err(ConfigError::Invalid(more)) = validate(raw, path)
    {
        problems.extend(
            more.into_iter()
                .filter(|p| !follows_from(p, path, &read.set_aside)),
        );
    }
    Err(ConfigError::Invalid(problems))
}

/// Whether `p`, found in a team file read without the fields `set_aside`, may only be there
/// because they were: it is about one of them (or what holds one), about an agent's model or
/// tools when the team's `llm` or `mcp_servers` was set aside, or in another file (a script
/// names agents and templates) when an agent or template was.
fn follows_from(p: &Problem, team: &Path, set_aside: &[String]) -> bool {
    let within =
        |a: &str, b: &str| a == b || b.strip_prefix(a).is_some_and(|r| r.starts_with(['.', '[']));
    set_aside.iter().any(|gone| {
        let member = gone.starts_with("agents") || gone.starts_with("agent_templates");
        if p.file != team {
            return member;
        }
        within(gone, &p.field)
            || within(&p.field, gone)
            || (gone == "llm" && p.field.ends_with(".llm"))
            || (gone == "mcp_servers" && p.field.contains("tools["))
    })
}

fn validate(raw: RawTeam, file: &Path) -> Result<TeamConfig, ConfigError> {
    let base = file
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut out = Findings::default();
    let language = language(&raw, file, &mut out);
    let prompts_dir = raw.prompts_dir.as_ref().map(|d| base.join(d));
    let prompt_problems = prompts_dir
        .as_deref()
        .map(|dir| check_prompts_dir(dir, file, &mut out))
        .unwrap_or_default();
    let (servers, server_problems) = servers(&raw, base);

    if raw.agents.is_empty() {
        out.add(file, "agents", "the team has no agents");
    }
    // Checked once here, so a broken team `llm` is one problem, not one per agent using it.
    let team_llm = TeamLlm::check(raw.llm.as_ref(), file, base, &mut out);
    let models = super::models::named_models(&raw.models, file, base, &mut out);
    let mut seen = BTreeSet::new();
    let agents = agents(&raw, file, base, &servers, &team_llm, &mut seen, &mut out);
    let humans = humans(&raw, file, &mut seen, &mut out);
    if !raw.agents.is_empty()
        && !raw
            .agents
            .iter()
            .any(|a| a.skills.iter().any(|s| s == "task_manager"))
    {
        out.add(
            file,
            "agents",
            "no agent has the task_manager skill, so nobody can turn a goal into a task",
        );
    }

    let templates = load_templates(&raw, file, base, &team_llm, &mut out);
    let retention = retention(raw.retention.clone().unwrap_or_default(), file, &mut out);
    let feeds = feeds(raw.feeds.clone().unwrap_or_default(), file, &mut out);
    let session_ttl = session_ttl(raw.session_ttl_hours, file, &mut out);
    let step_limits = step_limits(raw.step_limits.clone().unwrap_or_default(), file, &mut out);
    let waits = waits(raw.waits.clone().unwrap_or_default(), file, &mut out);
    let task_limits = task_limits(raw.task_limits.clone().unwrap_or_default(), file, &mut out);
    let store = compaction(raw.store.clone().unwrap_or_default(), file, &mut out);
    let http = super::http::http(raw.http.clone().unwrap_or_default(), file, &mut out);
    let repairs = super::repairs::repairs(raw.repairs.clone(), file, &mut out);
    let tool_approval = RawApproval::policy(raw.tool_approval, asker(&raw));
    check_scripts(&raw, &templates, &mut out);

    let mut problems = out.problems;
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
        models,
        humans,
        templates,
        max_hired_agents: raw.max_hired_agents.unwrap_or(DEFAULT_MAX_HIRED_AGENTS),
        retention,
        feeds,
        step_limits,
        session_ttl,
        waits,
        task_limits,
        store,
        http,
        repairs,
        tool_approval,
    })
}

/// Whether the team has a person who may confirm a tool call (an operator).
fn asker(raw: &RawTeam) -> bool {
    raw.humans.iter().any(|h| h.access == Access::Operator)
}

/// The prompt language (`en` when unset or unknown, the latter a problem).
fn language(raw: &RawTeam, file: &Path, out: &mut Findings) -> Language {
    match raw.language.as_deref().unwrap_or("en").parse::<Language>() {
        Ok(l) => l,
        Err(_) => {
            out.add(
                file,
                "language",
                format!(
                    "`{}` is not a prompt language (use en or zh)",
                    raw.language.clone().unwrap_or_default()
                ),
            );
            Language::En
        }
    }
}

/// The problems of the prompt files in `dir` (`prompts_dir`), which must be a folder.
fn check_prompts_dir(dir: &Path, file: &Path, out: &mut Findings) -> Vec<Problem> {
    if !dir.is_dir() {
        out.add(
            file,
            "prompts_dir",
            format!("{} is not a folder", dir.display()),
        );
        return Vec::new();
    }
    check_prompt_dir(dir)
}

/// The MCP servers the team file lists (none if any of them has a problem), and the problems.
fn servers(raw: &RawTeam, base: &Path) -> (Vec<McpServerConfig>, Vec<Problem>) {
    match &raw.mcp_servers {
        None => (Vec::new(), Vec::new()),
        Some(paths) => {
            let paths: Vec<PathBuf> = paths.items().iter().map(|p| base.join(p)).collect();
            match load_servers(&paths) {
                Ok(s) => (s, Vec::new()),
                Err(p) => (Vec::new(), p),
            }
        }
    }
}

/// The team file's agents that have a usable model; the problems of every one of them.
fn agents(
    raw: &RawTeam,
    file: &Path,
    base: &Path,
    servers: &[McpServerConfig],
    team_llm: &TeamLlm,
    seen: &mut BTreeSet<String>,
    out: &mut Findings,
) -> Vec<AgentConfig> {
    let mut agents = Vec::new();
    for (i, a) in raw.agents.iter().enumerate() {
        let site = Site {
            file,
            prefix: format!("agents[{i}]."),
            base,
        };
        let id = a.id.trim();
        if let Err(why) = claim_id(id, seen) {
            out.add(file, site.field("id"), why);
        }
        let body = check_body(
            &site,
            "an agent",
            &a.skills,
            &a.tools,
            a.llm.as_ref(),
            team_llm,
            out,
        );
        check_tools(&site, &a.tools, servers, out);
        super::models::check_agent_models(&site, &a.models, &raw.models, out);
        if let Some(llm) = body.llm {
            agents.push(AgentConfig {
                id: AgentId::from(id),
                name: a.name.clone().unwrap_or_else(|| id.to_owned()),
                role: a.role.clone(),
                profile: a.profile.clone(),
                skills: body.skills,
                tools: a.tools.clone(),
                models: a.models.clone(),
                tool_approval: RawApproval::policy(
                    a.tool_approval.or(raw.tool_approval),
                    asker(raw),
                ),
                parallel_steps: a.parallel_steps.map(|n| {
                    let field = site.field("parallel_steps");
                    super::limits::bounded(out, file, &field, Some(n), (1, Some(64)), 1)
                }),
                llm,
            });
        }
    }
    agents
}

/// The team file's people (`humans:`), their ids taken after the agents'.
fn humans(
    raw: &RawTeam,
    file: &Path,
    seen: &mut BTreeSet<String>,
    out: &mut Findings,
) -> Vec<HumanEntry> {
    let mut humans = Vec::new();
    for (i, h) in raw.humans.iter().enumerate() {
        let at = format!("humans[{i}]");
        let id = h.id.trim();
        if let Err(why) = claim_id(id, seen) {
            out.add(file, format!("{at}.id"), why);
        }
        if let Err(why) = crate::auth::check_hash(&h.password_hash) {
            out.add(file, format!("{at}.password_hash"), why);
        }
        humans.push(HumanEntry {
            id: AgentId::from(id),
            name: h.name.clone().unwrap_or_else(|| id.to_owned()),
            role: h.role.clone().unwrap_or_else(|| "operator".to_owned()),
            profile: h.profile.clone(),
            password_hash: h.password_hash.clone(),
            access: h.access,
        });
    }
    humans
}

/// Checks each script the team's models use once, against the agents, templates and skills of
/// the team: replies may be keyed by an agent id or, for agents a manager creates, by a
/// template name.
fn check_scripts(raw: &RawTeam, templates: &[AgentTemplate], out: &mut Findings) {
    let keys: Vec<String> = raw
        .agents
        .iter()
        .map(|a| a.id.trim().to_owned())
        .chain(templates.iter().map(|t| t.name.clone()))
        .collect();
    let mut checked = BTreeSet::new();
    for (field, path) in std::mem::take(&mut out.scripts) {
        if !checked.insert(path.clone()) {
            continue;
        }
        match Script::load(&path) {
            Ok(script) => {
                for (sub, message) in script.check_against(&keys) {
                    out.add(&path, sub, message);
                }
            }
            Err(e) => out.add(&path, format!("({field}.script)"), e.to_string()),
        }
    }
}

/// Takes an id for an agent or a person: usable, and not taken (agents and humans share one
/// id space, since both receive messages).
fn claim_id(id: &str, seen: &mut BTreeSet<String>) -> Result<(), String> {
    crate::ids::check_agent_id(id).map_err(|e| e.to_string())?;
    if !seen.insert(id.to_owned()) {
        return Err(format!(
            "id `{id}` is used twice (agents and people share one id space)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    use crate::config::test_files::{tmp, write};

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
        assert_eq!(t.max_hired_agents, DEFAULT_MAX_HIRED_AGENTS);
        let f = write(
            &d,
            "limited.yaml",
            "llm: {provider: openai, model: m}\nmax_hired_agents: 3\nagents:\n  - {id: m, role: manager, skills: [task_manager]}\n",
        );
        assert_eq!(load_team(&f).unwrap().max_hired_agents, 3);
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

    #[test]
    fn an_unknown_key_is_named_as_the_field() {
        let d = tmp("unknown-key");
        let f = write(&d, "team.yaml", "colour: blue\nagents: []\n");
        let p = &load_team(&f).unwrap_err().problems()[0];
        assert_eq!(p.field, "colour", "{p}");
    }

    #[test]
    fn agent_manager_and_ask_info_are_supported_skills() {
        let d = tmp("skills");
        let f = write(
            &d,
            "team.yaml",
            "llm: {provider: openai, model: m}\nagents:\n  - {id: m, role: manager, skills: [task_manager, agent_manager, ask_info]}\n",
        );
        let t = load_team(&f).unwrap();
        assert!(t.agents[0].skills.contains(&Skill::AgentManager));
        assert!(t.agents[0].skills.contains(&Skill::AskInfo));
    }

    #[test]
    fn ids_starting_with_a_bracket_are_kept_for_the_runtime() {
        let d = tmp("bracket");
        let f = write(
            &d,
            "team.yaml",
            "llm: {provider: openai, model: m}\nagents:\n  - {id: \"[TaskState]\", role: manager, skills: [task_manager]}\n  - {id: \"a[1]\", role: r, skills: [think]}\n",
        );
        let problems = load_team(&f).unwrap_err().problems();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].field, "agents[0].id");
        assert!(problems[0].message.contains("[TaskState]"), "{problems:?}");
    }

    #[test]
    fn scripts_may_key_replies_by_agent_or_template_and_all_are_checked() {
        let d = tmp("script-keys");
        write(
            &d,
            "team-script.yaml",
            "replies:\n  m:\n    think: [a]\n  coder:\n    think: [b]\n  ghost:\n    think: [c]\n",
        );
        // Used by a template only: still checked, and against the same names.
        write(
            &d,
            "critic-script.yaml",
            "replies:\n  critic:\n    think: [d]\n  phantom:\n    think: [e]\n",
        );
        let f = write(
            &d,
            "team.yaml",
            "llm: {provider: scripted, script: team-script.yaml}\nagents:\n  - {id: m, role: manager, skills: [task_manager]}\nagent_templates:\n  - {name: coder, role: r, skills: [think]}\n  - {name: critic, role: r, skills: [think], llm: {provider: scripted, script: critic-script.yaml}}\n",
        );
        let problems = load_team(&f).unwrap_err().problems();
        let got: Vec<_> = problems
            .iter()
            .map(|p| {
                (
                    p.file.file_name().unwrap().to_str().unwrap(),
                    p.field.as_str(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("team-script.yaml", "replies.ghost"),
                ("critic-script.yaml", "replies.phantom")
            ],
            "{problems:?}"
        );
    }
}
