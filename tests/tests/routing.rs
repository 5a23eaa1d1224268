//! Routing a new task: `!!ask TEXT` and `clibotctl route TEXT` choose the CLI by the first
//! matching `[[routes]]` entry, else by the decider; a session of it starts and gets the text;
//! the chat is told which CLI and why.

use clibot_tests::fake_telegram::{self, texts};
use clibot_tests::{Harness, lines};

const ADMIN: i64 = 100;

/// Two shells standing in for two CLIs, a route for refactoring, and a decider that picks
/// `beta` (as a name) for anything about docs and says why; it logs what it was asked.
fn setup() -> Harness {
    let h = Harness::new();
    let log = h.dir.path().join("decider.log");
    let decider = h.dir.path().join("decider.sh");
    std::fs::write(
        &decider,
        format!(
            "#!/bin/sh\ncat > {log:?}\nif grep -q docs {log:?}; then echo '{{\"choice\": \"beta\", \"note\": \"beta writes the best docs\"}}'; else echo '{{\"ask\": true, \"note\": \"not sure\"}}'; fi\n"
        ),
    )
    .expect("write decider");
    std::process::Command::new("chmod")
        .args(["+x", &decider.display().to_string()])
        .status()
        .expect("chmod");
    let text = std::fs::read_to_string(&h.config).expect("config");
    let shell = "argv = [\"bash\", \"--norc\", \"--noprofile\"]\nenv = { PS1 = \"$ \", HISTFILE = \"/dev/null\" }\nsubmit_delay_ms = 50\nquiet_ms = 300\n";
    let text = format!(
        "{text}\n[cli.alpha]\n{shell}\n[cli.beta]\n{shell}\n[[routes]]\nmatch = '(?i)\\brefactor'\ncli = \"alpha\"\nwhy = \"alpha is the refactoring CLI\"\n\n[decider]\ncommand = [{:?}]\ntimeout_ms = 5000\n\n[access.telegram]\npolicy = \"pairing\"\nadmins = [\"{ADMIN}\"]\n",
        decider.display().to_string()
    );
    std::fs::write(&h.config, text).expect("write config");
    h
}

#[test]
fn ask_routes_by_a_rule_and_by_the_decider() {
    let mut h = setup();
    h.start_daemon();
    let (tg, mut g) = fake_telegram::with_gateway(&h);

    // A route matches: alpha, with the route's reason.
    tg.push_message(ADMIN, ADMIN, "Owner", "!!ask echo refactor-$((40+2))");
    tg.wait_sent("the route's choice", |s| {
        texts(s, ADMIN).iter().any(|t| {
            t.contains("→ alpha (route 1: alpha is the refactoring CLI)")
                && t.contains("started alpha-1")
        })
    });
    h.wait_screen("alpha-1", "the task typed", |t| {
        lines(t).contains(&"refactor-42")
    });
    // The chat now talks to it: its reply comes back.
    tg.wait_sent("the reply", |s| {
        texts(s, ADMIN).iter().any(|t| t.contains("refactor-42"))
    });

    // No route matches: the decider chooses among the CLIs, and says why.
    tg.push_message(ADMIN, ADMIN, "Owner", "!!ask echo docs-$((6*7))");
    tg.wait_sent("the decider's choice", |s| {
        texts(s, ADMIN).iter().any(|t| {
            t.contains("→ beta (decider: beta writes the best docs)")
                && t.contains("started beta-1")
        })
    });
    h.wait_screen("beta-1", "the task typed", |t| {
        lines(t).contains(&"docs-42")
    });
    let asked = std::fs::read_to_string(h.dir.path().join("decider.log")).expect("decider log");
    let asked: serde_json::Value = serde_json::from_str(&asked).expect("the decider got JSON");
    assert_eq!(asked["prompt"]["kind"], "route", "{asked}");
    let options = asked["prompt"]["options"].to_string();
    assert!(
        options.contains("alpha") && options.contains("beta"),
        "{asked}"
    );

    // The decider declines: nothing starts, and the chat is told to name the CLI.
    tg.push_message(ADMIN, ADMIN, "Owner", "!!ask something else");
    tg.wait_sent("the refusal", |s| {
        texts(s, ADMIN)
            .iter()
            .any(|t| t.contains("left the choice to you") && t.contains("!!new"))
    });
    let _ = g.kill();
    let _ = g.wait();
}

#[test]
fn clibotctl_route_chooses_and_starts() {
    let mut h = setup();
    h.start_daemon();
    let work = h.work.display().to_string();
    let dry = h.ctl_ok(&["route", "please refactor this", "--dry-run", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&dry).expect("json");
    assert_eq!(v["cli"], "alpha");
    assert_eq!(v["by"], "route 1");
    assert!(v["session"].is_null(), "{v}");
    assert!(h.ctl_ok(&["list"]).lines().all(|l| !l.contains("alpha-")));

    let out = h.ctl_ok(&[
        "route",
        "echo refactored-$((1+1))",
        "--dir",
        &work,
        "--name",
        "job",
    ]);
    assert!(
        out.contains("alpha (route 1") && out.contains("started job"),
        "{out}"
    );
    h.wait_screen("job", "the task typed", |t| {
        lines(t).contains(&"refactored-2")
    });
}
