//! Streamed answers (`stream: true`) over real HTTP against a local OpenAI-compatible stub: the
//! chunks make the same reply a whole body would, the text so far is passed on while it grows,
//! and a stream that stops sending is given up on after the idle timeout, not the request's.

use crate::support::openai_stub;
use crate::support::scratch;

use cohort::actors::{Host, start_team};
use cohort::config::load_team;
use cohort::ids::{AgentId, StageRef, StepId, TaskId};
use cohort::llm::openai::{OpenAiModel, OpenAiSettings, StructuredOutput};
use cohort::llm::{AnswerProgress, ChatModel, ChatRequest, LlmError};
use openai_stub::{OpenAiStub, StubResponse};
use scratch::Scratch;
use serde_json::Value;
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn settings(base_url: String, idle: Duration) -> OpenAiSettings {
    OpenAiSettings {
        base_url,
        model: "test-model".into(),
        api_key: None,
        temperature: None,
        max_tokens: None,
        // Far longer than any test may take: only the idle timeout can end a hung stream.
        request_timeout: Duration::from_secs(3600),
        max_retries: 0,
        backoff_base: Duration::from_millis(10),
        backoff_max: Duration::from_millis(40),
        structured_output: StructuredOutput::Off,
        context_window: None,
        native_tools: false,
        multimodal: false,
        stream: Some(idle),
        prompt_cache_key: true,
        cache_slots: None,
    }
}

fn request(progress: Option<AnswerProgress>) -> ChatRequest {
    ChatRequest {
        system: "be brief".into(),
        prompt: "say hello".into(),
        answer_format: None,
        tools: Vec::new(),
        rounds: Vec::new(),
        images: Vec::new(),
        agent_id: AgentId::from("writer"),
        skill: "think".into(),
        task_id: TaskId::from("task-1"),
        stage_id: StageRef::NoRelative,
        step_id: StepId::from("step-1"),
        template: None,
        step_text: String::new(),
        progress,
        model_wait: None,
        retry: 0,
        mending: Default::default(),
        intake: None,
    }
}

#[tokio::test]
async fn a_streamed_answer_is_one_reply_and_its_text_is_told_while_it_grows() {
    let stub = OpenAiStub::start().await;
    stub.push(
        StubResponse::streamed(
            &["<think>Cold ", "rain on ", "the eaves</think>"],
            Some((40, 9)),
        )
        .with_event_delay(Duration::from_millis(300)),
    );
    let told = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = told.clone();
    let progress = AnswerProgress::new(move |t| sink.lock().unwrap().push(t.to_owned()));
    let model = OpenAiModel::new(settings(stub.base_url(), Duration::from_secs(30))).unwrap();
    let reply = model.chat(request(Some(progress))).await.unwrap();

    assert_eq!(reply.text, "<think>Cold rain on the eaves</think>");
    assert_eq!(reply.usage.prompt_tokens, 40);
    assert_eq!(reply.usage.completion_tokens, 9);
    let told = told.lock().unwrap().clone();
    assert!(!told.is_empty(), "the growing text was passed on");
    assert!(
        told.windows(2)
            .all(|w| w[1].starts_with(&w[0]) && w[1].len() > w[0].len()),
        "each glimpse grows the one before: {told:?}"
    );
    assert!(reply.text.starts_with(told.last().unwrap().as_str()));
    let sent = &stub.requests()[0].body;
    assert_eq!(sent["stream"], true);
    assert_eq!(sent["stream_options"]["include_usage"], true);
}

#[tokio::test]
async fn a_stream_that_stops_sending_fails_after_the_idle_timeout_and_is_retried() {
    let stub = OpenAiStub::start().await;
    stub.push(StubResponse::streamed(&["<think>Cold ", "rain</think>"], None).hanging_after(2));
    let mut s = settings(stub.base_url(), Duration::from_millis(500));
    let error = OpenAiModel::new(s.clone())
        .unwrap()
        .chat(request(None))
        .await
        .unwrap_err();
    assert!(
        matches!(error, LlmError::Stalled(idle) if idle == Duration::from_millis(500)),
        "{error}"
    );
    assert!(error.to_string().contains("sent nothing"), "{error}");

    // With a retry, the next attempt answers.
    stub.push(StubResponse::streamed(&["<think>Cold ", "rain</think>"], None).hanging_after(2));
    stub.push(StubResponse::streamed(&["<think>Cold rain</think>"], None));
    s.max_retries = 1;
    let reply = OpenAiModel::new(s)
        .unwrap()
        .chat(request(None))
        .await
        .unwrap();
    assert_eq!(reply.text, "<think>Cold rain</think>");
    assert_eq!(stub.attempts(), 3);
    // No usage chunk: the tokens are estimated, never zero.
    assert!(reply.usage.prompt_tokens > 0 && reply.usage.completion_tokens > 0);
}

/// Before its first piece, an answer may take `timeout_secs` (a CPU model reads the prompt
/// first): the idle timeout starts once it writes, and a slow writer is not cut off.
#[tokio::test]
async fn the_first_piece_may_take_the_request_timeout_and_a_slow_writer_is_not_cut_off() {
    let stub = OpenAiStub::start().await;
    // Nothing but the opening chunk, then silence: that is the request timeout's to end.
    stub.push(StubResponse::streamed(&["<think>x</think>"], None).hanging_after(1));
    let mut s = settings(stub.base_url(), Duration::from_millis(100));
    s.request_timeout = Duration::from_millis(600);
    let error = OpenAiModel::new(s.clone())
        .unwrap()
        .chat(request(None))
        .await
        .unwrap_err();
    assert!(matches!(error, LlmError::Timeout(_)), "{error}");
    // Six pieces 200 ms apart: longer in all than the request timeout, each within the idle.
    stub.push(
        StubResponse::streamed(
            &["<think>", "Cold ", "rain ", "on ", "the eaves", "</think>"],
            None,
        )
        .with_event_delay(Duration::from_millis(200)),
    );
    s.stream = Some(Duration::from_millis(450));
    let reply = OpenAiModel::new(s)
        .unwrap()
        .chat(request(None))
        .await
        .unwrap();
    assert_eq!(reply.text, "<think>Cold rain on the eaves</think>");
}

#[tokio::test]
async fn a_stream_cut_off_at_the_token_limit_says_so() {
    let stub = OpenAiStub::start().await;
    stub.push(StubResponse::cut_off(
        "<planned_step>[{\"step_intention\": \"a very long",
    ));
    let model = OpenAiModel::new(settings(stub.base_url(), Duration::from_secs(30))).unwrap();
    let reply = model.chat(request(None)).await.unwrap();
    assert_eq!(reply.cut, Some(cohort::llm::Cut::TokenLimit));
    assert!(reply.text.starts_with("<planned_step>"));
}

#[tokio::test]
async fn an_answer_that_loops_is_stopped_there_and_says_so() {
    let stub = OpenAiStub::start().await;
    // The model writes its haiku, then one line again and again; the stub then hangs, as a
    // model writing up to max_tokens would keep the stream open: only stopping the read at
    // the loop gives an answer before the idle timeout gives the attempt up.
    let mut pieces = vec!["<think>Rain on the roof\n"];
    pieces.extend(std::iter::repeat_n("drip drop on the window pane,\n", 40));
    let events = pieces.len() + 1;
    stub.push(StubResponse::streamed(&pieces, None).hanging_after(events));
    let model = OpenAiModel::new(settings(stub.base_url(), Duration::from_secs(600))).unwrap();
    let reply = model.chat(request(None)).await.unwrap();
    assert_eq!(reply.cut, Some(cohort::llm::Cut::Repetition));
    // The passage once (where a round starts is where the repetition starts: here the newline
    // before the first "drip").
    assert_eq!(
        reply.text,
        "<think>Rain on the roof\ndrip drop on the window pane,"
    );
}

#[tokio::test]
async fn a_constrained_answer_that_loops_inside_a_string_is_stopped_there_and_left_to_the_repairs()
{
    let stub = OpenAiStub::start().await;
    // A 1.5B model's summary under a schema: the JSON opens, its string loops, and the model
    // would write on to max_tokens. The answer is stopped at the loop; closing its JSON is the
    // repair policy's (`closed_json`, applied by the agent), not the provider's.
    let mut pieces = vec!["{\"completion_summary\": \"Soft rain on the roof. "];
    pieces.extend(std::iter::repeat_n("Gentle whispers falling softly. ", 30));
    let events = pieces.len() + 1;
    stub.push(StubResponse::streamed(&pieces, None).hanging_after(events));
    let mut settings = settings(stub.base_url(), Duration::from_secs(600));
    settings.structured_output = StructuredOutput::JsonSchema;
    let model = OpenAiModel::new(settings).unwrap();
    let mut asked = request(None);
    asked.answer_format = Some(cohort::llm::AnswerFormat {
        name: "summary".into(),
        schema: serde_json::json!({"type": "object", "properties": {"completion_summary": {"type": "string"}}}),
    });
    let reply = model.chat(asked).await.unwrap();
    assert_eq!(reply.cut, Some(cohort::llm::Cut::Repetition));
    // The passage once, from where the repetition starts (". " before the first "Gentle").
    assert_eq!(
        reply.text,
        "{\"completion_summary\": \"Soft rain on the roof. Gentle whispers falling softly"
    );
}

/// A team on a streaming endpoint: while a step's answer is written, the monitor's live feed
/// carries it as `writing` frames naming the step; the step then finishes with the whole text.
#[actix::test]
async fn a_team_on_a_streaming_endpoint_shows_each_answer_being_written() {
    let stub = OpenAiStub::start().await;
    let plan = r#"<task_instruction>{"action": "add_task", "task_name": "Haiku", "task_intention": "write one"}</task_instruction>"#;
    let (a, b) = plan.split_at(plan.len() / 2);
    stub.push(StubResponse::streamed(&[a, b], None).with_event_delay(Duration::from_millis(300)));
    let dir = Scratch::new("stream-team");
    std::fs::write(
        dir.join("team.yaml"),
        format!(
            "llm: {{provider: openai, base_url: '{}', model: m, max_retries: 0, structured_output: off, stream: true, idle_timeout_secs: 30}}\n\
             agents:\n  - {{id: manager, role: manager, skills: [task_manager]}}\n",
            stub.base_url()
        ),
    )
    .unwrap();
    let cfg = load_team(&dir.join("team.yaml")).unwrap();
    let team = start_team(&cfg, &Host::new(&|_| None, env!("CARGO_BIN_EXE_cohort"))).unwrap();
    let mut writing = team.monitor.subscribe_writing();
    team.submit_goal(None, "a haiku").await.unwrap();

    let frame = tokio::time::timeout(Duration::from_secs(30), writing.recv())
        .await
        .expect("a writing frame")
        .unwrap();
    let frame: Value = serde_json::from_slice(frame.json()).unwrap();
    assert_eq!(frame["type"], "writing");
    assert_eq!(frame["agent_id"], "manager");
    let text = frame["text"].as_str().unwrap();
    assert!(plan.starts_with(text) && !text.is_empty(), "{text}");
    let step_id = frame["step_id"].as_str().unwrap().to_owned();

    for _ in 0..400 {
        let done = team.monitor.get(cohort::monitor::StateKind::Step, &step_id);
        if done
            .as_ref()
            .is_some_and(|s| s["execution_state"] == "finished")
        {
            let s = done.unwrap();
            assert_eq!(s["executor"], "task_manager");
            assert_eq!(
                s["execute_result"]["task_instruction"]["action"],
                "add_task"
            );
            assert!(stub.requests().iter().all(|r| r.body["stream"] == true));
            team.shutdown().await;
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the streamed step never finished");
}
