//! `kip open` (and `kip serve --http --open`): starts the server and prints the
//! explorer's address on stdout, where the page is served.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};

fn first_line_and_page(args: &[&str]) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut child = Command::new(env!("CARGO_BIN_EXE_kip"))
        .arg("--data")
        .arg(dir.path())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start kip");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut url = String::new();
    out.read_line(&mut url).expect("read the address");
    let url = url.trim().to_string();
    let addr = url
        .strip_prefix("http://")
        .and_then(|u| u.strip_suffix('/'))
        .unwrap_or_else(|| panic!("not an address: {url:?}"));
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    write!(
        s,
        "GET / HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .expect("request");
    let mut page = String::new();
    s.read_to_string(&mut page).expect("response");
    let _ = child.kill();
    let _ = child.wait();
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    assert!(page.contains("kip-nexus explorer"), "{page}");
}

#[test]
fn kip_open_prints_the_explorer_address() {
    first_line_and_page(&["open", "--http", "127.0.0.1:0"]);
}

#[test]
fn kip_serve_http_open_prints_it_too() {
    first_line_and_page(&["serve", "--http", "127.0.0.1:0", "--open"]);
}

#[test]
fn open_needs_http_on_serve() {
    let out = Command::new(env!("CARGO_BIN_EXE_kip"))
        .args(["serve", "--open"])
        .output()
        .expect("run kip");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--http"));
}
