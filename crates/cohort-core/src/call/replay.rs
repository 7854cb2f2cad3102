//! Replaying a recorded run (`cohort replay`): the pure part. A replayed run makes new ids
//! (tasks, stages, steps, waits) where the recorded one made others, so a recorded prompt and
//! the replayed one are compared through a map of ids: the k-th id in a recorded text is the
//! k-th in the replayed text, learned as the prompts come. Through that map a recorded answer
//! names the replayed run's tasks and stages, and a prompt that differs otherwise is a
//! divergence, reported at its first differing line.

use crate::texts::Texts;
use serde_json::Value;
use std::collections::HashMap;

/// The recorded run's ids and the replayed run's, paired.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct IdMap {
    /// Recorded id → replayed id.
    forward: HashMap<String, String>,
    /// Replayed id → recorded id.
    back: HashMap<String, String>,
}

/// How far ahead a replayed text's lines are searched for one a recorded line reads as.
const RESYNC: usize = 64;

/// Where a replayed prompt first differs from the recorded one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FirstDifference {
    /// The line, counted from 1.
    pub line: usize,
    /// That line as recorded (ids as the replayed run names them), or none past its end.
    pub recorded: Option<String>,
    /// That line as replayed, or none past its end.
    pub replayed: Option<String>,
}

impl FirstDifference {
    /// The line and its two versions, in the language of `t`.
    pub fn render(&self, t: &Texts) -> String {
        let show = |l: &Option<String>| l.clone().unwrap_or_else(|| t.replay_text_ends());
        t.replay_line(self.line, show(&self.recorded), show(&self.replayed))
    }
}

/// In English.
impl std::fmt::Display for FirstDifference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.render(&Texts::english()))
    }
}

impl IdMap {
    /// Learns the pairs `recorded` and `replayed` (one text as recorded and as replayed) show:
    /// line by line, the ids of two lines that read the same but for their ids, in order, each
    /// pair whose ids are both new. A line only one text has (a fork's team knows a task the
    /// recorded one did not yet) is stepped over: the nearest line of the same shape within
    /// `RESYNC` lines is where the two go on together.
    pub fn learn(&mut self, recorded: &str, replayed: &str) {
        let a: Vec<String> = recorded.lines().map(without_ids).collect();
        let b: Vec<String> = replayed.lines().map(without_ids).collect();
        let (ra, rb): (Vec<&str>, Vec<&str>) =
            (recorded.lines().collect(), replayed.lines().collect());
        let (mut i, mut j) = (0, 0);
        while i < a.len() && j < b.len() {
            if a[i] == b[j] {
                self.pair(ra[i], rb[j]);
                (i, j) = (i + 1, j + 1);
                continue;
            }
            let end = b.len().min(j + RESYNC);
            match (j + 1..end).find(|&k| b[k] == a[i]) {
                Some(k) => j = k,
                None => i += 1,
            }
        }
    }

    /// Pairs the ids of one line as recorded and as replayed, in order.
    fn pair(&mut self, recorded: &str, replayed: &str) {
        for (r, p) in ids_in(recorded).into_iter().zip(ids_in(replayed)) {
            if r != p && !self.forward.contains_key(r) && !self.back.contains_key(p) {
                self.forward.insert(r.to_owned(), p.to_owned());
                self.back.insert(p.to_owned(), r.to_owned());
            }
        }
    }

    /// `text` (recorded) with each id it pairs replaced by the replayed run's.
    pub fn to_replayed(&self, text: &str) -> String {
        rewrite_ids(text, |id, out| {
            out.push_str(self.forward.get(id).map_or(id, String::as_str))
        })
    }

    /// Where `replayed` first differs from `recorded` read with the replayed run's ids; none
    /// when they are the same.
    pub fn first_difference(&self, recorded: &str, replayed: &str) -> Option<FirstDifference> {
        let recorded = self.to_replayed(recorded);
        if recorded == replayed {
            return None;
        }
        let (mut a, mut b) = (recorded.lines(), replayed.lines());
        let mut line = 0;
        loop {
            line += 1;
            let (x, y) = (a.next(), b.next());
            if x != y {
                return Some(FirstDifference {
                    line,
                    recorded: x.map(str::to_owned),
                    replayed: y.map(str::to_owned),
                });
            }
            if x.is_none() {
                // Only trailing whitespace differs.
                return Some(FirstDifference {
                    line,
                    recorded: None,
                    replayed: None,
                });
            }
        }
    }
}

impl IdMap {
    /// `text` as the replayed run would name things: from the recorded run (`recorded`), each
    /// paired id made the replayed run's; either way, an id never paired (one no prompt showed,
    /// such as a step's own) made `<id>`, so the two runs' texts compare.
    pub fn canonical(&self, text: &str, recorded: bool) -> String {
        rewrite_ids(text, |id, out| {
            let known = if recorded {
                self.forward.get(id).map(String::as_str)
            } else {
                self.back.contains_key(id).then_some(id)
            };
            out.push_str(known.unwrap_or("<id>"));
        })
    }
}

/// Fields that differ from run to run whatever the models answer: times, traces, waits for an
/// endpoint, how far a live answer was written.
fn volatile(key: &str) -> bool {
    key.ends_with("_at")
        || matches!(
            key,
            "timestamp" | "trace_id" | "caused_by" | "traceparent" | "model_wait" | "age_ms"
        )
}

fn strip_volatile(v: &mut Value) {
    match v {
        Value::Object(o) => {
            o.retain(|k, _| !volatile(k));
            o.values_mut().for_each(strip_volatile);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_volatile),
        _ => {}
    }
}

/// How two runs' final states (`{"task": {…}, "stage": {…}, "agent": {…}, "step": {…}}`)
/// differ, once each state is read without its times and traces and with the ids as `ids`
/// pairs them: per kind, each state of one run the other lacks, said by its fields that differ
/// from its counterpart's (the state of the other run with the same id, or the same executor
/// and intention for a step), at most `most` lines. Each kind is compared as a set, so the
/// order steps were made in does not matter; what they did does.
pub fn state_differences(
    recorded: &Value,
    replayed: &Value,
    ids: &IdMap,
    most: usize,
    t: &Texts,
) -> Vec<String> {
    let mut found = Vec::new();
    for kind in ["task", "stage", "agent", "step"] {
        let (said, name_of) = (kind_of(kind, t), |v: &Value| name_of(kind, v, t));
        let (was, is) = (
            canonical_states(recorded, kind, ids, true),
            canonical_states(replayed, kind, ids, false),
        );
        let (only_was, only_is) = (unmatched(&was, &is), unmatched(&is, &was));
        for w in &only_was {
            let counterpart = only_is.iter().find(|i| same_thing(kind, w, i));
            found.push(match counterpart {
                Some(i) => t.replay_state_fields(&said, name_of(w), fields_differing(w, i, t)),
                None => t.replay_only_recorded(&said, name_of(w)),
            });
        }
        for i in &only_is {
            if !only_was.iter().any(|w| same_thing(kind, w, i)) {
                found.push(t.replay_only_replayed(&said, name_of(i)));
            }
        }
    }
    found.truncate(most);
    found
}

/// The states of `kind`, each without its times, its ids made comparable, as JSON.
fn canonical_states(states: &Value, kind: &str, ids: &IdMap, recorded: bool) -> Vec<Value> {
    let mut out = Vec::new();
    for state in states[kind]
        .as_object()
        .into_iter()
        .flat_map(|o| o.values())
    {
        let mut state = state.clone();
        strip_volatile(&mut state);
        // An agent's queue and its notes on work under way say where it was when the run
        // stopped (a few milliseconds either way), not what it did: its steps say that.
        if let Some(o) = state.as_object_mut().filter(|_| kind == "agent") {
            for busy in ["agent_step", "working_memory", "step_lock", "working_state"] {
                o.remove(busy);
            }
        }
        // Memory entries are keyed by when they were written: their texts are what counts.
        if let Some(Value::Object(m)) = state.get_mut("persistent_memory") {
            let mut texts: Vec<Value> = m.values().cloned().collect();
            texts.sort_by_key(|v| v.to_string());
            state["persistent_memory"] = Value::Array(texts);
        }
        let text = ids.canonical(&state.to_string(), recorded);
        let mut state = serde_json::from_str(&text).unwrap_or(Value::String(text));
        // Agents working side by side add to a task's pools in whatever order they finish:
        // what the pools hold counts, not that order.
        for pool in ["shared_info_pool", "shared_conversation_pool"] {
            if let Some(Value::Array(entries)) = state.get_mut(pool) {
                entries.sort_by_key(|e| e.to_string());
            }
        }
        out.push(state);
    }
    out
}

/// The states of `a` that `b` lacks (counting repeats).
fn unmatched(a: &[Value], b: &[Value]) -> Vec<Value> {
    let mut left: Vec<&Value> = b.iter().collect();
    a.iter()
        .filter(|v| match left.iter().position(|w| w == v) {
            Some(i) => {
                left.swap_remove(i);
                false
            }
            None => true,
        })
        .cloned()
        .collect()
}

/// Whether two states of `kind` are the same thing in the two runs.
fn same_thing(kind: &str, a: &Value, b: &Value) -> bool {
    let key: &[&str] = match kind {
        "task" => &["task_id"],
        "stage" => &["stage_id"],
        "agent" => &["agent_id"],
        _ => &["agent_id", "executor", "step_intention"],
    };
    key.iter().all(|k| a[k] == b[k]) && key.iter().all(|k| a[k] != Value::String("<id>".into()))
}

/// A kind of state as the report names it.
fn kind_of(kind: &str, t: &Texts) -> String {
    match kind {
        "task" => t.replay_kind_task(),
        "stage" => t.replay_kind_stage(),
        "agent" => t.replay_kind_agent(),
        _ => t.replay_kind_step(),
    }
}

fn name_of(kind: &str, v: &Value, t: &Texts) -> String {
    let field = match kind {
        "task" => "task_name",
        "stage" => "stage_intention",
        "agent" => "agent_id",
        _ => "step_intention",
    };
    match kind {
        "step" => t.replay_step_name(
            v[field].as_str().unwrap_or("?"),
            v["agent_id"].as_str().unwrap_or("?"),
        ),
        _ => format!("\"{}\"", v[field].as_str().unwrap_or("?")),
    }
}

/// The top-level fields in which `was` and `is` differ, each with both values (cut short).
fn fields_differing(was: &Value, is: &Value, t: &Texts) -> String {
    let cut = |v: &Value| {
        let t = v.to_string();
        match t.char_indices().nth(160) {
            Some((i, _)) => format!("{}…", &t[..i]),
            None => t,
        }
    };
    let keys: std::collections::BTreeSet<&String> = was
        .as_object()
        .into_iter()
        .chain(is.as_object())
        .flat_map(|o| o.keys())
        .collect();
    keys.into_iter()
        .filter(|k| was[k.as_str()] != is[k.as_str()])
        .map(|k| t.replay_field(k, cut(&was[k.as_str()]), cut(&is[k.as_str()])))
        .collect::<Vec<_>>()
        .join("; ")
}

/// `text` with each id in it replaced by what `put` writes for it.
fn rewrite_ids(text: &str, mut put: impl FnMut(&str, &mut String)) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some((at, id)) = next_id(rest) {
        out.push_str(&rest[..at]);
        put(id, &mut out);
        rest = &rest[at + id.len()..];
    }
    out.push_str(rest);
    out
}

/// `text` with its ids left out, to compare two runs' texts.
pub fn without_ids(text: &str) -> String {
    rewrite_ids(text, |_, _| {})
}

/// The runtime's ids (UUIDs: 8-4-4-4-12 hex digits) in `text`, in order.
pub fn ids_in(text: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let mut rest = text;
    let mut offset = 0;
    while let Some((at, id)) = next_id(rest) {
        found.push(&text[offset + at..offset + at + id.len()]);
        offset += at + id.len();
        rest = &text[offset..];
    }
    found
}

/// The first id in `text` and where it starts.
fn next_id(text: &str) -> Option<(usize, &str)> {
    const LEN: usize = 36;
    let bytes = text.as_bytes();
    let mut i = 0;
    while i + LEN <= bytes.len() {
        let is_id = bytes[i..i + LEN].iter().enumerate().all(|(k, b)| match k {
            8 | 13 | 18 | 23 => *b == b'-',
            _ => b.is_ascii_hexdigit(),
        });
        let bounded = |j: Option<&u8>| j.is_none_or(|b| !b.is_ascii_alphanumeric() && *b != b'-');
        if is_id && (i == 0 || bounded(bytes.get(i - 1))) && bounded(bytes.get(i + LEN)) {
            return Some((i, &text[i..i + LEN]));
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "0b2b7c3e-1f0a-4c55-9a1e-5d6f7a8b9c0d";
    const B: &str = "11111111-2222-4333-8444-555555555555";
    const X: &str = "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee";
    const Y: &str = "99999999-8888-4777-8666-555555555554";

    #[test]
    fn two_runs_states_compare_without_times_and_with_their_ids_paired() {
        let mut ids = IdMap::default();
        ids.learn(&format!("task {A}"), &format!("task {X}"));
        let recorded = serde_json::json!({"task": {A: {"task_id": A, "task_name": "Haiku",
            "started_at": 1, "execution_state": "finished"}},
            "step": {B: {"step_id": B, "task_id": A, "executor": "think", "ended_at": 5}}});
        let replayed = serde_json::json!({"task": {X: {"task_id": X, "task_name": "Haiku",
            "started_at": 99, "execution_state": "finished"}},
            "step": {Y: {"step_id": Y, "task_id": X, "executor": "think", "ended_at": 77}}});
        assert!(state_differences(&recorded, &replayed, &ids, 10, &Texts::english()).is_empty());
        let mut failed = replayed.clone();
        failed["task"][X]["execution_state"] = "failed".into();
        let d = state_differences(&recorded, &failed, &ids, 10, &Texts::english());
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(
            d[0],
            "task \"Haiku\": execution_state was \"finished\" and is \"failed\""
        );
        let mut gone = replayed.clone();
        gone["task"] = serde_json::json!({});
        let d = state_differences(&recorded, &gone, &ids, 10, &Texts::english());
        assert_eq!(
            d,
            ["task \"Haiku\" of the recorded run is not in the replayed one"]
        );
    }

    #[test]
    fn ids_are_found_whole_and_in_order() {
        let text = format!("task_id: {A}\n- stage {B}, not x{A}y or {A}-1");
        assert_eq!(ids_in(&text), [A, B]);
        assert_eq!(
            without_ids(&format!("task {A}, stage {B}")),
            "task , stage "
        );
        assert!(ids_in("0b2b7c3e-1f0a-4c55-9a1e-5d6f7a8b9c0").is_empty());
    }

    #[test]
    fn a_recorded_text_reads_with_the_replayed_runs_ids_and_differs_only_where_it_does() {
        let mut ids = IdMap::default();
        let recorded = format!("# History\n- task_id: {A}\n- stage_id: {B}\nWrite a haiku.");
        let replayed = format!("# History\n- task_id: {X}\n- stage_id: {Y}\nWrite a haiku.");
        ids.learn(&recorded, &replayed);
        assert_eq!(ids.first_difference(&recorded, &replayed), None);
        let answer =
            format!(r#"{{"action": "finish_stage", "task_id": "{A}", "stage_id": "{B}"}}"#);
        assert_eq!(
            ids.to_replayed(&answer),
            format!(r#"{{"action": "finish_stage", "task_id": "{X}", "stage_id": "{Y}"}}"#)
        );
        let changed = replayed.replace("Write a haiku.", "Write a limerick.");
        let d = ids.first_difference(&recorded, &changed).unwrap();
        assert_eq!(d.line, 4);
        assert_eq!(d.recorded.as_deref(), Some("Write a haiku."));
        assert_eq!(d.replayed.as_deref(), Some("Write a limerick."));
        assert!(d.to_string().contains("+ replayed: Write a limerick."));
        // A pair is learnt once: a later text cannot remap an id.
        ids.learn(A, Y);
        assert_eq!(ids.to_replayed(A), X);
    }

    #[test]
    fn a_line_only_one_text_has_is_stepped_over_when_ids_are_paired() {
        let mut ids = IdMap::default();
        let recorded = format!("# Tasks\n(none)\n# Step\n- task_id: {A}\n- stage_id: {B}");
        let replayed = format!("# Tasks\n- task_id: {Y}\n# Step\n- task_id: {X}\n- stage_id: {B}");
        ids.learn(&recorded, &replayed);
        assert_eq!(
            ids.to_replayed(A),
            X,
            "not the task only the replayed text lists"
        );
        assert_eq!(ids.to_replayed(B), B, "the same id in both");
    }
}
