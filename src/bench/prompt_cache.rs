//! The `prompt_cache` scenario: every prompt of a team's run, recorded as it crosses HTTP, and
//! what a prefix cache can reuse of it. The team runs on the `openai` provider against a local
//! OpenAI-compatible endpoint that replays the team's script (so the run is the scripted run,
//! call for call) and records each request: its messages as a chat template joins them, its
//! answer schema, its cache fields (`prompt_cache_key`, llama.cpp's `id_slot` and
//! `cache_prompt`).
//!
//! Figures, in cl100k tokens (the model is named `gpt-4` so client and endpoint count alike):
//! tokens a call; the share of a call that is a prefix of the same agent's previous call; the
//! tokens a call adds beyond it; the schema's tokens a call; and what an endpoint with one
//! cache slot per `id_slot` (else one slot for all, as a default llama.cpp server) reuses, which
//! it reports as `usage.prompt_tokens_details.cached_tokens`, so the client's count of cached
//! tokens is checked against it.
//!
//! Teams: the quickstart (a manager and two workers, two stages), and a stage of 20 workers
//! (the benchmark team, two think steps each).

use super::load_http::runtime;
use super::scenarios::Figures;
use super::team::{Scratch, TeamShape, write_team};
use super::{BenchOptions, Job, Row, f, in_child, row};
use crate::actors::Host;
use crate::config::load_team;
use crate::config::script::Script;
use crate::ids::{AgentId, StageRef, StepId, TaskId};
use crate::llm::scripted::ScriptedModel;
use crate::llm::{ChatModel, ChatRequest};
use crate::prompt::tokens::TokenCounter;
use crate::prompt::{Headings, Language, PromptSet};
use crate::run::{RunOptions, run_goal};
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The model the bench team names: its tokenizer (cl100k) counts on both sides.
const MODEL: &str = "gpt-4";

/// The endpoint's cache slots the bench team names (`cache_slots`): fewer than the 21 agents of
/// the 20-worker stage, as on a real server.
const SLOTS: u32 = 8;

/// One request as the endpoint saw it.
#[derive(Clone, Debug, Default)]
struct Seen {
    agent: String,
    /// Tokens of the messages joined as a chat template would (role markers, then the text).
    tokens: usize,
    /// Tokens of the longest common prefix with the same agent's previous call (0 for its first).
    shared: usize,
    /// Whether the agent had a previous call.
    follows: bool,
    schema_tokens: usize,
    /// Tokens of the system message (the system section and the memory rules).
    system_tokens: usize,
    /// The tokens beyond the shared prefix, by the prompt part they are in ([`PARTS`]).
    new_by_part: [usize; PARTS.len()],
    /// Tokens the endpoint's cache reused (one slot per `id_slot`, else one for all).
    cached: usize,
    keyed: bool,
    slotted: bool,
}

struct Recorder {
    script: Arc<ScriptedModel>,
    tokens: TokenCounter,
    /// The bench team's section headings (in its language), to tell a prompt's parts apart.
    headings: Headings,
    /// How its prompts label the agent's id (`agent id`, `智能体 id`).
    agent_label: String,
    seen: Mutex<Vec<Seen>>,
    /// The previous prompt of each agent.
    by_agent: Mutex<HashMap<String, String>>,
    /// The prompt each cache slot holds.
    slots: Mutex<HashMap<String, String>>,
}

/// The endpoint; stops when dropped.
struct Endpoint {
    addr: std::net::SocketAddr,
    recorder: Arc<Recorder>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn serve(script: Script, lang: Language) -> std::io::Result<Endpoint> {
    let set = PromptSet::builtin(lang);
    let recorder = Arc::new(Recorder {
        script: ScriptedModel::new(script),
        tokens: TokenCounter::for_model(MODEL),
        headings: set.headings().clone(),
        agent_label: set.phrases().agent_id.clone(),
        seen: Mutex::default(),
        by_agent: Mutex::default(),
        slots: Mutex::default(),
    });
    let app = Router::new()
        .route("/v1/chat/completions", post(answer))
        .with_state(recorder.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(Endpoint {
        addr,
        recorder,
        server,
    })
}

/// The value of the first line `- {name}: …` of `text` (up to a ` (` note).
fn field<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    let key = format!("- {name}: ");
    let line = text
        .lines()
        .find_map(|l| l.trim_start().strip_prefix(&key))?;
    Some(line.split(" (").next().unwrap_or(line).trim())
}

/// The current step's ids and skill: its task and stage from the first pair of lines
/// `- task_id` / `- stage_id` (atop the stage's history, or in the current step for a skill
/// without one), its skill from the current step's `- executor` line; and the asking agent.
/// The step's own id is a fresh one: the prompt does not name it.
fn asked(rec: &Recorder, system: &str, user: &str) -> Option<(String, [String; 4])> {
    let lines: Vec<&str> = user.lines().collect();
    let at = (0..lines.len().saturating_sub(1)).find(|&i| {
        lines[i].starts_with("- task_id: ") && lines[i + 1].starts_with("- stage_id: ")
    })?;
    let ids = lines[at..at + 2].join("\n");
    let current = &user[user.rfind(&format!("# {}", rec.headings.current_step))?..];
    let agent = [rec.agent_label.as_str(), "agent_id"]
        .iter()
        .find_map(|n| field(system, n).or_else(|| field(user, n)))?;
    Some((
        agent.to_owned(),
        [
            field(&ids, "task_id")?.to_owned(),
            field(&ids, "stage_id")?.to_owned(),
            StepId::random().to_string(),
            field(current, "executor")?.to_owned(),
        ],
    ))
}

/// The parts of a prompt the new tokens of a call are counted in: the system message, then the
/// `user` message's level-1 sections by their heading (in the bench team's language).
const PARTS: [&str; 6] = [
    "system",
    "history",
    "skill rules",
    "memory and pending steps",
    "current step",
    "other",
];

/// The part of a prompt a level-1 heading of its `user` message opens.
fn part_of(h: &Headings, heading: &str) -> usize {
    let is = |name: &str| heading == name;
    if is(&h.history) || is(&h.tool_history) {
        1
    } else if heading.starts_with(&format!("{}: ", h.skill_at_hand)) || is(&h.rules) {
        2
    } else if is(&h.memory_content) || is(&h.history_pending) {
        3
    } else if is(&h.current_step) || is(&h.depends_on) {
        4
    } else {
        5
    }
}

/// The tokens of `text` from byte `from` on, by the part of the prompt they are in.
fn new_by_part(
    h: &Headings,
    text: &str,
    from: usize,
    count: impl Fn(&str) -> usize,
) -> [usize; PARTS.len()] {
    let mut by = [0; PARTS.len()];
    let user = text
        .find("<|user|>\n")
        .map_or(text.len(), |i| i + "<|user|>\n".len());
    // Where each part starts: the system message at 0, then each `# ` line of the user message.
    let mut starts = vec![(0, 0)];
    let mut at = user;
    for line in text[user..].split_inclusive('\n') {
        if let Some(line) = line.strip_prefix("# ") {
            starts.push((at, part_of(h, line.trim_end())));
        }
        at += line.len();
    }
    for (i, &(start, part)) in starts.iter().enumerate() {
        let end = starts.get(i + 1).map_or(text.len(), |s| s.0);
        let lo = start.max(from);
        if lo < end {
            by[part] += count(&text[lo..end]);
        }
    }
    by
}

fn common_prefix<'a>(a: &'a str, b: &str) -> &'a str {
    let n = a
        .char_indices()
        .zip(b.chars())
        .find(|((_, x), y)| x != y)
        .map_or(a.len().min(b.len()), |((i, _), _)| i);
    &a[..n]
}

async fn answer(State(rec): State<Arc<Recorder>>, body: Bytes) -> Response {
    let req: Value = serde_json::from_slice(&body).unwrap_or_default();
    let messages = req["messages"].as_array().cloned().unwrap_or_default();
    let text_of = |role: &str| {
        messages
            .iter()
            .filter(|m| m["role"] == role)
            .filter_map(|m| m["content"].as_str())
            .collect::<Vec<_>>()
            .join("\n")
    };
    let (system, user) = (text_of("system"), text_of("user"));
    let Some((agent, [task, stage, step, skill])) = asked(&rec, &system, &user) else {
        let e = json!({"error": {"message": "no current step in the prompt", "type": "invalid_request_error"}});
        return (StatusCode::BAD_REQUEST, axum::Json(e)).into_response();
    };
    let text: String = messages
        .iter()
        .map(|m| {
            format!(
                "<|{}|>\n{}\n",
                m["role"].as_str().unwrap_or(""),
                m["content"].as_str().unwrap_or("")
            )
        })
        .collect();
    let system_tokens = rec.tokens.count(&system);
    let seen = record(&rec, &req, agent.clone(), text, system_tokens);
    let request = ChatRequest {
        system,
        prompt: user,
        answer_format: None,
        tools: Vec::new(),
        rounds: Vec::new(),
        images: Vec::new(),
        agent_id: AgentId::from(agent.as_str()),
        skill,
        task_id: TaskId::from(task.as_str()),
        stage_id: StageRef::parse(&stage),
        step_id: StepId::from(step.as_str()),
        template: None,
        step_text: String::new(),
        progress: None,
        model_wait: None,
        retry: 0,
        mending: Default::default(),
        intake: None,
    };
    match rec.script.chat(request).await {
        Ok(reply) => axum::Json(json!({
            "id": "replay", "object": "chat.completion", "created": 1_700_000_000u32, "model": MODEL,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": reply.text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": seen.tokens, "completion_tokens": rec.tokens.count(&reply.text),
                      "prompt_tokens_details": {"cached_tokens": seen.cached}}
        }))
        .into_response(),
        Err(e) => {
            let e = json!({"error": {"message": e.to_string(), "type": "invalid_request_error"}});
            (StatusCode::BAD_REQUEST, axum::Json(e)).into_response()
        }
    }
}

/// Records one request: its size, what it shares with the agent's previous call, what the
/// endpoint's cache slot holds of it.
fn record(rec: &Recorder, req: &Value, agent: String, text: String, system_tokens: usize) -> Seen {
    let count = |s: &str| rec.tokens.count(s);
    let previous = rec
        .by_agent
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(agent.clone(), text.clone());
    let slot = req["id_slot"]
        .as_i64()
        .map_or_else(|| "shared".to_owned(), |s| s.to_string());
    let held = rec
        .slots
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(slot, text.clone());
    let schema = &req["response_format"];
    let prefix = previous
        .as_deref()
        .map_or(0, |p| common_prefix(&text, p).len());
    let seen = Seen {
        tokens: count(&text),
        shared: previous
            .as_deref()
            .map_or(0, |p| count(common_prefix(&text, p))),
        new_by_part: if previous.is_some() {
            new_by_part(&rec.headings, &text, prefix, count)
        } else {
            [0; PARTS.len()]
        },
        follows: previous.is_some(),
        system_tokens,
        schema_tokens: if schema.is_null() {
            0
        } else {
            count(&schema.to_string())
        },
        cached: held
            .as_deref()
            .map_or(0, |p| count(common_prefix(&text, p))),
        keyed: req["prompt_cache_key"].is_string(),
        slotted: req["id_slot"].is_i64() && req["cache_prompt"] == true,
        agent,
    };
    rec.seen
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(seen.clone());
    seen
}

/// The team of `which` in `dir`, on the `openai` provider at `base_url`: its team file and the
/// script the endpoint replays.
fn write(dir: &Path, which: &str, base_url: &str) -> Result<(std::path::PathBuf, Script), String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (team, script) = match which {
        "quickstart" | "quickstart_zh" => (
            std::fs::read_to_string(root.join(format!("examples/{which}/team.yaml")))
                .map_err(|e| e.to_string())?,
            root.join(format!("examples/{which}/script.yaml")),
        ),
        _ => {
            let shape = TeamShape {
                workers: 20,
                steps: 2,
                delay_ms: 0,
                max_in_flight: 8,
                goals: 1,
            };
            let file = write_team(dir, shape, None).map_err(|e| e.to_string())?;
            (
                std::fs::read_to_string(&file).map_err(|e| e.to_string())?,
                dir.join("script.yaml"),
            )
        }
    };
    let script = Script::load(&script).map_err(|e| e.to_string())?;
    // The team's `llm:` block (up to the next top-level line) becomes the endpoint's.
    let start = team.find("\nllm:").ok_or("the team has no llm block")? + 1;
    let mut end = team.len();
    let mut at = start
        + team[start..]
            .find('\n')
            .map_or(team.len() - start, |i| i + 1);
    while at < team.len() {
        let line = &team[at..];
        if line.starts_with(|c: char| !c.is_whitespace()) {
            end = at;
            break;
        }
        at += line.find('\n').map_or(line.len(), |i| i + 1);
    }
    let llm = format!(
        "llm:\n  provider: openai\n  base_url: {base_url}\n  model: {MODEL}\n  cache_slots: {SLOTS}\n"
    );
    let file = dir.join("bench-team.yaml");
    std::fs::write(&file, format!("{}{llm}{}", &team[..start], &team[end..]))
        .map_err(|e| e.to_string())?;
    Ok((file, script))
}

/// Runs `which` (`quickstart`, `quickstart_zh` or `stage20`) through the recording endpoint.
pub fn prompt_cache(which: &str) -> Figures {
    let (lang, goal) = match which {
        "quickstart_zh" => (Language::Zh, "写一首关于秋雨的俳句"),
        _ => (Language::En, "Write a haiku about autumn rain"),
    };
    let scratch = Scratch::new(&format!("prompt-cache-{which}")).map_err(|e| e.to_string())?;
    let rt = runtime()?;
    let script_dir = scratch.0.clone();
    // The endpoint's address is needed in the team file, and the script in the endpoint.
    let (file, script) = write(&script_dir, which, "http://127.0.0.1:1/v1")?;
    let endpoint = rt
        .block_on(serve(script, lang))
        .map_err(|e| e.to_string())?;
    let base = format!("http://{}/v1", endpoint.addr);
    let text = std::fs::read_to_string(&file).map_err(|e| e.to_string())?;
    std::fs::write(&file, text.replace("http://127.0.0.1:1/v1", &base))
        .map_err(|e| e.to_string())?;
    let cfg = load_team(&file).map_err(|e| e.to_string())?;
    let opts = RunOptions {
        timeout: Duration::from_secs(300),
        stall_after: Duration::from_secs(60),
        ..RunOptions::default()
    };
    let vars = |_: &str| None;
    let host = Host::new(
        &vars,
        std::env::current_exe().unwrap_or_else(|_| "cohort".into()),
    );
    let report = actix::System::new()
        .block_on(async { run_goal(&cfg, goal, &opts, &host, |_| {}).await })
        .map_err(|e| e.to_string())?;
    let seen = endpoint
        .recorder
        .seen
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    Ok(figures(&seen, &report))
}

fn figures(seen: &[Seen], report: &crate::run::RunReport) -> Value {
    let calls = seen.len().max(1) as f64;
    let sum = |g: fn(&Seen) -> usize| seen.iter().map(g).sum::<usize>() as f64;
    let tokens = sum(|s| s.tokens);
    let following: Vec<&Seen> = seen.iter().filter(|s| s.follows).collect();
    let shared: usize = following.iter().map(|s| s.shared).sum();
    let of_following: usize = following.iter().map(|s| s.tokens).sum();
    // What the calls that follow another of their agent's add, by part, per such call.
    let by_part: serde_json::Map<String, Value> = PARTS
        .iter()
        .enumerate()
        .map(|(i, part)| {
            let sum: usize = following.iter().map(|s| s.new_by_part[i]).sum();
            let each = sum as f64 / following.len().max(1) as f64;
            ((*part).to_owned(), json!(each))
        })
        .collect();
    json!({
        "calls": seen.len(),
        "outcome": format!("{:?}", report.outcome),
        "tokens_a_call": tokens / calls,
        "largest_call": seen.iter().map(|s| s.tokens).max().unwrap_or(0),
        "shared_pct": 100.0 * shared as f64 / of_following.max(1) as f64,
        "new_a_call": (tokens - shared as f64) / calls,
        "schema_tokens_a_call": sum(|s| s.schema_tokens) / calls,
        "system_tokens_a_call": sum(|s| s.system_tokens) / calls,
        "new_by_part": by_part,
        "cached_pct": 100.0 * sum(|s| s.cached) / tokens.max(1.0),
        "client_cached": report.tokens.cached_prompt_tokens,
        "endpoint_cached": sum(|s| s.cached),
        "keyed": seen.iter().filter(|s| s.keyed).count(),
        "slotted": seen.iter().filter(|s| s.slotted).count(),
        "agents": seen.iter().map(|s| s.agent.as_str()).collect::<std::collections::BTreeSet<_>>().len(),
    })
}

/// Today's figures (before prompts were ordered for the cache), as the issue measured them.
const BEFORE_TOKENS: f64 = 2459.0;

/// The scenario's rows: tokens a call, the prefix share, what is new, the cache's reuse.
pub fn rows(
    exe: &Path,
    _opts: &BenchOptions,
    note: &mut impl FnMut(&str, Result<Value, String>) -> Option<Value>,
    out: &mut Vec<Row>,
) {
    for which in ["quickstart", "quickstart_zh", "stage20"] {
        eprintln!("bench: prompt_cache: every prompt of the {which} through a local endpoint …");
        let job = Job::PromptCache {
            team: which.to_owned(),
        };
        if let Some(v) = note("prompt_cache", in_child(exe, &job)) {
            team_rows(which, &v, out);
        }
    }
}

/// The rows of one team's run (`v`: what its child measured).
fn team_rows(which: &str, v: &Value, out: &mut Vec<Row>) {
    let name = format!("prompt_cache {which}");
    let target = |t: &str| {
        if which == "quickstart" {
            t.to_owned()
        } else {
            String::new()
        }
    };
    out.push(row(
        &name,
        "tokens a call",
        format!(
            "{:.0} ({} calls, {})",
            f(&v["tokens_a_call"]),
            v["calls"],
            v["outcome"].as_str().unwrap_or("?")
        ),
        &target(&format!(
            "≤ {:.0} (−35 % of {BEFORE_TOKENS:.0})",
            BEFORE_TOKENS * 0.65
        )),
    ));
    out.push(row(
        &name,
        "prefix shared with the agent's previous call",
        format!("{:.1} %", f(&v["shared_pct"])),
        "≥ 85 % (48 % before)",
    ));
    out.push(row(
        &name,
        "new tokens a call",
        format!("{:.0}", f(&v["new_a_call"])),
        "",
    ));
    let parts: Vec<String> = PARTS
        .iter()
        .filter_map(|p| {
            let n = f(&v["new_by_part"][*p]);
            (n >= 0.5).then(|| format!("{p} {n:.0}"))
        })
        .collect();
    out.push(row(
        &name,
        "new tokens of a following call, by part",
        parts.join(" · "),
        "",
    ));
    out.push(row(
        &name,
        "system message tokens a call",
        format!("{:.0}", f(&v["system_tokens_a_call"])),
        "",
    ));
    out.push(row(
        &name,
        "schema tokens a call",
        format!("{:.0}", f(&v["schema_tokens_a_call"])),
        "",
    ));
    out.push(row(
        &name,
        "cached by a slot per agent",
        format!(
            "{:.1} % (client counted {} of {}; {} of {} calls keyed, {} slotted)",
            f(&v["cached_pct"]),
            v["client_cached"],
            v["endpoint_cached"],
            v["keyed"],
            v["calls"],
            v["slotted"]
        ),
        "client = endpoint",
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each new token is counted once, in the part its `# ` section opens; a prefix that ends
    /// inside a section counts only that section's rest.
    #[test]
    fn new_tokens_are_counted_in_the_part_they_are_in() {
        let set = PromptSet::builtin(Language::En);
        let h = set.headings();
        let text = format!(
            "<|system|>\nrules\n<|user|>\n# {}\n\nold new\n\n# {}: think\n\nr\n\n# {}\n\nm\n\n# {}\n\nc\n",
            h.history, h.skill_at_hand, h.memory_content, h.current_step
        );
        let words = |s: &str| s.split_whitespace().count();
        let from = text.find("new").unwrap();
        let by = new_by_part(h, &text, from, words);
        // history: "new"; skill rules: "# Skill: think r"; memory: "# Memory content m";
        // current step: "# Current step c".
        assert_eq!(by, [0, 1, 4, 4, 4, 0]);
        assert_eq!(by.iter().sum::<usize>(), words(&text[from..]));
        // From the start, the system message is counted too.
        assert_eq!(new_by_part(h, &text, 0, words)[0], 3);
    }
}
