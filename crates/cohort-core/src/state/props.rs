//! Property test of an agent's step queue, working memory and step lock: thousands of seeded
//! random sequences of what the agent actor does, each checked after every operation against
//! a plain model. A failure names its seed and the operations that led to it; set
//! `COHORT_PROPS_SEED=<seed>` to rerun just that sequence.

use super::{Agent, AgentState, Executor, Skill, StepExecutionState, StepState, WorkingState};
use crate::ids::{AgentId, NO_RELATIVE, StageRef, TaskId, WaitId};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::fmt;
use std::sync::OnceLock;

mod model;
use model::{Model, Phase};

const SEQUENCES: u64 = 2000;
const OPS_PER_SEQUENCE: usize = 32;
const BASE_SEED: u64 = 0xC0_4027;
const TASKS: [&str; 3] = ["base", "t1", "t2"];
/// The same stage names in every task, so finishing `t1/s1` must leave `t2/s1` alone.
const STAGES: [&str; 3] = ["s1", "s2", "s3"];
/// The stage index that stands for `no_relative`.
const NO_STAGE: usize = STAGES.len();

/// A task and a stage (or `no_relative`) by index; their ids are made once, as allocating
/// them for every random operation would dominate a debug build's run time.
#[derive(Clone, Copy, PartialEq)]
struct Work {
    task: usize,
    stage: usize,
}

impl Work {
    fn all() -> impl Iterator<Item = Work> {
        (0..TASKS.len()).flat_map(|task| (0..=NO_STAGE).map(move |stage| Work { task, stage }))
    }

    fn stage_name(self) -> &'static str {
        STAGES.get(self.stage).copied().unwrap_or(NO_RELATIVE)
    }

    fn ids(self) -> (&'static TaskId, &'static StageRef) {
        static IDS: OnceLock<Vec<(TaskId, StageRef)>> = OnceLock::new();
        let ids = IDS.get_or_init(|| {
            let ids = |w: Work| (TASKS[w.task].into(), StageRef::parse(w.stage_name()));
            Work::all().map(ids).collect()
        });
        let (t, s) = &ids[self.task * (NO_STAGE + 1) + self.stage];
        (t, s)
    }
}

impl fmt::Debug for Work {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", TASKS[self.task], self.stage_name())
    }
}

#[derive(Debug)]
enum Op {
    /// `add_steps`: steps for these tasks and stages, appended.
    Add(Vec<Work>),
    /// `add_next_steps`: inserted before the next pending step.
    AddNext(Vec<Work>),
    /// The actor starts the next step when none runs and its step lock is empty.
    StartNext,
    /// The running step's call ended and SyncState answered (`settle_step`, then the actor's
    /// removal of a step that is no longer held).
    Settle {
        failed: bool,
    },
    FinishStage(Work),
    FinishTask(usize),
    /// `update_working_memory {task_id, stage_id}`; `with_stage: false` sends no stage id.
    Note {
        work: Work,
        with_stage: bool,
    },
    /// The running step sent a message and waits for `n` replies.
    Hold(usize),
    /// A reply returns the wait id at this index (mod the number held), or an unknown id.
    Release(usize),
}

/// The work a finish_stage or finish_task ends: a task, and one stage or (None) all of it.
type Finish = (usize, Option<usize>);

impl Op {
    fn finished(&self) -> Option<Finish> {
        match *self {
            Op::FinishStage(w) => Some((w.task, Some(w.stage))),
            Op::FinishTask(t) => Some((t, None)),
            _ => None,
        }
    }
}

fn finish_ids((task, stage): Finish) -> (&'static TaskId, Option<&'static StageRef>) {
    let (t, s) = Work {
        task,
        stage: stage.unwrap_or(0),
    }
    .ids();
    (t, stage.map(|_| s))
}

fn random_work(rng: &mut StdRng) -> Work {
    Work {
        task: rng.random_range(0..TASKS.len()),
        stage: rng.random_range(0..=NO_STAGE),
    }
}

fn random_op(rng: &mut StdRng) -> Op {
    let works = |rng: &mut StdRng| {
        (0..rng.random_range(1..=3))
            .map(|_| random_work(rng))
            .collect()
    };
    match rng.random_range(0..100) {
        0..20 => Op::Add(works(rng)),
        20..32 => Op::AddNext(works(rng)),
        32..52 => Op::StartNext,
        52..67 => Op::Settle {
            failed: rng.random_bool(0.2),
        },
        // finish_stage always names a real stage.
        67..76 => Op::FinishStage(Work {
            task: rng.random_range(0..TASKS.len()),
            stage: rng.random_range(0..NO_STAGE),
        }),
        76..79 => Op::FinishTask(rng.random_range(0..TASKS.len())),
        79..85 => Op::Note {
            work: random_work(rng),
            with_stage: rng.random_bool(0.5),
        },
        85..91 => Op::Hold(rng.random_range(1..=2)),
        _ => Op::Release(rng.random_range(0..4)),
    }
}

/// Every new step is a copy of this one with its own ids (a fresh `StepState::new` would make
/// a random uuid per step, only to be replaced by a readable id).
fn blank_step() -> StepState {
    static BLANK: OnceLock<StepState> = OnceLock::new();
    let blank = BLANK.get_or_init(|| {
        let think = Executor::Skill(Skill::Think);
        StepState::new(
            TASKS[0].into(),
            StageRef::NoRelative,
            "a".into(),
            think,
            "",
            "",
        )
    });
    blank.clone()
}

/// Applies one operation to the agent and the model alike; Err on a disagreement seen while
/// doing so (the full state is compared afterwards by [`check`]).
fn apply(agent: &mut Agent, model: &mut Model, op: &Op) -> Result<(), String> {
    match op {
        Op::Add(works) => {
            let (states, steps) = model.new_steps(works);
            model.steps.extend(steps);
            agent.add_steps(states);
        }
        Op::AddNext(works) => {
            let (states, steps) = model.new_steps(works);
            let at = model
                .steps
                .iter()
                .position(|s| s.phase == Phase::Pending)
                .unwrap_or(model.steps.len());
            model.steps.splice(at..at, steps);
            agent.add_next_steps(states);
        }
        Op::StartNext => {
            if model.running().is_some() || !model.waits.is_empty() {
                return Ok(());
            }
            let expected = model.pending().next().map(|s| s.id.clone());
            let got = agent.start_next().map(|s| s.step_id.clone());
            if got != expected {
                return Err(format!("start_next ran {got:?}, expected {expected:?}"));
            }
            if let Some(id) = got {
                let s = model.steps.iter_mut().find(|s| s.id == id).unwrap();
                s.phase = Phase::Running;
                model.started.push(id);
            }
        }
        Op::Settle { failed } => {
            let Some(run) = model.running() else {
                return Ok(());
            };
            let id = run.id.clone();
            let (task, stage) = run.work.ids();
            let cut_loose = model.cut_loose.as_ref() == Some(&id);
            // What complete_step asks before acting on the step's answer.
            let held = agent.holds(task, stage);
            if held == cut_loose {
                return Err(format!(
                    "holds({task}, {stage}) is {held} for running {id}, which is {}",
                    if cut_loose { "cut loose" } else { "held" }
                ));
            }
            agent.agent_step.get(&id).ok_or("running step missing")?;
            let state = if *failed {
                StepExecutionState::Failed
            } else {
                StepExecutionState::Finished
            };
            agent.update_step(
                &id,
                crate::event::StepUpdate {
                    execution_state: Some(state),
                    ..Default::default()
                },
            );
            // AgentActor::settle: a step no longer held leaves the queue once done.
            if !agent.holds(task, stage) {
                agent.remove_step(&id);
            }
            if cut_loose {
                model.steps.retain(|s| s.id != id);
                model.started.retain(|s| *s != id);
                model.cut_loose = None;
            } else {
                model.steps.iter_mut().find(|s| s.id == id).unwrap().phase = Phase::Over;
            }
        }
        Op::FinishStage(_) | Op::FinishTask(_) => {
            let finish = op.finished().unwrap();
            let expected = model.finish(finish);
            let dropped = match finish_ids(finish) {
                (t, Some(s)) => agent.finish_stage(t, s, "finished"),
                (t, None) => agent.finish_task(t, "finished"),
            };
            differ(
                "the finish dropped",
                || dropped.iter().map(|s| &s.step_id),
                || expected.iter(),
            )?;
        }
        Op::Note { work, with_stage } => {
            let (task, stage) = work.ids();
            let (task, stage) = (task.clone(), with_stage.then(|| stage.clone()));
            let t = model.working_memory.entry(task.clone()).or_default();
            if let Some(s) = &stage {
                t.entry(s.clone()).or_default();
            }
            agent.note_working_memory(task, stage);
        }
        Op::Hold(n) => {
            // Only a step that still belongs to its work sends messages (complete_step).
            let Some(run) = model
                .running()
                .filter(|r| model.cut_loose.as_ref() != Some(&r.id))
            else {
                return Ok(());
            };
            let work = run.work;
            let ids: Vec<WaitId> = (0..*n)
                .map(|i| WaitId::from(format!("w{}", model.next_wait + i)))
                .collect();
            model.next_wait += n;
            let (task, stage) = work.ids();
            let waits = ids
                .iter()
                .map(|w| (w.clone(), AgentId::from("peer")))
                .collect();
            agent.hold_waits(waits, task, stage, 0, None);
            model.waits.extend(ids.into_iter().map(|w| (w, work)));
        }
        Op::Release(i) => {
            if model.waits.is_empty() {
                if agent.release_wait(&"unknown".into(), &"peer".into()) {
                    return Err("released a wait id that was never held".into());
                }
                return Ok(());
            }
            let (id, _) = model.waits.remove(i % model.waits.len());
            if !agent.release_wait(&id, &"peer".into()) {
                return Err(format!("wait {id} was held but could not be released"));
            }
        }
    }
    Ok(())
}

/// Err naming `what` when the two lists differ. Lists are compared as iterators and collected
/// only to report a difference: checks run after every operation, and a debug build's
/// allocations would otherwise dominate the test's time.
fn differ<T: PartialEq + fmt::Debug, G, W>(
    what: &str,
    got: impl Fn() -> G,
    want: impl Fn() -> W,
) -> Result<(), String>
where
    G: Iterator<Item = T>,
    W: Iterator<Item = T>,
{
    if got().eq(want()) {
        return Ok(());
    }
    let (got, want): (Vec<T>, Vec<T>) = (got().collect(), want().collect());
    Err(format!("{what} {got:?}, expected {want:?}"))
}

/// Compares the agent with the model and checks the invariants that hold after any operation.
fn check(agent: &Agent, model: &Model) -> Result<(), String> {
    let steps = agent.agent_step.steps();
    let ids = || steps.iter().map(|s| &s.step_id);
    differ("step_list", ids, || model.steps.iter().map(|s| &s.id))?;
    for (s, m) in steps.iter().zip(&model.steps) {
        let ok = match m.phase {
            Phase::Pending => s.execution_state == StepExecutionState::Init,
            Phase::Running => s.execution_state == StepExecutionState::Running,
            Phase::Over => s.execution_state.is_over(),
        };
        if !ok || m.work.ids() != (&s.task_id, &s.stage_id) {
            return Err(format!(
                "{} is {} in {}/{}, expected {:?} in {:?}",
                s.step_id, s.execution_state, s.task_id, s.stage_id, m.phase, m.work
            ));
        }
    }

    // todo holds exactly the pending steps, in queue order.
    let todo = || agent.agent_step.todo();
    differ("todo", todo, || model.pending().map(|s| &s.id))?;

    // step_list is the execution order: what started, in start order, then what waits to run.
    // Per stage this keeps the interleaving of seed §10.3 (A B A A B) in order as well.
    differ("step_list (as the execution order)", ids, || {
        model.started.iter().chain(todo())
    })?;

    // At most one step runs: each step's state matches the model's, which starts one at a time.
    let running = agent.agent_step.running().map(|s| &s.step_id);
    if running != model.running().map(|s| &s.id) {
        return Err(format!("running {running:?}, expected the model's"));
    }

    // Working memory: exactly the model's; records every step but a cut-loose one, and
    // nothing that is not a step.
    if agent.working_memory != model.working_memory {
        return Err(format!(
            "working memory {:?}, expected {:?}",
            agent.working_memory, model.working_memory
        ));
    }
    // Each such step is found under its own task and stage, and there are as many records as
    // such steps: so no id is recorded twice, misfiled, or for a step the agent lacks.
    let mut listed = 0;
    for s in steps {
        let cut = agent.agent_step.is_cut_loose(&s.step_id);
        if cut != (model.cut_loose.as_ref() == Some(&s.step_id)) {
            return Err(format!("{} cut loose: {cut}, expected {}", s.step_id, !cut));
        } else if cut {
            continue; // the model's cut-loose step is its running one
        }
        listed += 1;
        let recorded = agent
            .working_memory
            .get(&s.task_id)
            .and_then(|t| t.get(&s.stage_id))
            .is_some_and(|ids| ids.contains(&s.step_id));
        if !recorded {
            return Err(format!("{} is not recorded in working memory", s.step_id));
        }
    }
    let records: usize = agent
        .working_memory
        .values()
        .flat_map(|stages| stages.values())
        .map(Vec::len)
        .sum();
    if records != listed {
        return Err(format!(
            "working memory records {records} step ids for {listed} steps: {:?}",
            agent.working_memory
        ));
    }

    // The step lock holds the model's waits, each under the work it was taken in.
    differ(
        "step lock",
        || agent.step_lock.ids(),
        || model.waits.iter().map(|(w, _)| w),
    )?;
    for work in Work::all() {
        let (task, stage) = work.ids();
        let want = model.waits.iter().any(|(_, w)| *w == work);
        if agent.step_lock.holds_in(task, stage) != want {
            return Err(format!("step lock holds_in({work:?}) is not {want}"));
        }
    }

    let state = if model.running().is_some() {
        WorkingState::Working
    } else if !model.waits.is_empty() {
        WorkingState::Waiting
    } else if model.pending().next().is_some() {
        WorkingState::Working
    } else {
        WorkingState::Idle
    };
    if agent.derive_working_state() != state {
        return Err(format!(
            "working state {:?}, expected {state:?}",
            agent.derive_working_state()
        ));
    }
    Ok(())
}

/// What a finish must leave, checked on the agent alone: no step of the work but a running
/// one (pending ones included, as `todo` lists only steps of step_list), no working memory
/// and no wait of it. That all other work survives follows from `check`, as the model's
/// finish touches nothing else.
fn check_finish(agent: &Agent, (task, stage): Finish) -> Result<(), String> {
    let (task_id, stage_id) = finish_ids((task, stage));
    let inside = |t: &TaskId, s: &StageRef| t == task_id && stage_id.is_none_or(|st| s == st);
    let steps = agent.agent_step.steps().iter();
    let mut left = steps.filter(|s| s.execution_state != StepExecutionState::Running);
    if let Some(s) = left.find(|s| inside(&s.task_id, &s.stage_id)) {
        return Err(format!("{} survived the finish of its work", s.step_id));
    }
    let memory = agent.working_memory.get(task_id);
    if memory.is_some_and(|t| stage_id.is_none_or(|s| t.contains_key(s))) {
        return Err("the finished work is still in working memory".into());
    }
    let waits = Work::all().map(Work::ids).filter(|(t, s)| inside(t, s));
    if let Some((t, s)) = waits
        .into_iter()
        .find(|(t, s)| agent.step_lock.holds_in(t, s))
    {
        return Err(format!(
            "a wait taken in {t}/{s} is still held after its finish"
        ));
    }
    Ok(())
}

/// Runs one sequence; on a failure, the seed, the failing check and the operations so far.
fn run_sequence(seed: u64) -> Result<(), String> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut agent = Agent::from(AgentState::new(
        "a".into(),
        "A".into(),
        "r".into(),
        "p".into(),
    ));
    // A reader that starts from the agent as it was added and sees only its changes.
    let mut reader = agent.clone();
    let mut model = Model::default();
    for n in 0..OPS_PER_SEQUENCE {
        let op = random_op(&mut rng);
        let result = apply(&mut agent, &mut model, &op)
            .and_then(|()| check(&agent, &model))
            .and_then(|()| same_as_reader(&mut agent, &mut reader))
            // The full record costs a copy of the agent: every few operations is enough.
            .and_then(|()| match n % 8 {
                7 => same_record(&agent),
                _ => Ok(()),
            })
            .and_then(|()| match op.finished() {
                Some(finished) => check_finish(&agent, finished),
                None => Ok(()),
            });
        if let Err(e) = result {
            return Err(format!(
                "seed {seed} (rerun with COHORT_PROPS_SEED={seed}): after op #{n}: {e}\n{}",
                replay(seed, n)
            ));
        }
    }
    Ok(())
}

/// Applies the agent's new changes to the reader's copy, as the monitor does, each read back
/// from its JSON as the store replays it; the copy must be the agent (the changes say
/// everything, and say it exactly).
fn same_as_reader(agent: &mut Agent, reader: &mut Agent) -> Result<(), String> {
    for c in agent.take_changes() {
        let json = serde_json::to_string(&c).map_err(|e| e.to_string())?;
        let stored: crate::event::Change =
            serde_json::from_str(&json).map_err(|e| format!("{e}: {json}"))?;
        if stored != c {
            return Err(format!("a change reads back different:\n{c:?}\n{stored:?}"));
        }
        crate::event::apply_agent(reader, &stored);
    }
    if agent != reader {
        return Err(format!(
            "a reader rebuilt from the changes differs from the agent:\nagent:  {agent:?}\nreader: {reader:?}"
        ));
    }
    Ok(())
}

/// The agent's full record (what the store keeps) reads back as the agent.
fn same_record(agent: &Agent) -> Result<(), String> {
    let record = crate::event::AgentRecord::of(agent);
    let json = serde_json::to_string(&record).map_err(|e| e.to_string())?;
    let back: crate::event::AgentRecord =
        serde_json::from_str(&json).map_err(|e| format!("{e}: {json}"))?;
    if back.into_state() != agent.state {
        return Err(format!("the agent's record reads back different: {json}"));
    }
    Ok(())
}

/// The first `last + 1` operations of a sequence, regenerated from its seed (operations depend
/// on the seed alone, so nothing has to be logged while the sequence runs).
fn replay(seed: u64, last: usize) -> String {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..=last)
        .map(|i| format!("  {i:>2}: {:?}", random_op(&mut rng)))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn random_operations_keep_queue_working_memory_and_lock_consistent() {
    let seeds: Vec<u64> = match std::env::var("COHORT_PROPS_SEED") {
        Ok(s) => vec![s.trim().parse().expect("COHORT_PROPS_SEED is a number")],
        Err(_) => (BASE_SEED..BASE_SEED + SEQUENCES).collect(),
    };
    for seed in seeds {
        if let Err(e) = run_sequence(seed) {
            panic!("{e}");
        }
    }
}

/// Seed §10.3: one agent in two stages runs their steps interleaved (A B A A B); finishing A
/// midway leaves B's steps, in their order, and the running A step until it settles.
#[test]
fn two_stages_interleave_and_finishing_one_keeps_the_others_order() {
    fn run(agent: &mut Agent, model: &mut Model, op: Op) {
        if let Err(e) = apply(agent, model, &op).and_then(|()| check(agent, model)) {
            panic!("{op:?}: {e}");
        }
    }
    fn stages(agent: &Agent) -> Vec<&str> {
        let steps = agent.agent_step.steps().iter();
        steps.map(|s| s.stage_id.as_str()).collect()
    }
    let (a, b) = (Work { task: 1, stage: 0 }, Work { task: 1, stage: 1 });
    let mut agent = Agent::from(AgentState::new(
        "x".into(),
        "X".into(),
        "r".into(),
        "p".into(),
    ));
    let mut model = Model::default();
    run(&mut agent, &mut model, Op::Add(vec![a, b, a, a, b]));
    assert_eq!(stages(&agent), ["s1", "s2", "s1", "s1", "s2"]);
    for _ in 0..2 {
        run(&mut agent, &mut model, Op::StartNext);
        run(&mut agent, &mut model, Op::Settle { failed: false });
    }
    run(&mut agent, &mut model, Op::StartNext);
    // A is finished while its second step runs: the first and the last A go, the running one
    // stays (cut loose) and leaves when it settles; B keeps both steps in order.
    run(&mut agent, &mut model, Op::FinishStage(a));
    assert_eq!(stages(&agent), ["s2", "s1", "s2"]);
    run(&mut agent, &mut model, Op::Settle { failed: false });
    assert_eq!(stages(&agent), ["s2", "s2"]);
    assert_eq!(agent.agent_step.todo_len(), 1);
}
