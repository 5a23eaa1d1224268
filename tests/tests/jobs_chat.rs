//! Jobs from a chat, with the real gateway (teloxide against a fake Telegram) and clibotd: the
//! chat bound to a job's session reads each run (`⏰ job …`) and its end; `!!jobs` lists what the
//! user may see; a member may run and pause the jobs of their sessions and nobody else's.

use clibot_tests::fake_telegram::{self, texts};

const ADMIN: i64 = 100;
const ANN: i64 = 200;
const BOB: i64 = 300;

#[test]
fn a_job_is_seen_run_and_paused_from_the_chat_by_whom_it_belongs_to() {
    let (h, tg, mut g) = fake_telegram::started(&format!(
        "\n[access.telegram]\npolicy = \"allowlist\"\nallow = [\"{ANN}\", \"{BOB}\"]\nadmins = [\"{ADMIN}\"]\nclis = [\"bash\"]\nsandbox = \"off\"\n"
    ));
    tg.push_message(ANN, ANN, "Ann", "!!new mine bash");
    tg.wait_sent("Ann's session", |s| {
        texts(s, ANN).iter().any(|t| t.contains("started mine"))
    });
    // The machine's user adds a job for Ann's session; Ann's chat is bound to it.
    h.ctl_ok(&[
        "jobs",
        "add",
        "tidy",
        "--session",
        "mine",
        "--prompt",
        "echo tidied-$((3*3))",
        "--every",
        "1h",
    ]);
    tg.push_message(ANN, ANN, "Ann", "!!jobs");
    tg.wait_sent("Ann's list", |s| {
        texts(s, ANN)
            .iter()
            .any(|t| t.contains("⏰ jobs:") && t.contains("tidy — every 1h → mine"))
    });
    // Bob sees nothing of it and may not run it.
    tg.push_message(BOB, BOB, "Bob", "!!jobs");
    tg.push_message(BOB, BOB, "Bob", "!!job run tidy");
    tg.wait_sent("Bob refused", |s| {
        let t = texts(s, BOB);
        t.iter().any(|t| t.contains("no jobs you may see"))
            && t.iter().any(|t| t.contains("no job \"tidy\""))
    });
    // The job types into Ann's session: she may run it.
    tg.push_message(ANN, ANN, "Ann", "!!job run tidy");
    tg.wait_sent("Ann's run", |s| {
        texts(s, ANN)
            .iter()
            .any(|t| t.contains("⏰ job tidy: run 1 started in mine"))
    });
    // Ann's chat, bound to the session, reads the run and its end.
    tg.wait_sent("the run in Ann's chat", |s| {
        let t = texts(s, ANN);
        t.iter()
            .any(|t| t.contains("⏰ job tidy (run 1): echo tidied"))
            && t.iter().any(|t| t.contains("tidied-9"))
            && t.iter().any(|t| t.contains("⏰ job tidy (run 1) done"))
    });
    tg.push_message(ADMIN, ADMIN, "Owner", "!!job pause tidy");
    tg.wait_sent("paused", |s| {
        texts(s, ADMIN)
            .iter()
            .any(|t| t.contains("job tidy paused"))
    });
    let j: serde_json::Value =
        serde_json::from_str(&h.ctl_ok(&["jobs", "show", "tidy", "--json"])).expect("json");
    assert_eq!(j["paused"], true, "{j:#}");
    assert_eq!(j["runs"], 1, "{j:#}");
    // Nothing of Bob's attempt ran anything.
    let started = h
        .events()
        .into_iter()
        .filter(|e| e["type"] == "job_started")
        .count();
    assert_eq!(started, 1);
    let _ = g.kill();
    let _ = g.wait();
}
