//! A real OpenSSH server for the tests, on a loopback port of its own: its own host key, one
//! authorized key (made here), its own config; nothing of the machine's SSH setup is read or
//! changed. It stands in for a second machine reached as `ssh://USER@127.0.0.1:PORT`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running sshd; dropping it stops it (and the connections it serves).
pub struct Sshd {
    pub port: u16,
    /// The user it lets in (the one running the tests).
    pub user: String,
    /// The private key it accepts.
    pub key: PathBuf,
    dir: PathBuf,
    child: Child,
}

/// Where the distribution's OpenSSH server is, if installed.
pub fn sshd_path() -> Option<PathBuf> {
    ["/usr/sbin/sshd", "/usr/bin/sshd", "/sbin/sshd"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
}

fn keygen(path: &Path) {
    let ok = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .stdin(Stdio::null())
        .status()
        .expect("run ssh-keygen")
        .success();
    assert!(ok, "ssh-keygen {}", path.display());
}

impl Sshd {
    /// Starts sshd in `dir` (a fresh directory of the test's). Panics with sshd's own words when
    /// it does not come up; the OpenSSH server must be installed (`.ci/run` installs it).
    pub fn start(dir: &Path) -> Sshd {
        let sshd = sshd_path().expect(
            "the OpenSSH server (sshd) is needed for the tests over ssh: install openssh-server (.ci/run does)",
        );
        std::fs::create_dir_all(dir).expect("sshd dir");
        let host = dir.join("host_key");
        let key = dir.join("id_ed25519");
        keygen(&host);
        keygen(&key);
        let public = std::fs::read_to_string(key.with_extension("pub")).expect("public key");
        let authorized = dir.join("authorized_keys");
        std::fs::write(&authorized, public).expect("authorized_keys");
        let user = std::env::var("USER")
            .ok()
            .filter(|u| !u.is_empty())
            .or_else(|| {
                let out = Command::new("id").arg("-un").output().ok()?;
                Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
            })
            .unwrap_or_else(|| "root".into());
        // As root, sshd wants its privilege-separation directory.
        let _ = std::fs::create_dir_all("/run/sshd");
        // Sessions get a home of their own: nothing of the user's shell setup (~/.bashrc, which
        // bash reads for ssh commands too) runs or can hang them.
        let home = dir.join("home");
        std::fs::create_dir_all(&home).expect("sshd home");
        let port = free_port();
        let config = dir.join("sshd_config");
        std::fs::write(
            &config,
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {host}\nAuthorizedKeysFile {auth}\n\
                 PidFile {pid}\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n\
                 PubkeyAuthentication yes\nPermitRootLogin prohibit-password\nStrictModes no\n\
                 UsePAM no\nAllowUsers {user}\nPermitUserEnvironment no\nX11Forwarding no\n\
                 AllowTcpForwarding no\nLogLevel ERROR\nMaxStartups 100\nMaxSessions 100\n\
                 SetEnv HOME={home}\n",
                host = host.display(),
                auth = authorized.display(),
                pid = dir.join("sshd.pid").display(),
                home = home.display(),
            ),
        )
        .expect("sshd_config");
        let log = std::fs::File::create(dir.join("sshd.log")).expect("sshd.log");
        let child = Command::new(sshd)
            .args(["-D", "-e", "-f"])
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start sshd");
        let s = Sshd {
            port,
            user,
            key,
            dir: dir.to_path_buf(),
            child,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "sshd did not listen on {port}: {}",
                std::fs::read_to_string(dir.join("sshd.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        s
    }

    /// `ssh://USER@127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("ssh://{}@127.0.0.1:{}", self.user, self.port)
    }

    /// The ssh options a client needs for it: its key, and no host-key questions.
    pub fn client_options(&self) -> Vec<String> {
        [
            "-i",
            &self.key.display().to_string(),
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
            "-o",
            "LogLevel=ERROR",
        ]
        .map(String::from)
        .to_vec()
    }

    /// What sshd logged.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("sshd.log")).unwrap_or_default()
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}
