use super::*;
use std::os::unix::fs::{PermissionsExt, symlink};

fn setup() -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().expect("tempdir");
    let root = t.path().canonicalize().expect("canonical");
    std::fs::create_dir_all(root.join("s/sub")).expect("dirs");
    std::fs::create_dir_all(root.join("outside")).expect("dirs");
    std::fs::write(root.join("s/a.txt"), "hello").expect("write");
    std::fs::write(root.join("outside/secret"), "key").expect("write");
    (t, root)
}

#[test]
fn a_regular_file_is_read_and_nothing_else() {
    let (_t, root) = setup();
    let d = Dir::open(&root.join("s")).expect("open");
    assert_eq!(d.read(Path::new("a.txt"), 100).expect("read"), b"hello");
    symlink(root.join("outside/secret"), root.join("s/link")).expect("link");
    assert!(matches!(
        d.read(Path::new("link"), 100),
        Err(BeneathError::Link(_))
    ));
    symlink(root.join("outside"), root.join("s/dirlink")).expect("link");
    assert!(matches!(
        d.read(Path::new("dirlink/secret"), 100),
        Err(BeneathError::Link(_))
    ));
    assert!(matches!(
        d.read(Path::new("../outside/secret"), 100),
        Err(BeneathError::BadPath(_))
    ));
    assert!(matches!(
        d.read(Path::new("/etc/passwd"), 100),
        Err(BeneathError::BadPath(_))
    ));
    assert!(matches!(
        d.read(Path::new("a.txt"), 3),
        Err(BeneathError::TooBig { len: 5, .. })
    ));
    assert!(matches!(
        d.read(Path::new("sub"), 100),
        Err(BeneathError::NotRegular(_, "a directory"))
    ));
    assert!(
        d.read(Path::new("missing"), 100)
            .is_err_and(|e| e.is_not_found())
    );
}

#[test]
fn a_fifo_is_refused_at_once_and_a_device_is_never_opened() {
    let (_t, root) = setup();
    let fifo = root.join("s/p");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        FileType::Fifo,
        Mode::from_raw_mode(0o600),
        0,
    )
    .expect("mkfifo");
    let d = Dir::open(&root.join("s")).expect("open");
    let started = std::time::Instant::now();
    assert!(matches!(
        d.read(Path::new("p"), 100),
        Err(BeneathError::NotRegular(_, "a FIFO"))
    ));
    assert!(started.elapsed() < Duration::from_secs(2));
    let dev = Dir::open(Path::new("/dev")).expect("/dev");
    assert!(matches!(
        dev.read(Path::new("zero"), 100),
        Err(BeneathError::NotRegular(_, "a device"))
    ));
}

#[test]
fn a_link_in_the_directory_itself_is_refused() {
    let (_t, root) = setup();
    symlink(root.join("outside"), root.join("s/sub/out")).expect("link");
    assert!(matches!(
        Dir::open(&root.join("s/sub/out")),
        Err(BeneathError::Link(_))
    ));
    let d = Dir::open(&root.join("s")).expect("open");
    assert!(matches!(
        d.create_dir_all(Path::new("sub/out/x"), 0o700),
        Err(BeneathError::Link(_))
    ));
    assert!(!root.join("outside/x").exists());
}

#[test]
fn a_write_replaces_a_link_and_never_writes_through_it() {
    let (_t, root) = setup();
    let d = Dir::open(&root.join("s")).expect("open");
    symlink(root.join("outside/secret"), root.join("s/settings.json")).expect("link");
    d.write(Path::new("settings.json"), b"{}", 0o600)
        .expect("write");
    assert_eq!(
        std::fs::read_to_string(root.join("outside/secret")).expect("read"),
        "key"
    );
    let meta = std::fs::symlink_metadata(root.join("s/settings.json")).expect("meta");
    assert!(meta.is_file());
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    // Through a link in a parent: refused.
    symlink(root.join("outside"), root.join("s/cfg")).expect("link");
    assert!(matches!(
        d.write(Path::new("cfg/new"), b"x", 0o600),
        Err(BeneathError::Link(_))
    ));
    assert!(!root.join("outside/new").exists());
    // No temporary file is left behind.
    let left: Vec<_> = d
        .entries(Path::new(""))
        .expect("entries")
        .into_iter()
        .filter(|e| e.name.to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn chmod_and_rename_never_follow() {
    let (_t, root) = setup();
    let d = Dir::open(&root.join("s")).expect("open");
    std::fs::set_permissions(
        root.join("outside/secret"),
        std::fs::Permissions::from_mode(0o644),
    )
    .expect("chmod");
    symlink(root.join("outside/secret"), root.join("s/k")).expect("link");
    assert!(matches!(
        d.chmod(Path::new("k"), 0o700),
        Err(BeneathError::Link(_))
    ));
    let mode = std::fs::metadata(root.join("outside/secret"))
        .expect("meta")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o644);
    d.chmod(Path::new("sub"), 0o700).expect("chmod dir");
    // A rename moves the link itself.
    let sent = d.create_dir_all(Path::new("sent"), 0o700).expect("sent");
    d.rename(Path::new("k"), &sent, Path::new("k2"))
        .expect("rename");
    assert!(
        std::fs::symlink_metadata(root.join("s/sent/k2"))
            .expect("meta")
            .file_type()
            .is_symlink()
    );
    assert!(root.join("outside/secret").exists());
}

#[test]
fn entries_report_links_as_links() {
    let (_t, root) = setup();
    symlink("/etc/passwd", root.join("s/l")).expect("link");
    let d = Dir::open(&root.join("s")).expect("open");
    let e = d.entries(Path::new("")).expect("entries");
    let kind = |n: &str| e.iter().find(|x| x.name == n).map(|x| (x.kind, x.len));
    assert_eq!(kind("a.txt"), Some((Kind::File, 5)));
    assert_eq!(kind("l"), Some((Kind::Link, 0)));
    assert_eq!(kind("sub"), Some((Kind::Dir, 0)));
    assert_eq!(d.kind(Path::new("l")).expect("kind").0, Kind::Link);
}

#[test]
fn the_tail_of_a_long_file() {
    let (_t, root) = setup();
    std::fs::write(root.join("s/log"), "0123456789").expect("write");
    let d = Dir::open(&root.join("s")).expect("open");
    assert_eq!(
        d.read_tail(Path::new("log"), 4).expect("tail"),
        (b"6789".to_vec(), true)
    );
    assert_eq!(
        d.read_tail(Path::new("log"), 40).expect("tail"),
        (b"0123456789".to_vec(), false)
    );
}

#[test]
fn the_walk_refuses_links_as_openat2_does() {
    let (_t, root) = setup();
    symlink(root.join("outside"), root.join("s/o")).expect("link");
    let d = Dir::open(&root.join("s")).expect("open");
    let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW;
    assert!(matches!(
        d.walk(Path::new("o/secret"), flags, Mode::empty()),
        Err(BeneathError::Link(_))
    ));
    assert!(d.walk(Path::new("a.txt"), flags, Mode::empty()).is_ok());
}

#[test]
fn records_in_a_session_area_are_read_with_no_link_followed() {
    let (_t, root) = setup();
    let area = root.join("jails");
    std::fs::create_dir_all(area.join("id1/home/.claude")).expect("dirs");
    confine_below(area.clone());
    // A single area (a jailed session's files), and one not registered (an unjailed one's).
    std::fs::create_dir_all(root.join("sessions/j/copilot-home")).expect("dirs");
    std::fs::create_dir_all(root.join("sessions/u/copilot-home")).expect("dirs");
    std::fs::write(root.join("outside/events.jsonl"), "{}\n").expect("write");
    for s in ["j", "u"] {
        std::os::unix::fs::symlink(
            root.join("outside"),
            root.join(format!("sessions/{s}/copilot-home/state")),
        )
        .expect("link");
    }
    confine_area(root.join("sessions/j"));
    assert!(matches!(
        read_record(
            &root.join("sessions/j/copilot-home/state/events.jsonl"),
            100
        ),
        Err(BeneathError::Link(_))
    ));
    assert_eq!(
        read_record(
            &root.join("sessions/u/copilot-home/state/events.jsonl"),
            100
        )
        .expect("read"),
        "{}\n",
        "an unjailed session's own links are followed"
    );
    let lines = "{\"a\":1}\n{\"b\":2}\n";
    std::fs::write(area.join("id1/home/.claude/t.jsonl"), lines).expect("write");
    assert_eq!(
        read_record(&area.join("id1/home/.claude/t.jsonl"), 100).expect("read"),
        lines
    );
    assert_eq!(
        read_record_tail(&area.join("id1/home/.claude/t.jsonl"), 10).expect("tail"),
        "{\"b\":2}\n",
        "the partial first line is dropped"
    );
    std::os::unix::fs::symlink(root.join("outside"), area.join("id1/home/.claude/o"))
        .expect("link");
    assert!(matches!(
        read_record(&area.join("id1/home/.claude/o/secret"), 100),
        Err(BeneathError::Link(_))
    ));
    // Outside every area: links followed (the user's own CLI named it), regular files only.
    std::os::unix::fs::symlink(root.join("outside/secret"), root.join("s/l")).expect("link");
    assert_eq!(read_record(&root.join("s/l"), 100).expect("read"), "key");
    assert!(matches!(
        read_record(Path::new("/dev/zero"), 100),
        Err(BeneathError::NotRegular(..))
    ));
    // A sparse file far larger than the cap: only its tail is read.
    let big = area.join("id1/home/big.jsonl");
    let f = std::fs::File::create(&big).expect("create");
    f.set_len(20 << 30).expect("sparse");
    drop(f);
    std::fs::OpenOptions::new()
        .append(true)
        .open(&big)
        .and_then(|mut f| std::io::Write::write_all(&mut f, b"\n{\"last\":1}\n"))
        .expect("append");
    assert_eq!(
        read_record_tail(&big, 1 << 10).expect("tail"),
        "{\"last\":1}\n"
    );
    assert!(matches!(
        read_record(&big, RECORD_MAX),
        Err(BeneathError::TooBig { .. })
    ));
}
