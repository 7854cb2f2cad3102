//! The bound on password checks. An Argon2id check is made slow and memory-hard on purpose
//! (~19 MiB for a few tens of milliseconds), so checks that run unbounded let a crowd of wrong
//! logins take the server's memory and every core (measured: 120 parallel wrong logins took
//! RSS from 33 MB to 991 MB and a real login 2–5 s). So at most a few checks run at once (one
//! per core, at most [`MAX_PERMITS`]), one client address has at most
//! [`PER_CLIENT`] checks waiting or running (a crowd from a few addresses cannot fill the
//! line ahead of a real person elsewhere), and a check that cannot start within
//! [`QUEUE_WAIT`] is refused (429, try again in a second).

use dashmap::DashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::Semaphore;

/// The most checks at once on any machine: each holds ~19 MiB.
pub const MAX_PERMITS: usize = 4;
/// Checks one client address may have waiting or running.
pub const PER_CLIENT: usize = 2;
/// How long a check may wait for its turn before it is refused.
pub const QUEUE_WAIT: Duration = Duration::from_secs(1);

/// Why a check did not run.
#[derive(Debug, PartialEq, Eq)]
pub enum CheckRefused {
    /// A check for the same client address is waiting or running.
    ClientBusy,
    /// Every permit is taken, and none came free in time.
    Busy,
    /// The check itself failed (its thread panicked or was cancelled), with why.
    Failed(String),
}

impl CheckRefused {
    /// Why, in the language of `t`.
    pub fn render(&self, t: &cohort_core::texts::Texts) -> String {
        match self {
            CheckRefused::ClientBusy => t.api_login_in_progress(),
            CheckRefused::Busy => t.api_password_checks_busy(),
            CheckRefused::Failed(why) => t.api_password_check_failed(why),
        }
    }
}

/// In English, as logs show it.
impl std::fmt::Display for CheckRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.render(&cohort_core::texts::Texts::english()))
    }
}

impl std::error::Error for CheckRefused {}

pub struct PasswordChecks {
    /// Shared with the blocking threads, which hold a permit until their check is over.
    running: Arc<Running>,
    size: usize,
    per_client: DashMap<IpAddr, usize>,
}

struct Running {
    permits: Arc<Semaphore>,
    now: AtomicUsize,
    peak: AtomicUsize,
}

impl Default for PasswordChecks {
    /// One check per core, at most [`MAX_PERMITS`].
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        PasswordChecks::new(cores.min(MAX_PERMITS))
    }
}

impl PasswordChecks {
    /// At most `permits` checks at once (at least one).
    pub fn new(permits: usize) -> Self {
        let permits = permits.max(1);
        PasswordChecks {
            running: Arc::new(Running {
                permits: Arc::new(Semaphore::new(permits)),
                now: AtomicUsize::new(0),
                peak: AtomicUsize::new(0),
            }),
            size: permits,
            per_client: DashMap::new(),
        }
    }

    /// How many checks may run at once.
    pub fn permits(&self) -> usize {
        self.size
    }

    /// The most checks that ran at once so far.
    pub fn peak(&self) -> usize {
        self.running.peak.load(Ordering::Relaxed)
    }

    /// Takes `client`'s place in the line, or refuses when it already has [`PER_CLIENT`].
    /// Without an address (a test calling the router directly) there is no per-client line.
    pub fn enter(&self, client: Option<IpAddr>) -> Result<InLine<'_>, CheckRefused> {
        if let Some(ip) = client {
            let mut n = self.per_client.entry(ip).or_insert(0);
            if *n >= PER_CLIENT {
                return Err(CheckRefused::ClientBusy);
            }
            *n += 1;
        }
        Ok(InLine {
            checks: self,
            client,
        })
    }
}

/// A place in the line for a check; leaving it (dropping) frees the client's place.
pub struct InLine<'a> {
    checks: &'a PasswordChecks,
    client: Option<IpAddr>,
}

impl InLine<'_> {
    /// Waits (at most [`QUEUE_WAIT`]) for a turn, then checks `password` against `hash` on a
    /// blocking thread.
    pub async fn verify(self, password: String, hash: String) -> Result<bool, CheckRefused> {
        let running = self.checks.running.clone();
        let permit = tokio::time::timeout(QUEUE_WAIT, running.permits.clone().acquire_owned())
            .await
            .map_err(|_| CheckRefused::Busy)?
            .map_err(|e| CheckRefused::Failed(e.to_string()))?;
        // Argon2 is deliberately slow: keep it off the async workers. The permit goes with the
        // check, so a client that hangs up does not free its place while the check still runs.
        tokio::task::spawn_blocking(move || {
            let now = running.now.fetch_add(1, Ordering::SeqCst) + 1;
            running.peak.fetch_max(now, Ordering::SeqCst);
            let ok = cohort_core::auth::verify_password(&password, &hash);
            running.now.fetch_sub(1, Ordering::SeqCst);
            drop(permit);
            ok
        })
        .await
        .map_err(|e| CheckRefused::Failed(e.to_string()))
    }
}

impl Drop for InLine<'_> {
    fn drop(&mut self) {
        if let Some(ip) = self.client {
            // Removed when it reaches zero, so the table holds only addresses in line now.
            self.checks.per_client.remove_if_mut(&ip, |_, n| {
                *n -= 1;
                *n == 0
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn one_address_has_at_most_its_share_of_the_line() {
        let checks = PasswordChecks::new(1);
        let a = checks.enter(ip("10.0.0.1")).unwrap();
        let b = checks.enter(ip("10.0.0.1")).unwrap();
        assert_eq!(
            checks.enter(ip("10.0.0.1")).err(),
            Some(CheckRefused::ClientBusy)
        );
        assert!(checks.enter(ip("10.0.0.2")).is_ok(), "another address");
        assert!(checks.enter(None).is_ok(), "no address, no per-client line");
        drop(a);
        assert!(checks.enter(ip("10.0.0.1")).is_ok(), "a place was freed");
        drop(b);
        assert!(checks.per_client.is_empty(), "{:?}", checks.per_client);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn no_more_checks_run_at_once_than_there_are_permits() {
        let hash = cohort_core::auth::hash_password("right").unwrap();
        let checks = Arc::new(PasswordChecks::new(2));
        let mut tasks = Vec::new();
        for i in 0..8 {
            let (checks, hash) = (checks.clone(), hash.clone());
            tasks.push(tokio::spawn(async move {
                let line = checks.enter(ip(&format!("10.0.0.{i}")))?;
                line.verify("wrong".into(), hash).await
            }));
        }
        let mut answered = 0;
        for t in tasks {
            match t.await.unwrap() {
                Ok(ok) => {
                    assert!(!ok);
                    answered += 1;
                }
                Err(e) => assert_eq!(e, CheckRefused::Busy),
            }
        }
        assert!(answered >= 1);
        assert!(
            checks.peak() >= 1 && checks.peak() <= 2,
            "{}",
            checks.peak()
        );
    }
}
