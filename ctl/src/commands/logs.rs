//! `clibotctl logs`: the daemon's log, wherever it goes. A daemon started by `clibotctl` (or
//! with `--log-to-state-dir`) writes `clibotd.log` in its state directory; one under systemd
//! logs to the journal. Works with the daemon down too: that is when its log matters most.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};

/// The state directory: `--state-dir`, the running daemon's, `CLIBOT_STATE_DIR`, the config
/// file's `[daemon] state_dir`, else the default.
pub async fn state_dir(explicit: Option<PathBuf>, socket: &Path) -> Option<PathBuf> {
    if explicit.is_some() {
        return explicit;
    }
    if let Ok(Ok(mut c)) =
        tokio::time::timeout(Duration::from_secs(2), clibot_proto::connect(socket)).await
        && let Ok(s) = c.status(clibot_proto::v1::StatusRequest {}).await
    {
        return Some(PathBuf::from(s.into_inner().state_dir));
    }
    if let Some(d) = std::env::var_os("CLIBOT_STATE_DIR").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(d));
    }
    if let Some(d) = crate::connect::configured_daemon_path("state_dir") {
        return Some(d);
    }
    directories::ProjectDirs::from("", "", "clibot").map(|d| {
        d.state_dir()
            .unwrap_or_else(|| d.data_local_dir())
            .to_path_buf()
    })
}

/// The last `n` lines of `text`.
fn tail(text: &str, n: usize) -> &str {
    let mut cut = text.len();
    for _ in 0..n.max(1) {
        match text[..cut.saturating_sub(1)].rfind('\n') {
            Some(i) => cut = i + 1,
            None => return text,
        }
    }
    &text[cut..]
}

/// Prints the last `lines` of the log, then with `follow` what is appended (across rotations).
pub async fn logs(state_dir: Option<PathBuf>, lines: usize, follow: bool) -> anyhow::Result<()> {
    let file = state_dir
        .map(|d| d.join("clibotd.log"))
        .filter(|f| f.is_file());
    let Some(file) = file else {
        return journal(lines, follow);
    };
    let text = std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?;
    let text = String::from_utf8_lossy(&text);
    let mut out = std::io::stdout().lock();
    out.write_all(tail(&text, lines).as_bytes())?;
    out.flush()?;
    if !follow {
        return Ok(());
    }
    let mut at = text.len() as u64;
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let Ok(mut f) = std::fs::File::open(&file) else {
            continue;
        };
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        if len < at {
            // Rotated: the new file from its start.
            at = 0;
        }
        if len > at {
            f.seek(SeekFrom::Start(at))?;
            let mut buf = Vec::new();
            f.take(len - at).read_to_end(&mut buf)?;
            at = len;
            out.write_all(&buf)?;
            out.flush()?;
        }
    }
}

/// No log file: the daemon runs under systemd (the journal), or logs to the terminal that
/// started it.
fn journal(lines: usize, follow: bool) -> anyhow::Result<()> {
    let has_journal = std::process::Command::new("journalctl")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_journal {
        bail!(
            "no clibotd.log in the state directory and no journalctl: a clibotd started by hand logs to the terminal that runs it (start it with --log-to-state-dir, or let clibotctl start it, to have a log file)"
        );
    }
    let mut cmd = std::process::Command::new("journalctl");
    cmd.args([
        "--user",
        "-u",
        "clibotd",
        "-n",
        &lines.to_string(),
        "--no-pager",
    ]);
    if follow {
        cmd.arg("-f");
    }
    let status = cmd.status().context("running journalctl")?;
    if !status.success() {
        bail!("journalctl --user -u clibotd failed ({status})");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_the_last_lines() {
        assert_eq!(tail("a\nb\nc\n", 2), "b\nc\n");
        assert_eq!(tail("a\nb\nc", 2), "b\nc");
        assert_eq!(tail("a\n", 5), "a\n");
        assert_eq!(tail("", 3), "");
    }
}
