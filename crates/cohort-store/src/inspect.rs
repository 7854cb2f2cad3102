//! `cohort inspect` and `cohort export`: reading a team's store without starting the team.

use super::lease::{LeaseRow, NodeRow};
use super::stats::human_bytes;
use super::{ArchivedTask, Loaded, Store, StoreError, StoreStats};
use cohort_core::event::States;
use cohort_core::ids::TaskId;
use std::io::Write;

/// `cohort inspect` (`export` false: the table, on stdout) and `cohort export` (the events of
/// everything or of `task`, as JSON lines on stdout), from the store `spec` opened to read.
/// `task` is a task's id or a unique prefix of it ([`resolve_task`]).
pub async fn read(spec: &str, task: Option<&str>, export: bool) -> Result<(), StoreError> {
    let store = super::SqlStore::open_reader(spec).await?;
    let task = match task {
        Some(given) => Some(resolve_task(&store, given).await?),
        None => None,
    };
    let task = task.as_ref();
    if export {
        let stdout = std::io::stdout();
        let mut out = std::io::BufWriter::new(stdout.lock());
        let written = match self::export(&store, task, &mut out).await {
            Ok(n) => out.flush().map(|()| n).map_err(StoreError::Write),
            Err(e) => Err(e),
        };
        match written {
            Ok(Exported {
                events,
                archived,
                model_calls,
            }) => {
                let archived = match archived {
                    0 => String::new(),
                    n => format!(", {n} archived task record(s)"),
                };
                eprintln!(
                    "{events} events{archived} and {model_calls} recorded model calls from {}",
                    store.url()
                )
            }
            // The reader stopped reading (`cohort export | head`): that is its choice.
            Err(StoreError::Write(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
            Err(e) => return Err(e),
        }
    } else {
        let loaded = super::load(&store).await?;
        print!("{}", describe(store.url(), &loaded));
        print!("\n{}", describe_store(&store.stats().await?));
        let (nodes, leases) = store.placement().await?;
        print!("{}", describe_nodes(&nodes, &leases));
        if let Some(v) = store.published_to().await? {
            println!(
                "events on the NATS event stream: up to version {v} ({} behind the store)",
                loaded.version.saturating_sub(v)
            );
        }
    }
    Ok(())
}

/// The nodes of a team across machines and its leases (nothing for a store without nodes).
pub fn describe_nodes(nodes: &[NodeRow], leases: &[LeaseRow]) -> String {
    if nodes.is_empty() && leases.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "\n{:<16} {:<22} {:<10} {:>10}  {}\n",
        "NODE", "ADDRESS", "STATE", "SEEN", "TEAM FILE"
    );
    for n in nodes {
        let state = match n.stopped_at {
            Some(_) => "stopped",
            // Heard from within a few renewals: alive; else it went away without saying.
            None if n.seen_ms_ago < 30_000 => "up",
            None => "gone",
        };
        out.push_str(&format!(
            "{:<16} {:<22} {:<10} {:>8.1}s  {}\n",
            n.name,
            n.address,
            state,
            n.seen_ms_ago as f64 / 1000.0,
            &n.team_hash[..n.team_hash.len().min(12)]
        ));
    }
    let (agents, others): (Vec<&LeaseRow>, Vec<&LeaseRow>) = leases
        .iter()
        .partition(|l| l.resource.starts_with("agent/"));
    out.push_str(&describe_agent_leases(&agents));
    for l in others {
        let left = if l.expires_in_ms > 0 {
            format!("expires in {:.1}s", l.expires_in_ms as f64 / 1000.0)
        } else {
            "expired or given up".to_owned()
        };
        out.push_str(&format!(
            "lease `{}`: node {}, token {}, {left}\n",
            l.resource, l.node, l.token
        ));
    }
    out
}

/// Agents' leases listed one by one at most; more are counted by node.
const AGENTS_LISTED: usize = 12;

/// Where the agents run: each agent's lease when there are few, else how many each node holds.
fn describe_agent_leases(agents: &[&LeaseRow]) -> String {
    if agents.len() <= AGENTS_LISTED {
        return agents
            .iter()
            .map(|l| {
                let agent = l.resource.trim_start_matches("agent/");
                format!("agent {agent}: node {}, token {}\n", l.node, l.token)
            })
            .collect();
    }
    let mut by_node: std::collections::BTreeMap<&str, usize> = Default::default();
    for l in agents {
        *by_node.entry(&l.node).or_default() += 1;
    }
    let shares: Vec<String> = by_node
        .iter()
        .map(|(n, k)| format!("node {n} {k}"))
        .collect();
    format!("agents: {} ({} in all)\n", shares.join(", "), agents.len())
}

/// The fewest characters of a task id that may name it: the console shows 8.
pub const SHORT_ID_MIN: usize = 4;

/// The stored task `given` names: the task with that id, else the one task whose id starts
/// with it (at least [`SHORT_ID_MIN`] characters, as the console's short ids are); an unknown,
/// too short or ambiguous id is an error that says which.
pub async fn resolve_task(store: &super::SqlStore, given: &str) -> Result<TaskId, StoreError> {
    let given = given.trim();
    if given.is_empty() {
        return Err(StoreError::NoTaskId);
    }
    let prefix = given.to_owned();
    let found = store
        .call(|db| async move { db.task_ids_starting(&prefix, 6).await })
        .await?;
    pick_task(given, found, store.url())
}

/// Of the stored task ids that start with `given`, the one it names.
fn pick_task(given: &str, found: Vec<TaskId>, url: &str) -> Result<TaskId, StoreError> {
    if let Some(exact) = found.iter().find(|t| t.as_str() == given) {
        return Ok(exact.clone());
    }
    if given.chars().count() < SHORT_ID_MIN {
        return Err(StoreError::ShortTaskId {
            given: given.to_owned(),
        });
    }
    match found.as_slice() {
        [] => Err(StoreError::UnknownTask {
            given: given.to_owned(),
            url: url.to_owned(),
        }),
        [one] => Ok(one.clone()),
        many => Err(StoreError::AmbiguousTask {
            given: given.to_owned(),
            url: url.to_owned(),
            matches: many.iter().map(|t| t.to_string()).collect(),
        }),
    }
}

impl super::sql::Db {
    /// Up to `limit` ids of tasks the store has events or an archived record of, that start
    /// with `prefix`, in order.
    pub(super) async fn task_ids_starting(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<TaskId>, StoreError> {
        use sqlx::Row;
        let pattern = format!(
            "{}%",
            prefix
                .replace('\\', "\\\\")
                .replace('%', "\\%")
                .replace('_', "\\_")
        );
        let archive = if self.schema >= super::sql::SCHEMA_ARCHIVE {
            " UNION SELECT task_id FROM task_archive WHERE task_id LIKE $1 ESCAPE '\\'"
        } else {
            ""
        };
        let sql = format!(
            "SELECT DISTINCT task_id FROM events WHERE task_id LIKE $1 ESCAPE '\\'{archive} \
             ORDER BY task_id LIMIT $2"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(pattern)
            .bind(limit as i64)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| Ok(TaskId::from(r.try_get::<String, _>(0)?.as_str())))
            .collect()
    }
}

/// A table of the stored tasks (oldest first), then the agents and what was running.
pub fn describe(url: &str, loaded: &Loaded) -> String {
    let s = &loaded.states;
    let mut out = format!(
        "data: {url}\nversion {} ({} events after the newest snapshot)\n\n",
        loaded.version, loaded.replayed
    );
    out.push_str(&format!(
        "{:<38} {:<9} {:>6} {:>6}  {}\n",
        "TASK", "STATE", "STAGES", "STEPS", "NAME"
    ));
    let steps_of = |t: &TaskId| s.steps().filter(|st| &st.task_id == t).count();
    for t in s.tasks_in_order() {
        out.push_str(&format!(
            "{:<38} {:<9} {:>6} {:>6}  {}\n",
            t.task_id.as_str(),
            format!("{:?}", t.execution_state).to_lowercase(),
            t.stage_list.len(),
            steps_of(&t.task_id),
            t.task_name
        ));
    }
    let evicted = s.summaries().count();
    if evicted > 0 {
        out.push_str(&format!(
            "(and {evicted} older finished task(s) kept as one-line summaries)\n"
        ));
    }
    out.push_str(&format!("\n{}", agents_line(s)));
    out
}

fn agents_line(s: &States) -> String {
    let hired = s.agents.values().filter(|a| a.template.is_some()).count();
    let people = s
        .agents
        .values()
        .filter(|a| a.human_config.is_some())
        .count();
    let waiting = s
        .agents
        .values()
        .filter(|a| !a.step_lock.is_empty())
        .count();
    let c = s.counters();
    format!(
        "agents: {} ({} hired, {} people); {} waiting for a reply; steps run: {}, running at the stop: {}\n",
        s.agents.len(),
        hired,
        people,
        waiting,
        c.steps_run,
        c.steps_running
    )
}

/// The store's sizes: on disk, and what it holds (events, snapshots, archived tasks), with its
/// last compaction.
pub fn describe_store(st: &StoreStats) -> String {
    let mut out = format!(
        "store: {} on disk (-wal {}, {} free inside); {} must be kept ({:.1}x)\n",
        human_bytes(st.disk_bytes()),
        human_bytes(st.wal_bytes),
        human_bytes(st.free_bytes),
        human_bytes(st.live_bytes()),
        st.ratio()
    );
    out.push_str(&format!(
        "  events: {} ({}); {} ({}) after the newest snapshot\n",
        st.events,
        human_bytes(st.event_bytes),
        st.events_after_snapshot,
        human_bytes(st.event_bytes_after_snapshot)
    ));
    let newest = st.newest_snapshot.map_or_else(
        || "none yet".to_owned(),
        |(v, b)| format!("the newest at version {v} ({})", human_bytes(b)),
    );
    out.push_str(&format!(
        "  snapshots: {} ({}); {newest}\n  archived tasks: {} ({})\n",
        st.snapshots,
        human_bytes(st.snapshot_bytes),
        st.archived,
        human_bytes(st.archive_bytes)
    ));
    out.push_str(&match &st.last_compaction {
        None => "  last compaction: never\n".to_owned(),
        Some(c) => format!(
            "  last compaction: {}: events up to version {} folded ({} pruned), {} snapshot(s) \
             pruned, {} task(s) archived; {} -> {}\n",
            chrono::DateTime::from_timestamp_millis(c.at)
                .map_or_else(|| c.at.to_string(), |t| t.format("%F %T UTC").to_string()),
            c.folded_to,
            c.events_pruned,
            c.snapshots_pruned,
            c.tasks_archived,
            human_bytes(c.bytes_before),
            human_bytes(c.bytes_after)
        ),
    });
    out
}

/// What an export wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exported {
    pub events: u64,
    /// Archived task records: tasks whose older events compaction folded away.
    pub archived: u64,
    /// Recorded model calls (each agent's newest the store keeps).
    pub model_calls: u64,
}

/// An archived record as an export line: `{"archived": {"version", "task", "stages"}}`.
#[derive(serde::Serialize)]
struct ArchivedLine<'a> {
    archived: &'a ArchivedTask,
}

/// Writes one line; `version` names what failed to serialise.
fn write_line(
    out: &mut dyn Write,
    version: u64,
    line: &impl serde::Serialize,
) -> Result<(), StoreError> {
    let text = serde_json::to_string(line).map_err(|e| StoreError::BadEvent {
        version: version as i64,
        why: e.to_string(),
    })?;
    writeln!(out, "{text}").map_err(StoreError::Write)
}

/// Writes what the store has of everything (or of `task`) as JSON lines, oldest first: the
/// archived records of tasks whose older events compaction pruned (one line each, the task
/// and its stages as of the record's version), then every event kept after them.
pub async fn export(
    store: &dyn Store,
    task: Option<&TaskId>,
    out: &mut dyn Write,
) -> Result<Exported, StoreError> {
    const PAGE: usize = 10_000;
    let mut archived = 0;
    // Events up to here are in the records written first.
    let mut after = match task {
        Some(t) => match store.archived(t).await? {
            Some(a) => {
                write_line(out, a.version, &ArchivedLine { archived: &a })?;
                archived += 1;
                a.version
            }
            None => 0,
        },
        None => {
            let mut last: Option<TaskId> = None;
            loop {
                let page = store.archived_after(last.as_ref(), 100).await?;
                for a in &page {
                    write_line(out, a.version, &ArchivedLine { archived: a })?;
                }
                archived += page.len() as u64;
                match page.last() {
                    Some(a) if page.len() == 100 => last = Some(a.task.task_id.clone()),
                    _ => break,
                }
            }
            store.last_compaction().await?.map_or(0, |c| c.folded_to)
        }
    };
    let mut events = 0;
    loop {
        let page = match task {
            Some(t) => store.task_events(t, after, PAGE).await?,
            None => store.events_after(after, PAGE).await?,
        };
        for e in &page {
            write_line(out, e.version, e)?;
        }
        events += page.len() as u64;
        match page.last() {
            Some(last) if page.len() == PAGE => after = last.version,
            _ => break,
        }
    }
    let model_calls = export_model_calls(store, task, out).await?;
    Ok(Exported {
        events,
        archived,
        model_calls,
    })
}

/// Writes the recorded model calls (of `task` only, when given), oldest first, one line each:
/// `{"model_call": {…}}` (the request and the reply whole).
async fn export_model_calls(
    store: &dyn Store,
    task: Option<&TaskId>,
    out: &mut dyn Write,
) -> Result<u64, StoreError> {
    const PAGE: usize = 500;
    let (mut after, mut written) = (0, 0);
    loop {
        let page = store.model_calls(task, after, PAGE).await?;
        for c in &page {
            writeln!(out, "{{\"model_call\":{}}}", c.body).map_err(StoreError::Write)?;
        }
        written += page.len() as u64;
        match page.last() {
            Some(last) if page.len() == PAGE => after = last.seq,
            _ => return Ok(written),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_is_named_by_its_id_or_a_unique_prefix_of_four_characters_or_more() {
        let ids = |v: &[&str]| v.iter().map(|t| TaskId::from(*t)).collect::<Vec<_>>();
        let url = "sqlite://t.db";
        let pick = |given: &str, found: &[&str]| pick_task(given, ids(found), url);
        assert_eq!(
            pick("4f5de683", &["4f5de683-a420"]).unwrap().as_str(),
            "4f5de683-a420"
        );
        // An id that is whole wins over the longer ids it begins.
        assert_eq!(pick("t-1", &["t-1", "t-12"]).unwrap().as_str(), "t-1");
        assert!(matches!(
            pick("4f5", &["4f5de683"]),
            Err(StoreError::ShortTaskId { .. })
        ));
        let unknown = pick("abcd1234", &[]).unwrap_err().to_string();
        assert_eq!(
            unknown,
            "no task in sqlite://t.db has an id that is or starts with `abcd1234`"
        );
        let two = pick("4f5d", &["4f5d-1", "4f5d-2"]).unwrap_err().to_string();
        assert!(
            two.contains("4f5d-1, 4f5d-2") && two.contains("give more"),
            "{two}"
        );
    }

    fn lease(resource: &str, node: &str) -> LeaseRow {
        LeaseRow {
            resource: resource.into(),
            node: node.into(),
            token: 3,
            expires_in_ms: 1000,
        }
    }

    #[test]
    fn a_few_agents_are_listed_and_many_are_counted_by_node() {
        let team = lease("team", "a");
        let few = [team.clone(), lease("agent/writer", "b")];
        let shown = describe_nodes(&[], &few);
        assert!(shown.contains("agent writer: node b, token 3"), "{shown}");
        assert!(shown.contains("lease `team`: node a"), "{shown}");
        let mut many = vec![team];
        for i in 0..30 {
            many.push(lease(
                &format!("agent/w{i}"),
                if i % 3 == 0 { "a" } else { "b" },
            ));
        }
        let shown = describe_nodes(&[], &many);
        assert!(
            shown.contains("agents: node a 10, node b 20 (30 in all)"),
            "{shown}"
        );
        assert!(!shown.contains("agent w1:"), "{shown}");
    }
}
