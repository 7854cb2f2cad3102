//! A cap on the calls in flight to one LLM endpoint. Every agent that uses the endpoint shares
//! one `Limited` model, so a team of a thousand agents keeps at most `max_in_flight` requests
//! open and the rest wait their turn (in arrival order) instead of overwhelming the server.

use super::{ChatModel, ChatReply, ChatRequest, LlmError};
use futures::future::BoxFuture;
use std::sync::Arc;
use tokio::sync::Semaphore;

pub struct Limited {
    inner: Arc<dyn ChatModel>,
    permits: Arc<Semaphore>,
}

impl Limited {
    pub fn new(inner: Arc<dyn ChatModel>, max_in_flight: usize) -> Arc<Self> {
        Arc::new(Limited {
            inner,
            permits: Arc::new(Semaphore::new(max_in_flight.max(1))),
        })
    }
}

impl ChatModel for Limited {
    super::delegate_to_inner!();

    fn chat(&self, request: ChatRequest) -> BoxFuture<'static, Result<ChatReply, LlmError>> {
        let inner = self.inner.clone();
        let permits = self.permits.clone();
        Box::pin(async move {
            // The semaphore is never closed; a permit is held until the call ends.
            let _permit = permits
                .acquire_owned()
                .await
                .map_err(|e| LlmError::InvalidSettings(e.to_string()))?;
            inner.chat(request).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cohort_core::ids::StageRef;
    use cohort_core::state::TokenUsage;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// Counts the calls running at once.
    struct Probe {
        now: AtomicUsize,
        most: AtomicUsize,
    }

    impl ChatModel for Arc<Probe> {
        fn chat(&self, _: ChatRequest) -> BoxFuture<'static, Result<ChatReply, LlmError>> {
            let p = self.clone();
            Box::pin(async move {
                let n = p.now.fetch_add(1, Ordering::SeqCst) + 1;
                p.most.fetch_max(n, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(5)).await;
                p.now.fetch_sub(1, Ordering::SeqCst);
                Ok(ChatReply {
                    text: String::new(),
                    usage: TokenUsage::default(),
                    cut: None,
                    tool_calls: Vec::new(),
                })
            })
        }
    }

    #[tokio::test]
    async fn no_more_than_the_cap_run_at_once_and_every_call_gets_its_turn() {
        let probe = Arc::new(Probe {
            now: AtomicUsize::new(0),
            most: AtomicUsize::new(0),
        });
        let limited = Limited::new(Arc::new(probe.clone()), 3);
        let calls = (0..20).map(|i| {
            limited.chat(ChatRequest {
                agent_id: format!("a{i}").into(),
                stage_id: StageRef::NoRelative,
                ..ChatRequest::test("a", "think")
            })
        });
        let results = futures::future::join_all(calls).await;
        assert!(results.iter().all(Result::is_ok));
        assert_eq!(probe.most.load(Ordering::SeqCst), 3);
    }
}
