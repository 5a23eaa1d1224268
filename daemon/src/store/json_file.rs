//! A small state file kept as one JSON document (the jobs, the goals, the automatic answers'
//! outcomes): read once at start, replaced atomically at each change.
//!
//! Why one place: each such file must treat a damaged copy the same way — set it aside, start
//! empty, and say so — and must never overwrite a file it could not read (a permission
//! mistake would otherwise erase the user's data). Getting that right once is the point.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::store::{set_aside, write_atomic};

/// One JSON state file: where it is, and whether it may be written.
#[derive(Debug)]
pub struct JsonFile {
    path: PathBuf,
    /// False when the file exists but cannot be read: it is then never saved over.
    writable: bool,
    /// What it holds, for messages ("the jobs").
    what: &'static str,
}

impl JsonFile {
    /// Reads `name` in `state_dir` as a `T`: the value (default when there is none), the file,
    /// and a warning when it could not be read. One that does not parse is set aside
    /// (`NAME.corrupt-<ms>`) and the value starts empty; `lost` says what is lost then.
    pub fn open<T: DeserializeOwned + Default>(
        state_dir: &Path,
        name: &str,
        what: &'static str,
        lost: &str,
    ) -> (T, JsonFile, Option<String>) {
        let path = state_dir.join(name);
        let (value, writable, warning) = match std::fs::read(&path) {
            Ok(bytes) => match serde_json::from_slice::<T>(&bytes) {
                Ok(v) => (v, true, None),
                Err(e) => {
                    let kept = match set_aside(&path) {
                        Ok(p) => format!("it is kept at {}", p.display()),
                        Err(e) => format!("it could not be set aside ({e})"),
                    };
                    (
                        T::default(),
                        true,
                        Some(format!(
                            "{what} {} cannot be read ({e}): {lost}; {kept}",
                            path.display()
                        )),
                    )
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (T::default(), true, None),
            Err(e) => (
                T::default(),
                false,
                Some(format!(
                    "cannot read {what} {} ({e}): nothing is kept until it can be read (chmod 600 it and restart)",
                    path.display()
                )),
            ),
        };
        (
            value,
            JsonFile {
                path,
                writable,
                what,
            },
            warning,
        )
    }

    /// Replaces the file with `value` (logged when it cannot be written; never over a file
    /// that could not be read).
    pub fn save<T: Serialize>(&self, value: &T) {
        if !self.writable {
            return;
        }
        let result = serde_json::to_vec_pretty(value)
            .map_err(std::io::Error::other)
            .and_then(|data| write_atomic(&self.path, &data));
        if let Err(e) = result {
            tracing::error!(path = %self.path.display(), "cannot save {}: {e}", self.what);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_damaged_file_is_set_aside_and_an_unreadable_one_never_overwritten() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("x.json"), "{ nope").expect("write");
        let (v, f, w): (Vec<u32>, _, _) =
            JsonFile::open(dir.path(), "x.json", "the xs", "they start again");
        assert!(v.is_empty());
        assert!(w.is_some_and(|w| w.contains("the xs") && w.contains("they start again")));
        f.save(&vec![1u32, 2]);
        let (v, _, w): (Vec<u32>, _, _) = JsonFile::open(dir.path(), "x.json", "the xs", "");
        assert_eq!((v, w), (vec![1, 2], None));
        let sub = dir.path().join("dir.json");
        std::fs::create_dir(&sub).expect("mkdir");
        let (_, f, w): (Vec<u32>, _, _) = JsonFile::open(dir.path(), "dir.json", "the ys", "");
        assert!(w.is_some_and(|w| w.contains("cannot read the ys")));
        f.save(&vec![3u32]);
        assert!(sub.is_dir(), "not saved over");
    }
}
