//! `kip-nexus`: the `kip` command under the package's own name.
//!
//! `uvx kip-nexus serve`, and an MCP client configured from the MCP Registry's entry (which
//! runs `uvx kip-nexus==VERSION serve`), look for a command named like the PyPI package.
//! The wheel installs this launcher beside `kip`; it replaces itself with the `kip` found
//! next to its own (symbolic links resolved) executable, so stdin/stdout, signals and the
//! exit status are kip's own.

use std::path::PathBuf;
use std::process::{Command, ExitCode};

fn kip_beside_me() -> Result<PathBuf, String> {
    let me = std::env::current_exe()
        .and_then(|p| p.canonicalize())
        .map_err(|e| format!("cannot find its own executable: {e}"))?;
    let dir = me
        .parent()
        .ok_or_else(|| format!("{} has no directory", me.display()))?;
    let kip = dir.join(if cfg!(windows) { "kip.exe" } else { "kip" });
    if kip.is_file() {
        Ok(kip)
    } else {
        Err(format!(
            "no kip binary beside it in {} (the package installs both): reinstall kip-nexus",
            dir.display()
        ))
    }
}

fn main() -> ExitCode {
    let kip = match kip_beside_me() {
        Ok(kip) => kip,
        Err(e) => {
            eprintln!("kip-nexus: {e}");
            return ExitCode::from(127);
        }
    };
    let mut command = Command::new(&kip);
    command.args(std::env::args_os().skip(1));
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        // Only returns when the exec failed.
        let e = command.exec();
        eprintln!("kip-nexus: cannot run {}: {e}", kip.display());
        ExitCode::from(126)
    }
    #[cfg(not(unix))]
    match command.status() {
        Ok(status) => ExitCode::from(status.code().unwrap_or(1).clamp(0, 255) as u8),
        Err(e) => {
            eprintln!("kip-nexus: cannot run {}: {e}", kip.display());
            ExitCode::from(126)
        }
    }
}
