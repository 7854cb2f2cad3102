//! The watchdog: now and then it looks for open tasks nobody works on any more
//! (`event::stall::idle_tasks`), and reports each that has stayed so for the team's
//! `waits.stall_secs` to SyncState, which tells the task's goal-giver.

use super::sync_state::{ReportStall, SyncStateActor};
use crate::monitor::Monitor;
use actix::prelude::*;
use cohort_core::event::stall::idle_tasks;
use cohort_core::ids::TaskId;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The most time between two looks (a short `stall` is looked at more often).
const LOOK_EVERY: Duration = Duration::from_secs(10);

pub struct Watchdog {
    monitor: Monitor,
    sync: Addr<SyncStateActor>,
    stall: Duration,
    /// Since when each idle task has been seen idle, and whether it was reported (tasks that
    /// got work again leave).
    idle_since: HashMap<TaskId, (Instant, bool)>,
}

impl Watchdog {
    pub fn new(monitor: Monitor, sync: Addr<SyncStateActor>, stall: Duration) -> Self {
        Watchdog {
            monitor,
            sync,
            stall,
            idle_since: HashMap::new(),
        }
    }

    fn look(&mut self) {
        let idle = self.monitor.read(idle_tasks);
        let now = Instant::now();
        self.idle_since.retain(|t, _| idle.contains(t));
        for t in idle {
            let (since, reported) = self.idle_since.entry(t.clone()).or_insert((now, false));
            let idle_for = now.duration_since(*since);
            if idle_for >= self.stall && !*reported {
                *reported = true;
                self.sync.do_send(ReportStall {
                    task_id: t,
                    idle_secs: idle_for.as_secs(),
                });
            }
        }
    }
}

impl Actor for Watchdog {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let every = (self.stall / 4).clamp(Duration::from_millis(50), LOOK_EVERY);
        ctx.run_interval(every, |w, _| w.look());
    }
}
