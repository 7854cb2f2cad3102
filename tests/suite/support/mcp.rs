//! Helpers for the MCP client tests: where `.ci/run` installed the third-party servers, server
//! configs for them, and finding, killing and checking their processes through /proc.

pub use super::scratch;

use cohort::mcp::{McpServerConfig, McpTransport};
use scratch::Scratch;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Where `.ci/run` installs the servers: `$COHORT_CI_CACHE`, by default `~/.cache/cohort-ci`.
pub fn ci_cache() -> PathBuf {
    match std::env::var_os("COHORT_CI_CACHE") {
        Some(dir) => PathBuf::from(dir),
        None => {
            PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cache/cohort-ci")
        }
    }
}

/// The entry point of `@modelcontextprotocol/server-everything` (npm).
pub fn everything_js() -> PathBuf {
    let js =
        ci_cache().join("npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        js.is_file(),
        "{} is missing: run .ci/run (or its `npm install … @modelcontextprotocol/server-everything` line) to install the test MCP servers",
        js.display()
    );
    js
}

/// The Python of the venv that holds `mcp-server-time` (PyPI).
pub fn time_python() -> PathBuf {
    let venv = ci_cache().join("venv");
    let installed = std::fs::read_dir(venv.join("lib"))
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .any(|d| d.path().join("site-packages/mcp_server_time").is_dir());
    assert!(
        installed,
        "mcp-server-time is missing from {}: run .ci/run (or its `pip install mcp-server-time` line) to install the test MCP servers",
        venv.display()
    );
    venv.join("bin/python")
}

/// A marker unique to one test, put into a server's env so its process can be found.
pub fn marker(tag: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{tag}-{}-{nanos}", std::process::id())
}

/// A fresh folder for one test, removed when the test drops it.
pub fn temp_dir(tag: &str) -> Scratch {
    Scratch::new(&format!("mcp-{tag}"))
}

pub fn stdio(
    name: &str,
    command: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    timeout: Duration,
) -> McpServerConfig {
    McpServerConfig {
        risk: Default::default(),
        cache: None,
        name: name.into(),
        description: format!("test server {name}"),
        transport: McpTransport::Stdio {
            command: command.display().to_string(),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
            pass_env: Vec::new(),
            cwd: std::env::temp_dir(),
        },
        call_timeout: timeout,
        connect_timeout: Duration::from_secs(60),
        file: PathBuf::from(format!("{name}.yaml")),
    }
}

/// server-everything over stdio, its process tagged with `COHORT_TEST_MARKER=marker`.
pub fn everything(name: &str, marker: &str, timeout: Duration) -> McpServerConfig {
    let js = everything_js();
    stdio(
        name,
        Path::new("node"),
        &[js.to_str().unwrap(), "stdio"],
        &[("COHORT_TEST_MARKER", marker)],
        timeout,
    )
}

/// server-everything behind a shell that ignores SIGTERM and starts a grandchild `sleep`
/// (also deaf to SIGTERM and to stdin EOF) that it then waits for: only killing the whole
/// process group stops everything it started. All three processes carry the marker.
pub fn stubborn_everything(name: &str, marker: &str) -> McpServerConfig {
    let js = everything_js();
    stdio(
        name,
        Path::new("sh"),
        &[
            "-c",
            "trap '' TERM; sleep 600 & node \"$0\" stdio; wait",
            js.to_str().unwrap(),
        ],
        &[("COHORT_TEST_MARKER", marker)],
        Duration::from_secs(30),
    )
}

/// mcp-server-time over stdio, tagged like `everything`.
pub fn time(name: &str, marker: &str) -> McpServerConfig {
    stdio(
        name,
        &time_python(),
        &["-m", "mcp_server_time"],
        &[("COHORT_TEST_MARKER", marker)],
        Duration::from_secs(30),
    )
}

/// Live processes whose environment holds `COHORT_TEST_MARKER=marker`.
pub fn pids_with_marker(marker: &str) -> Vec<u32> {
    let needle = format!("COHORT_TEST_MARKER={marker}");
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|v| v == needle.as_bytes()))
        })
        .filter(|pid| alive(*pid))
        .collect()
}

/// Waits (up to 10 s) until exactly one process carries the marker, and returns it.
pub fn the_pid(marker: &str) -> u32 {
    let start = Instant::now();
    loop {
        let pids = pids_with_marker(marker);
        if pids.len() == 1 {
            return pids[0];
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "expected one server process with marker {marker}, found {pids:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether `pid` exists and is not a zombie.
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// Waits up to `within` until no process carries the marker; the survivors otherwise.
pub async fn marked_gone_within(marker: &str, within: Duration) -> Result<(), Vec<u32>> {
    let start = Instant::now();
    loop {
        let left = pids_with_marker(marker);
        if left.is_empty() {
            return Ok(());
        }
        if start.elapsed() > within {
            return Err(left);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub fn kill9(pid: u32) {
    let status = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill -9 {pid} failed");
}

/// The text of a tool result's first content block.
pub fn first_text(result: &serde_json::Value) -> &str {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text content in {result}"))
}
