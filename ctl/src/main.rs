//! `clibotctl`: the command line for people and scripts. A thin client of clibotd.
//!
//! This file parses the arguments and hands each command to its area in `commands/` (or to
//! `doctor/`). Exit codes: 0 ok, 1 error (the daemon's message is printed), 2 usage; `wait`
//! and `ask` add 3 (a prompt waits), 4 (timed out) and 5 (the session exited).

// The arguments' doc comments are their `--help` text, written for a terminal (`[[routes]]`
// is the config's table, not a link).
#[allow(rustdoc::broken_intra_doc_links)]
mod args;
mod colour;
mod commands;
mod connect;
mod doctor;
mod hooks;

use std::process::ExitCode;

use anyhow::bail;
use clap::Parser;

use crate::args::{AutomationAction, BudgetAction, Cli, Command, JobsAction, PairingAction};
use crate::commands::{chat, docs, hook, io, ops, prompts, script, sessions};

fn main() -> ExitCode {
    quiet_on_closed_pipe();
    let cli = Cli::parse();
    match &cli.command {
        Command::Hook {
            cli: name,
            global: true,
            event,
        } => {
            let socket = || {
                cli.socket
                    .clone()
                    .or_else(connect::configured_socket)
                    .unwrap_or_else(clibot_proto::default_socket_path)
            };
            return hook::run_global(socket, name, event.as_deref().unwrap_or(""));
        }
        Command::Hook {
            cli: name, event, ..
        } => {
            return hook::run(cli.socket.clone(), name, event.as_deref().unwrap_or(""));
        }
        Command::Hooks { action } => {
            return match hooks::run(action) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("clibotctl: {e:#}");
                    ExitCode::FAILURE
                }
            };
        }
        _ => {}
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("clibotctl: cannot start: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            match e.downcast_ref::<tonic::Status>() {
                Some(s) => eprintln!("clibotctl: {}", s.message()),
                None => eprintln!("clibotctl: {}", clibot_proto::describe(e.as_ref())),
            }
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let configured = cli.socket.clone().or_else(connect::configured_socket);
    let explicit = configured.is_some();
    let socket = configured.unwrap_or_else(clibot_proto::default_socket_path);
    match &cli.command {
        Command::DialStdio => {
            let r = commands::dial::dial_stdio(&socket).await;
            // The reader of stdin holds a thread the runtime would wait for: leave now.
            std::process::exit(match r {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("clibotctl: {}", clibot_proto::describe(e.as_ref()));
                    1
                }
            });
        }
        Command::Logs {
            follow,
            lines,
            state_dir,
        } => {
            let dir = commands::logs::state_dir(state_dir.clone(), &socket).await;
            return commands::logs::logs(dir, *lines, *follow).await;
        }
        Command::Completions { shell } => {
            use clap::CommandFactory;
            commands::completions::script(&mut Cli::command(), *shell);
            return Ok(());
        }
        Command::Names { what } => {
            commands::completions::names(&socket, *what).await;
            return Ok(());
        }
        Command::Man { dir } => {
            use clap::CommandFactory;
            return docs::man(Cli::command(), dir.as_deref());
        }
        Command::Doctor { json } => {
            if !doctor::run(&socket, *json).await? {
                bail!("doctor found failures (FAIL above); fix them and run it again");
            }
            return Ok(());
        }
        Command::Audit {
            session,
            user,
            since,
            lines,
            state_dir: Some(dir),
            json,
        } => return ops::audit(dir, session, user, since, *lines, *json),
        // Every machine's daemon is asked, not the one --host names.
        Command::Usage {
            by,
            since,
            session,
            json,
            csv,
        } if by == "machine" => {
            if cli.host.as_deref().is_some_and(|h| !h.trim().is_empty()) {
                bail!(
                    "usage --by machine asks every machine of [[gateway.machines]]; leave out --host (or CLIBOT_HOST)"
                );
            }
            return commands::usage::by_machine(
                &socket,
                since.as_deref(),
                session.clone(),
                (*json, *csv),
            )
            .await;
        }
        _ => {}
    }
    let target = match &cli.host {
        Some(host) if !host.trim().is_empty() => connect::remote(host)?,
        _ => clibot_proto::Target::Socket(socket.clone()),
    };
    let mut c = match &target {
        clibot_proto::Target::Socket(_) => {
            connect::client(&socket, !cli.no_autostart, explicit).await?
        }
        remote => clibot_proto::connect_to(remote).await?,
    };
    let socket = &target;
    let c = &mut c;
    match cli.command {
        Command::Status { json } => ops::status(c, json).await,
        Command::List {
            json,
            cli,
            state,
            dir,
        } => sessions::list(c, json, cli, state, dir).await,
        Command::Show { name, json } => sessions::show(c, name, json).await,
        Command::Spawn {
            name,
            cli,
            dir,
            env,
            args,
            delegate,
            resume,
            profile,
            worktree,
            from,
            json,
        } => {
            let mut req = sessions::spawn_request(name, cli, dir, env, args, delegate)?;
            req.resume = resume.unwrap_or_default();
            req.profile = profile.unwrap_or_default();
            req.worktree = worktree.is_some();
            req.worktree_branch = worktree.unwrap_or_default();
            req.worktree_from = from.unwrap_or_default();
            sessions::spawn(c, req, json).await
        }
        Command::Send {
            name,
            text,
            no_submit,
            json,
        } => io::send(c, name, text, no_submit, json).await,
        Command::Ask {
            name,
            text,
            timeout,
            json,
        } => script::ask(c, socket, name, text, timeout, json).await,
        Command::Wait {
            name,
            until,
            timeout,
            json,
        } => script::wait(c, socket, name, until, timeout, json).await,
        Command::Keys { name, keys, json } => io::keys(c, name, keys, json).await,
        Command::Screen {
            name,
            lines,
            escapes,
            json,
        } => io::screen(c, name, lines, escapes, json).await,
        Command::Stop {
            name,
            force,
            timeout,
            json,
        } => sessions::stop(c, name, force, timeout, json).await,
        Command::Adopt {
            target,
            cli,
            name,
            pane,
            server,
            found,
            json,
        } => {
            let how = sessions::Adoption {
                target,
                cli,
                name,
                pane,
                server,
                found,
            };
            sessions::adopt(c, how, json).await
        }
        Command::Restart {
            name,
            fresh,
            profile,
            json,
        } => sessions::restart(c, name, fresh, profile, json).await,
        Command::Start { name, json } => sessions::start(c, name, json).await,
        Command::Discover { json } => sessions::discover(c, json).await,
        Command::Pending { json } => prompts::pending(c, json).await,
        Command::Cancel { name, json } => prompts::cancel(c, name, json).await,
        Command::Queue { name, json } => prompts::queue(c, name, json).await,
        Command::Drop { name, n, all, json } => {
            prompts::drop_queued(c, name, if all { 0 } else { n.unwrap_or(0) }, json).await
        }
        Command::Resume {
            id,
            name,
            quit,
            json,
        } => sessions::resume(c, id, name, quit, json).await,
        Command::Route {
            text,
            dir,
            name,
            dry_run,
            json,
        } => sessions::route(c, text, dir, name, dry_run, json).await,
        Command::Release { name, json } => sessions::release(c, name, json).await,
        Command::Events {
            follow,
            since,
            sessions,
            json,
        } => ops::events(c, socket, follow, since, sessions, json).await,
        Command::Answer {
            name,
            answer,
            prompt,
            json,
        } => io::answer(c, name, answer, prompt, json).await,
        Command::Last { name, json } => io::print_last(c, &name, json).await,
        Command::Share {
            name,
            user,
            revoke,
            json,
        } => chat::share(c, name, user, revoke, json).await,
        Command::Chats { json } => chat::chats(c, json).await,
        Command::Hook { .. }
        | Command::DialStdio
        | Command::Hooks { .. }
        | Command::Doctor { .. }
        | Command::Completions { .. }
        | Command::Names { .. }
        | Command::Logs { .. }
        | Command::Man { .. } => Ok(()),
        Command::Reload { json } => ops::reload(c, json).await,
        Command::Rules { json } => ops::rules(c, json).await,
        Command::Patterns {
            action: args::PatternsAction::Test { file, cli, json },
        } => commands::patterns::test(c, &file, cli, json).await,
        Command::Delegate { name, cli, json } => sessions::delegate(c, name, cli, json).await,
        Command::Metrics => ops::metrics(c).await,
        Command::Transcript {
            chat,
            since,
            lines,
            json,
        } => chat::transcript(c, &chat, since.as_deref(), lines, json).await,
        Command::Audit {
            session,
            user,
            since,
            lines,
            json,
            ..
        } => ops::audit(
            &ops::state_dir(c).await?,
            &session,
            &user,
            &since,
            lines,
            json,
        ),
        Command::Pairing { action } => match action {
            PairingAction::List { json } => chat::pairings(c, json).await,
            PairingAction::Approve { code, json } => chat::approve(c, code, json).await,
            PairingAction::Revoke {
                platform,
                user,
                json,
            } => chat::revoke(c, platform, user, json).await,
        },
        Command::Jobs { action } => match action {
            JobsAction::Add { job, json } => {
                let replace = job.replace;
                let (spec, secret) = job.spec()?;
                commands::jobs::add(c, spec, secret, replace, json).await
            }
            JobsAction::List { json } => commands::jobs::list(c, json).await,
            JobsAction::Show { name, json } => commands::jobs::show(c, &name, json).await,
            JobsAction::Remove { name } => commands::jobs::remove(c, name).await,
            JobsAction::Pause { name } => commands::jobs::pause(c, &name, true).await,
            JobsAction::Resume { name } => commands::jobs::pause(c, &name, false).await,
            JobsAction::Run { name, json } => commands::jobs::run_now(c, name, json).await,
        },
        Command::Goal {
            name,
            until,
            max_turns,
            max_time,
            off,
            json,
        } => commands::jobs::goal(c, name, until, (max_turns, max_time), off, json).await,
        Command::Usage {
            by,
            since,
            session,
            json,
            csv,
        } => commands::usage::show(c, &by, since.as_deref(), session, (json, csv)).await,
        Command::Budgets { json } => commands::usage::budgets(c, json).await,
        Command::Budget {
            action: BudgetAction::Lift { name },
        } => commands::usage::lift(c, name).await,
        Command::Worktree { action } => commands::worktree::run(c, action).await,
        Command::Attach { name } => sessions::attach(c, name).await,
        Command::Automation {
            action: AutomationAction::Report { json },
        } => commands::automation::report(c, json).await,
    }
}

/// `clibotctl events | head -1`: once the reader is gone, writing to stdout fails, which
/// `println!` turns into a panic. That is no error of the user's: the command ends quietly,
/// with the status a shell gives a command ended by SIGPIPE.
fn quiet_on_closed_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if msg.contains("failed printing to stdout") && msg.contains("Broken pipe") {
            std::process::exit(141);
        }
        default(info);
    }));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::parse_timeout;

    /// Every argument of every command says what it is in `--help`.
    #[test]
    fn every_argument_has_help() {
        use clap::CommandFactory;
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for a in cmd.get_arguments() {
                let id = a.get_id().as_str();
                if id == "help" || id == "version" || a.is_hide_set() {
                    continue;
                }
                if a.get_help().is_none() && a.get_long_help().is_none() {
                    missing.push(format!("{path} {id}"));
                }
            }
            for sub in cmd.get_subcommands() {
                if sub.is_hide_set() {
                    continue;
                }
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        walk(&Cli::command(), "clibotctl", &mut missing);
        assert!(missing.is_empty(), "arguments without help: {missing:#?}");
    }

    #[test]
    fn man_pages_cover_every_command() {
        use clap::CommandFactory;
        let dir = tempfile::tempdir().expect("tempdir");
        docs::man(Cli::command(), Some(dir.path())).expect("man --dir");
        for sub in Cli::command()
            .get_subcommands()
            .filter(|s| !s.is_hide_set())
        {
            let page = dir.path().join(format!("clibotctl-{}.1", sub.get_name()));
            let text = std::fs::read_to_string(&page).expect("page written");
            assert!(text.contains(".TH"), "{}", page.display());
        }
        assert!(dir.path().join("clibotctl.1").exists());
    }

    #[test]
    fn a_stop_timeout_of_0_means_the_default() {
        assert_eq!(parse_timeout("0"), Ok(0.0));
        assert_eq!(parse_timeout("2.5"), Ok(2.5));
        assert!(parse_timeout("3601").is_err());
        assert!(parse_timeout("-1").is_err());
        assert!(parse_timeout("soon").is_err());
    }
}
