//! Compiles `proto/clibot/v1/*.proto` with protox, a pure-Rust protobuf compiler, so that no
//! `protoc` has to be installed on any machine that builds clibot.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protos = ["proto/clibot/v1/clibot.proto"];
    let fds = protox::compile(protos, ["proto"])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(fds)?;
    // compile_fds does not emit rerun-if-changed lines by itself.
    println!("cargo:rerun-if-changed=proto");
    Ok(())
}
