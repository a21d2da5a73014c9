//! Checkpoint files: round trips, atomic replacement, and every kind of bad file refused cleanly.

use bts_checkpoints::{
    CURRENT_VERSION, Checkpoint, LoadError, OutputSeal, StoredOptimum, StoredOptions, decode, encode, load, write,
};
use bts_master::{Best, BudgetConfig, BudgetState, CostModel, Order, Pending, Totals};
use bts_protocol::{NodeBytes, TreeSpec};
use proptest::prelude::*;

fn sample(jobs: usize) -> Checkpoint {
    Checkpoint {
        written_unix_ms: 1_790_000_000_000,
        tree: TreeSpec::new("uts", ["--preset", "T1"]),
        options: StoredOptions {
            order: Order::Fifo,
            budget: BudgetConfig { initial: 77, lmax: Some(3.0), maxd: Some(2), ..BudgetConfig::default() },
            count_only: false,
            output: Some("/tmp/out.txt".into()),
            checkpoint: Some("/tmp/ck".into()),
            checkpoint_every: Some(2.5),
            workers: 3,
            mode: Default::default(),
        },
        totals: Totals {
            nodes: 123_456,
            leaves: Some(100_000),
            max_depth: None,
            outputs: 12,
            jobs: 99,
            returned: 140,
            output_bytes: 4096,
            ..Totals::default()
        },
        budget: {
            let mut cost = CostModel::default();
            cost.add(1000.0, 9.0e7);
            cost.add(10.0, 1.0e6);
            BudgetState { base: 12_345, cost }
        },
        elapsed_s: 12.5,
        segments: 2,
        output_len: 4096,
        jobs: (0..jobs)
            .map(|i| Pending { depth: i as u32 % 17, node: NodeBytes::from_slice(&[i as u8; 20]) })
            .collect(),
        seal: Some(OutputSeal { crc: 0xDEAD_BEEF, ended: jobs == 0 }),
        counters: vec![7, 8],
        optimum: StoredOptimum {
            best: Some(Best { value: -3, records: vec![b"a".to_vec(), b"b c".to_vec()] }),
            pruned: 77,
            keep_ties: true,
            // The output ends with the two records, "a\n" and "b c\n".
            best_len: 6,
            optimises: Some(true),
        },
        input_digest: Some(0x1234_5678),
        mixed_modes: true,
    }
}

#[test]
fn a_checkpoint_round_trips_through_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.ckpt");
    let checkpoint = sample(1000);
    write(&path, &checkpoint).unwrap();
    assert_eq!(load(&path).unwrap(), checkpoint);
    // Rewriting replaces it and leaves no temporary file behind.
    let smaller = sample(3);
    write(&path, &smaller).unwrap();
    assert_eq!(load(&path).unwrap(), smaller);
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, vec![std::ffi::OsString::from("run.ckpt")]);
}

#[test]
fn a_failed_write_leaves_the_previous_checkpoint_intact() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.ckpt");
    write(&path, &sample(10)).unwrap();
    // A temporary file that cannot be created (a directory is in its way) makes the write fail.
    std::fs::create_dir(dir.path().join(".run.ckpt.tmp")).unwrap();
    assert!(write(&path, &sample(20)).is_err());
    assert_eq!(load(&path).unwrap(), sample(10));
}

#[test]
fn bad_files_are_named_for_what_is_wrong() {
    let good = encode(&sample(5));
    let expect = |bytes: &[u8], check: fn(&LoadError) -> bool| {
        let err = decode(bytes).unwrap_err();
        assert!(check(&err), "unexpected error: {err}");
    };
    expect(&[], |e| matches!(e, LoadError::Empty));
    expect(b"PK\x03\x04 a zip file, not a checkpoint", |e| matches!(e, LoadError::Foreign));
    expect(b"bts-ck", |e| matches!(e, LoadError::Truncated { .. }));
    expect(&good[..good.len() - 1], |e| matches!(e, LoadError::Truncated { .. }));
    expect(&good[..30], |e| matches!(e, LoadError::Truncated { .. }));
    let mut longer = good.clone();
    longer.push(0);
    expect(&longer, |e| matches!(e, LoadError::Corrupt(_)));
    let mut flipped = good.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x10;
    expect(&flipped, |e| matches!(e, LoadError::Corrupt(m) if m.contains("checksum")));
    let mut newer = good.clone();
    newer[8..12].copy_from_slice(&(CURRENT_VERSION + 1).to_le_bytes());
    expect(
        &newer,
        |e| matches!(e, LoadError::Newer { found, supported } if *found == CURRENT_VERSION + 1 && *supported == CURRENT_VERSION),
    );
    // One flipped bit of the version: damaged, not newer.
    let mut flipped = good.clone();
    flipped[10] ^= 1;
    expect(&flipped, |e| matches!(e, LoadError::Corrupt(m) if m.contains(", which no bts writes")));
    let mut zero = good.clone();
    zero[8..12].copy_from_slice(&0u32.to_le_bytes());
    expect(&zero, |e| matches!(e, LoadError::Corrupt(_) | LoadError::UnknownVersion(0)));
}

/// The bytes of a checkpoint file of format version 1 (no output seal, no counters), 2 (no
/// branch and bound), 3 (no input digest), 4 (no length of the best records), 5 (no mixed modes)
/// or 6 (no flag for a branch and bound).
fn encode_old(checkpoint: &Checkpoint, version: u32) -> Vec<u8> {
    let mut payload = postcard::to_allocvec(checkpoint).unwrap();
    if version >= 2 {
        payload.extend(postcard::to_allocvec(&checkpoint.seal).unwrap());
        payload.extend(postcard::to_allocvec(&checkpoint.counters).unwrap());
    }
    if version >= 3 {
        payload.extend(postcard::to_allocvec(&checkpoint.optimum).unwrap());
    }
    if version >= 4 {
        payload.extend(postcard::to_allocvec(&checkpoint.input_digest).unwrap());
    }
    if version >= 5 {
        payload.extend(postcard::to_allocvec(&checkpoint.optimum.best_len).unwrap());
    }
    if version >= 6 {
        payload.extend(postcard::to_allocvec(&checkpoint.mixed_modes).unwrap());
    }
    let mut out = b"bts-ckpt".to_vec();
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    let mut crc = crc32fast::Hasher::new();
    crc.update(&out[8..20]);
    crc.update(&payload);
    out.extend_from_slice(&crc.finalize().to_le_bytes());
    out.extend_from_slice(&payload);
    out
}

#[test]
fn version_1_files_still_load_without_a_seal() {
    let mut checkpoint = sample(7);
    let v1 = encode_old(&checkpoint, 1);
    (checkpoint.seal, checkpoint.counters, checkpoint.optimum) = (None, Vec::new(), StoredOptimum::default());
    (checkpoint.input_digest, checkpoint.mixed_modes) = (None, false);
    assert_eq!(decode(&v1).unwrap(), checkpoint);
    // The current version stores the seal, absent or not.
    assert_eq!(decode(&encode(&checkpoint)).unwrap(), checkpoint);
    assert_eq!(decode(&encode(&sample(7))).unwrap(), sample(7));
    assert_eq!(&encode(&sample(7))[8..12], &7u32.to_le_bytes());
}

#[test]
fn version_2_files_still_load_without_an_incumbent() {
    let mut checkpoint = sample(7);
    let v2 = encode_old(&checkpoint, 2);
    (checkpoint.optimum, checkpoint.input_digest, checkpoint.mixed_modes) = (StoredOptimum::default(), None, false);
    assert_eq!(decode(&v2).unwrap(), checkpoint);
}

#[test]
fn version_3_files_still_load_without_an_input_digest() {
    let mut checkpoint = sample(7);
    let v3 = encode_old(&checkpoint, 3);
    (checkpoint.input_digest, checkpoint.optimum.best_len, checkpoint.mixed_modes) = (None, 0, false);
    assert_eq!(decode(&v3).unwrap(), checkpoint);
    // And the current version keeps the digest.
    assert_eq!(decode(&encode(&sample(7))).unwrap().input_digest, Some(0x1234_5678));
}

#[test]
fn version_4_files_take_a_complete_runs_output_to_end_with_its_best_records() {
    // An unfinished run has written no best records yet.
    let mut unfinished = sample(7);
    let v4 = encode_old(&unfinished, 4);
    (unfinished.optimum.best_len, unfinished.mixed_modes) = (0, false);
    assert_eq!(decode(&v4).unwrap(), unfinished);
    // A complete one wrote them last: "a\n" and "b c\n".
    let mut complete = sample(0);
    complete.mixed_modes = false;
    assert_eq!(decode(&encode_old(&complete, 4)).unwrap(), complete);
    // Unless the output cannot hold them (a count-only run).
    let mut count_only = sample(0);
    (count_only.totals.outputs, count_only.output_len) = (0, 0);
    let decoded = decode(&encode_old(&count_only, 4)).unwrap();
    assert_eq!(decoded.optimum.best_len, 0);
}

#[test]
fn version_5_files_still_load_as_runs_in_one_mode() {
    let mut checkpoint = sample(7);
    let v5 = encode_old(&checkpoint, 5);
    checkpoint.mixed_modes = false;
    assert_eq!(decode(&v5).unwrap(), checkpoint);
    // And the current version keeps the flag.
    assert!(decode(&encode(&sample(7))).unwrap().mixed_modes);
}

#[test]
fn version_6_files_know_a_branch_and_bound_by_its_solutions_and_pruned_nodes() {
    // One that found a solution was a branch and bound.
    let checkpoint = sample(7);
    assert_eq!(decode(&encode_old(&checkpoint, 6)).unwrap(), checkpoint);
    // One that had found none and pruned nothing may have been either.
    let mut unknown = sample(7);
    (unknown.optimum.best, unknown.optimum.pruned, unknown.optimum.best_len) = (None, 0, 0);
    let decoded = decode(&encode_old(&unknown, 6)).unwrap();
    assert_eq!(decoded.optimum.optimises, None);
    // The current version keeps the flag, either way.
    for optimises in [Some(false), Some(true)] {
        unknown.optimum.optimises = optimises;
        assert_eq!(decode(&encode(&unknown)).unwrap().optimum.optimises, optimises);
    }
}

#[test]
fn a_resumed_run_takes_back_the_best_records_written_when_the_run_ended() {
    let checkpoint = sample(0);
    assert_eq!(checkpoint.resumed_output_len(), 4096 - 6);
    assert_eq!(checkpoint.written_best(), b"a\nb c\n");
    let totals = checkpoint.committed_totals();
    assert_eq!((totals.outputs, totals.output_bytes, totals.best_len), (10, 4090, 0));
    assert_eq!(totals.best, checkpoint.optimum.best);
    // Nothing is taken back from a run that wrote none.
    let mut enumeration = sample(0);
    enumeration.optimum = StoredOptimum::default();
    assert_eq!(enumeration.resumed_output_len(), 4096);
    assert!(enumeration.written_best().is_empty());
    assert_eq!((enumeration.committed_totals().outputs, enumeration.committed_totals().output_bytes), (12, 4096));
}

#[test]
fn best_records_the_output_cannot_hold_are_refused() {
    let mut longer = sample(0);
    longer.optimum.best_len = longer.output_len + 1;
    assert!(matches!(decode(&encode(&longer)), Err(LoadError::Corrupt(m)) if m.contains("best records")));
    let mut without_best = sample(0);
    without_best.optimum.best = None;
    assert!(matches!(decode(&encode(&without_best)), Err(LoadError::Corrupt(_))));
    let mut shorter = sample(0);
    shorter.optimum.best_len = 5;
    assert!(matches!(decode(&encode(&shorter)), Err(LoadError::Corrupt(_))));
}

#[test]
fn times_no_clock_can_take_are_refused() {
    for elapsed in [1e300, f64::INFINITY, f64::NAN, -1.0] {
        let mut checkpoint = sample(1);
        checkpoint.elapsed_s = elapsed;
        let err = decode(&encode(&checkpoint)).unwrap_err();
        assert!(matches!(&err, LoadError::Corrupt(m) if m.contains("elapsed_s")), "{elapsed}: {err}");
    }
    for every in [1e300, 0.0, f64::NAN] {
        let mut checkpoint = sample(1);
        checkpoint.options.checkpoint_every = Some(every);
        let err = decode(&encode(&checkpoint)).unwrap_err();
        assert!(matches!(&err, LoadError::Corrupt(m) if m.contains("checkpoint_every")), "{every}: {err}");
    }
}

#[test]
fn a_relative_output_is_taken_relative_to_the_checkpoint() {
    let mut checkpoint = sample(1);
    checkpoint.options.output = Some("out/records.txt".into());
    let path = std::path::Path::new("/runs/copy/run.ckpt");
    assert_eq!(checkpoint.output_path(path), Some("/runs/copy/out/records.txt".into()));
    checkpoint.options.output = Some("/data/records.txt".into());
    assert_eq!(checkpoint.output_path(path), Some("/data/records.txt".into()));
    checkpoint.options.output = None;
    assert_eq!(checkpoint.output_path(path), None);
}

#[test]
fn loading_a_missing_file_names_it() {
    let err = load(std::path::Path::new("/nonexistent/run.ckpt")).unwrap_err();
    assert!(err.to_string().contains("/nonexistent/run.ckpt"), "{err}");
}

#[test]
fn a_million_jobs_encode_and_decode() {
    let checkpoint = sample(1_000_000);
    let bytes = encode(&checkpoint);
    assert!(bytes.len() < 30_000_000, "{} bytes", bytes.len());
    assert_eq!(decode(&bytes).unwrap().jobs.len(), 1_000_000);
}

proptest! {
    /// Whatever is done to a checkpoint's bytes, decoding returns the checkpoint or an error,
    /// never a panic and never a different checkpoint.
    #[test]
    fn damaged_bytes_never_decode_to_something_else(
        cut in any::<usize>(),
        flips in proptest::collection::vec((any::<usize>(), 1u8..), 0..4),
    ) {
        let original = sample(20);
        let mut bytes = encode(&original);
        for (at, mask) in &flips {
            let i = at % bytes.len();
            bytes[i] ^= mask;
        }
        let bytes = &bytes[..bytes.len() - cut % 3];
        if let Ok(c) = decode(bytes) {
            prop_assert_eq!(c, original);
        }
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200), magic in any::<bool>()) {
        let mut bytes = bytes;
        if magic && bytes.len() >= 8 {
            bytes[..8].copy_from_slice(b"bts-ckpt");
        }
        let _ = decode(&bytes);
    }
}

#[test]
fn an_absurd_length_is_refused_without_overflow() {
    // Found by the fuzzer: a header claiming 2^64 - 1 bytes of contents.
    let mut bytes = b"bts-ckpt".to_vec();
    bytes.extend_from_slice(&1u32.to_le_bytes());
    bytes.extend_from_slice(&u64::MAX.to_le_bytes());
    bytes.extend_from_slice(&[0, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0]);
    assert!(matches!(decode(&bytes), Err(LoadError::Truncated { .. })));
}

/// Only a regular file is read: a pipe would block (there may be no writer) and a device never
/// end; a large file that is no checkpoint is refused from its first bytes.
#[test]
fn what_is_not_a_regular_file_is_refused_without_reading_it() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    for path in [fifo.as_path(), std::path::Path::new("/dev/zero")] {
        let path = path.to_path_buf();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(load(&path).map(|_| ()).map_err(|e| e.to_string())));
        let got = rx.recv_timeout(std::time::Duration::from_secs(10)).expect("load blocked");
        assert!(got.unwrap_err().contains("not a regular file"));
    }
    let big = dir.path().join("big");
    std::fs::write(&big, vec![b'x'; 1 << 20]).unwrap();
    assert!(matches!(load(&big), Err(LoadError::Foreign)));
}
