//! Assembling one skill's prompt from an agent's state, ordered from most to least stable so an
//! endpoint's prompt cache serves most of each call from the agent's previous one:
//!
//! 1. the system message, the same for every step of the agent: the system section, role and
//!    permissions (skills, tools), how memory and JSON answers work;
//! 2. what only grows: the stage's task and stage ids and its executed steps, oldest first,
//!    appended and never rewritten above the newest (a budget cuts them from the oldest end, in
//!    whole blocks);
//! 3. what changes now and then: the memory's entries, the pending steps;
//! 4. what is the same for every step of one skill: the skill's rules and answer format;
//! 5. what changes each call: the results the step builds on, and the current step (its
//!    intention and, last, its content).
//!
//! Nothing volatile (a clock, a counter, a step's random id) is in parts 1 to 4, and nothing
//! that differs between stages above the skill's rules while the stage's history is empty: a
//! manager's calls on notices, each in a stage of its own with nothing pending, share all but
//! the current step. Nothing but the step's own ids, intention and content comes between the
//! answer format and the content, which is last (docs/configuration.md, "Prompt caching", has
//! the measurements behind this order).
//! Data written by agents or tools (contents, results, memory) is embedded so it cannot open
//! sections of its own.

use super::entry::{json_line, result_line};
use super::markdown::{block, bullet, fenced, one_line};
use super::set::PromptSet;
use crate::call::media::{MediaRef, media_in};
use crate::prompt::tokens::TokenCounter;
use crate::server_description::ServerDescription;
use crate::skills::HistoryKind;
use crate::state::{Agent, Executor, Skill, StepExecutionState, StepState};
use std::collections::BTreeMap;

/// Everything a skill prompt is built from.
pub struct PromptContext<'a> {
    /// The agent whose step it is: its role, skills, tools, steps and memory.
    pub agent: &'a Agent,
    /// The step being executed.
    pub step: &'a StepState,
    /// MCP server name → description, for the agent's tool list.
    pub tool_descriptions: &'a BTreeMap<String, String>,
    /// instruction_generation: the tool step it writes the call for.
    pub tool_step: Option<&'a StepState>,
    /// instruction_generation: that server's tools, resources and prompts with their schemas,
    /// when the client already knows them (so the call can be written without guessing).
    pub tool_capabilities: Option<&'a ServerDescription>,
    /// tool_decision: this tool's call chain in the stage, oldest first.
    pub tool_history: Option<&'a [StepState]>,
    /// The most tokens the prompt may take (the model's context window less its answer), when
    /// the model states one: history is shortened until the prompt fits.
    pub budget: Option<usize>,
    /// How the model counts tokens (its tokenizer, or an estimate).
    pub tokens: TokenCounter,
    /// Whether the model's answers are constrained by a JSON schema: the system message then
    /// says how tags become keys (for every step, so it stays the same from step to step).
    pub constrained: bool,
}

/// How much of the history a prompt shows: everything, or (to fit a budget) older results cut
/// and older entries left out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Fit {
    /// Results of entries older than the newest [`KEPT_WHOLE`] are cut to [`OLDER_RESULT_CHARS`].
    cut_older: bool,
    /// At most this many executed entries are shown (the newest).
    executed: usize,
}

/// Entries a shortened history still shows whole (seed 004: the newest five verbatim); older
/// results are cut a block of this many at a time, so the history above stays the same for the
/// next few calls (their prompt cache keeps serving it).
pub const KEPT_WHOLE: usize = 5;
/// What a shortened history keeps of an older entry's result (seed 004).
pub const OLDER_RESULT_CHARS: usize = 500;

/// At most this many executed steps are shown in a stage's history (the newest ones).
pub const MAX_EXECUTED_IN_HISTORY: usize = 24;
/// At most this many steps still to run are shown in a stage's history (the next ones).
pub const MAX_PENDING_IN_HISTORY: usize = 12;

/// The agent's other steps in the current step's task and stage, split into executed
/// (finished or failed) and not yet executed, each in execution order.
pub fn stage_history<'a>(
    agent: &'a Agent,
    current: &StepState,
) -> (Vec<&'a StepState>, Vec<&'a StepState>) {
    agent
        .agent_step
        .steps()
        .iter()
        .filter(|s| {
            s.step_id != current.step_id
                && s.task_id == current.task_id
                && s.stage_id == current.stage_id
        })
        .partition(|s| s.execution_state.is_over())
}

/// A step's prompt in two parts: what stays the same for every step of this agent (the system
/// section, role and permissions, how memory and answers work), sent as the `system` message,
/// and what this step adds (history, memory entries, pending steps, current step), sent as the
/// `user` message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prompt {
    /// The fixed part: system section, role and permissions.
    pub system: String,
    /// This step's part: history, memory entries, pending steps, current step.
    pub user: String,
    /// How many of the stage's oldest executed steps the history left out (to fit the budget
    /// or its length cap); a summary of them is shown when the agent has written one.
    pub history_omitted: usize,
    /// The images and sounds the results shown whole refer to, oldest first (see
    /// `call::media`): a model that takes images is sent them beside the text.
    pub media: Vec<MediaRef>,
}

impl Prompt {
    /// Both parts as one text, in section order.
    pub fn whole(&self) -> String {
        format!("{}\n{}", self.system, self.user)
    }
}

/// The prompt for one step of `skill`. Under a budget, the history is shortened in stages until
/// the prompt fits: first older results are cut, then only the newest entries are shown.
pub fn build_prompt(set: &PromptSet, skill: Skill, ctx: &PromptContext) -> Prompt {
    let whole = Fit {
        cut_older: false,
        executed: MAX_EXECUTED_IN_HISTORY,
    };
    let stages = [
        whole,
        Fit {
            cut_older: true,
            ..whole
        },
        Fit {
            cut_older: true,
            executed: KEPT_WHOLE,
        },
    ];
    let mut prompt = assemble(set, skill, ctx, whole);
    for fit in &stages[1..] {
        let fits = ctx
            .budget
            .is_none_or(|b| ctx.tokens.count(&prompt.system) + ctx.tokens.count(&prompt.user) <= b);
        if fits || skill.kind().history() == HistoryKind::None {
            break;
        }
        prompt = assemble(set, skill, ctx, *fit);
    }
    prompt
}

/// The fixed part: system section, role and permissions, how tools are called when the agent
/// calls them natively, how memory is kept and, for a constrained model, how answers become
/// JSON. The same for every step of the agent.
fn fixed_part(set: &PromptSet, ctx: &PromptContext) -> String {
    let (h, p) = (set.headings(), set.phrases());
    let mut fixed = Doc::default();
    fixed.push(set.system_prompt());
    push_role(&mut fixed, set, ctx);
    if ctx.agent.settings.native_tools && !ctx.agent.tools.is_empty() {
        fixed.push(&p.native_tools_note);
    }
    if ctx.constrained {
        fixed.push(&p.json_answer);
    }
    fixed.heading(1, &h.memory);
    fixed.push(set.persistent_memory_prompt());
    fixed.finish()
}

/// The prompt of a tool step run as a native tool loop: the step, the stage's history (older
/// results cut) and the memory, then what to do; the server's tools go beside it as functions.
pub fn build_tool_loop_prompt(set: &PromptSet, ctx: &PromptContext) -> Prompt {
    let mut doc = Doc::default();
    let fit = Fit {
        cut_older: true,
        executed: MAX_EXECUTED_IN_HISTORY,
    };
    let (done, pending) = stage_history(ctx.agent, ctx.step);
    let history_omitted = push_stage_history(&mut doc, set, ctx, &done, fit);
    push_memory(&mut doc, set, ctx.agent);
    push_pending(&mut doc, set, &pending);
    doc.heading(1, &set.headings().rules);
    doc.push(&set.phrases().tool_loop);
    push_dependencies(&mut doc, set, ctx, fit);
    push_current_step(&mut doc, set, None, ctx, !done.is_empty());
    let (user, media) = doc.finish_with_media();
    Prompt {
        system: fixed_part(set, ctx),
        user,
        history_omitted,
        media,
    }
}

fn assemble(set: &PromptSet, skill: Skill, ctx: &PromptContext, fit: Fit) -> Prompt {
    let mut doc = Doc::default();
    // What only grows first, then what rarely changes (memory, pending steps), the skill's
    // rules, and what changes each call, the current step last.
    let kind = skill.kind().history();
    let (done, pending) = match kind {
        HistoryKind::Stage => stage_history(ctx.agent, ctx.step),
        _ => (Vec::new(), Vec::new()),
    };
    let history_omitted = match kind {
        HistoryKind::Stage => push_stage_history(&mut doc, set, ctx, &done, fit),
        HistoryKind::ToolChain => {
            push_tool_history(&mut doc, set, ctx, fit);
            0
        }
        HistoryKind::None => 0,
    };
    push_memory(&mut doc, set, ctx.agent);
    if kind == HistoryKind::Stage {
        push_pending(&mut doc, set, &pending);
    }
    push_skill_rules(&mut doc, set, skill, ctx);
    push_dependencies(&mut doc, set, ctx, fit);
    let ids_above = kind == HistoryKind::Stage && !done.is_empty();
    push_current_step(&mut doc, set, Some(skill), ctx, ids_above);
    let (user, media) = doc.finish_with_media();
    Prompt {
        system: fixed_part(set, ctx),
        user,
        history_omitted,
        media,
    }
}

/// Markdown blocks separated by blank lines, and the media the results in them refer to.
#[derive(Default)]
struct Doc(String, Vec<MediaRef>);

impl Doc {
    /// The text, and the media its results refer to (each once, oldest first).
    fn finish_with_media(mut self) -> (String, Vec<MediaRef>) {
        let mut media = std::mem::take(&mut self.1);
        let mut seen = std::collections::HashSet::new();
        media.retain(|m| seen.insert(m.blob.clone()));
        (self.finish(), media)
    }

    fn push(&mut self, text: &str) {
        self.0.push_str(text.trim_end());
        self.0.push_str("\n\n");
    }

    fn heading(&mut self, level: usize, text: &str) {
        self.push(&format!("{} {}", "#".repeat(level), one_line(text)));
    }

    fn finish(self) -> String {
        let mut s = self.0;
        s.truncate(s.trim_end().len());
        s.push('\n');
        s
    }
}

fn push_role(doc: &mut Doc, set: &PromptSet, ctx: &PromptContext) {
    let (h, p) = (set.headings(), set.phrases());
    let agent = ctx.agent;
    doc.heading(1, &h.role);
    doc.heading(2, &h.role_info);
    let info = [
        format!(
            "- {}: {} ({})",
            p.agent_id,
            one_line(agent.agent_id.as_str()),
            p.own_id_note
        ),
        bullet(&p.name, &agent.name, 3, &p.none),
        bullet(&p.role, &agent.role, 3, &p.none),
        bullet(&p.profile, &agent.profile, 3, &p.none),
    ];
    doc.push(&info.join("\n"));
    doc.heading(2, &h.permissions);
    doc.heading(3, &h.skills);
    let skills: Vec<_> = agent
        .skills
        .iter()
        .map(|s| {
            format!(
                "- **{}**: {}",
                s.name(),
                one_line(&set.skill(*s).description)
            )
        })
        .collect();
    doc.push(&list_or(&skills, &p.none));
    doc.heading(3, &h.tools);
    let tools: Vec<_> = crate::state::offered_tools(agent, ctx.step)
        .into_iter()
        .map(|t| {
            let d = ctx
                .tool_descriptions
                .get(t)
                .map(|d| one_line(d))
                .filter(|d| !d.is_empty());
            format!(
                "- **{}**: {}",
                one_line(t),
                d.unwrap_or_else(|| p.no_description.clone())
            )
        })
        .collect();
    doc.push(&list_or(&tools, &p.none));
}

/// What the skill asks and how to answer, the same for every step of the skill: above the
/// current step, so consecutive calls of one skill with the same history, memory and pending
/// steps above (a manager's notices, each in a stage of its own) share it as a prefix.
fn push_skill_rules(doc: &mut Doc, set: &PromptSet, skill: Skill, ctx: &PromptContext) {
    let h = set.headings();
    doc.heading(1, &format!("{}: {}", h.skill_at_hand, skill.name()));
    if skill.kind().calls_tools() {
        doc.heading(2, &h.mcp_base);
        doc.push(set.mcp_base_prompt());
    }
    let sp = set.skill(skill);
    doc.heading(2, &h.rules);
    doc.push(&sp.skill_prompt);
    doc.heading(2, &h.return_format);
    doc.push(&sp.return_format);
    if !sp.with_tools.is_empty() && !ctx.agent.tools.is_empty() {
        doc.push(&sp.with_tools);
    }
}

/// The current step (of a skill, or of a tool run as a native loop when `skill` is None): its
/// ids (unless atop its history), executor and intention, instruction_generation's target tool
/// step, and last the step's content: the section the answer is about is the one read last
/// (see the module's note on the order).
fn push_current_step(
    doc: &mut Doc,
    set: &PromptSet,
    skill: Option<Skill>,
    ctx: &PromptContext,
    ids_above: bool,
) {
    let (h, p) = (set.headings(), set.phrases());
    doc.heading(1, &h.current_step);
    doc.push(&step_head(ctx.step, ids_above));
    doc.heading(2, &h.intention);
    doc.push(&block(&one_line(&ctx.step.step_intention), 3, &p.none));
    if skill.is_some_and(|s| s.kind().fills_a_tool_step()) {
        push_tool_step(doc, set, ctx);
    }
    doc.heading(2, &h.content);
    doc.push(&block(&ctx.step.text_content, 3, &p.none));
}

/// instruction_generation's target: the tool step it writes the call for, and that server's
/// description and (when known) capabilities.
fn push_tool_step(doc: &mut Doc, set: &PromptSet, ctx: &PromptContext) {
    let (h, p) = (set.headings(), set.phrases());
    doc.heading(2, &h.tool_step);
    let Some(tool) = ctx.tool_step else {
        doc.push(&p.none);
        return;
    };
    doc.push(&step_ids(tool));
    doc.heading(3, &h.intention);
    doc.push(&block(&one_line(&tool.step_intention), 4, &p.none));
    doc.heading(3, &h.content);
    doc.push(&block(&tool.text_content, 4, &p.none));
    let server = tool.executor.name();
    doc.heading(3, &format!("{}: {}", h.server, server));
    let d = ctx
        .tool_descriptions
        .get(server)
        .map(|d| block(d, 4, &p.no_description));
    doc.push(&d.unwrap_or_else(|| p.no_description.clone()));
    if let Some(caps) = ctx.tool_capabilities {
        doc.push(&p.capabilities_note);
        doc.push(&json_block(caps));
    }
}

/// The results of the steps the current step depends on (a graph plan's `depends_on`, seed 001
/// `buildStepContext`), whole or, to fit a budget, cut like older history.
fn push_dependencies(doc: &mut Doc, set: &PromptSet, ctx: &PromptContext, fit: Fit) {
    if ctx.step.depends_on.is_empty() {
        return;
    }
    let deps: Vec<&StepState> = ctx
        .step
        .depends_on
        .iter()
        .filter_map(|id| ctx.agent.agent_step.get(id))
        .collect();
    doc.heading(1, &set.headings().depends_on);
    doc.push(&set.phrases().depends_note);
    // Under a budget every dependency's result is cut: none of them is "the newest".
    let cut = if fit.cut_older { deps.len() } else { 0 };
    push_steps_cut(doc, set, &deps, 2, 0, cut);
}

/// The ids a step's answer may need (its task and stage) and its executor, as a short list. Its
/// own id is left out: no answer names it.
fn step_ids(step: &StepState) -> String {
    format!("{}\n{}", scope_ids(step), executor_line(step))
}

/// A current step's first lines: its executor, after its ids unless they head its history.
fn step_head(step: &StepState, ids_above: bool) -> String {
    if ids_above {
        executor_line(step)
    } else {
        step_ids(step)
    }
}

/// The step's task and stage ids. A history with entries shows them at its top, where they
/// stay the same for the stage's later calls (a cached prefix); above an empty history they
/// would be the first thing two stages' calls differ in, ahead of the skill's rules (a
/// manager's notices, each in a stage of its own), so the current step shows them instead.
fn scope_ids(step: &StepState) -> String {
    format!(
        "- task_id: {}\n- stage_id: {}",
        one_line(step.task_id.as_str()),
        one_line(step.stage_id.as_str())
    )
}

fn executor_line(step: &StepState) -> String {
    format!(
        "- executor: {} ({})",
        one_line(step.executor.name()),
        step_type(&step.executor)
    )
}

fn step_type(e: &Executor) -> &'static str {
    match e {
        Executor::Skill(_) => "skill",
        Executor::Tool(_) => "tool",
    }
}

/// The stage's executed steps, oldest first; returns how many older ones it left out. Steps
/// are left out (and their results cut) from the oldest end a block at a time, so the lines
/// above the newest entries stay as they were for the next calls.
fn push_stage_history(
    doc: &mut Doc,
    set: &PromptSet,
    ctx: &PromptContext,
    done: &[&StepState],
    fit: Fit,
) -> usize {
    let (h, p) = (set.headings(), set.phrases());
    doc.heading(1, &h.history);
    if done.is_empty() {
        doc.push(&p.history_note);
    } else {
        doc.push(&format!("{}\n\n{}", p.history_note, scope_ids(ctx.step)));
    }
    // The base task never ends, so a manager's history there only grows; the newest executed
    // steps are what a step needs, and the prompt must stay bounded.
    let skipped = left_out(done.len(), fit.executed);
    if skipped > 0 {
        doc.push(&format!("{} {skipped}", p.history_omitted));
        if let Some(s) = ctx
            .agent
            .history_summary(&ctx.step.task_id, &ctx.step.stage_id)
        {
            doc.push(&format!("{}\n\n{}", p.history_summary_note, s.text));
        }
    }
    let shown = &done[skipped..];
    let whole_from = if fit.cut_older {
        cut_before(shown.len())
    } else {
        0
    };
    push_steps_cut(doc, set, shown, 2, skipped, whole_from);
    skipped
}

/// How many of `done` executed steps a history showing at most `shown` leaves out: a multiple
/// of half of `shown`, so the oldest entries drop a block at a time, not one a call.
pub fn left_out(done: usize, shown: usize) -> usize {
    let over = done.saturating_sub(shown);
    let block = (shown / 2).max(1);
    over.div_ceil(block) * block
}

/// Of `n` entries, the first this many have their results cut: all but the newest 5 to 9
/// ([`KEPT_WHOLE`] to twice that, less one), a block of [`KEPT_WHOLE`] cut at a time.
fn cut_before(n: usize) -> usize {
    n.saturating_sub(KEPT_WHOLE) / KEPT_WHOLE * KEPT_WHOLE
}

/// The stage's steps still to run, the next ones first.
fn push_pending(doc: &mut Doc, set: &PromptSet, pending: &[&StepState]) {
    let (h, p) = (set.headings(), set.phrases());
    doc.heading(1, &h.history_pending);
    // The next steps are what matters; a long queue (a flood of messages) must not grow the
    // prompt with it.
    let shown = pending.len().min(MAX_PENDING_IN_HISTORY);
    push_steps_cut(doc, set, &pending[..shown], 2, 0, 0);
    if pending.len() > shown {
        doc.push(&format!("{} {}", p.pending_omitted, pending.len() - shown));
    }
}

fn push_tool_history(doc: &mut Doc, set: &PromptSet, ctx: &PromptContext, fit: Fit) {
    let (h, p) = (set.headings(), set.phrases());
    doc.heading(1, &h.tool_history);
    doc.push(&p.tool_history_note);
    let chain: Vec<&StepState> = ctx.tool_history.unwrap_or_default().iter().collect();
    let whole_from = if fit.cut_older {
        cut_before(chain.len())
    } else {
        0
    };
    push_steps_cut(doc, set, &chain, 2, 0, whole_from);
}

/// `steps` as a history lists them, numbered from `first + 1` (their place in the whole
/// history, so a number never changes when older entries drop), the results of the first
/// `whole_from` cut. Each entry is compact: its executor, state, intention, text and result
/// (one line of JSON without empty fields); a step's id only where a plan names it.
fn push_steps_cut(
    doc: &mut Doc,
    set: &PromptSet,
    steps: &[&StepState],
    level: usize,
    first: usize,
    whole_from: usize,
) {
    let none = &set.phrases().none;
    if steps.is_empty() {
        doc.push(none);
        return;
    }
    for (i, s) in steps.iter().enumerate() {
        let kind = match s.executor {
            Executor::Skill(_) => String::new(),
            Executor::Tool(_) => " (tool)".to_owned(),
        };
        let title = format!(
            "{}. {}{kind} · {}",
            first + i + 1,
            s.executor.name(),
            s.execution_state
        );
        doc.heading(level, &title);
        let mut lines = Vec::new();
        if let Some(id) = &s.plan_id {
            lines.push(format!("- plan_id: {}", one_line(id)));
        }
        lines.push(format!("- step_intention: {}", one_line(&s.step_intention)));
        lines.push(bullet("text_content", &s.text_content, level + 1, none));
        if let Some(v) = &s.instruction_content {
            lines.push(format!("- instruction_content: {}", json_line(v)));
        }
        match &s.execute_result {
            // A failed step is one line: its reason. The raw answer that failed (and any tries
            // asked again) would only grow every later prompt.
            Some(v) if s.execution_state == StepExecutionState::Failed => {
                let why = v.error.as_deref().unwrap_or("(no reason)");
                lines.push(format!(
                    "- failed: {}",
                    one_line(&cap_chars(why, FAILURE_SHOWN))
                ));
            }
            Some(v) if i < whole_from => {
                let text = result_line(&s.executor, v);
                lines.push(format!(
                    "- execute_result (cut): {}",
                    cap_chars(&text, OLDER_RESULT_CHARS)
                ));
            }
            Some(v) => {
                lines.push(format!("- execute_result: {}", result_line(&s.executor, v)));
                doc.1.extend(media_in(v.output.values()));
            }
            None => {}
        }
        doc.push(&lines.join("\n"));
    }
}

/// How much of a failed step's reason a prompt's history shows.
const FAILURE_SHOWN: usize = 300;

/// The first `n` characters of `s`, marked when cut.
fn cap_chars(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_owned()
    } else {
        format!("{}…", s.chars().take(n).collect::<String>())
    }
}

fn json_block(v: &impl serde::Serialize) -> String {
    fenced(&serde_json::to_string_pretty(v).unwrap_or_default(), "json")
}

/// The agent's memory entries (how memory works is in the system message).
fn push_memory(doc: &mut Doc, set: &PromptSet, agent: &Agent) {
    let (h, p) = (set.headings(), set.phrases());
    doc.heading(1, &h.memory_content);
    let entries: Vec<_> = agent
        .persistent_memory
        .iter()
        .map(|(k, v)| bullet(&one_line(k), v, 3, &p.none))
        .collect();
    doc.push(&list_or(&entries, &p.none));
}

fn list_or(items: &[String], none: &str) -> String {
    if items.is_empty() {
        none.to_owned()
    } else {
        items.join("\n")
    }
}
