//! `kip serve`: MCP over stdio, or MCP + the HTTP JSON API.

use anyhow::{Context, Result};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

/// Arguments of `kip serve`.
#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// Serve HTTP on this address instead of stdio (MCP at /mcp, JSON API at /kip).
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "127.0.0.1:8080")]
    http: Option<std::net::SocketAddr>,
    /// Require `Authorization: Bearer <KEY>` on every HTTP route.
    #[arg(long, env = "KIP_API_KEY", hide_env_values = true)]
    api_key: Option<String>,
    /// Serve only the read-only tool (FIND, SEARCH, DESCRIBE).
    #[arg(long)]
    read_only: bool,
    /// Largest HTTP request body, in bytes.
    #[arg(long, default_value_t = 8 * 1024 * 1024)]
    max_body_bytes: usize,
    /// Time budget of one HTTP /kip request, in seconds.
    #[arg(long, default_value_t = 60)]
    timeout_secs: u64,
}

/// Runs the server until the client disconnects (stdio) or ctrl-c (HTTP).
pub fn run(data: &Path, args: ServeArgs) -> Result<ExitCode> {
    // Logs go to stderr: stdout carries the MCP stdio transport. KIP_LOG sets the filter.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("KIP_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    let nexus = Arc::new(crate::open_nexus(data)?);
    let tools = kip_server::mcp::ToolSets {
        kip: true,
        read_only: args.read_only,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        match args.http {
            Some(addr) => {
                let config = kip_server::http::HttpConfig {
                    api_key: args.api_key,
                    read_only: args.read_only,
                    tools,
                    max_body_bytes: args.max_body_bytes,
                    request_timeout: std::time::Duration::from_secs(args.timeout_secs),
                };
                kip_server::http::serve(nexus, addr, config)
                    .await
                    .with_context(|| format!("serving HTTP on {addr}"))
            }
            None => kip_server::serve_stdio(nexus, tools)
                .await
                .map_err(|e| anyhow::anyhow!("MCP stdio server: {e}")),
        }
    })?;
    Ok(ExitCode::SUCCESS)
}
