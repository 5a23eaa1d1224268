//! The first output of a CLI, kept outside tmux. A CLI that dies as it starts (a missing API
//! key, a binary the jail cannot run, a bad flag) prints why and is gone; tmux may mark its
//! pane dead before drawing those last bytes (3.3a can lose them altogether), and then the exit
//! said nothing. So each pane's first output is also piped, as tmux reads it, into
//! `STATE/early/ID.log` — at most [`EARLY_READS`] reads of 4 KiB and [`EARLY_SECS`] seconds, by
//! `dd` under `timeout` (GNU `head -c` holds what it read until its count is full), so a
//! session costs no process after that — and an exit whose pane shows nothing is explained
//! from its last [`EARLY_BYTES`].
//!
//! The file lies in the daemon's state directory, which no session (jailed or not) is given:
//! nothing in a session can plant a link there.

use std::path::{Path, PathBuf};

/// Bytes read back from the end of the first output.
pub const EARLY_BYTES: usize = 256 * 1024;
/// Reads (of at most 4 KiB each) of a pane's first output kept: at most 4 MiB.
pub const EARLY_READS: usize = 1024;
/// Seconds of a pane's first output kept.
pub const EARLY_SECS: u32 = 30;

/// Where session `id`'s first output goes.
pub fn path(state_dir: &Path, id: &str) -> PathBuf {
    state_dir.join("early").join(format!("{id}.log"))
}

/// The shell command tmux's `pipe-pane` runs to keep the first output in `file`.
pub fn pipe_command(file: &Path) -> String {
    let quoted = file.display().to_string().replace('\'', r"'\''");
    format!("exec timeout {EARLY_SECS} dd bs=4096 count={EARLY_READS} status=none of='{quoted}'")
}

/// Makes the directory and removes what an earlier run of the session left.
pub fn prepare(file: &Path) -> std::io::Result<()> {
    if let Some(dir) = file.parent() {
        crate::paths::create_private_dir(dir)?;
    }
    match std::fs::remove_file(file) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// The text of the first output, terminal escapes taken out; empty when there is none.
pub fn read(file: &Path) -> String {
    use std::io::Read;
    use std::io::{Seek, SeekFrom};
    use std::os::unix::fs::OpenOptionsExt;
    let Ok(mut f) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc_o_nofollow())
        .open(file)
    else {
        return String::new();
    };
    // The end: what a dying CLI printed last.
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    if f.seek(SeekFrom::Start(len.saturating_sub(EARLY_BYTES as u64)))
        .is_err()
    {
        return String::new();
    }
    let mut bytes = Vec::new();
    if f.take(EARLY_BYTES as u64).read_to_end(&mut bytes).is_err() {
        return String::new();
    }
    plain(&String::from_utf8_lossy(&bytes))
}

fn libc_o_nofollow() -> i32 {
    rustix::fs::OFlags::NOFOLLOW.bits() as i32
}

/// Terminal output as the lines it would leave: CSI, OSC and other escape sequences removed, a
/// carriage return starting its line again.
pub fn plain(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut line = String::new();
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => match chars.next() {
                Some('[') => {
                    // Parameters and intermediates, then one final byte in @..~.
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                }
                Some(']') | Some('P') | Some('_') | Some('^') => {
                    // Up to BEL or ESC \.
                    while let Some(c) = chars.next() {
                        if c == '\u{7}' {
                            break;
                        }
                        if c == '\u{1b}' && chars.peek() == Some(&'\\') {
                            chars.next();
                            break;
                        }
                    }
                }
                Some('(') | Some(')') | Some('#') => {
                    chars.next();
                }
                _ => {}
            },
            '\r' => {
                // A terminal turns "\r\n" into "\r\r\n": only a return that text follows
                // starts its line again.
                while chars.peek() == Some(&'\r') {
                    chars.next();
                }
                if chars.peek() != Some(&'\n') {
                    line.clear();
                }
            }
            '\n' => {
                out.push_str(line.trim_end());
                out.push('\n');
                line.clear();
            }
            c if c.is_control() && c != '\t' => {}
            c => line.push(c),
        }
    }
    out.push_str(line.trim_end());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_go_and_the_words_stay() {
        let raw = "\u{1b}[?1049h\u{1b}]0;title\u{7}\u{1b}[1;31merror:\u{1b}[0m no API key\r\nset ANTHROPIC_API_KEY\r\r\n50%\r100%\n";
        assert_eq!(
            plain(raw),
            "error: no API key\nset ANTHROPIC_API_KEY\n100%\n"
        );
    }

    #[test]
    fn the_pipe_command_quotes_the_path() {
        let c = pipe_command(Path::new("/tmp/it's/x.log"));
        assert!(c.ends_with(r"of='/tmp/it'\''s/x.log'"), "{c}");
    }
}
