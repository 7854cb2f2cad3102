//! An endpoint that stopped answering (connection refused, 5xx, 429, a timeout, a broken
//! stream: not a bad answer) does not end the work waiting on it. Every agent of an endpoint
//! shares one `Breaker`: after a call fails that way [`OPEN_AFTER`] times in a row, the breaker
//! opens and the calls wait instead of hammering the server; one probe goes out after a
//! backoff (doubling, up to [`BACKOFF_MAX`]), and the first answer closes it and lets every
//! waiting call go again. Each call waits at most `patience` in all (`waits.model_secs`), then
//! fails with [`LlmError::EndpointDown`], which ends its task as failed with that reason.
//!
//! A waiting call tells its step (the request's [`ModelWaitReport`]) when its wait begins and
//! ends, so the console and `cohort run` show "waiting for the model endpoint since …".
//! Retried calls are the same call again: nothing of the step changed while it waited.

use super::{ChatModel, ChatReply, ChatRequest, LlmError};
use crate::state::ModelWait;
use futures::future::BoxFuture;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// Calls failed in a row (each after its provider's own retries) that open the breaker.
pub const OPEN_AFTER: u32 = 2;
/// The first wait before a probe, and the longest.
pub const BACKOFF_FIRST: Duration = Duration::from_secs(1);
pub const BACKOFF_MAX: Duration = Duration::from_secs(15);
/// The pause before a call is made again while the breaker is still closed.
const RETRY_PAUSE: Duration = Duration::from_millis(500);

/// Where a call says that its wait for the endpoint began (`Some`) or ended (`None`).
#[derive(Clone)]
pub struct ModelWaitReport(Arc<dyn Fn(Option<ModelWait>) + Send + Sync>);

impl ModelWaitReport {
    pub fn new(tell: impl Fn(Option<ModelWait>) + Send + Sync + 'static) -> Self {
        ModelWaitReport(Arc::new(tell))
    }

    fn tell(&self, wait: Option<ModelWait>) {
        (self.0)(wait)
    }
}

impl std::fmt::Debug for ModelWaitReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ModelWaitReport")
    }
}

/// Whether an error says the endpoint did not answer (worth waiting for), not that its answer
/// was unusable or the request wrong.
pub fn is_outage(e: &LlmError) -> bool {
    match e {
        LlmError::Http { status, .. } => *status == 408 || *status >= 500,
        LlmError::RateLimited { .. }
        | LlmError::Timeout(_)
        | LlmError::Stalled(_)
        | LlmError::Connection(_) => true,
        _ => false,
    }
}

/// What the breaker knows of its endpoint.
#[derive(Debug)]
struct Health {
    failures: u32,
    /// What the endpoint last answered when it failed.
    last: Option<String>,
    /// When the next probe may go, while open.
    probe_at: Option<Instant>,
    probing: bool,
    backoff: Duration,
}

/// What a call may do now.
enum Admit {
    Go { probe: bool },
    WaitUntil(Instant),
}

impl Health {
    fn admit(&mut self, now: Instant) -> Admit {
        match self.probe_at {
            None => Admit::Go { probe: false },
            Some(at) if now >= at && !self.probing => {
                self.probing = true;
                Admit::Go { probe: true }
            }
            // A probe is out: wait for what it learns (a change wakes the waiters).
            Some(at) => Admit::WaitUntil(at.max(now + self.backoff)),
        }
    }

    fn failed(&mut self, now: Instant, e: &LlmError) {
        self.failures += 1;
        self.last = Some(e.to_string());
        self.probing = false;
        if self.failures >= OPEN_AFTER {
            self.probe_at = Some(now + self.backoff);
            self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
        }
    }

    fn answered(&mut self) {
        *self = Health::default();
    }
}

impl Default for Health {
    fn default() -> Self {
        Health {
            failures: 0,
            last: None,
            probe_at: None,
            probing: false,
            backoff: BACKOFF_FIRST,
        }
    }
}

pub struct Breaker {
    inner: Arc<dyn ChatModel>,
    health: Arc<Mutex<Health>>,
    /// Bumped on every change of health, so waiting calls look again at once.
    changed: watch::Sender<u64>,
    patience: Duration,
}

impl Breaker {
    /// `patience`: the longest one call waits for the endpoint in all.
    pub fn new(inner: Arc<dyn ChatModel>, patience: Duration) -> Arc<Self> {
        Arc::new(Breaker {
            inner,
            health: Arc::default(),
            changed: watch::Sender::new(0),
            patience,
        })
    }

    /// Whether the breaker is open now (calls wait for a probe).
    pub fn is_open(&self) -> bool {
        self.lock().probe_at.is_some()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Health> {
        self.health.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A call's own record of its wait.
struct Waiting {
    since: Option<(i64, Instant)>,
    report: Option<ModelWaitReport>,
}

impl Waiting {
    fn began(&mut self, reason: &str) {
        if self.since.is_none() {
            let at = chrono::Utc::now().timestamp_millis();
            self.since = Some((at, Instant::now()));
            tracing::warn!("the model endpoint did not answer ({reason}); waiting for it");
            if let Some(r) = &self.report {
                r.tell(Some(ModelWait {
                    since: at,
                    reason: reason.to_owned(),
                }));
            }
        }
    }

    fn ended(&mut self) {
        if self.since.take().is_some()
            && let Some(r) = &self.report
        {
            r.tell(None);
        }
    }

    fn gave_up(&self, patience: Duration, last: Option<String>) -> LlmError {
        LlmError::EndpointDown {
            waited: self.since.map_or(patience, |(_, at)| at.elapsed()),
            last: last.unwrap_or_else(|| "no answer".into()),
        }
    }
}

impl ChatModel for Breaker {
    super::delegate_to_inner!();

    fn chat(&self, request: ChatRequest) -> BoxFuture<'static, Result<ChatReply, LlmError>> {
        let (inner, health, patience) = (self.inner.clone(), self.health.clone(), self.patience);
        let changed = self.changed.clone();
        Box::pin(async move {
            let deadline = Instant::now() + patience;
            let mut waiting = Waiting {
                since: None,
                report: request.model_wait.clone(),
            };
            let mut seen = changed.subscribe();
            loop {
                let (admitted, last) = {
                    let mut h = health.lock().unwrap_or_else(|p| p.into_inner());
                    (h.admit(Instant::now()), h.last.clone())
                };
                let probe = match admitted {
                    Admit::Go { probe } => probe,
                    Admit::WaitUntil(_) if Instant::now() >= deadline => {
                        return Err(waiting.gave_up(patience, last));
                    }
                    Admit::WaitUntil(at) => {
                        waiting.began(last.as_deref().unwrap_or("the endpoint is not answering"));
                        seen.mark_unchanged();
                        let until = at.min(deadline);
                        tokio::select! {
                            _ = tokio::time::sleep_until(until) => {}
                            _ = seen.changed() => {}
                        }
                        continue;
                    }
                };
                let answer = inner.chat(request.clone()).await;
                let outage = answer.as_ref().err().filter(|e| is_outage(e));
                let was_failing = {
                    let mut h = health.lock().unwrap_or_else(|p| p.into_inner());
                    let was_failing = h.failures > 0;
                    match outage {
                        Some(e) => h.failed(Instant::now(), e),
                        None => h.answered(),
                    }
                    was_failing
                };
                let Some(e) = outage else {
                    if was_failing {
                        changed.send_modify(|n| *n += 1);
                    }
                    waiting.ended();
                    return answer;
                };
                changed.send_modify(|n| *n += 1);
                let e = e.to_string();
                waiting.began(&e);
                if Instant::now() >= deadline {
                    return Err(waiting.gave_up(patience, Some(e)));
                }
                if !probe {
                    tokio::time::sleep(RETRY_PAUSE.min(deadline - Instant::now())).await;
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::TokenUsage;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Down (HTTP 500) until `up_at` calls have been made; counts the calls.
    struct Flaky {
        calls: AtomicUsize,
        up_at: usize,
    }

    impl ChatModel for Arc<Flaky> {
        fn chat(&self, _: ChatRequest) -> BoxFuture<'static, Result<ChatReply, LlmError>> {
            let n = self.calls.fetch_add(1, Ordering::SeqCst);
            let up = n + 1 >= self.up_at;
            Box::pin(async move {
                if up {
                    Ok(ChatReply {
                        text: "ok".into(),
                        usage: TokenUsage::default(),
                        cut: None,
                        tool_calls: Vec::new(),
                    })
                } else {
                    Err(LlmError::Http {
                        status: 500,
                        body: "down".into(),
                    })
                }
            })
        }
    }

    fn flaky(up_at: usize) -> Arc<Flaky> {
        Arc::new(Flaky {
            calls: AtomicUsize::new(0),
            up_at,
        })
    }

    #[tokio::test(start_paused = true)]
    async fn calls_wait_for_an_endpoint_that_comes_back_and_say_so_once() {
        let endpoint = flaky(6);
        let breaker = Breaker::new(Arc::new(endpoint.clone()), Duration::from_secs(600));
        let told = Arc::new(Mutex::new(Vec::new()));
        let sink = told.clone();
        let mut request = ChatRequest::test("a", "think");
        request.model_wait = Some(ModelWaitReport::new(move |w| {
            sink.lock().unwrap().push(w.map(|w| w.reason))
        }));
        let answer = breaker.chat(request).await.unwrap();
        assert_eq!(answer.text, "ok");
        assert_eq!(endpoint.calls.load(Ordering::SeqCst), 6);
        let told = told.lock().unwrap();
        assert_eq!(told.len(), 2, "{told:?}");
        assert!(told[0].as_deref().unwrap().contains("HTTP 500"));
        assert_eq!(told[1], None, "the wait ended");
        assert!(!breaker.is_open());
    }

    #[tokio::test(start_paused = true)]
    async fn an_open_breaker_sends_one_probe_at_a_time_not_every_waiting_call() {
        let endpoint = flaky(usize::MAX);
        let breaker = Breaker::new(Arc::new(endpoint.clone()), Duration::from_secs(60));
        let calls = (0..20).map(|_| breaker.chat(ChatRequest::test("a", "think")));
        let answers = futures::future::join_all(calls).await;
        for a in &answers {
            assert!(matches!(a, Err(LlmError::EndpointDown { .. })), "{a:?}");
        }
        // Twenty calls over a minute: their first tries, then one probe per backoff.
        let made = endpoint.calls.load(Ordering::SeqCst);
        assert!(made < 60, "{made} calls to a dead endpoint");
        let e = answers.into_iter().next().unwrap().unwrap_err().to_string();
        assert!(
            e.contains("HTTP 500") && e.contains("waits.model_secs"),
            "{e}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_unusable_answer_is_no_outage_and_is_returned_at_once() {
        struct Bad;
        impl ChatModel for Bad {
            fn chat(&self, _: ChatRequest) -> BoxFuture<'static, Result<ChatReply, LlmError>> {
                Box::pin(async { Err(LlmError::EmptyAnswer("no text".into())) })
            }
        }
        let breaker = Breaker::new(Arc::new(Bad), Duration::from_secs(60));
        let e = breaker.chat(ChatRequest::test("a", "think")).await;
        assert!(matches!(e, Err(LlmError::EmptyAnswer(_))));
        assert!(!is_outage(&LlmError::Http {
            status: 401,
            body: String::new()
        }));
    }
}
