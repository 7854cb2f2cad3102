//! The benchmark scenarios, each run in a process of its own (so its peak memory is its own)
//! and answering one JSON object of figures.

use super::team::{Scratch, TeamShape, write_team};
use crate::actors::{Deliver, Dispatcher, Host, Register, SyncStateActor, start_team};
use crate::config::load_team;
use crate::ids::{AgentId, StageId, StageRef, TaskId, WaitId};
use crate::llm::{ChatModel, ChatRequest};
use crate::message::Message;
use crate::monitor::Monitor;
use crate::prompt::{PromptContext, PromptSet, build_prompt};
use crate::run::{RunOptions, run_goal};
use crate::state::{Agent, AgentState, Executor, Skill, StepState};
use crate::step::{complete_step, settle_step};
use crate::team::{Member, SyncCore};
use actix::prelude::*;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub type Figures = Result<Value, String>;

/// Peak and current resident memory of this process, in MiB (Linux; 0 elsewhere).
pub fn rss_mib() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

fn host_exe() -> std::path::PathBuf {
    std::env::current_exe().unwrap_or_else(|_| "cohort".into())
}

/// N workers × `steps` think steps in one stage (`cohort run`, end to end).
pub fn workers(workers: usize, steps: usize, delay_ms: u64, max_in_flight: usize) -> Figures {
    let scratch = Scratch::new(&format!("workers-{workers}")).map_err(|e| e.to_string())?;
    let shape = TeamShape {
        workers,
        steps,
        delay_ms,
        max_in_flight,
        goals: 1,
    };
    let team = write_team(&scratch.0, shape, None).map_err(|e| e.to_string())?;
    let cfg = load_team(&team).map_err(|e| e.to_string())?;
    let opts = RunOptions {
        timeout: Duration::from_secs(900),
        stall_after: Duration::from_secs(60),
        ..RunOptions::default()
    };
    let vars = |_: &str| None;
    let host = Host::new(&vars, host_exe());
    let system = actix::System::new();
    let started = Instant::now();
    let report = system
        .block_on(async { run_goal(&cfg, "think together", &opts, &host, |_| {}).await })
        .map_err(|e| e.to_string())?;
    let seconds = started.elapsed().as_secs_f64();
    let (peak, _) = rss_mib();
    Ok(json!({
        "workers": workers,
        "seconds": seconds,
        "steps": report.steps_run,
        "outcome": format!("{:?}", report.outcome),
        "peak_rss_mib": peak,
    }))
}

/// A bench endpoint registered with the dispatcher in place of an agent: it counts what it
/// gets, forwards it to the driver, or answers a waiting message at once (no LLM, like
/// autogen-core's ping-pong agents).
struct Endpoint {
    id: AgentId,
    /// Where its receipts go, as an agent's would.
    monitor: Monitor,
    delivered: Arc<AtomicU64>,
    forward: Option<tokio::sync::mpsc::UnboundedSender<Arc<Message>>>,
    echo: Option<Addr<SyncStateActor>>,
}

impl Actor for Endpoint {
    type Context = Context<Self>;
}

impl Handler<Deliver> for Endpoint {
    type Result = ();
    fn handle(&mut self, Deliver(no, m): Deliver, _: &mut Context<Self>) {
        self.delivered.fetch_add(1, Ordering::Relaxed);
        self.monitor.publish(vec![crate::event::Change::Agent(
            crate::event::AgentChange::Received {
                agent_id: self.id.clone(),
                message_no: no,
            },
        )]);
        if let Some(tx) = &self.forward {
            let _ = tx.send(m);
        } else if let (Some(d), Some(w)) = (&self.echo, m.wait_id_for(&"echo".into())) {
            let mut reply = Message::notice(
                m.task_id.clone(),
                "echo".into(),
                vec![m.sender_id.clone()],
                StageRef::NoRelative,
                "pong".into(),
            );
            reply.return_waiting_id = Some(w.clone());
            d.do_send(crate::actors::SubmitMessage(reply));
        }
    }
}

/// Messages through SyncState (recording each in the conversation pool, the monitor publishing
/// it) and the dispatcher: fire-and-forget to 100 receivers, and waiting round trips.
pub fn messages(messages: usize, round_trips: usize) -> Figures {
    let system = actix::System::new();
    system.block_on(async move {
        let mut bench = MessageBench::start();
        let broadcast = bench.broadcast(messages).await;
        let pingpong = bench.pingpong(round_trips).await?;
        let (peak, _) = rss_mib();
        Ok(json!({ "broadcast": broadcast, "pingpong": pingpong, "peak_rss_mib": peak }))
    })
}

/// SyncState and the dispatcher with endpoints in place of agents: 100 sinks, a pinger that
/// forwards what it gets to the bench, and an echo that answers a waiting message at once.
struct MessageBench {
    monitor: Monitor,
    sync: Addr<SyncStateActor>,
    task: TaskId,
    sinks: Vec<AgentId>,
    /// Deliveries to the sinks.
    delivered: Arc<AtomicU64>,
    /// What the pinger got.
    replies: tokio::sync::mpsc::UnboundedReceiver<Arc<Message>>,
}

impl MessageBench {
    /// Must run inside an actix system.
    fn start() -> Self {
        let monitor = Monitor::new(65_536);
        let sinks: Vec<AgentId> = (0..100)
            .map(|i| AgentId::from(format!("s{i:03}")))
            .collect();
        let roster = sinks
            .iter()
            .cloned()
            .chain(["pinger".into(), "echo".into()])
            .map(|id: AgentId| Member::new(id, "endpoint"))
            .collect();
        let core = SyncCore::new(roster, &[], &[]);
        let task = core.base_task().clone();
        let dispatcher = Dispatcher::new(monitor.clone()).start();
        let sync = SyncStateActor::new(core, dispatcher.clone(), monitor.clone(), None).start();
        let delivered = Arc::new(AtomicU64::new(0));
        let endpoint = |id: &str, delivered, forward, echo| {
            let e = Endpoint {
                id: id.into(),
                monitor: monitor.clone(),
                delivered,
                forward,
                echo,
            }
            .start();
            dispatcher.do_send(Register(id.into(), e.recipient()));
        };
        for id in &sinks {
            endpoint(id.as_str(), delivered.clone(), None, None);
        }
        let (tx, replies) = tokio::sync::mpsc::unbounded_channel();
        endpoint("pinger", Arc::default(), Some(tx), None);
        endpoint("echo", Arc::default(), None, Some(sync.clone()));
        MessageBench {
            monitor,
            sync,
            task,
            sinks,
            delivered,
            replies,
        }
    }

    /// Fire and forget: every message to all 100 receivers, at two sizes.
    async fn broadcast(&self, messages: usize) -> Vec<Value> {
        let mut broadcast = Vec::new();
        let mut recorded_before = 0u64;
        for n in [messages / 4, messages] {
            let before = self.delivered.load(Ordering::Relaxed);
            let started = Instant::now();
            for i in 0..n {
                let m = Message::notice(
                    self.task.clone(),
                    "pinger".into(),
                    self.sinks.clone(),
                    StageRef::NoRelative,
                    format!("m{i}"),
                );
                self.sync.do_send(crate::actors::SubmitMessage(m));
            }
            let want = before + (n * self.sinks.len()) as u64;
            while self.delivered.load(Ordering::Relaxed) < want {
                tokio::time::sleep(Duration::from_micros(200)).await;
            }
            let delivered_in = started.elapsed().as_secs_f64();
            // Recorded too: the conversation pool counts every message (kept or trimmed).
            let want_recorded = recorded_before + n as u64;
            while self.recorded() < want_recorded {
                tokio::time::sleep(Duration::from_micros(200)).await;
            }
            recorded_before = want_recorded;
            let recorded_in = started.elapsed().as_secs_f64();
            broadcast.push(json!({
                "messages": n,
                "deliveries": n * self.sinks.len(),
                "deliveries_per_s": (n * self.sinks.len()) as f64 / delivered_in,
                "recorded_per_s": n as f64 / recorded_in,
            }));
        }
        broadcast
    }

    /// The messages the task's conversation pool has counted (kept or trimmed).
    fn recorded(&self) -> u64 {
        self.monitor.read(|s| {
            s.tasks.get(&self.task).map_or(0, |t| {
                t.shared_conversation_pool.len() as u64 + t.shared_conversation_omitted
            })
        })
    }

    /// Waiting round trips, one at a time, at two sizes.
    async fn pingpong(&mut self, round_trips: usize) -> Result<Vec<Value>, String> {
        let mut pingpong = Vec::new();
        for n in [round_trips / 4, round_trips] {
            let mut took = Vec::with_capacity(n);
            let started = Instant::now();
            for _ in 0..n {
                let wait = WaitId::random();
                let mut m = Message::notice(
                    self.task.clone(),
                    "pinger".into(),
                    vec!["echo".into()],
                    StageRef::NoRelative,
                    "ping".into(),
                );
                m.need_reply = true;
                m.waiting = Some(vec![wait.clone()]);
                let t = Instant::now();
                self.sync.do_send(crate::actors::SubmitMessage(m));
                loop {
                    match self.replies.recv().await {
                        Some(r) if r.return_waiting_id.as_ref() == Some(&wait) => break,
                        Some(_) => continue,
                        None => return Err("the pinger endpoint went away".to_owned()),
                    }
                }
                took.push(t.elapsed());
            }
            let per_s = n as f64 / started.elapsed().as_secs_f64();
            took.sort_unstable();
            pingpong.push(json!({
                "round_trips": n,
                "per_s": per_s,
                "p50_us": micros(percentile(&took, 0.5)),
                "p99_us": micros(percentile(&took, 0.99)),
            }));
        }
        Ok(pingpong)
    }
}

fn percentile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Where a step-overhead run's traces go.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TracesTo {
    /// An OTLP/HTTP receiver in this process that takes every batch.
    Receiver,
    /// A port nobody listens on.
    Dead,
}

/// Starts a team's traces beside `monitor` on a runtime of their own (as `serve` runs them
/// beside the actors), sent to `to`.
fn start_traces(
    monitor: &Monitor,
    to: TracesTo,
) -> Result<(tokio::runtime::Runtime, crate::otel::Traces), String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let endpoint = rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        match to {
            TracesTo::Receiver => {
                let app = axum::Router::new().route(
                    "/v1/traces",
                    axum::routing::post(|| async { Vec::<u8>::new() }),
                );
                tokio::spawn(async move { axum::serve(listener, app).await });
            }
            TracesTo::Dead => drop(listener),
        }
        Ok::<_, std::io::Error>(format!("http://{addr}"))
    });
    let endpoint = endpoint.map_err(|e| e.to_string())?;
    // SAFETY: this child process runs one scenario; no other thread reads the environment
    // while it is set (the traces' runtime is idle, the monitor has no journal thread here).
    unsafe { std::env::set_var("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint) };
    let calls = std::sync::Arc::new(crate::llm::recorded::CallLog::default());
    let traces = rt
        .block_on(async {
            crate::otel::Traces::start(monitor, calls, TaskId::from("base"), "bench")
        })
        .map_err(|e| e.to_string())?
        .ok_or("traces did not start")?;
    Ok((rt, traces))
}

/// Sends the run's last spans (15 s at most): how many went out, were dropped and failed.
fn spans_sent((rt, traces): (tokio::runtime::Runtime, crate::otel::Traces)) -> (u64, u64, u64) {
    rt.block_on(traces.finish(std::time::Duration::from_secs(15)));
    let s = traces.stats();
    (s.exported(), s.dropped(), s.failed())
}

/// The monitor a step-overhead run publishes to, with a feed the size of a team's: writing
/// ahead to a SQLite file in `scratch` with `store`, else in memory only.
fn overhead_monitor(
    rt: &tokio::runtime::Runtime,
    scratch: &Scratch,
    store: bool,
) -> Result<Monitor, String> {
    let feed = crate::actors::MONITOR_BUFFER;
    if !store {
        return Ok(Monitor::new(feed));
    }
    let file = scratch.0.join("data.db");
    let store = rt
        .block_on(crate::store::SqlStore::open_sqlite(&file))
        .map_err(|e| e.to_string())?;
    Ok(Monitor::with_store(
        feed,
        std::sync::Arc::new(store),
        Default::default(),
        0,
    ))
}

/// The step path with no actor in between: pick → prompt → LLM (scripted, no delay) → parse
/// → apply (agent and SyncState) → publish, at a stage history of `history` finished steps.
/// With `store`, the monitor writes ahead to a SQLite file (the commit itself happens on the
/// journal's thread, which the step does not wait for; the run waits for all at the end).
pub fn step_overhead(
    history: usize,
    iterations: usize,
    (store, recorded): (bool, bool),
    traces: Option<TracesTo>,
) -> Figures {
    let scratch = Scratch::new("overhead").map_err(|e| e.to_string())?;
    let mut model: Arc<dyn ChatModel> = scripted_thoughts(&scratch, iterations + 1)?;
    let prompts = PromptSet::builtin(crate::prompt::Language::En);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let monitor = overhead_monitor(&rt, &scratch, store)?;
    if store {
        model = logged(model, &monitor, recorded);
    }
    let traced = traces.map(|to| start_traces(&monitor, to)).transpose()?;
    let mut sync = SyncCore::new(vec![Member::new("w", "worker")], &[], &[]);
    let (mut agent, think) = overhead_agent(&monitor, &sync, history)?;
    let mut took = Vec::with_capacity(iterations);
    for i in 0..iterations {
        agent.add_steps(vec![think(history + i)]);
        let t = Instant::now();
        one_step(
            &prompts,
            model.as_ref(),
            &mut sync,
            &monitor,
            &mut agent,
            history,
        )?;
        took.push(t.elapsed());
    }
    let committed = rt.block_on(monitor.durable(monitor.assigned_version()));
    monitor.close();
    let spans = traced.map(spans_sent);
    took.sort_unstable();
    Ok(json!({
        "history": history,
        "iterations": iterations,
        "store": store,
        "recorded": recorded,
        "all_committed": committed,
        "spans_exported": spans.map(|s| s.0),
        "spans_dropped": spans.map(|s| s.1),
        "spans_failed": spans.map(|s| s.2),
        "p50_us": micros(percentile(&took, 0.5)),
        "p99_us": micros(percentile(&took, 0.99)),
    }))
}

/// `model` as a team's models are: its calls in the team's call log; with `recorded`, each
/// also on its way to `monitor`'s store.
fn logged(model: Arc<dyn ChatModel>, monitor: &Monitor, recorded: bool) -> Arc<dyn ChatModel> {
    let log = Arc::new(crate::llm::recorded::CallLog::default());
    if recorded {
        monitor.record_calls(&log, 16 << 20);
    }
    crate::llm::recorded::Recorded::new(model, log, "scripted/bench")
}

/// The bench's agent, published with its task, and `history` finished think steps of its
/// stage; and the maker of its next think steps (numbered).
fn overhead_agent(
    monitor: &Monitor,
    sync: &SyncCore,
    history: usize,
) -> Result<(Agent, impl Fn(usize) -> StepState + use<>), String> {
    let task = TaskId::from("t");
    let stage = StageRef::Stage(StageId::from("s"));
    let mut agent = Agent::from(AgentState::new(
        "w".into(),
        "W".into(),
        "worker".into(),
        "thinks".into(),
    ));
    agent.skills = vec![
        Skill::Think,
        Skill::Planning,
        Skill::Reflection,
        Skill::Summary,
    ];
    agent.note_working_memory(task.clone(), Some(stage.clone()));
    monitor.publish(sync.initial_changes());
    // The task the steps are of, so that a step that leaves the agent is kept a while as a
    // team's readers keep it (retired), not forgotten at once.
    let made = crate::state::TaskState::new(task.clone(), "t".into(), "t".into(), "m".into());
    monitor.publish(vec![crate::event::Change::Task(
        crate::event::TaskChange::Created {
            task: Box::new(made),
        },
    )]);
    monitor.publish(vec![agent.added()]);
    let think = move |i: usize| {
        StepState::new(
            task.clone(),
            stage.clone(),
            "w".into(),
            Executor::Skill(Skill::Think),
            format!("think {i}"),
            "Think about the goal.",
        )
    };
    // The history: finished steps of the stage.
    for i in 0..history {
        agent.add_steps(vec![think(i)]);
        let s = agent.start_next().ok_or("no step")?;
        settle_step(&mut agent, &s.step_id, None, &[]);
    }
    monitor.publish(agent.take_changes());
    Ok((agent, think))
}

/// One measured step: the agent's next step starts, its model answers, the answer is applied
/// (agent and SyncState) and published; the oldest step leaves, so the history keeps its length.
fn one_step(
    prompts: &PromptSet,
    model: &dyn ChatModel,
    sync: &mut SyncCore,
    monitor: &Monitor,
    agent: &mut Agent,
    history: usize,
) -> Result<(), String> {
    let step = agent.start_next().ok_or("no step")?;
    let request = think_request(prompts, model, agent, &step);
    let reply = futures::executor::block_on(model.chat(request)).map_err(|e| e.to_string());
    let now = crate::clock::Now::current();
    let crate::step::Completion::Done(done) =
        complete_step(agent, &step.step_id, reply, now, false)
    else {
        return Err("a scripted answer could not be used".into());
    };
    let applied = sync.apply(&done.output, "now");
    settle_step(agent, &step.step_id, done.failure, &done.added_waits);
    // Keep the history where it is: the oldest step leaves as the new one lands.
    if let Some(old) = agent.agent_step.steps().first().map(|s| s.step_id.clone())
        && (history > 0 || old != step.step_id)
    {
        agent.remove_step(&old);
    }
    agent.refresh_working_state();
    monitor.publish(applied.changes);
    monitor.publish(agent.take_changes());
    Ok(())
}

/// A scripted model with `n` think answers for agent `w`.
fn scripted_thoughts(
    scratch: &Scratch,
    n: usize,
) -> Result<Arc<crate::llm::scripted::ScriptedModel>, String> {
    let script = scratch.0.join("script.yaml");
    let replies: String = (0..n)
        .map(|i| format!("      - \"<think>thought {i}</think>\"\n"))
        .collect();
    std::fs::write(&script, format!("replies:\n  w:\n    think:\n{replies}"))
        .map_err(|e| e.to_string())?;
    Ok(crate::llm::scripted::ScriptedModel::new(
        crate::llm::scripted::Script::load(&script).map_err(|e| e.to_string())?,
    ))
}

/// The think step's call as the agent actor makes it: its prompt, with the answer's schema
/// when the model may constrain by it.
fn think_request(
    prompts: &PromptSet,
    model: &dyn ChatModel,
    agent: &Agent,
    step: &StepState,
) -> ChatRequest {
    let prompt = build_prompt(
        prompts,
        Skill::Think,
        &PromptContext {
            agent,
            step,
            tool_descriptions: &BTreeMap::new(),
            tool_step: None,
            tool_capabilities: None,
            tool_history: None,
            budget: None,
            tokens: crate::prompt::tokens::TokenCounter::Estimate,
            constrained: model.constrains_answers(),
        },
    );
    let answer_format = (model.constrains_answers()
        && crate::skills::answer_schema::constrained(Skill::Think))
    .then(|| crate::llm::AnswerFormat {
        name: Skill::Think.name().to_owned(),
        schema: crate::skills::answer_schema::answer_schema(Skill::Think, agent, step, &[]),
    });
    ChatRequest {
        system: prompt.system,
        prompt: prompt.user,
        answer_format,
        tools: Vec::new(),
        rounds: Vec::new(),
        images: Vec::new(),
        agent_id: "w".into(),
        skill: "think".into(),
        task_id: step.task_id.clone(),
        stage_id: step.stage_id.clone(),
        step_id: step.step_id.clone(),
        template: None,
        step_text: step.asks(),
        progress: None,
        model_wait: None,
        retry: 0,
        mending: crate::llm::Mending::of(&agent.settings.repairs),
        // As an agent's calls: recording reads the count at the ask and the answer.
        intake: Some(Default::default()),
    }
}

/// Memory of idle agents: a team of `agents` started, nothing to do.
pub fn idle_agents(agents: usize) -> Figures {
    let scratch = Scratch::new("idle").map_err(|e| e.to_string())?;
    let shape = TeamShape {
        workers: agents,
        steps: 0,
        delay_ms: 0,
        max_in_flight: 64,
        goals: 0,
    };
    let team = write_team(&scratch.0, shape, None).map_err(|e| e.to_string())?;
    let cfg = load_team(&team).map_err(|e| e.to_string())?;
    let vars = |_: &str| None;
    let host = Host::new(&vars, host_exe());
    let system = actix::System::new();
    system.block_on(async {
        let (_, before) = rss_mib();
        let started = Instant::now();
        let team = start_team(&cfg, &host).map_err(|e| e.to_string())?;
        // Every agent (and the manager) published itself: all are up.
        while team.monitor.read(|s| s.agents.len()) < agents + 1 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let up = started.elapsed().as_secs_f64();
        tokio::time::sleep(Duration::from_millis(200)).await;
        let (_, after) = rss_mib();
        Ok(json!({
            "agents": agents,
            "start_seconds": up,
            "rss_before_mib": before,
            "rss_after_mib": after,
            "kib_per_agent": (after - before) * 1024.0 / agents as f64,
        }))
    })
}
