//! `repairs:` in the team file: which rules mend a model's slips, and their thresholds (see
//! `policy::repairs`). Either a preset (`repairs: strict`) or a map:
//! `repairs: {preset: auto, rules: {loop_cut: false}, reasks: 2}`.

use super::agent::Findings;
use super::limits::bounded;
use crate::policy::{Preset, Repair, Repairs, Thresholds};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

/// `repairs:` as written: a preset's name, or a map.
#[derive(Debug, Clone)]
pub enum RawRepairs {
    Preset(Preset),
    Map(RawRepairMap),
}

/// A preset's name that is none says which there are; a map is read field by field (an
/// unknown field is named).
impl<'de> Deserialize<'de> for RawRepairs {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Either;
        impl<'de> serde::de::Visitor<'de> for Either {
            type Value = RawRepairs;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a preset (strict, auto or small_model) or a mapping")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<RawRepairs, E> {
                Preset::deserialize(serde::de::value::StrDeserializer::<E>::new(v))
                    .map(RawRepairs::Preset)
                    .map_err(|_| {
                        E::custom(format!(
                            "`{v}` is not a repairs preset: strict, auto or small_model"
                        ))
                    })
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, m: A) -> Result<RawRepairs, A::Error> {
                RawRepairMap::deserialize(serde::de::value::MapAccessDeserializer::new(m))
                    .map(RawRepairs::Map)
            }
        }
        d.deserialize_any(Either)
    }
}

#[derive(Debug, Deserialize, Clone, Default)]
#[serde(deny_unknown_fields)]
#[serde(
    expecting = "a mapping (preset, rules, reasks, echo_slack, reported, stage_runs, loop_times, loop_span)"
)]
pub struct RawRepairMap {
    #[serde(default)]
    pub preset: Option<Preset>,
    /// Rules switched on (`true`) or off whatever the preset says.
    #[serde(default)]
    pub rules: BTreeMap<String, bool>,
    #[serde(default)]
    pub reasks: Option<usize>,
    #[serde(default)]
    pub echo_slack: Option<usize>,
    #[serde(default)]
    pub reported: Option<usize>,
    #[serde(default)]
    pub stage_runs: Option<usize>,
    #[serde(default)]
    pub loop_times: Option<usize>,
    #[serde(default)]
    pub loop_span: Option<usize>,
}

/// The team's repair policy; an unknown rule or a threshold out of range names its field.
pub(super) fn repairs(raw: Option<RawRepairs>, file: &Path, out: &mut Findings) -> Repairs {
    let map = match raw {
        None => return Repairs::default(),
        Some(RawRepairs::Preset(p)) => return Repairs::preset(p),
        Some(RawRepairs::Map(m)) => m,
    };
    let d = Thresholds::default();
    let mut pick = |v: Option<usize>, field: &str, min: usize, default: usize| {
        bounded(
            out,
            file,
            &format!("repairs.{field}"),
            v,
            (min, None),
            default,
        )
    };
    let thresholds = Thresholds {
        reasks: pick(map.reasks, "reasks", 0, d.reasks),
        echo_slack: pick(map.echo_slack, "echo_slack", 0, d.echo_slack),
        reported: pick(map.reported, "reported", 1, d.reported),
        stage_runs: pick(map.stage_runs, "stage_runs", 1, d.stage_runs),
        loop_times: pick(map.loop_times, "loop_times", 2, d.loop_times),
        loop_span: pick(map.loop_span, "loop_span", 16, d.loop_span),
    };
    let mut switched = BTreeMap::new();
    for (name, on) in map.rules {
        match serde_json::from_value::<Repair>(serde_json::json!(name)) {
            Ok(rule) => {
                switched.insert(rule, on);
            }
            Err(_) => out.add(
                file,
                format!("repairs.rules.{name}"),
                format!(
                    "there is no repair rule `{name}`; the rules are: {}",
                    Repair::ALL.map(Repair::name).join(", ")
                ),
            ),
        }
    }
    Repairs {
        preset: map.preset.unwrap_or_default(),
        switched,
        thresholds,
    }
}

#[cfg(test)]
mod tests {
    use crate::config::load_team;
    use crate::config::test_files::{tmp, write};
    use crate::policy::{Preset, Repair};

    const HEAD: &str = "llm: {provider: openai, model: m}\nagents:\n  - {id: m, role: manager, skills: [task_manager]}\n";

    #[test]
    fn a_preset_a_map_of_switches_and_thresholds_are_read() {
        let dir = tmp("repairs");
        let t = load_team(&write(&dir, "a.yaml", HEAD)).unwrap();
        assert_eq!(t.repairs.preset, Preset::Auto);
        let t = load_team(&write(&dir, "b.yaml", &format!("{HEAD}repairs: strict\n"))).unwrap();
        assert_eq!(t.repairs.preset, Preset::Strict);
        let text = format!(
            "{HEAD}repairs: {{preset: small_model, rules: {{loop_cut: false}}, reasks: 1, stage_runs: 5}}\n"
        );
        let t = load_team(&write(&dir, "c.yaml", &text)).unwrap();
        assert!(!t.repairs.allows(Repair::LoopCut));
        assert!(t.repairs.allows(Repair::Echo));
        assert_eq!(
            (t.repairs.reasks(), t.repairs.thresholds.stage_runs),
            (1, 5)
        );
    }

    #[test]
    fn a_preset_that_is_none_says_which_there_are() {
        let dir = tmp("repairs-preset");
        let e = load_team(&write(&dir, "a.yaml", &format!("{HEAD}repairs: strikt\n"))).unwrap_err();
        let problems = e.problems();
        assert!(
            problems.iter().any(|p| p.field.starts_with("repairs")
                && p.message
                    .contains("`strikt` is not a repairs preset: strict, auto or small_model")),
            "{problems:?}"
        );
    }

    #[test]
    fn an_unknown_rule_or_a_bad_threshold_names_its_field() {
        let dir = tmp("repairs-bad");
        let text = format!("{HEAD}repairs: {{rules: {{loop_cutt: false}}, stage_runs: 0}}\n");
        let e = load_team(&write(&dir, "a.yaml", &text)).unwrap_err();
        let problems = e.problems();
        assert!(
            problems
                .iter()
                .any(|p| p.field == "repairs.rules.loop_cutt" && p.message.contains("loop_cut")),
            "{problems:?}"
        );
        assert!(
            problems.iter().any(|p| p.field == "repairs.stage_runs"),
            "{problems:?}"
        );
    }
}
