use super::*;

const CMD: &str = "'/home/u/.cargo/bin/clibotctl' hook --cli claude --global";

/// A user's Claude settings with a hook of their own and odd formatting: tabs, CRLF, trailing
/// spaces, unicode, keys out of alphabetical order.
const USER: &str = "{\r\n\t\"model\": \"opus\",  \r\n\t\"hooks\": {\r\n\t\t\"Stop\": [ { \"hooks\": [ { \"type\": \"command\", \"command\": \"notify-send 'fertig ✓'\" } ] } ]\r\n\t},\r\n\t\"env\": {\"Ünïcode\": \"日本\"}\r\n}\r\n";

fn value(text: &str) -> serde_json::Value {
    serde_json::from_str(text).expect("valid JSON")
}

#[test]
fn install_keeps_the_users_hooks_and_settings() {
    let out = install(Some(USER), Cli::Claude, CMD)
        .expect("install")
        .expect("changed");
    let v = value(&out);
    assert_eq!(v["model"], "opus");
    assert_eq!(v["env"]["Ünïcode"], "日本");
    let stop = v["hooks"]["Stop"].as_array().expect("Stop list");
    assert_eq!(stop.len(), 2);
    assert_eq!(stop[0]["hooks"][0]["command"], "notify-send 'fertig ✓'");
    assert_eq!(stop[1]["hooks"][0]["command"], CMD);
    assert_eq!(stop[1]["hooks"][0]["timeout"], 10);
    let perm = &v["hooks"]["PermissionRequest"][0];
    assert_eq!(perm["matcher"], "*");
    assert_eq!(perm["hooks"][0]["timeout"], 86400);
    // The file's order and layout: model first, tabs, CRLF.
    assert!(out.starts_with("{\r\n\t\"model\""), "{out}");
    assert!(!out.replace("\r\n", "").contains('\n'), "{out}");
    assert_eq!(
        installed_events(&out).expect("events"),
        [
            "Stop",
            "UserPromptSubmit",
            "StopFailure",
            "Notification",
            "SessionEnd",
            "PermissionRequest"
        ]
    );
}

#[test]
fn installing_twice_changes_nothing() {
    let once = install(Some(USER), Cli::Claude, CMD)
        .expect("install")
        .expect("changed");
    assert_eq!(install(Some(&once), Cli::Claude, CMD), Ok(None));
}

#[test]
fn a_moved_clibotctl_is_updated_not_doubled() {
    let once = install(
        Some(USER),
        Cli::Claude,
        "'/old/clibotctl' hook --cli claude --global",
    )
    .expect("install")
    .expect("changed");
    let twice = install(Some(&once), Cli::Claude, CMD)
        .expect("install")
        .expect("changed");
    let v = value(&twice);
    assert_eq!(v["hooks"]["Stop"].as_array().map(Vec::len), Some(2));
    assert!(!twice.contains("/old/"), "{twice}");
}

#[test]
fn uninstall_after_install_gives_back_the_same_settings() {
    let once = install(Some(USER), Cli::Claude, CMD)
        .expect("install")
        .expect("changed");
    // Without the backup's bytes: same content, key order and layout.
    let back = uninstall(&once, Cli::Claude, None)
        .expect("uninstall")
        .expect("changed");
    assert_eq!(value(&back), value(USER));
    assert!(back.starts_with("{\r\n\t\"model\""), "{back}");
    assert_eq!(uninstall(&back, Cli::Claude, None), Ok(None));
}

#[test]
fn an_edited_file_loses_only_clibots_entries() {
    let once = install(Some(USER), Cli::Claude, CMD)
        .expect("install")
        .expect("changed");
    let mut v = value(&once);
    v["theme"] = "dark".into();
    v["hooks"]["Stop"][1]["hooks"]
        .as_array_mut()
        .expect("list")
        .push(serde_json::json!({"type": "command", "command": "mine-too"}));
    let edited = serde_json::to_string_pretty(&v).expect("json");
    let back = uninstall(&edited, Cli::Claude, Some(Some(USER)))
        .expect("uninstall")
        .expect("changed");
    let b = value(&back);
    assert_eq!(b["theme"], "dark");
    assert_eq!(b["hooks"]["Stop"][1]["hooks"][0]["command"], "mine-too");
    assert!(b["hooks"].get("PermissionRequest").is_none(), "{back}");
    assert!(!back.contains("--global"), "{back}");
}

#[test]
fn lists_and_objects_clibot_created_go_those_the_user_had_stay() {
    let original = r#"{"hooks": {"Stop": []}}"#;
    let once = install(Some(original), Cli::Claude, CMD)
        .expect("install")
        .expect("changed");
    let back = uninstall(&once, Cli::Claude, Some(Some(original)))
        .expect("uninstall")
        .expect("changed");
    assert_eq!(value(&back), value(original));
    let from_nothing = install(None, Cli::Codex, CMD)
        .expect("install")
        .expect("changed");
    let back = uninstall(&from_nothing, Cli::Codex, Some(None))
        .expect("uninstall")
        .expect("changed");
    assert_eq!(value(&back), serde_json::json!({}));
}

#[test]
fn gemini_hooks_are_switched_on_unless_the_user_said_otherwise() {
    let out = install(Some("{}"), Cli::Gemini, CMD)
        .expect("install")
        .expect("changed");
    let v = value(&out);
    assert_eq!(v["hooksConfig"]["enabled"], true);
    assert_eq!(
        v["hooks"]["AfterAgent"][0]["hooks"][0]["name"],
        "clibot-AfterAgent"
    );
    assert_eq!(v["hooks"]["AfterAgent"][0]["hooks"][0]["timeout"], 10000);
    assert_eq!(v["hooks"]["AfterAgent"][0]["matcher"], "");
    let back = uninstall(&out, Cli::Gemini, Some(Some("{}")))
        .expect("uninstall")
        .expect("changed");
    assert_eq!(value(&back), serde_json::json!({}));

    let off = r#"{"hooksConfig": {"enabled": false}}"#;
    let out = install(Some(off), Cli::Gemini, CMD)
        .expect("install")
        .expect("changed");
    assert_eq!(value(&out)["hooksConfig"]["enabled"], false);
    assert!(hooks_disabled(&out));
}

#[test]
fn what_is_not_a_settings_object_is_refused() {
    for bad in [
        "{\"hooks\": ",
        "[1, 2]",
        "\"text\"",
        "{\"hooks\": []}",
        "{\"hooks\": {\"Stop\": {}}}",
    ] {
        let err = install(Some(bad), Cli::Claude, CMD).expect_err(bad);
        assert!(
            err.contains("not valid JSON") || err.contains("not a") || err.contains("not an"),
            "{bad}: {err}"
        );
    }
    assert!(uninstall("{oops", Cli::Claude, None).is_err());
    assert!(installed_events("nope").is_err());
}

#[test]
fn an_empty_file_is_an_empty_object() {
    let out = install(Some(""), Cli::Codex, CMD)
        .expect("install")
        .expect("changed");
    assert_eq!(
        installed_events(&out).expect("events"),
        ["Stop", "UserPromptSubmit", "PermissionRequest"]
    );
}
