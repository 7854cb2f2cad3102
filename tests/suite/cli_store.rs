//! `cohort inspect` and `cohort export` on a store a team wrote (here through the monitor's
//! journal, as a running team writes it): the table of tasks, the events as JSON lines (all,
//! or one task's), and clear errors for missing data.

use crate::support::scratch;

use cohort::event::{Change, States, TaskChange};
use cohort::monitor::Monitor;
use cohort::state::{TaskState, TokenUsage};
use cohort::store::SqlStore;
use scratch::Scratch;
use std::process::Command;
use std::sync::Arc;

fn cohort(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_cohort"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_lists_the_stored_tasks_and_export_writes_their_events() {
    let dir = Scratch::new("cli-store");
    let file = dir.join("team.db");
    let store = Arc::new(SqlStore::open_sqlite(&file).await.unwrap());
    let m = Monitor::with_store(1_024, store, States::default(), 0);
    let mut t1 = TaskState::new(
        "t-one".into(),
        "Write a haiku".into(),
        "i".into(),
        "m".into(),
    );
    t1.execution_state = cohort::state::ExecutionState::Running;
    let t2 = TaskState::new("t-two".into(), "Plan a trip".into(), "i".into(), "m".into());
    let t3 = TaskState::new("t-one-more".into(), "More".into(), "i".into(), "m".into());
    let last = m.publish(vec![
        Change::Task(TaskChange::Created { task: Box::new(t1) }),
        Change::Task(TaskChange::Created { task: Box::new(t2) }),
        Change::Task(TaskChange::Created { task: Box::new(t3) }),
        Change::Task(TaskChange::Tokens {
            task_id: "t-one".into(),
            usage: TokenUsage::new(3, 1),
        }),
    ]);
    assert!(m.durable(last).await);
    let path = file.to_str().unwrap();

    // While the writer still holds the store: reading needs no lock.
    let (ok, table, err) = cohort(&["inspect", "--data", path]);
    assert!(ok, "{err}");
    assert!(table.contains("data: sqlite://"), "{table}");
    let row = table
        .lines()
        .find(|l| l.starts_with("t-one"))
        .expect(&table);
    assert!(
        row.contains("running") && row.contains("Write a haiku"),
        "{row}"
    );
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("t-two") && l.contains("Plan a trip"))
    );

    let (ok, lines, err) = cohort(&["export", "--data", path]);
    assert!(ok, "{err}");
    let events: Vec<serde_json::Value> = lines
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        events
            .iter()
            .map(|e| e["version"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        [1, 2, 3, 4]
    );
    assert!(err.contains("4 events"), "{err}");
    let (ok, lines, _) = cohort(&["export", "--data", path, "--task", "t-one"]);
    assert!(ok);
    let ops: Vec<String> = lines
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["op"].to_string())
        .collect();
    assert_eq!(ops, ["\"created\"", "\"tokens\""]);
    // A unique start of an id names its task (the console shows ids 8 characters long).
    let (ok, lines, err) = cohort(&["export", "--data", path, "--task", "t-tw"]);
    assert!(ok, "{err}");
    assert_eq!(lines.lines().count(), 1, "{lines}");
    assert!(lines.contains("Plan a trip"), "{lines}");
    // An unknown, too short or ambiguous id is bad input, said as such: never "0 events".
    for (given, says) in [
        ("abcd1234", "no task in sqlite://"),
        ("t-", "too short to name a task"),
        ("t-on", "names more than one task"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_cohort"))
            .args(["export", "--data", path, "--task", given])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{given}: {err}");
        assert!(
            err.contains(says) && !err.contains("0 events"),
            "{given}: {err}"
        );
        assert!(out.stdout.is_empty());
    }
    m.close();

    // Missing data, or none named: a clear error, exit 3, nothing created.
    let missing = dir.join("nothing-here.db");
    let (ok, _, err) = cohort(&["inspect", "--data", missing.to_str().unwrap()]);
    assert!(!ok && err.contains("there is no cohort data at"), "{err}");
    assert!(!missing.exists());
    let (ok, _, err) = cohort(&["export"]);
    assert!(
        !ok && err.contains("--data PATH or --database URL"),
        "{err}"
    );
}

/// `cohort run --data`: the team's state is kept; a second run on the same file carries on
/// from it (its scripted model too: the script serves two goals, one after the other, and the
/// second run takes the second goal's replies), and reports only the task its own goal made.
#[test]
fn run_with_data_keeps_the_team_and_a_second_run_follows_only_its_own_goal() {
    use cohort::bench::team::{Scratch, TeamShape, write_team};
    let scratch = Scratch::new("cli-run-data").unwrap();
    let shape = TeamShape {
        workers: 2,
        steps: 1,
        delay_ms: 0,
        max_in_flight: 8,
        goals: 2,
    };
    let team = write_team(&scratch.0, shape, None).unwrap();
    let team = team.to_str().unwrap();
    let file = scratch.0.join("run.db");
    let path = file.to_str().unwrap();
    for round in 1..=2 {
        let (ok, _, err) = cohort(&["run", "--team", team, "--goal", "think", "--data", path]);
        assert!(ok, "run {round}: {err}");
        assert!(err.contains("The team's data is in sqlite://"), "{err}");
        assert!(
            err.contains("task finished") && err.contains("in 1 task)"),
            "run {round}: {err}"
        );
    }
    let (ok, table, err) = cohort(&["inspect", "--data", path]);
    assert!(ok, "{err}");
    let finished = table.lines().filter(|l| l.contains(" finished ")).count();
    assert_eq!(finished, 2, "both goals' tasks are stored:\n{table}");
    // Piped into a reader that is gone (`| head`), inspect ends quietly, as Unix tools do.
    let mut gone = Command::new(env!("CARGO_BIN_EXE_cohort"))
        .args(["inspect", "--data", path])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(gone.stdout.take());
    let out = gone.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    // The run's end checkpointed the store: its main file holds everything.
    let wal = scratch.0.join("run.db-wal");
    assert!(
        std::fs::metadata(&wal).map_or(0, |m| m.len()) == 0,
        "{} is not empty",
        wal.display()
    );
}

/// After compaction: `inspect` shows the store's sizes and its last compaction; `export` gives
/// a compacted task as its final record (`{"archived": …}`), then the events kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compacted_task_exports_as_its_final_record_and_inspect_shows_sizes() {
    let dir = Scratch::new("cli-compact");
    let file = dir.join("team.db");
    let store = Arc::new(SqlStore::open_sqlite(&file).await.unwrap());
    let m = Monitor::with_store(1_024, store.clone(), States::default(), 0);
    let t = TaskState::new(
        "t-one".into(),
        "Write a haiku".into(),
        "i".into(),
        "m".into(),
    );
    m.publish(vec![
        Change::Task(TaskChange::Created { task: Box::new(t) }),
        Change::Task(TaskChange::State {
            task_id: "t-one".into(),
            execution_state: cohort::state::ExecutionState::Finished,
            task_summary: Some("five, seven, five".into()),
            summary_written: None,
            outcome: None,
        }),
    ]);
    // Closing snapshots the states: everything is covered, and compaction folds it away.
    m.close();
    let policy = cohort::config::Compaction {
        keep_events: std::time::Duration::ZERO,
        keep_events_bytes: 0,
        every: std::time::Duration::from_secs(60),
    };
    let stop = std::sync::atomic::AtomicBool::new(false);
    use cohort::store::Store;
    let c = store.compact(&policy, &stop).await.unwrap();
    assert_eq!((c.events_pruned, c.tasks_archived), (2, 1));
    drop(m);
    drop(store);
    let path = file.to_str().unwrap();

    let (ok, table, err) = cohort(&["inspect", "--data", path]);
    assert!(ok, "{err}");
    assert!(table.contains("store: "), "{table}");
    assert!(table.contains("archived tasks: 1 ("), "{table}");
    assert!(table.contains("events: 0 (0 B)"), "{table}");
    assert!(
        table.contains("last compaction: ") && table.contains("(2 pruned)"),
        "{table}"
    );
    let (ok, lines, err) = cohort(&["export", "--data", path, "--task", "t-one"]);
    assert!(ok, "{err}");
    assert!(err.contains("0 events, 1 archived task record"), "{err}");
    let line: serde_json::Value = serde_json::from_str(lines.trim()).unwrap();
    let task = &line["archived"]["task"];
    assert_eq!(task["execution_state"], "finished");
    assert_eq!(task["task_summary"], "five, seven, five");
    assert_eq!(line["archived"]["version"], 2);
}

/// A `cohort serve` child on a store of its own, stopped with SIGINT: its stderr once it ended.
struct Serving {
    child: std::process::Child,
    stderr: std::sync::mpsc::Receiver<String>,
    /// Where it listens.
    addr: String,
}

impl Serving {
    /// Starts `serve` of the quickstart with these store arguments and waits until it listens.
    fn start(data: &[&str]) -> Serving {
        Self::start_team("examples/quickstart/team.yaml", data)
    }

    /// Starts `serve` of `team` with these store arguments and waits until it listens.
    fn start_team(team: &str, data: &[&str]) -> Serving {
        use std::io::BufRead;
        let mut child = Command::new(env!("CARGO_BIN_EXE_cohort"))
            .args(["serve", "--team", team])
            .args(["--bind", "127.0.0.1:0"])
            .args(data)
            .env("NO_COLOR", "1")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, stderr) = std::sync::mpsc::channel();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match stderr.recv_timeout(left) {
                Ok(line) if line.starts_with("Cohort is serving") => {
                    let addr = line
                        .split_once("http://")
                        .and_then(|(_, a)| a.split_once(' '))
                        .map(|(a, _)| a.to_owned())
                        .expect(&line);
                    return Serving {
                        child,
                        stderr,
                        addr,
                    };
                }
                Ok(_) => {}
                Err(e) => panic!("serve did not start: {e}"),
            }
        }
    }

    /// Sends SIGINT; the exit code and what it wrote on stderr and stdout since it started.
    fn interrupt(mut self) -> (Option<i32>, String) {
        let pid = self.child.id().to_string();
        assert!(
            Command::new("kill")
                .args(["-INT", &pid])
                .status()
                .unwrap()
                .success()
        );
        let status = self.child.wait().unwrap();
        let mut out = String::new();
        std::io::Read::read_to_string(self.child.stdout.as_mut().unwrap(), &mut out).unwrap();
        out.extend(self.stderr.iter().map(|l| l + "\n"));
        (status.code(), out)
    }
}

/// Ctrl-C on `serve`: it says it stopped and where the data is, and the `.db` file alone (no
/// `-wal` beside it, as a plain file copy takes it) holds the team.
#[test]
fn serve_stopped_by_sigint_says_where_the_data_is_and_leaves_the_db_file_whole() {
    let dir = Scratch::new("cli-sigint-db");
    let db = dir.join("op.db");
    let serving = Serving::start(&["--data", db.to_str().unwrap()]);
    let (code, said) = serving.interrupt();
    assert_eq!(code, Some(0), "{said}");
    assert!(
        said.contains(&format!(
            "Cohort stopped; the team's data is in {}",
            db.display()
        )),
        "{said}"
    );
    let copy = dir.join("copy").join("op.db");
    std::fs::create_dir_all(copy.parent().unwrap()).unwrap();
    std::fs::copy(&db, &copy).unwrap();
    let (ok, table, err) = cohort(&["inspect", "--data", copy.to_str().unwrap()]);
    assert!(ok, "the copied .db alone: {err}");
    assert!(table.contains("MAS base task"), "{table}");

    let (code, said) = Serving::start(&["--no-data"]).interrupt();
    assert_eq!(code, Some(0), "{said}");
    assert!(
        said.contains("Cohort stopped; nothing was stored (--no-data)"),
        "{said}"
    );
}

/// `cohort backup` copies the store of a team that is running (no lock taken) into a file
/// `inspect` reads; it never overwrites, and sends a Postgres store to pg_dump.
#[test]
fn backup_copies_a_running_teams_store_and_refuses_what_it_cannot_copy() {
    let dir = Scratch::new("cli-backup");
    let db = dir.join("op.db");
    let to = dir.join("backup.db");
    let serving = Serving::start(&["--data", db.to_str().unwrap()]);
    // The team stores its base task a moment after it starts listening.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !cohort(&["inspect", "--data", db.to_str().unwrap()])
        .1
        .contains("MAS base task")
    {
        assert!(std::time::Instant::now() < deadline, "no base task stored");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let (ok, _, err) = cohort(&[
        "backup",
        "--data",
        db.to_str().unwrap(),
        "--to",
        to.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert!(err.starts_with("backed up sqlite://"), "{err}");
    let (ok, table, err) = cohort(&["inspect", "--data", to.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(table.contains("MAS base task"), "{table}");
    let again = Command::new(env!("CARGO_BIN_EXE_cohort"))
        .args([
            "backup",
            "--data",
            db.to_str().unwrap(),
            "--to",
            to.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&again.stderr).contains("already exists"));
    let (code, said) = serving.interrupt();
    assert_eq!(code, Some(0), "{said}");

    let pg = Command::new(env!("CARGO_BIN_EXE_cohort"))
        .args([
            "backup",
            "--database",
            "postgres://u:secret@localhost/db",
            "--to",
        ])
        .arg(dir.join("pg.db"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&pg.stderr);
    assert_eq!(pg.status.code(), Some(3), "{err}");
    assert!(err.contains("pg_dump") && !err.contains("secret"), "{err}");
}

/// One HTTP request to a served team; the answer's JSON.
async fn http(
    addr: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<serde_json::Value>,
) -> serde_json::Value {
    let client = reqwest::Client::new();
    let mut req = client.request(method.parse().unwrap(), format!("http://{addr}{path}"));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    if let Some(b) = body {
        req = req.json(&b);
    }
    req.send().await.unwrap().json().await.unwrap()
}

/// A failed step's prompt and raw reply outlive a restart: `run` keeps them in its store with
/// the failure, and `serve` on that store (a new process, its call log empty) still answers
/// `GET /api/step/{id}/calls` with them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_steps_prompt_and_raw_reply_are_there_after_a_restart() {
    let dir = Scratch::new("cli-calls");
    for f in ["team.yaml", "script.yaml"] {
        std::fs::copy(format!("tests/fixtures/failures/{f}"), dir.join(f)).unwrap();
    }
    let hash = cohort::auth::hash_password("look-at-failures").unwrap();
    let mut team = std::fs::read_to_string(dir.join("team.yaml")).unwrap();
    team.push_str(&format!(
        "humans:\n  - {{id: alice, access: operator, password_hash: \"{hash}\"}}\n"
    ));
    std::fs::write(dir.join("team.yaml"), team).unwrap();
    let (team, db) = (dir.join("team.yaml"), dir.join("team.db"));
    let (team, db) = (team.to_str().unwrap(), db.to_str().unwrap());
    let (ok, _, err) = cohort(&[
        "run",
        "--team",
        team,
        "--goal",
        "Write and review a line",
        "--data",
        db,
    ]);
    assert!(!ok && err.contains("task failed"), "{err}");

    let serving = Serving::start_team(team, &["--data", db]);
    let login = serde_json::json!({"human_agent_id": "alice", "password": "look-at-failures"});
    let token = http(
        &serving.addr,
        "POST",
        "/api/bind_human_agent",
        None,
        Some(login),
    )
    .await;
    let token = token["token"].as_str().expect("a token").to_owned();
    let steps = http(
        &serving.addr,
        "GET",
        "/api/states?type=step",
        Some(&token),
        None,
    )
    .await;
    let failed = steps
        .as_object()
        .unwrap()
        .iter()
        .find(|(_, s)| {
            s["agent_id"] == "reviewer"
                && s["execution_state"] == "failed"
                && s["executor"] == "planning"
        })
        .map(|(id, _)| id.clone())
        .expect("the reviewer's failed plan");
    let calls = http(
        &serving.addr,
        "GET",
        &format!("/api/step/{failed}/calls"),
        Some(&token),
        None,
    )
    .await;
    assert_eq!(calls["stored"], true, "{calls:#}");
    let first = &calls["calls"][0];
    assert!(
        first["prompt"]
            .as_str()
            .is_some_and(|p| p.contains("review")),
        "{calls:#}"
    );
    assert_eq!(first["reply"], "I will review things.", "{calls:#}");
    let (code, said) = serving.interrupt();
    assert_eq!(code, Some(0), "{said}");
}
