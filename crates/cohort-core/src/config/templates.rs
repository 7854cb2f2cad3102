//! Agent templates: what a manager can instantiate with agent_manager `init_new_agent` (role,
//! profile, skills, tools, llm). They come from the team file's `agent_templates:` — inline, or
//! from template files and folders of them — and are checked like agents (`agent.rs`).

use super::LlmConfig;
use super::agent::{Findings, Site, TeamLlm, check_body};
use super::raw::{RawTeam, RawTemplate, RawTemplateItem, RawTemplates};
use crate::state::Skill;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A validated agent template.
#[derive(Clone, Debug)]
pub struct AgentTemplate {
    /// The name managers use in `init_new_agent`.
    pub name: String,
    /// `role:`, given to every agent made from it.
    pub role: String,
    /// `profile:`, given to every agent made from it (default empty).
    pub profile: String,
    /// `skills:`, checked as an agent's are.
    pub skills: Vec<Skill>,
    /// MCP server names. A template may name a server this team lacks (templates can be shared
    /// between teams); instantiating it then fails with that reason.
    pub tools: Vec<String>,
    /// The model its agents call: its own `llm:`, else the team's.
    pub llm: LlmConfig,
    /// Where the template was written (the team file, or its own file).
    pub file: PathBuf,
}

/// Reads and checks every template the team file names. Problems go to `out`; the templates
/// returned are the ones without any.
///
/// A template's `tools` are deliberately not checked against the team's `mcp_servers`: one
/// templates folder may serve several teams, so a server this team lacks is not a mistake in
/// this file. The runtime refuses to instantiate such a template and says which server is
/// missing.
pub(super) fn load_templates(
    raw: &RawTeam,
    team_file: &Path,
    base: &Path,
    team_llm: &TeamLlm,
    out: &mut Findings,
) -> Vec<AgentTemplate> {
    let items: Vec<(String, RawTemplateItem)> = match &raw.agent_templates {
        None => Vec::new(),
        Some(RawTemplates::One(p)) => {
            vec![("agent_templates".into(), RawTemplateItem::Path(p.clone()))]
        }
        Some(RawTemplates::Many(v)) => v
            .iter()
            .enumerate()
            .map(|(i, t)| (format!("agent_templates[{i}]"), t.clone()))
            .collect(),
    };
    let mut loader = Loader {
        team_llm,
        out,
        names: BTreeMap::new(),
        templates: Vec::new(),
    };
    for (at, item) in items {
        match item {
            RawTemplateItem::Inline(t) => {
                let site = Site {
                    file: team_file,
                    prefix: format!("{at}."),
                    base,
                };
                let Some(name) = t.name.clone() else {
                    loader.out.add(
                        team_file,
                        site.field("name"),
                        "an inline template needs a name",
                    );
                    continue;
                };
                loader.check(&site, name, &t);
            }
            RawTemplateItem::Path(p) => {
                for file in loader.files(&base.join(&p), team_file, &at) {
                    loader.file(&file);
                }
            }
        }
    }
    loader.templates
}

struct Loader<'a> {
    team_llm: &'a TeamLlm,
    out: &'a mut Findings,
    /// Template name → where it was first defined, to report a second use.
    names: BTreeMap<String, PathBuf>,
    templates: Vec<AgentTemplate>,
}

impl Loader<'_> {
    /// The template files a path stands for: itself, or every `*.yaml`/`*.yml` in a folder (in
    /// name order, so problems and templates come out the same way on every machine).
    fn files(&mut self, path: &Path, team_file: &Path, at: &str) -> Vec<PathBuf> {
        if path.is_file() {
            return vec![path.to_path_buf()];
        }
        if !path.is_dir() {
            self.out
                .add(team_file, at, format!("{} does not exist", path.display()));
            return Vec::new();
        }
        match std::fs::read_dir(path) {
            Ok(entries) => {
                let mut found: Vec<PathBuf> = entries
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|f| f.is_file())
                    .filter(|f| f.extension().is_some_and(|x| x == "yaml" || x == "yml"))
                    .collect();
                found.sort();
                if found.is_empty() {
                    // Most likely a wrong path: a manager would find nobody to hire.
                    self.out.add(
                        team_file,
                        at,
                        format!("{} holds no template (*.yaml or *.yml)", path.display()),
                    );
                }
                found
            }
            Err(e) => {
                self.out.add(path, "(folder)", format!("cannot read: {e}"));
                Vec::new()
            }
        }
    }

    /// One template in its own file: fields are named from the top of that file.
    fn file(&mut self, file: &Path) {
        let text = match std::fs::read_to_string(file) {
            Ok(t) => t,
            Err(e) => return self.out.add(file, "(file)", format!("cannot read: {e}")),
        };
        let read = super::yaml::read::<RawTemplate>(&text);
        let raw = match read.value {
            Some(r) if read.slips.is_empty() => r,
            _ => {
                for s in read.slips {
                    self.out.add(file, s.field, s.message);
                }
                return;
            }
        };
        let name = raw.name.clone().unwrap_or_else(|| {
            file.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        });
        // A script a template file names is found next to that file, not next to the team file.
        let base = file
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let site = Site {
            file,
            prefix: String::new(),
            base,
        };
        self.check(&site, name, &raw);
    }

    fn check(&mut self, site: &Site, name: String, t: &RawTemplate) {
        let name = name.trim().to_owned();
        let mut ok = true;
        if let Err(why) = check_name(&name) {
            self.out.add(site.file, site.field("name"), why);
            ok = false;
        } else if let Some(first) = self.names.get(&name) {
            self.out.add(
                site.file,
                site.field("name"),
                format!(
                    "template name `{name}` is used twice (first in {})",
                    first.display()
                ),
            );
            ok = false;
        } else {
            self.names.insert(name.clone(), site.file.to_path_buf());
        }
        let body = check_body(
            site,
            "a template",
            &t.skills,
            &t.tools,
            t.llm.as_ref(),
            self.team_llm,
            self.out,
        );
        if let (true, Some(llm)) = (ok, body.llm) {
            self.templates.push(AgentTemplate {
                name,
                role: t.role.clone(),
                profile: t.profile.clone(),
                skills: body.skills,
                tools: t.tools.clone(),
                llm,
                file: site.file.to_path_buf(),
            });
        }
    }
}

/// A template name is written inside `init_new_agent` JSON and shown in prompts, so it must be
/// one plain word: no spaces, no tag brackets, no `[ ]` (kept for runtime senders' names).
fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty()
        || name
            .chars()
            .any(|c| c.is_whitespace() || matches!(c, '<' | '>' | '[' | ']'))
    {
        return Err(format!(
            "`{name}` is not a usable template name (no spaces, angle or square brackets)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::{LlmConfig, load_team};
    use crate::state::Skill;

    use crate::config::test_files::write;

    fn tmp(tag: &str) -> crate::config::test_files::TestDir {
        crate::config::test_files::tmp(&format!("templates-{tag}"))
    }

    const HEAD: &str = "llm: {provider: openai, model: m}\nagents:\n  - {id: boss, role: manager, skills: [task_manager, agent_manager]}\n";

    fn fields(problems: &[crate::config::Problem]) -> Vec<(String, String)> {
        problems
            .iter()
            .map(|p| {
                (
                    p.file.file_name().unwrap().to_string_lossy().into_owned(),
                    p.field.clone(),
                )
            })
            .collect()
    }

    #[test]
    fn inline_templates_take_the_team_llm() {
        let d = tmp("inline");
        let f = write(
            &d,
            "team.yaml",
            &format!(
                "{HEAD}agent_templates:\n  - {{name: coder, role: coder, profile: Writes code., skills: [planning, think]}}\n  - name: critic\n    role: critic\n    skills: [reflection]\n    llm: {{provider: openai, model: other}}\n"
            ),
        );
        let t = load_team(&f).unwrap();
        assert_eq!(t.templates.len(), 2);
        let coder = &t.templates[0];
        assert_eq!(
            (coder.name.as_str(), coder.profile.as_str()),
            ("coder", "Writes code.")
        );
        assert_eq!(coder.skills, vec![Skill::Planning, Skill::Think]);
        assert_eq!(coder.file, f);
        assert!(matches!(&coder.llm, LlmConfig::OpenAi { model, .. } if model == "m"));
        assert!(matches!(&t.templates[1].llm, LlmConfig::OpenAi { model, .. } if model == "other"));
        assert_eq!(
            t.templates
                .iter()
                .find(|x| x.name == "critic")
                .unwrap()
                .role,
            "critic"
        );
    }

    #[test]
    fn a_templates_folder_loads_each_file_named_by_its_stem() {
        let d = tmp("folder");
        write(
            &d,
            "templates/writer.yaml",
            "role: writer\nskills: [planning, summary]\n",
        );
        write(
            &d,
            "templates/analyst.yml",
            "name: data-analyst\nrole: analyst\nskills: [think]\n",
        );
        write(&d, "templates/notes.txt", "not a template");
        let f = write(
            &d,
            "team.yaml",
            &format!("{HEAD}agent_templates: templates\n"),
        );
        let t = load_team(&f).unwrap();
        let names: Vec<_> = t.templates.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["data-analyst", "writer"]);
        assert_eq!(t.templates[1].file, d.join("templates/writer.yaml"));
    }

    #[test]
    fn a_malformed_template_file_names_that_file_and_field() {
        let d = tmp("malformed");
        write(
            &d,
            "tpl/bad.yaml",
            "role: r\nskills: [think]\ncolour: blue\n",
        );
        write(&d, "tpl/worse.yaml", "role: r\nskills: think\n");
        let f = write(
            &d,
            "team.yaml",
            &format!("{HEAD}agent_templates: [tpl/bad.yaml, tpl/worse.yaml]\n"),
        );
        let problems = load_team(&f).unwrap_err().problems();
        let got = fields(&problems);
        assert!(
            got.contains(&("bad.yaml".into(), "colour".into())),
            "{problems:?}"
        );
        assert!(
            got.contains(&("worse.yaml".into(), "skills".into())),
            "{problems:?}"
        );
    }

    #[test]
    fn an_unknown_field_in_an_inline_template_names_its_path() {
        let d = tmp("inline-yaml");
        let f = write(
            &d,
            "team.yaml",
            &format!(
                "{HEAD}agent_templates:\n  - {{name: a, role: r, skills: [think], colour: blue}}\n"
            ),
        );
        let p = &load_team(&f).unwrap_err().problems()[0];
        assert_eq!(p.file, f);
        assert!(p.field.starts_with("agent_templates[0]"), "{p}");
        assert!(p.message.contains("colour"), "{p}");
    }

    #[test]
    fn template_problems_are_reported_with_their_fields() {
        let d = tmp("problems");
        write(
            &d,
            "tpl/dup.yaml",
            "role: r\nskills: [think]\ntools: [web]\n",
        );
        let f = write(
            &d,
            "team.yaml",
            &format!(
                "{HEAD}agent_templates:\n  - {{name: dup, role: r, skills: [think, telepathy, think]}}\n  - tpl/dup.yaml\n  - {{role: r, skills: [think]}}\n  - {{name: \"a b\", role: r, skills: [think]}}\n  - missing/\n"
            ),
        );
        let problems = load_team(&f).unwrap_err().problems();
        let got = fields(&problems);
        for want in [
            ("team.yaml", "agent_templates[0].skills[1]"),
            ("team.yaml", "agent_templates[0].skills[2]"),
            ("dup.yaml", "name"),
            ("dup.yaml", "skills"),
            ("team.yaml", "agent_templates[2].name"),
            ("team.yaml", "agent_templates[3].name"),
            ("team.yaml", "agent_templates[4]"),
        ] {
            assert!(
                got.contains(&(want.0.into(), want.1.into())),
                "missing {want:?} in {problems:?}"
            );
        }
        let twice = problems
            .iter()
            .find(|p| p.file.ends_with("dup.yaml") && p.field == "name");
        assert!(twice.unwrap().message.contains("used twice"));
        let ig = problems.iter().find(|p| p.field == "skills").unwrap();
        assert!(ig.message.contains("instruction_generation"), "{ig}");
    }

    #[test]
    fn a_template_needs_an_llm_from_itself_or_the_team() {
        let d = tmp("nollm");
        let f = write(
            &d,
            "team.yaml",
            "agents:\n  - {id: boss, role: m, skills: [task_manager], llm: {provider: openai, model: m}}\nagent_templates:\n  - {name: t, role: r, skills: [think]}\n  - {name: u, role: r, skills: [think], llm: {provider: openai}}\n",
        );
        let problems = load_team(&f).unwrap_err().problems();
        let got: Vec<_> = problems.iter().map(|p| p.field.as_str()).collect();
        assert_eq!(
            got,
            ["agent_templates[0].llm", "agent_templates[1].llm.model"],
            "{problems:?}"
        );
    }

    #[test]
    fn an_empty_templates_folder_is_a_problem() {
        let d = tmp("empty");
        std::fs::create_dir_all(d.join("none")).unwrap();
        let f = write(&d, "team.yaml", &format!("{HEAD}agent_templates: none/\n"));
        let problems = load_team(&f).unwrap_err().problems();
        assert!(
            problems
                .iter()
                .any(|p| p.field == "agent_templates" && p.message.contains("holds no template")),
            "{problems:?}"
        );
    }

    #[test]
    fn a_template_may_name_an_mcp_server_the_team_lacks() {
        let d = tmp("foreign-tool");
        let f = write(
            &d,
            "team.yaml",
            &format!(
                "{HEAD}agent_templates:\n  - {{name: browser, role: r, skills: [instruction_generation], tools: [playwright]}}\n"
            ),
        );
        let t = load_team(&f).unwrap();
        assert_eq!(t.templates[0].tools, ["playwright"]);
    }
}
