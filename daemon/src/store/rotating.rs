//! An append-only file rotated by size: `NAME` → `NAME.1` → … → `NAME.(files-1)`, the oldest
//! dropped. Shared by the audit log and the daemon's own log, so that a daemon left running for
//! weeks never fills the disk with either.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// How large a file may grow and how many are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The size at which the file is rotated, in bytes.
    pub max_bytes: u64,
    /// Files kept, the current one included (at least 1: then the full file is dropped).
    pub files: u32,
}

/// The file, opened for appending (mode 0600).
pub struct RotatingFile {
    path: PathBuf,
    limits: Limits,
    file: Option<File>,
    size: u64,
}

fn open_append(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
}

impl RotatingFile {
    /// Opens (or creates) `path`; an error says why nothing can be written there.
    pub fn open(path: PathBuf, limits: Limits) -> std::io::Result<RotatingFile> {
        let file = open_append(&path)?;
        let size = file.metadata().map_or(0, |m| m.len());
        Ok(RotatingFile {
            path,
            limits: Limits {
                max_bytes: limits.max_bytes.max(1),
                files: limits.files.max(1),
            },
            file: Some(file),
            size,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `data` in one write (lines never interleave), rotating first when it would make
    /// the file larger than allowed.
    pub fn write(&mut self, data: &[u8]) -> std::io::Result<()> {
        if self.size > 0 && self.size + data.len() as u64 > self.limits.max_bytes {
            self.rotate()?;
        }
        let f = self
            .file
            .as_mut()
            .ok_or_else(|| std::io::Error::other("the file could not be reopened"))?;
        f.write_all(data)?;
        self.size += data.len() as u64;
        Ok(())
    }

    fn rotate(&mut self) -> std::io::Result<()> {
        let name = |i: u32| {
            let mut n = self.path.as_os_str().to_owned();
            n.push(format!(".{i}"));
            PathBuf::from(n)
        };
        let result = if self.limits.files <= 1 {
            std::fs::remove_file(&self.path)
        } else {
            for i in (1..self.limits.files - 1).rev() {
                match std::fs::rename(name(i), name(i + 1)) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                    _ => {}
                }
            }
            std::fs::rename(&self.path, name(1))
        };
        match result.and_then(|()| open_append(&self.path)) {
            Ok(f) => {
                self.file = Some(f);
                self.size = 0;
                Ok(())
            }
            Err(e) => {
                // Keep appending where we are (nothing is lost) and try again after as much
                // again has been written.
                self.size = 0;
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotates_by_size_and_keeps_the_newest_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("x.log");
        let mut f = RotatingFile::open(
            path.clone(),
            Limits {
                max_bytes: 10,
                files: 3,
            },
        )
        .expect("open");
        for i in 0..5 {
            f.write(format!("line{i}..\n").as_bytes()).expect("write");
        }
        let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
        assert_eq!(read(&path), "line4..\n");
        assert_eq!(read(&dir.path().join("x.log.1")), "line3..\n");
        assert_eq!(read(&dir.path().join("x.log.2")), "line2..\n");
        assert!(!dir.path().join("x.log.3").exists(), "three files at most");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}
