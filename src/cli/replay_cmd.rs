//! `cohort replay`: run a recorded run again with every model call answered from its record
//! (no model is asked, no key is needed), then say whether the replayed run ended in the same
//! states and where a prompt first differed from the recorded one (a changed prompt
//! template, a changed skill: its effect shows without a model).

use super::data::DataArgs;
use anyhow::Context as _;
use cohort::actors::Host;
use cohort::config::load_team;
use cohort::llm::recorded::Call;
use cohort::llm::replay::Record;
use cohort::mcp::McpCall;
use cohort::mcp::replay::ToolRecord;
use cohort::run::{RunOptions, run_goal};
use std::path::Path;
use std::time::Duration;

/// How many differing states the report shows.
const SHOWN: usize = 8;

/// Replays the run recorded in `data` with the team file `team` (its tool calls answered from
/// the record too, unless `live_tools`); exit 0 when the replayed run asked what the recorded
/// one did and ended the same, 1 when it did not.
pub async fn replay(
    team: &Path,
    data: &DataArgs,
    timeout: Duration,
    live_tools: bool,
) -> anyhow::Result<u8> {
    let cfg = load_team(team).with_context(|| format!("loading {}", team.display()))?;
    let opened = data.open(None).await?.context(
        "name the recorded run's store: --data FILE (as `cohort run --data` wrote it) or --database URL",
    )?;
    let (calls, loaded, goal) = read_record(opened.store.as_ref()).await?;
    let recorded = loaded.all_json();
    let tools = (!live_tools).then(|| std::sync::Arc::new(tool_record(&loaded, &recorded)));
    // The store is let go: the replay keeps nothing.
    drop(opened);
    eprintln!(
        "Replaying {} recorded model calls of the goal: {}",
        calls.len(),
        goal.lines().next().unwrap_or_default()
    );
    let record = Record::new(calls);
    let vars = |k: &str| std::env::var(k).ok();
    let host = Host {
        replay: Some(record.clone()),
        replay_tools: tools.clone(),
        ..Host::new(
            &vars,
            std::env::current_exe().context("locating the cohort binary")?,
        )
    };
    // The replay keeps its states in a store of its own, as the recorded run did, so both
    // runs' final states are read back the same way.
    let scratch = std::env::temp_dir().join(format!("cohort-replay-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)?;
    let _gone = Removed(scratch.clone());
    let store: std::sync::Arc<dyn cohort::store::Store> = std::sync::Arc::new(
        cohort::store::SqlStore::open_sqlite(&scratch.join("replay.db")).await?,
    );
    let opts = RunOptions {
        timeout,
        store: Some(store.clone()),
        ..RunOptions::default()
    };
    let report = run_goal(&cfg, &goal, &opts, &host, |_| {}).await?;
    let replayed = cohort::store::load(store.as_ref()).await?.states.all_json();
    let divergences = record.divergences();
    let differences = record.state_differences(&recorded, &replayed, SHOWN);
    eprintln!(
        "{} calls answered from the record, {} recorded calls not asked for; the run {}.",
        record.served(),
        record.left(),
        report.outcome.describe(timeout)
    );
    let tools_left = match &tools {
        Some(t) => {
            eprintln!(
                "{} tool calls answered from the record, {} recorded tool calls not made.",
                t.served(),
                t.left()
            );
            t.left()
        }
        None => 0,
    };
    if let Some(first) = divergences.first() {
        eprintln!(
            "{} requests differ from the recorded ones; the first, {}'s {} call (its {}), at {}",
            divergences.len(),
            first.agent_id,
            first.skill,
            first.part,
            first.difference
        );
    }
    for d in &differences {
        eprintln!("DIFFERS {d}");
    }
    let same =
        divergences.is_empty() && differences.is_empty() && record.left() == 0 && tools_left == 0;
    if same {
        eprintln!(
            "The replayed run asked what the recorded one asked and ended in the same states."
        );
    }
    Ok(if same { 0 } else { 1 })
}

/// A folder removed when dropped.
struct Removed(std::path::PathBuf);

impl Drop for Removed {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The recorded calls, the final states and the goal the store holds.
async fn read_record(
    store: &dyn cohort::store::Store,
) -> anyhow::Result<(Vec<Call>, cohort::event::States, String)> {
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
    let loaded = cohort::store::load(store).await?;
    let goals: Vec<String> = loaded
        .states
        .tasks
        .values()
        .flat_map(|t| t.shared_conversation_pool.iter())
        .filter(|e| e.message.sender_id.as_str() == cohort::message::OPERATOR)
        .map(|e| e.message.message.clone())
        .collect();
    let goal = match goals.as_slice() {
        [one] => one.clone(),
        [] => anyhow::bail!("the store holds no goal given by the operator to replay"),
        many => anyhow::bail!(
            "the store holds {} goals; replay replays a run of one goal (as `cohort run --data` \
             records it)",
            many.len()
        ),
    };
    Ok((calls, loaded.states, goal))
}

/// The tool calls the recorded run's steps made (a tool step's, or one of a native tool
/// loop's), each with its outcome, in the order they started (`json`: the states as clients
/// read them, with their times).
fn tool_record(states: &cohort::event::States, json: &serde_json::Value) -> ToolRecord {
    let started = |id: &cohort::ids::StepId| json["step"][id.as_str()]["started_at"].as_i64();
    let mut made: Vec<_> = states
        .steps()
        .filter_map(|s| {
            let cohort::state::Executor::Tool(server) = &s.executor else {
                return None;
            };
            let call = McpCall::from_instruction(s.instruction_content.as_ref()?).ok()?;
            let result = s.execute_result.as_ref()?;
            let outcome = match &result.error {
                Some(e) => Err(e.clone()),
                None => Ok(serde_json::Value::Object(result.output.clone())),
            };
            Some((started(&s.step_id), (server.clone(), call, outcome)))
        })
        .collect();
    made.sort_by_key(|(at, _)| *at);
    ToolRecord::new(made.into_iter().map(|(_, c)| c))
}
