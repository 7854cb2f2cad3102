//! The command line's node and NATS flags (`cohort serve --node NAME --nats URL …`): the node,
//! where NATS is, the node's credentials and TLS. Secrets are best given by environment variable (a command line
//! is visible to every user of the machine in `ps`).

use cohort::node::bus::{BusOptions, Credentials, Tls};
use std::path::PathBuf;

/// A node of a team across machines as its flags give it.
pub struct Node {
    pub name: String,
    pub lease: std::time::Duration,
    pub advertise: Option<String>,
    pub nats: Option<BusOptions>,
}

#[derive(clap::Args, Clone, Debug)]
pub struct NatsArgs {
    /// NATS with JetStream for a team across machines (`nats://host:4222`, `tls://…`; several
    /// comma-separated): every committed change is published on the team's event stream.
    #[arg(long, env = "COHORT_NATS_URL", requires = "node")]
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
