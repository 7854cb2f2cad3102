//! `cohort mcp describe|call|serve` as a person debugging a server uses them: JSON on stdout,
//! a non-zero exit with the server's error on failure, and no server left running.

use crate::support::mcp;

use mcp::scratch::Scratch;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn cohort(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cohort"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

fn json(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is JSON")
}

/// A folder with `w.yaml` serving the bundled workspace on `ws/`.
fn workspace_dir(tag: &str) -> Scratch {
    let d = mcp::temp_dir(tag);
    std::fs::create_dir_all(d.join("ws")).unwrap();
    std::fs::write(
        d.join("w.yaml"),
        "name: w\ndescription: files\nbuiltin: workspace\nargs: [--root, ws]\n",
    )
    .unwrap();
    d
}

#[test]
fn describe_and_call_the_bundled_workspace_from_a_bare_file_name() {
    let d = workspace_dir("cli-ws");
    let described = json(&cohort(&d, &["mcp", "describe", "w.yaml"]));
    let tools: Vec<&str> = described["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        tools.contains(&"write_file") && tools.contains(&"search"),
        "{tools:?}"
    );
    assert!(
        described["instructions"]
            .as_str()
            .unwrap()
            .contains("workspace:///")
    );

    json(&cohort(
        &d,
        &[
            "mcp",
            "call",
            "w.yaml",
            "--tool",
            "write_file",
            "--args",
            r#"{"path": "a.txt", "content": "alpha\nbeta\n"}"#,
        ],
    ));
    assert_eq!(
        std::fs::read_to_string(d.join("ws/a.txt")).unwrap(),
        "alpha\nbeta\n"
    );
    let found = json(&cohort(
        &d,
        &[
            "mcp",
            "call",
            "w.yaml",
            "--tool",
            "search",
            "--args",
            r#"{"pattern": "^b"}"#,
        ],
    ));
    assert!(found.to_string().contains("a.txt:2"), "{found}");
    let resource = json(&cohort(
        &d,
        &["mcp", "call", "w.yaml", "--resource", "workspace:///a.txt"],
    ));
    assert!(resource.to_string().contains("alpha"), "{resource}");
    let prompt = json(&cohort(
        &d,
        &[
            "mcp",
            "call",
            "w.yaml",
            "--prompt",
            "review_file",
            "--args",
            r#"{"path": "a.txt"}"#,
        ],
    ));
    assert!(prompt.to_string().contains("beta"), "{prompt}");
}

#[test]
fn failures_exit_non_zero_with_the_servers_or_the_configs_reason_and_bad_arguments_exit_3() {
    let d = workspace_dir("cli-err");
    let out = cohort(
        &d,
        &[
            "mcp",
            "call",
            "w.yaml",
            "--tool",
            "read_file",
            "--args",
            r#"{"path": "../w.yaml"}"#,
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("outside"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = cohort(&d, &["mcp", "call", "w.yaml", "--tool", "nope"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nope"));
    let out = cohort(
        &d,
        &[
            "mcp",
            "call",
            "w.yaml",
            "--tool",
            "read_file",
            "--args",
            "[1]",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(3),
        "arguments it cannot use are bad input"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("--args is not a JSON object"));

    std::fs::write(
        d.join("bad.yaml"),
        "name: a b\ndescription: ''\nbuiltin: workspace\n",
    )
    .unwrap();
    let out = cohort(&d, &["mcp", "describe", "bad.yaml"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.lines().any(|l| l.contains("bad.yaml: name:"))
            && err.lines().any(|l| l.contains("bad.yaml: description:")),
        "one problem a line:\n{err}"
    );
}

#[test]
fn serve_over_http_answers_calls_and_refuses_wide_binds() {
    let out = cohort(
        Path::new("."),
        &[
            "mcp",
            "serve",
            "workspace",
            "--http",
            "0.0.0.0:0",
            "--",
            "--root",
            "/tmp",
        ],
    );
    assert_eq!(out.status.code(), Some(3), "a wide bind is bad input");
    assert!(String::from_utf8_lossy(&out.stderr).contains("loopback"));

    let d = workspace_dir("cli-http");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut server = Command::new(env!("CARGO_BIN_EXE_cohort"))
        .args([
            "mcp",
            "serve",
            "workspace",
            "--http",
            &format!("127.0.0.1:{port}"),
            "--",
            "--root",
        ])
        .arg(d.join("ws"))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::fs::write(
        d.join("h.yaml"),
        format!("name: h\ndescription: files over http\nurl: http://127.0.0.1:{port}/mcp\n"),
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let described = loop {
        let out = cohort(&d, &["mcp", "describe", "h.yaml"]);
        if out.status.success() || Instant::now() > deadline {
            break json(&out);
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(described["tools"].to_string().contains("write_file"));
    json(&cohort(
        &d,
        &[
            "mcp",
            "call",
            "h.yaml",
            "--tool",
            "write_file",
            "--args",
            r#"{"path": "h.txt", "content": "over http"}"#,
        ],
    ));
    assert_eq!(
        std::fs::read_to_string(d.join("ws/h.txt")).unwrap(),
        "over http"
    );
    Command::new("kill")
        .args(["-INT", &server.id().to_string()])
        .status()
        .unwrap();
    let status = server.wait().unwrap();
    assert!(
        status.success(),
        "serve stops cleanly on Ctrl-C: {status:?}"
    );
}

#[test]
fn an_interrupted_call_leaves_no_server_running() {
    let d = mcp::temp_dir("cli-int");
    let marker = mcp::marker("cli-int");
    let js = mcp::everything_js();
    std::fs::write(
        d.join("ev.yaml"),
        format!("name: ev\ndescription: everything\ncommand: node\nargs: ['{}', stdio]\nenv: {{COHORT_TEST_MARKER: '{marker}'}}\n", js.display()),
    )
    .unwrap();
    let mut call = Command::new(env!("CARGO_BIN_EXE_cohort"))
        .args([
            "mcp",
            "call",
            "ev.yaml",
            "--tool",
            "trigger-long-running-operation",
            "--args",
            r#"{"duration": 60, "steps": 1}"#,
        ])
        .current_dir(&d)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while mcp::pids_with_marker(&marker).is_empty() {
        assert!(Instant::now() < deadline, "the server never started");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    Command::new("kill")
        .args(["-INT", &call.id().to_string()])
        .status()
        .unwrap();
    let status = call.wait().unwrap();
    assert_eq!(status.code(), Some(1), "interrupted");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !mcp::pids_with_marker(&marker).is_empty() {
        assert!(
            Instant::now() < deadline,
            "server processes outlived the interrupted call: {:?}",
            mcp::pids_with_marker(&marker)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
