//! Command-line options as clap parses them. They are only checked here; `cli::run` turns them
//! into the run's configuration.

use bts_checkpoints::{MAX_SECONDS, usable_seconds};
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Parser)]
#[command(name = "bts", version, about = "Budgeted tree search: enumerate huge implicit trees in parallel")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Enumerate a tree: bts run [RUN-OPTIONS] <TREE> [TREE-OPTIONS]
    #[command(disable_help_flag = true)]
    Run {
        /// Run options, the tree's name and the tree's options (run options may follow the tree's).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Carry on a run from its checkpoint: bts resume <CHECKPOINT> [RUN-OPTIONS]
    #[command(disable_help_flag = true)]
    Resume {
        /// The checkpoint, then run options that change the stored ones.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Work for a master elsewhere: bts worker (--connect HOST:PORT | --connect-file F)
    Worker(WorkerArgs),
    /// Estimate a tree's size by random probes: bts estimate [--probes K] [--json] <TREE> [TREE-OPTIONS]
    #[command(disable_help_flag = true)]
    Estimate {
        /// Estimate options, the tree's name and the tree's options.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Draw the job list, the busy workers and the budget over time, from a --hist file.
    Plot {
        /// The history of a run (bts run --hist FILE).
        hist: PathBuf,
        /// The picture: a file ending in .svg or .png.
        #[arg(short = 'o', long = "output", value_name = "OUT")]
        output: PathBuf,
    },
    /// Print what a checkpoint holds, as JSON.
    Inspect {
        /// The checkpoint file.
        checkpoint: PathBuf,
    },
    /// List the trees this program knows: the built-in ones and any it registers.
    Trees,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    Budget,
    Polling,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SplitArg {
    Alternate,
    Bottom,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum StartArg {
    Selective,
    Plain,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OrderArg {
    Lifo,
    Fifo,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Progress {
    Auto,
    Always,
    Never,
}

/// The options of `bts run` (and later `bts resume`).
#[derive(Debug, Parser)]
#[command(
    name = "bts run",
    no_binary_name = true,
    about = "Enumerate a tree: bts run [RUN-OPTIONS] <TREE> [TREE-OPTIONS]",
    override_usage = "bts run [RUN-OPTIONS] <TREE> [TREE-OPTIONS] [RUN-OPTIONS]",
    allow_negative_numbers = true
)]
pub struct RunArgs {
    #[command(flatten)]
    pub workers: LocalWorkerArgs,
    #[command(flatten)]
    pub remote: RemoteArgs,
    #[command(flatten)]
    pub budget: BudgetArgs,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub stopping: StopArgs,
    /// More log output (-v: info, -vv: debug)
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Less log output (errors only)
    #[arg(short = 'q', long = "quiet", conflicts_with = "verbose")]
    pub quiet: bool,
}

#[derive(Debug, Args)]
#[command(next_help_heading = "Workers")]
pub struct LocalWorkerArgs {
    /// Local worker threads; 0 with --listen: remote workers only [default: the number of cores]
    #[arg(long, value_name = "N", allow_hyphen_values = true, value_parser = parse_workers)]
    pub workers: Option<usize>,
    /// How work is shared: budget (a master's job list of budgeted jobs) or polling (workers
    /// steal from each other) [default: budget]
    #[arg(long, value_enum)]
    pub mode: Option<Mode>,
    /// Polling: what a busy worker gives a thief: alternate (every other waiting node from the
    /// bottom, about half of each level) or bottom (its shallowest node) [default: alternate]
    #[arg(long, value_enum, value_name = "RULE")]
    pub split: Option<SplitArg>,
    /// Polling: how a new run starts: selective (every worker splits the root by the bits of its
    /// index) or plain (one worker takes the root) [default: selective]
    #[arg(long, value_enum, value_name = "HOW")]
    pub start: Option<StartArg>,
}

#[derive(Debug, Args)]
#[command(next_help_heading = "Remote workers")]
pub struct RemoteArgs {
    /// Accept remote workers (bts worker) on ADDR during the whole run, such as 127.0.0.1:7000, or
    /// 0.0.0.0:0 for any free port on every interface (beyond loopback this needs --token-file)
    #[arg(long, value_name = "ADDR", value_parser = parse_host_port)]
    pub listen: Option<String>,
    /// Write the bound address to F, for bts worker --connect-file and launchers
    #[arg(long, value_name = "F")]
    pub address_file: Option<PathBuf>,
    /// A file holding the shared token that remote workers must prove they know
    #[arg(long, value_name = "F")]
    pub token_file: Option<PathBuf>,
    /// Drop a remote worker silent this long; its jobs go back to the job list [default: 10]
    #[arg(long, value_name = "SECS", allow_hyphen_values = true, value_parser = parse_seconds)]
    pub worker_timeout: Option<Duration>,
    /// Random polling: pause every worker every SECS seconds for a snapshot held in memory, which
    /// a lost worker process takes the run back to (longer if pausing takes over 2% of the run)
    /// [default: 60]
    #[arg(long, value_name = "SECS", allow_hyphen_values = true, value_parser = parse_seconds)]
    pub snapshot_every: Option<Duration>,
    /// Cluster launch (mpirun, srun): rank 0 runs the master, the other ranks work for it, meeting
    /// through file F on a shared file system; --workers is then the threads of every rank (default 1)
    #[arg(long, value_name = "F")]
    pub rendezvous: Option<PathBuf>,
}

/// The options of `bts estimate`.
#[derive(Debug, Parser)]
#[command(
    name = "bts estimate",
    no_binary_name = true,
    about = "Estimate a tree's size by Knuth's random probes",
    override_usage = "bts estimate [--probes K] [--json] <TREE> [TREE-OPTIONS]"
)]
pub struct EstimateArgs {
    /// Random root-to-leaf probes
    #[arg(long, value_name = "K", default_value_t = 1000, allow_negative_numbers = true, value_parser = positive::<u64>)]
    pub probes: u64,
    /// Print one JSON object: {"nodes", "std_error", "probes", ...}
    #[arg(long)]
    pub json: bool,
    /// Seed of the random choices, to repeat an estimate [default: a fresh one]
    #[arg(long, value_name = "S", allow_negative_numbers = true)]
    pub probe_seed: Option<u64>,
    /// Threads probing [default: the number of cores]
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub threads: Option<u32>,
    /// More log output
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Less log output
    #[arg(short = 'q', long = "quiet", conflicts_with = "verbose")]
    pub quiet: bool,
}

/// The options of `bts worker`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("master").required(true).args(["connect", "connect_file"])))]
#[command(after_help = "Ctrl-C, SIGTERM or SIGHUP: leave the run, handing this worker's work back (exit 0); \
                        a second signal quits at once (exit 3).")]
pub struct WorkerArgs {
    /// The master's address
    #[arg(long, value_name = "HOST:PORT", value_parser = parse_master_address)]
    pub connect: Option<String>,
    /// Read the master's address from F (bts run --address-file), waiting for it to appear
    #[arg(long, value_name = "F")]
    pub connect_file: Option<PathBuf>,
    /// A file holding the master's token
    #[arg(long, value_name = "F")]
    pub token_file: Option<PathBuf>,
    /// Worker threads [default: the number of cores]
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub threads: Option<u32>,
    /// Keep trying to reach the master (and waiting for the address file) this long, at the start and after losing it
    #[arg(long, value_name = "SECS", default_value = "60", allow_hyphen_values = true, value_parser = parse_seconds_or_zero)]
    pub retry: Duration,
    /// More log output (-v: info, -vv: debug)
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Less log output (errors only)
    #[arg(short = 'q', long = "quiet", conflicts_with = "verbose")]
    pub quiet: bool,
}

#[derive(Debug, Default, Args)]
#[command(next_help_heading = "Budget (mts/mplrs controls; the default adapts by itself)")]
pub struct BudgetArgs {
    /// Initial budget b: nodes a job may visit ("inf" for no limit) [default: 100; lrs: 20 a dimension]
    #[arg(long, value_name = "B", allow_hyphen_values = true, value_parser = parse_budget)]
    pub budget: Option<u64>,
    /// Never change b and never impose a depth limit
    #[arg(long)]
    pub fixed_budget: bool,
    /// Factor of the lmin/lmax rules, at least 2 [default: 100]
    #[arg(long, value_name = "S", allow_hyphen_values = true, value_parser = at_least_two)]
    pub scale: Option<u64>,
    /// While |L| < lmin*P, jobs get the depth limit --maxd, or b/scale without one [default: 1]
    #[arg(long, value_name = "L", allow_hyphen_values = true, value_parser = parse_nonnegative)]
    pub lmin: Option<f64>,
    /// While |L| > lmax*P, jobs get b*scale [default: off]
    #[arg(long, value_name = "L", allow_hyphen_values = true, value_parser = parse_nonnegative)]
    pub lmax: Option<f64>,
    /// Relative depth limit of jobs handed out while |L| < lmin*P
    #[arg(long, value_name = "D", allow_hyphen_values = true, value_parser = positive::<u32>)]
    pub maxd: Option<u32>,
    /// Depth limit of the first job, to seed the job list
    #[arg(long, value_name = "D", allow_hyphen_values = true)]
    pub initial_depth: Option<u32>,
    /// Which job to hand out next [default: lifo]
    #[arg(long, value_enum)]
    pub order: Option<OrderArg>,
}

#[derive(Debug, Args)]
#[command(next_help_heading = "Output and reports")]
pub struct OutputArgs {
    /// Write output records to FILE [default: stdout]
    #[arg(long, value_name = "FILE", value_parser = parse_output)]
    pub output: Option<PathBuf>,
    /// Count output records without writing them
    #[arg(long, conflicts_with = "output")]
    pub count_only: bool,
    /// Write the summary as JSON to FILE ("-": stdout, after any output records)
    #[arg(long, value_name = "FILE")]
    pub summary_json: Option<PathBuf>,
    /// Progress on stderr: a bar when it is a terminal (auto), otherwise a line every 5 seconds
    #[arg(long, value_enum, default_value = "auto")]
    pub progress: Progress,
    /// Write a time series of the run to FILE (CSV, four rows a second), for bts plot
    #[arg(long, value_name = "FILE")]
    pub hist: Option<PathBuf>,
    /// Write the nodes of every job to FILE, one per line
    #[arg(long, value_name = "FILE")]
    pub freq: Option<PathBuf>,
    /// Branch and bound: write every optimal solution, not just one (subtrees that can only tie
    /// the best are searched too)
    #[arg(long)]
    pub all_best: bool,
}

#[derive(Debug, Args)]
#[command(next_help_heading = "Stopping and checkpoints")]
pub struct StopArgs {
    /// Save the run to FILE when it starts, when it is told to stop, and when it stops, fails or ends
    /// (and every --checkpoint-every seconds); resume it with bts resume FILE
    #[arg(long, value_name = "FILE")]
    pub checkpoint: Option<PathBuf>,
    /// Save the run every SECS seconds without stopping it (needs --checkpoint)
    #[arg(long, value_name = "SECS", allow_hyphen_values = true, value_parser = parse_seconds)]
    pub checkpoint_every: Option<Duration>,
    /// Stop when file F appears (exit status 3)
    #[arg(long, value_name = "F")]
    pub stop_file: Option<PathBuf>,
    /// Stop after visiting N nodes (exit status 3)
    #[arg(long, value_name = "N", allow_hyphen_values = true, value_parser = positive::<u64>)]
    pub node_limit: Option<u64>,
    /// Stop after SECS seconds (fractions allowed; exit status 3)
    #[arg(long, value_name = "SECS", allow_hyphen_values = true, value_parser = parse_seconds)]
    pub time_limit: Option<Duration>,
    /// Branch and bound: stop as soon as a solution of value V or more is found (exit status 0,
    /// outcome "target")
    #[arg(long, value_name = "V", allow_hyphen_values = true, value_parser = parse_target)]
    pub target: Option<i64>,
}

/// An address to listen on or connect to: a host (a name, an IPv4 address or a bracketed IPv6
/// one) and a port.
fn parse_host_port(s: &str) -> Result<String, String> {
    match bts_worker::remote::host_port(s) {
        Some(_) => Ok(s.to_string()),
        None => Err("expected HOST:PORT, such as 127.0.0.1:7000 (port 0: any free port, to listen)".into()),
    }
}

/// The master's address, to connect to: a host and a port other than 0.
fn parse_master_address(s: &str) -> Result<String, String> {
    match bts_worker::remote::host_port(s) {
        Some(0) => Err("port 0 cannot be connected to: give the port the master listens on (it says which, \
                        and writes its address to its --address-file)"
            .into()),
        Some(_) => Ok(s.to_string()),
        None => Err("expected HOST:PORT, such as 127.0.0.1:7000".into()),
    }
}

/// Local worker threads: as many as `bts worker --threads` may have.
fn parse_workers(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n <= 4096 => Ok(n),
        Ok(_) => Err("at most 4096 worker threads".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// An output file: `-` is not one (records go to stdout without --output).
fn parse_output(s: &str) -> Result<PathBuf, String> {
    match s {
        "-" => Err("records go to stdout when --output is not given; --output names a file".into()),
        "" => Err("an empty file name".into()),
        _ => Ok(PathBuf::from(s)),
    }
}

fn parse_budget(s: &str) -> Result<u64, String> {
    if s.eq_ignore_ascii_case("inf") {
        return Ok(u64::MAX);
    }
    match s.parse::<u64>() {
        Ok(0) => Err("a budget must be at least 1 (or inf)".into()),
        // The largest number stands for inf: asked for as a number, it is one too many.
        Ok(u64::MAX) => Err(format!("'{s}' is the number that stands for inf: give inf, or a smaller budget")),
        Ok(b) => Ok(b),
        Err(_) => Err(format!("'{s}' is not a budget (a positive integer or inf)")),
    }
}

/// A solution value above the least 64-bit integer, which stands for "no solution yet".
fn parse_target(s: &str) -> Result<i64, String> {
    match s.parse::<i64>() {
        Ok(v) if v != bts_protocol::NO_VALUE => Ok(v),
        Ok(_) => Err(format!("{s} stands for \"no solution\": a target must be greater")),
        Err(_) => Err(format!("'{s}' is not a solution value (a 64-bit integer)")),
    }
}

fn parse_nonnegative(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
        _ => Err(format!("'{s}' is not a number >= 0")),
    }
}

/// A positive number of seconds, fractions allowed, at most [`MAX_SECONDS`] (which any clock
/// can take, and a checkpoint can hold).
pub fn parse_seconds(s: &str) -> Result<Duration, String> {
    match s.parse::<f64>() {
        Ok(x) if x > 0.0 && usable_seconds(x) && Duration::from_secs_f64(x) > Duration::ZERO => {
            Ok(Duration::from_secs_f64(x))
        }
        _ => Err(format!("'{s}' is not a number of seconds from 1e-9 (a nanosecond) to {MAX_SECONDS:e}")),
    }
}

/// A whole number of at least 1 (clap's range said "not in 1..18446744073709551615").
fn positive<T: std::str::FromStr + PartialOrd + From<u8>>(s: &str) -> Result<T, String> {
    whole_at_least(s, 1)
}

/// `--scale`: a whole number of at least 2 (a factor of 1 would change nothing).
fn at_least_two(s: &str) -> Result<u64, String> {
    whole_at_least(s, 2)
}

fn whole_at_least<T: std::str::FromStr + PartialOrd + From<u8>>(s: &str, least: u8) -> Result<T, String> {
    match s.parse::<T>() {
        Ok(x) if x >= T::from(least) => Ok(x),
        _ => Err(format!("'{s}' is not a whole number of at least {least} (and below 2^{})", 8 * size_of::<T>())),
    }
}

/// Seconds, or 0 for none (`bts worker --retry 0`: one try).
fn parse_seconds_or_zero(s: &str) -> Result<Duration, String> {
    match s.parse::<f64>() {
        Ok(0.0) => Ok(Duration::ZERO),
        _ => parse_seconds(s).map_err(|e| e.replace("a number of seconds from", "0 or a number of seconds from")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::time::Instant;

    /// Strings shaped like numbers (huge, tiny, signed, with exponents), numbers printed by Rust,
    /// and anything at all.
    fn number_like() -> impl Strategy<Value = String> {
        prop_oneof![
            "[-+]?[0-9]{0,30}(\\.[0-9]{0,30})?([eE][-+]?[0-9]{1,4})?",
            any::<f64>().prop_map(|x| x.to_string()),
            any::<u64>().prop_map(|x| x.to_string()),
            prop_oneof![Just("inf"), Just("-inf"), Just("NaN"), Just("1e300"), Just("1e-300"), Just("0x10")]
                .prop_map(String::from),
            ".{0,12}",
        ]
    }

    const SECONDS: [&str; 4] = ["--time-limit", "--checkpoint-every", "--worker-timeout", "--snapshot-every"];
    const OTHERS: [&str; 9] = [
        "--workers",
        "--budget",
        "--scale",
        "--lmin",
        "--lmax",
        "--maxd",
        "--initial-depth",
        "--node-limit",
        "--order",
    ];

    proptest! {
        /// Every number the command line takes is refused with a message or becomes a value the
        /// run can use: a time any clock can take and a checkpoint can hold.
        #[test]
        fn numbers_on_the_command_line_never_panic(value in number_like(), which in 0..SECONDS.len() + OTHERS.len()) {
            let option = SECONDS.iter().chain(&OTHERS).nth(which).unwrap();
            match RunArgs::try_parse_from([option, value.as_str()]) {
                Err(e) => prop_assert!(!e.to_string().is_empty()),
                Ok(args) => {
                    let r = &args.remote;
                    let s = &args.stopping;
                    for d in [s.time_limit, s.checkpoint_every, r.worker_timeout, r.snapshot_every].into_iter().flatten() {
                        prop_assert!(d > Duration::ZERO);
                        prop_assert!(Instant::now().checked_add(d).is_some());
                        prop_assert!(usable_seconds(d.as_secs_f64()));
                    }
                }
            }
            let worker = Cli::try_parse_from(["bts", "worker", "--connect", "127.0.0.1:9", "--retry", &value]);
            if let Ok(Cli { command: Command::Worker(w) }) = worker {
                prop_assert!(Instant::now().checked_add(w.retry).is_some());
            }
        }
    }

    #[test]
    fn seconds_beyond_any_clock_are_refused() {
        for s in ["1e300", "1e10", "inf", "NaN", "-1", "0", "1e-300", "soon"] {
            assert!(parse_seconds(s).is_err(), "{s}");
        }
        assert_eq!(parse_seconds("0.25"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_seconds_or_zero("0"), Ok(Duration::ZERO));
        assert!(parse_seconds("0").is_err() && parse_seconds_or_zero("-1").is_err());
        assert_eq!(parse_master_address("[::1]:7000").as_deref(), Ok("[::1]:7000"));
        assert!(parse_master_address("localhost:0").is_err() && parse_master_address(":7000").is_err());
        assert_eq!(parse_seconds("1e9"), Ok(Duration::from_secs(1_000_000_000)));
    }
}
