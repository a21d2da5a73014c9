//! The `bts` command line. Errors are mapped to exit statuses in one place ([`main_with`]):
//! 0 complete, 1 failure, 2 bad usage or input, 3 stopped early.

mod args;
mod estimate;
mod files;
mod inspect;
mod run;
mod split;
mod worker;

use crate::Registry;
use crate::registry::BuildError;
use bts_protocol::TreeSpec;
use bts_worker::Searcher;
use clap::Parser;
use std::ffi::OsString;
use std::fmt;
use std::sync::Arc;

pub use args::RunArgs;

/// Exit statuses of the command line (README, "Exit status").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    Complete = 0,
    Failure = 1,
    Usage = 2,
    Stopped = 3,
}

/// An error with the exit status it maps to.
#[derive(Debug)]
pub struct CliError {
    pub exit: Exit,
    pub message: String,
}

impl CliError {
    pub fn usage(message: impl fmt::Display) -> Self {
        Self { exit: Exit::Usage, message: message.to_string() }
    }

    pub fn failure(message: impl fmt::Display) -> Self {
        Self { exit: Exit::Failure, message: message.to_string() }
    }
}

/// The `bts` program with the built-in trees.
pub fn main() -> ! {
    main_with(Registry::builtin())
}

/// The name this program was started by: `bts`, or a program of a library user's (its hints
/// must name it, as `bts resume` would not know its trees).
pub(crate) fn program_name() -> String {
    let arg0 = std::env::args_os().next().unwrap_or_default();
    let name = std::path::Path::new(&arg0).file_name().map(|n| n.to_string_lossy().into_owned());
    name.filter(|n| !n.is_empty()).unwrap_or_else(|| "bts".into())
}

/// The `bts` program with the trees of `registry`: a program built on the bts library calls this
/// with its own trees registered, and gets the whole command line for them.
pub fn main_with(registry: Registry) -> ! {
    // A panic in a tree fails its job, which reports it with where it happened: printed by the
    // default hook as well, it was said three times.
    bts_worker::quiet_caught_panics();
    crate::signals::survive_file_size_limit();
    let exit = run(&registry, std::env::args_os());
    // Threads still running jobs (the progress estimate's, a run quit at once) die with the
    // process; the programs they started must not outlive it.
    bts_adapters::kill_all();
    std::process::exit(exit as i32)
}

/// Runs the command line `args` (program name first) with the trees of `registry`; errors are
/// printed on stderr. Returns the exit status.
pub fn run(registry: &Registry, args: impl IntoIterator<Item = OsString>) -> Exit {
    match run_cli(registry, args) {
        Ok(exit) => exit,
        Err(e) => say_error(e),
    }
}

/// Prints `e` on stderr: its exit status.
pub(crate) fn say_error(e: CliError) -> Exit {
    crate::logging::say!("bts: error: {}", for_this_program(&e.message));
    e.exit
}

/// The fewest open files a run may be limited to: its runtime, signals, files and locks take about
/// 20 before any connection or program.
const MIN_OPEN_FILES: libc::rlim_t = 64;

/// What a low soft limit of open files is raised to, where the hard limit allows: a shell's usual
/// default, room for workers with programs of their own.
const RAISED_OPEN_FILES: libc::rlim_t = 1024;

/// Refuses a limit of open files (`ulimit -n`) too low for a run to start, which would otherwise
/// fail deep inside it; raises a lower soft limit towards the hard one first.
pub(crate) fn enough_open_files() -> Result<(), CliError> {
    let Some(soft) = crate::remote::raise_open_files_limit(MIN_OPEN_FILES, RAISED_OPEN_FILES) else { return Ok(()) };
    match soft >= MIN_OPEN_FILES {
        true => Ok(()),
        false => Err(CliError::usage(format!(
            "this process may open only {soft} files at once (ulimit -n): bts needs at least {MIN_OPEN_FILES}"
        ))),
    }
}

/// Warns when this process may run on fewer CPUs than it has search threads, by the CPU affinity a
/// launcher gave it (OpenMPI binds each rank of a small launch to one core): the threads would
/// share those CPUs and the run go at a fraction of its speed, unseen.
pub(crate) fn warn_if_confined(threads: usize) {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: sched_getaffinity fills the set it is given, of the size it is told; a zeroed
        // set is a valid empty one.
        let allowed = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
                return;
            }
            libc::CPU_COUNT(&set)
        } as usize;
        // SAFETY: sysconf only reads.
        let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
        if allowed < threads && (allowed as i64) < online {
            tracing::warn!(
                "this process may run on {allowed} of the machine's {online} CPUs (its CPU affinity, as \
                 a launcher sets it) and has {threads} search threads, which will share {}: under \
                 mpirun give --bind-to none (or --map-by slot:PE={threads})",
                if allowed == 1 { "it" } else { "them" }
            );
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = threads;
}

fn run_cli(registry: &Registry, args: impl IntoIterator<Item = OsString>) -> Result<Exit, CliError> {
    let args: Vec<OsString> = args.into_iter().collect();
    let cli = match args::Cli::try_parse_from(help_as_flag(args.clone())) {
        Ok(cli) => cli,
        Err(e) if e.kind() == clap::error::ErrorKind::InvalidUtf8 => return Err(not_text(&args)),
        Err(e) => return print_clap(e),
    };
    match cli.command {
        args::Command::Run { args } => run::run(registry, &args),
        args::Command::Resume { args } => run::resume(registry, &args),
        args::Command::Inspect { checkpoint } => inspect::inspect(&checkpoint),
        args::Command::Worker(args) => worker::worker(registry, args),
        args::Command::Estimate { args } => estimate::estimate(registry, &args),
        args::Command::Plot { hist, output } => {
            if files::same_file(&hist, &output) {
                return Err(CliError::usage(format!(
                    "{} is both the history to plot and the plot: give -o another file",
                    hist.display()
                )));
            }
            let history = crate::plot::read_hist(&hist).map_err(CliError::usage)?;
            let title = format!("bts run: {}", hist.display());
            crate::plot::plot(&history, &title, &output).map_err(|e| match e {
                crate::plot::PlotError::Usage(e) => CliError::usage(e),
                crate::plot::PlotError::Failed(e) => CliError::failure(e),
            })?;
            Ok(Exit::Complete)
        }
        args::Command::Trees => {
            print_out(registry.describe())?;
            Ok(Exit::Complete)
        }
    }
}

/// clap says only that some argument is not UTF-8; name it (paths may be any bytes, so the first
/// such argument is the likely one).
fn not_text(args: &[OsString]) -> CliError {
    let arg = args.iter().skip(1).find(|a| a.to_str().is_none()).map(|a| a.to_string_lossy());
    CliError::usage(format!(
        "the argument '{}' is not UTF-8 text ({} stands for the bytes that are not): bts takes its \
         options, a tree's options and a legacy program's command line as text",
        arg.unwrap_or_default(),
        char::REPLACEMENT_CHARACTER
    ))
}

/// Writes `text` on stdout. A reader that went away (`bts trees | head -1`) had what it wanted; a
/// stdout that cannot be written (a full disk, or closed) fails the command.
pub(crate) fn print_out(text: impl fmt::Display) -> Result<(), CliError> {
    use std::io::Write;
    if !files::stdout_is_open() {
        return Err(CliError::failure("cannot write to stdout: it is closed"));
    }
    let mut out = std::io::stdout().lock();
    match write!(out, "{text}").and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(CliError::failure(format!("cannot write to stdout: {e}")))
        }
        _ => Ok(()),
    }
}

/// `bts help COMMAND` is `bts COMMAND --help`: clap's own help subcommand knows nothing of the
/// options that `run`, `resume` and `estimate` parse themselves.
fn help_as_flag(mut args: Vec<OsString>) -> Vec<OsString> {
    if args.get(1).is_some_and(|a| a == "help") {
        args.remove(1);
        args.truncate(2);
        args.push("--help".into());
    }
    args
}

/// A tree named on the command line and its searcher; `None` when its help was asked for instead.
type Built = Option<(TreeSpec, Arc<dyn Searcher>)>;

/// The tree named on the command line, built, or its help printed. `synopsis` shows the command's
/// form when no tree is named.
pub(crate) fn build_tree(
    registry: &Registry,
    parts: split::Split,
    synopsis: &str,
    command: &clap::Command,
) -> Result<Built, CliError> {
    let Some(name) = parts.tree else {
        return Err(CliError::usage(format!("no tree given: {synopsis}; trees: {}", registry.names().join(", "))));
    };
    let spec = TreeSpec::new(name, parts.tree_args);
    match registry.build(&spec) {
        Ok(searcher) => Ok(Some((spec, searcher))),
        Err(BuildError::Help(text)) => {
            // The tree's usage line names the command it was asked under (`bts estimate queens`).
            let command = synopsis.split(' ').take(2).collect::<Vec<_>>().join(" ");
            let text = text.replace(&format!("bts run {}", spec.name), &format!("{command} {}", spec.name));
            print_out(for_this_program(&text))?;
            Ok(None)
        }
        Err(BuildError::Invalid(e)) => match tip(&e, &spec.name, command) {
            Some(tip) => Err(CliError::usage(format!("{e}; {tip}"))),
            None => Err(CliError::usage(e)),
        },
        // `bts run --checkpoint exec -- ./prog`: the option took the tree's name for its value.
        Err(e @ BuildError::Unknown { .. }) => {
            let tree = parts.run.last().filter(|t| registry.contains(t));
            match tree.and_then(|tree| Some((tree, took_the_tree(&parts.run, tree, command)?))) {
                Some((tree, (took, value))) => Err(CliError::usage(format!(
                    "{took} took `{tree}` for its value, and `{}` was read as the tree: give {took} its value: \
                     {} {took} <{value}> {tree} ...",
                    spec.name,
                    synopsis.split(' ').take(2).collect::<Vec<_>>().join(" ")
                ))),
                None => Err(CliError::usage(e)),
            }
        }
    }
}

/// Advice for an argument `tree` did not know (`message` is its error), when it looks like one of
/// `command`'s options given after the tree's options, or a program given to `exec` without `--`.
fn tip(message: &str, tree: &str, command: &clap::Command) -> Option<String> {
    if message.contains("tip:") {
        // The tree's own advice (one of its options is close).
        return None;
    }
    let arg = message.split("unexpected argument '").nth(1)?.split('\'').next()?;
    if let Some(name) = arg.strip_prefix("--") {
        let name = name.split('=').next().unwrap_or(name);
        let close = command.get_arguments().filter_map(|a| a.get_long()).min_by_key(|l| edit_distance(l, name))?;
        if edit_distance(close, name) <= 2 {
            return Some(format!("did you mean the option --{close}?"));
        }
        // `bts estimate queens --n 8 --workers 2`.
        return is_run_option(name)
            .then(|| format!("--{name} is an option of `bts run`, not of `{}`", command.get_name()));
    }
    if let Some(short) = arg.strip_prefix('-') {
        let short = short.chars().next().filter(|_| short.chars().count() == 1)?;
        let long = command.get_arguments().find(|a| a.get_short() == Some(short))?.get_long()?;
        return Some(format!(
            "after the tree's options, options take their long form: --{long} (or -{short} before {tree})"
        ));
    }
    // A program's command line belongs to it, after `--`.
    (tree == "exec")
        .then(|| "a program and its arguments go after `--`: bts run exec [OPTIONS] -- PROGRAM [ARGS...]".to_string())
}

/// Whether `bts run` has the long option `--name` (a run option given to `bts estimate`).
fn is_run_option(name: &str) -> bool {
    <args::RunArgs as clap::CommandFactory>::command().get_arguments().any(|a| a.get_long() == Some(name))
}

/// The Levenshtein distance between two option names.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let next = (row[j + 1] + 1).min(row[j] + 1).min(diagonal + usize::from(ca != cb));
            diagonal = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

/// As [`print_clap`], for the options before the tree's name (with the tree's long options): an
/// unknown one may be the tree's own, given too early (`bts run --n 8 queens`).
pub(crate) fn print_clap_before_tree(
    e: clap::Error,
    (command, options_of): (&str, &clap::Command),
    raw: &[String],
    tree: Option<(&str, &[String])>,
) -> Result<Exit, CliError> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    match (e.kind(), e.get(ContextKind::InvalidArg), tree) {
        (ErrorKind::UnknownArgument, Some(ContextValue::String(option)), Some((tree, options))) => {
            let option = option.split('=').next().unwrap_or(option);
            // `bts run --checkpoint queens --n 8`: the option before the tree's name took it.
            if let Some((took, value)) = took_the_tree(raw, tree, options_of) {
                return Err(CliError::usage(format!(
                    "{took} took `{tree}` for its value, and {option} was left before the tree's name: give {took} \
                     its value: bts {command} [OPTIONS] {took} <{value}> {tree} ..."
                )));
            }
            // Clap's nearest option of the command would mislead.
            if option.strip_prefix("--").is_some_and(|o| options.iter().any(|t| t == o)) {
                return Err(CliError::usage(format!(
                    "{option} is an option of {tree}: put it after the tree's name: bts {command} [OPTIONS] {tree} \
                     {option} ..."
                )));
            }
            // `bts estimate --mode polling queens`.
            if command == "estimate" && option.strip_prefix("--").is_some_and(is_run_option) {
                return Err(CliError::usage(format!("{option} is an option of `bts run`, not of `bts estimate`")));
            }
            Err(CliError::usage(format!(
                "{}; if {option} is an option of {tree}, put it after the tree's name: bts {command} [OPTIONS] {tree} {option} ...",
                crate::registry::one_line(&e),
            )))
        }
        _ => print_clap(e),
    }
}

/// The option of `command` just before `tree` in `raw` that takes a value, and so took the tree's
/// name for it (`--checkpoint queens`), with its value's name.
fn took_the_tree<'a>(raw: &'a [String], tree: &str, command: &clap::Command) -> Option<(&'a str, String)> {
    let at = raw.iter().position(|a| a == tree)?;
    let before = raw.get(at.checked_sub(1)?)?;
    let takes_value = |a: &clap::Arg| a.get_action().takes_values();
    let found = match before.strip_prefix("--") {
        Some(long) => command.get_arguments().find(|a| a.get_long() == Some(long)),
        None => {
            let mut letters = before.strip_prefix('-')?.chars();
            let (letter, None) = (letters.next()?, letters.next()) else { return None };
            command.get_arguments().find(|a| a.get_short() == Some(letter))
        }
    };
    let value = |a: &clap::Arg| a.get_value_names().and_then(|v| v.first()).map_or("VALUE".into(), |v| v.to_string());
    found.filter(|a| takes_value(a)).map(|a| (before.as_str(), value(a)))
}

/// The tree named among `raw`, the arguments `parts` were split from: an unknown option before the
/// name takes it for its value, so the first name the registry knows.
pub(crate) fn tree_named<'a>(registry: &Registry, parts: &'a split::Split, raw: &'a [String]) -> Option<&'a str> {
    parts.tree.iter().chain(raw).find(|a| registry.contains(a)).map(String::as_str)
}

/// Clap's help, naming this program where it is not `bts`.
fn print_help(e: &clap::Error) -> Result<(), CliError> {
    match program_name().as_str() {
        "bts" => {
            let _ = e.print();
            Ok(())
        }
        _ => print_out(for_this_program(&e.render().to_string())),
    }
}

/// `text` as this program says it: a program built on the library (`mytree`) names itself in the
/// commands it shows, which the user types (`mytree resume FILE`, not `bts resume FILE`).
pub(crate) fn for_this_program(text: &str) -> String {
    let name = program_name();
    if name == "bts" {
        return text.to_string();
    }
    let commands = ["run", "resume", "worker", "estimate", "inspect", "plot", "stop", "trees", "help", "["];
    let mut text = text.replace("Usage: bts ", &format!("Usage: {name} "));
    for command in commands {
        text = text.replace(&format!("bts {command}"), &format!("{name} {command}"));
    }
    text
}

/// Help and version go to stdout (a success); a usage error becomes one line (bad usage).
pub(crate) fn print_clap(e: clap::Error) -> Result<Exit, CliError> {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            print_help(&e)?;
            Ok(Exit::Complete)
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            print_help(&e)?;
            Ok(Exit::Usage)
        }
        _ => Err(CliError::usage(format!("{} (see --help)", crate::registry::one_line(&e)))),
    }
}
