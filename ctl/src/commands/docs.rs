//! `clibotctl man`: generated from the same argument definitions `--help` uses, so it can
//! never describe another version of the tool (the completion scripts, too:
//! [`super::completions`]).

use std::path::Path;

use anyhow::Context;
use clap::Command;

/// `clibotctl(1)` to stdout; with `dir`, one page per command there (`clibotctl.1`,
/// `clibotctl-list.1`, ...).
pub fn man(cmd: Command, dir: Option<&Path>) -> anyhow::Result<()> {
    let Some(dir) = dir else {
        return clap_mangen::Man::new(cmd)
            .render(&mut std::io::stdout())
            .context("writing the manual page");
    };
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut written = 0;
    let mut write = |name: String, page: Command| -> anyhow::Result<()> {
        let path = dir.join(format!("{name}.1"));
        let mut f = std::fs::File::create(&path)
            .with_context(|| format!("cannot write {}", path.display()))?;
        clap_mangen::Man::new(page)
            .render(&mut f)
            .with_context(|| format!("cannot write {}", path.display()))?;
        written += 1;
        Ok(())
    };
    let top = cmd.get_name().to_string();
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("{top}-{}", sub.get_name());
        write(name.clone(), sub.clone().name(name))?;
    }
    write(top, cmd)?;
    // The daemon's and the gateway's pages come from their own binaries, installed beside this
    // one, so that they describe the very versions installed.
    for other in ["clibotd", "clibot-gateway"] {
        let program = crate::connect::sibling(other);
        match std::process::Command::new(&program)
            .arg("--print-man")
            .output()
        {
            Ok(out) if out.status.success() && !out.stdout.is_empty() => {
                let path = dir.join(format!("{other}.1"));
                std::fs::write(&path, out.stdout)
                    .with_context(|| format!("cannot write {}", path.display()))?;
                written += 1;
            }
            _ => eprintln!(
                "clibotctl: no {other} found next to clibotctl or on PATH: its page was not written"
            ),
        }
    }
    println!("wrote {written} manual pages to {}", dir.display());
    Ok(())
}
