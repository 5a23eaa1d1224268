//! Which files a turn changed in a worktree: a snapshot — the commit `HEAD` is on and a hash of
//! every file that differs from it or is not tracked — taken when a turn ends, compared with
//! the next. Read-only: no index refresh written, no lock taken that the agent's own git
//! commands could trip on, no filter run (a repository that defines filters gets no summary).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::git::run;

/// A worktree's files at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    head: String,
    /// Files that differ from `HEAD` or are not tracked: path → hash ("" when deleted).
    files: BTreeMap<String, String>,
}

/// The worktree at `path` now; `None` where git cannot read it safely.
pub async fn snapshot(path: &Path) -> Option<Snapshot> {
    if !path.is_dir() || super::runner::defines_filters(path).await {
        return None;
    }
    let head = run(path, &["rev-parse", "HEAD"]).await.ok()?;
    let status = run(
        path,
        &[
            "status",
            "--porcelain",
            "--no-renames",
            "--untracked-files=all",
            "--ignore-submodules=all",
        ],
    )
    .await
    .ok()?;
    let paths: Vec<String> = status
        .lines()
        .filter_map(|l| l.get(3..))
        .map(|p| p.trim_matches('"').to_string())
        .collect();
    let present: Vec<&String> = paths.iter().filter(|p| path.join(p).is_file()).collect();
    let mut hashes = Vec::new();
    if !present.is_empty() {
        let mut args = vec!["hash-object", "--no-filters", "--"];
        args.extend(present.iter().map(|p| p.as_str()));
        hashes = run(path, &args)
            .await
            .ok()?
            .lines()
            .map(str::to_string)
            .collect();
    }
    let mut hashes = hashes.into_iter();
    let files = paths
        .iter()
        .map(|p| {
            let h = if path.join(p).is_file() {
                hashes.next().unwrap_or_default()
            } else {
                String::new()
            };
            (p.clone(), h)
        })
        .collect();
    Some(Snapshot { head, files })
}

/// The files that changed between `before` and `after` in the worktree at `path`: those
/// committed in between, and those whose content differs.
pub async fn changed(path: &Path, before: &Snapshot, after: &Snapshot) -> Vec<String> {
    let mut out = BTreeSet::new();
    if before.head != after.head {
        let range = format!("{}..{}", before.head, after.head);
        if let Ok(names) = run(path, &["diff", "--name-only", "--no-renames", &range]).await {
            out.extend(names.lines().map(str::to_string));
        }
    }
    for (p, h) in &after.files {
        if before.files.get(p) != Some(h) {
            out.insert(p.clone());
        }
    }
    for p in before.files.keys() {
        if !after.files.contains_key(p) && before.head == after.head {
            out.insert(p.clone());
        }
    }
    out.into_iter().collect()
}
