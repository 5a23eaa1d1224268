//! The scan behind discovery: this user's processes from /proc, and the panes of every tmux
//! server of the user (the sockets in `${TMUX_TMPDIR:-/tmp}/tmux-UID/`, and `-S` paths read
//! off running tmux processes).

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{Found, Place, identify, package_version};

/// One process, as /proc shows it.
#[derive(Debug, Clone)]
struct Proc {
    pid: u32,
    ppid: u32,
    uid: u32,
    exe: String,
    argv: Vec<String>,
    start_ticks: u64,
}

fn read_proc(pid: u32) -> Option<Proc> {
    let base = PathBuf::from(format!("/proc/{pid}"));
    let status = std::fs::read_to_string(base.join("status")).ok()?;
    let uid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|u| u.parse().ok())?;
    let stat = std::fs::read_to_string(base.join("stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ppid = fields.get(1)?.parse().ok()?;
    // Field 22 of stat, counted from the state (field 3).
    let start_ticks = fields.get(19)?.parse().ok()?;
    let (exe, argv) = super::exe_and_argv(pid)?;
    Some(Proc {
        pid,
        ppid,
        uid,
        exe,
        argv,
        start_ticks,
    })
}

fn all_procs(uid: u32) -> Vec<Proc> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(read_proc)
        .filter(|p| p.uid == uid)
        .collect()
}

/// When the machine booted, in ms since the epoch (`btime` of /proc/stat).
fn boot_ms() -> i64 {
    std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("btime "))
                .and_then(|v| v.trim().parse::<i64>().ok())
        })
        .map_or(0, |s| s * 1000)
}

/// The tmux servers of this user: sockets in the default directory and `-S` paths of running
/// tmux processes.
fn tmux_servers(procs: &[Proc], uid: u32) -> BTreeSet<PathBuf> {
    let dir = std::env::var_os("TMUX_TMPDIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp"))
        .join(format!("tmux-{uid}"));
    let mut out = BTreeSet::new();
    if let Ok(entries) = std::fs::read_dir(&dir) {
        use std::os::unix::fs::FileTypeExt;
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_socket()) {
                out.insert(e.path());
            }
        }
    }
    let own_ns = std::fs::read_link("/proc/self/ns/mnt").ok();
    for p in procs {
        let is_tmux = p
            .argv
            .first()
            .is_some_and(|a| a.rsplit('/').next().is_some_and(|b| b.starts_with("tmux")));
        // A path named by a process that sees other mounts (a jailed session's) means
        // something else there: a socket it names is never connected to.
        let same_mounts = own_ns.is_some()
            && std::fs::read_link(format!("/proc/{}/ns/mnt", p.pid)).ok() == own_ns;
        if !is_tmux || !same_mounts {
            continue;
        }
        let mut it = p.argv.iter();
        while let Some(a) = it.next() {
            if a == "-S"
                && let Some(path) = it.next()
            {
                out.insert(PathBuf::from(path));
            } else if let Some(path) = a.strip_prefix("-S").filter(|s| !s.is_empty()) {
                out.insert(PathBuf::from(path));
            }
        }
    }
    out
}

/// The panes of the tmux server at `socket`: (pane id, pane pid). Bounded in time: a server
/// that does not answer is skipped.
async fn panes(tmux: &Path, socket: &Path) -> Vec<(String, u32)> {
    let run = tokio::process::Command::new(tmux)
        .arg("-S")
        .arg(socket)
        .args(["list-panes", "-a", "-F", "#{pane_id} #{pane_pid}"])
        .env_remove("TMUX")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let Ok(Ok(out)) = tokio::time::timeout(Duration::from_secs(2), run).await else {
        return Vec::new();
    };
    if !out.status.success() {
        return Vec::new();
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (pane, pid) = l.split_once(' ')?;
            Some((pane.to_string(), pid.trim().parse().ok()?))
        })
        .collect()
}

/// The terminal a process reads from (`/dev/pts/N`), if any.
fn tty_of(pid: u32) -> Option<String> {
    let t = std::fs::read_link(format!("/proc/{pid}/fd/0")).ok()?;
    let t = t.display().to_string();
    (t.starts_with("/dev/pts/") || t.starts_with("/dev/tty")).then_some(t)
}

/// Every AI CLI running as this user outside clibot's sessions. `managed` holds the pane pids
/// of the sessions it manages (on any server).
pub async fn scan(tmux: &Path, managed: &BTreeSet<u32>) -> Vec<Found> {
    let uid = rustix::process::getuid().as_raw();
    let procs = all_procs(uid);
    let by_pid: HashMap<u32, &Proc> = procs.iter().map(|p| (p.pid, p)).collect();
    // Which pane each process runs under: walk up its parents to a pane's process.
    let mut pane_of: HashMap<u32, (PathBuf, String)> = HashMap::new();
    for server in tmux_servers(&procs, uid) {
        for (pane, pid) in panes(tmux, &server).await {
            pane_of.insert(pid, (server.clone(), pane));
        }
    }
    let ancestors = |pid: u32| {
        let mut out = Vec::new();
        let mut cur = pid;
        for _ in 0..64 {
            out.push(cur);
            match by_pid.get(&cur) {
                Some(p) if p.ppid > 1 && p.ppid != cur => cur = p.ppid,
                _ => break,
            }
        }
        out
    };
    let ticks = rustix::param::clock_ticks_per_second().max(1) as i64;
    let boot = boot_ms();
    let mut found = Vec::new();
    for p in &procs {
        let Some((cli, path)) = identify(&p.exe, &p.argv) else {
            continue;
        };
        // A wrapper's child (Codex's native binary under its node script): the wrapper is the
        // CLI the user started.
        if by_pid
            .get(&p.ppid)
            .and_then(|pp| identify(&pp.exe, &pp.argv))
            .is_some_and(|(c, _)| c == cli)
        {
            continue;
        }
        let chain = ancestors(p.pid);
        if chain.iter().any(|a| managed.contains(a)) {
            continue;
        }
        let place = match chain.iter().find_map(|a| pane_of.get(a)) {
            Some((server, pane)) => Place::Tmux {
                server: server.clone(),
                pane: pane.clone(),
            },
            None => match tty_of(p.pid) {
                Some(tty) => Place::Tty { tty },
                None => Place::Detached,
            },
        };
        let dir = std::fs::read_link(format!("/proc/{}/cwd", p.pid)).unwrap_or_default();
        let started_ms = boot + (p.start_ticks as i64) * 1000 / ticks;
        let conversation_id = crate::cli::adapter(cli)
            .running_conversation(&crate::cli::running::Running::of(p.pid, &dir, started_ms));
        let mut actions = Vec::new();
        // A CLI in a tmux pane (of any of the user's servers) is adopted where it runs; one in
        // a plain terminal cannot be driven from outside, only resumed.
        if matches!(place, Place::Tmux { .. }) {
            actions.push("adopt".to_string());
        }
        // A known conversation can be continued in a managed session (`clibotctl resume`).
        if conversation_id.is_some() {
            actions.push("resume".to_string());
        }
        found.push(Found {
            id: format!("{cli}-{}", p.pid),
            cli: cli.to_string(),
            version: package_version(Path::new(&path)),
            pid: p.pid,
            dir,
            started_ms,
            place,
            watched: String::new(),
            conversation_id,
            actions,
        });
    }
    found.sort_by_key(|f| f.started_ms);
    found
}
