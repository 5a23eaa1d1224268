//! A job's gate (and a goal's check, run the same way): a program run before the job, in its target's directory and jailed as the
//! target's session is, whose exit status says whether there is work (0: run, with what it
//! printed added to the prompt; 1: nothing to do; anything else: the run fails).
//!
//! Why jailed like the session: a member's job must not reach through its gate what their
//! session cannot. Why a time limit and a cap on what is read: a gate runs unattended, and one
//! that hangs or floods must not hold the job, nor the daemon's memory.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;

use crate::core::Daemon;
use crate::error::CoreError;
use crate::model::SessionRecord;

/// How long a gate may run.
pub const GATE_TIMEOUT: Duration = Duration::from_secs(120);
/// The most of a gate's output added to the prompt.
pub const GATE_OUTPUT_MAX: usize = 4096;
/// The most of its output read at all (the rest is drained and dropped).
const GATE_READ_MAX: usize = 64 * 1024;

/// What a gate said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// Exit 0: run, with its output (capped; empty when it printed nothing).
    Run(String),
    /// Exit 1: nothing to do.
    Skip(String),
    /// Anything else: the run fails, and why.
    Failed(String),
}

/// How a gate or a check ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ran {
    /// It ended (`code`: `None` when killed, or past [`GATE_TIMEOUT`]), with what it printed.
    Ended {
        code: Option<i32>,
        stdout: String,
        stderr: String,
    },
    /// It could not be started, and why.
    NotRun(String),
}

/// Judges a gate's end: its exit code (`None`: killed, timed out) and its output.
pub fn judge(code: Option<i32>, stdout: &str, stderr: &str) -> Gate {
    let cap = |s: &str| -> String {
        let s = s.trim_end();
        if s.len() <= GATE_OUTPUT_MAX {
            return s.to_string();
        }
        let mut end = GATE_OUTPUT_MAX;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}\n[… cut at {GATE_OUTPUT_MAX} bytes]", &s[..end])
    };
    let last_lines = |s: &str| -> String {
        let lines: Vec<&str> = s.lines().filter(|l| !l.trim().is_empty()).collect();
        lines[lines.len().saturating_sub(3)..]
            .join(" / ")
            .chars()
            .take(400)
            .collect()
    };
    match code {
        Some(0) => Gate::Run(cap(stdout)),
        Some(1) => Gate::Skip(last_lines(stdout)),
        Some(c) => {
            let why = last_lines(if stderr.trim().is_empty() {
                stdout
            } else {
                stderr
            });
            Gate::Failed(if why.is_empty() {
                format!("the gate exited with status {c}")
            } else {
                format!("the gate exited with status {c}: {why}")
            })
        }
        None => Gate::Failed(format!(
            "the gate did not end within {} s and was killed",
            GATE_TIMEOUT.as_secs()
        )),
    }
}

/// Reads at most [`GATE_READ_MAX`] bytes of `r`, then drains the rest.
async fn read_capped(mut r: impl tokio::io::AsyncRead + Unpin) -> String {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        match r.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) if buf.len() < GATE_READ_MAX => {
                let room = GATE_READ_MAX - buf.len();
                buf.extend_from_slice(&chunk[..n.min(room)]);
            }
            Ok(_) => {}
        }
    }
    String::from_utf8_lossy(&buf).into_owned()
}

impl Daemon {
    /// Runs `gate` for a job owned by `owner` whose runs go to session `rec` (a session's
    /// record, or one made for a job that starts sessions): in its directory, jailed when its
    /// session would be.
    pub(crate) async fn run_gate(
        &self,
        owner: &str,
        rec: &SessionRecord,
        gate: &[String],
    ) -> Result<Gate, CoreError> {
        Ok(match self.run_checked(owner, rec, gate).await? {
            Ran::Ended {
                code,
                stdout,
                stderr,
            } => judge(code, &stdout, &stderr),
            Ran::NotRun(why) => Gate::Failed(why),
        })
    }

    /// Runs `argv` as a gate or a goal's check is run: in `rec`'s directory, jailed as its
    /// session is, for at most [`GATE_TIMEOUT`], its output capped.
    pub(crate) async fn run_checked(
        &self,
        owner: &str,
        rec: &SessionRecord,
        argv: &[String],
    ) -> Result<Ran, CoreError> {
        let global = self.global_path().unwrap_or_default();
        let (argv, file) = self.jailed_gate_argv(owner, rec, argv, &global).await?;
        let ran = self.run_capped(&argv, &rec.dir, &global).await;
        if let Some(file) = file {
            let _ = std::fs::remove_file(file);
        }
        Ok(ran)
    }

    async fn run_capped(&self, argv: &[String], dir: &Path, global: &str) -> Ran {
        let Some(program) = argv.first() else {
            return Ran::NotRun("no program is named".into());
        };
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(&argv[1..])
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if !global.is_empty() {
            cmd.env("PATH", global);
        }
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                return Ran::NotRun(format!(
                    "{program:?} cannot be run: {e} (is it installed and executable?)"
                ));
            }
        };
        let (Some(out), Some(err)) = (child.stdout.take(), child.stderr.take()) else {
            return Ran::NotRun("its output cannot be read".into());
        };
        let run = async {
            let (stdout, stderr) = tokio::join!(read_capped(out), read_capped(err));
            let status = child.wait().await;
            (status, stdout, stderr)
        };
        match tokio::time::timeout(GATE_TIMEOUT, run).await {
            Ok((Ok(status), stdout, stderr)) => Ran::Ended {
                code: status.code(),
                stdout,
                stderr,
            },
            Ok((Err(e), ..)) => Ran::NotRun(format!("it could not be waited for: {e}")),
            Err(_) => Ran::Ended {
                code: None,
                stdout: String::new(),
                stderr: String::new(),
            },
        }
    }

    /// The gate's argv: as written for a session that runs unjailed; through the jail and the
    /// launcher (and the launcher's file, removed once the gate ended) for one that is jailed.
    async fn jailed_gate_argv(
        &self,
        owner: &str,
        rec: &SessionRecord,
        gate: &[String],
        global: &str,
    ) -> Result<(Vec<String>, Option<PathBuf>), CoreError> {
        let Some(bwrap) = self.jail_for(owner, global)? else {
            return Ok((gate.to_vec(), None));
        };
        let Some(conf) = self.non_admin(owner) else {
            return Ok((gate.to_vec(), None));
        };
        let cli = self.cli(&rec.cli)?;
        let home = cli
            .env
            .get("HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| crate::paths::expand_home(Path::new("~")));
        let (d, rec2, argv, path) = (self.clone(), rec.clone(), gate.to_vec(), global.to_string());
        let jailed = crate::confine::beneath::blocking("preparing a job's gate", move || {
            Ok(d.jailed_argv(&bwrap, &rec2, &cli, &home, &argv, &path, &conf, true))
        })
        .await??;
        let (launcher, _) =
            self.through_launcher(&format!("{}-gate", rec.id), jailed.0, Vec::new(), true)?;
        let file = launcher.last().map(PathBuf::from);
        Ok((launcher, file))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exit_status_decides() {
        assert_eq!(
            judge(Some(0), "2 failed runs\n", ""),
            Gate::Run("2 failed runs".into())
        );
        assert_eq!(
            judge(Some(1), "all green\n", ""),
            Gate::Skip("all green".into())
        );
        assert!(
            matches!(judge(Some(2), "", "gh: not logged in\n"), Gate::Failed(w) if w.contains("status 2: gh: not logged in"))
        );
        assert!(matches!(judge(None, "", ""), Gate::Failed(w) if w.contains("killed")));
        let long = "x".repeat(GATE_OUTPUT_MAX * 2);
        assert!(
            matches!(judge(Some(0), &long, ""), Gate::Run(t) if t.len() < GATE_OUTPUT_MAX + 40 && t.ends_with("bytes]"))
        );
    }
}
