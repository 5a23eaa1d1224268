//! Looking at the machine within a time limit: running a program for its first line of output,
//! and finding a program on a PATH.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// How long any one probe (a program's `--version`, tmux, systemctl, an RPC) may take.
pub(super) const PROBE: Duration = Duration::from_secs(3);

/// Runs a program with a time limit; its first line of output, or why not.
pub(super) async fn probe(program: &str, args: &[&str]) -> Result<String, String> {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_remove("TMUX")
        .kill_on_drop(true);
    let child = cmd
        .spawn()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    match tokio::time::timeout(PROBE, child.wait_with_output()).await {
        Err(_) => Err(format!(
            "{program} did not answer within {}s",
            PROBE.as_secs()
        )),
        Ok(Err(e)) => Err(format!("{program}: {e}")),
        Ok(Ok(o)) => {
            let text = if o.stdout.is_empty() {
                &o.stderr
            } else {
                &o.stdout
            };
            let first = String::from_utf8_lossy(text)
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("")
                .trim()
                .to_string();
            if o.status.success() {
                Ok(first)
            } else {
                Err(format!(
                    "{program} {}: {} {first}",
                    args.join(" "),
                    o.status
                ))
            }
        }
    }
}

/// `program` itself when it holds a slash, else the first executable of that name on `path`.
pub(super) fn find_program(program: &str, path: &str) -> Option<PathBuf> {
    let executable =
        |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.mode() & 0o111 != 0);
    if program.contains('/') {
        let p = PathBuf::from(program);
        return executable(&p).then_some(p);
    }
    path.split(':')
        .filter(|d| !d.is_empty())
        .map(|d| Path::new(d).join(program))
        .find(|p| executable(p))
}
