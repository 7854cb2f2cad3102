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

use super::{ChatModel, ChatReply, ChatRequest, LlmError, ModelWaitReport};
use cohort_core::state::ModelWait;
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
/// A call that failed this often while the endpoint answered other calls meanwhile failed for
/// itself (a request the server chokes on), not for an outage: its error is returned.
const OWN_FAILURES: u32 = 3;

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
    /// Calls answered since the breaker was made (never reset): a failing call learns from it
    /// whether the endpoint answers others.
    answered: u64,
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
            Some(at) if now < at => Admit::WaitUntil(at),
            Some(_) if !self.probing => {
                self.probing = true;
                Admit::Go { probe: true }
            }
            // A probe is out: wait for what it learns (its end wakes the waiters).
            Some(_) => Admit::WaitUntil(now + BACKOFF_MAX),
        }
    }

    /// A call failed for an outage; `probe`: it was the probe (a late failure of another
    /// call leaves a probe that is out alone).
    fn failed(&mut self, now: Instant, e: &LlmError, probe: bool) {
        self.failures += 1;
        self.last = Some(e.to_string());
        if probe {
            self.probing = false;
        }
        if self.failures >= OPEN_AFTER && (probe || !self.probing) {
            self.probe_at = Some(now + self.backoff);
            self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
        }
    }

    fn answered(&mut self) {
        *self = Health {
            answered: self.answered + 1,
            ..Health::default()
        };
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
            answered: 0,
        }
    }
}

/// The probe a call is making: if the call is dropped before it ends (its step cancelled, its
/// task over), the probe is given back, or no call would ever probe again.
struct ProbeOut {
    health: Arc<Mutex<Health>>,
    changed: watch::Sender<u64>,
    out: bool,
}

impl ProbeOut {
    /// The probe ended with the call (its outcome is recorded by the caller).
    fn ended(mut self) {
        self.out = false;
    }
}

impl Drop for ProbeOut {
    fn drop(&mut self) {
        if self.out {
            self.health
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .probing = false;
            self.changed.send_modify(|n| *n += 1);
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

impl Breaker {
    /// Waits until the call may go (`Some(probe)`: whether it is the probe), or None once
    /// `deadline` passed with the breaker still open.
    async fn admitted(
        health: &Mutex<Health>,
        seen: &mut watch::Receiver<u64>,
        waiting: &mut Waiting,
        deadline: Instant,
    ) -> Option<bool> {
        loop {
            // Marked seen before health is read: a change after it wakes this wait.
            seen.borrow_and_update();
            let (admitted, last) = {
                let mut h = health.lock().unwrap_or_else(|p| p.into_inner());
                (h.admit(Instant::now()), h.last.clone())
            };
            let at = match admitted {
                Admit::Go { probe } => return Some(probe),
                Admit::WaitUntil(_) if Instant::now() >= deadline => return None,
                Admit::WaitUntil(at) => at,
            };
            waiting.began(last.as_deref().unwrap_or("the endpoint is not answering"));
            tokio::select! {
                _ = tokio::time::sleep_until(at.min(deadline)) => {}
                _ = seen.changed() => {}
            }
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
            // This call's own outage failures, and how many calls the endpoint had answered
            // when the first came.
            let (mut failures, mut answered_then) = (0u32, None);
            loop {
                let Some(probe) = Self::admitted(&health, &mut seen, &mut waiting, deadline).await
                else {
                    let last = health
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .last
                        .clone();
                    return Err(waiting.gave_up(patience, last));
                };
                let out = ProbeOut {
                    health: health.clone(),
                    changed: changed.clone(),
                    out: probe,
                };
                let answer = inner.chat(request.clone()).await;
                out.ended();
                let outage = answer.as_ref().err().filter(|e| is_outage(e));
                let others_answered = {
                    let mut h = health.lock().unwrap_or_else(|p| p.into_inner());
                    match outage {
                        Some(e) => h.failed(Instant::now(), e, probe),
                        None => h.answered(),
                    }
                    answered_then.is_some_and(|then| h.answered > then)
                };
                changed.send_modify(|n| *n += 1);
                let Some(e) = outage else {
                    waiting.ended();
                    return answer;
                };
                failures += 1;
                answered_then.get_or_insert(health_answered(&health));
                if failures >= OWN_FAILURES && others_answered {
                    // The endpoint answers others: this request is what it chokes on.
                    waiting.ended();
                    return answer;
                }
                waiting.began(&e.to_string());
                if Instant::now() >= deadline {
                    return Err(waiting.gave_up(patience, Some(e.to_string())));
                }
                if !probe {
                    tokio::time::sleep(RETRY_PAUSE.min(deadline - Instant::now())).await;
                }
            }
        })
    }
}

/// How many calls the endpoint has answered so far.
fn health_answered(health: &Mutex<Health>) -> u64 {
    health.lock().unwrap_or_else(|p| p.into_inner()).answered
}

#[cfg(test)]
mod tests {
    use super::*;
    use cohort_core::state::TokenUsage;
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

    /// Fails its first two calls (HTTP 500), never answers the third, answers the rest.
    struct HangsOnce {
        calls: AtomicUsize,
    }

    impl ChatModel for Arc<HangsOnce> {
        fn chat(&self, _: ChatRequest) -> BoxFuture<'static, Result<ChatReply, LlmError>> {
            let n = self.calls.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move {
                match n {
                    0 | 1 => Err(LlmError::Http {
                        status: 500,
                        body: "down".into(),
                    }),
                    2 => futures::future::pending().await,
                    _ => Ok(ChatReply::default()),
                }
            })
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_probe_dropped_mid_call_leaves_the_next_call_free_to_probe() {
        let endpoint = Arc::new(HangsOnce {
            calls: AtomicUsize::new(0),
        });
        let breaker = Breaker::new(Arc::new(endpoint.clone()), Duration::from_secs(600));
        let first = tokio::spawn(breaker.chat(ChatRequest::test("a", "think")));
        // Two failures open the breaker; after its first backoff the call probes, and hangs.
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(endpoint.calls.load(Ordering::SeqCst), 3);
        // Its step is cancelled: the call is dropped with the probe out.
        first.abort();
        let _ = first.await;
        let next = tokio::time::timeout(
            Duration::from_secs(60),
            breaker.chat(ChatRequest::test("b", "think")),
        )
        .await;
        assert!(matches!(next, Ok(Ok(_))), "{next:?}");
    }

    /// Answers every call but those whose prompt says "choke", which get HTTP 500.
    struct Chokes;

    impl ChatModel for Chokes {
        fn chat(&self, r: ChatRequest) -> BoxFuture<'static, Result<ChatReply, LlmError>> {
            let choke = r.prompt.contains("choke");
            Box::pin(async move {
                if choke {
                    Err(LlmError::Http {
                        status: 500,
                        body: "cannot take this one".into(),
                    })
                } else {
                    Ok(ChatReply::default())
                }
            })
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_the_endpoint_chokes_on_while_it_answers_others_fails_soon() {
        let breaker = Breaker::new(Arc::new(Chokes), Duration::from_secs(1800));
        let mut bad = ChatRequest::test("a", "think");
        bad.prompt = "choke on this".into();
        let bad = tokio::spawn(breaker.chat(bad));
        for _ in 0..40 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            breaker.chat(ChatRequest::test("b", "think")).await.unwrap();
        }
        let e = tokio::time::timeout(Duration::from_secs(60), bad).await;
        assert!(
            matches!(e, Ok(Ok(Err(LlmError::Http { status: 500, .. })))),
            "its own error, soon: {e:?}"
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
