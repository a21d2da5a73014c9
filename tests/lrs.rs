//! `bts run lrs`: records and totals against plain `lrs` (lrslib, the independent reference) on
//! small polytopes of every kind, for several budgets and worker counts, through stop/resume,
//! `kill -9` and a remote worker; the output file as lrs's next input; bad inputs.

use crate::util::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The unit cube in dimension d: 2^d vertices, one basis each.
fn cube(d: usize) -> String {
    let mut rows = Vec::new();
    for i in 0..d {
        for sign in [1, -1] {
            let row: Vec<String> = (0..d).map(|j| if i == j { sign.to_string() } else { "0".into() }).collect();
            rows.push(format!("1 {}", row.join(" ")));
        }
    }
    h_input(&format!("cube-{d}"), &rows, d + 1, "")
}

/// The cross-polytope in dimension d: 2^d facets through 2d vertices, highly degenerate.
fn cross(d: usize) -> String {
    let rows = (0..1u32 << d)
        .map(|m| {
            let row: Vec<&str> = (0..d).map(|j| if m >> j & 1 == 1 { "-1" } else { "1" }).collect();
            format!("1 {}", row.join(" "))
        })
        .collect::<Vec<_>>();
    h_input(&format!("cross-{d}"), &rows, d + 1, "")
}

/// The cyclic polytope C(n, d) as n points on the moment curve (t, t², .., t^d), t = 1..n.
fn cyclic(d: u32, n: u64) -> String {
    let rows: Vec<String> =
        (1..=n).map(|t| format!("1 {}", (1..=d).map(|k| t.pow(k).to_string()).collect::<Vec<_>>().join(" "))).collect();
    format!("cyclic-{d}-{n}\nV-representation\nbegin\n{} {} rational\n{}\nend\n", n, d + 1, rows.join("\n"))
}

fn h_input(name: &str, rows: &[String], columns: usize, before_begin: &str) -> String {
    format!(
        "{name}\nH-representation\n{before_begin}begin\n{} {columns} rational\n{}\nend\n",
        rows.len(),
        rows.join("\n")
    )
}

/// An unbounded polyhedron with 3 vertices and a ray: x, y, z ≥ 0, x + y ≤ 1.
fn unbounded() -> String {
    let rows = ["0 1 0 0", "0 0 1 0", "0 0 0 1", "1 -1 -1 0"].map(String::from);
    h_input("unbounded", &rows, 4, "")
}

/// A square prism with a lineality space (|x| ≤ 1, |y| ≤ 1, z free), and an equation taking a
/// square out of a 4-dimensional box.
fn with_linearities() -> Vec<(&'static str, String)> {
    let slab = ["1 1 0 0", "1 -1 0 0", "1 0 1 0", "1 0 -1 0"].map(String::from);
    let boxed = ["0 1 1 1 -2", "2 1 0 0 0", "2 -1 0 0 0", "2 0 1 0 0", "2 0 -1 0 0", "2 0 0 1 0", "2 0 0 -1 0"];
    vec![
        ("slab.ine", h_input("slab", &slab, 4, "")),
        ("plane.ine", h_input("plane", &boxed.map(String::from), 5, "linearity 1 1\n")),
    ]
}

/// Equations that lrs finds redundant and makes inequalities (`*Input linearity in row N is
/// redundant`): the Birkhoff polytope B3 (doubly stochastic 3×3 matrices: every row and column
/// sum declared an equation, one of which the others imply), an equation given twice, and a
/// V-representation whose line is given twice. Restarted from their cobases, lrs took other bases
/// than the printed ones: records went missing or came twice, or jobs failed.
fn with_redundant_linearities() -> Vec<(&'static str, String)> {
    let mut birkhoff = Vec::new();
    for cell in 0..9 {
        birkhoff.push(format!("0 {}", (0..9).map(|j| if j == cell { "1" } else { "0" }).collect::<Vec<_>>().join(" ")));
    }
    for line in 0..6 {
        // Rows 0..3 of the matrix, then its columns.
        let in_sum = |cell: usize| if line < 3 { cell / 3 == line } else { cell % 3 == line - 3 };
        birkhoff
            .push(format!("-1 {}", (0..9).map(|c| if in_sum(c) { "1" } else { "0" }).collect::<Vec<_>>().join(" ")));
    }
    let mut twice = vec!["0 1 1 1".to_string(), "0 2 2 2".to_string()];
    twice.extend((0..3).flat_map(|i| {
        [1, -1].map(|sign| {
            format!("1 {}", (0..3).map(|j| if i == j { sign } else { 0 }.to_string()).collect::<Vec<_>>().join(" "))
        })
    }));
    let mut points = vec!["0 0 0 1".to_string(), "0 0 0 2".to_string()];
    points.extend((0..4).map(|m| format!("1 {} {} 0", m & 1, m >> 1)));
    vec![
        ("birkhoff.ine", h_input("birkhoff-3", &birkhoff, 10, "linearity 6 10 11 12 13 14 15\n")),
        ("twice.ine", h_input("twice", &twice, 4, "linearity 2 1 2\n")),
        (
            "line-twice.ext",
            format!("line-twice\nV-representation\nlinearity 2 1 2\nbegin\n6 4 rational\n{}\nend\n", points.join("\n")),
        ),
    ]
}

/// Every input of the tests, by file name.
fn inputs() -> Vec<(&'static str, String)> {
    let mut v = vec![
        ("cube.ine", cube(4)),
        ("cross.ine", cross(4)),
        ("cyclic.ext", cyclic(5, 12)),
        ("unbounded.ine", unbounded()),
    ];
    v.extend(with_linearities());
    v.extend(with_redundant_linearities());
    v
}

/// What plain lrs gives: its records, sorted, and its `*Totals`.
struct Plain {
    records: Vec<String>,
    totals: BTreeMap<String, u64>,
}

/// Whether lrs is installed; CI requires it (`BTS_REQUIRE_LRS`), elsewhere the tests are skipped.
fn lrs_installed() -> bool {
    let ok = Command::new("lrs").arg("/dev/null").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok();
    if !ok {
        assert!(std::env::var_os("BTS_REQUIRE_LRS").is_none(), "lrs is required but missing");
        eprintln!("skipped: lrs is not installed (Debian package lrslib)");
    }
    ok
}

fn plain_lrs(file: &Path) -> Plain {
    let o = Command::new("lrs").arg(file).output().expect("lrs runs (apt-get install lrslib)");
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    let (mut records, mut totals, mut inside) = (Vec::new(), BTreeMap::new(), false);
    for line in text.lines() {
        match line.trim() {
            "begin" => (inside, records) = (true, Vec::new()),
            "end" => inside = false,
            t if t.starts_with("*Totals:") => totals = parse_totals(&t["*Totals:".len()..]),
            // Not rows: comments, and the cobases and slacks of `printcobasis` and `printslack`.
            t if inside && !["*", "V#", "F#", "slack"].iter().any(|p| t.starts_with(p)) => {
                records.push(line.to_string())
            }
            _ => {}
        }
    }
    records.sort();
    Plain { records, totals }
}

fn parse_totals(text: &str) -> BTreeMap<String, u64> {
    text.split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .filter(|(k, _)| !k.contains('+'))
        .map(|(k, v)| (k.to_string(), v.parse().unwrap()))
        .collect()
}

/// Every count plain lrs gives is bts's (`linearities` is 0 where plain lrs leaves it out).
fn assert_totals(summary: &Value, plain: &Plain, case: &str) {
    let ours = summary["lrs"].as_object().unwrap_or_else(|| panic!("{case}: no lrs totals in {summary}"));
    for (name, value) in ours {
        let expected = plain.totals.get(name).copied().unwrap_or(0);
        assert_eq!(value.as_u64(), Some(expected), "{case}: {name} in {summary}");
    }
    for name in plain.totals.keys() {
        assert!(ours.contains_key(name), "{case}: no {name} in {summary}");
    }
    assert_eq!(summary["nodes"].as_u64(), plain.totals.get("bases").copied(), "{case}: nodes are bases");
    assert_eq!(summary["outputs"].as_u64(), Some(plain.records.len() as u64), "{case}");
}

/// The records of an output file: the lines between `<rows> <columns> rational` and `end`.
fn file_records(text: &str) -> Vec<String> {
    let lines = text.lines().skip_while(|l| !l.ends_with(" rational")).skip(1);
    sorted_lines(&lines.take_while(|l| *l != "end").collect::<Vec<_>>().join("\n"))
}

fn sorted_lines(text: &str) -> Vec<String> {
    let mut v: Vec<String> = text.lines().map(str::to_string).collect();
    v.sort();
    v
}

fn write_inputs(dir: &Path) -> Vec<PathBuf> {
    inputs()
        .into_iter()
        .map(|(name, text)| {
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap();
            path
        })
        .collect()
}

/// `bts run <run> lrs FILE` with the summary in a file: (stdout, summary).
fn run_lrs(dir: &Path, run: &[&str], file: &Path) -> (String, Value) {
    let summary = dir.join("summary.json");
    let mut args = vec!["run", "--progress", "never", "--summary-json", summary.to_str().unwrap()];
    args.extend_from_slice(run);
    args.extend_from_slice(&["lrs", file.to_str().unwrap()]);
    let o = bts(&args);
    assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
    let s = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    (String::from_utf8(o.stdout).unwrap(), s)
}

#[test]
fn records_and_totals_are_plain_lrss_for_every_budget_and_worker_count() {
    if !lrs_installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let budgets: [&[&str]; 4] = [
        &["--fixed-budget", "--budget", "1"],
        &["--fixed-budget", "--budget", "3"],
        &[],
        &["--maxd", "1", "--lmin", "100", "--budget", "5"],
    ];
    for file in write_inputs(dir.path()) {
        let plain = plain_lrs(&file);
        assert!(!plain.records.is_empty());
        for budget in budgets {
            for workers in ["1", "3"] {
                let mut run = vec!["--workers", workers];
                run.extend_from_slice(budget);
                let (records, s) = run_lrs(dir.path(), &run, &file);
                let case = format!("{} {run:?}", file.display());
                assert_eq!(sorted_lines(&records), plain.records, "{case}");
                assert_totals(&s, &plain, &case);
            }
            // Counting only, lrs prints no records: the counts come from its totals.
            let mut run = vec!["--workers", "2", "--count-only"];
            run.extend_from_slice(budget);
            let (records, s) = run_lrs(dir.path(), &run, &file);
            let case = format!("{} {run:?}", file.display());
            assert_eq!(records, "", "{case}");
            assert_totals(&s, &plain, &case);
        }
    }
}

#[test]
fn small_budgets_split_the_run_into_many_jobs_that_visit_more_than_their_budget() {
    if !lrs_installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cross.ine");
    std::fs::write(&file, cross(5)).unwrap();
    let plain = plain_lrs(&file);
    let freq = dir.path().join("freq.txt");
    let run = ["--workers", "2", "--fixed-budget", "--budget", "2", "--freq", freq.to_str().unwrap()];
    let (_, s) = run_lrs(dir.path(), &run, &file);
    assert_totals(&s, &plain, "cross 5");
    // lrs's budget is soft: jobs finish the leaves on their stack, and count them.
    let sizes: Vec<u64> = std::fs::read_to_string(&freq).unwrap().lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(sizes.len() as u64, s["jobs"].as_u64().unwrap());
    assert!(sizes.len() > 20 && sizes.iter().any(|&v| v > 2), "{sizes:?}");
}

#[test]
fn the_output_file_is_an_lrs_file_for_the_next_step() {
    if !lrs_installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let points = dir.path().join("cyclic.ext");
    std::fs::write(&points, cyclic(4, 9)).unwrap();
    let facets = dir.path().join("facets.ine");
    let o = bts(&[
        "run",
        "--workers",
        "2",
        "--budget",
        "2",
        "--output",
        facets.to_str().unwrap(),
        "lrs",
        points.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = std::fs::read_to_string(&facets).unwrap();
    assert!(text.starts_with("cyclic-4-9\nH-representation\nbegin\n"), "{text}");
    assert!(text.ends_with("\nend\n"), "{text}");
    // C(9, 4) has 27 facets; the file's row count is filled in when the run is complete.
    assert!(text.contains("\n          27 5 rational\n"), "{text}");
    // Plain lrs takes it and gives the nine points back.
    let back = plain_lrs(&facets);
    assert_eq!(back.totals["vertices"], 9);
    let numbers = |line: &str| line.split_whitespace().map(|t| t.parse::<i64>().unwrap()).collect::<Vec<_>>();
    let mut expected: Vec<Vec<i64>> = cyclic(4, 9).lines().skip(4).take(9).map(numbers).collect();
    let mut found: Vec<Vec<i64>> = back.records.iter().map(|r| numbers(r)).collect();
    expected.sort();
    found.sort();
    assert_eq!(found, expected);
    // The facets lrs lists for the points are the file's records.
    let plain = plain_lrs(&points);
    assert_eq!(file_records(&text), plain.records);
}

/// lrs reads the representation and the name as words before `begin`: `hull` is a V-representation
/// too, the keyword may share a line or follow a comment, and the name may be a number. Options
/// that print lines before the first record (`printcobasis`, `incidence`) leave the output file an
/// lrs file. Each way, the records, the totals and the output file are plain lrs's.
#[test]
fn the_head_of_the_input_and_of_the_output_file_are_read_as_lrs_reads_them() {
    if !lrs_installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let points = cyclic(5, 12);
    let body = &points[points.find("begin").unwrap()..];
    let cases = [
        ("hull.ext", format!("cyclic\nhull\n{body}"), "cyclic\nH-representation\nbegin\n"),
        ("one-line.ext", format!("cyclic V-representation\n{body}"), "cyclic\nH-representation\nbegin\n"),
        ("comment.ext", format!("cyclic\nV-representation * points\n{body}"), "cyclic\nH-representation\nbegin\n"),
        ("number.ext", format!("600\nV-representation\n{body}"), "600\nH-representation\nbegin\n"),
        ("cobases.ext", format!("{points}printcobasis\nincidence\n"), "cyclic-5-12\nH-representation\nbegin\n"),
        ("late.ine", format!("{}V-representation\n", cube(3)), "cube-3\nV-representation\nbegin\n"),
    ];
    for (name, text, head) in cases {
        let file = dir.path().join(name);
        std::fs::write(&file, text).unwrap();
        let plain = plain_lrs(&file);
        let out = dir.path().join(format!("{name}.out"));
        let run = ["--workers", "2", "--fixed-budget", "--budget", "2", "--output", out.to_str().unwrap()];
        let (_, s) = run_lrs(dir.path(), &run, &file);
        assert_totals(&s, &plain, name);
        let written = std::fs::read_to_string(&out).unwrap();
        assert!(written.starts_with(head), "{name}: {written}");
        assert_eq!(file_records(&written), plain.records, "{name}");
        // lrs takes the file as its next input.
        let next = Command::new("lrs").arg(&out).output().unwrap();
        let next_out = String::from_utf8_lossy(&next.stdout);
        assert!(next.status.success() && next_out.contains("*Totals:"), "{name}: {next_out}");
    }
    // A name in Latin-1, which lrs gets as it is (through a wrapper that keeps what it is given).
    let file = dir.path().join("latin.ine");
    std::fs::write(&file, [&b"caf\xe9\n"[..], cube(3).split_once('\n').unwrap().1.as_bytes()].concat()).unwrap();
    let given = dir.path().join("given");
    let wrapper = script(
        dir.path(),
        "lrs-wrapper.sh",
        &format!("#!/bin/sh\ncat \"$1\" >>{}\nexec lrs \"$@\"\n", given.display()),
    );
    let (records, s) = run_lrs(dir.path(), &["--workers", "2", "--budget", "2"], &file);
    let plain = plain_lrs(&file);
    assert_eq!(sorted_lines(&records), plain.records);
    assert_totals(&s, &plain, "latin-1");
    let args =
        ["run", "--workers", "1", "--count-only", "lrs", file.to_str().unwrap(), "--lrs", wrapper.to_str().unwrap()];
    assert_eq!(bts(&args).status.code(), Some(0));
    assert!(std::fs::read(&given).unwrap().starts_with(b"caf\xe9\n"), "lrs was not given the file's bytes");
}

#[test]
fn a_run_stopped_and_resumed_gives_every_record_once() {
    if !lrs_installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cyclic.ext");
    std::fs::write(&file, cyclic(6, 13)).unwrap();
    let plain = plain_lrs(&file);
    let (ck, out) = (dir.path().join("run.ckpt"), dir.path().join("out.ine"));
    let (ck, out, file) = (ck.to_str().unwrap(), out.to_str().unwrap(), file.to_str().unwrap());
    let common = ["--progress", "never", "--workers", "2", "--fixed-budget", "--budget", "5"];
    let mut first = vec!["run", "--checkpoint", ck, "--output", out, "--node-limit", "20"];
    first.extend_from_slice(&common);
    first.extend_from_slice(&["lrs", file]);
    let o = bts(&first);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    // Lines added to the file after the run stopped: refused, with advice that, followed, keeps
    // the file's head (the lrs file's name, representation, begin) and its records.
    let stopped = std::fs::read(out).unwrap();
    std::fs::write(out, [&stopped[..], b"a line of the user's\n"].concat()).unwrap();
    let o = bts(&["resume", ck]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let advice = stderr(&o);
    assert!(!advice.contains("relative to its own folder"), "the file is found: {advice}");
    let cut: u64 = advice.split("cut the file to ").nth(1).and_then(|t| t.split(' ').next()?.parse().ok()).unwrap();
    std::fs::OpenOptions::new().write(true).open(out).unwrap().set_len(cut).unwrap();
    assert!(std::fs::read(out).unwrap() == stopped, "{advice}");
    // Not on an input that has changed since.
    let original = std::fs::read_to_string(file).unwrap();
    std::fs::write(file, format!("{original}printslack\n")).unwrap();
    let o = bts(&["resume", ck]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("has changed since the run began"), "{}", stderr(&o));
    std::fs::write(file, original).unwrap();
    let summary = dir.path().join("s.json");
    let o = bts(&["resume", ck, "--workers", "3", "--summary-json", summary.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    assert_eq!(s["segments"], 2);
    assert_totals(&s, &plain, "resumed");
    let text = std::fs::read_to_string(out).unwrap();
    assert_eq!(file_records(&text), plain.records);
    assert_eq!(plain_lrs(Path::new(out)).totals["vertices"], 13, "the output file is lrs's input");
    // The same advice after the run completed keeps its `end` too.
    std::fs::write(out, format!("{text}a line of the user's\n")).unwrap();
    let o = bts(&["resume", ck]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let advice = stderr(&o);
    let cut: u64 = advice.split("cut the file to ").nth(1).and_then(|t| t.split(' ').next()?.parse().ok()).unwrap();
    std::fs::OpenOptions::new().write(true).open(out).unwrap().set_len(cut).unwrap();
    assert!(std::fs::read_to_string(out).unwrap() == text, "{advice}");
    assert_eq!(bts(&["resume", ck]).status.code(), Some(0));
}

#[test]
fn kill_9_at_any_moment_then_resume_writes_every_record_once() {
    if !lrs_installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cyclic.ext");
    std::fs::write(&file, cyclic(7, 18)).unwrap();
    let plain = plain_lrs(&file);
    let (ck, out) = (dir.path().join("run.ckpt"), dir.path().join("out.ine"));
    let (ck, out, file) = (ck.to_str().unwrap(), out.to_str().unwrap(), file.to_str().unwrap());
    let run = [
        "run",
        "--progress",
        "never",
        "--workers",
        "2",
        "--fixed-budget",
        "--budget",
        "2",
        "--checkpoint",
        ck,
        "--checkpoint-every",
        "0.05",
        "--output",
        out,
        "lrs",
        file,
    ];
    let summary = dir.path().join("s.json");
    let resume = ["resume", ck, "--summary-json", summary.to_str().unwrap()];
    let (o, kills) = kill_9_until_done(&run, &resume, 60, 60);
    assert_eq!(o.status.code(), Some(0));
    assert!(kills >= 1, "the run was never killed");
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    assert_totals(&s, &plain, "after kill -9");
    let text = std::fs::read_to_string(out).unwrap();
    assert_eq!(file_records(&text), plain.records, "after {kills} kills");
}

/// lrs is given each job's input as a file in bts's own folder of the temporary folder (lrs would
/// copy its stdin to `/tmp/lrs_stdin*`, left behind by a job killed early). The folder is gone
/// when bts ends, also when bts is killed with signal 9 in the middle of its jobs.
#[test]
fn lrs_jobs_leave_nothing_in_the_temporary_folder() {
    if !lrs_installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cyclic.ext");
    std::fs::write(&file, cyclic(7, 18)).unwrap();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let left = || std::fs::read_dir(&tmp).unwrap().map(|e| e.unwrap().path()).collect::<Vec<_>>();
    let run = |progress: &str| {
        let mut command = bts_command();
        command.args(["run", "--progress", progress, "--workers", "2", "--fixed-budget", "--budget", "2"]);
        command.args(["--count-only", "lrs", file.to_str().unwrap()]).env("TMPDIR", &tmp);
        command
    };
    // A whole run, with the progress estimate's probes (jobs too) running to its end.
    let o = run("always").output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(left(), Vec::<PathBuf>::new(), "after a run");
    // Killed while its jobs' files are there.
    let mut child = run("never").stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let job_file = |folder: &PathBuf| std::fs::read_dir(folder).is_ok_and(|mut d| d.next().is_some());
    wait_until(Duration::from_secs(30), || left().iter().any(job_file), || "no job file".into());
    signal(&child, "-KILL");
    child.wait().unwrap();
    wait_until(Duration::from_secs(10), || left().is_empty(), || format!("left after kill -9: {:?}", left()));
}

/// A cleaner of old files in the temporary folder may remove bts's folder of job files in a long
/// run: the next job makes a new one (a job whose file went with it is tried again), and the
/// run's records and totals are plain lrs's.
#[test]
fn a_run_whose_job_folder_is_removed_carries_on() {
    if !lrs_installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cyclic.ext");
    std::fs::write(&file, cyclic(7, 18)).unwrap();
    let plain = plain_lrs(&file);
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let (out, summary) = (dir.path().join("out.ext"), dir.path().join("s.json"));
    let mut child = bts_command()
        .args(["run", "--progress", "never", "--workers", "2", "--fixed-budget", "--budget", "2"])
        .args(["--output", out.to_str().unwrap(), "--summary-json", summary.to_str().unwrap()])
        .args(["lrs", file.to_str().unwrap()])
        .env("TMPDIR", &tmp)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let folders = || std::fs::read_dir(&tmp).unwrap().map(|e| e.unwrap().path()).collect::<Vec<_>>();
    wait_until(Duration::from_secs(30), || !folders().is_empty(), || "no job folder".into());
    for folder in folders() {
        // bts may write a job file into it meanwhile ("directory not empty"): again until it goes.
        let gone = || std::fs::remove_dir_all(&folder).is_ok() || !folder.exists();
        wait_until(Duration::from_secs(10), gone, || format!("cannot remove {}", folder.display()));
    }
    let status = wait_bounded(&mut child, Duration::from_secs(60));
    let log = stderr_of(&mut child);
    assert_eq!(status.code(), Some(0), "{log}");
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    assert_totals(&s, &plain, "job folder removed");
    assert_eq!(file_records(&std::fs::read_to_string(&out).unwrap()), plain.records);
}

#[test]
fn a_remote_worker_runs_lrs_on_its_side() {
    if !lrs_installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cross.ine");
    std::fs::write(&file, cross(5)).unwrap();
    let plain = plain_lrs(&file);
    let address = dir.path().join("address");
    let summary = dir.path().join("s.json");
    let args = [
        "run",
        "--progress",
        "never",
        "--workers",
        "0",
        "--listen",
        "127.0.0.1:0",
        "--address-file",
        address.to_str().unwrap(),
        "--budget",
        "3",
        "--fixed-budget",
        "--summary-json",
        summary.to_str().unwrap(),
        "lrs",
        file.to_str().unwrap(),
    ];
    let mut master = bts_command().args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let worker = bts(&["worker", "--connect-file", address.to_str().unwrap(), "--threads", "2"]);
    assert_eq!(worker.status.code(), Some(0), "{}", stderr(&worker));
    assert!(wait_bounded(&mut master, Duration::from_secs(60)).success());
    let mut records = String::new();
    std::io::Read::read_to_string(&mut master.stdout.take().unwrap(), &mut records).unwrap();
    assert_eq!(sorted_lines(&records), plain.records);
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    assert_totals(&s, &plain, "remote");
}

#[test]
fn a_worker_host_without_lrs_refuses_clearly() {
    if !lrs_installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cube.ine");
    std::fs::write(&file, cube(3)).unwrap();
    let address = dir.path().join("address");
    let args = [
        "run",
        "--progress",
        "never",
        "--workers",
        "0",
        "--listen",
        "127.0.0.1:0",
        "--address-file",
        address.to_str().unwrap(),
        "--time-limit",
        "5",
        "lrs",
        file.to_str().unwrap(),
    ];
    let mut master = bts_command().args(args).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let worker = bts_command()
        .args(["worker", "--connect-file", address.to_str().unwrap(), "--threads", "1"])
        .env("PATH", dir.path())
        .output()
        .unwrap();
    master.kill().unwrap();
    master.wait().unwrap();
    assert_eq!(worker.status.code(), Some(2), "{}", stderr(&worker));
    assert!(stderr(&worker).contains("lrslib"), "{}", stderr(&worker));
}

#[test]
fn bad_inputs_are_refused_with_exit_2_and_lrss_message() {
    if !lrs_installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.ine");
    std::fs::write(&bad, "bad\nH-representation\nbegin\n2 3 rational\n1 1 x\n1 0 1\nend\n").unwrap();
    let junk = dir.path().join("junk.ine");
    std::fs::write(&junk, "hello\n").unwrap();
    let cube_file = dir.path().join("cube.ine");
    std::fs::write(&cube_file, cube(3)).unwrap();
    let cube_file = cube_file.to_str().unwrap();
    // A file cut in the middle of its matrix (lrs would read bts's option lines as numbers).
    let cut = dir.path().join("cut.ine");
    std::fs::write(&cut, &cube(3)[..cube(3).find("begin").unwrap() + 25]).unwrap();
    let empty = dir.path().join("empty.ine");
    std::fs::write(&empty, h_input("empty", &["-1 1 0", "-1 0 1", "1 -1 -1"].map(String::from), 3, "")).unwrap();
    // lrs's manual: `nonnegative` cannot be used with `linearity`.
    let nonnegative = dir.path().join("nonnegative.ine");
    std::fs::write(
        &nonnegative,
        h_input("nn", &["1 -1 -1".into(), "1 -1 1".into()], 3, "nonnegative\nlinearity 1 1\n"),
    )
    .unwrap();
    let lrs_dir = dir.path().to_str().unwrap();
    // A row listed twice as an equation: lrs takes it and gives another polyhedron.
    let twice = dir.path().join("twice.ine");
    std::fs::write(&twice, h_input("t", &["7 -3 0".into(), "0 0 0".into(), "1 2 5".into()], 3, "linearity 2 2 2\n"))
        .unwrap();
    // With `startingcobasis` lrs names another row than the redundant equation (here row 4, of
    // three equations that pin a point): bts cannot tell which to make an inequality.
    let starting = dir.path().join("starting.ine");
    let point = ["0 1 0", "0 0 1", "0 1 1", "0 1 2"].map(String::from);
    std::fs::write(&starting, h_input("p", &point, 3, "linearity 3 1 2 3\n") + "startingcobasis 4\n").unwrap();
    let cases: [(Vec<&str>, &str); 14] = [
        (vec!["run", "lrs", starting.to_str().unwrap()], "with `startingcobasis` it may name another row"),
        (vec!["run", "lrs", nonnegative.to_str().unwrap()], "`nonnegative` and `linearity` cannot go together"),
        (vec!["run", "lrs", twice.to_str().unwrap()], "the input's `linearity` lists row 2 twice"),
        (vec!["run", "lrs", bad.to_str().unwrap()], "Illegal character in number"),
        (vec!["run", "lrs", empty.to_str().unwrap()], "lrs finds no feasible solution in"),
        (vec!["run", "lrs", cube_file, "--lrs", lrs_dir], "is a directory, not a program"),
        (vec!["run", "lrs", cut.to_str().unwrap()], "matrix is cut short"),
        // Programs that are not lrs.
        (vec!["run", "lrs", cube_file, "--lrs", "/bin/cat"], "/bin/cat does not behave as lrs"),
        (vec!["run", "lrs", cube_file, "--lrs", "/bin/false"], "/bin/false does not behave as lrs"),
        (vec!["run", "lrs", junk.to_str().unwrap()], "there is no `begin`"),
        (vec!["run", "lrs", "/nonexistent/in.ine"], "cannot read the input /nonexistent/in.ine"),
        (vec!["run", "lrs", cube_file, "--lrs", "/nonexistent/lrs"], "no such file"),
        (vec!["run", "lrs"], "FILE"),
        (vec!["run", "--mode", "polling", "lrs", cube_file], "random polling needs a tree that can split"),
    ];
    for (args, message) in cases {
        let o = bts(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(message), "{args:?}: {}", stderr(&o));
    }
    // lrs not installed: the message names the package.
    let o = bts_command().args(["run", "lrs", cube_file]).env("PATH", dir.path()).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("install the Debian package lrslib"), "{}", stderr(&o));
}

/// The input's own options: `maxdepth` (which every job's returned cobases depend on) and options
/// that print more or prune per basis give plain lrs's records and totals, whatever the budget.
#[test]
fn the_inputs_own_depth_limit_and_per_basis_options_give_plain_lrss_results() {
    if !lrs_installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut cases: Vec<(String, String)> =
        (0..4).map(|d| (format!("cyclic-maxdepth-{d}.ext"), format!("{}maxdepth {d}\n", cyclic(5, 12)))).collect();
    cases.push(("cross-maxdepth.ine".into(), format!("{}maxdepth 9\nprintcobasis 1\nmaxdepth\n2\n", cross(4))));
    cases.push(("cross-printing.ine".into(), format!("{}printslack\nincidence\n* maxcobases 1\n", cross(4))));
    cases.push(("cube-truncate.ine".into(), format!("{}truncate\n", cube(4))));
    // lrs reads words: `begin` and the size on the lines of other words, or split.
    let inline = cross(4).replace("H-representation\nbegin\n16 5 rational", "H-representation begin 16 5 rational");
    cases.push(("cross-begin-inline.ine".into(), format!("{inline}maxdepth 1\n")));
    let split = cross(4).replace("16 5 rational", "16\n5\nrational");
    cases.push(("cross-size-split.ine".into(), format!("{split}maxdepth 2\n")));
    for (name, text) in cases {
        let file = dir.path().join(&name);
        std::fs::write(&file, text).unwrap();
        let plain = plain_lrs(&file);
        for budget in [&["--fixed-budget", "--budget", "1"][..], &["--fixed-budget", "--budget", "3"], &[]] {
            let mut run = vec!["--workers", "2"];
            run.extend_from_slice(budget);
            let (records, s) = run_lrs(dir.path(), &run, &file);
            let case = format!("{name} {run:?}");
            assert_eq!(sorted_lines(&records), plain.records, "{case}");
            assert_totals(&s, &plain, &case);
        }
        let (records, s) = run_lrs(dir.path(), &["--workers", "2", "--count-only", "--budget", "2"], &file);
        assert_eq!(records, "", "{name}");
        assert_totals(&s, &plain, &format!("{name} --count-only"));
    }
}

/// Options that limit or change the whole run cannot be split into jobs: refused before the run.
#[test]
fn whole_run_options_in_the_input_are_refused_by_name() {
    if !lrs_installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cube.ine");
    let options = [
        "maxcobases 10",
        "maxoutput 3",
        "countonly",
        "mindepth 1",
        "estimates 5",
        "lponly",
        "lponly_rd",
        "maximize 0 1 1 1",
        "volume",
        "voronoi",
        "redund_list 2 1 2",
        "checkpoint",
        "Voronoi",
        "triangulation",
    ];
    // Also when `begin` shares its line with the size, as lrs allows.
    let inline = cube(3).replace("begin\n", "begin ");
    for (option, input) in options.iter().flat_map(|o| [(o, cube(3)), (o, inline.clone())]) {
        std::fs::write(&file, format!("{input}{option}\n")).unwrap();
        let o = bts(&["run", "lrs", file.to_str().unwrap()]);
        let name = option.split(' ').next().unwrap();
        assert_eq!(o.status.code(), Some(2), "{option}: {}", stderr(&o));
        assert!(stderr(&o).contains(&format!("option `{name}`")), "{option}: {}", stderr(&o));
        assert!(o.stdout.is_empty(), "{option}");
    }
}

#[test]
fn estimate_hist_and_progress_work_on_lrs() {
    if !lrs_installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cross.ine");
    std::fs::write(&file, cross(4)).unwrap();
    let plain = plain_lrs(&file);
    let bases = plain.totals["bases"] as f64;
    // A fixed seed: the probes' sizes are heavy-tailed (a few of 773 or 1,637 bases carry the mean
    // of 48), and about 3 estimates in 100 miss them all and fall more than 4 standard errors short.
    let o = bts(&["estimate", "--json", "--probes", "300", "--probe-seed", "1", "lrs", file.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let e: Value = serde_json::from_slice(&o.stdout).unwrap();
    let (mean, se) = (e["nodes"].as_f64().unwrap(), e["std_error"].as_f64().unwrap());
    assert!((mean - bases).abs() <= 4.0 * se + 1e-9, "estimate {e} against {bases} bases");
    let hist = dir.path().join("h.csv");
    let run = ["run", "--workers", "2", "--progress", "always", "--hist", hist.to_str().unwrap(), "--budget", "2"];
    let o = bts(&[&run[..], &["--summary-json", "-", "--count-only", "lrs", file.to_str().unwrap()]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_totals(&summary(&o), &plain, "hist");
    assert!(stderr(&o).contains(" nodes "), "a progress line: {}", stderr(&o));
    let rows = std::fs::read_to_string(&hist).unwrap();
    assert!(rows.lines().count() >= 2 && rows.starts_with("elapsed_s,"), "{rows}");
}

/// A run that fails while a remote worker's lrs job still runs (here one that hangs) tells the
/// worker to give the job up: the worker ends with the run, not when its job times out.
#[test]
fn a_failed_run_leaves_no_lrs_job_running_on_a_remote_worker() {
    if !lrs_installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("cube.ine");
    std::fs::write(&input, cube(4)).unwrap();
    // lrs itself, but the first restart job hangs and the others fail.
    let fake = script(
        dir.path(),
        "fakelrs.sh",
        "#!/bin/sh\nif grep -q '^restart' \"$1\"; then\n  \
         if mkdir \"$0.hung\" 2>/dev/null; then exec sleep 60; fi\n  exit 1\nfi\nexec lrs \"$@\"\n",
    );
    let address = dir.path().join("address");
    let mut master = bts_command()
        .args(["run", "--fixed-budget", "--budget", "3", "--progress", "never", "--workers", "0"])
        .args(["--listen", "127.0.0.1:0", "--address-file", address.to_str().unwrap()])
        .args(["lrs", input.to_str().unwrap(), "--lrs", fake.to_str().unwrap(), "--retries", "0"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until(Duration::from_secs(30), || address.exists(), || "no address file".into());
    let started = std::time::Instant::now();
    let worker = bts(&["worker", "--connect-file", address.to_str().unwrap(), "--threads", "2"]);
    wait_bounded(&mut master, Duration::from_secs(30));
    let o = master.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(dir.path().join("fakelrs.sh.hung").exists(), "no job hung: {}", stderr(&o));
    assert!(started.elapsed() < Duration::from_secs(30), "the worker waited for its lrs job: {}", stderr(&worker));
}

/// lrs 7.1 prints numbers of 19 digits and more wrongly in its 128-bit arithmetic (here
/// 1000000000000000289 as 1289, as plain lrs does: the records agree). A job that ran in it warns.
#[test]
fn a_job_in_128_bit_arithmetic_warns_of_lrss_misprints() {
    if !lrs_installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.ine");
    std::fs::write(&big, h_input("big", &["1000000000000000289 -1".into(), "0 1".into()], 2, "")).unwrap();
    let plain = plain_lrs(&big);
    let o = bts(&["run", "--progress", "never", "lrs", big.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(sorted_lines(&String::from_utf8_lossy(&o.stdout)), plain.records);
    assert!(stderr(&o).contains("in which lrs 7.1 prints numbers of 19 digits or more wrongly"), "{}", stderr(&o));
    // Numbers that fit in 64 bits: no word.
    let o = bts(&["run", "--progress", "never", "lrs", write_inputs(dir.path())[0].to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!stderr(&o).contains("128-bit"), "{}", stderr(&o));
}

/// A prism over an n-simplex (2(n + 1) vertices, dimension n + 1), its rows in the order that
/// makes lrs's first basis have a cobasis around it for every facet of the simplex.
fn prism(n: usize) -> String {
    let row = |first: &str, ones: &[(usize, &str)]| {
        let mut r = vec!["0"; n + 1];
        for &(at, v) in ones {
            r[at] = v;
        }
        format!("{first} {}", r.join(" "))
    };
    let mut rows = vec![row("1", &[(n, "-1")]), row("0", &[(n, "1")])];
    rows.extend((0..n).map(|i| row("0", &[(i, "1")])));
    let all: Vec<(usize, &str)> = (0..n).map(|i| (i, "-1")).collect();
    rows.push(row("1", &all));
    h_input(&format!("prism-{n}"), &rows, n + 2, "")
}

/// A job of a high-dimensional input starts by finding lrs's first basis, which costs what
/// hundreds of bases do: a first job of 100 bases handed back every cobasis around the first one
/// as a job of its own, and the run took ten times as long as plain lrs. The first budget grows
/// with the dimension.
#[test]
fn a_high_dimensional_input_is_not_cut_into_jobs_that_cost_more_than_their_bases() {
    if !lrs_installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("prism.ine");
    std::fs::write(&file, prism(120)).unwrap();
    let plain = plain_lrs(&file);
    assert_eq!(plain.records.len(), 242);
    let (records, s) = run_lrs(dir.path(), &["--workers", "2"], &file);
    assert_eq!(sorted_lines(&records), plain.records);
    assert_totals(&s, &plain, "prism 120");
    assert!(s["jobs"].as_u64().unwrap() <= 2, "{s}");
    // Given a budget of 100, the run is cut as before.
    let (_, s) = run_lrs(dir.path(), &["--workers", "2", "--budget", "100"], &file);
    assert!(s["jobs"].as_u64().unwrap() > 20, "{s}");
}

/// lrs 7.1 writes its restart files in /tmp whatever TMPDIR says; with /tmp full it misreads its
/// own input. bts says that /tmp is full instead of blaming the input. Runs where a private mount
/// namespace can be made (root, or a user namespace): /tmp is a full tmpfs in it only.
#[test]
fn a_full_tmp_is_named_when_lrs_fails_on_it() {
    if !lrs_installed() {
        return;
    }
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    // Large enough numbers that lrs 7.1 restarts in 128 bits, through a file in /tmp.
    std::fs::write(dir.path().join("cyclic.ext"), cyclic(8, 20)).unwrap();
    // The build may lie in /tmp, which the tmpfs hides: bts, its input and its job files are
    // reached through /mnt, where the test's folder is bound (in the namespace only).
    std::fs::copy(env!("CARGO_BIN_EXE_bts"), dir.path().join("bts")).unwrap();
    let script = "mount --bind . /mnt && mount -t tmpfs -o size=16k tmpfs /tmp && \
                  head -c 65536 /dev/zero > /tmp/fill 2>/dev/null; \
                  cd /mnt && TMPDIR=/mnt ./bts run --count-only lrs cyclic.ext";
    let unshare = Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", script])
        .current_dir(dir.path())
        .output();
    let o = match unshare {
        Ok(o) if !String::from_utf8_lossy(&o.stderr).contains("unshare:") => o,
        _ => return eprintln!("skipped: no private mount namespace here"),
    };
    let log = stderr(&o);
    if log.contains("mount:") {
        return eprintln!("skipped: cannot mount a tmpfs here: {log}");
    }
    assert_eq!(o.status.code(), Some(2), "{log}");
    assert!(log.contains("lrs fails on") && log.contains("/tmp is full"), "{log}");
    assert!(!log.contains("lrs rejects"), "{log}");
}
