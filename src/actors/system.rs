//! The System: turns a validated `TeamConfig` into running actors (dispatcher, SyncState with
//! the base task, one actor per agent, the LLM clients) and hands back a `Team` handle.

use super::agent::{AgentActor, AgentTools};
use super::dispatcher::{Dispatcher, Register};
use super::sync_state::{SubmitMessage, SyncStateActor};
use crate::config::{LlmConfig, TeamConfig};
use crate::ids::{AgentId, StageRef, TaskId};
use crate::llm::openai::{OpenAiModel, OpenAiSettings};
use crate::llm::scripted::{Script, ScriptedModel};
use crate::llm::{ChatModel, LlmError};
use crate::mcp::{McpClient, McpOptions};
use crate::message::Message;
use crate::monitor::Monitor;
use crate::prompt::{PromptError, PromptSet};
use crate::state::{AgentState, ConversationPool, HumanConfig, LlmSettings};
use crate::sync::{Member, SyncCore, SyncError};
use actix::prelude::*;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Sender id of goals given on the command line.
pub const OPERATOR: &str = "operator";

#[derive(Debug, thiserror::Error)]
pub enum SystemError {
    #[error(transparent)]
    Prompt(#[from] PromptError),
    #[error("agent `{agent}`: {source}")]
    Llm { agent: AgentId, source: LlmError },
    #[error("the team has no agent with the task_manager skill to give the goal to")]
    NoManager,
    #[error("there is no manager `{0}` in the team")]
    UnknownManager(AgentId),
    #[error("the goal was refused: {0}")]
    Refused(#[from] SyncError),
    #[error("the team is not running: {0}")]
    Mailbox(#[from] MailboxError),
}

/// A running team.
pub struct Team {
    pub monitor: Monitor,
    pub sync: Addr<SyncStateActor>,
    pub dispatcher: Addr<Dispatcher>,
    pub agents: BTreeMap<AgentId, Addr<AgentActor>>,
    pub base_task: TaskId,
    pub managers: Vec<AgentId>,
    /// The human agents, in config order.
    pub humans: Vec<AgentId>,
    /// The team's MCP client; `shutdown` stops every server process it started.
    pub mcp: Option<Arc<McpClient>>,
}

impl Team {
    /// Stops what the team started outside this process (MCP server children).
    pub async fn shutdown(&self) {
        if let Some(mcp) = &self.mcp {
            mcp.shutdown().await;
        }
    }

    /// Gives the operator's goal to a manager (the first one by default) in the base task.
    pub async fn submit_goal(
        &self,
        manager: Option<&AgentId>,
        goal: &str,
    ) -> Result<(), SystemError> {
        let to = match manager {
            Some(m) if self.managers.contains(m) => m.clone(),
            Some(m) => return Err(SystemError::UnknownManager(m.clone())),
            None => self
                .managers
                .first()
                .cloned()
                .ok_or(SystemError::NoManager)?,
        };
        let m = Message::notice(
            self.base_task.clone(),
            AgentId::from(OPERATOR),
            vec![to],
            StageRef::NoRelative,
            goal.to_owned(),
        );
        self.sync.send(SubmitMessage(m)).await??;
        Ok(())
    }
}

/// What the runtime takes from the process around it, handed in at the edge so nothing deeper
/// reads the environment: variables (the API keys the config names) and the `cohort` binary
/// (which runs the bundled MCP servers).
pub struct Host<'a> {
    pub vars: &'a dyn Fn(&str) -> Option<String>,
    pub cohort_exe: PathBuf,
}

impl<'a> Host<'a> {
    pub fn new(vars: &'a dyn Fn(&str) -> Option<String>, cohort_exe: impl Into<PathBuf>) -> Self {
        Host {
            vars,
            cohort_exe: cohort_exe.into(),
        }
    }
}

/// Starts a team. Must run inside an actix system.
pub fn start_team(cfg: &TeamConfig, host: &Host) -> Result<Team, SystemError> {
    let env = host.vars;
    let prompts = Arc::new(match &cfg.prompts_dir {
        Some(dir) => PromptSet::load(dir, cfg.language)?,
        None => PromptSet::builtin(cfg.language),
    });
    let monitor = Monitor::new(4096);
    let managers: Vec<AgentId> = cfg.managers().map(|a| a.id.clone()).collect();
    let humans: Vec<AgentId> = cfg.humans.iter().map(|h| h.id.clone()).collect();
    let roster = cfg
        .agents
        .iter()
        .map(|a| Member {
            id: a.id.clone(),
            role: a.role.clone(),
        })
        .chain(cfg.humans.iter().map(|h| Member {
            id: h.id.clone(),
            role: h.role.clone(),
        }))
        .collect();
    let core = SyncCore::new(roster, &managers, &humans);
    let base_task = core.base_task().clone();

    let mut scripts: HashMap<PathBuf, Arc<ScriptedModel>> = HashMap::new();
    let mut models = Vec::new();
    for a in &cfg.agents {
        let model: Arc<dyn ChatModel> = match &a.llm {
            LlmConfig::Scripted { script } => match scripts.get(script) {
                Some(m) => m.clone(),
                None => {
                    let s = Script::load(script).map_err(|source| SystemError::Llm {
                        agent: a.id.clone(),
                        source,
                    })?;
                    let m = ScriptedModel::new(s);
                    scripts.insert(script.clone(), m.clone());
                    m
                }
            },
            LlmConfig::OpenAi {
                base_url,
                model,
                api_key_env,
                base_url_env,
                model_env,
                temperature,
                max_tokens,
                timeout,
                max_retries,
            } => {
                let base_url = base_url_env
                    .as_deref()
                    .and_then(env)
                    .unwrap_or_else(|| base_url.clone());
                let model = model_env
                    .as_deref()
                    .and_then(env)
                    .unwrap_or_else(|| model.clone());
                if model.trim().is_empty() {
                    return Err(SystemError::Llm {
                        agent: a.id.clone(),
                        source: LlmError::MissingModel(model_env.clone().unwrap_or_default()),
                    });
                }
                let api_key = match api_key_env {
                    Some(var) => Some(env(var).ok_or_else(|| SystemError::Llm {
                        agent: a.id.clone(),
                        source: LlmError::MissingApiKey(var.clone()),
                    })?),
                    None => None,
                };
                let settings = OpenAiSettings {
                    base_url,
                    model,
                    api_key,
                    temperature: *temperature,
                    max_tokens: *max_tokens,
                    request_timeout: *timeout,
                    max_retries: *max_retries,
                    backoff_base: Duration::from_millis(500),
                    backoff_max: Duration::from_secs(30),
                };
                Arc::new(
                    OpenAiModel::new(settings).map_err(|source| SystemError::Llm {
                        agent: a.id.clone(),
                        source,
                    })?,
                )
            }
        };
        models.push(model);
    }

    let dispatcher = Dispatcher::default().start();
    let sync = SyncStateActor::new(core, dispatcher.clone(), monitor.clone()).start();
    let tools = AgentTools {
        descriptions: Arc::new(
            cfg.servers
                .iter()
                .map(|s| (s.name.clone(), s.description.clone()))
                .collect(),
        ),
        mcp: (!cfg.servers.is_empty()).then(|| {
            McpClient::new(
                cfg.servers.clone(),
                McpOptions::new(host.cohort_exe.clone(), host.vars),
            )
        }),
    };
    let mut agents = BTreeMap::new();
    for (a, llm) in cfg.agents.iter().zip(models) {
        let mut state = AgentState::new(
            a.id.clone(),
            a.name.clone(),
            a.role.clone(),
            a.profile.clone(),
        );
        state.skills = a.skills.clone();
        state.tools = a.tools.clone();
        state.llm_config = Some(match &a.llm {
            LlmConfig::Scripted { script } => LlmSettings {
                provider: "scripted".into(),
                model: script.display().to_string(),
                base_url: None,
            },
            LlmConfig::OpenAi {
                base_url, model, ..
            } => LlmSettings {
                provider: "openai".into(),
                model: model.clone(),
                base_url: Some(base_url.clone()),
            },
        });
        let addr = AgentActor::new(
            state,
            Some(llm),
            prompts.clone(),
            tools.clone(),
            sync.clone(),
            monitor.clone(),
        )
        .start();
        dispatcher.do_send(Register(a.id.clone(), addr.clone().recipient()));
        agents.insert(a.id.clone(), addr);
    }
    // People are agents too: same actor, a human_config and a conversation pool, no LLM.
    for h in &cfg.humans {
        let mut state = AgentState::new(
            h.id.clone(),
            h.name.clone(),
            h.role.clone(),
            h.profile.clone(),
        );
        state.human_config = Some(HumanConfig {
            display_name: h.name.clone(),
        });
        state.conversation_pool = Some(ConversationPool::default());
        let addr = AgentActor::new(
            state,
            None,
            prompts.clone(),
            AgentTools::default(),
            sync.clone(),
            monitor.clone(),
        )
        .start();
        dispatcher.do_send(Register(h.id.clone(), addr.clone().recipient()));
        agents.insert(h.id.clone(), addr);
    }
    Ok(Team {
        monitor,
        sync,
        dispatcher,
        agents,
        base_task,
        managers,
        humans,
        mcp: tools.mcp,
    })
}
