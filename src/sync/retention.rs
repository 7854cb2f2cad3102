//! What a long-running team keeps in memory (`retention:`): finished tasks past the newest few
//! leave with a one-line summary, and a task's shared pools stay within their cap.

use super::{Applied, SyncCore};
use crate::config::Retention;
use crate::event::{Change, TaskChange, TaskSummaryLine};
use crate::ids::{StageId, TaskId};

impl SyncCore {
    /// What a long-running team keeps in memory.
    pub fn with_retention(mut self, r: Retention) -> Self {
        self.pool_kept = r.shared_pool_entries.max(1);
        self.message_chars = r.message_chars.max(1);
        self.finished_kept = r.finished_tasks.max(1);
        self
    }

    /// A task is over: it stays in memory among the newest `finished_kept` finished tasks;
    /// the oldest of them leaves, with a one-line summary for readers.
    pub(super) fn retire_task(&mut self, task: &TaskId, applied: &mut Applied) {
        self.steps_run.remove(task);
        self.finished.push_back(task.clone());
        while self.finished.len() > self.finished_kept {
            let Some(old) = self.finished.pop_front() else {
                break;
            };
            let Some(t) = self.tasks.get(&old) else {
                continue;
            };
            let summary = TaskSummaryLine::of(t);
            let stages: Vec<StageId> = t.stage_list.clone();
            self.stuck_reported.retain(|(s, _)| !stages.contains(s));
            self.emit(
                applied,
                Change::Task(TaskChange::Evicted {
                    task_id: old,
                    summary,
                }),
            );
        }
    }

    /// Keeps a task's shared pools within `pool_kept` (the oldest entries leave). A pool is
    /// trimmed once it is a tenth (at least 16 entries) over the cap, so trimming is one change
    /// per many entries.
    pub(super) fn trim_pools(&mut self, task: &TaskId, applied: &mut Applied) {
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
        let info = over(t.shared_info_pool.len());
        let conversation = over(t.shared_conversation_pool.len());
        if info + conversation > 0 {
            self.emit(
                applied,
                Change::Task(TaskChange::Trimmed {
                    task_id: task.clone(),
                    shared_info: info,
                    conversation,
                }),
            );
        }
    }
}
