//! Shell completion: clap's scripts, and names only the running daemon knows — the sessions a
//! command such as `send` or `screen` names (`clibotctl send <TAB>`), and the CLIs `--cli`
//! takes (`clibotctl spawn x --cli <TAB>`). The scripts ask `clibotctl __names`, which prints
//! them one per line, and nothing (quickly, without starting a daemon) when none runs.

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

/// The completion script for `shell`: clap's, then (bash, fish) the names the daemon knows.
pub fn script(cmd: &mut Command, shell: clap_complete::Shell) {
    let name = cmd.get_name().to_string();
    clap_complete::generate(shell, cmd, name.clone(), &mut std::io::stdout());
    let subs = session_commands(cmd).join(" ");
    match shell {
        clap_complete::Shell::Bash => print!(
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
        ),
        clap_complete::Shell::Fish => print!(
            r#"
# Session and CLI names, asked of the running daemon (none when no daemon runs).
complete -c {name} -n '__fish_seen_subcommand_from {subs}' -f -a '({name} __names sessions 2>/dev/null)'
complete -c {name} -l cli -f -a '({name} __names clis 2>/dev/null)'
complete -c {name} -l session -f -a '({name} __names sessions 2>/dev/null)'
"#
        ),
        _ => {}
    }
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
