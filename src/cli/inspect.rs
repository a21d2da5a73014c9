//! `bts inspect <CHECKPOINT>`: what a checkpoint holds, as one JSON object.

use super::{CliError, Exit};
use crate::summary::limited;
use serde_json::json;
use std::path::Path;

pub fn inspect(path: &Path) -> Result<Exit, CliError> {
    let cannot =
        |e: &dyn std::fmt::Display| CliError::usage(format!("cannot read the checkpoint {}: {e}", path.display()));
    let bytes = bts_checkpoints::read_bytes(path).map_err(|e| match e {
        // It names the file already.
        bts_checkpoints::LoadError::Io { source, .. } => cannot(&source),
        e => cannot(&e),
    })?;
    let ck = bts_checkpoints::decode(&bytes).map_err(|e| cannot(&e))?;
    // The version the file is in: resuming rewrites it in the current one.
    let version = bts_checkpoints::version_of(&bytes).unwrap_or(bts_checkpoints::CURRENT_VERSION);
    // A branch and bound's best records count in the output's length, which a resumed run cuts
    // back by; with --count-only nothing was written, and the summary says 0 bytes too.
    let (mut counters, mut committed, mut best) = (ck.totals.clone(), ck.output_len, ck.optimum.best_len);
    if ck.options.count_only {
        (counters.output_bytes, committed, best) = (0, 0, 0);
    }
    let report = json!({
        "format_version": version,
        "written_unix_ms": ck.written_unix_ms,
        "written": rfc3339(ck.written_unix_ms / 1000),
        "tree": ck.tree.command_line(),
        "complete": ck.is_complete(),
        "options": options_json(&ck.options),
        "counters": counters,
        "jobs": ck.jobs.len(),
        "budget": limited(ck.budget.base),
        "elapsed_s": ck.elapsed_s,
        "segments": ck.segments,
        // `best_bytes`: the last of the committed bytes are a branch and bound's best records.
        "output": {"path": ck.options.output, "committed_bytes": committed, "best_bytes": best},
        "input_digest": ck.input_digest.map(|d| format!("{d:08x}")),
        // Unknown (null) in a file of format version 6 or older that holds no solution.
        "branch_and_bound": ck.optimum.optimises,
        "best": ck.optimum.best.as_ref().map(|b| json!({
            "value": b.value,
            "records": b.records.iter().map(|r| String::from_utf8_lossy(r)).collect::<Vec<_>>(),
            "all_best": ck.optimum.keep_ties,
            "pruned": ck.optimum.pruned,
        })),
    });
    super::print_out(format_args!("{report}\n"))?;
    Ok(Exit::Complete)
}

/// The stored options, with the mode and the order spelled as the summary and the command line
/// spell them (`"mode": "polling", "split": "alternate", "order": "lifo"`).
fn options_json(options: &bts_checkpoints::StoredOptions) -> serde_json::Value {
    use bts_checkpoints::StoredMode;
    let mut value = serde_json::to_value(options).expect("options serialise");
    let (mode, split) = match options.mode {
        StoredMode::Budget => ("budget", None),
        StoredMode::Polling { split: bts_protocol::polling::SplitRule::Alternate } => ("polling", Some("alternate")),
        StoredMode::Polling { split: bts_protocol::polling::SplitRule::Bottom } => ("polling", Some("bottom")),
    };
    let order = match options.order {
        bts_master::Order::Lifo => "lifo",
        bts_master::Order::Fifo => "fifo",
    };
    value["budget"]["initial"] = json!(limited(options.budget.initial));
    value["mode"] = json!(mode);
    value["order"] = json!(order);
    if let Some(split) = split {
        value["split"] = json!(split);
    }
    value
}

/// `seconds` since the Unix epoch as an RFC 3339 UTC time.
fn rfc3339(seconds: u64) -> String {
    let days = (seconds / 86_400) as i64;
    let rem = seconds % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    #[test]
    fn rfc3339_dates() {
        assert_eq!(super::rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(super::rfc3339(1_795_305_600 + 3_723), "2026-11-22T01:02:03Z");
    }
}
