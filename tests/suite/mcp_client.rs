//! The shared MCP client against real servers: third-party ones `.ci/run` installs —
//! `@modelcontextprotocol/server-everything` (npm, over stdio and streamable HTTP) and
//! `mcp-server-time` (PyPI) — and our bundled ones run as `cohort mcp serve …` children:
//! description, calls, errors, env isolation, timeouts, death and restart, concurrency, and no
//! orphaned processes.

use crate::support::mcp;

use cohort::mcp::{McpCall, McpClient, McpError, McpOptions, McpServerConfig, McpTransport};
use cohort::server_description::ServerDescription;
use serde_json::{Map, Value, json};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn client(servers: Vec<McpServerConfig>) -> Arc<McpClient> {
    McpClient::new(
        servers,
        McpOptions::new(PathBuf::from(env!("CARGO_BIN_EXE_cohort")), &|k| {
            std::env::var(k).ok()
        }),
    )
}

fn tool(name: &str, arguments: Value) -> McpCall {
    McpCall::Tool {
        name: name.into(),
        arguments: arguments.as_object().unwrap().clone(),
    }
}

fn long_operation(seconds: u64) -> McpCall {
    tool(
        "trigger-long-running-operation",
        json!({"duration": seconds, "steps": 1}),
    )
}

fn names(d: &ServerDescription) -> Vec<&str> {
    d.tools.iter().map(|t| t.name.as_str()).collect()
}

fn prompt_names(d: &ServerDescription) -> Vec<&str> {
    d.prompts.iter().map(|p| p.name.as_str()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_server_is_described_and_its_tools_resources_and_prompts_called() {
    let c = client(vec![mcp::everything(
        "ev",
        &mcp::marker("describe"),
        Duration::from_secs(30),
    )]);
    let d = c.describe("ev").await.unwrap();
    let tools = names(&d);
    assert!(
        tools.contains(&"echo") && tools.contains(&"get-sum"),
        "{tools:?}"
    );
    let sum = d.tool("get-sum").unwrap();
    assert_eq!(sum.input_schema["required"], json!(["a", "b"]), "{sum:?}");
    assert!(!d.resources.is_empty(), "{d:?}");
    assert!(!d.resource_templates.is_empty(), "{d:?}");
    assert!(prompt_names(&d).contains(&"args-prompt"), "{d:?}");
    assert_eq!(
        c.call("ev", &McpCall::Describe).await.unwrap(),
        serde_json::to_value(&*d).unwrap()
    );

    let echoed = c
        .call("ev", &tool("echo", json!({"message": "hello there"})))
        .await
        .unwrap();
    assert!(mcp::first_text(&echoed).contains("hello there"), "{echoed}");
    let sum = c
        .call("ev", &tool("get-sum", json!({"a": 2, "b": 3.5})))
        .await
        .unwrap();
    assert!(mcp::first_text(&sum).contains("5.5"), "{sum}");

    let uri = d.resources[0].uri.clone();
    let read = c
        .call("ev", &McpCall::Resource { uri: uri.clone() })
        .await
        .unwrap();
    assert_eq!(read["contents"][0]["uri"], json!(uri), "{read}");

    let prompt = McpCall::Prompt {
        name: "args-prompt".into(),
        arguments: json!({"city": "Paris"}).as_object().unwrap().clone(),
    };
    let got = c.call("ev", &prompt).await.unwrap();
    assert!(
        got["messages"][0]["content"]["text"]
            .as_str()
            .unwrap()
            .contains("Paris"),
        "{got}"
    );
    // Prompt arguments are strings on the wire: a number is sent as its text.
    let prompt = McpCall::Prompt {
        name: "resource-prompt".into(),
        arguments: json!({"resourceType": "Text", "resourceId": 2})
            .as_object()
            .unwrap()
            .clone(),
    };
    let got = c.call("ev", &prompt).await.unwrap();
    assert!(
        got.to_string().contains("demo://resource/dynamic/text/2"),
        "{got}"
    );
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn titles_and_output_schemas_are_kept_and_structured_results_checked_against_them() {
    let c = client(vec![mcp::everything(
        "ev",
        &mcp::marker("structured"),
        Duration::from_secs(30),
    )]);
    let d = c.describe("ev").await.unwrap();
    let structured = d.tool("get-structured-content").unwrap();
    assert_eq!(
        structured.title.as_deref(),
        Some("Get Structured Content Tool")
    );
    let output = structured.output_schema.as_ref().unwrap();
    assert_eq!(
        output["required"],
        json!(["temperature", "conditions", "humidity"]),
        "{structured:?}"
    );
    let echo = serde_json::to_value(d.tool("echo").unwrap()).unwrap();
    assert_eq!(echo.get("output_schema"), None, "no schema, none shown");
    let weather = c
        .call(
            "ev",
            &tool("get-structured-content", json!({"location": "Chicago"})),
        )
        .await
        .unwrap();
    assert_eq!(weather["structuredContent"]["temperature"], 36, "{weather}");
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_tools_result_serves_the_same_call_within_the_servers_cache_time() {
    let mut config = mcp::everything("ev", &mcp::marker("cache"), Duration::from_secs(30));
    config.cache = Some(Duration::from_secs(60));
    let c = client(vec![config]);
    let hello = tool("echo", json!({"message": "hello"}));
    let first = c.call("ev", &hello).await.unwrap();
    assert_eq!(first.get("cached"), None, "{first}");
    let again = c.call("ev", &hello).await.unwrap();
    assert!(again["cached"]["age_ms"].is_u64(), "{again}");
    assert_eq!(again["content"], first["content"]);
    let other = c
        .call("ev", &tool("echo", json!({"message": "other"})))
        .await
        .unwrap();
    assert_eq!(other.get("cached"), None, "other arguments: another call");
    // A tool that may change things is never served from the cache.
    let add = tool("toggle-simulated-logging", json!({}));
    c.call("ev", &add).await.unwrap();
    let twice = c.call("ev", &add).await.unwrap();
    assert_eq!(twice.get("cached"), None, "{twice}");
    c.shutdown().await;
    // Without cache_secs nothing is kept.
    let c = client(vec![mcp::everything(
        "ev",
        &mcp::marker("nocache"),
        Duration::from_secs(30),
    )]);
    c.call("ev", &hello).await.unwrap();
    assert_eq!(c.call("ev", &hello).await.unwrap().get("cached"), None);
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn children_get_only_their_configured_env_and_run_in_their_cwd() {
    // SAFETY: set before any server starts; nothing in this test binary reads these.
    unsafe {
        std::env::set_var("OPENAI_API_KEY", "sk-must-not-leak");
        std::env::set_var("COHORT_TEST_SECRET", "must-not-leak");
    }
    let m = mcp::marker("env");
    let cwd = mcp::temp_dir("cwd");
    let mut config = mcp::everything("ev", &m, Duration::from_secs(30));
    if let McpTransport::Stdio {
        env,
        pass_env,
        cwd: dir,
        ..
    } = &mut config.transport
    {
        env.insert("GREETING".into(), "hi".into());
        // A key the server needs, passed by name from Cohort's environment.
        pass_env.push("COHORT_PASSED_KEY".into());
        *dir = cwd.to_path_buf();
    }
    let vars = |k: &str| match k {
        "COHORT_PASSED_KEY" => Some("passed-on".to_owned()),
        "COHORT_TEST_SECRET" => Some("must-not-leak".to_owned()),
        _ => std::env::var(k).ok(),
    };
    let opts = McpOptions::new(env!("CARGO_BIN_EXE_cohort"), &vars)
        .passing_env_of(std::slice::from_ref(&config), &vars);
    let c = McpClient::new(vec![config], opts);
    let result = c.call("ev", &tool("get-env", json!({}))).await.unwrap();
    let env: Map<String, Value> = serde_json::from_str(mcp::first_text(&result)).unwrap();
    let keys: Vec<&String> = env.keys().collect();
    assert!(
        !env.contains_key("OPENAI_API_KEY"),
        "a parent LLM key leaked: {keys:?}"
    );
    assert!(
        !env.contains_key("COHORT_TEST_SECRET"),
        "a parent variable leaked: {keys:?}"
    );
    assert_eq!(env["GREETING"], json!("hi"));
    assert_eq!(env["COHORT_PASSED_KEY"], json!("passed-on"));
    assert!(
        env.contains_key("PATH") && env.contains_key("HOME"),
        "{keys:?}"
    );
    let pid = mcp::the_pid(&m);
    let actual = std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap();
    assert_eq!(actual, cwd.canonicalize().unwrap());
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_tools_bad_arguments_and_server_errors_are_told_apart() {
    let c = client(vec![mcp::everything(
        "ev",
        &mcp::marker("errors"),
        Duration::from_secs(30),
    )]);
    match c.call("ev", &tool("no-such-tool", json!({}))).await {
        Err(McpError::UnknownTool {
            tool, available, ..
        }) => {
            assert_eq!(tool, "no-such-tool");
            assert!(available.contains(&"echo".to_owned()), "{available:?}");
        }
        other => panic!("expected UnknownTool, got {other:?}"),
    }
    // Refused by our schema check (the server would answer with a ToolFailed of its own).
    match c
        .call("ev", &tool("get-sum", json!({"a": "x", "b": 1})))
        .await
    {
        Err(McpError::InvalidArguments { tool, reason, .. }) => {
            assert_eq!(tool, "get-sum");
            assert_eq!(reason, "argument `a` must be a number, got \"x\"");
        }
        other => panic!("expected InvalidArguments, got {other:?}"),
    }
    match c.call("ev", &tool("echo", json!({}))).await {
        Err(McpError::InvalidArguments { reason, .. }) => {
            assert_eq!(reason, "missing required argument `message`")
        }
        other => panic!("expected InvalidArguments, got {other:?}"),
    }
    let missing = McpCall::Resource {
        uri: "demo://resource/no/such/thing".into(),
    };
    // The server answers a resource it lacks with JSON-RPC `invalid params`.
    match c.call("ev", &missing).await {
        Err(McpError::ParamsRefused { reason, .. }) => {
            assert!(reason.contains("demo://resource/no/such/thing"), "{reason}")
        }
        other => panic!("expected ParamsRefused, got {other:?}"),
    }
    assert!(matches!(
        c.call("nope", &McpCall::Describe).await,
        Err(McpError::UnknownServer(name)) if name == "nope"
    ));
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn time_server_from_pypi_tells_the_time() {
    let c = client(vec![mcp::time("time", &mcp::marker("time"))]);
    let d = c.describe("time").await.unwrap();
    assert!(names(&d).contains(&"get_current_time"), "{d:?}");
    // It has no prompts or resources: empty lists, not errors.
    let listed = serde_json::to_value(&*d).unwrap();
    assert_eq!(listed["prompts"], json!([]));
    assert_eq!(listed["resources"], json!([]));
    let now = c
        .call(
            "time",
            &tool("get_current_time", json!({"timezone": "UTC"})),
        )
        .await
        .unwrap();
    assert!(mcp::first_text(&now).contains("UTC"), "{now}");
    match c
        .call(
            "time",
            &tool("get_current_time", json!({"timezone": "Not/AZone"})),
        )
        .await
    {
        // The tool ran and reported an error (`isError`): its text is the message.
        Err(McpError::ToolFailed { tool, message, .. }) => {
            assert_eq!(tool, "get_current_time");
            assert!(message.contains("Not/AZone"), "{message}")
        }
        other => panic!("expected ToolFailed, got {other:?}"),
    }
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_server_fails_the_call_in_flight_and_the_next_call_restarts_it() {
    let m = mcp::marker("kill");
    let c = client(vec![mcp::everything("ev", &m, Duration::from_secs(60))]);
    c.describe("ev").await.unwrap();
    let first = mcp::the_pid(&m);
    let in_flight = tokio::spawn({
        let c = c.clone();
        async move { c.call("ev", &long_operation(45)).await }
    });
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!in_flight.is_finished());
    let killed_at = Instant::now();
    mcp::kill9(first);
    let outcome = in_flight.await.unwrap();
    let took = killed_at.elapsed();
    match outcome {
        Err(McpError::ServerGone { reason, .. }) => assert!(
            reason.contains("SIGKILL") || reason.contains("signal"),
            "{reason}"
        ),
        other => panic!("expected ServerGone, got {other:?}"),
    }
    assert!(
        took < Duration::from_secs(20),
        "the call took {took:?} to fail after the kill"
    );

    let echoed = c
        .call("ev", &tool("echo", json!({"message": "back"})))
        .await
        .unwrap();
    assert!(mcp::first_text(&echoed).contains("back"));
    let second = mcp::the_pid(&m);
    assert_ne!(first, second, "the server was not restarted");
    c.shutdown().await;
    assert!(!mcp::alive(second));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_outlasting_call_timeout_times_out_and_the_session_stays() {
    let m = mcp::marker("timeout");
    let c = client(vec![mcp::everything("ev", &m, Duration::from_secs(1))]);
    c.describe("ev").await.unwrap();
    let pid = mcp::the_pid(&m);
    let start = Instant::now();
    match c.call("ev", &long_operation(5)).await {
        Err(McpError::Timeout { after, .. }) => assert_eq!(after, Duration::from_secs(1)),
        other => panic!("expected Timeout, got {other:?}"),
    }
    assert!(
        start.elapsed() < Duration::from_secs(4),
        "{:?}",
        start.elapsed()
    );
    c.call("ev", &tool("echo", json!({"message": "still here"})))
        .await
        .unwrap();
    assert_eq!(
        mcp::the_pid(&m),
        pid,
        "a timeout must not restart the server"
    );
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_concurrent_calls_run_in_parallel_through_one_session() {
    let m = mcp::marker("concurrent");
    let c = client(vec![mcp::everything("ev", &m, Duration::from_secs(60))]);
    let start = Instant::now();
    // Each call takes 2 s on the server: one after the other they would take 40 s.
    let calls = (0..20).map(|i| {
        let c = c.clone();
        tokio::spawn(async move {
            if i % 2 == 0 {
                c.call("ev", &long_operation(2)).await
            } else {
                c.call("ev", &tool("get-sum", json!({"a": i, "b": 1})))
                    .await
            }
        })
    });
    let results = futures::future::join_all(calls).await;
    for (i, r) in results.into_iter().enumerate() {
        let r = r
            .unwrap()
            .unwrap_or_else(|e| panic!("call {i} failed: {e}"));
        if i % 2 == 1 {
            assert!(mcp::first_text(&r).contains(&(i + 1).to_string()), "{r}");
        }
    }
    assert!(
        start.elapsed() < Duration::from_secs(15),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(
        mcp::pids_with_marker(&m).len(),
        1,
        "calls must share one server process"
    );
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_leaves_no_child_processes_and_is_idempotent() {
    let (m1, m2, m3) = (
        mcp::marker("shut-ev"),
        mcp::marker("shut-time"),
        mcp::marker("shut-stubborn"),
    );
    let c = client(vec![
        mcp::everything("ev", &m1, Duration::from_secs(30)),
        mcp::time("time", &m2),
        mcp::stubborn_everything("stubborn", &m3),
    ]);
    for server in ["ev", "time", "stubborn"] {
        c.describe(server).await.unwrap();
    }
    assert_eq!(mcp::pids_with_marker(&m3).len(), 3, "sh, sleep and node");
    c.shutdown().await;
    // Killed grandchildren (not ours to reap) take a moment to die on a busy machine.
    for m in [&m1, &m2, &m3] {
        if let Err(left) = mcp::marked_gone_within(m, Duration::from_secs(2)).await {
            panic!("processes {left:?} outlived shutdown()");
        }
    }
    c.shutdown().await;
    // Nothing starts again after shutdown.
    assert!(matches!(
        c.call("ev", &tool("echo", json!({"message": "x"}))).await,
        Err(McpError::Connect { .. })
    ));
    assert!(mcp::pids_with_marker(&m1).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_client_kills_its_children_and_theirs() {
    let (m1, m2) = (mcp::marker("drop-ev"), mcp::marker("drop-stubborn"));
    let c = client(vec![
        mcp::everything("ev", &m1, Duration::from_secs(30)),
        mcp::stubborn_everything("stubborn", &m2),
    ]);
    c.describe("ev").await.unwrap();
    c.describe("stubborn").await.unwrap();
    assert_eq!(mcp::pids_with_marker(&m2).len(), 3, "sh, sleep and node");
    drop(c);
    for m in [&m1, &m2] {
        if let Err(left) = mcp::marked_gone_within(m, Duration::from_secs(5)).await {
            panic!("processes {left:?} outlived their client");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_cannot_start_is_a_connect_error_saying_why() {
    let c = client(vec![
        mcp::stdio(
            "missing",
            &PathBuf::from("/nonexistent/mcp-server"),
            &[],
            &[],
            Duration::from_secs(5),
        ),
        mcp::stdio(
            "crashes",
            &PathBuf::from("sh"),
            &["-c", "echo 'boom: no config' >&2; exit 3"],
            &[],
            Duration::from_secs(5),
        ),
    ]);
    match c.describe("missing").await {
        Err(McpError::Connect { reason, .. }) => {
            assert!(reason.contains("cannot start"), "{reason}")
        }
        other => panic!("expected Connect, got {other:?}"),
    }
    match c.describe("crashes").await {
        Err(McpError::Connect { reason, .. }) => {
            assert!(reason.contains("exit status: 3"), "{reason}")
        }
        other => panic!("expected Connect, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn builtin_servers_start_as_cohort_mcp_serve() {
    // A stand-in for the `cohort` binary: records its arguments, then runs server-everything.
    let dir = mcp::temp_dir("builtin");
    let (fake, args_file) = (dir.join("cohort"), dir.join("args"));
    let script = format!(
        "#!/bin/sh\necho \"$@\" > '{}'\nexec node '{}' stdio\n",
        args_file.display(),
        mcp::everything_js().display()
    );
    std::fs::write(&fake, script).unwrap();
    std::process::Command::new("chmod")
        .args(["+x", fake.to_str().unwrap()])
        .status()
        .unwrap();
    let mut config = mcp::everything("files", "unused", Duration::from_secs(30));
    config.transport = McpTransport::Builtin {
        server: "workspace".into(),
        args: vec!["--root".into(), "/tmp/ws".into()],
        env: Default::default(),
        pass_env: Vec::new(),
        cwd: dir.to_path_buf(),
    };
    let c = McpClient::new(
        vec![config],
        McpOptions::new(fake, &|k| std::env::var(k).ok()),
    );
    let echoed = c
        .call("files", &tool("echo", json!({"message": "built in"})))
        .await
        .unwrap();
    assert!(mcp::first_text(&echoed).contains("built in"));
    let args = std::fs::read_to_string(&args_file).unwrap();
    assert_eq!(args.trim(), "mcp serve workspace -- --root /tmp/ws");
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamable_http_servers_are_reached_by_url() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut server = tokio::process::Command::new("node")
        .args([mcp::everything_js().to_str().unwrap(), "streamableHttp"])
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let start = Instant::now();
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "the HTTP server did not start"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut config = mcp::everything("web", "unused", Duration::from_secs(30));
    config.transport = McpTransport::Http {
        url: format!("http://127.0.0.1:{port}/mcp"),
        flavor: cohort::mcp::HttpFlavor::StreamableHttp,
        oauth: None,
    };
    let c = client(vec![config]);
    assert!(names(&c.describe("web").await.unwrap()).contains(&"echo"));
    let calls: Vec<McpCall> = (0..5)
        .map(|i| tool("echo", json!({"message": format!("over http {i}")})))
        .collect();
    let results = futures::future::join_all(calls.iter().map(|call| c.call("web", call))).await;
    for (i, r) in results.into_iter().enumerate() {
        assert!(mcp::first_text(&r.unwrap()).contains(&format!("over http {i}")));
    }
    c.shutdown().await;
    server.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bundled_workspace_and_notes_servers_run_as_children_of_the_real_binary() {
    let dir = mcp::temp_dir("bundled");
    let m = mcp::marker("bundled");
    let builtin = |name: &str, args: &[&str]| McpServerConfig {
        risk: Default::default(),
        cache: None,
        name: name.into(),
        description: format!("bundled {name}"),
        transport: McpTransport::Builtin {
            server: name.into(),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: [("COHORT_TEST_MARKER".to_owned(), m.clone())].into(),
            pass_env: Vec::new(),
            cwd: dir.to_path_buf(),
        },
        call_timeout: Duration::from_secs(30),
        connect_timeout: Duration::from_secs(60),
        file: PathBuf::from(format!("{name}.yaml")),
    };
    let c = client(vec![
        builtin("workspace", &["--root", "ws"]),
        builtin("notes", &["--file", "notes.json"]),
    ]);
    let d = c.describe("workspace").await.unwrap();
    assert!(names(&d).contains(&"write_file"), "{d:?}");
    assert!(prompt_names(&d).contains(&"review_file"), "{d:?}");

    let write = tool(
        "write_file",
        json!({"path": "docs/plan.md", "content": "step one"}),
    );
    c.call("workspace", &write).await.unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.join("ws/docs/plan.md")).unwrap(),
        "step one",
        "the server runs in the config's cwd, so `ws` is below it"
    );
    let read = tool("read_file", json!({"path": "docs/plan.md"}));
    let read = c.call("workspace", &read).await.unwrap();
    assert_eq!(mcp::first_text(&read), "step one");
    let uri = "workspace:///docs/plan.md".to_owned();
    let resource = c
        .call("workspace", &McpCall::Resource { uri })
        .await
        .unwrap();
    assert_eq!(resource["contents"][0]["text"], json!("step one"));
    let review = McpCall::Prompt {
        name: "review_file".into(),
        arguments: json!({"path": "docs/plan.md"}).as_object().unwrap().clone(),
    };
    let got = c.call("workspace", &review).await.unwrap();
    assert!(got.to_string().contains("step one"), "{got}");
    match c
        .call(
            "workspace",
            &tool("read_file", json!({"path": "../notes.json"})),
        )
        .await
    {
        Err(McpError::ToolFailed { message, .. }) => assert!(!message.is_empty()),
        other => panic!("expected the sandbox to refuse, got {other:?}"),
    }
    match c
        .call("workspace", &tool("write_file", json!({"path": "x"})))
        .await
    {
        Err(McpError::InvalidArguments { reason, .. }) => {
            assert_eq!(reason, "missing required argument `content`")
        }
        other => panic!("expected InvalidArguments, got {other:?}"),
    }

    let set = tool("set_note", json!({"key": "design/api", "text": "REST"}));
    c.call("notes", &set).await.unwrap();
    let got = c
        .call("notes", &tool("get_note", json!({"key": "design/api"})))
        .await;
    assert_eq!(mcp::first_text(&got.unwrap()), "REST");

    assert_eq!(mcp::pids_with_marker(&m).len(), 2);
    c.shutdown().await;
    assert_eq!(mcp::pids_with_marker(&m), Vec::<u32>::new());
}
