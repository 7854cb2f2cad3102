//! Who is logged in and who is guessing: the session table (token → human, with an expiry)
//! and the failed-login limiter (a sliding window of failures per human id and per client IP).

use crate::ids::AgentId;
use crate::store::{Store, StoreError, StoredSession};
use dashmap::DashMap;
use std::collections::VecDeque;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a token stays valid after the login that made it, unless the team file says
/// otherwise (`session_ttl_hours`).
pub const SESSION_TTL: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// Open sessions, by a hash of their token: the table (and the store, which keeps them across
/// restarts) never holds a token itself, so reading either gives no one a way in. Tokens are
/// 256-bit random strings from `auth::new_token`, so an unsalted SHA-256 is enough.
pub struct Sessions {
    by_hash: DashMap<String, Session>,
    ttl: Duration,
    store: Option<Arc<dyn Store>>,
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
        let token = crate::auth::new_token();
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

/// How many failed logins are allowed in a window before logins are refused (429).
#[derive(Clone, Copy, Debug)]
pub struct LoginLimits {
    pub per_human: usize,
    pub per_ip: usize,
    pub window: Duration,
}

impl Default for LoginLimits {
    fn default() -> Self {
        LoginLimits {
            per_human: 5,
            per_ip: 10,
            window: Duration::from_secs(60),
        }
    }
}

/// What a failure is counted against.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Key {
    Human(String),
    Ip(IpAddr),
}

/// Counts failed logins in a sliding window. An attempt is counted *before* the password is
/// checked (and forgiven if it succeeds), so a burst of parallel guesses cannot all slip in
/// while the slow hash check runs.
pub struct LoginLimiter {
    limits: LoginLimits,
    failures: DashMap<Key, VecDeque<Instant>>,
}

/// Ids longer than this are counted under their prefix, so junk ids cannot bloat the table.
const MAX_KEY_LEN: usize = 128;

/// Past this many keys, keys with no failure in the window are swept.
const SWEEP_AT: usize = 4096;

/// An attempt admitted by the limiter; `succeeded` forgives it.
#[derive(Debug)]
pub struct Attempt {
    keys: Vec<Key>,
    at: Instant,
}

impl LoginLimiter {
    pub fn new(limits: LoginLimits) -> Self {
        LoginLimiter {
            limits,
            failures: DashMap::new(),
        }
    }

    /// Admits an attempt for `human` from `ip`, counting it as a failure until it succeeds;
    /// or refuses it with the seconds to wait.
    pub fn begin(&self, human: &str, ip: Option<IpAddr>) -> Result<Attempt, u64> {
        let now = Instant::now();
        let human: String = human.chars().take(MAX_KEY_LEN).collect();
        let mut keys = vec![(Key::Human(human), self.limits.per_human)];
        if let Some(ip) = ip {
            keys.push((Key::Ip(ip), self.limits.per_ip));
        }
        let mut wait = 0;
        for (key, limit) in &keys {
            if let Some(mut q) = self.failures.get_mut(key) {
                self.prune(&mut q, now);
                if q.len() >= *limit {
                    let oldest = q.front().copied().unwrap_or(now);
                    let free_at = oldest + self.limits.window;
                    let secs = free_at.saturating_duration_since(now).as_secs_f64().ceil();
                    wait = wait.max((secs as u64).max(1));
                }
            }
        }
        if wait > 0 {
            return Err(wait);
        }
        if self.failures.len() >= SWEEP_AT {
            let window = self.limits.window;
            self.failures
                .retain(|_, q| q.back().is_some_and(|t| now.duration_since(*t) < window));
        }
        for (key, _) in &keys {
            self.failures.entry(key.clone()).or_default().push_back(now);
        }
        Ok(Attempt {
            keys: keys.into_iter().map(|(k, _)| k).collect(),
            at: now,
        })
    }

    /// The attempt succeeded: it no longer counts as a failure.
    pub fn succeeded(&self, attempt: Attempt) {
        for key in &attempt.keys {
            if let Some(mut q) = self.failures.get_mut(key)
                && let Some(i) = q.iter().rposition(|t| *t == attempt.at)
            {
                q.remove(i);
            }
        }
    }

    fn prune(&self, q: &mut VecDeque<Instant>, now: Instant) {
        while q
            .front()
            .is_some_and(|t| now.duration_since(*t) >= self.limits.window)
        {
            q.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter(per_human: usize, per_ip: usize, window_ms: u64) -> LoginLimiter {
        LoginLimiter::new(LoginLimits {
            per_human,
            per_ip,
            window: Duration::from_millis(window_ms),
        })
    }

    #[test]
    fn failures_per_human_are_limited_and_successes_are_forgiven() {
        let l = limiter(3, 100, 60_000);
        let ok = l.begin("alice", None).unwrap();
        l.succeeded(ok);
        for _ in 0..3 {
            l.begin("alice", None).unwrap();
        }
        let wait = l.begin("alice", None).unwrap_err();
        assert!((1..=60).contains(&wait));
        assert!(
            l.begin("bob", None).is_ok(),
            "other humans are not affected"
        );
    }

    #[test]
    fn failures_per_ip_are_limited_across_ids() {
        let l = limiter(100, 2, 60_000);
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        l.begin("a", Some(ip)).unwrap();
        l.begin("b", Some(ip)).unwrap();
        assert!(l.begin("c", Some(ip)).is_err());
        assert!(l.begin("c", Some("10.0.0.2".parse().unwrap())).is_ok());
    }

    #[test]
    fn the_window_slides() {
        let l = limiter(1, 1, 50);
        l.begin("a", None).unwrap();
        assert!(l.begin("a", None).is_err());
        std::thread::sleep(Duration::from_millis(60));
        assert!(l.begin("a", None).is_ok());
    }

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
    }
}
