//! Legacy enumeration programs as bts workers: `bts run exec [OPTIONS] -- PROGRAM [ARGS...]`, and
//! the built-in `bts run lrs FILE` on the same machinery (see [`LrsSearcher`]).
//!
//! A program that can search a subtree under a budget talks to bts through a line protocol on its
//! stdin and stdout (README, "Parallelising an existing program", which walks through adapting one). A
//! node is one line of text. In persistent mode one process per worker thread gets `job` lines; in
//! one-shot mode a process is started for every job, with the job in its environment and arguments.
//! A job's output and returned nodes count only once its `done` arrives; a failed job is tried
//! again on a fresh process, and when retries run out the run stops with an error that names the
//! node, the offending line and the end of the program's stderr.

mod lines;
mod lrs;
mod process;
mod runner;

/// The parsers of what programs and users write, for the fuzz targets in `fuzz/` only: no part of
/// the crate's API, and there only with the feature `fuzzing`.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing {
    pub use crate::lines::{Line, parse as parse_line};
    pub use crate::lrs::options::{Header, InputOptions, dimension, header, read as read_options, without_linearities};
    pub use crate::lrs::parse::JobOutput;
}

pub use lrs::{LrsArgs, LrsSearcher};
pub use process::kill_all;

use bts_protocol::NodeBytes;
use bts_worker::{JobRunner, RunnerSettings, Searcher, SharedIncumbent, StopFlags};
use clap::Parser;
use runner::ExecRunner;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Options of `bts run exec`.
#[derive(Clone, Debug, Parser)]
#[command(
    name = "exec",
    no_binary_name = true,
    // A negative number is a bad value, not an unknown option.
    allow_negative_numbers = true,
    about = "A program of yours, through the line protocol: exec [OPTIONS] -- PROGRAM [ARGS...]"
)]
pub struct ExecArgs {
    /// One long-lived process per worker thread, given jobs on stdin (default: a process per job,
    /// given the job in BTS_NODE, BTS_DEPTH, BTS_BUDGET, BTS_MAX_DEPTH and in {node}, {depth},
    /// {budget}, {max_depth} in ARGS)
    #[arg(long)]
    pub persistent: bool,
    /// The root node, as a line of text
    #[arg(long, value_name = "TEXT", default_value = "root")]
    pub root: String,
    /// Tries of a failed job on a fresh process before the run stops
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub retries: u32,
    /// A job that takes longer fails (and is tried again)
    #[arg(long, value_name = "SECS", default_value_t = 600.0, value_parser = positive_seconds)]
    pub job_timeout: f64,
    /// The program is a branch and bound: its jobs say the least value worth reporting (job lines,
    /// BTS_LEAST, {least}) and it reports `solution <value> <record>` lines
    #[arg(long)]
    pub optimise: bool,
    /// The program and its arguments
    #[arg(last = true, required = true, value_name = "PROGRAM [ARGS]")]
    pub command: Vec<String>,
}

/// At most 1e9 seconds (31 years), as every seconds option of bts: longer cannot be added to a clock.
pub(crate) fn positive_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        // Not so small that it makes no time at all.
        Ok(x) if x > 0.0 && x <= 1e9 && !std::time::Duration::from_secs_f64(x).is_zero() => Ok(x),
        _ => Err(format!("'{s}' is not a number of seconds from 1e-9 (a nanosecond) to 1e9")),
    }
}

/// The longest line accepted from a program.
pub(crate) const MAX_LINE: usize = 16 << 20;

/// Everything needed to run jobs through the program.
#[derive(Debug)]
pub struct ExecConfig {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub persistent: bool,
    pub root: String,
    pub retries: u32,
    pub job_timeout: Duration,
    pub max_line: usize,
    /// A branch and bound (`--optimise`).
    pub optimise: bool,
    /// The run stops (a failed job is not tried again, which would only hold up the stop), or is
    /// over (a job still running is given up).
    pub flags: StopFlags,
}

/// The `exec` tree.
pub struct ExecSearcher {
    config: Arc<ExecConfig>,
    runners: AtomicUsize,
    /// The incumbent of a branch and bound, shared by this process's runners.
    incumbent: Arc<SharedIncumbent>,
}

impl ExecSearcher {
    /// Checks the options, and that the program can be run.
    pub fn new(args: ExecArgs) -> Result<Self, String> {
        if args.root.contains('\n') {
            return Err("exec: --root must be one line".into());
        }
        let (program, rest) = args.command.split_first().ok_or("exec: no program given after --")?;
        if !args.persistent
            && let Some(why) = runner::unpassable(args.root.as_bytes(), rest)
        {
            return Err(format!("exec: a one-shot program cannot be given the root (--root): {why}; use --persistent"));
        }
        let program = find_program(program)?;
        let config = ExecConfig {
            program,
            args: rest.to_vec(),
            persistent: args.persistent,
            root: args.root,
            retries: args.retries,
            job_timeout: Duration::from_secs_f64(args.job_timeout),
            max_line: MAX_LINE,
            optimise: args.optimise,
            flags: StopFlags::default(),
        };
        Ok(Self { config: Arc::new(config), runners: AtomicUsize::new(0), incumbent: Arc::default() })
    }
}

impl Searcher for ExecSearcher {
    fn root(&self) -> Result<NodeBytes, String> {
        Ok(NodeBytes::from_slice(self.config.root.as_bytes()))
    }

    fn stopping(&self) {
        self.config.flags.stop();
    }

    fn abandon(&self) {
        self.config.flags.abandon();
    }

    fn begin_run(&self) {
        self.config.flags.begin_run();
    }

    fn runner(&self, settings: RunnerSettings) -> Result<Box<dyn JobRunner>, String> {
        let n = self.runners.fetch_add(1, Ordering::SeqCst);
        let name = self.config.program.file_name().map_or_else(|| "exec".into(), |f| f.to_string_lossy().into_owned());
        // A detached runner's solutions never reach the master: it must not prune for the others.
        let incumbent = if settings.detached { Arc::default() } else { Arc::clone(&self.incumbent) };
        let runner = ExecRunner::new(Arc::clone(&self.config), settings, format!("{name}#{n}"), incumbent)?;
        Ok(Box::new(runner))
    }

    fn incumbent(&self) -> Option<&SharedIncumbent> {
        self.config.optimise.then_some(&*self.incumbent)
    }

    fn runs_elsewhere(&self) -> bool {
        true
    }
}

/// The program's path: as given when it has a slash, else found on PATH; it must be an executable
/// file.
pub(crate) fn find_program(name: &str) -> Result<PathBuf, String> {
    let candidates: Vec<PathBuf> = if name.contains('/') {
        vec![PathBuf::from(name)]
    } else {
        std::env::var_os("PATH").map(|p| std::env::split_paths(&p).map(|d| d.join(name)).collect()).unwrap_or_default()
    };
    let mut found_not_executable = None;
    for c in candidates {
        if c.is_file() {
            if is_executable(&c) {
                return runnable(&c).map(|()| c);
            }
            found_not_executable.get_or_insert(c);
        }
    }
    Err(match found_not_executable {
        Some(p) => format!("exec: {} is not executable (chmod +x it)", p.display()),
        None if Path::new(name).is_dir() => format!("exec: {name} is a directory, not a program"),
        None if name.contains('/') && Path::new(name).exists() => {
            format!("exec: {name} is not a regular file, not a program")
        }
        None if name.contains('/') => format!("exec: {name}: no such file"),
        None => format!("exec: {name}: not found on PATH"),
    })
}

/// An executable file the system can run: a binary (ELF), or a script whose `#!` line names an
/// interpreter that is there. Anything else fails only when it is started, so it is refused before
/// the run.
fn runnable(path: &Path) -> Result<(), String> {
    let mut head = [0u8; 256];
    // A program that may be run but not read (mode 111) is the system's to judge.
    let Ok(n) = std::fs::File::open(path).and_then(|mut f| std::io::Read::read(&mut f, &mut head)) else {
        return Ok(());
    };
    let head = &head[..n];
    if head.starts_with(b"\x7fELF") {
        return Ok(());
    }
    let Some(line) = head.strip_prefix(b"#!") else {
        return Err(format!(
            "exec: {} is neither a binary nor a script with a #! line: the system cannot run it",
            path.display()
        ));
    };
    let line = String::from_utf8_lossy(line.split(|&b| b == b'\n').next().unwrap_or_default());
    // The kernel keeps a carriage return as part of the interpreter's name or last argument.
    if line.ends_with('\r') {
        return Err(format!(
            "exec: {}'s #! line ends in a carriage return (Windows line ends), which the system takes as part of \
             {:?}: convert the script's line ends",
            path.display(),
            line.trim_start_matches([' ', '\t']),
        ));
    }
    // As the kernel reads it: the name ends at a space or a tab.
    let interpreter = line.trim_start_matches([' ', '\t']).split([' ', '\t']).next().unwrap_or_default();
    if !Path::new(interpreter).is_file() || !is_executable(Path::new(interpreter)) {
        return Err(format!("exec: {}'s #! line names {interpreter:?}, which is not a program here", path.display()));
    }
    Ok(())
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o111 != 0)
}
