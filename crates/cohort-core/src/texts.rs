//! The catalog of texts the runtime itself writes (notices, the titles and texts of the steps
//! it adds, instructions, what repairs write into summaries and record of what they did, why
//! SyncState or a tool refused a step's work, a person's notices, attachment lists, spans of
//! time, why a person's request was refused and the REST API's errors), one per
//! [`Language`], read from `prompts/<lang>/texts.yaml`. Each text is a method taking its
//! placeholders as arguments, so a renderer cannot run without a catalog, a call site cannot
//! leave a placeholder out, and a translation that drops or invents one fails to load. It sits below every module that writes text (the prompt loader
//! reads a prompts folder's copy with the same checks).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::{self, Display};
use std::str::FromStr;
use std::sync::{Arc, OnceLock};

/// The language of a team: of its prompts (`prompts/en/`, `prompts/zh/`) and of every text the
/// runtime writes for it.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Language {
    /// English (`en`), the default.
    #[default]
    En,
    /// Chinese (`zh`).
    Zh,
}

impl Language {
    /// Every language Cohort ships prompts for; each must have a complete prompt set.
    pub const ALL: [Language; 2] = [Language::En, Language::Zh];

    /// The folder name and wire name: `en` or `zh`.
    pub fn code(self) -> &'static str {
        match self {
            Language::En => "en",
            Language::Zh => "zh",
        }
    }
}

impl fmt::Display for Language {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// A language name that is neither `en` nor `zh`.
#[derive(Debug, thiserror::Error)]
#[error("`{0}` is not a prompt language (expected `en` or `zh`)")]
pub struct UnknownLanguage(pub String);

impl FromStr for Language {
    type Err = UnknownLanguage;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        Language::ALL
            .into_iter()
            .find(|l| l.code().eq_ignore_ascii_case(t))
            .ok_or_else(|| UnknownLanguage(t.to_owned()))
    }
}

/// Declares the catalog: each text's key (its field in `texts.yaml`) and the placeholders it
/// must use, and a method per text that fills them in.
macro_rules! catalog {
    ($( $(#[$doc:meta])* $key:ident ( $($arg:ident),* ) ),* $(,)?) => {
        /// One language's runtime texts, complete and checked (see [`Texts::problems`]).
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub struct Texts {
            $($key: String,)*
        }

        impl Texts {
            /// Every text's key and the placeholders its text must use, each at least once.
            pub const KEYS: &'static [(&'static str, &'static [&'static str])] =
                &[$((stringify!($key), &[$(stringify!($arg)),*])),*];

            /// Takes the texts out of a validated `texts.yaml`.
            pub(crate) fn take(fields: &mut BTreeMap<String, String>) -> Self {
                Texts {
                    $($key: fields.remove(stringify!($key)).unwrap_or_default(),)*
                }
            }

            $(
                $(#[$doc])*
                // A text's arguments are its placeholders, as many as its sentence has facts.
                #[allow(clippy::too_many_arguments)]
                pub fn $key(&self, $($arg: impl Display),*) -> String {
                    fill(&self.$key, &[$((stringify!($arg), &$arg as &dyn Display)),*])
                }
            )*
        }
    };
}

catalog!(
    // ---- the team ----
    /// The base task's intention (its name, `MAS base task`, is the SPEC's and stays).
    base_task_intention(),
    // ---- ask_info answers (team/ask_info.rs) ----
    /// The first line of an answer; `kind` is the query's wire name.
    info_answer(kind),
    /// Stands for an empty value or list in an answer.
    info_none(),
    /// Heading: the tasks the asker manages.
    info_managed(),
    /// … when it manages none.
    info_managed_none(),
    /// Heading: the tasks the asker takes part in.
    info_joined(),
    /// … when it takes part in none.
    info_joined_none(),
    /// Heading: a task's latest shared information.
    info_shared(),
    /// One line of shared information (a list item).
    info_shared_line(time, agent_id, role, stage_id, content),
    /// Heading: a task, with its name.
    info_task(task_id, name),
    /// Heading: a task asked about by id.
    info_task_title(task_id),
    /// No such task.
    info_no_task(task_id),
    /// Label: a task's or stage's intention.
    info_intention(),
    /// Label: a task's or stage's state (the value is its wire name).
    info_state(),
    /// Label: a task's manager.
    info_manager(),
    /// Label: a task's group.
    info_task_group(),
    /// Said of the base task (a list item).
    info_base_task(),
    /// Label: a task's summary.
    info_summary(),
    /// Above a task's stages (a list item).
    info_stages(count),
    /// Heading: a stage, with its task.
    info_stage(stage_id, task_id),
    /// Heading: a stage asked about by id.
    info_stage_title(stage_id),
    /// The stage asked about is another task's.
    info_stage_elsewhere(stage_id, task_id, asked),
    /// No such stage.
    info_no_stage(stage_id),
    /// Label: a stage's allocation (its agents follow, one a line).
    info_allocation(),
    /// One agent of an allocation: its state (a wire name) and goal.
    info_allocated(agent_id, state, goal),
    /// Label: an agent's completion summary in a stage.
    info_completion_summary(),
    /// Stands for an agent's unknown state in a stage.
    info_unknown(),
    /// Heading: the agent templates.
    info_templates(),
    /// Says what the templates are for.
    info_templates_hint(),
    /// The team has no templates.
    info_no_templates(),
    /// Heading: one template.
    info_template(name),
    /// A template needs MCP servers the team lacks (`servers` lists them).
    info_template_lacks(servers),
    /// Heading: every agent in the system.
    info_everyone(),
    /// Heading: the team.
    info_team(),
    /// Heading: a task's group.
    info_task_group_of(task_id),
    /// An empty list of agents.
    info_nobody(),
    /// Heading: one agent, with its name.
    info_member(agent_id, name),
    /// Label: an agent's role.
    info_role(),
    /// Label: an agent's or template's profile.
    info_profile(),
    /// Label: whether an agent is a person or a model.
    info_kind(),
    /// That kind: a person.
    info_human(),
    /// That kind: a model.
    info_llm_agent(),
    /// The template an agent was made from (a list item).
    info_from_template(template),
    /// Label: skills.
    info_skills(),
    /// Label: MCP servers (tools).
    info_tools(),
    /// Label: the running stages an agent works in.
    info_working_in(),
    /// One running stage in that list.
    info_running_stage(stage_id, task_id),
    /// The agent works in no running stage.
    info_no_running_stage(),
    /// Heading: the agents of a stage.
    info_stage_agents(stage_id, task_id),
    /// Said of an allocated agent that is not in the team (a list item).
    info_not_in_team(),
    /// Label: an agent's goal in a stage.
    info_goal_in_stage(),
    /// Label: an agent's state in a stage.
    info_state_in_stage(),
    /// Heading: agent states.
    info_agent_states(),
    /// No agent was asked about.
    info_no_agent_ids(),
    /// Heading: one agent asked about.
    info_agent(agent_id),
    /// The agent has published no state yet.
    info_unpublished(),
    /// No such agent.
    info_no_agent(agent_id),
    /// Label: an agent's name.
    info_name(),
    /// Label: an agent's working state (a wire name).
    info_working_state(),
    /// Label: an agent's model.
    info_llm(),
    /// The tokens an agent spent (a list item).
    info_tokens_spent(prompt, completion),
    /// The steps an agent holds (a list item).
    info_steps_held(all, todo),
    /// Label: how many replies an agent waits for.
    info_replies_waited(),
    /// Label: the step an agent runs.
    info_running(),
    /// Above an agent's queued steps (a list item).
    info_next_steps(count),
    /// One step: who runs it, its state (a wire name), intention and place.
    info_step(executor, state, intention, task_id, stage_id),
    /// Above an agent's working memory (a list item).
    info_working_memory(),
    /// One task in it, with its stages and their step counts.
    info_memory_task(task_id, stages),
    /// A task in it with no stage.
    info_no_stage_held(),
    /// Label: an agent's persistent memory.
    info_persistent_memory(),
    /// Heading: the skills.
    info_skills_heading(),
    /// Heading: the MCP servers.
    info_tools_heading(),
    /// A skill or server with no description.
    info_no_description(),
    /// The team has no MCP servers.
    info_no_servers(),
    // ---- why a skill refuses an answer it could read (`skills/refusal.rs`), told the model ----
    /// A message names no receiver.
    refusal_no_receiver(),
    /// A message names its sender as a receiver.
    refusal_message_to_self(),
    /// A structured question (`ask`) for an agent.
    refusal_ask_to_agent(agent),
    /// A structured question that cannot be answered (`why` is one of the `ask_*` texts).
    refusal_unanswerable(why),
    /// The agent asked people all the questions a stage allows.
    refusal_ask_limit(asked, cap),
    /// add_stage with no stage.
    refusal_no_stages(),
    /// The action refused on the step's first try, given again.
    refusal_refused_just_now(action),
    /// add_stage from a step that decides on a stage.
    refusal_stage_undecided(stage),
    /// add_task without an intention.
    refusal_no_task_intention(),
    /// An allocation that gives an agent no goal; `example` is a JSON allocation.
    refusal_no_goal(agent, example),
    /// The example goal when the stage has no intention.
    refusal_goal_example(),
    /// A message asking to act, digested without a `<react_action>`.
    refusal_must_react(),
    /// A manager's plan for a message asking to act, with no task_manager step.
    refusal_must_manage(),
    /// A graph plan with some steps rejected (`rejected` lists them).
    refusal_part_graph(rejected),
    /// A summary outside any stage.
    refusal_summary_outside_stage(),
    /// A summary that only hands back the instruction or goal.
    refusal_summary_echoes(),
    /// An instruction_generation step with no tool step after it.
    refusal_no_tool_step(),
    /// A new agent's id that cannot be used.
    refusal_bad_agent_id(id),
    /// A tool instruction that is not a JSON object.
    tool_instruction_not_object(),
    /// A tool instruction whose `arguments` are not an object (`found` is their JSON).
    tool_instruction_arguments(found),
    /// A resource read without a URI.
    tool_instruction_no_uri(),
    /// A tool instruction that names no capability.
    tool_instruction_no_capability(),
    /// Two planned steps have the same id.
    graph_duplicate_id(id),
    /// A planned step depends on an id no step has.
    graph_unknown_dependency(step, missing),
    /// A planned step depends on itself.
    graph_self_dependency(step),
    /// Planned steps depend on each other in a circle (`steps`: `a → b → a`).
    graph_cycle(steps),
    /// `replan` names an id no step has.
    graph_unknown_replan(id),
    /// A planned step the agent may not run: its place, intention and why.
    plan_step_rejected(n, intention, why),
    /// Why: its executor names no skill.
    plan_unknown_skill(skill),
    /// … the agent lacks the skill.
    plan_no_skill(skill),
    /// … the planner may not plan it.
    plan_not_plannable(skill, planner),
    /// … a manager asked to act planned a skill that does the work.
    plan_manager_skill(skill),
    /// … a manager asked to act planned a tool.
    plan_manager_tool(tool),
    /// … the agent may not use the tool.
    plan_no_tool(tool),
    /// … its `type` is neither skill nor tool.
    plan_bad_type(kind),
    // ---- what the JSON reader says of broken JSON (`parse/json_fault.rs`) ----
    /// Where the JSON reader found a fault (`what` is one of the `json_*` texts below).
    json_fault(what, line, column),
    /// The JSON ends inside a list.
    json_end_in_list(),
    /// … inside an object.
    json_end_in_object(),
    /// … inside a string.
    json_end_in_string(),
    /// … before a value.
    json_end_before_value(),
    /// A `:` belongs here.
    json_expected_colon(),
    /// A `,` or `]` belongs here.
    json_expected_list_comma(),
    /// A `,` or `}` belongs here.
    json_expected_object_comma(),
    /// A word that is not true, false or null.
    json_expected_ident(),
    /// A value belongs here.
    json_expected_value(),
    /// A `"` belongs here.
    json_expected_quote(),
    /// A backslash escape JSON does not have.
    json_invalid_escape(),
    /// A number JSON cannot read.
    json_invalid_number(),
    /// A number too large.
    json_number_out_of_range(),
    /// A `\u` escape that names no character.
    json_invalid_code_point(),
    /// A `\u` escape cut short.
    json_hex_escape_end(),
    /// A lone half of a surrogate pair.
    json_lone_surrogate(),
    /// A raw control character in a string.
    json_control_character(),
    /// An object key that is not a string.
    json_key_not_string(),
    /// A comma before a closing bracket.
    json_trailing_comma(),
    /// Text after the value.
    json_trailing_characters(),
    /// Nesting too deep.
    json_too_deep(),
    /// Why a message's `ask` cannot be read (`reason` is the deserializer's), and its forms.
    parse_ask_forms(reason),
    // ---- why SyncState refuses a malformed message or instruction (`team/malformed.rs`) ----
    /// A sender outside the team's steps that speaks as the runtime.
    refused_reserved_sender(sender),
    /// A message for a stage that is over.
    refused_stage_over(stage, state),
    /// A message with no receiver.
    refused_no_receiver(),
    /// A message over the team's length.
    refused_too_long(chars, limit),
    /// A waiting message without one wait id per receiver.
    refused_wait_ids(),
    /// init_new_agent names no template of the team (`known` is one of the two below).
    refused_no_template(template, known),
    /// … and the team has none.
    refused_no_templates(),
    /// … the team's templates (`list`: their names).
    refused_templates(list),
    /// The managers created as many agents as the team allows.
    refused_hired_limit(hired),
    /// A new agent's id that an agent has already.
    refused_agent_id_taken(agent),
    /// A template that names an MCP server the team lacks.
    refused_template_lacks(template, file, server),
    /// add_task with an id a task has already.
    refused_task_exists(task),
    /// A stage that allocates no agent.
    refused_no_agent_allocated(intention),
    /// The node running the team did not take a hand-over (`detail`: the transport's words).
    refused_hand_over(detail),
    // ---- what the runtime says of a step and the steps it adds (`step/*.rs`), read by the
    // agent's model in its history and by people in the record ----
    /// A tool step on a server the agent may not use (`tools`: the ones it may).
    tool_server_not_allowed(agent, server, tools),
    /// A tool step with no instruction written for it.
    tool_no_instruction(),
    /// Why a step whose stage or task ended while it ran changed nothing.
    step_set_aside(),
    /// The same, in short, as the step's cancellation says it.
    step_set_aside_brief(),
    /// Title of the tool_decision step after a tool step's call.
    tool_decided_intention(server),
    /// Its text when the call returned.
    tool_returned_text(server, intention),
    /// Its text when the call failed.
    tool_failed_text(server, intention),
    /// Title of the decision an agent gets when a failure left it nothing to run.
    recovery_intention(),
    /// Its text: the step that failed and why.
    recovery_text(executor, intention, failure),
    /// Title of the reflection an agent gets when its plan ran dry without a summary.
    closing_reflection_intention(),
    /// Its text.
    closing_reflection_text(),
    /// The shared-information line of a step that finished.
    shared_step_finished(executor, intention),
    /// … of a step that failed.
    shared_step_failed(executor, intention),
    /// Why a planned step will not run: a step it depends on is no longer held.
    depends_not_held(step),
    /// … a step it depends on failed (`step` as `step_named*` gives it).
    depends_failed(step, reason),
    /// … a step it depends on was cancelled.
    depends_cancelled(step),
    /// … a step it depends on was cancelled, and why.
    depends_cancelled_because(step, reason),
    /// Stands for the reason of a failure that recorded none.
    depends_no_reason(),
    /// A step named in a reason: its plan id and intention.
    step_named_planned(id, intention),
    /// A step named in a reason: its intention.
    step_named(intention),
    /// Why a step ended: cancelled by someone.
    step_cancelled_by(by),
    /// … cancelled by someone, with their reason.
    step_cancelled_by_because(by, reason),
    /// A tool step a restart cut off, not called again.
    interrupted_tool_call(),
    /// A skill step a restart cut off, run again.
    interrupted_runs_again(),
    /// A native tool loop's call that names no tool of the loop.
    tool_loop_no_tool(name),
    /// A loop call whose arguments are JSON but not an object (`found`).
    tool_loop_arguments_not_object(tool, found),
    /// A loop call whose arguments are not JSON (`why`: the JSON reader's).
    tool_loop_arguments_not_json(tool, why),
    /// A call's error, as the loop's model is shown it.
    tool_loop_error(error),
    /// Title of the step that records one call of a loop.
    tool_loop_call_intention(tool, intention),
    /// Its text: the loop's step.
    tool_loop_call_text(step),
    /// The store did not confirm a loop's start, so no tool was called.
    tool_loop_not_stored(),
    /// A loop that reached its cap of calls.
    tool_loop_cap(cap),
    /// A tool call in a team without an MCP client.
    no_mcp_client(),
    /// A tool step on a server the team does not have.
    no_mcp_server(server),
    /// The store did not confirm a tool step's start, so the tool was not called.
    step_start_not_stored(),
    /// A tool loop without the server or the model it needs.
    tool_loop_unequipped(server),
    /// The store did not confirm a tool loop's start, so no tool was called.
    tool_loop_start_not_stored(),
    /// A tool loop on a server that offers no tools.
    server_offers_no_tools(server),
    /// A tool loop of an agent without a model.
    agent_has_no_model(),
    /// An LLM step of an agent without one (a person's).
    agent_has_no_llm(),
    /// A person's verdict that could not be stored (`detail`: the store's words).
    verdict_not_stored(detail),
    /// A call that waited for an approval nobody is left to give.
    approval_nobody_left(),
    /// A wait for a person whose stage or task ended first.
    person_wait_ended(),
    /// A plan that waits for a check nobody can give.
    plan_check_nobody(),
    /// A tool's refusal in plain words (`which` is one of the three below; `said`: the tool's).
    tool_refused(tool, which, said),
    /// What was not accepted: the arguments.
    tool_refused_arguments(),
    /// … one field's value.
    tool_refused_field(field),
    /// … several fields' values (`fields`: all but the last, in backticks).
    tool_refused_fields(fields, last),
    /// A refusal that held after the model wrote the arguments anew `n` times.
    tool_refused_after(told, n),
    /// Marks JSON shown to a model cut short.
    json_cut(),
    /// A refused call as the model is shown it, to judge the refusal or write the arguments.
    tool_refusal_prompt(tool, server, description, schema, intention, arguments, refusal),
    /// An answer without the tag it had to give.
    answer_no_tag(tag),
    /// A judgement of a refusal whose `about_arguments` is not a boolean.
    tool_judgement_not_bool(),
    /// Corrected arguments that are not one object.
    tool_arguments_not_object(),
    /// Corrected arguments that are the refused ones.
    tool_arguments_again(),
    /// A refusal whose corrected arguments could not be used.
    tool_correction_unusable(told, why),
    /// A call as the model judging its risk is shown it.
    risk_judge_prompt(tool, server, description, intention, arguments),
    /// A risk judgement with no level it knows (`found`: what it gave).
    risk_judge_bad_level(found),
    /// The summary of older history so far, in the request to redo it.
    history_summary_so_far(summary),
    /// Above the steps to fold into that summary.
    history_summary_steps(),
    /// One of those steps.
    history_summary_step(executor, state, intention, result),
    // ---- the steps a skill adds or plans in the agent's place (`skills/*.rs`) ----
    /// Title of the summary step that closes a stage.
    summary_closing_intention(),
    /// Its text. It names what to report (the result itself, and how it was reached): a
    /// wording that only said "summarise what was achieved" was handed back as the summary
    /// itself by a real 1.5B model, re-asked three times.
    summary_closing_text(),
    /// A reflection's note when it planned nothing.
    reflection_empty_note(),
    /// Title of the step that does the agent's goal, put in its plan.
    work_step_intention(),
    /// Title of the planning step that plans the rest of a graph plan again.
    replan_intention(step),
    /// Its text: the plan, and the step that finished.
    replan_text(plan, step),
    /// What a planned step waits for, in a plan shown as a list.
    plan_step_after(steps),
    // ---- what a repair did, as the step's record says it (`policy/repairs.rs`'s `Fired`) ----
    /// `second_try`.
    repair_second_try(step),
    /// `runtime_closing` (`instruction`: its JSON).
    repair_runtime_closing(instruction),
    /// `loop_cut`.
    repair_loop_cut(),
    /// `closed_json`.
    repair_closed_json(),
    /// `echoed_start_dropped`.
    repair_echoed_start_dropped(),
    /// Why `composed_summary` composed one.
    repair_summary_handed_back(),
    /// `summary_results_added`.
    repair_summary_results_added(),
    /// `composed_summary`, `composed_after_reasks` (`why`: what was wrong).
    repair_composed_summary(why),
    /// … with the older results left out.
    repair_composed_summary_older(why, count),
    /// `work_step_inserted`.
    repair_work_step_inserted(),
    /// `reflection_nothing_new`.
    repair_reflection_nothing_new(),
    /// `reflection_cap`.
    repair_reflection_cap(),
    /// `work_before_summary`.
    repair_work_before_summary(),
    /// `doubled_step_dropped` (`n`: the step's place in the plan).
    repair_doubled_step_dropped(n),
    /// `skill_named_as_tool`.
    repair_skill_named_as_tool(n, skill),
    /// `verdict_carried_out` (`why`: one of the `disagree_*` texts).
    repair_verdict_carried_out(why),
    /// `stage_reports_appended`.
    repair_stage_reports_appended(),
    /// `goal_kept_as_intention`.
    repair_goal_kept_as_intention(),
    /// `reply_closes_exchange`.
    repair_reply_closes_exchange(),
    /// `refusal_judged`: about the arguments.
    repair_refusal_arguments(),
    /// … about these fields.
    repair_refusal_fields(fields),
    /// … about something else.
    repair_refusal_other(),
    /// … a judgement that could not be used.
    repair_refusal_unusable(why),
    /// `arguments_reasked`: the refusal, and the fields changed.
    repair_arguments_reasked(told, changed),
    /// One repair made in a run or task (`names`: its rule).
    repairs_one(names),
    /// Repairs made in a run or task (`names`: each rule, `×n` for more than one firing).
    repairs_counted(count, names),
    /// Those repairs in `cohort run`'s totals, with the separator before them.
    run_repairs(repairs),
    // ---- notices from a task (`notice.rs`) ----
    /// A task was created with the reader as its manager; `listed` is the team, one agent a line.
    notice_task_created(name, task_id, intention, listed),
    /// Every agent of a stage reported; `reports` is each agent's goal and summary.
    notice_stage_complete(stage_id, task_id, intention, reports),
    /// A task has no stage left; `stages` is each stage with what its agents reported.
    notice_no_stage_left(task_id, intention, stages),
    /// An agent cannot go on in a stage.
    notice_agent_stuck(agent_id, stage_id, task_id, reason, goal, intention),
    /// A task the reader gave ended, with a reason that qualifies a finish.
    notice_task_ended_but(name, how, why),
    /// A task the reader gave ended, with the reason.
    notice_task_ended_because(name, how, why),
    /// A task the reader gave ended.
    notice_task_ended(name, how),
    /// A task the reader gave stalled for `idle`.
    notice_task_stalled(name, idle, manager),
    /// How a task's end reads in a sentence: finished.
    ended_finished(),
    /// … failed.
    ended_failed(),
    /// … was cancelled.
    ended_cancelled(),
    /// … ended in another way.
    ended_other(),
    /// One agent of the team in a task-created notice.
    teammate_line(agent_id, role),
    /// One agent's goal and summary in a stage-complete notice (`summary` already indented).
    stage_report(agent_id, goal, summary),
    /// One stage in a no-stage-left notice (its agents' reports follow on lines of their own).
    judged_stage(stage_id, state, intention),
    /// One stage in a task's summary for the operator.
    operator_stage(state, intention),
    /// An agent's entry that lists what its work produced (the results follow, indented).
    report_produced(agent_id),
    /// An agent's entry that gives its summary (the summary follows, indented).
    report_reported(agent_id),
    /// Ends a list of agents cut short.
    more_agents(count),
    /// Ends a list of summaries cut short.
    more_summaries(count),
    /// Ends a list of agents with their summaries cut short.
    more_reports(count),
    /// Ends a stage's list of colleagues cut short.
    more_colleagues(count),
    /// Stands for a missing goal or summary.
    none(),
    /// One failed stage in the reason a task failed.
    stage_failed(intention, why),
    // ---- how a task or stage ended (`team/outcome.rs`, `team/control.rs`) ----
    /// Why a stage gave no result: it was cancelled (`agents` says how each ended, or is empty;
    /// the text is trimmed, so a space before it is dropped with it).
    stage_why_cancelled(agents),
    /// … it was closed with every agent in it failed.
    stage_why_all_failed(agents),
    /// … it ended in `state`.
    stage_why_ended(state, agents),
    /// How each agent of a stage ended, in a stage's reason (`list`: `writer failed, …`).
    stage_agents(list),
    /// One agent and how it ended in that list.
    stage_agent(agent_id, state),
    /// Why a finish was hollow: no stage finished with a result.
    hollow_no_stage(),
    /// … and the first stage that gave none, with why.
    hollow_no_stage_which(intention, why),
    /// … the summary only hands back the goal.
    hollow_goal(),
    /// The refusal of a hollow finish, said to the manager (`detail` is one of the above).
    hollow_refused(detail),
    /// Why a task whose hollow finish was given again failed.
    declared_finished_but(reason),
    /// A task or stage cancelled with no reason given.
    cancelled_by(by),
    /// A task or stage cancelled with a reason.
    cancelled_by_because(by, reason),
    // ---- the runtime's part of a report (`report::Written`) and of a task's summary
    // (`report::TaskWritten`) ----
    /// A report the runtime composed from the results of the agent `name` (its id).
    composed_summary(name, results),
    /// Above the agent's results the runtime added to a summary that gave none.
    results_added(),
    /// Above the stages' results the runtime added to a task summary that gave none.
    stage_results_added(reports),
    /// A task summary the runtime composed when the manager judged the goal reached.
    verdict_composed(reports),
    /// A task summary the runtime wrote when it closed the task itself.
    closed_by_runtime(reason),
    /// What the stages gave, after that summary.
    stages_gave(reports),
    /// Why the runtime stopped a task that spent more tokens than its budget.
    task_over_tokens(spent, max),
    /// Why the runtime stopped a task that ran more steps than its budget.
    task_over_steps(spent, max),
    /// Why the runtime stopped a task whose step's model endpoint stayed down.
    task_endpoint_down(why),
    // ---- why an answer could not be used (`parse/mod.rs`, `skills/mod.rs`), told the model ----
    /// The tag itself, as an error names the place.
    where_tag(tag),
    /// Item `n` of the list in a tag.
    where_item(tag, n),
    /// The plan as a whole in a tag.
    where_plan(tag),
    /// The answer has no tag.
    parse_missing_tag(tag),
    /// The answer has neither of two tags.
    parse_missing_either(first, second),
    /// The tag is empty.
    parse_empty_tag(tag),
    /// The tag is not JSON (`reason` is the JSON reader's).
    parse_invalid_json(tag, reason),
    /// The value at `place` is of the wrong kind.
    parse_wrong_shape(place, expected, found),
    /// A field is missing.
    parse_missing_field(place, field),
    /// A field is empty.
    parse_empty_field(place, field),
    /// A field is of the wrong kind.
    parse_wrong_type(place, field, expected, found),
    /// A field cannot be read.
    parse_invalid_field(place, field, reason),
    /// The tag's value cannot be read.
    parse_invalid(tag, reason),
    /// The tag names an action (or query type) that does not exist.
    parse_unknown_action(tag, key, action, valid),
    /// A field holds a value outside its set.
    parse_unknown_value(place, field, value, valid),
    /// A kind of JSON value: null.
    kind_null(),
    /// … a boolean.
    kind_boolean(),
    /// … a number.
    kind_number(),
    /// … a string.
    kind_string(),
    /// … a list.
    kind_list(),
    /// … an object.
    kind_object(),
    /// Wanted: a JSON object.
    kind_json_object(),
    /// Wanted: a JSON list.
    kind_json_list(),
    /// Wanted: true or false.
    kind_true_or_false(),
    /// Wanted: an id or a list of ids.
    kind_id_or_ids(),
    /// Wanted: a string or a list of strings.
    kind_string_or_strings(),
    /// Every planned step was rejected.
    empty_plan(reasons),
    /// The answer only hands back the step's instruction or goal.
    echo(),
    /// A tool step given to a skill.
    no_tools(executor),
    /// A judgement of "reached" whose action does not close the work.
    disagree_reached(),
    /// A judgement of "not reached" whose action closes the work.
    disagree_not_reached(),
    /// The answer was cut at the token limit.
    cut_token_limit(error),
    /// The answer repeated itself and was stopped.
    cut_repetition(error),
    /// Why a skill step failed.
    step_failed(executor, why),
    /// The re-ask: the prompt first sent, why its answer could not be used, and the answer.
    reask(prompt, error, answer),
    /// Stands for the middle of a long answer left out of a re-ask.
    answer_cut(count),
    // ---- why SyncState refused what a step gave (`team/mod.rs`) ----
    /// No such task.
    refused_unknown_task(task),
    /// No such stage in the task.
    refused_unknown_stage(task, stage),
    /// No such agent.
    refused_unknown_agent(agent),
    /// The agent does not manage the task.
    refused_not_manager(agent, task),
    /// The task is over.
    refused_task_over(task, state),
    /// The base task has no stages.
    refused_base_task(),
    /// The stage is not running.
    refused_stage_not_running(stage, state),
    /// A stage of this goal ran too often.
    refused_run_limit(goal, runs),
    /// add_task outside the base task.
    refused_add_task_outside_base(task),
    /// Too many open tasks.
    refused_open_tasks(open, max),
    /// Too many tasks for one goal.
    refused_tasks_per_goal(max),
    /// Too many stages in the task.
    refused_stages_per_task(task, stages, max),
    /// Too many agent messages in the base task.
    refused_base_messages(max),
    /// The memory budget is full.
    refused_memory_full(held, budget),
    /// A step's output was refused (`refusal` says why).
    refused_output(refusal),
    /// A failed step's output was refused too.
    refused_output_too(failure, refusal),
    // ---- how `cohort run` says the run ended (`src/cli/run_cmd.rs`, `run.rs`) ----
    /// The task finished.
    run_finished(),
    /// A task failed.
    run_failed(),
    /// The run timed out.
    run_timed_out(secs),
    /// The run stopped at `--max-steps 1`.
    run_max_step(),
    /// The run stopped at `--max-steps`.
    run_max_steps(count),
    /// The team stalled.
    run_stalled(),
    /// The run was interrupted.
    run_interrupted(),
    /// A task failed, and why.
    run_task_failed(why),
    /// The task finished with stages that failed.
    run_with_failed_stages(outcome, which),
    /// The team stalled waiting for people.
    run_stalled_on(people, answer),
    /// Who answers when no person is named.
    run_an_operator(),
    /// How to answer a stalled run that kept its data.
    run_answer_in_console(team, data),
    /// How to answer a stalled run that kept no data.
    run_answer_without_data(team),
    /// The run's totals after its closing line (`cached`, `cost`, `repairs` start with their
    /// own separator or are empty).
    run_totals(steps, prompt, cached, completion, cost, tasks, repairs),
    /// One step run.
    run_one_step(),
    /// Steps run.
    run_steps(count),
    /// One task.
    run_one_task(),
    /// Tasks.
    run_tasks(count),
    /// Prompt tokens served from the endpoint's cache.
    run_cached(count),
    /// A task with no summary.
    run_no_summary(),
    // ---- `cohort run`'s progress lines (`src/cli/run_cmd.rs`) ----
    /// The marks before a step that ended, a wait, and a stage's start and end (the command
    /// pads them to one width): a step that finished.
    run_mark_ok(),
    /// A step that was set aside.
    run_mark_stopped(),
    /// A step that failed.
    run_mark_failed(),
    /// A wait: for the model, or for a person.
    run_mark_wait(),
    /// A stage started.
    run_stage_started(),
    /// A stage finished.
    run_stage_finished(),
    /// A stage was cancelled.
    run_stage_cancelled(),
    /// A stage failed.
    run_stage_failed(),
    /// Why a step failed or was set aside, on the line under it.
    run_reason(reason),
    /// A step's tokens (`prompt` says its cached part).
    run_usage(prompt, completion),
    /// A step's time and tokens.
    run_usage_took(took, prompt, completion),
    /// A step waits for its model's endpoint.
    run_model_wait(),
    /// What runs while the run waits: nothing.
    run_nothing_running(),
    /// How long the run has gone, and what runs now.
    run_waiting(elapsed, now),
    /// Spans of time in progress lines: milliseconds.
    run_ms(n),
    /// Seconds, with one decimal.
    run_s(n),
    /// Minutes and seconds.
    run_min_s(m, s),
    /// Where the team's data is kept (`cohort run`, `serve`, `replay` at start).
    data_is_in(place),
    /// `cohort serve` is serving the team on an address.
    serve_serving(team, addr),
    /// `cohort serve` stopped; where the team's data is.
    serve_stopped(place),
    /// `cohort serve` stopped, with nothing stored.
    serve_stopped_nothing_stored(),
    /// A node sends the team's events to NATS (`at`), in a stream.
    node_events_to_nats(at, stream),
    /// A node of the team is up on an address.
    node_up(name, team, addr),
    // ---- `cohort replay`'s report (`src/cli/replay_cmd.rs`, `call/replay.rs`) ----
    /// The replay starts.
    replay_start(calls, goal),
    /// How the replayed run's calls went, and how the run ended.
    replay_calls(served, left, outcome),
    /// How its tool calls went.
    replay_tools(served, left),
    /// How many answers, messages and steps went ahead out of their recorded turn, and how long
    /// each waited.
    replay_out_of_turn(count, seconds),
    /// One way the final states differ.
    replay_differs(what),
    /// The replayed run did what the recorded one did.
    replay_same(),
    /// How many requests differed, and where the first did.
    replay_divergences(count, agent, skill, part, difference),
    /// The first line a request differs at.
    replay_line(line, recorded, replayed),
    /// Past the end of a text.
    replay_text_ends(),
    /// A state both runs have, its fields differing (`fields` joined by `;`).
    replay_state_fields(kind, name, fields),
    /// One field that differs.
    replay_field(field, was, is),
    /// A state only the recorded run has.
    replay_only_recorded(kind, name),
    /// A state only the replayed run has.
    replay_only_replayed(kind, name),
    /// A step, named by its intention and agent.
    replay_step_name(intention, agent),
    /// The kinds of state, as the report names them: a task.
    replay_kind_task(),
    /// A stage.
    replay_kind_stage(),
    /// An agent.
    replay_kind_agent(),
    /// A step.
    replay_kind_step(),
    /// A fork starts; `then` says who answers from its step on.
    replay_forking(task, step, intention, calls, then),
    /// From the fork's step on, the live model answers.
    replay_then_live(),
    /// From the fork's step on, the record still answers.
    replay_then_record(),
    /// How the fork went.
    replay_fork_done(tasks, outcome, served, live),
    /// Where the fork is, and how to see it.
    replay_fork_where(out, team),
    // ---- what a stalled run waits for people to do (`run/waits.rs`) ----
    /// An agent waits for a person to answer its question.
    wait_reply(agent, who, question),
    /// The same, its question no longer kept.
    wait_reply_unknown(agent, who),
    /// An agent waits for a person to check its plan.
    wait_plan_check(agent, who, step),
    /// An agent waits for a person to approve its tool call.
    wait_approval(agent, who, step),
    /// An agent waits for a person to fill in its call's arguments.
    wait_params(agent, who, step),
    /// An agent waits for a person to answer what an MCP server asks.
    wait_server_question(agent, who, server, step, message),
    // ---- a notice's headline (a step's title) ----
    /// Headline: a task was created.
    headline_task_created(name),
    /// Headline: a stage is complete.
    headline_stage_complete(intention),
    /// Headline: no stage is left.
    headline_no_stage_left(),
    /// Headline: an agent cannot go on.
    headline_agent_stuck(agent_id, intention),
    /// Headline: a task ended (`how` is one of the `ended_*` texts).
    headline_task_ended(name, how),
    /// Headline: a task stalled.
    headline_task_stalled(name),
    // ---- instructions (`message.rs`), as people read them ----
    /// A stage starts, with the reader's goal in it.
    instruction_start_stage(stage_id, goal),
    /// A stage is finished.
    instruction_finish_stage(stage_id),
    /// A task is finished.
    instruction_finish_task(task_id),
    /// A task is paused.
    instruction_pause_task(task_id),
    /// A task is resumed.
    instruction_resume_task(task_id),
    /// A task is noted in the reader's working memory.
    instruction_update_memory(task_id),
    /// A tool call returned and is to be decided on.
    instruction_tool_decision(tool_name),
    // ---- steps the runtime adds (`step/receive.rs`) ----
    /// Title of a step that replies to a message.
    reply_intention(sender),
    /// First line of a reply step's text (the message follows).
    reply_heading(sender),
    /// Title of a step that digests a message.
    digest_intention(sender),
    /// First line of a digest step's text (the message follows).
    digest_heading(sender),
    /// First line of a step acting on a goal or a notice (the message follows).
    act_heading(sender),
    /// Title of a step acting on a notice.
    act_notice_intention(headline),
    /// Title of a step acting on a goal.
    act_goal_intention(sender),
    /// Title of the second try at a message that asks to act.
    act_again_intention(),
    /// Text of that second try: the first try's text and why it failed.
    act_again_text(text, failure),
    /// Title of the planning step a stage's start adds.
    stage_plan_intention(),
    /// Text of that step; `team` is the stage's agents, one a line.
    stage_plan_text(task_intention, stage_id, stage_intention, goal, team),
    /// One agent of a stage in that text.
    colleague_line(agent_id, role, goal),
    /// Title of a tool_decision step.
    tool_decision_intention(tool_name),
    /// Text of a tool_decision step.
    tool_decision_text(tool_name),
    /// Why a step was dropped: its stage was finished.
    dropped_stage_finished(),
    /// Why a step was dropped: its task was finished.
    dropped_task_finished(),
    // ---- a person's notices (`step/human.rs`, `state/ask.rs`) ----
    /// An agent waits for the person's reply.
    person_waited_for(sender, task_id),
    /// An agent asks for the person's reply (and does not wait).
    person_asked(sender, task_id),
    /// A stage starts with the person in it.
    person_stage_starts(stage_id, task_id, intention, goal),
    /// A stage the person is in is finished.
    person_stage_finished(stage_id, task_id),
    /// A task the person is in is finished.
    person_task_finished(task_id),
    /// An operator paused a task the person is in.
    person_task_paused(task_id),
    /// An operator resumed a task the person is in.
    person_task_resumed(task_id),
    /// Title of the step that records what a person sent.
    person_sent_intention(),
    /// What kind of answer is wanted: words of the person's own.
    ask_text(),
    /// … one of `options`.
    ask_select_one(options),
    /// … one or more of `options`.
    ask_select_many(options),
    /// … a form of `fields`.
    ask_form(fields),
    /// A form's field in that line (`required` is `ask_required` or empty).
    ask_field(key, kind, required),
    /// Marks a required field.
    ask_required(),
    /// An MCP server asks a question while an agent's call runs (`step/elicitation.rs`).
    elicitation_notice(server, agent_id, tool, step_id, intention, message, form),
    /// The form of an elicitation that asks only for a yes or a no.
    elicitation_yes_no(),
    /// A tool call was refused for its arguments and waits for a person (`step/params.rs`).
    params_notice(agent_id, tool, server, step_id, intention, reason, form),
    // ---- waits that ran out of time (`step/waits.rs`) ----
    /// Who a wait was for: an agent.
    no_reply_agent(agent_id),
    /// Who a wait was for, when it was not one agent.
    no_reply_receiver(),
    /// Told to a person whose wait ran out.
    no_reply_notice(from, task_id),
    /// The title of the step an agent whose wait ran out gets next.
    no_reply_intention(from),
    /// Its text.
    no_reply_text(from),
    // ---- plans and calls a person checks (`step/plan_check.rs`, `step/approval.rs`) ----
    /// A plan of steps waits for a person; `list` has one line a step.
    plan_check_steps(agent_id, intention, list),
    /// A manager's stages wait for a person; `list` has one `plan_check_stage` line a stage.
    plan_check_stages(agent_id, intention, list),
    /// One stage of a plan waiting for a person: its number, intention and agents.
    plan_check_stage(n, intention, agents),
    /// Told to the planner when a person rejected its plan; `proposed` lists the plan.
    plan_rejected(by, proposed, reason),
    /// One rejected stage, in `plan_rejected`'s list.
    plan_rejected_stage(intention),
    /// A tool call waits for a person's approval; `warning` is empty or a line of its own.
    approval_notice(agent_id, tool, server, intention, warning, risk, reason, args),
    /// Where a long list of a call's arguments was cut.
    approval_args_cut(n),
    /// Why a call has its risk (`policy/risk.rs`, `step/risk_judge.rs`): the server's
    /// configuration sets the tool's level.
    risk_configured_tool(tool, level),
    /// The server's configuration sets every tool's level.
    risk_configured_all(level),
    /// The tool only reads.
    risk_read_only(),
    /// The tool only adds, within its own domain.
    risk_additive_closed(),
    /// The tool only adds, possibly in the outside world.
    risk_additive_open(),
    /// The tool says nothing of its effects.
    risk_unannotated(),
    /// The tool may overwrite or delete.
    risk_destructive(),
    /// The server could not be asked what the tool does.
    risk_server_unreachable(error),
    /// The model judged the call's arguments.
    risk_judged(reason),
    /// The model gave no reason.
    risk_no_reason(),
    /// The model's judgement could not be read.
    risk_judge_unreadable(why),
    /// The model could not judge.
    risk_judge_failed(error),
    /// The model judged the arguments no riskier than the annotations say.
    risk_judged_lower(annotated, level, judged),
    /// A plan's risk when none of its tool servers was described yet.
    risk_servers_not_described(),
    /// A HIGH call's warning to the person who approves it.
    risk_high_warning(tool, reason),
    /// A call's risk levels, as people read them: low.
    risk_low(),
    /// Medium risk.
    risk_medium(),
    /// High risk.
    risk_high(),
    // ---- attachments (`attachment.rs`) ----
    /// Above the files attached to a message; `tool` reads one.
    attached_to_message(tool),
    /// Above the files attached to a task; `tool` reads one.
    attached_to_task(tool),
    /// One attached file.
    attachment_line(name, mime, size, id),
    // ---- spans of time (`clock.rs`) ----
    /// Seconds.
    span_seconds(n),
    /// Minutes.
    span_minutes(n),
    /// Whole hours.
    span_hours(n),
    /// Hours and minutes.
    span_hours_minutes(hours, minutes),
    // ---- why a person's message was refused (`step/human.rs`), as the REST API says it ----
    /// The sender is not a person.
    human_not_human(agent),
    /// The message names no receiver.
    human_no_receiver(),
    /// The message is empty.
    human_empty(),
    /// The person is among the receivers.
    human_to_self(),
    /// `wait_secs` is out of its range.
    human_bad_wait(max),
    /// The text is not an answer the question takes (`why` is one of the `ask_*` texts).
    human_bad_answer(to, why),
    // ---- why a file cannot be attached (`attachment.rs`) ----
    /// The file is empty.
    attachment_empty(),
    /// The file is over the cap.
    attachment_too_large(bytes, max),
    /// The name is not usable.
    attachment_bad_name(name, max),
    /// The type is not one taken (`taken`: the types that are).
    attachment_type_not_taken(mime, taken),
    /// The bytes are not what the type says (`why` is the check's, in English).
    attachment_not_its_type(mime, why),
    /// Too many files for one message.
    attachment_too_many(max, count),
    // ---- why a question or its answer does not hold (`state/ask.rs`) ----
    /// A choice's options are wrong.
    ask_bad_options(max),
    /// A form's fields are wrong.
    ask_bad_fields(max),
    /// A select field has too few options.
    ask_field_options(field),
    /// A number field's bounds are the wrong way round.
    ask_bad_bounds(field),
    /// An option, key or label is too long.
    ask_too_long(max),
    /// The answer is empty.
    ask_empty_answer(),
    /// The answer is too long.
    ask_answer_too_long(max),
    /// A choice was answered with something not offered.
    ask_not_an_option(options),
    /// A form was answered with something other than a JSON object (`why` is the JSON reader's).
    ask_not_a_form(why),
    /// A form field's value does not fit it (`why` in English).
    ask_bad_field(field, why),
    // ---- why a message's choice does not fit its receiver (`state/choice.rs`) ----
    /// The model is not one of the agent's (`allowed`: a list, or `choice_none`).
    choice_model(agent, model, allowed),
    /// The MCP server is not one of the agent's tools.
    choice_server(agent, server, allowed),
    /// Stands for an empty list of models or tools.
    choice_none(),
    // ---- why a step could not be cancelled (`step/cancel.rs`) ----
    /// The agent has no such step.
    cancel_no_step(agent, step),
    /// The step is over already.
    cancel_over(step, state),
    /// The step's result is being stored.
    cancel_ending(step),
    /// The agent did not answer.
    cancel_unavailable(detail),
    // ---- why a person's verdict was refused (`step/approval.rs`) ----
    /// The step waits for no person.
    verdict_not_waiting(step),
    /// The hash sent is not the one of what waits.
    verdict_stale_hash(),
    /// Edited arguments that are not a JSON object.
    verdict_bad_arguments(),
    /// A rejection with a blank reason.
    verdict_no_reason(),
    /// A verdict for another kind of wait (`waits_for` and `instead` in English).
    verdict_wrong_kind(step, waits_for, instead),
    /// An edited plan that cannot run (`why` in English).
    verdict_bad_plan(why),
    /// Values that do not fit a parameter request's form (`why` is one of the `ask_*` texts).
    verdict_bad_params(why),
    /// The runtime did not answer.
    verdict_unavailable(detail),
    // ---- the REST API's errors (`cohort-server`'s `api/reason.rs`) ----
    /// Too many failed logins.
    api_too_many_logins(secs),
    /// A failed login.
    api_login_failed(),
    /// A login from the same address is being checked.
    api_login_in_progress(),
    /// Too many password checks at once.
    api_password_checks_busy(),
    /// A password check that failed to run.
    api_password_check_failed(detail),
    /// The session could not be stored.
    api_session_not_stored(detail),
    /// The logout could not be stored.
    api_logout_not_stored(detail),
    /// A logout without a bearer token.
    api_no_bearer_token(),
    /// A protected route without a token.
    api_no_token(),
    /// The websocket without a token.
    api_no_token_in_url(),
    /// A token unknown or expired.
    api_invalid_token(),
    /// A handler reached without a caller.
    api_not_logged_in(),
    /// The store cannot say whose a token is.
    api_sessions_unreadable(detail),
    /// Only an operator sees the nodes.
    api_operator_only_nodes(),
    /// … reads the metrics.
    api_operator_only_metrics(),
    /// … cancels a step.
    api_operator_only_cancel_step(),
    /// … cancels a task.
    api_operator_only_cancel_task(),
    /// … pauses or resumes a task.
    api_operator_only_pause_task(),
    /// … pauses or resumes an agent.
    api_operator_only_pause_agent(),
    /// … cancels a stage.
    api_operator_only_cancel_stage(),
    /// … retries a stage.
    api_operator_only_retry_stage(),
    /// … decides on waiting steps.
    api_operator_only_decide(),
    /// A token used for another person.
    api_not_your_token(holder, human),
    /// A message into a task the caller is not in.
    api_not_in_task(task),
    /// A message to an agent the caller cannot see.
    api_receiver_out_of_reach(agent),
    /// A websocket from an origin not allowed.
    api_origin_not_allowed(origin),
    /// A path under `/api/` that names no route (`routes`: those there are).
    api_no_such_route(method, path, routes),
    /// A method the path does not take (`takes`: the methods it does, or `api_no_method`).
    api_method_not_allowed(method, path, takes),
    /// Stands for an empty list of methods.
    api_no_method(),
    /// No such task (or not one the caller sees).
    api_no_such_task(task),
    /// No such task in memory, to follow.
    api_task_not_in_memory(task),
    /// No such stage.
    api_no_such_stage(stage),
    /// No such step.
    api_no_such_step(step),
    /// No such agent.
    api_no_such_agent(agent),
    /// No such person.
    api_no_such_human(human),
    /// No state with this id.
    api_no_such_state(id),
    /// No such attached file.
    api_no_such_attachment(id),
    /// No such image or sound.
    api_no_such_blob(id),
    /// The metrics listener serves nothing else.
    api_only_metrics(),
    /// A body that is not JSON (`detail`: axum's words, in English).
    api_malformed_json(detail),
    /// A JSON body that does not fit the route's (`detail`: axum's words).
    api_json_mismatch(detail),
    /// A body without the JSON content type (`detail`: axum's words).
    api_not_json(detail),
    /// A body axum could not take (`detail`: axum's words).
    api_body_rejected(detail),
    /// A query string that does not fit the route's (`detail`: axum's words).
    api_malformed_query(detail),
    /// A path segment that does not parse (`detail`: axum's words).
    api_malformed_path(detail),
    /// A websocket request that cannot be upgraded (`detail`: axum's words).
    api_not_a_websocket(detail),
    /// The body did not come in time.
    api_body_timeout(secs),
    /// The body is over the limit.
    api_body_too_large(limit),
    /// The body is over its route's limit (a standing-by node).
    api_body_over_route_limit(),
    /// The body could not be read (`detail`: the reader's words).
    api_body_unreadable(detail),
    /// A cancel's body that is neither empty nor `{reason}` (`detail`: the JSON reader's).
    api_bad_cancel_body(detail),
    /// `/api/states` without `type`.
    api_missing_type(kinds),
    /// `/api/states` with an unknown `type`.
    api_unknown_type(name, kinds),
    /// `limit=0`.
    api_limit_too_small(),
    /// `limit` over the page's most.
    api_limit_too_large(max),
    /// `max_bytes` out of range.
    api_max_bytes_out_of_range(max),
    /// `full` without one task.
    api_full_needs_task(),
    /// An approval of no known shape.
    api_approve_shape(),
    /// Parameter values that are not an object.
    api_values_not_object(),
    /// Websocket parameters on the event stream.
    api_websocket_only_params(),
    /// `format=flow` without a task.
    api_flow_needs_task(),
    /// An unknown websocket format.
    api_unknown_format(format),
    /// Flow parameters without `format=flow`.
    api_flow_only_params(),
    /// A message over the team's length.
    api_message_too_long(chars, limit),
    /// A message naming a file not uploaded.
    api_attachment_not_uploaded(id, path),
    /// Attached files need a store.
    api_no_store(),
    /// A receiver with its share of work queued.
    api_receiver_busy(agent, steps, bytes),
    /// A message sent but not confirmed stored.
    api_message_not_confirmed(),
    /// A rejection of a step that waits for nobody.
    api_not_waiting_for_verdict(step),
    /// A rejection that would cancel the base task.
    api_base_task_not_cancelled(),
    /// A rejection that cancels a task without a reason.
    api_rejection_needs_reason(),
    /// An agent on another node did not answer (`detail`: why).
    api_agent_unreachable(agent, detail),
    /// A goal held: the team runs its most tasks.
    api_goal_held_running(running, max),
    /// A goal held: the person gave their most goals lately.
    api_goal_held_rate(given, window, retry),
    /// A person has their most live feeds.
    api_feed_limit_person(human, open),
    /// The server has its most live feeds.
    api_feed_limit_total(total),
    /// The most tasks are followed.
    api_too_many_followed(max),
    /// The most large reads are being built.
    api_reads_busy(reads),
    /// Every connection place is taken.
    api_too_many_connections(),
    /// The team's actors are gone (`detail`: the mailbox's words).
    api_team_not_running(detail),
    /// The store did not answer (`detail`: the store's words, in English).
    api_store_unavailable(detail),
    /// The store could not be read.
    api_store_unreadable(detail),
    /// The store did not keep a file in time.
    api_file_not_kept_in_time(),
    /// The store did not keep a file.
    api_file_not_kept(detail),
    /// Reading a task back from the store failed.
    api_store_read_failed(detail),
    /// Reading a step's stored calls failed.
    api_stored_calls_unreadable(detail),
    /// A shared read failed to build.
    api_read_failed(detail),
    /// Anything else that should not happen.
    api_internal(detail),
    /// A standing-by node that does not know which node runs the team.
    api_standby_leader_unknown(node),
    /// … whose own previous run holds the team's lease.
    api_standby_previous_run(node),
    /// … that heard of a node that stands by too.
    api_standby_leader_standing_by(node, leader, address),
    /// … that cannot reach the node running the team.
    api_standby_leader_unreachable(node, leader, address, detail),
);

impl Texts {
    /// What a task or stage `by` cancelled says of its end, with their `reason` when they gave
    /// one.
    pub fn cancelled(&self, by: impl Display, reason: &str) -> String {
        match reason.trim() {
            "" => self.cancelled_by(by),
            r => self.cancelled_by_because(by, r),
        }
    }

    /// The built-in catalog of `lang` (`prompts/<lang>/texts.yaml`, embedded in the binary),
    /// read once a language. Its validity is pinned by a unit test.
    pub fn builtin(lang: Language) -> Arc<Texts> {
        static EN: OnceLock<Arc<Texts>> = OnceLock::new();
        static ZH: OnceLock<Arc<Texts>> = OnceLock::new();
        let (cell, yaml) = match lang {
            Language::En => (&EN, include_str!("../../../prompts/en/texts.yaml")),
            Language::Zh => (&ZH, include_str!("../../../prompts/zh/texts.yaml")),
        };
        cell.get_or_init(|| match Texts::read(yaml) {
            Ok(t) => Arc::new(t),
            Err(e) => panic!("the built-in texts of {lang} are invalid: {e}"),
        })
        .clone()
    }

    /// The built-in English catalog: the default until a team's language is given, and the
    /// language of logs and of the tools that report to the person debugging a team.
    pub fn english() -> Arc<Texts> {
        Texts::builtin(Language::En)
    }

    /// A catalog from the text of a `texts.yaml`: every key present, none empty, each with
    /// its placeholders (the prompt loader reports the same problems by file and field).
    fn read(yaml: &str) -> Result<Texts, String> {
        let map: BTreeMap<String, String> =
            serde_yaml::from_str(yaml).map_err(|e| format!("not a mapping of texts: {e}"))?;
        let mut fields: BTreeMap<String, String> = map
            .into_iter()
            .map(|(k, v)| (k, v.trim().to_owned()))
            .collect();
        for (key, _) in Texts::KEYS {
            let text = fields.get(*key).map(String::as_str).unwrap_or_default();
            if text.is_empty() {
                return Err(format!("`{key}` is missing or empty"));
            }
            if let Some(p) = Texts::problems(key, text).first() {
                return Err(format!("`{key}` {p}"));
            }
        }
        Ok(Texts::take(&mut fields))
    }

    /// What is wrong with the text of `key`: a placeholder it must use and does not, one it
    /// uses and has not, or an unmatched brace. Empty for a key the catalog does not have.
    pub fn problems(key: &str, text: &str) -> Vec<String> {
        let Some((_, args)) = Texts::KEYS.iter().find(|(k, _)| *k == key) else {
            return Vec::new();
        };
        let used = match placeholders(text) {
            Ok(used) => used,
            Err(e) => return vec![e],
        };
        let mut out = Vec::new();
        for a in args.iter().filter(|a| !used.contains(a)) {
            out.push(format!("leaves out `{{{a}}}`, which it must show"));
        }
        for u in used.iter().filter(|u| !args.contains(u)) {
            let known = args
                .iter()
                .map(|a| format!("`{{{a}}}`"))
                .collect::<Vec<_>>();
            let known = if known.is_empty() {
                "none".to_owned()
            } else {
                known.join(", ")
            };
            out.push(format!(
                "uses `{{{u}}}`, which this text does not have (it has: {known}; write a brace \
                 itself as `{{{{` or `}}}}`)"
            ));
        }
        out
    }
}

/// A piece of a text: a run of literal text (a doubled brace is one brace) or a placeholder's
/// name.
enum Piece<'a> {
    Literal(&'a str),
    Placeholder(&'a str),
}

/// The pieces of `text`, in order; an error for a brace that is neither doubled nor part of a
/// `{name}`. One reading shared by the load-time check and by [`fill`].
struct Pieces<'a> {
    rest: &'a str,
}

impl<'a> Iterator for Pieces<'a> {
    type Item = Result<Piece<'a>, String>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let i = match self.rest.find(['{', '}']) {
            Some(0) => 0,
            Some(i) => return Some(Ok(Piece::Literal(self.take(i, i)))),
            None => {
                return Some(Ok(Piece::Literal(
                    self.take(self.rest.len(), self.rest.len()),
                )));
            }
        };
        let (c, after) = (self.rest.as_bytes()[i], &self.rest[1..]);
        if after.as_bytes().first() == Some(&c) {
            return Some(Ok(Piece::Literal(self.take(1, 2))));
        }
        if c == b'}' {
            self.rest = "";
            return Some(Err(
                "has a `}` that closes nothing (write `}}` for a brace)".into(),
            ));
        }
        let Some(end) = after.find('}') else {
            self.rest = "";
            return Some(Err(
                "has a `{` that is never closed (write `{{` for a brace)".into(),
            ));
        };
        let name = &after[..end];
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
            self.rest = "";
            return Some(Err(format!(
                "has `{{{name}}}`, not a placeholder (write `{{{{` for a brace)"
            )));
        }
        self.rest = &after[end + 1..];
        Some(Ok(Piece::Placeholder(name)))
    }
}

impl<'a> Pieces<'a> {
    /// The first `len` bytes of what is left, which then starts `skip` bytes on.
    fn take(&mut self, len: usize, skip: usize) -> &'a str {
        let piece = &self.rest[..len];
        self.rest = &self.rest[skip..];
        piece
    }
}

/// The placeholders `text` uses, in order.
fn placeholders(text: &str) -> Result<Vec<&str>, String> {
    Pieces { rest: text }
        .filter_map(|p| match p {
            Ok(Piece::Placeholder(name)) => Some(Ok(name)),
            Ok(Piece::Literal(_)) => None,
            Err(e) => Some(Err(e)),
        })
        .collect()
}

/// `template` with each `{name}` replaced by its argument and `{{`/`}}` by one brace. The
/// catalog's texts were checked at load, so every name has its argument.
fn fill(template: &str, args: &[(&str, &dyn Display)]) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(template.len() + 32);
    for piece in (Pieces { rest: template }).flatten() {
        match piece {
            Piece::Literal(text) => out.push_str(text),
            Piece::Placeholder(name) => {
                if let Some((_, v)) = args.iter().find(|(n, _)| *n == name) {
                    let _ = write!(out, "{v}");
                }
            }
        }
    }
    out
}

// For the tests that render texts in Chinese (it knows the skills' names, which this bottom
// module's own code must not import).
#[cfg(test)]
pub(crate) use tests::english_words;

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The English words in `text` a reader of another language would trip on: ASCII words of two
    /// letters or more outside code spans, tags and ids, other than the names every language keeps
    /// (skills, states' wire names, identifiers with `_`, the product's and formats' names) and
    /// `kept`. For the tests that render texts in Chinese.
    pub(crate) fn english_words(text: &str, kept: &[&str]) -> Vec<String> {
        const NAMES: &[&str] = &[
            "SyncState",
            "TaskState",
            "LLM",
            "MCP",
            "JSON",
            "id",
            "token",
            "null",
            "true",
            "false",
            "init",
            "pending",
            "running",
            "finished",
            "failed",
            "cancelled",
            "skipped",
            "idle",
            "working",
            "waiting",
            "paused",
        ];
        let code = regex::Regex::new(r"`[^`]*`|</?[a-z_]+>|[0-9a-f]{8}-[0-9a-f-]{27}").unwrap();
        let word = regex::Regex::new(r"[A-Za-z][A-Za-z_]+").unwrap();
        let bare = code.replace_all(text, " ");
        word.find_iter(&bare)
            .map(|m| m.as_str())
            .filter(|w| !w.contains('_') && !NAMES.contains(w) && !kept.contains(w))
            .filter(|w| crate::state::Skill::ALL.iter().all(|s| s.name() != *w))
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn fill_puts_each_argument_in_its_place_and_undoubles_braces() {
        let t = "{a} and {b}, {{literal}} {a}";
        assert_eq!(
            fill(t, &[("a", &1 as &dyn Display), ("b", &"x")]),
            "1 and x, {literal} 1"
        );
    }

    #[test]
    fn a_text_that_drops_or_invents_a_placeholder_or_breaks_a_brace_is_named() {
        assert!(Texts::problems("teammate_line", "- `{agent_id}` ({role})").is_empty());
        let dropped = Texts::problems("teammate_line", "- `{agent_id}`");
        assert!(dropped[0].contains("leaves out `{role}`"), "{dropped:?}");
        let invented = Texts::problems("teammate_line", "{agent_id} {role} {goal}");
        assert!(invented[0].contains("uses `{goal}`"), "{invented:?}");
        assert!(
            invented[0].contains("`{agent_id}`, `{role}`"),
            "{invented:?}"
        );
        let open = Texts::problems("teammate_line", "{agent_id} {role} {");
        assert!(open[0].contains("never closed"), "{open:?}");
        let close = Texts::problems("none", "a } b");
        assert!(close[0].contains("closes nothing"), "{close:?}");
        assert!(Texts::problems("none", "{{ok}}").is_empty());
    }

    #[test]
    fn the_english_scan_finds_prose_and_passes_names_code_and_ids() {
        let text = "你在本阶段的目标：Plan the steps（`add_task`、<planned_step>、running、\
                    task_id、think、a1b2c3d4-0000-4000-8000-000000000000、LLM）";
        assert_eq!(english_words(text, &[]), ["Plan", "the", "steps"]);
        assert_eq!(english_words(text, &["Plan", "the"]), ["steps"]);
    }

    /// The texts of SyncState's malformed-message refusals, of the steps the runtime adds and
    /// of the repairs' records (issue 51), from `refused_reserved_sender` to the notices: in
    /// Chinese, each holds no English word (its placeholders filled with code) and differs
    /// from its English.
    #[test]
    fn refusals_steps_and_repairs_hold_no_english_word_in_chinese() {
        let read = |yaml: &str| -> BTreeMap<String, String> { serde_yaml::from_str(yaml).unwrap() };
        let en = read(include_str!("../../../prompts/en/texts.yaml"));
        let zh = read(include_str!("../../../prompts/zh/texts.yaml"));
        let at = |key: &str| Texts::KEYS.iter().position(|(k, _)| *k == key).unwrap();
        let keys = &Texts::KEYS[at("refused_reserved_sender")..at("notice_task_created")];
        assert!(keys.len() > 90, "{}", keys.len());
        for (key, args) in keys {
            let code: Vec<(&str, &dyn Display)> =
                args.iter().map(|a| (*a, &"`x`" as &dyn Display)).collect();
            let (english, chinese) = (fill(en[*key].trim(), &code), fill(zh[*key].trim(), &code));
            let words = english_words(&chinese, &[]);
            assert!(words.is_empty(), "{key}: {chinese} ({words:?})");
            assert_ne!(english, chinese, "{key} is not translated");
        }
    }

    #[test]
    fn every_language_has_every_text_with_its_placeholders() {
        // A missing key or a bad placeholder makes the built-in set fail to load, which
        // `builtin` turns into a panic: loading both is the check.
        for lang in Language::ALL {
            let t = Texts::builtin(lang);
            assert!(!t.notice_task_created("n", "t", "i", "l").is_empty());
            // The prompt loader reads the same file to the same catalog.
            let set = crate::prompt::PromptSet::builtin(lang);
            assert_eq!(set.texts().as_ref(), t.as_ref());
        }
        let broken = "none: '{a}'";
        assert!(Texts::read(broken).unwrap_err().contains("missing"));
    }
}
