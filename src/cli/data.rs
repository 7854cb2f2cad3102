//! The command line's store flags (`--data`, `--database`) and `cohort inspect` / `export` /
//! `backup`.

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

/// A store opened for a team, and where it is as a person would name it: the SQLite file's
/// path, or the Postgres URL without its password.
pub struct Opened {
    pub store: std::sync::Arc<dyn cohort::store::Store>,
    pub place: String,
    /// How another process of this machine opens it (a URL, or the file's absolute path).
    pub spec: String,
}

impl DataArgs {
    /// Opens the store asked for, or `default` when neither flag is given; None for neither.
    /// Opens the store named (or `default`), and says where the team's data is, in the
    /// language of `t`.
    pub async fn open(
        &self,
        default: Option<PathBuf>,
        t: &cohort::prompt::Texts,
    ) -> Result<Option<Opened>, cohort::store::StoreError> {
        use cohort::store::SqlStore;
        let (store, place, spec) = match (&self.database, self.data.clone().or(default)) {
            (Some(url), _) => {
                let store = SqlStore::open_postgres(url).await?;
                let place = store.url().to_owned();
                (store, place, url.clone())
            }
            (None, Some(path)) => (
                SqlStore::open_sqlite(&path).await?,
                path.display().to_string(),
                std::path::absolute(&path)
                    .unwrap_or_else(|_| path.clone())
                    .display()
                    .to_string(),
            ),
            (None, None) => return Ok(None),
        };
        eprintln!("{}", t.data_is_in(store.url()));
        Ok(Some(Opened {
            store: std::sync::Arc::new(store),
            place,
            spec,
        }))
    }

    /// The store named, as `inspect`, `export` and `backup` take it (a path or a URL).
    pub fn spec(&self) -> Option<String> {
        match (&self.database, &self.data) {
            (Some(url), _) => Some(url.clone()),
            (None, Some(path)) => Some(path.display().to_string()),
            (None, None) => None,
        }
    }
}

/// A runtime for a command that only reads or copies a store.
fn store_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

/// The store `data` names and a runtime to reach it, for a command that would `what` it; the
/// exit code when there is none (3: no data named; 1: no runtime).
fn opened(data: &DataArgs, what: &str) -> Result<(String, tokio::runtime::Runtime), ExitCode> {
    let Some(spec) = data.spec() else {
        eprintln!("error: say which data to {what}: --data PATH or --database URL");
        return Err(ExitCode::from(3));
    };
    match store_runtime() {
        Ok(rt) => Ok((spec, rt)),
        Err(e) => {
            eprintln!("error: {e}");
            Err(ExitCode::from(1))
        }
    }
}

/// `cohort backup`: a consistent copy of the store to the new file `to`, also while the team
/// runs (SQLite; a Postgres store is refused with the advice to use pg_dump). Exit 3 for what
/// cannot be copied, as for `inspect`.
pub fn backup(data: &DataArgs, to: &std::path::Path) -> ExitCode {
    let (spec, rt) = match opened(data, "back up") {
        Ok(o) => o,
        Err(code) => return code,
    };
    match rt.block_on(cohort::store::backup::backup(&spec, to)) {
        Ok(b) => {
            eprintln!(
                "backed up {} to {} ({})",
                b.from,
                b.to.display(),
                cohort::store::stats::human_bytes(b.bytes)
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(3)
        }
    }
}

/// `cohort inspect` (a table) and `cohort export` (JSON lines), from a store opened to read.
pub fn read_store(data: &DataArgs, task: Option<String>, export: bool) -> ExitCode {
    let (spec, rt) = match opened(data, "read") {
        Ok(o) => o,
        Err(code) => return code,
    };
    match rt.block_on(cohort::store::inspect::read(&spec, task.as_deref(), export)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(3)
        }
    }
}

/// `cohort inspect`: the store's table, then (with `--nats`) the team's inboxes.
pub fn inspect(
    data: &DataArgs,
    team: Option<&std::path::Path>,
    nats: Option<cohort::node::bus::BusOptions>,
) -> ExitCode {
    match read_store(data, None, false) {
        code if code != ExitCode::SUCCESS => code,
        code => match nats {
            Some(options) => super::node::inspect_inboxes(&options, team),
            None => code,
        },
    }
}
