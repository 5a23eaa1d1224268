//! Process trees, so that a test leaves nothing running behind it: the real CLIs (node) may
//! ignore the hang-up that `tmux kill-server` sends, and a CLI left running at full CPU slows
//! every later test on a 2-core machine.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// `pid` and all its descendants (children found through `/proc/<pid>/stat`'s parent field).
pub fn process_tree(pid: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|p| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
            // "pid (comm) S ppid ...": the fields after the last ')'.
            let (_, rest) = stat.rsplit_once(')')?;
            let ppid = rest.split_whitespace().nth(1)?.parse().ok()?;
            Some((p, ppid))
        })
        .collect();
    let mut tree = vec![pid];
    let mut i = 0;
    while i < tree.len() {
        let parent = tree[i];
        tree.extend(
            parents
                .iter()
                .filter(|&&(_, pp)| pp == parent)
                .map(|&(p, _)| p),
        );
        i += 1;
    }
    tree
}

/// Whether `pid` still runs: `/proc/<pid>/stat` exists and its state is not Z (a zombie no one
/// reaps, as under a container's init, has finished all the same).
pub fn alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    stat.rsplit_once(')')
        .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
}

/// Ends a tmux server (`run` runs tmux with the server's socket and the given arguments) and
/// every process its panes started: the panes' process trees are collected first, the server
/// is killed, and whatever outlives its hang-up for a second gets SIGKILL — the server itself
/// too (tmux 3.3a was seen to stay up after `kill-server` with a control client attached whose
/// other end, a killed daemon, was gone).
pub fn end_tmux_server(run: impl Fn(&[&str]) -> Option<Output>) {
    let server: Option<u32> = run(&["display-message", "-p", "#{pid}"])
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok());
    let panes: Vec<u32> = run(&["list-panes", "-a", "-F", "#{pane_pid}"])
        .filter(|o| o.status.success())
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter_map(|l| l.trim().parse().ok())
                .collect()
        })
        .unwrap_or_default();
    let mut tree: Vec<u32> = panes.into_iter().flat_map(process_tree).collect();
    tree.extend(server);
    let _ = run(&["kill-server"]);
    let deadline = Instant::now() + Duration::from_secs(1);
    while tree.iter().any(|&p| alive(p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left: Vec<String> = tree
        .iter()
        .filter(|&&p| alive(p))
        .map(u32::to_string)
        .collect();
    if !left.is_empty() {
        let _ = Command::new("kill")
            .arg("-KILL")
            .args(&left)
            .stderr(Stdio::null())
            .status();
    }
}
