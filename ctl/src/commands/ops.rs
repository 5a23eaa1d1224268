//! `clibotctl reload`: the daemon re-reads its config file and says what changed.

use clibot_proto::v1;

/// Asks for the reload and prints what applies now and what needs a restart.
pub async fn run(c: &mut clibot_proto::Client, json: bool) -> anyhow::Result<()> {
    let r = c.reload(v1::ReloadRequest {}).await?.into_inner();
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "reloaded": r.reloaded,
                "needs_restart": r.needs_restart,
            }))?
        );
        return Ok(());
    }
    if r.reloaded.is_empty() && r.needs_restart.is_empty() {
        println!("reloaded: nothing changed");
    }
    if !r.reloaded.is_empty() {
        println!("reloaded: {}", r.reloaded.join(", "));
    }
    if !r.needs_restart.is_empty() {
        println!(
            "changed, applies after a restart (`systemctl --user restart clibotd`): {}",
            r.needs_restart.join(", ")
        );
    }
    Ok(())
}
