//! `cohort serve --node NAME …`: a node of a team across machines. Its flags (the node, its
//! lease, where others reach it, where NATS is, the node's NATS credentials and TLS) and
//! serving as it. Secrets are best given by environment variable (a command line is visible to
//! every user of the machine in `ps`).

use anyhow::Context as _;
use cohort::node::bus::{Bus, BusOptions, Credentials, Tls};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A node of a team across machines as its flags give it.
pub struct Node {
    pub name: String,
    pub lease: std::time::Duration,
    pub advertise: Option<String>,
    pub nats: Option<BusOptions>,
}

#[derive(clap::Args, Clone, Debug)]
pub struct NodeArgs {
    /// Serve as this node of a team across machines: every node runs the same team file
    /// on one Postgres store (--database); the node holding the team's lease runs it, the
    /// others stand by and take over when it stops or dies (docs/deployment.md).
    #[arg(long, requires = "database", conflicts_with = "no_data")]
    pub node: Option<String>,
    /// With --node: how long the team's lease lasts unless renewed, in seconds; a node
    /// that dies is replaced within about this long.
    #[arg(long, default_value_t = 10, requires = "node")]
    pub lease_secs: u64,
    /// With --node: the HOST:PORT at which the other nodes reach this one's API (they pass
    /// requests on to it); needed when --bind is 0.0.0.0 or [::].
    #[arg(long, requires = "node")]
    pub advertise: Option<String>,
    #[command(flatten)]
    pub nats: NatsArgs,
}

impl NodeArgs {
    /// The node asked for, if any; an error for NATS without a node.
    pub fn node(&self) -> Result<Option<Node>, String> {
        if self.node.is_none() && self.nats.nats.is_some() {
            return Err("--nats is for a node of a team across machines: add --node NAME".into());
        }
        Ok(self.node_asked())
    }

    fn node_asked(&self) -> Option<Node> {
        Some(Node {
            name: self.node.clone()?,
            lease: std::time::Duration::from_secs(self.lease_secs),
            advertise: self.advertise.clone(),
            nats: self.nats.options(),
        })
    }
}

/// Serves `team` (loaded as `cfg`) as `node` on the Postgres store at `url` until Ctrl-C or
/// SIGTERM: standing by, or running the team while it holds the team's lease.
pub async fn serve(
    team: &Path,
    cfg: &cohort::config::TeamConfig,
    host: &cohort::actors::Host<'_>,
    (bind, web): (std::net::SocketAddr, Option<PathBuf>),
    url: &str,
    node: Node,
) -> anyhow::Result<()> {
    // Watched from the start: a SIGTERM while the store or NATS is reached stops the node as
    // cleanly as one later (the default action would kill it).
    let stop = cohort::run::stop_signal();
    let store = Arc::new(cohort::store::SqlStore::open_postgres_node(url).await?);
    // What the node says is in the team's language.
    let texts = cfg.prompt_set()?.texts().clone();
    eprintln!("{}", texts.data_is_in(store.url()));
    let file = std::fs::read(team).with_context(|| format!("reading {}", team.display()))?;
    let bus = match &node.nats {
        Some(o) => {
            let bus = Bus::connect(o, &cfg.name, &node.name).await?;
            let (at, stream) = (&bus.shown, &bus.names.events_stream);
            eprintln!("{}", texts.node_events_to_nats(at, stream));
            Some(Arc::new(bus))
        }
        None => None,
    };
    let options = cohort::node::NodeOptions {
        name: node.name.clone(),
        term: cohort::lease::LeaseTerm::new(node.lease),
        team_hash: cohort::lease::team_hash(&file),
        bus,
        advertise: node.advertise,
    };
    let name = node.name;
    cohort::node::serve_node(cfg, host, bind, web, store.clone(), options, stop, |addr| {
        eprintln!("{}", texts.node_up(&name, team.display(), addr));
    })
    .await?;
    eprintln!("{}", crate::stopped_line(Some(store.url()), &texts));
    Ok(())
}

#[derive(clap::Args, Clone, Debug)]
pub struct NatsArgs {
    /// NATS with JetStream for a team across machines (`nats://host:4222`, `tls://…`; several
    /// comma-separated): the team's agents spread over the nodes, and every committed change
    /// is published on the team's event stream.
    #[arg(long, env = "COHORT_NATS_URL")]
    pub nats: Option<String>,
    /// A NATS user (with --nats-password).
    #[arg(long, env = "COHORT_NATS_USER", requires = "nats_password")]
    pub nats_user: Option<String>,
    /// The NATS user's password (better: the COHORT_NATS_PASSWORD variable).
    #[arg(
        long,
        env = "COHORT_NATS_PASSWORD",
        hide_env_values = true,
        requires = "nats_user"
    )]
    pub nats_password: Option<String>,
    /// A NATS token (better: the COHORT_NATS_TOKEN variable).
    #[arg(long, env = "COHORT_NATS_TOKEN", hide_env_values = true, conflicts_with_all = ["nats_user", "nats_nkey", "nats_creds"])]
    pub nats_token: Option<String>,
    /// A file holding the node's NKey seed.
    #[arg(long, conflicts_with_all = ["nats_user", "nats_creds"])]
    pub nats_nkey: Option<PathBuf>,
    /// A NATS credentials file (user JWT and seed, as `nsc` writes it).
    #[arg(long, conflicts_with = "nats_user")]
    pub nats_creds: Option<PathBuf>,
    /// Root certificates (PEM) to trust for NATS's TLS, beside the system's.
    #[arg(long)]
    pub nats_ca: Option<PathBuf>,
    /// A client certificate (PEM) for NATS servers that verify clients (with --nats-key).
    #[arg(long, requires = "nats_key")]
    pub nats_cert: Option<PathBuf>,
    /// The client certificate's key (PEM).
    #[arg(long, requires = "nats_cert")]
    pub nats_key: Option<PathBuf>,
}

impl NatsArgs {
    /// The connection asked for, if any.
    pub fn options(&self) -> Option<BusOptions> {
        let url = self.nats.clone()?;
        let credentials = match (
            &self.nats_user,
            &self.nats_password,
            &self.nats_token,
            &self.nats_nkey,
            &self.nats_creds,
        ) {
            (Some(user), Some(password), ..) => Credentials::UserPassword {
                user: user.clone(),
                password: password.clone(),
            },
            (_, _, Some(token), ..) => Credentials::Token(token.clone()),
            (_, _, _, Some(seed), _) => Credentials::NkeySeed(seed.clone()),
            (.., Some(creds)) => Credentials::CredsFile(creds.clone()),
            _ => Credentials::None,
        };
        let tls = Tls {
            ca: self.nats_ca.clone(),
            client: self.nats_cert.clone().zip(self.nats_key.clone()),
        };
        Some(BusOptions {
            url,
            credentials,
            tls,
        })
    }
}

/// `cohort inspect --nats URL --team FILE`: every inbox consumer of the team (an agent that ran
/// on another node than the team's) with what waits in it, what is in flight and what was
/// delivered again.
pub fn inspect_inboxes(options: &BusOptions, team: Option<&Path>) -> std::process::ExitCode {
    let listed = (|| -> anyhow::Result<_> {
        let team = team.context("--nats needs --team FILE (the team's name names its streams)")?;
        let cfg = cohort::config::load_team(team)
            .with_context(|| format!("loading {}", team.display()))?;
        let rt = tokio::runtime::Runtime::new()?;
        rt.block_on(async {
            let bus = Bus::connect(options, &cfg.name, "inspect").await?;
            let lags = cohort::node::inbox::lags(&bus)
                .await
                .map_err(anyhow::Error::msg)?;
            Ok((bus.names.inbox_stream.clone(), lags))
        })
    })();
    let (stream, lags) = match listed {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: {e:#}");
            return std::process::ExitCode::from(3);
        }
    };
    println!();
    println!(
        "Inboxes (JetStream stream {stream}): {} consumer(s)",
        lags.len()
    );
    if !lags.is_empty() {
        println!(
            "  {:<32} {:>8} {:>9} {:>11}",
            "consumer", "waiting", "in flight", "redelivered"
        );
    }
    for l in &lags {
        println!(
            "  {:<32} {:>8} {:>9} {:>11}",
            l.consumer, l.waiting, l.in_flight, l.redelivered
        );
    }
    std::process::ExitCode::SUCCESS
}
