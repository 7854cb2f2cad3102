//! A child MCP server process: started with only the environment it is given, in its own
//! process group, its stderr forwarded to our log; a reaper task owns it, reports how it ended
//! and, when asked (or when its session is dropped), stops it and whatever it started.

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};
use tokio::sync::{oneshot, watch};

/// How long a child may take to exit after its stdin closed at `shutdown`, before it is killed.
pub(super) const EXIT_GRACE: Duration = Duration::from_secs(2);
/// How many of a child's last stderr lines are kept to explain a failed start or a death.
const STDERR_TAIL: usize = 8;
/// The only variables of our own environment a child inherits: without PATH and HOME,
/// `npx`, `uvx` and `python` cannot even start. Everything else (LLM API keys above all)
/// stays with us; a server gets what its config's `env` gives it.
pub const INHERITED_VARS: [&str; 2] = ["PATH", "HOME"];

/// A child server process, owned by its reaper task (`reap`).
pub(super) struct Process {
    /// `Some(why)` once the process has exited and was reaped.
    pub(super) gone: watch::Receiver<Option<String>>,
    /// Sent (or dropped, with the session) to make the reaper stop the process.
    pub(super) stop: Mutex<Option<oneshot::Sender<()>>>,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
}

/// Starts a server process: `program fixed… args…` in `cwd`, with `inherited` plus `env` as
/// its whole environment. Returns the process handle and its stdin/stdout for the transport.
pub(super) fn spawn(
    server: &str,
    program: &Path,
    fixed: &[&str],
    args: &[String],
    env: &BTreeMap<String, String>,
    cwd: &Path,
    inherited: &[(String, String)],
) -> Result<(Process, ChildStdin, ChildStdout), String> {
    let mut command = Command::new(program);
    command
        .args(fixed)
        .args(args)
        .env_clear()
        .envs(inherited.iter().map(|(k, v)| (k, v)))
        .envs(env)
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Should our reaper task never run again (the runtime is gone), dropping the
        // child still kills it.
        .kill_on_drop(true);
    // Its own process group, so that what the server starts in turn (npx → node) can be
    // stopped with it, and a Ctrl-C meant for us does not hit it first.
    #[cfg(unix)]
    command.process_group(0);
    let mut child = command.spawn().map_err(|e| {
        format!(
            "cannot start `{}` in {}: {e}",
            program.display(),
            cwd.display()
        )
    })?;
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err("the server process has no stdio pipes".to_owned());
    };
    let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
    tokio::spawn(forward_stderr(
        server.to_owned(),
        stderr,
        stderr_tail.clone(),
    ));
    let (gone_tx, gone) = watch::channel(None);
    let (stop_tx, stop) = oneshot::channel();
    tokio::spawn(reap(child, stop, gone_tx));
    Ok((
        Process {
            gone,
            stop: Mutex::new(Some(stop_tx)),
            stderr_tail,
        },
        stdin,
        stdout,
    ))
}

impl Process {
    pub(super) async fn died(&self) -> String {
        let mut gone = self.gone.clone();
        let reason = match gone.wait_for(Option::is_some).await {
            Ok(reason) => reason.clone().unwrap_or_default(),
            Err(_) => "the server process was lost".to_owned(),
        };
        format!("{reason}{}", self.stderr_note())
    }

    pub(super) fn stderr_note(&self) -> String {
        let tail = self.stderr_tail.lock().expect("poisoned");
        let lines: Vec<&str> = tail.iter().map(String::as_str).collect();
        match lines.is_empty() {
            true => String::new(),
            false => format!("; its stderr ended with: {}", lines.join(" | ")),
        }
    }
}

/// Owns a child server process: waits for it to exit, or stops it when asked (or when the
/// session that owns `stop` is dropped), and then reports how it ended through `gone`.
async fn reap(mut child: Child, stop: oneshot::Receiver<()>, gone: watch::Sender<Option<String>>) {
    let pid = child.id();
    let status = tokio::select! {
        status = child.wait() => status,
        asked = stop => {
            // Asked by `shutdown` (stdin is closed by now): a moment to exit. Dropped with
            // the client: killed at once.
            let grace = if asked.is_ok() { EXIT_GRACE } else { Duration::ZERO };
            match tokio::time::timeout(grace, child.wait()).await {
                Ok(status) => status,
                Err(_) => {
                    let _ = child.kill().await;
                    child.wait().await
                }
            }
        }
    };
    if let Some(pid) = pid {
        kill_group(pid).await;
    }
    let reason = match status {
        Ok(status) => format!("the server process ended ({status})"),
        Err(e) => format!("lost track of the server process: {e}"),
    };
    let _ = gone.send(Some(reason));
}

/// Kills what is left of the child's process group (grandchildren such as the node process
/// behind `npx`); std cannot signal a group, so this runs kill(1). The group's id is the pid
/// of the child just reaped, which the kernel keeps reserved while any member is left.
async fn kill_group(pgid: u32) {
    #[cfg(unix)]
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{pgid}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await;
    #[cfg(not(unix))]
    let _ = pgid;
}

/// A child's stderr goes to our log at debug level (never into the MCP stream); the last
/// lines are kept to explain a failed start or a death.
async fn forward_stderr(server: String, stderr: ChildStderr, tail: Arc<Mutex<VecDeque<String>>>) {
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::new();
    while reader
        .read_until(b'\n', &mut line)
        .await
        .is_ok_and(|n| n > 0)
    {
        let text = String::from_utf8_lossy(&line).trim_end().to_owned();
        line.clear();
        if text.is_empty() {
            continue;
        }
        tracing::debug!(target: "cohort::mcp::stderr", server = %server, "{text}");
        let mut tail = tail.lock().expect("poisoned");
        if tail.len() == STDERR_TAIL {
            tail.pop_front();
        }
        tail.push_back(text);
    }
}
