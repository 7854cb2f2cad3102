//! `cohort replay`: run a recorded run again with every model call answered from its record
//! (no model is asked, no key is needed), then say whether the replayed run ended in the same
//! states and where a prompt first differed from the recorded one (a changed prompt
//! template, a changed skill: its effect shows without a model). With `--fork-at STEP`, the
//! run is replayed up to that step and goes on from there with the live model (and an edited
//! step text, or the team file's edited prompts), as a new task beside the recorded one in a
//! copy of the store.

use super::data::DataArgs;
use anyhow::Context as _;
use cohort::actors::Host;
use cohort::config::{TeamConfig, load_team};
use cohort::ids::{StepId, TaskId};
use cohort::llm::recorded::Call;
use cohort::llm::replay::{Record, TURN_WAIT};
use cohort::mcp::McpCall;
use cohort::mcp::replay::ToolRecord;
use cohort::prompt::Texts;
use cohort::run::{RunOptions, RunReport, run_goal};
use cohort::state::{ForkedFrom, StepOrigin};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// How many differing states the report shows.
const SHOWN: usize = 8;

/// What `cohort replay` was asked.
#[derive(clap::Args)]
pub struct ReplayArgs {
    /// The team configuration file (as recorded, or changed to see the change's effect; a
    /// fork's live model and prompts are this file's).
    #[arg(long)]
    pub team: PathBuf,
    /// The recorded run's store.
    #[command(flatten)]
    pub data: DataArgs,
    /// The recorded task to replay (needed when the store holds more than one goal).
    #[arg(long)]
    pub task: Option<String>,
    /// Stop after this many seconds.
    #[arg(long, default_value_t = 600)]
    pub timeout: u64,
    /// Call the MCP servers again instead of answering tool calls from the record.
    #[arg(long)]
    pub live_tools: bool,
    /// Fork: replay up to this step (its id, as the console shows it), then go on from it as
    /// a new task beside the recorded one, in a copy of the store (--out).
    #[arg(long)]
    pub fork_at: Option<String>,
    /// Who answers a fork's calls from its step on: `live` (the team file's model, the
    /// default) or `record` (the recorded answers still: an edit's effect on the prompts
    /// shows without a model).
    #[arg(long, value_enum, requires = "fork_at")]
    pub llm: Option<Answers>,
    /// The fork step's text, edited (a step a model planned: the edit takes the place of its
    /// text in the recorded plan).
    #[arg(long, requires = "fork_at")]
    pub step_text: Option<String>,
    /// Where a fork is written: a copy of the recorded store (SQLite), the fork beside the
    /// recorded task. Default: `<store>.fork-<step>.db` beside the store.
    #[arg(long, requires = "fork_at")]
    pub out: Option<PathBuf>,
}

/// Who answers a fork's model calls from its step on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Answers {
    Live,
    Record,
}

/// Replays (or forks) the run recorded in the store `args` names; exit 0 when the replayed
/// run asked what the recorded one did and ended the same (a fork: when it finished), 1
/// when it did not.
pub async fn replay(args: &ReplayArgs) -> anyhow::Result<u8> {
    let cfg = load_team(&args.team).with_context(|| format!("loading {}", args.team.display()))?;
    // The report is in the team's language, as its runs are.
    let texts = cfg.prompt_set()?.texts().clone();
    let t = texts.as_ref();
    if let Some(step) = &args.fork_at {
        return fork(args, &cfg, StepId::from(step.as_str()), t).await;
    }
    let opened = args.data.open(None, t).await?.context(
        "name the recorded run's store: --data FILE (as `cohort run --data` wrote it) or --database URL",
    )?;
    let task = args.task.as_deref().map(TaskId::from);
    let states = store_states(opened.store.as_ref()).await?;
    let recorded = read_record(opened.store.as_ref(), states, task.as_ref()).await?;
    let json = recorded.states.all_json();
    let tools = (!args.live_tools)
        .then(|| Arc::new(ToolRecord::new(tool_calls(&recorded.states, &json, None))));
    // The store is let go: the replay keeps nothing.
    drop(opened);
    eprintln!(
        "{}",
        t.replay_start(
            recorded.calls.len(),
            recorded.goal.lines().next().unwrap_or_default()
        )
    );
    let record = Record::new(recorded.calls);
    let host = host(&record, &tools)?;
    // The replay keeps its states in a store of its own, as the recorded run did, so both
    // runs' final states are read back the same way.
    let scratch = std::env::temp_dir().join(format!("cohort-replay-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)?;
    let _gone = Removed(scratch.clone());
    let store: Arc<dyn cohort::store::Store> =
        Arc::new(cohort::store::SqlStore::open_sqlite(&scratch.join("replay.db")).await?);
    let timeout = Duration::from_secs(args.timeout);
    let opts = RunOptions {
        timeout,
        store: Some(store.clone()),
        ..RunOptions::default()
    };
    let report = run_goal(&cfg, &recorded.goal, &opts, &host, |_| {}).await?;
    let replayed = cohort::store::load(store.as_ref()).await?.states.all_json();
    let same = compare(
        &record,
        tools.as_deref(),
        &report,
        timeout,
        (&json, &replayed),
        t,
    );
    Ok(if same { 0 } else { 1 })
}

/// The host of a replayed team: its model calls answered by `record`, its tool calls by
/// `tools` (none: made to the servers).
fn host<'a>(record: &Arc<Record>, tools: &Option<Arc<ToolRecord>>) -> anyhow::Result<Host<'a>> {
    static VARS: fn(&str) -> Option<String> = |k| std::env::var(k).ok();
    Ok(Host {
        replay: Some(record.clone()),
        replay_tools: tools.clone(),
        ..Host::new(
            &VARS,
            std::env::current_exe().context("locating the cohort binary")?,
        )
    })
}

/// Says how the replayed run compares with the recorded one (`states`: the recorded run's
/// final states and the replayed one's); whether they are the same.
fn compare(
    record: &Record,
    tools: Option<&ToolRecord>,
    report: &RunReport,
    timeout: Duration,
    (recorded, replayed): (&serde_json::Value, &serde_json::Value),
    t: &Texts,
) -> bool {
    let divergences = record.divergences();
    let differences = record.state_differences(recorded, replayed, SHOWN, t);
    eprintln!(
        "{}",
        t.replay_calls(
            record.served(),
            record.left(),
            report.outcome.describe(timeout, t)
        )
    );
    say_out_of_turn(record, t);
    let tools_left = tools.map_or(0, |tools| {
        eprintln!("{}", t.replay_tools(tools.served(), tools.left()));
        tools.left()
    });
    say_divergences(record, t);
    for d in &differences {
        eprintln!("{}", t.replay_differs(d));
    }
    let same =
        divergences.is_empty() && differences.is_empty() && record.left() == 0 && tools_left == 0;
    if same {
        eprintln!("{}", t.replay_same());
    }
    same
}

/// Says how many answers, messages and steps went ahead out of their recorded turn, if any.
fn say_out_of_turn(record: &Record, t: &Texts) {
    if record.out_of_turn() > 0 {
        let seconds = TURN_WAIT.as_secs();
        eprintln!("{}", t.replay_out_of_turn(record.out_of_turn(), seconds));
    }
}

/// Says how many requests differed from the recorded ones, and where the first did.
fn say_divergences(record: &Record, t: &Texts) {
    let divergences = record.divergences();
    if let Some(first) = divergences.first() {
        eprintln!(
            "{}",
            t.replay_divergences(
                divergences.len(),
                &first.agent_id,
                &first.skill,
                first.part,
                first.difference.render(t)
            )
        );
    }
}

/// Forks the recorded run at `step`: the store copied to `--out`, the run replayed into the
/// copy up to the step and gone on from there, its task marked as forked.
async fn fork(args: &ReplayArgs, cfg: &TeamConfig, step: StepId, t: &Texts) -> anyhow::Result<u8> {
    let Some(source) = &args.data.data else {
        anyhow::bail!(
            "a fork is written into a copy of a SQLite store (--data FILE); a Postgres store's \
             copy is made with pg_dump: restore it into a SQLite file with `cohort export` and \
             `cohort run`, or fork a run recorded with --data"
        );
    };
    let out = args.out.clone().unwrap_or_else(|| fork_file(source, &step));
    let copied = cohort::store::backup::backup(&source.display().to_string(), &out)
        .await
        .with_context(|| format!("copying {} to {}", source.display(), out.display()))?;
    let store: Arc<dyn cohort::store::Store> =
        Arc::new(cohort::store::SqlStore::open_sqlite(&copied.to).await?);
    let state = store_states(store.as_ref()).await?;
    let at = state
        .step(&step)
        .with_context(|| format!("the store holds no step `{step}` (name a step of the recorded run, as the console shows its id)"))?
        .clone();
    // The states are read once: the record keeps them.
    let mut recorded = read_record(store.as_ref(), state, Some(&at.task_id)).await?;
    let point = cohort::llm::fork::fork_point(&recorded.calls, &step)?;
    if let Some(text) = &args.step_text {
        let StepOrigin::Planned { by } = &at.origin else {
            return Err(cohort::llm::fork::ForkError::NotPlanned(step).into());
        };
        cohort::llm::fork::edit_planned_text(
            &mut recorded.calls,
            &step,
            by,
            &at.text_content,
            text,
        )?;
    }
    let live = args.llm.unwrap_or(Answers::Live) == Answers::Live;
    let since = recorded
        .calls
        .iter()
        .find(|c| c.seq == point)
        .map(|c| c.sent_at);
    let json = recorded.states.all_json();
    let tools = (!args.live_tools).then(|| {
        Arc::new(ToolRecord::forked(tool_calls(
            &recorded.states,
            &json,
            since,
        )))
    });
    let before = recorded.calls.iter().filter(|c| c.seq < point).count();
    say_forking(&at, before, live, t);
    let record = Record::forked(recorded.calls, live.then_some(point));
    let host = host(&record, &tools)?;
    let timeout = Duration::from_secs(args.timeout);
    let opts = RunOptions {
        timeout,
        store: Some(store.clone()),
        forked_from: Some(ForkedFrom {
            task_id: at.task_id.clone(),
            step_id: step.clone(),
        }),
        ..RunOptions::default()
    };
    let report = run_goal(cfg, &recorded.goal, &opts, &host, |_| {}).await?;
    say_fork(&report, &record, timeout, (&out, &args.team), t);
    Ok(if report.outcome == cohort::run::RunOutcome::Finished {
        0
    } else {
        1
    })
}

/// Says what the fork does: where, how many recorded calls answer before its step, and who
/// answers from it on.
fn say_forking(at: &cohort::state::StepState, before: usize, live: bool, t: &Texts) {
    let then = if live {
        t.replay_then_live()
    } else {
        t.replay_then_record()
    };
    eprintln!(
        "{}",
        t.replay_forking(&at.task_id, &at.step_id, &at.step_intention, before, then)
    );
}

/// `<store>.fork-<the step's first 8>.db`, beside the store.
fn fork_file(store: &Path, step: &StepId) -> PathBuf {
    let stem = store.file_stem().unwrap_or_default().to_string_lossy();
    let short: String = step.as_str().chars().take(8).collect();
    store.with_file_name(format!("{stem}.fork-{short}.db"))
}

/// Says how the fork went and where it is.
fn say_fork(
    report: &RunReport,
    record: &Record,
    timeout: Duration,
    where_: (&Path, &Path),
    t: &Texts,
) {
    let (out, team) = where_;
    let tasks: Vec<&str> = report.tasks.iter().map(|t| t.task_id.as_str()).collect();
    eprintln!(
        "{}",
        t.replay_fork_done(
            tasks.join(", "),
            report.outcome.describe(timeout, t),
            record.served(),
            record.live()
        )
    );
    say_out_of_turn(record, t);
    say_divergences(record, t);
    eprintln!("{}", t.replay_fork_where(out.display(), team.display()));
}

/// A folder removed when dropped.
struct Removed(std::path::PathBuf);

impl Drop for Removed {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A recorded run: its model calls, its final states and its goal.
struct Recorded {
    calls: Vec<Call>,
    states: cohort::event::States,
    goal: String,
}

/// The final states the store holds.
async fn store_states(store: &dyn cohort::store::Store) -> anyhow::Result<cohort::event::States> {
    Ok(cohort::store::load(store).await?.states)
}

/// The recorded run of `task` the store holds (none named: of its only goal), `states` being
/// the store's final states. Of a store with more goals than one, a task's calls are its
/// steps' and its goal step's.
async fn read_record(
    store: &dyn cohort::store::Store,
    states: cohort::event::States,
    task: Option<&TaskId>,
) -> anyhow::Result<Recorded> {
    let mut calls = Vec::new();
    let mut after = 0;
    loop {
        let page = store.model_calls(None, after, 500).await?;
        for c in &page {
            let call: Call = serde_json::from_str(&c.body)
                .with_context(|| format!("reading recorded call {}", c.seq))?;
            calls.push(call);
        }
        match page.last() {
            Some(last) if page.len() == 500 => after = last.seq,
            _ => break,
        }
    }
    if calls.is_empty() {
        anyhow::bail!(
            "the store holds no recorded model calls: a run records them unless its team file \
             sets retention.recorded_calls_mib: 0 (stores written before this version have none)"
        );
    }
    let goals = goals(&states);
    let goal = match (task, goals.as_slice()) {
        (_, []) => anyhow::bail!("the store holds no goal given by the operator to replay"),
        (None, [(_, one)]) => one.clone(),
        (None, many) => anyhow::bail!(
            "the store holds {} goals' tasks ({}): name the one to replay with --task ID",
            many.len(),
            many.iter()
                .map(|(t, _)| t.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        (Some(t), all) => {
            let (_, goal) = all.iter().find(|(id, _)| id == t).with_context(|| {
                format!("the store holds no task `{t}` made for an operator's goal")
            })?;
            if all.len() > 1 {
                let goal_step = states.tasks.get(t).and_then(|x| x.goal_step.clone());
                calls.retain(|c| {
                    c.task_id.as_ref() == Some(t) || Some(&c.step_id) == goal_step.as_ref()
                });
            }
            goal.clone()
        }
    };
    Ok(Recorded {
        calls,
        states,
        goal,
    })
}

/// Each task made for an operator's goal, with that goal as the operator gave it (what the
/// step that acted on it read).
fn goals(states: &cohort::event::States) -> Vec<(TaskId, String)> {
    states
        .tasks
        .values()
        .filter_map(|t| {
            let step = states.step(t.goal_step.as_ref()?)?;
            match &step.origin {
                StepOrigin::Act {
                    goal: Some(goal), ..
                } => Some((t.task_id.clone(), goal.clone())),
                _ => None,
            }
        })
        .collect()
}

/// The tool calls the recorded run's steps made (a tool step's, or one of a native tool
/// loop's), each with its outcome, in the order they started (`json`: the states as clients
/// read them, with their times); those started before `before` only, when given (a fork's
/// point, in ms since the epoch).
fn tool_calls(
    states: &cohort::event::States,
    json: &serde_json::Value,
    before: Option<i64>,
) -> Vec<(String, McpCall, Result<serde_json::Value, String>)> {
    let started = |id: &StepId| json["step"][id.as_str()]["started_at"].as_i64();
    let mut made: Vec<_> = states
        .steps()
        .filter_map(|s| {
            let cohort::state::Executor::Tool(server) = &s.executor else {
                return None;
            };
            let at = started(&s.step_id);
            if before.is_some_and(|b| at.is_none_or(|at| at >= b)) {
                return None;
            }
            let call = McpCall::from_instruction(s.instruction_content.as_ref()?).ok()?;
            let result = s.execute_result.as_ref()?;
            let outcome = match &result.error {
                Some(e) => Err(e.clone()),
                None => Ok(serde_json::Value::Object(result.output.clone())),
            };
            Some((at, (server.clone(), call, outcome)))
        })
        .collect();
    made.sort_by_key(|(at, _)| *at);
    made.into_iter().map(|(_, c)| c).collect()
}
