//! The summary of a run: printed for people on stderr, written as JSON for programs.

use bts_master::{Order, Outcome, RunView, StopReason, Totals};
use bts_worker::CounterNames;
use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use std::time::Duration;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BudgetSummary {
    #[serde(serialize_with = "unlimited_as_null")]
    pub initial: u64,
    #[serde(rename = "final", serialize_with = "unlimited_as_null")]
    pub last: u64,
}

/// A budget as JSON gives it: `None` (`null`) when it has no limit (`--budget inf`), for readers
/// that keep numbers as doubles would turn u64::MAX into a different number.
pub fn limited(budget: u64) -> Option<u64> {
    (budget != u64::MAX).then_some(budget)
}

fn unlimited_as_null<S: Serializer>(budget: &u64, s: S) -> Result<S::Ok, S::Error> {
    limited(*budget).serialize(s)
}

/// The fields of `--summary-json` (see README, "Summary").
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// Every node was visited.
    pub complete: bool,
    /// `complete`, or why the run stopped: `node-limit`, `time-limit`, `stop-file`, `signal`,
    /// `failed`, `no-workers`, or `target` (a branch and bound reached `--target`).
    pub outcome: String,
    pub tree: String,
    pub mode: String,
    /// nodes, leaves, max_depth, outputs, jobs, returned, output_bytes.
    #[serde(flatten)]
    pub totals: Totals,
    /// Worker threads that took part (local and remote, those that left included).
    pub workers: usize,
    /// Wall time of the whole run, all segments (a resumed run has several).
    pub elapsed_s: f64,
    pub segments: u32,
    pub nodes_per_s: f64,
    pub budget: BudgetSummary,
    pub order: String,
    /// Jobs left in L (0 when complete).
    pub queued: usize,
    /// The most jobs L held at once.
    pub max_queued: usize,
    /// The run's segments ran in both modes (budget and polling), so `jobs` counts jobs and
    /// steals together.
    #[serde(skip)]
    pub mixed_modes: bool,
    /// The tree's own totals (lrs's vertices, rays, ...), as an object under the tree's key.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub tree_totals: Option<TreeTotals>,
    /// A branch and bound's best solution (`null` while none is found); absent for enumerations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub best: Option<Option<BestSummary>>,
    /// The `--target` of a decision run: the outcome is `target` when a solution reached it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<i64>,
}

/// The `best` object of a branch and bound's summary.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BestSummary {
    pub value: i64,
    /// The best solution's record.
    pub record: String,
    /// Every optimal record with `--all-best` (sorted), else the one record.
    pub records: Vec<String>,
    /// Cuts by the bound: each cut a subtree, or with bounds that descend the rest of a node's
    /// children (what the trees and programs count, not the nodes the subtrees held).
    pub pruned: u64,
    /// The search finished: the value is the optimum (a failed run's too, when only its records
    /// could not be written).
    pub proven: bool,
    /// Always true: when the incumbent improves depends on timing, so node counts vary between
    /// runs (the optimum does not).
    pub counts_vary: bool,
}

impl BestSummary {
    /// The summary's `best` entry: `None` for a plain enumeration.
    pub fn of(optimises: bool, totals: &Totals, proven: bool) -> Option<Option<BestSummary>> {
        optimises.then(|| {
            totals.best.as_ref().map(|b| {
                let records: Vec<String> = b.records.iter().map(|r| String::from_utf8_lossy(r).into_owned()).collect();
                BestSummary {
                    value: b.value,
                    record: records.first().cloned().unwrap_or_default(),
                    records,
                    pruned: totals.pruned,
                    proven,
                    counts_vary: true,
                }
            })
        })
    }
}

/// A tree's own totals, named, in the tree's order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeTotals {
    /// The summary's key for them.
    pub key: String,
    pub values: Vec<(String, u64)>,
}

impl TreeTotals {
    /// Names `counters` (missing ones are 0: no job reported any).
    pub fn new(names: CounterNames, counters: &[u64]) -> Self {
        let value = |i| counters.get(i).copied().unwrap_or(0);
        let values = names.names.iter().enumerate().map(|(i, n)| (n.to_string(), value(i))).collect();
        Self { key: names.key.to_string(), values }
    }

    /// The value of `name`.
    pub fn get(&self, name: &str) -> Option<u64> {
        self.values.iter().find(|(n, _)| n == name).map(|&(_, v)| v)
    }
}

/// `{"<key>": {"<name>": value, ...}}`, in the tree's order.
impl Serialize for TreeTotals {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        struct Values<'a>(&'a [(String, u64)]);
        impl Serialize for Values<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_map(self.0.iter().map(|(n, v)| (n, v)))
            }
        }
        let mut map = serializer.serialize_map(Some(1))?;
        map.serialize_entry(&self.key, &Values(&self.values))?;
        map.end()
    }
}

pub fn outcome_name(outcome: &Outcome) -> &'static str {
    match outcome {
        Outcome::Complete => "complete",
        Outcome::Failed(_) => "failed",
        Outcome::Stopped(reason) => match reason {
            StopReason::NodeLimit => "node-limit",
            StopReason::TimeLimit => "time-limit",
            StopReason::StopFile => "stop-file",
            StopReason::Signal => "signal",
            StopReason::JobFailed => "failed",
            StopReason::NoWorkers => "no-workers",
            StopReason::Target => "target",
        },
    }
}

impl Summary {
    pub fn new(tree: &str, outcome: &Outcome, scheduler: &dyn RunView, elapsed: Duration, segments: u32) -> Self {
        let t = scheduler.totals();
        let secs = elapsed.as_secs_f64();
        // With no node visited there are no leaves or depths to speak of (`max_depth: 0` would be
        // the root's).
        let mut totals = t.clone();
        if totals.nodes == 0 {
            (totals.leaves, totals.max_depth) = (None, None);
        }
        Summary {
            complete: *outcome == Outcome::Complete,
            outcome: outcome_name(outcome).to_string(),
            tree: tree.to_string(),
            mode: scheduler.mode().to_string(),
            totals,
            workers: scheduler.workers_seen() as usize,
            elapsed_s: secs,
            segments,
            nodes_per_s: if secs > 0.0 { t.nodes as f64 / secs } else { 0.0 },
            budget: scheduler.budget().map_or(BudgetSummary { initial: 0, last: 0 }, |b| BudgetSummary {
                initial: b.config().initial,
                last: b.base(),
            }),
            order: match scheduler.order() {
                Some(Order::Lifo) => "lifo",
                Some(Order::Fifo) => "fifo",
                None => "none",
            }
            .to_string(),
            queued: scheduler.queued() + scheduler.in_flight(),
            max_queued: scheduler.peak_queued(),
            mixed_modes: false,
            tree_totals: None,
            best: None,
            target: None,
        }
    }

    /// Two lines for people (three for a branch and bound).
    pub fn human(&self) -> String {
        let t = &self.totals;
        let polling = self.mode == "polling";
        let sharing = match (polling, self.mixed_modes) {
            (_, true) => format!("{} and {} nodes returned or moved", plural(t.jobs, "jobs and steals"), t.returned),
            (true, false) => format!("{}, {} moved", plural(t.jobs, "steals"), plural(t.returned, "nodes")),
            (false, false) => format!(
                "{}, {} returned, budget {} -> {}",
                plural(t.jobs, "jobs"),
                t.returned,
                // `inf` for no limit, as `--budget` takes it.
                bts_protocol::Budget(self.budget.initial),
                bts_protocol::Budget(self.budget.last)
            ),
        };
        let unit = if polling { "nodes" } else { "jobs" };
        let left = if self.queued > 0 { format!(", {} left", plural(self.queued as u64, unit)) } else { String::new() };
        // Legacy programs need not report leaves and depths: say so rather than print "?".
        // With no node visited there are no leaves or depths to speak of.
        let visited = t.nodes > 0;
        let mut counts = vec![plural(t.nodes, "nodes")];
        counts.extend(t.leaves.filter(|_| visited).map(|l| plural(l, "leaves")));
        counts.extend(t.max_depth.filter(|_| visited).map(|d| format!("max depth {d}")));
        counts.push(plural(t.outputs, "outputs"));
        let unreported = match (t.leaves, t.max_depth) {
            _ if !visited => "",
            (None, None) => " (leaves and depths not reported)",
            (None, Some(_)) => " (leaves not reported)",
            (Some(_), None) => " (depths not reported)",
            _ => "",
        };
        let tree = self.tree_totals.as_ref().map_or_else(String::new, |t| {
            let values: Vec<String> = t.values.iter().map(|(n, v)| format!("{n}={v}")).collect();
            format!("bts: {}: {}\n", t.key, values.join(" "))
        });
        // A complete run that did not stop at its target has proven that nothing reaches it.
        let unreached = match (self.target, &self.best) {
            (Some(v), Some(best)) if self.complete && best.as_ref().is_none_or(|b| b.value < v) => {
                let optimum =
                    best.as_ref().map_or("there is no solution".to_string(), |b| format!("the optimum is {}", b.value));
                format!("bts: no solution reaches the target {v}: {optimum}\n")
            }
            _ => String::new(),
        };
        let best = match &self.best {
            None => String::new(),
            Some(None) => format!("bts: no solution found; {} by the bound\n", plural(t.pruned, "cuts")),
            Some(Some(b)) => {
                let mut line = format!(
                    "bts: best value {} ({}); {} by the bound (node counts of a branch and bound vary between runs)\n",
                    b.value,
                    plural(b.records.len() as u64, "records"),
                    plural(b.pruned, "cuts")
                );
                // A run that did not finish writes no record: the best it found is here.
                let more = match b.records.len() {
                    1 => String::new(),
                    n => format!(" (1 of {n}; --summary-json has them all)"),
                };
                if !b.proven && self.outcome != "target" {
                    line += &format!("bts: the best so far, not proven optimal{more}: {}\n", b.record);
                } else if !self.complete && self.outcome != "target" {
                    line += &format!(
                        "bts: the search finished, this is the optimum, but the output did not take it{more}: {}\n",
                        b.record
                    );
                }
                line
            }
        };
        let segments = match self.segments {
            0 | 1 => String::new(),
            n => format!(" in {n} segments"),
        };
        format!(
            "bts: {}: {}{unreported}\n\
             bts: {:.3} s{segments}, {}, {}, {sharing}{left}\n{tree}{best}{unreached}",
            self.outcome,
            counts.join(", "),
            self.elapsed_s,
            rate(self.nodes_per_s),
            plural(self.workers as u64, "workers"),
        )
    }
}

/// Nodes a second, in millions unless fewer (a legacy program's nodes may take milliseconds).
fn rate(nodes_per_s: f64) -> String {
    match nodes_per_s >= 1e5 {
        true => format!("{:.3} M nodes/s", nodes_per_s / 1e6),
        false => format!("{nodes_per_s:.1} nodes/s"),
    }
}

/// `n` and the noun, singular for one: 1 job, 2 jobs, 1 leaf, 1 node, 1 job and steal.
pub fn plural(n: u64, nouns: &str) -> String {
    if n != 1 {
        return format!("{n} {nouns}");
    }
    let singular = match nouns {
        "leaves" => "leaf".to_string(),
        "jobs and steals" => "job or steal".to_string(),
        _ => nouns.strip_suffix('s').unwrap_or(nouns).to_string(),
    };
    format!("1 {singular}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(totals: Totals, mode: &str, queued: usize) -> Summary {
        Summary {
            complete: queued == 0,
            outcome: if queued == 0 { "complete" } else { "time-limit" }.into(),
            tree: "t".into(),
            mode: mode.into(),
            totals,
            workers: 1,
            elapsed_s: 1.0,
            segments: 1,
            nodes_per_s: 1.0,
            budget: BudgetSummary { initial: 100, last: 100 },
            order: "lifo".into(),
            queued,
            max_queued: 1,
            mixed_modes: false,
            tree_totals: None,
            best: None,
            target: None,
        }
    }

    #[test]
    fn one_is_singular_and_unreported_counts_are_said_so() {
        let t = Totals {
            nodes: 1,
            leaves: None,
            max_depth: None,
            outputs: 1,
            jobs: 1,
            returned: 0,
            output_bytes: 2,
            ..Totals::default()
        };
        let text = summary(t.clone(), "budget", 1).human();
        assert!(text.contains("1 node, 1 output (leaves and depths not reported)"), "{text}");
        assert!(text.contains("1 worker, 1 job, 0 returned") && text.contains(", 1 job left"), "{text}");
        assert!(!text.contains('?') && !text.contains("1 jobs"), "{text}");
        let known = Totals { leaves: Some(1), max_depth: Some(0), ..t.clone() };
        assert!(summary(known, "budget", 0).human().contains("1 node, 1 leaf, max depth 0, 1 output\n"));
        // A run stopped before its root, or whose every job failed, visited nothing.
        let none = Totals { nodes: 0, leaves: Some(0), max_depth: Some(0), outputs: 0, ..t.clone() };
        assert!(summary(none, "budget", 0).human().contains(": 0 nodes, 0 outputs\n"));
        let mut mixed = summary(t, "polling", 0);
        mixed.mixed_modes = true;
        assert!(mixed.human().contains("1 job or steal and 0 nodes returned or moved"), "{}", mixed.human());
        assert!(!mixed.human().contains("steals,"), "{}", mixed.human());
    }

    #[test]
    fn a_slow_rate_is_not_shown_as_zero_millions() {
        let mut s = summary(Totals::default(), "budget", 0);
        s.nodes_per_s = 364.25;
        assert!(s.human().contains(", 364.2 nodes/s,"), "{}", s.human());
        s.nodes_per_s = 29_413_000.0;
        assert!(s.human().contains(", 29.413 M nodes/s,"), "{}", s.human());
    }

    #[test]
    fn an_unlimited_budget_is_inf() {
        let mut s = summary(Totals::default(), "budget", 0);
        s.budget = BudgetSummary { initial: u64::MAX, last: 5000 };
        assert!(s.human().contains("budget inf -> 5000"), "{}", s.human());
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["budget"], serde_json::json!({"initial": null, "final": 5000}));
    }
}
