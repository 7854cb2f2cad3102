//! Prices every answer of a model whose config gives `cost_per_1k_prompt` and
//! `cost_per_1k_completion`: its usage carries the cost in USD from then on, so steps, agents,
//! tasks, the console and `cohort run` all add up the same figure.

use super::{ChatModel, ChatReply, ChatRequest, LlmError};
use cohort_core::config::Price;
use futures::FutureExt;
use futures::future::BoxFuture;
use std::sync::Arc;

pub struct Priced {
    inner: Arc<dyn ChatModel>,
    price: Price,
}

impl Priced {
    /// `inner` as it is when it has no price.
    pub fn wrap(inner: Arc<dyn ChatModel>, price: Option<Price>) -> Arc<dyn ChatModel> {
        match price {
            Some(price) => Arc::new(Priced { inner, price }),
            None => inner,
        }
    }
}

impl ChatModel for Priced {
    super::delegate_to_inner!();

    fn chat(&self, request: ChatRequest) -> BoxFuture<'static, Result<ChatReply, LlmError>> {
        let price = self.price;
        self.inner
            .chat(request)
            .map(move |reply| {
                reply.map(|mut r| {
                    r.usage.cost_usd = price.cost(r.usage);
                    r
                })
            })
            .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cohort_core::state::TokenUsage;

    /// Answers every call with the same usage.
    struct Fixed;

    impl ChatModel for Fixed {
        fn chat(&self, _: ChatRequest) -> BoxFuture<'static, Result<ChatReply, LlmError>> {
            Box::pin(async {
                Ok(ChatReply {
                    text: String::new(),
                    usage: TokenUsage::new(2_000, 500),
                    cut: None,
                    tool_calls: Vec::new(),
                })
            })
        }
    }

    #[tokio::test]
    async fn every_answer_carries_its_cost_and_an_unpriced_model_none() {
        let price = Price {
            prompt_per_1k: 0.5,
            completion_per_1k: 2.0,
            cached_prompt_per_1k: 0.05,
        };
        // Prompt tokens the endpoint served from its cache cost the cached rate.
        let cached = TokenUsage::new(2_000, 500).with_cached(1_000);
        assert!(
            (price.cost(cached) - 1.55).abs() < 1e-9,
            "{}",
            price.cost(cached)
        );
        let priced = Priced::wrap(Arc::new(Fixed), Some(price));
        let reply = priced.chat(ChatRequest::test("w", "think")).await.unwrap();
        assert_eq!(reply.usage.cost_usd, 2.0);
        let mut total = reply.usage;
        total.add(reply.usage);
        assert_eq!(total.cost_usd, 4.0, "costs add up with the tokens");
        let free = Priced::wrap(Arc::new(Fixed), None);
        let reply = free.chat(ChatRequest::test("w", "think")).await.unwrap();
        assert_eq!(reply.usage.cost_usd, 0.0);
    }
}
