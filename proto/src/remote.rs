//! Reaching a daemon through a program whose standard input and output carry the connection:
//! `ssh HOST clibotctl dial-stdio`, the way `docker -H ssh://…` reaches a remote engine. SSH
//! authenticates the user; on the far side `dial-stdio` hands the bytes to that user's daemon
//! socket, whose same-uid check then holds as it does locally. No port is opened anywhere.

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, ReadBuf};
use tokio::process::{Child, ChildStdin, ChildStdout};
use tonic::transport::{Endpoint, Uri};

use crate::{Client, ConnectError};

/// Where a daemon is: its socket on this machine, or a program that carries a connection to
/// one (an ssh command).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Socket(PathBuf),
    Command {
        /// The program and its arguments.
        argv: Vec<String>,
        /// What to call it in messages (`ssh://dev@box`).
        label: String,
    },
}

impl Target {
    /// What to call it in messages.
    pub fn describe(&self) -> String {
        match self {
            Target::Socket(p) => p.display().to_string(),
            Target::Command { label, .. } => label.clone(),
        }
    }

    /// `ssh -o BatchMode=yes [options…] [-p PORT] -- HOST REMOTE_CLIBOTCTL dial-stdio` for
    /// `spec`, which is `ssh://[user@]host[:port]` or `[user@]host`: no password prompt (a
    /// key or an agent, as the user's ssh configuration says), a dead link noticed within 30 s.
    /// `program` is the ssh command (empty: `ssh`). With `control_dir`, the connections to
    /// one host share one SSH connection (`ControlMaster`), so a new gRPC connection costs no
    /// new handshake.
    pub fn ssh(
        spec: &str,
        program: &[String],
        options: &[String],
        remote_clibotctl: &str,
        control_dir: Option<&Path>,
    ) -> Result<Target, String> {
        let (host, port) = parse_ssh(spec)?;
        let mut argv: Vec<String> = if program.is_empty() {
            vec!["ssh".into()]
        } else {
            program.to_vec()
        };
        argv.extend(
            [
                "-o",
                "BatchMode=yes",
                "-o",
                "ConnectTimeout=10",
                "-o",
                "ServerAliveInterval=15",
                "-o",
                "ServerAliveCountMax=2",
            ]
            .map(String::from),
        );
        if let Some(dir) = control_dir {
            argv.extend([
                "-o".into(),
                "ControlMaster=auto".into(),
                "-o".into(),
                format!("ControlPath={}/ssh-%C", dir.display()),
                "-o".into(),
                "ControlPersist=60".into(),
            ]);
        }
        argv.extend(options.iter().cloned());
        if let Some(p) = port {
            argv.extend(["-p".into(), p.to_string()]);
        }
        let remote = if remote_clibotctl.trim().is_empty() {
            "clibotctl"
        } else {
            remote_clibotctl.trim()
        };
        argv.extend([
            "--".into(),
            host.clone(),
            remote.into(),
            "dial-stdio".into(),
        ]);
        let label = match port {
            Some(p) => format!("ssh://{host}:{p}"),
            None => format!("ssh://{host}"),
        };
        Ok(Target::Command { argv, label })
    }
}

/// `[[gateway.machines]]`: a daemon reached by exactly one way. Read by the gateway (which
/// serves them all) and by `clibotctl usage --by machine` (which asks each).
#[derive(Debug, Clone, Default, serde::Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MachineConfig {
    /// What sessions are addressed by there (`NAME/SESSION`) and replies are labelled with.
    pub name: String,
    /// Its socket on this machine.
    pub socket: Option<String>,
    /// `user@host` or `ssh://user@host:port`: `ssh -o BatchMode=yes … HOST clibotctl dial-stdio`.
    pub ssh: Option<String>,
    /// More ssh arguments (`["-i", "~/.ssh/clibot"]`).
    #[serde(default)]
    pub ssh_options: Vec<String>,
    /// The clibotctl run there (default `clibotctl`; a non-interactive ssh often lacks
    /// `~/.cargo/bin` on PATH).
    pub remote_clibotctl: Option<String>,
    /// A program whose standard input and output reach the daemon.
    pub command: Option<Vec<String>>,
    /// Pairing codes are issued here and unbound chats talk here (default: the first).
    #[serde(default)]
    pub home: bool,
}

impl MachineConfig {
    /// Its name, checked: 1 to 32 letters, digits, `-` or `_` (it leads session names).
    pub fn checked_name(&self) -> Result<&str, String> {
        let name = self.name.trim();
        let valid = !name.is_empty()
            && name.len() <= 32
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if valid {
            Ok(name)
        } else {
            Err(format!(
                "[[gateway.machines]] name {name:?}: use 1 to 32 letters, digits, '-' or '_' (it leads session names: NAME/SESSION)"
            ))
        }
    }

    /// How its daemon is reached; with `control_dir`, ssh connections to one host are shared.
    pub fn target(&self, control_dir: Option<&Path>) -> Result<Target, String> {
        let name = self.name.trim();
        match (&self.socket, &self.ssh, &self.command) {
            (Some(s), None, None) => Ok(Target::Socket(s.into())),
            (None, Some(ssh), None) => Target::ssh(
                ssh,
                &[],
                &self.ssh_options,
                self.remote_clibotctl.as_deref().unwrap_or("clibotctl"),
                control_dir,
            )
            .map_err(|e| format!("[[gateway.machines]] {name}: {e}")),
            (None, None, Some(argv)) if !argv.is_empty() => Ok(Target::Command {
                argv: argv.clone(),
                label: argv.join(" "),
            }),
            _ => Err(format!(
                "[[gateway.machines]] {name}: give exactly one of socket = PATH, ssh = \"user@host\" or command = [...]"
            )),
        }
    }
}

/// `ssh://[user@]host[:port]` or `[user@]host` as (`[user@]host`, port). A host that could be
/// read as an option (`-oProxyCommand=…`) or holds spaces or control characters is refused.
fn parse_ssh(spec: &str) -> Result<(String, Option<u16>), String> {
    let spec = spec.trim();
    let (rest, url) = match spec.strip_prefix("ssh://") {
        Some(r) => (r.trim_end_matches('/'), true),
        None => (spec, false),
    };
    let (host, port) = match (url, rest.rsplit_once(':')) {
        (true, Some((h, p))) if !h.ends_with(']') || h.starts_with('[') => {
            let port: u16 = p
                .parse()
                .map_err(|_| format!("{spec:?}: the port {p:?} is not a number"))?;
            (h.to_string(), Some(port))
        }
        _ => (rest.to_string(), None),
    };
    let bare = host.rsplit('@').next().unwrap_or_default();
    if host.is_empty()
        || bare.is_empty()
        || host.starts_with('-')
        || host
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '/')
    {
        return Err(format!(
            "{spec:?} is not an ssh address: use ssh://user@host[:port] or user@host"
        ));
    }
    Ok((host, port))
}

/// Connects to the daemon at `target`, eagerly (an unreachable one is reported here, with
/// what ssh said).
pub async fn connect_to(target: &Target) -> Result<Client, ConnectError> {
    let (argv, label) = match target {
        Target::Socket(p) => return crate::connect(p).await,
        Target::Command { argv, label } => (argv.clone(), label.clone()),
    };
    if argv.is_empty() {
        return Err(ConnectError::Remote {
            target: label,
            detail: "the command is empty".into(),
        });
    }
    // What the program said on its standard error, for the error when the connection fails.
    let said: Arc<Mutex<Said>> = Arc::default();
    let (a, s) = (argv.clone(), said.clone());
    let channel = Endpoint::from_static("http://clibotd.remote")
        .connect_timeout(Duration::from_secs(20))
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let (argv, said) = (a.clone(), s.clone());
            async move { spawn(&argv, said).map(TokioIo::new) }
        }))
        .await;
    match channel {
        Ok(ch) => Ok(Client::new(ch)
            .max_decoding_message_size(crate::MAX_MESSAGE)
            .max_encoding_message_size(crate::MAX_MESSAGE)),
        Err(e) => {
            // The program's last words arrive as it exits: give them a moment.
            for _ in 0..20 {
                if lock(&said).closed {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let words = lock(&said).text.trim().to_string();
            Err(ConnectError::Remote {
                target: label,
                detail: if words.is_empty() {
                    crate::describe(&e)
                } else {
                    words
                },
            })
        }
    }
}

#[derive(Default)]
struct Said {
    text: String,
    closed: bool,
}

fn lock(m: &Mutex<Said>) -> std::sync::MutexGuard<'_, Said> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Starts the program with its standard input and output as the connection; its standard
/// error is kept (the last 2 KiB) for messages.
fn spawn(argv: &[String], said: Arc<Mutex<Said>>) -> std::io::Result<Piped> {
    let mut cmd = tokio::process::Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn()?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(std::io::Error::other("the program's pipes were not made"));
    };
    if let Some(err) = child.stderr.take() {
        lock(&said).closed = false;
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(err).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let mut s = lock(&said);
                s.text.push_str(&line);
                s.text.push('\n');
                if s.text.len() > 2048 {
                    let mut at = s.text.len() - 2048;
                    while !s.text.is_char_boundary(at) {
                        at += 1;
                    }
                    s.text.drain(..at);
                }
            }
            lock(&said).closed = true;
        });
    }
    Ok(Piped {
        _child: child,
        stdin,
        stdout,
    })
}

/// A program's standard output and input as one stream; the program ends with it.
struct Piped {
    _child: Child,
    stdin: ChildStdin,
    stdout: ChildStdout,
}

impl AsyncRead for Piped {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stdout).poll_read(cx, buf)
    }
}

impl AsyncWrite for Piped {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stdin).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stdin).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stdin).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ssh_addresses_become_a_batch_mode_ssh_command() {
        let t = Target::ssh(
            "ssh://dev@box:2222",
            &[],
            &["-i".into(), "/k".into()],
            "",
            None,
        )
        .expect("an address");
        let Target::Command { argv, label } = t else {
            panic!("a command")
        };
        assert_eq!(label, "ssh://dev@box:2222");
        assert_eq!(
            argv,
            [
                "ssh",
                "-o",
                "BatchMode=yes",
                "-o",
                "ConnectTimeout=10",
                "-o",
                "ServerAliveInterval=15",
                "-o",
                "ServerAliveCountMax=2",
                "-i",
                "/k",
                "-p",
                "2222",
                "--",
                "dev@box",
                "clibotctl",
                "dial-stdio"
            ]
        );
        let Ok(Target::Command { argv, .. }) = Target::ssh(
            "dev@box",
            &["ssh".into(), "-F".into(), "/c".into()],
            &[],
            "~/.cargo/bin/clibotctl",
            Some(Path::new("/run/x")),
        ) else {
            panic!("a command")
        };
        assert!(argv.contains(&"ControlPath=/run/x/ssh-%C".to_string()));
        assert_eq!(argv[..3], ["ssh", "-F", "/c"]);
        assert_eq!(
            argv[argv.len() - 3..],
            ["dev@box", "~/.cargo/bin/clibotctl", "dial-stdio"]
        );
        for bad in [
            "-oProxyCommand=sh",
            "ssh://-oProxyCommand=x",
            "a b",
            "",
            "ssh://box:port",
            "ssh://",
        ] {
            assert!(Target::ssh(bad, &[], &[], "", None).is_err(), "{bad}");
        }
    }
}
