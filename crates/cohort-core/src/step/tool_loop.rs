//! The native tool loop (seed 003): a tool step whose model calls tools natively gets the
//! tools of its MCP server, and of the agent's other servers, as functions; the model calls
//! them (several at once when it asks for several), each result goes back to it, until it
//! answers in text or the loop reaches its cap. Each call is recorded as a finished tool step
//! of its own. This file holds the loop's pure parts; the agent actor performs the calls.
//! What the model and the record read (why a call went nowhere, a result cut short, the call
//! steps' titles) is in the team's language.

use crate::call::media::told;
use crate::call::{ToolCall, ToolRound, ToolSpec};
use crate::parse::JsonFault;
use crate::server_description::ServerDescription;
use crate::state::{Executor, StepExecutionState, StepOrigin, StepResult, StepState};
use crate::texts::Texts;
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, HashMap};

/// The most function calls one tool step's loop may make (seed 000's AGENT_MAX_STEPS).
pub const TOOL_LOOP_CAP: usize = 25;

/// How much of a result the model is shown: its first and its last this many characters
/// (seed 001); the step records the whole result.
pub const RESULT_SHOWN: usize = 1_000;

/// The functions of a server, from its description (see `McpClient::describe`): a tool whose
/// input schema is not an object takes an object all the same.
pub fn tool_specs(description: &ServerDescription) -> Vec<ToolSpec> {
    description
        .tools
        .iter()
        .map(|t| ToolSpec {
            name: t.name.clone(),
            description: t.description.clone().unwrap_or_default(),
            parameters: match &t.input_schema {
                v @ Value::Object(_) => v.clone(),
                _ => json!({ "type": "object" }),
            },
        })
        .collect()
}

/// The functions one loop offers the model, from the servers the agent may use (the step's own
/// first), and the server and tool each name calls. A tool name that two servers share is
/// offered as `server__tool` from each, so the model can tell them apart (seed 003: one loop
/// may mix the tools of several servers).
#[derive(Clone, Debug, Default)]
pub struct ToolSet {
    /// What the model is offered, in the servers' order.
    pub specs: Vec<ToolSpec>,
    /// Each offered name: its server and the tool's own name there.
    routes: HashMap<String, (String, String)>,
}

impl ToolSet {
    /// The set of `servers`' tools, each server named with its description (see
    /// [`tool_specs`]).
    pub fn new<'a>(servers: impl IntoIterator<Item = (&'a str, &'a ServerDescription)>) -> Self {
        let listed: Vec<(&str, Vec<ToolSpec>)> = servers
            .into_iter()
            .map(|(name, description)| (name, tool_specs(description)))
            .collect();
        let mut servers_of: BTreeMap<&str, usize> = BTreeMap::new();
        for (_, specs) in &listed {
            for spec in specs {
                *servers_of.entry(spec.name.as_str()).or_default() += 1;
            }
        }
        let shared: Vec<String> = servers_of
            .into_iter()
            .filter(|(_, n)| *n > 1)
            .map(|(name, _)| name.to_owned())
            .collect();
        let mut set = ToolSet::default();
        for (server, specs) in listed {
            for mut spec in specs {
                let tool = spec.name.clone();
                if shared.contains(&tool) {
                    spec.name = format!("{}__{tool}", function_name(server));
                }
                set.routes
                    .insert(spec.name.clone(), (server.to_owned(), tool));
                set.specs.push(spec);
            }
        }
        set
    }

    /// The server and tool the offered name `name` calls, or why none (in the language of `t`).
    pub fn route(&self, name: &str, t: &Texts) -> Result<(&str, &str), String> {
        self.routes
            .get(name)
            .map(|(server, tool)| (server.as_str(), tool.as_str()))
            .ok_or_else(|| t.tool_loop_no_tool(name))
    }
}

/// A server's name as a function name may hold it (letters, digits, `_` and `-`).
fn function_name(server: &str) -> String {
    server
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// A call's arguments as the object MCP wants; an empty text is no arguments. Why they are
/// not, in the language of `t` (the model reads it as the call's result).
pub fn arguments(call: &ToolCall, t: &Texts) -> Result<Map<String, Value>, String> {
    if call.arguments.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str::<Value>(&call.arguments) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(t.tool_loop_arguments_not_object(&call.name, other)),
        Err(e) => Err(t.tool_loop_arguments_not_json(&call.name, JsonFault::of(&e).render(t))),
    }
}

/// What the model is shown of a call's result: the text of an MCP tool result (its text
/// contents, or the JSON), or the error, cut to its first and last [`RESULT_SHOWN`] characters.
pub fn shown(result: &Result<Value, String>, t: &Texts) -> String {
    let text = match result {
        Err(e) => t.tool_loop_error(e),
        Ok(v) => {
            // An image or a sound is told of in words (a model that takes images is sent them
            // beside the prompt, see `call::media`).
            let texts: Vec<String> = v["content"]
                .as_array()
                .map(|c| {
                    c.iter()
                        .filter_map(|p| p["text"].as_str().map(str::to_owned).or_else(|| told(p)))
                        .collect()
                })
                .unwrap_or_default();
            let body = if texts.is_empty() {
                v.to_string()
            } else {
                texts.join("\n")
            };
            if v["isError"] == true {
                t.tool_loop_error(body)
            } else {
                body
            }
        }
    };
    cut_middle(&text, RESULT_SHOWN, t)
}

fn cut_middle(text: &str, keep: usize, t: &Texts) -> String {
    let n = text.chars().count();
    if n <= 2 * keep {
        return text.to_owned();
    }
    let head: String = text.chars().take(keep).collect();
    let tail: String = text.chars().skip(n - keep).collect();
    format!("{head}\n{}\n{tail}", t.answer_cut(n - 2 * keep))
}

/// The finished (or failed) tool step that records one call of the loop run by `parent`, made
/// to the server and tool `route` (None: the call named no tool of the loop, and went nowhere);
/// its title and text in the language of `t`.
pub fn call_step(
    parent: &StepState,
    route: Option<(&str, &str)>,
    call: &ToolCall,
    result: &Result<Value, String>,
    retries: Vec<crate::policy::tool_retry::ToolRetry>,
    t: &Texts,
) -> StepState {
    let (executor, tool) = match route {
        Some((server, tool)) => (Executor::Tool(server.to_owned()), tool),
        None => (parent.executor.clone(), call.name.as_str()),
    };
    let mut step = StepState::new(
        parent.task_id.clone(),
        parent.stage_id.clone(),
        parent.agent_id.clone(),
        executor,
        t.tool_loop_call_intention(tool, &parent.step_intention),
        t.tool_loop_call_text(&parent.step_id),
    )
    .with_origin(StepOrigin::ToolCall {
        parent: parent.step_id.clone(),
    });
    let args = arguments(call, t).map_or_else(|_| json!(call.arguments), Value::Object);
    step.instruction_content = Some(json!({ "tool_name": tool, "arguments": args }));
    let failed = match result {
        Ok(v) => v["isError"] == true,
        Err(_) => true,
    };
    step.execute_result = Some(match result {
        Ok(v) => StepResult::output(v.clone()),
        Err(e) => StepResult::failed(e.clone()),
    });
    if let Some(r) = step.execute_result.as_mut() {
        r.tool_retries = retries;
    }
    step.execution_state = if failed {
        StepExecutionState::Failed
    } else {
        StepExecutionState::Finished
    };
    step
}

/// The loop's state between its LLM calls.
#[derive(Clone, Debug, Default)]
pub struct ToolLoop {
    /// The rounds so far (calls and what they returned), sent with every later request.
    pub rounds: Vec<ToolRound>,
    /// Calls made so far.
    pub calls: usize,
}

impl ToolLoop {
    /// Whether `more` calls still fit under the cap.
    pub fn may_call(&self, more: usize) -> bool {
        self.calls + more <= TOOL_LOOP_CAP
    }

    /// What the tool step records when the model has answered.
    pub fn result(&self, answer: &str) -> Value {
        json!({ "answer": answer, "tool_calls": self.calls })
    }
}

/// Whether a tool step runs as a native loop: the agent's model calls tools natively and no
/// instruction_generation step wrote the call.
pub fn runs_natively(native_tools: bool, step: &StepState) -> bool {
    native_tools && matches!(step.executor, Executor::Tool(_)) && step.instruction_content.is_none()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::StageRef;
    use crate::server_description::ToolDescription;

    fn en() -> std::sync::Arc<Texts> {
        Texts::english()
    }

    fn call(name: &str, args: &str) -> ToolCall {
        ToolCall {
            id: "c".into(),
            name: name.into(),
            arguments: args.into(),
        }
    }

    #[test]
    fn a_servers_tools_become_functions() {
        let d: ServerDescription = serde_json::from_value(json!({"tools": [
            {"name": "read_file", "description": "Read", "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}},
            {"name": "ping"}
        ]}))
        .unwrap();
        let specs = tool_specs(&d);
        assert_eq!(specs.len(), 2);
        assert_eq!(specs[0].parameters["properties"]["path"]["type"], "string");
        assert_eq!(specs[1].parameters, json!({"type": "object"}));
        assert_eq!(specs[1].description, "");
    }

    #[test]
    fn a_loop_offers_every_servers_tools_and_qualifies_a_shared_name() {
        let tools = |names: &[&str]| ServerDescription {
            tools: names
                .iter()
                .map(|n| ToolDescription {
                    name: (*n).to_owned(),
                    ..ToolDescription::default()
                })
                .collect(),
            ..ServerDescription::default()
        };
        let (workspace, notes) = (
            tools(&["read_file", "search"]),
            tools(&["add_note", "search"]),
        );
        let set = ToolSet::new([("workspace", &workspace), ("my notes", &notes)]);
        let names: Vec<&str> = set.specs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "read_file",
                "workspace__search",
                "add_note",
                "my_notes__search"
            ],
            "the step's own server first, a shared name qualified on both"
        );
        assert_eq!(set.route("add_note", &en()), Ok(("my notes", "add_note")));
        assert_eq!(
            set.route("my_notes__search", &en()),
            Ok(("my notes", "search"))
        );
        assert_eq!(
            set.route("workspace__search", &en()),
            Ok(("workspace", "search"))
        );
        assert!(
            set.route("search", &en())
                .unwrap_err()
                .contains("no tool is named `search`")
        );
    }

    #[test]
    fn arguments_must_be_an_object() {
        let en = en();
        assert!(arguments(&call("x", ""), &en).unwrap().is_empty());
        assert_eq!(arguments(&call("x", r#"{"a": 1}"#), &en).unwrap()["a"], 1);
        assert_eq!(
            arguments(&call("x", "[1]"), &en).unwrap_err(),
            "the arguments of `x` are not a JSON object: [1]"
        );
        assert_eq!(
            arguments(&call("x", "{oops"), &en).unwrap_err(),
            "the arguments of `x` are not JSON: key must be a string at line 1 column 2"
        );
    }

    #[test]
    fn a_long_result_is_shown_by_its_start_and_end() {
        let long = format!("HEAD{}TAIL", "x".repeat(5000));
        let r = Ok(json!({"content": [{"type": "text", "text": long}]}));
        let s = shown(&r, &en());
        assert!(s.starts_with("HEAD") && s.ends_with("TAIL") && s.contains("characters cut"));
        assert!(s.chars().count() < 2 * RESULT_SHOWN + 50);
        let e = shown(
            &Ok(json!({"content": [{"type": "text", "text": "no such file"}], "isError": true})),
            &en(),
        );
        assert_eq!(e, "error: no such file");
    }

    #[test]
    fn each_call_is_a_step_of_its_own_and_the_loop_is_capped() {
        let parent = StepState::new(
            "t".into(),
            StageRef::NoRelative,
            "w".into(),
            Executor::Tool("ws".into()),
            "write it",
            "",
        );
        assert!(runs_natively(true, &parent) && !runs_natively(false, &parent));
        let s = call_step(
            &parent,
            Some(("notes", "write_file")),
            &call("write_file", r#"{"path": "a"}"#),
            &Ok(json!({"content": []})),
            Vec::new(),
            &en(),
        );
        assert_eq!(s.execution_state, StepExecutionState::Finished);
        assert_eq!(
            s.executor,
            Executor::Tool("notes".into()),
            "the server it went to"
        );
        assert!(s.origin.is_tool_call() && !parent.origin.is_tool_call());
        assert_eq!(s.instruction_content.unwrap()["arguments"]["path"], "a");
        let retried = vec![crate::policy::tool_retry::ToolRetry {
            error: "timeout".into(),
            waited_ms: 250,
        }];
        let f = call_step(
            &parent,
            None,
            &call("x", "{}"),
            &Err("down".into()),
            retried,
            &en(),
        );
        assert_eq!(f.execution_state, StepExecutionState::Failed);
        assert_eq!(f.executor, parent.executor);
        assert_eq!(f.execute_result.unwrap().tool_retries.len(), 1, "kept");

        let mut l = ToolLoop::default();
        assert!(l.may_call(TOOL_LOOP_CAP));
        l.calls = TOOL_LOOP_CAP - 1;
        assert!(l.may_call(1) && !l.may_call(2));
    }

    #[test]
    fn a_chinese_loop_tells_its_model_in_chinese() {
        let zh = Texts::builtin(crate::texts::Language::Zh);
        let parent = StepState::new(
            "t".into(),
            StageRef::NoRelative,
            "w".into(),
            Executor::Tool("ws".into()),
            "写一首诗",
            "",
        );
        let failed = Err("`ENOENT`".to_owned());
        let step = call_step(&parent, None, &call("x", "[1]"), &failed, Vec::new(), &zh);
        let long = Ok(json!({"content": [{"type": "text", "text": "字".repeat(5000)}]}));
        let said = [
            step.step_intention,
            step.text_content,
            ToolSet::default().route("search", &zh).unwrap_err(),
            arguments(&call("x", "[1]"), &zh).unwrap_err(),
            arguments(&call("x", "{oops"), &zh).unwrap_err(),
            shown(&failed, &zh),
            shown(&long, &zh),
        ];
        for text in said {
            let words = crate::texts::english_words(&text, &[]);
            assert!(words.is_empty(), "{text}: {words:?}");
        }
    }
}
