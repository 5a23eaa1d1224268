//! Paths and files that must stay private: `~` expanded, directories and files created for
//! this user only (0700 / 0600).

use std::path::{Path, PathBuf};

/// Creates `dir` (and parents) with mode 0700 for the parts it creates.
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    // An existing directory (made by an older version, or by hand) is tightened too.
    let mode = std::fs::metadata(dir)?.permissions().mode();
    if mode & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode & 0o700))?;
    }
    Ok(())
}

/// Writes a file only this user can read (settings that name the hook command).
pub(crate) fn write_private(path: &Path, content: impl AsRef<[u8]>) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(content.as_ref())
}

/// Expands a leading `~` to the home directory.
pub fn expand_home(p: &Path) -> PathBuf {
    let home = || directories::BaseDirs::new().map(|b| b.home_dir().to_path_buf());
    if p == Path::new("~") {
        return home().unwrap_or_else(|| p.to_path_buf());
    }
    match p.strip_prefix("~") {
        Ok(rest) => home()
            .map(|h| h.join(rest))
            .unwrap_or_else(|| p.to_path_buf()),
        Err(_) => p.to_path_buf(),
    }
}
