//! `cohort run`: start a team, give the goal to a manager, follow the tasks it creates until
//! every one is finished or failed (or a limit hits), and report the final states. With a
//! store the team carries on from what it holds, and the run follows only the tasks created
//! after it started.

mod operator;
mod progress;
mod waits;

pub use progress::{Progress, Running};
pub use waits::{Asked, PersonWait, person_waits};

use crate::actors::{Host, StepAllowance, SystemError, Team, start_team_limited};
use crate::monitor::feed::FeedReceiver;
use cohort_core::config::TeamConfig;
use cohort_core::event::States;
use cohort_core::event::trace_context::TraceParent;
use cohort_core::ids::AgentId;
use cohort_core::ids::TaskId;
use cohort_core::policy::Repair;
use cohort_core::state::{ExecutionState, TaskState, TokenUsage, WorkingState};
use cohort_store::Store;
use serde_json::Value;
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;
use tokio::time::Instant;

#[derive(Clone)]
pub struct RunOptions {
    pub manager: Option<AgentId>,
    pub max_steps: Option<usize>,
    pub timeout: Duration,
    /// With no step running anywhere and nothing published for this long, the team is stuck.
    pub stall_after: Duration,
    /// End the run (cleanly: servers stopped) on Ctrl-C / SIGINT.
    pub stop_on_ctrl_c: bool,
    /// Keep the team's state here (`cohort run --data`); None: memory only.
    pub store: Option<Arc<dyn Store>>,
    /// The caller's trace (the `TRACEPARENT` environment variable, as OpenTelemetry passes a
    /// trace context to a command): the goal's work joins it.
    pub traceparent: Option<TraceParent>,
    /// The recorded task and step the goal's tasks fork (`cohort replay --fork-at`): each is
    /// marked so before the run ends.
    pub forked_from: Option<cohort_core::state::ForkedFrom>,
    /// A scripted operator's answers (`cohort eval`): each question an agent asks a person
    /// and waits on gets the next (see `run::operator`). None: questions wait, as with
    /// nobody there.
    pub answers: Vec<String>,
    /// Files given with the goal (`cohort run --attach`), already kept in `store`.
    pub attachments: Vec<cohort_core::attachment::Attachment>,
    /// How the bundled servers open `store` to read those files (a URL, or an absolute path).
    pub store_spec: Option<String>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            manager: None,
            max_steps: None,
            timeout: Duration::from_secs(600),
            stall_after: Duration::from_secs(10),
            stop_on_ctrl_c: false,
            store: None,
            traceparent: None,
            forked_from: None,
            answers: Vec::new(),
            attachments: Vec::new(),
            store_spec: None,
        }
    }
}

/// How a run ended.
#[derive(Clone, Debug, PartialEq)]
pub enum RunOutcome {
    Finished,
    Failed,
    TimedOut,
    MaxSteps(usize),
    /// Nothing runs and nothing changes, but the task is not over.
    Stalled,
    /// The operator pressed Ctrl-C.
    Interrupted,
}

impl RunOutcome {
    /// How the run ended, in a few words, in the language of `t`.
    pub fn describe(&self, timeout: Duration, t: &cohort_core::texts::Texts) -> String {
        match self {
            RunOutcome::Finished => t.run_finished(),
            RunOutcome::Failed => t.run_failed(),
            RunOutcome::TimedOut => t.run_timed_out(timeout.as_secs()),
            RunOutcome::MaxSteps(1) => t.run_max_step(),
            RunOutcome::MaxSteps(n) => t.run_max_steps(n),
            RunOutcome::Stalled => t.run_stalled(),
            RunOutcome::Interrupted => t.run_interrupted(),
        }
    }

    /// The process exit code `cohort run` gives for this outcome (listed in its `--help`).
    pub fn exit_code(&self) -> u8 {
        match self {
            RunOutcome::Finished => 0,
            RunOutcome::Failed => 1,
            RunOutcome::TimedOut | RunOutcome::MaxSteps(_) | RunOutcome::Stalled => 2,
            // 128 + SIGINT, as shells expect of a program stopped by Ctrl-C.
            RunOutcome::Interrupted => 130,
        }
    }
}

#[derive(Debug)]
pub struct RunReport {
    pub outcome: RunOutcome,
    /// The tasks the manager created for the goal, in the order they appeared.
    pub tasks: Vec<TaskState>,
    /// `{"task": {…}, "stage": {…}, "agent": {…}, "step": {…}}`, the final states.
    pub states: Value,
    pub steps_run: usize,
    /// Tokens every agent spent during the run (also on steps of no task the goal made, and on
    /// answers asked again).
    pub tokens: TokenUsage,
    /// What those tokens cost in USD, when the agents' LLM configs give prices.
    pub cost_usd: Option<f64>,
    /// How many times each repair rule fired on the goal's work (its tasks' steps and the
    /// manager's steps on the goal itself).
    pub repairs: BTreeMap<Repair, u64>,
    /// What the team waits for people to do at the end (why a run stalls when it needs a
    /// person: `cohort run` has nobody to answer).
    pub waiting: Vec<PersonWait>,
}

/// The repairs counted in the base task (where a goal is acted on) so far.
fn base_repairs(s: &States, base: &TaskId) -> BTreeMap<Repair, u64> {
    s.tasks
        .get(base)
        .map(|t| t.repairs.clone())
        .unwrap_or_default()
}

/// What each of the team's agents has spent so far.
fn spent(s: &States) -> BTreeMap<AgentId, TokenUsage> {
    s.agents
        .iter()
        .map(|(id, a)| (id.clone(), a.token_usage))
        .collect()
}

/// The tokens spent between two readings, and their cost when the models that spent them have
/// a price (each answer carries its cost, see `llm::priced`).
fn spent_between(
    before: &BTreeMap<AgentId, TokenUsage>,
    after: &BTreeMap<AgentId, TokenUsage>,
) -> (TokenUsage, Option<f64>) {
    let mut total = TokenUsage::default();
    for (id, now) in after {
        total.add(now.since(before.get(id).copied().unwrap_or_default()));
    }
    (total, (total.cost_usd > 0.0).then_some(total.cost_usd))
}

/// Runs one goal to its end. Must run inside an actix system; the team's actors stay up until
/// the caller stops the system. `on_progress` sees every step as it ends, every stage as it
/// starts and ends, and after a quiet spell what is still running.
///
/// It follows the monitor's change stream: it wakes on each change, never polls, and reads the
/// outcome and the step count from the monitor's exact states and counters, so a burst of
/// changes that outruns it can cost progress lines but never a wrong result.
pub async fn run_goal(
    cfg: &TeamConfig,
    goal: &str,
    opts: &RunOptions,
    host: &Host<'_>,
    mut on_progress: impl FnMut(Progress<'_>),
) -> Result<RunReport, SystemError> {
    let stored = match &opts.store {
        Some(store) => {
            let loaded = cohort_store::load(store.as_ref())
                .await
                .map_err(|e| SystemError::Resume(e.to_string()))?;
            Some((store.clone(), loaded))
        }
        None => None,
    };
    // The limit is held where steps start, so no agent starts one past it.
    let steps = opts
        .max_steps
        .map_or_else(StepAllowance::unlimited, |n| StepAllowance::of(n as u64));
    let team = start_team_limited(cfg, host, stored, steps)?;
    // Tasks a stored team had before this run are not this goal's.
    let before = Before(team.monitor.read(|s| {
        s.tasks
            .keys()
            .cloned()
            .chain(s.summaries().map(|t| t.task_id.clone()))
            .collect()
    }));
    let spent_before = team.monitor.read(spent);
    let base_before = team.monitor.read(|s| base_repairs(s, &team.base_task));
    let mut events = team.monitor.subscribe();
    team.submit_goal_traced(
        opts.manager.as_ref(),
        goal,
        (opts.traceparent, opts.attachments.clone()),
    )
    .await?;

    let mut tracker = progress::Tracker::new();
    let mut outcome = follow(
        &team,
        opts,
        &before,
        &mut events,
        &mut tracker,
        &mut on_progress,
    )
    .await;
    team.wait_for_running_steps(Duration::from_secs(3)).await;
    // Report what landed while settling (e.g. the finish_task step itself).
    loop {
        match events.try_recv() {
            Ok(ev) => tracker.on_event(&team, &ev.event, &mut on_progress),
            Err(tokio::sync::broadcast::error::TryRecvError::Lagged(_)) => continue,
            Err(_) => break,
        }
    }
    // A step limit that hit as the last step landed, or a stall the last answer ended: the
    // tasks' own end is the truth, when it came within the limit.
    let upgrade = match outcome {
        RunOutcome::MaxSteps(at) => team.monitor.read(|s| s.counters().steps_run) <= at as u64,
        RunOutcome::Stalled => true,
        _ => false,
    };
    if upgrade && let Some(o) = team.monitor.read(|s| concluded(s, &team, &before)) {
        outcome = o;
    }
    if let Some(from) = &opts.forked_from {
        mark_forked(&team, &before, from).await;
    }
    // Every actor stops before the journal closes (in `report`): nothing lands unstored.
    team.stop_actors().await;
    team.shutdown().await;
    let report = report(&team, &before, (&spent_before, base_before), outcome);
    if let Some(store) = &opts.store {
        checkpoint(store.as_ref()).await;
    }
    Ok(report)
}

/// Marks each of the goal's tasks as forked `from` a recorded task's step.
async fn mark_forked(team: &Team, before: &Before, from: &cohort_core::state::ForkedFrom) {
    let tasks: Vec<TaskId> = team.monitor.read(|s| {
        goal_tasks(s, team, before)
            .map(|t| t.task_id.clone())
            .collect()
    });
    for task_id in tasks {
        let marked = team.sync.send(crate::actors::MarkForked {
            task_id: task_id.clone(),
            from: from.clone(),
        });
        match marked.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(task = %task_id, "the fork was not marked: {e}"),
            Err(e) => tracing::warn!(task = %task_id, "the fork was not marked: {e}"),
        }
    }
}

/// On a clean stop (the run's end, `serve` stopped by a signal), after the monitor closed:
/// the store's main file is made to hold everything committed (SQLite's `-wal` copied in), so
/// copying that file alone copies the team. A failure is only logged: the data is safe in the
/// `-wal` file, which SQLite reads back on the next open.
pub async fn checkpoint(store: &dyn Store) {
    if let Err(e) = store.checkpoint().await {
        tracing::warn!("the store's -wal file was not copied into its main file: {e}");
    }
}

/// Follows the team's changes (showing progress) until the goal's tasks are over, a limit
/// hits, the team stalls or the operator interrupts; how the run ended.
async fn follow(
    team: &Team,
    opts: &RunOptions,
    before: &Before,
    events: &mut FeedReceiver,
    tracker: &mut progress::Tracker,
    on_progress: &mut impl FnMut(Progress<'_>),
) -> RunOutcome {
    let deadline = Instant::now() + opts.timeout;
    let mut operator = operator::ScriptedOperator::new(&opts.answers);
    let mut last_event = Instant::now();
    let mut not_shown = 0u64;
    let outcome = loop {
        tokio::select! {
            ev = events.recv() => match ev {
                Ok(ev) => {
                    last_event = Instant::now();
                    tracker.on_event(team, &ev.event, on_progress);
                }
                Err(RecvError::Lagged(missed)) => not_shown += missed,
                Err(RecvError::Closed) => break RunOutcome::Stalled,
            },
            _ = tokio::time::sleep_until(deadline) => break RunOutcome::TimedOut,
            _ = ctrl_c(opts.stop_on_ctrl_c) => break RunOutcome::Interrupted,
            _ = tokio::time::sleep_until(tracker.quiet_deadline()) => {
                tracker.on_quiet(team, on_progress);
            }
            _ = tokio::time::sleep_until(last_event + opts.stall_after) => {
                let c = team.monitor.read(States::counters);
                if c.steps_running == 0 && team.steps.spent() {
                    // The allowance went on steps that ended without counting (dropped).
                    break RunOutcome::MaxSteps(c.steps_run as usize);
                }
                if c.agents_working == 0 && c.steps_running == 0 {
                    break RunOutcome::Stalled;
                }
                last_event = Instant::now();
            }
        }
        operator.answer(team).await;
        let (concluded, all_over, steps_run) = team.monitor.read(|s| {
            (
                concluded(s, team, before),
                all_over(s, team, before),
                s.counters().steps_run,
            )
        });
        if let Some(o) = concluded {
            break o;
        }
        if opts.max_steps.is_some_and(|m| steps_run >= m as u64) && !all_over {
            break RunOutcome::MaxSteps(steps_run as usize);
        }
    };
    if not_shown > 0 {
        tracing::warn!("progress fell behind the team: {not_shown} changes were not shown");
    }
    outcome
}

/// The run's report, from the team's final states.
/// `spent_before`, `base_before`: what the agents had spent and the base task's repairs when
/// the goal was given.
fn report(
    team: &Team,
    before: &Before,
    (spent_before, base_before): (&BTreeMap<AgentId, TokenUsage>, BTreeMap<Repair, u64>),
    outcome: RunOutcome,
) -> RunReport {
    let (tasks, steps_run): (Vec<TaskState>, usize) = team.monitor.read(|s| {
        let tasks = s
            .tasks_in_order()
            .into_iter()
            .filter(|t| t.task_id != team.base_task && !before.0.contains(&t.task_id))
            .cloned()
            .collect();
        (tasks, s.counters().steps_run as usize)
    });
    let repairs = goal_repairs(team, &tasks, base_before);
    let waiting = team.monitor.read(person_waits);
    let states = team.monitor.all();
    let spent_after = team.monitor.read(spent);
    let (tokens, cost_usd) = spent_between(spent_before, &spent_after);
    // Everything published is stored, with a last snapshot, before the run reports.
    team.monitor.close();
    RunReport {
        outcome,
        tasks,
        states,
        steps_run,
        tokens,
        cost_usd,
        repairs,
        waiting,
    }
}

/// The repairs made on the goal's work: in its tasks, and in the base task since the goal was
/// given (`base_before`: the base task's count then).
fn goal_repairs(
    team: &Team,
    tasks: &[TaskState],
    base_before: BTreeMap<Repair, u64>,
) -> BTreeMap<Repair, u64> {
    let mut repairs = team.monitor.read(|s| base_repairs(s, &team.base_task));
    for (rule, n) in base_before {
        repairs.entry(rule).and_modify(|m| *m = m.saturating_sub(n));
    }
    for t in tasks {
        for (rule, n) in &t.repairs {
            *repairs.entry(*rule).or_default() += n;
        }
    }
    repairs.retain(|_, n| *n > 0);
    repairs
}

/// A manager may split a goal into several tasks, one after another: the run is over when
/// every task it created is over and the managers have nothing left to do (a manager that
/// finishes one task and then adds the next is still working). It counts as finished only if
/// no task failed.
fn concluded(s: &States, team: &Team, before: &Before) -> Option<RunOutcome> {
    if !all_over(s, team, before) {
        return None;
    }
    let mut managers = goal_tasks(s, team, before)
        .map(|t| &t.task_manager)
        .chain(team.managers.iter());
    let busy = managers.any(|m| {
        s.agents
            .get(m)
            .is_some_and(|a| a.working_state != WorkingState::Idle)
    });
    if busy {
        return None;
    }
    let failed = goal_tasks(s, team, before).any(|t| t.execution_state == ExecutionState::Failed)
        || s.summaries()
            .filter(|t| !before.0.contains(&t.task_id))
            .any(|t| t.execution_state == ExecutionState::Failed);
    Some(if failed {
        RunOutcome::Failed
    } else {
        RunOutcome::Finished
    })
}

/// The tasks a stored team had when the run started.
struct Before(HashSet<TaskId>);

/// The tasks of the goal: every task but the base task and those there before (one run, one
/// goal).
fn goal_tasks<'a>(
    s: &'a States,
    team: &'a Team,
    before: &'a Before,
) -> impl Iterator<Item = &'a TaskState> {
    s.tasks
        .values()
        .filter(|t| t.task_id != team.base_task && !before.0.contains(&t.task_id))
}

/// Whether the run created tasks and every one of them is finished or failed.
fn all_over(s: &States, team: &Team, before: &Before) -> bool {
    let mut any = s.summaries().any(|t| !before.0.contains(&t.task_id));
    for t in goal_tasks(s, team, before) {
        if !t.execution_state.is_over() {
            return false;
        }
        any = true;
    }
    any
}

/// Resolves on Ctrl-C or SIGTERM when asked to watch for them; otherwise never.
async fn ctrl_c(watch: bool) {
    if !watch {
        std::future::pending::<()>().await;
    }
    stop_signal().await;
}

/// Ctrl-C (SIGINT) or SIGTERM: the operator or the system asks us to stop. Catching them lets
/// the caller stop MCP server children, which live in their own process groups and would
/// otherwise outlive us, and checkpoint the store. The handlers are installed by the call, not
/// when the future is first polled: a signal that comes between the two (right after `serve`
/// says it listens) is a clean stop too, never the default action's kill. Must be called
/// inside a tokio runtime.
pub fn stop_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let int = signal(SignalKind::interrupt());
        let term = signal(SignalKind::terminate());
        async move {
            match (int, term) {
                (Ok(mut int), Ok(mut term)) => {
                    tokio::select! {
                        _ = int.recv() => {}
                        _ = term.recv() => {}
                    }
                }
                (Ok(mut int), Err(_)) => {
                    int.recv().await;
                }
                _ => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        }
    }
    #[cfg(not(unix))]
    {
        async {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

#[cfg(test)]
mod cost_tests {
    use super::*;
    use cohort_core::config::load_team;

    /// An empty folder for one test (the process id keeps runs apart), removed with everything
    /// in it when the test drops it.
    fn tmp(tag: &str) -> TestDir {
        let d = std::env::temp_dir().join(format!("cohort-run-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        TestDir(d)
    }

    /// A test's folder; removed when dropped, so repeated runs leave nothing in the temp dir.
    struct TestDir(std::path::PathBuf);

    impl std::ops::Deref for TestDir {
        type Target = std::path::Path;
        fn deref(&self) -> &std::path::Path {
            &self.0
        }
    }

    impl Drop for TestDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// Writes `text` to `dir/name` and returns its path.
    fn write(dir: &std::path::Path, name: &str, text: &str) -> std::path::PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn a_runs_tokens_and_cost_are_what_each_agent_spent_since_it_started() {
        let usage = |p, c, usd| TokenUsage {
            cost_usd: usd,
            ..TokenUsage::new(p, c)
        };
        let before = BTreeMap::from([(AgentId::from("m"), usage(1000, 0, 0.5))]);
        let after = BTreeMap::from([
            (AgentId::from("m"), usage(3000, 500, 2.5)),
            // An agent new since (a hire), or one whose model has no price (a person).
            (AgentId::from("h"), usage(10, 10, 0.0)),
        ]);
        let (tokens, cost) = spent_between(&before, &after);
        assert_eq!(
            (tokens.prompt_tokens, tokens.completion_tokens),
            (2010, 510)
        );
        assert!((cost.unwrap() - 2.0).abs() < 1e-9, "{cost:?}");
        let (_, cost) = spent_between(&before, &before);
        assert_eq!(cost, None, "nothing priced was spent");
    }

    #[test]
    fn a_price_needs_both_halves() {
        let d = tmp("run-cost");
        let half = "llm: {provider: openai, model: m, cost_per_1k_prompt: 0.5}\n\
                    agents:\n  - {id: m, role: manager, skills: [task_manager]}\n";
        let e = load_team(&write(&d, "half.yaml", half))
            .unwrap_err()
            .to_string();
        assert!(e.contains("cost_per_1k_completion"), "{e}");
    }
}
