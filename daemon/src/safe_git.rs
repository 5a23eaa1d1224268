//! git without the repository's code: a repository's own config can name programs that git
//! runs on ordinary commands (`core.fsmonitor` on `git status`, clean/smudge/process filters on
//! files it looks at, hooks). The daemon runs git in directories chat users control, so it
//! never lets a repository choose what runs.

use std::path::Path;
use std::time::Duration;

/// What safe git sets in git's environment: no system or global config, no prompt, no
/// optional locks (a read never takes a lock a user's own git could trip on).
pub const ENV: [(&str, &str); 4] = [
    ("GIT_CONFIG_NOSYSTEM", "1"),
    ("GIT_CONFIG_GLOBAL", "/dev/null"),
    ("GIT_TERMINAL_PROMPT", "0"),
    ("GIT_OPTIONAL_LOCKS", "0"),
];

/// What safe git passes before the command: no fsmonitor, hook, external diff or pager.
pub const OPTIONS: [&str; 7] = [
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "diff.external=",
    "--no-pager",
];

/// A `git -C dir` command that reads no system or global config, asks for nothing, runs no
/// fsmonitor, hook, pager, external diff or text conversion, and leaves submodules alone.
pub fn command(dir: &Path) -> tokio::process::Command {
    let mut c = tokio::process::Command::new("git");
    c.envs(ENV)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_EXTERNAL_DIFF")
        .args(OPTIONS)
        .arg("-C")
        .arg(dir)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    c
}

/// Runs a safe git command with a time limit; its standard output when it succeeded.
async fn run(dir: &Path, args: &[&str]) -> Option<String> {
    let out = tokio::time::timeout(Duration::from_secs(5), command(dir).args(args).output())
        .await
        .ok()?
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Whether the repository at `dir` defines any filter driver (`filter.*`, includes followed):
/// git would run its programs on files it reads, so nothing that reads files runs there.
pub async fn defines_filters(dir: &Path) -> bool {
    let out = tokio::time::timeout(
        Duration::from_secs(5),
        command(dir)
            .args([
                "config",
                "--includes",
                "--name-only",
                "--get-regexp",
                r"^filter\.",
            ])
            .output(),
    )
    .await;
    match out {
        // Exit 1: no such key. Anything else unexpected counts as "maybe": safe side.
        Ok(Ok(o)) => o.status.code() != Some(1) || !o.stdout.is_empty(),
        _ => true,
    }
}

/// `git status --short` in `dir`, or `None` where it cannot run safely (a repository that
/// defines filters) or at all.
pub async fn status_short(dir: &Path) -> Option<String> {
    if defines_filters(dir).await {
        return None;
    }
    run(
        dir,
        &[
            "status",
            "--short",
            "--no-renames",
            "--ignore-submodules=all",
        ],
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn git(dir: &Path, args: &[&str]) {
        let ok = std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .expect("git")
            .status
            .success();
        assert!(ok, "git {args:?}");
    }

    /// A repository whose config names `script`, which leaves `marker` behind when run.
    fn trap(dir: &Path) -> std::path::PathBuf {
        let marker = dir.join("ran");
        let script = dir.join("evil.sh");
        std::fs::write(
            &script,
            format!("#!/bin/sh\ntouch {}\ncat\n", marker.display()),
        )
        .expect("script");
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        git(dir, &["init", "-q"]);
        std::fs::write(dir.join("a.txt"), "one\n").expect("file");
        git(dir, &["add", "a.txt"]);
        git(
            dir,
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-qm",
                "x",
            ],
        );
        std::fs::write(dir.join("a.txt"), "two\n").expect("change");
        script
    }

    #[tokio::test]
    async fn a_repositorys_fsmonitor_never_runs() {
        let t = tempfile::tempdir().expect("tempdir");
        let script = trap(t.path());
        git(
            t.path(),
            &["config", "core.fsmonitor", &script.display().to_string()],
        );
        let s = status_short(t.path()).await.expect("status runs");
        assert!(s.contains("a.txt"), "{s}");
        assert!(!t.path().join("ran").exists(), "the fsmonitor hook ran");
    }

    #[tokio::test]
    async fn a_repository_with_a_clean_filter_gets_no_status() {
        let t = tempfile::tempdir().expect("tempdir");
        let script = trap(t.path());
        std::fs::write(t.path().join(".gitattributes"), "* filter=evil\n").expect("attrs");
        git(
            t.path(),
            &["config", "filter.evil.clean", &script.display().to_string()],
        );
        assert!(defines_filters(t.path()).await);
        assert_eq!(status_short(t.path()).await, None);
        assert!(!t.path().join("ran").exists(), "the clean filter ran");
    }

    #[tokio::test]
    async fn an_ordinary_repository_has_a_status() {
        let t = tempfile::tempdir().expect("tempdir");
        trap(t.path());
        assert!(!defines_filters(t.path()).await);
        assert!(
            status_short(t.path())
                .await
                .is_some_and(|s| s.contains("a.txt"))
        );
    }
}
