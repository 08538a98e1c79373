//! Who may stand at either end of a data directory's socket: only the user who owns the
//! directory.
//!
//! Another local user who can write the data directory could replace `kip.sock` with a
//! socket of their own, receive every forwarded request (with its values) and answer
//! it. So, before a process serves or forwards through a directory:
//!
//! - the directory (and `kip.sock`, when there is one) must belong to this process's
//!   user and be writable by nobody else (no group or other write bit): otherwise
//!   [`check_dir`] / [`check_socket`] refuse, saying why and how to fix it;
//! - the process at the other end of every connection must run as this user: the
//!   forwarder checks the owner's uid after connecting, before sending anything, and
//!   the owner checks each connecting process's uid before reading anything
//!   ([`check_peer`]; `SO_PEERCRED` on Linux, `getpeereid` on macOS and the BSDs).

use kip_lang::KipError;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::net::UnixStream;
use std::path::Path;

/// This process's effective uid (the owner of the files it creates).
pub(super) fn my_uid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// Why a file's owner and mode make it unsafe to share a directory through, if they
/// do: owned by another user, or writable by the group or others.
pub(super) fn unsafe_because(
    what: &str,
    path: &Path,
    owner: u32,
    mode: u32,
    me: u32,
) -> Option<KipError> {
    let shown = path.display();
    if owner != me {
        return Some(
            KipError::internal(format!(
                    "refusing to use {what} {shown}: it belongs to user {owner}, and this process runs as user {me}; another user's directory could route your requests to their process"
                ),
            )
            .with_hint(format!(
                "run kip as the user who owns {shown}, or use a data directory of your own (created by kip, mode 700)"
            )),
        );
    }
    if mode & 0o022 != 0 {
        let fix = if what == "the data directory" {
            format!("chmod 700 {shown}")
        } else {
            format!("chmod 600 {shown}")
        };
        return Some(
            KipError::internal(format!(
                    "refusing to use {what} {shown}: other users can write it (mode {:o}), so they could replace its socket kip.sock and receive your requests",
                    mode & 0o7777
                ),
            )
            .with_hint(format!(
                "make it writable by its owner only: {fix} (check that nothing in it was changed by someone else)"
            )),
        );
    }
    None
}

/// Refuses a data directory that another user owns or can write. A directory that does
/// not exist yet is fine: it is created mode 700.
pub(super) fn check_dir(dir: &Path) -> Result<(), KipError> {
    match std::fs::metadata(dir) {
        Ok(m) => match unsafe_because("the data directory", dir, m.uid(), m.mode(), my_uid()) {
            Some(e) => Err(e),
            None => Ok(()),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(KipError::internal(format!(
            "cannot read the permissions of the data directory {}: {e}",
            dir.display()
        ))),
    }
}

/// Refuses a socket file that another user owns or can write (or that is not a socket:
/// a symbolic link is not followed). A missing socket is fine (nobody answers there).
pub(super) fn check_socket(socket: &Path) -> Result<(), KipError> {
    match std::fs::symlink_metadata(socket) {
        Ok(m) => {
            if !m.file_type().is_socket() {
                return Err(KipError::internal(format!(
                        "refusing to use {}: it is not a socket",
                        socket.display()
                    ),
                )
                .with_hint("remove it while no kip process runs on the directory; the next `kip serve` creates the socket again"));
            }
            match unsafe_because("the socket", socket, m.uid(), m.mode(), my_uid()) {
                Some(e) => Err(e),
                None => Ok(()),
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(KipError::internal(format!(
            "cannot read the permissions of {}: {e}",
            socket.display()
        ))),
    }
}

/// The uid of the process at the other end of a connected socket (`None` on platforms
/// where it cannot be known).
pub(super) fn peer_uid(stream: &UnixStream) -> std::io::Result<Option<u32>> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        let cred =
            nix::sys::socket::getsockopt(stream, nix::sys::socket::sockopt::PeerCredentials)?;
        Ok(Some(cred.uid()))
    }
    #[cfg(any(
        target_os = "macos",
        target_os = "ios",
        target_os = "freebsd",
        target_os = "netbsd",
        target_os = "openbsd",
        target_os = "dragonfly"
    ))]
    {
        let (uid, _) = nix::unistd::getpeereid(stream)?;
        Ok(Some(uid.as_raw()))
    }
    #[cfg(not(any(
        target_os = "linux",
        target_os = "android",
        target_os = "macos",
        target_os = "ios",
        target_os = "freebsd",
        target_os = "netbsd",
        target_os = "openbsd",
        target_os = "dragonfly"
    )))]
    {
        let _ = stream;
        Ok(None)
    }
}

/// Refuses a connection whose other end runs as another user. `role` names that end
/// for the message ("the process answering on ...", "a process connecting to ...").
pub(super) fn check_peer(stream: &UnixStream, role: &str) -> Result<(), KipError> {
    match peer_uid(stream) {
        Ok(Some(uid)) => peer_verdict(uid, my_uid(), role),
        Ok(None) => Ok(()),
        Err(e) => Err(KipError::internal(format!(
            "cannot tell which user {role} runs as: {e}"
        ))),
    }
}

/// The decision of [`check_peer`] once the peer's uid is known.
pub(super) fn peer_verdict(peer: u32, me: u32, role: &str) -> Result<(), KipError> {
    if peer == me {
        return Ok(());
    }
    Err(KipError::internal(format!("refusing to talk to {role}: it runs as user {peer}, and this process as user {me}; nothing was sent"),
    )
    .with_hint("another user has put a socket of their own in the data directory: stop every kip process on it, make the directory writable by you only (chmod 700 DIR), remove kip.sock and start again"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_of_another_user_is_refused_with_its_owner_named() {
        let e = unsafe_because("the data directory", Path::new("/d"), 1001, 0o40700, 1000)
            .expect("refused");
        assert!(e.message.contains("belongs to user 1001"), "{}", e.message);
        assert!(e.message.contains("runs as user 1000"), "{}", e.message);
    }

    #[test]
    fn group_or_other_write_bits_are_refused_with_the_chmod_that_fixes_them() {
        for mode in [0o40770, 0o40702, 0o41777, 0o40720] {
            let e = unsafe_because("the data directory", Path::new("/d"), 1000, mode, 1000)
                .expect("refused");
            assert!(
                e.message.contains("other users can write it"),
                "{}",
                e.message
            );
            assert!(e.hint.as_deref().unwrap_or("").contains("chmod 700 /d"));
        }
        let e = unsafe_because("the socket", Path::new("/d/kip.sock"), 1000, 0o140666, 1000)
            .expect("refused");
        assert!(e
            .hint
            .as_deref()
            .unwrap_or("")
            .contains("chmod 600 /d/kip.sock"));
    }

    #[test]
    fn an_owners_private_directory_is_accepted() {
        for mode in [0o40700, 0o40755, 0o40750, 0o140600] {
            assert!(unsafe_because("the data directory", Path::new("/d"), 7, mode, 7).is_none());
        }
    }

    #[test]
    fn a_peer_of_another_user_is_refused_and_the_same_user_accepted() {
        assert!(peer_verdict(1000, 1000, "x").is_ok());
        let e =
            peer_verdict(65534, 1000, "the process answering on /d/kip.sock").expect_err("refused");
        assert!(e.message.contains("runs as user 65534"), "{}", e.message);
    }

    #[test]
    fn the_peer_of_a_socket_pair_is_this_process_user() {
        let (a, _b) = UnixStream::pair().expect("pair");
        assert_eq!(peer_uid(&a).expect("peer uid"), Some(my_uid()));
        assert!(check_peer(&a, "the other end").is_ok());
    }
}
