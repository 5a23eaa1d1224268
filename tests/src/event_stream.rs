//! Waiting on the daemon's events as they happen: `clibotctl events --since 0 --follow --json`
//! streams the retained log and then each new event, so a test wakes on the event it waits
//! for instead of asking for the whole log again and again.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

/// A follower process, killed when dropped.
struct Follower(Child);

impl Drop for Follower {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The first event (oldest first, from the start of the retained log) that `pred` accepts,
/// waiting until `deadline`; `None` at the deadline. A daemon restarted meanwhile ends the
/// stream: it is followed again (from the start: the first match is still the oldest).
pub(crate) fn first_event(
    h: &crate::Harness,
    deadline: Instant,
    pred: &dyn Fn(&Value) -> bool,
) -> Option<Value> {
    while Instant::now() < deadline {
        let mut cmd = h.ctl_command(&["events", "--since", "0", "--follow", "--json"]);
        cmd.stdout(Stdio::piped()).stderr(Stdio::null());
        let Ok(mut child) = cmd.spawn() else {
            return None;
        };
        let out = child.stdout.take()?;
        let _follower = Follower(child);
        let (tx, rx) = mpsc::channel::<String>();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => {
                    if let Ok(v) = serde_json::from_str::<Value>(&line)
                        && pred(&v)
                    {
                        return Some(v);
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => return None,
                // The stream ended (no daemon, or it restarted): follow it again shortly.
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        std::thread::sleep(Duration::from_millis(100).min(left_of(deadline)));
    }
    None
}

fn left_of(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}
