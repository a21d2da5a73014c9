//! `bts estimate`: a tree's size by Knuth's random probes, on all cores.

use super::args::EstimateArgs;
use super::split::split;
use super::{CliError, Exit, build_tree, print_clap_before_tree, tree_named};
use crate::Registry;
use bts_protocol::{Job, JobFailure, ReportBatch};
use bts_worker::estimate::{Estimate, SplitMix64, probe};
use bts_worker::{JobRunner, RunnerSettings};
use clap::{CommandFactory, FromArgMatches};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A relative standard error above this is reported as unreliable.
const SHAKY: f64 = 0.1;
/// A line on stderr this often while probes go on.
const PROGRESS_EVERY: Duration = Duration::from_secs(2);

pub fn estimate(registry: &Registry, raw: &[String]) -> Result<Exit, CliError> {
    let parts = split(raw, &EstimateArgs::command(), |tree| registry.tree_options(tree));
    let args =
        match EstimateArgs::command().try_get_matches_from(&parts.run).and_then(|m| EstimateArgs::from_arg_matches(&m))
        {
            Ok(a) => a,
            Err(e) => {
                let tree = tree_named(registry, &parts, raw).map(|t| (t, registry.tree_options(t)));
                return print_clap_before_tree(e, ("estimate", &EstimateArgs::command()), raw, tree);
            }
        };
    crate::logging::init(args.verbose, args.quiet);
    let Some((spec, searcher)) =
        build_tree(registry, parts, "bts estimate [--probes K] <TREE>", &EstimateArgs::command())?
    else {
        return Ok(Exit::Complete);
    };
    super::enough_open_files()?;
    if searcher.optimises() {
        return Err(CliError::usage(format!(
            "bts estimate cannot size a branch and bound ('{}'): what a run visits depends on the solutions it \
             finds as it goes, which probes cannot foresee",
            spec.name
        )));
    }
    let root = searcher.root().map_err(CliError::failure)?;
    let threads =
        args.threads.map_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()), |t| t as usize);
    let threads = threads.min(args.probes as usize);
    let seed = args
        .probe_seed
        .unwrap_or_else(|| u64::from_le_bytes(bts_protocol::auth::nonce()[..8].try_into().expect("8 bytes")));

    // Probe i chooses by a generator of its own and the tally takes the probes in their order, so
    // that a seed repeats an estimate to the last digit whatever the threads. Probes of a legacy
    // program may take minutes: say how far they are, every few seconds.
    let (next_probe, failed) = (AtomicU64::new(0), std::sync::atomic::AtomicBool::new(false));
    // A signal ends the probes early, the estimate taking those done.
    let stopped = std::sync::Arc::new(AtomicBool::new(false));
    crate::signals::stop_probes_on_signal(stopped.clone(), searcher.clone());
    let tally = Mutex::new(Tally::default());
    let results: Vec<Result<(), String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let (searcher, root, tally, next_probe, failed, stopped) =
                    (&searcher, &root, &tally, &next_probe, &failed, &stopped);
                scope.spawn(move || -> Result<(), String> {
                    let runner = searcher.runner(RunnerSettings {
                        keep_output: false,
                        detached: true,
                        ..RunnerSettings::default()
                    })?;
                    let mut runner = Stoppable { runner, stopped };
                    loop {
                        let i = next_probe.fetch_add(1, Ordering::Relaxed);
                        if i >= args.probes {
                            return Ok(());
                        }
                        // Another thread's probe failed: the estimate is lost, so stop.
                        if failed.load(Ordering::Relaxed) || stopped.load(Ordering::Relaxed) {
                            return Ok(());
                        }
                        let mut rng = SplitMix64::new(seed ^ i.wrapping_mul(0xA076_1D64_78BD_642F));
                        let e = match probe(&mut runner, root.clone(), 0, &mut |d| rng.below(d)) {
                            Ok(e) => e,
                            // Cut short by the stop: not a probe.
                            Err(_) if stopped.load(Ordering::SeqCst) => return Ok(()),
                            Err(f) => {
                                failed.store(true, Ordering::Relaxed);
                                return Err(format!("a probe failed at node {}: {}", f.node, f.message));
                            }
                        };
                        tally.lock().expect("no probing thread panics holding it").add(i, e);
                    }
                })
            })
            .collect();
        let started = Instant::now();
        let mut next = started + PROGRESS_EVERY;
        while !handles.iter().all(|h| h.is_finished()) {
            std::thread::sleep(Duration::from_millis(50));
            if Instant::now() >= next {
                next += PROGRESS_EVERY;
                let so_far = tally.lock().expect("no probing thread panics holding it").so_far.clone();
                let estimate = match so_far.probes {
                    0 => String::new(),
                    _ => format!(", about {:.0} nodes so far", so_far.mean),
                };
                crate::logging::say!(
                    "bts: {:.0} s: {} of {} probes done{estimate}",
                    started.elapsed().as_secs_f64(),
                    so_far.probes,
                    args.probes,
                );
            }
        }
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("a probing thread panicked".into()))).collect()
    });
    for r in results {
        r.map_err(CliError::failure)?;
    }
    let total = tally.into_inner().expect("no probing thread panicked holding it").in_order;
    let stopped = stopped.load(Ordering::SeqCst);
    if total.probes == 0 {
        // Stopped before the first probe came back.
        return Err(CliError { exit: Exit::Stopped, message: "stopped before any probe finished: no estimate".into() });
    }

    let se = total.std_error();
    let relative = if total.mean > 0.0 { se / total.mean } else { 0.0 };
    // The share of the sum that the largest probe alone brings: near 1 on heavy-tailed trees.
    let largest_share = total.max / (total.mean * total.probes as f64);
    if args.json {
        let report = json!({
            "nodes": total.mean,
            "std_error": se,
            "probes": total.probes,
            "relative_std_error": relative,
            "largest_probe": total.max,
            "tree": spec.command_line(),
            "seed": seed,
            "stopped": stopped,
        });
        super::print_out(format_args!("{report}\n"))?;
    } else {
        let error = match total.probes {
            1 => "one probe gives no standard error".to_string(),
            _ => format!("standard error {}, {:.2}%", three_digits(se), 100.0 * relative),
        };
        let (mean, probes) = (total.mean, total.probes);
        let probes_word = if probes == 1 { "probe" } else { "probes" };
        let mut text = format!(
            "{}: about {mean:.0} nodes ({error}) from {probes} {probes_word} (--probe-seed {seed} repeats them)\n",
            spec.command_line()
        );
        if (2..10).contains(&probes) {
            // One probe of two carries half the sum, whatever the tree: too few to judge it.
            text += "So few probes cannot tell how far off this is: give --probes 1000 or more.\n";
        } else if probes >= 10 && (relative > SHAKY || largest_share > 0.25) {
            text += &format!(
                "The tree is heavy-tailed: a few probes (the largest {:.0}, {:.0}% of the sum) carry the estimate, so it \
                 may be far off; more probes narrow the error only slowly.\n",
                total.max,
                100.0 * largest_share
            );
        }
        if stopped {
            text += &format!("Stopped by a signal after {probes} of {} probes.\n", args.probes);
        }
        super::print_out(text)?;
    }
    Ok(if stopped { Exit::Stopped } else { Exit::Complete })
}

/// A probe's runner whose jobs fail once the probes are stopped, so that a probe under way ends
/// at its next step, however deep the tree (a legacy program's job under way is abandoned).
struct Stoppable<'a> {
    runner: Box<dyn JobRunner>,
    stopped: &'a AtomicBool,
}

impl JobRunner for Stoppable<'_> {
    fn run(&mut self, job: &Job, batch: &mut ReportBatch) -> Result<(), JobFailure> {
        match self.stopped.load(Ordering::SeqCst) {
            true => Err(JobFailure::new(job.id, "", "the probes are stopped")),
            false => self.runner.run(job, batch),
        }
    }
}

/// `x` to the unit, or to three significant digits below 100 (a standard error of 0.4 is not 0).
fn three_digits(x: f64) -> String {
    match x.abs() {
        a if a >= 100.0 || a == 0.0 || !a.is_finite() => format!("{x:.0}"),
        a => format!("{x:.*}", (2 - a.log10().floor() as i32).clamp(0, 6) as usize),
    }
}

/// The probes' estimates, taken in the probes' order as they come in from the threads.
#[derive(Default)]
struct Tally {
    /// Probes 0 to `in_order.probes - 1`.
    in_order: Estimate,
    /// Probes ahead of one still running.
    ahead: BTreeMap<u64, f64>,
    /// Every probe so far, in the order they came: for the progress lines.
    so_far: Estimate,
}

impl Tally {
    fn add(&mut self, probe: u64, estimate: f64) {
        self.so_far.add(estimate);
        self.ahead.insert(probe, estimate);
        while let Some(e) = self.ahead.remove(&self.in_order.probes) {
            self.in_order.add(e);
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn small_numbers_keep_three_significant_digits() {
        let shown: Vec<String> = [0.0, 0.4137, 5.678, 12.34, 99.94, 123.4, 1e9].map(super::three_digits).into();
        assert_eq!(shown, ["0", "0.414", "5.68", "12.3", "99.9", "123", "1000000000"]);
    }
}
