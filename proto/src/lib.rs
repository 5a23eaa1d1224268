//! The `clibot.v1` contract shared by `clibotd`, `clibotctl` and `clibot-gateway`: the generated
//! protobuf/gRPC code, where the daemon's socket lives by default, and how to connect to it.

pub mod clis;
mod config_file;
mod connect;
pub mod duration;
mod errors;
pub mod members;
mod names;
mod paths;
pub mod platforms;
pub mod redact;
mod remote;
mod text;
pub mod usage_words;
pub mod versions;

pub use config_file::{MissingEnv, default_config_path, substitute_env};
pub use connect::{ConnectError, connect, open_socket};
pub use errors::describe;
pub use paths::{default_socket_path, private_runtime_dir};
pub use remote::{MachineConfig, Target, connect_to};
pub use text::utc;

/// Generated code for package `clibot.v1`.
pub mod v1 {
    // The comments come from the proto, written for its readers (`[rules]` is a config table,
    // `<chat>` a placeholder), not for rustdoc.
    #![allow(clippy::all, missing_docs)]
    #![allow(
        rustdoc::broken_intra_doc_links,
        rustdoc::invalid_html_tags,
        rustdoc::bare_urls
    )]
    tonic::include_proto!("clibot.v1");
}

/// The largest unary gRPC message either way (4 MiB), set explicitly on the daemon and on every
/// client. Longer texts travel in chunks through `ReadBlob`.
pub const MAX_MESSAGE: usize = 4 * 1024 * 1024;

/// The client type every tool uses.
pub type Client = v1::clibot_client::ClibotClient<tonic::transport::Channel>;

impl v1::GatewayStatus {
    /// One line for people: `telegram   connected, last heard 12s ago, 3 chats, 0 failed`.
    /// Shared by `clibotctl status` and `clibot-gateway status`.
    pub fn describe(&self, now_ms: i64) -> String {
        let heard = if self.last_heard_ms <= 0 {
            "never heard from".to_string()
        } else {
            format!(
                "last heard {}s ago",
                (now_ms - self.last_heard_ms).max(0) / 1000
            )
        };
        let mut line = format!(
            "{:<9} {}, {heard}, {} chat{} bound, {} delivered, {} failed",
            self.platform,
            self.state,
            self.chats_bound,
            if self.chats_bound == 1 { "" } else { "s" },
            self.deliveries,
            self.deliveries_failed,
        );
        if self.last_progress_ms > 0 {
            line.push_str(&format!(
                ", last cycle {}s ago",
                (now_ms - self.last_progress_ms).max(0) / 1000
            ));
        }
        if self.stalled {
            line.push_str(&format!(
                ", STALLED (no cycle within {}s)",
                self.stall_after_ms / 1000
            ));
        }
        if self.restarts > 0 {
            line.push_str(&format!(
                ", restarted {} time{} (last {}s ago)",
                self.restarts,
                if self.restarts == 1 { "" } else { "s" },
                (now_ms - self.last_restart_ms).max(0) / 1000
            ));
        }
        if !self.detail.is_empty() {
            line.push_str(&format!(" ({})", self.detail));
        }
        if !self.machines.is_empty() {
            let machines: Vec<String> = self
                .machines
                .iter()
                .map(|m| match m.down_since_ms {
                    0 => format!("{} ok", m.name),
                    t => format!("{} UNREACHABLE for {}s", m.name, (now_ms - t).max(0) / 1000),
                })
                .collect();
            line.push_str(&format!("; machines: {}", machines.join(", ")));
        }
        line
    }
}
