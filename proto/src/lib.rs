//! The `clibot.v1` contract shared by `clibotd`, `clibotctl` and `clibot-gateway`: the generated
//! protobuf/gRPC code, where the daemon's socket lives by default, and how to connect to it.

mod config_file;
mod connect;
mod paths;

pub use config_file::{MissingEnv, default_config_path, substitute_env};
pub use connect::{ConnectError, connect};
pub use paths::{default_socket_path, private_runtime_dir};

/// Generated code for package `clibot.v1`.
pub mod v1 {
    #![allow(clippy::all, missing_docs)]
    tonic::include_proto!("clibot.v1");
}

/// The client type every tool uses.
pub type Client = v1::clibot_client::ClibotClient<tonic::transport::Channel>;
