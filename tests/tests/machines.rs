//! One gateway over two machines: two daemons on this machine stand in for two hosts, the second
//! reached only through a real OpenSSH server on a loopback port (its own host key, one
//! authorized key, its own config) running `clibotctl dial-stdio` there. With the fake Telegram:
//! sessions addressed `MACHINE/NAME`, messages, replies and prompts routed to the right machine
//! and labelled with it, a chat bound on one machine at a time; the ssh connections killed
//! before a reply exists and that reply delivered once after the reconnect; the second daemon
//! stopped while the first keeps working; `clibotctl --host ssh://…` listing the remote
//! sessions.

use std::process::Command;
use std::time::{Duration, Instant};

use clibot_tests::asker::{ASK_FN, ASKER};
use clibot_tests::fake_telegram::{self, FakeTelegram, texts};
use clibot_tests::sshd::Sshd;
use clibot_tests::{Harness, bin};

const ADMIN: i64 = 100;
const MEL: i64 = 300;
const GROUP: i64 = -500;

fn access() -> String {
    format!(
        "\n[access.telegram]\npolicy = \"allowlist\"\nadmins = [\"{ADMIN}\"]\nclis = [\"*\"]\nsandbox = \"off\"\ngroups = [\"{GROUP}\"]\n{ASKER}"
    )
}

fn said(tg: &FakeTelegram, needle: &str) {
    tg.wait_sent(needle, |s| {
        texts(s, ADMIN).iter().any(|t| t.contains(needle))
    });
}

/// Waits until `needle` was said `n` times.
fn said_times(tg: &FakeTelegram, needle: &str, n: usize) {
    tg.wait_sent(needle, |s| {
        texts(s, ADMIN)
            .iter()
            .filter(|t| t.contains(needle))
            .count()
            >= n
    });
}

fn count(tg: &FakeTelegram, needle: &str) -> usize {
    texts(&tg.sent(), ADMIN)
        .iter()
        .filter(|t| t.contains(needle))
        .count()
}

fn screen(h: &Harness, name: &str) -> String {
    String::from_utf8_lossy(&h.ctl(&["screen", name, "--lines", "200"]).stdout).into_owned()
}

/// Kills every ssh client of this test's server (the gateway's connections and their shared
/// master), as a dropped link would; true when there was one.
fn kill_ssh(port: u16) -> bool {
    Command::new("pkill")
        .args(["-9", "-f", &format!("ssh .*-p {port} ")])
        .status()
        .is_ok_and(|s| s.success())
}

/// Waits until `clibotctl status` on `h` says `needle` (the gateway reports every 5 s).
fn wait_status(h: &Harness, needle: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let status = h.ctl_ok(&["status"]);
        if status.contains(needle) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "status never said {needle:?}:\n{status}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn one_gateway_serves_two_machines_one_over_ssh() {
    let ssh_dir = tempfile::tempdir().expect("a directory for sshd");
    let sshd = Sshd::start(ssh_dir.path());
    let mut b = Harness::with_config(&access());
    b.start_daemon();
    let remote = format!(
        "env CLIBOT_SOCKET={} {}",
        b.socket.display(),
        bin("clibotctl").display()
    );
    let options: Vec<String> = sshd
        .client_options()
        .iter()
        .map(|o| format!("{o:?}"))
        .collect();
    let mut a = Harness::with_config(&format!(
        "{}\n[[gateway.machines]]\nname = \"a\"\nsocket = \"@A@\"\nhome = true\n\n[[gateway.machines]]\nname = \"b\"\nssh = \"{}\"\nssh_options = [{}]\nremote_clibotctl = \"{remote}\"\n",
        // Mel may use clibot on a (the home machine) only.
        access().replace("admins =", &format!("allow = [\"{MEL}\"]\nadmins =")),
        sshd.url(),
        options.join(", ")
    ));
    // The home machine's socket, known once its harness is made.
    let config = std::fs::read_to_string(&a.config).expect("config");
    std::fs::write(
        &a.config,
        config.replace("@A@", &a.socket.display().to_string()),
    )
    .expect("config");
    a.start_daemon();
    let (tg, _g) = fake_telegram::with_gateway(&a);
    let (wa, wb) = (a.work.display().to_string(), b.work.display().to_string());

    // A session on each machine, each started by naming its machine.
    tg.push_message(ADMIN, ADMIN, "Owner", &format!("!!new a/one asker {wa}"));
    said(&tg, "[a] started one");
    tg.push_message(ADMIN, ADMIN, "Owner", &format!("!!new b/two asker {wb}"));
    said(&tg, "[b] started two");
    assert!(
        a.ctl_ok(&["list"]).contains("one") && !a.ctl_ok(&["list"]).contains("two"),
        "two is on b only"
    );
    assert!(b.ctl_ok(&["list"]).contains("two"));

    // The chat is bound to b's session now (and not to a's any more): text goes there, and
    // the reply comes back labelled with its machine.
    tg.push_message(ADMIN, ADMIN, "Owner", "echo bee-$((2*3))");
    b.wait_screen("two", "b's output", |s| s.contains("bee-6"));
    said(&tg, "[b] [two]");
    said(&tg, "bee-6");
    // `!!usage` is answered by each machine for itself.
    tg.push_message(ADMIN, ADMIN, "Owner", "!!usage");
    said(&tg, "[a] no turns of yours counted");
    said(&tg, "[b] no turns of yours counted");
    assert!(!screen(&a, "one").contains("bee-6"));

    // Access stays per machine: Mel, allowed on a only, gets nothing from b — no binding to
    // b's session, no session of her own there, nothing typed.
    tg.push_message(MEL, MEL, "Mel", "!!use b/two");
    tg.push_message(MEL, MEL, "Mel", &format!("!!new b/mine asker {wb}"));
    tg.wait_sent("b refusing Mel", |s| {
        texts(s, MEL)
            .iter()
            .any(|t| t.starts_with("[b]") && t.contains("not on the allowlist"))
    });
    std::thread::sleep(Duration::from_secs(1));
    assert!(!b.ctl_ok(&["list"]).contains("mine"));
    tg.push_message(MEL, MEL, "Mel", "echo mel-$((7*7))");
    std::thread::sleep(Duration::from_secs(1));
    assert!(!screen(&b, "two").contains("mel-49"));

    // A group the admin bound to b's session: Mel binding it to a session of hers on a does
    // not move it (she may not unbind it on b), so the admin's next message still goes to b.
    tg.push_message(GROUP, ADMIN, "Owner", "!!use b/two");
    tg.wait_sent("the group bound to b/two", |s| !texts(s, GROUP).is_empty());
    tg.push_message(GROUP, MEL, "Mel", "!!new a/mine asker");
    tg.wait_sent("the group staying with b", |s| {
        texts(s, GROUP)
            .iter()
            .any(|t| t.contains("stays with its session on b"))
    });
    tg.push_message(GROUP, ADMIN, "Owner", "echo grp-$((5*5))");
    b.wait_screen("two", "the admin's group text on b", |s| {
        s.contains("grp-25")
    });
    assert!(
        !screen(&a, "mine").contains("grp-25"),
        "typed into Mel's session"
    );

    // Lists come from both machines.
    tg.push_message(ADMIN, ADMIN, "Owner", "!!sessions");
    said(&tg, "[a] ");
    let listed = tg.wait_sent("both lists", |s| {
        let t = texts(s, ADMIN);
        t.iter().any(|x| x.starts_with("[a]") && x.contains("one"))
            && t.iter().any(|x| x.starts_with("[b]") && x.contains("two"))
    });
    assert!(!listed.is_empty());

    // Back to a: a's session gets the next message, b's does not.
    tg.push_message(ADMIN, ADMIN, "Owner", "!!use a/one");
    said(&tg, "[a] this chat now talks to one");
    tg.push_message(ADMIN, ADMIN, "Owner", "echo ay-$((3*3))");
    a.wait_screen("one", "a's output", |s| s.contains("ay-9"));
    assert!(!screen(&b, "two").contains("ay-9"));

    // A prompt on b reaches the chat with its buttons, and a press answers it there.
    tg.push_message(ADMIN, ADMIN, "Owner", "!!use b/two");
    said(&tg, "[b] this chat now talks to two");
    tg.push_message(ADMIN, ADMIN, "Owner", ASK_FN);
    tg.push_message(ADMIN, ADMIN, "Owner", "ask 'deploy b'");
    let sent = tg.wait_sent("b's prompt", |s| {
        s.iter()
            .any(|m| m.reply_markup.is_some() && m.text.contains("deploy b"))
    });
    let prompt = sent
        .iter()
        .rev()
        .find(|m| m.reply_markup.is_some() && m.text.contains("deploy b"))
        .expect("the prompt");
    assert!(prompt.text.starts_with("[b]"), "{}", prompt.text);
    let data =
        prompt.reply_markup.as_ref().expect("buttons")["inline_keyboard"][0][0]["callback_data"]
            .as_str()
            .expect("a callback button")
            .to_string();
    tg.push_callback(ADMIN, ADMIN, prompt.message_id, &data);
    b.wait_screen("two", "the answer ran on b", |s| {
        s.contains("decided deploy b: y")
    });

    // The ssh connections die before the reply exists; the reply comes once they are back.
    tg.push_message(ADMIN, ADMIN, "Owner", "sleep 2; echo late-$((4*4))");
    b.wait_screen("two", "the slow command typed", |s| {
        s.contains("sleep 2; echo late")
    });
    assert!(kill_ssh(sshd.port), "no ssh connection to kill");
    said(&tg, "late-16");
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(count(&tg, "late-16"), 1, "{:#?}", texts(&tg.sent(), ADMIN));

    // A prompt of b's, while the chat talks to a: `!!pending` shows it (from every machine) and
    // its button answers it on b.
    tg.push_message(ADMIN, ADMIN, "Owner", "!!use a/one");
    said_times(&tg, "[a] this chat now talks to one", 2);
    b.ctl_ok(&["send", "two", "ask 'from the desk'"]);
    b.wait_list("two waiting", |l| {
        l.as_array().is_some_and(|a| {
            a.iter()
                .any(|s| s["name"] == "two" && s["state"] == "waiting")
        })
    });
    tg.push_message(ADMIN, ADMIN, "Owner", "!!pending");
    let sent = tg.wait_sent("b's pending prompt", |s| {
        s.iter()
            .any(|m| m.reply_markup.is_some() && m.text.contains("from the desk"))
    });
    let pending = sent
        .iter()
        .rev()
        .find(|m| m.reply_markup.is_some() && m.text.contains("from the desk"))
        .expect("the pending prompt");
    let data =
        pending.reply_markup.as_ref().expect("buttons")["inline_keyboard"][0][0]["callback_data"]
            .as_str()
            .expect("a callback button")
            .to_string();
    tg.push_callback(ADMIN, ADMIN, pending.message_id, &data);
    b.wait_screen("two", "the desk's question answered from the chat", |s| {
        s.contains("decided from the desk: y")
    });
    tg.push_message(ADMIN, ADMIN, "Owner", "!!use b/two");
    said_times(&tg, "[b] this chat now talks to two", 2);
    // The gateway learns which chats a machine's sessions have when it looks (every 5 s).
    std::thread::sleep(Duration::from_secs(6));

    // `clibotctl --host` reaches b's daemon over the same ssh.
    let out = Command::new(bin("clibotctl"))
        .args(["--host", &sshd.url(), "list"])
        .env_remove("CLIBOT_SOCKET")
        .env("CLIBOT_NO_AUTOSTART", "1")
        .env(
            "CLIBOT_SSH",
            format!("ssh {}", sshd.client_options().join(" ")),
        )
        .env("CLIBOT_REMOTE_CLIBOTCTL", &remote)
        .output()
        .expect("clibotctl --host");
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && listed.contains("two") && !listed.contains("one"),
        "{listed}\n{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        sshd.log()
    );

    // `clibotctl status` on the home machine shows the gateway's machines.
    wait_status(&a, "machines: a ok, b ok");

    // b's daemon stops: the chat bound to it is told once; a goes on working.
    b.kill_daemon();
    said(&tg, "[b] ⚠ this machine cannot be reached");
    wait_status(&a, "b UNREACHABLE for");
    tg.push_message(ADMIN, ADMIN, "Owner", "!!use a/one");
    said(&tg, "[a] this chat now talks to one");
    tg.push_message(ADMIN, ADMIN, "Owner", "echo still-$((5*5))");
    a.wait_screen("one", "a still works", |s| s.contains("still-25"));
    tg.push_message(ADMIN, ADMIN, "Owner", "!!sessions");
    said(&tg, "[b] this machine cannot be reached right now");
    let deadline = Instant::now() + Duration::from_secs(6);
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(
        count(&tg, "⚠ this machine cannot be reached"),
        1,
        "told once"
    );
}

/// One counted turn as the ledger keeps it (`usage.jsonl` in the state directory).
fn ledger_line(seq: u64, session: &str, input: u64, output: u64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    format!(
        "{{\"time_ms\":{now},\"seq\":{seq},\"session\":\"{session}\",\"cli\":\"claude\",\"owner\":\"local\",\"model\":\"m\",\"input\":{input},\"output\":{output},\"cache_read\":0,\"cache_write\":0,\"calls\":1}}\n"
    )
}

/// `clibotctl usage --by machine` asks each daemon of `[[gateway.machines]]` and sums its turns
/// into one row; a machine that does not answer is named and the command fails (a total that
/// silently left it out would mislead), and `--host` is refused with it.
#[test]
fn usage_by_machine_sums_each_daemons_ledger_and_names_one_that_does_not_answer() {
    let mut b = Harness::with_config("");
    std::fs::create_dir_all(&b.state_dir).expect("mkdir");
    std::fs::write(
        b.state_dir.join("usage.jsonl"),
        ledger_line(7, "api", 1000, 50) + &ledger_line(9, "web", 500, 25),
    )
    .expect("b's ledger");
    b.start_daemon();
    let mut a = Harness::with_config("");
    std::fs::create_dir_all(&a.state_dir).expect("mkdir");
    std::fs::write(
        a.state_dir.join("usage.jsonl"),
        ledger_line(3, "one", 200, 5),
    )
    .expect("a's ledger");
    let (sa, sb) = (a.socket.clone(), b.socket.clone());
    let machines = |gone: bool| {
        let mut m = format!(
            "\n[[gateway.machines]]\nname = \"a\"\nsocket = \"{}\"\nhome = true\n\n[[gateway.machines]]\nname = \"b\"\nsocket = \"{}\"\n",
            sa.display(),
            sb.display()
        );
        if gone {
            m.push_str(
                "\n[[gateway.machines]]\nname = \"c\"\nsocket = \"/nonexistent/clibotd.sock\"\n",
            );
        }
        m
    };
    let base = std::fs::read_to_string(&a.config).expect("config");
    std::fs::write(&a.config, format!("{base}{}", machines(true))).expect("config");
    a.start_daemon();
    let out = a.ctl(&["usage", "--by", "machine", "--json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "c did not answer: {stderr}");
    assert!(stderr.contains("not counted: c ("), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let rows: Vec<(String, u64, u64, u64)> = v["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| {
            (
                r["key"].as_str().unwrap_or_default().to_string(),
                r["turns"].as_u64().unwrap_or(0),
                r["input"].as_u64().unwrap_or(0),
                r["output"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [("b".to_string(), 2, 1500, 75), ("a".to_string(), 1, 200, 5)],
        "{v:#}"
    );
    assert_eq!(v["unreachable"][0]["machine"], "c", "{v:#}");
    // Every machine answers: a table, and success.
    std::fs::write(&a.config, format!("{base}{}", machines(false))).expect("config");
    let table = a.ctl_ok(&["usage", "--by", "machine"]);
    assert!(table.starts_with("MACHINE"), "{table}");
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("b ") && l.contains("1.5k")),
        "{table}"
    );
    let csv = a.ctl_ok(&["usage", "--by", "machine", "--csv"]);
    assert!(csv.lines().any(|l| l == "a,1,1,200,5,0,0,"), "{csv}");
    let err = a.ctl_err(&["--host", "me@box", "usage", "--by", "machine"]);
    assert!(err.contains("leave out --host"), "{err}");
}
