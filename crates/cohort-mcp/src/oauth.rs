//! OAuth for `url` servers (MCP's authorization spec), on rmcp's `auth`: a server that answers
//! 401 or 403 with a challenge is authorized (its protected-resource metadata and authorization
//! server found out, the client pre-registered, named by its metadata document or registered
//! on the spot, PKCE, the person's consent), and its tokens are kept as a secret (a file only
//! this user may read, or memory) and refreshed when they run out. Who gives the consent is a
//! [`Consent`]: a person in a browser for `cohort mcp login` ([`Loopback`]), the conformance
//! suite's authorization server that consents at once ([`FollowRedirect`]); a team that runs
//! unattended has none, and a server that needs a login fails its calls, saying how to log in.

use cohort_core::config::mcp_servers::OAuthSettings;
use futures::future::BoxFuture;
use rmcp::transport::auth::{
    AuthError, AuthorizationManager, AuthorizationRequest, CredentialStore,
    InMemoryCredentialStore, OAuthState, StoredCredentials,
};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How many times one request authorizes before it gives up: a server that keeps refusing
/// (a scope it will never grant) must not send a person through consent forever.
pub const MOST_AUTHORIZATIONS: usize = 3;

/// Why a server could not be authorized.
#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    #[error(
        "it needs an OAuth login, and nobody here can give consent: run `cohort mcp login {file}` \
         once, as the user the team runs as (the server said: {challenge})"
    )]
    NeedsLogin { file: String, challenge: String },
    #[error("its OAuth authorization failed: {0}")]
    Failed(String),
    #[error("the person's consent did not come back: {0}")]
    NoConsent(String),
    #[error("the variable `{0}` (oauth.client_secret_env) is not set")]
    NoSecret(String),
}

impl From<AuthError> for OAuthError {
    fn from(e: AuthError) -> Self {
        OAuthError::Failed(e.to_string())
    }
}

/// Who consents to an authorization: shown the authorization server's address, it gives back
/// the address the server sent the browser back to (with the code).
pub trait Consent: Send + Sync {
    /// Where the authorization server sends the browser back to.
    fn redirect_uri(&self) -> String;
    /// The consent for `server` at `auth_url`: the URL the browser was sent back to.
    fn obtain(&self, server: &str, auth_url: String) -> BoxFuture<'static, Result<String, String>>;
}

/// Where the tokens are kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenPlace {
    /// For this process only (the conformance client, tests).
    Memory,
    /// One file per server address in this folder, readable by this user only.
    Dir(PathBuf),
}

impl TokenPlace {
    /// `COHORT_OAUTH_DIR`, else `$XDG_CONFIG_HOME/cohort/oauth`, else `~/.config/cohort/oauth`;
    /// memory when none is set.
    pub fn from_env(vars: &dyn Fn(&str) -> Option<String>) -> TokenPlace {
        let dir = vars("COHORT_OAUTH_DIR")
            .map(PathBuf::from)
            .or_else(|| vars("XDG_CONFIG_HOME").map(|d| PathBuf::from(d).join("cohort/oauth")))
            .or_else(|| vars("HOME").map(|h| PathBuf::from(h).join(".config/cohort/oauth")));
        dir.map_or(TokenPlace::Memory, TokenPlace::Dir)
    }
}

/// The team's OAuth: where tokens are kept and who consents.
pub struct OAuth {
    place: TokenPlace,
    consent: Option<Arc<dyn Consent>>,
    /// With [`TokenPlace::Memory`]: each server address's tokens.
    memory: Mutex<HashMap<String, InMemoryCredentialStore>>,
}

impl OAuth {
    pub fn new(place: TokenPlace, consent: Option<Arc<dyn Consent>>) -> OAuth {
        OAuth {
            place,
            consent,
            memory: Mutex::default(),
        }
    }

    /// A manager for the server at `url` with its kept tokens (none yet: requests go out
    /// without, and the server's challenge says what it wants).
    pub async fn manager(&self, url: &str) -> Result<AuthorizationManager, OAuthError> {
        let mut manager = AuthorizationManager::new(url).await?;
        self.keep_in(&mut manager, url);
        // Kept tokens are used (and refreshed) from here; a store read that fails is a
        // failure, not a reason to log in again.
        if let Err(e) = manager.initialize_from_store().await {
            tracing::warn!(url, "the kept OAuth tokens could not be used: {e}");
        }
        Ok(manager)
    }

    /// Whether the kept tokens of `url` were refreshed (none kept, or no refresh token, or a
    /// refusal: they were not).
    async fn refreshed(&self, url: &str) -> bool {
        let Ok(manager) = self.manager(url).await else {
            return false;
        };
        match manager.refresh_token().await {
            Ok(_) => {
                tracing::info!(url, "the kept OAuth tokens were refreshed after a refusal");
                true
            }
            Err(e) => {
                tracing::debug!(url, "the kept OAuth tokens could not be refreshed: {e}");
                false
            }
        }
    }

    fn keep_in(&self, manager: &mut AuthorizationManager, url: &str) {
        match &self.place {
            TokenPlace::Memory => {
                let mut memory = self.memory.lock().unwrap_or_else(|p| p.into_inner());
                manager.set_credential_store(memory.entry(url.to_owned()).or_default().clone());
            }
            TokenPlace::Dir(dir) => manager.set_credential_store(TokenFile::new(dir, url)),
        }
    }

    /// Authorizes the server at `url` (its file `file`) as its `challenge` (a
    /// `WWW-Authenticate` header) asks; the tokens are kept where this OAuth keeps them. A
    /// token the server no longer takes (`invalid_token`) is first refreshed, when
    /// `may_refresh` (once per request): it may only have run out, or been replaced on the
    /// server by a refresh a parallel request made, and no person need log in again for that.
    pub async fn authorize(
        &self,
        (name, file): (&str, &str),
        url: &str,
        (settings, secret): (&OAuthSettings, Option<String>),
        challenge: &str,
        may_refresh: bool,
    ) -> Result<(), OAuthError> {
        if may_refresh && challenge.contains("invalid_token") && self.refreshed(url).await {
            return Ok(());
        }
        let Some(consent) = self.consent.clone() else {
            return Err(OAuthError::NeedsLogin {
                file: file.to_owned(),
                challenge: challenge.to_owned(),
            });
        };
        if let (Some(var), None) = (&settings.client_secret_env, &secret) {
            return Err(OAuthError::NoSecret(var.clone()));
        }
        let mut manager = AuthorizationManager::new(url).await?;
        self.keep_in(&mut manager, url);
        let mut state = OAuthState::Unauthorized(manager);
        state
            .start_authorization(request(&*consent, settings, secret, challenge))
            .await?;
        let auth_url = state.get_authorization_url().await?;
        let back = consent
            .obtain(name, auth_url)
            .await
            .map_err(OAuthError::NoConsent)?;
        state.handle_callback_url(&back).await?;
        tracing::info!(server = name, "authorized over OAuth; its tokens are kept");
        Ok(())
    }
}

/// What an authorization asks for: the scopes the settings name (else those the challenge or
/// the server's metadata name), as the client the settings name (pre-registered, or its
/// metadata document's address), else a client registered on the spot.
fn request(
    consent: &dyn Consent,
    settings: &OAuthSettings,
    secret: Option<String>,
    challenge: &str,
) -> AuthorizationRequest {
    let mut request = AuthorizationRequest::new(consent.redirect_uri())
        .with_client_name("Cohort")
        .with_challenge(challenge);
    if !settings.scopes.is_empty() {
        request = request.with_scopes(settings.scopes.iter().cloned());
    }
    if let Some(id) = &settings.client_id {
        request = request.with_preregistered_client(id.clone());
        if let Some(secret) = secret {
            request = request.with_client_secret(secret);
        }
    } else if let Some(url) = &settings.client_metadata_url {
        request = request.with_client_metadata_url(url.clone());
    }
    request
}

/// A server's tokens in a file of their own (`<dir>/<its address, as a file name>.json`),
/// readable and writable by this user only, replaced whole on each write.
struct TokenFile {
    path: PathBuf,
}

impl TokenFile {
    fn new(dir: &std::path::Path, url: &str) -> TokenFile {
        let name: String = url
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .take(180)
            .collect();
        TokenFile {
            path: dir.join(format!("{name}.json")),
        }
    }

    fn write(&self, text: &[u8]) -> std::io::Result<()> {
        use std::io::Write;
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        let dir = self.path.parent().unwrap_or(std::path::Path::new("."));
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        let temp = self.path.with_extension("json.new");
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&temp)?;
        f.write_all(text)?;
        f.sync_all()?;
        std::fs::rename(&temp, &self.path)
    }
}

fn store_error(what: &str, path: &std::path::Path, e: impl std::fmt::Display) -> AuthError {
    AuthError::CredentialStoreError(format!("{what} {}: {e}", path.display()))
}

#[async_trait::async_trait]
impl CredentialStore for TokenFile {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        match std::fs::read(&self.path) {
            Ok(text) => serde_json::from_slice(&text)
                .map(Some)
                .map_err(|e| store_error("cannot read", &self.path, e)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(store_error("cannot read", &self.path, e)),
        }
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let text = serde_json::to_vec(&credentials)
            .map_err(|e| store_error("cannot write", &self.path, e))?;
        self.write(&text)
            .map_err(|e| store_error("cannot write", &self.path, e))
    }

    async fn clear(&self) -> Result<(), AuthError> {
        match std::fs::remove_file(&self.path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(store_error("cannot remove", &self.path, e))
            }
            _ => Ok(()),
        }
    }
}

/// The consent of an authorization server that gives it at once (MCP's conformance suite):
/// its authorization address is fetched without following the redirect, which is the way back.
pub struct FollowRedirect;

/// The address a [`FollowRedirect`] authorization names as the way back; nothing listens on it.
const NOWHERE: &str = "http://127.0.0.1:9/callback";

impl Consent for FollowRedirect {
    fn redirect_uri(&self) -> String {
        NOWHERE.to_owned()
    }

    fn obtain(
        &self,
        _server: &str,
        auth_url: String,
    ) -> BoxFuture<'static, Result<String, String>> {
        Box::pin(async move {
            let http = reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .timeout(Duration::from_secs(20))
                .build()
                .map_err(|e| e.to_string())?;
            let res = http
                .get(&auth_url)
                .send()
                .await
                .map_err(|e| e.to_string())?;
            res.headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
                .ok_or_else(|| format!("{auth_url} answered {} without a redirect", res.status()))
        })
    }
}

/// A person's consent in a browser (`cohort mcp login`): the authorization address is shown,
/// and the browser comes back to a listener on this machine's loopback, which takes the first
/// request to its path (within [`LOOPBACK_WAIT`]).
pub struct Loopback {
    listener: Mutex<Option<tokio::net::TcpListener>>,
    port: u16,
    show: ShowAddress,
}

/// Tells the person where to consent: called with the server's name and the address.
pub type ShowAddress = Arc<dyn Fn(&str, &str) + Send + Sync>;

/// How long a person has to consent in the browser.
pub const LOOPBACK_WAIT: Duration = Duration::from_secs(300);

impl Loopback {
    /// Listens on a free loopback port; `show(server, auth_url)` tells the person where to go.
    pub async fn bind(show: ShowAddress) -> std::io::Result<Loopback> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        Ok(Loopback {
            listener: Mutex::new(Some(listener)),
            port,
            show,
        })
    }
}

impl Consent for Loopback {
    fn redirect_uri(&self) -> String {
        format!("http://127.0.0.1:{}/callback", self.port)
    }

    fn obtain(&self, server: &str, auth_url: String) -> BoxFuture<'static, Result<String, String>> {
        (self.show)(server, &auth_url);
        let listener = self
            .listener
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        let base = format!("http://127.0.0.1:{}", self.port);
        Box::pin(async move {
            let listener = listener.ok_or("the way back was used already")?;
            let back = tokio::time::timeout(LOOPBACK_WAIT, way_back(&listener))
                .await
                .map_err(|_| format!("no consent within {LOOPBACK_WAIT:?}"))?
                .map_err(|e| e.to_string())?;
            Ok(format!("{base}{back}"))
        })
    }
}

/// The path and query of the first request to `/callback`, answered with a page that says so.
async fn way_back(listener: &tokio::net::TcpListener) -> std::io::Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    loop {
        let (mut socket, _) = listener.accept().await?;
        let mut head = vec![0u8; 8192];
        let n = socket.read(&mut head).await?;
        let line = String::from_utf8_lossy(&head[..n])
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned();
        let target = line.split(' ').nth(1).unwrap_or_default().to_owned();
        let ours = target.starts_with("/callback?");
        let body = if ours {
            "Cohort has the authorization; you may close this tab."
        } else {
            "Not found."
        };
        let status = if ours { "200 OK" } else { "404 Not Found" };
        let reply = format!(
            "HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        socket.write_all(reply.as_bytes()).await?;
        if ours {
            return Ok(target);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_kept_in_a_file_only_their_user_reads() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("cohort-oauth-{}", std::process::id()));
        let file = TokenFile::new(&dir, "https://mcp.example.com/mcp?x=1");
        assert_eq!(
            file.path.file_name().unwrap(),
            "https___mcp.example.com_mcp_x_1.json"
        );
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            assert!(file.load().await.unwrap().is_none());
            let creds = StoredCredentials::new("client-1".into(), None, vec!["read".into()], None);
            file.save(creds).await.unwrap();
            let back = file.load().await.unwrap().unwrap();
            assert_eq!(back.client_id, "client-1");
            assert_eq!(back.granted_scopes, ["read"]);
            let mode = std::fs::metadata(&file.path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
            let dir_mode = std::fs::metadata(&dir).unwrap().permissions().mode();
            assert_eq!(dir_mode & 0o777, 0o700);
            file.clear().await.unwrap();
            assert!(file.load().await.unwrap().is_none());
            file.clear().await.unwrap();
        });
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_token_place_follows_the_environment() {
        let vars = |k: &str| (k == "HOME").then(|| "/home/u".to_owned());
        assert_eq!(
            TokenPlace::from_env(&vars),
            TokenPlace::Dir("/home/u/.config/cohort/oauth".into())
        );
        let vars = |k: &str| (k == "COHORT_OAUTH_DIR").then(|| "/secrets".to_owned());
        assert_eq!(
            TokenPlace::from_env(&vars),
            TokenPlace::Dir("/secrets".into())
        );
        assert_eq!(TokenPlace::from_env(&|_| None), TokenPlace::Memory);
    }
}
