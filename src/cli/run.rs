//! `bts run` and `bts resume`: from arguments to a finished run, its summary and its exit status.

use super::args::{Mode, OrderArg, Progress, RunArgs, SplitArg, StartArg};
use super::files::{self, FileOutput, RunLock, absolute, typed};
use super::split::{Split, split};
use super::worker::{read_or_make_token, read_token};
use super::{CliError, Exit, build_tree, print_clap_before_tree, tree_named};
use crate::summary::plural;
use crate::{ListenOptions, MonitorOptions, PollingStart, ProgressMode, Registry, Run, RunMode, RunOptions, SplitRule};
use bts_checkpoints::{Checkpoint, StoredMode, write_atomically};
use bts_master::{BudgetConfig, Discard, OptimumConfig, Order, Outcome, Output, SchedulerConfig, StopReason};
use bts_protocol::{Budget, TreeSpec};
use bts_worker::remote::{MasterAddress, RemoteOptions, address_file_failed, launch_id};
use bts_worker::{FileFrame, Searcher, digest_text};
use clap::{CommandFactory, FromArgMatches};
use std::io::{self, BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// `bts run [RUN-OPTIONS] <TREE> [TREE-OPTIONS]`
pub fn run(registry: &Registry, raw: &[String]) -> Result<Exit, CliError> {
    let parts = split(raw, &RunArgs::command(), |tree| registry.tree_options(tree));
    let trees_help = format!("Trees (bts run <TREE> --help for their options):\n{}", registry.describe());
    let tree = tree_named(registry, &parts, raw).map(|t| (t, registry.tree_options(t)));
    let args = match parse(&parts.run, raw, RunArgs::command().after_help(trees_help), tree)? {
        Parsed::Args(a) => a,
        Parsed::Exit(e) => return Ok(e),
    };
    if let Some(exit) = worker_rank(registry, &args) {
        return exit;
    }
    failure_announced(&args, run_master(registry, parts, &args))
}

/// `bts run` of a master.
fn run_master(registry: &Registry, parts: Split, args: &RunArgs) -> Result<Exit, CliError> {
    let Some((spec, searcher)) =
        build_tree(registry, parts, "bts run [RUN-OPTIONS] <TREE> [TREE-OPTIONS]", &RunArgs::command())?
    else {
        return Ok(Exit::Complete);
    };
    super::enough_open_files()?;
    if args.stopping.checkpoint_every.is_some() && args.stopping.checkpoint.is_none() {
        return Err(CliError::usage("--checkpoint-every needs --checkpoint FILE"));
    }
    check_optimising(args, &*searcher, &spec)?;
    let mut options = run_options(args, None)?;
    if let (None, Some(b)) = (args.budget.budget, searcher.first_budget()) {
        options.scheduler.budget.initial = b;
    }
    crate::run::check_mode(&options, &spec, &*searcher).map_err(CliError::usage)?;
    super::warn_if_confined(options.workers);
    let budget = &options.scheduler.budget;
    if options.mode == RunMode::Budget
        && Budget(budget.initial).is_unlimited()
        && budget.initial_depth.is_none()
        && (options.workers > 1 || options.listen.is_some())
    {
        tracing::warn!(
            "with --budget inf the first job is the whole tree, searched by one worker while the others wait \
             (give --initial-depth D, without --fixed-budget, to split the tree first)"
        );
    }
    let output_path = args.output.output.as_deref().filter(|_| !args.output.count_only);
    files::check(args, &spec, output_path, options.checkpoint.as_deref())?;
    let _locks = lock_run_files(&options, None)?;
    make_token(&mut options, args)?;
    let frame = searcher.file_frame(None);
    let mut warnings = stdout_warnings(&options);
    if options.checkpoint.is_some() {
        warnings.push(
            "output records go to stdout: after a crash, records written since the last checkpoint \
             would be written again; use --output FILE for exactly-once output",
        );
    }
    let (output, output_path) = open_output(args, warnings, frame.as_ref())?;
    options.output_path = output_path.clone();
    let framed = output_path.zip(frame.is_some().then(|| Arc::clone(&searcher)));
    execute(args, Run::with_searcher(spec, searcher).options(options), output, framed)
}

/// Makes the token file that `--token-file` names if it is missing: only once the run's files
/// are checked and locked, so that a refused run leaves none.
fn make_token(options: &mut RunOptions, args: &RunArgs) -> Result<(), CliError> {
    if let (Some(listen), Some(file)) = (options.listen.as_mut(), &args.remote.token_file)
        && listen.token.is_empty()
    {
        listen.token = read_or_make_token(file)?;
    }
    Ok(())
}

/// Takes the locks of the files the run replaces as it goes, held to its end: its checkpoint, which
/// must not be another run's (`resumed_from`: the checkpoint a resumed run carries on), and its
/// address file.
fn lock_run_files(options: &RunOptions, resumed_from: Option<&Path>) -> Result<Vec<RunLock>, CliError> {
    let mut locks = Vec::new();
    if let Some(checkpoint) = &options.checkpoint {
        locks.push(RunLock::take(checkpoint, "checkpoint")?);
        files::check_replaceable(checkpoint, resumed_from)?;
    }
    locks.extend(address_lock(options)?);
    Ok(locks)
}

/// The lock of the run's address file: two runs given one would take each other's workers, and the
/// first to end would remove the other's address. A file system without locks (a shared one, as a
/// rendezvous file's) goes without.
fn address_lock(options: &RunOptions) -> Result<Option<RunLock>, CliError> {
    let Some(listen) = options.listen.as_ref() else { return Ok(None) };
    let Some(file) = listen.address_file.as_deref() else { return Ok(None) };
    let what = if listen.rendezvous { "rendezvous file" } else { "address file" };
    match RunLock::try_take(&absolute(file), what) {
        Ok(lock) => Ok(Some(lock)),
        Err(files::Refused::Held(e)) => Err(e),
        Err(files::Refused::Failed(e)) => {
            tracing::warn!("{}; going on without", e.message);
            Ok(None)
        }
    }
}

/// `bts resume <CHECKPOINT> [RUN-OPTIONS]`
pub fn resume(registry: &Registry, raw: &[String]) -> Result<Exit, CliError> {
    // Everything but the checkpoint's path is a run option.
    let mut parts = split(raw, &RunArgs::command(), |_| &[]);
    parts.run.append(&mut parts.tree_args);
    let mut command = RunArgs::command()
        .name("bts resume")
        .about("Carry on a run from its checkpoint; run options given change the stored ones")
        .override_usage("bts resume <CHECKPOINT> [RUN-OPTIONS]");
    // What the checkpoint stores is what a resumed run has unless told otherwise.
    // How a new run starts means nothing to a resumed one.
    command = command.mut_arg("start", |arg| arg.hide(true)).mut_arg("initial_depth", |arg| arg.hide(true));
    for id in ["mode", "split", "budget", "scale", "lmin", "lmax", "order", "output"] {
        command = command.mut_arg(id, |arg| {
            let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
            let stored = match help.find(" [default: ") {
                Some(at) => format!("{} [default: the checkpoint's]", &help[..at]),
                None => help,
            };
            arg.help(stored)
        });
    }
    let args = match parse(&parts.run, &[], command, None)? {
        Parsed::Args(a) => a,
        Parsed::Exit(e) => return Ok(e),
    };
    let Some(path) = parts.tree.map(PathBuf::from) else {
        return Err(CliError::usage("no checkpoint given: bts resume <CHECKPOINT> [RUN-OPTIONS]"));
    };
    if args.workers.start.is_some() {
        return Err(CliError::usage(
            "--start is how a new run starts from its root; a resumed run starts from its checkpoint \
             (--mode polling resumes in random polling)",
        ));
    }
    if args.budget.initial_depth.is_some() {
        return Err(CliError::usage(
            "--initial-depth is the depth limit of a new run's first job; a resumed run takes the jobs of its \
             checkpoint (--maxd limits the jobs handed out while the list is short)",
        ));
    }
    // The checkpoint is rank 0's: the other ranks work for it.
    if let Some(exit) = worker_rank(registry, &args) {
        return exit;
    }
    failure_announced(&args, super::enough_open_files().and_then(|()| resume_master(registry, &path, &args)))
}

/// `bts resume` of a master.
fn resume_master(registry: &Registry, path: &Path, args: &RunArgs) -> Result<Exit, CliError> {
    // Through a symbolic link, the run carries on in the file it names.
    let target = path.is_symlink().then(|| files::link_target(path));
    let path = target.as_deref().unwrap_or(path);
    let identity = file_identity(path);
    let mut checkpoint = bts_checkpoints::load(path)
        .map_err(|e| CliError::usage(format!("cannot resume from {}: {e}", path.display())))?;
    let searcher = registry.build(&checkpoint.tree).map_err(|e| {
        CliError::usage(format!(
            "cannot resume from {}: its tree '{}': {e}",
            path.display(),
            checkpoint.tree.command_line()
        ))
    })?;
    if let Some(digest) = checkpoint.input_digest
        && searcher.input_digest() != Some(digest)
    {
        return Err(CliError::usage(format!(
            "cannot resume from {}: the file its tree '{}' reads has changed since the run began \
             (CRC-32 {digest:08x} then, {} now): resume on the same file",
            path.display(),
            checkpoint.tree.command_line(),
            digest_text(searcher.input_digest()),
        )));
    }
    check_optimising(args, &*searcher, &checkpoint.tree)?;
    let mut options = run_options(args, Some(&checkpoint))?;
    crate::run::check_mode(&options, &checkpoint.tree, &*searcher).map_err(CliError::usage)?;
    if !checkpoint.is_complete() {
        super::warn_if_confined(options.workers);
    }
    // The run carries on in the file it was resumed from (a copy of a run carries on in the copy).
    let resumed_in_place = options.checkpoint.is_none();
    let written = options.checkpoint.get_or_insert_with(|| files::link_target(path)).clone();
    if let Some(b) = args.budget.budget.filter(|_| !checkpoint.is_complete()) {
        checkpoint.budget.base = b;
    }
    let output_path = if checkpoint.options.count_only { None } else { resumed_output_path(args, &checkpoint, path)? };
    files::check(args, &checkpoint.tree, output_path.as_deref(), Some(&written))?;
    let _locks = lock_run_files(&options, Some(path))?;
    make_token(&mut options, args)?;
    if resumed_in_place && file_identity(path) != identity {
        return Err(CliError::usage(format!(
            "{} was replaced while it was being read: is another bts running on it?",
            path.display()
        )));
    }
    if checkpoint.is_complete() {
        // Nothing is left to do: report the run without writing anything.
        options.checkpoint = None;
    }
    let warnings = stdout_warnings(&options);
    // A tree that frames its output file (lrs): records start after its header, and a complete
    // file ends with its footer.
    let frame = (searcher.file_frame(None), searcher.file_frame(Some(checkpoint.totals.outputs)));
    let frame_len = match &frame {
        (Some(new), Some(complete)) => (new.header.len() as u64, complete.footer.len() as u64),
        _ => (0, 0),
    };
    let given = args.output.output.is_some();
    let header = frame.0.as_ref().map_or("", |f| f.header.as_str());
    let output = reopen_output(given, &checkpoint, output_path.as_deref(), warnings, (header, frame_len))?;
    options.output_path = output_path.as_deref().map(absolute);
    let framed = options.output_path.clone().filter(|_| frame_len.0 > 0).map(|p| (p, Arc::clone(&searcher)));
    if !args.quiet && !checkpoint.is_complete() {
        let t = &checkpoint.totals;
        let polling = matches!(checkpoint.options.mode, StoredMode::Polling { .. });
        crate::logging::say!(
            "bts: resuming {} (segment {}): {} and {} done, {} left",
            path.display(),
            checkpoint.segments + 1,
            plural(t.nodes, "nodes"),
            plural(t.outputs, "outputs"),
            plural(checkpoint.jobs.len() as u64, if polling { "nodes" } else { "jobs" }),
        );
    }
    execute(args, Run::resume(checkpoint, searcher).options(options), output, framed)
}

/// Which file `path` is now, and which version of it (`None` if there is none): a file system may
/// give the inode of a replaced checkpoint to its next replacement, but not its times.
fn file_identity(path: &Path) -> Option<[i64; 7]> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some([m.dev() as i64, m.ino() as i64, m.size() as i64, m.mtime(), m.mtime_nsec(), m.ctime(), m.ctime_nsec()])
}

/// What to warn of if records go to stdout: random polling with remote workers rolls back to the
/// last snapshot when one is lost, which records already written to stdout cannot follow.
fn stdout_warnings(options: &RunOptions) -> Vec<&'static str> {
    let polling = matches!(options.mode, RunMode::Polling { .. });
    match polling && options.listen.is_some() {
        true => vec![
            "output records go to stdout: if a remote worker is lost, random polling must take back the \
             records written since the last snapshot, which stdout cannot, and the run stops; use --output FILE",
        ],
        false => Vec::new(),
    }
}

/// Records on stdout. What there is to warn of about them is said when the first one is written:
/// a tree without output records is not warned about.
struct StdoutRecords {
    out: BufWriter<io::Stdout>,
    warnings: Vec<&'static str>,
}

impl StdoutRecords {
    /// `instead`: what the user can do if stdout is closed.
    fn boxed(warnings: Vec<&'static str>, instead: &str) -> Result<Box<dyn Output>, CliError> {
        if !files::stdout_is_open() {
            return Err(CliError::usage(format!("stdout is closed, so the records have nowhere to go: {instead}")));
        }
        Ok(Box::new(Self { out: BufWriter::with_capacity(1 << 16, io::stdout()), warnings }))
    }
}

impl Write for StdoutRecords {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if !buf.is_empty() {
            self.warnings.drain(..).for_each(|w| tracing::warn!("{w}"));
        }
        self.out.write(buf).map_err(on_stdout)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.out.flush().map_err(on_stdout)
    }
}

impl Output for StdoutRecords {
    fn sync(&mut self) -> io::Result<()> {
        self.out.flush().map_err(on_stdout)
    }
}

/// An error writing the records says where they went.
fn on_stdout(e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("cannot write the records to stdout: {e}"))
}

/// This process's rank in a cluster launch, from the launcher's environment (0 outside one).
fn cluster_rank() -> u64 {
    ["OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"]
        .iter()
        .find_map(|var| std::env::var(var).ok()?.trim().parse().ok())
        .unwrap_or(0)
}

/// Rank 0 of a cluster launch that fails before it announced itself says so in the rendezvous
/// file, so that the other ranks stop at once: a launcher that lets them run on (as `srun` does
/// by default) would have them wait minutes for a master that never comes.
fn failure_announced(args: &RunArgs, result: Result<Exit, CliError>) -> Result<Exit, CliError> {
    if let (Err(e), Some(file), Some(launch)) = (&result, &args.remote.rendezvous, launch_id())
        && !crate::remote::announced()
    {
        // Not into a file of another kind given as the rendezvous file by mistake, nor into
        // another run's rendezvous file (whose lock it holds).
        if !bts_worker::remote::may_replace_address_file(file) {
            tracing::warn!(
                "cannot tell the other ranks: {} is not a rendezvous file, and is left as it was",
                file.display()
            );
            return result;
        }
        let lock = match RunLock::try_take(&absolute(file), "rendezvous file") {
            Err(files::Refused::Held(_)) => return result,
            lock => lock.ok(),
        };
        if let Err(w) = write_atomically(file, address_file_failed(&launch, &e.message).as_bytes(), false) {
            tracing::warn!("cannot tell the other ranks through {}: {w}", file.display());
        }
        drop(lock);
    }
    result
}

/// In a cluster launch (`--rendezvous`), a rank other than 0 works for rank 0's master.
fn worker_rank(registry: &Registry, args: &RunArgs) -> Option<Result<Exit, CliError>> {
    let file = args.remote.rendezvous.as_ref()?;
    let rank = cluster_rank();
    (rank > 0).then(|| rendezvous_worker(registry, args, file, rank))
}

/// The token of a cluster launch, which every rank reads as it starts: no rank makes it.
fn launch_token(path: &Path) -> Result<Vec<u8>, CliError> {
    if !path.exists() {
        return Err(CliError::usage(format!(
            "the token file {} does not exist: every rank of a launch reads it as it starts, so make it \
             before, with (umask 077; openssl rand -hex 32 > F), or leave --token-file out (rank 0 then \
             writes a token into the rendezvous file)",
            path.display()
        )));
    }
    read_token(path)
}

/// Refused by every rank of a launch alike, so that none waits for the others.
const NO_WORKERS_IN_A_LAUNCH: &str = "--workers 0 leaves the worker ranks of a cluster launch nothing to do";

/// A rank other than 0 of a cluster launch: work for the master that rank 0 announces in `file`.
fn rendezvous_worker(registry: &Registry, args: &RunArgs, file: &Path, rank: u64) -> Result<Exit, CliError> {
    // Rank 0 cannot write there either, and so cannot say that it failed.
    if let Some(folder) = file.parent().filter(|f| !f.as_os_str().is_empty() && !f.is_dir()) {
        return Err(CliError::usage(format!("--rendezvous {}: no folder {}", file.display(), folder.display())));
    }
    let token = args.remote.token_file.as_deref().map(launch_token).transpose()?.unwrap_or_default();
    let threads = match args.workers.workers {
        Some(0) => return Err(CliError::usage(NO_WORKERS_IN_A_LAUNCH)),
        Some(n) => n as u32,
        None => 1,
    };
    tracing::info!(rank, "working for the master of {}", file.display());
    let master = MasterAddress::Rendezvous(file.to_path_buf());
    let retry_for = Duration::from_secs(300);
    let stop = bts_worker::remote::CancellationToken::default();
    crate::signals::leave_on_signal(stop.clone());
    super::worker::work(registry, RemoteOptions { master, token, threads, retry_for, stop }, Duration::ZERO)
}

/// The remote-worker options of a run, checked.
fn listen_options(args: &RunArgs) -> Result<Option<ListenOptions>, CliError> {
    let r = &args.remote;
    let mut listen = if let Some(file) = &r.rendezvous {
        if r.address_file.is_some() {
            return Err(CliError::usage(
                "--rendezvous F is the run's address file: leave --address-file out (workers outside the launch take --connect-file F)",
            ));
        }
        if args.workers.workers == Some(0) {
            return Err(CliError::usage(NO_WORKERS_IN_A_LAUNCH));
        }
        let token = r.token_file.as_deref().map(launch_token).transpose()?;
        let generated = token.is_none();
        let mut listen = ListenOptions::new(r.listen.as_deref().unwrap_or("0.0.0.0:0"));
        listen.token = token.unwrap_or_else(|| bts_protocol::auth::nonce().to_vec());
        listen.address_file = Some(file.clone());
        listen.token_in_address_file = generated;
        listen.rendezvous = true;
        listen
    } else {
        let Some(address) = &r.listen else {
            let given = [
                (r.address_file.is_some(), "--address-file"),
                (r.worker_timeout.is_some(), "--worker-timeout"),
                (r.token_file.is_some(), "--token-file"),
                (r.snapshot_every.is_some(), "--snapshot-every"),
            ];
            if let Some((_, option)) = given.iter().find(|(given, _)| *given) {
                return Err(CliError::usage(format!(
                    "{option} needs --listen ADDR (or --rendezvous F): it is for remote workers"
                )));
            }
            return Ok(None);
        };
        // The master makes a missing token file once every file is checked (`make_token`); the
        // workers are given the same one.
        let token = r.token_file.as_deref().filter(|f| f.exists()).map(read_token).transpose()?.unwrap_or_default();
        if token.is_empty() && r.token_file.is_none() && !crate::remote::is_loopback(address) {
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
        // Each side pings at least every 50 ms, five times within the timeout.
        if t < Duration::from_millis(250) {
            return Err(CliError::usage(format!(
                "--worker-timeout {} s is too short to tell a silent worker from a busy network: give 0.25 or more",
                t.as_secs_f64()
            )));
        }
        listen.worker_timeout = t;
    }
    if let Some(every) = r.snapshot_every {
        listen.snapshot_every = every;
    }
    Ok(Some(listen))
}

enum Parsed {
    Args(Box<RunArgs>),
    Exit(Exit),
}

/// Parses the run options; `tree`: the tree named after them, whose own options they may have
/// taken by mistake (`bts run --n 8 queens`).
fn parse(
    run_options: &[String],
    raw: &[String],
    command: clap::Command,
    tree: Option<(&str, &[String])>,
) -> Result<Parsed, CliError> {
    let matches = command.clone().try_get_matches_from(run_options);
    let args = matches.and_then(|m| RunArgs::from_arg_matches(&m));
    match args {
        Ok(a) => {
            crate::logging::init(a.verbose, a.quiet);
            Ok(Parsed::Args(Box::new(a)))
        }
        Err(e) => print_clap_before_tree(e, ("run", &command), raw, tree).map(Parsed::Exit),
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
    crate::signals::stop_on_signals(run.stopper());
    let checkpoint = run.checkpoint().map(Path::to_path_buf);
    // The output failed (a full disk), or a lost worker's work cannot be redone: what the last
    // checkpoint saved is still whole.
    let broke = |e: &dyn std::fmt::Display, unsaved: Option<crate::run::Unsaved>| match &checkpoint {
        Some(path) if !path.is_file() => CliError::failure(format!(
            "{e}\nbts: no checkpoint is left at {} (its file or folder is gone): the run cannot be resumed",
            path.display()
        )),
        Some(path) => CliError::failure(format!(
            "{e}\nbts: the checkpoint {0} holds the run as of its last save: bts resume {0} carries on from it{1}",
            path.display(),
            unsaved.map_or_else(String::new, |u| format!(" ({})", done_again(u)))
        )),
        None => CliError::failure(format!(
            "{e}\nbts: without --checkpoint the run cannot be resumed{}",
            if args.output.output.is_some() { ", and its output file may end in a record cut short" } else { "" }
        )),
    };
    let finished = match run.run_to(&mut *output) {
        Ok(finished) => finished,
        Err(crate::RunError::Broke(off)) => {
            // The records written go first: a summary on stdout comes after them.
            drop(output);
            // What the run did is told as for any failure, then why it broke off; then a cluster
            // launch's rendezvous file says `finished` (`off` dropped), and its launcher may stop it.
            let reported = report(args, &off.summary);
            let (error, unsaved) = (&off.error, off.unsaved);
            return Ok(super::say_error(match reported {
                Ok(()) => broke(error, unsaved),
                Err(e) => broke(&format!("{error}\nbts: {}", e.message), unsaved),
            }));
        }
        // A disk full or failing is no fault of the command line.
        Err(e @ crate::RunError::Checkpoint { .. }) if matches!(&e, crate::RunError::Checkpoint { source, .. } if files::disk_trouble(source)) =>
        {
            return Err(CliError::failure(e));
        }
        Err(
            e @ (crate::RunError::Checkpoint { .. }
            | crate::RunError::Listen { .. }
            | crate::RunError::Unsupported(_)
            | crate::RunError::History(_)),
        ) => return Err(CliError::usage(e)),
        Err(e) => return Err(CliError::failure(e)),
    };
    drop(output);
    if let Some((path, searcher)) = framed
        && finished.outcome == Outcome::Complete
        && let Some(frame) = searcher.file_frame(Some(finished.summary.totals.outputs))
    {
        complete_frame(&path, &frame)
            .map_err(|e| CliError::failure(format!("cannot complete the output file {}: {e}", path.display())))?;
    }

    let summary = &finished.summary;
    report(args, summary)?;
    let resume_hint = || match (&finished.checkpoint, &finished.checkpoint_error) {
        // Random polling stopped at once keeps its last save, which may have gone since.
        (Some(p), _) if !p.is_file() => {
            format!("no checkpoint is left at {} (its file or folder is gone): the run cannot be resumed", p.display())
        }
        (Some(p), _) => {
            let kept = match finished.unsaved {
                None => format!("checkpoint written to {}", p.display()),
                Some(u) => {
                    format!(
                        "the checkpoint {} holds the run as of its last save: on resuming, {}",
                        p.display(),
                        done_again(u)
                    )
                }
            };
            match &args.remote.rendezvous {
                // A cluster launch resumes as one too.
                Some(r) => format!(
                    "{kept}; resume with your launcher as before, each rank running: {} resume {} --rendezvous {}",
                    super::program_name(),
                    typed(p),
                    typed(&absolute(r))
                ),
                None => format!("{kept}; resume with: {} resume {}", super::program_name(), typed(p)),
            }
        }
        (None, Some(e)) => match e {
            crate::RunError::Checkpoint { path, .. } if path.is_file() => format!(
                "{e}; the previous checkpoint there is still valid: bts resume {} carries on from it",
                typed(path)
            ),
            crate::RunError::Checkpoint { .. } => format!("{e}; no earlier checkpoint is left there"),
            e => e.to_string(),
        },
        (None, None) => {
            let unit = if summary.mode == "polling" { "unvisited nodes" } else { "jobs" };
            let (verb, them) = if summary.queued == 1 { ("was", "it") } else { ("were", "them") };
            let left = crate::summary::plural(summary.queued as u64, unit);
            format!("{left} {verb} left (give --checkpoint FILE to keep {them})")
        }
    };
    let lost_or_failed = matches!(finished.outcome, Outcome::Failed(_) | Outcome::Stopped(StopReason::NoWorkers));
    if finished.checkpoint_error.is_some() && !lost_or_failed {
        return Err(CliError::failure(format!("the run ended ({}), but {}", summary.outcome, resume_hint())));
    }
    match &finished.outcome {
        Outcome::Complete => Ok(Exit::Complete),
        Outcome::Stopped(StopReason::Target) => {
            // A decision is made; the search for the optimum can still go on from the checkpoint.
            if finished.checkpoint.is_some() && summary.queued > 0 {
                crate::logging::say!("bts: the target is reached; {} (it searches on to the optimum)", resume_hint());
            }
            Ok(Exit::Complete)
        }
        Outcome::Stopped(StopReason::NoWorkers) => {
            Err(CliError::failure(format!("every worker was lost; {}", resume_hint())))
        }
        Outcome::Stopped(_) => {
            crate::logging::say!("bts: stopped early ({}); {}", summary.outcome, resume_hint());
            Ok(Exit::Stopped)
        }
        Outcome::Failed(f) => {
            let at = if f.node.is_empty() { String::new() } else { format!(" at node {}", f.node) };
            Err(CliError::failure(format!("a job failed{at}: {}\nbts: {}", f.message, resume_hint())))
        }
    }
}

/// What a run resumed from the last save does again.
fn done_again(u: crate::run::Unsaved) -> String {
    let are = |n| if n == 1 { "is" } else { "are" };
    let printed = match u.printed {
        0 => String::new(),
        n => {
            format!(", and the {} sent to stdout since {} printed again", crate::summary::plural(n, "records"), are(n))
        }
    };
    format!("the {} visited since {} visited again{printed}", crate::summary::plural(u.nodes, "nodes"), are(u.nodes))
}

/// Says the summary on stderr, and writes it as JSON where `--summary-json` asks.
fn report(args: &RunArgs, summary: &crate::Summary) -> Result<(), CliError> {
    crate::logging::say!("{}", summary.human().trim_end_matches('\n'));
    if let Some(path) = &args.output.summary_json {
        let json = serde_json::to_string(summary).expect("a summary serialises") + "\n";
        // `/dev/stdout` opened anew would cut the file stdout goes to, and what bts wrote there.
        let stream = if path.as_os_str() == "-" { Some(1) } else { files::standard_stream(path) };
        let (written, to) = match stream {
            Some(1) => (io::stdout().lock().write_all(json.as_bytes()), "stdout".to_string()),
            Some(_) => (io::stderr().lock().write_all(json.as_bytes()), "stderr".to_string()),
            None => (std::fs::write(path, json), path.display().to_string()),
        };
        written.map_err(|e| CliError::failure(format!("cannot write the summary to {to}: {e}")))?;
    }
    Ok(())
}

/// `--target` and `--all-best` need a branch and bound.
fn check_optimising(args: &RunArgs, searcher: &dyn Searcher, spec: &TreeSpec) -> Result<(), CliError> {
    let option = match (args.stopping.target.is_some(), args.output.all_best) {
        (true, _) => "--target",
        (false, true) => "--all-best",
        (false, false) => return Ok(()),
    };
    if searcher.optimises() {
        return Ok(());
    }
    let hint = if spec.name == "exec" { " (a legacy branch and bound runs with exec --optimise)" } else { "" };
    Err(CliError::usage(format!("{option} needs a branch and bound, and the tree '{}' is not one{hint}", spec.name)))
}

/// Checks the options together and turns them into the run's configuration; when resuming, options
/// not given keep the checkpoint's values.
fn run_options(args: &RunArgs, resuming: Option<&Checkpoint>) -> Result<RunOptions, CliError> {
    files::refuse_dash(args)?;
    let mode = run_mode(args, resuming)?;
    let listen = listen_options(args)?;
    let workers = match args.workers.workers {
        Some(0) if listen.is_none() => {
            return Err(CliError::usage("--workers 0 means remote workers only, which needs --listen"));
        }
        Some(n) => n,
        None if args.remote.rendezvous.is_some() => 1,
        // A run of remote workers only, resumed listening, stays one.
        None if listen.is_some() && resuming.is_some_and(|c| c.options.workers == 0) => 0,
        None => RunOptions::default().workers,
    };
    let stored = resuming.map(|c| &c.options);
    let base = stored.map_or_else(BudgetConfig::default, |s| s.budget.clone());
    // A run that is over keeps its own: the summary of a finished run shows what it ran with.
    let over = super::args::BudgetArgs::default();
    let b = if resuming.is_some_and(Checkpoint::is_complete) { &over } else { &args.budget };
    // A run resumed with a newly fixed budget keeps the b it had reached (its first one would
    // start over from the smallest jobs).
    let newly_fixed = b.fixed_budget && !base.fixed;
    let reached = resuming.map(|c| c.budget.base).filter(|_| newly_fixed);
    let budget = BudgetConfig {
        initial: b.budget.or(reached).unwrap_or(base.initial),
        fixed: b.fixed_budget || base.fixed,
        scale: b.scale.unwrap_or(base.scale),
        lmin: b.lmin.unwrap_or(base.lmin),
        lmax: b.lmax.or(base.lmax),
        maxd: b.maxd.or(base.maxd),
        initial_depth: b.initial_depth.or(base.initial_depth),
        target_job_ns: base.target_job_ns,
    };
    // A fixed budget never changes b and imposes no depth limit: the rules' options would be
    // silently ignored.
    let rules = [
        (b.scale.is_some(), "--scale"),
        (b.lmin.is_some(), "--lmin"),
        (b.lmax.is_some(), "--lmax"),
        (b.maxd.is_some(), "--maxd"),
        (b.initial_depth.is_some(), "--initial-depth"),
    ];
    if budget.fixed
        && let Some((_, name)) = rules.iter().find(|(given, _)| *given)
    {
        let whose = if b.fixed_budget { "--fixed-budget" } else { "the resumed run's --fixed-budget" };
        return Err(CliError::usage(format!(
            "{name} does not apply with {whose}: a fixed budget never changes b and imposes no depth limit"
        )));
    }
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
    if let Some(f) = &args.stopping.stop_file {
        if f.exists() {
            return Err(CliError::usage(format!("the stop file {} exists already; remove it first", f.display())));
        }
        let folder = f.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        if !folder.is_dir() {
            return Err(CliError::usage(format!(
                "the stop file {} could never appear: its folder {} does not exist",
                f.display(),
                folder.display()
            )));
        }
    }
    let count_only = args.output.count_only || stored.is_some_and(|s| s.count_only);
    if let Some(s) = stored
        && args.output.count_only != s.count_only
        && (args.output.count_only || args.output.output.is_some())
    {
        return Err(CliError::usage(match args.output.count_only {
            true => {
                "the checkpoint fixes whether output records are written: its run writes them, so it resumes \
                     without --count-only (start a new run to count only)"
            }
            false => {
                "the checkpoint fixes whether output records are written: its run counts them only \
                      (--count-only), so it resumes without --output"
            }
        }));
    }
    // Ties pruned before the resume cannot come back: every optimal solution needs --all-best
    // from the start.
    if args.output.all_best && resuming.is_some_and(|c| !c.optimum.keep_ties) {
        return Err(CliError::usage(
            "--all-best must be given when the run starts: a run without it prunes the solutions that tie with its \
             best, which resuming cannot bring back; start a new run with --all-best",
        ));
    }
    // When resuming without --checkpoint, the caller names the file resumed from.
    let checkpoint = args.stopping.checkpoint.as_deref().map(files::link_target);
    // Checkpoints hold usable seconds only (bts_checkpoints checks them when loading).
    let stored_every = stored.and_then(|s| s.checkpoint_every).map(Duration::from_secs_f64);
    let every = args.stopping.checkpoint_every.or(stored_every);
    Ok(RunOptions {
        workers,
        scheduler: SchedulerConfig {
            order,
            budget,
            node_limit: args.stopping.node_limit,
            optimum: OptimumConfig {
                keep_ties: resuming.map_or(args.output.all_best, |c| c.optimum.keep_ties),
                target: args.stopping.target,
            },
            ..SchedulerConfig::default()
        },
        time_limit: args.stopping.time_limit,
        stop_file: args.stopping.stop_file.clone(),
        count_only,
        checkpoint,
        checkpoint_every: every,
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
        if let Some(option) = [(w.split.is_some(), "--split"), (w.start.is_some(), "--start")].iter().find(|o| o.0) {
            return Err(CliError::usage(format!("{} applies to --mode polling", option.1)));
        }
        if args.remote.snapshot_every.is_some() {
            return Err(CliError::usage(
                "--snapshot-every applies to --mode polling (budget mode takes no snapshots: a lost worker costs only its jobs)",
            ));
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
        let why = match w.mode {
            Some(_) => "",
            None if w.split.is_some() || w.start.is_some() => " (--split and --start imply it)",
            None => " (the resumed run's mode)",
        };
        return Err(CliError::usage(format!("{name} applies to --mode budget, not to --mode polling{why}")));
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

/// Where the records of a new run go: its output file, nowhere (`--count-only`) or stdout (where
/// `warnings` are said with the first record).
fn open_output(
    args: &RunArgs,
    warnings: Vec<&'static str>,
    frame: Option<&FileFrame>,
) -> Result<(Box<dyn Output>, Option<PathBuf>), CliError> {
    let header = frame.map_or("", |f| f.header.as_str());
    Ok(match &args.output.output {
        _ if args.output.count_only => (Box::new(Discard), None),
        Some(path) => (Box::new(FileOutput::create(path, header)?), Some(absolute(path))),
        None => (StdoutRecords::boxed(warnings, "give --output FILE, or --count-only")?, None),
    })
}

/// Where the records of a resumed run go: the output file at `path`, checked against the
/// checkpoint (`given`: named by --output), nowhere, or stdout (with `warnings`). `frame`: the
/// header of the tree's new file, and the lengths of its header and footer in the file.
fn reopen_output(
    given: bool,
    checkpoint: &Checkpoint,
    path: Option<&Path>,
    warnings: Vec<&'static str>,
    (header, frame_len): (&str, (u64, u64)),
) -> Result<Box<dyn Output>, CliError> {
    let relative = checkpoint.options.output.as_ref().is_some_and(|o| o.is_relative());
    Ok(match path {
        _ if checkpoint.options.count_only => Box::new(Discard),
        // Nothing of it to keep (a run stopped before its first records, its file removed to free
        // a full disk): made afresh.
        Some(p) if !p.exists() && checkpoint.resumed_output_len() == 0 => Box::new(FileOutput::create(p, header)?),
        Some(p) if !p.exists() && checkpoint.options.output.is_none() => {
            return Err(CliError::usage(format!(
                "--output {} does not exist: the run wrote its {} bytes of records to stdout; to carry on in a file, \
                 give --output a file that holds them",
                p.display(),
                checkpoint.output_len
            )));
        }
        // A file that is not the run's may be another one of the same name, near a copied checkpoint.
        Some(p) => Box::new(FileOutput::reopen(p, checkpoint, frame_len).map_err(|e| {
            match given || !relative || !e.message.contains("not this run's output") {
                true => e,
                false => CliError::usage(format!(
                    "{} (the checkpoint names its output relative to its own folder; give --output FILE if it is \
                     elsewhere)",
                    e.message
                )),
            }
        })?),
        None => StdoutRecords::boxed(warnings, "the run writes them to stdout, so resume it with stdout open")?,
    })
}

/// The output file of a run resumed from the checkpoint at `path`: `--output`, or the one the
/// checkpoint names, a relative name taken relative to the checkpoint's folder. A checkpoint that
/// was moved or copied and names an output outside its folder is refused without `--output`: that
/// output may be the original run's.
fn resumed_output_path(args: &RunArgs, checkpoint: &Checkpoint, path: &Path) -> Result<Option<PathBuf>, CliError> {
    if let Some(given) = &args.output.output {
        return Ok(Some(given.clone()));
    }
    let Some(output) = checkpoint.output_path(path) else { return Ok(None) };
    let written_at = checkpoint.options.checkpoint.as_deref();
    let moved = written_at.is_none_or(|w| !files::same_file(w, path));
    if moved && checkpoint.options.output.as_ref().is_some_and(|o| o.is_absolute()) {
        return Err(CliError::usage(format!(
            "{} was written as {}: it has been moved or copied, and its output file {} lies outside its folder, so it \
             may be the original run's; give --output FILE to name the output to carry on (its records so far must be there)",
            path.display(),
            written_at.map_or_else(|| "another file".into(), |w| w.display().to_string()),
            output.display()
        )));
    }
    Ok(Some(output))
}

/// Rewrites the header of a complete output file in place (the same length) and ends it with the
/// footer.
fn complete_frame(path: &Path, frame: &FileFrame) -> io::Result<()> {
    let mut file = std::fs::OpenOptions::new().write(true).open(path)?;
    file.write_all(frame.header.as_bytes())?;
    file.seek(SeekFrom::End(0))?;
    file.write_all(frame.footer.as_bytes())?;
    file.sync_data()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A checkpoint rewritten while a resume waits for its lock may keep its inode (ext4 reuses
    /// the one a rename freed): its identity still changes.
    #[test]
    fn a_file_rewritten_in_its_own_inode_is_another_version() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.ckpt");
        std::fs::write(&path, b"first").unwrap();
        let before = file_identity(&path).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(&path, b"other").unwrap();
        let after = file_identity(&path).unwrap();
        assert_eq!(before[..3], after[..3], "the same inode, of the same size");
        assert_ne!(before, after);
        assert_eq!(file_identity(&path), Some(after));
        assert_eq!(file_identity(&dir.path().join("none")), None);
    }
}
