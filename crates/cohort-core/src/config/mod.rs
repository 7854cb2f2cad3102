//! Team configuration: the raw YAML shape (`raw.rs`, unknown fields rejected), read with every
//! schema problem worded for the person (`yaml.rs`), and its validation into a `TeamConfig`
//! (`team.rs`) whose errors name the file and the field; `models.rs` the team's named models.

mod agent;
pub mod eval_suite;
mod http;
mod limits;
pub mod mcp_servers;
mod models;
mod raw;
mod repairs;
pub mod script;
mod team;
mod templates;
mod yaml;

pub use agent::{Price, PromptCache, StructuredOutput};
pub use http::{Http, parse_proxy};
pub use limits::{
    Compaction, Feeds, MAX_WAIT_SECS, MemoryBudget, Retention, SESSION_TTL, SHARED_POOL_KEPT,
    TaskLimits,
};
pub use raw::{RawAgent, RawLlm, RawTeam, RawTemplate, RawTemplateItem, RawTemplates};
pub use team::{
    Access, AgentConfig, ConfigError, DEFAULT_MAX_HIRED_AGENTS, HumanEntry, LlmConfig, Problem,
    TeamConfig, load_team,
};
pub use templates::AgentTemplate;

/// Files for the config tests: a fresh folder per test, and files written into it.
#[cfg(test)]
pub mod test_files {
    use std::path::{Path, PathBuf};

    /// An empty folder for one test (`tag` names it; the process id keeps runs apart),
    /// removed with everything in it when the test drops it.
    pub fn tmp(tag: &str) -> TestDir {
        let d = std::env::temp_dir().join(format!("cohort-config-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        TestDir(d)
    }

    /// A test's folder; removed when dropped, so repeated runs leave nothing in the temp dir.
    pub struct TestDir(PathBuf);

    impl std::ops::Deref for TestDir {
        type Target = Path;
        fn deref(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TestDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// Writes `text` to `dir/name` (creating sub-folders) and returns its path.
    pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }
}
