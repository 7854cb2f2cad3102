//! StepResult: what a step produced (SPEC §2 `execute_result`). The runtime's own facts about
//! the step (why it failed, the answers it asked again about, who cancelled it, whether it was
//! dropped unrun) are typed fields; what the skill parsed or the tool returned is the step's
//! output, kept as the answer's own JSON. On the wire both sit side by side in one object, as
//! `execute_result` always read.

use crate::ids::{AgentId, StepId};
use crate::policy::Fired;
use serde::de::Deserializer;
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Where a step that waits for a person keeps, in its result, the arguments it asks for
/// (`step::params`).
pub const PARAMS_KEY: &str = "waiting_for_param";
/// Where a step keeps the question its call's server asks a person (`step::elicitation`).
pub const ELICITATION_KEY: &str = "elicitation";

/// A step's `execute_result`: its output plus the runtime's typed facts about it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepResult {
    /// What the skill parsed (`think`, `planned_step`, …) or the tool returned, and what a
    /// person decided on it (`approved`, `plan_check`, …).
    pub output: Map<String, Value>,
    /// Why the step failed (or was cancelled).
    pub error: Option<String>,
    /// The model's answer that could not be used, kept with the failure.
    pub answer: Option<Value>,
    /// The answers that could not be used and were asked about again, each with its error.
    pub reasked: Vec<Try>,
    /// Who cancelled the step, and why.
    pub cancelled: Option<Cancelled>,
    /// Removed before it ran, because its stage or task ended.
    pub dropped: bool,
    /// The repairs the runtime made to the model's answer (`policy::repairs`).
    pub repairs: Vec<Fired>,
    /// A step a restart cut off runs again as this step: the steps that waited for it wait
    /// for that one (`step::dependencies`).
    pub runs_again_as: Option<StepId>,
    /// A tool step's call made again after a passing failure, each try that failed
    /// (`policy::tool_retry`).
    pub tool_retries: Vec<crate::policy::tool_retry::ToolRetry>,
}

/// One answer that could not be used.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Try {
    /// Why it could not be used.
    pub error: String,
    /// The model's answer as it came.
    pub answer: String,
}

/// Who cancelled a step and why (`by` is absent when the runtime did, as its work ended).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cancelled {
    /// The person who cancelled it; absent when the runtime did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<AgentId>,
    /// Why it was cancelled.
    pub reason: String,
}

const ERROR: &str = "error";
const ANSWER: &str = "answer";
const REASKED: &str = "reasked";
const CANCELLED: &str = "cancelled";
const DROPPED: &str = "dropped";
const REPAIRS: &str = "repairs";
const RUNS_AGAIN_AS: &str = "runs_again_as";
const TOOL_RETRIES: &str = "tool_retries";

impl StepResult {
    /// A result that is the skill's or tool's output (a JSON object; anything else is kept
    /// under `result`).
    pub fn output(v: Value) -> Self {
        let output = match v {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            other => Map::from_iter([("result".to_owned(), other)]),
        };
        StepResult {
            output,
            ..Default::default()
        }
    }

    /// A failure with its reason.
    pub fn failed(reason: impl Into<String>) -> Self {
        StepResult {
            error: Some(reason.into()),
            ..Default::default()
        }
    }

    /// What `rule` changed, when it fired on the step.
    pub fn fired(&self, rule: crate::policy::Repair) -> Option<&str> {
        self.repairs
            .iter()
            .find(|f| f.rule == rule)
            .map(|f| f.what.as_str())
    }

    /// The output read as a skill's typed result (`skills::think::Thought`, …): what code
    /// reads of a skill's answer, never walked by key; none when the output is not that shape.
    pub fn read<T: serde::de::DeserializeOwned>(&self) -> Option<T> {
        T::deserialize(Value::Object(self.output.clone())).ok()
    }

    /// One field of the output.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.output.get(key)
    }

    /// Sets one field of the output.
    pub fn set(&mut self, key: &str, value: Value) {
        self.output.insert(key.to_owned(), value);
    }

    /// [`cap_str`](super::cap_str) on every text of the result.
    pub fn cap(&mut self, max: usize) {
        self.output
            .values_mut()
            .for_each(|v| super::cap_value(v, max));
        if let Some(e) = &mut self.error {
            super::cap_str(e, max);
        }
        if let Some(a) = &mut self.answer {
            super::cap_value(a, max);
        }
        for t in &mut self.reasked {
            super::cap_str(&mut t.error, max);
            super::cap_str(&mut t.answer, max);
        }
        for r in &mut self.tool_retries {
            super::cap_str(&mut r.error, max);
        }
    }

    /// Its bytes in memory, roughly (see [`Held`](super::Held)).
    pub fn held_bytes(&self) -> usize {
        let output: usize = self
            .output
            .iter()
            .map(|(k, v)| k.len() + super::value_bytes(v))
            .sum();
        output
            + self.error.as_ref().map_or(0, String::len)
            + self.answer.as_ref().map_or(0, super::value_bytes)
            + self
                .reasked
                .iter()
                .map(|t| t.error.len() + t.answer.len())
                .sum::<usize>()
            + self
                .repairs
                .iter()
                .map(|f| 32 + f.what.len())
                .sum::<usize>()
            + self
                .tool_retries
                .iter()
                .map(|r| 16 + r.error.len())
                .sum::<usize>()
    }

    /// The result as one JSON object, as the wire carries it.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// The result as its wire JSON, on one line.
impl std::fmt::Display for StepResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&serde_json::to_string(self).map_err(|_| std::fmt::Error)?)
    }
}

/// A field of the output (`Null` when it has none), as `Value` indexes.
impl std::ops::Index<&str> for StepResult {
    type Output = Value;

    fn index(&self, key: &str) -> &Value {
        static NULL: Value = Value::Null;
        self.output.get(key).unwrap_or(&NULL)
    }
}

impl Serialize for StepResult {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        for (k, v) in &self.output {
            map.serialize_entry(k, v)?;
        }
        if let Some(e) = &self.error {
            map.serialize_entry(ERROR, e)?;
        }
        if let Some(a) = &self.answer {
            map.serialize_entry(ANSWER, a)?;
        }
        if !self.reasked.is_empty() {
            map.serialize_entry(REASKED, &self.reasked)?;
        }
        if let Some(c) = &self.cancelled {
            map.serialize_entry(CANCELLED, c)?;
        }
        if self.dropped {
            map.serialize_entry(DROPPED, &true)?;
        }
        if !self.repairs.is_empty() {
            map.serialize_entry(REPAIRS, &self.repairs)?;
        }
        if let Some(id) = &self.runs_again_as {
            map.serialize_entry(RUNS_AGAIN_AS, id)?;
        }
        if !self.tool_retries.is_empty() {
            map.serialize_entry(TOOL_RETRIES, &self.tool_retries)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for StepResult {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let output = Map::deserialize(d)?;
        Ok(StepResult::from_map(output))
    }
}

impl StepResult {
    /// The runtime's facts taken out of one JSON object where they have their types; what is
    /// left (a tool's own `error` object, say) stays output.
    fn from_map(mut output: Map<String, Value>) -> Self {
        fn take<T: serde::de::DeserializeOwned>(m: &mut Map<String, Value>, k: &str) -> Option<T> {
            let v = m.get(k)?;
            let typed = serde_json::from_value(v.clone()).ok()?;
            m.remove(k);
            Some(typed)
        }
        let error = take::<String>(&mut output, ERROR);
        let reasked = take::<Vec<Try>>(&mut output, REASKED).unwrap_or_default();
        let cancelled = take::<Cancelled>(&mut output, CANCELLED);
        let dropped = take::<bool>(&mut output, DROPPED).unwrap_or(false);
        let repairs = take::<Vec<Fired>>(&mut output, REPAIRS).unwrap_or_default();
        let runs_again_as = take::<StepId>(&mut output, RUNS_AGAIN_AS);
        let tool_retries = take(&mut output, TOOL_RETRIES).unwrap_or_default();
        // The raw answer is kept with a failure only.
        let answer = error.as_ref().and_then(|_| output.remove(ANSWER));
        StepResult {
            output,
            error,
            answer,
            reasked,
            cancelled,
            dropped,
            repairs,
            runs_again_as,
            tool_retries,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_wire_form_is_one_object_and_reads_back_the_same() {
        let r = StepResult {
            output: Map::from_iter([("think".to_owned(), json!("rain"))]),
            error: Some("no tag".into()),
            answer: Some(json!("raw")),
            reasked: vec![Try {
                error: "e".into(),
                answer: "a".into(),
            }],
            cancelled: Some(Cancelled {
                by: Some("op".into()),
                reason: "enough".into(),
            }),
            dropped: true,
            repairs: vec![Fired::new(crate::policy::Repair::LoopCut, "cut")],
            runs_again_as: Some("copy".into()),
            tool_retries: vec![crate::policy::tool_retry::ToolRetry {
                error: "timed out".into(),
                waited_ms: 250,
            }],
        };
        let wire = serde_json::to_value(&r).unwrap();
        assert_eq!(
            wire,
            json!({"think": "rain", "error": "no tag", "answer": "raw",
                   "reasked": [{"error": "e", "answer": "a"}],
                   "cancelled": {"by": "op", "reason": "enough"}, "dropped": true,
                   "repairs": [{"rule": "loop_cut", "what": "cut"}], "runs_again_as": "copy",
                   "tool_retries": [{"error": "timed out", "waited_ms": 250}]})
        );
        assert_eq!(serde_json::from_value::<StepResult>(wire).unwrap(), r);
    }

    #[test]
    fn a_tools_own_keys_stay_its_output() {
        let tool = json!({"content": [], "isError": true, "error": {"code": 7}, "answer": 42});
        let r: StepResult = serde_json::from_value(tool.clone()).unwrap();
        assert_eq!(r.error, None);
        assert_eq!(r.answer, None);
        assert_eq!(r.to_value(), tool);
    }
}
