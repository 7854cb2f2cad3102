//! `cohort bench`: runs every benchmark scenario and prints one table of figures beside the
//! targets they are held to. Each scenario runs in a child process of the same binary (so its
//! peak memory and its threads are its own) and answers one JSON object; the side-by-side
//! scenario runs autogen-core (Python) from a throwaway venv on the same machine.
//!
//! - [`team`]: the generated benchmark team (a manager and N scripted workers).
//! - [`scenarios`]: the scenarios in one process: step overhead, N workers, messages, idle
//!   agents.
//! - [`serve`]: the served scenarios: goals in a row over HTTP, the websocket under load.
//! - [`store`]: the store: events committed a second, the wait for one commit.
//! - [`console`]: the web console in headless Chromium while a large team works.
//! - [`client`]: the operator's REST client the served scenarios share.
//! - [`servers`]: throwaway Postgres and NATS servers (for the tests too).
//! - [`nodes`]: a team across machines as `cohort serve` processes: a goal's time on Postgres,
//!   as one node, as one node with NATS; how long fail-over takes after kill -9 and SIGTERM.
//! - [`load_store`]: the store under a flood of large messages, then compacted.
//! - [`load_http`]: the HTTP server under hostile load (idle connections, wrong logins).
//! - [`load_team`]: a served team under hostile load (a flood of large messages and readers, a
//!   runaway model, an endpoint outage); [`model_stub`]: the OpenAI-compatible stub it uses.
//! - [`fan_out`]: a graph plan's parts side by side, against its critical path and one at a
//!   time.
//! - [`parallel_tools`]: one reply's tool calls to a real MCP server at once, and one at a time.
//! - [`prompt_cache`]: every prompt of a team's run through a local endpoint: tokens a call, the
//!   prefix each call shares with its agent's previous one, what a cache slot per agent reuses.

pub mod client;
pub mod console;
pub mod fan_out;
pub mod load_http;
pub mod load_store;
pub mod load_team;
pub mod model_stub;
pub mod nodes;
pub mod parallel_tools;
pub mod prompt_cache;
pub mod scenarios;
pub mod serve;
pub mod servers;
pub mod store;
pub mod team;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Instant;
use team::{MANAGER_CALLS, worker_calls};

/// One scenario run, as the parent asks a child for it.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "scenario", rename_all = "snake_case")]
pub enum Job {
    StepOverhead {
        history: usize,
        iterations: usize,
        #[serde(default)]
        store: bool,
        /// Traces out over OTLP meanwhile: to a receiver (`receiver`) or a port nobody listens
        /// on (`dead`).
        #[serde(default)]
        traces: Option<scenarios::TracesTo>,
        /// Every model call recorded in the store (with `store`).
        #[serde(default)]
        recorded: bool,
    },
    Store {
        events: usize,
        per_publish: usize,
    },
    Workers {
        workers: usize,
        steps: usize,
        delay_ms: u64,
        max_in_flight: usize,
    },
    Messages {
        messages: usize,
        round_trips: usize,
    },
    IdleAgents {
        agents: usize,
    },
    Goals {
        goals: usize,
    },
    Websocket {
        clients: usize,
        rate: usize,
        seconds: u64,
    },
    Console {
        workers: usize,
        steps: usize,
        delay_ms: u64,
        /// The console's files from this folder instead of the built-in ones.
        web: Option<PathBuf>,
    },
    LoadStore {
        messages: usize,
        chars: usize,
    },
    LoadConnections {
        connections: usize,
        open_files: u64,
        quick: bool,
    },
    LoadLogins {
        logins: usize,
        addresses: usize,
    },
    LoadMemory {
        messages: usize,
        chars: usize,
        readers: usize,
        /// Websocket readers of each speed (fast, slow, never reading).
        feeds: usize,
    },
    LoadRunaway {
        seconds: u64,
    },
    LoadOutage {
        runs: usize,
        down_s: u64,
    },
    FanOut {
        runs: usize,
        parallel_steps: usize,
        delay_ms: u64,
    },
    ParallelTools {
        runs: usize,
        parallel_tool_calls: usize,
        calls: usize,
        call_ms: u64,
    },
    PromptCache {
        /// `quickstart`, `quickstart_zh` or `stage20`.
        team: String,
    },
    Nodes {
        goals: usize,
        slow_goals: usize,
        kills: usize,
        /// Workers of the team spread over three nodes.
        spread_workers: usize,
    },
}

impl Job {
    /// Runs the scenario in this process.
    pub fn run(&self) -> scenarios::Figures {
        match *self {
            Job::StepOverhead {
                history,
                iterations,
                store,
                traces,
                recorded,
            } => scenarios::step_overhead(history, iterations, (store, recorded), traces),
            Job::Store {
                events,
                per_publish,
            } => store::throughput(events, per_publish),
            Job::Workers {
                workers,
                steps,
                delay_ms,
                max_in_flight,
            } => scenarios::workers(workers, steps, delay_ms, max_in_flight),
            Job::Messages {
                messages,
                round_trips,
            } => scenarios::messages(messages, round_trips),
            Job::IdleAgents { agents } => scenarios::idle_agents(agents),
            Job::Goals { goals } => serve::goals(goals),
            Job::Websocket {
                clients,
                rate,
                seconds,
            } => serve::websocket(clients, rate, seconds),
            Job::Console {
                workers,
                steps,
                delay_ms,
                ref web,
            } => console::console(workers, steps, delay_ms, web.clone()),
            Job::LoadStore { messages, chars } => load_store::load_store(messages, chars),
            Job::LoadConnections {
                connections,
                open_files,
                quick,
            } => load_http::connections(connections, open_files, quick),
            Job::LoadLogins { logins, addresses } => load_http::logins(logins, addresses),
            Job::LoadMemory {
                messages,
                chars,
                readers,
                feeds,
            } => load_team::memory(messages, chars, readers, feeds),
            Job::LoadRunaway { seconds } => load_team::runaway(seconds),
            Job::LoadOutage { runs, down_s } => load_team::outage(runs, down_s),
            Job::FanOut {
                runs,
                parallel_steps,
                delay_ms,
            } => fan_out::fan_out(runs, parallel_steps, delay_ms),
            Job::ParallelTools {
                runs,
                parallel_tool_calls,
                calls,
                call_ms,
            } => parallel_tools::parallel_tools(runs, parallel_tool_calls, calls, call_ms),
            Job::PromptCache { ref team } => prompt_cache::prompt_cache(team),
            Job::Nodes {
                goals,
                slow_goals,
                kills,
                spread_workers,
            } => nodes::nodes(goals, slow_goals, kills, spread_workers),
        }
    }
}

/// One line of the table.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub scenario: String,
    pub figure: String,
    pub value: String,
    pub target: String,
}

fn row(scenario: &str, figure: impl Into<String>, value: String, target: &str) -> Row {
    Row {
        scenario: scenario.to_owned(),
        figure: figure.into(),
        value,
        target: target.to_owned(),
    }
}

pub struct BenchOptions {
    /// Smaller sizes, for a check that everything runs (seconds, not minutes).
    pub quick: bool,
    /// Only scenarios whose name contains one of these.
    pub only: Vec<String>,
    /// Skip the autogen-core side-by-side (it installs a package from PyPI).
    pub no_autogen: bool,
    /// The console scenario serves the console's files from this folder (to compare two
    /// versions of it on one binary).
    pub web: Option<PathBuf>,
}

/// Runs `job` in a child process of `exe`; its JSON answer.
pub fn in_child(exe: &Path, job: &Job) -> Result<Value, String> {
    let arg = serde_json::to_string(job).map_err(|e| e.to_string())?;
    let out = std::process::Command::new(exe)
        .args(["bench", "--child", &arg])
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!("{job:?} failed ({}): {}", out.status, text.trim()));
    }
    serde_json::from_str(text.trim()).map_err(|e| format!("{job:?} answered `{text}`: {e}"))
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

/// Runs the selected scenarios; prints progress on stderr; returns the table.
pub fn run(exe: &Path, opts: &BenchOptions) -> Vec<Row> {
    let wanted = |name: &str| opts.only.is_empty() || opts.only.iter().any(|o| name.contains(o));
    let mut rows = Vec::new();
    let mut note = |name: &str, r: Result<Value, String>| -> Option<Value> {
        match r {
            Ok(v) => Some(v),
            Err(e) => {
                eprintln!("bench: {name}: {e}");
                rows.push(row(name, "error", e, ""));
                None
            }
        }
    };
    let mut out = Vec::new();

    if wanted("step_overhead") {
        step_overhead_rows(exe, opts, &mut note, &mut out);
    }
    if wanted("store") {
        store_rows(exe, opts, &mut note, &mut out);
    }
    if wanted("workers") {
        workers_rows(exe, opts, &mut note, &mut out);
    }
    if wanted("latency") {
        latency_rows(exe, opts, &mut note, &mut out);
    }
    if wanted("messages") {
        messages_rows(exe, opts, &mut note, &mut out);
    }
    if wanted("idle") {
        idle_rows(exe, opts, &mut note, &mut out);
    }
    if wanted("goals") {
        goals_rows(exe, opts, &mut note, &mut out);
    }
    if wanted("websocket") {
        websocket_rows(exe, opts, &mut note, &mut out);
    }
    if wanted("console") {
        console_rows(exe, opts, &mut note, &mut out);
    }
    if wanted("load_store") {
        eprintln!("bench: the store under a flood of 16 KB messages, then compacted …");
        if let Some(v) = note("load_store", in_child(exe, &load_store::job(opts.quick))) {
            out.extend(load_store::rows(&v));
        }
    }
    if wanted("fan_out") {
        fan_out::rows(exe, opts, &mut note, &mut out);
    }
    if wanted("parallel_tools") {
        parallel_tools::rows(exe, opts, &mut note, &mut out);
    }
    if wanted("prompt_cache") {
        prompt_cache::rows(exe, opts, &mut note, &mut out);
    }
    if wanted("nodes") {
        eprintln!("bench: a team across machines: goals each way, then fail-over of 3 nodes …");
        if let Some(v) = note("nodes", in_child(exe, &nodes::job(opts.quick))) {
            out.extend(nodes::rows(&v));
        }
    }
    load_http::rows(exe, opts, &wanted, &mut note, &mut out);
    load_team::rows(exe, opts, &wanted, &mut note, &mut out);
    rows.extend(out);
    rows
}

/// The cost of one step at a history of 1, 20 and 100 steps, then at 20 with the store.
fn step_overhead_rows(
    exe: &Path,
    opts: &BenchOptions,
    note: &mut impl FnMut(&str, Result<Value, String>) -> Option<Value>,
    out: &mut Vec<Row>,
) {
    let q = opts.quick;
    for history in [1, 20, 100] {
        let started = Instant::now();
        let job = Job::StepOverhead {
            history,
            iterations: if q { 300 } else { 3000 },
            store: false,
            traces: None,
            recorded: false,
        };
        eprintln!("bench: step overhead at a history of {history} …");
        if let Some(v) = note("step_overhead", in_child(exe, &job)) {
            let target = if history == 20 {
                "p50 ≤ 200 µs, p99 ≤ 1 ms"
            } else {
                "linear in history"
            };
            out.push(row(
                "step_overhead",
                format!("history {history}: p50 / p99"),
                format!("{:.0} µs / {:.0} µs", f(&v["p50_us"]), f(&v["p99_us"])),
                target,
            ));
        }
        eprintln!("bench:   {:.1}s", started.elapsed().as_secs_f64());
    }
    traces_rows(exe, q, note, out);
    // The same at a history of 20 with the monitor writing ahead to a SQLite file.
    for (recorded, label, target) in [
        (false, "with the SQLite store", "≤ 1.2× without the store"),
        (
            true,
            "with the SQLite store, every model call recorded",
            "≤ 1.05× the store alone",
        ),
    ] {
        let job = Job::StepOverhead {
            history: 20,
            iterations: if q { 300 } else { 3000 },
            store: true,
            traces: None,
            recorded,
        };
        eprintln!("bench: step overhead at a history of 20, {label} …");
        if let Some(v) = note("step_overhead", in_child(exe, &job)) {
            out.push(row(
                "step_overhead",
                format!("history 20, {label}: p50 / p99"),
                format!(
                    "{:.0} µs / {:.0} µs{}",
                    f(&v["p50_us"]),
                    f(&v["p99_us"]),
                    if v["all_committed"] == true {
                        ""
                    } else {
                        " (NOT all committed)"
                    }
                ),
                target,
            ));
        }
    }
}

/// The cost of one step at a history of 20 with traces going out, to a receiver and to
/// nobody.
fn traces_rows(
    exe: &Path,
    q: bool,
    note: &mut impl FnMut(&str, Result<Value, String>) -> Option<Value>,
    out: &mut Vec<Row>,
) {
    for (to, label) in [
        (
            scenarios::TracesTo::Receiver,
            "traces to a local OTLP receiver",
        ),
        (scenarios::TracesTo::Dead, "traces to a dead OTLP receiver"),
    ] {
        let job = Job::StepOverhead {
            history: 20,
            iterations: if q { 300 } else { 3000 },
            store: false,
            traces: Some(to),
            recorded: false,
        };
        eprintln!("bench: step overhead at a history of 20, {label} …");
        if let Some(v) = note("step_overhead", in_child(exe, &job)) {
            out.push(row(
                "step_overhead",
                format!("history 20, {label}: p50 / p99"),
                format!(
                    "{:.0} µs / {:.0} µs; spans {} sent, {} dropped, {} failed",
                    f(&v["p50_us"]),
                    f(&v["p99_us"]),
                    v["spans_exported"],
                    v["spans_dropped"],
                    v["spans_failed"]
                ),
                "≤ 1.25× without traces",
            ));
        }
    }
}

/// State events committed to SQLite a second, and the wait for one commit.
fn store_rows(
    exe: &Path,
    opts: &BenchOptions,
    note: &mut impl FnMut(&str, Result<Value, String>) -> Option<Value>,
    out: &mut Vec<Row>,
) {
    let q = opts.quick;
    let job = Job::Store {
        events: if q { 20_000 } else { 200_000 },
        per_publish: 8,
    };
    eprintln!("bench: the store: state events committed to SQLite …");
    if let Some(v) = note("store", in_child(exe, &job)) {
        out.push(row(
            "store",
            format!(
                "{} events, 8 a publish, SQLite (WAL, synchronous=FULL)",
                v["events"]
            ),
            format!(
                "{:.0} events/s committed{}",
                f(&v["events_per_s"]),
                if v["all_committed"] == true {
                    ""
                } else {
                    " (NOT all committed)"
                }
            ),
            "≥ 20k events/s",
        ));
        out.push(row(
            "store",
            "one change alone: wait for its commit p50 / p99; bytes per event",
            format!(
                "{:.2} ms / {:.2} ms; {:.0} B",
                f(&v["commit_wait_p50_ms"]),
                f(&v["commit_wait_p99_ms"]),
                f(&v["bytes_per_event"])
            ),
            "",
        ));
    }
}

/// 10 → 1,000 workers with no latency: time and memory, and how time grows with N.
fn workers_rows(
    exe: &Path,
    opts: &BenchOptions,
    note: &mut impl FnMut(&str, Result<Value, String>) -> Option<Value>,
    out: &mut Vec<Row>,
) {
    let q = opts.quick;
    let sizes: &[usize] = if q { &[10, 100] } else { &[10, 100, 1000] };
    let mut at = Vec::new();
    for &n in sizes {
        eprintln!("bench: {n} workers × 10 think steps, no latency …");
        let job = Job::Workers {
            workers: n,
            steps: 10,
            delay_ms: 0,
            max_in_flight: 64,
        };
        if let Some(v) = note("workers", in_child(exe, &job)) {
            out.push(row(
                "workers",
                format!(
                    "N={n}: time, peak RSS, steps ({})",
                    v["outcome"].as_str().unwrap_or("?")
                ),
                format!(
                    "{:.2} s, {:.0} MiB, {}",
                    f(&v["seconds"]),
                    f(&v["peak_rss_mib"]),
                    v["steps"]
                ),
                if n == 1000 { "≤ 10 s, ≤ 1 GiB" } else { "" },
            ));
            at.push((n, f(&v["seconds"])));
        }
    }
    if let (Some(a), Some(b)) = (at.iter().find(|x| x.0 == 100), at.last())
        && b.0 > a.0
    {
        out.push(row(
            "workers",
            format!("time N={} / time N=100", b.0),
            format!("{:.1}×", b.1 / a.1),
            "≤ 12× at N=1000",
        ));
    }
}

/// Many workers at a realistic latency a call: the time against the ideal.
fn latency_rows(
    exe: &Path,
    opts: &BenchOptions,
    note: &mut impl FnMut(&str, Result<Value, String>) -> Option<Value>,
    out: &mut Vec<Row>,
) {
    let q = opts.quick;
    let (n, delay, cap) = if q { (100, 50, 64) } else { (1000, 200, 256) };
    eprintln!("bench: {n} workers × 10 steps at {delay} ms a call, {cap} in flight …");
    let job = Job::Workers {
        workers: n,
        steps: 10,
        delay_ms: delay,
        max_in_flight: cap,
    };
    if let Some(v) = note("latency", in_child(exe, &job)) {
        let calls = worker_calls(10);
        let rounds = (calls as f64).max((n as u64 * calls) as f64 / cap as f64);
        let ideal = (MANAGER_CALLS as f64 + rounds) * delay as f64 / 1000.0;
        let took = f(&v["seconds"]);
        out.push(row(
            "latency",
            format!("N={n}, {delay} ms/call, {cap} in flight: time vs ideal"),
            format!(
                "{took:.2} s vs {ideal:.2} s ({:+.1} %)",
                (took / ideal - 1.0) * 100.0
            ),
            "within 10 %",
        ));
    }
}

/// Messages through the dispatcher (broadcast, waiting round trips), and autogen-core's.
fn messages_rows(
    exe: &Path,
    opts: &BenchOptions,
    note: &mut impl FnMut(&str, Result<Value, String>) -> Option<Value>,
    out: &mut Vec<Row>,
) {
    let q = opts.quick;
    let job = Job::Messages {
        messages: if q { 2_000 } else { 20_000 },
        round_trips: if q { 2_000 } else { 20_000 },
    };
    eprintln!("bench: messages through the dispatcher …");
    if let Some(v) = note("messages", in_child(exe, &job)) {
        for b in v["broadcast"].as_array().into_iter().flatten() {
            out.push(row(
                "messages",
                format!("fire-and-forget to 100 agents, {} messages", b["messages"]),
                format!(
                    "{:.0} deliveries/s ({:.0} messages/s recorded)",
                    f(&b["deliveries_per_s"]),
                    f(&b["recorded_per_s"])
                ),
                "≥ 500k deliveries/s, flat",
            ));
        }
        for p in v["pingpong"].as_array().into_iter().flatten() {
            out.push(row(
                "messages",
                format!("waiting round trips, {} in a row", p["round_trips"]),
                format!(
                    "{:.0}/s, p50 {:.1} µs, p99 {:.1} µs",
                    f(&p["per_s"]),
                    f(&p["p50_us"]),
                    f(&p["p99_us"])
                ),
                "p50 ≤ 20 µs, flat",
            ));
        }
        if !opts.no_autogen {
            eprintln!("bench: autogen-core (Python) on the same machine …");
            autogen_rows(q, &v, out);
        }
    }
}

/// autogen-core's ping-pong and broadcast, and ours against theirs (`ours`: our figures).
fn autogen_rows(q: bool, ours: &Value, out: &mut Vec<Row>) {
    let a = match autogen(q) {
        Ok(a) => a,
        Err(e) => {
            out.push(row("autogen-core", "not run", e, ""));
            return;
        }
    };
    let last_per_s = |v: &Value| {
        v["pingpong"]
            .as_array()
            .and_then(|p| p.last())
            .map_or(f64::NAN, |p| f(&p["per_s"]))
    };
    for p in a["pingpong"].as_array().into_iter().flatten() {
        out.push(row(
            "autogen-core",
            format!(
                "ping-pong, {} round trips ({})",
                p["round_trips"],
                a["autogen_core_version"].as_str().unwrap_or("?")
            ),
            format!("{:.0}/s, p50 {:.0} µs", f(&p["per_s"]), f(&p["p50_us"])),
            "",
        ));
    }
    out.push(row(
        "autogen-core",
        "Cohort ping-pong / autogen-core ping-pong",
        format!("{:.1}×", last_per_s(ours) / last_per_s(&a)),
        "≥ 50×",
    ));
    let b = &a["broadcast"];
    out.push(row(
        "autogen-core",
        format!("broadcast to {} agents", b["agents"]),
        format!("{:.0} deliveries/s", f(&b["deliveries_per_s"])),
        "",
    ));
}

/// Idle agents: memory per agent and start-up time.
fn idle_rows(
    exe: &Path,
    opts: &BenchOptions,
    note: &mut impl FnMut(&str, Result<Value, String>) -> Option<Value>,
    out: &mut Vec<Row>,
) {
    let q = opts.quick;
    let agents = if q { 1_000 } else { 10_000 };
    eprintln!("bench: {agents} idle agents …");
    if let Some(v) = note("idle", in_child(exe, &Job::IdleAgents { agents })) {
        out.push(row(
            "idle",
            format!("{agents} idle agents: RSS per agent (start-up time)"),
            format!(
                "{:.1} KiB ({:.2} s)",
                f(&v["kib_per_agent"]),
                f(&v["start_seconds"])
            ),
            "≤ 64 KiB",
        ));
    }
}

/// Goals in a row to a served team: time per goal and memory, first against last.
fn goals_rows(
    exe: &Path,
    opts: &BenchOptions,
    note: &mut impl FnMut(&str, Result<Value, String>) -> Option<Value>,
    out: &mut Vec<Row>,
) {
    let q = opts.quick;
    let goals = if q { 200 } else { 1_000 };
    eprintln!("bench: cohort serve, {goals} goals in a row over HTTP …");
    if let Some(v) = note("goals", in_child(exe, &Job::Goals { goals })) {
        out.push(row(
            "goals",
            format!("{goals} goals: ms per goal, first 100 → last 100"),
            format!(
                "{:.1} → {:.1} ({:.2}×)",
                f(&v["first_ms_per_goal"]),
                f(&v["last_ms_per_goal"]),
                f(&v["last_ms_per_goal"]) / f(&v["first_ms_per_goal"])
            ),
            "≤ 1.5×",
        ));
        out.push(row(
            "goals",
            "RSS after 100 goals → after the last (tasks in memory)",
            format!(
                "{:.0} → {:.0} MiB ({:+.0} MiB; {} tasks)",
                f(&v["rss_after_first_100_mib"]),
                f(&v["rss_at_end_mib"]),
                f(&v["rss_at_end_mib"]) - f(&v["rss_after_first_100_mib"]),
                v["tasks_in_memory"]
            ),
            "within 64 MiB",
        ));
    }
}

/// Websocket clients under a stream of changes: change-to-client latency.
fn websocket_rows(
    exe: &Path,
    opts: &BenchOptions,
    note: &mut impl FnMut(&str, Result<Value, String>) -> Option<Value>,
    out: &mut Vec<Row>,
) {
    let q = opts.quick;
    let (clients, rate, seconds) = if q { (20, 2_000, 2) } else { (100, 10_000, 5) };
    eprintln!("bench: {clients} websocket clients (+1 that never reads), {rate} changes/s …");
    let job = Job::Websocket {
        clients,
        rate,
        seconds,
    };
    if let Some(v) = note("websocket", in_child(exe, &job)) {
        out.push(row(
            "websocket",
            format!(
                "{clients} clients + 1 stalled, {:.0} changes/s: change-to-client p50 / p95 / p99",
                f(&v["events_per_s"])
            ),
            format!(
                "{:.1} / {:.1} / {:.1} ms{}",
                f(&v["p50_ms"]),
                f(&v["p95_ms"]),
                f(&v["p99_ms"]),
                if v["every_event_reached_every_measuring_client"] == true {
                    ""
                } else {
                    " (some clients fell behind and were resynced)"
                }
            ),
            "p95 ≤ 10 ms",
        ));
    }
}

/// The web console in headless Chromium while a large team works: draw and frame times.
fn console_rows(
    exe: &Path,
    opts: &BenchOptions,
    note: &mut impl FnMut(&str, Result<Value, String>) -> Option<Value>,
    out: &mut Vec<Row>,
) {
    let q = opts.quick;
    let (workers, steps, delay_ms) = if q { (10, 7, 100) } else { (100, 47, 300) };
    eprintln!("bench: the console in headless Chromium, {workers} workers × {steps} steps …");
    let job = Job::Console {
        workers,
        steps,
        delay_ms,
        web: opts.web.clone(),
    };
    if let Some(v) = note("console", in_child(exe, &job)) {
        for p in v["phases"].as_array().into_iter().flatten() {
            out.push(row(
                "console",
                format!(
                    "{} agents, {} of {} steps in: {}: draw; frame p50 / p95 / max; long tasks",
                    v["agents"],
                    p["steps_known"],
                    v["steps"],
                    p["phase"].as_str().unwrap_or("?")
                ),
                format!(
                    "{:.0} ms; {:.0} / {:.0} / {:.0} ms; {:.0} ms/s ({} DOM nodes)",
                    f(&p["draw_ms"]),
                    f(&p["frame_p50_ms"]),
                    f(&p["frame_p95_ms"]),
                    f(&p["frame_max_ms"]),
                    f(&p["long_task_ms_per_s"]),
                    p["dom_nodes"]
                ),
                "frame p95 ≤ 50 ms, draw ≤ 200 ms",
            ));
        }
    }
}

/// The autogen-core side of the comparison (`bench/autogen/bench.py`), carried in the binary.
const AUTOGEN_BENCH: &str = include_str!("../../bench/autogen/bench.py");

/// Installs autogen-core into a throwaway venv and runs `bench/autogen/bench.py` there.
fn autogen(quick: bool) -> Result<Value, String> {
    let venv = team::Scratch::new("autogen-venv").map_err(|e| e.to_string())?;
    let script = venv.0.join("bench.py");
    std::fs::write(&script, AUTOGEN_BENCH).map_err(|e| e.to_string())?;
    let run = |cmd: &mut std::process::Command| -> Result<std::process::Output, String> {
        let out = cmd.output().map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(out)
        } else {
            Err(String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("failed")
                .to_owned())
        }
    };
    run(std::process::Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv.0))?;
    let bin = venv.0.join("bin");
    run(std::process::Command::new(bin.join("pip")).args([
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "autogen-core",
    ]))?;
    let mut cmd = std::process::Command::new(bin.join("python"));
    cmd.arg(&script);
    if quick {
        cmd.arg("--quick");
    }
    let out = run(&mut cmd)?;
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text.lines().last().unwrap_or_default();
    serde_json::from_str(last).map_err(|e| format!("autogen bench answered `{last}`: {e}"))
}

/// The table as Markdown.
pub fn table(rows: &[Row]) -> String {
    let mut s = String::from("| scenario | figure | measured | target |\n|---|---|---|---|\n");
    for r in rows {
        s.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            r.scenario, r.figure, r.value, r.target
        ));
    }
    s
}
