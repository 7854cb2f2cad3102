//! A stub model that answers like a competent one, for tests that drive a whole team over an
//! OpenAI-compatible stub: what `cohort::bench::model_stub::competent` answers (the bench's
//! stub endpoint serves the same), read from a recorded request.

use super::openai_stub::RecordedRequest;

/// What a competent model answers: constrained JSON for the skill the schema names, or the
/// tag a free-text skill (think, summary) asks for.
pub fn competent(req: &RecordedRequest) -> String {
    let user = req.prompt().unwrap_or_default();
    let schema = req.body["response_format"]["json_schema"]["name"].as_str();
    cohort::bench::model_stub::competent(schema, user)
        .unwrap_or_else(|| panic!("the stub has no answer for {schema:?}: {user}"))
}
