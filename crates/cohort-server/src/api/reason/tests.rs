//! Every reason has a code of its own and reads in both languages, the Chinese without an
//! English sentence left in it.

use super::*;
use cohort_core::state::{AskError, ExecutionState, StepExecutionState};
use cohort_core::team::{self, Hollow};
use cohort_core::texts::Language;
use std::collections::BTreeMap;
use std::time::Duration;

fn detail() -> String {
    "e".to_owned()
}

fn denied() -> Vec<Reason> {
    use Denied as D;
    let mut out = vec![
        D::LoginFailed,
        D::NoBearerToken,
        D::NoToken,
        D::NoTokenInUrl,
        D::InvalidToken,
        D::NotLoggedIn,
        D::NotYourToken {
            holder: "bob".into(),
            human: "alice".into(),
        },
        D::NotInTask { task: "t1".into() },
        D::ReceiverOutOfReach {
            agent: "writer".into(),
        },
        D::OriginNotAllowed {
            origin: "http://evil.test".into(),
        },
    ];
    // One code for all: the same failure, whatever the operator alone may do.
    out.push(D::OperatorOnly(OperatorAction::SeeNodes));
    out.into_iter().map(Reason::from).collect()
}

fn operator_actions() -> [OperatorAction; 9] {
    use OperatorAction as O;
    [
        O::SeeNodes,
        O::ReadMetrics,
        O::CancelStep,
        O::CancelTask,
        O::PauseTask,
        O::PauseAgent,
        O::CancelStage,
        O::RetryStage,
        O::Decide,
    ]
}

fn missing() -> Vec<Reason> {
    use Missing as M;
    [
        M::Route {
            method: Method::GET,
            path: "/api/tasks".into(),
            routes: "GET /api/states, POST /api/send_message".into(),
        },
        M::Task { task: "t1".into() },
        M::TaskInMemory { task: "t1".into() },
        M::Stage { stage: "s1".into() },
        M::Step { step: "p1".into() },
        M::Agent {
            agent: "writer".into(),
        },
        M::Human {
            human: "carol".into(),
        },
        M::State { id: "x1".into() },
        M::Attachment { id: "a1".into() },
        M::Blob { id: "b1".into() },
        M::OnlyMetrics,
    ]
    .into_iter()
    .map(Reason::from)
    .collect()
}

fn malformed() -> Vec<Reason> {
    use Malformed as M;
    let kinds = || "task|stage|agent|step".to_owned();
    [
        M::Json { detail: detail() },
        M::JsonMismatch { detail: detail() },
        M::NotJson { detail: detail() },
        M::Body { detail: detail() },
        M::Query { detail: detail() },
        M::Path { detail: detail() },
        M::NotAWebsocket { detail: detail() },
        M::MethodNotAllowed {
            method: Method::GET,
            path: "/api/bind_human_agent".into(),
            takes: vec!["POST".into()],
        },
        M::BodyTimeout { secs: 10 },
        M::BodyTooLarge { limit: 65536 },
        M::BodyOverRouteLimit,
        M::BodyUnreadable { detail: detail() },
        M::CancelBody { detail: detail() },
        M::MissingType { kinds: kinds() },
        M::UnknownType {
            name: "tasks".into(),
            kinds: kinds(),
        },
        M::LimitTooSmall,
        M::LimitTooLarge { max: 1000 },
        M::MaxBytesOutOfRange { max: 16 << 20 },
        M::FullNeedsTask,
        M::ApproveShape,
        M::ValuesNotObject,
        M::WebsocketOnlyParams,
        M::FlowNeedsTask,
        M::UnknownFormat {
            format: "xml".into(),
        },
        M::FlowOnlyParams,
        M::MessageTooLong {
            chars: 9000,
            limit: 8000,
        },
    ]
    .into_iter()
    .map(Reason::from)
    .collect()
}

fn human_errors() -> Vec<HumanError> {
    vec![
        HumanError::NotHuman("writer".into()),
        HumanError::NoReceiver,
        HumanError::Empty,
        HumanError::ToSelf,
        HumanError::BadWait,
        HumanError::BadAnswer {
            to: "manager".into(),
            why: AskError::NotAnOption("yes, no".into()),
        },
    ]
}

fn ask_errors() -> Vec<AskError> {
    vec![
        AskError::BadOptions,
        AskError::BadFields,
        AskError::FieldOptions("colour".into()),
        AskError::BadBounds("age".into()),
        AskError::TooLong,
        AskError::Empty,
        AskError::AnswerTooLong,
        AskError::NotAnOption("yes, no".into()),
        AskError::NotAForm(detail()),
        AskError::BadField {
            field: "age".into(),
            why: detail(),
        },
    ]
}

fn attachment_errors() -> Vec<AttachmentError> {
    vec![
        AttachmentError::Empty,
        AttachmentError::TooLarge { bytes: 1 << 30 },
        AttachmentError::BadName("a/b".into()),
        AttachmentError::TypeNotTaken {
            mime: "text/html".into(),
        },
        AttachmentError::NotItsType {
            mime: "image/png".into(),
            why: "e",
        },
        AttachmentError::TooMany(20),
    ]
}

fn sync_errors() -> Vec<SyncError> {
    use SyncError as S;
    vec![
        S::UnknownTask("t1".into()),
        S::UnknownStage {
            task: "t1".into(),
            stage: "s1".into(),
        },
        S::UnknownAgent("ghost".into()),
        S::NotManager {
            agent: "writer".into(),
            task: "t1".into(),
        },
        S::TaskOver("t1".into(), ExecutionState::Finished),
        S::BaseTask,
        S::StageNotRunning {
            stage: "s1".into(),
            state: ExecutionState::Finished,
        },
        S::RunLimit {
            goal: "写诗".into(),
            runs: 3,
        },
        S::AddTaskOutsideBase("t1".into()),
        S::OpenTasks { open: 8, max: 8 },
        S::TasksPerGoal { max: 3 },
        S::StagesPerTask {
            task: "t1".into(),
            stages: 20,
            max: 20,
        },
        S::BaseMessages { max: 5 },
        S::MemoryFull {
            held: 100,
            budget: 90,
        },
        S::HollowFinish(Hollow::GoalHandedBack),
        // One code for every malformed kind (each kind's Chinese is checked in the core).
        S::Invalid(team::Malformed::NoAgentAllocated("写诗".into())),
    ]
}

fn refused() -> Vec<Reason> {
    use Refused as R;
    let mut out: Vec<Refused> = human_errors().into_iter().map(R::Message).collect();
    out.extend(attachment_errors().into_iter().map(R::Attachment));
    out.extend(sync_errors().into_iter().map(R::Sync));
    out.extend([
        R::Choice(ChoiceError::Model {
            agent: "writer".into(),
            model: "big".into(),
            allowed: vec![],
        }),
        R::Choice(ChoiceError::Server {
            agent: "writer".into(),
            server: "web".into(),
            allowed: vec!["files".into()],
        }),
        R::AttachmentNotUploaded {
            id: "a1".into(),
            path: "/api/attachments",
        },
        R::NoStore,
        R::Cancel(CancelError::NoStep("writer".into(), "p1".into())),
        R::Cancel(CancelError::Over("p1".into(), StepExecutionState::Finished)),
        R::Cancel(CancelError::Ending("p1".into())),
        R::Cancel(CancelError::Unavailable(detail())),
        R::Verdict(VerdictError::NotWaiting("p1".into())),
        R::Verdict(VerdictError::StaleHash),
        R::Verdict(VerdictError::BadArguments),
        R::Verdict(VerdictError::NoReason),
        R::Verdict(VerdictError::WrongKind("p1".into(), "x".into(), "y".into())),
        R::Verdict(VerdictError::BadPlan(detail())),
        R::Verdict(VerdictError::BadParams(AskError::Empty)),
        R::Verdict(VerdictError::Unavailable(detail())),
        R::NotWaitingForVerdict { step: "p1".into() },
        R::BaseTaskNotCancelled,
        R::RejectionNeedsReason,
    ]);
    out.into_iter().map(Reason::from).collect()
}

fn limited() -> Vec<Reason> {
    use Limited as L;
    [
        L::TooManyLogins { secs: 4 },
        L::PasswordCheck(CheckRefused::ClientBusy),
        L::PasswordCheck(CheckRefused::Busy),
        L::PasswordCheck(CheckRefused::Failed(detail())),
        L::Goal(Held::Running { running: 8, max: 8 }),
        L::Goal(Held::Rate {
            given: 5,
            window: Duration::from_secs(60),
            retry_after: 12,
        }),
        L::FeedSlot(SlotRefused::PerPerson {
            human: "alice".into(),
            open: 8,
        }),
        L::FeedSlot(SlotRefused::Total { total: 256 }),
        L::TooManyFollowed { max: 64 },
        L::ReadsBusy { reads: 4 },
        L::ReceiverBusy {
            agent: "writer".into(),
            steps: 5,
            bytes: 50_000,
        },
        L::TooManyConnections,
    ]
    .into_iter()
    .map(Reason::from)
    .collect()
}

fn faults() -> Vec<Reason> {
    use Fault as F;
    let (node, leader, address) = ("n2".to_owned(), "n1".to_owned(), "10.0.0.1:8080".to_owned());
    [
        F::TeamNotRunning { detail: detail() },
        F::AgentUnreachable {
            agent: "writer".into(),
            detail: detail(),
        },
        F::MessageNotConfirmed,
        F::SessionNotStored { detail: detail() },
        F::LogoutNotStored { detail: detail() },
        F::SessionsUnreadable { detail: detail() },
        F::StoreUnavailable { detail: detail() },
        F::StoreUnreadable { detail: detail() },
        F::FileNotKeptInTime,
        F::FileNotKept { detail: detail() },
        F::StoreReadFailed { detail: detail() },
        F::StoredCallsUnreadable { detail: detail() },
        F::ReadFailed { detail: detail() },
        F::Internal { detail: detail() },
        F::StandbyLeaderUnknown { node: node.clone() },
        F::StandbyPreviousRun { node: node.clone() },
        F::StandbyLeaderStandingBy {
            node: node.clone(),
            leader: leader.clone(),
            address: address.clone(),
        },
        F::StandbyLeaderUnreachable {
            node,
            leader,
            address,
            detail: detail(),
        },
    ]
    .into_iter()
    .map(Reason::from)
    .collect()
}

/// One of every failure the API words.
fn samples() -> Vec<Reason> {
    [
        denied(),
        missing(),
        malformed(),
        refused(),
        limited(),
        faults(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// A run of three or more English words (ASCII letters only, punctuation around them allowed)
/// outside code spans: an English sentence a translation left in.
fn english_run(text: &str) -> Option<String> {
    let outside_code: String = text
        .split('`')
        .enumerate()
        .filter(|(i, _)| i % 2 == 0)
        .map(|(_, s)| s)
        .collect::<Vec<_>>()
        .join(" ");
    // A Chinese character (or full-width punctuation) is a token of its own, never a word.
    let outside_code: String = outside_code
        .chars()
        .map(|c| match c.is_ascii() {
            true => c.to_string(),
            false => format!(" {c} "),
        })
        .collect();
    let mut run: Vec<&str> = Vec::new();
    for token in outside_code.split_whitespace() {
        let word = token.trim_matches(|c: char| c.is_ascii_punctuation());
        if !word.is_empty() && word.chars().all(|c| c.is_ascii_alphabetic()) {
            run.push(word);
            if run.len() >= 3 {
                return Some(run.join(" "));
            }
        } else {
            run.clear();
        }
    }
    None
}

#[test]
fn every_reason_has_a_code_of_its_own() {
    let mut seen: BTreeMap<&str, String> = BTreeMap::new();
    for r in samples() {
        let code = r.code();
        assert!(
            !code.is_empty() && code.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
            "`{code}` is not snake_case"
        );
        if let Some(before) = seen.insert(code, format!("{r:?}")) {
            panic!("`{code}` names both {before} and {r:?}");
        }
    }
    assert!(seen.len() > 100, "{} codes", seen.len());
}

#[test]
fn every_reason_reads_in_english_and_in_chinese_without_an_english_sentence() {
    let (en, zh) = (Texts::english(), Texts::builtin(Language::Zh));
    let mut reasons = samples();
    let operator_only = operator_actions().map(|a| Reason::from(Denied::OperatorOnly(a)));
    reasons.extend(operator_only);
    reasons.extend(ask_errors().into_iter().map(|why| {
        Reason::from(Refused::Message(HumanError::BadAnswer {
            to: "manager".into(),
            why,
        }))
    }));
    for r in &reasons {
        let (english, chinese) = (r.render(&en), r.render(&zh));
        assert!(!english.is_empty() && !chinese.is_empty(), "{r:?}");
        assert_eq!(english, r.to_string(), "the English is the Display");
        if let Some(run) = english_run(&chinese) {
            panic!("`{run}` is English in the Chinese of {r:?}: {chinese}");
        }
        assert!(chinese != english, "{r:?} is not translated: {chinese}");
    }
}

#[test]
fn the_scan_finds_an_english_sentence_but_not_code_or_names() {
    assert_eq!(
        english_run("没有任务：no such task"),
        Some("no such task".into())
    );
    assert_eq!(
        english_run("请发送 `Authorization: Bearer <token>` 以及 GET /api/x"),
        None
    );
    assert_eq!(
        english_run("已经是 finished（http.running_tasks 为 8）"),
        None
    );
}

#[test]
fn the_rest_docs_list_every_code() {
    let docs = include_str!("../../../../../docs/rest.md");
    let missing: Vec<&str> = samples()
        .iter()
        .map(Reason::code)
        .filter(|code| !docs.contains(&format!("`{code}`")))
        .collect();
    assert!(missing.is_empty(), "docs/rest.md does not list {missing:?}");
}
