//! A recording HTTP/1.1 pass-through proxy, so a scenario can see the headers atc
//! really sends (QwenPaw's GET of a task record ignores `X-Agent-Id`, so the server
//! alone cannot tell whether `--target-agent` was honoured), and can lose the answer to
//! a POST the server did act on (`drop_next_posts`): the fault exactly-once is about.
//! Each request keeps when it arrived (`at`), so a scenario can count and time polls.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::R;

#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    /// Lower-cased names.
    pub headers: Vec<(String, String)>,
    pub body: String,
    pub status: u16,
    /// When its request line arrived.
    pub at: Instant,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

pub struct Proxy {
    pub port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
    /// POSTs still to forward and then answer by closing the connection.
    drops: Arc<AtomicUsize>,
}

impl Proxy {
    pub fn start(upstream_port: u16) -> R<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("proxy bind: {e}"))?;
        let port = listener.local_addr().map_err(|e| e.to_string())?.port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let drops = Arc::new(AtomicUsize::new(0));
        let (log, to_drop) = (Arc::clone(&seen), Arc::clone(&drops));
        // The accept thread lives until the process ends; it holds no process.
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let (log, to_drop) = (Arc::clone(&log), Arc::clone(&to_drop));
                std::thread::spawn(move || {
                    let _ = serve(conn, upstream_port, &log, &to_drop);
                });
            }
        });
        Ok(Proxy { port, seen, drops })
    }

    /// The next `n` POSTs reach the server, which acts on them; their answers are lost
    /// (the client's connection is closed instead).
    pub fn drop_next_posts(&self, n: usize) {
        self.drops.store(n, Ordering::SeqCst);
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The POSTs seen so far (atc's deliveries), in order.
    pub fn posts(&self) -> Vec<Seen> {
        self.seen()
            .into_iter()
            .filter(|r| r.method == "POST")
            .collect()
    }
}

/// One request per client connection: forwarded with `Connection: close`, the
/// upstream answer passed back verbatim (it carries `connection: close`), then closed.
fn serve(
    client: TcpStream,
    upstream_port: u16,
    log: &Mutex<Vec<Seen>>,
    drops: &AtomicUsize,
) -> io::Result<()> {
    client.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut reader = BufReader::new(client.try_clone()?);
    let mut request_line = String::new();
    if reader.read_line(&mut request_line)? == 0 {
        return Ok(());
    }
    let at = Instant::now();
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line)?;
        let line = line.trim_end_matches(['\r', '\n']);
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; len];
    reader.read_exact(&mut body)?;

    let mut parts = request_line.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let path = parts.next().unwrap_or("").to_string();

    let mut upstream = TcpStream::connect(("127.0.0.1", upstream_port))?;
    upstream.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut head = format!("{method} {path} HTTP/1.1\r\n");
    for (k, v) in &headers {
        if k != "connection" && k != "host" {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
    }
    head.push_str(&format!(
        "host: 127.0.0.1:{upstream_port}\r\nconnection: close\r\n\r\n"
    ));
    upstream.write_all(head.as_bytes())?;
    upstream.write_all(&body)?;
    let mut answer = Vec::new();
    upstream.read_to_end(&mut answer)?;
    let status = String::from_utf8_lossy(&answer)
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let is_post = method == "POST";
    log.lock().unwrap_or_else(|e| e.into_inner()).push(Seen {
        method,
        path,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
        status,
        at,
    });
    let drop_it = is_post
        && drops
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
    if drop_it {
        let _ = client.shutdown(std::net::Shutdown::Both);
        return Ok(());
    }
    // Make sure the client does not keep this connection for a next request.
    if let Some(end) = answer.windows(4).position(|w| w == b"\r\n\r\n") {
        let head = String::from_utf8_lossy(&answer[..end]).to_ascii_lowercase();
        if !head.contains("\r\nconnection:") {
            answer.splice(end + 2..end + 2, b"connection: close\r\n".iter().copied());
        }
    }
    let mut client = client;
    client.write_all(&answer)?;
    client.flush()?;
    let _ = client.shutdown(std::net::Shutdown::Both);
    Ok(())
}
