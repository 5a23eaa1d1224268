//! End to end: the real clibot-gateway (console platform) in front of the real clibotd: a chat
//! message runs in a CLI and the reply comes back; a prompt is answered from the chat; killing
//! the gateway mid-turn loses nothing and repeats nothing; a missing daemon is reported.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use clibot_tests::{Harness, bin};

struct Gateway {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    seen: Vec<String>,
}

impl Gateway {
    fn start(h: &Harness) -> Gateway {
        let mut child = Command::new(bin("clibot-gateway"))
            .args(["--console", "--socket"])
            .arg(&h.socket)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start clibot-gateway");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Gateway {
            child,
            stdin,
            lines,
            seen: Vec::new(),
        }
    }

    fn say(&mut self, text: &str) {
        writeln!(self.stdin, "{text}").expect("write to the gateway");
        self.stdin.flush().expect("flush");
    }

    /// Waits for an output line containing `needle`.
    fn expect(&mut self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        if let Some(l) = self.seen.iter().find(|l| l.contains(needle)) {
            return l.clone();
        }
        while Instant::now() < deadline {
            if let Ok(l) = self.lines.recv_timeout(Duration::from_millis(100)) {
                self.seen.push(l.clone());
                if l.contains(needle) {
                    return l;
                }
            }
        }
        panic!(
            "the gateway never said {needle:?}; it said:\n{}",
            self.seen.join("\n")
        );
    }

    /// Everything said within `d`.
    fn drain(&mut self, d: Duration) -> Vec<String> {
        let deadline = Instant::now() + d;
        while Instant::now() < deadline {
            if let Ok(l) = self.lines.recv_timeout(Duration::from_millis(50)) {
                self.seen.push(l);
            }
        }
        self.seen.clone()
    }

    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_chat_message_runs_in_the_cli_and_the_reply_comes_back() {
    let mut h = Harness::new();
    h.start_daemon();
    let mut g = Gateway::start(&h);
    let work = h.work.display().to_string();
    g.say(&format!("!!new g bash {work}"));
    g.expect("started g (bash)");
    g.say("echo first-$((1+1))");
    g.expect("[g] first-2");
    // The console's transcript has both sides: what was typed and what came back.
    let t = h.ctl_ok(&["transcript", "console:console", "--json"]);
    assert!(
        t.lines()
            .any(|l| l.contains("\"in\"") && l.contains("echo first-$((1+1))")),
        "{t}"
    );
    // A prompt arrives with its options; a bare number answers it.
    g.say("read -p 'Deploy now? [y/N] ' a; echo deploy=$a");
    g.expect("[g] Deploy now? [y/N]");
    g.expect("1. y");
    g.say("1");
    g.expect("deploy=y");
    // Commands are for the gateway; anything else goes to the CLI untouched.
    g.say("!!sessions");
    g.expect("▶ g (bash)");
    g.say("!!nonsense");
    g.expect("unknown command !!nonsense");
    // Secrets do not leave the machine.
    g.say("echo key=sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789");
    let line = g.expect("[g] key=");
    assert!(
        !line.contains("abcdefghijklmnopqrstuvwxyz0123456789") && line.contains("redacted"),
        "{line}"
    );
    g.kill();
}

#[test]
fn killing_the_gateway_mid_turn_loses_nothing_and_repeats_nothing() {
    let mut h = Harness::new();
    h.start_daemon();
    let mut g = Gateway::start(&h);
    let work = h.work.display().to_string();
    g.say(&format!("!!new k bash {work}"));
    g.expect("started k");
    g.say("echo early-$((2+2))");
    g.expect("[k] early-4");
    // Quiet while `sleep` runs in the foreground: still one turn.
    g.say("sleep 2; echo late-$((3*3))");
    std::thread::sleep(Duration::from_millis(500));
    g.kill();
    // The turn finishes while no gateway runs.
    std::thread::sleep(Duration::from_secs(3));
    let mut g = Gateway::start(&h);
    g.expect("[k] late-9");
    let said = g.drain(Duration::from_secs(2));
    assert_eq!(
        said.iter().filter(|l| l.contains("late-9")).count(),
        1,
        "exactly once: {said:?}"
    );
    assert!(
        !said.iter().any(|l| l.contains("early-4")),
        "nothing already delivered comes again: {said:?}"
    );

    // With the daemon away the gateway says so, and recovers when it is back.
    h.kill_daemon();
    g.say("echo after-$((5+5))");
    g.expect("daemon is not reachable");
    h.start_daemon();
    g.expect("[k] after-10");
    g.kill();
}
