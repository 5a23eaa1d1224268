//! A person at the desk: a real tmux client attached to a session in a terminal of its own (a
//! pty from util-linux's `script`), into which keys are typed as a person types them. tmux
//! then knows a client was active, as it does for someone at the machine — unlike
//! `tmux send-keys`, which any program may run.

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::Harness;

/// An attached client (its size ignored, so the pane keeps its own); detached (killed) when
/// dropped.
pub struct Desk {
    child: Child,
}

impl Desk {
    /// Attaches a client to `session` on the harness's tmux server and waits until tmux lists it.
    pub fn attach(h: &Harness, session: &str) -> Desk {
        let before = clients(h, session);
        let cmd = format!(
            "tmux -S {} -f /dev/null attach -f ignore-size -t {session}",
            h.tmux_socket.display()
        );
        let child = Command::new("script")
            .args(["-q", "-c", &cmd, "/dev/null"])
            .env_remove("TMUX")
            .env("TERM", "xterm-256color")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("run script(1) for a tmux client");
        let deadline = Instant::now() + Duration::from_secs(10);
        while clients(h, session) <= before {
            assert!(
                Instant::now() < deadline,
                "the desk's client never attached"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Desk { child }
    }

    /// Types `text` at the desk (`\r` is Enter).
    pub fn type_text(&mut self, text: &str) {
        let stdin = self.child.stdin.as_mut().expect("the desk's terminal");
        stdin.write_all(text.as_bytes()).expect("type at the desk");
        stdin.flush().expect("type at the desk");
    }
}

impl Drop for Desk {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How many clients are attached to `session`.
fn clients(h: &Harness, session: &str) -> usize {
    String::from_utf8_lossy(&h.tmux(&["list-clients", "-t", session]).stdout)
        .lines()
        .count()
}
