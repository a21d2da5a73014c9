//! `bts estimate`: a tree's size by Knuth's random probes, on all cores.

use super::args::EstimateArgs;
use super::split::split;
use super::{CliError, Exit, build_tree, print_clap};
use crate::Registry;
use bts_worker::RunnerSettings;
use bts_worker::estimate::{Estimate, SplitMix64, probe};
use clap::{CommandFactory, FromArgMatches};
use serde_json::json;

/// A relative standard error above this is reported as unreliable.
const SHAKY: f64 = 0.1;

pub fn estimate(registry: &Registry, raw: &[String]) -> Result<Exit, CliError> {
    let parts = split(raw, &EstimateArgs::command());
    let args =
        match EstimateArgs::command().try_get_matches_from(&parts.run).and_then(|m| EstimateArgs::from_arg_matches(&m))
        {
            Ok(a) => a,
            Err(e) => return print_clap(e),
        };
    crate::logging::init(args.verbose, args.quiet);
    let Some((spec, searcher)) = build_tree(registry, parts, "bts estimate [--probes K] <TREE>")? else {
        return Ok(Exit::Complete);
    };
    let root = searcher.root().map_err(CliError::failure)?;
    let threads =
        args.threads.map_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()), |t| t as usize);
    let threads = threads.min(args.probes as usize);
    let seed = args
        .probe_seed
        .unwrap_or_else(|| u64::from_le_bytes(bts_protocol::auth::nonce()[..8].try_into().expect("8 bytes")));

    let results: Vec<Result<Estimate, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let probes = args.probes / threads as u64 + u64::from((t as u64) < args.probes % threads as u64);
                let (searcher, root) = (&searcher, &root);
                scope.spawn(move || -> Result<Estimate, String> {
                    let mut runner = searcher.runner(RunnerSettings { keep_output: false })?;
                    let mut rng = SplitMix64::new(seed ^ (t as u64).wrapping_mul(0xA076_1D64_78BD_642F));
                    let mut estimate = Estimate::default();
                    for _ in 0..probes {
                        let e = probe(&mut *runner, root.clone(), 0, &mut |d| rng.below(d))
                            .map_err(|f| format!("a probe failed at node {}: {}", f.node, f.message))?;
                        estimate.add(e);
                    }
                    Ok(estimate)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("a probing thread panicked".into()))).collect()
    });
    let mut total = Estimate::default();
    for r in results {
        total.merge(&r.map_err(CliError::failure)?);
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
        });
        println!("{report}");
    } else {
        println!(
            "{}: about {:.0} nodes (standard error {:.0}, {:.2}%) from {} probes",
            spec.command_line(),
            total.mean,
            se,
            100.0 * relative,
            total.probes
        );
        if relative > SHAKY || (total.probes >= 10 && largest_share > 0.25) {
            println!(
                "The tree is heavy-tailed: a few probes (the largest {:.0}, {:.0}% of the sum) carry the estimate, so it \
                 may be far off; more probes narrow the error only slowly.",
                total.max,
                100.0 * largest_share
            );
        }
    }
    Ok(Exit::Complete)
}
