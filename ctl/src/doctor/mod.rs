//! `clibotctl doctor`: checks the installation a piece at a time and says, for each problem,
//! how to fix it. It never starts a daemon: a missing one is one of the things it reports.
//!
//! This file runs the checks in order and prints them; each area's checks live in their own
//! file: `daemon` (the daemon, tmux, the socket and the state directory), `clis` (the CLIs'
//! programs and the hooks), `systemd` (the user units), `config` and `gateway` (the config file,
//! the gateways and their keys), `sandbox` (the jail). `report` is what a check finds, `probe`
//! how programs are looked at. The checks only read: the machine, the config file, the daemon.

use std::path::Path;

use serde_json::json;

mod clis;
mod config;
mod daemon;
mod gateway;
mod probe;
mod report;
mod sandbox;
mod systemd;

use report::{Check, Level};

/// Runs every check and prints the result; returns whether nothing failed.
pub async fn run(socket: &Path, json_out: bool) -> anyhow::Result<bool> {
    let checks = collect(socket).await;
    let ok = checks.iter().all(|c| c.level != Level::Fail);
    if json_out {
        let rows: Vec<_> = checks
            .iter()
            .map(|c| {
                json!({"name": c.name, "status": c.level.word().to_lowercase(), "detail": c.detail, "fix": c.fix})
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({"checks": rows, "ok": ok}))?
        );
    } else {
        let on = crate::colour::enabled();
        for c in &checks {
            let tone = match c.level {
                Level::Ok => crate::colour::Tone::Good,
                Level::Warn => crate::colour::Tone::Busy,
                Level::Fail => crate::colour::Tone::Bad,
            };
            let word = crate::colour::paint(&format!("{:<4}", c.level.word()), tone, on);
            println!("{word}  {}: {}", c.name, c.detail);
            if c.level != Level::Ok && !c.fix.is_empty() {
                println!("      fix: {}", c.fix);
            }
        }
        let fails = checks.iter().filter(|c| c.level == Level::Fail).count();
        let warns = checks.iter().filter(|c| c.level == Level::Warn).count();
        println!("{fails} failed, {warns} warnings, {} checks", checks.len());
    }
    Ok(ok)
}

async fn collect(socket: &Path) -> Vec<Check> {
    let mut out = Vec::new();
    let config_path = config::config_path();
    let config = config::read_config(config_path.as_deref(), &mut out);
    config::parser_check(config_path.as_deref(), &mut out).await;
    if let Some(c) = &config {
        config::roots_check(c, &mut out);
    }
    sandbox::sandbox_checks(config.as_ref(), &mut out).await;
    sandbox::member_root_checks(config.as_ref(), &mut out);
    sandbox::escape_checks(config.as_ref(), &mut out);

    // The daemon first: most other checks read its status.
    let (mut client, status) = daemon::daemon_check(socket, &mut out).await;

    daemon::tmux_check(status.as_ref(), config.as_ref(), &mut out).await;
    daemon::socket_check(socket, &mut out);
    if let Some(s) = &status {
        daemon::state_dir_check(Path::new(&s.state_dir), &mut out);
    }
    clis::clis_check(status.as_ref(), config.as_ref(), &mut out).await;
    if let Some(c) = client.as_mut() {
        clis::hook_check(c, &mut out).await;
        sandbox::jail_run_checks(c, &mut out).await;
    }
    systemd::systemd_check(&mut out).await;
    if let Some(s) = &status {
        gateway::gateway_check(s, &mut out);
        daemon::warnings_check(s, &mut out);
        config::accepted_check(s, &mut out);
    }
    if let Some(table) = &config {
        gateway::gateway_config_check(table, &mut out);
        gateway::api_reach_check(table, &mut out).await;
    }
    out
}
