//! The AgentFactory: the one place agents are created, from the team config at start-up and
//! from a template when a manager asks (init_new_agent). It builds the agent's state, publishes
//! it, starts its actor on a worker thread and registers it with the dispatcher.

use super::agent::{AgentActor, AgentTools, Outlet, SyncLink};
use super::dispatcher::{Controls, Dispatcher, Register, RegisterControl};
use super::sync_state::SyncStateActor;
use crate::monitor::Monitor;
use actix::prelude::*;
use cohort_core::config::{AgentTemplate, LlmConfig};
use cohort_core::event::Change;
use cohort_core::ids::AgentId;
use cohort_core::prompt::PromptSet;
use cohort_core::state::{Agent, AgentSettings, AgentState, LlmSettings, Skill};
use cohort_core::team::Member;
use cohort_llm::ChatModel;
use cohort_llm::LlmError;
use cohort_llm::breaker::Breaker;
use cohort_llm::limit::Limited;
use cohort_llm::openai::{OpenAiModel, OpenAiSettings};
use cohort_llm::priced::Priced;
use cohort_llm::recorded::{CallLog, Recorded};
use cohort_llm::scripted::{Script, ScriptedModel};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Each agent template by name, with the model its agents use.
pub type Templates = HashMap<String, (AgentTemplate, Arc<dyn ChatModel>)>;

#[derive(Clone)]
pub struct AgentFactory {
    /// What every agent is given.
    pub kit: AgentKit,
    pub monitor: Monitor,
    pub dispatcher: Addr<Dispatcher>,
    /// Each template with its model, built at start-up so a missing API key is found then,
    /// not when a manager first hires.
    pub templates: Arc<Templates>,
    /// The threads agents run on, one per core; agents are placed on them in turn.
    pub workers: Arc<Workers>,
}

/// What every agent of the team is given besides its own state: its prompts and tools, and
/// the team file's settings, from which each agent's [`AgentSettings`] are made when its actor
/// is (a stored state carries none). A node that runs agents for the team's node builds the
/// same from the same file.
#[derive(Clone)]
pub struct AgentKit {
    pub prompts: Arc<PromptSet>,
    pub tools: AgentTools,
    /// The team's settings (`retention.step_chars`, `step_limits:`, `repairs:`, `waits:` with
    /// the team's humans, `tool_approval:`, the base task, the team's texts), which an agent
    /// follows unless its own entry in the team file says otherwise.
    pub settings: AgentSettings,
    /// Each configured agent's `tool_approval` (others, hired ones, get the team's).
    pub tool_approvals: Arc<HashMap<AgentId, cohort_core::policy::ApprovalPolicy>>,
    /// The agents that set their own `parallel_steps`.
    pub parallel_steps: Arc<HashMap<AgentId, usize>>,
    /// The steps the team's agents may still start, shared by all of them.
    pub steps: super::StepAllowance,
    /// The team's named models (`models:`), which a message may choose.
    pub named_models: super::agent::NamedModels,
    /// The names each configured agent may be given (its `models:`).
    pub agent_models: Arc<HashMap<AgentId, Vec<String>>>,
    /// In a replay, the record whose order each agent takes its messages and starts its
    /// steps in (see `agent/replay_turns.rs`).
    pub replay: Option<Arc<cohort_llm::replay::Record>>,
}

impl AgentKit {
    /// `state` with its settings from the team file, `llm` its model (none for a person).
    /// A state read back from a store is prepared before anything else is done with it, so
    /// that it already follows the team file's settings.
    pub fn prepare(&self, mut state: AgentState, llm: Option<&Arc<dyn ChatModel>>) -> Agent {
        // The team file says which named models a message may choose for the agent (part of
        // its state: readers show them).
        let models = self.agent_models.get(&state.agent_id).cloned();
        state.models = models.unwrap_or_default();
        let settings = self.settings_of(&state.agent_id, llm);
        Agent::new(state, Arc::new(settings))
    }

    /// The settings of agent `id`, whose model is `llm` (none for a person): the team's, with
    /// its own `parallel_steps` and `tool_approval`.
    fn settings_of(&self, id: &AgentId, llm: Option<&Arc<dyn ChatModel>>) -> AgentSettings {
        let mut settings = self.settings.clone();
        if let Some(n) = self.parallel_steps.get(id) {
            settings.step_limits.parallel_steps = *n;
        }
        if let Some(policy) = self.tool_approvals.get(id) {
            settings.tool_approval = *policy;
        }
        // A call that may wait for a person (for approval, or for its arguments where that is
        // asked for outright) must be a step of its own, which the native loop (many calls
        // inside one step) cannot give: such an agent calls tools through the
        // instruction_generation → tool → tool_decision chain.
        let policy = settings.tool_approval;
        let may_wait = policy.auto_run_up_to != Some(cohort_core::policy::Risk::High)
            || policy.ask_for_params == Some(true);
        settings.native_tools = llm.is_some_and(|m| m.native_tools()) && !may_wait;
        settings
    }

    /// The same kit, its agents taking their messages and starting their steps in `record`'s
    /// order (a replay), or as they come (None).
    pub fn replaying(self, record: Option<Arc<cohort_llm::replay::Record>>) -> Self {
        AgentKit {
            replay: record,
            ..self
        }
    }

    /// The actor of `agent` (prepared), handing over through `sync` and publishing to
    /// `outlet`; it gets the team's tools if it has a model (people never call tools
    /// themselves).
    pub fn actor(
        &self,
        agent: Agent,
        llm: Option<Arc<dyn ChatModel>>,
        sync: SyncLink,
        outlet: Arc<dyn Outlet>,
    ) -> AgentActor {
        let tools = if llm.is_some() {
            self.tools.clone()
        } else {
            AgentTools::default()
        };
        AgentActor::new(agent, llm, self.prompts.clone(), tools, sync, outlet)
            .with_allowance(self.steps.clone())
            .with_named_models(self.named_models.clone())
            .with_replay(self.replay.clone())
    }
}

/// The agents' threads: one actix arbiter per core, so a team uses every core. They stop when
/// the last handle to them goes (SyncState's supervisor and the team's factory are done), or
/// when the team is stopped ([`Workers::stop`]).
pub struct Workers {
    handles: Vec<ArbiterHandle>,
    /// Taken by [`Workers::stop`], which joins their threads.
    arbiters: std::sync::Mutex<Vec<Arbiter>>,
    next: AtomicUsize,
}

impl Workers {
    /// One thread per core. Must run inside an actix system.
    pub fn start() -> Self {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        let arbiters: Vec<Arbiter> = (0..n).map(|_| Arbiter::new()).collect();
        Workers {
            handles: arbiters.iter().map(Arbiter::handle).collect(),
            arbiters: std::sync::Mutex::new(arbiters),
            next: AtomicUsize::new(0),
        }
    }

    /// The thread the next agent runs on.
    pub fn pick(&self) -> ArbiterHandle {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.handles.len();
        self.handles[i].clone()
    }

    /// Stops every agent: each thread ends its event loop (the handler it is in finishes;
    /// its actors and the futures they spawned are dropped) and is joined, so no agent's code
    /// runs once this returns.
    pub async fn stop(&self) {
        let arbiters =
            std::mem::take(&mut *self.arbiters.lock().unwrap_or_else(|e| e.into_inner()));
        for a in &arbiters {
            a.stop();
        }
        // Joining blocks: off the caller's thread, which may be the one SyncState runs on; and
        // not for ever (a handler that never ends is a bug, not a reason not to stop).
        let joined = tokio::task::spawn_blocking(move || {
            for a in arbiters {
                let _ = a.join();
            }
        });
        if tokio::time::timeout(Duration::from_secs(10), joined)
            .await
            .is_err()
        {
            tracing::warn!("an agent's thread did not end within 10 s; stopping without it");
        }
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for a in self
            .arbiters
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            a.stop();
        }
    }
}

impl AgentFactory {
    /// `state` with the settings the team file gives it (see [`AgentKit::prepare`]).
    pub fn prepare(&self, state: AgentState, llm: Option<&Arc<dyn ChatModel>>) -> Agent {
        self.kit.prepare(state, llm)
    }

    /// Starts an agent actor for `state` and registers it with the dispatcher. Registration
    /// is queued before any message SyncState routes afterwards, so the new agent can be
    /// allocated at once.
    pub fn spawn(
        &self,
        state: AgentState,
        llm: Option<Arc<dyn ChatModel>>,
        sync: Addr<SyncStateActor>,
    ) -> Addr<AgentActor> {
        let agent = self.prepare(state, llm.as_ref());
        self.start(agent, llm, sync, true)
    }

    /// Starts an agent carried over from a store (prepared, see [`AgentFactory::prepare`]):
    /// readers already have it, so unless `announce` (it changed since) it is not published
    /// as added (its own changes since, if any, go out when it starts).
    pub fn spawn_restored(
        &self,
        agent: Agent,
        llm: Option<Arc<dyn ChatModel>>,
        sync: Addr<SyncStateActor>,
        announce: bool,
    ) -> Addr<AgentActor> {
        self.start(agent, llm, sync, announce)
    }

    fn start(
        &self,
        mut agent: Agent,
        llm: Option<Arc<dyn ChatModel>>,
        sync: Addr<SyncStateActor>,
        announce: bool,
    ) -> Addr<AgentActor> {
        let id = agent.agent_id.clone();
        if announce {
            // Published before it starts, so whoever learns of the agent next (an ask_info
            // answer, a client) finds it.
            agent.refresh_working_state();
            agent.take_changes();
            self.monitor.publish(vec![agent.added()]);
        }
        let outlet: Arc<dyn Outlet> = Arc::new(self.monitor.clone());
        let actor = self.kit.actor(agent, llm, SyncLink::to(&sync), outlet);
        let addr = AgentActor::start_in_arbiter(&self.workers.pick(), move |_| actor);
        self.dispatcher
            .do_send(RegisterControl(id.clone(), Controls::of(&addr)));
        self.dispatcher
            .do_send(Register(id, addr.clone().recipient()));
        addr
    }

    /// Starts an agent a manager created from a template (already on SyncState's roster).
    /// It is not published: the change that adds it is returned, for SyncState to store in
    /// the same commit as the hire (a restart then finds both or neither). The new agent
    /// publishes nothing before that: it has no work until a message reaches it, and messages
    /// are routed only after the commit.
    pub fn spawn_member(
        &self,
        member: &Member,
        sync: Addr<SyncStateActor>,
    ) -> Option<(Addr<AgentActor>, Change)> {
        let (template, llm) = self.templates.get(member.template.as_deref()?)?;
        // The member already carries the template's role, profile, skills and tools.
        let mut state = llm_agent_state(
            member.id.clone(),
            member.name.clone(),
            member.role.clone(),
            member.profile.clone(),
            member.skills.clone(),
            member.tools.clone(),
            &template.llm,
        );
        state.template = Some(template.name.clone());
        state.refresh_working_state();
        state.take_changes();
        let added = state.added();
        let agent = self.prepare(state, Some(llm));
        Some((self.start(agent, Some(llm.clone()), sync, false), added))
    }
}

/// The state of a new LLM agent.
pub fn llm_agent_state(
    id: AgentId,
    name: String,
    role: String,
    profile: String,
    skills: Vec<Skill>,
    tools: Vec<String>,
    llm: &LlmConfig,
) -> AgentState {
    let mut state = AgentState::new(id, name, role, profile);
    state.skills = skills;
    state.tools = tools;
    state.llm_config = Some(llm_settings(llm));
    state
}

/// What an agent's state shows of its model.
pub fn llm_settings(llm: &LlmConfig) -> LlmSettings {
    match llm {
        LlmConfig::Scripted { script, .. } => LlmSettings {
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
    }
}

/// Builds chat models, sharing one scripted model per script file (its cursors are shared by
/// every agent that uses the script).
pub struct ModelBuilder<'a> {
    env: &'a dyn Fn(&str) -> Option<String>,
    /// How long a call waits for an endpoint that stopped answering (`waits.model_secs`).
    patience: Duration,
    /// One model per endpoint (a script file, or a base URL and model name), with its cap on
    /// calls in flight, shared by every agent that uses the endpoint.
    endpoints: HashMap<String, Arc<dyn ChatModel>>,
    /// Where every model's calls are kept for people to read.
    pub calls: Arc<CallLog>,
    /// A recorded run that answers every model's calls instead (see `llm::replay`).
    pub replay: Option<Arc<cohort_llm::replay::Record>>,
}

impl<'a> ModelBuilder<'a> {
    pub fn new(env: &'a dyn Fn(&str) -> Option<String>, patience: Duration) -> Self {
        ModelBuilder {
            env,
            patience,
            endpoints: HashMap::new(),
            calls: Arc::default(),
            replay: None,
        }
    }

    /// The model for `llm`: the endpoint's shared one if another agent uses the same settings.
    pub fn build(&mut self, llm: &LlmConfig) -> Result<Arc<dyn ChatModel>, LlmError> {
        // The whole configuration names the endpoint (two agents with different temperatures
        // get two clients), and its Debug form is a stable key for it.
        let key = format!("{llm:?}");
        if let Some(m) = self.endpoints.get(&key) {
            return Ok(m.clone());
        }
        // Recorded inside the cap: a call's time is the endpoint's, not its wait for a turn.
        // The breaker outside it: a call waiting for a dead endpoint holds no place in the cap.
        let mut endpoint = self.connect(llm)?;
        if let Some(record) = &self.replay {
            endpoint = cohort_llm::replay::Replayed::new(endpoint, record.clone());
        }
        let recorded: Arc<dyn ChatModel> = Recorded::new(
            Priced::wrap(endpoint, llm.price()),
            self.calls.clone(),
            &llm_settings(llm).label(),
        );
        // A replay's answers wait for their turns: under a cap, one waiting would hold a place
        // that the ask it waits for may need.
        let capped = match self.replay {
            Some(_) => recorded,
            None => Limited::new(recorded, llm.max_in_flight()),
        };
        let model: Arc<dyn ChatModel> = Breaker::new(capped, self.patience);
        self.endpoints.insert(key, model.clone());
        Ok(model)
    }

    fn connect(&mut self, llm: &LlmConfig) -> Result<Arc<dyn ChatModel>, LlmError> {
        let env = self.env;
        Ok(match llm {
            LlmConfig::Scripted { script, .. } => {
                ScriptedModel::new(Script::load(script).map_err(LlmError::Script)?)
            }
            LlmConfig::OpenAi {
                base_url,
                model,
                api_key_env,
                model_env,
                temperature,
                max_tokens,
                timeout,
                max_retries,
                structured_output,
                context_window,
                native_tools,
                multimodal,
                stream,
                cache,
                ..
            } => {
                // `base_url_env` and `model_env` were read at start (`TeamConfig::with_env`).
                if model.trim().is_empty() {
                    return Err(LlmError::MissingModel(
                        model_env.clone().unwrap_or_default(),
                    ));
                }
                let api_key = match api_key_env {
                    // A replay asks no endpoint: it needs no key.
                    Some(_) if self.replay.is_some() => None,
                    Some(var) => {
                        Some(env(var).ok_or_else(|| LlmError::MissingApiKey(var.clone()))?)
                    }
                    None => None,
                };
                Arc::new(OpenAiModel::new(OpenAiSettings {
                    base_url: base_url.clone(),
                    model: model.clone(),
                    api_key,
                    temperature: *temperature,
                    max_tokens: *max_tokens,
                    request_timeout: *timeout,
                    max_retries: *max_retries,
                    backoff_base: Duration::from_millis(500),
                    backoff_max: Duration::from_secs(30),
                    structured_output: *structured_output,
                    context_window: *context_window,
                    native_tools: *native_tools,
                    multimodal: *multimodal,
                    stream: *stream,
                    prompt_cache_key: cache.key,
                    cache_slots: cache.slots,
                })?)
            }
        })
    }
}
