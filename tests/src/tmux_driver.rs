//! A private tmux server driven directly (no clibotd), for tests that watch a real CLI in a pane
//! the way clibot's detector does: `-S <dir>/t.sock -f /dev/null`, killed on drop.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// One tmux server with one session of interest, `target`.
pub struct TmuxDriver {
    pub socket: PathBuf,
    pub target: &'static str,
    /// Removed from the environment of every tmux command: the server, started by the first
    /// one, keeps that environment for every pane.
    pub unset: &'static [&'static str],
}

impl TmuxDriver {
    pub fn run(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut cmd = Command::new("tmux");
        cmd.arg("-S")
            .arg(&self.socket)
            .args(["-f", "/dev/null"])
            .args(args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for var in self.unset {
            cmd.env_remove(var);
        }
        let mut child = cmd.spawn().expect("run tmux");
        if let Some(text) = stdin {
            child
                .stdin
                .take()
                .expect("tmux stdin")
                .write_all(text.as_bytes())
                .expect("write to tmux");
        }
        child.wait_with_output().expect("wait for tmux")
    }

    /// Starts `argv` with `env` in the session `target` (160x50, in `dir`): tmux runs the
    /// program as the pane's process.
    pub fn start(&self, dir: &str, env: &[(String, String)], argv: &[String]) {
        let mut args: Vec<String> = [
            "new-session",
            "-d",
            "-s",
            self.target,
            "-x",
            "160",
            "-y",
            "50",
            "-c",
            dir,
        ]
        .map(String::from)
        .to_vec();
        for (k, v) in env {
            args.extend(["-e".to_string(), format!("{k}={v}")]);
        }
        args.push("--".into());
        args.extend(argv.iter().cloned());
        self.ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    }

    pub fn ok(&self, args: &[&str]) {
        let out = self.run(args, None);
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The visible screen, wrapped lines joined (what clibot's detector reads).
    pub fn capture(&self) -> String {
        let out = self.run(&["capture-pane", "-p", "-J", "-t", self.target], None);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Polls the screen until `pred` holds; panics with the last screen after `timeout`.
    pub fn wait(&self, what: &str, timeout: Duration, pred: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + timeout;
        let mut last = String::new();
        while Instant::now() < deadline {
            last = self.capture();
            if pred(&last) {
                return last;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("timed out after {timeout:?} waiting for {what}; last screen:\n{last}");
    }

    /// Submits `text` the way clibot does: bracketed paste from a buffer, a pause so the TUI
    /// does not take the Enter as part of the paste (Gemini turns an Enter within 40 ms of a
    /// paste into a newline, Codex within 120 ms), then Enter on its own.
    pub fn submit(&self, text: &str) {
        let out = self.run(&["load-buffer", "-b", "x", "-"], Some(text));
        assert!(out.status.success(), "load-buffer failed");
        self.ok(&["paste-buffer", "-p", "-d", "-b", "x", "-t", self.target]);
        std::thread::sleep(Duration::from_millis(300));
        self.ok(&["send-keys", "-t", self.target, "Enter"]);
    }
}

impl Drop for TmuxDriver {
    fn drop(&mut self) {
        crate::procs::end_tmux_server(|args| Some(self.run(args, None)));
    }
}
