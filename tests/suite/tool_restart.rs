//! A tool step that was running when the process stopped: after the restart a tool that may
//! have acted (no `readOnlyHint` / `idempotentHint`) is not called a second time (its step
//! fails "interrupted by a restart" and the agent goes on), while a read-only tool is simply
//! called again. The MCP server is a real one over streamable HTTP whose tools count their
//! calls and hang until released, so the stop lands while both calls are in flight.

use crate::support::ledger;
use crate::support::scratch;

use cohort::actors::{Host, Team, start_team_stored};
use cohort::config::load_team;
use cohort::state::{Executor, StepExecutionState};
use cohort::store::{SqlStore, load};
use ledger::TextArgs;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{ServerCapabilities, ServerConfig};
use rmcp::{ServerHandler, tool, tool_handler, tool_router};
use scratch::Scratch;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

#[derive(Default)]
struct Counts {
    append: AtomicUsize,
    lookup: AtomicUsize,
    /// Calls hang until this is set.
    released: AtomicBool,
}

#[derive(Clone)]
struct Slow {
    counts: Arc<Counts>,
    tool_router: ToolRouter<Self>,
}

impl Slow {
    async fn hang(&self) {
        while !self.counts.released.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

#[tool_router]
impl Slow {
    #[tool(description = "Append a line to the ledger (not safe to repeat).")]
    async fn append(&self, Parameters(a): Parameters<TextArgs>) -> String {
        self.counts.append.fetch_add(1, Ordering::SeqCst);
        self.hang().await;
        format!("appended {}", a.text)
    }

    #[tool(
        description = "Look a line up in the ledger.",
        annotations(read_only_hint = true)
    )]
    async fn lookup(&self, Parameters(a): Parameters<TextArgs>) -> String {
        self.counts.lookup.fetch_add(1, Ordering::SeqCst);
        self.hang().await;
        format!("found {}", a.text)
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Slow {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}

async fn serve(counts: Arc<Counts>) -> String {
    ledger::serve(Slow {
        counts,
        tool_router: Slow::tool_router(),
    })
    .await
}

async fn open(cfg: &cohort::config::TeamConfig, file: &Path) -> Team {
    let store = Arc::new(SqlStore::open_sqlite(file).await.unwrap());
    let loaded = load(store.as_ref()).await.unwrap();
    let vars = |_: &str| None;
    let host = Host::new(&vars, env!("CARGO_BIN_EXE_cohort"));
    start_team_stored(cfg, &host, store, loaded).unwrap()
}

async fn until(what: &str, mut ok: impl FnMut() -> bool) {
    for _ in 0..1_500 {
        if ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{what} did not happen in 30 s");
}

#[actix::test]
async fn a_tool_that_may_have_acted_is_not_called_again_after_a_restart_a_read_only_one_is() {
    let dir = Scratch::new("tool-restart");
    let counts = Arc::new(Counts::default());
    let url = serve(counts.clone()).await;
    let cfg = load_team(&ledger::write_team(&dir, &url, 60)).unwrap();
    let file = dir.join("team.db");

    let team = open(&cfg, &file).await;
    team.submit_goal(None, "GOAL# use the ledger")
        .await
        .unwrap();
    until("both tool calls reaching the server", || {
        counts.append.load(Ordering::SeqCst) == 1 && counts.lookup.load(Ordering::SeqCst) == 1
    })
    .await;
    // The process "dies" with both calls in flight: nothing after this is stored.
    team.monitor.close();
    team.shutdown().await;
    drop(team);
    counts.released.store(true, Ordering::SeqCst);

    let team = open(&cfg, &file).await;
    let task_done = || {
        team.monitor.read(|s| {
            s.tasks
                .values()
                .any(|t| t.task_id != team.base_task && t.execution_state.is_over())
        })
    };
    until("the task's end after the restart", task_done).await;
    assert_eq!(
        counts.append.load(Ordering::SeqCst),
        1,
        "the tool that may have acted was not called again"
    );
    assert_eq!(
        counts.lookup.load(Ordering::SeqCst),
        2,
        "the read-only tool was simply called again"
    );
    let tool_steps = team.monitor.read(|s| {
        s.steps()
            .filter(|st| matches!(st.executor, Executor::Tool(_)))
            .map(|st| {
                (
                    st.agent_id.to_string(),
                    st.execution_state,
                    st.execute_result.clone(),
                )
            })
            .collect::<Vec<_>>()
    });
    let of = |who: &str| tool_steps.iter().find(|(a, ..)| a == who).unwrap().clone();
    let (_, state, result) = of("writer");
    assert_eq!(state, StepExecutionState::Failed);
    assert!(
        result
            .unwrap()
            .error
            .unwrap()
            .contains("interrupted by a restart"),
    );
    let (_, state, result) = of("reader");
    assert_eq!(state, StepExecutionState::Finished);
    assert!(result.unwrap().to_string().contains("found one line"));
    team.shutdown().await;
    team.monitor.close();
}
