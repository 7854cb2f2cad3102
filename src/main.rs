//! The `cohort` command line: parse arguments, load the team, call the library, map the
//! result to output and an exit code (0 done, 1 task failed, 2 a limit hit, 3 bad input,
//! 130 interrupted).

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use cohort::actors::Host;
use cohort::config::load_team;
use cohort::run::RunOptions;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

mod cli;
use cli::data::{DataArgs, read_store};
use cli::{check, output, run_cmd};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (its place in `mi_option_e`, mimalloc.h; the Rust
/// bindings name the options around it but not it).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// How long memory a burst freed stays with the process before it goes back to the system, in
/// ms. At once (0), every burst of work faulted fresh pages in again, the kernel zeroing them:
/// 1,000 workers ran ~1.5× slower and recording every model call cost 1.12× on the step path.
/// mimalloc's own 10 ms let a flood of large messages peak ~80 MiB higher (issue 27's memory
/// target). 3 ms does neither (BENCHMARKS.md, 2026-12-06). `MIMALLOC_PURGE_DELAY` set in the
/// environment wins.
const PURGE_DELAY_MS: std::ffi::c_long = 3;

/// Sets [`PURGE_DELAY_MS`] unless the environment names a delay.
fn set_purge_delay() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: sets one of mimalloc's options to a value it documents (a delay in ms);
        // called first thing in main, before any thread of ours starts.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS) };
    }
}

/// Keeps the process's heap off transparent huge pages, unless `MIMALLOC_ALLOW_THP` in the
/// environment says otherwise. mimalloc asks for huge pages on its arenas, then gives freed
/// memory back a 4 KiB page at a time: each burst of work faulted 2 MiB pages in again, the
/// kernel zeroing all of each. In a wide goal (1,000 workers) that zeroing was half of the
/// journal's and the store's CPU and put 200–800 ms on a model call's answer; without huge
/// pages the goal ran ~1.35× faster on one node and on three, 1,000 workers 1.2–1.7× faster,
/// in less memory (BENCHMARKS.md, 2026-12-06, night). The process's own switch, not
/// mimalloc's option: mimalloc reads that once, at its first allocation (before `main`), and
/// the kernel checks the switch at every fault, whatever was asked of a mapping.
fn keep_off_huge_pages() {
    if std::env::var_os("MIMALLOC_ALLOW_THP").is_none() {
        // SAFETY: prctl with plain integer arguments, changing only this process's THP switch.
        unsafe {
            libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
        }
    }
}

#[derive(Parser)]
#[command(name = "cohort", version, about = "An actor-based multi-agent runtime")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start a team, give the goal to its manager and run until the task it creates ends.
    #[command(after_help = "Exit codes:\n  \
        0    every task the goal became finished\n  \
        1    a task failed\n  \
        2    stopped by a limit (--max-steps, --timeout) or the team stalled, the task not over\n  \
        3    bad input: the team file, the goal, the data, an LLM that cannot start\n  \
        130  interrupted (Ctrl-C / SIGINT, or SIGTERM)")]
    Run {
        /// The team configuration file.
        #[arg(long)]
        team: PathBuf,
        /// The goal, as the operator would say it.
        #[arg(long)]
        goal: String,
        /// Print the final states as one JSON object on stdout instead of the summary.
        #[arg(long)]
        json: bool,
        /// Stop (exit 2) once this many steps have run and the task is still open.
        #[arg(long)]
        max_steps: Option<usize>,
        /// Stop (exit 2) after this many seconds.
        #[arg(long, default_value_t = 600)]
        timeout: u64,
        /// Which manager receives the goal (default: the first agent with task_manager).
        #[arg(long)]
        manager: Option<String>,
        /// A file to give with the goal (repeatable, at most 8, each up to 4 MB): kept in the
        /// store, so it needs --data or --database; agents read it with the workspace server.
        #[arg(long = "attach", value_name = "FILE")]
        attach: Vec<PathBuf>,
        /// Keep the team's state in a store (none by default for `run`): started again on the
        /// same data, the team carries on from it.
        #[command(flatten)]
        data: DataArgs,
    },
    /// Run a recorded run again (`cohort run --data FILE` records every model call) with each
    /// model call answered from the record: no model is asked. Says whether the replayed run
    /// asked what the recorded one asked and ended in the same states (exit 0) or where it
    /// first differed (exit 1): a changed prompt template shows its effect without a model.
    /// With --fork-at STEP: replays up to that step, then goes on with the live model (an
    /// edited step text, or the team file's edited prompts) as a new task beside the recorded
    /// one, in a copy of the store.
    Replay(cli::replay_cmd::ReplayArgs),
    /// Run an eval suite: its goals against a team, each a number of times, judged by their
    /// checks; prints a table (finish rate, honest rate, time, tokens, cost, repairs), writes
    /// JSON (and HTML with --html), compares with an earlier run (--compare), and exits 1 when
    /// a goal's finish rate is below the suite's min_rate.
    Eval(cli::eval_cmd::EvalArgs),
    /// Run a team as a long-lived process with the HTTP API, the live websocket monitor and the
    /// web console, until Ctrl-C / SIGTERM.
    Serve {
        #[arg(long)]
        team: PathBuf,
        /// Where to listen; anything beyond loopback must be given explicitly.
        #[arg(long, default_value = "127.0.0.1:7878")]
        bind: std::net::SocketAddr,
        /// Serve the console from this folder instead of the one built into the binary.
        #[arg(long)]
        web: Option<PathBuf>,
        /// Also serve `GET /metrics` here, without a token, for a Prometheus scraper on the
        /// operators' network (instead of the team file's `http.metrics_bind`).
        #[arg(long, env = "COHORT_METRICS_BIND")]
        metrics_bind: Option<std::net::SocketAddr>,
        #[command(flatten)]
        data: DataArgs,
        /// Keep nothing: the team's state lives in memory only and is lost when it stops.
        #[arg(long, conflicts_with_all = ["data", "database"])]
        no_data: bool,
        #[command(flatten)]
        node: Box<cli::node::NodeArgs>,
    },
    /// List a stored team's tasks and agents without starting it (also while it runs).
    Inspect {
        #[command(flatten)]
        data: DataArgs,
        /// With --nats: the team file, whose name says which team's inboxes to show.
        #[arg(long, requires = "nats")]
        team: Option<PathBuf>,
        /// Also how far each agent's node is behind its JetStream inbox (a team across
        /// machines): --nats and the credentials `serve --node` takes.
        #[command(flatten)]
        nats: Box<cli::node::NatsArgs>,
    },
    /// Write a stored team's state events (or one task's) to stdout as JSON lines.
    Export {
        #[command(flatten)]
        data: DataArgs,
        /// Only this task's events.
        #[arg(long)]
        task: Option<String>,
    },
    /// Copy a stored team's data to a new file, consistently, also while the team runs
    /// (SQLite; for Postgres use pg_dump).
    Backup {
        #[command(flatten)]
        data: DataArgs,
        /// The new file to write the copy to (never overwritten).
        #[arg(long)]
        to: PathBuf,
    },
    /// Validate a team configuration (and the script and prompts it uses); list every problem
    /// and warn about what would fail at start (an API key variable not set). Exit 1 on a
    /// problem, or on a warning with --strict.
    Check {
        #[arg(long)]
        team: PathBuf,
        /// Fail on warnings too.
        #[arg(long)]
        strict: bool,
    },
    /// Print an Argon2id hash of a password, for a human's `password_hash` in a team file.
    /// The password is read from stdin (one line), or given with --password.
    HashPassword {
        #[arg(long)]
        password: Option<String>,
    },
    /// Run the benchmarks (scale, latency, messages, memory, autogen-core side by side) and
    /// print a table of figures beside their targets. Takes a few minutes; --quick, seconds.
    Bench {
        /// Smaller sizes: a quick check that every scenario runs.
        #[arg(long)]
        quick: bool,
        /// Only the scenarios whose names contain one of these (comma-separated): step_overhead,
        /// workers, latency, messages, autogen, idle, goals, websocket, store, console,
        /// fan_out, parallel_tools, prompt_cache, load_store, nodes.
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
        /// Skip the autogen-core comparison (it installs autogen-core from PyPI into a
        /// throwaway venv).
        #[arg(long)]
        no_autogen: bool,
        /// Also write the table (Markdown) to this file.
        #[arg(long)]
        out: Option<PathBuf>,
        /// The console scenario serves the console from this folder instead of the built-in
        /// one (to compare two versions of the console on one binary).
        #[arg(long)]
        web: Option<PathBuf>,
        /// Internal: run one scenario (JSON) in this process and print its figures.
        #[arg(long, hide = true)]
        child: Option<String>,
    },
    /// Work with MCP servers directly: describe one, call it, or serve a bundled one.
    Mcp {
        #[command(subcommand)]
        command: McpCommand,
    },
}

#[derive(Subcommand)]
enum McpCommand {
    /// Print a server's tools, resources and prompts (with their schemas) as JSON.
    Describe {
        /// The server's YAML file (as in mcp_servers/).
        server: PathBuf,
    },
    /// Call one tool, read one resource or get one prompt, and print the result as JSON.
    Call {
        server: PathBuf,
        #[arg(long, conflicts_with_all = ["resource", "prompt"], required_unless_present_any = ["resource", "prompt"])]
        tool: Option<String>,
        #[arg(long, conflicts_with = "prompt")]
        resource: Option<String>,
        #[arg(long)]
        prompt: Option<String>,
        /// The arguments, a JSON object.
        #[arg(long, default_value = "{}")]
        args: String,
    },
    /// Serve a server bundled in this binary (workspace, notes, web) on stdio, or over streamable
    /// HTTP with --http; its own arguments follow `--` (e.g. `-- --root DIR`).
    Serve {
        name: String,
        #[arg(long)]
        http: Option<std::net::SocketAddr>,
        #[arg(last = true)]
        args: Vec<String>,
    },
    /// The client MCP's conformance suite drives (`npx @modelcontextprotocol/conformance
    /// client --command "cohort mcp conformance-client"`): the team's own MCP client, doing
    /// what the scenario `MCP_CONFORMANCE_SCENARIO` names against the server at URL.
    ConformanceClient {
        url: String,
        /// The scenario (the suite sets MCP_CONFORMANCE_SCENARIO).
        #[arg(long, env = "MCP_CONFORMANCE_SCENARIO")]
        scenario: String,
        /// What the scenario gives the client (the suite sets MCP_CONFORMANCE_CONTEXT).
        #[arg(long, env = "MCP_CONFORMANCE_CONTEXT")]
        context: Option<String>,
    },
    /// Authorize a `url` server whose file has `oauth:` (MCP's OAuth): prints the address to
    /// consent at in a browser, takes the browser back on this machine's loopback, and keeps
    /// the tokens (in COHORT_OAUTH_DIR, else ~/.config/cohort/oauth, readable by you only),
    /// where a team you start finds and refreshes them.
    Login {
        /// The server's YAML file.
        server: PathBuf,
    },
}

/// A command that only prints (inspect, export) ends quietly when its reader goes away
/// (`cohort export … | head`), as Unix tools do, instead of panicking on the broken pipe. Only
/// there: a server must outlive a closed connection.
fn quiet_on_closed_pipe() {
    // SAFETY: resetting a signal's disposition to its default, before any thread writes.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn main() -> ExitCode {
    set_purge_delay();
    keep_off_huge_pages();
    tracing_subscriber::fmt()
        .with_ansi(output::colour())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("COHORT_LOG")
                .unwrap_or_else(|_| "warn,async_openai=off".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = match parse_args() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    match cli.command {
        Command::Check { team, strict } => check::check(&team, strict),
        Command::Inspect { data, team, nats } => {
            quiet_on_closed_pipe();
            cli::data::inspect(&data, team.as_deref(), nats.options())
        }
        Command::Export { data, task } => {
            quiet_on_closed_pipe();
            read_store(&data, task, true)
        }
        Command::Backup { data, to } => cli::data::backup(&data, &to),
        Command::Serve {
            team,
            bind,
            web,
            metrics_bind,
            data,
            no_data,
            node,
        } => serve(
            &team,
            (bind, metrics_bind),
            web,
            (!no_data).then_some(data),
            *node,
        ),
        Command::Mcp { command } => mcp(command),
        Command::Bench {
            quick,
            only,
            no_autogen,
            out,
            web,
            child,
        } => bench(quick, only, no_autogen, out, web, child),
        Command::HashPassword { password } => hash_password(password),
        Command::Run {
            team,
            goal,
            json,
            max_steps,
            timeout,
            manager,
            attach,
            data,
        } => {
            let opts = RunOptions {
                manager: manager.map(Into::into),
                max_steps,
                timeout: Duration::from_secs(timeout),
                stop_on_ctrl_c: true,
                traceparent: env_traceparent(),
                ..Default::default()
            };
            run(&team, &goal, json, (opts, &attach), &data)
        }
        Command::Eval(args) => exit_of(cli::eval_cmd::eval(&args)),
        Command::Replay(args) => replay(&args),
    }
}

/// The trace a command was started in (`TRACEPARENT`, OpenTelemetry's carrier for a trace
/// context passed to a process). One that cannot be read is ignored, with a warning.
fn env_traceparent() -> Option<cohort::event::trace_context::TraceParent> {
    let text = std::env::var("TRACEPARENT").ok()?;
    text.parse()
        .map_err(|e| eprintln!("warning: TRACEPARENT is ignored: {e}"))
        .ok()
}

/// `cohort run`: the team started on its store (if any), the goal given, followed to its end.
fn run(
    team: &std::path::Path,
    goal: &str,
    json: bool,
    (opts, attach): (RunOptions, &[PathBuf]),
    data: &DataArgs,
) -> ExitCode {
    let system = actix::System::new();
    let code = system.block_on(async move {
        let mut opts = opts;
        let spec = data.spec();
        // Said in the team's language, as the run is (English when the team file cannot be
        // read: the run says why next).
        let texts = cohort::config::load_team(team)
            .ok()
            .and_then(|cfg| cfg.prompt_set().ok())
            .map_or_else(cohort::prompt::Texts::english, |p| p.texts().clone());
        match data.open(None, &texts).await {
            Ok(opened) => {
                opts.store_spec = opened.as_ref().map(|o| o.spec.clone());
                opts.store = opened.map(|o| o.store);
            }
            Err(e) => {
                output::print_error(&e.into());
                return ExitCode::from(3);
            }
        }
        match cli::attach::keep(attach, opts.store.as_deref()).await {
            Ok(files) => opts.attachments = files,
            Err(e) => {
                output::print_error(&e);
                return ExitCode::from(3);
            }
        }
        exit_of(run_cmd::run(team, goal, json, &opts, spec.as_deref()).await)
    });
    actix::System::current().stop();
    code
}

/// `cohort replay`, in an actor system of its own.
fn replay(args: &cli::replay_cmd::ReplayArgs) -> ExitCode {
    let system = actix::System::new();
    let code = system.block_on(async { exit_of(cli::replay_cmd::replay(args).await) });
    actix::System::current().stop();
    code
}

/// A command's exit: its code, or its error said and bad input's code (3).
fn exit_of(done: anyhow::Result<u8>) -> ExitCode {
    match done {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            output::print_error(&e);
            ExitCode::from(3)
        }
    }
}

/// The arguments, or how the process ends without running anything: `--help` and
/// `--version` print and exit 0; a missing, unknown or malformed argument is bad input (exit 3,
/// the code every command gives bad input), with clap's message naming the argument.
fn parse_args() -> Result<Cli, ExitCode> {
    use clap::error::ErrorKind;
    let e = match Cli::try_parse() {
        Ok(cli) => return Ok(cli),
        Err(e) => e,
    };
    // Printing can only fail on a closed stdout/stderr, where nobody would read it anyway.
    let _ = e.print();
    Err(match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => ExitCode::SUCCESS,
        _ => ExitCode::from(3),
    })
}

fn bench(
    quick: bool,
    only: Vec<String>,
    no_autogen: bool,
    out: Option<PathBuf>,
    web: Option<PathBuf>,
    child: Option<String>,
) -> ExitCode {
    use cohort::bench::{BenchOptions, Job, run, table};
    if let Some(job) = child {
        let figures = serde_json::from_str::<Job>(&job)
            .map_err(|e| e.to_string())
            .and_then(|j| j.run());
        return match figures {
            Ok(v) => {
                println!("{v}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(1)
            }
        };
    }
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("error: locating the cohort binary: {e}");
            return ExitCode::from(3);
        }
    };
    if let Some(Err(e)) = web.as_deref().map(cohort::api::console::check_dir) {
        eprintln!("error: {e}");
        return ExitCode::from(3);
    }
    let started = std::time::Instant::now();
    let rows = run(
        &exe,
        &BenchOptions {
            quick,
            only,
            no_autogen,
            web,
        },
    );
    let md = table(&rows);
    println!("{md}");
    eprintln!("bench: done in {:.0} s", started.elapsed().as_secs_f64());
    if let Some(path) = out
        && let Err(e) = std::fs::write(&path, &md)
    {
        eprintln!("error: writing {}: {e}", path.display());
        return ExitCode::from(3);
    }
    if rows.iter().any(|r| r.figure == "error") {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn mcp(command: McpCommand) -> ExitCode {
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(3);
        }
    };
    // A signal drops the work in progress, and with it the MCP client, which stops its children.
    // For a server we serve, stopping on a signal is the normal end.
    let serving = matches!(command, McpCommand::Serve { .. });
    let result = rt.block_on(async move {
        tokio::select! {
            r = mcp_work(command) => r,
            _ = cohort::run::stop_signal() => match serving {
                true => Ok(()),
                false => Err(anyhow::anyhow!("interrupted")),
            },
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            output::print_error(&e);
            ExitCode::from(if is_bad_argument(&e) { 3 } else { 1 })
        }
    }
}

/// An argument of `cohort mcp` the command cannot use (bad input, exit 3), as against a server
/// or its file failing (exit 1).
#[derive(Debug, thiserror::Error)]
enum McpArgError {
    // rmcp's server refuses requests whose Host is not loopback (DNS-rebinding protection),
    // so a wider bind would only answer 403s.
    #[error("bundled servers serve on loopback addresses only (127.0.0.1, ::1), not {0}")]
    WideBind(std::net::SocketAddr),
}

fn is_bad_argument(e: &anyhow::Error) -> bool {
    use cohort::mcp::cli::CliError;
    use cohort::mcp::conformance::ConformanceError;
    e.downcast_ref::<McpArgError>().is_some()
        || matches!(
            e.downcast_ref::<ConformanceError>(),
            Some(ConformanceError::UnknownScenario(_))
        )
        || matches!(
            e.downcast_ref::<CliError>(),
            Some(CliError::Args(_) | CliError::NoCapability)
        )
}

/// `cohort mcp serve NAME`: a bundled server over stdio, or over HTTP on a loopback address;
/// the workspace server reads attached files from the store the runtime names.
async fn serve_bundled(
    name: &str,
    http: Option<std::net::SocketAddr>,
    args: &[String],
) -> anyhow::Result<()> {
    let shelf = cli::shelf::StoreShelf::from_env();
    let Some(addr) = http else {
        return Ok(cohort::bundled::serve_stdio(name, args, shelf).await?);
    };
    if !addr.ip().is_loopback() {
        return Err(McpArgError::WideBind(addr).into());
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr}"))?;
    eprintln!(
        "serving `{name}` on http://{}/mcp (Ctrl-C to stop)",
        listener.local_addr()?
    );
    cohort::bundled::serve_http(name, args, listener, cohort::run::stop_signal(), shelf).await?;
    Ok(())
}

async fn mcp_work(command: McpCommand) -> anyhow::Result<()> {
    let exe = std::env::current_exe().context("locating the cohort binary")?;
    let vars = |k: &str| std::env::var(k).ok();
    let opts = cohort::mcp::McpOptions::new(exe, &vars);
    match command {
        McpCommand::Describe { server } => {
            let described = cohort::mcp::cli::describe(&server, opts, &vars).await?;
            print_json(&serde_json::to_value(&*described)?)?;
        }
        McpCommand::Call {
            server,
            tool,
            resource,
            prompt,
            args,
        } => {
            let call = cohort::mcp::cli::call_from_flags(tool, resource, prompt, &args)?;
            print_json(&cohort::mcp::cli::call(&server, (opts, &vars), &call).await?)?;
        }
        McpCommand::Serve { name, http, args } => serve_bundled(&name, http, &args).await?,
        McpCommand::ConformanceClient {
            url,
            scenario,
            context,
        } => {
            cohort::mcp::conformance::run(&url, &scenario, context.as_deref(), opts).await?;
        }
        McpCommand::Login { server } => {
            let show = std::sync::Arc::new(|server: &str, url: &str| {
                eprintln!(
                    "MCP server `{server}` asks for an authorization. Open this address in a \
                     browser on this machine and consent:\n\n  {url}\n"
                );
            });
            let consent = cohort::mcp::oauth::Loopback::bind(show).await?;
            let opts = cohort::mcp::McpOptions {
                consent: Some(cohort::mcp::client::SharedConsent(std::sync::Arc::new(
                    consent,
                ))),
                ..opts
            };
            let place = opts.oauth_tokens.clone();
            let described = cohort::mcp::cli::describe(&server, opts, &vars).await?;
            let tools = described.tools.len();
            match place {
                cohort::mcp::oauth::TokenPlace::Dir(dir) => eprintln!(
                    "Authorized: the server lists {tools} tools. Its tokens are kept in {} (only \
                     you can read them); a team started by you uses and refreshes them.",
                    dir.display()
                ),
                cohort::mcp::oauth::TokenPlace::Memory => eprintln!(
                    "Authorized ({tools} tools), but neither COHORT_OAUTH_DIR nor HOME is set: \
                     the tokens were not kept."
                ),
            }
        }
    }
    Ok(())
}

/// Prints JSON on stdout; a reader that went away (`| head`) is not an error worth a panic.
fn print_json(v: &serde_json::Value) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match serde_json::to_writer_pretty(&mut out, v)
        .map_err(std::io::Error::from)
        .and_then(|()| writeln!(out))
    {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}

fn hash_password(password: Option<String>) -> ExitCode {
    let password = match password {
        Some(p) => p,
        None => {
            let mut line = String::new();
            if let Err(e) = std::io::stdin().read_line(&mut line) {
                eprintln!("error: reading the password from stdin: {e}");
                return ExitCode::from(3);
            }
            line.trim_end_matches(['\n', '\r']).to_owned()
        }
    };
    if password.is_empty() {
        eprintln!("error: the password is empty");
        return ExitCode::from(3);
    }
    match cohort::auth::hash_password(&password) {
        Ok(h) => {
            println!("{h}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(3)
        }
    }
}

/// What `serve` says as it stops, in the team's language: that it stopped, and where the
/// team's data is.
fn stopped_line(place: Option<&str>, t: &cohort::prompt::Texts) -> String {
    match place {
        Some(place) => t.serve_stopped(place),
        None => t.serve_stopped_nothing_stored(),
    }
}

fn serve(
    team: &std::path::Path,
    (bind, metrics_bind): (std::net::SocketAddr, Option<std::net::SocketAddr>),
    web: Option<PathBuf>,
    data: Option<DataArgs>,
    node: cli::node::NodeArgs,
) -> ExitCode {
    let node = match node.node() {
        Ok(node) => node,
        Err(why) => {
            eprintln!("error: {why}");
            return ExitCode::from(2);
        }
    };
    let system = actix::System::new();
    let code = system.block_on(async move {
        let run = async {
            let mut cfg = load_team(team).with_context(|| format!("loading {}", team.display()))?;
            if metrics_bind.is_some() {
                cfg.http.metrics_bind = metrics_bind;
            }
            let vars = |k: &str| std::env::var(k).ok();
            let mut host = Host::new(
                &vars,
                std::env::current_exe().context("locating the cohort binary")?,
            );
            // A mistyped console folder stops start-up before anything is created.
            if let Some(dir) = &web {
                cohort::api::console::check_dir(dir).map_err(anyhow::Error::msg)?;
            }
            if let (Some(node), Some(url)) =
                (node, data.as_ref().and_then(|d| d.database.as_deref()))
            {
                host.attachments = Some(url.to_owned());
                return cli::node::serve(team, &cfg, &host, (bind, web), url, node).await;
            }
            // Watched before the store is opened: a SIGTERM meanwhile is a clean stop too.
            let stop = cohort::run::stop_signal();
            // What serve says is in the team's language.
            let texts = cfg.prompt_set()?.texts().clone();
            let opened = match &data {
                Some(d) => {
                    d.open(Some(cohort::store::default_path(team)), &texts)
                        .await?
                }
                None => None,
            };
            let place = opened.as_ref().map(|o| o.place.clone());
            host.attachments = opened.as_ref().map(|o| o.spec.clone());
            cohort::serve::serve_team(
                &cfg,
                &host,
                bind,
                web,
                opened.map(|o| o.store),
                stop,
                |addr| eprintln!("{}", texts.serve_serving(team.display(), addr)),
            )
            .await?;
            eprintln!("{}", stopped_line(place.as_deref(), &texts));
            anyhow::Ok(())
        };
        match run.await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                output::print_error(&e);
                ExitCode::from(3)
            }
        }
    });
    actix::System::current().stop();
    code
}
