//! `cohort check`: validate a team file (and the script, prompts and templates it uses), list
//! every problem, and warn about what would only fail once the team starts (an API key variable
//! that is not set, a template naming a server the team lacks). `--strict` fails on warnings.

use super::output::count;
use cohort::config::{LlmConfig, TeamConfig, load_team};
use std::path::Path;
use std::process::ExitCode;

pub fn check(team: &Path, strict: bool) -> ExitCode {
    let cfg = match load_team(team) {
        Ok(cfg) => cfg,
        Err(e) => {
            let problems = e.problems();
            for p in &problems {
                println!("{p}");
            }
            eprintln!("{} found", count(problems.len(), "problem"));
            return ExitCode::from(1);
        }
    };
    println!(
        "{}: ok ({}, {}, prompts: {})",
        team.display(),
        count(cfg.agents.len(), "agent"),
        count(cfg.templates.len(), "agent template"),
        cfg.language
    );
    let warnings = warnings(&cfg, &|k| std::env::var_os(k).is_some());
    for w in &warnings {
        println!("warning: {w}");
    }
    if strict && !warnings.is_empty() {
        eprintln!("{} (--strict)", count(warnings.len(), "warning"));
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

/// What is valid but would fail once the team runs. `is_set` says whether an environment
/// variable is set.
pub fn warnings(cfg: &TeamConfig, is_set: &dyn Fn(&str) -> bool) -> Vec<String> {
    let mut out = Vec::new();
    let llms = cfg
        .agents
        .iter()
        .map(|a| (format!("agent `{}`", a.id), &a.llm))
        .chain(
            cfg.templates
                .iter()
                .map(|t| (format!("template `{}`", t.name), &t.llm)),
        );
    let mut told = Vec::new();
    for (who, llm) in llms {
        if let LlmConfig::OpenAi {
            api_key_env: Some(var),
            ..
        } = llm
            && !is_set(var)
            && !told.contains(var)
        {
            told.push(var.clone());
            out.push(format!(
                "{}: {who}'s LLM reads its API key from `{var}`, which is not set; the team will not start until it is",
                cfg.file.display()
            ));
        }
    }
    // Not an error (a templates folder may serve several teams), but worth knowing now rather
    // than when a manager's hire is refused.
    for t in &cfg.templates {
        for tool in t
            .tools
            .iter()
            .filter(|x| !cfg.servers.iter().any(|s| &s.name == *x))
        {
            out.push(format!(
                "{}: template `{}` names MCP server `{tool}`, which this team lacks; hiring from it will be refused",
                t.file.display(),
                t.name
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unset_api_key_variable_is_a_warning_once() {
        let cfg = load_team(Path::new("examples/openai/team.yaml")).unwrap();
        let w = warnings(&cfg, &|_| false);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("OPENAI_API_KEY") && w[0].contains("not set"));
        assert!(warnings(&cfg, &|_| true).is_empty());
        let scripted = load_team(Path::new("examples/quickstart/team.yaml")).unwrap();
        assert!(warnings(&scripted, &|_| false).is_empty());
    }
}
