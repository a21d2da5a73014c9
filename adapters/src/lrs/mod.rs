//! `bts run lrs FILE`: vertex and facet enumeration by the unmodified `lrs` program (lrslib 7.x),
//! one lrs process per job, in the place of `mpirun -np N mplrs FILE`.
//!
//! A node is a cobasis (its indices as text; the root is empty) and its depth. A job runs lrs on
//! the input with option lines appended, as mplrs builds its jobs: `verbose` (pruned cobases are
//! printed, ending in `*unexplored`), `restart` and `mindepth` (start from the job's cobasis and
//! never backtrack above it), `maxcobases` (the budget) and `maxdepth` (the depth limit). lrs's
//! budget is soft: once it is spent lrs still generates the children left on its stack, finishing
//! the leaves and returning the others, so a job visits bases − returned (+ 1 for its own restart
//! cobasis, which lrs does not count) nodes, and these add up to plain lrs's `bases`. lrs prints
//! a node's output when it generates it, and suppresses the restart cobasis's own: every record is
//! printed by exactly one job. With `--count-only` jobs add `countonly`: lrs prints no records and
//! a job's outputs are counted from its `*Totals` line.

pub(crate) mod options;
pub(crate) mod parse;

use crate::ExecConfig;
use crate::process::{JobFile, Next, Program};
use crate::runner::{Failure, exited_successfully, next_unless_abandoned, timeout_message, with_retries};
use bts_protocol::{Job, JobFailure, JobReport, NodeBytes, ReportBatch, Returned};
use bts_worker::{CounterNames, FileFrame, JobRunner, RunnerSettings, Searcher};
use clap::Parser;
use options::InputOptions;
use parse::JobOutput;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Options of `bts run lrs`.
#[derive(Clone, Debug, Parser)]
#[command(
    name = "lrs",
    no_binary_name = true,
    // A negative number is a bad value, not an unknown option.
    allow_negative_numbers = true,
    about = "Vertex/facet enumeration by lrs (lrslib), a process per job: lrs FILE [--lrs PATH]"
)]
pub struct LrsArgs {
    /// The input: an H-representation (vertices and rays are enumerated) or a V-representation
    /// (facets are), as plain lrs reads it. Remote workers read it at the same path.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// The lrs program (default: lrs on PATH)
    #[arg(long, value_name = "PATH")]
    pub lrs: Option<PathBuf>,
    /// Tries of a failed job on a fresh process before the run stops
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub retries: u32,
    /// A job that takes longer fails (and is tried again)
    #[arg(long, value_name = "SECS", default_value_t = 3600.0, value_parser = crate::positive_seconds)]
    pub job_timeout: f64,
}

/// The counters of an H-representation's jobs (plain lrs's `*Totals` names).
const VERTEX_COUNTERS: [&str; 5] = ["vertices", "rays", "bases", "integer_vertices", "linearities"];
/// The counters of a V-representation's jobs.
const FACET_COUNTERS: [&str; 3] = ["facets", "bases", "linearities"];

/// Everything a job needs.
#[derive(Debug)]
struct LrsConfig {
    exec: ExecConfig,
    /// The input file, ending in a newline.
    input: Vec<u8>,
    /// A V-representation: lrs computes facets, and its restart line has no R#.
    hull: bool,
    /// The name lrs echoes first.
    name: Option<String>,
    /// The head of an output file, from the name to the `***** <n> rational` line.
    head: Vec<String>,
    /// The input's own options that bts applies.
    options: InputOptions,
    /// The dimension of the input's space.
    dimension: u64,
    /// The input file's digest, as read.
    digest: u32,
}

/// The `lrs` tree.
pub struct LrsSearcher {
    config: Arc<LrsConfig>,
    runners: AtomicUsize,
}

impl LrsSearcher {
    /// Finds lrs, reads the input and has lrs check it (a job that stops at the first basis).
    pub fn new(args: LrsArgs) -> Result<Self, String> {
        let program = find_lrs(args.lrs.as_deref())?;
        let bytes = std::fs::read(&args.file)
            .map_err(|e| format!("lrs: cannot read the input {}: {e}", args.file.display()))?;
        let digest = bts_worker::input_digest(&bytes);
        // lrs reads bytes and gets them as they are; bts reads them as text (a name in another
        // encoding than UTF-8 is no error: the output file's head has it in UTF-8).
        let mut input = bytes;
        if !input.ends_with(b"\n") {
            input.push(b'\n');
        }
        let text = String::from_utf8_lossy(&input);
        let options::Header { hull, name, nonnegative, linearities, repeated_linearity } = options::header(&text);
        if let Some(row) = repeated_linearity {
            // lrs takes it without a word and gives another polyhedron's vertices and rays.
            return Err(format!("lrs: {}: the input's `linearity` lists row {row} twice", args.file.display()));
        }
        let options = options::read(&text).map_err(|e| format!("lrs: {}: {e}", args.file.display()))?;
        if nonnegative && linearities > 0 {
            return Err(format!(
                "lrs: {}: the input's `nonnegative` and `linearity` cannot go together (lrs's manual: the \
                 linearities are then taken as inequalities, and jobs restarted from its cobases fail): give \
                 the rows x ≥ 0 in the matrix instead of `nonnegative`",
                args.file.display()
            ));
        }
        let exec = ExecConfig {
            program,
            args: Vec::new(),
            persistent: false,
            root: String::new(),
            retries: args.retries,
            job_timeout: Duration::from_secs_f64(args.job_timeout),
            max_line: crate::MAX_LINE,
            optimise: false,
            flags: Default::default(),
        };
        let dimension = options::dimension(&text);
        let mut config = LrsConfig { exec, input, hull, name, head: Vec::new(), options, dimension, digest };
        let mut checked = check_input(&config, &args.file)?;
        let redundant = std::mem::take(&mut checked.redundant_linearities);
        if !redundant.is_empty() {
            if config.options.starting_cobasis {
                return Err(format!(
                    "lrs: {}: lrs finds the linearity of {} redundant, and with `startingcobasis` it may \
                     name another row than the redundant one, which bts would make an inequality: take \
                     the redundant equation out of `linearity`, or `startingcobasis` out of the input",
                    args.file.display(),
                    rows(&redundant)
                ));
            }
            config.input = options::without_linearities(&config.input, &redundant)
                .ok_or_else(|| format!("lrs: {}: cannot read the input's `linearity`", args.file.display()))?;
            checked = check_input(&config, &args.file)?;
            if !checked.redundant_linearities.is_empty() {
                return Err(format!(
                    "lrs: {}: lrs finds the linearity of {} redundant even with {} taken out of `linearity`; \
                     restarted from the cobases of such an input, lrs lands on other bases: declare only \
                     independent equations in `linearity`",
                    args.file.display(),
                    rows(&checked.redundant_linearities),
                    rows(&redundant)
                ));
            }
            tracing::warn!(
                "{}: lrs finds the linearity of {} redundant and makes it an inequality; so do bts's jobs",
                args.file.display(),
                rows(&redundant)
            );
        }
        config.head = checked.head;
        Ok(Self { config: Arc::new(config), runners: AtomicUsize::new(0) })
    }
}

/// "row 3" or "rows 3, 5".
fn rows(rows: &[usize]) -> String {
    let list: Vec<String> = rows.iter().map(usize::to_string).collect();
    format!("{} {}", if rows.len() == 1 { "row" } else { "rows" }, list.join(", "))
}

/// What the input check found: the head of an output file, and the linearities lrs found redundant.
struct Checked {
    head: Vec<String>,
    redundant_linearities: Vec<usize>,
}

/// Runs lrs up to the first basis: it rejects a bad input with a message, and its output gives the
/// head of an output file (the name, the representation, `linearity`, `begin` and `*****`).
fn check_input(config: &LrsConfig, file: &Path) -> Result<Checked, String> {
    let rejected = |what: String| match tmp_shortage() {
        Some(short) => format!("lrs fails on {}: {what}; {short}", file.display()),
        None => format!("lrs rejects {}: {what}", file.display()),
    };
    let input = input_file(&[&config.input[..], b"maxcobases 1\n"].concat()).map_err(|e| format!("lrs: {e}"))?;
    let mut program = start(&config.exec, &input, "lrs")
        .map_err(|e| format!("lrs: cannot start {}: {e}", config.exec.program.display()))?;
    let deadline = Instant::now() + config.exec.job_timeout;
    let mut out = JobOutput::new(config.name.as_deref());
    loop {
        match program.next(deadline) {
            Next::Line(l) => {
                // lrs writes ASCII.
                out.line(&String::from_utf8_lossy(&l)).map_err(rejected)?;
            }
            Next::Eof => break,
            Next::TooLong(_) => return Err(rejected("a line too long".into())),
            Next::Timeout => {
                return Err(format!(
                    "lrs did not reach a first basis of {} within --job-timeout {} s",
                    file.display(),
                    config.exec.job_timeout.as_secs_f64()
                ));
            }
        }
    }
    let status = program.wait(Duration::from_secs(10));
    if !out.saw_banner() {
        let ended = match status {
            Some(s) if !s.success() => format!(" and ended with {s}"),
            _ => String::new(),
        };
        return Err(format!(
            "{} does not behave as lrs: it printed no `*lrs:lrslib` banner{ended} (bts runs lrs of lrslib 7)",
            config.exec.program.display()
        ));
    }
    if out.notes.iter().any(|l| l == "No feasible solution") {
        return Err(format!(
            "lrs finds no feasible solution in {}: the polyhedron is empty, and there is nothing to enumerate",
            file.display()
        ));
    }
    if !status.is_some_and(|s| s.success()) || out.totals.is_none() {
        let mut why: Vec<String> = program.stderr_tail().lines().map(str::trim).map(str::to_string).collect();
        why.extend(out.notes.iter().cloned());
        why.retain(|l| !l.is_empty());
        return Err(rejected(if why.is_empty() { "no *Totals line".into() } else { why.join("; ") }));
    }
    Ok(Checked {
        head: config.name.iter().cloned().chain(out.head).collect(),
        redundant_linearities: out.redundant_linearities,
    })
}

/// A job's input, in a file of its own. lrs is given a file name, not its stdin: lrs copies stdin
/// to `/tmp/lrs_stdin*` (a name fixed by lrslib), which a job killed in its first milliseconds
/// left behind; bts removes its own file however the job ends.
fn input_file(bytes: &[u8]) -> Result<JobFile, String> {
    JobFile::new("bts-lrs-", ".ine", bytes)
        .map_err(|e| format!("cannot write a job's input to {} ({e})", std::env::temp_dir().display()))
}

/// Starts lrs on `input`; its stdin is closed at once.
fn start(exec: &ExecConfig, input: &JobFile, tag: &str) -> std::io::Result<Program> {
    let mut program = Program::spawn_quiet(Command::new(&exec.program).arg(input.path()), tag, exec.max_line)?;
    program.close_stdin();
    Ok(program)
}

/// lrs as given, or on PATH.
fn find_lrs(given: Option<&Path>) -> Result<PathBuf, String> {
    let name = given.map_or_else(|| "lrs".to_string(), |p| p.display().to_string());
    crate::find_program(&name).map_err(|e| {
        let e = e.trim_start_matches("exec: ");
        match given {
            Some(_) => format!("lrs: {e}"),
            // `lrs: not found on PATH`: the name says what it is.
            None => format!("{e}: install the Debian package lrslib (apt-get install lrslib), put lrs on PATH, or give bts run lrs --lrs PATH"),
        }
    })
}

/// Width of the count on the `*****` line of an output file, rewritten when the run is complete.
const COUNT_WIDTH: usize = 12;

impl Searcher for LrsSearcher {
    fn root(&self) -> Result<NodeBytes, String> {
        Ok(NodeBytes::new())
    }

    fn stopping(&self) {
        self.config.exec.flags.stop();
    }

    fn abandon(&self) {
        self.config.exec.flags.abandon();
    }

    fn begin_run(&self) {
        self.config.exec.flags.begin_run();
    }

    fn runner(&self, settings: RunnerSettings) -> Result<Box<dyn JobRunner>, String> {
        let n = self.runners.fetch_add(1, Ordering::SeqCst);
        Ok(Box::new(LrsRunner { config: Arc::clone(&self.config), settings, tag: format!("lrs#{n}") }))
    }

    fn input_digest(&self) -> Option<u32> {
        Some(self.config.digest)
    }

    /// A job finds lrs's first basis before it pivots to its cobasis: about d pivots, each costing
    /// about as much as a basis of the search (a job of C(60, 8), d = 8, costs what some 70 bases
    /// do, most of it the process; of a 301-dimensional prism, what 170 bases do). A first job of
    /// 100 bases there hands back every cobasis around the first one as a job of its own (251 of
    /// them, each a fixed cost for a base or two): 20 bases a dimension make it long enough.
    fn first_budget(&self) -> Option<u64> {
        Some(self.config.dimension.saturating_mul(20).max(100))
    }

    fn runs_elsewhere(&self) -> bool {
        true
    }

    fn counters(&self) -> Option<CounterNames> {
        let names = if self.config.hull { &FACET_COUNTERS[..] } else { &VERTEX_COUNTERS[..] };
        Some(CounterNames { key: "lrs", names: names.to_vec() })
    }

    /// The head lrs prints (name, representation, linearity, `begin`), then the records, then
    /// `end`: an lrs input file once the `*****` of an unknown row count is replaced by the count.
    fn file_frame(&self, records: Option<u64>) -> Option<FileFrame> {
        let mut header = String::new();
        for line in &self.config.head {
            match line.strip_prefix("*****") {
                Some(rest) => {
                    let count = records.map_or_else(|| "*****".to_string(), |n| n.to_string());
                    header += &format!("{count:>COUNT_WIDTH$}{rest}\n");
                }
                None => header += &format!("{line}\n"),
            }
        }
        Some(FileFrame { header, footer: "end\n".into() })
    }
}

/// Runs jobs through lrs, a process each.
struct LrsRunner {
    config: Arc<LrsConfig>,
    settings: RunnerSettings,
    tag: String,
}

impl LrsRunner {
    /// The input with the job's options appended (later options override the file's own).
    fn job_input(&self, job: &Job, cobasis: &str) -> Vec<u8> {
        let c = &self.config;
        let restart = !cobasis.is_empty();
        let mut text = String::from("verbose\n");
        if !self.settings.keep_output {
            // `--count-only`: lrs counts without printing records (a tenth of its time goes into
            // printing them), and the job's outputs come from its `*Totals` line.
            text += "countonly\n";
        }
        if restart {
            let counts = if c.hull { "0 0" } else { "0 0 0" };
            text += &format!("restart {counts} {} {cobasis}\nmindepth {}\n", job.depth, job.depth);
        }
        // lrs's depth limit D generates nodes at depth D without expanding them: bts's limit + 1.
        let mut max_depth = job.max_depth.map(|d| d.saturating_add(1));
        if !job.budget.is_unlimited() {
            // The root counts itself, a restart does not; `maxcobases 0` would mean no limit and
            // `maxcobases 1` on the root returns the root: a budget of 1 is a depth limit instead.
            let count = if restart { job.budget.0.saturating_sub(1) } else { job.budget.0 };
            if count == 0 || (!restart && count == 1) {
                // A cobasis lrs said is at the deepest depth there is (`h=4294967295`) has no depth
                // below it: the limit stays there.
                max_depth = Some(max_depth.unwrap_or(u32::MAX).min(job.depth.saturating_add(1)));
            } else {
                text += &format!("maxcobases {count}\n");
            }
        }
        // The input's own `maxdepth`, if shallower, stays in force (the later line counts).
        if let Some(d) = max_depth.map(|d| c.options.max_depth.map_or(d, |user| d.min(user))) {
            text += &format!("maxdepth {d}\n");
        }
        [&c.input[..], text.as_bytes()].concat()
    }

    /// One attempt at `job`; nothing is added to `batch` unless it succeeds.
    fn attempt(&self, job: &Job, cobasis: &str, batch: &mut ReportBatch) -> Result<(), Failure> {
        let c = &self.config;
        let started = Instant::now();
        let deadline = started + c.exec.job_timeout;
        // Declared before the program, so dropped after it: the file lives as long as lrs.
        let input = input_file(&self.job_input(job, cobasis)).map_err(Failure::start)?;
        let mut program = start(&c.exec, &input, &self.tag)
            .map_err(|e| Failure::start(format!("cannot start {}: {e}", c.exec.program.display())))?;
        let mut out = JobOutput::new(c.name.as_deref());
        loop {
            let Some(next) = next_unless_abandoned(&mut program, deadline, &c.exec) else {
                return Err(Failure::new("the run is over", &program));
            };
            match next {
                Next::Line(l) => {
                    // lrs writes ASCII.
                    let text = String::from_utf8_lossy(&l);
                    out.line(&text).map_err(|e| Failure::with_line(e, &l, &program))?;
                }
                Next::Eof => break,
                Next::TooLong(l) => {
                    let what = format!("a line longer than {} bytes", c.exec.max_line);
                    return Err(Failure::with_line(what, &l, &program));
                }
                Next::Timeout => return Err(Failure::new(timeout_message(&c.exec), &program)),
            }
        }
        // What lrs said on stdout (`Trying to restart from infeasible dictionary`, ...) goes with it.
        let said = |mut failure: Failure| {
            if !out.notes.is_empty() {
                failure.what = format!("{}; lrs printed: {}", failure.what, out.notes.join("; "));
            }
            failure
        };
        exited_successfully(&mut program, deadline, "").map_err(said)?;
        if out.totals.is_none() {
            return Err(said(Failure::new("lrs ended without its *Totals line", &program)));
        }
        // Cobases at the input's own `maxdepth` are printed and not expanded, as plain lrs does:
        // this job has visited them.
        if let Some(user) = c.options.max_depth {
            out.unexplored.retain(|&(depth, _)| depth < user);
        }
        if let Some((depth, _)) = out.unexplored.iter().find(|(d, _)| *d <= job.depth) {
            let what = format!("lrs returned a cobasis at depth {depth}, not below the job's depth {}", job.depth);
            return Err(Failure::new(what, &program));
        }
        static WARNED_128: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        if out.in_128_bits && out.record_count > 0 && !WARNED_128.swap(true, Ordering::Relaxed) {
            tracing::warn!("{}", parse::MISPRINTS_128);
        }
        let returned = out.unexplored.len() as u64;
        let visited = (out.total("bases") + u64::from(!cobasis.is_empty())).saturating_sub(returned);
        if visited == 0 {
            return Err(Failure::new("lrs visited no cobasis, not even the job's own", &program));
        }
        // lrs reports the lineality space of every job; only the root prints it.
        let linearities = if cobasis.is_empty() { out.total("linearities") } else { 0 };
        let counters = if c.hull {
            vec![out.total("facets"), visited, linearities]
        } else {
            vec![out.total("vertices"), out.total("rays"), visited, out.total("integer_vertices"), linearities]
        };
        // The records a job prints: its vertices and rays or its facets, and the lineality
        // space's rows (the root job's).
        let outputs = if self.settings.keep_output {
            out.record_count
        } else if c.hull {
            out.total("facets") + linearities
        } else {
            out.total("vertices") + out.total("rays") + linearities
        };
        let output_bytes = if self.settings.keep_output {
            batch.output.extend_from_slice(out.records.as_bytes());
            out.records.len() as u64
        } else {
            0
        };
        batch.returned.extend(
            out.unexplored
                .iter()
                .map(|(depth, cobasis)| Returned { depth: *depth, node: NodeBytes::from_slice(cobasis.as_bytes()) }),
        );
        batch.reports.push(JobReport {
            id: job.id,
            visited,
            leaves: None,
            max_depth: None,
            outputs,
            returned: returned as u32,
            output_bytes,
            elapsed_ns: started.elapsed().as_nanos() as u64,
            counters,
            pruned: 0,
        });
        Ok(())
    }
}

impl JobRunner for LrsRunner {
    fn run(&mut self, job: &Job, batch: &mut ReportBatch) -> Result<(), JobFailure> {
        let cobasis = String::from_utf8_lossy(job.node.as_slice()).into_owned();
        let config = &self.config.exec;
        with_retries(job, &cobasis, (&self.tag, self.settings.detached), config, || {
            self.attempt(job, &cobasis, batch).map_err(|mut f| {
                if let Some(short) = tmp_shortage() {
                    f.what = format!("{}; {short}", f.what);
                }
                f
            })
        })
    }
}

/// What lrs may have failed of when /tmp is (nearly) full: lrs 7.1 writes its restart files in
/// /tmp whatever TMPDIR says, and then misreads its own input (`*no begin line`) or crashes.
fn tmp_shortage() -> Option<String> {
    // SAFETY: statvfs fills the struct it is given, from a NUL-terminated path.
    let fs = unsafe {
        let mut fs: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(c"/tmp".as_ptr(), &mut fs) != 0 {
            return None;
        }
        fs
    };
    let (bytes, files) = (fs.f_bavail as u64 * fs.f_frsize as u64, fs.f_favail as u64);
    full(fs.f_blocks as u64, bytes, fs.f_files as u64, files).then(|| {
        format!(
            "/tmp is full ({} KiB and {files} files free), where lrs 7.1 writes its restart files whatever TMPDIR says",
            bytes >> 10
        )
    })
}

/// Whether a file system of `blocks` and `files` in all, with `bytes` and `files_free` left, is
/// too full for lrs's restart files. One of no fixed size or number of files (ramfs; btrfs's
/// files) says 0 of them.
fn full(blocks: u64, bytes: u64, files: u64, files_free: u64) -> bool {
    (blocks > 0 && bytes < 64 << 10) || (files > 0 && files_free == 0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_file_system_is_full_when_room_or_files_run_out_not_when_it_has_no_limits() {
        use super::full;
        assert!(full(1000, 10 << 10, 100, 50));
        assert!(full(1000, 1 << 30, 100, 0));
        assert!(!full(1000, 1 << 30, 100, 50));
        // ramfs: no size and no files in all; btrfs: no count of files.
        assert!(!full(0, 0, 0, 0));
        assert!(!full(1000, 1 << 30, 0, 0));
    }

    use super::*;
    use bts_protocol::{Budget, JobId};

    fn runner() -> LrsRunner {
        let exec = ExecConfig {
            program: PathBuf::from("lrs"),
            args: Vec::new(),
            persistent: false,
            root: String::new(),
            retries: 0,
            job_timeout: Duration::from_secs(1),
            max_line: crate::MAX_LINE,
            optimise: false,
            flags: Default::default(),
        };
        let input = b"cube\nH-representation\nbegin\n2 2 rational\n1 1\n1 -1\nend\n".to_vec();
        let config = LrsConfig {
            exec,
            input,
            hull: false,
            name: Some("cube".into()),
            head: Vec::new(),
            options: InputOptions::default(),
            dimension: 1,
            digest: 0,
        };
        LrsRunner { config: Arc::new(config), settings: RunnerSettings::default(), tag: "lrs#0".into() }
    }

    fn job(depth: u32, budget: u64) -> Job {
        Job {
            id: JobId(1),
            depth,
            budget: Budget(budget),
            max_depth: None,
            node: NodeBytes::new(),
            incumbent: Default::default(),
        }
    }

    /// The depth of a cobasis comes from what lrs prints (`h=<depth>`), the deepest one included:
    /// its job's options are written, not overflowed.
    #[test]
    fn a_job_at_the_deepest_depth_gets_its_options() {
        let text = |depth, budget| String::from_utf8(runner().job_input(&job(depth, budget), "1 2")).unwrap();
        assert!(text(3, 1).ends_with("restart 0 0 0 3 1 2\nmindepth 3\nmaxdepth 4\n"), "{}", text(3, 1));
        assert!(text(3, 5).ends_with("mindepth 3\nmaxcobases 4\n"), "{}", text(3, 5));
        let deepest = text(u32::MAX, 1);
        assert!(deepest.ends_with(&format!("mindepth {0}\nmaxdepth {0}\n", u32::MAX)), "{deepest}");
        // A budget of none (which no master gives) is a budget of one.
        assert!(text(3, 0).ends_with("maxdepth 4\n"), "{}", text(3, 0));
    }
}
