//! Chat messages are typed once. A gateway hands a message over again when it restarted before
//! confirming it to its platform (a Telegram update redelivered after a kill -9). The key (the
//! platform's message id) is reserved *before* the text is typed, so a second delivery that
//! arrives while the first is still being typed waits for it instead of typing the text again,
//! and the keys of recent messages are kept on disk, so a restarted daemon still knows them.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tracing::warn;

use crate::locking::lock;
use crate::store::{dropped_entries, sane_seq, set_aside, write_atomic};

/// How many recent keys are remembered.
const KEEP: usize = 2048;

#[derive(Default, Serialize, Deserialize)]
struct File {
    version: u32,
    /// (key, the sequence number of the event that took the message), oldest first.
    keys: Vec<(String, u64)>,
}

#[derive(Default)]
struct Inner {
    done: VecDeque<(String, u64)>,
    /// Keys whose message is being typed now; the sender is dropped when that ends.
    pending: HashMap<String, watch::Sender<()>>,
}

/// The recent keys, shared by all sessions.
pub struct Dedupe {
    path: PathBuf,
    inner: Mutex<Inner>,
    /// False when `inputs.json` exists but could not be read: it is not saved over.
    writable: bool,
}

/// What [`Dedupe::claim`] found.
pub enum Claim {
    /// The message was taken before, as the event with this sequence number.
    Seen(u64),
    /// This call takes the message; it must [`Reservation::done`] it, or drop the reservation
    /// (the message was not taken, and a redelivery may try again).
    Mine(Reservation),
}

/// A key being typed now.
pub struct Reservation {
    owner: Arc<Dedupe>,
    key: String,
    finished: bool,
}

impl Dedupe {
    /// Loads the keys kept in `dir`, never fatally: a file that is not JSON is set aside, a key
    /// that cannot be used is dropped (the file as it was kept as `inputs.json.bad-<ms>`), with a
    /// warning; a file that cannot be read is left alone and not saved over.
    pub fn open(dir: &Path) -> (Arc<Dedupe>, Vec<String>) {
        let path = dir.join("inputs.json");
        let mut warnings = Vec::new();
        let mut inner = Inner::default();
        let mut writable = true;
        match std::fs::read(&path) {
            Ok(bytes) => match parse(&bytes) {
                Ok((keys, dropped)) => {
                    if !dropped.is_empty() {
                        warnings.push(dropped_entries(&path, "recent chat message ids", &dropped));
                    }
                    inner.done = keys;
                }
                Err(e) => {
                    let kept = set_aside(&path)
                        .map(|p| format!("kept as {}", p.display()))
                        .unwrap_or_else(|e| format!("could not be set aside: {e}"));
                    warnings.push(format!(
                        "{} is damaged ({e}; {kept}): messages redelivered from before may be typed again",
                        path.display()
                    ));
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                writable = false;
                warnings.push(format!(
                    "cannot read {} ({e}): messages redelivered from before may be typed again, and the ids of new ones are not saved until it can be read; make it readable by clibotd's user (chmod 600) and restart clibotd",
                    path.display()
                ));
            }
        }
        let repaired = !warnings.is_empty() && writable && path.exists();
        let keys: Vec<(String, u64)> = inner.done.iter().cloned().collect();
        let d = Arc::new(Dedupe {
            path,
            inner: Mutex::new(inner),
            writable,
        });
        if repaired {
            // Saved cleaned at once (the original is kept aside): the same damage is not
            // reported again at every start until a new message arrives.
            d.save(File { version: 1, keys });
        }
        (d, warnings)
    }

    fn save(&self, file: File) {
        if !self.writable {
            return;
        }
        let bytes = serde_json::to_vec(&file).unwrap_or_default();
        if let Err(e) = write_atomic(&self.path, &bytes) {
            warn!(path = %self.path.display(), "cannot save the keys of recent chat messages: {e}");
        }
    }

    /// Takes `key`, or tells that it was taken, waiting while another call is typing it.
    pub async fn claim(self: &Arc<Self>, key: &str) -> Claim {
        loop {
            let mut wait = {
                let mut inner = lock(&self.inner);
                if let Some((_, seq)) = inner.done.iter().rev().find(|(k, _)| k == key) {
                    return Claim::Seen(*seq);
                }
                match inner.pending.get(key) {
                    Some(tx) => tx.subscribe(),
                    None => {
                        inner.pending.insert(key.to_string(), watch::channel(()).0);
                        return Claim::Mine(Reservation {
                            owner: self.clone(),
                            key: key.to_string(),
                            finished: false,
                        });
                    }
                }
            };
            // Ends when the other call finishes (its sender is dropped); then look again.
            let _ = wait.changed().await;
        }
    }

    fn finish(&self, key: &str, seq: Option<u64>) {
        let file = {
            let mut inner = lock(&self.inner);
            inner.pending.remove(key);
            let Some(seq) = seq else {
                return;
            };
            inner.done.push_back((key.to_string(), seq));
            while inner.done.len() > KEEP {
                inner.done.pop_front();
            }
            File {
                version: 1,
                keys: inner.done.iter().cloned().collect(),
            }
        };
        self.save(file);
    }
}

/// Keys with the sequence number of the event that took their message, oldest first.
type Keys = VecDeque<(String, u64)>;

/// Parses `inputs.json` key by key: what cannot be used is dropped and described; of more than
/// [`KEEP`] keys the newest are kept.
fn parse(bytes: &[u8]) -> Result<(Keys, Vec<String>), serde_json::Error> {
    use serde_json::Value;
    let raw: Value = serde_json::from_slice(bytes)?;
    let mut dropped = Vec::new();
    let mut keys = VecDeque::new();
    match raw.get("keys") {
        _ if !raw.is_object() => dropped.push(format!("the file holds {raw} instead of an object")),
        None => {}
        Some(Value::Array(list)) => {
            for v in list {
                match serde_json::from_value::<(String, u64)>(v.clone()) {
                    // Any id a gateway gave is kept (it is only compared); never an empty one.
                    Ok((k, _)) if k.is_empty() => dropped.push(format!("key {v} (empty)")),
                    // A sequence number above the bound is damage: a redelivery of that message
                    // would be answered with an event that never exists.
                    Ok((_, seq)) if !sane_seq(seq) => dropped.push(format!(
                        "key {v} (sequence number above 2^53: damaged or edited)"
                    )),
                    Ok((k, seq)) => keys.push_back((k, seq)),
                    Err(e) => dropped.push(format!("key {v} ({e})")),
                }
            }
        }
        Some(_) => dropped.push("keys (not a list)".into()),
    }
    while keys.len() > KEEP {
        keys.pop_front();
    }
    Ok((keys, dropped))
}

impl Reservation {
    /// The message was taken, as the event with sequence number `seq`.
    pub fn done(mut self, seq: u64) {
        self.finished = true;
        self.owner.finish(&self.key, Some(seq));
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if !self.finished {
            self.owner.finish(&self.key, None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_second_claim_waits_for_the_first_and_keys_survive_a_reopen() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (d, w) = Dedupe::open(dir.path());
        assert!(w.is_empty());
        let Claim::Mine(r) = d.claim("m1").await else {
            panic!("the first claim takes the key");
        };
        let d2 = d.clone();
        let second = tokio::spawn(async move {
            match d2.claim("m1").await {
                Claim::Seen(seq) => seq,
                Claim::Mine(_) => 0,
            }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!second.is_finished(), "the second claim waits");
        r.done(7);
        assert_eq!(second.await.expect("join"), 7);
        // A dropped reservation lets the next claim take the key.
        match d.claim("m2").await {
            Claim::Mine(r) => drop(r),
            Claim::Seen(_) => panic!("m2 is new"),
        }
        assert!(matches!(d.claim("m2").await, Claim::Mine(_)));
        let (again, w) = Dedupe::open(dir.path());
        assert!(w.is_empty());
        assert!(matches!(again.claim("m1").await, Claim::Seen(7)));
    }

    #[tokio::test]
    async fn bad_keys_are_dropped_and_an_unreadable_file_is_left_alone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("inputs.json");
        std::fs::write(
            &path,
            r#"{"version":1,"keys":[["t:1",4],["",5],["t:2",-1],"junk",["t:3",6],["t:4",18446744073709551615]]}"#,
        )
        .expect("write");
        let (d, w) = Dedupe::open(dir.path());
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("4 entries"), "{w:?}");
        assert!(w[0].contains("above 2^53"), "{w:?}");
        assert!(matches!(d.claim("t:4").await, Claim::Mine(_)));
        assert_eq!(
            crate::store::copies(dir.path(), "inputs.json.bad-").len(),
            1
        );
        assert!(matches!(d.claim("t:1").await, Claim::Seen(4)));
        assert!(matches!(d.claim("t:3").await, Claim::Seen(6)));

        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("inputs.json");
        std::fs::create_dir(&path).expect("mkdir");
        let (d, w) = Dedupe::open(dir.path());
        assert!(w[0].contains("chmod 600"), "{w:?}");
        let Claim::Mine(r) = d.claim("k").await else {
            panic!("a new key");
        };
        r.done(1);
        assert!(path.is_dir(), "left alone");
    }

    #[tokio::test]
    async fn a_damaged_file_is_set_aside() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("inputs.json"), "{not json").expect("write");
        let (d, w) = Dedupe::open(dir.path());
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(matches!(d.claim("k").await, Claim::Mine(_)));
    }
}
