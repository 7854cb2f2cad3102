//! The web console built into the binary (`web/` as it was at build time), so an installed
//! `cohort` serves it from any directory; `cohort serve --web DIR` serves a folder instead.

use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use std::path::Path;

/// Every file of `web/`: its path, content type and bytes. A test checks none is missing.
pub const FILES: &[(&str, &str, &[u8])] = &[
    (
        "index.html",
        HTML,
        include_bytes!("../../../../web/index.html"),
    ),
    (
        "style.css",
        CSS,
        include_bytes!("../../../../web/style.css"),
    ),
    ("app.js", JS, include_bytes!("../../../../web/app.js")),
    ("ctx.js", JS, include_bytes!("../../../../web/ctx.js")),
    ("tasks.js", JS, include_bytes!("../../../../web/tasks.js")),
    ("agents.js", JS, include_bytes!("../../../../web/agents.js")),
    ("chat.js", JS, include_bytes!("../../../../web/chat.js")),
    (
        "conversations.js",
        JS,
        include_bytes!("../../../../web/conversations.js"),
    ),
    (
        "composer.js",
        JS,
        include_bytes!("../../../../web/composer.js"),
    ),
    (
        "control.js",
        JS,
        include_bytes!("../../../../web/control.js"),
    ),
    ("api.js", JS, include_bytes!("../../../../web/api.js")),
    ("calls.js", JS, include_bytes!("../../../../web/calls.js")),
    (
        "decisions.js",
        JS,
        include_bytes!("../../../../web/decisions.js"),
    ),
    ("dom.js", JS, include_bytes!("../../../../web/dom.js")),
    ("fork.js", JS, include_bytes!("../../../../web/fork.js")),
    (
        "plan_check.js",
        JS,
        include_bytes!("../../../../web/plan_check.js"),
    ),
    (
        "failures.js",
        JS,
        include_bytes!("../../../../web/failures.js"),
    ),
    ("graph.js", JS, include_bytes!("../../../../web/graph.js")),
    ("plan.js", JS, include_bytes!("../../../../web/plan.js")),
    ("nodes.js", JS, include_bytes!("../../../../web/nodes.js")),
    ("media.js", JS, include_bytes!("../../../../web/media.js")),
    (
        "attachments.js",
        JS,
        include_bytes!("../../../../web/attachments.js"),
    ),
    ("choice.js", JS, include_bytes!("../../../../web/choice.js")),
    (
        "timeline.js",
        JS,
        include_bytes!("../../../../web/timeline.js"),
    ),
    ("store.js", JS, include_bytes!("../../../../web/store.js")),
    ("i18n.js", JS, include_bytes!("../../../../web/i18n.js")),
    (
        "lang_en.json",
        JSON,
        include_bytes!("../../../../web/lang_en.json"),
    ),
    (
        "lang_zh.json",
        JSON,
        include_bytes!("../../../../web/lang_zh.json"),
    ),
    ("text.js", JS, include_bytes!("../../../../web/text.js")),
    (
        "waiting.js",
        JS,
        include_bytes!("../../../../web/waiting.js"),
    ),
];

const HTML: &str = "text/html; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
/// The console's catalogs, imported as JSON modules: a browser takes them only with this type.
const JSON: &str = "application/json";

/// Answers a console request from the built-in files (`/` is `index.html`).
pub async fn embedded(uri: Uri) -> Response {
    let path = uri.path().trim_start_matches('/');
    let path = if path.is_empty() { "index.html" } else { path };
    match FILES.iter().find(|(name, ..)| *name == path) {
        Some((_, kind, bytes)) => (
            [
                (header::CONTENT_TYPE, *kind),
                // The console changes with the binary: a browser must ask again.
                (header::CACHE_CONTROL, "no-cache"),
            ],
            *bytes,
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "no such page").into_response(),
    }
}

/// A console folder given with `--web` must hold an `index.html`: a typo is reported at start,
/// not as a blank page later.
pub fn check_dir(dir: &Path) -> Result<(), String> {
    if dir.join("index.html").is_file() {
        Ok(())
    } else {
        Err(format!(
            "--web {}: no index.html there (leave --web out to serve the built-in console)",
            dir.display()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_of_web_is_built_in() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../web");
        let mut missing = Vec::new();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            if !FILES.iter().any(|(n, ..)| *n == name) {
                missing.push(name);
            }
        }
        assert!(missing.is_empty(), "add to console::FILES: {missing:?}");
    }

    #[test]
    fn a_folder_without_index_html_is_refused() {
        assert!(
            check_dir(Path::new("/nonexistent"))
                .unwrap_err()
                .contains("/nonexistent")
        );
        assert!(check_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../web")).is_ok());
    }
}
