//! A plan's structure (seed 001): each planned step may carry an `id` and `depends_on`, and the
//! plan a `replan` list. Checked before anything is queued (an unknown id, a duplicate, a step
//! that depends on itself, a cycle), then put in an order where every step comes after the
//! steps it depends on, so a queue run one step at a time honours the graph.

use crate::state::PlannedStep;
use std::collections::{BTreeMap, BTreeSet};

/// Why a plan's structure cannot be run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GraphError {
    /// Two steps carry the same id.
    DuplicateId(String),
    /// A step depends on an id no step has.
    UnknownDependency {
        /// The step that names it.
        step: String,
        /// The id no step has.
        missing: String,
    },
    /// A step depends on itself.
    SelfDependency(String),
    /// The dependencies go round in a circle, so none of its steps could ever start.
    Cycle(Vec<String>),
    /// `replan` names an id no step has.
    UnknownReplan(String),
}

impl GraphError {
    /// Why, in the language of `t` (the planner reads it in a re-ask).
    pub fn render(&self, t: &crate::texts::Texts) -> String {
        match self {
            GraphError::DuplicateId(id) => t.graph_duplicate_id(id),
            GraphError::UnknownDependency { step, missing } => {
                t.graph_unknown_dependency(step, missing)
            }
            GraphError::SelfDependency(step) => t.graph_self_dependency(step),
            GraphError::Cycle(steps) => t.graph_cycle(steps.join(" → ")),
            GraphError::UnknownReplan(id) => t.graph_unknown_replan(id),
        }
    }
}

/// In English, as logs and the REST API (a person's edited plan) show it.
impl std::fmt::Display for GraphError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.render(&crate::texts::Texts::english()))
    }
}

impl std::error::Error for GraphError {}

/// Checks the structure of `steps` (their ids, `depends_on`) and marks the steps `replan`
/// names, then orders them so every step follows those it depends on (otherwise keeping the
/// plan's order). A step without an id in a graph plan gets its place in the plan (`"3"`) as
/// one. A plan with no id, dependency or replan anywhere is a plain list and is left as it is.
pub fn arrange(
    mut steps: Vec<PlannedStep>,
    replan: &[String],
) -> Result<Vec<PlannedStep>, GraphError> {
    if replan.is_empty() && !steps.iter().any(PlannedStep::in_graph) {
        return Ok(steps);
    }
    for (i, step) in steps.iter_mut().enumerate() {
        if step.id.as_deref().is_none_or(|id| id.trim().is_empty()) {
            step.id = Some((i + 1).to_string());
        }
    }
    let ids: Vec<String> = steps.iter().map(|s| id_of(s).to_owned()).collect();
    let mut at: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, id) in ids.iter().enumerate() {
        if at.insert(id, i).is_some() {
            return Err(GraphError::DuplicateId(id.clone()));
        }
    }
    let mut needs: Vec<Vec<usize>> = Vec::with_capacity(steps.len());
    for (i, step) in steps.iter().enumerate() {
        let mut mine = Vec::new();
        for dep in &step.depends_on {
            let Some(&j) = at.get(dep.as_str()) else {
                return Err(GraphError::UnknownDependency {
                    step: ids[i].clone(),
                    missing: dep.clone(),
                });
            };
            if j == i {
                return Err(GraphError::SelfDependency(ids[i].clone()));
            }
            if !mine.contains(&j) {
                mine.push(j);
            }
        }
        needs.push(mine);
    }
    for id in replan {
        let Some(&i) = at.get(id.as_str()) else {
            return Err(GraphError::UnknownReplan(id.clone()));
        };
        steps[i].replan = true;
    }
    let order = topological(&needs).map_err(|circle| {
        GraphError::Cycle(circle.into_iter().map(|i| ids[i].clone()).collect())
    })?;
    let mut slots: Vec<Option<PlannedStep>> = steps.into_iter().map(Some).collect();
    Ok(order.into_iter().filter_map(|i| slots[i].take()).collect())
}

/// A plan as a list a prompt shows: each step's id, executor, intention and what it waits for
/// (in the language of `t`).
pub fn render(plan: &[PlannedStep], t: &crate::texts::Texts) -> String {
    plan.iter()
        .map(|p| {
            let id =
                p.id.as_deref()
                    .map(|i| format!("`{i}` "))
                    .unwrap_or_default();
            let waits = if p.depends_on.is_empty() {
                String::new()
            } else {
                format!(" {}", t.plan_step_after(p.depends_on.join(", ")))
            };
            format!("- {id}[{}] {}{waits}\n", p.executor, p.step_intention)
        })
        .collect()
}

/// The id of a step of an arranged plan.
fn id_of(step: &PlannedStep) -> &str {
    step.id.as_deref().unwrap_or_default()
}

/// The steps in an order where each follows what it `needs` (Kahn's algorithm, taking the
/// earliest ready step of the plan first); or, if they go round, one circle of them.
fn topological(needs: &[Vec<usize>]) -> Result<Vec<usize>, Vec<usize>> {
    let n = needs.len();
    let mut waiting: Vec<usize> = needs.iter().map(Vec::len).collect();
    let mut ready: BTreeSet<usize> = (0..n).filter(|&i| waiting[i] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(i) = ready.pop_first() {
        order.push(i);
        for (j, mine) in needs.iter().enumerate() {
            if mine.contains(&i) {
                waiting[j] -= 1;
                if waiting[j] == 0 {
                    ready.insert(j);
                }
            }
        }
    }
    if order.len() == n {
        return Ok(order);
    }
    Err(circle(needs, &order))
}

/// One circle among the steps left out of `order` (each of them waits on another of them):
/// walking from any of them along its dependencies must come back to a step already seen.
fn circle(needs: &[Vec<usize>], order: &[usize]) -> Vec<usize> {
    let left: BTreeSet<usize> = (0..needs.len()).filter(|i| !order.contains(i)).collect();
    let mut path: Vec<usize> = Vec::new();
    let mut at = *left.first().unwrap_or(&0);
    while !path.contains(&at) {
        path.push(at);
        match needs[at].iter().find(|j| left.contains(j)) {
            Some(&next) => at = next,
            None => break,
        }
    }
    let start = path.iter().position(|&i| i == at).unwrap_or(0);
    let mut found: Vec<usize> = path[start..].to_vec();
    // Read as "a → b": a depends on b; close the circle where it began.
    found.push(at);
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{Executor, Skill};

    fn step(id: &str, deps: &[&str]) -> PlannedStep {
        PlannedStep {
            id: (!id.is_empty()).then(|| id.to_owned()),
            depends_on: deps.iter().map(|d| d.to_string()).collect(),
            ..PlannedStep::new(Executor::Skill(Skill::Think), format!("do {id}"), "")
        }
    }

    fn ids(plan: &[PlannedStep]) -> Vec<&str> {
        plan.iter().map(id_of).collect()
    }

    #[test]
    fn a_plain_list_is_left_as_it_is() {
        let plan = vec![step("", &[]), step("", &[])];
        assert_eq!(arrange(plan.clone(), &[]).unwrap(), plan);
    }

    #[test]
    fn a_step_follows_the_steps_it_depends_on_and_the_plans_order_holds_otherwise() {
        let plan = vec![
            step("join", &["a", "b"]),
            step("a", &[]),
            step("b", &["a"]),
            step("c", &[]),
        ];
        let arranged = arrange(plan, &["a".into()]).unwrap();
        assert_eq!(ids(&arranged), ["a", "b", "join", "c"]);
        assert!(arranged[0].replan && !arranged[1].replan);
    }

    #[test]
    fn a_step_without_an_id_in_a_graph_plan_is_named_by_its_place() {
        let arranged = arrange(vec![step("a", &[]), step("", &["a"])], &[]).unwrap();
        assert_eq!(ids(&arranged), ["a", "2"]);
    }

    #[test]
    fn a_broken_structure_is_refused_with_its_reason() {
        let err = |plan: Vec<PlannedStep>, replan: &[&str]| {
            let replan: Vec<String> = replan.iter().map(|r| r.to_string()).collect();
            arrange(plan, &replan).unwrap_err()
        };
        assert_eq!(
            err(vec![step("a", &[]), step("a", &[])], &[]),
            GraphError::DuplicateId("a".into())
        );
        assert_eq!(
            err(vec![step("a", &["x"])], &[]),
            GraphError::UnknownDependency {
                step: "a".into(),
                missing: "x".into()
            }
        );
        assert_eq!(
            err(vec![step("a", &["a"])], &[]),
            GraphError::SelfDependency("a".into())
        );
        assert_eq!(
            err(vec![step("a", &[])], &["z"]),
            GraphError::UnknownReplan("z".into())
        );
        let cycle = err(
            vec![
                step("a", &[]),
                step("b", &["c"]),
                step("c", &["d"]),
                step("d", &["b"]),
            ],
            &[],
        );
        assert_eq!(
            cycle.to_string(),
            "the steps b → c → d → b depend on each other in a circle, so none of them could start"
        );
    }
}
