//! The repair policy: every rule by which the runtime mends a model's slip (a loop, an echo,
//! broken JSON, a plan with no work in it, …), each named, switchable and counted. A rule
//! fires only where this policy allows it, and every firing is recorded on its step
//! ([`Fired`]) and counted in its task.
//!
//! Three presets (`repairs:` in the team file):
//! - `strict`: a model's answer is never altered; an unusable one is only asked about again
//!   (with the error), and a goal or notice gets its one second try.
//! - `auto` (the default): rules also act in the model's place, but only on an answer that is
//!   unusable as it stands (cut off, contradicting itself, still broken after the re-asks).
//! - `small_model`: every rule, including those that change or refuse an answer that could
//!   be read (an echoed instruction, a plan without work, a summary without a result).
//!
//! This file is the catalog; each rule's body is in one module per group, by what it mends.
//! The groups that mend a skill's answer read the agent's steps and the skills' answers, which
//! the model layer below this policy cannot: they sit in `skills::repairs`.
//! - answers handed back (`echo`): `skills::repairs::echo`, on the text tests of
//!   [`super::echo`];
//! - plans (`work_step_inserted`, `work_before_summary`, `reflection_nothing_new`,
//!   `reflection_cap`, `doubled_step_dropped`): `skills::repairs::plans`;
//!   `skill_named_as_tool` is one guard where the plan's step gets its executor
//!   (`skills::plan`);
//! - completion summaries (`echoed_start_dropped`, `composed_summary`,
//!   `composed_after_reasks`, `summary_results_added`): `skills::repairs::summaries`;
//! - a manager's instructions (`verdict_agrees`, `verdict_carried_out`,
//!   `stage_reports_appended`, `goal_only_names_agent`, `goal_kept_as_intention`,
//!   `refused_action_barred`): `skills::repairs::instructions`;
//! - messages: `reply_closes_exchange` is one condition where a message is sent
//!   (`skills::send_message`), its echo the `echo` group's;
//! - the call: `loop_cut` and `closed_json` on a reply, `call::repairs` (the loop found by
//!   `call::repetition`); the rest are switches on the machinery that runs the call, and stay
//!   in it: `loop_cut`, `reask_temperature` for a provider (`call::Mending`), `reask`,
//!   `reask_stuck`, `echo_asked_afresh` (`step::reask`), `second_try`, `runtime_closing`
//!   (`step::complete`), `stage_run_limit` (`team::instructions`), `refusal_judged`,
//!   `arguments_reasked` (`step::tool_refusal`, and the agent actor's refused tool call).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One rule that mends a model's slip.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Repair {
    /// An answer that writes one passage again and again is stopped after its first round
    /// (`loop_times` rounds of at least `loop_span` bytes).
    LoopCut,
    /// A constrained (JSON) answer stopped in a loop is closed where it stopped.
    ClosedJson,
    /// An unusable answer is asked about again with the error, up to `reasks` times.
    Reask,
    /// A model that gives the same unusable answer word for word is not asked again.
    ReaskStuck,
    /// Each re-ask samples more freely (a higher temperature).
    ReaskTemperature,
    /// A goal or notice whose step failed (or was refused) gets one fresh step.
    SecondTry,
    /// An answer that only hands back its instruction or its goal (within `echo_slack`
    /// characters: a thought, a summary, a message's text) produced nothing: it is asked again
    /// with that said, and still so after the re-asks, its step fails.
    #[serde(alias = "echo_think")]
    Echo,
    /// An answer refused as an echo is asked again as a fresh try of the same prompt, without
    /// the error and the echo quoted beneath it: shown its echo, Qwen2.5 0.5B wrote it again
    /// 10 times in 10; asked afresh, it wrote something of its own 9 times in 10.
    EchoAskedAfresh,
    /// A summary whose first paragraph hands back its instruction loses that paragraph.
    EchoedStartDropped,
    /// A summary that hands back its goal is composed from the agent's newest results (up to
    /// `reported`) at once.
    ComposedSummary,
    /// A summary still unusable after the re-asks is composed from the agent's results.
    ComposedAfterReasks,
    /// A summary that gives none of the agent's results in the stage (it tells of a poem
    /// without giving it) gets the newest of them (up to `reported`) added, marked.
    SummaryResultsAdded,
    /// A stage plan with no step doing the work gets one first.
    WorkStepInserted,
    /// A reflection planning the summary of a stage where none of the agent's steps did the
    /// work gets a step doing it before the summary.
    WorkBeforeSummary,
    /// A reflection that plans only what already ran gets the summary instead.
    ReflectionNothingNew,
    /// The last reflection a stage allows (`step_limits.reflections`) plans the summary.
    ReflectionCap,
    /// A plan step naming one of the agent's skills as a tool is made a skill step.
    SkillNamedAsTool,
    /// The same step planned twice in a row is planned once; in a graph, only when it repeats
    /// the step before it id and all (Qwen2.5 0.5B wrote a reflection's one check three times
    /// under one id, and the plan was refused for the id).
    DoubledStepDropped,
    /// A judgement whose verdict and action disagree is asked again.
    VerdictAgrees,
    /// A verdict its action kept contradicting after the re-asks is carried out.
    VerdictCarriedOut,
    /// A finished task's summary that gives none of its stages' results gets them (the agents'
    /// work results where recorded, else their reports).
    StageReportsAppended,
    /// An allocation whose goal only names its agent (`{"writer": "writer"}`), or is empty or
    /// a placeholder (`"…"`), is asked again.
    GoalOnlyNamesAgent,
    /// A task made for a person's goal whose intention leaves out most of the goal's words
    /// takes the goal, as the person gave it, as its intention.
    GoalKeptAsIntention,
    /// A second try repeating the refused action is asked again; the action is not offered.
    RefusedActionBarred,
    /// A manager whose second try failed too: the runtime closes the stage or fails the task.
    RuntimeClosing,
    /// One stage goal runs at most `stage_runs` times in a task (add_stage or retry_stage).
    StageRunLimit,
    /// A reply that asks nothing of its own does not wait for a reply back.
    ReplyClosesExchange,
    /// A tool's refusal whose words do not tell whether the call's arguments were at fault is
    /// judged by the agent's model (`step::tool_refusal`).
    RefusalJudged,
    /// A tool call refused for its arguments, with no person to fill them in, is asked about
    /// again: the model, shown the refusal, writes the arguments anew, up to `reasks` times.
    ArgumentsReasked,
}

/// How far a rule goes, which decides the presets it is on in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// Asks again, or tries once more: the answer itself is never changed (every preset).
    Retry,
    /// Acts on an answer that is unusable as it stands (`auto` and `small_model`).
    Mend,
    /// May change or refuse an answer that could be read (`small_model` only).
    Alter,
}

impl Repair {
    /// Every rule, in the order they are listed to people.
    pub const ALL: [Repair; 29] = [
        Repair::LoopCut,
        Repair::ClosedJson,
        Repair::Reask,
        Repair::ReaskStuck,
        Repair::ReaskTemperature,
        Repair::SecondTry,
        Repair::Echo,
        Repair::EchoAskedAfresh,
        Repair::EchoedStartDropped,
        Repair::ComposedSummary,
        Repair::ComposedAfterReasks,
        Repair::SummaryResultsAdded,
        Repair::WorkStepInserted,
        Repair::WorkBeforeSummary,
        Repair::ReflectionNothingNew,
        Repair::ReflectionCap,
        Repair::SkillNamedAsTool,
        Repair::DoubledStepDropped,
        Repair::VerdictAgrees,
        Repair::VerdictCarriedOut,
        Repair::StageReportsAppended,
        Repair::GoalOnlyNamesAgent,
        Repair::GoalKeptAsIntention,
        Repair::RefusedActionBarred,
        Repair::RuntimeClosing,
        Repair::StageRunLimit,
        Repair::ReplyClosesExchange,
        Repair::RefusalJudged,
        Repair::ArgumentsReasked,
    ];

    /// How far the rule goes, which decides the presets it is on in.
    pub fn reach(self) -> Reach {
        use Repair::*;
        match self {
            Reask | ReaskStuck | ReaskTemperature | SecondTry | RefusedActionBarred | Echo
            | RefusalJudged | ArgumentsReasked => Reach::Retry,
            LoopCut | ClosedJson | ComposedAfterReasks | SkillNamedAsTool | VerdictAgrees
            | VerdictCarriedOut | GoalOnlyNamesAgent | RuntimeClosing | StageRunLimit
            | ReflectionCap | EchoAskedAfresh => Reach::Mend,
            EchoedStartDropped | ComposedSummary | WorkStepInserted | WorkBeforeSummary
            | ReflectionNothingNew | DoubledStepDropped | StageReportsAppended
            | ReplyClosesExchange | GoalKeptAsIntention | SummaryResultsAdded => Reach::Alter,
        }
    }

    /// The rule's name as the team file and the records spell it.
    pub fn name(self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default()
    }
}

impl std::fmt::Display for Repair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

/// Which rules are on before any switch of the team file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[serde(expecting = "one of strict, auto, small_model")]
pub enum Preset {
    /// Only rules that ask again or try once more ([`Reach::Retry`]): an answer is never altered.
    Strict,
    /// The default: also rules that mend an answer unusable as it stands ([`Reach::Mend`]).
    #[default]
    Auto,
    /// Every rule, also those that change or refuse an answer that could be read
    /// ([`Reach::Alter`]).
    SmallModel,
}

impl Preset {
    fn allows(self, reach: Reach) -> bool {
        match self {
            Preset::Strict => reach == Reach::Retry,
            Preset::Auto => reach != Reach::Alter,
            Preset::SmallModel => true,
        }
    }
}

/// The rules' thresholds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Thresholds {
    /// How many times an unusable answer is asked about again.
    pub reasks: usize,
    /// Characters an answer may add to its instruction and still hand it back.
    pub echo_slack: usize,
    /// How many of an agent's newest results a composed summary reports.
    pub reported: usize,
    /// How many times one stage goal may run in a task.
    pub stage_runs: usize,
    /// How many rounds of one passage make a loop.
    pub loop_times: usize,
    /// How many bytes the rounds of a loop must span at least.
    pub loop_span: usize,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            reasks: 3,
            echo_slack: 40,
            reported: 4,
            stage_runs: 3,
            loop_times: 4,
            loop_span: 240,
        }
    }
}

/// The team's repair policy: a preset, the rules switched on or off beside it, thresholds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Repairs {
    /// The preset (`repairs: strict`, or `preset:` in the map; default `auto`).
    pub preset: Preset,
    /// Rules switched on or off whatever the preset says.
    pub switched: BTreeMap<Repair, bool>,
    /// The thresholds (`reasks`, `echo_slack`, `reported`, `stage_runs`, `loop_times`, `loop_span`
    /// in the map).
    pub thresholds: Thresholds,
}

impl Repairs {
    /// A preset with no switches and the default thresholds.
    pub fn preset(preset: Preset) -> Self {
        Repairs {
            preset,
            ..Default::default()
        }
    }

    /// Whether `rule` may fire.
    pub fn allows(&self, rule: Repair) -> bool {
        self.switched
            .get(&rule)
            .copied()
            .unwrap_or_else(|| self.preset.allows(rule.reach()))
    }

    /// How many times an unusable answer is asked about again (none when re-asks are off).
    pub fn reasks(&self) -> usize {
        if self.allows(Repair::Reask) {
            self.thresholds.reasks
        } else {
            0
        }
    }
}

/// One firing of a rule on a step: which rule, and what it changed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fired {
    /// The rule that fired.
    pub rule: Repair,
    /// What it did to the step, in a sentence for the people reading its record, in the
    /// team's language (from the catalog's `repair_*` texts).
    pub what: String,
}

impl Fired {
    /// A firing of `rule`; `what` says what it changed.
    pub fn new(rule: Repair, what: impl Into<String>) -> Self {
        Fired {
            rule,
            what: what.into(),
        }
    }
}

/// "2 repairs: echo, loop_cut" for a count of firings per rule, in the language of `t` (the
/// rules go by their names); `None` for none.
pub fn counted(counts: &BTreeMap<Repair, u64>, t: &crate::texts::Texts) -> Option<String> {
    let total: u64 = counts.values().sum();
    if total == 0 {
        return None;
    }
    let names: Vec<String> = counts
        .iter()
        .map(|(rule, n)| match n {
            1 => rule.name(),
            n => format!("{rule} ×{n}"),
        })
        .collect();
    let names = names.join(", ");
    Some(match total {
        1 => t.repairs_one(names),
        n => t.repairs_counted(n, names),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_only_asks_again_auto_mends_the_unusable_small_model_does_all() {
        let strict = Repairs::preset(Preset::Strict);
        let auto = Repairs::default();
        let small = Repairs::preset(Preset::SmallModel);
        for rule in Repair::ALL {
            let reach = rule.reach();
            assert_eq!(strict.allows(rule), reach == Reach::Retry, "{rule}");
            assert_eq!(auto.allows(rule), reach != Reach::Alter, "{rule}");
            assert!(small.allows(rule), "{rule}");
        }
        assert!(!auto.allows(Repair::StageReportsAppended));
        assert!(auto.allows(Repair::VerdictCarriedOut));
        assert!(!strict.allows(Repair::ClosedJson));
    }

    #[test]
    fn a_switch_wins_over_the_preset() {
        let mut r = Repairs::preset(Preset::SmallModel);
        r.switched.insert(Repair::LoopCut, false);
        r.switched.insert(Repair::Reask, false);
        assert!(!r.allows(Repair::LoopCut) && r.allows(Repair::Echo));
        assert_eq!(r.reasks(), 0);
        let mut s = Repairs::preset(Preset::Strict);
        s.switched.insert(Repair::ComposedAfterReasks, true);
        assert!(s.allows(Repair::ComposedAfterReasks) && !s.allows(Repair::ComposedSummary));
    }

    #[test]
    fn every_rule_has_a_name_that_reads_back() {
        for rule in Repair::ALL {
            let name = rule.name();
            assert!(!name.is_empty());
            let back: Repair = serde_json::from_value(serde_json::json!(name)).unwrap();
            assert_eq!(back, rule);
        }
        assert_eq!(Repair::LoopCut.name(), "loop_cut");
    }

    #[test]
    fn counts_read_as_one_line() {
        let (en, zh) = (
            crate::texts::Texts::english(),
            crate::texts::Texts::builtin(crate::texts::Language::Zh),
        );
        let mut c = BTreeMap::new();
        assert_eq!(counted(&c, &en), None);
        c.insert(Repair::LoopCut, 1);
        assert_eq!(counted(&c, &en).unwrap(), "1 repair: loop_cut");
        c.insert(Repair::Echo, 2);
        assert_eq!(counted(&c, &en).unwrap(), "3 repairs: loop_cut, echo ×2");
        assert_eq!(counted(&c, &zh).unwrap(), "修复 3 次：loop_cut, echo ×2");
    }
}
