//! `bts run`: from arguments to a finished run, its summary and its exit status.

use super::args::{Mode, OrderArg, RunArgs};
use super::split::split;
use super::{CliError, Exit, print_clap};
use crate::registry::BuildError;
use crate::{Registry, Run, RunOptions};
use bts_master::{BudgetConfig, Order, Outcome, SchedulerConfig, StopReason};
use bts_protocol::TreeSpec;
use clap::CommandFactory;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::time::Duration;

pub fn run(registry: &Registry, raw: &[String]) -> Result<Exit, CliError> {
    let parts = split(raw, &RunArgs::command());
    let trees_help = format!(
        "Trees (bts run <TREE> --help for their options):\n{}",
        registry.describe()
    );
    let args = match RunArgs::command()
        .after_help(trees_help)
        .try_get_matches_from(&parts.run)
    {
        Ok(matches) => match <RunArgs as clap::FromArgMatches>::from_arg_matches(&matches) {
            Ok(a) => a,
            Err(e) => return print_clap(e),
        },
        Err(e) => return print_clap(e),
    };
    crate::logging::init(args.verbose, args.quiet);

    let Some(tree_name) = parts.tree else {
        return Err(CliError::usage(format!(
            "no tree given: bts run [RUN-OPTIONS] <TREE> [TREE-OPTIONS]; trees: {}",
            registry.names().join(", ")
        )));
    };
    let spec = TreeSpec::new(tree_name, parts.tree_args);
    let searcher = match registry.build(&spec) {
        Ok(s) => s,
        Err(BuildError::Help(text)) => {
            print!("{text}");
            return Ok(Exit::Complete);
        }
        Err(e) => return Err(CliError::usage(e)),
    };
    let options = run_options(&args)?;

    let mut output = open_output(&args)?;
    let mut summary_file = match &args.output.summary_json {
        Some(p) if p.as_os_str() != "-" => Some(create(p, "summary")?),
        _ => None,
    };

    let run = Run::with_searcher(&spec.command_line(), searcher).options(options);
    crate::signals::forward(run.stopper());
    let finished = run.run(&mut output).map_err(CliError::failure)?;
    drop(output);

    let summary = &finished.summary;
    eprint!("{}", summary.human());
    if let Some(path) = &args.output.summary_json {
        let json = serde_json::to_string(summary).expect("a summary serialises") + "\n";
        let written = match summary_file.as_mut() {
            Some(f) => f.write_all(json.as_bytes()).and_then(|_| f.flush()),
            None => io::stdout().lock().write_all(json.as_bytes()),
        };
        written.map_err(|e| {
            CliError::failure(format!(
                "cannot write the summary to {}: {e}",
                path.display()
            ))
        })?;
    }
    match &finished.outcome {
        Outcome::Complete => Ok(Exit::Complete),
        Outcome::Stopped(StopReason::NoWorkers) => Err(CliError::failure("every worker was lost")),
        Outcome::Stopped(_) => {
            eprintln!(
                "bts: stopped early ({}); {} jobs were left",
                summary.outcome, summary.queued
            );
            Ok(Exit::Stopped)
        }
        Outcome::Failed(f) => Err(CliError::failure(format!(
            "a job failed at node {}: {}",
            f.node, f.message
        ))),
    }
}

/// Checks the options together and turns them into the run's configuration.
fn run_options(args: &RunArgs) -> Result<RunOptions, CliError> {
    if args.workers.mode == Mode::Polling {
        return Err(CliError::usage(
            "--mode polling is not available yet; use --mode budget",
        ));
    }
    let workers = match args.workers.workers {
        Some(0) => {
            return Err(CliError::usage(
                "--workers 0 means remote workers only, which needs --listen",
            ));
        }
        Some(n) => n,
        None => RunOptions::default().workers,
    };
    let b = &args.budget;
    if let (Some(lmax), lmin) = (b.lmax, b.lmin)
        && lmax < lmin
    {
        return Err(CliError::usage(format!(
            "--lmax ({lmax}) must not be below --lmin ({lmin})"
        )));
    }
    let defaults = BudgetConfig::default();
    let budget = BudgetConfig {
        initial: b.budget.unwrap_or(defaults.initial),
        fixed: b.fixed_budget,
        scale: b.scale,
        lmin: b.lmin,
        lmax: b.lmax,
        maxd: b.maxd,
        initial_depth: b.initial_depth,
        ..defaults
    };
    let order = match b.order {
        OrderArg::Lifo => Order::Lifo,
        OrderArg::Fifo => Order::Fifo,
    };
    Ok(RunOptions {
        workers,
        scheduler: SchedulerConfig {
            order,
            budget,
            node_limit: args.stopping.node_limit,
            ..SchedulerConfig::default()
        },
        time_limit: args.stopping.time_limit.map(Duration::from_secs_f64),
        count_only: args.output.count_only,
    })
}

fn create(path: &Path, what: &str) -> Result<File, CliError> {
    File::create(path).map_err(|e| {
        CliError::usage(format!(
            "cannot write the {what} file {}: {e}",
            path.display()
        ))
    })
}

fn open_output(args: &RunArgs) -> Result<Box<dyn Write>, CliError> {
    Ok(match &args.output.output {
        _ if args.output.count_only => Box::new(io::sink()),
        Some(path) => Box::new(BufWriter::with_capacity(1 << 16, create(path, "output")?)),
        None => Box::new(BufWriter::with_capacity(1 << 16, io::stdout())),
    })
}
