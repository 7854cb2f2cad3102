//! Who is logged in: the session table (a hash of each token → human, with an expiry), kept
//! in the store too so logins survive a restart; logging out ends a session.

use cohort_core::ids::AgentId;
use cohort_store::{Store, StoreError, StoredSession};
use dashmap::DashMap;
use std::sync::Arc;
use std::time::Duration;

pub use cohort_core::config::SESSION_TTL;

/// Open sessions, by a hash of their token: the table (and the store, which keeps them across
/// restarts) never holds a token itself, so reading either gives no one a way in. Tokens are
/// 256-bit random strings from `auth::new_token`, so an unsalted SHA-256 is enough.
pub struct Sessions {
    by_hash: DashMap<String, Session>,
    ttl: Duration,
    store: Option<Arc<dyn Store>>,
    /// Counts logouts, so open websocket feeds notice theirs.
    ended: tokio::sync::watch::Sender<u64>,
}

struct Session {
    human: AgentId,
    /// Milliseconds since the Unix epoch.
    expires_at: i64,
}

impl Default for Sessions {
    fn default() -> Self {
        Sessions {
            by_hash: DashMap::new(),
            ttl: SESSION_TTL,
            store: None,
            ended: tokio::sync::watch::Sender::new(0),
        }
    }
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// The hex SHA-256 of a token.
pub fn token_hash(token: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(token.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

impl Sessions {
    /// Sessions that last `ttl`, kept in `store` too (and the live ones it holds taken back).
    pub async fn stored(ttl: Duration, store: Arc<dyn Store>) -> Result<Sessions, StoreError> {
        let by_hash = DashMap::new();
        for s in store.live_sessions(now_ms()).await? {
            by_hash.insert(
                s.token_hash,
                Session {
                    human: s.human,
                    expires_at: s.expires_at,
                },
            );
        }
        Ok(Sessions {
            by_hash,
            ttl,
            store: Some(store),
            ..Sessions::default()
        })
    }

    /// Sessions that last `ttl`, in memory only.
    pub fn with_ttl(ttl: Duration) -> Sessions {
        Sessions {
            ttl,
            ..Sessions::default()
        }
    }

    /// Opens a session for `human`; returns its token once the session is stored.
    pub async fn open(&self, human: AgentId) -> Result<String, StoreError> {
        let now = now_ms();
        // Logins are rare: dropping expired sessions here keeps the table small.
        self.by_hash.retain(|_, s| s.expires_at > now);
        let token = cohort_core::auth::new_token();
        let hash = token_hash(&token);
        let expires_at = now.saturating_add(self.ttl.as_millis() as i64);
        if let Some(store) = &self.store {
            store
                .put_session(&StoredSession {
                    token_hash: hash.clone(),
                    human: human.clone(),
                    expires_at,
                })
                .await?;
        }
        self.by_hash.insert(hash, Session { human, expires_at });
        Ok(token)
    }

    /// Ends the session of `token` (logout): gone from the table and the store. False when
    /// there was no such session.
    pub async fn close(&self, token: &str) -> Result<bool, StoreError> {
        let hash = token_hash(token);
        if let Some(store) = &self.store {
            store.delete_session(&hash).await?;
        }
        let closed = self.by_hash.remove(&hash).is_some();
        if closed {
            self.ended.send_modify(|n| *n += 1);
        }
        Ok(closed)
    }

    /// Changes whenever a session ends by logout (a feed then checks whether it was its own).
    pub fn watch_ended(&self) -> tokio::sync::watch::Receiver<u64> {
        self.ended.subscribe()
    }

    /// When the session of a live `token` expires (ms since the Unix epoch).
    pub fn expires_at(&self, token: &str) -> Option<i64> {
        self.by_hash.get(&token_hash(token)).map(|s| s.expires_at)
    }

    /// The human a live token belongs to.
    pub fn human(&self, token: &str) -> Option<AgentId> {
        let hash = token_hash(token);
        let s = self.by_hash.get(&hash)?;
        if s.expires_at <= now_ms() {
            drop(s);
            self.by_hash.remove(&hash);
            return None;
        }
        Some(s.human.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn sessions_map_tokens_to_humans_by_hash_and_expire() {
        let s = Sessions::default();
        let t = s.open("alice".into()).await.unwrap();
        assert_eq!(s.human(&t), Some("alice".into()));
        assert_eq!(s.human("nope"), None);
        assert_ne!(s.open("alice".into()).await.unwrap(), t);
        assert!(
            s.by_hash.iter().all(|e| e.key() != &t),
            "the token itself is never kept"
        );
        let short = Sessions::with_ttl(Duration::from_millis(30));
        let t = short.open("bob".into()).await.unwrap();
        assert_eq!(short.human(&t), Some("bob".into()));
        tokio::time::sleep(Duration::from_millis(60)).await;
        assert_eq!(short.human(&t), None, "expired");
        let t = s.open("carol".into()).await.unwrap();
        assert!(s.close(&t).await.unwrap());
        assert_eq!(s.human(&t), None, "logged out");
        assert!(!s.close(&t).await.unwrap());
    }
}
