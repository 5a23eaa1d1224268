//! Idle connections to `[daemon] metrics_listen` cannot take the daemon's file descriptors
//! (issue 20, item 7): with the daemon's open-file limit lowered to 256, 300 idle connections
//! to the metrics port leave `clibotctl list` answering at once, a fresh scrape is served at
//! once (the oldest idle connection makes room), at most 64 of them stay open, and those are
//! closed after 10 s without traffic. Also: every systemd unit raises the open-file limit.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use clibot_tests::Harness;

/// The daemon's cap on metrics connections (daemon/src/metrics/http.rs).
const CAP: usize = 64;

fn harness() -> Harness {
    let h = Harness::with_config("");
    let config = std::fs::read_to_string(&h.config).expect("read config");
    std::fs::write(
        &h.config,
        config.replacen(
            "[daemon]\n",
            "[daemon]\nmetrics_listen = \"127.0.0.1:0\"\n",
            1,
        ),
    )
    .expect("write config");
    h
}

/// The address the daemon logged for its metrics endpoint.
fn logged_listen(h: &Harness) -> String {
    let log = h.daemon_log();
    log.lines()
        .find(|l| l.contains("serving the metrics on /metrics"))
        .and_then(|l| l.split_whitespace().find_map(|w| w.strip_prefix("listen=")))
        .map(str::to_string)
        .unwrap_or_else(|| panic!("no metrics address in the log:\n{log}"))
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// Whether the daemon closed `s`: end of file or a reset within `within`.
fn closed(s: &mut TcpStream, within: Duration) -> bool {
    s.set_read_timeout(Some(within)).expect("timeout");
    let mut b = [0u8; 16];
    match s.read(&mut b) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    }
}

fn scrape(addr: &str) -> String {
    let mut s = TcpStream::connect(addr).expect("connect for a scrape");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .expect("send the request");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("the answer in time");
    out
}

#[test]
fn idle_metrics_connections_cannot_exhaust_the_daemon() {
    let mut h = harness();
    h.start_daemon();
    let pid = h.daemon_pid().expect("pid");
    let addr = logged_listen(&h);
    // A low limit, so that 300 connections would exhaust it if they were all kept.
    let limited = std::process::Command::new("prlimit")
        .args([&format!("--pid={pid}"), "--nofile=256:256"])
        .status()
        .expect("run prlimit");
    assert!(limited.success(), "prlimit failed");
    let before = open_fds(pid);
    assert!(
        before < 150,
        "the daemon already holds {before} descriptors"
    );

    let began = Instant::now();
    let mut idle: Vec<TcpStream> = (0..300)
        .map(|i| TcpStream::connect(&addr).unwrap_or_else(|e| panic!("connection {i}: {e}")))
        .collect();
    // Let the daemon accept them all (each accept past the cap closes an older one).
    std::thread::sleep(Duration::from_millis(500));
    let held = open_fds(pid);
    assert!(
        held <= before + CAP + 4,
        "the daemon holds {held} descriptors (it held {before} before 300 connections)"
    );

    let t = Instant::now();
    let list = h.ctl_ok(&["list"]);
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "clibotctl list took {:?}: {list}",
        t.elapsed()
    );
    let t = Instant::now();
    let text = scrape(&addr);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("clibot_events_written_total"), "{text}");
    assert!(
        t.elapsed() < Duration::from_secs(3),
        "a fresh scrape took {:?}",
        t.elapsed()
    );

    // The oldest were closed to make room; at most the cap's worth stay open until they idle out.
    let shut = idle
        .iter_mut()
        .map(|s| closed(s, Duration::from_millis(20)))
        .filter(|c| *c)
        .count();
    assert!(
        shut >= 300 - CAP,
        "only {shut} of 300 idle connections were closed"
    );
    assert!(
        began.elapsed() < Duration::from_secs(9),
        "too slow to tell the cap from the idle timeout"
    );
    // After 10 s without traffic every one of them is closed.
    std::thread::sleep(Duration::from_secs(11).saturating_sub(began.elapsed()));
    let open = idle
        .iter_mut()
        .map(|s| closed(s, Duration::from_secs(2)))
        .filter(|c| !c)
        .count();
    assert_eq!(open, 0, "{open} idle connections outlived the idle timeout");
    assert!(open_fds(pid) <= before + 4, "descriptors are given back");
    drop(idle);
    let text = scrape(&addr);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    h.ctl_ok(&["list"]);
    assert!(h.terminate_daemon().success());
}

#[test]
fn every_systemd_unit_raises_the_open_file_limit() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../systemd");
    let mut units = 0;
    for entry in std::fs::read_dir(&dir).expect("systemd/") {
        let path = entry.expect("entry").path();
        let text = std::fs::read_to_string(&path).expect("read unit");
        units += 1;
        assert!(
            text.lines().any(|l| l.trim() == "LimitNOFILE=65536"),
            "{} has no LimitNOFILE=65536",
            path.display()
        );
    }
    assert!(units >= 4, "{units} units");
}
