//! Golden files of the wire form: what leaves the runtime, field for field, so that a change to
//! it shows as a diff of `tests/golden/wire/` in review.
//!
//! **`UPDATE_GOLDEN=1 cargo test --test suite wire::` rewrites the files from the current code**; read
//! their diff like code. A failing run leaves what it got in `target/tmp/wire-actual/`.
//!
//! The offline quickstart team (`examples/quickstart`, a scripted LLM) carries "Write a haiku
//! about autumn rain" to a finished task, keeping its state in a SQLite store, until the team
//! is quiet (the task over, no step to run, every message taken). Then the test compares:
//! - `states.json`: the final states `{"task", "stage", "agent", "step"}`, as `cohort run
//!   --json` prints them and `GET /api/states` serves them;
//! - `events.txt`: every change as the store keeps it (the lines of `cohort export`, the events
//!   the websocket sends), one per line;
//! - `messages.jsonl`: every message routed, in the form the deliveries keep it (`InFlight`:
//!   number, message, receivers), with the agents whose receipt the store holds;
//! - `snapshot.json`: the store's last snapshot (`StatesRecord`), what recovery starts from.
//!
//! What varies from run to run is normalised: each distinct UUID becomes `<id1>`, `<id2>`, … in
//! the order `events.txt` first shows it (the other files use the same names); epoch
//! milliseconds become `<ms>`, clock times `<datetime>`, trace ids `<trace>`, trace contexts `<traceparent>`, memory-key stamps `<stamp>`, versions
//! `<version>`. The writer and the reviewer work at once in the first stage, so the order
//! *between* agents varies while each one's own order does not: `events.txt` lists each agent's
//! changes in order, then the working states each agent took (whether it went idle between two
//! steps depends on whether its next message came first), then SyncState's changes grouped by
//! the agent they name (each group in order) and those naming none (task tokens, stages added,
//! states: sorted). A task's shared-info pool and the snapshot's retired steps are ordered by
//! agent (stable), the snapshot's lists in id order put in placeholder order.
//!
//! Rarely, on a loaded machine, a message overtakes the end of the step that caused it (the
//! manager's last step is then cut loose before it is removed). Rather than normalise every
//! such variant away, a run whose files differ is tried again, up to [`RUNS`] runs: a change
//! of the wire differs every time, a timing variant once in a long while. The update writes
//! only files that two runs in a row agree on.

use cohort::actors::{Host, Team, start_team_stored};
use cohort::config::load_team;
use cohort::event::deliveries::InFlight;
use cohort::message::Message;
use cohort::store::{SqlStore, Store};
use regex::Regex;
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

const TEAM: &str = "examples/quickstart/team.yaml";
const GOAL: &str = "Write a haiku about autumn rain";
const GOLDEN: &str = "tests/golden/wire";

/// Runs tried before the test fails: see the file's opening comment.
const RUNS: usize = 3;

/// The golden files of one run: `(file name, content)`.
type Files = Vec<(&'static str, String)>;

#[test]
fn the_quickstart_run_gives_out_the_golden_states_events_messages_and_snapshot() {
    if std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1") {
        return update();
    }
    let mut failed = Vec::new();
    for n in 0..RUNS {
        failed = differences(&golden_files(n));
        if failed.is_empty() {
            return;
        }
    }
    panic!(
        "the wire form changed (`UPDATE_GOLDEN=1 cargo test --test suite wire::` rewrites \
         tests/golden/wire/ from this code; review its diff):\n\n{}",
        failed.join("\n\n")
    );
}

/// Writes the golden files from two runs that agree (so never from a rare timing variant).
fn update() {
    let mut last = golden_files(0);
    for n in 1..5 {
        let files = golden_files(n);
        if files == last {
            std::fs::create_dir_all(GOLDEN).unwrap();
            for (name, text) in &files {
                std::fs::write(Path::new(GOLDEN).join(name), text).unwrap();
            }
            return;
        }
        last = files;
    }
    panic!("no two runs in five gave the same files: the normalisation misses a variation");
}

/// One run of the quickstart (in an actix system of its own), normalised.
fn golden_files(n: usize) -> Files {
    let run = actix::System::new().block_on(run_quickstart(n));
    // The team's actors and threads go with their system.
    actix::System::current().stop();
    let mut names = Ids::default();
    // `events.txt` names the ids first: it is the file whose order is the most fixed.
    let events = events_text(&run.events, &mut names);
    vec![
        ("events.txt", events),
        ("states.json", pretty(&states(&run.states, &mut names))),
        ("messages.jsonl", messages_text(&run.events, &mut names)),
        (
            "snapshot.json",
            pretty(&snapshot(&run.snapshot, &mut names)),
        ),
    ]
}

/// What the run left: the final states, every stored event, the last snapshot.
struct Run {
    states: Value,
    events: Vec<Value>,
    snapshot: Value,
}

async fn run_quickstart(n: usize) -> Run {
    let dir = scratch(&format!("run{n}"));
    let store = Arc::new(SqlStore::open_sqlite(&dir.join("team.db")).await.unwrap());
    let cfg = load_team(Path::new(TEAM)).unwrap();
    let vars = |_: &str| None;
    let host = Host::new(&vars, env!("CARGO_BIN_EXE_cohort"));
    let loaded = cohort::store::load(store.as_ref()).await.unwrap();
    let team = start_team_stored(&cfg, &host, store.clone(), loaded).unwrap();
    team.submit_goal(None, GOAL).await.unwrap();
    until_quiet(&team).await;
    let states = team.monitor.all();
    let version = team.monitor.version();
    // Commits what is queued and takes the last snapshot.
    team.monitor.close();
    team.shutdown().await;

    let mut export = Vec::new();
    cohort::store::inspect::export(store.as_ref(), None, &mut export)
        .await
        .unwrap();
    // The events, without the recorded model calls that follow them.
    let events: Vec<Value> = String::from_utf8(export)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l.get("model_call").is_none())
        .collect();
    assert_eq!(
        events.last().map(|e| e["version"].as_u64()),
        Some(Some(version)),
        "the store holds every change the monitor applied, and nothing after"
    );
    let snapshot = store.latest_snapshot().await.unwrap().expect("a snapshot");
    assert_eq!(snapshot.version, version, "the last snapshot is of the end");
    let snapshot = json!({
        "version": "<version>",
        "states": serde_json::to_value(&snapshot.states).unwrap(),
    });
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
    Run {
        states,
        events,
        snapshot,
    }
}

/// Waits (up to 20 s) until the goal's task is over, no step runs or waits to run, no agent
/// works and every message routed was taken: from then on the team changes nothing.
async fn until_quiet(team: &Team) {
    for _ in 0..2_000 {
        let quiet = team.monitor.read(|s| {
            let c = s.counters();
            s.tasks
                .values()
                .any(|t| t.task_id != team.base_task && t.execution_state.is_over())
                && c.steps_running == 0
                && c.agents_working == 0
                && s.deliveries.in_flight_count() == 0
                && s.agents.values().all(|a| a.agent_step.todo_len() == 0)
        });
        if quiet {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the quickstart team did not settle: {}", team.monitor.all());
}

/// The stored events, one per line: each agent's own changes in order, then SyncState's
/// changes grouped by the agent they name (in order), then those naming no agent (sorted).
/// Whether an agent went idle between two steps depends on whether its next message came
/// first, so its working-state changes are listed apart, once each.
fn events_text(events: &[Value], names: &mut Ids) -> String {
    let mut groups: BTreeMap<(Group, String), Vec<Value>> = BTreeMap::new();
    for e in events {
        let mut e = e.clone();
        e["version"] = json!("<version>");
        let agent = named_agent(&e).unwrap_or_default();
        let group = match (e["kind"].as_str(), e["op"].as_str()) {
            (Some("agent"), Some("working_state")) => Group::WorkingStates,
            (Some("agent" | "step"), _) => Group::Own,
            _ if agent.is_empty() => Group::Unnamed,
            _ => Group::Named,
        };
        groups.entry((group, agent)).or_default().push(e);
    }
    let mut out = String::new();
    for ((group, agent), mut changes) in groups {
        let title = match group {
            Group::Own => format!("agent {agent}: its own changes, in order"),
            Group::WorkingStates => format!("agent {agent}: each working state it took, sorted"),
            Group::Named => format!("SyncState: changes naming {agent}, in order"),
            Group::Unnamed => "SyncState: changes naming no agent, sorted".to_owned(),
        };
        if matches!(group, Group::WorkingStates | Group::Unnamed) {
            changes.sort_by_cached_key(masked);
        }
        if group == Group::WorkingStates {
            changes.dedup_by_key(|e| masked(e));
        }
        out.push_str(&format!("# {title}\n"));
        for e in changes {
            out.push_str(&format!("{}\n", names.value(&e)));
        }
    }
    out
}

/// The sections of `events.txt`, in their order.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Group {
    /// An agent's own changes (agent and step), in order.
    Own,
    /// An agent's working-state changes, once each.
    WorkingStates,
    /// SyncState's changes that name an agent, in order.
    Named,
    /// SyncState's changes that name none, sorted.
    Unnamed,
}

/// The agent a change is about: its own (agent and step changes), a shared-info entry's or a
/// stage's agent, or a message's sender.
fn named_agent(e: &Value) -> Option<String> {
    [
        &e["agent_id"],
        &e["agent"]["agent_id"],
        &e["entry"]["agent_id"],
        &e["entry"]["message"]["sender_id"],
    ]
    .into_iter()
    .find_map(|v| v.as_str().map(str::to_owned))
}

/// Every routed message as the deliveries keep it in flight, with the agents that took it.
fn messages_text(events: &[Value], names: &mut Ids) -> String {
    let mut taken: BTreeMap<u64, Vec<&str>> = BTreeMap::new();
    for e in events.iter().filter(|e| e["op"] == "received") {
        let no = e["message_no"].as_u64().unwrap();
        taken
            .entry(no)
            .or_default()
            .push(e["agent_id"].as_str().unwrap());
    }
    let mut out = String::new();
    for e in events.iter().filter(|e| e["op"] == "conversation") {
        let message: Message = serde_json::from_value(e["entry"]["message"].clone()).unwrap();
        let no = e["message_no"].as_u64().unwrap();
        let routed = InFlight {
            message_no: no,
            pending: message.receiver.clone(),
            message: Arc::new(message),
        };
        let mut by = taken.remove(&no).unwrap_or_default();
        by.sort_unstable();
        let line = json!({
            "routed": serde_json::to_value(&routed).unwrap(),
            "at": e["entry"]["timestamp"],
            "taken_by": by,
        });
        out.push_str(&format!("{}\n", names.value(&line)));
    }
    assert!(
        taken.is_empty(),
        "receipts of messages never routed: {taken:?}"
    );
    out
}

/// The final states; a task's shared-info pool ordered by agent (its entries come from agents
/// working at once).
fn states(all: &Value, names: &mut Ids) -> Value {
    let mut all = names.value(all);
    for task in all["task"].as_object_mut().unwrap().values_mut() {
        by_agent(&mut task["shared_info_pool"]);
    }
    all
}

/// The last snapshot; the lists of agents working at once ordered by agent, those in id order
/// put in placeholder order.
fn snapshot(snap: &Value, names: &mut Ids) -> Value {
    let mut snap = names.value(snap);
    let s = &mut snap["states"];
    for task in s["tasks"].as_array_mut().unwrap() {
        by_agent(&mut task["shared_info_pool"]);
    }
    by_agent(&mut s["retired"]);
    sort_by_id(&mut s["stages"], |st| &st["stage_id"]);
    for times in ["step_times", "stage_times", "task_times"] {
        sort_by_id(&mut s[times], |pair| &pair[0]);
    }
    snap
}

fn by_agent(list: &mut Value) {
    let list = list.as_array_mut().unwrap();
    list.sort_by_cached_key(|e| e["agent_id"].as_str().map(str::to_owned));
}

/// Sorts by a placeholder (`<id2>` before `<id10>`).
fn sort_by_id(list: &mut Value, id: impl Fn(&Value) -> &Value) {
    let list = list.as_array_mut().unwrap();
    list.sort_by_cached_key(|e| {
        let id = id(e).as_str().unwrap_or_default().to_owned();
        (id.len(), id)
    });
}

static UUID: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new("[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}").unwrap()
});
/// `2026-11-26 17:04:40` (conversation and shared-info entries).
static DATETIME: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d").unwrap());
/// `20261126T170440` (persistent-memory keys).
static STAMP: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\d{8}T\d{6}").unwrap());
/// A trace id: a hash of a (random) step id, 32 hex digits.
static TRACE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^[0-9a-f]{32}$").unwrap());
/// A W3C `traceparent` (a message's trace context): a trace id and a span id, both hashes.
static TRACEPARENT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^00-[0-9a-f]{32}-[0-9a-f]{16}-01$").unwrap());

/// Milliseconds since the Unix epoch between 2001 and 2286: a time, not a count.
fn is_epoch_ms(n: &serde_json::Number) -> bool {
    n.as_u64()
        .is_some_and(|n| (1_000_000_000_000..10_000_000_000_000).contains(&n))
}

/// A JSON value with its nondeterministic parts replaced by stable placeholders.
fn masked(v: &Value) -> String {
    Ids::default().value(v).to_string()
}

/// Names each distinct UUID by the order it is first met: `<id1>`, `<id2>`, …
#[derive(Default)]
struct Ids(HashMap<String, String>);

impl Ids {
    fn text(&mut self, s: &str) -> String {
        let s = UUID.replace_all(s, |c: &regex::Captures| {
            let n = self.0.len() + 1;
            self.0
                .entry(c[0].to_owned())
                .or_insert_with(|| format!("<id{n}>"))
                .clone()
        });
        let s = DATETIME.replace_all(&s, "<datetime>");
        let s = TRACE.replace_all(&s, "<trace>");
        let s = TRACEPARENT.replace_all(&s, "<traceparent>");
        STAMP.replace_all(&s, "<stamp>").into_owned()
    }

    /// Keys and strings renamed in the order they are serialised (object keys sorted).
    fn value(&mut self, v: &Value) -> Value {
        match v {
            Value::String(s) => Value::String(self.text(s)),
            Value::Number(n) if is_epoch_ms(n) => json!("<ms>"),
            Value::Array(a) => Value::Array(a.iter().map(|x| self.value(x)).collect()),
            Value::Object(o) => {
                let mut out = Map::new();
                for (k, x) in o {
                    let k = self.text(k);
                    out.insert(k, self.value(x));
                }
                Value::Object(out)
            }
            other => other.clone(),
        }
    }
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap() + "\n"
}

/// What differs from the golden files, a paragraph per file. Each file of this run that
/// differs is left in `target/tmp/wire-actual/`, with the first differing line shown.
fn differences(files: &Files) -> Vec<String> {
    files
        .iter()
        .filter_map(|(name, got)| compare(name, got).err())
        .collect()
}

fn compare(name: &str, got: &str) -> Result<(), String> {
    let path = Path::new(GOLDEN).join(name);
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    if want == got {
        return Ok(());
    }
    let actual = Path::new(env!("CARGO_TARGET_TMPDIR")).join("wire-actual");
    std::fs::create_dir_all(&actual).unwrap();
    std::fs::write(actual.join(name), got).unwrap();
    let (w, g): (Vec<&str>, Vec<&str>) = (want.lines().collect(), got.lines().collect());
    let line = (0..w.len().max(g.len()))
        .find(|&i| w.get(i) != g.get(i))
        .unwrap_or(0);
    let [w, g] = [w, g].map(|l| l.get(line).copied().unwrap_or("(the end of the file)"));
    // Long lines (events) are shown around where they part.
    let at = w.chars().zip(g.chars()).take_while(|(a, b)| a == b).count();
    let near = |l: &str| -> String { l.chars().skip(at.saturating_sub(60)).take(160).collect() };
    Err(format!(
        "{} differs at line {} (this run: {}):\n  want: …{}…\n  got:  …{}…",
        path.display(),
        line + 1,
        actual.join(name).display(),
        near(w),
        near(g)
    ))
}

/// A fresh folder of this test's own.
fn scratch(name: &str) -> PathBuf {
    let d =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("wire-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// What the release before the typed core stored (its golden files, ids and times normalised)
/// loads into this one: the last snapshot becomes the team's states again, every event reads
/// back, and a runtime instruction written into a message's text becomes its typed body.
#[test]
fn what_the_release_before_stored_still_loads() {
    let dir = Path::new("tests/fixtures/release-before-typed-core");
    // The placeholders of numbers back to numbers.
    let numbers = |text: String| text.replace("\"<ms>\"", "0").replace("\"<version>\"", "0");
    let snap: Value = serde_json::from_str(&numbers(
        std::fs::read_to_string(dir.join("snapshot.json")).unwrap(),
    ))
    .unwrap();
    let record: cohort::event::StatesRecord =
        serde_json::from_value(snap["states"].clone()).expect("the snapshot loads");
    let states = record.into_states();
    assert_eq!(states.tasks.len(), 2);
    let steps: Vec<_> = states.steps().collect();
    assert!(!steps.is_empty());
    assert!(
        steps
            .iter()
            .all(|s| s.origin == cohort::state::StepOrigin::Unknown),
        "a step stored without its origin reads as unknown"
    );
    let events = numbers(std::fs::read_to_string(dir.join("events.txt")).unwrap());
    let mut read = 0;
    for line in events
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        serde_json::from_str::<cohort::event::Event>(line)
            .unwrap_or_else(|e| panic!("{e}: {line}"));
        read += 1;
    }
    assert!(read > 200, "{read} events");
    let messages = std::fs::read_to_string(dir.join("messages.jsonl")).unwrap();
    let mut upgraded = 0;
    for line in messages.lines() {
        let v: Value = serde_json::from_str(&numbers(line.to_owned())).unwrap();
        let mut m: cohort::message::Message =
            serde_json::from_value(v["routed"]["message"].clone()).unwrap();
        let was_instruction = m.message.starts_with("<instruction>");
        m.upgrade_stored();
        assert_eq!(
            m.instruction_body().is_some(),
            was_instruction,
            "{}",
            m.message
        );
        upgraded += usize::from(was_instruction);
    }
    assert!(upgraded >= 6, "{upgraded}");
}
