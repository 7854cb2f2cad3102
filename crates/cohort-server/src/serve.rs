//! `cohort serve`: a long-running team with its HTTP API, websocket monitor and web console,
//! until Ctrl-C / SIGTERM; then steps in flight get a moment to finish, the team's MCP
//! servers are stopped and its store is checkpointed (its main file then holds everything).

use crate::api::{ApiState, serve};
use cohort_core::config::TeamConfig;
use cohort_runtime::actors::{Host, SystemError, start_team, start_team_stored};
use cohort_store::Store;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Start(#[from] SystemError),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("the HTTP server failed: {0}")]
    Http(std::io::Error),
    #[error(transparent)]
    Store(#[from] cohort_store::StoreError),
    #[error(
        "a node bound to {bind} must say where the other nodes reach it: add --advertise \
         HOST:PORT (they pass requests on to that address)"
    )]
    Unadvertised { bind: SocketAddr },
}

/// Runs the HTTP API (REST, websocket feeds, console) until `stop` on a runtime of its own
/// with one worker per core, so requests and feeds use every core and never queue behind the
/// actors. Answers once the server has stopped.
pub fn spawn_http(
    listener: std::net::TcpListener,
    state: ApiState,
    stop: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<tokio::sync::oneshot::Receiver<std::io::Result<()>>> {
    spawn_serving(listener, move |listener| serve(listener, state, stop))
}

/// Runs `serving` on `listener` on an HTTP runtime of its own (see [`spawn_http`]); answers
/// once it has stopped.
pub fn spawn_serving<F>(
    listener: std::net::TcpListener,
    serving: impl FnOnce(tokio::net::TcpListener) -> F + Send + 'static,
) -> std::io::Result<tokio::sync::oneshot::Receiver<std::io::Result<()>>>
where
    F: Future<Output = std::io::Result<()>>,
{
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("cohort-http")
        .build()?;
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("cohort-http".into())
        .spawn(move || {
            let served = rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener)?;
                serving(listener).await
            });
            let _ = tx.send(served);
        })?;
    Ok(rx)
}

/// Origins a browser may open the websocket from: the address we serve on, and its
/// `localhost` / `127.0.0.1` spellings.
pub fn allowed_origins(bound: SocketAddr) -> Vec<String> {
    let port = bound.port();
    let mut origins = vec![format!("http://{bound}")];
    if bound.ip().is_loopback() {
        origins.push(format!("http://localhost:{port}"));
        origins.push(format!("http://127.0.0.1:{port}"));
    }
    origins
}

pub(crate) fn warn_beyond_loopback(bind: SocketAddr) {
    if !bind.ip().is_loopback() {
        tracing::warn!(
            "serving beyond loopback on {bind}: anyone who can reach it can try to log in"
        );
    }
}

/// A listener on `bind` (non-blocking, for tokio) and the address it got.
pub(crate) fn listen(bind: SocketAddr) -> Result<(std::net::TcpListener, SocketAddr), ServeError> {
    let listener = std::net::TcpListener::bind(bind)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|source| ServeError::Bind { addr: bind, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| ServeError::Bind { addr: bind, source })?;
    Ok((listener, bound))
}

/// `GET /metrics` served without a token on its own address (`http.metrics_bind`), for as long
/// as this is kept.
pub struct MetricsServer {
    _stop: tokio::sync::oneshot::Sender<()>,
}

/// Serves `state`'s metrics on `http.metrics_bind`, when the team file or `--metrics-bind` gives
/// one, until the answer is dropped.
pub fn serve_metrics(
    http: &cohort_core::config::Http,
    state: &ApiState,
) -> Result<Option<MetricsServer>, ServeError> {
    let Some(bind) = http.metrics_bind else {
        return Ok(None);
    };
    let (listener, bound) = listen(bind)?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (app, http) = (crate::api::metrics::router(state.clone()), http.clone());
    let wording = state.wording();
    spawn_serving(listener, move |l| async move {
        let stop = async {
            let _ = stopped.await;
        };
        crate::api::serve_router(l, (app, &wording), &http, || {}, stop).await
    })
    .map_err(ServeError::Http)?;
    tracing::info!("metrics for scrapers on http://{bound}/metrics");
    Ok(Some(MetricsServer { _stop: stop }))
}

/// The API of `team` served on `bound`: its people's sessions kept in `store` when given.
pub async fn api_state(
    cfg: &TeamConfig,
    team: &cohort_runtime::actors::Team,
    web_dir: Option<PathBuf>,
    bound: SocketAddr,
    store: Option<Arc<dyn Store>>,
) -> Result<ApiState, ServeError> {
    let state = ApiState::new(team, &cfg.humans, web_dir, allowed_origins(bound))
        .with_feed_config(cfg.feeds.into())
        .with_http(cfg.http.clone());
    Ok(match store {
        Some(store) => state.with_store(cfg.session_ttl, store).await?,
        None => state.with_session_ttl(cfg.session_ttl),
    })
}

/// Runs the team and its server on `bind` until `stop` resolves, keeping its state in `store`
/// when given (and carrying on from what it holds). `on_ready` gets the bound address
/// (useful with port 0).
pub async fn serve_team(
    cfg: &TeamConfig,
    host: &Host<'_>,
    bind: SocketAddr,
    web_dir: Option<PathBuf>,
    store: Option<Arc<dyn Store>>,
    stop: impl Future<Output = ()> + Send + 'static,
    on_ready: impl FnOnce(SocketAddr),
) -> Result<(), ServeError> {
    warn_beyond_loopback(bind);
    let kept = store.clone();
    let team = match store.clone() {
        Some(store) => {
            let loaded = cohort_store::load(store.as_ref()).await?;
            if loaded.version > 0 {
                tracing::info!(
                    "carrying on from the stored state at version {} ({} events replayed)",
                    loaded.version,
                    loaded.replayed
                );
            }
            start_team_stored(cfg, host, store, loaded)?
        }
        None => start_team(cfg, host)?,
    };
    let (listener, bound) = listen(bind)?;
    let state = api_state(cfg, &team, web_dir, bound, store).await?;
    let _metrics = serve_metrics(&cfg.http, &state)?;
    on_ready(bound);
    let served = match spawn_http(listener, state, stop) {
        Ok(done) => done
            .await
            .unwrap_or_else(|_| Err(std::io::Error::other("the HTTP runtime stopped"))),
        Err(e) => Err(e),
    };
    // Shutting down: running steps land (bounded), every actor stops, then what the team
    // started; whatever was published is committed, with a snapshot for a quick start.
    team.stop(Duration::from_secs(10)).await;
    if let Some(store) = kept {
        cohort_runtime::run::checkpoint(store.as_ref()).await;
    }
    served.map_err(ServeError::Http)
}
