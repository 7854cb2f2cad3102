//! The command line's store flags (`--data`, `--database`) and `cohort inspect` / `export`.

use std::path::PathBuf;
use std::process::ExitCode;

/// Where a team's state is stored.
#[derive(clap::Args, Clone, Debug)]
pub struct DataArgs {
    /// A SQLite file for the team's state (created if missing; default for `serve`:
    /// `.cohort/<team>.db` beside the team file).
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// A Postgres database instead (`postgres://user:password@host/db`).
    #[arg(long, env = "COHORT_DATABASE_URL", conflicts_with = "data")]
    pub database: Option<String>,
}

impl DataArgs {
    /// Opens the store asked for, or `default` when neither flag is given; None for neither.
    pub async fn open(
        &self,
        default: Option<PathBuf>,
    ) -> Result<Option<std::sync::Arc<dyn cohort::store::Store>>, cohort::store::StoreError> {
        use cohort::store::SqlStore;
        let store = match (&self.database, self.data.clone().or(default)) {
            (Some(url), _) => SqlStore::open_postgres(url).await?,
            (None, Some(path)) => SqlStore::open_sqlite(&path).await?,
            (None, None) => return Ok(None),
        };
        eprintln!("The team's data is in {}", store.url());
        Ok(Some(std::sync::Arc::new(store)))
    }
}

/// `cohort inspect` (a table) and `cohort export` (JSON lines), from a store opened to read.
pub fn read_store(data: &DataArgs, task: Option<String>, export: bool) -> ExitCode {
    let spec = match (&data.database, &data.data) {
        (Some(url), _) => url.clone(),
        (None, Some(path)) => path.display().to_string(),
        (None, None) => {
            eprintln!("error: say which data to read: --data PATH or --database URL");
            return ExitCode::from(3);
        }
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    let task = task.map(cohort::ids::TaskId::from);
    match rt.block_on(cohort::store::inspect::read(&spec, task.as_ref(), export)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(3)
        }
    }
}
