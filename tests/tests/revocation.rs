//! Taking access back takes effect at once: after a share is revoked, an allowlist entry is
//! removed (and the config reloaded) or a pairing is revoked, that user's chat is told once
//! and receives nothing more of the session; control keys are never a share's.

use std::process::Child;
use std::time::Duration;

use clibot_tests::Harness;
use clibot_tests::fake_discord::{self, SentMessage};
use clibot_tests::fake_telegram::{self, FakeTelegram, texts};

const ADMIN: i64 = 100;
const ANN: i64 = 200;

fn setup(extra: &str) -> (Harness, FakeTelegram, Child) {
    fake_telegram::started(&format!(
        "\n[access.telegram]\npolicy = \"allowlist\"\nallow = [\"{ANN}\"]\nadmins = [\"{ADMIN}\"]\nclis = [\"*\"]\n{extra}"
    ))
}

fn says(tg: &FakeTelegram, chat: i64, what: &str) {
    tg.wait_sent(what, |s| texts(s, chat).iter().any(|t| t.contains(what)));
}

/// Waits a little, then insists `chat` was never shown `what`.
fn never(tg: &FakeTelegram, chat: i64, what: &str) {
    std::thread::sleep(Duration::from_millis(1500));
    let sent = tg.sent();
    assert!(
        !texts(&sent, chat).iter().any(|t| t.contains(what)),
        "{chat} was shown {what:?}: {:?}",
        texts(&sent, chat)
    );
}

#[test]
fn a_revoked_share_stops_the_output_at_once_and_keys_are_never_a_shares() {
    let (h, tg, mut g) = setup("");
    let work = h.work.display().to_string();
    tg.push_message(ADMIN, ADMIN, "Admin", &format!("!!new s bash {work}"));
    says(&tg, ADMIN, "started s");
    tg.push_message(ADMIN, ADMIN, "Admin", &format!("!!share s {ANN}"));
    says(&tg, ADMIN, &format!("telegram:{ANN} may now use s"));
    tg.push_message(ANN, ANN, "Ann", "!!use s");
    tg.push_message(ANN, ANN, "Ann", "echo ann-$((40+2))");
    says(&tg, ANN, "ann-42");
    // A share may type, but not press control keys.
    tg.push_message(ANN, ANN, "Ann", "!!keys C-c");
    says(
        &tg,
        ANN,
        "control keys are for admins and the session's owner",
    );
    // Text from a chat never acts as a key press.
    tg.push_message(ANN, ANN, "Ann", "echo esc-\u{1b}[A-\u{3}");
    says(&tg, ANN, "control character U+001B");
    assert!(!h.events().iter().any(
        |e| e["type"] == "input_sent" && e["text"].as_str().is_some_and(|t| t.contains("esc-"))
    ));
    // The admin takes the share back: Ann's chat is told once, then sees nothing more.
    tg.push_message(ADMIN, ADMIN, "Admin", &format!("!!share s {ANN} off"));
    tg.push_message(ADMIN, ADMIN, "Admin", "echo after-$((1+1))");
    says(&tg, ADMIN, "after-2");
    says(&tg, ANN, &format!("telegram:{ANN} may no longer use s"));
    never(&tg, ANN, "after-2");
    tg.push_message(ANN, ANN, "Ann", "echo sneaky-$((3+3))");
    never(&tg, ANN, "sneaky-6");
    assert!(
        !h.events().iter().any(|e| e["type"] == "input_sent"
            && e["text"].as_str().is_some_and(|t| t.contains("sneaky")))
    );
    let audit = std::fs::read_to_string(h.state_dir.join("audit.jsonl")).expect("audit");
    assert!(audit.contains("\"action\":\"unbind\""), "{audit}");
    let _ = g.kill();
    let _ = g.wait();
}

#[test]
fn an_allowlist_removal_applies_on_reload_and_an_invalid_file_changes_nothing() {
    let (h, tg, mut g) = setup("");
    tg.push_message(ANN, ANN, "Ann", "!!new mine bash");
    says(&tg, ANN, "started mine");
    // A jailed bash takes a moment to start; what is typed before it reads may be dropped.
    h.wait_screen("mine", "bash ready", |s| s.contains('$'));
    tg.push_message(ANN, ANN, "Ann", "echo own-$((2+3))");
    says(&tg, ANN, "own-5");
    // Owners press keys in their own sessions.
    tg.push_message(ANN, ANN, "Ann", "!!keys C-c");
    never(&tg, ANN, "control keys are for admins");
    // A broken file is refused whole.
    let good = std::fs::read_to_string(&h.config).expect("config");
    std::fs::write(&h.config, format!("{good}\n[access.telegram.oops\n")).expect("write");
    let out = h.ctl(&["reload"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("nothing was changed"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    tg.push_message(ANN, ANN, "Ann", "echo still-$((3+4))");
    says(&tg, ANN, "still-7");
    // Ann is taken off the allowlist; the reload says what changed, and applies at once.
    std::fs::write(
        &h.config,
        good.replace(&format!("allow = [\"{ANN}\"]"), "allow = []"),
    )
    .expect("write");
    let report: serde_json::Value =
        serde_json::from_str(&h.ctl_ok(&["reload", "--json"])).expect("json");
    assert_eq!(
        report["reloaded"],
        serde_json::json!(["access"]),
        "{report}"
    );
    h.ctl_ok(&["send", "mine", "echo gone-$((4+4))"]);
    says(&tg, ANN, &format!("telegram:{ANN} may no longer use mine"));
    never(&tg, ANN, "gone-8");
    tg.push_message(ANN, ANN, "Ann", "echo ignored-$((5+5))");
    never(&tg, ANN, "ignored-10");
    assert!(
        !h.events().iter().any(|e| e["type"] == "input_sent"
            && e["text"].as_str().is_some_and(|t| t.contains("ignored")))
    );
    let _ = g.kill();
    let _ = g.wait();
}

#[test]
fn a_revoked_pairing_stops_the_output() {
    let (h, tg, mut g) = fake_telegram::started(&format!(
        "\n[access.telegram]\npolicy = \"pairing\"\nadmins = [\"{ADMIN}\"]\nclis = [\"*\"]\n"
    ));
    tg.push_message(ANN, ANN, "Ann", "hello");
    let code = fake_telegram::pairing_code(&tg, ANN);
    h.ctl_ok(&["pairing", "approve", &code]);
    tg.push_message(ANN, ANN, "Ann", "!!new p bash");
    says(&tg, ANN, "started p");
    h.wait_screen("p", "bash ready", |s| s.contains('$'));
    tg.push_message(ANN, ANN, "Ann", "echo paired-$((1+6))");
    says(&tg, ANN, "paired-7");
    h.ctl_ok(&["pairing", "revoke", "telegram", &ANN.to_string()]);
    h.ctl_ok(&["send", "p", "echo unpaired-$((2+6))"]);
    says(&tg, ANN, &format!("telegram:{ANN} may no longer use p"));
    never(&tg, ANN, "unpaired-8");
    let _ = g.kill();
    let _ = g.wait();
}

const DC_ADMIN: u64 = 1_300_000_000_000_000_100;
const DC_ANN: u64 = 1_300_000_000_000_000_200;
const DC_ADMIN_DM: u64 = 1_400_000_000_000_000_100;
const DC_ANN_DM: u64 = 1_400_000_000_000_000_200;

fn contents(sent: &[SentMessage], channel: u64) -> Vec<String> {
    sent.iter()
        .filter(|m| m.channel_id == channel)
        .map(|m| m.text())
        .collect()
}

#[test]
fn on_discord_a_revoked_share_stops_the_output_and_keys_are_refused() {
    let (h, dc, mut g) = fake_discord::started(&format!(
        "\n[access.discord]\npolicy = \"allowlist\"\nallow = [\"{DC_ANN}\"]\nadmins = [\"{DC_ADMIN}\"]\n"
    ));
    let work = h.work.display().to_string();
    let wait = |chan: u64, what: &str| {
        dc.wait_sent(what, |s| contents(s, chan).iter().any(|t| t.contains(what)));
    };
    dc.push_message(
        DC_ADMIN_DM,
        DC_ADMIN,
        "admin",
        &format!("!!new s bash {work}"),
    );
    wait(DC_ADMIN_DM, "started s");
    dc.push_message(
        DC_ADMIN_DM,
        DC_ADMIN,
        "admin",
        &format!("!!share s {DC_ANN}"),
    );
    wait(DC_ADMIN_DM, "may now use s");
    dc.push_message(DC_ANN_DM, DC_ANN, "ann", "!!use s");
    dc.push_message(DC_ANN_DM, DC_ANN, "ann", "echo dc-$((20+1))");
    wait(DC_ANN_DM, "dc-21");
    dc.push_message(DC_ANN_DM, DC_ANN, "ann", "!!keys C-d");
    wait(
        DC_ANN_DM,
        "control keys are for admins and the session's owner",
    );
    dc.push_message(
        DC_ADMIN_DM,
        DC_ADMIN,
        "admin",
        &format!("!!share s {DC_ANN} off"),
    );
    dc.push_message(DC_ADMIN_DM, DC_ADMIN, "admin", "echo later-$((2+2))");
    wait(DC_ADMIN_DM, "later-4");
    wait(DC_ANN_DM, "may no longer use s");
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        !contents(&dc.sent(), DC_ANN_DM)
            .iter()
            .any(|t| t.contains("later-4")),
        "{:?}",
        contents(&dc.sent(), DC_ANN_DM)
    );
    // The session is still there: the share's C-d did not end it.
    assert!(h.ctl_ok(&["list"]).contains("s"));
    let _ = g.kill();
    let _ = g.wait();
}
