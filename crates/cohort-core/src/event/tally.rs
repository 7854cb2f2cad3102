//! What the team has done since this reader started, counted as the changes are applied, for
//! the metrics a server exposes (`GET /metrics`): steps that ended by executor and outcome,
//! how long they ran, the tokens and USD each agent's model spent, the repairs fired by rule
//! and the answers asked about again. Plain counts on plain data, one change at a time: a
//! scrape reads them and never scans the history.

use super::{Change, StepChange};
use crate::ids::AgentId;
use crate::state::{AgentState, StepExecutionState, StepResult, TokenUsage};
use std::collections::BTreeMap;

/// The upper bounds of the step-duration buckets, in seconds.
pub const STEP_SECONDS: &[f64] = &[
    0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0,
];

/// Label sets per family at most: beyond it (a team that hires without end, a tool server per
/// call), what is new is counted under [`OTHER`].
pub const LABEL_SETS: usize = 2_000;

/// The label of what was counted once a family held [`LABEL_SETS`].
pub const OTHER: &str = "_other";

/// How a step ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Outcome {
    /// Ran to its end.
    Finished,
    /// Could not be carried out.
    Failed,
    /// A person cancelled it, or its work ended while it ran.
    Cancelled,
    /// Removed before it ran, because its stage or task ended.
    Dropped,
}

impl Outcome {
    /// Its label in the metrics.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Finished => "finished",
            Outcome::Failed => "failed",
            Outcome::Cancelled => "cancelled",
            Outcome::Dropped => "dropped",
        }
    }
}

/// Observations in buckets: `counts[i]` of them were at most `STEP_SECONDS[i]` and above the
/// bound before (the last count is above every bound).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Histogram {
    /// How many fell in each bucket (not added up).
    pub counts: Vec<u64>,
    /// The observations added up.
    pub sum: f64,
    /// How many were observed.
    pub count: u64,
}

impl Histogram {
    /// Counts `value` in the first bucket of `bounds` that holds it.
    pub fn observe(&mut self, bounds: &[f64], value: f64) {
        if self.counts.len() != bounds.len() + 1 {
            self.counts = vec![0; bounds.len() + 1];
        }
        let at = bounds.partition_point(|b| *b < value);
        self.counts[at] += 1;
        self.sum += value;
        self.count += 1;
    }
}

/// The counts.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tally {
    /// Steps that ended, by executor (a skill's name, or a tool step's server) and outcome.
    pub steps: BTreeMap<(String, Outcome), u64>,
    /// How long the steps that ran ran (from their start to their end), by executor.
    pub step_seconds: BTreeMap<String, Histogram>,
    /// Tokens and USD, by agent and the model its calls went to (`provider/model`).
    pub usage: BTreeMap<(String, String), TokenUsage>,
    /// Repairs made to the answers of steps that ended, by rule.
    pub repairs: BTreeMap<String, u64>,
    /// Answers that could not be used and were asked about again, by executor.
    pub reasks: BTreeMap<String, u64>,
}

/// What a step update is about to change, read before it is applied.
pub(super) struct Seen {
    pub(super) step_id: crate::ids::StepId,
    executor: String,
    agent: String,
    model: String,
    spent: TokenUsage,
    usage: Option<TokenUsage>,
    ended: Option<(Outcome, Option<StepResult>)>,
}

impl Seen {
    /// What `c` changes that is counted, read from `agents` before it is applied.
    pub(super) fn of(c: &Change, agents: &BTreeMap<AgentId, AgentState>) -> Option<Seen> {
        let Change::Step(StepChange::Updated {
            agent_id,
            step_id,
            update,
        }) = c
        else {
            return None;
        };
        let agent = agents.get(agent_id)?;
        let step = agent.agent_step.get(step_id)?;
        let ended = update
            .execution_state
            .filter(|new| !step.execution_state.is_over() && new.is_over())
            .map(|new| {
                let result = update
                    .execute_result
                    .as_deref()
                    .or(step.execute_result.as_ref());
                let outcome = match new {
                    _ if result.is_some_and(|r| r.dropped) => Outcome::Dropped,
                    StepExecutionState::Finished => Outcome::Finished,
                    StepExecutionState::Cancelled => Outcome::Cancelled,
                    _ => Outcome::Failed,
                };
                (outcome, result.cloned())
            });
        if ended.is_none() && update.token_usage.is_none() {
            return None;
        }
        let model = agent
            .llm_config
            .as_ref()
            .map_or_else(String::new, |l| l.label());
        Some(Seen {
            step_id: step_id.clone(),
            executor: step.executor.name().to_owned(),
            agent: agent_id.to_string(),
            model,
            spent: step.token_usage,
            usage: update.token_usage,
            ended,
        })
    }
}

impl Tally {
    /// Counts what `seen` said the change did; `started_at` is when its step started (ms),
    /// `at` when the change was made.
    pub(super) fn note(&mut self, seen: Seen, started_at: Option<i64>, at: i64) {
        if let Some(now) = seen.usage {
            let spent = now.since(seen.spent);
            let key = bounded(&self.usage, (seen.agent, seen.model), || {
                (OTHER.into(), OTHER.into())
            });
            self.usage.entry(key).or_default().add(spent);
        }
        let Some((outcome, result)) = seen.ended else {
            return;
        };
        let executor = seen.executor;
        let key = bounded(&self.steps, (executor.clone(), outcome), || {
            (OTHER.into(), outcome)
        });
        *self.steps.entry(key).or_default() += 1;
        if let Some(started) = started_at.filter(|_| outcome != Outcome::Dropped) {
            let key = bounded(&self.step_seconds, executor.clone(), || OTHER.into());
            let secs = (at - started).max(0) as f64 / 1000.0;
            self.step_seconds
                .entry(key)
                .or_default()
                .observe(STEP_SECONDS, secs);
        }
        let Some(result) = result else {
            return;
        };
        for fired in &result.repairs {
            *self.repairs.entry(fired.rule.name()).or_default() += 1;
        }
        if !result.reasked.is_empty() {
            let key = bounded(&self.reasks, executor, || OTHER.into());
            *self.reasks.entry(key).or_default() += result.reasked.len() as u64;
        }
    }
}

/// `key`, or the catch-all `other()` when the family holds [`LABEL_SETS`] without it.
fn bounded<K: Ord, V>(family: &BTreeMap<K, V>, key: K, other: impl FnOnce() -> K) -> K {
    if family.len() >= LABEL_SETS && !family.contains_key(&key) {
        other()
    } else {
        key
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_histogram_counts_each_value_in_the_first_bucket_that_holds_it() {
        let mut h = Histogram::default();
        for v in [0.0, 0.01, 0.02, 2.0, 9999.0] {
            h.observe(STEP_SECONDS, v);
        }
        assert_eq!(h.count, 5);
        assert_eq!(h.counts[0], 2, "0 and 0.01 are at most 0.01");
        assert_eq!(h.counts[1], 1);
        assert_eq!(h.counts[6], 1, "2 s is in the 2.5 s bucket");
        assert_eq!(*h.counts.last().unwrap(), 1, "above every bound");
        assert!((h.sum - 10001.03).abs() < 1e-9);
    }

    #[test]
    fn a_family_that_is_full_counts_new_labels_as_other() {
        let mut family: BTreeMap<String, u64> = BTreeMap::new();
        for i in 0..LABEL_SETS {
            family.insert(i.to_string(), 1);
        }
        assert_eq!(bounded(&family, "7".into(), || OTHER.into()), "7");
        assert_eq!(bounded(&family, "new".into(), || OTHER.into()), OTHER);
    }
}
