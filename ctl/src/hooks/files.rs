//! The settings files on disk: reading them as text, writing them atomically with their
//! permissions kept, and the directories an install had to create.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

/// Where a settings file's bytes really are: a symlinked file (dotfiles kept elsewhere) is
/// edited where it points, so the link stays.
pub fn target(path: &Path) -> PathBuf {
    if path
        .symlink_metadata()
        .is_ok_and(|m| m.file_type().is_symlink())
    {
        std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
    } else {
        path.to_path_buf()
    }
}

/// The file's text, None when there is no file.
pub fn read(path: &Path) -> anyhow::Result<Option<String>> {
    match std::fs::read(path) {
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(text) => Ok(Some(text)),
            Err(_) => bail!(
                "{} is not valid JSON (not UTF-8 text); nothing was changed: fix or move the file, \
                 then run this again",
                path.display()
            ),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// The directories above `path` that do not exist yet, deepest first.
pub fn missing_dirs(path: &Path) -> Vec<PathBuf> {
    path.ancestors()
        .skip(1)
        .take_while(|d| !d.as_os_str().is_empty() && !d.exists())
        .map(Path::to_path_buf)
        .collect()
}

/// Writes `text` to `path` through a temporary file in the same directory and a rename, so that
/// a reader sees the old file or the new one, never half of one. An existing file's permissions
/// are kept.
pub fn write_atomic(path: &Path, text: &str) -> anyhow::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mode = std::fs::metadata(path).ok().map(|m| m.permissions().mode());
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.clibot-{}.tmp", std::process::id()));
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        if let Some(mode) = mode {
            f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        }
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(e).with_context(|| {
            format!(
                "cannot write {} (is its directory writable?)",
                path.display()
            )
        });
    }
    Ok(())
}

/// Removes the file, then those of `dirs` (deepest first) that are empty.
pub fn remove(path: &Path, dirs: &[PathBuf]) -> anyhow::Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("cannot remove {}", path.display())),
    }
    for d in dirs {
        // Not empty (the user put something there since): it stays.
        let _ = std::fs::remove_dir(d);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rewrite_keeps_the_mode_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = dir.path().join("settings.json");
        std::fs::write(&f, "{}").expect("write");
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o640)).expect("chmod");
        write_atomic(&f, "{\"a\": 1}\n").expect("write_atomic");
        assert_eq!(std::fs::read_to_string(&f).expect("read"), "{\"a\": 1}\n");
        let mode = std::fs::metadata(&f).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o640);
        assert_eq!(std::fs::read_dir(dir.path()).expect("ls").count(), 1);
    }

    #[test]
    fn missing_dirs_are_listed_deepest_first() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = dir.path().join("a/b/settings.json");
        assert_eq!(
            missing_dirs(&f),
            vec![dir.path().join("a/b"), dir.path().join("a")]
        );
    }
}
