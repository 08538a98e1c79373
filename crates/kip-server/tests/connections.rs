//! Slow and idle clients over real TCP: a connection that does not send its headers or
//! its body in time is closed, and the number of connections served at once is bounded
//! (so a flood of idle clients cannot exhaust the process's file descriptors).

use kip_server::http::{serve_until, HttpConfig};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Starts a server on an ephemeral port; it stops when the returned sender is dropped.
async fn start(config: HttpConfig) -> (SocketAddr, tokio::sync::oneshot::Sender<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    // Opened on a blocking thread, as `kip serve` does before its runtime starts: the
    // PostgreSQL backend (on the test matrix's PostgreSQL leg) blocks.
    let nexus = tokio::task::spawn_blocking(kip_open::testing::nexus)
        .await
        .expect("join")
        .map(Arc::new)
        .expect("nexus");
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let _ = serve_until(nexus, listener, config, async {
            let _ = rx.await;
        })
        .await;
    });
    (addr, tx)
}

/// Reads until the server closes the connection (or `limit` passes); returns what was
/// read and when the connection ended.
fn read_until_closed(mut s: TcpStream, limit: Duration) -> (String, Option<Duration>) {
    let start = Instant::now();
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while start.elapsed() < limit {
        match s.read(&mut buf) {
            Ok(0) => return (String::from_utf8_lossy(&out).into(), Some(start.elapsed())),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return (String::from_utf8_lossy(&out).into(), Some(start.elapsed())),
        }
    }
    (String::from_utf8_lossy(&out).into(), None)
}

fn config() -> HttpConfig {
    HttpConfig {
        header_read_timeout: Duration::from_millis(800),
        body_read_timeout: Duration::from_millis(800),
        ..HttpConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_sends_headers_one_byte_at_a_time_is_cut_off() {
    let (addr, _stop) = start(config()).await;
    let outcome = tokio::task::spawn_blocking(move || {
        let mut s = TcpStream::connect(addr).expect("connect");
        let head = b"POST /kip HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n";
        let start = Instant::now();
        let mut sent = 0;
        // One byte every 100 ms: the whole head would take seconds.
        while sent < head.len() && start.elapsed() < Duration::from_secs(6) {
            if s.write_all(&head[sent..=sent]).is_err() {
                break;
            }
            sent += 1;
            std::thread::sleep(Duration::from_millis(100));
        }
        (
            sent,
            start.elapsed(),
            read_until_closed(s, Duration::from_secs(3)),
        )
    })
    .await
    .expect("client");
    let (sent, elapsed, (_, closed)) = outcome;
    assert!(
        sent < 75,
        "the server kept reading a trickle of headers ({sent} bytes over {elapsed:?})"
    );
    assert!(closed.is_some(), "the connection was not closed");
}

/// Sends `head` at once, then one byte of `trickle` every 100 ms (for at most 8 s)
/// while reading; returns what the server sent and how long after the head its first
/// bytes came (`None`: nothing came while the client trickled).
fn trickle(
    addr: SocketAddr,
    head: &'static [u8],
    trickle: &'static [u8],
) -> (String, Option<Duration>) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.write_all(head).expect("send the head");
    let start = Instant::now();
    let mut writer = s.try_clone().expect("clone");
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stopped = stop.clone();
    let sender = std::thread::spawn(move || {
        for b in trickle.iter().cycle() {
            if stopped.load(std::sync::atomic::Ordering::SeqCst)
                || start.elapsed() > Duration::from_secs(8)
                || writer.write_all(&[*b]).is_err()
            {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    s.set_read_timeout(Some(Duration::from_millis(50)))
        .expect("timeout");
    let mut out = Vec::new();
    let mut first = None;
    let mut buf = [0u8; 4096];
    while start.elapsed() < Duration::from_secs(9) {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                first.get_or_insert(start.elapsed());
                out.extend_from_slice(&buf[..n]);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => break,
        }
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let _ = sender.join();
    (String::from_utf8_lossy(&out).into(), first)
}

/// A body sent a byte at a time does not keep the connection: the read has one
/// deadline for the whole body, whatever the rate, and ends in 408.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_sent_a_byte_at_a_time_is_answered_408_by_its_deadline() {
    let (addr, _stop) = start(HttpConfig {
        header_read_timeout: Duration::from_secs(5),
        body_read_timeout: Duration::from_millis(800),
        ..HttpConfig::default()
    })
    .await;
    let (text, first) = tokio::task::spawn_blocking(move || {
        trickle(
            addr,
            b"POST /kip HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n",
            b"{\"command\": \"DESCRIBE PRIMER\"          ",
        )
    })
    .await
    .expect("client");
    let first = first.unwrap_or_else(|| panic!("no answer while the body trickled: {text:?}"));
    assert!(
        first < Duration::from_millis(800 + 1200),
        "answered {first:?} after the headers, the deadline being 800 ms: {text}"
    );
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("REQUEST_TIMEOUT"), "{text}");
    assert!(
        text.to_ascii_lowercase().contains("connection: close"),
        "{text}"
    );
}

/// The same for the headers: one deadline for all of them, whatever the rate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_sent_a_byte_at_a_time_are_cut_off_by_their_deadline() {
    let (addr, _stop) = start(config()).await;
    let started = Instant::now();
    let (text, _) = tokio::task::spawn_blocking(move || {
        trickle(addr, b"POST /kip HTTP/1.1\r\n", b"X-Slow: aaaaaaaa\r\n")
    })
    .await
    .expect("client");
    let took = started.elapsed();
    assert!(
        took < Duration::from_millis(800 + 1500),
        "the connection stayed open {took:?} (deadline 800 ms): {text:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_are_closed() {
    let (addr, _stop) = start(config()).await;
    let closed = tokio::task::spawn_blocking(move || {
        let s = TcpStream::connect(addr).expect("connect");
        read_until_closed(s, Duration::from_secs(5)).1
    })
    .await
    .expect("client");
    let closed = closed.expect("an idle connection must be closed by the server");
    assert!(closed < Duration::from_secs(3), "{closed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_never_arrives_is_answered_and_closed() {
    let (addr, _stop) = start(config()).await;
    let (text, closed) = tokio::task::spawn_blocking(move || {
        let mut s = TcpStream::connect(addr).expect("connect");
        s.write_all(b"POST /kip HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"comm")
            .expect("send");
        read_until_closed(s, Duration::from_secs(5))
    })
    .await
    .expect("client");
    assert!(closed.is_some(), "the connection was not closed: {text}");
    // Answered with a JSON error (the body could not be read in time).
    if !text.is_empty() {
        assert!(text.starts_with("HTTP/1.1 4"), "{text}");
        assert!(text.contains("\"error\""), "{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_the_limit_wait_for_a_free_slot() {
    let (addr, _stop) = start(HttpConfig {
        max_connections: 2,
        header_read_timeout: Duration::from_millis(1500),
        ..HttpConfig::default()
    })
    .await;
    let waited = tokio::task::spawn_blocking(move || {
        // Two idle connections take both slots...
        let idle: Vec<TcpStream> = (0..2)
            .map(|_| TcpStream::connect(addr).expect("connect"))
            .collect();
        std::thread::sleep(Duration::from_millis(200));
        // ...so a third client is served only once the server has dropped one of them.
        let start = Instant::now();
        let mut s = TcpStream::connect(addr).expect("connect");
        s.write_all(b"GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            .expect("send");
        let (text, _) = read_until_closed(s, Duration::from_secs(8));
        drop(idle);
        (text, start.elapsed())
    })
    .await
    .expect("client");
    let (text, elapsed) = waited;
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(
        elapsed >= Duration::from_millis(900),
        "served at once ({elapsed:?}) although both slots were taken"
    );
}
