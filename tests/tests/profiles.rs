//! Account profiles (`[cli.NAME.profiles.PROFILE] env`), with the real clibotd, clibotctl and
//! bash in tmux: a session started with one sees its environment (`~/` made the home), keeps
//! it across a restart and shows it; an unknown profile is refused naming the known ones.

use clibot_tests::attack::as_user;
use clibot_tests::{Harness, lines};
use serde_json::Value;

#[test]
fn a_profile_gives_the_session_its_environment_and_stays_with_it() {
    let mut h = Harness::with_config(
        "\n[cli.bash.profiles.work]\nenv = { ACCOUNT_DIR = \"~/.account-work\", ACCOUNT = \"work\" }\n",
    );
    h.start_daemon();
    let work = h.work.display().to_string();
    let err = h.ctl_err(&[
        "spawn",
        "s",
        "--cli",
        "bash",
        "--dir",
        &work,
        "--profile",
        "play",
    ]);
    assert!(
        err.contains("no profile \"play\"") && err.contains("it has work"),
        "{err}"
    );
    // What the request sets itself wins over the profile.
    h.ctl_ok(&[
        "spawn",
        "s",
        "--cli",
        "bash",
        "--dir",
        &work,
        "--profile",
        "work",
        "--env",
        "ACCOUNT=mine",
    ]);
    h.wait_screen("s", "the prompt", |s| s.contains('$'));
    h.ctl_ok(&["send", "s", "echo \"dir=$ACCOUNT_DIR acct=$ACCOUNT\""]);
    let home = std::env::var("HOME").unwrap_or_default();
    let want = format!("dir={home}/.account-work acct=mine");
    h.wait_screen("s", "the profile's environment", |s| {
        lines(s).contains(&want.as_str())
    });
    let v: Value = serde_json::from_str(&h.ctl_ok(&["show", "s", "--json"])).expect("json");
    assert_eq!(v["profile"], "work", "{v:#}");
    // A restart keeps it.
    h.ctl_ok(&["restart", "s"]);
    h.wait_screen("s", "the prompt again", |s| s.contains('$'));
    h.ctl_ok(&["send", "s", "echo \"again=$ACCOUNT_DIR\""]);
    let again = format!("again={home}/.account-work");
    h.wait_screen("s", "the profile after a restart", |s| {
        lines(s).contains(&again.as_str())
    });
    let v: Value = serde_json::from_str(&h.ctl_ok(&["list", "--json"])).expect("json");
    assert_eq!(v[0]["profile"], "work", "{v:#}");
}

/// A profile points a CLI at an account's credentials: a member (allowed, not an admin) is
/// refused one, saying who may; an admin starts the same session with it.
#[test]
fn a_member_is_refused_a_profile_and_an_admin_is_not() {
    let mut h = Harness::with_config(
        "\n[cli.bash.profiles.work]\nenv = { ACCOUNT = \"work\" }\n\n[access.telegram]\npolicy = \"allowlist\"\nallow = [\"501\"]\nadmins = [\"500\"]\nclis = [\"*\"]\nsandbox = \"off\"\n",
    );
    h.start_daemon();
    let work = h.work.display().to_string();
    let (ok, out) = as_user(&h, "501", &["spawn", "m", "bash", &work, "work"]);
    assert!(
        !ok && out
            .contains("only admins and the machine's user start sessions with an account profile"),
        "{out}"
    );
    let v: Value = serde_json::from_str(&h.ctl_ok(&["list", "--json"])).expect("json");
    assert_eq!(v, serde_json::json!([]), "nothing started");
    let (ok, out) = as_user(&h, "500", &["spawn", "a", "bash", &work, "work"]);
    assert!(ok, "{out}");
    let v: Value = serde_json::from_str(&h.ctl_ok(&["show", "a", "--json"])).expect("json");
    assert_eq!(v["profile"], "work", "{v:#}");
}
