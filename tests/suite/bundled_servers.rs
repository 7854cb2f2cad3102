//! The bundled MCP servers (`workspace`, `notes`) seen from a real rmcp client: in process over
//! `tokio::io::duplex`, and over streamable HTTP with `serve_http`. Includes the workspace
//! sandbox: every escape attempt is refused and nothing outside the root is read or written.

use crate::support::scratch;

use cohort::bundled::{BundledArgs, BundledError, NotesServer, WorkspaceServer, serve_http};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ErrorCode, GetPromptRequestParams,
    ReadResourceRequestParams,
};
use rmcp::service::{RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{RoleClient, ServerHandler, ServiceExt};
use scratch::Scratch;
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

type Client = RunningService<RoleClient, ()>;

/// An rmcp client connected to `server` in process.
async fn connect<S: ServerHandler>(server: S) -> Client {
    let (server_io, client_io) = tokio::io::duplex(64 * 1024);
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    ().serve(client_io).await.expect("client handshake")
}

async fn call(client: &Client, tool: &str, args: Value) -> Result<CallToolResult, ServiceError> {
    let args = args.as_object().expect("arguments are an object").clone();
    client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
        .await
}

fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Calls a tool that must succeed; returns its text.
async fn ok(client: &Client, tool: &str, args: Value) -> String {
    let r = call(client, tool, args.clone()).await.expect("protocol ok");
    assert_ne!(r.is_error, Some(true), "{tool} {args}: {}", text(&r));
    text(&r)
}

/// Calls a tool that must fail as a *tool* error; returns the message.
async fn tool_error(client: &Client, tool: &str, args: Value) -> String {
    let r = call(client, tool, args.clone()).await.expect("protocol ok");
    assert_eq!(
        r.is_error,
        Some(true),
        "{tool} {args} should fail: {}",
        text(&r)
    );
    text(&r)
}

async fn read_resource(client: &Client, uri: &str) -> Result<String, ServiceError> {
    let r = client
        .read_resource(ReadResourceRequestParams::new(uri))
        .await?;
    Ok(serde_json::to_value(&r.contents).unwrap()[0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned())
}

async fn prompt(client: &Client, name: &str, args: Value) -> Result<String, ServiceError> {
    let r = client
        .get_prompt(
            GetPromptRequestParams::new(name.to_owned())
                .with_arguments(args.as_object().unwrap().clone()),
        )
        .await?;
    Ok(serde_json::to_string(&r.messages).unwrap())
}

/// The server's tool names, sorted and comma-separated.
async fn tool_names(client: &Client) -> String {
    let mut names: Vec<_> = client.list_all_tools().await.unwrap();
    names.sort_by(|a, b| a.name.cmp(&b.name));
    names
        .iter()
        .map(|t| t.name.as_ref())
        .collect::<Vec<_>>()
        .join(",")
}

async fn resource_uris(client: &Client) -> Vec<String> {
    let all = client.list_all_resources().await.unwrap();
    all.into_iter().map(|r| r.uri).collect()
}

fn mcp_error(e: ServiceError) -> rmcp::ErrorData {
    match e {
        ServiceError::McpError(e) => e,
        other => panic!("expected an MCP error, got {other:?}"),
    }
}

#[tokio::test]
async fn workspace_serves_tools_resources_and_prompts() {
    let dir = Scratch::new("bundled-ws-e2e");
    let root = dir.join("root");
    let client = connect(WorkspaceServer::new(&root).unwrap()).await;

    let info = client.peer_info().expect("server info");
    let instructions = info.instructions.clone().unwrap_or_default();
    assert!(instructions.contains(&root.canonicalize().unwrap().display().to_string()));

    let tools = tool_names(&client).await;
    assert_eq!(tools, "append_file,list_dir,read_file,search,write_file");

    for (tool, path, content) in [
        ("write_file", "docs/plan v2.md", "step one\n"),
        ("append_file", "docs/plan v2.md", "step two\n"),
        ("write_file", "src/main.rs", "fn main() {}\n"),
    ] {
        ok(&client, tool, json!({ "path": path, "content": content })).await;
    }
    let read = ok(&client, "read_file", json!({"path": "docs/plan v2.md"})).await;
    assert_eq!(read, "step one\nstep two\n");
    assert_eq!(
        std::fs::read_to_string(root.join("docs/plan v2.md")).unwrap(),
        read
    );

    let top = ok(&client, "list_dir", json!({})).await;
    assert_eq!(top, "docs/\nsrc/");
    let all = ok(&client, "list_dir", json!({"recursive": true})).await;
    assert!(all.contains("docs/plan v2.md (18 bytes)"), "{all}");
    let hits = ok(&client, "search", json!({"pattern": "two"})).await;
    assert_eq!(hits, "docs/plan v2.md:2:step two");
    let none = ok(
        &client,
        "search",
        json!({"pattern": "three", "path": "docs"}),
    )
    .await;
    assert!(none.starts_with("no line contains"), "{none}");

    let resources = client.list_all_resources().await.unwrap();
    let uris: Vec<_> = resources.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(
        uris,
        ["workspace:///docs/plan%20v2.md", "workspace:///src/main.rs"]
    );
    assert_eq!(resources[0].mime_type.as_deref(), Some("text/markdown"));
    let content = read_resource(&client, "workspace:///docs/plan%20v2.md").await;
    assert_eq!(content.unwrap(), read);
    let templates = client.list_all_resource_templates().await.unwrap();
    assert_eq!(templates[0].uri_template, "workspace:///{path}");

    let prompts = client.list_all_prompts().await.unwrap();
    assert_eq!(prompts.len(), 1);
    assert_eq!(prompts[0].name, "review_file");
    let review = prompt(&client, "review_file", json!({"path": "src/main.rs"})).await;
    let review = review.unwrap();
    assert!(
        review.contains("review") && review.contains("fn main() {}"),
        "{review}"
    );

    client.cancel().await.unwrap();
}

#[tokio::test]
async fn workspace_reports_protocol_and_tool_errors() {
    let dir = Scratch::new("bundled-ws-errors");
    let root = dir.join("root");
    let client = connect(WorkspaceServer::new(&root).unwrap()).await;

    // An unknown tool is a protocol error, not a tool result.
    let e = mcp_error(call(&client, "format_disk", json!({})).await.unwrap_err());
    assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
    assert!(e.message.contains("tool not found"), "{}", e.message);

    // Bad arguments come back as tool errors the agent can read and fix.
    let missing = tool_error(&client, "read_file", json!({})).await;
    assert!(missing.contains("path"), "{missing}");
    let wrong_type = tool_error(&client, "write_file", json!({"path": "a", "content": 5})).await;
    assert!(
        wrong_type.contains("content") || wrong_type.contains("string"),
        "{wrong_type}"
    );
    let unknown = tool_error(&client, "read_file", json!({"path": "a", "mode": "r"})).await;
    assert!(unknown.contains("mode"), "{unknown}");

    let absent = tool_error(&client, "read_file", json!({"path": "nope.txt"})).await;
    assert!(absent.contains("`nope.txt` does not exist"), "{absent}");
    let empty = tool_error(&client, "search", json!({"pattern": ""})).await;
    assert!(empty.contains("empty"), "{empty}");

    let e = mcp_error(
        read_resource(&client, "workspace:///nope.txt")
            .await
            .unwrap_err(),
    );
    assert!(e.message.contains("does not exist"), "{}", e.message);
    let e = mcp_error(
        prompt(&client, "review_file", json!({"path": "nope.txt"}))
            .await
            .unwrap_err(),
    );
    assert!(e.message.contains("does not exist"), "{}", e.message);
    let e = mcp_error(
        prompt(&client, "no_such_prompt", json!({}))
            .await
            .unwrap_err(),
    );
    assert_ne!(e.code, ErrorCode::INTERNAL_ERROR);

    client.cancel().await.unwrap();
}

/// Every file and folder below `dir`, relative, sorted (symlinks not followed).
fn tree(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            out.push(e.path().strip_prefix(base).unwrap().display().to_string());
            if e.file_type().unwrap().is_dir() {
                walk(base, &e.path(), out);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

#[cfg(unix)]
#[tokio::test]
async fn the_sandbox_refuses_every_escape_and_touches_nothing_outside() {
    use std::os::unix::fs::symlink;
    const SECRET: &str = "TOP SECRET outside the root";
    let base = Scratch::new("bundled-ws-sandbox");
    let root = base.join("root");
    let outside = base.join("outside");
    std::fs::create_dir_all(root.join("dir")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), SECRET).unwrap();
    std::fs::write(root.join("dir/inner.txt"), "inside").unwrap();
    symlink(outside.join("secret.txt"), root.join("evil_file")).unwrap();
    symlink(&outside, root.join("evil_dir")).unwrap();
    symlink(outside.join("planted.txt"), root.join("dangling")).unwrap();
    symlink(root.join("dir"), root.join("good_link")).unwrap();
    let outside_before = tree(&outside);
    let secret_abs = outside.join("secret.txt").display().to_string();
    let client = connect(WorkspaceServer::new(&root).unwrap()).await;

    let long = "a/".repeat(2000) + "x";
    let reads = [
        "../outside/secret.txt",
        "a/../../outside/secret.txt",
        "./../outside/secret.txt",
        "dir/../../outside/secret.txt",
        "/etc/passwd",
        secret_abs.as_str(),
        "evil_file",
        "evil_dir/secret.txt",
        "good_link/../../outside/secret.txt",
        "..\\outside\\secret.txt",
        "C:\\Windows\\win.ini",
        "C:/Windows/win.ini",
        "\\\\server\\share\\x",
        "dir/inner.txt\0../../outside/secret.txt",
        long.as_str(),
    ];
    for path in reads {
        let msg = tool_error(&client, "read_file", json!({ "path": path })).await;
        assert!(!msg.contains(SECRET), "{path}: {msg}");
        let e = mcp_error(
            prompt(&client, "review_file", json!({ "path": path }))
                .await
                .unwrap_err(),
        );
        assert!(!e.message.contains(SECRET), "{path}: {}", e.message);
    }
    // The messages say why.
    let why = |p: &'static str| tool_error(&client, "read_file", json!({ "path": p }));
    assert!(
        why("../x")
            .await
            .contains("leads outside the workspace root")
    );
    assert!(why("/etc/passwd").await.contains("is absolute"));
    assert!(
        why("evil_file")
            .await
            .contains("symlink that points outside")
    );
    assert!(why("C:\\x").await.contains("Windows-style"));
    assert!(why("a\0b").await.contains("NUL"));
    let too_long = tool_error(&client, "read_file", json!({ "path": long })).await;
    assert!(too_long.contains("too long"), "{too_long}");

    let planted = outside.join("planted.txt").display().to_string();
    let writes = [
        "../planted.txt",
        "a/../../outside/planted.txt",
        "./../outside/planted.txt",
        "/tmp/cohort-planted.txt",
        planted.as_str(),
        "evil_file",
        "evil_dir/planted.txt",
        "evil_dir/new_sub/planted.txt",
        "dangling",
        "",
        ".",
        "dir/..",
        "x\0y",
        "..\\planted.txt",
        long.as_str(),
    ];
    for path in writes {
        for tool in ["write_file", "append_file"] {
            let msg = tool_error(&client, tool, json!({ "path": path, "content": "pwned" })).await;
            assert!(!msg.is_empty(), "{tool} {path}");
        }
    }
    assert!(
        tool_error(&client, "write_file", json!({"path": "", "content": "x"}))
            .await
            .contains("empty")
    );
    for path in ["..", "/", "evil_dir", "good_link/../.."] {
        tool_error(&client, "list_dir", json!({ "path": path })).await;
        tool_error(
            &client,
            "search",
            json!({ "pattern": "SECRET", "path": path }),
        )
        .await;
    }
    // A search of the whole root does not follow symlinks out of it.
    let whole = ok(&client, "search", json!({"pattern": "SECRET"})).await;
    assert!(whole.starts_with("no line contains"), "{whole}");

    let uris = [
        "workspace:///../outside/secret.txt",
        "workspace:///%2E%2E/outside/secret.txt",
        "workspace:///dir/%2e%2e/%2e%2e/outside/secret.txt",
        "workspace:////etc/passwd",
        "workspace:///%2Fetc%2Fpasswd",
        "workspace:///evil_file",
        "workspace:///evil_dir/secret.txt",
        "workspace:///dir%00x",
        "workspace:///..%5Coutside%5Csecret.txt",
        "workspace://localhost/etc/passwd",
        "file:///etc/passwd",
        &format!("file://{secret_abs}"),
        "workspace:///dir/inner.txt?x=../../outside/secret.txt",
    ];
    for uri in uris {
        let e = mcp_error(read_resource(&client, uri).await.unwrap_err());
        assert!(!e.message.contains(SECRET), "{uri}: {}", e.message);
    }
    let listed = resource_uris(&client).await;
    assert_eq!(listed, ["workspace:///dir/inner.txt"]);

    // Symlinks that stay inside still work: the rule is "inside", not "no symlinks".
    assert_eq!(
        ok(&client, "read_file", json!({"path": "good_link/inner.txt"})).await,
        "inside"
    );
    ok(
        &client,
        "write_file",
        json!({"path": "good_link/new/deep.txt", "content": "ok"}),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(root.join("dir/new/deep.txt")).unwrap(),
        "ok"
    );

    // Nothing outside the root was created or changed.
    assert_eq!(tree(&outside), outside_before);
    assert_eq!(
        std::fs::read_to_string(outside.join("secret.txt")).unwrap(),
        SECRET
    );
    assert!(!Path::new("/tmp/cohort-planted.txt").exists());
    assert!(!base.join("planted.txt").exists());
    let mut top = tree(&base);
    top.retain(|p| !p.contains('/'));
    assert_eq!(top, ["outside", "root"]);

    client.cancel().await.unwrap();
}

#[tokio::test]
async fn notes_are_kept_listed_deleted_and_persisted() {
    let dir = Scratch::new("bundled-notes-e2e");
    let file = dir.join("state/notes.json");
    let client = connect(NotesServer::open(&file).unwrap()).await;

    let tools = tool_names(&client).await;
    assert_eq!(tools, "delete_note,get_note,list_notes,set_note");

    let set = |key: &'static str, text: &'static str| {
        ok(&client, "set_note", json!({ "key": key, "text": text }))
    };
    assert!(
        set("design/api", "REST\nthen gRPC")
            .await
            .contains("saved new note")
    );
    set("design/db", "sqlite").await;
    set("todo", "tests").await;
    assert!(set("todo", "more tests").await.contains("replaced"));
    assert_eq!(
        ok(&client, "get_note", json!({"key": "todo"})).await,
        "more tests"
    );

    let design = ok(&client, "list_notes", json!({"prefix": "design/"})).await;
    let lines: Vec<_> = design.lines().collect();
    assert_eq!(lines.len(), 2, "{design}");
    assert!(
        lines[0].starts_with("design/api (") && lines[0].ends_with("REST…"),
        "{design}"
    );
    let nothing = ok(&client, "list_notes", json!({"prefix": "zzz"})).await;
    assert!(nothing.contains("no note key starts with"), "{nothing}");

    ok(&client, "delete_note", json!({"key": "todo"})).await;
    let gone = tool_error(&client, "get_note", json!({"key": "todo"})).await;
    assert!(gone.contains("no note `todo`"), "{gone}");
    tool_error(&client, "delete_note", json!({"key": "todo"})).await;
    tool_error(&client, "set_note", json!({"key": "", "text": "x"})).await;
    tool_error(&client, "set_note", json!({"key": "k"})).await;

    let uris = resource_uris(&client).await;
    assert_eq!(uris, ["notes:///design/api", "notes:///design/db"]);
    assert_eq!(
        read_resource(&client, "notes:///design/db").await.unwrap(),
        "sqlite"
    );
    let e = mcp_error(read_resource(&client, "notes:///todo").await.unwrap_err());
    assert!(e.message.contains("no note"), "{}", e.message);
    mcp_error(
        read_resource(&client, "workspace:///design/db")
            .await
            .unwrap_err(),
    );

    let prompts = client.list_all_prompts().await.unwrap();
    assert_eq!(prompts[0].name, "recall_notes");
    let recalled = prompt(&client, "recall_notes", json!({"prefix": "design/"}))
        .await
        .unwrap();
    assert!(
        recalled.contains("## design/api") && recalled.contains("sqlite"),
        "{recalled}"
    );

    // On disk, readable by a fresh server.
    let on_disk: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(on_disk["notes"]["design/db"]["text"], "sqlite");
    assert!(on_disk["notes"].get("todo").is_none());
    client.cancel().await.unwrap();
    let again = connect(NotesServer::open(&file).unwrap()).await;
    assert_eq!(
        ok(&again, "get_note", json!({"key": "design/api"})).await,
        "REST\nthen gRPC"
    );
    again.cancel().await.unwrap();
}

#[tokio::test]
async fn concurrent_note_writes_all_land_in_the_file() {
    let dir = Scratch::new("bundled-notes-concurrent");
    let file = dir.join("notes.json");
    let server = NotesServer::open(&file).unwrap();
    let clients: Vec<Client> =
        futures::future::join_all((0..4).map(|_| connect(server.clone()))).await;
    let writes = (0..40).map(|i| {
        let client = &clients[i % clients.len()];
        async move {
            ok(
                client,
                "set_note",
                json!({"key": format!("k{i:02}"), "text": format!("v{i}")}),
            )
            .await
        }
    });
    futures::future::join_all(writes).await;
    let on_disk: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(on_disk["notes"].as_object().unwrap().len(), 40);
    for c in clients {
        c.cancel().await.unwrap();
    }
}

#[tokio::test]
async fn serve_http_answers_an_rmcp_client_and_stops_on_shutdown() {
    let dir = Scratch::new("bundled-http");
    let root = dir.join("root");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let args = vec!["--root".to_owned(), root.display().to_string()];
    let server = tokio::spawn(async move {
        serve_http(
            "workspace",
            &args,
            listener,
            async {
                let _ = stopped.await;
            },
            None,
        )
        .await
    });

    let transport = StreamableHttpClientTransport::from_uri(format!("http://{addr}/mcp"));
    let client = ().serve(transport).await.expect("HTTP handshake");
    ok(
        &client,
        "write_file",
        json!({"path": "over/http.txt", "content": "via HTTP"}),
    )
    .await;
    assert_eq!(
        ok(&client, "read_file", json!({"path": "over/http.txt"})).await,
        "via HTTP"
    );
    tool_error(&client, "read_file", json!({"path": "../x"})).await;
    assert_eq!(
        std::fs::read_to_string(root.join("over/http.txt")).unwrap(),
        "via HTTP"
    );

    // Shutdown completes even while the client still holds its session open.
    stop.send(()).unwrap();
    let done = tokio::time::timeout(Duration::from_secs(10), server).await;
    done.expect("serve_http returns after shutdown")
        .unwrap()
        .unwrap();
    drop(client);
}

#[tokio::test]
async fn serve_http_refuses_bad_arguments_before_listening() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let e = serve_http("nope", &[], listener, async {}, None)
        .await
        .unwrap_err();
    assert!(matches!(e, BundledError::UnknownServer { .. }), "{e}");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let e = serve_http("notes", &[], listener, async {}, None)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("`--file` is required"), "{e}");
    let e = cohort::bundled::serve_stdio("workspace", &["--dir".into(), "x".into()], None)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("unexpected argument `--dir`"), "{e}");
}

#[test]
fn the_shipped_yamls_name_builtin_servers_with_valid_arguments() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp_servers");
    let expected = [
        ("workspace.yaml", "workspace", "../workspace"),
        ("notes.yaml", "notes", "../.cohort/notes.json"),
    ];
    for (file, name, path) in expected {
        let server = cohort::mcp::load_server(&dir.join(file)).unwrap();
        assert_eq!(server.name, name);
        let cohort::mcp::McpTransport::Builtin {
            server: builtin,
            args,
            cwd,
            ..
        } = server.transport
        else {
            panic!("{file} is not a builtin server");
        };
        assert_eq!(builtin, name);
        // The YAML's folder is the child's working directory, so paths resolve from there.
        let parsed = BundledArgs::parse_in(&builtin, &args, &cwd).unwrap();
        assert_eq!(parsed.path, dir.join(path), "{file}");
    }
    // The web server's: a search API whose key is passed on by name, never written there.
    let web = cohort::mcp::load_server(&dir.join("web.yaml")).unwrap();
    let cohort::mcp::McpTransport::Builtin { args, pass_env, .. } = web.transport else {
        panic!("web.yaml is not a builtin server");
    };
    let parsed = cohort::bundled::WebArgs::parse(&args).unwrap();
    let (_, _, key_env) = parsed.search.expect("a search API");
    assert_eq!(pass_env, [key_env.unwrap()]);
}

/// A FIFO in the workspace (made by anyone who shares the folder) is refused at once by every
/// file tool: opening one for writing waits for a reader, so a call used to hang until its
/// timeout.
#[cfg(unix)]
#[tokio::test]
async fn a_fifo_in_the_workspace_is_refused_at_once() {
    use std::os::unix::ffi::OsStrExt;
    let dir = Scratch::new("bundled-ws-fifo");
    let root = dir.join("root");
    let client = connect(WorkspaceServer::new(&root).unwrap()).await;
    let fifo = std::ffi::CString::new(root.join("pipe").as_os_str().as_bytes()).unwrap();
    // SAFETY: `fifo` is a NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    for (tool, args) in [
        ("write_file", json!({"path": "pipe", "content": "x"})),
        ("append_file", json!({"path": "pipe", "content": "x"})),
        ("read_file", json!({"path": "pipe"})),
    ] {
        let refused =
            tokio::time::timeout(Duration::from_secs(10), tool_error(&client, tool, args))
                .await
                .unwrap_or_else(|_| panic!("{tool} on a FIFO blocked"));
        assert!(refused.contains("FIFO"), "{tool}: {refused}");
    }
    let listing = ok(&client, "list_dir", json!({"path": ""})).await;
    assert!(listing.contains("pipe (a FIFO"), "{listing}");
}
