//! The benchmark team, written to a scratch folder: a manager and N workers on the scripted
//! provider. The manager turns the goal into one task with one stage that allocates every
//! worker; each worker plans `steps` think steps, reflects, summarises; the manager finishes
//! the stage and the task. Every reply may wait `delay_ms` (a stand-in for a real model's
//! latency).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// LLM calls the manager makes one after another for one goal: a task_manager step each for the
/// goal, the new task, the complete stage and the task's judgement.
pub const MANAGER_CALLS: u64 = 4;

/// LLM calls one worker makes: planning, its think steps, the closing reflection, the summary.
pub fn worker_calls(steps: usize) -> u64 {
    steps as u64 + 3
}

/// A folder under the system's temp dir, removed when dropped.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(name: &str) -> std::io::Result<Scratch> {
        let dir = std::env::temp_dir().join(format!("cohort-bench-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn worker_id(i: usize) -> String {
    format!("w{i:05}")
}

/// The shape of a benchmark team.
#[derive(Clone, Copy, Debug)]
pub struct TeamShape {
    pub workers: usize,
    /// Think steps each worker plans.
    pub steps: usize,
    /// Every scripted reply waits this long.
    pub delay_ms: u64,
    pub max_in_flight: usize,
    /// How many goals the script serves (one task each).
    pub goals: usize,
}

/// Writes `team.yaml` and `script.yaml` into `dir`; returns the team file. With
/// `operator_hash`, the team has a person `operator` with that password hash.
pub fn write_team(
    dir: &Path,
    shape: TeamShape,
    operator_hash: Option<&str>,
) -> std::io::Result<PathBuf> {
    let TeamShape {
        workers,
        steps,
        delay_ms,
        max_in_flight,
        goals,
    } = shape;
    let mut team = format!(
        "name: bench\nlanguage: en\nllm:\n  provider: scripted\n  script: script.yaml\n  \
         max_in_flight: {max_in_flight}\nagents:\n  - id: manager\n    role: manager\n    \
         skills: [process_message, decision, task_manager]\n"
    );
    for i in 0..workers {
        let _ = writeln!(
            team,
            "  - id: {}\n    role: worker\n    skills: [planning, reflection, summary, think]",
            worker_id(i)
        );
    }
    if let Some(hash) = operator_hash {
        let _ = write!(
            team,
            "humans:\n  - id: operator\n    role: operator\n    access: operator\n    password_hash: \"{hash}\"\n"
        );
        // A bench is one person giving goals as fast as the team takes them: seed 000's caps on a
        // person's goals (5 in 15 s, 30 running) would measure the cap, not the team. Last in
        // the file, so a scenario may add keys to it.
        team.push_str("http:\n  goals_per_person: 1000000\n  running_tasks: 1000000\n");
    }
    std::fs::write(dir.join("team.yaml"), team)?;
    std::fs::write(
        dir.join("script.yaml"),
        script(workers, steps, delay_ms, goals),
    )?;
    Ok(dir.join("team.yaml"))
}

fn entry(out: &mut String, text: &str, delay_ms: u64) {
    let text = serde_json::to_string(text).unwrap_or_default();
    let _ = writeln!(out, "      - text: {text}\n        delay_ms: {delay_ms}");
}

fn script(workers: usize, steps: usize, delay_ms: u64, goals: usize) -> String {
    let mut s = String::from("replies:\n  manager:\n");
    let allocation = (0..workers)
        .map(|i| format!("\"{}\": \"think it through\"", worker_id(i)))
        .collect::<Vec<_>>()
        .join(", ");
    // add_task for the goal, add_stage for the new task, finish_stage, finish_task.
    let phases = [
                    "<task_instruction>{\"action\": \"add_task\", \"task_name\": \"bench\", \"task_intention\": \"think\"}</task_instruction>".to_owned(),
                    format!(
                "<task_instruction>{{\"action\": \"add_stage\", \"task_id\": \"{{{{task_id}}}}\", \"stages\": [{{\"stage_intention\": \"think\", \"agent_allocation\": {{{allocation}}}}}]}}</task_instruction>"
            ),
                    "<task_instruction>{\"action\": \"finish_stage\", \"task_id\": \"{{task_id}}\", \"stage_id\": \"{{stage_id}}\"}</task_instruction>".to_owned(),
                    "<task_instruction>{\"action\": \"finish_task\", \"task_id\": \"{{task_id}}\", \"outcome\": \"finished\", \"task_summary\": \"done\"}</task_instruction>".to_owned(),
    ];
    s.push_str("    task_manager:\n");
    for _ in 0..goals {
        for instruction in &phases {
            entry(&mut s, instruction, delay_ms);
        }
    }
    let plan = (0..steps)
        .map(|i| {
            format!(
                "{{\"step_intention\": \"think {i}\", \"type\": \"skill\", \"executor\": \"think\", \"text_content\": \"think {i}\"}}"
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    for i in 0..workers {
        let _ = writeln!(s, "  {}:\n    planning:", worker_id(i));
        for _ in 0..goals {
            entry(
                &mut s,
                &format!("<planned_step>[{plan}]</planned_step>"),
                delay_ms,
            );
        }
        s.push_str("    think:\n");
        for _ in 0..goals {
            for k in 0..steps {
                entry(&mut s, &format!("<think>thought {k}</think>"), delay_ms);
            }
        }
        s.push_str("    reflection:\n");
        for _ in 0..goals {
            entry(
                &mut s,
                "<planned_step>[{\"step_intention\": \"sum up\", \"type\": \"skill\", \"executor\": \"summary\", \"text_content\": \"sum up\"}]</planned_step>",
                delay_ms,
            );
        }
        s.push_str("    summary:\n");
        for _ in 0..goals {
            entry(
                &mut s,
                "<completion_summary>thought it through</completion_summary>",
                delay_ms,
            );
        }
    }
    s
}
