//! Sessions in git worktrees of their own (`spawn --worktree`), with real git and a shell as
//! the CLI: each session works on its own branch in clibot's folder of worktrees, the user's
//! checkout (its branch and its own uncommitted change) is never touched, `show` tells how the
//! worktree stands, bad input gets a message naming what to do, and `stop` and a daemon restart
//! leave the work where it is.

use std::path::Path;

use clibot_tests::{Harness, git};
use serde_json::Value;

/// A repository on `main` with one commit, an ignored `.env` that `.worktreeinclude` lists,
/// and an uncommitted change of the user's own.
fn repo(at: &Path) {
    std::fs::create_dir_all(at).expect("mkdir");
    git(at, &["init", "-q", "-b", "main"]);
    std::fs::write(at.join("a.txt"), "one\n").expect("write");
    std::fs::write(at.join(".gitignore"), ".env\n").expect("write");
    std::fs::write(at.join(".worktreeinclude"), ".env\n../outside\n").expect("write");
    git(at, &["add", "."]);
    git(
        at,
        &[
            "-c",
            "user.name=U",
            "-c",
            "user.email=u@example.com",
            "commit",
            "-qm",
            "first",
        ],
    );
    std::fs::write(at.join(".env"), "TOKEN=local\n").expect("write");
    std::fs::write(at.join("a.txt"), "one, changed by the user\n").expect("write");
}

fn show(h: &Harness, name: &str) -> Value {
    serde_json::from_str(&h.ctl_ok(&["show", name, "--json"])).expect("json")
}

#[test]
fn sessions_work_in_worktrees_of_their_own_and_the_users_checkout_is_untouched() {
    let mut h = Harness::new();
    h.start_daemon();
    let repo_dir = h.work.join("repo");
    repo(&repo_dir);
    let r = repo_dir.display().to_string();

    let out = h.ctl_ok(&["spawn", "one", "--cli", "bash", "--dir", &r, "--worktree"]);
    assert!(out.contains("on branch clibot/one from main"), "{out}");
    let s = show(&h, "one");
    let w = &s["worktree"];
    assert_eq!(
        (w["branch"].as_str(), w["base"].as_str()),
        (Some("clibot/one"), Some("main")),
        "{s:#}"
    );
    let path = std::path::PathBuf::from(w["path"].as_str().unwrap_or_default());
    assert!(
        path.starts_with(h.data_dir().join("worktrees")),
        "{}",
        path.display()
    );
    assert_eq!(
        s["dir"].as_str(),
        w["path"].as_str(),
        "the session works in its worktree"
    );
    assert_eq!(
        std::fs::read_to_string(path.join("a.txt")).ok().as_deref(),
        Some("one\n")
    );
    assert_eq!(
        std::fs::read_to_string(path.join(".env")).ok().as_deref(),
        Some("TOKEN=local\n"),
        ".worktreeinclude copies .env"
    );
    assert_eq!(
        (w["dirty"].as_u64(), w["ahead"].as_u64()),
        (Some(0), Some(0)),
        "{s:#}"
    );

    // The session commits one file and leaves another uncommitted.
    h.ctl_ok(&[
        "send",
        "one",
        "echo new > new.txt && git add new.txt && git -c user.name=S -c user.email=s@example.com commit -qm new && echo draft > b.txt && echo done-$((2*3))",
    ]);
    h.wait_screen("one", "the commit", |t| t.contains("done-6"));
    let w = show(&h, "one")["worktree"].clone();
    assert_eq!(
        (
            w["ahead"].as_u64(),
            w["behind"].as_u64(),
            w["dirty"].as_u64()
        ),
        (Some(1), Some(0), Some(1)),
        "{w:#}"
    );
    let text = h.ctl_ok(&["show", "one"]);
    assert!(text.contains("1 ahead, 0 behind, 1 uncommitted"), "{text}");

    // The user's checkout: still on main, its own change kept, none of the session's files.
    assert_eq!(git(&repo_dir, &["symbolic-ref", "--short", "HEAD"]), "main");
    assert_eq!(
        std::fs::read_to_string(repo_dir.join("a.txt"))
            .ok()
            .as_deref(),
        Some("one, changed by the user\n")
    );
    assert!(!repo_dir.join("new.txt").exists() && !repo_dir.join("b.txt").exists());

    // A second session on the same repository: a branch and folder of its own.
    let out = h.ctl_ok(&[
        "spawn",
        "two",
        "--cli",
        "bash",
        "--dir",
        &r,
        "--worktree",
        "feat/two",
        "--from",
        "main",
    ]);
    assert!(out.contains("on branch feat/two from main"), "{out}");
    let two = show(&h, "two");
    assert_ne!(two["dir"], s["dir"]);
    assert!(
        !Path::new(two["dir"].as_str().unwrap_or_default())
            .join("new.txt")
            .exists()
    );

    // Bad input, each with what to do.
    let plain = h.work.join("plain");
    std::fs::create_dir_all(&plain).expect("mkdir");
    let p = plain.display().to_string();
    let refused = |name: &str, dir: &str, more: &[&str]| {
        let mut args = vec!["spawn", name, "--cli", "bash", "--dir", dir, "--worktree"];
        args.extend_from_slice(more);
        h.ctl_err(&args)
    };
    let err = refused("x", &p, &[]);
    assert!(
        err.contains("not in a git repository") && err.contains("git init"),
        "{err}"
    );
    let err = refused("x", &r, &["feat/two"]);
    assert!(err.contains("branch feat/two exists"), "{err}");
    let err = refused("x", &r, &["--from", "nope"]);
    assert!(err.contains("no such branch, tag or commit"), "{err}");
    let err = refused("one", &r, &[]);
    assert!(err.contains("one"), "{err}");
    assert!(
        !git(&repo_dir, &["branch", "--list", "clibot/x"]).contains("clibot/x"),
        "a refused spawn leaves no branch"
    );

    // The daemon restarted: the sessions are adopted again with their worktrees.
    h.kill_daemon();
    h.start_daemon();
    let w = show(&h, "one")["worktree"].clone();
    assert_eq!(
        (
            w["branch"].as_str(),
            w["ahead"].as_u64(),
            w["dirty"].as_u64()
        ),
        (Some("clibot/one"), Some(1), Some(1)),
        "{w:#}"
    );
    // Stopped: the work stays where it is, committed and not.
    h.ctl_ok(&["stop", "one"]);
    assert!(path.join("b.txt").exists() && path.join("new.txt").exists());
    assert!(git(&repo_dir, &["branch", "--list", "clibot/one"]).contains("clibot/one"));
    assert!(git(&repo_dir, &["worktree", "list"]).contains(&*path.display().to_string()));
}

/// From a chat: an admin's `!!new NAME CLI DIR wt=BRANCH` starts the session in a worktree and
/// the reply names its branch; a member's `wt` is refused (their sessions work in their own
/// workspace), saying so.
#[test]
fn a_chat_starts_a_session_in_a_worktree_and_a_member_is_told_why_not() {
    use clibot_tests::fake_telegram::{self, texts};
    const ADMIN: i64 = 100;
    const ANN: i64 = 200;
    let (h, tg, mut g) = fake_telegram::started(&format!(
        "\n[access.telegram]\npolicy = \"allowlist\"\nallow = [\"{ANN}\"]\nadmins = [\"{ADMIN}\"]\nclis = [\"bash\"]\nsandbox = \"off\"\n"
    ));
    let repo_dir = h.work.join("repo");
    repo(&repo_dir);
    tg.push_message(
        ADMIN,
        ADMIN,
        "Admin",
        &format!("!!new w bash {} wt=chat/w", repo_dir.display()),
    );
    tg.wait_sent("the admin's worktree", |s| {
        texts(s, ADMIN)
            .iter()
            .any(|t| t.contains("started w (bash)") && t.contains("on branch chat/w from main"))
    });
    assert_eq!(show(&h, "w")["worktree"]["branch"], "chat/w");
    tg.push_message(ADMIN, ADMIN, "Admin", "!!sessions");
    tg.wait_sent("the branch in the list", |s| {
        texts(s, ADMIN)
            .iter()
            .any(|t| t.contains("w (bash)") && t.contains(" on chat/w"))
    });
    tg.push_message(ANN, ANN, "Ann", "!!new m bash wt");
    tg.wait_sent("the member told", |s| {
        texts(s, ANN)
            .iter()
            .any(|t| t.contains("a member's session works in their own workspace"))
    });
    assert!(h.ctl_err(&["show", "m"]).contains("no session named"));
    let _ = g.kill();
    let _ = g.wait();
}
