//! A fault-injecting TCP proxy on loopback in front of a store server: 503s, connections
//! cut mid-body, or chosen requests denied. Included as `#[path = "common/proxy.rs"] mod
//! proxy;` beside `#[path = "common/remote.rs"] mod remote;`.
#![allow(dead_code)]

use super::remote::{text, COMMAND_LIMIT};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the proxy does to the first `faults` connections.
#[derive(Clone, Copy)]
pub enum Fault {
    /// Answer 503 SlowDown without asking the server.
    Unavailable,
    /// Forward, but close the connection after this many response bytes.
    CutAfter(usize),
    /// Answer this status (403 AccessDenied, 404 NoSuchKey) to every request whose head
    /// holds this text (faults not counted); forward the others.
    Deny(&'static str, u16),
    /// Answer 503 SlowDown to a connection's first request when its head holds this text
    /// (lowercase: `range: bytes=`), while faults are left; forward the others.
    UnavailableIf(&'static str),
    /// Forward every request, but answer those whose head holds this text with another
    /// ETag (one character of the server's changed): the object as if rewritten since it
    /// was listed (faults not counted).
    Rewritten(&'static str),
}

/// A fault-injecting TCP proxy on loopback in front of `upstream`; stops on drop.
pub struct Proxy {
    pub port: u16,
    stop: Arc<AtomicBool>,
}

impl Proxy {
    pub fn start(upstream: u16, fault: Fault, faults: usize) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binds");
        let port = listener.local_addr().expect("addr").port();
        listener.set_nonblocking(true).expect("nonblocking");
        let stop = Arc::new(AtomicBool::new(false));
        let left = Arc::new(AtomicUsize::new(faults));
        let st = stop.clone();
        std::thread::spawn(move || {
            let t0 = Instant::now();
            while !st.load(Ordering::Relaxed) && t0.elapsed() < COMMAND_LIMIT * 2 {
                match listener.accept() {
                    Ok((client, _)) => {
                        let left = left.clone();
                        std::thread::spawn(move || serve(client, upstream, fault, &left));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Proxy { port, stop }
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Take one of the faults left, if any.
pub fn take(left: &AtomicUsize) -> bool {
    left.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
}

/// One connection: a 503 (while faults are left), or forwarded, cut once it has carried
/// more response bytes than the cut (while faults are left: only connections that reach
/// the cut use one up).
pub fn serve(mut client: TcpStream, upstream: u16, fault: Fault, left: &AtomicUsize) {
    let _ = client.set_nonblocking(false);
    let _ = client.set_read_timeout(Some(Duration::from_secs(30)));
    if let Fault::Deny(what, _) | Fault::Rewritten(what) = fault {
        return deny(client, upstream, what, fault);
    }
    if let Fault::UnavailableIf(what) = fault {
        let head = read_head(&mut client);
        if head.is_empty() {
            return;
        }
        if !text(&head).to_ascii_lowercase().contains(what) || !take(left) {
            return forward(client, upstream, usize::MAX, left, &head);
        }
        let body = "<?xml version=\"1.0\"?><Error><Code>SlowDown</Code>\
                    <Message>Please reduce your request rate.</Message></Error>";
        let _ = write!(
            client,
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/xml\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        return;
    }
    if let Fault::Unavailable = fault {
        if !take(left) {
            return forward(client, upstream, usize::MAX, left, &[]);
        }
        // Read the request head (a body, if any, is not read), answer 503, close.
        if read_head(&mut client).is_empty() {
            return;
        }
        let body = "<?xml version=\"1.0\"?><Error><Code>SlowDown</Code>\
                    <Message>Please reduce your request rate.</Message></Error>";
        let _ = write!(
            client,
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/xml\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        return;
    }
    let cut = match fault {
        Fault::CutAfter(n) => n,
        Fault::Unavailable | Fault::Deny(..) | Fault::UnavailableIf(_) | Fault::Rewritten(_) => {
            usize::MAX
        }
    };
    forward(client, upstream, cut, left, &[]);
}

/// The `Content-Length` of a message head (0 when absent).
pub fn content_length(head: &[u8]) -> usize {
    text(head)
        .to_ascii_lowercase()
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// A whole message from `from`: its head (and the start of the body read with it), then
/// the rest of a `Content-Length` body (none for the answer to a HEAD, a 204 or a 304).
/// Empty when the peer went away first.
pub fn read_message(from: &mut TcpStream, to_head: bool) -> Vec<u8> {
    let mut msg = read_head(from);
    let Some(end) = msg.windows(4).position(|w| w == b"\r\n\r\n") else {
        return Vec::new();
    };
    let head = text(&msg[..end]);
    let bodiless = to_head || head.starts_with("HTTP/1.1 204") || head.starts_with("HTTP/1.1 304");
    let want = end
        + 4
        + if bodiless {
            0
        } else {
            content_length(&msg[..end])
        };
    let mut b = [0u8; 8192];
    while msg.len() < want {
        match from.read(&mut b) {
            Ok(0) | Err(_) => return Vec::new(),
            Ok(n) => msg.extend_from_slice(&b[..n]),
        }
    }
    msg
}

/// [`Fault::Deny`] and [`Fault::Rewritten`]: every request of the connection on its own,
/// each forwarded on a fresh server connection, or, when it holds `what`, answered with
/// the fault's status (and the connection closed), or with another ETag.
pub fn deny(mut client: TcpStream, upstream: u16, what: &str, fault: Fault) {
    loop {
        let request = read_message(&mut client, false);
        if request.is_empty() {
            return;
        }
        let end = request
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .unwrap_or(0);
        let hit = text(&request[..end]).contains(what);
        if let (true, Fault::Deny(_, status)) = (hit, fault) {
            let (code, reason) = match status {
                404 => ("NoSuchKey", "Not Found"),
                _ => ("AccessDenied", "Forbidden"),
            };
            let body = format!(
                "<?xml version=\"1.0\"?><Error><Code>{code}</Code><Message>{reason}</Message>\
                 </Error>"
            );
            let _ = write!(
                client,
                "HTTP/1.1 {status} {reason}\r\nContent-Type: application/xml\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            return;
        }
        let Ok(mut server) = TcpStream::connect(("127.0.0.1", upstream)) else {
            return;
        };
        let _ = server.set_read_timeout(Some(Duration::from_secs(30)));
        if server.write_all(&request).is_err() {
            return;
        }
        let mut response = read_message(&mut server, request.starts_with(b"HEAD "));
        if hit {
            other_etag(&mut response);
        }
        if response.is_empty() || client.write_all(&response).is_err() {
            return;
        }
    }
}

/// Change one character of the `ETag` of the response `message`'s head (its length
/// kept).
fn other_etag(message: &mut [u8]) {
    let end = message
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or(0);
    let head = text(&message[..end]).to_ascii_lowercase();
    let Some(at) = head.find("\r\netag:") else {
        return;
    };
    let value = at + "\r\netag:".len();
    if let Some(i) = (value..end).find(|&i| message[i].is_ascii_alphanumeric()) {
        message[i] = if message[i] == b'0' { b'1' } else { b'0' };
    }
}

/// The bytes of a request up to the end of its head (more may follow: the start of the
/// body); empty when the client went away first.
pub fn read_head(client: &mut TcpStream) -> Vec<u8> {
    let mut head = Vec::new();
    let mut b = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 1 << 16 {
        match client.read(&mut b) {
            Ok(0) | Err(_) => return Vec::new(),
            Ok(n) => head.extend_from_slice(&b[..n]),
        }
    }
    head
}

/// Forward the connection (after `sent_first`, bytes already read from the client).
pub fn forward(
    mut client: TcpStream,
    upstream: u16,
    cut: usize,
    left: &AtomicUsize,
    sent_first: &[u8],
) {
    let Ok(mut server) = TcpStream::connect(("127.0.0.1", upstream)) else {
        return;
    };
    if server.write_all(sent_first).is_err() {
        return;
    }
    let _ = server.set_read_timeout(Some(Duration::from_secs(30)));
    let (Ok(mut c2), Ok(mut s2)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    let up = std::thread::spawn(move || {
        let _ = std::io::copy(&mut c2, &mut s2);
        let _ = s2.shutdown(std::net::Shutdown::Write);
    });
    let mut cut = cut;
    let mut sent = 0usize;
    let mut b = [0u8; 8192];
    loop {
        match server.read(&mut b) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if sent + n > cut && !take(left) {
                    cut = usize::MAX;
                }
                let n = n.min(cut - sent);
                if client.write_all(&b[..n]).is_err() {
                    break;
                }
                sent += n;
                if sent >= cut {
                    break;
                }
            }
        }
    }
    let _ = client.shutdown(std::net::Shutdown::Both);
    let _ = server.shutdown(std::net::Shutdown::Both);
    let _ = up.join();
}
