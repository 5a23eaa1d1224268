//! install and uninstall on real files in a temporary directory.

use super::*;

const CMD: &str = "'/usr/local/bin/clibotctl' hook --cli claude --global";

/// Tabs, CRLF, trailing spaces, unicode, no final newline, a hook of the user's own.
const ODD: &str = "{ \"hooks\" :{\"Stop\":[{\"hooks\":[{\"type\":\"command\",\"command\":\"say done\"}]}]},   \r\n\t\"statusLine\": \"ünï ✓\"  \r\n\t}";

struct Place {
    _dir: tempfile::TempDir,
    file: PathBuf,
    store: PathBuf,
}

fn place(sub: &str) -> Place {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join(sub);
    let store = dir.path().join("state/hooks");
    Place {
        file,
        store,
        _dir: dir,
    }
}

#[test]
fn an_untouched_file_is_restored_byte_for_byte() {
    let p = place("claude/settings.json");
    std::fs::create_dir_all(p.file.parent().expect("dir")).expect("mkdir");
    std::fs::write(&p.file, ODD).expect("write");
    let o = install(Cli::Claude, &p.file, CMD, &p.store).expect("install");
    assert_eq!(o.action, "installed");
    let written = std::fs::read_to_string(&p.file).expect("read");
    assert!(
        written.contains("say done") && written.contains(CMD),
        "{written}"
    );
    let o = install(Cli::Claude, &p.file, CMD, &p.store).expect("install again");
    assert_eq!(o.action, "already_installed");
    assert_eq!(std::fs::read_to_string(&p.file).expect("read"), written);
    assert!(backup::exists(&p.store, Cli::Claude, &p.file));
    let o = uninstall(Cli::Claude, &p.file, &p.store).expect("uninstall");
    assert_eq!(o.action, "removed");
    assert_eq!(std::fs::read(&p.file).expect("read"), ODD.as_bytes());
    assert!(!backup::exists(&p.store, Cli::Claude, &p.file));
    let o = uninstall(Cli::Claude, &p.file, &p.store).expect("uninstall again");
    assert_eq!(o.action, "not_installed");
}

#[test]
fn a_file_that_was_absent_goes_with_the_directories_install_made() {
    let p = place("codex-home/deeper/hooks.json");
    install(Cli::Codex, &p.file, CMD, &p.store).expect("install");
    assert!(p.file.is_file());
    uninstall(Cli::Codex, &p.file, &p.store).expect("uninstall");
    assert!(!p.file.exists());
    assert!(!p.file.parent().expect("dir").exists());
    assert!(
        !p.file
            .parent()
            .and_then(Path::parent)
            .expect("dir")
            .exists()
    );
}

#[test]
fn an_edited_file_keeps_the_edit_and_loses_clibots_entries() {
    let p = place("settings.json");
    std::fs::write(&p.file, ODD).expect("write");
    install(Cli::Claude, &p.file, CMD, &p.store).expect("install");
    let text = std::fs::read_to_string(&p.file).expect("read");
    std::fs::write(
        &p.file,
        text.replace("\"statusLine\"", "\"theme\": \"dark\",\r\n\t\"statusLine\""),
    )
    .expect("edit");
    let o = uninstall(Cli::Claude, &p.file, &p.store).expect("uninstall");
    assert_eq!(o.action, "removed");
    assert!(o.note.contains("edited since"), "{}", o.note);
    let after = std::fs::read_to_string(&p.file).expect("read");
    let v: serde_json::Value = serde_json::from_str(&after).expect("json");
    assert_eq!(v["theme"], "dark");
    assert_eq!(v["hooks"]["Stop"][0]["hooks"][0]["command"], "say done");
    assert!(!after.contains("--global"), "{after}");
    assert!(!backup::exists(&p.store, Cli::Claude, &p.file));
}

#[test]
fn invalid_json_is_refused_and_left_as_it_is() {
    let p = place("settings.json");
    std::fs::write(&p.file, "{\"hooks\": {,}").expect("write");
    let err = install(Cli::Claude, &p.file, CMD, &p.store)
        .err()
        .expect("refused")
        .to_string();
    assert!(
        err.contains(&p.file.display().to_string()) && err.contains("not valid JSON"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(&p.file).expect("read"),
        "{\"hooks\": {,}"
    );
    assert!(!backup::exists(&p.store, Cli::Claude, &p.file));
}

#[test]
fn a_symlinked_settings_file_is_edited_where_it_points() {
    let p = place("dotfiles/settings.json");
    std::fs::create_dir_all(p.file.parent().expect("dir")).expect("mkdir");
    std::fs::write(&p.file, "{}\n").expect("write");
    let link = p
        .store
        .parent()
        .expect("state")
        .with_file_name("settings.json");
    std::os::unix::fs::symlink(&p.file, &link).expect("symlink");
    let target = files::target(&link);
    install(Cli::Claude, &target, CMD, &p.store).expect("install");
    assert!(
        link.symlink_metadata()
            .expect("link")
            .file_type()
            .is_symlink()
    );
    assert!(
        std::fs::read_to_string(&p.file)
            .expect("read")
            .contains(CMD)
    );
    uninstall(Cli::Claude, &target, &p.store).expect("uninstall");
    assert_eq!(std::fs::read_to_string(&p.file).expect("read"), "{}\n");
}

#[test]
fn copilots_hooks_are_a_file_of_clibots_own_in_its_flat_shape() {
    let p = place("copilot/hooks/clibot.json");
    let cmd = "'/usr/local/bin/clibotctl' hook --cli copilot --global";
    let o = install(Cli::Copilot, &p.file, cmd, &p.store).expect("install");
    assert_eq!(o.action, "installed");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p.file).expect("read")).expect("json");
    assert_eq!(v["version"], 1, "{v}");
    assert_eq!(
        v["hooks"]["agentStop"],
        serde_json::json!([{"type": "command", "bash": format!("{cmd} agentStop"), "timeoutSec": 30}]),
        "{v}"
    );
    let again = install(Cli::Copilot, &p.file, cmd, &p.store).expect("install again");
    assert_eq!(again.action, "already_installed");
    let text = std::fs::read_to_string(&p.file).expect("read");
    assert_eq!(
        merge::installed_events(&text).expect("events"),
        [
            "userPromptSubmitted",
            "agentStop",
            "permissionRequest",
            "errorOccurred"
        ]
    );
    // Without its backup, uninstall still takes clibot's entries (and the version it added) out.
    let bare = merge::uninstall(&text, Cli::Copilot, Some(None)).expect("uninstall");
    assert_eq!(bare.as_deref().map(str::trim), Some("{}"));
    uninstall(Cli::Copilot, &p.file, &p.store).expect("uninstall");
    assert!(!p.file.exists(), "the file install made is gone");
}

#[test]
fn qwens_hooks_go_into_its_settings_beside_the_users() {
    let p = place("qwen/settings.json");
    std::fs::create_dir_all(p.file.parent().expect("dir")).expect("mkdir");
    std::fs::write(&p.file, ODD).expect("write");
    let cmd = "'/usr/local/bin/clibotctl' hook --cli qwen --global";
    install(Cli::Qwen, &p.file, cmd, &p.store).expect("install");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p.file).expect("read")).expect("json");
    assert_eq!(v["hooks"]["Stop"][0]["hooks"][0]["command"], "say done");
    assert_eq!(
        v["hooks"]["Stop"][1],
        serde_json::json!({"matcher": "*", "hooks": [{"type": "command", "command": cmd, "timeout": 30}]})
    );
    uninstall(Cli::Qwen, &p.file, &p.store).expect("uninstall");
    assert_eq!(std::fs::read(&p.file).expect("read"), ODD.as_bytes());
}
