//! Seed 000 §10.3's caps on what people ask of the team: a goal (a person's message in the
//! base task, which starts work) is refused with 429 while the team runs `http.running_tasks`
//! tasks, or when its sender gave `http.goals_per_person` goals within the last
//! `http.goal_window_s` (a sliding window); each refusal says in `Retry-After` when to try
//! again. Replies and messages inside a task are never held back: they are how work finishes.

use cohort_core::ids::AgentId;
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a goal refused for the running tasks is told to wait.
const RUNNING_RETRY: Duration = Duration::from_secs(10);

/// Why a goal is not taken now, and the seconds to wait.
#[derive(Debug, PartialEq, Eq)]
pub enum Held {
    /// The team runs `max` tasks or more.
    Running { running: usize, max: usize },
    /// The sender gave `given` goals within `window`.
    Rate {
        given: usize,
        window: Duration,
        retry_after: u64,
    },
}

impl Held {
    /// The seconds to wait before trying again.
    pub fn retry_after(&self) -> u64 {
        match self {
            Held::Running { .. } => RUNNING_RETRY.as_secs(),
            Held::Rate { retry_after, .. } => *retry_after,
        }
    }
}

impl Held {
    /// Why, in the language of `t`.
    pub fn render(&self, t: &cohort_core::texts::Texts) -> String {
        match self {
            Held::Running { running, max } => t.api_goal_held_running(running, max),
            Held::Rate {
                given,
                window,
                retry_after,
            } => t.api_goal_held_rate(given, window.as_secs(), retry_after),
        }
    }
}

/// In English, as logs show it.
impl std::fmt::Display for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.render(&cohort_core::texts::Texts::english()))
    }
}

/// The goals each person gave within the window, newest last (at most `per_person` each; the
/// people are the team file's, so the table is bounded too).
pub struct GoalLimiter {
    per_person: usize,
    window: Duration,
    running_max: usize,
    given: Mutex<HashMap<AgentId, VecDeque<Instant>>>,
}

impl GoalLimiter {
    pub fn new(http: &cohort_core::config::Http) -> Self {
        GoalLimiter {
            per_person: http.goals_per_person,
            window: http.goal_window,
            running_max: http.running_tasks,
            given: Mutex::default(),
        }
    }

    /// Takes a goal of `human`'s while `running` tasks run, counting it; or says why not.
    pub fn admit(&self, human: &AgentId, running: usize) -> Result<(), Held> {
        self.admit_at(human, running, Instant::now())
    }

    fn admit_at(&self, human: &AgentId, running: usize, now: Instant) -> Result<(), Held> {
        if running >= self.running_max {
            return Err(Held::Running {
                running,
                max: self.running_max,
            });
        }
        let mut given = self.given.lock().unwrap_or_else(|p| p.into_inner());
        let mine = given.entry(human.clone()).or_default();
        while mine
            .front()
            .is_some_and(|at| now.duration_since(*at) >= self.window)
        {
            mine.pop_front();
        }
        if let Some(oldest) = mine.front().filter(|_| mine.len() >= self.per_person) {
            let left = self.window.saturating_sub(now.duration_since(*oldest));
            return Err(Held::Rate {
                given: mine.len(),
                window: self.window,
                retry_after: left.as_secs_f64().ceil().max(1.0) as u64,
            });
        }
        mine.push_back(now);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter() -> GoalLimiter {
        GoalLimiter::new(&cohort_core::config::Http {
            goals_per_person: 2,
            goal_window: Duration::from_secs(15),
            running_tasks: 3,
            ..Default::default()
        })
    }

    #[test]
    fn a_person_gives_so_many_goals_in_a_sliding_window_and_is_told_when_to_come_back() {
        let l = limiter();
        let (alice, bob) = (AgentId::from("alice"), AgentId::from("bob"));
        let t0 = Instant::now();
        assert!(l.admit_at(&alice, 0, t0).is_ok());
        assert!(l.admit_at(&alice, 0, t0 + Duration::from_secs(5)).is_ok());
        let held = l
            .admit_at(&alice, 0, t0 + Duration::from_secs(6))
            .unwrap_err();
        assert_eq!(held.retry_after(), 9, "the first leaves the window at 15 s");
        assert!(held.to_string().contains("2 goals within 15s"), "{held}");
        // Someone else is not held back by alice.
        assert!(l.admit_at(&bob, 0, t0 + Duration::from_secs(6)).is_ok());
        // A refused goal is not counted: at 15 s the first has left, the second not.
        assert!(l.admit_at(&alice, 0, t0 + Duration::from_secs(15)).is_ok());
        assert!(l.admit_at(&alice, 0, t0 + Duration::from_secs(16)).is_err());
    }

    #[test]
    fn no_goal_is_taken_while_the_team_runs_its_most_tasks() {
        let l = limiter();
        let held = l.admit(&"alice".into(), 3).unwrap_err();
        assert_eq!(held, Held::Running { running: 3, max: 3 });
        assert_eq!(held.retry_after(), 10);
        assert!(l.admit(&"alice".into(), 2).is_ok());
    }
}
