//! A tool's refusal of a call (seed 000 §4.2/§5.3: is_param_error, then the parameters
//! repaired): judged by rules to be about the call's arguments or not, by the agent's model
//! where the rules cannot say (`Repair::RefusalJudged`), told in plain words, and, with no
//! person to fill the arguments in, the model asked to write them anew
//! (`Repair::ArgumentsReasked`). What the model and people read of it is in the team's
//! language; the tool's own words are quoted as it wrote them.

use crate::texts::Texts;
use serde_json::{Map, Value};

/// The longest part of a tool's own words kept in a description, in characters.
const SAID_SHOWN: usize = 300;

/// The longest schema or arguments text shown to the model, in characters.
const JSON_SHOWN: usize = 4_000;

/// Words with which a tool says an argument was wrong.
const ARGUMENT_WORDS: &[&str] = &[
    "invalid",
    "missing",
    "required",
    "must be",
    "must not",
    "must have",
    "should be",
    "expected",
    "not a valid",
    "out of range",
    "too long",
    "too short",
    "too large",
    "too small",
    "malformed",
    "unknown field",
    "unknown argument",
    "unknown parameter",
    "cannot be empty",
    "wrong format",
    "bad format",
];

/// Words with which a tool says something other than the arguments stopped it.
const OTHER_WORDS: &[&str] = &[
    "unknown tool",
    "authentication",
    "api key",
    "token",
    "credential",
    "not found",
    "no such",
    "does not exist",
    "permission",
    "denied",
    "forbidden",
    "unauthorized",
    "timed out",
    "timeout",
    "unavailable",
    "rate limit",
    "too many requests",
    "quota",
    "internal error",
    "conflict",
    "already exists",
    "busy",
    "locked",
    "not implemented",
];

/// What a refusal is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RefusalKind {
    /// The call's arguments: other values would be accepted. `fields` are the input's
    /// top-level fields at fault, where they can be named.
    Arguments {
        /// The fields at fault, in the schema's order.
        fields: Vec<String>,
    },
    /// Something else (a missing resource, a permission, the server's state).
    Other,
}

/// A tool's refusal of one call.
#[derive(Clone, Debug, PartialEq)]
pub struct Refusal {
    /// The tool refused.
    pub tool: String,
    /// What it said, as it said it.
    pub said: String,
    /// What the rules make of it; `None` when they cannot say.
    pub kind: Option<RefusalKind>,
}

impl Refusal {
    /// A refusal the server made as a protocol error for the call's parameters (JSON-RPC
    /// `invalid params`), or the runtime's own check against the input schema: about the
    /// arguments, unless its words say only another cause (servers send a missing resource as
    /// `invalid params` too).
    pub fn of_parameters(tool: &str, said: &str, schema: &Value) -> Refusal {
        let kind = classify(said, schema).unwrap_or_else(|| RefusalKind::Arguments {
            fields: named_fields(said, schema),
        });
        Refusal {
            tool: tool.to_owned(),
            said: said.to_owned(),
            kind: Some(kind),
        }
    }

    /// A refusal in the tool's own result (`isError`), judged by its words.
    pub fn of_result(tool: &str, said: &str, schema: &Value) -> Refusal {
        Refusal {
            tool: tool.to_owned(),
            said: said.to_owned(),
            kind: classify(said, schema),
        }
    }

    /// The refusal in plain words for a person or the model, in the language of `t`: which
    /// of the tool's fields were not accepted, and why, in the tool's own words (a JSON error
    /// read for its message).
    pub fn describe(&self, fields: &[String], t: &Texts) -> String {
        let which = match fields {
            [] => t.tool_refused_arguments(),
            [one] => t.tool_refused_field(one),
            [init @ .., last] => {
                let init: Vec<String> = init.iter().map(|f| format!("`{f}`")).collect();
                t.tool_refused_fields(init.join(", "), last)
            }
        };
        t.tool_refused(&self.tool, which, plain(&self.said))
    }
}

/// What the rules make of `said`: about the arguments when the tool says an argument is wrong
/// and nothing else stopped it (or names the field at fault), about something else when it
/// says only that; `None` when the words do not tell.
pub fn classify(said: &str, schema: &Value) -> Option<RefusalKind> {
    // Whole words only: "unexpected error" says nothing of what was expected.
    let words = format!(" {} ", words(said).join(" "));
    let says = |phrase: &&str| words.contains(&format!(" {phrase} "));
    let fields = named_fields(said, schema);
    let argument = ARGUMENT_WORDS.iter().any(says);
    let other = OTHER_WORDS.iter().any(says);
    match (argument, other) {
        (true, false) => Some(RefusalKind::Arguments { fields }),
        (true, true) if !fields.is_empty() => Some(RefusalKind::Arguments { fields }),
        (false, true) => Some(RefusalKind::Other),
        _ => None,
    }
}

/// The words of `said`, lowercased (a word: letters, digits and `_`).
fn words(said: &str) -> Vec<String> {
    said.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// The input schema's top-level fields that `said` names as words, in the schema's order.
fn named_fields(said: &str, schema: &Value) -> Vec<String> {
    let words = words(said);
    properties(schema)
        .map(|p| {
            p.keys()
                .filter(|k| words.iter().any(|w| w == &k.to_lowercase()))
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

fn properties(schema: &Value) -> Option<&Map<String, Value>> {
    schema.get("properties")?.as_object()
}

/// A tool's words made fit to quote: a JSON error read for its message, whitespace folded,
/// cut at [`SAID_SHOWN`] characters.
fn plain(said: &str) -> String {
    let message = serde_json::from_str::<Value>(said.trim())
        .ok()
        .and_then(|v| json_message(&v))
        .unwrap_or_else(|| said.to_owned());
    let folded = message.split_whitespace().collect::<Vec<_>>().join(" ");
    if folded.chars().count() > SAID_SHOWN {
        folded.chars().take(SAID_SHOWN).collect::<String>() + "…"
    } else {
        folded
    }
}

/// The message of a JSON error: `message`, `detail`, `reason` or `error` (itself a text or an
/// object holding one).
fn json_message(v: &Value) -> Option<String> {
    for key in ["message", "detail", "reason", "error"] {
        match v.get(key) {
            Some(Value::String(s)) if !s.trim().is_empty() => return Some(s.clone()),
            Some(inner @ Value::Object(_)) => {
                if let Some(m) = json_message(inner) {
                    return Some(m);
                }
            }
            _ => {}
        }
    }
    None
}

/// Where a refused call goes next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// A person fills the arguments in (a form of the fields at fault).
    Person,
    /// The agent's model writes them anew (`Repair::ArgumentsReasked`).
    Model,
    /// Nowhere: the step fails with the refusal.
    Fail,
}

/// What can be done about a refused call besides failing it.
#[derive(Clone, Copy, Debug)]
pub struct Routes {
    /// `tool_approval.ask_for_params` (None: as seed 000 says, a person where there is one).
    pub ask_for_params: Option<bool>,
    /// The team has an operator to ask.
    pub operator: bool,
    /// The agent has a model, and the policy lets it write arguments anew.
    pub model: bool,
    /// How many times it may (`repairs.reasks`).
    pub reasks: usize,
}

impl Routes {
    /// Where a call refused for its arguments goes, after `made` corrections by the model:
    /// to a person where one may be asked, else to the model while corrections are left.
    pub fn route(&self, made: usize) -> Route {
        if self.operator && self.ask_for_params != Some(false) {
            Route::Person
        } else if self.model && made < self.reasks {
            Route::Model
        } else {
            Route::Fail
        }
    }

    /// Whether judging a refusal the rules cannot place could change anything: a refusal
    /// about the arguments would go somewhere.
    pub fn worth_judging(&self, made: usize) -> bool {
        self.route(made) != Route::Fail
    }
}

/// JSON shown to the model, cut at [`JSON_SHOWN`] characters.
fn shown(v: &Value, t: &Texts) -> String {
    let text = serde_json::to_string_pretty(v).unwrap_or_default();
    if text.chars().count() > JSON_SHOWN {
        let kept: String = text.chars().take(JSON_SHOWN).collect();
        format!("{kept}\n{}", t.json_cut())
    } else {
        text
    }
}

/// One refused call, as the model is shown it (the user part of both its questions; the
/// instructions are the prompt set's `refusal_judge` and `correct_arguments` phrases).
pub struct RefusedCall<'a> {
    /// The MCP server it was made on.
    pub server: &'a str,
    /// The tool's description.
    pub description: &'a str,
    /// The tool's input schema.
    pub schema: &'a Value,
    /// The arguments refused.
    pub arguments: &'a Map<String, Value>,
    /// What the step wants.
    pub intention: &'a str,
}

impl RefusedCall<'_> {
    /// What the model is told of the call and its refusal, in the language of `t`.
    pub fn prompt(&self, refusal: &Refusal, told: &str, t: &Texts) -> String {
        t.tool_refusal_prompt(
            &refusal.tool,
            self.server,
            self.description,
            shown(self.schema, t),
            self.intention,
            shown(&Value::Object(self.arguments.clone()), t),
            told,
        )
    }
}

/// The model's judgement of a refusal, read from
/// `<tool_refusal>{"about_arguments": bool, "fields": [...]}</tool_refusal>`; the fields kept
/// are the schema's. Why it cannot be read is in the language of `t`.
pub fn read_judgement(answer: &str, schema: &Value, t: &Texts) -> Result<RefusalKind, String> {
    let v = crate::parse::tag_json(answer, "tool_refusal")
        .ok_or_else(|| t.answer_no_tag("tool_refusal"))?
        .map_err(|e| e.render(t))?;
    let about = v
        .get("about_arguments")
        .and_then(Value::as_bool)
        .ok_or_else(|| t.tool_judgement_not_bool())?;
    if !about {
        return Ok(RefusalKind::Other);
    }
    let known = properties(schema);
    let fields = v
        .get("fields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|f| known.is_some_and(|p| p.contains_key(*f)))
        .map(str::to_owned)
        .collect();
    Ok(RefusalKind::Arguments { fields })
}

/// The arguments the model wrote anew, read from `<tool_arguments>{...}</tool_arguments>`;
/// refused when they are the ones already refused (why, in the language of `t`).
pub fn read_correction(
    answer: &str,
    refused: &Map<String, Value>,
    t: &Texts,
) -> Result<Map<String, Value>, String> {
    let v = crate::parse::tag_json(answer, "tool_arguments")
        .ok_or_else(|| t.answer_no_tag("tool_arguments"))?
        .map_err(|e| e.render(t))?;
    let Value::Object(arguments) = v else {
        return Err(t.tool_arguments_not_object());
    };
    if &arguments == refused {
        return Err(t.tool_arguments_again());
    }
    Ok(arguments)
}

/// The top-level fields whose values differ between `before` and `after`, for the record.
pub fn changed_fields(before: &Map<String, Value>, after: &Map<String, Value>) -> Vec<String> {
    let mut keys: Vec<&String> = before.keys().chain(after.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| before.get(*k) != after.get(*k))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn en() -> std::sync::Arc<Texts> {
        Texts::english()
    }

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "room": {"type": "string"}, "date": {"type": "string"}, "seats": {"type": "integer"}
        }, "required": ["room", "date"]})
    }

    fn fields(kind: Option<RefusalKind>) -> Option<Vec<String>> {
        match kind? {
            RefusalKind::Arguments { fields } => Some(fields),
            RefusalKind::Other => None,
        }
    }

    #[test]
    fn a_refusal_that_faults_a_value_is_about_the_arguments_and_names_the_field() {
        let k = classify("date must be written as YYYY-MM-DD", &schema());
        assert_eq!(fields(k), Some(vec!["date".to_owned()]));
        let k = classify("Invalid value for Seats and ROOM", &schema());
        assert_eq!(fields(k), Some(vec!["room".into(), "seats".into()]));
        // Words it cannot tie to a field still say it is the arguments.
        let k = classify("a required argument is missing", &schema());
        assert_eq!(fields(k), Some(vec![]));
    }

    #[test]
    fn a_refusal_for_something_else_is_not_and_unclear_words_are_left_to_the_model() {
        assert_eq!(
            classify("permission denied for this calendar", &schema()),
            Some(RefusalKind::Other)
        );
        assert_eq!(
            classify("room 4 not found", &schema()),
            Some(RefusalKind::Other)
        );
        // Both kinds of words, no field named: the rules cannot say.
        assert_eq!(classify("invalid request: server busy", &schema()), None);
        // Both, with a field named: the arguments.
        assert!(fields(classify("date invalid: calendar busy", &schema())).is_some());
        // A field named, nothing said of it; or nothing recognisable at all.
        assert_eq!(classify("the date lies on a holiday", &schema()), None);
        assert_eq!(classify("nope", &schema()), None);
        assert_eq!(classify("desk 4 is taken until noon", &schema()), None);
        // A word inside another is not a field: `dated` is not `date`.
        assert_eq!(
            fields(classify("invalid: outdated dated entry", &schema())),
            Some(vec![])
        );
        // Nor a phrase: "unexpected" is not "expected".
        assert_eq!(classify("unexpected error", &schema()), None);
        // Credentials and unknown tools are not the arguments' fault.
        assert_eq!(
            classify("Unknown tool: book", &schema()),
            Some(RefusalKind::Other)
        );
        assert_eq!(classify("authentication required", &schema()), None);
        assert_eq!(classify("invalid API key", &schema()), None);
    }

    #[test]
    fn a_protocol_refusal_of_the_parameters_is_about_the_arguments_whatever_it_says() {
        let r = Refusal::of_parameters("book", "bad seats", &schema());
        assert_eq!(
            r.kind,
            Some(RefusalKind::Arguments {
                fields: vec!["seats".into()]
            })
        );
        let gone = Refusal::of_parameters("book", "resource not found: room://4", &schema());
        assert_eq!(gone.kind, Some(RefusalKind::Other));
    }

    #[test]
    fn the_description_names_the_fields_and_quotes_the_tool_plainly() {
        let r = Refusal::of_result(
            "book_room",
            r#"{"error": {"code": 22, "message": "date   must be\nISO"}}"#,
            &schema(),
        );
        assert_eq!(
            r.describe(&["date".into()], &en()),
            "the tool `book_room` did not accept the value of `date`: date must be ISO"
        );
        assert_eq!(
            r.describe(&["room".into(), "date".into(), "seats".into()], &en()),
            "the tool `book_room` did not accept the values of `room`, `date` and `seats`: \
             date must be ISO"
        );
        let long = Refusal::of_result("t", &"x ".repeat(400), &schema());
        assert!(long.describe(&[], &en()).ends_with('…'));
        assert!(
            long.describe(&[], &en())
                .starts_with("the tool `t` did not accept its arguments: x x")
        );
    }

    #[test]
    fn a_refused_call_goes_to_a_person_else_to_the_model_while_corrections_are_left() {
        let routes = |ask: Option<bool>, operator: bool, model: bool| Routes {
            ask_for_params: ask,
            operator,
            model,
            reasks: 2,
        };
        assert_eq!(routes(None, true, true).route(0), Route::Person);
        assert_eq!(routes(Some(true), true, true).route(5), Route::Person);
        assert_eq!(routes(Some(false), true, true).route(0), Route::Model);
        assert_eq!(routes(None, false, true).route(1), Route::Model);
        assert_eq!(routes(None, false, true).route(2), Route::Fail);
        assert_eq!(routes(None, false, false).route(0), Route::Fail);
        assert!(!routes(Some(false), true, false).worth_judging(0));
        assert!(routes(None, false, true).worth_judging(1));
    }

    #[test]
    fn the_models_judgement_is_read_and_keeps_only_the_schemas_fields() {
        let yes = r#"<tool_refusal>{"about_arguments": true, "fields": ["date", "color"]}</tool_refusal>"#;
        assert_eq!(
            read_judgement(yes, &schema(), &en()),
            Ok(RefusalKind::Arguments {
                fields: vec!["date".into()]
            })
        );
        let no = r#"<tool_refusal>{"about_arguments": false}</tool_refusal>"#;
        assert_eq!(read_judgement(no, &schema(), &en()), Ok(RefusalKind::Other));
        assert!(read_judgement("yes", &schema(), &en()).is_err());
        let vague = r#"<tool_refusal>{"about_arguments": "maybe"}</tool_refusal>"#;
        assert!(read_judgement(vague, &schema(), &en()).is_err());
    }

    #[test]
    fn a_correction_is_one_object_that_differs_from_the_refused_one() {
        let refused = json!({"room": "A", "date": "monday"});
        let refused = refused.as_object().unwrap();
        let ok = r#"<tool_arguments>{"room": "A", "date": "2026-12-07"}</tool_arguments>"#;
        let fixed = read_correction(ok, refused, &en()).unwrap();
        assert_eq!(changed_fields(refused, &fixed), ["date"]);
        let same = r#"<tool_arguments>{"date": "monday", "room": "A"}</tool_arguments>"#;
        assert!(
            read_correction(same, refused, &en())
                .unwrap_err()
                .contains("again")
        );
        assert!(read_correction("<tool_arguments>[1]</tool_arguments>", refused, &en()).is_err());
        assert!(read_correction("no tag", refused, &en()).is_err());
    }

    #[test]
    fn the_prompt_shows_the_schema_the_arguments_and_the_refusal() {
        let schema = schema();
        let arguments = json!({"room": "A", "date": "monday"});
        let call = RefusedCall {
            server: "rooms",
            description: "Book a room.",
            schema: &schema,
            arguments: arguments.as_object().unwrap(),
            intention: "Book room A for Monday",
        };
        let r = Refusal::of_result("book_room", "date must be ISO", &schema);
        let told = r.describe(&["date".into()], &en());
        let p = call.prompt(&r, &told, &en());
        for part in [
            "`book_room`",
            "`rooms`",
            "\"seats\"",
            "\"monday\"",
            "Book room A",
            &told,
        ] {
            assert!(p.contains(part), "{part} in {p}");
        }
    }

    #[test]
    fn a_chinese_team_reads_the_refusal_and_its_faults_in_chinese() {
        let zh = Texts::builtin(crate::texts::Language::Zh);
        let r = Refusal::of_result("book_room", "`date`", &schema());
        let refused = json!({"date": "monday"});
        let refused = refused.as_object().unwrap();
        let call = RefusedCall {
            server: "rooms",
            description: "",
            schema: &json!({"long": "x".repeat(JSON_SHOWN)}),
            arguments: refused,
            intention: "订会议室",
        };
        let mut said = vec![
            r.describe(&[], &zh),
            r.describe(&["date".into()], &zh),
            r.describe(&["room".into(), "date".into()], &zh),
            read_judgement("", &schema(), &zh).unwrap_err(),
            read_judgement("<tool_refusal>{}</tool_refusal>", &schema(), &zh).unwrap_err(),
            read_correction("<tool_arguments>[1]</tool_arguments>", refused, &zh).unwrap_err(),
            read_correction(
                r#"<tool_arguments>{"date": "monday"}</tool_arguments>"#,
                refused,
                &zh,
            )
            .unwrap_err(),
        ];
        let prompt = call.prompt(&r, "`told`", &zh);
        // The schema and the arguments are JSON, shown as they are.
        said.extend(
            prompt
                .lines()
                .filter(|l| !l.contains('"'))
                .map(str::to_owned),
        );
        for text in said {
            let words = crate::texts::english_words(&text, &[]);
            assert!(words.is_empty(), "{text}: {words:?}");
        }
    }
}
