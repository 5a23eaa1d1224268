//! Jobs from a chat, with the real gateway (teloxide against a fake Telegram) and clibotd: the
//! chat bound to a job's session reads each run (`⏰ job …`) and its end; `!!jobs` lists what the
//! user may see; a member may run and pause the jobs of their sessions and nobody else's;
//! `!!job add` shows a card and adds the job only on its Add button, pressed by the one who
//! wrote it, also after the gateway restarted in between.

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
            .any(|t| t.contains("⏰ job tidy (run 1, run by hand): echo tidied"))
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

#[test]
fn a_job_added_in_the_chat_exists_only_once_its_card_is_confirmed_by_its_author() {
    let (h, tg, mut g) = fake_telegram::started(&format!(
        "\n[access.telegram]\npolicy = \"allowlist\"\nallow = [\"{ANN}\", \"{BOB}\"]\nadmins = [\"{ADMIN}\"]\nclis = [\"bash\"]\nsandbox = \"off\"\n"
    ));
    tg.push_message(ANN, ANN, "Ann", "!!new mine bash");
    tg.wait_sent("Ann's session", |s| {
        texts(s, ANN).iter().any(|t| t.contains("started mine"))
    });
    let jobs = |h: &clibot_tests::Harness| -> usize {
        serde_json::from_str::<serde_json::Value>(&h.ctl_ok(&["jobs", "list", "--json"]))
            .ok()
            .and_then(|v| v.as_array().map(Vec::len))
            .unwrap_or(0)
    };
    // Mistakes are told at once, naming the field; nothing is shown to confirm.
    tg.push_message(
        ANN,
        ANN,
        "Ann",
        "!!job add tidy session=mine every=10s prompt=echo x",
    );
    tg.push_message(
        ANN,
        ANN,
        "Ann",
        "!!job add tidy session=nobody every=1h prompt=echo x",
    );
    tg.push_message(ANN, ANN, "Ann", "!!job add tidy session=mine every=1h");
    tg.wait_sent("the refusals", |s| {
        let t = texts(s, ANN);
        t.iter()
            .any(|t| t.contains("every: \"10s\" is shorter than a minute"))
            && t.iter()
                .any(|t| t.contains("session: no session named \"nobody\""))
            && t.iter().any(|t| t.contains("prompt"))
    });
    // A member may not propose a job into a session that is not theirs.
    tg.push_message(
        BOB,
        BOB,
        "Bob",
        "!!job add sneak session=mine every=1h prompt=echo pwned",
    );
    tg.wait_sent("Bob refused", |s| {
        texts(s, BOB).iter().any(|t| t.contains("mine"))
    });
    assert!(
        !tg.sent()
            .iter()
            .any(|m| m.chat_id == BOB && m.reply_markup.is_some()),
        "Bob got no card"
    );

    tg.push_message(
        ANN,
        ANN,
        "Ann",
        "!!job add tidy session=mine every=1h quiet prompt=echo tidied-$((5*5))",
    );
    let (message, data) = tg.buttons(ANN, "⏰ Add job tidy?");
    assert_eq!(data.len(), 2, "Add and Cancel: {data:?}");
    let card = tg.message(message).map(|m| m.text).unwrap_or_default();
    assert!(
        card.contains("every 1h") && card.contains("into: mine") && card.contains("echo tidied"),
        "{card}"
    );
    assert_eq!(jobs(&h), 0, "nothing exists before Add");
    // The gateway dies and comes back: the card still works (the daemon keeps it).
    let _ = g.kill();
    let _ = g.wait();
    let mut g = fake_telegram::gateway(&h, &tg);
    // Bob presses Ann's button: not his.
    tg.push_callback(ANN, BOB, message, &data[0]);
    tg.wait_sent("Bob's press refused", |s| {
        s.iter().any(|m| m.text.contains("not yours"))
    });
    assert_eq!(jobs(&h), 0);
    tg.push_callback(ANN, ANN, message, &data[0]);
    tg.wait_sent("added", |s| {
        texts(s, ANN)
            .iter()
            .any(|t| t.contains("⏰ job tidy added; first run in"))
    });
    let j: serde_json::Value =
        serde_json::from_str(&h.ctl_ok(&["jobs", "show", "tidy", "--json"])).expect("json");
    assert_eq!(
        (
            j["owner"].as_str(),
            j["every"].as_str(),
            j["quiet"].as_bool()
        ),
        (
            Some(format!("telegram:{ANN}").as_str()),
            Some("1h"),
            Some(true)
        ),
        "{j:#}"
    );
    // A second press adds nothing more.
    tg.push_callback(ANN, ANN, message, &data[0]);
    tg.wait_sent("answered already", |s| {
        texts(s, ANN).iter().any(|t| t.contains("answered already"))
    });
    // Cancel drops a card's job.
    tg.push_message(
        ANN,
        ANN,
        "Ann",
        "!!job add other session=mine after=2h prompt=echo later",
    );
    let (message, data) = tg.buttons(ANN, "⏰ Add job other?");
    tg.push_callback(ANN, ANN, message, &data[1]);
    tg.wait_sent("cancelled", |s| {
        texts(s, ANN).iter().any(|t| t == "not added")
    });
    assert_eq!(jobs(&h), 1, "only tidy");
    // Ann loses access (the allowlist no longer names her): her job pauses now, not at its
    // next run an hour away.
    let config = std::fs::read_to_string(&h.config).expect("config");
    std::fs::write(
        &h.config,
        config.replace(
            &format!("allow = [\"{ANN}\", \"{BOB}\"]"),
            &format!("allow = [\"{BOB}\"]"),
        ),
    )
    .expect("config");
    h.ctl_ok(&["reload"]);
    let j: serde_json::Value =
        serde_json::from_str(&h.ctl_ok(&["jobs", "show", "tidy", "--json"])).expect("json");
    assert_eq!(j["paused"], true, "{j:#}");
    assert!(
        j["paused_why"]
            .as_str()
            .is_some_and(|w| w.contains("no longer has access")),
        "{j:#}"
    );
    let _ = g.kill();
    let _ = g.wait();
}

/// A session hits its plan's usage limit (a program saying so in the words a provider uses
/// through Qwen Code, with the reset to the second): the chat reads when it resets, with
/// **Resume at reset** and **Delegate now**; Resume adds a one-off job of the presser's that
/// types "continue" once the limit has reset, and someone else's press does nothing.
#[test]
fn a_usage_limit_offers_to_resume_at_its_reset_and_the_session_continues_then() {
    let (h, tg, mut g) = fake_telegram::started(&format!(
        "\n[access.telegram]\npolicy = \"allowlist\"\nallow = [\"{ANN}\", \"{BOB}\"]\nadmins = [\"{ADMIN}\"]\nclis = [\"bash\"]\nsandbox = \"off\"\n"
    ));
    tg.push_message(ANN, ANN, "Ann", "!!new mine bash");
    tg.wait_sent("Ann's session", |s| {
        texts(s, ANN).iter().any(|t| t.contains("started mine"))
    });
    // The typed line does not read as the limit; its output does.
    tg.push_message(
        ANN,
        ANN,
        "Ann",
        "printf 'Quota exh%s: the 5-hour quota is exhausted and will reset at %s UTC.\\n' austed \"$(date -u -d '+15 sec' '+%Y-%m-%d %H:%M:%S')\"",
    );
    let (message, data) = tg.buttons(ANN, "⛔ usage limit");
    assert_eq!(data.len(), 2, "Resume at reset and Delegate now: {data:?}");
    let card = tg.message(message).map(|m| m.text).unwrap_or_default();
    assert!(card.contains("It resets in"), "{card}");
    let err: Vec<serde_json::Value> = h
        .events()
        .into_iter()
        .filter(|e| e["type"] == "error" && e["kind"] == "usage_limit")
        .collect();
    assert_eq!(err.len(), 1, "{err:?}");
    // Bob's press on Ann's card: not his.
    tg.push_callback(ANN, BOB, message, &data[0]);
    tg.wait_sent("Bob's press refused", |s| {
        s.iter().any(|m| {
            m.text
                .contains("no session named \"mine\" that you may use")
        })
    });
    tg.push_callback(ANN, ANN, message, &data[0]);
    tg.wait_sent("resume planned", |s| {
        texts(s, ANN)
            .iter()
            .any(|t| t.contains("mine is told to continue in") && t.contains("job resume-mine-"))
    });
    let jobs: serde_json::Value =
        serde_json::from_str(&h.ctl_ok(&["jobs", "list", "--json"])).expect("json");
    let job = &jobs[0];
    assert_eq!(
        (job["session"].as_str(), job["owner"].as_str()),
        (Some("mine"), Some(format!("telegram:{ANN}").as_str())),
        "{jobs:#}"
    );
    // Once the limit has reset (and half a minute more), "continue" is typed into the session.
    h.wait_event(
        "mine",
        "continue typed",
        std::time::Duration::from_secs(90),
        |e| e["type"] == "input_sent" && e["text"] == "continue",
    );
    let _ = g.kill();
    let _ = g.wait();
}

/// An admin's session hits its usage limit while its CLI has other account profiles: the card
/// offers **Switch to PROFILE** for each; the press starts the session again with that
/// profile's environment, said in the chat, and `show` names the profile. A member's session
/// is offered none (profiles name an account's credentials).
#[test]
fn a_usage_limit_offers_to_switch_to_another_account_profile() {
    let (h, tg, mut g) = fake_telegram::started(&format!(
        "\n[access.telegram]\npolicy = \"allowlist\"\nallow = [\"{ANN}\"]\nadmins = [\"{ADMIN}\"]\nclis = [\"bash\"]\nsandbox = \"off\"\n\n[cli.bash.profiles.night]\nenv = {{ CLIBOT_ACCOUNT = \"night-shift\" }}\n"
    ));
    let limit = "printf 'Quota exh%s: the 5-hour quota is exhausted and will reset at %s UTC.\\n' austed \"$(date -u -d '+2 hour' '+%Y-%m-%d %H:%M:%S')\"";
    // A session of `user`'s, whose output is a usage limit: its card's message and buttons.
    let card_of = |user: i64, who: &str, name: &str| {
        tg.push_message(user, user, who, &format!("!!new {name} bash"));
        tg.wait_sent("the session", |s| {
            texts(s, user)
                .iter()
                .any(|t| t.contains(&format!("started {name}")))
        });
        tg.push_message(user, user, who, limit);
        tg.buttons(user, "⛔ usage limit")
    };
    let (message, data) = card_of(ADMIN, "Admin", "box");
    assert_eq!(
        data.len(),
        3,
        "Resume at reset, Delegate now and Switch to night: {data:?}"
    );
    let card = tg
        .message(message)
        .map(|m| format!("{} {:?}", m.text, m.reply_markup))
        .unwrap_or_default();
    assert!(card.contains("Switch to night"), "{card}");
    tg.push_callback(ADMIN, ADMIN, message, &data[2]);
    tg.wait_sent("the switch told", |s| {
        texts(s, ADMIN)
            .iter()
            .any(|t| t.contains("box starts again with profile night"))
    });
    h.wait_event(
        "box",
        "running again",
        std::time::Duration::from_secs(30),
        |e| e["type"] == "notice" && e["kind"] == "profile",
    );
    let show: serde_json::Value =
        serde_json::from_str(&h.ctl_ok(&["show", "box", "--json"])).expect("json");
    assert_eq!(show["profile"], "night", "{show:#}");
    // The profile's environment is the shell's now.
    tg.push_message(ADMIN, ADMIN, "Admin", "echo account=$CLIBOT_ACCOUNT");
    tg.wait_sent("the new account's variable", |s| {
        texts(s, ADMIN)
            .iter()
            .any(|t| t.contains("account=night-shift"))
    });
    // A member's session: no profile to switch to.
    let (_, data) = card_of(ANN, "Ann", "mine");
    assert_eq!(
        data.len(),
        2,
        "Resume at reset and Delegate now, no profile: {data:?}"
    );
    let _ = g.kill();
    let _ = g.wait();
}
