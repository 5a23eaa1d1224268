//! The jail, tried as an attacker: a member (an allowed, non-admin chat user) starts sessions
//! from Telegram and runs what they like inside them; nothing they do reaches the owner's
//! files, other sessions, other terminals, or makes the unjailed daemon act on their behalf.

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use clibot_tests::Harness;
use clibot_tests::attack::{rc, run_in};
use clibot_tests::fake_telegram::{self, FakeTelegram, texts};

const ADMIN: i64 = 100;
const ANN: i64 = 200;

struct Jail {
    h: Harness,
    tg: FakeTelegram,
    _g: Child,
}

impl Drop for Jail {
    fn drop(&mut self) {
        let _ = self._g.kill();
        let _ = self._g.wait();
    }
}

/// A daemon where Ann may start any CLI, and a gateway for the fake Telegram.
fn jail(extra: &str) -> Jail {
    let (h, tg, g) = fake_telegram::started(&format!(
        "\n[access.telegram]\npolicy = \"allowlist\"\nallow = [\"{ANN}\"]\nadmins = [\"{ADMIN}\"]\nclis = [\"*\"]\n{extra}\n"
    ));
    Jail { h, tg, _g: g }
}

impl Jail {
    /// Ann says `text` in her private chat and waits for an answer containing `needle`.
    fn ann(&self, text: &str, needle: &str) -> String {
        let before = texts(&self.tg.sent(), ANN).len();
        self.tg.push_message(ANN, ANN, "Ann", text);
        let sent = self.tg.wait_sent(needle, |s| {
            texts(s, ANN)
                .iter()
                .skip(before)
                .any(|t| t.contains(needle))
        });
        texts(&sent, ANN)
            .into_iter()
            .skip(before)
            .find(|t| t.contains(needle))
            .unwrap_or_default()
    }

    /// Ann starts a bash session `name` (in `dir`, or her workspace) and it becomes idle;
    /// its directory.
    fn ann_bash(&self, name: &str, dir: &str) -> PathBuf {
        let said = self.ann(&format!("!!new {name} bash {dir}"), "started");
        assert!(said.contains(&format!("started {name}")), "{said}");
        self.h.wait_list("Ann's session idle", |l| {
            l.as_array()
                .is_some_and(|a| a.iter().any(|s| s["name"] == name && s["state"] == "idle"))
        });
        let list: serde_json::Value =
            serde_json::from_str(&self.h.ctl_ok(&["list", "--json"])).expect("json");
        let dir = list
            .as_array()
            .and_then(|a| a.iter().find(|s| s["name"] == name))
            .and_then(|s| s["dir"].as_str())
            .expect("the session's directory");
        PathBuf::from(dir)
    }

    fn workspace(&self) -> PathBuf {
        self.h.data_dir().join("members/telegram-200")
    }

    /// The admin's bash session `name` in a directory of the work dir, holding `secret.txt`.
    fn admin_bash(&self, name: &str) -> PathBuf {
        let d = self.h.work.join(name);
        std::fs::create_dir_all(&d).expect("mkdir");
        std::fs::write(d.join("secret.txt"), "the admin's file").expect("write");
        self.h.ctl_ok(&[
            "spawn",
            name,
            "--cli",
            "bash",
            "--dir",
            d.to_str().expect("utf-8"),
        ]);
        d
    }
}

fn home() -> PathBuf {
    std::env::var_os("HOME").map(PathBuf::from).expect("HOME")
}

/// `path`'s bytes, or nothing.
fn bytes(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_default()
}

#[test]
fn a_members_session_never_writes_where_the_owners_programs_read() {
    let j = jail("");
    let bashrc = bytes(&home().join(".bashrc"));
    // With no directory, and with `~`, a member starts in a workspace of their own.
    let ws = j.ann_bash("x", "");
    assert_eq!(ws, j.workspace().canonicalize().expect("workspace"));
    let said = j.ann("!!new y bash ~", "started");
    assert!(said.contains(&ws.display().to_string()), "{said}");
    // The home, a dot-directory of it, the owner's config: never.
    let h = home().display().to_string();
    for dir in [
        h.clone(),
        format!("{h}/.config"),
        format!("{ws}/../..", ws = ws.display()),
    ] {
        let said = j.ann(&format!("!!new z bash {dir}"), "workspace");
        assert!(said.contains("not in your workspace"), "{dir}: {said}");
    }
    let out = run_in(
        &j.h,
        "x",
        &ws,
        &format!(
            "{{ echo evil >> ~/.bashrc; echo rc_bashrc=$?; \
               mkdir -p ~/.config/autostart && echo evil > ~/.config/autostart/x.desktop; \
               echo rc_autostart=$?; \
               ls {h}/.ssh {h}/.config; echo rc_ls=$?; \
               echo HOME=$HOME; \
             }} > out 2>&1"
        ),
    );
    // Whatever it wrote went to its own home: the owner's files are as they were.
    assert_eq!(bytes(&home().join(".bashrc")), bashrc, "{out}");
    assert!(
        !home().join(".config/autostart/x.desktop").exists(),
        "{out}"
    );
    assert_ne!(
        rc(&out, "rc_ls"),
        "0",
        "the owner's home is not there: {out}"
    );
    // The jail's home is its own, kept in the state directory, not the owner's.
    let own = j.h.state_dir.join("jails");
    let found = std::process::Command::new("find")
        .arg(&own)
        .args(["-name", "x.desktop"])
        .output()
        .expect("find");
    assert!(
        String::from_utf8_lossy(&found.stdout).contains("autostart"),
        "{out}"
    );
}

#[test]
fn a_member_reaches_no_other_session_not_even_one_started_later() {
    let j = jail("");
    let adm = j.admin_bash("adm");
    let ws = j.ann_bash("x", "");
    // Another's session directory is not a member's to start in.
    let said = j.ann(&format!("!!new y bash {}", adm.display()), "workspace");
    assert!(said.contains("not in your workspace"), "{said}");
    // A session the admin starts after Ann's jail exists is out of its reach too.
    let late = j.admin_bash("late");
    let (adm_s, late_s, work) = (adm.display(), late.display(), j.h.work.display());
    let out = run_in(
        &j.h,
        "x",
        &ws,
        &format!(
            "{{ cat {adm_s}/secret.txt; echo rc_adm=$?; \
               cat {late_s}/secret.txt; echo rc_late=$?; \
               ls {work}; echo rc_work=$?; \
               echo shm > /dev/shm/from-the-jail; echo rc_shm=$?; \
               echo unix=$(grep -c / /proc/net/unix); \
               ls /run /var/run; echo rc_run=$?; \
             }} > out 2>&1"
        ),
    );
    assert_ne!(rc(&out, "rc_adm"), "0", "{out}");
    assert_ne!(rc(&out, "rc_late"), "0", "{out}");
    assert_ne!(rc(&out, "rc_work"), "0", "{out}");
    assert!(!out.contains("the admin's file"), "{out}");
    assert_eq!(rc(&out, "rc_shm"), "0", "its own /dev/shm: {out}");
    assert!(!Path::new("/dev/shm/from-the-jail").exists());
    assert_eq!(
        rc(&out, "unix"),
        "0",
        "no socket path of the machine, hook sockets included: {out}"
    );
    assert_ne!(rc(&out, "rc_run"), "0", "{out}");
}

#[test]
fn links_planted_in_the_outbox_and_sent_folders_are_never_followed() {
    let j = jail("");
    let keys = j.h.dir.path().join("owner-ssh");
    std::fs::create_dir_all(&keys).expect("mkdir");
    std::fs::write(keys.join("id_ed25519"), "PRIVATE KEY").expect("write");
    let project = j.h.work.join("project");
    std::fs::create_dir_all(&project).expect("mkdir");
    let ws = j.ann_bash("x", "");
    run_in(
        &j.h,
        "x",
        &ws,
        &format!(
            "mkdir -p .clibot && ln -s {} .clibot/outbox",
            keys.display()
        ),
    );
    j.h.wait_event("x", "the outbox refused", Duration::from_secs(20), |e| {
        e["type"] == "notice" && e["text"].as_str().is_some_and(|t| t.contains("not sent"))
    });
    assert!(keys.join("id_ed25519").exists(), "the key was moved");
    assert!(!ws.join(".clibot/sent").exists());
    // The sent folder a link to a project: the daemon writes nothing there.
    run_in(
        &j.h,
        "x",
        &ws,
        &format!(
            "rm .clibot/outbox && mkdir .clibot/outbox && ln -s {} .clibot/sent && echo hi > .clibot/outbox/note.txt",
            project.display()
        ),
    );
    j.h.wait_event(
        "x",
        "the sent folder refused",
        Duration::from_secs(20),
        |e| e["type"] == "notice" && e["text"].as_str().is_some_and(|t| t.contains("note.txt")),
    );
    assert_eq!(
        std::fs::read_dir(&project).expect("dir").count(),
        0,
        "nothing written through the link"
    );
    assert!(ws.join(".clibot/outbox/note.txt").exists());
    assert!(
        !j.h.events().iter().any(|e| e["type"] == "file_sent"),
        "nothing was sent"
    );
    assert!(j.tg.calls_of("senddocument").is_empty());
}

#[test]
fn git_config_and_hooks_stay_read_only_in_a_members_repository() {
    let j = jail("");
    let repo = j.workspace().join("repo");
    std::fs::create_dir_all(&repo).expect("mkdir");
    let init = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(&repo)
        .status()
        .expect("git init");
    assert!(init.success());
    let config = bytes(&repo.join(".git/config"));
    let dir = j.ann_bash("g", "repo");
    assert_eq!(dir, repo.canonicalize().expect("canonical"));
    let out = run_in(
        &j.h,
        "g",
        &dir,
        "{ echo 'touch /tmp/pwned' > .git/hooks/pre-commit; echo rc_hook=$?; \
           printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' >> .git/config; echo rc_cfg=$?; \
           echo ok > file.txt; echo rc_file=$?; } > out 2>&1",
    );
    assert_ne!(rc(&out, "rc_hook"), "0", "{out}");
    assert_ne!(rc(&out, "rc_cfg"), "0", "{out}");
    assert_eq!(rc(&out, "rc_file"), "0", "{out}");
    assert!(!repo.join(".git/hooks/pre-commit").exists());
    assert_eq!(bytes(&repo.join(".git/config")), config);
}

#[test]
fn no_other_terminal_is_reachable_and_tiocsti_is_refused() {
    let j = jail("");
    let adm = j.admin_bash("adm");
    let _ = adm;
    let tty = String::from_utf8_lossy(
        &j.h.tmux(&["display-message", "-p", "-t", "adm", "#{pane_tty}"])
            .stdout,
    )
    .trim()
    .to_string();
    assert!(tty.starts_with("/dev/pts/"), "{tty}");
    let ws = j.ann_bash("x", "");
    let out = run_in(
        &j.h,
        "x",
        &ws,
        &format!(
            "{{ echo PWNED-BY-PTY > {tty}; echo rc_pts=$?; ls /dev/pts; \
               /usr/bin/python3 -c 'import fcntl,termios; fcntl.ioctl(0, termios.TIOCSTI, b\"#\")'; \
               echo rc_sti=$?; \
             }} > out 2>&1"
        ),
    );
    assert_ne!(rc(&out, "rc_pts"), "0", "{out}");
    assert_ne!(rc(&out, "rc_sti"), "0", "{out}");
    assert!(out.contains("Operation not permitted"), "{out}");
    std::thread::sleep(Duration::from_millis(300));
    let screen = String::from_utf8_lossy(&j.h.ctl(&["screen", "adm"]).stdout).into_owned();
    assert!(!screen.contains("PWNED-BY-PTY"), "{screen}");
}

#[test]
fn a_link_swapped_under_a_launch_file_is_replaced_on_restart_not_written_through() {
    let j = jail(
        "\n[cli.cpshell]\nadapter = \"copilot\"\nargv = [\"sh\", \"-c\", \"PS1='$ ' exec bash --norc --noprofile\", \"sh\"]\nquiet_ms = 300\n",
    );
    let victim = j.h.dir.path().join("victim.txt");
    std::fs::write(&victim, "keep me").expect("write");
    let victim_dir = j.h.dir.path().join("victim-dir");
    std::fs::create_dir_all(&victim_dir).expect("mkdir");
    let said = j.ann("!!new c cpshell", "started");
    assert!(said.contains("started c"), "{said}");
    j.h.wait_screen("c", "the shell", |s| s.contains('$'));
    let ws = j.workspace().canonicalize().expect("workspace");
    let out = run_in(
        &j.h,
        "c",
        &ws,
        &format!(
            "{{ ln -sf {} \"$COPILOT_HOME/hooks/clibot.json\"; echo rc_ln=$?; }} > out 2>&1",
            victim.display()
        ),
    );
    assert_eq!(rc(&out, "rc_ln"), "0", "{out}");
    // Its own answer, once the restart is done (a line the session prints names it too).
    let said = j.ann("!!restart c", "restarted c");
    assert!(!said.contains("error"), "{said}");
    j.h.wait_screen("c", "the shell again", |s| s.contains('$'));
    assert_eq!(std::fs::read_to_string(&victim).expect("read"), "keep me");
    // The whole hooks folder a link: the restart is refused, nothing is written there.
    run_in(
        &j.h,
        "c",
        &ws,
        &format!(
            "rm -rf \"$COPILOT_HOME/hooks\" && ln -s {} \"$COPILOT_HOME/hooks\"",
            victim_dir.display()
        ),
    );
    let said = j.ann("!!restart c", "link");
    assert!(said.contains("symbolic link"), "{said}");
    assert_eq!(std::fs::read_dir(&victim_dir).expect("dir").count(), 0);
}

#[test]
fn a_link_raced_into_the_inbox_never_takes_an_upload_elsewhere() {
    let j = jail("");
    let target = j.h.dir.path().join("target");
    std::fs::create_dir_all(&target).expect("mkdir");
    let ws = j.ann_bash("x", "");
    j.h.ctl_ok(&[
        "send",
        "x",
        &format!(
            "for i in $(seq 1 3000); do rm -rf .clibot/inbox; ln -s {} .clibot/inbox; rm -f .clibot/inbox; mkdir -p .clibot/inbox; done; touch raced",
            target.display()
        ),
    ]);
    for i in 0..12 {
        j.tg.push_file(
            ANN,
            ANN,
            "document",
            &format!("up{i}.txt"),
            format!("upload {i}\n").as_bytes(),
            "",
        );
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ws.join("raced").exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        std::fs::read_dir(&target).expect("dir").count(),
        0,
        "an upload went through the link"
    );
}

#[test]
fn get_of_a_fifo_or_a_device_is_refused_at_once_and_the_daemon_stays_responsive() {
    let j = jail("");
    let ws = j.ann_bash("x", "");
    run_in(&j.h, "x", &ws, "mkfifo pipe && ln -s /dev/zero zero");
    let started = Instant::now();
    let said = j.ann("!!get pipe", "pipe");
    assert!(said.contains("FIFO"), "{said}");
    let said = j.ann("!!get zero", "zero");
    assert!(said.contains("symbolic link"), "{said}");
    let said = j.ann("!!get /dev/zero", "zero");
    assert!(said.contains("outside"), "{said}");
    assert!(started.elapsed() < Duration::from_secs(10));
    // The daemon answers anyone at once all the while.
    for _ in 0..5 {
        let t = Instant::now();
        j.h.ctl_ok(&["list"]);
        assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    }
}

#[test]
fn sockets_of_the_machine_are_out_of_reach() {
    let j = jail("");
    // A display and a container engine's socket, made by the test where they usually are.
    let n = 100 + std::process::id() % 800;
    std::fs::create_dir_all("/tmp/.X11-unix").expect("mkdir");
    let x11 = PathBuf::from(format!("/tmp/.X11-unix/X{n}"));
    let _ = std::fs::remove_file(&x11);
    let _x = std::os::unix::net::UnixListener::bind(&x11).expect("x11 socket");
    let run = PathBuf::from(format!("/run/clibot-test-{}", std::process::id()));
    std::fs::create_dir_all(&run).expect("mkdir");
    let docker = run.join("docker.sock");
    let _d = std::os::unix::net::UnixListener::bind(&docker).expect("docker socket");
    let ws = j.ann_bash("x", "");
    let probe = |p: &Path| {
        format!(
            "/usr/bin/python3 -c 'import socket; s=socket.socket(socket.AF_UNIX); s.connect(\"{}\")'; echo rc=$?",
            p.display()
        )
    };
    let out = run_in(
        &j.h,
        "x",
        &ws,
        &format!("{{ {}; {}; }} > out 2>&1", probe(&x11), probe(&docker)),
    );
    let _ = std::fs::remove_file(&x11);
    let _ = std::fs::remove_dir_all(&run);
    assert!(!out.contains("rc=0"), "{out}");
    assert!(out.contains("No such file"), "{out}");
}

/// The daemon's resident memory in KiB.
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

#[test]
fn a_flood_of_large_hook_calls_from_a_jail_keeps_the_daemon_bounded() {
    let j = jail(
        "\n[cli.ccshell]\nadapter = \"claude\"\nargv = [\"sh\", \"-c\", \"PS1='$ ' exec bash --norc --noprofile\", \"sh\"]\nquiet_ms = 300\n",
    );
    let said = j.ann("!!new c ccshell", "started");
    assert!(said.contains("started c"), "{said}");
    j.h.wait_screen("c", "the shell", |s| s.contains('$'));
    let ws = j.workspace().canonicalize().expect("workspace");
    let pid = j.h.daemon_pid().expect("daemon");
    let before = rss_kib(pid);
    let ctl = clibot_tests::bin("clibotctl");
    // 200 permission requests of 4 MB each, all at once, from inside the jail; and a payload
    // of countless tiny values.
    j.h.ctl_ok(&[
        "send",
        "c",
        &format!(
            "{{ printf '{{\"hook_event_name\":\"PermissionRequest\",\"tool_name\":\"Bash\",\"tool_input\":{{\"command\":\"'; head -c 4000000 /dev/zero | tr '\\0' a; printf '\"}}}}'; }} > big.json; \
             {{ printf '['; head -c 1000000 /dev/zero | tr '\\0' 1 | sed 's/./1,/g'; printf '1]'; }} > many.json; \
             {ctl} hook --cli ccshell PermissionRequest < many.json > /dev/null 2>&1; \
             for i in $(seq 1 200); do {ctl} hook --cli ccshell PermissionRequest < big.json > /dev/null 2>&1 & done; touch flooded",
            ctl = ctl.display()
        ),
    ]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ws.join("flooded").exists() {
        assert!(Instant::now() < deadline, "the flood did not start");
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut peak = before;
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        peak = peak.max(rss_kib(pid));
        let t = Instant::now();
        j.h.ctl_ok(&["list"]);
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
        std::thread::sleep(Duration::from_millis(200));
    }
    eprintln!("the daemon's memory: {before} KiB before the flood, {peak} KiB at most during it");
    assert!(
        peak < before + 400 * 1024,
        "the daemon grew from {before} KiB to {peak} KiB"
    );
    assert!(j.h.daemon_pid().is_some(), "the daemon lives on");
}

/// From inside a jail, forged completion hooks name a FIFO and a sparse 20 GB file in the
/// jail's own home as their transcript: the daemon opens neither whole (the FIFO is refused at
/// once, of the huge file only the tail is read), stays small and answers throughout.
#[test]
fn a_forged_hook_naming_a_fifo_or_a_huge_file_costs_the_daemon_nothing() {
    let j = jail(
        "\n[cli.ccshell]\nadapter = \"claude\"\nargv = [\"sh\", \"-c\", \"PS1='$ ' exec bash --norc --noprofile\", \"sh\"]\nquiet_ms = 300\n",
    );
    let said = j.ann("!!new c ccshell", "started");
    assert!(said.contains("started c"), "{said}");
    j.h.wait_screen("c", "the shell", |s| s.contains('$'));
    let ws = j.workspace().canonicalize().expect("workspace");
    let pid = j.h.daemon_pid().expect("daemon");
    let before = rss_kib(pid);
    let ctl = clibot_tests::bin("clibotctl");
    let out = run_in(
        &j.h,
        "c",
        &ws,
        &format!(
            "{{ mkfifo ~/fifo.jsonl; truncate -s 20G ~/huge.jsonl; \
               printf '\\n{{\"type\":\"assistant\",\"message\":{{\"id\":\"m\",\"content\":[{{\"type\":\"text\",\"text\":\"END OF HUGE\"}}]}}}}\\n' >> ~/huge.jsonl; \
               for p in ~/fifo.jsonl ~/huge.jsonl; do \
                 printf '{{\"hook_event_name\":\"Stop\",\"transcript_path\":\"%s\"}}' \"$p\" | {ctl} hook --cli ccshell Stop; \
               done; echo sent; }} > out 2>&1",
            ctl = ctl.display()
        ),
    );
    assert!(out.contains("sent"), "{out}");
    for _ in 0..5 {
        let t = Instant::now();
        j.h.ctl_ok(&["list"]);
        assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    }
    let after = rss_kib(pid);
    assert!(
        after < before + 200 * 1024,
        "the daemon grew from {before} KiB to {after} KiB"
    );
    assert!(j.h.daemon_pid().is_some(), "the daemon lives on");
}

/// A CLI installed where the jail shows nothing (here clibot's own state directory, a place
/// holding secrets) would die at once inside it, saying nothing the user sees: the spawn is
/// refused instead, naming where it is installed and what to do.
#[test]
fn a_cli_installed_where_the_jail_hides_it_is_refused_with_the_reason() {
    let mut h = Harness::with_config(&format!(
        "\n[access.telegram]\npolicy = \"allowlist\"\nallow = [\"{ANN}\"]\nadmins = [\"{ADMIN}\"]\nclis = [\"*\"]\n[cli.hidden]\nargv = [\"@STATE@/tools/hidden.sh\"]\n"
    ));
    let tools = h.state_dir.join("tools");
    std::fs::create_dir_all(&tools).expect("tools dir");
    let tool = tools.join("hidden.sh");
    std::fs::write(&tool, "#!/bin/sh\nexec bash --norc --noprofile\n").expect("tool");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let config = std::fs::read_to_string(&h.config).expect("config");
    std::fs::write(
        &h.config,
        config.replace("@STATE@", &h.state_dir.display().to_string()),
    )
    .expect("config");
    h.start_daemon();
    let (tg, g) = fake_telegram::with_gateway(&h);
    let j = Jail { h, tg, _g: g };
    let said = j.ann("!!new x hidden", "cannot run in the jail");
    assert!(said.contains("hidden") && said.contains("tools"), "{said}");
    let list: serde_json::Value =
        serde_json::from_str(&j.h.ctl_ok(&["list", "--json"])).expect("json");
    assert!(
        list.as_array()
            .is_none_or(|a| a.iter().all(|s| s["name"] != "x" || s["state"] != "idle")),
        "{list}"
    );
}

/// A CLI whose program the jail shows, but which needs something the jail hides (here a
/// wrapper that runs a program in clibot's state directory), is run once inside the jail
/// before the session starts: the spawn is refused with what it printed there, instead of a
/// session that dies at once with "the CLI exited (status 127)".
#[test]
fn a_cli_that_cannot_run_inside_the_jail_is_refused_with_what_it_printed_there() {
    let mut h = Harness::with_config(&format!(
        "\n[access.telegram]\npolicy = \"allowlist\"\nallow = [\"{ANN}\"]\nadmins = [\"{ADMIN}\"]\nclis = [\"*\"]\n[cli.wrapped]\nargv = [\"@WORK@/tools/wrapped.sh\"]\n"
    ));
    let real = h.state_dir.join("tools");
    let tools = h.work.join("tools");
    for d in [&real, &tools] {
        std::fs::create_dir_all(d).expect("tools dir");
    }
    let write = |path: &Path, body: &str| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(path, body).expect("tool");
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    };
    write(
        &real.join("real.sh"),
        "#!/bin/sh\n[ \"$1\" = --version ] && { echo 1.0; exit 0; }\nexec bash --norc --noprofile\n",
    );
    write(
        &tools.join("wrapped.sh"),
        &format!("#!/bin/sh\nexec {}/real.sh \"$@\"\n", real.display()),
    );
    let config = std::fs::read_to_string(&h.config).expect("config");
    std::fs::write(
        &h.config,
        config.replace("@WORK@", &h.work.display().to_string()),
    )
    .expect("config");
    h.start_daemon();
    let (tg, g) = fake_telegram::with_gateway(&h);
    let j = Jail { h, tg, _g: g };
    let said = j.ann("!!new w wrapped", "cannot run in the jail");
    assert!(
        said.contains("inside the jail it failed (exit status 127)") && said.contains("real.sh"),
        "the reason is what it printed there: {said}"
    );
    let list: serde_json::Value =
        serde_json::from_str(&j.h.ctl_ok(&["list", "--json"])).expect("json");
    assert!(
        list.as_array()
            .is_none_or(|a| a.iter().all(|s| s["name"] != "w")),
        "no session is left behind: {list}"
    );
    // doctor runs each CLI in the jail too, and names the one that fails there.
    let out = j.h.ctl(&["doctor", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("doctor --json");
    let named = |name: &str| {
        v["checks"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["name"] == name))
            .cloned()
            .unwrap_or_else(|| panic!("no check {name:?} in {v:#}"))
    };
    let wrapped = named("wrapped in telegram's jail");
    assert_eq!(wrapped["status"], "warn", "{wrapped:#}");
    assert!(
        wrapped["detail"]
            .as_str()
            .is_some_and(|d| d.contains("real.sh"))
            && wrapped["fix"]
                .as_str()
                .is_some_and(|f| f.contains("jail_read")),
        "{wrapped:#}"
    );
    assert_eq!(named("bash in telegram's jail")["status"], "ok");
    // Outside the jail (an admin's session) the same CLI runs.
    let work = j.h.work.display().to_string();
    j.h.ctl_ok(&["spawn", "aw", "--cli", "wrapped", "--dir", &work]);
    j.h.wait_list("the admin's session idle", |l| {
        l.as_array()
            .is_some_and(|a| a.iter().any(|s| s["name"] == "aw" && s["state"] == "idle"))
    });
}

/// A goal's check and a job's gate on a member's session run in that session's jail, even
/// when the machine's user set them: what they run (a build, a test) is the member's code,
/// and it reaches no further than the member's session could.
#[test]
fn a_goal_check_and_a_job_gate_on_a_members_session_run_in_its_jail() {
    let j = jail("");
    let ws = j.ann_bash("m", "");
    let outside = j.h.work.join("outside.txt");
    let escape = format!("touch {} && test -f done.txt", outside.display());
    j.h.ctl_ok(&["goal", "m", "--until", &escape, "--max-turns", "1"]);
    let ended =
        j.h.wait_event("m", "the goal's end", Duration::from_secs(30), |e| {
            e["type"] == "goal_ended"
        });
    assert_ne!(ended["reason"], "reached", "{ended}");
    assert!(
        !outside.exists(),
        "the check wrote outside the member's jail"
    );
    j.h.ctl_ok(&[
        "jobs",
        "add",
        "g",
        "--session",
        "m",
        "--prompt",
        "echo gated",
        "--every",
        "1h",
        "--gate",
        "sh",
        "--gate",
        "-c",
        "--gate",
        &format!("touch {} ; exit 1", outside.display()),
    ]);
    j.h.ctl_ok(&["jobs", "run", "g"]);
    let done =
        j.h.wait_event("m", "the gate's end", Duration::from_secs(30), |e| {
            e["type"] == "job_finished"
        });
    assert_eq!(done["outcome"], "gate_skipped", "{done}");
    assert!(
        !outside.exists(),
        "the gate wrote outside the member's jail"
    );
    // Inside its own workspace the check works.
    std::fs::write(ws.join("done.txt"), "").expect("write");
    j.h.ctl_ok(&["goal", "m", "--until", "test -f done.txt"]);
    let reached =
        j.h.wait_event("m", "the goal reached", Duration::from_secs(30), |e| {
            e["type"] == "goal_ended" && e["reason"] == "reached"
        });
    assert_eq!(reached["rounds"], 0);
}

/// git in `dir` (no system or global config) as a named user.
fn git_in(dir: &Path, args: &[&str]) -> String {
    let mut all = vec!["-c", "user.name=T", "-c", "user.email=t@example.com"];
    all.extend_from_slice(args);
    clibot_tests::git(dir, &all)
}

/// A repository at `dir` on `main` with one commit.
fn one_commit(dir: &Path) {
    std::fs::create_dir_all(dir).expect("mkdir");
    git_in(dir, &["init", "-q", "-b", "main"]);
    std::fs::write(dir.join("a.txt"), "one\n").expect("write");
    git_in(dir, &["add", "a.txt"]);
    git_in(dir, &["commit", "-qm", "first"]);
}

/// A member's worktree lives in their workspace; their session commits there (the repository's
/// `.git` writable, its config still not), a merge from the chat lands in their own
/// repository, a pull request (the owner's credentials) is refused, and a repository whose
/// `.git` is a link to the owner's gets no worktree of the owner's repository.
#[test]
fn a_members_worktree_lives_in_their_workspace_and_reaches_nothing_else() {
    let j = jail("");
    let repo = j.workspace().join("repo");
    one_commit(&repo);
    let config = bytes(&repo.join(".git/config"));
    let said = j.ann("!!new w bash repo wt", "started");
    assert!(said.contains("on branch clibot/w from main"), "{said}");
    j.h.wait_list("Ann's worktree session idle", |l| {
        l.as_array()
            .is_some_and(|a| a.iter().any(|s| s["name"] == "w" && s["state"] == "idle"))
    });
    let show: serde_json::Value =
        serde_json::from_str(&j.h.ctl_ok(&["show", "w", "--json"])).expect("json");
    let dir = PathBuf::from(show["dir"].as_str().unwrap_or_default());
    let ws = j.workspace().canonicalize().expect("canonical");
    assert!(
        dir.starts_with(ws.join(".clibot-worktrees")),
        "{}",
        dir.display()
    );
    let out = run_in(
        &j.h,
        "w",
        &dir,
        &format!(
            "{{ echo new > f.txt && git add f.txt && git -c user.name=A -c user.email=a@example.com commit -qm ann; echo rc_commit=$?; \
               printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' >> {cfg}; echo rc_cfg=$?; }} > out 2>&1",
            cfg = repo.join(".git/config").display()
        ),
    );
    assert_eq!(rc(&out, "rc_commit"), "0", "{out}");
    assert_ne!(rc(&out, "rc_cfg"), "0", "{out}");
    assert_eq!(bytes(&repo.join(".git/config")), config);

    j.ann(
        "!!worktree w merge",
        "merged 1 commit(s) of clibot/w into main",
    );
    assert!(git_in(&repo, &["log", "--format=%s", "main"]).contains("ann"));
    j.ann("!!worktree w pr", "an admin opens it");

    // A `.git` planted as a link to the owner's repository: nothing of the owner's is reached.
    let owners = j.h.work.join("owners");
    one_commit(&owners);
    let planted = j.workspace().join("planted");
    std::fs::create_dir_all(&planted).expect("mkdir");
    std::os::unix::fs::symlink(owners.join(".git"), planted.join(".git")).expect("link");
    j.ann("!!new x bash planted wt", "not in a git repository");
    assert_eq!(git_in(&owners, &["worktree", "list"]).lines().count(), 1);
    assert!(!git_in(&owners, &["branch", "--list"]).contains("clibot/x"));

    j.ann("!!stop w", "the worktree on clibot/w is kept");
    j.ann("!!discard w", "discarded");
    assert!(!dir.exists());
}
