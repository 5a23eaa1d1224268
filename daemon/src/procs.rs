//! Process trees on Linux, read from /proc: a stopped CLI must not leave children behind.
//! (Gemini CLI, for one, survives the SIGHUP that closing its pane sends, once its shell tool
//! has run.)

use std::collections::HashMap;

/// `pid` and all its descendants, parents first.
pub fn tree(pid: u32) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return vec![pid];
    };
    for entry in dir.flatten() {
        let Some(p) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if let Some(pp) = parent_of(p) {
            children.entry(pp).or_default().push(p);
        }
    }
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        if let Some(c) = children.get(&out[i]) {
            out.extend(c);
        }
        i += 1;
    }
    out
}

/// The fields of `/proc/PID/stat` after the command name (which is in parentheses and may
/// contain spaces): the state first, then the parent pid, ...
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    Some(rest.split_whitespace().map(str::to_string).collect())
}

fn parent_of(pid: u32) -> Option<u32> {
    stat_fields(pid)?.get(1)?.parse().ok()
}

/// Whether `pid` still runs (a zombie does not count).
pub fn alive(pid: u32) -> bool {
    stat_fields(pid).is_some_and(|f| f.first().is_some_and(|s| s != "Z"))
}

/// The exit status of a process that has exited but was not reaped yet (a zombie): field 52 of
/// its stat, in `waitpid` form. tmux sometimes reaps a pane's process late (when the next child
/// exits), and until then reports the pane dead with no status.
pub fn zombie_exit_status(pid: u32) -> Option<i32> {
    let fields = stat_fields(pid)?;
    if fields.first().map(String::as_str) != Some("Z") {
        return None;
    }
    // Field 52 overall is index 49 after the state (field 3).
    let code: i32 = fields.get(49)?.parse().ok()?;
    let signal = code & 0x7f;
    Some(if signal == 0 {
        (code >> 8) & 0xff
    } else {
        128 + signal
    })
}

/// The processes left in the session (`setsid`) a pane's process led, once that process is
/// gone: children that ignored the SIGHUP of its end (`nohup`, a tool's daemon), orphaned but
/// still in its session. Empty while a process `sid` exists — then it is the leader itself,
/// or (its number reused) someone else's. While any process is in session `sid`, the kernel
/// keeps that number from being reused, so what is found is the pane's own.
pub fn left_in_session(sid: u32) -> Vec<u32> {
    if sid <= 1 || std::path::Path::new(&format!("/proc/{sid}")).exists() {
        return Vec::new();
    }
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
        .filter(|p| {
            stat_fields(*p)
                .and_then(|f| f.get(3)?.parse::<u32>().ok())
                .is_some_and(|s| s == sid)
        })
        .collect()
}

/// SIGKILL to each pid that still runs.
pub fn kill_all(pids: &[u32]) -> usize {
    let mut n = 0;
    for &p in pids {
        if alive(p)
            && let Some(pid) = rustix::process::Pid::from_raw(p as i32)
            && rustix::process::kill_process(pid, rustix::process::Signal::KILL).is_ok()
        {
            n += 1;
        }
    }
    n
}

/// Whether the TCP socket listening on local `port` where a connection to 127.0.0.1 lands
/// (bound to 127.0.0.1, to any address, or to `::`/`::ffff:127.0.0.1`) is held by `root` or
/// one of its descendants: the server a session started, not whatever else took the port (a
/// process of another session, or of another user, after the session's server went away).
pub fn listener_in_tree(port: u16, root: u32) -> bool {
    let mut inodes = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
            let (Some(local), Some(state), Some(inode)) = (f.get(1), f.get(3), f.get(9)) else {
                continue;
            };
            let listening = *state == "0A";
            // Where a connection to 127.0.0.1 can land.
            let addr = local.rsplit_once(':').map_or("", |(a, _)| a);
            let loopback = matches!(
                addr,
                "0100007F"
                    | "00000000"
                    | "00000000000000000000000000000000"
                    | "0000000000000000FFFF00000100007F"
            );
            let on_port = local
                .rsplit(':')
                .next()
                .and_then(|p| u16::from_str_radix(p, 16).ok())
                == Some(port);
            if listening && loopback && on_port && *inode != "0" {
                inodes.push(format!("socket:[{inode}]"));
            }
        }
    }
    if inodes.is_empty() {
        return false;
    }
    tree(root).into_iter().any(|pid| {
        std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|fds| {
            fds.flatten().any(|fd| {
                std::fs::read_link(fd.path())
                    .is_ok_and(|t| inodes.iter().any(|i| t.as_os_str() == i.as_str()))
            })
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_and_kills_descendants() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & sleep 30 & wait"])
            .spawn()
            .expect("spawn sh");
        let pid = child.id();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut t = tree(pid);
        while t.len() < 3 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
            t = tree(pid);
        }
        assert_eq!(t.len(), 3, "sh and two sleeps: {t:?}");
        assert_eq!(kill_all(&t[1..]), 2);
        let _ = child.kill();
        let _ = child.wait();
    }

    #[test]
    fn a_listener_is_found_only_in_the_tree_that_holds_it() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = l.local_addr().expect("addr").port();
        assert!(listener_in_tree(port, std::process::id()));
        let mut other = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("sleep");
        assert!(!listener_in_tree(port, other.id()), "not the child's");
        let _ = other.kill();
        let _ = other.wait();
        drop(l);
        assert!(
            !listener_in_tree(port, std::process::id()),
            "nobody listens"
        );
    }
}
