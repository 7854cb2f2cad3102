//! The System: turns a validated `TeamConfig` into running actors (dispatcher, SyncState with
//! the base task, one actor per agent, the LLM clients) and hands back a `Team` handle.

use super::agent::{AgentActor, AgentTools};
use super::dispatcher::{Dispatcher, Route};
use super::factory::{
    AgentFactory, AgentKit, ModelBuilder, Templates, Workers, llm_agent_state, llm_settings,
};
use super::supervisor::{Supervisor, Wire};
use super::sync_state::{SubmitMessage, SyncStateActor};
use crate::monitor::Monitor;
use actix::prelude::*;
use cohort_core::config::TeamConfig;
use cohort_core::event::trace_context::TraceParent;
use cohort_core::ids::{AgentId, StageRef, TaskId};
use cohort_core::message::Message;
use cohort_core::prompt::{PromptError, PromptSet};
use cohort_core::state::{Agent, AgentSettings, AgentState, ConversationPool, HumanConfig, Skill};
use cohort_core::state::{Executor, StepExecutionState, TokenUsage};
use cohort_core::step::resume_after_restart;
use cohort_core::team::{Catalog, Member, SyncCore, SyncError, TaskBudget};
use cohort_llm::LlmError;
use cohort_llm::{Answered, ChatModel};
use cohort_mcp::{McpClient, McpOptions};
use cohort_store::{Loaded, Store};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

pub use cohort_core::message::OPERATOR;

#[derive(Debug, thiserror::Error)]
pub enum SystemError {
    #[error(transparent)]
    Prompt(#[from] PromptError),
    #[error("{agent}: {source}")]
    Llm { agent: String, source: LlmError },
    #[error("the team has no agent with the task_manager skill to give the goal to")]
    NoManager,
    #[error("there is no manager `{0}` in the team")]
    UnknownManager(AgentId),
    #[error("the goal was refused: {0}")]
    Refused(#[from] SyncError),
    #[error("the team is not running: {0}")]
    Mailbox(#[from] MailboxError),
    #[error("the stored team cannot be carried on: {0}")]
    Resume(String),
}

/// A running team.
pub struct Team {
    pub monitor: Monitor,
    pub sync: Addr<SyncStateActor>,
    pub dispatcher: Addr<Dispatcher>,
    /// The configured agents and people. Agents a manager creates later are registered with
    /// the dispatcher and published to the monitor, not listed here.
    pub agents: BTreeMap<AgentId, Addr<AgentActor>>,
    pub base_task: TaskId,
    pub managers: Vec<AgentId>,
    /// The human agents, in config order.
    pub humans: Vec<AgentId>,
    /// The team's MCP client; `shutdown` stops every server process it started.
    pub mcp: Option<Arc<McpClient>>,
    /// What the team keeps in memory and the largest message it takes.
    pub retention: cohort_core::config::Retention,
    /// The newest LLM calls, as sent and answered.
    pub calls: Arc<cohort_llm::recorded::CallLog>,
    /// The steps its agents may still start (unlimited unless started with a limit).
    pub steps: super::StepAllowance,
    /// The team's own actors besides SyncState and the dispatcher, and its agents' threads:
    /// what [`Team::stop`] stops.
    workers: Arc<Workers>,
    supervisor: Addr<Supervisor>,
    watchdog: Addr<super::Watchdog>,
    /// How its agents are started (again, when one comes back from another node).
    pub factory: AgentFactory,
    /// Each agent of the team file's model.
    pub models: HashMap<AgentId, Arc<dyn ChatModel>>,
    /// The team's traces, when the environment asks for them (`crate::otel`).
    pub traces: Option<Arc<crate::otel::Traces>>,
    /// The team's language (`language:`) and its catalog of runtime texts, for what the
    /// edges (REST, the console) write to people.
    pub language: cohort_core::texts::Language,
    pub texts: Arc<cohort_core::texts::Texts>,
}

impl Team {
    /// Stops the team, in the order that loses nothing: no step starts any more, the running
    /// ones get up to `grace` to land, every actor is stopped (agents first, see
    /// [`super::stop`]), then its MCP servers, and last its journal commits what it was given
    /// (with a snapshot). A step still running when `grace` is up stays running in the store:
    /// the next start settles it as interrupted.
    pub async fn stop(&self, grace: std::time::Duration) {
        self.steps.close();
        self.wait_for_running_steps(grace).await;
        self.stop_actors().await;
        self.shutdown().await;
        self.monitor.close();
    }

    /// Lets steps in flight land (finish_task cleanup, answers on their way), so reported
    /// states are settled ones. Bounded: a real LLM step may still be running when `max` is up.
    pub async fn wait_for_running_steps(&self, max: std::time::Duration) {
        use tokio::sync::broadcast::error::RecvError;
        let until = tokio::time::Instant::now() + max;
        let mut changes = self.monitor.subscribe();
        loop {
            // Give changes already on their way through mailboxes a moment to land.
            tokio::task::yield_now().await;
            if self.monitor.read(|s| s.counters().steps_running) == 0 {
                return;
            }
            tokio::select! {
                r = changes.recv() => if matches!(r, Err(RecvError::Closed)) { return },
                _ = tokio::time::sleep_until(until) => return,
            }
        }
    }

    /// Stops every actor of the team, agents first: afterwards nothing of it changes state.
    pub async fn stop_actors(&self) {
        self.workers.stop().await;
        super::stop::stop_actor(&self.watchdog).await;
        super::stop::stop_actor(&self.supervisor).await;
        super::stop::stop_actor(&self.sync).await;
        super::stop::stop_actor(&self.dispatcher).await;
    }

    /// Stops what the team started outside this process (MCP server children), and sends
    /// the traces of what it did (waiting 5 s at most for their receiver).
    pub async fn shutdown(&self) {
        if let Some(mcp) = &self.mcp {
            mcp.shutdown().await;
        }
        if let Some(traces) = &self.traces {
            traces.finish(std::time::Duration::from_secs(5)).await;
        }
    }

    /// Gives the operator's goal to a manager (the first one by default) in the base task.
    pub async fn submit_goal(
        &self,
        manager: Option<&AgentId>,
        goal: &str,
    ) -> Result<(), SystemError> {
        self.submit_goal_traced(manager, goal, (None, Vec::new()))
            .await
    }

    /// [`submit_goal`](Self::submit_goal) within the caller's trace, when it has one, with
    /// the files given with it (kept in the store already).
    pub async fn submit_goal_traced(
        &self,
        manager: Option<&AgentId>,
        goal: &str,
        (trace, attachments): (
            Option<TraceParent>,
            Vec<cohort_core::attachment::Attachment>,
        ),
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
        let mut m = Message::notice(
            self.base_task.clone(),
            AgentId::from(OPERATOR),
            vec![to],
            StageRef::NoRelative,
            goal.to_owned(),
        );
        m.traceparent = trace;
        m.attachments = attachments;
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
    /// A recorded run whose model calls answer this team's (`cohort replay`): no model is
    /// asked, and no API key is needed.
    pub replay: Option<Arc<cohort_llm::replay::Record>>,
    /// A recorded run whose tool calls answer this team's (none: its servers are called).
    pub replay_tools: Option<Arc<cohort_mcp::replay::ToolRecord>>,
    /// The team's store as the bundled servers open it (read-only) for the files people
    /// attached: a path or a URL, handed to them in `attachment::STORE_VAR`.
    pub attachments: Option<String>,
}

impl<'a> Host<'a> {
    pub fn new(vars: &'a dyn Fn(&str) -> Option<String>, cohort_exe: impl Into<PathBuf>) -> Self {
        Host {
            vars,
            cohort_exe: cohort_exe.into(),
            replay: None,
            replay_tools: None,
            attachments: None,
        }
    }
}

/// Starts a team. Must run inside an actix system.
pub fn start_team(cfg: &TeamConfig, host: &Host) -> Result<Team, SystemError> {
    start_team_limited(cfg, host, None, super::StepAllowance::unlimited())
}

/// Starts a team (in memory, or carrying on from `stored` as [`start_team_stored`] does) whose
/// agents start no more steps, all together, than `steps` allows (`cohort run --max-steps`).
pub fn start_team_limited(
    cfg: &TeamConfig,
    host: &Host,
    stored: Option<(Arc<dyn Store>, Loaded)>,
    steps: super::StepAllowance,
) -> Result<Team, SystemError> {
    let Some((store, loaded)) = stored else {
        return start(cfg, host, Monitor::new(MONITOR_BUFFER), false, steps);
    };
    // A store that stopped before its base task was stored starts the team afresh.
    let resumed = !loaded.states.tasks.is_empty();
    let monitor = Monitor::with_store(MONITOR_BUFFER, store.clone(), loaded.states, loaded.version);
    monitor.keep_compacted(store, cfg.store);
    start(cfg, host, monitor, resumed, steps)
}

/// Starts a team that keeps its state in `store` (compacted now and then as the team file's
/// `store:` says), carrying on from what it holds (`loaded`;
/// a new team when the store is empty): tasks, stages, every agent (hired ones with their
/// templates) with its steps, queue, waits and memory. A step that was running when the
/// process stopped is settled by [`cohort_core::step::resume_after_restart`].
pub fn start_team_stored(
    cfg: &TeamConfig,
    host: &Host,
    store: Arc<dyn Store>,
    loaded: Loaded,
) -> Result<Team, SystemError> {
    start_team_limited(
        cfg,
        host,
        Some((store, loaded)),
        super::StepAllowance::unlimited(),
    )
}

/// Events a live reader may fall behind by before it is sent a snapshot instead: each holds
/// its change (a step's texts, a message) until overwritten, so the buffer is memory.
pub const MONITOR_BUFFER: usize = 8_192;

fn start(
    cfg: &TeamConfig,
    host: &Host,
    monitor: Monitor,
    resumed: bool,
    steps: super::StepAllowance,
) -> Result<Team, SystemError> {
    let cfg = &cfg.with_env(host.vars);
    monitor.hold_retired_to(cfg.retention.memory.retired_steps());
    monitor.hold_feed_to(cfg.retention.memory.feed());
    let prompts = Arc::new(cfg.prompt_set()?);
    let managers: Vec<AgentId> = cfg.managers().map(|a| a.id.clone()).collect();
    let humans: Vec<AgentId> = cfg.humans.iter().map(|h| h.id.clone()).collect();
    let (core, stored) = sync_core(cfg, &monitor, &prompts, &managers, &humans, resumed)?;
    let base_task = core.base_task().clone();

    // Every model is built before anything starts, so a missing API key stops start-up with
    // the agent (or template) that needs it.
    let mut builder = ModelBuilder::new(host.vars, cfg.waits.model);
    builder.replay = host.replay.clone();
    // A failed step's prompt and raw reply are kept in the store beside its failure.
    monitor.keep_failed_calls(builder.calls.clone(), cfg.retention.step_chars);
    // Every call whole, for replay (`retention.recorded_calls_mib`).
    monitor.record_calls(&builder.calls, cfg.retention.recorded_call_bytes);
    let (models, templates) = build_models(cfg, &mut builder)?;
    let named = named_models(cfg, &mut builder)?;
    // A model with a place of its own (a script) carries on where the stored steps left it.
    if resumed {
        carry_on(&monitor, cfg, &models, &templates);
    }

    let dispatcher = Dispatcher::new(monitor.clone()).start();
    let texts = prompts.texts().clone();
    let tools = agent_tools(cfg, host, &texts);
    let factory = AgentFactory {
        kit: agent_kit(
            cfg,
            (prompts, named),
            tools.clone(),
            base_task.clone(),
            steps.clone(),
        )
        .replaying(host.replay.clone()),
        monitor: monitor.clone(),
        dispatcher: dispatcher.clone(),
        templates: Arc::new(templates),
        workers: Arc::new(Workers::start()),
    };
    let (supervisor, sync, watchdog) = start_sync(core, &factory, cfg.waits.stall);
    let by_agent = cfg
        .agents
        .iter()
        .map(|a| a.id.clone())
        .zip(models.iter().cloned())
        .collect();
    let agents = spawn_agents(cfg, models, stored, &factory, &sync);
    route_in_flight(&monitor, &dispatcher);
    let traces = traces_of(&monitor, &builder.calls, &base_task, &cfg.name);
    Ok(Team {
        monitor,
        sync,
        dispatcher,
        agents,
        base_task,
        managers,
        humans,
        mcp: tools.mcp,
        retention: cfg.retention,
        calls: builder.calls.clone(),
        steps,
        workers: factory.workers.clone(),
        supervisor,
        watchdog,
        factory,
        models: by_agent,
        traces,
        language: cfg.language,
        texts,
    })
}

/// The team's traces, when the environment asks for them; traces that cannot be sent are
/// said, never fatal.
fn traces_of(
    monitor: &Monitor,
    calls: &Arc<cohort_llm::recorded::CallLog>,
    base: &TaskId,
    team: &str,
) -> Option<Arc<crate::otel::Traces>> {
    crate::otel::Traces::start(monitor, calls.clone(), base.clone(), team)
        .unwrap_or_else(|e| {
            tracing::warn!("no traces: {e}");
            None
        })
        .map(Arc::new)
}

/// What every agent of the team file `cfg` is given (see [`AgentKit`]).
pub fn agent_kit(
    cfg: &TeamConfig,
    (prompts, named_models): (Arc<PromptSet>, super::agent::NamedModels),
    tools: AgentTools,
    base_task: TaskId,
    steps: super::StepAllowance,
) -> AgentKit {
    let humans = cfg.humans.iter().map(|h| h.id.clone()).collect();
    let settings = AgentSettings {
        step_chars: cfg.retention.step_chars,
        private_bytes: cfg.retention.memory.private_chat(),
        step_limits: cfg.step_limits,
        tool_approval: cfg.tool_approval,
        repairs: cfg.repairs.clone(),
        wait_patience: cohort_core::state::WaitPatience {
            humans: Arc::new(humans),
            ..cfg.waits.clone()
        },
        base_task: Some(base_task),
        native_tools: false,
        // The steps and notices the runtime writes for an agent are in its team's language.
        texts: prompts.texts().clone(),
    };
    AgentKit {
        prompts,
        tools,
        settings,
        tool_approvals: Arc::new(
            cfg.agents
                .iter()
                .map(|a| (a.id.clone(), a.tool_approval))
                .collect(),
        ),
        parallel_steps: Arc::new(
            cfg.agents
                .iter()
                .filter_map(|a| Some((a.id.clone(), a.parallel_steps?)))
                .collect(),
        ),
        steps,
        named_models,
        agent_models: Arc::new(
            cfg.agents
                .iter()
                .map(|a| (a.id.clone(), a.models.clone()))
                .collect(),
        ),
        replay: None,
    }
}

/// SyncState with `core`, the supervisor that starts the agents it hires (SyncState only asks
/// it to), and the watchdog that tells it of tasks stalled for `stall`.
fn start_sync(
    core: SyncCore,
    factory: &AgentFactory,
    stall: std::time::Duration,
) -> (
    Addr<Supervisor>,
    Addr<SyncStateActor>,
    Addr<super::Watchdog>,
) {
    let supervisor = Supervisor::new(factory.clone()).start();
    let sync = SyncStateActor::new(
        core,
        factory.dispatcher.clone(),
        factory.monitor.clone(),
        Some(supervisor.clone().recipient()),
    )
    .start();
    supervisor.do_send(Wire(sync.clone()));
    let watchdog = super::Watchdog::new(factory.monitor.clone(), sync.clone(), stall).start();
    (supervisor, sync, watchdog)
}

/// SyncState's core: a new team's, or carried on from the monitor's stored tasks and stages.
/// Carrying on also gives back the stored agents, for their actors (hired ones whose template
/// the team file still has join the roster).
fn sync_core(
    cfg: &TeamConfig,
    monitor: &Monitor,
    prompts: &PromptSet,
    managers: &[AgentId],
    humans: &[AgentId],
    resumed: bool,
) -> Result<(SyncCore, BTreeMap<AgentId, AgentState>), SystemError> {
    let mut roster = roster(cfg);
    let mut stored: BTreeMap<AgentId, AgentState> = BTreeMap::new();
    let core = if resumed {
        let (tasks, stages, agents) = monitor.read(|s| {
            (
                s.tasks_in_order().into_iter().cloned().collect::<Vec<_>>(),
                s.stages.values().cloned().collect::<Vec<_>>(),
                s.agents.clone(),
            )
        });
        // Hired agents whose template the team file still has (the others do not run).
        let known = |t: &Option<String>| {
            t.as_ref()
                .is_some_and(|t| cfg.templates.iter().any(|x| &x.name == t))
        };
        for a in agents.values().filter(|a| known(&a.template)) {
            roster.push(Member {
                id: a.agent_id.clone(),
                name: a.name.clone(),
                role: a.role.clone(),
                profile: a.profile.clone(),
                skills: a.skills.clone(),
                tools: a.tools.clone(),
                human: false,
                operator: false,
                template: a.template.clone(),
            });
        }
        stored = agents;
        let last_message = monitor.read(|s| s.deliveries.last_no());
        SyncCore::restore(tasks, stages, roster)
            .ok_or_else(|| SystemError::Resume("the stored data has no base task".into()))?
            .numbering_from(last_message)
            .welcome(&[managers, humans].concat())
    } else {
        SyncCore::new(roster, managers, humans)
    };
    let core = core
        .with_catalog(catalog(cfg, prompts))
        .with_texts(prompts.texts().clone())
        .with_retention(cfg.retention)
        .with_task_limits(cfg.task_limits)
        .with_repairs(cfg.repairs.clone())
        .with_budget(TaskBudget {
            tokens: cfg.step_limits.task_tokens,
            steps: cfg.step_limits.task_steps,
        });
    Ok((core, stored))
}

/// The team's members as the team file lists them: its agents, then its people.
fn roster(cfg: &TeamConfig) -> Vec<Member> {
    cfg.agents
        .iter()
        .map(|a| Member {
            id: a.id.clone(),
            name: a.name.clone(),
            role: a.role.clone(),
            profile: a.profile.clone(),
            skills: a.skills.clone(),
            tools: a.tools.clone(),
            human: false,
            operator: false,
            template: None,
        })
        .chain(cfg.humans.iter().map(|h| Member {
            name: h.name.clone(),
            profile: h.profile.clone(),
            human: true,
            operator: h.access == cohort_core::config::Access::Operator,
            ..Member::new(h.id.clone(), h.role.clone())
        }))
        .collect()
}

/// What a manager may hire from and give: templates, skills, tools, how many in all.
fn catalog(cfg: &TeamConfig, prompts: &PromptSet) -> Catalog {
    Catalog {
        templates: cfg.templates.clone(),
        skills: Skill::ALL
            .iter()
            .map(|s| (*s, prompts.skill(*s).description.clone()))
            .collect(),
        tools: cfg
            .servers
            .iter()
            .map(|s| (s.name.clone(), s.description.clone()))
            .collect(),
        max_hired: cfg.max_hired_agents,
    }
}

/// Each configured agent's model (in the team file's order) and each template's.
pub fn build_models(
    cfg: &TeamConfig,
    builder: &mut ModelBuilder,
) -> Result<(Vec<Arc<dyn ChatModel>>, Templates), SystemError> {
    let models = cfg
        .agents
        .iter()
        .map(|a| {
            builder.build(&a.llm).map_err(|source| SystemError::Llm {
                agent: format!("agent `{}`", a.id),
                source,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut templates = HashMap::new();
    for t in &cfg.templates {
        let model = builder.build(&t.llm).map_err(|source| SystemError::Llm {
            agent: format!("agent template `{}`", t.name),
            source,
        })?;
        templates.insert(t.name.clone(), (t.clone(), model));
    }
    Ok((models, templates))
}

/// The team's named models (`models:`), built before anything starts as the agents' are.
pub fn named_models(
    cfg: &TeamConfig,
    builder: &mut ModelBuilder,
) -> Result<super::agent::NamedModels, SystemError> {
    let mut named = HashMap::new();
    for (name, llm) in &cfg.models {
        let model = builder.build(llm).map_err(|source| SystemError::Llm {
            agent: format!("model `{name}` of the team's models"),
            source,
        })?;
        named.insert(name.clone(), model);
    }
    Ok(Arc::new(named))
}

/// The tools every agent may use: the team's MCP servers, and who approves a call.
/// `texts` are the team's: why a tool is as risky as it is is said in its language.
pub fn agent_tools(
    cfg: &TeamConfig,
    host: &Host,
    texts: &Arc<cohort_core::texts::Texts>,
) -> AgentTools {
    let tools = AgentTools {
        descriptions: Arc::new(
            cfg.servers
                .iter()
                .map(|s| (s.name.clone(), s.description.clone()))
                .collect(),
        ),
        // A server's question during a call goes to the agent whose step makes it.
        mcp: (!cfg.servers.is_empty()).then(|| {
            McpClient::with_elicitation(
                cfg.servers.clone(),
                McpOptions {
                    replay: host.replay_tools.clone(),
                    builtin_env: host
                        .attachments
                        .iter()
                        .map(|s| (cohort_core::attachment::STORE_VAR.to_owned(), s.clone()))
                        .collect(),
                    texts: texts.clone(),
                    ..McpOptions::new(host.cohort_exe.clone(), host.vars)
                        .passing_env_of(&cfg.servers, host.vars)
                },
                cohort_mcp::elicit::Elicitation::PerCall,
            )
        }),
        approvers: cfg
            .humans
            .iter()
            .filter(|h| h.access == cohort_core::config::Access::Operator)
            .map(|h| h.id.clone())
            .collect(),
    };
    if !cfg.humans.is_empty() && tools.approvers.is_empty() {
        tracing::warn!(
            "the team's people are all members (access: member, the default): none sees the \
             whole team or may approve a tool call; give the operator `access: operator`"
        );
    }
    tools
}

/// Starts the actor of every agent and person of the team file (carried on from its stored
/// state when there is one), then of the hired agents stored; returns the team file's ones.
fn spawn_agents(
    cfg: &TeamConfig,
    models: Vec<Arc<dyn ChatModel>>,
    mut stored: BTreeMap<AgentId, AgentState>,
    factory: &AgentFactory,
    sync: &Addr<SyncStateActor>,
) -> BTreeMap<AgentId, Addr<AgentActor>> {
    let mut agents = BTreeMap::new();
    for (a, llm) in cfg.agents.iter().zip(models) {
        let addr = match stored.remove(&a.id) {
            Some(state) => {
                let mut agent = factory.prepare(state, Some(&llm));
                resume_after_restart(&mut agent);
                // The team file is the truth for who an agent is: an edit since the last run
                // (a skill or tool added, a new profile or model) applies, and is announced.
                let edited = follow_team_file(
                    &mut agent,
                    &a.name,
                    &a.role,
                    &a.profile,
                    Some((a.skills.as_slice(), a.tools.as_slice(), &a.llm)),
                );
                factory.spawn_restored(agent, Some(llm), sync.clone(), edited)
            }
            None => {
                let state = llm_agent_state(
                    a.id.clone(),
                    a.name.clone(),
                    a.role.clone(),
                    a.profile.clone(),
                    a.skills.clone(),
                    a.tools.clone(),
                    &a.llm,
                );
                factory.spawn(state, Some(llm), sync.clone())
            }
        };
        agents.insert(a.id.clone(), addr);
    }
    // People are agents too: same actor, a human_config and a conversation pool, no LLM.
    for h in &cfg.humans {
        let addr = match stored.remove(&h.id) {
            Some(state) => {
                let mut person = factory.prepare(state, None);
                let edited = follow_team_file(&mut person, &h.name, &h.role, &h.profile, None);
                factory.spawn_restored(person, None, sync.clone(), edited)
            }
            None => factory.spawn(person_state(h), None, sync.clone()),
        };
        agents.insert(h.id.clone(), addr);
    }
    spawn_hired(stored, factory, sync);
    agents
}

/// A person of the team file, new.
fn person_state(h: &cohort_core::config::HumanEntry) -> AgentState {
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
    state
}

/// Agents managers created: back from their templates. Stored agents the team file no longer
/// has (`stored` holds only those by now) stay in the record but do not run.
fn spawn_hired(
    stored: BTreeMap<AgentId, AgentState>,
    factory: &AgentFactory,
    sync: &Addr<SyncStateActor>,
) {
    for (id, state) in stored {
        let Some((_, llm)) = state
            .template
            .as_ref()
            .and_then(|t| factory.templates.get(t))
        else {
            tracing::warn!(
                "agent `{id}` is in the stored data but not in the team file: not started"
            );
            continue;
        };
        let mut agent = factory.prepare(state, Some(llm));
        resume_after_restart(&mut agent);
        factory.spawn_restored(agent, Some(llm.clone()), sync.clone(), false);
    }
}

/// Messages routed before the process stopped that some receivers had not taken: to them
/// again, before anything new (every agent is registered by now).
fn route_in_flight(monitor: &Monitor, dispatcher: &Addr<Dispatcher>) {
    for f in monitor.read(|s| s.deliveries.in_flight().collect::<Vec<_>>()) {
        dispatcher.do_send(Route {
            message_no: f.message_no,
            message: f.message,
            to: Some(f.pending),
        });
    }
}

/// Gives a stored agent what the team file says of it now; true if anything changed.
fn follow_team_file(
    state: &mut AgentState,
    name: &str,
    role: &str,
    profile: &str,
    llm_agent: Option<(&[Skill], &[String], &cohort_core::config::LlmConfig)>,
) -> bool {
    fn set<T: PartialEq>(field: &mut T, value: T, changed: &mut bool) {
        if *field != value {
            *field = value;
            *changed = true;
        }
    }
    let mut changed = false;
    set(&mut state.name, name.to_owned(), &mut changed);
    set(&mut state.role, role.to_owned(), &mut changed);
    set(&mut state.profile, profile.to_owned(), &mut changed);
    if let Some((skills, tools, llm)) = llm_agent {
        set(&mut state.skills, skills.to_vec(), &mut changed);
        set(&mut state.tools, tools.to_vec(), &mut changed);
        set(&mut state.llm_config, Some(llm_settings(llm)), &mut changed);
    }
    changed
}

/// Tells each model the calls its agents' stored steps show were answered.
fn carry_on(
    monitor: &Monitor,
    cfg: &TeamConfig,
    models: &[Arc<dyn ChatModel>],
    templates: &Templates,
) {
    let answered: Vec<Answered> = monitor.read(|s| {
        s.steps()
            .flat_map(|st| {
                let template = s.agents.get(&st.agent_id).map(|a| a.template.clone());
                template.map(|t| answered_in(st, t)).unwrap_or_default()
            })
            .collect()
    });
    for (a, model) in cfg.agents.iter().zip(models) {
        let own: Vec<Answered> = answered
            .iter()
            .filter(|x| x.agent_id == a.id)
            .cloned()
            .collect();
        model.carry_on(&own);
    }
    for (name, (_, model)) in templates {
        let hired: Vec<Answered> = answered
            .iter()
            .filter(|x| x.template.as_deref() == Some(name.as_str()))
            .filter(|x| !cfg.agents.iter().any(|a| a.id == x.agent_id))
            .cloned()
            .collect();
        model.carry_on(&hired);
    }
}

/// The model calls step `st` shows were answered (its agent made from `template`, if any):
/// the tries it was asked again after, and the last one unless the step was still waiting for
/// it. None for a step that is not a skill's or made no call.
pub fn answered_in(st: &cohort_core::state::StepState, template: Option<String>) -> Vec<Answered> {
    if !matches!(st.executor, Executor::Skill(_)) || st.token_usage == TokenUsage::default() {
        return Vec::new();
    }
    let tries = st.execute_result.as_ref().map_or(0, |r| r.reasked.len());
    let last = usize::from(st.execution_state != StepExecutionState::Running);
    let one = Answered {
        agent_id: st.agent_id.clone(),
        template,
        skill: st.executor.name().to_owned(),
        step_text: st.asks(),
    };
    vec![one; tries + last]
}

/// An agent that comes to run on this node from the record (moved from another node, or its
/// node gone): a step left running is settled as a restart settles it, and `llm` carries on
/// from the calls its steps show answered.
pub fn resume_moved(agent: &mut Agent, llm: &Arc<dyn ChatModel>) {
    resume_after_restart(agent);
    let template = agent.template.clone();
    let answered: Vec<Answered> = agent
        .agent_step
        .steps()
        .iter()
        .flat_map(|st| answered_in(st, template.clone()))
        .collect();
    llm.carry_on(&answered);
}
