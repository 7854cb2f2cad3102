//! What a long-running team keeps in memory (`retention:`): finished tasks past the newest few
//! leave with a one-line summary, and a task's shared pools stay within their caps, in entries
//! and in bytes (`retention.memory_mib`). Every pool's bytes are summed as entries come and go;
//! past the budget's share for pools, finished tasks leave memory early, and while open work
//! alone is over it a person's new message waits. What leaves memory stays in the store.

use super::{Applied, SyncCore, SyncError};
use crate::config::Retention;
use crate::event::{Change, TaskChange, TaskSummaryLine};
use crate::ids::{StageId, TaskId};
use crate::message::Message;
use crate::state::{Held, TaskState};

/// The bytes a task's pools hold.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct PoolBytes {
    info: usize,
    conversation: usize,
}

impl PoolBytes {
    fn of(t: &TaskState) -> Self {
        PoolBytes {
            info: t.shared_info_pool.iter().map(Held::held_bytes).sum(),
            conversation: t
                .shared_conversation_pool
                .iter()
                .map(|e| e.message.held_bytes())
                .sum(),
        }
    }

    fn total(&self) -> usize {
        self.info + self.conversation
    }
}

/// Which pool of a task grew.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Pool {
    Info,
    Conversation,
}

impl SyncCore {
    /// What a long-running team keeps in memory.
    pub fn with_retention(mut self, r: Retention) -> Self {
        self.pool_kept = r.shared_pool_entries.max(1);
        self.message_chars = r.message_chars.max(1);
        self.finished_kept = r.finished_tasks.max(1);
        self.memory = r.memory;
        self
    }

    /// The bytes of every task's pools, counted once (at start, from what a store held).
    pub(super) fn count_pool_bytes(&mut self) {
        self.pool_bytes = self
            .tasks
            .values()
            .map(|t| (t.task_id.clone(), PoolBytes::of(t)))
            .collect();
        self.pools_total = self.pool_bytes.values().map(PoolBytes::total).sum();
    }

    /// The bytes held by the pools of every task, and of the open ones alone.
    pub fn pool_bytes(&self) -> (usize, usize) {
        let finished: usize = self
            .finished
            .iter()
            .filter_map(|t| self.pool_bytes.get(t))
            .map(PoolBytes::total)
            .sum();
        (self.pools_total, self.pools_total.saturating_sub(finished))
    }

    /// A person's message must fit in memory beside the open work: finished tasks leave to make
    /// room, but open ones hold what they were told.
    pub(super) fn room_for(&self, m: &Message) -> Result<(), SyncError> {
        self.room_for_person(m.held_bytes())
    }

    /// Whether a person's message of `bytes` fits beside the open work now.
    pub fn room_for_person(&self, bytes: usize) -> Result<(), SyncError> {
        let (_, open) = self.pool_bytes();
        let budget = self.memory.all_pools();
        if open + bytes > budget {
            return Err(SyncError::MemoryFull { held: open, budget });
        }
        Ok(())
    }

    /// A task is over: it stays in memory among the newest `finished_kept` finished tasks;
    /// the oldest of them leaves, with a one-line summary for readers.
    pub(super) fn retire_task(&mut self, task: &TaskId, applied: &mut Applied) {
        self.steps_run.remove(task);
        self.stall_told.remove(task);
        self.finished.push_back(task.clone());
        while self.finished.len() > self.finished_kept {
            self.evict_oldest_finished(applied);
        }
    }

    /// The oldest finished task leaves memory; false when there is none.
    fn evict_oldest_finished(&mut self, applied: &mut Applied) -> bool {
        let Some(old) = self.finished.pop_front() else {
            return false;
        };
        let Some(t) = self.tasks.get(&old) else {
            return true;
        };
        let summary = TaskSummaryLine::of(t, &self.texts);
        let stages: Vec<StageId> = t.stage_list.clone();
        self.stuck_reported.retain(|(s, _)| !stages.contains(s));
        if let Some(b) = self.pool_bytes.remove(&old) {
            self.pools_total -= b.total();
        }
        self.emit(
            applied,
            Change::Task(TaskChange::Evicted {
                task_id: old,
                summary,
            }),
        );
        true
    }

    /// An entry of `bytes` joined a pool of `task`: the pools are kept within their caps.
    pub(super) fn pool_grew(&mut self, task: &TaskId, pool: Pool, bytes: usize, out: &mut Applied) {
        if !self.tasks.contains_key(task) {
            return;
        }
        let b = self.pool_bytes.entry(task.clone()).or_default();
        match pool {
            Pool::Info => b.info += bytes,
            Pool::Conversation => b.conversation += bytes,
        }
        self.pools_total += bytes;
        self.trim_pools(task, out);
        // Past the pools' share of the budget, finished tasks leave before their count says.
        while self.pools_total > self.memory.all_pools() && self.evict_oldest_finished(out) {}
    }

    /// Keeps a task's shared pools within `pool_kept` entries and the budget's bytes for one
    /// task (the oldest leave first). A pool is trimmed once it is a tenth (at least 16
    /// entries) over its count, or over its bytes, down to seven eighths of them: so trimming
    /// is one change per many entries.
    fn trim_pools(&mut self, task: &TaskId, applied: &mut Applied) {
        let Some(t) = self.tasks.get(task) else {
            return;
        };
        let over = |len: usize| {
            if len > self.pool_kept + (self.pool_kept / 10).max(16) {
                len - self.pool_kept
            } else {
                0
            }
        };
        let (info, conv) = (&t.shared_info_pool, &t.shared_conversation_pool);
        let (mut drop_info, mut drop_conv) = (over(info.len()), over(conv.len()));
        let held = self.pool_bytes.get(task).copied().unwrap_or_default();
        let mut left_info = held.info
            - info
                .iter()
                .take(drop_info)
                .map(Held::held_bytes)
                .sum::<usize>();
        let mut left_conv = held.conversation
            - conv
                .iter()
                .take(drop_conv)
                .map(|e| e.message.held_bytes())
                .sum::<usize>();
        let cap = self.memory.task_pools();
        if left_info + left_conv > cap {
            // From the pool that holds more; the newest entry of each stays.
            while left_info + left_conv > cap - cap / 8 {
                if left_info >= left_conv && drop_info + 1 < info.len() {
                    left_info -= info[drop_info].held_bytes();
                    drop_info += 1;
                } else if drop_conv + 1 < conv.len() {
                    left_conv -= conv[drop_conv].message.held_bytes();
                    drop_conv += 1;
                } else if drop_info + 1 < info.len() {
                    left_info -= info[drop_info].held_bytes();
                    drop_info += 1;
                } else {
                    break;
                }
            }
        }
        if drop_info + drop_conv == 0 {
            return;
        }
        self.pools_total -= held.total() - (left_info + left_conv);
        self.pool_bytes.insert(
            task.clone(),
            PoolBytes {
                info: left_info,
                conversation: left_conv,
            },
        );
        self.emit(
            applied,
            Change::Task(TaskChange::Trimmed {
                task_id: task.clone(),
                shared_info: drop_info,
                conversation: drop_conv,
            }),
        );
    }
}
