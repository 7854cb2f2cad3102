//! `cohort inspect` and `cohort export`: reading a team's store without starting the team.

use super::{Loaded, Store, StoreError};
use crate::event::States;
use crate::ids::TaskId;
use std::io::Write;

/// `cohort inspect` (`export` false: the table, on stdout) and `cohort export` (the events of
/// everything or of `task`, as JSON lines on stdout), from the store `spec` opened to read.
pub async fn read(spec: &str, task: Option<&TaskId>, export: bool) -> Result<(), StoreError> {
    let store = super::SqlStore::open_reader(spec).await?;
    if export {
        let stdout = std::io::stdout();
        let mut out = std::io::BufWriter::new(stdout.lock());
        let written = match self::export(&store, task, &mut out).await {
            Ok(n) => out.flush().map(|()| n).map_err(StoreError::Write),
            Err(e) => Err(e),
        };
        match written {
            Ok(n) => eprintln!("{n} events from {}", store.url()),
            // The reader stopped reading (`cohort export | head`): that is its choice.
            Err(StoreError::Write(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
            Err(e) => return Err(e),
        }
    } else {
        let loaded = super::load(&store).await?;
        print!("{}", describe(store.url(), &loaded));
    }
    Ok(())
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

/// Writes every stored event (or one task's) as JSON lines, oldest first; returns how many.
pub async fn export(
    store: &dyn Store,
    task: Option<&TaskId>,
    out: &mut dyn Write,
) -> Result<u64, StoreError> {
    const PAGE: usize = 10_000;
    let mut after = 0;
    let mut n = 0;
    loop {
        let page = match task {
            Some(t) => store.task_events(t, after, PAGE).await?,
            None => store.events_after(after, PAGE).await?,
        };
        for e in &page {
            let line = serde_json::to_string(e).map_err(|err| StoreError::BadEvent {
                version: e.version as i64,
                why: err.to_string(),
            })?;
            writeln!(out, "{line}").map_err(StoreError::Write)?;
        }
        n += page.len() as u64;
        match page.last() {
            Some(last) if page.len() == PAGE => after = last.version,
            _ => return Ok(n),
        }
    }
}
