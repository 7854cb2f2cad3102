//! What `cohort run` shows while its team works: each step as it ends (with how long it ran),
//! each stage as it starts and ends, and after a quiet spell what is still running, so a slow
//! LLM call never looks like a hang.

use crate::actors::Team;
use cohort_core::event::{Change, Event, StageChange, States, StepChange};
use cohort_core::ids::{AgentId, StepId};
use cohort_core::state::{ExecutionState, StageState, StepExecutionState, StepState};
use std::collections::HashMap;
use std::time::Duration;
use tokio::time::Instant;

/// One thing worth a line of progress.
pub enum Progress<'a> {
    /// A step ran to its end (finished, failed or cancelled); `took` is how long it ran, when
    /// the run saw it start.
    Step {
        step: &'a StepState,
        /// Its agent's name.
        agent: &'a str,
        took: Option<Duration>,
    },
    /// A stage started or ended, with its agents' names.
    Stage {
        stage: &'a StageState,
        agents: Vec<String>,
    },
    /// A step's model endpoint stopped answering: the step waits for it (the breaker's
    /// probes go on until it answers or `waits.model_secs` passes).
    ModelWait {
        step: &'a StepState,
        agent: &'a str,
        reason: &'a str,
    },
    /// Nothing ended for a while: the run's age and the steps running now, longest first.
    Waiting {
        elapsed: Duration,
        running: Vec<Running>,
    },
}

/// A step that is running, for [`Progress::Waiting`].
pub struct Running {
    /// Its agent's name.
    pub agent: String,
    pub executor: String,
    pub running_for: Duration,
}

/// How long without a line before the run says what is still running.
pub const QUIET: Duration = Duration::from_secs(30);

/// Follows the change stream for progress lines. Holds only the steps running now (a bounded
/// set: one per agent at most, plus steps waiting for a person).
pub(super) struct Tracker {
    started: HashMap<StepId, Instant>,
    run_start: Instant,
    last_line: Instant,
}

impl Tracker {
    pub(super) fn new() -> Self {
        let now = Instant::now();
        Tracker {
            started: HashMap::new(),
            run_start: now,
            last_line: now,
        }
    }

    fn tell_model_wait(
        &mut self,
        team: &Team,
        step_id: &cohort_core::ids::StepId,
        reason: &str,
        out: &mut impl FnMut(Progress<'_>),
    ) {
        if let Some((step, agent)) = team.monitor.read(|s| {
            let step = s.step(step_id)?;
            Some((step.clone(), name_of(s, &step.agent_id)))
        }) {
            self.last_line = Instant::now();
            out(Progress::ModelWait {
                step: &step,
                agent: &agent,
                reason,
            });
        }
    }

    /// When the run should say what is still running, if nothing else is shown before.
    pub(super) fn quiet_deadline(&self) -> Instant {
        self.last_line + QUIET
    }

    pub(super) fn on_event(&mut self, team: &Team, ev: &Event, out: &mut impl FnMut(Progress<'_>)) {
        match &ev.change {
            Change::Step(StepChange::Started { step_id, .. }) => {
                self.started.insert(step_id.clone(), Instant::now());
            }
            // Steps that leave without an end of their own are no longer running.
            Change::Step(StepChange::Removed { step_ids, .. }) => {
                for id in step_ids {
                    self.started.remove(id);
                }
            }
            Change::Step(StepChange::Updated {
                step_id, update, ..
            }) => {
                if let Some(Some(wait)) = &update.model_wait {
                    self.tell_model_wait(team, step_id, &wait.reason, out);
                }
                let Some(state) = update.execution_state else {
                    return;
                };
                if state == StepExecutionState::Running {
                    self.started
                        .entry(step_id.clone())
                        .or_insert_with(Instant::now);
                    return;
                }
                if !state.is_over() {
                    return;
                }
                let took = self.started.remove(step_id).map(|t| t.elapsed());
                // Steps dropped before they ran (their task ended) are not shown.
                let dropped = update.execute_result.as_ref().is_some_and(|r| r.dropped);
                if dropped {
                    return;
                }
                if let Some((step, agent)) = team.monitor.read(|s| {
                    let step = s.step(step_id)?;
                    Some((step.clone(), name_of(s, &step.agent_id)))
                }) {
                    self.last_line = Instant::now();
                    out(Progress::Step {
                        step: &step,
                        agent: &agent,
                        took,
                    });
                }
            }
            Change::Stage(StageChange::State {
                stage_id,
                execution_state,
            }) if *execution_state != ExecutionState::Init => {
                if let Some((stage, agents)) = team.monitor.read(|s| {
                    let stage = s.stages.get(stage_id)?;
                    let agents = stage.agent_allocation.keys().map(|a| name_of(s, a));
                    Some((stage.clone(), agents.collect()))
                }) {
                    self.last_line = Instant::now();
                    out(Progress::Stage {
                        stage: &stage,
                        agents,
                    });
                }
            }
            _ => {}
        }
    }

    /// Nothing was shown for [`QUIET`]: say what is running.
    pub(super) fn on_quiet(&mut self, team: &Team, out: &mut impl FnMut(Progress<'_>)) {
        self.last_line = Instant::now();
        // Steps whose end was missed (the stream lagged) or that left are forgotten here.
        team.monitor.read(|s| {
            self.started
                .retain(|id, _| s.step(id).is_some_and(|st| !st.execution_state.is_over()))
        });
        let mut running: Vec<Running> = team.monitor.read(|s| {
            self.started
                .iter()
                .filter_map(|(id, t)| {
                    let step = s.step(id)?;
                    Some(Running {
                        agent: name_of(s, &step.agent_id),
                        executor: step.executor.name().to_owned(),
                        running_for: t.elapsed(),
                    })
                })
                .collect()
        });
        running.sort_by_key(|r| std::cmp::Reverse(r.running_for));
        out(Progress::Waiting {
            elapsed: self.run_start.elapsed(),
            running,
        });
    }
}

/// How a line names an agent: by its name, or by its id when it has none.
fn name_of(s: &States, id: &AgentId) -> String {
    match s.agents.get(id) {
        Some(a) if !a.name.is_empty() => a.name.clone(),
        _ => id.to_string(),
    }
}
