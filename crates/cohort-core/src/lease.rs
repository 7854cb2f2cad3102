//! How a node of a team across machines keeps a lease, as plain arithmetic on its own clock.
//!
//! The store sets a lease's expiry to its own now plus the term when a renewal runs, which is
//! after the node sent it: so a node that counts its term from the moment it *sent* its last
//! successful renewal stops acting before the store lets anyone else take over. It stops a
//! margin earlier still, to leave room for clocks that run at slightly different rates and for
//! the time its actors take to stop.

use sha2::{Digest, Sha256};
use std::time::{Duration, Instant};

/// What every node of a team compares before it joins: the SHA-256 of its team file, in hex.
pub fn team_hash(team_file: &[u8]) -> String {
    Sha256::digest(team_file)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A lease's term as a node keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseTerm {
    /// How long the store grants the lease at each renewal.
    pub ttl: Duration,
}

/// The least term a node may ask for: below it a renewal's round trip is a fair share of it.
pub const MIN_TTL: Duration = Duration::from_secs(1);

impl LeaseTerm {
    /// A term of `ttl`, raised to [`MIN_TTL`].
    pub fn new(ttl: Duration) -> Self {
        LeaseTerm {
            ttl: ttl.max(MIN_TTL),
        }
    }

    /// How often the holder renews: three tries before a term is up.
    pub fn renew_every(&self) -> Duration {
        self.ttl / 3
    }

    /// Until when the holder may act on a lease whose last successful renewal (or taking)
    /// was sent at `sent`: a fifth of the term before the store's expiry at the earliest.
    pub fn act_until(&self, sent: Instant) -> Instant {
        sent + self.ttl - self.ttl / 5
    }

    /// How often a node that waits for a lease looks whether it is free.
    pub fn look_every(&self) -> Duration {
        (self.ttl / 10).clamp(Duration::from_millis(100), Duration::from_secs(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_holder_stops_acting_before_the_store_can_give_its_lease_to_another() {
        let term = LeaseTerm::new(Duration::from_secs(10));
        let sent = Instant::now();
        // The store's expiry is at least `sent + ttl` (the renewal ran after it was sent).
        assert!(term.act_until(sent) < sent + term.ttl);
        // It renews three times before it would have to stop.
        assert!(sent + term.renew_every() * 2 < term.act_until(sent));
        assert!(term.look_every() <= Duration::from_secs(1));
    }

    #[test]
    fn team_files_that_differ_by_a_byte_hash_apart() {
        assert_eq!(team_hash(b"name: a\n"), team_hash(b"name: a\n"));
        assert_ne!(team_hash(b"name: a\n"), team_hash(b"name: b\n"));
        assert_eq!(team_hash(b"").len(), 64);
    }

    #[test]
    fn a_term_is_never_shorter_than_the_least_one() {
        assert_eq!(LeaseTerm::new(Duration::from_millis(10)).ttl, MIN_TTL);
    }
}
