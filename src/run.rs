//! `cohort run`: start a team, give the goal to a manager, follow the tasks it creates until
//! every one is finished or failed (or a limit hits), and report the final states.

use crate::actors::{Host, SystemError, Team, start_team};
use crate::config::TeamConfig;
use crate::ids::{AgentId, TaskId};
use crate::monitor::{StateEvent, StateKind};
use crate::state::{ExecutionState, StepExecutionState, StepState, TaskState, WorkingState};
use serde_json::Value;
use std::collections::HashSet;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;
use tokio::time::Instant;

#[derive(Clone, Debug)]
pub struct RunOptions {
    pub manager: Option<AgentId>,
    pub max_steps: Option<usize>,
    pub timeout: Duration,
    /// With no step running anywhere and nothing published for this long, the team is stuck.
    pub stall_after: Duration,
    /// End the run (cleanly: servers stopped) on Ctrl-C / SIGINT.
    pub stop_on_ctrl_c: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            manager: None,
            max_steps: None,
            timeout: Duration::from_secs(600),
            stall_after: Duration::from_secs(10),
            stop_on_ctrl_c: false,
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
    pub fn describe(&self, timeout: Duration) -> String {
        match self {
            RunOutcome::Finished => "task finished".into(),
            RunOutcome::Failed => "task failed (or, of several tasks, one failed)".into(),
            RunOutcome::TimedOut => format!(
                "timed out after {}s before the task finished",
                timeout.as_secs()
            ),
            RunOutcome::MaxSteps(n) => {
                format!("stopped after {n} steps (--max-steps) before the task finished")
            }
            RunOutcome::Stalled => {
                "the team stalled: no agent has a step it can run, and the task is not over".into()
            }
            RunOutcome::Interrupted => "interrupted before the task finished".into(),
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
}

/// Runs one goal to its end. Must run inside an actix system; the team's actors stay up until
/// the caller stops the system. `on_step` sees every step as it finishes or fails.
pub async fn run_goal(
    cfg: &TeamConfig,
    goal: &str,
    opts: &RunOptions,
    host: &Host<'_>,
    mut on_step: impl FnMut(&StepState),
) -> Result<RunReport, SystemError> {
    let team = start_team(cfg, host)?;
    let mut events = team.monitor.subscribe();
    team.submit_goal(opts.manager.as_ref(), goal).await?;

    let deadline = Instant::now() + opts.timeout;
    let mut tasks: Vec<TaskId> = Vec::new();
    let mut over: HashSet<String> = HashSet::new();
    let mut last_event = Instant::now();
    let outcome = loop {
        let stall_check = tokio::time::sleep(Duration::from_millis(250));
        tokio::select! {
            ev = events.recv() => match ev {
                Ok(ev) => {
                    last_event = Instant::now();
                    if let Some(o) = observe(&team, &ev, &mut tasks, &mut over, &mut on_step, opts) {
                        break o;
                    }
                    if let Some(o) = concluded(&team, &tasks) {
                        break o;
                    }
                }
                // Fell behind: the index still has every latest state, so just go on.
                Err(RecvError::Lagged(_)) => continue,
                Err(RecvError::Closed) => break RunOutcome::Stalled,
            },
            _ = tokio::time::sleep_until(deadline) => break RunOutcome::TimedOut,
            _ = ctrl_c(opts.stop_on_ctrl_c) => break RunOutcome::Interrupted,
            _ = stall_check => {
                if last_event.elapsed() >= opts.stall_after && !anyone_working(&team) {
                    break RunOutcome::Stalled;
                }
            }
        }
    };
    wait_for_running_steps(&team, Duration::from_secs(3)).await;
    // Report what landed while settling (e.g. the finish_task step itself).
    while let Ok(ev) = events.try_recv() {
        if ev.kind == StateKind::Step {
            count_step(&ev, &mut over, &mut on_step);
        }
    }
    team.shutdown().await;
    let tasks = tasks
        .iter()
        .filter_map(|t| team.monitor.get(StateKind::Task, t.as_str()))
        .filter_map(|v| serde_json::from_value(v).ok())
        .collect();
    Ok(RunReport {
        outcome,
        tasks,
        states: team.monitor.all(),
        steps_run: over.len(),
    })
}

fn observe(
    team: &Team,
    ev: &StateEvent,
    tasks: &mut Vec<TaskId>,
    over: &mut HashSet<String>,
    on_step: &mut impl FnMut(&StepState),
    opts: &RunOptions,
) -> Option<RunOutcome> {
    match ev.kind {
        StateKind::Step => {
            if count_step(ev, over, on_step)
                && opts.max_steps.is_some_and(|m| over.len() >= m)
                && !all_over(team, tasks)
            {
                return Some(RunOutcome::MaxSteps(over.len()));
            }
            None
        }
        StateKind::Task if ev.id != team.base_task.as_str() => {
            let id = TaskId::from(ev.id.as_str());
            if !tasks.contains(&id) {
                tasks.push(id);
            }
            None
        }
        _ => None,
    }
}

/// A manager may split a goal into several tasks, one after another: the run is over when
/// every task it created is over and the managers have nothing left to do (a manager that
/// finishes one task and then adds the next is still working). It counts as finished only if
/// no task failed.
fn concluded(team: &Team, tasks: &[TaskId]) -> Option<RunOutcome> {
    if !all_over(team, tasks) {
        return None;
    }
    let managers = tasks
        .iter()
        .filter_map(|t| team.monitor.get(StateKind::Task, t.as_str()))
        .filter_map(|t| {
            t.get("task_manager")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .chain(team.managers.iter().map(|m| m.to_string()));
    let busy = managers.into_iter().any(|m| {
        team.monitor
            .get(StateKind::Agent, &m)
            .and_then(|a| serde_json::from_value::<WorkingState>(a["working_state"].clone()).ok())
            .is_some_and(|w| w != WorkingState::Idle)
    });
    if busy {
        return None;
    }
    let failed = tasks
        .iter()
        .any(|t| state_of(team, t) == Some(ExecutionState::Failed));
    Some(if failed {
        RunOutcome::Failed
    } else {
        RunOutcome::Finished
    })
}

fn state_of(team: &Team, task: &TaskId) -> Option<ExecutionState> {
    team.monitor
        .get(StateKind::Task, task.as_str())
        .and_then(|v| serde_json::from_value::<TaskState>(v).ok())
        .map(|t| t.execution_state)
}

/// Whether the run created tasks and every one of them is finished or failed.
fn all_over(team: &Team, tasks: &[TaskId]) -> bool {
    !tasks.is_empty()
        && tasks
            .iter()
            .all(|t| state_of(team, t).is_some_and(ExecutionState::is_over))
}

/// Counts a step that ran to its end (once); steps dropped before they ran do not count.
fn count_step(
    ev: &StateEvent,
    over: &mut HashSet<String>,
    on_step: &mut impl FnMut(&StepState),
) -> bool {
    let Ok(step) = serde_json::from_value::<StepState>(ev.state.clone()) else {
        return false;
    };
    if step.execution_state.is_over() && !step.was_dropped() && over.insert(ev.id.clone()) {
        on_step(&step);
        return true;
    }
    false
}

fn anyone_working(team: &Team) -> bool {
    team.monitor.snapshot(StateKind::Agent).values().any(|a| {
        a.get("working_state")
            .and_then(|w| serde_json::from_value::<WorkingState>(w.clone()).ok())
            == Some(WorkingState::Working)
    })
}

/// Lets steps in flight land (finish_task cleanup, answers on their way), so reported states
/// are settled ones. Bounded: a real LLM step may still be running when `max` is up.
pub async fn wait_for_running_steps(team: &Team, max: Duration) {
    let until = Instant::now() + max;
    loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let running = team.monitor.snapshot(StateKind::Step).values().any(|s| {
            s.get("execution_state")
                .and_then(|v| serde_json::from_value::<StepExecutionState>(v.clone()).ok())
                == Some(StepExecutionState::Running)
        });
        if !running || Instant::now() >= until {
            return;
        }
    }
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
/// otherwise outlive us.
pub async fn stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            },
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
