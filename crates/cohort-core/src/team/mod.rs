//! SyncState's core: every TaskState and StageState, and the pure function that applies an
//! executed step's `ExecuteOutput` to them (SPEC §6), returning the messages to route and what
//! changed. The actor in `actors/sync_state.rs` only routes and publishes.

mod agents;
mod ask_info;
mod budget;
mod control;
mod retention;
pub use budget::TaskBudget;
mod instructions;
pub mod limits;
mod malformed;
pub use malformed::Malformed;
pub mod notices;
mod outcome;
pub use outcome::Hollow;
mod stall;

use crate::config::AgentTemplate;
use crate::config::Retention;
use crate::event::{Change, TaskChange, apply::apply_sync};
use crate::ids::{AgentId, StageId, TaskId};
use crate::message::{AskInfoRequest, ExecuteOutput, Message, StageAgentUpdate};
use crate::report::TaskWritten;
use crate::state::{
    ConversationEntry, ExecutionState, SharedInfo, Skill, StageAgentState, StageState, TaskState,
};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

/// Why SyncState refused a message, a task or agent instruction, or an operator's control.
/// Its text ([`SyncError::render`], in the team's language) is what the refused step, its
/// manager and the operators are told, so it says what to do instead.
#[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum SyncError {
    /// The message or instruction names a task SyncState does not hold.
    UnknownTask(TaskId),
    /// The stage named is not one of the task's stages.
    UnknownStage {
        /// The task the stage was looked for in.
        task: TaskId,
        /// The stage id given.
        stage: StageId,
    },
    /// A message's receiver, or an agent allocated to a stage or added to a task, is not on
    /// the roster.
    UnknownAgent(AgentId),
    /// Only a task's manager may instruct it (its stages, its end, who takes part).
    NotManager {
        /// The agent that gave the instruction.
        agent: AgentId,
        /// The task it is not the manager of.
        task: TaskId,
    },
    /// The task is finished, failed or cancelled, with the state it ended in.
    TaskOver(TaskId, ExecutionState),
    /// The instruction would stage, finish or cancel the base task, which runs forever.
    BaseTask,
    /// The stage is not running (not started yet, or over), so it cannot be finished or
    /// retried.
    StageNotRunning {
        /// The stage named.
        stage: StageId,
        /// The state it is in.
        state: ExecutionState,
    },
    /// A stage with this goal already ran `repairs.stage_runs` times in the task: a manager
    /// asking for it again is looping, not working (the `stage_run_limit` repair).
    RunLimit {
        /// The stage goal asked for again.
        goal: String,
        /// How many stages with that goal the task has run (cancelled ones not counted).
        runs: usize,
    },
    /// `add_task` came from a step in another task than the base task (`task_limits`).
    AddTaskOutsideBase(TaskId),
    /// The team already has `task_limits.open_tasks` tasks open.
    OpenTasks {
        /// Tasks open now, besides the base task.
        open: usize,
        /// `task_limits.open_tasks`.
        max: usize,
    },
    /// The managers opened all the tasks the people's goals allow
    /// (`task_limits.tasks_per_goal` for each message of a person in the base task).
    TasksPerGoal {
        /// `task_limits.tasks_per_goal`.
        max: usize,
    },
    /// The stages added or retried would take the task past `task_limits.stages_per_task`.
    StagesPerTask {
        /// The task the stages were for.
        task: TaskId,
        /// The stages it has already.
        stages: usize,
        /// `task_limits.stages_per_task`.
        max: usize,
    },
    /// Agents sent all the messages in the base task that the people's messages allow
    /// (`task_limits.base_messages_per_goal` for each).
    BaseMessages {
        /// `task_limits.base_messages_per_goal`.
        max: usize,
    },
    /// The open tasks' messages and notes fill the team's memory budget
    /// (`retention.memory_mib`), so a person's new message is refused until work ends.
    MemoryFull {
        /// Bytes the open tasks' pools hold.
        held: usize,
        /// The pools' share of the memory budget, in bytes.
        budget: usize,
    },
    /// A `finish_task` with `outcome: finished` for a task whose work produced no result (see
    /// `outcome`), with why (its refusal says what to do instead).
    HollowFinish(Hollow),
    /// Any other malformed message or instruction (no receiver, a text too long, a stage
    /// without agents, an ended stage...), with what is wrong.
    Invalid(Malformed),
}

impl SyncError {
    /// The refusal, in the language of `t`.
    pub fn render(&self, t: &crate::texts::Texts) -> String {
        use SyncError as E;
        match self {
            E::UnknownTask(task) => t.refused_unknown_task(task),
            E::UnknownStage { task, stage } => t.refused_unknown_stage(task, stage),
            E::UnknownAgent(agent) => t.refused_unknown_agent(agent),
            E::NotManager { agent, task } => t.refused_not_manager(agent, task),
            E::TaskOver(task, state) => t.refused_task_over(task, state),
            E::BaseTask => t.refused_base_task(),
            E::StageNotRunning { stage, state } => t.refused_stage_not_running(stage, state),
            E::RunLimit { goal, runs } => t.refused_run_limit(goal, runs),
            E::AddTaskOutsideBase(task) => t.refused_add_task_outside_base(task),
            E::OpenTasks { open, max } => t.refused_open_tasks(open, max),
            E::TasksPerGoal { max } => t.refused_tasks_per_goal(max),
            E::StagesPerTask { task, stages, max } => t.refused_stages_per_task(task, stages, max),
            E::BaseMessages { max } => t.refused_base_messages(max),
            E::MemoryFull { held, budget } => t.refused_memory_full(held, budget),
            E::HollowFinish(hollow) => t.hollow_refused(hollow.detail(t)),
            E::Invalid(malformed) => malformed.render(t),
        }
    }
}

/// In English, as logs and the REST API's `error` show it.
impl std::fmt::Display for SyncError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let en = crate::texts::Texts::english();
        f.write_str(&self.render(&en))
    }
}

impl std::error::Error for SyncError {}

impl SyncError {
    /// Whether giving the same action again cannot help (another goal, an ended stage or
    /// task), as opposed to a slip the same action may mend (an agent id misspelt).
    pub fn bars_the_action(&self) -> bool {
        matches!(
            self,
            SyncError::RunLimit { .. }
                | SyncError::StageNotRunning { .. }
                | SyncError::TaskOver(..)
        ) || self.limit().is_some()
    }
}

/// What applying an output changed: messages to route, and the changes to tasks and stages
/// (already applied to SyncState's own state) to publish.
#[derive(Debug, Default, PartialEq)]
pub struct Applied {
    /// Messages for the actor to route: the step's own, and SyncState's notices to managers
    /// and operators.
    pub messages: Vec<Message>,
    /// Changes to tasks and stages, in the order they were applied.
    pub changes: Vec<Change>,
    /// Why the step's message or instruction was refused, if it was.
    pub refused: Option<SyncError>,
    /// Agents to start (init_new_agent), already on the roster; the actor creates them from
    /// their template before it routes `messages`.
    pub new_agents: Vec<Member>,
    /// ask_info queries to answer, with who asked. Answering needs the agents' live states,
    /// which SyncState does not own, so the actor calls [`SyncCore::answer`] with them.
    pub queries: Vec<(AgentId, AskInfoRequest)>,
}

/// One agent as SyncState knows it: enough to validate allocations and describe the team.
#[derive(Clone, Debug, PartialEq)]
pub struct Member {
    /// Its id, as messages and stage allocations name it.
    pub id: AgentId,
    /// Its display name.
    pub name: String,
    /// Its role in the team, as notices and ask_info describe it.
    pub role: String,
    /// What it is and can do, in prose, for managers choosing agents.
    pub profile: String,
    /// The skills it may run.
    pub skills: Vec<Skill>,
    /// The MCP servers it may call, by name.
    pub tools: Vec<String>,
    /// A person rather than an LLM agent: their messages in the base task are goals, which
    /// renew the team's `task_limits` allowance.
    pub human: bool,
    /// A person who sees and controls the whole team (`access: operator`): told when
    /// SyncState refuses work for a limit.
    pub operator: bool,
    /// The template a manager created it from, if any.
    pub template: Option<String>,
}

impl Member {
    /// An LLM agent named by its id, with `role` and nothing else: no profile, skills or tools.
    pub fn new(id: impl Into<AgentId>, role: impl Into<String>) -> Self {
        let id = id.into();
        Member {
            name: id.to_string(),
            id,
            role: role.into(),
            profile: String::new(),
            skills: Vec::new(),
            tools: Vec::new(),
            human: false,
            operator: false,
            template: None,
        }
    }
}

/// What SyncState can tell about the system besides tasks and agents: the templates new agents
/// are made from, and every skill and tool (MCP server) with its description.
#[derive(Clone, Debug)]
pub struct Catalog {
    /// The templates init_new_agent may create agents from.
    pub templates: Vec<AgentTemplate>,
    /// Every skill, with its description.
    pub skills: Vec<(Skill, String)>,
    /// Every MCP server the team has, by name, with its description.
    pub tools: Vec<(String, String)>,
    /// How many agents init_new_agent may create in all.
    pub max_hired: usize,
}

impl Default for Catalog {
    fn default() -> Self {
        Catalog {
            templates: Vec::new(),
            skills: Vec::new(),
            tools: Vec::new(),
            max_hired: crate::config::DEFAULT_MAX_HIRED_AGENTS,
        }
    }
}

impl Catalog {
    /// The template called `name`, if there is one.
    pub fn template(&self, name: &str) -> Option<&AgentTemplate> {
        self.templates.iter().find(|t| t.name == name)
    }

    /// The MCP servers a template names that this team does not have.
    pub fn missing_tools<'a>(&self, t: &'a AgentTemplate) -> Vec<&'a str> {
        t.tools
            .iter()
            .filter(|tool| !self.tools.iter().any(|(name, _)| name == *tool))
            .map(String::as_str)
            .collect()
    }
}

/// SyncState's state and rules: it owns every task and stage and the team's roster, checks
/// what steps, people and operators ask against the tasks' rules and the team's limits, and
/// applies it, returning what to route and publish. Built with [`SyncCore::new`] or
/// [`SyncCore::restore`], then configured with the `with_*` methods.
pub struct SyncCore {
    tasks: BTreeMap<TaskId, TaskState>,
    stages: BTreeMap<StageId, StageState>,
    roster: Vec<Member>,
    /// Where each member is in `roster` (a team of thousands is looked up on every message).
    roster_index: HashMap<AgentId, usize>,
    catalog: Catalog,
    base_task: TaskId,
    /// (stage, agent) pairs the manager was already told about, so it is told once.
    stuck_reported: BTreeSet<(StageId, AgentId)>,
    /// How many entries of each shared pool a task keeps in memory (the oldest leave first).
    pool_kept: usize,
    /// The longest message text accepted, in characters.
    message_chars: usize,
    /// Finished tasks kept in full, oldest first; past `finished_kept` the oldest leaves.
    finished: VecDeque<TaskId>,
    finished_kept: usize,
    /// Carried over from a store: readers already have its tasks.
    restored: bool,
    /// The number of the newest message routed (each routed message gets the next one).
    last_message_no: u64,
    /// Carried over from a store: managers and people the team file added since, joined to
    /// the base task (announced when SyncState starts).
    welcomed: Vec<Change>,
    /// What one task may spend before it is stopped (`step_limits.task_tokens`/`task_steps`).
    budget: budget::TaskBudget,
    /// Steps each open task has run in this process (counted from a restart on).
    steps_run: HashMap<TaskId, u64>,
    /// How much work models may open, and what was opened since a person last wrote.
    task_limits: crate::config::TaskLimits,
    /// Which of the models' slips are mended (`repairs:`; here the stage run limit).
    repairs: crate::policy::Repairs,
    work: limits::WorkCount,
    /// The team's memory budget, and the bytes each task's pools hold (and all of them).
    memory: crate::config::MemoryBudget,
    pool_bytes: HashMap<TaskId, retention::PoolBytes>,
    pools_total: usize,
    /// Tasks whose manager's hollow `finish_task` was refused once: given again, it ends the
    /// task failed (see `outcome`). Kept in memory: after a restart a manager is told once more.
    hollow_refused: BTreeSet<TaskId>,
    /// Tasks whose goal-giver was told they stalled (once a task; see `report_stall`).
    stall_told: BTreeSet<TaskId>,
    /// The runtime's texts in the team's language: the notices and instructions it sends.
    texts: std::sync::Arc<crate::texts::Texts>,
}

pub use crate::config::SHARED_POOL_KEPT;

impl SyncCore {
    /// Whether `agent` may give `instruction` now (as from one of its steps in the task it is
    /// about), without applying it: a person's confirmation of a manager's stages is checked
    /// before it counts.
    pub fn check_task_instruction(
        &self,
        agent: &AgentId,
        instruction: &crate::message::TaskInstruction,
    ) -> Result<(), SyncError> {
        self.within_limits(Some(instruction.task()), instruction)
            .and_then(|()| self.check_models_instruction(agent, instruction))
    }

    /// Creates the base task, run by the first manager, with every manager and every human
    /// (`others`) in its group.
    pub fn new(roster: Vec<Member>, managers: &[AgentId], others: &[AgentId]) -> Self {
        let base_task = TaskId::random();
        let first = managers
            .first()
            .cloned()
            .unwrap_or_else(|| AgentId::from("[nobody]"));
        let mut base = TaskState::new(
            base_task.clone(),
            "MAS base task".into(),
            crate::texts::Texts::english().base_task_intention(),
            first,
        );
        base.join(managers.iter().cloned());
        base.join(others.iter().cloned());
        base.execution_state = ExecutionState::Running;
        Self::from_parts(vec![base], Vec::new(), roster)
    }

    /// SyncState as it was, from the tasks and stages a store kept (`tasks` in creation order,
    /// the base task first) and the roster of the agents it kept.
    pub fn restore(
        tasks: Vec<TaskState>,
        stages: Vec<StageState>,
        roster: Vec<Member>,
    ) -> Option<Self> {
        (!tasks.is_empty()).then(|| SyncCore {
            restored: true,
            ..Self::from_parts(tasks, stages, roster)
        })
    }

    /// `tasks` in creation order, the base task first (never empty).
    fn from_parts(tasks: Vec<TaskState>, stages: Vec<StageState>, roster: Vec<Member>) -> Self {
        let mut core = Self::parts(tasks, stages, roster);
        core.count_pool_bytes();
        core.with_task_limits(crate::config::TaskLimits::default())
    }

    fn parts(tasks: Vec<TaskState>, stages: Vec<StageState>, roster: Vec<Member>) -> Self {
        let base_task = tasks[0].task_id.clone();
        let finished = tasks
            .iter()
            .filter(|t| t.execution_state.is_over())
            .map(|t| t.task_id.clone())
            .collect();
        SyncCore {
            tasks: tasks.into_iter().map(|t| (t.task_id.clone(), t)).collect(),
            stages: stages
                .into_iter()
                .map(|s| (s.stage_id.clone(), s))
                .collect(),
            roster_index: roster
                .iter()
                .enumerate()
                .map(|(i, m)| (m.id.clone(), i))
                .collect(),
            roster,
            catalog: Catalog::default(),
            base_task,
            stuck_reported: BTreeSet::new(),
            pool_kept: SHARED_POOL_KEPT,
            message_chars: Retention::default().message_chars,
            finished,
            finished_kept: Retention::default().finished_tasks,
            restored: false,
            last_message_no: 0,
            welcomed: Vec::new(),
            budget: budget::TaskBudget::default(),
            steps_run: HashMap::new(),
            task_limits: crate::config::TaskLimits::default(),
            repairs: crate::policy::Repairs::default(),
            work: limits::WorkCount::default(),
            memory: crate::config::MemoryBudget::default(),
            pool_bytes: HashMap::new(),
            pools_total: 0,
            hollow_refused: BTreeSet::new(),
            stall_told: BTreeSet::new(),
            texts: crate::texts::Texts::english(),
        }
    }

    /// Carrying on from a store: `members` (the team file's managers and people) join the base
    /// task if they are not in its group yet (the team file may have gained some).
    pub fn welcome(mut self, members: &[AgentId]) -> Self {
        let base = self.base_task.clone();
        let new: Vec<AgentId> = match self.tasks.get(&base) {
            Some(t) => members
                .iter()
                .filter(|m| !t.task_group.contains(m))
                .cloned()
                .collect(),
            None => Vec::new(),
        };
        if !new.is_empty() {
            let c = Change::Task(TaskChange::Joined {
                task_id: base,
                agents: new,
            });
            apply_sync(&mut self.tasks, &mut self.stages, &c);
            self.welcomed.push(c);
        }
        self
    }

    /// Carrying on from a store: messages are numbered on from `last` (the newest routed).
    pub fn numbering_from(mut self, last: u64) -> Self {
        self.last_message_no = last;
        self
    }

    /// The changes that introduce SyncState's tasks and stages to a reader that has nothing.
    pub fn initial_changes(&self) -> Vec<Change> {
        if self.restored {
            // Published before the restart and stored: announcing them again would reset the
            // readers' record of which task came first. Only who joined since goes out.
            return self.welcomed.clone();
        }
        self.tasks
            .values()
            .map(|t| {
                Change::Task(TaskChange::Created {
                    task: Box::new(t.clone()),
                })
            })
            .collect()
    }

    /// Applies a change to SyncState's tasks and stages and keeps it for publishing.
    fn emit(&mut self, applied: &mut Applied, c: Change) {
        apply_sync(&mut self.tasks, &mut self.stages, &c);
        applied.changes.push(c);
    }

    /// Gives SyncState the templates, skills and tools it describes and instantiates.
    pub fn with_catalog(mut self, catalog: Catalog) -> Self {
        self.catalog = catalog;
        self
    }

    /// Gives SyncState the team's language: the texts of the notices and instructions it
    /// sends (English until given).
    /// The runtime's texts in the team's language; a new team's base task (not a restored
    /// one, whose intention is on record) states its intention in them.
    pub fn with_texts(mut self, texts: std::sync::Arc<crate::texts::Texts>) -> Self {
        if !self.restored
            && let Some(base) = self.tasks.get_mut(&self.base_task)
        {
            base.task_intention = texts.base_task_intention();
        }
        self.texts = texts;
        self
    }

    /// The runtime's texts in the team's language.
    pub fn texts(&self) -> &std::sync::Arc<crate::texts::Texts> {
        &self.texts
    }

    /// The base task: where people's goals arrive and managers open tasks; it never ends.
    pub fn base_task(&self) -> &TaskId {
        &self.base_task
    }

    /// The task `id`, if SyncState still holds it (finished tasks past
    /// `retention.finished_tasks` are dropped).
    pub fn task(&self, id: &TaskId) -> Option<&TaskState> {
        self.tasks.get(id)
    }

    /// The stage `id`, if SyncState still holds it.
    pub fn stage(&self, id: &StageId) -> Option<&StageState> {
        self.stages.get(id)
    }

    /// Every task SyncState holds, the base task among them, ordered by id.
    pub fn tasks(&self) -> impl Iterator<Item = &TaskState> {
        self.tasks.values()
    }

    /// Every stage SyncState holds, of every task, ordered by id.
    pub fn stages(&self) -> impl Iterator<Item = &StageState> {
        self.stages.values()
    }

    fn knows(&self, a: &AgentId) -> bool {
        self.member(a).is_some()
    }

    /// The roster's entry for agent `a`, if it is in the team.
    pub fn member(&self, a: &AgentId) -> Option<&Member> {
        self.roster.get(*self.roster_index.get(a)?)
    }

    /// Puts a member on the roster (and in its index).
    fn enrol(&mut self, m: Member) {
        self.roster_index.insert(m.id.clone(), self.roster.len());
        self.roster.push(m);
    }

    /// Applies one step's output. What the step reports about itself (tokens, shared info, its
    /// state in the stage, its summary) always lands; its message, task instruction and agent
    /// instruction are checked first and, if one is refused, all are dropped, with the agent
    /// marked failed in the stage and the refusal returned in `Applied::refused`. An ask_info
    /// query is handed on in `Applied::queries` to be answered.
    pub fn apply(&mut self, out: &ExecuteOutput, now: &str) -> Applied {
        let agent = out
            .agent_id
            .clone()
            .unwrap_or_else(|| AgentId::from("[unknown]"));
        let refused = self.refusal(&agent, out);
        if let (Some(SyncError::HollowFinish(_)), Some(i)) = (&refused, &out.task_instruction) {
            self.hollow_refused.insert(i.task().clone());
        }
        let mut applied = Applied::default();
        self.record_report(out, refused.as_ref(), now, &mut applied);
        if refused.is_none() {
            self.carry_out(&agent, out, &mut applied);
        }
        // A query is never refused: whatever it asks about, the answer (possibly "there is no
        // such task") is what frees the asker's wait.
        if let Some(q) = &out.ask_info {
            applied.queries.push((agent.clone(), q.clone()));
        }
        // Last: whatever the step did to its task happened within budget; a stop ends the task
        // after it, and nothing the step asked can reopen a stopped task.
        if let Some(info) = &out.send_shared_info {
            self.hold_to_budget(&info.task_id, &mut applied);
        }
        if let Some(why) = &refused {
            self.tell_operators(&agent, why, &mut applied);
        }
        if let (Some(why), Some(task)) = (&out.endpoint_down, &out.task_id) {
            self.fail_for_endpoint(&agent, task, why, &mut applied);
        }
        applied.refused = refused;
        applied
    }

    /// The first refusal of what the step asks: its message, task or agent instruction.
    fn refusal(&self, agent: &AgentId, out: &ExecuteOutput) -> Option<SyncError> {
        out.send_message
            .as_ref()
            .map_or(Ok(()), |m| {
                self.check_message(m)
                    .and_then(|()| self.message_within_limits(m))
            })
            .and_then(|()| {
                out.task_instruction.as_ref().map_or(Ok(()), |i| {
                    self.within_limits(out.task_id.as_ref(), i)
                        .and_then(|()| self.check_models_instruction(agent, i))
                        .and_then(|()| self.refuse_hollow_finish(i))
                })
            })
            .and_then(|()| {
                out.agent_instruction
                    .as_ref()
                    .map_or(Ok(()), |i| self.check_agent_instruction(agent, i))
            })
            .err()
    }

    /// Records what a step reports about itself; a `refused` one is failed in its stage.
    fn record_report(
        &mut self,
        out: &ExecuteOutput,
        refused: Option<&SyncError>,
        now: &str,
        applied: &mut Applied,
    ) {
        if let Some((task, usage)) = &out.token_usage
            && self.tasks.contains_key(task)
            && *usage != Default::default()
        {
            let c = Change::Task(TaskChange::Tokens {
                task_id: task.clone(),
                usage: *usage,
            });
            self.emit(applied, c);
        }
        if let Some(task) = out.task_id.as_ref().filter(|t| self.tasks.contains_key(*t))
            && !out.repairs.is_empty()
        {
            let c = Change::Task(TaskChange::Repaired {
                task_id: task.clone(),
                rules: out.repairs.clone(),
            });
            self.emit(applied, c);
        }
        if let Some(u) = &out.update_stage_agent_state {
            let mut u = u.clone();
            if let Some(why) = refused {
                u.state = StageAgentState::Failed;
                u.stuck
                    .get_or_insert_with(|| format!("SyncState refused its step: {why}"));
            }
            self.update_agent_in_stage(&u, applied);
        }
        if let Some(info) = &out.send_shared_info
            && self.tasks.contains_key(&info.task_id)
        {
            self.share_info(info, refused.is_some(), now, applied);
        }
        if let Some(c) = &out.update_stage_agent_completion {
            self.record_completion(c, applied);
        }
    }

    /// Adds a step's line to its task's shared info pool, marked when the step was refused.
    fn share_info(
        &mut self,
        info: &crate::message::SharedInfoUpdate,
        refused: bool,
        now: &str,
        applied: &mut Applied,
    ) {
        let refused_note = if refused { " (refused)" } else { "" };
        let entry = SharedInfo {
            agent_id: info.agent_id.clone(),
            role: info.role.clone(),
            stage_id: info.stage_id.clone(),
            content: format!("{}{refused_note}", info.content),
            timestamp: now.to_owned(),
        };
        let bytes = crate::state::Held::held_bytes(&entry);
        let c = Change::Task(TaskChange::SharedInfo {
            task_id: info.task_id.clone(),
            entry,
        });
        self.emit(applied, c);
        self.pool_grew(&info.task_id, retention::Pool::Info, bytes, applied);
    }

    /// Sends the message and runs the instructions of a step that was not refused.
    fn carry_out(&mut self, agent: &AgentId, out: &ExecuteOutput, applied: &mut Applied) {
        if let Some(m) = &out.send_message {
            applied.messages.push(m.clone());
        }
        if let Some(i) = &out.task_instruction {
            self.run_instruction(agent, i, applied);
        }
        if let Some(i) = &out.agent_instruction {
            self.run_agent_instruction(i, applied);
        }
    }

    fn update_agent_in_stage(&mut self, u: &StageAgentUpdate, applied: &mut Applied) {
        let Some(stage) = self
            .stages
            .get(&u.stage_id)
            .filter(|s| s.execution_state == ExecutionState::Running)
        else {
            return;
        };
        if let Some(c) = stage.agent_state_change(&u.agent_id, u.state) {
            self.emit(applied, Change::Stage(c));
        }
        let stage = &self.stages[&u.stage_id];
        // An allocated agent that cannot go on would hold the stage open forever: the manager
        // is told (once per agent and stage), so it can retry or finish the stage.
        if let (StageAgentState::Failed, Some(why)) = (u.state, &u.stuck)
            && stage.agent_allocation.contains_key(&u.agent_id)
            && !stage.completion_summary.contains_key(&u.agent_id)
            && self
                .stuck_reported
                .insert((u.stage_id.clone(), u.agent_id.clone()))
        {
            let stage = stage.clone();
            if let Some(task) = self.tasks.get(&u.task_id) {
                applied.messages.push(notices::agent_stuck(
                    task,
                    &stage,
                    &u.agent_id,
                    why,
                    &self.texts,
                ));
            }
        }
    }

    /// A step's model endpoint stayed down past its wait: the step's task cannot go on, and
    /// ends failed with why; the base task never ends, so its operators are told instead (the
    /// goal or message the step was for got no answer).
    fn fail_for_endpoint(&mut self, agent: &AgentId, task: &TaskId, why: &str, out: &mut Applied) {
        tracing::warn!(task = %task, agent = %agent, "{why}");
        if *task == self.base_task {
            let what = format!("A step of `{agent}` in the base task gave up: {why}");
            return self.tell_operators_that(what, out);
        }
        let open = self
            .tasks
            .get(task)
            .is_some_and(|t| !t.execution_state.is_over());
        if open {
            let down = TaskWritten::EndpointDown {
                why: why.to_owned(),
            };
            let summary = (String::new(), Some(Box::new(down)));
            self.close_task(task, ExecutionState::Failed, summary, None, out);
        }
    }

    /// A message from outside the team's steps (an operator's, or an agent returning a wait id
    /// it could not answer): checked, then routed. Nobody outside may speak as the runtime.
    pub fn submit(&mut self, m: Message) -> Result<Applied, SyncError> {
        if [
            crate::message::TASK_STATE_SENDER,
            crate::message::SYNC_STATE_SENDER,
        ]
        .contains(&m.sender_id.as_str())
        {
            return Err(SyncError::Invalid(Malformed::ReservedSender(
                m.sender_id.clone(),
            )));
        }
        self.check_message(&m)?;
        if self.is_person(&m.sender_id) {
            self.room_for(&m)?;
        }
        Ok(Applied {
            messages: vec![m],
            ..Default::default()
        })
    }

    fn check_message(&self, m: &Message) -> Result<(), SyncError> {
        let task = self
            .tasks
            .get(&m.task_id)
            .ok_or_else(|| SyncError::UnknownTask(m.task_id.clone()))?;
        if task.execution_state.is_over() {
            return Err(SyncError::TaskOver(m.task_id.clone(), task.execution_state));
        }
        if let Some(stage) = m.stage_relative.stage().and_then(|s| self.stages.get(s))
            && stage.execution_state.is_over()
        {
            return Err(SyncError::Invalid(Malformed::StageOver {
                stage: stage.stage_id.clone(),
                state: stage.execution_state,
            }));
        }
        if m.receiver.is_empty() {
            return Err(SyncError::Invalid(Malformed::NoReceiver));
        }
        let chars = m.message.chars().count();
        if chars > self.message_chars {
            return Err(SyncError::Invalid(Malformed::TooLong {
                chars,
                limit: self.message_chars,
            }));
        }
        if let Some(r) = m.receiver.iter().find(|r| !self.knows(r)) {
            return Err(SyncError::UnknownAgent(r.clone()));
        }
        if m.waiting
            .as_ref()
            .is_some_and(|w| w.len() != m.receiver.len())
        {
            return Err(SyncError::Invalid(Malformed::WaitIds));
        }
        Ok(())
    }

    fn record_completion(&mut self, c: &crate::message::CompletionUpdate, applied: &mut Applied) {
        let Some(stage) = self.stages.get(&c.stage_id) else {
            return;
        };
        if stage.execution_state != ExecutionState::Running {
            return;
        }
        let was_complete = stage.is_complete();
        let Some(change) = stage.completion_change(c) else {
            return;
        };
        self.emit(applied, Change::Stage(change));
        let stage = &self.stages[&c.stage_id];
        if !was_complete
            && stage.is_complete()
            && let Some(task) = self.tasks.get(&c.task_id)
        {
            applied
                .messages
                .push(notices::stage_complete(task, stage, &self.texts));
        }
    }

    /// Puts a message about to be routed in its task's trace (`event::trace::context_in_task`):
    /// a runtime notice, a person's answer and an agent's message all carry it on. The base
    /// task is no one goal's: its messages keep their sender's trace, if any.
    fn place_in_trace(&self, m: &mut Message) {
        if m.task_id == self.base_task {
            return;
        }
        if let Some(task) = self.tasks.get(&m.task_id) {
            let from_a_step = self.member(&m.sender_id).is_some_and(|s| !s.human);
            m.traceparent = Some(crate::event::trace::context_in_task(m, task, from_a_step));
        }
    }

    /// Records a message about to be routed: it is put in its task's trace, gets the next
    /// number and joins its task's conversation pool. Returns the number (receivers
    /// acknowledge it), the message as recorded (to route) and the changes.
    pub fn record_sent(
        &mut self,
        mut m: Message,
        now: &str,
    ) -> (u64, std::sync::Arc<Message>, Vec<Change>) {
        self.place_in_trace(&mut m);
        let m = std::sync::Arc::new(m);
        let mut applied = Applied::default();
        self.count_routed(&m);
        self.last_message_no += 1;
        let no = self.last_message_no;
        let task = m.task_id.clone();
        let bytes = crate::state::Held::held_bytes(m.as_ref());
        let c = Change::Task(TaskChange::Conversation {
            task_id: task.clone(),
            entry: ConversationEntry {
                timestamp: now.to_owned(),
                message: m.clone(),
            },
            message_no: no,
        });
        self.emit(&mut applied, c);
        self.pool_grew(&task, retention::Pool::Conversation, bytes, &mut applied);
        (no, m, applied.changes)
    }
}

#[cfg(test)]
mod retention_tests;
#[cfg(test)]
mod tests;
