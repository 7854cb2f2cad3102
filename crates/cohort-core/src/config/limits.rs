//! The limits a long-running team is held to, from the team file: what it keeps in memory
//! (`retention:`), its websocket feeds (`feeds:`) and how long a login lasts
//! (`session_ttl_hours`), how far an agent may go on in a stage (`step_limits:`), how long a
//! wait for a reply lasts (`waits:`), what its store keeps (`store:`). Each value out of its
//! range is a problem naming its field.

use super::agent::Findings;
use super::raw::{RawFeeds, RawRetention, RawStepLimits, RawStore, RawTaskLimits, RawWaits};
use crate::state::StepLimits;
use crate::state::WaitPatience;
use std::fmt::Display;
use std::path::Path;
use std::time::Duration;

/// Default of how many shared-info lines and conversation entries a task keeps in memory.
pub const SHARED_POOL_KEPT: usize = 1_000;

/// The longest wait a person may ask for (`wait_secs`): thirty days.
pub const MAX_WAIT_SECS: u64 = 30 * 24 * 60 * 60;

/// How long a token stays valid after the login that made it, unless the team file says
/// otherwise (`session_ttl_hours`).
pub const SESSION_TTL: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// What a team that runs for months keeps in memory (`retention:` in the team file).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retention {
    /// Finished (or failed) tasks kept in full; older ones leave memory, leaving a one-line
    /// summary (default 100).
    pub finished_tasks: usize,
    /// Entries of each shared pool (info, conversation) a task keeps (default 1,000).
    pub shared_pool_entries: usize,
    /// The longest message text accepted, in characters (default 16,384).
    pub message_chars: usize,
    /// The longest text a step keeps (an intention, a result, a tool's arguments), in
    /// characters; longer text is cut in the middle, the cut said (default 65,536).
    pub step_chars: usize,
    /// What the team keeps in memory of its work, in bytes (`memory_mib`, default 256 MiB):
    /// the budget every byte cap below is a share of (see [`MemoryBudget`]).
    pub memory: MemoryBudget,
    /// What the store keeps of each agent's recorded model calls (each request and reply
    /// whole, for replay), in bytes: its newest calls within it (`recorded_calls_mib`, default
    /// 16 MiB; 0 records none).
    pub recorded_call_bytes: u64,
}

/// The one memory budget of a team, in bytes, and the share of it each kind of data that grows
/// with use may hold. Count caps alone (1,000 messages a pool) bound nothing when one message
/// may be 64 KB: every collection that grows with what people and models write is held to
/// bytes as well, and all of them together to the budget. What leaves memory stays in the
/// store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryBudget {
    /// The budget in bytes (`retention.memory_mib` MiB).
    pub bytes: usize,
}

impl MemoryBudget {
    /// The default budget: 256 MiB of live state.
    pub const DEFAULT_MIB: usize = 256;
    /// The smallest budget accepted, in MiB: below it a pool holds less than one long message.
    pub const MIN_MIB: usize = 16;

    /// A budget of `mib` MiB.
    pub fn mib(mib: usize) -> Self {
        MemoryBudget { bytes: mib << 20 }
    }

    /// The most one task's shared pools (conversation and info, together) hold: 1/64.
    pub fn task_pools(&self) -> usize {
        self.bytes / 64
    }

    /// The most every task's pools hold in all: half. Past it, finished tasks leave memory
    /// before their count says so, and a person's new message waits (503) while open work
    /// alone is over it.
    pub fn all_pools(&self) -> usize {
        self.bytes / 2
    }

    /// The most readers keep of steps that left their agent (history), over all tasks: 1/32
    /// (every step stays in the store).
    pub fn retired_steps(&self) -> usize {
        self.bytes / 32
    }

    /// The most the live feed's backlog (events a slow websocket reader has not read) holds:
    /// 1/32.
    pub fn feed(&self) -> usize {
        self.bytes / 32
    }

    /// The most the steps queued for one agent may hold before a person's message to it waits
    /// (503): 1/64.
    pub fn agent_queue(&self) -> usize {
        self.bytes / 64
    }

    /// The most one of a person's private conversations holds: 1/128.
    pub fn private_chat(&self) -> usize {
        self.bytes / 128
    }
}

impl Default for MemoryBudget {
    fn default() -> Self {
        MemoryBudget::mib(Self::DEFAULT_MIB)
    }
}

/// How much work the team's models may open, whatever they answer (`task_limits:` in the team
/// file). A model that answers every notice with another action would otherwise open work
/// without end; these are counted and refused by SyncState, not asked of the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskLimits {
    /// Tasks open at once in the team (default 128): a backstop; what a model may open is held
    /// first by the base-task rule and the allowance per goal.
    pub open_tasks: usize,
    /// Tasks the managers may open for each message of a person in the base task (default 8).
    pub tasks_per_goal: usize,
    /// Stages one task may have in all, added or retried (default 24).
    pub stages_per_task: usize,
    /// Messages agents may send in the base task after a person last wrote there (default
    /// 64): two managers answering each other there would never stop.
    pub base_messages_per_goal: usize,
}

impl Default for TaskLimits {
    fn default() -> Self {
        TaskLimits {
            open_tasks: 128,
            tasks_per_goal: 8,
            stages_per_task: 24,
            base_messages_per_goal: 64,
        }
    }
}

/// The websocket monitor feeds of `cohort serve` (`feeds:` in the team file).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Feeds {
    /// Open feeds one person may have at once (tabs, devices; default 8).
    pub per_human: usize,
    /// Open feeds in all (default 256).
    pub total: usize,
    /// The shortest time between two frames of one feed: changes that come sooner go out
    /// together (default 2 ms; 0 sends each wake-up at once).
    pub frame_interval: Duration,
    /// How long a frame may wait for a client before it counts as stalled and is
    /// disconnected (default 10 s).
    pub send_timeout: Duration,
    /// How often a feed pings its client (default 30 s). A client that has sent nothing, not
    /// even a pong, for three of these is gone (its connection broke without a close: a
    /// laptop shut, a network cut) and is disconnected, so it holds no feed for ever.
    pub ping: Duration,
}

impl Default for Feeds {
    fn default() -> Self {
        Feeds {
            per_human: 8,
            total: 256,
            frame_interval: Duration::from_millis(2),
            send_timeout: Duration::from_secs(10),
            ping: Duration::from_secs(30),
        }
    }
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            finished_tasks: 100,
            shared_pool_entries: SHARED_POOL_KEPT,
            message_chars: 16 * 1024,
            step_chars: crate::state::DEFAULT_STEP_CHARS,
            memory: MemoryBudget::default(),
            recorded_call_bytes: (RECORDED_CALLS_MIB as u64) << 20,
        }
    }
}

/// What the store keeps beyond what recovery needs, and how often it is compacted (`store:` in
/// the team file). Recovery needs the newest snapshot and the events after it, which are never
/// pruned; the events the snapshot covers are kept a while longer for `cohort export`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Compaction {
    /// How long events a snapshot covers are kept (default 24 hours; 0: pruned at the next
    /// compaction).
    pub keep_events: Duration,
    /// The most bytes of such events kept, however young: the oldest go first (default 64 MB),
    /// so a flood of messages cannot fill the disk within the window.
    pub keep_events_bytes: u64,
    /// How often the running team compacts its store (default every 60 s; the first a few
    /// seconds after the start).
    pub every: Duration,
}

impl Default for Compaction {
    fn default() -> Self {
        Compaction {
            keep_events: Duration::from_secs(24 * 3600),
            keep_events_bytes: 64 * MB,
            every: Duration::from_secs(60),
        }
    }
}

const MB: u64 = 1024 * 1024;
/// The longest `store.keep_events_hours` accepted (ten years).
const MAX_KEEP_EVENTS_HOURS: u64 = 87_600;
/// The largest `store.keep_events_mb` accepted (a terabyte).
const MAX_KEEP_EVENTS_MB: u64 = 1 << 20;
/// The longest `store.compact_every_s` accepted (a day).
const MAX_COMPACT_EVERY_S: u64 = 86_400;

/// The longest `session_ttl_hours` accepted (ten years).
const MAX_SESSION_HOURS: u64 = 87_600;
/// The longest `feeds.frame_interval_ms` accepted (a console a second behind is already late).
const MAX_FRAME_INTERVAL_MS: u64 = 1_000;

/// `v` when it lies in `min..=max` (no upper bound without `max`); otherwise the default,
/// with the problem noted under `field`.
pub fn bounded<T: PartialOrd + Copy + Display>(
    out: &mut Findings,
    file: &Path,
    field: &str,
    v: Option<T>,
    (min, max): (T, Option<T>),
    default: T,
) -> T {
    let Some(v) = v else { return default };
    if v >= min && max.is_none_or(|m| v <= m) {
        return v;
    }
    let why = match max {
        Some(m) => format!("must be from {min} to {m}"),
        None => format!("must be at least {min}"),
    };
    out.add(file, field, why);
    default
}

/// The store's default share of recorded model calls per agent, in MiB.
pub const RECORDED_CALLS_MIB: usize = 16;

/// The retention settings; a zero is refused (it would keep nothing), except where it means
/// "record none".
pub(super) fn retention(r: RawRetention, file: &Path, out: &mut Findings) -> Retention {
    let d = Retention::default();
    let mut pick = |v: Option<usize>, field: &str, default: usize| {
        bounded(
            out,
            file,
            &format!("retention.{field}"),
            v,
            (1, None),
            default,
        )
    };
    Retention {
        finished_tasks: pick(r.finished_tasks, "finished_tasks", d.finished_tasks),
        shared_pool_entries: pick(
            r.shared_pool_entries,
            "shared_pool_entries",
            d.shared_pool_entries,
        ),
        message_chars: pick(r.message_chars, "message_chars", d.message_chars),
        step_chars: pick(r.step_chars, "step_chars", d.step_chars),
        memory: MemoryBudget::mib(bounded(
            out,
            file,
            "retention.memory_mib",
            r.memory_mib,
            (MemoryBudget::MIN_MIB, None),
            MemoryBudget::DEFAULT_MIB,
        )),
        recorded_call_bytes: (bounded(
            out,
            file,
            "retention.recorded_calls_mib",
            r.recorded_calls_mib,
            (0, Some(1 << 16)),
            RECORDED_CALLS_MIB,
        ) as u64)
            << 20,
    }
}

/// The limits on work models may open; a zero would refuse all work, so it is refused.
pub(super) fn task_limits(r: RawTaskLimits, file: &Path, out: &mut Findings) -> TaskLimits {
    let d = TaskLimits::default();
    let mut pick = |v: Option<usize>, field: &str, default: usize| {
        bounded(
            out,
            file,
            &format!("task_limits.{field}"),
            v,
            (1, None),
            default,
        )
    };
    TaskLimits {
        open_tasks: pick(r.open_tasks, "open_tasks", d.open_tasks),
        tasks_per_goal: pick(r.tasks_per_goal, "tasks_per_goal", d.tasks_per_goal),
        stages_per_task: pick(r.stages_per_task, "stages_per_task", d.stages_per_task),
        base_messages_per_goal: pick(
            r.base_messages_per_goal,
            "base_messages_per_goal",
            d.base_messages_per_goal,
        ),
    }
}

/// The feed limits; no connections or a zero timeout is refused, and so is a frame interval
/// past [`MAX_FRAME_INTERVAL_MS`].
pub(super) fn feeds(r: RawFeeds, file: &Path, out: &mut Findings) -> Feeds {
    let d = Feeds::default();
    let mut at_least_one = |v: Option<u64>, field: &str, default: u64| {
        bounded(out, file, &format!("feeds.{field}"), v, (1, None), default)
    };
    let per_human = at_least_one(
        r.per_human.map(|n| n as u64),
        "per_human",
        d.per_human as u64,
    );
    let total = at_least_one(r.total.map(|n| n as u64), "total", d.total as u64);
    let send_timeout = at_least_one(r.send_timeout_s, "send_timeout_s", d.send_timeout.as_secs());
    let ping = at_least_one(r.ping_s, "ping_s", d.ping.as_secs());
    let frame_interval = bounded(
        out,
        file,
        "feeds.frame_interval_ms",
        r.frame_interval_ms,
        (0, Some(MAX_FRAME_INTERVAL_MS)),
        d.frame_interval.as_millis() as u64,
    );
    Feeds {
        per_human: per_human as usize,
        total: total as usize,
        frame_interval: Duration::from_millis(frame_interval),
        send_timeout: Duration::from_secs(send_timeout),
        ping: Duration::from_secs(ping),
    }
}

/// How far one agent may go on in one stage; zero would stop every step, so it is refused.
pub(super) fn step_limits(r: RawStepLimits, file: &Path, out: &mut Findings) -> StepLimits {
    let d = StepLimits::default();
    let mut pick = |v: Option<usize>, field: &str, default: usize| {
        bounded(
            out,
            file,
            &format!("step_limits.{field}"),
            v,
            (1, None),
            default,
        )
    };
    let per_stage = pick(r.per_stage, "per_stage", d.per_stage);
    let repeats = pick(r.repeats, "repeats", d.repeats);
    let reflections = pick(r.reflections, "reflections", d.reflections);
    let parallel_steps = bounded(
        out,
        file,
        "step_limits.parallel_steps",
        r.parallel_steps,
        (1, Some(64)),
        d.parallel_steps,
    );
    let parallel_tool_calls = bounded(
        out,
        file,
        "step_limits.parallel_tool_calls",
        r.parallel_tool_calls,
        (1, Some(64)),
        d.parallel_tool_calls,
    );
    // No questions at all is a choice (0), unlike no steps.
    let asks = bounded(out, file, "step_limits.asks", r.asks, (0, None), d.asks);
    let mut budget = |v: Option<u64>, field: &str| {
        v.map(|n| {
            bounded(
                out,
                file,
                &format!("step_limits.{field}"),
                Some(n),
                (1, None),
                1,
            )
        })
    };
    StepLimits {
        per_stage,
        repeats,
        task_tokens: budget(r.task_tokens, "task_tokens"),
        task_steps: budget(r.task_steps, "task_steps"),
        asks,
        reflections,
        parallel_tool_calls,
        parallel_steps,
        // No replan at all is a choice (0): the plan runs as first made.
        replans: bounded(
            out,
            file,
            "step_limits.replans",
            r.replans,
            (0, None),
            d.replans,
        ),
    }
}

/// How long a wait for a reply lasts, by who owes it (`waits:`): from a second to
/// [`MAX_WAIT_SECS`](MAX_WAIT_SECS). Which agents are people is filled in when
/// the team starts.
pub(super) fn waits(r: RawWaits, file: &Path, out: &mut Findings) -> WaitPatience {
    let d = WaitPatience::default();
    let mut pick = |v: Option<u64>, field: &str, default: Duration| {
        Duration::from_secs(bounded(
            out,
            file,
            &format!("waits.{field}"),
            v,
            (1, Some(MAX_WAIT_SECS)),
            default.as_secs(),
        ))
    };
    WaitPatience {
        human: pick(r.human_secs, "human_secs", d.human),
        agent: pick(r.agent_secs, "agent_secs", d.agent),
        model: pick(r.model_secs, "model_secs", d.model),
        stall: pick(r.stall_secs, "stall_secs", d.stall),
        humans: d.humans,
    }
}

/// What the store keeps and how often it is compacted; keeping nothing extra (0) is a choice,
/// compacting all the time (0 s) is not.
pub(super) fn compaction(r: RawStore, file: &Path, out: &mut Findings) -> Compaction {
    let d = Compaction::default();
    let hours = bounded(
        out,
        file,
        "store.keep_events_hours",
        r.keep_events_hours,
        (0, Some(MAX_KEEP_EVENTS_HOURS)),
        d.keep_events.as_secs() / 3600,
    );
    let mb = bounded(
        out,
        file,
        "store.keep_events_mb",
        r.keep_events_mb,
        (0, Some(MAX_KEEP_EVENTS_MB)),
        d.keep_events_bytes / MB,
    );
    let every = bounded(
        out,
        file,
        "store.compact_every_s",
        r.compact_every_s,
        (1, Some(MAX_COMPACT_EVERY_S)),
        d.every.as_secs(),
    );
    Compaction {
        keep_events: Duration::from_secs(hours * 3600),
        keep_events_bytes: mb * MB,
        every: Duration::from_secs(every),
    }
}

/// How long a login lasts: `session_ttl_hours`, from an hour to ten years.
pub(super) fn session_ttl(hours: Option<u64>, file: &Path, out: &mut Findings) -> Duration {
    let default = SESSION_TTL.as_secs() / 3600;
    let h = bounded(
        out,
        file,
        "session_ttl_hours",
        hours,
        (1, Some(MAX_SESSION_HOURS)),
        default,
    );
    Duration::from_secs(h * 3600)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::load_team;
    use crate::config::test_files::{tmp, write};

    #[test]
    fn retention_and_feed_limits_are_read_and_zeros_refused() {
        let d = tmp("limits");
        let head = "llm: {provider: openai, model: m}\nagents:\n  - {id: m, role: manager, skills: [task_manager]}\n";
        let t = load_team(&write(&d, "default.yaml", head)).unwrap();
        assert_eq!(t.retention, Retention::default());
        assert_eq!(t.feeds, Feeds::default());
        assert_eq!(t.session_ttl, SESSION_TTL);
        assert_eq!(t.step_limits, StepLimits::default());
        assert_eq!(t.waits, WaitPatience::default());
        assert_eq!(t.store, Compaction::default());
        let store = format!(
            "{head}store: {{keep_events_hours: 0, keep_events_mb: 5, compact_every_s: 7}}\n"
        );
        let t = load_team(&write(&d, "store.yaml", &store)).unwrap();
        assert_eq!(
            t.store,
            Compaction {
                keep_events: Duration::ZERO,
                keep_events_bytes: 5 * 1024 * 1024,
                every: Duration::from_secs(7),
            }
        );
        let bad = format!("{head}store: {{compact_every_s: 0, keep_events_hours: 100000}}\n");
        let problems = load_team(&write(&d, "store-bad.yaml", &bad))
            .unwrap_err()
            .problems();
        let fields: Vec<_> = problems.iter().map(|p| p.field.as_str()).collect();
        assert_eq!(fields, ["store.keep_events_hours", "store.compact_every_s"]);
        let waits = format!("{head}waits: {{human_secs: 90, agent_secs: 5}}\n");
        let t = load_team(&write(&d, "waits.yaml", &waits)).unwrap();
        assert_eq!(
            (t.waits.human, t.waits.agent),
            (Duration::from_secs(90), Duration::from_secs(5))
        );
        let never = format!("{head}waits: {{agent_secs: 0}}\n");
        let e = load_team(&write(&d, "never.yaml", &never))
            .unwrap_err()
            .to_string();
        assert!(e.contains("waits.agent_secs"), "{e}");
        let capped = format!(
            "{head}step_limits: {{per_stage: 7, repeats: 2, task_tokens: 50000, task_steps: 90}}\n"
        );
        let t = load_team(&write(&d, "capped.yaml", &capped)).unwrap();
        assert_eq!((t.step_limits.per_stage, t.step_limits.repeats), (7, 2));
        assert_eq!(
            (t.step_limits.task_tokens, t.step_limits.task_steps),
            (Some(50000), Some(90))
        );
        let zero = format!("{head}step_limits: {{per_stage: 0}}\n");
        let e = load_team(&write(&d, "zero.yaml", &zero))
            .unwrap_err()
            .to_string();
        assert!(e.contains("step_limits.per_stage"), "{e}");
        let set = format!(
            "{head}retention: {{step_chars: 100, message_chars: 50}}\nfeeds: {{per_human: 2, total: 9, frame_interval_ms: 0, send_timeout_s: 3, ping_s: 5}}\nsession_ttl_hours: 2\n"
        );
        let t = load_team(&write(&d, "set.yaml", &set)).unwrap();
        assert_eq!(
            (t.retention.step_chars, t.retention.message_chars),
            (100, 50)
        );
        assert_eq!(t.session_ttl, Duration::from_secs(7_200));
        assert_eq!(
            t.feeds,
            Feeds {
                per_human: 2,
                total: 9,
                frame_interval: Duration::ZERO,
                send_timeout: Duration::from_secs(3),
                ping: Duration::from_secs(5),
            }
        );
        let zeros = format!(
            "{head}retention: {{step_chars: 0}}\nfeeds: {{per_human: 0, total: 0, send_timeout_s: 0, colour: 1}}\n"
        );
        let problems = load_team(&write(&d, "zeros.yaml", &zeros))
            .unwrap_err()
            .problems();
        assert!(problems[0].message.contains("colour"), "{problems:?}");
        let zeros = format!(
            "{head}retention: {{step_chars: 0}}\nfeeds: {{per_human: 0, total: 0, send_timeout_s: 0, ping_s: 0, frame_interval_ms: 999999999999}}\nsession_ttl_hours: 99999999999999\n"
        );
        let problems = load_team(&write(&d, "zeros2.yaml", &zeros))
            .unwrap_err()
            .problems();
        let fields: Vec<_> = problems.iter().map(|p| p.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "retention.step_chars",
                "feeds.per_human",
                "feeds.total",
                "feeds.send_timeout_s",
                "feeds.ping_s",
                "feeds.frame_interval_ms",
                "session_ttl_hours"
            ]
        );
    }

    #[test]
    fn tool_approval_is_read_for_the_team_and_each_agent() {
        use crate::policy::{ApprovalPolicy, Risk};
        let d = tmp("approval");
        let t = load_team(&write(
            &d,
            "approval.yaml",
            "llm: {provider: openai, model: m}\ntool_approval: {auto_run_up_to: low}\nagents:\n  - {id: m, role: manager, skills: [task_manager]}\n  - {id: w, role: w, skills: [think], tool_approval: {auto_run_up_to: none}}\n",
        ))
        .unwrap();
        let low = ApprovalPolicy {
            auto_run_up_to: Some(Risk::Low),
            ..Default::default()
        };
        assert_eq!(t.tool_approval, low);
        assert_eq!(t.agents[0].tool_approval, low, "the team's, unless its own");
        assert_eq!(t.agents[1].tool_approval.auto_run_up_to, None);
        let bad = "llm: {provider: openai, model: m}\ntool_approval: {auto_run_up_to: sometimes}\nagents:\n  - {id: m, role: manager, skills: [task_manager]}\n";
        let e = load_team(&write(&d, "bad.yaml", bad))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("tool_approval") && e.contains("sometimes"),
            "{e}"
        );
    }

    #[test]
    fn by_default_an_operator_confirms_medium_and_high_calls_and_without_one_they_run() {
        use crate::policy::Risk;
        let d = tmp("approval-default");
        let team = |humans: &str, approval: &str| {
            let text = format!(
                "llm: {{provider: openai, model: m}}\n{approval}{humans}agents:\n  - {{id: m, role: manager, skills: [task_manager]}}\n  - {{id: w, role: w, skills: [think], tool_approval: {{check_plans: true}}}}\n"
            );
            load_team(&write(&d, "t.yaml", &text)).unwrap()
        };
        let operator = "humans:\n  - {id: op, role: operator, access: operator, password_hash: \"$argon2id$v=19$m=19456,t=2,p=1$jUcQy16DUfKKGV/lL6/6jw$aSPXFXbbjz70sKV8AbvLk3wWNpKjUlg5S0r0DZiRjNI\"}\n";
        let member = "humans:\n  - {id: guest, role: guest, password_hash: \"$argon2id$v=19$m=19456,t=2,p=1$jUcQy16DUfKKGV/lL6/6jw$aSPXFXbbjz70sKV8AbvLk3wWNpKjUlg5S0r0DZiRjNI\"}\n";
        let t = team(operator, "");
        assert_eq!(t.tool_approval.auto_run_up_to, Some(Risk::Low));
        assert_eq!(t.agents[1].tool_approval.auto_run_up_to, Some(Risk::Low));
        assert!(
            t.agents[1].tool_approval.check_plans,
            "its own setting kept"
        );
        for nobody in [member, ""] {
            let t = team(nobody, "");
            assert_eq!(t.agents[0].tool_approval.auto_run_up_to, Some(Risk::High));
        }
        let t = team(operator, "tool_approval: {auto_run_up_to: high}\n");
        assert_eq!(
            t.agents[0].tool_approval.auto_run_up_to,
            Some(Risk::High),
            "one line away"
        );
    }
}
