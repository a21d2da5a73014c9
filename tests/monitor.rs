//! Seeing a run: size estimates, progress, history files, plots and logs.

use crate::util::*;
use bts::trees::{Gw, Queens};
use bts::{Limits, Tree, search};
use serde_json::Value;
use std::process::Stdio;

fn count<T: Tree>(tree: &T) -> u64 {
    search(tree, tree.root(), 0, Limits::UNLIMITED, &mut String::new(), &mut |_, _| unreachable!()).visited
}

fn estimate(args: &[&str]) -> Value {
    let mut all = vec!["estimate", "--json"];
    all.extend_from_slice(args);
    let o = bts(&all);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn estimates_converge_to_the_exact_size_of_queens_12() {
    let exact = count(&Queens::new(12)) as f64;
    let e = estimate(&["--probes", "200000", "--probe-seed", "12", "queens", "--n", "12"]);
    let nodes = e["nodes"].as_f64().unwrap();
    assert!((nodes - exact).abs() < 0.05 * exact, "estimate {nodes}, exact {exact}");
    assert_eq!(e["probes"], 200_000);
    assert!(e["std_error"].as_f64().unwrap() > 0.0);
    assert_eq!(e["stopped"], false);
}

/// A signal ends the probes: the estimate of those done is printed, with exit 3 (it died of the
/// signal, and lost every probe).
#[test]
fn a_signal_ends_the_probes_with_the_estimate_so_far() {
    let exact = count(&Queens::new(12)) as f64;
    /// `bts ARGS`, sent `sig` after half a second: its exit status, stderr, and the child.
    fn signalled(args: &[&std::ffi::OsStr], sig: &str) -> (Option<i32>, String, std::process::Child) {
        let mut command = bts_command();
        let mut child = command.args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(500));
        signal(&child, sig);
        let status = wait_bounded(&mut child, std::time::Duration::from_secs(30));
        (status.code(), stderr_of(&mut child), child)
    }
    let args = ["estimate", "--json", "--probes", "1000000000000", "queens", "--n", "12"].map(std::ffi::OsStr::new);
    let (code, said, mut child) = signalled(&args, "-INT");
    assert_eq!(code, Some(3), "{said}");
    assert!(said.contains("SIGINT (Ctrl-C): no more probes"), "{said}");
    let e: Value = serde_json::from_reader(child.stdout.take().unwrap()).unwrap();
    let nodes = e["nodes"].as_f64().unwrap();
    assert!(e["stopped"] == true && e["probes"].as_u64() > Some(1000), "{e}");
    assert!((nodes - exact).abs() < 0.1 * exact, "estimate {nodes}, exact {exact}");
    // A probe under way ends too: a legacy program that hangs below the root is given up, not
    // waited for (up to --job-timeout, and then tried again).
    let dir = tempfile::tempdir().unwrap();
    let hangs = script(
        dir.path(),
        "hangs.sh",
        "#!/bin/sh\nif [ \"$BTS_NODE\" = root ]; then printf 'unexplored 1 a\\ndone 1\\n'; exit 0; fi\nexec sleep 1000\n",
    );
    let mut args = ["estimate", "--probes", "10", "--threads", "1", "exec", "--job-timeout", "600", "--"]
        .map(std::ffi::OsStr::new)
        .to_vec();
    args.push(hangs.as_os_str());
    let (code, said, _) = signalled(&args, "-TERM");
    assert_eq!(code, Some(3), "{said}");
    assert!(said.contains("stopped before any probe finished: no estimate"), "{said}");
}

/// A seed repeats an estimate to the last digit, whatever the threads (the machine's cores).
#[test]
fn a_seed_repeats_an_estimate_whatever_the_threads() {
    let run = |threads: &str| {
        estimate(&[
            "--probes",
            "3000",
            "--probe-seed",
            "7",
            "--threads",
            threads,
            "gw",
            "--delta",
            "10",
            "--seed",
            "119440",
        ])
    };
    let one = run("1");
    for threads in ["2", "3", "8"] {
        assert_eq!(run(threads), one, "{threads} threads");
    }
    // A human estimate names its seed, which repeats it.
    let first = String::from_utf8(bts(&["estimate", "--probes", "50", "queens", "--n", "9"]).stdout).unwrap();
    let seed = first.split("--probe-seed ").nth(1).and_then(|s| s.split(' ').next()).expect(&first);
    let again = bts(&["estimate", "--probes", "50", "--probe-seed", seed, "queens", "--n", "9"]);
    assert_eq!(String::from_utf8(again.stdout).unwrap(), first);
    // One probe gives no standard error: said, not shown as infinite.
    let o = bts(&["estimate", "--probes", "1", "queens", "--n", "1"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.contains("one probe gives no standard error") && !text.contains("inf"), "{text}");
    assert!(!text.contains("heavy-tailed"), "{text}");
    // Two probes: one carries at least half the sum whatever the tree, which says nothing of its
    // tail (it once called every tree heavy-tailed so).
    let o = bts(&["estimate", "--probes", "2", "--probe-seed", "3", "queens", "--n", "8"]);
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(!text.contains("heavy-tailed") && text.contains("So few probes"), "{text}");
}

#[test]
fn estimates_of_countable_trees_are_unbiased() {
    // Each estimate lies within four standard errors of the exact count (seeded, so repeatable).
    let cases: Vec<(Vec<&str>, u64)> = vec![
        (vec!["queens", "--n", "8"], count(&Queens::new(8))),
        (vec!["uts", "--preset", "T1", "-d", "5"], {
            let params =
                bts::trees::UtsArgs { preset: Some(bts::trees::Preset::T1), depth: Some(5), ..Default::default() };
            count(&bts::trees::Uts::new(params.params().unwrap()).unwrap())
        }),
        (vec!["gw", "--delta", "3", "--seed", "5"], count(&Gw::new(3, 5))),
    ];
    for (tree, exact) in cases {
        let mut args = vec!["--probes", "20000", "--probe-seed", "7"];
        args.extend(tree.iter().copied());
        let e = estimate(&args);
        let (nodes, se) = (e["nodes"].as_f64().unwrap(), e["std_error"].as_f64().unwrap());
        assert!((nodes - exact as f64).abs() <= 4.0 * se, "{tree:?}: {nodes} ± {se}, exact {exact}");
    }
}

#[test]
fn heavy_tailed_trees_say_so() {
    // A critical Galton-Watson tree of 112,154,163 nodes: probes almost always die young.
    let o = bts(&["estimate", "--probes", "2000", "--probe-seed", "1", "gw", "--delta", "10", "--seed", "119440"]);
    assert_eq!(o.status.code(), Some(0));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("standard error") && text.contains("heavy-tailed"), "{text}");
    let e = estimate(&["--probes", "2000", "--probe-seed", "1", "gw", "--delta", "10", "--seed", "119440"]);
    assert!(e["relative_std_error"].as_f64().unwrap() > 0.1, "{e}");
}

#[test]
fn estimate_refuses_bad_input() {
    for (args, message) in [
        (&["estimate"][..], "no tree given"),
        (&["estimate", "--probes", "0", "queens", "--n", "5"], "--probes"),
        (&["estimate", "nosuchtree"], "unknown tree"),
    ] {
        let o = bts(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(message), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn history_and_job_sizes_are_written_as_the_run_goes() {
    let dir = tempfile::tempdir().unwrap();
    let (hist, freq) = (dir.path().join("h.csv"), dir.path().join("f.txt"));
    let o = bts(&[
        "run",
        "--workers",
        "2",
        "--hist",
        hist.to_str().unwrap(),
        "--freq",
        freq.to_str().unwrap(),
        "--summary-json",
        "-",
        "uts",
        "--preset",
        "T1",
        "-g",
        "12",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s = summary(&o);
    let text = std::fs::read_to_string(&hist).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some(
            "elapsed_s,nodes,rate,queued,busy_workers,workers,budget,jobs,in_flight,estimated_total,estimated_std_error"
        )
    );
    let rows: Vec<Vec<f64>> =
        lines.map(|l| l.split(',').map(|f| if f.is_empty() { -1.0 } else { f.parse().unwrap() }).collect()).collect();
    let elapsed = s["elapsed_s"].as_f64().unwrap();
    assert!(elapsed > 1.0, "the run was too short to sample");
    assert!(rows.len() as f64 >= 2.0 * elapsed, "{} rows in {elapsed} s", rows.len());
    for w in rows.windows(2) {
        // The last row, as the run ends, may come within a millisecond of the one before.
        assert!(w[1][0] >= w[0][0] && w[1][1] >= w[0][1], "time and nodes go forward");
    }
    let last = rows.last().unwrap();
    assert_eq!(last[1] as u64, 4_130_071);
    assert_eq!(last[7] as u64, s["jobs"].as_u64().unwrap());
    assert_eq!(last[4] as u64, 0, "nobody busy at the end");
    assert_eq!((last[9], last[10]), (4_130_071.0, 0.0), "at the end the total is known");
    let sizes: Vec<u64> = std::fs::read_to_string(&freq).unwrap().lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(sizes.len() as u64, s["jobs"].as_u64().unwrap());
    assert_eq!(sizes.iter().sum::<u64>(), 4_130_071);
}

/// In either mode the history's last row counts the run's workers, idle at the end, and its total.
#[test]
fn the_historys_last_row_counts_the_workers_in_either_mode() {
    let dir = tempfile::tempdir().unwrap();
    let hist = dir.path().join("h.csv");
    for mode in ["budget", "polling"] {
        let args = ["run", "--mode", mode, "--workers", "2", "--hist", hist.to_str().unwrap(), "queens", "--n", "9"];
        let o = bts(&args);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let text = std::fs::read_to_string(&hist).unwrap();
        let last: Vec<&str> = text.lines().last().unwrap().split(',').collect();
        // nodes, busy_workers, workers: queens 9's tree has 8,394 nodes (counted by a brute force
        // over partial placements, row by row).
        assert_eq!((last[1], last[4], last[5]), ("8394", "0", "2"), "{mode}: {text}");
        // Done: the estimated total is the count.
        assert_eq!((last[9], last[10]), ("8394", "0"), "{mode}: {text}");
    }
}

/// The history is written as the run goes, not when it ends: a run killed at once leaves its rows
/// up to its last checkpoint, for the resumed run to carry on.
#[test]
fn a_killed_run_leaves_its_history_up_to_its_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let (hist, ck) = (dir.path().join("h.csv"), dir.path().join("run.ckpt"));
    let mut run = bts_command()
        .args(["run", "--workers", "1", "--progress", "never", "--checkpoint-every", "0.2", "--count-only"])
        .args(["--hist", hist.to_str().unwrap(), "--checkpoint", ck.to_str().unwrap(), "uts", "--preset", "T1L"])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let saved = || if ck.exists() { inspect(&ck)["elapsed_s"].as_f64().unwrap_or(0.0) } else { 0.0 };
    wait_until(std::time::Duration::from_secs(60), || saved() >= 1.0, || "no checkpoint a second into the run".into());
    signal(&run, "-KILL");
    run.wait().unwrap();
    let saved_at = saved();
    let text = std::fs::read_to_string(&hist).unwrap();
    let before: Vec<f64> =
        text.lines().skip(1).filter_map(|l| l.split(',').next()?.parse().ok()).filter(|&t| t <= saved_at).collect();
    // Four rows a second.
    assert!(before.len() >= 3, "rows up to the checkpoint at {saved_at} s: {text}");
}

/// A resumed run given the history file of the run it resumes carries it on: the rows up to the
/// checkpoint stay (those a run wrote after it, before it died, go), its own follow.
#[test]
fn a_resumed_run_carries_on_the_history() {
    let dir = tempfile::tempdir().unwrap();
    let (hist, ck) = (dir.path().join("h.csv"), dir.path().join("run.ckpt"));
    let (hist_s, ck_s) = (hist.to_str().unwrap(), ck.to_str().unwrap());
    let run = ["run", "--workers", "1", "--hist", hist_s, "--checkpoint", ck_s, "--node-limit", "2000000"];
    let o = bts(&[&run[..], &["uts", "--preset", "T1", "-g", "12"]].concat());
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let saved_at = inspect(&ck)["elapsed_s"].as_f64().unwrap();
    let first = std::fs::read_to_string(&hist).unwrap();
    let kept: Vec<&str> = first
        .lines()
        .filter(|l| l.split(',').next().unwrap().parse::<f64>().map_or(true, |t| t <= saved_at + 0.001))
        .collect();
    assert!(kept.len() > 3, "the first segment was too short to sample: {first}");
    // Its last row is at the checkpoint's time: the resumed run keeps it.
    assert_eq!(kept.last(), first.lines().last().as_ref(), "{first}");
    assert!(first.lines().last().unwrap().starts_with(&format!("{saved_at:.3},")), "{saved_at}: {first}");
    // Rows of a run that died after its checkpoint.
    std::fs::write(&hist, format!("{first}{:.3},9999999,0,0,0,1,100,1,0,,\n", saved_at + 5.0)).unwrap();
    let o = bts(&["resume", ck_s, "--hist", hist_s, "--summary-json", "-"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = std::fs::read_to_string(&hist).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(&lines[..kept.len()], &kept[..], "the first segment's rows are kept as they were");
    // A row as it starts, four a second, and one as it ends, however loaded the machine is.
    assert!(lines.len() > kept.len() + 1, "the resumed run adds its rows");
    let rows: Vec<(f64, u64)> = lines[1..]
        .iter()
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[0].parse().unwrap(), f[1].parse().unwrap())
        })
        .collect();
    for w in rows.windows(2) {
        // The last row, as the run ends, may come within a millisecond of the one before.
        assert!(w[1].0 >= w[0].0 && w[1].1 >= w[0].1, "time and nodes go forward: {w:?}");
    }
    assert_eq!(rows.last().unwrap().1, summary(&o)["nodes"].as_u64().unwrap());
    // The resumed run's rate is its own: its first row's is the nodes since the checkpoint over the
    // time since, not the checkpoint's nodes too.
    let f: Vec<f64> = lines[kept.len()].split(',').take(3).map(|x| x.parse().unwrap()).collect();
    let since = (f[1] - 2_000_000.0) / (f[0] - saved_at);
    assert!((f[2] - since).abs() <= 0.05 * since + 1000.0, "rate {} against {since}: {}", f[2], lines[kept.len()]);
    // A history given to a fresh run starts afresh.
    let o = bts(&["run", "--hist", hist_s, "queens", "--n", "6"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(std::fs::read_to_string(&hist).unwrap().lines().count() < 10);
}

#[test]
fn plots_are_valid_svg_and_png() {
    let dir = tempfile::tempdir().unwrap();
    let hist = dir.path().join("h.csv");
    let o = bts(&["run", "--workers", "2", "--hist", hist.to_str().unwrap(), "uts", "--preset", "T1", "-g", "8"]);
    assert_eq!(o.status.code(), Some(0));
    let (svg, png) = (dir.path().join("p.svg"), dir.path().join("p.png"));
    for out in [&svg, &png] {
        let o = bts(&["plot", hist.to_str().unwrap(), "-o", out.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    }
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.trim_start().starts_with("<svg") && text.trim_end().ends_with("</svg>"));
    for caption in ["job list |L|", "busy workers", "budget b", "seconds"] {
        assert!(text.contains(caption), "no {caption:?} in the SVG");
    }
    assert!(text.matches("<polyline").count() >= 3, "three curves");
    // Random polling has no job list and no budget: the pictures say what they show instead.
    let polling = dir.path().join("polling.csv");
    let args = ["run", "--mode", "polling", "--workers", "2", "--hist", polling.to_str().unwrap()];
    assert_eq!(bts(&[&args[..], &["uts", "--preset", "T1", "-g", "8"]].concat()).status.code(), Some(0));
    let o = bts(&["plot", polling.to_str().unwrap(), "-o", svg.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = std::fs::read_to_string(&svg).unwrap();
    for caption in ["nodes on the workers&apos; stacks", "busy workers", "nodes visited"] {
        assert!(text.contains(caption) || text.contains(&caption.replace("&apos;", "'")), "no {caption:?}");
    }
    assert!(!text.contains("job list") && !text.contains("budget b"), "budget-mode captions in a polling plot");
    let decoder = png::Decoder::new(std::fs::File::open(&png).unwrap());
    let mut reader = decoder.read_info().unwrap();
    let mut pixels = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut pixels).unwrap();
    assert_eq!((info.width, info.height), (1000, 900));
    assert!(pixels.iter().any(|&b| b < 128), "the picture is not blank");
    // A history whose last row is cut short (a run still writing it) plots without that row; a row
    // cut short before the last is refused.
    let text = std::fs::read_to_string(&hist).unwrap();
    let cut = dir.path().join("cut.csv");
    std::fs::write(&cut, &text[..text.trim_end().rfind(',').unwrap()]).unwrap();
    let o = bts(&["plot", cut.to_str().unwrap(), "-o", svg.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("its last line is cut short; plotted without it"), "{}", stderr(&o));
    let mut lines: Vec<&str> = text.lines().collect();
    let short = lines[2].rsplit_once(',').unwrap().0.to_string();
    lines[2] = &short;
    std::fs::write(&cut, lines.join("\n")).unwrap();
    let o = bts(&["plot", cut.to_str().unwrap(), "-o", svg.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("line 3 has 10 columns where the header has 11"), "{}", stderr(&o));
    // Bad input: not a history, a picture type that is not known.
    std::fs::write(dir.path().join("bad.csv"), "a,b\n1,2\n").unwrap();
    let folder = dir.path().join("a.svg");
    std::fs::create_dir(&folder).unwrap();
    for (args, message) in [
        (
            vec!["plot", dir.path().join("bad.csv").to_str().unwrap(), "-o", svg.to_str().unwrap()],
            "not a bts --hist file",
        ),
        (vec!["plot", hist.to_str().unwrap(), "-o", dir.path().join("p.gif").to_str().unwrap()], ".svg or .png"),
        (vec!["plot", "/nonexistent.csv", "-o", svg.to_str().unwrap()], "cannot read"),
        // A plot into a folder that is not there, as any file bts writes.
        (
            vec!["plot", hist.to_str().unwrap(), "-o", "/nonexistent-dir/p.png"],
            "cannot write /nonexistent-dir/p.png: no folder",
        ),
        // A folder named as the plot.
        (vec!["plot", hist.to_str().unwrap(), "-o", folder.to_str().unwrap()], "it is a folder"),
        // The history as its own plot would be lost.
        (
            vec!["plot", hist.to_str().unwrap(), "-o", hist.to_str().unwrap()],
            "is both the history to plot and the plot",
        ),
    ] {
        let o = bts(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(message), "{args:?}: {}", stderr(&o));
    }
    assert!(
        bts(&["plot", hist.to_str().unwrap(), "-o", svg.to_str().unwrap()]).status.success(),
        "the history is whole"
    );
}

#[test]
fn progress_without_a_terminal_is_a_line_every_few_seconds() {
    let long = ["run", "--workers", "1", "uts", "--preset", "T1", "-g", "25"];
    let child = bts_command().args(long).stderr(Stdio::piped()).spawn().unwrap();
    let o = child.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&o.stderr);
    assert!(log.lines().any(|l| l.starts_with("bts: ") && l.contains(" nodes ") && l.contains("/s")), "{log}");
    let quiet = bts(&["run", "--progress", "never", "--workers", "2", "uts", "--preset", "T1", "-g", "10"]);
    assert!(!stderr(&quiet).contains("/s  L"), "{}", stderr(&quiet));
    let bar = bts(&["run", "--progress", "always", "--workers", "2", "uts", "--preset", "T1", "-g", "10"]);
    assert!(stderr(&bar).contains("busy 2/2"), "{}", stderr(&bar));
    // Not cut at a guessed width of 80 columns: the estimate at the line's end is there.
    assert!(stderr(&bar).contains("total unknown") || stderr(&bar).contains("% of ~"), "{}", stderr(&bar));
    // Random polling has no job list and no budget: the line shows the workers' stacks.
    let args =
        ["run", "--progress", "always", "--mode", "polling", "--workers", "2", "uts", "--preset", "T1", "-g", "10"];
    let polling = stderr(&bts(&args));
    assert!(polling.contains("stacks ") && polling.contains("busy "), "{polling}");
    assert!(!polling.contains("  L ") && !polling.contains("  b "), "{polling}");
}

#[test]
fn the_default_log_level_is_quiet_and_v_says_more() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.txt");
    let o = bts(&["run", "--progress", "never", "--output", out.to_str().unwrap(), "queens", "--n", "8"]);
    let lines: Vec<String> = stderr(&o).lines().map(str::to_string).collect();
    assert_eq!(lines.len(), 2, "only the summary: {lines:?}");
    let o = bts(&["run", "-v", "--progress", "never", "--output", out.to_str().unwrap(), "queens", "--n", "8"]);
    assert!(stderr(&o).contains("INFO"), "{}", stderr(&o));
}

/// The rows of a `--hist` file: (nodes, estimated total or None, its standard error).
fn estimates(hist: &std::path::Path) -> Vec<(f64, Option<(f64, f64)>)> {
    let text = std::fs::read_to_string(hist).unwrap();
    text.lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let total = (!f[9].is_empty()).then(|| (f[9].parse().unwrap(), f[10].parse().unwrap()));
            (f[1].parse().unwrap(), total)
        })
        .collect()
}

#[test]
fn the_progress_estimate_is_a_figure_where_probes_support_one() {
    // Queens: probes of the job list's nodes, depth by depth, support a figure before the end, and
    // the figures are near the exact size. The run stops at a node limit, a third of the tree of
    // 16 (1,141,190,303 nodes, counted by bench/queens.c, a C bitboard loop): seconds enough for
    // the prober (1% of a core).
    let exact = 1_141_190_303.0;
    let dir = tempfile::tempdir().unwrap();
    let hist = dir.path().join("h.csv");
    let args = ["run", "--workers", "1", "--count-only", "--progress", "never", "--hist", hist.to_str().unwrap()];
    let o = bts(&[&args[..], &["--node-limit", "400000000", "queens", "--n", "16"]].concat());
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let rows = estimates(&hist);
    let figures: Vec<(f64, f64)> = rows.iter().filter_map(|&(_, t)| t).collect();
    assert!(!figures.is_empty(), "no figure before the end in {} rows", rows.len());
    let mut errors: Vec<f64> = figures.iter().map(|(total, _)| (total / exact - 1.0).abs()).collect();
    // The last figure has the most probes behind it; the earlier ones fewer, and on a loaded
    // machine (the prober takes 1% of a core's time) few enough to be 10 to 15% off (a CI run
    // gave a median error of 11%, its last figure 6% off).
    let last = errors[errors.len() - 1];
    assert!(last < 0.1, "last error {last} of {figures:?}, exact {exact}");
    errors.sort_by(f64::total_cmp);
    assert!(errors[errors.len() / 2] < 0.15, "median error {} of {figures:?}, exact {exact}", errors[errors.len() / 2]);
    assert!(errors[errors.len() - 1] < 0.5, "{figures:?}, exact {exact}");
}

#[test]
fn the_progress_estimate_says_unknown_on_heavy_tailed_trees() {
    // A critical Galton-Watson tree of 112,154,163 nodes and the binomial UTS tree T3L
    // (111,345,631): almost every probe dies young, and any figure would be far too small.
    for tree in [&["gw", "--delta", "10", "--seed", "119440"][..], &["uts", "--preset", "T3L"]] {
        let dir = tempfile::tempdir().unwrap();
        let hist = dir.path().join("h.csv");
        let args = ["run", "--workers", "2", "--time-limit", "3", "--progress", "never"];
        let o = bts(&[&args[..], &["--hist", hist.to_str().unwrap()], tree].concat());
        assert!(matches!(o.status.code(), Some(0 | 3)), "{}", stderr(&o));
        let rows = estimates(&hist);
        assert!(rows.len() >= 5, "{} rows", rows.len());
        // The last row may be the end of the run, where the total is known.
        let shown: Vec<_> = rows[..rows.len() - 1].iter().filter(|(_, t)| t.is_some()).collect();
        assert!(shown.is_empty(), "{tree:?}: figures shown for a heavy-tailed tree: {shown:?}");
    }
}

#[test]
fn a_slow_estimate_shows_how_far_it_is() {
    // A legacy program a third of a second a node: 12 probes of one node take 4 seconds.
    let args = ["estimate", "--probes", "12", "--threads", "1", "exec", "--", "sh", "-c", "sleep 0.33; echo done 1"];
    let o = bts(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains(" of 12 probes done, about 1 nodes so far"), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("about 1 nodes"));
}
