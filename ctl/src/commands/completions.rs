//! Shell completion: clap's scripts, and names only the running daemon knows — the sessions a
//! command such as `send` or `screen` names (`clibotctl send <TAB>`), and the CLIs `--cli`
//! takes (`clibotctl spawn x --cli <TAB>`), in bash, zsh and fish (elvish and PowerShell get
//! clap's commands and flags). The scripts ask `clibotctl __names`, which prints them one per
//! line, and nothing (quickly, without starting a daemon) when none runs.

use std::path::Path;
use std::time::Duration;

use clap::Command;
use clibot_proto::v1;

/// What `__names` prints.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum NamesOf {
    Sessions,
    Clis,
}

/// The commands whose first argument is an existing session (its help says so).
fn session_commands(cmd: &Command) -> Vec<String> {
    cmd.get_subcommands()
        .filter(|s| {
            s.get_positionals().next().is_some_and(|a| {
                a.get_id() == "name"
                    && a.get_help().is_some_and(|h| {
                        // clap drops a one-sentence doc comment's final period; a new session's
                        // name ("… [default: CLI-N]") is not an existing one.
                        h.to_string().trim_end_matches('.') == "The session's name"
                    })
            })
        })
        .map(|s| s.get_name().to_string())
        .collect()
}

/// The completion script for `shell`: clap's, then (bash, fish, zsh) the names the daemon
/// knows.
pub fn script(cmd: &mut Command, shell: clap_complete::Shell) {
    let name = cmd.get_name().to_string();
    let mut generated = Vec::new();
    clap_complete::generate(shell, cmd, name.clone(), &mut generated);
    let mut text = String::from_utf8_lossy(&generated).into_owned();
    let subs = session_commands(cmd).join(" ");
    match shell {
        clap_complete::Shell::Bash => text.push_str(&format!(
            r#"
# Session and CLI names, asked of the running daemon (none when no daemon runs).
_{name}_names() {{
    local cur prev sub
    cur="${{COMP_WORDS[COMP_CWORD]}}"
    prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    sub="${{COMP_WORDS[1]}}"
    if [[ "$prev" == "--cli" ]]; then
        COMPREPLY=($(compgen -W "$({name} __names clis 2>/dev/null)" -- "$cur"))
        return 0
    fi
    if [[ "$prev" == "--session" ]] || {{ [[ $COMP_CWORD -eq 2 && " {subs} " == *" $sub "* && "$cur" != -* ]]; }}; then
        COMPREPLY=($(compgen -W "$({name} __names sessions 2>/dev/null)" -- "$cur"))
        return 0
    fi
    _{name} "$@"
}}
complete -F _{name}_names -o bashdefault -o default {name}
"#
        )),
        clap_complete::Shell::Fish => text.push_str(&format!(
            r#"
# Session and CLI names, asked of the running daemon (none when no daemon runs).
complete -c {name} -n '__fish_seen_subcommand_from {subs}' -f -a '({name} __names sessions 2>/dev/null)'
complete -c {name} -l cli -x -a '({name} __names clis 2>/dev/null)'
complete -c {name} -l session -x -a '({name} __names sessions 2>/dev/null)'
"#
        )),
        clap_complete::Shell::Zsh => {
            // clap's script ends by calling (autoloaded) or registering its function; the
            // names go first, so both lead through them.
            let names = format!(
                r#"
# Session and CLI names, asked of the running daemon (none when no daemon runs).
_{name}_names() {{
    local prev=${{words[CURRENT-1]}} sub=${{words[2]}}
    if [[ $prev == --cli ]]; then
        compadd -- ${{(f)"$({name} __names clis 2>/dev/null)"}}
        return
    fi
    if [[ $prev == --session ]] || {{ (( CURRENT == 3 )) && [[ " {subs} " == *" $sub "* && ${{words[CURRENT]}} != -* ]]; }}; then
        compadd -- ${{(f)"$({name} __names sessions 2>/dev/null)"}}
        return
    fi
    _{name} "$@"
}}

if [ "$funcstack[1]" = "_{name}" ]; then
    _{name}_names "$@"
else
    compdef _{name}_names {name}
fi
"#
            );
            let tail = format!(
                "if [ \"$funcstack[1]\" = \"_{name}\" ]; then\n    _{name} \"$@\"\nelse\n    compdef _{name} {name}\nfi\n"
            );
            match text.rfind(&tail) {
                Some(i) => text.replace_range(i.., &names),
                None => text.push_str(&names),
            }
        }
        _ => {}
    }
    print!("{text}");
}

/// `__names`: one name per line from the daemon at `socket`; nothing when it does not answer
/// within a second (completion must never hang, nor start a daemon).
pub async fn names(socket: &Path, what: NamesOf) {
    let Ok(Ok(mut c)) =
        tokio::time::timeout(Duration::from_secs(1), clibot_proto::connect(socket)).await
    else {
        return;
    };
    let names: Vec<String> = match what {
        NamesOf::Sessions => c
            .list_sessions(v1::ListSessionsRequest::default())
            .await
            .map(|r| {
                r.into_inner()
                    .sessions
                    .into_iter()
                    .map(|s| s.name)
                    .collect()
            })
            .unwrap_or_default(),
        NamesOf::Clis => c
            .status(v1::StatusRequest {})
            .await
            .map(|r| r.into_inner().clis)
            .unwrap_or_default(),
    };
    for n in names {
        println!("{n}");
    }
}
