//! Test harness: the real `clibotd` and `clibotctl` binaries on a private socket, state directory
//! and tmux server (`tmux -S <tempdir>/tmux.sock -f /dev/null`), all removed on drop.

pub mod approvals;
pub mod asker;
pub mod attack;
pub mod chats;
pub mod claude;
pub mod codex;
pub mod copilot;
pub mod desk;
mod event_stream;
pub mod fake_discord;
pub mod fake_feishu;
pub mod fake_slack;
pub mod fake_telegram;
pub mod gemini;
pub mod live;
pub mod mock_chat;
pub mod mock_llm;
pub mod mock_openai;
pub mod opencode;
pub mod procs;
pub mod qwen;
pub mod sshd;
pub mod tmux_driver;

use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Where the workspace's binaries are, built first when they are missing or older than their
/// sources: `cargo test` builds only the tested package's own binaries, so clibotd, clibotctl
/// and clibot-gateway could otherwise be stale.
pub fn bin(name: &str) -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        // Tests run from target/<profile>/deps/, benchmarks from target/<profile>/.
        let exe = std::env::current_exe().expect("current_exe");
        let candidates: Vec<PathBuf> = exe
            .ancestors()
            .skip(1)
            .take(2)
            .map(Path::to_path_buf)
            .collect();
        let current = |d: &PathBuf| {
            let built = ["clibotd", "clibotctl", "clibot-gateway"]
                .iter()
                .map(|b| std::fs::metadata(d.join(b)).and_then(|m| m.modified()).ok())
                .collect::<Option<Vec<_>>>()
                .and_then(|times| times.into_iter().min());
            built.is_some_and(|b| newest_source().is_none_or(|s| s <= b))
        };
        if let Some(d) = candidates.iter().find(|d| current(d)) {
            return d.clone();
        }
        // `CLIBOT_TEST_PREBUILT=1`: the binaries were built by hand (`cargo build -p …`) and are
        // used as they are, even if some other crate's sources are newer.
        if std::env::var_os("CLIBOT_TEST_PREBUILT").is_some()
            && let Some(d) = candidates.iter().find(|d| d.join("clibotd").exists())
        {
            return d.clone();
        }
        let dir = candidates
            .iter()
            .find(|d| d.join("deps").is_dir())
            .cloned()
            .expect("target dir");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args([
            "build",
            "-p",
            "clibotd",
            "-p",
            "clibotctl",
            "-p",
            "clibot-gateway",
        ]);
        if dir.ends_with("release") {
            cmd.arg("--release");
        }
        let status = cmd.status().expect("run cargo build");
        assert!(status.success(), "building clibotd and clibotctl failed");
        dir
    });
    dir.join(name)
}

/// One isolated clibot installation.
pub struct Harness {
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
    pub state_dir: PathBuf,
    pub tmux_socket: PathBuf,
    pub config: PathBuf,
    pub work: PathBuf,
    daemon: Option<Child>,
    /// The gateways started for this harness: ended with it (a test that drops its `Child`
    /// would leave one reconnecting to a daemon that is gone, holding what it inherited).
    gateways: std::sync::Mutex<Vec<u32>>,
}

/// The config every test starts from: confined to the test's work dir, quick safety net, and
/// a `bash` CLI with no rc files and a fixed prompt, so screens are predictable.
const BASE_CONFIG: &str = r#"
[daemon]
allowed_roots = ["@WORK@"]
poll_interval_ms = 200
stop_timeout_ms = 2000

[tmux]
config_file = "/dev/null"
width = 120
height = 40

[cli.bash]
argv = ["bash", "--norc", "--noprofile"]
env = { PS1 = "$ ", HISTFILE = "/dev/null" }
submit_delay_ms = 50
stop_keys = ["C-c"]
stop_text = "exit"
quiet_ms = 300
"#;

impl Harness {
    /// [`Harness::new`] with `keys` at the top of the config's `[daemon]` section.
    pub fn with_daemon_keys(keys: &str) -> Harness {
        let h = Harness::new();
        h.set_daemon_keys(keys);
        h
    }

    /// Puts `keys` at the top of the config's `[daemon]` section (before the daemon starts).
    pub fn set_daemon_keys(&self, keys: &str) {
        let text = std::fs::read_to_string(&self.config).expect("read config");
        let text = text.replacen("[daemon]\n", &format!("[daemon]\n{keys}\n"), 1);
        std::fs::write(&self.config, text).expect("write config");
    }

    /// A harness with the base config plus `extra` TOML appended.
    pub fn with_config(extra: &str) -> Harness {
        let dir = tempfile::Builder::new()
            .prefix("clibot-test-")
            .tempdir()
            .expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical tempdir");
        let work = root.join("work");
        std::fs::create_dir_all(&work).expect("mkdir work");
        let config = root.join("config.toml");
        // `@WORK@` stands for the work directory in the extra TOML too.
        let text = (BASE_CONFIG.to_string() + extra).replace("@WORK@", &work.display().to_string());
        std::fs::write(&config, text).expect("write config");
        Harness {
            socket: root.join("run/clibotd.sock"),
            state_dir: root.join("state"),
            tmux_socket: root.join("tmux.sock"),
            config,
            work,
            dir,
            daemon: None,
            gateways: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// Where this installation's daemon keeps members' workspaces.
    pub fn data_dir(&self) -> PathBuf {
        self.state_dir.with_file_name("data")
    }

    pub fn new() -> Harness {
        Harness::with_config("")
    }

    /// Adds `[cli.NAME]` with this argv and environment to the config, and `daemon_extra` to
    /// its `[daemon]` section (before the daemon starts).
    pub fn add_cli(
        &self,
        name: &str,
        argv: &[String],
        env: &[(String, String)],
        daemon_extra: &str,
    ) {
        // JSON strings are valid TOML basic strings.
        let q = |s: &str| serde_json::Value::String(s.to_string()).to_string();
        let env = env
            .iter()
            .map(|(k, v)| format!("{k} = {}", q(v)))
            .collect::<Vec<_>>()
            .join(", ");
        let argv = argv.iter().map(|a| q(a)).collect::<Vec<_>>().join(", ");
        let text = std::fs::read_to_string(&self.config).expect("read config");
        let text = text.replacen("[daemon]\n", &format!("[daemon]\n{daemon_extra}\n"), 1)
            + &format!(
                "\n[cli.{name}]\nargv = [{argv}]\nenv = {{ {env} }}\nsubmit_delay_ms = 300\n"
            );
        std::fs::write(&self.config, text).expect("write config");
    }

    /// The environment both binaries get.
    fn envs(&self, cmd: &mut Command) {
        cmd.env("CLIBOT_SOCKET", &self.socket)
            .env("CLIBOT_STATE_DIR", &self.state_dir)
            .env("CLIBOT_DATA_DIR", self.data_dir())
            .env("CLIBOT_TMUX_SOCKET", &self.tmux_socket)
            .env("CLIBOT_CONFIG", &self.config)
            .env("CLIBOT_LOG", "debug")
            .env_remove("TMUX");
    }

    /// Starts clibotd and waits until it reports ready over NOTIFY_SOCKET (as systemd would see
    /// it), so tests never sleep to guess.
    pub fn start_daemon(&mut self) {
        self.start_daemon_without(&[]);
    }

    /// [`Harness::start_daemon`], with these variables removed from the daemon's environment
    /// (and so from the tmux server it starts).
    pub fn start_daemon_without(&mut self, unset: &[&str]) {
        self.start_daemon_env(unset, &[]);
    }

    /// [`Harness::start_daemon_without`], with `env` set in the daemon's environment too.
    pub fn start_daemon_env(&mut self, unset: &[&str], env: &[(&str, &str)]) {
        assert!(self.daemon.is_none(), "daemon already running");
        let notify_path = self
            .dir
            .path()
            .join(format!("notify-{}", Instant::now().elapsed().as_nanos()));
        let _ = std::fs::remove_file(&notify_path);
        let notify = UnixDatagram::bind(&notify_path).expect("bind notify socket");
        notify
            .set_read_timeout(Some(Duration::from_secs(20)))
            .expect("timeout");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("clibotd.log"))
            .expect("log file");
        let mut cmd = Command::new(bin("clibotd"));
        self.envs(&mut cmd);
        for v in unset {
            cmd.env_remove(v);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.env("NOTIFY_SOCKET", &notify_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        let child = cmd.spawn().expect("spawn clibotd");
        self.daemon = Some(child);
        let mut buf = [0u8; 512];
        loop {
            match notify.recv(&mut buf) {
                Ok(n) if String::from_utf8_lossy(&buf[..n]).contains("READY=1") => break,
                Ok(_) => continue,
                // A signal to this test process (a child ending) is not the daemon's answer.
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => panic!(
                    "clibotd did not become ready: {e}\nlog:\n{}",
                    self.daemon_log()
                ),
            }
        }
        let _ = std::fs::remove_file(&notify_path);
    }

    /// Starts the real `clibot-gateway` for this harness's daemon and config file, with
    /// `args` and `env` (no bot token from the test's own environment leaks in); what it logs
    /// goes to [`Harness::gateway_log`].
    pub fn gateway(&self, args: &[&str], env: &[(&str, &str)]) -> Child {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("gateway.log"))
            .expect("open gateway.log");
        let mut cmd = Command::new(bin("clibot-gateway"));
        cmd.args(args)
            .arg("--socket")
            .arg(&self.socket)
            .env("CLIBOT_CONFIG", &self.config)
            .env_remove("TELEGRAM_TOKEN")
            .env_remove("DISCORD_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().expect("start clibot-gateway");
        if let Ok(mut g) = self.gateways.lock() {
            g.push(child.id());
        }
        child
    }

    /// What the gateways of this test logged so far.
    pub fn gateway_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("gateway.log")).unwrap_or_default()
    }

    /// What the daemon logged so far.
    pub fn daemon_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("clibotd.log")).unwrap_or_default()
    }

    /// The daemon's pid.
    pub fn daemon_pid(&self) -> Option<u32> {
        self.daemon.as_ref().map(Child::id)
    }

    /// SIGKILL: no shutdown code runs.
    pub fn kill_daemon(&mut self) {
        if let Some(mut c) = self.daemon.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM and wait: the graceful path.
    pub fn terminate_daemon(&mut self) -> std::process::ExitStatus {
        let mut c = self.daemon.take().expect("daemon running");
        let pid = c.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        c.wait().expect("wait clibotd")
    }

    /// A clibotctl command with this installation's environment (autostart off).
    pub fn ctl_command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(bin("clibotctl"));
        self.envs(&mut cmd);
        cmd.env("CLIBOT_NO_AUTOSTART", "1")
            .args(args)
            .stdin(Stdio::null());
        cmd
    }

    /// Runs clibotctl to completion.
    pub fn ctl(&self, args: &[&str]) -> Output {
        self.ctl_command(args).output().expect("run clibotctl")
    }

    /// Runs clibotctl and insists that it succeeds; returns stdout.
    pub fn ctl_ok(&self, args: &[&str]) -> String {
        let out = self.ctl(args);
        assert!(
            out.status.success(),
            "clibotctl {args:?} failed ({}):\nstdout: {}\nstderr: {}\ndaemon log:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            self.daemon_log()
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs clibotctl and insists that it fails with exit code 1; returns stderr.
    pub fn ctl_err(&self, args: &[&str]) -> String {
        let out = self.ctl(args);
        assert_eq!(
            out.status.code(),
            Some(1),
            "clibotctl {args:?} should fail with 1; stdout: {} stderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    /// Runs `f` with a gRPC client to completion, on a runtime of its own (for tests that are
    /// not async themselves).
    pub fn with_client<T, F>(&self, f: impl FnOnce(clibot_proto::Client) -> F) -> T
    where
        F: std::future::Future<Output = T>,
    {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async { f(self.client().await).await })
    }

    /// A gRPC client.
    pub async fn client(&self) -> clibot_proto::Client {
        clibot_proto::connect(&self.socket)
            .await
            .expect("connect to clibotd")
    }

    /// A raw tmux command against this installation's tmux server.
    pub fn tmux(&self, args: &[&str]) -> Output {
        self.try_tmux(args).expect("run tmux")
    }

    /// [`Harness::tmux`], `None` when tmux cannot be run.
    fn try_tmux(&self, args: &[&str]) -> Option<Output> {
        Command::new("tmux")
            .arg("-S")
            .arg(&self.tmux_socket)
            .args(["-f", "/dev/null"])
            .args(args)
            .env_remove("TMUX")
            .stdin(Stdio::null())
            .output()
            .ok()
    }

    /// Spawns a `bash` session NAME in the work directory and waits for its prompt.
    pub fn spawn_bash(&self, name: &str) {
        let work = self.work.display().to_string();
        self.ctl_ok(&["spawn", name, "--cli", "bash", "--dir", &work]);
        self.wait_screen(name, "the prompt", |s| s.contains('$'));
    }

    /// Waits until the session's screen satisfies `pred`; panics with the last screen if not.
    pub fn wait_screen(&self, name: &str, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut last = String::new();
        while Instant::now() < deadline {
            let out = self.ctl(&["screen", name, "--lines", "200"]);
            last = String::from_utf8_lossy(&out.stdout).into_owned();
            if out.status.success() && pred(&last) {
                return last;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "timed out waiting for {what} in {name}; last screen:\n{last}\ndaemon log:\n{}",
            self.daemon_log()
        );
    }

    /// Waits until `clibotctl list --json` satisfies `pred`.
    pub fn wait_list(
        &self,
        what: &str,
        pred: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut last = serde_json::Value::Null;
        while Instant::now() < deadline {
            last = serde_json::from_str(&self.ctl_ok(&["list", "--json"]))
                .expect("list --json is JSON");
            if pred(&last) {
                return last;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("timed out waiting for {what}; last list: {last:#}");
    }

    /// The first event that `pred` accepts, waiting up to `within` on the daemon's event
    /// stream (no polling); on timeout the test fails with session `name`'s screen, the events
    /// and the daemon's log.
    pub fn wait_event(
        &self,
        name: &str,
        what: &str,
        within: Duration,
        pred: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let deadline = Instant::now() + within;
        if let Some(e) = event_stream::first_event(self, deadline, &pred) {
            return e;
        }
        let screen = String::from_utf8_lossy(&self.ctl(&["screen", name]).stdout).into_owned();
        panic!(
            "timed out waiting for {what}\nscreen:\n{screen}\nevents:\n{:#?}\nlog:\n{}",
            self.events(),
            self.daemon_log()
        );
    }

    /// All events as JSON objects (`events --since 0 --json`).
    pub fn events(&self) -> Vec<serde_json::Value> {
        self.ctl_ok(&["events", "--since", "0", "--json"])
            .lines()
            .map(|l| serde_json::from_str(l).expect("event line is JSON"))
            .collect()
    }

    /// Waits until the gateway told the daemon that `platform` chat `chat` was shown every
    /// event through `seq` (its delivery cursor, `chats --json`): a gateway killed after that
    /// sends none of them again.
    pub fn wait_delivered(&self, platform: &str, chat: &str, seq: u64) {
        let cursor = || -> u64 {
            let rows: serde_json::Value =
                serde_json::from_str(&self.ctl_ok(&["chats", "--json"])).unwrap_or_default();
            rows.as_array()
                .into_iter()
                .flatten()
                .find(|r| r["platform"] == platform && r["chat"] == chat)
                .and_then(|r| r["delivered_through"].as_u64())
                .unwrap_or(0)
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while cursor() < seq {
            assert!(
                std::time::Instant::now() < deadline,
                "{platform} chat {chat} was never shown event {seq} (its cursor is {})",
                cursor()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Default for Harness {
    fn default() -> Self {
        Harness::new()
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        let gateways = self.gateways.lock().map(|g| g.clone()).unwrap_or_default();
        for pid in gateways {
            // Still this harness's gateway (not a pid used again since): then it goes.
            let ours = std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                String::from_utf8_lossy(&c).contains(&*self.socket.to_string_lossy())
            });
            if ours && procs::alive(pid) {
                let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            }
        }
        self.kill_daemon();
        procs::end_tmux_server(|args| self.try_tmux(args));
    }
}

/// The environment shared by the real CLIs in the tests: a private `HOME` (and XDG dirs under
/// it), `PATH` with the pinned npm binaries and node first, and bash as the shell their tools
/// run commands with. Each CLI adds its own variables.
pub fn private_home_env(home: &Path) -> Vec<(String, String)> {
    let home = home.display().to_string();
    let mut path: Vec<PathBuf> = vec![claude::node_bin_dir()];
    let inherited = std::env::var_os("PATH").unwrap_or_default();
    let inherited: Vec<PathBuf> = std::env::split_paths(&inherited).collect();
    if let Some(node_dir) = inherited.iter().find(|d| d.join("node").is_file()) {
        path.push(node_dir.clone());
    }
    for dir in inherited
        .into_iter()
        .chain(["/usr/local/bin", "/usr/bin", "/bin"].map(PathBuf::from))
    {
        if !path.contains(&dir) {
            path.push(dir);
        }
    }
    let path = std::env::join_paths(path)
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into());
    [
        ("HOME", home.clone()),
        ("XDG_CONFIG_HOME", format!("{home}/.config")),
        ("XDG_CACHE_HOME", format!("{home}/.cache")),
        ("XDG_DATA_HOME", format!("{home}/.local/share")),
        ("XDG_STATE_HOME", format!("{home}/.local/state")),
        ("PATH", path),
        ("SHELL", "/bin/bash".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// Runs a fake's (or a mock's) servers on a thread of its own with a single-threaded tokio
/// runtime, until the future `serve` makes ends; dropping the runtime then ends the
/// connections still open (keep-alive, long polls).
pub fn fake_thread<F, Fut>(name: &str, serve: F) -> std::thread::JoinHandle<()>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    let what = name.to_string();
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap_or_else(|e| panic!("tokio runtime for {what}: {e}"));
            runtime.block_on(serve());
        })
        .unwrap_or_else(|e| panic!("spawn the {name} thread: {e}"))
}

/// Serves one HTTP/1 connection of a fake or mock with `service`, on a task of its own; `who`
/// names it in the log. A client dropping a keep-alive connection is not a failure.
pub fn spawn_http<S, B>(stream: tokio::net::TcpStream, service: S, who: &'static str)
where
    S: hyper::service::HttpService<hyper::body::Incoming, ResBody = B> + Send + 'static,
    S::Future: Send + 'static,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    tokio::spawn(async move {
        if let Err(e) = hyper::server::conn::http1::Builder::new()
            .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
            .await
            && !e.is_incomplete_message()
        {
            eprintln!("{who}: connection error: {e}");
        }
    });
}

/// Polls `pred` every 20 ms until it holds (true) or `timeout` passes (false): how the fakes
/// wait for what a gateway does to them.
pub fn poll_until(timeout: Duration, mut pred: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if pred() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What `records` returns once `pred` holds for it; panics after 20 s naming `what` and
/// showing the records so far.
pub fn wait_records<T: std::fmt::Debug>(
    what: &str,
    records: impl Fn() -> Vec<T>,
    pred: impl Fn(&[T]) -> bool,
) -> Vec<T> {
    let mut last = Vec::new();
    let held = poll_until(Duration::from_secs(20), || {
        last = records();
        pred(&last)
    });
    if !held {
        panic!("timed out waiting for {what}; sent so far: {last:#?}");
    }
    last
}

/// Lines of a screen, trimmed.
pub fn lines(screen: &str) -> Vec<&str> {
    screen.lines().map(str::trim_end).collect()
}

/// When the binaries' sources last changed (the daemon, ctl, gateway and proto crates, and the
/// lock file).
fn newest_source() -> Option<std::time::SystemTime> {
    fn walk(dir: &Path, newest: &mut Option<std::time::SystemTime>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let path = e.path();
            if path.is_dir() {
                walk(&path, newest);
            } else if let Ok(t) = e.metadata().and_then(|m| m.modified()) {
                *newest = (*newest).max(Some(t));
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent()?;
    let mut newest = std::fs::metadata(root.join("Cargo.lock"))
        .and_then(|m| m.modified())
        .ok();
    for krate in ["daemon", "ctl", "gateway", "proto"] {
        walk(&root.join(krate).join("src"), &mut newest);
        walk(&root.join(krate).join("proto"), &mut newest);
        if let Ok(t) =
            std::fs::metadata(root.join(krate).join("Cargo.toml")).and_then(|m| m.modified())
        {
            newest = newest.max(Some(t));
        }
    }
    newest
}

/// The version clibot's tests run `cli` at, from `tests/cli-versions.toml` (which `.ci/run`
/// installs from); empty for a CLI it does not name.
pub fn tested_version(cli: &str) -> String {
    tested_entry(cli, "version")
}

/// A field of `cli`'s entry in `tests/cli-versions.toml` (empty when absent).
pub fn tested_entry(cli: &str, key: &str) -> String {
    static VERSIONS: std::sync::OnceLock<toml::Table> = std::sync::OnceLock::new();
    VERSIONS
        .get_or_init(|| toml::from_str(include_str!("../cli-versions.toml")).unwrap_or_default())
        .get(cli)
        .and_then(|e| e.get(key)?.as_str())
        .unwrap_or_default()
        .to_string()
}

/// Fails the calling test unless `bin --version` (run with `env`) prints `version` as its first
/// word that starts with a digit: the on-screen texts and payloads the tests rely on were
/// observed with that version.
pub fn require_pinned(bin: &Path, version: &str, env: &[(&str, &str)]) {
    // Checked once per binary and test process: a CLI can take a second to print its version.
    static CHECKED: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
    let mut checked = CHECKED.lock().unwrap_or_else(|p| p.into_inner());
    if checked.iter().any(|b| b == bin) {
        return;
    }
    let out = Command::new(bin)
        .arg("--version")
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .output();
    let found = match out {
        // The first word that is a version: `2.1.328 (Claude Code)`, `0.61.0`,
        // `codex-cli 0.169.0`.
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout)
            .split_whitespace()
            .find(|w| w.starts_with(|c: char| c.is_ascii_digit()))
            .unwrap_or_default()
            .trim_end_matches('.')
            .to_string(),
        Ok(o) => panic!(
            "{} --version failed ({}): run `npm install --prefix tests/node` in the workspace root",
            bin.display(),
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => panic!(
            "{} is missing ({e}): run `npm install --prefix tests/node` in the workspace root",
            bin.display()
        ),
    };
    assert_eq!(
        found,
        version,
        "{} is not the pinned version: run `npm install --prefix tests/node`",
        bin.display()
    );
    checked.push(bin.to_path_buf());
}

/// Runs git in `dir` as the tests' user would, with no system or global config (so the
/// machine's settings change nothing), and insists that it succeeds; its standard output.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}
