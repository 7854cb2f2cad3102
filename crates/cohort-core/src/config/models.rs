//! `models:`, the team's named models (seed 004: a message may choose its model), and an
//! agent's `models:`, the names a message may choose for it. Each named model is an `llm:`
//! block, checked as one; an agent naming a model the team lacks is a problem at its field.

use super::agent::{Findings, Site, checked_llm};
use super::raw::RawLlm;
use super::team::LlmConfig;
use std::collections::BTreeMap;
use std::path::Path;

/// The team's named models that are usable; each broken one is a problem at `models.NAME.…`.
pub(super) fn named_models(
    raw: &BTreeMap<String, RawLlm>,
    file: &Path,
    base: &Path,
    out: &mut Findings,
) -> BTreeMap<String, LlmConfig> {
    let mut models = BTreeMap::new();
    for (name, l) in raw {
        let field = format!("models.{name}");
        if name.trim().is_empty() || name.chars().any(char::is_whitespace) {
            out.add(
                file,
                &field,
                "a model's name has no spaces and is not empty",
            );
            continue;
        }
        if let Some(c) = checked_llm(l, (file, &field, base), out) {
            models.insert(name.clone(), c);
        }
    }
    models
}

/// An agent's `models:`: each one of the team's, listed once.
pub(super) fn check_agent_models(
    site: &Site,
    names: &[String],
    raw: &BTreeMap<String, RawLlm>,
    out: &mut Findings,
) {
    for (j, name) in names.iter().enumerate() {
        let field = site.field(&format!("models[{j}]"));
        if names[..j].contains(name) {
            out.add(site.file, field, format!("model `{name}` is listed twice"));
        } else if !raw.contains_key(name) {
            let known = if raw.is_empty() {
                "the team file names no `models`".to_owned()
            } else {
                format!(
                    "the team's models are: {}",
                    raw.keys().cloned().collect::<Vec<_>>().join(", ")
                )
            };
            out.add(
                site.file,
                field,
                format!("unknown model `{name}` ({known})"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::load_team;
    use crate::config::test_files::{tmp, write};

    #[test]
    fn named_models_load_and_an_agent_may_only_name_the_teams() {
        let d = tmp("models");
        let f = write(
            &d,
            "team.yaml",
            "llm: {provider: openai, model: small}\nmodels:\n  strong: {provider: openai, model: big}\nagents:\n  - {id: m, role: manager, skills: [task_manager], models: [strong]}\n",
        );
        let t = load_team(&f).unwrap();
        assert!(t.models.contains_key("strong"));
        assert_eq!(t.agents[0].models, ["strong"]);

        let f = write(
            &d,
            "bad.yaml",
            "llm: {provider: openai, model: small}\nmodels:\n  strong: {provider: openai}\nagents:\n  - {id: m, role: manager, skills: [task_manager], models: [fast, fast]}\n",
        );
        let problems = load_team(&f).unwrap_err().problems();
        let fields: Vec<&str> = problems.iter().map(|p| p.field.as_str()).collect();
        assert!(fields.contains(&"models.strong.model"), "{fields:?}");
        assert!(fields.contains(&"agents[0].models[0]"), "{fields:?}");
        assert!(fields.contains(&"agents[0].models[1]"), "{fields:?}");
        let unknown = problems
            .iter()
            .find(|p| p.field == "agents[0].models[0]")
            .unwrap();
        assert!(
            unknown.message.contains("the team's models are: strong"),
            "{}",
            unknown.message
        );
    }
}
