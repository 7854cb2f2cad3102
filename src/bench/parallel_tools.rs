//! The `parallel_tools` scenario: a native tool loop whose model (the OpenAI-compatible stub,
//! over real HTTP) asks for `calls` tool calls in one reply, each taking `call_ms` on a real
//! MCP server (rmcp, streamable HTTP, in this process), at a given
//! `step_limits.parallel_tool_calls`: how long the loop's step takes, and the calls in it.
//!
//! The stub and the MCP server run on a runtime of their own (two threads), as servers apart
//! from the team would; the team runs in an actix system, a fresh team each run.

use super::fan_out::{median, until_finished};
use super::load_http::runtime;
use super::model_stub::{ModelStub, TOOL_STEP, ToolPlay};
use super::scenarios::Figures;
use super::team::Scratch;
use super::{BenchOptions, Job, Row, f, in_child, row};
use crate::actors::{Host, Team, start_team};
use crate::config::{TeamConfig, load_team};
use crate::monitor::StateKind;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{ServerCapabilities, ServerConfig};
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
};
use rmcp::{ServerHandler, tool, tool_handler, tool_router};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The MCP server's name in the team.
const SERVER: &str = "pause";

/// What the server saw of the calls since it was last asked: the most inside at once, and
/// when the first came in and the last went out. (The call steps the loop records carry no
/// times of their own: they are recorded once answered.)
#[derive(Default)]
struct Room {
    inside: AtomicUsize,
    most: AtomicUsize,
    span: Mutex<Option<(Instant, Instant)>>,
}

impl Room {
    /// The most calls at once and the calls' span (ms) since the last time; starts afresh.
    fn take(&self) -> (usize, f64) {
        let span = self.span.lock().unwrap_or_else(|p| p.into_inner()).take();
        let ms = span.map_or(f64::NAN, |(a, b)| (b - a).as_secs_f64() * 1000.0);
        (self.most.swap(0, Ordering::SeqCst), ms)
    }

    fn note(&self, came: Instant, left: Instant) {
        let mut span = self.span.lock().unwrap_or_else(|p| p.into_inner());
        let (a, b) = span.unwrap_or((came, left));
        *span = Some((a.min(came), b.max(left)));
    }
}

/// An MCP server with one tool, `wait`, that answers after `ms`.
#[derive(Clone)]
struct Pause {
    ms: u64,
    room: Arc<Room>,
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl Pause {
    #[tool(description = "Wait a while, then say so.")]
    async fn wait(&self) -> String {
        let came = Instant::now();
        let now = self.room.inside.fetch_add(1, Ordering::SeqCst) + 1;
        self.room.most.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(self.ms)).await;
        self.room.inside.fetch_sub(1, Ordering::SeqCst);
        self.room.note(came, Instant::now());
        format!("waited {} ms", self.ms)
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Pause {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}

/// Serves `server` over streamable HTTP at `/mcp` on 127.0.0.1 (a free port), in `rt`; its URL.
fn serve_mcp(rt: &tokio::runtime::Runtime, server: Pause) -> Result<String, String> {
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| e.to_string())?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let service: StreamableHttpService<Pause, LocalSessionManager> = StreamableHttpService::new(
            move || Ok(server.clone()),
            Default::default(),
            StreamableHttpServerConfig::default(),
        );
        let router = axum::Router::new().nest_service("/mcp", service);
        tokio::spawn(async move { axum::serve(listener, router).await });
        Ok(format!("http://{addr}/mcp"))
    })
}

/// Writes the team (a manager and a clerk with the server's tools, natively) into `dir`.
fn write_team(dir: &Path, model: &str, mcp: &str, at_once: usize) -> std::io::Result<()> {
    std::fs::create_dir_all(dir.join("servers"))?;
    std::fs::write(
        dir.join(format!("servers/{SERVER}.yaml")),
        format!("name: {SERVER}\ndescription: Waits.\nurl: {mcp}\ntimeout_secs: 60\n"),
    )?;
    std::fs::write(
        dir.join("team.yaml"),
        format!(
            "name: tools\nlanguage: en\nstep_limits: {{parallel_tool_calls: {at_once}}}\n\
             mcp_servers: servers\n\
             llm: {{provider: openai, base_url: '{model}', model: m, tool_calling: native}}\n\
             agents:\n\
             \x20 - {{id: manager, role: manager, skills: [process_message, decision, task_manager]}}\n\
             \x20 - {{id: clerk, role: clerk, skills: [planning, reflection, summary, think, instruction_generation, tool_decision], tools: [{SERVER}]}}\n"
        ),
    )
}

/// The loop step's time (ms), from the team's steps.
fn loop_ms(team: &Team) -> Result<f64, String> {
    let steps = team.monitor.snapshot(StateKind::Step);
    let step = steps
        .values()
        .find(|s| s["step_intention"] == TOOL_STEP && s["execution_state"] == "finished")
        .ok_or("the tool step did not finish")?;
    match (step["started_at"].as_i64(), step["ended_at"].as_i64()) {
        (Some(a), Some(b)) => Ok((b - a) as f64),
        _ => Err(format!("the tool step has no times: {step}")),
    }
}

/// One goal to a fresh team (its task named `name`): the loop step's time (ms).
async fn one_run(cfg: &TeamConfig, host: &Host<'_>, name: &str) -> Result<f64, String> {
    let team = start_team(cfg, host).map_err(|e| e.to_string())?;
    team.submit_goal(None, &format!("Please reach GOAL<{name}>."))
        .await
        .map_err(|e| e.to_string())?;
    let ended = until_finished(&team, name, Duration::from_secs(120)).await;
    let ms = ended.and_then(|()| loop_ms(&team));
    team.shutdown().await;
    ms
}

/// `runs` runs of one goal whose clerk's tool loop asks for `calls` calls of `call_ms` each in
/// one reply, at `parallel_tool_calls` (`at_once`): the medians of the loop step's time and of
/// the calls' span in the server, and the most calls it held at once.
pub fn parallel_tools(runs: usize, at_once: usize, calls: usize, call_ms: u64) -> Figures {
    let scratch = Scratch::new(&format!("parallel-tools-{at_once}")).map_err(|e| e.to_string())?;
    let rt = runtime()?;
    let room = Arc::new(Room::default());
    let mcp = serve_mcp(
        &rt,
        Pause {
            ms: call_ms,
            room: room.clone(),
            tool_router: Pause::tool_router(),
        },
    )?;
    let play = ToolPlay {
        server: SERVER.to_owned(),
        calls,
    };
    let stub = rt
        .block_on(ModelStub::start_play(play))
        .map_err(|e| e.to_string())?;
    write_team(&scratch.0, &stub.base_url(), &mcp, at_once).map_err(|e| e.to_string())?;
    let cfg = load_team(&scratch.0.join("team.yaml")).map_err(|e| e.to_string())?;
    let vars = |_: &str| None;
    let host = Host::new(&vars, std::env::current_exe().map_err(|e| e.to_string())?);
    let system = actix::System::new();
    let (mut step_ms, mut span_ms, mut in_server) = (vec![], vec![], 0);
    system.block_on(async {
        for run in 0..runs {
            step_ms.push(one_run(&cfg, &host, &format!("tools{run}")).await?);
            let (most, span) = room.take();
            span_ms.push(span);
            in_server = in_server.max(most);
        }
        Ok::<(), String>(())
    })?;
    Ok(json!({
        "parallel_tool_calls": at_once, "calls": calls, "call_ms": call_ms,
        "step_ms": step_ms, "span_ms": span_ms,
        "median_step_ms": median(&step_ms), "median_span_ms": median(&span_ms),
        "most_in_server": in_server,
    }))
}

/// The loop at 4 calls at once and at 1, each in its child; rows into `out`.
pub(super) fn rows<N>(exe: &Path, opts: &BenchOptions, note: &mut N, out: &mut Vec<Row>)
where
    N: FnMut(&str, Result<Value, String>) -> Option<Value>,
{
    let (runs, calls, call_ms) = (if opts.quick { 1 } else { 3 }, 3, 1000);
    let mut measured = Vec::new();
    for at_once in [4, 1] {
        eprintln!(
            "bench: a native tool loop, {calls} calls of {call_ms} ms in one reply, parallel_tool_calls {at_once}, {runs} run(s) …"
        );
        let job = Job::ParallelTools {
            runs,
            parallel_tool_calls: at_once,
            calls,
            call_ms,
        };
        let Some(v) = note("parallel_tools", in_child(exe, &job)) else {
            return;
        };
        out.push(row(
            "parallel_tools",
            format!(
                "{calls} calls of {call_ms} ms in one reply (an MCP server over HTTP), parallel_tool_calls {at_once}: the loop's step; the calls in the server, first in → last out (median of {runs}; most in the server at once: {})",
                v["most_in_server"]
            ),
            format!(
                "{:.2} s; {:.2} s",
                f(&v["median_step_ms"]) / 1000.0,
                f(&v["median_span_ms"]) / 1000.0
            ),
            if at_once >= calls { "< 2 s" } else { "" },
        ));
        measured.push(f(&v["median_step_ms"]));
    }
    out.push(row(
        "parallel_tools",
        "the loop's step, parallel_tool_calls 4 / parallel_tool_calls 1",
        format!("{:.2}×", measured[0] / measured[1]),
        &format!("≈ {:.2}× (1 / {calls})", 1.0 / calls as f64),
    ));
}
