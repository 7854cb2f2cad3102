//! The NATS connection of a node: where it is, how the node proves who it is (user and
//! password, a token, an NKey seed or a credentials file) and TLS; and the subjects and streams
//! of its team, named after the team so that teams sharing one NATS never see each other's.
//! Credentials are never logged: a URL is shown without its password.

use async_nats::jetstream;
use cohort_core::ids::AgentId;
use std::path::PathBuf;
use std::time::Duration;

/// How a node proves who it is to NATS.
#[derive(Clone, Default)]
pub enum Credentials {
    /// None, or in the URL (`nats://user:password@host:4222`).
    #[default]
    None,
    UserPassword {
        user: String,
        password: String,
    },
    Token(String),
    /// A file holding an NKey seed (`SU…`).
    NkeySeed(PathBuf),
    /// A credentials file (a user JWT and its NKey seed, as `nsc` writes them).
    CredsFile(PathBuf),
}

impl std::fmt::Debug for Credentials {
    // Never the secret itself, whoever prints the options.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Credentials::None => write!(f, "none"),
            Credentials::UserPassword { user, .. } => write!(f, "user {user} and a password"),
            Credentials::Token(_) => write!(f, "a token"),
            Credentials::NkeySeed(p) => write!(f, "the NKey seed in {}", p.display()),
            Credentials::CredsFile(p) => write!(f, "the credentials in {}", p.display()),
        }
    }
}

/// TLS to NATS: required by a `tls://` URL or by any of these.
#[derive(Clone, Debug, Default)]
pub struct Tls {
    /// Root certificates (PEM) to trust beside the system's.
    pub ca: Option<PathBuf>,
    /// A client certificate and its key (PEM), for servers that verify clients.
    pub client: Option<(PathBuf, PathBuf)>,
}

/// Where and how a node reaches NATS.
#[derive(Clone, Debug)]
pub struct BusOptions {
    /// One server or several, comma-separated (`nats://host:4222`, `tls://host:4222`).
    pub url: String,
    pub credentials: Credentials,
    pub tls: Tls,
}

/// The subjects and streams of one team on a NATS shared by several.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TeamNames {
    /// The subject each committed change is published on.
    pub events_subject: String,
    /// The JetStream stream that keeps them.
    pub events_stream: String,
    /// Where agents on other nodes call the team's node ([`super::wire::ToCore`]).
    pub core_subject: String,
    /// Where the team's node tells the others of answers being written ([`super::writing`]).
    pub writing_subject: String,
    /// Where a node with a feed open says it wants them.
    pub writing_wanted_subject: String,
    /// Where the team's node calls node `<name>` (its agents): this, `.`, the name's token.
    hosts_prefix: String,
    /// The JetStream stream of the agents' inboxes ([`super::inbox`]).
    pub inbox_stream: String,
    /// An agent's inbox subject: this, `.`, the agent's token.
    inbox_prefix: String,
}

impl TeamNames {
    /// The names of the team called `team` (its team file's `name`, as a `subject_token`).
    pub fn of(team: &str) -> Self {
        let token = subject_token(team);
        TeamNames {
            events_subject: format!("cohort.{token}.events"),
            events_stream: format!("COHORT_{token}_EVENTS"),
            core_subject: format!("cohort.{token}.core"),
            writing_subject: format!("cohort.{token}.writing"),
            writing_wanted_subject: format!("cohort.{token}.writing_wanted"),
            hosts_prefix: format!("cohort.{token}.node"),
            inbox_stream: format!("COHORT_{token}_INBOX"),
            inbox_prefix: format!("cohort.{token}.inbox"),
        }
    }

    /// Where the team's node calls node `node` about the agents it runs.
    pub fn host_subject(&self, node: &str) -> String {
        format!("{}.{}", self.hosts_prefix, subject_token(node))
    }

    /// The subject of `agent`'s inbox.
    pub fn inbox_subject(&self, agent: &AgentId) -> String {
        format!("{}.{}", self.inbox_prefix, subject_token(agent.as_str()))
    }

    /// The name of the durable consumer that reads `agent`'s inbox.
    pub fn inbox_consumer(&self, agent: &AgentId) -> String {
        format!("inbox-{}", subject_token(agent.as_str()))
    }
}

/// `name` as one token of a NATS subject or a stream name: anything but letters, digits, `-`
/// and `_` becomes `_`, and a name that changes so gets the start of its hash, so that two
/// names never share a token.
fn subject_token(name: &str) -> String {
    let token: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if token == name {
        return token;
    }
    format!(
        "{token}-{}",
        &cohort_core::lease::team_hash(name.as_bytes())[..8]
    )
}

/// The most the event stream keeps; older changes go first (the store keeps them all).
pub const EVENTS_MAX_BYTES: i64 = 1 << 30;
/// The most the agents' inboxes hold together; past it a message waits in the record (the
/// team's node tries again).
pub const INBOX_MAX_BYTES: i64 = 256 << 20;
/// How long JetStream remembers a change's `Nats-Msg-Id` to drop a repeat of it.
const DUPLICATE_WINDOW: Duration = Duration::from_secs(120);

#[derive(Debug, thiserror::Error)]
pub enum BusError {
    #[error("cannot connect to NATS at {url}: {why}")]
    Connect { url: String, why: String },
    #[error("cannot read the credentials for NATS: {0}")]
    Credentials(#[source] std::io::Error),
    #[error(
        "NATS at {url} has no JetStream for the team's stream {stream} ({why}); start \
         nats-server with JetStream (`-js`)"
    )]
    Stream {
        url: String,
        stream: String,
        why: String,
    },
}

/// A node's connection to NATS, with its team's names. The connection and everything that
/// uses it (the relay) run on a thread of the bus's own, never on the actors'.
pub struct Bus {
    pub client: async_nats::Client,
    pub jetstream: jetstream::Context,
    pub names: TeamNames,
    /// The URL without a password, for messages.
    pub shown: String,
    rt: BusRuntime,
}

/// The bus's runtime (one thread), dropped without waiting.
struct BusRuntime(Option<tokio::runtime::Runtime>);

impl Drop for BusRuntime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

impl Bus {
    /// Connects to NATS as node `node` of team `team`, and makes sure the team's event stream
    /// exists (file-backed, so it outlives a restart of NATS).
    pub async fn connect(options: &BusOptions, team: &str, node: &str) -> Result<Bus, BusError> {
        let shown = without_password(&options.url);
        // Held as a BusRuntime from the start: dropped on an error here (inside an async
        // context), a bare runtime would panic.
        let rt = BusRuntime(Some(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("cohort-nats")
                .enable_all()
                .build()
                .map_err(|e| BusError::Connect {
                    url: shown.clone(),
                    why: e.to_string(),
                })?,
        ));
        let names = TeamNames::of(team);
        let connecting = Self::open(
            options.clone(),
            team.to_owned(),
            node.to_owned(),
            names.clone(),
            shown.clone(),
        );
        let running = match &rt.0 {
            Some(r) => r.spawn(connecting),
            None => tokio::spawn(connecting),
        };
        let (client, jetstream) = running.await.map_err(|e| BusError::Connect {
            url: shown.clone(),
            why: e.to_string(),
        })??;
        Ok(Bus {
            client,
            jetstream,
            names,
            shown,
            rt,
        })
    }

    /// The bus's runtime, for a thread of the node's own that waits on NATS.
    pub fn handle(&self) -> tokio::runtime::Handle {
        match &self.rt.0 {
            Some(rt) => rt.handle().clone(),
            None => tokio::runtime::Handle::current(),
        }
    }

    /// Runs `work` on the bus's thread.
    pub fn spawn<F>(&self, work: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        match &self.rt.0 {
            Some(rt) => rt.spawn(work),
            None => tokio::spawn(work),
        }
    }

    async fn open(
        options: BusOptions,
        team: String,
        node: String,
        names: TeamNames,
        shown: String,
    ) -> Result<(async_nats::Client, jetstream::Context), BusError> {
        let client = connect_options(&options, &team, &node)
            .await?
            .connect(options.url.as_str())
            .await
            .map_err(|e| BusError::Connect {
                url: shown.clone(),
                why: e.to_string(),
            })?;
        let jetstream = jetstream::new(client.clone());
        let streams = [
            jetstream::stream::Config {
                name: names.events_stream.clone(),
                subjects: vec![names.events_subject.clone()],
                storage: jetstream::stream::StorageType::File,
                max_bytes: EVENTS_MAX_BYTES,
                discard: jetstream::stream::DiscardPolicy::Old,
                duplicate_window: DUPLICATE_WINDOW,
                ..Default::default()
            },
            jetstream::stream::Config {
                name: names.inbox_stream.clone(),
                subjects: vec![format!("{}.*", names.inbox_prefix)],
                retention: jetstream::stream::RetentionPolicy::WorkQueue,
                storage: jetstream::stream::StorageType::File,
                max_bytes: INBOX_MAX_BYTES,
                discard: jetstream::stream::DiscardPolicy::New,
                duplicate_window: DUPLICATE_WINDOW,
                ..Default::default()
            },
        ];
        for config in streams {
            let stream = config.name.clone();
            if let Err(e) = jetstream.get_or_create_stream(config).await {
                let (url, why) = (shown.clone(), e.to_string());
                return Err(BusError::Stream { url, stream, why });
            }
        }
        Ok((client, jetstream))
    }
}

async fn connect_options(
    options: &BusOptions,
    team: &str,
    node: &str,
) -> Result<async_nats::ConnectOptions, BusError> {
    let mut c = async_nats::ConnectOptions::new()
        .name(format!("cohort team {team} node {node}"))
        .connection_timeout(Duration::from_secs(5));
    c = match &options.credentials {
        Credentials::None => c,
        Credentials::UserPassword { user, password } => {
            c.user_and_password(user.clone(), password.clone())
        }
        Credentials::Token(t) => c.token(t.clone()),
        Credentials::NkeySeed(path) => {
            let seed = tokio::fs::read_to_string(path)
                .await
                .map_err(BusError::Credentials)?;
            c.nkey(seed.trim().to_owned())
        }
        Credentials::CredsFile(path) => c
            .credentials_file(path)
            .await
            .map_err(BusError::Credentials)?,
    };
    let tls = &options.tls;
    if options.url.starts_with("tls://") || tls.ca.is_some() || tls.client.is_some() {
        c = c.require_tls(true);
    }
    if let Some(ca) = &tls.ca {
        c = c.add_root_certificates(ca.clone());
    }
    if let Some((cert, key)) = &tls.client {
        c = c.add_client_certificate(cert.clone(), key.clone());
    }
    Ok(c)
}

/// `nats://user:secret@host:4222` → `nats://user:***@host:4222`, for each of several URLs.
pub fn without_password(urls: &str) -> String {
    urls.split(',')
        .map(|url| {
            let Some((scheme, rest)) = url.split_once("://") else {
                return url.to_owned();
            };
            match rest.split_once('@') {
                Some((creds, host)) => {
                    let user = creds.split(':').next().unwrap_or_default();
                    format!("{scheme}://{user}:***@{host}")
                }
                None => url.to_owned(),
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_team_has_subjects_and_a_stream_of_its_own() {
        let a = TeamNames::of("sales_team");
        assert_eq!(a.events_subject, "cohort.sales_team.events");
        assert_eq!(a.events_stream, "COHORT_sales_team_EVENTS");
        assert_ne!(TeamNames::of("ops"), a);
        // Names that read alike once cleaned keep streams of their own.
        let spaced = TeamNames::of("sales team");
        assert!(
            spaced.events_subject.starts_with("cohort.sales_team-"),
            "{spaced:?}"
        );
        assert_ne!(spaced, a);
        assert_ne!(spaced, TeamNames::of("sales.team"));
        // A name cannot reach into another team's subjects with `.`, `*` or `>`.
        let odd = TeamNames::of("a.*.>").events_subject;
        assert!(!odd[7..odd.len() - 7].contains(['.', '*', '>']), "{odd}");
    }

    #[test]
    fn credentials_never_show() {
        assert_eq!(
            without_password("nats://me:secret@a:4222,tls://b:4222"),
            "nats://me:***@a:4222,tls://b:4222"
        );
        let c = Credentials::UserPassword {
            user: "me".into(),
            password: "secret".into(),
        };
        assert!(!format!("{c:?}").contains("secret"));
        assert!(!format!("{:?}", Credentials::Token("secret".into())).contains("secret"));
    }
}
