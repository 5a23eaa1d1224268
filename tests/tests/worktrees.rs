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
    commit_as_user(at, &["-qm", "first"]);
    std::fs::write(at.join(".env"), "TOKEN=local\n").expect("write");
    std::fs::write(at.join("a.txt"), "one, changed by the user\n").expect("write");
}

/// `git commit` in `dir` as the user (their own name, not the session's).
fn commit_as_user(dir: &Path, args: &[&str]) {
    let mut all = vec![
        "-c",
        "user.name=U",
        "-c",
        "user.email=u@example.com",
        "commit",
    ];
    all.extend_from_slice(args);
    git(dir, &all);
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
/// the reply names its branch; a member's `wt` in their workspace, which is no repository, is
/// told what to do (their worktrees are tried in `jail.rs`).
#[test]
fn a_chat_starts_a_session_in_a_worktree_and_a_member_is_told_what_to_do() {
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
            .any(|t| t.contains("is not in a git repository") && t.contains("git init"))
    });
    assert!(h.ctl_err(&["show", "m"]).contains("no session named"));
    let _ = g.kill();
    let _ = g.wait();
}

/// A fake `gh` on the daemon's PATH: signed in, and `pr create` records its arguments (one per
/// line, in `gh.log`) and prints a pull request's address.
fn fake_gh(dir: &Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir).expect("mkdir");
    let log = dir.join("gh.log");
    let gh = dir.join("gh");
    std::fs::write(
        &gh,
        format!(
            "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\" >> {log}; done\necho --- >> {log}\ncase \"$1\" in auth) exit 0;; pr) echo https://github.com/u/r/pull/7;; esac\n",
            log = log.display()
        ),
    )
    .expect("write gh");
    std::fs::set_permissions(&gh, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    log
}

/// Types `cmd` into session `name` and waits for `marker` (which `cmd` prints computed, so
/// the typed line itself never matches).
fn run_in(h: &Harness, name: &str, cmd: &str, marker: &str) {
    h.ctl_ok(&["send", name, cmd]);
    h.wait_screen(name, marker, |t| t.contains(marker));
}

const ID: &str = "-c user.name=S -c user.email=s@example.com";

#[test]
fn work_is_diffed_merged_pushed_and_cleaned_up_but_never_lost() {
    let mut h = Harness::new();
    let bin = h.work.join("bin");
    let gh_log = fake_gh(&bin);
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    h.start_daemon_env(&[], &[("PATH", &path)]);
    let repo_dir = h.work.join("repo");
    repo(&repo_dir);
    std::fs::write(repo_dir.join("shared.txt"), "base\n").expect("write");
    git(&repo_dir, &["add", "shared.txt"]);
    commit_as_user(&repo_dir, &["-qm", "shared"]);
    let origin = h.work.join("origin.git");
    git(&h.work, &["init", "-q", "--bare", "origin.git"]);
    git(
        &repo_dir,
        &["remote", "add", "origin", &origin.display().to_string()],
    );
    git(&repo_dir, &["push", "-q", "origin", "main"]);
    let r = repo_dir.display().to_string();
    for name in ["one", "two"] {
        h.ctl_ok(&["spawn", name, "--cli", "bash", "--dir", &r, "--worktree"]);
    }
    let wt =
        |name: &str| std::path::PathBuf::from(show(&h, name)["dir"].as_str().unwrap_or_default());
    let (one, two) = (wt("one"), wt("two"));
    run_in(
        &h,
        "one",
        &format!(
            "echo one > shared.txt && echo extra > one.txt && git add -A && git {ID} commit -qm 'one: shared says one' && echo ok-$((1+1))"
        ),
        "ok-2",
    );
    run_in(
        &h,
        "two",
        &format!(
            "echo two > shared.txt && git {ID} commit -qam 'two: shared says two' && echo ok-$((2+2))"
        ),
        "ok-4",
    );

    // Diff: the stat, then the patch; --stat alone; one file's.
    let d = h.ctl_ok(&["worktree", "diff", "one"]);
    assert!(
        d.contains("shared.txt") && d.contains("one.txt") && d.contains("+extra"),
        "{d}"
    );
    let d = h.ctl_ok(&["worktree", "diff", "one", "--stat"]);
    assert!(d.contains("one.txt") && !d.contains("+extra"), "{d}");
    let d = h.ctl_ok(&["worktree", "diff", "one", "one.txt"]);
    assert!(d.contains("+extra") && !d.contains("+one"), "{d}");

    // Merge one: main moves forward, in the user's checkout too, which stays on main with its
    // own uncommitted change.
    let m = h.ctl_ok(&["worktree", "merge", "one"]);
    assert!(
        m.contains("merged 1 commit(s) of clibot/one into main"),
        "{m}"
    );
    assert_eq!(git(&repo_dir, &["symbolic-ref", "--short", "HEAD"]), "main");
    assert_eq!(
        git(&repo_dir, &["rev-parse", "main"]),
        git(&one, &["rev-parse", "HEAD"])
    );
    assert_eq!(
        std::fs::read_to_string(repo_dir.join("a.txt"))
            .ok()
            .as_deref(),
        Some("one, changed by the user\n"),
        "the user's own change is untouched"
    );
    assert_eq!(
        std::fs::read_to_string(repo_dir.join("shared.txt"))
            .ok()
            .as_deref(),
        Some("one\n")
    );
    let again = h.ctl_ok(&["worktree", "merge", "one"]);
    assert!(again.contains("nothing that main lacks"), "{again}");

    // The agent starts a rebase of its own that stops on the conflict; the daemon restarts.
    run_in(
        &h,
        "two",
        &format!("git {ID} rebase main >/dev/null 2>&1; echo rebase-$((3+3))"),
        "rebase-6",
    );
    h.kill_daemon();
    h.start_daemon_env(&[], &[("PATH", &path)]);
    let main_before = git(&repo_dir, &["rev-parse", "main"]);
    let e = h.ctl_err(&["worktree", "merge", "two"]);
    assert!(
        e.contains("a rebase is under way"),
        "the agent's rebase is not clibot's to undo: {e}"
    );
    run_in(
        &h,
        "two",
        "git rebase --abort; echo abort-$((4+4))",
        "abort-8",
    );
    let two_before = git(&two, &["rev-parse", "HEAD"]);
    let out = h.ctl(&["worktree", "merge", "two"]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("conflicts in shared.txt") && said.contains("Nothing was changed"),
        "{said}"
    );
    assert_eq!(git(&two, &["rev-parse", "HEAD"]), two_before);
    assert_eq!(git(&repo_dir, &["rev-parse", "main"]), main_before);
    assert_eq!(
        git(&two, &["status", "--porcelain", "--untracked-files=no"]),
        ""
    );

    // A pull request: the branch pushed, gh asked with the branch, base and a title.
    let pr = h.ctl_ok(&["worktree", "pr", "two"]);
    assert!(pr.contains("https://github.com/u/r/pull/7"), "{pr}");
    let args = std::fs::read_to_string(&gh_log).unwrap_or_default();
    assert!(args.contains("auth\nstatus\n"), "{args}");
    assert!(
        args.contains("pr\ncreate\n--head\nclibot/two\n--base\nmain\n--title\n"),
        "{args}"
    );
    git(&origin, &["rev-parse", "--verify", "refs/heads/clibot/two"]);

    // Discard asks for the name; nothing goes without it.
    let e = h.ctl_err(&["worktree", "discard", "two"]);
    assert!(
        e.contains("type the session's name") && e.contains("--confirm two"),
        "{e}"
    );
    let e = h.ctl_err(&["worktree", "discard", "two", "--confirm", "one"]);
    assert!(e.contains("type the session's name"), "{e}");
    assert!(two.is_dir());

    // Stopped sessions: the clean-up removes the merged one and keeps the one with a new file.
    run_in(&h, "two", "echo wip > wip.txt; echo wip-$((5+5))", "wip-10");
    h.ctl_ok(&["stop", "one"]);
    h.ctl_ok(&["stop", "two"]);
    let list: Value =
        serde_json::from_str(&h.ctl_ok(&["worktree", "list", "--json"])).expect("json");
    assert_eq!(list.as_array().map(Vec::len), Some(2), "{list:#}");
    assert!(
        list.as_array()
            .is_some_and(|l| l.iter().all(|k| k["running"] == false)),
        "{list:#}"
    );
    let p: Value = serde_json::from_str(&h.ctl_ok(&["worktree", "prune", "--json"])).expect("json");
    assert_eq!(p["removed"], serde_json::json!(["one"]), "{p:#}");
    assert!(
        p["stale"]
            .to_string()
            .contains("two: 1 file(s) not committed"),
        "{p:#}"
    );
    assert!(!one.exists() && two.join("wip.txt").exists());
    assert!(!git(&repo_dir, &["branch", "--list", "clibot/one"]).contains("clibot/one"));

    // With the name typed back: gone, branch and all.
    let d = h.ctl_ok(&["worktree", "discard", "two", "--confirm", "two"]);
    assert!(d.contains("discarded"), "{d}");
    assert!(!two.exists());
    assert!(!git(&repo_dir, &["branch", "--list", "clibot/two"]).contains("clibot/two"));
    assert!(h.ctl_ok(&["worktree", "list"]).contains("no worktrees"));
    let audit = h.ctl_ok(&["audit", "--json"]);
    for action in [
        "worktree merge",
        "worktree pr",
        "worktree discard",
        "worktree prune",
    ] {
        assert!(audit.contains(action), "{action} audited: {audit}");
    }
}

/// A session started again under its name goes on in the worktree its last run left, with
/// what it left there; another branch for that name is refused, saying how to go on.
#[test]
fn a_session_started_again_goes_on_in_its_kept_worktree() {
    let mut h = Harness::new();
    h.start_daemon();
    let repo_dir = h.work.join("repo");
    repo(&repo_dir);
    let r = repo_dir.display().to_string();
    h.ctl_ok(&["spawn", "three", "--cli", "bash", "--dir", &r, "--worktree"]);
    let dir = show(&h, "three")["dir"].clone();
    run_in(
        &h,
        "three",
        "echo draft > draft.txt; echo d-$((6+6))",
        "d-12",
    );
    h.ctl_ok(&["stop", "three"]);
    let e = h.ctl_err(&[
        "spawn",
        "three",
        "--cli",
        "bash",
        "--dir",
        &r,
        "--worktree",
        "other",
    ]);
    assert!(
        e.contains("left its worktree on clibot/three") && e.contains("discard"),
        "{e}"
    );
    h.ctl_ok(&["spawn", "three", "--cli", "bash", "--dir", &r, "--worktree"]);
    assert_eq!(show(&h, "three")["dir"], dir);
    run_in(&h, "three", "cat draft.txt; echo c-$((7+7))", "c-14");
    assert!(h.ctl_ok(&["screen", "three"]).contains("draft"));
}

/// From a chat: `!!worktree NAME` shows the card; **Diff** sends the patch as a file,
/// **Merge** stops on a conflict with **Ask the agent to resolve** (which types into the
/// session), **Discard** only says how to confirm; a member can neither merge nor discard an
/// admin's worktree; `!!stop` tells what the worktree holds, and `!!discard NAME` removes it.
#[test]
fn a_worktree_is_finished_from_the_chat_with_its_buttons() {
    use clibot_tests::fake_telegram::{self, texts};
    const ADMIN: i64 = 100;
    const ANN: i64 = 200;
    let (h, tg, mut g) = fake_telegram::started(&format!(
        "\n[access.telegram]\npolicy = \"allowlist\"\nallow = [\"{ANN}\"]\nadmins = [\"{ADMIN}\"]\nclis = [\"bash\"]\nsandbox = \"off\"\n"
    ));
    let said = |chat: i64, what: &str, needle: &str| {
        tg.wait_sent(what, |s| texts(s, chat).iter().any(|t| t.contains(needle)));
    };
    let repo_dir = h.work.join("repo");
    repo(&repo_dir);
    tg.push_message(
        ADMIN,
        ADMIN,
        "Admin",
        &format!("!!new w bash {} wt", repo_dir.display()),
    );
    said(ADMIN, "started", "on branch clibot/w from main");
    let dir = std::path::PathBuf::from(show(&h, "w")["dir"].as_str().unwrap_or_default());
    run_in(
        &h,
        "w",
        &format!(
            "echo session > a.txt && git {ID} commit -qam 'w: a says session' && echo ok-$((8+8))"
        ),
        "ok-16",
    );

    // The session's status tells how its worktree stands.
    tg.push_message(ADMIN, ADMIN, "Admin", "!!status");
    said(
        ADMIN,
        "the status",
        "🌿 on clibot/w from main: 1 commit(s) ahead, 0 behind",
    );
    tg.push_message(ADMIN, ADMIN, "Admin", "!!worktree w");
    let (card, data) = tg.buttons(ADMIN, "🌿 w (running) on clibot/w from main");
    assert_eq!(data.len(), 5, "{data:?}");
    tg.push_callback(ADMIN, ADMIN, card, &data[0]);
    let doc = tg.wait_document("w.diff");
    let patch = String::from_utf8_lossy(&doc.content);
    assert!(
        patch.contains("+session") && patch.contains("-one"),
        "{patch}"
    );

    // The user commits their own change to the same file on main: the merge stops on it.
    commit_as_user(&repo_dir, &["-qam", "user"]);
    let main_before = git(&repo_dir, &["rev-parse", "main"]);
    tg.push_callback(ADMIN, ADMIN, card, &data[1]);
    let (conflict, resolve) = tg.buttons(ADMIN, "conflicts in a.txt");
    assert_eq!(git(&repo_dir, &["rev-parse", "main"]), main_before);
    tg.push_callback(ADMIN, ADMIN, conflict, &resolve[0]);
    said(ADMIN, "asked", "asked w to rebase on main");
    h.wait_screen("w", "the request typed", |t| {
        t.contains("Please rebase this branch")
    });

    // Discard from a button only says what would go and how to confirm.
    tg.push_callback(ADMIN, ADMIN, card, &data[4]);
    said(ADMIN, "how to discard", "!!discard w");
    assert!(dir.is_dir());

    // A member gets nothing of an admin's worktree.
    tg.push_message(ANN, ANN, "Ann", "!!worktree w merge");
    said(ANN, "refused merge", "no session named \"w\"");
    tg.push_message(ANN, ANN, "Ann", "!!discard w");
    tg.wait_sent("refused discard", |s| {
        texts(s, ANN)
            .iter()
            .filter(|t| t.contains("no session named \"w\""))
            .count()
            >= 2
    });
    assert!(dir.is_dir());

    tg.push_message(ADMIN, ADMIN, "Admin", "!!stop w");
    said(
        ADMIN,
        "what it holds",
        "the worktree on clibot/w is kept (1 commit(s) ahead of main",
    );
    tg.push_message(ADMIN, ADMIN, "Admin", "!!discard w");
    said(ADMIN, "discarded", "discarded");
    assert!(!dir.exists());
    assert!(!git(&repo_dir, &["branch", "--list", "clibot/w"]).contains("clibot/w"));
    let _ = g.kill();
    let _ = g.wait();
}

/// A new session in a repository with changes not committed, or where another session works,
/// is told so; **Isolate** (or `clibotctl worktree isolate`) starts it again in a worktree of
/// its own — only before anything was typed into it.
#[test]
fn a_session_sharing_a_repository_is_offered_a_worktree_of_its_own() {
    use clibot_tests::fake_telegram::{self, texts};
    const ADMIN: i64 = 100;
    let (h, tg, mut g) = fake_telegram::started(&format!(
        "\n[access.telegram]\npolicy = \"allowlist\"\nadmins = [\"{ADMIN}\"]\n"
    ));
    let repo_dir = h.work.join("repo");
    repo(&repo_dir);
    let r = repo_dir.display().to_string();
    let out = h.ctl_ok(&["spawn", "a", "--cli", "bash", "--dir", &r]);
    assert!(
        out.contains("1 change(s) not committed") && out.contains("clibotctl worktree isolate a"),
        "{out}"
    );
    tg.push_message(ADMIN, ADMIN, "Admin", &format!("!!new b bash {r}"));
    let (card, data) = tg.buttons(ADMIN, "session a works in this repository too");
    tg.push_callback(ADMIN, ADMIN, card, &data[0]);
    tg.wait_sent("isolated", |s| {
        texts(s, ADMIN)
            .iter()
            .any(|t| t.contains("b started again in a worktree of its own, on branch clibot/b"))
    });
    let b = show(&h, "b");
    assert_eq!(b["worktree"]["branch"], "clibot/b", "{b:#}");
    assert_ne!(b["dir"].as_str(), Some(r.as_str()));
    // Once it was given work where it is, it stays there.
    run_in(&h, "a", "echo w-$((9+9))", "w-18");
    let e = h.ctl_err(&["worktree", "isolate", "a"]);
    assert!(e.contains("already given work"), "{e}");
    assert!(show(&h, "a")["worktree"].is_null());
    let _ = g.kill();
    let _ = g.wait();
}

/// `[worktrees] setup` runs in a new worktree before its session starts (one that fails fails
/// the spawn and leaves nothing behind); with `summary = true` a turn's end tells which files
/// it changed.
#[test]
fn setup_runs_first_and_each_turn_tells_the_files_it_changed() {
    let mut h = Harness::with_config(
        "\n[worktrees]\nsetup = [\"echo ok > from-setup.txt\", \"test ! -f no-setup || { echo broken setup >&2; exit 3; }\"]\nsummary = true\n",
    );
    h.start_daemon();
    let repo_dir = h.work.join("repo");
    repo(&repo_dir);
    let r = repo_dir.display().to_string();
    h.ctl_ok(&["spawn", "s", "--cli", "bash", "--dir", &r, "--worktree"]);
    let dir = std::path::PathBuf::from(show(&h, "s")["dir"].as_str().unwrap_or_default());
    assert!(
        dir.join("from-setup.txt").is_file(),
        "{:?}",
        std::fs::read_dir(&dir).map(|d| d.flatten().map(|e| e.file_name()).collect::<Vec<_>>())
    );

    let turn_end = |n: usize| {
        h.wait_event(
            "s",
            "a turn's end",
            std::time::Duration::from_secs(20),
            |e| {
                e["type"] == "turn_completed"
                    && e["session"] == "s"
                    && e["text"]
                        .as_str()
                        .is_some_and(|t| t.contains(&format!("t-{n}")))
            },
        )
    };
    h.ctl_ok(&["send", "s", "true; echo t-$((1+0))"]);
    turn_end(1);
    h.ctl_ok(&[
        "send",
        "s",
        "echo x > made.txt; echo y >> a.txt; echo t-$((1+1))",
    ]);
    turn_end(2);
    h.wait_event(
        "s",
        "the summary",
        std::time::Duration::from_secs(20),
        |e| {
            e["type"] == "notice"
                && e["text"]
                    .as_str()
                    .is_some_and(|t| t.contains("this turn changed 2 file(s): a.txt, made.txt"))
        },
    );

    // A setup that fails: the spawn is refused with what it said, and no branch is left.
    std::fs::write(repo_dir.join("no-setup"), "").expect("write");
    git(&repo_dir, &["add", "no-setup"]);
    commit_as_user(&repo_dir, &["-qm", "no setup"]);
    let e = h.ctl_err(&["spawn", "f", "--cli", "bash", "--dir", &r, "--worktree"]);
    assert!(e.contains("failed") && e.contains("broken setup"), "{e}");
    assert!(!git(&repo_dir, &["branch", "--list", "clibot/f"]).contains("clibot/f"));
    assert!(h.ctl_err(&["show", "f"]).contains("no session named"));
}
