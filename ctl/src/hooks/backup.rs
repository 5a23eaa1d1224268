//! What `hooks install` keeps so that `hooks uninstall` can put a settings file back byte for
//! byte: the file's bytes before (or that there was none), the bytes clibot wrote, and the
//! directories it created. One JSON file per settings file, in `STATE_DIR/hooks/`.

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::json;

use super::clis::Cli;

#[derive(Debug, Clone, PartialEq)]
pub struct Backup {
    /// The settings file.
    pub file: PathBuf,
    /// Its text before install; None when there was no file.
    pub original: Option<String>,
    /// The text clibot wrote.
    pub written: String,
    /// Directories install created for the file, deepest first.
    pub created_dirs: Vec<PathBuf>,
}

/// Where backups are kept (the "store"): `hooks/` in clibot's state directory: `CLIBOT_STATE_DIR`, the config's `[daemon]
/// state_dir`, else `$XDG_STATE_HOME/clibot` (`~/.local/state/clibot`), as for the daemon.
pub fn dir() -> anyhow::Result<PathBuf> {
    let base = std::env::var_os("CLIBOT_STATE_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| crate::connect::configured_daemon_path("state_dir"))
        .or_else(|| {
            directories::ProjectDirs::from("", "", "clibot").map(|d| {
                d.state_dir()
                    .unwrap_or_else(|| d.data_local_dir())
                    .to_path_buf()
            })
        })
        .context("cannot find clibot's state directory: set HOME or CLIBOT_STATE_DIR")?;
    Ok(base.join("hooks"))
}

/// The backup's file for `settings` (named by the CLI and a hash of the path, so that two
/// settings files of one CLI — another CLAUDE_CONFIG_DIR — keep two backups).
fn path_for(store: &Path, cli: Cli, settings: &Path) -> PathBuf {
    // FNV-1a: stable across builds and Rust versions.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in settings.as_os_str().as_encoded_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    store.join(format!("{}-{h:016x}.json", cli.name()))
}

/// The backup kept for `settings`, if any.
pub fn load(store: &Path, cli: Cli, settings: &Path) -> anyhow::Result<Option<Backup>> {
    let path = path_for(store, cli, settings);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let bad = || {
        format!(
            "the backup {} is damaged; remove it and run this again (then only clibot's entries \
             are taken out, the file is not restored byte for byte)",
            path.display()
        )
    };
    let v: serde_json::Value = serde_json::from_str(&text).with_context(bad)?;
    let (Some(file), Some(written)) = (v["file"].as_str(), v["written"].as_str()) else {
        anyhow::bail!(bad());
    };
    let original = match &v["original"] {
        serde_json::Value::Null => None,
        serde_json::Value::String(s) => Some(s.clone()),
        _ => anyhow::bail!(bad()),
    };
    let created_dirs = v["created_dirs"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|d| d.as_str())
                .map(PathBuf::from)
                .collect()
        })
        .unwrap_or_default();
    Ok(Some(Backup {
        file: PathBuf::from(file),
        original,
        written: written.to_string(),
        created_dirs,
    }))
}

/// Keeps `b` (readable by its owner only: it may hold settings with secrets).
pub fn save(store: &Path, cli: Cli, b: &Backup) -> anyhow::Result<()> {
    let path = path_for(store, cli, &b.file);
    if let Some(dir) = path.parent() {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let v = json!({
        "cli": cli.name(),
        "file": b.file.to_string_lossy(),
        "original": b.original,
        "written": b.written,
        "created_dirs": b.created_dirs.iter().map(|d| d.to_string_lossy()).collect::<Vec<_>>(),
    });
    let text = serde_json::to_string_pretty(&v)?;
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .with_context(|| format!("cannot write {}", tmp.display()))?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, &path).with_context(|| format!("cannot write {}", path.display()))
}

/// Whether a backup is kept for `settings`.
pub fn exists(store: &Path, cli: Cli, settings: &Path) -> bool {
    path_for(store, cli, settings).is_file()
}

/// Forgets the backup for `settings`.
pub fn discard(store: &Path, cli: Cli, settings: &Path) -> anyhow::Result<()> {
    let path = path_for(store, cli, settings);
    match std::fs::remove_file(&path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("cannot remove {}", path.display()))
        }
        _ => Ok(()),
    }
}
