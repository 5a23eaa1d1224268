//! Files out of a session's directory, for its chats: `!!get PATH`, and the outbox — files the
//! CLI writes into `.clibot/outbox/` (which the guard leaves alone) are moved to
//! `.clibot/sent/` and announced by a `file_sent` event, which the gateway delivers to the
//! session's chats like a reply.
//!
//! A file is sent unchanged, and only from the session's own directory: it is reached beneath
//! the directory with no link followed (`confine::beneath`), so neither `..` nor a symlink —
//! nor one swapped in between a check and the read — reaches outside it, and only a regular
//! file is opened (a FIFO or a device is refused at once, never waited on). Never sent: a file
//! in a secret path, and a file whose name says it holds keys or passwords (`.env`, `*.pem`,
//! `id_rsa`, …). Not sent without `force` (admins): a git-ignored file (generated, or kept out
//! of the repository on purpose; asked through the safe git). The gateway refuses, likewise, a
//! text file in which its redactor finds a secret.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tracing::{info, warn};

use crate::confine::beneath::{BeneathError, Dir, Kind};
use crate::core::Daemon;
use crate::error::CoreError;
use crate::store::events::EventKind;

/// The largest file sent (Telegram's bots upload at most 50 MB).
pub const MAX_FILE_BYTES: u64 = 50 << 20;
/// Where files from a chat are stored.
pub const INBOX: &str = ".clibot/inbox";
/// Where a CLI puts files for the chat, and where they go once announced.
pub const OUTBOX: &str = ".clibot/outbox";
pub const SENT: &str = ".clibot/sent";

/// File names that hold secrets wherever they are.
const SECRET_NAMES: &[&str] = &[
    ".env",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".pgpass",
    ".git-credentials",
    ".htpasswd",
    "id_rsa",
    "id_dsa",
    "id_ecdsa",
    "id_ed25519",
    "credentials",
    "credentials.json",
    "secrets.json",
    "secrets.yaml",
    "secrets.yml",
];
/// Extensions of key and password stores.
const SECRET_EXTENSIONS: &[&str] = &[
    "pem", "key", "p12", "pfx", "jks", "keystore", "kdbx", "ppk", "gpg", "age",
];

/// A file read for a chat.
#[derive(Debug)]
pub struct FileOut {
    /// Its name (no directory).
    pub name: String,
    pub data: Vec<u8>,
}

/// Why a file's name says it holds secrets, if it does (`rel`: its path in the directory).
pub fn secret_name(rel: &Path) -> Option<String> {
    for c in rel.components() {
        let c = c.as_os_str().to_string_lossy();
        if c == ".git" || c == ".ssh" || c == ".gnupg" {
            return Some(format!("it is inside {c}"));
        }
    }
    let name = rel.file_name()?.to_string_lossy().to_ascii_lowercase();
    if SECRET_NAMES.contains(&name.as_str()) || name.starts_with(".env.") {
        return Some(format!("{name} usually holds keys or passwords"));
    }
    let ext = rel.extension()?.to_string_lossy().to_ascii_lowercase();
    SECRET_EXTENSIONS
        .contains(&ext.as_str())
        .then(|| format!("*.{ext} files hold keys or certificates"))
}

impl Daemon {
    /// Reads `path` (relative to session `name`'s directory, or absolute inside it) for a
    /// chat. `force` (admins) sends a git-ignored file too.
    pub async fn read_session_file(
        &self,
        name: &str,
        path: &str,
        force: bool,
    ) -> Result<FileOut, CoreError> {
        let rec = self.get(name)?;
        self.refuse_unmanaged(&rec)?;
        if path.trim().is_empty() {
            return Err(CoreError::FileUnusable(
                "name a file: !!get PATH, relative to the session's directory".into(),
            ));
        }
        let dir = rec.dir.clone();
        let asked = Path::new(path);
        let rel = if asked.is_absolute() {
            asked
                .strip_prefix(&dir)
                .map(Path::to_path_buf)
                .map_err(|_| {
                    CoreError::FileRefused(format!(
                        "{path} is outside {name}'s directory ({}): only files in it are sent",
                        dir.display()
                    ))
                })?
        } else {
            asked.to_path_buf()
        };
        if let Some(secret) = crate::confine::secrets::secret_containing(
            &dir.join(&rel),
            self.secret_paths(),
            &self.live().lifted_secrets,
        ) {
            return Err(CoreError::FileRefused(format!(
                "{path} is in a secret path ({}): it is never sent",
                secret.display()
            )));
        }
        if let Some(why) = secret_name(&rel) {
            return Err(CoreError::FileRefused(format!(
                "{path} is never sent: {why}"
            )));
        }
        // Opened beneath the directory with no link followed, a regular file only: nothing the
        // session put there (a link to ~/.ssh, a FIFO, a device) is followed, opened or waited on.
        let (d, r) = (dir.clone(), rel.clone());
        let opened = crate::confine::beneath::blocking("reading the file", move || {
            Dir::open(&d)?.open_file(&r, MAX_FILE_BYTES)
        })
        .await;
        let (file, _len) = opened.map_err(|e| file_error(e, path, name, &dir))?;
        // git runs only where no jail can change the repository under it (its config names
        // programs git runs): a jailed session's files are sent without asking it.
        if !force
            && rec.jail_home.is_empty()
            && !rel.starts_with(SENT)
            && git_ignored(&dir, &rel).await
        {
            return Err(CoreError::FileUnreadable(format!(
                "{path} is ignored by git (generated, or kept out of the repository on purpose): !!get --force {path} sends it anyway (admins)"
            )));
        }
        let name = rel
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "file".into());
        let data = crate::confine::beneath::blocking("reading the file", move || {
            let mut data = Vec::new();
            (&file)
                .take(MAX_FILE_BYTES)
                .read_to_end(&mut data)
                .map(|_| data)
                .map_err(|source| crate::confine::beneath::BeneathError::Io {
                    path: PathBuf::from("the file"),
                    source,
                })
        })
        .await
        .map_err(|e| CoreError::FileUnreadable(format!("{path} cannot be read: {e}")))?;
        Ok(FileOut { name, data })
    }

    /// Stores a file from a chat in session `name`'s inbox (`.clibot/inbox/`), under a name
    /// that says when and cannot climb out; its path relative to the session's directory.
    /// The inbox is reached beneath the session's directory with no link followed, and the
    /// file is made new (`O_EXCL`): a link swapped in at any moment only makes it fail.
    pub async fn write_inbox(
        &self,
        name: &str,
        file_name: &str,
        data: Vec<u8>,
    ) -> Result<String, CoreError> {
        use std::io::Write;
        let rec = self.get(name)?;
        self.refuse_unmanaged(&rec)?;
        if data.len() as u64 > MAX_FILE_BYTES {
            return Err(CoreError::FileUnusable(format!(
                "the file has {} bytes; at most {} MiB are stored",
                data.len(),
                MAX_FILE_BYTES >> 20
            )));
        }
        let stamp = crate::duration::stamp(crate::store::now_ms());
        let safe = safe_name(file_name);
        let data_len = data.len();
        let dir = rec.dir.clone();
        let stored = crate::confine::beneath::blocking("storing the file", move || {
            let inbox = Dir::open(&dir)?.create_dir_all(Path::new(INBOX), 0o700)?;
            let mut last = None;
            for n in 1..100 {
                let f = if n == 1 {
                    format!("{stamp}-{safe}")
                } else {
                    format!("{stamp}-{n}-{safe}")
                };
                match inbox.create_new(Path::new(&f), 0o600) {
                    Ok(mut file) => {
                        file.write_all(&data)
                            .and_then(|()| file.sync_data())
                            .map_err(|source| crate::confine::beneath::BeneathError::Io {
                                path: inbox.path().join(&f),
                                source,
                            })?;
                        return Ok(f);
                    }
                    Err(e) => last = Some(e),
                }
            }
            Err(
                last.unwrap_or(crate::confine::beneath::BeneathError::BadPath(
                    PathBuf::from(INBOX),
                )),
            )
        })
        .await
        .map_err(|e| {
            CoreError::FileUnreadable(format!(
                "the file cannot be stored in {INBOX} of {name}'s directory: {e}"
            ))
        })?;
        info!(session = name, file = %stored, bytes = data_len, "a file from a chat");
        Ok(format!("{INBOX}/{stored}"))
    }

    /// Looks into every running session's outbox: each file that has stopped growing since
    /// the last look is moved to `.clibot/sent/` (under a name that says when) and announced.
    /// Both are reached beneath the session's directory with no link followed, so an outbox
    /// or a sent folder that is a link to elsewhere is refused, not used.
    pub(crate) async fn scan_outboxes(&self) {
        let dirs: Vec<(String, String, PathBuf)> = self.sessions().filter_map(|e| {
            (!e.rec.state.is_exited() && !e.rec.unmanaged)
                .then(|| (e.rec.name.clone(), e.rec.id.clone(), e.rec.dir.clone()))
        });
        for (name, id, dir) in dirs {
            let d = dir.clone();
            let listed = crate::confine::beneath::blocking("the outbox", move || {
                let entries = Dir::open(&d)?.entries(Path::new(OUTBOX))?;
                Ok(entries
                    .into_iter()
                    .filter(|e| e.kind == Kind::File)
                    .map(|e| (e.name.to_string_lossy().into_owned(), e.len))
                    // One being written (`.x.tmp`) waits.
                    .filter(|(f, _)| !f.starts_with('.'))
                    .collect::<Vec<_>>())
            })
            .await;
            let seen = match listed {
                Ok(seen) => seen,
                Err(e) if e.is_not_found() => continue,
                Err(e) => {
                    self.tell_outbox_once(&name, format!("files in {OUTBOX} are not sent: {e}"));
                    continue;
                }
            };
            let ready: Option<Vec<(String, u64)>> = self.sessions().update(&name, |e| {
                // Ready: the same size as at the last look.
                let ready = seen
                    .iter()
                    .filter(|f| e.rt.outbox.contains(f))
                    .cloned()
                    .collect();
                e.rt.outbox = seen;
                ready
            });
            let Some(ready) = ready else {
                continue;
            };
            for (file, bytes) in ready {
                self.send_outbox_file(&name, &id, &dir, &file, bytes).await;
            }
        }
    }

    async fn send_outbox_file(&self, name: &str, id: &str, dir: &Path, file: &str, bytes: u64) {
        let stamp = crate::duration::stamp(crate::store::now_ms());
        let (d, f) = (dir.to_path_buf(), file.to_string());
        let moved = crate::confine::beneath::blocking("the outbox", move || {
            let root = Dir::open(&d)?;
            let outbox = root.open_dir(Path::new(OUTBOX))?;
            let sent = root.create_dir_all(Path::new(SENT), 0o700)?;
            let mut target = format!("{stamp}-{f}");
            let mut n = 1;
            while sent.exists(Path::new(&target)) {
                n += 1;
                target = format!("{stamp}-{n}-{f}");
            }
            outbox.rename(Path::new(&f), &sent, Path::new(&target))?;
            Ok(target)
        })
        .await;
        let target = match moved {
            Ok(t) => t,
            Err(e) => {
                self.tell_outbox_once(name, format!("{file} in {OUTBOX} is not sent: {e}"));
                return;
            }
        };
        self.sessions().update(name, |e| {
            e.rt.outbox.retain(|(f, _)| f != file);
            e.rt.outbox_told = None;
        });
        let rel = format!("{SENT}/{target}");
        info!(
            session = name,
            file, bytes, "a file from the outbox goes to the chats"
        );
        self.event(
            name,
            id,
            EventKind::FileSent {
                name: file.to_string(),
                path: rel,
                bytes,
            },
        );
    }
}

impl Daemon {
    /// Tells session `name`'s chats why its outbox is not used, once for the same reason.
    fn tell_outbox_once(&self, name: &str, why: String) {
        let told = self
            .sessions()
            .update(name, |e| {
                e.rt.outbox_told.replace(why.clone()).as_ref() == Some(&why)
            })
            .unwrap_or(true);
        if !told {
            warn!(session = name, "{why}");
            self.notice(name, "outbox", &why);
        }
    }
}

/// A file that could not be opened for a chat, in words that say why and what to do.
fn file_error(e: BeneathError, path: &str, name: &str, dir: &Path) -> CoreError {
    match e {
        BeneathError::NotFound(_) => CoreError::FileMissing {
            path: path.to_string(),
            session: name.to_string(),
            dir: dir.to_path_buf(),
        },
        BeneathError::NotRegular(_, "a directory") => CoreError::FileUnusable(format!(
            "{path} is not a file (!!screen shows the screen; `ls` in the session lists a directory)"
        )),
        BeneathError::NotRegular(_, what) => CoreError::FileUnusable(format!(
            "{path} is {what}, not a regular file: only regular files are sent"
        )),
        BeneathError::TooBig { len, .. } => CoreError::FileUnusable(format!(
            "{path} has {len} bytes; at most {} MiB are sent",
            MAX_FILE_BYTES >> 20
        )),
        BeneathError::Link(_) => CoreError::FileRefused(format!(
            "{path} is, or passes through, a symbolic link: only files that really are in {name}'s directory are sent"
        )),
        BeneathError::BadPath(_) => CoreError::FileRefused(format!(
            "{path} is outside {name}'s directory ({}): only files in it are sent (no `..`)",
            dir.display()
        )),
        other => CoreError::FileUnreadable(format!("{path} cannot be read: {other}")),
    }
}

/// A file name from a chat, made safe: letters, digits, `.`, `-` and `_` kept, the rest `_`;
/// no leading dot; at most 80 characters.
pub fn safe_name(name: &str) -> String {
    let base = name.rsplit(['/', '\\']).next().unwrap_or("");
    let mut s: String = base
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect();
    while s.starts_with('.') {
        s.remove(0);
    }
    let s: String = s
        .chars()
        .rev()
        .take(80)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    if s.is_empty() { "file".into() } else { s }
}

/// Whether git ignores `rel` in `dir` (never where git cannot run safely: then it is not
/// known to be ignored).
async fn git_ignored(dir: &Path, rel: &Path) -> bool {
    let run = crate::safe_git::command(dir)
        .args(["check-ignore", "-q", "--"])
        .arg(rel)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
    matches!(
        tokio::time::timeout(Duration::from_secs(5), run).await,
        Ok(Ok(s)) if s.success()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_file_names_are_made_safe() {
        assert_eq!(safe_name("photo.jpg"), "photo.jpg");
        assert_eq!(safe_name("../../etc/passwd"), "passwd");
        assert_eq!(safe_name(".bashrc"), "bashrc");
        assert_eq!(safe_name("my report (1).pdf"), "my_report__1_.pdf");
        assert_eq!(safe_name(""), "file");
        assert_eq!(safe_name("..."), "file");
        assert_eq!(safe_name(&"x".repeat(300)).len(), 80);
    }

    #[test]
    fn names_that_hold_secrets_are_known() {
        for p in [
            ".env",
            "app/.env.production",
            "certs/server.pem",
            "keys/deploy.KEY",
            "home/id_ed25519",
            ".git/config",
            "x/.ssh/known_hosts",
            "db.kdbx",
        ] {
            assert!(secret_name(Path::new(p)).is_some(), "{p}");
        }
        for p in [
            "README.md",
            "src/main.rs",
            "env.md",
            "keyboard.rs",
            "out/report.pdf",
        ] {
            assert!(secret_name(Path::new(p)).is_none(), "{p}");
        }
    }
}
