//! Failed-login back-off. Failures are counted per (human id, client address) and per client
//! address; past a few free failures each further try from there waits, the wait doubling up to
//! a cap. A guesser slows down only itself: the real person, from their own address, is never
//! held back by someone else's failures on their id (there is no lock per id alone).

use dashmap::DashMap;
use std::collections::VecDeque;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// When failed logins start to cost a wait (429 with Retry-After), and how long it grows.
#[derive(Clone, Copy, Debug)]
pub struct LoginLimits {
    /// Failures one id may have from one address before each next try waits (default 5).
    pub free_per_pair: usize,
    /// Failures one address may have over all ids before each next try waits (default 30):
    /// one address trying many ids.
    pub free_per_ip: usize,
    /// The first wait; each further failure doubles it (default 1 s).
    pub first_delay: Duration,
    /// The longest wait (default 60 s).
    pub max_delay: Duration,
    /// Failures older than this are forgotten (default 15 min).
    pub window: Duration,
}

impl Default for LoginLimits {
    fn default() -> Self {
        LoginLimits {
            free_per_pair: 5,
            free_per_ip: 30,
            first_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(60),
            window: Duration::from_secs(15 * 60),
        }
    }
}

/// What a failure is counted against.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Key {
    Pair(String, Option<IpAddr>),
    Ip(IpAddr),
}

/// Ids longer than this are counted under their prefix, so junk ids cannot bloat the table.
const MAX_KEY_LEN: usize = 128;
/// Failures kept per key: past this many the wait is long at its cap anyway.
const KEPT_PER_KEY: usize = 64;
/// Past this many keys, keys with no failure in the window are swept (at most once a minute).
const SWEEP_AT: usize = 4096;
/// The most keys kept: past it (after a sweep) the table starts afresh, so guesses from
/// countless addresses cannot grow it without bound.
const MAX_KEYS: usize = 65_536;
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// The address a failure is counted against: an IPv6 client by its /64 (one host often holds
/// a whole /64, and could otherwise step around the limit by changing its address).
fn client(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => {
            let mut seg = v6.segments();
            seg[4..].fill(0);
            IpAddr::V6(seg.into())
        }
        v4 => v4,
    }
}

/// Counts failed logins. An attempt is counted *before* the password is checked (and forgiven
/// if it succeeds), so a burst of parallel guesses cannot all slip in while the slow hash
/// check runs.
pub struct LoginLimiter {
    limits: LoginLimits,
    failures: DashMap<Key, VecDeque<Instant>>,
    last_sweep: std::sync::Mutex<Option<Instant>>,
}

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
            last_sweep: std::sync::Mutex::new(None),
        }
    }

    /// Admits an attempt for `human` from `ip`, counting it as a failure until it succeeds;
    /// or refuses it with the seconds to wait.
    pub fn begin(&self, human: &str, ip: Option<IpAddr>) -> Result<Attempt, u64> {
        self.begin_at(human, ip, Instant::now())
    }

    /// `begin` at `now` (tests give the time rather than race the clock).
    fn begin_at(&self, human: &str, ip: Option<IpAddr>, now: Instant) -> Result<Attempt, u64> {
        let human: String = human.chars().take(MAX_KEY_LEN).collect();
        let ip = ip.map(client);
        let mut keys = vec![(Key::Pair(human, ip), self.limits.free_per_pair)];
        if let Some(ip) = ip {
            keys.push((Key::Ip(ip), self.limits.free_per_ip));
        }
        let mut wait = Duration::ZERO;
        for (key, free) in &keys {
            if let Some(mut q) = self.failures.get_mut(key) {
                self.prune(&mut q, now);
                if let (Some(delay), Some(last)) = (self.delay(q.len(), *free), q.back()) {
                    wait = wait.max((*last + delay).saturating_duration_since(now));
                }
            }
        }
        if !wait.is_zero() {
            return Err((wait.as_secs_f64().ceil() as u64).max(1));
        }
        if self.failures.len() >= SWEEP_AT {
            self.sweep(now);
        }
        for (key, _) in &keys {
            let mut q = self.failures.entry(key.clone()).or_default();
            if q.len() >= KEPT_PER_KEY {
                q.pop_front();
            }
            q.push_back(now);
        }
        Ok(Attempt {
            keys: keys.into_iter().map(|(k, _)| k).collect(),
            at: now,
        })
    }

    /// Drops keys with no failure in the window, at most once per [`SWEEP_EVERY`]; a table
    /// still past [`MAX_KEYS`] starts afresh.
    fn sweep(&self, now: Instant) {
        {
            let mut last = self.last_sweep.lock().unwrap_or_else(|p| p.into_inner());
            if last.is_some_and(|t| now.duration_since(t) < SWEEP_EVERY)
                && self.failures.len() < MAX_KEYS
            {
                return;
            }
            *last = Some(now);
        }
        let window = self.limits.window;
        self.failures
            .retain(|_, q| q.back().is_some_and(|t| now.duration_since(*t) < window));
        if self.failures.len() >= MAX_KEYS {
            tracing::warn!(
                "failed logins from too many addresses; the login limiter starts afresh"
            );
            self.failures.clear();
        }
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

    /// The wait after the last of `failures` failures, when they are past the `free` ones.
    fn delay(&self, failures: usize, free: usize) -> Option<Duration> {
        let over = failures.checked_sub(free)?;
        let factor = 1u32.checked_shl(over.min(31) as u32).unwrap_or(u32::MAX);
        Some(
            self.limits
                .first_delay
                .saturating_mul(factor)
                .min(self.limits.max_delay),
        )
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

    fn limiter(free_per_pair: usize, free_per_ip: usize, first_ms: u64) -> LoginLimiter {
        LoginLimiter::new(LoginLimits {
            free_per_pair,
            free_per_ip,
            first_delay: Duration::from_millis(first_ms),
            max_delay: Duration::from_secs(60),
            window: Duration::from_secs(60),
        })
    }

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn a_guesser_slows_only_itself_never_the_person_elsewhere() {
        let l = limiter(3, 100, 10_000);
        let ok = l.begin("alice", ip("10.0.0.1")).unwrap();
        l.succeeded(ok);
        for _ in 0..3 {
            l.begin("alice", ip("10.0.0.66")).unwrap();
        }
        let wait = l.begin("alice", ip("10.0.0.66")).unwrap_err();
        assert_eq!(wait, 10);
        assert!(
            l.begin("alice", ip("10.0.0.1")).is_ok(),
            "alice from her own address"
        );
        assert!(
            l.begin("bob", ip("10.0.0.66")).is_ok(),
            "other ids from there too"
        );
    }

    #[test]
    fn the_wait_doubles_with_each_failure_up_to_its_cap() {
        let l = limiter(1, 100, 1);
        assert_eq!(l.delay(0, 1), None);
        assert_eq!(l.delay(1, 1), Some(Duration::from_millis(1)));
        assert_eq!(l.delay(4, 1), Some(Duration::from_millis(8)));
        assert_eq!(l.delay(60, 1), Some(Duration::from_secs(60)));
        // After the wait, a try is admitted again.
        let t0 = Instant::now();
        l.begin_at("a", None, t0).unwrap();
        assert!(l.begin_at("a", None, t0).is_err());
        assert!(l.begin_at("a", None, t0 + Duration::from_millis(5)).is_ok());
    }

    #[test]
    fn one_address_trying_many_ids_waits_too() {
        let l = limiter(100, 2, 10_000);
        l.begin("a", ip("10.0.0.1")).unwrap();
        l.begin("b", ip("10.0.0.1")).unwrap();
        assert!(l.begin("c", ip("10.0.0.1")).is_err());
        assert!(l.begin("c", ip("10.0.0.2")).is_ok());
    }

    #[test]
    fn an_ipv6_client_is_counted_by_its_64() {
        let l = limiter(100, 1, 10_000);
        l.begin("a", ip("2001:db8:1:2::1")).unwrap();
        assert!(
            l.begin("b", ip("2001:db8:1:2::99")).is_err(),
            "the same /64"
        );
        assert!(l.begin("b", ip("2001:db8:1:3::1")).is_ok());
    }

    #[test]
    fn a_success_is_forgiven() {
        let l = limiter(1, 100, 10_000);
        let ok = l.begin("a", None).unwrap();
        l.succeeded(ok);
        assert!(l.begin("a", None).is_ok());
        assert!(l.begin("a", None).is_err());
    }
}
