//! A stand-in CLI whose prompts are easy to raise: bash, where `ask CMD` prints
//! `Run: CMD [y/n]` — a permission prompt about CMD — and then what it was told.

/// `[cli.asker]`: bash whose `Run: COMMAND [y/n]` lines are permission prompts about COMMAND.
pub const ASKER: &str = r#"
[cli.asker]
argv = ["bash", "--norc", "--noprofile"]
env = { PS1 = "$ ", HISTFILE = "/dev/null" }
submit_delay_ms = 50
quiet_ms = 300

[cli.asker.patterns]
prompts = [
  { kind = "permission", pattern = '(?m)^Run: .+ \[y/n\]\s*$', options = ["y", "n"], answer = "line", subject = '(?m)^Run: (.+?) \[y/n\]\s*$' },
]
"#;

/// Defines `ask CMD`, which asks about CMD and prints what it was told.
pub const ASK_FN: &str = r#"ask() { read -r -p "Run: $1 [y/n] " a; echo "decided $1: $a"; }"#;
