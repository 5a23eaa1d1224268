//! Before a non-admin's session starts, its CLI is run once inside the very jail it will get
//! (`PROGRAM --version`, through the launcher, with the session's environment): a CLI whose
//! program, interpreter or package the jail does not show would otherwise die at once in its
//! pane, and the phone would hear only "the CLI exited (status 1)". What it printed is the
//! reason given, with what to do.
//!
//! What a check found (it runs, or it cannot tell) is remembered for the daemon's life (per CLI,
//! jail, argv and program file), so only the first jailed spawn of a CLI pays the run (about
//! half a second for a Node CLI) — not every restart of its sessions. A check that
//! cannot tell (the program ignores `--version` and keeps running, or the launcher is missing)
//! lets the spawn go on: only clear evidence refuses.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime};

use crate::cli::CliSpec;
use crate::core::Daemon;
use crate::error::CoreError;
use crate::locking::lock;
use crate::model::SessionRecord;

/// How long the check may take before it is given up as inconclusive.
const CHECK_TIMEOUT: Duration = Duration::from_secs(15);

/// The last lines of the check's output given as the reason.
const REASON_LINES: usize = 6;

/// (CLI, the jail's arguments, the CLI's argv, its program's modification time).
type Key = (String, Vec<String>, Vec<String>, Option<SystemTime>);

/// The checks that did not refuse, and what they found.
fn passed() -> &'static Mutex<HashMap<Key, Verdict>> {
    static PASSED: OnceLock<Mutex<HashMap<Key, Verdict>>> = OnceLock::new();
    PASSED.get_or_init(|| Mutex::new(HashMap::new()))
}

/// What the check's run showed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Runs,
    /// It cannot tell (a timeout, a generic program that does not know `--version`).
    Unknown,
    Fails(String),
}

/// Judges the check's run: `code` its exit status (`None`: killed or timed out), `output` what
/// it printed. `knows_version`: the program is the CLI itself (`claude`, not a wrapper such as
/// `sh -c …` or `env`), which knows `--version`, so any failure counts; any other program
/// only fails the check when it could not be started at all.
pub(crate) fn judge(knows_version: bool, code: Option<i32>, output: &str) -> Verdict {
    let tail = || {
        let lines: Vec<&str> = output.lines().filter(|l| !l.trim().is_empty()).collect();
        let from = lines.len().saturating_sub(REASON_LINES);
        let text = lines[from..].join(" / ");
        if text.is_empty() {
            "it printed nothing".to_string()
        } else {
            text.chars().take(600).collect()
        }
    };
    match code {
        Some(0) => Verdict::Runs,
        None => Verdict::Unknown,
        Some(c) => {
            let not_started = c == 126 || c == 127 || output.contains("bwrap: execvp");
            if not_started || knows_version {
                Verdict::Fails(format!(
                    "inside the jail it failed (exit status {c}): {}",
                    tail()
                ))
            } else {
                Verdict::Unknown
            }
        }
    }
}

/// The argv of the check: the program (or the script an interpreter runs) with `--version`;
/// and whether that is the CLI of `adapter` itself (its program, or its script, named after
/// it), which knows `--version`.
fn check_argv(adapter: &str, argv: &[String]) -> (Vec<String>, bool) {
    let Some(program) = argv.first() else {
        return (Vec::new(), false);
    };
    let program = Path::new(program);
    let (take, named) = match crate::cli::version::script_of(program, argv) {
        Some(script) => (2, script.contains(adapter)),
        None => {
            let base = program.file_name().and_then(|n| n.to_str());
            (1, base.is_some_and(|b| b.starts_with(adapter)))
        }
    };
    let mut a: Vec<String> = argv.iter().take(take).cloned().collect();
    a.push("--version".into());
    (a, named && adapter != "generic")
}

impl Daemon {
    /// Runs `cli`'s program inside the jail `jailed` (the whole bwrap argv, ending with the
    /// CLI's `argv`) for session `rec`, and refuses the spawn when it cannot run there.
    pub(crate) async fn check_runs_in_jail(
        &self,
        rec: &SessionRecord,
        cli: &CliSpec,
        program: &Path,
        argv: &[String],
        jailed: &[String],
        env: &[(String, String)],
    ) -> Result<(), CoreError> {
        match self
            .run_in_jail(rec, cli, program, argv, jailed, env)
            .await?
        {
            Verdict::Fails(why) => Err(CoreError::NotRunnableInJail {
                cli: cli.name.clone(),
                why,
            }),
            Verdict::Runs | Verdict::Unknown => Ok(()),
        }
    }

    async fn run_in_jail(
        &self,
        rec: &SessionRecord,
        cli: &CliSpec,
        program: &Path,
        argv: &[String],
        jailed: &[String],
        env: &[(String, String)],
    ) -> Result<Verdict, CoreError> {
        let Some(start) = jailed.len().checked_sub(argv.len()) else {
            return Ok(Verdict::Unknown);
        };
        if jailed[start..] != *argv || argv.is_empty() {
            return Ok(Verdict::Unknown);
        }
        let modified = std::fs::metadata(program).and_then(|m| m.modified()).ok();
        // The jail's arguments without what is the session's own (its id, its directory).
        let (dir, id) = (rec.dir.display().to_string(), rec.id.as_str());
        let jail: Vec<String> = jailed[..start]
            .iter()
            .map(|a| a.replace(&dir, "@DIR").replace(id, "@ID"))
            .collect();
        let key: Key = (cli.name.clone(), jail, argv.to_vec(), modified);
        if let Some(v) = lock(passed()).get(&key) {
            return Ok(v.clone());
        }
        let mut probe: Vec<String> = jailed[..start].to_vec();
        let (check, knows_version) = check_argv(&cli.adapter, argv);
        probe.extend(check);
        // Through the launcher, as the session will be (its seccomp filter, its descriptors).
        let launcher =
            match self.through_launcher(&format!("{}-check", rec.id), probe, env.to_vec(), true) {
                Ok((launcher, _)) => launcher,
                // No launcher to be found: the spawn says so itself.
                Err(CoreError::NoOwnBinary) => return Ok(Verdict::Unknown),
                Err(e) => return Err(e),
            };
        let file = launcher.last().cloned().unwrap_or_default();
        let mut cmd = tokio::process::Command::new(&launcher[0]);
        cmd.args(&launcher[1..])
            .current_dir(&rec.dir)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let run = tokio::time::timeout(CHECK_TIMEOUT, cmd.output()).await;
        // The launcher removes its file once read; one that never ran leaves it.
        let _ = std::fs::remove_file(&file);
        let (code, output) = match run {
            Ok(Ok(out)) => {
                let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
                text.push('\n');
                text.push_str(&String::from_utf8_lossy(&out.stderr));
                (out.status.code(), text)
            }
            Ok(Err(e)) => {
                tracing::warn!(session = %rec.name, "cannot run the jail check: {e}");
                return Ok(Verdict::Unknown);
            }
            Err(_) => (None, String::new()),
        };
        let verdict = judge(knows_version, code, &output);
        if !matches!(verdict, Verdict::Fails(_)) {
            let mut p = lock(passed());
            if p.len() > 256 {
                p.clear();
            }
            p.insert(key, verdict.clone());
        }
        Ok(verdict)
    }

    /// `doctor`'s check: each configured CLI (or `only`) run once in the jail of each
    /// platform that jails its non-admins, as a session would be (its program on the PATH
    /// sessions get, the platform's `jail_read` and network), in a scratch directory. Empty,
    /// with the reason, when no platform jails anyone.
    pub async fn check_jail(
        &self,
        only: &str,
    ) -> Result<(Vec<(String, String, Verdict)>, String), CoreError> {
        let platforms: Vec<_> = self
            .access()
            .platforms()
            .into_iter()
            .filter(|(_, conf)| conf.sandbox != crate::chat::access::Sandbox::Off)
            .collect();
        if platforms.is_empty() {
            return Ok((
                Vec::new(),
                "no platform is configured under [access.*] with its sandbox on".into(),
            ));
        }
        let global = self.global_path().unwrap_or_default();
        let search = format!("{global}:/usr/bin:/bin:/usr/local/bin");
        let Some(bwrap) = crate::confine::jail::find_bwrap(&search) else {
            return Err(CoreError::NoSandbox);
        };
        let live = self.live();
        let mut clis: Vec<Arc<CliSpec>> = live
            .clis
            .values()
            .filter(|c| only.is_empty() || c.name == only)
            .cloned()
            .collect();
        if clis.is_empty() && !only.is_empty() {
            self.cli(only)?;
        }
        clis.sort_by(|a, b| a.name.cmp(&b.name));
        let scratch = self.settings().state_dir.join("jail-check");
        crate::paths::create_private_dir(&scratch).map_err(|source| CoreError::State {
            path: scratch.clone(),
            source,
        })?;
        let mut out = Vec::new();
        for (platform, conf) in platforms {
            for cli in &clis {
                // A CLI not installed is not the jail's to report (doctor says so apart).
                if let Some(verdict) = self
                    .check_one_in_jail(&bwrap, &scratch, cli, &conf, &global)
                    .await
                {
                    out.push((platform.clone(), cli.name.clone(), verdict));
                }
            }
        }
        for d in ["jails/jail-check", "sessions/jail-check"] {
            let _ = std::fs::remove_dir_all(self.settings().state_dir.join(d));
        }
        Ok((out, String::new()))
    }

    async fn check_one_in_jail(
        &self,
        bwrap: &Path,
        scratch: &Path,
        cli: &Arc<CliSpec>,
        conf: &crate::chat::access::PlatformAccess,
        global: &str,
    ) -> Option<Verdict> {
        let env: Vec<(String, String)> = cli
            .env
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let program = match self
            .check_program(
                &cli.name,
                cli.argv.first().map(String::as_str),
                &env,
                scratch,
            )
            .await
        {
            Ok(p) => p,
            Err(_) => return None,
        };
        let path = env
            .iter()
            .rev()
            .find(|(k, _)| k == "PATH")
            .map_or_else(|| global.to_string(), |(_, p)| p.clone());
        let home = cli
            .env
            .get("HOME")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| crate::paths::expand_home(Path::new("~")));
        let rec = SessionRecord {
            id: "jail-check".into(),
            name: format!("jail-check-{}", cli.name),
            cli: cli.name.clone(),
            dir: scratch.to_path_buf(),
            ..Default::default()
        };
        let (d, rec2, cli2, argv, bwrap2, conf2) = (
            self.clone(),
            rec.clone(),
            cli.clone(),
            cli.argv.clone(),
            bwrap.to_path_buf(),
            conf.clone(),
        );
        let jailed = crate::confine::beneath::blocking("preparing the jail check", move || {
            Ok(d.jailed_argv(&bwrap2, &rec2, &cli2, &home, &argv, &path, &conf2, true))
        })
        .await;
        let jailed = match jailed {
            Ok(Ok((jailed, _))) => jailed,
            Ok(Err(e)) => return Some(Verdict::Fails(e.to_string())),
            Err(e) => return Some(Verdict::Fails(e.to_string())),
        };
        Some(
            match self
                .run_in_jail(&rec, cli, &program, &cli.argv, &jailed, &env)
                .await
            {
                Ok(v) => v,
                Err(e) => Verdict::Fails(e.to_string()),
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_clear_evidence_refuses() {
        assert_eq!(judge(true, Some(0), "2.1.3"), Verdict::Runs);
        assert_eq!(judge(true, None, ""), Verdict::Unknown);
        assert!(matches!(
            judge(true, Some(1), "Error: Cannot find module '/home/u/x/cli.js'\n"),
            Verdict::Fails(w) if w.contains("Cannot find module") && w.contains("exit status 1")
        ));
        assert!(matches!(
            judge(false, Some(1), "bwrap: execvp tool: No such file or directory"),
            Verdict::Fails(w) if w.contains("execvp")
        ));
        assert_eq!(
            judge(false, Some(2), "sh: 0: Illegal option --"),
            Verdict::Unknown,
            "a wrapper or a generic program need not know --version"
        );
        assert!(
            matches!(judge(false, Some(127), ""), Verdict::Fails(w) if w.contains("printed nothing"))
        );
    }

    #[test]
    fn the_version_goes_to_the_program_or_its_script() {
        let v = |adapter: &str, a: &[&str]| {
            check_argv(
                adapter,
                &a.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            )
        };
        let (a, knows) = v("claude", &["claude", "--permission-mode", "default"]);
        assert_eq!(
            (a.as_slice(), knows),
            (&["claude".to_string(), "--version".into()][..], true)
        );
        let (a, knows) = v("qwen", &["node", "/x/qwen/cli.js", "-y"]);
        assert_eq!(a, ["node", "/x/qwen/cli.js", "--version"]);
        assert!(knows);
        let (a, knows) = v("copilot", &["sh", "-c", "exec bash", "sh"]);
        assert_eq!(a, ["sh", "--version"]);
        assert!(!knows, "a wrapper's --version says nothing");
        assert!(!v("generic", &["bash"]).1);
    }
}
