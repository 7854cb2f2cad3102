//! One call's request body (system and user messages, the answer's schema, a tool loop's
//! functions and rounds) and the reply made from what came back (tags, estimated usage).

use super::OpenAiSettings;
use crate::structured::tagged_answer;
use crate::{ChatReply, ChatRequest, ToolRound};
use async_openai::types::chat::{
    ChatCompletionMessageToolCall, ChatCompletionMessageToolCalls,
    ChatCompletionRequestAssistantMessage, ChatCompletionRequestMessage,
    ChatCompletionRequestMessageContentPartImage, ChatCompletionRequestMessageContentPartText,
    ChatCompletionRequestSystemMessage, ChatCompletionRequestToolMessage,
    ChatCompletionRequestUserMessage, ChatCompletionRequestUserMessageContent,
    ChatCompletionRequestUserMessageContentPart, ChatCompletionTool, ChatCompletionTools,
    CreateChatCompletionRequest, FunctionCall, FunctionObject, ImageUrl, ResponseFormat,
    ResponseFormatJsonSchema,
};
use cohort_core::prompt::tokens::TokenCounter;

/// Added to the temperature per unusable answer before this request, up to [`MAX_RETRY_TEMPERATURE`].
const RETRY_TEMPERATURE_STEP: f32 = 0.3;
const MAX_RETRY_TEMPERATURE: f32 = 1.0;

/// The temperature to ask with: the configured one the first time (none set: the server's
/// default), then higher with each unusable answer, so a model stuck in a loop can leave it.
fn sampling_temperature(configured: Option<f32>, retry: u32) -> Option<f32> {
    if retry == 0 {
        return configured;
    }
    let base = configured.unwrap_or(0.7);
    let raised = base + RETRY_TEMPERATURE_STEP * retry as f32;
    Some(raised.min(MAX_RETRY_TEMPERATURE.max(base)))
}

/// The request body: the fixed part of the prompt as the `system` message, the step's part as
/// the `user` message, and, when `constrained`, the answer's schema as `response_format`.
pub(super) fn completion_request(
    settings: &OpenAiSettings,
    request: &ChatRequest,
    constrained: bool,
) -> CreateChatCompletionRequest {
    let format = request.answer_format.as_ref().filter(|_| constrained);
    // How tags become keys is in the system message already (for every step, so it stays the
    // same from step to step).
    let system = request.system.clone();
    let mut messages = Vec::with_capacity(2);
    if !system.trim().is_empty() {
        messages.push(ChatCompletionRequestMessage::System(
            ChatCompletionRequestSystemMessage {
                content: system.into(),
                name: None,
            },
        ));
    }
    messages.push(ChatCompletionRequestMessage::User(
        ChatCompletionRequestUserMessage {
            content: user_content(settings, request),
            name: None,
        },
    ));
    for round in &request.rounds {
        messages.extend(round_messages(round));
    }
    let tools: Vec<ChatCompletionTools> = request
        .tools
        .iter()
        .map(|t| {
            ChatCompletionTools::Function(ChatCompletionTool {
                function: FunctionObject {
                    name: t.name.clone(),
                    description: Some(t.description.clone()).filter(|d| !d.is_empty()),
                    parameters: Some(t.parameters.clone()),
                    strict: None,
                },
            })
        })
        .collect();
    #[allow(deprecated)]
    CreateChatCompletionRequest {
        model: settings.model.clone(),
        messages,
        temperature: sampling_temperature(
            settings.temperature,
            if request.mending.hotter_retries {
                request.retry
            } else {
                0
            },
        ),
        // `max_tokens`, not `max_completion_tokens`: the OpenAI-compatible servers we target
        // (Ollama, vLLM, llama.cpp, DeepSeek) all read `max_tokens`; not all read the newer name.
        max_tokens: settings.max_tokens,
        tools: (!tools.is_empty()).then_some(tools),
        response_format: format.map(|f| ResponseFormat::JsonSchema {
            json_schema: ResponseFormatJsonSchema {
                description: None,
                name: f.name.clone(),
                schema: f.schema.clone(),
                strict: None,
            },
        }),
        ..Default::default()
    }
}

/// The `user` message's content: the prompt, then, for a model that takes images, the images
/// its results refer to as `image_url` parts (`data:` URLs: the endpoint may not reach this
/// team's API).
fn user_content(
    settings: &OpenAiSettings,
    request: &ChatRequest,
) -> ChatCompletionRequestUserMessageContent {
    let images: Vec<_> = request
        .images
        .iter()
        .filter(|_| settings.multimodal)
        .filter(|b| b.mime.starts_with("image/"))
        .collect();
    if images.is_empty() {
        return request.prompt.clone().into();
    }
    let text = ChatCompletionRequestUserMessageContentPart::Text(
        ChatCompletionRequestMessageContentPartText {
            text: request.prompt.clone(),
            prompt_cache_breakpoint: None,
        },
    );
    let pictures = images.into_iter().map(|b| {
        ChatCompletionRequestUserMessageContentPart::ImageUrl(
            ChatCompletionRequestMessageContentPartImage {
                image_url: ImageUrl {
                    url: cohort_core::call::media::data_url(&b.mime, &b.bytes),
                    detail: None,
                },
                prompt_cache_breakpoint: None,
            },
        )
    });
    ChatCompletionRequestUserMessageContent::Array(std::iter::once(text).chain(pictures).collect())
}

/// One round of a tool loop as messages: the assistant's calls, then one tool message each.
fn round_messages(round: &ToolRound) -> Vec<ChatCompletionRequestMessage> {
    let calls = round
        .calls
        .iter()
        .map(|c| {
            ChatCompletionMessageToolCalls::Function(ChatCompletionMessageToolCall {
                id: c.id.clone(),
                function: FunctionCall {
                    name: c.name.clone(),
                    arguments: c.arguments.clone(),
                },
            })
        })
        .collect();
    #[allow(deprecated)]
    let asked = ChatCompletionRequestMessage::Assistant(ChatCompletionRequestAssistantMessage {
        content: (!round.text.is_empty()).then(|| round.text.clone().into()),
        tool_calls: Some(calls),
        ..Default::default()
    });
    let answers = round.calls.iter().zip(&round.results).map(|(c, r)| {
        ChatCompletionRequestMessage::Tool(ChatCompletionRequestToolMessage {
            content: r.clone().into(),
            tool_call_id: c.id.clone(),
        })
    });
    std::iter::once(asked).chain(answers).collect()
}

/// A constrained answer back in the tag format the skills read (one that is not whole JSON, cut
/// off or stopped in a loop, stays as it came: mending it is the repair policy's, see
/// `step::complete`); a usage the endpoint did not report is counted with the model's
/// tokenizer (or estimated), so spend is never shown as zero.
pub(super) fn finish_reply(
    mut reply: ChatReply,
    request: &ChatRequest,
    constrained: bool,
    tokens: TokenCounter,
) -> ChatReply {
    if constrained && let Some(tagged) = tagged_answer(&reply.text) {
        reply.text = tagged;
    }
    if reply.usage.prompt_tokens == 0 && reply.usage.completion_tokens == 0 {
        let estimate = |text: &str| tokens.count(text) as u64;
        let rounds: u64 = request
            .rounds
            .iter()
            .flat_map(|r| {
                r.results
                    .iter()
                    .map(String::as_str)
                    .chain([r.text.as_str()])
            })
            .map(estimate)
            .sum();
        reply.usage.prompt_tokens = estimate(&request.system) + estimate(&request.prompt) + rounds;
        reply.usage.completion_tokens = estimate(&reply.text);
    }
    reply
}

#[cfg(test)]
mod tests {
    use super::sampling_temperature;

    #[test]
    fn asking_again_samples_more_freely_up_to_a_bound() {
        assert_eq!(sampling_temperature(Some(0.3), 0), Some(0.3));
        assert_eq!(sampling_temperature(None, 0), None);
        assert!((sampling_temperature(Some(0.3), 1).unwrap() - 0.6).abs() < 1e-6);
        assert_eq!(sampling_temperature(Some(0.3), 3), Some(1.0));
        assert_eq!(
            sampling_temperature(Some(1.2), 2),
            Some(1.2),
            "never lowered"
        );
    }
}
