//! Running jobs through a program: the persistent mode (one long-lived process per worker thread)
//! and the one-shot mode (a process per job), with retries on fresh processes.

use crate::ExecConfig;
use crate::lines::{self, Line};
use crate::process::{Next, Program, describe};
use bts_protocol::{Incumbent, Job, JobFailure, JobReport, NodeBytes, ReportBatch, Returned, Solution};
use bts_worker::{JobRunner, RunnerSettings, SharedIncumbent};
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often a job waiting for its program's answer looks whether the program is still there.
const EXIT_CHECK: Duration = Duration::from_millis(100);

/// Why an attempt at a job failed.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) what: String,
    /// The line that broke the protocol, if one did.
    line: Option<String>,
    stderr: String,
    /// A fresh process cannot mend it: the run must stop.
    beyond_retry: bool,
    /// A persistent process that had answered a job ended cleanly before it said anything of
    /// the next: it exits after `done`, and is started again without counting a failure.
    between_jobs: bool,
    /// The program could not be started (too many processes or open files, a full disk).
    before_start: bool,
}

impl Failure {
    /// A failure before the program could run.
    pub(crate) fn start(what: String) -> Self {
        Self { what, line: None, stderr: String::new(), beyond_retry: false, between_jobs: false, before_start: true }
    }

    pub(crate) fn new(what: impl Into<String>, program: &Program) -> Self {
        Self {
            what: what.into(),
            line: None,
            stderr: program.stderr_tail(),
            beyond_retry: false,
            between_jobs: false,
            before_start: false,
        }
    }

    pub(crate) fn with_line(what: impl Into<String>, line: &[u8], program: &Program) -> Self {
        Self { line: Some(quote_line(line, 200)), ..Self::new(what, program) }
    }

    /// What went wrong and the offending line, then `tries` (how many attempts), then the
    /// program's stderr.
    fn message(&self, tries: &str) -> String {
        let mut m = self.what.clone();
        if let Some(l) = &self.line {
            m += &format!("; the offending line: {l}");
        }
        m += &format!(" ({tries})");
        if self.before_start {
            // No program ran: there is no stderr to speak of.
        } else if self.stderr.is_empty() {
            m += "; the program wrote nothing to stderr";
        } else {
            m += &format!("; the end of the program's stderr:\n{}", self.stderr);
        }
        m
    }
}

/// A program's line quoted for a message, its first `max` characters: control characters escaped
/// as Rust writes them, and bytes that are not UTF-8 as `\xNN` (the replacement character hid them).
fn quote_line(line: &[u8], max: usize) -> String {
    let mut out = String::from("\"");
    let pieces = line.utf8_chunks().flat_map(|chunk| {
        let valid = chunk.valid().chars().map(|c| match c {
            '\'' => "'".to_string(),
            c => c.escape_debug().to_string(),
        });
        valid.chain(chunk.invalid().iter().map(|b| format!("\\x{b:02x}")))
    });
    for (i, piece) in pieces.enumerate() {
        if i == max {
            out.push_str("...");
            break;
        }
        out.push_str(&piece);
    }
    out.push('"');
    out
}

fn shorten(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let cut = (0..=max).rev().find(|&i| s.is_char_boundary(i)).unwrap_or(0);
    format!("{}...", &s[..cut])
}

/// Runs jobs through the program of an `exec` tree.
pub struct ExecRunner {
    config: Arc<ExecConfig>,
    settings: RunnerSettings,
    /// Names this runner's processes in the log.
    tag: String,
    /// The persistent process, when one is running.
    program: Option<Program>,
    /// Jobs given to the persistent process (a `done` that says `job=<n>` must match).
    jobs_given: u64,
    /// The node of the last job done, which a line written after its `done` belongs to.
    last_node: String,
    /// Something a one-shot program started escaped its process group (said once).
    escaped: bool,
    /// The persistent program numbers its answers (`done ... job=<n>`), so that each is checked
    /// against its job.
    numbered: bool,
    /// The incumbent of a branch and bound, shared with the process's other runners.
    incumbent: Arc<SharedIncumbent>,
}

impl ExecRunner {
    pub fn new(
        config: Arc<ExecConfig>,
        settings: RunnerSettings,
        tag: String,
        incumbent: Arc<SharedIncumbent>,
    ) -> Result<Self, String> {
        let mut runner = Self {
            config,
            settings,
            tag,
            program: None,
            jobs_given: 0,
            last_node: String::new(),
            escaped: false,
            numbered: false,
            incumbent,
        };
        if runner.config.persistent {
            // Start at once, so that a program that cannot start is noticed before the run.
            runner.program = Some(runner.start(None)?);
        }
        Ok(runner)
    }

    /// Starts the program; in one-shot mode with the job in its environment and arguments (the
    /// node byte for byte).
    fn start(&mut self, job: Option<&Job>) -> Result<Program, String> {
        let c = &self.config;
        let mut command = Command::new(&c.program);
        match job {
            Some(job) => {
                let node = std::ffi::OsStr::from_bytes(job.node.as_slice());
                let budget = lines::budget_text(job.budget);
                let max_depth = lines::max_depth_text(job.max_depth);
                let depth = job.depth.to_string();
                let least = lines::least_text(job.incumbent);
                let fill = |arg: &String| {
                    let mut arg =
                        arg.replace("{depth}", &depth).replace("{budget}", &budget).replace("{max_depth}", &max_depth);
                    if c.optimise {
                        arg = arg.replace("{least}", &least);
                    }
                    let mut parts = arg.split("{node}");
                    let mut filled = OsString::from(parts.next().unwrap_or_default());
                    for part in parts {
                        filled.push(node);
                        filled.push(part);
                    }
                    filled
                };
                command.args(c.args.iter().map(fill));
                command.env("BTS_NODE", node).env("BTS_DEPTH", &depth);
                command.env("BTS_BUDGET", &budget).env("BTS_MAX_DEPTH", &max_depth);
                if c.optimise {
                    command.env("BTS_LEAST", &least);
                }
            }
            None => {
                command.args(&c.args);
                self.jobs_given = 0;
            }
        }
        // The progress estimate's probes run the program on nodes the run searches too: their
        // stderr would say everything twice.
        let spawn = if self.settings.detached { Program::spawn_quiet } else { Program::spawn };
        let mut program = spawn(&mut command, &self.tag, c.max_line)
            .map_err(|e| format!("cannot start {}: {e}", c.program.display()))?;
        if !c.persistent {
            // A one-shot program must exit 0 after `done`: a `done` without its newline is whole.
            program.last_line_may_lack_newline();
            // Its job is in its arguments and environment: its input is empty.
            program.close_stdin();
        }
        Ok(program)
    }

    /// A persistent program ended after its last `done`: its answers count, and a fresh process
    /// takes the next job; one that ended with a failing status is warned of.
    fn ended_after_done(&self, status: Option<std::process::ExitStatus>) {
        if status.is_some_and(|s| s.success()) {
            return;
        }
        tracing::warn!(
            worker = %self.tag,
            "the program ended ({}) after its `done` of the job at node {:?}; a fresh process takes the next job",
            describe(status),
            self.last_node
        );
    }

    /// One attempt at `job`; on failure the batch is left as it was.
    fn attempt(&mut self, job: &Job, batch: &mut ReportBatch) -> Result<(), Failure> {
        let started = Instant::now();
        // A branch and bound's job carries the best value this process knows.
        let job = &Job { incumbent: self.known(job.incumbent), ..job.clone() };
        let deadline = started + self.config.job_timeout;
        let mut program = match self.program.take() {
            Some(p) => p,
            None => self.start((!self.config.persistent).then_some(job)).map_err(Failure::start)?,
        };
        if self.config.persistent {
            // What a fresh process writes before its first job is read as part of that job's
            // answer (a `log` line as it starts up), whenever the job line gets there.
            if self.jobs_given > 0 && program.has_pending() {
                let late = match program.next(Instant::now() + Duration::from_millis(100)) {
                    Next::Line(l) | Next::TooLong(l) => Some(l),
                    // A line cut short, or nothing: the program ended.
                    Next::Timeout | Next::Eof => Some(program.unread()).filter(|u| !u.is_empty()),
                };
                match late {
                    // A program that numbers its answers had each one checked: what it wrote
                    // since is no answer of a job, and a fresh process starts clean.
                    Some(late) if !self.numbered => {
                        let what = format!(
                            "the program wrote after its `done` of the job at node {:?}: it may have answered a job \
                             twice, and the second answer may have been taken for the next job's, whose nodes would be \
                             lost; the run cannot be trusted to be exact. Make it write nothing after `done`, or \
                             number its answers (`done ... job=<n>`)",
                            self.last_node
                        );
                        return Err(Failure { beyond_retry: true, ..Failure::with_line(what, &late, &program) });
                    }
                    Some(_) => tracing::warn!(worker = %self.tag, "the program wrote after its last `done`"),
                    // It ended after its last `done`: a failure, unless it exited 0, that its
                    // answers outlive (a fresh process takes this job).
                    None => self.ended_after_done(program.wait(Duration::from_millis(100))),
                }
                program = self.start(None).map_err(Failure::start)?;
            }
            if let Err(e) = program.send(&lines::job_line(job, self.config.optimise), deadline) {
                if e.kind() == std::io::ErrorKind::TimedOut {
                    let what = format!("{} (it did not read its job line)", timeout_message(&self.config));
                    return Err(Failure::new(what, &program));
                }
                let status = program.wait(Duration::from_millis(100));
                if self.jobs_given > 0 && status.is_some() {
                    // It ended after its last `done`, just as this job came.
                    self.ended_after_done(status);
                    return self.attempt(job, batch);
                }
                let what = match status {
                    Some(_) if self.jobs_given > 0 => format!(
                        "the program ended ({}) after its answer to the last job, before it read this one",
                        describe(status)
                    ),
                    _ => format!("cannot give the job to the program ({e}; {})", describe(status)),
                };
                return Err(Failure::new(what, &program));
            }
            self.jobs_given += 1;
        }
        let (returned_before, output_before) = (batch.returned.len(), batch.output.len());
        let solutions_before = batch.solutions.len();
        let result = self.read_job(&mut program, job, deadline, batch);
        let result = result.and_then(|done| match self.config.persistent {
            true => Ok(done),
            false => self.one_shot_end(&mut program, deadline).map(|()| done),
        });
        match result {
            Ok((visited, leaves, max_depth, outputs, pruned)) => {
                if self.config.persistent {
                    self.program = Some(program);
                }
                // The job's solutions go with its report (see `bts_worker::SharedIncumbent` for why
                // that suffices); only now may the process's other jobs prune with them: a failed
                // attempt's would prune its own retry.
                for s in &batch.solutions[solutions_before..] {
                    self.incumbent.raise(Incumbent { value: s.value, ..job.incumbent });
                }
                batch.reports.push(JobReport {
                    id: job.id,
                    visited,
                    leaves,
                    max_depth,
                    outputs,
                    returned: (batch.returned.len() - returned_before) as u32,
                    output_bytes: (batch.output.len() - output_before) as u64,
                    elapsed_ns: started.elapsed().as_nanos() as u64,
                    counters: Vec::new(),
                    pruned,
                });
                Ok(())
            }
            Err(f) => {
                program.kill();
                batch.returned.truncate(returned_before);
                batch.output.truncate(output_before);
                batch.solutions.truncate(solutions_before);
                if f.between_jobs {
                    // On a fresh process, which is given this job first: no second free start.
                    tracing::debug!(worker = %self.tag, "the program exited after its last `done`; starting it again");
                    return self.attempt(job, batch);
                }
                Err(f)
            }
        }
    }

    /// A one-shot program ends after `done`: it exits successfully without saying more. Then its
    /// process group is killed, so that nothing it started in the background lingers (or keeps its
    /// stdout open, which would hold every job until its timeout).
    fn one_shot_end(&mut self, program: &mut Program, deadline: Instant) -> Result<(), Failure> {
        let lingers = || format!("{}: the program said `done` but did not exit", timeout_message(&self.config));
        loop {
            let look = deadline.min(Instant::now() + Duration::from_millis(5));
            match program.next(look) {
                Next::Line(l) => return Err(Failure::with_line("a line after `done`", &l, program)),
                Next::TooLong(l) => return Err(Failure::with_line("a line after `done`", &l, program)),
                Next::Eof => break,
                Next::Timeout if program.exited() => break,
                Next::Timeout if self.config.flags.abandoned() => return Err(Failure::new("the run is over", program)),
                Next::Timeout if Instant::now() >= deadline => return Err(Failure::new(lingers(), program)),
                Next::Timeout => {}
            }
        }
        // It may close stdout a little before it exits.
        if !program.exited_by(deadline) {
            return Err(Failure::new(lingers(), program));
        }
        // What it wrote just before it exited.
        match program.next(Instant::now()) {
            Next::Line(l) => return Err(Failure::with_line("a line after `done`", &l, program)),
            Next::TooLong(l) => return Err(Failure::with_line("a line after `done`", &l, program)),
            Next::Eof | Next::Timeout => {}
        }
        let status = program.kill();
        if !status.is_some_and(|s| s.success()) {
            let what = format!("the program ended ({}) after `done`", describe(status));
            return Err(Failure::new(what, program));
        }
        if program.stdout_held_open(Duration::from_millis(50)) && !std::mem::replace(&mut self.escaped, true) {
            tracing::warn!(
                worker = %self.tag,
                "a process the program started left its process group (setsid?) and keeps its stdout open: bts \
                 cannot stop it, and it may outlive the run"
            );
        }
        Ok(())
    }

    /// The incumbent a job must beat: the master's when it handed the job out, or better.
    fn known(&self, master: Incumbent) -> Incumbent {
        self.incumbent.raise(master);
        Incumbent { value: self.incumbent.value(), ..master }
    }

    /// Reads the program's answer to `job` up to its `done`: (visited, leaves, max_depth, outputs,
    /// pruned); its solutions go to the batch.
    #[allow(clippy::type_complexity)]
    fn read_job(
        &mut self,
        program: &mut Program,
        job: &Job,
        deadline: Instant,
        batch: &mut ReportBatch,
    ) -> Result<(u64, Option<u64>, Option<u32>, u64, u64), Failure> {
        let mut outputs = 0u64;
        let output_before = batch.output.len();
        let (returned_before, solutions_before) = (batch.returned.len(), batch.solutions.len());
        // What the job's nodes and solutions cost bts's memory, beyond their text.
        let (mut returned_bytes, mut solution_bytes) = (0usize, 0usize);
        let mut reported_solutions = false;
        // The program exited without its `done`, and what it started in the background was killed.
        let mut ended = false;
        // The program wrote something for this job.
        let mut heard = false;
        let limit = self.settings.answer_limit;
        loop {
            if batch.output.len() - output_before + returned_bytes + solution_bytes > limit {
                let why = match limit < bts_worker::MAX_JOB_ANSWER {
                    true => "a remote worker sends a job's answer in one frame",
                    false => "bts holds a job's answer in memory until then",
                };
                let what = format!(
                    "the job wrote more than {} MiB of records, nodes and solutions before its `done` ({why}): give \
                     jobs smaller budgets",
                    limit >> 20
                );
                return Err(Failure::new(what, program));
            }
            // Looks now and then whether the program is still there: something it started in the
            // background may hold its stdout open after it died, and the job would wait for that.
            let line = match program.next(deadline.min(Instant::now() + EXIT_CHECK)) {
                Next::Line(l) => l,
                Next::TooLong(start) => {
                    let what = format!("a line longer than {} bytes", self.config.max_line);
                    return Err(Failure::with_line(what, &start, program));
                }
                Next::Eof => {
                    let status = program.wait(Duration::from_millis(500));
                    // A persistent process that said nothing of this job may have ended after its
                    // last `done`, before it read this job.
                    let after_last = self.config.persistent && self.jobs_given > 1 && !heard;
                    let what = match status {
                        None => "the program closed its stdout before `done` (it is still running)".to_string(),
                        Some(_) => format!("the program ended before `done` ({})", describe(status)),
                    };
                    // Either way the job goes to a fresh process at once, as its first (a crash on
                    // this job fails there, counted): a program that ends after its `done` with a
                    // failing status loses nothing, and is warned of.
                    let between_jobs = after_last && status.is_some();
                    if between_jobs {
                        self.ended_after_done(status);
                    }
                    return Err(Failure { between_jobs, ..Failure::new(what, program) });
                }
                Next::Timeout if self.config.flags.abandoned() => {
                    return Err(Failure::new("the run is over", program));
                }
                Next::Timeout if Instant::now() < deadline => {
                    if program.exited() {
                        if ended {
                            let status = describe(program.wait(Duration::ZERO));
                            let what = format!(
                                "the program ended before `done` ({status}), and something it started still holds its \
                                 stdout open (a process that left its process group with setsid?)"
                            );
                            return Err(Failure::new(what, program));
                        }
                        // What it wrote is in the pipe; the rest of its group is killed, so that
                        // the pipe ends once that is read.
                        program.kill_background();
                        ended = true;
                    }
                    continue;
                }
                Next::Timeout => {
                    // What bts knows of why: a line still waiting for its newline, or nothing at all.
                    let unread = program.unread();
                    let what = if !unread.is_empty() {
                        format!(
                            "{}; the program wrote a line without its newline, which bts cannot take yet: {:?}",
                            timeout_message(&self.config),
                            String::from_utf8_lossy(&unread)
                        )
                    } else if !heard {
                        format!(
                            "{}; the program wrote nothing for this job (does it flush its output? many languages \
                             buffer what they write to a pipe)",
                            timeout_message(&self.config)
                        )
                    } else {
                        timeout_message(&self.config)
                    };
                    return Err(Failure::new(what, program));
                }
            };
            heard = true;
            match lines::parse(&line) {
                Some(Line::Out(_)) if self.config.optimise => {
                    let what = "an `out` line in a branch and bound, whose records are its best solutions \
                                (report each with `solution <value> <record>`)";
                    return Err(Failure::with_line(what, &line, program));
                }
                Some(Line::Out(text)) => {
                    outputs += 1;
                    if self.settings.keep_output {
                        batch.output.extend_from_slice(text);
                        batch.output.push(b'\n');
                    }
                }
                Some(Line::Unexplored { depth, node }) => {
                    if depth <= job.depth {
                        let what = format!("a node returned at depth {depth}, not below the job's depth {}", job.depth);
                        return Err(Failure::with_line(what, &line, program));
                    }
                    if !self.config.persistent
                        && let Some(why) = unpassable(node, &self.config.args)
                    {
                        let what = format!("a node that a one-shot program cannot be given: {why}; use --persistent");
                        return Err(Failure { beyond_retry: true, ..Failure::with_line(what, &line, program) });
                    }
                    // What a node costs bts's memory, not only its text: empty nodes are no free.
                    returned_bytes += node.len() + std::mem::size_of::<Returned>();
                    batch.returned.push(Returned { depth, node: NodeBytes::from_slice(node) });
                }
                Some(Line::Log(text)) => tracing::info!(worker = %self.tag, "{}", String::from_utf8_lossy(text)),
                Some(Line::Solution { value, record }) if self.config.optimise => {
                    reported_solutions = true;
                    // Only what the master could keep is held: the job's best solution, or all of
                    // its best value when ties are kept, and none below the job's least value (a
                    // program that reports every tie of its own best, or every improvement along
                    // a descent, needs no memory for them).
                    let best = batch.solutions[solutions_before..].first().map(|s| s.value);
                    let keep_ties = job.incumbent.keep_ties;
                    let worth = value >= lines::least(job.incumbent)
                        && best.is_none_or(|b| value > b || (value == b && keep_ties));
                    if worth {
                        if best.is_some_and(|b| value > b) {
                            batch.solutions.truncate(solutions_before);
                            solution_bytes = 0;
                        }
                        solution_bytes += record.len() + std::mem::size_of::<Solution>();
                        batch.solutions.push(Solution { value, record: record.to_vec() });
                    }
                }
                Some(Line::Done { visited, leaves, max_depth, job: said, pruned }) => {
                    self.numbered |= said.is_some();
                    // A program that numbers its answers has each checked against its job: a late
                    // or repeated `done` cannot answer the next job.
                    let given = if self.config.persistent { self.jobs_given } else { 1 };
                    if let Some(n) = said.filter(|&n| n != given) {
                        let what = format!("a `done` for job {n}, but this is job {given} of the process");
                        return Err(Failure::with_line(what, &line, program));
                    }
                    // Budgets are soft: a program may visit more than its budget, and says so. A
                    // branch and bound may prune the job's own node (`done 0 pruned=1`).
                    let pruned = pruned.unwrap_or(0);
                    if pruned > 0 && !self.config.optimise {
                        let what = "`pruned=` in a plain enumeration, which prunes nothing (a branch and bound needs \
                                    --optimise)";
                        return Err(Failure::with_line(what, &line, program));
                    }
                    if visited == 0 && pruned == 0 {
                        let what = "`done 0`: the job's own node was not visited, and would be lost";
                        return Err(Failure::with_line(what, &line, program));
                    }
                    let answered = outputs > 0 || batch.returned.len() > returned_before || reported_solutions;
                    if visited == 0 && answered {
                        let what = "`done 0` after records, nodes or solutions: a job whose own node was pruned \
                                    has nothing below it";
                        return Err(Failure::with_line(what, &line, program));
                    }
                    if leaves.is_some_and(|l| l > visited) {
                        return Err(Failure::with_line("more leaves than visited nodes", &line, program));
                    }
                    if max_depth.is_some_and(|d| d < job.depth && visited > 0) {
                        let what = format!("a deepest depth above the job's own node, at depth {}", job.depth);
                        return Err(Failure::with_line(what, &line, program));
                    }
                    return Ok((visited, leaves, max_depth, outputs, pruned));
                }
                Some(Line::Solution { .. }) => {
                    let what = "a `solution` line in a plain enumeration (a branch and bound needs --optimise)";
                    return Err(Failure::with_line(what, &line, program));
                }
                None => {
                    let what = match lines::expected_form(&line, self.config.optimise) {
                        Some(form) => format!("not a line of the protocol: not {form}"),
                        None => "not a line of the protocol".to_string(),
                    };
                    return Err(Failure::with_line(what, &line, program));
                }
            }
        }
    }
}

impl JobRunner for ExecRunner {
    fn run(&mut self, job: &Job, batch: &mut ReportBatch) -> Result<(), JobFailure> {
        let node = String::from_utf8_lossy(job.node.as_slice()).into_owned();
        let (tag, config) = (self.tag.clone(), Arc::clone(&self.config));
        with_retries(job, &node, (&tag, self.settings.detached), &config, || self.attempt(job, batch))?;
        self.last_node = node;
        Ok(())
    }
}

/// The longest string Linux passes to a program (an argument, or an environment entry), without
/// its NUL.
const MAX_STRING: usize = 128 * 1024 - 1;

/// Why `node` cannot reach a one-shot program, which gets it in its environment (`BTS_NODE=<node>`)
/// and in every argument of `args` that says `{node}`.
pub(crate) fn unpassable(node: &[u8], args: &[String]) -> Option<String> {
    if node.contains(&0) {
        return Some("it holds a NUL byte".into());
    }
    // Each string at its longest: the node for each `{node}`, 20 characters for each other field.
    let filled = |arg: &String| {
        let fields: usize =
            ["{depth}", "{budget}", "{max_depth}", "{least}"].iter().map(|f| arg.matches(f).count()).sum();
        arg.len() - arg.matches("{node}").count() * "{node}".len()
            + arg.matches("{node}").count() * node.len()
            + fields * 20
    };
    let environment = ("BTS_NODE=".len() + node.len(), "the environment string BTS_NODE=<node>".to_string());
    let arguments = args.iter().filter(|a| a.contains("{node}")).map(|a| (filled(a), format!("the argument {a:?}")));
    let (longest, string) = arguments.fold(environment, |a, b| if b.0 > a.0 { b } else { a });
    (longest > MAX_STRING).then(|| {
        format!(
            "its {} bytes make {string} {longest} bytes long, more than the system passes to a program in one \
             string ({MAX_STRING} bytes)",
            node.len()
        )
    })
}

/// The program's next output, as [`Program::next`] gives it by `deadline`, looking every
/// [`EXIT_CHECK`] whether the run is over; `None` if it is: the job is given up.
pub(crate) fn next_unless_abandoned(program: &mut Program, deadline: Instant, config: &ExecConfig) -> Option<Next> {
    loop {
        match program.next(deadline.min(Instant::now() + EXIT_CHECK)) {
            Next::Timeout if config.flags.abandoned() => return None,
            Next::Timeout if Instant::now() < deadline => {}
            next => return Some(next),
        }
    }
}

pub(crate) fn timeout_message(config: &ExecConfig) -> String {
    format!("the job took longer than --job-timeout {} s", config.job_timeout.as_secs_f64())
}

/// Waits for a program whose stdout has closed to exit, and fails unless it exits with status 0.
pub(crate) fn exited_successfully(program: &mut Program, deadline: Instant, when: &str) -> Result<(), Failure> {
    match program.wait(deadline.saturating_duration_since(Instant::now())) {
        Some(s) if s.success() => Ok(()),
        status => {
            let what = format!("the program ended ({}) {when}", describe(status));
            Err(Failure::new(what.trim_end(), program))
        }
    }
}

/// Tries `attempt` up to `retries` more times after a failure (each attempt on a fresh process);
/// the last failure, with its attempts counted, fails the job. A `detached` runner's jobs (the
/// progress estimate's probes) are no jobs of the run: their retries are not warned of.
pub(crate) fn with_retries(
    job: &Job,
    node: &str,
    (tag, detached): (&str, bool),
    config: &ExecConfig,
    mut attempt: impl FnMut() -> Result<(), Failure>,
) -> Result<(), JobFailure> {
    let retries = config.retries;
    let stopping = || config.flags.stopping();
    let mut attempts = 0;
    // A node may be long: messages show its start.
    let node = shorten(&format!("{node:?}"), 200);
    loop {
        match attempt() {
            Ok(()) => return Ok(()),
            // bts killed its programs as it exits, or the run is over: nothing failed, and nobody
            // waits for the job.
            Err(f) if crate::process::exiting() || config.flags.abandoned() => {
                return Err(JobFailure { id: job.id, node, message: f.what, given_up: true });
            }
            Err(f) if attempts < retries && !f.beyond_retry && !stopping() => {
                attempts += 1;
                let pause = retry_pause(&f, attempts);
                let again =
                    format!("trying again on a fresh process in {} s ({attempts} of {retries})", pause.as_secs_f64());
                match detached {
                    true => tracing::debug!(worker = %tag, "a probe at node {node} failed ({}); {again}", f.what),
                    false => tracing::warn!(worker = %tag, "the job at node {node} failed ({}); {again}", f.what),
                }
                let until = std::time::Instant::now() + pause;
                while let Some(left) = until.checked_duration_since(std::time::Instant::now()).filter(|_| !stopping()) {
                    std::thread::sleep(left.min(std::time::Duration::from_millis(20)));
                }
                if stopping() {
                    return Err(given_up(job, node, &f, attempts));
                }
            }
            Err(f) if attempts < retries && !f.beyond_retry => return Err(given_up(job, node, &f, attempts + 1)),
            Err(f) => {
                let message = f.message(&after(attempts + 1, ""));
                return Err(JobFailure { id: job.id, node, message, given_up: false });
            }
        }
    }
}

/// A job given up after `tries` attempts only because the run or its worker stops: it goes back
/// to the list.
fn given_up(job: &Job, node: String, f: &Failure, tries: u32) -> JobFailure {
    let message = f.message(&after(tries, ", not tried again as the run or its worker stops"));
    JobFailure { id: job.id, node, message, given_up: true }
}

/// "after N attempts", and why no more were made.
fn after(tries: u32, why: &str) -> String {
    format!("after {tries} attempt{}{why}", if tries > 1 { "s" } else { "" })
}

/// The pause before the `n`th retry of a failure, doubling each time: a program that could not
/// start met a shortage (of processes, open files, disk) that may pass within seconds; one that
/// failed may have met one too (a full /tmp), or fails each time, which a moment does not hold up.
fn retry_pause(f: &Failure, n: u32) -> std::time::Duration {
    let first = if f.before_start { std::time::Duration::from_secs(1) } else { std::time::Duration::from_millis(100) };
    first.saturating_mul(1 << (n - 1).min(5))
}

#[cfg(test)]
mod tests {
    use super::quote_line;

    /// An offending line is shown as it was: bytes that are not UTF-8 as `\xNN`, control
    /// characters escaped, long lines cut.
    #[test]
    fn offending_lines_are_quoted_byte_for_byte() {
        assert_eq!(quote_line(b"hello bts", 200), r#""hello bts""#);
        assert_eq!(quote_line(b"DONE\xe05", 200), r#""DONE\xe05""#);
        assert_eq!(quote_line("done\t5 \"é\" it's\r".as_bytes(), 200), r#""done\t5 \"é\" it's\r""#);
        assert_eq!(quote_line(&[b'x'; 300], 3), r#""xxx...""#);
    }
}
