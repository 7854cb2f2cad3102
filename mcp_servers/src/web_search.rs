//! The `web` server's search providers: SearXNG's JSON API (a server of one's own, no key),
//! Brave's Search API and Tavily's (a key from the environment), each asked for a query and
//! its answer read into one list of results.

use serde_json::{Value, json};
use std::time::Duration;

/// Which search API.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProviderKind {
    Searxng,
    Brave,
    Tavily,
}

impl ProviderKind {
    pub fn parse(name: &str) -> Option<ProviderKind> {
        match name.to_ascii_lowercase().as_str() {
            "searxng" => Some(ProviderKind::Searxng),
            "brave" => Some(ProviderKind::Brave),
            "tavily" => Some(ProviderKind::Tavily),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ProviderKind::Searxng => "searxng",
            ProviderKind::Brave => "brave",
            ProviderKind::Tavily => "tavily",
        }
    }

    /// The API's address when none is given (SearXNG has none: it is a server of one's own).
    pub fn default_url(self) -> Option<&'static str> {
        match self {
            ProviderKind::Searxng => None,
            ProviderKind::Brave => Some("https://api.search.brave.com"),
            ProviderKind::Tavily => Some("https://api.tavily.com"),
        }
    }

    /// Whether the API wants a key.
    pub fn needs_key(self) -> bool {
        !matches!(self, ProviderKind::Searxng)
    }
}

/// A search API, ready to ask.
#[derive(Clone, Debug)]
pub struct Provider {
    pub kind: ProviderKind,
    /// Its base address (no trailing `/`).
    pub url: String,
    /// Its key (read from the environment at start).
    pub key: Option<String>,
}

/// One result.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SearchResult {
    pub title: String,
    pub url: String,
    pub snippet: String,
}

impl Provider {
    /// Asks for `query`, at most `count` results, within `timeout`.
    pub async fn search(
        &self,
        http: &reqwest::Client,
        query: &str,
        count: usize,
        timeout: Duration,
    ) -> Result<Vec<SearchResult>, String> {
        let key = self.key.clone().unwrap_or_default();
        let request = match self.kind {
            ProviderKind::Searxng => http
                .get(format!("{}/search", self.url))
                .query(&[("q", query), ("format", "json")]),
            ProviderKind::Brave => http
                .get(format!("{}/res/v1/web/search", self.url))
                .query(&[("q", query), ("count", &count.to_string())])
                .header("Accept", "application/json")
                .header("X-Subscription-Token", key),
            ProviderKind::Tavily => http
                .post(format!("{}/search", self.url))
                .bearer_auth(key)
                .json(&json!({"query": query, "max_results": count})),
        };
        let name = self.kind.name();
        let response = request
            .timeout(timeout)
            .send()
            .await
            .map_err(|e| format!("the {name} search failed: {e}"))?;
        let status = response.status();
        let body: Value = response
            .json()
            .await
            .map_err(|e| format!("the {name} search answered {status} with no JSON: {e}"))?;
        if !status.is_success() {
            let said: String = body.to_string().chars().take(300).collect();
            return Err(format!("the {name} search answered {status}: {said}"));
        }
        let mut results = results_of(self.kind, &body);
        results.truncate(count);
        Ok(results)
    }
}

/// The results in an API's answer.
pub fn results_of(kind: ProviderKind, body: &Value) -> Vec<SearchResult> {
    let (list, snippet_key) = match kind {
        ProviderKind::Searxng => (&body["results"], "content"),
        ProviderKind::Brave => (&body["web"]["results"], "description"),
        ProviderKind::Tavily => (&body["results"], "content"),
    };
    let text = |v: &Value| v.as_str().unwrap_or_default().trim().to_owned();
    list.as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["url"].is_string())
        .map(|r| SearchResult {
            title: text(&r["title"]),
            url: text(&r["url"]),
            snippet: crate::web_fetch::html_to_text(&text(&r[snippet_key])),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_apis_answer_reads_as_the_same_results() {
        let searx = json!({"results": [{"title": "A", "url": "https://a.example", "content": "about <b>a</b>"}]});
        let brave = json!({"web": {"results": [{"title": "A", "url": "https://a.example", "description": "about <strong>a</strong>"}]}});
        let tavily = json!({"results": [{"title": "A", "url": "https://a.example", "content": "about a", "score": 0.9}]});
        let want = vec![SearchResult {
            title: "A".into(),
            url: "https://a.example".into(),
            snippet: "about a".into(),
        }];
        assert_eq!(results_of(ProviderKind::Searxng, &searx), want);
        assert_eq!(results_of(ProviderKind::Brave, &brave), want);
        assert_eq!(results_of(ProviderKind::Tavily, &tavily), want);
        assert!(results_of(ProviderKind::Brave, &json!({"error": "x"})).is_empty());
        assert_eq!(ProviderKind::parse("Brave"), Some(ProviderKind::Brave));
        assert_eq!(ProviderKind::parse("bing"), None);
    }
}
