//! A team-wide allowance of steps (`cohort run --max-steps N`): an agent takes one before it
//! starts a step, so no more than N steps ever start, however many agents run side by side.
//! Counting steps as they end instead (what the run saw) let steps already started on other
//! agents run past the limit. A team that is stopping closes its allowance, so its running
//! steps can end without new ones starting behind them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Steps the team's agents may still start, shared by all of them; unlimited by default.
#[derive(Clone, Debug, Default)]
pub struct StepAllowance {
    left: Option<Arc<AtomicU64>>,
    closed: Arc<AtomicBool>,
}

impl StepAllowance {
    /// No limit.
    pub fn unlimited() -> Self {
        StepAllowance::default()
    }

    /// At most `steps` steps, in all.
    pub fn of(steps: u64) -> Self {
        StepAllowance {
            left: Some(Arc::new(AtomicU64::new(steps))),
            ..StepAllowance::default()
        }
    }

    /// Takes one step's allowance: false, taking nothing, when none is left or it is closed.
    pub fn take(&self) -> bool {
        if self.closed.load(Ordering::SeqCst) {
            return false;
        }
        match &self.left {
            None => true,
            Some(left) => left
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok(),
        }
    }

    /// No step starts from now on (steps wait in their queues, for the next start).
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
    }

    /// Whether a limit was set and every step of it was taken.
    pub fn spent(&self) -> bool {
        self.left
            .as_ref()
            .is_some_and(|left| left.load(Ordering::SeqCst) == 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_allowance_gives_exactly_its_steps_across_threads() {
        let a = StepAllowance::of(3);
        let taken: usize = std::thread::scope(|s| {
            let hands: Vec<_> = (0..4)
                .map(|_| s.spawn(|| (0..10).filter(|_| a.take()).count()))
                .collect();
            hands.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(taken, 3);
        assert!(a.spent());
        let free = StepAllowance::unlimited();
        assert!((0..100).all(|_| free.take()) && !free.spent());
    }

    #[test]
    fn a_closed_allowance_gives_no_step_to_any_of_its_holders() {
        let team = StepAllowance::unlimited();
        let agent = team.clone();
        assert!(agent.take());
        team.close();
        assert!(!agent.take() && !team.take());
        assert!(!team.spent(), "closing is no limit reached");
    }
}
