//! `cohort serve --node NAME --database postgres://…`: one node of a team across machines.
//!
//! Every node runs the same team file on one shared Postgres store. The node that holds the
//! team's lease ([`cohort_store::lease`]) runs the team and serves its API; the others stand
//! by, passing every request on to it ([`standby`]), until the lease is theirs: when its
//! holder stops on a signal (it gives the lease up at once), dies, or is cut off from the store
//! (its lease runs out; any write it still tries is refused by the lease's fencing token). A node that loses the lease stops its team and stands by again; the next
//! holder carries on from the store, as a restart does.

use crate::serve::{ServeError, api_state, listen, spawn_serving, warn_beyond_loopback};
use cohort_core::config::TeamConfig;
use cohort_core::lease::LeaseTerm;
use cohort_runtime::actors::{Host, start_team_stored};
use cohort_store::lease::{Fence, Seat};
use cohort_store::{SqlStore, Store};
use local_feed::LocalFeeds;

pub mod local_feed;
pub mod standby;

// The node's runtime parts under this module, so `cohort::node::…` names them all.
pub use cohort_runtime::node::{bus, follower, inbox, lease, relay, wire, writing};

use cohort_runtime::node::bus::Bus;
use cohort_runtime::node::core_calls::{CoreCalls, Grants};
use cohort_runtime::node::follower::Follower;
use cohort_runtime::node::host::{AgentHost, HostParts};
use cohort_runtime::node::link::{Link, LinkError};
use cohort_runtime::node::placer::Placer;
use cohort_runtime::node::relay::Relay;
use cohort_runtime::node::{Keeper, wait_for_lease};
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Who this node is in its team.
#[derive(Clone)]
pub struct NodeOptions {
    pub name: String,
    pub term: LeaseTerm,
    /// [`cohort_core::lease::team_hash`] of the node's team file.
    pub team_hash: String,
    /// NATS, when the node has it: the team's events are published on its event stream, and
    /// the team's agents spread over the nodes.
    pub bus: Option<Arc<Bus>>,
    /// Where the other nodes reach this one's API (default: the address it is bound to).
    pub advertise: Option<String>,
}

/// Why a node stopped serving.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error(transparent)]
    Serve(#[from] ServeError),
    #[error("this node cannot talk to the team's other nodes over NATS: {0}")]
    Link(#[from] LinkError),
}

impl From<cohort_store::StoreError> for NodeError {
    fn from(e: cohort_store::StoreError) -> Self {
        NodeError::Serve(ServeError::Store(e))
    }
}

impl From<cohort_runtime::actors::SystemError> for NodeError {
    fn from(e: cohort_runtime::actors::SystemError) -> Self {
        NodeError::Serve(ServeError::Start(e))
    }
}

/// How a term as the team's node ended.
#[derive(Clone, Copy)]
enum Ended {
    /// Asked to stop (a signal): the lease was given up.
    Stopped,
    /// The lease was lost: the node stands by again.
    Lost,
}

/// Runs this node until `stop`: stands by, leads the team while it holds the lease, stands by
/// again if it loses it. `on_ready` gets the bound address once the node has joined.
#[allow(clippy::too_many_arguments)]
pub async fn serve_node(
    cfg: &TeamConfig,
    host: &Host<'_>,
    bind: SocketAddr,
    web_dir: Option<PathBuf>,
    store: Arc<SqlStore>,
    node: NodeOptions,
    stop: impl Future<Output = ()> + Send + 'static,
    on_ready: impl FnOnce(SocketAddr),
) -> Result<(), NodeError> {
    warn_beyond_loopback(bind);
    let (listener, bound) = listen(bind)?;
    let seat = seat_of(&node, bind, bound)?;
    // The node listens for the team's node's calls before it is listed as live: listed first,
    // a node restarted under its name was asked to run an agent before it listened, and the
    // team's node, getting no answer, gave it none for a while.
    let spread = match &node.bus {
        Some(bus) => {
            let shared: Arc<dyn cohort_store::Store> = store.clone();
            Some(Spread::start(bus.clone(), cfg, host, shared, &seat.node).await?)
        }
        None => None,
    };
    // A node whose team file differs from the running nodes' is refused before it serves.
    store.join(&seat, node.term.ttl * 2).await?;
    on_ready(bound);
    let stopping = stop_signal(stop);
    loop {
        let stood_by = stand_by(&listener, bound, cfg, &store, (&seat, &node), &stopping).await?;
        let Some((fence, keeper)) = stood_by else {
            release_agents(spread.as_ref()).await;
            break;
        };
        // The agents it ran for the team's node that is gone: that node's successor (this
        // one) places them again from the record.
        if let Some(spread) = &spread {
            spread.host.drop_all();
        }
        tracing::info!(node = %seat.node, token = fence.token, "this node holds the team's lease and runs the team");
        eprintln!(
            "Node {} runs the team (lease token {})",
            seat.node, fence.token
        );
        let term = Term {
            cfg,
            host,
            store: &store,
            seat: &seat,
            bus: node.bus.clone(),
            spread: spread.as_ref(),
            lease: node.term,
        };
        let listener = listener.try_clone().map_err(ServeError::Http)?;
        match term
            .lead(listener, bound, web_dir.clone(), (fence, keeper), &stopping)
            .await
        {
            Ok(Ended::Stopped) => break,
            Ok(Ended::Lost) => eprintln!("Node {} lost the team's lease and stands by", seat.node),
            // The store failed as the term began (a connection lost, say): the lease, no longer
            // renewed, runs out, and this node or another tries again.
            Err(NodeError::Serve(ServeError::Store(e))) => {
                tracing::error!("this node could not run the team ({e}); it stands by again");
                tokio::select! {
                    () = tokio::time::sleep(node.term.ttl) => {}
                    () = stopped(&stopping) => break,
                }
            }
            Err(e) => return Err(e),
        }
    }
    if let Err(e) = store.leave(&seat).await {
        tracing::warn!("the store was not told that this node stopped: {e}");
    }
    Ok(())
}

/// `stop` as a signal every part of the node can watch.
fn stop_signal(stop: impl Future<Output = ()> + Send + 'static) -> watch::Receiver<bool> {
    let (stop_tx, stopping) = watch::channel(false);
    tokio::spawn(async move {
        stop.await;
        stop_tx.send_replace(true);
    });
    stopping
}

/// A node that stops lets the agents it ran for the team's node land and be stored before it
/// says so, so the team's node moves them at once.
async fn release_agents(spread: Option<&Spread>) {
    if let Some(spread) = spread
        && !spread.host.release_all().await
    {
        tracing::warn!("some of this node's agents did not land before it stopped");
    }
}

/// Who this node is, as it joins: a new process of its name, serving at its advertised
/// address (the one it is bound to unless told).
fn seat_of(node: &NodeOptions, bind: SocketAddr, bound: SocketAddr) -> Result<Seat, NodeError> {
    Ok(Seat {
        node: node.name.clone(),
        instance: uuid::Uuid::new_v4().to_string(),
        address: match &node.advertise {
            Some(a) => a.clone(),
            None if bound.ip().is_unspecified() => {
                return Err(ServeError::Unadvertised { bind }.into());
            }
            None => bound.to_string(),
        },
        team_hash: node.team_hash.clone(),
    })
}

/// Serves the stand-by answer until this node holds the team's lease (Some) or is asked to
/// stop (None).
async fn stand_by(
    listener: &std::net::TcpListener,
    bound: SocketAddr,
    cfg: &TeamConfig,
    store: &Arc<SqlStore>,
    (seat, node): (&Seat, &NodeOptions),
    stopping: &watch::Receiver<bool>,
) -> Result<Option<(Fence, Keeper)>, ServeError> {
    let (bus, term) = (node.bus.as_ref(), node.term);
    let leader: standby::Leader = Arc::default();
    let origins = crate::serve::allowed_origins(bound);
    // The running node pings each feed every `feeds.ping_s`: a tunnel that carried nothing
    // for four pings is a connection that broke.
    let idle = 4 * cfg.feeds.ping;
    // With NATS, the node follows the team's event stream and serves its own feeds.
    let local = bus.map(|bus| {
        let follower = Follower::start(bus.clone(), store.clone(), cfg.retention.memory);
        Arc::new(LocalFeeds::new(&seat.node, follower, store.clone(), cfg))
    });
    let wording = standby_wording(cfg);
    let app = standby::router(
        seat.node.clone(),
        leader.clone(),
        (origins, idle),
        local.clone(),
        wording.clone(),
    );
    let (http_stop, http_stopped) = tokio::sync::oneshot::channel::<()>();
    let http = cfg.http.clone();
    let served = spawn_serving(
        listener.try_clone().map_err(ServeError::Http)?,
        move |l| async move {
            let closing = move || {
                if let Some(local) = local {
                    local.close();
                }
            };
            crate::api::serve_router(l, (app, &wording), &http, closing, async {
                let _ = http_stopped.await;
            })
            .await
        },
    )
    .map_err(ServeError::Http)?;
    let waiting = wait_for_lease(store, seat, term, heard_of(seat, &leader));
    let got = tokio::select! {
        got = waiting => Some(got),
        () = stopped(stopping) => None,
    };
    // Renewed from the moment it is taken: what follows (the stand-by server's last requests,
    // loading the team) must not eat into the term.
    let got = got.map(|(fence, sent)| {
        let keeper = Keeper::start(store.clone(), seat.clone(), fence.clone(), sent, term);
        (fence, keeper)
    });
    let _ = http_stop.send(());
    // Requests still being passed on (to a node that went away) are not waited for long.
    if tokio::time::timeout(STANDBY_DRAIN, served).await.is_err() {
        tracing::warn!(
            "requests passed on were still under way after {STANDBY_DRAIN:?}; left behind"
        );
    }
    Ok(got)
}

/// The language a standing-by node answers in: the team's, from its prompts (the built-in
/// ones when the team's cannot be read; loading the team will say why).
fn standby_wording(cfg: &TeamConfig) -> crate::api::Wording {
    let texts = match cfg.prompt_set() {
        Ok(prompts) => prompts.texts().clone(),
        Err(_) => cohort_core::texts::Texts::builtin(cfg.language),
    };
    crate::api::Wording {
        language: cfg.language,
        texts,
    }
}

/// What a standing-by node does when it hears which node holds the team's lease: says so, and
/// passes requests on to it from then on.
fn heard_of<'a>(seat: &'a Seat, leader: &'a standby::Leader) -> impl FnMut(&str, &str) + 'a {
    move |node, address| {
        // Held under this node's own name: by its previous run (killed), until that lease
        // runs out. Nothing to pass requests on to; the address is this node's own now.
        let running = if node == seat.node {
            standby::Running::PreviousRun
        } else {
            standby::Running::Node {
                name: node.to_owned(),
                address: address.to_owned(),
            }
        };
        match &running {
            standby::Running::Node { .. } => eprintln!(
                "Node {} stands by: node {node} runs the team (http://{address})",
                seat.node
            ),
            _ => eprintln!(
                "Node {} stands by: its previous run held the team's lease",
                seat.node
            ),
        }
        *leader.lock().unwrap_or_else(|e| e.into_inner()) = running;
    }
}

/// How long a stopping node's steps under way, here and on other nodes, get to land.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// How long a node that took the lease waits for its stand-by server's requests to end.
const STANDBY_DRAIN: Duration = Duration::from_secs(3);

/// A node's part in spreading its team's agents over the nodes (with NATS): its link to the
/// other nodes, and the agents it runs for the team's node while it does not run the team.
struct Spread {
    bus: Arc<Bus>,
    link: Link,
    host: AgentHost,
    _serving: tokio::task::JoinHandle<()>,
}

impl Spread {
    async fn start(
        bus: Arc<Bus>,
        cfg: &TeamConfig,
        host: &Host<'_>,
        store: Arc<dyn cohort_store::Store>,
        node: &str,
    ) -> Result<Spread, NodeError> {
        let link = Link::start(&bus).await?;
        let parts = HostParts::build(cfg, host, Some(store))?;
        let (agents, serving) = AgentHost::start(&bus, link.clone(), node, parts).await?;
        Ok(Spread {
            bus,
            link,
            host: agents,
            _serving: serving,
        })
    }
}

/// What one term as the team's node works with.
struct Term<'a> {
    cfg: &'a TeamConfig,
    host: &'a Host<'a>,
    store: &'a Arc<SqlStore>,
    seat: &'a Seat,
    bus: Option<Arc<Bus>>,
    spread: Option<&'a Spread>,
    lease: LeaseTerm,
}

impl Term<'_> {
    /// Runs the team under `fence` until the node is asked to stop or loses the lease.
    async fn lead(
        &self,
        listener: std::net::TcpListener,
        bound: SocketAddr,
        web_dir: Option<PathBuf>,
        (fence, keeper): (Fence, Keeper),
        stopping: &watch::Receiver<bool>,
    ) -> Result<Ended, NodeError> {
        let fenced: Arc<dyn Store> = Arc::new(self.store.fenced(fence.clone()).await?);
        let loaded = cohort_store::load(fenced.as_ref()).await?;
        let team = start_team_stored(self.cfg, self.host, fenced.clone(), loaded)?;
        let relay = self
            .bus
            .clone()
            .map(|bus| Relay::start(bus, self.store.clone(), team.monitor.clone()));
        let placing = match self.spread {
            Some(spread) => match self.place(spread, &team, &fence).await {
                Ok(p) => Some(p),
                Err(e) => {
                    drop(relay);
                    abandon(&team).await;
                    return Err(e);
                }
            },
            None => None,
        };
        let state = match api_state(self.cfg, &team, web_dir, bound, Some(fenced)).await {
            Ok(state) => state,
            Err(e) => {
                // The team runs already: it stops before the error is told.
                drop(relay);
                abandon(&team).await;
                return Err(e.into());
            }
        };
        state.show_nodes(self.store.clone(), self.lease.ttl);
        // Served while this node runs the team (a node standing by has no figures of its
        // own); a port another process holds costs the scrape, not the term.
        let _metrics = crate::serve::serve_metrics(&self.cfg.http, &state).unwrap_or_else(|e| {
            tracing::warn!("the metrics are not served for scrapers: {e}");
            None
        });
        let (http_stop, http_stopped) = tokio::sync::oneshot::channel::<()>();
        let app = standby::named(crate::api::router(state.clone()), &self.seat.node);
        let (http, wording) = (self.cfg.http.clone(), state.wording());
        let served = spawn_serving(listener, move |l| async move {
            let stop = async {
                let _ = http_stopped.await;
            };
            let closing = move || state.close_feeds();
            crate::api::serve_router(l, (app, &wording), &http, closing, stop).await
        })
        .map_err(ServeError::Http)?;
        let ended = tokio::select! {
            () = stopped(stopping) => Ended::Stopped,
            () = keeper.lost() => Ended::Lost,
            () = team.monitor.fenced() => Ended::Lost,
        };
        let _ = http_stop.send(());
        let _ = served.await;
        self.end(ended, &team, (placing, relay), &fence).await;
        Ok(ended)
    }

    /// Ends a term that `ended` so: stopped, the agents here and elsewhere land and are stored,
    /// the relay publishes what is left and the lease is given up; lost, nothing more is stored
    /// or moved.
    async fn end(
        &self,
        ended: Ended,
        team: &cohort_runtime::actors::Team,
        (placing, relay): (Option<Placing>, Option<Relay>),
        fence: &Fence,
    ) {
        match ended {
            Ended::Stopped => {
                // The agents on other nodes land and are stored first, as those here do.
                if let Some(p) = placing {
                    p.stop_and_release(STOP_GRACE).await;
                }
                team.stop(STOP_GRACE).await;
                // What the journal stored last goes out before the lease does.
                if let Some(relay) = relay {
                    relay.finish(Duration::from_secs(5)).await;
                }
                // Given up at once: a node standing by takes over without waiting for expiry.
                if let Err(e) = self.store.release_lease(fence).await {
                    tracing::warn!("the team's lease was not given up (it expires instead): {e}");
                }
            }
            Ended::Lost => {
                // Not even the move under way goes on.
                if let Some(p) = placing {
                    p.placing.abort();
                }
                drop(relay);
                abandon(team).await;
            }
        }
    }
}

/// The team's node placing its agents over the nodes, and taking the calls of those that run
/// elsewhere.
struct Placing {
    calls: CoreCalls,
    stop: tokio::sync::oneshot::Sender<()>,
    placing: tokio::task::JoinHandle<Placer>,
}

impl Placing {
    /// Stops placing, then lets the agents on other nodes go within `within`: each lands and
    /// hands over its last changes, so their calls are taken until then.
    async fn stop_and_release(self, within: Duration) {
        let _ = self.stop.send(());
        if let Ok(mut placer) = self.placing.await {
            placer.release_all(within).await;
        }
        drop(self.calls);
    }
}

impl Term<'_> {
    /// Starts placing `team`'s agents over the live nodes, under `fence`.
    async fn place(
        &self,
        spread: &Spread,
        team: &cohort_runtime::actors::Team,
        fence: &Fence,
    ) -> Result<Placing, NodeError> {
        let grants = Arc::new(Grants::default());
        let calls = CoreCalls::start(
            &spread.bus,
            team.monitor.clone(),
            team.calls.clone(),
            team.sync.clone(),
            grants.clone(),
        )
        .await?;
        let placer = Placer::new(
            team,
            &self.seat.node,
            fence.clone(),
            self.lease,
            self.store.clone(),
            spread.link.clone(),
            spread.bus.clone(),
            grants,
        );
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let look = self.lease.look_every();
        let placing = actix::spawn(placer.run(look, async {
            let _ = stopped.await;
        }));
        Ok(Placing {
            calls,
            stop,
            placing,
        })
    }
}

/// Stops a team whose node may store nothing more of it: the journal drops what it holds
/// first (never shown: as if the node had crashed), so no actor waits on it, then everything
/// stops at once, no grace.
async fn abandon(team: &cohort_runtime::actors::Team) {
    team.steps.close();
    team.monitor.abandon();
    team.stop_actors().await;
    team.shutdown().await;
}

/// Resolves once the node is asked to stop.
async fn stopped(stopping: &watch::Receiver<bool>) {
    let mut s = stopping.clone();
    if s.wait_for(|s| *s).await.is_err() {
        std::future::pending::<()>().await;
    }
}
