//! Unit tests of what SyncState keeps in memory: finished tasks past retention, capped shared
//! pools, the message size limit, and the bounded notices to the manager.

use super::tests::{TryApply, by, core};
use super::*;
use crate::ids::StageRef;
use crate::message::{TaskInstruction, TaskOutcome};
use crate::state::Held;

/// Adds and finishes a task; returns its id and every change that made.
fn finished_task(c: &mut SyncCore, name: &str) -> (TaskId, Vec<Change>) {
    let t = TaskId::from(name);
    let added = c
        .try_apply(
            &by(
                "m",
                TaskInstruction::AddTask {
                    attachments: Vec::new(),
                    task_id: t.clone(),
                    task_name: name.into(),
                    task_intention: "i".into(),
                    requested_by: None,
                    goal_step: None,
                    trace_id: None,
                },
            ),
            "now",
        )
        .unwrap();
    let worked = crate::team::tests::stage_done(c, &t);
    let done = c
        .try_apply(
            &by(
                "m",
                TaskInstruction::FinishTask {
                    task_id: t.clone(),
                    task_summary: format!("{name} is done\nmore detail"),
                    outcome: TaskOutcome::Finished,
                    summary_written: None,
                },
            ),
            "now",
        )
        .unwrap();
    (t, [added.changes, worked, done.changes].concat())
}

#[test]
fn finished_tasks_past_retention_leave_memory_as_one_line_summaries() {
    let retention = Retention {
        finished_tasks: 2,
        ..Retention::default()
    };
    let mut c = core().with_retention(retention);
    let mut reader = crate::event::States::default();
    for ch in c.initial_changes() {
        reader.apply(&ch);
    }
    let mut ids = Vec::new();
    for name in ["t1", "t2", "t3", "t4"] {
        let (t, changes) = finished_task(&mut c, name);
        for ch in &changes {
            reader.apply(ch);
        }
        ids.push(t);
    }
    assert!(c.task(&ids[0]).is_none() && c.task(&ids[1]).is_none());
    assert!(c.task(&ids[2]).is_some() && c.task(&ids[3]).is_some());
    assert!(
        c.task(c.base_task()).is_some(),
        "the base task never leaves"
    );
    assert_eq!(reader.tasks.len(), 3, "the reader follows: base, t3, t4");
    let lines: Vec<_> = reader.summaries().collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0].task_name, "t1");
    assert_eq!(
        lines[0].summary, "t1 is done",
        "the first line of the summary"
    );
    // A message into an evicted task is refused like one into any unknown task.
    let m = Message::notice(
        ids[0].clone(),
        "m".into(),
        vec!["a".into()],
        StageRef::NoRelative,
        "hi".into(),
    );
    assert_eq!(
        c.submit(m).unwrap_err(),
        SyncError::UnknownTask(ids[0].clone())
    );
}

#[test]
fn shared_pools_are_trimmed_in_batches_and_count_what_left() {
    let retention = Retention {
        shared_pool_entries: 100,
        ..Retention::default()
    };
    let mut c = core().with_retention(retention);
    let base = c.base_task().clone();
    let mut trims = 0;
    for i in 0..250 {
        let m = Message::notice(
            base.clone(),
            "m".into(),
            vec!["a".into()],
            StageRef::NoRelative,
            format!("m{i}"),
        );
        trims += c
            .record_sent(m, "now")
            .2
            .iter()
            .filter(|ch| matches!(ch, Change::Task(TaskChange::Trimmed { .. })))
            .count();
    }
    let t = c.task(&base).unwrap();
    assert!(
        t.shared_conversation_pool.len() <= 116,
        "{}",
        t.shared_conversation_pool.len()
    );
    assert_eq!(
        t.shared_conversation_pool.len() as u64 + t.shared_conversation_omitted,
        250,
        "every message is kept or counted"
    );
    assert_eq!(
        t.shared_conversation_pool.back().unwrap().message.message,
        "m249"
    );
    // Trimmed in batches of 17 (16 over the cap, and one), not once per message.
    assert_eq!(
        trims as u64 * 17,
        t.shared_conversation_omitted,
        "{trims} trims"
    );
}

#[test]
fn a_message_over_the_teams_size_limit_is_refused() {
    let retention = Retention {
        message_chars: 5,
        ..Retention::default()
    };
    let mut c = core().with_retention(retention);
    let base = c.base_task().clone();
    let m = |text: &str| {
        Message::notice(
            base.clone(),
            "m".into(),
            vec!["a".into()],
            StageRef::NoRelative,
            text.into(),
        )
    };
    assert!(c.submit(m("héllo")).is_ok(), "characters, not bytes");
    let why = c.submit(m("hello!")).unwrap_err().to_string();
    assert!(
        why.contains("6 characters") && why.contains("limit of 5"),
        "{why}"
    );
}

#[test]
fn notices_to_the_manager_name_a_few_agents_and_count_the_rest() {
    let roster: Vec<Member> = std::iter::once(Member::new("m", "manager"))
        .chain((0..50).map(|i| Member::new(format!("w{i:02}"), "worker")))
        .collect();
    let task = TaskState::new("t".into(), "n".into(), "i".into(), "m".into());
    let created = notices::task_created(&task, &roster, &crate::texts::Texts::english());
    assert!(created.message.contains("`w28`") && !created.message.contains("`w29`"));
    assert!(
        created.message.contains("… and 21 more agents"),
        "{}",
        created.message
    );
    let mut stage = StageState::new(
        "t".into(),
        "all".into(),
        roster[1..]
            .iter()
            .map(|m| (m.id.clone(), "go".to_owned()))
            .collect(),
    );
    for m in &roster[1..] {
        stage.completion_summary.insert(m.id.clone(), "done".into());
    }
    let done = notices::stage_complete(&task, &stage, &crate::texts::Texts::english());
    assert!(
        done.message.contains("… and 20 more agents"),
        "{}",
        done.message
    );
    assert!(
        done.message.len() < 4_000,
        "bounded: {} bytes",
        done.message.len()
    );
}

/// A message of `kb` kilobytes from `from` in `task`.
fn big(task: &TaskId, from: &str, kb: usize) -> Message {
    Message::notice(
        task.clone(),
        from.into(),
        vec!["m".into()],
        StageRef::NoRelative,
        "x".repeat(kb * 1024),
    )
}

#[test]
fn a_pool_is_held_to_its_bytes_whatever_its_count_allows() {
    // 64 KiB for a task's pools: eight 16 KiB messages fill them.
    let retention = Retention {
        memory: crate::config::MemoryBudget {
            bytes: (64 * 64) << 10,
        },
        ..Retention::default()
    };
    let mut c = core().with_retention(retention);
    let base = c.base_task().clone();
    for _ in 0..40 {
        c.record_sent(big(&base, "m", 16), "now");
    }
    let t = c.task(&base).unwrap();
    let held: usize = t
        .shared_conversation_pool
        .iter()
        .map(|e| e.message.held_bytes())
        .sum();
    assert!(held <= 64 << 10, "{held} bytes kept");
    assert!(t.shared_conversation_pool.len() >= 3);
    assert_eq!(
        t.shared_conversation_pool.len() as u64 + t.shared_conversation_omitted,
        40,
        "every message is kept or counted"
    );
    assert_eq!(c.pool_bytes().0, held, "the running sum is what is held");
}

#[test]
fn past_the_pools_share_finished_tasks_leave_early_and_open_work_refuses_a_persons_message() {
    // 256 KiB in all: a task's pools hold 4 KiB, all pools 128 KiB.
    let roster = ["m", "a", "p"]
        .iter()
        .map(|id| Member {
            human: *id == "p",
            ..Member::new(*id, "r")
        })
        .collect();
    let mut c = SyncCore::new(roster, &["m".into()], &["p".into()])
        .with_retention(Retention {
            memory: crate::config::MemoryBudget { bytes: 256 << 10 },
            ..Retention::default()
        })
        .with_task_limits(crate::config::TaskLimits {
            tasks_per_goal: 1000,
            open_tasks: 1000,
            ..Default::default()
        });
    let mut finished = Vec::new();
    for i in 0..80 {
        let (t, _) = finished_task(&mut c, &format!("done{i}"));
        for _ in 0..2 {
            c.record_sent(big(&t, "m", 3), "now");
        }
        finished.push(t);
    }
    assert!(c.pool_bytes().0 <= 128 << 10, "{:?}", c.pool_bytes());
    assert!(
        c.task(&finished[0]).is_none(),
        "the oldest finished tasks left before their count (100) said so"
    );
    assert!(c.task(&finished[79]).is_some());
    // Open tasks that fill the pools' share: a person's message waits, an agent's still goes.
    for i in 0..40 {
        let t = TaskId::from(format!("open{i}").as_str());
        c.try_apply(
            &by(
                "m",
                TaskInstruction::AddTask {
                    attachments: Vec::new(),
                    task_id: t.clone(),
                    task_name: "n".into(),
                    task_intention: "i".into(),
                    requested_by: None,
                    goal_step: None,
                    trace_id: None,
                },
            ),
            "now",
        )
        .unwrap();
        for _ in 0..2 {
            c.record_sent(big(&t, "m", 3), "now");
        }
    }
    let base = c.base_task().clone();
    let e = c.submit(big(&base, "p", 3)).unwrap_err();
    assert!(matches!(e, SyncError::MemoryFull { .. }), "{e}");
    assert!(e.to_string().contains("retention.memory_mib"));
    assert!(c.submit(big(&base, "m", 3)).is_ok());
}
