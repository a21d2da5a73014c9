//! `bts run` and `bts resume`: from arguments to a finished run, its summary and its exit status.

use super::args::{Mode, OrderArg, Progress, RunArgs, SplitArg, StartArg};
use super::split::split;
use super::worker::read_token;
use super::{CliError, Exit, build_tree, print_clap};
use crate::{ListenOptions, MonitorOptions, PollingStart, ProgressMode, Registry, Run, RunMode, RunOptions, SplitRule};
use bts_checkpoints::{Checkpoint, StoredMode};
use bts_master::{BudgetConfig, Discard, Order, Outcome, Output, Plain, SchedulerConfig, StopReason};
use bts_worker::remote::{MasterAddress, RemoteOptions};
use bts_worker::{FileFrame, Searcher};
use clap::{CommandFactory, FromArgMatches};
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// `bts run [RUN-OPTIONS] <TREE> [TREE-OPTIONS]`
pub fn run(registry: &Registry, raw: &[String]) -> Result<Exit, CliError> {
    let parts = split(raw, &RunArgs::command());
    let args = match parse(&parts.run, registry)? {
        Parsed::Args(a) => a,
        Parsed::Exit(e) => return Ok(e),
    };
    if let Some(file) = &args.remote.rendezvous {
        let rank = cluster_rank();
        if rank > 0 {
            return rendezvous_worker(registry, &args, file, rank);
        }
    }
    let Some((spec, searcher)) = build_tree(registry, parts, "bts run [RUN-OPTIONS] <TREE> [TREE-OPTIONS]")? else {
        return Ok(Exit::Complete);
    };
    if args.stopping.checkpoint_every.is_some() && args.stopping.checkpoint.is_none() {
        return Err(CliError::usage("--checkpoint-every needs --checkpoint FILE"));
    }
    let mut options = run_options(&args, None)?;
    let frame = searcher.file_frame(None);
    let (output, output_path) = open_output(&args, frame.as_ref())?;
    if options.checkpoint.is_some() && output_path.is_none() && !options.count_only {
        tracing::warn!(
            "output records go to stdout: after a crash, records written since the last checkpoint \
             would be written again; use --output FILE for exactly-once output"
        );
    }
    options.output_path = output_path.clone();
    warn_if_records_cannot_be_taken_back(&options);
    let framed = output_path.zip(frame.is_some().then(|| Arc::clone(&searcher)));
    execute(&args, Run::with_searcher(spec, searcher).options(options), output, framed)
}

/// `bts resume <CHECKPOINT> [RUN-OPTIONS]`
pub fn resume(registry: &Registry, raw: &[String]) -> Result<Exit, CliError> {
    // Everything but the checkpoint's path is a run option.
    let mut parts = split(raw, &RunArgs::command());
    parts.run.append(&mut parts.tree_args);
    let args = match parse(&parts.run, registry)? {
        Parsed::Args(a) => a,
        Parsed::Exit(e) => return Ok(e),
    };
    let Some(path) = parts.tree.map(PathBuf::from) else {
        return Err(CliError::usage("no checkpoint given: bts resume <CHECKPOINT> [RUN-OPTIONS]"));
    };
    let mut checkpoint = bts_checkpoints::load(&path)
        .map_err(|e| CliError::usage(format!("cannot resume from {}: {e}", path.display())))?;
    let searcher = registry.build(&checkpoint.tree).map_err(|e| {
        CliError::usage(format!(
            "cannot resume from {}: its tree '{}': {e}",
            path.display(),
            checkpoint.tree.command_line()
        ))
    })?;
    let mut options = run_options(&args, Some(&checkpoint))?;
    if options.checkpoint.is_none() {
        options.checkpoint = Some(path);
    }
    if let Some(b) = args.budget.budget {
        checkpoint.budget.base = b;
    }
    let header = searcher.file_frame(None).map_or(0, |f| f.header.len() as u64);
    let (output, output_path) = reopen_output(&args, &checkpoint, header)?;
    options.output_path = output_path.clone();
    warn_if_records_cannot_be_taken_back(&options);
    let framed = output_path.filter(|_| header > 0).map(|p| (p, Arc::clone(&searcher)));
    execute(&args, Run::resume(checkpoint, searcher).options(options), output, framed)
}

/// Random polling with remote workers rolls back to the last snapshot when one is lost, which
/// records already written to stdout cannot follow.
fn warn_if_records_cannot_be_taken_back(options: &RunOptions) {
    let polling = matches!(options.mode, RunMode::Polling { .. });
    if polling && options.listen.is_some() && options.output_path.is_none() && !options.count_only {
        tracing::warn!(
            "output records go to stdout: if a remote worker is lost, random polling must take back the \
             records written since the last snapshot, which stdout cannot, and the run stops; use --output FILE"
        );
    }
}

/// This process's rank in a cluster launch, from the launcher's environment (0 outside one).
fn cluster_rank() -> u64 {
    ["OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"]
        .iter()
        .find_map(|var| std::env::var(var).ok()?.trim().parse().ok())
        .unwrap_or(0)
}

/// A rank other than 0 of a cluster launch: work for the master that rank 0 announces in `file`.
fn rendezvous_worker(registry: &Registry, args: &RunArgs, file: &Path, rank: u64) -> Result<Exit, CliError> {
    let token = args.remote.token_file.as_deref().map(read_token).transpose()?.unwrap_or_default();
    let threads = match args.workers.workers {
        Some(0) => {
            return Err(CliError::usage("--workers 0 leaves the worker ranks of a cluster launch nothing to do"));
        }
        Some(n) => n as u32,
        None => 1,
    };
    tracing::info!(rank, "working for the master of {}", file.display());
    let master = MasterAddress::Rendezvous(file.to_path_buf());
    super::worker::work(registry, RemoteOptions { master, token, threads, retry_for: Duration::from_secs(300) })
}

/// The remote-worker options of a run, checked.
fn listen_options(args: &RunArgs) -> Result<Option<ListenOptions>, CliError> {
    let r = &args.remote;
    let token = r.token_file.as_deref().map(read_token).transpose()?;
    let mut listen = if let Some(file) = &r.rendezvous {
        let generated = token.is_none();
        let mut listen = ListenOptions::new(r.listen.as_deref().unwrap_or("0.0.0.0:0"));
        listen.token = token.unwrap_or_else(|| bts_protocol::auth::nonce().to_vec());
        listen.address_file = Some(file.clone());
        listen.token_in_address_file = generated;
        listen.rendezvous = true;
        listen
    } else {
        let Some(address) = &r.listen else {
            if r.address_file.is_some() || r.worker_timeout.is_some() {
                return Err(CliError::usage("--address-file and --worker-timeout need --listen ADDR"));
            }
            return Ok(None);
        };
        let token = token.unwrap_or_default();
        if token.is_empty() && !crate::remote::is_loopback(address) {
            return Err(CliError::usage(format!(
                "refusing to listen on {address} beyond loopback without a token: give --token-file F (the same file to the workers)"
            )));
        }
        let mut listen = ListenOptions::new(address);
        listen.token = token;
        listen.address_file = r.address_file.clone();
        listen
    };
    if let Some(t) = r.worker_timeout {
        listen.worker_timeout = Duration::from_secs_f64(t);
    }
    Ok(Some(listen))
}

enum Parsed {
    Args(Box<RunArgs>),
    Exit(Exit),
}

fn parse(run_options: &[String], registry: &Registry) -> Result<Parsed, CliError> {
    let trees_help = format!("Trees (bts run <TREE> --help for their options):\n{}", registry.describe());
    let matches = RunArgs::command().after_help(trees_help).try_get_matches_from(run_options);
    let args = matches.and_then(|m| RunArgs::from_arg_matches(&m));
    match args {
        Ok(a) => {
            crate::logging::init(a.verbose, a.quiet);
            Ok(Parsed::Args(Box::new(a)))
        }
        Err(e) => print_clap(e).map(Parsed::Exit),
    }
}

/// Runs, then reports: summary, JSON, how to resume, exit status. `framed`: an output file whose
/// tree frames its records (see [`Searcher::file_frame`]), completed when the run is.
fn execute(
    args: &RunArgs,
    run: Run,
    mut output: Box<dyn Output>,
    framed: Option<(PathBuf, Arc<dyn Searcher>)>,
) -> Result<Exit, CliError> {
    let mut summary_file = match &args.output.summary_json {
        Some(p) if p.as_os_str() != "-" => Some(create(p, "summary")?),
        _ => None,
    };
    crate::signals::forward(run.stopper());
    let finished = run.run_to(&mut *output).inspect_err(|_| {
        // No summary for a run that went wrong: do not leave an empty file where one was expected.
        if let (Some(_), Some(path)) = (&summary_file, &args.output.summary_json) {
            let _ = std::fs::remove_file(path);
        }
    });
    let finished = finished.map_err(|e| match e {
        crate::RunError::Checkpoint { .. }
        | crate::RunError::Listen { .. }
        | crate::RunError::Unsupported(_)
        | crate::RunError::History(_) => CliError::usage(e),
        e => CliError::failure(e),
    })?;
    drop(output);
    if let Some((path, searcher)) = framed
        && finished.outcome == Outcome::Complete
        && let Some(frame) = searcher.file_frame(Some(finished.summary.totals.outputs))
    {
        complete_frame(&path, &frame)
            .map_err(|e| CliError::failure(format!("cannot complete the output file {}: {e}", path.display())))?;
    }

    let summary = &finished.summary;
    eprint!("{}", summary.human());
    if let Some(path) = &args.output.summary_json {
        let json = serde_json::to_string(summary).expect("a summary serialises") + "\n";
        let written = match summary_file.as_mut() {
            Some(f) => f.write_all(json.as_bytes()).and_then(|_| f.flush()),
            None => io::stdout().lock().write_all(json.as_bytes()),
        };
        written.map_err(|e| CliError::failure(format!("cannot write the summary to {}: {e}", path.display())))?;
    }
    let resume_hint = || match &finished.checkpoint {
        Some(p) => format!("checkpoint written to {0}; resume with: bts resume {0}", p.display()),
        None => {
            let unit = if summary.mode == "polling" { "unvisited nodes" } else { "jobs" };
            format!("{} {unit} were left (give --checkpoint FILE to keep them)", summary.queued)
        }
    };
    match &finished.outcome {
        Outcome::Complete => Ok(Exit::Complete),
        Outcome::Stopped(StopReason::NoWorkers) => {
            Err(CliError::failure(format!("every worker was lost; {}", resume_hint())))
        }
        Outcome::Stopped(_) => {
            eprintln!("bts: stopped early ({}); {}", summary.outcome, resume_hint());
            Ok(Exit::Stopped)
        }
        Outcome::Failed(f) => {
            Err(CliError::failure(format!("a job failed at node {}: {}\nbts: {}", f.node, f.message, resume_hint())))
        }
    }
}

/// Checks the options together and turns them into the run's configuration; when resuming, options
/// not given keep the checkpoint's values.
fn run_options(args: &RunArgs, resuming: Option<&Checkpoint>) -> Result<RunOptions, CliError> {
    let mode = run_mode(args, resuming)?;
    let listen = listen_options(args)?;
    let workers = match args.workers.workers {
        Some(0) if listen.is_none() => {
            return Err(CliError::usage("--workers 0 means remote workers only, which needs --listen"));
        }
        Some(n) => n,
        None if args.remote.rendezvous.is_some() => 1,
        None => RunOptions::default().workers,
    };
    let stored = resuming.map(|c| &c.options);
    let base = stored.map_or_else(BudgetConfig::default, |s| s.budget.clone());
    let b = &args.budget;
    let budget = BudgetConfig {
        initial: b.budget.unwrap_or(base.initial),
        fixed: b.fixed_budget || base.fixed,
        scale: b.scale.unwrap_or(base.scale),
        lmin: b.lmin.unwrap_or(base.lmin),
        lmax: b.lmax.or(base.lmax),
        maxd: b.maxd.or(base.maxd),
        initial_depth: b.initial_depth.or(base.initial_depth),
        target_job_ns: base.target_job_ns,
    };
    if let Some(lmax) = budget.lmax
        && lmax < budget.lmin
    {
        return Err(CliError::usage(format!("--lmax ({lmax}) must not be below --lmin ({})", budget.lmin)));
    }
    let order = match b.order {
        Some(OrderArg::Lifo) => Order::Lifo,
        Some(OrderArg::Fifo) => Order::Fifo,
        None => stored.map_or(Order::Lifo, |s| s.order),
    };
    if let Some(f) = &args.stopping.stop_file
        && f.exists()
    {
        return Err(CliError::usage(format!("the stop file {} exists already; remove it first", f.display())));
    }
    let count_only = args.output.count_only || stored.is_some_and(|s| s.count_only);
    if let Some(s) = stored
        && args.output.count_only != s.count_only
        && (args.output.count_only || args.output.output.is_some())
    {
        return Err(CliError::usage(
            "the checkpoint fixes whether output records are written (--count-only); --output may only \
             name the same output file at a new place",
        ));
    }
    let checkpoint =
        args.stopping.checkpoint.clone().map(absolute).or_else(|| stored.and_then(|s| s.checkpoint.clone()));
    let every = args.stopping.checkpoint_every.or_else(|| stored.and_then(|s| s.checkpoint_every));
    Ok(RunOptions {
        workers,
        scheduler: SchedulerConfig {
            order,
            budget,
            node_limit: args.stopping.node_limit,
            ..SchedulerConfig::default()
        },
        time_limit: args.stopping.time_limit.map(Duration::from_secs_f64),
        stop_file: args.stopping.stop_file.clone(),
        count_only,
        checkpoint,
        checkpoint_every: every.map(Duration::from_secs_f64),
        output_path: None,
        listen,
        mode,
        monitor: MonitorOptions {
            progress: match args.output.progress {
                Progress::Auto => ProgressMode::Auto,
                Progress::Always => ProgressMode::Always,
                Progress::Never => ProgressMode::Never,
            },
            hist: args.output.hist.clone(),
            freq: args.output.freq.clone(),
        },
    })
}

/// Budget mode or random polling, with their options checked; when resuming, the stored mode unless
/// one is given.
fn run_mode(args: &RunArgs, resuming: Option<&Checkpoint>) -> Result<RunMode, CliError> {
    let w = &args.workers;
    let stored = resuming.map(|c| c.options.mode);
    let polling = match w.mode {
        Some(Mode::Polling) => true,
        Some(Mode::Budget) => false,
        None => matches!(stored, Some(StoredMode::Polling { .. })) || w.split.is_some() || w.start.is_some(),
    };
    if !polling {
        if w.split.is_some() || w.start.is_some() {
            return Err(CliError::usage("--split and --start apply to --mode polling"));
        }
        return Ok(RunMode::Budget);
    }
    let b = &args.budget;
    let budget_options = [
        (b.budget.is_some(), "--budget"),
        (b.fixed_budget, "--fixed-budget"),
        (b.scale.is_some(), "--scale"),
        (b.lmin.is_some(), "--lmin"),
        (b.lmax.is_some(), "--lmax"),
        (b.maxd.is_some(), "--maxd"),
        (b.initial_depth.is_some(), "--initial-depth"),
        (b.order.is_some(), "--order"),
        (args.output.freq.is_some(), "--freq"),
    ];
    if let Some((_, name)) = budget_options.iter().find(|(given, _)| *given) {
        return Err(CliError::usage(format!("{name} applies to --mode budget, not to --mode polling")));
    }
    let stored_split = match stored {
        Some(StoredMode::Polling { split }) => split,
        _ => SplitRule::default(),
    };
    let split = match w.split {
        Some(SplitArg::Alternate) => SplitRule::Alternate,
        Some(SplitArg::Bottom) => SplitRule::Bottom,
        None => stored_split,
    };
    let start = match w.start {
        Some(StartArg::Plain) => PollingStart::Plain,
        _ => PollingStart::Selective,
    };
    Ok(RunMode::Polling { split, start })
}

/// Rewrites the header of a complete output file in place (the same length) and ends it with the
/// footer.
fn complete_frame(path: &Path, frame: &FileFrame) -> io::Result<()> {
    let mut file = OpenOptions::new().write(true).open(path)?;
    file.write_all(frame.header.as_bytes())?;
    file.seek(SeekFrom::End(0))?;
    file.write_all(frame.footer.as_bytes())?;
    file.sync_data()
}

/// An output file, synced to disk before every checkpoint. Records start after `header` bytes (a
/// tree's [`FileFrame`]): lengths the run gives count records only.
struct FileOutput {
    out: BufWriter<File>,
    header: u64,
}

impl FileOutput {
    fn new(file: File, header: u64) -> Box<Self> {
        Box::new(Self { out: BufWriter::with_capacity(1 << 16, file), header })
    }
}

impl Write for FileOutput {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.out.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

impl Output for FileOutput {
    fn sync(&mut self) -> io::Result<()> {
        self.out.flush()?;
        self.out.get_ref().sync_data()
    }

    fn rewind(&mut self, len: u64) -> io::Result<()> {
        self.out.flush()?;
        let file = self.out.get_mut();
        file.set_len(self.header + len)?;
        file.seek(SeekFrom::End(0))?;
        Ok(())
    }
}

fn absolute(path: PathBuf) -> PathBuf {
    std::path::absolute(&path).unwrap_or(path)
}

fn create(path: &Path, what: &str) -> Result<File, CliError> {
    File::create(path).map_err(|e| CliError::usage(format!("cannot write the {what} file {}: {e}", path.display())))
}

/// The output of a new run (an output file starts with the tree's header), and its path for
/// checkpoints.
fn open_output(args: &RunArgs, frame: Option<&FileFrame>) -> Result<(Box<dyn Output>, Option<PathBuf>), CliError> {
    Ok(match &args.output.output {
        _ if args.output.count_only => (Box::new(Discard), None),
        Some(path) => {
            let mut file = create(path, "output")?;
            let header = frame.map_or("", |f| f.header.as_str());
            file.write_all(header.as_bytes())
                .map_err(|e| CliError::failure(format!("cannot write the output file {}: {e}", path.display())))?;
            (FileOutput::new(file, header.len() as u64), Some(absolute(path.clone())))
        }
        None => (Box::new(Plain(BufWriter::with_capacity(1 << 16, io::stdout()))), None),
    })
}

/// The output of a resumed run: the checkpoint's output file, cut back to its committed length
/// (after a `header` of that many bytes).
fn reopen_output(
    args: &RunArgs,
    checkpoint: &Checkpoint,
    header: u64,
) -> Result<(Box<dyn Output>, Option<PathBuf>), CliError> {
    if checkpoint.options.count_only {
        return Ok((Box::new(Discard), None));
    }
    let Some(path) = args.output.output.clone().or_else(|| checkpoint.options.output.clone()) else {
        return Ok((Box::new(Plain(BufWriter::with_capacity(1 << 16, io::stdout()))), None));
    };
    let committed = header + checkpoint.output_len;
    let open = || -> io::Result<(File, u64)> {
        let file = OpenOptions::new().write(true).open(&path)?;
        let len = file.metadata()?.len();
        Ok((file, len))
    };
    let (mut file, len) =
        open().map_err(|e| CliError::usage(format!("cannot reopen the output file {}: {e}", path.display())))?;
    if len < committed {
        return Err(CliError::usage(format!(
            "the output file {} holds {len} bytes but the checkpoint committed {committed}: it is not this run's output",
            path.display()
        )));
    }
    let cut = file.set_len(committed).and_then(|_| file.seek(SeekFrom::End(0)));
    cut.map_err(|e| CliError::failure(format!("cannot cut the output file {} back: {e}", path.display())))?;
    if len > committed {
        tracing::info!("cut {} uncommitted bytes from {}", len - committed, path.display());
    }
    Ok((FileOutput::new(file, header), Some(absolute(path))))
}
