//! The workspace's layers hold: no module imports one above it in a circle (only the model
//! layer's types, `state`, `event`, `message` and `notice`, refer to each other), the pure core
//! depends on no async runtime, actor, HTTP or database crate, nothing includes a file
//! through a `path` attribute, and no function outside tests grows past the house style's
//! length (`scripts/long-fns`).

use std::path::Path;
use std::process::Command;

#[test]
fn no_module_circle_outside_the_model_layer() {
    let out = Command::new("python3")
        .arg("scripts/module-cycles")
        .arg(".")
        .output()
        .expect("python3 runs scripts/module-cycles");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("circle: event, message, notice, state"),
        "{text}"
    );
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_file_is_included_through_path() {
    let mut files = Vec::new();
    rust_files(Path::new("src"), &mut files);
    rust_files(Path::new("crates"), &mut files);
    rust_files(Path::new("mcp_servers"), &mut files);
    rust_files(Path::new("tests"), &mut files);
    assert!(files.len() > 100, "{} files", files.len());
    // Spelled in two parts so that this file does not find itself.
    let attribute = concat!("#[", "path");
    let with_path: Vec<_> = files
        .iter()
        .filter(|f| std::fs::read_to_string(f).unwrap().contains(attribute))
        .collect();
    assert!(with_path.is_empty(), "{with_path:?}");
}

#[test]
fn the_core_depends_on_no_runtime_actor_http_or_database_crate() {
    let out = Command::new(env!("CARGO"))
        .args([
            "tree",
            "--locked",
            "--offline",
            "-p",
            "cohort-core",
            "-e",
            "normal",
        ])
        .args(["--prefix", "none", "--format", "{p}"])
        .output()
        .expect("cargo tree runs");
    let tree = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(tree.contains("serde "), "{tree}");
    let names: Vec<&str> = tree.lines().filter_map(|l| l.split(' ').next()).collect();
    for banned in [
        "tokio",
        "actix",
        "axum",
        "sqlx",
        "hyper",
        "reqwest",
        "rmcp",
        "async-openai",
    ] {
        assert!(
            !names.contains(&banned),
            "cohort-core depends on {banned}:\n{tree}"
        );
    }
}

/// The house style asks for functions of ~80 lines; `scripts/long-fns` lists those longer
/// (a function whose doc says "Long because …" is left out, for the reason given there).
const LONGEST_FN: usize = 80;

#[test]
fn no_function_outside_tests_is_longer_than_the_house_style_allows() {
    let out = Command::new("python3")
        .args(["scripts/long-fns", &LONGEST_FN.to_string()])
        .output()
        .expect("python3 runs scripts/long-fns");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let long = String::from_utf8_lossy(&out.stdout);
    assert!(
        long.trim().is_empty(),
        "functions over {LONGEST_FN} lines (split them by what they do):\n{long}"
    );
}

/// Every path names the crate it lives in: no crate's root brings another crate's modules in
/// under their bare names (`use cohort_core::{…}`, `use cohort_llm as llm`).
#[test]
fn no_crate_aliases_the_modules_of_another() {
    let roots = std::fs::read_dir("crates")
        .unwrap()
        .map(|e| e.unwrap().path().join("src/lib.rs"))
        .chain([Path::new("mcp_servers/src/lib.rs").to_path_buf()]);
    let mut aliasing = Vec::new();
    for root in roots {
        let text = std::fs::read_to_string(&root).unwrap();
        for line in text.lines() {
            // `use cohort_core::{…}` (a crate's root items by bare name) or `use cohort_x as y`.
            let Some(rest) = line.trim().strip_prefix("use cohort_") else {
                continue;
            };
            let krate: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let after = &rest[krate.len()..];
            if after.starts_with("::{") || after.starts_with(" as ") {
                aliasing.push(format!("{}: {}", root.display(), line.trim()));
            }
        }
    }
    assert!(aliasing.is_empty(), "{aliasing:#?}");
}

/// "agent" is the actor: no file of the core's step machine shares a name with one of the
/// agent actor's, so a name says which side it is on.
#[test]
fn the_step_machine_and_the_agent_actor_share_no_file_name() {
    let stems = |dir: &str| -> std::collections::BTreeSet<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| {
                let p = e.unwrap().path();
                (p.extension()? == "rs").then(|| p.file_stem().unwrap().to_string_lossy().into())
            })
            .filter(|s: &String| s != "mod")
            .collect()
    };
    let core = stems("crates/cohort-core/src/step");
    let actor = stems("crates/cohort-runtime/src/actors/agent");
    let shared: Vec<_> = core.intersection(&actor).collect();
    assert!(shared.is_empty(), "{shared:?}");
}
