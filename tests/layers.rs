//! The crate's layers hold: no module imports one above it in a circle (only the model layer's
//! types, `state`, `event`, `message` and `notice`, refer to each other), and nothing outside
//! the tests includes a file through `#[path]`.

use std::path::Path;
use std::process::Command;

#[test]
fn no_module_circle_outside_the_model_layer() {
    let out = Command::new("python3")
        .arg("scripts/module-cycles")
        .arg("src")
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
fn actors_and_skills_are_real_modules_not_path_includes() {
    let mut files = Vec::new();
    rust_files(Path::new("src/actors"), &mut files);
    rust_files(Path::new("src/agent"), &mut files);
    rust_files(Path::new("src/skills"), &mut files);
    let with_path: Vec<_> = files
        .iter()
        .filter(|f| std::fs::read_to_string(f).unwrap().contains("#[path"))
        .collect();
    assert!(with_path.is_empty(), "{with_path:?}");
}
